//! Synthetic clusters for benchmarks: N nodes across zones, M small pending pods.

use serde_json::json;

use super::ClusterFile;
use crate::framework::PodInfo;

/// A cluster of `nodes` nodes (8 CPU, 32 GiB, 110 pods, 10 zones, a few labels each) and `pods` pending pods
/// requesting 100m CPU and 128 MiB (every tenth with a preferred node affinity, so scoring has work to do).
pub fn cluster(nodes: usize, pods: usize) -> ClusterFile {
    let mut c = ClusterFile::default();
    for i in 0..nodes {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i}"), "labels": {
                "kubernetes.io/hostname": format!("node-{i}"),
                "topology.kubernetes.io/zone": format!("zone-{}", i % 10),
                "node.kubernetes.io/instance-type": if i % 3 == 0 { "large" } else { "medium" },
                "tier": format!("{}", i % 4)
            }},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                       "images": [{"names": ["registry.example/app:1"], "sizeBytes": 200_000_000}]}
        });
        c.nodes.push(serde_json::from_value(node).expect("generated node"));
    }
    for i in 0..pods {
        let mut spec = json!({"containers": [{"name": "app", "image": "registry.example/app:1",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]});
        if i % 10 == 0 {
            spec["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["1"]}]}}]}});
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i}"), "namespace": "default", "uid": format!("uid-{i}"), "labels": {"app": "bench"}},
            "spec": spec});
        c.pending_pods
            .push(PodInfo::new(serde_json::from_value(pod).expect("generated pod")).expect("generated pod info"));
    }
    c
}
