//! Extended resources backed by DRA (DRAExtendedResource, GA and locked on in v1.37), as upstream's
//! `dynamicresources/extendeddynamicresources.go` and the DeviceClass mapping of
//! `dynamic-resource-allocation/deviceclass/extendedresourcecache`: a pod asking for an extended resource such as
//! `example.com/gpu: 1` that a DeviceClass maps (`spec.extendedResourceName`, or the implicit name
//! `deviceclass.resource.kubernetes.io/<class>`) gets its devices through one special ResourceClaim the scheduler
//! makes for it. The claim lives in memory (named [`SPECIAL_CLAIM_NAME`], without requests) until Filter gives it
//! the requests a node needs, and is created in the API by PreBind, owned by the pod and marked with
//! [`EXTENDED_RESOURCE_CLAIM_ANNOTATION`]. A node that lists the resource in its allocatable (a device plugin)
//! serves it as before: NodeResourcesFit checks it there, and no claim is made for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, ContainerExtendedResourceRequest};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::config::names::is_extended_resource_name;
use crate::framework::{ClusterObjects, PodInfo};

/// Upstream `resourceapi.ExtendedResourceClaimAnnotation`: set to "true" on the claim the scheduler made.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// Upstream `resourceapi.ResourceDeviceClassPrefix`: the implicit extended resource name of every DeviceClass.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// Upstream `specialClaimInMemName`: the name of the claim until PreBind creates it (not a valid object name, so it
/// never meets a real claim).
pub const SPECIAL_CLAIM_NAME: &str = "<extended-resources>";

/// Upstream `IsDRAExtendedResourceName`: an extended resource name, or a DeviceClass's implicit one.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// The DeviceClass that provides extended resource `name` (upstream's `DeviceClassResolver.GetDeviceClass`): the
/// class named by the implicit name, else the class whose `spec.extendedResourceName` is `name`. Two classes
/// naming the same resource: the newest (`creationTimestamp`) wins, on a tie the first by name, as upstream's
/// cache settles whatever order the classes arrive in.
pub fn device_class_for<'a>(objects: &'a ClusterObjects, name: &str) -> Option<&'a Arc<DeviceClass>> {
    if let Some(class) = name.strip_prefix(DEVICE_CLASS_PREFIX).and_then(|c| objects.device_classes.get(c)) {
        return Some(class);
    }
    let created = |c: &DeviceClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
    objects
        .device_classes
        .values()
        .filter(|c| c.spec.as_ref().and_then(|s| s.extended_resource_name.as_deref()) == Some(name))
        .min_by(|a, b| created(b).cmp(&created(a)).then_with(|| a.metadata.name.cmp(&b.metadata.name)))
}

/// The pod's non-zero requests of DRA extended resource names that some DeviceClass provides, with their classes;
/// empty when the pod needs no special claim (upstream `hasDeviceClassMappedExtendedResource`). A pod that needs
/// one also checks its other DRA extended resource names in Filter, so all of them are returned then, each with
/// its class if it has one.
pub fn pod_extended_resources(
    pod: &PodInfo,
    objects: &ClusterObjects,
) -> BTreeMap<String, (i64, Option<Arc<DeviceClass>>)> {
    let out: BTreeMap<String, (i64, Option<Arc<DeviceClass>>)> = pod
        .requests
        .scalar
        .iter()
        .filter(|(name, &q)| q != 0 && is_dra_extended_resource_name(name))
        .map(|(name, &q)| (name.clone(), (q, device_class_for(objects, name).cloned())))
        .collect();
    if out.values().any(|(_, c)| c.is_some()) {
        out
    } else {
        BTreeMap::new()
    }
}

/// Whether `claim` is the pod's extended resource claim: marked so and controlled by the pod (upstream
/// `findExtendedResourceClaim`).
pub fn is_pods_extended_resource_claim(pod: &PodInfo, claim: &ResourceClaim) -> bool {
    let marked = claim.metadata.annotations.as_ref().and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION));
    marked.is_some_and(|v| v == "true")
        && claim.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
        && claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.name == pod.name && r.controller == Some(true) && r.uid == pod.uid)
}

/// The claim a pod gets when none was made for it yet (upstream `preFilterExtendedResources`): in memory, named
/// [`SPECIAL_CLAIM_NAME`] with a temporary `uid` (the key of its allocation while in flight), no requests; PreBind
/// creates it with `generateName: <pod>-extended-resources-`, owned by the pod.
pub fn special_claim(pod: &PodInfo, uid: String) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some(pod.namespace.clone()),
            name: Some(SPECIAL_CLAIM_NAME.into()),
            uid: Some(uid),
            generate_name: Some(format!("{}-extended-resources-", pod.name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            annotations: Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec::default()),
        status: None,
    }
}

/// Whether the claim is still the in-memory one (upstream `isSpecialClaimName`).
pub fn is_special(claim: &ResourceClaim) -> bool {
    claim.metadata.name.as_deref() == Some(SPECIAL_CLAIM_NAME)
}

/// Whether the claim asks for devices (a claim found from an earlier cycle does; the in-memory one does not).
pub fn has_requests(claim: &ResourceClaim) -> bool {
    claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.as_ref()).is_some()
}

/// A container's whole request of `resource` (upstream reads `AsInt64`: a fraction is no request).
fn container_request(c: &Container, resource: &str) -> i64 {
    let q = c.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get(resource));
    q.and_then(|q| crate::framework::quantity::parse(&q.0).ok())
        .filter(|q| q.milli_value() % 1000 == 0)
        .map(|q| q.milli_value() / 1000)
        .unwrap_or(0)
}

/// Upstream `createResourceRequestAndMappings`: container `index`'s request of `resource` from class `class`,
/// after what `reusable` requests (those of long-lived containers that start later) already cover; the request is
/// named `container-<index>-request-<i>`, `i` the resource's place among the container's requested names in
/// order. Returns the new request (none when covered or not requested) and the container's mappings.
fn container_request_and_mappings(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let requested = container.resources.as_ref().and_then(|r| r.requests.as_ref());
    let Some(requested) = requested.filter(|r| r.contains_key(resource)) else { return (None, Vec::new()) };
    let want = container_request(container, resource);
    if want == 0 {
        return (None, Vec::new());
    }
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
        mappings.push(mapping(&r.name));
        if sum >= want {
            return (None, mappings);
        }
    }
    // The requests' names are a map's keys: sorted, as upstream sorts them.
    let ridx = requested.keys().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{ridx}");
    mappings.push(mapping(&name));
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(want - sum),
            ..Default::default()
        }),
        ..Default::default()
    };
    (Some(request), mappings)
}

/// Upstream `createRequestsAndMappings`: the device requests of the node's claim for the resources a node must
/// provide through DRA (`resources`: name → class), and which container's resource each request serves. Long-
/// lived containers (regular ones and sidecars) get a request each; an init container that runs to completion
/// first reuses the requests of long-lived containers that start after it, and the init containers share the
/// largest of their own requests. Requests come sorted by name; mappings list long-lived containers first.
pub fn requests_and_mappings(
    pod: &PodInfo,
    resources: &BTreeMap<String, Arc<DeviceClass>>,
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let spec = pod.pod.spec.as_ref();
    let init: &[Container] = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or(&[]);
    let regular: &[Container] = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let containers: Vec<&Container> = init.iter().chain(regular).collect();
    let short_lived = |i: usize| i < init.len() && containers[i].restart_policy.as_deref() != Some("Always");
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in resources {
        let class = class.metadata.name.as_deref().unwrap_or("");
        let mut long_requests: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| !short_lived(*i)) {
            let (r, m) = container_request_and_mappings(i, c, resource, class, &[]);
            long_requests[i] = r;
            long_mappings.extend(m);
        }
        let mut max_short: Option<DeviceRequest> = None;
        let mut short_names: Vec<String> = Vec::new();
        let mut short_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| short_lived(*i)) {
            let (r, m) = container_request_and_mappings(i, c, resource, class, &long_requests[i..]);
            if let Some(r) = r {
                short_names.push(r.name.clone());
                let count = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
                if max_short.as_ref().is_none_or(|m| count(m) < count(&r)) {
                    max_short = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        // Every init container's mapping to one of their own requests points at the largest one.
        if let Some(max) = &max_short {
            if short_names.len() > 1 {
                for m in &mut short_mappings {
                    if m.request_name != max.name && short_names.contains(&m.request_name) {
                        m.request_name = max.name.clone();
                    }
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long_requests.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// The classes of the extended resources a node must provide through DRA, from what the pod asks for: those
/// backed by a class that the node does not list with a positive allocatable (upstream `filterExtendedResources`).
/// `Err` names a resource neither the node nor a class provides.
pub fn node_dra_resources(
    pod_resources: &BTreeMap<String, (i64, Option<Arc<DeviceClass>>)>,
    allocatable: &BTreeMap<String, i64>,
) -> Result<BTreeMap<String, Arc<DeviceClass>>, String> {
    let mut out = BTreeMap::new();
    for (name, (q, class)) in pod_resources {
        if *q == 0 {
            continue;
        }
        let listed = allocatable.get(name);
        match class {
            Some(c) if listed.copied().unwrap_or(0) == 0 => {
                out.insert(name.clone(), c.clone());
            }
            _ if listed.is_none() => return Err(name.clone()),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testutil::pod;
    use serde_json::json;

    fn class(name: &str, extended: Option<&str>, created: &str) -> (String, Arc<DeviceClass>) {
        let mut v = json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {}});
        if let Some(e) = extended {
            v["spec"]["extendedResourceName"] = json!(e);
        }
        (name.to_string(), Arc::new(serde_json::from_value(v).unwrap()))
    }

    fn objects(classes: Vec<(String, Arc<DeviceClass>)>) -> ClusterObjects {
        ClusterObjects { device_classes: classes.into_iter().collect(), ..Default::default() }
    }

    fn name_of(c: Option<&Arc<DeviceClass>>) -> Option<&str> {
        c.and_then(|c| c.metadata.name.as_deref())
    }

    #[test]
    fn resource_names_map_to_classes_explicitly_or_by_the_implicit_name() {
        let o = objects(vec![
            class("gpu", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
            class("tpu", None, "2026-01-01T00:00:00Z"),
        ]);
        assert_eq!(name_of(device_class_for(&o, "example.com/gpu")), Some("gpu"));
        assert_eq!(name_of(device_class_for(&o, "deviceclass.resource.kubernetes.io/gpu")), Some("gpu"));
        assert_eq!(name_of(device_class_for(&o, "deviceclass.resource.kubernetes.io/tpu")), Some("tpu"));
        assert_eq!(name_of(device_class_for(&o, "example.com/tpu")), None, "no class names it");
        assert_eq!(name_of(device_class_for(&o, "deviceclass.resource.kubernetes.io/none")), None);
        assert!(is_dra_extended_resource_name("example.com/gpu"));
        assert!(is_dra_extended_resource_name("deviceclass.resource.kubernetes.io/tpu"));
        assert!(!is_dra_extended_resource_name("cpu"));
        assert!(!is_dra_extended_resource_name("hugepages-2Mi"));
        assert!(!is_dra_extended_resource_name("kubernetes.io/something"));
    }

    #[test]
    fn the_newest_class_wins_a_shared_name_and_then_the_first_by_name() {
        let o = objects(vec![
            class("old", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
            class("new-b", Some("example.com/gpu"), "2026-02-01T00:00:00Z"),
            class("new-a", Some("example.com/gpu"), "2026-02-01T00:00:00Z"),
        ]);
        assert_eq!(name_of(device_class_for(&o, "example.com/gpu")), Some("new-a"));
        // The loser still serves its implicit name.
        assert_eq!(name_of(device_class_for(&o, "deviceclass.resource.kubernetes.io/old")), Some("old"));
    }

    #[test]
    fn a_pod_needs_the_claim_only_for_a_mapped_resource() {
        let o = objects(vec![class("gpu", Some("example.com/gpu"), "2026-01-01T00:00:00Z")]);
        let p = |req: serde_json::Value| {
            pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": [
                {"name": "c", "resources": {"requests": req, "limits": req}}]}}))
        };
        assert!(pod_extended_resources(&p(json!({"example.com/fpga": "1"})), &o).is_empty());
        assert!(pod_extended_resources(&p(json!({"example.com/gpu": "0"})), &o).is_empty());
        let both = pod_extended_resources(&p(json!({"example.com/gpu": "2", "example.com/fpga": "1", "cpu": "1"})), &o);
        assert_eq!(both.keys().collect::<Vec<_>>(), ["example.com/fpga", "example.com/gpu"]);
        assert_eq!(both["example.com/gpu"].0, 2);
        assert!(both["example.com/fpga"].1.is_none());
    }

    #[test]
    fn requests_and_mappings_follow_upstream_s_naming_and_init_container_reuse() {
        let o = objects(vec![
            class("gpu", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
            class("tpu", None, "2026-01-01T00:00:00Z"),
        ]);
        let gpu = "example.com/gpu";
        let tpu = "deviceclass.resource.kubernetes.io/tpu";
        let req = |v: serde_json::Value| json!({"requests": v, "limits": v});
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {
            "initContainers": [
                {"name": "i0", "resources": req(json!({gpu: "3"}))},
                {"name": "i1", "resources": req(json!({gpu: "1"}))},
                {"name": "side", "restartPolicy": "Always", "resources": req(json!({tpu: "1"}))}],
            "containers": [
                {"name": "a", "resources": req(json!({"cpu": "1", gpu: "1", tpu: "2"}))},
                {"name": "b", "resources": req(json!({gpu: "1"}))}]}}));
        let resources: BTreeMap<String, Arc<DeviceClass>> =
            [gpu, tpu].into_iter().map(|n| (n.to_string(), device_class_for(&o, n).unwrap().clone())).collect();
        let (requests, mappings) = requests_and_mappings(&p, &resources);
        let got: Vec<(String, String, i64)> = requests
            .iter()
            .map(|r| {
                let e = r.exactly.as_ref().unwrap();
                (r.name.clone(), e.device_class_name.clone(), e.count.unwrap())
            })
            .collect();
        // i0 wants 3 GPUs: a's and b's (1 each, started after it) are not enough, so it asks for 1 more; i1's one
        // is covered by a's. The sidecar is long-lived: it gets a request of its own.
        let want: Vec<(String, String, i64)> = [
            ("container-0-request-0", "gpu", 1),
            ("container-2-request-0", "tpu", 1),
            ("container-3-request-1", "tpu", 2),
            ("container-3-request-2", "gpu", 1),
            ("container-4-request-0", "gpu", 1),
        ]
        .into_iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c))
        .collect();
        assert_eq!(got, want);
        let got: Vec<(&str, &str, &str)> = mappings
            .iter()
            .map(|m| (m.container_name.as_str(), m.resource_name.as_str(), m.request_name.as_str()))
            .collect();
        // Resources in name order (the implicit name sorts first); per resource, long-lived containers first.
        assert_eq!(
            got,
            [
                ("side", tpu, "container-2-request-0"),
                ("a", tpu, "container-3-request-1"),
                ("a", gpu, "container-3-request-2"),
                ("b", gpu, "container-4-request-0"),
                ("i0", gpu, "container-3-request-2"),
                ("i0", gpu, "container-4-request-0"),
                ("i0", gpu, "container-0-request-0"),
                ("i1", gpu, "container-3-request-2"),
            ]
        );
        assert!(requests.iter().all(|r| r.exactly.as_ref().unwrap().allocation_mode.as_deref() == Some("ExactCount")));
    }

    #[test]
    fn init_containers_share_their_largest_request() {
        let o = objects(vec![class("gpu", Some("example.com/gpu"), "2026-01-01T00:00:00Z")]);
        let gpu = "example.com/gpu";
        let req = |n: &str| json!({"requests": {gpu: n}, "limits": {gpu: n}});
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {
            "initContainers": [{"name": "i0", "resources": req("2")}, {"name": "i1", "resources": req("3")}],
            "containers": [{"name": "c", "resources": req("1")}]}}));
        let resources = [(gpu.to_string(), device_class_for(&o, gpu).unwrap().clone())].into();
        let (requests, mappings) = requests_and_mappings(&p, &resources);
        let got: Vec<(&str, i64)> =
            requests.iter().map(|r| (r.name.as_str(), r.exactly.as_ref().unwrap().count.unwrap())).collect();
        assert_eq!(got, [("container-1-request-0", 2), ("container-2-request-0", 1)]);
        let got: Vec<(&str, &str)> =
            mappings.iter().map(|m| (m.container_name.as_str(), m.request_name.as_str())).collect();
        assert_eq!(
            got,
            [
                ("c", "container-2-request-0"),
                ("i0", "container-2-request-0"),
                ("i0", "container-1-request-0"),
                ("i1", "container-2-request-0"),
                ("i1", "container-1-request-0"),
            ]
        );
    }

    #[test]
    fn a_node_s_device_plugin_serves_what_it_lists() {
        let o = objects(vec![class("gpu", Some("example.com/gpu"), "2026-01-01T00:00:00Z")]);
        let gpu = device_class_for(&o, "example.com/gpu").cloned();
        let asks: BTreeMap<String, (i64, Option<Arc<DeviceClass>>)> =
            [("example.com/gpu".to_string(), (1, gpu)), ("example.com/fpga".to_string(), (1, None))].into();
        let alloc = |v: &[(&str, i64)]| v.iter().map(|(n, q)| (n.to_string(), *q)).collect::<BTreeMap<_, _>>();
        let dra = |a: &[(&str, i64)]| node_dra_resources(&asks, &alloc(a)).map(|m| m.into_keys().collect::<Vec<_>>());
        assert_eq!(dra(&[("example.com/fpga", 1)]), Ok(vec!["example.com/gpu".to_string()]));
        assert_eq!(dra(&[("example.com/fpga", 1), ("example.com/gpu", 0)]), Ok(vec!["example.com/gpu".to_string()]));
        assert_eq!(dra(&[("example.com/fpga", 1), ("example.com/gpu", 4)]), Ok(vec![]), "the device plugin wins");
        assert_eq!(dra(&[]), Err("example.com/fpga".to_string()), "neither the node nor a class has it");
    }
}
