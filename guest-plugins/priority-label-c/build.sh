#!/usr/bin/env bash
# Builds the priority-label C guest into a component: build.sh OUTPUT.wasm
# Needs wit-bindgen (c), clang with wasi-libc (scripts/setup-wasm.sh c), and the scheduler binary in KWS_BIN for
# `plugin componentize` (scripts/build-guests.sh sets it).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/build" # generated bindings and the core module; gitignored
source "$here/../../scripts/c-guest.sh"
c_guest_bindings priority-label-c filter-score-plugin "$build"
mkdir -p "$(dirname "$out")"
"${C_GUEST_CC[@]}" -Wno-unused-function -I"$build" \
  "$here/priority_label.c" "$build/filter_score_plugin.c" "$build/filter_score_plugin_component_type.o" \
  -o "$build/priority_label.core.wasm"
"$KWS_BIN" plugin componentize "$build/priority_label.core.wasm" -o "$out" >/dev/null
