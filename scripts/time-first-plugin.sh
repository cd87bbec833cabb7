#!/usr/bin/env bash
# Times the plugin author's path, from an empty directory to a hot-loaded plugin in a running `simulate --watch`:
# plugin new, plugin build, simulate --watch, an edit of the policy, plugin build again, the watch's new placement.
# The toolchain must be installed (`kube-wasm-scheduler plugin setup --lang LANG`); that is not timed.
#
# Usage: scripts/time-first-plugin.sh [rust|c|python|js]   (default rust)
#   KWS_BIN: the scheduler binary (default: the debug build in $CARGO_TARGET_DIR or ~/.cache/kube-wasm-scheduler/target)
#   CARGO_TARGET_DIR for the Rust guest: set it to a shared directory to time a machine that built a plugin before;
#   unset (the project's own target/) to time the first Rust plugin on a machine, standard library included.
set -euo pipefail
lang="${1:-rust}"
bin="${KWS_BIN:-${HOST_TARGET_DIR:-$HOME/.cache/kube-wasm-scheduler/target}/debug/kube-wasm-scheduler}"
work="$(mktemp -d)"
trap 'kill "${watch:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
case "$lang" in
  rust) file=src/lib.rs; edit='s/Ok(node.data().unwrap_or(0))/Ok(100 - node.data().unwrap_or(0))/' ;;
  c) file=plugin.c; edit='s|: (int64_t)((__int128)s \* 100 / max);|: 100 - (int64_t)((__int128)s * 100 / max);|' ;;
  python) file=app.py; edit='s/            scores.append(n)/            scores.append(100 - n)/' ;;
  js) file=plugin.js; edit='s/      return n;/      return 100n - n;/' ;;
  *) echo "usage: $0 [rust|c|python|js]" >&2; exit 2 ;;
esac
start=$(date +%s.%N)
lap() { printf '%6.1fs  %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$*"; }
wait_for() { # node: until the watch places default/web-1 there
  until grep -Eq "^default/web-1 +$1 " watch.log 2>/dev/null; do sleep 0.1; done
}
"$bin" plugin new my-filter --lang "$lang" >/dev/null; lap "plugin new my-filter --lang $lang"
cd my-filter
"$bin" plugin build >/dev/null 2>&1; lap "plugin build"
"$bin" simulate --watch --config profile.yaml --cluster cluster.yaml --explain default/web-1 >watch.log 2>/dev/null &
watch=$!
wait_for node-b; lap "simulate --watch: default/web-1 on node-b"
sed -i "$edit" "$file"; : >watch.log; lap "edit $file (prefer the lower label)"
"$bin" plugin build >/dev/null 2>&1; lap "plugin build"
wait_for node-a; lap "simulate --watch ran again with the new component: default/web-1 on node-a"
