#!/usr/bin/env bash
# Builds the chatty Python test fixture into a component: build.sh OUTPUT.wasm (the glue is priority-label-py's).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit"
export PATH="$HOME/.cache/kube-wasm-scheduler/tools/bin:$PATH"
if ! command -v componentize-py >/dev/null 2>&1; then
  echo "chatty-py: componentize-py not found; run scripts/setup-wasm.sh python" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cp "$here/app.py" "$here/../priority-label-py/plugin_glue.py" "$src/"
componentize-py -d "$wit" -w filter-score-plugin componentize app -p "$src" -o "$out"
