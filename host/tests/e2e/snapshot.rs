//! `snapshot` of the real control plane, then `simulate` of what it wrote: the cluster as the scenarios before
//! this one left it (hundreds of nodes and pods), plus a namespace with a Deployment whose pods no controller
//! manager created (the simulator creates them) and a pending pod; the Secret beside them is never read. kubectl
//! reads the namespace's part of the snapshot back (YAML 1.1: a value `yes` must have been written quoted).

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{bin, ControlPlane, Kube};

const NS: &str = "e2e-snapshot";
const MARKER: &str = "c25hcHNob3QtbXVzdC1ub3QtcmVhZC10aGlz";

pub(crate) fn snapshot_then_simulate(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    k.pod(NS, "pending", None);
    let secrets: Api<Secret> = Api::namespaced(k.client.clone(), NS);
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "token"}, "data": {"token": MARKER}})).unwrap();
    k.rt.block_on(secrets.create(&PostParams::default(), &s)).unwrap();
    let deployments: Api<Deployment> = Api::namespaced(k.client.clone(), NS);
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c",
            "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "10m"}}}]}}}}))
    .unwrap();
    k.rt.block_on(deployments.create(&PostParams::default(), &d)).unwrap();
    // Values a YAML 1.1 reader takes for booleans unless they are quoted.
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "words",
        "labels": {"answer": "yes", "switch": "on", "n": "n", "flag": "Off"}},
        "spec": {"schedulerName": "nobody", "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "yes",
            "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.invalid/pause"}]}}))
    .unwrap();
    k.rt.block_on(pods.create(&PostParams::default(), &p)).unwrap();

    let out = Command::new(bin()).arg("snapshot").arg("--kubeconfig").arg(cp.kubeconfig()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "snapshot failed: {stderr}");
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(!yaml.contains(MARKER) && !yaml.contains("kind: Secret"), "a Secret was read");
    assert!(yaml.contains("kind: Deployment") && yaml.contains("kind: Node"), "{stderr}");
    let file = work.join("snapshot.yaml");
    std::fs::write(&file, &yaml).unwrap();

    // What kubectl makes of the namespace's objects as written: the same objects, so applying them changes nothing.
    let ours: Vec<&str> = yaml.split("---\n").filter(|d| d.contains(&format!("namespace: {NS}\n"))).collect();
    assert!(ours.iter().any(|d| d.contains("name: words\n")), "the pod with YAML 1.1 words is in the snapshot");
    let ns_file = work.join("snapshot-ns.yaml");
    std::fs::write(&ns_file, ours.join("---\n")).unwrap();
    let out = Command::new("kubectl")
        .args(["apply", "--dry-run=server", "-o", "json", "-f"])
        .arg(&ns_file)
        .env("KUBECONFIG", cp.kubeconfig())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl cannot read the snapshot: {stderr}");
    let applied: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let words = applied["items"].as_array().unwrap().iter().find(|o| o["metadata"]["name"] == "words").unwrap();
    assert_eq!(words["metadata"]["labels"]["answer"], "yes", "{words}");
    assert_eq!(words["spec"]["tolerations"][0]["value"], "yes", "{words}");

    let out = Command::new(bin()).args(["simulate", "--output", "json", "--cluster"]).arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "simulate of the snapshot failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let placed = |prefix: &str| {
        report["placements"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["pod"].as_str().unwrap().starts_with(prefix) && p["node"].is_string())
            .count()
    };
    assert_eq!(placed(&format!("{NS}/pending")), 1, "the pending pod is placed: {report}");
    assert_eq!(placed(&format!("{NS}/web-")), 2, "the Deployment's two pods are created and placed: {report}");
}

/// What an operator would try first: `kubectl get … -A -o yaml` of the live cluster handed to `simulate` as it
/// is. The API server of the release under test writes it (its fields, resourceVersions, uids, a `List`), so this is
/// run against every release `make test-versions` serves. A pod of its own namespace for the default scheduler
/// (none runs here) is placed by the simulation, and a node that declares a feature (a field of v1.36+; a v1.35 server drops it)
/// is read without complaint.
pub(crate) fn a_kubectl_dump_is_simulated(cp: &ControlPlane, k: &Kube, work: &Path) {
    const DUMP_NS: &str = "e2e-dump";
    k.namespace(DUMP_NS);
    k.node("dump-node", json!({"dump": "yes"}));
    let nodes: Api<Node> = Api::all(k.client.clone());
    let declared = json!({"status": {"declaredFeatures": ["InPlacePodLevelResourcesVerticalScaling"]}});
    k.rt.block_on(nodes.patch_status("dump-node", &PatchParams::default(), &Patch::Merge(&declared))).unwrap();
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), DUMP_NS);
    let p: Pod =
        serde_json::from_value(json!({"metadata": {"name": "waiting"}, "spec": {"nodeSelector": {"dump": "yes"},
        "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "10m"}}}]}}))
        .unwrap();
    k.rt.block_on(pods.create(&PostParams::default(), &p)).unwrap();

    // Every kind the scheduler reads that this server serves (kubectl refuses the whole request if one is unknown).
    let kinds = "nodes,pods,namespaces,priorityclasses,poddisruptionbudgets,persistentvolumeclaims,\
                 persistentvolumes,storageclasses,csinodes,csidrivers,csistoragecapacities,deviceclasses,\
                 resourceslices,resourceclaims,resourceclaimtemplates";
    let out = Command::new("kubectl")
        .args(["get", kinds, "--all-namespaces", "-o", "yaml"])
        .env("KUBECONFIG", cp.kubeconfig())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl get failed: {stderr}");
    let file = work.join("kubectl-dump.yaml");
    std::fs::write(&file, &out.stdout).unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nkind: List\n"), "kubectl writes a List");

    let out = Command::new(bin()).args(["simulate", "--output", "json", "--cluster"]).arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "simulate refused kubectl's dump ({}): {stderr}", file.display());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let waiting = report["placements"].as_array().unwrap().iter().find(|p| p["pod"] == format!("{DUMP_NS}/waiting"));
    assert_eq!(
        waiting.map(|p| p["node"].clone()),
        Some(json!("dump-node")),
        "the pod no scheduler here serves is placed by the simulation on the one node its selector allows: {report}"
    );
}
