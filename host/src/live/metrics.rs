//! kube-scheduler's metrics (`pkg/scheduler/metrics/metrics.go`, v1.37) with upstream's names, types, labels,
//! buckets and stability-tagged help, plus the Wasm plugins' counters, in Prometheus text format (0.0.4) through
//! the `prometheus` client crate.
//!
//! Families fed as things happen live in a [`Registry`]; the gauges upstream keeps of the scheduler's state
//! (pending pods, cache size, unschedulable pods, binding goroutines) are read from the scheduler when `/metrics`
//! is scraped ([`SchedulerState`]) and encoded beside them, which gives the same numbers without a hook on every
//! change.
//!
//! Registered only with their gates, as upstream: the PodGroup cycle's families (`scheduler_podgroup_*`,
//! GenericWorkload), the DRA binding-condition families (`scheduler_dra_bindingconditions_*`,
//! DRADeviceBindingConditions, on by default) and the asynchronous preemption's (`scheduler_preemption_goroutines_*`,
//! SchedulerAsyncPreemption, on by default).
//!
//! Left out of v1.37's list: the placement and workload families (`scheduler_placement_*`,
//! `scheduler_generated_placements_total`, `scheduler_workload_preemption_*`, `scheduler_preemption_workload_*`: no
//! placement generation here, and workload-aware preemption does not feed them yet), `type="pod_group"` series of `scheduler_queued_entities`
//! and `scheduler_queue_incoming_entities_total` (a PodGroup's pods are queued one by one, so both count pods),
//! `scheduler_pre_queueing_hint_evaluations_total` (SchedulerPreQueueingHints is alpha and off),
//! `scheduler_preemption_evaluation_duration_seconds`, `scheduler_preemption_execution_duration_seconds` and
//! `scheduler_preemption_pdb_violations_total` (not fed yet), `scheduler_event_handling_duration_seconds` and
//! `scheduler_plugin_evaluation_total` (not fed yet: the second needs a count on every plugin call of every cycle,
//! not only sampled ones), `scheduler_queueing_hint_execution_duration_seconds` and `scheduler_inflight_events` (not fed),
//! the `scheduler_*async_api_call*` families (API calls are not dispatched asynchronously), `scheduler_goroutines`
//! for operations other than binding (Filter and Score run on a thread pool, not goroutines), the volume binder's
//! families and component-base's process, Go runtime and REST client families.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry, TextEncoder,
};
use thiserror::Error;

use crate::framework::metrics::{DraMetrics, PluginMetrics};
use crate::framework::CycleTrace;
use crate::framework::{Code, PodInfo};
use crate::queue::{QueueName, QueueObserver};
use crate::scheduler::{AttemptResult, Observer, Scheduler};

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

/// Attempt, algorithm and permit-wait latency: from 1 ms, doubling, 15 buckets.
const LATENCY_BUCKETS: Buckets = (0.001, 2.0, 15);
/// `framework_extension_point_duration_seconds`: from 0.1 ms, doubling, 12 buckets.
const EXTENSION_POINT_BUCKETS: Buckets = (0.0001, 2.0, 12);
/// `plugin_execution_duration_seconds`: from 10 µs, ×1.5, 20 buckets.
const PLUGIN_BUCKETS: Buckets = (0.00001, 1.5, 20);
/// `preemption_victims`: 1 to 64, doubling (more than 64 victims is rare enough for one bucket).
const VICTIM_BUCKETS: Buckets = (1.0, 2.0, 7);
/// `pod_scheduling_sli_duration_seconds`: from 10 ms, doubling, 20 buckets (the last from about 88 minutes).
const SLI_BUCKETS: Buckets = (0.01, 2.0, 20);
/// The OpportunisticBatching latencies (`get_node_hint_duration_seconds`, `store_schedule_results_duration_seconds`,
/// `batch_rescore_duration_seconds`): from 10 µs, doubling, 12 buckets.
const BATCH_BUCKETS: Buckets = (0.00001, 2.0, 12);
/// `dra_bindingconditions_wait_duration_seconds`: from 0.1 s, doubling, 14 buckets.
const DRA_WAIT_BUCKETS: Buckets = (0.1, 2.0, 14);
/// `preemption_goroutines_duration_seconds`: from 10 ms, doubling, 20 buckets.
const PREEMPTION_GOROUTINE_BUCKETS: Buckets = (0.01, 2.0, 20);
/// `pod_scheduling_attempts`: 1 to 16, doubling.
const ATTEMPTS_BUCKETS: Buckets = (1.0, 2.0, 5);

/// Upstream caps the `attempts` label of the SLI histogram here, so its cardinality stays bounded.
const MAX_ATTEMPTS_LABEL: u32 = 15;

/// Registers families in one registry, naming the family in any error.
struct Families<'a>(&'a Registry);

impl Families<'_> {
    fn register<C: prometheus::core::Collector + Clone + 'static>(
        &self,
        name: &'static str,
        made: prometheus::Result<C>,
    ) -> Result<C, MetricsError> {
        let family = |source| MetricsError::Family { name, source };
        let c = made.map_err(family)?;
        self.0.register(Box::new(c.clone())).map_err(family)?;
        Ok(c)
    }

    fn counter(&self, name: &'static str, help: &str) -> Result<IntCounter, MetricsError> {
        self.register(name, IntCounter::new(name, help))
    }

    /// `labels` in the order values are passed (see [`Metrics`] on that order).
    fn counter_vec(&self, name: &'static str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
        self.register(name, IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn histogram_opts(
        name: &'static str,
        help: &str,
        (start, factor, count): Buckets,
    ) -> prometheus::Result<HistogramOpts> {
        Ok(HistogramOpts::new(name, help).buckets(exponential_buckets(start, factor, count)?))
    }

    fn histogram(&self, name: &'static str, help: &str, buckets: Buckets) -> Result<Histogram, MetricsError> {
        self.register(name, Self::histogram_opts(name, help, buckets).and_then(Histogram::with_opts))
    }

    fn histogram_vec(
        &self,
        name: &'static str,
        help: &str,
        buckets: Buckets,
        labels: &[&str],
    ) -> Result<HistogramVec, MetricsError> {
        self.register(name, Self::histogram_opts(name, help, buckets).and_then(|o| HistogramVec::new(o, labels)))
    }
}

/// Collects what the scheduler and its queue report, and renders it with the scheduler's state for `/metrics`.
///
/// The client crate keys a family's series by a hash of its label values written one after another, so every
/// family here takes the labels with values from a fixed vocabulary (result, extension point, status, queue,
/// event) first and the one free-form value (profile or plugin name) last: two different label sets can then
/// never run together into the same string. The text output orders labels by name either way.
pub struct Metrics {
    registry: Registry,
    /// `scheduler_schedule_attempts_total{result,profile}`.
    schedule_attempts: IntCounterVec,
    /// `scheduler_scheduling_attempt_duration_seconds{result,profile}`.
    attempt_duration: HistogramVec,
    /// `scheduler_scheduling_algorithm_duration_seconds`.
    algorithm_duration: Histogram,
    /// `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`.
    extension_point_duration: HistogramVec,
    /// `scheduler_plugin_execution_duration_seconds{extension_point,status,plugin}`, in sampled cycles; Filter and
    /// Score are timed per batch of nodes, with status Error if any node's is.
    plugin_execution_duration: HistogramVec,
    /// `scheduler_preemption_attempts_total`.
    preemption_attempts: IntCounter,
    /// `scheduler_preemption_victims`.
    preemption_victims: Histogram,
    /// `scheduler_pod_scheduling_sli_duration_seconds{attempts}`.
    pod_scheduling_sli_duration: HistogramVec,
    /// `scheduler_pod_scheduling_attempts`.
    pod_scheduling_attempts: Histogram,
    /// `scheduler_queue_incoming_pods_total{queue,event}`.
    queue_incoming_pods: IntCounterVec,
    /// `scheduler_permit_wait_duration_seconds{result}`.
    permit_wait_duration: HistogramVec,
    /// `scheduler_queue_incoming_entities_total{queue,event,type}`: every entity here is a pod.
    queue_incoming_entities: IntCounterVec,
    /// `scheduler_pod_scheduled_after_flush_total`.
    pod_scheduled_after_flush: IntCounter,
    /// `scheduler_batch_attempts_total{result,profile}`.
    batch_attempts: IntCounterVec,
    /// `scheduler_batch_cache_flushed_total{reason,profile}`.
    batch_cache_flushed: IntCounterVec,
    /// `scheduler_batch_rescore_attempts_total{profile}`.
    batch_rescore_attempts: IntCounterVec,
    /// `scheduler_batch_rescore_duration_seconds{profile}`.
    batch_rescore_duration: HistogramVec,
    /// `scheduler_get_node_hint_duration_seconds{hinted,profile}`.
    get_node_hint_duration: HistogramVec,
    /// `scheduler_store_schedule_results_duration_seconds{profile}`.
    store_schedule_results_duration: HistogramVec,
    /// (plugin, profile) pairs ever seen in `scheduler_unschedulable_pods`: upstream's gauge keeps a series at 0
    /// once its pods are gone, so this one does too.
    unschedulable_seen: Mutex<BTreeSet<(String, String)>>,
    /// The PodGroup cycle's families, registered only with the GenericWorkload gate (as upstream's).
    pod_groups: std::sync::OnceLock<PodGroupFamilies>,
    /// The binding-condition families, registered only with the DRADeviceBindingConditions gate (as upstream's).
    dra: std::sync::OnceLock<DraFamilies>,
    /// The asynchronous preemption's families, registered only with the SchedulerAsyncPreemption gate.
    preemption_goroutines: std::sync::OnceLock<PreemptionGoroutineFamilies>,
}

/// `scheduler_preemption_goroutines_*`: the asynchronous preemptions' deletions.
struct PreemptionGoroutineFamilies {
    /// `scheduler_preemption_goroutines_duration_seconds{result}`.
    duration: HistogramVec,
    /// `scheduler_preemption_goroutines_execution_total{result}`.
    executions: IntCounterVec,
}

/// `scheduler_dra_bindingconditions_*`: what DynamicResources' PreBind waited for.
struct DraFamilies {
    /// `scheduler_dra_bindingconditions_allocations_total{profile,driver,status}`.
    allocations: IntCounterVec,
    /// `scheduler_dra_bindingconditions_wait_duration_seconds{profile,driver,status}`.
    wait_duration: HistogramVec,
}

/// `scheduler_podgroup_*`: what the PodGroup cycle reports.
struct PodGroupFamilies {
    /// `scheduler_podgroup_schedule_attempts_total{result,profile}`.
    attempts: IntCounterVec,
    /// `scheduler_podgroup_scheduling_attempt_duration_seconds{result,profile}`.
    attempt_duration: HistogramVec,
    /// `scheduler_podgroup_scheduling_algorithm_duration_seconds`.
    algorithm_duration: Histogram,
}

impl Metrics {
    /// Creates and registers every family fed as things happen.
    pub fn new() -> Result<Metrics, MetricsError> {
        let registry = Registry::new();
        let f = Families(&registry);
        Ok(Metrics {
            schedule_attempts: f.counter_vec(
                "scheduler_schedule_attempts_total",
                "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            )?,
            attempt_duration: f.histogram_vec(
                "scheduler_scheduling_attempt_duration_seconds",
                "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                LATENCY_BUCKETS,
                &["result", "profile"],
            )?,
            algorithm_duration: f.histogram(
                "scheduler_scheduling_algorithm_duration_seconds",
                "[BETA] Scheduling algorithm latency in seconds",
                LATENCY_BUCKETS,
            )?,
            extension_point_duration: f.histogram_vec(
                "scheduler_framework_extension_point_duration_seconds",
                "[STABLE] Latency for running all plugins of a specific extension point.",
                EXTENSION_POINT_BUCKETS,
                &["extension_point", "status", "profile"],
            )?,
            plugin_execution_duration: f.histogram_vec(
                "scheduler_plugin_execution_duration_seconds",
                "[BETA] Duration for running a plugin at a specific extension point.",
                PLUGIN_BUCKETS,
                &["extension_point", "status", "plugin"],
            )?,
            preemption_attempts: f.counter(
                "scheduler_preemption_attempts_total",
                "[STABLE] Total preemption attempts in the cluster till now",
            )?,
            preemption_victims: f.histogram(
                "scheduler_preemption_victims",
                "[STABLE] Number of selected preemption victims for preemption initiated by a single pod",
                VICTIM_BUCKETS,
            )?,
            pod_scheduling_sli_duration: f.histogram_vec(
                "scheduler_pod_scheduling_sli_duration_seconds",
                "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
                SLI_BUCKETS,
                &["attempts"],
            )?,
            pod_scheduling_attempts: f.histogram(
                "scheduler_pod_scheduling_attempts",
                "[STABLE] Number of attempts to successfully schedule a pod.",
                ATTEMPTS_BUCKETS,
            )?,
            queue_incoming_pods: f.counter_vec(
                "scheduler_queue_incoming_pods_total",
                "[STABLE] Number of pods added to scheduling queues by event and queue type.",
                &["queue", "event"],
            )?,
            permit_wait_duration: f.histogram_vec(
                "scheduler_permit_wait_duration_seconds",
                "[BETA] Duration of waiting on permit.",
                LATENCY_BUCKETS,
                &["result"],
            )?,
            queue_incoming_entities: f.counter_vec(
                "scheduler_queue_incoming_entities_total",
                "[ALPHA] Number of scheduling entities added to scheduling queues by event, queue type, and entity type. Entity types are either 'pod' (for individual pods that are not members of any podgroup) or 'podgroup'.",
                &["queue", "event", "type"],
            )?,
            pod_scheduled_after_flush: f.counter(
                "scheduler_pod_scheduled_after_flush_total",
                "[ALPHA] Number of pods that were successfully scheduled after being flushed from unschedulableEntities due to timeout. This metric helps detect potential queueing hint misconfigurations or event handling issues.",
            )?,
            batch_attempts: f.counter_vec(
                "scheduler_batch_attempts_total",
                "[ALPHA] Counts of results when we attempt to use batching.",
                &["result", "profile"],
            )?,
            batch_cache_flushed: f.counter_vec(
                "scheduler_batch_cache_flushed_total",
                "[ALPHA] Counts of cache flushes by reason.",
                &["reason", "profile"],
            )?,
            batch_rescore_attempts: f.counter_vec(
                "scheduler_batch_rescore_attempts_total",
                "[ALPHA] Counts of rescore attempts during opportunistic batching.",
                &["profile"],
            )?,
            batch_rescore_duration: f.histogram_vec(
                "scheduler_batch_rescore_duration_seconds",
                "[ALPHA] Latency for rescoring a node during opportunistic batching.",
                BATCH_BUCKETS,
                &["profile"],
            )?,
            get_node_hint_duration: f.histogram_vec(
                "scheduler_get_node_hint_duration_seconds",
                "[ALPHA] Latency for getting a node hint.",
                BATCH_BUCKETS,
                &["hinted", "profile"],
            )?,
            store_schedule_results_duration: f.histogram_vec(
                "scheduler_store_schedule_results_duration_seconds",
                "[ALPHA] Latency for storing scheduling results.",
                BATCH_BUCKETS,
                &["profile"],
            )?,
            unschedulable_seen: Mutex::default(),
            pod_groups: std::sync::OnceLock::new(),
            dra: std::sync::OnceLock::new(),
            preemption_goroutines: std::sync::OnceLock::new(),
            registry,
        })
    }

    /// Registers the PodGroup cycle's families (`--feature-gates=GenericWorkload=true`); once is enough.
    pub fn enable_pod_groups(&self) -> Result<(), MetricsError> {
        if self.pod_groups.get().is_some() {
            return Ok(());
        }
        let f = Families(&self.registry);
        let families = PodGroupFamilies {
            attempts: f.counter_vec(
                "scheduler_podgroup_schedule_attempts_total",
                "[ALPHA] Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            )?,
            attempt_duration: f.histogram_vec(
                "scheduler_podgroup_scheduling_attempt_duration_seconds",
                "[ALPHA] Pod group scheduling attempt latency in seconds",
                LATENCY_BUCKETS,
                &["result", "profile"],
            )?,
            algorithm_duration: f.histogram(
                "scheduler_podgroup_scheduling_algorithm_duration_seconds",
                "[ALPHA] Pod group scheduling algorithm latency in seconds",
                LATENCY_BUCKETS,
            )?,
        };
        let _ = self.pod_groups.set(families);
        Ok(())
    }

    /// Registers the asynchronous preemption's families (SchedulerAsyncPreemption, on by default since v1.33);
    /// once is enough.
    pub fn enable_async_preemption(&self) -> Result<(), MetricsError> {
        if self.preemption_goroutines.get().is_some() {
            return Ok(());
        }
        let f = Families(&self.registry);
        let families = PreemptionGoroutineFamilies {
            duration: f.histogram_vec(
                "scheduler_preemption_goroutines_duration_seconds",
                "[ALPHA] (Deprecated since 1.37.0) Duration in seconds for running goroutines for the preemption.",
                PREEMPTION_GOROUTINE_BUCKETS,
                &["result"],
            )?,
            executions: f.counter_vec(
                "scheduler_preemption_goroutines_execution_total",
                "[ALPHA] Number of preemption goroutines executed.",
                &["result"],
            )?,
        };
        let _ = self.preemption_goroutines.set(families);
        Ok(())
    }

    /// Registers the binding-condition families (DRADeviceBindingConditions, on by default since v1.36); once is
    /// enough.
    pub fn enable_dra_binding_conditions(&self) -> Result<(), MetricsError> {
        if self.dra.get().is_some() {
            return Ok(());
        }
        let f = Families(&self.registry);
        let families = DraFamilies {
            allocations: f.counter_vec(
                "scheduler_dra_bindingconditions_allocations_total",
                "[ALPHA] Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
                &["profile", "driver", "status"],
            )?,
            wait_duration: f.histogram_vec(
                "scheduler_dra_bindingconditions_wait_duration_seconds",
                "[ALPHA] Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
                DRA_WAIT_BUCKETS,
                &["profile", "driver", "status"],
            )?,
        };
        let _ = self.dra.set(families);
        Ok(())
    }

    /// A PodGroup cycle ended.
    pub fn pod_group_attempt(&self, profile: &str, result: &'static str, d: Duration) {
        if let Some(f) = self.pod_groups.get() {
            f.attempts.with_label_values(&[result, profile]).inc();
            f.attempt_duration.with_label_values(&[result, profile]).observe(d.as_secs_f64());
        }
    }

    /// A PodGroup cycle's algorithm ended.
    pub fn pod_group_algorithm(&self, d: Duration) {
        if let Some(f) = self.pod_groups.get() {
            f.algorithm_duration.observe(d.as_secs_f64());
        }
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

impl crate::framework::metrics::BatchMetrics for Metrics {
    fn batch_attempt(&self, profile: &str, result: &'static str) {
        self.batch_attempts.with_label_values(&[result, profile]).inc();
    }
    fn batch_cache_flushed(&self, profile: &str, reason: &'static str) {
        self.batch_cache_flushed.with_label_values(&[reason, profile]).inc();
    }
    fn batch_rescore(&self, profile: &str, d: Duration) {
        self.batch_rescore_attempts.with_label_values(&[profile]).inc();
        self.batch_rescore_duration.with_label_values(&[profile]).observe(d.as_secs_f64());
    }
    fn get_node_hint(&self, profile: &str, hinted: bool, d: Duration) {
        let hinted = if hinted { "hint" } else { "no_hint" };
        self.get_node_hint_duration.with_label_values(&[hinted, profile]).observe(d.as_secs_f64());
    }
    fn store_schedule_results(&self, profile: &str, d: Duration) {
        self.store_schedule_results_duration.with_label_values(&[profile]).observe(d.as_secs_f64());
    }
}

impl DraMetrics for Metrics {
    fn binding_conditions_wait(&self, profile: &str, driver: &str, status: &'static str, duration: Duration) {
        if let Some(f) = self.dra.get() {
            f.wait_duration.with_label_values(&[profile, driver, status]).observe(duration.as_secs_f64());
        }
    }
    fn binding_conditions_allocation(&self, profile: &str, driver: &str, status: &'static str) {
        if let Some(f) = self.dra.get() {
            f.allocations.with_label_values(&[profile, driver, status]).inc();
        }
    }
}

impl Observer for Metrics {
    fn attempt(&self, profile: &str, _pod: &PodInfo, result: &AttemptResult, d: Duration, _t: Option<CycleTrace>) {
        let labels = [result.label(), profile];
        self.schedule_attempts.with_label_values(&labels).inc();
        self.attempt_duration.with_label_values(&labels).observe(d.as_secs_f64());
    }

    fn extension_point(&self, profile: &str, point: &'static str, status: Code, d: Duration) {
        self.extension_point_duration.with_label_values(&[point, status.as_str(), profile]).observe(d.as_secs_f64());
    }

    fn scheduling_algorithm(&self, d: Duration) {
        self.algorithm_duration.observe(d.as_secs_f64());
    }

    fn preemption_attempt(&self, victims: Option<usize>) {
        self.preemption_attempts.inc();
        if let Some(n) = victims {
            self.preemption_victims.observe(n as f64);
        }
    }

    fn preemption_goroutine(&self, failed: bool, d: Duration) {
        if let Some(f) = self.preemption_goroutines.get() {
            let result = if failed { "error" } else { "success" };
            f.duration.with_label_values(&[result]).observe(d.as_secs_f64());
            f.executions.with_label_values(&[result]).inc();
        }
    }

    fn permit_wait(&self, result: Code, d: Duration) {
        self.permit_wait_duration.with_label_values(&[result.as_str()]).observe(d.as_secs_f64());
    }

    fn pod_scheduled(&self, attempts: u32, since_queued: Option<Duration>) {
        self.pod_scheduling_attempts.observe(f64::from(attempts));
        if let Some(d) = since_queued {
            let label =
                if attempts >= MAX_ATTEMPTS_LABEL { format!("{MAX_ATTEMPTS_LABEL}+") } else { attempts.to_string() };
            self.pod_scheduling_sli_duration.with_label_values(&[label]).observe(d.as_secs_f64());
        }
    }

    fn pod_scheduled_after_flush(&self) {
        self.pod_scheduled_after_flush.inc();
    }
}

impl QueueObserver for Metrics {
    fn incoming(&self, queue: QueueName, event: &'static str) {
        // Upstream keeps gated pods in unschedulablePods, and labels their arrival so.
        let queue = match queue {
            QueueName::Gated => QueueName::Unschedulable,
            q => q,
        };
        self.queue_incoming_pods.with_label_values(&[queue.as_str(), event]).inc();
        self.queue_incoming_entities.with_label_values(&[queue.as_str(), event, "pod"]).inc();
    }
}

/// What upstream exports as gauges of the scheduler's state, read when `/metrics` is scraped.
#[derive(Debug, Default, Clone)]
pub struct SchedulerState {
    /// Pending pods per queue (`scheduler_pending_pods{queue}`).
    pub pending: HashMap<QueueName, usize>,
    /// Waiting pods per (plugin that rejected or gated them, profile) (`scheduler_unschedulable_pods`).
    pub unschedulable: BTreeMap<(String, String), usize>,
    /// Nodes in the cache (`scheduler_cache_size{type="nodes"}`).
    pub nodes: usize,
    /// Pods in the cache, assumed ones included (`scheduler_cache_size{type="pods"}`).
    pub pods: usize,
    /// Assumed pods in the cache (`scheduler_cache_size{type="assumed_pods"}`).
    pub assumed_pods: usize,
    /// Binding cycles running, each on its own thread (`scheduler_goroutines{operation="binding"}`).
    pub bindings: u64,
    /// Extender prioritize calls in flight (`scheduler_goroutines{operation="prioritizing_extender"}`).
    pub prioritizing_extenders: u64,
    /// Each extender's call counters (`kws_extender_requests_total`, `kws_extender_request_duration_seconds_total`).
    pub extender_calls: Vec<crate::extender::CallSample>,
    /// Each serving profile's comparisons with its shadow (`kws_shadow_decisions_total`).
    pub shadows: BTreeMap<String, crate::scheduler::Tally>,
}

impl SchedulerState {
    /// Reads the state, taking the queue's lock and then the cache's, one at a time.
    pub fn read(s: &Scheduler) -> SchedulerState {
        let (pending, unschedulable) = {
            let q = s.queue.lock().expect("queue lock");
            (q.pending(), q.unschedulable_plugins())
        };
        let (nodes, pods, assumed_pods) = {
            let c = s.cache.lock().expect("cache lock");
            (c.node_count(), c.pod_count(), c.assumed_pod_count())
        };
        SchedulerState {
            pending,
            unschedulable,
            nodes,
            pods,
            assumed_pods,
            bindings: s.bindings_in_flight(),
            prioritizing_extenders: s.extenders().prioritizing(),
            extender_calls: s.extenders().samples(),
            shadows: s.shadows().tallies(),
        }
    }
}

/// One sample of a family read at scrape time: its labels and its value.
type Sample = (Vec<(&'static str, String)>, f64);

/// A counter or gauge family built from values read at scrape time (the Go client's const metrics).
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

impl SchedulerState {
    /// The state's gauge families.
    fn families(&self, unschedulable_seen: &Mutex<BTreeSet<(String, String)>>) -> Vec<MetricFamily> {
        let pending = [QueueName::Active, QueueName::Backoff, QueueName::Unschedulable, QueueName::Gated]
            .into_iter()
            .map(|q| (vec![("queue", q.as_str().to_string())], self.pending.get(&q).copied().unwrap_or(0) as f64))
            .collect();
        // Without PodGroups every queued entity is a pod: the same numbers as pending_pods, under type="pod".
        let entities = [QueueName::Active, QueueName::Backoff, QueueName::Unschedulable, QueueName::Gated]
            .into_iter()
            .map(|q| {
                let n = self.pending.get(&q).copied().unwrap_or(0) as f64;
                (vec![("queue", q.as_str().to_string()), ("type", "pod".to_string())], n)
            })
            .collect();
        let cache = [("assumed_pods", self.assumed_pods), ("nodes", self.nodes), ("pods", self.pods)]
            .into_iter()
            .map(|(t, n)| (vec![("type", t.to_string())], n as f64))
            .collect();
        let unschedulable = {
            let mut seen = unschedulable_seen.lock().expect("metrics lock");
            seen.extend(self.unschedulable.keys().cloned());
            seen.iter()
                .map(|key| {
                    let n = self.unschedulable.get(key).copied().unwrap_or(0);
                    (vec![("plugin", key.0.clone()), ("profile", key.1.clone())], n as f64)
                })
                .collect()
        };
        vec![
            scraped(
                "scheduler_pending_pods",
                "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated; 'incomplete' means number of pods in incompletePodGroupPods; 'pending' means number of pods in pendingPodGroupPods.",
                MetricType::GAUGE,
                pending,
            ),
            scraped(
                "scheduler_queued_entities",
                "[ALPHA] Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods that are not members of any podgroup) by the queue type. 'active' means number of entities in activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' means number of entities in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable entities that the scheduler never attempted to schedule because they are gated.",
                MetricType::GAUGE,
                entities,
            ),
            scraped(
                "scheduler_cache_size",
                "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
                MetricType::GAUGE,
                cache,
            ),
            scraped(
                "scheduler_unschedulable_pods",
                "[BETA] The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
                MetricType::GAUGE,
                unschedulable,
            ),
            scraped(
                "scheduler_goroutines",
                "[BETA] Number of running goroutines split by the work they do such as binding.",
                MetricType::GAUGE,
                std::iter::once((vec![("operation", "binding".to_string())], self.bindings as f64))
                    // Upstream's series appears once an extender prioritized; without extenders it never does.
                    .chain(self.extender_calls.iter().any(|c| c.call == crate::extender::Call::Prioritize).then(
                        || (vec![("operation", "prioritizing_extender".to_string())], self.prioritizing_extenders as f64),
                    ))
                    .collect(),
            ),
            scraped(
                "kws_extender_requests_total",
                "HTTP extender calls by extender (URL prefix), verb (filter, prioritize, preempt, bind) and result.",
                MetricType::COUNTER,
                self.extender_calls
                    .iter()
                    .flat_map(|c| {
                        [("success", c.ok), ("error", c.failed)].into_iter().map(move |(result, n)| {
                            // In name order, as the Go client writes labels.
                            let labels = vec![
                                ("extender", c.extender.clone()),
                                ("result", result.to_string()),
                                ("verb", c.call.as_str().to_string()),
                            ];
                            (labels, n as f64)
                        })
                    })
                    .collect(),
            ),
            scraped(
                "kws_shadow_decisions_total",
                "Scheduling cycles a shadow profile decided beside the serving profile, by result: agree (the serving node is among the shadow's best, or neither found a node), disagree, error (the shadow failed).",
                MetricType::COUNTER,
                self.shadows
                    .iter()
                    .flat_map(|(profile, t)| {
                        [("agree", t.agree), ("disagree", t.disagree), ("error", t.error)].into_iter().map(
                            move |(result, n)| {
                                let labels = vec![
                                    ("profile", profile.clone()),
                                    ("result", result.to_string()),
                                    ("shadow", t.shadow.clone()),
                                ];
                                (labels, n as f64)
                            },
                        )
                    })
                    .collect(),
            ),
            scraped(
                "kws_extender_request_duration_seconds_total",
                "Time spent in HTTP extender calls by extender and verb (divide by kws_extender_requests_total for the mean).",
                MetricType::COUNTER,
                self.extender_calls
                    .iter()
                    .map(|c| (vec![("extender", c.extender.clone()), ("verb", c.call.as_str().to_string())], c.seconds))
                    .collect(),
            ),
        ]
    }
}

/// The Wasm plugins still built for the previous contract (`kws_wasm_plugin_previous_contract{plugin,contract}`, 1
/// each; none listed when every plugin is on the current one), so an operator sees what to rebuild before the next
/// minor drops the adapter.
fn previous_contract_plugins() -> MetricFamily {
    let samples = crate::wasm::loaded_plugins()
        .iter()
        .filter(|p| p.stats.previous_contract.load(Ordering::Relaxed))
        .map(|p| {
            // Label names in the Go client's (sorted) order.
            let labels = vec![
                ("contract", crate::wasm::PREVIOUS_CONTRACT_VERSION.to_string()),
                ("plugin", crate::framework::Plugin::name(&**p).to_string()),
            ];
            (labels, 1.0)
        })
        .collect();
    scraped(
        "kws_wasm_plugin_previous_contract",
        "Wasm plugins built for the previous contract version, served through the adapter (rebuild them).",
        MetricType::GAUGE,
        samples,
    )
}

/// The Wasm plugins' counters (`kws_wasm_plugin_*_total{plugin}`).
fn wasm_plugins() -> Vec<MetricFamily> {
    type Get = fn(&crate::wasm::WasmStats) -> u64;
    let plugins = crate::wasm::loaded_plugins();
    let families: [(&str, &str, Get); 12] = [
        ("kws_wasm_plugin_loads_total", "Wasm plugin versions loaded.", |s| s.loads.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_reloads_total", "Wasm plugin hot reloads.", |s| s.reloads.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_reload_failures_total", "Refused Wasm plugin replacements.", |s| {
            s.reload_failures.load(Ordering::Relaxed)
        }),
        (
            "kws_wasm_plugin_precompiled_loads_total",
            "Wasm plugin versions loaded precompiled from the plugin cache (no compile).",
            |s| s.precompiled_loads.load(Ordering::Relaxed),
        ),
        ("kws_wasm_plugin_traps_total", "Wasm plugin calls that trapped.", |s| s.traps.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_timeouts_total", "Wasm plugin calls past their deadline.", |s| {
            s.timeouts.load(Ordering::Relaxed)
        }),
        ("kws_wasm_plugin_circuit_opens_total", "Times a Wasm plugin's circuit breaker opened.", |s| {
            s.circuit_opens.load(Ordering::Relaxed)
        }),
        ("kws_wasm_plugin_short_circuited_total", "Wasm plugin calls not made, the breaker being open.", |s| {
            s.short_circuited.load(Ordering::Relaxed)
        }),
        ("kws_wasm_plugin_log_lines_dropped_total", "Wasm plugin log lines dropped by the rate limit.", |s| {
            s.log_lines_dropped.load(Ordering::Relaxed)
        }),
        (
            "kws_wasm_plugin_output_bytes_dropped_total",
            "Wasm plugin output bytes dropped past the per-call cap.",
            |s| s.output_bytes_dropped.load(Ordering::Relaxed),
        ),
        ("kws_wasm_plugin_instances_total", "Wasm plugin instances created.", |s| s.instances.load(Ordering::Relaxed)),
        ("kws_wasm_plugin_node_rows_sent_total", "Node table rows sent to Wasm plugin instances.", |s| {
            s.node_rows_sent.load(Ordering::Relaxed)
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
    /// Prometheus text exposition of everything, the scheduler's state read now.
    pub fn render(&self, scheduler: &Scheduler) -> String {
        self.render_state(&SchedulerState::read(scheduler))
    }

    /// Prometheus text exposition of everything, with the scheduler's state given.
    pub fn render_state(&self, state: &SchedulerState) -> String {
        let mut families = self.registry.gather();
        // Families without samples are left out, as the registry leaves out its own.
        let scraped = state
            .families(&self.unschedulable_seen)
            .into_iter()
            .chain(wasm_plugins())
            .chain([previous_contract_plugins()]);
        families.extend(scraped.filter(|f| !f.get_metric().is_empty()));
        // Sorted by name, as the Go client writes them.
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

    /// Every family of kube-scheduler v1.37 exported here, with upstream's type.
    const UPSTREAM_TYPES: [(&str, &str); 24] = [
        ("scheduler_batch_attempts_total", "counter"),
        ("scheduler_batch_cache_flushed_total", "counter"),
        ("scheduler_batch_rescore_attempts_total", "counter"),
        ("scheduler_batch_rescore_duration_seconds", "histogram"),
        ("scheduler_get_node_hint_duration_seconds", "histogram"),
        ("scheduler_store_schedule_results_duration_seconds", "histogram"),
        ("scheduler_queue_incoming_entities_total", "counter"),
        ("scheduler_pod_scheduled_after_flush_total", "counter"),
        ("scheduler_queued_entities", "gauge"),
        ("scheduler_schedule_attempts_total", "counter"),
        ("scheduler_scheduling_attempt_duration_seconds", "histogram"),
        ("scheduler_scheduling_algorithm_duration_seconds", "histogram"),
        ("scheduler_framework_extension_point_duration_seconds", "histogram"),
        ("scheduler_plugin_execution_duration_seconds", "histogram"),
        ("scheduler_preemption_attempts_total", "counter"),
        ("scheduler_preemption_victims", "histogram"),
        ("scheduler_pod_scheduling_sli_duration_seconds", "histogram"),
        ("scheduler_pod_scheduling_attempts", "histogram"),
        ("scheduler_queue_incoming_pods_total", "counter"),
        ("scheduler_permit_wait_duration_seconds", "histogram"),
        ("scheduler_pending_pods", "gauge"),
        ("scheduler_cache_size", "gauge"),
        ("scheduler_unschedulable_pods", "gauge"),
        ("scheduler_goroutines", "gauge"),
    ];

    /// Each histogram with upstream's `ExponentialBuckets(start, factor, count)`.
    const UPSTREAM_BUCKETS: [(&str, Buckets); 11] = [
        ("scheduler_batch_rescore_duration_seconds", (0.00001, 2.0, 12)),
        ("scheduler_get_node_hint_duration_seconds", (0.00001, 2.0, 12)),
        ("scheduler_store_schedule_results_duration_seconds", (0.00001, 2.0, 12)),
        ("scheduler_scheduling_attempt_duration_seconds", (0.001, 2.0, 15)),
        ("scheduler_scheduling_algorithm_duration_seconds", (0.001, 2.0, 15)),
        ("scheduler_framework_extension_point_duration_seconds", (0.0001, 2.0, 12)),
        ("scheduler_plugin_execution_duration_seconds", (0.00001, 1.5, 20)),
        ("scheduler_preemption_victims", (1.0, 2.0, 7)),
        ("scheduler_pod_scheduling_sli_duration_seconds", (0.01, 2.0, 20)),
        ("scheduler_pod_scheduling_attempts", (1.0, 2.0, 5)),
        ("scheduler_permit_wait_duration_seconds", (0.001, 2.0, 15)),
    ];

    fn pod(name: &str) -> PodInfo {
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"containers": [{"name": "c"}]}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    /// Metrics fed once through every hook, and the scheduler's state they render with.
    fn fed() -> (Metrics, SchedulerState) {
        let m = Metrics::default();
        let ms = Duration::from_millis;
        let scheduled = AttemptResult::Scheduled("n1".into());
        m.attempt("default-scheduler", &pod("a"), &scheduled, ms(3), None);
        m.attempt("default-scheduler", &pod("b"), &AttemptResult::Unschedulable("0/1 nodes".into()), ms(1), None);
        m.scheduling_algorithm(ms(2));
        m.extension_point("default-scheduler", "Filter", Code::Success, ms(1));
        m.plugin_execution("NodeAffinity", "Filter", Code::Success, ms(1));
        m.preemption_attempt(None);
        m.preemption_attempt(Some(3));
        m.permit_wait(Code::Success, ms(40));
        m.pod_scheduled(2, Some(ms(1500)));
        m.pod_scheduled(20, Some(Duration::from_secs(90)));
        m.pod_scheduled_after_flush();
        m.incoming(QueueName::Active, crate::queue::event::UNSCHEDULED_POD_ADD);
        m.incoming(QueueName::Gated, crate::queue::event::UNSCHEDULED_POD_ADD);
        m.incoming(QueueName::Backoff, "NodeAdd");
        {
            use crate::framework::batch::{flush, ATTEMPT_HINT_USED, ATTEMPT_NO_HINT};
            use crate::framework::metrics::BatchMetrics;
            m.batch_attempt("default-scheduler", ATTEMPT_NO_HINT);
            m.batch_attempt("default-scheduler", ATTEMPT_HINT_USED);
            m.batch_attempt("default-scheduler", ATTEMPT_HINT_USED);
            m.batch_cache_flushed("default-scheduler", flush::POD_NOT_BATCHABLE);
            m.batch_rescore("default-scheduler", ms(1));
            m.get_node_hint("default-scheduler", true, ms(1));
            m.get_node_hint("default-scheduler", false, ms(1));
            m.store_schedule_results("default-scheduler", ms(1));
        }
        let state = SchedulerState {
            pending: HashMap::from([(QueueName::Active, 4), (QueueName::Unschedulable, 2)]),
            unschedulable: BTreeMap::from([(("NodeAffinity".into(), "default-scheduler".into()), 2)]),
            nodes: 5,
            pods: 7,
            assumed_pods: 1,
            bindings: 3,
            prioritizing_extenders: 1,
            extender_calls: vec![crate::extender::CallSample {
                extender: "http://ext".into(),
                call: crate::extender::Call::Prioritize,
                ok: 4,
                failed: 1,
                seconds: 0.5,
            }],
            shadows: {
                use crate::scheduler::{Decision, ShadowBook};
                let book = ShadowBook::default();
                let node = |n: &str| Decision::Node { host: n.into(), best: vec![n.into()] };
                book.record("default-scheduler", "trial", "ns/a", &node("n1"), &node("n2"));
                book.record("default-scheduler", "trial", "ns/b", &node("n1"), &node("n1"));
                book.record("default-scheduler", "trial", "ns/c", &node("n1"), &node("n3"));
                book.tallies()
            },
        };
        (m, state)
    }

    #[test]
    fn every_family_renders_with_upstreams_name_and_type() {
        let (m, state) = fed();
        let out = m.render_state(&state);
        for (name, kind) in UPSTREAM_TYPES {
            assert!(out.contains(&format!("\n# TYPE {name} {kind}\n")), "{name} {kind} missing:\n{out}");
        }
        for name in ["kws_wasm_plugin_loads_total", "kws_wasm_plugin_reloads_total"] {
            // No Wasm plugin is loaded in this test: the family has no series and is left out, as upstream's are.
            assert!(!out.contains(name), "{name}");
        }
    }

    #[test]
    fn histograms_have_upstreams_buckets() {
        let (m, state) = fed();
        let out = m.render_state(&state);
        for (name, (start, factor, count)) in UPSTREAM_BUCKETS {
            // The first series' bounds, in order (every series of a family shares them).
            let bucket = format!("{name}_bucket{{");
            let mut series = out.lines().filter(|l| l.starts_with(&bucket));
            // `le` comes last in a bucket's labels (and `profile=` also ends in `le=`).
            let split_le = |l: &str| {
                let at = l.rfind("le=\"").unwrap();
                (l[..at].to_string(), l[at + 4..].split('"').next().unwrap().to_string())
            };
            let first = series.next().unwrap_or_else(|| panic!("{name} has no series"));
            let labels = split_le(first).0;
            let bounds: Vec<String> = std::iter::once(first)
                .chain(series.take_while(|l| split_le(l).0 == labels))
                .map(|l| split_le(l).1)
                .collect();
            // Upstream's `ExponentialBuckets`: each bound the previous times the factor, then +Inf.
            let mut want: Vec<f64> = Vec::new();
            let mut next = start;
            for _ in 0..count {
                want.push(next);
                next *= factor;
            }
            assert_eq!(bounds.len(), count + 1, "{name}: {bounds:?}");
            assert_eq!(bounds[count], "+Inf", "{name}");
            for (got, want) in bounds.iter().zip(&want) {
                let got: f64 = got.parse().unwrap();
                assert!((got - want).abs() <= want * 1e-12, "{name}: bound {got}, upstream {want}");
            }
        }
    }

    #[test]
    fn labels_are_upstreams() {
        let (m, state) = fed();
        let out = m.render_state(&state);
        for line in [
            r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1"#,
            r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1"#,
            r#"scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 1"#,
            "scheduler_scheduling_algorithm_duration_seconds_count 1",
            r#"scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="default-scheduler",status="Success"} 1"#,
            r#"scheduler_plugin_execution_duration_seconds_count{extension_point="Filter",plugin="NodeAffinity",status="Success"} 1"#,
            "scheduler_preemption_attempts_total 2",
            "scheduler_preemption_victims_count 1",
            r#"scheduler_preemption_victims_bucket{le="2"} 0"#,
            r#"scheduler_preemption_victims_bucket{le="4"} 1"#,
            r#"scheduler_permit_wait_duration_seconds_count{result="Success"} 1"#,
            r#"scheduler_pod_scheduling_sli_duration_seconds_count{attempts="2"} 1"#,
            r#"scheduler_pod_scheduling_sli_duration_seconds_count{attempts="15+"} 1"#,
            "scheduler_pod_scheduling_attempts_count 2",
            r#"scheduler_pod_scheduling_attempts_bucket{le="2"} 1"#,
            r#"scheduler_queue_incoming_pods_total{event="UnschedulablePodAdd",queue="active"} 1"#,
            r#"scheduler_queue_incoming_pods_total{event="UnschedulablePodAdd",queue="unschedulable"} 1"#,
            r#"scheduler_queue_incoming_pods_total{event="NodeAdd",queue="backoff"} 1"#,
            r#"scheduler_queue_incoming_entities_total{event="NodeAdd",queue="backoff",type="pod"} 1"#,
            r#"scheduler_queued_entities{queue="active",type="pod"} 4"#,
            r#"scheduler_queued_entities{queue="gated",type="pod"} 0"#,
            "scheduler_pod_scheduled_after_flush_total 1",
            r#"kws_shadow_decisions_total{profile="default-scheduler",result="agree",shadow="trial"} 1"#,
            r#"kws_shadow_decisions_total{profile="default-scheduler",result="disagree",shadow="trial"} 2"#,
            r#"kws_shadow_decisions_total{profile="default-scheduler",result="error",shadow="trial"} 0"#,
            r#"scheduler_pending_pods{queue="active"} 4"#,
            r#"scheduler_pending_pods{queue="gated"} 0"#,
            r#"scheduler_cache_size{type="assumed_pods"} 1"#,
            r#"scheduler_cache_size{type="nodes"} 5"#,
            r#"scheduler_cache_size{type="pods"} 7"#,
            r#"scheduler_unschedulable_pods{plugin="NodeAffinity",profile="default-scheduler"} 2"#,
            r#"scheduler_goroutines{operation="binding"} 3"#,
            r#"scheduler_goroutines{operation="prioritizing_extender"} 1"#,
            r#"kws_extender_requests_total{extender="http://ext",result="success",verb="prioritize"} 4"#,
            r#"kws_extender_requests_total{extender="http://ext",result="error",verb="prioritize"} 1"#,
            r#"kws_extender_request_duration_seconds_total{extender="http://ext",verb="prioritize"} 0.5"#,
            r#"scheduler_batch_attempts_total{profile="default-scheduler",result="no_hint"} 1"#,
            r#"scheduler_batch_attempts_total{profile="default-scheduler",result="hint_used"} 2"#,
            r#"scheduler_batch_cache_flushed_total{profile="default-scheduler",reason="pod_not_batchable"} 1"#,
            r#"scheduler_batch_rescore_attempts_total{profile="default-scheduler"} 1"#,
            r#"scheduler_batch_rescore_duration_seconds_count{profile="default-scheduler"} 1"#,
            r#"scheduler_get_node_hint_duration_seconds_count{hinted="hint",profile="default-scheduler"} 1"#,
            r#"scheduler_get_node_hint_duration_seconds_count{hinted="no_hint",profile="default-scheduler"} 1"#,
            r#"scheduler_store_schedule_results_duration_seconds_count{profile="default-scheduler"} 1"#,
        ] {
            assert!(out.lines().any(|l| l == line), "missing {line}:\n{out}");
        }
        assert!(out.contains("# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts"), "{out}");
        assert!(
            out.contains(
                "# HELP scheduler_batch_attempts_total [ALPHA] Counts of results when we attempt to use batching.\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn unschedulable_pods_keep_a_series_at_zero_once_its_pods_are_gone() {
        let (m, state) = fed();
        m.render_state(&state);
        let out = m.render_state(&SchedulerState::default());
        let line = r#"scheduler_unschedulable_pods{plugin="NodeAffinity",profile="default-scheduler"} 0"#;
        assert!(out.lines().any(|l| l == line), "{out}");
    }

    #[test]
    fn plugin_durations_render_with_upstream_names_labels_and_buckets() {
        let m = Metrics::default();
        m.plugin_execution("PriorityLabel", "Filter", Code::Success, Duration::from_micros(20));
        m.plugin_execution("PriorityLabel", "Filter", Code::Success, Duration::from_millis(3));
        m.plugin_execution("NodeAffinity", "Score", Code::Error, Duration::from_micros(5));
        let out = m.render_state(&SchedulerState::default());
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

    /// The PodGroup cycle's families exist only with the GenericWorkload gate, as upstream registers them.
    #[test]
    fn pod_group_families_only_with_the_gate() {
        let (m, state) = fed();
        m.pod_group_attempt("default-scheduler", "scheduled", Duration::from_millis(4));
        assert!(!m.render_state(&state).contains("scheduler_podgroup_"), "gate off: no family");
        m.enable_pod_groups().unwrap();
        m.enable_pod_groups().unwrap();
        m.pod_group_attempt("default-scheduler", "scheduled", Duration::from_millis(4));
        m.pod_group_attempt("default-scheduler", "unschedulable", Duration::from_millis(1));
        m.pod_group_algorithm(Duration::from_millis(3));
        let out = m.render_state(&state);
        for want in [
            r#"scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1"#,
            r#"scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1"#,
            r#"scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 1"#,
            "scheduler_podgroup_scheduling_algorithm_duration_seconds_count 1",
            "# HELP scheduler_podgroup_schedule_attempts_total [ALPHA] Number of attempts to schedule pod group",
        ] {
            assert!(out.contains(want), "{want}\n{out}");
        }
    }

    /// The asynchronous preemption's families exist only with their gate, with upstream's names, help and buckets.
    #[test]
    fn preemption_goroutine_families_only_with_the_gate() {
        let (m, state) = fed();
        m.preemption_goroutine(false, Duration::from_millis(30));
        assert!(!m.render_state(&state).contains("scheduler_preemption_goroutines_"), "gate off: no family");
        m.enable_async_preemption().unwrap();
        m.enable_async_preemption().unwrap();
        m.preemption_goroutine(false, Duration::from_millis(30));
        m.preemption_goroutine(true, Duration::from_millis(5));
        let out = m.render_state(&state);
        for want in [
            r#"scheduler_preemption_goroutines_execution_total{result="success"} 1"#,
            r#"scheduler_preemption_goroutines_execution_total{result="error"} 1"#,
            r#"scheduler_preemption_goroutines_duration_seconds_bucket{result="success",le="0.02"} 0"#,
            r#"scheduler_preemption_goroutines_duration_seconds_bucket{result="success",le="0.04"} 1"#,
            "# HELP scheduler_preemption_goroutines_duration_seconds [ALPHA] (Deprecated since 1.37.0) Duration",
        ] {
            assert!(out.contains(want), "{want}\n{out}");
        }
    }

    /// The DRA binding-condition families exist only with their gate, with upstream's names, labels and buckets.
    #[test]
    fn dra_binding_condition_families_only_with_the_gate() {
        let (m, state) = fed();
        m.binding_conditions_allocation("kws", "gpu.example.com", "success");
        assert!(!m.render_state(&state).contains("scheduler_dra_"), "gate off: no family");
        m.enable_dra_binding_conditions().unwrap();
        m.enable_dra_binding_conditions().unwrap();
        m.binding_conditions_allocation("kws", "gpu.example.com", "timeout");
        m.binding_conditions_wait("kws", "gpu.example.com", "timeout", Duration::from_secs(3));
        let out = m.render_state(&state);
        for want in [
            r#"scheduler_dra_bindingconditions_allocations_total{driver="gpu.example.com",profile="kws",status="timeout"} 1"#,
            r#"scheduler_dra_bindingconditions_wait_duration_seconds_bucket{driver="gpu.example.com",profile="kws",status="timeout",le="3.2"} 1"#,
            r#"scheduler_dra_bindingconditions_wait_duration_seconds_bucket{driver="gpu.example.com",profile="kws",status="timeout",le="1.6"} 0"#,
            "# TYPE scheduler_dra_bindingconditions_wait_duration_seconds histogram",
        ] {
            assert!(out.contains(want), "{want}\n{out}");
        }
    }
}
