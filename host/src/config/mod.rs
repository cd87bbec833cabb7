//! `KubeSchedulerConfiguration` v1: parse, default and validate, with errors that name the file and field.

mod defaults;
mod duration;
pub mod types;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::framework::ExtensionPoint;

pub use defaults::{default_plugins, UPSTREAM_PLUGINS_NOT_IMPLEMENTED};
pub use duration::{format_go_duration, parse_go_duration, serialize_go_duration};
pub use types::*;

/// A configuration that cannot be used. Its message names the file and the field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{file}: {field}: {message}")]
pub struct ConfigError {
    /// The configuration file.
    pub file: String,
    /// The field path, e.g. `profiles[0].plugins.score.enabled[1].weight`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Defaults upstream applies where the file is silent.
pub mod default {
    /// `parallelism`.
    pub const PARALLELISM: i32 = 16;
    /// `podInitialBackoffSeconds`.
    pub const POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
    /// `podMaxBackoffSeconds`.
    pub const POD_MAX_BACKOFF_SECONDS: i64 = 10;
    /// The default profile's schedulerName.
    pub const SCHEDULER_NAME: &str = "default-scheduler";
}

/// Leader election with durations parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElection {
    /// Whether to elect a leader.
    pub leader_elect: bool,
    /// Lease duration.
    #[serde(serialize_with = "serialize_go_duration")]
    pub lease_duration: Duration,
    /// Renew deadline.
    #[serde(serialize_with = "serialize_go_duration")]
    pub renew_deadline: Duration,
    /// Retry period.
    #[serde(serialize_with = "serialize_go_duration")]
    pub retry_period: Duration,
    /// Lease name.
    pub resource_name: String,
    /// Lease namespace.
    pub resource_namespace: String,
}

/// One profile after defaulting: the plugin sets merged with upstream's defaults (multiPoint expansion happens
/// when the framework instantiates the plugins, since it depends on which points each plugin implements).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileConfig {
    /// The schedulerName.
    pub scheduler_name: String,
    /// Per-profile percentageOfNodesToScore (falls back to the global one).
    pub percentage_of_nodes_to_score: Option<i32>,
    /// The merged plugin sets.
    pub plugins: Plugins,
    /// Plugin name → args.
    pub plugin_args: BTreeMap<String, serde_json::Value>,
}

/// The configuration ready to use; serialized (camelCase, Go durations) for `/configz` and `--write-config-to`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerConfig {
    /// Where it was read from (for error messages and reloads).
    pub source: String,
    /// Filter/Score parallelism.
    pub parallelism: usize,
    /// Global percentageOfNodesToScore (None: adaptive).
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Initial backoff.
    #[serde(serialize_with = "serialize_go_duration")]
    pub pod_initial_backoff: Duration,
    /// Backoff cap.
    #[serde(serialize_with = "serialize_go_duration")]
    pub pod_max_backoff: Duration,
    /// Leader election.
    pub leader_election: LeaderElection,
    /// Client connection.
    pub client_connection: ClientConnectionConfiguration,
    /// Profiles.
    pub profiles: Vec<ProfileConfig>,
}

impl SchedulerConfig {
    /// The configuration used when no file is given: one default profile, upstream's defaults.
    pub fn default_config() -> SchedulerConfig {
        let raw =
            KubeSchedulerConfiguration { api_version: API_VERSION.into(), kind: KIND.into(), ..Default::default() };
        complete("<default>", raw, &|_| true).expect("the default configuration is valid")
    }
}

/// Reads, defaults and validates a configuration file. `known` says whether a plugin name is registered.
pub fn load(path: &Path, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        field: "(file)".into(),
        message: e.to_string(),
    })?;
    parse(&file, &text, known)
}

/// Parses, defaults and validates configuration text; `file` is used in messages.
pub fn parse(file: &str, text: &str, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    let err = |field: &str, message: String| ConfigError { file: file.to_string(), field: field.to_string(), message };
    let generic: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| err("(document)", format!("not valid YAML: {e}")))?;
    let api_version = generic.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
    if api_version != API_VERSION {
        let msg = if api_version.starts_with("kubescheduler.config.k8s.io/") {
            format!("{api_version} is not supported; this scheduler reads {API_VERSION} (upstream removed the beta versions)")
        } else {
            format!("expected {API_VERSION}, got {api_version:?}")
        };
        return Err(err("apiVersion", msg));
    }
    let kind = generic.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    if kind != KIND {
        return Err(err("kind", format!("expected {KIND}, got {kind:?}")));
    }
    let raw: KubeSchedulerConfiguration = serde_path_to_error::deserialize(generic).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." { "(document)".to_string() } else { path };
        err(&field, e.inner().to_string())
    })?;
    complete(file, raw, known)
}

/// Applies defaults and validates.
fn complete(
    file: &str,
    raw: KubeSchedulerConfiguration,
    known: &dyn Fn(&str) -> bool,
) -> Result<SchedulerConfig, ConfigError> {
    let err = |field: String, message: String| ConfigError { file: file.to_string(), field, message };
    // A pluginConfig entry whose args name a component declares a Wasm plugin: its name is known from then on.
    let mut wasm_names = HashSet::new();
    for (i, p) in raw.profiles.iter().enumerate() {
        for (j, pc) in p.plugin_config.iter().enumerate() {
            if crate::wasm::WasmArgs::is_wasm(pc.args.as_ref()) {
                crate::wasm::WasmArgs::parse(pc.args.as_ref().expect("checked"), Path::new("."))
                    .map_err(|m| err(format!("profiles[{i}].pluginConfig[{j}].args"), m))?;
                wasm_names.insert(pc.name.clone());
            }
        }
    }
    let known = &|n: &str| known(n) || wasm_names.contains(n);
    if raw.extenders.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(err(
            "extenders".into(),
            "scheduler extenders are not supported; serve the extension point from a Wasm plugin instead".into(),
        ));
    }
    let parallelism = raw.parallelism.unwrap_or(default::PARALLELISM);
    if parallelism <= 0 {
        return Err(err("parallelism".into(), format!("should be greater than 0, got {parallelism}")));
    }
    check_percentage(raw.percentage_of_nodes_to_score, "percentageOfNodesToScore")
        .map_err(|m| err("percentageOfNodesToScore".into(), m))?;
    let initial = raw.pod_initial_backoff_seconds.unwrap_or(default::POD_INITIAL_BACKOFF_SECONDS);
    if initial <= 0 {
        return Err(err("podInitialBackoffSeconds".into(), format!("should be greater than 0, got {initial}")));
    }
    let max = raw.pod_max_backoff_seconds.unwrap_or(default::POD_MAX_BACKOFF_SECONDS);
    if max < initial {
        return Err(err(
            "podMaxBackoffSeconds".into(),
            format!("should be greater than or equal to podInitialBackoffSeconds ({initial}), got {max}"),
        ));
    }

    let mut profiles_raw = raw.profiles.clone();
    if profiles_raw.is_empty() {
        profiles_raw.push(KubeSchedulerProfile::default());
    }
    let mut names = HashSet::new();
    let mut profiles = Vec::new();
    for (i, p) in profiles_raw.iter().enumerate() {
        let at = |f: &str| format!("profiles[{i}]{f}");
        let name = p.scheduler_name.clone().unwrap_or_else(|| default::SCHEDULER_NAME.to_string());
        if name.is_empty() {
            return Err(err(at(".schedulerName"), "must not be empty".into()));
        }
        if !names.insert(name.clone()) {
            return Err(err(at(".schedulerName"), format!("duplicate profile with schedulerName {name:?}")));
        }
        check_percentage(p.percentage_of_nodes_to_score, "").map_err(|m| err(at(".percentageOfNodesToScore"), m))?;
        let user = p.plugins.clone().unwrap_or_default();
        for (point, set) in user.sets() {
            let Some(set) = set else { continue };
            for (j, e) in set.enabled.iter().enumerate() {
                let f = at(&format!(".plugins.{point}.enabled[{j}]"));
                check_name(&e.name, known).map_err(|m| err(format!("{f}.name"), m))?;
                if let Some(w) = e.weight {
                    if w < 0 {
                        return Err(err(format!("{f}.weight"), format!("must not be negative, got {w}")));
                    }
                    if w > 100 {
                        return Err(err(
                            format!("{f}.weight"),
                            format!(
                                "must be at most 100 (a score is at most 100 and totals must not overflow), got {w}"
                            ),
                        ));
                    }
                }
            }
            for (j, d) in set.disabled.iter().enumerate() {
                if d.name != "*" && !known(&d.name) && !UPSTREAM_PLUGINS_NOT_IMPLEMENTED.contains(&d.name.as_str()) {
                    let f = at(&format!(".plugins.{point}.disabled[{j}].name"));
                    return Err(err(f, unknown_plugin_message(&d.name)));
                }
            }
        }
        let mut plugin_args = BTreeMap::new();
        for (j, pc) in p.plugin_config.iter().enumerate() {
            let f = at(&format!(".pluginConfig[{j}].name"));
            if !known(&pc.name) {
                return Err(err(f, unknown_plugin_message(&pc.name)));
            }
            let mut args = pc.args.clone().unwrap_or(serde_json::Value::Null);
            // Upstream args carry their own kind/apiVersion; the name already says which plugin they are for.
            if let Some(o) = args.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            if plugin_args.insert(pc.name.clone(), args).is_some() {
                return Err(err(f, format!("duplicate pluginConfig for plugin {:?}", pc.name)));
            }
        }
        profiles.push(ProfileConfig {
            scheduler_name: name,
            percentage_of_nodes_to_score: p.percentage_of_nodes_to_score,
            plugins: merge_plugins(&default_plugins(), &user),
            plugin_args,
        });
    }
    // Pods of every profile share one queue, so all profiles must order it the same way (upstream rule).
    let qs: Vec<Vec<String>> = profiles.iter().map(|p| queue_sort_names(&p.plugins)).collect();
    if let Some(i) = qs.iter().position(|q| *q != qs[0]) {
        return Err(err(
            format!("profiles[{i}].plugins.queueSort"),
            "queueSort must be the same for all profiles".into(),
        ));
    }

    let le = raw.leader_election.clone().unwrap_or_default();
    let dur = |v: &str, f: &str| parse_go_duration(v).map_err(|m| err(format!("leaderElection.{f}"), m));
    let leader_election = LeaderElection {
        leader_elect: le.leader_elect,
        lease_duration: dur(&le.lease_duration, "leaseDuration")?,
        renew_deadline: dur(&le.renew_deadline, "renewDeadline")?,
        retry_period: dur(&le.retry_period, "retryPeriod")?,
        resource_name: if le.resource_name.is_empty() {
            profiles[0].scheduler_name.clone()
        } else {
            le.resource_name.clone()
        },
        resource_namespace: le.resource_namespace.clone(),
    };
    if le.resource_lock != "leases" {
        return Err(err(
            "leaderElection.resourceLock".into(),
            format!("only \"leases\" is supported, got {:?}", le.resource_lock),
        ));
    }
    if leader_election.leader_elect {
        if leader_election.lease_duration <= leader_election.renew_deadline {
            return Err(err("leaderElection.leaseDuration".into(), "must be greater than renewDeadline".into()));
        }
        if leader_election.renew_deadline <= leader_election.retry_period {
            return Err(err("leaderElection.renewDeadline".into(), "must be greater than retryPeriod".into()));
        }
    }

    // Upstream's ValidateClientConnectionConfiguration (a negative QPS is valid: it turns the limit off).
    if let Some(b) = raw.client_connection.as_ref().and_then(|c| c.burst).filter(|b| *b < 0) {
        return Err(err("clientConnection.burst".into(), format!("must be non-negative, got {b}")));
    }

    Ok(SchedulerConfig {
        source: file.to_string(),
        parallelism: parallelism as usize,
        percentage_of_nodes_to_score: raw.percentage_of_nodes_to_score,
        pod_initial_backoff: Duration::from_secs(initial as u64),
        pod_max_backoff: Duration::from_secs(max as u64),
        leader_election,
        client_connection: raw.client_connection.clone().unwrap_or_default(),
        profiles,
    })
}

fn check_percentage(p: Option<i32>, _what: &str) -> Result<(), String> {
    match p {
        Some(v) if !(0..=100).contains(&v) => Err(format!("not in valid range [0-100], got {v}")),
        _ => Ok(()),
    }
}

fn check_name(name: &str, known: &dyn Fn(&str) -> bool) -> Result<(), String> {
    if known(name) {
        Ok(())
    } else if UPSTREAM_PLUGINS_NOT_IMPLEMENTED.contains(&name) {
        Err(format!(
            "plugin {name:?} is an upstream plugin this scheduler does not implement (it may only be disabled)"
        ))
    } else {
        Err(unknown_plugin_message(name))
    }
}

/// The message for a plugin name that is not registered; the caller's registry names are appended by
/// [`with_known_names`].
fn unknown_plugin_message(name: &str) -> String {
    format!("unknown plugin {name:?}")
}

/// Appends the registered names to an unknown-plugin error, so the user sees what they could have meant.
pub fn with_known_names(mut e: ConfigError, names: &[&str]) -> ConfigError {
    if e.message.starts_with("unknown plugin") {
        e.message = format!("{} (known plugins: {})", e.message, names.join(", "));
    }
    e
}

fn queue_sort_names(p: &Plugins) -> Vec<String> {
    let mut v: Vec<String> = p.queue_sort.iter().flat_map(|s| s.enabled.iter().map(|e| e.name.clone())).collect();
    v.extend(
        p.multi_point.iter().flat_map(|s| s.enabled.iter().map(|e| e.name.clone())).filter(|n| n == "PrioritySort"),
    );
    v
}

/// Upstream's `mergePlugins`: per point, the defaults not disabled (replaced in place by a user entry of the same
/// name), then the user's other entries; the disabled lists are kept so multiPoint expansion can honour them.
pub fn merge_plugins(defaults: &Plugins, user: &Plugins) -> Plugins {
    fn merge(d: Option<&PluginSet>, u: Option<&PluginSet>) -> Option<PluginSet> {
        if d.is_none() && u.is_none() {
            return None;
        }
        let empty = PluginSet::default();
        let d = d.unwrap_or(&empty);
        let u = u.unwrap_or(&empty);
        let mut disabled: Vec<PluginRef> =
            u.disabled.iter().map(|p| PluginRef { name: p.name.clone(), weight: None }).collect();
        disabled.extend(d.disabled.iter().cloned());
        let off: HashSet<&str> = disabled.iter().map(|p| p.name.as_str()).collect();
        let mut replaced = HashSet::new();
        let mut enabled = Vec::new();
        if !off.contains("*") {
            for de in &d.enabled {
                if off.contains(de.name.as_str()) {
                    continue;
                }
                match u.enabled.iter().position(|ue| ue.name == de.name) {
                    Some(i) => {
                        replaced.insert(i);
                        enabled.push(u.enabled[i].clone());
                    }
                    None => enabled.push(de.clone()),
                }
            }
        }
        enabled.extend(u.enabled.iter().enumerate().filter(|(i, _)| !replaced.contains(i)).map(|(_, p)| p.clone()));
        Some(PluginSet { enabled, disabled })
    }
    let mut merged = Plugins::default();
    for point in ExtensionPoint::ALL {
        *merged.get_mut(point) = merge(defaults.get(point), user.get(point));
    }
    merged.multi_point = merge(defaults.multi_point.as_ref(), user.multi_point.as_ref());
    merged
}
