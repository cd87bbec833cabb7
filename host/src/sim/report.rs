//! Renders the simulator's report: a table for people, JSON for tools, and the `--explain` breakdown.

use std::fmt::Write as _;

use super::Report;
use crate::framework::CycleTrace;

/// The placements as an aligned table, then evictions and ignored pods.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    let w_pod = r
        .placements
        .iter()
        .map(|p| p.pod.len())
        .chain(r.evictions.iter().map(|e| e.pod.len()))
        .max()
        .unwrap_or(3)
        .max(3);
    let w_node = r.placements.iter().map(|p| p.node.as_deref().unwrap_or("<none>").len()).max().unwrap_or(4).max(4);
    let _ = writeln!(out, "{:<w_pod$}  {:<w_node$}  RESULT", "POD", "NODE");
    for p in &r.placements {
        let result = if p.node.is_some() { "Scheduled".to_string() } else { p.message.clone() };
        let _ = writeln!(out, "{:<w_pod$}  {:<w_node$}  {}", p.pod, p.node.as_deref().unwrap_or("<none>"), result);
    }
    for e in &r.evictions {
        let _ = writeln!(out, "{:<w_pod$}  {:<w_node$}  Evicted (preempted by {})", e.pod, e.node, e.preemptor);
    }
    if !r.claims.is_empty() {
        let _ = writeln!(out, "\nCLAIM -> VOLUME");
        for c in &r.claims {
            let how = c.provisioned_for.as_ref().map(|n| format!(" (provisioned for {n})")).unwrap_or_default();
            let _ = writeln!(out, "{} -> {}{how}", c.claim, c.volume);
        }
    }
    if !r.resource_claims.is_empty() {
        let _ = writeln!(out, "\nCLAIM -> DEVICES");
        for c in &r.resource_claims {
            let _ = writeln!(out, "{} -> {}", c.claim, c.devices.join(", "));
        }
    }
    let bound = r.placements.iter().filter(|p| p.node.is_some()).count();
    let _ = writeln!(
        out,
        "\n{bound} scheduled, {} pending, {} evicted; {} nodes.",
        r.placements.len() - bound,
        r.evictions.len(),
        r.nodes
    );
    if !r.ignored.is_empty() {
        let _ = writeln!(out, "Left alone (no profile serves their schedulerName): {}", r.ignored.join(", "));
    }
    for s in &r.shadows {
        let _ = writeln!(
            out,
            "Shadow {} beside {}: {} decisions, {} agree, {} disagree, {} errors.",
            s.shadow, s.profile, s.decisions, s.agree, s.disagree, s.error
        );
    }
    for p in &r.policies {
        let verdict = if p.ready { "Ready" } else { "Not ready" };
        let _ = writeln!(out, "{} ({}): {verdict}, {}: {}", p.policy, p.profile, p.reason, p.message);
    }
    out
}

/// Per attempt of each explained pod: PreFilter, per-node Filter verdicts, and per-plugin scores.
pub fn render_explain(r: &Report) -> String {
    r.explain.iter().map(|e| render_trace(&e.pod, e.attempt, &e.result, &e.trace)).collect()
}

/// One attempt's trace as `render_explain` writes it (attempt 0: not numbered, as the live scheduler logs it).
pub fn render_trace(pod: &str, attempt: u32, result: &str, t: &CycleTrace) -> String {
    let mut out = String::new();
    match attempt {
        0 => {
            let _ = writeln!(out, "== {pod}: {result}");
        }
        n => {
            let _ = writeln!(out, "== {pod} (attempt {n}): {result}");
        }
    }
    if !t.pre_filter.is_empty() {
        let _ = writeln!(out, "PreFilter:");
        for (p, s) in &t.pre_filter {
            let _ = writeln!(out, "  {p:<34} {s}");
        }
    }
    if let Some(n) = &t.nominated_node {
        let _ = writeln!(out, "Nominated node {n} was tried first and fits; no other node evaluated");
        return out;
    }
    let _ = writeln!(out, "Filter ({} nodes evaluated, {} not evaluated):", t.filter.len(), t.not_evaluated);
    for (n, s) in &t.filter {
        let _ = writeln!(out, "  {n:<34} {s}");
    }
    for x in t.extenders.iter().filter(|x| x.verb == "filter") {
        let _ = writeln!(out, "Extender {} filter:", x.extender);
        if let Some(e) = &x.error {
            let _ = writeln!(out, "  error: {e}");
        }
        for (n, v) in &x.verdicts {
            let _ = writeln!(out, "  {n:<34} {v}");
        }
    }
    if let Some(p) = &t.post_filter {
        let _ = writeln!(out, "PostFilter: {p}");
    }
    if !t.pre_score_skipped.is_empty() {
        let _ = writeln!(out, "PreScore skipped: {}", t.pre_score_skipped.join(", "));
    }
    let prioritized = t.extenders.iter().any(|x| x.verb == "prioritize");
    if !t.scores.is_empty() || prioritized {
        let legend = if prioritized { "; extenders: score / added" } else { "" };
        let _ = writeln!(out, "Score (raw / normalized / weighted{legend}):");
        let nodes: Vec<&str> = t.totals.iter().map(|(n, _)| n.as_str()).collect();
        let _ = write!(out, "  {:<34}", "plugin (weight)");
        for n in &nodes {
            let _ = write!(out, " {n:>18}");
        }
        out.push('\n');
        for s in &t.scores {
            let _ = write!(out, "  {:<34}", format!("{} ({})", s.plugin, s.weight));
            for (_, raw, norm, weighted) in &s.nodes {
                let _ = write!(out, " {:>18}", format!("{raw}/{norm}/{weighted}"));
            }
            out.push('\n');
        }
        for x in t.extenders.iter().filter(|x| x.verb == "prioritize") {
            let _ = write!(out, "  {:<34}", format!("extender {}", x.extender));
            match &x.error {
                Some(e) => {
                    let _ = write!(out, " error: {e}");
                }
                None => {
                    for n in &nodes {
                        let cell = x.scores.iter().find(|(h, _, _)| h == n);
                        let cell = cell.map_or("-".to_string(), |(_, raw, added)| format!("{raw}/{added}"));
                        let _ = write!(out, " {cell:>18}");
                    }
                }
            }
            out.push('\n');
        }
        let _ = write!(out, "  {:<34}", "total");
        for (_, total) in &t.totals {
            let _ = write!(out, " {total:>18}");
        }
        out.push('\n');
    } else if t.filter.iter().filter(|(_, s)| s == "feasible").count() == 1 {
        let _ = writeln!(out, "Score: skipped (only one feasible node)");
    }
    out
}

/// Several profiles' runs of one cluster side by side (`simulate --config A --config B ...`): the outcome, how
/// evenly each loaded the nodes, where each put the pods per zone, every node's load, and the pods that went to
/// different nodes. `names` label the runs, in order.
pub fn render_compare(names: &[String], reports: &[Report]) -> String {
    let mut out = String::new();
    let longest = reports
        .iter()
        .flat_map(|r| r.placements.iter().map(|p| p.pod.len()).chain(r.usage.iter().map(|u| u.node.len())))
        .max()
        .unwrap_or(0);
    let w0 = (longest + 2).max(20);
    let w = names.iter().map(String::len).max().unwrap_or(0).max(18);
    let row = |out: &mut String, label: &str, cells: Vec<String>| {
        let _ = write!(out, "{label:<w0$}");
        for c in cells {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
    };
    row(&mut out, "", names.to_vec());
    let per = |f: &dyn Fn(&Report) -> String| reports.iter().map(f).collect::<Vec<_>>();
    row(&mut out, "scheduled", per(&|r| r.placements.iter().filter(|p| p.node.is_some()).count().to_string()));
    row(&mut out, "pending", per(&|r| r.placements.iter().filter(|p| p.node.is_none()).count().to_string()));
    row(&mut out, "evicted", per(&|r| r.evictions.len().to_string()));
    row(&mut out, "nodes with pods", per(&|r| r.usage.iter().filter(|u| u.pods > 0).count().to_string()));
    let share = |req: i64, alloc: i64| if alloc > 0 { req as f64 / alloc as f64 * 100.0 } else { 0.0 };
    let stats = |r: &Report, cpu: bool| {
        let v: Vec<f64> = r
            .usage
            .iter()
            .map(|u| {
                if cpu {
                    share(u.cpu_requested, u.cpu_allocatable)
                } else {
                    share(u.memory_requested, u.memory_allocatable)
                }
            })
            .collect();
        let n = v.len().max(1) as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let max = v.iter().cloned().fold(0.0, f64::max);
        format!("{mean:.0}% ±{sd:.0} max {max:.0}%")
    };
    row(&mut out, "cpu requested", per(&|r| stats(r, true)));
    row(&mut out, "memory requested", per(&|r| stats(r, false)));

    let mut zones: Vec<String> = reports.iter().flat_map(|r| r.usage.iter().filter_map(|u| u.zone.clone())).collect();
    zones.sort();
    zones.dedup();
    if !zones.is_empty() {
        let _ = writeln!(out, "\npods per zone");
        for z in &zones {
            row(
                &mut out,
                &format!("  {z}"),
                per(&|r| {
                    r.usage.iter().filter(|u| u.zone.as_ref() == Some(z)).map(|u| u.pods).sum::<usize>().to_string()
                }),
            );
        }
    }

    let _ = writeln!(out, "\nnodes with pods in any run (pods, cpu, memory requested)");
    let mut nodes: Vec<String> =
        reports.iter().flat_map(|r| r.usage.iter().filter(|u| u.pods > 0).map(|u| u.node.clone())).collect();
    nodes.sort();
    nodes.dedup();
    for n in &nodes {
        row(
            &mut out,
            &format!("  {n}"),
            per(&|r| match r.usage.iter().find(|u| &u.node == n) {
                Some(u) => format!(
                    "{} {:.0}% {:.0}%",
                    u.pods,
                    share(u.cpu_requested, u.cpu_allocatable),
                    share(u.memory_requested, u.memory_allocatable)
                ),
                None => "-".into(),
            }),
        );
    }

    let mut pods: Vec<&String> = reports.iter().flat_map(|r| r.placements.iter().map(|p| &p.pod)).collect();
    pods.sort();
    pods.dedup();
    let node_of = |r: &Report, pod: &str| {
        r.placements.iter().find(|p| p.pod == pod).and_then(|p| p.node.clone()).unwrap_or_else(|| "<none>".into())
    };
    let moved: Vec<&&String> =
        pods.iter().filter(|p| reports.windows(2).any(|w| node_of(&w[0], p) != node_of(&w[1], p))).collect();
    let _ = writeln!(out, "\npods placed differently: {} of {}", moved.len(), pods.len());
    for p in moved {
        row(&mut out, &format!("  {p}"), per(&|r| node_of(r, p)));
    }
    out
}
