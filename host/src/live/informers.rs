//! Watches (reflect) Pods, Nodes and the objects plugins read, and feeds the cache and the queue as upstream's
//! event handlers do: assigned pods go to the cache, pending pods of our profiles to the queue, every change may
//! move unschedulable pods back.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::Live;
use crate::cache::ClusterObjects;
use crate::framework::{action, ClusterEvent, EventResource, PodInfo};

/// Pods and nodes must both be listed before the scheduler is ready.
const SYNCED_ALL: u8 = 0b11;

#[derive(Default)]
struct Objects {
    namespaces: BTreeMap<String, Namespace>,
    pdbs: BTreeMap<String, PodDisruptionBudget>,
    services: BTreeMap<String, Service>,
    replica_sets: BTreeMap<String, ReplicaSet>,
    stateful_sets: BTreeMap<String, StatefulSet>,
    rcs: BTreeMap<String, ReplicationController>,
    pvcs: BTreeMap<String, PersistentVolumeClaim>,
    pvs: BTreeMap<String, PersistentVolume>,
}

impl Objects {
    fn snapshot(&self) -> ClusterObjects {
        ClusterObjects {
            namespaces: self.namespaces.iter().map(|(k, n)| (k.clone(), n.labels().clone())).collect(),
            pdbs: self.pdbs.values().cloned().collect(),
            services: self.services.values().cloned().collect(),
            replica_sets: self.replica_sets.values().cloned().collect(),
            stateful_sets: self.stateful_sets.values().cloned().collect(),
            replication_controllers: self.rcs.values().cloned().collect(),
            pvcs: self.pvcs.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            pvs: self.pvs.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

fn key<K: Resource>(o: &K) -> String {
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// Starts every watch on the current tokio runtime.
pub(crate) fn start(client: Client, live: Arc<Live>, profiles: &[String]) {
    let synced = Arc::new(AtomicU8::new(0));
    let profiles: Vec<String> = profiles.to_vec();
    {
        let (live, synced) = (live.clone(), synced.clone());
        watch(Api::<Pod>::all(client.clone()), move |ev| match ev {
            Event::Apply(p) | Event::InitApply(p) => on_pod(&live, p, false, &profiles),
            Event::Delete(p) => on_pod(&live, p, true, &profiles),
            Event::InitDone => mark(&live, &synced, 0b01),
            Event::Init => {}
        });
    }
    {
        let (live, synced) = (live.clone(), synced.clone());
        watch(Api::<Node>::all(client.clone()), move |ev| match ev {
            Event::Apply(n) | Event::InitApply(n) => on_node(&live, n, false),
            Event::Delete(n) => on_node(&live, n, true),
            Event::InitDone => mark(&live, &synced, 0b10),
            Event::Init => {}
        });
    }
    let objects = Arc::new(Mutex::new(Objects::default()));
    macro_rules! object_watch {
        ($ty:ty, $field:ident, $resource:expr) => {{
            let (live, objects) = (live.clone(), objects.clone());
            watch(Api::<$ty>::all(client.clone()), move |ev| {
                let mut o = objects.lock().expect("objects lock");
                match ev {
                    Event::Apply(x) | Event::InitApply(x) => {
                        o.$field.insert(key(&x), x);
                    }
                    Event::Delete(x) => {
                        o.$field.remove(&key(&x));
                    }
                    Event::Init | Event::InitDone => return,
                }
                let snap = o.snapshot();
                drop(o);
                live.scheduler.cache.lock().expect("cache lock").set_objects(snap);
                let now = live.scheduler.clock.now();
                live.scheduler
                    .queue
                    .lock()
                    .expect("queue lock")
                    .on_event(ClusterEvent::new($resource, action::ALL), now);
            });
        }};
    }
    object_watch!(Namespace, namespaces, EventResource::Other);
    object_watch!(PodDisruptionBudget, pdbs, EventResource::Other);
    object_watch!(Service, services, EventResource::Other);
    object_watch!(ReplicaSet, replica_sets, EventResource::Other);
    object_watch!(StatefulSet, stateful_sets, EventResource::Other);
    object_watch!(ReplicationController, rcs, EventResource::Other);
    object_watch!(PersistentVolumeClaim, pvcs, EventResource::Volume);
    object_watch!(PersistentVolume, pvs, EventResource::Volume);
}

fn mark(live: &Live, synced: &AtomicU8, bit: u8) {
    if synced.fetch_or(bit, Ordering::SeqCst) | bit == SYNCED_ALL && !live.synced.swap(true, Ordering::SeqCst) {
        tracing::info!("caches synced");
    }
}

/// Runs a watcher forever (it retries with backoff on errors), handing every event to `f`.
fn watch<K, F>(api: Api<K>, mut f: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    F: FnMut(Event<K>) + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::default_backoff(watcher::watcher(
            api,
            watcher::Config::default()
        )));
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => f(ev),
                Err(e) => tracing::warn!(kind = %K::kind(&Default::default()), error = %e, "watch error; retrying"),
            }
        }
    });
}

fn on_node(live: &Live, node: Node, deleted: bool) {
    let s = &live.scheduler;
    let name = node.name_any();
    let event = {
        let mut cache = s.cache.lock().expect("cache lock");
        if deleted {
            cache.remove_node(&name);
            ClusterEvent::new(EventResource::Node, action::DELETE)
        } else {
            let existed = cache.node(&name).is_some();
            if let Err(e) = cache.add_node(node) {
                tracing::warn!(node = %name, error = %e, "ignoring node");
                return;
            }
            ClusterEvent::new(EventResource::Node, if existed { action::UPDATE } else { action::ADD })
        }
    };
    let now = s.clock.now();
    s.queue.lock().expect("queue lock").on_event(event, now);
}

fn on_pod(live: &Live, pod: Pod, deleted: bool, profiles: &[String]) {
    let s = &live.scheduler;
    let assigned = pod.spec.as_ref().and_then(|sp| sp.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let terminal = matches!(pod.status.as_ref().and_then(|st| st.phase.as_deref()), Some("Succeeded" | "Failed"));
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let now = s.clock.now();
    if deleted || (assigned && terminal) {
        let removed = s.cache.lock().expect("cache lock").remove_pod(&uid).is_ok();
        let mut q = s.queue.lock().expect("queue lock");
        q.delete(&uid);
        if removed {
            q.on_event(ClusterEvent::new(EventResource::AssignedPod, action::DELETE), now);
        }
        return;
    }
    let info = match PodInfo::new(pod) {
        Ok(i) => Arc::new(i),
        Err(e) => {
            tracing::warn!(uid = %uid, error = %e, "ignoring pod");
            return;
        }
    };
    if assigned {
        let event = {
            let mut cache = s.cache.lock().expect("cache lock");
            let known_bound = cache.contains_pod(&uid) && !cache.is_assumed(&uid);
            let r = if known_bound { cache.update_pod(info.clone()) } else { cache.add_pod(info.clone()) };
            if let Err(e) = r {
                tracing::debug!(pod = %info.key(), error = %e, "cache update");
            }
            ClusterEvent::new(EventResource::AssignedPod, if known_bound { action::UPDATE } else { action::ADD })
        };
        let mut q = s.queue.lock().expect("queue lock");
        q.delete(&uid);
        q.on_event(event, now);
        return;
    }
    if !profiles.iter().any(|p| p == info.scheduler_name()) || info.pod.metadata.deletion_timestamp.is_some() {
        return;
    }
    // Assumed (binding in flight): the informer has not seen the binding yet.
    if s.cache.lock().expect("cache lock").contains_pod(&uid) {
        return;
    }
    s.queue.lock().expect("queue lock").update(info, now);
}
