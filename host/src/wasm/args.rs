//! A Wasm plugin's `pluginConfig` args: which component and how it is pulled, the guest's own config, limits and
//! failure policy.

use std::time::Duration;

use serde::Deserialize;

use crate::config::parse_go_duration;
use crate::framework::quantity::parse_value;

use super::source::{CosignKey, PullArgs, PullPolicy, Source};

/// The longest `pullTimeout`: a start waits for its fetches, and a hung one must end.
pub const MAX_PULL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The shortest `recheckInterval`: a registry is not asked about a tag more often than this.
pub const MIN_RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Default deadline of one guest call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
/// Default memory cap of one guest instance.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;
/// The longest deadline a call may be given: a call holds its scheduling cycle (and QueueSort the queue).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest memory cap: all that a wasm32 guest can address.
const MAX_MEMORY_LIMIT: i64 = 4 << 30;

/// What a failed guest call answers in the plugin's place (one table, by extension point: `wasm/failure.rs`).
///
/// A failure is a call that trapped (the memory cap included), ran past its deadline, could not get an instance,
/// was skipped because the plugin's circuit breaker is open, or answered something the host cannot use (Filter
/// verdicts or scores not one per node, normalized scores outside [0, 100]). A status the guest returns itself is
/// its answer, whatever the policy. QueueSort falls back to arrival order under both policies: a sort cannot
/// reject a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum FailurePolicy {
    /// The Error status naming the plugin and the point: the pod's attempt fails (upstream semantics). Filter
    /// gives it for every node of the batch; Permit asks for no wait.
    #[default]
    Fail,
    /// The plugin is left out of that call: PreFilter and PreScore answer Skip (its Filter or Score then sits out
    /// the cycle), Bind answers Skip (the next binder binds the pod), PostFilter Unschedulable with no message,
    /// Score and NormalizeScore give every node 0, and every other call succeeds (PreEnqueue, AddPod and
    /// RemovePod, Filter for every node, Reserve, Permit with no wait, PreBind).
    Ignore,
}

/// A plugin's circuit breaker (`circuitBreaker` in its args): after this many failed calls in a row the host
/// stops calling the guest for the back-off period, answering what the failure policy says instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreakerArgs {
    /// Failed calls in a row that open the breaker (`consecutiveFailures`, default 3; 0 never opens it).
    pub consecutive_failures: u32,
    /// How long it stays open the first time (`backoff`, default 10s); each failed retry doubles it.
    pub backoff: Duration,
    /// The longest it stays open (`maxBackoff`, default 5m).
    pub max_backoff: Duration,
}

impl Default for CircuitBreakerArgs {
    fn default() -> Self {
        CircuitBreakerArgs {
            consecutive_failures: 3,
            backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(300),
        }
    }
}

/// `circuitBreaker` as written in the profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCircuitBreaker {
    consecutive_failures: Option<u32>,
    backoff: Option<String>,
    max_backoff: Option<String>,
}

/// `auth` as written in the profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawAuth {
    docker_config: String,
}

/// `signature` as written in the profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSignature {
    key: String,
}

/// The args as written in the profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    component: String,
    sha256: Option<String>,
    pull_policy: Option<PullPolicy>,
    auth: Option<RawAuth>,
    recheck_interval: Option<String>,
    signature: Option<RawSignature>,
    pull_timeout: Option<String>,
    #[serde(default)]
    config: Option<serde_json::Value>,
    timeout: Option<String>,
    memory_limit: Option<String>,
    #[serde(default)]
    failure_policy: FailurePolicy,
    circuit_breaker: Option<RawCircuitBreaker>,
}

/// A Wasm plugin's settings, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WasmArgs {
    /// Where the component comes from (relative paths resolve against the configuration file's directory).
    pub component: Source,
    /// Expected SHA-256 of the component's bytes, lowercase hex (required for https).
    pub sha256: Option<String>,
    /// How a remote component is pulled (ignored for a local file).
    pub pull: PullArgs,
    /// The guest's own configuration, passed to it as JSON.
    pub config_json: String,
    /// Deadline of one call.
    pub timeout: Duration,
    /// Memory cap of one instance, bytes.
    pub memory_limit: u64,
    /// What a failure does.
    pub failure_policy: FailurePolicy,
    /// When to stop calling a failing guest for a while.
    pub circuit_breaker: CircuitBreakerArgs,
}

impl WasmArgs {
    /// True when a plugin's args declare a Wasm component.
    pub fn is_wasm(args: Option<&serde_json::Value>) -> bool {
        crate::config::declares_component(args)
    }

    /// The defaults for a component file (any path, UTF-8 or not: `plugin check` names files, not JSON).
    pub fn for_file(path: &std::path::Path) -> WasmArgs {
        let component = Source::File(path.to_path_buf());
        WasmArgs {
            pull: PullArgs::default_for(&component),
            component,
            sha256: None,
            config_json: "{}".into(),
            timeout: DEFAULT_TIMEOUT,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            failure_policy: FailurePolicy::default(),
            circuit_breaker: CircuitBreakerArgs::default(),
        }
    }

    /// Validates the args; `base` is the directory relative component paths resolve against. Errors name the field.
    pub fn parse(args: &serde_json::Value, base: &std::path::Path) -> Result<WasmArgs, String> {
        if !args.is_object() {
            return Err(format!("invalid type: {args}, expected an object of args"));
        }
        // The error names the field inside the args (`circuitBreaker.consecutiveFailures: ...`).
        let raw: RawArgs = serde_path_to_error::deserialize(args).map_err(|e| match e.path().to_string() {
            p if p == "." => e.into_inner().to_string(),
            p => format!("{p}: {}", e.into_inner()),
        })?;
        let component = Source::parse(&raw.component, base).map_err(|e| format!("component: {e}"))?;
        if let Some(h) = &raw.sha256 {
            if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("sha256: {h:?} is not 64 hexadecimal digits"));
            }
        }
        let pull = parse_pull(&raw, &component, base)?;
        let timeout = match &raw.timeout {
            Some(t) => parse_go_duration(t).map_err(|e| format!("timeout: {e}"))?,
            None => DEFAULT_TIMEOUT,
        };
        if timeout.is_zero() {
            return Err("timeout: must be greater than 0".into());
        }
        if timeout > MAX_TIMEOUT {
            return Err(format!(
                "timeout: {timeout:?} is over the {MAX_TIMEOUT:?} maximum (a call holds a scheduling cycle)"
            ));
        }
        let memory_limit = match &raw.memory_limit {
            Some(m) => parse_value(m).map_err(|e| format!("memoryLimit: {e}"))?,
            None => DEFAULT_MEMORY_LIMIT as i64,
        };
        if memory_limit < 1024 * 1024 {
            return Err(format!("memoryLimit: {memory_limit} bytes is below the 1Mi minimum"));
        }
        if memory_limit > MAX_MEMORY_LIMIT {
            return Err(format!(
                "memoryLimit: {memory_limit} bytes is over the 4Gi maximum (a 32-bit guest cannot address more)"
            ));
        }
        let circuit_breaker = {
            let raw = raw.circuit_breaker.unwrap_or_default();
            let d = CircuitBreakerArgs::default();
            let duration = |v: Option<&String>, field: &str, default: Duration| match v {
                None => Ok(default),
                Some(t) => match parse_go_duration(t) {
                    Ok(d) if d.is_zero() => Err(format!("circuitBreaker.{field}: must be greater than 0")),
                    Ok(d) => Ok(d),
                    Err(e) => Err(format!("circuitBreaker.{field}: {e}")),
                },
            };
            let backoff = duration(raw.backoff.as_ref(), "backoff", d.backoff)?;
            let max_backoff = duration(raw.max_backoff.as_ref(), "maxBackoff", d.max_backoff.max(backoff))?;
            if max_backoff < backoff {
                return Err(format!("circuitBreaker.maxBackoff: {max_backoff:?} is shorter than backoff {backoff:?}"));
            }
            CircuitBreakerArgs {
                consecutive_failures: raw.consecutive_failures.unwrap_or(d.consecutive_failures),
                backoff,
                max_backoff,
            }
        };
        Ok(WasmArgs {
            component,
            pull,
            sha256: raw.sha256.map(|h| h.to_ascii_lowercase()),
            config_json: raw.config.map(|c| c.to_string()).unwrap_or_else(|| "{}".into()),
            timeout,
            memory_limit: memory_limit as u64,
            failure_policy: raw.failure_policy,
            circuit_breaker,
        })
    }
}

/// `pullPolicy`, `auth` and `recheckInterval`, which only a remote source takes; and `sha256`, which an https one
/// requires (the download is trusted for its digest, not for where it came from).
fn parse_pull(raw: &RawArgs, component: &Source, base: &std::path::Path) -> Result<PullArgs, String> {
    let mut pull = PullArgs::default_for(component);
    if matches!(component, Source::Https(_)) && raw.sha256.is_none() {
        return Err(format!("sha256: required for an https component ({component})"));
    }
    if let Source::File(_) = component {
        for (given, field) in [
            (raw.pull_policy.is_some(), "pullPolicy"),
            (raw.auth.is_some(), "auth"),
            (raw.recheck_interval.is_some(), "recheckInterval"),
            (raw.signature.is_some(), "signature"),
            (raw.pull_timeout.is_some(), "pullTimeout"),
        ] {
            if given {
                return Err(format!("{field}: only an https or oci component is pulled; a local file is read"));
            }
        }
    }
    if let Some(p) = raw.pull_policy {
        pull.policy = p;
    }
    if let Some(a) = &raw.auth {
        if !matches!(component, Source::Oci(_)) {
            return Err("auth: registry credentials are for an oci component".into());
        }
        let path = std::path::PathBuf::from(&a.docker_config);
        pull.docker_config = Some(if path.is_absolute() { path } else { base.join(path) });
    }
    if let Some(sig) = &raw.signature {
        if !matches!(component, Source::Oci(_)) {
            return Err(
                "signature: only an oci component carries a cosign signature (pin an https one with sha256)".into()
            );
        }
        let path = std::path::PathBuf::from(&sig.key);
        let path = if path.is_absolute() { path } else { base.join(path) };
        pull.signature = vec![CosignKey::load(&path).map_err(|e| format!("signature.key: {e}"))?];
    }
    if let Some(t) = &raw.pull_timeout {
        let d = parse_go_duration(t).map_err(|e| format!("pullTimeout: {e}"))?;
        if d.is_zero() {
            return Err("pullTimeout: must be greater than 0".into());
        }
        if d > MAX_PULL_TIMEOUT {
            return Err(format!("pullTimeout: {d:?} is over the {MAX_PULL_TIMEOUT:?} maximum"));
        }
        pull.timeout = d;
    }
    if let Some(t) = &raw.recheck_interval {
        if !component.is_tag() {
            return Err(format!("recheckInterval: only an oci tag can move; {component} cannot"));
        }
        if pull.policy == PullPolicy::Never {
            return Err("recheckInterval: pullPolicy Never never asks the registry".into());
        }
        let d = parse_go_duration(t).map_err(|e| format!("recheckInterval: {e}"))?;
        if d < MIN_RECHECK_INTERVAL {
            return Err(format!("recheckInterval: {d:?} is under the {MIN_RECHECK_INTERVAL:?} minimum"));
        }
        pull.recheck_interval = Some(d);
    }
    Ok(pull)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_errors() {
        let a = WasmArgs::parse(&json!({"component": "x.wasm"}), std::path::Path::new("/etc/sched")).unwrap();
        assert_eq!(a.component, Source::File("/etc/sched/x.wasm".into()));
        assert_eq!(a.timeout, DEFAULT_TIMEOUT);
        assert_eq!(a.config_json, "{}");
        assert_eq!(a.failure_policy, FailurePolicy::Fail);
        let a = WasmArgs::parse(&json!({"component": "/x.wasm", "config": {"k": 1}, "timeout": "50ms", "memoryLimit": "16Mi", "failurePolicy": "Ignore"}), std::path::Path::new("/")).unwrap();
        assert_eq!(
            (a.timeout, a.memory_limit, a.failure_policy),
            (Duration::from_millis(50), 16 << 20, FailurePolicy::Ignore)
        );
        assert_eq!(a.config_json, r#"{"k":1}"#);
        assert_eq!(a.circuit_breaker, CircuitBreakerArgs::default());
        let a = WasmArgs::parse(
            &json!({"component": "x", "circuitBreaker": {"consecutiveFailures": 1, "backoff": "2s"}}),
            std::path::Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            a.circuit_breaker,
            CircuitBreakerArgs {
                consecutive_failures: 1,
                backoff: Duration::from_secs(2),
                max_backoff: Duration::from_secs(300)
            }
        );
        for (args, want) in [
            (json!({"component": "x", "timeout": "soon"}), "timeout:"),
            (json!({"component": "x", "memoryLimit": "1Ki"}), "memoryLimit:"),
            (json!({"component": "x", "sha256": "abc"}), "sha256:"),
            (json!({"component": "x", "failurePolicy": "Maybe"}), "Maybe"),
            (json!({"component": "x", "colour": 1}), "colour"),
            (json!({"component": "https://example.com/x.wasm"}), "sha256: required for an https component"),
            (json!({"component": "http://example.com/x.wasm"}), "component: \"http://example.com/x.wasm\": plain http"),
            (json!({"component": "x", "pullPolicy": "Always"}), "pullPolicy: only an https or oci component"),
            (json!({"component": "oci://r.io/x:v1", "pullPolicy": "Sometimes"}), "pullPolicy: unknown variant"),
            (json!({"component": "oci://r.io/x:v1", "recheckInterval": "10ms"}), "recheckInterval: 10ms is under"),
            (json!({"component": "oci://r.io/x:v1", "recheckInterval": "often"}), "recheckInterval:"),
            (
                json!({"component": "oci://r.io/x:v1", "recheckInterval": "1m", "pullPolicy": "Never"}),
                "recheckInterval: pullPolicy Never",
            ),
            (
                json!({"component": format!("oci://r.io/x@sha256:{}", "a".repeat(64)), "recheckInterval": "1m"}),
                "recheckInterval: only an oci tag can move",
            ),
            (
                json!({"component": "https://r.io/x.wasm", "sha256": "a".repeat(64), "auth": {"dockerConfig": "c"}}),
                "auth: registry credentials are for an oci component",
            ),
            (json!({"component": "oci://r.io/x:v1", "auth": {"config": "c"}}), "auth.config"),
            (
                json!({"component": "oci://r.io/x:v1", "signature": {"key": "/nonexistent.pub"}}),
                "signature.key: /nonexistent.pub",
            ),
            (json!({"component": "x", "signature": {"key": "k.pub"}}), "signature: only an https or oci"),
            (json!({"component": "x", "circuitBreaker": {"backoff": "0s"}}), "circuitBreaker.backoff: must be"),
            (json!({"component": "x", "circuitBreaker": {"backoff": "1m", "maxBackoff": "10s"}}), "maxBackoff"),
            (
                json!({"component": "x", "circuitBreaker": {"consecutiveFailures": -1}}),
                "circuitBreaker.consecutiveFailures: invalid value",
            ),
            (json!([]), "expected an object"),
            (json!({"component": "x", "timeout": "2m"}), "timeout: 120s is over the 60s maximum"),
            (json!({"component": "x", "memoryLimit": "5Gi"}), "over the 4Gi maximum"),
            (json!({"component": "x", "circuitBreaker": {"failures": 1}}), "failures"),
            (json!({"component": "x", "pullTimeout": "1s"}), "pullTimeout: only an https or oci component"),
            (json!({"component": "oci://r.io/x:v1", "pullTimeout": "0s"}), "pullTimeout: must be greater than 0"),
            (json!({"component": "oci://r.io/x:v1", "pullTimeout": "1h"}), "pullTimeout: 3600s is over the 1800s"),
        ] {
            let e = WasmArgs::parse(&args, std::path::Path::new("/")).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}

#[cfg(test)]
mod pull_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remote_sources_take_pull_settings() {
        let base = std::path::Path::new("/etc/sched");
        let a = WasmArgs::parse(
            &json!({"component": "oci://127.0.0.1:5000/prio:v1", "auth": {"dockerConfig": "pull/config.json"},
                    "recheckInterval": "30s", "pullPolicy": "Always", "pullTimeout": "10s"}),
            base,
        )
        .unwrap();
        assert!(a.component.is_tag());
        assert_eq!(
            a.pull,
            PullArgs {
                policy: PullPolicy::Always,
                docker_config: Some("/etc/sched/pull/config.json".into()),
                recheck_interval: Some(Duration::from_secs(30)),
                signature: Vec::new(),
                timeout: Duration::from_secs(10),
            }
        );
        let a = WasmArgs::parse(&json!({"component": "https://r.io/x.wasm", "sha256": "A".repeat(64)}), base).unwrap();
        assert_eq!((a.pull.policy, a.sha256), (PullPolicy::IfNotPresent, Some("a".repeat(64))));
    }
}
