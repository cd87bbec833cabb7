//! VolumeBinding, simplified: a pod's PersistentVolumeClaims must exist, not be lost or being deleted, and be
//! bound; the bound PersistentVolumes' `spec.nodeAffinity.required` must match the node.
//!
//! Differences from upstream, on purpose:
//! - No binding or provisioning is simulated. Every unbound claim is treated as an unbound *immediate* claim
//!   (the pod waits for the claim to be bound), including claims of a `WaitForFirstConsumer` storage class,
//!   which upstream would bind or dynamically provision for the chosen node in PreBind. Hence no Reserve,
//!   PreBind or Score (storage capacity) either.
//! - A claim counts as bound when `spec.volumeName` is set (upstream also wants the `bind-completed`
//!   annotation).
//! - PVs are looked up once in PreFilter instead of per node; PreFilter answers Skip when no bound PV has node
//!   affinity to check, since Filter would accept every node.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Volume};
use serde::Deserialize;

use crate::config::check_go_seconds;

use crate::framework::labels::CompiledNodeSelector;
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, Status,
};
use crate::plugins::helper::{aggregate, decode, invalid, ArgsError};
use crate::plugins::node_affinity::compile_node_selector_lenient;
use crate::plugins::node_resources::fit::UtilizationShapePoint;

/// The plugin's name in profiles (also its CycleState key).
pub const NAME: &str = "VolumeBinding";
/// PreFilter reason when a claim is not bound, upstream's wording.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Filter reason when a bound PV's node affinity does not match the node (upstream v1.33+ wording; older
/// releases said "node(s) had volume node affinity conflict").
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason when a claim is bound to a PV that does not exist, upstream's wording.
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

const PHASE_LOST: &str = "Lost";

/// What Filter checks for one bound claim, in the pod's volume order.
#[derive(Debug, Clone)]
enum BoundVolume {
    /// The claim names a PV that does not exist.
    Missing,
    /// The PV's required node affinity.
    Affinity(CompiledNodeSelector),
}

/// PreFilter data: the bound claims' checks.
#[derive(Debug, Clone)]
struct PreFilterState {
    volumes: Arc<Vec<BoundVolume>>,
}

/// The claim name a volume uses, and whether it is a generic ephemeral volume (claim `<pod>-<volume>`).
fn volume_claim(pod: &PodInfo, v: &Volume) -> Option<(String, bool)> {
    if let Some(c) = &v.persistent_volume_claim {
        Some((c.claim_name.clone(), false))
    } else if v.ephemeral.is_some() {
        Some((format!("{}-{}", pod.name, v.name), true))
    } else {
        None
    }
}

/// Upstream `podHasPVCs` checks on one claim; `Err` is the UnschedulableAndUnresolvable reason.
fn check_claim<'a>(
    pod: &PodInfo,
    snapshot: &'a Snapshot,
    name: &str,
    ephemeral: bool,
) -> Result<&'a PersistentVolumeClaim, String> {
    let Some(pvc) = snapshot.objects.pvcs.get(&format!("{}/{}", pod.namespace, name)) else {
        return Err(if ephemeral {
            format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}")
        } else {
            format!("persistentvolumeclaim {name:?} not found")
        });
    };
    let volume_name = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
    if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(PHASE_LOST) {
        return Err(format!("persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume_name:?}"));
    }
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
    }
    if ephemeral {
        let pod_uid = pod.pod.metadata.uid.as_deref().unwrap_or("");
        let controller = pvc.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true));
        if controller.is_none_or(|r| r.uid != pod_uid) {
            return Err(format!(
                "PVC {}/{name} was not created for pod {}/{} (pod is not owner)",
                pod.namespace, pod.namespace, pod.name
            ));
        }
    }
    Ok(pvc)
}

/// The plugin's args (upstream `VolumeBindingArgs`). Checked as upstream, then unused: this plugin binds no
/// volumes, so there is no bind to time out and no capacity to score.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// Seconds to wait for a volume binding (default 600; 0 means no waiting).
    pub bind_timeout_seconds: Option<i64>,
    /// Storage-capacity scoring shape; only with the StorageCapacityScoring feature gate, which is off.
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

impl VolumeBindingArgs {
    /// Decodes the args and checks them as upstream's `ValidateVolumeBindingArgs` with the StorageCapacityScoring
    /// gate off (its v1.34 default; this scheduler has no feature gates).
    pub fn parse(args: Option<&serde_json::Value>) -> Result<VolumeBindingArgs, ArgsError> {
        let a: VolumeBindingArgs = decode(args)?;
        let mut errs = Vec::new();
        match a.bind_timeout_seconds {
            Some(t) if t < 0 => errs.push(invalid(
                "bindTimeoutSeconds",
                t,
                "invalid BindTimeoutSeconds, should not be a negative value",
            )),
            // Upstream turns it into a time.Duration, which overflows past this; refused here instead.
            Some(t) => {
                if let Err(e) = check_go_seconds(t) {
                    errs.push(invalid("bindTimeoutSeconds", t, &e));
                }
            }
            None => {}
        }
        if let Some(shape) = &a.shape {
            errs.push(invalid(
                "shape",
                format!("{} point(s)", shape.len()),
                "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
            ));
        }
        aggregate(errs).map(|()| a)
    }
}

/// The VolumeBinding plugin.
#[derive(Debug, Default)]
pub struct VolumeBinding;

impl VolumeBinding {
    /// Builds the plugin; its args are checked as upstream's, then have no effect here.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<VolumeBinding, String> {
        VolumeBindingArgs::parse(args).map_err(|e| format!("{NAME} args: {e}"))?;
        Ok(VolumeBinding)
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Claims and volumes created or bound.
            ClusterEvent::new(EventResource::Volume, action::ADD | action::UPDATE),
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_LABEL | action::UPDATE_TAINT),
            // Storage classes and CSI objects.
            ClusterEvent::new(EventResource::Other, action::ADD | action::UPDATE),
        ]
    }
    crate::serves!(pre_filter, filter);
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let volumes = pod.pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
        if pod.pvc_names.is_empty() && !volumes.iter().any(|v| v.ephemeral.is_some()) {
            return (None, Status::skip());
        }
        let mut claims = Vec::new();
        for v in volumes {
            let Some((name, ephemeral)) = volume_claim(pod, v) else { continue };
            match check_claim(pod, snapshot, &name, ephemeral) {
                Ok(pvc) => claims.push(pvc),
                Err(reason) => return (None, Status::unresolvable(reason)),
            }
        }
        let bound_pv = |pvc: &&PersistentVolumeClaim| {
            pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty()).map(str::to_owned)
        };
        if claims.iter().any(|c| bound_pv(c).is_none()) {
            return (None, Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
        }
        let mut checks = Vec::new();
        for pv_name in claims.iter().filter_map(bound_pv) {
            match snapshot.objects.pvs.get(&pv_name) {
                None => checks.push(BoundVolume::Missing),
                Some(pv) => {
                    let required =
                        pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
                    if let Some(sel) = required {
                        checks.push(BoundVolume::Affinity(compile_node_selector_lenient(sel)));
                    }
                }
            }
        }
        if checks.is_empty() {
            return (None, Status::skip());
        }
        state.write(NAME, PreFilterState { volumes: Arc::new(checks) });
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(NAME) else {
            return Status::error(format!("reading {NAME:?} from cycleState: not found"));
        };
        let labels = node.labels();
        for v in s.volumes.iter() {
            match v {
                BoundVolume::Missing => return Status::unresolvable(ERR_REASON_PV_NOT_EXIST),
                // Upstream matches PV affinity against a node carrying only the labels: matchFields see no name.
                BoundVolume::Affinity(sel) if !sel.matches("", labels) => {
                    return Status::unresolvable(ERR_REASON_NODE_CONFLICT)
                }
                BoundVolume::Affinity(_) => {}
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::ClusterObjects;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, pod};
    use k8s_openapi::api::core::v1::PersistentVolume;
    use serde_json::{json, Value};

    fn pvc(name: &str, extra: Value) -> (String, Arc<PersistentVolumeClaim>) {
        let mut v = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {}});
        merge(&mut v, extra);
        (format!("default/{name}"), serde_json::from_value(v).unwrap())
    }

    fn pv(name: &str, spec: Value) -> (String, Arc<PersistentVolume>) {
        (name.to_string(), serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap())
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn zone_affinity(zones: &[&str]) -> Value {
        json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": zones}]}
        ]}}})
    }

    fn snapshot() -> Snapshot {
        let mut s = Snapshot::from_nodes(vec![]);
        s.objects = Arc::new(ClusterObjects {
            pvcs: [
                pvc("bound-a", json!({"spec": {"volumeName": "pv-a"}})),
                pvc("bound-b", json!({"spec": {"volumeName": "pv-b"}})),
                pvc("bound-free", json!({"spec": {"volumeName": "pv-free"}})),
                pvc("bound-ghost", json!({"spec": {"volumeName": "pv-ghost"}})),
                pvc("unbound", json!({})),
                pvc("deleting", json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"volumeName": "pv-a"}})),
                pvc("lost", json!({"spec": {"volumeName": "pv-gone"}, "status": {"phase": "Lost"}})),
                pvc("p-eph", json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]}, "spec": {"volumeName": "pv-a"}})),
                pvc("p-foreign", json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "q", "uid": "other", "controller": true}]}, "spec": {"volumeName": "pv-a"}})),
            ]
            .into_iter()
            .collect(),
            pvs: [
                pv("pv-a", zone_affinity(&["a"])),
                pv("pv-b", zone_affinity(&["b"])),
                pv("pv-free", json!({})),
                pv("pv-empty-terms", json!({"nodeAffinity": {"required": {"nodeSelectorTerms": []}}})),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        });
        s
    }

    fn pod_with(volumes: Value) -> PodInfo {
        pod(json!({"metadata": {"name": "p", "namespace": "default", "uid": "pod-uid"}, "spec": {"volumes": volumes}}))
    }

    fn claim(name: &str) -> Value {
        json!({"name": format!("v-{name}"), "persistentVolumeClaim": {"claimName": name}})
    }

    #[test]
    fn pre_filter_table() {
        let cases: Vec<(&str, Value, Code, Option<&str>)> = vec![
            ("no volumes", json!([]), Code::Skip, None),
            ("non-claim volumes only", json!([{"name": "e", "emptyDir": {}}]), Code::Skip, None),
            ("bound, PV without affinity: nothing to filter", json!([claim("bound-free")]), Code::Skip, None),
            ("bound with affinity", json!([claim("bound-a")]), Code::Success, None),
            (
                "claim not found",
                json!([claim("nope")]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "nope" not found"#),
            ),
            (
                "claim being deleted",
                json!([claim("deleting")]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "deleting" is being deleted"#),
            ),
            (
                "claim lost",
                json!([claim("lost")]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "lost" bound to non-existent persistentvolume "pv-gone""#),
            ),
            (
                "unbound claim",
                json!([claim("bound-a"), claim("unbound")]),
                Code::UnschedulableAndUnresolvable,
                Some(ERR_REASON_UNBOUND_IMMEDIATE),
            ),
            (
                "a missing claim is reported before an unbound one",
                json!([claim("unbound"), claim("nope")]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "nope" not found"#),
            ),
            ("bound to a missing PV: checked in Filter", json!([claim("bound-ghost")]), Code::Success, None),
            ("ephemeral owned by the pod", json!([{"name": "eph", "ephemeral": {}}]), Code::Success, None),
            (
                "ephemeral not yet created",
                json!([{"name": "new", "ephemeral": {}}]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-new""#),
            ),
            (
                "ephemeral owned by another pod",
                json!([{"name": "foreign", "ephemeral": {}}]),
                Code::UnschedulableAndUnresolvable,
                Some("PVC default/p-foreign was not created for pod default/p (pod is not owner)"),
            ),
        ];
        let pl = VolumeBinding::new(None, &ctx()).unwrap();
        let snap = snapshot();
        for (name, volumes, code, reason) in cases {
            let mut state = CycleState::new();
            let (result, st) = pl.pre_filter(&mut state, &pod_with(volumes), &snap);
            assert!(result.is_none(), "{name}");
            assert_eq!(st.code(), code, "{name}: {st}");
            if let Some(r) = reason {
                assert_eq!(st.reasons(), [r.to_string()], "{name}");
            }
            assert_eq!(state.read::<PreFilterState>(NAME).is_some(), code == Code::Success, "{name}");
        }
    }

    #[test]
    fn filter_table() {
        let cases: Vec<(&str, Value, Value, Option<&str>)> = vec![
            ("PV affinity matches", json!([claim("bound-a")]), json!({"zone": "a"}), None),
            ("PV affinity conflicts", json!([claim("bound-a")]), json!({"zone": "b"}), Some(ERR_REASON_NODE_CONFLICT)),
            ("no labels", json!([claim("bound-a")]), json!({}), Some(ERR_REASON_NODE_CONFLICT)),
            (
                "two PVs in different zones",
                json!([claim("bound-a"), claim("bound-b")]),
                json!({"zone": "a"}),
                Some(ERR_REASON_NODE_CONFLICT),
            ),
            ("free PV and zoned PV", json!([claim("bound-free"), claim("bound-b")]), json!({"zone": "b"}), None),
            (
                "bound to a missing PV",
                json!([claim("bound-ghost")]),
                json!({"zone": "a"}),
                Some(ERR_REASON_PV_NOT_EXIST),
            ),
            (
                "first failing claim decides",
                json!([claim("bound-b"), claim("bound-ghost")]),
                json!({"zone": "a"}),
                Some(ERR_REASON_NODE_CONFLICT),
            ),
        ];
        let pl = VolumeBinding;
        let snap = snapshot();
        for (name, volumes, labels, want) in cases {
            let p = pod_with(volumes);
            let mut state = CycleState::new();
            let (_, st) = pl.pre_filter(&mut state, &p, &snap);
            assert!(st.is_success(), "{name}: {st}");
            let st = pl.filter(&state, &p, &node(json!({"metadata": {"name": "n1", "labels": labels}})));
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }

    #[test]
    fn pv_affinity_quirks_follow_upstream() {
        let mut snap = snapshot();
        let mut objects = (*snap.objects).clone();
        objects.pvcs.extend([
            pvc("c-empty", json!({"spec": {"volumeName": "pv-empty-terms"}})),
            pvc("c-name", json!({"spec": {"volumeName": "pv-name"}})),
        ]);
        objects.pvs.extend([pv(
            "pv-name",
            json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]}}}),
        )]);
        snap.objects = Arc::new(objects);
        let n1 = node(json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}}));
        for claim_name in ["c-empty", "c-name"] {
            let p = pod_with(json!([claim(claim_name)]));
            let mut state = CycleState::new();
            assert!(VolumeBinding.pre_filter(&mut state, &p, &snap).1.is_success());
            // No terms match nothing; a node-name field is matched against a node that has only labels.
            assert_eq!(
                VolumeBinding.filter(&state, &p, &n1).reasons(),
                [ERR_REASON_NODE_CONFLICT.to_string()],
                "{claim_name}"
            );
        }
    }

    #[test]
    fn filter_without_state_is_an_error() {
        let st =
            VolumeBinding.filter(&CycleState::new(), &pod_with(json!([])), &node(json!({"metadata": {"name": "n"}})));
        assert_eq!(st.code(), Code::Error);
    }
}
