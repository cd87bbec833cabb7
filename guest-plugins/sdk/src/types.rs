//! Pods, nodes, queued pods, statuses, cluster events and the answers of each extension point: the contract's
//! types, with helpers.
//!
//! The structs are generated from `wit/types.wit` and `wit/points.wit` (their fields are public and documented
//! there); this module adds constructors and lookups so plugin code reads like kube-scheduler plugin code.

use std::time::Duration;

pub use crate::bindings::exports::kws::plugin::declarations::Declared;
pub use crate::bindings::exports::kws::plugin::permit::PermitResult;
pub use crate::bindings::exports::kws::plugin::post_filter::PostFilterResult;
pub use crate::bindings::exports::kws::plugin::pre_filter::PreFilterResult;
pub use crate::bindings::kws::plugin::types::{
    ClusterEvent, Code, EventActions, EventObject, EventResource, KnownPod, Labels, Node, NodeChange, NodeSelectorTerm,
    NodeSlot, Pod, PodChange, PodState, PreferredTerm, QosClass, QueuedPod, QueueingHint, Resources,
    SelectorRequirement, Status, Taint, Toleration, WaitingPod,
};

/// What happened to an object in a [`ClusterEvent`] (the contract's `event-actions` flags): combine with `|`,
/// test with `contains`/`intersects`.
pub type Actions = EventActions;

/// The pod a scheduling cycle is about, as Filter, Score and NormalizeScore see it. It reads like a [`Pod`] (it
/// derefs to one: `pod.name`, `pod.label("app")`) and is fetched from the host (`host.cycle-pod`) the first time
/// the plugin reads it in a cycle, so a policy that looks only at nodes never pays for the pod crossing.
pub struct CyclePod {
    pod: std::cell::OnceCell<std::rc::Rc<Pod>>,
}

impl CyclePod {
    /// A cycle's pod that is fetched from the host on first read.
    pub(crate) fn on_first_read() -> Self {
        Self { pod: std::cell::OnceCell::new() }
    }
}

impl From<Pod> for CyclePod {
    /// A cycle's pod that is already at hand (tests, or code that calls a plugin's methods directly).
    fn from(pod: Pod) -> Self {
        Self { pod: std::cell::OnceCell::from(std::rc::Rc::new(pod)) }
    }
}

impl std::ops::Deref for CyclePod {
    type Target = Pod;
    fn deref(&self) -> &Pod {
        // The host answers during every call that hands a plugin a CyclePod; `none` would be a host bug, and the
        // panic (a trap) turns it into an Error status naming the plugin instead of a decision on a made-up pod.
        self.pod.get_or_init(crate::runtime::current_cycle_pod)
    }
}

impl std::fmt::Debug for CyclePod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pod.get() {
            Some(p) => p.fmt(f),
            None => f.write_str("CyclePod(not fetched)"),
        }
    }
}

/// Looks `key` up in a label, annotation or node-selector list.
pub fn lookup<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| same_bytes(k.as_bytes(), key.as_bytes())).map(|(_, v)| v.as_str())
}

/// Byte equality, eight bytes at a time. `==` on strings calls `memcmp`, which on wasm32 is a byte-at-a-time
/// loop in the standard library's builtins; label lookups sit in every plugin's per-node path.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut wa).zip(&mut wb) {
        let word = |c: &[u8]| u64::from_le_bytes(<[u8; 8]>::try_from(c).unwrap_or_default());
        if word(x) != word(y) {
            return false;
        }
    }
    wa.remainder().iter().zip(wb.remainder()).all(|(x, y)| x == y)
}

/// Inserts or replaces `key` in a pair list, keeping it sorted by key (as the host sends them).
fn set_pair(pairs: &mut Labels, key: &str, value: &str) {
    match pairs.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
        Ok(i) => pairs[i].1 = value.to_string(),
        Err(i) => pairs.insert(i, (key.to_string(), value.to_string())),
    }
}

impl Status {
    /// The pod may go on.
    pub fn success() -> Self {
        Self { code: Code::Success, reasons: Vec::new() }
    }

    /// The pod does not fit here; preemption may help.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    /// The pod does not fit here and preemption cannot help (`UnschedulableAndUnresolvable`).
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// The plugin failed; the attempt fails and the pod is retried with backoff.
    pub fn error(reason: impl Into<String>) -> Self {
        Self::new(Code::Error, reason)
    }

    /// Nothing to do for this pod (PreFilter, PreScore, Bind).
    pub fn skip() -> Self {
        Self { code: Code::Skip, reasons: Vec::new() }
    }

    /// A status with `code` and one reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Self {
        Self { code, reasons: vec![reason.into()] }
    }

    /// True for `Success`.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// The reasons joined with `, ` (kube-scheduler's `Status.Message()`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl Resources {
    /// All amounts zero.
    pub fn zero() -> Self {
        Self { milli_cpu: 0, memory: 0, ephemeral_storage: 0, pods: 0, scalar: Vec::new() }
    }

    /// An extended resource or hugepages amount by name (0 when absent).
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
    }
}

impl QosClass {
    /// Rank for ordering: Guaranteed 0, Burstable 1, BestEffort 2 (lower is "better").
    pub fn rank(self) -> u8 {
        match self {
            QosClass::Guaranteed => 0,
            QosClass::Burstable => 1,
            QosClass::BestEffort => 2,
        }
    }
}

impl Pod {
    /// An empty pod (BestEffort, priority 0, nothing requested) with this namespace and name; for tests.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            uid: format!("{namespace}/{name}"),
            namespace: namespace.to_string(),
            name: name.to_string(),
            labels: Vec::new(),
            annotations: Vec::new(),
            priority: 0,
            qos_class: QosClass::BestEffort,
            requests: Resources::zero(),
            limits: Resources::zero(),
            tolerations: Vec::new(),
            node_selector: Vec::new(),
            required_node_affinity: Vec::new(),
            preferred_node_affinity: Vec::new(),
            scheduler_name: String::new(),
            node_name: None,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }

    /// This pod with label `key` set to `value`; for tests.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }
}

impl Node {
    /// An empty node (no labels, taints or resources) with this name; for tests.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            labels: Vec::new(),
            taints: Vec::new(),
            allocatable: Resources::zero(),
            requested: Resources::zero(),
            unschedulable: false,
            pod_count: 0,
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }

    /// This node with label `key` set to `value`; for tests.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        set_pair(&mut self.labels, key, value);
        self
    }
}

/// A pod the host holds, read field by field (the contract's `host.pod-ref`): QueueSort's key and PostBind get
/// the pod this way, so a plugin that reads two fields copies two fields across the boundary, not the whole pod.
/// Each method asks the host (read a field once and keep it); [`PodRef::get`] copies the whole [`Pod`].
pub struct PodRef<'a>(PodSource<'a>);

/// Where a [`PodRef`] reads from.
enum PodSource<'a> {
    /// The host's pod, lent for the length of one call.
    Host(&'a crate::bindings::kws::plugin::host::PodRef),
    /// A pod at hand (tests, or a host that passed the pod by value), with the queued pod it came in when it came
    /// in one (QueueSort's by-value key), so that the by-value defaults hand it on without a copy.
    Copy(&'a Pod, Option<&'a QueuedPod>),
}

impl<'a> PodRef<'a> {
    /// The host's pod, lent for the call in progress.
    pub(crate) fn host(pod: &'a crate::bindings::kws::plugin::host::PodRef) -> Self {
        Self(PodSource::Host(pod))
    }

    /// A queued pod at hand read as a reference (QueueSort's by-value key).
    pub(crate) fn queued(q: &'a QueuedPod) -> Self {
        Self(PodSource::Copy(&q.pod, Some(q)))
    }

    /// The queued pod this reference was made from, if it was made from one.
    pub(crate) fn as_queued(&self) -> Option<&'a QueuedPod> {
        match self.0 {
            PodSource::Copy(_, q) => q,
            PodSource::Host(_) => None,
        }
    }

    /// Runs `f` with the whole pod: the one at hand, or a copy fetched from the host.
    pub(crate) fn with_pod<R>(&self, f: impl FnOnce(&Pod) -> R) -> R {
        match self.0 {
            PodSource::Copy(p, _) => f(p),
            PodSource::Host(h) => f(&h.get()),
        }
    }

    /// The pod's UID.
    pub fn uid(&self) -> String {
        match self.0 {
            PodSource::Host(h) => h.uid(),
            PodSource::Copy(p, _) => p.uid.clone(),
        }
    }

    /// The pod's namespace.
    pub fn namespace(&self) -> String {
        match self.0 {
            PodSource::Host(h) => h.namespace(),
            PodSource::Copy(p, _) => p.namespace.clone(),
        }
    }

    /// The pod's name.
    pub fn name(&self) -> String {
        match self.0 {
            PodSource::Host(h) => h.name(),
            PodSource::Copy(p, _) => p.name.clone(),
        }
    }

    /// The pod's priority (`spec.priority`, 0 when unset).
    pub fn priority(&self) -> i32 {
        match self.0 {
            PodSource::Host(h) => h.priority(),
            PodSource::Copy(p, _) => p.priority,
        }
    }

    /// The pod's QoS class.
    pub fn qos_class(&self) -> QosClass {
        match self.0 {
            PodSource::Host(h) => h.qos_class(),
            PodSource::Copy(p, _) => p.qos_class,
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<String> {
        match self.0 {
            PodSource::Host(h) => h.label(key),
            PodSource::Copy(p, _) => p.label(key).map(str::to_string),
        }
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<String> {
        match self.0 {
            PodSource::Host(h) => h.annotation(key),
            PodSource::Copy(p, _) => p.annotation(key).map(str::to_string),
        }
    }

    /// The whole pod (one copy of every field).
    pub fn get(&self) -> Pod {
        match self.0 {
            PodSource::Host(h) => h.get(),
            PodSource::Copy(p, _) => p.clone(),
        }
    }
}

impl<'a> From<&'a Pod> for PodRef<'a> {
    /// A pod at hand read as a reference (tests, or code that calls a plugin's methods directly).
    fn from(pod: &'a Pod) -> Self {
        Self(PodSource::Copy(pod, None))
    }
}

impl QueuedPod {
    /// A queued pod; for tests.
    pub fn new(pod: Pod, timestamp_ns: u64) -> Self {
        Self { pod, timestamp_ns, attempts: 0 }
    }
}

impl EventActions {
    /// Every kind of update (labels, taints, resources, anything else), not add or delete.
    pub const UPDATE: Self =
        Self::UPDATE_LABEL.union(Self::UPDATE_TAINT).union(Self::UPDATE_RESOURCES).union(Self::UPDATE_OTHER);
}

impl ClusterEvent {
    /// An event, or an interest in events, on `resource` with any of `actions`.
    pub fn new(resource: EventResource, actions: Actions) -> Self {
        Self { resource, actions }
    }

    /// A pod bound to (or assumed on) a node: `ClusterEvent::assigned_pod(Actions::DELETE)`.
    pub fn assigned_pod(actions: Actions) -> Self {
        Self::new(EventResource::AssignedPod, actions)
    }

    /// A pod not bound yet: `ClusterEvent::unscheduled_pod(Actions::ADD)`.
    pub fn unscheduled_pod(actions: Actions) -> Self {
        Self::new(EventResource::UnscheduledPod, actions)
    }

    /// A node: `ClusterEvent::node(Actions::ADD | Actions::UPDATE_LABEL)`.
    pub fn node(actions: Actions) -> Self {
        Self::new(EventResource::Node, actions)
    }

    /// A PersistentVolume or PersistentVolumeClaim.
    pub fn volume(actions: Actions) -> Self {
        Self::new(EventResource::Volume, actions)
    }

    /// Any other object the scheduler watches.
    pub fn other(actions: Actions) -> Self {
        Self::new(EventResource::Other, actions)
    }

    /// True when this event (or interest) and `other` are about the same resource and share an action, as the
    /// host matches an event against the registered interests.
    pub fn matches(&self, other: &ClusterEvent) -> bool {
        self.resource == other.resource && self.actions.intersects(other.actions)
    }
}

impl EventObject {
    /// The pod, when the event is about one.
    pub fn pod(&self) -> Option<&Pod> {
        match self {
            EventObject::Pod(p) => Some(p),
            EventObject::Node(_) => None,
        }
    }

    /// The node, when the event is about one.
    pub fn node(&self) -> Option<&Node> {
        match self {
            EventObject::Node(n) => Some(n),
            EventObject::Pod(_) => None,
        }
    }
}

impl QueueingHint {
    /// [`QueueingHint::Queue`] when `may_help`, else [`QueueingHint::QueueSkip`].
    pub fn queue_if(may_help: bool) -> Self {
        if may_help {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

impl PodState {
    /// True when the pod is on a node: assumed by this scheduler or bound.
    pub fn is_placed(self) -> bool {
        matches!(self, PodState::Assumed | PodState::Bound)
    }
}

impl KnownPod {
    /// A pod of the view that is not on a node yet, first seen at `first_seen_ns`; for tests.
    pub fn pending(pod: Pod, first_seen_ns: u64) -> Self {
        Self { pod, state: PodState::Pending, first_seen_ns }
    }

    /// A pod assumed on `node` (reserved, waiting at Permit or being bound); for tests.
    pub fn assumed(mut pod: Pod, node: &str, first_seen_ns: u64) -> Self {
        pod.node_name = Some(node.to_string());
        Self { pod, state: PodState::Assumed, first_seen_ns }
    }

    /// A pod bound to `node`; for tests.
    pub fn bound(mut pod: Pod, node: &str, first_seen_ns: u64) -> Self {
        pod.node_name = Some(node.to_string());
        Self { pod, state: PodState::Bound, first_seen_ns }
    }

    /// True when the pod is assumed or bound.
    pub fn is_placed(&self) -> bool {
        self.state.is_placed()
    }
}

impl WaitingPod {
    /// A pod waiting at Permit on `node` for `pending_plugins`; for tests.
    pub fn new(mut pod: Pod, node: &str, pending_plugins: &[&str]) -> Self {
        pod.node_name = Some(node.to_string());
        Self { pod, node: node.to_string(), pending_plugins: pending_plugins.iter().map(|p| p.to_string()).collect() }
    }
}

impl PreFilterResult {
    /// Success: the pod goes on to Filter on every node.
    pub fn success() -> Self {
        Status::success().into()
    }

    /// Success, and only the nodes named here are considered (upstream's `PreFilterResult.NodeNames`).
    pub fn only_nodes<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self { status: Status::success(), node_names: Some(names.into_iter().map(Into::into).collect()) }
    }
}

impl From<Status> for PreFilterResult {
    /// The status alone: no restriction of the nodes.
    fn from(status: Status) -> Self {
        Self { status, node_names: None }
    }
}

impl PostFilterResult {
    /// This plugin cannot make the pod schedulable (`reason` may be empty).
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        let reasons = if reason.is_empty() { Vec::new() } else { vec![reason] };
        Status { code: Code::Unschedulable, reasons }.into()
    }

    /// Success: the pod should be nominated to `node` (after the host acts on it, e.g. evicts victims).
    pub fn nominate(node: impl Into<String>) -> Self {
        Self { status: Status::success(), nominated_node: Some(node.into()) }
    }
}

impl From<Status> for PostFilterResult {
    /// The status alone: no nomination.
    fn from(status: Status) -> Self {
        Self { status, nominated_node: None }
    }
}

/// Permit's answer, as a plugin gives it; the SDK turns it into the contract's [`PermitResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// The pod may go on to binding (as far as this plugin is concerned).
    Allow,
    /// The pod may not: its binding cycle fails with this status (Unschedulable, say), and Unreserve runs.
    Reject(Status),
    /// Park the pod at Permit until some plugin allows it (see [`crate::host::allow_waiting_pod`]) or rejects
    /// it, or this long passes (then it is rejected; the host caps the wait at 15 minutes).
    Wait(Duration),
    /// [`Permit::Wait`] with a reason, which the host repeats if the wait times out (say, which group the pod
    /// waits for).
    WaitFor(Duration, String),
}

impl Permit {
    /// [`Permit::Reject`] with an Unschedulable status carrying `reason`.
    pub fn reject(reason: impl Into<String>) -> Self {
        Permit::Reject(Status::unschedulable(reason))
    }
}

impl From<Permit> for PermitResult {
    fn from(p: Permit) -> Self {
        match p {
            Permit::Allow => PermitResult { status: Status::success(), timeout_ms: 0 },
            Permit::Reject(status) => PermitResult { status, timeout_ms: 0 },
            Permit::Wait(d) => Permit::WaitFor(d, String::new()).into(),
            Permit::WaitFor(d, reason) => PermitResult {
                status: Status { code: Code::Wait, reasons: if reason.is_empty() { Vec::new() } else { vec![reason] } },
                timeout_ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            },
        }
    }
}

/// kube-scheduler's PrioritySort: higher priority first, then earlier queue time.
pub fn priority_sort_less(a: &QueuedPod, b: &QueuedPod) -> bool {
    let (pa, pb) = (a.pod.priority, b.pod.priority);
    pa > pb || (pa == pb && a.timestamp_ns < b.timestamp_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_matches_whole_keys_only() {
        let pairs: Vec<(String, String)> =
            [("a", "1"), ("priority.example.com", "2"), ("priority.example.coM", "3"), ("abcdefgh", "4")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(lookup(&pairs, "priority.example.com"), Some("2"));
        assert_eq!(lookup(&pairs, "priority.example.coM"), Some("3"));
        assert_eq!(lookup(&pairs, "abcdefgh"), Some("4"));
        assert_eq!(lookup(&pairs, "abcdefgi"), None);
        assert_eq!(lookup(&pairs, "priority.example.co"), None);
        assert_eq!(lookup(&pairs, ""), None);
    }
}
