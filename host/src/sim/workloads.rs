//! Workloads expanded into the pods their controllers would create, so a cluster file may hold Deployments,
//! ReplicaSets, StatefulSets, DaemonSets and Jobs (a `kubectl get -o yaml` dump) instead of pods written out.
//!
//! A workload gets only the pods it lacks: pods already in the file that it controls (by owner reference) count
//! towards its replicas, as its controller counts them. What each controller does, as far as scheduling sees it:
//! - Deployment: a ReplicaSet `<name>-<hash>` of the template (unless the file has one the Deployment controls),
//!   which then creates the pods.
//! - ReplicaSet: `spec.replicas` (default 1) pods `<name>-<suffix>`.
//! - StatefulSet: pods `<name>-<ordinal>` for ordinals `0..replicas` (from `spec.ordinals.start`), each with the
//!   claims of `volumeClaimTemplates` (`<template>-<pod>`) created when missing, as the StatefulSet controller does.
//! - DaemonSet: one pod per node it should run on (the template's node selector and required node affinity match
//!   the node, and the node's NoSchedule and NoExecute taints are tolerated, counting the tolerations the DaemonSet
//!   controller adds), pinned to its node by required node affinity on `metadata.name`, as the controller pins them.
//! - Job: `parallelism` (default 1) pods, no more than the completions still to go.
//!
//! CronJobs are not expanded (no schedule runs in a simulation); they are reported with the kinds left out.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;

use crate::framework::labels::{node_labels, CompiledNodeSelector};

/// The workloads of a cluster file, in file order within each kind.
#[derive(Debug, Default, Clone)]
pub struct Workloads {
    /// Deployments.
    pub deployments: Vec<Deployment>,
    /// ReplicaSets (also kept as objects: default topology spreading selects by them).
    pub replica_sets: Vec<ReplicaSet>,
    /// StatefulSets (also kept as objects).
    pub stateful_sets: Vec<StatefulSet>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSet>,
    /// Jobs.
    pub jobs: Vec<Job>,
}

/// What the controllers create.
#[derive(Debug, Default)]
pub struct Expanded {
    /// New pods, each with the workload that made it (`Kind ns/name`).
    pub pods: Vec<(String, Pod)>,
    /// ReplicaSets made for Deployments.
    pub replica_sets: Vec<ReplicaSet>,
    /// Claims made from StatefulSets' volumeClaimTemplates.
    pub claims: Vec<PersistentVolumeClaim>,
}

/// The characters the ReplicaSet and generateName suffixes use upstream (no vowels, no look-alikes).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A deterministic suffix of `n` characters from `seed` (upstream's are random; a simulation must repeat).
fn suffix(seed: &str, n: usize) -> String {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (0..n)
        .map(|_| {
            let c = ALPHANUMS[(h % ALPHANUMS.len() as u64) as usize] as char;
            h = (h / ALPHANUMS.len() as u64) ^ h.rotate_left(17);
            c
        })
        .collect()
}

fn owner(kind: &str, api_version: &str, meta: &ObjectMeta) -> OwnerReference {
    let name = meta.name.clone().unwrap_or_default();
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        uid: meta.uid.clone().unwrap_or_else(|| format!("{}-{name}", meta.namespace.as_deref().unwrap_or("default"))),
        name,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `o` is the controller reference to `meta`.
fn controlled_by(refs: Option<&Vec<OwnerReference>>, kind: &str, meta: &ObjectMeta) -> bool {
    refs.into_iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == kind
            && r.name == meta.name.as_deref().unwrap_or("")
            && meta.uid.as_deref().is_none_or(|u| r.uid == u)
    })
}

/// A pod of a template, named and owned.
fn pod_of(template: &PodTemplateSpec, name: String, namespace: &str, owner: OwnerReference) -> Pod {
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.name = Some(name);
    meta.namespace = Some(namespace.to_string());
    meta.owner_references = Some(vec![owner]);
    Pod { metadata: meta, spec: template.spec.clone(), status: None }
}

fn ns(meta: &ObjectMeta) -> String {
    meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into())
}

fn label(kind: &str, meta: &ObjectMeta) -> String {
    format!("{kind} {}/{}", ns(meta), meta.name.as_deref().unwrap_or(""))
}

/// The tolerations the DaemonSet controller adds to its pods (upstream `AddOrUpdateDaemonPodTolerations`).
fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let t = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut v = vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        v.push(t("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    v
}

/// Whether a toleration tolerates a taint (upstream `ToleratesTaint`).
fn tolerates(t: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != effect) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => t.key.as_deref().is_none_or(|k| k.is_empty() || k == key),
        _ => t.key.as_deref() == Some(key) && t.value.as_deref().unwrap_or("") == value,
    }
}

/// Whether the DaemonSet controller runs the pod on the node (upstream `NodeShouldRunDaemonPod`).
fn should_run(pod: &Pod, node: &Node) -> bool {
    let spec = pod.spec.clone().unwrap_or_default();
    let labels = node_labels(node);
    let name = node.metadata.name.as_deref().unwrap_or("");
    if spec.node_selector.iter().flatten().any(|(k, v)| labels.get(k) != Some(v)) {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(sel) = required {
        if CompiledNodeSelector::new(sel).is_ok_and(|s| !s.matches(name, labels)) {
            return false;
        }
    }
    let tolerations = spec.tolerations.unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    taints.iter().filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute").all(|taint| {
        tolerations.iter().any(|t| tolerates(t, &taint.key, taint.value.as_deref().unwrap_or(""), &taint.effect))
    })
}

/// The node a pending daemon pod is pinned to (its first required term's `metadata.name` field).
fn pinned_to(pod: &Pod) -> Option<&str> {
    let na = pod.spec.as_ref()?.affinity.as_ref()?.node_affinity.as_ref()?;
    let term = na.required_during_scheduling_ignored_during_execution.as_ref()?.node_selector_terms.first()?;
    let field = term.match_fields.as_ref()?.iter().find(|f| f.key == "metadata.name" && f.operator == "In")?;
    field.values.as_ref()?.first().map(String::as_str)
}

/// Pins a daemon pod to its node, as the DaemonSet controller does: required node affinity on the node's name
/// (replacing any matchFields term on it, keeping the rest).
fn pin_to_node(pod: &mut Pod, node: &str) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    let na = affinity.node_affinity.get_or_insert_with(Default::default);
    let term = serde_json::from_value(serde_json::json!({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}
    ]}))
    .expect("a node selector term");
    na.required_during_scheduling_ignored_during_execution =
        Some(k8s_openapi::api::core::v1::NodeSelector { node_selector_terms: vec![term] });
}

/// The pods each workload lacks; `pods` are the file's pods (bound and pending).
pub fn expand(w: &Workloads, pods: &[Pod], nodes: &[Node], claims: &[String]) -> Expanded {
    let mut out = Expanded::default();
    let owned = |kind: &str, meta: &ObjectMeta| {
        pods.iter().filter(|p| controlled_by(p.metadata.owner_references.as_ref(), kind, meta)).count()
    };
    let mut replica_sets: Vec<ReplicaSet> = w.replica_sets.clone();
    // A ReplicaSet made here answers for its pods as its Deployment (the object in the file).
    let mut made_by: std::collections::HashMap<String, String> = Default::default();
    for d in &w.deployments {
        if w.replica_sets
            .iter()
            .any(|rs| controlled_by(rs.metadata.owner_references.as_ref(), "Deployment", &d.metadata))
        {
            continue;
        }
        let spec = d.spec.clone();
        let name = d.metadata.name.clone().unwrap_or_default();
        let hash = suffix(&format!("{}/{name}", ns(&d.metadata)), 10);
        let mut template = spec.template.clone();
        let labels = template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(BTreeMap::new);
        labels.insert("pod-template-hash".into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector.match_labels.get_or_insert_with(BTreeMap::new).insert("pod-template-hash".into(), hash.clone());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{hash}")),
                namespace: Some(ns(&d.metadata)),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                owner_references: Some(vec![owner("Deployment", "apps/v1", &d.metadata)]),
                ..Default::default()
            },
            spec: k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(spec.replicas.unwrap_or(1)),
                selector,
                template: Some(template),
                ..Default::default()
            },
            status: None,
        };
        made_by.insert(label("ReplicaSet", &rs.metadata), label("Deployment", &d.metadata));
        out.replica_sets.push(rs.clone());
        replica_sets.push(rs);
    }
    for rs in &replica_sets {
        let spec = rs.spec.clone();
        let Some(template) = &spec.template else { continue };
        let name = rs.metadata.name.clone().unwrap_or_default();
        let have = owned("ReplicaSet", &rs.metadata);
        for i in have..spec.replicas.unwrap_or(1).max(0) as usize {
            let pod_name = format!("{name}-{}", suffix(&format!("{}/{name}/{i}", ns(&rs.metadata)), 5));
            let pod = pod_of(template, pod_name, &ns(&rs.metadata), owner("ReplicaSet", "apps/v1", &rs.metadata));
            let by = label("ReplicaSet", &rs.metadata);
            out.pods.push((made_by.get(&by).cloned().unwrap_or(by), pod));
        }
    }
    for s in &w.stateful_sets {
        let spec = s.spec.clone();
        let name = s.metadata.name.clone().unwrap_or_default();
        let namespace = ns(&s.metadata);
        let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
        for ordinal in start..start + spec.replicas.unwrap_or(1).max(0) {
            let pod_name = format!("{name}-{ordinal}");
            if pods.iter().any(|p| p.metadata.name.as_deref() == Some(&pod_name) && ns(&p.metadata) == namespace) {
                continue;
            }
            let mut pod =
                pod_of(&spec.template, pod_name.clone(), &namespace, owner("StatefulSet", "apps/v1", &s.metadata));
            let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.insert("statefulset.kubernetes.io/pod-name".into(), pod_name.clone());
            labels.insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string());
            let pod_spec = pod.spec.get_or_insert_with(Default::default);
            if pod_spec.hostname.is_none() {
                pod_spec.hostname = Some(pod_name.clone());
            }
            for t in spec.volume_claim_templates.iter().flatten() {
                let template = t.metadata.name.clone().unwrap_or_default();
                let claim = format!("{template}-{pod_name}");
                let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
                if !volumes.iter().any(|v| v.name == template) {
                    volumes.push(
                        serde_json::from_value(serde_json::json!({
                            "name": template, "persistentVolumeClaim": {"claimName": claim}
                        }))
                        .expect("a volume"),
                    );
                }
                if !claims.contains(&format!("{namespace}/{claim}")) {
                    let mut c = t.clone();
                    c.metadata.name = Some(claim.clone());
                    c.metadata.namespace = Some(namespace.clone());
                    let l = c.metadata.labels.get_or_insert_with(BTreeMap::new);
                    for (k, v) in spec.selector.match_labels.iter().flatten() {
                        l.insert(k.clone(), v.clone());
                    }
                    c.status = None;
                    out.claims.push(c);
                }
            }
            out.pods.push((label("StatefulSet", &s.metadata), pod));
        }
    }
    for d in &w.daemon_sets {
        let spec = d.spec.clone();
        let name = d.metadata.name.clone().unwrap_or_default();
        let namespace = ns(&d.metadata);
        let mut template = spec.template.clone();
        let pod_spec = template.spec.get_or_insert_with(Default::default);
        let host_network = pod_spec.host_network == Some(true);
        let tolerations = pod_spec.tolerations.get_or_insert_with(Vec::new);
        for t in daemon_tolerations(host_network) {
            if !tolerations.iter().any(|x| x.key == t.key && x.effect == t.effect) {
                tolerations.push(t);
            }
        }
        let probe = pod_of(&template, String::new(), &namespace, owner("DaemonSet", "apps/v1", &d.metadata));
        for node in nodes {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let has_one = pods.iter().any(|p| {
                controlled_by(p.metadata.owner_references.as_ref(), "DaemonSet", &d.metadata)
                    && (p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name.as_str())
                        || pinned_to(p) == Some(node_name.as_str()))
            });
            if has_one || !should_run(&probe, node) {
                continue;
            }
            let pod_name = format!("{name}-{}", suffix(&format!("{namespace}/{name}/{node_name}"), 5));
            let mut pod = pod_of(&template, pod_name, &namespace, owner("DaemonSet", "apps/v1", &d.metadata));
            pin_to_node(&mut pod, &node_name);
            out.pods.push((label("DaemonSet", &d.metadata), pod));
        }
    }
    for j in &w.jobs {
        let spec = j.spec.clone().unwrap_or_default();
        let status = j.status.clone().unwrap_or_default();
        let name = j.metadata.name.clone().unwrap_or_default();
        let namespace = ns(&j.metadata);
        let succeeded = status.succeeded.unwrap_or(0);
        let left = spec.completions.map_or(i32::MAX, |c| (c - succeeded).max(0));
        let want = spec.parallelism.unwrap_or(1).min(left).max(0) as usize;
        let have = owned("Job", &j.metadata);
        for i in have..want {
            let pod_name = format!("{name}-{}", suffix(&format!("{namespace}/{name}/{i}"), 5));
            let mut pod = pod_of(&spec.template, pod_name, &namespace, owner("Job", "batch/v1", &j.metadata));
            let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.insert("job-name".into(), name.clone());
            labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
            out.pods.push((label("Job", &j.metadata), pod));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn template(labels: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    }

    fn names(e: &Expanded) -> Vec<String> {
        e.pods.iter().map(|(_, p)| p.metadata.name.clone().unwrap()).collect()
    }

    #[test]
    fn suffixes_repeat_and_use_upstream_characters() {
        assert_eq!(suffix("a", 5), suffix("a", 5));
        assert_ne!(suffix("a", 5), suffix("b", 5));
        assert!(suffix("x", 10).bytes().all(|b| ALPHANUMS.contains(&b)));
    }

    #[test]
    fn a_deployment_makes_a_replica_set_that_makes_the_missing_pods() {
        let d: Deployment = from(json!({"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template(json!({"app": "web"}))}}));
        let w = Workloads { deployments: vec![d], ..Default::default() };
        let e = expand(&w, &[], &[], &[]);
        assert_eq!(e.replica_sets.len(), 1);
        let rs = &e.replica_sets[0];
        assert!(rs.metadata.name.as_deref().unwrap().starts_with("web-"));
        assert_eq!(e.pods.len(), 3);
        let p = &e.pods[0].1;
        assert_eq!(p.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(p.metadata.owner_references.as_ref().unwrap()[0].kind, "ReplicaSet");
        assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "web");
        assert!(p.metadata.labels.as_ref().unwrap().contains_key("pod-template-hash"));
        // A pod already there and owned counts.
        let mut existing = e.pods[0].1.clone();
        existing.metadata.name = Some("web-running".into());
        let w2 = Workloads { replica_sets: e.replica_sets.clone(), ..Default::default() };
        assert_eq!(expand(&w2, &[existing], &[], &[]).pods.len(), 2);
    }

    #[test]
    fn a_stateful_set_makes_ordinal_pods_and_their_claims() {
        let s: StatefulSet = from(json!({"metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": template(json!({"app": "db"})),
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}}));
        let running: Pod = from(
            json!({"metadata": {"name": "db-0", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}),
        );
        let w = Workloads { stateful_sets: vec![s], ..Default::default() };
        let e = expand(&w, &[running], &[], &["default/data-db-1".to_string()]);
        assert_eq!(names(&e), ["db-1", "db-2"]);
        let claims: Vec<&str> = e.claims.iter().map(|c| c.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(claims, ["data-db-2"], "data-db-1 is in the file already");
        let v = &e.pods[1].1.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert_eq!(v.persistent_volume_claim.as_ref().unwrap().claim_name, "data-db-2");
    }

    #[test]
    fn a_daemon_set_runs_where_it_should_pinned_to_each_node() {
        let node = |name: &str, labels: serde_json::Value, taints: serde_json::Value| -> Node {
            from(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}))
        };
        let nodes = vec![
            node("a", json!({"os": "linux"}), json!([])),
            node("b", json!({"os": "linux"}), json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])),
            node("c", json!({"os": "windows"}), json!([])),
            node(
                "d",
                json!({"os": "linux"}),
                json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            ),
        ];
        let d: DaemonSet = from(json!({"metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"nodeSelector": {"os": "linux"},
                    "containers": [{"name": "c"}]}}}}));
        let e = expand(&Workloads { daemon_sets: vec![d], ..Default::default() }, &[], &nodes, &[]);
        let pinned: Vec<String> = e
            .pods
            .iter()
            .map(|(_, p)| {
                let a = p.spec.as_ref().unwrap().affinity.as_ref().unwrap().node_affinity.as_ref().unwrap();
                let term =
                    &a.required_during_scheduling_ignored_during_execution.as_ref().unwrap().node_selector_terms[0];
                term.match_fields.as_ref().unwrap()[0].values.as_ref().unwrap()[0].clone()
            })
            .collect();
        assert_eq!(pinned, ["a", "d"], "b's taint is not tolerated, c is not linux; unschedulable is tolerated");
    }

    #[test]
    fn a_job_runs_its_parallelism_up_to_the_completions_left() {
        let j: Job = from(json!({"metadata": {"name": "batch", "namespace": "default"},
            "spec": {"parallelism": 4, "completions": 5, "template": template(json!({}))},
            "status": {"succeeded": 3}}));
        let e = expand(&Workloads { jobs: vec![j], ..Default::default() }, &[], &[], &[]);
        assert_eq!(e.pods.len(), 2);
        assert_eq!(e.pods[0].1.metadata.labels.as_ref().unwrap()["job-name"], "batch");
    }
}
