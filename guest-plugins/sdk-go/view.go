package kws

import "time"

// PodState is where a pod the scheduler knows stands.
type PodState uint8

// The states, in the contract's order (their values are the canonical ABI's enum discriminants).
const (
	// PodPending: not on a node yet (in the scheduling queue, or in a scheduling cycle).
	PodPending PodState = iota
	// PodAssumed: assumed on a node by this scheduler (reserved, waiting at Permit or being bound).
	PodAssumed
	// PodBound: bound to a node.
	PodBound
)

// KnownPod is a pod of the pod view.
type KnownPod struct {
	// Pod is the pod; its NodeName is set when it is assumed or bound.
	Pod *Pod
	// State is where it stands.
	State PodState
	// FirstSeenNs is when the scheduler first saw it, nanoseconds on the scheduler's clock.
	FirstSeenNs uint64
}

// Placed is true when the pod is assumed or bound (on a node), not pending.
func (k *KnownPod) Placed() bool { return k.State != PodPending }

// PodChange is one change to the pod view, as pods.apply sends it: an upsert (Known set), a removal (UID set), or
// a reset (Reset set: forget every pod; the upserts that follow are the whole view).
type PodChange struct {
	// Known is the new or changed pod.
	Known *KnownPod
	// UID is the pod that is gone.
	UID string
	// Reset forgets every pod.
	Reset bool
}

// view is the pod view: UID -> known pod. It is filled only in a world that exports `pods` (gang-plugin, or a
// plugin's own): elsewhere the host sends nothing and it stays empty.
var view = map[string]*KnownPod{}

func applyPodChange(c PodChange) {
	switch {
	case c.Reset:
		clear(view)
	case c.Known != nil:
		view[c.Known.Pod.UID] = c.Known
	default:
		delete(view, c.UID)
	}
}

// Pods is every pod the scheduler knows (pending pods of the plugin's profiles, assumed and bound pods), in no
// order. The plugin's world must export `pods` (build with --world gang-plugin, or a world of its own), or the view
// stays empty.
func Pods() []*KnownPod {
	out := make([]*KnownPod, 0, len(view))
	for _, k := range view {
		out = append(out, k)
	}
	return out
}

// PodByUID is the known pod with this UID, or nil.
func PodByUID(uid string) *KnownPod { return view[uid] }

// PodsWithLabel is the known pods in namespace (any namespace when empty) whose label key is value, in no order.
func PodsWithLabel(namespace, key, value string) []*KnownPod {
	var out []*KnownPod
	for _, k := range view {
		if v, ok := k.Pod.Label(key); ok && v == value && (namespace == "" || k.Pod.Namespace == namespace) {
			out = append(out, k)
		}
	}
	return out
}

// WaitingPod is a pod parked at Permit: some Permit plugin answered Wait and has not yet allowed it.
type WaitingPod struct {
	// Pod is the pod, with NodeName set to the node it is assumed on.
	Pod *Pod
	// Node is the node it is assumed on.
	Node string
	// PendingPlugins are the Permit plugins that have not allowed it yet.
	PendingPlugins []string
}

// WaitingPods is the pods of this plugin's profile waiting at Permit (upstream's IterateOverWaitingPods), in no
// order.
func WaitingPods() []WaitingPod { return hostWaitingPods() }

// AllowWaitingPod allows the waiting pod with this UID on behalf of this plugin (upstream's WaitingPod.Allow);
// false when no such pod waits.
func AllowWaitingPod(uid string) bool { return hostAllowWaitingPod(uid) }

// RejectWaitingPod rejects the waiting pod with this UID (upstream's WaitingPod.Reject): its binding cycle fails as
// Unschedulable with reason. False when no such pod waits.
func RejectWaitingPod(uid, reason string) bool { return hostRejectWaitingPod(uid, reason) }

// EventResource is what kind of object a cluster event is about.
type EventResource uint8

// The resources, in the contract's order.
const (
	// EventAssignedPod: a pod bound to a node (or assumed on one).
	EventAssignedPod EventResource = iota
	// EventUnscheduledPod: a pod not bound yet.
	EventUnscheduledPod
	// EventNode: a node.
	EventNode
	// EventVolume: a PersistentVolume or PersistentVolumeClaim.
	EventVolume
	// EventOther: any other object the scheduler watches.
	EventOther
)

// EventActions is what happened to the object (a set of flags).
type EventActions uint8

// The actions, the contract's flags in order.
const (
	// ActionAdd: created.
	ActionAdd EventActions = 1 << iota
	// ActionDelete: deleted.
	ActionDelete
	// ActionUpdateLabel: labels changed.
	ActionUpdateLabel
	// ActionUpdateTaint: taints or spec.unschedulable changed.
	ActionUpdateTaint
	// ActionUpdateResources: allocatable or requests changed.
	ActionUpdateResources
	// ActionUpdateOther: any other change.
	ActionUpdateOther
)

// ClusterEvent is a cluster event, or a plugin's interest in events (any of the actions).
type ClusterEvent struct {
	// Resource is the object kind.
	Resource EventResource
	// Actions are the actions.
	Actions EventActions
}

// EventObject is the object a cluster event is about: a pod or a node (the other is nil).
type EventObject struct {
	// Pod is set when the object is a pod.
	Pod *Pod
	// Node is set when the object is a node.
	Node *Node
}

// QueueingHint is a plugin's verdict on whether an event may make a pod it rejected schedulable.
type QueueingHint uint8

// The hints, in the contract's order.
const (
	// Queue: it may; retry the pod (after its backoff).
	Queue QueueingHint = iota
	// QueueSkip: it cannot; leave the pod where it is.
	QueueSkip
)

// EventsRegistrar is a plugin that says which events may make a pod it rejected schedulable, and answers per
// event (upstream's EnqueueExtensions with queueing hints). old is nil for an add, new is nil for a delete. The
// world must export `events`; without it the pod is retried on every event.
type EventsRegistrar interface {
	EventsToRegister() []ClusterEvent
	QueueingHint(pod *Pod, event ClusterEvent, old, new *EventObject) QueueingHint
}

// PreFilterer is a plugin that serves PreFilter: a status other than success rejects the pod on every node
// (Skip: its Filter has nothing to check). AddPod and RemovePod, PreFilter's what-ifs, answer success.
type PreFilterer interface {
	PreFilter(pod *Pod) Status
}

// Reserver is a plugin that serves Reserve and Unreserve (which must be idempotent).
type Reserver interface {
	Reserve(pod *Pod, node string) Status
	Unreserve(pod *Pod, node string)
}

// Permitter is a plugin that serves Permit: success allows the pod, a rejection rejects it, and CodeWait holds it
// for at most the duration (capped by the host at 15 minutes) until a plugin allows or rejects it
// ([AllowWaitingPod], [RejectWaitingPod]).
type Permitter interface {
	Permit(pod *Pod, node string) (Status, time.Duration)
}

// Wait is the status that holds a pod at Permit.
func Wait(reasons ...string) Status { return Status{Code: CodeWait, Reasons: reasons} }

// preFilter is pre-filter.pre-filter; a configuration error is the call's error.
func preFilter(pod *Pod) Status {
	p, err := instance()
	if err != nil {
		return asStatus(err)
	}
	if f, ok := p.(PreFilterer); ok {
		return f.PreFilter(pod)
	}
	return Success()
}

func reserve(pod *Pod, node string) Status {
	p, err := instance()
	if err != nil {
		return asStatus(err)
	}
	if r, ok := p.(Reserver); ok {
		return r.Reserve(pod, node)
	}
	return Success()
}

func unreserve(pod *Pod, node string) {
	if p, err := instance(); err == nil {
		if r, ok := p.(Reserver); ok {
			r.Unreserve(pod, node)
		}
	}
}

// permit is permit.permit: the status and the wait in milliseconds.
func permit(pod *Pod, node string) (Status, uint64) {
	p, err := instance()
	if err != nil {
		return asStatus(err), 0
	}
	pm, ok := p.(Permitter)
	if !ok {
		return Success(), 0
	}
	st, wait := pm.Permit(pod, node)
	if wait < 0 {
		wait = 0
	}
	return st, uint64(wait / time.Millisecond)
}

// everyEvent is every resource with every action: what a plugin that cannot answer (its configuration failed)
// registers, so its pods are retried on anything, as the host does for a plugin without `events`.
var everyEvent = []ClusterEvent{
	{EventAssignedPod, 63}, {EventUnscheduledPod, 63}, {EventNode, 63}, {EventVolume, 63}, {EventOther, 63},
}

func eventsToRegister() []ClusterEvent {
	p, err := instance()
	if err != nil {
		return everyEvent
	}
	if r, ok := p.(EventsRegistrar); ok {
		return r.EventsToRegister()
	}
	return everyEvent
}

// queueingHint is events.queueing-hint; a plugin that cannot answer retries the pod, as a failed hint does.
func queueingHint(pod *Pod, event ClusterEvent, old, new *EventObject) QueueingHint {
	p, err := instance()
	if err != nil {
		return Queue
	}
	if r, ok := p.(EventsRegistrar); ok {
		return r.QueueingHint(pod, event, old, new)
	}
	return Queue
}
