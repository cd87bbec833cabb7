#!/usr/bin/env bash
# Build a real kube-apiserver (and optionally kubectl and kube-scheduler) from Kubernetes' Go modules and make sure an
# etcd binary is installed, for tests that need a real control plane (see scripts/control-plane.sh) and for the live
# benchmark against kube-scheduler (bench/live).
#
# Binaries are cached outside the clone, so later runs (and CI on the same machine) reuse them:
#   $HOME/.cache/kube-wasm-scheduler/kube/<version>/bin/kube-apiserver (kubectl, kube-scheduler)
# The generated Go module that drives the build lives next to them (…/<version>/module), never in the repo.
#
# Usage: scripts/build-kube.sh [--with-kubectl] [--with-kube-scheduler] [--download-only]
#   --with-kube-scheduler  also build kube-scheduler of the same release (about a minute once the module's
#                          dependencies are downloaded).
#   --download-only        generate the module and download its dependencies, compile nothing.
# Environment:
#   KUBE_VERSION          Kubernetes release to build (default v1.37.2: the newest release, the reference the
#                         scheduler follows; it uses k8s-openapi's v1_37). v1.35.x and v1.36.x build the same way
#                         (make test-versions).
#   KUBE_CACHE_DIR        cache root (default $HOME/.cache/kube-wasm-scheduler/kube)
#   KUBE_BUILD_KUBECTL=1  same as --with-kubectl (also built when no kubectl is on PATH).
#   KUBE_BUILD_SCHEDULER=1  same as --with-kube-scheduler.
#   GO                    go command (default: go on PATH, else /usr/local/go/bin/go)
# Prints one line per step; the last line is the bin directory.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
KUBE_CACHE_DIR="${KUBE_CACHE_DIR:-$HOME/.cache/kube-wasm-scheduler/kube}"
BUILD_KUBECTL="${KUBE_BUILD_KUBECTL:-0}"
BUILD_SCHEDULER="${KUBE_BUILD_SCHEDULER:-0}"
DOWNLOAD_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --with-kubectl) BUILD_KUBECTL=1 ;;
    --with-kube-scheduler) BUILD_SCHEDULER=1 ;;
    --download-only) DOWNLOAD_ONLY=1 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-kube: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

step() { echo "build-kube: $*" >&2; }
die() { echo "build-kube: error: $*" >&2; exit 1; }

[[ "$KUBE_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "KUBE_VERSION must look like v1.37.2, got $KUBE_VERSION"
KUBE_MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"   # k8s.io/api etc. are tagged v0.<minor>.<patch>

ROOT="$KUBE_CACHE_DIR/$KUBE_VERSION"
BIN="$ROOT/bin"
MOD="$ROOT/module"
mkdir -p "$BIN"
# One build at a time per version: tests that each start a control plane run this script at once on a fresh
# machine, and the second build's `mv` of the shared .tmp file failed after the first had moved it. A later
# caller waits here, then finds the binaries built.
exec 9>"$ROOT/.build.lock"
flock 9

# --- etcd -------------------------------------------------------------------------------------------
if [[ -n "${ETCD:-}" && -x "${ETCD}" ]]; then
  step "etcd: using \$ETCD=$ETCD"
elif command -v etcd >/dev/null 2>&1; then
  step "etcd: present at $(command -v etcd) ($(etcd --version 2>/dev/null | head -1))"
else
  step "etcd: installing Debian package etcd-server"
  SUDO=""
  [[ "$(id -u)" == 0 ]] || SUDO="sudo"
  if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q etcd-server >/dev/null; then
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q etcd-server >/dev/null
  fi
  command -v etcd >/dev/null 2>&1 || die "etcd still not on PATH after installing etcd-server"
  step "etcd: installed $(etcd --version 2>/dev/null | head -1)"
fi

# --- kube binaries ----------------------------------------------------------------------------------
have_version() {  # <binary> <args...>: does it report exactly $KUBE_VERSION?
  local bin="$1"; shift
  [[ -x "$bin" ]] && "$bin" "$@" 2>/dev/null | grep -qE "(^|[^0-9.])${KUBE_VERSION//./\\.}([^0-9.]|$)"
}

targets=()
if have_version "$BIN/kube-apiserver" --version; then
  step "kube-apiserver: $KUBE_VERSION already built at $BIN/kube-apiserver"
else
  targets+=(kube-apiserver)
fi
if [[ "$BUILD_KUBECTL" != 1 ]] && ! command -v kubectl >/dev/null 2>&1 && [[ ! -x "$BIN/kubectl" ]]; then
  BUILD_KUBECTL=1   # nothing else to talk to the cluster with
fi
if [[ "$BUILD_KUBECTL" == 1 ]]; then
  if have_version "$BIN/kubectl" version --client; then
    step "kubectl: $KUBE_VERSION already built at $BIN/kubectl"
  else
    targets+=(kubectl)
  fi
fi
if [[ "$BUILD_SCHEDULER" == 1 ]]; then
  if have_version "$BIN/kube-scheduler" --version; then
    step "kube-scheduler: $KUBE_VERSION already built at $BIN/kube-scheduler"
  else
    targets+=(kube-scheduler)
  fi
fi

if ((${#targets[@]})); then
  if [[ -z "${GO:-}" ]]; then
    if command -v go >/dev/null 2>&1; then GO=go; else GO=/usr/local/go/bin/go; fi
  fi
  command -v "$GO" >/dev/null 2>&1 || die "no go toolchain (set GO=/path/to/go)"
  step "go: $("$GO" version)"

  # k8s.io/kubernetes itself cannot be `go install`ed: its go.mod points every k8s.io/<staging> module at
  # ./staging/... . A small module of our own requires it and points those modules at their published
  # v0.<minor>.<patch> tags instead.
  step "module: fetching k8s.io/kubernetes@$KUBE_VERSION go.mod"
  info_json="$(cd "$KUBE_CACHE_DIR" && "$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION")" \
    || die "cannot download k8s.io/kubernetes@$KUBE_VERSION: $info_json"
  upstream_gomod="$(printf '%s\n' "$info_json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  upstream_info="$(printf '%s\n' "$info_json" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p')"
  # The release's commit, when the proxy recorded it (stamped like Kubernetes' own builds do).
  git_commit="$({ printf '%s\n' "$info_json"; cat "$upstream_info" 2>/dev/null; } \
    | grep -o '"Hash": *"[0-9a-f]\{40\}"' | grep -o '[0-9a-f]\{40\}' | head -1 || true)"
  [[ -f "$upstream_gomod" ]] || die "no go.mod for k8s.io/kubernetes@$KUBE_VERSION in: $info_json"
  # The staging modules k8s.io/kubernetes requires at v0.0.0 (only those: unrequired ones need no replace).
  mapfile -t staging < <(sed -n 's/^[[:space:]]*\(k8s\.io\/[a-z0-9-]*\) v0\.0\.0$/\1/p' "$upstream_gomod" | sort -u)
  ((${#staging[@]} > 10)) || die "found only ${#staging[@]} staging modules in $upstream_gomod"
  upstream_go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream_gomod")"
  upstream_godebug="$(sed -n 's/^godebug \(.*\)$/\1/p' "$upstream_gomod")"

  step "module: writing $MOD/go.mod (${#staging[@]} staging modules -> $STAGING_VERSION)"
  mkdir -p "$MOD"
  {
    echo "// Generated by kube-wasm-scheduler's scripts/build-kube.sh; safe to delete."
    echo "module kube-wasm-scheduler.local/kube-build"
    echo
    echo "go ${upstream_go:-1.24.0}"
    [[ -z "$upstream_godebug" ]] || echo "godebug $upstream_godebug"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $STAGING_VERSION"; done
    echo ")"
  } >"$MOD/go.mod.new"
  if ! cmp -s "$MOD/go.mod.new" "$MOD/go.mod" 2>/dev/null; then
    mv "$MOD/go.mod.new" "$MOD/go.mod"
    rm -f "$MOD/go.sum"
  else
    rm -f "$MOD/go.mod.new"
  fi

  pkgs=()
  for t in "${targets[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
  step "module: resolving and downloading dependencies of ${targets[*]}"
  (cd "$MOD" && "$GO" list -mod=mod -deps "${pkgs[@]}" >/dev/null) || die "dependency resolution failed in $MOD"
  if [[ "$DOWNLOAD_ONLY" == 1 ]]; then
    step "download-only: not compiling"
    echo "$BIN"
    exit 0
  fi

  # Same version stamping as Kubernetes' hack/lib/version.sh, so `--version` and /version tell the truth.
  ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$KUBE_MINOR"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    [[ -z "$git_commit" ]] || ldflags+=" -X $pkg.gitCommit=$git_commit"
  done
  for t in "${targets[@]}"; do
    step "build: $t $KUBE_VERSION -> $BIN/$t (the first build takes several minutes)"
    start=$SECONDS
    (cd "$MOD" && CGO_ENABLED=0 "$GO" build -mod=mod -trimpath -ldflags "$ldflags" -o "$BIN/$t.tmp" "k8s.io/kubernetes/cmd/$t") \
      || die "go build of $t failed"
    mv "$BIN/$t.tmp" "$BIN/$t"
    step "build: $t done in $((SECONDS - start)) s, $(du -h "$BIN/$t" | cut -f1)"
  done
  for t in "${targets[@]}"; do
    case "$t" in
      kubectl) have_version "$BIN/$t" version --client ;;
      *) have_version "$BIN/$t" --version ;;
    esac || die "$BIN/$t does not report $KUBE_VERSION"
  done
fi

echo "$BIN"
