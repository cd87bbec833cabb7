//! InterPodAffinity: pod affinity and anti-affinity, as upstream's `interpodaffinity` plugin. Required terms (the
//! incoming pod's and existing pods' anti-affinity) are enforced by PreFilter/Filter; preferred terms (and existing
//! pods' required affinity, with `hardPodAffinityWeight`) are ranked by PreScore/Score/NormalizeScore.
//!
//! Counting by topology pair happens once per pod (PreFilter, PreScore); Filter and Score only look it up.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use serde::Deserialize;

use crate::framework::labels::{Labels, Requirement, Selector};
use crate::framework::node_memo::NodeMemo;
use crate::framework::types::{AffinityTerm, WeightedAffinityTerm};
use crate::framework::ClusterObjects;
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};
use crate::plugins::helper::{decode, invalid, ArgsError};

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
    /// PreFilter's per-node counts of pods matching the incoming pod's required terms, for the last terms seen.
    matched: Mutex<NodeMemo<RequiredTerms, MatchedOnNode>>,
    /// PreFilter's per-node counts of existing pods' required anti-affinity terms the incoming pod matches, by
    /// topology key, for the last namespace seen (checked per node against the pod's labels, as [`KeptSums`]).
    existing_anti: Mutex<NodeMemo<NamespaceKey, KeptSums>>,
    /// PreScore's per-node score sums, for the last incoming pod shape seen.
    contributions: Mutex<NodeMemo<ScoreKey, KeptSums>>,
}

/// The incoming pod's required affinity and anti-affinity terms, and, when a term has a namespace selector, the
/// cluster objects (namespace labels) the counts were made with: kept counts hold while the snapshot's objects are
/// the same ones (held here, so that a later set cannot reuse their address).
type RequiredTerms = (Vec<AffinityTerm>, Vec<AffinityTerm>, Option<Arc<ClusterObjects>>);

/// One node's pods matching all of the incoming pod's required affinity terms, and each of its required
/// anti-affinity terms.
type MatchedOnNode = (i64, Vec<i64>);

/// The incoming pod's namespace and that namespace's labels (existing pods' namespace selectors read them).
type NamespaceKey = (String, Option<Labels>);

/// What PreScore's per-node sums depend on besides the node's pods and the incoming pod's labels (checked per node,
/// [`KeptSums`]): the incoming pod's namespace and preferred terms, its namespace's labels (existing pods'
/// namespace selectors read them) and, when one of its terms has a namespace selector, the cluster objects
/// (namespace labels) the sums were made with, as [`RequiredTerms`].
type ScoreKey =
    (String, Vec<WeightedAffinityTerm>, Vec<WeightedAffinityTerm>, Option<Labels>, Option<Arc<ClusterObjects>>);

/// A node's kept score sums, with the incoming pod's values (None: absent) for the label keys its existing pods'
/// terms read: the sums hold for the next pod while its values for those keys are the same. So the key need not
/// hold the incoming pod's whole label set (scheduler_perf gives each pod a label of its own, which no term reads).
#[derive(Debug)]
struct KeptSums {
    sums: Vec<(String, i64)>,
    reads: Vec<(String, Option<String>)>,
}

impl KeptSums {
    fn holds_for(&self, pod: &PodInfo) -> bool {
        let labels = pod.labels();
        self.reads.iter().all(|(k, v)| labels.get(k) == v.as_ref())
    }
}

/// How many of the required anti-affinity terms of `node`'s pods `pod` matches, by topology key, with the pod's
/// values for the label keys those terms read.
fn existing_anti_affinity_on(node: &NodeInfo, pod: &PodInfo, ns_labels: Option<&Labels>) -> KeptSums {
    let mut kept = KeptSums { sums: Vec::new(), reads: Vec::new() };
    for existing in &node.pods_with_required_anti_affinity {
        for t in &existing.required_anti_affinity_terms {
            if let Selector::All(reqs) = &t.selector {
                for k in reqs.iter().map(Requirement::key) {
                    if !kept.reads.iter().any(|(r, _)| r == k) {
                        kept.reads.push((k.to_string(), pod.labels().get(k).cloned()));
                    }
                }
            }
            if !t.matches(pod, ns_labels) {
                continue;
            }
            match kept.sums.iter_mut().find(|(k, _)| *k == t.topology_key) {
                Some((_, n)) => *n += 1,
                None => kept.sums.push((t.topology_key.clone(), 1)),
            }
        }
    }
    kept
}

/// True when whether a pod matches the term does not depend on namespace labels (no namespace selector, or one
/// selecting every namespace): then what a node's pods match depends on the pods alone.
fn namespace_labels_unread(t: &AffinityTerm) -> bool {
    matches!(t.namespace_selector, Selector::Nothing) || t.namespace_selector.is_everything()
}

/// The cluster objects a memo's values are made with when `terms` read namespace labels (None when they do not).
fn objects_read<'t>(
    mut terms: impl Iterator<Item = &'t AffinityTerm>,
    snapshot: &Snapshot,
) -> Option<Arc<ClusterObjects>> {
    (!terms.all(namespace_labels_unread)).then(|| snapshot.objects.clone())
}

/// Whether kept values made with the objects `kept` hold with `now` (see [`objects_read`]): the same set, held by
/// the key so that a later set cannot reuse its address.
fn same_objects(kept: &Option<Arc<ClusterObjects>>, now: &Option<Arc<ClusterObjects>>) -> bool {
    match (kept, now) {
        (Some(k), Some(o)) => Arc::ptr_eq(k, o),
        (None, None) => true,
        _ => false,
    }
}

impl InterPodAffinityArgs {
    /// Decodes the args (defaults when absent) and checks them as upstream's `ValidateInterPodAffinityArgs`.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<InterPodAffinityArgs, ArgsError> {
        let a: InterPodAffinityArgs = decode(args)?;
        let w = a.hard_pod_affinity_weight;
        if !(0..=100).contains(&w) {
            return Err(invalid("hardPodAffinityWeight", w, "not in valid range [0, 100]").into());
        }
        Ok(a)
    }
}

impl InterPodAffinity {
    /// Builds the plugin; `hardPodAffinityWeight` out of [0, 100] is an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<InterPodAffinity, String> {
        Ok(InterPodAffinity {
            args: InterPodAffinityArgs::parse(args)?,
            matched: Mutex::default(),
            existing_anti: Mutex::default(),
            contributions: Mutex::default(),
        })
    }
}

/// Topology key → topology value → count (or score). Nested so lookups by borrowed label strings allocate
/// nothing; Fx-hashed, as the keys are label strings the scheduler reads, not input chosen to collide.
type TopologyCounts = FxHashMap<String, FxHashMap<String, i64>>;

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
        // Counted per node and topology key, and kept per node while the pod's namespace (and its labels) and its
        // values for the label keys those terms read stay the same.
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        let mut memo = self.existing_anti.lock().unwrap_or_else(PoisonError::into_inner);
        memo.key(
            |(ns, nsl)| *ns == pod.namespace && nsl.as_ref() == ns_labels,
            || (pod.namespace.clone(), ns_labels.cloned()),
        );
        for node in snapshot.have_pods_with_required_anti_affinity() {
            let labels = node.labels();
            memo.with_valid(
                node,
                |kept| kept.holds_for(pod),
                || existing_anti_affinity_on(node, pod, ns_labels),
                |kept| {
                    for (k, n) in &kept.sums {
                        bump(&mut s.existing_anti_affinity, labels, k, *n);
                    }
                },
            );
        }
        drop(memo);
        let (aff, anti) = (&pod.required_affinity_terms, &pod.required_anti_affinity_terms);
        if s.existing_anti_affinity.is_empty() && aff.is_empty() && anti.is_empty() {
            return (None, Status::skip());
        }
        if !aff.is_empty() || !anti.is_empty() {
            // Matching pods are counted per node, then added to the node's pairs once: the same counts as one
            // bump per pod, with one label lookup and one hash per node and term instead of per pod. The counts
            // are kept per node while the terms and the node stay the same (a workload's next pod finds only the
            // node that got the last one changed).
            let count = |node: &NodeInfo| {
                let mut matched = (0i64, vec![0i64; anti.len()]);
                for existing in &node.pods {
                    matched.0 += i64::from(matches_all_incoming(aff, existing, snapshot));
                    for (n, t) in matched.1.iter_mut().zip(anti) {
                        *n += i64::from(incoming_term_matches(t, existing, snapshot));
                    }
                }
                matched
            };
            let add = |s: &mut PreFilterState, node: &NodeInfo, (aff_matched, anti_matched): &MatchedOnNode| {
                let labels = node.labels();
                if *aff_matched > 0 {
                    for t in aff {
                        bump(&mut s.affinity, labels, &t.topology_key, *aff_matched);
                    }
                }
                for (&n, t) in anti_matched.iter().zip(anti) {
                    bump(&mut s.anti_affinity, labels, &t.topology_key, n);
                }
            };
            let objects = objects_read(aff.iter().chain(anti), snapshot);
            let mut memo = self.matched.lock().unwrap_or_else(PoisonError::into_inner);
            memo.key(
                |(a, b, o)| a == aff && b == anti && same_objects(o, &objects),
                || (aff.clone(), anti.clone(), objects.clone()),
            );
            for node in snapshot.nodes() {
                if node.pods.is_empty() {
                    continue;
                }
                memo.with(node, || count(node), |m| add(&mut s, node, m));
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

/// One node's score contributions by topology key, summed over its pods before they are added to the pairs: the
/// same sums as a bump per pod and term, with one label lookup and one hash per node and key.
#[derive(Default)]
struct NodeContributions<'a>(Vec<(&'a str, i64)>);

impl<'a> NodeContributions<'a> {
    fn add(&mut self, key: &'a str, delta: i64) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, d)) => *d += delta,
            None => self.0.push((key, delta)),
        }
    }

    /// The sums, owned (no allocation for a node without any).
    fn into_owned(self) -> Vec<(String, i64)> {
        self.0.into_iter().map(|(k, d)| (k.to_string(), d)).collect()
    }
}

impl InterPodAffinity {
    /// The sums one node's `pods` contribute.
    fn node_sums<'a>(
        &self,
        pod: &'a PodInfo,
        ns_labels: Option<&Labels>,
        pods: &'a [Arc<PodInfo>],
        snapshot: &Snapshot,
    ) -> NodeContributions<'a> {
        let mut sums = NodeContributions::default();
        for existing in pods {
            self.process_existing_pod(&mut sums, pod, ns_labels, existing, snapshot);
        }
        sums
    }

    /// The incoming pod's values for the label keys that `pods`' terms which count in PreScore read.
    fn label_keys_read(&self, pods: &[Arc<PodInfo>], pod: &PodInfo) -> Vec<(String, Option<String>)> {
        let hard = self.args.hard_pod_affinity_weight > 0;
        let mut reads: Vec<(String, Option<String>)> = Vec::new();
        for existing in pods {
            let required = existing.required_affinity_terms.iter().filter(|_| hard);
            let preferred = existing.preferred_affinity_terms.iter().chain(&existing.preferred_anti_affinity_terms);
            for t in required.chain(preferred.map(|w| &w.term)) {
                let Selector::All(reqs) = &t.selector else { continue };
                for k in reqs.iter().map(Requirement::key) {
                    if !reads.iter().any(|(r, _)| r == k) {
                        reads.push((k.to_string(), pod.labels().get(k).cloned()));
                    }
                }
            }
        }
        reads
    }

    /// Adds the contributions of one existing pod to its node's sums.
    fn process_existing_pod<'a>(
        &self,
        sums: &mut NodeContributions<'a>,
        pod: &'a PodInfo,
        ns_labels: Option<&Labels>,
        existing: &'a PodInfo,
        snapshot: &Snapshot,
    ) {
        let incoming = |sums: &mut NodeContributions<'a>, terms: &'a [WeightedAffinityTerm], sign: i64| {
            for t in terms {
                if incoming_term_matches(&t.term, existing, snapshot) {
                    sums.add(&t.term.topology_key, sign * i64::from(t.weight));
                }
            }
        };
        // The incoming pod's preferred terms matched by the existing pod.
        incoming(sums, &pod.preferred_affinity_terms, 1);
        incoming(sums, &pod.preferred_anti_affinity_terms, -1);
        // The existing pod's terms matched by the incoming pod.
        let hard = self.args.hard_pod_affinity_weight;
        if hard > 0 {
            for t in &existing.required_affinity_terms {
                if t.matches(pod, ns_labels) {
                    sums.add(&t.topology_key, i64::from(hard));
                }
            }
        }
        for t in &existing.preferred_affinity_terms {
            if t.term.matches(pod, ns_labels) {
                sums.add(&t.term.topology_key, i64::from(t.weight));
            }
        }
        for t in &existing.preferred_anti_affinity_terms {
            if t.term.matches(pod, ns_labels) {
                sums.add(&t.term.topology_key, -i64::from(t.weight));
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
        let mut scores = TopologyCounts::default();
        // The sums are kept per node while the pod's shape, the node and (for namespace selectors) the namespaces
        // stay the same, as PreFilter's counts.
        let (aff, anti) = (&pod.preferred_affinity_terms, &pod.preferred_anti_affinity_terms);
        let objects = objects_read(aff.iter().chain(anti).map(|t| &t.term), snapshot);
        let mut memo = self.contributions.lock().unwrap_or_else(PoisonError::into_inner);
        memo.key(
            |(ns, a, b, nsl, o)| {
                *ns == pod.namespace && a == aff && b == anti && nsl.as_ref() == ns_labels && same_objects(o, &objects)
            },
            || (pod.namespace.clone(), aff.clone(), anti.clone(), ns_labels.cloned(), objects.clone()),
        );
        // With preferred terms of its own, every existing pod may match the incoming pod's; without, only existing
        // pods with affinity terms can contribute.
        let candidates: Box<dyn Iterator<Item = (&NodeInfo, &[Arc<PodInfo>])>> = if has_constraints {
            Box::new(snapshot.nodes().iter().map(|n| (&**n, n.pods.as_slice())))
        } else {
            Box::new(snapshot.have_pods_with_affinity().map(|n| (&**n, n.pods_with_affinity.as_slice())))
        };
        for (node, pods) in candidates {
            let labels = node.labels();
            if labels.is_empty() || pods.is_empty() {
                continue;
            }
            memo.with_valid(
                node,
                |kept| kept.holds_for(pod),
                || KeptSums {
                    sums: self.node_sums(pod, ns_labels, pods, snapshot).into_owned(),
                    reads: self.label_keys_read(pods, pod),
                },
                |kept| {
                    for (k, d) in &kept.sums {
                        bump(&mut scores, labels, k, *d);
                    }
                },
            );
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

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
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
            // The pod's own labels, which its own terms may match (upstream TargetPod UpdatePodLabel).
            ClusterEvent::new(EventResource::UnscheduledPod, action::UPDATE_LABEL),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score, sign);
}

impl crate::framework::SignPlugin for InterPodAffinity {
    /// As upstream: a pod with pod (anti-)affinity cannot be signed; otherwise its labels, which other pods' terms may match, unless `ignorePreferredTermsOfExistingPods` makes only the pod's own terms count.
    fn sign_pod(
        &self,
        pod: &crate::framework::PodInfo,
        _snapshot: &crate::framework::Snapshot,
    ) -> Result<Vec<crate::framework::SignFragment>, crate::framework::Status> {
        use crate::framework::{signers, SignFragment};
        let aff = pod.pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        if aff.is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some()) {
            return Err(crate::framework::Status::unschedulable("pods with InterPodAffinity are not signable"));
        }
        if self.args.ignore_preferred_terms_of_existing_pods {
            return Ok(Vec::new());
        }
        Ok(vec![SignFragment { key: signers::LABELS, value: serde_json::json!(pod.pod.metadata.labels) }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::ClusterObjects;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, node_with_pods, pod};
    use serde_json::{json, Value};

    const HOST: &str = "kubernetes.io/hostname";

    /// A pod with labels and an affinity stanza.
    fn apod(name: &str, ns: &str, labels: Value, affinity: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels},
            "spec": {"affinity": affinity}}))
    }

    fn plain(name: &str, labels: Value) -> PodInfo {
        apod(name, "default", labels, json!({}))
    }

    /// A term selecting `app=<app>` on `key`.
    fn term(app: &str, key: &str) -> Value {
        json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key})
    }

    fn required(kind: &str, terms: Vec<Value>) -> Value {
        json!({ kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms} })
    }

    fn preferred(kind: &str, terms: Vec<(i32, Value)>) -> Value {
        let ts: Vec<Value> = terms.into_iter().map(|(w, t)| json!({"weight": w, "podAffinityTerm": t})).collect();
        json!({ kind: {"preferredDuringSchedulingIgnoredDuringExecution": ts} })
    }

    fn merge(a: Value, b: Value) -> Value {
        let mut a = a;
        for (k, v) in b.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    }

    /// Nodes a, b (zone z1), x, y (zone z2) and n (no zone), with pods; namespaces with labels.
    fn cluster(pods: Vec<(&str, PodInfo)>, namespaces: Value) -> Snapshot {
        let nodes = [("a", Some("z1")), ("b", Some("z1")), ("x", Some("z2")), ("y", Some("z2")), ("n", None)]
            .into_iter()
            .map(|(n, z)| {
                let mut labels = json!({ HOST: n });
                if let Some(z) = z {
                    labels["zone"] = json!(z);
                }
                let mine = pods.iter().filter(|(on, _)| *on == n).map(|(_, p)| p.clone()).collect();
                node_with_pods(json!({"metadata": {"name": n, "labels": labels}}), mine)
            })
            .collect();
        let mut s = Snapshot::from_nodes(nodes);
        s.objects =
            Arc::new(ClusterObjects { namespaces: serde_json::from_value(namespaces).unwrap(), ..Default::default() });
        s
    }

    fn plugin(args: Value) -> InterPodAffinity {
        InterPodAffinity::new(Some(&args), &ctx()).unwrap()
    }

    fn filter_nodes(pl: &InterPodAffinity, state: &CycleState, p: &PodInfo, snap: &Snapshot) -> Vec<&'static str> {
        snap.nodes()
            .iter()
            .map(|n| {
                let st = pl.filter(state, p, n);
                let r = st.reasons().first().map(String::as_str);
                match (st.code(), r) {
                    (Code::Success, _) => "ok",
                    (Code::UnschedulableAndUnresolvable, Some(ERR_REASON_AFFINITY_RULES_NOT_MATCH)) => "aff",
                    (Code::Unschedulable, Some(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)) => "anti",
                    (Code::Unschedulable, Some(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)) => "existing",
                    _ => panic!("unexpected {st}"),
                }
            })
            .collect()
    }

    fn filter_all(pl: &InterPodAffinity, p: &PodInfo, snap: &Snapshot) -> Vec<&'static str> {
        let mut state = CycleState::new();
        let (_, st) = pl.pre_filter(&mut state, p, snap);
        if st.is_skip() {
            return vec!["skip"; snap.len()];
        }
        assert!(st.is_success(), "{st}");
        filter_nodes(pl, &state, p, snap)
    }

    #[test]
    fn filter_table() {
        let db = || plain("db1", json!({"app": "db"}));
        let web = || plain("web1", json!({"app": "web"}));
        let aff_db = || required("podAffinity", vec![term("db", "zone")]);
        let guard = |ns: &str, sel: Value| {
            apod("guard", ns, json!({}), required("podAntiAffinity", vec![merge(term("new", "zone"), sel)]))
        };
        let ns = json!({"prod": {"team": "x"}, "dev": {"team": "y"}, "default": {}});
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, PodInfo, Vec<(&str, PodInfo)>, [&str; 5])> = vec![
            ("no affinity anywhere: skip", plain("in", json!({"app": "new"})), vec![("a", web())], ["skip"; 5]),
            (
                "affinity: pod in zone",
                apod("in", "default", json!({}), aff_db()),
                vec![("a", db())],
                ["ok", "ok", "aff", "aff", "aff"],
            ),
            (
                "affinity: nothing matches, pod does not match itself",
                apod("in", "default", json!({}), aff_db()),
                vec![("a", web())],
                ["aff"; 5],
            ),
            (
                "affinity: first pod of a self-affine series fits where the key exists",
                apod("in", "default", json!({"app": "db"}), aff_db()),
                vec![("a", web())],
                ["ok", "ok", "ok", "ok", "aff"],
            ),
            (
                "affinity: self-affine pod follows existing matches",
                apod("in", "default", json!({"app": "db"}), aff_db()),
                vec![("x", db())],
                ["aff", "aff", "ok", "ok", "aff"],
            ),
            (
                "affinity: pods in another namespace do not match",
                apod("in", "default", json!({}), aff_db()),
                vec![("a", apod("db1", "other", json!({"app": "db"}), json!({})))],
                ["aff"; 5],
            ),
            (
                "affinity: namespaces list",
                apod(
                    "in",
                    "default",
                    json!({}),
                    required("podAffinity", vec![merge(term("db", "zone"), json!({"namespaces": ["other"]}))]),
                ),
                vec![("a", db()), ("x", apod("db2", "other", json!({"app": "db"}), json!({})))],
                ["aff", "aff", "ok", "ok", "aff"],
            ),
            (
                "affinity: namespace selector",
                apod(
                    "in",
                    "default",
                    json!({}),
                    required(
                        "podAffinity",
                        vec![merge(term("db", "zone"), json!({"namespaceSelector": {"matchLabels": {"team": "x"}}}))],
                    ),
                ),
                vec![
                    ("a", apod("db1", "dev", json!({"app": "db"}), json!({}))),
                    ("x", apod("db2", "prod", json!({"app": "db"}), json!({}))),
                ],
                ["aff", "aff", "ok", "ok", "aff"],
            ),
            (
                "affinity: one pod must match all terms",
                apod("in", "default", json!({}), required("podAffinity", vec![term("db", "zone"), term("db", HOST)])),
                vec![("a", db())],
                ["ok", "aff", "aff", "aff", "aff"],
            ),
            (
                "anti-affinity by zone",
                apod("in", "default", json!({}), required("podAntiAffinity", vec![term("web", "zone")])),
                vec![("a", web())],
                ["anti", "anti", "ok", "ok", "ok"],
            ),
            (
                "anti-affinity by host",
                apod("in", "default", json!({}), required("podAntiAffinity", vec![term("web", HOST)])),
                vec![("a", web())],
                ["anti", "ok", "ok", "ok", "ok"],
            ),
            (
                "anti-affinity: nothing matches",
                apod("in", "default", json!({}), required("podAntiAffinity", vec![term("web", HOST)])),
                vec![("a", db())],
                ["ok"; 5],
            ),
            (
                "affinity checked before anti-affinity",
                apod("in", "default", json!({}), merge(aff_db(), required("podAntiAffinity", vec![term("web", HOST)]))),
                vec![("a", db()), ("b", web()), ("x", web())],
                ["ok", "anti", "aff", "aff", "aff"],
            ),
            (
                "existing pod's anti-affinity",
                plain("in", json!({"app": "new"})),
                vec![("a", guard("default", json!({})))],
                ["existing", "existing", "ok", "ok", "ok"],
            ),
            (
                "existing pod's anti-affinity not matching: skip",
                plain("in", json!({"app": "other"})),
                vec![("a", guard("default", json!({})))],
                ["skip"; 5],
            ),
            (
                "existing anti-affinity from another namespace does not apply",
                plain("in", json!({"app": "new"})),
                vec![("a", guard("other", json!({})))],
                ["skip"; 5],
            ),
            (
                "existing anti-affinity selecting the incoming pod's namespace by labels",
                apod("in", "prod", json!({"app": "new"}), json!({})),
                vec![("a", guard("other", json!({"namespaceSelector": {"matchLabels": {"team": "x"}}})))],
                ["existing", "existing", "ok", "ok", "ok"],
            ),
            (
                "existing anti-affinity namespace selector not matching",
                apod("in", "dev", json!({"app": "new"}), json!({})),
                vec![("a", guard("other", json!({"namespaceSelector": {"matchLabels": {"team": "x"}}})))],
                ["skip"; 5],
            ),
            (
                "existing anti-affinity with an empty namespace selector applies everywhere",
                apod("in", "dev", json!({"app": "new"}), json!({})),
                vec![("x", guard("other", json!({"namespaceSelector": {}})))],
                ["ok", "ok", "existing", "existing", "ok"],
            ),
        ];
        let pl = plugin(json!({}));
        for (name, p, pods, want) in cases {
            let snap = cluster(pods, ns.clone());
            assert_eq!(filter_all(&pl, &p, &snap), want, "{name}");
        }
    }

    #[test]
    fn add_and_remove_pod_update_counts() {
        let pl = plugin(json!({}));
        let snap = cluster(vec![("a", plain("db1", json!({"app": "db"})))], json!({}));
        let (a, x, n) = (snap.get("a").unwrap(), snap.get("x").unwrap(), snap.get("n").unwrap());
        let db = |name: &str| Arc::new(plain(name, json!({"app": "db"})));
        let p = apod(
            "in",
            "default",
            json!({"app": "new"}),
            merge(
                required("podAffinity", vec![term("db", "zone")]),
                required("podAntiAffinity", vec![term("web", HOST)]),
            ),
        );
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "ok", "aff", "aff", "aff"]);
        let before = state.clone();

        // Affinity counts follow added and removed pods.
        assert!(pl.add_pod(&mut state, &p, &db("db2"), x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "ok", "ok", "ok", "aff"]);
        assert!(pl.remove_pod(&mut state, &p, &db("db1"), a, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "ok", "ok", "aff"]);
        assert_eq!(filter_nodes(&pl, &before, &p, &snap), ["ok", "ok", "aff", "aff", "aff"], "clone is independent");
        // A pod on a node without the key changes nothing.
        assert!(pl.add_pod(&mut state, &p, &db("db3"), n, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "ok", "ok", "aff"]);

        // The incoming pod's anti-affinity.
        let web = Arc::new(plain("web1", json!({"app": "web"})));
        assert!(pl.add_pod(&mut state, &p, &web, x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "anti", "ok", "aff"]);
        assert!(pl.remove_pod(&mut state, &p, &web, x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "ok", "ok", "aff"]);

        // Existing pods' anti-affinity.
        let guard =
            Arc::new(apod("guard", "default", json!({}), required("podAntiAffinity", vec![term("new", "zone")])));
        assert!(pl.add_pod(&mut state, &p, &guard, x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "existing", "existing", "aff"]);
        assert!(pl.remove_pod(&mut state, &p, &guard, x, &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "ok", "ok", "aff"]);
    }

    #[test]
    fn self_affinity_exception_ends_when_a_match_is_added() {
        let pl = plugin(json!({}));
        let snap = cluster(vec![], json!({}));
        let p = apod("in", "default", json!({"app": "db"}), required("podAffinity", vec![term("db", "zone")]));
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["ok", "ok", "ok", "ok", "aff"]);
        let other = Arc::new(plain("db1", json!({"app": "db"})));
        assert!(pl.add_pod(&mut state, &p, &other, snap.get("x").unwrap(), &snap).is_success());
        assert_eq!(filter_nodes(&pl, &state, &p, &snap), ["aff", "aff", "ok", "ok", "aff"]);
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let pl = plugin(json!({}));
        let st = pl.filter(&CycleState::new(), &plain("p", json!({})), &node(json!({"metadata": {"name": "a"}})));
        assert_eq!(st.code(), Code::Error);
    }

    /// Nodes m1 (region China), m2 (region India), m3 (az az1), m4 (region China), with pods.
    fn score_cluster(pods: Vec<(&str, PodInfo)>) -> Snapshot {
        let nodes = [
            ("m1", json!({"region": "China"})),
            ("m2", json!({"region": "India"})),
            ("m3", json!({"az": "az1"})),
            ("m4", json!({"region": "China"})),
        ]
        .into_iter()
        .map(|(n, labels)| {
            let mine = pods.iter().filter(|(on, _)| *on == n).map(|(_, p)| p.clone()).collect();
            node_with_pods(json!({"metadata": {"name": n, "labels": labels}}), mine)
        })
        .collect();
        let mut s = Snapshot::from_nodes(nodes);
        s.objects = Arc::new(ClusterObjects {
            namespaces: serde_json::from_value(json!({"prod": {"team": "x"}})).unwrap(),
            ..Default::default()
        });
        s
    }

    fn scores(pl: &InterPodAffinity, p: &PodInfo, snap: &Snapshot) -> Option<Vec<i64>> {
        let nodes = snap.nodes().to_vec();
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

    #[test]
    fn score_table() {
        let sec = |s: &str| json!({"labelSelector": {"matchLabels": {"security": s}}, "topologyKey": "region"});
        let s1 = |name: &str| plain(name, json!({"security": "S1"}));
        let s2 = |name: &str| plain(name, json!({"security": "S2"}));
        let base = || vec![("m1", s1("p1")), ("m2", s2("p2"))];
        let incoming = |labels: Value, affinity: Value| apod("in", "default", labels, affinity);
        let existing = |name: &str, affinity: Value| apod(name, "default", json!({}), affinity);
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, Value, PodInfo, Vec<(&str, PodInfo)>, Option<Vec<i64>>)> = vec![
            ("nothing applies: skip", json!({}), incoming(json!({"security": "S1"}), json!({})), base(), None),
            (
                "preferred affinity: matching region scores high",
                json!({}),
                incoming(json!({}), preferred("podAffinity", vec![(5, sec("S1"))])),
                base(),
                Some(vec![100, 0, 0, 100]),
            ),
            (
                "preferred anti-affinity: matching region scores low",
                json!({}),
                incoming(json!({}), preferred("podAntiAffinity", vec![(5, sec("S1"))])),
                base(),
                Some(vec![0, 100, 100, 0]),
            ),
            (
                "affinity and anti-affinity",
                json!({}),
                incoming(
                    json!({}),
                    merge(
                        preferred("podAffinity", vec![(5, sec("S1"))]),
                        preferred("podAntiAffinity", vec![(5, sec("S2"))]),
                    ),
                ),
                base(),
                Some(vec![100, 0, 50, 100]),
            ),
            (
                "weights add up over pods and terms",
                json!({}),
                incoming(json!({}), preferred("podAffinity", vec![(8, sec("S1")), (2, sec("S2"))])),
                vec![("m1", s1("p1")), ("m2", s2("p2")), ("m2", s2("p3")), ("m2", s2("p4")), ("m2", s2("p5"))],
                Some(vec![100, 100, 0, 100]),
            ),
            (
                "preferred affinity: other namespaces do not match",
                json!({}),
                incoming(json!({}), preferred("podAffinity", vec![(5, sec("S1"))])),
                vec![("m1", apod("p1", "prod", json!({"security": "S1"}), json!({}))), ("m2", s1("p2"))],
                Some(vec![0, 100, 0, 0]),
            ),
            (
                "preferred affinity with namespace selector",
                json!({}),
                incoming(
                    json!({}),
                    preferred(
                        "podAffinity",
                        vec![(5, merge(sec("S1"), json!({"namespaceSelector": {"matchLabels": {"team": "x"}}})))],
                    ),
                ),
                vec![("m1", apod("p1", "prod", json!({"security": "S1"}), json!({}))), ("m2", s1("p2"))],
                Some(vec![100, 0, 0, 100]),
            ),
            (
                "existing pod's required affinity counts with hardPodAffinityWeight",
                json!({}),
                incoming(json!({"security": "S1"}), json!({})),
                vec![("m2", existing("e1", required("podAffinity", vec![sec("S1")])))],
                Some(vec![0, 100, 0, 0]),
            ),
            (
                "hardPodAffinityWeight 0 ignores existing required affinity",
                json!({"hardPodAffinityWeight": 0}),
                incoming(json!({"security": "S1"}), json!({})),
                vec![("m2", existing("e1", required("podAffinity", vec![sec("S1")])))],
                None,
            ),
            (
                "existing pod's preferred anti-affinity",
                json!({}),
                incoming(json!({"security": "S1"}), json!({})),
                vec![("m1", existing("e1", preferred("podAntiAffinity", vec![(7, sec("S1"))])))],
                Some(vec![0, 100, 100, 0]),
            ),
            (
                "existing pod's preferred affinity plus hard weight",
                json!({"hardPodAffinityWeight": 10}),
                incoming(json!({"security": "S1"}), json!({})),
                vec![
                    ("m1", existing("e1", preferred("podAffinity", vec![(5, sec("S1"))]))),
                    ("m2", existing("e2", required("podAffinity", vec![sec("S1")]))),
                ],
                Some(vec![50, 100, 0, 50]),
            ),
            (
                "ignorePreferredTermsOfExistingPods without own terms: skip",
                json!({"ignorePreferredTermsOfExistingPods": true}),
                incoming(json!({"security": "S1"}), json!({})),
                vec![("m1", existing("e1", preferred("podAntiAffinity", vec![(7, sec("S1"))])))],
                None,
            ),
            (
                "ignorePreferredTermsOfExistingPods with own terms still counts existing ones",
                json!({"ignorePreferredTermsOfExistingPods": true}),
                incoming(json!({"security": "S1"}), preferred("podAffinity", vec![(1, sec("S2"))])),
                vec![("m1", existing("e1", preferred("podAntiAffinity", vec![(7, sec("S1"))]))), ("m2", s2("p2"))],
                Some(vec![0, 100, 87, 0]),
            ),
        ];
        for (name, args, p, pods, want) in cases {
            let snap = score_cluster(pods);
            assert_eq!(scores(&plugin(args), &p, &snap), want, "{name}");
        }
    }

    /// PreFilter's counts and PreScore's sums kept per node give what a fresh plugin computes: for the same nodes
    /// again, after one node changed (a new generation), and for other pod shapes.
    #[test]
    fn kept_per_node_results_match_a_fresh_plugin() {
        let stamped = |snap: Snapshot, gens: [u64; 5]| {
            let nodes = snap.nodes().iter().zip(gens).map(|(n, g)| NodeInfo { generation: g, ..(**n).clone() });
            let mut s = Snapshot::from_nodes(nodes.collect());
            s.objects = snap.objects.clone();
            s
        };
        let db_affine_with = |name: &str, labels: serde_json::Value| {
            let affinity = merge(
                required("podAffinity", vec![term("db", "zone")]),
                preferred("podAntiAffinity", vec![(5, term("db", HOST))]),
            );
            apod(name, "default", labels, affinity)
        };
        let db_affine = |name: &str| db_affine_with(name, json!({"app": "db"}));
        let before =
            vec![("a", db_affine("e1")), ("x", plain("e2", json!({"app": "web"}))), ("y", plain("e4", json!({})))];
        let mut after = before.clone();
        after.push(("y", db_affine("e3")));
        let snaps =
            [stamped(cluster(before, json!({})), [1, 2, 3, 4, 5]), stamped(cluster(after, json!({})), [1, 2, 3, 6, 5])];
        let kept = plugin(json!({}));
        // The same terms with labels of their own (kept: no term reads `signature`), then with another value for
        // the key the existing pods' terms read (computed again).
        let signed = |name: &str, app: &str| db_affine_with(name, json!({"app": app, "signature": name}));
        for incoming in [
            db_affine("p"),
            plain("q", json!({"app": "db"})),
            db_affine("r"),
            signed("s1", "db"),
            signed("s2", "db"),
            signed("s3", "web"),
            signed("s4", "db"),
        ] {
            for snap in &snaps {
                for _ in 0..2 {
                    let fresh = plugin(json!({}));
                    assert_eq!(
                        filter_all(&kept, &incoming, snap),
                        filter_all(&fresh, &incoming, snap),
                        "{}",
                        incoming.name
                    );
                    assert_eq!(scores(&kept, &incoming, snap), scores(&fresh, &incoming, snap), "{}", incoming.name);
                }
            }
        }
        // The change is seen: with e3 on y, zone z2 has a db pod and p may go there.
        assert_ne!(filter_all(&kept, &db_affine("p"), &snaps[0]), filter_all(&kept, &db_affine("p"), &snaps[1]));
    }

    /// The snapshot with its nodes numbered as the cache stamps them (generation 1, 2, ...): kept per-node results
    /// apply to them.
    fn numbered(snap: Snapshot) -> Snapshot {
        let nodes =
            snap.nodes().iter().enumerate().map(|(i, n)| NodeInfo { generation: i as u64 + 1, ..(**n).clone() });
        let mut s = Snapshot::from_nodes(nodes.collect());
        s.objects = snap.objects.clone();
        s
    }

    /// PreFilter's counts for terms with a namespace selector are kept per node while the namespaces' labels
    /// (the snapshot's cluster objects) stay the same, and made again when they change, the nodes unchanged.
    #[test]
    fn kept_counts_for_namespace_selectors_follow_namespace_labels() {
        let green = |name: &str, ns: &str| apod(name, ns, json!({"app": "db"}), json!({}));
        let pods = vec![("a", green("e1", "tools")), ("x", green("e2", "default"))];
        // The same nodes and pods; only the labels of namespace `tools` differ.
        let devops = numbered(cluster(pods.clone(), json!({"tools": {"team": "devops"}, "default": {}})));
        let other = numbered(cluster(pods, json!({"tools": {"team": "other"}, "default": {}})));
        let selector = merge(term("db", HOST), json!({"namespaceSelector": {"matchLabels": {"team": "devops"}}}));
        let incoming = apod("p", "default", json!({}), required("podAntiAffinity", vec![selector]));
        let kept = plugin(json!({}));
        for snap in [&devops, &other, &other, &devops] {
            assert_eq!(filter_all(&kept, &incoming, snap), filter_all(&plugin(json!({})), &incoming, snap));
        }
        assert_ne!(
            filter_all(&kept, &incoming, &devops),
            filter_all(&kept, &incoming, &other),
            "e1 counts only in devops"
        );
    }

    /// PreScore's sums for preferred terms with a namespace selector are kept per node while the namespaces' labels
    /// stay the same, and made again when they change, the nodes unchanged.
    #[test]
    fn kept_score_sums_for_namespace_selectors_follow_namespace_labels() {
        let db = |name: &str, ns: &str| apod(name, ns, json!({"app": "db"}), json!({}));
        let pods = vec![("a", db("e1", "tools")), ("x", db("e2", "default"))];
        let devops = numbered(cluster(pods.clone(), json!({"tools": {"team": "devops"}, "default": {}})));
        let other = numbered(cluster(pods, json!({"tools": {"team": "other"}, "default": {}})));
        let selector = merge(term("db", HOST), json!({"namespaceSelector": {"matchLabels": {"team": "devops"}}}));
        let incoming = apod("p", "default", json!({}), preferred("podAffinity", vec![(3, selector)]));
        let kept = plugin(json!({}));
        for snap in [&devops, &other, &other, &devops] {
            assert_eq!(scores(&kept, &incoming, snap), scores(&plugin(json!({})), &incoming, snap));
        }
        assert_ne!(scores(&kept, &incoming, &devops), scores(&kept, &incoming, &other), "e1 counts only in devops");
    }

    /// PreFilter's counts of existing pods' required anti-affinity kept per node give what a fresh plugin computes,
    /// for incoming pods that differ in a label the terms read, in one they do not read, and in their namespace.
    #[test]
    fn kept_existing_anti_affinity_counts_match_a_fresh_plugin() {
        let selector = merge(term("db", HOST), json!({"namespaceSelector": {"matchLabels": {"team": "devops"}}}));
        let anti =
            |name: &str, ns: &str| apod(name, ns, json!({}), required("podAntiAffinity", vec![selector.clone()]));
        let snap = numbered(cluster(
            vec![("a", anti("e1", "tools")), ("x", anti("e2", "default"))],
            json!({"tools": {"team": "devops"}, "default": {"team": "devops"}, "web": {}}),
        ));
        let kept = plugin(json!({}));
        let incoming =
            |name: &str, ns: &str, app: &str| apod(name, ns, json!({"app": app, "signature": name}), json!({}));
        for p in [
            incoming("p1", "default", "db"),
            incoming("p2", "default", "db"),
            incoming("p3", "default", "web"),
            incoming("p4", "web", "db"),
            incoming("p5", "default", "db"),
        ] {
            assert_eq!(filter_all(&kept, &p, &snap), filter_all(&plugin(json!({})), &p, &snap), "{}", p.name);
        }
        assert_ne!(
            filter_all(&kept, &incoming("q1", "default", "db"), &snap),
            filter_all(&kept, &incoming("q2", "default", "web"), &snap),
            "only a db pod is kept off a and x"
        );
    }

    #[test]
    fn args_validation() {
        assert_eq!(plugin(json!({})).args.hard_pod_affinity_weight, 1);
        assert_eq!(plugin(json!({"hardPodAffinityWeight": 100})).args.hard_pod_affinity_weight, 100);
        for (a, want) in [
            (
                json!({"hardPodAffinityWeight": 101}),
                "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
            ),
            (json!({"hardPodAffinityWeight": -1}), "hardPodAffinityWeight: Invalid value: -1"),
            (json!({"bogus": true}), "bogus"),
        ] {
            let err = InterPodAffinity::new(Some(&a), &ctx()).unwrap_err();
            assert!(err.contains(want), "{a}: {err}");
        }
        assert!(crate::plugins::in_tree_registry().get(NAME).is_some());
    }
}
