//! Why a pod fits no node: the per-node statuses and the plugins that rejected it (upstream's `Diagnosis`), and
//! upstream's `FitError` message built from them (`0/N nodes are available: ...`).

use std::collections::{BTreeMap, HashSet};

use super::interface::NodeToStatus;
use super::status::Status;

/// The message when the cluster has no nodes at all (upstream `ErrNoNodesAvailable`).
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// Why the nodes were rejected, for the `0/N nodes are available` message and for requeueing.
#[derive(Debug, Default, Clone)]
pub struct Diagnosis {
    /// Rejected node → status.
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod somewhere.
    pub unschedulable_plugins: HashSet<String>,
    /// PreFilter's message when PreFilter rejected the pod.
    pub pre_filter_msg: String,
    /// PostFilter's message.
    pub post_filter_msg: String,
}

/// Upstream's `FitError` message: `0/N nodes are available: <counted, sorted reasons>.` plus PostFilter's part.
pub fn fit_error_message(num_all_nodes: usize, d: &Diagnosis) -> String {
    let mut msg = format!("0/{num_all_nodes} nodes are available:");
    if !d.pre_filter_msg.is_empty() {
        msg.push_str(&format!(" {}.", d.pre_filter_msg));
    } else {
        let histogram = reason_histogram(d.node_to_status.values());
        if !histogram.is_empty() {
            msg.push_str(&format!(" {}.", histogram));
        }
    }
    if !d.post_filter_msg.is_empty() {
        msg.push_str(&format!(" {}.", d.post_filter_msg));
    }
    msg
}

/// Counts every reason over the statuses and returns `"<n> <reason>"` strings sorted and joined with ", ".
pub fn reason_histogram<'a>(statuses: impl Iterator<Item = &'a Status>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in statuses {
        for r in s.reasons() {
            *counts.entry(r.as_str()).or_insert(0) += 1;
        }
    }
    let mut parts: Vec<String> = counts.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    parts.join(", ")
}
