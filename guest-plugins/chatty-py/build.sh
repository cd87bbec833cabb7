#!/usr/bin/env bash
# Builds the chatty Python test fixture into a component: build.sh OUTPUT.wasm (the glue is priority-label-py's).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/py-guest.sh"
py_guest chatty-py filter-score-plugin "${1:?usage: build.sh OUTPUT.wasm}" "$here/app.py" \
  "$here/../priority-label-py/plugin_glue.py"
