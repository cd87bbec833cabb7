//! `CycleState`: data a plugin computes once per scheduling cycle (PreFilter, PreScore) and reads later
//! (Filter, Score, Reserve), keyed by name as upstream's framework does.

use rustc_hash::{FxHashMap, FxHashSet};
use std::any::Any;
use std::sync::Arc;

use super::metrics::PluginMetrics;

/// A value stored in the cycle state. Cloning is needed because preemption evaluates "what if these pods were
/// gone" on a copy of the state (upstream's `StateData.Clone`).
pub trait StateData: Any + Send + Sync {
    /// A deep copy, boxed.
    fn clone_data(&self) -> Box<dyn StateData>;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-cycle storage shared by the plugins of one profile for one pod.
#[derive(Default)]
pub struct CycleState {
    data: FxHashMap<String, Box<dyn StateData>>,
    /// Filter plugins whose PreFilter answered Skip: the runner does not call their Filter this cycle.
    pub skip_filter_plugins: FxHashSet<String>,
    /// Score plugins whose PreScore answered Skip.
    pub skip_score_plugins: FxHashSet<String>,
    /// PreBind plugins whose PreBindPreFlight answered Skip: they have nothing to do for this pod.
    pub skip_pre_bind_plugins: FxHashSet<String>,
    /// PreBind plugins whose PreBindPreFlight allowed their PreBind to run in parallel with their neighbours'.
    pub parallel_pre_bind_plugins: FxHashSet<String>,
    /// Where this cycle's plugin calls are timed (`scheduler_plugin_execution_duration_seconds`); set only on the
    /// sampled share of cycles, since timing every call of every plugin costs more than the metric is worth.
    pub plugin_timer: Option<Arc<dyn PluginMetrics>>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self.data.iter().map(|(k, v)| (k.clone(), (**v).clone_data())).collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            skip_pre_bind_plugins: self.skip_pre_bind_plugins.clone(),
            parallel_pre_bind_plugins: self.parallel_pre_bind_plugins.clone(),
            plugin_timer: self.plugin_timer.clone(),
        }
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> CycleState {
        CycleState::default()
    }

    /// Stores a value under a key, replacing what was there.
    pub fn write<T: StateData>(&mut self, key: impl Into<String>, value: T) {
        self.data.insert(key.into(), Box::new(value));
    }

    /// Reads a value of the given type under a key.
    pub fn read<T: 'static>(&self, key: &str) -> Option<&T> {
        self.data.get(key).and_then(|v| v.as_ref().as_any().downcast_ref::<T>())
    }

    /// Reads a value mutably (preemption's AddPod/RemovePod update PreFilter data in place).
    pub fn read_mut<T: 'static>(&mut self, key: &str) -> Option<&mut T> {
        self.data.get_mut(key).and_then(|v| v.as_mut().as_any_mut().downcast_mut::<T>())
    }

    /// Removes a value.
    pub fn delete(&mut self, key: &str) {
        self.data.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_clone_is_deep() {
        let mut s = CycleState::new();
        s.write("k", vec![1, 2, 3]);
        let mut c = s.clone();
        c.read_mut::<Vec<i32>>("k").unwrap().push(4);
        assert_eq!(s.read::<Vec<i32>>("k").unwrap().len(), 3);
        assert_eq!(c.read::<Vec<i32>>("k").unwrap().len(), 4);
        assert!(s.read::<String>("k").is_none(), "wrong type reads as missing");
    }
}
