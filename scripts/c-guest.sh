# Shared by the C guests' build.sh (sourced, not run): checks the C toolchain and generates the wit-bindgen c
# bindings of a world. After `c_guest_bindings NAME WORLD BUILD_DIR`, "${C_GUEST_CC[@]}" is clang for wasm32-wasi
# with wasi-libc, as a reactor, with the guests' warnings. Tools: scripts/setup-wasm.sh c; the scheduler binary in
# KWS_BIN (scripts/build-guests.sh sets it) for `plugin componentize`.
export PATH="$HOME/.cache/kube-wasm-scheduler/tools/bin:$PATH"

c_guest_bindings() { # name world build-dir
  local name="$1" world="$2" build="$3" wit tool sysroot=/usr
  wit="$(cd "$(dirname "${BASH_SOURCE[0]}")/../wit" && pwd)"
  for tool in wit-bindgen clang "${KWS_BIN:?KWS_BIN: the kube-wasm-scheduler binary (scripts/build-guests.sh sets it)}"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "$name: $tool not found; run scripts/setup-wasm.sh c" >&2
      exit 1
    fi
  done
  if [ ! -f "$sysroot/lib/wasm32-wasi/libc.a" ]; then
    echo "$name: wasi-libc not found under $sysroot/lib/wasm32-wasi; run scripts/setup-wasm.sh c" >&2
    exit 1
  fi
  rm -rf "$build"
  mkdir -p "$build"
  wit-bindgen c "$wit" --world "$world" --out-dir "$build" >/dev/null 2>&1 ||
    wit-bindgen c "$wit" --world "$world" --out-dir "$build" # again, to show the error
  C_GUEST_CC=(clang --target=wasm32-wasi --sysroot="$sysroot" -isystem "$sysroot/include/wasm32-wasi"
    -L"$sysroot/lib/wasm32-wasi" -O2 -Wall -Wextra -Wno-unused-parameter -mexec-model=reactor -Wl,--strip-debug)
}
