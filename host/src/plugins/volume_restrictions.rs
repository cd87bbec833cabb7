//! VolumeRestrictions (upstream `volumerestrictions/volume_restrictions.go`): a pod may not share certain disks
//! with pods already on a node (the same GCE PD unless every mount is read-only, the same AWS EBS volume, the same
//! RBD image or ISCSI IQN unless every mount is read-only), and a claim with the `ReadWriteOncePod` access mode
//! may be used by one pod in the whole cluster.
//!
//! As upstream, the ReadWriteOncePod conflict is `Unschedulable`, not `UnschedulableAndUnresolvable`: preemption
//! may evict the pod holding the claim, and AddPod/RemovePod keep the count right while it tries. A missing claim
//! is `UnschedulableAndUnresolvable` at PreFilter.
//!
//! Claims in use are counted as upstream does: by claim name among the pods on nodes, once per claim in PreFilter,
//! and per referencing volume in AddPod/RemovePod (upstream's quirk of not comparing namespaces there is kept).
//!
//! Difference from upstream, on purpose: an RBD volume without `pool` is compared as pool `rbd`, the API server's
//! default (pods read from a cluster file are not defaulted; pods read from a cluster are).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::framework::storage::{claim_has_access_mode, claim_key, not_found, pod_volumes, RESOURCE_PVC};
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventObject, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, QueueingHint, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "VolumeRestrictions";
/// CycleState key of the PreFilter data, upstream's.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeRestrictions";
/// Filter reason when a disk the pod mounts is already mounted on the node in a conflicting way, upstream's
/// wording.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Filter reason when a ReadWriteOncePod claim of the pod is already in use, upstream's wording.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";
/// The access mode that allows a single pod in the cluster to use a volume.
pub const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";
/// The RBD pool the API server defaults an unset `pool` to.
const RBD_DEFAULT_POOL: &str = "rbd";

/// PreFilter data: the pod's ReadWriteOncePod claims and how many of them scheduled pods already use.
#[derive(Debug, Clone)]
struct PreFilterState {
    /// Names of the pod's claims with the ReadWriteOncePod access mode.
    rwop_claims: Arc<HashSet<String>>,
    /// References to those claims by pods on nodes (changed by AddPod/RemovePod during preemption).
    conflicting_refs: i64,
}

impl PreFilterState {
    /// Counts `other`'s references to the pod's ReadWriteOncePod claims, `sign` times. Upstream compares claim
    /// names only, not namespaces; so does this.
    fn update_with_pod(&mut self, other: &PodInfo, sign: i64) {
        let refs = pod_volumes(other)
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter(|c| self.rwop_claims.contains(&c.claim_name))
            .count() as i64;
        self.conflicting_refs += sign * refs;
    }
}

/// True when the volume is of a kind this plugin checks for conflicts (upstream `needsRestrictionsCheck`).
fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some() || v.aws_elastic_block_store.is_some() || v.rbd.is_some() || v.iscsi.is_some()
}

/// True when `volume` conflicts with one of `existing`'s volumes (upstream `isVolumeConflict`).
fn is_volume_conflict(volume: &Volume, existing: &Pod) -> bool {
    let existing_volumes = existing.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    existing_volumes.iter().any(|ev| {
        if let (Some(d), Some(ed)) = (&volume.gce_persistent_disk, &ev.gce_persistent_disk) {
            if d.pd_name == ed.pd_name && !(d.read_only == Some(true) && ed.read_only == Some(true)) {
                return true;
            }
        }
        if let (Some(d), Some(ed)) = (&volume.aws_elastic_block_store, &ev.aws_elastic_block_store) {
            // EBS volumes attach to one node at a time whatever the mode.
            if d.volume_id == ed.volume_id {
                return true;
            }
        }
        if let (Some(d), Some(ed)) = (&volume.iscsi, &ev.iscsi) {
            // The same IQN is the same volume; only read-only mounts may share it.
            if d.iqn == ed.iqn && !(d.read_only == Some(true) && ed.read_only == Some(true)) {
                return true;
            }
        }
        if let (Some(d), Some(ed)) = (&volume.rbd, &ev.rbd) {
            // The same image: a common Ceph monitor, the same pool and image name.
            let pool = |p: &Option<String>| p.clone().filter(|p| !p.is_empty()).unwrap_or(RBD_DEFAULT_POOL.into());
            let shared_monitor = d.monitors.iter().any(|m| ed.monitors.contains(m));
            if shared_monitor
                && pool(&d.pool) == pool(&ed.pool)
                && d.image == ed.image
                && !(d.read_only == Some(true) && ed.read_only == Some(true))
            {
                return true;
            }
        }
        false
    })
}

/// True when none of the pod's checked volumes conflicts with a pod on the node (upstream
/// `satisfyVolumeConflicts`).
fn satisfies_volume_conflicts(pod: &PodInfo, pods_on_node: &[Arc<PodInfo>]) -> bool {
    pod_volumes(pod)
        .iter()
        .filter(|v| needs_restrictions_check(v))
        .all(|v| !pods_on_node.iter().any(|ev| is_volume_conflict(v, &ev.pod)))
}

/// The VolumeRestrictions plugin.
#[derive(Debug, Default)]
pub struct VolumeRestrictions;

impl VolumeRestrictions {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<VolumeRestrictions, String> {
        Ok(VolumeRestrictions)
    }
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A deleted pod releases its disks and claims; volumes in a pod spec are immutable, so updates never do.
            ClusterEvent::new(EventResource::AssignedPod, action::DELETE),
            // A new node may have none of the conflicting disks (upstream with queueing hints: Add only).
            ClusterEvent::new(EventResource::Node, action::ADD),
            // A claim the pod names was created (its access modes must be read).
            ClusterEvent::new(EventResource::Volume, action::ADD),
        ]
    }
    /// A deleted pod matters when it held a disk the pod conflicts with or shared a claim name with it (upstream
    /// `isSchedulableAfterPodDeleted`; the claim's access mode is not looked up, as upstream).
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        _new: Option<&EventObject>,
    ) -> QueueingHint {
        let (EventResource::AssignedPod, Some(EventObject::Pod(deleted))) = (event.resource, old) else {
            return QueueingHint::Queue;
        };
        if deleted.namespace != pod.namespace {
            return QueueingHint::QueueSkip;
        }
        if !satisfies_volume_conflicts(pod, std::slice::from_ref(deleted)) {
            return QueueingHint::Queue;
        }
        let claims: HashSet<&str> = pod_volumes(pod)
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.as_str())
            .collect();
        let shares_a_claim = pod_volumes(deleted)
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .any(|c| claims.contains(c.claim_name.as_str()));
        if shares_a_claim {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
    crate::serves!(pre_filter, filter, sign);
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let volumes = pod_volumes(pod);
        let needs_check = volumes.iter().any(needs_restrictions_check);
        let mut rwop_claims = HashSet::new();
        for c in volumes.iter().filter_map(|v| v.persistent_volume_claim.as_ref()) {
            let Some(pvc) = snapshot.objects.pvcs.get(&claim_key(&pod.namespace, &c.claim_name)) else {
                return (None, Status::unresolvable(not_found(RESOURCE_PVC, &c.claim_name)));
            };
            if claim_has_access_mode(pvc, READ_WRITE_ONCE_POD) {
                rwop_claims.insert(c.claim_name.clone());
            }
        }
        // Upstream asks the snapshot whether any pod on a node uses each claim: at most one can, so each claim in
        // use counts once.
        let mut in_use: HashSet<&str> = HashSet::new();
        if !rwop_claims.is_empty() {
            for n in snapshot.nodes() {
                for p in n.pods.iter().filter(|p| p.namespace == pod.namespace) {
                    in_use.extend(
                        pod_volumes(p)
                            .iter()
                            .filter_map(|v| v.persistent_volume_claim.as_ref())
                            .map(|c| c.claim_name.as_str())
                            .filter(|c| rwop_claims.contains(*c)),
                    );
                }
            }
        }
        let conflicting_refs = in_use.len() as i64;
        if !needs_check && conflicting_refs == 0 {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState { rwop_claims: Arc::new(rwop_claims), conflicting_refs });
        (None, Status::success())
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_add, 1);
                Status::success()
            }
            None => missing_state(),
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_remove, -1);
                Status::success()
            }
            None => missing_state(),
        }
    }
}

/// Upstream's error when PreFilter data is missing.
fn missing_state() -> Status {
    Status::error(format!("cannot read {PRE_FILTER_STATE_KEY:?} from cycleState"))
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !satisfies_volume_conflicts(pod, &node.pods) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        if s.conflicting_refs > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

impl crate::framework::SignPlugin for VolumeRestrictions {
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
    use crate::plugins::testutil::{node_with_pods, pod};
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use serde_json::{json, Value};

    fn pod_with(name: &str, volumes: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"volumes": volumes}}))
    }

    fn gce(pd: &str, read_only: bool) -> Value {
        json!({"name": "v", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}})
    }
    fn ebs(id: &str, read_only: bool) -> Value {
        json!({"name": "v", "awsElasticBlockStore": {"volumeID": id, "readOnly": read_only}})
    }
    fn rbd(monitors: &[&str], pool: Option<&str>, image: &str, read_only: bool) -> Value {
        let mut src = json!({"monitors": monitors, "image": image, "readOnly": read_only});
        if let Some(p) = pool {
            src["pool"] = json!(p);
        }
        json!({"name": "v", "rbd": src})
    }
    fn iscsi(iqn: &str, read_only: bool) -> Value {
        json!({"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}})
    }
    fn claim(name: &str) -> Value {
        json!({"name": format!("v-{name}"), "persistentVolumeClaim": {"claimName": name}})
    }

    fn pvc(name: &str, modes: &[&str]) -> (String, Arc<PersistentVolumeClaim>) {
        let v = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"accessModes": modes}});
        (format!("default/{name}"), Arc::new(serde_json::from_value(v).unwrap()))
    }

    /// A snapshot with the claims `rwop` (ReadWriteOncePod), `rwop-2` and `rwo`, and `nodes` as (name, pods).
    fn snapshot(nodes: Vec<(&str, Vec<PodInfo>)>) -> Snapshot {
        let nodes = nodes.into_iter().map(|(n, pods)| node_with_pods(json!({"metadata": {"name": n}}), pods)).collect();
        let mut s = Snapshot::from_nodes(nodes);
        s.objects = Arc::new(ClusterObjects {
            pvcs: [
                pvc("rwop", &[READ_WRITE_ONCE_POD]),
                pvc("rwop-2", &["ReadWriteOnce", READ_WRITE_ONCE_POD]),
                pvc("rwo", &["ReadWriteOnce"]),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        });
        s
    }

    /// PreFilter then Filter on the snapshot's first node.
    fn run(p: &PodInfo, snap: &Snapshot) -> Status {
        let mut state = CycleState::new();
        let (res, st) = VolumeRestrictions.pre_filter(&mut state, p, snap);
        assert!(res.is_none());
        if !st.is_success() {
            return st;
        }
        VolumeRestrictions.filter(&state, p, &snap.nodes()[0])
    }

    #[test]
    fn disk_conflict_table() {
        // (name, the new pod's volume, the existing pod's volume, conflict)
        let cases: Vec<(&str, Value, Value, bool)> = vec![
            ("gce same disk", gce("foo", false), gce("foo", false), true),
            ("gce other disk", gce("foo", false), gce("bar", false), false),
            ("gce same disk, both read-only", gce("foo", true), gce("foo", true), false),
            ("gce same disk, one read-only", gce("foo", true), gce("foo", false), true),
            ("ebs same volume", ebs("foo", false), ebs("foo", false), true),
            ("ebs same volume, read-only does not help", ebs("foo", true), ebs("foo", true), true),
            ("ebs other volume", ebs("foo", false), ebs("bar", false), false),
            (
                "rbd same image",
                rbd(&["a", "b"], Some("p"), "img", false),
                rbd(&["b", "c"], Some("p"), "img", false),
                true,
            ),
            (
                "rbd no common monitor",
                rbd(&["a"], Some("p"), "img", false),
                rbd(&["c"], Some("p"), "img", false),
                false,
            ),
            ("rbd other pool", rbd(&["a"], Some("p"), "img", false), rbd(&["a"], Some("q"), "img", false), false),
            ("rbd other image", rbd(&["a"], Some("p"), "img", false), rbd(&["a"], Some("p"), "other", false), false),
            ("rbd both read-only", rbd(&["a"], Some("p"), "img", true), rbd(&["a"], Some("p"), "img", true), false),
            ("rbd unset pool is rbd", rbd(&["a"], None, "img", false), rbd(&["a"], Some("rbd"), "img", false), true),
            ("iscsi same iqn", iscsi("iqn.a", false), iscsi("iqn.a", false), true),
            ("iscsi other iqn", iscsi("iqn.a", false), iscsi("iqn.b", false), false),
            ("iscsi both read-only", iscsi("iqn.a", true), iscsi("iqn.a", true), false),
            ("iscsi one read-only", iscsi("iqn.a", false), iscsi("iqn.a", true), true),
            ("different kinds never conflict", gce("foo", false), ebs("foo", false), false),
        ];
        for (name, new, existing, conflict) in cases {
            let snap = snapshot(vec![("n", vec![pod_with("existing", json!([existing]))])]);
            let st = run(&pod_with("p", json!([new])), &snap);
            if conflict {
                assert_eq!(st.code(), Code::Unschedulable, "{name}: {st}");
                assert_eq!(st.reasons(), [ERR_REASON_DISK_CONFLICT.to_string()], "{name}");
            } else {
                assert!(st.is_success(), "{name}: {st}");
            }
        }
    }

    #[test]
    fn pre_filter_skips_and_read_write_once_pod_table() {
        let holder = |c: &str| pod_with("holder", json!([claim(c)]));
        // (name, the new pod's volumes, pods on a node, want code, want reason)
        type Case<'a> = (&'a str, Value, Vec<PodInfo>, Code, Option<&'a str>);
        let cases: Vec<Case> = vec![
            ("no volumes", json!([]), vec![], Code::Skip, None),
            ("emptyDir only", json!([{"name": "e", "emptyDir": {}}]), vec![], Code::Skip, None),
            ("rwop claim nobody uses", json!([claim("rwop")]), vec![], Code::Skip, None),
            ("rwo claim used elsewhere", json!([claim("rwo")]), vec![holder("rwo")], Code::Skip, None),
            ("disk volume: Filter runs", json!([gce("foo", false)]), vec![], Code::Success, None),
            (
                "rwop claim in use",
                json!([claim("rwop")]),
                vec![holder("rwop")],
                Code::Unschedulable,
                Some(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            ),
            (
                "rwop among other modes, in use",
                json!([claim("rwo"), claim("rwop-2")]),
                vec![holder("rwop-2")],
                Code::Unschedulable,
                Some(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            ),
            (
                "missing claim",
                json!([claim("nope")]),
                vec![],
                Code::UnschedulableAndUnresolvable,
                Some(r#"persistentvolumeclaim "nope" not found"#),
            ),
        ];
        for (name, volumes, on_node, code, reason) in cases {
            let snap = snapshot(vec![("n", on_node)]);
            let st = run(&pod_with("p", volumes), &snap);
            assert_eq!(st.code(), code, "{name}: {st}");
            if let Some(r) = reason {
                assert_eq!(st.reasons(), [r.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn a_read_write_once_pod_claim_in_use_rejects_every_node_and_only_in_its_namespace() {
        let holder = pod_with("holder", json!([claim("rwop")]));
        let snap = snapshot(vec![("n0", vec![holder]), ("n1", vec![])]);
        let p = pod_with("p", json!([claim("rwop")]));
        let mut state = CycleState::new();
        assert!(VolumeRestrictions.pre_filter(&mut state, &p, &snap).1.is_success());
        for n in snap.nodes() {
            assert_eq!(VolumeRestrictions.filter(&state, &p, n).code(), Code::Unschedulable, "{}", n.name);
        }
        // A pod in another namespace using a claim of the same name is another claim.
        let elsewhere =
            pod(json!({"metadata": {"name": "x", "namespace": "other"}, "spec": {"volumes": [claim("rwop")]}}));
        let snap = snapshot(vec![("n0", vec![elsewhere])]);
        assert_eq!(VolumeRestrictions.pre_filter(&mut CycleState::new(), &p, &snap).1.code(), Code::Skip);
    }

    /// Preemption: removing the pod that holds the claim frees it; adding it back (or a nominated pod using it)
    /// conflicts again.
    #[test]
    fn add_and_remove_pod_follow_the_claims_holders() {
        let holder = Arc::new(pod_with("holder", json!([claim("rwop")])));
        let snap = snapshot(vec![("n0", vec![(*holder).clone()])]);
        let p = pod_with("p", json!([claim("rwop"), gce("foo", false)]));
        let n = snap.nodes()[0].clone();
        let mut state = CycleState::new();
        assert!(VolumeRestrictions.pre_filter(&mut state, &p, &snap).1.is_success());
        assert_eq!(VolumeRestrictions.filter(&state, &p, &n).code(), Code::Unschedulable);
        assert!(VolumeRestrictions.remove_pod(&mut state, &p, &holder, &n, &snap).is_success());
        assert!(VolumeRestrictions.filter(&state, &p, &n).is_success());
        let unrelated = Arc::new(pod_with("unrelated", json!([claim("rwo")])));
        assert!(VolumeRestrictions.add_pod(&mut state, &p, &unrelated, &n, &snap).is_success());
        assert!(VolumeRestrictions.filter(&state, &p, &n).is_success());
        assert!(VolumeRestrictions.add_pod(&mut state, &p, &holder, &n, &snap).is_success());
        assert_eq!(
            VolumeRestrictions.filter(&state, &p, &n).reasons(),
            [ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT.to_string()]
        );
        let empty = CycleState::new();
        assert_eq!(VolumeRestrictions.remove_pod(&mut CycleState::new(), &p, &holder, &n, &snap).code(), Code::Error);
        assert_eq!(VolumeRestrictions.filter(&empty, &p, &n).code(), Code::Error);
    }

    #[test]
    fn events_and_pod_deleted_hint() {
        let ev = VolumeRestrictions.events_to_register();
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::AssignedPod, action::DELETE))));
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::Volume, action::ADD))));
        assert!(!ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::AssignedPod, action::UPDATE))));
        let delete = ClusterEvent::new(EventResource::AssignedPod, action::DELETE);
        let hint = |p: &PodInfo, deleted: PodInfo| {
            VolumeRestrictions.queueing_hint(p, &delete, Some(&EventObject::Pod(Arc::new(deleted))), None)
        };
        let p = pod_with("p", json!([gce("foo", false), claim("rwop")]));
        assert_eq!(hint(&p, pod_with("d", json!([gce("foo", false)]))), QueueingHint::Queue);
        assert_eq!(hint(&p, pod_with("d", json!([claim("rwop")]))), QueueingHint::Queue);
        assert_eq!(hint(&p, pod_with("d", json!([gce("bar", false)]))), QueueingHint::QueueSkip);
        let other_ns =
            pod(json!({"metadata": {"name": "d", "namespace": "x"}, "spec": {"volumes": [gce("foo", false)]}}));
        assert_eq!(hint(&p, other_ns), QueueingHint::QueueSkip);
    }
}
