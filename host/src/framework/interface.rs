//! The extension points: one small trait per point, as upstream's `framework/interface.go`. A plugin implements
//! `Plugin` and the traits of the points it serves; native and Wasm plugins are indistinguishable to the runner.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::cycle_state::CycleState;
use super::snapshot::Snapshot;
use super::status::Status;
use super::types::{NodeInfo, PodInfo, QueuedPodInfo, Resource};

/// The highest score a Score plugin may give after NormalizeScore (upstream `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest score (upstream `MinNodeScore`).
pub const MIN_NODE_SCORE: i64 = 0;

/// What kind of object a cluster event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A pod bound to a node (or assumed).
    AssignedPod,
    /// A pod not yet bound.
    UnscheduledPod,
    /// A node.
    Node,
    /// A PersistentVolumeClaim or PersistentVolume.
    Volume,
    /// Anything else a plugin watches (namespaces, services, PDBs ...).
    Other,
    /// A StorageClass.
    StorageClass,
    /// A CSINode (a node's CSI drivers and their attach limits).
    CSINode,
    /// A CSIDriver.
    CSIDriver,
    /// A CSIStorageCapacity (what a driver can still provision in a topology segment).
    CSIStorageCapacity,
    /// A ResourceClaim (resource.k8s.io).
    ResourceClaim,
    /// A ResourceSlice (devices a driver offers).
    ResourceSlice,
    /// A DeviceClass.
    DeviceClass,
    /// A PodGroup (scheduling.k8s.io/v1beta1, GenericWorkload).
    PodGroup,
}

impl EventResource {
    /// Every kind, in declaration order.
    pub const ALL: [EventResource; 13] = {
        use EventResource::*;
        [
            AssignedPod,
            UnscheduledPod,
            Node,
            Volume,
            Other,
            StorageClass,
            CSINode,
            CSIDriver,
            CSIStorageCapacity,
            ResourceClaim,
            ResourceSlice,
            DeviceClass,
            PodGroup,
        ]
    };
}

/// What happened to the object (a bit set).
pub mod action {
    /// Created.
    pub const ADD: u8 = 1;
    /// Deleted.
    pub const DELETE: u8 = 2;
    /// Labels changed.
    pub const UPDATE_LABEL: u8 = 4;
    /// Taints or unschedulable changed.
    pub const UPDATE_TAINT: u8 = 8;
    /// Allocatable or requests changed.
    pub const UPDATE_RESOURCES: u8 = 16;
    /// Any other change.
    pub const UPDATE_OTHER: u8 = 32;
    /// Every update.
    pub const UPDATE: u8 = UPDATE_LABEL | UPDATE_TAINT | UPDATE_RESOURCES | UPDATE_OTHER;
    /// Everything.
    pub const ALL: u8 = ADD | DELETE | UPDATE;
}

/// What an update of a pod changed, as the actions plugins register (upstream's `PodSchedulingPropertiesChange`,
/// for a bound pod and for the pending pod itself alike): its labels, a request lowered or removed (room freed), its
/// tolerations; any other change is `UPDATE_OTHER`, which only plugins registering every update take (for bound
/// pods no default plugin does, so a status write moves no pending pod).
pub fn pod_update_actions(old: &PodInfo, new: &PodInfo) -> u8 {
    let mut actions = 0;
    if old.labels() != new.labels() {
        actions |= action::UPDATE_LABEL;
    }
    if scaled_down(&old.requests, &new.requests) {
        actions |= action::UPDATE_RESOURCES;
    }
    if old.tolerations() != new.tolerations() {
        actions |= action::UPDATE_TAINT;
    }
    if actions == 0 {
        action::UPDATE_OTHER
    } else {
        actions
    }
}

/// Whether some request is lower in `new` than in `old`, or gone (upstream's `extractPodScaleDown`).
fn scaled_down(old: &Resource, new: &Resource) -> bool {
    new.milli_cpu < old.milli_cpu
        || new.memory < old.memory
        || new.ephemeral_storage < old.ephemeral_storage
        || old.scalar.iter().any(|(name, v)| new.scalar.get(name).is_none_or(|n| n < v))
}

/// A change in the cluster that may make a rejected pod schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    /// The object kind.
    pub resource: EventResource,
    /// The actions (bits of [`action`]).
    pub actions: u8,
}

impl ClusterEvent {
    /// An event.
    pub const fn new(resource: EventResource, actions: u8) -> ClusterEvent {
        ClusterEvent { resource, actions }
    }

    /// True when `self` (registered interest) covers the event `e` that happened.
    pub fn covers(&self, e: &ClusterEvent) -> bool {
        self.resource == e.resource && self.actions & e.actions != 0
    }

    /// Upstream's `Label()` for logs and metrics: the resource then the action, as `NodeAdd`, `AssignedPodDelete`
    /// or `UnschedulablePodUpdate`. Every mix of update bits is `Update`, and several actions at once `All`;
    /// volume events (PersistentVolumes and their claims alike) read `PersistentVolume`, other objects `*`.
    pub fn label(&self) -> &'static str {
        // In the order of `EventResource`'s variants.
        const LABELS: [[&str; 4]; EventResource::ALL.len()] = [
            ["AssignedPodAdd", "AssignedPodDelete", "AssignedPodUpdate", "AssignedPodAll"],
            ["UnschedulablePodAdd", "UnschedulablePodDelete", "UnschedulablePodUpdate", "UnschedulablePodAll"],
            ["NodeAdd", "NodeDelete", "NodeUpdate", "NodeAll"],
            ["PersistentVolumeAdd", "PersistentVolumeDelete", "PersistentVolumeUpdate", "PersistentVolumeAll"],
            ["*Add", "*Delete", "*Update", "*All"],
            ["StorageClassAdd", "StorageClassDelete", "StorageClassUpdate", "StorageClassAll"],
            ["CSINodeAdd", "CSINodeDelete", "CSINodeUpdate", "CSINodeAll"],
            ["CSIDriverAdd", "CSIDriverDelete", "CSIDriverUpdate", "CSIDriverAll"],
            ["CSIStorageCapacityAdd", "CSIStorageCapacityDelete", "CSIStorageCapacityUpdate", "CSIStorageCapacityAll"],
            ["ResourceClaimAdd", "ResourceClaimDelete", "ResourceClaimUpdate", "ResourceClaimAll"],
            ["ResourceSliceAdd", "ResourceSliceDelete", "ResourceSliceUpdate", "ResourceSliceAll"],
            ["DeviceClassAdd", "DeviceClassDelete", "DeviceClassUpdate", "DeviceClassAll"],
            ["PodGroupAdd", "PodGroupDelete", "PodGroupUpdate", "PodGroupAll"],
        ];
        let act = match self.actions {
            action::ADD => 0,
            action::DELETE => 1,
            a if a & !action::UPDATE == 0 => 2,
            _ => 3,
        };
        LABELS[self.resource as usize][act]
    }

    /// Interest in every event.
    pub fn all() -> Vec<ClusterEvent> {
        EventResource::ALL.into_iter().map(|r| ClusterEvent::new(r, action::ALL)).collect()
    }
}

/// The object a cluster event is about, for queueing hints.
#[derive(Debug, Clone)]
pub enum EventObject {
    /// A pod.
    Pod(Arc<PodInfo>),
    /// A node.
    Node(Arc<NodeInfo>),
    /// A PodGroup (GenericWorkload).
    PodGroup(Arc<k8s_openapi::api::scheduling::v1beta1::PodGroup>),
    /// A ResourceClaim (DynamicResources' hints tell the claim a pod waits for from the others).
    ResourceClaim(Arc<k8s_openapi::api::resource::v1::ResourceClaim>),
}

/// A plugin's verdict on whether a cluster event may make a pod it rejected schedulable (upstream's
/// `QueueingHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// It may: retry the pod.
    Queue,
    /// It cannot: leave the pod where it is.
    QueueSkip,
}

/// Every plugin: a name and the extension points it serves.
pub trait Plugin: Send + Sync {
    /// The plugin's name as written in profiles.
    fn name(&self) -> &str;

    /// Cluster events that may make a pod this plugin rejected schedulable (all by default).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        ClusterEvent::all()
    }

    /// Whether `event` may make `pod`, which this plugin rejected, schedulable (called only for events the plugin
    /// registered). `old` is the object before the event (none for an add), `new` after it (none for a delete).
    /// Queue by default, as a plugin without hints.
    fn queueing_hint(
        &self,
        _pod: &PodInfo,
        _event: &ClusterEvent,
        _old: Option<&EventObject>,
        _new: Option<&EventObject>,
    ) -> QueueingHint {
        QueueingHint::Queue
    }

    /// Called once at the start of every scheduling cycle of `pod`, before PreFilter (a Wasm plugin pins the
    /// version the cycle will use, so a hot reload never changes plugins mid-cycle, and keeps the pod to convert
    /// only if a guest asks for it).
    fn begin_cycle(&self, _state: &mut CycleState, _pod: &Arc<PodInfo>) {}

    /// Called once, after the informers have synced and before the first scheduling cycle: a plugin that loads
    /// from cluster objects (tenant policies) loads what the synced cluster holds, so no pod is tried without it.
    fn cluster_synced(&self) {}

    /// Why the plugin cannot serve, for one that failed to load and whose failure policy lets the profile run
    /// without it (a Wasm plugin with `failurePolicy: Ignore`): the runner leaves it out of every extension point
    /// it is enabled at instead of refusing the profile.
    fn unavailable(&self) -> Option<&str> {
        None
    }

    /// This plugin as a PreEnqueue plugin, if it is one.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// This plugin as a QueueSort plugin, if it is one.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// This plugin as a PreFilter plugin, if it is one.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// This plugin as a Filter plugin, if it is one.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// This plugin as a PostFilter plugin, if it is one.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// This plugin as a PreScore plugin, if it is one.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// This plugin as a Score plugin, if it is one.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// This plugin as a Reserve plugin, if it is one.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// This plugin as a Permit plugin, if it is one.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// This plugin as a PreBind plugin, if it is one.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// This plugin as a Bind plugin, if it is one.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// This plugin as a PostBind plugin, if it is one.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// This plugin as a SignPlugin (it can sign pods for OpportunisticBatching), if it is one. None, the default,
    /// keeps every profile that runs the plugin at PreFilter, Filter, PreScore or Score from batching.
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        None
    }
}

/// Implements a plugin's `as_*` accessors for the extension points it serves, inside its `impl Plugin` block:
/// `serves!(pre_filter, filter, pre_score, score);` (the type must implement each point's trait).
#[macro_export]
macro_rules! serves {
    ($($point:ident),+ $(,)?) => {
        $($crate::serves!(@ $point);)+
    };
    (@ pre_enqueue) => {
        fn as_pre_enqueue(&self) -> Option<&dyn $crate::framework::PreEnqueuePlugin> {
            Some(self)
        }
    };
    (@ queue_sort) => {
        fn as_queue_sort(&self) -> Option<&dyn $crate::framework::QueueSortPlugin> {
            Some(self)
        }
    };
    (@ pre_filter) => {
        fn as_pre_filter(&self) -> Option<&dyn $crate::framework::PreFilterPlugin> {
            Some(self)
        }
    };
    (@ filter) => {
        fn as_filter(&self) -> Option<&dyn $crate::framework::FilterPlugin> {
            Some(self)
        }
    };
    (@ post_filter) => {
        fn as_post_filter(&self) -> Option<&dyn $crate::framework::PostFilterPlugin> {
            Some(self)
        }
    };
    (@ pre_score) => {
        fn as_pre_score(&self) -> Option<&dyn $crate::framework::PreScorePlugin> {
            Some(self)
        }
    };
    (@ score) => {
        fn as_score(&self) -> Option<&dyn $crate::framework::ScorePlugin> {
            Some(self)
        }
    };
    (@ reserve) => {
        fn as_reserve(&self) -> Option<&dyn $crate::framework::ReservePlugin> {
            Some(self)
        }
    };
    (@ permit) => {
        fn as_permit(&self) -> Option<&dyn $crate::framework::PermitPlugin> {
            Some(self)
        }
    };
    (@ pre_bind) => {
        fn as_pre_bind(&self) -> Option<&dyn $crate::framework::PreBindPlugin> {
            Some(self)
        }
    };
    (@ bind) => {
        fn as_bind(&self) -> Option<&dyn $crate::framework::BindPlugin> {
            Some(self)
        }
    };
    (@ post_bind) => {
        fn as_post_bind(&self) -> Option<&dyn $crate::framework::PostBindPlugin> {
            Some(self)
        }
    };
    (@ sign) => {
        fn as_sign(&self) -> Option<&dyn $crate::framework::SignPlugin> {
            Some(self)
        }
    };
}

/// One part of a pod's signature (upstream's `SignFragment`): the key names what of the pod it stands for (a
/// signer name of [`super::signers`]), the value that part in a canonical form. Plugins that look at the same part
/// give the same key and value.
#[derive(Debug, Clone, PartialEq)]
pub struct SignFragment {
    /// Upstream's signer name, such as `v1.Pod.Spec.Tolerations`.
    pub key: &'static str,
    /// The part, canonical: two pods alike for the plugin give equal values.
    pub value: serde_json::Value,
}

/// A pod's scheduling signature (upstream's `PodSignature`): two pods with equal signatures get the same Filter
/// verdicts and scores on the same nodes in the same state. Compared as bytes only.
pub type PodSignature = Arc<[u8]>;

/// A plugin that can say what of a pod its PreFilter, Filter, PreScore and Score look at (upstream's
/// `SignPlugin`), which lets OpportunisticBatching reuse one cycle's scores for the next, alike, pod.
pub trait SignPlugin: Plugin {
    /// The fragments of `pod`'s signature this plugin contributes; a rejection (any non-Success) says the pod
    /// cannot be signed, so it is scheduled without batching. `snapshot` is the cycle's (NodeResourcesFit asks it
    /// which extended resources a DeviceClass provides).
    fn sign_pod(&self, pod: &PodInfo, snapshot: &Snapshot) -> Result<Vec<SignFragment>, Status>;
}

/// Gates a pod before it enters the active queue: anything but Success keeps it out until a cluster event.
pub trait PreEnqueuePlugin: Plugin {
    /// Success lets the pod in.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// Orders the active queue. A profile has exactly one.
pub trait QueueSortPlugin: Plugin {
    /// True when `a` should be scheduled before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;

    /// The pod's place as bytes compared lexicographically (equal keys in queue-time order), when the order can be
    /// written so; the queue computes it when the pod enters activeQ and then compares keys instead of calling
    /// `less`. `None` (the default): `less` decides.
    fn sort_key(&self, _pod: &QueuedPodInfo) -> Option<Arc<[u8]>> {
        None
    }
}

/// Nodes a PreFilter plugin allows (`None`: all nodes).
pub type PreFilterResult = Option<HashSet<String>>;

/// Runs once per pod before filtering; may narrow the nodes, skip its own Filter, or reject the pod outright.
pub trait PreFilterPlugin: Plugin {
    /// Computes per-cycle data. Skip means "my Filter has nothing to check for this pod".
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status);

    /// Updates this plugin's cycle data as if `pod_to_add` were on `node` (preemption and nominated pods).
    /// Only plugins whose PreFilter data depends on other pods implement it.
    fn add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _pod_to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        Status::success()
    }

    /// Updates this plugin's cycle data as if `pod_to_remove` were gone from `node`.
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _pod_to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        Status::success()
    }
}

/// Decides whether a pod fits a node.
pub trait FilterPlugin: Plugin {
    /// Success when the pod fits `node`; a rejection's reasons are shown to users.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// The batched form the runner calls: one status per node, in order. A Wasm plugin overrides this to cross
    /// the boundary once per batch; native plugins keep the loop.
    fn filter_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Status>) {
        out.extend(nodes.iter().map(|n| self.filter(state, pod, n)));
    }
}

/// What a PostFilter plugin (preemption) asks the scheduler to do.
#[derive(Debug, Clone, Default)]
pub struct PostFilterResult {
    /// The node the pod is nominated to run on once the victims are gone (`Some("")` clears a nomination).
    pub nominated_node_name: Option<String>,
    /// Pods to evict from that node.
    pub victims: Vec<Arc<PodInfo>>,
}

/// Node name → the status that rejected the pod there.
pub type NodeToStatus = std::collections::HashMap<String, Status>;

/// What the runner offers a PostFilter plugin: the snapshot and re-running filters on hypothetical nodes.
pub trait PostFilterHandle {
    /// The snapshot of this cycle.
    fn snapshot(&self) -> &Snapshot;
    /// Runs the profile's Filter plugins (with nominated pods considered) for `pod` on `node`.
    fn run_filter_plugins_with_nominated_pods(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
    /// Runs every PreFilter plugin's `add_pod`.
    fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
    /// Runs every PreFilter plugin's `remove_pod`.
    fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
    /// A random number in `0..n` from the scheduler's seeded generator.
    fn random(&self, n: usize) -> usize;
    /// Lets the configured HTTP extenders trim the preemption candidates (upstream's `callExtenders`): they may
    /// drop nodes and change victims. Without extenders the candidates come back unchanged.
    fn call_extenders(
        &self,
        _pod: &PodInfo,
        candidates: Vec<PreemptionCandidate>,
    ) -> Result<Vec<PreemptionCandidate>, Status> {
        Ok(candidates)
    }
}

/// A node where a pod fits once `victims` are evicted (upstream's preemption `Candidate` with its `Victims`).
#[derive(Debug, Clone)]
pub struct PreemptionCandidate {
    /// The node.
    pub node: String,
    /// The pods to evict, most important first as preemption picks them (an extender's answer keeps its own
    /// order, as upstream does).
    pub victims: Vec<Arc<PodInfo>>,
    /// How many PodDisruptionBudgets evicting them violates.
    pub num_pdb_violations: usize,
}

/// Runs when no node fits (preemption).
pub trait PostFilterPlugin: Plugin {
    /// Success with a nominated node when the pod can fit after evictions.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status);
}

/// Runs once per pod before scoring, with the feasible nodes.
pub trait PreScorePlugin: Plugin {
    /// Skip means "my Score has nothing to add for this pod".
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], snapshot: &Snapshot) -> Status;
}

/// A node's score from one plugin. The name is borrowed from the snapshot: scoring allocates nothing per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore<'a> {
    /// Node name.
    pub name: &'a str,
    /// The node's id (`NodeInfo::id`).
    pub id: u32,
    /// Score.
    pub score: i64,
}

/// Ranks feasible nodes.
pub trait ScorePlugin: Plugin {
    /// The raw score of `node` for `pod`.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// The batched form the runner calls: fills `out` (one slot per node, in order). A Wasm plugin overrides this.
    fn score_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        for (n, o) in nodes.iter().zip(out.iter_mut()) {
            match self.score(state, pod, n) {
                Ok(s) => *o = s,
                Err(st) => return st,
            }
        }
        Status::success()
    }

    /// Maps raw scores into [0, 100]; plugins whose raw scores are already there keep the default.
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [NodeScore<'_>]) -> Status {
        Status::success()
    }

    /// True when the plugin implements `normalize_score` (for `--explain`).
    fn has_normalize(&self) -> bool {
        false
    }

    /// For `--explain`: the parts this cycle's scores were made of, shown under the plugin's own row (TenantPolicies
    /// shows each tenant policy's scores). Asked only for a traced cycle, after Score, with the nodes scored.
    fn explain_scores(&self, _state: &CycleState, _nodes: &[Arc<NodeInfo>]) -> Vec<super::trace::PluginScoreTrace> {
        Vec::new()
    }
}

/// Reserve and Unreserve: keep plugin-side state in step with the assumed pod.
pub trait ReservePlugin: Plugin {
    /// Called after the pod is assumed on `node`.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    /// Called in reverse order when anything after Reserve fails. Must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Approves, rejects or delays binding.
pub trait PermitPlugin: Plugin {
    /// Success, a rejection, or Wait with the longest time to wait.
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration);
    /// After `permit` answered Wait: the names the pod waits on, each with its Wait status and longest wait. Empty
    /// (the default) waits under the plugin's own name. A plugin that stands for others (TenantPolicies) names each
    /// one that answered Wait, so that each allows or rejects the pod under its own name, as its guest does.
    fn waits(&self, _state: &CycleState) -> Vec<(String, Status, Duration)> {
        Vec::new()
    }
}

/// Runs before binding (e.g. volume provisioning).
pub trait PreBindPlugin: Plugin {
    /// Success lets binding go on. The state is shared: plugins that allow it run at once (see
    /// [`Self::pre_bind_in_parallel`]), and keep what they write behind their own locks.
    fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
    /// Whether PreBind has anything to do for this pod (upstream's `PreBindPreFlight`): Skip leaves its PreBind
    /// out, and a pod that no PreBind plugin has work for binds without a blocking thread. Success by default.
    fn pre_bind_pre_flight(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        Status::success()
    }
    /// Whether this plugin's PreBind may run at the same time as its neighbours' that allow it too (upstream's
    /// `PreBindPreFlightResult.AllowParallel`, which VolumeBinding and DynamicResources always set). False by
    /// default.
    fn pre_bind_in_parallel(&self) -> bool {
        false
    }
}

/// Binds a pod. Skip passes the pod to the next binder.
pub trait BindPlugin: Plugin {
    /// Success when bound.
    fn bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    /// The same bind as a future that holds no thread while the cluster answers, for a binder that reads nothing
    /// from the `CycleState`. `None` (the default) has the binding cycle call `bind` on a blocking thread: plugin
    /// code may block, and a scheduler binding a backlog would otherwise park a thread per pod in flight.
    fn bind_async(&self, _pod: &PodInfo, _node: &str) -> Option<BoxFuture<'static, Status>> {
        None
    }
}

/// Informational, after a successful bind.
pub trait PostBindPlugin: Plugin {
    /// Called once the pod is bound. The pod is shared so that a plugin may keep it, or lend it, without a copy.
    fn post_bind(&self, state: &mut CycleState, pod: &Arc<PodInfo>, node: &str);
}

#[cfg(test)]
mod resource_order_tests {
    use super::*;

    #[test]
    fn every_resource_is_listed_in_declaration_order() {
        for (i, r) in EventResource::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{r:?}");
        }
    }
}
