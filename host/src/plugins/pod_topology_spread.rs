//! PodTopologySpread: spreads pods matching a selector evenly across topology domains (zones, hosts ...), as
//! upstream's `podtopologyspread` plugin. Hard constraints (`DoNotSchedule`) are enforced by PreFilter/Filter,
//! soft ones (`ScheduleAnyway`) ranked by PreScore/Score/NormalizeScore. Pods without constraints get the
//! plugin's default constraints, with a selector taken from the Services and the controller that own them.
//!
//! All counting is done once per pod (PreFilter, PreScore); Filter and Score only look the counts up.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Toleration, TopologySpreadConstraint};
use serde::Deserialize;

use crate::cache::{ClusterObjects, Snapshot};
use crate::framework::labels::{Labels, Requirement, Selector};
use crate::framework::{
    action, ClusterEvent, CycleState, EventResource, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};
use crate::plugins::node_affinity::RequiredNodeAffinity;
use crate::plugins::taint_toleration::{find_matching_untolerated_taint, is_do_not_schedule_taint};
use crate::plugins::{decode_args, PluginContext};

/// The plugin's name in profiles.
pub const NAME: &str = "PodTopologySpread";
/// Filter reason when placing the pod on the node would exceed a constraint's maxSkew (upstream's wording).
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter reason when the node lacks the topology key of a hard constraint.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// The well-known hostname label.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The well-known zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";

const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";
const SYSTEM_DEFAULTING: &str = "System";
const LIST_DEFAULTING: &str = "List";

/// The plugin's args (`PodTopologySpreadArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints applied to pods that set none (only with `defaultingType: List`).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` (the built-in defaults, the default) or `List` (`defaultConstraints`).
    #[serde(default)]
    pub defaulting_type: Option<String>,
}

/// The PodTopologySpread plugin.
#[derive(Debug)]
pub struct PodTopologySpread {
    default_constraints: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
}

/// The built-in default constraints (`defaultingType: System`).
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    vec![
        TopologySpreadConstraint {
            max_skew: 3,
            topology_key: LABEL_HOSTNAME.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
        TopologySpreadConstraint {
            max_skew: 5,
            topology_key: LABEL_ZONE.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        },
    ]
}

impl PodTopologySpread {
    /// Builds the plugin from its args; invalid args are an error naming the field.
    pub fn new(args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<PodTopologySpread, String> {
        let args: PodTopologySpreadArgs = decode_args(args)?;
        validate_args(&args)?;
        let system = args.defaulting_type.as_deref().unwrap_or(SYSTEM_DEFAULTING) == SYSTEM_DEFAULTING;
        Ok(PodTopologySpread {
            default_constraints: if system { system_default_constraints() } else { args.default_constraints },
            system_defaulted: system,
        })
    }

    /// The pod's constraints of one kind (`DoNotSchedule` or `ScheduleAnyway`), or the default ones.
    fn constraints(&self, pod: &PodInfo, action: &str, objects: &ClusterObjects) -> Result<Vec<Constraint>, String> {
        let own = pod_constraints(pod);
        if !own.is_empty() {
            return compile_constraints(own, pod.labels(), action);
        }
        let mut cs = compile_constraints(&self.default_constraints, pod.labels(), action)?;
        if cs.is_empty() {
            return Ok(cs);
        }
        let sel = default_selector(pod, objects);
        if sel.is_empty() {
            return Ok(Vec::new());
        }
        for c in &mut cs {
            c.selector = Selector::All(sel.clone());
        }
        Ok(cs)
    }
}

fn pod_constraints(pod: &PodInfo) -> &[TopologySpreadConstraint] {
    pod.pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or(&[])
}

// ---------------------------------------------------------------------------------------------------------------
// Args validation

fn validate_args(args: &PodTopologySpreadArgs) -> Result<(), String> {
    let mut errs = Vec::new();
    let dt = args.defaulting_type.as_deref().unwrap_or(SYSTEM_DEFAULTING);
    if dt != SYSTEM_DEFAULTING && dt != LIST_DEFAULTING {
        errs.push(format!("defaultingType: Unsupported value: {dt:?}: supported values: \"List\", \"System\""));
    } else if dt == SYSTEM_DEFAULTING && !args.default_constraints.is_empty() {
        errs.push(format!("defaultingType: Invalid value: {dt:?}: when .defaultConstraints are not empty"));
    }
    for (i, c) in args.default_constraints.iter().enumerate() {
        let p = format!("defaultConstraints[{i}]");
        if c.max_skew <= 0 {
            errs.push(format!("{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)", c.max_skew));
        }
        if c.topology_key.is_empty() {
            errs.push(format!("{p}.topologyKey: Required value: can not be empty"));
        } else if let Err(e) = validate_label_name(&c.topology_key) {
            errs.push(format!("{p}.topologyKey: Invalid value: {:?}: {e}", c.topology_key));
        }
        match c.when_unsatisfiable.as_str() {
            "" => errs.push(format!("{p}.whenUnsatisfiable: Required value: can not be empty")),
            DO_NOT_SCHEDULE | SCHEDULE_ANYWAY => {}
            v => errs.push(format!(
                "{p}.whenUnsatisfiable: Unsupported value: {v:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
            )),
        }
        if c.label_selector.is_some() {
            errs.push(format!(
                "{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
            ));
        }
        let dup = args.default_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
        if dup {
            errs.push(format!(
                "defaultConstraints[{i}]: Duplicate value: \"{{{}, {}}}\"",
                c.topology_key, c.when_unsatisfiable
            ));
        }
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// Checks a qualified label name (`[prefix/]name`), as the API server does.
fn validate_label_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                    with an alphanumeric character (at most 63 characters)"
            .to_string());
    }
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.starts_with(alnum)
                && l.ends_with(alnum)
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Err("prefix part must be a lowercase RFC 1123 subdomain".to_string());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// Constraints

/// A compiled spread constraint.
#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i32,
    topology_key: String,
    selector: Selector,
    min_domains: i32,
    honor_node_affinity: bool,
    honor_taints: bool,
}

fn compile_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: &Labels,
    action: &str,
) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    for c in constraints.iter().filter(|c| c.when_unsatisfiable == action) {
        let mut selector = Selector::from_optional(c.label_selector.as_ref())?;
        // matchLabelKeys: the pod's values for those keys narrow the selector.
        let extra: Vec<Requirement> = c
            .match_label_keys
            .iter()
            .flatten()
            .filter_map(|k| pod_labels.get(k).map(|v| Requirement::In(k.clone(), vec![v.clone()])))
            .collect();
        if !extra.is_empty() {
            selector = match selector {
                Selector::All(mut reqs) => {
                    reqs.extend(extra);
                    Selector::All(reqs)
                }
                // A missing selector has no requirements to keep: the merged selector is the key values alone.
                Selector::Nothing => Selector::All(extra),
            };
        }
        out.push(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(out)
}

/// The selector requirements for default spreading: the selectors of the Services selecting the pod and of its
/// controlling ReplicationController, ReplicaSet or StatefulSet, all in the pod's namespace. Empty: no default
/// spreading for this pod.
fn default_selector(pod: &PodInfo, objects: &ClusterObjects) -> Vec<Requirement> {
    let labels = pod.labels();
    let mut set: BTreeMap<&str, &str> = BTreeMap::new();
    for svc in &objects.services {
        if svc.metadata.namespace.as_deref().unwrap_or("default") != pod.namespace {
            continue;
        }
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else { continue };
        if sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            set.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
    }
    let to_reqs = |set: &BTreeMap<&str, &str>| -> Vec<Requirement> {
        set.iter().map(|(k, v)| Requirement::In(k.to_string(), vec![v.to_string()])).collect()
    };
    let owner = pod.pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    let Some(owner) = owner else { return to_reqs(&set) };
    let same = |ns: &Option<String>, name: &Option<String>| {
        ns.as_deref().unwrap_or("default") == pod.namespace && name.as_deref() == Some(owner.name.as_str())
    };
    let extend_with = |mut reqs: Vec<Requirement>,
                       sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
        if let Ok(Selector::All(more)) = Selector::from_label_selector(sel) {
            reqs.extend(more);
        }
        reqs
    };
    match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            if let Some(rc) =
                objects.replication_controllers.iter().find(|r| same(&r.metadata.namespace, &r.metadata.name))
            {
                if let Some(sel) = rc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
                    set.extend(sel.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                }
            }
            to_reqs(&set)
        }
        ("apps/v1", "ReplicaSet") => {
            match objects.replica_sets.iter().find(|r| same(&r.metadata.namespace, &r.metadata.name)) {
                Some(rs) => match rs.spec.as_ref() {
                    Some(spec) => extend_with(to_reqs(&set), &spec.selector),
                    None => to_reqs(&set),
                },
                None => to_reqs(&set),
            }
        }
        ("apps/v1", "StatefulSet") => {
            match objects.stateful_sets.iter().find(|s| same(&s.metadata.namespace, &s.metadata.name)) {
                Some(ss) => match ss.spec.as_ref() {
                    Some(spec) => extend_with(to_reqs(&set), &spec.selector),
                    None => to_reqs(&set),
                },
                None => to_reqs(&set),
            }
        }
        _ => to_reqs(&set),
    }
}

/// True when the node has a NoSchedule or NoExecute taint the pod does not tolerate.
fn has_untolerated_taint(node: &NodeInfo, tolerations: &[Toleration]) -> bool {
    find_matching_untolerated_taint(node.taints(), tolerations, is_do_not_schedule_taint).is_some()
}

/// The per-node inclusion check of a constraint (`nodeAffinityPolicy`, `nodeTaintsPolicy`). `affinity_ok` is the
/// node's answer to the pod's required node affinity, computed once per node.
fn included(c: &Constraint, affinity_ok: bool, node: &NodeInfo, tolerations: &[Toleration]) -> bool {
    (!c.honor_node_affinity || affinity_ok) && (!c.honor_taints || !has_untolerated_taint(node, tolerations))
}

fn has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// Pods in `ns` matching `selector`, terminating pods excluded.
fn count_matching(pods: &[Arc<PodInfo>], selector: &Selector, ns: &str) -> i64 {
    pods.iter()
        .filter(|p| p.namespace == ns && p.pod.metadata.deletion_timestamp.is_none() && selector.matches(p.labels()))
        .count() as i64
}

// ---------------------------------------------------------------------------------------------------------------
// PreFilter / Filter

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
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: the number of eligible domains.
    domains: Vec<usize>,
}

impl PreFilterState {
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
        // Domains in the order first seen (deterministic critical paths), borrowed from the snapshot.
        let mut domains: Vec<Vec<(&str, i64)>> = vec![Vec::new(); constraints.len()];
        let mut index: Vec<HashMap<&str, usize>> = vec![HashMap::new(); constraints.len()];
        for node in snapshot.nodes() {
            let labels = node.labels();
            if !has_all_keys(labels, &constraints) {
                continue;
            }
            let affinity_ok = node_affinity.matches(&node.name, node.labels());
            for (i, c) in constraints.iter().enumerate() {
                if !included(c, affinity_ok, node, tolerations) {
                    continue;
                }
                let v = labels[&c.topology_key].as_str();
                let n = count_matching(&node.pods, &c.selector, &pod.namespace);
                let d = &mut domains[i];
                let at = *index[i].entry(v).or_insert_with(|| {
                    d.push((v, 0));
                    d.len() - 1
                });
                d[at].1 += n;
            }
        }
        let mut s = PreFilterState {
            self_match: Arc::new(constraints.iter().map(|c| c.selector.matches(pod.labels())).collect()),
            constraints: Arc::new(constraints),
            node_affinity: Arc::new(node_affinity),
            paths: Vec::with_capacity(domains.len()),
            counts: Vec::with_capacity(domains.len()),
            domains: domains.iter().map(Vec::len).collect(),
        };
        for d in &domains {
            let mut paths = CriticalPaths::<&str>::new();
            for &(v, n) in d {
                paths.update(v, n);
            }
            let [(v0, n0), (v1, n1)] = paths.paths;
            s.paths.push(CriticalPaths { paths: [(v0.to_string(), n0), (v1.to_string(), n1)] });
            s.counts.push(d.iter().filter(|(_, n)| *n != 0).map(|(v, n)| (v.to_string(), *n)).collect());
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
        _snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_add, pod, node, 1);
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
        _snapshot: &Snapshot,
    ) -> Status {
        match state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => {
                s.update_with_pod(pod_to_remove, pod, node, -1);
                Status::success()
            }
            None => missing(PRE_FILTER_STATE_KEY),
        }
    }
}

fn missing(key: &str) -> Status {
    Status::error(format!("reading {key:?} from cycleState: not found"))
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

// ---------------------------------------------------------------------------------------------------------------
// PreScore / Score / NormalizeScore

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
            let mut cache: Vec<Option<i64>> = vec![None; constraints.len()];
            for node in snapshot.nodes() {
                let labels = node.labels();
                if require_all && !has_all_keys(labels, &constraints) {
                    continue;
                }
                let affinity_ok = node_affinity.matches(&node.name, node.labels());
                cache.fill(None);
                let mut count = |i: usize| -> i64 {
                    let j = same_as[i];
                    *cache[j]
                        .get_or_insert_with(|| count_matching(&node.pods, &constraints[j].selector, &pod.namespace))
                };
                for (i, c) in constraints.iter().enumerate() {
                    if c.topology_key == LABEL_HOSTNAME {
                        // Per-node counts ignore the inclusion policies, as upstream's Score.
                        if labels.contains_key(LABEL_HOSTNAME) && feasible.contains(node.name.as_str()) {
                            let n = count(i);
                            if n != 0 {
                                host_counts[i].push((node.name.as_str(), n));
                            }
                        }
                        continue;
                    }
                    if !included(c, affinity_ok, node, tolerations) {
                        continue;
                    }
                    let v = labels.get(&c.topology_key).map_or("", String::as_str);
                    if domains[i].contains_key(v) {
                        let n = count(i);
                        if let Some(cnt) = domains[i].get_mut(v) {
                            *cnt += n;
                        }
                    }
                }
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

impl Plugin for PodTopologySpread {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, action::ADD | action::UPDATE_LABEL | action::DELETE),
            ClusterEvent::new(
                EventResource::Node,
                action::ADD | action::DELETE | action::UPDATE_LABEL | action::UPDATE_TAINT,
            ),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testutil::{ctx, node, node_with_pods, pod};
    use serde_json::{json, Value};

    fn node_json(name: &str, zone: Option<&str>) -> Value {
        let mut labels = json!({ LABEL_HOSTNAME: name });
        if let Some(z) = zone {
            labels["zone"] = json!(z);
        }
        json!({"metadata": {"name": name, "labels": labels}})
    }

    /// An existing pod in `ns` with labels.
    fn epod(name: &str, ns: &str, labels: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels}}))
    }

    fn foo(name: &str) -> PodInfo {
        epod(name, "default", json!({"foo": ""}))
    }

    /// A constraint on `key` selecting pods with a `foo` label, plus extra fields.
    fn constraint(max_skew: i32, key: &str, when: &str, extra: Value) -> Value {
        let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    /// The incoming pod: labels, constraints and extra spec fields.
    fn incoming(labels: Value, constraints: Vec<Value>, spec: Value) -> PodInfo {
        let mut s = json!({"topologySpreadConstraints": constraints});
        for (k, v) in spec.as_object().unwrap() {
            s[k] = v.clone();
        }
        pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": labels}, "spec": s}))
    }

    /// Nodes a, b (zone z1), x, y (zone z2), each with its pods; `no_zone` names nodes without the zone label and
    /// `tainted` nodes with a NoSchedule taint.
    fn cluster(pods: Vec<(&str, PodInfo)>, no_zone: &[&str], tainted: &[&str]) -> Snapshot {
        let nodes = [("a", "z1"), ("b", "z1"), ("x", "z2"), ("y", "z2")]
            .into_iter()
            .map(|(n, z)| {
                let mut j = node_json(n, (!no_zone.contains(&n)).then_some(z));
                if tainted.contains(&n) {
                    j["spec"] = json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]});
                }
                let mine = pods.iter().filter(|(on, _)| *on == n).map(|(_, p)| p.clone()).collect();
                node_with_pods(j, mine)
            })
            .collect();
        Snapshot::from_nodes(nodes)
    }

    fn plugin(args: Value) -> PodTopologySpread {
        PodTopologySpread::new(Some(&args), &ctx()).unwrap()
    }

    /// Runs PreFilter then Filter on every node: "ok", "skew", "label", or "skip" for all when PreFilter skipped.
    fn filter_all(pl: &PodTopologySpread, p: &PodInfo, snap: &Snapshot) -> Vec<&'static str> {
        let mut state = CycleState::new();
        let (_, st) = pl.pre_filter(&mut state, p, snap);
        if st.is_skip() {
            return vec!["skip"; snap.len()];
        }
        assert!(st.is_success(), "{st}");
        filter_nodes(pl, &state, p, snap)
    }

    fn filter_nodes(pl: &PodTopologySpread, state: &CycleState, p: &PodInfo, snap: &Snapshot) -> Vec<&'static str> {
        snap.nodes()
            .iter()
            .map(|n| {
                let st = pl.filter(state, p, n);
                match st.code() {
                    Code::Success => "ok",
                    Code::Unschedulable => {
                        assert_eq!(st.reasons(), [ERR_REASON_CONSTRAINTS_NOT_MATCH]);
                        "skew"
                    }
                    Code::UnschedulableAndUnresolvable => {
                        assert_eq!(st.reasons(), [ERR_REASON_NODE_LABEL_NOT_MATCH]);
                        "label"
                    }
                    c => panic!("unexpected {c:?}"),
                }
            })
            .collect()
    }

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

    fn rs_owned(name: &str, labels: Value) -> PodInfo {
        pod(json!({"metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": true}]}}))
    }

    fn objects(v: Value) -> Arc<ClusterObjects> {
        let get = |k: &str| v.get(k).cloned().unwrap_or(json!([]));
        Arc::new(ClusterObjects {
            services: serde_json::from_value(get("services")).unwrap(),
            replica_sets: serde_json::from_value(get("replicaSets")).unwrap(),
            stateful_sets: serde_json::from_value(get("statefulSets")).unwrap(),
            replication_controllers: serde_json::from_value(get("rcs")).unwrap(),
            ..Default::default()
        })
    }

    #[test]
    fn default_constraints_from_services_and_controllers() {
        let list = json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]});
        let pl = plugin(list);
        let web = |n: &str| epod(n, "default", json!({"app": "web"}));
        let svc = |ns: &str| json!({"services": [{"metadata": {"name": "s", "namespace": ns}, "spec": {"selector": {"app": "web"}}}]});
        let rs = json!({"replicaSets": [{"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}]});
        let rc = json!({"rcs": [{"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}]});
        let plain = epod("in", "default", json!({"app": "web"}));
        let rc_owned = pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": "rc", "controller": true}]}}));
        let not_controller = pod(json!({"metadata": {"name": "in", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}]}}));
        let cases: Vec<(&str, PodInfo, Value, [&str; 4])> = vec![
            ("service selects pod", plain.clone(), svc("default"), ["skew", "skew", "ok", "ok"]),
            ("service in another namespace", plain.clone(), svc("other"), ["skip"; 4]),
            ("no selecting object", plain.clone(), json!({}), ["skip"; 4]),
            (
                "controlling replica set",
                rs_owned("in", json!({"app": "web"})),
                rs.clone(),
                ["skew", "skew", "ok", "ok"],
            ),
            ("owner not a controller", not_controller, rs, ["skip"; 4]),
            ("controlling replication controller", rc_owned, rc, ["skew", "skew", "ok", "ok"]),
            (
                "own constraints replace defaults",
                incoming(
                    json!({"app": "web", "foo": ""}),
                    vec![constraint(1, "zone", SCHEDULE_ANYWAY, json!({}))],
                    json!({}),
                ),
                svc("default"),
                ["skip"; 4],
            ),
        ];
        for (name, p, objs, want) in cases {
            let mut snap = cluster(vec![("a", web("a1"))], &[], &[]);
            snap.objects = objects(objs);
            assert_eq!(filter_all(&pl, &p, &snap), want, "{name}");
        }
        // System defaults are all soft: PreFilter skips.
        let mut snap = cluster(vec![("a", web("a1"))], &[], &[]);
        snap.objects = objects(svc("default"));
        assert_eq!(filter_all(&plugin(json!({})), &plain, &snap), ["skip"; 4]);
    }

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

    #[test]
    fn args_validation() {
        let ok = [
            json!({}),
            json!({"defaultingType": "System"}),
            json!({"defaultingType": "List"}),
            json!({"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
        ];
        for a in ok {
            assert!(PodTopologySpread::new(Some(&a), &ctx()).is_ok(), "{a}");
        }
        let c = |extra: Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            c
        };
        let bad = [
            (json!({"defaultingType": "Foo"}), "defaultingType: Unsupported value: \"Foo\""),
            (json!({"defaultConstraints": [c(json!({}))]}), "defaultingType: Invalid value: \"System\""),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"maxSkew": 0}))]}),
                "defaultConstraints[0].maxSkew",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"topologyKey": ""}))]}),
                "defaultConstraints[0].topologyKey: Required",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"topologyKey": "-bad-"}))]}),
                "defaultConstraints[0].topologyKey: Invalid",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"whenUnsatisfiable": "Maybe"}))]}),
                "defaultConstraints[0].whenUnsatisfiable",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({"labelSelector": {"matchLabels": {"a": "b"}}}))]}),
                "defaultConstraints[0].labelSelector: Forbidden",
            ),
            (
                json!({"defaultingType": "List", "defaultConstraints": [c(json!({})), c(json!({}))]}),
                "defaultConstraints[1]: Duplicate value: \"{zone, DoNotSchedule}\"",
            ),
            (json!({"bogus": 1}), "bogus"),
        ];
        for (a, want) in bad {
            let err = PodTopologySpread::new(Some(&a), &ctx()).unwrap_err();
            assert!(err.contains(want), "{a}: {err}");
        }
    }

    #[test]
    fn registered_points_and_events() {
        let pl = plugin(json!({}));
        assert!(pl.as_pre_filter().is_some() && pl.as_filter().is_some());
        assert!(pl.as_pre_score().is_some() && pl.as_score().is_some_and(|s| s.has_normalize()));
        let ev = pl.events_to_register();
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::Node, action::UPDATE_TAINT))));
        assert!(ev.iter().any(|e| e.covers(&ClusterEvent::new(EventResource::AssignedPod, action::DELETE))));
        assert!(crate::plugins::in_tree_registry().get(NAME).is_some());
    }
}
