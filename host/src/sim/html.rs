//! `simulate --report FILE.html`: one self-contained page (inline styles, no script, nothing fetched) with, per
//! run, the outcome, a bar chart of every node's requested CPU and memory, and each pod's placement with its
//! per-plugin explanation folded beneath it.

use std::fmt::Write as _;

use std::collections::BTreeMap;

use super::Report;
use crate::framework::CycleTrace;

/// The CPU bars' colour (the test that looks at a screenshot of the page finds it by this).
pub const CPU_COLOR: &str = "#2563eb";
/// The memory bars' colour.
pub const MEMORY_COLOR: &str = "#ea580c";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn percent(req: i64, alloc: i64) -> f64 {
    if alloc > 0 {
        (req as f64 / alloc as f64 * 100.0).clamp(0.0, 100.0)
    } else {
        0.0
    }
}

/// The page for runs named `names` (one per profile).
pub fn render_html(title: &str, names: &[String], reports: &[Report]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>\
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111}}\
h1{{font-size:20px}}h2{{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}}\
.runs{{display:flex;gap:32px;flex-wrap:wrap}}.run{{flex:1;min-width:420px}}\
table{{border-collapse:collapse}}td,th{{padding:2px 8px;text-align:left;vertical-align:top}}\
.bar{{height:9px;margin:1px 0}}.cpu{{background:{CPU_COLOR}}}.mem{{background:{MEMORY_COLOR}}}\
.track{{width:240px;background:#eee}}.pending{{color:#b91c1c}}\
pre{{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}}\
.legend span{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}}\
</style></head><body><h1>{t}</h1>\n",
        t = esc(title)
    );
    let _ = write!(
        h,
        "<p class=\"legend\">Requested of allocatable:<span class=\"cpu\"></span>CPU<span class=\"mem\"></span>memory</p>\n<div class=\"runs\">\n"
    );
    for (name, r) in names.iter().zip(reports) {
        let scheduled = r.placements.iter().filter(|p| p.node.is_some()).count();
        let _ = writeln!(
            h,
            "<section class=\"run\" id=\"run-{id}\"><h2>{n}</h2><p>{scheduled} scheduled, {} pending, {} evicted; {} of {} nodes with pods.</p>",
            r.placements.len() - scheduled,
            r.evictions.len(),
            r.usage.iter().filter(|u| u.pods > 0).count(),
            r.nodes,
            id = esc(name).replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
            n = esc(name),
        );
        let _ =
            writeln!(h, "<table class=\"nodes\"><tr><th>node</th><th>zone</th><th>pods</th><th>CPU / memory</th></tr>");
        for u in &r.usage {
            let (c, m) =
                (percent(u.cpu_requested, u.cpu_allocatable), percent(u.memory_requested, u.memory_allocatable));
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><div class=\"track\"><div class=\"bar cpu\" style=\"width:{c:.1}%\" title=\"CPU {c:.0}%\"></div><div class=\"bar mem\" style=\"width:{m:.1}%\" title=\"memory {m:.0}%\"></div></div></td></tr>",
                esc(&u.node),
                esc(u.zone.as_deref().unwrap_or("")),
                u.pods
            );
        }
        h.push_str("</table>\n<h2>Pods</h2><table class=\"pods\">\n");
        for p in &r.placements {
            let (node, class) = match &p.node {
                Some(n) => (esc(n), ""),
                None => ("pending".into(), " class=\"pending\""),
            };
            let traces: String =
                r.explain.iter().filter(|e| e.pod == p.pod).map(|e| attempt(e.attempt, &e.result, &e.trace)).collect();
            let _ = write!(h, "<tr><td>{}</td><td{class}>{node}</td><td>", esc(&p.pod));
            if traces.is_empty() {
                let _ = write!(h, "{}", esc(&p.message));
            } else {
                let _ = write!(h, "<details><summary>{}</summary>{traces}</details>", esc(&p.message));
            }
            h.push_str("</td></tr>\n");
        }
        h.push_str("</table></section>\n");
    }
    h.push_str("</div></body></html>\n");
    h
}

/// How many of the best-scored nodes an attempt's score table shows.
const TOP_NODES: usize = 3;

/// One attempt, compactly: each PreFilter answer, Filter's verdicts counted by reason, each Score plugin's
/// weighted score on the best nodes, and preemption's outcome (`--explain` prints every node instead).
fn attempt(n: u32, result: &str, t: &CycleTrace) -> String {
    let mut h = format!("<div class=\"attempt\"><b>attempt {n}</b>: {}<br>", esc(result));
    if !t.pre_filter.is_empty() {
        let pf: Vec<String> = t.pre_filter.iter().map(|(p, s)| format!("{p} {s}")).collect();
        let _ = write!(h, "PreFilter: {}<br>", esc(&pf.join(", ")));
    }
    if !t.filter.is_empty() {
        let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, v) in &t.filter {
            *by_reason.entry(v.as_str()).or_default() += 1;
        }
        let parts: Vec<String> = by_reason.iter().map(|(v, c)| format!("{c} {v}")).collect();
        let _ = write!(h, "Filter ({} nodes evaluated): {}<br>", t.filter.len(), esc(&parts.join("; ")));
    }
    let mut best: Vec<&(String, i64)> = t.totals.iter().collect();
    best.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    best.truncate(TOP_NODES);
    if !best.is_empty() {
        h.push_str("<table class=\"scores\"><tr><th>plugin (weight)</th>");
        for (node, _) in &best {
            let _ = write!(h, "<th>{}</th>", esc(node));
        }
        h.push_str("</tr>");
        for s in &t.scores {
            let _ = write!(h, "<tr><td>{} ({})</td>", esc(&s.plugin), s.weight);
            for (node, _) in &best {
                let w = s.nodes.iter().find(|(n, ..)| n == node).map_or(0, |(_, _, _, w)| *w);
                let _ = write!(h, "<td>{w}</td>");
            }
            h.push_str("</tr>");
        }
        h.push_str("<tr><td><b>total</b></td>");
        for (_, total) in &best {
            let _ = write!(h, "<td><b>{total}</b></td>");
        }
        h.push_str("</tr></table>");
    }
    if let Some(pf) = &t.post_filter {
        let _ = write!(h, "PostFilter: {}<br>", esc(pf));
    }
    h.push_str("</div>");
    h
}
