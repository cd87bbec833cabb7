#!/usr/bin/env bash
# Builds the scheduler's image with buildah, from scratch: no container engine and no base image are needed.
# What goes in is deploy/image.txt, the list the Dockerfile's final stage follows too: the release binary, the Rust
# sample guests at the paths deploy/manifests names, and in place of the Dockerfile's distroless base what it brings
# that the binary needs at run time (the shared libraries ldd lists and the dynamic loader, CA certificates, the
# nonroot user and group, /tmp), all taken from this machine. No shell. User, port and entrypoint as the list says.
#
# Usage: scripts/build-image.sh [--tag IMAGE]       (default kube-wasm-scheduler:0.1.0, `make image`'s IMAGE)
# Environment:
#   KWS_BIN            the release binary to put in (default: `cargo build --release --locked` builds it, into
#                      $CARGO_TARGET_DIR/release); the guests are built with it (scripts/build-guests.sh)
#   KWS_BUILDAH_ROOT   a storage directory of the caller's (buildah --root DIR/storage --runroot DIR/run
#                      --storage-driver vfs), as the image test uses; default: buildah's own storage and driver
#                      (STORAGE_DRIVER=vfs where overlay does not work)
# Installs buildah first when it is missing (scripts/setup-buildah.sh). Prints the image's name and id on stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LIST="$ROOT/deploy/image.txt"
TAG="kube-wasm-scheduler:0.1.0"
while (($#)); do
  case "$1" in
    --tag) TAG="${2:?--tag needs an image name}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument: $1" >&2; exit 2 ;;
  esac
done

say() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

# The list.
files=() runtime=() base="" user="" port="" entrypoint=""
while read -r kind a b rest; do
  case "$kind" in
    ""|\#*) continue ;;
    file) [[ -n "$b" && -z "$rest" ]] || die "$LIST: file PATH SOURCE: $kind $a $b $rest"; files+=("$a $b") ;;
    base) base="$a" ;;
    runtime) runtime+=("$a") ;;
    user) user="$a" ;;
    port) port="$a" ;;
    entrypoint) entrypoint="$a" ;;
    *) die "$LIST: unknown line: $kind $a $b $rest" ;;
  esac
done <"$LIST"
[[ ${#files[@]} -gt 0 && -n "$user" && -n "$entrypoint" ]] || die "$LIST lists no files, user or entrypoint"
[[ "$user" =~ ^([0-9]+):([0-9]+)$ ]] || die "$LIST: user must be UID:GID, got $user"
uid="${BASH_REMATCH[1]}" gid="${BASH_REMATCH[2]}"

"$ROOT/scripts/setup-buildah.sh"
buildah_=(buildah)
if [[ -n "${KWS_BUILDAH_ROOT:-}" ]]; then
  buildah_+=(--root "$KWS_BUILDAH_ROOT/storage" --runroot "$KWS_BUILDAH_ROOT/run" --storage-driver vfs)
fi

# The release binary, and the guests built with it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kube-wasm-scheduler/target}"
if [[ -z "${KWS_BIN:-}" ]]; then
  say "cargo build --release --locked --bin kube-wasm-scheduler (the first release build takes a while)"
  (cd "$ROOT" && cargo build --release --locked --bin kube-wasm-scheduler)
  KWS_BIN="$CARGO_TARGET_DIR/release/kube-wasm-scheduler"
fi
[[ -x "$KWS_BIN" ]] || die "no binary at $KWS_BIN"
KWS_BIN="$(cd "$(dirname "$KWS_BIN")" && pwd)/$(basename "$KWS_BIN")"
export KWS_BIN
guests=()
for f in "${files[@]}"; do
  read -r _ src <<<"$f"
  case "$src" in guest:*) guests+=("${src#guest:}") ;; esac
done
if ((${#guests[@]})); then
  "$ROOT/scripts/build-guests.sh" "${guests[@]}" >&2 || die "scripts/build-guests.sh ${guests[*]} failed"
fi

# The root filesystem, staged in a temporary directory.
stage="$(mktemp -d "${TMPDIR:-/tmp}/kws-image.XXXXXX")"
container=""
cleanup() {
  [[ -z "$container" ]] || "${buildah_[@]}" rm "$container" >/dev/null 2>&1 || true
  rm -rf "$stage"
}
trap cleanup EXIT
mkdir -p "$stage/root" "$stage/home"
rootfs="$stage/root"

put() { # SOURCE PATH-IN-IMAGE [MODE]
  install -D -m "${3:-0755}" "$1" "$rootfs$2"
}
for f in "${files[@]}"; do
  read -r path src <<<"$f"
  case "$src" in
    bin:kube-wasm-scheduler) put "$KWS_BIN" "$path" ;;
    guest:*) put "$ROOT/guest-plugins/build/${src#guest:}.wasm" "$path" 0644 ;;
    *) die "$LIST: unknown source $src for $path" ;;
  esac
done
home=""
for r in "${runtime[@]}"; do
  case "$r" in
    libs)
      # `ldd` lists what the loader maps: "name => /path (addr)" for libraries, "/path (addr)" for the loader.
      # Each goes in at the path the binary asks for, as the file the link points to.
      out="$(ldd "$KWS_BIN" 2>&1)" || { [[ "$out" == *"not a dynamic executable"* ]] && continue; die "ldd: $out"; }
      while read -r lib; do
        [[ -f "$lib" ]] || die "ldd names $lib, which is not here"
        put "$(readlink -f "$lib")" "$lib"
        say "runtime library $lib"
      done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$out" | sort -u)
      ;;
    ca-certificates)
      ca=/etc/ssl/certs/ca-certificates.crt
      [[ -s "$ca" ]] || die "no $ca here (Debian: apt-get install ca-certificates)"
      put "$ca" "$ca" 0644
      ;;
    nonroot)
      home=/home/nonroot
      mkdir -p "$rootfs/etc" "$rootfs$(dirname "$home")"
      printf '%s\n' "root:x:0:0:root:/root:/sbin/nologin" "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin" \
        "nonroot:x:$uid:$gid:nonroot:$home:/sbin/nologin" >"$rootfs/etc/passwd"
      printf '%s\n' "root:x:0:" "nobody:x:65534:" "nonroot:x:$gid:" >"$rootfs/etc/group"
      chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
      ;;
    tmp) mkdir -p "$rootfs/tmp" && chmod 1777 "$rootfs/tmp" ;;
    *) die "$LIST: unknown runtime item $r" ;;
  esac
done

say "buildah from scratch: ${files[*]%% *} for $TAG (the Dockerfile's base there: $base)"
container="$("${buildah_[@]}" from scratch)"
"${buildah_[@]}" copy --quiet "$container" "$rootfs/" / >/dev/null
[[ -z "$home" ]] || "${buildah_[@]}" copy --quiet --chown "$uid:$gid" "$container" "$stage/home/" "$home" >/dev/null
config=(--user "$user" --entrypoint "[\"$entrypoint\"]" --workingdir /)
[[ -z "$port" ]] || config+=(--port "$port")
# The environment as the distroless base sets it.
"${buildah_[@]}" config "${config[@]}" \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --label org.opencontainers.image.title=kube-wasm-scheduler "$container"
id="$("${buildah_[@]}" commit --quiet --rm "$container" "$TAG")"
container=""
say "built $TAG ($id)"
echo "$TAG $id"
