//! The scheduling queue: QueueSort order, backoff, and requeueing on cluster events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_wasm_scheduler::cluster::memory::MemoryCluster;
use kube_wasm_scheduler::framework::PluginContext;
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::queue::{QueueName, QueueObserver, SchedulingQueue};
use kube_wasm_scheduler::scheduler::build_profiles;

use crate::util::*;

const SEC: u64 = 1_000_000_000;

fn queue() -> SchedulingQueue {
    let reg = registry_with(vec![]);
    let cfg = config(&reg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n");
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(10))
}

fn pod(name: &str, priority: i32) -> Arc<PodInfo> {
    Arc::new(
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"priority": priority, "containers": [{"name": "c"}]}
            }))
            .unwrap(),
        )
        .unwrap(),
    )
}

#[test]
fn backoff_doubles_from_initial_to_max() {
    let q = queue();
    let got: Vec<u64> = (1..=6).map(|a| q.backoff_duration(a).as_secs()).collect();
    assert_eq!(got, [1, 2, 4, 8, 10, 10]);
}

#[test]
fn pops_by_priority_then_arrival() {
    let mut q = queue();
    q.add(pod("low", 0), 1);
    q.add(pod("high", 100), 2);
    q.add(pod("low-later", 0), 3);
    q.add(pod("mid", 50), 4);
    let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|p| p.pod_info.name.clone()).collect();
    assert_eq!(order, ["high", "mid", "low", "low-later"]);
}

#[test]
fn unschedulable_pods_move_only_on_events_their_rejector_registered() {
    let mut q = queue();
    q.add(pod("p", 0), 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    q.add_unschedulable(info, false, 0);
    assert_eq!(q.pending()[&QueueName::Unschedulable], 1);
    // A new pod bound elsewhere does not free resources: NodeResourcesFit did not register AssignedPod/Add.
    q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::ADD), 5 * SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1));
    // A pod deleted does.
    q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::DELETE), 5 * SEC);
    assert_eq!(q.pending().get(&QueueName::Active), Some(&1), "backoff (1s) already over at 5s: straight to activeQ");
}

/// Pops `p` (added at time 0), with `before` told while no cycle of its had begun and `during` while its
/// scheduling cycle runs, and puts it back as rejected by NodeResourcesFit; answers where it went.
fn fail_hearing(
    q: &mut SchedulingQueue,
    p: Arc<PodInfo>,
    before: &[ClusterEvent],
    during: &[ClusterEvent],
) -> QueueName {
    let uid = p.uid.clone();
    q.add(p, 0);
    for e in before {
        q.on_event(*e, 0);
    }
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    for e in during {
        q.on_event(*e, 0);
    }
    q.add_unschedulable(info, false, 0);
    [QueueName::Active, QueueName::Backoff, QueueName::Unschedulable]
        .into_iter()
        .find(|name| q.pending_pods().iter().any(|(i, at)| i.pod_info.uid == uid && at == name))
        .expect("the pod is queued")
}

/// Upstream's in-flight events: a failed pod backs off at once only for an event heard during its scheduling
/// cycle that a plugin which rejected it registered (a backlog of bindings elsewhere must not keep a pod that fits
/// nowhere cycling through backoffQ).
#[test]
fn a_failed_pod_backs_off_only_for_an_event_heard_during_its_cycle_that_may_help_it() {
    let bound = ClusterEvent::new(EventResource::AssignedPod, action::ADD);
    let deleted = ClusterEvent::new(EventResource::AssignedPod, action::DELETE);
    assert_eq!(fail_hearing(&mut queue(), pod("p", 0), &[], &[bound, bound]), QueueName::Unschedulable);
    assert_eq!(fail_hearing(&mut queue(), pod("p", 0), &[], &[bound, deleted]), QueueName::Backoff);
    assert_eq!(fail_hearing(&mut queue(), pod("p", 0), &[deleted], &[bound]), QueueName::Unschedulable);

    // An event heard during one pod's cycle counts for the cycles running then, not for those that begin after.
    let mut q = queue();
    q.add(pod("first", 10), 0);
    q.add(pod("second", 0), 0);
    let mut first = q.pop().unwrap();
    q.on_event(deleted, 0);
    let mut second = q.pop().unwrap();
    for info in [&mut first, &mut second] {
        info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    }
    q.add_unschedulable(second, false, 0);
    q.add_unschedulable(first, false, 0);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1), "second began after the deletion");
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1), "first heard it");

    // A rejection past WaitOnPermit (at PreBind or Bind) backs off, as upstream's.
    let mut q = queue();
    q.add(pod("p", 0), 0);
    let mut info = q.pop().unwrap();
    q.past_permit("p");
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    q.add_unschedulable(info, false, 0);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1));
}

/// `p` with `f` applied to its object.
fn changed(p: &Arc<PodInfo>, f: impl FnOnce(&mut serde_json::Value)) -> Arc<PodInfo> {
    let mut v = serde_json::to_value(&*p.pod).unwrap();
    f(&mut v);
    Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
}

/// Upstream moves an unschedulable pod on its own update only when a plugin that rejected it registered the
/// change: the PodScheduled=False condition the scheduler itself writes after the failure moves nothing.
#[test]
fn an_unschedulable_pod_moves_on_its_own_update_only_when_a_rejecting_plugin_may_be_helped() {
    let mut q = queue();
    let p = pod("p", 0);
    assert_eq!(fail_hearing(&mut q, p.clone(), &[], &[]), QueueName::Unschedulable);
    let condition = changed(&p, |v| {
        v["status"] =
            serde_json::json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
    });
    q.update(condition.clone(), SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1), "its status only");
    let relabelled = changed(&condition, |v| v["metadata"]["labels"] = serde_json::json!({"app": "x"}));
    q.update(relabelled.clone(), SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1), "NodeResourcesFit registered no label update");

    // Rejected by TaintToleration, which registered pending pods' updates (a toleration added may help).
    let mut q = queue();
    q.add(p.clone(), 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["TaintToleration".to_string()].into();
    q.add_unschedulable(info, false, 0);
    q.update(condition, SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1), "its status only");
    let tolerating = changed(&p, |v| {
        v["spec"]["tolerations"] = serde_json::json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    });
    q.update(tolerating, 2 * SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable).copied().unwrap_or(0), 0, "moved on");
}

/// A pending pod's own update is told by what changed (upstream's TargetPod events): it moves only when a plugin
/// that rejected it registered that change — InterPodAffinity its labels, NodeResourcesFit a lowered request,
/// TaintToleration its tolerations, and not the other way round.
#[test]
fn a_pending_pods_own_update_moves_it_only_for_the_changes_its_rejectors_registered() {
    let requests = |cpu: &str| serde_json::json!([{"name": "c", "resources": {"requests": {"cpu": cpu}}}]);
    let p = changed(&pod("p", 0), |v| v["spec"]["containers"] = requests("2"));
    let relabelled = changed(&p, |v| v["metadata"]["labels"] = serde_json::json!({"app": "x"}));
    let smaller = changed(&p, |v| v["spec"]["containers"] = requests("1"));
    let tolerating = changed(&p, |v| {
        v["spec"]["tolerations"] = serde_json::json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    });
    let cases: [(&str, &str, &Arc<PodInfo>, bool); 6] = [
        ("InterPodAffinity", "labels", &relabelled, true),
        ("InterPodAffinity", "tolerations", &tolerating, false),
        ("NodeResourcesFit", "a lower request", &smaller, true),
        ("NodeResourcesFit", "labels", &relabelled, false),
        ("TaintToleration", "tolerations", &tolerating, true),
        ("TaintToleration", "labels", &relabelled, false),
    ];
    for (plugin, what, update, moves) in cases {
        let mut q = queue();
        q.add(p.clone(), 0);
        let mut info = q.pop().unwrap();
        info.unschedulable_plugins = [plugin.to_string()].into();
        q.add_unschedulable(info, false, 0);
        q.update((*update).clone(), SEC);
        let waiting = q.pending().get(&QueueName::Unschedulable).copied().unwrap_or(0);
        assert_eq!(waiting == 0, moves, "rejected by {plugin}, its {what} changed");
    }
}

/// Upstream records an update of a pod being scheduled as an event for its attempt rather than queueing the pod
/// a second time, and a failed attempt requeues the newest object.
#[test]
fn a_pod_updated_during_its_attempt_is_not_queued_twice_and_comes_back_as_updated() {
    let mut q = queue();
    let p = pod("p", 0);
    q.add(p.clone(), 0);
    let mut info = q.pop().unwrap();
    let relabelled = changed(&p, |v| v["metadata"]["labels"] = serde_json::json!({"app": "x"}));
    q.update(relabelled, 0);
    assert!(!q.contains("p"), "being scheduled, not queued");
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    q.add_unschedulable(info, false, 0);
    let pending = q.pending_pods();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].1, QueueName::Unschedulable, "NodeResourcesFit registered no label update");
    assert_eq!(pending[0].0.pod_info.labels().get("app").map(String::as_str), Some("x"));

    // A toleration added while TaintToleration's rejection was being decided may help: backoffQ.
    let mut q = queue();
    q.add(p.clone(), 0);
    let mut info = q.pop().unwrap();
    let tolerating = changed(&p, |v| {
        v["spec"]["tolerations"] = serde_json::json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    });
    q.update(tolerating, 0);
    info.unschedulable_plugins = ["TaintToleration".to_string()].into();
    q.add_unschedulable(info, false, 0);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1));
}

/// A pod rejected by `plugin` at `now`, with an event during its attempt (so it goes to backoffQ).
fn fail_with_event(q: &mut SchedulingQueue, name: &str, priority: i32, plugin: &str, now: u64) {
    q.add(pod(name, priority), now);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins.insert(plugin.to_string());
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), now);
    q.add_unschedulable(info, false, now);
}

#[test]
fn a_pod_still_backing_off_goes_to_backoff_and_flushes_when_it_expires() {
    // SchedulerPopFromBackoffQ off: the expiry is exact, and nothing is popped before it.
    let mut q = queue().with_pop_from_backoff(false);
    q.add(pod("p", 0), 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    q.add_unschedulable(info, false, 0);
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), SEC / 2);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1));
    assert_eq!(q.next_backoff_expiry(), Some(SEC + 1), "upstream: backing off until the expiry is in the past");
    q.flush_backoff_completed(SEC / 2);
    assert!(q.pop().is_none());
    q.flush_backoff_completed(SEC);
    assert!(q.pop().is_none(), "still backing off at its expiry");
    q.flush_backoff_completed(SEC + 1);
    assert_eq!(q.pop().unwrap().attempts, 2);
}

#[test]
fn with_pop_from_backoff_an_empty_active_queue_takes_backoffs_first_and_backoff_ends_on_whole_seconds() {
    let arrivals = Arc::new(Arrivals::default());
    let mut q = queue().with_observer(arrivals.clone());
    // Failed at 0.3 s: 1 s of backoff ends at 1.3 s, truncated to the 1 s window, flushed once that window has
    // passed (at 2 s).
    fail_with_event(&mut q, "p", 0, "NodeResourcesFit", 3 * SEC / 10);
    assert_eq!(q.next_backoff_expiry(), Some(2 * SEC));
    q.flush_backoff_completed(19 * SEC / 10);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1), "window not over at 1.9 s");
    q.flush_backoff_completed(2 * SEC);
    assert_eq!(q.pending().get(&QueueName::Active), Some(&1), "flushed at 2 s");
    // activeQ empty: the next pod comes from backoffQ at once.
    let p = q.pop().unwrap();
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 2 * SEC);
    let mut p = p;
    p.unschedulable_plugins.insert("NodeResourcesFit".into());
    q.add_unschedulable(p, false, 2 * SEC);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1));
    assert_eq!(q.pop().unwrap().attempts, 3, "popped while backing off");
    assert_eq!(arrivals.0.lock().unwrap().last(), Some(&(QueueName::Active, "PopFromBackoffQ")));
    // Without the gate the same queue has nothing to pop.
    let mut off = queue().with_pop_from_backoff(false);
    fail_with_event(&mut off, "p", 0, "NodeResourcesFit", 0);
    assert!(off.pop().is_none());
}

#[test]
fn with_pop_from_backoff_one_window_is_ordered_by_queue_sort_and_errors_are_not_popped_early() {
    let mut q = queue();
    // Both expire in the 1 s window; the later failure has the higher priority and comes first.
    fail_with_event(&mut q, "early-low", 0, "NodeResourcesFit", 2 * SEC / 10);
    fail_with_event(&mut q, "late-high", 100, "NodeResourcesFit", 7 * SEC / 10);
    // A pod whose attempt ended in an error (no rejecting plugin) waits in errorBackoffQ.
    q.add(pod("errored", 1000), 8 * SEC / 10);
    let e = q.pop().unwrap();
    q.add_unschedulable(e, true, 8 * SEC / 10);
    let names: Vec<String> = std::iter::from_fn(|| q.pop()).map(|i| i.pod_info.name.clone()).collect();
    assert_eq!(names, ["late-high", "early-low"]);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1), "the errored pod is not popped early");
    q.flush_backoff_completed(2 * SEC);
    assert_eq!(q.pop().unwrap().pod_info.name, "errored");
    // Without the gate the earlier expiry comes first, priority aside.
    let mut off = queue().with_pop_from_backoff(false);
    fail_with_event(&mut off, "early-low", 0, "NodeResourcesFit", 2 * SEC / 10);
    fail_with_event(&mut off, "late-high", 100, "NodeResourcesFit", 7 * SEC / 10);
    off.flush_backoff_completed(2 * SEC);
    let names: Vec<String> = std::iter::from_fn(|| off.pop()).map(|i| i.pod_info.name.clone()).collect();
    assert_eq!(names, ["late-high", "early-low"], "both flushed: activeQ orders them");
    let mut off = queue().with_pop_from_backoff(false);
    fail_with_event(&mut off, "early-low", 0, "NodeResourcesFit", 2 * SEC / 10);
    fail_with_event(&mut off, "late-high", 100, "NodeResourcesFit", 7 * SEC / 10);
    off.flush_backoff_completed(SEC + 3 * SEC / 10);
    assert_eq!(off.pop().unwrap().pod_info.name, "early-low", "only the earlier expiry is over at 1.3 s");
}

#[test]
fn an_event_during_the_attempt_sends_the_pod_to_backoff_and_errors_always_back_off() {
    let mut q = queue();
    q.add(pod("a", 0), 0);
    q.add(pod("b", 0), 1);
    let a = q.pop().unwrap();
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 0);
    q.add_unschedulable(a, false, 0);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&1));
    let b = q.pop().unwrap();
    q.add_unschedulable(b, true, 0);
    assert_eq!(q.pending().get(&QueueName::Backoff), Some(&2));
}

#[test]
fn deleted_pods_leave_every_queue() {
    let mut q = queue();
    q.add(pod("a", 0), 0);
    q.add(pod("b", 0), 1);
    q.delete("a");
    assert!(!q.contains("a"));
    assert_eq!(q.pop().unwrap().pod_info.name, "b");
    assert!(q.pop().is_none());
}

#[test]
fn a_pod_deleted_during_its_attempt_is_not_requeued_when_the_attempt_fails() {
    let mut q = queue();
    q.add(pod("doomed", 0), 0);
    q.add(pod("kept", 0), 1);
    let doomed = q.pop().unwrap();
    // The informer reports the deletion while the pod is being scheduled.
    q.delete("doomed");
    q.add_unschedulable(doomed, false, 0);
    assert!(!q.contains("doomed"), "a deleted pod must not come back");
    // Another pod's failed attempt is still requeued.
    let kept = q.pop().unwrap();
    q.add_unschedulable(kept, false, 0);
    assert!(q.contains("kept"));
    // And a pod deleted after its attempt ended leaves no trace that would drop a later pod with its UID.
    q.done("kept");
    q.delete("kept");
    assert!(!q.contains("kept"));
}

/// Records every arrival the queue reports.
#[derive(Default)]
struct Arrivals(Mutex<Vec<(QueueName, &'static str)>>);

impl QueueObserver for Arrivals {
    fn incoming(&self, queue: QueueName, event: &'static str) {
        self.0.lock().unwrap().push((queue, event));
    }
}

#[test]
fn each_arrival_in_a_queue_is_reported_with_upstreams_event_label() {
    let arrivals = Arc::new(Arrivals::default());
    let mut q = queue().with_observer(arrivals.clone());
    q.add(pod("p", 0), 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = ["NodeResourcesFit".to_string()].into();
    q.add_unschedulable(info, false, 0);
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), SEC / 2);
    // The 1 s expiry's window is over at 2 s.
    q.flush_backoff_completed(2 * SEC);
    let info = q.pop().unwrap();
    q.add_unschedulable(info, true, 2 * SEC);
    assert_eq!(
        *arrivals.0.lock().unwrap(),
        [
            (QueueName::Active, "UnschedulablePodAdd"),
            (QueueName::Unschedulable, "ScheduleAttemptFailure"),
            (QueueName::Backoff, "NodeAdd"),
            (QueueName::Active, "BackoffComplete"),
            (QueueName::Backoff, "ScheduleAttemptFailure"),
        ]
    );
}

#[test]
fn cluster_events_carry_upstreams_labels() {
    let label = |r, a| ClusterEvent::new(r, a).label();
    assert_eq!(label(EventResource::Node, action::ADD), "NodeAdd");
    assert_eq!(label(EventResource::Node, action::UPDATE), "NodeUpdate");
    assert_eq!(label(EventResource::Node, action::UPDATE_TAINT), "NodeUpdate");
    assert_eq!(label(EventResource::AssignedPod, action::DELETE), "AssignedPodDelete");
    assert_eq!(label(EventResource::UnscheduledPod, action::ADD), "UnschedulablePodAdd");
    assert_eq!(label(EventResource::Volume, action::ALL), "PersistentVolumeAll");
}

#[test]
fn unschedulable_pods_are_counted_under_each_plugin_that_rejected_them() {
    let mut q = queue();
    q.add(pod("a", 0), 0);
    q.add(pod("b", 0), 1);
    for _ in 0..2 {
        let mut info = q.pop().unwrap();
        info.unschedulable_plugins = ["NodeResourcesFit".to_string(), "NodeAffinity".to_string()].into();
        q.add_unschedulable(info, false, 0);
    }
    let profile = "default-scheduler".to_string();
    let counts = q.unschedulable_plugins();
    assert_eq!(counts.get(&("NodeResourcesFit".to_string(), profile.clone())), Some(&2));
    assert_eq!(counts.get(&("NodeAffinity".to_string(), profile)), Some(&2));
    // Popped again, a pod no longer counts.
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 5 * SEC);
    q.pop().unwrap();
    assert_eq!(q.unschedulable_plugins().values().copied().collect::<Vec<_>>(), [1, 1]);
}

/// A pop costs about one QueueSort comparison per heap level, not two: with a Wasm QueueSort each comparison is a
/// guest call, so a backlog's pops were half of the sample guests' cost. The order stays QueueSort's.
#[test]
fn a_pop_compares_about_once_per_heap_level() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let compared = Arc::new(AtomicU64::new(0));
    let count = compared.clone();
    let sort = TestPlugin {
        name: "CountingSort".into(),
        queue_sort: Some(Arc::new(move |a: &QueuedPodInfo, b: &QueuedPodInfo| {
            count.fetch_add(1, Ordering::Relaxed);
            (std::cmp::Reverse(a.pod_info.priority), a.timestamp)
                < (std::cmp::Reverse(b.pod_info.priority), b.timestamp)
        })),
        ..Default::default()
    };
    let reg = registry_with(vec![sort]);
    let cfg = config(&reg, &profile("").replace("{name: PrioritySort}", "{name: CountingSort}"));
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    let mut q =
        SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(10));
    let n: u64 = 4096;
    // Priorities in a scrambled order (a multiplicative hash), so that the heap does real work.
    for i in 0..n {
        q.add(pod(&format!("p{i}"), ((i * 2_654_435_761) % 1000) as i32), i);
    }
    compared.store(0, Ordering::Relaxed);
    let popped: Vec<(i32, u64)> = std::iter::from_fn(|| q.pop()).map(|p| (p.pod_info.priority, p.timestamp)).collect();
    assert_eq!(popped.len() as u64, n);
    assert!(popped.windows(2).all(|w| (std::cmp::Reverse(w[0].0), w[0].1) < (std::cmp::Reverse(w[1].0), w[1].1)));
    let per_pop = compared.load(Ordering::Relaxed) as f64 / n as f64;
    // 12 levels: 10.7 comparisons a pop on average; sifting the moved entry down compared twice a level (19.0).
    assert!(per_pop < 15.0, "{per_pop:.1} comparisons per pop");
}

/// A PreFilter plugin for the queue's use of queueing hints: it registers new pending pods and new nodes, and
/// answers Queue only for a new pod of the rejected pod's `group` label (a gang waiting for its members).
struct Gang;

impl Plugin for Gang {
    fn name(&self) -> &str {
        "Gang"
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::UnscheduledPod, action::ADD),
            ClusterEvent::new(EventResource::Node, action::ADD),
        ]
    }
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        _old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let group = |p: &PodInfo| p.pod.metadata.labels.as_ref().and_then(|l| l.get("group").cloned());
        match new {
            Some(EventObject::Pod(p)) if group(p).is_some() && group(p) == group(pod) => QueueingHint::Queue,
            _ => QueueingHint::QueueSkip,
        }
    }
    kube_wasm_scheduler::serves!(pre_filter);
}

impl PreFilterPlugin for Gang {
    fn pre_filter(&self, _s: &mut CycleState, _p: &PodInfo, _snap: &Snapshot) -> (PreFilterResult, Status) {
        (None, Status::success())
    }
}

fn grouped(name: &str, group: &str) -> Arc<PodInfo> {
    Arc::new(
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"group": group}},
                "spec": {"containers": [{"name": "c"}]}
            }))
            .unwrap(),
        )
        .unwrap(),
    )
}

#[test]
fn a_pod_moves_only_on_a_registered_event_whose_hint_answers_queue() {
    let mut reg = kube_wasm_scheduler::plugins::in_tree_registry();
    reg.register("Gang", Arc::new(|_, _| Ok(Arc::new(Gang) as Arc<dyn Plugin>))).unwrap();
    let cfg = config(&reg, &profile("    preFilter:\n      enabled: [{name: Gang}, {name: NodeResourcesFit}]\n"));
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    let arrivals = Arc::new(Arrivals::default());
    let mut q =
        SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(1))
            .with_observer(arrivals.clone());
    reject(&mut q, grouped("a-1", "a"), "Gang");
    reject(&mut q, grouped("fit", "z"), "NodeResourcesFit");
    arrivals.0.lock().unwrap().clear();
    let unschedulable = |q: &SchedulingQueue| q.pending().get(&QueueName::Unschedulable).copied().unwrap_or(0);

    // Registered, but the hint says the new node cannot help the gang.
    q.on_event_with(ClusterEvent::new(EventResource::Node, action::ADD), None, None, 5 * SEC);
    assert_eq!(unschedulable(&q), 1, "only the pod NodeResourcesFit rejected moved on NodeAdd");
    // Not registered at all.
    q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::DELETE), 5 * SEC);
    assert_eq!(unschedulable(&q), 1);
    // A new pod of another group: registered, hint QueueSkip.
    q.add(grouped("b-1", "b"), 5 * SEC);
    assert_eq!(unschedulable(&q), 1, "a pod of group b does not help group a");
    // A new member of the gang: the hint answers Queue.
    q.add(grouped("a-2", "a"), 6 * SEC);
    assert_eq!(unschedulable(&q), 0, "a new member of group a retries a-1");
    let events: Vec<&str> = arrivals
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(queue, _)| *queue != QueueName::Unschedulable)
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(events, ["NodeAdd", "UnschedulablePodAdd", "UnschedulablePodAdd", "UnschedulablePodAdd"]);
}

/// Adds `p` at time 0, pops it and puts it back as rejected by plugin `by`.
fn reject(q: &mut SchedulingQueue, p: Arc<PodInfo>, by: &str) {
    q.add(p, 0);
    let mut info = q.pop().unwrap();
    info.unschedulable_plugins = [by.to_string()].into();
    q.add_unschedulable(info, false, 0);
}

#[test]
fn a_new_pending_pod_moves_nothing_rejected_by_plugins_that_did_not_register_it() {
    // Upstream moves no pod when one is created: the default plugins' rejections stay put.
    let mut q = queue();
    reject(&mut q, pod("p", 0), "NodeResourcesFit");
    q.add(pod("q", 0), 5 * SEC);
    assert_eq!(q.pending().get(&QueueName::Unschedulable), Some(&1));
}

/// A QueueSort that gives keys (priority, higher first, then the queue's order), counting its calls.
struct KeyedSort {
    less_calls: Arc<AtomicUsize>,
    key_calls: Arc<AtomicUsize>,
}

impl Plugin for KeyedSort {
    fn name(&self) -> &str {
        "KeyedSort"
    }
    kube_wasm_scheduler::serves!(queue_sort);
}

impl QueueSortPlugin for KeyedSort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        self.less_calls.fetch_add(1, Ordering::Relaxed);
        (std::cmp::Reverse(a.pod_info.priority), a.timestamp) < (std::cmp::Reverse(b.pod_info.priority), b.timestamp)
    }
    fn sort_key(&self, pod: &QueuedPodInfo) -> Option<Arc<[u8]>> {
        self.key_calls.fetch_add(1, Ordering::Relaxed);
        // Higher priority first: the complement of the sign-flipped big-endian value.
        Some(Arc::from((!((pod.pod_info.priority as u32) ^ (1 << 31))).to_be_bytes().as_slice()))
    }
}

#[test]
fn a_queue_sort_that_gives_keys_is_asked_once_per_arrival_and_never_to_compare() {
    let (less_calls, key_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, k) = (less_calls.clone(), key_calls.clone());
    let mut reg = kube_wasm_scheduler::plugins::in_tree_registry();
    reg.register(
        "KeyedSort",
        Arc::new(
            move |_, _| Ok(Arc::new(KeyedSort { less_calls: l.clone(), key_calls: k.clone() }) as Arc<dyn Plugin>),
        ),
    )
    .unwrap();
    let cfg = config(&reg, &profile("").replace("{name: PrioritySort}", "{name: KeyedSort}"));
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    let mut q =
        SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(10));
    let n = 1000u64;
    for i in 0..n {
        q.add(pod(&format!("p{i}"), ((i * 2_654_435_761) % 100) as i32 - 50), i);
    }
    let popped: Vec<(i32, u64)> = std::iter::from_fn(|| q.pop()).map(|p| (p.pod_info.priority, p.timestamp)).collect();
    assert_eq!(popped.len() as u64, n);
    assert!(popped.windows(2).all(|w| (std::cmp::Reverse(w[0].0), w[0].1) < (std::cmp::Reverse(w[1].0), w[1].1)));
    assert_eq!(key_calls.load(Ordering::Relaxed) as u64, n, "one key per arrival");
    assert_eq!(less_calls.load(Ordering::Relaxed), 0, "keys compared by the queue itself");
}

/// A PreEnqueue plugin that holds pods back while `closed`, counting its calls; it registers only new nodes.
struct Gate {
    closed: Arc<std::sync::atomic::AtomicBool>,
    calls: Arc<AtomicUsize>,
}

impl Plugin for Gate {
    fn name(&self) -> &str {
        "Gate"
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, action::ADD)]
    }
    kube_wasm_scheduler::serves!(pre_enqueue);
}

impl PreEnqueuePlugin for Gate {
    fn pre_enqueue(&self, _pod: &PodInfo) -> Status {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.closed.load(Ordering::Relaxed) {
            Status::unresolvable("gate closed")
        } else {
            Status::success()
        }
    }
}

/// A queue whose profile runs [`Gate`] at PreEnqueue, closed, with the gate's switch and call count.
fn gated_queue() -> (SchedulingQueue, Arc<std::sync::atomic::AtomicBool>, Arc<AtomicUsize>) {
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut reg = kube_wasm_scheduler::plugins::in_tree_registry();
    let (c, n) = (closed.clone(), calls.clone());
    reg.register(
        "Gate",
        Arc::new(move |_, _| Ok(Arc::new(Gate { closed: c.clone(), calls: n.clone() }) as Arc<dyn Plugin>)),
    )
    .unwrap();
    let cfg = config(&reg, &profile("    preEnqueue:\n      enabled: [{name: Gate}]\n"));
    let ctx = PluginContext::new(Arc::new(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &reg, &ctx).unwrap());
    let q = SchedulingQueue::new(profiles.clone(), &profiles.names(), Duration::from_secs(1), Duration::from_secs(1));
    (q, closed, calls)
}

#[test]
fn a_gated_pod_is_checked_again_only_on_events_its_gate_registered() {
    let (mut q, closed, calls) = gated_queue();
    let gated = |q: &SchedulingQueue| q.pending().get(&QueueName::Gated).copied().unwrap_or(0);
    q.add(pod("p", 0), 0);
    assert_eq!((gated(&q), calls.load(Ordering::Relaxed)), (1, 1));
    // Events the gate did not register leave the pod where it is, unchecked (upstream skips them for gated pods).
    q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::ADD), SEC);
    q.on_event(ClusterEvent::new(EventResource::ResourceClaim, action::UPDATE), SEC);
    assert_eq!((gated(&q), calls.load(Ordering::Relaxed)), (1, 1), "checked again on an unregistered event");
    // A registered one runs the gate again.
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 2 * SEC);
    assert_eq!((gated(&q), calls.load(Ordering::Relaxed)), (1, 2));
    closed.store(false, Ordering::Relaxed);
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 3 * SEC);
    assert_eq!(gated(&q), 0, "the open gate let the pod on");
    assert_eq!(q.pop().map(|p| p.pod_info.name.clone()).as_deref(), Some("p"));
}

/// Thousands of gated pods cost an event their gate did not register nothing: every pod bound is such an event
/// (SchedulingGatedPodsWithPodAffinityImpactForThroughput keeps 10,000 gated pods while it schedules 20,000).
#[test]
fn gated_pods_are_not_weighed_for_events_their_gate_did_not_register() {
    let (mut q, closed, calls) = gated_queue();
    for i in 0..1000 {
        q.add(pod(&format!("g{i}"), 0), i);
    }
    // One unschedulable pod beside them is weighed for every event.
    closed.store(false, Ordering::Relaxed);
    q.add(pod("u", 0), 1000);
    let mut info = q.pop().unwrap();
    assert_eq!(info.pod_info.name, "u");
    // Rejected by a plugin that registered only new nodes, as the gate.
    info.unschedulable_plugins.insert("Gate".into());
    q.add_unschedulable(info, false, SEC);
    for t in 2..12 {
        q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::ADD), t * SEC);
    }
    assert_eq!(q.pods_weighed(), 10, "gated pods weighed for events their gate did not register");
    assert_eq!(calls.load(Ordering::Relaxed), 1001);
    // The event the gate registered weighs each of them once and runs the gate for each, now open.
    closed.store(false, Ordering::Relaxed);
    q.on_event(ClusterEvent::new(EventResource::Node, action::ADD), 20 * SEC);
    assert_eq!(q.pods_weighed(), 10 + 1001);
    assert_eq!(calls.load(Ordering::Relaxed), 1001 + 1001);
    assert_eq!((q.pending().get(&QueueName::Gated), q.pending().get(&QueueName::Active)), (None, Some(&1001)));
}
