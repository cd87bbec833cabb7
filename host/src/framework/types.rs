//! The scheduler's view of pods and nodes: `PodInfo` (a pod with what the plugins need precomputed once) and
//! `NodeInfo` (a node with the pods on it and their aggregated requests), as upstream's `framework/types.go`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Node, Pod, PodAffinityTerm, PodStatus, ResourceRequirements, Taint, Toleration,
};

use super::labels::{no_labels, node_labels, Labels, Selector};
use super::quantity::{parse_milli, parse_value};

/// Default CPU request (millicores) counted for scoring when a container sets none (upstream `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Default memory request (bytes) counted for scoring when a container sets none (upstream `DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Resource amounts: CPU in millicores, the rest in whole units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// CPU, millicores.
    pub milli_cpu: i64,
    /// Memory, bytes.
    pub memory: i64,
    /// Ephemeral storage, bytes.
    pub ephemeral_storage: i64,
    /// Pod slots (node allocatable `pods`).
    pub allowed_pod_number: i64,
    /// Extended resources and hugepages, by name, sorted.
    pub scalar: BTreeMap<String, i64>,
}

/// The resource name for CPU.
pub const CPU: &str = "cpu";
/// The resource name for memory.
pub const MEMORY: &str = "memory";
/// The resource name for ephemeral storage.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The resource name for pod slots.
pub const PODS: &str = "pods";

impl Resource {
    /// Builds a resource list from a Kubernetes `ResourceList`; a bad quantity is an error naming it.
    pub fn from_list(
        list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> Result<Resource, String> {
        let mut r = Resource::default();
        for (name, q) in list.into_iter().flatten() {
            r.set_from_quantity(name, &q.0)?;
        }
        Ok(r)
    }

    fn set_from_quantity(&mut self, name: &str, q: &str) -> Result<(), String> {
        let err = |e: super::quantity::QuantityError| format!("resource {name}: {e}");
        match name {
            CPU => self.milli_cpu = parse_milli(q).map_err(err)?,
            _ => {
                let v = parse_value(q).map_err(err)?;
                self.set(name, v);
            }
        }
        Ok(())
    }

    /// The amount of a resource by name (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    /// Sets a resource by name.
    pub fn set(&mut self, name: &str, v: i64) {
        match name {
            CPU => self.milli_cpu = v,
            MEMORY => self.memory = v,
            EPHEMERAL_STORAGE => self.ephemeral_storage = v,
            PODS => self.allowed_pod_number = v,
            _ => {
                self.scalar.insert(name.to_string(), v);
            }
        }
    }

    /// Adds another resource list.
    pub fn add(&mut self, o: &Resource) {
        self.milli_cpu += o.milli_cpu;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        self.allowed_pod_number += o.allowed_pod_number;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Subtracts another resource list.
    pub fn sub(&mut self, o: &Resource) {
        self.milli_cpu -= o.milli_cpu;
        self.memory -= o.memory;
        self.ephemeral_storage -= o.ephemeral_storage;
        self.allowed_pod_number -= o.allowed_pod_number;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Element-wise maximum with another list.
    pub fn set_max(&mut self, o: &Resource) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(o.allowed_pod_number);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// Names of all resources present with a non-zero amount (the scalar ones included).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        [(CPU, self.milli_cpu), (MEMORY, self.memory), (EPHEMERAL_STORAGE, self.ephemeral_storage)]
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .map(|(n, _)| n)
            .chain(self.scalar.keys().map(String::as_str))
    }
}

/// A pod's quality-of-service class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// Every container has equal CPU and memory requests and limits.
    Guaranteed,
    /// Some requests or limits, not Guaranteed.
    Burstable,
    /// No requests or limits at all.
    BestEffort,
}

impl QosClass {
    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Host IP ("0.0.0.0" when unset).
    pub ip: String,
    /// Protocol ("TCP" when unset).
    pub protocol: String,
    /// The port.
    pub port: i32,
}

/// A compiled pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces the term applies to (the pod's own when none is named and no namespace selector is set), each
    /// once. A list, not a set: terms name a few namespaces, and comparing a few strings is cheaper than hashing
    /// one (the check runs for every existing pod in InterPodAffinity's PreFilter and PreScore).
    pub namespaces: Vec<String>,
    /// The namespace selector (`Nothing` when unset).
    pub namespace_selector: Selector,
    /// The pod label selector.
    pub selector: Selector,
    /// The topology key.
    pub topology_key: String,
}

impl AffinityTerm {
    /// Compiles a term of a pod in namespace `ns`, as upstream's `NewAffinityTerm` (with mismatchLabelKeys and
    /// matchLabelKeys merged into the selector using the owning pod's labels).
    pub fn new(ns: &str, owner_labels: &Labels, term: &PodAffinityTerm) -> Result<AffinityTerm, String> {
        let mut selector = Selector::from_optional(term.label_selector.as_ref())?;
        if let Selector::All(reqs) = &mut selector {
            use super::labels::Requirement;
            for k in term.match_label_keys.iter().flatten() {
                if let Some(v) = owner_labels.get(k) {
                    reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
                }
            }
            for k in term.mismatch_label_keys.iter().flatten() {
                if let Some(v) = owner_labels.get(k) {
                    reqs.push(Requirement::NotIn(k.clone(), vec![v.clone()]));
                }
            }
        }
        let namespace_selector = match &term.namespace_selector {
            Some(s) => Selector::from_label_selector(s)?,
            None => Selector::Nothing,
        };
        let mut namespaces: Vec<String> = term.namespaces.iter().flatten().cloned().collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.push(ns.to_string());
        }
        Ok(AffinityTerm { namespaces, namespace_selector, selector, topology_key: term.topology_key.clone() })
    }

    /// True when `pod` (in a namespace with labels `ns_labels`) matches this term.
    pub fn matches(&self, pod: &PodInfo, ns_labels: Option<&Labels>) -> bool {
        let ns_ok = self.namespaces.contains(&pod.namespace)
            || self.namespace_selector.matches(ns_labels.unwrap_or(no_labels()));
        ns_ok && self.selector.matches(pod.labels())
    }
}

/// A compiled preferred (anti-)affinity term with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight (1–100).
    pub weight: i32,
}

/// A pod with everything plugins need computed once, when the pod enters the scheduler.
#[derive(Debug)]
pub struct PodInfo {
    /// The pod object.
    pub pod: Arc<Pod>,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (the key when present, else `ns/name`).
    pub uid: String,
    /// Priority (spec.priority, 0 when unset).
    pub priority: i32,
    /// QoS class.
    pub qos: QosClass,
    /// Effective requests, as upstream's `PodRequests` (init containers, sidecars and overhead counted).
    pub requests: Resource,
    /// CPU request counted for scoring, with the default for containers that set none.
    pub non_zero_milli_cpu: i64,
    /// Memory request counted for scoring, with the default for containers that set none.
    pub non_zero_memory: i64,
    /// CPU NodeResourcesFit's score counts for the pod: the containers' non-zero requests, pod-level requests left
    /// out. Upstream v1.34 builds Fit's scorer without the PodLevelResources gate, while its filter,
    /// BalancedAllocation and the node's totals (`non_zero_milli_cpu`) honour the gate, which is on by default.
    pub fit_score_milli_cpu: i64,
    /// Memory NodeResourcesFit's score counts for the pod (see `fit_score_milli_cpu`).
    pub fit_score_memory: i64,
    /// Host ports requested by the containers.
    pub host_ports: Vec<HostPort>,
    /// Required pod affinity terms.
    pub required_affinity_terms: Vec<AffinityTerm>,
    /// Required pod anti-affinity terms.
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Claim names of the pod's PersistentVolumeClaim volumes.
    pub pvc_names: Vec<String>,
    /// Container images.
    pub images: Vec<String>,
}

impl PodInfo {
    /// Builds the info for a pod; an invalid quantity or selector is an error naming the field.
    pub fn new(pod: Pod) -> Result<PodInfo, String> {
        Self::from_arc(Arc::new(pod))
    }

    /// Builds the info for a shared pod object.
    pub fn from_arc(pod: Arc<Pod>) -> Result<PodInfo, String> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_else(|| format!("{namespace}/{name}"));
        let spec = pod.spec.as_ref();
        let priority = spec.and_then(|s| s.priority).unwrap_or(0);
        let containers: &[Container] = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
        let init: &[Container] = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or(&[]);

        let PodRequests { requests, non_zero, fit_score } = pod_requests(
            containers,
            init,
            spec.and_then(|s| s.resources.as_ref()),
            spec.and_then(|s| s.overhead.as_ref()),
            pod.status.as_ref(),
        )?;
        let qos = qos_class(containers, init)?;

        let mut host_ports = Vec::new();
        for c in containers.iter().chain(init.iter()) {
            for p in c.ports.iter().flatten() {
                if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                    host_ports.push(HostPort {
                        ip: p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
                        protocol: p.protocol.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "TCP".into()),
                        port: hp,
                    });
                }
            }
        }

        let labels = pod.metadata.labels.as_ref().unwrap_or(no_labels());
        let aff = spec.and_then(|s| s.affinity.as_ref());
        let pa = aff.and_then(|a| a.pod_affinity.as_ref());
        let paa = aff.and_then(|a| a.pod_anti_affinity.as_ref());
        let compile = |terms: Option<&Vec<PodAffinityTerm>>, field: &str| -> Result<Vec<AffinityTerm>, String> {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(&namespace, labels, t).map_err(|e| format!("{field}: {e}")))
                .collect()
        };
        let compile_w = |terms: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>,
                         field: &str|
         -> Result<Vec<WeightedAffinityTerm>, String> {
            terms
                .into_iter()
                .flatten()
                .map(|t| {
                    Ok(WeightedAffinityTerm {
                        term: AffinityTerm::new(&namespace, labels, &t.pod_affinity_term)
                            .map_err(|e| format!("{field}: {e}"))?,
                        weight: t.weight,
                    })
                })
                .collect()
        };
        let required_affinity_terms = compile(
            pa.and_then(|p| p.required_during_scheduling_ignored_during_execution.as_ref()),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )?;
        let required_anti_affinity_terms = compile(
            paa.and_then(|p| p.required_during_scheduling_ignored_during_execution.as_ref()),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )?;
        let preferred_affinity_terms = compile_w(
            pa.and_then(|p| p.preferred_during_scheduling_ignored_during_execution.as_ref()),
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?;
        let preferred_anti_affinity_terms = compile_w(
            paa.and_then(|p| p.preferred_during_scheduling_ignored_during_execution.as_ref()),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?;
        let pvc_names = spec
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
            .collect();
        let images = containers.iter().filter_map(|c| c.image.clone()).collect();

        Ok(PodInfo {
            namespace,
            name,
            uid,
            priority,
            qos,
            requests,
            non_zero_milli_cpu: non_zero.0,
            non_zero_memory: non_zero.1,
            fit_score_milli_cpu: fit_score.0,
            fit_score_memory: fit_score.1,
            host_ports,
            required_affinity_terms,
            required_anti_affinity_terms,
            preferred_affinity_terms,
            preferred_anti_affinity_terms,
            pvc_names,
            images,
            pod,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod's labels.
    pub fn labels(&self) -> &Labels {
        self.pod.metadata.labels.as_ref().unwrap_or(no_labels())
    }

    /// The pod's tolerations.
    pub fn tolerations(&self) -> &[Toleration] {
        self.pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[])
    }

    /// `spec.schedulerName` (default-scheduler when unset).
    pub fn scheduler_name(&self) -> &str {
        self.pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler")
    }

    /// `spec.nodeName` when set.
    pub fn node_name(&self) -> Option<&str> {
        self.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|s| !s.is_empty())
    }

    /// `spec.schedulingGroup.podGroupName`: the PodGroup (in the pod's namespace) the pod is a member of
    /// (Workload API, GenericWorkload).
    pub fn pod_group(&self) -> Option<&str> {
        self.pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.as_deref().filter(|s| !s.is_empty())
    }

    /// `namespace/podGroupName` of the pod's PodGroup, when it names one (the key of `ClusterObjects::pod_groups`).
    pub fn pod_group_key(&self) -> Option<String> {
        self.pod_group().map(|g| format!("{}/{g}", self.namespace))
    }

    /// `status.nominatedNodeName` when set.
    pub fn nominated_node_name(&self) -> Option<&str> {
        self.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|s| !s.is_empty())
    }

    /// True when the pod has any pod affinity or anti-affinity (required or preferred).
    pub fn has_affinity(&self) -> bool {
        !(self.required_affinity_terms.is_empty()
            && self.required_anti_affinity_terms.is_empty()
            && self.preferred_affinity_terms.is_empty()
            && self.preferred_anti_affinity_terms.is_empty())
    }

    /// The pod's start time or creation time, in seconds since the epoch (for victim ordering); 0 when unknown.
    pub fn start_time_secs(&self) -> i64 {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(self.pod.metadata.creation_timestamp.as_ref())
            .map(|t| t.0.as_second())
            .unwrap_or(0)
    }

    /// A copy of this info for the same pod placed on `node` (the assume step).
    pub fn with_node_name(&self, node: &str) -> PodInfo {
        let mut pod = (*self.pod).clone();
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        PodInfo { pod: Arc::new(pod), ..self.clone_fields() }
    }

    fn clone_fields(&self) -> PodInfo {
        PodInfo {
            pod: self.pod.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            priority: self.priority,
            qos: self.qos,
            requests: self.requests.clone(),
            non_zero_milli_cpu: self.non_zero_milli_cpu,
            non_zero_memory: self.non_zero_memory,
            fit_score_milli_cpu: self.fit_score_milli_cpu,
            fit_score_memory: self.fit_score_memory,
            host_ports: self.host_ports.clone(),
            required_affinity_terms: self.required_affinity_terms.clone(),
            required_anti_affinity_terms: self.required_anti_affinity_terms.clone(),
            preferred_affinity_terms: self.preferred_affinity_terms.clone(),
            preferred_anti_affinity_terms: self.preferred_anti_affinity_terms.clone(),
            pvc_names: self.pvc_names.clone(),
            images: self.images.clone(),
        }
    }
}

impl Clone for PodInfo {
    fn clone(&self) -> Self {
        self.clone_fields()
    }
}

fn container_requests(c: &Container) -> Result<Resource, String> {
    let res = c.resources.as_ref();
    let mut r = Resource::from_list(res.and_then(|r| r.requests.as_ref()))
        .map_err(|e| format!("container {:?}: requests: {e}", c.name))?;
    // A limit without a request defaults the request, as the API server does.
    let limits = Resource::from_list(res.and_then(|r| r.limits.as_ref()))
        .map_err(|e| format!("container {:?}: limits: {e}", c.name))?;
    let req_list = res.and_then(|r| r.requests.as_ref());
    for (name, _) in res.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
        if !req_list.is_some_and(|l| l.contains_key(name)) {
            r.set(name, limits.get(name));
        }
    }
    Ok(r)
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Resources a pod may request at pod level (upstream `IsSupportedPodLevelResource`).
fn pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// What `pod_requests` computes.
struct PodRequests {
    /// Upstream's `PodRequests`.
    requests: Resource,
    /// Non-zero CPU and memory, for scoring and the node's totals.
    non_zero: (i64, i64),
    /// Non-zero CPU and memory of the containers alone, pod-level requests left out (NodeResourcesFit's score).
    fit_score: (i64, i64),
}

/// A pod's condition `PodResizePending` with reason `Infeasible` (upstream `IsPodResizeInfeasible`): the kubelet
/// will not grant the resized spec, so the spec no longer counts.
fn resize_infeasible(status: &PodStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Where a container's requests are read (upstream's `containerSpecRequests`, `containerAllocatedRequests` and
/// `containerActuatedRequests`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestSource {
    /// `spec.containers[].resources.requests` (a limit defaults its request).
    Spec,
    /// `status.containerStatuses[].allocatedResources`: what the kubelet admitted.
    Allocated,
    /// `status.containerStatuses[].resources.requests`: what the runtime applied.
    Actuated,
}

/// One container's requests from `source`, and whether its list names cpu and memory (else the scoring defaults
/// apply). A status without the list falls back as upstream's: actuated to allocated, both to the spec, except
/// for a pod whose resize is infeasible (nothing).
fn container_list(
    c: &Container,
    cs: Option<&ContainerStatus>,
    source: RequestSource,
    infeasible: bool,
) -> Result<(Resource, bool, bool), String> {
    let from_status = |list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>, field| {
        let r = Resource::from_list(Some(list)).map_err(|e| format!("container {:?}: {field}: {e}", c.name))?;
        Ok((r, list.contains_key(CPU), list.contains_key(MEMORY)))
    };
    let actuated = cs.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    let allocated = cs.and_then(|s| s.allocated_resources.as_ref());
    match (source, actuated, allocated) {
        (RequestSource::Actuated, Some(list), _) => from_status(list, "status resources.requests"),
        (RequestSource::Actuated | RequestSource::Allocated, _, Some(list)) => {
            from_status(list, "status allocatedResources")
        }
        (RequestSource::Actuated | RequestSource::Allocated, _, None) if infeasible => {
            Ok((Resource::default(), false, false))
        }
        _ => {
            let r = container_requests(c)?;
            let (cpu, mem) = names_cpu_memory(c);
            Ok((r, cpu, mem))
        }
    }
}

/// Containers' requests aggregated as upstream's `aggregateContainerResourcesByFn`.
#[derive(Debug, Clone, Default)]
struct Aggregate {
    requests: Resource,
    /// Non-zero CPU and memory: a container whose list does not name one counts the scoring default.
    non_zero: (i64, i64),
    /// Whether some container's list names cpu, memory.
    names: (bool, bool),
}

impl Aggregate {
    /// Resource by resource, the larger (upstream `max` of resource lists).
    fn set_max(&mut self, o: &Aggregate) {
        self.requests.set_max(&o.requests);
        self.non_zero = (self.non_zero.0.max(o.non_zero.0), self.non_zero.1.max(o.non_zero.1));
        self.names = (self.names.0 || o.names.0, self.names.1 || o.names.1);
    }
}

/// The sum of the containers and sidecars, or the largest init container with the sidecars started before it.
fn aggregate(
    containers: &[Container],
    init: &[Container],
    list: impl Fn(&Container) -> Result<(Resource, bool, bool), String>,
) -> Result<Aggregate, String> {
    let mut out = Aggregate::default();
    let non_zero = |r: &Resource, cpu: bool, mem: bool| {
        (if cpu { r.milli_cpu } else { DEFAULT_MILLI_CPU_REQUEST }, if mem { r.memory } else { DEFAULT_MEMORY_REQUEST })
    };
    for c in containers {
        let (r, cpu, mem) = list(c)?;
        let nz = non_zero(&r, cpu, mem);
        out.non_zero = (out.non_zero.0 + nz.0, out.non_zero.1 + nz.1);
        out.names = (out.names.0 || cpu, out.names.1 || mem);
        out.requests.add(&r);
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    let (mut sc_cpu, mut sc_mem, mut init_nz_cpu, mut init_nz_mem) = (0i64, 0i64, 0i64, 0i64);
    for c in init {
        let (r, cpu, mem) = list(c)?;
        let (nz_cpu, nz_mem) = non_zero(&r, cpu, mem);
        out.names = (out.names.0 || cpu, out.names.1 || mem);
        if is_sidecar(c) {
            sidecars.add(&r);
            out.requests.add(&r);
            sc_cpu += nz_cpu;
            sc_mem += nz_mem;
            out.non_zero = (out.non_zero.0 + nz_cpu, out.non_zero.1 + nz_mem);
        } else {
            let mut with_sidecars = r.clone();
            with_sidecars.add(&sidecars);
            init_max.set_max(&with_sidecars);
            init_nz_cpu = init_nz_cpu.max(nz_cpu + sc_cpu);
            init_nz_mem = init_nz_mem.max(nz_mem + sc_mem);
        }
    }
    out.requests.set_max(&init_max);
    out.non_zero = (out.non_zero.0.max(init_nz_cpu), out.non_zero.1.max(init_nz_mem));
    Ok(out)
}

/// A pod-level status list (`status.allocatedResources`, `status.resources.requests`) as an aggregate: it holds
/// the containers' totals already, and no scoring default applies to it (upstream adds none there).
fn pod_status_aggregate(
    list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    field: &str,
) -> Result<Aggregate, String> {
    let requests = Resource::from_list(Some(list)).map_err(|e| format!("{field}: {e}"))?;
    let (cpu, mem) = (list.contains_key(CPU), list.contains_key(MEMORY));
    Ok(Aggregate { non_zero: (requests.milli_cpu, requests.memory), names: (cpu, mem), requests })
}

/// Upstream's `AggregateContainerRequests` with `UseStatusResources` (InPlacePodVerticalScaling, GA): an assigned
/// pod takes, resource by resource, the most of its spec, what the kubelet allocated and what is actuated — a
/// resize counts before it is done, a shrink only once it is — and, when its resize is infeasible, not the spec.
/// The pod-level status lists stand for the containers' when both are set (InPlacePodLevelResourcesVerticalScaling,
/// beta and on since v1.36).
fn container_requests_with_status(
    containers: &[Container],
    init: &[Container],
    status: Option<&PodStatus>,
) -> Result<Aggregate, String> {
    let spec = aggregate(containers, init, |c| container_list(c, None, RequestSource::Spec, false))?;
    let Some(status) = status else { return Ok(spec) };
    let infeasible = resize_infeasible(status);
    let statuses: Vec<&ContainerStatus> =
        status.container_statuses.iter().flatten().chain(status.init_container_statuses.iter().flatten()).collect();
    let pod_actuated = status.resources.as_ref().and_then(|r| r.requests.as_ref());
    let pod_allocated = status.allocated_resources.as_ref();
    let with_status = |s: &&ContainerStatus| s.allocated_resources.is_some() || s.resources.is_some();
    if !infeasible && pod_allocated.is_none() && !statuses.iter().any(with_status) {
        // Nothing but the spec to read (every pending pod).
        return Ok(spec);
    }
    let (allocated, actuated) = match (pod_allocated, pod_actuated) {
        (Some(alloc), Some(act)) => (
            pod_status_aggregate(alloc, "status.allocatedResources")?,
            pod_status_aggregate(act, "status.resources.requests")?,
        ),
        _ => {
            // Upstream looks a container's status up by name among both lists.
            let find = |c: &Container| statuses.iter().find(|s| s.name == c.name).copied();
            (
                aggregate(containers, init, |c| container_list(c, find(c), RequestSource::Allocated, infeasible))?,
                aggregate(containers, init, |c| container_list(c, find(c), RequestSource::Actuated, infeasible))?,
            )
        }
    };
    let mut out = if infeasible {
        actuated
    } else {
        let mut m = spec;
        m.set_max(&actuated);
        m
    };
    out.set_max(&allocated);
    Ok(out)
}

/// Upstream's `PodRequests`, the non-zero CPU/memory used for scoring and the node's totals, and the non-zero
/// CPU/memory of the containers alone (NodeResourcesFit's score), status resources counted as upstream's
/// scheduler counts them (see `container_requests_with_status`).
fn pod_requests(
    containers: &[Container],
    init: &[Container],
    pod_level: Option<&ResourceRequirements>,
    overhead: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    status: Option<&PodStatus>,
) -> Result<PodRequests, String> {
    let Aggregate { requests: mut reqs, non_zero: (mut nz_cpu, mut nz_mem), names } =
        container_requests_with_status(containers, init, status)?;
    let (mut fit_cpu, mut fit_mem) = (nz_cpu, nz_mem);
    // Pod-level requests (PodLevelResources, on by default since v1.34) replace the containers' sum for CPU,
    // memory and hugepages. Scoring's defaults then apply only to a resource neither level names: one the pod
    // names is counted as requested, as upstream's `getNonMissingContainerRequests`.
    let pod_level = pod_level.and_then(|r| r.requests.as_ref()).filter(|l| l.keys().any(|k| pod_level_resource(k)));
    if let Some(spec_list) = pod_level {
        // With a pod-level status, the most of the spec (unless the resize is infeasible), the actuated and the
        // allocated pod-level requests (upstream `effectivePodLevelResources`).
        let mut lists = vec![("spec.resources.requests", spec_list)];
        if let Some(st) = status.filter(|s| s.resources.is_some()) {
            if resize_infeasible(st) {
                lists.clear();
            }
            lists.extend(
                st.resources.as_ref().and_then(|r| r.requests.as_ref()).map(|l| ("status.resources.requests", l)),
            );
            lists.extend(st.allocated_resources.as_ref().map(|l| ("status.allocatedResources", l)));
        }
        let mut effective: BTreeMap<&str, i64> = BTreeMap::new();
        for (field, list) in &lists {
            let r = Resource::from_list(Some(list)).map_err(|e| format!("{field}: {e}"))?;
            for name in list.keys().filter(|k| pod_level_resource(k)) {
                let v = effective.entry(name.as_str()).or_insert(i64::MIN);
                *v = (*v).max(r.get(name));
            }
        }
        for (name, v) in &effective {
            reqs.set(name, *v);
        }
        if names.0 || effective.contains_key(CPU) {
            nz_cpu = reqs.milli_cpu;
        }
        if names.1 || effective.contains_key(MEMORY) {
            nz_mem = reqs.memory;
        }
    }
    if let Some(o) = overhead {
        let o = Resource::from_list(Some(o)).map_err(|e| format!("spec.overhead: {e}"))?;
        nz_cpu += o.milli_cpu;
        nz_mem += o.memory;
        fit_cpu += o.milli_cpu;
        fit_mem += o.memory;
        reqs.add(&o);
    }
    Ok(PodRequests { requests: reqs, non_zero: (nz_cpu, nz_mem), fit_score: (fit_cpu, fit_mem) })
}

/// Whether a container names cpu and memory among its requests or limits (a limit defaults the request).
fn names_cpu_memory(c: &Container) -> (bool, bool) {
    let res = c.resources.as_ref();
    let has = |n: &str| {
        res.and_then(|r| r.requests.as_ref()).is_some_and(|l| l.contains_key(n))
            || res.and_then(|r| r.limits.as_ref()).is_some_and(|l| l.contains_key(n))
    };
    (has(CPU), has(MEMORY))
}

fn qos_class(containers: &[Container], init: &[Container]) -> Result<QosClass, String> {
    let mut any = false;
    let mut guaranteed = true;
    for c in containers.iter().chain(init.iter()) {
        let res = c.resources.as_ref();
        let req = Resource::from_list(res.and_then(|r| r.requests.as_ref()))?;
        let lim = Resource::from_list(res.and_then(|r| r.limits.as_ref()))?;
        let lim_list = res.and_then(|r| r.limits.as_ref());
        let req_list = res.and_then(|r| r.requests.as_ref());
        for n in [CPU, MEMORY] {
            let has_req = req_list.is_some_and(|l| l.contains_key(n)) && req.get(n) != 0;
            let has_lim = lim_list.is_some_and(|l| l.contains_key(n)) && lim.get(n) != 0;
            any |= has_req || has_lim;
            // Guaranteed needs a limit for both, and a request (if set) equal to it.
            if !has_lim || (has_req && req.get(n) != lim.get(n)) {
                guaranteed = false;
            }
        }
    }
    Ok(if !any {
        QosClass::BestEffort
    } else if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    })
}

/// Host ports in use on a node: ip → protocol/port pairs.
#[derive(Debug, Clone, Default)]
pub struct HostPortInfo {
    ports: HashMap<String, HashSet<(String, i32)>>,
}

impl HostPortInfo {
    /// Records a port.
    pub fn add(&mut self, p: &HostPort) {
        self.ports.entry(p.ip.clone()).or_default().insert((p.protocol.clone(), p.port));
    }

    /// Forgets a port.
    pub fn remove(&mut self, p: &HostPort) {
        if let Some(s) = self.ports.get_mut(&p.ip) {
            s.remove(&(p.protocol.clone(), p.port));
            if s.is_empty() {
                self.ports.remove(&p.ip);
            }
        }
    }

    /// True when the port conflicts with one in use: same protocol and port, and the same IP or either is 0.0.0.0.
    pub fn check_conflict(&self, p: &HostPort) -> bool {
        let key = (p.protocol.clone(), p.port);
        if p.ip == "0.0.0.0" {
            return self.ports.values().any(|s| s.contains(&key));
        }
        [p.ip.as_str(), "0.0.0.0"].iter().any(|ip| self.ports.get(*ip).is_some_and(|s| s.contains(&key)))
    }

    /// True when no port is in use.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}

/// An image as the cluster knows it (upstream `ImageStateSummary`): its cluster-wide size — the size the first node
/// that reported the name gave — and how many nodes have it (for ImageLocality's spread factor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageStateSummary {
    /// Image size in bytes, cluster-wide (not necessarily this node's own report).
    pub size: i64,
    /// Number of nodes that have the image.
    pub num_nodes: usize,
}

/// A node and the pods assigned to it, with aggregated requests.
///
/// `repr(C)` keeps what every batch reads first (the node, its generation and id, its name) together at the start,
/// so the Wasm host's per-node id and generation check shares a cache line with what native plugins touch anyway.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct NodeInfo {
    /// The node object.
    pub node: Arc<Node>,
    /// Stamped by the cache with a process-wide counter on every change, so (node, generation) names one state of
    /// the node. 0 marks a copy changed outside the cache (a preemption what-if): never assume a guest has seen it.
    pub generation: u64,
    /// Stamped like `generation`, but only when the node object itself changes (labels, taints, allocatable), not
    /// when pods come or go: a Wasm guest that ignores usage is sent the node again only then. 0: unknown.
    pub node_generation: u64,
    /// The node's number within its cache: stable while the node exists, reused after it is removed. Wasm guests
    /// address nodes by it (their node-table slot).
    pub id: u32,
    /// Node name.
    pub name: String,
    /// Pods on the node (bound or assumed).
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods on the node with any pod affinity or anti-affinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods on the node with required anti-affinity.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// Host ports in use.
    pub used_ports: HostPortInfo,
    /// Sum of the pods' requests.
    pub requested: Resource,
    /// Sum of the pods' requests with defaults for unset CPU/memory (for scoring).
    pub non_zero_requested: Resource,
    /// The node's allocatable resources.
    pub allocatable: Resource,
    /// Images on the node, with their cluster-wide size and spread (the node's own sizes until the cache fills
    /// them in with the next snapshot).
    pub image_states: rustc_hash::FxHashMap<String, ImageStateSummary>,
}

impl NodeInfo {
    /// Builds the info for a node with no pods; a bad allocatable quantity is an error naming it.
    pub fn new(node: Arc<Node>) -> Result<NodeInfo, String> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let allocatable = Resource::from_list(status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref())))
            .map_err(|e| format!("status.allocatable: {e}"))?;
        let mut image_states = rustc_hash::FxHashMap::default();
        for img in status.and_then(|s| s.images.as_ref()).into_iter().flatten() {
            for n in img.names.iter().flatten() {
                // A name listed twice keeps its first size, as upstream's addNodeImageStates.
                image_states
                    .entry(n.clone())
                    .or_insert(ImageStateSummary { size: img.size_bytes.unwrap_or(0), num_nodes: 1 });
            }
        }
        Ok(NodeInfo {
            node,
            name,
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            used_ports: HostPortInfo::default(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            image_states,
            generation: 0,
            node_generation: 0,
            id: 0,
        })
    }

    /// Replaces the node object (labels, taints, allocatable) keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) -> Result<(), String> {
        let fresh = NodeInfo::new(node)?;
        self.node = fresh.node;
        self.allocatable = fresh.allocatable;
        self.image_states = fresh.image_states;
        self.name = fresh.name;
        self.generation = 0;
        self.node_generation = 0;
        Ok(())
    }

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        node_labels(&self.node)
    }

    /// The node's taints.
    pub fn taints(&self) -> &[Taint] {
        self.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
    }

    /// True when `spec.unschedulable` is set.
    pub fn unschedulable(&self) -> bool {
        self.node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
    }

    /// Adds a pod and its requests.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.milli_cpu += pod.non_zero_milli_cpu;
        self.non_zero_requested.memory += pod.non_zero_memory;
        for p in &pod.host_ports {
            self.used_ports.add(p);
        }
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
        self.generation = 0;
    }

    /// Removes a pod by UID; returns false when it was not there.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.uid == uid) else { return false };
        let pod = self.pods.swap_remove(i);
        self.pods_with_affinity.retain(|p| p.uid != uid);
        self.pods_with_required_anti_affinity.retain(|p| p.uid != uid);
        self.requested.sub(&pod.requests);
        self.non_zero_requested.milli_cpu -= pod.non_zero_milli_cpu;
        self.non_zero_requested.memory -= pod.non_zero_memory;
        for p in &pod.host_ports {
            self.used_ports.remove(p);
        }
        // Another pod may use the same port: rebuild from what is left.
        if !pod.host_ports.is_empty() {
            self.used_ports = HostPortInfo::default();
            for p in self.pods.iter().flat_map(|p| p.host_ports.iter()) {
                self.used_ports.add(p);
            }
        }
        self.generation = 0;
        true
    }
}

/// A pod waiting in the scheduling queue, with its attempt history.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod_info: Arc<PodInfo>,
    /// When the pod was last added to the queue (ns on the scheduler's clock); QueueSort's last tie-breaker.
    pub timestamp: u64,
    /// When the pod first entered the queue.
    pub initial_attempt_timestamp: Option<u64>,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// Plugins that rejected the pod in its last attempt (decides which cluster events move it back).
    pub unschedulable_plugins: HashSet<String>,
    /// The PreEnqueue plugin that gated the pod, if one did.
    pub gated_by: Option<String>,
    /// QueueSort's key, computed when the pod last entered activeQ (`QueueSortPlugin::sort_key`).
    pub sort_key: Option<Arc<[u8]>>,
    /// The pod's last move out of unschedulable was the periodic flush (upstream's `WasFlushedFromUnschedulable`),
    /// not an event: counted when such a pod is bound, as a hint that an event or queueing hint was missed.
    pub flushed_from_unschedulable: bool,
}

impl QueuedPodInfo {
    /// A fresh entry.
    pub fn new(pod_info: Arc<PodInfo>, now: u64) -> QueuedPodInfo {
        QueuedPodInfo {
            pod_info,
            timestamp: now,
            initial_attempt_timestamp: None,
            attempts: 0,
            unschedulable_plugins: HashSet::new(),
            gated_by: None,
            sort_key: None,
            flushed_from_unschedulable: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> PodInfo {
        PodInfo::new(serde_json::from_value(v).unwrap()).unwrap()
    }

    #[test]
    fn requests_sum_containers_max_init_and_sidecars() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "200m"}}}
            ],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "1", "memory": "10Mi"}}},
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}
            ],
            "overhead": {"cpu": "10m"}
        }}));
        // containers 300m + sidecar 50m = 350m; init 1000m > 350m; + overhead 10m.
        assert_eq!(p.requests.milli_cpu, 1010);
        assert_eq!(p.requests.memory, 100 * 1024 * 1024);
        assert_eq!(p.qos, QosClass::Burstable);
    }

    /// PodLevelResources (beta, on by default in v1.34): `spec.resources.requests` replace the containers' sum
    /// for CPU and memory, in the filter's requests and in scoring's non-zero requests alike; overhead still adds.
    #[test]
    fn pod_level_requests_replace_the_containers_sum() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"cpu": "2", "memory": "3Gi"}},
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "b"}
            ],
            "overhead": {"cpu": "10m"}
        }}));
        assert_eq!((p.requests.milli_cpu, p.requests.memory), (2010, 3 << 30));
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (2010, 3 << 30));
        // NodeResourcesFit's score still counts the containers: 500m + the default 100m for b, + overhead.
        assert_eq!((p.fit_score_milli_cpu, p.fit_score_memory), (610, (1 << 30) + DEFAULT_MEMORY_REQUEST));

        // Memory only at pod level: CPU is the containers' sum, and a container naming no CPU counts the
        // scoring default only when no container names CPU at all.
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"memory": "3Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}, {"name": "b"}]
        }}));
        assert_eq!((p.requests.milli_cpu, p.requests.memory), (500, 3 << 30));
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (500, 3 << 30));
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"memory": "3Gi"}},
            "containers": [{"name": "a"}, {"name": "b"}]
        }}));
        assert_eq!((p.requests.milli_cpu, p.non_zero_milli_cpu), (0, 2 * DEFAULT_MILLI_CPU_REQUEST));

        // Only unsupported names at pod level: the containers decide.
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"ephemeral-storage": "1Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}]
        }}));
        assert_eq!((p.requests.milli_cpu, p.requests.ephemeral_storage), (500, 0));
    }

    #[test]
    fn an_in_place_resize_counts_as_upstream_counts_it() {
        // One container asks for 1 CPU in its spec; its status says what the kubelet allocated and actuated.
        let with_status = |status: serde_json::Value| {
            pod(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
                "status": status}))
        };
        let cpu = |p: &PodInfo| (p.requests.milli_cpu, p.non_zero_milli_cpu, p.fit_score_milli_cpu);
        let cs = |alloc: serde_json::Value, actual: serde_json::Value| {
            json!({"containerStatuses": [{"name": "a", "image": "i", "imageID": "",
            "ready": true, "restartCount": 0, "allocatedResources": alloc, "resources": {"requests": actual}}]})
        };
        // A shrink from 3 CPUs written to the spec but not yet allocated or actuated still holds 3.
        assert_eq!(cpu(&with_status(cs(json!({"cpu": "3"}), json!({"cpu": "3"})))), (3000, 3000, 3000));
        // Allocated but not yet actuated: the larger counts.
        assert_eq!(cpu(&with_status(cs(json!({"cpu": "1"}), json!({"cpu": "2"})))), (2000, 2000, 2000));
        // A grow to 1 CPU not allocated yet (deferred): the spec counts.
        assert_eq!(cpu(&with_status(cs(json!({"cpu": "500m"}), json!({"cpu": "500m"})))), (1000, 1000, 1000));
        // Infeasible: the spec no longer counts, what runs does.
        let mut infeasible = cs(json!({"cpu": "500m"}), json!({"cpu": "500m"}));
        infeasible["conditions"] = json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
        assert_eq!(cpu(&with_status(infeasible.clone())), (500, 500, 500));
        // Deferred is only pending: the spec counts.
        infeasible["conditions"][0]["reason"] = json!("Deferred");
        assert_eq!(cpu(&with_status(infeasible)), (1000, 1000, 1000));
        // No container status: the spec (every pending pod).
        assert_eq!(cpu(&with_status(json!({"phase": "Pending"}))), (1000, 1000, 1000));
        // An infeasible resize with nothing in the status counts nothing, as upstream; memory absent from the
        // status lists then counts the scoring default only for the non-zero totals.
        let none = with_status(
            json!({"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}),
        );
        assert_eq!(
            (cpu(&none), none.requests.memory, none.non_zero_memory),
            ((0, 100, 100), 0, DEFAULT_MEMORY_REQUEST)
        );
        // Pod-level status lists, both set, stand for the containers' (here larger than the spec's).
        let pod_level =
            with_status(json!({"allocatedResources": {"cpu": "4"}, "resources": {"requests": {"cpu": "2"}}}));
        assert_eq!(cpu(&pod_level), (4000, 4000, 4000));
    }

    #[test]
    fn pod_level_requests_count_their_status_too() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "1500m"}}}));
        assert_eq!((p.requests.milli_cpu, p.non_zero_milli_cpu), (2000, 2000));
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "resources": {"requests": {"cpu": "3"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "1"},
                "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}}));
        assert_eq!(p.requests.milli_cpu, 2000, "an infeasible pod-level resize: not the spec's 3");
    }

    #[test]
    fn non_zero_defaults_and_qos_table() {
        let be = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}));
        assert_eq!(be.qos, QosClass::BestEffort);
        assert_eq!(be.non_zero_milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(be.non_zero_memory, DEFAULT_MEMORY_REQUEST);
        let g = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}));
        assert_eq!(g.qos, QosClass::Guaranteed);
        assert_eq!(g.requests.milli_cpu, 1000, "limits default requests");
        let b = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}}));
        assert_eq!(b.qos, QosClass::Burstable);
    }

    #[test]
    fn bad_quantity_names_the_container() {
        let err = PodInfo::new(
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}}))
            .unwrap(),
        )
        .unwrap_err();
        assert!(err.contains("container \"a\"") && err.contains("lots"), "{err}");
    }

    #[test]
    fn node_info_add_remove_pod() {
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}),
        )
        .unwrap();
        let mut ni = NodeInfo::new(Arc::new(node)).unwrap();
        assert_eq!(ni.allocatable.milli_cpu, 2000);
        assert_eq!(ni.allocatable.allowed_pod_number, 110);
        let p = Arc::new(pod(json!({"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}], "resources": {"requests": {"cpu": "500m"}}}]}})));
        ni.add_pod(p.clone());
        assert_eq!(ni.requested.milli_cpu, 500);
        assert!(ni.used_ports.check_conflict(&HostPort { ip: "10.0.0.1".into(), protocol: "TCP".into(), port: 8080 }));
        assert!(ni.remove_pod("u1"));
        assert_eq!(ni.requested.milli_cpu, 0);
        assert!(ni.used_ports.is_empty());
        assert!(!ni.remove_pod("u1"));
    }
}
