//! NodeVolumeLimits (upstream `nodevolumelimits/csi.go`, the CSI limits): a node may attach at most
//! `CSINode.spec.drivers[].allocatable.count` volumes of each CSI driver. The volumes counted on a node are the
//! unique volumes of the pods already there plus the pod's own:
//! - a claim bound to a PV with `spec.csi` counts as that driver's `volumeHandle`;
//! - a claim not bound yet, or bound to a PV that does not exist, counts as a new volume of its StorageClass's
//!   provisioner (no class, or a missing class, counts nothing: such a claim must be bound before scheduling);
//! - generic ephemeral volumes count through their claim `<pod>-<volume>`, which must be owned by the pod.
//!
//! VolumeLimitScaling (beta, on by default since v1.37): a CSIDriver with `spec.preventPodSchedulingIfMissing`
//! keeps a pod with a new volume of that driver off nodes whose CSINode does not list the driver (none at all
//! counts as not listed): `Unschedulable`, `<driver> CSI driver is not installed on the node`. A driver without
//! a CSIDriver object, or without the opt-in, is not checked (it may not be a CSI driver at all).
//!
//! Limits also come from the node's allocatable `attachable-volumes-csi-<driver>` (upstream still reads them); a
//! CSINode entry wins. A node without either has no limit. The pod's own claim missing is
//! `UnschedulableAndUnresolvable` (upstream's `looking up PVC ...` reason); a claim of a pod already on the node
//! that is missing is not counted.
//!
//! Differences from upstream, on purpose:
//! - In-tree volumes that upstream translates to their CSI driver (CSI migration: AWS EBS, GCE PD, Azure Disk,
//!   Cinder, vSphere, Portworx, as inline volumes, PVs or in-tree provisioners) are not counted: translating
//!   their volume handles is plugin-specific code this scheduler does not carry. Their limits were the
//!   EBSLimits/GCEPDLimits/AzureDiskLimits plugins' business, which are not implemented either.
//! - The pod's own volumes are resolved once in PreFilter rather than per node (they do not depend on the node once
//!   migration is left out); PreFilter answers Skip when the pod has no CSI volume to count, where upstream's
//!   Filter would accept every node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::CSINode;

use crate::framework::storage::{
    claim_class, claim_key, claim_volume_name, ephemeral_claim_is_for_pod, not_found, pod_volumes, volume_claim_name,
    RESOURCE_PVC,
};
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, ClusterObjects, CycleState, EventObject, EventResource, FilterPlugin, NodeInfo, Plugin,
    PodInfo, PreFilterPlugin, PreFilterResult, QueueingHint, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeVolumeLimits";
/// CycleState key of the PreFilter data.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeVolumeLimits";
/// Filter reason when the pod's new volumes would exceed a driver's limit, upstream's wording.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";
/// Filter reason (VolumeLimitScaling) when an opted-in driver of the pod's volumes is not on the node.
pub fn err_reason_driver_not_installed(driver: &str) -> String {
    format!("{driver} CSI driver is not installed on the node")
}
/// Error when a claim volume names no claim, upstream's wording.
pub const ERR_CLAIM_WITHOUT_NAME: &str = "PersistentVolumeClaim had no name";

/// Prefix of node allocatable resources that are attach limits (upstream `ResourceAttachableVolumesPrefix`).
pub const ATTACHABLE_VOLUMES_PREFIX: &str = "attachable-volumes-";
/// Prefix of a CSI driver's attach limit key (upstream `CSIAttachLimitPrefix`).
pub const CSI_ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";
/// The longest resource name; longer limit keys are shortened with a hash.
const RESOURCE_NAME_LENGTH_LIMIT: usize = 63;
/// How much of a long driver name a shortened key keeps.
const LONG_DRIVER_NAME_KEPT: usize = 23;
/// How many hex digits of the SHA-1 a shortened key ends with.
const LONG_DRIVER_HASH_HEX: usize = 16;

/// In-tree provisioners that upstream counts under their CSI driver when migrated; not counted here.
const MIGRATABLE_IN_TREE_PROVISIONERS: [&str; 7] = [
    "kubernetes.io/aws-ebs",
    "kubernetes.io/gce-pd",
    "kubernetes.io/azure-disk",
    "kubernetes.io/azure-file",
    "kubernetes.io/cinder",
    "kubernetes.io/vsphere-volume",
    "kubernetes.io/portworx-volume",
];

/// The key a CSI driver's attach limit goes by (upstream `GetCSIAttachLimitKey`): the prefix and the driver name,
/// or for a name too long for a resource name, its first 23 bytes and 16 hex digits of its SHA-1.
pub fn csi_attach_limit_key(driver: &str) -> String {
    if CSI_ATTACH_LIMIT_PREFIX.len() + driver.len() < RESOURCE_NAME_LENGTH_LIMIT {
        return format!("{CSI_ATTACH_LIMIT_PREFIX}{driver}");
    }
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, driver.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    // Upstream cuts bytes; driver names are ASCII, so a lossy cut only matters for names the API refuses.
    let kept = String::from_utf8_lossy(&driver.as_bytes()[..LONG_DRIVER_NAME_KEPT]);
    format!("{CSI_ATTACH_LIMIT_PREFIX}{kept}{}", &hex[..LONG_DRIVER_HASH_HEX])
}

/// Which volume of a driver a claim uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum VolumeId {
    /// A PV's `spec.csi.volumeHandle`.
    Handle(String),
    /// A claim not bound yet (`namespace/name`): the volume it will get. Kept apart from handles, which is what
    /// upstream's random prefix is for.
    UnboundClaim(String),
}

/// A volume counted against its driver's limit; the same volume used by several pods counts once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AttachableVolume {
    driver: String,
    id: VolumeId,
}

/// The CSI volume a claim uses (upstream `getCSIDriverInfo`), `None` when it counts against no CSI limit.
fn claim_csi_volume(pvc: &PersistentVolumeClaim, key: &str, objects: &ClusterObjects) -> Option<AttachableVolume> {
    let pv_name = claim_volume_name(pvc);
    // A PV that is gone (or a claim pre-bound to one not created yet) counts by its class, as an unbound claim.
    let Some(pv) = objects.pvs.get(pv_name).filter(|_| !pv_name.is_empty()) else {
        return class_csi_volume(pvc, key, objects);
    };
    let csi = pv.spec.as_ref().and_then(|s| s.csi.as_ref())?;
    if csi.driver.is_empty() || csi.volume_handle.is_empty() {
        return None;
    }
    Some(AttachableVolume { driver: csi.driver.clone(), id: VolumeId::Handle(csi.volume_handle.clone()) })
}

/// The volume an unbound claim will get from its class's provisioner (upstream `getCSIDriverInfoFromSC`).
fn class_csi_volume(pvc: &PersistentVolumeClaim, key: &str, objects: &ClusterObjects) -> Option<AttachableVolume> {
    let class = objects.storage_classes.get(claim_class(pvc))?;
    let provisioner = class.provisioner.as_str();
    if provisioner.is_empty() || MIGRATABLE_IN_TREE_PROVISIONERS.contains(&provisioner) {
        return None;
    }
    Some(AttachableVolume { driver: provisioner.to_string(), id: VolumeId::UnboundClaim(key.to_string()) })
}

/// Adds the CSI volumes of `pod` to `out` (upstream `filterAttachableVolumes`). A missing claim stops the pod
/// being scheduled (`new_pod`) and is not counted for a pod already on the node.
fn add_attachable_volumes(
    pod: &PodInfo,
    objects: &ClusterObjects,
    new_pod: bool,
    out: &mut HashSet<AttachableVolume>,
) -> Result<(), Status> {
    for v in pod_volumes(pod) {
        let Some((claim, ephemeral)) = volume_claim_name(pod, v) else { continue };
        if claim.is_empty() {
            return Err(Status::error(ERR_CLAIM_WITHOUT_NAME));
        }
        let key = claim_key(&pod.namespace, &claim);
        let Some(pvc) = objects.pvcs.get(&key) else {
            if new_pod {
                let reason = format!("looking up PVC {key}: {}", not_found(RESOURCE_PVC, &claim));
                return Err(Status::unresolvable(reason));
            }
            continue;
        };
        if ephemeral {
            ephemeral_claim_is_for_pod(pod, pvc).map_err(Status::error)?;
        }
        if let Some(vol) = claim_csi_volume(pvc, &key, objects) {
            out.insert(vol);
        }
    }
    Ok(())
}

/// The node's attach limits by limit key: its allocatable `attachable-volumes-*`, then its CSINode's drivers.
fn volume_limits(node: &NodeInfo, csi_node: Option<&CSINode>) -> HashMap<String, i64> {
    let mut limits: HashMap<String, i64> = node
        .allocatable
        .scalar
        .iter()
        .filter(|(k, _)| k.starts_with(ATTACHABLE_VOLUMES_PREFIX))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    for d in csi_node.map(|c| c.spec.drivers.as_slice()).unwrap_or(&[]) {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            limits.insert(csi_attach_limit_key(&d.name), i64::from(count));
        }
    }
    limits
}

/// Upstream `checkCSIDriverOnNode`: only a CSIDriver that opted in with `preventPodSchedulingIfMissing` must be
/// listed in the node's CSINode.
fn driver_installed(objects: &ClusterObjects, driver: &str, csi_node: Option<&CSINode>) -> bool {
    let opted_in = objects.csi_drivers.get(driver).and_then(|d| d.spec.prevent_pod_scheduling_if_missing) == Some(true);
    !opted_in || csi_node.is_some_and(|c| c.spec.drivers.iter().any(|d| d.name == driver))
}

/// PreFilter data: the pod's CSI volumes (or why they cannot be resolved, answered on every node as upstream's
/// Filter does) and the objects to resolve the volumes of the pods on each node.
#[derive(Clone)]
struct PreFilterState {
    new_volumes: Result<Arc<HashSet<AttachableVolume>>, Status>,
    objects: Arc<ClusterObjects>,
}

/// The NodeVolumeLimits plugin.
#[derive(Debug)]
pub struct NodeVolumeLimits {
    /// VolumeLimitScaling: opted-in drivers must be on the node.
    volume_limit_scaling: bool,
}

impl Default for NodeVolumeLimits {
    fn default() -> NodeVolumeLimits {
        NodeVolumeLimits { volume_limit_scaling: true }
    }
}

impl NodeVolumeLimits {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<NodeVolumeLimits, String> {
        Ok(NodeVolumeLimits { volume_limit_scaling: ctx.features.volume_limit_scaling })
    }
}

impl Plugin for NodeVolumeLimits {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A new CSINode, or new limits on one (upstream's MutableCSINodeAllocatableCount).
            ClusterEvent::new(EventResource::CSINode, action::ADD | action::UPDATE),
            // A deleted pod detaches its volumes.
            ClusterEvent::new(EventResource::AssignedPod, action::DELETE),
            // The pod's missing claim was created.
            ClusterEvent::new(EventResource::Volume, action::ADD),
        ]
    }
    /// A deleted pod matters only if it used claims (upstream `isSchedulableAfterPodDeleted`).
    fn queueing_hint(
        &self,
        _pod: &PodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        _new: Option<&EventObject>,
    ) -> QueueingHint {
        match (event.resource, old) {
            (EventResource::AssignedPod, Some(EventObject::Pod(deleted))) => {
                let uses_claims =
                    pod_volumes(deleted).iter().any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
                if uses_claims && deleted.node_name().is_some_and(|n| !n.is_empty()) {
                    QueueingHint::Queue
                } else {
                    QueueingHint::QueueSkip
                }
            }
            _ => QueueingHint::Queue,
        }
    }
    crate::serves!(pre_filter, filter, sign);
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let mut new_volumes = HashSet::new();
        let new_volumes = match add_attachable_volumes(pod, &snapshot.objects, true, &mut new_volumes) {
            Ok(()) if new_volumes.is_empty() => return (None, Status::skip()),
            Ok(()) => Ok(Arc::new(new_volumes)),
            Err(st) => Err(st),
        };
        state.write(PRE_FILTER_STATE_KEY, PreFilterState { new_volumes, objects: snapshot.objects.clone() });
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        let new_volumes = match &s.new_volumes {
            Ok(v) => v,
            Err(st) => return st.clone(),
        };
        let csi_node = s.objects.csi_nodes.get(&node.name).map(|c| &**c);
        // Upstream checks its new volumes in map order; the first missing driver by name here, to be repeatable.
        let mut drivers: Vec<&str> = new_volumes.iter().map(|v| v.driver.as_str()).collect();
        drivers.sort_unstable();
        drivers.dedup();
        if let Some(d) = drivers
            .into_iter()
            .filter(|_| self.volume_limit_scaling)
            .find(|d| !driver_installed(&s.objects, d, csi_node))
        {
            return Status::unschedulable(err_reason_driver_not_installed(d));
        }
        let limits = volume_limits(node, csi_node);
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = HashSet::new();
        for p in &node.pods {
            if let Err(st) = add_attachable_volumes(p, &s.objects, false, &mut attached) {
                return st;
            }
        }
        let mut attached_count: HashMap<String, i64> = HashMap::new();
        for v in &attached {
            *attached_count.entry(csi_attach_limit_key(&v.driver)).or_default() += 1;
        }
        // A volume already attached for another pod adds nothing.
        let mut new_count: HashMap<String, i64> = HashMap::new();
        for v in new_volumes.iter().filter(|v| !attached.contains(*v)) {
            *new_count.entry(csi_attach_limit_key(&v.driver)).or_default() += 1;
        }
        for (key, count) in new_count {
            let Some(max) = limits.get(&key) else { continue };
            if attached_count.get(&key).copied().unwrap_or(0) + count > *max {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

impl crate::framework::SignPlugin for NodeVolumeLimits {
    /// As upstream's CSILimits: the volumes' sources.
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
    use crate::framework::Code;
    use crate::plugins::testutil::{node_with_pods, pod};
    use k8s_openapi::api::core::v1::PersistentVolume;
    use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
    use serde_json::{json, Value};

    const EBS: &str = "ebs.csi.aws.com";
    const GCE: &str = "pd.csi.storage.gke.io";

    fn pv(name: &str, driver: &str) -> (String, Arc<PersistentVolume>) {
        let v = json!({"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": format!("{driver}-{name}")}}});
        (name.into(), Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn pvc(name: &str, spec: Value) -> (String, Arc<PersistentVolumeClaim>) {
        pvc_meta(json!({"name": name, "namespace": "default"}), spec)
    }
    fn pvc_meta(meta: Value, spec: Value) -> (String, Arc<PersistentVolumeClaim>) {
        let key = format!("default/{}", meta["name"].as_str().unwrap());
        (key, Arc::new(serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap()))
    }
    fn class(name: &str, provisioner: &str) -> (String, Arc<StorageClass>) {
        let v = json!({"metadata": {"name": name}, "provisioner": provisioner});
        (name.into(), Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn csi_node(name: &str, limits: &[(&str, Option<i32>)]) -> (String, Arc<CSINode>) {
        let drivers: Vec<Value> = limits
            .iter()
            .map(|(d, count)| match count {
                Some(c) => json!({"name": d, "nodeID": name, "allocatable": {"count": c}}),
                None => json!({"name": d, "nodeID": name}),
            })
            .collect();
        let v = json!({"metadata": {"name": name}, "spec": {"drivers": drivers}});
        (name.into(), Arc::new(serde_json::from_value(v).unwrap()))
    }

    /// Claims `ebs-<i>` bound to EBS volumes `pv-ebs-<i>`, `gce-0` bound to a GCE PD volume, `pending-ebs` of an
    /// EBS class, `ghost-ebs` bound to a missing PV with an EBS class, `no-class` and `missing-class` unbound,
    /// `in-tree` of an in-tree class, `nfs` bound to a non-CSI PV, an ephemeral claim `p-eph` owned by pod uid
    /// `p`, and `q-eph` and `e0-eph` owned by someone else. CSINodes: `limited` (EBS 2, GCE without a count).
    fn objects() -> ClusterObjects {
        let mut pvs: crate::framework::ObjectMap<PersistentVolume> =
            (0..4).map(|i| pv(&format!("pv-ebs-{i}"), EBS)).chain([pv("pv-gce-0", GCE)]).collect();
        pvs.insert(
            "pv-nfs".into(),
            Arc::new(
                serde_json::from_value(
                    json!({"metadata": {"name": "pv-nfs"}, "spec": {"nfs": {"server": "s", "path": "/"}}}),
                )
                .unwrap(),
            ),
        );
        let owned_by = |name: &str, uid: &str| {
            pvc_meta(
                json!({"name": name, "namespace": "default", "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": uid, "controller": true}]}),
                json!({"storageClassName": "ebs"}),
            )
        };
        ClusterObjects {
            pvs,
            pvcs: (0..4)
                .map(|i| pvc(&format!("ebs-{i}"), json!({"volumeName": format!("pv-ebs-{i}")})))
                .chain([
                    pvc("gce-0", json!({"volumeName": "pv-gce-0"})),
                    pvc("pending-ebs", json!({"storageClassName": "ebs"})),
                    pvc("ghost-ebs", json!({"volumeName": "pv-gone", "storageClassName": "ebs"})),
                    pvc("no-class", json!({})),
                    pvc("missing-class", json!({"storageClassName": "nope"})),
                    pvc("in-tree", json!({"storageClassName": "gp2-in-tree"})),
                    pvc("nfs", json!({"volumeName": "pv-nfs"})),
                    owned_by("p-eph", "p"),
                    owned_by("q-eph", "someone-else"),
                    owned_by("e0-eph", "someone-else"),
                ])
                .collect(),
            storage_classes: [class("ebs", EBS), class("gp2-in-tree", "kubernetes.io/aws-ebs")].into_iter().collect(),
            csi_nodes: [csi_node("limited", &[(EBS, Some(2)), (GCE, None)])].into_iter().collect(),
            ..Default::default()
        }
    }

    fn claims(c: &[&str]) -> Value {
        json!(c
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
            .collect::<Vec<_>>())
    }
    fn pod_with(name: &str, volumes: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"volumes": volumes}}))
    }

    /// PreFilter then Filter of a pod with `new` claims on node `node` holding pods with `existing` claims.
    fn run(node: Value, new: Value, existing: &[Value]) -> Status {
        let n = node_with_pods(
            node,
            existing.iter().enumerate().map(|(i, v)| pod_with(&format!("e{i}"), v.clone())).collect(),
        );
        let mut snap = Snapshot::from_nodes(vec![]);
        snap.objects = Arc::new(objects());
        let p = pod_with("p", new);
        let mut state = CycleState::new();
        let (res, st) = NodeVolumeLimits::default().pre_filter(&mut state, &p, &snap);
        assert!(res.is_none());
        if !st.is_success() {
            return st;
        }
        NodeVolumeLimits::default().filter(&state, &p, &n)
    }

    #[test]
    fn volume_limit_scaling_wants_an_opted_in_driver_on_the_node() {
        let driver = |name: &str, opt_in: Option<bool>| {
            let v = json!({"metadata": {"name": name}, "spec": {"preventPodSchedulingIfMissing": opt_in}});
            (name.to_string(), Arc::new(serde_json::from_value::<CSIDriver>(v).unwrap()))
        };
        let mut o = objects();
        o.csi_nodes.extend([csi_node("gce-only", &[(GCE, None)])]);
        let run_with = |o: &ClusterObjects, node: &str, claims_: &[&str]| {
            let mut snap = Snapshot::from_nodes(vec![]);
            snap.objects = Arc::new(o.clone());
            let p = pod_with("p", claims(claims_));
            let mut state = CycleState::new();
            assert!(NodeVolumeLimits::default().pre_filter(&mut state, &p, &snap).1.is_success());
            NodeVolumeLimits::default().filter(&state, &p, &node_with_pods(json!({"metadata": {"name": node}}), vec![]))
        };
        // No CSIDriver object, or one that did not opt in: nodes without the driver still fit.
        assert!(run_with(&o, "gce-only", &["ebs-0"]).is_success());
        o.csi_drivers.extend([driver(EBS, Some(false))]);
        assert!(run_with(&o, "gce-only", &["ebs-0"]).is_success());
        o.csi_drivers.extend([driver(EBS, Some(true))]);
        let missing = run_with(&o, "gce-only", &["ebs-0"]);
        assert_eq!(missing.code(), Code::Unschedulable);
        assert_eq!(missing.reasons(), [format!("{EBS} CSI driver is not installed on the node")]);
        assert_eq!(run_with(&o, "no-csinode", &["pending-ebs"]).code(), Code::Unschedulable, "no CSINode at all");
        assert!(run_with(&o, "limited", &["ebs-0"]).is_success(), "listed there");
        assert!(run_with(&o, "gce-only", &["gce-0"]).is_success(), "another driver's volume");
    }

    #[test]
    fn filter_table() {
        let limited = json!({"metadata": {"name": "limited"}});
        let unknown = json!({"metadata": {"name": "no-csinode"}});
        let with_allocatable = |count: &str| json!({"metadata": {"name": "no-csinode"}, "status": {"allocatable": {csi_attach_limit_key(EBS): count}}});
        // (name, node, the pod's volumes, volumes of pods on the node, want: None fits, Some(code))
        type Case<'a> = (&'a str, Value, Value, Vec<Value>, Option<Code>);
        let exceeded = Some(Code::Unschedulable);
        let cases: Vec<Case> = vec![
            ("under the limit", limited.clone(), claims(&["ebs-0"]), vec![claims(&["ebs-1"])], None),
            ("at the limit", limited.clone(), claims(&["ebs-0", "ebs-1"]), vec![], None),
            (
                "over the limit with existing pods",
                limited.clone(),
                claims(&["ebs-0", "ebs-1"]),
                vec![claims(&["ebs-2"])],
                exceeded,
            ),
            (
                "over the limit by the pod alone",
                limited.clone(),
                claims(&["ebs-0", "ebs-1", "ebs-2"]),
                vec![],
                exceeded,
            ),
            (
                "a volume shared with a pod on the node counts once",
                limited.clone(),
                claims(&["ebs-0", "ebs-1"]),
                vec![claims(&["ebs-1"]), claims(&["ebs-0"])],
                None,
            ),
            (
                "the same claim twice in the pod counts once",
                limited.clone(),
                claims(&["ebs-0", "ebs-0"]),
                vec![claims(&["ebs-1"])],
                None,
            ),
            (
                "other drivers count against their own limit",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![claims(&["gce-0", "ebs-1"])],
                None,
            ),
            (
                "a driver without a count has no limit",
                limited.clone(),
                claims(&["gce-0"]),
                vec![claims(&["ebs-1", "ebs-2"])],
                None,
            ),
            (
                "pending claim counts by its class",
                limited.clone(),
                claims(&["pending-ebs"]),
                vec![claims(&["ebs-1", "ebs-2"])],
                exceeded,
            ),
            (
                "claim bound to a missing PV counts by its class",
                limited.clone(),
                claims(&["ghost-ebs"]),
                vec![claims(&["ebs-1", "ebs-2"])],
                exceeded,
            ),
            (
                "pending claims of pods on the node count",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![claims(&["pending-ebs", "ebs-1"])],
                exceeded,
            ),
            (
                "missing claims of pods on the node do not count",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![claims(&["gone", "ebs-1"])],
                None,
            ),
            (
                "unbound without class does not count",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![claims(&["no-class", "missing-class", "ebs-1"])],
                None,
            ),
            (
                "non-CSI and in-tree volumes do not count",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![claims(&["nfs", "in-tree", "ebs-1"])],
                None,
            ),
            (
                "no CSINode: no limit",
                unknown.clone(),
                claims(&["ebs-0", "ebs-1", "ebs-2"]),
                vec![claims(&["ebs-3"])],
                None,
            ),
            (
                "node allocatable limit without CSINode",
                with_allocatable("3"),
                claims(&["ebs-0", "ebs-1"]),
                vec![claims(&["ebs-2", "ebs-3"])],
                exceeded,
            ),
            (
                "node allocatable limit, room left",
                with_allocatable("3"),
                claims(&["ebs-0", "ebs-1"]),
                vec![claims(&["ebs-2"])],
                None,
            ),
            (
                "generic ephemeral volume counts by its class",
                limited.clone(),
                json!([{"name": "eph", "ephemeral": {}}]),
                vec![claims(&["ebs-1", "ebs-2"])],
                exceeded,
            ),
            (
                "pod on the node with a claim it does not own is an error",
                limited.clone(),
                claims(&["ebs-0"]),
                vec![json!([{"name": "eph", "ephemeral": {}}])],
                Some(Code::Error),
            ),
        ];
        for (name, node, new, existing, want) in cases {
            let st = run(node, new, &existing);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(code) => {
                    assert_eq!(st.code(), code, "{name}: {st}");
                    if code == Code::Unschedulable {
                        assert_eq!(st.reasons(), [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED.to_string()], "{name}");
                    }
                }
            }
        }
    }

    #[test]
    fn pre_filter_skips_and_the_pods_own_claim_errors() {
        let limited = json!({"metadata": {"name": "limited"}});
        let cases: Vec<(&str, Value, Code, Option<&str>)> = vec![
            ("no volumes", json!([]), Code::Skip, None),
            ("no claims", json!([{"name": "e", "emptyDir": {}}]), Code::Skip, None),
            ("claims of no CSI driver", claims(&["nfs", "no-class", "in-tree"]), Code::Skip, None),
            ("a CSI claim", claims(&["ebs-0"]), Code::Success, None),
            (
                "missing claim",
                claims(&["nope"]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"looking up PVC default/nope: persistentvolumeclaim "nope" not found"#),
            ),
            (
                "ephemeral claim not created yet",
                json!([{"name": "new", "ephemeral": {}}]),
                Code::UnschedulableAndUnresolvable,
                Some(r#"looking up PVC default/p-new: persistentvolumeclaim "p-new" not found"#),
            ),
            ("empty claim name", claims(&[""]), Code::Error, Some(ERR_CLAIM_WITHOUT_NAME)),
        ];
        let mut snap = Snapshot::from_nodes(vec![]);
        snap.objects = Arc::new(objects());
        for (name, volumes, code, reason) in cases {
            let p = pod_with("p", volumes.clone());
            let (_, st) = NodeVolumeLimits::default().pre_filter(&mut CycleState::new(), &p, &snap);
            let want_prefilter = if code == Code::Skip { Code::Skip } else { Code::Success };
            assert_eq!(st.code(), want_prefilter, "{name}: {st}");
            // Like upstream's Filter, the pod's own claim problems are answered on every node.
            let st = run(limited.clone(), volumes, &[]);
            if code == Code::Skip {
                assert_eq!(st.code(), Code::Skip, "{name}");
                continue;
            }
            assert_eq!(st.code(), code, "{name}: {st}");
            if let Some(r) = reason {
                assert_eq!(st.reasons(), [r.to_string()], "{name}");
            }
        }
        // An ephemeral claim owned by someone else.
        let q = pod(
            json!({"metadata": {"name": "q", "namespace": "default", "uid": "q"}, "spec": {"volumes": [{"name": "eph", "ephemeral": {}}]}}),
        );
        let mut state = CycleState::new();
        assert!(NodeVolumeLimits::default().pre_filter(&mut state, &q, &snap).1.is_success());
        let st = NodeVolumeLimits::default().filter(&state, &q, &node_with_pods(limited, vec![]));
        assert_eq!(st.code(), Code::Error);
        assert_eq!(
            st.reasons(),
            ["PVC default/q-eph was not created for pod default/q (pod is not owner)".to_string()]
        );
    }

    #[test]
    fn attach_limit_keys_are_upstreams() {
        assert_eq!(csi_attach_limit_key(EBS), "attachable-volumes-csi-ebs.csi.aws.com");
        // 23 + 40 bytes reach the resource name limit: the name is cut and its SHA-1 appended (16 hex digits).
        assert_eq!(
            csi_attach_limit_key(&"a".repeat(40)),
            format!("attachable-volumes-csi-{}a56559418dc7908c", "a".repeat(23))
        );
        assert_eq!(
            csi_attach_limit_key("csi.very-long-driver-name.storage.example.com"),
            "attachable-volumes-csi-csi.very-long-driver-na923f823c9bdcd7d9"
        );
        assert_eq!(csi_attach_limit_key(&"a".repeat(39)).len(), 23 + 39);
    }

    #[test]
    fn events_and_pod_deleted_hint() {
        let ev = NodeVolumeLimits::default().events_to_register();
        for e in [
            ClusterEvent::new(EventResource::CSINode, action::ADD),
            ClusterEvent::new(EventResource::AssignedPod, action::DELETE),
            ClusterEvent::new(EventResource::Volume, action::ADD),
        ] {
            assert!(ev.iter().any(|r| r.covers(&e)), "{e:?}");
        }
        let delete = ClusterEvent::new(EventResource::AssignedPod, action::DELETE);
        let p = pod_with("p", claims(&["ebs-0"]));
        let hint = |deleted: PodInfo| {
            NodeVolumeLimits::default().queueing_hint(&p, &delete, Some(&EventObject::Pod(Arc::new(deleted))), None)
        };
        assert_eq!(hint(pod_with("d", claims(&["ebs-1"])).with_node_name("n")), QueueingHint::Queue);
        assert_eq!(
            hint(pod_with("d", json!([{"name": "e", "emptyDir": {}}])).with_node_name("n")),
            QueueingHint::QueueSkip
        );
        assert_eq!(hint(pod_with("d", claims(&["ebs-1"]))), QueueingHint::QueueSkip);
    }
}
