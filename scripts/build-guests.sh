#!/usr/bin/env bash
# Builds the guest plugins into Wasm components: guest-plugins/build/<name>.wasm
#
# Usage: scripts/build-guests.sh [name...]     (default: every guest)
#
#   Rust guests (crates using guest-plugins/sdk): priority-label, priority-label-inverted (priority-label with the
#     cargo feature `invert`, for the hot-reload test), qos-sort, random-score, coscheduling, capacity-quota,
#     require-annotation, prescore-spread, bind-delegate, drain-guard, and the test fixtures hostile and hostile-sort
#     (hostile with the cargo feature `sort`). Built for wasm32-unknown-unknown with the `guest` profile, then turned into
#     components by the scheduler itself (`kube-wasm-scheduler plugin componentize`, which also checks them as the
#     scheduler would load them).
#   Other guests: every guest-plugins/<name>/build.sh, called as `build.sh OUTPUT.wasm` with KWS_BIN set to the
#     scheduler binary (for `plugin componentize`); the toolchain by the name's suffix (-c, -py, -js, -go).
#
# Each build step checks its own exit status (`set -e` does not apply inside a function called from `||`), so a
# failed guest is reported and the others still build.
# Incremental: a guest whose output is newer than all its inputs (its sources, the WIT contract, and for Rust the
# SDK and the workspace manifests) is skipped. The toolchains come from scripts/setup-wasm.sh (idempotent), run
# only for guests that need building. Rust build products are cached outside the clone, in
# $KWS_CACHE/guest-target (default ~/.cache/kube-wasm-scheduler), so clones on one machine share them.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}"
OUT="$ROOT/guest-plugins/build"
export PATH="$CACHE/tools/bin:$HOME/.cargo/bin:$PATH"

# Rust guests: name -> "crate [cargo features]".
declare -A RUST_GUESTS=(
  [priority-label]="priority-label"
  [priority-label-inverted]="priority-label invert"
  [qos-sort]="qos-sort"
  [random-score]="random-score"
  [hostile]="hostile"
  [hostile-sort]="hostile sort"
  [hostile-peek]="hostile peek"
  [coscheduling]="coscheduling"
  [capacity-quota]="capacity-quota"
  [require-annotation]="require-annotation"
  [prescore-spread]="prescore-spread"
  [bind-delegate]="bind-delegate"
  [drain-guard]="drain-guard"
)
RUST_ORDER=(priority-label priority-label-inverted qos-sort random-score hostile hostile-sort hostile-peek coscheduling capacity-quota
  require-annotation prescore-spread bind-delegate drain-guard)

log() { echo "build-guests: $*" >&2; }

all_guests() {
  printf '%s\n' "${RUST_ORDER[@]}"
  for f in "$ROOT"/guest-plugins/*/build.sh; do
    [ -f "$f" ] || continue
    local name; name="$(basename "$(dirname "$f")")"
    [ -n "${RUST_GUESTS[$name]:-}" ] || echo "$name"
  done
}

# True when $1 exists and is newer than every file under the other arguments (generated folders ignored).
up_to_date() {
  local out="$1"; shift
  [ -f "$out" ] || return 1
  local newer
  newer="$(find "$@" \( -name target -o -name build -o -name node_modules -o -name __pycache__ -o -name .venv \
    -o -name '*.wasm' \) -prune -o -type f -newer "$out" -print -quit 2>/dev/null)"
  [ -z "$newer" ]
}

setup_done=""
setup() { # toolchain
  case " $setup_done " in *" $1 "*) return 0 ;; esac
  "$ROOT/scripts/setup-wasm.sh" "$1" || return 1
  setup_done="$setup_done $1"
}

size_of() { stat -c %s "$1"; }

# The scheduler binary, which turns core modules into components: built (debug, the same one `make build` and
# `cargo test` use) the first time a guest needs it. KWS_BIN overrides it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
KWS_BIN="${KWS_BIN:-}"
scheduler_bin() {
  if [ -z "$KWS_BIN" ]; then
    (cd "$ROOT" && cargo build --quiet --bin kube-wasm-scheduler) || return 1
    KWS_BIN="$CARGO_TARGET_DIR/debug/kube-wasm-scheduler"
  fi
  export KWS_BIN
}

build_rust() { # name crate [features]
  local name="$1" crate="$2" features="${3:-}" out="$OUT/$1.wasm"
  if up_to_date "$out" "$ROOT/guest-plugins/$crate" "$ROOT/guest-plugins/sdk" "$ROOT/wit" "$ROOT/Cargo.toml" \
    "$ROOT/Cargo.lock" "$ROOT/scripts/build-guests.sh"; then
    echo "$name: up to date ($out, $(size_of "$out") bytes)"
    return 0
  fi
  setup rust || return 1
  local args=(build --quiet --profile guest --target wasm32-unknown-unknown -p "$crate")
  [ -n "$features" ] && args+=(--features "$features")
  local target_dir cargo_env=() cargo_bin=cargo
  if command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    target_dir="$CACHE/guest-target-rustup"
  else
    # Debian's rustc-web knows wasm32 but ships no prebuilt standard library for it: build it from rust-web-src.
    target_dir="$CACHE/guest-target"
    cargo_env=(RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld)
    args+=(-Zbuild-std=std,panic_abort)
    cargo_bin=/usr/bin/cargo
  fi
  local core="$target_dir/wasm32-unknown-unknown/guest/${crate//-/_}.wasm"
  mkdir -p "$OUT/core" "$(dirname "$target_dir")" || return 1
  # The guest cache is shared by every clone on the machine, and one crate is built with different features under
  # one output name: build and copy under a lock, or a run beside this one can swap its variant in between.
  # The core module is kept beside the component (build/core/), for the test of `plugin componentize`.
  (
    flock 8 || exit 1
    cd "$ROOT" && env CARGO_TARGET_DIR="$target_dir" "${cargo_env[@]}" "$cargo_bin" "${args[@]}" &&
      cp -f "$core" "$OUT/core/$name.wasm"
  ) 8>"$target_dir.lock" || return 1
  scheduler_bin || return 1
  "$KWS_BIN" plugin componentize "$OUT/core/$name.wasm" -o "$out" >/dev/null || return 1
  echo "$name: built $out ($(size_of "$out") bytes)"
}

build_script() { # name
  local name="$1" dir="$ROOT/guest-plugins/$1" out="$OUT/$1.wasm"
  local inputs=("$dir" "$ROOT/wit")
  # A Go guest is built from the Go SDK too.
  case "$name" in *-go) inputs+=("$ROOT/guest-plugins/sdk-go" "$ROOT/scripts/go-guest.sh") ;; esac
  if up_to_date "$out" "${inputs[@]}"; then
    echo "$name: up to date ($out, $(size_of "$out") bytes)"
    return 0
  fi
  case "$name" in
    *-c) setup c || return 1 ;;
    *-py) setup python || return 1 ;;
    *-js) setup js || return 1 ;;
    *-go) setup go || return 1 ;;
  esac
  mkdir -p "$OUT"
  scheduler_bin || return 1
  bash "$dir/build.sh" "$out.tmp" || return 1
  mv -f "$out.tmp" "$out" || return 1
  echo "$name: built $out ($(size_of "$out") bytes)"
}

names=("$@")
[ ${#names[@]} -eq 0 ] && mapfile -t names < <(all_guests)

failed=()
for name in "${names[@]}"; do
  if [ -n "${RUST_GUESTS[$name]:-}" ]; then
    read -r crate features <<<"${RUST_GUESTS[$name]}"
    build_rust "$name" "$crate" "${features:-}" || failed+=("$name")
  elif [ -f "$ROOT/guest-plugins/$name/build.sh" ]; then
    build_script "$name" || failed+=("$name")
  else
    log "unknown guest $name (Rust: ${RUST_ORDER[*]}; others need guest-plugins/$name/build.sh)"
    failed+=("$name")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  log "failed: ${failed[*]}"
  exit 1
fi
