//! Scheduler types into contract types and back. Pods cross once per call; nodes only when they change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorTerm;

use super::bindings::kws::plugin::types as wit;
use crate::framework::types::{QosClass, Resource};
use crate::framework::{Code, NodeInfo, PodInfo, QueuedPodInfo, Status};

fn labels(m: Option<&BTreeMap<String, String>>) -> Vec<(String, String)> {
    m.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn resources(r: &Resource) -> wit::Resources {
    wit::Resources {
        milli_cpu: r.milli_cpu,
        memory: r.memory,
        ephemeral_storage: r.ephemeral_storage,
        pods: r.allowed_pod_number,
        scalar: r.scalar.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    }
}

fn term(t: &NodeSelectorTerm) -> wit::NodeSelectorTerm {
    let reqs = |v: Option<&Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>>| {
        v.into_iter()
            .flatten()
            .map(|r| wit::SelectorRequirement { key: r.key.clone(), operator: r.operator.clone(), values: r.values.clone().unwrap_or_default() })
            .collect()
    };
    wit::NodeSelectorTerm { match_expressions: reqs(t.match_expressions.as_ref()), match_fields: reqs(t.match_fields.as_ref()) }
}

/// A pod as the contract describes it.
pub fn pod(p: &PodInfo) -> wit::Pod {
    let spec = p.pod.spec.as_ref();
    let mut limits = Resource::default();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or(&[]) {
        if let Ok(l) = Resource::from_list(c.resources.as_ref().and_then(|r| r.limits.as_ref())) {
            limits.add(&l);
        }
    }
    let na = spec.and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
    wit::Pod {
        uid: p.uid.clone(),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        labels: labels(p.pod.metadata.labels.as_ref()),
        annotations: labels(p.pod.metadata.annotations.as_ref()),
        priority: p.priority,
        qos_class: match p.qos {
            QosClass::Guaranteed => wit::QosClass::Guaranteed,
            QosClass::Burstable => wit::QosClass::Burstable,
            QosClass::BestEffort => wit::QosClass::BestEffort,
        },
        requests: resources(&p.requests),
        limits: resources(&limits),
        tolerations: p
            .tolerations()
            .iter()
            .map(|t| wit::Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_else(|| "Equal".into()),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        node_selector: labels(spec.and_then(|s| s.node_selector.as_ref())),
        required_node_affinity: na
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|r| r.node_selector_terms.iter().map(term).collect())
            .unwrap_or_default(),
        preferred_node_affinity: na
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
            .into_iter()
            .flatten()
            .map(|p| wit::PreferredTerm { weight: p.weight, term: term(&p.preference) })
            .collect(),
        scheduler_name: p.scheduler_name().to_string(),
        node_name: p.node_name().map(str::to_string),
    }
}

/// A queued pod.
pub fn queued_pod(q: &QueuedPodInfo) -> wit::QueuedPod {
    wit::QueuedPod { pod: pod(&q.pod_info), timestamp_ns: q.timestamp, attempts: q.attempts }
}

/// A node.
pub fn node(n: &NodeInfo) -> wit::Node {
    wit::Node {
        name: n.name.clone(),
        labels: labels(n.node.metadata.labels.as_ref()),
        taints: n
            .taints()
            .iter()
            .map(|t| wit::Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect: t.effect.clone() })
            .collect(),
        allocatable: resources(&n.allocatable),
        requested: resources(&n.requested),
        unschedulable: n.unschedulable(),
        pod_count: n.pods.len() as u32,
    }
}

/// A contract status as a framework status.
pub fn status(s: wit::Status) -> Status {
    let code = match s.code {
        wit::Code::Success => Code::Success,
        wit::Code::Error => Code::Error,
        wit::Code::Unschedulable => Code::Unschedulable,
        wit::Code::UnschedulableAndUnresolvable => Code::UnschedulableAndUnresolvable,
        wit::Code::Wait => Code::Wait,
        wit::Code::Skip => Code::Skip,
        wit::Code::Pending => Code::Pending,
    };
    if code == Code::Success && s.reasons.is_empty() {
        return Status::success();
    }
    Status::with_reasons(code, s.reasons)
}

/// A framework status as a contract status (PostFilter's input).
pub fn status_to_wit(s: &Status) -> wit::Status {
    let code = match s.code() {
        Code::Success => wit::Code::Success,
        Code::Error => wit::Code::Error,
        Code::Unschedulable => wit::Code::Unschedulable,
        Code::UnschedulableAndUnresolvable => wit::Code::UnschedulableAndUnresolvable,
        Code::Wait => wit::Code::Wait,
        Code::Skip => wit::Code::Skip,
        Code::Pending => wit::Code::Pending,
    };
    wit::Status { code, reasons: s.reasons().to_vec() }
}
