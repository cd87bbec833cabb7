//! Watches (reflects) Pods, Nodes and the objects plugins read, and reports every change to the scheduler's event
//! handlers, as upstream's informers do. The objects other than pods and nodes are kept in kube-runtime reflector
//! stores, so a change hands the handler shared references to the current objects rather than copies.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::cluster::EventHandler;
use crate::framework::{ClusterObjects, EventResource, PodInfo};

/// Pods and nodes must both be listed before the scheduler is ready.
const SYNCED_ALL: u8 = 0b11;

/// The reflector stores of the objects other than pods and nodes.
#[derive(Clone)]
struct ObjectStores {
    namespaces: Store<Namespace>,
    pdbs: Store<PodDisruptionBudget>,
    services: Store<Service>,
    replica_sets: Store<ReplicaSet>,
    stateful_sets: Store<StatefulSet>,
    rcs: Store<ReplicationController>,
    pvcs: Store<PersistentVolumeClaim>,
    pvs: Store<PersistentVolume>,
    storage_classes: Store<StorageClass>,
    csi_nodes: Store<CSINode>,
    csi_drivers: Store<CSIDriver>,
    csi_storage_capacities: Store<CSIStorageCapacity>,
    resource_claims: Store<ResourceClaim>,
    device_classes: Store<DeviceClass>,
    resource_slices: Store<ResourceSlice>,
}

impl ObjectStores {
    /// The objects as they stand, for the cache.
    fn objects(&self) -> ClusterObjects {
        fn by_key<K: Clone + Resource + 'static>(s: &Store<K>) -> HashMap<String, Arc<K>>
        where
            K::DynamicType: Eq + Hash + Clone,
        {
            s.state().into_iter().map(|o| (key(&*o), o)).collect()
        }
        ClusterObjects {
            namespaces: self.namespaces.state().iter().map(|n| (n.name_any(), n.labels().clone())).collect(),
            pdbs: self.pdbs.state(),
            services: self.services.state(),
            replica_sets: self.replica_sets.state(),
            stateful_sets: self.stateful_sets.state(),
            replication_controllers: self.rcs.state(),
            pvcs: by_key(&self.pvcs),
            pvs: by_key(&self.pvs),
            storage_classes: by_key(&self.storage_classes),
            csi_nodes: by_key(&self.csi_nodes),
            csi_drivers: by_key(&self.csi_drivers),
            csi_storage_capacities: self.csi_storage_capacities.state(),
            resource_claims: by_key(&self.resource_claims),
            // The resource claim controller turns templates into claims; kube-scheduler's role may not read them.
            resource_claim_templates: HashMap::new(),
            device_classes: by_key(&self.device_classes),
            resource_slices: self.resource_slices.state(),
        }
    }
}

fn key<K: Resource>(o: &K) -> String {
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// Starts every watch on the current tokio runtime; `synced` is set once pods and nodes have been listed.
pub fn start(client: Client, handler: Arc<dyn EventHandler>, synced: Arc<AtomicBool>) {
    let listed = Arc::new(AtomicU8::new(0));
    let mark = move |bit: u8| {
        let (listed, synced) = (listed.clone(), synced.clone());
        move || {
            if listed.fetch_or(bit, Ordering::SeqCst) | bit == SYNCED_ALL && !synced.swap(true, Ordering::SeqCst) {
                tracing::info!("caches synced");
            }
        }
    };
    {
        let (h, done) = (handler.clone(), mark(0b01));
        let mut known = Known::default();
        // As kube-scheduler's pod informer: finished pods are not listed or watched at all (one that finishes
        // arrives as a Delete), so a cluster's history of completed Jobs costs neither side anything.
        let config = list_watch_config().fields("status.phase!=Succeeded,status.phase!=Failed");
        watch_with(Api::<Pod>::all(client.clone()), config, move |ev| {
            let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
            match ev {
                Event::Apply(mut p) | Event::InitApply(mut p) => {
                    let id = uid(&p);
                    // Nothing reads them, and every pod's would be kept (kube-scheduler's informer drops them too).
                    p.metadata.managed_fields = None;
                    known.seen(&id);
                    match PodInfo::new(p) {
                        Ok(info) => h.pod_applied(Arc::new(info)),
                        Err(e) => tracing::warn!(uid = %id, error = %e, "ignoring pod"),
                    }
                }
                Event::Delete(p) => {
                    let id = uid(&p);
                    known.gone(&id);
                    h.pod_deleted(&id);
                }
                Event::Init => known.relist(),
                Event::InitDone => {
                    for id in known.listed() {
                        h.pod_deleted(&id);
                    }
                    done();
                }
            }
        });
    }
    {
        let (h, done) = (handler.clone(), mark(0b10));
        let mut known = Known::default();
        watch(Api::<Node>::all(client.clone()), move |ev| match ev {
            Event::Apply(mut n) | Event::InitApply(mut n) => {
                n.metadata.managed_fields = None;
                known.seen(&n.name_any());
                h.node_applied(n);
            }
            Event::Delete(n) => {
                known.gone(&n.name_any());
                h.node_deleted(&n.name_any());
            }
            Event::Init => known.relist(),
            Event::InitDone => {
                for name in known.listed() {
                    h.node_deleted(&name);
                }
                done();
            }
        });
    }
    let (namespaces, namespaces_w) = reflector::store();
    let (pdbs, pdbs_w) = reflector::store();
    let (services, services_w) = reflector::store();
    let (replica_sets, replica_sets_w) = reflector::store();
    let (stateful_sets, stateful_sets_w) = reflector::store();
    let (rcs, rcs_w) = reflector::store();
    let (pvcs, pvcs_w) = reflector::store();
    let (pvs, pvs_w) = reflector::store();
    let (storage_classes, storage_classes_w) = reflector::store();
    let (csi_nodes, csi_nodes_w) = reflector::store();
    let (csi_drivers, csi_drivers_w) = reflector::store();
    let (csi_storage_capacities, csi_storage_capacities_w) = reflector::store();
    let (resource_claims, resource_claims_w) = reflector::store();
    let (device_classes, device_classes_w) = reflector::store();
    let (resource_slices, resource_slices_w) = reflector::store();
    let stores = ObjectStores {
        namespaces,
        pdbs,
        services,
        replica_sets,
        stateful_sets,
        rcs,
        pvcs,
        pvs,
        storage_classes,
        csi_nodes,
        csi_drivers,
        csi_storage_capacities,
        resource_claims,
        device_classes,
        resource_slices,
    };
    let publisher = Arc::new(Publisher::new(stores, handler.clone()));
    macro_rules! object_watch {
        ($ty:ty, $writer:expr, $resource:expr) => {{
            let publisher = publisher.clone();
            reflect(Api::<$ty>::all(client.clone()), $writer, move |ev| match ev {
                // The store has applied the event; during the initial list it swaps in the whole list at InitDone.
                Event::Apply(_) | Event::Delete(_) | Event::InitDone => publisher.changed($resource),
                Event::Init | Event::InitApply(_) => {}
            });
        }};
    }
    object_watch!(Namespace, namespaces_w, EventResource::Other);
    object_watch!(PodDisruptionBudget, pdbs_w, EventResource::Other);
    object_watch!(Service, services_w, EventResource::Other);
    object_watch!(ReplicaSet, replica_sets_w, EventResource::Other);
    object_watch!(StatefulSet, stateful_sets_w, EventResource::Other);
    object_watch!(ReplicationController, rcs_w, EventResource::Other);
    object_watch!(PersistentVolumeClaim, pvcs_w, EventResource::Volume);
    object_watch!(PersistentVolume, pvs_w, EventResource::Volume);
    object_watch!(StorageClass, storage_classes_w, EventResource::StorageClass);
    object_watch!(CSINode, csi_nodes_w, EventResource::CSINode);
    object_watch!(CSIDriver, csi_drivers_w, EventResource::CSIDriver);
    object_watch!(CSIStorageCapacity, csi_storage_capacities_w, EventResource::CSIStorageCapacity);
    object_watch!(ResourceClaim, resource_claims_w, EventResource::ResourceClaim);
    object_watch!(DeviceClass, device_classes_w, EventResource::DeviceClass);
    object_watch!(ResourceSlice, resource_slices_w, EventResource::ResourceSlice);
}

/// Hands the event handler the objects as the stores hold them after a change of one kind.
struct Publisher {
    stores: ObjectStores,
    handler: Arc<dyn EventHandler>,
}

impl Publisher {
    fn new(stores: ObjectStores, handler: Arc<dyn EventHandler>) -> Publisher {
        Publisher { stores, handler }
    }

    /// A store of `resource` objects has applied a change.
    fn changed(&self, resource: EventResource) {
        self.handler.objects_changed(self.stores.objects(), resource);
    }
}

/// The keys (pod UIDs, node names) a watch has handed the scheduler, so that a relist can tell it which objects
/// went away while it was not watching: after a watch expires (410 Gone) or the API server restarts, the watcher
/// lists again and sends only what exists (no Delete for what was deleted in between), as upstream's reflector
/// `Replace` does.
#[derive(Default)]
struct Known {
    current: std::collections::HashSet<String>,
    /// While a (re)list runs: the keys it has sent so far.
    listing: Option<std::collections::HashSet<String>>,
}

impl Known {
    fn seen(&mut self, key: &str) {
        if let Some(l) = &mut self.listing {
            l.insert(key.to_string());
        }
        self.current.insert(key.to_string());
    }
    fn gone(&mut self, key: &str) {
        self.current.remove(key);
    }
    /// A list begins.
    fn relist(&mut self) {
        self.listing = Some(Default::default());
    }
    /// The list is complete: the keys known before it that it did not send, which are gone.
    fn listed(&mut self) -> Vec<String> {
        let listed = self.listing.take().unwrap_or_default();
        let gone = self.current.difference(&listed).cloned().collect();
        self.current = listed;
        gone
    }
}

/// Runs a watcher forever (it retries with backoff on errors), handing every event to `f`.
fn watch<K, F>(api: Api<K>, f: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    F: FnMut(Event<K>) + Send + 'static,
{
    watch_with(api, list_watch_config(), f)
}

/// `watch` with its own list and watch parameters.
fn watch_with<K, F>(api: Api<K>, config: watcher::Config, f: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    F: FnMut(Event<K>) + Send + 'static,
{
    drive(watcher::watcher(api, config).default_backoff(), f);
}

/// Like `watch`, keeping `writer`'s store up to date before `f` sees each event.
fn reflect<K, F>(api: Api<K>, writer: reflector::store::Writer<K>, f: F)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    F: FnMut(Event<K>) + Send + 'static,
{
    drive(watcher::watcher(api, list_watch_config()).default_backoff().reflect(writer), f);
}

/// How every informer lists and watches, as client-go's reflector does for kube-scheduler: the list asks for
/// `resourceVersion=0`, which the API server answers from its watch cache, whole, in one response. kube-rs's default
/// (no resourceVersion, pages of 500) is a quorum read that goes through to etcd page by page; with 5,000 nodes and a
/// 5,000-pod backlog that start-up list was a large share of the API server CPU we cost beyond kube-scheduler.
/// Unlike the reflector, a relist after a watch expired (410) also asks for `resourceVersion=0`: with one API server
/// its cache is then newer than anything the watch had seen; behind several, it may answer from a cache that lags.
fn list_watch_config() -> watcher::Config {
    let mut config = watcher::Config::default().any_semantic();
    config.page_size = None;
    config
}

/// Polls a watch stream on the runtime for as long as the process runs.
fn drive<K, S, F>(stream: S, mut f: F)
where
    K: Resource + 'static,
    K::DynamicType: Default,
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    F: FnMut(Event<K>) + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => f(ev),
                Err(e) => tracing::warn!(kind = %K::kind(&Default::default()), error = %e, "watch error; retrying"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::Known;

    #[test]
    fn a_relist_reports_what_went_away_while_nobody_watched() {
        let mut k = Known::default();
        k.relist();
        for key in ["a", "b", "c"] {
            k.seen(key);
        }
        assert!(k.listed().is_empty(), "the first list removes nothing");
        k.gone("c");
        k.seen("d");
        // The watch expired; meanwhile b was deleted and e created.
        k.relist();
        k.seen("a");
        k.seen("d");
        k.seen("e");
        assert_eq!(k.listed(), vec!["b".to_string()]);
        k.relist();
        for key in ["a", "d", "e"] {
            k.seen(key);
        }
        assert!(k.listed().is_empty());
    }
}
