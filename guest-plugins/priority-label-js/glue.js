// Contract glue for kws:plugin@0.2.1 guests: the node table, the cycle's pod (the `cycle` export), status
// constructors, Filter's batched answer and the plugin's config.
import { config, cyclePod as fetchCyclePod } from 'kws:plugin/host@0.2.1';

// The guest's copy of the nodes: slot -> { name, labels: Map }. The host sends changes before any call that
// names slots.
export class NodeTable {
  constructor() {
    this.slots = new Map();
  }

  apply(changes) {
    for (const change of changes) {
      if (change.tag === 'upsert') {
        const [slot, node] = change.val;
        this.slots.set(slot, { name: node.name, labels: new Map(node.labels) });
      } else if (change.tag === 'remove') {
        this.slots.delete(change.val);
      }
    }
  }

  // { name, labels } of the node at `slot`, or undefined when the slot is empty.
  get(slot) {
    return this.slots.get(slot);
  }
}

let currentPod; // fetched on first use in a cycle: each host cyclePod() copies the whole pod

// The `cycle` export (re-export it from the policy module: `export { cycle } from './glue.js'`): a new cycle starts,
// so the pod fetched in the previous one is forgotten.
export const cycle = {
  begin() {
    currentPod = undefined;
  },
};

// The pod of the current cycle (the one Filter, Score and NormalizeScore are about), or undefined when the host has
// none (outside those calls). Undefined is not cached: asking costs no pod copy, and an undefined seen outside those
// calls must not hide the pod from the ones that follow.
export function cyclePod() {
  if (currentPod === undefined) currentPod = fetchCyclePod();
  return currentPod;
}

export const success = () => ({ code: 'success', reasons: [] });
export const error = (reason) => ({ code: 'error', reasons: [reason] });
export const unresolvable = (reason) => ({ code: 'unschedulable-and-unresolvable', reasons: [reason] });
export const unknownSlot = (slot) => error(`unknown node slot ${slot}`);

// Filter's answer (filter-result) from one status per node, in the order of the call's nodes (any iterable): a node
// whose status is not success is rejected, and equal statuses (same code and reasons) are sent once, in order of
// first appearance.
export function filterResult(perNode) {
  const statuses = [];
  const index = new Map();
  const rejected = [];
  const verdicts = [];
  let position = 0;
  for (const status of perNode) {
    if (status.code !== 'success') {
      const key = JSON.stringify([status.code, status.reasons]);
      let at = index.get(key);
      if (at === undefined) {
        at = statuses.length;
        index.set(key, at);
        statuses.push(status);
      }
      rejected.push(position);
      verdicts.push(at);
    }
    position++;
  }
  return { statuses, rejected, verdicts };
}

// The plugin's JSON config from the host, over `defaults`. Throws an Error when it is not a JSON object or a key
// has another type than its default.
export function loadConfig(defaults) {
  let given;
  try {
    given = JSON.parse(config());
  } catch (e) {
    throw new Error(`invalid config: malformed JSON (${e.message})`);
  }
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new Error('invalid config: not a JSON object');
  }
  const result = { ...defaults };
  for (const [key, value] of Object.entries(defaults)) {
    if (key in given) {
      if (typeof given[key] !== typeof value) throw new Error(`invalid config: ${key} must be a ${typeof value}`);
      result[key] = given[key];
    }
  }
  return result;
}
