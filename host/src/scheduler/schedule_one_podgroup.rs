//! The PodGroup scheduling cycle (upstream's `schedule_one_podgroup.go`, v1.37, GenericWorkload on; neither
//! TopologyAwareWorkloadScheduling nor CompositePodGroup): with the gate on, a pod naming an existing PodGroup is
//! scheduled together with every other member of its group waiting in the queue, in one cycle.
//!
//! 1. The members are ordered as upstream orders a group's queued pods: priority (highest first), attempts (most
//!    first), queue time, name.
//! 2. Each member in turn runs the scheduling algorithm (PreFilter → Score, no PostFilter) against a working copy
//!    of the snapshot, and a member that fits is assumed there on its node and reserved, so the next member sees
//!    it (upstream assumes in its snapshot, not its cache, during a PodGroup cycle). After each,
//!    GangScheduling's PlacementFeasible decides: the group is given up as soon as `minCount` can no longer be
//!    reached (the rest are not tried), and is feasible once it is.
//! 3. The trials are undone (Unreserve, forget), then:
//!    - feasible: each member that fit is assumed and reserved for real and goes through Permit and binding, in
//!      order (GangScheduling's Permit holds the first ones until `minCount` are assumed, and the last allows
//!      them all); each member that did not fit fails with its own reasons;
//!    - not feasible: upstream's PodGroupPostFilter runs (DefaultPreemption's pod group preemption,
//!      pod_group_preemption.rs) and adds its word to the group's status; then every member fails — one that did
//!      not fit with its own reasons, one that fit (or was not tried) with the group's (`minCount (3) cannot be
//!      satisfied: 2 scheduled, 0 remaining`). When preemption found room, its victims are evicted and each member
//!      is nominated to its node first: the victims' deletions requeue the group, whose next cycle finds the room.
//! 4. The PodGroup's `PodGroupInitiallyScheduled` condition says how it went (True once, then never taken back).
//!
//! Not done here: PodGroupPostFilter as a pluggable point (only DefaultPreemption's, natively; not DynamicResources'
//! claim deallocation). A shadow profile does not decide beside a PodGroup cycle.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use super::schedule_one::{rejected_on, Attempt, Batching, Decider, ScheduleError};
use super::Scheduler;
use crate::framework::diagnosis::{fit_error_message, NO_NODES_AVAILABLE};
use crate::framework::{
    Code, CycleState, CycleTrace, Framework, PodGroupCondition, PodInfo, QueuedPodInfo, Snapshot, Status,
};
use crate::plugins::gang_scheduling;

/// How one member's try ended.
pub(super) enum Tried {
    /// It fits on this node.
    Fit(String),
    /// It does not fit: its own status and the plugins that rejected it.
    Failed(Status, Vec<String>),
    /// The group was given up before its turn.
    Untried,
}

/// What one run of the PodGroup algorithm left.
pub(super) struct GroupRun {
    /// How each member's try ended, in the members' order.
    pub(super) tried: Vec<Tried>,
    /// The group's status (GangScheduling's PlacementFeasible after the last member tried).
    pub(super) status: Status,
    /// Whether any member fit.
    pub(super) any_fit: bool,
    /// The members assumed in the working snapshot and reserved, in order: (member, the pod as assumed, node).
    pub(super) trials: Vec<(usize, Arc<PodInfo>, String)>,
}

/// A group whose preemption found room: its members wait for the victims to go, nominated to their nodes.
struct Waiting {
    /// Each member's nominated node, in the members' order (`None`: its nomination is left as it is).
    nominations: Vec<Option<String>>,
    /// The group's status before preemption added its word.
    before: Status,
}

/// The status of a member failed with its group: upstream's `errPodGroupUnschedulable` then the group's reasons.
fn unschedulable_group(group: &Status) -> Status {
    let mut reasons = vec!["pod group is unschedulable".to_string()];
    reasons.extend(group.reasons().iter().cloned());
    Status::with_reasons(Code::Unschedulable, reasons)
}

/// Puts `pod` on `node` in a working snapshot, its nomination left as it is (upstream's snapshot `AddPod`).
pub(super) fn place_in(snapshot: &mut Snapshot, pod: &Arc<PodInfo>, node: &str) {
    if let Some(n) = snapshot.get(node) {
        let mut n = (**n).clone();
        n.add_pod(pod.clone());
        snapshot.update_nodes(vec![Arc::new(n)]);
    }
}

/// Assumes `pod` on `node` in a working snapshot, and takes it off its nomination there (upstream's assume in a
/// PodGroup cycle deletes the pod's nomination).
pub(super) fn assume_in(snapshot: &mut Snapshot, pod: &Arc<PodInfo>, node: &str) {
    place_in(snapshot, pod, node);
    if snapshot.nominated.values().flatten().any(|p| p.uid == pod.uid) {
        let mut nominated = (*snapshot.nominated).clone();
        for pods in nominated.values_mut() {
            pods.retain(|p| p.uid != pod.uid);
        }
        snapshot.nominated = Arc::new(nominated);
    }
}

/// Takes `pod` off `node` in a working snapshot.
pub(super) fn forget_in(snapshot: &mut Snapshot, pod: &PodInfo, node: &str) {
    if let Some(n) = snapshot.get(node) {
        let mut n = (**n).clone();
        if n.remove_pod(&pod.uid) {
            snapshot.update_nodes(vec![Arc::new(n)]);
        }
    }
}

/// The order upstream keeps a group's queued members in (`PodGroupMemberPodsOrderingFunc`).
fn member_order(a: &QueuedPodInfo, b: &QueuedPodInfo) -> std::cmp::Ordering {
    b.pod_info
        .priority
        .cmp(&a.pod_info.priority)
        .then(b.attempts.cmp(&a.attempts))
        .then(a.timestamp.cmp(&b.timestamp))
        .then(a.pod_info.name.cmp(&b.pod_info.name))
}

/// Upstream's `validatePodGroup`: every member has the same schedulerName and the same priority (the group's
/// priority is its first member's here: the PodGroup's own `priority` field is left to the API server).
fn validate(members: &[QueuedPodInfo]) -> Result<(), String> {
    let first = &members[0].pod_info;
    for m in &members[1..] {
        let p = &m.pod_info;
        if p.scheduler_name() != first.scheduler_name() {
            return Err(format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {:?} and {:?}",
                p.scheduler_name(),
                first.scheduler_name()
            ));
        }
        if p.priority != first.priority {
            return Err(format!(
                "all pods in a single pod group should have the same priority as the pod group's priority, got {} and {}",
                p.priority, first.priority
            ));
        }
    }
    Ok(())
}

impl Scheduler {
    /// The PodGroup a popped pod is scheduled with: the gate is on, the pod names a group, and the group exists.
    pub(super) fn pod_group_of(&self, pod: &PodInfo) -> Option<(String, Arc<PodGroup>)> {
        if !self.profiles.features().generic_workload {
            return None;
        }
        let key = pod.pod_group_key()?;
        let group = self.profiles.listers().objects().pod_groups.get(&key)?.clone();
        Some((key, group))
    }

    /// One PodGroup cycle, starting from the member just popped (see the module's doc).
    pub(super) fn schedule_one_podgroup(
        self: &Arc<Self>,
        fwk: Arc<Framework>,
        first: QueuedPodInfo,
        cycle: u64,
        key: String,
        group: Arc<PodGroup>,
    ) {
        let start = Instant::now();
        let mut members = vec![first];
        members.extend(self.queue.lock().expect("queue lock").take_pod_group_members(&key));
        // Bound or assumed meanwhile: nothing to do for those (upstream's skipPodGroupPodSchedule).
        members.retain(|m| {
            let skip = self.cache.lock().expect("cache lock").contains_pod(&m.pod_info.uid);
            if skip {
                self.queue.lock().expect("queue lock").done(&m.pod_info.uid);
            }
            !skip
        });
        if members.is_empty() {
            return;
        }
        members.sort_by(member_order);
        let attempt = |qpi: QueuedPodInfo, fwk: Arc<Framework>| {
            let mut state = CycleState::new();
            if self.sample_plugin_metrics() {
                state.plugin_timer = Some(self.observer.clone());
            }
            fwk.begin_cycle(&mut state, &qpi.pod_info);
            let traced = self.options.trace_pods.iter().any(|k| *k == qpi.pod_info.key());
            Attempt { fwk, state, qpi, cycle, start: Instant::now(), trace: traced.then(CycleTrace::default) }
        };
        let mut attempts: Vec<Attempt> = members.into_iter().map(|m| attempt(m, fwk.clone())).collect();

        if let Err(msg) = validate(&attempts.iter().map(|a| a.qpi.clone()).collect::<Vec<_>>()) {
            self.end_pod_group_cycle(&fwk, &group, attempts, Vec::new(), Status::error(msg), None, start);
            return;
        }
        // Upstream's PlacementFeasible comes from GangScheduling alone; without it in the profile nothing limits.
        let min_count = fwk.plugin(gang_scheduling::NAME).map(|_| gang_scheduling::min_count(&group));
        let feasible = |scheduled: usize, remaining: usize| match min_count {
            Some(min) => gang_scheduling::placement_feasible(min, scheduled, remaining),
            None => Status::success(),
        };

        let scheduled = self.profiles.pod_view().pod_group(&key).scheduled;
        let (run, preemption) = {
            let mut snapshot = self.snapshot.lock().expect("snapshot lock");
            self.refresh_snapshot(&mut snapshot);
            // The members are assumed in a copy of the snapshot, as upstream assumes them in its snapshot (not its
            // cache) during a PodGroup cycle; the real assume follows for a feasible group.
            let mut working = snapshot.clone();
            let mut run = self.pod_group_algorithm(&mut working, &mut attempts, scheduled, &feasible, true);
            self.revert_trials(&mut working, &mut attempts, &mut run.trials);
            drop(working);
            if run.status.code() == Code::Wait {
                run.status = Status::unschedulable(run.status.message());
            }
            if run.status.is_success() && !run.any_fit {
                // Upstream: a success needs at least one pod scheduled.
                run.status = Status::code_only(Code::Unschedulable);
            }
            // Upstream's PodGroupPostFilter, for a group that cannot be placed.
            let preemption = (run.status.code() == Code::Unschedulable)
                .then(|| self.pod_group_preemption(&fwk, &group, &attempts, &snapshot, scheduled, &feasible))
                .flatten();
            (run, preemption)
        };
        let mut status = run.status;
        let mut nominations = Vec::new();
        let before = status.clone();
        if let Some(p) = preemption {
            let mut reasons = status.reasons().to_vec();
            reasons.push(p.status.message());
            status = Status::with_reasons(Code::Unschedulable, reasons);
            if p.status.is_success() {
                self.evict_for_pod_group(&group, &attempts, &p.victims);
                nominations = p.nominations;
            }
        }
        self.observer.pod_group_algorithm(start.elapsed());
        let waiting = (!nominations.is_empty()).then_some(Waiting { nominations, before });
        self.end_pod_group_cycle(&fwk, &group, attempts, run.tried, status, waiting, start);
    }

    /// One run of the group's members through the scheduling algorithm over `snapshot`, a working copy (upstream's
    /// `podGroupSchedulingDefaultAlgorithm`): each member that fits is assumed there and reserved, so the next
    /// member sees it, and GangScheduling's PlacementFeasible decides after each whether to go on. `serving`: the
    /// cycle's own run (it signs pods for OpportunisticBatching and is timed), not preemption's trial.
    pub(super) fn pod_group_algorithm(
        &self,
        snapshot: &mut Snapshot,
        attempts: &mut [Attempt],
        scheduled: usize,
        feasible: &dyn Fn(usize, usize) -> Status,
        serving: bool,
    ) -> GroupRun {
        let mut run = GroupRun {
            tried: attempts.iter().map(|_| Tried::Untried).collect(),
            status: feasible(scheduled, attempts.len()),
            any_fit: false,
            trials: Vec::new(),
        };
        if run.status.code() == Code::Unschedulable {
            return run;
        }
        let (mut scheduled, mut remaining) = (scheduled, attempts.len());
        for (i, a) in attempts.iter_mut().enumerate() {
            let pod = a.qpi.pod_info.clone();
            let signature = if serving { self.sign_pod(&a.fwk, &pod, snapshot) } else { None };
            // Every member shares the cycle's count, which lets them share the batch's list too.
            let batching = serving.then_some(Batching { signature: signature.as_ref(), cycle: a.cycle });
            let result =
                self.schedule_pod(&a.fwk, &mut a.state, &pod, snapshot, a.trace.as_mut(), Decider::Serving, batching);
            if serving {
                self.observer.scheduling_algorithm(a.start.elapsed());
            }
            run.tried[i] = match result {
                Ok(r) => {
                    let assumed = Arc::new(pod.with_node_name(&r.host));
                    assume_in(snapshot, &assumed, &r.host);
                    let s = a.fwk.run_reserve(&mut a.state, &assumed, &r.host);
                    if s.is_success() {
                        run.trials.push((i, assumed, r.host.clone()));
                        Tried::Fit(r.host)
                    } else {
                        // Upstream's assumeAndReserve undoes a failed Reserve at once.
                        a.fwk.clone().run_unreserve(&mut a.state, &assumed, &r.host);
                        forget_in(snapshot, &assumed, &r.host);
                        let plugins = s.plugin().map(|p| vec![p.to_string()]).unwrap_or_default();
                        Tried::Failed(rejected_on(s, &r.host), plugins)
                    }
                }
                Err(ScheduleError::NoNodes) => Tried::Failed(Status::unschedulable(NO_NODES_AVAILABLE), Vec::new()),
                Err(ScheduleError::Status(s)) => Tried::Failed(s, Vec::new()),
                Err(ScheduleError::Fit { diagnosis, num_all_nodes }) => Tried::Failed(
                    Status::unschedulable(fit_error_message(num_all_nodes, &diagnosis)),
                    diagnosis.unschedulable_plugins.into_iter().collect(),
                ),
            };
            if let Tried::Failed(s, _) = &run.tried[i] {
                if s.code() == Code::Error {
                    run.status =
                        Status::error(format!("failed to schedule other pod from a pod group: {}", s.message()));
                    break;
                }
            }
            remaining -= 1;
            if matches!(run.tried[i], Tried::Fit(_)) {
                scheduled += 1;
                run.any_fit = true;
            }
            run.status = feasible(scheduled, remaining);
            if run.status.code() == Code::Unschedulable {
                break;
            }
        }
        run
    }

    /// Undoes a run's trials in reverse, as upstream's revert functions: Unreserve, and the pod out of `snapshot`.
    pub(super) fn revert_trials(
        &self,
        snapshot: &mut Snapshot,
        attempts: &mut [Attempt],
        trials: &mut Vec<(usize, Arc<PodInfo>, String)>,
    ) {
        for (i, assumed, host) in trials.drain(..).rev() {
            let a = &mut attempts[i];
            a.fwk.clone().run_unreserve(&mut a.state, &assumed, &host);
            forget_in(snapshot, &assumed, &host);
        }
    }

    /// Evicts the victims upstream's pod group preemption chose (its executor's `prepareCandidate` for a PodGroup
    /// preemptor): each victim's deletion reaches the cache and the queue as a cluster event.
    fn evict_for_pod_group(&self, group: &PodGroup, attempts: &[Attempt], victims: &[Arc<PodInfo>]) {
        let Some(preemptor) = attempts.first().map(|a| &a.qpi.pod_info) else { return };
        let uid = group.metadata.uid.as_deref().unwrap_or_default();
        // Upstream names the PodGroup and the preemption's domain, the whole cluster.
        self.evict_victims(victims, preemptor, &format!("Preempted by PodGroup {uid} on node cluster"), None);
    }

    /// Upstream's `submitPodGroupAlgorithmResult`: binding for the members that fit a feasible group, a failure for
    /// every other member; the group's condition and metrics.
    #[allow(clippy::too_many_arguments)]
    fn end_pod_group_cycle(
        self: &Arc<Self>,
        fwk: &Framework,
        group: &PodGroup,
        attempts: Vec<Attempt>,
        tried: Vec<Tried>,
        status: Status,
        waiting: Option<Waiting>,
        start: Instant,
    ) {
        if let Some(w) = &waiting {
            // Upstream's failure handler sets each member's nomination before the member is requeued.
            let mut q = self.queue.lock().expect("queue lock");
            for (a, node) in attempts.iter().zip(&w.nominations) {
                if let Some(node) = node {
                    q.add_nominated(a.qpi.pod_info.clone(), node.clone());
                }
            }
            drop(q);
            for (a, node) in attempts.iter().zip(&w.nominations) {
                if let Some(node) = node {
                    let _ = self.cluster.set_nominated_node(&a.qpi.pod_info, Some(node));
                }
            }
        }
        let mut tried = tried.into_iter();
        for a in attempts {
            match (tried.next().unwrap_or(Tried::Untried), status.code()) {
                (Tried::Fit(host), Code::Success) => self.assume_and_bind(a, host),
                // Waiting on preemption: a member not tried has the group's status from before preemption
                // (upstream completes the results first); one that fit, the group's with preemption's word.
                (Tried::Untried, Code::Unschedulable) if waiting.is_some() => {
                    let before = &waiting.as_ref().expect("waiting").before;
                    self.fail(a, unschedulable_group(before), Vec::new())
                }
                // A member that did not fit fails with its own reasons (in an erring group, only its own error).
                (Tried::Failed(s, plugins), c) if c != Code::Error || s.code() == Code::Error => {
                    self.fail(a, s, plugins)
                }
                (_, Code::Error) => self.fail(a, status.clone(), Vec::new()),
                // One that fit, or was not tried, in a group that cannot be placed: the group's reasons after
                // upstream's errPodGroupUnschedulable, and no rejecting plugin (any event may help).
                _ => self.fail(a, unschedulable_group(&status), Vec::new()),
            }
        }
        let (condition, result) = match status.code() {
            Code::Success => (
                PodGroupCondition {
                    type_: "PodGroupInitiallyScheduled",
                    status: true,
                    reason: "Scheduled",
                    message: String::new(),
                },
                "scheduled",
            ),
            Code::Error => (
                PodGroupCondition {
                    type_: "PodGroupInitiallyScheduled",
                    status: false,
                    reason: "SchedulerError",
                    message: status.message(),
                },
                "error",
            ),
            _ => (
                PodGroupCondition {
                    type_: "PodGroupInitiallyScheduled",
                    status: false,
                    reason: "Unschedulable",
                    message: status.message(),
                },
                "unschedulable",
            ),
        };
        let name = group.metadata.name.as_deref().unwrap_or_default();
        match result {
            "scheduled" => tracing::debug!(pod_group = %name, "successfully scheduled a pod group"),
            _ if waiting.is_some() => {
                tracing::debug!(pod_group = %name, err = %status.message(), "pod group is waiting for preemption")
            }
            _ => tracing::debug!(pod_group = %name, err = %status.message(), "unable to schedule a pod group"),
        }
        self.cluster.pod_group_condition(group, &condition);
        self.observer.pod_group_attempt(fwk.profile_name(), result, start.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::cluster::memory::{MemoryCluster, Write};
    use crate::cluster::EventHandler;
    use crate::config::Features;
    use crate::framework::PluginContext;
    use crate::queue::{QueueName, SchedulingQueue};
    use crate::scheduler::{build_profiles, parse_config_with, NoopObserver, SchedulerOptions, VirtualClock};
    use serde_json::json;

    /// The default profile with `--feature-gates=GenericWorkload=true` over an in-memory cluster of `nodes` nodes
    /// of 4 CPUs.
    fn scheduler(nodes: usize) -> (Arc<MemoryCluster>, Arc<Scheduler>) {
        let cluster = Arc::new(MemoryCluster::default());
        let registry = crate::plugins::in_tree_registry();
        let yaml = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        let features = Features { generic_workload: true, ..Features::default() };
        let cfg = parse_config_with("test", yaml, &|n| registry.names().contains(&n), features).unwrap();
        let profiles = Arc::new(build_profiles(&cfg, &registry, &PluginContext::new(cluster.clone())).unwrap());
        let queue =
            SchedulingQueue::new(profiles.clone(), &profiles.names(), cfg.pod_initial_backoff, cfg.pod_max_backoff);
        let s = Arc::new(Scheduler::new(
            profiles,
            queue,
            Cache::new(),
            cluster.clone(),
            Arc::new(VirtualClock::default()),
            Arc::new(NoopObserver),
            SchedulerOptions::default(),
        ));
        let handler: Arc<dyn EventHandler> = s.clone();
        cluster.connect(Arc::downgrade(&handler));
        for i in 1..=nodes {
            let node = json!({"metadata": {"name": format!("n{i}")},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
            cluster.apply_node(serde_json::from_value(node).unwrap());
        }
        (cluster, s)
    }

    fn pod(name: &str, group: Option<&str>, cpu: &str) -> Arc<PodInfo> {
        let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
        if let Some(g) = group {
            spec["schedulingGroup"] = json!({"podGroupName": g});
        }
        let v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec});
        Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
    }

    fn gang(name: &str, min: i32) -> PodGroup {
        let v = json!({"metadata": {"name": name, "namespace": "ns", "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}});
        serde_json::from_value(v).unwrap()
    }

    /// Runs cycles (and the binding cycles parked at Permit that got a verdict) until nothing is left to do.
    fn drain(s: &Arc<Scheduler>) {
        while s.schedule_one() || s.finish_decided_waits() {}
    }

    fn binds(c: &MemoryCluster) -> Vec<String> {
        let mut v: Vec<String> = c
            .writes()
            .into_iter()
            .filter_map(|w| if let Write::Bind { pod, .. } = w { Some(pod) } else { None })
            .collect();
        v.sort();
        v
    }

    fn failures(c: &MemoryCluster) -> Vec<(String, String)> {
        c.writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::Event { pod, event } if event.reason == "FailedScheduling" => Some((pod, event.message)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_gang_is_held_until_its_last_member_arrives_then_bound_in_one_cycle() {
        let (c, s) = scheduler(2);
        c.apply_pod_group(gang("g", 3));
        c.apply_pod(pod("g-1", Some("g"), "1"));
        c.apply_pod(pod("g-2", Some("g"), "1"));
        c.apply_pod(pod("plain", None, "1"));
        drain(&s);
        assert_eq!(binds(&c), ["ns/plain"], "the gang waits, the plain pod binds");
        assert_eq!(s.queue.lock().unwrap().pending().get(&QueueName::Gated), Some(&2));
        assert!(failures(&c).is_empty(), "a held member is not reported: {:?}", failures(&c));

        c.apply_pod(pod("g-3", Some("g"), "1"));
        assert_eq!(s.queue.lock().unwrap().pending().get(&QueueName::Active), Some(&3), "all three let in");
        assert!(s.schedule_one(), "one cycle");
        assert!(s.queue.lock().unwrap().pending().values().all(|n| *n == 0), "the whole group was taken");
        drain(&s);
        assert_eq!(binds(&c), ["ns/g-1", "ns/g-2", "ns/g-3", "ns/plain"]);
        let conditions: Vec<Write> =
            c.writes().into_iter().filter(|w| matches!(w, Write::PodGroupCondition { .. })).collect();
        assert_eq!(
            conditions,
            [Write::PodGroupCondition {
                group: "ns/g".into(),
                condition: PodGroupCondition {
                    type_: "PodGroupInitiallyScheduled",
                    status: true,
                    reason: "Scheduled",
                    message: String::new()
                },
            }]
        );
    }

    #[test]
    fn a_gang_that_cannot_all_fit_binds_nobody() {
        // Two nodes of 4 CPUs; three members of 3 CPUs: two fit, the third does not, and minCount is 3.
        let (c, s) = scheduler(2);
        c.apply_pod_group(gang("big", 3));
        for i in 1..=3 {
            c.apply_pod(pod(&format!("b-{i}"), Some("big"), "3"));
        }
        drain(&s);
        assert_eq!(binds(&c), Vec::<String>::new(), "all or nothing");
        let mut f = failures(&c);
        f.sort();
        let group = "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, \
                     pod group preemption: No preemption victims found for incoming preemptor"
            .to_string();
        assert_eq!(
            f,
            [
                ("ns/b-1".to_string(), group.clone()),
                ("ns/b-2".to_string(), group),
                ("ns/b-3".to_string(), "0/2 nodes are available: 2 Insufficient cpu.".to_string()),
            ]
        );
        assert!(s.cache.lock().unwrap().pod_count() == 0, "the trials were undone");
        // A smaller gang then fits in the room the trials did not keep.
        c.apply_pod_group(gang("small", 2));
        c.apply_pod(pod("s-1", Some("small"), "2"));
        c.apply_pod(pod("s-2", Some("small"), "2"));
        drain(&s);
        assert_eq!(binds(&c), ["ns/s-1", "ns/s-2"]);
    }

    /// A pod of `priority` asking for `cpu`, bound to `node` when given, in PodGroup `group` when given.
    fn prio_pod(name: &str, group: Option<&str>, cpu: &str, priority: i32, node: Option<&str>) -> Arc<PodInfo> {
        let mut spec = json!({"priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
        if let Some(g) = group {
            spec["schedulingGroup"] = json!({"podGroupName": g});
        }
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        let v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec});
        Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
    }

    fn deletes(c: &MemoryCluster) -> Vec<String> {
        let mut v: Vec<String> = c
            .writes()
            .into_iter()
            .filter_map(|w| if let Write::Delete { pod, .. } = w { Some(pod) } else { None })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_gang_that_fits_only_by_preemption_evicts_the_fewest_victims_then_binds() {
        // n1 holds low-a (2 CPUs) and low-b (0.5), n2 low-c (2) and hi (0.5, above the gang's priority). Each
        // member asks for 3 CPUs: evicting low-a and low-c is enough, low-b is given back, hi is never a victim.
        let (c, s) = scheduler(2);
        c.apply_pod(prio_pod("low-a", None, "2", 0, Some("n1")));
        c.apply_pod(prio_pod("low-b", None, "500m", 0, Some("n1")));
        c.apply_pod(prio_pod("low-c", None, "2", 0, Some("n2")));
        c.apply_pod(prio_pod("hi", None, "500m", 1000, Some("n2")));
        let mut g = gang("g", 2);
        g.spec.priority = Some(100);
        c.apply_pod_group(g);
        c.apply_pod(prio_pod("g-1", Some("g"), "3", 100, None));
        c.apply_pod(prio_pod("g-2", Some("g"), "3", 100, None));
        assert!(s.schedule_one(), "the group's cycle");
        assert_eq!(deletes(&c), ["ns/low-a", "ns/low-c"]);
        assert!(binds(&c).is_empty(), "the group waits for the next cycle");
        let mut nominated: Vec<(String, Option<String>)> = c
            .writes()
            .into_iter()
            .filter_map(|w| if let Write::Nominate { pod, node } = w { Some((pod, node)) } else { None })
            .collect();
        nominated.sort();
        let nodes: Vec<Option<String>> = nominated.iter().map(|(_, n)| n.clone()).collect();
        assert_eq!(nominated.len(), 2, "{nominated:?}");
        assert!(nodes.contains(&Some("n1".into())) && nodes.contains(&Some("n2".into())), "{nominated:?}");
        // As upstream: the member that did not fit keeps its own message, the one not tried the group's from
        // before preemption; the PodGroup's condition carries preemption's word.
        let mut f = failures(&c);
        f.sort();
        assert_eq!(
            f,
            [
                ("ns/g-1".to_string(), "0/2 nodes are available: 2 Insufficient cpu.".to_string()),
                (
                    "ns/g-2".to_string(),
                    "pod group is unschedulable, minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
                        .to_string()
                ),
            ]
        );
        let condition = c.writes().into_iter().find_map(|w| match w {
            Write::PodGroupCondition { condition, .. } => Some(condition.message),
            _ => None,
        });
        assert_eq!(
            condition.as_deref(),
            Some(
                "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, pod group preemption: found a placement \
                 for podgroup, preempting 2 victims"
            )
        );

        s.queue.lock().unwrap().flush_backoff_completed(u64::MAX);
        drain(&s);
        assert_eq!(binds(&c), ["ns/g-1", "ns/g-2"]);
        assert_eq!(deletes(&c), ["ns/low-a", "ns/low-c"], "nothing more evicted");
    }

    #[test]
    fn a_victim_pod_group_with_disruption_mode_all_is_evicted_whole() {
        // A low-priority PodGroup has a pod of 2 CPUs on each node; a gang of one member of 3 CPUs needs one of
        // them gone. With disruption mode `all` both go (the group is one victim), with `single` only one.
        for (mode, want) in [("all", 2), ("single", 1)] {
            let (c, s) = scheduler(2);
            let low: PodGroup = serde_json::from_value(json!({"metadata": {"name": "low", "namespace": "ns"},
                "spec": {"priority": 0, "disruptionMode": {mode: {}},
                    "schedulingPolicy": {"gang": {"minCount": 2}}}}))
            .unwrap();
            c.apply_pod_group(low);
            c.apply_pod(prio_pod("low-1", Some("low"), "2", 0, Some("n1")));
            c.apply_pod(prio_pod("low-2", Some("low"), "2", 0, Some("n2")));
            let mut g = gang("g", 1);
            g.spec.priority = Some(100);
            c.apply_pod_group(g);
            c.apply_pod(prio_pod("g-1", Some("g"), "3", 100, None));
            assert!(s.schedule_one(), "the group's cycle");
            assert_eq!(deletes(&c).len(), want, "{mode}: {:?}", deletes(&c));
            s.queue.lock().unwrap().flush_backoff_completed(u64::MAX);
            drain(&s);
            assert_eq!(binds(&c), ["ns/g-1"], "{mode}");
        }
    }

    #[test]
    fn a_gang_that_does_not_fit_even_without_its_victims_preempts_nobody() {
        // Each member asks for more than a node holds: evicting everything would not help.
        let (c, s) = scheduler(2);
        c.apply_pod(prio_pod("low-a", None, "1", 0, Some("n1")));
        let mut g = gang("g", 2);
        g.spec.priority = Some(100);
        c.apply_pod_group(g);
        c.apply_pod(prio_pod("g-1", Some("g"), "5", 100, None));
        c.apply_pod(prio_pod("g-2", Some("g"), "5", 100, None));
        drain(&s);
        assert!(deletes(&c).is_empty());
        assert!(binds(&c).is_empty());
        let f = failures(&c);
        assert!(f.iter().any(|(_, m)| m.contains("pod group preemption: ")), "{f:?}");
    }

    #[test]
    fn a_lower_min_count_lets_a_held_gang_in() {
        let (c, s) = scheduler(1);
        c.apply_pod_group(gang("g", 3));
        c.apply_pod(pod("g-1", Some("g"), "1"));
        c.apply_pod(pod("g-2", Some("g"), "1"));
        drain(&s);
        assert!(binds(&c).is_empty());
        c.apply_pod_group(
            serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ns",
            "resourceVersion": "2"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
            .unwrap(),
        );
        drain(&s);
        assert_eq!(binds(&c), ["ns/g-1", "ns/g-2"]);
    }

    fn q(name: &str, priority: i32, attempts: u32, timestamp: u64) -> QueuedPodInfo {
        let v = serde_json::json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"priority": priority, "containers": []}});
        let mut info =
            QueuedPodInfo::new(Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap()), timestamp);
        info.attempts = attempts;
        info
    }

    #[test]
    fn a_rejection_at_permit_reads_as_upstreams_fit_error_over_its_node() {
        let timeout = Status::unschedulable("rejected due to timeout after waiting 5m0s at plugin GangScheduling")
            .with_plugin(&Arc::from("GangScheduling"));
        let s = rejected_on(timeout, "n1");
        assert_eq!(
            (s.code(), s.message().as_str(), s.plugin()),
            (
                Code::Unschedulable,
                "0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s at plugin GangScheduling.",
                Some("GangScheduling")
            )
        );
        assert_eq!(rejected_on(Status::error("boom"), "n1").message(), "boom", "an error is left as it is");
    }

    #[test]
    fn members_are_ordered_as_upstream_orders_a_groups_queued_pods() {
        let mut v = [q("d", 0, 1, 5), q("c", 0, 1, 1), q("b", 0, 2, 9), q("a", 10, 0, 9), q("e", 0, 1, 1)];
        v.sort_by(member_order);
        let names: Vec<&str> = v.iter().map(|m| m.pod_info.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "e", "d"]);
    }
}
