//go:build wasip1

package kws

// The canonical ABI of the filter-score-plugin world (kws:plugin@0.2.1), written by hand for the standard Go
// toolchain: //go:wasmexport and //go:wasmimport take only scalars and pointers, so every list, string and
// record is read from and written to linear memory here, at the offsets the Component Model's canonical ABI
// gives the WIT types in wit/types.wit (32-bit pointers; a record's fields at their natural alignment; a
// variant's payload after its discriminant, aligned to the largest case).
//
// Memory the host reads or writes must not move or be collected while it does: Go's heap does not move, and
// everything handed to the host is kept in pins until the host is done (the post-return call of an export, or
// the end of an import call), because the collector cannot see the host's references.

import (
	"runtime"
	"unsafe"
)

// pins keeps alive what the host is writing (cabi_realloc) or about to read (an export's answer).
var pins []unsafe.Pointer

// pin keeps p alive until unpin(mark) with a mark taken before it.
func pin(p unsafe.Pointer) { pins = append(pins, p) }

// unpin releases what was pinned since mark (len(pins) when it was taken).
func unpin(mark int) {
	clear(pins[mark:])
	pins = pins[:mark]
}

// alloc is size bytes of Go memory aligned to align (at most 8: the contract's largest alignment), pinned.
func alloc(size, align uint32) unsafe.Pointer {
	if size == 0 {
		return nil // address 0 is aligned, and nothing is read or written there
	}
	// A []uint64 is 8-aligned, which covers every alignment of the contract.
	p := unsafe.Pointer(unsafe.SliceData(make([]uint64, (size+7)/8)))
	pin(p)
	return p
}

// cannotLeave tells the host's adapter for Go (host/src/wasm/wasip1_for_go.wat) that the guest may not call
// out of the component: the host is running cabi_realloc or a post-return function, where the component model
// forbids it, and Go's allocator reads the clock.
//
//go:wasmimport wasi_snapshot_preview1 kws_cannot_leave
func cannotLeave(on uint32)

// cabiRealloc is the allocator the host calls to place an export's arguments and an import's results in
// guest memory.
//
//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	cannotLeave(1)
	defer cannotLeave(0)
	p := alloc(newSize, align)
	if oldSize > 0 {
		copy(unsafe.Slice((*byte)(p), newSize), unsafe.Slice((*byte)(ptr(old)), min(oldSize, newSize)))
	}
	return addr(p)
}

// ---- reading and writing linear memory ----

// ptr is the Go pointer for a guest address from the host (memory from cabi_realloc, so Go's own heap; Go's
// wasm pointers are linear-memory addresses).
func ptr(a uint32) unsafe.Pointer { return unsafe.Add(nil, a) }

// addr is the guest address of a Go pointer.
func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

func u8at(p unsafe.Pointer, off uintptr) uint8   { return *(*uint8)(unsafe.Add(p, off)) }
func u32at(p unsafe.Pointer, off uintptr) uint32 { return *(*uint32)(unsafe.Add(p, off)) }
func s64at(p unsafe.Pointer, off uintptr) int64  { return *(*int64)(unsafe.Add(p, off)) }

func putU8(p unsafe.Pointer, off uintptr, v uint8)   { *(*uint8)(unsafe.Add(p, off)) = v }
func putU32(p unsafe.Pointer, off uintptr, v uint32) { *(*uint32)(unsafe.Add(p, off)) = v }

// list is the (pointer, length) of the list<T> at p+off.
func list(p unsafe.Pointer, off uintptr) (unsafe.Pointer, int) {
	return ptr(u32at(p, off)), int(u32at(p, off+4))
}

// str copies the string at p+off out of the host's buffer.
func str(p unsafe.Pointer, off uintptr) string {
	b, n := list(p, off)
	return string(unsafe.Slice((*byte)(b), n))
}

// listAt reads the list<T> at p+off, whose elements are size bytes apart, each with read; nil when empty.
func listAt[T any](p unsafe.Pointer, off uintptr, size int, read func(e unsafe.Pointer) T) []T {
	b, n := list(p, off)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = read(unsafe.Add(b, i*size))
	}
	return out
}

// The element readers, each with its size in the comment where the caller gives it.

func strAt(e unsafe.Pointer) string { return str(e, 0) } // 8 bytes

func kvAt(e unsafe.Pointer) KV { return KV{Key: str(e, 0), Value: str(e, 8)} } // tuple<string, string>: 16

func scalarAt(e unsafe.Pointer) Scalar { return Scalar{Name: str(e, 0), Value: s64at(e, 8)} } // tuple<string, s64>: 16

func taintAt(e unsafe.Pointer) Taint {
	return Taint{Key: str(e, 0), Value: str(e, 8), Effect: str(e, 16)}
} // 24

func tolerationAt(e unsafe.Pointer) Toleration { // 32
	return Toleration{Key: str(e, 0), Operator: str(e, 8), Value: str(e, 16), Effect: str(e, 24)}
}

func requirementAt(e unsafe.Pointer) SelectorRequirement { // 24
	return SelectorRequirement{Key: str(e, 0), Operator: str(e, 8), Values: listAt(e, 16, 8, strAt)}
}

func termAt(e unsafe.Pointer) NodeSelectorTerm { // 16
	return NodeSelectorTerm{MatchExpressions: listAt(e, 0, 24, requirementAt), MatchFields: listAt(e, 8, 24, requirementAt)}
}

func preferredAt(e unsafe.Pointer) PreferredTerm { // weight s32, then the term: 20
	return PreferredTerm{Weight: int32(u32at(e, 0)), Term: termAt(unsafe.Add(e, 4))}
}

// resources reads a resources record (40 bytes, align 8) at p+off.
func resources(p unsafe.Pointer, off uintptr) Resources {
	r := unsafe.Add(p, off)
	return Resources{
		MilliCPU:         s64at(r, 0),
		Memory:           s64at(r, 8),
		EphemeralStorage: s64at(r, 16),
		Pods:             s64at(r, 24),
		Scalar:           listAt(r, 32, 16, scalarAt),
	}
}

// node reads a node record (112 bytes, align 8) at p.
func node(p unsafe.Pointer) *Node {
	return &Node{
		Name:          str(p, 0),
		Labels:        listAt(p, 8, 16, kvAt),
		Taints:        listAt(p, 16, 24, taintAt),
		Allocatable:   resources(p, 24),
		Requested:     resources(p, 64),
		Unschedulable: u8at(p, 104) != 0,
		PodCount:      u32at(p, 108),
	}
}

// pod reads a pod record (184 bytes, align 8) at p.
func pod(p unsafe.Pointer) *Pod {
	out := &Pod{
		UID:                   str(p, 0),
		Namespace:             str(p, 8),
		Name:                  str(p, 16),
		Labels:                listAt(p, 24, 16, kvAt),
		Annotations:           listAt(p, 32, 16, kvAt),
		Priority:              int32(u32at(p, 40)),
		QoSClass:              QoSClass(u8at(p, 44)),
		Requests:              resources(p, 48),
		Limits:                resources(p, 88),
		Tolerations:           listAt(p, 128, 32, tolerationAt),
		NodeSelector:          listAt(p, 136, 16, kvAt),
		RequiredNodeAffinity:  listAt(p, 144, 16, termAt),
		PreferredNodeAffinity: listAt(p, 152, 20, preferredAt),
		SchedulerName:         str(p, 160),
	}
	if u8at(p, 168) == 1 { // option<string>: the string at 172
		out.NodeName = str(p, 172)
	}
	return out
}

// putStr writes the string s as (pointer, length) at p+off; its bytes stay pinned until the host has read them.
func putStr(p unsafe.Pointer, off uintptr, s string) {
	d := unsafe.Pointer(unsafe.StringData(s))
	if d != nil {
		pin(d)
	}
	putU32(p, off, addr(d))
	putU32(p, off+4, uint32(len(s)))
}

// putStatus writes a status record (code u8, reasons list<string> at 4; 12 bytes) at p.
func putStatus(p unsafe.Pointer, st Status) {
	putU8(p, 0, uint8(st.Code))
	b := alloc(uint32(len(st.Reasons))*8, 4)
	for i, r := range st.Reasons {
		putStr(b, uintptr(i)*8, r)
	}
	putU32(p, 4, addr(b))
	putU32(p, 8, uint32(len(st.Reasons)))
}

// putU32s writes a list<u32> as (pointer, length) at p+off.
func putU32s(p unsafe.Pointer, off uintptr, v []uint32) {
	d := unsafe.Pointer(unsafe.SliceData(v))
	if len(v) == 0 {
		d = nil
	} else {
		pin(d)
	}
	putU32(p, off, addr(d))
	putU32(p, off+4, uint32(len(v)))
}

// ret is the return area of the exports that answer through memory (the largest, filter-result, is 24 bytes).
// A package variable, so it never moves; the host reads it before the next export call can overwrite it.
var ret [4]uint64

func retArea() unsafe.Pointer { return unsafe.Pointer(&ret) }

// ---- exports ----

// validate: result<_, string>, the discriminant at 0 and the error string at 4.
//
//go:wasmexport kws:plugin/config@0.2.1#validate
func exportValidate() uint32 {
	r := retArea()
	if err := validate(); err != nil {
		putU8(r, 0, 1)
		putStr(r, 4, err.Error())
	} else {
		putU8(r, 0, 0)
	}
	return addr(r)
}

// postReturn releases what an export's answer pinned, once the host has read it.
func postReturn() {
	cannotLeave(1)
	unpin(0)
	cannotLeave(0)
}

//go:wasmexport cabi_post_kws:plugin/config@0.2.1#validate
func postValidate(uint32) { postReturn() }

// apply: list<node-change>, 128 bytes each: the discriminant at 0 (0 upsert, 1 remove), the slot at 8, an
// upserted node at 16.
//
//go:wasmexport kws:plugin/nodes@0.2.1#apply
func exportApply(changes, n uint32) {
	for i := uint32(0); i < n; i++ {
		c := unsafe.Add(ptr(changes), i*128)
		change := NodeChange{Slot: u32at(c, 8)}
		if u8at(c, 0) == 0 {
			change.Node = node(unsafe.Add(c, 16))
		}
		applyChange(change)
	}
	unpin(0) // everything was copied out of the host's buffers
}

//go:wasmexport kws:plugin/cycle@0.2.1#begin
func exportBegin() { begin() }

// slots is the list<node-slot> argument, read in place (it stays pinned until post-return).
func slots(p, n uint32) []uint32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(ptr(p)), n)
}

// filter: filter-result is three lists, at 0, 8 and 16; a status is 12 bytes.
//
//go:wasmexport kws:plugin/filter@0.2.1#filter
func exportFilter(p, n uint32) uint32 {
	statuses, rejected, verdicts := filterBatch(slots(p, n))
	r := retArea()
	b := alloc(uint32(len(statuses))*12, 4)
	for i, st := range statuses {
		putStatus(unsafe.Add(b, i*12), st)
	}
	putU32(r, 0, addr(b))
	putU32(r, 4, uint32(len(statuses)))
	putU32s(r, 8, rejected)
	putU32s(r, 16, verdicts)
	return addr(r)
}

//go:wasmexport cabi_post_kws:plugin/filter@0.2.1#filter
func postFilter(uint32) { postReturn() }

// putScores writes result<list<s64>, status>: the discriminant at 0, the list or the status at 4.
func putScores(scores []int64, err *Status) uint32 {
	r := retArea()
	if err != nil {
		putU8(r, 0, 1)
		putStatus(unsafe.Add(r, 4), *err)
		return addr(r)
	}
	putU8(r, 0, 0)
	d := unsafe.Pointer(unsafe.SliceData(scores))
	if len(scores) == 0 {
		d = nil
	} else {
		pin(d)
	}
	putU32(r, 4, addr(d))
	putU32(r, 8, uint32(len(scores)))
	return addr(r)
}

//go:wasmexport kws:plugin/score@0.2.1#score
func exportScore(p, n uint32) uint32 {
	out := make([]int64, n)
	return putScores(out, scoreBatch(slots(p, n), out))
}

//go:wasmexport cabi_post_kws:plugin/score@0.2.1#score
func postScore(uint32) { postReturn() }

//go:wasmexport kws:plugin/score@0.2.1#normalize-score
func exportNormalizeScore(p, n, scores, k uint32) uint32 {
	out := make([]int64, k)
	if k > 0 {
		copy(out, unsafe.Slice((*int64)(ptr(scores)), k))
	}
	return putScores(out, normalizeBatch(out))
}

//go:wasmexport cabi_post_kws:plugin/score@0.2.1#normalize-score
func postNormalizeScore(uint32) { postReturn() }

// ---- imports (kws:plugin/host) ----

//go:wasmimport kws:plugin/host@0.2.1 log
func importLog(level, msg, n uint32)

//go:wasmimport kws:plugin/host@0.2.1 config
func importConfig(ret uint32)

//go:wasmimport kws:plugin/host@0.2.1 random
func importRandom() uint64

//go:wasmimport kws:plugin/host@0.2.1 now-ns
func importNowNs() uint64

//go:wasmimport kws:plugin/host@0.2.1 cycle-state-write
func importCycleStateWrite(key, keyLen, value, valueLen uint32)

//go:wasmimport kws:plugin/host@0.2.1 cycle-state-read
func importCycleStateRead(key, keyLen, ret uint32)

//go:wasmimport kws:plugin/host@0.2.1 cycle-pod
func importCyclePod(ret uint32)

//go:wasmimport kws:plugin/host@0.2.1 waiting-pods
func importWaitingPods(ret uint32)

// allow-waiting-pod(uid, plugin: option<string>): the option is (discriminant, pointer, length).
//
//go:wasmimport kws:plugin/host@0.2.1 allow-waiting-pod
func importAllowWaitingPod(uid, uidLen, some, plugin, pluginLen uint32) uint32

//go:wasmimport kws:plugin/host@0.2.1 reject-waiting-pod
func importRejectWaitingPod(uid, uidLen, some, plugin, pluginLen, reason, reasonLen uint32) uint32

// importRet is where the host writes an import's answer (the largest, option<pod>, is 192 bytes); a package
// variable, so it does not move while the host writes it.
var importRet [24]uint64

func importArea() unsafe.Pointer { return unsafe.Pointer(&importRet) }

// strArg is the (address, length) of s for an import's argument; the caller keeps s alive across the call.
func strArg(s string) (uint32, uint32) {
	return addr(unsafe.Pointer(unsafe.StringData(s))), uint32(len(s))
}

func hostLog(level Level, message string) {
	p, n := strArg(message)
	importLog(uint32(level), p, n)
	runtime.KeepAlive(message)
}

func hostConfig() string {
	mark := len(pins)
	importConfig(addr(importArea()))
	s := str(importArea(), 0)
	unpin(mark)
	return s
}

func hostRandom() uint64 { return importRandom() }

func hostNowNs() uint64 { return importNowNs() }

func hostCycleStateWrite(key string, value []byte) {
	kp, kn := strArg(key)
	importCycleStateWrite(kp, kn, addr(unsafe.Pointer(unsafe.SliceData(value))), uint32(len(value)))
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
}

// hostCycleStateRead: option<list<u8>>, the discriminant at 0 and the list at 4.
func hostCycleStateRead(key string) ([]byte, bool) {
	mark := len(pins)
	kp, kn := strArg(key)
	importCycleStateRead(kp, kn, addr(importArea()))
	runtime.KeepAlive(key)
	r := importArea()
	var out []byte
	ok := u8at(r, 0) == 1
	if ok {
		b, n := list(r, 4)
		out = append([]byte{}, unsafe.Slice((*byte)(b), n)...)
	}
	unpin(mark)
	return out, ok
}

// hostCyclePod: option<pod>, the discriminant at 0 and the pod at 8.
func hostCyclePod() *Pod {
	mark := len(pins)
	importCyclePod(addr(importArea()))
	r := importArea()
	var out *Pod
	if u8at(r, 0) == 1 {
		out = pod(unsafe.Add(r, 8))
	}
	unpin(mark)
	return out
}

// waitingPodAt reads a waiting-pod record (the pod at 0, the node at 184, pending-plugins at 192; 200 bytes).
func waitingPodAt(e unsafe.Pointer) WaitingPod {
	return WaitingPod{Pod: pod(e), Node: str(e, 184), PendingPlugins: listAt(e, 192, 8, strAt)}
}

// hostWaitingPods: list<waiting-pod>, copied out of the host's buffer.
func hostWaitingPods() []WaitingPod {
	mark := len(pins)
	importWaitingPods(addr(importArea()))
	out := listAt(importArea(), 0, 200, waitingPodAt)
	unpin(mark)
	return out
}

// hostAllowWaitingPod allows on behalf of this plugin (plugin: none).
func hostAllowWaitingPod(uid string) bool {
	p, n := strArg(uid)
	ok := importAllowWaitingPod(p, n, 0, 0, 0) != 0
	runtime.KeepAlive(uid)
	return ok
}

func hostRejectWaitingPod(uid, reason string) bool {
	p, n := strArg(uid)
	rp, rn := strArg(reason)
	ok := importRejectWaitingPod(p, n, 0, 0, 0, rp, rn) != 0
	runtime.KeepAlive(uid)
	runtime.KeepAlive(reason)
	return ok
}
