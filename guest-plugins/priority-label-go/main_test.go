//go:build !wasip1

// The policy's unit tests run natively, through the SDK's Harness (a fake host).

package main

import (
	"reflect"
	"strings"
	"testing"

	kws "example.invalid/kws/sdk-go"
)

func node(name string, labels ...kws.KV) *kws.Node { return &kws.Node{Name: name, Labels: labels} }

func prio(v string) kws.KV { return kws.KV{Key: DefaultLabelKey, Value: v} }

var pod = &kws.Pod{Namespace: "default", Name: "p"}

func nodes(h *kws.Harness) []uint32 {
	return h.Load(node("a", prio("10")), node("b"), node("c", prio("5")), node("d", prio("high")))
}

func codes(st []kws.Status) []kws.Code {
	out := make([]kws.Code, len(st))
	for i, s := range st {
		out[i] = s.Code
	}
	return out
}

func TestFilterRejectsUnlabelledNodesWithOneReason(t *testing.T) {
	h := kws.NewHarness("{}")
	st := h.Filter(pod, nodes(h)...)
	want := []kws.Code{kws.CodeSuccess, kws.CodeUnschedulableAndUnresolvable, kws.CodeSuccess, kws.CodeSuccess}
	if !reflect.DeepEqual(codes(st), want) {
		t.Fatalf("codes %v, want %v", codes(st), want)
	}
	if got := st[1].Reasons; !reflect.DeepEqual(got, []string{"node(s) didn't have label priority.example.com"}) {
		t.Fatalf("reasons %q", got)
	}
	if h.PodFetches() != 0 {
		t.Fatalf("the policy does not read the pod, yet it was fetched %d times", h.PodFetches())
	}
}

func TestLabelKeyFromConfig(t *testing.T) {
	h := kws.NewHarness(`{"labelKey": "rank"}`)
	slots := h.Load(node("a", kws.KV{Key: "rank", Value: "3"}), node("b"))
	if st := h.Filter(pod, slots...); st[1].Message() != "node(s) didn't have label rank" {
		t.Fatalf("reason %q", st[1].Message())
	}
	if got, err := h.Score(pod, 0); err != nil || !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("score %v, %v", got, err)
	}
}

func TestValidateRefusesABadConfigBeforeAnyCall(t *testing.T) {
	h := kws.NewHarness(`{"labelKey": ""}`)
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "labelKey must not be empty") {
		t.Fatalf("validate: %v", err)
	}
	h = kws.NewHarness(`{"labelKey": "rank"}`)
	if err := h.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
}

func TestBadConfigFailsEveryCallAndIsLoggedOnce(t *testing.T) {
	h := kws.NewHarness(`{"labelKey": 7}`)
	for _, s := range h.Filter(pod, nodes(h)...) {
		if s.Code != kws.CodeError || !strings.Contains(s.Message(), "labelKey") {
			t.Fatalf("status %+v", s)
		}
	}
	if _, err := h.Score(pod, 0); err == nil || !strings.Contains(err.Error(), `config "labelKey": expected a string`) {
		t.Fatalf("score error %v", err)
	}
	if logs := h.Logs(); len(logs) != 1 {
		t.Fatalf("logs %q", logs)
	}
}

func TestScoreIsTheLabelValueAndRejectsNonIntegers(t *testing.T) {
	h := kws.NewHarness("{}")
	nodes(h)
	if got, err := h.Score(pod, 0, 2); err != nil || !reflect.DeepEqual(got, []int64{10, 5}) {
		t.Fatalf("score %v, %v", got, err)
	}
	_, err := h.Score(pod, 0, 3)
	st, ok := err.(kws.Status)
	if !ok || st.Code != kws.CodeError || st.Message() != `node d: label priority.example.com has non-integer value "high"` {
		t.Fatalf("error %#v", err)
	}
}

func TestAChangedNodeIsReadAgain(t *testing.T) {
	h := kws.NewHarness("{}")
	nodes(h)
	if got, _ := h.Score(pod, 0, 2); !reflect.DeepEqual(got, []int64{10, 5}) {
		t.Fatalf("score %v", got)
	}
	h.Apply(kws.NodeChange{Slot: 2, Node: node("c", prio("40"))}, kws.NodeChange{Slot: 1, Node: node("b", prio("7"))})
	if got, _ := h.Score(pod, 0, 1, 2); !reflect.DeepEqual(got, []int64{10, 7, 40}) {
		t.Fatalf("score %v", got)
	}
	h.Apply(kws.NodeChange{Slot: 0, Node: node("a")})
	if st := h.Filter(pod, 0); st[0].Code != kws.CodeUnschedulableAndUnresolvable {
		t.Fatalf("filter %+v", st[0])
	}
	h.Apply(kws.NodeChange{Slot: 0})
	if st := h.Filter(pod, 0); st[0].Message() != "node slot 0 is not in the plugin's node table" {
		t.Fatalf("filter of a removed slot %+v", st[0])
	}
}

func TestNormalizeScalesByMaximum(t *testing.T) {
	h := kws.NewHarness("{}")
	if got, _ := h.NormalizeScore(pod, 10, 5, -3); !reflect.DeepEqual(got, []int64{100, 50, 0}) {
		t.Fatalf("normalized %v", got)
	}
	if got, _ := h.NormalizeScore(pod, 0, -1); !reflect.DeepEqual(got, []int64{0, 0}) {
		t.Fatalf("normalized %v", got)
	}
	const big = 1 << 62
	if got, _ := h.NormalizeScore(pod, big, big/2); !reflect.DeepEqual(got, []int64{100, 50}) {
		t.Fatalf("normalized %v", got)
	}
}
