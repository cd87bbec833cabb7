//! What the batched exports do with one call: look every node slot up in the node table and call the plugin's
//! per-node method, in order. Public so a plugin's unit tests can drive the same path natively.

use std::collections::HashMap;

use crate::bindings::exports::kws::plugin::filter::FilterResult;
use crate::table::{NodeTable, Prepared, ScoreBatch};
use crate::types::{CyclePod, NodeSlot, Status};
use crate::Plugin;

/// The status for a slot the table does not hold (the host sent a slot before its `nodes.apply`).
pub fn missing_slot(slot: NodeSlot) -> Status {
    Status::error(format!("node slot {slot} is not in the plugin's node table"))
}

/// Filter over `slots`, as the contract's compact answer: only the nodes that do not pass, each pointing at one
/// of the distinct statuses (a missing slot is rejected with an Error status naming it). Plugins are called in
/// slot order.
pub fn filter<P: Plugin>(
    plugin: &P,
    table: &NodeTable,
    data: &Prepared<P::NodeData>,
    pod: &CyclePod,
    slots: &[NodeSlot],
) -> FilterResult {
    let mut rejections = Rejections::default();
    for (at, &slot) in slots.iter().enumerate() {
        let status = match data.get(table, slot) {
            Some(node) => plugin.filter(pod, &node),
            None => missing_slot(slot),
        };
        if !status.is_success() {
            rejections.push(at as u32, status);
        }
    }
    rejections.finish()
}

/// Builds a [`FilterResult`]: statuses are deduplicated, the common case (the same status as the previous
/// rejection) without hashing.
#[derive(Default)]
struct Rejections {
    index: HashMap<Status, u32>,
    last: Option<(Status, u32)>,
    rejected: Vec<u32>,
    verdicts: Vec<u32>,
}

impl Rejections {
    fn push(&mut self, at: u32, status: Status) {
        let v = match &self.last {
            Some((s, v)) if *s == status => *v,
            _ => {
                let v = match self.index.get(&status) {
                    Some(&v) => v,
                    None => {
                        let v = self.index.len() as u32;
                        self.index.insert(status.clone(), v);
                        v
                    }
                };
                self.last = Some((status, v));
                v
            }
        };
        self.rejected.push(at);
        self.verdicts.push(v);
    }

    fn finish(self) -> FilterResult {
        let mut statuses: Vec<Option<Status>> = vec![None; self.index.len()];
        for (s, v) in self.index {
            statuses[v as usize] = Some(s);
        }
        FilterResult {
            statuses: statuses.into_iter().flatten().collect(),
            rejected: self.rejected,
            verdicts: self.verdicts,
        }
    }
}

/// One status per node from a compact Filter answer over `n` nodes (Success for every node not listed), as the
/// host reads it. For tests; an answer that points outside its lists panics.
pub fn expand(result: &FilterResult, n: usize) -> Vec<Status> {
    let mut out = vec![Status::success(); n];
    for (&at, &v) in result.rejected.iter().zip(&result.verdicts) {
        out[at as usize] = result.statuses[v as usize].clone();
    }
    out
}

/// Score over `slots`: one raw score per slot, in order. The first failure (a plugin error or a missing slot)
/// fails the whole call, as in kube-scheduler.
pub fn score<P: Plugin>(
    plugin: &P,
    table: &NodeTable,
    data: &Prepared<P::NodeData>,
    pod: &CyclePod,
    slots: &[NodeSlot],
) -> Result<Vec<i64>, Status> {
    // Written by index into a list of the right length rather than pushed: the loop body is then the lookup and the
    // plugin's score alone, which is what a batch of hundreds of nodes spends its time on.
    let mut out = vec![0; slots.len()];
    plugin.score_batch(pod, &ScoreBatch::new(table, data, slots), &mut out)?;
    Ok(out)
}

/// NormalizeScore: hands the plugin the scores (in the host's order) to rewrite in place, and returns them.
pub fn normalize_score<P: Plugin>(plugin: &P, pod: &CyclePod, mut scores: Vec<i64>) -> Result<Vec<i64>, Status> {
    plugin.normalize_score(pod, &mut scores)?;
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::table::NodeInfo;
    use crate::types::{Code, Node, Pod};
    use std::cell::RefCell;

    /// Records the nodes it was called with; score = the node's "s" label, filter rejects nodes labelled "bad".
    struct Recorder {
        calls: RefCell<Vec<String>>,
    }

    impl Plugin for Recorder {
        type NodeData = ();
        fn new(_: &Config) -> Result<Self, String> {
            Ok(Self { calls: RefCell::new(Vec::new()) })
        }
        fn filter(&self, _: &CyclePod, node: &NodeInfo<'_, ()>) -> Status {
            self.calls.borrow_mut().push(node.name.clone());
            if node.label("bad").is_some() {
                Status::unschedulable("bad node")
            } else {
                Status::success()
            }
        }
        fn score(&self, _: &CyclePod, node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
            self.calls.borrow_mut().push(node.name.clone());
            node.label("s")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| Status::error(format!("{}: no score", node.name)))
        }
        fn normalize_score(&self, _: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
            crate::normalize::scale_to_max(scores, 100);
            Ok(())
        }
    }

    fn setup() -> (Recorder, NodeTable, Prepared<()>, CyclePod) {
        let mut t = NodeTable::new();
        t.upsert(0, Node::new("n0").with_label("s", "1"));
        t.upsert(1, Node::new("n1").with_label("s", "4").with_label("bad", ""));
        t.upsert(3, Node::new("n3").with_label("s", "2"));
        t.upsert(4, Node::new("n4"));
        let mut d = Prepared::default();
        d.catch_up(&mut t, |_| ());
        (Recorder::new(&Config::parse("{}").unwrap()).unwrap(), t, d, Pod::new("ns", "p").into())
    }

    #[test]
    fn filter_calls_each_node_in_slot_order() {
        let (p, t, d, pod) = setup();
        let st = expand(&filter(&p, &t, &d, &pod, &[3, 1, 0]), 3);
        assert_eq!(*p.calls.borrow(), ["n3", "n1", "n0"]);
        assert_eq!(st.iter().map(|s| s.code).collect::<Vec<_>>(), [Code::Success, Code::Unschedulable, Code::Success]);
        assert_eq!(st[1].reasons, ["bad node"]);
        let none = filter(&p, &t, &d, &pod, &[]);
        assert!(none.statuses.is_empty() && none.rejected.is_empty() && none.verdicts.is_empty());
    }

    #[test]
    fn filter_missing_slot_is_an_error_naming_it() {
        let (p, t, d, pod) = setup();
        let st = expand(&filter(&p, &t, &d, &pod, &[0, 2, 3]), 3);
        assert_eq!(*p.calls.borrow(), ["n0", "n3"]);
        assert_eq!(st[1].code, Code::Error);
        assert_eq!(st[1].reasons, ["node slot 2 is not in the plugin's node table"]);
        assert!(st[0].is_success() && st[2].is_success());
    }

    #[test]
    fn filter_answer_lists_only_rejections_with_each_status_once() {
        let (p, mut t, mut d, pod) = setup();
        t.upsert(5, Node::new("n5").with_label("bad", ""));
        d.catch_up(&mut t, |_| ());
        // Rejections: n1 (bad), slot 2 (missing), n5 (bad), slot 9 (missing), n1 again.
        let r = filter(&p, &t, &d, &pod, &[0, 1, 2, 5, 3, 9, 1]);
        assert_eq!(r.rejected, [1, 2, 3, 5, 6]);
        assert_eq!(r.statuses.len(), 3, "{:?}", r.statuses);
        let s = |i: usize| &r.statuses[r.verdicts[i] as usize];
        assert_eq!(
            (s(0), s(2), s(4)),
            (
                &Status::unschedulable("bad node"),
                &Status::unschedulable("bad node"),
                &Status::unschedulable("bad node")
            )
        );
        assert_eq!(s(1).message(), "node slot 2 is not in the plugin's node table");
        assert_eq!(s(3).message(), "node slot 9 is not in the plugin's node table");
        assert_eq!(expand(&r, 7).iter().filter(|s| s.is_success()).count(), 2);
    }

    #[test]
    fn score_in_order_and_first_error_wins() {
        let (p, t, d, pod) = setup();
        assert_eq!(score(&p, &t, &d, &pod, &[3, 0, 1]), Ok(vec![2, 1, 4]));
        assert_eq!(*p.calls.borrow(), ["n3", "n0", "n1"]);

        let err = score(&p, &t, &d, &pod, &[0, 9, 4]).unwrap_err();
        assert_eq!((err.code, err.message()), (Code::Error, "node slot 9 is not in the plugin's node table".into()));

        let err = score(&p, &t, &d, &pod, &[4, 0]).unwrap_err();
        assert_eq!(err.message(), "n4: no score");
    }

    #[test]
    fn normalize_keeps_host_order() {
        let (p, _, _, pod) = setup();
        assert_eq!(normalize_score(&p, &pod, vec![2, 1, 4]), Ok(vec![50, 25, 100]));
        assert_eq!(normalize_score(&p, &pod, vec![]), Ok(vec![]));
    }
}
