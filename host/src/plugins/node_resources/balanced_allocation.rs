//! NodeResourcesBalancedAllocation, as upstream's `noderesources/balanced_allocation.go` (v1.36 on): favours nodes
//! whose resource utilizations the pod brings closer together. A node's balance is (1 - standard deviation of the
//! utilization fractions) × 100; the score is 50 + (50 + balance with the pod - balance without it) / 2. Plain
//! requests are used (not the non-zero defaults), and best-effort pods (requesting none of the scored resources)
//! are skipped.

use std::sync::Arc;

use serde::Deserialize;

use super::resource_allocation::{default_resources, ResourceAllocationScorer, ResourceSpec};
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    ClusterEvent, CycleState, NodeInfo, Plugin, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};
use crate::plugins::helper::{aggregate, decode, invalid, ArgsError, FieldError};

/// The plugin's name in profiles.
pub const NAME: &str = "NodeResourcesBalancedAllocation";
/// CycleState key of the PreScore data (the pod's requests of the scored resources).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

/// `NodeResourcesBalancedAllocationArgs`, as in the scheduler configuration (camelCase).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Resources to balance (cpu and memory when empty); every weight must be 1.
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default)]
    _kind: Option<String>,
}

/// The NodeResourcesBalancedAllocation plugin.
#[derive(Debug)]
pub struct NodeResourcesBalancedAllocation {
    scorer: ResourceAllocationScorer<true>,
}

impl NodeResourcesBalancedAllocationArgs {
    /// Decodes the args, applies upstream's defaults (cpu and memory; weight 0 means 1) and checks them as
    /// upstream's `ValidateNodeResourcesBalancedAllocationArgs`.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<NodeResourcesBalancedAllocationArgs, ArgsError> {
        let mut a: NodeResourcesBalancedAllocationArgs = decode(args)?;
        if a.resources.is_empty() {
            a.resources = default_resources();
        }
        for r in &mut a.resources {
            if r.weight == 0 {
                r.weight = 1;
            }
        }
        let mut errs = Vec::new();
        for (i, r) in a.resources.iter().enumerate() {
            if a.resources[..i].iter().any(|o| o.name == r.name) {
                errs.push(FieldError::new(format!("resources[{i}].name"), format!("Duplicate value: {:?}", r.name)));
            }
            if r.weight != 1 {
                errs.push(invalid(&format!("resources[{i}].weight"), r.weight, "must be 1"));
            }
        }
        aggregate(errs).map(|()| a)
    }
}

impl NodeResourcesBalancedAllocation {
    /// Builds the plugin from `NodeResourcesBalancedAllocationArgs` (defaulted and validated as upstream).
    pub fn new(
        args: Option<&serde_json::Value>,
        _ctx: &PluginContext,
    ) -> Result<NodeResourcesBalancedAllocation, String> {
        let args = NodeResourcesBalancedAllocationArgs::parse(args).map_err(|e| format!("{NAME} args: {e}"))?;
        // Plain requests: best-effort pods are skipped, not counted at the defaults.
        Ok(NodeResourcesBalancedAllocation {
            scorer: ResourceAllocationScorer::new(&args.resources, PRE_SCORE_STATE_KEY),
        })
    }

    /// Calls `f` with the utilization fraction (capped at 1) of each scored resource the node offers, counting
    /// the pod's requests when `with_pod` and the node's alone otherwise. The same resources take part either way.
    #[inline(always)]
    fn for_each_fraction(&self, node: &NodeInfo, pod_requests: &[i64], with_pod: bool, mut f: impl FnMut(f64)) {
        self.scorer.for_each_allocation(node, pod_requests, |_, alloc, requested, req| {
            let used = if with_pod { requested } else { requested - req };
            f((used as f64 / alloc as f64).min(1.0))
        });
    }

    /// The balanced score of a pod that requests at least one scored resource. Since v1.36 upstream scores how
    /// much the pod improves the node's balance rather than the balance it leaves: both balances lie in [50, 100],
    /// so their difference in [-50, 50] is brought back to [50, 100], 75 meaning "no change".
    #[inline(always)]
    fn balanced(&self, node: &NodeInfo, pod_requests: &[i64]) -> i64 {
        let with_pod = self.balance(node, pod_requests, true);
        let without_pod = self.balance(node, pod_requests, false);
        MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
    }

    /// Upstream's `balancedResourceScore`, computed without allocating: a first pass for the count and mean, a
    /// second for the variance when more than two resources take part. (1 - standard deviation) × 100.
    #[inline(always)]
    fn balance(&self, node: &NodeInfo, pod_requests: &[i64], with_pod: bool) -> i64 {
        let (mut n, mut total, mut first) = (0usize, 0.0f64, [0.0f64; 2]);
        self.for_each_fraction(node, pod_requests, with_pod, |f| {
            if n < 2 {
                first[n] = f;
            }
            total += f;
            n += 1;
        });
        let std = match n {
            2 => ((first[0] - first[1]) / 2.0).abs(),
            n if n > 2 => {
                let mean = total / n as f64;
                let mut sum = 0.0f64;
                self.for_each_fraction(node, pod_requests, with_pod, |f| sum += (f - mean) * (f - mean));
                (sum / n as f64).sqrt()
            }
            _ => 0.0,
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }

    /// The score of any pod: one requesting none of the resources scores 0, as upstream's Score does when PreScore
    /// (which skips such pods) did not run.
    fn score_with(&self, node: &NodeInfo, pod_requests: &[i64]) -> i64 {
        if pod_requests.iter().all(|&r| r == 0) {
            return 0;
        }
        self.balanced(node, pod_requests)
    }
}

impl Plugin for NodeResourcesBalancedAllocation {
    fn name(&self) -> &str {
        NAME
    }
    /// A score plugin rejects no pod, so no event can make one schedulable.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }
    crate::serves!(pre_score, score, sign);
}

impl PreScorePlugin for NodeResourcesBalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        _snapshot: &Snapshot,
    ) -> Status {
        let reqs = self.scorer.pod_requests(pod);
        if reqs.iter().all(|&r| r == 0) {
            // Best-effort pods would all pile onto the same node; upstream skips them.
            return Status::skip();
        }
        self.scorer.write_pre_score(state, reqs);
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesBalancedAllocation {
    /// Reads the cycle state once per batch, not once per node.
    fn score_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        // The pod's requests do not change across the batch: its "requests nothing" test is made once.
        let reqs = self.scorer.requests(state, pod);
        if reqs.iter().all(|&r| r == 0) {
            out.fill(0);
            return Status::success();
        }
        for (n, o) in nodes.iter().zip(out.iter_mut()) {
            *o = self.balanced(n, &reqs);
        }
        Status::success()
    }

    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(self.score_with(node, &self.scorer.requests(state, pod)))
    }
}

impl crate::framework::SignPlugin for NodeResourcesBalancedAllocation {
    /// As upstream: the pod's requests, as NodeResourcesFit signs them.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        super::sign_requests(pod, snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node_with_pods, pod};
    use serde_json::{json, Value};

    fn plugin(args: Value) -> NodeResourcesBalancedAllocation {
        NodeResourcesBalancedAllocation::new(Some(&args), &ctx()).unwrap()
    }

    fn pod_req(name: &str, req: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "uid": name}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": req}}]}}))
    }

    fn node(alloc: Value, pods: Vec<PodInfo>) -> NodeInfo {
        node_with_pods(json!({"metadata": {"name": "n"}, "status": {"allocatable": alloc}}), pods)
    }

    /// Runs PreScore then Score; None when PreScore skips.
    fn run(pl: &NodeResourcesBalancedAllocation, p: &PodInfo, n: &NodeInfo) -> Option<i64> {
        let mut st = CycleState::new();
        let s = pl.pre_score(&mut st, p, &[], &Snapshot::default());
        let without = pl.score(&CycleState::new(), p, n).unwrap();
        if s.code() == Code::Skip {
            assert_eq!(without, 0, "best-effort pods score 0 without PreScore");
            return None;
        }
        assert!(s.is_success(), "{s}");
        let with_state = pl.score(&st, p, n).unwrap();
        assert_eq!(with_state, without, "score without PreScore state must agree");
        Some(with_state)
    }

    #[test]
    fn score_table() {
        let three = json!({"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
            {"name": "example.com/gpu", "weight": 1}]});
        let cases: Vec<(&str, Value, PodInfo, NodeInfo, Option<i64>)> = vec![
            // Upstream's "differently sized nodes": 0.75 and 0.5 -> std 0.125 -> 87.
            (
                "cpu 3/4, memory 1/2",
                json!({}),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000"})),
                node(json!({"cpu": "4000m", "memory": "10000"}), vec![]),
                Some(68),
            ),
            (
                "perfectly balanced",
                json!({}),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000"})),
                node(json!({"cpu": "6000m", "memory": "10000"}), vec![]),
                Some(75),
            ),
            // Existing pods count: cpu (1000+3000)/4000 = 1, memory (2000+5000)/10000 = 0.7 -> std 0.15 -> 85;
            // without the pod 0.25 and 0.2 -> 97; 50 + (50 + 85 - 97) / 2 = 69.
            (
                "existing pod counted",
                json!({}),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000"})),
                node(
                    json!({"cpu": "4000m", "memory": "10000"}),
                    vec![pod_req("e", json!({"cpu": "1000m", "memory": "2000"}))],
                ),
                Some(69),
            ),
            // Fractions are capped at 1: cpu 6000/4000 -> 1, memory 0.5 -> std 0.25 -> 75; 50 + (50 + 75 - 100) / 2.
            (
                "fraction capped",
                json!({}),
                pod_req("p", json!({"cpu": "6000m", "memory": "5000"})),
                node(json!({"cpu": "4000m", "memory": "10000"}), vec![]),
                Some(62),
            ),
            // Plain requests, not non-zero defaults: a best-effort pod on the node adds nothing, so 0.5/0.5 -> 100
            // before and after -> 75 (with the 100m/200Mi defaults the balance would improve).
            (
                "existing best-effort pod adds nothing",
                json!({}),
                pod_req("p", json!({"cpu": "2000m", "memory": "5000"})),
                node(json!({"cpu": "4000m", "memory": "10000"}), vec![pod_req("e", json!({}))]),
                Some(75),
            ),
            // Three resources 0.75, 0.5, 0.25: mean 0.5, variance 0.125/3, std 0.2041 -> 79; 50 + (50 + 79 - 100) / 2.
            (
                "three resources",
                three.clone(),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000", "example.com/gpu": "1"})),
                node(json!({"cpu": "4000m", "memory": "10000", "example.com/gpu": "4"}), vec![]),
                Some(64),
            ),
            // The gpu is not requested, so it is left out: back to the two-resource 68.
            (
                "unrequested extended resource left out",
                three.clone(),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000"})),
                node(json!({"cpu": "4000m", "memory": "10000", "example.com/gpu": "4"}), vec![]),
                Some(68),
            ),
            // Only one resource offered by the node: std 0 before and after -> 75.
            (
                "single resource",
                json!({}),
                pod_req("p", json!({"cpu": "3000m", "memory": "5000"})),
                node(json!({"cpu": "4000m"}), vec![]),
                Some(75),
            ),
            (
                "best-effort pod skipped",
                json!({}),
                pod_req("p", json!({})),
                node(json!({"cpu": "4000m", "memory": "10000"}), vec![]),
                None,
            ),
            (
                "pod requesting only unscored resources skipped",
                json!({}),
                pod_req("p", json!({"example.com/gpu": "1"})),
                node(json!({"cpu": "4000m", "memory": "10000", "example.com/gpu": "4"}), vec![]),
                None,
            ),
        ];
        for (name, args, p, n, want) in cases {
            assert_eq!(run(&plugin(args), &p, &n), want, "{name}");
        }
    }

    /// v1.36's formula prefers the node the pod balances: a (4 CPU / 4Gi, empty) is balanced by the pod to 87 from
    /// 100 -> 68; b (8 CPU / 8Gi, 3Gi requested) from 81 to 75 -> 72. The v1.34 formula (the balance left) chose a.
    #[test]
    fn the_node_whose_balance_the_pod_improves_wins() {
        let pl = plugin(json!({}));
        let p = pod_req("p", json!({"cpu": "1", "memory": "2Gi"}));
        let a = node(json!({"cpu": "4", "memory": "4Gi"}), vec![]);
        let b = node(json!({"cpu": "8", "memory": "8Gi"}), vec![pod_req("e", json!({"memory": "3Gi"}))]);
        assert_eq!((run(&pl, &p, &a), run(&pl, &p, &b)), (Some(68), Some(72)));
    }

    #[test]
    fn args() {
        let pl = NodeResourcesBalancedAllocation::new(None, &ctx()).unwrap();
        assert_eq!(pl.scorer.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["cpu", "memory"]);
        let pl = plugin(json!({"resources": [{"name": "cpu"}, {"name": "example.com/gpu", "weight": 1}]}));
        assert_eq!(pl.scorer.resources.len(), 2);
        let errs: Vec<(Value, &str)> = vec![
            (json!({"resources": [{"name": "cpu", "weight": 2}]}), "resources[0].weight: Invalid value: 2: must be 1"),
            (
                json!({"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]}),
                "resources[1].name: Duplicate value: \"cpu\"",
            ),
            (json!({"resource": []}), "unknown field"),
        ];
        for (args, want) in errs {
            let err = NodeResourcesBalancedAllocation::new(Some(&args), &ctx()).unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
        }
        assert!(plugin(json!({})).events_to_register().is_empty());
    }
}
