package kws

import (
	"fmt"
	"strings"
)

// Code is the outcome class of a plugin call, as kube-scheduler's framework.Code.
type Code uint8

// The codes, in the contract's order (their values are the canonical ABI's enum discriminants).
const (
	// CodeSuccess: the plugin ran and the pod may go on.
	CodeSuccess Code = iota
	// CodeError: the plugin failed; the pod's attempt fails and it is retried with backoff.
	CodeError
	// CodeUnschedulable: the pod does not fit; preemption may help.
	CodeUnschedulable
	// CodeUnschedulableAndUnresolvable: the pod does not fit and preemption cannot help.
	CodeUnschedulableAndUnresolvable
	// CodeWait: Permit only, wait before binding.
	CodeWait
	// CodeSkip: nothing to do for this pod (PreFilter, PreScore, Bind).
	CodeSkip
	// CodePending: the pod waits for something outside the scheduler.
	CodePending
)

// Status is a plugin's answer: a code and the reasons shown to users (and counted in
// "0/N nodes are available: ..."). It is also an error, so Score and NormalizeScore can return one to choose
// the code; any other error becomes a CodeError status with the error's text.
type Status struct {
	// Code is the outcome class.
	Code Code
	// Reasons are human-readable; equal reasons from many nodes are counted once.
	Reasons []string
}

// Success is the status that lets the pod go on.
func Success() Status { return Status{Code: CodeSuccess} }

// Unschedulable rejects the pod on a node where preemption may help.
func Unschedulable(reasons ...string) Status {
	return Status{Code: CodeUnschedulable, Reasons: reasons}
}

// Unresolvable rejects the pod on a node where preemption cannot help (UnschedulableAndUnresolvable).
func Unresolvable(reasons ...string) Status {
	return Status{Code: CodeUnschedulableAndUnresolvable, Reasons: reasons}
}

// Errorf is a CodeError status with a formatted reason.
func Errorf(format string, args ...any) Status {
	return Status{Code: CodeError, Reasons: []string{fmt.Sprintf(format, args...)}}
}

// IsSuccess reports whether the status lets the pod go on.
func (s Status) IsSuccess() bool { return s.Code == CodeSuccess }

// Message is the reasons joined with ", ", as kube-scheduler prints a status.
func (s Status) Message() string { return strings.Join(s.Reasons, ", ") }

// Error makes a Status usable as an error; the text is [Status.Message].
func (s Status) Error() string { return s.Message() }

// equal reports whether two statuses have the same code and reasons (Filter sends equal statuses once).
func (s Status) equal(o Status) bool {
	if s.Code != o.Code || len(s.Reasons) != len(o.Reasons) {
		return false
	}
	for i := range s.Reasons {
		if s.Reasons[i] != o.Reasons[i] {
			return false
		}
	}
	return true
}

// KV is one label, annotation or node-selector entry; the host sends them sorted by key.
type KV struct {
	// Key is the label key.
	Key string
	// Value is the label value.
	Value string
}

// lookup finds key in kvs; the host sorts them by key, but the lists are short, so a scan is as fast.
func lookup(kvs []KV, key string) (string, bool) {
	for i := range kvs {
		if kvs[i].Key == key {
			return kvs[i].Value, true
		}
	}
	return "", false
}

// Scalar is an extended resource or hugepage amount by name.
type Scalar struct {
	// Name is the resource name.
	Name string
	// Value is in whole units.
	Value int64
}

// Resources are resource amounts: CPU in millicores, everything else in whole units (bytes for memory).
type Resources struct {
	// MilliCPU is CPU in millicores.
	MilliCPU int64
	// Memory is in bytes.
	Memory int64
	// EphemeralStorage is in bytes.
	EphemeralStorage int64
	// Pods is the number of pod slots.
	Pods int64
	// Scalar holds extended resources and hugepages by name.
	Scalar []Scalar
}

// Taint is a node taint.
type Taint struct {
	// Key is the taint key.
	Key string
	// Value is the taint value, empty when unset.
	Value string
	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect string
}

// Toleration is a pod toleration.
type Toleration struct {
	// Key is the tolerated key (empty matches every key with operator Exists).
	Key string
	// Operator is Equal (the default) or Exists.
	Operator string
	// Value is compared with Equal.
	Value string
	// Effect is the tolerated effect (empty: all).
	Effect string
}

// QoSClass is a pod's quality-of-service class.
type QoSClass uint8

// The QoS classes, in the contract's order.
const (
	// Guaranteed: equal requests and limits for CPU and memory in every container.
	Guaranteed QoSClass = iota
	// Burstable: some requests or limits.
	Burstable
	// BestEffort: no requests or limits at all.
	BestEffort
)

// SelectorRequirement is one requirement of a node selector term (In, NotIn, Exists, DoesNotExist, Gt, Lt).
type SelectorRequirement struct {
	// Key is the label key (or metadata.name in match-fields).
	Key string
	// Operator is the requirement's operator.
	Operator string
	// Values are the operator's operands.
	Values []string
}

// NodeSelectorTerm is a node selector term: every requirement must hold.
type NodeSelectorTerm struct {
	// MatchExpressions are requirements on node labels.
	MatchExpressions []SelectorRequirement
	// MatchFields are requirements on node fields.
	MatchFields []SelectorRequirement
}

// PreferredTerm is a preferred node affinity term and its weight.
type PreferredTerm struct {
	// Weight is 1–100.
	Weight int32
	// Term is the preferred term.
	Term NodeSelectorTerm
}

// Pod is a pod as policies see it.
type Pod struct {
	// UID is the pod's UID (or namespace/name when the object has none).
	UID string
	// Namespace is the pod's namespace.
	Namespace string
	// Name is the pod's name.
	Name string
	// Labels are the pod's labels, sorted by key.
	Labels []KV
	// Annotations are the pod's annotations, sorted by key.
	Annotations []KV
	// Priority is the pod's priority (0 when unset).
	Priority int32
	// QoSClass is the pod's QoS class.
	QoSClass QoSClass
	// Requests are the effective requests (init containers, sidecars and overhead counted).
	Requests Resources
	// Limits are the sum of container limits.
	Limits Resources
	// Tolerations are the pod's tolerations.
	Tolerations []Toleration
	// NodeSelector is spec.nodeSelector.
	NodeSelector []KV
	// RequiredNodeAffinity are the required node affinity terms (ORed).
	RequiredNodeAffinity []NodeSelectorTerm
	// PreferredNodeAffinity are the preferred node affinity terms.
	PreferredNodeAffinity []PreferredTerm
	// SchedulerName is spec.schedulerName.
	SchedulerName string
	// NodeName is spec.nodeName; empty while the pod is not bound.
	NodeName string
}

// Label returns the pod's label key and whether it is set.
func (p *Pod) Label(key string) (string, bool) { return lookup(p.Labels, key) }

// Node is a node as policies see it.
type Node struct {
	// Name is the node's name.
	Name string
	// Labels are the node's labels, sorted by key.
	Labels []KV
	// Taints are the node's taints.
	Taints []Taint
	// Allocatable are the node's allocatable resources.
	Allocatable Resources
	// Requested is the sum of the requests of the pods on the node (assumed pods included).
	Requested Resources
	// Unschedulable is spec.unschedulable.
	Unschedulable bool
	// PodCount is the number of pods on the node.
	PodCount uint32
}

// Label returns the node's label key and whether it is set.
func (n *Node) Label(key string) (string, bool) { return lookup(n.Labels, key) }
