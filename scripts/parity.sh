#!/usr/bin/env bash
# make parity: kube-wasm-scheduler's decisions beside kube-scheduler's (same version as the test kube-apiserver),
# live on one throwaway control plane, and the simulator's for the same cluster files. Seeded random clusters and
# probe pods (bench/live/parity); prints agreement, ties (reported apart) and every divergence; exit 1 on any.
#
# Usage: scripts/parity.sh [harness flags...]     (e.g. --seeds 3-7 --probes 40; `parity -h` lists them)
# Environment:
#   PARITY_SEEDS     seeds: a count N (1..N), a range "3-7" or a list "1,4,9" (default 5)
#   PARITY_PROBES    probes per seed (default 80)
#   PARITY_NODES     nodes per seed (default 40)
#   PARITY_SCENARIOS directory of scenario files run before the seeds (default bench/live/parity/scenarios; "" none):
#                    hand-written clusters that put one upstream feature in front of both schedulers (scenarios.go)
#   PARITY_OUT       output directory (default ~/.cache/kube-wasm-scheduler/parity/<timestamp>): results.json,
#                    each seed's cluster files (replay any probe with `simulate`), scheduler configs and logs
#   KWS_BIN          kube-wasm-scheduler binary (default: cargo build --bin kube-wasm-scheduler, the debug build)
#   CARGO_TARGET_DIR default ~/.cache/kube-wasm-scheduler/target
# The control plane lives in ~/.cache/kube-wasm-scheduler/parity/cp-<timestamp>-<pid> and is stopped and deleted at
# the end, also on failure or Ctrl-C.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
STAMP="$(date +%Y%m%d-%H%M%S)-$$"
OUT="${PARITY_OUT:-$CACHE/parity/$STAMP}"
CP="$CACHE/parity/cp-$STAMP"
TOOLS="$CACHE/parity/bin"

say() { echo "parity: $*" >&2; }
die() { echo "parity: error: $*" >&2; exit 2; }

# shellcheck source=live-lib.sh
source "$ROOT/scripts/live-lib.sh"
live_kube_bin
live_kws_bin debug
live_go
say "harness: go build (bench/live/parity, client-go v0.37.2) -> $TOOLS/parity"
mkdir -p "$TOOLS"
# Built to a name of its own, then renamed: two runs at once never execute a half-written file.
(cd "$ROOT/bench/live" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -o "$TOOLS/parity.$$" ./parity) \
  || die "go build failed in bench/live"
mv -f "$TOOLS/parity.$$" "$TOOLS/parity"

live_up

live_run "$TOOLS/parity" \
  --kubeconfig "$CP/kubeconfig" --out "$OUT" \
  --kube-scheduler "$KUBE_BIN/kube-scheduler" --ours "$PIN/kube-wasm-scheduler" \
  --scenarios "${PARITY_SCENARIOS-$ROOT/bench/live/parity/scenarios}" \
  --seeds "${PARITY_SEEDS:-5}" --probes "${PARITY_PROBES:-80}" --nodes "${PARITY_NODES:-40}" \
  "$@"
exit "$LIVE_RC"
