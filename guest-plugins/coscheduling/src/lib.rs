//! Coscheduling: gang scheduling by pod labels, as scheduler-plugins' lightweight Coscheduling
//! (`pkg/coscheduling/coscheduling.go`, before PodGroup objects): the pods of a group are bound together or not at
//! all.
//!
//! A pod is in a gang when it carries [`POD_GROUP_LABEL`] (`pod-group.scheduling.sigs.k8s.io/name: GROUP`); the
//! group is `namespace/GROUP`, and [`MIN_AVAILABLE_LABEL`] (`pod-group.scheduling.sigs.k8s.io/min-available: "N"`)
//! says how many of its pods must be placed at once (1 when absent: no gang in effect). A pod without the group
//! label passes every point untouched.
//!
//! Configuration: `{"permitWaitingTimeSeconds": 60}` (the default), a positive integer.
//!
//! - QueueSort: higher priority first; then the group's time (the earliest first-seen time among the group's
//!   pods in the pod view; a lone pod's own queue time); then the group key (`ns/GROUP`, a lone pod's
//!   `ns/name`), so a gang's members leave the queue one after another; then the pod's own queue time.
//! - PreFilter: fewer pods of the group in the view (any state) than min-available is UnschedulableAndUnresolvable,
//!   as upstream's "cannot find enough sibling pods".
//! - PostFilter (the pod fits no node): unless enough of the group is already placed, every waiting sibling is
//!   rejected, so the group does not hold nodes it cannot use, and the pod is Unschedulable.
//! - Permit: once min-available pods of the group are assumed or bound (this one included), every waiting sibling
//!   is allowed and the pod goes on; until then it waits, at most `permitWaitingTimeSeconds`.
//! - Unreserve (a member timed out or was rejected): every other waiting pod of the group is rejected.
//! - Events: a pending pod that joins the group (created with the label, or labelled later) may complete it.
//!
//! Decisions read only the call, the pod view and the waiting pods: the host runs several instances of the plugin,
//! each with its own memory, so nothing an instance remembered could be trusted.

use std::time::Duration;

use kws_plugin_sdk::{
    host, pods, Actions, ClusterEvent, Config, EventObject, NodeInfo, Permit, Plugin, Pod, PostFilterResult,
    PreFilterResult, QueuedPod, QueueingHint, SortKey, Status,
};

/// The label naming a pod's group.
pub const POD_GROUP_LABEL: &str = "pod-group.scheduling.sigs.k8s.io/name";

/// The label giving the number of the group's pods that must be placed together.
pub const MIN_AVAILABLE_LABEL: &str = "pod-group.scheduling.sigs.k8s.io/min-available";

/// How long a gang pod waits at Permit for its siblings when the configuration says nothing, seconds (upstream's
/// default).
pub const DEFAULT_PERMIT_WAITING_TIME_SECONDS: i64 = 60;

/// The plugin: how long a pod waits at Permit.
pub struct Coscheduling {
    /// `permitWaitingTimeSeconds`.
    permit_wait: Duration,
}

/// The group a pod belongs to, and its min-available.
struct Gang<'a> {
    /// The pod's namespace.
    namespace: &'a str,
    /// The group's name (the label's value).
    name: &'a str,
}

impl<'a> Gang<'a> {
    /// The pod's gang; `None` for a pod without (or with an empty) group label.
    fn of(pod: &'a Pod) -> Option<Self> {
        let name = pod.label(POD_GROUP_LABEL).filter(|g| !g.is_empty())?;
        Some(Gang { namespace: &pod.namespace, name })
    }

    /// `namespace/GROUP`.
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// True when `pod` is in this group.
    fn contains(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace && pod.label(POD_GROUP_LABEL) == Some(self.name)
    }

    /// The group's pods in the pod view, in any state.
    fn members(&self) -> usize {
        pods().with_label(POD_GROUP_LABEL, self.name).in_namespace(self.namespace).count()
    }

    /// The group's pods in the pod view that are assumed or bound.
    fn placed(&self) -> usize {
        pods().with_label(POD_GROUP_LABEL, self.name).in_namespace(self.namespace).placed().count()
    }

    /// The earliest time the scheduler first saw a pod of the group; `None` when the view has none.
    fn first_seen_ns(&self) -> Option<u64> {
        pods().with_label(POD_GROUP_LABEL, self.name).in_namespace(self.namespace).map(|p| p.first_seen_ns).min()
    }

    /// The UIDs of the group's pods waiting at Permit, except `except`.
    fn waiting(&self, except: &str) -> Vec<String> {
        host::waiting_pods()
            .into_iter()
            .filter(|w| self.contains(&w.pod) && w.pod.uid != except)
            .map(|w| w.pod.uid)
            .collect()
    }
}

/// The pod's min-available: 1 without the label; an UnschedulableAndUnresolvable status naming the pod, the label
/// and the value when it is not a positive integer.
fn min_available(pod: &Pod) -> Result<usize, Status> {
    let Some(value) = pod.label(MIN_AVAILABLE_LABEL) else { return Ok(1) };
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Status::unresolvable(format!(
            "pod {}/{}: label {MIN_AVAILABLE_LABEL} has value {value:?}, want a positive integer",
            pod.namespace, pod.name
        ))),
    }
}

impl Coscheduling {
    /// The queue's order key after priority: group time, group (or pod) key, own time.
    fn queue_key(q: &QueuedPod) -> (u64, String, u64) {
        match Gang::of(&q.pod) {
            Some(g) => (g.first_seen_ns().unwrap_or(q.timestamp_ns), g.key(), q.timestamp_ns),
            None => (q.timestamp_ns, q.pod.key(), q.timestamp_ns),
        }
    }
}

impl Plugin for Coscheduling {
    type NodeData = ();

    /// Group membership is what every point asks the pod view.
    const INDEXED_LABELS: &'static [&'static str] = &[POD_GROUP_LABEL];

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&["permitWaitingTimeSeconds"])?;
        let seconds = config.i64("permitWaitingTimeSeconds")?.unwrap_or(DEFAULT_PERMIT_WAITING_TIME_SECONDS);
        if seconds <= 0 {
            return Err(format!("permitWaitingTimeSeconds must be a positive integer, got {seconds}"));
        }
        Ok(Self { permit_wait: Duration::from_secs(seconds as u64) })
    }

    fn less(&self, a: &QueuedPod, b: &QueuedPod) -> bool {
        if a.pod.priority != b.pod.priority {
            return a.pod.priority > b.pod.priority;
        }
        Self::queue_key(a) < Self::queue_key(b)
    }

    /// The same order as a key, computed when the pod enters the queue: one call per pod instead of one per
    /// comparison, and the group's time is looked up in the pod view once rather than twice per comparison.
    fn sort_key(&self, q: &QueuedPod) -> Option<Vec<u8>> {
        let (group_time, key, own_time) = Self::queue_key(q);
        let k = SortKey::new().desc_i64(q.pod.priority.into()).asc_u64(group_time).asc_str(&key);
        Some(k.asc_u64(own_time).finish())
    }

    fn pre_filter(&self, pod: &Pod) -> PreFilterResult {
        let Some(gang) = Gang::of(pod) else { return PreFilterResult::success() };
        let min = match min_available(pod) {
            Ok(min) => min,
            Err(status) => return status.into(),
        };
        let members = gang.members();
        if members < min {
            return Status::unresolvable(format!(
                "pre-filter pod {} cannot find enough sibling pods, current pods number: {members}, minMember: {min}, \
                 podGroup: {}",
                pod.name,
                gang.key()
            ))
            .into();
        }
        PreFilterResult::success()
    }

    fn post_filter(&self, pod: &Pod, _rejected: &[(NodeInfo<'_, ()>, Status)]) -> PostFilterResult {
        let Some(gang) = Gang::of(pod) else { return PostFilterResult::unschedulable("") };
        // A bad min-available label: PreFilter said so, and no sibling can be helped by rejecting the others.
        let Ok(min) = min_available(pod) else { return PostFilterResult::unschedulable("") };
        // Enough of the group is placed already: the group does not need this pod, so its siblings keep their
        // places.
        if gang.placed() >= min {
            return PostFilterResult::unschedulable("");
        }
        let key = gang.key();
        let reason =
            format!("optimistic rejection in PostFilter: pod {} of PodGroup {key} is unschedulable", pod.key());
        for uid in gang.waiting(&pod.uid) {
            host::reject_waiting_pod(&uid, &reason);
        }
        PostFilterResult::unschedulable(format!(
            "PodGroup {key} gets rejected due to Pod {} is unschedulable even after PostFilter",
            pod.name
        ))
    }

    fn permit(&self, pod: &Pod, _node: &str) -> Permit {
        let Some(gang) = Gang::of(pod) else { return Permit::Allow };
        let min = match min_available(pod) {
            Ok(min) => min,
            Err(status) => return Permit::Reject(status),
        };
        // The host shows the pod assumed before Permit runs; count it anyway if an update has not arrived.
        let this_placed = pods().get(&pod.uid).is_some_and(|p| p.is_placed());
        let placed = gang.placed() + usize::from(!this_placed);
        if placed < min {
            let reason =
                format!("waiting for {} more pod(s) of PodGroup {} (minMember {min})", min - placed, gang.key());
            return Permit::WaitFor(self.permit_wait, reason);
        }
        for uid in gang.waiting(&pod.uid) {
            host::allow_waiting_pod(&uid);
        }
        Permit::Allow
    }

    fn unreserve(&self, pod: &Pod, _node: &str) {
        let Some(gang) = Gang::of(pod) else { return };
        // A rejected pod leaves the waiting list, so a second Unreserve finds nobody to reject.
        for uid in gang.waiting(&pod.uid) {
            host::reject_waiting_pod(
                &uid,
                &format!("rejection in Unreserve: pod {} of PodGroup {} left", pod.key(), gang.key()),
            );
        }
    }

    /// A gang pod this plugin rejected waits for its group to grow: a pending pod joining it, by being created
    /// with the label or labelled later. Pods rejected at Permit (a sibling did not fit, or the wait timed out)
    /// also wait for that; room for the sibling is other plugins' events (NodeResourcesFit's), and the queue's
    /// periodic flush retries them in any case, as upstream.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::unscheduled_pod(Actions::ADD | Actions::UPDATE_LABEL)]
    }

    fn queueing_hint(
        &self,
        pod: &Pod,
        _event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let Some(gang) = Gang::of(pod) else { return QueueingHint::QueueSkip };
        let joins = new.and_then(EventObject::pod).is_some_and(|p| gang.contains(p));
        let was_in = old.and_then(EventObject::pod).is_some_and(|p| gang.contains(p));
        QueueingHint::queue_if(joins && !was_in)
    }
}

kws_plugin_sdk::export!(Coscheduling: queue_sort, pre_filter, post_filter, permit, reserve, events, pods);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::testing::{self, WaitingPodCall, PLUGIN_NAME};
    use kws_plugin_sdk::{Code, KnownPod, Node, WaitingPod};

    /// A pod of group `group` in namespace `ns` with min-available `min` (no label when `None`).
    fn member(ns: &str, name: &str, group: &str, min: Option<&str>) -> Pod {
        let pod = Pod::new(ns, name).with_label(POD_GROUP_LABEL, group);
        match min {
            Some(m) => pod.with_label(MIN_AVAILABLE_LABEL, m),
            None => pod,
        }
    }

    /// A pod of group `g` in namespace `ns` needing 3.
    fn g3(name: &str) -> Pod {
        member("ns", name, "g", Some("3"))
    }

    fn reject(uid: &str, reason: &str) -> WaitingPodCall {
        WaitingPodCall::Reject { uid: uid.into(), plugin: PLUGIN_NAME.into(), reason: reason.into(), found: true }
    }

    fn allow(uid: &str) -> WaitingPodCall {
        WaitingPodCall::Allow { uid: uid.into(), plugin: PLUGIN_NAME.into(), found: true }
    }

    #[test]
    fn configuration_is_checked() {
        assert_eq!(testing::validate::<Coscheduling>(), Ok(()));
        testing::set_config(r#"{"permitWaitingTimeSeconds": 5}"#);
        assert_eq!(testing::validate::<Coscheduling>(), Ok(()));
        for (bad, why) in [
            (r#"{"permitWaitingTimeSeconds": 0}"#, "permitWaitingTimeSeconds must be a positive integer, got 0"),
            (r#"{"permitWaitingTimeSeconds": -3}"#, "permitWaitingTimeSeconds must be a positive integer, got -3"),
            (r#"{"permitWaitingTimeSeconds": 1.5}"#, r#"config "permitWaitingTimeSeconds": expected an integer"#),
            (r#"{"permitWaitingTimeSecond": 5}"#, r#"config: unknown key "permitWaitingTimeSecond""#),
        ] {
            testing::set_config(bad);
            let e = testing::validate::<Coscheduling>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_pod_without_a_group_passes_every_point_untouched() {
        testing::load_nodes(vec![Node::new("n")]);
        testing::set_waiting_pods(vec![WaitingPod::new(g3("w"), "n", &[PLUGIN_NAME])]);
        let lone = || Pod::new("ns", "lone").with_label(MIN_AVAILABLE_LABEL, "5");
        assert_eq!(testing::pre_filter::<Coscheduling>(lone()), PreFilterResult::success());
        assert_eq!(testing::permit::<Coscheduling>(lone(), "n"), Permit::Allow.into());
        let r = testing::post_filter::<Coscheduling>(lone(), vec![(0, Status::unschedulable("full"))]);
        assert_eq!(r, PostFilterResult::unschedulable(""));
        assert!(testing::reserve::<Coscheduling>(lone(), "n").is_success());
        testing::unreserve::<Coscheduling>(lone(), "n");
        let hint = testing::queueing_hint::<Coscheduling>(
            lone(),
            ClusterEvent::unscheduled_pod(Actions::ADD),
            None,
            Some(EventObject::Pod(g3("new"))),
        );
        assert_eq!(hint, QueueingHint::QueueSkip);
        assert_eq!(testing::take_waiting_pod_calls(), []);
    }

    #[test]
    fn queue_sort_priority_then_group_time_then_key_then_own_time() {
        let q = |pod: Pod, prio: i32, ts: u64| {
            let mut pod = pod;
            pod.priority = prio;
            QueuedPod::new(pod, ts)
        };
        // Every comparison below is made with `less` and with the sort keys, which must agree.
        let less = |a: &QueuedPod, b: &QueuedPod| {
            let by_less = testing::less::<Coscheduling>(a.clone(), b.clone());
            let by_key = testing::sort_key::<Coscheduling>(a.clone()) < testing::sort_key::<Coscheduling>(b.clone());
            assert_eq!(by_less, by_key, "less and the keys disagree on {} vs {}", a.pod.name, b.pod.name);
            by_less
        };
        // Priority first, whatever the times.
        assert!(less(&q(Pod::new("ns", "a"), 10, 99), &q(Pod::new("ns", "b"), 1, 1)));
        // Lone pods: queue time, then key.
        assert!(less(&q(Pod::new("ns", "a"), 0, 1), &q(Pod::new("ns", "b"), 0, 2)));
        assert!(less(&q(Pod::new("ns", "a"), 0, 2), &q(Pod::new("ns", "b"), 0, 2)));
        assert!(!less(&q(Pod::new("ns", "b"), 0, 2), &q(Pod::new("ns", "a"), 0, 2)));

        // Group g was first seen at 5 (its pod g-1), so its late member g-3 (queued at 50) goes before a lone pod
        // queued at 10 and a member of group h first seen at 7.
        testing::upsert_pods(vec![
            KnownPod::pending(g3("g-1"), 5),
            KnownPod::pending(g3("g-3"), 50),
            KnownPod::pending(member("ns", "h-1", "h", Some("2")), 7),
            KnownPod::pending(member("other", "g-9", "g", Some("2")), 1),
        ]);
        let late = q(g3("g-3"), 0, 50);
        assert!(less(&late, &q(Pod::new("ns", "lone"), 0, 10)));
        assert!(less(&late, &q(member("ns", "h-2", "h", Some("2")), 0, 8)));
        // Namespace ns's group g is not namespace other's: that one was first seen at 1.
        assert!(less(&q(member("other", "g-8", "g", None), 0, 60), &late));
        // Same group time: the key keeps a gang together (ns/g before ns/gz), then the pod's own time.
        testing::upsert_pods(vec![KnownPod::pending(member("ns", "z-1", "gz", None), 5)]);
        assert!(less(&late, &q(member("ns", "z-1", "gz", None), 0, 5)));
        assert!(less(&q(g3("g-2"), 0, 40), &late));
        assert!(!less(&late, &q(g3("g-2"), 0, 40)));
        // A member the view does not know yet, of a group it does not know: its own queue time.
        assert!(less(&q(member("ns", "x-1", "x", None), 0, 4), &late));
        assert!(!less(&q(member("ns", "x-1", "x", None), 0, 6), &late));
    }

    #[test]
    fn pre_filter_needs_min_available_pods_of_the_group_in_the_view() {
        // Without the min-available label the group needs only the pod itself.
        testing::upsert_pods(vec![KnownPod::pending(member("ns", "solo", "s", None), 1)]);
        assert_eq!(testing::pre_filter::<Coscheduling>(member("ns", "solo", "s", None)), PreFilterResult::success());

        testing::upsert_pods(vec![KnownPod::pending(g3("g-1"), 1), KnownPod::bound(g3("g-2"), "n", 2)]);
        // A pod of the same group name in another namespace is not a sibling.
        testing::upsert_pods(vec![KnownPod::pending(member("other", "g-3", "g", Some("3")), 3)]);
        let st = testing::pre_filter::<Coscheduling>(g3("g-1")).status;
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(
            st.message(),
            "pre-filter pod g-1 cannot find enough sibling pods, current pods number: 2, minMember: 3, podGroup: ns/g"
        );
        testing::upsert_pods(vec![KnownPod::pending(g3("g-3"), 3)]);
        assert_eq!(testing::pre_filter::<Coscheduling>(g3("g-1")), PreFilterResult::success());
    }

    #[test]
    fn pre_filter_refuses_a_min_available_that_is_not_a_positive_integer() {
        for bad in ["0", "-1", "three", ""] {
            let st = testing::pre_filter::<Coscheduling>(member("ns", "p", "g", Some(bad))).status;
            assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
            assert_eq!(
                st.message(),
                format!("pod ns/p: label {MIN_AVAILABLE_LABEL} has value {bad:?}, want a positive integer")
            );
            // PostFilter does not say it a second time in the pod's message.
            let r = testing::post_filter::<Coscheduling>(member("ns", "p", "g", Some(bad)), vec![]);
            assert_eq!(r, PostFilterResult::unschedulable(""));
        }
    }

    #[test]
    fn post_filter_rejects_the_waiting_siblings_unless_the_group_is_placed_already() {
        testing::load_nodes(vec![Node::new("n1")]);
        testing::upsert_pods(vec![
            KnownPod::assumed(g3("g-1"), "n1", 1),
            KnownPod::assumed(g3("g-2"), "n1", 2),
            KnownPod::pending(g3("g-3"), 3),
        ]);
        testing::set_waiting_pods(vec![
            WaitingPod::new(g3("g-1"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(g3("g-2"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(member("ns", "h-1", "h", Some("2")), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(member("other", "g-1", "g", Some("2")), "n1", &[PLUGIN_NAME]),
        ]);
        let r = testing::post_filter::<Coscheduling>(g3("g-3"), vec![(0, Status::unschedulable("full"))]);
        assert_eq!(r.status.code, Code::Unschedulable);
        assert_eq!(
            r.status.message(),
            "PodGroup ns/g gets rejected due to Pod g-3 is unschedulable even after PostFilter"
        );
        assert_eq!(r.nominated_node, None);
        let reason = "optimistic rejection in PostFilter: pod ns/g-3 of PodGroup ns/g is unschedulable";
        assert_eq!(testing::take_waiting_pod_calls(), [reject("ns/g-1", reason), reject("ns/g-2", reason)]);
        assert_eq!(testing::waiting_pods().len(), 2, "other groups keep waiting");

        // Three of the group placed: a fourth that does not fit costs the group nothing.
        testing::upsert_pods(vec![KnownPod::bound(g3("g-3"), "n1", 3)]);
        testing::set_waiting_pods(vec![WaitingPod::new(g3("g-1"), "n1", &[PLUGIN_NAME])]);
        let r = testing::post_filter::<Coscheduling>(g3("g-4"), vec![(0, Status::unschedulable("full"))]);
        assert_eq!(r, PostFilterResult::unschedulable(""));
        assert_eq!(testing::take_waiting_pod_calls(), []);
    }

    #[test]
    fn permit_waits_until_min_available_are_placed_then_allows_the_group() {
        testing::set_config(r#"{"permitWaitingTimeSeconds": 30}"#);
        testing::upsert_pods(vec![KnownPod::assumed(g3("g-1"), "n1", 1), KnownPod::pending(g3("g-2"), 2)]);
        let wait = |n: usize| {
            Permit::WaitFor(
                Duration::from_secs(30),
                format!("waiting for {n} more pod(s) of PodGroup ns/g (minMember 3)"),
            )
        };
        assert_eq!(testing::permit::<Coscheduling>(g3("g-1"), "n1"), wait(2).into());
        testing::upsert_pods(vec![KnownPod::assumed(g3("g-2"), "n2", 2), KnownPod::pending(g3("g-3"), 3)]);
        assert_eq!(testing::permit::<Coscheduling>(g3("g-2"), "n2"), wait(1).into());
        assert_eq!(testing::take_waiting_pod_calls(), []);

        // The third is assumed: the group is complete, the other two are allowed.
        testing::upsert_pods(vec![KnownPod::assumed(g3("g-3"), "n3", 3)]);
        testing::set_waiting_pods(vec![
            WaitingPod::new(g3("g-1"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(g3("g-2"), "n2", &[PLUGIN_NAME]),
            WaitingPod::new(member("ns", "h-1", "h", Some("2")), "n1", &[PLUGIN_NAME]),
        ]);
        assert_eq!(testing::permit::<Coscheduling>(g3("g-3"), "n3"), Permit::Allow.into());
        assert_eq!(testing::take_waiting_pod_calls(), [allow("ns/g-1"), allow("ns/g-2")]);
        assert_eq!(testing::waiting_pods().len(), 1);
    }

    #[test]
    fn permit_counts_the_pod_itself_when_the_view_does_not_show_it_assumed_yet() {
        testing::upsert_pods(vec![
            KnownPod::bound(g3("g-1"), "n1", 1),
            KnownPod::assumed(g3("g-2"), "n1", 2),
            KnownPod::pending(g3("g-3"), 3),
        ]);
        assert_eq!(testing::permit::<Coscheduling>(g3("g-3"), "n1"), Permit::Allow.into());
        // With the default wait when the group is short.
        testing::remove_pod("ns/g-1");
        let want = Permit::WaitFor(
            Duration::from_secs(DEFAULT_PERMIT_WAITING_TIME_SECONDS as u64),
            "waiting for 1 more pod(s) of PodGroup ns/g (minMember 3)".to_string(),
        );
        assert_eq!(testing::permit::<Coscheduling>(g3("g-3"), "n1"), want.into());
    }

    #[test]
    fn unreserve_rejects_every_other_waiting_pod_of_the_group_once() {
        testing::set_waiting_pods(vec![
            WaitingPod::new(g3("g-1"), "n1", &[PLUGIN_NAME]),
            WaitingPod::new(g3("g-2"), "n2", &[PLUGIN_NAME, "Other"]),
            WaitingPod::new(g3("g-3"), "n3", &[PLUGIN_NAME]),
            WaitingPod::new(member("ns", "h-1", "h", None), "n1", &[PLUGIN_NAME]),
        ]);
        assert!(testing::reserve::<Coscheduling>(g3("g-3"), "n3").is_success());
        testing::unreserve::<Coscheduling>(g3("g-3"), "n3");
        testing::unreserve::<Coscheduling>(g3("g-3"), "n3");
        let reason = "rejection in Unreserve: pod ns/g-3 of PodGroup ns/g left";
        assert_eq!(testing::take_waiting_pod_calls(), [reject("ns/g-1", reason), reject("ns/g-2", reason)]);
        let left: Vec<String> = testing::waiting_pods().into_iter().map(|w| w.pod.name).collect();
        assert_eq!(left, ["g-3", "h-1"]);
    }

    #[test]
    fn a_pending_pod_joining_the_group_requeues_its_members() {
        assert_eq!(
            testing::events_to_register::<Coscheduling>(),
            [ClusterEvent::unscheduled_pod(Actions::ADD | Actions::UPDATE_LABEL)]
        );
        let hint = |old: Option<Pod>, new: Option<Pod>| {
            let event = ClusterEvent::unscheduled_pod(if old.is_some() { Actions::UPDATE_LABEL } else { Actions::ADD });
            testing::queueing_hint::<Coscheduling>(
                g3("g-1"),
                event,
                old.map(EventObject::Pod),
                new.map(EventObject::Pod),
            )
        };
        assert_eq!(hint(None, Some(g3("g-2"))), QueueingHint::Queue);
        assert_eq!(hint(None, Some(member("ns", "h-1", "h", None))), QueueingHint::QueueSkip);
        assert_eq!(hint(None, Some(member("other", "g-1", "g", None))), QueueingHint::QueueSkip);
        assert_eq!(hint(None, Some(Pod::new("ns", "lone"))), QueueingHint::QueueSkip);
        // Labelled into the group later; a change that leaves it where it was adds nobody.
        assert_eq!(hint(Some(Pod::new("ns", "x")), Some(g3("x"))), QueueingHint::Queue);
        assert_eq!(hint(Some(g3("x")), Some(g3("x").with_label("other", "y"))), QueueingHint::QueueSkip);
        let node = EventObject::Node(Node::new("n"));
        let st = testing::queueing_hint::<Coscheduling>(g3("g-1"), ClusterEvent::node(Actions::ADD), None, Some(node));
        assert_eq!(st, QueueingHint::QueueSkip);
    }
}
