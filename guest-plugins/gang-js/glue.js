// Contract glue for kws:plugin@0.2.1 guests: the node table, the cycle's pod (the `cycle` export), status
// constructors, Filter's batched answer, the plugin's config, the waiting pods, and the pod view (the `pods` export).
// It serves any world of the contract (`plugin.yaml`'s `world`, default filter-score-plugin): a plugin re-exports
// the glue's `cycle` and `pods` only when its world exports them, and pays nothing for the rest.
import {
  allowWaitingPod as hostAllowWaitingPod,
  config,
  cyclePod as fetchCyclePod,
  rejectWaitingPod as hostRejectWaitingPod,
  waitingPods as hostWaitingPods,
} from 'kws:plugin/host@0.2.1';

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
export const wait = (reason) => ({ code: 'wait', reasons: [reason] });

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

// ---- waiting pods: upstream's IterateOverWaitingPods, WaitingPod.Allow and WaitingPod.Reject ----

// The pods of this plugin's profile waiting at Permit ({ pod, node, pendingPlugins }), in no order.
export const waitingPods = () => hostWaitingPods();

// Allows the waiting pod with this UID on behalf of this plugin; false when no such pod waits.
export const allowWaitingPod = (uid) => hostAllowWaitingPod(uid, undefined);

// Rejects the waiting pod with this UID (its binding cycle fails as Unschedulable); false when no such pod waits.
export const rejectWaitingPod = (uid, reason) => hostRejectWaitingPod(uid, undefined, reason);

// ---- the pod view ----

// The value of a pod's (or node's) label, or undefined (labels arrive as [key, value] pairs).
export function label(obj, key) {
  for (const [k, v] of obj.labels) if (k === key) return v;
  return undefined;
}

// True when a known pod is assumed or bound (on a node), not pending.
export const placed = (known) => known.state !== 'pending';

// Every pod the scheduler knows (pending pods of the plugin's profiles, assumed and bound pods), kept from the
// host's change lists: UID -> known pod ({ pod, state: 'pending' | 'assumed' | 'bound', firstSeenNs: BigInt }).
// Iterating yields the known pods.
export class PodView {
  constructor() {
    this.byUid = new Map();
  }

  apply(changes) {
    for (const change of changes) {
      if (change.tag === 'upsert') this.byUid.set(change.val.pod.uid, change.val);
      else if (change.tag === 'remove') this.byUid.delete(change.val);
      else if (change.tag === 'reset') this.byUid.clear();
    }
  }

  // The known pod with this UID, or undefined.
  get(uid) {
    return this.byUid.get(uid);
  }

  get size() {
    return this.byUid.size;
  }

  [Symbol.iterator]() {
    return this.byUid.values();
  }

  // The known pods whose label `key` is `value` (in `namespace` when given).
  withLabel(key, value, namespace) {
    return [...this.byUid.values()].filter(
      (k) => (namespace === undefined || k.pod.namespace === namespace) && label(k.pod, key) === value,
    );
  }
}

// The view, kept up to date by the `pods` export below.
export const podView = new PodView();

// The `pods` export (re-export it from the policy module when its world exports `pods`:
// `export { pods } from './glue.js'`).
export const pods = {
  apply(changes) {
    podView.apply(changes);
  },
};
