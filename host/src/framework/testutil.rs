//! Builders shared by the unit tests: pods and nodes from JSON.

use std::sync::Arc;

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
