//! VolumeBinding, as upstream's: a pod's PersistentVolumeClaims must exist and not be lost or being deleted; a
//! bound claim's PersistentVolume must exist and its node affinity match the node; an unbound claim of an
//! `Immediate` class makes the pod wait; an unbound claim of a `WaitForFirstConsumer` class is matched, per
//! node, to an available PersistentVolume (class, capacity, access modes, volume mode, selector, node affinity,
//! smallest first) or else must be provisionable there (the class's provisioner and `allowedTopologies`, and
//! the driver's published CSIStorageCapacity when its CSIDriver asks for capacity tracking). Reserve assumes the
//! choice (later pods see the volume taken and the claim's node chosen); PreBind writes it — the volume's
//! `claimRef`, the claim's `volume.kubernetes.io/selected-node` — and waits, up to `bindTimeoutSeconds`, for the
//! PersistentVolume controller (or the provisioner) to finish the binding; Unreserve forgets the choice.
//!
//! Score (StorageCapacityScoring, beta and on by default since v1.37): per storage class, how full the node's
//! storage would be — the chosen pre-made volumes' requests over their capacities when Filter matched any, else
//! the provisioned claims' requests over the `capacity` of the CSIStorageCapacity that admitted them — mapped
//! through the args' `shape` (default: 0 % used scores 10, 100 % scores 0, so emptier storage wins) and averaged
//! over the classes.
//!
//! Differences from upstream, on purpose:
//! - A claim counts as bound when `spec.volumeName` is set; upstream also wants the `bind-completed` annotation,
//!   which hand-written cluster files rarely carry (the PersistentVolume controller sets both at once). PreBind's
//!   wait does want the annotation, as upstream's.
//! - PreBind checks the binding at once before it polls each second (upstream waits a second first), so the
//!   simulator, whose controllers finish at once, does not wait. A `bindTimeoutSeconds` of 0 checks once.
//! - PreScore answers Skip when the pod has no unbound claim: upstream then scores every node 0, which adds
//!   nothing.
//! - In-tree volumes migrated to CSI are not translated (their node affinity is checked as written).
//! - PVs are looked up once in PreFilter instead of per node; PreFilter answers Skip when no claim needs a
//!   per-node check, since Filter would accept every node.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use serde::Deserialize;

use crate::cluster::volumes::{
    claim_ref, claim_volume, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, NO_PROVISIONER,
};
use crate::config::check_go_seconds;
use crate::framework::labels::{no_labels, CompiledNodeSelector, Labels, Selector};
use crate::framework::quantity::Quantity;
use crate::framework::storage::{
    claim_class, ephemeral_claim_is_for_pod, not_found, pod_volumes, volume_claim_name,
    BINDING_WAIT_FOR_FIRST_CONSUMER, RESOURCE_PVC,
};
use crate::framework::{
    action, ClusterClient, ClusterEvent, ClusterObjects, CycleState, EventResource, FilterPlugin, Listers, NodeInfo,
    Plugin, PluginContext, PodInfo, PreBindPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, ReservePlugin,
    ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use crate::plugins::helper::{aggregate, decode, invalid, ArgsError};
use crate::plugins::node_affinity::compile_node_selector_lenient;
use crate::plugins::node_resources::fit::{validate_shape, UtilizationShapePoint, MAX_CUSTOM_PRIORITY_SCORE};
use crate::plugins::node_resources::resource_allocation::requested_to_capacity_ratio_score;

/// The plugin's name in profiles (also its CycleState key).
pub const NAME: &str = "VolumeBinding";
/// PreFilter reason when a claim of an `Immediate` class (or of no class) is not bound, upstream's wording.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Filter reason when a bound PV's node affinity does not match the node (upstream v1.33+ wording; older
/// releases said "node(s) had volume node affinity conflict").
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason when an unbound claim can be neither matched to a volume nor provisioned on the node.
pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Filter reason when the driver's published capacity cannot hold a claim on the node.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Filter reason when a claim is bound to a PV that does not exist, upstream's wording.
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

const PHASE_LOST: &str = "Lost";
/// Upstream's default `bindTimeoutSeconds`.
const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;
/// How often PreBind looks at the binding's progress (upstream polls each second).
const POLL: Duration = Duration::from_secs(1);

/// What Filter checks for one bound claim, in the pod's volume order.
#[derive(Debug, Clone)]
enum BoundVolume {
    /// The claim names a PV that does not exist.
    Missing,
    /// The PV's required node affinity.
    Affinity(CompiledNodeSelector),
}

/// An unbound claim matched to an available volume on a node.
#[derive(Debug, Clone)]
struct StaticBinding {
    pv: Arc<PersistentVolume>,
    pvc: Arc<PersistentVolumeClaim>,
}

/// A volume a delayed claim may bind to, with what Filter checks on every node worked out once in PreFilter.
#[derive(Debug, Clone)]
struct Candidate {
    pv: Arc<PersistentVolume>,
    /// `capacity.storage` (absent: `None`, which orders first, as zero).
    capacity: Option<Quantity>,
    /// The volume's required node affinity.
    affinity: Option<CompiledNodeSelector>,
}

impl Candidate {
    fn new(pv: Arc<PersistentVolume>) -> Candidate {
        let spec = pv.spec.as_ref();
        let required = spec.and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
        Candidate {
            capacity: storage(spec.and_then(|s| s.capacity.as_ref())),
            affinity: required.map(compile_node_selector_lenient),
            pv,
        }
    }
}

/// What binding the pod's unbound claims on one node takes (upstream `PodVolumes`).
#[derive(Debug, Clone, Default)]
struct PodVolumes {
    static_bindings: Vec<StaticBinding>,
    /// Claims to provision on the node.
    provisions: Vec<Arc<PersistentVolumeClaim>>,
    /// The node's labels, for PreBind's check of the finished binding.
    node_labels: Labels,
    /// What Score weighs: per storage class, bytes requested and bytes of capacity (upstream `classResourceMap`).
    storage_by_class: BTreeMap<String, ClassStorage>,
}

/// Requested and available bytes of one storage class on a node (upstream `StorageResource`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ClassStorage {
    requested: i64,
    capacity: i64,
}

/// PreFilter data, shared by the cycle state's copies as upstream's `stateData` is.
#[derive(Debug, Default)]
struct StateInner {
    /// The cycle's objects (Filter's provisioning checks read classes, drivers and capacities).
    objects: Arc<ClusterObjects>,
    bound: Vec<BoundVolume>,
    /// Unbound claims of `WaitForFirstConsumer` classes.
    delayed: Vec<Arc<PersistentVolumeClaim>>,
    /// The volumes of each of their classes.
    pvs_by_class: HashMap<String, Vec<Candidate>>,
    /// Filter's choice per feasible node.
    by_node: Mutex<HashMap<String, PodVolumes>>,
    /// Set by Reserve: nothing is left to bind.
    all_bound: AtomicBool,
}

#[derive(Debug, Clone, Default)]
struct State(Arc<StateInner>);

/// Volumes and claims Reserve assumed, over the API objects they were assumed on (upstream's assume cache): an
/// entry stands until the informers deliver a newer version of the object, PreBind finishes, or Unreserve.
#[derive(Debug, Default)]
struct AssumeCache {
    pvs: HashMap<String, Assumed<PersistentVolume>>,
    pvcs: HashMap<String, Assumed<PersistentVolumeClaim>>,
}

#[derive(Debug)]
struct Assumed<T> {
    object: Arc<T>,
    /// The resourceVersion of the API object it was assumed on.
    base: Option<String>,
}

/// The assumed object while the API object is still the one it was assumed on; else the API object.
fn overlay<T>(api: Option<&Arc<T>>, assumed: Option<&Assumed<T>>, rv: impl Fn(&T) -> Option<&str>) -> Option<Arc<T>> {
    match (api, assumed) {
        (Some(o), Some(a)) if rv(o) == a.base.as_deref() => Some(a.object.clone()),
        (o, _) => o.cloned(),
    }
}

fn pv_rv(pv: &PersistentVolume) -> Option<&str> {
    pv.metadata.resource_version.as_deref()
}

fn pvc_rv(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.metadata.resource_version.as_deref()
}

impl AssumeCache {
    fn pv(&self, objects: &ClusterObjects, name: &str) -> Option<Arc<PersistentVolume>> {
        overlay(objects.pvs.get(name), self.pvs.get(name), pv_rv)
    }

    fn pvc(&self, objects: &ClusterObjects, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        overlay(objects.pvcs.get(key), self.pvcs.get(key), pvc_rv)
    }
}

/// `namespace/name` of a claim.
fn claim_key(pvc: &PersistentVolumeClaim) -> String {
    format!("{}/{}", pvc.metadata.namespace.as_deref().unwrap_or(""), pvc.metadata.name.as_deref().unwrap_or(""))
}

/// Upstream `podHasPVCs` checks on one claim; `Err` is the UnschedulableAndUnresolvable reason.
fn check_claim(
    pod: &PodInfo,
    pvc: Option<Arc<PersistentVolumeClaim>>,
    name: &str,
    ephemeral: bool,
) -> Result<Arc<PersistentVolumeClaim>, String> {
    let Some(pvc) = pvc else {
        return Err(if ephemeral {
            format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}")
        } else {
            not_found(RESOURCE_PVC, name)
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
        ephemeral_claim_is_for_pod(pod, &pvc)?;
    }
    Ok(pvc)
}

/// A volume's StorageClass name (beta annotation first), `""` for none.
fn volume_class(pv: &PersistentVolume) -> &str {
    let annotated = pv.metadata.annotations.as_ref().and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"));
    annotated.map(String::as_str).or(pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref())).unwrap_or("")
}

/// Whether the class binds a claim only once a pod using it is scheduled. A claim of a class that does not
/// exist binds at once (upstream `IsDelayBindingMode`).
fn delays_binding(class: Option<&StorageClass>) -> bool {
    class.and_then(|c| c.volume_binding_mode.as_deref()) == Some(BINDING_WAIT_FOR_FIRST_CONSUMER)
}

/// `requests.storage` of a claim, `capacity.storage` of a volume (absent or unreadable: zero).
fn storage(
    map: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<Quantity> {
    map.and_then(|m| m.get("storage")).and_then(|q| Quantity::parse(&q.0).ok())
}

fn claim_request(pvc: &PersistentVolumeClaim) -> Option<Quantity> {
    storage(pvc.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()))
}

/// Whether the volume's required node affinity admits a node with these labels (upstream `CheckNodeAffinity`:
/// matched against the labels only).
fn volume_fits_node(pv: &PersistentVolume, labels: &Labels) -> bool {
    let required = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
    required.is_none_or(|sel| compile_node_selector_lenient(sel).matches("", labels))
}

/// Whether the volume's claimRef names this claim (upstream `IsVolumeBoundToClaim`).
fn volume_bound_to(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    r.name == pvc.metadata.name
        && r.namespace == pvc.metadata.namespace
        && r.uid.as_deref().is_none_or(|u| u.is_empty() || Some(u) == pvc.metadata.uid.as_deref())
}

/// Upstream `FindMatchingVolume` for a delayed claim on a node: the volume already bound to the claim if its
/// affinity admits the node, else the smallest available one of the claim's class that fits.
fn find_matching_volume(
    pvc: &PersistentVolumeClaim,
    candidates: &[Candidate],
    labels: &Labels,
    excluded: &HashMap<String, ()>,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let spec = pvc.spec.as_ref();
    // Absent reads as zero: `None` orders first.
    let requested = claim_request(pvc);
    let class = claim_class(pvc);
    let selector = match spec.and_then(|s| s.selector.as_ref()) {
        Some(s) => Some(
            Selector::from_label_selector(s)
                .map_err(|e| format!("error creating internal label selector for claim: {}: {e}", claim_key(pvc)))?,
        ),
        None => None,
    };
    let claim_mode = mode(spec.and_then(|s| s.volume_mode.as_ref()));
    let claim_vac = spec.and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("");
    let claim_modes = spec.and_then(|s| s.access_modes.as_deref()).unwrap_or(&[]);
    let mut best: Option<&Candidate> = None;
    for c in candidates {
        let pv = &c.pv;
        if excluded.contains_key(pv.metadata.name.as_deref().unwrap_or("")) {
            continue;
        }
        let pv_spec = pv.spec.as_ref();
        let bound_here = volume_bound_to(pv, pvc);
        if pv_spec.is_some_and(|s| s.claim_ref.is_some()) && !bound_here {
            continue;
        }
        if c.capacity < requested {
            continue;
        }
        if claim_mode != mode(pv_spec.and_then(|s| s.volume_mode.as_ref())) {
            continue;
        }
        if claim_vac != pv_spec.and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("") {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let fits = c.affinity.as_ref().is_none_or(|sel| sel.matches("", labels));
        if bound_here {
            return Ok(fits.then(|| pv.clone()));
        }
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        if selector.as_ref().is_some_and(|s| !s.matches(pv.metadata.labels.as_ref().unwrap_or(no_labels()))) {
            continue;
        }
        if volume_class(pv) != class || !fits {
            continue;
        }
        let modes = pv_spec.and_then(|s| s.access_modes.as_deref()).unwrap_or(&[]);
        if !claim_modes.iter().all(|m| modes.contains(m)) {
            continue;
        }
        if best.is_none_or(|b| b.capacity > c.capacity) {
            best = Some(c);
        }
    }
    Ok(best.map(|c| c.pv.clone()))
}

/// A volume mode, `Filesystem` when unset (upstream `CheckVolumeModeMismatches`).
fn mode(m: Option<&String>) -> &str {
    m.map_or("Filesystem", String::as_str)
}

/// Whether a node's labels match a class's `allowedTopologies` (any term; none: every node).
fn allowed_topology(class: &StorageClass, labels: &Labels) -> bool {
    let terms = class.allowed_topologies.as_deref().unwrap_or(&[]);
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions.iter().flatten().all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
        })
}

/// The size a published capacity admits: `maximumVolumeSize`, else `capacity`.
fn volume_limit(c: &CSIStorageCapacity) -> Option<Quantity> {
    c.maximum_volume_size.as_ref().or(c.capacity.as_ref()).and_then(|q| Quantity::parse(&q.0).ok())
}

/// What `check_volume_provisions` found.
struct Provisions {
    satisfied: bool,
    sufficient: bool,
    claims: Vec<Arc<PersistentVolumeClaim>>,
    /// For each claim, the `capacity` of the CSIStorageCapacity that admitted it (upstream `NodeCapacity`); none
    /// when its size or its driver's capacity is not tracked.
    node_capacities: Vec<Option<i64>>,
}

/// Upstream `checkVolumeProvisions`: every claim's class must provision on the node, with room for it where
/// the driver publishes capacity.
fn check_volume_provisions(
    objects: &ClusterObjects,
    claims: Vec<Arc<PersistentVolumeClaim>>,
    labels: &Labels,
) -> Result<Provisions, String> {
    let refused = |satisfied, sufficient| {
        Ok(Provisions { satisfied, sufficient, claims: Vec::new(), node_capacities: Vec::new() })
    };
    let mut node_capacities = Vec::with_capacity(claims.len());
    for claim in &claims {
        node_capacities.push(None);
        let class_name = claim_class(claim);
        if class_name.is_empty() {
            return Err(format!("no class for claim {:?}", claim_key(claim)));
        }
        let Some(class) = objects.storage_classes.get(class_name) else {
            return Err(format!("failed to find storage class {class_name:?}"));
        };
        if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
            return refused(false, true);
        }
        if !allowed_topology(class, labels) {
            return refused(false, true);
        }
        let Some(size) = claim_request(claim) else { continue };
        let tracked = objects.csi_drivers.get(&class.provisioner).and_then(|d| d.spec.storage_capacity) == Some(true);
        if !tracked {
            continue;
        }
        // The first that admits it, as upstream's `hasEnoughCapacity`; Score reads its `capacity`.
        let room = objects.csi_storage_capacities.iter().find(|c| {
            c.storage_class_name == class_name
                && volume_limit(c).is_some_and(|l| l >= size)
                && c.node_topology
                    .as_ref()
                    .is_some_and(|t| Selector::from_label_selector(t).is_ok_and(|s| s.matches(labels)))
        });
        let Some(room) = room else {
            return refused(true, false);
        };
        // Upstream reads `capacity` unchecked (nil would panic); one that publishes only `maximumVolumeSize` counts
        // as a pool of 0 bytes here, which scores as full.
        let capacity = room.capacity.as_ref().and_then(|q| Quantity::parse(&q.0).ok()).map_or(0, |q| q.value());
        *node_capacities.last_mut().expect("pushed above") = Some(capacity);
    }
    Ok(Provisions { satisfied: true, sufficient: true, claims, node_capacities })
}

/// Whether `a`, a resourceVersion, is older than `b` (versions the API server did not hand out compare equal).
fn older(a: Option<&str>, b: Option<&str>) -> bool {
    match (a.and_then(|v| v.parse::<u64>().ok()), b.and_then(|v| v.parse::<u64>().ok())) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

fn fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    claim_volume(pvc).is_some() && pvc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
}

/// The plugin's args (upstream `VolumeBindingArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// Seconds PreBind waits for a volume binding to complete (default 600).
    pub bind_timeout_seconds: Option<i64>,
    /// Score's utilization → score points (StorageCapacityScoring); none or empty: [`default_shape`].
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

/// Upstream's default `shape` when StorageCapacityScoring is on: an empty class scores 10, a full one 0.
pub fn default_shape() -> Vec<UtilizationShapePoint> {
    vec![
        UtilizationShapePoint { utilization: 0, score: MAX_CUSTOM_PRIORITY_SCORE },
        UtilizationShapePoint { utilization: 100, score: 0 },
    ]
}

impl VolumeBindingArgs {
    /// Decodes the args, applies upstream's defaults (`SetDefaults_VolumeBindingArgs`: an absent or empty `shape`
    /// is [`default_shape`]) and checks them as upstream's `ValidateVolumeBindingArgs` with StorageCapacityScoring
    /// on (its v1.37 default; this scheduler has no feature gates).
    pub fn parse(args: Option<&serde_json::Value>) -> Result<VolumeBindingArgs, ArgsError> {
        let mut a: VolumeBindingArgs = decode(args)?;
        if a.shape.as_ref().is_none_or(Vec::is_empty) {
            a.shape = Some(default_shape());
        }
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
        validate_shape(a.shape.as_deref().unwrap_or_default(), "shape", &mut errs);
        aggregate(errs).map(|()| a)
    }
}

/// The VolumeBinding plugin.
pub struct VolumeBinding {
    bind_timeout: Duration,
    /// Score's shape as (utilization %, node score 0–100) points.
    shape: Vec<(i64, i64)>,
    /// StorageCapacityScoring: without it (before v1.37) upstream builds no scorer and every node scores 0.
    capacity_scoring: bool,
    cluster: Arc<dyn ClusterClient>,
    listers: Arc<Listers>,
    assumed: Mutex<AssumeCache>,
}

impl std::fmt::Debug for VolumeBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(NAME).field("bind_timeout", &self.bind_timeout).finish_non_exhaustive()
    }
}

impl VolumeBinding {
    /// Builds the plugin from its args; it writes through the context's cluster and reads its listers.
    pub fn new(args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<VolumeBinding, String> {
        let a = VolumeBindingArgs::parse(args).map_err(|e| format!("{NAME} args: {e}"))?;
        let capacity_scoring = ctx.features.storage_capacity_scoring;
        // Upstream defaults no shape without the gate and refuses one the file sets, so that it cannot take effect
        // unnoticed when the gate turns on.
        if let Some(shape) = args.and_then(|a| a.get("shape")).filter(|s| !capacity_scoring && !s.is_null()) {
            let e = aggregate(vec![invalid(
                "shape",
                shape,
                "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
            )]);
            return Err(format!("{NAME} args: {}", e.expect_err("one error")));
        }
        let secs = a.bind_timeout_seconds.unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS).max(0) as u64;
        let shape = a.shape.as_deref().unwrap_or_default();
        Ok(VolumeBinding {
            bind_timeout: Duration::from_secs(secs),
            shape: shape
                .iter()
                .map(|p| (p.utilization, p.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE)))
                .collect(),
            capacity_scoring,
            cluster: ctx.cluster.clone(),
            listers: ctx.listers.clone(),
            assumed: Mutex::default(),
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, AssumeCache> {
        self.assumed.lock().expect("volume assume cache lock")
    }

    /// Forgets what Reserve assumed for these volumes.
    fn revert(&self, v: &PodVolumes) {
        let mut cache = self.cache();
        for b in &v.static_bindings {
            cache.pvs.remove(b.pv.metadata.name.as_deref().unwrap_or(""));
        }
        for c in &v.provisions {
            cache.pvcs.remove(&claim_key(c));
        }
    }

    /// Whether every claim of the pod is bound, as far as this scheduler knows.
    fn pod_volumes_bound(&self, pod: &PodInfo, objects: &ClusterObjects) -> bool {
        let cache = self.cache();
        pod_volumes(pod).iter().filter_map(|v| volume_claim_name(pod, v)).all(|(name, _)| {
            cache.pvc(objects, &format!("{}/{name}", pod.namespace)).is_some_and(|c| claim_volume(&c).is_some())
        })
    }

    /// Upstream `checkBindings`: whether the PersistentVolume controller has finished what PreBind wrote; an
    /// error when it was undone.
    fn check_bindings(&self, node: &str, v: &PodVolumes) -> Result<bool, String> {
        let objects = self.listers.objects();
        for b in &v.static_bindings {
            let name = b.pv.metadata.name.as_deref().unwrap_or("");
            let key = claim_key(&b.pvc);
            let Some(pv) = objects.pvs.get(name) else {
                return Err(format!("failed to check binding: persistentvolume {name:?} not found"));
            };
            let Some(pvc) = objects.pvcs.get(&key) else {
                return Err(format!("failed to check binding: persistentvolumeclaim {key:?} not found"));
            };
            if older(pv_rv(pv), pv_rv(&b.pv)) {
                return Ok(false);
            }
            if !volume_fits_node(pv, &v.node_labels) {
                return Err(format!("pv {name:?} node affinity doesn't match node {node:?}"));
            }
            if pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty())
            {
                return Err(format!("ClaimRef got reset for pv {name:?}"));
            }
            if !fully_bound(pvc) {
                return Ok(false);
            }
        }
        for claim in &v.provisions {
            let key = claim_key(claim);
            let Some(pvc) = objects.pvcs.get(&key) else {
                return Err(format!("failed to check provisioning pvc: persistentvolumeclaim {key:?} not found"));
            };
            if older(pvc_rv(pvc), pvc_rv(claim)) {
                return Ok(false);
            }
            let name = pvc.metadata.name.as_deref().unwrap_or("");
            let Some(selected) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE)) else {
                return Err(format!("selectedNode annotation reset for PVC {name:?}"));
            };
            if selected != node {
                return Err(format!("provisioning failed for PVC {name:?}"));
            }
            if let Some(volume) = claim_volume(pvc) {
                let Some(pv) = objects.pvs.get(volume) else { return Ok(false) };
                if !volume_fits_node(pv, &v.node_labels) {
                    return Err(format!("pv {volume:?} node affinity doesn't match node {node:?}"));
                }
            }
            if !fully_bound(pvc) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Upstream `bindAPIUpdate`: writes each volume's claimRef and each provisioned claim's selected node;
    /// answers the objects as stored (the versions PreBind waits past).
    fn bind_api_update(&self, v: &PodVolumes) -> Result<PodVolumes, String> {
        let mut written = PodVolumes { node_labels: v.node_labels.clone(), ..Default::default() };
        for b in &v.static_bindings {
            let pv = self.cluster.update_pv(&b.pv).map_err(|e| e.to_string())?;
            written.static_bindings.push(StaticBinding { pv: Arc::new(pv), pvc: b.pvc.clone() });
        }
        for c in &v.provisions {
            written.provisions.push(Arc::new(self.cluster.update_pvc(c).map_err(|e| e.to_string())?));
        }
        Ok(written)
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::StorageClass, action::ADD | action::UPDATE),
            // Claims and volumes created or bound.
            ClusterEvent::new(EventResource::Volume, action::ADD | action::UPDATE),
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_LABEL | action::UPDATE_TAINT),
            ClusterEvent::new(EventResource::CSINode, action::ADD | action::UPDATE),
            ClusterEvent::new(EventResource::CSIDriver, action::UPDATE),
            ClusterEvent::new(EventResource::CSIStorageCapacity, action::ADD | action::UPDATE),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score, reserve, pre_bind, sign);
}

/// Upstream Score's grouping by storage class: the pre-made volumes Filter chose, when there are any (requests
/// and capacities summed); else the claims to provision that a published capacity admitted (requests summed,
/// the capacity that of the class's last such claim, as upstream: two claims of one pool see the pool once).
fn storage_by_class(v: &PodVolumes, node_capacities: &[Option<i64>]) -> BTreeMap<String, ClassStorage> {
    let mut by_class: BTreeMap<String, ClassStorage> = BTreeMap::new();
    let requested = |pvc: &PersistentVolumeClaim| claim_request(pvc).map_or(0, |q| q.value());
    if !v.static_bindings.is_empty() {
        for b in &v.static_bindings {
            let spec = b.pv.spec.as_ref();
            // Upstream groups by the volume's `spec.storageClassName` alone (not the beta annotation).
            let class = spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
            let e = by_class.entry(class).or_default();
            e.requested += requested(&b.pvc);
            e.capacity += storage(spec.and_then(|s| s.capacity.as_ref())).map_or(0, |q| q.value());
        }
        return by_class;
    }
    for (claim, capacity) in v.provisions.iter().zip(node_capacities) {
        let Some(capacity) = capacity else { continue };
        let e = by_class.entry(claim_class(claim).to_string()).or_default();
        e.capacity = *capacity;
        e.requested += requested(claim);
    }
    by_class
}

/// Upstream's `buildScorerFunction`: each class's utilization through the shape, averaged (rounded) over classes.
fn capacity_score(shape: &[(i64, i64)], by_class: &BTreeMap<String, ClassStorage>) -> i64 {
    if by_class.is_empty() {
        return 0;
    }
    let sum: i64 = by_class.values().map(|c| requested_to_capacity_ratio_score(shape, c.requested, c.capacity)).sum();
    (sum as f64 / by_class.len() as f64).round() as i64
}

impl PreScorePlugin for VolumeBinding {
    fn pre_score(&self, state: &mut CycleState, _pod: &PodInfo, _nodes: &[Arc<NodeInfo>], _s: &Snapshot) -> Status {
        if !self.capacity_scoring {
            return Status::skip();
        }
        match state.read::<State>(NAME) {
            // No claim was chosen a volume or a pool: every node would score 0.
            Some(State(s)) if !s.delayed.is_empty() => Status::success(),
            _ => Status::skip(),
        }
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(State(s)) = state.read::<State>(NAME) else {
            return Err(Status::error(format!("reading {NAME:?} from cycleState: not found")));
        };
        let by_node = s.by_node.lock().expect("volume binding state lock");
        Ok(by_node.get(&node.name).map_or(0, |v| capacity_score(&self.shape, &v.storage_by_class)))
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let volumes = pod_volumes(pod);
        if pod.pvc_names.is_empty() && !volumes.iter().any(|v| v.ephemeral.is_some()) {
            state.write(NAME, State::default());
            return (None, Status::skip());
        }
        let objects = &snapshot.objects;
        let cache = self.cache();
        let mut claims = Vec::new();
        for v in volumes {
            let Some((name, ephemeral)) = volume_claim_name(pod, v) else { continue };
            match check_claim(pod, cache.pvc(objects, &format!("{}/{name}", pod.namespace)), &name, ephemeral) {
                Ok(pvc) => claims.push(pvc),
                Err(reason) => return (None, Status::unresolvable(reason)),
            }
        }
        let mut inner = StateInner { objects: objects.clone(), ..Default::default() };
        for pvc in claims {
            if let Some(pv_name) = claim_volume(&pvc) {
                match cache.pv(objects, pv_name) {
                    None => inner.bound.push(BoundVolume::Missing),
                    Some(pv) => {
                        let required =
                            pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
                        if let Some(sel) = required {
                            inner.bound.push(BoundVolume::Affinity(compile_node_selector_lenient(sel)));
                        }
                    }
                }
                continue;
            }
            let class = claim_class(&pvc);
            if !delays_binding(objects.storage_classes.get(class).map(|c| &**c)) {
                return (None, Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
            }
            inner.pvs_by_class.entry(class.to_string()).or_insert_with_key(|class| {
                let mut pvs: Vec<Arc<PersistentVolume>> = objects
                    .pvs
                    .keys()
                    .filter_map(|n| cache.pv(objects, n))
                    .filter(|pv| volume_class(pv) == class)
                    .collect();
                pvs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                pvs.into_iter().map(Candidate::new).collect()
            });
            inner.delayed.push(pvc);
        }
        let nothing_per_node = inner.bound.is_empty() && inner.delayed.is_empty();
        state.write(NAME, State(Arc::new(inner)));
        if nothing_per_node {
            return (None, Status::skip());
        }
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else {
            return Status::error(format!("reading {NAME:?} from cycleState: not found"));
        };
        let labels = node.labels();
        let (mut bound_ok, mut pvs_found, mut unbound_ok, mut sufficient) = (true, true, true, true);
        for v in &s.bound {
            match v {
                BoundVolume::Missing => {
                    pvs_found = false;
                    break;
                }
                // Upstream matches PV affinity against a node carrying only the labels: matchFields see no name.
                BoundVolume::Affinity(sel) if !sel.matches("", labels) => {
                    bound_ok = false;
                    break;
                }
                BoundVolume::Affinity(_) => {}
            }
        }
        let mut volumes = PodVolumes { node_labels: labels.clone(), ..Default::default() };
        if !s.delayed.is_empty() {
            let (mut to_provision, mut to_match) = (Vec::new(), Vec::new());
            for claim in &s.delayed {
                match claim.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE)) {
                    Some(n) if *n != node.name => {
                        unbound_ok = false;
                        break;
                    }
                    Some(_) => to_provision.push(claim.clone()),
                    None => to_match.push(claim.clone()),
                }
            }
            if unbound_ok {
                // Smallest claims first, so that they do not take the volumes larger claims need.
                to_match.sort_by_key(|c| claim_request(c));
                let mut chosen = HashMap::new();
                for claim in to_match {
                    let pvs = s.pvs_by_class.get(claim_class(&claim)).map_or(&[][..], |v| v);
                    match find_matching_volume(&claim, pvs, labels, &chosen) {
                        Err(e) => return Status::error(e),
                        Ok(Some(pv)) => {
                            chosen.insert(pv.metadata.name.clone().unwrap_or_default(), ());
                            volumes.static_bindings.push(StaticBinding { pv, pvc: claim });
                        }
                        Ok(None) => to_provision.push(claim),
                    }
                }
                let mut node_capacities = Vec::new();
                if !to_provision.is_empty() {
                    match check_volume_provisions(&s.objects, to_provision, labels) {
                        Err(e) => return Status::error(e),
                        Ok(p) => {
                            (unbound_ok, sufficient) = (p.satisfied, p.sufficient);
                            volumes.provisions = p.claims;
                            node_capacities = p.node_capacities;
                        }
                    }
                }
                volumes.storage_by_class = storage_by_class(&volumes, &node_capacities);
            }
        }
        let mut reasons = Vec::new();
        for (ok, reason) in [
            (bound_ok, ERR_REASON_NODE_CONFLICT),
            (unbound_ok, ERR_REASON_BIND_CONFLICT),
            (sufficient, ERR_REASON_NOT_ENOUGH_SPACE),
            (pvs_found, ERR_REASON_PV_NOT_EXIST),
        ] {
            if !ok {
                reasons.push(reason.to_string());
            }
        }
        if !reasons.is_empty() {
            return Status::with_reasons(crate::framework::Code::UnschedulableAndUnresolvable, reasons);
        }
        s.by_node.lock().expect("volume binding state lock").insert(node.name.clone(), volumes);
        Status::success()
    }
}

impl ReservePlugin for VolumeBinding {
    /// Upstream `AssumePodVolumes`: the chosen volumes name their claims, the claims to provision name the node.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else { return Status::success() };
        let mut by_node = s.by_node.lock().expect("volume binding state lock");
        let Some(volumes) = by_node.get_mut(node) else {
            // The pod needs no per-node volume work.
            s.all_bound.store(true, Ordering::SeqCst);
            return Status::success();
        };
        if self.pod_volumes_bound(pod, &self.listers.objects()) {
            s.all_bound.store(true, Ordering::SeqCst);
            return Status::success();
        }
        let mut cache = self.cache();
        for b in &mut volumes.static_bindings {
            let claim_ref_now = b.pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            let names_claim = claim_ref_now.is_some_and(|r| {
                r.name == b.pvc.metadata.name && r.namespace == b.pvc.metadata.namespace && r.uid == b.pvc.metadata.uid
            });
            if names_claim {
                // Nothing to assume (upstream's `GetBindVolumeToClaim` finds it clean); PreBind still writes it.
                continue;
            }
            let mut pv = (*b.pv).clone();
            if !volume_bound_to(&pv, &b.pvc) {
                let annotations = pv.metadata.annotations.get_or_insert_with(Default::default);
                annotations.entry(ANN_BOUND_BY_CONTROLLER.into()).or_insert_with(|| "yes".into());
            }
            pv.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_ref(&b.pvc));
            let pv = Arc::new(pv);
            let name = pv.metadata.name.clone().unwrap_or_default();
            cache.pvs.insert(name, Assumed { object: pv.clone(), base: pv.metadata.resource_version.clone() });
            b.pv = pv;
        }
        for c in &mut volumes.provisions {
            let mut claim = (**c).clone();
            claim
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANN_SELECTED_NODE.into(), node.into());
            let claim = Arc::new(claim);
            cache.pvcs.insert(
                claim_key(&claim),
                Assumed { object: claim.clone(), base: claim.metadata.resource_version.clone() },
            );
            *c = claim;
        }
        s.all_bound.store(false, Ordering::SeqCst);
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) {
        let Some(State(s)) = state.read::<State>(NAME) else { return };
        if let Some(v) = s.by_node.lock().expect("volume binding state lock").get(node) {
            self.revert(v);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, node: &str) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else { return Status::skip() };
        if s.all_bound.load(Ordering::SeqCst) {
            return Status::skip();
        }
        if !s.by_node.lock().expect("volume binding state lock").contains_key(node) {
            return Status::error(format!("no pod volume found for node {node:?}"));
        }
        Status::success()
    }

    fn pre_bind_in_parallel(&self) -> bool {
        true
    }

    /// Writes the bindings and waits until the PersistentVolume controller has completed them.
    fn pre_bind(&self, state: &CycleState, _pod: &PodInfo, node: &str) -> Status {
        let Some(State(s)) = state.read::<State>(NAME) else { return Status::success() };
        if s.all_bound.load(Ordering::SeqCst) {
            return Status::success();
        }
        let Some(volumes) = s.by_node.lock().expect("volume binding state lock").get(node).cloned() else {
            return Status::error(format!("no pod volume found for node {node:?}"));
        };
        let written = match self.bind_api_update(&volumes) {
            Ok(w) => w,
            Err(e) => {
                self.revert(&volumes);
                return Status::error(e);
            }
        };
        let deadline = Instant::now() + self.bind_timeout;
        let result = loop {
            match self.check_bindings(node, &written) {
                Ok(true) => break Ok(()),
                Ok(false) if Instant::now() >= deadline => break Err("context deadline exceeded".to_string()),
                Ok(false) => std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))),
                Err(e) => break Err(e),
            }
        };
        // Done or given up: the API objects are what counts from now on.
        self.revert(&volumes);
        match result {
            Ok(()) => Status::success(),
            Err(e) => Status::error(format!("binding volumes: {e}")),
        }
    }
}

impl crate::framework::SignPlugin for VolumeBinding {
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
    use crate::framework::ClusterObjects;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, pod};
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

    fn plugin() -> VolumeBinding {
        VolumeBinding::new(None, &ctx()).unwrap()
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
            assert_eq!(state.read::<State>(NAME).is_some(), code != Code::UnschedulableAndUnresolvable, "{name}");
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
        let pl = VolumeBinding::new(None, &ctx()).unwrap();
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
            assert!(plugin().pre_filter(&mut state, &p, &snap).1.is_success());
            // No terms match nothing; a node-name field is matched against a node that has only labels.
            assert_eq!(
                plugin().filter(&state, &p, &n1).reasons(),
                [ERR_REASON_NODE_CONFLICT.to_string()],
                "{claim_name}"
            );
        }
    }

    #[test]
    fn filter_without_state_is_an_error() {
        let st = plugin().filter(&CycleState::new(), &pod_with(json!([])), &node(json!({"metadata": {"name": "n"}})));
        assert_eq!(st.code(), Code::Error);
    }

    /// Objects of a cluster where claims wait for their first consumer (zone `a` nodes, zone `b` nodes).
    fn wffc_snapshot() -> Snapshot {
        let class = |name: &str, provisioner: &str, extra: Value| {
            let mut v = json!({"metadata": {"name": name}, "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer"});
            merge(&mut v, extra);
            (name.to_string(), Arc::new(serde_json::from_value::<StorageClass>(v).unwrap()))
        };
        let wffc_pvc = |name: &str, class: &str, size: &str, extra: Value| {
            let mut v = json!({"spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}}}});
            merge(&mut v, extra);
            pvc(name, v)
        };
        let local_pv = |name: &str, size: &str, zone: &str, extra: Value| {
            let mut spec = json!({"storageClassName": "local", "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"]});
            merge(&mut spec, zone_affinity(&[zone]));
            merge(&mut spec, extra);
            let (n, pv) = pv(name, spec);
            let mut pv = (*pv).clone();
            pv.status = Some(serde_json::from_value(json!({"phase": "Available"})).unwrap());
            (n, Arc::new(pv))
        };
        let mut s = snapshot();
        let mut o = (*s.objects).clone();
        o.storage_classes.extend([
            class("local", NO_PROVISIONER, json!({})),
            class("csi", "csi.example.com", json!({})),
            class("csi-b", "csi.example.com", json!({"allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}]})),
            class("tracked", "tracked.example.com", json!({})),
            (
                "immediate".to_string(),
                Arc::new(serde_json::from_value(json!({"metadata": {"name": "immediate"}, "provisioner": "x", "volumeBindingMode": "Immediate"})).unwrap()),
            ),
        ]);
        o.pvcs.extend([
            wffc_pvc("small", "local", "1Gi", json!({})),
            wffc_pvc("large", "local", "5Gi", json!({})),
            wffc_pvc("huge", "local", "50Gi", json!({})),
            wffc_pvc("rwx", "local", "1Gi", json!({"spec": {"accessModes": ["ReadWriteMany"]}})),
            wffc_pvc("picky", "local", "1Gi", json!({"spec": {"selector": {"matchLabels": {"disk": "ssd"}}}})),
            wffc_pvc("dyn", "csi", "1Gi", json!({})),
            wffc_pvc("dyn-b", "csi-b", "1Gi", json!({})),
            wffc_pvc("dyn-on-n2", "csi", "1Gi", json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n2"}}})),
            wffc_pvc("dyn-on-n1", "csi", "1Gi", json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}})),
            wffc_pvc("tracked-small", "tracked", "1Gi", json!({})),
            wffc_pvc("tracked-big", "tracked", "20Gi", json!({})),
            wffc_pvc("tracked-2g", "tracked", "2Gi", json!({})),
            wffc_pvc("now", "immediate", "1Gi", json!({})),
        ]);
        o.pvs.extend([
            local_pv("pv-a-1g", "1Gi", "a", json!({})),
            local_pv("pv-a-5g", "5Gi", "a", json!({})),
            local_pv("pv-a-ssd", "2Gi", "a", json!({})),
            local_pv("pv-b-10g", "10Gi", "b", json!({})),
            local_pv("pv-a-taken", "100Gi", "a", json!({"claimRef": {"namespace": "default", "name": "other"}})),
        ]);
        let mut ssd = (*o.pvs["pv-a-ssd"]).clone();
        ssd.metadata.labels = Some([("disk".to_string(), "ssd".to_string())].into());
        o.pvs.insert("pv-a-ssd".into(), Arc::new(ssd));
        o.csi_drivers.insert(
            "tracked.example.com".into(),
            Arc::new(
                serde_json::from_value(
                    json!({"metadata": {"name": "tracked.example.com"}, "spec": {"storageCapacity": true}}),
                )
                .unwrap(),
            ),
        );
        o.csi_storage_capacities.push(Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": "cap-a", "namespace": "kube-system"}, "storageClassName": "tracked",
                "capacity": "10Gi", "nodeTopology": {"matchLabels": {"zone": "a"}}}),
            )
            .unwrap(),
        ));
        s.objects = Arc::new(o);
        s
    }

    #[test]
    fn filter_of_claims_that_wait_for_their_first_consumer() {
        let n1 = || node(json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}}));
        let n2 = || node(json!({"metadata": {"name": "n2", "labels": {"zone": "b"}}}));
        type Want = Result<(Vec<(&'static str, &'static str)>, Vec<&'static str>), Vec<&'static str>>;
        let cases: Vec<(&str, Value, NodeInfo, Want)> = vec![
            ("smallest fitting volume", json!([claim("small")]), n1(), Ok((vec![("small", "pv-a-1g")], vec![]))),
            (
                "smallest claims choose first",
                json!([claim("large"), claim("small")]),
                n1(),
                Ok((vec![("small", "pv-a-1g"), ("large", "pv-a-5g")], vec![])),
            ),
            ("volume in another zone", json!([claim("large")]), n2(), Ok((vec![("large", "pv-b-10g")], vec![]))),
            ("nothing fits, no provisioner", json!([claim("huge")]), n1(), Err(vec![ERR_REASON_BIND_CONFLICT])),
            ("access modes must all be offered", json!([claim("rwx")]), n1(), Err(vec![ERR_REASON_BIND_CONFLICT])),
            (
                "selector picks the labelled volume",
                json!([claim("picky")]),
                n1(),
                Ok((vec![("picky", "pv-a-ssd")], vec![])),
            ),
            ("selector finds none", json!([claim("picky")]), n2(), Err(vec![ERR_REASON_BIND_CONFLICT])),
            ("provisioned", json!([claim("dyn")]), n1(), Ok((vec![], vec!["dyn"]))),
            ("allowedTopologies admit the node", json!([claim("dyn-b")]), n2(), Ok((vec![], vec!["dyn-b"]))),
            ("allowedTopologies refuse the node", json!([claim("dyn-b")]), n1(), Err(vec![ERR_REASON_BIND_CONFLICT])),
            ("selected another node", json!([claim("dyn-on-n2")]), n1(), Err(vec![ERR_REASON_BIND_CONFLICT])),
            ("selected this node", json!([claim("dyn-on-n1")]), n1(), Ok((vec![], vec!["dyn-on-n1"]))),
            ("published capacity holds it", json!([claim("tracked-small")]), n1(), Ok((vec![], vec!["tracked-small"]))),
            (
                "published capacity too small",
                json!([claim("tracked-big")]),
                n1(),
                Err(vec![ERR_REASON_NOT_ENOUGH_SPACE]),
            ),
            (
                "no capacity published there",
                json!([claim("tracked-small")]),
                n2(),
                Err(vec![ERR_REASON_NOT_ENOUGH_SPACE]),
            ),
            (
                "a bound volume elsewhere and nothing to bind here",
                json!([claim("bound-b"), claim("huge")]),
                n1(),
                Err(vec![ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]),
            ),
            (
                "one matched, one provisioned",
                json!([claim("small"), claim("dyn")]),
                n1(),
                Ok((vec![("small", "pv-a-1g")], vec!["dyn"])),
            ),
        ];
        let snap = wffc_snapshot();
        for (name, volumes, node, want) in cases {
            let pl = plugin();
            let p = pod_with(volumes);
            let mut state = CycleState::new();
            let (_, st) = pl.pre_filter(&mut state, &p, &snap);
            assert!(st.is_success(), "{name}: {st}");
            let st = pl.filter(&state, &p, &node);
            match want {
                Err(reasons) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}: {st}");
                    assert_eq!(st.reasons(), reasons, "{name}");
                }
                Ok((bindings, provisions)) => {
                    assert!(st.is_success(), "{name}: {st}");
                    let State(s) = state.read::<State>(NAME).unwrap();
                    let v = s.by_node.lock().unwrap()[&node.name].clone();
                    let got: Vec<(&str, &str)> = v
                        .static_bindings
                        .iter()
                        .map(|b| (b.pvc.metadata.name.as_deref().unwrap(), b.pv.metadata.name.as_deref().unwrap()))
                        .collect();
                    assert_eq!(got, bindings, "{name}");
                    let got: Vec<&str> = v.provisions.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
                    assert_eq!(got, provisions, "{name}");
                }
            }
        }
        // An unbound claim of an Immediate class waits for its binding, as before.
        let (_, st) = plugin().pre_filter(&mut CycleState::new(), &pod_with(json!([claim("now")])), &snap);
        assert_eq!(st.reasons(), [ERR_REASON_UNBOUND_IMMEDIATE.to_string()]);
    }

    #[test]
    fn reserve_assumes_the_choice_for_later_pods_and_unreserve_forgets_it() {
        let snap = wffc_snapshot();
        let pl = plugin();
        let n1 = node(json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}}));
        let first = pod_with(json!([claim("small"), claim("dyn")]));
        let mut state = CycleState::new();
        pl.pre_filter(&mut state, &first, &snap);
        assert!(pl.filter(&state, &first, &n1).is_success());
        assert!(pl.reserve(&mut state, &first, "n1").is_success());
        assert!(pl.pre_bind_pre_flight(&state, &first, "n1").is_success(), "PreBind has work");
        {
            let cache = pl.cache();
            let pv = cache.pv(&snap.objects, "pv-a-1g").unwrap();
            assert_eq!(pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap().name.as_deref(), Some("small"));
            let c = cache.pvc(&snap.objects, "default/dyn").unwrap();
            assert_eq!(c.metadata.annotations.as_ref().unwrap()[ANN_SELECTED_NODE], "n1");
        }
        // Another pod wanting a 1Gi local volume now gets the next one: the first is taken.
        let other = pod_with(json!([{"name": "v", "persistentVolumeClaim": {"claimName": "rival"}}]));
        let mut o = (*snap.objects).clone();
        o.pvcs.extend([pvc(
            "rival",
            json!({"spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
        )]);
        let mut snap2 = snap.clone();
        snap2.objects = Arc::new(o);
        let mut s2 = CycleState::new();
        pl.pre_filter(&mut s2, &other, &snap2);
        assert!(pl.filter(&s2, &other, &n1).is_success());
        let State(inner) = s2.read::<State>(NAME).unwrap();
        assert_eq!(
            inner.by_node.lock().unwrap()["n1"].static_bindings[0].pv.metadata.name.as_deref(),
            Some("pv-a-ssd")
        );
        // Unreserve gives the volume back.
        pl.unreserve(&mut state, &first, "n1");
        assert!(pl.cache().pvs.is_empty() && pl.cache().pvcs.is_empty());
        let mut s3 = CycleState::new();
        pl.pre_filter(&mut s3, &other, &snap2);
        assert!(pl.filter(&s3, &other, &n1).is_success());
        let State(inner) = s3.read::<State>(NAME).unwrap();
        assert_eq!(inner.by_node.lock().unwrap()["n1"].static_bindings[0].pv.metadata.name.as_deref(), Some("pv-a-1g"));
    }

    /// Score of `claims` on a node of zone `a` (n1) or `b` (n2), by a plugin built from `args`.
    fn score_of(args: Option<Value>, claims: &[&str], zone: &str) -> i64 {
        let pl = VolumeBinding::new(args.as_ref(), &ctx()).unwrap();
        let p = pod_with(Value::Array(claims.iter().map(|c| claim(c)).collect()));
        let name = if zone == "a" { "n1" } else { "n2" };
        let n = node(json!({"metadata": {"name": name, "labels": {"zone": zone}}}));
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &wffc_snapshot()).1.is_success());
        assert!(pl.filter(&state, &p, &n).is_success(), "{claims:?} on {name}");
        assert!(pl.pre_score(&mut state, &p, &[], &wffc_snapshot()).is_success());
        pl.score(&state, &p, &n).unwrap()
    }

    #[test]
    fn score_prefers_emptier_storage() {
        // (name, claims, zone, score with the default shape)
        let cases: &[(&str, &[&str], &str, i64)] = &[
            ("provisioned from a pool of 10Gi: 10% used", &["tracked-small"], "a", 90),
            ("two claims of one pool count its capacity once: 30%", &["tracked-small", "tracked-2g"], "a", 70),
            ("a pre-made 10Gi volume for 5Gi: 50%", &["large"], "b", 50),
            ("a pre-made volume just big enough: full", &["small"], "a", 0),
            ("pre-made volumes, when chosen, are all that counts", &["small", "tracked-small"], "a", 0),
            ("no published capacity: nothing to weigh", &["dyn"], "a", 0),
        ];
        for (name, claims, zone, want) in cases {
            assert_eq!(score_of(None, claims, zone), *want, "{name}");
        }
        // A shape that rewards full storage (MostAllocated-like) turns the preference around.
        let most = json!({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]});
        assert_eq!(score_of(Some(most.clone()), &["tracked-small"], "a"), 10);
        assert_eq!(score_of(Some(most), &["small"], "a"), 100);
    }

    #[test]
    fn score_averages_classes_and_rounds_half_away_from_zero() {
        let shape = [(0, 100), (100, 0)];
        let class = |requested, capacity| ClassStorage { requested, capacity };
        let by_class = BTreeMap::from([("a".to_string(), class(1, 4)), ("b".to_string(), class(1, 2))]);
        assert_eq!(capacity_score(&shape, &by_class), 63, "(75 + 50) / 2");
        let over = BTreeMap::from([("a".to_string(), class(3, 2)), ("b".to_string(), class(0, 0))]);
        assert_eq!(capacity_score(&shape, &over), 0, "over capacity and no capacity score as full");
        assert_eq!(capacity_score(&shape, &BTreeMap::new()), 0);
    }

    #[test]
    fn args_default_and_check_the_shape() {
        let parse = |v: Value| VolumeBindingArgs::parse(Some(&v));
        assert_eq!(parse(json!({})).unwrap().shape, Some(default_shape()));
        assert_eq!(parse(json!({"shape": []})).unwrap().shape, Some(default_shape()), "empty is defaulted");
        let one = parse(json!({"shape": [{"utilization": 0, "score": 0}]})).unwrap();
        assert_eq!(one.shape, Some(vec![UtilizationShapePoint { utilization: 0, score: 0 }]));
        for (shape, want) in [
            (
                json!([{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]),
                "shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
            ),
            (
                json!([{"utilization": 101, "score": 1}]),
                "shape[0].utilization: Invalid value: 101: not in valid range [0, 100]",
            ),
            (json!([{"utilization": 0, "score": 11}]), "shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
        ] {
            let e = parse(json!({ "shape": shape })).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn without_storage_capacity_scoring_a_shape_is_refused_and_nothing_scores() {
        let mut c = ctx();
        c.features.storage_capacity_scoring = false;
        let e = VolumeBinding::new(Some(&json!({"shape": []})), &c).unwrap_err();
        assert!(
            e.ends_with("unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"),
            "{e}"
        );
        let pl = VolumeBinding::new(Some(&json!({"bindTimeoutSeconds": 5})), &c).unwrap();
        let mut state = CycleState::default();
        assert!(pl
            .pre_score(&mut state, &pod(json!({"metadata": {"name": "p"}})), &[], &Snapshot::default())
            .is_skip());
    }

    #[test]
    fn pre_score_skips_a_pod_with_nothing_to_bind() {
        let pl = plugin();
        let snap = wffc_snapshot();
        for volumes in [json!([]), json!([claim("bound-a")])] {
            let p = pod_with(volumes);
            let mut state = CycleState::new();
            pl.pre_filter(&mut state, &p, &snap);
            assert!(pl.pre_score(&mut state, &p, &[], &snap).is_skip());
        }
    }

    #[test]
    fn a_pod_without_claims_has_nothing_to_bind() {
        let pl = plugin();
        let p = pod_with(json!([]));
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &wffc_snapshot()).1.is_skip());
        assert!(pl.reserve(&mut state, &p, "n1").is_success());
        assert!(pl.pre_bind_pre_flight(&state, &p, "n1").is_skip());
        assert!(pl.pre_bind(&state, &p, "n1").is_success());
    }
}
