//! Dynamic resource allocation on a real API server: a ResourceSlice offers a device on one node; a pod's
//! ResourceClaim asks for one device of a DeviceClass (a CEL selector on the driver and an attribute). The scheduler
//! allocates it, writes the allocation and the pod's reservation on the claim, and binds the pod to the node that
//! has the device. This control plane runs no DRA driver, nor kubelets: nothing prepares the device, which the
//! scheduler does not wait for.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-dra";
const SCHEDULER: &str = "dra-scheduler";
const DRIVER: &str = "gpu.e2e.example";

fn create<K>(k: &Kube, api: &Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(v).unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &o)).unwrap()
}

/// Starts a scheduler with one profile named SCHEDULER, its config and log named after `name`, and waits until it
/// is ready.
fn start_scheduler(cp: &ControlPlane, work: &Path, name: &str) -> Scheduler {
    let profile = write_profile(work, &format!("{name}.yaml"), &format!("profiles:\n- schedulerName: {SCHEDULER}\n"));
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join(format!("{name}.log")));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    s
}

/// Creates a DeviceClass selecting devices by one CEL expression.
fn device_class(k: &Kube, name: &str, expression: String) {
    let classes: Api<DeviceClass> = Api::all(k.client.clone());
    create::<DeviceClass>(
        k,
        &classes,
        json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}),
    );
}

pub(crate) fn a_claimed_device_is_allocated_on_the_claim_and_the_pod_bound_to_its_node(
    cp: &ControlPlane,
    k: &Kube,
    work: &Path,
) {
    k.namespace(NS);
    k.node("dra-a", json!({"e2e": "dra"}));
    k.node("dra-b", json!({"e2e": "dra"}));
    device_class(
        k,
        "e2e-gpu",
        format!("device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].model == \"A100\""),
    );
    let slices: Api<ResourceSlice> = Api::all(k.client.clone());
    create(
        k,
        &slices,
        json!({"metadata": {"name": "dra-b-gpus"}, "spec": {"driver": DRIVER, "nodeName": "dra-b",
            "pool": {"name": "dra-b", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"model": {"string": "T4"}}},
                {"name": "gpu-1", "attributes": {"model": {"string": "A100"}}}]}}),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(k.client.clone(), NS);
    create(
        k,
        &claims,
        json!({"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "e2e-gpu"}}]}}}),
    );

    let s = start_scheduler(cp, work, "dra");

    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let pod = create(
        k,
        &pods,
        json!({"metadata": {"name": "trainer"}, "spec": {"schedulerName": SCHEDULER,
            "nodeSelector": {"e2e": "dra"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
            "containers": [{"name": "c", "image": "registry.invalid/pause",
                "resources": {"claims": [{"name": "gpu"}]}}]}}),
    );
    assert_eq!(k.wait_bound(NS, "trainer"), "dra-b", "only dra-b has the device:\n{}", s.log());

    let claim = k.rt.block_on(claims.get("gpu")).unwrap();
    let status = claim.status.expect("the claim has a status");
    let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
    let devices: Vec<(&str, &str, &str)> =
        results.iter().map(|r| (r.driver.as_str(), r.pool.as_str(), r.device.as_str())).collect();
    assert_eq!(devices, [(DRIVER, "dra-b", "gpu-1")], "the A100, not the T4");
    let reserved = status.reserved_for.unwrap_or_default();
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert_eq!((reserved[0].resource.as_str(), reserved[0].name.as_str()), ("pods", "trainer"));
    assert_eq!(Some(reserved[0].uid.as_str()), pod.metadata.uid.as_deref());
    assert!(
        claim.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "resource.kubernetes.io/delete-protection"),
        "the allocated claim is protected from deletion"
    );
}

/// v1.37's defaults on a real API server: a DeviceTaintRule (resource.k8s.io/v1) taints dra-t1's device, so a claim
/// that does not tolerate it gets dra-t2's; a claim that tolerates the taint then gets dra-t1's. A claim whose
/// `firstAvailable` prefers an A100 then lands on the node that has one, though a T4 elsewhere would also do
/// (Score ranks the sub-request taken).
pub(crate) fn device_taint_rules_tolerations_and_first_available_ranking(cp: &ControlPlane, k: &Kube, work: &Path) {
    const NS: &str = "e2e-dra-taints";
    const DRIVER: &str = "taint.e2e.example";
    k.namespace(NS);
    for n in ["dra-t1", "dra-t2", "dra-s1", "dra-s2"] {
        k.node(n, json!({"e2e": "dra-taints"}));
    }
    device_class(k, "e2e-taint-gpu", format!("device.driver == \"{DRIVER}\""));
    device_class(
        k,
        "e2e-taint-a100",
        format!("device.driver == \"{DRIVER}\" && device.attributes[\"{DRIVER}\"].model == \"A100\""),
    );
    let slices: Api<ResourceSlice> = Api::all(k.client.clone());
    for (node, model) in [("dra-t1", "T4"), ("dra-t2", "T4"), ("dra-s1", "T4"), ("dra-s2", "A100")] {
        create(
            k,
            &slices,
            json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {"driver": DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": model}}}]}}),
        );
    }
    let rules: Api<DeviceTaintRule> = Api::all(k.client.clone());
    create(
        k,
        &rules,
        json!({"metadata": {"name": "dra-t1-maintenance"}, "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "dra-t1"},
            "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(k.client.clone(), NS);
    let request = |extra: serde_json::Value| {
        let mut e = json!({"deviceClassName": "e2e-taint-gpu"});
        e.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!([{"name": "gpu", "exactly": e}])
    };
    create(k, &claims, json!({"metadata": {"name": "plain"}, "spec": {"devices": {"requests": request(json!({}))}}}));
    create(
        k,
        &claims,
        json!({"metadata": {"name": "tolerant"}, "spec": {"devices": {"requests": request(json!({"tolerations":
            [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]}))}}}),
    );
    create(
        k,
        &claims,
        json!({"metadata": {"name": "ranked"}, "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "a100", "deviceClassName": "e2e-taint-a100"},
            {"name": "any", "deviceClassName": "e2e-taint-gpu"}]}]}}}),
    );

    let s = start_scheduler(cp, work, "dra-taints");

    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let pod = |name: &str, claim: &str, nodes: &[&str]| {
        // A field selector term names one node; terms are ORed.
        let terms: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}))
            .collect();
        create::<Pod>(
            k,
            &pods,
            json!({"metadata": {"name": name}, "spec": {"schedulerName": SCHEDULER,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}},
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                "containers": [{"name": "c", "image": "registry.invalid/pause",
                    "resources": {"claims": [{"name": "gpu"}]}}]}}),
        )
    };
    pod("plain", "plain", &["dra-t1", "dra-t2"]);
    assert_eq!(k.wait_bound(NS, "plain"), "dra-t2", "the rule taints dra-t1's device:\n{}", s.log());
    pod("tolerant", "tolerant", &["dra-t1", "dra-t2"]);
    assert_eq!(k.wait_bound(NS, "tolerant"), "dra-t1", "the claim tolerates the rule's taint:\n{}", s.log());
    pod("ranked", "ranked", &["dra-s1", "dra-s2"]);
    assert_eq!(k.wait_bound(NS, "ranked"), "dra-s2", "the first choice scores higher:\n{}", s.log());
    let claim = k.rt.block_on(claims.get("tolerant")).unwrap();
    let results = claim.status.and_then(|s| s.allocation).and_then(|a| a.devices).and_then(|d| d.results);
    let tolerations = results.unwrap_or_default().into_iter().next().and_then(|r| r.tolerations).unwrap_or_default();
    assert_eq!(tolerations.len(), 1, "the allocation records the toleration");
}

/// DRADeviceBindingConditions (on since v1.36): the device the claim gets has a binding condition, so the
/// scheduler writes the allocation and then waits in PreBind; the pod is bound only once the driver (this test)
/// reports the condition true in the claim's device status.
pub(crate) fn binding_conditions_hold_the_pod_until_the_device_is_attached(cp: &ControlPlane, k: &Kube, work: &Path) {
    const NS: &str = "e2e-dra-binding";
    const DRIVER: &str = "attach.e2e.example";
    k.namespace(NS);
    k.node("dra-c1", json!({"e2e": "dra-binding"}));
    device_class(k, "e2e-attach-gpu", format!("device.driver == \"{DRIVER}\""));
    let slices: Api<ResourceSlice> = Api::all(k.client.clone());
    create(
        k,
        &slices,
        json!({"metadata": {"name": "dra-c1-gpus"}, "spec": {"driver": DRIVER, "nodeName": "dra-c1",
            "pool": {"name": "dra-c1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "bindsToNode": true,
                "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}]}}),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(k.client.clone(), NS);
    create(
        k,
        &claims,
        json!({"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "e2e-attach-gpu"}}]}}}),
    );
    let s = start_scheduler(cp, work, "dra-binding");
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    create::<Pod>(
        k,
        &pods,
        json!({"metadata": {"name": "attached"}, "spec": {"schedulerName": SCHEDULER,
            "nodeSelector": {"e2e": "dra-binding"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
            "containers": [{"name": "c", "image": "registry.invalid/pause",
                "resources": {"claims": [{"name": "gpu"}]}}]}}),
    );
    // The allocation is written (with the device's conditions and a timestamp), the pod not yet bound.
    let claim = wait_until("the claim's allocation", Duration::from_secs(60), || {
        let c = k.rt.block_on(claims.get("gpu")).ok()?;
        c.status.as_ref()?.allocation.as_ref()?;
        Some(c)
    });
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).unwrap();
    assert!(allocation.allocation_timestamp.is_some(), "{allocation:?}");
    let result = &allocation.devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(result.binding_conditions.as_deref(), Some(&["Attached".to_string()][..]));
    std::thread::sleep(Duration::from_secs(2));
    let pending = k.rt.block_on(pods.get("attached")).unwrap();
    assert_eq!(pending.spec.and_then(|s| s.node_name), None, "bound before the device was attached:\n{}", s.log());
    // The driver's part: the device is attached.
    let mut c = claim.clone();
    c.status.as_mut().unwrap().devices = Some(vec![serde_json::from_value(json!({"driver": DRIVER, "pool": "dra-c1",
        "device": "gpu-0", "conditions": [{"type": "Attached", "status": "True", "reason": "Attached",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
    .unwrap()]);
    k.rt.block_on(claims.replace_status("gpu", &PostParams::default(), &c)).unwrap();
    assert_eq!(k.wait_bound(NS, "attached"), "dra-c1", "bound once attached:\n{}", s.log());
}

/// DRAExtendedResource (GA and locked on in v1.37): a pod asks for `example.com/xgpu: 1`, an extended resource no
/// node lists in its allocatable but that a DeviceClass provides (`spec.extendedResourceName`). The scheduler
/// binds it to the node whose ResourceSlice has a matching device, through a ResourceClaim it creates as
/// kube-scheduler v1.37.2 does (generated name, owned by the pod, annotated, allocated and reserved), and names
/// that claim in the pod's `status.extendedResourceClaimStatus`. A second such pod finds no free device: it stays
/// pending with kube-scheduler's message.
pub(crate) fn an_extended_resource_a_device_class_provides_binds_through_a_claim_the_scheduler_creates(
    cp: &ControlPlane,
    k: &Kube,
    work: &Path,
) {
    const NS: &str = "e2e-dra-extended";
    const DRIVER: &str = "xgpu.e2e.example";
    const RESOURCE: &str = "example.com/xgpu";
    k.namespace(NS);
    k.node("dra-x1", json!({"e2e": "dra-extended"}));
    k.node("dra-x2", json!({"e2e": "dra-extended"}));
    let classes: Api<DeviceClass> = Api::all(k.client.clone());
    create::<DeviceClass>(
        k,
        &classes,
        json!({"metadata": {"name": "e2e-xgpu"}, "spec": {"extendedResourceName": RESOURCE,
            "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    );
    let slices: Api<ResourceSlice> = Api::all(k.client.clone());
    create(
        k,
        &slices,
        json!({"metadata": {"name": "dra-x2-xgpus"}, "spec": {"driver": DRIVER, "nodeName": "dra-x2",
            "pool": {"name": "dra-x2", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "xgpu-0"}]}}),
    );
    let s = start_scheduler(cp, work, "dra-extended");

    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let pod = |name: &str| {
        create::<Pod>(
            k,
            &pods,
            json!({"metadata": {"name": name}, "spec": {"schedulerName": SCHEDULER,
                "nodeSelector": {"e2e": "dra-extended"},
                "containers": [{"name": "c", "image": "registry.invalid/pause",
                    "resources": {"requests": {RESOURCE: "1"}, "limits": {RESOURCE: "1"}}}]}}),
        )
    };
    let first = pod("xgpu-1");
    assert_eq!(k.wait_bound(NS, "xgpu-1"), "dra-x2", "only dra-x2 has an xgpu device:\n{}", s.log());

    // The claim, as kube-scheduler writes it.
    let claims: Api<ResourceClaim> = Api::namespaced(k.client.clone(), NS);
    let list = k.rt.block_on(claims.list(&Default::default())).unwrap().items;
    assert_eq!(list.len(), 1, "one claim, made by the scheduler: {list:?}");
    let claim = serde_json::to_value(&list[0]).unwrap();
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("xgpu-1-extended-resources-") && name.len() == "xgpu-1-extended-resources-".len() + 5);
    assert_eq!(claim["metadata"]["generateName"], "xgpu-1-extended-resources-");
    assert_eq!(claim["metadata"]["annotations"], json!({"resource.kubernetes.io/extended-resource-claim": "true"}));
    let uid = first.metadata.uid.clone().unwrap();
    assert_eq!(
        claim["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "xgpu-1", "uid": uid, "controller": true}])
    );
    assert_eq!(claim["metadata"]["finalizers"], json!(["resource.kubernetes.io/delete-protection"]));
    assert_eq!(
        claim["spec"],
        json!({"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": "e2e-xgpu", "allocationMode": "ExactCount", "count": 1}}]}})
    );
    let allocation = &claim["status"]["allocation"];
    assert!(allocation["allocationTimestamp"].is_string(), "{allocation}");
    assert_eq!(
        allocation["devices"],
        json!({"results": [{"request": "container-0-request-0", "driver": DRIVER, "pool": "dra-x2", "device": "xgpu-0"}]})
    );
    assert_eq!(
        allocation["nodeSelector"],
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["dra-x2"]}]}]})
    );
    assert_eq!(claim["status"]["reservedFor"], json!([{"resource": "pods", "name": "xgpu-1", "uid": uid}]));
    // The pod names it, and which container's resource its request serves.
    let bound = serde_json::to_value(k.rt.block_on(pods.get("xgpu-1")).unwrap()).unwrap();
    assert_eq!(
        bound["status"]["extendedResourceClaimStatus"],
        json!({"resourceClaimName": name, "requestMappings": [
            {"containerName": "c", "resourceName": RESOURCE, "requestName": "container-0-request-0"}]})
    );

    // No device left: the second pod waits, with kube-scheduler's words. The nodes of other scenarios fail the
    // node selector.
    pod("xgpu-2");
    let cond = wait_until("PodScheduled=False", Duration::from_secs(30), || {
        let p = k.rt.block_on(pods.get("xgpu-2")).ok()?;
        p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")
    });
    let nodes = k.rt.block_on(Api::<k8s_openapi::api::core::v1::Node>::all(k.client.clone()).list(&Default::default()));
    let n = nodes.unwrap().items.len();
    let mut reasons = vec!["2 cannot allocate all claims".to_string()];
    if n > 2 {
        reasons.push(format!("{} node(s) didn't match Pod's node affinity/selector", n - 2));
    }
    reasons.sort();
    let want = format!(
        "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for \
         scheduling.",
        reasons.join(", ")
    );
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(cond.message.as_deref(), Some(want.as_str()), "{}", s.log());
    let list = k.rt.block_on(claims.list(&Default::default())).unwrap().items;
    assert_eq!(list.len(), 1, "no claim is made for a pod that found no device");
    assert_eq!(k.node_of(NS, "xgpu-2"), None);
}
