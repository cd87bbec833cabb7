//! The node-resources plugins, as upstream's `noderesources` package: NodeResourcesFit (`fit`, upstream's
//! `fit.go`) and NodeResourcesBalancedAllocation (`balanced_allocation`), which both score through one
//! resource-allocation scorer (`resource_allocation`). Here too the resource-name classes both use, as upstream's
//! `v1helper`.

pub mod balanced_allocation;
pub mod fit;
pub mod resource_allocation;

pub(crate) use crate::config::names::{is_extended_resource_name, qualified_name_error};

/// Upstream's `IsScalarResourceName`: extended, hugepages, prefixed native or attachable-volume resources.
fn is_scalar_resource_name(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || (name.contains('/') && name.contains("kubernetes.io/"))
        || is_extended_resource_name(name)
}

/// Whether the pod asks for an extended resource that a DeviceClass provides (upstream's
/// `shouldDelegateResourceToDRA` without a node): such a pod is not signed, since whether a node serves the
/// resource itself or through DynamicResources depends on the node.
fn dra_backed_request(pod: &crate::framework::PodInfo, objects: &crate::framework::ClusterObjects) -> bool {
    use crate::plugins::dynamic_resources::extended::{device_class_for, is_dra_extended_resource_name};
    pod.requests
        .scalar
        .iter()
        .any(|(name, &q)| q != 0 && is_dra_extended_resource_name(name) && device_class_for(objects, name).is_some())
}

/// The pod's requests as the two plugins sign them (upstream's `computePodResourceRequest`: the pod's effective
/// requests, pod-level resources honoured).
fn requests_fragment(pod: &crate::framework::PodInfo) -> serde_json::Value {
    let r = &pod.requests;
    serde_json::json!({
        "MilliCPU": r.milli_cpu,
        "Memory": r.memory,
        "EphemeralStorage": r.ephemeral_storage,
        "AllowedPodNumber": r.allowed_pod_number,
        "ScalarResources": r.scalar,
    })
}

/// The signature both resource plugins give (upstream's `SignPod` of NodeResourcesFit and BalancedAllocation): the
/// pod's requests; a pod asking for an extended resource a DeviceClass provides cannot be signed.
pub(crate) fn sign_requests(
    pod: &crate::framework::PodInfo,
    snapshot: &crate::framework::Snapshot,
) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
    use crate::framework::{signers, SignFragment};
    if dra_backed_request(pod, &snapshot.objects) {
        return Err(crate::framework::Status::unschedulable(
            "signature disabled when dra extended resources are used in the cluster",
        ));
    }
    Ok(vec![SignFragment { key: signers::RESOURCES, value: requests_fragment(pod) }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_name_classes() {
        assert!(is_extended_resource_name("example.com/aaa"));
        assert!(!is_extended_resource_name("kubernetes.io/something"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("subdomain.kubernetes.io/something"));
        assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
        assert!(!is_scalar_resource_name("pods"));
    }
}
