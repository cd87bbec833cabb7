//! NodePorts: a pod that asks for host ports fits only nodes where none of them is in use, as upstream.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Container;

use crate::framework::types::HostPort;
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin,
    PreFilterResult, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = "NodePorts";
/// CycleState key of the PreFilter data (the pod's host ports).
pub const PRE_FILTER_STATE_KEY: &str = NAME;
/// The rejection reason, upstream's wording.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// Host ports the pod asks for, as upstream's `GetHostPorts`: those of the containers and of the init containers
/// that keep running (sidecars, `restartPolicy: Always`); unset IP means 0.0.0.0 and unset protocol TCP.
pub fn pod_host_ports(pod: &PodInfo) -> Vec<HostPort> {
    let spec = pod.pod.spec.as_ref();
    let init: &[Container] = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or(&[]);
    let containers: &[Container] = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    init.iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .chain(containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
        .map(|p| HostPort {
            ip: p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
            protocol: p.protocol.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "TCP".into()),
            port: p.host_port.unwrap_or(0),
        })
        .collect()
}

/// PreFilter data; cloning shares it.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<Vec<HostPort>>);

/// The NodePorts plugin.
#[derive(Debug, Default)]
pub struct NodePorts;

impl NodePorts {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<NodePorts, String> {
        Ok(NodePorts)
    }
}

impl Plugin for NodePorts {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // Ports are immutable in a pod spec: only a deleted pod frees one.
            ClusterEvent::new(EventResource::AssignedPod, action::DELETE),
            ClusterEvent::new(EventResource::Node, action::ADD),
        ]
    }
    crate::serves!(pre_filter, filter, sign);
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let ports = pod_host_ports(pod);
        if ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(Arc::new(ports)));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(PreFilterState(ports)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        // Most nodes use no host port at all: answer without looking at the pod's ports.
        if node.used_ports.is_empty() {
            return Status::success();
        }
        if ports.iter().any(|p| node.used_ports.check_conflict(p)) {
            return Status::unschedulable(ERR_REASON);
        }
        Status::success()
    }
}

impl crate::framework::SignPlugin for NodePorts {
    /// As upstream: the host ports.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        Ok(vec![SignFragment { key: signers::HOST_PORTS, value: signers::host_ports(pod) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{node_with_pods, pod};
    use serde_json::{json, Value};

    /// A pod whose container asks for `ports` given as (ip, protocol, port); empty strings leave a field unset.
    fn pod_ports(name: &str, ports: &[(&str, &str, i32)]) -> PodInfo {
        let ps: Vec<Value> = ports
            .iter()
            .map(|(ip, proto, port)| {
                let mut p = json!({"containerPort": 8000 + port, "hostPort": port});
                if !ip.is_empty() {
                    p["hostIP"] = json!(ip);
                }
                if !proto.is_empty() {
                    p["protocol"] = json!(proto);
                }
                p
            })
            .collect();
        pod(json!({"metadata": {"name": name, "uid": name}, "spec": {"containers": [{"name": "c", "ports": ps}]}}))
    }

    fn node_using(ports: &[(&str, &str, i32)]) -> NodeInfo {
        node_with_pods(json!({"metadata": {"name": "n"}}), vec![pod_ports("existing", ports)])
    }

    #[test]
    fn filter_table() {
        let cases: Vec<(&str, PodInfo, NodeInfo, bool)> = vec![
            ("free node", pod_ports("p", &[("", "", 8080)]), node_using(&[]), true),
            (
                "same tcp port",
                pod_ports("p", &[("127.0.0.1", "TCP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                false,
            ),
            (
                "other port",
                pod_ports("p", &[("127.0.0.1", "TCP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8081)]),
                true,
            ),
            (
                "other protocol",
                pod_ports("p", &[("127.0.0.1", "UDP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                true,
            ),
            (
                "other ip",
                pod_ports("p", &[("127.0.0.2", "TCP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                true,
            ),
            (
                "protocol defaults to TCP",
                pod_ports("p", &[("127.0.0.1", "", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                false,
            ),
            (
                "wildcard pod vs specific node ip",
                pod_ports("p", &[("", "TCP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                false,
            ),
            (
                "specific pod ip vs wildcard node",
                pod_ports("p", &[("127.0.0.1", "TCP", 8080)]),
                node_using(&[("0.0.0.0", "TCP", 8080)]),
                false,
            ),
            (
                "wildcard, other protocol",
                pod_ports("p", &[("0.0.0.0", "UDP", 8080)]),
                node_using(&[("127.0.0.1", "TCP", 8080)]),
                true,
            ),
            (
                "second port conflicts",
                pod_ports("p", &[("", "UDP", 9090), ("", "TCP", 8080)]),
                node_using(&[("10.0.0.1", "TCP", 8080)]),
                false,
            ),
        ];
        for (name, p, n, fits) in cases {
            let mut st = CycleState::new();
            let (res, s) = NodePorts.pre_filter(&mut st, &p, &Snapshot::default());
            assert!(res.is_none() && s.is_success(), "{name}: {s}");
            let st = NodePorts.filter(&st, &p, &n);
            if fits {
                assert!(st.is_success(), "{name}: {st}");
            } else {
                assert_eq!(st.code(), Code::Unschedulable, "{name}");
                assert_eq!(st.reasons(), [ERR_REASON.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn prefilter_skips_without_host_ports_and_reads_sidecars() {
        let none = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "ports": [{"containerPort": 80}]}]}}));
        let (_, s) = NodePorts.pre_filter(&mut CycleState::new(), &none, &Snapshot::default());
        assert_eq!(s.code(), Code::Skip);

        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [
                {"name": "init", "ports": [{"containerPort": 1, "hostPort": 1001}]},
                {"name": "sidecar", "restartPolicy": "Always", "ports": [{"containerPort": 2, "hostPort": 1002, "hostIP": "10.0.0.1", "protocol": "UDP"}]}
            ],
            "containers": [{"name": "c", "ports": [{"containerPort": 3, "hostPort": 1003}]}]}}));
        let got: Vec<(String, String, i32)> =
            pod_host_ports(&p).into_iter().map(|h| (h.ip, h.protocol, h.port)).collect();
        assert_eq!(
            got,
            [("10.0.0.1".to_string(), "UDP".to_string(), 1002), ("0.0.0.0".to_string(), "TCP".to_string(), 1003)],
            "plain init containers hold no port once they have run"
        );
    }

    #[test]
    fn filter_without_prefilter_is_an_error_and_events() {
        let p = pod_ports("p", &[("", "", 80)]);
        assert_eq!(NodePorts.filter(&CycleState::new(), &p, &node_using(&[])).code(), Code::Error);
        let ev = NodePorts.events_to_register();
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::AssignedPod, action::DELETE))));
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::Node, action::ADD))));
        assert!(!ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::Node, action::UPDATE_RESOURCES))));
    }
}
