# Shared by the Python guests' build.sh (sourced, not run): `py_guest NAME WORLD OUTPUT.wasm FILE...` builds the
# module `app` (app.py among FILEs) into a component of WORLD with componentize-py (scripts/setup-wasm.sh python).
export PATH="$HOME/.cache/kube-wasm-scheduler/tools/bin:$PATH"

py_guest() { # name world output files...
  local name="$1" world="$2" out="$3" wit src
  shift 3
  wit="$(cd "$(dirname "${BASH_SOURCE[0]}")/../wit" && pwd)"
  if ! command -v componentize-py >/dev/null 2>&1; then
    echo "$name: componentize-py not found; run scripts/setup-wasm.sh python" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$out")"
  # Build from a copy: componentize-py leaves __pycache__ next to the modules it loads.
  src="$(mktemp -d)"
  cp "$@" "$src/"
  componentize-py -d "$wit" -w "$world" componentize app -p "$src" -o "$out" || { rm -rf "$src"; exit 1; }
  rm -rf "$src"
}
