#!/usr/bin/env bash
# Builds the priority-label JavaScript guest into a component: build.sh OUTPUT.wasm
# Needs node and @bytecodealliance/componentize-js (scripts/setup-wasm.sh js).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
modules="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}/tools/js/node_modules"
if ! command -v node >/dev/null 2>&1; then
  echo "priority-label-js: node not found" >&2
  exit 1
fi
if [ ! -f "$modules/@bytecodealliance/componentize-js/package.json" ]; then
  echo "priority-label-js: componentize-js not found in $modules; run scripts/setup-wasm.sh js" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
# componentize-js maps the working directory into the build sandbox (so that ./glue.js resolves): run it here.
cd "$here"
node "$here/../../scripts/js-componentize.mjs" "$modules" "$here/../../wit" "$here/priority-label.js" "$out" filter-score-plugin
