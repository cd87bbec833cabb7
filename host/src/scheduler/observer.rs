//! What the scheduler tells the outside about each attempt: the simulator's report, the live metrics and logs
//! implement `Observer`.

use std::time::Duration;

use crate::framework::metrics::{BatchMetrics, PluginMetrics};
use crate::framework::{Code, CycleTrace, PodInfo};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// Bound to the node.
    Scheduled(String),
    /// No node fits; the message is upstream's `0/N nodes are available: ...`.
    Unschedulable(String),
    /// An Error status (plugin failure, bind failure).
    Error(String),
}

impl AttemptResult {
    /// Upstream's `result` label for `scheduler_schedule_attempts_total`.
    pub fn label(&self) -> &'static str {
        match self {
            AttemptResult::Scheduled(_) => "scheduled",
            AttemptResult::Unschedulable(_) => "unschedulable",
            AttemptResult::Error(_) => "error",
        }
    }
}

/// Receives what happens, for the simulator's report, metrics and logs. Plugin call timings arrive through the
/// framework's [`PluginMetrics`], and what OpportunisticBatching did through its [`BatchMetrics`]; every observer
/// is both.
pub trait Observer: PluginMetrics + BatchMetrics {
    /// An attempt ended (after binding, for scheduled pods).
    fn attempt(
        &self,
        _profile: &str,
        _pod: &PodInfo,
        _result: &AttemptResult,
        _duration: Duration,
        _trace: Option<CycleTrace>,
    ) {
    }
    /// A pod was evicted to make room for `preemptor` on `node`.
    fn preempted(&self, _victim: &PodInfo, _preemptor: &PodInfo, _node: &str) {}
    /// Time spent in an extension point (`scheduler_framework_extension_point_duration_seconds`).
    fn extension_point(&self, _profile: &str, _point: &'static str, _status: Code, _duration: Duration) {}
    /// The scheduling algorithm finished: from the attempt's start through Score and the node's selection, or
    /// through PostFilter when no node fits (`scheduler_scheduling_algorithm_duration_seconds`).
    fn scheduling_algorithm(&self, _duration: Duration) {}
    /// PostFilter ran for a pod no node fits (`scheduler_preemption_attempts_total`); `victims` is how many pods
    /// it chose to evict when it nominated a node (`scheduler_preemption_victims`).
    fn preemption_attempt(&self, _victims: Option<usize>) {}
    /// An asynchronous preemption's deletions ended after `d`, some of them `failed`
    /// (`scheduler_preemption_goroutines_*`).
    fn preemption_goroutine(&self, _failed: bool, _duration: Duration) {}
    /// A pod that Permit made wait was allowed or rejected (`scheduler_permit_wait_duration_seconds{result}`).
    fn permit_wait(&self, _result: Code, _duration: Duration) {}
    /// A pod was bound after `attempts` attempts, `since_queued` after it first entered activeQ
    /// (`scheduler_pod_scheduling_attempts`, `scheduler_pod_scheduling_sli_duration_seconds{attempts}`).
    fn pod_scheduled(&self, _attempts: u32, _since_queued: Option<Duration>) {}
    /// A pod was bound whose last move out of unschedulable was the periodic flush
    /// (`scheduler_pod_scheduled_after_flush_total`).
    fn pod_scheduled_after_flush(&self) {}
    /// A PodGroup cycle ended, `result` as `scheduler_podgroup_schedule_attempts_total` labels it (`scheduled`,
    /// `unschedulable`, `error`), `duration` after it started (`scheduler_podgroup_scheduling_attempt_duration_seconds`).
    fn pod_group_attempt(&self, _profile: &str, _result: &'static str, _duration: Duration) {}
    /// A PodGroup cycle's algorithm (every member tried, the trials undone) took `duration`
    /// (`scheduler_podgroup_scheduling_algorithm_duration_seconds`).
    fn pod_group_algorithm(&self, _duration: Duration) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct NoopObserver;
impl PluginMetrics for NoopObserver {}
impl BatchMetrics for NoopObserver {}
impl Observer for NoopObserver {}
