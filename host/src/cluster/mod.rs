//! The cluster seam: what the scheduler needs from a cluster (binding, evictions, nominations, events). The
//! framework never knows whether it runs on the in-memory simulator or on a real API server.

pub mod kube;
pub mod memory;

use thiserror::Error;

use crate::framework::types::PodInfo;

/// A cluster call that failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClusterError {
    /// The object changed or is gone (HTTP 409/404): the pod is not bound, and must not be retried blindly.
    #[error("conflict on {object}: {message}")]
    Conflict {
        /// The object, `kind ns/name`.
        object: String,
        /// What the server said.
        message: String,
    },
    /// Anything else (network, server error).
    #[error("cluster call on {object} failed: {message}")]
    Other {
        /// The object, `kind ns/name`.
        object: String,
        /// What went wrong.
        message: String,
    },
}

/// One scheduling event for a pod (`Scheduled`, `FailedScheduling`, `Preempted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason, upstream's spelling.
    pub reason: &'static str,
    /// The human message.
    pub message: String,
    /// The profile's schedulerName (the reporting controller).
    pub scheduler_name: String,
}

/// The writes a scheduler makes to a cluster.
pub trait ClusterClient: Send + Sync {
    /// Binds the pod to the node (`pods/binding`).
    fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError>;
    /// Evicts a preemption victim.
    fn delete_pod(&self, pod: &PodInfo, preemptor: &PodInfo) -> Result<(), ClusterError>;
    /// Sets or clears `status.nominatedNodeName`.
    fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError>;
    /// Records an event on the pod and, for failures, the PodScheduled=False condition.
    fn record(&self, pod: &PodInfo, event: PodEvent);
}
