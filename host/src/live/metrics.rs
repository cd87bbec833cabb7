//! kube-scheduler's metrics (`pkg/scheduler/metrics/metrics.go`, v1.34) with upstream's names, types, labels,
//! buckets and stability-tagged help, plus the Wasm plugins' counters, in Prometheus text format (0.0.4) through
//! the `prometheus` client crate.
//!
//! Families fed as things happen live in a [`Registry`]; families upstream keeps as gauges of the scheduler's
//! state (pending pods) are read when `/metrics` is scraped and encoded beside them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{exponential_buckets, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};
use thiserror::Error;

use crate::framework::metrics::PluginMetrics;
use crate::framework::CycleTrace;
use crate::framework::{Code, PodInfo};
use crate::queue::QueueName;
use crate::scheduler::{AttemptResult, Observer};

/// The metric families could not be created or registered (a bug: they are constants).
#[derive(Debug, Error)]
pub enum MetricsError {
    /// The client crate refused a family (bad name, labels or buckets, or a duplicate).
    #[error("metric family {name}: {source}")]
    Family {
        /// The family's name.
        name: &'static str,
        /// Why.
        #[source]
        source: prometheus::Error,
    },
}

/// Upstream's `ExponentialBuckets(start, factor, count)`.
type Buckets = (f64, f64, usize);

/// `scheduling_attempt_duration_seconds`: from 1 ms, doubling, 15 buckets.
const ATTEMPT_BUCKETS: Buckets = (0.001, 2.0, 15);
/// `framework_extension_point_duration_seconds`: from 0.1 ms, doubling, 12 buckets.
const EXTENSION_POINT_BUCKETS: Buckets = (0.0001, 2.0, 12);
/// `plugin_execution_duration_seconds`: from 10 µs, ×1.5, 20 buckets.
const PLUGIN_BUCKETS: Buckets = (0.00001, 1.5, 20);

/// A counter family; `labels` in the order values are passed.
fn counter_vec(r: &Registry, name: &'static str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
    let family = |source| MetricsError::Family { name, source };
    let c = IntCounterVec::new(Opts::new(name, help), labels).map_err(family)?;
    r.register(Box::new(c.clone())).map_err(family)?;
    Ok(c)
}

/// A histogram family with upstream's exponential buckets; `labels` in the order values are passed.
fn histogram_vec(
    r: &Registry,
    name: &'static str,
    help: &str,
    (start, factor, count): Buckets,
    labels: &[&str],
) -> Result<HistogramVec, MetricsError> {
    let family = |source| MetricsError::Family { name, source };
    let buckets = exponential_buckets(start, factor, count).map_err(family)?;
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).map_err(family)?;
    r.register(Box::new(h.clone())).map_err(family)?;
    Ok(h)
}

/// Collects what the scheduler reports and renders it for `/metrics`.
///
/// Label values are hashed by the client crate as one concatenated string, so in every family the labels with
/// values from a fixed vocabulary (result, extension point, status) are passed first and the free-form one
/// (profile, plugin name) last: two different label sets can then never concatenate alike.
pub struct Metrics {
    registry: Registry,
    /// `scheduler_schedule_attempts_total{result,profile}`.
    schedule_attempts: IntCounterVec,
    /// `scheduler_scheduling_attempt_duration_seconds{result,profile}`.
    attempt_duration: HistogramVec,
    /// `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`.
    extension_point_duration: HistogramVec,
    /// `scheduler_plugin_execution_duration_seconds{extension_point,status,plugin}` (sampled cycles; Filter and
    /// Score are timed per batch of nodes, with status Error if any node's is).
    plugin_execution_duration: HistogramVec,
    /// `scheduler_preemption_victims`, until it becomes upstream's histogram.
    preemption_victims: IntCounterVec,
}

impl Metrics {
    /// Creates and registers every family.
    pub fn new() -> Result<Metrics, MetricsError> {
        let r = Registry::new();
        Ok(Metrics {
            schedule_attempts: counter_vec(
                &r,
                "scheduler_schedule_attempts_total",
                "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            )?,
            attempt_duration: histogram_vec(
                &r,
                "scheduler_scheduling_attempt_duration_seconds",
                "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                ATTEMPT_BUCKETS,
                &["result", "profile"],
            )?,
            extension_point_duration: histogram_vec(
                &r,
                "scheduler_framework_extension_point_duration_seconds",
                "[STABLE] Latency for running all plugins of a specific extension point.",
                EXTENSION_POINT_BUCKETS,
                &["extension_point", "status", "profile"],
            )?,
            plugin_execution_duration: histogram_vec(
                &r,
                "scheduler_plugin_execution_duration_seconds",
                "[ALPHA] Duration for running a plugin at a specific extension point.",
                PLUGIN_BUCKETS,
                &["extension_point", "status", "plugin"],
            )?,
            preemption_victims: counter_vec(
                &r,
                "scheduler_preemption_victims",
                "Number of selected preemption victims.",
                &[],
            )?,
            registry: r,
        })
    }
}

impl Default for Metrics {
    fn default() -> Self {
        // The families are constants; the unit tests register them all.
        Metrics::new().expect("scheduler metric families register")
    }
}

impl PluginMetrics for Metrics {
    fn plugin_execution(&self, plugin: &str, point: &'static str, status: Code, d: Duration) {
        self.plugin_execution_duration.with_label_values(&[point, status.as_str(), plugin]).observe(d.as_secs_f64());
    }
}

impl Observer for Metrics {
    fn attempt(&self, profile: &str, pod: &PodInfo, result: &AttemptResult, d: Duration, _t: Option<CycleTrace>) {
        let labels = [result.label(), profile];
        self.schedule_attempts.with_label_values(&labels).inc();
        self.attempt_duration.with_label_values(&labels).observe(d.as_secs_f64());
        match result {
            AttemptResult::Scheduled(node) => tracing::info!(pod = %pod.key(), node = %node, profile, "scheduled"),
            AttemptResult::Unschedulable(msg) => tracing::info!(pod = %pod.key(), profile, "unschedulable: {msg}"),
            AttemptResult::Error(msg) => tracing::warn!(pod = %pod.key(), profile, "scheduling error: {msg}"),
        }
    }

    fn preempted(&self, victim: &PodInfo, preemptor: &PodInfo, node: &str) {
        self.preemption_victims.with_label_values(&[] as &[&str]).inc();
        tracing::info!(victim = %victim.key(), preemptor = %preemptor.key(), node, "preempted");
    }

    fn extension_point(&self, profile: &str, point: &'static str, status: Code, d: Duration) {
        self.extension_point_duration.with_label_values(&[point, status.as_str(), profile]).observe(d.as_secs_f64());
    }
}

/// One sample of a family read at scrape time: its labels and its value.
type Sample = (Vec<(&'static str, String)>, f64);

/// A counter or gauge family built from values read at scrape time (Go's const metrics).
fn scraped(name: &str, help: &str, kind: MetricType, samples: Vec<Sample>) -> MetricFamily {
    let metrics = samples
        .into_iter()
        .map(|(labels, value)| {
            let mut m = proto::Metric::default();
            m.set_label(
                labels
                    .into_iter()
                    .map(|(n, v)| {
                        let mut l = proto::LabelPair::default();
                        l.set_name(n.to_string());
                        l.set_value(v);
                        l
                    })
                    .collect(),
            );
            if kind == MetricType::COUNTER {
                let mut c = proto::Counter::default();
                c.set_value(value);
                m.set_counter(c);
            } else {
                let mut g = proto::Gauge::default();
                g.set_value(value);
                m.set_gauge(g);
            }
            m
        })
        .collect();
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(kind);
    f.set_metric(metrics);
    f
}

/// `scheduler_pending_pods{queue}`, every queue present even when empty.
fn pending_pods(pending: &HashMap<QueueName, usize>) -> MetricFamily {
    let samples = [QueueName::Active, QueueName::Backoff, QueueName::Unschedulable, QueueName::Gated]
        .into_iter()
        .map(|q| (vec![("queue", q.as_str().to_string())], pending.get(&q).copied().unwrap_or(0) as f64))
        .collect();
    scraped(
        "scheduler_pending_pods",
        "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
        MetricType::GAUGE,
        samples,
    )
}

/// The Wasm plugins' counters (`kws_wasm_plugin_*_total{plugin}`).
fn wasm_plugins() -> Vec<MetricFamily> {
    type Get = fn(&crate::wasm::WasmStats) -> u64;
    let plugins = crate::wasm::loaded_plugins();
    let families: [(&str, &str, Get); 5] = [
        ("kws_wasm_plugin_loads_total", "Wasm plugin versions loaded.", |s| s.loads.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_reloads_total", "Wasm plugin hot reloads.", |s| s.reloads.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_reload_failures_total", "Refused Wasm plugin replacements.", |s| {
            s.reload_failures.load(Ordering::Relaxed)
        }),
        ("kws_wasm_plugin_traps_total", "Wasm plugin calls that trapped.", |s| s.traps.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_timeouts_total", "Wasm plugin calls past their deadline.", |s| {
            s.timeouts.load(Ordering::Relaxed)
        }),
    ];
    families
        .into_iter()
        .map(|(name, help, get)| {
            let samples = plugins
                .iter()
                .map(|p| (vec![("plugin", crate::framework::Plugin::name(&**p).to_string())], get(&p.stats) as f64))
                .collect();
            scraped(name, help, MetricType::COUNTER, samples)
        })
        .collect()
}

impl Metrics {
    /// Prometheus text exposition, with the queue's pending pods given by the caller.
    pub fn render(&self, pending: &HashMap<QueueName, usize>) -> String {
        let mut extra = wasm_plugins();
        extra.push(pending_pods(pending));
        self.encode(extra)
    }

    /// The registered families and `extra` (read at scrape time), sorted by name as the Go client writes them.
    fn encode(&self, extra: Vec<MetricFamily>) -> String {
        let mut families = self.registry.gather();
        // Families without samples are left out, as the registry leaves out its own.
        families.extend(extra.into_iter().filter(|f| !f.get_metric().is_empty()));
        families.sort_by(|a, b| a.name().cmp(b.name()));
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&families, &mut out) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_durations_render_with_upstream_names_labels_and_buckets() {
        let m = Metrics::default();
        m.plugin_execution("PriorityLabel", "Filter", Code::Success, Duration::from_micros(20));
        m.plugin_execution("PriorityLabel", "Filter", Code::Success, Duration::from_millis(3));
        m.plugin_execution("NodeAffinity", "Score", Code::Error, Duration::from_micros(5));
        let out = m.render(&Default::default());
        let series = |labels: &str, suffix: &str| -> Vec<String> {
            let prefix = format!("scheduler_plugin_execution_duration_seconds_{suffix}{{{labels}");
            out.lines().filter(|l| l.starts_with(&prefix)).map(str::to_string).collect()
        };
        let pl = r#"extension_point="Filter",plugin="PriorityLabel",status="Success""#;
        assert_eq!(series(pl, "count"), [format!("scheduler_plugin_execution_duration_seconds_count{{{pl}}} 2")]);
        let buckets = series(pl, "bucket");
        assert_eq!(buckets.len(), 21, "20 bounds from 10 µs, ×1.5, and +Inf");
        // 20 µs lands in the third bucket (≤ 22.5 µs) and above; 3 ms only from the bucket bounded by 4.4 ms up.
        let counts: Vec<u64> = buckets.iter().map(|l| l.rsplit(' ').next().unwrap().parse().unwrap()).collect();
        assert_eq!(&counts[..3], [0, 0, 1]);
        assert_eq!(counts.iter().position(|&c| c == 2), Some(15));
        assert!(buckets[0].contains(r#"le="0.00001""#), "{}", buckets[0]);
        let na = r#"extension_point="Score",plugin="NodeAffinity",status="Error""#;
        assert_eq!(series(na, "count").len(), 1);
        assert!(out.contains("# TYPE scheduler_plugin_execution_duration_seconds histogram"));
    }
}
