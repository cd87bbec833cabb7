//! The `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration` document, field for field as upstream.
//! Unknown fields are errors, so a typo never silently falls back to a default.

use serde::{Deserialize, Serialize};

use crate::framework::ExtensionPoint;

/// The API group and version this scheduler reads.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The kind.
pub const KIND: &str = "KubeSchedulerConfiguration";

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    /// Must be `kubescheduler.config.k8s.io/v1`.
    pub api_version: String,
    /// Must be `KubeSchedulerConfiguration`.
    pub kind: String,
    /// Goroutine-equivalent parallelism for Filter/Score (default 16).
    pub parallelism: Option<i32>,
    /// Leader election settings.
    pub leader_election: Option<LeaderElectionConfiguration>,
    /// How to reach the API server.
    pub client_connection: Option<ClientConnectionConfiguration>,
    /// Percent of nodes to find feasible before scoring; 0 or unset means adaptive.
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Initial backoff after a failed attempt, seconds (default 1).
    pub pod_initial_backoff_seconds: Option<i64>,
    /// Backoff cap, seconds (default 10).
    pub pod_max_backoff_seconds: Option<i64>,
    /// Scheduling profiles, one per schedulerName.
    #[serde(default)]
    pub profiles: Vec<KubeSchedulerProfile>,
    /// Scheduler extenders (HTTP webhooks). Not supported: Wasm plugins take their place.
    pub extenders: Option<Vec<serde_json::Value>>,
    /// Upstream: wait for leadership before filling caches.
    pub delay_cache_until_active: Option<bool>,
    /// Upstream debugging switch (accepted, no effect).
    pub enable_profiling: Option<bool>,
    /// Upstream debugging switch (accepted, no effect).
    pub enable_contention_profiling: Option<bool>,
}

/// One profile.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerProfile {
    /// Pods with this `spec.schedulerName` are scheduled by this profile (default `default-scheduler`).
    pub scheduler_name: Option<String>,
    /// Overrides the global percentageOfNodesToScore for this profile.
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Plugins per extension point.
    pub plugins: Option<Plugins>,
    /// Per-plugin arguments.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// Plugins enabled and disabled at each extension point.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugins {
    /// PreEnqueue.
    pub pre_enqueue: Option<PluginSet>,
    /// QueueSort (exactly one per profile after expansion).
    pub queue_sort: Option<PluginSet>,
    /// PreFilter.
    pub pre_filter: Option<PluginSet>,
    /// Filter.
    pub filter: Option<PluginSet>,
    /// PostFilter.
    pub post_filter: Option<PluginSet>,
    /// PreScore.
    pub pre_score: Option<PluginSet>,
    /// Score (weights apply here).
    pub score: Option<PluginSet>,
    /// Reserve.
    pub reserve: Option<PluginSet>,
    /// Permit.
    pub permit: Option<PluginSet>,
    /// PreBind.
    pub pre_bind: Option<PluginSet>,
    /// Bind.
    pub bind: Option<PluginSet>,
    /// PostBind.
    pub post_bind: Option<PluginSet>,
    /// Every extension point the plugin implements.
    pub multi_point: Option<PluginSet>,
}

/// Maps each extension point to its field once; `get`, `get_mut` and `sets` derive from it.
macro_rules! plugin_sets {
    ($($point:ident => $field:ident),+ $(,)?) => {
        impl Plugins {
            /// The set configured at an extension point.
            pub fn get(&self, point: ExtensionPoint) -> Option<&PluginSet> {
                match point {
                    $(ExtensionPoint::$point => self.$field.as_ref(),)+
                }
            }

            /// The set configured at an extension point, to replace it.
            pub fn get_mut(&mut self, point: ExtensionPoint) -> &mut Option<PluginSet> {
                match point {
                    $(ExtensionPoint::$point => &mut self.$field,)+
                }
            }
        }
    };
}

plugin_sets!(
    PreEnqueue => pre_enqueue,
    QueueSort => queue_sort,
    PreFilter => pre_filter,
    Filter => filter,
    PostFilter => post_filter,
    PreScore => pre_score,
    Score => score,
    Reserve => reserve,
    Permit => permit,
    PreBind => pre_bind,
    Bind => bind,
    PostBind => post_bind,
);

impl Plugins {
    /// Every set with its field name: the extension points in order, then `multiPoint`.
    pub fn sets(&self) -> impl Iterator<Item = (&'static str, Option<&PluginSet>)> {
        ExtensionPoint::ALL
            .into_iter()
            .map(|p| (p.config_name(), self.get(p)))
            .chain([("multiPoint", self.multi_point.as_ref())])
    }
}

/// Enabled and disabled plugins of one extension point.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    /// Enabled, in order, after the defaults that are not disabled.
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// Disabled defaults; `*` disables all of them.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// A plugin named in a set, with its score weight.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    /// The plugin name.
    pub name: String,
    /// Score weight (Score and multiPoint only; 0 or unset means 1).
    pub weight: Option<i32>,
}

/// Arguments for one plugin.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfig {
    /// The plugin name.
    pub name: String,
    /// The plugin's args object (`kind`/`apiVersion` inside it are ignored, as upstream).
    pub args: Option<serde_json::Value>,
}

/// Leader election (upstream `LeaderElectionConfiguration`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfiguration {
    /// Whether to elect a leader (default true).
    #[serde(default = "default_true")]
    pub leader_elect: bool,
    /// Lease duration (Go duration, default 15s).
    #[serde(default = "default_lease")]
    pub lease_duration: String,
    /// Renew deadline (default 10s).
    #[serde(default = "default_renew")]
    pub renew_deadline: String,
    /// Retry period (default 2s).
    #[serde(default = "default_retry")]
    pub retry_period: String,
    /// Lock type; only `leases` is supported.
    #[serde(default = "default_lock")]
    pub resource_lock: String,
    /// Lease name (default: the first profile's schedulerName).
    #[serde(default)]
    pub resource_name: String,
    /// Lease namespace (default kube-system).
    #[serde(default = "default_lease_ns")]
    pub resource_namespace: String,
}

impl Default for LeaderElectionConfiguration {
    fn default() -> Self {
        LeaderElectionConfiguration {
            leader_elect: true,
            lease_duration: default_lease(),
            renew_deadline: default_renew(),
            retry_period: default_retry(),
            resource_lock: default_lock(),
            resource_name: String::new(),
            resource_namespace: default_lease_ns(),
        }
    }
}

fn default_true() -> bool {
    true
}
fn default_lease() -> String {
    "15s".into()
}
fn default_renew() -> String {
    "10s".into()
}
fn default_retry() -> String {
    "2s".into()
}
fn default_lock() -> String {
    "leases".into()
}
/// Where the Lease lives when the file does not say (upstream's default).
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";

fn default_lease_ns() -> String {
    DEFAULT_LEASE_NAMESPACE.into()
}

/// API server connection (upstream `ClientConnectionConfiguration`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnectionConfiguration {
    /// Path to a kubeconfig file (in-cluster config when empty).
    #[serde(default)]
    pub kubeconfig: String,
    /// Accept header (accepted, JSON is used).
    #[serde(default)]
    pub accept_content_types: String,
    /// Content type (accepted, JSON is used).
    #[serde(default)]
    pub content_type: String,
    /// Client QPS (default 50).
    pub qps: Option<f32>,
    /// Client burst (default 100).
    pub burst: Option<i32>,
}
