//! The scheduler cache: nodes, the pods on them (bound and assumed), and the snapshot each cycle works on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use thiserror::Error;

use crate::framework::types::{ImageStateSummary, NodeInfo, PodInfo};
use crate::framework::{ClusterObjects, Snapshot};

/// Node generations are unique across caches in the process, so a Wasm guest's node table never mistakes one
/// node state for another.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A cache operation on an object that is not in the state the operation needs.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CacheError {
    /// The pod is already in the cache (bound or assumed).
    #[error("pod {0} is already in the cache")]
    PodExists(String),
    /// The pod is not in the cache.
    #[error("pod {0} is not in the cache")]
    PodMissing(String),
    /// A node object could not be read.
    #[error("node {name}: {reason}")]
    BadNode {
        /// Node name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// One image across the cluster (upstream cache's `imageStates` entry): the size comes from the first node that
/// reported the name and stays while any node still has it, whatever size later nodes report (multi-arch images
/// are one name with a different size per architecture).
#[derive(Debug, Clone, Copy)]
struct ImageState {
    size: i64,
    nodes: usize,
}

/// Upstream's `nodeTree`: node names grouped by zone, zones in the order their first node arrived. Its `list`
/// takes the first node of every zone, then the second of every zone, and so on; the snapshot lists nodes in that
/// order, which decides where a node search starts finding nodes and, since v1.36, which of equal scores wins.
#[derive(Debug, Default)]
struct NodeTree {
    zones: Vec<(String, Vec<String>)>,
}

impl NodeTree {
    /// Upstream's `GetZoneKey`: the (beta or GA) region and zone labels, empty when neither is set.
    fn zone_key(node: &Node) -> String {
        let labels = node.metadata.labels.as_ref();
        let label = |beta: &str, ga: &str| {
            labels.and_then(|l| l.get(beta).or_else(|| l.get(ga))).map(String::as_str).unwrap_or("")
        };
        let zone = label("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone");
        let region = label("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region");
        if region.is_empty() && zone.is_empty() {
            String::new()
        } else {
            format!("{region}:\0:{zone}")
        }
    }

    fn add(&mut self, zone: String, name: String) {
        match self.zones.iter_mut().find(|(z, _)| *z == zone) {
            Some((_, names)) => names.push(name),
            None => self.zones.push((zone, vec![name])),
        }
    }

    fn remove(&mut self, zone: &str, name: &str) {
        if let Some(zi) = self.zones.iter().position(|(z, _)| z == zone) {
            let names = &mut self.zones[zi].1;
            names.retain(|n| n != name);
            if names.is_empty() {
                self.zones.remove(zi);
            }
        }
    }

    /// The names round-robin across zones, as upstream's `list`.
    fn list(&self) -> impl Iterator<Item = &String> {
        let depth = self.zones.iter().map(|(_, n)| n.len()).max().unwrap_or(0);
        (0..depth).flat_map(move |i| self.zones.iter().filter_map(move |(_, names)| names.get(i)))
    }
}

#[derive(Debug, Clone)]
struct PodState {
    pod: Arc<PodInfo>,
    node: String,
    assumed: bool,
}

/// Nodes and pods as the scheduler believes them to be, assumed pods included.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: BTreeMap<String, Arc<NodeInfo>>,
    /// The nodes' order in snapshots.
    tree: NodeTree,
    pods: HashMap<String, PodState>,
    /// Pods bound to nodes the cache has not seen yet, attached when the node arrives.
    orphans: HashMap<String, Vec<Arc<PodInfo>>>,
    /// Image name -> its cluster-wide state; every node's `image_states` is filled from it with the next snapshot.
    images: HashMap<String, ImageState>,
    dirty: HashSet<String>,
    structure_changed: bool,
    objects: Arc<ClusterObjects>,
    generation: u64,
    next_id: u32,
    free_ids: Vec<u32>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Cache {
        Cache { structure_changed: true, ..Default::default() }
    }

    /// Adds or replaces a node.
    pub fn add_node(&mut self, node: Node) -> Result<(), CacheError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let bad = |reason| CacheError::BadNode { name: name.clone(), reason };
        let node = Arc::new(node);
        let zone = NodeTree::zone_key(&node);
        match self.nodes.get_mut(&name) {
            Some(ni) => {
                let ni = Arc::make_mut(ni);
                let old_zone = NodeTree::zone_key(&ni.node);
                if old_zone != zone {
                    // As upstream's updateNode: a node that changed zone moves to the end of its new zone.
                    self.tree.remove(&old_zone, &name);
                    self.tree.add(zone, name.clone());
                }
                let old_images: Vec<String> = ni.image_states.keys().cloned().collect();
                ni.set_node(node).map_err(bad)?;
                // As upstream's UpdateNode: the node's old images leave first, so an image only this node has is
                // sized again from its new report, while one that other nodes share keeps its size.
                Self::forget_images(&mut self.images, old_images.iter());
                Self::record_images(&mut self.images, ni);
                // Image sizes and spread counts are cluster-wide: recompute them with the next snapshot.
                self.structure_changed = true;
            }
            None => {
                let mut ni = NodeInfo::new(node).map_err(bad)?;
                Self::record_images(&mut self.images, &ni);
                ni.id = self.free_ids.pop().unwrap_or_else(|| {
                    self.next_id += 1;
                    self.next_id - 1
                });
                for p in self.orphans.remove(&name).into_iter().flatten() {
                    ni.add_pod(p);
                }
                self.nodes.insert(name.clone(), Arc::new(ni));
                self.tree.add(zone, name.clone());
                self.structure_changed = true;
            }
        }
        self.dirty.insert(name.clone());
        self.stamp(&name, true);
        Ok(())
    }

    /// Removes a node; its pods stay known (they are deleted through their own events).
    pub fn remove_node(&mut self, name: &str) {
        if let Some(ni) = self.nodes.remove(name) {
            self.tree.remove(&NodeTree::zone_key(&ni.node), name);
            Self::forget_images(&mut self.images, ni.image_states.keys());
            self.free_ids.push(ni.id);
            self.orphans.insert(name.to_string(), ni.pods.clone());
            self.structure_changed = true;
            self.generation += 1;
        }
    }

    /// Every node, in upstream's node-tree order (zones round-robin).
    fn nodes_in_tree_order(&self) -> Vec<Arc<NodeInfo>> {
        self.tree.list().filter_map(|n| self.nodes.get(n).cloned()).collect()
    }

    /// A node's info.
    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.nodes.get(name)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of pods, assumed ones included (upstream's `scheduler_cache_size{type="pods"}`).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Number of assumed pods, not yet confirmed bound (`scheduler_cache_size{type="assumed_pods"}`).
    pub fn assumed_pod_count(&self) -> usize {
        self.pods.values().filter(|p| p.assumed).count()
    }

    /// Adds a bound pod, or confirms an assumed one (the informer saw the binding).
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let Some(node) = pod.node_name().map(str::to_string) else {
            return Err(CacheError::PodMissing(pod.key()));
        };
        if let Some(st) = self.pods.get(&pod.uid) {
            if st.assumed && st.node == node {
                // Replace the assumed copy with the real object.
                let uid = pod.uid.clone();
                self.detach(&uid);
                self.attach(pod, node, false);
                return Ok(());
            }
            if !st.assumed {
                return Err(CacheError::PodExists(pod.key()));
            }
            // Assumed elsewhere, bound here: the API server is right.
            let uid = pod.uid.clone();
            self.detach(&uid);
        }
        self.attach(pod, node, false);
        Ok(())
    }

    /// Updates a bound pod (labels or requests changed); answers the object it replaced.
    pub fn update_pod(&mut self, pod: Arc<PodInfo>) -> Result<Arc<PodInfo>, CacheError> {
        let old = self.remove_pod(&pod.uid)?;
        self.add_pod(pod).map(|()| old)
    }

    /// Removes a pod (deleted, or evicted by preemption).
    pub fn remove_pod(&mut self, uid: &str) -> Result<Arc<PodInfo>, CacheError> {
        self.detach(uid).ok_or_else(|| CacheError::PodMissing(uid.to_string()))
    }

    /// Places a pod on a node before binding finishes, so the next cycles see its requests.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        if self.pods.contains_key(&pod.uid) {
            return Err(CacheError::PodExists(pod.key()));
        }
        self.attach(pod, node.to_string(), true);
        Ok(())
    }

    /// Undoes `assume_pod` after a failed binding cycle.
    pub fn forget_pod(&mut self, uid: &str) -> Result<(), CacheError> {
        match self.pods.get(uid) {
            Some(st) if st.assumed => {
                self.detach(uid);
                Ok(())
            }
            _ => Err(CacheError::PodMissing(uid.to_string())),
        }
    }

    /// Marks an assumed pod as bound (the binder succeeded; the informer will confirm).
    pub fn finish_binding(&mut self, uid: &str) {
        if let Some(st) = self.pods.get_mut(uid) {
            st.assumed = false;
        }
    }

    /// True when the pod is in the cache, bound or assumed.
    pub fn contains_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// True when the pod is assumed (not yet confirmed bound).
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|s| s.assumed)
    }

    /// Every pod in the cache with its node.
    pub fn pods(&self) -> impl Iterator<Item = (&Arc<PodInfo>, &str)> {
        self.pods.values().map(|s| (&s.pod, s.node.as_str()))
    }

    /// Replaces the objects other than pods and nodes.
    pub fn set_objects(&mut self, objects: Arc<ClusterObjects>) {
        self.objects = objects;
    }

    /// The objects other than pods and nodes.
    pub fn objects(&self) -> &ClusterObjects {
        &self.objects
    }

    /// Bumped on every change (the queue uses it to tell whether a failed cycle saw the latest cluster).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn attach(&mut self, pod: Arc<PodInfo>, node: String, assumed: bool) {
        self.pods.insert(pod.uid.clone(), PodState { pod: pod.clone(), node: node.clone(), assumed });
        match self.nodes.get_mut(&node) {
            Some(ni) => Arc::make_mut(ni).add_pod(pod),
            None => self.orphans.entry(node.clone()).or_default().push(pod),
        }
        self.stamp(&node, false);
        self.dirty.insert(node);
    }

    /// Gives a changed node a fresh, process-wide generation (and bumps the cache's own); the node object's own
    /// generation too when `object_changed`.
    fn stamp(&mut self, node: &str, object_changed: bool) {
        self.generation += 1;
        let g = next_generation();
        if let Some(ni) = self.nodes.get_mut(node) {
            let ni = Arc::make_mut(ni);
            ni.generation = g;
            if object_changed {
                ni.node_generation = g;
            }
        }
    }

    fn detach(&mut self, uid: &str) -> Option<Arc<PodInfo>> {
        let st = self.pods.remove(uid)?;
        match self.nodes.get_mut(&st.node) {
            Some(ni) => {
                Arc::make_mut(ni).remove_pod(uid);
            }
            None => {
                if let Some(v) = self.orphans.get_mut(&st.node) {
                    v.retain(|p| p.uid != uid);
                }
            }
        }
        self.stamp(&st.node, false);
        self.dirty.insert(st.node);
        Some(st.pod)
    }

    /// Brings a snapshot up to date: copies only the nodes changed since the last call (an `Arc` each), or
    /// rebuilds the node list when nodes came or went.
    pub fn update_snapshot(&mut self, snapshot: &mut Snapshot) {
        if !Arc::ptr_eq(&snapshot.objects, &self.objects) {
            snapshot.objects = self.objects.clone();
        }
        if self.structure_changed {
            self.refresh_image_states();
            snapshot.replace_nodes(self.nodes_in_tree_order());
            self.structure_changed = false;
            self.dirty.clear();
            return;
        }
        let changed: Vec<Arc<NodeInfo>> = self.dirty.drain().filter_map(|n| self.nodes.get(&n).cloned()).collect();
        if !snapshot.update_nodes(changed) {
            snapshot.replace_nodes(self.nodes_in_tree_order());
        }
    }

    /// Counts a node's images into the cluster-wide states; a name no node had before takes this node's size.
    fn record_images(images: &mut HashMap<String, ImageState>, ni: &NodeInfo) {
        for (name, own) in &ni.image_states {
            images.entry(name.clone()).and_modify(|s| s.nodes += 1).or_insert(ImageState { size: own.size, nodes: 1 });
        }
    }

    /// Takes a node's images out of the cluster-wide states; an image no node has any more is dropped, so the
    /// next node to report it sets its size afresh.
    fn forget_images<'a>(images: &mut HashMap<String, ImageState>, names: impl Iterator<Item = &'a String>) {
        for name in names {
            if let Some(s) = images.get_mut(name) {
                s.nodes -= 1;
                if s.nodes == 0 {
                    images.remove(name);
                }
            }
        }
    }

    /// Gives every node's images the cluster-wide size and spread (upstream's `ImageStateSummary.Snapshot`),
    /// copying only the nodes whose view changed.
    fn refresh_image_states(&mut self) {
        let images = &self.images;
        let cluster_wide = |k: &String| {
            let s = images[k];
            ImageStateSummary { size: s.size, num_nodes: s.nodes }
        };
        for ni in self.nodes.values_mut() {
            if ni.image_states.iter().any(|(k, s)| *s != cluster_wide(k)) {
                let ni = Arc::make_mut(ni);
                for (k, s) in ni.image_states.iter_mut() {
                    *s = cluster_wide(k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "images": [{"names": ["img:1"], "sizeBytes": 1000}]}}),
        )
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>) -> Arc<PodInfo> {
        let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some(n) = node {
            v["spec"]["nodeName"] = json!(n);
        }
        Arc::new(PodInfo::new(serde_json::from_value(v).unwrap()).unwrap())
    }

    fn zoned(name: &str, zone: &str) -> Node {
        let mut n = node(name);
        n.metadata.labels = Some([("topology.kubernetes.io/zone".to_string(), zone.to_string())].into());
        n
    }

    /// Upstream's node tree: zones in the order their first node came, the nodes round-robin across them; a node
    /// that changes zone goes to the end of its new zone, an emptied zone leaves the round.
    #[test]
    fn snapshots_list_nodes_round_robin_across_zones_as_upstream_s_node_tree() {
        let order = |c: &mut Cache| {
            let mut s = Snapshot::default();
            c.update_snapshot(&mut s);
            s.nodes().iter().map(|n| n.name.clone()).collect::<Vec<_>>().join(" ")
        };
        let mut c = Cache::new();
        for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("c1", "c"), ("b2", "b")] {
            c.add_node(zoned(n, z)).unwrap();
        }
        c.add_node(node("none")).unwrap();
        assert_eq!(order(&mut c), "a1 b1 c1 none a2 b2 a3");
        c.add_node(zoned("a1", "c")).unwrap();
        assert_eq!(order(&mut c), "a2 b1 c1 none a3 b2 a1");
        c.remove_node("none");
        c.remove_node("b1");
        c.remove_node("b2");
        assert_eq!(order(&mut c), "a2 c1 a3 a1");
    }

    #[test]
    fn snapshot_copies_only_changed_nodes_and_shares_the_rest() {
        let mut c = Cache::new();
        c.add_node(node("a")).unwrap();
        c.add_node(node("b")).unwrap();
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s);
        assert_eq!(s.len(), 2);
        assert_eq!(s.get("a").unwrap().image_states["img:1"].num_nodes, 2);
        let b_before = s.get("b").unwrap().clone();
        c.assume_pod(pod("p", None), "a").unwrap();
        c.update_snapshot(&mut s);
        assert_eq!(s.get("a").unwrap().requested.milli_cpu, 1000);
        assert!(Arc::ptr_eq(&b_before, s.get("b").unwrap()), "untouched node is shared, not copied");
    }

    fn node_with_image(name: &str, image: &str, size: i64) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "images": [{"names": [image], "sizeBytes": size}]}}))
        .unwrap()
    }

    /// The image as the scheduler's snapshot shows it on `node`, after bringing the snapshot up to date.
    fn image_in_snapshot(c: &mut Cache, s: &mut Snapshot, node: &str, image: &str) -> ImageStateSummary {
        c.update_snapshot(s);
        s.get(node).unwrap().image_states[image].clone()
    }

    /// Multi-arch images: one name, a different size on each architecture's nodes. Upstream keeps one state per
    /// name whose size is the first reporting node's, for every node, until no node has the name any more.
    #[test]
    fn same_image_name_with_different_sizes_takes_the_first_reported_size() {
        let (mut c, mut s) = (Cache::new(), Snapshot::default());
        // Added out of name order: "first" means first reported, not first by name.
        c.add_node(node_with_image("b-arm64", "app:1", 300)).unwrap();
        c.add_node(node_with_image("a-amd64", "app:1", 900)).unwrap();
        let want = ImageStateSummary { size: 300, num_nodes: 2 };
        assert_eq!(image_in_snapshot(&mut c, &mut s, "a-amd64", "app:1"), want);
        assert_eq!(image_in_snapshot(&mut c, &mut s, "b-arm64", "app:1"), want);

        // The first node leaving does not resize the image while another node has it.
        c.remove_node("b-arm64");
        assert_eq!(
            image_in_snapshot(&mut c, &mut s, "a-amd64", "app:1"),
            ImageStateSummary { size: 300, num_nodes: 1 }
        );
        // A node updating its report keeps the shared size too.
        c.add_node(node_with_image("c-amd64", "app:1", 500)).unwrap();
        c.add_node(node_with_image("c-amd64", "app:1", 700)).unwrap();
        assert_eq!(
            image_in_snapshot(&mut c, &mut s, "c-amd64", "app:1"),
            ImageStateSummary { size: 300, num_nodes: 2 }
        );

        // Once no node has the name, the next one to report it sets the size.
        c.remove_node("a-amd64");
        c.remove_node("c-amd64");
        c.add_node(node_with_image("d-arm64", "app:1", 400)).unwrap();
        assert_eq!(
            image_in_snapshot(&mut c, &mut s, "d-arm64", "app:1"),
            ImageStateSummary { size: 400, num_nodes: 1 }
        );
        // The only holder updating its report is sized afresh (its old report left first).
        c.add_node(node_with_image("d-arm64", "app:1", 450)).unwrap();
        assert_eq!(
            image_in_snapshot(&mut c, &mut s, "d-arm64", "app:1"),
            ImageStateSummary { size: 450, num_nodes: 1 }
        );
    }

    /// A node listing one name under two images counts once, with the first listing's size.
    #[test]
    fn image_name_listed_twice_on_a_node_counts_once_with_the_first_size() {
        let (mut c, mut s) = (Cache::new(), Snapshot::default());
        let n: Node = serde_json::from_value(json!({"metadata": {"name": "a"}, "status": {"images": [
            {"names": ["app:1"], "sizeBytes": 100}, {"names": ["app:1", "app:latest"], "sizeBytes": 200}]}}))
        .unwrap();
        c.add_node(n).unwrap();
        assert_eq!(image_in_snapshot(&mut c, &mut s, "a", "app:1"), ImageStateSummary { size: 100, num_nodes: 1 });
        assert_eq!(image_in_snapshot(&mut c, &mut s, "a", "app:latest"), ImageStateSummary { size: 200, num_nodes: 1 });
    }

    #[test]
    fn assume_forget_and_confirm() {
        let mut c = Cache::new();
        c.add_node(node("a")).unwrap();
        c.assume_pod(pod("p", None), "a").unwrap();
        assert!(c.is_assumed("p"));
        assert_eq!(c.assume_pod(pod("p", None), "a"), Err(CacheError::PodExists("default/p".into())));
        c.forget_pod("p").unwrap();
        assert!(!c.contains_pod("p"));
        c.assume_pod(pod("p", None), "a").unwrap();
        c.add_pod(pod("p", Some("a"))).unwrap();
        assert!(!c.is_assumed("p"));
        assert_eq!(c.node("a").unwrap().pods.len(), 1, "confirming does not double count");
        assert!(c.forget_pod("p").is_err(), "a bound pod cannot be forgotten");
    }

    #[test]
    fn pods_on_unknown_nodes_attach_when_the_node_arrives() {
        let mut c = Cache::new();
        c.add_pod(pod("p", Some("late"))).unwrap();
        c.add_node(node("late")).unwrap();
        assert_eq!(c.node("late").unwrap().requested.milli_cpu, 1000);
        c.remove_pod("p").unwrap();
        assert_eq!(c.node("late").unwrap().requested.milli_cpu, 0);
    }
}
