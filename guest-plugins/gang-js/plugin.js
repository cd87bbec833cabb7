// gang-js: a tiny gang (the pods of a group are bound together or not at all) in JavaScript, to exercise the glue's
// 0.2 additions: the pod view, the waiting pods, and events with a queueing hint. The same policy as gang-c, gang-py
// and gang-go (and a small part of the Rust coscheduling guest); world gang-plugin.
//
// A pod is in group `namespace/G` when it carries the label pod-group.scheduling.sigs.k8s.io/name: G, and the group
// needs pod-group.scheduling.sigs.k8s.io/min-available: "N" of its pods placed at once (1 when absent).
// - PreFilter: fewer pods of the group in the pod view than N is UnschedulableAndUnresolvable.
// - Permit: once N pods of the group are assumed or bound (this one included), allow every waiting sibling and go
//   on; until then wait, at most WAIT_MS.
// - Unreserve (a member timed out or was rejected): reject every other waiting pod of the group.
// - Events: a pending pod created with the group's label, or labelled later, may complete the group: the hint
//   answers queue only for a pod that joins the rejected pod's group.
import {
  NodeTable,
  allowWaitingPod,
  label,
  placed,
  podView,
  rejectWaitingPod,
  success,
  unresolvable,
  wait,
  waitingPods,
} from './glue.js';

// The `pods` export: keeps `podView` up to date.
export { pods } from './glue.js';

const GROUP = 'pod-group.scheduling.sigs.k8s.io/name';
const MIN_AVAILABLE = 'pod-group.scheduling.sigs.k8s.io/min-available';
const WAIT_MS = 2000n; // u64: BigInt

const table = new NodeTable();

// The pod's group label, or undefined when it has none (or an empty one).
const groupOf = (pod) => label(pod, GROUP) || undefined;

const inGroup = (pod, namespace, group) => pod.namespace === namespace && label(pod, GROUP) === group;

// The pod's min-available: 1 without the label, 0 when it is not a positive integer.
function minAvailable(pod) {
  const value = label(pod, MIN_AVAILABLE);
  if (value === undefined) return 1;
  return /^[0-9]{1,6}$/.test(value) ? Number(value) : 0;
}

// The group's known pods.
const members = (pod, group) => podView.withLabel(GROUP, group, pod.namespace);

// The UIDs of the group's pods waiting at Permit, except `pod`.
const waitingSiblings = (pod, group) =>
  waitingPods()
    .filter((w) => inGroup(w.pod, pod.namespace, group) && w.pod.uid !== pod.uid)
    .map((w) => w.pod.uid);

export const config = {
  validate() {},
};

export const nodes = {
  apply(changes) {
    table.apply(changes);
  },
};

export const preFilter = {
  preFilter(pod) {
    const group = groupOf(pod);
    if (group === undefined) return { status: success(), nodeNames: undefined };
    const need = minAvailable(pod);
    if (need === 0) {
      const reason = `pod ${pod.namespace}/${pod.name}: label ${MIN_AVAILABLE} wants a positive integer`;
      return { status: unresolvable(reason), nodeNames: undefined };
    }
    const have = members(pod, group).length;
    if (have < need) {
      const reason =
        `pre-filter pod ${pod.name} cannot find enough sibling pods, current pods number: ${have}, ` +
        `minMember: ${need}, podGroup: ${pod.namespace}/${group}`;
      return { status: unresolvable(reason), nodeNames: undefined };
    }
    return { status: success(), nodeNames: undefined };
  },

  // PreFilter's what-ifs: the group does not depend on which node a pod is on.
  addPod() {
    return success();
  },

  removePod() {
    return success();
  },
};

export const reserve = {
  reserve() {
    return success();
  },

  // A member left (timed out, or was rejected): its waiting siblings cannot complete the group without it.
  unreserve(pod) {
    const group = groupOf(pod);
    if (group === undefined) return;
    const reason = `rejection in Unreserve: pod ${pod.namespace}/${pod.name} of PodGroup ${pod.namespace}/${group} left`;
    for (const uid of waitingSiblings(pod, group)) rejectWaitingPod(uid, reason);
  },
};

export const permit = {
  permit(pod) {
    const group = groupOf(pod);
    const need = group === undefined ? 0 : minAvailable(pod);
    if (need === 0) return { status: success(), timeoutMs: 0n };
    let done = members(pod, group).filter(placed).length;
    // The host shows the pod assumed before Permit runs; count it anyway if that update has not arrived.
    const me = podView.get(pod.uid);
    if (me === undefined || !placed(me)) done += 1;
    if (done < need) {
      const reason = `waiting for ${need - done} more pod(s) of PodGroup ${pod.namespace}/${group} (minMember ${need})`;
      return { status: wait(reason), timeoutMs: WAIT_MS };
    }
    for (const uid of waitingSiblings(pod, group)) allowWaitingPod(uid);
    return { status: success(), timeoutMs: 0n };
  },
};

export const events = {
  eventsToRegister() {
    return [{ resource: 'unscheduled-pod', actions: { add: true, updateLabel: true } }];
  },

  // Queue only for a pod that joins the rejected pod's group (it was not in it before the event).
  queueingHint(pod, event, old, now) {
    const group = groupOf(pod);
    const inIt = (obj) => obj !== undefined && obj.tag === 'pod' && inGroup(obj.val, pod.namespace, group);
    return group !== undefined && inIt(now) && !inIt(old) ? 'queue' : 'queue-skip';
  },
};
