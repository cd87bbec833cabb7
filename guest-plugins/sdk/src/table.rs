//! The guest-side node table: node slot → node, kept in step by the host through `nodes.apply`.

use crate::types::{Node, NodeChange, NodeSlot};

/// The largest slot the table accepts (a guard against a corrupt slot number allocating gigabytes).
pub const MAX_SLOT: NodeSlot = (1 << 20) - 1;

/// Nodes by slot. The host assigns slots densely and reuses freed ones, so a vector indexed by slot is enough.
#[derive(Debug, Default)]
pub struct NodeTable {
    /// `slots[i]` is the node in slot `i`, `None` when the slot is free.
    slots: Vec<Option<Node>>,
    /// Number of occupied slots.
    len: usize,
}

impl NodeTable {
    /// An empty table.
    pub const fn new() -> Self {
        Self { slots: Vec::new(), len: 0 }
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
        if self.slots[i].replace(node).is_none() {
            self.len += 1;
        }
        true
    }

    /// Frees `slot`, returning the node that was there. Freeing a free slot does nothing.
    pub fn remove(&mut self, slot: NodeSlot) -> Option<Node> {
        let node = self.slots.get_mut(slot as usize)?.take()?;
        self.len -= 1;
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
        Some(node)
    }

    /// The node in `slot`.
    pub fn get(&self, slot: NodeSlot) -> Option<&Node> {
        self.slots.get(slot as usize)?.as_ref()
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
        self.slots.iter().enumerate().filter_map(|(i, n)| n.as_ref().map(|n| (i as NodeSlot, n)))
    }

    /// The slot of the node named `name` (a linear search).
    pub fn slot_of(&self, name: &str) -> Option<NodeSlot> {
        self.iter().find(|(_, n)| n.name == name).map(|(s, _)| s)
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
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
        assert_eq!(t.iter().map(|(s, n)| (s, n.name.clone())).collect::<Vec<_>>(), vec![
            (0, "b".to_string()),
            (2, "c".to_string())
        ]);

        // Removing the last slot trims the vector.
        t.remove(2);
        assert_eq!(t.slots.len(), 1);
        t.clear();
        assert!(t.is_empty());
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
