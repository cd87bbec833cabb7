//! `KubeSchedulerConfiguration` v1: parse, default and validate, with errors that name the file and field.

mod defaults;
mod duration;
pub mod extenders;
pub mod extension_point;
pub mod features;
pub mod names;
pub mod types;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::yaml::YamlError;
use extension_point::ExtensionPoint;

pub use defaults::{default_plugins, default_plugins_for, UPSTREAM_PLUGINS_NOT_IMPLEMENTED};

/// The name of the GangScheduling plugin (the default profile gains it with the GenericWorkload gate).
pub const GANG_SCHEDULING: &str = "GangScheduling";

pub use duration::{check_go_seconds, format_go_duration, parse_go_duration, serialize_go_duration, MAX_GO_DURATION};
pub use extenders::ExtenderConfig;
pub use features::{Features, Versions};
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

/// The most profiles a configuration may hold. Each profile is a whole framework (every plugin instantiated,
/// its own queue-sort and metrics labels); kube-scheduler deployments use a handful, so a file past this is a
/// mistake or an attack, refused before any profile is built.
pub const MAX_PROFILES: usize = 1000;

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
    /// Plugin name → args, as the file wrote them until the plugins have checked and decoded them
    /// (`scheduler::check_plugin_args`: a native plugin's `kind` and `apiVersion` are dropped then).
    pub plugin_args: BTreeMap<String, serde_json::Value>,
    /// Plugin name → its entry's index in the file's `pluginConfig`, for errors found in the args later.
    #[serde(skip)]
    pub plugin_config_index: BTreeMap<String, usize>,
    /// The profile that decides beside this one and never acts (see [`KubeSchedulerProfile::shadow`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<String>,
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
    /// HTTP extenders, ignorable ones last.
    pub extenders: Vec<ExtenderConfig>,
    /// One line per accepted setting that has no effect here, naming the file and field (logged at start).
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// The feature gates the configuration was completed with (from `--feature-gates`).
    #[serde(skip)]
    pub features: Features,
}

impl SchedulerConfig {
    /// The configuration used when no file is given: one default profile, upstream's defaults.
    pub fn default_config() -> SchedulerConfig {
        SchedulerConfig::default_config_with(Features::default())
    }

    /// `default_config` under these feature gates.
    pub fn default_config_with(features: Features) -> SchedulerConfig {
        let raw =
            KubeSchedulerConfiguration { api_version: API_VERSION.into(), kind: KIND.into(), ..Default::default() };
        complete("<default>", raw, &|_| true, features).expect("the default configuration is valid")
    }
}

/// Reads, defaults and validates a configuration file. `known` says whether a plugin name is registered.
pub fn load(path: &Path, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    load_with(path, known, Features::default())
}

/// `load` under these feature gates.
pub fn load_with(
    path: &Path,
    known: &dyn Fn(&str) -> bool,
    features: Features,
) -> Result<SchedulerConfig, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        field: "(file)".into(),
        message: e.to_string(),
    })?;
    parse_with(&file, &text, known, features)
}

/// Parses, defaults and validates configuration text; `file` is used in messages.
pub fn parse(file: &str, text: &str, known: &dyn Fn(&str) -> bool) -> Result<SchedulerConfig, ConfigError> {
    parse_with(file, text, known, Features::default())
}

/// `parse` under these feature gates.
pub fn parse_with(
    file: &str,
    text: &str,
    known: &dyn Fn(&str) -> bool,
    features: Features,
) -> Result<SchedulerConfig, ConfigError> {
    let err = |field: &str, message: String| ConfigError { file: file.to_string(), field: field.to_string(), message };
    // Bounded (size, nesting) before serde_yaml sees it; a leading byte order mark is skipped.
    let mut docs = crate::yaml::documents(file, text)
        .map_err(|e| match e {
            YamlError::TooLarge { .. } => {
                err("(document)", format!("larger than {} MiB", crate::yaml::MAX_BYTES >> 20))
            }
            YamlError::TooDeep { line, .. } => {
                err("(document)", format!("nesting deeper than {} (line {line})", crate::yaml::MAX_DEPTH))
            }
            YamlError::Invalid { source, .. } => err("(document)", format!("not valid YAML: {source}")),
        })?
        .into_iter()
        .filter(|d| !d.is_null());
    let generic = match (docs.next(), docs.next()) {
        (Some(doc), None) => doc,
        (None, _) => return Err(err("(document)", "the file holds no configuration".into())),
        (Some(_), Some(_)) => {
            return Err(err("(document)", "more than one YAML document; a configuration is one document".into()))
        }
    };
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
    // Counted before the typed decoding, which would copy every profile once more.
    if let Some(n) = generic.get("profiles").and_then(|p| p.as_sequence()).map(Vec::len).filter(|n| *n > MAX_PROFILES) {
        return Err(too_many_profiles(file, n));
    }
    let raw: KubeSchedulerConfiguration = serde_path_to_error::deserialize(generic).map_err(|e| {
        let path = crate::yaml::escape_controls(&e.path().to_string());
        let field = if path.is_empty() || path == "." { "(document)".to_string() } else { path };
        err(&field, crate::yaml::escape_controls(&e.inner().to_string()))
    })?;
    complete(file, raw, known, features)
}

/// Applies defaults and validates, as upstream's `SetDefaults_KubeSchedulerConfiguration` and
/// `ValidateKubeSchedulerConfiguration`; the first error found is returned.
fn complete(
    file: &str,
    raw: KubeSchedulerConfiguration,
    known: &dyn Fn(&str) -> bool,
    features: Features,
) -> Result<SchedulerConfig, ConfigError> {
    let err = |field: String, message: String| ConfigError { file: file.to_string(), field, message };
    // Everything below is linear in the profiles, and each profile becomes a whole framework: bound them first.
    if raw.profiles.len() > MAX_PROFILES {
        return Err(too_many_profiles(file, raw.profiles.len()));
    }
    // A pluginConfig entry whose args name a component declares a Wasm plugin: its name is known from then on (its
    // args are the Wasm host's to check, as every plugin checks its own: `scheduler::check_plugin_args`).
    let mut wasm_names = HashSet::new();
    for p in &raw.profiles {
        for pc in &p.plugin_config {
            if declares_component(pc.args.as_ref()) {
                wasm_names.insert(pc.name.clone());
            }
        }
    }
    let known = &|n: &str| known(n) || wasm_names.contains(n);
    let extenders = extenders::check(raw.extenders).map_err(|(f, m)| err(f, m))?;
    let parallelism = raw.parallelism.unwrap_or(default::PARALLELISM);
    if parallelism <= 0 {
        return Err(err("parallelism".into(), format!("should be greater than 0, got {parallelism}")));
    }
    check_percentage(raw.percentage_of_nodes_to_score).map_err(|m| err("percentageOfNodesToScore".into(), m))?;
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
    let pod_initial_backoff = check_go_seconds(initial).map_err(|m| err("podInitialBackoffSeconds".into(), m))?;
    let pod_max_backoff = check_go_seconds(max).map_err(|m| err("podMaxBackoffSeconds".into(), m))?;

    let client_connection = raw.client_connection.unwrap_or_default();
    // Upstream's ValidateClientConnectionConfiguration (a negative QPS is valid: it turns the limit off).
    if let Some(b) = client_connection.burst.filter(|b| *b < 0) {
        return Err(err("clientConnection.burst".into(), format!("must be non-negative, got {b}")));
    }
    // Upstream cannot even decode these (its YAML goes through JSON, which has no such numbers); a finite value
    // past f32's range becomes infinite when narrowed.
    if let Some(q) = client_connection.qps.filter(|q| !q.is_finite()) {
        return Err(err("clientConnection.qps".into(), format!("must be a finite number, got {q}")));
    }

    let le = raw.leader_election.unwrap_or_default();
    let dur = |v: &str, f: &str| parse_go_duration(v).map_err(|m| err(format!("leaderElection.{f}"), m));
    let (lease_duration, renew_deadline, retry_period) = (
        dur(&le.lease_duration, "leaseDuration")?,
        dur(&le.renew_deadline, "renewDeadline")?,
        dur(&le.retry_period, "retryPeriod")?,
    );
    // Upstream defaults an empty lock to leases, and only checks it when electing.
    if le.leader_elect && !le.resource_lock.is_empty() && le.resource_lock != "leases" {
        return Err(err(
            "leaderElection.resourceLock".into(),
            format!("resourceLock value must be \"leases\", got {:?}", le.resource_lock),
        ));
    }

    let single = raw.profiles.len() <= 1;
    let mut profiles_raw = raw.profiles;
    if profiles_raw.is_empty() {
        profiles_raw.push(KubeSchedulerProfile::default());
    }
    let mut warnings = Vec::new();
    let mut names = HashMap::with_capacity(profiles_raw.len());
    let mut profiles = Vec::with_capacity(profiles_raw.len());
    for (i, p) in profiles_raw.into_iter().enumerate() {
        let at = |f: &str| format!("profiles[{i}]{f}");
        // As upstream, only a lone profile gets the default name; several must each say theirs.
        let name = match p.scheduler_name {
            Some(n) => n,
            None if single => default::SCHEDULER_NAME.to_string(),
            None => return Err(err(at(".schedulerName"), "Required value: every profile of several needs one".into())),
        };
        if name.is_empty() {
            return Err(err(at(".schedulerName"), "must not be empty".into()));
        }
        if let Some(first) = names.insert(name.clone(), i) {
            return Err(err(
                at(".schedulerName"),
                format!("duplicate profile with schedulerName {name:?} (profiles[{first}])"),
            ));
        }
        check_percentage(p.percentage_of_nodes_to_score).map_err(|m| err(at(".percentageOfNodesToScore"), m))?;
        let user = p.plugins.unwrap_or_default();
        check_plugin_sets(&user, known).map_err(|(f, m)| err(at(&f), m))?;
        for (point, set) in user.pod_group_sets() {
            if set.is_some_and(|s| !s.enabled.is_empty()) {
                let why = if features.generic_workload {
                    "this scheduler's PodGroup cycle runs no placement (TopologyAwareWorkloadScheduling, alpha) \
                     or PodGroupPostFilter plugins"
                } else {
                    "the PodGroup scheduling cycle runs only with the GenericWorkload feature gate (off by default \
                     in v1.37: --feature-gates=GenericWorkload=true)"
                };
                warnings.push(format!("{file}: {}: accepted, no effect: {why}", at(&format!(".plugins.{point}"))));
            }
        }
        let mut plugin_args = BTreeMap::new();
        let mut plugin_config_index = BTreeMap::new();
        for (j, pc) in p.plugin_config.into_iter().enumerate() {
            let f = at(&format!(".pluginConfig[{j}]"));
            if !known(&pc.name) {
                return Err(err(format!("{f}.name"), unknown_plugin_message(&pc.name)));
            }
            if plugin_args.contains_key(&pc.name) {
                return Err(err(format!("{f}.name"), format!("duplicate pluginConfig for plugin {:?}", pc.name)));
            }
            plugin_config_index.insert(pc.name.clone(), j);
            plugin_args.insert(pc.name, pc.args.unwrap_or(serde_json::Value::Null));
        }
        let plugins = merge_plugins(&default_plugins_for(features), &user);
        if !features.generic_workload && enables(&plugins, GANG_SCHEDULING) {
            warnings.push(format!(
                "{file}: {}: GangScheduling without --feature-gates=GenericWorkload=true: no PodGroup is watched, \
                 so a pod that names one waits at PreEnqueue",
                at(".plugins")
            ));
        }
        profiles.push(ProfileConfig {
            scheduler_name: name,
            percentage_of_nodes_to_score: p.percentage_of_nodes_to_score,
            plugins,
            plugin_args,
            plugin_config_index,
            shadow: p.shadow,
        });
    }
    check_shadows(&profiles).map_err(|(f, m)| err(f, m))?;
    check_common_queue_sort(&profiles).map_err(|(f, m)| err(f, m))?;
    extenders::apply_ignored_resources(&extenders, &mut profiles);

    // The lease is named after the first profile that serves pods: a shadow serves none (`check_shadows` leaves at
    // least one that does), so a shadow listed first does not name the scheduler's lease.
    let serving = profiles.iter().find(|p| !is_shadow(&profiles, &p.scheduler_name)).unwrap_or(&profiles[0]);
    let default_lease = serving.scheduler_name.clone();
    let leader_election = LeaderElection {
        leader_elect: le.leader_elect,
        lease_duration,
        renew_deadline,
        retry_period,
        resource_name: if le.resource_name.is_empty() { default_lease } else { le.resource_name },
        // Upstream defaults an empty namespace.
        resource_namespace: if le.resource_namespace.is_empty() {
            types::DEFAULT_LEASE_NAMESPACE.to_string()
        } else {
            le.resource_namespace
        },
    };
    leader_election.validate(file)?;

    Ok(SchedulerConfig {
        source: file.to_string(),
        parallelism: parallelism as usize,
        percentage_of_nodes_to_score: raw.percentage_of_nodes_to_score,
        pod_initial_backoff,
        pod_max_backoff,
        leader_election,
        client_connection,
        profiles,
        extenders,
        warnings,
        features,
    })
}

/// Whether the merged plugin sets enable `name` at some point (through multiPoint or a point of its own).
fn enables(plugins: &Plugins, name: &str) -> bool {
    plugins.sets().into_iter().any(|(_, set)| set.is_some_and(|s| s.enabled.iter().any(|e| e.name == name)))
}

impl LeaderElection {
    /// Checks the settings as upstream's `ValidateLeaderElectionConfiguration` and client-go's
    /// `NewLeaderElector` do (after flags are applied, as upstream validates then); nothing when not electing.
    pub fn validate(&self, file: &str) -> Result<(), ConfigError> {
        let err = |f: &str, message: String| ConfigError {
            file: file.to_string(),
            field: format!("leaderElection.{f}"),
            message,
        };
        if !self.leader_elect {
            return Ok(());
        }
        let g = format_go_duration;
        for (f, d) in [
            ("leaseDuration", self.lease_duration),
            ("renewDeadline", self.renew_deadline),
            ("retryPeriod", self.retry_period),
        ] {
            if d.is_zero() {
                return Err(err(f, "must be greater than zero".into()));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(err(
                "leaseDuration",
                format!(
                    "must be greater than renewDeadline ({}), got {}",
                    g(self.renew_deadline),
                    g(self.lease_duration)
                ),
            ));
        }
        // client-go's JitterFactor: a retry may come 1.2 periods late and must still land before the deadline.
        if self.renew_deadline.as_nanos() <= self.retry_period.as_nanos() * 6 / 5 {
            return Err(err(
                "renewDeadline",
                format!(
                    "must be greater than retryPeriod*JitterFactor (1.2 × {}), got {}",
                    g(self.retry_period),
                    g(self.renew_deadline)
                ),
            ));
        }
        // The Lease stores whole seconds in an int32 (Go would wrap it negative; the API server refuses that).
        if self.lease_duration.as_secs() > i32::MAX as u64 {
            return Err(err(
                "leaseDuration",
                format!("must be at most {}s (a Lease's leaseDurationSeconds is an int32)", i32::MAX),
            ));
        }
        if self.resource_name.is_empty() {
            return Err(err("resourceName", "Required value".into()));
        }
        if self.resource_namespace.is_empty() {
            return Err(err("resourceNamespace", "Required value".into()));
        }
        Ok(())
    }
}

/// Checks the names and weights in a profile's plugin sets; returns the field (below the profile) and message.
fn check_plugin_sets(user: &Plugins, known: &dyn Fn(&str) -> bool) -> Result<(), (String, String)> {
    for (point, set) in user.sets() {
        let Some(set) = set else { continue };
        for (j, e) in set.enabled.iter().enumerate() {
            let f = format!(".plugins.{point}.enabled[{j}]");
            check_name(&e.name, known).map_err(|m| (format!("{f}.name"), m))?;
            match e.weight {
                Some(w) if w < 0 => return Err((format!("{f}.weight"), format!("must not be negative, got {w}"))),
                Some(w) if w > 100 => {
                    return Err((
                        format!("{f}.weight"),
                        format!("must be at most 100 (a score is at most 100 and totals must not overflow), got {w}"),
                    ))
                }
                _ => {}
            }
        }
        for (j, d) in set.disabled.iter().enumerate() {
            if d.name != "*" && !known(&d.name) && !UPSTREAM_PLUGINS_NOT_IMPLEMENTED.contains(&d.name.as_str()) {
                return Err((format!(".plugins.{point}.disabled[{j}].name"), unknown_plugin_message(&d.name)));
            }
        }
    }
    Ok(())
}

/// True when a pluginConfig entry's args name a `component`: the entry declares a Wasm plugin.
pub fn declares_component(args: Option<&serde_json::Value>) -> bool {
    args.and_then(|a| a.get("component")).is_some()
}

/// Args with `kind` and `apiVersion` left out: what the plugin reads, whether or not the file named the type.
fn without_type_meta(args: &serde_json::Value) -> serde_json::Value {
    let mut a = args.clone();
    if let Some(o) = a.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    a
}

/// Whether another profile names `name` as its shadow (such a profile serves no pods of its own).
pub fn is_shadow(profiles: &[ProfileConfig], name: &str) -> bool {
    profiles.iter().any(|p| p.shadow.as_deref() == Some(name))
}

/// A shadow names another profile of the file, not itself, and one that has no shadow of its own: a shadow only
/// decides, so a chain would never be compared with anything that acts.
fn check_shadows(profiles: &[ProfileConfig]) -> Result<(), (String, String)> {
    for (i, p) in profiles.iter().enumerate() {
        let Some(name) = p.shadow.as_deref() else { continue };
        let field = format!("profiles[{i}].shadow");
        let Some(target) = profiles.iter().find(|q| q.scheduler_name == name) else {
            let names: Vec<&str> = profiles.iter().map(|q| q.scheduler_name.as_str()).collect();
            return Err((field, format!("no profile with schedulerName {name:?} (profiles: {})", names.join(", "))));
        };
        if target.scheduler_name == p.scheduler_name {
            return Err((field, "a profile cannot be its own shadow".into()));
        }
        if target.shadow.is_some() {
            return Err((field, format!("profile {name:?} has a shadow of its own; a shadow cannot have one")));
        }
    }
    Ok(())
}

/// Pods of every profile share one queue, so all profiles must order it the same way: the same queue-sort
/// plugins and, for the first profile's, the same args (upstream's `validateCommonQueueSort`).
fn check_common_queue_sort(profiles: &[ProfileConfig]) -> Result<(), (String, String)> {
    let qs0 = queue_sort_names(&profiles[0].plugins);
    let args0 = qs0.first().and_then(|n| profiles[0].plugin_args.get(n)).map(without_type_meta);
    for (i, p) in profiles.iter().enumerate().skip(1) {
        let qs = queue_sort_names(&p.plugins);
        if qs != qs0 {
            return Err((
                format!("profiles[{i}].plugins.queueSort"),
                "queueSort must be the same for all profiles".into(),
            ));
        }
        if let Some(name) = qs0.first() {
            if let Some(args) = p.plugin_args.get(name).map(without_type_meta).filter(|a| Some(a) != args0.as_ref()) {
                return Err((
                    format!("profiles[{i}].pluginConfig"),
                    format!("args of queue sort plugin {name:?} must be the same for all profiles, got {args}"),
                ));
            }
        }
    }
    Ok(())
}

fn too_many_profiles(file: &str, n: usize) -> ConfigError {
    ConfigError {
        file: file.to_string(),
        field: "profiles".into(),
        message: format!("at most {MAX_PROFILES} profiles are supported, got {n}"),
    }
}

fn check_percentage(p: Option<i32>) -> Result<(), String> {
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
    merged.placement_generate = merge(defaults.placement_generate.as_ref(), user.placement_generate.as_ref());
    merged.placement_score = merge(defaults.placement_score.as_ref(), user.placement_score.as_ref());
    merged.pod_group_post_filter = merge(defaults.pod_group_post_filter.as_ref(), user.pod_group_post_filter.as_ref());
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    #[test]
    fn the_document_is_bounded_and_one() {
        let known = |_: &str| true;
        // A byte order mark (Windows editors write one) was reported as "more than one document".
        assert!(parse("c.yaml", &format!("\u{feff}{HEAD}"), &known).is_ok());
        // 100 KB of `[` took quadratic time in the YAML scanner: refused at once by the depth pre-scan.
        let e = parse("c.yaml", &"[".repeat(100_000), &known).unwrap_err().to_string();
        assert!(e.starts_with("c.yaml: (document): nesting deeper than 100"), "{e}");
        let e = parse("c.yaml", &format!("{HEAD}---\n{HEAD}"), &known).unwrap_err().to_string();
        assert!(e.contains("more than one YAML document"), "{e}");
        let e = parse("c.yaml", "# nothing\n", &known).unwrap_err().to_string();
        assert!(e.contains("the file holds no configuration"), "{e}");
    }

    /// Upstream's ValidateKubeSchedulerConfiguration checks, each as one line naming the field (None: accepted).
    #[test]
    fn validation_table() {
        let cases: &[(&str, Option<&str>)] = &[
            ("parallelism: 0\n", Some("parallelism: should be greater than 0")),
            ("percentageOfNodesToScore: -1\n", Some("percentageOfNodesToScore: not in valid range")),
            ("podInitialBackoffSeconds: 0\n", Some("podInitialBackoffSeconds: should be greater than 0")),
            ("podInitialBackoffSeconds: 9223372037\npodMaxBackoffSeconds: 9223372037\n", Some("podInitialBackoffSeconds: must be at most 9223372036")),
            ("podMaxBackoffSeconds: 9223372036\n", None),
            ("clientConnection: {qps: .nan}\n", Some("clientConnection.qps: must be a finite number")),
            ("clientConnection: {burst: -1}\n", Some("clientConnection.burst: must be non-negative")),
            ("leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 9s}\n", Some("leaderElection.renewDeadline: must be greater than retryPeriod*JitterFactor")),
            ("leaderElection: {retryPeriod: 0s}\n", Some("leaderElection.retryPeriod: must be greater than zero")),
            ("leaderElection: {leaseDuration: 600000h, renewDeadline: 10s}\n", Some("leaderElection.leaseDuration: must be at most 2147483647s")),
            ("leaderElection: {resourceLock: endpoints}\n", Some("leaderElection.resourceLock: resourceLock value must be \"leases\"")),
            ("leaderElection: {leaderElect: false, resourceLock: endpoints, retryPeriod: 1h}\n", None),
            ("leaderElection: {resourceLock: '', resourceNamespace: ''}\n", None),
            ("profiles: [{schedulerName: a}, {}]\n", Some("profiles[1].schedulerName: Required value")),
            ("profiles: [{}]\n", None),
            ("profiles: [{schedulerName: ''}]\n", Some("profiles[0].schedulerName: must not be empty")),
            ("profiles: [{schedulerName: a}, {schedulerName: a}]\n", Some("profiles[1].schedulerName: duplicate profile with schedulerName \"a\" (profiles[0])")),
            ("profiles: [{schedulerName: a}, {schedulerName: b, pluginConfig: [{name: PrioritySort, args: {x: 1}}]}]\n", Some("profiles[1].pluginConfig: args of queue sort plugin \"PrioritySort\" must be the same")),
            ("profiles: [{pluginConfig: [{name: NodeName, args: {anything: 1}}]}]\n", None),
            ("profiles: [{schedulerName: a, shadow: b}, {schedulerName: b}]\n", None),
            ("profiles: [{schedulerName: a, shadow: c}, {schedulerName: b}]\n", Some("profiles[0].shadow: no profile with schedulerName \"c\" (profiles: a, b)")),
            ("profiles: [{schedulerName: a, shadow: a}]\n", Some("profiles[0].shadow: a profile cannot be its own shadow")),
            ("profiles: [{schedulerName: a, shadow: b}, {schedulerName: b, shadow: c}, {schedulerName: c}]\n", Some("profiles[0].shadow: profile \"b\" has a shadow of its own")),
            ("profiles: [{schedulerName: a, shadow: 7}]\n", Some("profiles[0].shadow: invalid type: integer")),
        ];
        for (body, want) in cases {
            let got = parse("f.yaml", &format!("{HEAD}{body}"), &|_| true);
            match (got, want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => {
                    let e = e.to_string();
                    assert!(e.starts_with("f.yaml: ") && e.contains(w), "{body}: got {e:?}, want {w:?}");
                }
                (Ok(_), Some(w)) => panic!("{body}: accepted, want {w:?}"),
                (Err(e), None) => panic!("{body}: {e}"),
            }
        }
    }

    /// The flags are applied after the file is checked; the same leader-election checks run on the result.
    #[test]
    fn leader_election_is_checked_after_flags_too() {
        let mut le = SchedulerConfig::default_config().leader_election;
        le.retry_period = Duration::from_secs(9);
        let e = le.validate("x").unwrap_err().to_string();
        assert!(e.starts_with("x: leaderElection.renewDeadline: "), "{e}");
        le.leader_elect = false;
        le.validate("x").expect("nothing is checked when not electing, as upstream");
    }
}
