"""chatty: a test fixture that passes every node, scores every node 0, and prints on every Filter call.

Config: {"bytes": N} (default 200): each Filter call writes N bytes (with the newline) to stdout and N to stderr, as a
chatty but harmless plugin would. The host must drain them per call into its log without ever trapping the guest.
"""

import sys

from wit_world import exports

from plugin_glue import NodeTable, filter_result, load_config, success
from plugin_glue import Cycle  # the `cycle` export (the pod is never fetched)

nodes = NodeTable()
calls = 0


class Config(exports.Config):
    def validate(self):
        pass


class Nodes(exports.Nodes):
    def apply(self, changes):
        nodes.apply(changes)


class Filter(exports.Filter):
    def filter(self, slots):
        global calls
        calls += 1
        size = load_config({"bytes": 200})["bytes"]
        line = f"chatty guest: filter call {calls} "
        line = (line + "." * size)[: max(size - 1, 0)]
        print(line, flush=True)
        print(line, file=sys.stderr, flush=True)
        return filter_result(success() for _ in slots)


class Score(exports.Score):
    def score(self, slots):
        return [0 for _ in slots]

    def normalize_score(self, slots, scores):
        return [0 for _ in scores]
