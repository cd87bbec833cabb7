#!/usr/bin/env bash
# Builds the priority-label Go guest into a component: build.sh OUTPUT.wasm
# Needs Go 1.24 or later (scripts/setup-wasm.sh go) and the scheduler binary in KWS_BIN for
# `plugin componentize` (scripts/build-guests.sh sets it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/go-guest.sh"
go_guest priority-label-go filter-score-plugin "$here" "${1:?usage: build.sh OUTPUT.wasm}"
