//! TaintToleration: a pod fits only nodes whose NoSchedule/NoExecute taints it tolerates, and prefers nodes
//! with fewer untolerated PreferNoSchedule taints. The toleration matching helpers here are shared with other
//! plugins (NodeUnschedulable).

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo,
    PreScorePlugin, ScorePlugin, Status,
};
use crate::plugins::helper;
use std::sync::Arc;

/// The plugin's name in profiles.
pub const NAME: &str = "TaintToleration";
/// Taint effect: do not schedule new pods.
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect: avoid scheduling new pods when possible.
pub const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
/// Taint effect: do not schedule, and evict running pods that do not tolerate it.
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
/// Toleration operator matching any value of the key.
pub const OP_EXISTS: &str = "Exists";
/// Toleration operator matching one value (also the meaning of an empty operator).
pub const OP_EQUAL: &str = "Equal";

/// True when the toleration tolerates a taint given by its parts, as upstream's `Toleration.ToleratesTaint`:
/// an empty toleration effect matches every effect, an empty key matches every key, an empty operator means
/// `Equal` (values compared), `Exists` matches any value, and any other operator matches nothing.
pub fn toleration_tolerates(t: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    let t_effect = t.effect.as_deref().unwrap_or("");
    if !t_effect.is_empty() && t_effect != effect {
        return false;
    }
    let t_key = t.key.as_deref().unwrap_or("");
    if !t_key.is_empty() && t_key != key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | OP_EQUAL => t.value.as_deref().unwrap_or("") == value,
        OP_EXISTS => true,
        _ => false,
    }
}

/// True when the toleration tolerates the taint.
pub fn toleration_tolerates_taint(t: &Toleration, taint: &Taint) -> bool {
    toleration_tolerates(t, &taint.key, taint.value.as_deref().unwrap_or(""), &taint.effect)
}

/// True when any of the tolerations tolerates the taint (upstream `TolerationsTolerateTaint`).
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| toleration_tolerates_taint(t, taint))
}

/// True for taints that keep pods off a node: NoSchedule and NoExecute (upstream `DoNotScheduleTaintsFilterFunc`).
pub fn is_do_not_schedule_taint(taint: &Taint) -> bool {
    taint.effect == EFFECT_NO_SCHEDULE || taint.effect == EFFECT_NO_EXECUTE
}

/// The first taint passing `include` that no toleration tolerates (upstream `FindMatchingUntoleratedTaint`).
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    include: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().find(|taint| include(taint) && !tolerations_tolerate_taint(tolerations, taint))
}

/// The Filter rejection reason for an untolerated taint (upstream v1.34's `ErrReasonNotMatch`): the taint itself is
/// not named, so nodes with different taints count as one reason in `0/N nodes are available`.
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// The tolerations PreScore keeps: effect PreferNoSchedule or empty (an empty effect matches every effect).
#[derive(Debug, Clone, Default)]
struct PreScoreState {
    tolerations: Vec<Toleration>,
}

/// The TaintToleration plugin.
#[derive(Debug, Default)]
pub struct TaintToleration;

impl TaintToleration {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<TaintToleration, String> {
        Ok(TaintToleration)
    }
}

impl Plugin for TaintToleration {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_TAINT),
            // A pending pod gaining a toleration (upstream UpdatePodToleration).
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE_TAINT),
        ]
    }
    crate::serves!(filter, pre_score, score, sign);
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match find_matching_untolerated_taint(node.taints(), pod.tolerations(), is_do_not_schedule_taint) {
            None => Status::success(),
            Some(_) => Status::unresolvable(ERR_REASON_UNTOLERATED),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>], _s: &Snapshot) -> Status {
        let tolerations = pod
            .tolerations()
            .iter()
            .filter(|t| matches!(t.effect.as_deref(), None | Some("") | Some(EFFECT_PREFER_NO_SCHEDULE)))
            .cloned()
            .collect();
        state.write(NAME, PreScoreState { tolerations });
        Status::success()
    }
}

/// The number of PreferNoSchedule taints on the node that the tolerations do not tolerate.
fn intolerable_prefer_no_schedule(tolerations: &[Toleration], node: &NodeInfo) -> i64 {
    node.taints()
        .iter()
        .filter(|t| t.effect == EFFECT_PREFER_NO_SCHEDULE && !tolerations_tolerate_taint(tolerations, t))
        .count() as i64
}

impl ScorePlugin for TaintToleration {
    /// Reads the cycle state once per batch, not once per node.
    fn score_nodes(&self, state: &CycleState, _pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        let Some(s) = state.read::<PreScoreState>(NAME) else {
            return Status::error(format!("failed to read {NAME:?} from cycleState"));
        };
        for (n, o) in nodes.iter().zip(out.iter_mut()) {
            *o = intolerable_prefer_no_schedule(&s.tolerations, n);
        }
        Status::success()
    }

    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(NAME) else {
            return Err(Status::error(format!("failed to read {NAME:?} from cycleState")));
        };
        Ok(intolerable_prefer_no_schedule(&s.tolerations, node))
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        helper::normalize_to_max(true, scores)
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

impl crate::framework::SignPlugin for TaintToleration {
    /// As upstream: the tolerations.
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
    use crate::plugins::testutil::{node, pod};
    use serde_json::{json, Value};

    fn tol(v: Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }
    fn taint(v: Value) -> Taint {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn toleration_matching_table() {
        let t = taint(json!({"key": "foo", "value": "bar", "effect": "NoSchedule"}));
        let cases = [
            (
                "equal key value effect",
                json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}),
                true,
            ),
            ("empty operator means Equal", json!({"key": "foo", "value": "bar", "effect": "NoSchedule"}), true),
            (
                "different value",
                json!({"key": "foo", "operator": "Equal", "value": "baz", "effect": "NoSchedule"}),
                false,
            ),
            ("Exists ignores value", json!({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}), true),
            ("different key", json!({"key": "other", "operator": "Exists"}), false),
            ("empty effect matches all", json!({"key": "foo", "operator": "Exists"}), true),
            ("different effect", json!({"key": "foo", "operator": "Exists", "effect": "NoExecute"}), false),
            ("empty key with Exists tolerates everything", json!({"operator": "Exists"}), true),
            ("empty key Exists, other effect", json!({"operator": "Exists", "effect": "PreferNoSchedule"}), false),
            ("unknown operator", json!({"key": "foo", "operator": "Gt", "value": "bar"}), false),
        ];
        for (name, tv, want) in cases {
            assert_eq!(toleration_tolerates_taint(&tol(tv), &t), want, "{name}");
        }
        let no_value = taint(json!({"key": "k", "effect": "NoSchedule"}));
        assert!(toleration_tolerates_taint(&tol(json!({"key": "k", "effect": "NoSchedule"})), &no_value));
        assert!(!toleration_tolerates_taint(&tol(json!({"key": "k", "value": "v"})), &no_value));
    }

    #[test]
    fn filter_table() {
        let cases = [
            ("no taints", json!([]), json!([]), None),
            (
                "untolerated NoSchedule",
                json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
                json!([]),
                Some(ERR_REASON_UNTOLERATED),
            ),
            (
                "tolerated NoSchedule",
                json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
                json!([{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}]),
                None,
            ),
            (
                "toleration with other value",
                json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
                json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]),
                Some(ERR_REASON_UNTOLERATED),
            ),
            (
                "Exists toleration",
                json!([{"key": "foo", "value": "bar", "effect": "NoSchedule"}]),
                json!([{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}]),
                None,
            ),
            (
                "PreferNoSchedule never filters",
                json!([{"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}]),
                json!([]),
                None,
            ),
            (
                "NoExecute filters",
                json!([
                    {"key": "a", "value": "1", "effect": "NoSchedule"},
                    {"key": "b", "value": "2", "effect": "NoExecute"},
                    {"key": "c", "value": "3", "effect": "NoSchedule"}
                ]),
                json!([{"key": "a", "operator": "Exists"}]),
                Some(ERR_REASON_UNTOLERATED),
            ),
            (
                "taint without value",
                json!([{"key": "gpu", "effect": "NoSchedule"}]),
                json!([]),
                Some(ERR_REASON_UNTOLERATED),
            ),
        ];
        for (name, taints, tols, want) in cases {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tols}}));
            let n = node(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}));
            let st = TaintToleration.filter(&CycleState::new(), &p, &n);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(r) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.reasons(), [r.to_string()], "{name}");
                }
            }
        }
    }

    /// Upstream v1.34 names no taint in the reason (found by the parity harness: we wrote `{gpu: true}` and
    /// `{maintenance: soon}` where kube-scheduler counted `6 node(s) had untolerated taint(s)`), so nodes with
    /// different taints are one count in `0/N nodes are available`.
    #[test]
    fn untolerated_taints_are_one_reason_whatever_the_taint() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        let reasons: Vec<Vec<String>> = [("gpu", "true", "NoSchedule"), ("maintenance", "soon", "NoExecute")]
            .iter()
            .map(|(k, v, e)| {
                let n =
                    node(json!({"metadata": {"name": k}, "spec": {"taints": [{"key": k, "value": v, "effect": e}]}}));
                TaintToleration.filter(&CycleState::new(), &p, &n).reasons().to_vec()
            })
            .collect();
        assert_eq!(reasons[0], reasons[1]);
        assert_eq!(reasons[0], [ERR_REASON_UNTOLERATED.to_string()]);
    }

    fn run_score(tols: Value, nodes: &[Value]) -> Vec<i64> {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tols}}));
        let nodes: Vec<NodeInfo> = nodes
            .iter()
            .enumerate()
            .map(|(i, t)| node(json!({"metadata": {"name": format!("n{i}")}, "spec": {"taints": t}})))
            .collect();
        let mut state = CycleState::new();
        let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        assert!(TaintToleration.pre_score(&mut state, &p, &arcs, &Snapshot::default()).is_success());
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore { name: &n.name, id: n.id, score: TaintToleration.score(&state, &p, n).unwrap() })
            .collect();
        assert!(TaintToleration.normalize_score(&state, &p, &mut scores).is_success());
        scores.into_iter().map(|s| s.score).collect()
    }

    #[test]
    fn score_table() {
        let pref = |k: &str, v: &str| json!({"key": k, "value": v, "effect": "PreferNoSchedule"});
        // Tolerated taints count for nothing; the node with the most untolerated PreferNoSchedule taints scores 0.
        let got = run_score(
            json!([
                {"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"},
                {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "PreferNoSchedule"}
            ]),
            &[
                json!([]),
                json!([pref("foo", "bar"), pref("cpu-type", "arm64")]),
                json!([pref("foo", "bar"), pref("cpu-type", "x86")]),
            ],
        );
        assert_eq!(got, [100, 100, 0]);
        // Only PreferNoSchedule taints count; NoSchedule ones are the filter's business.
        let got = run_score(
            json!([]),
            &[
                json!([{"key": "a", "value": "1", "effect": "NoSchedule"}]),
                json!([pref("a", "1")]),
                json!([pref("a", "1"), pref("b", "2")]),
            ],
        );
        assert_eq!(got, [100, 50, 0]);
        // A toleration with empty effect tolerates PreferNoSchedule; one for NoSchedule does not.
        let got = run_score(
            json!([{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists", "effect": "NoSchedule"}]),
            &[json!([pref("a", "1")]), json!([pref("b", "2")])],
        );
        assert_eq!(got, [100, 0]);
        // No untolerated taint anywhere: everyone gets the maximum.
        assert_eq!(run_score(json!([]), &[json!([]), json!([])]), [100, 100]);
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        let p = pod(json!({"metadata": {"name": "p"}}));
        let n = node(json!({"metadata": {"name": "n"}}));
        assert_eq!(TaintToleration.score(&CycleState::new(), &p, &n).unwrap_err().code(), Code::Error);
        assert!(TaintToleration.has_normalize());
    }
}
