//! The `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration` document, field for field as upstream.
//! Unknown fields are errors, so a typo never silently falls back to a default.

use serde::{Deserialize, Serialize};

use super::extension_point::ExtensionPoint;

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
    /// Scheduler extenders: HTTP webhooks called after the framework's Filter and Score, at preemption and to
    /// bind, as kube-scheduler calls them.
    #[serde(default)]
    pub extenders: Vec<Extender>,
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
    /// The schedulerName of another profile in this file that decides beside this one on every cycle and never
    /// acts (a project extension, not in upstream's v1): its choices are compared with this profile's, and the
    /// named profile serves no pods of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<String>,
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
    /// PlacementGenerate (v1.37): placements for a pod group, in the PodGroup scheduling cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_generate: Option<PluginSet>,
    /// PlacementScore (v1.37): ranks a pod group's placements (weights apply here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_score: Option<PluginSet>,
    /// PodGroupPostFilter (v1.37): runs when a pod group cannot be placed (its PostFilter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_post_filter: Option<PluginSet>,
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
            .chain(self.pod_group_sets())
    }

    /// The sets of the PodGroup scheduling cycle (v1.37), with their field names. Upstream runs that cycle only
    /// with the GenericWorkload feature gate, off by default; this scheduler does not run it.
    pub fn pod_group_sets(&self) -> [(&'static str, Option<&PluginSet>); 3] {
        [
            ("placementGenerate", self.placement_generate.as_ref()),
            ("placementScore", self.placement_score.as_ref()),
            ("podGroupPostFilter", self.pod_group_post_filter.as_ref()),
        ]
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

/// One HTTP extender (upstream `Extender`), every field as kube-scheduler's v1 API spells it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Extender {
    /// The URL the verbs are appended to (`<urlPrefix>/<verb>`).
    #[serde(rename = "urlPrefix", default)]
    pub url_prefix: String,
    /// Verb for Filter; empty: the extender does not filter.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filter_verb: String,
    /// Verb for preemption; empty: the extender is not asked about victims.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preempt_verb: String,
    /// Verb for Prioritize; empty: the extender does not score.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prioritize_verb: String,
    /// Multiplier of the extender's 0–10 scores; must be positive when `prioritizeVerb` is set.
    #[serde(default)]
    pub weight: i64,
    /// Verb for Bind; the one extender with it binds the pods it is interested in instead of the framework.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bind_verb: String,
    /// Use TLS; without a CA in `tlsConfig` the server's certificate is not verified (as upstream).
    #[serde(rename = "enableHTTPS", default)]
    pub enable_https: bool,
    /// TLS client settings.
    #[serde(rename = "tlsConfig", default, skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// Timeout of one call (Go duration; unset or 0: 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_timeout: Option<String>,
    /// The extender keeps its own node cache: send node names, not whole Node objects.
    #[serde(default)]
    pub node_cache_capable: bool,
    /// Extended resources the extender manages; when set, it is called only for pods that request one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// An extender that fails or cannot be reached is skipped instead of failing the pod's attempt.
    #[serde(default)]
    pub ignorable: bool,
}

/// An extended resource an extender manages (upstream `ExtenderManagedResource`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderManagedResource {
    /// The resource name, e.g. `example.com/gpu`.
    #[serde(default)]
    pub name: String,
    /// NodeResourcesFit does not check this resource (the extender accounts for it).
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

/// TLS settings of an extender (upstream `ExtenderTLSConfig`); the `*Data` fields are base64, as Go's `[]byte`
/// reads from JSON/YAML, and take precedence over the files.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderTlsConfig {
    /// Do not verify the server's certificate.
    #[serde(default)]
    pub insecure: bool,
    /// The name to verify the certificate against (and send as SNI) instead of the URL's host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_name: String,
    /// Client certificate (PEM file).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert_file: String,
    /// Client key (PEM file).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_file: String,
    /// CA bundle to verify the server with (PEM file).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// Client certificate, PEM, base64-encoded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert_data: String,
    /// Client key, PEM, base64-encoded; never written out (`/configz`).
    #[serde(default, skip_serializing)]
    pub key_data: String,
    /// CA bundle, PEM, base64-encoded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_data: String,
}
