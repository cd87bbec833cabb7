//! Reads a cluster from multi-document Kubernetes YAML (what a user would `kubectl apply`): Nodes, Pods,
//! PriorityClasses, PodDisruptionBudgets, Namespaces, Services, ReplicaSets, StatefulSets,
//! ReplicationControllers, PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
//! CSIStorageCapacities, ResourceClaims, ResourceClaimTemplates, DeviceClasses, ResourceSlices, DeviceTaintRules,
//! PodGroups (scheduling.k8s.io/v1beta1: used with `simulate --feature-gates=GenericWorkload=true`),
//! and `List`s of them.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

use super::validate;
use super::workloads::{self, Workloads};
use crate::yaml::{self, YamlError};

use crate::framework::PodInfo;
use crate::framework::{ClusterObjects, PolicyObject};
use k8s_openapi::api::scheduling::v1beta1::PodGroup;

/// The kinds the simulator reads.
pub const SUPPORTED_KINDS: &[&str] = &[
    "Node",
    "Pod",
    "PriorityClass",
    "PodDisruptionBudget",
    "Namespace",
    "Service",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "SchedulingPolicy",
    "ClusterSchedulingPolicy",
    "PodGroup",
    "Deployment",
    "DaemonSet",
    "Job",
    "CronJob",
    "List",
];

/// The kinds that live outside namespaces.
const CLUSTER_SCOPED: &[&str] = &[
    "Node",
    "PriorityClass",
    "Namespace",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "ClusterSchedulingPolicy",
];

/// A cluster file that cannot be used; the message names the file, the document index and the field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub struct ClusterFileError {
    /// The file.
    pub file: String,
    /// Zero-based index of the YAML document (and `.items[i]` inside a List); empty for the file as a whole.
    pub index: String,
    /// ` (Kind ns/name)` when known.
    pub object: String,
    /// What is wrong, with the field path.
    pub message: String,
}

impl std::fmt::Display for ClusterFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A name or key in the file may hold a line break (which the API server would refuse); the error saying so
        // stays on one line.
        let (object, message) = (yaml::escape_controls(&self.object), yaml::escape_controls(&self.message));
        if self.index.is_empty() {
            write!(f, "{}: {message}", self.file)
        } else {
            write!(f, "{}: document {}{object}: {message}", self.file, self.index)
        }
    }
}

/// A cluster as read from a file.
#[derive(Debug, Default, Clone)]
pub struct ClusterFile {
    /// Nodes, in file order.
    pub nodes: Vec<Node>,
    /// Pods bound to nodes (running), in file order, priority resolved.
    pub bound_pods: Vec<PodInfo>,
    /// Pods without a node, in file order, priority resolved.
    pub pending_pods: Vec<PodInfo>,
    /// Everything else plugins read.
    pub objects: ClusterObjects,
    /// What was read but not used, one line each: kinds the scheduler does not read (with counts), CronJobs.
    pub skipped: Vec<String>,
}

/// A SchedulingPolicy or ClusterSchedulingPolicy as the API server would store it: the group's version, a spec the
/// CRD's schema takes (unknown fields refused); generation 1 and a UID made up when the file gives none.
fn policy(v: &serde_json::Value, namespace: Option<String>) -> Result<PolicyObject, String> {
    const API_VERSION: &str = "scheduling.kube-wasm-scheduler.io/v1alpha1";
    let api_version = v.get("apiVersion").and_then(|a| a.as_str()).unwrap_or_default();
    if api_version != API_VERSION {
        return Err(format!("apiVersion: {api_version:?}: want {API_VERSION}"));
    }
    if let Some(k) = v
        .as_object()
        .and_then(|o| o.keys().find(|k| !["apiVersion", "kind", "metadata", "spec", "status"].contains(&k.as_str())))
    {
        return Err(format!("{k}: unknown field"));
    }
    let spec = v.get("spec").cloned().ok_or("spec: Required value")?;
    crate::tenancy::decode_spec(&spec).map_err(|e| e.to_string())?;
    let name = v.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
    let uid = v.pointer("/metadata/uid").and_then(|n| n.as_str()).map(str::to_string);
    Ok(PolicyObject {
        uid: uid.unwrap_or_else(|| format!("{}-{name}", namespace.as_deref().unwrap_or("cluster"))),
        generation: v.pointer("/metadata/generation").and_then(|g| g.as_i64()).unwrap_or(1),
        namespace,
        name,
        spec,
    })
}

/// Reads a cluster file: UTF-8 YAML, within [`crate::yaml`]'s size and nesting limits.
pub fn load(path: &Path) -> Result<ClusterFile, ClusterFileError> {
    let file = path.display().to_string();
    let whole =
        |message: String| ClusterFileError { file: file.clone(), index: String::new(), object: String::new(), message };
    let bytes = std::fs::read(path).map_err(|e| whole(e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| whole(format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to())))?;
    parse(&file, &text)
}

struct Doc {
    index: String,
    value: serde_json::Value,
}

/// Parses cluster YAML text; `file` is used in messages.
pub fn parse(file: &str, text: &str) -> Result<ClusterFile, ClusterFileError> {
    let err = |index: &str, object: String, message: String| ClusterFileError {
        file: file.to_string(),
        index: index.to_string(),
        object,
        message,
    };
    let values = yaml::documents(file, text).map_err(|e| match e {
        YamlError::Invalid { index, source, .. } => {
            err(&index.to_string(), String::new(), format!("not valid YAML: {source}"))
        }
        YamlError::TooLarge { .. } => err("", String::new(), format!("larger than {} MiB", yaml::MAX_BYTES >> 20)),
        YamlError::TooDeep { line, .. } => {
            err("", String::new(), format!("nesting deeper than {} (line {line})", yaml::MAX_DEPTH))
        }
    })?;
    let mut docs = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        if v.is_null() {
            continue;
        }
        let json: serde_json::Value = serde_json::to_value(&v)
            .map_err(|e| err(&i.to_string(), String::new(), format!("cannot be read as an object: {e}")))?;
        if json.get("kind").and_then(|k| k.as_str()) != Some("List") {
            docs.push(Doc { index: i.to_string(), value: json });
            continue;
        }
        let list_label = object_label(&json);
        for key in json.as_object().into_iter().flat_map(|o| o.keys()) {
            if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "items") {
                return Err(err(&i.to_string(), list_label, format!("{key}: unknown field")));
            }
        }
        let items = match json.get("items") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(items)) => items.clone(),
            Some(_) => return Err(err(&i.to_string(), list_label, "items: must be a sequence of objects".into())),
        };
        for (j, item) in items.into_iter().enumerate() {
            let index = format!("{i}.items[{j}]");
            if item.get("kind").and_then(|k| k.as_str()) == Some("List") {
                return Err(err(&index, object_label(&item), "kind: a List cannot be an item of a List".into()));
            }
            docs.push(Doc { index, value: item });
        }
    }

    let mut out = ClusterFile::default();
    let mut priority_classes: Vec<(String, PriorityClass)> = Vec::new();
    let mut pods: Vec<(String, Pod)> = Vec::new();
    let mut seen: HashSet<(String, String, String)> = HashSet::new();
    let mut skipped_kinds: std::collections::BTreeMap<String, usize> = Default::default();
    let mut work = Workloads::default();
    // `Kind ns/name` of each workload → its document, for errors in the pods it makes.
    let mut workload_docs: HashMap<String, String> = HashMap::new();
    for d in docs {
        let kind = d.value.get("kind").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let name = d.value.pointer("/metadata/name").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let ns = d.value.pointer("/metadata/namespace").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let label = object_label(&d.value);
        if kind.is_empty() {
            return Err(err(&d.index, String::new(), "kind: missing".into()));
        }
        if d.value.get("apiVersion").and_then(|k| k.as_str()).unwrap_or("").is_empty() {
            return Err(err(&d.index, label, "apiVersion: missing".into()));
        }
        if !SUPPORTED_KINDS.contains(&kind.as_str()) {
            // A dump of a whole cluster holds ConfigMaps, Secrets, ServiceAccounts and custom resources: the
            // scheduler reads none of them, so they are counted and left out rather than refused.
            *skipped_kinds.entry(kind).or_insert(0usize) += 1;
            continue;
        }
        if name.is_empty() {
            return Err(err(&d.index, label, "metadata.name: missing".into()));
        }
        let namespaced = !CLUSTER_SCOPED.contains(&kind.as_str());
        let ns_eff = if namespaced && ns.is_empty() { "default".to_string() } else { ns.clone() };
        if !seen.insert((kind.clone(), ns_eff.clone(), name.clone())) {
            return Err(err(
                &d.index,
                label,
                format!("duplicate {kind} {}{name}", if namespaced { format!("{ns_eff}/") } else { String::new() }),
            ));
        }
        let v = d.value;
        // Decodes the document, refuses fields the type does not know, and applies the API server's validation.
        macro_rules! decode {
            ($t:ty) => {{
                let o: $t = decode::<$t>(&v).map_err(|m| err(&d.index, label.clone(), m))?;
                validate::object_meta(&kind, &o.metadata).map_err(|m| err(&d.index, label.clone(), m))?;
                o
            }};
            ($t:ty, $check:path) => {{
                let o = decode!($t);
                $check(&o).map_err(|m| err(&d.index, label.clone(), m))?;
                o
            }};
        }
        match kind.as_str() {
            "Node" => out.nodes.push(decode!(Node, validate::node)),
            "Pod" => {
                let mut p: Pod = decode!(Pod, validate::pod);
                if p.spec.as_ref().is_none_or(|s| s.containers.is_empty()) {
                    return Err(err(&d.index, label, "spec.containers: a pod needs at least one container".into()));
                }
                p.metadata.namespace = Some(ns_eff.clone());
                pods.push((d.index.clone(), p));
            }
            "PriorityClass" => {
                let c: PriorityClass = decode!(PriorityClass, validate::priority_class);
                // The Priority admission plugin allows one global default.
                if c.global_default == Some(true) {
                    if let Some((_, other)) = priority_classes.iter().find(|(_, o)| o.global_default == Some(true)) {
                        let other = other.metadata.name.as_deref().unwrap_or_default();
                        return Err(err(
                            &d.index,
                            label,
                            format!("globalDefault: Forbidden: PriorityClass {other} is already marked as default. Only one default can exist"),
                        ));
                    }
                }
                priority_classes.push((d.index.clone(), c));
            }
            "PodDisruptionBudget" => {
                let mut p: PodDisruptionBudget = decode!(PodDisruptionBudget, validate::pdb);
                p.metadata.namespace = Some(ns_eff);
                out.objects.pdbs.push(Arc::new(p));
            }
            "Namespace" => {
                let n: Namespace = decode!(Namespace);
                out.objects.namespaces.insert(name, n.metadata.labels.unwrap_or_default());
            }
            "Service" => {
                let mut s: Service = decode!(Service);
                s.metadata.namespace = Some(ns_eff);
                out.objects.services.push(Arc::new(s));
            }
            "ReplicaSet" => {
                let mut s: ReplicaSet = decode!(ReplicaSet);
                s.metadata.namespace = Some(ns_eff.clone());
                workload_docs.insert(format!("ReplicaSet {ns_eff}/{name}"), d.index.clone());
                work.replica_sets.push(s.clone());
                out.objects.replica_sets.push(Arc::new(s));
            }
            "StatefulSet" => {
                let mut s: StatefulSet = decode!(StatefulSet);
                s.metadata.namespace = Some(ns_eff.clone());
                workload_docs.insert(format!("StatefulSet {ns_eff}/{name}"), d.index.clone());
                work.stateful_sets.push(s.clone());
                out.objects.stateful_sets.push(Arc::new(s));
            }
            "Deployment" => {
                let mut o: Deployment = decode!(Deployment);
                o.metadata.namespace = Some(ns_eff.clone());
                workload_docs.insert(format!("Deployment {ns_eff}/{name}"), d.index.clone());
                work.deployments.push(o);
            }
            "DaemonSet" => {
                let mut o: DaemonSet = decode!(DaemonSet);
                o.metadata.namespace = Some(ns_eff.clone());
                workload_docs.insert(format!("DaemonSet {ns_eff}/{name}"), d.index.clone());
                work.daemon_sets.push(o);
            }
            "Job" => {
                let mut o: Job = decode!(Job);
                o.metadata.namespace = Some(ns_eff.clone());
                workload_docs.insert(format!("Job {ns_eff}/{name}"), d.index.clone());
                work.jobs.push(o);
            }
            "CronJob" => {
                let _: CronJob = decode!(CronJob);
                out.skipped.push(format!("CronJob {ns_eff}/{name}: not expanded (no schedule runs in a simulation)"));
            }
            "ReplicationController" => {
                let mut s: ReplicationController = decode!(ReplicationController);
                s.metadata.namespace = Some(ns_eff);
                out.objects.replication_controllers.push(Arc::new(s));
            }
            "PersistentVolumeClaim" => {
                let mut s: PersistentVolumeClaim = decode!(PersistentVolumeClaim);
                s.metadata.namespace = Some(ns_eff.clone());
                // A volume's claimRef names the claim by UID too, so a hand-written claim gets one, as the API
                // server would give it.
                s.metadata.uid.get_or_insert_with(|| format!("{ns_eff}-{name}"));
                out.objects.pvcs.insert(format!("{ns_eff}/{name}"), Arc::new(s));
            }
            "PersistentVolume" => {
                out.objects.pvs.insert(name, Arc::new(decode!(PersistentVolume)));
            }
            "StorageClass" => {
                out.objects.storage_classes.insert(name, Arc::new(decode!(StorageClass)));
            }
            "CSINode" => {
                out.objects.csi_nodes.insert(name, Arc::new(decode!(CSINode)));
            }
            "CSIDriver" => {
                out.objects.csi_drivers.insert(name, Arc::new(decode!(CSIDriver)));
            }
            "CSIStorageCapacity" => {
                let mut c: CSIStorageCapacity = decode!(CSIStorageCapacity);
                c.metadata.namespace = Some(ns_eff);
                out.objects.csi_storage_capacities.push(Arc::new(c));
            }
            "ResourceClaim" => {
                let mut c: ResourceClaim = decode!(ResourceClaim);
                c.metadata.namespace = Some(ns_eff.clone());
                out.objects.resource_claims.insert(format!("{ns_eff}/{name}"), Arc::new(c));
            }
            "ResourceClaimTemplate" => {
                let mut t: ResourceClaimTemplate = decode!(ResourceClaimTemplate);
                t.metadata.namespace = Some(ns_eff.clone());
                out.objects.resource_claim_templates.insert(format!("{ns_eff}/{name}"), Arc::new(t));
            }
            "DeviceClass" => {
                out.objects.device_classes.insert(name, Arc::new(decode!(DeviceClass)));
            }
            "ResourceSlice" => {
                out.objects.resource_slices.push(Arc::new(decode!(ResourceSlice)));
            }
            "DeviceTaintRule" => {
                out.objects.device_taint_rules.push(Arc::new(decode!(DeviceTaintRule)));
            }
            "PodGroup" => {
                let mut g: PodGroup = decode!(PodGroup);
                g.metadata.namespace = Some(ns_eff.clone());
                out.objects.pod_groups.insert(format!("{ns_eff}/{name}"), Arc::new(g));
            }
            "SchedulingPolicy" | "ClusterSchedulingPolicy" => {
                let p = policy(&v, namespaced.then_some(ns_eff)).map_err(|m| err(&d.index, label, m))?;
                out.objects.scheduling_policies.push(Arc::new(p));
            }
            // SUPPORTED_KINDS holds no other kind, and a List's items were checked not to be Lists.
            _ => return Err(err(&d.index, label, format!("kind: {kind:?} cannot be read here"))),
        }
    }

    if !skipped_kinds.is_empty() {
        let kinds: Vec<String> = skipped_kinds.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        out.skipped.push(format!("not read by the scheduler, left out: {}", kinds.join(", ")));
    }

    // The controllers' work: the pods (and a Deployment's ReplicaSet, a StatefulSet's claims) workloads lack.
    let file_pods: Vec<Pod> = pods.iter().map(|(_, p)| p.clone()).collect();
    let claim_keys: Vec<String> = out.objects.pvcs.keys().cloned().collect();
    let expanded = workloads::expand(&work, &file_pods, &out.nodes, &claim_keys);
    for (owner, pod) in expanded.pods {
        let index = workload_docs.get(&owner).cloned().unwrap_or_default();
        let label = format!(" ({owner})");
        validate::pod(&pod).map_err(|m| err(&index, label.clone(), format!("spec.template: {m}")))?;
        if pod.spec.as_ref().is_none_or(|s| s.containers.is_empty()) {
            return Err(err(&index, label, "spec.template.spec.containers: a pod needs at least one container".into()));
        }
        pods.push((index, pod));
    }
    out.objects.replica_sets.extend(expanded.replica_sets.into_iter().map(Arc::new));
    for mut c in expanded.claims {
        let key = format!(
            "{}/{}",
            c.metadata.namespace.as_deref().unwrap_or("default"),
            c.metadata.name.as_deref().unwrap_or("")
        );
        c.metadata.uid.get_or_insert_with(|| key.replace('/', "-"));
        out.objects.pvcs.insert(key, Arc::new(c));
    }

    // The Priority admission plugin's work: resolve priorityClassName, default from a globalDefault class.
    let classes: HashMap<String, &PriorityClass> =
        priority_classes.iter().map(|(_, c)| (c.metadata.name.clone().unwrap_or_default(), c)).collect();
    let global_default = priority_classes.iter().find(|(_, c)| c.global_default == Some(true)).map(|(_, c)| c.clone());
    let node_names: HashSet<String> = out.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    for (index, mut pod) in pods {
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let label = format!(" (Pod {key})");
        let spec = pod.spec.get_or_insert_with(Default::default);
        let class = match spec.priority_class_name.as_deref() {
            Some(n) if !n.is_empty() => match classes.get(n) {
                Some(c) => Some((*c).clone()),
                None if n == "system-cluster-critical" || n == "system-node-critical" => None,
                None => {
                    return Err(err(
                        &index,
                        label,
                        format!("spec.priorityClassName: no PriorityClass {n:?} in this file"),
                    ))
                }
            },
            _ => global_default.clone(),
        };
        if spec.priority.is_none() {
            spec.priority = Some(match (&class, spec.priority_class_name.as_deref()) {
                (Some(c), _) => c.value.unwrap_or(0),
                (None, Some("system-cluster-critical")) => 2_000_000_000,
                (None, Some("system-node-critical")) => 2_000_001_000,
                _ => 0,
            });
        }
        if spec.preemption_policy.is_none() {
            spec.preemption_policy = class.as_ref().and_then(|c| c.preemption_policy.clone());
        }
        let bound = spec.node_name.clone().filter(|n| !n.is_empty());
        if let Some(n) = &bound {
            if !node_names.contains(n) {
                return Err(err(&index, label, format!("spec.nodeName: {n:?} is not a Node in this file")));
            }
        }
        if bound.is_none() {
            make_template_claims(&mut pod, &mut out.objects);
        }
        let info = PodInfo::new(pod).map_err(|m| err(&index, label.clone(), m))?;
        if bound.is_some() {
            out.bound_pods.push(info);
        } else {
            out.pending_pods.push(info);
        }
    }
    for (i, n) in out.nodes.iter().enumerate() {
        crate::framework::NodeInfo::new(std::sync::Arc::new(n.clone()))
            .map_err(|m| err(&i.to_string(), format!(" (Node {})", n.metadata.name.as_deref().unwrap_or("")), m))?;
    }
    Ok(out)
}

/// The resource claim controller's work for a pending pod: each `spec.resourceClaims` entry made from a template
/// that the file has, and that the pod's status does not name yet, gets a ResourceClaim `<pod>-<entry>` (upstream
/// adds five random characters) owned by the pod, named in `status.resourceClaimStatuses`. A missing template
/// leaves the pod waiting for its claim, as the controller would.
fn make_template_claims(pod: &mut Pod, objects: &mut ClusterObjects) {
    use k8s_openapi::api::core::v1::PodResourceClaimStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    // The uid PodInfo gives a pod without one, which the claim's owner reference must match.
    let pod_uid = pod.metadata.uid.clone().unwrap_or_else(|| format!("{ns}/{pod_name}"));
    let entries = pod.spec.as_ref().and_then(|s| s.resource_claims.clone()).unwrap_or_default();
    for entry in entries {
        let Some(template) = &entry.resource_claim_template_name else { continue };
        let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or(&[]);
        if statuses.iter().any(|s| s.name == entry.name) {
            continue;
        }
        let Some(t) = objects.resource_claim_templates.get(&format!("{ns}/{template}")) else { continue };
        let Some(t) = t.spec.as_ref() else { continue };
        let name = format!("{pod_name}-{}", entry.name);
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                uid: Some(format!("{ns}/{name}")),
                labels: t.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: t.metadata.as_ref().and_then(|m| m.annotations.clone()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod_name.clone(),
                    uid: pod_uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: t.spec.clone(),
            status: None,
        };
        objects.resource_claims.insert(format!("{ns}/{name}"), Arc::new(claim));
        pod.status
            .get_or_insert_with(Default::default)
            .resource_claim_statuses
            .get_or_insert_with(Vec::new)
            .push(PodResourceClaimStatus { name: entry.name.clone(), resource_claim_name: Some(name) });
    }
}

/// Decodes a document into its Kubernetes type, refusing fields the type does not know.
fn decode<T: DeserializeOwned + Serialize>(v: &serde_json::Value) -> Result<T, String> {
    let o: T = serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let message =
            if path == "." || path.is_empty() { e.inner().to_string() } else { format!("{path}: {}", e.inner()) };
        // A map key in the path (a label's) may hold a line break; the error stays one line.
        crate::yaml::escape_controls(&message)
    })?;
    let back = serde_json::to_value(&o).map_err(|e| e.to_string())?;
    validate::unknown_fields(v, &back)?;
    Ok(o)
}

/// ` (Kind ns/name)`, ` (Kind name)` or ` (Kind)`, as far as the document says.
fn object_label(v: &serde_json::Value) -> String {
    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let name = v.pointer("/metadata/name").and_then(|k| k.as_str()).unwrap_or("");
    let ns = v.pointer("/metadata/namespace").and_then(|k| k.as_str()).unwrap_or("");
    match (kind, name, ns) {
        ("", _, _) => String::new(),
        (k, "", _) => format!(" ({k})"),
        (k, n, "") => format!(" ({k} {n})"),
        (k, n, ns) => format!(" ({k} {ns}/{n})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kinds_and_resolves_priority() {
        let c = parse(
            "c.yaml",
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '2', memory: 2Gi, pods: '10'}}\n---\n\
             apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {priorityClassName: high, containers: [{name: c}]}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {nodeName: n1, containers: [{name: c}]}\n",
        )
        .unwrap();
        assert_eq!(c.nodes.len(), 1);
        assert_eq!(c.pending_pods.len(), 1);
        assert_eq!(c.pending_pods[0].priority, 1000);
        assert_eq!(c.bound_pods.len(), 1);
    }

    /// A name holding a line break is refused on one line that shows the break escaped, as the property test of
    /// mutated examples found (a PersistentVolumeClaim named "0\ndefault").
    #[test]
    fn a_name_with_a_line_break_is_refused_on_one_line() {
        let e = parse("c.yaml", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: \"0\\ndefault\"}\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(r"c.yaml: document 0 (PersistentVolumeClaim 0\ndefault"), "{e}");
        assert!(!e.contains('\n'), "{e:?}");
    }

    #[test]
    fn kinds_the_scheduler_does_not_read_are_left_out_with_a_note() {
        let c = parse(
            "c.yaml",
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n",
        )
        .unwrap();
        assert_eq!(c.nodes.len(), 1);
        assert_eq!(c.skipped, ["not read by the scheduler, left out: ConfigMap (2), Gadget (1)"]);
    }

    #[test]
    fn workloads_become_pods_with_priority_and_owners() {
        let c = parse(
            "c.yaml",
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2, selector: {matchLabels: {a: b}}, \
             template: {metadata: {labels: {a: b}}, spec: {priorityClassName: high, containers: [{name: c}]}}}\n",
        )
        .unwrap();
        assert_eq!(c.pending_pods.len(), 2);
        assert!(c.pending_pods.iter().all(|p| p.priority == 1000));
        assert_eq!(c.objects.replica_sets.len(), 1, "the Deployment's ReplicaSet, for default spreading");
        let bad = parse(
            "c.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {matchLabels: {a: b}}, \
             template: {metadata: {labels: {a: b}}, spec: {containers: []}}}\n",
        )
        .unwrap_err();
        assert_eq!(bad.to_string(), "c.yaml: document 0 (Deployment default/d): spec.template.spec.containers: a pod needs at least one container");
    }

    #[test]
    fn errors_name_document_and_field() {
        let cases = [
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, ports: [{containerPort: abc}]}]}\n", "document 0 (Pod a): spec.containers[0].ports[0].containerPort"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {nodeName: nope, containers: [{name: c}]}\n", "spec.nodeName: \"nope\" is not a Node"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n", "document 0 (Pod a): spec.containers[0].resources.requests[cpu]: invalid quantity \"lots\""),
            ("kind: Node\nmetadata: {name: n}\n", "document 0 (Node n): apiVersion: missing"),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n", "document 1 (Node n): duplicate Node n"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {priorityClassName: gold, containers: [{name: c}]}\n", "spec.priorityClassName: no PriorityClass \"gold\""),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: x}}\n", "document 0 (Node n): status.allocatable[cpu]: invalid quantity \"x\""),
        ];
        for (text, want) in cases {
            let e = parse("c.yaml", text).unwrap_err().to_string();
            assert!(e.starts_with("c.yaml: "), "{e}");
            assert!(e.contains(want), "got {e:?}, want {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
    /// A pod with one container and `spec` extra (flow-style YAML fields), for the refusal table.
    fn pod(spec: &str) -> String {
        let containers = if spec.starts_with("containers:") { "" } else { "containers: [{name: c}], " };
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec: {{{containers}{spec}}}\n")
    }

    fn node(status: &str) -> String {
        format!("apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus: {{{status}}}\n")
    }

    /// One row per defect the input probe found: each was accepted (or panicked) and the API server refuses it.
    #[test]
    fn refuses_what_the_api_server_refuses() {
        let pref = |w: i32| {
            pod(&format!("affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: {w}, preference: {{matchExpressions: [{{key: a, operator: Exists}}]}}}}]}}}}"))
        };
        let pod_pref = |kind: &str, w: i32| {
            pod(&format!("affinity: {{{kind}: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: {w}, podAffinityTerm: {{topologyKey: zone, labelSelector: {{matchLabels: {{a: b}}}}}}}}]}}}}"))
        };
        let req_affinity = |expr: &str| {
            pod(&format!("affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{expr}]}}}}}}"))
        };
        let spread = |c: &str| pod(&format!("topologySpreadConstraints: [{c}]"));
        let pdb = |spec: &str| {
            format!("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: b}}\nspec: {{{spec}}}\n")
        };
        let pc = |name: &str, rest: &str| {
            format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\n{rest}\n---\n")
        };
        let rows: Vec<(&str, String, &str)> = vec![
            ("list_in_list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  metadata: {name: inner}\n  items: []\n".into(), "document 0.items[0] (List inner): kind: a List cannot be an item of a List"),
            ("list_items_not_a_sequence", "apiVersion: v1\nkind: List\nitems: {a: 1}\n".into(), "document 0 (List): items: must be a sequence of objects"),
            ("negative_request", pod("containers: [{name: c, resources: {requests: {cpu: '-1'}}}]"), "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"),
            ("negative_limit", pod("containers: [{name: c, resources: {limits: {memory: -1Gi}}}]"), "spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0"),
            ("negative_overhead", pod("overhead: {cpu: -100m}"), "spec.overhead[cpu]: Invalid value: \"-100m\": must be greater than or equal to 0"),
            ("negative_allocatable", node("allocatable: {cpu: '-4'}"), "status.allocatable[cpu]: Invalid value: \"-4\": must be greater than or equal to 0"),
            ("negative_capacity", node("capacity: {memory: -1Gi}"), "status.capacity[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0"),
            ("request_above_limit", pod("containers: [{name: c, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]"), "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"),
            ("fractional_pods", node("allocatable: {pods: '1.5'}"), "status.allocatable[pods]: Invalid value: \"1500m\": must be an integer"),
            ("preferred_node_affinity_weight_zero", pref(0), "preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"),
            ("preferred_node_affinity_weight_negative", pref(-5), "preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: -5: must be in the range 1-100"),
            ("preferred_node_affinity_weight_over_100", pref(101), "preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100"),
            ("pod_affinity_weight_negative", pod_pref("podAffinity", -1), "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: -1: must be in the range 1-100"),
            ("pod_anti_affinity_weight_over_100", pod_pref("podAntiAffinity", 1000), "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 1000: must be in the range 1-100"),
            ("object_name_not_dns_subdomain", "apiVersion: v1\nkind: Node\nmetadata: {name: Node_1}\n".into(), "metadata.name: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain"),
            ("namespace_not_dns_label", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a.b}\nspec: {containers: [{name: c}]}\n".into(), "metadata.namespace: Invalid value: \"a.b\": a lowercase RFC 1123 label"),
            ("label_key_invalid", "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {'-bad': x}}\n".into(), "metadata.labels: Invalid value: \"-bad\""),
            ("label_value_invalid", "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {a: 'b c'}}\n".into(), "metadata.labels[a]: Invalid value: \"b c\""),
            ("node_selector_requirement_bad_operator", req_affinity("{matchExpressions: [{key: a, operator: Like, values: [b]}]}"), "matchExpressions[0].operator: Invalid value: \"Like\": not a valid selector operator"),
            ("node_selector_in_without_values", req_affinity("{matchExpressions: [{key: a, operator: In}]}"), "matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
            ("node_selector_exists_with_values", req_affinity("{matchExpressions: [{key: a, operator: Exists, values: [b]}]}"), "matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            ("node_selector_gt_two_values", req_affinity("{matchExpressions: [{key: a, operator: Gt, values: ['1', '2']}]}"), "matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
            ("node_field_selector_bad_key", req_affinity("{matchFields: [{key: metadata.labels, operator: In, values: [n]}]}"), "matchFields[0].key: Invalid value: \"metadata.labels\": not a valid field selector key"),
            ("node_field_selector_two_values", req_affinity("{matchFields: [{key: metadata.name, operator: In, values: [a, b]}]}"), "matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
            ("label_selector_bad_operator", pod_pref("podAffinity", 1).replace("matchLabels: {a: b}", "matchExpressions: [{key: a, operator: Gt, values: ['1']}]"), "labelSelector.matchExpressions[0].operator: Invalid value: \"Gt\": not a valid selector operator"),
            ("toleration_bad_operator", pod("tolerations: [{key: a, operator: Equals, value: b}]"), "spec.tolerations[0].operator: Unsupported value: \"Equals\""),
            ("toleration_bad_effect", pod("tolerations: [{key: a, operator: Exists, effect: NoSchedul}]"), "spec.tolerations[0].effect: Unsupported value: \"NoSchedul\""),
            ("taint_bad_effect", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: a, effect: Never}]}\n".into(), "spec.taints[0].effect: Unsupported value: \"Never\""),
            ("spread_max_skew_zero", spread("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"), "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"),
            ("spread_empty_topology_key", spread("{maxSkew: 1, topologyKey: '', whenUnsatisfiable: DoNotSchedule}"), "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty"),
            ("spread_bad_when_unsatisfiable", spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Never}"), "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Never\""),
            ("spread_min_domains_zero", spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 0}"), "spec.topologySpreadConstraints[0].minDomains: Invalid value: 0: must be greater than zero"),
            ("spread_min_domains_with_schedule_anyway", spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}"), "spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
            ("pdb_both_min_and_max", pdb("minAvailable: 1, maxUnavailable: 1"), "spec: Invalid value: \"object\": minAvailable and maxUnavailable cannot be both set"),
            ("pdb_negative_min_available", pdb("minAvailable: -1"), "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
            ("pdb_percent_over_100", pdb("maxUnavailable: 120%"), "spec.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"),
            ("pdb_bad_percent", pdb("minAvailable: ten%"), "spec.minAvailable: Invalid value: \"ten%\": a valid percent string must be a numeric string followed by an ending '%'"),
            ("host_port_out_of_range", pod("containers: [{name: c, ports: [{containerPort: 80, hostPort: 70000}]}]"), "spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
            ("container_port_zero", pod("containers: [{name: c, ports: [{containerPort: 0}]}]"), "spec.containers[0].ports[0].containerPort: Required value"),
            ("container_port_out_of_range", pod("containers: [{name: c, ports: [{containerPort: 65536}]}]"), "spec.containers[0].ports[0].containerPort: Invalid value: 65536: must be between 1 and 65535, inclusive"),
            ("duplicate_container_name", pod("containers: [{name: c}, {name: c}]"), "spec.containers[1].name: Duplicate value: \"c\""),
            ("container_name_not_dns_label", pod("containers: [{name: Web}]"), "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label"),
            ("two_global_default_priority_classes", pc("a", "value: 1\nglobalDefault: true") + &pc("b", "value: 2\nglobalDefault: true"), "document 1 (PriorityClass b): globalDefault: Forbidden: PriorityClass a is already marked as default. Only one default can exist"),
            ("priority_class_value_too_high", pc("huge", "value: 2000000001"), "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"),
            ("unknown_field", pod("nodeSelecter: {a: b}"), "spec.nodeSelecter: unknown field"),
            ("byte_order_mark", format!("\u{feff}{}", node("")), "BOM_OK"),
        ];
        let mut failures = Vec::new();
        for (name, text, want) in rows {
            let got = std::panic::catch_unwind(|| parse("c.yaml", &text));
            let ok = match &got {
                Ok(Ok(_)) => want == "BOM_OK",
                Ok(Err(e)) => {
                    let e = e.to_string();
                    e.starts_with("c.yaml: document ") && e.contains(want) && !e.contains('\n')
                }
                Err(_) => false,
            };
            if !ok {
                let got = match got {
                    Ok(Ok(_)) => "loaded".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "panicked".to_string(),
                };
                failures.push(format!("{name}: got {got:?}, want {want:?}"));
            }
        }
        assert!(failures.is_empty(), "{} rows fail:\n{}", failures.len(), failures.join("\n"));
    }
}
