//! DefaultPreemption: when no node fits a pod, find a node where evicting lower-priority pods makes room, as
//! upstream kube-scheduler's `defaultpreemption` plugin and `preemption.Evaluator` do.
//!
//! The plugin only decides: it returns the nominated node and the victims in a [`PostFilterResult`]; the scheduler
//! deletes the victims (with SchedulerAsyncPreemption, off its loop), sets the nomination and clears
//! lower-priority nominations on that node.
//!
//! Upstream also refuses to preempt again while victims on the pod's nominated node are terminating. The cache
//! drops a deleted pod at once, so here a terminating victim is one whose deletion a preemption sent and the cache
//! has not seen yet (`framework::preempting`); with SchedulerAsyncPreemption, PreEnqueue holds a preemptor until
//! its own preemption's deletions are done.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use crate::framework::diagnosis::reason_histogram;
use crate::framework::labels::Selector;
use crate::framework::preempting::Preempting;
use crate::framework::PluginContext;
use crate::framework::Snapshot;
use crate::framework::{
    action, ClusterEvent, Code, CycleState, EventObject, EventResource, NodeInfo, NodeToStatus, Plugin, PodInfo,
    PostFilterHandle, PostFilterPlugin, PostFilterResult, PreEnqueuePlugin, PreemptionCandidate, QueueingHint, Status,
};
use crate::plugins::helper::{self, decode, invalid, ArgsError};

/// The plugin's name in profiles.
pub const NAME: &str = "DefaultPreemption";
/// Reason given to nodes preemption did not examine (upstream's wording).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Reason given to a node without lower-priority pods (upstream's wording).
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Message for a pod whose preemptionPolicy is Never (upstream's wording).
pub const POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Message for a pod whose nominated node still holds victims of its earlier preemption (upstream's wording).
pub const TERMINATING_ON_NOMINATED: &str = "not eligible due to a terminating pod on the nominated node.";
/// Why PreEnqueue holds a preemptor back (upstream's wording).
pub const WAITING_FOR_PREEMPTION: &str = "waiting for the preemption for this pod to be finished";
/// Message when the extenders left no candidate (upstream's wording).
pub const NO_CANDIDATE: &str = "no candidate node for preemption";
/// Prefix the plugin puts on every message it returns, as upstream's PostFilter does.
pub const MESSAGE_PREFIX: &str = "preemption: ";

/// The plugin's args (upstream `DefaultPreemptionArgs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DefaultPreemptionArgs {
    /// Percentage of the potential nodes to examine for candidates (0–100).
    pub min_candidate_nodes_percentage: i32,
    /// The least number of potential nodes to examine (≥ 0).
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs { min_candidate_nodes_percentage: 10, min_candidate_nodes_absolute: 100 }
    }
}

impl DefaultPreemptionArgs {
    /// Decodes the args (defaults when absent) and checks the ranges as upstream's
    /// `ValidateDefaultPreemptionArgs`; every error names its field.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<DefaultPreemptionArgs, ArgsError> {
        let a: DefaultPreemptionArgs = decode(args)?;
        let (pct, abs) = (a.min_candidate_nodes_percentage, a.min_candidate_nodes_absolute);
        let mut errs = Vec::new();
        if !(0..=100).contains(&pct) {
            errs.push(invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"));
        }
        if abs < 0 {
            errs.push(invalid("minCandidateNodesAbsolute", abs, "not in valid range [0, inf)"));
        }
        if pct == 0 && abs == 0 {
            errs.push(invalid(
                "minCandidateNodesPercentage",
                0,
                "cannot be zero at the same time as minCandidateNodesAbsolute",
            ));
            errs.push(invalid(
                "minCandidateNodesAbsolute",
                0,
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ));
        }
        helper::aggregate(errs).map(|()| a)
    }
}

/// The DefaultPreemption plugin.
#[derive(Debug, Clone)]
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
    /// SchedulerAsyncPreemption: the scheduler deletes victims off its loop, and PreEnqueue holds the preemptor.
    async_preemption: bool,
    /// The preemptions under way.
    preempting: Arc<Preempting>,
}

/// A node where the pod fits once its victims are gone.
type Candidate = PreemptionCandidate;

/// A PodDisruptionBudget reduced to what victim selection needs.
struct Budget<'a> {
    pdb: &'a PodDisruptionBudget,
    selector: Selector,
    allowed: i32,
}

impl DefaultPreemption {
    /// Builds the plugin from its args (defaults when absent); a bad value is an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<DefaultPreemption, String> {
        Ok(DefaultPreemption {
            args: DefaultPreemptionArgs::parse(args)?,
            async_preemption: ctx.features.scheduler_async_preemption,
            preempting: ctx.preempting.clone(),
        })
    }

    /// How many candidates to look for among `num_nodes` potential nodes (upstream `calculateNumCandidates`).
    pub fn calculate_num_candidates(&self, num_nodes: usize) -> usize {
        let pct = self.args.min_candidate_nodes_percentage.max(0) as usize;
        let abs = self.args.min_candidate_nodes_absolute.max(0) as usize;
        (num_nodes * pct / 100).max(abs).min(num_nodes)
    }

    fn preempt(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        if preemption_policy_never(pod) {
            return (None, Status::unschedulable(POLICY_NEVER));
        }
        let snapshot = handle.snapshot();
        if self.victims_terminating_on_nominated_node(pod, filtered, snapshot) {
            return (None, Status::unschedulable(TERMINATING_ON_NOMINATED));
        }
        if snapshot.is_empty() {
            return (None, Status::error("no nodes available"));
        }

        // Only nodes a Filter rejected as Unschedulable may be helped by evicting pods; absent nodes were never
        // considered feasible (PreFilter narrowed them out) and count as unresolvable.
        let potential: Vec<&Arc<NodeInfo>> = snapshot
            .nodes()
            .iter()
            .filter(|n| filtered.get(&n.name).is_some_and(|s| s.code() == Code::Unschedulable))
            .collect();

        let (candidates, node_statuses, errors) = if potential.is_empty() {
            (Vec::new(), Vec::new(), Vec::new())
        } else {
            let budgets = compile_budgets(snapshot);
            let offset = handle.random(potential.len());
            let num = self.calculate_num_candidates(potential.len());
            self.dry_run(state, pod, &potential, &budgets, offset, num, handle)
        };

        if candidates.is_empty() {
            if !errors.is_empty() {
                return (None, Status::error(aggregate(&errors)));
            }
            let absent = Status::unresolvable(NOT_HELPFUL);
            let missing = snapshot.len().saturating_sub(node_statuses.len());
            let statuses = node_statuses.iter().map(|(_, s)| s).chain(std::iter::repeat_n(&absent, missing));
            let msg = fit_error_message(snapshot.len(), statuses);
            // An empty nomination clears any earlier one, as upstream.
            let result = PostFilterResult { nominated_node_name: Some(String::new()), victims: Vec::new() };
            return (Some(result), Status::unschedulable(msg));
        }

        // HTTP extenders may trim the candidates (upstream's callExtenders); none left: no node to nominate.
        let candidates = match handle.call_extenders(pod, candidates) {
            Ok(c) if c.is_empty() => return (None, Status::unschedulable(NO_CANDIDATE)),
            Ok(c) => c,
            Err(s) => return (None, s),
        };
        let best = pick_one_node_for_preemption(&candidates);
        let Candidate { node, victims, .. } = candidates.into_iter().nth(best).expect("index from the candidates");
        // Since v1.35 upstream's success says where and what: the pod's FailedScheduling message ends with it.
        let found = format!("found a potential placement for pod on node {node}, preempting {} victims", victims.len());
        (Some(PostFilterResult { nominated_node_name: Some(node), victims }), Status::new(Code::Success, found))
    }

    /// Whether the pod's nominated node still holds lower-priority pods whose deletion a preemption sent and the
    /// cache has not seen yet (upstream's `PodEligibleToPreemptOthers`: a pod does not preempt again while pods
    /// terminating by preemption remain on its nominated node, unless that node cannot take it whatever happens).
    /// The nomination is the scheduler's own (the snapshot's), else the pod's `status.nominatedNodeName`.
    fn victims_terminating_on_nominated_node(
        &self,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        snapshot: &Snapshot,
    ) -> bool {
        let ours = snapshot.nominated.iter().find(|(_, pods)| pods.iter().any(|p| p.uid == pod.uid)).map(|(n, _)| n);
        let Some(name) = ours.map(String::as_str).or_else(|| pod.nominated_node_name()) else { return false };
        if filtered.get(name).is_some_and(|s| s.code() == Code::UnschedulableAndUnresolvable) {
            return false;
        }
        let Some(node) = snapshot.get(name) else { return false };
        node.pods.iter().any(|p| p.priority < pod.priority && self.preempting.is_terminating(&p.uid))
    }

    /// Tries the potential nodes from `offset` on, in order, until enough candidates are found (upstream
    /// `DryRunPreemption`, run sequentially). Returns the candidates (PDB-respecting ones first), the status of
    /// each node that is no candidate, and the error messages met.
    #[allow(clippy::too_many_arguments)]
    fn dry_run(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        potential: &[&Arc<NodeInfo>],
        budgets: &[Budget<'_>],
        offset: usize,
        num_candidates: usize,
        handle: &dyn PostFilterHandle,
    ) -> (Vec<Candidate>, Vec<(String, Status)>, Vec<String>) {
        let mut non_violating: Vec<Candidate> = Vec::new();
        let mut violating: Vec<Candidate> = Vec::new();
        let mut statuses = Vec::new();
        let mut errors = Vec::new();
        for i in 0..potential.len() {
            let original = potential[(offset + i) % potential.len()];
            let mut node = (**original).clone();
            let mut state = state.clone();
            let (victims, num_pdb_violations, mut status) =
                select_victims_on_node(&mut state, pod, &mut node, budgets, handle);
            if status.is_success() && !victims.is_empty() {
                let c = Candidate { node: node.name.clone(), victims, num_pdb_violations };
                // Upstream keeps at most `num_candidates` of each kind.
                let list = if num_pdb_violations == 0 { &mut non_violating } else { &mut violating };
                if list.len() < num_candidates {
                    list.push(c);
                }
                if !non_violating.is_empty() && non_violating.len() + violating.len() >= num_candidates {
                    break;
                }
                continue;
            }
            if status.is_success() {
                status = Status::error(format!("expected at least one victim pod on node {:?}", node.name));
            }
            if let Some(e) = status.as_error() {
                errors.push(e);
            }
            statuses.push((node.name.clone(), status));
        }
        non_violating.append(&mut violating);
        (non_violating, statuses, errors)
    }
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &str {
        NAME
    }
    /// Upstream registers no event unless asynchronous preemption is on: without it this plugin never rejects a
    /// pod by itself (the Filter plugins that did are the ones whose events requeue it). With it, an assigned
    /// pod's deletion, whose hint is always Skip: those Filter plugins, not this one, decide when to requeue.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        if !self.async_preemption {
            return Vec::new();
        }
        vec![ClusterEvent::new(EventResource::AssignedPod, action::DELETE)]
    }
    fn queueing_hint(
        &self,
        _pod: &PodInfo,
        _event: &ClusterEvent,
        _old: Option<&EventObject>,
        _new: Option<&EventObject>,
    ) -> QueueingHint {
        QueueingHint::QueueSkip
    }
    crate::serves!(pre_enqueue, post_filter);
}

impl PreEnqueuePlugin for DefaultPreemption {
    /// Holds a pod back while its own preemption's victims are being deleted (upstream's PreEnqueue with
    /// SchedulerAsyncPreemption; without it, Success).
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if self.async_preemption && self.preempting.is_running(&pod.uid) {
            return Status::unresolvable(WAITING_FOR_PREEMPTION);
        }
        Status::success()
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let (result, status) = self.preempt(state, pod, filtered, handle);
        let msg = status.message();
        if msg.is_empty() {
            return (result, status);
        }
        (result, Status::new(status.code(), format!("{MESSAGE_PREFIX}{msg}")))
    }
}

/// Upstream's FitError message over one status per node: `0/N nodes are available: <count> <reason>, ... .`
pub fn fit_error_message<'a>(num_all_nodes: usize, statuses: impl Iterator<Item = &'a Status>) -> String {
    let histogram = reason_histogram(statuses);
    if histogram.is_empty() {
        format!("0/{num_all_nodes} nodes are available:")
    } else {
        format!("0/{num_all_nodes} nodes are available: {histogram}.")
    }
}

fn preemption_policy_never(pod: &PodInfo) -> bool {
    pod.pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never")
}

/// Upstream's aggregate error text: one message as is, several (deduplicated) in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut seen = HashSet::new();
    let unique: Vec<&str> = errors.iter().map(String::as_str).filter(|e| seen.insert(*e)).collect();
    match unique.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Upstream `MoreImportantPod`: higher priority first, then the pod that started earlier.
fn more_important_first(a: &Arc<PodInfo>, b: &Arc<PodInfo>) -> std::cmp::Ordering {
    b.priority.cmp(&a.priority).then_with(|| a.start_time_secs().cmp(&b.start_time_secs()))
}

/// Finds the fewest pods to evict from `node` so that `pod` fits (upstream `SelectVictimsOnNode`). `state` and
/// `node` are the caller's copies and are changed. Returns the victims (most important first), how many of them
/// violate a PodDisruptionBudget, and the status.
fn select_victims_on_node(
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut NodeInfo,
    budgets: &[Budget<'_>],
    handle: &dyn PostFilterHandle,
) -> (Vec<Arc<PodInfo>>, usize, Status) {
    let mut potential: Vec<Arc<PodInfo>> = node.pods.iter().filter(|p| p.priority < pod.priority).cloned().collect();
    if potential.is_empty() {
        return (Vec::new(), 0, Status::unresolvable(NO_VICTIMS));
    }
    for p in &potential {
        if let Err(st) = remove_pod(state, pod, node, p, handle) {
            return (Vec::new(), 0, st);
        }
    }
    let status = handle.run_filter_plugins_with_nominated_pods(state, pod, node);
    if !status.is_success() {
        return (Vec::new(), 0, status);
    }

    potential.sort_by(more_important_first);
    let (violating, non_violating) = split_by_pdb_violation(potential, budgets);
    let both = !violating.is_empty() && !non_violating.is_empty();
    let mut victims = Vec::new();
    let mut num_violations = 0;
    for (p, is_violating) in violating.iter().map(|p| (p, true)).chain(non_violating.iter().map(|p| (p, false))) {
        node.add_pod(p.clone());
        let st = handle.run_pre_filter_add_pod(state, pod, p, node);
        if !st.is_success() {
            return (Vec::new(), 0, Status::error(st.message()));
        }
        if handle.run_filter_plugins_with_nominated_pods(state, pod, node).is_success() {
            continue;
        }
        if let Err(st) = remove_pod(state, pod, node, p, handle) {
            return (Vec::new(), 0, st);
        }
        victims.push(p.clone());
        if is_violating {
            num_violations += 1;
        }
    }
    if both {
        victims.sort_by(more_important_first);
    }
    (victims, num_violations, Status::success())
}

fn remove_pod(
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut NodeInfo,
    victim: &Arc<PodInfo>,
    handle: &dyn PostFilterHandle,
) -> Result<(), Status> {
    if !node.remove_pod(&victim.uid) {
        return Err(Status::error(format!("pod {} is not on node {}", victim.key(), node.name)));
    }
    let st = handle.run_pre_filter_remove_pod(state, pod, victim, node);
    if st.is_success() {
        Ok(())
    } else {
        Err(Status::error(st.message()))
    }
}

/// The PDBs that can match a pod (valid, non-empty selector) with the disruptions each allows: the status's
/// `disruptionsAllowed` when the PDB has a status, else computed from its spec over the pods in the snapshot.
fn compile_budgets(snapshot: &Snapshot) -> Vec<Budget<'_>> {
    let mut out = Vec::new();
    for pdb in &snapshot.objects.pdbs {
        let Some(spec) = pdb.spec.as_ref() else { continue };
        // Upstream treats an invalid, missing or empty selector as matching no pod.
        let Ok(selector) = Selector::from_optional(spec.selector.as_ref()) else { continue };
        if matches!(selector, Selector::Nothing) || selector.is_everything() {
            continue;
        }
        let allowed = match pdb.status.as_ref() {
            // Go reads an unset int32 as 0.
            Some(st) => st.disruptions_allowed.unwrap_or(0),
            None => match computed_disruptions_allowed(pdb, &selector, snapshot) {
                Some(a) => a,
                None => continue,
            },
        };
        out.push(Budget { pdb, selector, allowed });
    }
    out
}

/// What the disruption controller would publish for a PDB without status: the matching pods bound in the
/// snapshot count as both expected and healthy. `None` for an unreadable minAvailable/maxUnavailable.
fn computed_disruptions_allowed(pdb: &PodDisruptionBudget, selector: &Selector, snapshot: &Snapshot) -> Option<i32> {
    let ns = pdb.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pdb.spec.as_ref()?;
    let matching = snapshot
        .nodes()
        .iter()
        .flat_map(|n| n.pods.iter())
        .filter(|p| p.namespace == ns && selector.matches(p.labels()))
        .count();
    let expected = i32::try_from(matching).unwrap_or(i32::MAX);
    let desired = if let Some(mu) = &spec.max_unavailable {
        (expected - scaled_value(mu, expected)?).max(0)
    } else if let Some(ma) = &spec.min_available {
        scaled_value(ma, expected)?
    } else {
        0
    };
    Some((expected - desired).max(0))
}

/// An int, or a percentage of `total` rounded up (upstream `GetScaledValueFromIntOrPercent` with roundUp).
fn scaled_value(v: &IntOrString, total: i32) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            let scaled = (pct * i64::from(total)).checked_add(99)?.div_euclid(100);
            i32::try_from(scaled).ok()
        }
    }
}

/// Counts a pod's eviction against the budgets that select it (unless a budget already lists it as disrupted);
/// true when one of them is exceeded. `stop_at_first` ends the count at the first budget exceeded (pod group
/// preemption), otherwise every matching budget is charged (single-pod preemption), as upstream's two paths do.
fn charge_budgets(budgets: &[Budget<'_>], allowed: &mut [i32], p: &PodInfo, stop_at_first: bool) -> bool {
    if p.labels().is_empty() {
        return false;
    }
    let mut violated = false;
    for (i, b) in budgets.iter().enumerate() {
        if b.pdb.metadata.namespace.as_deref().unwrap_or("default") != p.namespace || !b.selector.matches(p.labels()) {
            continue;
        }
        let disrupted = b.pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
        if disrupted.is_some_and(|d| d.contains_key(&p.name)) {
            continue;
        }
        allowed[i] -= 1;
        if allowed[i] < 0 {
            violated = true;
            if stop_at_first {
                break;
            }
        }
    }
    violated
}

/// Splits pods (kept in order) into those whose eviction would exceed a PDB's allowed disruptions and the others
/// (upstream `filterPodsWithPDBViolation`). The budgets are counted down as pods are assigned to them.
fn split_by_pdb_violation(pods: Vec<Arc<PodInfo>>, budgets: &[Budget<'_>]) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for p in pods {
        let violated = charge_budgets(budgets, &mut allowed, &p, false);
        if violated {
            violating.push(p);
        } else {
            non_violating.push(p);
        }
    }
    (violating, non_violating)
}

/// Upstream `FilterVictimsWithPDBViolation` for pod group preemption: splits victims (each the pods evicted
/// together, in order) into those whose eviction would exceed a PodDisruptionBudget's allowed disruptions, with
/// how many of their pods would, and the others; indices into `victims`, order kept. A victim is violating as a
/// whole when any of its pods is; the budgets are counted down as pods are matched to them.
pub fn split_victims_by_pdb_violation(
    victims: &[&[Arc<PodInfo>]],
    snapshot: &Snapshot,
) -> (Vec<(usize, usize)>, Vec<usize>) {
    let budgets = compile_budgets(snapshot);
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
    // Upstream stops at the first budget exceeded here.
    let mut violates = |p: &PodInfo| charge_budgets(&budgets, &mut allowed, p, true);
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for (i, pods) in victims.iter().enumerate() {
        let count = pods.iter().filter(|p| violates(p)).count();
        if count > 0 {
            violating.push((i, count));
        } else {
            non_violating.push(i);
        }
    }
    (violating, non_violating)
}

/// Upstream `pickOneNodeForPreemption`: fewest PDB violations, then the lowest highest-victim priority, then the
/// smallest sum of priorities (each shifted by 2^31 so that more negative-priority victims still weigh more), then
/// the fewest victims, then the latest start among the highest-priority victims, then the first candidate.
fn pick_one_node_for_preemption(candidates: &[Candidate]) -> usize {
    let key = |c: &Candidate| {
        let highest = c.victims.first().map_or(i32::MIN, |p| p.priority);
        let sum: i64 = c.victims.iter().map(|p| i64::from(p.priority) + (1i64 << 31)).sum();
        let earliest_of_highest =
            c.victims.iter().filter(|p| p.priority == highest).map(|p| p.start_time_secs()).min().unwrap_or(i64::MIN);
        (c.num_pdb_violations, highest, sum, c.victims.len(), std::cmp::Reverse(earliest_of_highest))
    };
    candidates.iter().enumerate().min_by_key(|(_, c)| key(c)).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::ClusterObjects;
    use crate::plugins::testutil::{ctx, node_with_pods, pod};
    use serde_json::json;
    use std::cell::RefCell;

    /// A handle whose only filter is "requested cpu + pod cpu ≤ allocatable cpu"; it logs PreFilter add/remove
    /// calls and the node count asked of `random`.
    struct TestHandle {
        snapshot: Snapshot,
        offset: usize,
        log: RefCell<Vec<String>>,
    }

    impl TestHandle {
        fn new(nodes: Vec<NodeInfo>, pdbs: Vec<serde_json::Value>, offset: usize) -> TestHandle {
            let mut snapshot = Snapshot::from_nodes(nodes);
            let pdbs = pdbs.into_iter().map(|v| serde_json::from_value(v).expect("pdb json")).collect();
            snapshot.objects = Arc::new(ClusterObjects { pdbs, ..Default::default() });
            TestHandle { snapshot, offset, log: RefCell::new(Vec::new()) }
        }
        fn log(&self) -> Vec<String> {
            self.log.borrow().clone()
        }
    }

    impl PostFilterHandle for TestHandle {
        fn snapshot(&self) -> &Snapshot {
            &self.snapshot
        }
        fn run_filter_plugins_with_nominated_pods(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
            if node.requested.milli_cpu + pod.requests.milli_cpu <= node.allocatable.milli_cpu {
                Status::success()
            } else {
                Status::unschedulable("Insufficient cpu")
            }
        }
        fn run_pre_filter_add_pod(
            &self,
            _: &mut CycleState,
            _: &PodInfo,
            add: &Arc<PodInfo>,
            node: &NodeInfo,
        ) -> Status {
            self.log.borrow_mut().push(format!("add {} {}", node.name, add.name));
            Status::success()
        }
        fn run_pre_filter_remove_pod(
            &self,
            _: &mut CycleState,
            _: &PodInfo,
            remove: &Arc<PodInfo>,
            node: &NodeInfo,
        ) -> Status {
            self.log.borrow_mut().push(format!("remove {} {}", node.name, remove.name));
            Status::success()
        }
        fn random(&self, n: usize) -> usize {
            self.log.borrow_mut().push(format!("random {n}"));
            self.offset % n
        }
    }

    /// A pod with a priority, a cpu request in millicores, labels and a start time (seconds since the epoch).
    fn pd(name: &str, priority: i32, cpu: i64, labels: serde_json::Value, start: i64) -> PodInfo {
        let start = jiff_free_rfc3339(start);
        pod(json!({
            "metadata": {"name": name, "uid": name, "namespace": "default", "labels": labels},
            "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": format!("{cpu}m")}}}]},
            "status": {"startTime": start}
        }))
    }

    fn low(name: &str, priority: i32, cpu: i64) -> PodInfo {
        pd(name, priority, cpu, json!({}), 1000)
    }

    /// RFC 3339 for whole seconds since the epoch (tests use small values).
    fn jiff_free_rfc3339(secs: i64) -> String {
        let (d, s) = (secs / 86_400, secs % 86_400);
        assert!(d < 28, "test start times stay within January 1970");
        format!("1970-01-{:02}T{:02}:{:02}:{:02}Z", d + 1, s / 3600, s / 60 % 60, s % 60)
    }

    fn nd(name: &str, cpu: i64, pods: Vec<PodInfo>) -> NodeInfo {
        node_with_pods(
            json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": format!("{cpu}m"), "pods": "110"}}}),
            pods,
        )
    }

    fn preemptor(priority: i32, cpu: i64) -> PodInfo {
        low("preemptor", priority, cpu)
    }

    fn unsched(names: &[&str]) -> NodeToStatus {
        names.iter().map(|n| (n.to_string(), Status::unschedulable("Insufficient cpu"))).collect()
    }

    fn plugin(args: serde_json::Value) -> DefaultPreemption {
        DefaultPreemption::new(Some(&args), &ctx()).expect("args")
    }

    fn names(victims: &[Arc<PodInfo>]) -> Vec<&str> {
        victims.iter().map(|p| p.name.as_str()).collect()
    }

    struct Case {
        name: &'static str,
        nodes: Vec<NodeInfo>,
        pdbs: Vec<serde_json::Value>,
        filtered: NodeToStatus,
        pod: PodInfo,
        offset: usize,
        args: serde_json::Value,
        /// `Ok((node, victims))` for a nomination, `Err((code, message))` otherwise.
        want: Result<(&'static str, Vec<&'static str>), (Code, &'static str)>,
    }

    fn run(c: Case) -> TestHandle {
        let h = TestHandle::new(c.nodes, c.pdbs, c.offset);
        let (res, st) = plugin(c.args).post_filter(&CycleState::new(), &c.pod, &c.filtered, &h);
        match c.want {
            Ok((node, victims)) => {
                assert!(st.is_success(), "{}: {st}", c.name);
                let res = res.unwrap_or_else(|| panic!("{}: no result", c.name));
                assert_eq!(res.nominated_node_name.as_deref(), Some(node), "{}", c.name);
                assert_eq!(names(&res.victims), victims, "{}", c.name);
            }
            Err((code, msg)) => {
                assert_eq!(st.code(), code, "{}: {st}", c.name);
                assert_eq!(st.message(), msg, "{}", c.name);
                if let Some(r) = res {
                    assert_eq!(r.nominated_node_name.as_deref(), Some(""), "{}: clears the nomination", c.name);
                    assert!(r.victims.is_empty(), "{}", c.name);
                }
            }
        }
        h
    }

    fn pdb(
        selector: serde_json::Value,
        spec: serde_json::Value,
        status: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut spec = spec;
        spec["selector"] = selector;
        let mut v = json!({"metadata": {"name": "pdb", "namespace": "default"}, "spec": spec});
        if let Some(s) = status {
            v["status"] = s;
        }
        v
    }

    fn status(allowed: i32, disrupted: serde_json::Value) -> Option<serde_json::Value> {
        Some(json!({"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
            "disruptedPods": disrupted}))
    }

    /// n1 holds a db pod of priority 10, n2 a web pod of priority 20; without PDBs n1 wins.
    fn pdb_case(name: &'static str, pdbs: Vec<serde_json::Value>, want: &'static str) -> Case {
        let victim = if want == "n1" { "db" } else { "web" };
        Case {
            name,
            nodes: vec![
                nd("n1", 1000, vec![pd("db", 10, 1000, json!({"app": "db"}), 1000)]),
                nd("n2", 1000, vec![pd("web", 20, 1000, json!({"app": "web"}), 1000)]),
            ],
            pdbs,
            filtered: unsched(&["n1", "n2"]),
            pod: preemptor(100, 1000),
            offset: 0,
            args: json!({}),
            want: Ok((want, vec![victim])),
        }
    }

    #[test]
    fn post_filter_table() {
        let db = json!({"matchLabels": {"app": "db"}});
        let cases = vec![
            Case {
                name: "picks the node whose victims have the lowest priority",
                nodes: vec![nd("n1", 1000, vec![low("a", 50, 1000)]), nd("n2", 1000, vec![low("b", 10, 1000)])],
                pdbs: vec![],
                filtered: unsched(&["n1", "n2"]),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Ok(("n2", vec!["b"])),
            },
            Case {
                name: "same choice whatever the random offset",
                nodes: vec![nd("n1", 1000, vec![low("a", 50, 1000)]), nd("n2", 1000, vec![low("b", 10, 1000)])],
                pdbs: vec![],
                filtered: unsched(&["n1", "n2"]),
                pod: preemptor(100, 1000),
                offset: 1,
                args: json!({}),
                want: Ok(("n2", vec!["b"])),
            },
            Case {
                name: "reprieve keeps the most important pods that still fit",
                nodes: vec![nd("n1", 3000, vec![low("x", 10, 1000), low("y", 20, 1000), low("z", 30, 1000)])],
                pdbs: vec![],
                filtered: unsched(&["n1"]),
                pod: preemptor(100, 2000),
                offset: 0,
                args: json!({}),
                want: Ok(("n1", vec!["y", "x"])),
            },
            Case {
                name: "higher and equal priority pods are never victims",
                nodes: vec![nd("n1", 3000, vec![low("hi", 200, 1000), low("eq", 100, 1000), low("lo", 1, 1000)])],
                pdbs: vec![],
                filtered: unsched(&["n1"]),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Ok(("n1", vec!["lo"])),
            },
            pdb_case("no PDB: lowest priority node", vec![], "n1"),
            pdb_case(
                "PDB status allows none: the other node",
                vec![pdb(db.clone(), json!({}), status(0, json!({})))],
                "n2",
            ),
            pdb_case("PDB status allows one", vec![pdb(db.clone(), json!({}), status(1, json!({})))], "n1"),
            pdb_case(
                "pod already in disruptedPods does not count",
                vec![pdb(db.clone(), json!({}), status(0, json!({"db": "1970-01-01T00:00:00Z"})))],
                "n1",
            ),
            pdb_case("no status, minAvailable 1 of 1", vec![pdb(db.clone(), json!({"minAvailable": 1}), None)], "n2"),
            pdb_case(
                "no status, minAvailable 50% rounds up",
                vec![pdb(db.clone(), json!({"minAvailable": "50%"}), None)],
                "n2",
            ),
            pdb_case("no status, maxUnavailable 1", vec![pdb(db.clone(), json!({"maxUnavailable": 1}), None)], "n1"),
            pdb_case(
                "no status, maxUnavailable 0%",
                vec![pdb(db.clone(), json!({"maxUnavailable": "0%"}), None)],
                "n2",
            ),
            pdb_case("empty selector matches nothing", vec![pdb(json!({}), json!({}), status(0, json!({})))], "n1"),
            pdb_case(
                "PDB in another namespace",
                vec![{
                    let mut p = pdb(db.clone(), json!({}), status(0, json!({})));
                    p["metadata"]["namespace"] = json!("other");
                    p
                }],
                "n1",
            ),
            Case {
                name: "a PDB-violating node is still used when it is the only one",
                nodes: vec![nd("n1", 1000, vec![pd("db", 10, 1000, json!({"app": "db"}), 1000)])],
                pdbs: vec![pdb(db.clone(), json!({}), status(0, json!({})))],
                filtered: unsched(&["n1"]),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Ok(("n1", vec!["db"])),
            },
            Case {
                name: "PDB-violating pods are reprieved first",
                // Evicting either pod makes room; db (violating) is tried first and kept, web goes.
                nodes: vec![nd(
                    "n1",
                    2000,
                    vec![
                        pd("db", 10, 1000, json!({"app": "db"}), 1000),
                        pd("web", 20, 1000, json!({"app": "web"}), 1000),
                    ],
                )],
                pdbs: vec![pdb(db.clone(), json!({}), status(0, json!({})))],
                filtered: unsched(&["n1"]),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Ok(("n1", vec!["web"])),
            },
            Case {
                name: "preemptionPolicy Never",
                nodes: vec![nd("n1", 1000, vec![low("a", 1, 1000)])],
                pdbs: vec![],
                filtered: unsched(&["n1"]),
                pod: pod(json!({"metadata": {"name": "p"}, "spec": {"priority": 100, "preemptionPolicy": "Never",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})),
                offset: 0,
                args: json!({}),
                want: Err((Code::Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.")),
            },
            Case {
                name: "no lower-priority pods: FitError over the per-node statuses",
                nodes: vec![
                    nd("n1", 1000, vec![low("hi", 200, 1000)]),
                    nd("n2", 1000, vec![low("eq", 100, 1000)]),
                    nd("n3", 1000, vec![low("lo", 1, 1000)]),
                    nd("n4", 500, vec![low("lo2", 1, 100)]),
                ],
                pdbs: vec![],
                filtered: {
                    let mut m = unsched(&["n1", "n2", "n4"]);
                    m.insert("n3".into(), Status::unresolvable("node(s) didn't match Pod's node affinity/selector"));
                    m
                },
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Err((
                    Code::Unschedulable,
                    "preemption: 0/4 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for \
                     scheduling, 2 No preemption victims found for incoming pod.",
                )),
            },
            Case {
                name: "UnschedulableAndUnresolvable nodes are not considered",
                nodes: vec![nd("n1", 1000, vec![low("a", 1, 1000)]), nd("n2", 1000, vec![low("b", 50, 1000)])],
                pdbs: vec![],
                filtered: {
                    let mut m = unsched(&["n2"]);
                    m.insert("n1".into(), Status::unresolvable("node(s) had untolerated taint"));
                    m
                },
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Ok(("n2", vec!["b"])),
            },
            Case {
                name: "nodes absent from the filter statuses are not considered",
                nodes: vec![nd("n1", 1000, vec![low("a", 1, 1000)])],
                pdbs: vec![],
                filtered: NodeToStatus::new(),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({}),
                want: Err((
                    Code::Unschedulable,
                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
                )),
            },
            Case {
                name: "stops at the first candidate when one is enough, starting at the offset",
                nodes: vec![
                    nd("n1", 1000, vec![low("a", 1, 1000)]),
                    nd("n2", 1000, vec![low("b", 50, 1000)]),
                    nd("n3", 1000, vec![low("c", 2, 1000)]),
                ],
                pdbs: vec![],
                filtered: unsched(&["n1", "n2", "n3"]),
                pod: preemptor(100, 1000),
                offset: 1,
                args: json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}),
                want: Ok(("n2", vec!["b"])),
            },
            Case {
                name: "keeps looking past PDB-violating candidates",
                nodes: vec![
                    nd("n1", 1000, vec![pd("db", 1, 1000, json!({"app": "db"}), 1000)]),
                    nd("n2", 1000, vec![low("b", 50, 1000)]),
                    nd("n3", 1000, vec![low("c", 60, 1000)]),
                ],
                pdbs: vec![pdb(db.clone(), json!({}), status(0, json!({})))],
                filtered: unsched(&["n1", "n2", "n3"]),
                pod: preemptor(100, 1000),
                offset: 0,
                args: json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}),
                want: Ok(("n2", vec!["b"])),
            },
        ];
        for c in cases {
            run(c);
        }
    }

    #[test]
    fn a_pod_does_not_preempt_again_while_its_nominated_node_holds_its_terminating_victims() {
        let context = ctx();
        let pl = DefaultPreemption::new(None, &context).expect("defaults");
        // node-a holds v1 and v2, whose deletion an earlier preemption sent; node-b holds w.
        let nodes = vec![
            nd("node-a", 1000, vec![low("v1", 0, 500), low("v2", 0, 500)]),
            nd("node-b", 1000, vec![low("w", 0, 1000)]),
        ];
        let mut h = TestHandle::new(nodes, Vec::new(), 0);
        let pre = Arc::new(preemptor(10, 1000));
        h.snapshot.nominated = Arc::new([("node-a".to_string(), vec![pre.clone()])].into_iter().collect());
        context.preempting.start("earlier", ["v1".to_string(), "v2".to_string()]);
        context.preempting.finish("earlier", []);
        let filtered = unsched(&["node-a", "node-b"]);
        let (res, st) = pl.post_filter(&CycleState::new(), &pre, &filtered, &h);
        assert!(res.is_none(), "the nomination stays");
        assert_eq!(
            (st.code(), st.message()),
            (Code::Unschedulable, format!("{MESSAGE_PREFIX}{TERMINATING_ON_NOMINATED}"))
        );
        // Unless the nominated node cannot take the pod whatever is evicted.
        let mut hopeless = filtered.clone();
        hopeless.insert("node-a".to_string(), Status::unresolvable("node(s) had untolerated taint"));
        let (res, st) = pl.post_filter(&CycleState::new(), &pre, &hopeless, &h);
        assert!(st.is_success(), "{st}");
        assert_eq!(res.and_then(|r| r.nominated_node_name).as_deref(), Some("node-b"));
        // One victim seen gone: the other still terminates there.
        context.preempting.pod_deleted("v1");
        assert_eq!(pl.post_filter(&CycleState::new(), &pre, &filtered, &h).1.code(), Code::Unschedulable);
        context.preempting.pod_deleted("v2");
        let (res, st) = pl.post_filter(&CycleState::new(), &pre, &filtered, &h);
        assert!(st.is_success(), "{st}");
        assert!(res.and_then(|r| r.nominated_node_name).is_some());
    }

    #[test]
    fn dry_run_calls_prefilter_extensions_and_examines_only_what_it_needs() {
        let h = run(Case {
            name: "log",
            nodes: vec![
                nd("n1", 2000, vec![low("x", 10, 1000), low("y", 20, 1000)]),
                nd("n2", 1000, vec![low("z", 5, 1000)]),
            ],
            pdbs: vec![],
            filtered: unsched(&["n1", "n2"]),
            pod: preemptor(100, 1000),
            offset: 1,
            args: json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}),
            want: Ok(("n2", vec!["z"])),
        });
        // random over the 2 potential nodes; offset 1 starts at n2, which is a candidate, so n1 is never examined.
        assert_eq!(h.log(), ["random 2", "remove n2 z", "add n2 z", "remove n2 z"]);

        let h = run(Case {
            name: "log reprieve",
            nodes: vec![nd("n1", 2000, vec![low("x", 10, 1000), low("y", 20, 1000)])],
            pdbs: vec![],
            filtered: unsched(&["n1"]),
            pod: preemptor(100, 1000),
            offset: 0,
            args: json!({}),
            want: Ok(("n1", vec!["x"])),
        });
        assert_eq!(h.log(), ["random 1", "remove n1 x", "remove n1 y", "add n1 y", "add n1 x", "remove n1 x"]);
    }

    #[test]
    fn pick_one_node_tie_breaks() {
        let c = |node: &str, violations: usize, victims: &[(i32, i64)]| Candidate {
            node: node.into(),
            victims: victims
                .iter()
                .enumerate()
                .map(|(i, &(prio, start))| Arc::new(pd(&format!("{node}-{i}"), prio, 100, json!({}), start)))
                .collect(),
            num_pdb_violations: violations,
        };
        let cases: Vec<(&str, Vec<Candidate>, &str)> = vec![
            ("fewest PDB violations", vec![c("a", 1, &[(1, 10)]), c("b", 0, &[(50, 10)])], "b"),
            ("lowest highest priority", vec![c("a", 0, &[(50, 10)]), c("b", 0, &[(40, 10), (40, 10)])], "b"),
            ("smallest sum", vec![c("a", 0, &[(10, 10), (10, 10)]), c("b", 0, &[(10, 10), (5, 10)])], "b"),
            // Without the 2^31 shift, a's sum (-10) would be smaller than b's (-5).
            ("sum with negative priorities", vec![c("a", 0, &[(-5, 10), (-5, 10)]), c("b", 0, &[(-5, 10)])], "b"),
            // Sums tie only with extreme priorities: 0 + MIN + 2*2^31 == 0 + 2^31.
            ("fewest victims", vec![c("a", 0, &[(0, 10), (i32::MIN, 10)]), c("b", 0, &[(0, 10)])], "b"),
            ("latest start of the highest", vec![c("a", 0, &[(10, 100)]), c("b", 0, &[(10, 200)])], "b"),
            (
                "start of the earliest highest-priority victim",
                vec![c("a", 0, &[(10, 300), (10, 50), (1, 1)]), c("b", 0, &[(10, 200), (10, 100), (1, 1)])],
                "b",
            ),
            ("first on a full tie", vec![c("a", 0, &[(10, 10)]), c("b", 0, &[(10, 10)])], "a"),
        ];
        for (name, cands, want) in cases {
            assert_eq!(cands[pick_one_node_for_preemption(&cands)].node, want, "{name}");
        }
    }

    #[test]
    fn args_table() {
        let cases = [
            (json!(null), Ok((10, 100))),
            (json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5}), Ok((0, 5))),
            (json!({"minCandidateNodesPercentage": 101}), Err("minCandidateNodesPercentage")),
            (json!({"minCandidateNodesPercentage": -1}), Err("minCandidateNodesPercentage")),
            (json!({"minCandidateNodesAbsolute": -1}), Err("minCandidateNodesAbsolute")),
            (json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}), Err("cannot be zero")),
            (json!({"minCandidateNodes": 1}), Err("unknown field")),
        ];
        for (args, want) in cases {
            let got = DefaultPreemption::new(Some(&args), &ctx());
            match (got, want) {
                (Ok(p), Ok((pct, abs))) => {
                    assert_eq!((p.args.min_candidate_nodes_percentage, p.args.min_candidate_nodes_absolute), (pct, abs))
                }
                (Err(e), Err(w)) => assert!(e.contains(w), "{args}: {e}"),
                (got, want) => panic!("{args}: got {:?}, want {want:?}", got.map(|p| p.args)),
            }
        }
    }

    #[test]
    fn num_candidates_table() {
        let cases = [(10, 100, 50, 50), (10, 100, 5000, 500), (50, 1, 10, 5), (0, 3, 10, 3), (10, 0, 5, 0)];
        for (pct, abs, nodes, want) in cases {
            let p = plugin(json!({"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": abs}));
            assert_eq!(p.calculate_num_candidates(nodes), want, "{pct}% / {abs} of {nodes}");
        }
    }

    #[test]
    fn fit_error_message_counts_and_sorts() {
        let a = Status::unschedulable("Insufficient cpu");
        let b =
            Status::with_reasons(Code::Unschedulable, vec!["Insufficient cpu".into(), "Insufficient memory".into()]);
        let c = Status::unresolvable("node(s) had untolerated taint");
        let msg = fit_error_message(5, [&a, &b, &c, &c, &c].into_iter());
        assert_eq!(
            msg,
            "0/5 nodes are available: 1 Insufficient memory, 2 Insufficient cpu, 3 node(s) had untolerated taint."
        );
        assert_eq!(fit_error_message(0, std::iter::empty()), "0/0 nodes are available:");
    }

    #[test]
    fn empty_cluster_is_an_error() {
        let h = TestHandle::new(vec![], vec![], 0);
        let (res, st) = plugin(json!({})).post_filter(&CycleState::new(), &preemptor(1, 1), &NodeToStatus::new(), &h);
        assert!(res.is_none());
        assert_eq!(st.code(), Code::Error);
        assert_eq!(st.message(), "preemption: no nodes available");
    }
}
