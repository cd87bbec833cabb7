#!/usr/bin/env python3
"""What share of the scheduler's CPU the Wasm guests' own work is, from `perf script` output of live runs.

A pair of live runs strays by more than the guests cost (see docs/performance.md), so the CPU ratio of two
profiles says little about a few percent. A profile of the guests' run says it directly: every sample whose stack
is in a guest call (the host's Wasm module, wasmtime, the compiled guest code), the epoch thread, and the hand-off
of a binding cycle's end to the tail threads is the guests' work; the rest is what the default profile does too.

Record a run with `perf record -F 499 --call-graph dwarf,16384` (frame pointers lose the frames below libc and the
JIT code), then `perf script --no-inline -F comm,ip,sym,dso -i perf.data > run.txt`, and:

    bench/live/guest-share.py run.txt [run2.txt ...]

bench/live/perf-wrap.sh does the recording as `KWS_BIN` of `make bench-live`.
"""

import re
import statistics
import sys
from collections import Counter

# A frame of a guest call: the host's Wasm boundary, wasmtime, or compiled guest code (named by its perf map or
# cached artifact).
GUEST = re.compile(r"kube_wasm_scheduler::wasm::|wasmtime|\.cwasm|wasm\[\d+\]|component-trampolines")
# The tail threads' queue (handing over to it, waiting on it).
HANDOFF = re.compile(r"crossbeam_channel")
# A tail thread going to sleep or waking up.
IDLE = re.compile(r"thread::functions::park|futex_wait|futex_do_wait|sched_yield")
# The rest of a binding cycle's end on the tail threads: the default profile runs it on an async worker, so it is
# listed but not counted as the guests'.
CYCLE_END = "cycle end on the tail threads (not the guests')"


def samples(path):
    """Yields (thread name, frames) per sample of `perf script` output."""
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    yield comm, frames
                comm, frames = None, []
            elif line[0] in " \t":
                frames.append(line.strip())
            else:
                comm, frames = line.split()[0], []
    if comm is not None:
        yield comm, frames


def thread_group(comm):
    """The scheduler's threads by role."""
    if comm.startswith("binding-tail"):
        return "tail threads"
    if comm.startswith("tokio-rt-worker"):
        return "async workers"
    if comm == "scheduling":
        return "scheduling thread"
    # The main thread is named after the binary: it starts the scheduler (and loads the guests).
    return "main thread" if not comm.startswith(("wasm-", "sched-")) else comm


def classify(path):
    """Samples of one run by what they were doing."""
    c = Counter()
    for comm, frames in samples(path):
        c["total"] += 1
        group = thread_group(comm)
        stack = "\n".join(frames)
        if comm == "wasm-epoch":
            c["epoch thread"] += 1
        elif GUEST.search(stack):
            c[f"guest calls on the {group}"] += 1
        elif HANDOFF.search(stack) or (group == "tail threads" and IDLE.search(stack)):
            c["hand-off to the tail threads"] += 1
        elif group == "tail threads":
            c[CYCLE_END] += 1
    return c


def main(paths):
    if not paths:
        sys.exit(__doc__)
    shares = []
    for path in paths:
        c = classify(path)
        total = c.pop("total", 0)
        if not total:
            sys.exit(f"{path}: no samples (is it `perf script` output?)")
        guests = sum(v for k, v in c.items() if k != CYCLE_END)
        shares.append(guests / total)
        print(f"{path}: {total} samples; the guests' own work {guests} = {100 * guests / total:.1f}%")
        for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
            print(f"  {v:6d} {100 * v / total:5.1f}%  {k}")
    if len(shares) > 1:
        print(f"median share over {len(shares)} runs: {100 * statistics.median(shares):.1f}% "
              f"({100 * min(shares):.1f}-{100 * max(shares):.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1:])
