//! PreFilter, Filter and the AddPod/RemovePod updates of the hard (`DoNotSchedule`) constraints, as upstream's
//! `podtopologyspread/filtering.go`: PreFilter counts the matching pods per domain once, Filter compares a node's
//! domain against the global minimum.

use std::sync::{Arc, PoisonError};

use rustc_hash::FxHashMap;

use super::common::{count_matching, has_all_keys, included, missing, Constraint, DO_NOT_SCHEDULE};
use super::{NodeCounts, PodTopologySpread, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};
use crate::framework::Snapshot;
use crate::framework::{CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterPlugin, PreFilterResult, Status};
use crate::plugins::node_affinity::RequiredNodeAffinity;

/// CycleState key of the PreFilter data.
const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// The two domains with the fewest matching pods, as upstream's critical paths: the first always holds the
/// minimum; the second is only an upper bound after updates.
#[derive(Debug, Clone, PartialEq)]
struct CriticalPaths<S> {
    paths: [(S, i64); 2],
}

impl<S: PartialEq + Default> CriticalPaths<S> {
    fn new() -> Self {
        CriticalPaths { paths: [(S::default(), i32::MAX as i64), (S::default(), i32::MAX as i64)] }
    }

    fn update(&mut self, value: S, num: i64) {
        let p = &mut self.paths;
        let i = if value == p[0].0 {
            Some(0)
        } else if value == p[1].0 {
            Some(1)
        } else {
            None
        };
        match i {
            Some(i) => {
                p[i].1 = num;
                if p[0].1 > p[1].1 {
                    p.swap(0, 1);
                }
            }
            None => {
                if num < p[0].1 {
                    p.swap(0, 1);
                    p[0] = (value, num);
                } else if num < p[1].1 {
                    p[1] = (value, num);
                }
            }
        }
    }

    fn min(&self) -> i64 {
        self.paths[0].1
    }
}

/// PreFilter data: the hard constraints and the matching-pod counts per domain.
#[derive(Debug, Clone)]
struct PreFilterState {
    constraints: Arc<Vec<Constraint>>,
    /// Whether the incoming pod matches each constraint's selector.
    self_match: Arc<Vec<bool>>,
    /// The incoming pod's required node affinity (for add_pod/remove_pod).
    node_affinity: Arc<RequiredNodeAffinity>,
    /// Per constraint: the critical paths.
    paths: Vec<CriticalPaths<String>>,
    /// Per constraint: matching pods per domain (domains with no matching pod are absent).
    counts: Vec<FxHashMap<String, i64>>,
    /// Per constraint: the number of eligible domains.
    domains: Vec<usize>,
}

impl PreFilterState {
    /// Counts `updated` (a pod in `pod`'s namespace on `node`) `delta` more times where it matches.
    fn update_with_pod(&mut self, updated: &PodInfo, pod: &PodInfo, node: &NodeInfo, delta: i64) {
        if updated.namespace != pod.namespace || !has_all_keys(node.labels(), &self.constraints) {
            return;
        }
        let affinity_ok = self.node_affinity.matches(&node.name, node.labels());
        let tolerations = pod.tolerations();
        for (i, c) in self.constraints.iter().enumerate() {
            if !c.selector.matches(updated.labels()) || !included(c, affinity_ok, node, tolerations) {
                continue;
            }
            let v = &node.labels()[&c.topology_key];
            let n = match self.counts[i].get_mut(v.as_str()) {
                Some(n) => {
                    *n += delta;
                    *n
                }
                None => {
                    self.counts[i].insert(v.clone(), delta);
                    delta
                }
            };
            if n == 0 {
                self.counts[i].remove(v.as_str());
            }
            self.paths[i].update(v.clone(), n);
        }
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let constraints = match self.constraints(pod, DO_NOT_SCHEDULE, &snapshot.objects) {
            Ok(c) => c,
            Err(e) => return (None, Status::error(format!("get constraints from pod: {e}"))),
        };
        if constraints.is_empty() {
            return (None, Status::skip());
        }
        let node_affinity = RequiredNodeAffinity::from_pod(&pod.pod);
        let tolerations = pod.tolerations();
        // A node's counts and domains depend only on its pods and labels, the pod's namespace and the constraints'
        // selectors and keys: kept per node while those hold, so a workload's next pod matches only the pods of
        // the node that changed, and sums its counts by domain number.
        let mut guard = self.matched.lock().unwrap_or_else(PoisonError::into_inner);
        guard.key(&pod.namespace, &constraints);
        let super::Matched { nodes: memo, domains: names } = &mut *guard;
        // Per constraint: each domain's sum, in the order first seen (deterministic critical paths), and where each
        // domain number sits in it.
        let mut sums: Vec<Vec<(u32, i64)>> = vec![Vec::new(); constraints.len()];
        let mut at: Vec<Vec<u32>> = vec![Vec::new(); constraints.len()];
        for node in snapshot.nodes() {
            let compute = || -> NodeCounts {
                let labels = node.labels();
                if !has_all_keys(labels, &constraints) {
                    return Vec::new();
                }
                let count = |c: &Constraint| count_matching(&node.pods, &c.selector, &pod.namespace);
                constraints.iter().map(|c| (names.id(&labels[&c.topology_key]), count(c))).collect()
            };
            memo.with(node, compute, |n| {
                if n.is_empty() {
                    return;
                }
                let affinity_ok = node_affinity.matches(&node.name, node.labels());
                for (i, c) in constraints.iter().enumerate() {
                    if !included(c, affinity_ok, node, tolerations) {
                        continue;
                    }
                    let (id, count) = (n[i].0 as usize, n[i].1);
                    let (sums, at) = (&mut sums[i], &mut at[i]);
                    if at.len() <= id {
                        at.resize(id + 1, u32::MAX);
                    }
                    if at[id] == u32::MAX {
                        at[id] = sums.len() as u32;
                        sums.push((id as u32, 0));
                    }
                    sums[at[id] as usize].1 += count;
                }
            });
        }
        let mut s = PreFilterState {
            self_match: Arc::new(constraints.iter().map(|c| c.selector.matches(pod.labels())).collect()),
            constraints: Arc::new(constraints),
            node_affinity: Arc::new(node_affinity),
            paths: Vec::with_capacity(sums.len()),
            counts: Vec::with_capacity(sums.len()),
            domains: sums.iter().map(Vec::len).collect(),
        };
        for d in &sums {
            let mut paths = CriticalPaths::<&str>::new();
            for &(id, n) in d {
                paths.update(&names.values[id as usize], n);
            }
            let [(v0, n0), (v1, n1)] = paths.paths;
            s.paths.push(CriticalPaths { paths: [(v0.to_string(), n0), (v1.to_string(), n1)] });
            s.counts.push(
                d.iter().filter(|(_, n)| *n != 0).map(|&(id, n)| (names.values[id as usize].clone(), n)).collect(),
            );
        }
        drop(guard);
        state.write(PRE_FILTER_STATE_KEY, s);
        (None, Status::success())
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        update_state(state, pod, pod_to_add, node, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
        _snapshot: &Snapshot,
    ) -> Status {
        update_state(state, pod, pod_to_remove, node, -1)
    }
}

/// AddPod (`delta` 1) and RemovePod (`delta` -1): one more or one fewer `updated` pod on `node` in the counts.
fn update_state(state: &mut CycleState, pod: &PodInfo, updated: &PodInfo, node: &NodeInfo, delta: i64) -> Status {
    match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
        Some(s) => {
            s.update_with_pod(updated, pod, node, delta);
            Status::success()
        }
        None => missing(PRE_FILTER_STATE_KEY),
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else { return missing(PRE_FILTER_STATE_KEY) };
        let labels = node.labels();
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(v) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            // With fewer eligible domains than minDomains the global minimum counts as 0.
            let min = if s.domains[i] < c.min_domains.max(0) as usize { 0 } else { s.paths[i].min() };
            let matched = s.counts[i].get(v.as_str()).copied().unwrap_or(0);
            if matched + i64::from(s.self_match[i]) - min > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::SCHEDULE_ANYWAY;
    use super::super::tests::{
        cluster, constraint, epod, filter_all, filter_nodes, foo, incoming, node_json, plugin, two_generations,
    };
    use super::super::LABEL_HOSTNAME;
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{node, pod};
    use serde_json::json;

    fn terminating(name: &str) -> PodInfo {
        pod(json!({"metadata": {"name": name, "uid": name, "labels": {"foo": ""},
            "deletionTimestamp": "2024-01-01T00:00:00Z"}}))
    }

    #[test]
    fn filter_table() {
        let zone1 = || constraint(1, "zone", DO_NOT_SCHEDULE, json!({}));
        let host1 = || constraint(1, LABEL_HOSTNAME, DO_NOT_SCHEDULE, json!({}));
        let me = || json!({"foo": ""});
        let skewed = || vec![("a", foo("a1")), ("x", foo("x1")), ("x", foo("x2"))];
        let other_ns =
            vec![("a", epod("a1", "other", me())), ("x", epod("x1", "other", me())), ("x", epod("x2", "other", me()))];
        let taint_tol = json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]});
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, PodInfo, Vec<(&str, PodInfo)>, &[&str], &[&str], [&str; 4])> = vec![
            ("no pods", incoming(me(), vec![zone1()], json!({})), vec![], &[], &[], ["ok"; 4]),
            (
                "3/3 spread",
                incoming(me(), vec![zone1()], json!({})),
                vec![
                    ("a", foo("a1")),
                    ("a", foo("a2")),
                    ("b", foo("b1")),
                    ("x", foo("x1")),
                    ("x", foo("x2")),
                    ("y", foo("y1")),
                ],
                &[],
                &[],
                ["ok"; 4],
            ),
            ("1/2 skew", incoming(me(), vec![zone1()], json!({})), skewed(), &[], &[], ["ok", "ok", "skew", "skew"]),
            ("other namespace not counted", incoming(me(), vec![zone1()], json!({})), other_ns, &[], &[], ["ok"; 4]),
            (
                "terminating pods not counted",
                incoming(me(), vec![zone1()], json!({})),
                vec![("a", foo("a1")), ("x", terminating("x1")), ("x", terminating("x2"))],
                &[],
                &[],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "node missing key",
                incoming(me(), vec![zone1()], json!({})),
                vec![],
                &["b"],
                &[],
                ["ok", "label", "ok", "ok"],
            ),
            (
                "nodes missing key are not domains",
                incoming(me(), vec![zone1()], json!({})),
                vec![("a", foo("a1")), ("b", foo("b1")), ("b", foo("b2"))],
                &["b", "x", "y"],
                &[],
                ["ok", "label", "label", "label"],
            ),
            (
                "minDomains above domains: global minimum 0",
                incoming(me(), vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"minDomains": 3}))], json!({})),
                vec![("a", foo("a1")), ("x", foo("x1"))],
                &[],
                &[],
                ["skew"; 4],
            ),
            (
                "minDomains met",
                incoming(me(), vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"minDomains": 2}))], json!({})),
                vec![("a", foo("a1")), ("x", foo("x1"))],
                &[],
                &[],
                ["ok"; 4],
            ),
            (
                "hostname",
                incoming(me(), vec![host1()], json!({})),
                vec![("a", foo("a1"))],
                &[],
                &[],
                ["skew", "ok", "ok", "ok"],
            ),
            (
                "maxSkew 2",
                incoming(me(), vec![constraint(2, "zone", DO_NOT_SCHEDULE, json!({}))], json!({})),
                vec![("a", foo("a1")), ("a", foo("a2")), ("a", foo("a3")), ("x", foo("x1"))],
                &[],
                &[],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "nodeAffinityPolicy Honor: other zone not counted",
                incoming(me(), vec![zone1()], json!({"nodeSelector": {"zone": "z1"}})),
                vec![("a", foo("a1"))],
                &[],
                &[],
                ["ok"; 4],
            ),
            (
                "nodeAffinityPolicy Honor with required node affinity",
                incoming(
                    me(),
                    vec![zone1()],
                    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}),
                ),
                vec![("a", foo("a1"))],
                &[],
                &[],
                ["ok"; 4],
            ),
            (
                "nodeAffinityPolicy Ignore: other zone counted",
                incoming(
                    me(),
                    vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"nodeAffinityPolicy": "Ignore"}))],
                    json!({"nodeSelector": {"zone": "z1"}}),
                ),
                vec![("a", foo("a1"))],
                &[],
                &[],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "nodeTaintsPolicy Ignore (default): tainted zone counted",
                incoming(me(), vec![zone1()], json!({})),
                vec![("a", foo("a1"))],
                &[],
                &["x", "y"],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "nodeTaintsPolicy Honor: tainted zone not counted",
                incoming(
                    me(),
                    vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"nodeTaintsPolicy": "Honor"}))],
                    json!({}),
                ),
                vec![("a", foo("a1"))],
                &[],
                &["x", "y"],
                ["ok"; 4],
            ),
            (
                "nodeTaintsPolicy Honor: tolerated taint counted",
                incoming(
                    me(),
                    vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"nodeTaintsPolicy": "Honor"}))],
                    taint_tol,
                ),
                vec![("a", foo("a1"))],
                &[],
                &["x", "y"],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "matchLabelKeys narrows to the pod's revision",
                incoming(
                    json!({"foo": "", "rev": "2"}),
                    vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({"matchLabelKeys": ["rev"]}))],
                    json!({}),
                ),
                vec![
                    ("a", epod("a1", "default", json!({"foo": "", "rev": "1"}))),
                    ("a", epod("a2", "default", json!({"foo": "", "rev": "1"}))),
                    ("x", epod("x1", "default", json!({"foo": "", "rev": "2"}))),
                ],
                &[],
                &[],
                ["ok", "ok", "skew", "skew"],
            ),
            (
                "without matchLabelKeys every revision counts",
                incoming(json!({"foo": "", "rev": "2"}), vec![zone1()], json!({})),
                vec![
                    ("a", epod("a1", "default", json!({"foo": "", "rev": "1"}))),
                    ("a", epod("a2", "default", json!({"foo": "", "rev": "1"}))),
                    ("x", epod("x1", "default", json!({"foo": "", "rev": "2"}))),
                ],
                &[],
                &[],
                ["skew", "skew", "ok", "ok"],
            ),
            (
                "pod not matching its own selector",
                incoming(json!({}), vec![zone1()], json!({})),
                skewed(),
                &[],
                &[],
                ["ok"; 4],
            ),
            (
                "two constraints both apply",
                incoming(me(), vec![zone1(), host1()], json!({})),
                vec![("a", foo("a1")), ("x", foo("x1"))],
                &[],
                &[],
                ["skew", "ok", "skew", "ok"],
            ),
            (
                "soft constraints only: skip",
                incoming(me(), vec![constraint(1, "zone", SCHEDULE_ANYWAY, json!({}))], json!({})),
                skewed(),
                &[],
                &[],
                ["skip"; 4],
            ),
            ("no constraints: skip", incoming(me(), vec![], json!({})), skewed(), &[], &[], ["skip"; 4]),
        ];
        let pl = plugin(json!({}));
        for (name, p, pods, no_zone, tainted, want) in cases {
            let snap = cluster(pods, no_zone, tainted);
            assert_eq!(filter_all(&pl, &p, &snap), want, "{name}");
        }
    }

    #[test]
    fn add_and_remove_pod_update_counts() {
        let pl = plugin(json!({}));
        let p = incoming(json!({"foo": ""}), vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({}))], json!({}));
        let x1 = Arc::new(foo("x1"));
        let snap = cluster(vec![("a", foo("a1")), ("x", (*x1).clone()), ("x", foo("x2"))], &["b"], &[]);
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "label", "skew", "skew"]);
        let before = state.clone();
        let (a, b, x) = (snap.get("a").unwrap(), snap.get("b").unwrap(), snap.get("x").unwrap());

        assert!(pl.remove_pod(&mut state, &p, &x1, x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "label", "ok", "ok"], "z1=1 z2=1");
        assert_eq!(filter_nodes(&pl, &before, &p, &snap), ["ok", "label", "skew", "skew"], "clone is independent");

        // Pods that do not count: another namespace, not matching, or on a node without the key.
        for (other, on) in
            [(epod("o", "other", json!({"foo": ""})), a), (epod("n", "default", json!({})), a), (foo("b1"), b)]
        {
            assert!(pl.add_pod(&mut state, &p, &Arc::new(other), on, &snap).is_success());
        }
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "label", "ok", "ok"]);

        assert!(pl.add_pod(&mut state, &p, &Arc::new(foo("a2")), a, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["skew", "label", "ok", "ok"], "z1=2 z2=1");
        assert!(pl.remove_pod(&mut state, &p, &Arc::new(foo("x2")), x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["skew", "label", "ok", "ok"], "z1=2 z2=0");
        assert!(pl.remove_pod(&mut state, &p, &Arc::new(foo("a1")), a, &snap).is_success());
        assert!(pl.remove_pod(&mut state, &p, &Arc::new(foo("a2")), a, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "label", "ok", "ok"], "z1=0 z2=0");
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let pl = plugin(json!({}));
        let p = incoming(json!({}), vec![], json!({}));
        let st = pl.filter(&CycleState::new(), &p, &node(node_json("a", Some("z1"))));
        assert_eq!(st.code(), Code::Error);
    }

    #[test]
    fn critical_paths_keep_the_minimum() {
        let mut p = CriticalPaths::<&str>::new();
        for (v, n) in [("a", 3), ("b", 1), ("c", 2)] {
            p.update(v, n);
        }
        assert_eq!(p.paths, [("b", 1), ("c", 2)]);
        p.update("b", 4);
        assert_eq!(p.paths, [("c", 2), ("b", 4)]);
        p.update("a", 0);
        assert_eq!(p.min(), 0);
        assert_eq!(p.paths, [("a", 0), ("c", 2)]);
    }

    /// PreFilter's counts kept per node give what a fresh plugin computes: for the same nodes again, after one node
    /// changed (a new generation), and for another selector.
    #[test]
    fn kept_per_node_counts_match_a_fresh_plugin() {
        let snaps = two_generations();
        let by_foo = incoming(json!({"foo": ""}), vec![constraint(1, "zone", DO_NOT_SCHEDULE, json!({}))], json!({}));
        let mut bar = constraint(1, "zone", DO_NOT_SCHEDULE, json!({}));
        bar["labelSelector"] = json!({"matchLabels": {"bar": ""}});
        let by_bar = incoming(json!({"bar": ""}), vec![bar], json!({}));
        // The same selector over hostnames: the kept domains are the zones' and must not be read for it.
        let by_foo_host =
            incoming(json!({"foo": ""}), vec![constraint(1, LABEL_HOSTNAME, DO_NOT_SCHEDULE, json!({}))], json!({}));
        let kept = plugin(json!({}));
        for p in [&by_foo, &by_bar, &by_foo_host, &by_foo] {
            for snap in &snaps {
                for _ in 0..2 {
                    assert_eq!(filter_all(&kept, p, snap), filter_all(&plugin(json!({})), p, snap));
                }
            }
        }
        // The change is seen: two more foo pods in z2 turn the skew around.
        assert_ne!(filter_all(&kept, &by_foo, &snaps[0]), filter_all(&kept, &by_foo, &snaps[1]));
        // Hostnames, then zones, on one snapshot: every node unchanged, so only the key tells the kept domains apart.
        for p in [&by_foo_host, &by_foo, &by_foo_host] {
            assert_eq!(filter_all(&kept, p, &snaps[1]), filter_all(&plugin(json!({})), p, &snaps[1]));
        }
    }
}
