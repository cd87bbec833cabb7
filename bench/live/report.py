#!/usr/bin/env python3
"""Tables and a plot from a bench-live run: medians per contender, ratios between contenders.

Usage: report.py OUT_DIR        (reads OUT_DIR/runs.json and meta.json, written by bench/live/driver)

Writes OUT_DIR/summary.md (the Markdown tables it also prints), OUT_DIR/summary.json (medians and ratios) and, when
matplotlib can be imported, OUT_DIR/results.png. Only the standard library is needed for the tables.
"""

import json
import os
import statistics
import sys

# (key in runs.json, column title, format)
METRICS = [
    ("pods_per_s", "pods/s", "{:.1f}"),
    ("p50_ms", "p50 ms", "{:.0f}"),
    ("p99_ms", "p99 ms", "{:.0f}"),
    ("sched_cpu_s", "sched CPU s", "{:.2f}"),
    ("sched_rss_mib", "peak RSS MiB", "{:.1f}"),
    ("apiserver_cpu_s", "API server CPU s", "{:.2f}"),
    ("sched_peak_conns", "conns to API", "{:.0f}"),
    ("sched_peak_threads", "threads", "{:.0f}"),
]
EXTRA = ["etcd_cpu_s", "driver_cpu_s", "ready_s", "create_s", "first_bind_s", "window_s", "p90_ms", "max_ms"]
# Ratio tables: numerator / denominator. Lower is better for every metric but pods/s.
PAIRS = [
    ("ours", "kube"),
    ("null", "kube"),
    ("ours", "null"),
    ("ours-guests", "ours"),
    ("ours-guests", "kube"),
    ("ours", "kube-json"),
    ("kube-json", "kube"),
]
RATIO_METRICS = ["pods_per_s", "p50_ms", "p99_ms", "sched_cpu_s", "sched_rss_mib", "apiserver_cpu_s", "sched_peak_conns"]
ORDER = ["kube", "ours", "null", "ours-guests", "kube-json"]
COLORS = {"kube": "#326ce5", "ours": "#d95f02", "null": "#7f7f7f", "ours-guests": "#1b9e77", "kube-json": "#7570b3"}


def groups_of(runs):
    """[(nodes, pods, shape)] in the order they ran."""
    seen = []
    for r in runs:
        g = (r["nodes"], r["pods"], r["shape"])
        if g not in seen:
            seen.append(g)
    return seen


def label(g):
    nodes, pods, shape = g
    return f"{nodes:,} nodes, {pods:,} pods, {shape}"


def contenders_of(runs):
    names = {r["contender"] for r in runs}
    return [c for c in ORDER if c in names] + sorted(names - set(ORDER))


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def paired(runs, g, num, den, key):
    """num/den of `key` for each repetition both ran successfully in group g: the machine's pace drifts between
    runs, and a pair that ran back to back shares it, so the spread of these says how far a median can be trusted."""
    by = {}
    for r in runs:
        if (r["nodes"], r["pods"], r["shape"]) == g and r["ok"] and r["contender"] in (num, den):
            by.setdefault(r["rep"], {})[r["contender"]] = r[key]
    return [x for rep in sorted(by) if (x := ratio(by[rep].get(num), by[rep].get(den))) is not None]


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    with open(os.path.join(out, "runs.json")) as f:
        runs = json.load(f) or []
    meta = {}
    if os.path.exists(os.path.join(out, "meta.json")):
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
    if not runs:
        print("report: no runs in", out, file=sys.stderr)
        return 1

    groups = groups_of(runs)
    names = contenders_of(runs)
    medians = {}  # (group, contender) -> {metric: median}
    for g in groups:
        for c in names:
            ok = [r for r in runs if (r["nodes"], r["pods"], r["shape"]) == g and r["contender"] == c and r["ok"]]
            if ok:
                m = {k: statistics.median(r[k] for r in ok) for k, _, _ in METRICS}
                m.update({k: statistics.median(r[k] for r in ok) for k in EXTRA})
                m["runs"] = len(ok)
                medians[(g, c)] = m

    lines = []
    say = lines.append
    say("## bench-live results")
    say("")
    if meta:
        say(f"- machine: {meta.get('cpus')} CPUs ({meta.get('cpu_model')}), {meta.get('memory')}, kernel {meta.get('kernel')}")
        say(f"- kube-scheduler: {meta.get('kube_scheduler', {}).get('version')}; ours: "
            f"{meta.get('ours', {}).get('version')} ({meta.get('ours', {}).get('path')})")
        say(f"- repetitions: {meta.get('reps')}, interleaved {', '.join(meta.get('contenders', []))} "
            f"(reversed at every other repetition); "
            f"clientConnection qps/burst {meta.get('qps'):g}/{meta.get('burst')}; "
            f"{meta.get('create_workers')} concurrent pod creations")
    say("- pods/s: bound pods / time from the window start until the last pod was seen bound; the window starts at "
        "the first pod creation (streaming: the scheduler was running and ready) or at the scheduler process's start "
        "(backlog: every pod was created first)")
    say("- latency: the driver's watch saw spec.nodeName set, minus the moment the pod's create call returned "
        "(streaming) or the scheduler process started (backlog)")
    say("- sched CPU: the scheduler process's utime+stime at the end of the run (start-up included); peak RSS: VmHWM; "
        "API server CPU: its utime+stime from just before the scheduler started until just before it was stopped; "
        "conns to API: peak of the scheduler's established TCP connections to the API server's port, "
        f"sampled every {meta.get('sample_interval', '100ms')} (less often while one sample costs more than a "
        "thirtieth of that)")
    say("- values are medians over the successful runs (runs column)")
    failed = [r for r in runs if not r["ok"]]
    if failed:
        say(f"- **{len(failed)} run(s) failed**: " + "; ".join(
            f"#{r['run']} {label((r['nodes'], r['pods'], r['shape']))} {r['contender']} rep {r['rep']}: {r['error']}"
            for r in failed))
    say("")

    for g in groups:
        say(f"### {label(g)}")
        say("")
        say("| contender | runs | " + " | ".join(t for _, t, _ in METRICS) + " |")
        say("|---|---:|" + "---:|" * len(METRICS))
        for c in names:
            m = medians.get((g, c))
            if not m:
                say(f"| {c} | 0 | " + " | ".join("–" for _ in METRICS) + " |")
                continue
            say(f"| {c} | {m['runs']} | " + " | ".join(fmt.format(m[k]) for k, _, fmt in METRICS) + " |")
        say("")

    ratios = {}
    titles = {k: t for k, t, _ in METRICS}
    for num, den in PAIRS:
        if num not in names or den not in names:
            continue
        say(f"### {num} / {den}")
        say("")
        say("| shape | " + " | ".join(titles[k] for k in RATIO_METRICS) + " |")
        say("|---|" + "---:|" * len(RATIO_METRICS))
        for g in groups:
            a, b = medians.get((g, num)), medians.get((g, den))
            row = []
            for k in RATIO_METRICS:
                x = ratio(a and a[k], b and b[k]) if a and b else None
                ratios.setdefault(f"{num}/{den}", {}).setdefault(label(g), {})[k] = x
                row.append("–" if x is None else f"{x:.2f}×")
            say(f"| {label(g)} | " + " | ".join(row) + " |")
        say("")
        for g in groups:
            pairs = paired(runs, g, num, den, "sched_cpu_s")
            ratios.setdefault(f"{num}/{den}", {}).setdefault(label(g), {})["sched_cpu_s_pairs"] = pairs
            if len(pairs) > 1:
                say(f"- {label(g)}: sched CPU rep by rep (each pair ran back to back): median "
                    f"{statistics.median(pairs):.2f}× ({min(pairs):.2f}–{max(pairs):.2f}×, {len(pairs)} pairs)")
        say("")

    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({
            "medians": [{"group": label(g), "nodes": g[0], "pods": g[1], "shape": g[2], "contender": c, **m}
                        for (g, c), m in medians.items()],
            "ratios": ratios,
            "failed": failed,
        }, f, indent=2)
        f.write("\n")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"report: matplotlib not available, no plot (tables in {out}/summary.md)", file=sys.stderr)
        return 0
    plot(plt, out, runs, groups, names, medians, meta)
    return 0


def plot(plt, out, runs, groups, names, medians, meta):
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    xs = range(len(groups))
    width = 0.8 / max(1, len(names))
    ticks = [f"{g[0]:,} nodes\n{g[1]:,} pods\n{g[2]}" for g in groups]

    def absolute(ax, key, title, log=False):
        for j, c in enumerate(names):
            off = (j - (len(names) - 1) / 2) * width
            heights = [medians.get((g, c), {}).get(key, 0) for g in groups]
            ax.bar([x + off for x in xs], heights, width, label=c, color=COLORS.get(c), alpha=0.75)
            for i, g in enumerate(groups):
                pts = [r[key] for r in runs if (r["nodes"], r["pods"], r["shape"]) == g and r["contender"] == c and r["ok"]]
                ax.scatter([i + off] * len(pts), pts, s=14, color="black", zorder=3)
        ax.set_xticks(list(xs), ticks, fontsize=8)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)

    def relative(ax, keys, title):
        others = [c for c in names if c != "kube"]
        if "kube" not in names or not others:
            ax.set_visible(False)
            return
        bars = [(c, k) for c in others for k in keys]
        w = 0.8 / len(bars)
        hatches = ["", "//", ".."]
        for j, (c, k) in enumerate(bars):
            off = (j - (len(bars) - 1) / 2) * w
            vals = []
            for g in groups:
                a, b = medians.get((g, c)), medians.get((g, "kube"))
                vals.append(ratio(a and a[k], b and b[k]) or 0 if a and b else 0)
            ax.bar([x + off for x in xs], vals, w, color=COLORS.get(c), alpha=0.75,
                   hatch=hatches[keys.index(k) % len(hatches)], edgecolor="black", linewidth=0.3,
                   label=f"{c}: {dict((m, t) for m, t, _ in METRICS)[k]}")
        ax.axhline(1, color="black", linewidth=0.8)
        ax.set_ylim(0, max(1.0, ax.get_ylim()[1]) * 1.4)  # room for the legend above the bars
        ax.set_xticks(list(xs), ticks, fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=2, loc="upper center")
        ax.grid(axis="y", alpha=0.3)

    absolute(axes[0][0], "pods_per_s", "pods/s (bars: median, dots: runs)")
    axes[0][0].set_ylim(0, axes[0][0].get_ylim()[1] * 1.2)
    axes[0][0].legend(fontsize=8, ncol=len(names), loc="upper center")
    absolute(axes[0][1], "p99_ms", "p99 latency, ms (log)", log=True)
    relative(axes[1][0], ["sched_cpu_s", "apiserver_cpu_s"], "CPU relative to kube-scheduler (scheduler; API server)")
    relative(axes[1][1], ["sched_rss_mib"], "peak RSS relative to kube-scheduler")
    sub = f"{meta.get('cpus', '?')} CPUs, reps {meta.get('reps', '?')}, {meta.get('started', '')}"
    fig.suptitle(f"kube-wasm-scheduler vs kube-scheduler v1.37.2, live on one kube-apiserver ({sub})", fontsize=11)
    fig.tight_layout()
    path = os.path.join(out, "results.png")
    fig.savefig(path, dpi=110)
    print(f"report: plot in {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
