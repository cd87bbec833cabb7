#!/usr/bin/env python3
"""A scheduler extender for GPUs, in the Python 3 standard library only.

It manages the extended resource example.com/gpu: the scheduler calls it only for pods that request or limit that
resource (managedResources), and NodeResourcesFit leaves the resource to it (ignoredByScheduler). A node says how
many GPUs it has with the label example.com/gpu-count.

  filter      nodes without GPUs are FailedAndUnresolvableNodes (preemption cannot help there); nodes with too
              few are FailedNodes
  prioritize  0-10: a node whose GPU count is closest to the request scores highest (bin packing)

The scheduler sends whole Node objects (nodeCacheCapable: false) and Go's field names ("Pod", "Nodes", ...).
Run: python3 extender.py --port 8888   (prints "listening on http://127.0.0.1:PORT"; --port 0 picks a free port)
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOURCE = "example.com/gpu"
COUNT_LABEL = "example.com/gpu-count"


def parse_count(text):
    """A whole-number quantity as Kubernetes writes extended resources ("2")."""
    try:
        return int(str(text))
    except ValueError:
        return 0


def gpus_requested(pod):
    """The pod's GPUs: the larger of the containers' sum and any one init container, as the scheduler counts."""
    spec = pod.get("spec") or {}

    def per_container(c):
        res = c.get("resources") or {}
        req = (res.get("requests") or {}).get(RESOURCE)
        lim = (res.get("limits") or {}).get(RESOURCE)
        return parse_count(req if req is not None else lim or 0)

    main = sum(per_container(c) for c in spec.get("containers") or [])
    init = max([per_container(c) for c in spec.get("initContainers") or []] or [0])
    return max(main, init)


def gpus_of(node):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return parse_count(labels.get(COUNT_LABEL, 0))


def filter_nodes(args):
    want = gpus_requested(args["Pod"])
    kept, failed, unresolvable = [], {}, {}
    for node in (args.get("Nodes") or {}).get("items") or []:
        name, have = node["metadata"]["name"], gpus_of(node)
        if have == 0:
            unresolvable[name] = "node(s) have no GPUs"
        elif have < want:
            failed[name] = f"node(s) have fewer than {want} GPUs"
        else:
            kept.append(node)
    return {
        "Nodes": {"items": kept},
        "NodeNames": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }


def prioritize(args):
    want = gpus_requested(args["Pod"])
    scores = []
    for node in (args.get("Nodes") or {}).get("items") or []:
        spare = gpus_of(node) - want
        scores.append({"Host": node["metadata"]["name"], "Score": max(0, 10 - spare) if spare >= 0 else 0})
    return scores


VERBS = {"/filter": filter_nodes, "/prioritize": prioritize}


class Handler(BaseHTTPRequestHandler):
    # Keep-alive, so the scheduler's connection pool reuses connections.
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        verb = VERBS.get(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if verb is None:
            self.send_error(404)
            return
        answer = json.dumps(verb(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--address", default="127.0.0.1")
    a = p.parse_args()
    server = ThreadingHTTPServer((a.address, a.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
