//go:build !wasip1

package kws

import (
	"fmt"
	"sort"
)

// Off Wasm the host is a fake that a Harness sets up, so a plugin's unit tests run with plain `go test`.
var fake fakeHost

// fakeHost is what the host would hold for the instance.
type fakeHost struct {
	config  string
	logs    []string
	pod     *Pod
	fetches int
	state   map[string][]byte
	random  uint64
	waiting []WaitingPod
	allowed []string
	rejects []string
}

var levelNames = [...]string{"debug", "info", "warn", "error"}

func hostLog(level Level, message string) {
	fake.logs = append(fake.logs, levelNames[level&3]+": "+message)
}

func hostConfig() string { return fake.config }

// hostRandom is a fixed sequence (splitmix64), so tests repeat.
func hostRandom() uint64 {
	fake.random += 0x9e3779b97f4a7c15
	z := fake.random
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func hostNowNs() uint64 { return 0 }

func hostCycleStateWrite(key string, value []byte) { fake.state[key] = append([]byte{}, value...) }

func hostCycleStateRead(key string) ([]byte, bool) {
	v, ok := fake.state[key]
	return v, ok
}

func hostCyclePod() *Pod {
	if fake.pod == nil {
		return nil
	}
	fake.fetches++
	p := *fake.pod
	return &p
}

func hostWaitingPods() []WaitingPod { return append([]WaitingPod{}, fake.waiting...) }

// hostAllowWaitingPod records the allow and takes the pod off the fake's waiting list.
func hostAllowWaitingPod(uid string) bool {
	fake.allowed = append(fake.allowed, uid)
	return fake.release(uid)
}

func hostRejectWaitingPod(uid, reason string) bool {
	fake.rejects = append(fake.rejects, uid+": "+reason)
	return fake.release(uid)
}

// release takes the pod with this UID off the waiting list; false when it was not there.
func (f *fakeHost) release(uid string) bool {
	for i, w := range f.waiting {
		if w.Pod.UID == uid {
			f.waiting = append(f.waiting[:i], f.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// Harness drives the SDK as the host would, for a plugin's unit tests (native builds only; under wasip1 the host
// does). Each call with a pod starts a new cycle, as the host's cycle.begin does. The package's state is global,
// as an instance's is, so tests that use a Harness must not run in parallel.
type Harness struct{}

// NewHarness resets the plugin instance and the node table, and sets the configuration JSON the plugin will
// read (host.config); the registered constructor runs again on the next call.
func NewHarness(config string) *Harness {
	rt.built, rt.plugin, rt.err = false, nil, nil
	rt.table = nodeTable{}
	rt.pod = CyclePod{}
	fake = fakeHost{config: config, state: map[string][]byte{}}
	clear(view)
	return &Harness{}
}

// ApplyPods sends pod view changes, as pods.apply.
func (*Harness) ApplyPods(changes ...PodChange) {
	for _, c := range changes {
		applyPodChange(c)
	}
}

// SetWaitingPods sets the pods the fake host shows waiting at Permit.
func (*Harness) SetWaitingPods(pods ...WaitingPod) { fake.waiting = append([]WaitingPod{}, pods...) }

// Allowed returns the UIDs the plugin allowed (AllowWaitingPod) since NewHarness, in order.
func (*Harness) Allowed() []string { return fake.allowed }

// Rejected returns the plugin's rejections (RejectWaitingPod) since NewHarness, as "uid: reason", in order.
func (*Harness) Rejected() []string { return fake.rejects }

// PreFilter is pre-filter.pre-filter.
func (*Harness) PreFilter(pod *Pod) Status { return preFilter(pod) }

// Reserve is reserve.reserve.
func (*Harness) Reserve(pod *Pod, node string) Status { return reserve(pod, node) }

// Unreserve is reserve.unreserve.
func (*Harness) Unreserve(pod *Pod, node string) { unreserve(pod, node) }

// Permit is permit.permit: the status and the wait in milliseconds.
func (*Harness) Permit(pod *Pod, node string) (Status, uint64) { return permit(pod, node) }

// EventsToRegister is events.events-to-register.
func (*Harness) EventsToRegister() []ClusterEvent { return eventsToRegister() }

// QueueingHint is events.queueing-hint.
func (*Harness) QueueingHint(pod *Pod, event ClusterEvent, old, new *EventObject) QueueingHint {
	return queueingHint(pod, event, old, new)
}

// Apply sends node table changes, as nodes.apply.
func (*Harness) Apply(changes ...NodeChange) {
	for _, c := range changes {
		applyChange(c)
	}
}

// Load puts nodes into slots 0, 1, ... and returns the slots.
func (h *Harness) Load(nodes ...*Node) []uint32 {
	slots := make([]uint32, len(nodes))
	for i, n := range nodes {
		slots[i] = uint32(i)
		h.Apply(NodeChange{Slot: uint32(i), Node: n})
	}
	return slots
}

// Validate is config.validate.
func (*Harness) Validate() error { return validate() }

// cycle starts a cycle about pod.
func (*Harness) cycle(pod *Pod) {
	begin()
	fake.pod = pod
	fake.state = map[string][]byte{}
}

// Filter runs Filter over slots in a new cycle about pod and expands the compact answer into one status per
// slot, as the host reads it.
func (h *Harness) Filter(pod *Pod, slots ...uint32) []Status {
	h.cycle(pod)
	statuses, rejected, verdicts := filterBatch(slots)
	if len(rejected) != len(verdicts) || !sort.SliceIsSorted(rejected, func(i, j int) bool { return rejected[i] < rejected[j] }) {
		panic(fmt.Sprintf("malformed filter-result: rejected %v, verdicts %v", rejected, verdicts))
	}
	out := make([]Status, len(slots))
	for i := range out {
		out[i] = Success()
	}
	for i, at := range rejected {
		out[at] = statuses[verdicts[i]]
	}
	return out
}

// Score runs Score over slots in a new cycle about pod.
func (h *Harness) Score(pod *Pod, slots ...uint32) ([]int64, error) {
	h.cycle(pod)
	out := make([]int64, len(slots))
	if st := scoreBatch(slots, out); st != nil {
		return nil, *st
	}
	return out, nil
}

// NormalizeScore runs NormalizeScore on raw scores in a new cycle about pod.
func (h *Harness) NormalizeScore(pod *Pod, scores ...int64) ([]int64, error) {
	h.cycle(pod)
	out := append([]int64{}, scores...)
	if st := normalizeBatch(out); st != nil {
		return nil, *st
	}
	return out, nil
}

// Logs returns and forgets what the plugin (and the SDK) logged, as "level: message".
func (*Harness) Logs() []string {
	l := fake.logs
	fake.logs = nil
	return l
}

// PodFetches is how many times the cycle's pod was fetched from the host (host.cycle-pod) since NewHarness.
func (*Harness) PodFetches() int { return fake.fetches }
