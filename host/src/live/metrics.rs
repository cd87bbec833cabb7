//! Metrics with kube-scheduler's names and labels, plus the Wasm plugins' counters, in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use crate::framework::metrics::PluginMetrics;
use crate::framework::CycleTrace;
use crate::framework::{Code, PodInfo};
use crate::queue::QueueName;
use crate::scheduler::{AttemptResult, Observer};

/// Upper bounds of a histogram's buckets: `count` bounds from `start`, each `factor` times the last.
type Buckets = (f64, f64, i32);

/// Upstream's buckets for attempt and extension-point latency: from 1 ms, doubling, 15 buckets.
const CYCLE_BUCKETS: Buckets = (0.001, 2.0, 15);

/// Upstream's buckets for one plugin call: from 10 µs, ×1.5, 20 buckets.
const PLUGIN_BUCKETS: Buckets = (0.00001, 1.5, 20);

fn bounds((start, factor, count): Buckets) -> impl Iterator<Item = f64> {
    (0..count).map(move |i| start * factor.powi(i))
}

struct Histogram {
    buckets: Buckets,
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::with(CYCLE_BUCKETS)
    }
}

impl Histogram {
    fn with(buckets: Buckets) -> Self {
        Histogram { buckets, counts: vec![0; buckets.2 as usize], sum: 0.0, count: 0 }
    }

    fn observe(&mut self, v: f64) {
        for (i, le) in bounds(self.buckets).enumerate() {
            if v <= le {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, le) in bounds(self.buckets).enumerate() {
            let c = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

#[derive(Default)]
struct Inner {
    attempts: BTreeMap<(String, String), u64>,
    attempt_duration: BTreeMap<(String, String), Histogram>,
    extension_points: BTreeMap<(String, String, String), Histogram>,
    /// By plugin, then (extension point, status): looked up by `&str`, so an observation allocates only the first
    /// time a plugin is seen (a sampled preemption cycle can time tens of thousands of Filter calls).
    plugins: BTreeMap<String, BTreeMap<(&'static str, &'static str), Histogram>>,
    preemption_victims: u64,
}

/// Collects what the scheduler reports and renders it for `/metrics`.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl PluginMetrics for Metrics {
    fn plugin_execution(&self, plugin: &str, point: &'static str, status: Code, d: Duration) {
        let mut m = self.inner.lock().expect("metrics lock");
        if !m.plugins.contains_key(plugin) {
            m.plugins.insert(plugin.to_string(), BTreeMap::new());
        }
        let per_point = m.plugins.get_mut(plugin).expect("inserted above");
        per_point
            .entry((point, status.as_str()))
            .or_insert_with(|| Histogram::with(PLUGIN_BUCKETS))
            .observe(d.as_secs_f64());
    }
}

impl Observer for Metrics {
    fn attempt(&self, profile: &str, _pod: &PodInfo, result: &AttemptResult, d: Duration, _t: Option<CycleTrace>) {
        let mut m = self.inner.lock().expect("metrics lock");
        let key = (result.label().to_string(), profile.to_string());
        *m.attempts.entry(key.clone()).or_insert(0) += 1;
        m.attempt_duration.entry(key).or_default().observe(d.as_secs_f64());
    }

    fn preempted(&self, _victim: &PodInfo, _preemptor: &PodInfo, _node: &str) {
        self.inner.lock().expect("metrics lock").preemption_victims += 1;
    }

    fn extension_point(&self, profile: &str, point: &'static str, status: Code, d: Duration) {
        let mut m = self.inner.lock().expect("metrics lock");
        m.extension_points
            .entry((point.to_string(), status.as_str().to_string(), profile.to_string()))
            .or_default()
            .observe(d.as_secs_f64());
    }
}

impl Metrics {
    /// Prometheus text exposition, with the queue's pending pods given by the caller.
    pub fn render(&self, pending: &std::collections::HashMap<QueueName, usize>) -> String {
        let m = self.inner.lock().expect("metrics lock");
        let mut out = String::new();
        out.push_str("# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.\n# TYPE scheduler_schedule_attempts_total counter\n");
        for ((result, profile), n) in &m.attempts {
            let _ = writeln!(out, "scheduler_schedule_attempts_total{{profile=\"{profile}\",result=\"{result}\"}} {n}");
        }
        out.push_str("# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency in seconds.\n# TYPE scheduler_scheduling_attempt_duration_seconds histogram\n");
        for ((result, profile), h) in &m.attempt_duration {
            h.render(
                &mut out,
                "scheduler_scheduling_attempt_duration_seconds",
                &format!("profile=\"{profile}\",result=\"{result}\""),
            );
        }
        out.push_str("# HELP scheduler_framework_extension_point_duration_seconds Latency for running all plugins of a specific extension point.\n# TYPE scheduler_framework_extension_point_duration_seconds histogram\n");
        for ((point, status, profile), h) in &m.extension_points {
            h.render(
                &mut out,
                "scheduler_framework_extension_point_duration_seconds",
                &format!("extension_point=\"{point}\",profile=\"{profile}\",status=\"{status}\""),
            );
        }
        out.push_str("# HELP scheduler_plugin_execution_duration_seconds Duration for running a plugin at a specific extension point (sampled cycles; Filter and Score per batch of nodes, status Error if any node's is).\n# TYPE scheduler_plugin_execution_duration_seconds histogram\n");
        for (plugin, per_point) in &m.plugins {
            for ((point, status), h) in per_point {
                h.render(
                    &mut out,
                    "scheduler_plugin_execution_duration_seconds",
                    &format!("extension_point=\"{point}\",plugin=\"{plugin}\",status=\"{status}\""),
                );
            }
        }
        out.push_str("# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n# TYPE scheduler_pending_pods gauge\n");
        for q in [QueueName::Active, QueueName::Backoff, QueueName::Unschedulable, QueueName::Gated] {
            let _ = writeln!(
                out,
                "scheduler_pending_pods{{queue=\"{}\"}} {}",
                q.as_str(),
                pending.get(&q).copied().unwrap_or(0)
            );
        }
        out.push_str("# HELP scheduler_preemption_victims Number of selected preemption victims.\n# TYPE scheduler_preemption_victims counter\n");
        let _ = writeln!(out, "scheduler_preemption_victims {}", m.preemption_victims);
        let plugins = crate::wasm::loaded_plugins();
        for (name, help, get) in [
            (
                "kws_wasm_plugin_loads_total",
                "Wasm plugin versions loaded.",
                (|s: &crate::wasm::WasmStats| s.loads.load(Ordering::Relaxed)) as fn(&crate::wasm::WasmStats) -> u64,
            ),
            ("kws_wasm_plugin_reloads_total", "Wasm plugin hot reloads.", |s| s.reloads.load(Ordering::Relaxed)),
            ("kws_wasm_plugin_reload_failures_total", "Refused Wasm plugin replacements.", |s| {
                s.reload_failures.load(Ordering::Relaxed)
            }),
            ("kws_wasm_plugin_traps_total", "Wasm plugin calls that trapped.", |s| s.traps.load(Ordering::Relaxed)),
            ("kws_wasm_plugin_timeouts_total", "Wasm plugin calls past their deadline.", |s| {
                s.timeouts.load(Ordering::Relaxed)
            }),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for p in &plugins {
                let _ =
                    writeln!(out, "{name}{{plugin=\"{}\"}} {}", crate::framework::Plugin::name(&**p), get(&p.stats));
            }
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
