//! The parts of a pod that plugins sign for OpportunisticBatching, as upstream's `kube-scheduler/framework/
//! signers.go`: the signer names (the keys of a signature's fragments) and the canonical forms of the parts
//! several plugins share. Only equality of whole signatures matters, so each form sorts what the API leaves
//! unordered: two pods that differ only in such order sign alike.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm};
use serde_json::{json, Value};

use super::types::PodInfo;

/// DynamicResources' key.
pub const DYNAMIC_RESOURCES: &str = "v1.Pod.Spec.DynamicResources";
/// ImageLocality's key.
pub const IMAGE_NAMES: &str = "v1.Pod.Spec.CanonicalImageNames()";
/// InterPodAffinity's key.
pub const LABELS: &str = "v1.Pod.Labels";
/// NodeName's key.
pub const NODE_NAME: &str = "v1.Pod.Spec.NodeName";
/// NodeAffinity's key for `spec.affinity.nodeAffinity`.
pub const NODE_AFFINITY: &str = "v1.Pod.Spec.Affinity.NodeAffinity";
/// NodeAffinity's key for `spec.nodeSelector`.
pub const NODE_SELECTOR: &str = "v1.Pod.Spec.Affinity.NodeSelector";
/// NodePorts' key.
pub const HOST_PORTS: &str = "v1.Pod.Spec.HostPorts()";
/// NodeResourcesFit's and NodeResourcesBalancedAllocation's key.
pub const RESOURCES: &str = "v1.Pod.Spec.ContainerRequestsAndOverheads()";
/// The key the runner always adds: the pod's profile.
pub const SCHEDULER_NAME: &str = "v1.Pod.Spec.SchedulerName";
/// TaintToleration's and NodeUnschedulable's key.
pub const TOLERATIONS: &str = "v1.Pod.Spec.Tolerations";
/// The volume plugins' key.
pub const VOLUMES: &str = "v1.Pod.Spec.Volumes.NonSyntheticSources()";
/// NodeDeclaredFeatures' key.
pub const FEATURES: &str = "v1.Pod.Spec.RequiredFeatures()";

/// The host ports of the containers and init containers, each once, ascending (upstream's `HostPortsSigner`:
/// the port numbers only).
pub fn host_ports(pod: &PodInfo) -> Value {
    let ports: BTreeSet<i32> = pod.host_ports.iter().map(|p| p.port).collect();
    json!(ports.into_iter().collect::<Vec<_>>())
}

/// One requirement list, each requirement with its values sorted, as JSON strings sorted (upstream's
/// `NodeSelectorRequirementsSigner`).
fn requirements(reqs: Option<&Vec<NodeSelectorRequirement>>) -> Vec<String> {
    let mut out: Vec<String> = reqs
        .into_iter()
        .flatten()
        .map(|r| {
            let mut r = r.clone();
            if let Some(v) = r.values.as_mut() {
                v.sort();
            }
            serde_json::to_string(&r).unwrap_or_default()
        })
        .collect();
    out.sort();
    out
}

/// A node selector term's canonical form (upstream's `NodeSelectorTermSigner`).
fn term(t: &NodeSelectorTerm) -> Value {
    json!({
        "MatchExpressions": requirements(t.match_expressions.as_ref()),
        "MatchFields": requirements(t.match_fields.as_ref()),
    })
}

/// Preferred terms as sorted JSON strings (upstream's `PreferredSchedulingTermSigner`).
fn preferred(terms: &[PreferredSchedulingTerm]) -> Vec<String> {
    let mut out: Vec<String> =
        terms.iter().map(|t| json!({"Weight": t.weight, "Preference": term(&t.preference)}).to_string()).collect();
    out.sort();
    out
}

/// Required terms as sorted JSON strings (upstream's `NodeSelectorTermsSigner`).
fn required(terms: &[NodeSelectorTerm]) -> Vec<String> {
    let mut out: Vec<String> = terms.iter().map(|t| term(t).to_string()).collect();
    out.sort();
    out
}

/// `spec.affinity.nodeAffinity` in canonical form, null when the pod has none (upstream's `NodeAffinitySigner`).
pub fn node_affinity(pod: &PodInfo) -> Value {
    let Some(n) = pod.pod.spec.as_ref().and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref()) else {
        return Value::Null;
    };
    let pref = n.preferred_during_scheduling_ignored_during_execution.as_deref().map(preferred).unwrap_or_default();
    let req = n
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|r| required(&r.node_selector_terms))
        .unwrap_or_default();
    json!({"Required": req, "Preferred": pref})
}

/// The tolerations ordered by key, then value (upstream's `TolerationsSigner`; its sort is not stable, this one
/// is, which only makes more pods alike).
pub fn tolerations(pod: &PodInfo) -> Value {
    let mut t = pod.pod.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
    t.sort_by(|a, b| (&a.key, &a.value).cmp(&(&b.key, &b.value)));
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// The sources of the volumes other than ConfigMaps and Secrets, as sorted JSON strings (upstream's
/// `VolumesSigner`): those two never matter to scheduling and differ from pod to pod, so leaving them in would
/// make no two pods alike. The volume's name is not part of its source.
pub fn volumes(pod: &PodInfo) -> Value {
    let mut out: Vec<String> = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter(|v| v.config_map.is_none() && v.secret.is_none())
        .map(|v| {
            let mut source = serde_json::to_value(v).unwrap_or(Value::Null);
            if let Some(o) = source.as_object_mut() {
                o.remove("name");
            }
            source.to_string()
        })
        .collect();
    out.sort();
    json!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testutil::pod;

    #[test]
    fn unordered_parts_sign_alike_and_different_parts_do_not() {
        let a = pod(json!({"metadata": {"name": "a"}, "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}, {"containerPort": 2, "hostPort": 8080}]}],
            "tolerations": [{"key": "b", "operator": "Exists"}, {"key": "a", "operator": "Exists"}],
            "volumes": [{"name": "x", "configMap": {"name": "cm-a"}}, {"name": "v", "emptyDir": {}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "In", "values": ["2", "1"]}]}]}}}}}));
        let b = pod(json!({"metadata": {"name": "b"}, "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 2, "hostPort": 8080}, {"containerPort": 1, "hostPort": 80}]}],
            "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
            "volumes": [{"name": "w", "emptyDir": {}}, {"name": "y", "secret": {"secretName": "s"}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "In", "values": ["1", "2"]}]}]}}}}}));
        assert_eq!(host_ports(&a), host_ports(&b));
        assert_eq!(host_ports(&a), json!([80, 8080]));
        assert_eq!(tolerations(&a), tolerations(&b));
        assert_eq!(volumes(&a), volumes(&b));
        assert_eq!(node_affinity(&a), node_affinity(&b));
        let c = pod(json!({"metadata": {"name": "c"}, "spec": {"containers": [{"name": "c"}],
            "volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}));
        assert_ne!(volumes(&a), volumes(&c));
        assert_eq!(node_affinity(&c), Value::Null);
        assert_ne!(tolerations(&a), tolerations(&c));
    }
}
