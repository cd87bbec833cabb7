//! A policy object's spec, decoded, and its admission against the profile's limits: what it asks for becomes Wasm
//! plugin args, or a refusal naming the field (which the policy's status and an Event then carry).

use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::config::parse_go_duration;
use crate::framework::labels::Selector;
use crate::framework::quantity::parse_value;
use crate::framework::PolicyObject;
use crate::wasm::{FailurePolicy, PullPolicy, Source, WasmArgs};

use super::limits::{TenantPoliciesArgs, NEVER_NAMESPACED};
use super::{point_named, supported_points, Point};

/// The spec of a SchedulingPolicy or ClusterSchedulingPolicy (the CRDs' schema, deploy/manifests/crds.yaml).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// The profile it attaches to.
    pub scheduler_name: String,
    /// `oci://...` or `https://...`.
    pub component: String,
    /// The component's SHA-256.
    pub sha256: Option<String>,
    /// How an OCI tag is pulled.
    pub pull_policy: Option<PullPolicy>,
    /// The guest's own configuration.
    pub config: Option<serde_json::Value>,
    /// The points it serves.
    pub points: Vec<String>,
    /// Score weight.
    pub weight: Option<i64>,
    /// Deadline of one call (a Go duration).
    pub timeout: Option<String>,
    /// Memory cap of one instance (a quantity, or a number of bytes).
    pub memory_limit: Option<serde_json::Value>,
    /// What a failed call does.
    pub failure_policy: Option<FailurePolicy>,
    /// Which pods it applies to.
    pub pod_selector: Option<LabelSelector>,
    /// Which namespaces' pods (cluster policies only).
    pub namespace_selector: Option<LabelSelector>,
}

/// Why a policy is not served: the field (`spec.weight`), or none for the object as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct PolicyError {
    /// The field at fault, from the object's root.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The status condition's reason (`Refused`, `FetchFailed`, `InvalidComponent`, `OverLimit`).
    pub reason: &'static str,
}

impl PolicyError {
    fn at(field: impl Into<String>, reason: &'static str, message: impl Into<String>) -> PolicyError {
        PolicyError { field: Some(field.into()), message: message.into(), reason }
    }

    /// An error about the object as a whole.
    pub fn whole(reason: &'static str, message: impl Into<String>) -> PolicyError {
        PolicyError { field: None, message: message.into(), reason }
    }
}

/// A policy admitted for a profile: what to load, which pods it serves, at which points, with what weight.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// `namespace/name`, or the name of a cluster policy: the Wasm plugin's name in logs and metrics.
    pub key: String,
    /// The namespace of a SchedulingPolicy.
    pub namespace: Option<String>,
    /// The generation admitted.
    pub generation: i64,
    /// The points, in the framework's order.
    pub points: Vec<Point>,
    /// Score weight (1 without Score).
    pub weight: i64,
    /// Which pods (of its namespace, or of the selected namespaces).
    pub pods: Selector,
    /// Which namespaces, for a cluster policy.
    pub namespaces: Selector,
    /// The component and its limits.
    pub wasm: WasmArgs,
}

impl Admitted {
    /// Whether it serves `p`.
    pub fn serves(&self, p: Point) -> bool {
        self.points.contains(&p)
    }
}

/// Decodes a policy's spec as the CRD's schema takes it (unknown fields refused); the error names the field.
pub fn decode_spec(spec: &serde_json::Value) -> Result<PolicySpec, PolicyError> {
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "spec".to_string() } else { format!("spec.{path}") };
        PolicyError::at(field, "Invalid", e.into_inner().to_string())
    })
}

/// Decodes `obj`'s spec and checks it against `limits`. `profile` is the profile's schedulerName; a policy for
/// another profile is not this profile's to admit (`Ok(None)`).
pub fn admit(obj: &PolicyObject, profile: &str, limits: &TenantPoliciesArgs) -> Result<Option<Admitted>, PolicyError> {
    let spec = decode_spec(&obj.spec)?;
    if spec.scheduler_name != profile {
        return Ok(None);
    }
    let namespaced = obj.namespace.is_some();
    let caps = match (&obj.namespace, &limits.namespaced) {
        (Some(_), None) => {
            return Err(PolicyError::whole(
                "Refused",
                format!(
                    "profile {profile} does not accept namespaced SchedulingPolicies (TenantPolicies args: namespaced)"
                ),
            ))
        }
        (_, caps) => caps.as_ref().filter(|_| namespaced),
    };
    let source =
        Source::parse(&spec.component, Path::new("/")).map_err(|e| PolicyError::at("spec.component", "Invalid", e))?;
    if matches!(source, Source::File(_)) {
        return Err(PolicyError::at(
            "spec.component",
            "Invalid",
            "must start with oci:// or https:// (a file on the scheduler's disk is not a policy's to name)",
        ));
    }
    if !limits.allowed_sources.is_empty() && !limits.allowed_sources.iter().any(|p| spec.component.starts_with(p)) {
        return Err(PolicyError::at(
            "spec.component",
            "OverLimit",
            format!(
                "{} is not from a source this profile accepts ({})",
                spec.component,
                limits.allowed_sources.join(", ")
            ),
        ));
    }

    let mut points = Vec::new();
    for (i, name) in spec.points.iter().enumerate() {
        let field = format!("spec.points[{i}]");
        let any = Point::ALL.into_iter().find(|p| p.metric_name() == name);
        let point = match (any, point_named(name)) {
            (Some(p), _) if namespaced && NEVER_NAMESPACED.contains(&p) => {
                return Err(PolicyError::at(field, "OverLimit", format!("a namespaced policy never serves {name}")))
            }
            (_, Some(p)) => p,
            (Some(_), None) => {
                return Err(PolicyError::at(
                    field,
                    "Refused",
                    format!("{name} is not served to tenant policies (served: {})", supported_points()),
                ))
            }
            (None, None) => {
                return Err(PolicyError::at(
                    field,
                    "Invalid",
                    format!("unknown point {name:?} (served: {})", supported_points()),
                ))
            }
        };
        if let Some(c) = caps {
            if !c.allows(point) {
                let allowed: Vec<&str> = c.points.iter().map(|p| p.metric_name()).collect();
                return Err(PolicyError::at(
                    field,
                    "OverLimit",
                    format!("this profile lets a namespaced policy serve only {}", allowed.join(", ")),
                ));
            }
        }
        if points.contains(&point) {
            return Err(PolicyError::at(field, "Invalid", format!("{name} is listed twice")));
        }
        points.push(point);
    }
    if points.is_empty() {
        return Err(PolicyError::at("spec.points", "Invalid", "names no point"));
    }
    points.sort();

    let weight = match spec.weight {
        Some(_) if !points.contains(&Point::Score) => {
            return Err(PolicyError::at("spec.weight", "Invalid", "is only for a policy that serves Score"))
        }
        Some(w) if !(1..=100).contains(&w) => {
            return Err(PolicyError::at("spec.weight", "Invalid", format!("{w} is not between 1 and 100")))
        }
        Some(w) => w,
        None => 1,
    };
    if let Some(c) = caps {
        if weight > c.max_weight {
            return Err(PolicyError::at(
                "spec.weight",
                "OverLimit",
                format!("{weight} is over this profile's maxWeight {}", c.max_weight),
            ));
        }
    }
    let timeout = match &spec.timeout {
        Some(t) => Some(parse_go_duration(t).map_err(|e| PolicyError::at("spec.timeout", "Invalid", e))?),
        None => None,
    };
    let memory =
        match &spec.memory_limit {
            None => None,
            Some(serde_json::Value::Number(n)) => Some(n.as_i64().filter(|v| *v >= 0).ok_or_else(|| {
                PolicyError::at("spec.memoryLimit", "Invalid", format!("{n} is not a number of bytes"))
            })?),
            Some(serde_json::Value::String(s)) => {
                Some(parse_value(s).map_err(|e| PolicyError::at("spec.memoryLimit", "Invalid", e.to_string()))?)
            }
            Some(v) => return Err(PolicyError::at("spec.memoryLimit", "Invalid", format!("{v} is not a quantity"))),
        };
    if let Some(c) = caps {
        if let Some(t) = timeout.filter(|t| *t > c.max_timeout) {
            return Err(PolicyError::at(
                "spec.timeout",
                "OverLimit",
                format!("{t:?} is over this profile's maxTimeout {:?}", c.max_timeout),
            ));
        }
        if let Some(m) = memory.map(|m| m as u64).filter(|m| *m > c.max_memory_limit) {
            return Err(PolicyError::at(
                "spec.memoryLimit",
                "OverLimit",
                format!("{m} bytes is over this profile's maxMemoryLimit {} bytes", c.max_memory_limit),
            ));
        }
    }
    let selector = |field: &str, s: Option<&LabelSelector>| match s {
        None => Ok(Selector::everything()),
        Some(s) => Selector::from_label_selector(s).map_err(|e| PolicyError::at(field, "Invalid", e)),
    };
    let pods = selector("spec.podSelector", spec.pod_selector.as_ref())?;
    if namespaced && spec.namespace_selector.is_some() {
        return Err(PolicyError::at("spec.namespaceSelector", "Invalid", "is for a ClusterSchedulingPolicy"));
    }
    let namespaces = selector("spec.namespaceSelector", spec.namespace_selector.as_ref())?;

    // The plugin args a profile would write, so every check and default of a Wasm plugin's args applies as is.
    let mut args = serde_json::json!({"component": spec.component});
    let o = args.as_object_mut().expect("an object");
    if let Some(h) = &spec.sha256 {
        o.insert("sha256".into(), h.clone().into());
    }
    if let Some(p) = spec.pull_policy {
        o.insert("pullPolicy".into(), format!("{p:?}").into());
    }
    if let Some(c) = &spec.config {
        o.insert("config".into(), c.clone());
    }
    if let Some(t) = &spec.timeout {
        o.insert("timeout".into(), t.clone().into());
    }
    if let Some(m) = memory {
        o.insert("memoryLimit".into(), m.to_string().into());
    }
    if let Some(f) = spec.failure_policy {
        o.insert("failurePolicy".into(), format!("{f:?}").into());
    }
    let mut wasm = WasmArgs::parse(&args, Path::new("/")).map_err(|e| {
        let (field, message) = e.split_once(": ").unwrap_or(("", &e));
        let field = if field.is_empty() { "spec".to_string() } else { format!("spec.{field}") };
        PolicyError::at(field, "Invalid", message)
    })?;
    wasm.pull.signature = limits.signature_keys.clone();
    // Left unset, a tenant's deadline and memory cap are the defaults, but never over the platform's caps.
    if let Some(c) = caps {
        wasm.timeout = wasm.timeout.min(c.max_timeout);
        wasm.memory_limit = wasm.memory_limit.min(c.max_memory_limit);
    }
    Ok(Some(Admitted {
        key: obj.key(),
        namespace: obj.namespace.clone(),
        generation: obj.generation,
        points,
        weight,
        pods,
        namespaces,
        wasm,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn obj(ns: Option<&str>, spec: serde_json::Value) -> PolicyObject {
        PolicyObject { namespace: ns.map(str::to_string), name: "p".into(), uid: "u".into(), generation: 3, spec }
    }

    fn limits(v: serde_json::Value) -> TenantPoliciesArgs {
        TenantPoliciesArgs::parse(Some(&v), Path::new("/")).unwrap()
    }

    fn spec(extra: serde_json::Value) -> serde_json::Value {
        let mut s =
            json!({"schedulerName": "kws", "component": "oci://registry.example/policies/p:1", "points": ["Filter"]});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn a_policy_within_the_limits_is_admitted_with_its_args() {
        let l = limits(json!({"namespaced": {"maxWeight": 5}}));
        let a = admit(
            &obj(Some("team-a"), spec(json!({"points": ["Score", "Filter"], "weight": 5, "timeout": "50ms", "memoryLimit": "32Mi", "config": {"k": 1}, "failurePolicy": "Ignore", "podSelector": {"matchLabels": {"team": "a"}}}))),
            "kws",
            &l,
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.key, "team-a/p");
        assert_eq!(a.points, vec![Point::Filter, Point::Score]);
        assert_eq!(a.weight, 5);
        assert_eq!(a.generation, 3);
        assert_eq!(a.wasm.timeout, Duration::from_millis(50));
        assert_eq!(a.wasm.memory_limit, 32 << 20);
        assert_eq!(a.wasm.config_json, r#"{"k":1}"#);
        assert_eq!(a.wasm.failure_policy, FailurePolicy::Ignore);
        assert!(!a.pods.is_everything());
    }

    #[test]
    fn another_profiles_policy_is_not_admitted_here() {
        let l = limits(json!({"namespaced": {}}));
        assert!(admit(&obj(Some("a"), spec(json!({"schedulerName": "other"}))), "kws", &l).unwrap().is_none());
    }

    #[test]
    fn each_refusal_names_its_field() {
        let l = limits(
            json!({"namespaced": {"maxWeight": 5, "maxTimeout": "100ms", "maxMemoryLimit": "64Mi"}, "allowedSources": ["oci://registry.example/policies/"]}),
        );
        for (ns, extra, words) in [
            (Some("a"), json!({"weight": 6, "points": ["Score"]}), "spec.weight: 6 is over this profile's maxWeight 5"),
            (Some("a"), json!({"weight": 2}), "spec.weight: is only for a policy that serves Score"),
            (Some("a"), json!({"timeout": "1s"}), "spec.timeout: 1s is over this profile's maxTimeout 100ms"),
            (Some("a"), json!({"memoryLimit": "1Gi"}), "spec.memoryLimit: 1073741824 bytes is over"),
            (Some("a"), json!({"points": ["Bind"]}), "spec.points[0]: a namespaced policy never serves Bind"),
            (Some("a"), json!({"points": ["PreBind"]}), "spec.points[0]: PreBind is not served to tenant policies"),
            (Some("a"), json!({"points": ["PreEnqueue", "PostBind"]}), "spec.points[1]: PostBind is not served"),
            (Some("a"), json!({"component": "/etc/passwd"}), "spec.component: must start with oci:// or https://"),
            (
                Some("a"),
                json!({"component": "oci://evil.example/p:1"}),
                "spec.component: oci://evil.example/p:1 is not from a source this profile accepts",
            ),
            (Some("a"), json!({"component": "oci://registry.example/policies.evil/p:1"}), "is not from a source"),
            (Some("a"), json!({"namespaceSelector": {}}), "spec.namespaceSelector: is for a ClusterSchedulingPolicy"),
            (Some("a"), json!({"wieght": 1}), "spec.wieght: unknown field"),
            (Some("a"), json!({"failurePolicy": "Retry"}), "spec.failurePolicy: unknown variant"),
            (None, json!({"points": ["QueueSort"]}), "spec.points[0]: QueueSort is not served to tenant policies"),
        ] {
            let e = admit(&obj(ns, spec(extra.clone())), "kws", &l).expect_err(&extra.to_string());
            assert!(e.to_string().contains(words), "{extra}: {e}");
        }
    }

    #[test]
    fn a_point_comes_with_its_companion_and_no_more() {
        let l = limits(json!({"namespaced": {"points": ["Filter", "Permit"]}}));
        for points in [json!(["PreFilter", "Filter"]), json!(["Reserve", "Permit"]), json!(["PreFilter", "Reserve"])] {
            let a = admit(&obj(Some("a"), spec(json!({"points": points.clone()}))), "kws", &l);
            assert!(a.as_ref().is_ok_and(|a| a.is_some()), "{points}: {:?}", a.err());
        }
        for (points, words) in [
            (json!(["PreScore"]), "spec.points[0]: this profile lets a namespaced policy serve only Filter, Permit"),
            (json!(["Filter", "Score"]), "spec.points[1]: this profile lets a namespaced policy serve only"),
            (json!(["PreEnqueue"]), "spec.points[0]: this profile lets a namespaced policy serve only"),
        ] {
            let e = admit(&obj(Some("a"), spec(json!({"points": points.clone()}))), "kws", &l).expect_err("refused");
            assert!(e.to_string().contains(words), "{points}: {e}");
        }
    }

    #[test]
    fn namespaced_policies_wait_for_the_platform_but_cluster_policies_do_not() {
        let l = limits(json!({}));
        let e = admit(&obj(Some("a"), spec(json!({}))), "kws", &l).unwrap_err();
        assert_eq!(e.field, None);
        assert!(e.message.contains("does not accept namespaced SchedulingPolicies"), "{e}");
        // A cluster policy is the platform's own: no tenant caps, still no file.
        let a = admit(&obj(None, spec(json!({"points": ["Score"], "weight": 50, "timeout": "2s"}))), "kws", &l);
        assert_eq!(a.unwrap().unwrap().weight, 50);
    }
}
