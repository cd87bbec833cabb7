//! NodeUnschedulable: a node marked `spec.unschedulable` (cordoned) takes only pods that tolerate the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use crate::framework::PluginContext;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, Status,
};
use crate::plugins::taint_toleration::{toleration_tolerates, EFFECT_NO_SCHEDULE};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeUnschedulable";
/// The rejection reason, upstream's wording.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// The taint key a pod tolerates to be placed on unschedulable nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NodeUnschedulable plugin.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

impl NodeUnschedulable {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<NodeUnschedulable, String> {
        Ok(NodeUnschedulable)
    }
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Uncordoning is a taint-class update of the node.
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_TAINT),
            // A pending pod gaining the toleration (upstream UpdatePodToleration).
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE_TAINT),
        ]
    }
    crate::serves!(filter, sign);
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable() {
            return Status::success();
        }
        let tolerated =
            pod.tolerations().iter().any(|t| toleration_tolerates(t, TAINT_NODE_UNSCHEDULABLE, "", EFFECT_NO_SCHEDULE));
        if tolerated {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }
}

impl crate::framework::SignPlugin for NodeUnschedulable {
    /// As upstream: the tolerations (of the unschedulable taint).
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        Ok(vec![SignFragment { key: signers::TOLERATIONS, value: signers::tolerations(pod) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, pod};
    use serde_json::json;

    #[test]
    fn table() {
        let cases = [
            ("schedulable node", json!({}), json!([]), true),
            ("unschedulable unset", json!({"unschedulable": false}), json!([]), true),
            ("cordoned, no toleration", json!({"unschedulable": true}), json!([]), false),
            (
                "cordoned, tolerates key with NoSchedule",
                json!({"unschedulable": true}),
                json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]),
                true,
            ),
            (
                "cordoned, tolerates key with any effect",
                json!({"unschedulable": true}),
                json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
                true,
            ),
            ("cordoned, tolerates everything", json!({"unschedulable": true}), json!([{"operator": "Exists"}]), true),
            (
                "cordoned, toleration for NoExecute only",
                json!({"unschedulable": true}),
                json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]),
                false,
            ),
            (
                "cordoned, Equal with a value does not match the empty taint value",
                json!({"unschedulable": true}),
                json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Equal", "value": "x"}]),
                false,
            ),
            (
                "cordoned, other key",
                json!({"unschedulable": true}),
                json!([{"key": "other", "operator": "Exists"}]),
                false,
            ),
        ];
        let pl = NodeUnschedulable::new(None, &ctx()).unwrap();
        for (name, spec, tols, fits) in cases {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": {"tolerations": tols}}));
            let n = node(json!({"metadata": {"name": "n"}, "spec": spec}));
            let st = pl.filter(&CycleState::new(), &p, &n);
            if fits {
                assert!(st.is_success(), "{name}: {st}");
            } else {
                assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(st.reasons(), [ERR_REASON_UNSCHEDULABLE.to_string()], "{name}");
            }
        }
    }
}
