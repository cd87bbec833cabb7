//! Where the runners report how long each plugin call took (`scheduler_plugin_execution_duration_seconds`), and
//! what OpportunisticBatching did (`scheduler_batch_*`). The scheduler's observer implements both; the framework
//! knows only these.

use std::time::Duration;

use super::status::Code;

/// Receives plugin call timings in sampled cycles.
pub trait PluginMetrics: Send + Sync {
    /// Time one plugin spent in one call at an extension point (upstream's `extension_point` label, such as
    /// `Filter` or `ScoreExtensionNormalize`). Filter and Score are batched: one call covers a chunk of nodes.
    fn plugin_execution(&self, _plugin: &str, _point: &'static str, _status: Code, _duration: Duration) {}
}

/// Receives what DynamicResources' PreBind saw of devices' binding conditions (DRADeviceBindingConditions), with
/// upstream's status labels: `success`, `failure`, `timeout` or `error`.
pub trait DraMetrics: Send + Sync {
    /// A PreBind waited `duration` for the binding conditions of an allocation that has a device of `driver`
    /// (`scheduler_dra_bindingconditions_wait_duration_seconds{profile,driver,status}`, once per allocated device).
    fn binding_conditions_wait(&self, _profile: &str, _driver: &str, _status: &'static str, _duration: Duration) {}
    /// A device of `driver` with binding conditions was allocated in the attempt
    /// (`scheduler_dra_bindingconditions_allocations_total{profile,driver,status}`).
    fn binding_conditions_allocation(&self, _profile: &str, _driver: &str, _status: &'static str) {}
}

/// Records nothing (tests, the simulator).
pub struct NoDraMetrics;

impl DraMetrics for NoDraMetrics {}

/// Receives what OpportunisticBatching did, with upstream's label values (see `framework::batch`).
pub trait BatchMetrics: Send + Sync {
    /// A hint was not given, or was used or not (`scheduler_batch_attempts_total{profile,result}`).
    fn batch_attempt(&self, _profile: &str, _result: &'static str) {}
    /// The cached list was dropped (`scheduler_batch_cache_flushed_total{profile,reason}`).
    fn batch_cache_flushed(&self, _profile: &str, _reason: &'static str) {}
    /// The previous pod's node was rescored (`scheduler_batch_rescore_attempts_total{profile}` and
    /// `scheduler_batch_rescore_duration_seconds{profile}`).
    fn batch_rescore(&self, _profile: &str, _duration: Duration) {}
    /// Asking for a hint took `duration` (`scheduler_get_node_hint_duration_seconds{hinted,profile}`).
    fn get_node_hint(&self, _profile: &str, _hinted: bool, _duration: Duration) {}
    /// Storing a cycle's results took `duration` (`scheduler_store_schedule_results_duration_seconds{profile}`).
    fn store_schedule_results(&self, _profile: &str, _duration: Duration) {}
}

/// Batching reports that go nowhere.
#[derive(Debug, Default)]
pub struct NoBatchMetrics;
impl BatchMetrics for NoBatchMetrics {}
