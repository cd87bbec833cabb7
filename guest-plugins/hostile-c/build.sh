#!/usr/bin/env bash
# Builds the hostile-c test fixture into a component: build.sh OUTPUT.wasm
# Needs wit-bindgen (c), clang with wasi-libc (scripts/setup-wasm.sh c), and the scheduler binary in KWS_BIN for
# `plugin componentize` (scripts/build-guests.sh sets it). Only the component-type object of the generated
# bindings is linked: hostile.c writes its exports' answers by hand (see its header).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit"
world=scheduler-plugin
build="$here/build" # generated bindings and the core module; gitignored
export PATH="$HOME/.cache/kube-wasm-scheduler/tools/bin:$PATH"
for tool in wit-bindgen clang "${KWS_BIN:?KWS_BIN: the kube-wasm-scheduler binary (scripts/build-guests.sh sets it)}"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "hostile-c: $tool not found; run scripts/setup-wasm.sh c" >&2
    exit 1
  fi
done
sysroot=/usr
if [ ! -f "$sysroot/lib/wasm32-wasi/libc.a" ]; then
  echo "hostile-c: wasi-libc not found under $sysroot/lib/wasm32-wasi; run scripts/setup-wasm.sh c" >&2
  exit 1
fi
rm -rf "$build"
mkdir -p "$build" "$(dirname "$out")"
wit-bindgen c "$wit" --world "$world" --out-dir "$build" >/dev/null 2>&1 ||
  wit-bindgen c "$wit" --world "$world" --out-dir "$build" # again, to show the error
clang --target=wasm32-wasi --sysroot="$sysroot" -isystem "$sysroot/include/wasm32-wasi" -L"$sysroot/lib/wasm32-wasi" \
  -O2 -Wall -Wextra -Wno-unused-parameter -mexec-model=reactor -Wl,--strip-debug \
  "$here/hostile.c" "$build/scheduler_plugin_component_type.o" -o "$build/hostile.core.wasm"
"$KWS_BIN" plugin componentize "$build/hostile.core.wasm" -o "$out" >/dev/null
