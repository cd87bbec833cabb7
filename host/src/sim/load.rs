//! Reads a cluster from multi-document Kubernetes YAML (what a user would `kubectl apply`): Nodes, Pods,
//! PriorityClasses, PodDisruptionBudgets, Namespaces, Services, ReplicaSets, StatefulSets,
//! ReplicationControllers, PersistentVolumeClaims, PersistentVolumes, and `List`s of them.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::framework::ClusterObjects;
use crate::framework::PodInfo;

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
    "List",
];

/// A cluster file that cannot be used; the message names the file, the document index and the field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{file}: document {index}{object}: {message}")]
pub struct ClusterFileError {
    /// The file.
    pub file: String,
    /// Zero-based index of the YAML document (and `.items[i]` inside a List).
    pub index: String,
    /// ` (Kind ns/name)` when known.
    pub object: String,
    /// What is wrong, with the field path.
    pub message: String,
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
}

/// Reads a cluster file.
pub fn load(path: &Path) -> Result<ClusterFile, ClusterFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ClusterFileError {
        file: file.clone(),
        index: "-".into(),
        object: String::new(),
        message: e.to_string(),
    })?;
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
    let mut docs = Vec::new();
    for (i, d) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = <serde_yaml::Value as serde::Deserialize>::deserialize(d)
            .map_err(|e| err(&i.to_string(), String::new(), format!("not valid YAML: {e}")))?;
        if v.is_null() {
            continue;
        }
        let json: serde_json::Value = serde_json::to_value(&v)
            .map_err(|e| err(&i.to_string(), String::new(), format!("cannot be read as an object: {e}")))?;
        if json.get("kind").and_then(|k| k.as_str()) == Some("List") {
            let items = json.get("items").and_then(|i| i.as_array()).cloned().unwrap_or_default();
            for (j, item) in items.into_iter().enumerate() {
                docs.push(Doc { index: format!("{i}.items[{j}]"), value: item });
            }
        } else {
            docs.push(Doc { index: i.to_string(), value: json });
        }
    }

    let mut out = ClusterFile::default();
    let mut priority_classes: Vec<(String, PriorityClass)> = Vec::new();
    let mut pods: Vec<(String, Pod)> = Vec::new();
    let mut seen: HashSet<(String, String, String)> = HashSet::new();
    for d in docs {
        let kind = d.value.get("kind").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let name = d.value.pointer("/metadata/name").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let ns = d.value.pointer("/metadata/namespace").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let label = if name.is_empty() {
            format!(" ({kind})")
        } else if ns.is_empty() {
            format!(" ({kind} {name})")
        } else {
            format!(" ({kind} {ns}/{name})")
        };
        if kind.is_empty() {
            return Err(err(&d.index, String::new(), "kind: missing".into()));
        }
        if d.value.get("apiVersion").and_then(|k| k.as_str()).unwrap_or("").is_empty() {
            return Err(err(&d.index, label, "apiVersion: missing".into()));
        }
        if !SUPPORTED_KINDS.contains(&kind.as_str()) {
            return Err(err(
                &d.index,
                label,
                format!("kind: {kind:?} is not supported (supported: {})", SUPPORTED_KINDS.join(", ")),
            ));
        }
        if name.is_empty() {
            return Err(err(&d.index, label, "metadata.name: missing".into()));
        }
        let namespaced = !matches!(kind.as_str(), "Node" | "PriorityClass" | "Namespace" | "PersistentVolume");
        let ns_eff = if namespaced && ns.is_empty() { "default".to_string() } else { ns.clone() };
        if !seen.insert((kind.clone(), ns_eff.clone(), name.clone())) {
            return Err(err(
                &d.index,
                label,
                format!("duplicate {kind} {}{name}", if namespaced { format!("{ns_eff}/") } else { String::new() }),
            ));
        }
        let v = d.value;
        macro_rules! decode {
            ($t:ty) => {
                decode::<$t>(v).map_err(|m| err(&d.index, label.clone(), m))?
            };
        }
        match kind.as_str() {
            "Node" => out.nodes.push(decode!(Node)),
            "Pod" => {
                let mut p: Pod = decode!(Pod);
                if p.spec.as_ref().is_none_or(|s| s.containers.is_empty()) {
                    return Err(err(&d.index, label, "spec.containers: a pod needs at least one container".into()));
                }
                p.metadata.namespace = Some(ns_eff.clone());
                pods.push((d.index.clone(), p));
            }
            "PriorityClass" => priority_classes.push((d.index.clone(), decode!(PriorityClass))),
            "PodDisruptionBudget" => {
                let mut p: PodDisruptionBudget = decode!(PodDisruptionBudget);
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
                s.metadata.namespace = Some(ns_eff);
                out.objects.replica_sets.push(Arc::new(s));
            }
            "StatefulSet" => {
                let mut s: StatefulSet = decode!(StatefulSet);
                s.metadata.namespace = Some(ns_eff);
                out.objects.stateful_sets.push(Arc::new(s));
            }
            "ReplicationController" => {
                let mut s: ReplicationController = decode!(ReplicationController);
                s.metadata.namespace = Some(ns_eff);
                out.objects.replication_controllers.push(Arc::new(s));
            }
            "PersistentVolumeClaim" => {
                let mut s: PersistentVolumeClaim = decode!(PersistentVolumeClaim);
                s.metadata.namespace = Some(ns_eff.clone());
                out.objects.pvcs.insert(format!("{ns_eff}/{name}"), Arc::new(s));
            }
            "PersistentVolume" => {
                out.objects.pvs.insert(name, Arc::new(decode!(PersistentVolume)));
            }
            _ => unreachable!("kinds checked above"),
        }
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
                (Some(c), _) => c.value,
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

fn decode<T: DeserializeOwned>(v: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
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

    #[test]
    fn errors_name_document_and_field() {
        let cases = [
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, ports: [{containerPort: abc}]}]}\n", "document 0 (Pod a): spec.containers[0].ports[0].containerPort"),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", "document 1 (Gadget g): kind: \"Gadget\" is not supported"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {nodeName: nope, containers: [{name: c}]}\n", "spec.nodeName: \"nope\" is not a Node"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n", "document 0 (Pod default/a): container \"c\": requests: resource cpu: invalid quantity \"lots\""),
            ("kind: Node\nmetadata: {name: n}\n", "document 0 (Node n): apiVersion: missing"),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n", "document 1 (Node n): duplicate Node n"),
            ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {priorityClassName: gold, containers: [{name: c}]}\n", "spec.priorityClassName: no PriorityClass \"gold\""),
            ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: x}}\n", "document 0 (Node n): status.allocatable: resource cpu: invalid quantity \"x\""),
        ];
        for (text, want) in cases {
            let e = parse("c.yaml", text).unwrap_err().to_string();
            assert!(e.starts_with("c.yaml: "), "{e}");
            assert!(e.contains(want), "got {e:?}, want {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
