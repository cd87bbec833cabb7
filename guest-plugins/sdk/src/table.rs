//! The guest-side node table: node slot → node, kept in step by the host through `nodes.apply`, and each
//! plugin's prepared per-node data beside it ([`Prepared`]), brought up to date before the calls that read it.

use crate::types::{Node, NodeChange, NodeSlot, Status};

/// The largest slot the table accepts (a guard against a corrupt slot number allocating gigabytes).
pub const MAX_SLOT: NodeSlot = (1 << 20) - 1;

/// Nodes by slot. The host assigns slots densely and reuses freed ones, so a vector indexed by slot is enough.
#[derive(Debug, Default)]
pub struct NodeTable {
    /// `slots[i]` is the node in slot `i`, `None` when the slot is free. Boxed, so the vector stays dense and a
    /// lookup that only needs prepared data never touches the node itself.
    slots: Vec<Option<Box<Node>>>,
    /// Number of occupied slots.
    len: usize,
    /// Slots changed since [`Prepared::catch_up`] last ran; `None` when it has to redo every slot.
    changed: Option<Vec<NodeSlot>>,
}

impl NodeTable {
    /// An empty table.
    pub const fn new() -> Self {
        Self { slots: Vec::new(), len: 0, changed: Some(Vec::new()) }
    }

    fn note_change(&mut self, slot: NodeSlot) {
        if let Some(c) = &mut self.changed {
            c.push(slot);
            // A log longer than the table says less than "redo everything"; keep memory bounded.
            if c.len() > self.slots.len().max(64) {
                self.changed = None;
            }
        }
    }

    /// Applies one change. Returns false (and changes nothing) for a slot above [`MAX_SLOT`].
    pub fn apply(&mut self, change: NodeChange) -> bool {
        match change {
            NodeChange::Upsert((slot, node)) => self.upsert(slot, node),
            NodeChange::Remove(slot) => {
                self.remove(slot);
                true
            }
        }
    }

    /// Puts `node` in `slot`, replacing what was there. Returns false for a slot above [`MAX_SLOT`].
    pub fn upsert(&mut self, slot: NodeSlot, node: Node) -> bool {
        if slot > MAX_SLOT {
            return false;
        }
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(Box::new(node)).is_none() {
            self.len += 1;
        }
        self.note_change(slot);
        true
    }

    /// Frees `slot`, returning the node that was there. Freeing a free slot does nothing.
    pub fn remove(&mut self, slot: NodeSlot) -> Option<Node> {
        let node = self.slots.get_mut(slot as usize)?.take()?;
        self.len -= 1;
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
        self.note_change(slot);
        Some(*node)
    }

    /// The node in `slot`.
    pub fn get(&self, slot: NodeSlot) -> Option<&Node> {
        self.slots.get(slot as usize)?.as_deref()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the table holds no node.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Occupied slots and their nodes, by slot.
    pub fn iter(&self) -> impl Iterator<Item = (NodeSlot, &Node)> {
        self.slots.iter().enumerate().filter_map(|(i, n)| n.as_deref().map(|n| (i as NodeSlot, n)))
    }

    /// The slot of the node named `name` (a linear search).
    pub fn slot_of(&self, name: &str) -> Option<NodeSlot> {
        self.iter().find(|(_, n)| n.name == name).map(|(s, _)| s)
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
        self.changed = None;
    }
}

/// A plugin's data derived from each node ([`crate::Plugin::prepare`]), in a dense vector indexed by slot. It is
/// recomputed only for the nodes that changed, so Filter and Score over thousands of nodes read a few bytes per
/// node instead of walking each node's labels.
#[derive(Debug)]
pub struct Prepared<D> {
    data: Vec<D>,
    /// False until the first catch-up, which prepares every node.
    started: bool,
}

impl<D: Default> Default for Prepared<D> {
    fn default() -> Self {
        Self { data: Vec::new(), started: false }
    }
}

impl<D: Default> Prepared<D> {
    /// Brings the data up to date with `table`: `prepare` runs for every node changed since the last catch-up
    /// (every node, the first time); freed slots go back to `D::default()`.
    pub fn catch_up(&mut self, table: &mut NodeTable, mut prepare: impl FnMut(&Node) -> D) {
        // `None` (never caught up, or the log overflowed): redo every slot.
        let log = table.changed.replace(Vec::new()).filter(|_| self.started);
        self.started = true;
        self.data.resize_with(table.slots.len(), D::default);
        let mut redo = |i: usize| {
            if let Some(d) = self.data.get_mut(i) {
                *d = table.slots[i].as_deref().map(&mut prepare).unwrap_or_default();
            }
        };
        match log {
            Some(slots) => slots.into_iter().for_each(|s| redo(s as usize)),
            None => (0..table.slots.len()).for_each(redo),
        }
    }

    /// The node in `slot` with its prepared data.
    pub fn get<'a>(&'a self, table: &'a NodeTable, slot: NodeSlot) -> Option<NodeInfo<'a, D>> {
        let node = table.slots.get(slot as usize)?.as_deref()?;
        Some(NodeInfo { node, data: self.data.get(slot as usize)? })
    }
}

/// The nodes of one Score call, in the host's order, each looked up in the plugin's node table only when read
/// ([`crate::Plugin::score_batch`]).
pub struct ScoreBatch<'a, D> {
    table: &'a NodeTable,
    data: &'a Prepared<D>,
    slots: &'a [NodeSlot],
}

impl<'a, D: Default> ScoreBatch<'a, D> {
    /// The nodes in `slots`, as `table` and `data` hold them.
    pub fn new(table: &'a NodeTable, data: &'a Prepared<D>, slots: &'a [NodeSlot]) -> Self {
        Self { table, data, slots }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the batch has no node.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The `i`-th node; an Error status naming the slot when the table does not hold it.
    pub fn node(&self, i: usize) -> Result<NodeInfo<'a, D>, Status> {
        let slot = self.slots[i];
        self.data.get(self.table, slot).ok_or_else(|| crate::batch::missing_slot(slot))
    }
}

/// A node as Filter and Score see it: the node (reached through `Deref`, so `node.name` and `node.label(..)` work)
/// and what the plugin prepared from it ([`NodeInfo::data`]).
#[derive(Debug, Clone, Copy)]
pub struct NodeInfo<'a, D = ()> {
    node: &'a Node,
    data: &'a D,
}

impl<'a, D> NodeInfo<'a, D> {
    /// A node with its data (for tests and for calling a plugin's methods directly).
    pub fn new(node: &'a Node, data: &'a D) -> Self {
        Self { node, data }
    }

    /// The node.
    pub fn node(&self) -> &'a Node {
        self.node
    }

    /// The plugin's prepared data for this node.
    pub fn data(&self) -> &'a D {
        self.data
    }
}

impl<D> std::ops::Deref for NodeInfo<'_, D> {
    type Target = Node;
    fn deref(&self) -> &Node {
        self.node
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_replace_remove_and_reuse() {
        let mut t = NodeTable::new();
        assert!(t.is_empty());
        assert!(t.apply(NodeChange::Upsert((0, Node::new("a")))));
        assert!(t.apply(NodeChange::Upsert((2, Node::new("c")))));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0).map(|n| n.name.as_str()), Some("a"));
        assert!(t.get(1).is_none());
        assert_eq!(t.get(2).map(|n| n.name.as_str()), Some("c"));
        assert!(t.get(99).is_none());

        // Replacing keeps the count.
        t.upsert(0, Node::new("a").with_label("k", "v"));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0).and_then(|n| n.label("k")), Some("v"));

        // Removing frees the slot; removing again is harmless.
        assert!(t.apply(NodeChange::Remove(0)));
        assert!(t.apply(NodeChange::Remove(0)));
        assert!(t.apply(NodeChange::Remove(7)));
        assert_eq!(t.len(), 1);
        assert!(t.get(0).is_none());

        // A freed slot is reused by another node.
        t.upsert(0, Node::new("b"));
        assert_eq!(t.get(0).map(|n| n.name.as_str()), Some("b"));
        assert_eq!(t.slot_of("c"), Some(2));
        assert_eq!(
            t.iter().map(|(s, n)| (s, n.name.clone())).collect::<Vec<_>>(),
            vec![(0, "b".to_string()), (2, "c".to_string())]
        );

        // Removing the last slot trims the vector.
        t.remove(2);
        assert_eq!(t.slots.len(), 1);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn prepared_data_follows_the_table() {
        let mut t = NodeTable::new();
        t.upsert(0, Node::new("a").with_label("n", "1"));
        t.upsert(1, Node::new("b").with_label("n", "2"));
        let mut p: Prepared<i64> = Prepared::default();
        let calls = std::cell::Cell::new(0);
        let mut parse = |n: &Node| {
            calls.set(calls.get() + 1);
            n.label("n").and_then(|v| v.parse().ok()).unwrap_or(-1)
        };
        p.catch_up(&mut t, &mut parse);
        assert_eq!((p.get(&t, 0).map(|n| *n.data()), p.get(&t, 1).map(|n| *n.data())), (Some(1), Some(2)));
        // Only what changed is prepared again; a freed slot has no node and no data.
        t.upsert(1, Node::new("b").with_label("n", "5"));
        t.upsert(3, Node::new("d"));
        t.remove(0);
        p.catch_up(&mut t, &mut parse);
        assert!(p.get(&t, 0).is_none());
        assert_eq!(p.get(&t, 1).map(|n| (n.name.clone(), *n.data())), Some(("b".to_string(), 5)));
        assert_eq!(p.get(&t, 3).map(|n| *n.data()), Some(-1));
        assert_eq!(calls.get(), 2 + 2, "a freed slot is not prepared");
        // A fresh Prepared (a plugin built again) prepares every node.
        let mut q: Prepared<i64> = Prepared::default();
        q.catch_up(&mut t, |_| 7);
        assert_eq!(q.get(&t, 3).map(|n| *n.data()), Some(7));
    }

    #[test]
    fn rejects_absurd_slots() {
        let mut t = NodeTable::new();
        assert!(!t.upsert(MAX_SLOT + 1, Node::new("x")));
        assert!(!t.apply(NodeChange::Upsert((u32::MAX, Node::new("x")))));
        assert!(t.is_empty());
        assert!(t.upsert(MAX_SLOT, Node::new("x")));
        assert_eq!(t.len(), 1);
    }
}
