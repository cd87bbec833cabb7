//! The API server's validation of the fields the scheduler reads, for objects read from a cluster file: what
//! `kubectl apply` would be refused must not reach the plugins. Mirrors pkg/apis/core/validation/validation.go
//! (ValidateObjectMeta, ValidatePodSpec's containers, ports, resources, affinity, tolerations, topology spread,
//! ValidateNode), pkg/apis/scheduling/validation (PriorityClass), pkg/apis/policy/validation (PDB), and
//! apimachinery's label and name rules. The first problem found is returned as `field.path: what is wrong`, in
//! upstream's words (`Invalid value`, `Required value`, `Unsupported value`, `Duplicate value`, `Forbidden`).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm, ResourceRequirements, Taint,
    Toleration, TopologySpreadConstraint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::framework::quantity::Quantity;

/// `Err("path: what is wrong")`.
pub type Result = std::result::Result<(), String>;

/// The highest priority a PriorityClass outside the `system-` names may have (upstream
/// `HighestUserDefinablePriority`).
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// The predefined system PriorityClasses and their values (upstream `SystemPriorityClasses`).
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i32)] =
    &[("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)];

pub use crate::config::names::{dns1123_subdomain, qualified_name};
use crate::config::names::{dns_label_chars, label_chars};

fn invalid(path: &str, value: impl std::fmt::Display, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn unsupported(path: &str, value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| quoted(s)).collect();
    format!("{path}: Unsupported value: {}: supported values: {}", quoted(value), list.join(", "))
}

fn fail(e: String) -> Result {
    Err(e)
}

// ---- names, labels (apimachinery pkg/util/validation) ----

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Upstream `IsDNS1123Label`: the problem, if any.
pub fn dns1123_label(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !dns_label_chars(s) {
        Some(DNS1123_LABEL_MSG.into())
    } else {
        None
    }
}

fn dns1035_label(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !dns_label_chars(s) || !s.as_bytes()[0].is_ascii_lowercase() {
        Some(DNS1035_LABEL_MSG.into())
    } else {
        None
    }
}

/// Upstream `IsValidLabelValue`: the problem, if any.
pub fn label_value(s: &str) -> Option<String> {
    if s.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !s.is_empty() && !label_chars(s) {
        Some(LABEL_VALUE_MSG.into())
    } else {
        None
    }
}

fn check_label_name(path: &str, key: &str) -> Result {
    match qualified_name(key) {
        Some(m) => fail(invalid(path, quoted(key), &m)),
        None => Ok(()),
    }
}

fn check_labels(path: &str, labels: Option<&BTreeMap<String, String>>) -> Result {
    for (k, v) in labels.into_iter().flatten() {
        check_label_name(path, k)?;
        if let Some(m) = label_value(v) {
            return fail(invalid(&format!("{path}[{k}]"), quoted(v), &m));
        }
    }
    Ok(())
}

/// How an object's name is checked, by kind (upstream's `ValidateXName` functions).
fn name_rule(kind: &str) -> fn(&str) -> Option<String> {
    match kind {
        "Namespace" => dns1123_label,
        "Service" => dns1035_label,
        _ => dns1123_subdomain,
    }
}

/// Upstream `ValidateObjectMeta`: name (by the kind's rule), namespace (a DNS label), labels.
pub fn object_meta(kind: &str, meta: &ObjectMeta) -> Result {
    if let Some(n) = meta.name.as_deref() {
        if let Some(m) = name_rule(kind)(n) {
            return fail(invalid("metadata.name", quoted(n), &m));
        }
    }
    if let Some(ns) = meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        if let Some(m) = dns1123_label(ns) {
            return fail(invalid("metadata.namespace", quoted(ns), &m));
        }
    }
    check_labels("metadata.labels", meta.labels.as_ref())
}

/// Upstream `ValidateLabelSelector` (label values must be valid, as for new objects).
fn label_selector(path: &str, s: Option<&LabelSelector>) -> Result {
    let Some(s) = s else { return Ok(()) };
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return fail(format!(
                    "{p}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                ))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return fail(format!(
                    "{p}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                ))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => return fail(invalid(&format!("{p}.operator"), quoted(op), "not a valid selector operator")),
        }
        check_label_name(&format!("{p}.key"), &r.key)?;
        for (j, v) in values.iter().enumerate() {
            if let Some(m) = label_value(v) {
                return fail(invalid(&format!("{p}.values[{j}]"), quoted(v), &m));
            }
        }
    }
    check_labels(&format!("{path}.matchLabels"), s.match_labels.as_ref())
}

// ---- quantities ----

/// Upstream `IsNativeResource`: no domain, or a `kubernetes.io` one.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Upstream `IsIntegerResourceName`: pod slots and the other counted standard names, and extended resources.
fn is_integer_resource(name: &str) -> bool {
    matches!(name, "pods" | "services" | "replicationcontrollers" | "resourcequotas" | "secrets" | "configmaps")
        || (!is_native(name) && !name.starts_with("requests."))
}

/// Upstream `IsOvercommitAllowed`: requests may be below limits only for native, non-hugepage resources.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !name.starts_with("hugepages-")
}

fn quantity(path: &str, raw: &ApiQuantity) -> std::result::Result<Quantity, String> {
    crate::framework::quantity::parse(&raw.0).map_err(|e| format!("{path}: {e}"))
}

/// Upstream `ValidateResourceQuantityValue` over a resource list: non-negative, whole for integer resources.
fn resource_list(path: &str, list: Option<&BTreeMap<String, ApiQuantity>>) -> Result {
    for (name, raw) in list.into_iter().flatten() {
        let p = format!("{path}[{name}]");
        let q = quantity(&p, raw)?;
        if q.is_negative() {
            return fail(invalid(&p, quoted(&q.to_string()), "must be greater than or equal to 0"));
        }
        // Upstream tests MilliValue() % 1000; an amount past what milli-units hold is beyond any node anyway.
        let milli = q.milli_value();
        if is_integer_resource(name) && milli != i64::MAX && milli % 1000 != 0 {
            return fail(invalid(&p, quoted(&q.to_string()), "must be an integer"));
        }
    }
    Ok(())
}

/// Upstream `validateResourceRequirements`: each list's values, and requests within (or, for resources that
/// cannot be overcommitted, equal to) limits.
fn resource_requirements(path: &str, r: Option<&ResourceRequirements>) -> Result {
    let Some(r) = r else { return Ok(()) };
    resource_list(&format!("{path}.limits"), r.limits.as_ref())?;
    resource_list(&format!("{path}.requests"), r.requests.as_ref())?;
    let limits = r.limits.as_ref();
    for (name, raw) in r.requests.iter().flatten() {
        let req = quantity(path, raw)?;
        match limits.and_then(|l| l.get(name)) {
            Some(lim) => {
                let lim = quantity(path, lim)?;
                if req != lim && !overcommit_allowed(name) {
                    return fail(invalid(
                        &format!("{path}.requests"),
                        quoted(&req.to_string()),
                        &format!("must be equal to {name} limit of {lim}"),
                    ));
                }
                if req > lim {
                    return fail(invalid(
                        &format!("{path}.requests"),
                        quoted(&req.to_string()),
                        &format!("must be less than or equal to {name} limit of {lim}"),
                    ));
                }
            }
            None if !overcommit_allowed(name) => {
                return fail(format!(
                    "{path}.limits: Required value: Limit must be set for non overcommitable resources"
                ))
            }
            None => {}
        }
    }
    Ok(())
}

// ---- pods ----

fn port_number(path: &str, port: i32) -> Result {
    if !(1..=65535).contains(&port) {
        return fail(invalid(path, port, "must be between 1 and 65535, inclusive"));
    }
    Ok(())
}

/// Upstream `validateContainers` for what the scheduler reads: unique DNS-label names (init containers share
/// the name space), ports, resources.
fn containers(path: &str, list: &[Container], names: &mut HashSet<String>) -> Result {
    for (i, c) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if c.name.is_empty() {
            return fail(format!("{p}.name: Required value"));
        }
        if let Some(m) = dns1123_label(&c.name) {
            return fail(invalid(&format!("{p}.name"), quoted(&c.name), &m));
        }
        if !names.insert(c.name.clone()) {
            return fail(format!("{p}.name: Duplicate value: {}", quoted(&c.name)));
        }
        for (j, port) in c.ports.iter().flatten().enumerate() {
            let pp = format!("{p}.ports[{j}]");
            if port.container_port == 0 {
                return fail(format!("{pp}.containerPort: Required value"));
            }
            port_number(&format!("{pp}.containerPort"), port.container_port)?;
            // hostPort 0 means "not set".
            if let Some(h) = port.host_port.filter(|&h| h != 0) {
                port_number(&format!("{pp}.hostPort"), h)?;
            }
            if let Some(proto) = port.protocol.as_deref() {
                if !matches!(proto, "TCP" | "UDP" | "SCTP") {
                    return fail(unsupported(&format!("{pp}.protocol"), proto, &["SCTP", "TCP", "UDP"]));
                }
            }
        }
        resource_requirements(&format!("{p}.resources"), c.resources.as_ref())?;
    }
    Ok(())
}

/// Upstream `ValidateNodeSelectorRequirement`; `label_values` is false for preferred terms, whose invalid
/// label values upstream allows.
fn node_selector_requirement(p: &str, r: &NodeSelectorRequirement, label_values: bool) -> Result {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            return fail(format!("{p}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"))
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return fail(format!(
                "{p}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ))
        }
        "Gt" | "Lt" if values.len() != 1 => {
            return fail(format!(
                "{p}.values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            ))
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        op => return fail(invalid(&format!("{p}.operator"), quoted(op), "not a valid selector operator")),
    }
    check_label_name(&format!("{p}.key"), &r.key)?;
    if label_values {
        for (j, v) in values.iter().enumerate() {
            if let Some(m) = label_value(v) {
                return fail(invalid(&format!("{p}.values[{j}]"), quoted(v), &m));
            }
        }
    }
    Ok(())
}

/// Upstream `ValidateNodeFieldSelectorRequirement`: only `metadata.name`, with In or NotIn and one value.
fn node_field_requirement(p: &str, r: &NodeSelectorRequirement) -> Result {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.len() != 1 => {
            return fail(format!(
                "{p}.values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
            ))
        }
        "In" | "NotIn" => {}
        op => return fail(invalid(&format!("{p}.operator"), quoted(op), "not a valid selector operator")),
    }
    if r.key != "metadata.name" {
        return fail(invalid(&format!("{p}.key"), quoted(&r.key), "not a valid field selector key"));
    }
    for (j, v) in values.iter().enumerate() {
        if let Some(m) = dns1123_subdomain(v) {
            return fail(invalid(&format!("{p}.values[{j}]"), quoted(v), &m));
        }
    }
    Ok(())
}

fn node_selector_term(p: &str, t: &NodeSelectorTerm, label_values: bool) -> Result {
    for (j, r) in t.match_expressions.iter().flatten().enumerate() {
        node_selector_requirement(&format!("{p}.matchExpressions[{j}]"), r, label_values)?;
    }
    for (j, r) in t.match_fields.iter().flatten().enumerate() {
        node_field_requirement(&format!("{p}.matchFields[{j}]"), r)?;
    }
    Ok(())
}

fn weight(p: &str, w: i32) -> Result {
    if !(1..=100).contains(&w) {
        return fail(invalid(&format!("{p}.weight"), w, "must be in the range 1-100"));
    }
    Ok(())
}

/// Upstream `validatePodAffinityTerm`.
fn pod_affinity_term(p: &str, t: &PodAffinityTerm) -> Result {
    label_selector(&format!("{p}.labelSelector"), t.label_selector.as_ref())?;
    label_selector(&format!("{p}.namespaceSelector"), t.namespace_selector.as_ref())?;
    for ns in t.namespaces.iter().flatten() {
        if let Some(m) = dns1123_label(ns) {
            return fail(invalid(&format!("{p}.namespace"), quoted(ns), &m));
        }
    }
    if t.topology_key.is_empty() {
        return fail(format!("{p}.topologyKey: Required value: can not be empty"));
    }
    check_label_name(&format!("{p}.topologyKey"), &t.topology_key)
}

fn affinity(pod: &Pod) -> Result {
    let Some(a) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else { return Ok(()) };
    if let Some(na) = &a.node_affinity {
        let p = "spec.affinity.nodeAffinity";
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            let rp = format!("{p}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if req.node_selector_terms.is_empty() {
                return fail(format!("{rp}: Required value: must have at least one node selector term"));
            }
            for (i, t) in req.node_selector_terms.iter().enumerate() {
                node_selector_term(&format!("{rp}[{i}]"), t, true)?;
            }
        }
        for (i, t) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            let tp = format!("{p}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(&tp, t.weight)?;
            node_selector_term(&format!("{tp}.preference"), &t.preference, false)?;
        }
    }
    let pod_terms = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|x| {
                (
                    &x.required_during_scheduling_ignored_during_execution,
                    &x.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|x| {
                (
                    &x.required_during_scheduling_ignored_during_execution,
                    &x.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (kind, terms) in pod_terms {
        let Some((required, preferred)) = terms else { continue };
        let p = format!("spec.affinity.{kind}");
        for (i, t) in required.iter().flatten().enumerate() {
            pod_affinity_term(&format!("{p}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"), t)?;
        }
        for (i, t) in preferred.iter().flatten().enumerate() {
            let tp = format!("{p}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            weight(&tp, t.weight)?;
            pod_affinity_term(&format!("{tp}.podAffinityTerm"), &t.pod_affinity_term)?;
        }
    }
    Ok(())
}

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Upstream `ValidateTolerations`.
fn tolerations(list: &[Toleration]) -> Result {
    for (i, t) in list.iter().enumerate() {
        let p = format!("spec.tolerations[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        if !key.is_empty() {
            check_label_name(&format!("{p}.key"), key)?;
        }
        if key.is_empty() && op != "Exists" {
            return fail(invalid(
                &format!("{p}.operator"),
                quoted(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            return fail(invalid(
                &format!("{p}.effect"),
                quoted(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "" | "Equal" => {
                if let Some(m) = label_value(value) {
                    return fail(invalid(&format!("{p}.operator"), quoted(value), &m));
                }
            }
            "Exists" if !value.is_empty() => {
                return fail(invalid(
                    &format!("{p}.operator"),
                    quoted(value),
                    "value must be empty when `operator` is 'Exists'",
                ))
            }
            "Exists" => {}
            op => return fail(unsupported(&format!("{p}.operator"), op, &["Equal", "Exists"])),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            return fail(unsupported(&format!("{p}.effect"), effect, TAINT_EFFECTS));
        }
    }
    Ok(())
}

/// Upstream `validateTopologySpreadConstraints`.
fn topology_spread(list: &[TopologySpreadConstraint]) -> Result {
    for (i, c) in list.iter().enumerate() {
        let p = format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew <= 0 {
            return fail(invalid(&format!("{p}.maxSkew"), c.max_skew, "must be greater than zero"));
        }
        if c.topology_key.is_empty() {
            return fail(format!("{p}.topologyKey: Required value: can not be empty"));
        }
        let when = c.when_unsatisfiable.as_str();
        if !matches!(when, "DoNotSchedule" | "ScheduleAnyway") {
            return fail(unsupported(&format!("{p}.whenUnsatisfiable"), when, &["DoNotSchedule", "ScheduleAnyway"]));
        }
        if list[i + 1..]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable)
        {
            return fail(format!(
                "{p}.{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{{}, {}}}\"",
                c.topology_key, when
            ));
        }
        if let Some(m) = c.min_domains {
            if m <= 0 {
                return fail(invalid(&format!("{p}.minDomains"), m, "must be greater than zero"));
            }
            if when != "DoNotSchedule" {
                return fail(invalid(
                    &format!("{p}.minDomains"),
                    m,
                    &format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"),
                ));
            }
        }
        for (field, v) in [("nodeAffinityPolicy", &c.node_affinity_policy), ("nodeTaintsPolicy", &c.node_taints_policy)]
        {
            if let Some(v) = v.as_deref().filter(|v| !matches!(*v, "Honor" | "Ignore")) {
                return fail(unsupported(&format!("{p}.{field}"), v, &["Honor", "Ignore"]));
            }
        }
        label_selector(&format!("{p}.labelSelector"), c.label_selector.as_ref())?;
    }
    Ok(())
}

/// The fields of a pod the scheduler reads, as the API server validates them on create.
pub fn pod(pod: &Pod) -> Result {
    let Some(spec) = pod.spec.as_ref() else { return Ok(()) };
    let mut names = HashSet::new();
    containers("spec.containers", &spec.containers, &mut names)?;
    containers("spec.initContainers", spec.init_containers.as_deref().unwrap_or_default(), &mut names)?;
    resource_list("spec.overhead", spec.overhead.as_ref())?;
    check_labels("spec.nodeSelector", spec.node_selector.as_ref())?;
    affinity(pod)?;
    tolerations(spec.tolerations.as_deref().unwrap_or_default())?;
    topology_spread(spec.topology_spread_constraints.as_deref().unwrap_or_default())?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        if let Some(m) = dns1123_subdomain(n) {
            return fail(invalid("spec.nodeName", quoted(n), &m));
        }
    }
    Ok(())
}

/// Upstream `validateNodeTaints`.
fn taints(list: &[Taint]) -> Result {
    let mut seen = HashSet::new();
    for (i, t) in list.iter().enumerate() {
        let p = format!("spec.taints[{i}]");
        check_label_name(&format!("{p}.key"), &t.key)?;
        let value = t.value.as_deref().unwrap_or_default();
        if let Some(m) = label_value(value) {
            return fail(invalid(&format!("{p}.value"), quoted(value), &m));
        }
        if t.effect.is_empty() {
            return fail(format!("{p}.effect: Required value"));
        }
        if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
            return fail(unsupported(&format!("{p}.effect"), &t.effect, TAINT_EFFECTS));
        }
        if !seen.insert((t.effect.clone(), t.key.clone())) {
            return fail(format!("{p}: Duplicate value: taints must be unique by key and effect pair"));
        }
    }
    Ok(())
}

/// A node's taints and its capacity and allocatable (upstream `ValidateNode`, `ValidateNodeResources`).
pub fn node(node: &Node) -> Result {
    taints(node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default())?;
    let status = node.status.as_ref();
    resource_list("status.capacity", status.and_then(|s| s.capacity.as_ref()))?;
    resource_list("status.allocatable", status.and_then(|s| s.allocatable.as_ref()))
}

/// A PriorityClass (upstream `ValidatePriorityClass`): `system-` names are reserved for the two predefined
/// classes, other values are at most [`HIGHEST_USER_DEFINABLE_PRIORITY`].
pub fn priority_class(pc: &PriorityClass) -> Result {
    let name = pc.metadata.name.as_deref().unwrap_or_default();
    let value = pc.value.unwrap_or(0);
    if name.starts_with("system-") {
        let known = SYSTEM_PRIORITY_CLASSES.iter().any(|&(n, v)| n == name && v == value);
        if !known || pc.global_default == Some(true) {
            return fail(format!("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: {name:?} is not a known system priority class with value {value}"));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        return fail(format!(
            "value: Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        ));
    }
    if let Some(p) = pc.preemption_policy.as_deref().filter(|p| !matches!(*p, "Never" | "PreemptLowerPriority")) {
        return fail(unsupported("preemptionPolicy", p, &["Never", "PreemptLowerPriority"]));
    }
    Ok(())
}

/// Upstream `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn int_or_percent(path: &str, v: &IntOrString) -> Result {
    match v {
        IntOrString::Int(i) if *i < 0 => fail(invalid(path, i, "must be greater than or equal to 0")),
        IntOrString::Int(_) => Ok(()),
        IntOrString::String(s) => {
            let digits = s.strip_suffix('%').filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
            match digits {
                None => fail(invalid(path, quoted(s), "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                Some(d) if d.trim_start_matches('0').len() > 3 || d.parse::<u32>().is_ok_and(|p| p > 100) => {
                    fail(invalid(path, quoted(s), "must not be greater than 100%"))
                }
                Some(_) => Ok(()),
            }
        }
    }
}

/// A PodDisruptionBudget (upstream `ValidatePodDisruptionBudgetSpec`).
pub fn pdb(pdb: &PodDisruptionBudget) -> Result {
    let Some(spec) = pdb.spec.as_ref() else { return Ok(()) };
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        return fail(invalid("spec", quoted("object"), "minAvailable and maxUnavailable cannot be both set"));
    }
    if let Some(v) = &spec.min_available {
        int_or_percent("spec.minAvailable", v)?;
    }
    if let Some(v) = &spec.max_unavailable {
        int_or_percent("spec.maxUnavailable", v)?;
    }
    if let Some(p) =
        spec.unhealthy_pod_eviction_policy.as_deref().filter(|p| !matches!(*p, "AlwaysAllow" | "IfHealthyBudget"))
    {
        return fail(unsupported("spec.unhealthyPodEvictionPolicy", p, &["AlwaysAllow", "IfHealthyBudget"]));
    }
    label_selector("spec.selector", spec.selector.as_ref())
}

/// Strict field validation (what `kubectl apply` asks of the API server by default): every non-null field of
/// the document must survive decoding into the Kubernetes type, or it was unknown (a typo such as `nodeSelecter`).
/// `decoded` is the typed object serialized back to JSON.
pub fn unknown_fields(input: &serde_json::Value, decoded: &serde_json::Value) -> Result {
    fn walk(path: &mut String, input: &serde_json::Value, decoded: &serde_json::Value) -> Result {
        use serde_json::Value::{Array, Object};
        match (input, decoded) {
            (Object(i), Object(d)) => {
                for (k, v) in i {
                    if v.is_null() {
                        continue;
                    }
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    match d.get(k) {
                        Some(dv) => walk(path, v, dv)?,
                        None => return fail(format!("{path}: unknown field")),
                    }
                    path.truncate(len);
                }
                Ok(())
            }
            (Array(i), Array(d)) => {
                for (j, (iv, dv)) in i.iter().zip(d).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{j}]"));
                    walk(path, iv, dv)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(&mut String::new(), input, decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels() {
        for ok in ["a", "a-b", "0", "a.b", &"a".repeat(63)] {
            assert_eq!(dns1123_subdomain(ok), None, "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a_b", "a..b", &"a".repeat(254)] {
            assert!(dns1123_subdomain(bad).is_some(), "{bad}");
        }
        assert!(dns1123_label("a.b").is_some());
        assert!(dns1035_label("0a").is_some());
        for ok in ["a", "example.com/A_b.c", "kubernetes.io/hostname", "A"] {
            assert_eq!(qualified_name(ok), None, "{ok}");
        }
        for bad in ["", "/a", "a/", "a/b/c", "-a", "Example.com/a", &"a".repeat(64)] {
            assert!(qualified_name(bad).is_some(), "{bad}");
        }
        assert_eq!(label_value(""), None);
        assert!(label_value("a b").is_some());
    }

    #[test]
    fn percents() {
        let p = |s: &str| int_or_percent("x", &IntOrString::String(s.into()));
        assert!(p("0%").is_ok() && p("100%").is_ok() && p("007%").is_ok());
        assert!(p("101%").is_err() && p("%").is_err() && p("1.5%").is_err() && p("99999999999%").is_err());
        assert!(int_or_percent("x", &IntOrString::Int(-1)).is_err());
    }
}
