//! PreScore, Score and NormalizeScore of the soft (`ScheduleAnyway`) constraints, as upstream's
//! `podtopologyspread/scoring.go`: PreScore counts the matching pods per domain (per node for the hostname key)
//! once, Score weighs a node's counts, NormalizeScore turns fewer pods into a higher score.

use std::sync::{Arc, PoisonError};

use super::common::{count_matching, included, missing, pod_constraints, SCHEDULE_ANYWAY};
use super::{Domains, NodeCounts, PodTopologySpread, LABEL_HOSTNAME};
use crate::framework::Snapshot;
use crate::framework::{CycleState, NodeInfo, NodeScore, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE};
use crate::plugins::node_affinity::RequiredNodeAffinity;

/// CycleState key of the PreScore data.
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// [`PreScoreState::raw`] of a feasible node lacking a topology key (scored 0).
const IGNORED: i64 = i64::MIN;
/// [`PreScoreState::raw`] of a node PreScore was not given.
const UNKNOWN: i64 = i64::MAX;

/// PreScore data: every feasible node's score before normalizing, by node id. Upstream keeps the counts per domain
/// and weighs them in Score; they depend on nothing Score adds, so each node's sum is taken once here.
#[derive(Debug, Clone)]
struct PreScoreState {
    /// By `NodeInfo::id`: the node's raw score, [`IGNORED`] or [`UNKNOWN`].
    raw: Vec<i64>,
}

impl PreScoreState {
    fn raw(&self, id: u32) -> i64 {
        self.raw.get(id as usize).copied().unwrap_or(UNKNOWN)
    }
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
        // hostname, their missing zone counted as the domain "").
        let require_all = !pod_constraints(pod).is_empty() || !self.system_defaulted;
        let is_host: Vec<bool> = constraints.iter().map(|c| c.topology_key == LABEL_HOSTNAME).collect();
        // Constraints with the same selector (the default ones) share the count of a node.
        let same_as: Vec<usize> = (0..constraints.len())
            .map(|i| (0..i).find(|&j| constraints[j].selector == constraints[i].selector).unwrap_or(i))
            .collect();
        let node_affinity = RequiredNodeAffinity::from_pod(&pod.pod);
        let tolerations = pod.tolerations();
        // A node's counts and domains depend only on its pods and labels, the pod's namespace and the selectors
        // and keys: kept per node while those hold, so a workload's next pod matches only the pods of the node
        // that changed, and sums its counts by domain number.
        let mut guard = self.scored.lock().unwrap_or_else(PoisonError::into_inner);
        guard.key(&pod.namespace, &constraints);
        let super::Matched { nodes: memo, domains: names } = &mut *guard;
        let empty = if require_all { Domains::MISSING } else { names.id("") };
        // A node lacking a key is left out unless spreading by the system defaults; then its missing value is the
        // domain "".
        let lacks_key = |counts: &[(u32, i64)]| require_all && counts.iter().any(|&(id, _)| id == Domains::MISSING);
        let domain = |id: u32| (if id == Domains::MISSING { empty } else { id }) as usize;
        let width = constraints.len();
        // Feasible nodes are the snapshot's; counting them in keeps a stray one from indexing past the end.
        let ids = snapshot.nodes().iter().chain(nodes).map(|n| n.id as usize + 1).max().unwrap_or(0);
        // Every node's counts by id (feasible ones are read again below), and each domain's sum over the nodes
        // the constraint includes.
        let mut by_id: Vec<(u32, i64)> = vec![(Domains::MISSING, 0); ids * width];
        let mut sums: Vec<Vec<i64>> = vec![Vec::new(); width];
        for node in snapshot.nodes() {
            let compute = || -> NodeCounts {
                let labels = node.labels();
                let mut counts: NodeCounts = Vec::with_capacity(width);
                for (i, c) in constraints.iter().enumerate() {
                    let id = match labels.get(&c.topology_key) {
                        None => Domains::MISSING,
                        Some(_) if is_host[i] => 0,
                        Some(v) => names.id(v),
                    };
                    let j = same_as[i];
                    let n = if j < i { counts[j].1 } else { count_matching(&node.pods, &c.selector, &pod.namespace) };
                    counts.push((id, n));
                }
                counts
            };
            memo.with(node, compute, |counts| {
                // An element-wise copy: a slice copy of a few elements is a memmove call per node.
                for (to, from) in by_id[node.id as usize * width..].iter_mut().zip(counts) {
                    *to = *from;
                }
                if lacks_key(counts) {
                    return;
                }
                let mut affinity_ok = None;
                for (i, c) in constraints.iter().enumerate() {
                    // Per-node counts (the hostname key) ignore the inclusion policies, as upstream's Score.
                    if is_host[i] {
                        continue;
                    }
                    let affinity_ok =
                        *affinity_ok.get_or_insert_with(|| node_affinity.matches(&node.name, node.labels()));
                    if !included(c, affinity_ok, node, tolerations) {
                        continue;
                    }
                    let id = domain(counts[i].0);
                    if sums[i].len() <= id {
                        sums[i].resize(id + 1, 0);
                    }
                    sums[i][id] += counts[i].1;
                }
            });
        }
        drop(guard);
        // The domains of the feasible nodes (an infeasible node's domain is counted, never scored) weigh each
        // constraint by `ln(domains + 2)`; for the hostname key every feasible node is a domain.
        let mut ignored = 0;
        let mut seen: Vec<Vec<bool>> = sums.iter().map(|s| vec![false; s.len()]).collect();
        let mut sizes = vec![0usize; width];
        for n in nodes {
            let counts = &by_id[n.id as usize * width..][..width];
            if lacks_key(counts) {
                ignored += 1;
                continue;
            }
            for i in (0..width).filter(|&i| !is_host[i]) {
                let id = domain(counts[i].0);
                if id >= seen[i].len() {
                    seen[i].resize(id + 1, false);
                }
                if !seen[i][id] {
                    seen[i][id] = true;
                    sizes[i] += 1;
                }
            }
        }
        let weights: Vec<f64> = (0..width)
            .map(|i| {
                let size = if is_host[i] { nodes.len() - ignored } else { sizes[i] };
                ((size + 2) as f64).ln()
            })
            .collect();
        let mut raw = vec![UNKNOWN; ids];
        for n in nodes {
            let counts = &by_id[n.id as usize * width..][..width];
            if lacks_key(counts) {
                raw[n.id as usize] = IGNORED;
                continue;
            }
            let mut score = 0f64;
            for (i, c) in constraints.iter().enumerate() {
                let (id, own) = counts[i];
                // A node lacking the key (spreading by the system defaults) adds nothing for it.
                if id == Domains::MISSING {
                    continue;
                }
                let cnt = if is_host[i] { own } else { sums[i].get(id as usize).copied().unwrap_or(0) };
                score += cnt as f64 * weights[i] + f64::from(c.max_skew - 1);
            }
            raw[n.id as usize] = score.round() as i64;
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { raw });
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(missing(PRE_SCORE_STATE_KEY));
        };
        match s.raw(node.id) {
            IGNORED => Ok(0),
            UNKNOWN => Err(Status::error(format!("node {:?} was not given to PreScore", node.name))),
            raw => Ok(raw),
        }
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else { return missing(PRE_SCORE_STATE_KEY) };
        let is_ignored = |id: u32| s.raw(id) == IGNORED;
        let (mut min, mut max) = (i64::MAX, 0i64);
        for sc in scores.iter().filter(|sc| !is_ignored(sc.id)) {
            min = min.min(sc.score);
            max = max.max(sc.score);
        }
        for sc in scores.iter_mut() {
            sc.score = if is_ignored(sc.id) {
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
        let by_foo = incoming(
            json!({"foo": ""}),
            vec![soft("zone", foo_sel.clone()), soft(LABEL_HOSTNAME, foo_sel.clone())],
            json!({}),
        );
        let by_bar = incoming(json!({"bar": ""}), vec![soft("zone", json!({"matchLabels": {"bar": ""}}))], json!({}));
        // The same selector by another key: each node's kept domains are of the key they were taken for.
        let foo_by_host = incoming(json!({"foo": ""}), vec![soft(LABEL_HOSTNAME, foo_sel.clone())], json!({}));
        let foo_by_zone = incoming(json!({"foo": ""}), vec![soft("zone", foo_sel)], json!({}));
        let kept = plugin(json!({}));
        let all = ["a", "b", "x", "y"];
        for p in [&by_foo, &by_bar, &foo_by_host, &foo_by_zone, &by_foo] {
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
