"""Contract glue for kws:plugin@0.2.1 guests: the node table, the cycle's pod (the `cycle` export), status
constructors, Filter's batched answer, the plugin's config, the waiting pods, and the pod view (the `pods` export).

The glue serves any world of the contract (`plugin.yaml`'s `world`, default filter-score-plugin): what a world does
not export (`cycle`, `pods`) is simply not defined here, so a plugin imports only what its world has."""

import json

from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    Code,
    NodeChange_Remove,
    NodeChange_Upsert,
    PodChange_Remove,
    PodChange_Reset,
    PodChange_Upsert,
    PodState,
    Status,
)


class NodeTable:
    """The guest's copy of the nodes: slot -> (name, labels as a dict). The host sends changes before any call
    that names slots."""

    def __init__(self):
        self._slots = {}

    def apply(self, changes):
        for change in changes:
            if isinstance(change, NodeChange_Upsert):
                slot, node = change.value
                self._slots[slot] = (node.name, dict(node.labels))
            elif isinstance(change, NodeChange_Remove):
                self._slots.pop(change.value, None)

    def get(self, slot):
        """(name, labels) of the node at `slot`, or None when the slot is empty."""
        return self._slots.get(slot)


_cycle_pod = None  # fetched on first use in a cycle: each host.cycle_pod() copies the whole pod


if hasattr(exports, "Cycle"):

    class Cycle(exports.Cycle):
        """The `cycle` export (export it from the app module: `from plugin_glue import Cycle`): a new cycle starts,
        so the pod fetched in the previous one is forgotten."""

        def begin(self):
            global _cycle_pod
            _cycle_pod = None


def cycle_pod():
    """The pod of the current cycle (a `types.Pod`, the one Filter, Score and NormalizeScore are about), or None when
    the host has none (outside those calls). None is not cached: asking costs no pod copy, and a None seen outside
    those calls must not hide the pod from the ones that follow."""
    global _cycle_pod
    if _cycle_pod is None:
        _cycle_pod = host.cycle_pod()
    return _cycle_pod


def success():
    return Status(code=Code.SUCCESS, reasons=[])


def error(reason):
    return Status(code=Code.ERROR, reasons=[reason])


def unresolvable(reason):
    return Status(code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons=[reason])


def unknown_slot(slot):
    return error(f"unknown node slot {slot}")


def filter_result(statuses):
    """Filter's answer from one status per node, in the order of the call's nodes: a node whose status is not
    success is rejected, and equal statuses (same code and reasons) are sent once, in order of first appearance."""
    from wit_world.exports.filter import FilterResult  # only worlds that export Filter have it

    distinct, index, rejected, verdicts = [], {}, [], []
    for position, status in enumerate(statuses):
        if status.code == Code.SUCCESS:
            continue
        key = (status.code, tuple(status.reasons))
        at = index.get(key)
        if at is None:
            at = index[key] = len(distinct)
            distinct.append(status)
        rejected.append(position)
        verdicts.append(at)
    return FilterResult(statuses=distinct, rejected=rejected, verdicts=verdicts)


def load_config(defaults):
    """The plugin's JSON config from the host, over `defaults`. Raises ValueError when it is not a JSON object
    or a key has another type than its default."""
    try:
        given = json.loads(host.config())
    except ValueError as e:
        raise ValueError(f"invalid config: malformed JSON ({e})") from None
    if not isinstance(given, dict):
        raise ValueError("invalid config: not a JSON object")
    config = dict(defaults)
    for key, default in defaults.items():
        if key in given:
            if not isinstance(given[key], type(default)):
                kind = "string" if isinstance(default, str) else type(default).__name__
                raise ValueError(f"invalid config: {key} must be a {kind}")
            config[key] = given[key]
    return config


def wait(reason):
    return Status(code=Code.WAIT, reasons=[reason])


# ---- waiting pods: upstream's IterateOverWaitingPods, WaitingPod.Allow and WaitingPod.Reject ----


def waiting_pods():
    """The pods of this plugin's profile waiting at Permit (`types.WaitingPod`: .pod, .node, .pending_plugins), in
    no order."""
    return host.waiting_pods()


def allow_waiting_pod(uid):
    """Allows the waiting pod with this UID on behalf of this plugin; False when no such pod waits."""
    return host.allow_waiting_pod(uid, None)


def reject_waiting_pod(uid, reason):
    """Rejects the waiting pod with this UID (its binding cycle fails as Unschedulable); False when no such pod
    waits."""
    return host.reject_waiting_pod(uid, None, reason)


# ---- the pod view ----


class PodView:
    """Every pod the scheduler knows (pending pods of the plugin's profiles, assumed and bound pods), kept from the
    host's change lists: UID -> `types.KnownPod` (.pod, .state, .first_seen_ns). Iterating yields the known pods."""

    def __init__(self):
        self._pods = {}

    def apply(self, changes):
        for change in changes:
            if isinstance(change, PodChange_Upsert):
                self._pods[change.value.pod.uid] = change.value
            elif isinstance(change, PodChange_Remove):
                self._pods.pop(change.value, None)
            elif isinstance(change, PodChange_Reset):
                self._pods.clear()

    def get(self, uid):
        """The known pod with this UID, or None."""
        return self._pods.get(uid)

    def __iter__(self):
        return iter(self._pods.values())

    def __len__(self):
        return len(self._pods)

    def with_label(self, key, value, namespace=None):
        """The known pods whose label `key` is `value` (in `namespace` when given)."""
        return [
            k
            for k in self._pods.values()
            if (namespace is None or k.pod.namespace == namespace) and label(k.pod, key) == value
        ]


def label(pod, key):
    """The value of the pod's (or node's) label `key`, or None."""
    for k, v in pod.labels:
        if k == key:
            return v
    return None


def placed(known):
    """True when a known pod is assumed or bound (on a node), not pending."""
    return known.state != PodState.PENDING


pods = PodView()

if hasattr(exports, "Pods"):

    class Pods(exports.Pods):
        """The `pods` export (export it from the app module: `from plugin_glue import Pods`): keeps `pods`, the
        view, up to date."""

        def apply(self, changes):
            pods.apply(changes)
