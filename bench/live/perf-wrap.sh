#!/usr/bin/env bash
# Records a perf profile of every scheduler run, for bench/live/guest-share.py; use it as KWS_BIN:
#
#   KWS_PERF_BIN=/path/to/kube-wasm-scheduler KWS_BIN=bench/live/perf-wrap.sh make bench-live ...
#
# Each run's profile is written to KWS_PERF_OUT (default /tmp/kws-perf) as guests-<ns>.data when its configuration
# loads a .wasm component, default-<ns>.data otherwise. The driver then measures perf's process, not the
# scheduler's: read CPU from the profiles, not from the report.
set -euo pipefail
: "${KWS_PERF_BIN:?KWS_PERF_BIN: the kube-wasm-scheduler binary to profile}"
if [[ "${1:-}" != --config ]]; then
  exec "$KWS_PERF_BIN" "$@"
fi
out="${KWS_PERF_OUT:-/tmp/kws-perf}"
mkdir -p "$out"
kind=default
if grep -q '\.wasm' "$2"; then
  kind=guests
fi
# Names the compiled guest code in the profile (/tmp/perf-<pid>.map).
export KWS_WASM_PERFMAP=1
exec perf record -q -F 499 --call-graph dwarf,16384 -o "$out/$kind-$(date +%s%N).data" -- "$KWS_PERF_BIN" "$@"
