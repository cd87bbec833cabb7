//! What the scheduler tells the outside about each attempt: the simulator's report, the live metrics and logs
//! implement `Observer`.

use std::time::Duration;

use crate::framework::metrics::PluginMetrics;
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
/// framework's [`PluginMetrics`], which every observer also is.
pub trait Observer: PluginMetrics {
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
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct NoopObserver;
impl PluginMetrics for NoopObserver {}
impl Observer for NoopObserver {}
