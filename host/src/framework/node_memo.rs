//! What a plugin computes from a node's pods for one kind of incoming pod, kept across cycles while the node does
//! not change: InterPodAffinity's per-node match counts, for instance, need every pod of the cluster matched
//! against the incoming pod's terms in every cycle, yet between two pods of one workload only the node that got
//! the last pod has changed.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use super::NodeInfo;

/// Per-node values computed for one key (say, the incoming pod's affinity terms), reused while both the key and
/// the node's generation stay the same. The cache stamps every change of a node with a fresh, process-wide
/// generation; a node changed in a cycle's own copy (a preemption dry run, a nominated pod added) has generation 0
/// and is never stored or reused, so a kept value always describes the node it is read for.
#[derive(Debug)]
pub struct NodeMemo<K, V> {
    key: Option<K>,
    nodes: FxHashMap<u32, (u64, V)>,
}

impl<K, V> Default for NodeMemo<K, V> {
    fn default() -> Self {
        NodeMemo { key: None, nodes: FxHashMap::default() }
    }
}

impl<K, V> NodeMemo<K, V> {
    /// Starts a cycle for the key `same` recognises as the kept one; any other key (built by `make`) drops every
    /// kept value.
    pub fn key(&mut self, same: impl FnOnce(&K) -> bool, make: impl FnOnce() -> K) {
        if !self.key.as_ref().is_some_and(same) {
            self.nodes.clear();
            self.key = Some(make());
        }
    }

    /// Hands `f` the value for `node`: the kept one for its generation, or one `compute` makes (and keeps, unless
    /// the node is a cycle's own changed copy).
    pub fn with<R>(&mut self, node: &NodeInfo, compute: impl FnOnce() -> V, f: impl FnOnce(&V) -> R) -> R {
        self.with_valid(node, |_| true, compute, f)
    }

    /// `with`, where a kept value is used only while `valid` also says it holds (for a value that depends on more
    /// than the key, such as some of the incoming pod's labels).
    pub fn with_valid<R>(
        &mut self,
        node: &NodeInfo,
        valid: impl FnOnce(&V) -> bool,
        compute: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> R,
    ) -> R {
        if node.generation == 0 {
            return f(&compute());
        }
        match self.nodes.entry(node.id) {
            Entry::Occupied(mut e) => {
                if e.get().0 != node.generation || !valid(&e.get().1) {
                    *e.get_mut() = (node.generation, compute());
                }
                f(&e.get().1)
            }
            Entry::Vacant(e) => f(&e.insert((node.generation, compute())).1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::testutil::node;

    #[test]
    fn values_are_kept_per_key_and_generation() {
        let mut memo = NodeMemo::<&str, usize>::default();
        let mut n = node(serde_json::json!({"metadata": {"name": "a"}}));
        let mut computed = 0;
        let mut read = |memo: &mut NodeMemo<&str, usize>, n: &NodeInfo, key: &'static str| {
            memo.key(|k| *k == key, || key);
            memo.with(
                n,
                || {
                    computed += 1;
                    computed
                },
                |v| *v,
            )
        };
        n.generation = 7;
        assert_eq!(read(&mut memo, &n, "terms-1"), 1);
        assert_eq!(read(&mut memo, &n, "terms-1"), 1, "same key, same generation: kept");
        n.generation = 8;
        assert_eq!(read(&mut memo, &n, "terms-1"), 2, "a new generation is computed again");
        assert_eq!(read(&mut memo, &n, "terms-2"), 3, "another key drops what was kept");
        n.generation = 0;
        assert_eq!(read(&mut memo, &n, "terms-2"), 4, "a cycle's own copy is never reused");
        assert_eq!(read(&mut memo, &n, "terms-2"), 5, "nor stored");
    }
}
