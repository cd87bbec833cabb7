//! The cluster seam: the writes the scheduler makes to a cluster (binding, evictions, nominations, events; the
//! traits are the framework's) and the changes a cluster reports back (`EventHandler`). Two implementations:
//! `kube` (a real API server: client writes and informers) and `memory` (the simulator's in-memory cluster).

pub mod kube;
pub mod memory;
pub mod volumes;

pub use crate::framework::handle::{ClusterClient, ClusterError, PodEvent};

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::framework::{ClusterObjects, EventResource, PodInfo};

/// Where a cluster reports changes to its objects (upstream's informer event handlers). The live informers and
/// the in-memory cluster report to the same handler — the scheduler's — so what a change does to the cache and
/// the queue is written once, whichever cluster the scheduler runs on.
pub trait EventHandler: Send + Sync {
    /// A pod was added or changed (bound or pending, any scheduler's).
    fn pod_applied(&self, pod: Arc<PodInfo>);
    /// A pod was deleted.
    fn pod_deleted(&self, uid: &str);
    /// A node was added or changed.
    fn node_applied(&self, node: Node);
    /// A node was deleted.
    fn node_deleted(&self, name: &str);
    /// The objects other than pods and nodes changed; `resource` says which kind, for requeueing.
    fn objects_changed(&self, objects: ClusterObjects, resource: EventResource);
}
