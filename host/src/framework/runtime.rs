//! The profile runner: instantiates a profile's plugins and runs each extension point with upstream's rules
//! (`framework/runtime/framework.go`). Each runner's doc states its short-circuit rule.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use thiserror::Error;

use super::batch::{BatchHandle, OpportunisticBatch, OtherNodes, ScoredNode};
use super::cycle_state::CycleState;
use super::extension_point::{ExtensionPoint, NUM_EXTENSION_POINTS};
use super::handle::PluginContext;
use super::interface::*;
use super::metrics::{BatchMetrics, PluginMetrics};
use super::parallelize::Parallelizer;
use super::registry::Registry;
use super::snapshot::Snapshot;
use super::status::{Code, Status};
use super::trace::{CycleTrace, PluginScoreTrace};
use super::types::{NodeInfo, PodInfo, QueuedPodInfo};
use super::waiting_pods::{PermitWait, WaitingPod, WaitingPods};
use crate::config::ProfileConfig;

/// The longest a Permit plugin may ask a pod to wait (upstream `maxTimeout`).
pub const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A profile that cannot be built from its configuration.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameworkError {
    /// A plugin name the registry does not know.
    #[error("profile {profile:?}: unknown plugin {plugin:?} (known plugins: {known})")]
    UnknownPlugin {
        /// Profile.
        profile: String,
        /// Plugin.
        plugin: String,
        /// Registered names.
        known: String,
    },
    /// A plugin's factory refused its args.
    #[error("profile {profile:?}: pluginConfig for {plugin:?}: {message}")]
    BadArgs {
        /// Profile.
        profile: String,
        /// Plugin.
        plugin: String,
        /// Why.
        message: String,
    },
    /// A plugin enabled at an extension point it does not implement.
    #[error("profile {profile:?}: plugin {plugin:?} enabled at {point} does not implement {point}")]
    NotImplemented {
        /// Profile.
        profile: String,
        /// Plugin.
        plugin: String,
        /// Extension point.
        point: &'static str,
    },
    /// Anything else about the profile's shape.
    #[error("profile {profile:?}: {message}")]
    Invalid {
        /// Profile.
        profile: String,
        /// Why.
        message: String,
    },
}

/// A plugin registered at an extension point.
#[derive(Clone)]
pub struct PluginEntry {
    /// Its name, shared by every status it produces.
    pub name: Arc<str>,
    /// The instance (one per profile, shared by all its points).
    pub plugin: Arc<dyn Plugin>,
    /// Score weight (Score only).
    pub weight: i64,
}

/// The total score of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePluginScores {
    /// Index of the node in the list that was scored.
    pub index: usize,
    /// Sum of weighted scores.
    pub total: i64,
    /// Breaks ties between equal totals, the higher first: drawn at random only for nodes an extender scored, 0
    /// otherwise, as upstream (v1.36 on) sets it.
    pub randomizer: u64,
}

/// The runner of one profile.
pub struct Framework {
    profile_name: String,
    /// The plugins registered at each extension point, in order (indexed by `ExtensionPoint::index`).
    points: [Vec<PluginEntry>; NUM_EXTENSION_POINTS],
    instances: BTreeMap<String, Arc<dyn Plugin>>,
    percentage_of_nodes_to_score: Option<i32>,
    parallelizer: Parallelizer,
    waiting: Arc<WaitingPods>,
    /// OpportunisticBatching's state, when the gate is on (see [`Framework::enable_batching`]).
    batch: Option<Mutex<OpportunisticBatch>>,
    /// The plugins that sign pods, when every plugin at PreFilter, Filter, PreScore and Score can and no extender
    /// is configured (upstream's `enableSignatures`); None: no pod of the profile is signed, so none is batched.
    signers: Option<Vec<PluginEntry>>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework").field("profile", &self.profile_name).finish()
    }
}

/// Adds a plugin's final scores (one per node, in node order) times its weight to the totals; a score outside
/// [MIN_NODE_SCORE, MAX_NODE_SCORE] is upstream's error.
fn add_weighted(
    totals: &mut [NodePluginScores],
    e: &PluginEntry,
    scores: impl Iterator<Item = i64>,
) -> Result<(), Status> {
    for (t, score) in totals.iter_mut().zip(scores) {
        if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&score) {
            return Err(Status::error(format!(
                "plugin {:?} returns an invalid score {score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                &*e.name
            ))
            .with_plugin(&e.name));
        }
        t.total += score * e.weight;
    }
    Ok(())
}

impl Framework {
    /// Builds the runner for a profile: instantiates each named plugin once with its args, expands multiPoint
    /// as upstream (explicit entries override, `disabled` and `'*'` honoured), and checks the profile's shape.
    pub fn new(
        profile: &ProfileConfig,
        global_percentage: Option<i32>,
        registry: &Registry,
        ctx: &PluginContext,
        parallelizer: Parallelizer,
    ) -> Result<Framework, FrameworkError> {
        let pname = profile.scheduler_name.clone();
        // The profile's own waiting pods: its plugins (Wasm guests through their host imports) allow and reject them.
        let waiting = Arc::new(WaitingPods::default());
        let ctx = &PluginContext { waiting: waiting.clone(), profile: pname.clone(), ..ctx.clone() };
        let mut instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::new();
        let mut instance = |name: &str| -> Result<Arc<dyn Plugin>, FrameworkError> {
            if let Some(p) = instances.get(name) {
                return Ok(p.clone());
            }
            let factory = registry.get(name).ok_or_else(|| FrameworkError::UnknownPlugin {
                profile: pname.clone(),
                plugin: name.to_string(),
                known: registry.names().join(", "),
            })?;
            let p = factory(profile.plugin_args.get(name), ctx).map_err(|message| FrameworkError::BadArgs {
                profile: pname.clone(),
                plugin: name.to_string(),
                message,
            })?;
            instances.insert(name.to_string(), p.clone());
            Ok(p)
        };

        let multi = profile.plugins.multi_point.clone().unwrap_or_default();
        let mut points: [Vec<PluginEntry>; NUM_EXTENSION_POINTS] = Default::default();
        for ep in ExtensionPoint::ALL {
            let point = ep.config_name();
            let implements = |p: &dyn Plugin| ep.served_by(p);
            let set = profile.plugins.get(ep).cloned().unwrap_or_default();
            let disabled: HashSet<&str> = set.disabled.iter().map(|p| p.name.as_str()).collect();
            let mut explicit: Vec<(String, Option<i32>)> = Vec::new();
            for e in &set.enabled {
                let p = instance(&e.name)?;
                if p.unavailable().is_some() {
                    continue;
                }
                if !implements(p.as_ref()) {
                    return Err(FrameworkError::NotImplemented {
                        profile: pname.clone(),
                        plugin: e.name.clone(),
                        point,
                    });
                }
                if explicit.iter().any(|(n, _)| *n == e.name) {
                    return Err(FrameworkError::Invalid {
                        profile: pname.clone(),
                        message: format!("plugin {:?} already registered at {point}", e.name),
                    });
                }
                explicit.push((e.name.clone(), e.weight));
            }
            let mut overrides = HashSet::new();
            let mut from_multi: Vec<(String, Option<i32>)> = Vec::new();
            if !disabled.contains("*") {
                for e in &multi.enabled {
                    let p = instance(&e.name)?;
                    if !implements(p.as_ref()) || disabled.contains(e.name.as_str()) {
                        continue;
                    }
                    if explicit.iter().any(|(n, _)| *n == e.name) {
                        overrides.insert(e.name.clone());
                        continue;
                    }
                    if from_multi.iter().any(|(n, _)| *n == e.name) {
                        return Err(FrameworkError::Invalid {
                            profile: pname.clone(),
                            message: format!("plugin {:?} already registered at {point} through multiPoint", e.name),
                        });
                    }
                    from_multi.push((e.name.clone(), e.weight));
                }
            }
            // Upstream order: overridden multiPoint plugins (in explicit order), then multiPoint, then the rest.
            let mut ordered: Vec<(String, Option<i32>)> =
                explicit.iter().filter(|(n, _)| overrides.contains(n)).cloned().collect();
            ordered.extend(from_multi);
            ordered.extend(explicit.iter().filter(|(n, _)| !overrides.contains(n)).cloned());
            let entries = ordered
                .into_iter()
                .map(|(name, weight)| {
                    let plugin = instance(&name)?;
                    Ok(PluginEntry {
                        name: Arc::from(name.as_str()),
                        plugin,
                        weight: i64::from(weight.unwrap_or(0).max(1)),
                    })
                })
                .collect::<Result<Vec<_>, FrameworkError>>()?;
            points[ep.index()] = entries;
        }

        let queue_sort = &points[ExtensionPoint::QueueSort.index()];
        if queue_sort.len() != 1 {
            return Err(FrameworkError::Invalid {
                profile: pname.clone(),
                message: format!(
                    "exactly one queueSort plugin is required, got {} ({})",
                    queue_sort.len(),
                    names(queue_sort)
                ),
            });
        }
        if points[ExtensionPoint::Bind.index()].is_empty() {
            return Err(FrameworkError::Invalid {
                profile: pname.clone(),
                message: "at least one bind plugin is required".into(),
            });
        }
        Ok(Framework {
            profile_name: pname,
            points,
            instances,
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score.or(global_percentage),
            parallelizer,
            waiting,
            batch: None,
            signers: None,
        })
    }

    /// Turns OpportunisticBatching on for this profile (the gate is on), as upstream's `newOpportunisticBatch` and
    /// `computeBatchablePlugins`: pods are signed only if every plugin at PreFilter, Filter, PreScore and Score
    /// can sign them and the configuration has no extenders; otherwise the profile still reports every cycle to
    /// the batch metrics, as upstream's does, but never gets a hint. `generic_workload`: the gate of that name.
    pub fn enable_batching(&mut self, generic_workload: bool, has_extenders: bool) {
        self.batch = Some(Mutex::new(OpportunisticBatch::new(generic_workload)));
        let mut signers: Vec<PluginEntry> = Vec::new();
        let mut unsupported: Vec<String> = Vec::new();
        let points =
            [ExtensionPoint::PreFilter, ExtensionPoint::Filter, ExtensionPoint::PreScore, ExtensionPoint::Score];
        for e in points.iter().flat_map(|p| self.plugins_at(*p)) {
            if signers.iter().any(|s| s.name == e.name) || unsupported.iter().any(|u| **u == *e.name) {
                continue;
            }
            if e.plugin.as_sign().is_some() {
                signers.push(e.clone());
            } else {
                unsupported.push(e.name.to_string());
            }
        }
        if has_extenders {
            tracing::info!(profile = %self.profile_name, "disabling signatures for profile because it has extenders configured");
            return;
        }
        if !unsupported.is_empty() {
            tracing::info!(
                profile = %self.profile_name,
                plugins = %unsupported.join(","),
                "disabling signatures for profile because plugins do not support it"
            );
            return;
        }
        self.signers = Some(signers);
    }

    /// Whether OpportunisticBatching is on for this profile (it may still sign no pod).
    pub fn batching(&self) -> bool {
        self.batch.is_some()
    }

    /// Whether this profile signs pods (every plugin that matters can sign, no extender).
    pub fn signs_pods(&self) -> bool {
        self.signers.is_some()
    }

    /// The pod's signature (upstream's `SignPod`): the schedulerName and every signing plugin's fragments, or None
    /// when the profile does not sign or a plugin cannot sign this pod. Each plugin's call is timed at `Sign`
    /// when `timer` is given.
    pub fn sign_pod(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        timer: &Option<Arc<dyn PluginMetrics>>,
    ) -> Option<super::interface::PodSignature> {
        let signers = self.signers.as_ref()?;
        // Keys sorted, as Go's encoding of a map: plugins that sign the same part give the same key and value.
        let mut sig: BTreeMap<&'static str, serde_json::Value> = BTreeMap::new();
        sig.insert(super::signers::SCHEDULER_NAME, serde_json::Value::from(pod.scheduler_name()));
        for e in signers {
            let signed = timed(
                timer,
                e,
                "Sign",
                |r: &Result<Vec<SignFragment>, Status>| r.as_ref().map_or_else(Status::code, |_| Code::Success),
                || e.plugin.as_sign().expect("a signing plugin").sign_pod(pod, snapshot),
            );
            match signed {
                Ok(fragments) => sig.extend(fragments.into_iter().map(|f| (f.key, f.value))),
                Err(s) => {
                    if s.code() == Code::Error {
                        tracing::error!(plugin = %e.name, pod = %pod.key(), status = %s, "SignPod failed for plugin");
                    }
                    return None;
                }
            }
        }
        serde_json::to_vec(&sig).ok().map(Arc::from)
    }

    /// OpportunisticBatching's hint for `pod` in cycle `cycle` (see `OpportunisticBatch::get_node_hint`); None
    /// when the gate is off.
    #[allow(clippy::too_many_arguments)]
    pub fn get_node_hint(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        signature: Option<&super::interface::PodSignature>,
        nominated: bool,
        cycle: u64,
        now: u64,
        snapshot: &Snapshot,
        metrics: &dyn BatchMetrics,
    ) -> Option<String> {
        let batch = self.batch.as_ref()?;
        let mut b = batch.lock().expect("batch lock");
        b.get_node_hint(self, state, pod, signature, nominated, cycle, now, snapshot, metrics)
    }

    /// Stores a successful cycle's results for batching (see `OpportunisticBatch::store_schedule_results`); a
    /// no-op when the gate is off.
    #[allow(clippy::too_many_arguments)]
    pub fn store_schedule_results(
        &self,
        signature: Option<&super::interface::PodSignature>,
        hinted: Option<&str>,
        chosen: &str,
        others: OtherNodes,
        cycle: u64,
        now: u64,
        metrics: &dyn BatchMetrics,
    ) {
        let Some(batch) = &self.batch else { return };
        let mut b = batch.lock().expect("batch lock");
        b.store_schedule_results(&self.profile_name, signature, hinted, chosen, others, cycle, now, metrics);
    }

    /// Pods this profile placed on their batching hint (upstream's `TotalBatchedPods`, for tests).
    pub fn total_batched_pods(&self) -> u64 {
        self.batch.as_ref().map_or(0, |b| b.lock().expect("batch lock").batched_pods())
    }

    /// The plugins registered at an extension point, in the order they run.
    pub fn plugins_at(&self, point: ExtensionPoint) -> &[PluginEntry] {
        &self.points[point.index()]
    }

    /// Lets every plugin prepare the cycle's state (see `Plugin::begin_cycle`).
    pub fn begin_cycle(&self, state: &mut CycleState, pod: &Arc<PodInfo>) {
        for p in self.instances.values() {
            p.begin_cycle(state, pod);
        }
    }

    /// Tells every plugin the cluster has synced (see `Plugin::cluster_synced`).
    pub fn cluster_synced(&self) {
        for p in self.instances.values() {
            p.cluster_synced();
        }
    }

    /// The plugin instances of this profile, by name.
    pub fn plugin(&self, name: &str) -> Option<&Arc<dyn Plugin>> {
        self.instances.get(name)
    }

    /// The profile's schedulerName.
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// Plugin names and weights per extension point (for `--explain` and logs).
    pub fn list_plugins(&self) -> Vec<(&'static str, Vec<(String, i64)>)> {
        ExtensionPoint::ALL
            .into_iter()
            .map(|p| (p.config_name(), self.plugins_at(p).iter().map(|e| (e.name.to_string(), e.weight)).collect()))
            .collect()
    }

    /// Cluster events each plugin of this profile registered (for requeueing).
    pub fn events_to_register(&self) -> HashMap<String, Vec<ClusterEvent>> {
        self.instances.iter().map(|(n, p)| (n.clone(), p.events_to_register())).collect()
    }

    /// The profile's `percentageOfNodesToScore` (else the configuration's), if set.
    pub fn percentage_of_nodes_to_score(&self) -> Option<i32> {
        self.percentage_of_nodes_to_score
    }

    /// The parallelizer the Filter and Score runners use (and the node search sizes its rounds by).
    pub fn parallelizer(&self) -> &Parallelizer {
        &self.parallelizer
    }

    /// True when a PostFilter plugin is enabled.
    pub fn has_post_filter(&self) -> bool {
        !self.plugins_at(ExtensionPoint::PostFilter).is_empty()
    }

    /// PreEnqueue: the first plugin that does not answer Success keeps the pod out (its status, tagged).
    pub fn run_pre_enqueue(&self, pod: &PodInfo) -> Status {
        for e in self.plugins_at(ExtensionPoint::PreEnqueue) {
            let s = e.plugin.as_pre_enqueue().expect("registered at preEnqueue").pre_enqueue(pod);
            if !s.is_success() {
                return s.with_plugin(&e.name);
            }
        }
        Status::success()
    }

    fn queue_sort(&self) -> &dyn QueueSortPlugin {
        self.plugins_at(ExtensionPoint::QueueSort)[0].plugin.as_queue_sort().expect("registered at queueSort")
    }

    /// QueueSort's order: by the two pods' sort keys when both have one (equal keys by queue time), else `less`.
    pub fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match (&a.sort_key, &b.sort_key) {
            (Some(ka), Some(kb)) => (ka, a.timestamp) < (kb, b.timestamp),
            _ => self.queue_sort().less(a, b),
        }
    }

    /// QueueSort's key for a pod entering activeQ, if the plugin gives keys.
    pub fn sort_key(&self, pod: &QueuedPodInfo) -> Option<Arc<[u8]>> {
        self.queue_sort().sort_key(pod)
    }

    /// PreFilter: Skip marks the plugin's Filter as skipped; a rejection stops at once (tagged); an Error stops
    /// with "running PreFilter plugin"; node sets are intersected, and an empty intersection rejects the pod.
    pub fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut trace: Option<&mut CycleTrace>,
    ) -> (PreFilterResult, Status) {
        let mut result: PreFilterResult = None;
        let mut narrowing = Vec::new();
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::PreFilter) {
            let (r, s) = timed(
                &timer,
                e,
                ExtensionPoint::PreFilter.metric_name(),
                |(_, s): &(PreFilterResult, Status)| s.code(),
                || e.plugin.as_pre_filter().expect("registered at preFilter").pre_filter(state, pod, snapshot),
            );
            if let Some(t) = trace.as_deref_mut() {
                t.pre_filter.push((e.name.to_string(), if s.is_success() { "Success".into() } else { s.to_string() }));
            }
            if s.is_skip() {
                state.skip_filter_plugins.insert(e.name.to_string());
                continue;
            }
            if !s.is_success() {
                let s = s.with_plugin(&e.name);
                if s.is_rejected() {
                    return (None, s);
                }
                return (
                    None,
                    Status::error(format!("running PreFilter plugin {:?}: {}", &*e.name, s.message()))
                        .with_plugin(&e.name),
                );
            }
            if let Some(nodes) = r {
                narrowing.push(e.name.to_string());
                result = Some(match result {
                    None => nodes,
                    Some(prev) => prev.intersection(&nodes).cloned().collect(),
                });
                if result.as_ref().is_some_and(|r| r.is_empty()) {
                    let msg = if narrowing.len() == 1 {
                        format!("node(s) didn't satisfy plugin {}", narrowing[0])
                    } else {
                        format!("node(s) didn't satisfy plugin(s) [{}] simultaneously", narrowing.join(" "))
                    };
                    return (result, Status::unresolvable(msg).with_plugin(&e.name));
                }
            }
        }
        (result, Status::success())
    }

    /// Runs every PreFilter plugin's `add_pod` (nominated pods, preemption what-ifs); stops at the first error.
    pub fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        add: &Arc<PodInfo>,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) -> Status {
        self.run_pre_filter_extension(state, "PreFilterExtensionAddPod", |p, state| {
            p.add_pod(state, pod, add, node, snapshot)
        })
    }

    /// Runs every PreFilter plugin's `remove_pod`; stops at the first error.
    pub fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        remove: &Arc<PodInfo>,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) -> Status {
        self.run_pre_filter_extension(state, "PreFilterExtensionRemovePod", |p, state| {
            p.remove_pod(state, pod, remove, node, snapshot)
        })
    }

    /// AddPod or RemovePod (`point`, upstream's metric name for it) on every PreFilter plugin not skipped this
    /// cycle; stops at the first error.
    fn run_pre_filter_extension(
        &self,
        state: &mut CycleState,
        point: &'static str,
        call: impl Fn(&dyn PreFilterPlugin, &mut CycleState) -> Status,
    ) -> Status {
        let which = point.strip_prefix("PreFilterExtension").unwrap_or(point);
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::PreFilter) {
            if state.skip_filter_plugins.contains(&*e.name) {
                continue;
            }
            let s = timed(&timer, e, point, Status::code, || call(e.plugin.as_pre_filter().expect("preFilter"), state));
            if !s.is_success() {
                return Status::error(format!("running {which} on PreFilter plugin {:?}: {}", &*e.name, s.message()))
                    .with_plugin(&e.name);
            }
        }
        Status::success()
    }

    /// The Filter plugins whose PreFilter did not answer Skip this cycle, in order (lazily: Filter runs per chunk of
    /// nodes, and a list per chunk would be an allocation on the hot path).
    fn active_filters<'a>(&'a self, state: &'a CycleState) -> impl Iterator<Item = &'a PluginEntry> + 'a {
        self.plugins_at(ExtensionPoint::Filter).iter().filter(|e| !state.skip_filter_plugins.contains(&*e.name))
    }

    /// Filter on one node: plugins in order, the first non-Success status is the node's verdict (tagged).
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for e in self.active_filters(state) {
            let s = timed(&state.plugin_timer, e, ExtensionPoint::Filter.metric_name(), Status::code, || {
                e.plugin.as_filter().expect("registered at filter").filter(state, pod, node)
            });
            if !s.is_success() {
                return tag_filter_status(s, e);
            }
        }
        Status::success()
    }

    /// Filter on one node counting pods nominated to it with priority ≥ the pod's (upstream
    /// `RunFilterPluginsWithNominatedPods`): the pod must fit both with and without them.
    pub fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        snapshot: &Snapshot,
    ) -> Status {
        let nominated: Vec<&Arc<PodInfo>> = snapshot
            .nominated
            .get(&node.name)
            .into_iter()
            .flatten()
            .filter(|p| p.uid != pod.uid && p.priority >= pod.priority)
            .collect();
        if nominated.is_empty() {
            return self.run_filter_plugins(state, pod, node);
        }
        let mut state_with = state.clone();
        let mut node_with = node.clone();
        for p in nominated {
            node_with.add_pod(p.clone());
            let s = self.run_pre_filter_add_pod(&mut state_with, pod, p, &node_with, snapshot);
            if !s.is_success() {
                return s;
            }
        }
        let s = self.run_filter_plugins(&state_with, pod, &node_with);
        if !s.is_success() {
            return s;
        }
        self.run_filter_plugins(state, pod, node)
    }

    /// Filter on a chunk of nodes, one verdict per node in order: each plugin sees every node still feasible at
    /// once (one boundary crossing for a Wasm plugin); nodes with nominated pods take the two-pass check.
    pub fn run_filter_plugins_on_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        chunk: &[&NodeInfo],
    ) -> Vec<Status> {
        let has_nominated = !snapshot.nominated.is_empty();
        // Built fresh rather than cloned from one: a Status clone per node showed in whole-cycle profiles.
        let mut verdicts: Vec<Status> = chunk.iter().map(|_| Status::success()).collect();
        // Nodes with nominated pods need the two-pass check; the rest go through the batched pipeline.
        let mut plain: Vec<usize> = Vec::with_capacity(chunk.len());
        for (i, node) in chunk.iter().enumerate() {
            if has_nominated && snapshot.nominated.contains_key(&node.name) {
                verdicts[i] = self.run_filter_plugins_with_nominated_pods(state, pod, node, snapshot);
            } else {
                plain.push(i);
            }
        }
        let mut out = Vec::with_capacity(plain.len());
        for e in self.active_filters(state) {
            if plain.is_empty() {
                break;
            }
            let nodes: Vec<&NodeInfo> = plain.iter().map(|&i| chunk[i]).collect();
            out.clear();
            let t0 = state.plugin_timer.as_ref().map(|_| Instant::now());
            e.plugin.as_filter().expect("registered at filter").filter_nodes(state, pod, &nodes, &mut out);
            if let (Some(o), Some(t0)) = (&state.plugin_timer, t0) {
                o.plugin_execution(&e.name, ExtensionPoint::Filter.metric_name(), batch_code(&out), t0.elapsed());
            }
            if out.len() != nodes.len() {
                let s = Status::error(format!(
                    "plugin {:?} returned {} filter results for {} nodes",
                    &*e.name,
                    out.len(),
                    nodes.len()
                ))
                .with_plugin(&e.name);
                for &i in &plain {
                    verdicts[i] = s.clone();
                }
                break;
            }
            let mut still = Vec::with_capacity(plain.len());
            for (k, s) in out.drain(..).enumerate() {
                if s.is_success() {
                    still.push(plain[k]);
                } else {
                    verdicts[plain[k]] = tag_filter_status(s, e);
                }
            }
            plain = still;
        }
        verdicts
    }

    /// PostFilter: the first Success wins; UnschedulableAndUnresolvable or an Error stops; otherwise the
    /// reasons of all plugins are joined (upstream `RunPostFilterPlugins`).
    pub fn run_post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let mut reasons = Vec::new();
        let mut result = None;
        let mut rejector: Option<Arc<str>> = None;
        for e in self.plugins_at(ExtensionPoint::PostFilter) {
            let (r, s) = timed(
                &state.plugin_timer,
                e,
                ExtensionPoint::PostFilter.metric_name(),
                |(_, s): &(Option<PostFilterResult>, Status)| s.code(),
                || {
                    e.plugin
                        .as_post_filter()
                        .expect("registered at postFilter")
                        .post_filter(state, pod, filtered, handle)
                },
            );
            if s.is_success() {
                return (r, s);
            }
            if s.code() == Code::UnschedulableAndUnresolvable {
                return (r, s.with_plugin(&e.name));
            }
            if !s.is_rejected() {
                return (None, Status::error(s.message()).with_plugin(&e.name));
            }
            if r.is_some() {
                result = r;
            }
            reasons.extend(s.reasons().iter().cloned());
            rejector.get_or_insert_with(|| e.name.clone());
        }
        let s = Status::with_reasons(Code::Unschedulable, reasons);
        (
            result,
            match rejector {
                Some(r) => s.with_plugin(&r),
                None => s,
            },
        )
    }

    /// PreScore: Skip marks the plugin's Score as skipped; any other non-Success aborts with an Error.
    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
        mut trace: Option<&mut CycleTrace>,
    ) -> Status {
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::PreScore) {
            let s = timed(&timer, e, ExtensionPoint::PreScore.metric_name(), Status::code, || {
                e.plugin.as_pre_score().expect("registered at preScore").pre_score(state, pod, nodes, snapshot)
            });
            if s.is_skip() {
                state.skip_score_plugins.insert(e.name.to_string());
                if let Some(t) = trace.as_deref_mut() {
                    t.pre_score_skipped.push(e.name.to_string());
                }
                continue;
            }
            if !s.is_success() {
                return Status::error(format!("running PreScore plugin {:?}: {}", &*e.name, s.message()))
                    .with_plugin(&e.name);
            }
        }
        Status::success()
    }

    /// Score, NormalizeScore and weights: scores computed in parallel over node chunks (one batched call per
    /// plugin per chunk); each plugin's normalized scores must lie in [0, 100] or the cycle errs naming it.
    pub fn run_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        trace: Option<&mut CycleTrace>,
    ) -> Result<Vec<NodePluginScores>, Status> {
        self.score(state, pod, nodes, trace, None)
    }

    /// `run_score_plugins`, also giving every node's raw scores by plugin with its total, in node order (what
    /// OpportunisticBatching caches).
    pub fn run_score_plugins_keeping_raw(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        trace: Option<&mut CycleTrace>,
    ) -> Result<(Vec<NodePluginScores>, Vec<ScoredNode>), Status> {
        let mut raw = Vec::with_capacity(nodes.len());
        let totals = self.score(state, pod, nodes, trace, Some(&mut raw))?;
        Ok((totals, raw))
    }

    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        trace: Option<&mut CycleTrace>,
        keep_raw: Option<&mut Vec<ScoredNode>>,
    ) -> Result<Vec<NodePluginScores>, Status> {
        let active: Vec<&PluginEntry> = self
            .plugins_at(ExtensionPoint::Score)
            .iter()
            .filter(|e| !state.skip_score_plugins.contains(&*e.name))
            .collect();
        let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
        // raw[p][i]: plugin p's score of node i.
        let mut raw: Vec<Vec<i64>> = vec![vec![0; nodes.len()]; active.len()];
        let chunk_results: Vec<Result<Vec<Vec<i64>>, Status>> = self.parallelizer.map_chunks(&refs, |_, chunk| {
            let mut per_plugin = Vec::with_capacity(active.len());
            for e in &active {
                let mut out = vec![0i64; chunk.len()];
                let s = timed(&state.plugin_timer, e, ExtensionPoint::Score.metric_name(), Status::code, || {
                    e.plugin.as_score().expect("registered at score").score_nodes(state, pod, chunk, &mut out)
                });
                if !s.is_success() {
                    return Err(Status::error(format!("running Score plugin {:?}: {}", &*e.name, s.message()))
                        .with_plugin(&e.name));
                }
                per_plugin.push(out);
            }
            Ok(per_plugin)
        });
        let mut offset = 0;
        for r in chunk_results {
            let per_plugin = r?;
            let len = per_plugin.first().map(Vec::len).unwrap_or(0);
            for (p, scores) in per_plugin.into_iter().enumerate() {
                raw[p][offset..offset + scores.len()].copy_from_slice(&scores);
            }
            offset += len;
        }
        let mut totals: Vec<NodePluginScores> =
            (0..nodes.len()).map(|index| NodePluginScores { index, total: 0, randomizer: 0 }).collect();
        let mut traces = Vec::new();
        for (p, e) in active.iter().enumerate() {
            let sp = e.plugin.as_score().expect("registered at score");
            // Asked once: a Wasm plugin answers from its current version's promises.
            let normalizes = sp.has_normalize();
            if !normalizes && trace.is_none() {
                // Nothing to normalize or explain: the raw scores are the final ones (no per-node list to build).
                add_weighted(&mut totals, e, raw[p].iter().copied())?;
                continue;
            }
            let mut list: Vec<NodeScore> =
                nodes.iter().zip(&raw[p]).map(|(n, &score)| NodeScore { name: &n.name, id: n.id, score }).collect();
            // Only a plugin with a NormalizeScore of its own is timed there, as upstream.
            let timer = if normalizes { &state.plugin_timer } else { &None };
            let s =
                timed(timer, e, "ScoreExtensionNormalize", Status::code, || sp.normalize_score(state, pod, &mut list));
            if !s.is_success() {
                return Err(Status::error(format!(
                    "running Normalize on Score plugin {:?}: {}",
                    &*e.name,
                    s.message()
                ))
                .with_plugin(&e.name));
            }
            add_weighted(&mut totals, e, list.iter().map(|ns| ns.score))?;
            if trace.is_some() {
                traces.push(PluginScoreTrace {
                    plugin: e.name.to_string(),
                    weight: e.weight,
                    nodes: list
                        .iter()
                        .enumerate()
                        .map(|(i, ns)| (ns.name.to_string(), raw[p][i], ns.score, ns.score * e.weight))
                        .collect(),
                });
                traces.extend(sp.explain_scores(state, nodes));
            }
        }
        if let Some(t) = trace {
            t.scores = traces;
            t.totals = totals.iter().map(|t| (nodes[t.index].name.clone(), t.total)).collect();
        }
        if let Some(out) = keep_raw {
            out.extend(nodes.iter().zip(&totals).enumerate().map(|(i, (n, t))| ScoredNode {
                name: n.name.clone(),
                raw: active.iter().zip(&raw).map(|(e, r)| (e.name.clone(), r[i])).collect(),
                total: t.total,
            }));
        }
        Ok(totals)
    }

    /// Reserve: the first non-Success stops (the caller then runs Unreserve on every Reserve plugin).
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::Reserve) {
            let s = timed(&timer, e, ExtensionPoint::Reserve.metric_name(), Status::code, || {
                e.plugin.as_reserve().expect("registered at reserve").reserve(state, pod, node)
            });
            if !s.is_success() {
                if s.is_rejected() {
                    return s.with_plugin(&e.name);
                }
                return Status::error(format!("running Reserve plugin {:?}: {}", &*e.name, s.message()))
                    .with_plugin(&e.name);
            }
        }
        Status::success()
    }

    /// Unreserve: every Reserve plugin, in reverse order.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::Reserve).iter().rev() {
            timed(
                &timer,
                e,
                "Unreserve",
                |_| Code::Success,
                || e.plugin.as_reserve().expect("registered at reserve").unreserve(state, pod, node),
            );
        }
    }

    /// Permit: a rejection or an Error stops; Wait from any plugin parks the pod (timeouts capped at 15 minutes)
    /// and returns Wait.
    pub fn run_permit(&self, state: &mut CycleState, pod: &Arc<PodInfo>, node: &str) -> Status {
        let mut waits: HashMap<String, PermitWait> = HashMap::new();
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::Permit) {
            let (s, timeout) = timed(
                &timer,
                e,
                ExtensionPoint::Permit.metric_name(),
                |(s, _): &(Status, Duration)| s.code(),
                || e.plugin.as_permit().expect("registered at permit").permit(state, pod, node),
            );
            if s.is_success() {
                continue;
            }
            if s.code() == Code::Wait {
                let wait = |s: &Status, timeout: Duration| {
                    let timeout = timeout.min(MAX_PERMIT_TIMEOUT);
                    PermitWait { deadline: Instant::now() + timeout, timeout, reason: s.message() }
                };
                let named = e.plugin.as_permit().expect("registered at permit").waits(state);
                if named.is_empty() {
                    waits.insert(e.name.to_string(), wait(&s, timeout));
                }
                for (name, s, timeout) in named {
                    waits.insert(name, wait(&s, timeout));
                }
                continue;
            }
            if s.is_rejected() {
                return s.with_plugin(&e.name);
            }
            return Status::error(format!("running Permit plugin {:?}: {}", &*e.name, s.message()))
                .with_plugin(&e.name);
        }
        if waits.is_empty() {
            return Status::success();
        }
        self.waiting.park(pod.clone(), node, waits);
        Status::code_only(Code::Wait)
    }

    /// A pod parked at Permit, for plugins (or tests) to allow or reject.
    pub fn get_waiting_pod(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.waiting.get(uid)
    }

    /// The waiting pod's verdict if a plugin gave one, without waiting (the simulator).
    pub fn take_permit_verdict(&self, pod: &PodInfo) -> Option<Status> {
        self.waiting.take_decided(&pod.uid)
    }

    /// Blocks the binding cycle until the waiting pod is allowed, rejected or times out.
    pub fn wait_on_permit(&self, pod: &PodInfo) -> Status {
        self.waiting.wait(&pod.uid)
    }

    /// WaitOnPermit without holding a thread (the live scheduler's binding tasks).
    pub async fn wait_on_permit_async(&self, pod: &PodInfo) -> Status {
        self.waiting.wait_async(&pod.uid).await
    }

    /// PreBindPreFlight: Success when some PreBind plugin has work for the pod, Skip when none has (each that
    /// answered Skip is left out of PreBind), the first error otherwise.
    pub fn run_pre_bind_pre_flights(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let mut result = Status::skip();
        for e in self.plugins_at(ExtensionPoint::PreBind) {
            let plugin = e.plugin.as_pre_bind().expect("registered at preBind");
            let s = plugin.pre_bind_pre_flight(state, pod, node);
            if plugin.pre_bind_in_parallel() {
                state.parallel_pre_bind_plugins.insert(e.name.to_string());
            }
            match s.code() {
                Code::Success => result = Status::success(),
                Code::Skip => {
                    state.skip_pre_bind_plugins.insert(e.name.to_string());
                }
                _ => {
                    return Status::error(format!("running PreBindPreFlight {:?}: {}", &*e.name, s.message()))
                        .with_plugin(&e.name)
                }
            }
        }
        result
    }

    /// PreBind as upstream's `RunPreBindPlugins` since v1.35: the plugins PreBindPreFlight did not skip, in
    /// groups (`pre_bind_groups`); a group of neighbours that allow it runs at once, one thread each, and the
    /// first failure stops what follows. A rejection is answered as it is, naming the plugin; anything else
    /// not Success is an Error.
    pub fn run_pre_bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let state: &CycleState = state;
        let timer = state.plugin_timer.clone();
        let run = |e: &PluginEntry| {
            let s = timed(&timer, e, ExtensionPoint::PreBind.metric_name(), Status::code, || {
                e.plugin.as_pre_bind().expect("registered at preBind").pre_bind(state, pod, node)
            });
            match s {
                s if s.is_success() => None,
                s if s.is_rejected() => Some(s.with_plugin(&e.name)),
                s => Some(
                    Status::error(format!("running PreBind plugin {:?}: {}", &*e.name, s.message()))
                        .with_plugin(&e.name),
                ),
            }
        };
        for group in self.pre_bind_groups(state) {
            if let [e] = group.as_slice() {
                if let Some(s) = run(e) {
                    return s;
                }
                continue;
            }
            // Every plugin of the group runs to its end (there is no cancelling a plugin here); the failure that
            // came first is the answer, as upstream's result channel keeps the first one sent.
            let first = std::sync::Mutex::new(None);
            std::thread::scope(|scope| {
                for e in &group {
                    let (run, first) = (&run, &first);
                    scope.spawn(move || {
                        if let Some(s) = run(e) {
                            first.lock().expect("prebind lock").get_or_insert(s);
                        }
                    });
                }
            });
            if let Some(s) = first.into_inner().expect("prebind lock") {
                return s;
            }
        }
        Status::success()
    }

    /// PreBind's plugins in the order they run (upstream's `getPreBindPluginGroups`): neighbours that allow
    /// parallel PreBind gather in one group, any other plugin is a group of its own and closes the group before
    /// it; plugins PreBindPreFlight skipped are left out.
    fn pre_bind_groups<'a>(&'a self, state: &CycleState) -> Vec<Vec<&'a PluginEntry>> {
        let mut groups = Vec::new();
        let mut group: Vec<&PluginEntry> = Vec::new();
        for e in self.plugins_at(ExtensionPoint::PreBind) {
            let skipped = state.skip_pre_bind_plugins.contains(&*e.name);
            if state.parallel_pre_bind_plugins.contains(&*e.name) {
                if !skipped {
                    group.push(e);
                }
                continue;
            }
            if !group.is_empty() {
                groups.push(std::mem::take(&mut group));
            }
            if !skipped {
                groups.push(vec![e]);
            }
        }
        if !group.is_empty() {
            groups.push(group);
        }
        groups
    }

    /// Bind: Skip passes to the next binder; the first other answer is final. All skipping is Skip.
    pub fn run_bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.run_bind_from(0, state, pod, node)
    }

    /// Bind from the `first`-th binder on (the ones before it answered Skip).
    pub fn run_bind_from(&self, first: usize, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::Bind).iter().skip(first) {
            let s = timed(&timer, e, ExtensionPoint::Bind.metric_name(), Status::code, || {
                e.plugin.as_bind().expect("registered at bind").bind(state, pod, node)
            });
            if s.is_skip() {
                continue;
            }
            return bind_answer(s, e);
        }
        Status::skip()
    }

    /// The first binder's bind as a future, when it has one (`BindPlugin::bind_async`): the binding cycle awaits
    /// it instead of holding a thread. A Skip from it leaves the pod to `run_bind_from(1, …)`.
    pub fn bind_future(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Option<BoxFuture<'static, Status>> {
        let e = self.plugins_at(ExtensionPoint::Bind).first()?;
        let bind = e.plugin.as_bind().expect("registered at bind").bind_async(pod, node)?;
        let (timer, e) = (state.plugin_timer.clone(), e.clone());
        Some(Box::pin(async move {
            let t0 = Instant::now();
            let s = bind.await;
            if let Some(o) = &timer {
                o.plugin_execution(&e.name, ExtensionPoint::Bind.metric_name(), s.code(), t0.elapsed());
            }
            if s.is_skip() {
                s
            } else {
                bind_answer(s, &e)
            }
        }))
    }

    /// Whether any plugin is registered at `point`.
    pub fn has_plugins_at(&self, point: ExtensionPoint) -> bool {
        !self.plugins_at(point).is_empty()
    }

    /// PostBind: informational, every plugin runs.
    pub fn run_post_bind(&self, state: &mut CycleState, pod: &Arc<PodInfo>, node: &str) {
        let timer = state.plugin_timer.clone();
        for e in self.plugins_at(ExtensionPoint::PostBind) {
            timed(
                &timer,
                e,
                ExtensionPoint::PostBind.metric_name(),
                |_| Code::Success,
                || e.plugin.as_post_bind().expect("registered at postBind").post_bind(state, pod, node),
            );
        }
    }
}

impl BatchHandle for Framework {
    fn profile_name(&self) -> &str {
        &self.profile_name
    }

    fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        Framework::run_filter_plugins(self, state, pod, node)
    }

    fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        self.run_pre_score(state, pod, nodes, snapshot, None)
    }

    fn run_raw_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Vec<(Arc<str>, i64)>, Status> {
        let mut out = Vec::new();
        for e in self.plugins_at(ExtensionPoint::Score).iter().filter(|e| !state.skip_score_plugins.contains(&*e.name))
        {
            let r = timed(
                &state.plugin_timer,
                e,
                ExtensionPoint::Score.metric_name(),
                |r: &Result<i64, Status>| r.as_ref().map_or_else(Status::code, |_| Code::Success),
                || e.plugin.as_score().expect("registered at score").score(state, pod, node),
            );
            match r {
                Ok(score) => out.push((e.name.clone(), score)),
                Err(s) => {
                    return Err(Status::error(format!("plugin {:?} failed with: {}", &*e.name, s.message()))
                        .with_plugin(&e.name))
                }
            }
        }
        Ok(out)
    }

    /// As upstream's `NormalizeScores`: each Score plugin PreScore did not skip normalizes its raw scores across
    /// `scores` (a node without one from it counts 0), then the weighted sum is each node's total.
    fn normalize_scores(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        scores: &mut [ScoredNode],
        snapshot: &Snapshot,
    ) -> Status {
        let mut totals: Vec<NodePluginScores> =
            (0..scores.len()).map(|index| NodePluginScores { index, total: 0, randomizer: 0 }).collect();
        for e in self.plugins_at(ExtensionPoint::Score).iter().filter(|e| !state.skip_score_plugins.contains(&*e.name))
        {
            let sp = e.plugin.as_score().expect("registered at score");
            let mut list: Vec<NodeScore> = scores
                .iter()
                .map(|n| NodeScore {
                    name: &n.name,
                    id: snapshot.get(&n.name).map_or(0, |i| i.id),
                    score: n.raw.iter().find(|(p, _)| *p == e.name).map_or(0, |(_, s)| *s),
                })
                .collect();
            if sp.has_normalize() {
                let s = timed(&state.plugin_timer, e, "ScoreExtensionNormalize", Status::code, || {
                    sp.normalize_score(state, pod, &mut list)
                });
                if !s.is_success() {
                    return Status::error(format!("running Normalize on Score plugin {:?}: {}", &*e.name, s.message()))
                        .with_plugin(&e.name);
                }
            }
            let weighted: Vec<i64> = list.iter().map(|ns| ns.score).collect();
            if let Err(s) = add_weighted(&mut totals, e, weighted.into_iter()) {
                return s;
            }
        }
        for (n, t) in scores.iter_mut().zip(totals) {
            n.total = t.total;
        }
        Status::success()
    }
}

/// Runs one plugin call; in a sampled cycle (`timer` set) also reports how long it took and the code `code` reads
/// from its result (`scheduler_plugin_execution_duration_seconds`).
fn timed<R>(
    timer: &Option<Arc<dyn PluginMetrics>>,
    e: &PluginEntry,
    point: &'static str,
    code: impl FnOnce(&R) -> Code,
    call: impl FnOnce() -> R,
) -> R {
    let Some(o) = timer else { return call() };
    let t0 = Instant::now();
    let r = call();
    o.plugin_execution(&e.name, point, code(&r), t0.elapsed());
    r
}

/// A binder's final answer: Success as it is, anything else an Error naming the plugin.
fn bind_answer(s: Status, e: &PluginEntry) -> Status {
    if s.is_success() {
        return s;
    }
    Status::error(format!("running Bind plugin {:?}: {}", &*e.name, s.message())).with_plugin(&e.name)
}

/// The code a batch of Filter verdicts is reported under: Error if any node errs, else Success (rejections are a
/// Filter plugin doing its job).
fn batch_code(verdicts: &[Status]) -> Code {
    if verdicts.iter().any(|s| s.code() == Code::Error) {
        Code::Error
    } else {
        Code::Success
    }
}

fn tag_filter_status(s: Status, e: &PluginEntry) -> Status {
    if s.is_rejected() || s.code() == Code::Error {
        s.with_plugin(&e.name)
    } else {
        // Anything else from a Filter plugin (Wait, Skip) is a plugin bug: upstream turns it into an Error.
        Status::error(format!("plugin {:?} returned {} from Filter", &*e.name, s.code().as_str())).with_plugin(&e.name)
    }
}

fn names(v: &[PluginEntry]) -> String {
    v.iter().map(|e| e.name.to_string()).collect::<Vec<_>>().join(", ")
}
