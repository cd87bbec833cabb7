#!/usr/bin/env bash
# make bench-suite: kube-scheduler's own scheduler_perf workloads (test/integration/scheduler_perf of the
# k8s.io/kubernetes module, read where the Go module cache holds it, never copied here) run against one throwaway
# kube-apiserver by kube-scheduler v1.37.2 and kube-wasm-scheduler in turn. See docs/performance.md.
#
# Usage: bench/suite/run.sh [suite flags...]        (`go run ./bench/suite -h` lists them)
# Report: go -C bench/suite run . --report A,B --out C   (or ~/.cache/kube-wasm-scheduler/bench-suite/bin/suite, which
#         a run builds): earlier runs' results.json merged into C's summary.md, results.json and plot-<family>.svg,
#         nothing started; absolute paths, as go -C runs it in bench/suite
# Environment:
#   SUITE              short (performance+short, default), all (every performance workload),
#                      integration (integration-test+short)
#   FILTER             regexp on TestCase/Workload (default: all selected)
#   BENCH_REPS         interleaved repetitions: the contenders take turns within each workload (default 1)
#   BENCH_CONTENDERS   default "kube ours"; also ours-guests (the sample guests) and null (the null binder)
#   BENCH_OUT          output directory (default ~/.cache/kube-wasm-scheduler/bench-suite/<timestamp>)
#   KWS_BIN            kube-wasm-scheduler binary (default: cargo build --release)
#   KUBE_VERSION       the k8s.io/kubernetes module whose workloads run (default as scripts/build-kube.sh: v1.37.2)
# Output (in BENCH_OUT): results.json, summary.md (a Markdown table, what was not run and why, and the contenders
# side by side against the targets), plot-<family>.svg (one chart per workload family), runs/<run>/
# (each scheduler's config and log). The control plane is stopped and deleted at the end, also on failure or Ctrl-C.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT="${BENCH_OUT:-$CACHE/bench-suite/$STAMP}"
CP="$CACHE/bench-suite/cp-$STAMP"
TOOLS="$CACHE/bench-suite/bin"
CONTENDERS="${BENCH_CONTENDERS:-kube ours}"
KUBE_VERSION="${KUBE_VERSION:-$(sed -n 's/^KUBE_VERSION="\${KUBE_VERSION:-\(v[0-9.]*\)}"$/\1/p' "$ROOT/scripts/build-kube.sh")}"

say() { echo "bench-suite: $*" >&2; }
die() { echo "bench-suite: error: $*" >&2; exit 1; }

[[ -n "$KUBE_VERSION" ]] || die "no KUBE_VERSION (scripts/build-kube.sh has no default?)"
# shellcheck source=../../scripts/live-lib.sh
source "$ROOT/scripts/live-lib.sh"
live_kube_bin
live_kws_bin release
if [[ " $CONTENDERS " == *" ours-guests "* ]]; then
  "$ROOT/scripts/build-guests.sh" qos-sort priority-label random-score
fi

live_go
PERF="$("$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/test/integration/scheduler_perf"
[[ -d "$PERF" ]] || die "no $PERF (go mod download k8s.io/kubernetes@$KUBE_VERSION)"
say "workloads: $PERF"
mkdir -p "$TOOLS"
(cd "$ROOT/bench/suite" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -o "$TOOLS/suite" .) \
  || die "go build failed in bench/suite"
if [[ " $CONTENDERS " == *" null "* ]]; then
  (cd "$ROOT/bench/live" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -o "$TOOLS/" ./nullbinder) || die "go build failed in bench/live"
fi

# The API server gets the feature gates and API versions the selected workloads need (upstream starts its test
# server with the workload's gates); one server is shared, so a gate any of them turns on is on for all.
KWS_APISERVER_FLAGS="$("$TOOLS/suite" --perf-dir "$PERF" --suite "${SUITE:-short}" --filter "${FILTER:-}" --apiserver-flags 2>/dev/null)" \
  || die "suite --apiserver-flags failed"
export KWS_APISERVER_FLAGS
[[ -z "$KWS_APISERVER_FLAGS" ]] || say "kube-apiserver flags: $KWS_APISERVER_FLAGS"
live_up
say "SUITE=${SUITE:-short} FILTER=${FILTER:-} contenders: $CONTENDERS; repetitions: ${BENCH_REPS:-1}; results in $OUT"
live_run "$TOOLS/suite" \
  --control-plane "$CP" --out "$OUT" --perf-dir "$PERF" \
  --suite "${SUITE:-short}" --filter "${FILTER:-}" --reps "${BENCH_REPS:-1}" --contenders "$CONTENDERS" \
  --kube-scheduler "$KUBE_BIN/kube-scheduler" --ours "$PIN/kube-wasm-scheduler" \
  --null-binder "$TOOLS/nullbinder" --guests "$ROOT/guest-plugins/build" \
  "$@"
rc=$LIVE_RC
[[ -s "$OUT/summary.md" ]] && cat "$OUT/summary.md"
say "results in $OUT"
exit "$rc"
