#!/usr/bin/env bash
# Builds this sample (gang-js) into a component: build.sh OUTPUT.wasm. `kube-wasm-scheduler plugin build` (KWS_BIN, which
# scripts/build-guests.sh sets) builds it from plugin.yaml, the same way it builds a project `plugin new` wrote;
# intermediate files go to build/ here (gitignored). Tools: scripts/setup-wasm.sh js.
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
"${KWS_BIN:?KWS_BIN: the kube-wasm-scheduler binary (scripts/build-guests.sh sets it)}" plugin build "$here" -o "$out" >/dev/null
