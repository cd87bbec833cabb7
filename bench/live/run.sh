#!/usr/bin/env bash
# make bench-live: kube-wasm-scheduler side by side with kube-scheduler v1.37.2 and a null binder, live on one
# throwaway kube-apiserver, interleaved; prints Markdown tables and draws a plot. See docs/performance.md.
#
# Usage: bench/live/run.sh [driver flags...]        (e.g. --timeout 10m; `driver -h` lists them)
# Environment:
#   BENCH_SIZES        NODESxPODS list (default "500x2000 5000x5000")
#   BENCH_SHAPES       streaming and/or backlog (default "streaming backlog")
#   BENCH_CONTENDERS   order they take turns in (default "kube ours null ours-guests")
#   BENCH_REPS         repetitions (default 2)
#   BENCH_QUICK=1      smoke run: BENCH_SIZES=50x200, BENCH_REPS=1 unless those are set
#   BENCH_OUT          output directory (default ~/.cache/kube-wasm-scheduler/bench-live/<timestamp>)
#   KWS_BIN            kube-wasm-scheduler binary to measure (default: cargo build --release, then
#                      $CARGO_TARGET_DIR/release/kube-wasm-scheduler)
#   CARGO_TARGET_DIR   default ~/.cache/kube-wasm-scheduler/target
# Output (in BENCH_OUT): runs.jsonl/runs.json/runs.csv (one row per run), meta.json, summary.md and summary.json
# (medians, ratios), results.png, runs/<run>/ (each scheduler's config and log).
# The control plane lives in ~/.cache/kube-wasm-scheduler/bench-live/cp-<timestamp> and is stopped and deleted at
# the end, also on failure or Ctrl-C.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
STAMP="$(date +%Y%m%d-%H%M%S)"
if [[ "${BENCH_QUICK:-0}" == 1 ]]; then
  : "${BENCH_SIZES:=50x200}" "${BENCH_REPS:=1}"
fi
SIZES="${BENCH_SIZES:-500x2000 5000x5000}"
SHAPES="${BENCH_SHAPES:-streaming backlog}"
CONTENDERS="${BENCH_CONTENDERS:-kube ours null ours-guests}"
REPS="${BENCH_REPS:-2}"
OUT="${BENCH_OUT:-$CACHE/bench-live/$STAMP}"
CP="$CACHE/bench-live/cp-$STAMP"
TOOLS="$CACHE/bench-live/bin"
VENV="$CACHE/tools/bench-venv"

say() { echo "bench-live: $*" >&2; }
die() { echo "bench-live: error: $*" >&2; exit 1; }

# --- binaries ---------------------------------------------------------------------------------------
# shellcheck source=../../scripts/live-lib.sh
source "$ROOT/scripts/live-lib.sh"
live_kube_bin
live_kws_bin release

if [[ " $CONTENDERS " == *" ours-guests "* ]]; then
  missing=()
  for g in qos-sort priority-label random-score; do
    [[ -f "$ROOT/guest-plugins/build/$g.wasm" ]] || missing+=("$g")
  done
  if ((${#missing[@]})); then
    say "guests: scripts/build-guests.sh ${missing[*]}"
    "$ROOT/scripts/build-guests.sh" "${missing[@]}"
  fi
fi

live_go
say "driver and null binder: go build (bench/live, client-go v0.37.2) -> $TOOLS"
mkdir -p "$TOOLS"
(cd "$ROOT/bench/live" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -ldflags "-s -w" -o "$TOOLS/" ./driver ./nullbinder) \
  || die "go build failed in bench/live"

PYTHON=python3
if "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  PYTHON="$VENV/bin/python"
else
  say "plot: installing matplotlib into $VENV"
  if { [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"; } \
    && "$VENV/bin/pip" install -q --disable-pip-version-check 'matplotlib==3.9.*'; then
    PYTHON="$VENV/bin/python"
  else
    say "warning: could not install matplotlib; tables only, no plot"
  fi
fi

# --- control plane and run --------------------------------------------------------------------------
live_up

say "sizes: $SIZES; shapes: $SHAPES; contenders: $CONTENDERS; repetitions: $REPS; results in $OUT"
live_run "$TOOLS/driver" \
  --control-plane "$CP" --out "$OUT" \
  --sizes "$SIZES" --shapes "$SHAPES" --contenders "$CONTENDERS" --reps "$REPS" \
  --kube-scheduler "$KUBE_BIN/kube-scheduler" --ours "$PIN/kube-wasm-scheduler" --null-binder "$TOOLS/nullbinder" \
  --guests "$ROOT/guest-plugins/build" \
  "$@"
rc=$LIVE_RC

if [[ -s "$OUT/runs.json" ]]; then
  "$PYTHON" "$ROOT/bench/live/report.py" "$OUT" || rc=$((rc ? rc : 1))
fi
say "results in $OUT"
exit "$rc"
