// priority-label: Filter keeps the nodes that carry a label; Score ranks them by the label's integer value.
// Config: {"labelKey": "..."} (default "priority.example.com"). Scores are s64, so BigInt.
import { log } from 'kws:plugin/host@0.2.1';
import { NodeTable, error, filterResult, loadConfig, success, unknownSlot, unresolvable } from './glue.js';

// The `cycle` export: Filter and Score are about its pod (cyclePod()), which this policy never reads, so never fetches.
export { cycle } from './glue.js';

const DEFAULT_LABEL_KEY = 'priority.example.com';
const INTEGER = /^[+-]?[0-9]+$/;
const S64_MIN = -(2n ** 63n);
const S64_MAX = 2n ** 63n - 1n;

const table = new NodeTable();
let settings;

// The configured label key; throws an Error when the config is invalid.
function labelKey() {
  if (settings === undefined) {
    try {
      settings = loadConfig({ labelKey: DEFAULT_LABEL_KEY });
    } catch (e) {
      log('error', e.message);
      settings = e;
    }
  }
  if (settings instanceof Error) throw settings;
  return settings.labelKey;
}

// The value as a signed decimal 64-bit integer, or undefined.
function parseS64(value) {
  if (!INTEGER.test(value)) return undefined;
  const n = BigInt(value);
  return n >= S64_MIN && n <= S64_MAX ? n : undefined;
}

// The host calls it when it loads the plugin: a bad labelKey stops the scheduler before it serves. A thrown string
// is the call's err(string).
export const config = {
  validate() {
    try {
      labelKey();
    } catch (e) {
      throw e.message;
    }
  },
};

export const nodes = {
  apply(changes) {
    table.apply(changes);
  },
};

// Filter for one node: success when it carries the label.
function filterNode(key, slot) {
  const node = table.get(slot);
  if (node === undefined) return unknownSlot(slot);
  if (node.labels.has(key)) return success();
  return unresolvable(`node(s) didn't have label ${key}`);
}

export const filter = {
  filter(slots) {
    let key;
    try {
      key = labelKey();
    } catch (e) {
      return filterResult(Array.from(slots, () => error(e.message)));
    }
    return filterResult(Array.from(slots, (slot) => filterNode(key, slot)));
  },
};

// A thrown status is the call's err(status); a returned list is ok(list).
export const score = {
  score(slots) {
    let key;
    try {
      key = labelKey();
    } catch (e) {
      throw error(e.message);
    }
    return Array.from(slots, (slot) => {
      const node = table.get(slot);
      if (node === undefined) throw unknownSlot(slot);
      const value = node.labels.get(key);
      if (value === undefined) return 0n;
      const n = parseS64(value);
      if (n === undefined) throw error(`node ${node.name}: label ${key} has non-integer value "${value}"`);
      return n;
    });
  },

  // scores[i] is the raw score of slots[i]; the answer keeps that order. (The list may arrive as a BigInt64Array:
  // answer with a plain array.)
  normalizeScore(slots, scores) {
    let highest = 0n;
    for (const s of scores) if (s > highest) highest = s;
    if (highest <= 0n) return Array.from(scores, () => 0n);
    return Array.from(scores, (s) => ((s > 0n ? s : 0n) * 100n) / highest);
  },
};
