//! Unit tests of DynamicResources, after upstream's `dynamicresources_test.go` and the structured allocator's
//! shared test cases.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use serde_json::{json, Value};

use super::allocator::{Allocator, DeviceId};
use super::cel::CelCache;
use super::*;
use crate::cluster::memory::MemoryCluster;
use crate::framework::labels::Labels;
use crate::framework::{ClusterObjects, Code};
use crate::plugins::testutil::{node, pod};

const DRIVER: &str = "gpu.example.com";

fn class(name: &str, selectors: &[&str]) -> (String, Arc<DeviceClass>) {
    let sel: Vec<Value> = selectors.iter().map(|e| json!({"cel": {"expression": e}})).collect();
    (
        name.into(),
        Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": sel}})).unwrap()),
    )
}

/// A slice of `n` GPUs named `<pool>-gpu-<i>` with a `model` attribute, local to `node` (or on all nodes).
fn slice(pool: &str, node: Option<&str>, generation: i64, count: i64, devices: Value) -> Arc<ResourceSlice> {
    let mut spec = json!({"driver": DRIVER, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices});
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        None => spec["allNodes"] = json!(true),
    }
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{pool}-{generation}")}, "spec": spec})).unwrap(),
    )
}

fn gpus(pool: &str, n: usize, model: &str) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"name": format!("{pool}-gpu-{i}"), "attributes": {"model": {"string": model}, "index": {"int": i}},
                "capacity": {"memory": {"value": "40Gi"}}}))
            .collect(),
    )
}

fn claim(name: &str, devices: Value) -> Arc<ResourceClaim> {
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"devices": devices}}),
        )
        .unwrap(),
    )
}

fn exactly(class: &str, extra: Value) -> Value {
    let mut e = json!({"deviceClassName": class});
    if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({"requests": [{"name": "req-0", "exactly": e}]})
}

fn ids(result: &AllocationResult) -> Vec<String> {
    result.devices.as_ref().and_then(|d| d.results.as_ref()).unwrap().iter().map(|r| r.device.clone()).collect()
}

fn allocate(
    slices: &[Arc<ResourceSlice>],
    allocated: &[&str],
    claims: &[Arc<ResourceClaim>],
    node_name: &str,
) -> Result<Option<Vec<Vec<String>>>, String> {
    let classes = [
        class("gpu", &[&format!("device.driver == \"{DRIVER}\"")]),
        class("a100", &[r#"device.attributes["gpu.example.com"].model == "a100""#]),
        class("broken", &["device.attributes[\"gpu.example.com\"].missing"]),
    ]
    .into_iter()
    .collect();
    let mut held = HeldDevices::default();
    for d in allocated {
        let (pool, device) = d.split_once('/').unwrap();
        held.hold(DeviceId { driver: DRIVER.into(), pool: pool.into(), device: device.into() }, 1);
    }
    let cel = CelCache::default();
    let a = Allocator {
        allocated: AllocatedDevices { api: &held, ours: &HeldDevices::default() },
        classes: &classes,
        slices,
        by_node: &allocator::SlicesByNode::new(slices),
        taint_rules: &[],
        cel: &cel,
        features: Default::default(),
    };
    a.allocate(node_name, &Labels::new(), claims).map(|r| r.map(|v| v.iter().map(ids).collect())).map_err(|e| e.0)
}

#[test]
fn allocator_counts_modes_selectors_and_pools() {
    let local = |n: usize| slice("n1", Some("n1"), 1, 1, gpus("n1", n, "a100"));
    type Want = Result<Option<Vec<Vec<&'static str>>>, &'static str>;
    type Case = (&'static str, Vec<Arc<ResourceSlice>>, Vec<&'static str>, Vec<Arc<ResourceClaim>>, Want);
    let cases: Vec<Case> = vec![
        ("one device by default", vec![local(2)], vec![], vec![claim("c", exactly("gpu", json!({})))], Ok(Some(vec![vec!["n1-gpu-0"]]))),
        (
            "exact count",
            vec![local(4)],
            vec![],
            vec![claim("c", exactly("gpu", json!({"count": 2})))],
            Ok(Some(vec![vec!["n1-gpu-0", "n1-gpu-1"]])),
        ),
        ("too few devices", vec![local(1)], vec![], vec![claim("c", exactly("gpu", json!({"count": 2})))], Ok(None)),
        (
            "allocated devices are skipped",
            vec![local(2)],
            vec!["n1/n1-gpu-0"],
            vec![claim("c", exactly("gpu", json!({})))],
            Ok(Some(vec![vec!["n1-gpu-1"]])),
        ),
        (
            "all allocated",
            vec![local(1)],
            vec!["n1/n1-gpu-0"],
            vec![claim("c", exactly("gpu", json!({})))],
            Ok(None),
        ),
        (
            "admin access sees devices others hold",
            vec![local(1)],
            vec!["n1/n1-gpu-0"],
            vec![claim("c", exactly("gpu", json!({"adminAccess": true})))],
            Ok(Some(vec![vec!["n1-gpu-0"]])),
        ),
        (
            "All mode takes every device",
            vec![local(3)],
            vec![],
            vec![claim("c", exactly("gpu", json!({"allocationMode": "All"})))],
            Ok(Some(vec![vec!["n1-gpu-0", "n1-gpu-1", "n1-gpu-2"]])),
        ),
        (
            "All mode with one device taken",
            vec![local(2)],
            vec!["n1/n1-gpu-1"],
            vec![claim("c", exactly("gpu", json!({"allocationMode": "All"})))],
            Ok(None),
        ),
        ("All mode with no devices", vec![], vec![], vec![claim("c", exactly("gpu", json!({"allocationMode": "All"})))], Ok(None)),
        (
            "request selector true",
            vec![local(2)],
            vec![],
            vec![claim("c", exactly("gpu", json!({"selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].index == 1"}}]})))],
            Ok(Some(vec![vec!["n1-gpu-1"]])),
        ),
        (
            "class selector false",
            vec![slice("n1", Some("n1"), 1, 1, gpus("n1", 2, "t4"))],
            vec![],
            vec![claim("c", exactly("a100", json!({})))],
            Ok(None),
        ),
        (
            "selector runtime error",
            vec![local(1)],
            vec![],
            vec![claim("c", exactly("broken", json!({})))],
            Err("class broken: selector #0: CEL runtime error: no such key: missing"),
        ),
        (
            "claim selector compile error",
            vec![local(1)],
            vec![],
            vec![claim("c", exactly("gpu", json!({"selectors": [{"cel": {"expression": "device.driver =="}}]})))],
            Err("claim default/c: selector #0: CEL compile error: compilation failed"),
        ),
        ("another node's slice", vec![slice("n2", Some("n2"), 1, 1, gpus("n2", 2, "a100"))], vec![], vec![claim("c", exactly("gpu", json!({})))], Ok(None)),
        (
            "network-attached slice",
            vec![slice("net", None, 1, 1, gpus("net", 1, "a100"))],
            vec![],
            vec![claim("c", exactly("gpu", json!({})))],
            Ok(Some(vec![vec!["net-gpu-0"]])),
        ),
        (
            "only the newest generation counts",
            vec![slice("n1", Some("n1"), 1, 1, gpus("n1", 4, "a100")), slice("n1", Some("n1"), 2, 1, gpus("n1", 1, "a100"))],
            vec![],
            vec![claim("c", exactly("gpu", json!({"count": 2})))],
            Ok(None),
        ),
        (
            // Upstream's "no-allocation-from-incomplete-pools" (v1.37; v1.34 took the devices it saw).
            "an incomplete pool serves nothing",
            vec![slice("n1", Some("n1"), 1, 2, gpus("n1", 1, "a100"))],
            vec![],
            vec![claim("c", exactly("gpu", json!({})))],
            Ok(None),
        ),
        (
            "incomplete pool refuses All",
            vec![slice("n1", Some("n1"), 1, 2, gpus("n1", 1, "a100"))],
            vec![],
            vec![claim("c", exactly("gpu", json!({"allocationMode": "All"})))],
            Err("claim default/c, request req-0: asks for all devices, but resource pool gpu.example.com/n1 is currently being updated"),
        ),
        (
            "two claims share no device",
            vec![local(2)],
            vec![],
            vec![claim("a", exactly("gpu", json!({}))), claim("b", exactly("gpu", json!({})))],
            Ok(Some(vec![vec!["n1-gpu-0"], vec!["n1-gpu-1"]])),
        ),
        (
            "first available falls back",
            vec![local(1)],
            vec![],
            vec![claim("c", json!({"requests": [{"name": "r", "firstAvailable": [
                {"name": "two", "deviceClassName": "gpu", "count": 2},
                {"name": "one", "deviceClassName": "gpu"}]}]}))],
            Ok(Some(vec![vec!["n1-gpu-0"]])),
        ),
        (
            "match attribute",
            vec![slice("n1", Some("n1"), 1, 1, json!([
                {"name": "a", "attributes": {"numa": {"int": 0}}},
                {"name": "b", "attributes": {"numa": {"int": 1}}},
                {"name": "c", "attributes": {"numa": {"int": 1}}}]))],
            vec![],
            vec![claim("c", json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}],
                "constraints": [{"matchAttribute": "gpu.example.com/numa"}]}))],
            Ok(Some(vec![vec!["b", "c"]])),
        ),
        (
            "missing class",
            vec![local(1)],
            vec![],
            vec![claim("c", exactly("nope", json!({})))],
            Err("claim default/c, request req-0: could not retrieve device class nope: deviceclass.resource.k8s.io \"nope\" not found"),
        ),
    ];
    for (name, slices, allocated, claims, want) in cases {
        let got = allocate(&slices, &allocated, &claims, "n1");
        let want = want.map(|o| o.map(|v| v.into_iter().map(|d| d.into_iter().map(String::from).collect()).collect()));
        match (&got, &want) {
            (Err(g), Err(w)) => assert!(g.starts_with(*w), "{name}: {g}"),
            _ => assert_eq!(got, want.map_err(String::from), "{name}"),
        }
    }
}

/// The allocation results on n1 with class "gpu" (any device), no taint rules, and `shared` devices' capacity.
fn results_on_n1(
    slices: &[Arc<ResourceSlice>],
    shared: &HeldDevices,
    claims: &[Arc<ResourceClaim>],
) -> Result<Option<Vec<AllocationResult>>, String> {
    let classes = [class("gpu", &[])].into_iter().collect();
    let cel = CelCache::default();
    let a = Allocator {
        allocated: AllocatedDevices { api: shared, ours: &HeldDevices::default() },
        classes: &classes,
        slices,
        by_node: &allocator::SlicesByNode::new(slices),
        taint_rules: &[],
        cel: &cel,
        features: Default::default(),
    };
    a.allocate("n1", &Labels::new(), claims).map_err(|e| e.0)
}

#[test]
fn allocation_results_name_the_node_of_local_devices() {
    let slices = [slice("n1", Some("n1"), 1, 1, gpus("n1", 1, "a100"))];
    let r = results_on_n1(&slices, &HeldDevices::default(), &[claim("c", exactly("gpu", json!({})))]).unwrap().unwrap();
    let sel = r[0].node_selector.as_ref().unwrap();
    let field = &sel.node_selector_terms[0].match_fields.as_ref().unwrap()[0];
    assert_eq!((field.key.as_str(), field.values.as_deref()), ("metadata.name", Some(&["n1".to_string()][..])));
    assert_eq!(r[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0].request, "req-0");
}

/// A cluster with nodes n1 (2 GPUs) and n2 (4 GPUs), class `gpu`, and claims.
fn objects(claims: Vec<Arc<ResourceClaim>>) -> ClusterObjects {
    let mut o = ClusterObjects::default();
    o.device_classes.extend([class("gpu", &[])]);
    o.resource_slices = vec![
        slice("n1", Some("n1"), 1, 1, gpus("n1", 2, "a100")),
        slice("n2", Some("n2"), 1, 1, gpus("n2", 4, "a100")),
    ];
    o.resource_claims =
        claims.into_iter().map(|c| (format!("default/{}", c.metadata.name.as_deref().unwrap()), c)).collect();
    o
}

fn snapshot(o: ClusterObjects) -> Snapshot {
    let mut s = Snapshot::default();
    s.objects = Arc::new(o);
    s
}

fn pod_with(name: &str, claims: Value, statuses: Value) -> PodInfo {
    pod(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses}}))
}

fn n(name: &str) -> NodeInfo {
    node(json!({"metadata": {"name": name}}))
}

fn plugin() -> (DynamicResources, Arc<MemoryCluster>) {
    let cluster = Arc::new(MemoryCluster::default());
    let ctx = PluginContext::new(cluster.clone());
    (DynamicResources::new(None, &ctx).unwrap(), cluster)
}

#[test]
fn pods_without_claims_cost_nothing() {
    let (pl, _) = plugin();
    let p = pod(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}));
    assert!(pl.pre_enqueue(&p).is_success());
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snapshot(objects(vec![]))).1.is_skip());
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
    assert!(pl.pre_bind_pre_flight(&state, &p, "n1").is_skip());
    let nodes = NodeToStatus::new();
    let (_, st) = pl.post_filter(&state, &p, &nodes, &NoHandle);
    assert_eq!((st.code(), st.message()), (Code::Unschedulable, String::new()));
}

struct NoHandle;
impl PostFilterHandle for NoHandle {
    fn snapshot(&self) -> &Snapshot {
        unreachable!("DynamicResources' PostFilter reads no snapshot")
    }
    fn run_filter_plugins_with_nominated_pods(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        unreachable!()
    }
    fn run_pre_filter_add_pod(&self, _: &mut CycleState, _: &PodInfo, _: &Arc<PodInfo>, _: &NodeInfo) -> Status {
        unreachable!()
    }
    fn run_pre_filter_remove_pod(&self, _: &mut CycleState, _: &PodInfo, _: &Arc<PodInfo>, _: &NodeInfo) -> Status {
        unreachable!()
    }
    fn random(&self, _: usize) -> usize {
        0
    }
}

#[test]
fn pre_filter_reasons_are_upstream_s() {
    let two = claim("two", exactly("gpu", json!({"count": 2})));
    let mut deleted = (*claim("gone", exactly("gpu", json!({})))).clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    let not_owned = claim("p-gen", exactly("gpu", json!({})));
    let no_class = claim("noclass", exactly("nope", json!({})));
    let snap = snapshot(objects(vec![two, Arc::new(deleted), not_owned, no_class]));
    let cases = [
        (
            "missing claim",
            json!([{"name": "r", "resourceClaimName": "ghost"}]),
            json!([]),
            r#"could not find ResourceClaim "default/ghost""#,
        ),
        (
            "template claim not created yet",
            json!([{"name": "r", "resourceClaimTemplateName": "t"}]),
            json!([]),
            r#"pod "default/p": ResourceClaim not created yet"#,
        ),
        (
            "being deleted",
            json!([{"name": "r", "resourceClaimName": "gone"}]),
            json!([]),
            r#"resourceclaim "gone" is being deleted"#,
        ),
        (
            "generated claim not owned",
            json!([{"name": "r", "resourceClaimTemplateName": "t"}]),
            json!([{"name": "r", "resourceClaimName": "p-gen"}]),
            "ResourceClaim default/p-gen was not created for pod default/p (pod is not owner)",
        ),
        (
            "missing class",
            json!([{"name": "r", "resourceClaimName": "noclass"}]),
            json!([]),
            "request req-0: device class nope does not exist",
        ),
    ];
    for (name, claims, statuses, want) in cases {
        let (pl, _) = plugin();
        let p = pod_with("p", claims, statuses);
        let (_, st) = pl.pre_filter(&mut CycleState::new(), &p, &snap);
        assert_eq!((st.code(), st.message()), (Code::UnschedulableAndUnresolvable, want.to_string()), "{name}");
    }
}

#[test]
fn filter_allocates_per_node_and_reserve_holds_the_devices_for_the_next_pod() {
    let (pl, _) = plugin();
    let snap = snapshot(objects(vec![
        claim("a", exactly("gpu", json!({"count": 2}))),
        claim("b", exactly("gpu", json!({"count": 2}))),
    ]));
    let first = pod_with("first", json!([{"name": "r", "resourceClaimName": "a"}]), json!([]));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &first, &snap).1.is_success());
    assert!(pl.filter(&state, &first, &n("n1")).is_success());
    assert!(pl.reserve(&mut state, &first, "n1").is_success());
    // The next pod's cycle sees n1's two GPUs taken, before any claim shows it.
    let second = pod_with("second", json!([{"name": "r", "resourceClaimName": "b"}]), json!([]));
    let mut s2 = CycleState::new();
    assert!(pl.pre_filter(&mut s2, &second, &snap).1.is_success());
    assert_eq!(pl.filter(&s2, &second, &n("n1")).message(), ERR_REASON_CANNOT_ALLOCATE);
    assert!(pl.filter(&s2, &second, &n("n2")).is_success());
    // A pod using the claim in flight waits for it.
    let third = pod_with("third", json!([{"name": "r", "resourceClaimName": "a"}]), json!([]));
    let (_, st) = pl.pre_filter(&mut CycleState::new(), &third, &snap);
    assert_eq!(st.message(), "resource claim default/a is in the process of being allocated");
    // Unreserve releases them.
    pl.unreserve(&mut state, &first, "n1");
    let mut s3 = CycleState::new();
    assert!(pl.pre_filter(&mut s3, &second, &snap).1.is_success());
    assert!(pl.filter(&s3, &second, &n("n1")).is_success());
}

#[test]
fn pre_bind_writes_allocation_and_reservation() {
    let (pl, cluster) = plugin();
    let o = objects(vec![claim("a", exactly("gpu", json!({"count": 2})))]);
    cluster.set_objects(o.clone());
    let snap = snapshot(o);
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "a"}]), json!([]));
    let mut state = CycleState::new();
    pl.pre_filter(&mut state, &p, &snap);
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    assert!(pl.filter(&state, &p, &n("n2")).is_success());
    assert!(pl.reserve(&mut state, &p, "n2").is_success());
    {
        // The binding cycle keeps only the chosen node's allocation, not Filter's for every node nor the
        // allocator's inputs.
        let State(s) = state.read::<State>(NAME).unwrap();
        assert!(s.allocation.is_none(), "the allocator's inputs dropped at Reserve");
        assert_eq!(s.by_node.lock().unwrap().keys().collect::<Vec<_>>(), ["n2"]);
    }
    assert!(pl.pre_bind_pre_flight(&state, &p, "n2").is_success());
    let st = pl.pre_bind(&state, &p, "n2");
    assert!(st.is_success(), "{st}");
    let State(s) = state.read::<State>(NAME).unwrap().clone();
    let written = s.written.lock().unwrap()[&0].clone();
    let status = written.status.as_ref().unwrap();
    assert_eq!(ids(status.allocation.as_ref().unwrap()), ["n2-gpu-0", "n2-gpu-1"]);
    assert_eq!(status.reserved_for.as_ref().unwrap()[0].uid, "uid-p");
    assert!(written.metadata.finalizers.as_ref().unwrap().contains(&FINALIZER.to_string()));
    assert!(pl.tracker().in_flight.is_empty(), "no longer in flight");
    // The written claim stands until the informers show it: its devices stay taken for the next pod.
    let q = pod_with("q", json!([{"name": "r", "resourceClaimName": "b"}]), json!([]));
    let mut o2 = (*snap.objects).clone();
    o2.resource_claims.insert("default/b".into(), claim("b", exactly("gpu", json!({"count": 3}))));
    let mut s2 = CycleState::new();
    pl.pre_filter(&mut s2, &q, &snapshot(o2));
    assert_eq!(pl.filter(&s2, &q, &n("n2")).message(), ERR_REASON_CANNOT_ALLOCATE);
}

/// Claim `name` asking for one GPU, allocated n1's first GPU and pinned to n1.
fn allocated_on_n1(name: &str) -> ResourceClaim {
    let mut c = (*claim(name, exactly("gpu", json!({})))).clone();
    c.status = Some(
        serde_json::from_value(json!({"allocation": {"devices": {"results": [
            {"request": "req-0", "driver": DRIVER, "pool": "n1", "device": "n1-gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}))
        .unwrap(),
    );
    c
}

#[test]
fn an_allocated_claim_keeps_the_pod_on_its_node() {
    let (pl, _) = plugin();
    let c = allocated_on_n1("a");
    let snap = snapshot(objects(vec![Arc::new(c)]));
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "a"}]), json!([]));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    let st = pl.filter(&state, &p, &n("n2"));
    assert_eq!((st.code(), st.message()), (Code::UnschedulableAndUnresolvable, ERR_REASON_NOT_AVAILABLE.to_string()));
    // Reserve has nothing to allocate; PostFilter would deallocate the idle claim.
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
}

/// Allocates on n1 with `shared` devices already holding capacity: per claim, (device, share ID set, consumed).
/// Per claim, per device: (device, has a share ID, memory consumed as written).
type SharedPicks = Option<Vec<Vec<(String, bool, Option<String>)>>>;

fn allocate_shared(
    devices: Value,
    shared: &[(&str, &str, &str)],
    claims: &[Arc<ResourceClaim>],
) -> Result<SharedPicks, String> {
    let slices = [slice("n1", Some("n1"), 1, 1, devices)];
    let mut held = HeldDevices::default();
    for (d, name, q) in shared {
        let id = DeviceId { driver: DRIVER.into(), pool: "n1".into(), device: d.to_string() };
        held.hold_share(id, [(*name, crate::framework::quantity::parse_milli(q).unwrap())], 1);
    }
    let shared = held;
    let results = results_on_n1(&slices, &shared, claims)?;
    Ok(results.map(|v| {
        v.iter()
            .map(|r| {
                r.devices
                    .as_ref()
                    .unwrap()
                    .results
                    .as_ref()
                    .unwrap()
                    .iter()
                    .map(|d| {
                        let memory = d.consumed_capacity.as_ref().and_then(|c| c.get("memory")).map(|q| q.0.clone());
                        (d.device.clone(), d.share_id.is_some(), memory)
                    })
                    .collect()
            })
            .collect()
    }))
}

#[test]
fn consumable_capacity_shares_devices_and_rounds_requests_by_policy() {
    let shareable = |policy: Value| {
        json!([{"name": "big", "allowMultipleAllocations": true,
            "capacity": {"memory": {"value": "40Gi", "requestPolicy": policy}}}])
    };
    let asks = |name: &str, q: &str| claim(name, exactly("gpu", json!({"capacity": {"requests": {"memory": q}}})));
    let share = |q: &str| ("big".to_string(), true, Some(q.to_string()));
    // Two claims share the device, each with its own share ID and the capacity it asked for.
    let got = allocate_shared(shareable(json!(null)), &[], &[asks("a", "16Gi"), asks("b", "16Gi")]).unwrap().unwrap();
    assert_eq!(got, vec![vec![share("16Gi")], vec![share("16Gi")]]);
    // A third share would take 48Gi of 40Gi.
    let three = [asks("a", "16Gi"), asks("b", "16Gi"), asks("c", "16Gi")];
    assert_eq!(allocate_shared(shareable(json!(null)), &[], &three), Ok(None));
    // Shares already allocated count: 30Gi taken leaves room for 8Gi, not for 16Gi.
    assert_eq!(allocate_shared(shareable(json!(null)), &[("big", "memory", "30Gi")], &[asks("a", "16Gi")]), Ok(None));
    let got = allocate_shared(shareable(json!(null)), &[("big", "memory", "30Gi")], &[asks("a", "8Gi")]).unwrap();
    assert_eq!(got, Some(vec![vec![share("8Gi")]]));
    // Without a request a share takes the policy's default, else the whole capacity.
    let plain = claim("p", exactly("gpu", json!({})));
    let got = allocate_shared(shareable(json!({"default": "4Gi"})), &[], std::slice::from_ref(&plain)).unwrap();
    assert_eq!(got, Some(vec![vec![share("4Gi")]]));
    let got = allocate_shared(shareable(json!(null)), &[], std::slice::from_ref(&plain)).unwrap();
    assert_eq!(got, Some(vec![vec![share("40Gi")]]));
    // A valid range rounds up to its minimum and then its steps; the maximum caps it.
    let range = json!({"validRange": {"min": "4Gi", "step": "4Gi", "max": "16Gi"}});
    let got = allocate_shared(shareable(range.clone()), &[], &[asks("a", "1Gi")]).unwrap();
    assert_eq!(got, Some(vec![vec![share("4Gi")]]));
    let got = allocate_shared(shareable(range.clone()), &[], &[asks("a", "5Gi")]).unwrap().unwrap();
    let eight = crate::framework::quantity::parse_milli("8Gi").unwrap();
    let written = got[0][0].2.clone().unwrap();
    assert_eq!(
        crate::framework::quantity::parse_milli(&written).unwrap(),
        eight,
        "5Gi rounds to the 8Gi step: {written}"
    );
    assert_eq!(allocate_shared(shareable(range), &[], &[asks("a", "17Gi")]), Ok(None), "above the maximum");
    // Valid values: the next one up; none above the request means it is refused.
    let values = json!({"validValues": ["10Gi", "20Gi"]});
    let got = allocate_shared(shareable(values.clone()), &[], &[asks("a", "15Gi")]).unwrap();
    assert_eq!(got, Some(vec![vec![share("20Gi")]]));
    assert_eq!(allocate_shared(shareable(values), &[], &[asks("a", "21Gi")]), Ok(None));
    // A request for a capacity the device lacks never fits.
    let other = claim("a", exactly("gpu", json!({"capacity": {"requests": {"cores": "1"}}})));
    assert_eq!(allocate_shared(shareable(json!(null)), &[], &[other]), Ok(None));
    // An exclusive device: the request must fit its capacity, and the result is no share.
    let exclusive = json!([{"name": "solo", "capacity": {"memory": {"value": "40Gi"}}}]);
    assert_eq!(allocate_shared(exclusive.clone(), &[], &[asks("a", "50Gi")]), Ok(None));
    let got = allocate_shared(exclusive.clone(), &[], &[asks("a", "10Gi")]).unwrap();
    assert_eq!(got, Some(vec![vec![("solo".to_string(), false, None)]]));
    assert_eq!(allocate_shared(exclusive, &[], &[asks("a", "10Gi"), asks("b", "10Gi")]), Ok(None), "not shared");
}

#[test]
fn distinct_attribute_wants_every_device_different() {
    let devices = json!([{"name": "a", "attributes": {"numa": {"int": 0}}}, {"name": "b", "attributes": {"numa": {"int": 0}}},
        {"name": "c", "attributes": {"numa": {"int": 1}}}]);
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}],
        "constraints": [{"distinctAttribute": "gpu.example.com/numa"}]}),
    );
    assert_eq!(
        allocate(&[slice("n1", Some("n1"), 1, 1, devices)], &[], std::slice::from_ref(&c), "n1"),
        Ok(Some(vec![vec!["a".to_string(), "c".to_string()]])),
        "b has a's value"
    );
    let same =
        json!([{"name": "a", "attributes": {"numa": {"int": 0}}}, {"name": "b", "attributes": {"numa": {"int": 0}}}]);
    assert_eq!(allocate(&[slice("n1", Some("n1"), 1, 1, same)], &[], &[c], "n1"), Ok(None));
}

/// Allocates on n1 with DeviceTaintRules; the device names picked, per claim.
fn allocate_with_rules(
    slices: &[Arc<ResourceSlice>],
    rules: &[Value],
    claims: &[Arc<ResourceClaim>],
) -> Result<Option<Vec<Vec<String>>>, String> {
    let classes = [class("gpu", &[&format!("device.driver == \"{DRIVER}\"")])].into_iter().collect();
    let rules: Vec<Arc<DeviceTaintRule>> =
        rules.iter().map(|r| Arc::new(serde_json::from_value(r.clone()).unwrap())).collect();
    let cel = CelCache::default();
    let a = Allocator {
        allocated: AllocatedDevices { api: &HeldDevices::default(), ours: &HeldDevices::default() },
        classes: &classes,
        slices,
        by_node: &allocator::SlicesByNode::new(slices),
        taint_rules: &rules,
        cel: &cel,
        features: Default::default(),
    };
    a.allocate("n1", &Labels::new(), claims).map(|r| r.map(|v| v.iter().map(ids).collect())).map_err(|e| e.0)
}

#[test]
fn device_taints_keep_devices_from_requests_that_do_not_tolerate_them() {
    let tainted = |effect: &str| json!([{"name": "tainted", "taints": [{"key": "bad", "value": "yes", "effect": effect}]}, {"name": "clean"}]);
    let only_tainted = json!([{"name": "tainted", "taints": [{"key": "bad", "value": "yes", "effect": "NoExecute"}]}]);
    let rule = |selector: Value, effect: &str| json!({"metadata": {"name": "r"}, "spec": {"deviceSelector": selector, "taint": {"key": "bad", "value": "yes", "effect": effect}}});
    let tolerating = |t: Value| claim("c", exactly("gpu", json!({"tolerations": [t]})));
    let plain = claim("c", exactly("gpu", json!({})));
    let one = |d: &str| Ok(Some(vec![vec![d.to_string()]]));
    type Case = (&'static str, Value, Vec<Value>, Arc<ResourceClaim>, Result<Option<Vec<Vec<String>>>, String>);
    let cases: Vec<Case> = vec![
        ("NoSchedule skips the device", tainted("NoSchedule"), vec![], plain.clone(), one("clean")),
        ("NoExecute skips the device", only_tainted.clone(), vec![], plain.clone(), Ok(None)),
        (
            "effect None does not",
            json!([{"name": "tainted", "taints": [{"key": "bad", "effect": "None"}]}]),
            vec![],
            plain.clone(),
            one("tainted"),
        ),
        (
            "Exists tolerates any value",
            only_tainted.clone(),
            vec![],
            tolerating(json!({"key": "bad", "operator": "Exists"})),
            one("tainted"),
        ),
        (
            "Equal needs the value",
            only_tainted.clone(),
            vec![],
            tolerating(json!({"key": "bad", "value": "no"})),
            Ok(None),
        ),
        (
            "Equal with the value",
            only_tainted.clone(),
            vec![],
            tolerating(json!({"key": "bad", "value": "yes"})),
            one("tainted"),
        ),
        (
            "an empty key with Exists tolerates all",
            only_tainted.clone(),
            vec![],
            tolerating(json!({"operator": "Exists"})),
            one("tainted"),
        ),
        (
            "another effect does not tolerate",
            only_tainted.clone(),
            vec![],
            tolerating(json!({"key": "bad", "operator": "Exists", "effect": "NoSchedule"})),
            Ok(None),
        ),
        (
            "a rule taints the device it names",
            json!([{"name": "a"}, {"name": "b"}]),
            vec![rule(json!({"device": "a"}), "NoSchedule")],
            plain.clone(),
            one("b"),
        ),
        (
            "a rule for another pool does not",
            json!([{"name": "a"}]),
            vec![rule(json!({"pool": "elsewhere"}), "NoSchedule")],
            plain.clone(),
            one("a"),
        ),
        (
            "a rule for the driver taints every device",
            json!([{"name": "a"}, {"name": "b"}]),
            vec![rule(json!({"driver": DRIVER}), "NoExecute")],
            plain.clone(),
            Ok(None),
        ),
        (
            "a rule without a selector selects nothing",
            json!([{"name": "a"}]),
            vec![json!({"metadata": {"name": "r"}, "spec": {"taint": {"key": "bad", "effect": "NoSchedule"}}})],
            plain.clone(),
            one("a"),
        ),
        (
            "a rule's taint is tolerated as a device's",
            json!([{"name": "a"}]),
            vec![rule(json!({}), "NoSchedule")],
            tolerating(json!({"key": "bad", "operator": "Exists"})),
            one("a"),
        ),
    ];
    for (name, devices, rules, claim, want) in cases {
        let got = allocate_with_rules(&[slice("n1", Some("n1"), 1, 1, devices)], &rules, &[claim]);
        assert_eq!(got, want, "{name}");
    }
    // The result records the request's tolerations, as upstream's.
    let slices = [slice("n1", Some("n1"), 1, 1, only_tainted)];
    let tolerant = tolerating(json!({"key": "bad", "operator": "Exists"}));
    let got = results_on_n1(&slices, &HeldDevices::default(), &[tolerant]).unwrap().unwrap();
    let r = &got[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(r.tolerations.as_ref().unwrap()[0].operator.as_deref(), Some("Exists"));
}

#[test]
fn partitionable_devices_share_their_pool_s_counters() {
    // Two partitions of one GPU, each consuming 30 of the 40Gi the counter set holds: one fits, not both.
    let counters = Arc::new(
        serde_json::from_value::<ResourceSlice>(json!({"metadata": {"name": "n1-counters"}, "spec": {"driver": DRIVER,
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 2}, "nodeName": "n1",
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}}))
        .unwrap(),
    );
    let part = |name: &str| json!({"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}]});
    let devices = slice("n1", Some("n1"), 1, 2, json!([part("p0"), part("p1")]));
    let one = claim("c", exactly("gpu", json!({})));
    let two = claim("c", exactly("gpu", json!({"count": 2})));
    let slices = [counters.clone(), devices.clone()];
    assert_eq!(allocate(&slices, &[], std::slice::from_ref(&one), "n1"), Ok(Some(vec![vec!["p0".to_string()]])));
    assert_eq!(allocate(&slices, &[], &[two], "n1"), Ok(None), "both partitions overdraw the counter");
    // An allocated partition consumes its counters too: the other one no longer fits.
    assert_eq!(allocate(&slices, &["n1/p0"], std::slice::from_ref(&one), "n1"), Ok(None));
    // A pool whose counter slice is missing is incomplete: nothing from it.
    assert_eq!(allocate(&[devices], &[], std::slice::from_ref(&one), "n1"), Ok(None));
    // A device consuming a counter set the pool lacks makes the pool invalid, which fails the node.
    let bad = slice(
        "n1",
        Some("n1"),
        1,
        2,
        json!([{"name": "x", "consumesCounters": [{"counterSet": "nope", "counters": {}}]}]),
    );
    assert_eq!(allocate(&[counters, bad], &[], &[one], "n1"), Err(allocator::INVALID_POOLS.to_string()));
}

/// scheduler_perf's PartitionableBacktracking: 7 of 8 partitions whose memory (70Gi) fits only without the first
/// one (20Gi; the others 10Gi). The search must give up the first partition after trying what goes with it, and
/// tries each set of partitions once, not in each of its orders (upstream's start location): a few hundred steps,
/// where every order of the first six would take thousands.
#[test]
fn a_search_for_several_devices_tries_each_set_once() {
    let cpus: serde_json::Map<String, Value> = (1..=8).map(|i| (format!("cpu{i}"), json!({"value": "1"}))).collect();
    let counters = Arc::new(
        serde_json::from_value::<ResourceSlice>(json!({"metadata": {"name": "n1-counters"}, "spec": {"driver": DRIVER,
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 2}, "nodeName": "n1",
            "sharedCounters": [{"name": "cpu", "counters": cpus}, {"name": "mem", "counters": {"mem": {"value": "70Gi"}}}]}}))
        .unwrap(),
    );
    let part = |i: usize| {
        let mem = if i == 1 { "20Gi" } else { "10Gi" };
        json!({"name": format!("device-{i}"), "consumesCounters": [
            {"counterSet": "cpu", "counters": {format!("cpu{i}"): {"value": "1"}}},
            {"counterSet": "mem", "counters": {"mem": {"value": mem}}}]})
    };
    let devices = slice("n1", Some("n1"), 1, 2, Value::Array((1..=8).map(part).collect()));
    let slices = [counters, devices];
    let classes = [class("gpu", &[&format!("device.driver == \"{DRIVER}\"")])].into_iter().collect();
    let cel = CelCache::default();
    let a = Allocator {
        allocated: AllocatedDevices { api: &HeldDevices::default(), ours: &HeldDevices::default() },
        classes: &classes,
        slices: &slices,
        by_node: &allocator::SlicesByNode::new(&slices),
        taint_rules: &[],
        cel: &cel,
        features: Default::default(),
    };
    let seven = claim("c", exactly("gpu", json!({"count": 7})));
    let (result, steps) = a.allocate_counted("n1", &Labels::new(), &[seven]);
    let picked: Vec<Vec<String>> = result.unwrap().unwrap().iter().map(ids).collect();
    assert_eq!(picked, [(2..=8).map(|i| format!("device-{i}")).collect::<Vec<_>>()]);
    assert!(steps < 300, "{steps} search steps");
}

#[test]
fn score_ranks_the_first_available_sub_request_taken() {
    // n1 has only the second choice (b), n2 the first (a): n2 scores 8, n1 7, normalized 100 and 87.
    let objects = {
        let mut o = objects(vec![claim(
            "c",
            json!({"requests": [{"name": "r", "firstAvailable": [
                {"name": "first", "deviceClassName": "a100"},
                {"name": "second", "deviceClassName": "gpu"}]}]}),
        )]);
        o.device_classes.extend([class("a100", &[r#"device.attributes["gpu.example.com"].model == "a100""#])]);
        o.resource_slices = vec![
            slice("n1", Some("n1"), 1, 1, gpus("n1", 1, "h100")),
            slice("n2", Some("n2"), 1, 1, gpus("n2", 1, "a100")),
        ];
        o
    };
    let (pl, _) = plugin();
    let snap = snapshot(objects);
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "c"}]), json!([]));
    let mut state = CycleState::new();
    let (_, st) = pl.pre_filter(&mut state, &p, &snap);
    assert!(st.is_success(), "{}", st.message());
    let (n1, n2) = (n("n1"), n("n2"));
    assert!(pl.filter(&state, &p, &n1).is_success());
    assert!(pl.filter(&state, &p, &n2).is_success());
    let raw = [pl.score(&state, &p, &n1).unwrap(), pl.score(&state, &p, &n2).unwrap()];
    assert_eq!(raw, [7, 8]);
    let mut scores =
        vec![NodeScore { name: "n1", id: 0, score: raw[0] }, NodeScore { name: "n2", id: 1, score: raw[1] }];
    assert!(pl.normalize_score(&state, &p, &mut scores).is_success());
    assert_eq!((scores[0].score, scores[1].score), (87, 100));
    // A node Filter did not allocate on scores nothing.
    assert_eq!(pl.score(&state, &p, &n("n3")).unwrap(), 0);
}

#[test]
fn binding_conditions_are_met_failed_or_timed_out() {
    let claim = |statuses: Value, timestamp: &str| -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "default"}, "status": {
            "allocation": {"allocationTimestamp": timestamp, "devices": {"results": [{"request": "r", "driver": DRIVER,
                "pool": "n1", "device": "d", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}]}},
            "devices": statuses}}))
        .unwrap()
    };
    let status = |conds: Value| json!([{"driver": DRIVER, "pool": "n1", "device": "d", "conditions": conds}]);
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    assert_eq!(claim_ready_for_binding(&claim(json!([]), &now)), Ok(false), "no device status yet");
    assert_eq!(claim_ready_for_binding(&claim(status(json!([cond("Attached", "False")])), &now)), Ok(false));
    assert_eq!(claim_ready_for_binding(&claim(status(json!([cond("Attached", "True")])), &now)), Ok(true));
    let failed = claim(status(json!([cond("Attached", "True"), cond("Failed", "True")])), &now);
    assert!(claim_ready_for_binding(&failed).is_err(), "a failure condition wins");
    let day = Duration::from_secs(86400);
    assert!(!claim_timed_out(&claim(json!([]), &now), day));
    assert!(claim_timed_out(&claim(json!([]), "2020-01-01T00:00:00Z"), day));
}

/// The binding-condition metrics a plugin reported: (kind, profile, driver, status).
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<(&'static str, String, String, &'static str)>>);

impl crate::framework::metrics::DraMetrics for Recorded {
    fn binding_conditions_wait(&self, profile: &str, driver: &str, status: &'static str, _: Duration) {
        self.0.lock().unwrap().push(("wait", profile.into(), driver.into(), status));
    }
    fn binding_conditions_allocation(&self, profile: &str, driver: &str, status: &'static str) {
        self.0.lock().unwrap().push(("allocation", profile.into(), driver.into(), status));
    }
}

#[test]
fn pre_bind_fails_on_a_binding_failure_condition_and_waits_for_none_without_conditions() {
    // PreBind writes the allocation, then looks at the claim: its device reports the failure condition.
    let cluster = Arc::new(MemoryCluster::default());
    let recorded = Arc::new(Recorded::default());
    let ctx =
        PluginContext { profile: "kws".into(), dra_metrics: recorded.clone(), ..PluginContext::new(cluster.clone()) };
    let pl = DynamicResources::new(None, &ctx).unwrap();
    let o = {
        let mut o = objects(vec![claim("c", exactly("gpu", json!({})))]);
        o.resource_slices = vec![slice(
            "n1",
            Some("n1"),
            1,
            1,
            json!([{"name": "d", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}]),
        )];
        o
    };
    cluster.set_objects(o.clone());
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "c"}]), json!([]));
    let mut state = CycleState::new();
    let snap = snapshot(o);
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
    // The driver's answer, as the informers show it after the write: the device failed to attach.
    let reported: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "default", "uid": "uid-c", "resourceVersion": "999999"},
        "status": {"allocation": {"devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": "n1",
            "device": "d", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}]}},
        "devices": [{"driver": DRIVER, "pool": "n1", "device": "d", "conditions": [{"type": "Failed", "status": "True",
            "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}}))
    .unwrap();
    let mut objects = (*snap.objects).clone();
    objects.resource_claims.insert("default/c".into(), Arc::new(reported));
    pl.listers.set(Arc::new(objects));
    let st = pl.pre_bind(&state, &p, "n1");
    assert_eq!(st.code(), Code::Error, "{}", st.message());
    assert!(st.message().contains("reason=R"), "{}", st.message());
    // As upstream's metrics say it: one wait and one allocation with binding conditions, both failed.
    let failure = |kind| (kind, "kws".to_string(), DRIVER.to_string(), "failure");
    assert_eq!(*recorded.0.lock().unwrap(), [failure("wait"), failure("allocation")]);
    // The allocation PreBind wrote carries the device's conditions and the time it was made.
    let State(s) = state.read::<State>(NAME).unwrap().clone();
    let written = s.written.lock().unwrap()[&0].clone();
    let a = written.status.as_ref().unwrap().allocation.as_ref().unwrap();
    assert!(a.allocation_timestamp.is_some());
    let r = &a.devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(r.binding_conditions.as_deref(), Some(&["Attached".to_string()][..]));
    // Without binding conditions nothing waits (the other PreBind test would time out otherwise).
}

#[test]
fn post_filter_deallocates_a_claim_allocated_elsewhere_that_no_other_pod_uses() {
    let (pl, cluster) = plugin();
    let c = allocated_on_n1("a");
    let o = objects(vec![Arc::new(c)]);
    cluster.set_objects(o.clone());
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "a"}]), json!([]));
    let mut state = CycleState::new();
    pl.pre_filter(&mut state, &p, &snapshot(o));
    assert_eq!(pl.filter(&state, &p, &n("n2")).message(), ERR_REASON_NOT_AVAILABLE);
    let (_, st) = pl.post_filter(&state, &p, &NodeToStatus::new(), &NoHandle);
    assert_eq!((st.code(), st.message()), (Code::Unschedulable, "deallocation of ResourceClaim completed".to_string()));
    assert!(cluster.writes().iter().all(|w| !matches!(w, crate::cluster::memory::Write::AllocateClaim { .. })));
}

#[test]
fn the_simulated_driver_attaches_devices_so_pre_bind_does_not_wait() {
    let (pl, cluster) = plugin();
    let mut o = objects(vec![claim("c", exactly("gpu", json!({})))]);
    o.resource_slices = vec![slice("n1", Some("n1"), 1, 1, json!([{"name": "d", "bindingConditions": ["Attached"]}]))];
    cluster.set_objects(o.clone());
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "c"}]), json!([]));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snapshot(o)).1.is_success());
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
    let t0 = std::time::Instant::now();
    let st = pl.pre_bind(&state, &p, "n1");
    assert!(st.is_success(), "{st}");
    assert!(t0.elapsed() < BINDING_POLL, "met at the first look");
}

#[test]
fn per_device_node_selection_and_binds_to_node_pin_the_claim_to_the_node() {
    let spec = json!({"driver": DRIVER, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
        "perDeviceNodeSelection": true, "devices": [{"name": "on-n2", "nodeName": "n2"}, {"name": "on-n1", "nodeName": "n1"}]});
    let s: Arc<ResourceSlice> =
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap());
    let r = results_on_n1(&[s], &HeldDevices::default(), &[claim("c", exactly("gpu", json!({})))]).unwrap().unwrap();
    assert_eq!(ids(&r[0]), ["on-n1"], "the device for n2 does not reach n1");
    let fields = r[0].node_selector.as_ref().unwrap().node_selector_terms[0].match_fields.clone().unwrap();
    assert_eq!(fields[0].values.as_deref(), Some(&["n1".to_string()][..]));
    // A network-attached device (all nodes) that binds to its node pins the claim to the node it was allocated on.
    let binds = slice("net", None, 1, 1, json!([{"name": "d", "bindsToNode": true}]));
    let r =
        results_on_n1(&[binds], &HeldDevices::default(), &[claim("c", exactly("gpu", json!({})))]).unwrap().unwrap();
    let fields = r[0].node_selector.as_ref().unwrap().node_selector_terms[0].match_fields.clone().unwrap();
    assert_eq!(fields[0].values.as_deref(), Some(&["n1".to_string()][..]));
    let free = slice("net", None, 1, 1, json!([{"name": "d"}]));
    let r = results_on_n1(&[free], &HeldDevices::default(), &[claim("c", exactly("gpu", json!({})))]).unwrap().unwrap();
    assert!(r[0].node_selector.is_none(), "available everywhere");
}

/// The cluster of the extended resource tests: class `gpu` provides `example.com/gpu`; n1 has two of its
/// devices, n2 none, n3 lists the resource in its allocatable (a device plugin).
fn extended_objects() -> ClusterObjects {
    let mut o = objects(vec![]);
    o.device_classes.insert(
        "gpu".into(),
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "gpu"},
                "spec": {"extendedResourceName": "example.com/gpu",
                    "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}))
            .unwrap(),
        ),
    );
    o.resource_slices = vec![slice("n1", Some("n1"), 1, 1, gpus("n1", 2, "a100"))];
    o
}

fn gpu_pod(name: &str, count: &str) -> PodInfo {
    let r = json!({"example.com/gpu": count});
    pod(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"requests": r, "limits": r}}]}}))
}

fn n3_with_device_plugin() -> NodeInfo {
    node(json!({"metadata": {"name": "n3"}, "status": {"allocatable": {"example.com/gpu": "4"}}}))
}

#[test]
fn an_extended_resource_a_class_provides_is_allocated_through_a_claim_pre_bind_creates() {
    use crate::cluster::memory::Write;
    let (pl, cluster) = plugin();
    let o = extended_objects();
    cluster.set_objects(o.clone());
    let snap = snapshot(o);
    let p = gpu_pod("p", "2");
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    assert_eq!(pl.filter(&state, &p, &n("n2")).message(), ERR_REASON_CANNOT_ALLOCATE);
    assert!(pl.filter(&state, &p, &n3_with_device_plugin()).is_success(), "the device plugin serves it");
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
    assert!(pl.pre_bind_pre_flight(&state, &p, "n1").is_success());
    let st = pl.pre_bind(&state, &p, "n1");
    assert!(st.is_success(), "{st}");

    let writes = cluster.writes();
    let created = writes
        .iter()
        .find_map(|w| match w {
            Write::CreateClaim { claim } => Some(claim.clone()),
            _ => None,
        })
        .expect("a claim was created");
    assert!(created.starts_with("default/p-extended-resources-"), "{created}");
    // The claim as the status write answered it: the object as stored.
    let State(st) = state.read::<State>(NAME).unwrap().clone();
    let stored = (*st.written.lock().unwrap()[&0]).clone();
    assert_eq!(format!("default/{}", stored.metadata.name.as_deref().unwrap()), created);
    let meta = &stored.metadata;
    assert_eq!(meta.generate_name.as_deref(), Some("p-extended-resources-"));
    assert_eq!(
        meta.annotations.as_ref().unwrap().get(extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION).map(String::as_str),
        Some("true")
    );
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("Pod", "p", "uid-p"));
    assert_eq!((owner.api_version.as_str(), owner.controller), ("v1", Some(true)));
    assert!(meta.finalizers.as_ref().unwrap().contains(&FINALIZER.to_string()));
    let request = &claim_requests(&stored)[0];
    let e = request.exactly.as_ref().unwrap();
    assert_eq!(
        (request.name.as_str(), e.device_class_name.as_str(), e.allocation_mode.as_deref(), e.count),
        ("container-0-request-0", "gpu", Some("ExactCount"), Some(2))
    );
    let status = stored.status.as_ref().unwrap();
    assert_eq!(ids(status.allocation.as_ref().unwrap()), ["n1-gpu-0", "n1-gpu-1"]);
    assert_eq!(status.reserved_for.as_ref().unwrap()[0].uid, "uid-p");
    let claim_name = created.strip_prefix("default/").unwrap().to_string();
    assert!(writes.contains(&Write::ExtendedResourceClaimStatus {
        pod: "default/p".into(),
        claim: claim_name,
        mappings: vec!["c/example.com/gpu → container-0-request-0".into()],
    }));
    assert!(pl.tracker().in_flight.is_empty());

    // The next pod sees n1's devices taken before the informers show the new claim; n3's device plugin still
    // serves it, and there nothing is written.
    let q = gpu_pod("q", "1");
    let mut s2 = CycleState::new();
    assert!(pl.pre_filter(&mut s2, &q, &snap).1.is_success());
    assert_eq!(pl.filter(&s2, &q, &n("n1")).message(), ERR_REASON_CANNOT_ALLOCATE);
    assert!(pl.filter(&s2, &q, &n3_with_device_plugin()).is_success());
    assert!(pl.reserve(&mut s2, &q, "n3").is_success());
    let before = cluster.writes().len();
    assert!(pl.pre_bind(&s2, &q, "n3").is_success());
    assert_eq!(cluster.writes().len(), before, "nothing for DRA to write");
}

#[test]
fn unreserve_deletes_the_created_claim_and_an_earlier_attempt_s_claim_is_deleted_in_post_filter() {
    use crate::cluster::memory::Write;
    let (pl, cluster) = plugin();
    let o = extended_objects();
    cluster.set_objects(o.clone());
    let snap = snapshot(o.clone());
    let p = gpu_pod("p", "1");
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    assert!(pl.filter(&state, &p, &n("n1")).is_success());
    assert!(pl.reserve(&mut state, &p, "n1").is_success());
    assert!(pl.pre_bind(&state, &p, "n1").is_success());
    let created = cluster.writes().iter().find_map(|w| match w {
        Write::CreateClaim { claim } => Some(claim.clone()),
        _ => None,
    });
    let created = created.unwrap();
    // Binding failed after PreBind: the claim goes.
    pl.unreserve(&mut state, &p, "n1");
    assert!(cluster.writes().contains(&Write::DeleteClaim { claim: created.clone() }));
    assert!(pl.tracker().in_flight.is_empty() && pl.tracker().assumed.is_empty());

    // A claim an earlier attempt made (found by its annotation and owner) is refused and deleted.
    let mut earlier = extended::special_claim(&p, "uid-earlier".into());
    earlier.metadata.name = Some("p-extended-resources-abcde".into());
    earlier.spec = Some(
        serde_json::from_value(json!({"devices": {"requests": [{"name": "container-0-request-0",
        "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}))
        .unwrap(),
    );
    let mut o2 = o;
    o2.resource_claims.insert("default/p-extended-resources-abcde".into(), Arc::new(earlier));
    cluster.set_objects(o2.clone());
    let mut s2 = CycleState::new();
    assert!(pl.pre_filter(&mut s2, &p, &snapshot(o2)).1.is_success());
    assert_eq!(pl.filter(&s2, &p, &n("n1")).message(), ERR_REASON_STALE_EXTENDED_CLAIM);
    let (_, st) = pl.post_filter(&s2, &p, &NodeToStatus::new(), &NoHandle);
    assert_eq!((st.code(), st.message()), (Code::Unschedulable, "deletion of ResourceClaim completed".to_string()));
    assert!(cluster.writes().contains(&Write::DeleteClaim { claim: "default/p-extended-resources-abcde".into() }));
}

#[test]
fn an_extended_resource_neither_on_the_node_nor_from_a_class_does_not_fit() {
    let (pl, _) = plugin();
    let snap = snapshot(extended_objects());
    // example.com/fpga: no class, and (NodeResourcesFit ignoring it) no node lists it.
    let r = json!({"example.com/gpu": "1", "example.com/fpga": "1"});
    let p = pod(json!({"metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": r, "limits": r}}]}}));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    let st = pl.filter(&state, &p, &n("n1"));
    assert_eq!((st.code(), st.message()), (Code::UnschedulableAndUnresolvable, ERR_REASON_CANNOT_FIT_RESOURCE.into()));
    // A pod whose extended resources no class provides is not this plugin's.
    let other = pod(json!({"metadata": {"name": "o", "namespace": "default"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"example.com/fpga": "1"}, "limits": {"example.com/fpga": "1"}}}]}}));
    assert!(pl.pre_filter(&mut CycleState::new(), &other, &snap).1.is_skip());
}

/// What the plugin keeps of the claims across cycles (devices held, extended resource claims by owner) matches a
/// count of every claim from scratch after each change: added, re-allocated, shared, admin access, removed, among
/// enough other claims that the maps share structure between versions.
#[test]
fn kept_claims_follow_the_claims_change_by_change() {
    let fresh = |claims: &ObjectMap<ResourceClaim>| {
        let mut held = HeldDevices::default();
        let mut extended: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (key, c) in claims {
            held.count(c, 1);
            for owner in extended_owners(c) {
                extended.entry(owner.to_string()).or_default().insert(key.clone());
            }
        }
        (held, extended)
    };
    let allocated = |name: &str, results: Value, owner: Option<&str>| -> Arc<ResourceClaim> {
        let mut c = (*claim(name, exactly("gpu", json!({})))).clone();
        c.status = Some(serde_json::from_value(json!({"allocation": {"devices": {"results": results}}})).unwrap());
        if let Some(uid) = owner {
            c.metadata.annotations =
                Some([(extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into());
            c.metadata.owner_references = Some(vec![serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": true}),
            )
            .unwrap()]);
        }
        Arc::new(c)
    };
    let gpu = |d: &str| json!({"request": "req-0", "driver": DRIVER, "pool": "n1", "device": d});
    let share = |d: &str, id: &str, mem: &str| {
        json!({"request": "req-0", "driver": DRIVER, "pool": "n1", "device": d, "shareID": id,
            "consumedCapacity": {"memory": mem}})
    };
    let admin = |d: &str| json!({"request": "req-0", "driver": DRIVER, "pool": "n1", "device": d, "adminAccess": true});
    let mut claims: ObjectMap<ResourceClaim> = (0..300)
        .map(|i| {
            let name = format!("other-{i:03}");
            (format!("default/{name}"), allocated(&name, json!([gpu(&format!("other-gpu-{i}"))]), None))
        })
        .collect();
    let changes: Vec<(&str, Option<Arc<ResourceClaim>>)> = vec![
        ("a", Some(allocated("a", json!([gpu("gpu-0")]), None))),
        ("b", Some(allocated("b", json!([share("gpu-1", "s1", "10Gi")]), None))),
        ("c", Some(allocated("c", json!([admin("gpu-0")]), None))),
        ("d", Some(allocated("d", json!([share("gpu-1", "s2", "5Gi")]), None))),
        ("a", Some(allocated("a", json!([gpu("gpu-2"), gpu("gpu-3")]), None))),
        ("b", None),
        ("e", Some(allocated("e", json!([gpu("gpu-4")]), Some("pod-uid")))),
        ("f", Some(allocated("f", json!([]), Some("pod-uid")))),
        ("e", Some(allocated("e", json!([gpu("gpu-5")]), Some("pod-uid")))),
        ("other-150", None),
        ("a", None),
        ("e", None),
        ("d", None),
    ];
    let mut kept = KeptClaims::default();
    kept.update(&claims);
    for (step, (name, change)) in changes.into_iter().enumerate() {
        let key = format!("default/{name}");
        match change {
            Some(c) => claims.insert(key, c),
            None => claims.remove(&key),
        };
        let held = kept.update(&claims);
        let (want_held, want_extended) = fresh(&claims);
        assert_eq!(*held, want_held, "step {step}: {name}");
        assert_eq!(kept.extended, want_extended, "step {step}: {name}");
    }
    // Every other claim re-allocated in turn, one change per cycle, as PreBind's writes come back: a change at any
    // position of the map, next to parts the versions share.
    for i in 0..300 {
        let name = format!("other-{i:03}");
        if i != 150 {
            claims.insert(format!("default/{name}"), allocated(&name, json!([gpu(&format!("moved-gpu-{i}"))]), None));
        }
        let held = kept.update(&claims);
        assert_eq!(*held, fresh(&claims).0, "{name} re-allocated");
    }
    let allocated = AllocatedDevices { api: &kept.held, ours: &HeldDevices::default() };
    let id = |d: &str| DeviceId { driver: DRIVER.into(), pool: "n1".into(), device: d.into() };
    assert!(allocated.contains(&id("moved-gpu-0")) && !allocated.contains(&id("other-gpu-0")));
    assert!(!allocated.contains(&id("other-gpu-150")) && !allocated.contains(&id("moved-gpu-150")));
    assert!(!allocated.contains(&id("gpu-0")) && !allocated.is_shared(&id("gpu-1")), "admin access holds nothing");
    assert_eq!(kept.extended.get("pod-uid").map(|k| k.len()), Some(1), "f is still there");
}

/// Upstream `isSchedulableAfterClaimChange`: a claim's event moves the pods that use it (created, or its status
/// changed), any pod when it was deallocated, and no pod still missing one of its claims.
#[test]
fn claim_events_move_the_pods_that_wait_for_that_claim() {
    let (pl, _) = plugin();
    let mine = claim("mine", exactly("gpu", json!({})));
    let other = claim("other", exactly("gpu", json!({})));
    pl.listers.set(Arc::new(objects(vec![mine.clone(), other.clone()])));
    let p = pod_with("p", json!([{"name": "r", "resourceClaimName": "mine"}]), json!([]));
    let waiting = pod_with("w", json!([{"name": "r", "resourceClaimName": "missing"}]), json!([]));
    let ev = |a| ClusterEvent::new(EventResource::ResourceClaim, a);
    let obj = |c: &Arc<ResourceClaim>| Some(EventObject::ResourceClaim(c.clone()));
    let allocated = Arc::new(allocated_on_n1("other"));
    let hint = |pod: &PodInfo, a, old: Option<EventObject>, new: Option<EventObject>| {
        pl.queueing_hint(pod, &ev(a), old.as_ref(), new.as_ref())
    };
    use QueueingHint::{Queue, QueueSkip};
    assert_eq!(hint(&p, action::ADD, None, obj(&mine)), Queue, "its claim appeared");
    assert_eq!(hint(&p, action::ADD, None, obj(&other)), QueueSkip, "another pod's claim");
    assert_eq!(hint(&waiting, action::ADD, None, obj(&mine)), QueueSkip, "its own claim is still missing");
    assert_eq!(hint(&p, action::UPDATE, obj(&mine), obj(&mine)), QueueSkip, "status unchanged");
    let mut changed = (*mine).clone();
    changed.status = allocated.status.clone();
    assert_eq!(hint(&p, action::UPDATE, obj(&mine), obj(&Arc::new(changed))), Queue, "its status changed");
    assert_eq!(hint(&p, action::UPDATE, obj(&allocated), obj(&other)), Queue, "another claim freed its devices");
    assert_eq!(hint(&p, action::DELETE, obj(&other), None), QueueSkip, "an unallocated claim went");
    assert_eq!(hint(&p, action::DELETE, obj(&allocated), None), Queue, "an allocated claim went");
    assert_eq!(hint(&p, action::ALL, None, None), Queue, "no object: may help");
}

#[test]
fn kept_pools_follow_the_node_labels_a_selector_reads() {
    // One index serves every call, as a cycle's nodes and the next cycles share it while the slices stay the same.
    let mut spec = json!({"driver": DRIVER, "pool": {"name": "zonal", "generation": 1, "resourceSliceCount": 1},
        "devices": gpus("zonal", 1, "a100"),
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}});
    let selected: Arc<ResourceSlice> =
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "zonal-1"}, "spec": spec.take()})).unwrap());
    let slices = [selected, slice("n1", Some("n1"), 1, 1, gpus("n1", 1, "a100"))];
    let classes = [class("gpu", &[&format!("device.driver == \"{DRIVER}\"")])].into_iter().collect();
    let (held, cel, by_node) = (HeldDevices::default(), CelCache::default(), allocator::SlicesByNode::new(&slices));
    let a = Allocator {
        allocated: AllocatedDevices { api: &held, ours: &held },
        classes: &classes,
        slices: &slices,
        by_node: &by_node,
        taint_rules: &[],
        cel: &cel,
        features: Default::default(),
    };
    let two = [claim("c1", exactly("gpu", json!({}))), claim("c2", exactly("gpu", json!({})))];
    let zone = |z: &str| Labels::from([("zone".to_string(), z.to_string())]);
    let fits = |node: &str, labels: &Labels| a.allocate(node, labels, &two).unwrap().map(|r| r.len());
    // n1 has its own device and, in zone a, the zonal one: two claims fit there only while n1 is in zone a.
    assert_eq!(fits("n1", &zone("a")), Some(2));
    assert_eq!(
        fits("n1", &zone("b")),
        None,
        "n1's pools were gathered for zone a; in zone b the zonal slice is not n1's"
    );
    assert_eq!(fits("n1", &zone("a")), Some(2));
    assert_eq!(fits("n2", &zone("a")), None, "n2 has only the zonal device");
    assert_eq!(fits("n2", &zone("b")), None);
}
