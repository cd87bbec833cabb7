//! NodeName: a pod that names its node (`spec.nodeName`) fits only that node.

use crate::framework::PluginContext;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeName";
/// The rejection reason, upstream's wording.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName plugin.
#[derive(Debug, Default)]
pub struct NodeName;

impl NodeName {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<NodeName, String> {
        Ok(NodeName)
    }
}

impl Plugin for NodeName {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, action::ADD)]
    }
    crate::serves!(filter, sign);
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.node_name() {
            Some(n) if n != node.name => Status::unresolvable(ERR_REASON),
            _ => Status::success(),
        }
    }
}

impl crate::framework::SignPlugin for NodeName {
    /// As upstream: the pod's `spec.nodeName`.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        let name = pod.pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        Ok(vec![SignFragment { key: signers::NODE_NAME, value: serde_json::json!(name) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testutil::{node, pod};
    use serde_json::json;

    #[test]
    fn table() {
        let cases = [
            ("no nodeName", json!({}), "n1", None),
            ("same", json!({"nodeName": "n1"}), "n1", None),
            ("other", json!({"nodeName": "n2"}), "n1", Some(ERR_REASON)),
        ];
        for (name, spec, node_name, want) in cases {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
            let n = node(json!({"metadata": {"name": node_name}}));
            let st = NodeName.filter(&CycleState::new(), &p, &n);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), crate::framework::Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }
}
