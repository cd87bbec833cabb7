#!/usr/bin/env python3
"""make bench-tenancy: what tenant policies cost the scheduler.

50 namespaces with a SchedulingPolicy each (half a Filter, drain-guard; half a Score, priority-label; each with its
own config), 5,000 pods across them on 200 nodes, placed by `kube-wasm-scheduler simulate` (the scheduler's own
cycle, no API server) with the policies and without them, interleaved, several rounds. The guests are pulled from
the CNCF distribution registry on 127.0.0.1 (scripts/build-registry.sh). Reports scheduler CPU per pod (user +
system, from the child's rusage), peak RSS, their ratios, and RSS growth per policy. Each round also runs both
cluster files without their pods: what is left of a run's CPU once that load (reading the file, fetching and
instantiating the policies, building the node tables) is taken away is the scheduling's, per pod.

Usage: scripts/bench-tenancy.py [--rounds N] [--bin PATH] [--namespaces N] [--pods N] [--nodes N]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    print(f"bench-tenancy: error: {msg}", file=sys.stderr)
    sys.exit(2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_measured(argv):
    """Runs argv; (user+sys seconds, peak RSS bytes, wall seconds, its rusage)."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        die(f"{' '.join(argv)} failed: {err[-2000:]}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, wall, ru


def cluster(namespaces, pods, nodes, registry, with_policies):
    docs = []
    for i in range(nodes):
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": f"node-{i:03d}", "labels": {"rank": str(i % 10), "zone": f"z{i % 4}"}},
                     "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"}}})
    for n in range(namespaces):
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{n:02d}"}})
        if not with_policies:
            continue
        if n % 2 == 0:
            spec = {"component": f"oci://{registry}/policies/drain-guard:1", "points": ["Filter"],
                    "config": {"nodes": [f"node-{(n * 7 + k) % nodes:03d}" for k in range(20)]}}
        else:
            spec = {"component": f"oci://{registry}/policies/priority-label:1", "points": ["Score"], "weight": 5,
                    "config": {"labelKey": "rank"}}
        spec["schedulerName"] = "kws"
        docs.append({"apiVersion": "scheduling.kube-wasm-scheduler.io/v1alpha1", "kind": "SchedulingPolicy",
                     "metadata": {"name": "policy", "namespace": f"team-{n:02d}"}, "spec": spec})
    for i in range(pods):
        docs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"p-{i:05d}", "namespace": f"team-{i % namespaces:02d}"},
                     "spec": {"schedulerName": "kws", "containers": [
                         {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}})
    return "".join("---\n" + json.dumps(d) + "\n" for d in docs)


PROFILE = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: kws
  plugins:
    multiPoint:
      enabled: [{name: TenantPolicies, weight: 10}]
  pluginConfig:
  - name: TenantPolicies
    args:
      namespaced: {maxWeight: 10, maxPoliciesPerNamespace: 1, cpuBudget: 0s}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.environ.get("KWS_BIN", ""))
    ap.add_argument("--namespaces", type=int, default=50)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--nodes", type=int, default=200)
    a = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/kube-wasm-scheduler/target"))
    if not a.bin:
        print("bench-tenancy: cargo build --release --bin kube-wasm-scheduler", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "--bin", "kube-wasm-scheduler"], cwd=ROOT, check=True)
        a.bin = os.path.join(target, "release", "kube-wasm-scheduler")
    for g in ("drain-guard", "priority-label"):
        if not os.path.exists(os.path.join(ROOT, "guest-plugins/build", f"{g}.wasm")):
            die(f"guest-plugins/build/{g}.wasm is missing: run make guests")
    out = subprocess.run([os.path.join(ROOT, "scripts/build-registry.sh")], capture_output=True, text=True, check=True)
    registry_bin = out.stdout.strip().splitlines()[-1]
    work = tempfile.mkdtemp(prefix="kws-bench-tenancy-")
    host = f"127.0.0.1:{free_port()}"
    with open(os.path.join(work, "registry.yml"), "w") as f:
        f.write(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {work}/data}}\nhttp: {{addr: {host}}}\n")
    reg = subprocess.Popen([registry_bin, "serve", os.path.join(work, "registry.yml")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(tuple([host.split(":")[0], int(host.split(":")[1])]), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        for g in ("drain-guard", "priority-label"):
            subprocess.run([a.bin, "plugin", "push", os.path.join(ROOT, "guest-plugins/build", f"{g}.wasm"),
                            f"oci://{host}/policies/{g}:1"], check=True, capture_output=True)
        profile = os.path.join(work, "profile.yaml")
        with open(profile, "w") as f:
            f.write(PROFILE)
        files = {}
        for name, with_policies in (("without", False), ("with", True)):
            for pods, suffix in ((a.pods, ""), (0, "-load")):
                files[name + suffix] = os.path.join(work, f"cluster-{name}{suffix}.yaml")
                with open(files[name + suffix], "w") as f:
                    f.write(cluster(a.namespaces, pods, a.nodes, host, with_policies))
        # A private plugin cache, warmed once: every measured run loads the components from it, as a restarted
        # scheduler would (the first pull is not what a steady cluster pays).
        env_cache = os.path.join(work, "plugin-cache")
        os.environ["KWS_PLUGIN_CACHE"] = env_cache
        run_measured([a.bin, "simulate", "--config", profile, "--cluster", files["with"], "--output", "json"])
        results = {"without": [], "with": [], "without-load": [], "with-load": []}
        order = ("without", "with", "without-load", "with-load")
        for r in range(a.rounds):
            for name in order if r % 2 == 0 else tuple(reversed(order)):
                cpu, rss, wall, ru = run_measured([a.bin, "simulate", "--config", profile, "--cluster", files[name],
                                              "--output", "json"])
                results[name].append((cpu, rss, wall))
                # user and system time apart, page faults and context switches: what tells a slow round's cause.
                print(f"bench-tenancy: round {r + 1} {name:<12} cpu {cpu:.2f}s (user {ru.ru_utime:.2f}s, sys "
                      f"{ru.ru_stime:.2f}s) rss {rss / 2**20:.0f} MiB wall {wall:.2f}s faults {ru.ru_minflt} "
                      f"switches {ru.ru_nvcsw}+{ru.ru_nivcsw}", file=sys.stderr)
    finally:
        reg.kill()
        reg.wait()
        shutil.rmtree(work, ignore_errors=True)

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    cpu = {k: median([c for c, _, _ in v]) for k, v in results.items()}
    rss = {k: median([m for _, m, _ in v]) for k, v in results.items()}
    # Per round, the run minus the same cluster without pods (medians of the differences).
    sched = {k: median([c - l for (c, _, _), (l, _, _) in zip(results[k], results[k + "-load"])])
             for k in ("without", "with")}
    print(f"| run ({a.pods} pods, {a.nodes} nodes, {a.namespaces} namespaces) | CPU per pod, whole run "
          f"| CPU per pod, scheduling (run − load) | load CPU | peak RSS |")
    print("|---|---|---|---|---|")
    for k in ("without", "with"):
        label = "no tenant policies" if k == "without" else f"{a.namespaces} SchedulingPolicies"
        print(f"| {label} | {cpu[k] / a.pods * 1e6:.0f} µs | {sched[k] / a.pods * 1e6:.0f} µs "
              f"| {cpu[k + '-load'] * 1e3:.0f} ms | {rss[k] / 2**20:.0f} MiB |")
    print(f"| ratio | {cpu['with'] / cpu['without']:.2f}× | {sched['with'] / sched['without']:.2f}× "
          f"| {cpu['with-load'] / cpu['without-load']:.2f}× | {rss['with'] / rss['without']:.2f}× |")
    print(f"\nRSS growth per policy: {(rss['with'] - rss['without']) / a.namespaces / 2**20:.2f} MiB "
          f"(medians of {a.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
