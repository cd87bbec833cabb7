#!/usr/bin/env bash
# Builds the hostile-c test fixture into a component: build.sh OUTPUT.wasm
# Needs wit-bindgen (c), clang with wasi-libc (scripts/setup-wasm.sh c), and the scheduler binary in KWS_BIN for
# `plugin componentize` (scripts/build-guests.sh sets it). Only the component-type object of the generated
# bindings is linked: hostile.c writes its exports' answers by hand (see its header).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
build="$here/build" # generated bindings and the core module; gitignored
source "$here/../../scripts/c-guest.sh"
c_guest_bindings hostile-c scheduler-plugin "$build"
mkdir -p "$(dirname "$out")"
"${C_GUEST_CC[@]}" "$here/hostile.c" "$build/scheduler_plugin_component_type.o" -o "$build/hostile.core.wasm"
"$KWS_BIN" plugin componentize "$build/hostile.core.wasm" -o "$out" >/dev/null
