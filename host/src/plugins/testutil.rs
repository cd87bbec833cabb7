//! Builders shared by the plugins' unit tests: pods and nodes from JSON, a context with the memory cluster.

use std::sync::Arc;

use crate::cluster::memory::MemoryCluster;
use crate::framework::PluginContext;
use crate::framework::{NodeInfo, PodInfo};

/// A `PodInfo` from a Pod in JSON (`metadata.name` is enough).
pub fn pod(v: serde_json::Value) -> PodInfo {
    PodInfo::new(serde_json::from_value(v).expect("pod json")).expect("pod info")
}

/// A `NodeInfo` from a Node in JSON.
pub fn node(v: serde_json::Value) -> NodeInfo {
    NodeInfo::new(Arc::new(serde_json::from_value(v).expect("node json"))).expect("node info")
}

/// A `NodeInfo` with pods placed on it.
pub fn node_with_pods(v: serde_json::Value, pods: Vec<PodInfo>) -> NodeInfo {
    let mut n = node(v);
    let name = n.name.clone();
    for p in pods {
        n.add_pod(Arc::new(p.with_node_name(&name)));
    }
    n
}

/// A plugin context on a fresh in-memory cluster.
pub fn ctx() -> PluginContext {
    PluginContext::new(Arc::new(MemoryCluster::default()))
}
