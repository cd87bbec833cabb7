//! PrioritySort: the default queue order. Higher priority first; equal priorities in the order they were queued.

use crate::framework::PluginContext;
use crate::framework::{ClusterEvent, Plugin, QueueSortPlugin, QueuedPodInfo};

/// The plugin's name in profiles.
pub const NAME: &str = "PrioritySort";

/// The PrioritySort plugin.
#[derive(Debug, Default)]
pub struct PrioritySort;

impl PrioritySort {
    /// Builds the plugin; it takes no args.
    pub fn new(_args: Option<&serde_json::Value>, _ctx: &PluginContext) -> Result<PrioritySort, String> {
        Ok(PrioritySort)
    }
}

impl Plugin for PrioritySort {
    fn name(&self) -> &str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // Queue ordering rejects no pod, so no event concerns it.
        Vec::new()
    }
    crate::serves!(queue_sort);
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testutil::{ctx, pod};
    use serde_json::json;
    use std::sync::Arc;

    fn qp(priority: Option<i32>, ts: u64) -> QueuedPodInfo {
        let spec = match priority {
            Some(p) => json!({"priority": p}),
            None => json!({}),
        };
        QueuedPodInfo::new(Arc::new(pod(json!({"metadata": {"name": "p"}, "spec": spec}))), ts)
    }

    #[test]
    fn table() {
        let cases = [
            ("higher priority first", qp(Some(100), 2), qp(Some(1), 1), true),
            ("lower priority later", qp(Some(1), 1), qp(Some(100), 2), false),
            ("equal priority, earlier timestamp first", qp(Some(5), 1), qp(Some(5), 2), true),
            ("equal priority, later timestamp after", qp(Some(5), 2), qp(Some(5), 1), false),
            ("equal priority and timestamp: not less", qp(Some(5), 1), qp(Some(5), 1), false),
            ("unset priority counts as 0", qp(None, 1), qp(Some(-1), 0), true),
            ("unset priority ties with 0", qp(None, 2), qp(Some(0), 1), false),
        ];
        let pl = PrioritySort::new(None, &ctx()).unwrap();
        for (name, a, b, want) in cases {
            assert_eq!(pl.less(&a, &b), want, "{name}");
        }
    }

    #[test]
    fn sorts_a_queue() {
        let pl = PrioritySort;
        let mut q = [qp(Some(1), 1), qp(Some(10), 3), qp(Some(10), 2), qp(None, 0)];
        q.sort_by(|a, b| {
            if pl.less(a, b) {
                std::cmp::Ordering::Less
            } else if pl.less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        let got: Vec<(i32, u64)> = q.iter().map(|p| (p.pod_info.priority, p.timestamp)).collect();
        assert_eq!(got, [(10, 2), (10, 3), (1, 1), (0, 0)]);
    }
}
