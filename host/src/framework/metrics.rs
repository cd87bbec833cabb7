//! Where the runners report how long each plugin call took (`scheduler_plugin_execution_duration_seconds`). The
//! scheduler's observer implements it; the framework knows only this.

use std::time::Duration;

use super::status::Code;

/// Receives plugin call timings in sampled cycles.
pub trait PluginMetrics: Send + Sync {
    /// Time one plugin spent in one call at an extension point (upstream's `extension_point` label, such as
    /// `Filter` or `ScoreExtensionNormalize`). Filter and Score are batched: one call covers a chunk of nodes.
    fn plugin_execution(&self, _plugin: &str, _point: &'static str, _status: Code, _duration: Duration) {}
}
