//! The guest-side pod view: every pod the scheduler knows (pending pods of its profiles, assumed and bound pods),
//! kept in step by the host through `pods.apply`, the way the node table follows `nodes.apply`. It is the guest's
//! stand-in for the informer caches (pod lister, `SharedLister`) upstream plugins read.
//!
//! Plugins read it with [`crate::pods`]. Queries borrow: nothing is copied, and the common ones go through an
//! index (by namespace always; by label value for the keys the plugin names in [`crate::Plugin::INDEXED_LABELS`]).

use std::cell::{Ref, RefCell};
use std::collections::HashMap;

use crate::types::{KnownPod, PodChange, PodState};

/// Positions of pods in [`PodView`]'s storage.
type Slots = Vec<u32>;

/// The pods the scheduler knows, by UID, with indexes. Read it through [`crate::pods`].
#[derive(Debug, Default)]
pub struct PodView {
    /// Pods by storage slot; `None` when the slot is free.
    slots: Vec<Option<KnownPod>>,
    /// Free slots, reused before the vector grows.
    free: Vec<u32>,
    /// UID → slot.
    by_uid: HashMap<String, u32>,
    /// Namespace → slots, in no order.
    by_namespace: HashMap<String, Slots>,
    /// The label keys indexed in `by_label`.
    indexed: Vec<String>,
    /// Label key → value → slots, for the keys in `indexed`.
    by_label: HashMap<String, HashMap<String, Slots>>,
}

/// Removes `slot` from an index entry, dropping the entry when it empties.
fn unindex(map: &mut HashMap<String, Slots>, key: &str, slot: u32) {
    if let Some(v) = map.get_mut(key) {
        if let Some(at) = v.iter().position(|&s| s == slot) {
            v.swap_remove(at);
        }
        if v.is_empty() {
            map.remove(key);
        }
    }
}

impl PodView {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one change from the host.
    pub fn apply(&mut self, change: PodChange) {
        match change {
            PodChange::Upsert(pod) => self.upsert(pod),
            PodChange::Remove(uid) => {
                self.remove(&uid);
            }
            PodChange::Reset => self.clear(),
        }
    }

    /// Adds the pod, or replaces the one with its UID.
    pub fn upsert(&mut self, pod: KnownPod) {
        let slot = match self.by_uid.get(pod.pod.uid.as_str()) {
            // Most changes are a state change (pending, assumed, bound) of a pod whose namespace and indexed labels
            // stay: its index entries stay too, so no index list is searched for it.
            Some(&slot) if self.slots[slot as usize].as_ref().is_some_and(|old| self.same_index_keys(old, &pod)) => {
                self.slots[slot as usize] = Some(pod);
                return;
            }
            Some(&slot) => {
                self.unindex(slot);
                slot
            }
            None => {
                let slot = self.free.pop().unwrap_or_else(|| {
                    self.slots.push(None);
                    (self.slots.len() - 1) as u32
                });
                self.by_uid.insert(pod.pod.uid.clone(), slot);
                slot
            }
        };
        self.slots[slot as usize] = Some(pod);
        self.index(slot);
    }

    /// Forgets the pod with this UID, returning it. Forgetting an unknown UID does nothing.
    pub fn remove(&mut self, uid: &str) -> Option<KnownPod> {
        let slot = self.by_uid.remove(uid)?;
        self.unindex(slot);
        self.free.push(slot);
        self.slots[slot as usize].take()
    }

    /// Forgets every pod (the indexed label keys stay).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.by_uid.clear();
        self.by_namespace.clear();
        self.by_label.values_mut().for_each(HashMap::clear);
    }

    /// Indexes the values of these label keys (and no others), so [`PodView::with_label`] on them reads an index
    /// instead of every pod. Does nothing when the keys are already the indexed ones.
    pub fn index_labels(&mut self, keys: &[&str]) {
        if self.indexed.iter().map(String::as_str).eq(keys.iter().copied()) {
            return;
        }
        self.indexed = keys.iter().map(|k| k.to_string()).collect();
        self.by_label = self.indexed.iter().map(|k| (k.clone(), HashMap::new())).collect();
        for slot in 0..self.slots.len() as u32 {
            self.index_labels_of(slot);
        }
    }

    fn index(&mut self, slot: u32) {
        let Some(pod) = &self.slots[slot as usize] else { return };
        self.by_namespace.entry(pod.pod.namespace.clone()).or_default().push(slot);
        self.index_labels_of(slot);
    }

    fn index_labels_of(&mut self, slot: u32) {
        let Some(pod) = &self.slots[slot as usize] else { return };
        for key in &self.indexed {
            if let (Some(value), Some(values)) = (pod.pod.label(key), self.by_label.get_mut(key)) {
                values.entry(value.to_string()).or_default().push(slot);
            }
        }
    }

    /// True when the two pods sit under the same index entries (namespace and indexed label values).
    fn same_index_keys(&self, a: &KnownPod, b: &KnownPod) -> bool {
        a.pod.namespace == b.pod.namespace && self.indexed.iter().all(|k| a.pod.label(k) == b.pod.label(k))
    }

    fn unindex(&mut self, slot: u32) {
        let Some(pod) = &self.slots[slot as usize] else { return };
        unindex(&mut self.by_namespace, &pod.pod.namespace, slot);
        for key in &self.indexed {
            if let (Some(value), Some(values)) = (pod.pod.label(key), self.by_label.get_mut(key)) {
                unindex(values, value, slot);
            }
        }
    }

    /// Number of pods.
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// True when the view holds no pod.
    pub fn is_empty(&self) -> bool {
        self.by_uid.is_empty()
    }

    /// The pod with this UID.
    pub fn get(&self, uid: &str) -> Option<&KnownPod> {
        self.slots[*self.by_uid.get(uid)? as usize].as_ref()
    }

    /// Every pod, in no particular order.
    pub fn iter(&self) -> Pods<'_> {
        Pods { view: self, source: Source::All(self.slots.iter()), filter: Filter::default() }
    }

    /// The pods of `namespace` (an index lookup).
    pub fn in_namespace<'a>(&'a self, namespace: &'a str) -> Pods<'a> {
        self.over_slots(self.by_namespace.get(namespace)).in_namespace(namespace)
    }

    /// The pods whose label `key` has `value`: an index lookup when `key` is indexed, else a scan.
    pub fn with_label<'a>(&'a self, key: &'a str, value: &'a str) -> Pods<'a> {
        match self.by_label.get(key) {
            Some(values) => self.over_slots(values.get(value)),
            None => self.iter().with_label(key, value),
        }
    }

    /// The pods assumed or bound on the node named `node` (a scan).
    pub fn on_node<'a>(&'a self, node: &'a str) -> Pods<'a> {
        self.iter().on_node(node)
    }

    /// The pods in `state` (a scan).
    pub fn in_state(&self, state: PodState) -> Pods<'_> {
        self.iter().in_state(state)
    }

    fn over_slots<'a>(&'a self, slots: Option<&'a Slots>) -> Pods<'a> {
        let slots = slots.map_or(&[][..], Vec::as_slice);
        Pods { view: self, source: Source::Slots(slots.iter()), filter: Filter::default() }
    }
}

/// What a [`Pods`] iterator walks: all storage, or the slots of an index entry.
#[derive(Debug, Clone)]
enum Source<'a> {
    All(std::slice::Iter<'a, Option<KnownPod>>),
    Slots(std::slice::Iter<'a, u32>),
}

/// The conditions a [`Pods`] iterator checks on each pod its source yields.
#[derive(Debug, Clone, Copy, Default)]
struct Filter<'a> {
    namespace: Option<&'a str>,
    label: Option<(&'a str, &'a str)>,
    node: Option<&'a str>,
    state: Option<PodState>,
}

impl Filter<'_> {
    fn accepts(&self, p: &KnownPod) -> bool {
        self.namespace.is_none_or(|ns| p.pod.namespace == ns)
            && self.label.is_none_or(|(k, v)| p.pod.label(k) == Some(v))
            && self.node.is_none_or(|n| p.pod.node_name.as_deref() == Some(n))
            && self.state.is_none_or(|s| p.state == s)
    }
}

/// Pods of the view matching a query, borrowed. Narrow it further with the same methods as [`PodView`]'s
/// (`pods().with_label(k, v).in_namespace(ns).in_state(PodState::Bound)`): the first call picks the index, the
/// others filter what it yields.
#[derive(Debug, Clone)]
pub struct Pods<'a> {
    view: &'a PodView,
    source: Source<'a>,
    filter: Filter<'a>,
}

impl<'a> Pods<'a> {
    /// Only the pods of `namespace`.
    pub fn in_namespace(mut self, namespace: &'a str) -> Self {
        self.filter.namespace = Some(namespace);
        self
    }

    /// Only the pods whose label `key` has `value`.
    pub fn with_label(mut self, key: &'a str, value: &'a str) -> Self {
        self.filter.label = Some((key, value));
        self
    }

    /// Only the pods assumed or bound on the node named `node`.
    pub fn on_node(mut self, node: &'a str) -> Self {
        self.filter.node = Some(node);
        self
    }

    /// Only the pods in `state`.
    pub fn in_state(mut self, state: PodState) -> Self {
        self.filter.state = Some(state);
        self
    }

    /// Only the pods assumed or bound (on a node).
    pub fn placed(self) -> impl Iterator<Item = &'a KnownPod> {
        self.filter(|p| p.is_placed())
    }
}

impl<'a> Iterator for Pods<'a> {
    type Item = &'a KnownPod;

    fn next(&mut self) -> Option<&'a KnownPod> {
        loop {
            let pod = match &mut self.source {
                Source::All(it) => it.next()?.as_ref(),
                Source::Slots(it) => self.view.slots[*it.next()? as usize].as_ref(),
            };
            match pod {
                Some(p) if self.filter.accepts(p) => return Some(p),
                _ => continue,
            }
        }
    }
}

thread_local! {
    /// The view (a component instance is single-threaded; "thread-local" is just "global" there). Leaked once per
    /// thread so [`pods`] can hand out a `Ref<'static, _>` instead of taking a closure.
    static VIEW: &'static RefCell<PodView> = Box::leak(Box::new(RefCell::new(PodView::new())));
}

/// The pod view, for reading during a call. The host applies changes only between calls, so holding it for a call
/// is safe; do not keep it across calls (a test that changes the view while holding it panics).
pub fn pods() -> Ref<'static, PodView> {
    VIEW.with(|v| v.borrow())
}

/// Runs `f` with the view for changing it; `None` (and nothing runs) when it is being read.
pub(crate) fn with_view_mut<R>(f: impl FnOnce(&mut PodView) -> R) -> Option<R> {
    VIEW.with(|v| v.try_borrow_mut().ok().map(|mut v| f(&mut v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Pod;

    fn pod(ns: &str, name: &str, group: Option<&str>) -> Pod {
        let p = Pod::new(ns, name);
        match group {
            Some(g) => p.with_label("group", g),
            None => p,
        }
    }

    fn names<'a>(it: impl Iterator<Item = &'a KnownPod>) -> Vec<String> {
        let mut v: Vec<String> = it.map(|p| p.pod.key()).collect();
        v.sort();
        v
    }

    fn sample(indexed: bool) -> PodView {
        let mut v = PodView::new();
        if indexed {
            v.index_labels(&["group"]);
        }
        v.upsert(KnownPod::pending(pod("a", "p1", Some("g")), 5));
        v.upsert(KnownPod::assumed(pod("a", "p2", Some("g")), "n1", 3));
        v.upsert(KnownPod::bound(pod("b", "p3", Some("g")), "n1", 9));
        v.upsert(KnownPod::bound(pod("a", "p4", None), "n2", 1));
        v
    }

    #[test]
    fn queries_with_and_without_a_label_index_agree() {
        for indexed in [false, true] {
            let v = sample(indexed);
            assert_eq!(v.len(), 4);
            assert_eq!(names(v.iter()), ["a/p1", "a/p2", "a/p4", "b/p3"]);
            assert_eq!(names(v.in_namespace("a")), ["a/p1", "a/p2", "a/p4"]);
            assert_eq!(names(v.in_namespace("zz")), Vec::<String>::new());
            assert_eq!(names(v.with_label("group", "g")), ["a/p1", "a/p2", "b/p3"]);
            assert_eq!(names(v.with_label("group", "g").in_namespace("a")), ["a/p1", "a/p2"]);
            assert_eq!(names(v.with_label("group", "g").in_namespace("a").placed()), ["a/p2"]);
            assert_eq!(names(v.on_node("n1")), ["a/p2", "b/p3"]);
            assert_eq!(names(v.in_state(PodState::Bound)), ["a/p4", "b/p3"]);
            assert_eq!(v.get("a/p2").map(|p| p.first_seen_ns), Some(3));
        }
    }

    #[test]
    fn upsert_replaces_and_reindexes_remove_and_reset_forget() {
        let mut v = sample(true);
        // p1 leaves group g for h and is assumed.
        v.upsert(KnownPod::assumed(pod("a", "p1", Some("h")), "n2", 5));
        assert_eq!(v.len(), 4);
        assert_eq!(names(v.with_label("group", "g")), ["a/p2", "b/p3"]);
        assert_eq!(names(v.with_label("group", "h")), ["a/p1"]);
        assert_eq!(names(v.on_node("n2")), ["a/p1", "a/p4"]);
        // p2 is bound where it was assumed: only its state changes, and the indexes still find it.
        v.upsert(KnownPod::bound(pod("a", "p2", Some("g")), "n1", 3));
        assert_eq!(v.get("a/p2").map(|p| p.state), Some(PodState::Bound));
        assert_eq!(names(v.with_label("group", "g")), ["a/p2", "b/p3"]);
        assert_eq!(names(v.in_namespace("a")), ["a/p1", "a/p2", "a/p4"]);
        assert_eq!(v.remove("a/p2").map(|p| p.pod.name), Some("p2".to_string()));
        assert!(v.remove("a/p2").is_none());
        assert_eq!(names(v.in_namespace("a")), ["a/p1", "a/p4"]);
        assert_eq!(names(v.with_label("group", "g")), ["b/p3"]);
        // A freed slot is reused.
        v.upsert(KnownPod::pending(pod("c", "p5", Some("g")), 7));
        assert_eq!(v.slots.len(), 4);
        assert_eq!(names(v.with_label("group", "g")), ["b/p3", "c/p5"]);
        v.apply(PodChange::Reset);
        assert!(v.is_empty());
        assert_eq!(names(v.with_label("group", "g")), Vec::<String>::new());
        v.apply(PodChange::Upsert(KnownPod::pending(pod("a", "p1", Some("g")), 1)));
        assert_eq!(names(v.with_label("group", "g")), ["a/p1"], "the index survives a reset");
    }

    #[test]
    fn indexing_later_covers_the_pods_already_there() {
        let mut v = sample(false);
        v.index_labels(&["group"]);
        assert!(v.by_label["group"]["g"].len() == 3);
        assert_eq!(names(v.with_label("group", "g")), ["a/p1", "a/p2", "b/p3"]);
        v.index_labels(&[]);
        assert!(v.by_label.is_empty());
        assert_eq!(names(v.with_label("group", "g")), ["a/p1", "a/p2", "b/p3"]);
    }
}
