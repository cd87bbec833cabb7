#!/usr/bin/env bash
# Installs the toolchains that build the guest plugins, idempotently; each step is skipped when its tool is there.
# Everything heavy is cached outside the clone, under $KWS_CACHE (default ~/.cache/kube-wasm-scheduler):
#   Rust guests:  rustup's wasm32-unknown-unknown target when present, else Debian's rustc-web + rust-web-src
#                 (the standard library is then built from source, -Zbuild-std), and lld for wasm-ld
#   (core modules become components through the scheduler itself: `kube-wasm-scheduler plugin componentize`)
#   C guests:     clang, wasi-libc, compiler-rt for wasm32 (Debian), wit-bindgen-cli (cargo install)
#   Python:       componentize-py in a virtualenv
#   JavaScript:   @bytecodealliance/componentize-js (npm)
#   Go:           Go 1.24 or later (//go:wasmexport): an installed one (PATH, /usr/local/go), else Go's own
#                 toolchain module from the Go module proxy (Debian 12's golang is 1.19)
# Usage: setup-wasm.sh [rust|c|python|js|go|all] ...   (default: all)
set -euo pipefail
# Under pipefail, `cmd | grep -q` fails when grep exits at its first match and cmd dies of SIGPIPE (pip show prints
# more after its version line): the checks below let grep read everything instead.

CACHE="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}"
TOOLS="$CACHE/tools"
mkdir -p "$TOOLS/bin"
export PATH="$TOOLS/bin:$HOME/.cargo/bin:$PATH"

WIT_BINDGEN_VERSION=0.63.0
COMPONENTIZE_PY_VERSION=0.25.1
COMPONENTIZE_JS_VERSION=0.23.0
GO_VERSION=1.26.8 # fetched only when no Go 1.24 or later is installed

log() { echo "setup-wasm: $*" >&2; }

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  if [ ! -f "$CACHE/.apt-updated" ]; then $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq && touch "$CACHE/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

cargo_install() { # crate version binary
  if [ -x "$TOOLS/bin/$3" ] && "$TOOLS/bin/$3" --version 2>/dev/null | grep "$2" >/dev/null; then return 0; fi
  log "cargo install $1@$2 (several minutes, once per machine)"
  cargo install --locked --quiet --root "$TOOLS" "$1@$2"
}

rustup_has_wasm() {
  command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -x wasm32-unknown-unknown >/dev/null
}

setup_rust() {
  if rustup_has_wasm; then return 0; fi
  # Offline machines: rustup cannot download targets; Debian's rustc knows wasm32 and ships the library source.
  apt_install rustc-web cargo-web rust-web-src lld
}

setup_c() {
  apt_install clang lld wasi-libc libclang-rt-14-dev-wasm32
  cargo_install wit-bindgen-cli "$WIT_BINDGEN_VERSION" wit-bindgen
}

setup_python() {
  local venv="$TOOLS/py"
  if [ -x "$venv/bin/componentize-py" ] && "$venv/bin/pip" show componentize-py 2>/dev/null | grep "Version: $COMPONENTIZE_PY_VERSION" >/dev/null; then
    return 0
  fi
  log "pip install componentize-py==$COMPONENTIZE_PY_VERSION"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY_VERSION"
  ln -sf "$venv/bin/componentize-py" "$TOOLS/bin/componentize-py"
}

setup_js() {
  local dir="$TOOLS/js"
  if [ -f "$dir/node_modules/@bytecodealliance/componentize-js/package.json" ] &&
     grep -q "\"version\": \"$COMPONENTIZE_JS_VERSION\"" "$dir/node_modules/@bytecodealliance/componentize-js/package.json"; then
    return 0
  fi
  log "npm install @bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION"
  mkdir -p "$dir"
  (cd "$dir" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
    npm install --silent --no-audit --no-fund "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" >/dev/null)
}

setup_go() {
  # scripts/go-guest.sh picks the Go to use, with the same rule.
  source "$(dirname "$0")/go-guest.sh"
  if go_guest_go >/dev/null; then return 0; fi
  # Go publishes each toolchain as the module golang.org/toolchain (what GOTOOLCHAIN downloads); its zip holds
  # bin/, pkg/ and src/ under one folder, without file modes.
  local arch; arch="$(uname -m)"; case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  local version="v0.0.1-go$GO_VERSION.linux-$arch" dir="$TOOLS/go-toolchain"
  log "downloading Go $GO_VERSION (golang.org/toolchain@$version) from the Go module proxy"
  curl -fsSL -o "$TOOLS/go.zip.tmp" "https://proxy.golang.org/golang.org/toolchain/@v/$version.zip"
  rm -rf "$dir" && mkdir -p "$dir"
  unzip -q "$TOOLS/go.zip.tmp" -d "$dir" && rm -f "$TOOLS/go.zip.tmp"
  local root="$dir/golang.org/toolchain@$version"
  chmod +x "$root"/bin/* "$root"/pkg/tool/*/*
  ln -sf "$root/bin/go" "$TOOLS/bin/go"
  go_guest_go >/dev/null || { log "Go $GO_VERSION did not install"; return 1; }
}

targets=("$@"); [ ${#targets[@]} -eq 0 ] && targets=(all)
for t in "${targets[@]}"; do
  case "$t" in
    rust) setup_rust ;;
    c) setup_c ;;
    python) setup_python ;;
    js) setup_js ;;
    go) setup_go ;;
    all) setup_rust; setup_c; setup_python; setup_js; setup_go ;;
    *) log "unknown toolchain $t (rust, c, python, js, go, all)"; exit 2 ;;
  esac
done
