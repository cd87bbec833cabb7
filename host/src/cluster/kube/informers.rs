//! Watches (reflects) Pods, Nodes and the objects plugins read, and reports every change to the scheduler's event
//! handlers, as upstream's informers do. The objects other than pods and nodes are kept in kube-runtime reflector
//! stores, so a change hands the handler shared references to the current objects rather than copies.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::policies::{policy_object, ClusterSchedulingPolicy, SchedulingPolicy};
use crate::cluster::EventHandler;
use crate::framework::{ClusterObjects, EventResource, ObjectMap, PodInfo, PolicyObject};

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
    /// DeviceTaintRules, watched with the DRADeviceTaintRules gate where the API server serves them.
    device_taint_rules: Option<Store<DeviceTaintRule>>,
    /// Tenant policies, watched when some profile runs TenantPolicies.
    policies: Option<(Store<SchedulingPolicy>, Store<ClusterSchedulingPolicy>)>,
    /// PodGroups, watched with the GenericWorkload gate (the API may not be served without it).
    pod_groups: Option<Store<PodGroup>>,
}

impl ObjectStores {
    /// The objects as they stand, for the cache; the large kinds' maps are `large`'s, brought up to date by the
    /// caller.
    fn objects(&self, large: &LargeMaps) -> ClusterObjects {
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
            pvcs: large.pvcs.clone(),
            pvs: large.pvs.clone(),
            storage_classes: by_key(&self.storage_classes),
            csi_nodes: large.csi_nodes.clone(),
            csi_drivers: by_key(&self.csi_drivers),
            csi_storage_capacities: self.csi_storage_capacities.state(),
            resource_claims: large.resource_claims.clone(),
            // The resource claim controller turns templates into claims; kube-scheduler's role may not read them.
            resource_claim_templates: HashMap::new(),
            device_classes: by_key(&self.device_classes),
            resource_slices: self.resource_slices.state(),
            device_taint_rules: self.device_taint_rules.as_ref().map(Store::state).unwrap_or_default(),
            scheduling_policies: self.policies.as_ref().map(policy_objects).unwrap_or_default(),
            pod_groups: self.pod_groups.as_ref().map(by_key).unwrap_or_default(),
        }
    }
}

/// The kinds a cluster has by the thousand and changes one object at a time: their maps are kept between
/// publications and changed per object, so that a claim's change costs O(log n), not a read of every claim,
/// volume and CSINode (which made each such change cost what the cluster's size does: a workload binding 5,000
/// pods to volumes spent more CPU rebuilding maps than scheduling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Large {
    Pvcs,
    Pvs,
    CsiNodes,
    ResourceClaims,
}

/// The large kinds' maps as last handed over.
#[derive(Default)]
struct LargeMaps {
    pvcs: ObjectMap<PersistentVolumeClaim>,
    pvs: ObjectMap<PersistentVolume>,
    csi_nodes: ObjectMap<CSINode>,
    resource_claims: ObjectMap<ResourceClaim>,
}

impl LargeMaps {
    /// Brings `kind`'s map up to date with its store: the object with `key` only, or (None: the store was listed
    /// anew) the whole map.
    fn refresh(&mut self, stores: &ObjectStores, kind: Large, key: Option<&str>) {
        match kind {
            Large::Pvcs => refresh(&mut self.pvcs, &stores.pvcs, key),
            Large::Pvs => refresh(&mut self.pvs, &stores.pvs, key),
            Large::CsiNodes => refresh(&mut self.csi_nodes, &stores.csi_nodes, key),
            Large::ResourceClaims => refresh(&mut self.resource_claims, &stores.resource_claims, key),
        }
    }

    /// Every map read from its store.
    fn read(stores: &ObjectStores) -> LargeMaps {
        let mut maps = LargeMaps::default();
        for kind in [Large::Pvcs, Large::Pvs, Large::CsiNodes, Large::ResourceClaims] {
            maps.refresh(stores, kind, None);
        }
        maps
    }
}

fn refresh<K>(map: &mut ObjectMap<K>, store: &Store<K>, key: Option<&str>)
where
    K: Clone + Resource + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let Some(key) = key else {
        *map = store.state().into_iter().map(|o| (self::key(&*o), o)).collect();
        return;
    };
    let (namespace, name) = match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    };
    let mut at = ObjectRef::<K>::new(name);
    if let Some(ns) = namespace {
        at = at.within(ns);
    }
    match store.get(&at) {
        Some(o) => {
            map.insert(key.to_string(), o);
        }
        None => {
            map.remove(key);
        }
    }
}

/// Both kinds of tenant policies, in key order.
fn policy_objects(
    (namespaced, cluster): &(Store<SchedulingPolicy>, Store<ClusterSchedulingPolicy>),
) -> Vec<Arc<PolicyObject>> {
    let mut v: Vec<Arc<PolicyObject>> = namespaced
        .state()
        .iter()
        .map(|p| Arc::new(policy_object(&p.metadata, &p.spec)))
        .chain(cluster.state().iter().map(|p| Arc::new(policy_object(&p.metadata, &p.spec))))
        .collect();
    v.sort_by_key(|p| p.key());
    v
}

fn key<K: Resource>(o: &K) -> String {
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// What is watched besides what every profile reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Watched {
    /// Tenant policies (some profile runs TenantPolicies; their CRDs are installed).
    pub policies: bool,
    /// PodGroups (`--feature-gates=GenericWorkload=true`; scheduling.k8s.io/v1beta1 must be served).
    pub pod_groups: bool,
    /// DeviceTaintRules (the DRADeviceTaintRules gate, and resource.k8s.io/v1 serves them: v1.37 on).
    pub device_taint_rules: bool,
}

/// Whether the API server serves kind `K` (its list answers); only a 404 says no, other errors are left to the
/// watch's retries.
pub async fn serves<K>(client: &Client) -> bool
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let listed = Api::<K>::all(client.clone()).list(&kube::api::ListParams::default().limit(1)).await;
    !matches!(listed, Err(kube::Error::Api(e)) if e.code == 404)
}

/// Starts every watch on the current tokio runtime; `synced` is set once every watch has handed over its initial
/// list.
pub fn start(client: Client, handler: Arc<dyn EventHandler>, synced: Arc<AtomicBool>, watched: Watched) {
    let Watched { policies, pod_groups: watch_pod_groups, device_taint_rules: watch_rules } = watched;
    let sync = Arc::new(CacheSync::new(synced));
    {
        let (h, sync, me) = (handler.clone(), sync.clone(), sync.watch());
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
                    sync.listed(me);
                }
            }
        });
    }
    {
        let (h, sync, me) = (handler.clone(), sync.clone(), sync.watch());
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
                sync.listed(me);
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
    let (device_taint_rules, device_taint_rules_w) = reflector::store();
    let (scheduling_policies, scheduling_policies_w) = reflector::store();
    let (cluster_scheduling_policies, cluster_scheduling_policies_w) = reflector::store();
    let (pod_groups, pod_groups_w) = reflector::store();
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
        device_taint_rules: watch_rules.then_some(device_taint_rules),
        policies: policies.then_some((scheduling_policies, cluster_scheduling_policies)),
        pod_groups: watch_pod_groups.then_some(pod_groups),
    };
    let publisher = Arc::new(Publisher::new(stores, handler.clone(), sync.clone()));
    macro_rules! object_watch {
        ($ty:ty, $writer:expr, $resource:expr) => {{
            let (publisher, me) = (publisher.clone(), sync.watch());
            reflect(Api::<$ty>::all(client.clone()), $writer, move |ev| match ev {
                // The store has applied the event; during the initial list it swaps in the whole list at InitDone.
                Event::Apply(_) | Event::Delete(_) => publisher.changed($resource, None),
                Event::InitDone => publisher.changed($resource, Some(me)),
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
    macro_rules! large_watch {
        ($ty:ty, $writer:expr, $resource:expr, $kind:expr) => {{
            let (publisher, me) = (publisher.clone(), sync.watch());
            reflect(Api::<$ty>::all(client.clone()), $writer, move |ev| match ev {
                Event::Apply(o) | Event::Delete(o) => publisher.changed_object($resource, $kind, Some(key(&o)), None),
                Event::InitDone => publisher.changed_object($resource, $kind, None, Some(me)),
                Event::Init | Event::InitApply(_) => {}
            });
        }};
    }
    large_watch!(PersistentVolumeClaim, pvcs_w, EventResource::Volume, Large::Pvcs);
    large_watch!(PersistentVolume, pvs_w, EventResource::Volume, Large::Pvs);
    object_watch!(StorageClass, storage_classes_w, EventResource::StorageClass);
    large_watch!(CSINode, csi_nodes_w, EventResource::CSINode, Large::CsiNodes);
    object_watch!(CSIDriver, csi_drivers_w, EventResource::CSIDriver);
    object_watch!(CSIStorageCapacity, csi_storage_capacities_w, EventResource::CSIStorageCapacity);
    large_watch!(ResourceClaim, resource_claims_w, EventResource::ResourceClaim, Large::ResourceClaims);
    object_watch!(DeviceClass, device_classes_w, EventResource::DeviceClass);
    object_watch!(ResourceSlice, resource_slices_w, EventResource::ResourceSlice);
    // Upstream's slice tracker turns a rule's change into changes of the slices whose devices it taints.
    if watch_rules {
        object_watch!(DeviceTaintRule, device_taint_rules_w, EventResource::ResourceSlice);
    }
    if policies {
        object_watch!(SchedulingPolicy, scheduling_policies_w, EventResource::Other);
        object_watch!(ClusterSchedulingPolicy, cluster_scheduling_policies_w, EventResource::Other);
    }
    if watch_pod_groups {
        object_watch!(PodGroup, pod_groups_w, EventResource::PodGroup);
    }
    // Every watch is registered: none can have completed the sync before the last one was counted.
    sync.seal();
}

/// Hands the event handler the objects as the stores hold them after a change of one kind.
///
/// Every publication reads the stores (the large kinds' maps only where an object changed, [`Large`]), and the
/// watches run on several runtime workers at once: two
/// publications that overlap could reach the handler in the opposite order of their reads, and the later one would
/// put back older objects than the cache already had. A claim that its own watch had just delivered would vanish
/// from the cache again, with no event to come that would bring it back; a pod rejected for want of it would wait
/// for the five-minute flush (the e2e volume scenario's flake). So publications are made one at a time, each
/// reading the stores after the one before it was handed over: a watch whose change arrives while another
/// publishes leaves it to that one, which reads the stores again before it stops. No watch waits for another's
/// publication, and the changes that arrive during one are handed over together, one read per kind.
struct Publisher {
    stores: ObjectStores,
    handler: Arc<dyn EventHandler>,
    sync: Arc<CacheSync>,
    pending: Mutex<Pending>,
}

/// What the publisher has still to hand over.
#[derive(Default)]
struct Pending {
    /// A publication is under way (on some watch's task).
    publishing: bool,
    /// Kinds changed since the stores were last read for them, in the order they changed.
    changed: Vec<EventResource>,
    /// Watches whose initial list is in the stores, to be marked listed once a read that includes it was handed
    /// over.
    listed: Vec<Watch>,
    /// The large kinds' objects changed since their maps were last brought up to date (None: the whole kind).
    touched: Vec<(Large, Option<String>)>,
    /// The large kinds' maps as last handed over (none before the first publication).
    large: Option<LargeMaps>,
}

impl Publisher {
    fn new(stores: ObjectStores, handler: Arc<dyn EventHandler>, sync: Arc<CacheSync>) -> Publisher {
        Publisher { stores, handler, sync, pending: Mutex::default() }
    }

    /// A store of one of the large kinds has applied a change to the object with `key` (None: the end of a list,
    /// the whole kind); then as [`Publisher::changed`].
    fn changed_object(&self, resource: EventResource, kind: Large, key: Option<String>, listed: Option<Watch>) {
        self.pending.lock().expect("publisher lock").touched.push((kind, key));
        self.changed(resource, listed);
    }

    /// A store of `resource` objects has applied a change; `listed` when it was the end of the watch's initial
    /// list.
    fn changed(&self, resource: EventResource, listed: Option<Watch>) {
        {
            let mut p = self.pending.lock().expect("publisher lock");
            if !p.changed.contains(&resource) {
                p.changed.push(resource);
            }
            p.listed.extend(listed);
            if p.publishing {
                return;
            }
            p.publishing = true;
        }
        // A panicking handler must not leave every later change waiting for a publication that has ended.
        let _ends = EndOnUnwind(&self.pending);
        loop {
            let (changed, listed, touched, large) = {
                let mut p = self.pending.lock().expect("publisher lock");
                if p.changed.is_empty() {
                    p.publishing = false;
                    return;
                }
                (
                    std::mem::take(&mut p.changed),
                    std::mem::take(&mut p.listed),
                    std::mem::take(&mut p.touched),
                    p.large.take(),
                )
            };
            // Only this publication touches the kept maps (publications are one at a time).
            let large = match large {
                None => LargeMaps::read(&self.stores),
                Some(mut large) => {
                    for (kind, key) in &touched {
                        large.refresh(&self.stores, *kind, key.as_deref());
                    }
                    large
                }
            };
            for resource in changed {
                self.handler.objects_changed(self.stores.objects(&large), resource);
            }
            self.pending.lock().expect("publisher lock").large = Some(large);
            for watch in listed {
                self.sync.listed(watch);
            }
        }
    }
}

/// Ends the publication when its task unwinds.
struct EndOnUnwind<'a>(&'a Mutex<Pending>);

impl Drop for EndOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut p) = self.0.lock() {
                p.publishing = false;
            }
        }
    }
}

/// One watch, as the sync marks know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watch(u32);

/// Whether every watch has handed the scheduler its initial list. Upstream schedules (and reports ready) only after
/// WaitForCacheSync on every informer and WaitForHandlersSync: pods that are already waiting when the scheduler
/// starts are then first tried against the claims, volumes and classes that existed before it, rather than
/// against stores still being listed.
struct CacheSync {
    state: Mutex<SyncState>,
    synced: Arc<AtomicBool>,
}

#[derive(Default)]
struct SyncState {
    /// Watches registered.
    watches: u32,
    /// Bit `n`: watch `n` has listed.
    listed: u64,
    /// Every watch is registered.
    sealed: bool,
}

impl CacheSync {
    fn new(synced: Arc<AtomicBool>) -> CacheSync {
        CacheSync { state: Mutex::default(), synced }
    }

    /// Registers one more watch to wait for.
    fn watch(&self) -> Watch {
        let mut s = self.state.lock().expect("sync lock");
        assert!(s.watches < u64::BITS, "more watches than sync marks");
        s.watches += 1;
        Watch(s.watches - 1)
    }

    /// Every watch is registered: the scheduler is synced once they have all listed.
    fn seal(&self) {
        let mut s = self.state.lock().expect("sync lock");
        s.sealed = true;
        self.check(&s);
    }

    /// `watch`'s initial list (or a relist) has been handed over.
    fn listed(&self, watch: Watch) {
        let mut s = self.state.lock().expect("sync lock");
        s.listed |= 1 << watch.0;
        self.check(&s);
    }

    fn check(&self, s: &SyncState) {
        if s.sealed && s.listed.count_ones() == s.watches && !self.synced.swap(true, Ordering::SeqCst) {
            tracing::info!(watches = s.watches, "caches synced");
        }
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
    // As kube-scheduler's informers (and ours for pods and nodes): nothing reads the managed fields, and every
    // stored object would keep them (a claim the scheduler wrote carries an entry per writer).
    let stream = watcher::watcher(api, list_watch_config()).default_backoff();
    drive(stream.modify(|o| o.meta_mut().managed_fields = None).reflect(writer), f);
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
    use kube::runtime::reflector::{self, Store};
    use kube::runtime::watcher;

    use super::{key, CacheSync, Known, Large, ObjectStores, Publisher};
    use crate::cluster::EventHandler;
    use crate::framework::{ClusterObjects, EventResource, ObjectMap, PodInfo};

    fn stores_with_claims(pvcs: Store<PersistentVolumeClaim>) -> ObjectStores {
        ObjectStores {
            namespaces: reflector::store().0,
            pdbs: reflector::store().0,
            services: reflector::store().0,
            replica_sets: reflector::store().0,
            stateful_sets: reflector::store().0,
            rcs: reflector::store().0,
            pvcs,
            pvs: reflector::store().0,
            storage_classes: reflector::store().0,
            csi_nodes: reflector::store().0,
            csi_drivers: reflector::store().0,
            csi_storage_capacities: reflector::store().0,
            resource_claims: reflector::store().0,
            device_classes: reflector::store().0,
            resource_slices: reflector::store().0,
            device_taint_rules: None,
            policies: None,
            pod_groups: None,
        }
    }

    /// Records the claims of each set of objects it is handed, as it takes them (as the scheduler's handler puts
    /// them in its cache). Before it takes the first set, `meanwhile` runs: what another watch does on another
    /// worker between this publication's read of the stores and its hand-over.
    #[derive(Default)]
    struct Recorder {
        /// The claims of each set, and whether the scheduler counted as synced when it was handed over.
        claims: Mutex<Vec<(Vec<String>, bool)>>,
        synced: Arc<AtomicBool>,
        meanwhile: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    }

    impl EventHandler for Recorder {
        fn pod_applied(&self, _: Arc<PodInfo>) {}
        fn pod_deleted(&self, _: &str) {}
        fn node_applied(&self, _: Node) {}
        fn node_deleted(&self, _: &str) {}
        fn objects_changed(&self, objects: ClusterObjects, _: EventResource) {
            let meanwhile = self.meanwhile.lock().unwrap().take();
            if let Some(f) = meanwhile {
                f();
            }
            let mut keys: Vec<String> = objects.pvcs.keys().cloned().collect();
            keys.sort();
            self.claims.lock().unwrap().push((keys, self.synced.load(Ordering::SeqCst)));
        }
    }

    /// The e2e volume scenario's flake: the Namespace watch read the stores before the claims' list was in, the
    /// claims' watch published them, and then the Namespace watch's older read reached the cache, which lost the
    /// claims for good (no event was to come). The last set handed over must hold what the stores hold, and the
    /// scheduler counts as synced only once the sets that hold every list have been handed over.
    #[test]
    fn a_publication_read_before_another_is_never_handed_over_after_it() {
        let (pvcs, mut writer) = reflector::store::<PersistentVolumeClaim>();
        let recorder = Arc::new(Recorder::default());
        let sync = Arc::new(CacheSync::new(recorder.synced.clone()));
        let (namespaces, claims) = (sync.watch(), sync.watch());
        sync.seal();
        let publisher = Arc::new(Publisher::new(stores_with_claims(pvcs), recorder.clone(), sync));
        let claim: PersistentVolumeClaim =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "data", "namespace": "ns"}})).unwrap();
        let claims_watch = publisher.clone();
        *recorder.meanwhile.lock().unwrap() = Some(Box::new(move || {
            writer.apply_watcher_event(&watcher::Event::Apply(claim));
            claims_watch.changed_object(EventResource::Volume, Large::Pvcs, Some("ns/data".into()), Some(claims));
        }));
        publisher.changed(EventResource::Other, Some(namespaces));
        let handed = recorder.claims.lock().unwrap().clone();
        assert_eq!(handed.last(), Some(&(vec!["ns/data".to_string()], false)), "handed over, in order: {handed:?}");
        assert!(handed.iter().all(|(_, synced)| !synced), "synced before the last set was handed over: {handed:?}");
        assert!(recorder.synced.load(Ordering::SeqCst), "synced once it was");
    }

    /// The large kinds' maps are changed per object between publications: each set handed over holds what the
    /// store holds (an object added, changed, deleted, the kind listed anew), and shares the untouched objects with
    /// the set before.
    #[test]
    fn kept_maps_follow_the_store_object_by_object() {
        let (pvcs, mut writer) = reflector::store::<PersistentVolumeClaim>();
        let recorder = Arc::new(Recorder::default());
        let sync = Arc::new(CacheSync::new(recorder.synced.clone()));
        let watch = sync.watch();
        sync.seal();
        let publisher = Publisher::new(stores_with_claims(pvcs), recorder.clone(), sync);
        let claim = |name: &str, volume: &str| -> PersistentVolumeClaim {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "ns"},
                "spec": {"volumeName": volume}}))
            .unwrap()
        };
        let apply = |writer: &mut reflector::store::Writer<PersistentVolumeClaim>, c: PersistentVolumeClaim| {
            writer.apply_watcher_event(&watcher::Event::Apply(c.clone()));
            publisher.changed_object(EventResource::Volume, Large::Pvcs, Some(key(&c)), None);
        };
        let handed = || recorder.claims.lock().unwrap().last().unwrap().0.clone();
        publisher.changed_object(EventResource::Volume, Large::Pvcs, None, Some(watch));
        assert!(handed().is_empty());
        apply(&mut writer, claim("a", "v1"));
        apply(&mut writer, claim("b", "v2"));
        assert_eq!(handed(), vec!["ns/a", "ns/b"]);
        let before = publisher.pending.lock().unwrap().large.as_ref().unwrap().pvcs.clone();
        apply(&mut writer, claim("a", "v3"));
        let after = publisher.pending.lock().unwrap().large.as_ref().unwrap().pvcs.clone();
        let volume =
            |m: &ObjectMap<PersistentVolumeClaim>, k: &str| m.get(k).and_then(|c| c.spec.as_ref()?.volume_name.clone());
        assert_eq!(volume(&before, "ns/a").as_deref(), Some("v1"), "the set handed over before is unchanged");
        assert_eq!(volume(&after, "ns/a").as_deref(), Some("v3"), "the changed claim is the store's");
        assert!(Arc::ptr_eq(&before["ns/b"], &after["ns/b"]), "an untouched claim is shared");
        let b = claim("b", "v2");
        writer.apply_watcher_event(&watcher::Event::Delete(b.clone()));
        publisher.changed_object(EventResource::Volume, Large::Pvcs, Some(key(&b)), None);
        assert_eq!(handed(), vec!["ns/a"], "a deleted claim is gone");
        // A relist swaps in the whole list: the kind is read whole.
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(claim("c", "v4")));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        publisher.changed_object(EventResource::Volume, Large::Pvcs, None, None);
        assert_eq!(handed(), vec!["ns/c"]);
    }

    /// Upstream's WaitForCacheSync covers every informer: the claims', volumes' and classes' too, not only the
    /// pods' and nodes'.
    #[test]
    fn synced_once_every_watch_has_listed_and_not_before_all_are_counted() {
        let synced = Arc::new(AtomicBool::new(false));
        let sync = CacheSync::new(synced.clone());
        let (pods, nodes, claims) = (sync.watch(), sync.watch(), sync.watch());
        sync.listed(pods);
        sync.listed(nodes);
        sync.listed(pods);
        assert!(!synced.load(Ordering::SeqCst), "the claims are not listed yet");
        sync.listed(claims);
        assert!(!synced.load(Ordering::SeqCst), "more watches may be counted still");
        sync.seal();
        assert!(synced.load(Ordering::SeqCst));
    }

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
