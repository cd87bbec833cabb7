//go:build wasip1 && kws_gang

package kws

// The exports beyond the filter-score-plugin world: the pod view, events, PreFilter, Reserve and Permit (the
// gang-plugin world). Go keeps every //go:wasmexport of a linked package in the module, and a module's exports
// name its world when `plugin componentize` is given none, so these are compiled in only with the build tag
// kws_gang (scripts/go-guest.sh passes it for a guest of that world): a Filter and Score plugin carries none of
// them, and the host never sends it the pod view.
//
// Their parameters flatten to more than 16 values (a pod alone does), so the host passes one pointer to them in
// memory, laid out as a tuple.

import "unsafe"

// knownPod reads a known-pod record (the pod at 0, the state at 184, first-seen-ns at 192; 200 bytes) at p.
func knownPod(p unsafe.Pointer) *KnownPod {
	return &KnownPod{Pod: pod(p), State: PodState(u8at(p, 184)), FirstSeenNs: uint64(s64at(p, 192))}
}

// apply: list<pod-change>, 208 bytes each: the discriminant at 0 (0 upsert, 1 remove, 2 reset), the known pod or
// the UID at 8.
//
//go:wasmexport kws:plugin/pods@0.2.1#apply
func exportPodsApply(changes, n uint32) {
	for i := uint32(0); i < n; i++ {
		c := unsafe.Add(ptr(changes), i*208)
		switch u8at(c, 0) {
		case 0:
			applyPodChange(PodChange{Known: knownPod(unsafe.Add(c, 8))})
		case 1:
			applyPodChange(PodChange{UID: str(c, 8)})
		default:
			applyPodChange(PodChange{Reset: true})
		}
	}
	unpin(0) // everything was copied out of the host's buffers
}

// events-to-register: list<cluster-event>, 2 bytes each (the resource, then the actions).
//
//go:wasmexport kws:plugin/events@0.2.1#events-to-register
func exportEventsToRegister() uint32 {
	events := eventsToRegister()
	b := alloc(uint32(len(events))*2, 1)
	for i, e := range events {
		putU8(b, uintptr(i)*2, uint8(e.Resource))
		putU8(b, uintptr(i)*2+1, uint8(e.Actions))
	}
	r := retArea()
	putU32(r, 0, addr(b))
	putU32(r, 4, uint32(len(events)))
	return addr(r)
}

//go:wasmexport cabi_post_kws:plugin/events@0.2.1#events-to-register
func postEventsToRegister(uint32) { postReturn() }

// eventObject reads option<event-object> at p (200 bytes): the option's discriminant at 0, the variant's at 8
// (0 pod, 1 node), its payload at 16.
func eventObject(p unsafe.Pointer) *EventObject {
	if u8at(p, 0) == 0 {
		return nil
	}
	if u8at(p, 8) == 0 {
		return &EventObject{Pod: pod(unsafe.Add(p, 16))}
	}
	return &EventObject{Node: node(unsafe.Add(p, 16))}
}

// queueing-hint: (pod at 0, cluster-event at 184, old at 192, new at 392), the hint as the result.
//
//go:wasmexport kws:plugin/events@0.2.1#queueing-hint
func exportQueueingHint(args uint32) uint32 {
	a := ptr(args)
	p := pod(a)
	event := ClusterEvent{Resource: EventResource(u8at(a, 184)), Actions: EventActions(u8at(a, 185))}
	old, new := eventObject(unsafe.Add(a, 192)), eventObject(unsafe.Add(a, 392))
	unpin(0)
	return uint32(queueingHint(p, event, old, new))
}

// pre-filter: the pod at the pointer; pre-filter-result is the status at 0 and option<list<string>> at 12 (always
// none here: the SDK's PreFilter does not narrow the nodes).
//
//go:wasmexport kws:plugin/pre-filter@0.2.1#pre-filter
func exportPreFilter(args uint32) uint32 {
	st := preFilter(pod(ptr(args)))
	r := retArea()
	putStatus(r, st)
	putU8(r, 12, 0)
	return addr(r)
}

//go:wasmexport cabi_post_kws:plugin/pre-filter@0.2.1#pre-filter
func postPreFilter(uint32) { postReturn() }

// putSuccess answers a status-returning export with success.
func putSuccess() uint32 {
	r := retArea()
	putStatus(r, Success())
	return addr(r)
}

// add-pod and remove-pod, PreFilter's what-ifs (pod, pod, node-slot): success, as the SDK keeps no cycle data.
//
//go:wasmexport kws:plugin/pre-filter@0.2.1#add-pod
func exportAddPod(uint32) uint32 { return putSuccess() }

//go:wasmexport cabi_post_kws:plugin/pre-filter@0.2.1#add-pod
func postAddPod(uint32) { postReturn() }

//go:wasmexport kws:plugin/pre-filter@0.2.1#remove-pod
func exportRemovePod(uint32) uint32 { return putSuccess() }

//go:wasmexport cabi_post_kws:plugin/pre-filter@0.2.1#remove-pod
func postRemovePod(uint32) { postReturn() }

// podAndNode reads the (pod at 0, string at 184) parameters of Reserve, Unreserve and Permit.
func podAndNode(args uint32) (*Pod, string) {
	a := ptr(args)
	return pod(a), str(a, 184)
}

//go:wasmexport kws:plugin/reserve@0.2.1#reserve
func exportReserve(args uint32) uint32 {
	st := reserve(podAndNode(args))
	r := retArea()
	putStatus(r, st)
	return addr(r)
}

//go:wasmexport cabi_post_kws:plugin/reserve@0.2.1#reserve
func postReserve(uint32) { postReturn() }

//go:wasmexport kws:plugin/reserve@0.2.1#unreserve
func exportUnreserve(args uint32) {
	p, n := podAndNode(args)
	unpin(0)
	unreserve(p, n)
}

// permit: permit-result is the status at 0 and timeout-ms at 16.
//
//go:wasmexport kws:plugin/permit@0.2.1#permit
func exportPermit(args uint32) uint32 {
	st, ms := permit(podAndNode(args))
	r := retArea()
	putStatus(r, st)
	*(*uint64)(unsafe.Add(r, 16)) = ms
	return addr(r)
}

//go:wasmexport cabi_post_kws:plugin/permit@0.2.1#permit
func postPermit(uint32) { postReturn() }
