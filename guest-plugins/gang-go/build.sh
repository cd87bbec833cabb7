#!/usr/bin/env bash
# Builds the gang-go sample into a component: build.sh OUTPUT.wasm (see main.go; scripts/go-guest.sh). The world
# gang-plugin exports the pod view and events besides PreFilter, Reserve and Permit.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/go-guest.sh"
go_guest gang-go gang-plugin "$here" "${1:?usage: build.sh OUTPUT.wasm}"
