//! `Snapshot`: the immutable view of the cluster one scheduling cycle works on. Updated from the cache by
//! generation, so a cycle copies only the nodes that changed, never the whole cluster.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};

use super::labels::Labels;
use super::types::{NodeInfo, PodInfo};

/// Objects of one kind by `namespace/name` (or name), in a persistent map: a clone shares the map, and a version
/// with one object changed shares all but O(log n) of it with the one before. Used for the kinds a cluster has by
/// the thousand and changes one at a time (claims, volumes and their claims, CSINodes).
pub type ObjectMap<T> = imbl::OrdMap<String, Arc<T>>;

/// The objects added, changed and removed from `before` to `after`, in key order, as (key, before, after): what
/// keeps state across versions (DynamicResources' kept claims, claim events) reads instead of every object. It
/// walks only what the two versions do not share (imbl 7.0.2's `diff`; 6.1's dropped changes next to shared nodes).
pub fn object_changes<'a, T: PartialEq>(
    before: &'a ObjectMap<T>,
    after: &'a ObjectMap<T>,
) -> impl Iterator<Item = (&'a String, Option<&'a Arc<T>>, Option<&'a Arc<T>>)> + 'a {
    before.diff(after).map(|change| match change {
        imbl::ordmap::DiffItem::Add(key, new) => (key, None, Some(new)),
        imbl::ordmap::DiffItem::Remove(key, old) => (key, Some(old), None),
        imbl::ordmap::DiffItem::Update { old: (key, old), new: (_, new) } => (key, Some(old), Some(new)),
    })
}

/// Cluster objects other than pods and nodes that plugins read. Replaced as a whole when one changes; the objects
/// are shared, so a new set costs a reference per object of the small kinds, and for the large kinds
/// ([`ObjectMap`]) what the changed object touches.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// Namespace name → labels (for namespace selectors in affinity terms).
    pub namespaces: HashMap<String, Labels>,
    /// PodDisruptionBudgets (preemption respects them).
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// Services (default topology spreading selects pods by them).
    pub services: Vec<Arc<Service>>,
    /// ReplicaSets (default topology spreading).
    pub replica_sets: Vec<Arc<ReplicaSet>>,
    /// StatefulSets (default topology spreading).
    pub stateful_sets: Vec<Arc<StatefulSet>>,
    /// ReplicationControllers (default topology spreading).
    pub replication_controllers: Vec<Arc<ReplicationController>>,
    /// PersistentVolumeClaims by `namespace/name`.
    pub pvcs: ObjectMap<PersistentVolumeClaim>,
    /// PersistentVolumes by name.
    pub pvs: ObjectMap<PersistentVolume>,
    /// StorageClasses by name.
    pub storage_classes: HashMap<String, Arc<StorageClass>>,
    /// CSINodes by name (the node's name).
    pub csi_nodes: ObjectMap<CSINode>,
    /// CSIDrivers by name.
    pub csi_drivers: HashMap<String, Arc<CSIDriver>>,
    /// CSIStorageCapacities.
    pub csi_storage_capacities: Vec<Arc<CSIStorageCapacity>>,
    /// ResourceClaims by `namespace/name`.
    pub resource_claims: ObjectMap<ResourceClaim>,
    /// ResourceClaimTemplates by `namespace/name`.
    pub resource_claim_templates: HashMap<String, Arc<ResourceClaimTemplate>>,
    /// DeviceClasses by name.
    pub device_classes: HashMap<String, Arc<DeviceClass>>,
    /// ResourceSlices.
    pub resource_slices: Vec<Arc<ResourceSlice>>,
    /// DeviceTaintRules (taints on the devices they select).
    pub device_taint_rules: Vec<Arc<DeviceTaintRule>>,
    /// Tenant scheduling policies (SchedulingPolicy and ClusterSchedulingPolicy), in name order.
    pub scheduling_policies: Vec<Arc<PolicyObject>>,
    /// PodGroups (scheduling.k8s.io/v1beta1) by `namespace/name`: watched only with the GenericWorkload gate.
    pub pod_groups: HashMap<String, Arc<PodGroup>>,
}

/// A SchedulingPolicy (namespaced) or ClusterSchedulingPolicy as read from the cluster: its identity and its spec,
/// undecoded (the `TenantPolicies` plugin decodes and admits it against its profile's limits).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyObject {
    /// The namespace of a SchedulingPolicy; `None` for a ClusterSchedulingPolicy.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// `metadata.generation`: what status `observedGeneration` reports.
    pub generation: i64,
    /// `spec`, as JSON.
    pub spec: serde_json::Value,
}

impl PolicyObject {
    /// `namespace/name`, or the name of a cluster policy.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The kind, as the API names it.
    pub fn kind(&self) -> &'static str {
        if self.namespace.is_some() {
            "SchedulingPolicy"
        } else {
            "ClusterSchedulingPolicy"
        }
    }
}

/// The nodes and objects one cycle sees.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
    with_affinity: Vec<usize>,
    with_required_anti_affinity: Vec<usize>,
    /// Objects other than pods and nodes.
    pub objects: Arc<ClusterObjects>,
    /// Pods nominated to nodes by preemption, by node name (filters count those of higher or equal priority).
    pub nominated: Arc<HashMap<String, Vec<Arc<PodInfo>>>>,
}

impl Snapshot {
    /// A snapshot of the given nodes (tests and benchmarks; the scheduler updates one from the cache).
    pub fn from_nodes(nodes: Vec<NodeInfo>) -> Snapshot {
        let mut s = Snapshot::default();
        let nodes = nodes
            .into_iter()
            .enumerate()
            .map(|(i, mut n)| {
                n.id = i as u32;
                Arc::new(n)
            })
            .collect();
        s.replace_nodes(nodes);
        s
    }

    /// All nodes, in a stable order.
    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    /// A node by name.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True with no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Nodes that have at least one pod with pod affinity or anti-affinity.
    pub fn have_pods_with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_affinity.iter().map(|&i| &self.nodes[i])
    }

    /// Nodes that have at least one pod with required anti-affinity.
    pub fn have_pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_required_anti_affinity.iter().map(|&i| &self.nodes[i])
    }

    /// Namespace labels, if the namespace is known.
    pub fn namespace_labels(&self, ns: &str) -> Option<&Labels> {
        self.objects.namespaces.get(ns)
    }

    /// Replaces every node (after nodes were added or removed).
    pub(crate) fn replace_nodes(&mut self, nodes: Vec<Arc<NodeInfo>>) {
        self.index = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        self.nodes = nodes;
        self.rebuild_affinity_lists();
    }

    /// Replaces the nodes that changed, in place. Returns false when a name is unknown (the caller rebuilds).
    pub(crate) fn update_nodes(&mut self, changed: Vec<Arc<NodeInfo>>) -> bool {
        for n in changed {
            let Some(&i) = self.index.get(&n.name) else { return false };
            // The lists change only where a node gains or loses its last such pod: kept sorted by index (the
            // order a rebuild gives) by one search each, not a scan of every node per cycle.
            let old = &self.nodes[i];
            set_member(
                &mut self.with_affinity,
                i,
                !old.pods_with_affinity.is_empty(),
                !n.pods_with_affinity.is_empty(),
            );
            set_member(
                &mut self.with_required_anti_affinity,
                i,
                !old.pods_with_required_anti_affinity.is_empty(),
                !n.pods_with_required_anti_affinity.is_empty(),
            );
            self.nodes[i] = n;
        }
        true
    }

    fn rebuild_affinity_lists(&mut self) {
        self.with_affinity = (0..self.nodes.len()).filter(|&i| !self.nodes[i].pods_with_affinity.is_empty()).collect();
        self.with_required_anti_affinity =
            (0..self.nodes.len()).filter(|&i| !self.nodes[i].pods_with_required_anti_affinity.is_empty()).collect();
    }
}

/// Adds `i` to or removes it from the sorted `list` when its membership changes from `was` to `is`.
fn set_member(list: &mut Vec<usize>, i: usize, was: bool, is: bool) {
    if was == is {
        return;
    }
    match (list.binary_search(&i), is) {
        (Err(at), true) => list.insert(at, i),
        (Ok(at), false) => {
            list.remove(at);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testutil::{node, pod};

    /// The lists a snapshot keeps in place are the lists a rebuild gives, as nodes gain and lose pods with
    /// affinity.
    #[test]
    fn affinity_lists_kept_in_place_match_a_rebuild() {
        let anti = serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}});
        let with = |name: &str, affinity: bool| {
            let mut n = node(serde_json::json!({"metadata": {"name": name}}));
            if affinity {
                let p = pod(serde_json::json!({"metadata": {"name": format!("p-{name}"), "namespace": "default"},
                    "spec": {"nodeName": name, "affinity": anti.clone()}}));
                n.add_pod(Arc::new(p));
            }
            Arc::new(n)
        };
        let names: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
        let mut s = Snapshot::default();
        s.replace_nodes(names.iter().enumerate().map(|(i, n)| with(n, i % 2 == 0)).collect());
        for (i, on) in [(1, true), (0, false), (5, true), (3, true), (2, false), (5, false), (1, true)] {
            assert!(s.update_nodes(vec![with(&names[i], on)]));
            let mut rebuilt = s.clone();
            rebuilt.rebuild_affinity_lists();
            assert_eq!(s.with_affinity, rebuilt.with_affinity, "after node {i} set to {on}");
            assert_eq!(s.with_required_anti_affinity, rebuilt.with_required_anti_affinity);
        }
        assert_eq!(s.with_required_anti_affinity, vec![1, 3, 4]);
    }
}
