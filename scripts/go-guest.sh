# Shared by the Go guests' build.sh (sourced, not run): `go_guest NAME WORLD DIR OUTPUT.wasm` builds the Go main
# package in DIR (a module using guest-plugins/sdk-go) with the standard Go toolchain as a WASI preview1 reactor
# (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared), then `kube-wasm-scheduler plugin componentize --world WORLD`
# ($KWS_BIN; scripts/build-guests.sh sets it) embeds the contract's world and applies the preview1 adapter. Go
# 1.24 or later (//go:wasmexport): scripts/setup-wasm.sh go. The core module is kept in DIR/build (gitignored).
# For WORLD gang-plugin the SDK's exports of the pod view, events, PreFilter, Reserve and Permit are compiled in
# (build tag kws_gang); any other world gets the Filter and Score exports only.
export PATH="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}/tools/bin:$PATH"

# Prints the first Go command of version 1.24 or later: the one setup-wasm.sh installed, then PATH, then the
# usual /usr/local/go.
go_guest_go() {
  local g v
  for g in "${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}/tools/bin/go" "$(command -v go 2>/dev/null)" /usr/local/go/bin/go; do
    [ -n "$g" ] && [ -x "$g" ] || continue
    v="$(GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null)" || continue
    v="${v#go}"
    if [ "${v%%.*}" -gt 1 ] || { [ "${v%%.*}" -eq 1 ] && [ "$(echo "$v" | cut -d. -f2)" -ge 24 ]; }; then
      echo "$g"
      return 0
    fi
  done
  return 1
}

go_guest() { # name world dir output
  local name="$1" world="$2" dir="$3" out="$4" go tags=""
  [ "$world" = gang-plugin ] && tags=kws_gang
  go="$(go_guest_go)" || { echo "$name: Go 1.24 or later not found; run scripts/setup-wasm.sh go" >&2; exit 1; }
  : "${KWS_BIN:?KWS_BIN: the kube-wasm-scheduler binary (scripts/build-guests.sh sets it)}"
  mkdir -p "$dir/build" "$(dirname "$out")"
  # -buildvcs=false: the same sources give the same bytes (and sha256 pin) whatever the git state.
  (cd "$dir" && GOTOOLCHAIN=local GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath -buildvcs=false \
    -tags "$tags" -o "$dir/build/$name.core.wasm" .)
  "$KWS_BIN" plugin componentize "$dir/build/$name.core.wasm" --world "$world" -o "$out" >/dev/null
}
