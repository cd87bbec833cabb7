// Command gang-go is a tiny gang (the pods of a group are bound together or not at all) in Go, to exercise the
// SDK's 0.2 additions: the pod view, the waiting pods, and events with a queueing hint. The same policy as gang-c,
// gang-py and gang-js (and a small part of the Rust coscheduling guest); world gang-plugin.
//
// A pod is in group namespace/G when it carries the label pod-group.scheduling.sigs.k8s.io/name: G, and the group
// needs pod-group.scheduling.sigs.k8s.io/min-available: "N" of its pods placed at once (1 when absent).
//   - PreFilter: fewer pods of the group in the pod view than N is UnschedulableAndUnresolvable.
//   - Permit: once N pods of the group are assumed or bound (this one included), allow every waiting sibling and
//     go on; until then wait, at most waitFor.
//   - Unreserve (a member timed out or was rejected): reject every other waiting pod of the group.
//   - Events: a pending pod created with the group's label, or labelled later, may complete the group: the hint
//     answers Queue only for a pod that joins the rejected pod's group.
package main

import (
	"fmt"
	"strconv"
	"time"

	kws "example.invalid/kws/sdk-go"
)

const (
	group        = "pod-group.scheduling.sigs.k8s.io/name"
	minAvailable = "pod-group.scheduling.sigs.k8s.io/min-available"
	waitFor      = 2 * time.Second
)

// Gang is the plugin; it keeps nothing between calls (the host runs several instances).
type Gang struct{}

// groupOf is the pod's group label, or "" when it has none.
func groupOf(pod *kws.Pod) string {
	g, _ := pod.Label(group)
	return g
}

func inGroup(pod *kws.Pod, namespace, g string) bool {
	v, ok := pod.Label(group)
	return ok && v == g && pod.Namespace == namespace
}

// need is the pod's min-available: 1 without the label, 0 when it is not a positive integer.
func need(pod *kws.Pod) int {
	v, ok := pod.Label(minAvailable)
	if !ok {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || v[0] == '+' {
		return 0
	}
	return n
}

// waitingSiblings is the UIDs of the group's pods waiting at Permit, except pod.
func waitingSiblings(pod *kws.Pod, g string) []string {
	var out []string
	for _, w := range kws.WaitingPods() {
		if inGroup(w.Pod, pod.Namespace, g) && w.Pod.UID != pod.UID {
			out = append(out, w.Pod.UID)
		}
	}
	return out
}

// PreFilter refuses a pod whose group has fewer pods than it needs.
func (Gang) PreFilter(pod *kws.Pod) kws.Status {
	g := groupOf(pod)
	if g == "" {
		return kws.Success()
	}
	n := need(pod)
	if n == 0 {
		return kws.Unresolvable(fmt.Sprintf("pod %s/%s: label %s wants a positive integer", pod.Namespace, pod.Name, minAvailable))
	}
	if have := len(kws.PodsWithLabel(pod.Namespace, group, g)); have < n {
		return kws.Unresolvable(fmt.Sprintf(
			"pre-filter pod %s cannot find enough sibling pods, current pods number: %d, minMember: %d, podGroup: %s/%s",
			pod.Name, have, n, pod.Namespace, g))
	}
	return kws.Success()
}

// Reserve keeps nothing.
func (Gang) Reserve(*kws.Pod, string) kws.Status { return kws.Success() }

// Unreserve: a member left (timed out, or was rejected), so its waiting siblings cannot complete the group.
func (Gang) Unreserve(pod *kws.Pod, _ string) {
	g := groupOf(pod)
	if g == "" {
		return
	}
	reason := fmt.Sprintf("rejection in Unreserve: pod %s/%s of PodGroup %s/%s left", pod.Namespace, pod.Name, pod.Namespace, g)
	for _, uid := range waitingSiblings(pod, g) {
		kws.RejectWaitingPod(uid, reason)
	}
}

// Permit waits until the group has enough pods placed, then allows the waiting ones.
func (Gang) Permit(pod *kws.Pod, _ string) (kws.Status, time.Duration) {
	g := groupOf(pod)
	if g == "" || need(pod) == 0 {
		return kws.Success(), 0
	}
	n, placed := need(pod), 0
	for _, k := range kws.PodsWithLabel(pod.Namespace, group, g) {
		if k.Placed() {
			placed++
		}
	}
	// The host shows the pod assumed before Permit runs; count it anyway if that update has not arrived.
	if me := kws.PodByUID(pod.UID); me == nil || !me.Placed() {
		placed++
	}
	if placed < n {
		return kws.Wait(fmt.Sprintf("waiting for %d more pod(s) of PodGroup %s/%s (minMember %d)", n-placed, pod.Namespace, g, n)), waitFor
	}
	for _, uid := range waitingSiblings(pod, g) {
		kws.AllowWaitingPod(uid)
	}
	return kws.Success(), 0
}

// EventsToRegister: a pending pod that joins a group may complete it.
func (Gang) EventsToRegister() []kws.ClusterEvent {
	return []kws.ClusterEvent{{Resource: kws.EventUnscheduledPod, Actions: kws.ActionAdd | kws.ActionUpdateLabel}}
}

// QueueingHint is Queue only for a pod that joins the rejected pod's group (it was not in it before the event).
func (Gang) QueueingHint(pod *kws.Pod, _ kws.ClusterEvent, old, new *kws.EventObject) kws.QueueingHint {
	g := groupOf(pod)
	in := func(o *kws.EventObject) bool { return o != nil && o.Pod != nil && inGroup(o.Pod, pod.Namespace, g) }
	if g != "" && in(new) && !in(old) {
		return kws.Queue
	}
	return kws.QueueSkip
}

func init() { kws.Register(func(*kws.Config) (Gang, error) { return Gang{}, nil }) }

func main() {}
