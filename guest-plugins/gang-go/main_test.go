package main

import (
	"testing"

	kws "example.invalid/kws/sdk-go"
)

func member(name, g, min string) *kws.Pod {
	return &kws.Pod{UID: "default-" + name, Namespace: "default", Name: name, Labels: []kws.KV{
		{Key: group, Value: g}, {Key: minAvailable, Value: min},
	}}
}

func known(p *kws.Pod, state kws.PodState) kws.PodChange {
	return kws.PodChange{Known: &kws.KnownPod{Pod: p, State: state}}
}

// The group's count comes from the pod view, and Permit releases the waiting siblings once the group is placed.
func TestPermitWaitsThenAllowsTheWaitingSiblings(t *testing.T) {
	h := kws.NewHarness("{}")
	a, b, other := member("a", "g", "2"), member("b", "g", "2"), member("x", "h", "2")
	h.ApplyPods(known(a, kws.PodPending))
	if st := h.PreFilter(a); st.Code != kws.CodeUnschedulableAndUnresolvable {
		t.Fatalf("one of two: %+v", st)
	}
	h.ApplyPods(known(b, kws.PodPending), known(other, kws.PodPending))
	if st := h.PreFilter(a); !st.IsSuccess() {
		t.Fatalf("two of two: %+v", st)
	}
	h.ApplyPods(known(a, kws.PodAssumed))
	if st, ms := h.Permit(a, "n0"); st.Code != kws.CodeWait || ms != 2000 {
		t.Fatalf("a alone waits: %+v %d", st, ms)
	}
	h.SetWaitingPods(kws.WaitingPod{Pod: a, Node: "n0"}, kws.WaitingPod{Pod: other, Node: "n1"})
	h.ApplyPods(known(b, kws.PodAssumed))
	if st, _ := h.Permit(b, "n1"); !st.IsSuccess() {
		t.Fatalf("b completes the group: %+v", st)
	}
	if got := h.Allowed(); len(got) != 1 || got[0] != a.UID {
		t.Fatalf("allowed %v, want only a", got)
	}
	h.ApplyPods(kws.PodChange{Reset: true})
	if st := h.PreFilter(a); st.IsSuccess() {
		t.Fatal("a reset view holds nobody")
	}
}

func TestUnreserveRejectsTheWaitingSiblingsAndTheHintWaitsForANewMember(t *testing.T) {
	h := kws.NewHarness("{}")
	a, b := member("a", "g", "3"), member("b", "g", "3")
	h.SetWaitingPods(kws.WaitingPod{Pod: b, Node: "n0"})
	h.Unreserve(a, "n1")
	if got := h.Rejected(); len(got) != 1 || got[0] != b.UID+": rejection in Unreserve: pod default/a of PodGroup default/g left" {
		t.Fatalf("rejected %v", got)
	}
	add := kws.ClusterEvent{Resource: kws.EventUnscheduledPod, Actions: kws.ActionAdd}
	if got := h.EventsToRegister(); len(got) != 1 || got[0].Actions != kws.ActionAdd|kws.ActionUpdateLabel {
		t.Fatalf("events %+v", got)
	}
	if h.QueueingHint(a, add, nil, &kws.EventObject{Pod: b}) != kws.Queue {
		t.Fatal("a new member retries")
	}
	if h.QueueingHint(a, add, nil, &kws.EventObject{Pod: member("x", "h", "3")}) != kws.QueueSkip {
		t.Fatal("a pod of another group does not")
	}
}
