//! Native test support: drive a plugin through the same paths as the Wasm exports, with a simulated host.
//!
//! State (configuration, logs, random generator, node table, plugin instance) is per thread, and each Rust test
//! runs on its own thread, so tests do not interfere.

use crate::bindings::exports::kws::plugin as exports;
use crate::host::imp::HOST;
use crate::host::Level;
use crate::runtime::{self, Component};
use crate::types::{Node, NodeChange, NodeSlot, Pod, QueuedPod, Status};
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

/// Everything logged so far, leaving the log empty.
pub fn take_logs() -> Vec<(Level, String)> {
    HOST.with(|h| std::mem::take(&mut h.borrow_mut().logs))
}

/// Forgets the plugin instance, the node table, the logs, the cycle state and the configuration.
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
    HOST.with(|h| h.borrow_mut().pod = Some(pod));
    <Component<P> as exports::cycle::Guest>::begin()
}

/// How many times the plugin fetched the cycle's pod from the simulated host (`host.cycle-pod`) so far.
pub fn pod_fetches() -> u32 {
    HOST.with(|h| h.borrow().pod_fetches)
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

/// The `post-bind` export.
pub fn post_bind<P: Plugin>(pod: Pod, node: &str) {
    <Component<P> as exports::post_bind::Guest>::post_bind(pod, node.to_string())
}
