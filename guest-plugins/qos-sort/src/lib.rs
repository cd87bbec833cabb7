//! QosSort: a QueueSort plugin. Higher priority first, then Guaranteed before Burstable before BestEffort, then
//! the pod that entered the queue earlier.

use kws_plugin_sdk::{Config, Plugin, PodRef, QueuedPod};

/// The plugin (no configuration).
pub struct QosSort;

impl Plugin for QosSort {
    type NodeData = ();

    fn new(_config: &Config) -> Result<Self, String> {
        Ok(QosSort)
    }

    fn less(&self, a: &QueuedPod, b: &QueuedPod) -> bool {
        let key = |q: &QueuedPod| (std::cmp::Reverse(q.pod.priority), q.pod.qos_class.rank(), q.timestamp_ns);
        key(a) < key(b)
    }

    /// The same order as a key: one call per pod entering the queue instead of one per comparison. (Built with the
    /// cargo feature `less-only`, the plugin gives no key, so its cost with `less` alone can be measured.)
    /// The pod by reference: the key reads two of its fields, so only those cross the boundary.
    #[cfg(not(feature = "less-only"))]
    fn sort_key_ref(&self, pod: &PodRef<'_>, timestamp_ns: u64, _attempts: u32) -> Option<Vec<u8>> {
        let key = kws_plugin_sdk::SortKey::new().desc_i64(pod.priority().into()).asc_u64(pod.qos_class().rank().into());
        Some(key.asc_u64(timestamp_ns).finish())
    }
}

kws_plugin_sdk::export!(QosSort: queue_sort);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Pod, QosClass};

    fn q(priority: i32, qos: QosClass, ts: u64) -> QueuedPod {
        let mut pod = Pod::new("default", "p");
        pod.priority = priority;
        pod.qos_class = qos;
        QueuedPod::new(pod, ts)
    }

    #[test]
    fn priority_then_qos_then_time() {
        let less = |a, b| testing::less::<QosSort>(a, b);
        assert!(less(q(10, QosClass::BestEffort, 9), q(5, QosClass::Guaranteed, 1)));
        assert!(!less(q(5, QosClass::Guaranteed, 1), q(10, QosClass::BestEffort, 9)));
        assert!(less(q(5, QosClass::Guaranteed, 9), q(5, QosClass::Burstable, 1)));
        assert!(less(q(5, QosClass::Burstable, 9), q(5, QosClass::BestEffort, 1)));
        assert!(less(q(5, QosClass::Burstable, 1), q(5, QosClass::Burstable, 2)));
        assert!(!less(q(5, QosClass::Burstable, 2), q(5, QosClass::Burstable, 2)));
    }

    #[test]
    #[cfg(not(feature = "less-only"))]
    fn the_key_orders_as_less_does() {
        let pods = [
            q(10, QosClass::BestEffort, 9),
            q(5, QosClass::Guaranteed, 1),
            q(5, QosClass::Guaranteed, 9),
            q(5, QosClass::Burstable, 1),
            q(5, QosClass::Burstable, 2),
            q(5, QosClass::BestEffort, 1),
            q(-3, QosClass::Guaranteed, 0),
        ];
        for a in &pods {
            for b in &pods {
                let by_key = testing::sort_key::<QosSort>(a.clone()) < testing::sort_key::<QosSort>(b.clone());
                assert_eq!(by_key, testing::less::<QosSort>(a.clone(), b.clone()), "{a:?} vs {b:?}");
            }
        }
    }
}
