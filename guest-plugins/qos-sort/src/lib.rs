//! QosSort: a QueueSort plugin. Higher priority first, then Guaranteed before Burstable before BestEffort, then
//! the pod that entered the queue earlier.

use kws_plugin_sdk::{Config, Plugin, QueuedPod};

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
}

kws_plugin_sdk::export_queue_sort!(QosSort);

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
}
