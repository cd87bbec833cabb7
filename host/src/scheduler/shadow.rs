//! Shadow mode: a profile may name another as its shadow. On every scheduling cycle of the serving profile the
//! shadow runs the same algorithm (PreFilter, Filter, PreScore, Score, NormalizeScore) on the same snapshot and
//! the same pod, and never acts: nothing it decides is assumed, reserved, permitted, bound or preempted for. Its
//! decision is compared with the serving one; the outcome is counted (`kws_shadow_decisions_total`), the latest
//! disagreements are kept for `/debug/shadow`, and disagreements are sampled into the log (at most one line a
//! second per profile, with how many were left out), so a new plugin version can be trialled on real traffic before
//! it serves.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// How many disagreements `/debug/shadow` keeps per profile, newest last.
pub const RECENT_DISAGREEMENTS: usize = 20;

/// The least time between two log lines about one profile's disagreements.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// What a profile decided for one pod, as the comparison sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The node chosen, and every node that scored as high (the serving profile breaks such ties at random, so a
    /// shadow agrees when the serving node is any of its best).
    Node {
        /// The node chosen.
        host: String,
        /// The nodes with the highest total score, the chosen one among them.
        best: Vec<String>,
    },
    /// No node fits; upstream's `0/N nodes are available: ...` without PostFilter's part (a shadow never
    /// preempts).
    Unschedulable(String),
    /// The algorithm ended with an Error status.
    Error(String),
}

impl Decision {
    /// A short form for the log and `/debug/shadow`.
    fn describe(&self) -> String {
        match self {
            Decision::Node { host, best } if best.len() > 1 => format!("{host} (tied with {})", best.len() - 1),
            Decision::Node { host, .. } => host.clone(),
            Decision::Unschedulable(m) => format!("unschedulable: {m}"),
            Decision::Error(m) => format!("error: {m}"),
        }
    }
}

/// How one comparison came out (the `result` label of `kws_shadow_decisions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The serving node is among the shadow's best, or neither found a node.
    Agree,
    /// Anything else: another node, or a node where the other found none.
    Disagree,
    /// The shadow's algorithm ended with an Error status (a failing candidate, not a disagreement).
    Error,
}

impl Verdict {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Disagree => "disagree",
            Verdict::Error => "error",
        }
    }
}

/// Compares a shadow's decision with the serving one; `None` when the serving profile itself failed with an
/// Error (there is no decision to compare with).
pub fn compare(serving: &Decision, shadow: &Decision) -> Option<Verdict> {
    Some(match (serving, shadow) {
        (Decision::Error(_), _) => return None,
        (_, Decision::Error(_)) => Verdict::Error,
        (Decision::Node { host, .. }, Decision::Node { best, .. }) if best.contains(host) => Verdict::Agree,
        (Decision::Unschedulable(_), Decision::Unschedulable(_)) => Verdict::Agree,
        _ => Verdict::Disagree,
    })
}

/// One disagreement (or shadow error), as `/debug/shadow` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    /// When it was decided (RFC 3339).
    pub time: String,
    /// `namespace/name`.
    pub pod: String,
    /// What the serving profile decided (and did).
    pub serving: String,
    /// What the shadow would have decided.
    pub shadow: String,
}

/// One serving profile's comparisons so far.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    /// The shadow profile's schedulerName.
    pub shadow: String,
    /// Cycles compared.
    pub decisions: u64,
    /// Comparisons that agreed.
    pub agree: u64,
    /// Comparisons that disagreed.
    pub disagree: u64,
    /// Cycles in which the shadow ended with an Error status.
    pub error: u64,
    /// The latest disagreements and errors, oldest first.
    pub recent: VecDeque<Disagreement>,
    /// When a disagreement was last logged.
    #[serde(skip)]
    last_logged: Option<Instant>,
    /// Disagreements not logged since then.
    #[serde(skip)]
    unlogged: u64,
}

/// Every serving profile's comparisons: counted for the metrics, the latest kept for `/debug/shadow`, and
/// disagreements sampled into the log.
#[derive(Debug, Default)]
pub struct ShadowBook {
    tallies: Mutex<BTreeMap<String, Tally>>,
}

impl ShadowBook {
    /// Records one comparison of `profile`'s decision with its shadow's for pod `pod` (`namespace/name`).
    pub fn record(&self, profile: &str, shadow: &str, pod: &str, serving: &Decision, shadowed: &Decision) {
        let Some(verdict) = compare(serving, shadowed) else { return };
        let mut tallies = self.tallies.lock().expect("shadow lock");
        // Recorded on every cycle of a shadowed profile: the name is copied only the first time.
        if !tallies.contains_key(profile) {
            tallies.insert(profile.to_string(), Tally::default());
        }
        let t = tallies.get_mut(profile).expect("inserted above");
        if t.shadow != shadow {
            t.shadow = shadow.to_string();
        }
        t.decisions += 1;
        match verdict {
            Verdict::Agree => {
                t.agree += 1;
                return;
            }
            Verdict::Disagree => t.disagree += 1,
            Verdict::Error => t.error += 1,
        }
        let d = Disagreement {
            time: k8s_openapi::jiff::Timestamp::now().to_string(),
            pod: pod.to_string(),
            serving: serving.describe(),
            shadow: shadowed.describe(),
        };
        let now = Instant::now();
        if t.last_logged.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
            tracing::info!(
                profile,
                shadow,
                pod = %d.pod,
                serving = %d.serving,
                shadow_decision = %d.shadow,
                result = verdict.label(),
                not_logged_since_last = t.unlogged,
                "shadow profile disagrees"
            );
            t.last_logged = Some(now);
            t.unlogged = 0;
        } else {
            t.unlogged += 1;
        }
        if t.recent.len() == RECENT_DISAGREEMENTS {
            t.recent.pop_front();
        }
        t.recent.push_back(d);
    }

    /// Each serving profile's tally so far, by profile name.
    pub fn tallies(&self) -> BTreeMap<String, Tally> {
        self.tallies.lock().expect("shadow lock").clone()
    }

    /// `/debug/shadow`: every profile's tally as JSON, `{"profiles": {"<name>": {...}}}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({ "profiles": self.tallies() }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, best: &[&str]) -> Decision {
        Decision::Node { host: host.into(), best: best.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn a_serving_node_among_the_shadows_best_agrees_and_any_other_disagrees() {
        assert_eq!(compare(&node("a", &["a"]), &node("b", &["b", "a"])), Some(Verdict::Agree));
        assert_eq!(compare(&node("a", &["a"]), &node("b", &["b"])), Some(Verdict::Disagree));
        let none = Decision::Unschedulable("0/3 nodes are available".into());
        assert_eq!(compare(&none, &none), Some(Verdict::Agree));
        assert_eq!(compare(&none, &node("b", &["b"])), Some(Verdict::Disagree));
        assert_eq!(compare(&node("a", &["a"]), &Decision::Error("boom".into())), Some(Verdict::Error));
        assert_eq!(compare(&Decision::Error("boom".into()), &node("a", &["a"])), None);
    }

    #[test]
    fn the_book_counts_every_comparison_and_keeps_the_latest_disagreements() {
        let book = ShadowBook::default();
        for i in 0..(RECENT_DISAGREEMENTS + 5) {
            book.record("p", "s", &format!("ns/pod-{i}"), &node("a", &["a"]), &node("b", &["b"]));
        }
        book.record("p", "s", "ns/same", &node("a", &["a"]), &node("a", &["a"]));
        book.record("p", "s", "ns/failed", &Decision::Error("x".into()), &node("a", &["a"]));
        let t = &book.tallies()["p"];
        assert_eq!((t.decisions, t.agree, t.disagree, t.error), (RECENT_DISAGREEMENTS as u64 + 6, 1, 25, 0));
        assert_eq!(t.recent.len(), RECENT_DISAGREEMENTS);
        assert_eq!(t.recent.back().map(|d| d.pod.as_str()), Some("ns/pod-24"));
        let json: serde_json::Value = serde_json::from_str(&book.to_json()).unwrap();
        assert_eq!(json["profiles"]["p"]["disagree"], 25);
        assert_eq!(json["profiles"]["p"]["shadow"], "s");
    }
}
