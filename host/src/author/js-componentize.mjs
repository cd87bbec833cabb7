// Builds a JavaScript guest into a component with componentize-js: node js-componentize.mjs MODULES WIT SOURCE OUT
// WORLD, run in the source's directory (componentize-js maps the working directory into its build sandbox, so
// that `./glue.js` resolves). MODULES is the node_modules holding @bytecodealliance/componentize-js
// (scripts/setup-wasm.sh js). Embedded in `kube-wasm-scheduler plugin build` (host/src/author/toolchain.rs).
// Random, stdio, clocks and http are disabled, so the component imports only the world's own interfaces.
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, witPath, sourcePath, out, worldName] = process.argv.slice(2);
const entry = resolve(modules, '@bytecodealliance/componentize-js/src/componentize.js');
const { componentize } = await import(pathToFileURL(entry).href);
const { component } = await componentize({
  sourcePath: resolve(sourcePath),
  witPath: resolve(witPath),
  worldName,
  disableFeatures: ['random', 'stdio', 'clocks', 'http', 'fetch-event'],
});
await writeFile(out, component);
