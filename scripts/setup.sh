#!/usr/bin/env bash
# Installs what the build needs, idempotently: a Rust toolchain with cargo (rustup's where present, otherwise
# Debian's). Heavy caches live outside the clone (CARGO_TARGET_DIR, ~/.cargo).
set -euo pipefail

need_rust_minor=89

have_cargo() {
  command -v cargo >/dev/null 2>&1 || return 1
  local minor
  minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
  [ "${minor:-0}" -ge "$need_rust_minor" ]
}

if ! have_cargo; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    if [ -x "$d/cargo" ]; then export PATH="$d:$PATH"; fi
  done
fi
if ! have_cargo; then
  echo "setup: installing Rust (Debian packages)" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq rustc-web cargo-web >/dev/null
fi
if ! have_cargo; then
  echo "setup: cargo with Rust >= 1.$need_rust_minor is required; install it (rustup or your distribution) and retry" >&2
  exit 2
fi
mkdir -p "${CARGO_TARGET_DIR:-$HOME/.cache/kube-wasm-scheduler/target}"
