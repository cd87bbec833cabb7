#!/usr/bin/env bash
# Builds the pod-echo-go test fixture into a component: build.sh OUTPUT.wasm (see main.go; scripts/go-guest.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/go-guest.sh"
go_guest pod-echo-go filter-score-plugin "$here" "${1:?usage: build.sh OUTPUT.wasm}"
