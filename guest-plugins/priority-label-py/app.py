"""priority-label: Filter keeps the nodes that carry a label; Score ranks them by the label's integer value.

Config: {"labelKey": "..."} (default "priority.example.com").
"""

import re

from wit_world import exports
from wit_world.imports import host
from wit_world.imports.host import Level
from componentize_py_types import Err

from plugin_glue import NodeTable, error, filter_result, load_config, success, unknown_slot, unresolvable
from plugin_glue import Cycle  # the `cycle` export: Filter and Score are about its pod (cycle_pod()), never fetched

DEFAULT_LABEL_KEY = "priority.example.com"
INTEGER = re.compile(r"[+-]?[0-9]+")
S64_MIN, S64_MAX = -(2**63), 2**63 - 1

nodes = NodeTable()
_config = None


def label_key():
    """The configured label key; raises ValueError when the config is invalid."""
    global _config
    if _config is None:
        try:
            _config = load_config({"labelKey": DEFAULT_LABEL_KEY})
        except ValueError as e:
            host.log(Level.ERROR, str(e))
            _config = e
    if isinstance(_config, ValueError):
        raise _config
    return _config["labelKey"]


def parse_s64(value):
    """The value as a signed decimal 64-bit integer, or None."""
    if INTEGER.fullmatch(value):
        n = int(value)
        if S64_MIN <= n <= S64_MAX:
            return n
    return None


class Config(exports.Config):
    def validate(self):
        # The host calls it when it loads the plugin: a bad labelKey stops the scheduler before it serves.
        try:
            label_key()
        except ValueError as e:
            raise Err(str(e))


class Nodes(exports.Nodes):
    def apply(self, changes):
        nodes.apply(changes)


def filter_node(key, slot):
    """Filter for one node: success when it carries the label."""
    node = nodes.get(slot)
    if node is None:
        return unknown_slot(slot)
    if key in node[1]:
        return success()
    return unresolvable(f"node(s) didn't have label {key}")


class Filter(exports.Filter):
    def filter(self, slots):
        try:
            key = label_key()
        except ValueError as e:
            return filter_result(error(str(e)) for _ in slots)
        return filter_result(filter_node(key, slot) for slot in slots)


class Score(exports.Score):
    def score(self, slots):
        try:
            key = label_key()
        except ValueError as e:
            raise Err(error(str(e)))
        scores = []
        for slot in slots:
            node = nodes.get(slot)
            if node is None:
                raise Err(unknown_slot(slot))
            name, labels = node
            value = labels.get(key)
            if value is None:
                scores.append(0)
                continue
            n = parse_s64(value)
            if n is None:
                raise Err(error(f'node {name}: label {key} has non-integer value "{value}"'))
            scores.append(n)
        return scores

    def normalize_score(self, slots, scores):
        # scores[i] is the raw score of slots[i]; the answer keeps that order.
        highest = max(scores, default=0)
        if highest <= 0:
            return [0 for _ in scores]
        return [max(0, s) * 100 // highest for s in scores]
