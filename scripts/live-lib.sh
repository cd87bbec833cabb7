# Sourced by bench/live/run.sh (make bench-live) and scripts/parity.sh (make parity): the binaries they compare, a
# throwaway control plane, and a cleanup that stops everything on exit, failure or Ctrl-C.
# The caller sets ROOT, CARGO_TARGET_DIR, OUT (results) and CP (control plane directory) and defines say and die.

# Sets KUBE_BIN: kube-apiserver and kube-scheduler of the test version (built or reused), and etcd.
live_kube_bin() {
  say "kube-apiserver, etcd, kube-scheduler (scripts/build-kube.sh --with-kube-scheduler)"
  KUBE_BIN="$("$ROOT/scripts/build-kube.sh" --with-kube-scheduler | tail -1)"
  [[ -x "$KUBE_BIN/kube-scheduler" ]] || die "no $KUBE_BIN/kube-scheduler"
}

# Sets KWS_BIN: the one given in KWS_BIN, or our binary built with cargo in profile $1 (debug or release).
live_kws_bin() {
  local profile="$1" flags=()
  [[ "$profile" == release ]] && flags=(--release)
  if [[ -n "${KWS_BIN:-}" ]]; then
    [[ -x "$KWS_BIN" ]] || die "KWS_BIN=$KWS_BIN is not an executable"
    say "kube-wasm-scheduler: $KWS_BIN (KWS_BIN)"
  else
    say "kube-wasm-scheduler: cargo build ${flags[*]} --bin kube-wasm-scheduler (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    (cd "$ROOT" && cargo build "${flags[@]}" --bin kube-wasm-scheduler)
    KWS_BIN="$CARGO_TARGET_DIR/$profile/kube-wasm-scheduler"
  fi
}

# Sets GO: the go on PATH, else the toolchain's usual place.
live_go() {
  if [[ -z "${GO:-}" ]]; then
    if command -v go >/dev/null 2>&1; then GO=go; else GO=/usr/local/go/bin/go; fi
  fi
}

LIVE_CHILD_PID=""
live_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$LIVE_CHILD_PID" ]] && kill -0 "$LIVE_CHILD_PID" 2>/dev/null; then
    kill -TERM "$LIVE_CHILD_PID" 2>/dev/null || true
    wait "$LIVE_CHILD_PID" 2>/dev/null || true
  fi
  if [[ -d "$CP" ]]; then
    "$ROOT/scripts/control-plane.sh" down "$CP" --purge || true
  fi
  rm -rf -- "$PIN"
  exit "$rc"
}

# Makes OUT absolute, pins KWS_BIN as $PIN/kube-wasm-scheduler (a hard link keeps this build even if cargo replaces
# the file during the run), arms the cleanup and starts the control plane in CP.
live_up() {
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  PIN="$OUT/.bin"
  trap live_cleanup EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$PIN"
  ln -f "$KWS_BIN" "$PIN/kube-wasm-scheduler" 2>/dev/null || cp "$KWS_BIN" "$PIN/kube-wasm-scheduler"
  say "control plane in $CP"
  "$ROOT/scripts/control-plane.sh" up "$CP" >/dev/null
}

# Runs a command in the background, so that Ctrl-C reaches the cleanup, and sets LIVE_RC to its exit code.
live_run() {
  "$@" &
  LIVE_CHILD_PID=$!
  LIVE_RC=0
  wait "$LIVE_CHILD_PID" || LIVE_RC=$?
  LIVE_CHILD_PID=""
}
