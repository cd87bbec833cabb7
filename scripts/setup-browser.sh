#!/usr/bin/env bash
# Installs a headless browser for the test that looks at `simulate --report`'s page as people see it: Debian's
# chromium, idempotently (nothing is done when it is there).
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "setup-browser: installing chromium (Debian package)" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "setup-browser: chromium did not install" >&2; exit 2; }
