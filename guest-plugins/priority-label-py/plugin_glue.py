"""Contract glue for kws:plugin@0.2.1 guests: the node table, the cycle's pod (the `cycle` export), status
constructors, Filter's batched answer and the plugin's config."""

import json

from wit_world import exports
from wit_world.exports.filter import FilterResult
from wit_world.imports import host
from wit_world.imports.types import Code, NodeChange_Remove, NodeChange_Upsert, Status


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


class Cycle(exports.Cycle):
    """The `cycle` export (export it from the app module: `from plugin_glue import Cycle`): a new cycle starts, so
    the pod fetched in the previous one is forgotten."""

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
