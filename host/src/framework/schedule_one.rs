//! The scheduling cycle and the binding cycle for one pod, top to bottom, as upstream's `schedule_one.go`:
//! pop → snapshot → PreFilter → Filter → (PostFilter when nothing fits) → PreScore → Score → select →
//! assume → Reserve → Permit → [binding cycle: WaitOnPermit → PreBind → Bind → PostBind]. Any failure after
//! assume unwinds with Unreserve (reverse order), forgets the pod and requeues it with backoff.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cycle_state::CycleState;
use super::interface::{action, ClusterEvent, EventResource, PostFilterHandle, PostFilterResult};
use super::rng::Rng;
use super::runtime::{fit_error_message, CycleTrace, Diagnosis, Framework, NodePluginScores};
use super::status::{Code, Status};
use super::types::{NodeInfo, PodInfo, QueuedPodInfo};
use crate::cache::{Cache, Snapshot};
use crate::cluster::{ClusterClient, PodEvent};
use crate::queue::{Profiles, SchedulingQueue};

/// The message when the cluster has no nodes at all (upstream `ErrNoNodesAvailable`).
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// The scheduler's clock, in nanoseconds. The simulator uses a virtual one so backoffs cost no real time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> u64;
}

/// Wall-clock time since the scheduler started.
#[derive(Debug)]
pub struct RealClock(Instant);

impl Default for RealClock {
    fn default() -> Self {
        RealClock(Instant::now())
    }
}

impl Clock for RealClock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct VirtualClock(AtomicU64);

impl VirtualClock {
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as u64, Ordering::SeqCst);
    }
    /// Moves the clock to `t` if that is later.
    pub fn advance_to(&self, t: u64) {
        self.0.fetch_max(t, Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// Bound to the node.
    Scheduled(String),
    /// No node fits; the message is upstream's `0/N nodes are available: ...`.
    Unschedulable(String),
    /// An Error status (plugin failure, bind failure).
    Error(String),
}

impl AttemptResult {
    /// Upstream's `result` label for `scheduler_schedule_attempts_total`.
    pub fn label(&self) -> &'static str {
        match self {
            AttemptResult::Scheduled(_) => "scheduled",
            AttemptResult::Unschedulable(_) => "unschedulable",
            AttemptResult::Error(_) => "error",
        }
    }
}

/// Receives what happens, for the simulator's report, metrics and logs.
pub trait Observer: Send + Sync {
    /// An attempt ended (after binding, for scheduled pods).
    fn attempt(
        &self,
        _profile: &str,
        _pod: &PodInfo,
        _result: &AttemptResult,
        _duration: Duration,
        _trace: Option<CycleTrace>,
    ) {
    }
    /// A pod was evicted to make room for `preemptor` on `node`.
    fn preempted(&self, _victim: &PodInfo, _preemptor: &PodInfo, _node: &str) {}
    /// Time spent in an extension point (`scheduler_framework_extension_point_duration_seconds`).
    fn extension_point(&self, _profile: &str, _point: &'static str, _status: Code, _duration: Duration) {}
    /// Time one plugin spent in one call at an extension point, in sampled cycles
    /// (`scheduler_plugin_execution_duration_seconds`). Filter and Score are batched: one call covers a chunk of
    /// nodes.
    fn plugin_execution(&self, _plugin: &str, _point: &'static str, _status: Code, _duration: Duration) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct NoopObserver;
impl Observer for NoopObserver {}

/// Profiles by schedulerName.
pub struct ProfileMap {
    map: HashMap<String, Arc<Framework>>,
    first: Arc<Framework>,
}

impl ProfileMap {
    /// Builds the map; `frameworks` must not be empty.
    pub fn new(frameworks: Vec<Framework>) -> ProfileMap {
        let frameworks: Vec<Arc<Framework>> = frameworks.into_iter().map(Arc::new).collect();
        let first = frameworks.first().expect("at least one profile").clone();
        ProfileMap { map: frameworks.into_iter().map(|f| (f.profile_name().to_string(), f)).collect(), first }
    }

    /// The framework for a schedulerName.
    pub fn get(&self, name: &str) -> Option<&Arc<Framework>> {
        self.map.get(name)
    }

    /// Profile names.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

impl Profiles for ProfileMap {
    fn framework(&self, scheduler_name: &str) -> Option<&Framework> {
        self.map.get(scheduler_name).map(|f| &**f)
    }
    fn first(&self) -> &Framework {
        &self.first
    }
}

/// Options of a scheduler instance.
#[derive(Debug, Clone, Default)]
pub struct SchedulerOptions {
    /// Seed of the tie-breaking and candidate-sampling generator.
    pub seed: u64,
    /// Run binding cycles on their own threads (live) instead of inline (simulator: deterministic).
    pub async_binding: bool,
    /// Raise cluster events for the scheduler's own binds and evictions (simulator: no informer does it).
    pub self_events: bool,
    /// Record a `CycleTrace` for pods whose `ns/name` is listed.
    pub trace_pods: Vec<String>,
    /// Share of scheduling cycles, in percent, whose plugin calls are timed for the observer's
    /// `plugin_execution` (kube-scheduler samples 10%); 0 times none.
    pub plugin_metrics_sample_percent: u32,
}

/// Everything the scheduling loop and the binding cycles share.
pub struct Scheduler {
    /// Profiles.
    pub profiles: Arc<ProfileMap>,
    /// The queue.
    pub queue: Mutex<SchedulingQueue>,
    /// The cache.
    pub cache: Mutex<Cache>,
    snapshot: Mutex<Snapshot>,
    nominated_seen: Mutex<Option<NominatedPods>>,
    /// The cluster writes.
    pub cluster: Arc<dyn ClusterClient>,
    rng: Mutex<Rng>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The observer.
    pub observer: Arc<dyn Observer>,
    options: SchedulerOptions,
    in_flight_bindings: AtomicU64,
    /// Scheduling cycles started, for sampling plugin metrics evenly.
    cycles_started: AtomicU64,
}

/// Whether cycle `n` (counting from 0) is among the `percent` of cycles whose plugin calls are timed: spread evenly
/// (cycles 0, 10, 20, ... at 10%) rather than drawn at random, so runs repeat and the first cycle counts.
fn sampled(n: u64, percent: u32) -> bool {
    let p = u64::from(percent.min(100));
    (n * p) % 100 < p
}

/// Nominated pods by node name, as the snapshot shares them.
type NominatedPods = Arc<HashMap<String, Vec<Arc<PodInfo>>>>;

enum ScheduleError {
    NoNodes,
    // Boxed: the diagnosis is large and the Ok path should not pay for moving it.
    Fit { diagnosis: Box<Diagnosis>, num_all_nodes: usize },
    Status(Status),
}

struct ScheduleResult {
    host: String,
}

impl Scheduler {
    /// A scheduler over the given profiles, cache and cluster.
    pub fn new(
        profiles: Arc<ProfileMap>,
        queue: SchedulingQueue,
        cache: Cache,
        cluster: Arc<dyn ClusterClient>,
        clock: Arc<dyn Clock>,
        observer: Arc<dyn Observer>,
        options: SchedulerOptions,
    ) -> Scheduler {
        Scheduler {
            profiles,
            queue: Mutex::new(queue),
            cache: Mutex::new(cache),
            snapshot: Mutex::new(Snapshot::default()),
            nominated_seen: Mutex::new(None),
            cluster,
            rng: Mutex::new(Rng::new(options.seed)),
            clock,
            observer,
            options,
            in_flight_bindings: AtomicU64::new(0),
            cycles_started: AtomicU64::new(0),
        }
    }

    /// Binding cycles still running.
    pub fn bindings_in_flight(&self) -> u64 {
        self.in_flight_bindings.load(Ordering::SeqCst)
    }

    /// Pops one pod and runs its scheduling cycle (and, unless binding is asynchronous, its binding cycle).
    /// Returns false when activeQ is empty.
    pub fn schedule_one(self: &Arc<Self>) -> bool {
        let popped = self.queue.lock().expect("queue lock").pop();
        let Some(qpi) = popped else { return false };
        let cycle = self.queue.lock().expect("queue lock").scheduling_cycle();
        let pod = qpi.pod_info.clone();
        let Some(fwk) = self.profiles.get(pod.scheduler_name()).cloned() else {
            tracing::warn!(pod = %pod.key(), scheduler = pod.scheduler_name(), "no profile for pod; dropping it");
            self.queue.lock().expect("queue lock").done(&pod.uid);
            return true;
        };
        if self.cache.lock().expect("cache lock").contains_pod(&pod.uid) {
            // Bound or assumed meanwhile: nothing to do (upstream skipPodSchedule).
            self.queue.lock().expect("queue lock").done(&pod.uid);
            return true;
        }
        let start = Instant::now();
        let mut state = CycleState::new();
        if self.sample_plugin_metrics() {
            state.plugin_timer = Some(self.observer.clone());
        }
        fwk.begin_cycle(&mut state);
        let mut trace = self.options.trace_pods.iter().any(|k| *k == pod.key()).then(CycleTrace::default);

        let mut snapshot = self.snapshot.lock().expect("snapshot lock");
        self.refresh_snapshot(&mut snapshot);
        let result = self.schedule_pod(&fwk, &mut state, &pod, &snapshot, trace.as_mut());
        match result {
            Ok(r) => {
                drop(snapshot);
                self.assume_and_bind(fwk, state, qpi, r.host, cycle, start, trace);
            }
            Err(ScheduleError::Status(s)) => {
                drop(snapshot);
                self.fail(&fwk, qpi, cycle, s, Default::default(), start, trace);
            }
            Err(ScheduleError::NoNodes) => {
                drop(snapshot);
                let s = Status::unschedulable(NO_NODES_AVAILABLE);
                self.fail(&fwk, qpi, cycle, s, Default::default(), start, trace);
            }
            Err(ScheduleError::Fit { mut diagnosis, num_all_nodes }) => {
                if fwk.has_post_filter() {
                    let t0 = Instant::now();
                    let handle = Handle { fwk: &fwk, snapshot: &snapshot, rng: &self.rng };
                    let (r, s) = fwk.run_post_filter(&state, &pod, &diagnosis.node_to_status, &handle);
                    self.observer.extension_point(fwk.profile_name(), "PostFilter", s.code(), t0.elapsed());
                    if s.code() == Code::Error {
                        tracing::error!(pod = %pod.key(), status = %s, "PostFilter failed");
                    } else if !s.is_success() {
                        diagnosis.post_filter_msg = s.message();
                    }
                    if let Some(t) = trace.as_mut() {
                        t.post_filter = Some(match (&r, s.is_success()) {
                            (Some(r), true) => format!(
                                "nominated {}, evicting [{}]",
                                r.nominated_node_name.as_deref().unwrap_or(""),
                                r.victims.iter().map(|v| v.key()).collect::<Vec<_>>().join(", ")
                            ),
                            _ => s.to_string(),
                        });
                    }
                    drop(snapshot);
                    if let Some(r) = r.filter(|_| s.is_success()) {
                        self.apply_preemption(&pod, r);
                    }
                } else {
                    drop(snapshot);
                }
                let msg = fit_error_message(num_all_nodes, &diagnosis);
                let s = Status::unschedulable(msg);
                self.fail(&fwk, qpi, cycle, s, diagnosis.unschedulable_plugins.into_iter().collect(), start, trace);
            }
        }
        true
    }

    /// Whether this cycle's plugin calls are timed (see [`sampled`]).
    fn sample_plugin_metrics(&self) -> bool {
        sampled(self.cycles_started.fetch_add(1, Ordering::Relaxed), self.options.plugin_metrics_sample_percent)
    }

    fn refresh_snapshot(&self, snapshot: &mut Snapshot) {
        self.cache.lock().expect("cache lock").update_snapshot(snapshot);
        let q = self.queue.lock().expect("queue lock");
        let nominated = q.nominated();
        let mut seen = self.nominated_seen.lock().expect("nominated lock");
        let same = match seen.as_ref() {
            Some(prev) => {
                prev.len() == nominated.len()
                    && prev.iter().all(|(k, v)| {
                        nominated
                            .get(k)
                            .is_some_and(|w| w.len() == v.len() && w.iter().zip(v).all(|(a, b)| a.uid == b.uid))
                    })
            }
            None => nominated.is_empty(),
        };
        if !same {
            let fresh = Arc::new(nominated.clone());
            *seen = Some(fresh.clone());
            snapshot.nominated = fresh;
        }
    }

    /// Upstream `schedulePod`: find feasible nodes, score them, pick one.
    fn schedule_pod(
        &self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut trace: Option<&mut CycleTrace>,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let num_all_nodes = snapshot.len();
        let mut diagnosis = Diagnosis::default();

        let t0 = Instant::now();
        let (pre_result, s) = fwk.run_pre_filter(state, pod, snapshot, trace.as_deref_mut());
        self.observer.extension_point(fwk.profile_name(), "PreFilter", s.code(), t0.elapsed());
        if !s.is_success() {
            if !s.is_rejected() {
                return Err(ScheduleError::Status(s));
            }
            // Every node is rejected with PreFilter's status; the message carries it once.
            diagnosis.pre_filter_msg = s.message();
            if let Some(p) = s.plugin() {
                diagnosis.unschedulable_plugins.insert(p.to_string());
            }
            for n in snapshot.nodes() {
                diagnosis.node_to_status.insert(n.name.clone(), s.clone());
            }
            return Err(ScheduleError::Fit { diagnosis: Box::new(diagnosis), num_all_nodes });
        }

        // A pod nominated by an earlier preemption tries its node first.
        let nominated = self.queue.lock().expect("queue lock").nominated_node(&pod.uid).map(str::to_string);
        if let Some(n) = nominated.as_deref().and_then(|n| snapshot.get(n)) {
            if pre_result.as_ref().is_none_or(|set| set.contains(&n.name)) {
                let s = fwk.run_filter_plugins_with_nominated_pods(state, pod, n, snapshot);
                if s.code() == Code::Error {
                    return Err(ScheduleError::Status(s));
                }
                if s.is_success() {
                    if let Some(t) = trace {
                        t.nominated_node = Some(n.name.clone());
                    }
                    return Ok(ScheduleResult { host: n.name.clone() });
                }
            }
        }

        let narrowed: Vec<Arc<NodeInfo>>;
        let nodes: &[Arc<NodeInfo>] = match &pre_result {
            None => snapshot.nodes(),
            Some(set) => {
                narrowed = snapshot.nodes().iter().filter(|n| set.contains(&n.name)).cloned().collect();
                // Nodes PreFilter excluded count as rejected by it, for the message.
                for n in snapshot.nodes().iter().filter(|n| !set.contains(&n.name)) {
                    diagnosis.node_to_status.insert(
                        n.name.clone(),
                        Status::unresolvable("node(s) didn't satisfy plugin(s) PreFilter result"),
                    );
                }
                &narrowed
            }
        };
        let t0 = Instant::now();
        let feasible = fwk
            .find_nodes_that_pass_filters(state, pod, snapshot, nodes, &mut diagnosis, trace.as_deref_mut())
            .map_err(ScheduleError::Status)?;
        self.observer.extension_point(fwk.profile_name(), "Filter", Code::Success, t0.elapsed());
        if feasible.is_empty() {
            return Err(ScheduleError::Fit { diagnosis: Box::new(diagnosis), num_all_nodes });
        }
        if feasible.len() == 1 {
            return Ok(ScheduleResult { host: feasible[0].name.clone() });
        }

        let t0 = Instant::now();
        let s = fwk.run_pre_score(state, pod, &feasible, snapshot, trace.as_deref_mut());
        self.observer.extension_point(fwk.profile_name(), "PreScore", s.code(), t0.elapsed());
        if !s.is_success() {
            return Err(ScheduleError::Status(s));
        }
        let t0 = Instant::now();
        let scores = fwk.run_score_plugins(state, pod, &feasible, trace).map_err(ScheduleError::Status)?;
        self.observer.extension_point(fwk.profile_name(), "Score", Code::Success, t0.elapsed());
        Ok(ScheduleResult { host: feasible[self.select_host(&scores)].name.clone() })
    }

    /// The highest total wins; ties are broken uniformly at random (reservoir sampling, as upstream).
    fn select_host(&self, scores: &[NodePluginScores]) -> usize {
        let mut rng = self.rng.lock().expect("rng lock");
        let mut best = 0;
        let mut ties = 1;
        for i in 1..scores.len() {
            if scores[i].total > scores[best].total {
                best = i;
                ties = 1;
            } else if scores[i].total == scores[best].total {
                ties += 1;
                if rng.below(ties) == 0 {
                    best = i;
                }
            }
        }
        scores[best].index
    }

    /// Evicts the victims and nominates the pod, as upstream's `prepareCandidate`.
    fn apply_preemption(&self, pod: &Arc<PodInfo>, r: PostFilterResult) {
        let Some(node) = r.nominated_node_name.clone().filter(|n| !n.is_empty()) else { return };
        for v in &r.victims {
            if let Err(e) = self.cluster.delete_pod(v, pod) {
                tracing::warn!(victim = %v.key(), error = %e, "evicting preemption victim failed");
                continue;
            }
            self.cluster.record(
                v,
                PodEvent {
                    type_: "Normal",
                    reason: "Preempted",
                    message: format!("Preempted by pod {} on node {}", pod.uid, node),
                    scheduler_name: pod.scheduler_name().to_string(),
                },
            );
            self.observer.preempted(v, pod, &node);
            if self.options.self_events {
                let _ = self.cache.lock().expect("cache lock").remove_pod(&v.uid);
            }
        }
        let mut q = self.queue.lock().expect("queue lock");
        // Lower-priority pods nominated to the same node lose their nomination.
        let lower: Vec<Arc<PodInfo>> =
            q.nominated().get(&node).into_iter().flatten().filter(|p| p.priority < pod.priority).cloned().collect();
        for p in lower {
            q.delete_nominated(&p.uid);
            let _ = self.cluster.set_nominated_node(&p, None);
        }
        q.add_nominated(pod.clone(), node.clone());
        drop(q);
        let _ = self.cluster.set_nominated_node(pod, Some(&node));
        if self.options.self_events && !r.victims.is_empty() {
            let now = self.clock.now();
            self.queue
                .lock()
                .expect("queue lock")
                .on_event(ClusterEvent::new(EventResource::AssignedPod, action::DELETE), now);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn assume_and_bind(
        self: &Arc<Self>,
        fwk: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        host: String,
        cycle: u64,
        start: Instant,
        trace: Option<CycleTrace>,
    ) {
        let assumed = Arc::new(qpi.pod_info.with_node_name(&host));
        if let Err(e) = self.cache.lock().expect("cache lock").assume_pod(assumed.clone(), &host) {
            self.fail(&fwk, qpi, cycle, Status::error(e.to_string()), Vec::new(), start, trace);
            return;
        }
        let s = fwk.run_reserve(&mut state, &assumed, &host);
        if !s.is_success() {
            self.unwind(&fwk, &mut state, &assumed, &host, qpi, cycle, s, start, trace);
            return;
        }
        let s = fwk.run_permit(&mut state, &assumed, &host);
        if !s.is_success() && s.code() != Code::Wait {
            self.unwind(&fwk, &mut state, &assumed, &host, qpi, cycle, s, start, trace);
            return;
        }
        // The pod is no longer nominated anywhere: it has a node.
        if self.queue.lock().expect("queue lock").nominated_node(&assumed.uid).is_some() {
            self.queue.lock().expect("queue lock").delete_nominated(&assumed.uid);
        }
        self.in_flight_bindings.fetch_add(1, Ordering::SeqCst);
        let waits = s.code() == Code::Wait;
        if self.options.async_binding || waits {
            let me = self.clone();
            std::thread::Builder::new()
                .name("binding".into())
                .spawn(move || me.binding_cycle(fwk, state, qpi, assumed, host, cycle, start, trace))
                .expect("spawn binding thread");
        } else {
            self.binding_cycle(fwk, state, qpi, assumed, host, cycle, start, trace);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn binding_cycle(
        &self,
        fwk: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        assumed: Arc<PodInfo>,
        host: String,
        cycle: u64,
        start: Instant,
        trace: Option<CycleTrace>,
    ) {
        let mut s = fwk.wait_on_permit(&assumed);
        if s.is_success() {
            s = fwk.run_pre_bind(&mut state, &assumed, &host);
        }
        if s.is_success() {
            s = fwk.run_bind(&mut state, &assumed, &host);
            if s.is_skip() {
                s = Status::error(format!("no bind plugin bound pod {}", assumed.key()));
            }
        }
        if !s.is_success() {
            self.unwind(&fwk, &mut state, &assumed, &host, qpi, cycle, s, start, trace);
            self.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        self.cache.lock().expect("cache lock").finish_binding(&assumed.uid);
        self.queue.lock().expect("queue lock").done(&assumed.uid);
        self.cluster.record(
            &assumed,
            PodEvent {
                type_: "Normal",
                reason: "Scheduled",
                message: format!("Successfully assigned {} to {}", assumed.key(), host),
                scheduler_name: fwk.profile_name().to_string(),
            },
        );
        fwk.run_post_bind(&mut state, &assumed, &host);
        self.observer.attempt(fwk.profile_name(), &assumed, &AttemptResult::Scheduled(host), start.elapsed(), trace);
        if self.options.self_events {
            let now = self.clock.now();
            self.queue
                .lock()
                .expect("queue lock")
                .on_event(ClusterEvent::new(EventResource::AssignedPod, action::ADD), now);
        }
        self.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
    }

    /// Upstream's unwinding after assume: Unreserve in reverse order, forget the assumed pod, requeue it, and
    /// only then tell the queue that room was freed — leaving the pod itself out, or its own failure would count
    /// as a cluster change and send it straight back to backoff.
    #[allow(clippy::too_many_arguments)]
    fn unwind(
        &self,
        fwk: &Framework,
        state: &mut CycleState,
        assumed: &PodInfo,
        host: &str,
        qpi: QueuedPodInfo,
        cycle: u64,
        s: Status,
        start: Instant,
        trace: Option<CycleTrace>,
    ) {
        fwk.run_unreserve(state, assumed, host);
        let _ = self.cache.lock().expect("cache lock").forget_pod(&assumed.uid);
        let plugins = s.plugin().map(|p| vec![p.to_string()]).unwrap_or_default();
        self.fail(fwk, qpi, cycle, s, plugins, start, trace);
        if self.options.self_events {
            let now = self.clock.now();
            let event = ClusterEvent::new(EventResource::AssignedPod, action::DELETE);
            self.queue.lock().expect("queue lock").on_event_except(event, now, &assumed.uid);
        }
    }

    /// Upstream `handleSchedulingFailure`: event, condition, and back into the queue.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &self,
        fwk: &Framework,
        mut qpi: QueuedPodInfo,
        cycle: u64,
        s: Status,
        plugins: Vec<String>,
        start: Instant,
        trace: Option<CycleTrace>,
    ) {
        let pod = qpi.pod_info.clone();
        let error = s.code() == Code::Error;
        let message = if s.message().is_empty() { s.code().as_str().to_string() } else { s.message() };
        qpi.unschedulable_plugins = plugins.into_iter().collect();
        let now = self.clock.now();
        self.queue.lock().expect("queue lock").add_unschedulable(qpi, cycle, error, now);
        self.cluster.record(
            &pod,
            PodEvent {
                type_: "Warning",
                reason: "FailedScheduling",
                message: message.clone(),
                scheduler_name: fwk.profile_name().to_string(),
            },
        );
        let result = if error { AttemptResult::Error(message) } else { AttemptResult::Unschedulable(message) };
        self.observer.attempt(fwk.profile_name(), &pod, &result, start.elapsed(), trace);
    }
}

/// What PostFilter plugins may use.
struct Handle<'a> {
    fwk: &'a Framework,
    snapshot: &'a Snapshot,
    rng: &'a Mutex<Rng>,
}

impl PostFilterHandle for Handle<'_> {
    fn snapshot(&self) -> &Snapshot {
        self.snapshot
    }
    fn run_filter_plugins_with_nominated_pods(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        self.fwk.run_filter_plugins_with_nominated_pods(state, pod, node, self.snapshot)
    }
    fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.fwk.run_pre_filter_add_pod(state, pod, add, node, self.snapshot)
    }
    fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.fwk.run_pre_filter_remove_pod(state, pod, remove, node, self.snapshot)
    }
    fn random(&self, n: usize) -> usize {
        self.rng.lock().expect("rng lock").below(n)
    }
}

#[cfg(test)]
mod tests {
    use super::sampled;

    #[test]
    fn plugin_metrics_sample_the_given_share_of_cycles_evenly() {
        let picked = |p| (0..1000u64).filter(|&n| sampled(n, p)).collect::<Vec<_>>();
        assert_eq!(picked(10).len(), 100);
        assert_eq!(&picked(10)[..3], [0, 10, 20]);
        assert_eq!(picked(30).len(), 300);
        assert!(picked(30).windows(2).all(|w| w[1] - w[0] <= 4), "spread, not bunched");
        assert_eq!(picked(0).len(), 0);
        assert_eq!(picked(100).len(), 1000);
        assert_eq!(picked(250).len(), 1000, "capped at 100%");
    }
}
