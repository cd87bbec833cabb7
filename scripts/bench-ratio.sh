#!/usr/bin/env bash
# Benchmark (a)'s Wasm/native ratio across fresh processes.
#
# Each run of the whole-cycle bench interleaves native and Wasm cycles, so drift of the machine cancels out within
# a run. What does not cancel is where each process happens to place the two clusters' node data in memory: the
# same binary gives ratios a few percent apart from one process to the next. So the figure worth quoting is the
# spread over several processes, which this prints: one line per process, then the median, min and max.
#
# Usage: scripts/bench-ratio.sh [PROCESSES] [SECONDS_PER_PROCESS]   (defaults 12 and 5)
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-12}
secs=${2:-5}

bin=$(cargo bench -p kube-wasm-scheduler --bench wasm --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
if [[ -z "$bin" || ! -x "$bin" ]]; then
  echo "bench-ratio: could not build the wasm bench (run: cargo bench -p kube-wasm-scheduler --bench wasm --no-run)" >&2
  exit 2
fi

ratios=()
for ((i = 1; i <= runs; i++)); do
  # The ratio line printed after the Wasm variant covers both variants' cycles of that phase.
  line=$(cd host && "$bin" --bench 'cycle.*/wasm' --warm-up-time 1 --measurement-time "$secs" 2>&1 |
    grep 'while measuring wasm' | sed 's/.*wasm\/native = //')
  echo "process $i: wasm/native = $line"
  ratios+=("${line%% *}")
done

printf '%s\n' "${ratios[@]}" | sort -n | awk -v cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
  -v cores="$(nproc)" '
  { r[NR] = $1 }
  END {
    m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
    printf "whole cycle, 5,000 nodes, wasm/native over %d processes: median %.3f, min %.3f, max %.3f (%s, %d cores)\n", NR, m, r[1], r[NR], cpu, cores
  }'
