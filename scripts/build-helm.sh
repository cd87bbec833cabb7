#!/usr/bin/env bash
# Build helm from the Go module proxy (`go install helm.sh/helm/v3/cmd/helm@<version>`), for the chart under
# deploy/chart and the tests that render and install it.
#
# The binary is cached outside the clone, so later runs (and CI on the same machine) reuse it:
#   $HOME/.cache/kube-wasm-scheduler/helm/<version>/bin/helm
#
# Usage: scripts/build-helm.sh
# Environment:
#   HELM_VERSION    helm release to build (default v3.22.0)
#   HELM_CACHE_DIR  cache root (default $HOME/.cache/kube-wasm-scheduler/helm)
#   HELM_KUBE_MINOR Kubernetes minor helm assumes offline (default 37: helm v3.22.0 is built on client-go v0.37)
#   GO              go command (default: go on PATH, else /usr/local/go/bin/go)
# Prints one line per step on stderr; the only line on stdout is the bin directory.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM_CACHE_DIR="${HELM_CACHE_DIR:-$HOME/.cache/kube-wasm-scheduler/helm}"
HELM_KUBE_MINOR="${HELM_KUBE_MINOR:-37}"
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-helm: unknown argument: $1" >&2; exit 2 ;;
esac

step() { echo "build-helm: $*" >&2; }
die() { echo "build-helm: error: $*" >&2; exit 1; }

[[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "HELM_VERSION must look like v3.22.0, got $HELM_VERSION"
BIN="$HELM_CACHE_DIR/$HELM_VERSION/bin"
mkdir -p "$BIN"

# helm prints the version stamped into it at build time (below): a binary that says so is the one wanted.
stamp="$HELM_VERSION kube 1.$HELM_KUBE_MINOR"
if [[ -x "$BIN/helm" ]] && [[ "$("$BIN/helm" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]] \
  && [[ "$(cat "$BIN/helm.stamp" 2>/dev/null)" == "$stamp" ]]; then
  step "helm: $HELM_VERSION already built at $BIN/helm"
  echo "$BIN"
  exit 0
fi

if [[ -z "${GO:-}" ]]; then
  if command -v go >/dev/null 2>&1; then GO=go; else GO=/usr/local/go/bin/go; fi
fi
command -v "$GO" >/dev/null 2>&1 || die "no go toolchain (set GO=/path/to/go)"
step "go: $("$GO" version)"

# Built into a scratch GOBIN and moved into place, so an interrupted build never leaves a half-written helm.
scratch="$(mktemp -d "$HELM_CACHE_DIR/build.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# Same stamping as helm's own Makefile, so `helm version` tells the truth and `helm template`/`helm lint` assume
# the Kubernetes version helm is built against (its client-go minor + 1.x), not their unstamped default v1.20.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
done
step "build: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (a few minutes the first time)"
start=$SECONDS
GOBIN="$scratch" CGO_ENABLED=0 "$GO" install -trimpath -ldflags "$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" || die "go install of helm $HELM_VERSION failed"
mv "$scratch/helm" "$BIN/helm"
got="$("$BIN/helm" version --template '{{.Version}}' 2>/dev/null || true)"
[[ "$got" == "$HELM_VERSION" ]] || die "$BIN/helm reports version '$got', not $HELM_VERSION"
echo "$stamp" >"$BIN/helm.stamp"
step "build: helm $HELM_VERSION done in $((SECONDS - start)) s, $(du -h "$BIN/helm" | cut -f1)"
echo "$BIN"
