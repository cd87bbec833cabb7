//! DrainGuard: keeps pods off the nodes an operator is draining, named in the plugin's configuration:
//!
//! ```json
//! {"nodes": ["node-3", "node-7"]}
//! ```
//!
//! - Filter: a node being drained is UnschedulableAndUnresolvable, `node(s) were being drained`.
//! - PreBind: the last moment before the binding is written. A pod whose scheduling cycle chose a node before the
//!   operator named it (the configuration is hot-reloaded while cycles are in flight) is refused here, its
//!   reservation is undone, and its next cycle's Filter keeps it off the node.
//!
//! The configuration is the plugin's only state, so every instance of a pool decides alike.

use kws_plugin_sdk::{Config, CyclePod, Declared, Node, NodeInfo, Plugin, Pod, Status, Value};

/// The Filter and PreBind reason.
pub const REASON: &str = "node(s) were being drained";

/// The plugin: the names of the nodes being drained.
pub struct DrainGuard {
    draining: Vec<String>,
}

impl DrainGuard {
    fn draining(&self, node: &str) -> bool {
        self.draining.iter().any(|n| n == node)
    }
}

impl Plugin for DrainGuard {
    /// Whether the node is being drained, looked up once per node version rather than once per pod and node.
    type NodeData = bool;

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&["nodes"])?;
        let draining = match config.get("nodes") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.is_empty() => Ok(s.clone()),
                    other => Err(format!("nodes: each entry must be a node name, got {other:?}")),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("nodes must be a list of node names, got {other:?}")),
        };
        Ok(Self { draining })
    }

    /// It reads a node's name only, so the host need not resend a node each time a pod lands on it.
    fn declare(&self) -> Declared {
        Declared::IGNORES_NODE_USAGE
    }

    fn prepare(&self, node: &Node) -> bool {
        self.draining(&node.name)
    }

    fn filter(&self, _pod: &CyclePod, node: &NodeInfo<'_, bool>) -> Status {
        if *node.data() {
            Status::unresolvable(REASON)
        } else {
            Status::success()
        }
    }

    fn pre_bind(&self, pod: &Pod, node: &str) -> Status {
        if !self.draining(node) {
            return Status::success();
        }
        kws_plugin_sdk::warn!("{}: not bound to {node}, which is being drained", pod.key());
        Status::unschedulable(format!("node {node} is being drained"))
    }
}

kws_plugin_sdk::export!(DrainGuard: filter, pre_bind);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Code, Node};

    #[test]
    fn filter_keeps_pods_off_nodes_being_drained() {
        testing::set_config(r#"{"nodes": ["n1"]}"#);
        let slots = testing::load_nodes(vec![Node::new("n0"), Node::new("n1")]);
        let got = testing::filter::<DrainGuard>(Pod::new("ns", "p"), slots);
        assert!(got[0].is_success());
        assert_eq!((got[1].code, got[1].reasons.clone()), (Code::UnschedulableAndUnresolvable, vec![REASON.into()]));
    }

    #[test]
    fn pre_bind_refuses_a_node_named_after_the_cycle_chose_it() {
        testing::set_config(r#"{"nodes": ["n1"]}"#);
        assert!(testing::pre_bind::<DrainGuard>(Pod::new("ns", "p"), "n0").is_success());
        let st = testing::pre_bind::<DrainGuard>(Pod::new("ns", "p"), "n1");
        assert_eq!((st.code, st.reasons), (Code::Unschedulable, vec!["node n1 is being drained".into()]));
    }

    #[test]
    fn refuses_a_configuration_that_is_not_a_list_of_names() {
        for bad in [r#"{"nodes": "n1"}"#, r#"{"nodes": [1]}"#, r#"{"nodes": [""]}"#, r#"{"node": []}"#] {
            testing::set_config(bad);
            assert!(testing::validate::<DrainGuard>().is_err(), "{bad}");
        }
        testing::set_config("{}");
        assert!(testing::validate::<DrainGuard>().is_ok());
    }
}
