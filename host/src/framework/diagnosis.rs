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
    // PostFilter's message ends with its own period (preemption's is a whole FitError message): none is added, as
    // upstream's `FitError.Error`.
    if !d.post_filter_msg.is_empty() {
        msg.push_str(&format!(" {}", d.post_filter_msg));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the parity harness: preemption's message is a whole FitError message with its own period, and
    /// upstream appends PostFilter's message as it is; we added a second period (`...incoming pod..`).
    #[test]
    fn post_filter_message_is_appended_without_a_second_period() {
        let mut d = Diagnosis::default();
        for n in ["a", "b"] {
            d.node_to_status.insert(n.into(), Status::unresolvable("node(s) had untolerated taint(s)"));
        }
        d.post_filter_msg = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.".into();
        assert_eq!(
            fit_error_message(2, &d),
            "0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 \
             Preemption is not helpful for scheduling."
        );
    }
}
