#!/usr/bin/env bash
# Builds the priority-label JavaScript guest into a component: build.sh OUTPUT.wasm
# Needs node and @bytecodealliance/componentize-js (scripts/setup-wasm.sh js).
set -euo pipefail
out="${1:?usage: build.sh OUTPUT.wasm}"
here="$(cd "$(dirname "$0")" && pwd)"
modules="${KWS_CACHE:-$HOME/.cache/kube-wasm-scheduler}/tools/js/node_modules"
if ! command -v node >/dev/null 2>&1; then
  echo "priority-label-js: node not found" >&2
  exit 1
fi
if [ ! -f "$modules/@bytecodealliance/componentize-js/package.json" ]; then
  echo "priority-label-js: componentize-js not found in $modules; run scripts/setup-wasm.sh js" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
# componentize-js maps the working directory into the build sandbox (so that ./glue.js resolves): run it here.
cd "$here"
node --input-type=module - "$modules" "$here/../../wit" "$here/priority-label.js" "$out" <<'EOF'
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, witPath, sourcePath, out] = process.argv.slice(2);
const entry = resolve(modules, '@bytecodealliance/componentize-js/src/componentize.js');
const { componentize } = await import(pathToFileURL(entry).href);
const { component } = await componentize({
  sourcePath: resolve(sourcePath),
  witPath: resolve(witPath),
  worldName: 'filter-score-plugin',
  disableFeatures: ['random', 'stdio', 'clocks', 'http', 'fetch-event'],
});
await writeFile(out, component);
EOF
