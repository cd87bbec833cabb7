//! InterPodAffinity: pod affinity and anti-affinity, as upstream's `interpodaffinity` plugin. Required terms (the
//! incoming pod's and existing pods' anti-affinity) are enforced by PreFilter/Filter; preferred terms (and existing
//! pods' required affinity, with `hardPodAffinityWeight`) are ranked by PreScore/Score/NormalizeScore.
//!
//! Counting by topology pair happens once per pod (PreFilter, PreScore); Filter and Score only look it up.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::cache::Snapshot;
use crate::framework::labels::Labels;
use crate::framework::types::{AffinityTerm, WeightedAffinityTerm};
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};
use crate::plugins::{decode_args, PluginContext};

/// The plugin's name in profiles.
pub const NAME: &str = "InterPodAffinity";
/// Filter reason when the incoming pod's required affinity is not met (upstream's wording).
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// Filter reason when the incoming pod's required anti-affinity is violated.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";
/// Filter reason when an existing pod's required anti-affinity would be violated.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// The plugin's args (`InterPodAffinityArgs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Score weight of an existing pod's required affinity term matched by the incoming pod (0–100, default 1).
    #[serde(default = "default_hard_weight")]
    pub hard_pod_affinity_weight: i32,
    /// Skip existing pods' preferred terms when the incoming pod has no preferred terms of its own.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

fn default_hard_weight() -> i32 {
    1
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }
    }
}

/// The InterPodAffinity plugin.
#[derive(Debug)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
}

impl InterPodAffinity {
    /// Builds the plugin; `hardPodAffinityWeight` out of [0, 100] is an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<InterPodAffinity, String> {
        let args: InterPodAffinityArgs = decode_args(args)?;
        let w = args.hard_pod_affinity_weight;
        if !(0..=100).contains(&w) {
            return Err(format!("hardPodAffinityWeight: Invalid value: {w}: not in valid range [0, 100]"));
        }
        Ok(InterPodAffinity { args })
    }
}

/// Topology key → topology value → count (or score). Nested so lookups by borrowed label strings allocate
/// nothing.
type TopologyCounts = HashMap<String, HashMap<String, i64>>;

/// Adds `delta` to the pair (key, the node's value for key) when the node has the key; drops pairs (and keys)
/// that fall to zero.
fn bump(m: &mut TopologyCounts, labels: &Labels, key: &str, delta: i64) {
    let Some(v) = labels.get(key) else { return };
    if delta == 0 {
        return;
    }
    let inner = match m.get_mut(key) {
        Some(inner) => inner,
        None => m.entry(key.to_string()).or_default(),
    };
    let n = match inner.get_mut(v.as_str()) {
        Some(n) => {
            *n += delta;
            *n
        }
        None => {
            inner.insert(v.clone(), delta);
            delta
        }
    };
    if n == 0 {
        inner.remove(v.as_str());
        if inner.is_empty() {
            m.remove(key);
        }
    }
}

fn lookup(m: &TopologyCounts, key: &str, value: &str) -> i64 {
    m.get(key).and_then(|inner| inner.get(value)).copied().unwrap_or(0)
}

/// True when `target` matches a term of the incoming pod. Upstream resolves the term's namespace selector into
/// its namespace list against the known namespaces; here the target's namespace labels are read instead, which
/// gives the same answer for known namespaces.
fn incoming_term_matches(term: &AffinityTerm, target: &PodInfo, snapshot: &Snapshot) -> bool {
    let ns_ok = term.namespaces.contains(&target.namespace)
        || term.namespace_selector.is_everything()
        || snapshot.namespace_labels(&target.namespace).is_some_and(|l| term.namespace_selector.matches(l));
    ns_ok && term.selector.matches(target.labels())
}

/// True when `target` matches every term (false for no terms).
fn matches_all_incoming(terms: &[AffinityTerm], target: &PodInfo, snapshot: &Snapshot) -> bool {
    !terms.is_empty() && terms.iter().all(|t| incoming_term_matches(t, target, snapshot))
}

// ---------------------------------------------------------------------------------------------------------------
// PreFilter / Filter

/// PreFilter data: counts by topology pair.
#[derive(Debug, Clone, Default)]
struct PreFilterState {
    /// Existing pods whose required anti-affinity terms match the incoming pod, by their nodes' pairs.
    existing_anti_affinity: TopologyCounts,
    /// Existing pods matching all of the incoming pod's required affinity terms, by pair (one per term key).
    affinity: TopologyCounts,
    /// Existing pods matching each of the incoming pod's required anti-affinity terms, by pair.
    anti_affinity: TopologyCounts,
    /// The incoming pod matches all its own required affinity terms.
    self_affinity: bool,
}

impl PreFilterState {
    fn update_with_pod(&mut self, other: &PodInfo, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot, delta: i64) {
        let labels = node.labels();
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        for t in &other.required_anti_affinity_terms {
            if t.matches(pod, ns_labels) {
                bump(&mut self.existing_anti_affinity, labels, &t.topology_key, delta);
            }
        }
        if matches_all_incoming(&pod.required_affinity_terms, other, snapshot) {
            for t in &pod.required_affinity_terms {
                bump(&mut self.affinity, labels, &t.topology_key, delta);
            }
        }
        for t in &pod.required_anti_affinity_terms {
            if incoming_term_matches(t, other, snapshot) {
                bump(&mut self.anti_affinity, labels, &t.topology_key, delta);
            }
        }
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let mut s = PreFilterState::default();
        // Existing pods' required anti-affinity: only nodes hosting such pods.
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        for node in snapshot.have_pods_with_required_anti_affinity() {
            let labels = node.labels();
            for existing in &node.pods_with_required_anti_affinity {
                for t in &existing.required_anti_affinity_terms {
                    if t.matches(pod, ns_labels) {
                        bump(&mut s.existing_anti_affinity, labels, &t.topology_key, 1);
                    }
                }
            }
        }
        let (aff, anti) = (&pod.required_affinity_terms, &pod.required_anti_affinity_terms);
        if s.existing_anti_affinity.is_empty() && aff.is_empty() && anti.is_empty() {
            return (None, Status::skip());
        }
        if !aff.is_empty() || !anti.is_empty() {
            for node in snapshot.nodes() {
                let labels = node.labels();
                for existing in &node.pods {
                    if matches_all_incoming(aff, existing, snapshot) {
                        for t in aff {
                            bump(&mut s.affinity, labels, &t.topology_key, 1);
                        }
                    }
                    for t in anti {
                        if incoming_term_matches(t, existing, snapshot) {
                            bump(&mut s.anti_affinity, labels, &t.topology_key, 1);
                        }
                    }
                }
            }
            s.self_affinity = matches_all_incoming(aff, pod, snapshot);
        }
        state.write(PRE_FILTER_STATE_KEY, s);
        (None, Status::success())
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_add, pod, node, snapshot, 1);
                Status::success()
            }
            None => missing(PRE_FILTER_STATE_KEY),
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_remove, pod, node, snapshot, -1);
                Status::success()
            }
            None => missing(PRE_FILTER_STATE_KEY),
        }
    }
}

fn missing(key: &str) -> Status {
    Status::error(format!("reading {key:?} from cycleState: not found"))
}

/// The incoming pod's required affinity: every term's key on the node, and matching pods in each term's domain
/// (or, when no pod matches anywhere, the pod matching its own terms).
fn satisfies_pod_affinity(s: &PreFilterState, pod: &PodInfo, labels: &Labels) -> bool {
    let mut pods_exist = true;
    for t in &pod.required_affinity_terms {
        match labels.get(&t.topology_key) {
            Some(v) => {
                if lookup(&s.affinity, &t.topology_key, v) <= 0 {
                    pods_exist = false;
                }
            }
            None => return false,
        }
    }
    pods_exist || (s.affinity.is_empty() && s.self_affinity)
}

fn satisfies_pod_anti_affinity(s: &PreFilterState, pod: &PodInfo, labels: &Labels) -> bool {
    if s.anti_affinity.is_empty() {
        return true;
    }
    !pod.required_anti_affinity_terms
        .iter()
        .any(|t| labels.get(&t.topology_key).is_some_and(|v| lookup(&s.anti_affinity, &t.topology_key, v) > 0))
}

fn satisfies_existing_anti_affinity(s: &PreFilterState, labels: &Labels) -> bool {
    !s.existing_anti_affinity
        .iter()
        .any(|(k, inner)| labels.get(k).is_some_and(|v| inner.get(v.as_str()).is_some_and(|n| *n > 0)))
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else { return missing(PRE_FILTER_STATE_KEY) };
        let labels = node.labels();
        if !satisfies_pod_affinity(s, pod, labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfies_pod_anti_affinity(s, pod, labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfies_existing_anti_affinity(s, labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

// ---------------------------------------------------------------------------------------------------------------
// PreScore / Score / NormalizeScore

/// PreScore data: the score of every topology pair.
#[derive(Debug, Clone, Default)]
struct PreScoreState {
    topology_score: TopologyCounts,
}

impl InterPodAffinity {
    /// Adds the contributions of one existing pod (on `node`) to the pair scores.
    fn process_existing_pod(
        &self,
        scores: &mut TopologyCounts,
        pod: &PodInfo,
        ns_labels: Option<&Labels>,
        existing: &PodInfo,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) {
        let labels = node.labels();
        if labels.is_empty() {
            return;
        }
        let incoming = |scores: &mut TopologyCounts, terms: &[WeightedAffinityTerm], sign: i64| {
            for t in terms {
                if incoming_term_matches(&t.term, existing, snapshot) {
                    bump(scores, labels, &t.term.topology_key, sign * i64::from(t.weight));
                }
            }
        };
        // The incoming pod's preferred terms matched by the existing pod.
        incoming(scores, &pod.preferred_affinity_terms, 1);
        incoming(scores, &pod.preferred_anti_affinity_terms, -1);
        // The existing pod's terms matched by the incoming pod.
        let hard = self.args.hard_pod_affinity_weight;
        if hard > 0 {
            for t in &existing.required_affinity_terms {
                if t.matches(pod, ns_labels) {
                    bump(scores, labels, &t.topology_key, i64::from(hard));
                }
            }
        }
        for t in &existing.preferred_affinity_terms {
            if t.term.matches(pod, ns_labels) {
                bump(scores, labels, &t.term.topology_key, i64::from(t.weight));
            }
        }
        for t in &existing.preferred_anti_affinity_terms {
            if t.term.matches(pod, ns_labels) {
                bump(scores, labels, &t.term.topology_key, -i64::from(t.weight));
            }
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], snapshot: &Snapshot) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        let has_constraints = !pod.preferred_affinity_terms.is_empty() || !pod.preferred_anti_affinity_terms.is_empty();
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        let mut scores = TopologyCounts::new();
        if has_constraints {
            // Every existing pod may match the incoming pod's preferred terms.
            for node in snapshot.nodes() {
                for existing in &node.pods {
                    self.process_existing_pod(&mut scores, pod, ns_labels, existing, node, snapshot);
                }
            }
        } else {
            // Only existing pods with affinity terms can contribute.
            for node in snapshot.have_pods_with_affinity() {
                for existing in &node.pods_with_affinity {
                    self.process_existing_pod(&mut scores, pod, ns_labels, existing, node, snapshot);
                }
            }
        }
        if scores.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score: scores });
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(missing(PRE_SCORE_STATE_KEY));
        };
        let labels = node.labels();
        let mut score = 0;
        for (k, values) in &s.topology_score {
            if let Some(v) = labels.get(k) {
                score += values.get(v.as_str()).copied().unwrap_or(0);
            }
        }
        Ok(score)
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else { return missing(PRE_SCORE_STATE_KEY) };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let diff = max - min;
        for sc in scores.iter_mut() {
            sc.score =
                if diff > 0 { (MAX_NODE_SCORE as f64 * ((sc.score - min) as f64 / diff as f64)) as i64 } else { 0 };
        }
        Status::success()
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, action::ADD | action::UPDATE_LABEL | action::DELETE),
            ClusterEvent::new(EventResource::Node, action::ADD | action::UPDATE_LABEL),
        ]
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}
