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

    /// It reads one label, never the node's usage: the host need not resend a node each time a pod lands on it.
    fn declare(&self) -> Declared {
        Declared::IGNORES_NODE_USAGE
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
            Label::Value(v) => Ok(*v),
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
