//! PriorityLabel: a Filter and Score plugin that prefers nodes by an integer label.
//!
//! Configuration (`pluginConfig[].args.config`): `{"labelKey": "..."}`, default key `priority.example.com`.
//!
//! - Filter: a node without the label is `UnschedulableAndUnresolvable`, reason `node(s) didn't have label <key>`.
//! - Score: the label's integer value; a non-integer value is an Error.
//! - NormalizeScore: `score * 100 / max` (negative scores count as 0; all 0 when no score is positive).
//!   Built with the cargo feature `invert`, the normalized score is `100 - that` (the hot-reload test's second
//!   version of this plugin).

use kws_plugin_sdk::{normalize, Config, CyclePod, Declared, Node, NodeInfo, Plugin, Status, MAX_NODE_SCORE};

/// The label read when the configuration names none.
pub const DEFAULT_LABEL_KEY: &str = "priority.example.com";

/// A node's label, as [`PriorityLabel::prepare`] found it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// The node does not carry the label.
    #[default]
    Missing,
    /// The label's integer value.
    Value(i64),
    /// The label's value is not an integer.
    NotInteger,
}

/// The plugin: which label to read, and the Filter reason (the same text for every node, so the host can count it).
pub struct PriorityLabel {
    /// The label key.
    key: String,
    /// `node(s) didn't have label <key>`.
    missing_reason: String,
}

impl Plugin for PriorityLabel {
    /// The label, read once per node change rather than once per pod: absent, or its value parsed.
    type NodeData = Label;

    fn new(config: &Config) -> Result<Self, String> {
        let key = config.str("labelKey")?.unwrap_or(DEFAULT_LABEL_KEY);
        if key.is_empty() {
            return Err("labelKey must not be empty".to_string());
        }
        Ok(Self { key: key.to_string(), missing_reason: format!("node(s) didn't have label {key}") })
    }

    /// It reads one label, never the node's usage (the host need not resend a node each time a pod lands on it)
    /// nor the pod (the host keeps each node's score for every pod), and its NormalizeScore is upstream's
    /// `DefaultNormalizeScore` (reversed when built with `invert`), which the host computes itself.
    fn declare(&self) -> Declared {
        let normalize =
            if cfg!(feature = "invert") { Declared::NORMALIZE_DEFAULT_REVERSED } else { Declared::NORMALIZE_DEFAULT };
        Declared::IGNORES_NODE_USAGE | Declared::SCORE_READS_NODE_ONLY | normalize
    }

    fn prepare(&self, node: &Node) -> Label {
        match node.label(&self.key) {
            None => Label::Missing,
            Some(v) => v.trim().parse().map_or(Label::NotInteger, Label::Value),
        }
    }

    fn filter(&self, _pod: &CyclePod, node: &NodeInfo<'_, Label>) -> Status {
        match node.data() {
            Label::Missing => Status::unresolvable(self.missing_reason.as_str()),
            _ => Status::success(),
        }
    }

    // Inlined into the SDK's batch loop: called once per node, and out of line it cost more than the loop itself.
    #[inline]
    fn score(&self, _pod: &CyclePod, node: &NodeInfo<'_, Label>) -> Result<i64, Status> {
        match node.data() {
            // Filter keeps such nodes out; score them lowest if Filter is disabled.
            Label::Missing => Ok(0),
            // A negative value ranks as 0 does. Clamped here rather than in NormalizeScore, so that the promised
            // `normalize-default` (which keeps negative scores negative) gives what `scale_to_max` gives.
            Label::Value(v) => Ok((*v).max(0)),
            Label::NotInteger => {
                let value = node.label(&self.key).unwrap_or_default();
                Err(Status::error(format!("node {}: label {} has non-integer value \"{value}\"", node.name, self.key)))
            }
        }
    }

    fn normalize_score(&self, _pod: &CyclePod, scores: &mut [i64]) -> Result<(), Status> {
        normalize::scale_to_max(scores, MAX_NODE_SCORE);
        if cfg!(feature = "invert") {
            normalize::reverse(scores, MAX_NODE_SCORE);
        }
        Ok(())
    }
}

kws_plugin_sdk::export!(PriorityLabel: filter, score);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::testing;
    use kws_plugin_sdk::types::NodeChange;
    use kws_plugin_sdk::{Code, Pod};

    fn nodes() -> Vec<u32> {
        testing::load_nodes(vec![
            Node::new("a").with_label(DEFAULT_LABEL_KEY, "10"),
            Node::new("b"),
            Node::new("c").with_label(DEFAULT_LABEL_KEY, "5"),
            Node::new("d").with_label(DEFAULT_LABEL_KEY, "high"),
        ])
    }

    #[test]
    fn filter_rejects_unlabelled_nodes_with_one_reason() {
        let slots = nodes();
        let st = testing::filter::<PriorityLabel>(Pod::new("default", "p"), slots);
        let codes: Vec<Code> = st.iter().map(|s| s.code).collect();
        assert_eq!(codes, [Code::Success, Code::UnschedulableAndUnresolvable, Code::Success, Code::Success]);
        assert_eq!(st[1].reasons, ["node(s) didn't have label priority.example.com"]);
    }

    #[test]
    fn label_key_from_config() {
        testing::set_config(r#"{"labelKey": "rank"}"#);
        let slots = testing::load_nodes(vec![Node::new("a").with_label("rank", "3"), Node::new("b")]);
        let st = testing::filter::<PriorityLabel>(Pod::new("default", "p"), slots.clone());
        assert_eq!(st[1].reasons, ["node(s) didn't have label rank"]);
        assert_eq!(testing::score::<PriorityLabel>(Pod::new("default", "p"), vec![0]), Ok(vec![3]));
    }

    #[test]
    fn validate_refuses_a_bad_config_before_any_call() {
        testing::set_config(r#"{"labelKey": ""}"#);
        let e = testing::validate::<PriorityLabel>().unwrap_err();
        assert!(e.contains("labelKey must not be empty"), "{e}");
        testing::set_config(r#"{"labelKey": "rank"}"#);
        assert_eq!(testing::validate::<PriorityLabel>(), Ok(()));
    }

    #[test]
    fn bad_config_fails_every_call() {
        testing::set_config(r#"{"labelKey": 7}"#);
        let slots = nodes();
        let st = testing::filter::<PriorityLabel>(Pod::new("default", "p"), slots);
        assert!(st.iter().all(|s| s.code == Code::Error && s.message().contains("labelKey")));
        assert_eq!(testing::take_logs().len(), 1);
    }

    #[test]
    fn score_is_the_label_value_and_rejects_non_integers() {
        nodes();
        let pod = || Pod::new("default", "p");
        assert_eq!(testing::score::<PriorityLabel>(pod(), vec![0, 2]), Ok(vec![10, 5]));
        let err = testing::score::<PriorityLabel>(pod(), vec![0, 3]).unwrap_err();
        assert_eq!(err.code, Code::Error);
        assert_eq!(err.message(), "node d: label priority.example.com has non-integer value \"high\"");
    }

    #[test]
    fn a_changed_node_is_read_again() {
        nodes();
        let pod = || Pod::new("default", "p");
        assert_eq!(testing::score::<PriorityLabel>(pod(), vec![0, 2]), Ok(vec![10, 5]));
        testing::apply(vec![
            NodeChange::Upsert((2, Node::new("c").with_label(DEFAULT_LABEL_KEY, "40"))),
            NodeChange::Upsert((1, Node::new("b").with_label(DEFAULT_LABEL_KEY, "7"))),
        ]);
        assert_eq!(testing::score::<PriorityLabel>(pod(), vec![0, 1, 2]), Ok(vec![10, 7, 40]));
        assert!(testing::filter::<PriorityLabel>(pod(), vec![1]).iter().all(Status::is_success));
        testing::apply(vec![NodeChange::Upsert((0, Node::new("a")))]);
        assert_eq!(testing::filter::<PriorityLabel>(pod(), vec![0])[0].code, Code::UnschedulableAndUnresolvable);
    }

    /// kube-scheduler's `DefaultNormalizeScore(100, reverse, scores)`, written out from upstream's definition: what
    /// the host computes instead of calling the plugin's NormalizeScore, given the plugin's promise.
    fn upstream_default_normalize(scores: &[i64], reverse: bool) -> Vec<i64> {
        let max = scores.iter().copied().fold(0, i64::max);
        if max == 0 {
            return scores.iter().map(|&s| if reverse { 100 } else { s }).collect();
        }
        scores.iter().map(|&s| if reverse { 100 - 100 * s / max } else { 100 * s / max }).collect()
    }

    #[test]
    fn its_promises_hold() {
        let reverse = cfg!(feature = "invert");
        let normalize = if reverse { Declared::NORMALIZE_DEFAULT_REVERSED } else { Declared::NORMALIZE_DEFAULT };
        assert_eq!(
            testing::declare::<PriorityLabel>(),
            Declared::IGNORES_NODE_USAGE | Declared::SCORE_READS_NODE_ONLY | normalize | Declared::NEEDS_NO_CYCLE_BEGIN
        );
        // Score reads only the node: other pods, the same scores.
        testing::load_nodes(vec![
            Node::new("a").with_label(DEFAULT_LABEL_KEY, "10"),
            Node::new("b"),
            Node::new("c").with_label(DEFAULT_LABEL_KEY, "-4"),
            Node::new("d").with_label(DEFAULT_LABEL_KEY, " 25 "),
        ]);
        let mut labelled = Pod::new("other", "q");
        labelled.labels.push(("priority.example.com".into(), "99".into()));
        labelled.priority = 1000;
        let raw = testing::score::<PriorityLabel>(Pod::new("default", "p"), vec![0, 1, 2, 3]).unwrap();
        assert_eq!(raw, [10, 0, 0, 25], "a negative value scores as 0 does");
        assert_eq!(testing::score::<PriorityLabel>(labelled, vec![0, 1, 2, 3]).unwrap(), raw);
        // Its NormalizeScore is upstream's on every list its Score can give (no score below 0).
        for raw in [vec![10, 0, 0, 25], vec![0, 0], vec![7], vec![3, 1_000_000_000_000, 9, 0], vec![1, 2, 3, 100, 250]]
        {
            let pairs = raw.iter().enumerate().map(|(i, &s)| (i as u32, s)).collect();
            let got = testing::normalize_score::<PriorityLabel>(Pod::new("default", "p"), pairs).unwrap();
            assert_eq!(got, upstream_default_normalize(&raw, reverse), "{raw:?}");
        }
    }

    #[test]
    fn normalize_scales_by_maximum() {
        let got = testing::normalize_score::<PriorityLabel>(Pod::new("default", "p"), vec![(0, 10), (2, 5), (4, -3)]);
        let want = if cfg!(feature = "invert") { vec![0, 50, 100] } else { vec![100, 50, 0] };
        assert_eq!(got, Ok(want));
        let zeros = testing::normalize_score::<PriorityLabel>(Pod::new("default", "p"), vec![(0, 0), (1, -1)]);
        let want = if cfg!(feature = "invert") { vec![100, 100] } else { vec![0, 0] };
        assert_eq!(zeros, Ok(want));
    }
}
