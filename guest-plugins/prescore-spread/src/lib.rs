//! PrescoreSpread: a PreScore + Score plugin that spreads the pods of an app (label [`APP_LABEL`]) across nodes,
//! in the spirit of upstream's PodTopologySpread scoring (`pkg/scheduler/framework/plugins/podtopologyspread`):
//! PreScore counts, once per pod, the app's pods placed on each feasible node (from the pod view) and stores the
//! counts in the cycle state; Score reads its node's count; NormalizeScore gives the node with the fewest 100.
//!
//! A pod without the label is skipped at PreScore, so its Score is not called.

use std::collections::HashMap;

use kws_plugin_sdk::{host, normalize, pods, Config, CyclePod, NodeInfo, Plugin, Pod, Status, MAX_NODE_SCORE};

/// The label naming a pod's app.
pub const APP_LABEL: &str = "app";

/// The cycle-state key of PreScore's counts.
const STATE_KEY: &str = "counts";

/// The plugin (no configuration).
pub struct PrescoreSpread;

/// The counts as stored: one `node count` line per feasible node with at least one of the app's pods.
fn encode(counts: &HashMap<&str, i64>) -> Vec<u8> {
    counts.iter().map(|(node, n)| format!("{node} {n}\n")).collect::<String>().into_bytes()
}

/// The count stored for `node` (0 when it has none).
fn count_on(state: &[u8], node: &str) -> i64 {
    let text = std::str::from_utf8(state).unwrap_or_default();
    text.lines()
        .find_map(|l| l.split_once(' ').filter(|(n, _)| *n == node))
        .and_then(|(_, c)| c.parse().ok())
        .unwrap_or(0)
}

impl Plugin for PrescoreSpread {
    type NodeData = ();
    const INDEXED_LABELS: &'static [&'static str] = &[APP_LABEL];

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&[])?;
        Ok(PrescoreSpread)
    }

    fn pre_score(&self, pod: &Pod, nodes: &[NodeInfo<'_, ()>]) -> Status {
        let Some(app) = pod.label(APP_LABEL) else { return Status::skip() };
        let mut counts: HashMap<&str, i64> = nodes.iter().map(|n| (n.name.as_str(), 0)).collect();
        let view = pods();
        for p in view.with_label(APP_LABEL, app).in_namespace(&pod.namespace).placed() {
            if let Some(c) = p.pod.node_name.as_deref().and_then(|n| counts.get_mut(n)) {
                *c += 1;
            }
        }
        counts.retain(|_, c| *c > 0);
        host::cycle_state_write(STATE_KEY, &encode(&counts));
        Status::success()
    }

    /// One cycle-state read per node: the SDK offers no per-cycle cache yet, and instance memory cannot stand in
    /// for one safely (another cycle's pod may have the same UID).
    fn score(&self, _pod: &CyclePod, node: &NodeInfo<'_, ()>) -> Result<i64, Status> {
        let state = host::cycle_state_read(STATE_KEY).ok_or_else(|| Status::error("PreScore stored no counts"))?;
        Ok(count_on(&state, &node.name))
    }

    fn normalize_score(&self, _pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        normalize::default_normalize(scores, MAX_NODE_SCORE, true);
        Ok(())
    }
}

kws_plugin_sdk::export!(PrescoreSpread: pre_score, score, pods);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Code, KnownPod, Node};

    fn web(name: &str) -> Pod {
        Pod::new("ns", name).with_label(APP_LABEL, "web")
    }

    #[test]
    fn prescore_counts_once_and_score_reads_the_counts() {
        let slots = testing::load_nodes(vec![Node::new("a"), Node::new("b"), Node::new("c")]);
        testing::upsert_pods(vec![
            KnownPod::bound(web("w1"), "a", 1),
            KnownPod::bound(web("w2"), "a", 2),
            KnownPod::assumed(web("w3"), "b", 3),
            KnownPod::pending(web("w4"), 4),
            // Another app, and the same app in another namespace, do not count.
            KnownPod::bound(Pod::new("ns", "db").with_label(APP_LABEL, "db"), "c", 5),
            KnownPod::bound(Pod::new("other", "w9").with_label(APP_LABEL, "web"), "c", 6),
        ]);
        assert!(testing::pre_score::<PrescoreSpread>(web("new"), slots.clone()).is_success());
        let raw = testing::score::<PrescoreSpread>(web("new"), slots.clone()).unwrap();
        assert_eq!(raw, [2, 1, 0]);
        let pairs = slots.into_iter().zip(raw).collect();
        assert_eq!(testing::normalize_score::<PrescoreSpread>(web("new"), pairs), Ok(vec![0, 50, 100]));
    }

    #[test]
    fn a_pod_without_an_app_is_skipped() {
        let slots = testing::load_nodes(vec![Node::new("a")]);
        assert_eq!(testing::pre_score::<PrescoreSpread>(Pod::new("ns", "p"), slots.clone()).code, Code::Skip);
        // Score without PreScore's counts is an error, not a made-up score.
        let err = testing::score::<PrescoreSpread>(Pod::new("ns", "p"), slots).unwrap_err();
        assert_eq!((err.code, err.message()), (Code::Error, "PreScore stored no counts".to_string()));
    }

    #[test]
    fn counts_round_trip() {
        let counts: HashMap<&str, i64> = [("n-1", 3), ("n-10", 1)].into_iter().collect();
        let state = encode(&counts);
        assert_eq!((count_on(&state, "n-1"), count_on(&state, "n-10"), count_on(&state, "n")), (3, 1, 0));
    }
}
