#!/usr/bin/env bash
# Builds the priority-label Python guest into a component: build.sh OUTPUT.wasm
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/py-guest.sh"
py_guest priority-label-py filter-score-plugin "${1:?usage: build.sh OUTPUT.wasm}" "$here/app.py" "$here/plugin_glue.py"
