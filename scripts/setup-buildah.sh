#!/usr/bin/env bash
# Installs buildah, which builds the image without a container engine (scripts/build-image.sh, `make image` where no
# docker or podman engine runs, `make test-image`): Debian's package, idempotently (nothing is done when it is there).
set -euo pipefail

if command -v buildah >/dev/null 2>&1; then
  exit 0
fi
echo "setup-buildah: installing buildah (Debian package)" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq buildah >/dev/null
command -v buildah >/dev/null 2>&1 || { echo "setup-buildah: buildah did not install" >&2; exit 2; }
