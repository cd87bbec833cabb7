//! The scheduling cycle and the binding cycle for one pod, top to bottom, as upstream's `schedule_one.go`:
//! pop → snapshot → PreFilter → Filter → (PostFilter when nothing fits) → PreScore → Score → select →
//! assume → Reserve → Permit → [binding cycle: WaitOnPermit → PreBind → Bind → PostBind]. Any failure after
//! assume unwinds with Unreserve (reverse order), forgets the pod and requeues it with backoff.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::observer::AttemptResult;
use super::shadow::Decision;
use super::Scheduler;
use crate::cluster::ClusterError;
use crate::extender::Extenders;
use crate::framework::batch::{heap, OtherNodes};
use crate::framework::diagnosis::{fit_error_message, NO_NODES_AVAILABLE};
use crate::framework::rng::Rng;
use crate::framework::runtime::NodePluginScores;
use crate::framework::{
    action, ClusterEvent, Code, CycleState, CycleTrace, Diagnosis, EventObject, EventResource, ExtensionPoint,
    Framework, NodeInfo, PodEvent, PodInfo, PodSignature, PostFilterHandle, PostFilterResult, PreemptionCandidate,
    QueuedPodInfo, Snapshot, Status,
};
use crate::plugins::default_preemption;

/// Upstream `findNodesThatPassExtenders` after the framework's Filter; when an extender rejected nodes the pod
/// counts as unschedulable by "Extender", so any cluster event may requeue it (upstream #122019).
fn filter_by_extenders(
    extenders: &Extenders,
    pod: &PodInfo,
    feasible: Vec<Arc<NodeInfo>>,
    diagnosis: &mut Diagnosis,
    trace: Option<&mut CycleTrace>,
) -> Result<Vec<Arc<NodeInfo>>, ScheduleError> {
    if extenders.is_empty() {
        return Ok(feasible);
    }
    let before = feasible.len();
    let kept = extenders
        .filter(pod, feasible, &mut diagnosis.node_to_status, trace.map(|t| &mut t.extenders))
        .map_err(ScheduleError::Status)?;
    if kept.len() != before {
        diagnosis.unschedulable_plugins.insert(crate::extender::EXTENDER_NAME.to_string());
    }
    Ok(kept)
}

/// Whether cycle `n` (counting from 0) is among the `percent` of cycles whose plugin calls are timed: spread evenly
/// (cycles 0, 10, 20, ... at 10%) rather than drawn at random, so runs repeat and the first cycle counts.
fn sampled(n: u64, percent: u32) -> bool {
    let p = u64::from(percent.min(100));
    (n * p) % 100 < p
}

pub(super) enum ScheduleError {
    NoNodes,
    // Boxed: the diagnosis is large and the Ok path should not pay for moving it.
    Fit { diagnosis: Box<Diagnosis>, num_all_nodes: usize },
    Status(Status),
}

pub(super) struct ScheduleResult {
    pub(super) host: String,
    /// Every node that scored as high as `host` (filled for a shadow only: the serving cycle needs one node).
    best: Vec<String>,
}

/// Who runs the scheduling algorithm for a pod.
#[derive(Debug, Clone, Copy)]
pub(super) enum Decider {
    /// The pod's profile: its node search moves the shared start on, it asks the extenders, its extension points
    /// are timed for the metrics, and ties are broken by the scheduler's generator.
    Serving,
    /// The profile's shadow, which only reads: it searches from where the serving cycle started, without the
    /// extenders or metrics, and reports every best node instead of drawing one (so it draws nothing from the
    /// generator the serving decisions use).
    Shadow {
        /// Where the serving cycle's node search started.
        start: usize,
    },
}

/// What OpportunisticBatching needs of a serving cycle: the pod's signature and the cycle's count (upstream's
/// `CurrentCycle`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Batching<'a> {
    /// The pod's signature, if it has one.
    pub(super) signature: Option<&'a PodSignature>,
    /// The scheduling cycle.
    pub(super) cycle: u64,
}

/// One pod's attempt from pop to its end: what the scheduling cycle hands the binding cycle, and what every way
/// out of either (bound, unwound, failed) needs.
pub(super) struct Attempt {
    /// The pod's profile.
    pub(super) fwk: Arc<Framework>,
    /// The cycle's state, kept through binding.
    pub(super) state: CycleState,
    /// The pod as the queue handed it out.
    pub(super) qpi: QueuedPodInfo,
    /// The scheduling cycle it was popped in (a failure compares it with the queue's last move request).
    pub(super) cycle: u64,
    /// When the attempt started (`scheduler_scheduling_attempt_duration_seconds`).
    pub(super) start: Instant,
    /// The explain trace, when this pod is traced.
    pub(super) trace: Option<CycleTrace>,
}

/// The pod placed in the cache on its node while the binding cycle runs.
/// A pod parked at Permit in the simulator, and when (on the scheduler's clock) its wait runs out.
pub(super) struct Parked {
    a: Attempt,
    assumed: Assumed,
    parked_at: u64,
    deadline: u64,
    /// PreBindPreFlight found PreBind work (it ran before parking).
    pre_bind_work: bool,
}

struct Assumed {
    /// The pod with its node name set.
    pod: Arc<PodInfo>,
    /// The node.
    host: String,
    /// This binding cycle set the pod's `status.nominatedNodeName` to the node.
    nominated: bool,
}

impl Scheduler {
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
        if let Some((key, group)) = self.pod_group_of(&pod) {
            // GenericWorkload: the member's whole group, in one PodGroup cycle (schedule_one_podgroup.rs).
            self.schedule_one_podgroup(fwk, qpi, cycle, key, group);
            return true;
        }
        let start = Instant::now();
        let mut state = CycleState::new();
        if self.sample_plugin_metrics() {
            state.plugin_timer = Some(self.observer.clone());
        }
        fwk.begin_cycle(&mut state, &pod);
        let trace = self.options.trace_pods.iter().any(|k| *k == pod.key()).then(CycleTrace::default);
        let mut a = Attempt { fwk, state, qpi, cycle, start, trace };

        let mut snapshot = self.snapshot.lock().expect("snapshot lock");
        self.refresh_snapshot(&mut snapshot);
        let start_node_index = self.next_start_node_index.load(Ordering::Relaxed);
        let signature = self.sign_pod(&a.fwk, &pod, &snapshot);
        let batching = Batching { signature: signature.as_ref(), cycle };
        let result = self.schedule_pod(
            &a.fwk,
            &mut a.state,
            &pod,
            &snapshot,
            a.trace.as_mut(),
            Decider::Serving,
            Some(batching),
        );
        if let Some(shadow) = self.profiles.shadow_of(a.fwk.profile_name()) {
            self.run_shadow(&a.fwk, shadow, &pod, &snapshot, start_node_index, &result);
        }
        match result {
            Ok(r) => {
                drop(snapshot);
                self.observer.scheduling_algorithm(a.start.elapsed());
                self.assume_and_bind(a, r.host);
            }
            Err(ScheduleError::Status(s)) => {
                drop(snapshot);
                self.observer.scheduling_algorithm(a.start.elapsed());
                self.clear_nomination(&pod);
                self.fail(a, s, Vec::new());
            }
            Err(ScheduleError::NoNodes) => {
                drop(snapshot);
                self.clear_nomination(&pod);
                self.observer.scheduling_algorithm(a.start.elapsed());
                self.fail(a, Status::unschedulable(NO_NODES_AVAILABLE), Vec::new());
            }
            Err(ScheduleError::Fit { mut diagnosis, num_all_nodes }) => {
                if a.fwk.has_post_filter() {
                    let t0 = Instant::now();
                    let handle =
                        Handle { fwk: &a.fwk, snapshot: &snapshot, rng: &self.rng, extenders: &self.extenders };
                    let (r, s) = a.fwk.run_post_filter(&a.state, &pod, &diagnosis.node_to_status, &handle);
                    self.observer.extension_point(
                        a.fwk.profile_name(),
                        ExtensionPoint::PostFilter.metric_name(),
                        s.code(),
                        t0.elapsed(),
                    );
                    let victims = r
                        .as_ref()
                        .filter(|r| s.is_success() && r.nominated_node_name.as_deref().is_some_and(|n| !n.is_empty()))
                        .map(|r| r.victims.len());
                    self.observer.preemption_attempt(victims);
                    if s.code() == Code::Error {
                        tracing::error!(pod = %pod.key(), status = %s, "PostFilter failed");
                    }
                    // Upstream keeps the message whatever the code: an error's text ends the pod's message too
                    // (DynamicResources' PostFilter errs for a pod an earlier PreFilter rejected), and so does a
                    // successful preemption's "found a potential placement ..." (v1.35 on).
                    diagnosis.post_filter_msg = s.message();
                    if let Some(t) = a.trace.as_mut() {
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
                    match r {
                        Some(r) if s.is_success() => self.apply_preemption(&pod, r),
                        // No candidate anywhere: the pod gives up the node it was nominated to (upstream's
                        // ModeOverride with no node).
                        Some(r) if r.nominated_node_name.as_deref() == Some("") => self.clear_nomination(&pod),
                        _ => {}
                    }
                } else {
                    drop(snapshot);
                    self.clear_nomination(&pod);
                }
                self.observer.scheduling_algorithm(a.start.elapsed());
                let msg = fit_error_message(num_all_nodes, &diagnosis);
                self.fail(a, Status::unschedulable(msg), diagnosis.unschedulable_plugins.into_iter().collect());
            }
        }
        true
    }

    /// The pod's signature for OpportunisticBatching, when the gate is on and the profile signs pods (upstream
    /// signs a pod when it enters the queue; signing when it is popped gives the same signature, the pod's spec
    /// being the same). Timed as upstream's `Sign` extension point and plugin calls, which are not sampled.
    pub(super) fn sign_pod(&self, fwk: &Framework, pod: &PodInfo, snapshot: &Snapshot) -> Option<PodSignature> {
        if !fwk.batching() {
            return None;
        }
        let t0 = Instant::now();
        let timer: Option<Arc<dyn crate::framework::metrics::PluginMetrics>> = Some(self.observer.clone());
        let signature = fwk.sign_pod(pod, snapshot, &timer);
        // Upstream reports Success whatever the plugins said.
        self.observer.extension_point(fwk.profile_name(), "Sign", Code::Success, t0.elapsed());
        signature
    }

    /// Whether this cycle's plugin calls are timed (see [`sampled`]).
    pub(super) fn sample_plugin_metrics(&self) -> bool {
        sampled(self.cycles_started.fetch_add(1, Ordering::Relaxed), self.options.plugin_metrics_sample_percent)
    }

    pub(super) fn refresh_snapshot(&self, snapshot: &mut Snapshot) {
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

    /// Runs the serving profile's shadow on the pod and snapshot the serving cycle just decided on, and records
    /// how the two decisions compare. The shadow has a cycle state of its own and nothing it decides is acted on.
    fn run_shadow(
        &self,
        serving: &Framework,
        shadow: &Framework,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        start: usize,
        served: &Result<ScheduleResult, ScheduleError>,
    ) {
        let mut state = CycleState::new();
        shadow.begin_cycle(&mut state, pod);
        let shadowed = self.schedule_pod(shadow, &mut state, pod, snapshot, None, Decider::Shadow { start }, None);
        let decision = |r: &Result<ScheduleResult, ScheduleError>| match r {
            Ok(r) => Decision::Node {
                host: r.host.clone(),
                best: if r.best.is_empty() { vec![r.host.clone()] } else { r.best.clone() },
            },
            Err(ScheduleError::NoNodes) => Decision::Unschedulable(NO_NODES_AVAILABLE.to_string()),
            Err(ScheduleError::Fit { diagnosis, num_all_nodes }) => {
                Decision::Unschedulable(fit_error_message(*num_all_nodes, diagnosis))
            }
            Err(ScheduleError::Status(s)) => Decision::Error(s.to_string()),
        };
        self.shadows.record(
            serving.profile_name(),
            shadow.profile_name(),
            &pod.key(),
            &decision(served),
            &decision(&shadowed),
        );
    }

    /// Upstream `schedulePod`: find feasible nodes, score them, pick one. A serving cycle with `batching` (the gate
    /// on) asks the profile for a hint and stores its results, as upstream's (a shadow neither asks nor stores).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn schedule_pod(
        &self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        mut trace: Option<&mut CycleTrace>,
        decider: Decider,
        batching: Option<Batching<'_>>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let batching = batching.filter(|_| fwk.batching() && matches!(decider, Decider::Serving));
        // Upstream's StoreScheduleResults, for each way a serving cycle finds its node.
        let store = |hint: Option<&str>, chosen: &str, others: OtherNodes| {
            if let Some(b) = batching {
                let now = self.clock.now();
                fwk.store_schedule_results(b.signature, hint, chosen, others, b.cycle, now, &*self.observer);
            }
        };
        if snapshot.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let num_all_nodes = snapshot.len();
        let mut diagnosis = Diagnosis::default();
        let serving = matches!(decider, Decider::Serving);
        let observe = |point: ExtensionPoint, code: Code, t0: Instant| {
            if serving {
                self.observer.extension_point(fwk.profile_name(), point.metric_name(), code, t0.elapsed())
            }
        };
        // A shadow asks no extender: they are the serving profile's, and a shadow must not add load or effects.
        let extenders = if serving { &*self.extenders } else { &Extenders::default() };

        let t0 = Instant::now();
        let (pre_result, s) = fwk.run_pre_filter(state, pod, snapshot, trace.as_deref_mut());
        observe(ExtensionPoint::PreFilter, s.code(), t0);
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
        // OpportunisticBatching's hint, asked even for a nominated pod (which flushes the cached list), and tried
        // the same way when the pod is not nominated.
        let hint = batching.and_then(|b| {
            let now = self.clock.now();
            fwk.get_node_hint(state, pod, b.signature, nominated.is_some(), b.cycle, now, snapshot, &*self.observer)
        });
        if let Some(n) = nominated.as_deref().or(hint.as_deref()).and_then(|n| snapshot.get(n)) {
            if pre_result.as_ref().is_none_or(|set| set.contains(&n.name)) {
                let s = fwk.run_filter_plugins_with_nominated_pods(state, pod, n, snapshot);
                if s.code() == Code::Error {
                    return Err(ScheduleError::Status(s));
                }
                // Upstream's evaluateNominatedNode asks the extenders about the nominated node too.
                let passes_extenders = s.is_success()
                    && (extenders.is_empty()
                        || extenders
                            .filter(pod, vec![n.clone()], &mut diagnosis.node_to_status, None)
                            .is_ok_and(|kept| !kept.is_empty()));
                if passes_extenders {
                    if let Some(t) = trace {
                        if nominated.is_some() {
                            t.nominated_node = Some(n.name.clone());
                        } else {
                            t.node_hint = Some(n.name.clone());
                        }
                    }
                    store(hint.as_deref(), &n.name, OtherNodes::NotScored);
                    return Ok(ScheduleResult { host: n.name.clone(), best: Vec::new() });
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
        let start = match decider {
            Decider::Serving => self.next_start_node_index.load(Ordering::Relaxed),
            Decider::Shadow { start } => start,
        };
        let (feasible, next_start) = self
            .find_nodes_that_pass_filters(fwk, state, pod, snapshot, nodes, start, &mut diagnosis, trace.as_deref_mut())
            .map_err(ScheduleError::Status)?;
        if serving {
            self.next_start_node_index.store(next_start, Ordering::Relaxed);
        }
        observe(ExtensionPoint::Filter, Code::Success, t0);
        let feasible = filter_by_extenders(extenders, pod, feasible, &mut diagnosis, trace.as_deref_mut())?;
        if feasible.is_empty() {
            return Err(ScheduleError::Fit { diagnosis: Box::new(diagnosis), num_all_nodes });
        }
        if feasible.len() == 1 {
            store(hint.as_deref(), &feasible[0].name, OtherNodes::NotScored);
            return Ok(ScheduleResult { host: feasible[0].name.clone(), best: Vec::new() });
        }

        let t0 = Instant::now();
        let s = fwk.run_pre_score(state, pod, &feasible, snapshot, trace.as_deref_mut());
        observe(ExtensionPoint::PreScore, s.code(), t0);
        if !s.is_success() {
            return Err(ScheduleError::Status(s));
        }
        let t0 = Instant::now();
        // A signed pod's scores are kept with each plugin's raw score, for the next pod alike.
        let keep = batching.is_some_and(|b| b.signature.is_some());
        let (mut scores, kept) = if keep {
            fwk.run_score_plugins_keeping_raw(state, pod, &feasible, trace.as_deref_mut()).map(|(s, k)| (s, Some(k)))
        } else {
            fwk.run_score_plugins(state, pod, &feasible, trace.as_deref_mut()).map(|s| (s, None))
        }
        .map_err(ScheduleError::Status)?;
        observe(ExtensionPoint::Score, Code::Success, t0);
        if !extenders.is_empty() {
            extenders.prioritize(pod, &feasible, &mut scores, trace.as_deref_mut().map(|t| &mut t.extenders));
            if serving {
                let mut rng = self.rng.lock().expect("rng lock");
                for s in scores.iter_mut().filter(|s| s.randomizer != 0) {
                    s.randomizer = rng.next_u64() >> 1;
                }
            }
            if let Some(t) = trace {
                t.totals = scores.iter().map(|s| (feasible[s.index].name.clone(), s.total)).collect();
            }
        }
        if serving {
            let host = feasible[select_host(&mut scores)].name.clone();
            if batching.is_some() {
                // The same heap select_host built, so the node popped is the node chosen; the rest is cached.
                let others = match kept {
                    Some(mut kept) => {
                        heap::init(&mut kept, &heap::by_total);
                        let chosen = heap::pop(&mut kept, &heap::by_total);
                        debug_assert_eq!(chosen.map(|c| c.name).as_deref(), Some(host.as_str()));
                        OtherNodes::Kept(kept)
                    }
                    None => OtherNodes::Unkept(feasible.len() - 1),
                };
                store(hint.as_deref(), &host, others);
            }
            return Ok(ScheduleResult { host, best: Vec::new() });
        }
        let top = scores.iter().map(|s| s.total).max().unwrap_or_default();
        let best: Vec<String> =
            scores.iter().filter(|s| s.total == top).map(|s| feasible[s.index].name.clone()).collect();
        Ok(ScheduleResult { host: best[0].clone(), best })
    }

    /// Deletes a preemption's victims (all at once), and for each one deleted records the `Preempted` Event with
    /// `message` and tells the observer; `node` is the node preempted on, each victim's own when `None`. The
    /// victims count as terminating until their deletion is seen (see `framework::preempting`).
    pub(super) fn evict_victims(
        &self,
        victims: &[Arc<PodInfo>],
        preemptor: &PodInfo,
        message: &str,
        node: Option<&str>,
    ) {
        self.profiles.preempting().start(&preemptor.uid, victims.iter().map(|v| v.uid.clone()));
        let results = self.cluster.delete_pods(victims, preemptor);
        self.victims_evicted(victims, preemptor, message, node, results);
    }

    /// Records what each victim's deletion gave (see `evict_victims`) and ends the preemption in the registry;
    /// answers whether a deletion failed. A victim already gone (deleted by someone else, or by an earlier
    /// preemption whose deletion the cache has not seen yet) is no failure, as upstream's.
    fn victims_evicted(
        &self,
        victims: &[Arc<PodInfo>],
        preemptor: &PodInfo,
        message: &str,
        node: Option<&str>,
        results: Vec<Result<(), ClusterError>>,
    ) -> bool {
        let mut failed = false;
        // The victims no deletion of which is coming: they stop counting as terminating.
        let mut not_deleted: Vec<&str> = Vec::new();
        for (v, deleted) in victims.iter().zip(results) {
            match deleted {
                Ok(()) => {}
                Err(ClusterError::Conflict { message, .. }) => {
                    tracing::debug!(victim = %v.key(), %message, "preemption victim already gone");
                    not_deleted.push(&v.uid);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(victim = %v.key(), error = %e, "evicting preemption victim failed");
                    failed = true;
                    not_deleted.push(&v.uid);
                    continue;
                }
            }
            self.cluster.record(
                v,
                PodEvent {
                    type_: "Normal",
                    reason: "Preempted",
                    message: message.to_string(),
                    scheduler_name: preemptor.scheduler_name().to_string(),
                    rejected: false,
                },
            );
            self.observer.preempted(v, preemptor, node.unwrap_or_else(|| v.node_name().unwrap_or_default()));
        }
        self.profiles.preempting().finish(&preemptor.uid, not_deleted);
        failed
    }

    /// Asynchronous preemption (SchedulerAsyncPreemption, upstream's `prepareCandidateAsync`): the victims'
    /// deletions run as a task while the scheduling loop goes on, and the preemptor waits at DefaultPreemption's
    /// PreEnqueue until they are done. When a deletion fails the preemptor is activated, as upstream does, lest it
    /// wait for events that will not come. Answers false, doing nothing, where the gate is off, the cluster cannot
    /// delete without holding the thread, or there is no runtime (the simulator: deletions stay in the cycle).
    fn evict_victims_async(
        self: &Arc<Self>,
        victims: &[Arc<PodInfo>],
        preemptor: &Arc<PodInfo>,
        message: &str,
        node: &str,
    ) -> bool {
        let Some(rt) = self.binding_runtime.as_ref().filter(|_| self.profiles.features().scheduler_async_preemption)
        else {
            return false;
        };
        if victims.is_empty() {
            return false;
        }
        let Some(deleting) = self.cluster.delete_pods_async(victims, preemptor) else { return false };
        self.profiles.preempting().start(&preemptor.uid, victims.iter().map(|v| v.uid.clone()));
        let (this, victims, preemptor) = (self.clone(), victims.to_vec(), preemptor.clone());
        let (message, node) = (message.to_string(), node.to_string());
        let started = Instant::now();
        rt.spawn(async move {
            let results = deleting.await;
            let failed = this.victims_evicted(&victims, &preemptor, &message, Some(&node), results);
            this.observer.preemption_goroutine(failed, started.elapsed());
            let now = this.clock.now();
            let mut q = this.queue.lock().expect("queue lock");
            if failed {
                q.activate(&preemptor.uid, now);
            } else {
                q.recheck_gated(&preemptor.uid, default_preemption::NAME, now);
            }
        });
        true
    }

    /// Upstream's `clearNominatedNode` after a failed cycle (no nodes, an error, no PostFilter, or a preemption
    /// that found no candidate): the pod no longer holds room on the node it was nominated to, in the queue's
    /// nominations and, when its status names one, in the API.
    fn clear_nomination(&self, pod: &PodInfo) {
        self.queue.lock().expect("queue lock").delete_nominated(&pod.uid);
        if pod.nominated_node_name().is_some() {
            let _ = self.cluster.set_nominated_node(pod, None);
        }
    }

    /// Evicts the victims and nominates the pod, as upstream's `prepareCandidate`. The victims' deletion reaches
    /// the cache and the queue the way every deletion does: as a cluster event, through the event handlers.
    fn apply_preemption(self: &Arc<Self>, pod: &Arc<PodInfo>, r: PostFilterResult) {
        let Some(node) = r.nominated_node_name.clone().filter(|n| !n.is_empty()) else { return };
        let message = format!("Preempted by pod {} on node {}", pod.uid, node);
        if !self.evict_victims_async(&r.victims, pod, &message, &node) {
            self.evict_victims(&r.victims, pod, &message, Some(&node));
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
    }

    /// Assumes the pod on its node, runs Reserve and Permit, then the binding cycle: on its own thread when
    /// binding is asynchronous or Permit asked the pod to wait, inline otherwise.
    pub(super) fn assume_and_bind(self: &Arc<Self>, mut a: Attempt, host: String) {
        let pod = Arc::new(a.qpi.pod_info.with_node_name(&host));
        if let Err(e) = self.cache.lock().expect("cache lock").assume_pod(pod.clone(), &host) {
            self.fail(a, Status::error(e.to_string()), Vec::new());
            return;
        }
        self.profiles.pod_view().assumed(&pod, self.clock.now());
        let assumed = Assumed { pod, host, nominated: false };
        let t0 = Instant::now();
        let s = a.fwk.run_reserve(&mut a.state, &assumed.pod, &assumed.host);
        self.observe_point(&a, ExtensionPoint::Reserve.metric_name(), s.code(), t0);
        if !s.is_success() {
            let s = rejected_on(s, &assumed.host);
            self.unwind(a, &assumed, s);
            return;
        }
        let t0 = Instant::now();
        let s = a.fwk.run_permit(&mut a.state, &assumed.pod, &assumed.host);
        self.observe_point(&a, ExtensionPoint::Permit.metric_name(), s.code(), t0);
        if !s.is_success() && s.code() != Code::Wait {
            let s = rejected_on(s, &assumed.host);
            self.unwind(a, &assumed, s);
            return;
        }
        // The pod is no longer nominated anywhere: it has a node (a no-op for a pod that was not).
        self.queue.lock().expect("queue lock").delete_nominated(&assumed.pod.uid);
        self.in_flight_bindings.fetch_add(1, Ordering::SeqCst);
        let waits = s.code() == Code::Wait;
        match (&self.binding_runtime, self.options.async_binding) {
            (Some(rt), true) => {
                let me = self.clone();
                rt.spawn(me.binding_task(a, assumed, waits));
            }
            (_, false) if waits => self.park(a, assumed),
            (_, true) => {
                let me = self.clone();
                std::thread::Builder::new()
                    .name("binding".into())
                    .spawn(move || me.binding_cycle(a, assumed, waits))
                    .expect("spawn binding thread");
            }
            _ => self.binding_cycle(a, assumed, waits),
        }
    }

    /// Simulator: a pod that waits at Permit is parked, and its binding cycle runs inline once a plugin decides
    /// (`finish_decided_waits`) or the simulator's clock reaches its timeout (`expire_waits`), so runs repeat.
    fn park(&self, mut a: Attempt, mut assumed: Assumed) {
        let pre_bind_work = match self.pre_flight_and_nominate(&mut a, &mut assumed, true) {
            Ok(work) => work,
            Err(s) => return self.finish_binding(a, assumed, s),
        };
        let wait = a.fwk.get_waiting_pod(&assumed.pod.uid).and_then(|w| w.shortest_timeout()).unwrap_or_default();
        let now = self.clock.now();
        let deadline = now.saturating_add(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX));
        self.parked.lock().expect("parked lock").push(Parked { a, assumed, parked_at: now, deadline, pre_bind_work });
    }

    /// The binding cycle's first step as upstream's since v1.35 (NominatedNodeNameForExpectation, on by default):
    /// PreBindPreFlight runs before WaitOnPermit, and an Error from it fails the cycle. Answers whether some PreBind
    /// plugin has work for the pod, and whether the pod is to be nominated to its node first: when PreBind has
    /// work or Permit made it wait, so that other components (the cluster autoscaler) see where it is about to go
    /// (upstream's `bindingCycle` in schedule_one.go); not when it already carries that node.
    fn pre_flight(&self, a: &mut Attempt, assumed: &Assumed, waits: bool) -> Result<(bool, bool), Status> {
        if !self.profiles.features().nominated_node_name_for_expectation {
            // v1.34's binding cycle (an emulated 1.34): no pre-flight, no nomination; PreBind runs as it always did.
            return Ok((true, false));
        }
        let t0 = Instant::now();
        let pf = a.fwk.run_pre_bind_pre_flights(&mut a.state, &assumed.pod, &assumed.host);
        self.observe_point(a, "PreBindPreFlight", pf.code(), t0);
        if !pf.is_success() && !pf.is_skip() {
            return Err(pf);
        }
        let work = pf.is_success();
        let nominate = (work || waits) && assumed.pod.nominated_node_name() != Some(assumed.host.as_str());
        Ok((work, nominate))
    }

    /// `pre_flight`, then the nomination it asks for, waiting on this thread for the write (the simulator's and
    /// the thread-per-binding cycles). Answers whether PreBind has work.
    fn pre_flight_and_nominate(&self, a: &mut Attempt, assumed: &mut Assumed, waits: bool) -> Result<bool, Status> {
        let (work, nominate) = self.pre_flight(a, assumed, waits)?;
        if nominate {
            let written = futures::executor::block_on(self.cluster.nominate_for_binding(&assumed.pod, &assumed.host));
            self.nominated(assumed, written);
        }
        Ok(work)
    }

    /// Notes the nomination's outcome: a failed write is logged and the cycle goes on, as upstream's.
    fn nominated(&self, assumed: &mut Assumed, written: Result<(), ClusterError>) {
        match written {
            Ok(()) => assumed.nominated = true,
            Err(e) => tracing::error!(
                pod = %assumed.pod.key(),
                node = %assumed.host,
                error = %e,
                "failed to update the nominated node name in the binding cycle"
            ),
        }
    }

    /// Simulator: runs the binding cycles of parked pods that a plugin allowed or rejected, in the order they were
    /// parked. True when any ran.
    pub fn finish_decided_waits(&self) -> bool {
        let decided: Vec<(Parked, Status)> = {
            let mut parked = self.parked.lock().expect("parked lock");
            let mut decided = Vec::new();
            let mut i = 0;
            while i < parked.len() {
                match parked[i].a.fwk.take_permit_verdict(&parked[i].assumed.pod) {
                    Some(s) => decided.push((parked.remove(i), s)),
                    None => i += 1,
                }
            }
            decided
        };
        let any = !decided.is_empty();
        for (p, s) in decided {
            self.observer.permit_wait(s.code(), Duration::from_nanos(self.clock.now().saturating_sub(p.parked_at)));
            self.permitted(&p.assumed, &s);
            self.bind_permitted(p.a, p.assumed, s, p.pre_bind_work);
        }
        any
    }

    /// Simulator: pods parked at Permit (they count among the bindings in flight).
    pub fn parked_waits(&self) -> u64 {
        self.parked.lock().expect("parked lock").len() as u64
    }

    /// Simulator: the earliest time a parked pod's wait runs out.
    pub fn next_permit_deadline(&self) -> Option<u64> {
        self.parked.lock().expect("parked lock").iter().map(|p| p.deadline).min()
    }

    /// Simulator: rejects the parked pods whose wait ran out by `now`, as their plugin's timeout does.
    pub fn expire_waits(&self, now: u64) {
        for p in self.parked.lock().expect("parked lock").iter().filter(|p| p.deadline <= now) {
            if let Some(w) = p.a.fwk.get_waiting_pod(&p.assumed.pod.uid) {
                w.expire();
            }
        }
    }

    /// The binding cycle as a task: WaitOnPermit is awaited (no thread is held while a pod waits), and so is the
    /// native binder's request to the API server. Plugin code that may block runs off the async workers: PreBind,
    /// or an extender's binding, on the runtime's blocking pool; what follows the native binder's request (PostBind,
    /// a binder after Skip, Unreserve after a failure) on the tail threads, which the task does not wait for. At
    /// most `max_bindings_in_flight` cycles are past WaitOnPermit at once (a tail keeps its cycle's slot); the rest
    /// wait for a slot as tasks.
    async fn binding_task(self: Arc<Self>, mut a: Attempt, mut assumed: Assumed, waits: bool) {
        let pre_bind_work = match self.pre_flight(&mut a, &assumed, waits) {
            Ok((work, nominate)) => {
                if nominate {
                    let written = self.cluster.nominate_for_binding(&assumed.pod, &assumed.host).await;
                    self.nominated(&mut assumed, written);
                }
                work
            }
            Err(s) => {
                self.blocking(move |me| me.finish_binding(a, assumed, s)).await;
                return;
            }
        };
        let t0 = Instant::now();
        let s = if waits { a.fwk.wait_on_permit_async(&assumed.pod).await } else { Status::success() };
        if waits {
            self.observer.permit_wait(s.code(), t0.elapsed());
        }
        self.permitted(&assumed, &s);
        let slot = self.binding_slots.clone().acquire_owned().await.expect("binding slots are never closed");
        // A pod an extender binds takes the blocking way: bind_permitted asks the extenders first.
        let direct = !pre_bind_work && !self.extenders.binds(&assumed.pod);
        let bind = match s.is_success() && direct {
            true => a.fwk.bind_future(&a.state, &assumed.pod, &assumed.host),
            false => None,
        };
        let Some(bind) = bind else {
            self.blocking(move |me| me.bind_permitted(a, assumed, s, pre_bind_work)).await;
            return;
        };
        let t0 = Instant::now();
        let s = bind.await;
        if !s.is_skip() {
            self.observe_point(&a, ExtensionPoint::Bind.metric_name(), s.code(), t0);
        }
        if s.is_success() && !a.fwk.has_plugins_at(ExtensionPoint::PostBind) {
            // Nothing left that may block: the cache, the queue and the (queued) event.
            self.finish_binding(a, assumed, s);
            return;
        }
        // The tail keeps this cycle's binding slot until it is done; nothing here waits for it.
        let me = self.clone();
        self.tails.run(Box::new(move || {
            let _slot = slot;
            me.accounted(|| {
                let s = if s.is_skip() { me.run_binders(1, &mut a, &assumed) } else { s };
                me.finish_binding(a, assumed, s)
            })
        }));
    }

    /// Runs the rest of a binding cycle on the blocking pool.
    async fn blocking(self: &Arc<Self>, f: impl FnOnce(&Scheduler) + Send + 'static) {
        let me = self.clone();
        // `accounted` catches a panic, so the task cannot fail but by the runtime's shutdown.
        let _ = tokio::task::spawn_blocking(move || me.accounted(|| f(&me))).await;
    }

    /// Runs the rest of a binding cycle; a panicking plugin leaves the pod assumed until the cache's expiry, and
    /// is said so rather than vanishing (nor does it count as in flight any longer).
    fn accounted(&self, f: impl FnOnce()) {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let message = e
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| e.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a non-string payload");
            tracing::error!(panic = message, "binding cycle panicked");
            self.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Reports the time spent in an extension point of this attempt's profile.
    pub(super) fn observe_point(&self, a: &Attempt, point: &'static str, code: Code, t0: Instant) {
        self.observer.extension_point(a.fwk.profile_name(), point, code, t0.elapsed());
    }

    /// PreBindPreFlight (and the nomination) → WaitOnPermit (when Permit said Wait) → PreBind → Bind → PostBind;
    /// any failure unwinds.
    fn binding_cycle(&self, mut a: Attempt, mut assumed: Assumed, waits: bool) {
        let pre_bind_work = match self.pre_flight_and_nominate(&mut a, &mut assumed, waits) {
            Ok(work) => work,
            Err(s) => return self.finish_binding(a, assumed, s),
        };
        let t0 = Instant::now();
        let s = a.fwk.wait_on_permit(&assumed.pod);
        if waits {
            self.observer.permit_wait(s.code(), t0.elapsed());
        }
        self.permitted(&assumed, &s);
        self.bind_permitted(a, assumed, s, pre_bind_work);
    }

    /// After WaitOnPermit let the pod through: upstream's `Done`. Events heard from here on are not kept for it
    /// (a rejection at Permit still weighs those heard while it waited), and a failure at PreBind or Bind sends it
    /// to backoffQ.
    fn permitted(&self, assumed: &Assumed, s: &Status) {
        if s.is_success() {
            self.queue.lock().expect("queue lock").past_permit(&assumed.pod.uid);
        }
    }

    /// The binding cycle after WaitOnPermit answered `s`: PreBind (when PreBindPreFlight found work) → Bind →
    /// PostBind; any failure unwinds.
    fn bind_permitted(&self, mut a: Attempt, assumed: Assumed, s: Status, pre_bind_work: bool) {
        let mut s = rejected_on(s, &assumed.host);
        if s.is_success() && pre_bind_work {
            let t0 = Instant::now();
            s = a.fwk.run_pre_bind(&mut a.state, &assumed.pod, &assumed.host);
            self.observe_point(&a, ExtensionPoint::PreBind.metric_name(), s.code(), t0);
        }
        if s.is_success() {
            // Extenders bind before the framework's binders (upstream's extendersBinding).
            s = match self.extenders.bind(&assumed.pod, &assumed.host) {
                Some(bound) => bound,
                None => self.run_binders(0, &mut a, &assumed),
            };
        }
        self.finish_binding(a, assumed, s);
    }

    /// Bind, from the `first`-th binder on; a pod that every binder skipped is an error.
    fn run_binders(&self, first: usize, a: &mut Attempt, assumed: &Assumed) -> Status {
        let (pod, host) = (&assumed.pod, assumed.host.as_str());
        let t0 = Instant::now();
        let s = a.fwk.run_bind_from(first, &mut a.state, pod, host);
        self.observe_point(a, ExtensionPoint::Bind.metric_name(), s.code(), t0);
        if s.is_skip() {
            return Status::error(format!("no bind plugin bound pod {}", pod.key()));
        }
        s
    }

    /// After Bind answered `s`: unwinds a failure; for a bound pod, the cache, the queue, the `Scheduled` event
    /// and PostBind.
    fn finish_binding(&self, mut a: Attempt, assumed: Assumed, s: Status) {
        let (pod, host) = (&assumed.pod, assumed.host.as_str());
        if !s.is_success() {
            self.unwind(a, &assumed, s);
            self.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        self.cache.lock().expect("cache lock").finish_binding(&pod.uid);
        self.queue.lock().expect("queue lock").done(&pod.uid);
        self.cluster.record(
            pod,
            PodEvent {
                type_: "Normal",
                reason: "Scheduled",
                message: format!("Successfully assigned {} to {}", pod.key(), host),
                scheduler_name: a.fwk.profile_name().to_string(),
                rejected: false,
            },
        );
        let since_queued =
            a.qpi.initial_attempt_timestamp.map(|t| Duration::from_nanos(self.clock.now().saturating_sub(t)));
        self.observer.pod_scheduled(a.qpi.attempts, since_queued);
        if a.qpi.flushed_from_unschedulable {
            self.observer.pod_scheduled_after_flush();
        }
        let t0 = Instant::now();
        a.fwk.run_post_bind(&mut a.state, pod, host);
        self.observe_point(&a, ExtensionPoint::PostBind.metric_name(), Code::Success, t0);
        let result = AttemptResult::Scheduled(host.to_string());
        self.observer.attempt(a.fwk.profile_name(), pod, &result, a.start.elapsed(), a.trace);
        self.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
    }

    /// Upstream's unwinding after assume: Unreserve in reverse order, forget the assumed pod, requeue it, and
    /// only then tell the queue that room was freed (forgetting an assumed pod counts as an assigned pod's
    /// deletion) — leaving the pod itself out, or its own failure would send it straight back to backoff.
    fn unwind(&self, mut a: Attempt, assumed: &Assumed, s: Status) {
        let t0 = Instant::now();
        a.fwk.run_unreserve(&mut a.state, &assumed.pod, &assumed.host);
        // Unreserve is Reserve's undo, not an `ExtensionPoint` of its own; upstream labels its time `Unreserve`.
        self.observe_point(&a, "Unreserve", Code::Success, t0);
        let forgotten = self.cache.lock().expect("cache lock").forget_pod(&assumed.pod.uid).is_ok();
        if forgotten {
            self.profiles.pod_view().pending(&a.qpi.pod_info, self.clock.now());
        }
        // Upstream's failure handler after Reserve, Permit or the binding cycle clears the pod's nomination
        // (clearNominatedNode): the one this binding cycle wrote, or one from an earlier preemption.
        if assumed.nominated || assumed.pod.nominated_node_name().is_some() {
            self.queue.lock().expect("queue lock").delete_nominated(&assumed.pod.uid);
            let _ = self.cluster.set_nominated_node(&assumed.pod, None);
        }
        let plugins = s.plugin().map(|p| vec![p.to_string()]).unwrap_or_default();
        self.fail(a, s, plugins);
        if forgotten {
            let now = self.clock.now();
            let event = ClusterEvent::new(EventResource::AssignedPod, action::DELETE);
            let old = EventObject::Pod(assumed.pod.clone());
            self.queue.lock().expect("queue lock").on_event_except(event, Some(&old), now, &assumed.pod.uid);
        }
    }

    /// Upstream `handleSchedulingFailure`: event, condition, and back into the queue.
    pub(super) fn fail(&self, a: Attempt, s: Status, plugins: Vec<String>) {
        let Attempt { fwk, mut qpi, start, trace, .. } = a;
        let pod = qpi.pod_info.clone();
        let error = s.code() == Code::Error;
        let message = if s.message().is_empty() { s.code().as_str().to_string() } else { s.message() };
        // Upstream names rejecting plugins only for a rejection; an error is retried from errorBackoffQ.
        qpi.unschedulable_plugins = if error { Default::default() } else { plugins.into_iter().collect() };
        let now = self.clock.now();
        self.queue.lock().expect("queue lock").add_unschedulable(qpi, error, now);
        self.cluster.record(
            &pod,
            PodEvent {
                type_: "Warning",
                reason: "FailedScheduling",
                message: message.clone(),
                scheduler_name: fwk.profile_name().to_string(),
                rejected: s.is_rejected(),
            },
        );
        let result = if error { AttemptResult::Error(message) } else { AttemptResult::Unschedulable(message) };
        self.observer.attempt(fwk.profile_name(), &pod, &result, start.elapsed(), trace);
    }
}

/// A rejection at Reserve, Permit or WaitOnPermit as upstream reports it: a `FitError` over the one node the pod
/// was assumed on (`0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s at plugin
/// GangScheduling.`), the rejecting plugin kept. Any other status is left as it is.
pub(super) fn rejected_on(s: Status, node: &str) -> Status {
    if !s.is_rejected() {
        return s;
    }
    let mut d = Diagnosis::default();
    d.node_to_status.insert(node.to_string(), s.clone());
    let wrapped = Status::new(s.code(), fit_error_message(1, &d));
    match s.plugin() {
        Some(p) => wrapped.with_plugin(&Arc::from(p)),
        None => wrapped,
    }
}

/// What PostFilter plugins may use.
struct Handle<'a> {
    fwk: &'a Framework,
    snapshot: &'a Snapshot,
    rng: &'a Mutex<Rng>,
    extenders: &'a Extenders,
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
    fn call_extenders(
        &self,
        pod: &PodInfo,
        candidates: Vec<PreemptionCandidate>,
    ) -> Result<Vec<PreemptionCandidate>, Status> {
        self.extenders.process_preemption(pod, candidates, self.snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::sampled;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use futures::future::BoxFuture;

    use crate::cache::Cache;
    use crate::cluster::memory::{MemoryCluster, Write};
    use crate::cluster::{ClusterClient, ClusterError, EventHandler, PodEvent};
    use crate::framework::{PluginContext, PodInfo};
    use crate::queue::SchedulingQueue;
    use crate::scheduler::{build_profiles, NoopObserver, RealClock, Scheduler, SchedulerOptions};

    /// An API server that holds every Binding until the test opens the gate: the sync `bind` blocks its thread,
    /// `bind_async` only its task. Victims' deletions sent without waiting (`delete_pods_async`) are held by their
    /// own gate, and answered as `deletion_answer` says.
    struct GatedCluster {
        inner: MemoryCluster,
        started: AtomicUsize,
        gate: Arc<tokio::sync::Semaphore>,
        deletions: Arc<tokio::sync::Semaphore>,
        deletion_answer: Mutex<DeletionAnswer>,
    }

    /// How `GatedCluster` answers a victim's deletion.
    #[derive(Clone, Copy, PartialEq)]
    enum DeletionAnswer {
        Deleted,
        /// The API server failed.
        Refused,
        /// The pod was gone already (404).
        Gone,
    }

    impl GatedCluster {
        fn new(open: usize) -> GatedCluster {
            GatedCluster {
                inner: MemoryCluster::default(),
                started: AtomicUsize::new(0),
                gate: Arc::new(tokio::sync::Semaphore::new(open)),
                deletions: Arc::new(tokio::sync::Semaphore::new(0)),
                deletion_answer: Mutex::new(DeletionAnswer::Deleted),
            }
        }
    }

    impl ClusterClient for GatedCluster {
        fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError> {
            self.started.fetch_add(1, Ordering::SeqCst);
            // Bounded, so that a failing test ends instead of holding the runtime's blocking pool for ever.
            let deadline = Instant::now() + Duration::from_secs(12);
            while self.gate.available_permits() == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.inner.bind(pod, node)
        }
        fn bind_async(&self, pod: &PodInfo, node: &str) -> Option<BoxFuture<'static, Result<(), ClusterError>>> {
            self.started.fetch_add(1, Ordering::SeqCst);
            let (gate, bound) = (self.gate.clone(), self.inner.bind(pod, node));
            Some(Box::pin(async move {
                let _open = gate.acquire().await.expect("gate");
                bound
            }))
        }
        fn delete_pod(&self, pod: &PodInfo, preemptor: &PodInfo) -> Result<(), ClusterError> {
            self.inner.delete_pod(pod, preemptor)
        }
        fn delete_pods_async(
            &self,
            pods: &[Arc<PodInfo>],
            preemptor: &PodInfo,
        ) -> Option<BoxFuture<'static, Vec<Result<(), ClusterError>>>> {
            let gate = self.deletions.clone();
            let answers: Vec<Result<(), ClusterError>> = match *self.deletion_answer.lock().unwrap() {
                DeletionAnswer::Refused => pods
                    .iter()
                    .map(|p| Err(ClusterError::Other { object: p.key(), message: "refused".into() }))
                    .collect(),
                DeletionAnswer::Gone => pods
                    .iter()
                    .map(|p| Err(ClusterError::Conflict { object: p.key(), message: "not found".into() }))
                    .collect(),
                // Recorded as sent; the watch's deletion events are the test's to deliver.
                DeletionAnswer::Deleted => pods.iter().map(|p| self.inner.delete_pod(p, preemptor)).collect(),
            };
            Some(Box::pin(async move {
                let _open = gate.acquire().await.expect("gate");
                answers
            }))
        }
        fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError> {
            self.inner.set_nominated_node(pod, node)
        }
        fn record(&self, pod: &PodInfo, event: PodEvent) {
            self.inner.record(pod, event)
        }
    }

    fn wait_for(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A scheduler on `rt` over a `GatedCluster` whose gate has `open` permits, with the in-tree plugins plus
    /// `extra` (name and plugin) and the configuration `profiles` (YAML after the header), that has scheduled `pods`
    /// pods on 4 nodes; their binding cycles are under way.
    fn scheduled(
        rt: &tokio::runtime::Runtime,
        open: usize,
        extra: Option<(&str, Arc<dyn crate::framework::Plugin>)>,
        profiles: &str,
        pods: usize,
    ) -> (Arc<GatedCluster>, Arc<Scheduler>) {
        let cluster = Arc::new(GatedCluster::new(open));
        let mut registry = crate::plugins::in_tree_registry();
        if let Some((name, plugin)) = extra {
            registry.register(name, Arc::new(move |_, _| Ok(plugin.clone()))).unwrap();
        }
        let yaml = format!("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{profiles}");
        let cfg = crate::scheduler::parse_config("test", &yaml, &|n| registry.names().contains(&n)).unwrap();
        let profiles = Arc::new(build_profiles(&cfg, &registry, &PluginContext::new(cluster.clone())).unwrap());
        let queue =
            SchedulingQueue::new(profiles.clone(), &profiles.names(), cfg.pod_initial_backoff, cfg.pod_max_backoff);
        let scheduler = Arc::new(
            Scheduler::new(
                profiles,
                queue,
                Cache::new(),
                cluster.clone(),
                Arc::new(RealClock::default()),
                Arc::new(NoopObserver),
                SchedulerOptions { async_binding: true, ..Default::default() },
            )
            .with_binding_runtime(rt.handle().clone()),
        );
        for i in 0..4 {
            let node = serde_json::json!({"metadata": {"name": format!("node-{i}")},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}});
            EventHandler::node_applied(&*scheduler, serde_json::from_value(node).unwrap());
        }
        for i in 0..pods {
            let pod = crate::framework::testutil::pod(serde_json::json!({
                "metadata": {"name": format!("pod-{i}"), "namespace": "default", "uid": format!("uid-{i}")},
                "spec": {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}]}}));
            EventHandler::pod_applied(&*scheduler, Arc::new(pod));
        }
        for _ in 0..pods {
            assert!(scheduler.schedule_one(), "a pod to schedule");
        }
        (cluster, scheduler)
    }

    #[test]
    fn a_backlog_binds_with_every_request_in_flight_and_no_thread_per_binding() {
        const PODS: usize = 40;
        // One blocking thread: a binding cycle that parks a thread per request binds one pod at a time here.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (cluster, scheduler) = scheduled(&rt, 0, None, "", PODS);
        wait_for("every Binding sent while none is answered", || cluster.started.load(Ordering::SeqCst) == PODS);
        assert_eq!(scheduler.bindings_in_flight(), PODS as u64);
        cluster.gate.add_permits(PODS);
        wait_for("every binding cycle finished", || scheduler.bindings_in_flight() == 0);
        let binds = cluster.inner.writes().iter().filter(|w| matches!(w, Write::Bind { .. })).count();
        assert_eq!(binds, PODS);
    }

    /// A scheduler as `scheduled` builds (no pods of its own), whose four nodes are each full with one
    /// low-priority pod (`victim-<i>`, all of a node's 8 CPUs), and a high-priority pod `pre` that fits only by
    /// preempting one; `pre`'s first cycle has run. Deletions are answered with `answer`.
    fn preempted(rt: &tokio::runtime::Runtime, answer: DeletionAnswer) -> (Arc<GatedCluster>, Arc<Scheduler>) {
        let (cluster, scheduler) = scheduled(rt, 100, None, "", 0);
        *cluster.deletion_answer.lock().unwrap() = answer;
        let pod = |name: &str, priority: i32, node: Option<&str>| {
            let mut spec = serde_json::json!({"priority": priority, "containers": [{"name": "app", "image": "app:1",
                "resources": {"requests": {"cpu": "8"}}}]});
            if let Some(n) = node {
                spec["nodeName"] = serde_json::json!(n);
            }
            Arc::new(crate::framework::testutil::pod(serde_json::json!({
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "spec": spec})))
        };
        for i in 0..4 {
            EventHandler::pod_applied(&*scheduler, pod(&format!("victim-{i}"), 0, Some(&format!("node-{i}"))));
        }
        EventHandler::pod_applied(&*scheduler, pod("pre", 100, None));
        assert!(scheduler.schedule_one(), "the preemptor's cycle");
        (cluster, scheduler)
    }

    /// The victims whose deletion was sent, by pod key.
    fn deleted(cluster: &GatedCluster) -> Vec<String> {
        let writes = cluster.inner.writes();
        writes.iter().filter_map(|w| if let Write::Delete { pod, .. } = w { Some(pod.clone()) } else { None }).collect()
    }

    /// Where `uid` waits in the queue, and the plugin holding it back if one does.
    fn queued(scheduler: &Scheduler, uid: &str) -> Option<(crate::queue::QueueName, Option<String>)> {
        let q = scheduler.queue.lock().unwrap();
        q.pending_pods().into_iter().find(|(i, _)| i.pod_info.uid == uid).map(|(i, n)| (n, i.gated_by.clone()))
    }

    #[test]
    fn an_asynchronous_preemption_holds_its_preemptor_until_the_victims_are_gone() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (cluster, scheduler) = preempted(&rt, DeletionAnswer::Deleted);
        let victims = deleted(&cluster);
        assert_eq!(victims.len(), 1, "one victim's deletion sent: {victims:?}");
        assert!(scheduler.profiles.preempting().is_running("uid-pre"), "the deletion is not answered yet");
        // Another node's pod goes: the event that would requeue the preemptor finds it held at PreEnqueue.
        let other = (0..4).map(|i| format!("victim-{i}")).find(|v| format!("default/{v}") != victims[0]).unwrap();
        EventHandler::pod_deleted(&*scheduler, &format!("uid-{other}"));
        assert_eq!(
            queued(&scheduler, "uid-pre"),
            Some((crate::queue::QueueName::Gated, Some(crate::plugins::default_preemption::NAME.to_string()))),
            "held while its victims are being deleted"
        );
        assert!(!scheduler.schedule_one(), "nothing to schedule while the preemptor is held");
        // The deletion answers, and its watch event arrives: the preemptor is let in and binds.
        cluster.deletions.add_permits(1);
        wait_for("the preemption's task to end", || !scheduler.profiles.preempting().is_running("uid-pre"));
        let victim_uid = format!("uid-{}", victims[0].trim_start_matches("default/"));
        EventHandler::pod_deleted(&*scheduler, &victim_uid);
        assert!(scheduler.schedule_one(), "the preemptor is tried again");
        wait_for("the preemptor's binding", || {
            cluster.inner.writes().iter().any(|w| matches!(w, Write::Bind { pod, .. } if pod == "default/pre"))
        });
        assert_eq!(deleted(&cluster).len(), 1, "one preemption only");
    }

    #[test]
    fn a_failed_asynchronous_preemption_activates_its_preemptor() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (cluster, scheduler) = preempted(&rt, DeletionAnswer::Refused);
        assert!(matches!(queued(&scheduler, "uid-pre"), Some((crate::queue::QueueName::Unschedulable, _))));
        cluster.deletions.add_permits(1);
        // No event comes (nothing was deleted): the failure itself moves the preemptor on.
        wait_for("the preemptor to be activated", || {
            matches!(queued(&scheduler, "uid-pre"), Some((crate::queue::QueueName::Active, _)))
        });
        assert!(!scheduler.profiles.preempting().is_running("uid-pre"));
    }

    #[test]
    fn a_victim_already_gone_is_no_failed_preemption() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (cluster, scheduler) = preempted(&rt, DeletionAnswer::Gone);
        cluster.deletions.add_permits(1);
        wait_for("the preemption's task to end", || !scheduler.profiles.preempting().is_running("uid-pre"));
        // As after a deletion that succeeded: the preemptor waits for the deletion's event, not activated, and
        // the victim, whose deletion is not coming, does not count as terminating.
        assert!(matches!(queued(&scheduler, "uid-pre"), Some((crate::queue::QueueName::Unschedulable, _))));
        assert!(scheduler.profiles.preempting().is_empty());
    }

    #[test]
    fn a_pod_whose_preemption_finds_no_candidate_gives_up_its_nomination() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (cluster, scheduler) = scheduled(&rt, 100, None, "", 0);
        // Nominated to node-0 by an earlier preemption, it now fits nowhere and no node has a victim for it.
        let big = crate::framework::testutil::pod(serde_json::json!({
            "metadata": {"name": "big", "namespace": "default", "uid": "uid-big"},
            "spec": {"priority": 100, "containers": [{"name": "app", "image": "app:1",
                "resources": {"requests": {"cpu": "64"}}}]},
            "status": {"nominatedNodeName": "node-0"}}));
        EventHandler::pod_applied(&*scheduler, Arc::new(big));
        assert_eq!(scheduler.queue.lock().unwrap().nominated_node("uid-big"), Some("node-0"));
        assert!(scheduler.schedule_one());
        assert_eq!(scheduler.queue.lock().unwrap().nominated_node("uid-big"), None, "room on node-0 given up");
        let cleared = cluster
            .inner
            .writes()
            .iter()
            .any(|w| matches!(w, Write::Nominate { pod, node: None } if pod == "default/big"));
        assert!(cleared, "status.nominatedNodeName cleared");
    }

    /// A PostBind plugin that takes a while and counts how many of its calls ran at once; `panics`: every other
    /// call panics.
    #[derive(Default)]
    struct SlowPostBind {
        running: AtomicUsize,
        most: AtomicUsize,
        calls: AtomicUsize,
        panics: bool,
    }

    impl crate::framework::Plugin for SlowPostBind {
        fn name(&self) -> &str {
            "SlowPostBind"
        }
        fn as_post_bind(&self) -> Option<&dyn crate::framework::PostBindPlugin> {
            Some(self)
        }
    }

    impl crate::framework::PostBindPlugin for SlowPostBind {
        fn post_bind(&self, _: &mut crate::framework::CycleState, _: &Arc<PodInfo>, _: &str) {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            self.running.fetch_sub(1, Ordering::SeqCst);
            if self.calls.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) && self.panics {
                panic!("SlowPostBind fails this one");
            }
        }
    }

    #[test]
    fn post_bind_runs_at_most_one_per_core_at_once_however_many_bindings_are_in_flight() {
        const PODS: usize = 40;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let slow = Arc::new(SlowPostBind::default());
        let profiles = "profiles:\n- plugins:\n    postBind:\n      enabled: [{name: SlowPostBind}]\n";
        // Bindings are answered at once, by the awaited request as in the live scheduler.
        let (_, scheduler) = scheduled(&rt, PODS, Some(("SlowPostBind", slow.clone())), profiles, PODS);
        wait_for("every binding cycle finished", || scheduler.bindings_in_flight() == 0);
        assert_eq!(slow.calls.load(Ordering::SeqCst), PODS);
        let most = slow.most.load(Ordering::SeqCst);
        assert!(most <= super::super::tail_threads(), "{most} PostBind calls at once");
    }

    #[test]
    fn a_panicking_post_bind_ends_only_its_own_binding_cycle() {
        const PODS: usize = 40;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let panicky = Arc::new(SlowPostBind { panics: true, ..Default::default() });
        let profiles = "profiles:\n- plugins:\n    postBind:\n      enabled: [{name: SlowPostBind}]\n";
        let (cluster, scheduler) = scheduled(&rt, PODS, Some(("SlowPostBind", panicky.clone())), profiles, PODS);
        wait_for("every binding cycle accounted for", || scheduler.bindings_in_flight() == 0);
        assert_eq!(panicky.calls.load(Ordering::SeqCst), PODS, "every pod reached PostBind");
        let binds = cluster.inner.writes().iter().filter(|w| matches!(w, Write::Bind { .. })).count();
        assert_eq!(binds, PODS);
    }

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

/// The node upstream picks (v1.36 on): the top of a max-heap built with Go's `container/heap.Init` over the nodes in
/// the order they were found feasible, ordered by total score, then by `randomizer`. Ties are no longer drawn at
/// random (upstream draws a randomizer only for nodes an extender scored): between equal totals the heap's own
/// order decides, so this replays Go's sift-down exactly.
fn select_host(scores: &mut [NodePluginScores]) -> usize {
    let less = |a: &NodePluginScores, b: &NodePluginScores| {
        a.total > b.total || (a.total == b.total && a.randomizer > b.randomizer)
    };
    heap::init(scores, &less);
    scores[0].index
}

#[cfg(test)]
mod select_host_tests {
    use super::*;

    fn scores(totals: &[(i64, u64)]) -> Vec<NodePluginScores> {
        totals
            .iter()
            .enumerate()
            .map(|(index, &(total, randomizer))| NodePluginScores { index, total, randomizer })
            .collect()
    }

    /// Go's heap over equal totals keeps what heapify leaves at the root, not a random one: the expectations are
    /// what `container/heap.Init` then `Pop` give for the same slices.
    #[test]
    fn ties_go_where_go_s_heap_puts_them() {
        let cases: &[(&[(i64, u64)], usize)] = &[
            (&[(5, 0)], 0),
            (&[(1, 0), (9, 0), (3, 0)], 1),
            // Two maxima: the first stays at the root when it is there.
            (&[(9, 0), (1, 0), (9, 0)], 0),
            // Root not a maximum: the left child (index 1) is taken over an equal right child (index 2).
            (&[(1, 0), (9, 0), (9, 0)], 1),
            // A maximum deeper down climbs only past strictly smaller parents: index 3 reaches index 1, then the
            // root compares its children 9 (from 3) and 9 (index 2) and takes the left, so 3 wins.
            (&[(1, 0), (2, 0), (9, 0), (9, 0)], 3),
            // With extender scores the randomizer decides between equal totals.
            (&[(9, 1), (1, 0), (9, 7)], 2),
        ];
        for (totals, want) in cases {
            assert_eq!(select_host(&mut scores(totals)), *want, "{totals:?}");
        }
    }
}
