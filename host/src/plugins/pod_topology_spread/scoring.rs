//! PreScore, Score and NormalizeScore of the soft (`ScheduleAnyway`) constraints, as upstream's
//! `podtopologyspread/scoring.go`: PreScore counts the matching pods per domain (per node for the hostname key)
//! once, Score weighs a node's counts, NormalizeScore turns fewer pods into a higher score.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError};

use super::common::{count_matching, has_all_keys, included, missing, pod_constraints, Constraint, SCHEDULE_ANYWAY};
use super::{PodTopologySpread, LABEL_HOSTNAME};
use crate::framework::Snapshot;
use crate::framework::{CycleState, NodeInfo, NodeScore, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE};
use crate::plugins::node_affinity::RequiredNodeAffinity;

/// CycleState key of the PreScore data.
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// PreScore data: the soft constraints, the matching-pod counts and the weight of each constraint.
#[derive(Debug, Clone)]
struct PreScoreState {
    constraints: Vec<Constraint>,
    /// Feasible nodes lacking a topology key (scored 0).
    ignored: HashSet<String>,
    /// Per constraint: matching pods per domain for non-hostname keys; matching pods per node name (non-zero
    /// only) for the hostname key.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: `ln(domains + 2)`.
    weights: Vec<f64>,
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], snapshot: &Snapshot) -> Status {
        if snapshot.is_empty() {
            return Status::skip();
        }
        let constraints = match self.constraints(pod, SCHEDULE_ANYWAY, &snapshot.objects) {
            Ok(c) => c,
            Err(e) => return Status::error(format!("calculating preScoreState: {e}")),
        };
        if constraints.is_empty() {
            return Status::skip();
        }
        // Nodes must carry every key unless spreading by the system defaults (so zone-less nodes still spread by
        // hostname).
        let require_all = !pod_constraints(pod).is_empty() || !self.system_defaulted;
        let mut ignored = HashSet::new();
        let mut domains: Vec<HashMap<&str, i64>> = vec![HashMap::new(); constraints.len()];
        for n in nodes {
            let labels = n.labels();
            if require_all && !has_all_keys(labels, &constraints) {
                ignored.insert(n.name.clone());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.topology_key != LABEL_HOSTNAME {
                    domains[i].entry(labels.get(&c.topology_key).map_or("", String::as_str)).or_insert(0);
                }
            }
        }
        let weights = constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size =
                    if c.topology_key == LABEL_HOSTNAME { nodes.len() - ignored.len() } else { domains[i].len() };
                ((size + 2) as f64).ln()
            })
            .collect();
        // One pass over every node: domain counts for zone-like keys (all eligible nodes), per-node counts for the
        // hostname key (feasible nodes only). Constraints with the same selector (the default ones) share the
        // count of a node.
        let has_host = constraints.iter().any(|c| c.topology_key == LABEL_HOSTNAME);
        let feasible: HashSet<&str> = if has_host {
            nodes.iter().map(|n| n.name.as_str()).filter(|n| !ignored.contains(*n)).collect()
        } else {
            HashSet::new()
        };
        let same_as: Vec<usize> = (0..constraints.len())
            .map(|i| (0..i).find(|&j| constraints[j].selector == constraints[i].selector).unwrap_or(i))
            .collect();
        let mut host_counts: Vec<Vec<(&str, i64)>> = vec![Vec::new(); constraints.len()];
        if has_host || domains.iter().any(|d| !d.is_empty()) {
            let node_affinity = RequiredNodeAffinity::from_pod(&pod.pod);
            let tolerations = pod.tolerations();
            // A node's counts depend only on its pods, the pod's namespace and the selectors: kept per node while
            // those hold, so a workload's next pod matches only the pods of the node that changed.
            let mut memo = self.scored.lock().unwrap_or_else(PoisonError::into_inner);
            memo.key(
                |(ns, selectors)| *ns == pod.namespace && selectors.iter().eq(constraints.iter().map(|c| &c.selector)),
                || (pod.namespace.clone(), constraints.iter().map(|c| c.selector.clone()).collect()),
            );
            let count_all = |node: &NodeInfo| -> Vec<i64> {
                let mut counts = vec![0; constraints.len()];
                for i in 0..constraints.len() {
                    let j = same_as[i];
                    counts[i] = if j < i {
                        counts[j]
                    } else {
                        count_matching(&node.pods, &constraints[i].selector, &pod.namespace)
                    };
                }
                counts
            };
            for node in snapshot.nodes() {
                let labels = node.labels();
                if require_all && !has_all_keys(labels, &constraints) {
                    continue;
                }
                let affinity_ok = node_affinity.matches(&node.name, node.labels());
                memo.with(
                    node,
                    || count_all(node),
                    |counts| {
                        for (i, c) in constraints.iter().enumerate() {
                            if c.topology_key == LABEL_HOSTNAME {
                                // Per-node counts ignore the inclusion policies, as upstream's Score.
                                if counts[i] != 0
                                    && labels.contains_key(LABEL_HOSTNAME)
                                    && feasible.contains(node.name.as_str())
                                {
                                    host_counts[i].push((node.name.as_str(), counts[i]));
                                }
                                continue;
                            }
                            if !included(c, affinity_ok, node, tolerations) {
                                continue;
                            }
                            let v = labels.get(&c.topology_key).map_or("", String::as_str);
                            if let Some(cnt) = domains[i].get_mut(v) {
                                *cnt += counts[i];
                            }
                        }
                    },
                );
            }
        }
        let counts: Vec<HashMap<String, i64>> = domains
            .iter()
            .zip(&host_counts)
            .map(|(d, h)| d.iter().chain(h.iter().map(|(k, v)| (k, v))).map(|(k, v)| (k.to_string(), *v)).collect())
            .collect();
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { constraints, ignored, counts, weights });
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(missing(PRE_SCORE_STATE_KEY));
        };
        if !s.ignored.is_empty() && s.ignored.contains(&node.name) {
            return Ok(0);
        }
        let labels = node.labels();
        let mut score = 0f64;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(v) = labels.get(&c.topology_key) else { continue };
            let key = if c.topology_key == LABEL_HOSTNAME { node.name.as_str() } else { v.as_str() };
            let cnt = s.counts[i].get(key).copied().unwrap_or(0);
            score += cnt as f64 * s.weights[i] + f64::from(c.max_skew - 1);
        }
        Ok(score.round() as i64)
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else { return missing(PRE_SCORE_STATE_KEY) };
        let is_ignored = |name: &str| !s.ignored.is_empty() && s.ignored.contains(name);
        let (mut min, mut max) = (i64::MAX, 0i64);
        for sc in scores.iter().filter(|sc| !is_ignored(sc.name)) {
            min = min.min(sc.score);
            max = max.max(sc.score);
        }
        for sc in scores.iter_mut() {
            sc.score = if is_ignored(sc.name) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - sc.score) / max
            };
        }
        Status::success()
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::DO_NOT_SCHEDULE;
    use super::super::tests::{
        cluster, constraint, foo, incoming, node_json, objects, plugin, rs_owned, two_generations,
    };
    use super::super::{LABEL_HOSTNAME, LABEL_ZONE};
    use super::*;
    use crate::plugins::testutil::{node, node_with_pods};
    use serde_json::{json, Value};

    /// Runs PreScore, Score and NormalizeScore over `feasible`; None when PreScore skipped.
    fn scores(pl: &PodTopologySpread, p: &PodInfo, snap: &Snapshot, feasible: &[&str]) -> Option<Vec<i64>> {
        let nodes: Vec<Arc<NodeInfo>> = feasible.iter().map(|n| snap.get(n).unwrap().clone()).collect();
        let mut state = CycleState::new();
        let st = pl.pre_score(&mut state, p, &nodes, snap);
        if st.is_skip() {
            return None;
        }
        assert!(st.is_success(), "{st}");
        let mut out: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore { name: &n.name, id: n.id, score: pl.score(&state, p, n).unwrap() })
            .collect();
        assert!(pl.normalize_score(&state, p, &mut out).is_success());
        Some(out.into_iter().map(|s| s.score).collect())
    }

    /// PreScore's counts kept per node give the scores a fresh plugin gives, across pods of other selectors and
    /// namespaces and a node that changed.
    #[test]
    fn kept_per_node_counts_score_as_a_fresh_plugin() {
        let snaps = two_generations();
        let soft = |key: &str, selector: Value| {
            let mut c = constraint(1, key, SCHEDULE_ANYWAY, json!({}));
            c["labelSelector"] = selector;
            c
        };
        let foo_sel = json!({"matchLabels": {"foo": ""}});
        let by_foo =
            incoming(json!({"foo": ""}), vec![soft("zone", foo_sel.clone()), soft(LABEL_HOSTNAME, foo_sel)], json!({}));
        let by_bar = incoming(json!({"bar": ""}), vec![soft("zone", json!({"matchLabels": {"bar": ""}}))], json!({}));
        let kept = plugin(json!({}));
        let all = ["a", "b", "x", "y"];
        for p in [&by_foo, &by_bar, &by_foo] {
            for snap in &snaps {
                for _ in 0..2 {
                    assert_eq!(scores(&kept, p, snap, &all), scores(&plugin(json!({})), p, snap, &all));
                }
            }
        }
        assert_ne!(scores(&kept, &by_foo, &snaps[0], &all), scores(&kept, &by_foo, &snaps[1], &all));
    }

    #[test]
    fn score_table() {
        let soft = |skew: i32, key: &str| constraint(skew, key, SCHEDULE_ANYWAY, json!({}));
        let me = || json!({"foo": ""});
        let all = ["a", "b", "x", "y"];
        // a:2 b:1 x:0 y:3 pods; zones z1=3 z2=3.
        let host_pods = || {
            vec![
                ("a", foo("a1")),
                ("a", foo("a2")),
                ("b", foo("b1")),
                ("y", foo("y1")),
                ("y", foo("y2")),
                ("y", foo("y3")),
            ]
        };
        // z1=2 z2=1.
        let zone_pods = || vec![("a", foo("a1")), ("b", foo("b1")), ("x", foo("x1"))];
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, PodInfo, Vec<(&str, PodInfo)>, &[&str], &[&str], Option<Vec<i64>>)> = vec![
            (
                "no pods",
                incoming(me(), vec![soft(1, LABEL_HOSTNAME)], json!({})),
                vec![],
                &[],
                &all,
                Some(vec![100; 4]),
            ),
            // weight ln(6): raw 4, 2, 0, 5.
            (
                "hostname",
                incoming(me(), vec![soft(1, LABEL_HOSTNAME)], json!({})),
                host_pods(),
                &[],
                &all,
                Some(vec![20, 60, 100, 0]),
            ),
            // weight ln(4): raw 3, 1 (after rounding).
            (
                "zone",
                incoming(me(), vec![soft(1, "zone")], json!({})),
                zone_pods(),
                &[],
                &all,
                Some(vec![33, 33, 100, 100]),
            ),
            // maxSkew-1 added: raw 5, 3.
            (
                "zone maxSkew 3",
                incoming(me(), vec![soft(3, "zone")], json!({})),
                zone_pods(),
                &[],
                &all,
                Some(vec![60, 60, 100, 100]),
            ),
            (
                "zone, subset feasible: all nodes still counted",
                incoming(me(), vec![soft(1, "zone")], json!({})),
                zone_pods(),
                &[],
                &["a", "x"],
                Some(vec![33, 100]),
            ),
            // weight ln(4): raw 3, 1.
            (
                "hostname, subset feasible",
                incoming(me(), vec![soft(1, LABEL_HOSTNAME)], json!({})),
                host_pods(),
                &[],
                &["a", "b"],
                Some(vec![33, 100]),
            ),
            (
                "node without key is ignored",
                incoming(me(), vec![soft(1, "zone")], json!({})),
                zone_pods(),
                &["y"],
                &all,
                Some(vec![33, 33, 100, 0]),
            ),
            (
                "nodeAffinityPolicy Honor: excluded nodes' pods not counted",
                incoming(me(), vec![soft(1, "zone")], json!({"nodeSelector": {"zone": "z2"}})),
                zone_pods(),
                &[],
                &["x", "y"],
                Some(vec![100, 100]),
            ),
            (
                "hard constraints only: skip",
                incoming(me(), vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({}))], json!({})),
                zone_pods(),
                &[],
                &all,
                None,
            ),
            ("no constraints, no owner: skip", incoming(me(), vec![], json!({})), zone_pods(), &[], &all, None),
        ];
        let pl = plugin(json!({}));
        for (name, p, pods, no_zone, feasible, want) in cases {
            let snap = cluster(pods, no_zone, &[]);
            assert_eq!(scores(&pl, &p, &snap, feasible), want, "{name}");
        }
    }

    #[test]
    fn system_default_spreading_tolerates_nodes_without_zone() {
        let rs = json!({"replicaSets": [{"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}]});
        let web = |n: &str| rs_owned(n, json!({"app": "web"}));
        let p = rs_owned("in", json!({"app": "web"}));
        let snap_with = |objs: Value| {
            let mut s = Snapshot::from_nodes(vec![
                node_with_pods(
                    json!({"metadata": {"name": "a", "labels": {LABEL_HOSTNAME: "a", LABEL_ZONE: "z1"}}}),
                    vec![web("a1"), web("a2")],
                ),
                node(node_json("b", None)),
            ]);
            s.objects = objects(objs);
            s
        };
        // hostname (maxSkew 3) and zone (maxSkew 5), both weight ln(4); b has no zone: raw a=12, b=2.
        assert_eq!(scores(&plugin(json!({})), &p, &snap_with(rs.clone()), &["a", "b"]), Some(vec![16, 100]));
        assert_eq!(scores(&plugin(json!({})), &p, &snap_with(json!({})), &["a", "b"]), None, "no owner object");
        // The same constraints given as a List require every key: b is ignored.
        let list = json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 5, "topologyKey": LABEL_ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]});
        let mut snap = Snapshot::from_nodes(vec![
            node_with_pods(
                json!({"metadata": {"name": "a", "labels": {LABEL_HOSTNAME: "a", LABEL_ZONE: "z1"}}}),
                vec![web("a1")],
            ),
            node(json!({"metadata": {"name": "c", "labels": {LABEL_HOSTNAME: "c", LABEL_ZONE: "z1"}}})),
            node(node_json("b", None)),
        ]);
        snap.objects = objects(rs);
        // a: host 1*ln(4)+2, zone 1*ln(3)+4 -> 8; c: 2 + 1*ln(3)+4 -> 7.
        assert_eq!(scores(&plugin(list), &p, &snap, &["a", "c", "b"]), Some(vec![87, 100, 0]));
    }
}
