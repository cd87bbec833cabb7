//! NodeDeclaredFeatures, as upstream's `nodedeclaredfeatures/nodedeclaredfeatures.go` (GA and in the default profile
//! since v1.37): a pod that needs a node feature (inferred from its spec, as component-helpers'
//! `nodedeclaredfeatures` registry infers it) fits only nodes that list that feature in `status.declaredFeatures`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec, VolumeMount};

use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeDeclaredFeatures";
/// CycleState key of the PreFilter data (the features the pod needs).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeDeclaredFeatures";
/// The rejection reason, upstream's wording.
pub const ERR_REASON: &str = "node(s) didn't match Pod's required features";

/// A declared feature the scheduler can infer from a pod spec: its name as nodes declare it, and whether a pod
/// needs it. Upstream's registry (v1.37) has nine features; the six that no pod spec implies at scheduling time
/// (they matter for updates, or are handled by another plugin) need no entry here.
struct Feature {
    name: &'static str,
    needed_by: fn(&PodSpec) -> bool,
}

/// The features whose need a pod spec shows, in upstream's (name) order.
const FEATURES: &[Feature] = &[
    Feature { name: "RestartAllContainersOnContainerExits", needed_by: restarts_all_containers },
    Feature { name: "UserNamespacesHostNetworkSupport", needed_by: user_namespace_with_host_network },
    Feature { name: "VolumeBindMountOptions", needed_by: uses_bind_mount_options },
];

/// A container (or init container) with a restart rule whose action is `RestartAllContainers`.
fn restarts_all_containers(spec: &PodSpec) -> bool {
    let rules =
        |c: &Container| c.restart_policy_rules.iter().flatten().any(|r| r.action.as_str() == "RestartAllContainers");
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(rules)
}

/// Host network in a user namespace (`hostUsers: false`).
fn user_namespace_with_host_network(spec: &PodSpec) -> bool {
    spec.host_network == Some(true) && spec.host_users == Some(false)
}

/// A volume mount of any container, init or ephemeral container that sets `bindMountOptions`.
fn uses_bind_mount_options(spec: &PodSpec) -> bool {
    let set = |m: &VolumeMount| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty());
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| c.volume_mounts.iter().flatten().any(set))
        || spec.ephemeral_containers.iter().flatten().any(|c| c.volume_mounts.iter().flatten().any(set))
}

/// The declared features `pod` needs, by name.
pub fn required_features(pod: &PodInfo) -> Vec<&'static str> {
    let Some(spec) = pod.pod.spec.as_ref() else { return Vec::new() };
    FEATURES.iter().filter(|f| (f.needed_by)(spec)).map(|f| f.name).collect()
}

/// PreFilter data; cloning shares it.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<Vec<&'static str>>);

/// The NodeDeclaredFeatures plugin.
#[derive(Debug)]
pub struct NodeDeclaredFeatures {
    /// The gate: with it off the plugin is built but skips every pod, as upstream's does.
    enabled: bool,
}

impl Default for NodeDeclaredFeatures {
    fn default() -> NodeDeclaredFeatures {
        NodeDeclaredFeatures { enabled: true }
    }
}

impl NodeDeclaredFeatures {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<NodeDeclaredFeatures, String> {
        Ok(NodeDeclaredFeatures { enabled: ctx.features.node_declared_features })
    }
}

impl Plugin for NodeDeclaredFeatures {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A node declaring a new feature (upstream UpdateNodeDeclaredFeature, a status change).
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE),
            // The pod's own spec no longer needing the feature.
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE),
        ]
    }
    crate::serves!(pre_filter, filter, sign);
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let needed = if self.enabled { required_features(pod) } else { Vec::new() };
        if needed.is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(Arc::new(needed)));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(PreFilterState(needed)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycle-state: not found"));
        };
        let declared = node.node.status.as_ref().and_then(|s| s.declared_features.as_deref()).unwrap_or(&[]);
        if needed.iter().all(|f| declared.iter().any(|d| d == f)) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }
}

impl crate::framework::SignPlugin for NodeDeclaredFeatures {
    /// As upstream: the declared features the pod needs.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        Ok(vec![SignFragment { key: signers::FEATURES, value: serde_json::json!(required_features(pod).join(",")) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{node, pod};
    use serde_json::{json, Value};

    fn run(spec: Value, declared: Value) -> Code {
        let p = pod(json!({"metadata": {"name": "p", "uid": "p"}, "spec": spec}));
        let n = node(json!({"metadata": {"name": "n"}, "status": {"declaredFeatures": declared}}));
        let pl = NodeDeclaredFeatures::default();
        let mut st = CycleState::new();
        let (_, s) = pl.pre_filter(&mut st, &p, &Snapshot::default());
        if s.code() == Code::Skip {
            return Code::Skip;
        }
        let s = pl.filter(&st, &p, &n);
        if !s.is_success() {
            assert_eq!(s.reasons(), [ERR_REASON]);
        }
        s.code()
    }

    #[test]
    fn table() {
        let restart_all = json!({"containers": [{"name": "c", "image": "i", "restartPolicyRules": [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]});
        let restart_one = json!({"containers": [{"name": "c", "image": "i", "restartPolicyRules": [
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]}]});
        let userns_hostnet = json!({"hostNetwork": true, "hostUsers": false, "containers": [{"name": "c"}]});
        let bind_opts = json!({"initContainers": [{"name": "i", "volumeMounts": [
            {"name": "v", "mountPath": "/v", "bindMountOptions": ["ro"]}]}], "containers": [{"name": "c"}]});
        let cases: Vec<(&str, Value, Value, Code)> = vec![
            ("plain pod needs nothing", json!({"containers": [{"name": "c"}]}), json!([]), Code::Skip),
            ("restart rule of another action", restart_one, json!([]), Code::Skip),
            ("hostNetwork alone", json!({"hostNetwork": true, "containers": [{"name": "c"}]}), json!([]), Code::Skip),
            ("restart-all on a node without it", restart_all.clone(), json!([]), Code::UnschedulableAndUnresolvable),
            (
                "restart-all on a node declaring it",
                restart_all,
                json!(["RestartAllContainersOnContainerExits"]),
                Code::Success,
            ),
            (
                "user namespace with host network, other feature declared",
                userns_hostnet.clone(),
                json!(["VolumeBindMountOptions"]),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "user namespace with host network declared",
                userns_hostnet,
                json!(["UserNamespacesHostNetworkSupport", "SomethingUnknown"]),
                Code::Success,
            ),
            (
                "bind mount options in an init container",
                bind_opts.clone(),
                json!(null),
                Code::UnschedulableAndUnresolvable,
            ),
            ("bind mount options declared", bind_opts, json!(["VolumeBindMountOptions"]), Code::Success),
        ];
        for (name, spec, declared, want) in cases {
            assert_eq!(run(spec, declared), want, "{name}");
        }
    }
}
