//! `TenantPolicies`: one plugin of a profile that serves every tenant policy attached to the profile, each only
//! for the pods it selects.
//!
//! The policies come from the cluster objects (`ClusterObjects::scheduling_policies`, fed by the informers or the
//! simulator's cluster file). `reconcile` admits each against the limits and loads its component, off the
//! scheduling path (a background thread in the live scheduler, before the first pod in the simulator), then swaps
//! the set in whole: a cycle keeps the set it began with, so an update never fails a cycle in flight. A refused
//! version leaves the previous one serving, with the reason in the policy's state.
//!
//! Scores: each selected policy's scores are normalized (its own NormalizeScore, or the raw scores clamped to
//! [0, 100]) and weighed by the policy's weight; the plugin's score is their sum divided by the profile's largest
//! tenant weight (`namespaced.maxWeight`, default 10) and capped at 100. With the plugin's own weight in the
//! profile set to that same number, a policy of weight w counts exactly as a profile plugin of weight w would.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use crate::framework::trace::PluginScoreTrace;
use crate::framework::{
    Code, CycleState, FilterPlugin, NodeInfo, NodeScore, PermitPlugin, Plugin, PluginContext, PodInfo, PolicyObject,
    PolicyStatus, PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, ReservePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use crate::wasm::WasmPlugin;

use super::limits::{TenantPoliciesArgs, CPU_BUDGET_WINDOW, DEFAULT_MAX_WEIGHT};
use super::policy::{admit, Admitted, PolicyError};
use super::{Point, NAME};

/// Where the cycle's selected policies are kept in its `CycleState`.
const STATE_KEY: &str = "TenantPolicies";

/// How often the background reconciler looks for changed policy objects.
const RECONCILE_PERIOD: Duration = Duration::from_millis(200);

/// One policy serving: what was admitted and its loaded component.
struct Served {
    admitted: Admitted,
    plugin: Arc<WasmPlugin>,
}

/// A namespace's guest time in the current window (the CPU budget).
#[derive(Debug, Clone, Copy)]
struct Spent {
    since: Instant,
    time: Duration,
}

/// The cycle's view of the tenant policies: those that select the pod, and what PreFilter and PreScore made of them.
#[derive(Clone, Default)]
struct CyclePolicies {
    selected: Vec<Arc<Served>>,
    /// Selected policies whose Filter runs this cycle (their PreFilter, if any, did not answer Skip).
    filters: Vec<Arc<Served>>,
    /// The combined score of each node, indexed by its id in the cycle's snapshot (computed at PreScore: a policy
    /// normalizes over all nodes; ids are dense, so a vector rather than a map).
    scores: Arc<Vec<i64>>,
    /// Each scoring policy's raw and normalized scores, in PreScore's node order (for `--explain`).
    parts: Arc<Vec<ScorePart>>,
    /// The policies whose Permit answered Wait: the pod waits on each, by its key.
    waits: Vec<(String, Status, Duration)>,
}

/// One policy's part of a cycle's scores.
#[derive(Clone)]
struct ScorePart {
    policy: Arc<Served>,
    raw: Vec<i64>,
    normalized: Vec<i64>,
}

/// The plugin.
pub struct TenantPolicies {
    profile: String,
    limits: TenantPoliciesArgs,
    ctx: PluginContext,
    /// What new cycles use; swapped whole by `reconcile`.
    set: RwLock<Arc<Vec<Arc<Served>>>>,
    /// Per policy key, what the scheduler made of it.
    states: Mutex<BTreeMap<String, PolicyStatus>>,
    /// The objects `reconcile` last acted on (by key: uid and generation).
    seen: Mutex<HashMap<String, (String, i64)>>,
    /// Guest time spent per namespace in the current window.
    spent: Mutex<HashMap<String, Spent>>,
}

impl std::fmt::Debug for TenantPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantPolicies").field("profile", &self.profile).finish()
    }
}

impl TenantPolicies {
    /// Builds the plugin for the profile `profile` and loads the policies already known; with a reload period in the
    /// context (the live scheduler), a background thread picks up changes from then on.
    pub fn new(
        args: Option<&serde_json::Value>,
        ctx: &PluginContext,
        profile: &str,
    ) -> Result<Arc<TenantPolicies>, String> {
        let limits =
            TenantPoliciesArgs::parse(args, std::path::Path::new("/")).map_err(|e| format!("{NAME} args: {e}"))?;
        let p = Arc::new(TenantPolicies {
            profile: profile.to_string(),
            limits,
            ctx: ctx.clone(),
            set: RwLock::default(),
            states: Mutex::default(),
            seen: Mutex::default(),
            spent: Mutex::default(),
        });
        p.reconcile();
        if ctx.reload_period.is_some() {
            let weak = Arc::downgrade(&p);
            std::thread::Builder::new()
                .name("tenant-policies".into())
                .spawn(move || watch(weak))
                .map_err(|e| format!("{NAME}: starting its reconciler: {e}"))?;
        }
        Ok(p)
    }

    /// What the scheduler made of each policy object of this profile, by key.
    pub fn states(&self) -> Vec<PolicyStatus> {
        self.states.lock().expect("states lock").values().cloned().collect()
    }

    /// Brings the served set in line with the policy objects: admits and loads new and changed ones (blocking on
    /// their fetches), drops deleted ones, then swaps the set in. Returns whether anything changed.
    pub fn reconcile(&self) -> bool {
        let objects = self.ctx.listers.objects();
        let policies: Vec<Arc<PolicyObject>> = objects.scheduling_policies.clone();
        let current = self.set.read().expect("set lock").clone();
        let mut next: Vec<Arc<Served>> = Vec::new();
        let mut changed = false;
        let mut per_namespace: HashMap<String, usize> = HashMap::new();
        let mut seen = self.seen.lock().expect("seen lock").clone();
        let mut alive = std::collections::HashSet::new();
        for obj in &policies {
            let key = obj.key();
            let previous = current.iter().find(|s| s.admitted.key == key).cloned();
            let unchanged = seen.get(&key).is_some_and(|(uid, g)| *uid == obj.uid && *g == obj.generation);
            if unchanged {
                if let Some(p) = previous {
                    if let Some(ns) = &p.admitted.namespace {
                        *per_namespace.entry(ns.clone()).or_default() += 1;
                    }
                    next.push(p);
                }
                alive.insert(key);
                continue;
            }
            seen.insert(key.clone(), (obj.uid.clone(), obj.generation));
            changed = true;
            match self.load(obj, &per_namespace) {
                Ok(None) => {
                    // Another profile's policy (or it moved to one): not served here.
                    self.forget(&key);
                }
                Ok(Some(served)) => {
                    if let Some(ns) = &served.admitted.namespace {
                        *per_namespace.entry(ns.clone()).or_default() += 1;
                    }
                    self.record(obj, Ok(&served));
                    next.push(Arc::new(served));
                    alive.insert(key);
                }
                Err(e) => {
                    // The version serving (if any) goes on serving.
                    self.record(obj, Err((&e, previous.as_deref())));
                    if let Some(p) = previous {
                        if let Some(ns) = &p.admitted.namespace {
                            *per_namespace.entry(ns.clone()).or_default() += 1;
                        }
                        next.push(p);
                    }
                    alive.insert(key);
                }
            }
        }
        // Deleted objects: unloaded, forgotten.
        let before = seen.len();
        seen.retain(|k, _| alive.contains(k));
        changed |= seen.len() != before || next.len() != current.len();
        for s in current.iter() {
            if !alive.contains(&s.admitted.key) {
                self.forget(&s.admitted.key);
            }
        }
        let gone: Vec<String> =
            self.states.lock().expect("states lock").keys().filter(|k| !alive.contains(*k)).cloned().collect();
        for k in gone {
            self.forget(&k);
        }
        *self.seen.lock().expect("seen lock") = seen;
        if changed {
            *self.set.write().expect("set lock") = Arc::new(next);
        }
        changed
    }

    /// Admits and loads one object; `Ok(None)` when it is another profile's.
    fn load(&self, obj: &PolicyObject, per_namespace: &HashMap<String, usize>) -> Result<Option<Served>, PolicyError> {
        let Some(admitted) = admit(obj, &self.profile, &self.limits)? else { return Ok(None) };
        if let (Some(ns), Some(caps)) = (&admitted.namespace, &self.limits.namespaced) {
            let n = per_namespace.get(ns).copied().unwrap_or(0);
            if n >= caps.max_policies_per_namespace {
                return Err(PolicyError::whole(
                    "OverLimit",
                    format!(
                        "namespace {ns} already has {n} policies for profile {} (maxPoliciesPerNamespace {})",
                        self.profile, caps.max_policies_per_namespace
                    ),
                ));
            }
        }
        let plugin =
            WasmPlugin::load_for_tenant(&admitted.key, admitted.wasm.clone(), &self.ctx, admitted.namespace.as_deref())
                .map_err(|e| PolicyError::whole("FetchFailed", e.to_string()))?;
        let exported = plugin.points();
        for (i, p) in admitted.points.iter().enumerate() {
            if !exported.contains(&p.metric_name()) {
                return Err(PolicyError {
                    field: Some(format!("spec.points[{i}]")),
                    message: format!(
                        "the component does not serve {} (it serves {})",
                        p.metric_name(),
                        exported.join(", ")
                    ),
                    reason: "InvalidComponent",
                });
            }
        }
        Ok(Some(Served { admitted, plugin }))
    }

    fn record(&self, obj: &PolicyObject, outcome: Result<&Served, (&PolicyError, Option<&Served>)>) {
        let serving = match &outcome {
            Ok(s) => Some(*s),
            Err((_, prev)) => *prev,
        };
        let state = PolicyStatus {
            kind: obj.kind(),
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            profile: self.profile.clone(),
            observed_generation: obj.generation,
            ready: outcome.is_ok(),
            reason: match &outcome {
                Ok(_) => "Loaded".into(),
                Err((e, _)) => e.reason.into(),
            },
            message: match &outcome {
                Ok(s) => format!(
                    "serving {} for profile {} at {}",
                    s.plugin.digest(),
                    self.profile,
                    s.admitted.points.iter().map(|p| p.metric_name()).collect::<Vec<_>>().join(", ")
                ),
                Err((e, Some(_))) => format!("{e} (the previous version goes on serving)"),
                Err((e, None)) => e.to_string(),
            },
            digest: serving.map(|s| s.plugin.digest()),
            points: serving
                .map(|s| s.admitted.points.iter().map(|p| p.metric_name().to_string()).collect())
                .unwrap_or_default(),
        };
        match &outcome {
            Ok(_) => {
                tracing::info!(policy = %state.key(), profile = %self.profile, digest = ?state.digest, "tenant policy loaded")
            }
            Err(_) => {
                tracing::warn!(policy = %state.key(), profile = %self.profile, reason = %state.reason, "tenant policy refused: {}", state.message)
            }
        }
        self.states.lock().expect("states lock").insert(state.key(), state.clone());
        self.ctx.cluster.policy_status(&state);
    }

    fn forget(&self, key: &str) {
        if self.states.lock().expect("states lock").remove(key).is_some() {
            tracing::info!(policy = %key, profile = %self.profile, "tenant policy unloaded");
        }
    }

    /// The policies that select `pod`, in key order.
    fn select(&self, pod: &PodInfo) -> Vec<Arc<Served>> {
        let set = self.set.read().expect("set lock").clone();
        if set.is_empty() {
            return Vec::new();
        }
        let objects = self.ctx.listers.objects();
        set.iter()
            .filter(|s| {
                let a = &s.admitted;
                let in_scope = match &a.namespace {
                    Some(ns) => *ns == pod.namespace,
                    None => {
                        a.namespaces.is_everything()
                            || objects.namespaces.get(&pod.namespace).is_some_and(|l| a.namespaces.matches(l))
                    }
                };
                in_scope && a.pods.matches(pod.labels())
            })
            .cloned()
            .collect()
    }

    /// Whether the namespace's policies may still call their guests this window; counts `took` against it.
    fn within_budget(&self, served: &Served, took: Option<Duration>) -> bool {
        let (Some(ns), Some(budget)) =
            (&served.admitted.namespace, self.limits.namespaced.as_ref().and_then(|c| c.cpu_budget))
        else {
            return true;
        };
        let mut spent = self.spent.lock().expect("spent lock");
        let now = Instant::now();
        let e = spent.entry(ns.clone()).or_insert(Spent { since: now, time: Duration::ZERO });
        if now.duration_since(e.since) >= CPU_BUDGET_WINDOW {
            *e = Spent { since: now, time: Duration::ZERO };
        }
        if let Some(t) = took {
            e.time += t;
        }
        e.time < budget
    }

    /// Runs `f` for a policy within its namespace's budget; past the budget, the policy's failure policy answers.
    fn call<T>(&self, served: &Served, exhausted: impl FnOnce() -> T, f: impl FnOnce() -> T) -> T {
        if !self.within_budget(served, None) {
            return exhausted();
        }
        let start = Instant::now();
        let out = f();
        self.within_budget(served, Some(start.elapsed()));
        out
    }

    fn budget_status(&self, served: &Served) -> Status {
        let msg = format!("tenant policy {} is over its namespace's CPU budget for this minute", served.admitted.key);
        match served.admitted.wasm.failure_policy {
            crate::wasm::FailurePolicy::Fail => {
                Status::error(msg).with_plugin(&Arc::from(served.admitted.key.as_str()))
            }
            crate::wasm::FailurePolicy::Ignore => Status::skip(),
        }
    }

    fn divisor(&self) -> i64 {
        self.limits.namespaced.as_ref().map(|c| c.max_weight).unwrap_or(DEFAULT_MAX_WEIGHT).max(1)
    }
}

/// Reconciles every `RECONCILE_PERIOD` while the plugin lives.
fn watch(plugin: Weak<TenantPolicies>) {
    loop {
        std::thread::sleep(RECONCILE_PERIOD);
        let Some(p) = plugin.upgrade() else { return };
        p.reconcile();
    }
}

impl Plugin for TenantPolicies {
    fn name(&self) -> &str {
        NAME
    }

    fn begin_cycle(&self, state: &mut CycleState, pod: &Arc<PodInfo>) {
        let selected = self.select(pod);
        for s in &selected {
            s.plugin.begin_cycle(state, pod);
        }
        state.write(STATE_KEY, CyclePolicies { selected, ..Default::default() });
    }

    fn cluster_synced(&self) {
        // Every policy the synced cluster holds is loaded (or refused) before the first pod is tried.
        self.reconcile();
    }

    crate::serves!(pre_enqueue, pre_filter, filter, pre_score, score, reserve, permit);
}

impl PreEnqueuePlugin for TenantPolicies {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        for s in self.select(pod).iter().filter(|s| s.admitted.serves(Point::PreEnqueue)) {
            let st = self.call(s, || self.budget_status(s), || s.plugin.pre_enqueue(pod));
            if !st.is_success() && !st.is_skip() {
                return st;
            }
        }
        Status::success()
    }
}

impl PreFilterPlugin for TenantPolicies {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let selected = state.read::<CyclePolicies>(STATE_KEY).map(|c| c.selected.clone()).unwrap_or_default();
        let mut filters = Vec::new();
        let mut result = None;
        // A policy may serve PreFilter without Filter (a gang refusing a pod short of siblings): its PreFilter runs
        // all the same.
        for s in selected.iter().filter(|s| s.admitted.serves(Point::Filter) || s.admitted.serves(Point::PreFilter)) {
            if s.admitted.serves(Point::PreFilter) {
                let (r, st) =
                    self.call(s, || (None, self.budget_status(s)), || s.plugin.pre_filter(state, pod, snapshot));
                if st.is_skip() {
                    continue;
                }
                if !st.is_success() {
                    return (None, st);
                }
                result = match (result, r) {
                    (None, r) | (r, None) => r,
                    (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
                };
            }
            if s.admitted.serves(Point::Filter) {
                filters.push(s.clone());
            }
        }
        if filters.is_empty() && result.is_none() {
            return (None, Status::skip());
        }
        if let Some(c) = state.read_mut::<CyclePolicies>(STATE_KEY) {
            c.filters = filters;
        }
        (result, Status::success())
    }
}

impl FilterPlugin for TenantPolicies {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut out = Vec::with_capacity(1);
        self.filter_nodes(state, pod, &[node], &mut out);
        out.pop().unwrap_or_else(Status::success)
    }

    fn filter_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Status>) {
        out.clear();
        out.resize_with(nodes.len(), Status::success);
        let Some(c) = state.read::<CyclePolicies>(STATE_KEY) else { return };
        let mut verdicts = Vec::with_capacity(nodes.len());
        for s in &c.filters {
            verdicts.clear();
            if self.within_budget(s, None) {
                let start = Instant::now();
                s.plugin.filter_nodes(state, pod, nodes, &mut verdicts);
                self.within_budget(s, Some(start.elapsed()));
            } else {
                verdicts.resize_with(nodes.len(), || self.budget_status(s));
            }
            // A policy can only take nodes away: the first refusal of each node stands.
            for (o, v) in out.iter_mut().zip(verdicts.drain(..)) {
                if o.is_success() && !v.is_success() && !v.is_skip() {
                    *o = v;
                }
            }
        }
    }
}

impl PreScorePlugin for TenantPolicies {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], snapshot: &Snapshot) -> Status {
        let scorers = serving(state, Point::Score);
        if scorers.is_empty() {
            return Status::skip();
        }
        let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
        let mut total = vec![0i64; nodes.len()];
        let mut parts = Vec::new();
        for s in &scorers {
            if s.admitted.serves(Point::PreScore) {
                let st = self.call(s, || self.budget_status(s), || s.plugin.pre_score(state, pod, nodes, snapshot));
                if st.is_skip() {
                    continue;
                }
                if !st.is_success() {
                    return st;
                }
            }
            let mut raw = vec![0i64; nodes.len()];
            let st = self.call(s, || self.budget_status(s), || s.plugin.score_nodes(state, pod, &refs, &mut raw));
            if st.is_skip() {
                continue;
            }
            if !st.is_success() {
                return st;
            }
            let mut list: Vec<NodeScore> =
                nodes.iter().zip(&raw).map(|(n, &score)| NodeScore { name: &n.name, id: n.id, score }).collect();
            if s.plugin.has_normalize() {
                let st = s.plugin.normalize_score(state, pod, &mut list);
                if !st.is_success() {
                    return st;
                }
            }
            for (t, ns) in total.iter_mut().zip(&list) {
                *t += ns.score.clamp(0, MAX_NODE_SCORE) * s.admitted.weight;
            }
            parts.push(ScorePart { policy: s.clone(), raw, normalized: list.iter().map(|ns| ns.score).collect() });
        }
        let divisor = self.divisor();
        let mut scores = vec![0; nodes.iter().map(|n| n.id as usize + 1).max().unwrap_or(0)];
        for (n, t) in nodes.iter().zip(total) {
            scores[n.id as usize] = (t / divisor).min(MAX_NODE_SCORE);
        }
        if let Some(c) = state.read_mut::<CyclePolicies>(STATE_KEY) {
            c.scores = Arc::new(scores);
            c.parts = Arc::new(parts);
        }
        Status::success()
    }
}

/// The cycle's selected policies that serve `point`.
fn serving(state: &CycleState, point: Point) -> Vec<Arc<Served>> {
    state
        .read::<CyclePolicies>(STATE_KEY)
        .map(|c| c.selected.iter().filter(|s| s.admitted.serves(point)).cloned().collect())
        .unwrap_or_default()
}

impl ReservePlugin for TenantPolicies {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for s in serving(state, Point::Reserve) {
            let st = self.call(&s, || self.budget_status(&s), || s.plugin.reserve(state, pod, node));
            if !st.is_success() && !st.is_skip() {
                return st;
            }
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        // Release runs even past the budget (each call still has its deadline): a policy that held its own pods at
        // Permit lets them go.
        for s in serving(state, Point::Reserve).iter().rev() {
            let start = Instant::now();
            s.plugin.unreserve(state, pod, node);
            self.within_budget(s, Some(start.elapsed()));
        }
    }
}

impl PermitPlugin for TenantPolicies {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        let mut waits = Vec::new();
        for s in serving(state, Point::Permit) {
            let (st, timeout) =
                self.call(&s, || (self.budget_status(&s), Duration::ZERO), || s.plugin.permit(state, pod, node));
            if st.code() == Code::Wait {
                waits.push((s.admitted.key.clone(), st, timeout));
            } else if !st.is_success() && !st.is_skip() {
                return (st, Duration::ZERO);
            }
        }
        let Some(longest) = waits.iter().map(|(_, _, t)| *t).max() else { return (Status::success(), Duration::ZERO) };
        let status = Status::code_only(Code::Wait);
        if let Some(c) = state.read_mut::<CyclePolicies>(STATE_KEY) {
            c.waits = waits;
        }
        (status, longest)
    }

    fn waits(&self, state: &CycleState) -> Vec<(String, Status, Duration)> {
        state.read::<CyclePolicies>(STATE_KEY).map(|c| c.waits.clone()).unwrap_or_default()
    }
}

impl ScorePlugin for TenantPolicies {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(state.read::<CyclePolicies>(STATE_KEY).and_then(|c| c.scores.get(node.id as usize).copied()).unwrap_or(0))
    }

    /// The scores PreScore combined, with one read of the cycle's state for the whole batch.
    fn score_nodes(&self, state: &CycleState, _pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        let scores = state.read::<CyclePolicies>(STATE_KEY).map(|c| &c.scores[..]).unwrap_or_default();
        for (o, n) in out.iter_mut().zip(nodes) {
            *o = scores.get(n.id as usize).copied().unwrap_or(0);
        }
        Status::success()
    }

    fn explain_scores(&self, state: &CycleState, nodes: &[Arc<NodeInfo>]) -> Vec<PluginScoreTrace> {
        let Some(c) = state.read::<CyclePolicies>(STATE_KEY) else { return Vec::new() };
        c.parts
            .iter()
            .map(|p| {
                let a = &p.policy.admitted;
                let kind = if a.namespace.is_some() { "SchedulingPolicy" } else { "ClusterSchedulingPolicy" };
                PluginScoreTrace {
                    plugin: format!("  {kind} {}", a.key),
                    weight: a.weight,
                    nodes: nodes
                        .iter()
                        .zip(p.raw.iter().zip(&p.normalized))
                        .map(|(n, (&raw, &norm))| (n.name.clone(), raw, norm, norm.clamp(0, MAX_NODE_SCORE) * a.weight))
                        .collect(),
                }
            })
            .collect()
    }
}
