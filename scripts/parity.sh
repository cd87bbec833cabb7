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

say "kube-apiserver, etcd, kube-scheduler (scripts/build-kube.sh --with-kube-scheduler)"
KUBE_BIN="$("$ROOT/scripts/build-kube.sh" --with-kube-scheduler | tail -1)"
[[ -x "$KUBE_BIN/kube-scheduler" ]] || die "no $KUBE_BIN/kube-scheduler"

if [[ -n "${KWS_BIN:-}" ]]; then
  [[ -x "$KWS_BIN" ]] || die "KWS_BIN=$KWS_BIN is not an executable"
else
  say "kube-wasm-scheduler: cargo build --bin kube-wasm-scheduler (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
  (cd "$ROOT" && cargo build --bin kube-wasm-scheduler)
  KWS_BIN="$CARGO_TARGET_DIR/debug/kube-wasm-scheduler"
fi

if [[ -z "${GO:-}" ]]; then
  if command -v go >/dev/null 2>&1; then GO=go; else GO=/usr/local/go/bin/go; fi
fi
say "harness: go build (bench/live/parity, client-go v0.34.4) -> $TOOLS/parity"
mkdir -p "$TOOLS"
# Built to a name of its own, then renamed: two runs at once never execute a half-written file.
(cd "$ROOT/bench/live" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -o "$TOOLS/parity.$$" ./parity) \
  || die "go build failed in bench/live"
mv -f "$TOOLS/parity.$$" "$TOOLS/parity"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PIN="$OUT/.bin"
HARNESS_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$HARNESS_PID" ]] && kill -0 "$HARNESS_PID" 2>/dev/null; then
    kill -TERM "$HARNESS_PID" 2>/dev/null || true
    wait "$HARNESS_PID" 2>/dev/null || true
  fi
  if [[ -d "$CP" ]]; then
    "$ROOT/scripts/control-plane.sh" down "$CP" --purge >/dev/null 2>&1 || true
  fi
  rm -rf -- "$PIN"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Pin the binary under test: a hard link keeps this build even if cargo replaces the file during the run.
mkdir -p "$PIN"
ln -f "$KWS_BIN" "$PIN/kube-wasm-scheduler" 2>/dev/null || cp "$KWS_BIN" "$PIN/kube-wasm-scheduler"

say "control plane in $CP"
"$ROOT/scripts/control-plane.sh" up "$CP" >/dev/null

"$TOOLS/parity" \
  --kubeconfig "$CP/kubeconfig" --out "$OUT" \
  --kube-scheduler "$KUBE_BIN/kube-scheduler" --ours "$PIN/kube-wasm-scheduler" \
  --seeds "${PARITY_SEEDS:-5}" --probes "${PARITY_PROBES:-80}" --nodes "${PARITY_NODES:-40}" \
  "$@" &
HARNESS_PID=$!
rc=0
wait "$HARNESS_PID" || rc=$?
HARNESS_PID=""
exit "$rc"
