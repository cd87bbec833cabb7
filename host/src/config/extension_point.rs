//! The extension points, listed once. Each knows its name in the configuration (`preFilter`), in metrics and
//! statuses (`PreFilter`) and in the Wasm contract (`pre-filter`); everything that walks the points (profile
//! expansion, config merging, the Wasm host) derives from this list. At the floor, with the configuration that
//! names them; the framework adds how to ask a plugin whether it serves one.

use std::fmt;

/// One extension point of the scheduling framework, in upstream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtensionPoint {
    /// Gates a pod before it enters activeQ.
    PreEnqueue,
    /// Orders activeQ.
    QueueSort,
    /// Checks or precomputes once per cycle, may narrow the nodes.
    PreFilter,
    /// Rejects nodes.
    Filter,
    /// Runs when no node fits (preemption).
    PostFilter,
    /// Precomputes once per cycle for Score.
    PreScore,
    /// Ranks feasible nodes (with NormalizeScore).
    Score,
    /// Claims resources for the chosen node (Unreserve undoes it).
    Reserve,
    /// Approves, rejects or delays binding.
    Permit,
    /// Prepares the binding.
    PreBind,
    /// Binds the pod.
    Bind,
    /// Informs after binding.
    PostBind,
}

/// The number of extension points.
pub const NUM_EXTENSION_POINTS: usize = 12;

impl ExtensionPoint {
    /// Every extension point, in upstream's order (the order a profile lists them and the cycle runs them).
    pub const ALL: [ExtensionPoint; NUM_EXTENSION_POINTS] = [
        ExtensionPoint::PreEnqueue,
        ExtensionPoint::QueueSort,
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PostFilter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::Bind,
        ExtensionPoint::PostBind,
    ];

    /// Its names: the configuration field, the metric label and status wording, the Wasm contract interface.
    const fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            ExtensionPoint::PreEnqueue => ("preEnqueue", "PreEnqueue", "pre-enqueue"),
            ExtensionPoint::QueueSort => ("queueSort", "QueueSort", "queue-sort"),
            ExtensionPoint::PreFilter => ("preFilter", "PreFilter", "pre-filter"),
            ExtensionPoint::Filter => ("filter", "Filter", "filter"),
            ExtensionPoint::PostFilter => ("postFilter", "PostFilter", "post-filter"),
            ExtensionPoint::PreScore => ("preScore", "PreScore", "pre-score"),
            ExtensionPoint::Score => ("score", "Score", "score"),
            ExtensionPoint::Reserve => ("reserve", "Reserve", "reserve"),
            ExtensionPoint::Permit => ("permit", "Permit", "permit"),
            ExtensionPoint::PreBind => ("preBind", "PreBind", "pre-bind"),
            ExtensionPoint::Bind => ("bind", "Bind", "bind"),
            ExtensionPoint::PostBind => ("postBind", "PostBind", "post-bind"),
        }
    }

    /// The field of `KubeSchedulerConfiguration`'s `plugins` (`preFilter`).
    pub const fn config_name(self) -> &'static str {
        self.names().0
    }

    /// Upstream's name in metrics (`extension_point` label) and messages (`PreFilter`).
    pub const fn metric_name(self) -> &'static str {
        self.names().1
    }

    /// The Wasm contract interface a component exports to serve it (`pre-filter`).
    pub const fn wit_interface(self) -> &'static str {
        self.names().2
    }

    /// Its position in [`ExtensionPoint::ALL`], for per-point arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The point whose contract interface is `name`.
    pub fn from_wit_interface(name: &str) -> Option<ExtensionPoint> {
        ExtensionPoint::ALL.into_iter().find(|p| p.wit_interface() == name)
    }

    /// The point whose configuration field is `name`.
    pub fn from_config_name(name: &str) -> Option<ExtensionPoint> {
        ExtensionPoint::ALL.into_iter().find(|p| p.config_name() == name)
    }
}

impl fmt::Display for ExtensionPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.metric_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indices_follow_the_list() {
        for (i, p) in ExtensionPoint::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i);
            assert_eq!(ExtensionPoint::from_wit_interface(p.wit_interface()), Some(p));
            assert_eq!(ExtensionPoint::from_config_name(p.config_name()), Some(p));
        }
        assert_eq!(ExtensionPoint::from_config_name("multiPoint"), None);
    }
}
