package kws

import "fmt"

// MaxSlot is the largest node slot the table accepts, as in the Rust SDK: a guard against a corrupt slot number
// allocating gigabytes.
const MaxSlot = 1<<20 - 1

// NodeInfo is a node of the plugin's node table, as Filter and Score see it: the node (embedded, so
// node.Name and node.Label read as on a Node) and the plugin's prepared data for it.
type NodeInfo struct {
	*Node
	// Slot is the node's place in the table, stable while the node exists.
	Slot uint32
	// data is what the plugin's Prepare returned, valid once prepared is set.
	data     any
	prepared bool
}

// Data is what the plugin's [Preparer] returned for this node (nil for a plugin without one). It is computed
// once per node change, not once per pod.
func (n *NodeInfo) Data() any { return n.data }

// NodeChange is a change to the node table, as the host sends it through nodes.apply.
type NodeChange struct {
	// Slot is the node's slot.
	Slot uint32
	// Node is the new or changed node; nil frees the slot.
	Node *Node
}

// nodeTable is node slot -> node. The host assigns slots densely and reuses freed ones, so a slice indexed by
// slot is enough.
type nodeTable struct {
	slots []*NodeInfo
}

// apply applies one change; a slot above MaxSlot is logged and ignored, as the Rust SDK does.
func (t *nodeTable) apply(c NodeChange) {
	if c.Slot > MaxSlot {
		Log(LevelError, fmt.Sprintf("node slot %d is out of range; change ignored", c.Slot))
		return
	}
	if c.Node == nil {
		if int(c.Slot) < len(t.slots) {
			t.slots[c.Slot] = nil
		}
		return
	}
	if int(c.Slot) >= len(t.slots) {
		t.slots = append(t.slots, make([]*NodeInfo, int(c.Slot)+1-len(t.slots))...)
	}
	t.slots[c.Slot] = &NodeInfo{Node: c.Node, Slot: c.Slot}
}

// info is the node in slot with the plugin's data prepared, or nil when the slot is empty. Data is prepared on
// first use rather than in apply, so a plugin that failed to build never has Prepare called.
func (t *nodeTable) info(slot uint32, plugin any) *NodeInfo {
	if int(slot) >= len(t.slots) {
		return nil
	}
	n := t.slots[slot]
	if n != nil && !n.prepared {
		if p, ok := plugin.(Preparer); ok {
			n.data = p.Prepare(n.Node)
		}
		n.prepared = true
	}
	return n
}

// missingSlot is the status for a slot the table does not hold (the host named a slot before sending it), the
// Rust SDK's text.
func missingSlot(slot uint32) Status {
	return Errorf("node slot %d is not in the plugin's node table", slot)
}
