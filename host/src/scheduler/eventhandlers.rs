//! The one place where a cluster change becomes cache and queue updates (upstream's `eventhandlers.go`). The live
//! informers and the simulator's in-memory cluster both call these handlers.
//!
//! Lock order: the cache is updated first and its lock released, then the queue is told; no handler holds both.
//! A pod's requests must be in (or out of) the cache before pods it may help are requeued, or a pod moved by the
//! event could be scheduled against the old cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::Scheduler;
use crate::cluster::EventHandler;
use crate::framework::{
    action, object_changes, pod_update_actions, ClusterEvent, ClusterObjects, EventObject, EventResource, ObjectMap,
    PodInfo,
};

impl EventHandler for Scheduler {
    fn pod_applied(&self, pod: Arc<PodInfo>) {
        let assigned = pod.node_name().is_some_and(|n| !n.is_empty());
        let terminal =
            matches!(pod.pod.status.as_ref().and_then(|st| st.phase.as_deref()), Some("Succeeded" | "Failed"));
        if assigned && terminal {
            // A finished pod frees its node as a deleted one does.
            self.pod_deleted(&pod.uid);
            return;
        }
        if assigned {
            self.assigned_pod_applied(pod);
        } else {
            self.pending_pod_applied(pod);
        }
    }

    fn pod_deleted(&self, uid: &str) {
        let removed = self.cache.lock().expect("cache lock").remove_pod(uid).ok();
        self.profiles.pod_view().removed(uid);
        // Before the queue hears of it: a preemptor this deletion requeues must find its preemption over.
        self.profiles.preempting().pod_deleted(uid);
        let now = self.clock.now();
        let mut q = self.queue.lock().expect("queue lock");
        q.delete(uid);
        if let Some(pod) = removed {
            let old = EventObject::Pod(pod);
            q.on_event_with(ClusterEvent::new(EventResource::AssignedPod, action::DELETE), Some(&old), None, now);
        }
    }

    fn node_applied(&self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (event, old, new) = {
            let mut cache = self.cache.lock().expect("cache lock");
            let old = cache.node(&name).cloned();
            if let Err(e) = cache.add_node(node) {
                tracing::warn!(node = %name, error = %e, "ignoring node");
                return;
            }
            let new = cache.node(&name).cloned();
            let actions = match (&old, &new) {
                (Some(old), Some(new)) => node_update_actions(&old.node, &new.node),
                (Some(_), None) => Some(action::UPDATE),
                (None, _) => Some(action::ADD),
            };
            // A heartbeat changes nothing the scheduler reads: upstream tells the queue nothing.
            let Some(actions) = actions else { return };
            (ClusterEvent::new(EventResource::Node, actions), old, new)
        };
        let (old, new) = (old.map(EventObject::Node), new.map(EventObject::Node));
        let now = self.clock.now();
        self.queue.lock().expect("queue lock").on_event_with(event, old.as_ref(), new.as_ref(), now);
    }

    fn node_deleted(&self, name: &str) {
        let old = {
            let mut cache = self.cache.lock().expect("cache lock");
            let old = cache.node(name).cloned();
            cache.remove_node(name);
            old.map(EventObject::Node)
        };
        let now = self.clock.now();
        let event = ClusterEvent::new(EventResource::Node, action::DELETE);
        self.queue.lock().expect("queue lock").on_event_with(event, old.as_ref(), None, now);
    }

    fn objects_changed(&self, objects: ClusterObjects, resource: EventResource) {
        let objects = Arc::new(objects);
        let before = self.profiles.listers().objects();
        self.cache.lock().expect("cache lock").set_objects(objects.clone());
        self.profiles.listers().set(objects.clone());
        let now = self.clock.now();
        if resource == EventResource::PodGroup {
            // Upstream's addPodGroup/updatePodGroup/deletePodGroup: one event per group that changed, with the
            // objects, so that GangScheduling's hints see which group and how its minCount moved.
            let mut q = self.queue.lock().expect("queue lock");
            for (event, old, new) in pod_group_changes(&before.pod_groups, &objects.pod_groups) {
                q.on_event_with(event, old.as_ref(), new.as_ref(), now);
            }
            return;
        }
        if resource == EventResource::ResourceClaim {
            // Upstream's claim events carry the claim: DynamicResources' hint moves only the pods that wait for
            // that claim (or could use what a deallocation freed), not every pod with a claim per change.
            if let Some(changes) = claim_changes(&before.resource_claims, &objects.resource_claims) {
                let mut q = self.queue.lock().expect("queue lock");
                for (event, old, new) in changes {
                    q.on_event_with(event, old.as_ref(), new.as_ref(), now);
                }
                return;
            }
        }
        self.queue.lock().expect("queue lock").on_event(ClusterEvent::new(resource, action::ALL), now);
    }
}

/// What an update of a node changed, as the actions plugins register (upstream's `nodeSchedulingPropertiesChange`):
/// its labels, its taints or `unschedulable`, its allocatable, and as `UPDATE_OTHER` its conditions' statuses, its
/// annotations or its declared features; `None` when none of them changed (a heartbeat's timestamps, images).
fn node_update_actions(old: &Node, new: &Node) -> Option<u8> {
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone());
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    // Upstream compares each condition's status by type, not its timestamps or message.
    let conditions = |n: &Node| -> BTreeMap<String, String> {
        let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.into_iter().flatten().map(|c| (c.type_.clone(), c.status.clone())).collect()
    };
    let features = |n: &Node| n.status.as_ref().and_then(|s| s.declared_features.clone());
    let mut actions = 0;
    if old.metadata.labels != new.metadata.labels {
        actions |= action::UPDATE_LABEL;
    }
    if unschedulable(old) != unschedulable(new) || taints(old) != taints(new) {
        actions |= action::UPDATE_TAINT;
    }
    if allocatable(old) != allocatable(new) {
        actions |= action::UPDATE_RESOURCES;
    }
    if conditions(old) != conditions(new)
        || old.metadata.annotations != new.metadata.annotations
        || features(old) != features(new)
    {
        actions |= action::UPDATE_OTHER;
    }
    (actions != 0).then_some(actions)
}

/// The most claim changes told one by one; a larger change (a relist) is one event without objects, which every
/// hint answers as "may help".
const MAX_CLAIM_EVENTS: usize = 64;

/// The ResourceClaims added, changed and deleted between two versions of the claims' map, as events with their
/// objects before and after; `None` when there are more than [`MAX_CLAIM_EVENTS`]. The maps share structure, so
/// this costs what changed.
fn claim_changes(before: &ObjectMap<ResourceClaim>, after: &ObjectMap<ResourceClaim>) -> Option<Vec<ClaimChange>> {
    let obj = |c: Option<&Arc<ResourceClaim>>| c.map(|c| EventObject::ResourceClaim(Arc::clone(c)));
    let mut out = Vec::new();
    for (_, old, new) in object_changes(before, after) {
        if out.len() == MAX_CLAIM_EVENTS {
            return None;
        }
        let action = match (old, new) {
            (None, _) => action::ADD,
            (_, None) => action::DELETE,
            _ => action::UPDATE,
        };
        out.push((ClusterEvent::new(EventResource::ResourceClaim, action), obj(old), obj(new)));
    }
    Some(out)
}

/// A claim event with the claim before and after.
type ClaimChange = (ClusterEvent, Option<EventObject>, Option<EventObject>);

type PodGroups = std::collections::HashMap<String, Arc<k8s_openapi::api::scheduling::v1beta1::PodGroup>>;

/// The PodGroups added, changed and deleted between two listings, in key order, as
/// events with their objects before and after.
fn pod_group_changes(
    before: &PodGroups,
    after: &PodGroups,
) -> Vec<(ClusterEvent, Option<EventObject>, Option<EventObject>)> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    let obj = |pg: &Arc<_>| Some(EventObject::PodGroup(Arc::clone(pg)));
    keys.into_iter()
        .filter_map(|k| match (before.get(k), after.get(k)) {
            (None, Some(new)) => Some((ClusterEvent::new(EventResource::PodGroup, action::ADD), None, obj(new))),
            (Some(old), None) => Some((ClusterEvent::new(EventResource::PodGroup, action::DELETE), obj(old), None)),
            (Some(old), Some(new)) if !Arc::ptr_eq(old, new) && old != new => {
                Some((ClusterEvent::new(EventResource::PodGroup, action::UPDATE), obj(old), obj(new)))
            }
            _ => None,
        })
        .collect()
}

impl Scheduler {
    /// A bound pod: into the cache (confirming our own assumed copy once the binding is seen), out of the queue.
    fn assigned_pod_applied(&self, pod: Arc<PodInfo>) {
        let (event, old) = {
            let mut cache = self.cache.lock().expect("cache lock");
            let known_bound = cache.contains_pod(&pod.uid) && !cache.is_assumed(&pod.uid);
            let r = if known_bound {
                cache.update_pod(pod.clone()).map(Some)
            } else {
                cache.add_pod(pod.clone()).map(|()| None)
            };
            let old = r.unwrap_or_else(|e| {
                tracing::debug!(pod = %pod.key(), error = %e, "cache update");
                None
            });
            let actions = match &old {
                Some(old) => pod_update_actions(old, &pod),
                None if known_bound => action::UPDATE,
                None => action::ADD,
            };
            (ClusterEvent::new(EventResource::AssignedPod, actions), old.map(EventObject::Pod))
        };
        let now = self.clock.now();
        self.profiles.pod_view().bound(&pod, now);
        let new = EventObject::Pod(pod.clone());
        let mut q = self.queue.lock().expect("queue lock");
        q.delete(&pod.uid);
        q.on_event_with(event, old.as_ref(), Some(&new), now);
    }

    /// A pending pod: queued (or updated in the queue) when one of our profiles schedules it.
    fn pending_pod_applied(&self, pod: Arc<PodInfo>) {
        if self.profiles.get(pod.scheduler_name()).is_none() || pod.pod.metadata.deletion_timestamp.is_some() {
            return;
        }
        // Assumed (binding in flight): the binding has not been seen yet.
        if self.cache.lock().expect("cache lock").contains_pod(&pod.uid) {
            return;
        }
        let now = self.clock.now();
        self.profiles.pod_view().pending(&pod, now);
        self.queue.lock().expect("queue lock").update(pod, now);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use crate::cache::Cache;
    use crate::cluster::memory::{MemoryCluster, Write};
    use crate::cluster::EventHandler;
    use crate::framework::{ClusterObjects, EventResource, PluginContext, PodInfo};
    use crate::queue::{QueueName, SchedulingQueue};
    use crate::scheduler::{build_profiles, NoopObserver, Scheduler, SchedulerOptions, VirtualClock};

    /// The default profile over an in-memory cluster, on a clock the test moves.
    fn scheduler() -> (Arc<MemoryCluster>, Arc<VirtualClock>, Arc<Scheduler>) {
        let cluster = Arc::new(MemoryCluster::default());
        let registry = crate::plugins::in_tree_registry();
        let yaml = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        let cfg = crate::scheduler::parse_config("test", yaml, &|n| registry.names().contains(&n)).unwrap();
        let profiles = Arc::new(build_profiles(&cfg, &registry, &PluginContext::new(cluster.clone())).unwrap());
        let queue =
            SchedulingQueue::new(profiles.clone(), &profiles.names(), cfg.pod_initial_backoff, cfg.pod_max_backoff);
        let clock = Arc::new(VirtualClock::default());
        let s = Scheduler::new(
            profiles,
            queue,
            Cache::new(),
            cluster.clone(),
            clock.clone(),
            Arc::new(NoopObserver),
            SchedulerOptions::default(),
        );
        let s = Arc::new(s);
        let handler: Arc<dyn EventHandler> = s.clone();
        cluster.connect(Arc::downgrade(&handler));
        (cluster, clock, s)
    }

    /// The event (`why`) moved the one waiting pod; once its backoff is over it is tried again and `pod` is bound
    /// to n1.
    fn retried_and_bound(cluster: &MemoryCluster, clock: &VirtualClock, s: &Arc<Scheduler>, why: &str, pod: &str) {
        let mut q = s.queue.lock().unwrap();
        assert_eq!(q.pending().get(&QueueName::Unschedulable), None, "moved by {why}");
        let backoff_ends = q.next_backoff_expiry().unwrap_or_default();
        clock.advance_to(backoff_ends);
        q.flush_backoff_completed(backoff_ends);
        drop(q);
        clock.advance(Duration::from_millis(1));
        assert!(s.schedule_one(), "the pod is tried again");
        let binds: Vec<Write> = cluster.writes().into_iter().filter(|w| matches!(w, Write::Bind { .. })).collect();
        assert_eq!(binds, [Write::Bind { pod: pod.into(), node: "n1".into() }]);
    }

    /// Upstream's path for a pod whose claim the informers have not delivered yet: VolumeRestrictions finds no
    /// claim at PreFilter (UnschedulableAndUnresolvable), the pod waits for an event, and the claim's arrival —
    /// reported as the informers report a store's change, the kind and no object — moves it back.
    #[test]
    fn a_pod_that_arrives_before_its_claim_is_retried_when_the_claim_arrives() {
        let (cluster, clock, s) = scheduler();
        let node = json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
        cluster.apply_node(serde_json::from_value(node).unwrap());
        let pod = json!({"metadata": {"name": "db", "namespace": "ns", "uid": "db-uid"}, "spec": {
            "containers": [{"name": "c"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
        cluster.apply_pod(Arc::new(PodInfo::new(serde_json::from_value(pod).unwrap()).unwrap()));

        assert!(s.schedule_one(), "the pod is tried");
        let pending = s.queue.lock().unwrap().pending();
        assert_eq!(pending.get(&QueueName::Unschedulable), Some(&1), "waits for an event: {pending:?}");
        let rejected = s.queue.lock().unwrap().unschedulable_plugins();
        assert_eq!(rejected.keys().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["VolumeRestrictions"]);

        let volume = json!({"metadata": {"name": "pv-data"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
            "claimRef": {"namespace": "ns", "name": "data"}}});
        let claim = json!({"metadata": {"name": "data", "namespace": "ns",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-data"}, "status": {"phase": "Bound"}});
        let mut objects = ClusterObjects::default();
        objects.pvs.insert("pv-data".into(), Arc::new(serde_json::from_value(volume).unwrap()));
        objects.pvcs.insert("ns/data".into(), Arc::new(serde_json::from_value(claim).unwrap()));
        s.objects_changed(objects, EventResource::Volume);

        retried_and_bound(&cluster, &clock, &s, "the claim's arrival", "ns/db");
    }

    /// In-place resize (v1.33+, GA v1.35): a pod on the node shrinks its spec from 3 CPUs to 1, but holds 3 until
    /// the kubelet allocates and actuates the change; only the status saying so frees the room, and it moves the
    /// pod that NodeResourcesFit rejected.
    #[test]
    fn an_assigned_pods_finished_shrink_frees_room_and_requeues() {
        let (cluster, clock, s) = scheduler();
        let node = json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
        cluster.apply_node(serde_json::from_value(node).unwrap());
        let running_after = |held: &str, restarts: i32| {
            let p = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "web-uid"}, "spec": {"nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                    "ready": true, "restartCount": restarts, "allocatedResources": {"cpu": held},
                    "resources": {"requests": {"cpu": held}}}]}});
            Arc::new(PodInfo::new(serde_json::from_value(p).unwrap()).unwrap())
        };
        let running = |held: &str| running_after(held, 0);
        cluster.apply_pod(running("3"));
        let pending = json!({"metadata": {"name": "batch", "namespace": "ns", "uid": "batch-uid"}, "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}});
        cluster.apply_pod(Arc::new(PodInfo::new(serde_json::from_value(pending).unwrap()).unwrap()));

        assert!(s.schedule_one(), "the pod is tried");
        let rejected = s.queue.lock().unwrap().unschedulable_plugins();
        assert_eq!(
            rejected.keys().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["NodeResourcesFit"],
            "3 of 4 CPUs held"
        );

        // A status write that frees nothing (upstream's general Update, which NodeResourcesFit did not register)
        // leaves the pod waiting.
        cluster.apply_pod(running_after("3", 1));
        let pending = s.queue.lock().unwrap().pending();
        assert_eq!(pending.get(&QueueName::Unschedulable), Some(&1), "a restart count frees nothing: {pending:?}");

        cluster.apply_pod(running("1"));
        retried_and_bound(&cluster, &clock, &s, "the resize", "ns/batch");
    }

    /// Upstream tells the queue of a node's update only by what the scheduler reads of it: a heartbeat is no event.
    #[test]
    fn a_nodes_update_is_told_by_what_changed_and_a_heartbeat_not_at_all() {
        use crate::framework::action;
        use k8s_openapi::api::core::v1::Node;
        let node = |f: &dyn Fn(&mut serde_json::Value)| -> Node {
            let mut v = json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {},
                "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2026-11-29T10:00:00Z"}]}});
            f(&mut v);
            serde_json::from_value(v).unwrap()
        };
        let base = node(&|_| {});
        let actions = |f: &dyn Fn(&mut serde_json::Value)| super::node_update_actions(&base, &node(f));
        let heartbeat = |v: &mut serde_json::Value| {
            v["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2026-11-29T10:05:00Z")
        };
        assert_eq!(actions(&heartbeat), None);
        assert_eq!(actions(&|v| v["status"]["allocatable"]["cpu"] = json!("8")), Some(action::UPDATE_RESOURCES));
        assert_eq!(actions(&|v| v["metadata"]["labels"]["zone"] = json!("b")), Some(action::UPDATE_LABEL));
        assert_eq!(actions(&|v| v["spec"]["unschedulable"] = json!(true)), Some(action::UPDATE_TAINT));
        assert_eq!(actions(&|v| v["status"]["conditions"][0]["status"] = json!("False")), Some(action::UPDATE_OTHER));
    }

    /// A claim's change reaches the queue as one event with the claim before and after; a relist-sized change as
    /// one event without objects.
    #[test]
    fn claim_changes_are_told_one_by_one_up_to_a_bound() {
        use crate::framework::{action, EventObject, ObjectMap};
        use k8s_openapi::api::resource::v1::ResourceClaim;
        let claim = |name: &str, rv: &str| {
            let c: ResourceClaim = serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {}}),
            )
            .unwrap();
            (format!("ns/{name}"), Arc::new(c))
        };
        let before: ObjectMap<ResourceClaim> = (0..200).map(|i| claim(&format!("c{i:03}"), "1")).collect();
        let mut after = before.clone();
        let (k, v) = claim("c100", "2");
        after.insert(k, v);
        after.remove("ns/c007");
        let (k, v) = claim("new", "1");
        after.insert(k, v);
        let changes = super::claim_changes(&before, &after).unwrap();
        let told: Vec<(u8, Option<String>, Option<String>)> = changes
            .iter()
            .map(|(e, old, new)| {
                let rv = |o: &Option<EventObject>| match o {
                    Some(EventObject::ResourceClaim(c)) => Some(format!(
                        "{}@{}",
                        c.metadata.name.clone().unwrap(),
                        c.metadata.resource_version.clone().unwrap()
                    )),
                    _ => None,
                };
                (e.actions, rv(old), rv(new))
            })
            .collect();
        assert_eq!(
            told,
            [
                (action::DELETE, Some("c007@1".into()), None),
                (action::UPDATE, Some("c100@1".into()), Some("c100@2".into())),
                (action::ADD, None, Some("new@1".into())),
            ]
        );
        let relisted: ObjectMap<ResourceClaim> = (0..200).map(|i| claim(&format!("c{i:03}"), "3")).collect();
        assert!(super::claim_changes(&before, &relisted).is_none());
    }
}
