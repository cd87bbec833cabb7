//! Scheduler types into contract types and back. Pods cross once per call; nodes only when they change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorTerm;

use super::bindings::exports::kws::plugin::filter as ex_filter;
use super::bindings::kws::plugin::types as wit;
use crate::framework::pod_view::{KnownPod, PodState};
use crate::framework::types::{QosClass, Resource};
use crate::framework::{
    action, ClusterEvent, Code, EventObject, EventResource, NodeInfo, PodInfo, QueuedPodInfo, Status,
};

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
            .map(|r| wit::SelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect()
    };
    wit::NodeSelectorTerm {
        match_expressions: reqs(t.match_expressions.as_ref()),
        match_fields: reqs(t.match_fields.as_ref()),
    }
}

/// A pod as the contract describes it.
pub fn pod(p: &PodInfo) -> wit::Pod {
    let spec = p.pod.spec.as_ref();
    let na = spec.and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
    wit::Pod {
        uid: p.uid.clone(),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        labels: labels(p.pod.metadata.labels.as_ref()),
        annotations: labels(p.pod.metadata.annotations.as_ref()),
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
        ..pod_usage(p)
    }
}

/// Only what a pod uses on its node (requests, limits, QoS, priority, the node): what a tenant's guest sees of
/// another namespace's pod. Identity, labels, annotations, tolerations, selectors and affinity are left empty.
pub fn pod_usage(p: &PodInfo) -> wit::Pod {
    let mut limits = Resource::default();
    for c in p.pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or(&[]) {
        if let Ok(l) = Resource::from_list(c.resources.as_ref().and_then(|r| r.limits.as_ref())) {
            limits.add(&l);
        }
    }
    wit::Pod {
        uid: String::new(),
        namespace: String::new(),
        name: String::new(),
        labels: Vec::new(),
        annotations: Vec::new(),
        priority: p.priority,
        qos_class: qos_class(p.qos),
        requests: resources(&p.requests),
        limits: resources(&limits),
        tolerations: Vec::new(),
        node_selector: Vec::new(),
        required_node_affinity: Vec::new(),
        preferred_node_affinity: Vec::new(),
        scheduler_name: String::new(),
        node_name: p.node_name().map(str::to_string),
    }
}

/// A QoS class as the contract names it.
pub fn qos_class(q: QosClass) -> wit::QosClass {
    match q {
        QosClass::Guaranteed => wit::QosClass::Guaranteed,
        QosClass::Burstable => wit::QosClass::Burstable,
        QosClass::BestEffort => wit::QosClass::BestEffort,
    }
}

/// A queued pod.
pub fn queued_pod(q: &QueuedPodInfo) -> wit::QueuedPod {
    wit::QueuedPod { pod: pod(&q.pod_info), timestamp_ns: q.timestamp, attempts: q.attempts }
}

/// Queued pods in contract form, kept between QueueSort calls: a sort compares each pod with many others (about
/// 2·log₂ n comparisons per pod through the heap), and converting the pod anew for each comparison was most of a
/// Wasm QueueSort's cost. An entry is reused while it is for the same `PodInfo` (by pointer: an update makes a new
/// one) at the same queue timestamp and attempt count.
#[derive(Default)]
pub struct QueuedPodCache {
    entries: std::sync::Mutex<std::collections::HashMap<String, CachedQueuedPod>>,
}

struct CachedQueuedPod {
    from: std::sync::Arc<PodInfo>,
    timestamp: u64,
    attempts: u32,
    converted: std::sync::Arc<wit::QueuedPod>,
}

/// Entries kept at most; past it the cache starts over (pods that left the queue go with it).
const QUEUED_POD_CACHE: usize = 16 * 1024;

impl QueuedPodCache {
    /// `q` in contract form, converted only when it changed since the last call.
    pub fn get(&self, q: &QueuedPodInfo) -> std::sync::Arc<wit::QueuedPod> {
        let mut entries = self.entries.lock().expect("queued pod cache lock");
        if let Some(e) = entries.get(&q.pod_info.uid) {
            if std::sync::Arc::ptr_eq(&e.from, &q.pod_info) && e.timestamp == q.timestamp && e.attempts == q.attempts {
                return e.converted.clone();
            }
        }
        if entries.len() >= QUEUED_POD_CACHE {
            entries.clear();
        }
        let converted = std::sync::Arc::new(queued_pod(q));
        let entry = CachedQueuedPod {
            from: q.pod_info.clone(),
            timestamp: q.timestamp,
            attempts: q.attempts,
            converted: converted.clone(),
        };
        entries.insert(q.pod_info.uid.clone(), entry);
        converted
    }
}

/// A node.
pub fn node(n: &NodeInfo) -> wit::Node {
    wit::Node {
        name: n.name.clone(),
        labels: labels(n.node.metadata.labels.as_ref()),
        taints: n
            .taints()
            .iter()
            .map(|t| wit::Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
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

/// Appends a batch's Filter answer to `out` as one status per node (success for every node not listed). An answer
/// that names a position outside the batch, a position twice, a status that does not exist, or a success as a
/// rejection is invalid: the message says which, and `out` is left as it was.
pub fn filter_verdicts(answer: ex_filter::FilterResult, nodes: usize, out: &mut Vec<Status>) -> Result<(), String> {
    let ex_filter::FilterResult { statuses, rejected, verdicts } = answer;
    if rejected.len() != verdicts.len() {
        return Err(format!("listed {} rejected nodes but {} verdicts", rejected.len(), verdicts.len()));
    }
    let distinct: Vec<Status> = statuses.into_iter().map(status).collect();
    if let Some(i) = distinct.iter().position(Status::is_success) {
        return Err(format!("listed a success status (index {i}) among the rejections"));
    }
    let base = out.len();
    // Built fresh rather than cloned: cloning a Status per node was a visible share of a whole cycle.
    out.extend((0..nodes).map(|_| Status::success()));
    let batch = &mut out[base..];
    let mut check = || {
        for (&at, &v) in rejected.iter().zip(&verdicts) {
            let (at, v) = (at as usize, v as usize);
            let slot = batch.get_mut(at).ok_or_else(|| format!("rejected node position {at} of a batch of {nodes}"))?;
            // Every listed status is a rejection, so a slot that no longer holds success was listed before.
            if !slot.is_success() {
                return Err(format!("rejected node position {at} twice"));
            }
            *slot = distinct.get(v).ok_or_else(|| format!("pointed at status {v} of {}", distinct.len()))?.clone();
        }
        Ok(())
    };
    let r = check();
    if r.is_err() {
        out.truncate(base);
    }
    r
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

/// A pod of the pod view.
pub fn known_pod(k: &KnownPod) -> wit::KnownPod {
    known_pod_as(k, pod(&k.pod))
}

/// A pod of the pod view, described by `pod` (whole, or only its usage).
pub fn known_pod_as(k: &KnownPod, pod: wit::Pod) -> wit::KnownPod {
    wit::KnownPod {
        pod,
        state: match k.state {
            PodState::Pending => wit::PodState::Pending,
            PodState::Assumed => wit::PodState::Assumed,
            PodState::Bound => wit::PodState::Bound,
        },
        first_seen_ns: k.first_seen,
    }
}

/// The action bits of the framework's events and the contract's flags, side by side.
const ACTIONS: [(u8, wit::EventActions); 6] = [
    (action::ADD, wit::EventActions::ADD),
    (action::DELETE, wit::EventActions::DELETE),
    (action::UPDATE_LABEL, wit::EventActions::UPDATE_LABEL),
    (action::UPDATE_TAINT, wit::EventActions::UPDATE_TAINT),
    (action::UPDATE_RESOURCES, wit::EventActions::UPDATE_RESOURCES),
    (action::UPDATE_OTHER, wit::EventActions::UPDATE_OTHER),
];

/// Host resources the contract has no name for are `other` to a guest (first match wins the way back).
const RESOURCES: [(EventResource, wit::EventResource); 13] = [
    (EventResource::AssignedPod, wit::EventResource::AssignedPod),
    (EventResource::UnscheduledPod, wit::EventResource::UnscheduledPod),
    (EventResource::Node, wit::EventResource::Node),
    (EventResource::Volume, wit::EventResource::Volume),
    (EventResource::Other, wit::EventResource::Other),
    (EventResource::StorageClass, wit::EventResource::Other),
    (EventResource::CSINode, wit::EventResource::Other),
    (EventResource::CSIDriver, wit::EventResource::Other),
    (EventResource::CSIStorageCapacity, wit::EventResource::Other),
    (EventResource::ResourceClaim, wit::EventResource::Other),
    (EventResource::ResourceSlice, wit::EventResource::Other),
    (EventResource::DeviceClass, wit::EventResource::Other),
    (EventResource::PodGroup, wit::EventResource::Other),
];

/// A cluster event in contract form.
pub fn cluster_event(e: &ClusterEvent) -> wit::ClusterEvent {
    let mut actions = wit::EventActions::empty();
    for (bit, flag) in ACTIONS {
        if e.actions & bit != 0 {
            actions |= flag;
        }
    }
    let resource = RESOURCES.iter().find(|(r, _)| *r == e.resource).map_or(wit::EventResource::Other, |(_, w)| *w);
    wit::ClusterEvent { resource, actions }
}

/// A guest's registered event, as the host's events it covers: `other` is every resource the contract has no
/// name for. One with no action registers nothing.
pub fn registered_events(e: &wit::ClusterEvent) -> impl Iterator<Item = ClusterEvent> + '_ {
    let actions = ACTIONS.iter().filter(|(_, f)| e.actions.contains(*f)).fold(0u8, |a, (bit, _)| a | bit);
    RESOURCES
        .iter()
        .filter(move |(_, w)| actions != 0 && *w == e.resource)
        .map(move |(r, _)| ClusterEvent::new(*r, actions))
}

/// An event's object in contract form; none for a kind the contract has no record for (a PodGroup or a
/// ResourceClaim reaches a guest as an `other` event without its object, as the other kinds the contract does not
/// name).
pub fn event_object(o: &EventObject) -> Option<wit::EventObject> {
    match o {
        EventObject::Pod(p) => Some(wit::EventObject::Pod(pod(p))),
        EventObject::Node(n) => Some(wit::EventObject::Node(node(n))),
        EventObject::PodGroup(_) | EventObject::ResourceClaim(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(statuses: Vec<(wit::Code, &str)>, rejected: Vec<u32>, verdicts: Vec<u32>) -> ex_filter::FilterResult {
        let statuses =
            statuses.into_iter().map(|(code, r)| wit::Status { code, reasons: vec![r.to_string()] }).collect();
        ex_filter::FilterResult { statuses, rejected, verdicts }
    }

    #[test]
    fn filter_answer_expands_to_one_status_per_node() {
        let a = answer(
            vec![(wit::Code::UnschedulableAndUnresolvable, "no label"), (wit::Code::Unschedulable, "full")],
            vec![3, 0, 1],
            vec![0, 1, 0],
        );
        // Appended after what the caller already holds.
        let mut v = vec![Status::error("earlier")];
        filter_verdicts(a, 5, &mut v).unwrap();
        let got: Vec<String> = v.iter().map(|s| if s.is_success() { "ok".into() } else { s.message() }).collect();
        assert_eq!(got, ["earlier", "full", "no label", "ok", "no label", "ok"]);
        assert_eq!(v[1].code(), Code::Unschedulable);
        assert_eq!(v[2].code(), Code::UnschedulableAndUnresolvable);
        let mut all = Vec::new();
        filter_verdicts(answer(vec![], vec![], vec![]), 4, &mut all).unwrap();
        assert!(all.len() == 4 && all.iter().all(Status::is_success));
    }

    #[test]
    fn invalid_filter_answers_say_what_is_wrong() {
        let no = |c| (c, "no");
        let cases = [
            (answer(vec![no(wit::Code::Unschedulable)], vec![0, 1], vec![0]), "listed 2 rejected nodes but 1 verdicts"),
            (answer(vec![no(wit::Code::Unschedulable)], vec![4], vec![0]), "rejected node position 4 of a batch of 4"),
            (answer(vec![no(wit::Code::Unschedulable)], vec![2, 2], vec![0, 0]), "rejected node position 2 twice"),
            (answer(vec![no(wit::Code::Unschedulable)], vec![1], vec![1]), "pointed at status 1 of 1"),
            (
                answer(vec![no(wit::Code::Unschedulable), (wit::Code::Success, "")], vec![1], vec![0]),
                "listed a success status (index 1)",
            ),
        ];
        for (a, want) in cases {
            let mut v = vec![Status::error("earlier")];
            let e = filter_verdicts(a, 4, &mut v).unwrap_err();
            assert!(e.starts_with(want), "{e}");
            assert_eq!(v.len(), 1, "nothing half-applied: {want}");
        }
    }
}
