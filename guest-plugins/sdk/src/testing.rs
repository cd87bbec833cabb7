//! Native test support: drive a plugin through the same paths as the Wasm exports, with a simulated host.
//!
//! State (configuration, logs, random generator, node table, pod view, waiting pods, cycle state, plugin instance)
//! is per thread, and each Rust test runs on its own thread, so tests do not interfere.
//!
//! Every extension point has a function here named after it that calls the export as the host would
//! ([`pre_filter`], [`permit`], [`queueing_hint`]...). The pod view is set up with [`upsert_pods`],
//! [`remove_pod`] and [`apply_pods`]; the pods waiting at Permit with [`set_waiting_pods`], and the plugin's allow
//! and reject calls on them are recorded ([`take_waiting_pod_calls`]) and applied to the simulated list
//! ([`waiting_pods`]) as the scheduler would.

use crate::bindings::exports::kws::plugin as exports;
use crate::host::imp::HOST;
pub use crate::host::imp::{WaitingPodCall, PLUGIN_NAME};
use crate::host::Level;
use crate::runtime::{self, Component};
use crate::types::{
    ClusterEvent, Declared, EventObject, KnownPod, Node, NodeChange, NodeSlot, PermitResult, Pod, PodChange,
    PostFilterResult, PreFilterResult, QueuedPod, QueueingHint, Status, WaitingPod,
};
use crate::Plugin;

/// Sets the configuration JSON the simulated host returns, and forgets the plugin instance so the next call
/// builds it again from this configuration.
pub fn set_config(json: &str) {
    HOST.with(|h| h.borrow_mut().config = json.to_string());
    runtime::reset_plugin();
}

/// Seeds the simulated host's random generator (any seed but 0).
pub fn seed_random(seed: u64) {
    HOST.with(|h| h.borrow_mut().rng = seed.max(1));
}

/// Makes the simulated host's `log-enabled` answer true only from `level` up, as a scheduler whose log is at that
/// level does (every level is enabled until this is called).
pub fn set_log_level(level: Level) {
    HOST.with(|h| h.borrow_mut().log_level = level);
}

/// Everything logged so far, leaving the log empty.
pub fn take_logs() -> Vec<(Level, String)> {
    HOST.with(|h| std::mem::take(&mut h.borrow_mut().logs))
}

/// Forgets the plugin instance, the node table, the pod view, the waiting pods, the logs, the cycle state and the
/// configuration.
pub fn reset() {
    HOST.with(|h| *h.borrow_mut() = Default::default());
    runtime::reset();
}

/// `nodes.apply`, as the host calls it.
pub fn apply(changes: Vec<NodeChange>) {
    runtime::apply(changes)
}

/// Puts `nodes` into slots 0, 1, 2, ... and returns the slots.
pub fn load_nodes(nodes: Vec<Node>) -> Vec<NodeSlot> {
    let slots: Vec<NodeSlot> = (0..nodes.len() as NodeSlot).collect();
    apply(slots.iter().copied().zip(nodes).map(NodeChange::Upsert).collect());
    slots
}

/// [`begin`], then the `filter` export; its compact answer expanded to one status per slot (Success for the
/// nodes that pass).
pub fn filter<P: Plugin>(pod: Pod, slots: Vec<NodeSlot>) -> Vec<Status> {
    begin::<P>(pod);
    let n = slots.len();
    crate::batch::expand(&<Component<P> as exports::filter::Guest>::filter(slots), n)
}

/// [`begin`], then the `score` export.
pub fn score<P: Plugin>(pod: Pod, slots: Vec<NodeSlot>) -> Result<Vec<i64>, Status> {
    begin::<P>(pod);
    <Component<P> as exports::score::Guest>::score(slots)
}

/// [`begin`], then the `normalize-score` export, with the (slot, raw score) pairs split into its two lists.
pub fn normalize_score<P: Plugin>(pod: Pod, scores: Vec<(NodeSlot, i64)>) -> Result<Vec<i64>, Status> {
    begin::<P>(pod);
    let (slots, raw) = scores.into_iter().unzip();
    <Component<P> as exports::score::Guest>::normalize_score(slots, raw)
}

/// A new cycle for `pod`: the simulated host will answer `host.cycle-pod` with it, and the `cycle.begin` export
/// runs, so the following Filter, Score and NormalizeScore calls refer to it.
pub fn begin<P: Plugin>(pod: Pod) {
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        h.pod = Some(pod);
        h.cycle_id += 1;
    });
    <Component<P> as exports::cycle::Guest>::begin()
}

/// Has the simulated host answer `host.scheduling-group` for the pod with this UID with `group` (`None`: the pod
/// names no pod group).
pub fn set_scheduling_group(pod_uid: &str, group: Option<&str>) {
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        match group {
            Some(g) => h.scheduling_groups.insert(pod_uid.to_string(), g.to_string()),
            None => h.scheduling_groups.remove(pod_uid),
        };
    });
}

/// How many times the plugin fetched the cycle's pod from the simulated host (`host.cycle-pod`) so far.
pub fn pod_fetches() -> u32 {
    HOST.with(|h| h.borrow().pod_fetches)
}

/// How many times the plugin read the cycle state from the simulated host (`host.cycle-state-read`) so far.
pub fn cycle_state_reads() -> u32 {
    HOST.with(|h| h.borrow().cycle_state_reads)
}

/// What `config.validate` answers with the configuration set by [`set_config`]: the host calls it when it loads
/// the plugin, and an error stops the scheduler from starting.
pub fn validate<P: Plugin>() -> Result<(), String> {
    <Component<P> as exports::config::Guest>::validate()
}

/// The `less` export (QueueSort).
pub fn less<P: Plugin>(a: QueuedPod, b: QueuedPod) -> bool {
    <Component<P> as exports::queue_sort::Guest>::less(a, b)
}

/// The `sort-key` export of `queue-sort`.
pub fn sort_key<P: Plugin>(pod: QueuedPod) -> Option<Vec<u8>> {
    <Component<P> as exports::queue_sort::Guest>::sort_key(pod)
}

/// The `post-bind` export.
pub fn post_bind<P: Plugin>(pod: Pod, node: &str) {
    <Component<P> as exports::post_bind::Guest>::post_bind(pod, node.to_string())
}

/// `pods.apply`, as the host calls it before a call.
pub fn apply_pods(changes: Vec<PodChange>) {
    runtime::apply_pods(changes)
}

/// Adds these pods to the pod view, or replaces those with the same UID.
pub fn upsert_pods(pods: Vec<KnownPod>) {
    apply_pods(pods.into_iter().map(PodChange::Upsert).collect())
}

/// Forgets the pod with this UID in the pod view (it was deleted, or finished).
pub fn remove_pod(uid: &str) {
    apply_pods(vec![PodChange::Remove(uid.to_string())])
}

/// Replaces the simulated list of pods waiting at Permit, and forgets the recorded calls.
pub fn set_waiting_pods(pods: Vec<WaitingPod>) {
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        h.waiting = pods;
        h.waiting_calls.clear();
    })
}

/// The pods still waiting at Permit: the list [`set_waiting_pods`] set, less the pods the plugin rejected and those
/// it allowed for the last plugin holding them.
pub fn waiting_pods() -> Vec<WaitingPod> {
    HOST.with(|h| h.borrow().waiting.clone())
}

/// The plugin's allow and reject calls on waiting pods so far, in order, leaving the record empty.
pub fn take_waiting_pod_calls() -> Vec<WaitingPodCall> {
    HOST.with(|h| std::mem::take(&mut h.borrow_mut().waiting_calls))
}

/// Forgets the cycle state, as a new scheduling cycle does (the state survives [`begin`], which the host calls
/// after PreFilter and before the cycle's first Filter).
pub fn clear_cycle_state() {
    HOST.with(|h| h.borrow_mut().cycle.clear())
}

/// The `pre-enqueue` export.
pub fn pre_enqueue<P: Plugin>(pod: Pod) -> Status {
    <Component<P> as exports::pre_enqueue::Guest>::pre_enqueue(pod)
}

/// The `pre-filter` export.
pub fn pre_filter<P: Plugin>(pod: Pod) -> PreFilterResult {
    <Component<P> as exports::pre_filter::Guest>::pre_filter(pod)
}

/// PreFilter's `add-pod` export, for the node in `slot`.
pub fn pre_filter_add_pod<P: Plugin>(pod: Pod, pod_to_add: Pod, slot: NodeSlot) -> Status {
    <Component<P> as exports::pre_filter::Guest>::add_pod(pod, pod_to_add, slot)
}

/// PreFilter's `remove-pod` export, for the node in `slot`.
pub fn pre_filter_remove_pod<P: Plugin>(pod: Pod, pod_to_remove: Pod, slot: NodeSlot) -> Status {
    <Component<P> as exports::pre_filter::Guest>::remove_pod(pod, pod_to_remove, slot)
}

/// The `post-filter` export: `rejected` pairs each node slot with the status that rejected the pod there.
pub fn post_filter<P: Plugin>(pod: Pod, rejected: Vec<(NodeSlot, Status)>) -> PostFilterResult {
    <Component<P> as exports::post_filter::Guest>::post_filter(pod, rejected)
}

/// The `pre-score` export, with the feasible nodes' slots.
pub fn pre_score<P: Plugin>(pod: Pod, slots: Vec<NodeSlot>) -> Status {
    <Component<P> as exports::pre_score::Guest>::pre_score(pod, slots)
}

/// The `reserve` export.
pub fn reserve<P: Plugin>(pod: Pod, node: &str) -> Status {
    <Component<P> as exports::reserve::Guest>::reserve(pod, node.to_string())
}

/// The `unreserve` export.
pub fn unreserve<P: Plugin>(pod: Pod, node: &str) {
    <Component<P> as exports::reserve::Guest>::unreserve(pod, node.to_string())
}

/// The `permit` export, as the host reads it (compare with `Permit::Wait(d).into()` and so on).
pub fn permit<P: Plugin>(pod: Pod, node: &str) -> PermitResult {
    <Component<P> as exports::permit::Guest>::permit(pod, node.to_string())
}

/// The `pre-bind` export.
pub fn pre_bind<P: Plugin>(pod: Pod, node: &str) -> Status {
    <Component<P> as exports::pre_bind::Guest>::pre_bind(pod, node.to_string())
}

/// The `bind` export.
pub fn bind<P: Plugin>(pod: Pod, node: &str) -> Status {
    <Component<P> as exports::bind::Guest>::bind(pod, node.to_string())
}

/// The `events-to-register` export.
pub fn events_to_register<P: Plugin>() -> Vec<ClusterEvent> {
    <Component<P> as exports::events::Guest>::events_to_register()
}

/// The `declarations.declare` export.
pub fn declare<P: Plugin>() -> Declared {
    <Component<P> as exports::declarations::Guest>::declare()
}

/// The `queueing-hint` export.
pub fn queueing_hint<P: Plugin>(
    pod: Pod,
    event: ClusterEvent,
    old: Option<EventObject>,
    new: Option<EventObject>,
) -> QueueingHint {
    <Component<P> as exports::events::Guest>::queueing_hint(pod, event, old, new)
}
