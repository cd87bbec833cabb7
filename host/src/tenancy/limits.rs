//! The platform's limits on tenant policies: the `TenantPolicies` plugin's args in a profile.
//!
//! ```yaml
//! pluginConfig:
//! - name: TenantPolicies
//!   args:
//!     namespaced:                      # absent: SchedulingPolicies are refused, ClusterSchedulingPolicies still served
//!       points: [PreEnqueue, Filter, Score, Permit]   # the default (PreFilter, PreScore and Reserve come with
//!                                                     # Filter, Score and Permit)
//!       maxWeight: 10                   # default 10
//!       maxTimeout: 100ms               # default 100ms
//!       maxMemoryLimit: 64Mi            # default 64Mi
//!       maxPoliciesPerNamespace: 3      # default 5
//!       cpuBudget: 2s                   # guest time per namespace per minute, default 5s; 0 for none
//!     allowedSources: ["oci://registry.example.com/policies/"]   # default: any oci:// or https:// source
//!     signatureKeys: [/etc/kws/team-a.pub, /etc/kws/platform.pub]  # every tenant component signed by one of them
//!                                                                   # (`signatureKey: FILE` names one)
//! ```
//!
//! A namespaced policy may never serve QueueSort, PostFilter or Bind (they act on other pods, or on the queue as a
//! whole), whatever the limits say; the CRD's schema refuses them too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::config::parse_go_duration;
use crate::framework::quantity::parse_value;
use crate::plugins::helper::{aggregate, decode, invalid, ArgsError, FieldError};
use crate::wasm::source::CosignKey;
use crate::wasm::MAX_TIMEOUT;

use super::{point_named, supported_points, Point};

/// Default of `namespaced.maxWeight`.
pub const DEFAULT_MAX_WEIGHT: i64 = 10;
/// Default of `namespaced.maxTimeout`.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_millis(100);
/// Default of `namespaced.maxMemoryLimit`.
pub const DEFAULT_MAX_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;
/// Default of `namespaced.maxPoliciesPerNamespace`.
pub const DEFAULT_MAX_POLICIES_PER_NAMESPACE: usize = 5;
/// Default of `namespaced.cpuBudget`: guest time per namespace per minute.
pub const DEFAULT_CPU_BUDGET: Duration = Duration::from_secs(5);
/// The window a CPU budget is counted over.
pub const CPU_BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// The points a namespaced policy may serve when the platform does not say (the issue's and Kubewarden's sense of
/// "its own pods only": admission, node choice and its own gang).
pub const DEFAULT_NAMESPACED_POINTS: [Point; 4] = [Point::PreEnqueue, Point::Filter, Point::Score, Point::Permit];
/// The points a namespaced policy never serves: they act on other pods (PostFilter preempts, Bind writes any
/// binding) or on the whole queue (QueueSort).
pub const NEVER_NAMESPACED: [Point; 3] = [Point::QueueSort, Point::PostFilter, Point::Bind];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    namespaced: Option<RawNamespaced>,
    #[serde(default)]
    allowed_sources: Vec<String>,
    signature_key: Option<String>,
    #[serde(default)]
    signature_keys: Vec<String>,
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default)]
    _kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawNamespaced {
    points: Option<Vec<String>>,
    max_weight: Option<i64>,
    max_timeout: Option<String>,
    max_memory_limit: Option<String>,
    max_policies_per_namespace: Option<i64>,
    cpu_budget: Option<String>,
}

/// What a namespaced policy may ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespacedLimits {
    /// The points it may serve (each with its companion, [`super::companion_of`]).
    pub points: Vec<Point>,
    /// The largest Score weight.
    pub max_weight: i64,
    /// The longest call deadline.
    pub max_timeout: Duration,
    /// The largest memory cap of an instance, bytes.
    pub max_memory_limit: u64,
    /// How many policies one namespace may have for this profile.
    pub max_policies_per_namespace: usize,
    /// Guest time a namespace's policies may spend per [`CPU_BUDGET_WINDOW`]; `None` for no budget.
    pub cpu_budget: Option<Duration>,
}

impl NamespacedLimits {
    /// Whether a namespaced policy may serve `p`: listed, or the companion of a listed point.
    pub fn allows(&self, p: Point) -> bool {
        self.points.contains(&p) || super::companion_of(p).is_some_and(|c| self.points.contains(&c))
    }
}

impl Default for NamespacedLimits {
    fn default() -> Self {
        NamespacedLimits {
            points: DEFAULT_NAMESPACED_POINTS.to_vec(),
            max_weight: DEFAULT_MAX_WEIGHT,
            max_timeout: DEFAULT_MAX_TIMEOUT,
            max_memory_limit: DEFAULT_MAX_MEMORY_LIMIT,
            max_policies_per_namespace: DEFAULT_MAX_POLICIES_PER_NAMESPACE,
            cpu_budget: Some(DEFAULT_CPU_BUDGET),
        }
    }
}

/// The `TenantPolicies` args, validated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TenantPoliciesArgs {
    /// What namespaced policies may do; `None` refuses them all.
    pub namespaced: Option<NamespacedLimits>,
    /// Source prefixes a tenant component must start with (each ends in `/`); empty for any.
    pub allowed_sources: Vec<String>,
    /// The cosign keys a tenant component (namespaced or cluster-wide) must be signed with, one of them; empty: no
    /// signature asked.
    pub signature_keys: Vec<CosignKey>,
}

impl TenantPoliciesArgs {
    /// Decodes, defaults and validates the args; every error names its field inside the args. Relative key paths
    /// resolve against `base`.
    pub fn parse(args: Option<&serde_json::Value>, base: &Path) -> Result<TenantPoliciesArgs, ArgsError> {
        let raw: RawArgs = decode(args)?;
        let mut errs = Vec::new();
        let namespaced = raw.namespaced.map(|n| namespaced(n, &mut errs));
        for (i, s) in raw.allowed_sources.iter().enumerate() {
            let field = format!("allowedSources[{i}]");
            if !(s.starts_with("oci://") || s.starts_with("https://")) {
                errs.push(invalid(&field, format!("{s:?}"), "must start with oci:// or https://"));
            } else if !s.ends_with('/') {
                // Without the slash, "oci://registry.example.com" would admit "oci://registry.example.com.evil/".
                errs.push(invalid(&field, format!("{s:?}"), "must end with /"));
            }
        }
        let mut signature_keys = Vec::new();
        let named = raw.signature_key.iter().map(|k| ("signatureKey".to_string(), k));
        let listed = raw.signature_keys.iter().enumerate().map(|(i, k)| (format!("signatureKeys[{i}]"), k));
        for (field, k) in named.chain(listed) {
            let p = PathBuf::from(k);
            let p = if p.is_absolute() { p } else { base.join(p) };
            match CosignKey::load(&p) {
                Ok(key) if signature_keys.contains(&key) => {
                    errs.push(FieldError::new(field, format!("Duplicate value: {k:?} is a key already named")))
                }
                Ok(key) => signature_keys.push(key),
                Err(e) => errs.push(invalid(&field, format!("{k:?}"), &e)),
            }
        }
        aggregate(errs)?;
        Ok(TenantPoliciesArgs {
            namespaced: namespaced.flatten(),
            allowed_sources: raw.allowed_sources,
            signature_keys,
        })
    }
}

/// `namespaced`, checked; `None` (with errors pushed) when something in it is wrong.
fn namespaced(n: RawNamespaced, errs: &mut Vec<FieldError>) -> Option<NamespacedLimits> {
    let before = errs.len();
    let d = NamespacedLimits::default();
    let points = match n.points {
        None => d.points,
        Some(list) => {
            let mut points = Vec::new();
            for (i, name) in list.iter().enumerate() {
                let field = format!("namespaced.points[{i}]");
                let any = Point::ALL.into_iter().find(|p| p.metric_name() == name);
                match (any, point_named(name)) {
                    (Some(p), _) if NEVER_NAMESPACED.contains(&p) => errs.push(FieldError::new(
                        field,
                        format!("Forbidden: a namespaced policy never serves {name}: it acts on other pods"),
                    )),
                    (_, None) => errs.push(FieldError::new(
                        field,
                        format!("Unsupported value: {name:?}: supported values: {}", supported_points()),
                    )),
                    (_, Some(p)) if points.contains(&p) => {
                        errs.push(FieldError::new(field, format!("Duplicate value: {name:?}")))
                    }
                    (_, Some(p)) => points.push(p),
                }
            }
            points
        }
    };
    let max_weight = n.max_weight.unwrap_or(d.max_weight);
    if !(1..=100).contains(&max_weight) {
        errs.push(invalid("namespaced.maxWeight", max_weight, "must be between 1 and 100"));
    }
    let duration = |field: &str, v: Option<&String>, default: Duration, errs: &mut Vec<FieldError>| match v {
        None => default,
        Some(t) => parse_go_duration(t).unwrap_or_else(|m| {
            errs.push(invalid(field, format!("{t:?}"), &m));
            default
        }),
    };
    let max_timeout = duration("namespaced.maxTimeout", n.max_timeout.as_ref(), d.max_timeout, errs);
    if max_timeout.is_zero() || max_timeout > MAX_TIMEOUT {
        errs.push(invalid(
            "namespaced.maxTimeout",
            format!("{max_timeout:?}"),
            "must be greater than 0 and at most 1m",
        ));
    }
    let max_memory_limit = match &n.max_memory_limit {
        None => d.max_memory_limit,
        Some(m) => match parse_value(m) {
            Ok(v) if (1 << 20..=4 << 30).contains(&v) => v as u64,
            Ok(_) => {
                errs.push(invalid("namespaced.maxMemoryLimit", format!("{m:?}"), "must be between 1Mi and 4Gi"));
                d.max_memory_limit
            }
            Err(e) => {
                errs.push(invalid("namespaced.maxMemoryLimit", format!("{m:?}"), &e.to_string()));
                d.max_memory_limit
            }
        },
    };
    let max_policies_per_namespace = match n.max_policies_per_namespace {
        None => d.max_policies_per_namespace,
        Some(v) if (1..=100).contains(&v) => v as usize,
        Some(v) => {
            errs.push(invalid("namespaced.maxPoliciesPerNamespace", v, "must be between 1 and 100"));
            d.max_policies_per_namespace
        }
    };
    let cpu_budget = duration("namespaced.cpuBudget", n.cpu_budget.as_ref(), DEFAULT_CPU_BUDGET, errs);
    let cpu_budget = (!cpu_budget.is_zero()).then_some(cpu_budget);
    (errs.len() == before).then_some(NamespacedLimits {
        points,
        max_weight,
        max_timeout,
        max_memory_limit,
        max_policies_per_namespace,
        cpu_budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<TenantPoliciesArgs, String> {
        TenantPoliciesArgs::parse(Some(&v), Path::new("/")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_refuse_namespaced_policies_until_the_platform_allows_them() {
        let a = TenantPoliciesArgs::parse(None, Path::new("/")).unwrap();
        assert_eq!(a.namespaced, None);
        let a = parse(json!({"namespaced": {}})).unwrap();
        assert_eq!(a.namespaced, Some(NamespacedLimits::default()));
        assert_eq!(a.namespaced.unwrap().points, vec![Point::PreEnqueue, Point::Filter, Point::Score, Point::Permit]);
    }

    #[test]
    fn each_bad_limit_is_named() {
        for (args, words) in [
            (json!({"namespaced": {"points": ["Bind"]}}), "namespaced.points[0]: Forbidden"),
            (json!({"namespaced": {"points": ["QueueSort"]}}), "namespaced.points[0]: Forbidden"),
            (json!({"namespaced": {"points": ["Sort"]}}), "namespaced.points[0]: Unsupported value"),
            (json!({"namespaced": {"points": ["PreBind"]}}), "namespaced.points[0]: Unsupported value"),
            (json!({"namespaced": {"points": ["Filter", "Filter"]}}), "namespaced.points[1]: Duplicate"),
            (json!({"namespaced": {"maxWeight": 0}}), "namespaced.maxWeight: Invalid value: 0"),
            (json!({"namespaced": {"maxTimeout": "2m"}}), "namespaced.maxTimeout"),
            (json!({"namespaced": {"maxTimeout": "soon"}}), "namespaced.maxTimeout"),
            (json!({"namespaced": {"maxMemoryLimit": "8Gi"}}), "namespaced.maxMemoryLimit"),
            (json!({"namespaced": {"maxPoliciesPerNamespace": 0}}), "namespaced.maxPoliciesPerNamespace"),
            (json!({"namespaced": {"weight": 3}}), "namespaced.weight: unknown field `weight`"),
            (json!({"allowedSources": ["registry.example.com/"]}), "allowedSources[0]: Invalid value"),
            (json!({"allowedSources": ["oci://registry.example.com"]}), "must end with /"),
            (json!({"signatureKey": "/nonexistent/cosign.pub"}), "signatureKey: Invalid value"),
            (json!({"signatureKeys": ["/nonexistent/cosign.pub"]}), "signatureKeys[0]: Invalid value"),
        ] {
            let e = parse(args.clone()).expect_err(&args.to_string());
            assert!(e.contains(words), "{args}: {e}");
        }
    }

    #[test]
    fn a_zero_cpu_budget_is_none() {
        let a = parse(json!({"namespaced": {"cpuBudget": "0s", "points": ["Filter", "PreFilter"]}})).unwrap();
        let n = a.namespaced.unwrap();
        assert_eq!(n.cpu_budget, None);
        assert_eq!(n.points, vec![Point::Filter, Point::PreFilter]);
    }
}
