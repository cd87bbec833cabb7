//! GangScheduling (upstream's `plugins/gangscheduling`, v1.37, with the GenericWorkload gate and CompositePodGroup
//! off): all-or-nothing scheduling of the pods of a PodGroup (`scheduling.k8s.io/v1beta1`) whose
//! `spec.schedulingPolicy.gang.minCount` is set. A pod joins a group through `spec.schedulingGroup.podGroupName`.
//!
//! - PreEnqueue holds a member until its PodGroup exists and the scheduler knows at least `minCount` of its
//!   members (pending, assumed or bound), with upstream's messages.
//! - Permit makes a member wait (up to 5 minutes) until `minCount` members are assumed or bound, then allows every
//!   assumed member at once.
//! - [`placement_feasible`] is upstream's PlacementFeasible, which the scheduler's PodGroup cycle
//!   (`scheduler::schedule_one_podgroup`) asks after each member it tries: the group is given up as soon as
//!   `minCount` can no longer be reached, and succeeds once it is.
//!
//! What it counts comes from the scheduler's pod view (`PodView::pod_group`, fed by the event handlers and the
//! assume/forget steps, as upstream's cache feeds its pod group state), and the PodGroups from the listers.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::scheduling::v1beta1::PodGroup;

use crate::framework::pod_view::PodView;
use crate::framework::waiting_pods::WaitingPods;
use crate::framework::{
    action, ClusterEvent, Code, CycleState, EventObject, EventResource, Listers, PermitPlugin, Plugin, PluginContext,
    PodInfo, PreEnqueuePlugin, QueueingHint, Status,
};

/// The plugin's name in profiles.
pub const NAME: &str = crate::config::GANG_SCHEDULING;

/// How long a member waits at Permit for the rest of its gang (upstream's `permitTimeoutDuration`).
pub const PERMIT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// PreEnqueue's message while enough members are not known yet.
pub const WAITING_FOR_MIN_COUNT: &str = "waiting for minCount pods from a gang to appear in scheduling queue";

/// The GangScheduling plugin.
pub struct GangScheduling {
    pods: Arc<PodView>,
    listers: Arc<Listers>,
    waiting: Arc<WaitingPods>,
}

impl GangScheduling {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, ctx: &PluginContext) -> Result<GangScheduling, String> {
        Ok(GangScheduling { pods: ctx.pods.clone(), listers: ctx.listers.clone(), waiting: ctx.waiting.clone() })
    }

    /// The pod's PodGroup as the listers hold it: `Err` with the group's name when it names one that does not
    /// exist (yet), `Ok(None)` when it names none.
    fn pod_group(&self, pod: &PodInfo) -> Result<Option<(String, Arc<PodGroup>)>, String> {
        let Some(key) = pod.pod_group_key() else { return Ok(None) };
        match self.listers.objects().pod_groups.get(&key) {
            Some(pg) => Ok(Some((key, pg.clone()))),
            None => Err(pod.pod_group().unwrap_or_default().to_string()),
        }
    }
}

/// A PodGroup's gang `minCount`, when its policy is a gang.
pub fn gang_min_count(pg: &PodGroup) -> Option<i32> {
    pg.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count)
}

/// The pod group's `minCount` for PlacementFeasible: a group that is not a gang needs one pod (upstream's
/// `getMinCount`).
pub fn min_count(pg: &PodGroup) -> usize {
    gang_min_count(pg).map_or(1, |n| usize::try_from(n).unwrap_or(0))
}

/// Upstream's `PlacementFeasible`: whether a group with `min_count` can still be placed, `scheduled` members
/// placed (assumed or bound, this cycle's included) and `remaining` still to try. Unschedulable ends the cycle
/// early, Wait asks for the next member, Success means `minCount` is reached.
pub fn placement_feasible(min_count: usize, scheduled: usize, remaining: usize) -> Status {
    if remaining + scheduled < min_count {
        return Status::unschedulable(format!(
            "minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        ));
    }
    if scheduled < min_count {
        return Status::new(
            Code::Wait,
            format!("minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"),
        );
    }
    Status::success()
}

/// The pod group key (`namespace/name`) of an event's PodGroup.
fn event_group_key(o: Option<&EventObject>) -> Option<(String, Arc<PodGroup>)> {
    match o? {
        EventObject::PodGroup(pg) => {
            let key = format!(
                "{}/{}",
                pg.metadata.namespace.as_deref().unwrap_or_default(),
                pg.metadata.name.as_deref().unwrap_or_default()
            );
            Some((key, pg.clone()))
        }
        _ => None,
    }
}

impl Plugin for GangScheduling {
    fn name(&self) -> &str {
        NAME
    }

    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            // A new member, pending or bound, may be the one that completes the gang. The group a pod names is
            // immutable, so a pod's update is no event here.
            ClusterEvent::new(EventResource::UnscheduledPod, action::ADD),
            ClusterEvent::new(EventResource::AssignedPod, action::ADD),
            // The PodGroup appearing, or its minCount decreasing.
            ClusterEvent::new(EventResource::PodGroup, action::ADD),
            ClusterEvent::new(EventResource::PodGroup, action::UPDATE),
        ]
    }

    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> QueueingHint {
        let Some(mine) = pod.pod_group_key() else { return QueueingHint::QueueSkip };
        let same = |key: &str| if key == mine { QueueingHint::Queue } else { QueueingHint::QueueSkip };
        match event.resource {
            EventResource::UnscheduledPod | EventResource::AssignedPod => match new {
                Some(EventObject::Pod(added)) => added.pod_group_key().map_or(QueueingHint::QueueSkip, |k| same(&k)),
                // An object of the wrong kind: upstream answers Queue with the error.
                _ => QueueingHint::Queue,
            },
            EventResource::PodGroup if event.actions & action::ADD != 0 => match event_group_key(new) {
                Some((key, _)) => same(&key),
                None => QueueingHint::Queue,
            },
            EventResource::PodGroup => {
                let (Some((key, new_pg)), Some((_, old_pg))) = (event_group_key(new), event_group_key(old)) else {
                    return QueueingHint::Queue;
                };
                if key != mine {
                    return QueueingHint::QueueSkip;
                }
                // Only a gang's minCount going down can let its waiting members in.
                match (gang_min_count(&old_pg), gang_min_count(&new_pg)) {
                    (Some(before), Some(after)) if after < before => QueueingHint::Queue,
                    _ => QueueingHint::QueueSkip,
                }
            }
            _ => QueueingHint::Queue,
        }
    }

    crate::serves!(pre_enqueue, permit);
}

impl PreEnqueuePlugin for GangScheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let (key, pg) = match self.pod_group(pod) {
            Ok(Some(found)) => found,
            Ok(None) => return Status::success(),
            // Upstream's spelling, "pods's" included.
            Err(name) => {
                return Status::unresolvable(format!(
                    "waiting for pods's pod group {name:?} to appear in scheduling queue"
                ))
            }
        };
        let Some(min) = gang_min_count(&pg) else { return Status::success() };
        if (self.pods.pod_group(&key).all as i64) < i64::from(min) {
            return Status::unresolvable(WAITING_FOR_MIN_COUNT);
        }
        Status::success()
    }
}

impl PermitPlugin for GangScheduling {
    fn permit(&self, _state: &mut CycleState, pod: &PodInfo, _node: &str) -> (Status, Duration) {
        let (key, pg) = match self.pod_group(pod) {
            Ok(Some(found)) => found,
            Ok(None) => return (Status::success(), Duration::ZERO),
            Err(name) => {
                return (
                    Status::error(format!(
                        "failed to get podGroup {}/{name}: podgroups.scheduling.k8s.io {name:?} not found",
                        pod.namespace
                    )),
                    Duration::ZERO,
                )
            }
        };
        let Some(min) = gang_min_count(&pg) else { return (Status::success(), Duration::ZERO) };
        let members = self.pods.pod_group(&key);
        if (members.scheduled as i64) < i64::from(min) {
            // Upstream's Wait says "waiting for minCount pods from a gang to be scheduled", which no user sees:
            // its timeout's message names the plugin only, and so does ours when the reason is left out.
            return (Status::code_only(Code::Wait), PERMIT_TIMEOUT);
        }
        // The quorum is met: this member goes on, and so does every member waiting for it.
        for uid in &members.assumed {
            if let Some(w) = self.waiting.get(uid) {
                w.allow(NAME);
            }
        }
        (Status::success(), Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Instant;

    use super::*;
    use crate::framework::waiting_pods::PermitWait;
    use crate::framework::ClusterObjects;
    use crate::plugins::testutil::{ctx, pod};
    use serde_json::json;

    fn member(name: &str, group: &str) -> Arc<PodInfo> {
        Arc::new(pod(json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": group}}})))
    }

    fn pod_group(name: &str, gang: Option<i32>) -> Arc<PodGroup> {
        let policy = match gang {
            Some(n) => json!({"gang": {"minCount": n}}),
            None => json!({"basic": {}}),
        };
        let v = json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"schedulingPolicy": policy}});
        Arc::new(serde_json::from_value(v).unwrap())
    }

    /// The plugin with these PodGroups listed.
    fn plugin(groups: &[Arc<PodGroup>]) -> GangScheduling {
        let c = ctx();
        let mut objects = ClusterObjects::default();
        for g in groups {
            let key = format!("ns/{}", g.metadata.name.as_deref().unwrap());
            objects.pod_groups.insert(key, g.clone());
        }
        c.listers.set(Arc::new(objects));
        GangScheduling::new(None, &c).unwrap()
    }

    #[test]
    fn pre_enqueue_holds_a_member_until_its_group_exists_and_min_count_members_are_known() {
        let pl = plugin(&[]);
        let a = member("a", "g");
        assert!(pl.pre_enqueue(&pod(json!({"metadata": {"name": "lone"}}))).is_success(), "not a member");
        pl.pods.pending(&a, 0);
        let s = pl.pre_enqueue(&a);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "waiting for pods's pod group \"g\" to appear in scheduling queue");

        let pl = GangScheduling { listers: plugin(&[pod_group("g", Some(3))]).listers, ..pl };
        let s = pl.pre_enqueue(&a);
        assert_eq!((s.code(), s.message()), (Code::UnschedulableAndUnresolvable, WAITING_FOR_MIN_COUNT.into()));
        let b = member("b", "g");
        pl.pods.pending(&b, 0);
        assert!(!pl.pre_enqueue(&a).is_success(), "two of three");
        // A bound member counts as a known one.
        let c = Arc::new(member("c", "g").with_node_name("n1"));
        pl.pods.bound(&c, 0);
        assert!(pl.pre_enqueue(&a).is_success() && pl.pre_enqueue(&b).is_success(), "three of three");
        // A member of another group, or of a group that is no gang, is not held.
        assert!(!pl.pre_enqueue(&member("x", "other")).is_success(), "other group does not exist");
        let basic = plugin(&[pod_group("b", None)]);
        assert!(basic.pre_enqueue(&member("y", "b")).is_success(), "a basic policy holds nobody");
    }

    #[test]
    fn permit_waits_for_min_count_scheduled_members_then_allows_them_all() {
        let pl = plugin(&[pod_group("g", Some(3))]);
        let (a, b, c) = (member("a", "g"), member("b", "g"), member("c", "g"));
        let mut state = CycleState::new();
        let far =
            PermitWait { deadline: Instant::now() + PERMIT_TIMEOUT, timeout: PERMIT_TIMEOUT, reason: String::new() };
        for p in [&a, &b] {
            pl.pods.assumed(p, 0);
            let (s, wait) = pl.permit(&mut state, p, "n1");
            assert_eq!((s.code(), wait), (Code::Wait, PERMIT_TIMEOUT), "{}", p.name);
            pl.waiting.park(p.clone(), "n1", HashMap::from([(NAME.to_string(), far.clone())]));
        }
        pl.pods.assumed(&c, 0);
        let (s, _) = pl.permit(&mut state, &c, "n1");
        assert!(s.is_success(), "{s:?}");
        for p in [&a, &b] {
            assert!(pl.waiting.take_decided(&p.uid).is_some_and(|s| s.is_success()), "{} allowed", p.name);
        }
        // Not a gang member, or a group that is not a gang: no wait.
        assert!(pl.permit(&mut state, &pod(json!({"metadata": {"name": "lone"}})), "n1").0.is_success());
        let missing = plugin(&[]).permit(&mut state, &a, "n1").0;
        assert_eq!(missing.code(), Code::Error);
        assert_eq!(missing.message(), "failed to get podGroup ns/g: podgroups.scheduling.k8s.io \"g\" not found");
    }

    #[test]
    fn placement_feasible_says_what_upstream_says() {
        let cases = [
            (3, 0, 2, Code::Unschedulable, "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"),
            (3, 0, 3, Code::Wait, "minCount (3) is not yet satisfied: 0 scheduled, 3 remaining"),
            (3, 2, 0, Code::Unschedulable, "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"),
            (3, 3, 0, Code::Success, ""),
            (1, 1, 5, Code::Success, ""),
        ];
        for (min, scheduled, remaining, code, msg) in cases {
            let s = placement_feasible(min, scheduled, remaining);
            assert_eq!((s.code(), s.message().as_str()), (code, msg), "{min} {scheduled} {remaining}");
        }
    }

    #[test]
    fn queueing_hints_follow_upstream() {
        let pl = plugin(&[]);
        let a = member("a", "g");
        let add = |r| ClusterEvent::new(r, action::ADD);
        let pod_obj = |p: Arc<PodInfo>| EventObject::Pod(p);
        let hint = |e: ClusterEvent, old: Option<EventObject>, new: Option<EventObject>| {
            pl.queueing_hint(&a, &e, old.as_ref(), new.as_ref())
        };
        use QueueingHint::{Queue, QueueSkip};
        assert_eq!(hint(add(EventResource::UnscheduledPod), None, Some(pod_obj(member("b", "g")))), Queue);
        assert_eq!(hint(add(EventResource::AssignedPod), None, Some(pod_obj(member("b", "g")))), Queue);
        assert_eq!(hint(add(EventResource::UnscheduledPod), None, Some(pod_obj(member("x", "h")))), QueueSkip);
        let lone = Arc::new(pod(json!({"metadata": {"name": "lone", "namespace": "ns"}})));
        assert_eq!(hint(add(EventResource::UnscheduledPod), None, Some(pod_obj(lone))), QueueSkip);
        let pg = |name: &str, n: i32| Some(EventObject::PodGroup(pod_group(name, Some(n))));
        assert_eq!(hint(add(EventResource::PodGroup), None, pg("g", 3)), Queue);
        assert_eq!(hint(add(EventResource::PodGroup), None, pg("h", 3)), QueueSkip);
        let update = ClusterEvent::new(EventResource::PodGroup, action::UPDATE);
        assert_eq!(hint(update, pg("g", 3), pg("g", 2)), Queue, "minCount decreased");
        assert_eq!(hint(update, pg("g", 2), pg("g", 3)), QueueSkip, "minCount increased");
        assert_eq!(hint(update, pg("h", 3), pg("h", 2)), QueueSkip, "another group");
    }
}
