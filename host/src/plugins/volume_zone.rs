//! VolumeZone (upstream `volumezone/volume_zone.go`): the zone and region labels of the PersistentVolumes a pod's
//! bound claims use must match the node's. A node without any zone or region label accepts every volume (a
//! single-zone cluster need not label its nodes). A PV label may name several zones joined by `__`.
//!
//! Claims are looked up in PreFilter: a claim of a `WaitForFirstConsumer` class that is not bound yet is skipped
//! (VolumeBinding picks its volume for the node); any other unbound claim, or a missing claim, class or volume,
//! rejects the pod with upstream's reason.
//!
//! Differences from upstream, on purpose:
//! - A StorageClass without `volumeBindingMode` counts as `Immediate`, the API server's default: objects read from a
//!   cluster file are not defaulted, objects read from a cluster are (upstream would answer "VolumeBindingMode not
//!   set", which a real cluster never shows).
//! - A Filter without PreFilter data answers Error instead of recomputing the volumes: Filter sees no cluster
//!   objects here, and the runner always runs PreFilter first.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::storage::{
    claim_class, claim_key, claim_volume_name, label_zones_to_set, not_found, pod_volumes,
    BINDING_WAIT_FOR_FIRST_CONSUMER, RESOURCE_PV, RESOURCE_PVC, RESOURCE_STORAGE_CLASS,
};
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "VolumeZone";
/// CycleState key of the PreFilter data, upstream's.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeZone";
/// Filter reason when a volume's zone or region does not match the node's, upstream's wording.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";
/// PreFilter reason for a claim volume with an empty claim name, upstream's wording.
pub const ERR_REASON_NO_CLAIM_NAME: &str = "PersistentVolumeClaim had no name";
/// PreFilter reason for an unbound claim without a StorageClass, upstream's wording.
pub const ERR_REASON_NO_PV_NOR_CLASS: &str = "PersistentVolumeClaim had no pv name and storageClass name";
/// PreFilter reason for an unbound claim of an `Immediate` class, upstream's wording.
pub const ERR_REASON_NO_PV_NAME: &str = "PersistentVolume had no name";

/// Deprecated zone label.
pub const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// Deprecated region label.
pub const LABEL_FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// Zone label.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Region label.
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";

/// The labels compared, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] =
    [LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_FAILURE_DOMAIN_BETA_REGION, LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_REGION];

/// The GA label a deprecated one became: a PV labelled the old way still matches a node labelled the new way.
fn ga_label(label: &str) -> &str {
    match label {
        LABEL_FAILURE_DOMAIN_BETA_ZONE => LABEL_TOPOLOGY_ZONE,
        LABEL_FAILURE_DOMAIN_BETA_REGION => LABEL_TOPOLOGY_REGION,
        other => other,
    }
}

/// One topology label of one bound PV: the node must carry `key` (or its GA twin) with one of `values`.
#[derive(Debug, Clone)]
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

/// PreFilter data: the bound volumes' topology labels.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<Vec<PvTopology>>);

/// The topology labels of the PVs the pod's claims are bound to; `Err` is PreFilter's rejection.
fn pod_pv_topologies(pod: &PodInfo, snapshot: &Snapshot) -> Result<Vec<PvTopology>, Status> {
    let objects = &snapshot.objects;
    let mut out = Vec::new();
    for c in pod_volumes(pod).iter().filter_map(|v| v.persistent_volume_claim.as_ref()) {
        let claim = c.claim_name.as_str();
        if claim.is_empty() {
            return Err(Status::unresolvable(ERR_REASON_NO_CLAIM_NAME));
        }
        let Some(pvc) = objects.pvcs.get(&claim_key(&pod.namespace, claim)) else {
            return Err(Status::unresolvable(not_found(RESOURCE_PVC, claim)));
        };
        let pv_name = claim_volume_name(pvc);
        if pv_name.is_empty() {
            let class_name = claim_class(pvc);
            if class_name.is_empty() {
                return Err(Status::unresolvable(ERR_REASON_NO_PV_NOR_CLASS));
            }
            let Some(class) = objects.storage_classes.get(class_name) else {
                return Err(Status::unresolvable(not_found(RESOURCE_STORAGE_CLASS, class_name)));
            };
            if class.volume_binding_mode.as_deref() == Some(BINDING_WAIT_FOR_FIRST_CONSUMER) {
                continue;
            }
            return Err(Status::unresolvable(ERR_REASON_NO_PV_NAME));
        }
        let Some(pv) = objects.pvs.get(pv_name) else {
            return Err(Status::unresolvable(not_found(RESOURCE_PV, pv_name)));
        };
        let labels = pv.metadata.labels.as_ref();
        for key in TOPOLOGY_LABELS {
            // A value that does not parse is ignored, as upstream (which logs it).
            if let Some(values) = labels.and_then(|l| l.get(key)).and_then(|v| label_zones_to_set(v)) {
                out.push(PvTopology { key, values });
            }
        }
    }
    Ok(out)
}

/// The VolumeZone plugin.
#[derive(Debug, Default)]
pub struct VolumeZone;

impl VolumeZone {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<VolumeZone, String> {
        Ok(VolumeZone)
    }
}

impl Plugin for VolumeZone {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A new WaitForFirstConsumer class lets an unbound claim of it be skipped (the mode is immutable).
            ClusterEvent::new(EventResource::StorageClass, action::ADD),
            // A new node or new zone labels (taints too, as upstream, for nodes that were added not ready).
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_LABEL | action::UPDATE_TAINT),
            // A claim created or bound; a volume created or relabelled.
            ClusterEvent::new(EventResource::Volume, action::ADD | action::UPDATE),
        ]
    }
    crate::serves!(pre_filter, filter, sign);
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        match pod_pv_topologies(pod, snapshot) {
            Err(st) => (None, st),
            Ok(t) if t.is_empty() => (None, Status::skip()),
            Ok(t) => {
                state.write(PRE_FILTER_STATE_KEY, PreFilterState(Arc::new(t)));
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(PreFilterState(topologies)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        let labels = node.labels();
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Status::success();
        }
        for t in topologies.iter() {
            let value = labels.get(t.key).or_else(|| labels.get(ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v.as_str())) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

impl crate::framework::SignPlugin for VolumeZone {
    /// As upstream: the volumes' sources.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        Ok(vec![SignFragment { key: signers::VOLUMES, value: signers::volumes(pod) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{ClusterObjects, Code};
    use crate::plugins::testutil::{node, pod};
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;
    use serde_json::{json, Value};

    fn pv(name: &str, labels: Value) -> (String, Arc<PersistentVolume>) {
        (name.into(), Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()))
    }
    fn pvc(name: &str, spec: Value) -> (String, Arc<PersistentVolumeClaim>) {
        let v = json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec});
        (format!("default/{name}"), Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn class(name: &str, mode: Option<&str>) -> (String, Arc<StorageClass>) {
        let mut v = json!({"metadata": {"name": name}, "provisioner": "csi.example.com"});
        if let Some(m) = mode {
            v["volumeBindingMode"] = json!(m);
        }
        (name.into(), Arc::new(serde_json::from_value(v).unwrap()))
    }

    fn snapshot() -> Snapshot {
        let mut s = Snapshot::from_nodes(vec![]);
        s.objects = Arc::new(ClusterObjects {
            pvs: [
                pv("beta-zone", json!({LABEL_FAILURE_DOMAIN_BETA_ZONE: "us-west1-a"})),
                pv("beta-region", json!({LABEL_FAILURE_DOMAIN_BETA_REGION: "us-west1", "useless": "none"})),
                pv("zone", json!({LABEL_TOPOLOGY_ZONE: "us-west1-a"})),
                pv("region", json!({LABEL_TOPOLOGY_REGION: "us-west1"})),
                pv("zone-and-region", json!({LABEL_TOPOLOGY_ZONE: "us-west1-a", LABEL_TOPOLOGY_REGION: "us-west1"})),
                pv("multi-zone", json!({LABEL_TOPOLOGY_ZONE: "us-west1-c__us-west1-a"})),
                pv("bad-value", json!({LABEL_TOPOLOGY_ZONE: "us-west1-a____"})),
                pv("unlabelled", json!({})),
            ]
            .into_iter()
            .collect(),
            pvcs: [
                ["c-beta-zone", "beta-zone"],
                ["c-beta-region", "beta-region"],
                ["c-zone", "zone"],
                ["c-region", "region"],
                ["c-zone-and-region", "zone-and-region"],
                ["c-multi-zone", "multi-zone"],
                ["c-bad-value", "bad-value"],
                ["c-unlabelled", "unlabelled"],
                ["c-ghost", "no-such-pv"],
            ]
            .into_iter()
            .map(|[c, v]| pvc(c, json!({"volumeName": v})))
            .chain([
                pvc("c-no-class", json!({})),
                pvc("c-missing-class", json!({"storageClassName": "nope"})),
                pvc("c-wait", json!({"storageClassName": "wait"})),
                pvc("c-immediate", json!({"storageClassName": "immediate"})),
                pvc("c-unset-mode", json!({"storageClassName": "unset"})),
            ])
            .collect(),
            storage_classes: [
                class("wait", Some(BINDING_WAIT_FOR_FIRST_CONSUMER)),
                class("immediate", Some("Immediate")),
                class("unset", None),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        });
        s
    }

    fn pod_with(claims: &[&str]) -> PodInfo {
        let volumes: Vec<Value> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        pod(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"volumes": volumes}}))
    }

    #[test]
    fn pre_filter_table() {
        let cases: Vec<(&str, &[&str], Code, Option<&str>)> = vec![
            ("no claims", &[], Code::Skip, None),
            ("bound, PV without zone labels", &["c-unlabelled"], Code::Skip, None),
            ("bound, unparsable zone label is ignored", &["c-bad-value"], Code::Skip, None),
            ("bound with a zone", &["c-zone"], Code::Success, None),
            ("unbound, WaitForFirstConsumer", &["c-wait"], Code::Skip, None),
            ("WaitForFirstConsumer beside a zoned claim", &["c-wait", "c-zone"], Code::Success, None),
            ("empty claim name", &[""], Code::UnschedulableAndUnresolvable, Some(ERR_REASON_NO_CLAIM_NAME)),
            (
                "missing claim",
                &["nope"],
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "nope" not found"#),
            ),
            (
                "unbound without class",
                &["c-no-class"],
                Code::UnschedulableAndUnresolvable,
                Some(ERR_REASON_NO_PV_NOR_CLASS),
            ),
            (
                "unbound, class missing",
                &["c-missing-class"],
                Code::UnschedulableAndUnresolvable,
                Some(r#"storageclass.storage.k8s.io "nope" not found"#),
            ),
            ("unbound, Immediate", &["c-immediate"], Code::UnschedulableAndUnresolvable, Some(ERR_REASON_NO_PV_NAME)),
            (
                "unbound, mode unset is Immediate",
                &["c-unset-mode"],
                Code::UnschedulableAndUnresolvable,
                Some(ERR_REASON_NO_PV_NAME),
            ),
            (
                "bound to a missing PV",
                &["c-ghost"],
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolume "no-such-pv" not found"#),
            ),
        ];
        let snap = snapshot();
        for (name, claims, code, reason) in cases {
            let mut state = CycleState::new();
            let (res, st) = VolumeZone.pre_filter(&mut state, &pod_with(claims), &snap);
            assert!(res.is_none(), "{name}");
            assert_eq!(st.code(), code, "{name}: {st}");
            if let Some(r) = reason {
                assert_eq!(st.reasons(), [r.to_string()], "{name}");
            }
            assert_eq!(state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).is_some(), code == Code::Success, "{name}");
        }
    }

    #[test]
    fn filter_table() {
        let zone = |z: &str| json!({LABEL_TOPOLOGY_ZONE: z, "useless": "none"});
        let cases: Vec<(&str, &str, Value, bool)> = vec![
            ("node without labels accepts all", "c-zone", json!({}), true),
            ("node with unrelated labels accepts all", "c-zone", json!({"useless": "none"}), true),
            ("beta zone matches", "c-beta-zone", json!({LABEL_FAILURE_DOMAIN_BETA_ZONE: "us-west1-a"}), true),
            ("beta zone differs", "c-beta-zone", json!({LABEL_FAILURE_DOMAIN_BETA_ZONE: "us-west1-b"}), false),
            ("beta region matches", "c-beta-region", json!({LABEL_FAILURE_DOMAIN_BETA_REGION: "us-west1"}), true),
            ("beta region differs", "c-beta-region", json!({LABEL_FAILURE_DOMAIN_BETA_REGION: "no"}), false),
            ("zone matches", "c-zone", zone("us-west1-a"), true),
            ("zone differs", "c-zone", zone("us-west1-b"), false),
            ("region matches", "c-region", json!({LABEL_TOPOLOGY_REGION: "us-west1"}), true),
            ("region differs", "c-region", json!({LABEL_TOPOLOGY_REGION: "us-east1"}), false),
            ("PV zone and region, node only zone", "c-zone-and-region", zone("us-west1-a"), false),
            (
                "PV zone and region, node both",
                "c-zone-and-region",
                json!({LABEL_TOPOLOGY_ZONE: "us-west1-a", LABEL_TOPOLOGY_REGION: "us-west1"}),
                true,
            ),
            (
                "GA PV label, node with only the beta one",
                "c-zone",
                json!({LABEL_FAILURE_DOMAIN_BETA_ZONE: "us-west1-a"}),
                false,
            ),
            ("beta PV label, node with the GA one", "c-beta-zone", zone("us-west1-a"), true),
            ("beta PV label, node with another GA zone", "c-beta-zone", zone("us-west1-b"), false),
            ("multi-zone PV, first zone", "c-multi-zone", zone("us-west1-c"), true),
            ("multi-zone PV, second zone", "c-multi-zone", zone("us-west1-a"), true),
            ("multi-zone PV, other zone", "c-multi-zone", zone("us-west1-b"), false),
        ];
        let snap = snapshot();
        for (name, claim, labels, fits) in cases {
            let p = pod_with(&[claim]);
            let mut state = CycleState::new();
            let (_, st) = VolumeZone.pre_filter(&mut state, &p, &snap);
            assert!(st.is_success(), "{name}: {st}");
            let st = VolumeZone.filter(&state, &p, &node(json!({"metadata": {"name": "n", "labels": labels}})));
            if fits {
                assert!(st.is_success(), "{name}: {st}");
            } else {
                assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(st.reasons(), [ERR_REASON_CONFLICT.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn every_bound_volume_must_match() {
        let snap = snapshot();
        let p = pod_with(&["c-zone", "c-multi-zone"]);
        let mut state = CycleState::new();
        assert!(VolumeZone.pre_filter(&mut state, &p, &snap).1.is_success());
        let on = |z: &str| node(json!({"metadata": {"name": z, "labels": {LABEL_TOPOLOGY_ZONE: z}}}));
        assert!(VolumeZone.filter(&state, &p, &on("us-west1-a")).is_success());
        assert_eq!(VolumeZone.filter(&state, &p, &on("us-west1-c")).code(), Code::UnschedulableAndUnresolvable);
    }

    #[test]
    fn filter_without_state_is_an_error_and_events() {
        let st =
            VolumeZone.filter(&CycleState::new(), &pod_with(&["c-zone"]), &node(json!({"metadata": {"name": "n"}})));
        assert_eq!(st.code(), Code::Error);
        let ev = VolumeZone.events_to_register();
        for e in [
            ClusterEvent::new(EventResource::StorageClass, action::ADD),
            ClusterEvent::new(EventResource::Node, action::UPDATE_LABEL),
            ClusterEvent::new(EventResource::Volume, action::UPDATE),
        ] {
            assert!(ev.iter().any(|r| r.covers(&e)), "{e:?}");
        }
        assert!(!ev.iter().any(|r| r.covers(&ClusterEvent::new(EventResource::AssignedPod, action::ALL))));
    }
}
