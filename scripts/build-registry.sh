#!/usr/bin/env bash
# Build the CNCF distribution registry (the reference OCI registry, `registry` of distribution/distribution v3) from
# the Go module proxy, for the plugin delivery tests (host/tests/integration/delivery.rs), which start it on a free
# 127.0.0.1 port with a temporary storage directory.
#
# The binary is cached outside the clone, so later runs (and CI on the same machine) reuse it:
#   $HOME/.cache/kube-wasm-scheduler/registry/<version>/bin/registry
#
# Usage: scripts/build-registry.sh
# Environment:
#   REGISTRY_VERSION     distribution release (default v3.1.2)
#   REGISTRY_CACHE_DIR   cache root (default $HOME/.cache/kube-wasm-scheduler/registry)
#   GO                   go command (default: go on PATH, else /usr/local/go/bin/go)
# Prints one line per step on stderr; the last line on stdout is the binary's path.
set -euo pipefail

REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
REGISTRY_CACHE_DIR="${REGISTRY_CACHE_DIR:-$HOME/.cache/kube-wasm-scheduler/registry}"
case "${1:-}" in
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "build-registry: unknown argument: $1" >&2; exit 2 ;;
esac

step() { echo "build-registry: $*" >&2; }
die() { echo "build-registry: error: $*" >&2; exit 1; }

[[ "$REGISTRY_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "REGISTRY_VERSION must look like v3.1.2, got $REGISTRY_VERSION"
BIN="$REGISTRY_CACHE_DIR/$REGISTRY_VERSION/bin"
mkdir -p "$BIN"

# `registry --version` prints "registry github.com/distribution/distribution/v3 <version>" when stamped.
if [[ -x "$BIN/registry" ]] && "$BIN/registry" --version 2>/dev/null | grep -qF " $REGISTRY_VERSION"; then
  step "registry: $REGISTRY_VERSION already built at $BIN/registry"
  echo "$BIN/registry"
  exit 0
fi

if [[ -z "${GO:-}" ]]; then
  if command -v go >/dev/null 2>&1; then GO=go; else GO=/usr/local/go/bin/go; fi
fi
command -v "$GO" >/dev/null 2>&1 || die "no go toolchain (set GO=/path/to/go)"
step "go: $("$GO" version)"
step "build: registry $REGISTRY_VERSION -> $BIN/registry (the first build takes a few minutes)"
start=$SECONDS
# `go install` into a temporary GOBIN, then one rename: an interrupted build never leaves a half-written binary.
tmp="$(mktemp -d "$BIN/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" CGO_ENABLED=0 "$GO" install -trimpath \
  -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
  "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION" || die "go install of the registry failed"
mv "$tmp/registry" "$BIN/registry"
"$BIN/registry" --version 2>/dev/null | grep -qF " $REGISTRY_VERSION" || die "$BIN/registry does not report $REGISTRY_VERSION"
step "build: done in $((SECONDS - start)) s, $(du -h "$BIN/registry" | cut -f1)"
echo "$BIN/registry"
