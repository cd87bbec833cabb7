//! # kws-plugin-sdk: write kube-wasm-scheduler plugins in Rust
//!
//! A plugin is a type implementing [`Plugin`] (per-pod, per-node logic; every method has a default) and one
//! export line naming the extension points it serves:
//!
//! ```ignore
//! use kws_plugin_sdk::{Config, CyclePod, Node, NodeInfo, Plugin, Status};
//!
//! /// Scores nodes by the value of one label.
//! struct LabelScore { key: String }
//!
//! impl Plugin for LabelScore {
//!     /// The label's value, parsed once per node change rather than once per pod.
//!     type NodeData = i64;
//!     fn new(config: &Config) -> Result<Self, String> {
//!         Ok(Self { key: config.str("labelKey")?.unwrap_or("example.com/score").to_string() })
//!     }
//!     fn prepare(&self, node: &Node) -> i64 {
//!         node.label(&self.key).and_then(|v| v.parse().ok()).unwrap_or(0)
//!     }
//!     fn score(&self, _pod: &CyclePod, node: &NodeInfo<'_, i64>) -> Result<i64, Status> {
//!         Ok(*node.data())
//!     }
//! }
//!
//! kws_plugin_sdk::export!(LabelScore: score);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-unknown-unknown` and turn it into a component with
//! `kube-wasm-scheduler plugin componentize`. `kube-wasm-scheduler plugin new NAME --lang rust` writes a project
//! with this crate vendored, and `plugin build` does both steps (in the repository, `scripts/build-guests.sh`).
//!
//! ## Extension points and the export line
//!
//! [`Plugin`] has a method for every point of the scheduling framework: PreEnqueue, QueueSort, PreFilter (with
//! AddPod/RemovePod), Filter, PostFilter, PreScore, Score, NormalizeScore, Reserve/Unreserve, Permit, PreBind,
//! Bind and PostBind, plus [`Plugin::events_to_register`] and [`Plugin::queueing_hint`]. Pods are [`Pod`]s;
//! nodes are [`NodeInfo`]s (the node and the plugin's prepared data); answers are [`Status`],
//! [`PreFilterResult`], [`PostFilterResult`] and [`Permit`] (allow, reject, or wait for a while).
//!
//! [`export!`] names the points the plugin serves, and only those are exported:
//! `kws_plugin_sdk::export!(MyPlugin: queue_sort, pre_filter, post_filter, permit, reserve, events, pods);`.
//! It adds what the host needs beside them (`config` always, `nodes` with any point that names nodes, `cycle` with
//! Filter or Score) and embeds no component type: `plugin componentize` derives the world from the export names.
//! The older one-world macros ([`export_score!`], [`export_filter_score!`], [`export_score_post_bind!`],
//! [`export_queue_sort!`]) still work and embed their world's component type.
//!
//! ## What the SDK does for you
//!
//! - **The node table.** The host keeps a copy of every node inside the instance and sends only changes
//!   (`nodes.apply`); calls name nodes by slot. The SDK keeps the table ([`NodeTable`]) and looks every slot up
//!   before calling your per-node method, so you see a [`NodeInfo`] (the node, and what your
//!   [`Plugin::prepare`] derived from it when it last changed). A slot the table does not hold gives an Error
//!   status naming it.
//! - **The cycle's pod.** Filter, Score and NormalizeScore calls do not carry the pod. Your methods get a
//!   [`CyclePod`], which reads like a `Pod` and fetches it from the host (`host.cycle-pod`) the first time you read
//!   it in a cycle: once per cycle at most, and never when your policy looks only at nodes.
//! - **The pod view.** A plugin that lists `pods` gets every pod the scheduler knows (pending pods of its
//!   profiles, assumed and bound pods), each with its [`PodState`] and the time it was first seen, kept up to date
//!   by the host (`pods.apply`, changes only). Read it with [`pods()`]: [`PodView::get`] by UID, and borrowed
//!   queries that narrow one another — [`PodView::in_namespace`], [`PodView::with_label`],
//!   [`PodView::on_node`], [`PodView::in_state`], [`Pods::placed`]:
//!   `pods().with_label(GROUP, name).in_namespace(ns).placed().count()`. Namespaces are always indexed; label
//!   keys named in [`Plugin::INDEXED_LABELS`] are too, so such a query reads an index rather than every pod.
//! - **Waiting pods.** [`host::waiting_pods`] lists the pods parked at Permit; [`host::allow_waiting_pod`] and
//!   [`host::reject_waiting_pod`] (and the `_for` forms, on behalf of another plugin) release them, as upstream's
//!   `WaitingPod.Allow`/`Reject`. A gang plugin answers [`Permit::Wait`] until the group is complete and then
//!   allows its waiting siblings.
//! - **Events.** A plugin that lists `events` declares the [`ClusterEvent`]s that may make a pod it rejected
//!   schedulable (`ClusterEvent::node(Actions::ADD)`, `ClusterEvent::assigned_pod(Actions::DELETE)`), and answers
//!   per event with a [`QueueingHint`]; [`EventObject`] is the pod or node before and after the event.
//! - **Promises.** [`Plugin::declare`] lets the host skip work your plugin has no use for: no NormalizeScore call
//!   when the raw scores are already in 0–100, and no node resent after each binding when you never read a node's
//!   usage (`requested`, `pod_count`). [`export!`] exports it; by default nothing is promised.
//! - **Batching.** One Filter or Score call covers many nodes; the SDK loops ([`batch`]). Score stops at the first
//!   error, as kube-scheduler does.
//! - **Configuration.** `pluginConfig[].args.config` arrives as JSON; the SDK parses it ([`Config`]) and calls
//!   [`Plugin::new`] once per instance, on the first call. If `new` fails, the reason is logged once and every
//!   call answers with an Error status carrying it (QueueSort falls back to priority order, a queueing hint to
//!   Queue). [`Config::expect_keys`] turns a misspelt key into an error.
//! - **Host services.** [`host`] wraps logging (and the [`info!`] family of macros), randomness, time, the
//!   per-cycle state and the waiting pods.
//!
//! ## State across calls
//!
//! The host runs several instances of a plugin (a pool, each with its own memory) and may send any call to any of
//! them. Each instance's node table and pod view are complete, but anything else a plugin keeps between calls is
//! that instance's alone: derive decisions from the call, the pod view, the waiting pods and the cycle state.
//!
//! ## Panics
//!
//! A panic inside a plugin is a Wasm trap: the call fails, the host reports an Error for that pod and drops the
//! instance (its node table and pod view go with it, and the next instance is rebuilt from scratch). The SDK's own
//! glue does not panic; prefer returning [`Status::error`] to `unwrap()` in plugin code.
//!
//! ## Testing a plugin natively
//!
//! Compiled for the machine rather than Wasm, the host imports are simulated in-process ([`testing`]), so
//! `cargo test` can exercise a plugin through the same code paths as the exports: every point has a driver
//! (`testing::pre_filter::<P>(pod)`, `testing::permit::<P>(pod, node)`...), the pod view is filled with
//! `testing::upsert_pods`, and the simulated waiting pods record every allow and reject.

#![warn(missing_docs)]

#[doc(hidden)]
pub mod bindings;

pub mod batch;
pub mod config;
pub mod host;
pub mod normalize;
mod runtime;
pub mod sort_key;
pub mod table;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod types;
pub mod view;

pub use config::{Config, Value};
pub use host::Level;
pub use normalize::MAX_NODE_SCORE;
pub use sort_key::SortKey;
pub use table::{NodeInfo, NodeTable, Prepared, ScoreBatch};
pub use types::{
    Actions, ClusterEvent, Code, CyclePod, Declared, EventObject, EventResource, KnownPod, Node, NodeSlot, Permit, Pod,
    PodRef, PodState, PostFilterResult, PreFilterResult, QosClass, QueuedPod, QueueingHint, Resources, Status,
    WaitingPod,
};
pub use view::{pods, PodView, Pods};

/// The logging macros, also reachable as `kws_plugin_sdk::log::info!` and so on.
pub mod log {
    pub use crate::{debug, error, info, warn};
}

/// A scheduling plugin: per-pod and per-node logic. Implement the methods of the extension points your export
/// macro names; the others are never called.
///
/// One value is built per component instance (with [`Plugin::new`]) and lives as long as the instance. Methods
/// take `&self`; keep mutable state in a `Cell`/`RefCell` (an instance is single-threaded). The host runs several
/// instances of one plugin (a pool, each with its own memory) and may call any of them for any pod, so a decision
/// must not depend on state an instance kept from an earlier call: derive it from the call's arguments, the pod
/// view ([`pods`]), the waiting pods ([`host::waiting_pods`]) and the cycle state ([`host::cycle_state_read`]).
pub trait Plugin: Sized + 'static {
    /// Builds the plugin from its configuration (`{}` when none is given). An `Err` is logged, and every call then
    /// fails with an Error status carrying it.
    fn new(config: &Config) -> Result<Self, String>;

    /// What the plugin derives from a node when the node arrives or changes, kept by the SDK beside the node and
    /// handed to the node-level methods as [`NodeInfo::data`]. Node data changes far less often than pods are
    /// scheduled, so work done here (parsing a label, say) is not repeated for every pod. `()` when the plugin
    /// needs nothing.
    type NodeData: Default + 'static;

    /// The pod label keys whose values the pod view indexes, so [`PodView::with_label`] on them is a lookup rather
    /// than a scan of every pod (a gang plugin's group label, say). Default: none.
    const INDEXED_LABELS: &'static [&'static str] = &[];

    /// What the plugin promises the host so that it can leave out work ([`Declared`]): its Score's raw scores
    /// need no NormalizeScore (`Declared::SCORE_NEEDS_NO_NORMALIZE`: they are in 0–100 and
    /// [`Plugin::normalize_score`] is the default; the host then makes no NormalizeScore call), or it never reads
    /// a node's `requested` or `pod_count` (`Declared::IGNORES_NODE_USAGE`: the host then sends a node again
    /// only when the node object changes, not each time a pod lands on it or leaves it, so those two fields are
    /// stale), its Score reads nothing but the node and its prepared data (`Declared::SCORE_READS_NODE_ONLY`: the
    /// host keeps each node's raw score and asks again only when it would resend the node), or its NormalizeScore
    /// is upstream's `DefaultNormalizeScore` (`Declared::NORMALIZE_DEFAULT`, or `NORMALIZE_DEFAULT_REVERSED`: the
    /// host computes it without a call; [`normalize::default_normalize`] is the same arithmetic when the scores
    /// are not negative). Asked once per loaded version, after [`Plugin::new`]; exported by [`export!`] only. A
    /// false promise is a wrong score or a stale node, not an error. Default: nothing promised.
    fn declare(&self) -> Declared {
        Declared::empty()
    }

    /// Computes [`Plugin::NodeData`] for a node. Called for every node once, then for each node that changes,
    /// before the next call that names nodes. Default: `NodeData::default()`.
    fn prepare(&self, node: &Node) -> Self::NodeData {
        let _ = node;
        Self::NodeData::default()
    }

    /// PreEnqueue: whether `pod` may enter the active queue. Anything but Success keeps it out (Pending: waiting
    /// for something outside the scheduler) until a cluster event. Default: Success.
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        let _ = pod;
        Status::success()
    }

    /// QueueSort: true when `a` should be scheduled before `b`. Default: kube-scheduler's PrioritySort (higher
    /// priority first, then earlier queue time).
    fn less(&self, a: &QueuedPod, b: &QueuedPod) -> bool {
        types::priority_sort_less(a, b)
    }

    /// QueueSort as a key ([`SortKey`]): bytes compared lexicographically, smaller first, equal keys in queue-time
    /// order. The host asks once when the pod enters the active queue and compares keys itself, so a sort written
    /// as a key costs one call per pod where `less` costs one per comparison. Give keys for every pod or for none:
    /// a pod without a key is compared with `less`. Default: `None`.
    fn sort_key(&self, pod: &QueuedPod) -> Option<Vec<u8>> {
        let _ = pod;
        None
    }

    /// QueueSort's key with the pod by reference: what the host calls. A key usually needs two or three fields
    /// (`pod.priority()`, `pod.qos_class()`); reading them here instead of in [`Plugin::sort_key`] spares the copy
    /// of the whole pod into the plugin for every pod that enters the queue. `timestamp_ns` and `attempts` are the
    /// [`QueuedPod`]'s. Default: [`Plugin::sort_key`] on the whole pod ([`PodRef::get`]).
    fn sort_key_ref(&self, pod: &PodRef<'_>, timestamp_ns: u64, attempts: u32) -> Option<Vec<u8>> {
        match pod.as_queued() {
            // Called by value: the queued pod is at hand.
            Some(q) => self.sort_key(q),
            None => self.sort_key(&QueuedPod { pod: pod.get(), timestamp_ns, attempts }),
        }
    }

    /// PreFilter: runs once per pod before Filter. A rejection rejects the pod on every node; Skip says this
    /// plugin's Filter has nothing to check for it; [`PreFilterResult::only_nodes`] narrows the nodes considered.
    /// Store what Filter should reuse with [`host::cycle_state_write`]. Default: Success.
    fn pre_filter(&self, pod: &Pod) -> PreFilterResult {
        let _ = pod;
        PreFilterResult::success()
    }

    /// PreFilter's AddPod: update the cycle state as if `pod_to_add` ran on `node` (preemption's what-ifs,
    /// nominated pods). Default: Success.
    fn add_pod(&self, pod: &Pod, pod_to_add: &Pod, node: &NodeInfo<'_, Self::NodeData>) -> Status {
        let _ = (pod, pod_to_add, node);
        Status::success()
    }

    /// PreFilter's RemovePod: update the cycle state as if `pod_to_remove` were gone from `node`. Default: Success.
    fn remove_pod(&self, pod: &Pod, pod_to_remove: &Pod, node: &NodeInfo<'_, Self::NodeData>) -> Status {
        let _ = (pod, pod_to_remove, node);
        Status::success()
    }

    /// Filter: whether `pod` fits on `node`. Default: it does.
    ///
    /// Give the same reason text for the same cause on every node: the host counts reasons across nodes
    /// (`0/3 nodes are available: 3 node(s) ...`).
    fn filter(&self, pod: &CyclePod, node: &NodeInfo<'_, Self::NodeData>) -> Status {
        let _ = (pod, node);
        Status::success()
    }

    /// PostFilter: no node fits `pod`; `rejected` lists every node with the status that rejected it there. Answer
    /// Success with a node to nominate ([`PostFilterResult::nominate`]) when the plugin made room, else
    /// Unschedulable. Default: Unschedulable (this plugin cannot help).
    fn post_filter(&self, pod: &Pod, rejected: &[(NodeInfo<'_, Self::NodeData>, Status)]) -> PostFilterResult {
        let _ = (pod, rejected);
        PostFilterResult::unschedulable("")
    }

    /// PreScore: runs once per pod before Score, with the feasible nodes; store what Score should reuse with
    /// [`host::cycle_state_write`]. Skip says this plugin's Score has nothing to add. Default: Success.
    fn pre_score(&self, pod: &Pod, nodes: &[NodeInfo<'_, Self::NodeData>]) -> Status {
        let _ = (pod, nodes);
        Status::success()
    }

    /// Score: the raw score of `node` for `pod`. Default: 0. An `Err` fails the whole Score call.
    fn score(&self, pod: &CyclePod, node: &NodeInfo<'_, Self::NodeData>) -> Result<i64, Status> {
        let _ = (pod, node);
        Ok(0)
    }

    /// Score over one call's whole batch: a raw score per node into `out`, as long as the batch. Default:
    /// [`Plugin::score`] for each node, in order (the first `Err` fails the call). Override it to do per-batch
    /// work once, or to score without reading the nodes at all (a node is looked up only when
    /// [`ScoreBatch::node`] is called).
    fn score_batch(
        &self,
        pod: &CyclePod,
        nodes: &ScoreBatch<'_, Self::NodeData>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        for (i, score) in out.iter_mut().enumerate() {
            *score = self.score(pod, &nodes.node(i)?)?;
        }
        Ok(())
    }

    /// NormalizeScore: rewrite the raw scores of all feasible nodes into `[0, 100]`, in place (see [`normalize`]
    /// for helpers). Default: leave them as they are (right when `score` already returns `[0, 100]`).
    fn normalize_score(&self, pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        let _ = (pod, scores);
        Ok(())
    }

    /// Reserve: `pod` is assumed on the node named `node` (the pod view shows it assumed from then on). A
    /// rejection fails the pod's attempt and runs Unreserve. Default: Success.
    fn reserve(&self, pod: &Pod, node: &str) -> Status {
        let _ = (pod, node);
        Status::success()
    }

    /// Unreserve: something after Reserve failed (a rejection at Permit, a Permit timeout, a failed bind); undo
    /// what Reserve did. Called for every Reserve plugin, also those whose Reserve did not run, so it must be
    /// idempotent. Default: nothing.
    fn unreserve(&self, pod: &Pod, node: &str) {
        let _ = (pod, node);
    }

    /// Permit: allow, reject, or hold `pod` (assumed on `node`) before binding. A held pod waits until every
    /// plugin that answered [`Permit::Wait`] allows it ([`host::allow_waiting_pod`]), one rejects it, or its
    /// timeout passes. Default: [`Permit::Allow`].
    fn permit(&self, pod: &Pod, node: &str) -> Permit {
        let _ = (pod, node);
        Permit::Allow
    }

    /// PreBind: runs before binding `pod` to `node` (provisioning a volume, say); anything but Success fails the
    /// binding cycle. Default: Success.
    fn pre_bind(&self, pod: &Pod, node: &str) -> Status {
        let _ = (pod, node);
        Status::success()
    }

    /// Bind: bind `pod` to `node` and answer Success, or answer Skip to let the next binder (in the end the
    /// default binder) do it. Default: Skip.
    fn bind(&self, pod: &Pod, node: &str) -> Status {
        let _ = (pod, node);
        Status::skip()
    }

    /// PostBind: `pod` was bound to the node named `node`. Informational; default: nothing.
    fn post_bind(&self, pod: &Pod, node: &str) {
        let _ = (pod, node);
    }

    /// PostBind with the pod by reference: what the host calls. Reading the fields used here (`pod.namespace()`,
    /// `pod.name()`) instead of in [`Plugin::post_bind`] spares the copy of the whole pod into the plugin for every
    /// pod bound. Default: [`Plugin::post_bind`] on the whole pod ([`PodRef::get`]).
    fn post_bind_ref(&self, pod: &PodRef<'_>, node: &str) {
        pod.with_pod(|p| self.post_bind(p, node))
    }

    /// The cluster events that may make a pod this plugin rejected schedulable (upstream's `EventsToRegister`),
    /// asked once when the plugin loads. Only called when the plugin exports `events`; a plugin that does not is
    /// retried on every event. Default: none (a rejected pod is retried only by the queue's periodic flush).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    /// Whether `event` may make `pod`, which this plugin rejected, schedulable (upstream's `QueueingHintFn`).
    /// `old` is the object before the event (none for an add), `new` after it (none for a delete). Default:
    /// [`QueueingHint::Queue`].
    fn queueing_hint(
        &self,
        pod: &Pod,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let _ = (pod, event, old, new);
        QueueingHint::Queue
    }
}

/// Items the export macros expand to; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::runtime::Component;

    /// Declares the encoded component type of one world, produced by build.rs.
    macro_rules! component_type {
        ($name:ident, $file:literal) => {
            pub const $name: [u8; include_bytes!(concat!(env!("OUT_DIR"), "/", $file)).len()] =
                *include_bytes!(concat!(env!("OUT_DIR"), "/", $file));
        };
    }
    component_type!(SCORE_PLUGIN, "score-plugin.component-type");
    component_type!(FILTER_SCORE_PLUGIN, "filter-score-plugin.component-type");
    component_type!(SCORE_POST_BIND_PLUGIN, "score-post-bind-plugin.component-type");
    component_type!(QUEUE_SORT_PLUGIN, "queue-sort-plugin.component-type");
}

/// Exports `$plugin` as a component of one world: the ABI functions of each interface, and the world's component
/// type in a custom section (which `plugin componentize` reads).
#[doc(hidden)]
#[macro_export]
macro_rules! __kws_export {
    ($plugin:ty, $section:literal, $world_type:ident, [$($iface:ident => $cabi:ident),+ $(,)?]) => {
        // Only in Wasm: the export names (`kws:plugin/...#...`) are not valid symbols for native linkers, and a
        // native build (the plugin's unit tests) drives the plugin through `kws_plugin_sdk::testing` instead.
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code)]
        const _: () = {
            type __KwsComponent = $crate::__private::Component<$plugin>;
            $(
                $crate::bindings::exports::kws::plugin::$iface::$cabi!(
                    __KwsComponent with_types_in $crate::bindings::exports::kws::plugin::$iface
                );
            )+
            #[unsafe(link_section = $section)]
            #[doc(hidden)]
            pub static __KWS_COMPONENT_TYPE: [u8; $crate::__private::$world_type.len()] =
                $crate::__private::$world_type;
        };
    };
}

/// Exports a [`Plugin`] as world `score-plugin` (exports `kws:plugin/config`, `nodes`, `cycle` and `score`).
#[macro_export]
macro_rules! export_score {
    ($plugin:ty) => {
        $crate::__kws_export!(
            $plugin,
            "component-type:kws-plugin-sdk:kws:plugin@0.2.1:score-plugin",
            SCORE_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_1_cabi,
                nodes => __export_kws_plugin_nodes_0_2_1_cabi,
                cycle => __export_kws_plugin_cycle_0_2_1_cabi,
                score => __export_kws_plugin_score_0_2_1_cabi,
            ]
        );
    };
}

/// Exports a [`Plugin`] as world `filter-score-plugin` (exports `kws:plugin/config`, `nodes`, `cycle`, `filter` and
/// `score`).
#[macro_export]
macro_rules! export_filter_score {
    ($plugin:ty) => {
        $crate::__kws_export!(
            $plugin,
            "component-type:kws-plugin-sdk:kws:plugin@0.2.1:filter-score-plugin",
            FILTER_SCORE_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_1_cabi,
                nodes => __export_kws_plugin_nodes_0_2_1_cabi,
                cycle => __export_kws_plugin_cycle_0_2_1_cabi,
                filter => __export_kws_plugin_filter_0_2_1_cabi,
                score => __export_kws_plugin_score_0_2_1_cabi,
            ]
        );
    };
}

/// Exports a [`Plugin`] as world `score-post-bind-plugin` (exports `kws:plugin/config`, `nodes`, `cycle`,
/// `score` and `post-bind`).
#[macro_export]
macro_rules! export_score_post_bind {
    ($plugin:ty) => {
        $crate::__kws_export!(
            $plugin,
            "component-type:kws-plugin-sdk:kws:plugin@0.2.1:score-post-bind-plugin",
            SCORE_POST_BIND_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_1_cabi,
                nodes => __export_kws_plugin_nodes_0_2_1_cabi,
                cycle => __export_kws_plugin_cycle_0_2_1_cabi,
                score => __export_kws_plugin_score_0_2_1_cabi,
                post_bind => __export_kws_plugin_post_bind_0_2_1_cabi,
            ]
        );
    };
}

/// Exports a [`Plugin`] as world `queue-sort-plugin` (exports `kws:plugin/config` and `queue-sort`).
#[macro_export]
macro_rules! export_queue_sort {
    ($plugin:ty) => {
        $crate::__kws_export!(
            $plugin,
            "component-type:kws-plugin-sdk:kws:plugin@0.2.1:queue-sort-plugin",
            QUEUE_SORT_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_1_cabi,
                queue_sort => __export_kws_plugin_queue_sort_0_2_1_cabi,
            ]
        );
    };
}

/// Exports a [`Plugin`] at the extension points listed after the colon, and nothing else:
///
/// ```ignore
/// kws_plugin_sdk::export!(Coscheduling: queue_sort, pre_filter, post_filter, permit, reserve, events, pods);
/// ```
///
/// Points: `pre_enqueue`, `queue_sort`, `pre_filter`, `filter`, `post_filter`, `pre_score`, `score` (Score and
/// NormalizeScore), `reserve` (Reserve and Unreserve), `permit`, `pre_bind`, `bind`, `post_bind`; and two
/// capabilities: `events` (the plugin answers [`Plugin::events_to_register`] and [`Plugin::queueing_hint`]; without
/// it, a pod it rejected is retried on every event) and `pods` (the host keeps the pod view, [`pods`], up to date;
/// without it the view stays empty). `config` and `declarations` ([`Plugin::declare`]) are always exported. `nodes`
/// is exported when a listed point names nodes (`pre_filter`, `filter`, `post_filter`, `pre_score`, `score`) and
/// `cycle` with `filter` or `score`, as the host requires; listing them yourself is harmless. List each point once.
/// QueueSort's key and PostBind are exported with the pod by reference (`sort-key-ref`, `post-bind-ref`: see
/// [`Plugin::sort_key_ref`] and [`Plugin::post_bind_ref`]), which needs a host that offers `host.pod-ref`.
///
/// Unlike the `export_*!` macros, this embeds no component type: `kube-wasm-scheduler plugin componentize` reads
/// the plugin's world from the module's export names (`kws:plugin/<interface>@0.2.1#<function>`).
#[macro_export]
macro_rules! export {
    ($plugin:ty : $($point:ident),+ $(,)?) => {
        $crate::__kws_export_points!(@scan $plugin; [no no]; []; $($point)+);
    };
}

/// [`export!`]'s work: a scan over the listed points that notes whether `nodes` and `cycle` are needed (the flags
/// `[nodes cycle]`, each `yes` or `no`), then one export per interface.
#[doc(hidden)]
#[macro_export]
macro_rules! __kws_export_points {
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; filter $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes yes]; [$($done)* filter]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; score $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes yes]; [$($done)* score]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; cycle $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n yes]; [$($done)*]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; nodes $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes $c]; [$($done)*]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; config $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n $c]; [$($done)*]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; pre_filter $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes $c]; [$($done)* pre_filter]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; post_filter $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes $c]; [$($done)* post_filter]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; pre_score $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [yes $c]; [$($done)* pre_score]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; declarations $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n $c]; [$($done)*]; $($rest)*);
    };
    // QueueSort's key and PostBind take the pod by reference (`sort-key-ref`, `post-bind-ref`).
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; queue_sort $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n $c]; [$($done)* queue_sort sort_key_ref]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; post_bind $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n $c]; [$($done)* post_bind_ref]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*]; $point:ident $($rest:ident)*) => {
        $crate::__kws_export_points!(@scan $p; [$n $c]; [$($done)* $point]; $($rest)*);
    };
    (@scan $p:ty; [$n:ident $c:ident]; [$($done:ident)*];) => {
        $crate::__kws_export_iface!($p, config);
        $crate::__kws_export_iface!($p, declarations);
        $crate::__kws_export_points!(@if $n $p, nodes);
        $crate::__kws_export_points!(@if $c $p, cycle);
        $($crate::__kws_export_iface!($p, $done);)*
    };
    (@if yes $p:ty, $iface:ident) => { $crate::__kws_export_iface!($p, $iface); };
    (@if no $p:ty, $iface:ident) => {};
}

/// Exports one interface of the contract for `$plugin` (only in Wasm: the export names are not valid symbols for
/// native linkers, and a native build drives the plugin through `kws_plugin_sdk::testing` instead).
#[doc(hidden)]
#[macro_export]
macro_rules! __kws_export_iface {
    (@ $p:ty, $iface:ident, $cabi:ident) => {
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code)]
        const _: () = {
            type __KwsComponent = $crate::__private::Component<$p>;
            $crate::bindings::exports::kws::plugin::$iface::$cabi!(
                __KwsComponent with_types_in $crate::bindings::exports::kws::plugin::$iface
            );
        };
    };
    ($p:ty, config) => { $crate::__kws_export_iface!(@ $p, config, __export_kws_plugin_config_0_2_1_cabi); };
    ($p:ty, declarations) => {
        $crate::__kws_export_iface!(@ $p, declarations, __export_kws_plugin_declarations_0_2_1_cabi);
    };
    ($p:ty, nodes) => { $crate::__kws_export_iface!(@ $p, nodes, __export_kws_plugin_nodes_0_2_1_cabi); };
    ($p:ty, pods) => { $crate::__kws_export_iface!(@ $p, pods, __export_kws_plugin_pods_0_2_1_cabi); };
    ($p:ty, cycle) => { $crate::__kws_export_iface!(@ $p, cycle, __export_kws_plugin_cycle_0_2_1_cabi); };
    ($p:ty, events) => { $crate::__kws_export_iface!(@ $p, events, __export_kws_plugin_events_0_2_1_cabi); };
    ($p:ty, pre_enqueue) => {
        $crate::__kws_export_iface!(@ $p, pre_enqueue, __export_kws_plugin_pre_enqueue_0_2_1_cabi);
    };
    ($p:ty, queue_sort) => {
        $crate::__kws_export_iface!(@ $p, queue_sort, __export_kws_plugin_queue_sort_0_2_1_cabi);
    };
    ($p:ty, pre_filter) => {
        $crate::__kws_export_iface!(@ $p, pre_filter, __export_kws_plugin_pre_filter_0_2_1_cabi);
    };
    ($p:ty, filter) => { $crate::__kws_export_iface!(@ $p, filter, __export_kws_plugin_filter_0_2_1_cabi); };
    ($p:ty, post_filter) => {
        $crate::__kws_export_iface!(@ $p, post_filter, __export_kws_plugin_post_filter_0_2_1_cabi);
    };
    ($p:ty, pre_score) => {
        $crate::__kws_export_iface!(@ $p, pre_score, __export_kws_plugin_pre_score_0_2_1_cabi);
    };
    ($p:ty, score) => { $crate::__kws_export_iface!(@ $p, score, __export_kws_plugin_score_0_2_1_cabi); };
    ($p:ty, reserve) => { $crate::__kws_export_iface!(@ $p, reserve, __export_kws_plugin_reserve_0_2_1_cabi); };
    ($p:ty, permit) => { $crate::__kws_export_iface!(@ $p, permit, __export_kws_plugin_permit_0_2_1_cabi); };
    ($p:ty, pre_bind) => { $crate::__kws_export_iface!(@ $p, pre_bind, __export_kws_plugin_pre_bind_0_2_1_cabi); };
    ($p:ty, bind) => { $crate::__kws_export_iface!(@ $p, bind, __export_kws_plugin_bind_0_2_1_cabi); };
    ($p:ty, post_bind) => {
        $crate::__kws_export_iface!(@ $p, post_bind, __export_kws_plugin_post_bind_0_2_1_cabi);
    };
    ($p:ty, post_bind_ref) => {
        $crate::__kws_export_iface!(@ $p, post_bind_ref, __export_kws_plugin_post_bind_ref_0_2_1_cabi);
    };
    ($p:ty, sort_key_ref) => {
        $crate::__kws_export_iface!(@ $p, sort_key_ref, __export_kws_plugin_sort_key_ref_0_2_1_cabi);
    };
    ($p:ty, $other:ident) => {
        ::core::compile_error!(::core::concat!(
            "kws_plugin_sdk::export!: unknown extension point `", ::core::stringify!($other), "`; expected ",
            "pre_enqueue, queue_sort, pre_filter, filter, post_filter, pre_score, score, reserve, permit, pre_bind, ",
            "bind, post_bind, events or pods"
        ));
    };
}
