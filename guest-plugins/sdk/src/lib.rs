//! # kws-plugin-sdk: write kube-wasm-scheduler plugins in Rust
//!
//! A plugin is a type implementing [`Plugin`] (per-pod, per-node logic; every method has a default) and one
//! export line naming the world it targets:
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
//! kws_plugin_sdk::export_score!(LabelScore);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-unknown-unknown` and turn it into a component with
//! `kube-wasm-scheduler plugin componentize` (or `wasm-tools component new`; the repository's
//! `scripts/build-guests.sh` does both steps).
//!
//! ## What the SDK does for you
//!
//! - **The node table.** The host keeps a copy of every node inside the instance and sends only changes
//!   (`nodes.apply`); Filter and Score calls name nodes by slot. The SDK keeps the table ([`NodeTable`]) and looks
//!   every slot up before calling your per-node method, so you see a [`NodeInfo`] (the node, and what your
//!   [`Plugin::prepare`] derived from it when it last changed). A slot the table does not hold gives an Error
//!   status naming it.
//! - **The cycle's pod.** Filter, Score and NormalizeScore calls do not carry the pod. Your methods get a
//!   [`CyclePod`], which reads like a `Pod` and fetches it from the host (`host.cycle-pod`) the first time you read
//!   it in a cycle: once per cycle at most, and never when your policy looks only at nodes.
//! - **Batching.** One Filter or Score call covers many nodes; the SDK loops ([`batch`]). Score stops at the first
//!   error, as kube-scheduler does.
//! - **Configuration.** `pluginConfig[].args.config` arrives as JSON; the SDK parses it ([`Config`]) and calls
//!   [`Plugin::new`] once per instance, on the first call. If `new` fails, the reason is logged once and every
//!   call answers with an Error status carrying it (QueueSort falls back to priority order).
//! - **Host services.** [`host`] wraps logging (and the [`info!`] family of macros), randomness, time and the
//!   per-cycle state.
//!
//! ## Panics
//!
//! A panic inside a plugin is a Wasm trap: the call fails, the host reports an Error for that pod and drops the
//! instance (its node table goes with it, and the next instance is rebuilt from scratch). The SDK's own glue does
//! not panic; prefer returning [`Status::error`] to `unwrap()` in plugin code.
//!
//! ## Testing a plugin natively
//!
//! Compiled for the machine rather than Wasm, the host imports are simulated in-process ([`testing`]), so
//! `cargo test` can exercise a plugin through the same code paths as the exports.

#![warn(missing_docs)]

#[doc(hidden)]
pub mod bindings;

pub mod batch;
pub mod config;
pub mod host;
pub mod normalize;
mod runtime;
pub mod table;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod types;

pub use config::{Config, Value};
pub use host::Level;
pub use normalize::MAX_NODE_SCORE;
pub use table::{NodeInfo, NodeTable, Prepared};
pub use types::{Code, CyclePod, Node, NodeSlot, Pod, QosClass, QueuedPod, Resources, Status};

/// The logging macros, also reachable as `kws_plugin_sdk::log::info!` and so on.
pub mod log {
    pub use crate::{debug, error, info, warn};
}

/// A scheduling plugin: per-pod and per-node logic. Implement the methods of the extension points your export
/// macro names; the others are never called.
///
/// One value is built per component instance (with [`Plugin::new`]) and lives as long as the instance. Methods
/// take `&self`; keep mutable state in a `Cell`/`RefCell` (an instance is single-threaded).
pub trait Plugin: Sized + 'static {
    /// Builds the plugin from its configuration (`{}` when none is given). An `Err` is logged, and every call then
    /// fails with an Error status carrying it.
    fn new(config: &Config) -> Result<Self, String>;

    /// What the plugin derives from a node when the node arrives or changes, kept by the SDK beside the node and
    /// handed to [`Plugin::filter`] and [`Plugin::score`] as [`NodeInfo::data`]. Node data changes far less often
    /// than pods are scheduled, so work done here (parsing a label, say) is not repeated for every pod. `()` when
    /// the plugin needs nothing.
    type NodeData: Default + 'static;

    /// Computes [`Plugin::NodeData`] for a node. Called for every node once, then for each node that changes,
    /// before the next Filter or Score call. Default: `NodeData::default()`.
    fn prepare(&self, node: &Node) -> Self::NodeData {
        let _ = node;
        Self::NodeData::default()
    }

    /// Filter: whether `pod` fits on `node`. Default: it does.
    ///
    /// Give the same reason text for the same cause on every node: the host counts reasons across nodes
    /// (`0/3 nodes are available: 3 node(s) ...`).
    fn filter(&self, pod: &CyclePod, node: &NodeInfo<'_, Self::NodeData>) -> Status {
        let _ = (pod, node);
        Status::success()
    }

    /// Score: the raw score of `node` for `pod`. Default: 0. An `Err` fails the whole Score call.
    fn score(&self, pod: &CyclePod, node: &NodeInfo<'_, Self::NodeData>) -> Result<i64, Status> {
        let _ = (pod, node);
        Ok(0)
    }

    /// NormalizeScore: rewrite the raw scores of all feasible nodes into `[0, 100]`, in place (see [`normalize`]
    /// for helpers). Default: leave them as they are (right when `score` already returns `[0, 100]`).
    fn normalize_score(&self, pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        let _ = (pod, scores);
        Ok(())
    }

    /// QueueSort: true when `a` should be scheduled before `b`. Default: kube-scheduler's PrioritySort (higher
    /// priority first, then earlier queue time).
    fn less(&self, a: &QueuedPod, b: &QueuedPod) -> bool {
        types::priority_sort_less(a, b)
    }

    /// PostBind: `pod` was bound to the node named `node`. Informational; default: nothing.
    fn post_bind(&self, pod: &Pod, node: &str) {
        let _ = (pod, node);
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
            "component-type:kws-plugin-sdk:kws:plugin@0.2.0:score-plugin",
            SCORE_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_0_cabi,
                nodes => __export_kws_plugin_nodes_0_2_0_cabi,
                cycle => __export_kws_plugin_cycle_0_2_0_cabi,
                score => __export_kws_plugin_score_0_2_0_cabi,
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
            "component-type:kws-plugin-sdk:kws:plugin@0.2.0:filter-score-plugin",
            FILTER_SCORE_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_0_cabi,
                nodes => __export_kws_plugin_nodes_0_2_0_cabi,
                cycle => __export_kws_plugin_cycle_0_2_0_cabi,
                filter => __export_kws_plugin_filter_0_2_0_cabi,
                score => __export_kws_plugin_score_0_2_0_cabi,
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
            "component-type:kws-plugin-sdk:kws:plugin@0.2.0:score-post-bind-plugin",
            SCORE_POST_BIND_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_0_cabi,
                nodes => __export_kws_plugin_nodes_0_2_0_cabi,
                cycle => __export_kws_plugin_cycle_0_2_0_cabi,
                score => __export_kws_plugin_score_0_2_0_cabi,
                post_bind => __export_kws_plugin_post_bind_0_2_0_cabi,
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
            "component-type:kws-plugin-sdk:kws:plugin@0.2.0:queue-sort-plugin",
            QUEUE_SORT_PLUGIN,
            [
                config => __export_kws_plugin_config_0_2_0_cabi,
                queue_sort => __export_kws_plugin_queue_sort_0_2_0_cabi,
            ]
        );
    };
}
