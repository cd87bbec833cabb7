//! The one place where a cluster change becomes cache and queue updates (upstream's `eventhandlers.go`). The live
//! informers and the simulator's in-memory cluster both call these handlers.
//!
//! Lock order: the cache is updated first and its lock released, then the queue is told; no handler holds both.
//! A pod's requests must be in (or out of) the cache before pods it may help are requeued, or a pod moved by the
//! event could be scheduled against the old cache.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::Scheduler;
use crate::cluster::EventHandler;
use crate::framework::{action, ClusterEvent, ClusterObjects, EventObject, EventResource, PodInfo};

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
            let actions = if old.is_some() { action::UPDATE } else { action::ADD };
            (ClusterEvent::new(EventResource::Node, actions), old, cache.node(&name).cloned())
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
        self.cache.lock().expect("cache lock").set_objects(objects.clone());
        self.profiles.listers().set(objects);
        let now = self.clock.now();
        self.queue.lock().expect("queue lock").on_event(ClusterEvent::new(resource, action::ALL), now);
    }
}

impl Scheduler {
    /// A bound pod: into the cache (confirming our own assumed copy once the binding is seen), out of the queue.
    fn assigned_pod_applied(&self, pod: Arc<PodInfo>) {
        let event = {
            let mut cache = self.cache.lock().expect("cache lock");
            let known_bound = cache.contains_pod(&pod.uid) && !cache.is_assumed(&pod.uid);
            let r = if known_bound { cache.update_pod(pod.clone()) } else { cache.add_pod(pod.clone()) };
            if let Err(e) = r {
                tracing::debug!(pod = %pod.key(), error = %e, "cache update");
            }
            ClusterEvent::new(EventResource::AssignedPod, if known_bound { action::UPDATE } else { action::ADD })
        };
        let now = self.clock.now();
        self.profiles.pod_view().bound(&pod, now);
        let new = EventObject::Pod(pod.clone());
        let mut q = self.queue.lock().expect("queue lock");
        q.delete(&pod.uid);
        q.on_event_with(event, None, Some(&new), now);
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
