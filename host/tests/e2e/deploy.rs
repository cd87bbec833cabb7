//! Installing the scheduler as a second scheduler on a real API server, with the commands of the README's
//! "Install as a second scheduler" (each one is a constant here, and the README must hold it verbatim): the API
//! server accepts deploy/manifests and the chart's rendering; the chart installs and uninstalls; with the
//! manifests applied, the binary running under the ServiceAccount's token binds a pod (the RBAC is enough), and
//! stops scheduling when the Lease rule is taken away (the RBAC is not padded). No kubelet runs the Deployment's
//! pods, so the binary runs here, on the ConfigMap's configuration with the built guests in place of the image's.
//!
//! The chart renders deploy/manifests object for object with its default values (`chart_renders_the_manifests`).
//!
//! Commands run in a work directory that links `deploy` and `guest-plugins` to the repository's, as if run from
//! the repository root, with KUBECONFIG naming the test control plane's admin and helm built by
//! scripts/build-helm.sh on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde::Deserialize as _;
use serde_yaml::Value;

use super::{https_get, root, wait_until, ControlPlane, Kube, Scheduler};

// The README's commands, run as written.
const APPLY_DRY_RUN: &str = "kubectl apply --server-side --dry-run=server -f deploy/manifests";
const APPLY: &str = "kubectl apply --server-side -f deploy/manifests";
const RUN_POD: &str = r#"kubectl run web --image=registry.k8s.io/pause:3.10 --overrides='{"apiVersion": "v1", "spec": {"schedulerName": "kube-wasm-scheduler"}}'"#;
const POD_NODE: &str = "kubectl get pod web -o jsonpath='{.spec.nodeName}'";
const DELETE: &str = "kubectl delete -f deploy/manifests";
const HELM_LINT: &str = "helm lint deploy/chart";
const HELM_DRY_RUN: &str = "helm template kube-wasm-scheduler deploy/chart --namespace kube-system | kubectl apply --server-side --dry-run=server -f -";
const HELM_INSTALL: &str = "helm install kube-wasm-scheduler deploy/chart --namespace kube-system";
const HELM_UNINSTALL: &str = "helm uninstall kube-wasm-scheduler --namespace kube-system";
// A node without a kubelet (`make cluster-up` prints these two).
const NODE: &str =
    r#"echo '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}' | kubectl create -f -"#;
const NODE_STATUS: &str = r#"kubectl patch node node-1 --subresource=status --type=merge -p '{"status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}'"#;
// The scheduler outside the cluster, as the ServiceAccount, on the ConfigMap's configuration.
const SA_KUBECONFIG: &str = "kubectl config view --raw --flatten --minify >sa.kubeconfig";
const SA_TOKEN: &str = r#"kubectl --kubeconfig sa.kubeconfig config set-credentials kube-wasm-scheduler --token="$(kubectl create token kube-wasm-scheduler -n kube-system)""#;
const SA_CONTEXT: &str = "kubectl --kubeconfig sa.kubeconfig config set-context --current --user=kube-wasm-scheduler";
const LOCAL_CONFIG: &str = r#"kubectl get configmap kube-wasm-scheduler-config -n kube-system -o jsonpath='{.data.config\.yaml}' | sed "s|/plugins/|$PWD/guest-plugins/build/|" >config.yaml"#;
/// Run by the test with its own free port in place of 10259.
const RUN_SCHEDULER: &str =
    "kube-wasm-scheduler --kubeconfig sa.kubeconfig --authentication-kubeconfig sa.kubeconfig --authorization-kubeconfig sa.kubeconfig --config config.yaml --bind-address 127.0.0.1 --secure-port 10259";

const README_COMMANDS: &[&str] = &[
    APPLY_DRY_RUN,
    APPLY,
    RUN_POD,
    POD_NODE,
    DELETE,
    HELM_LINT,
    HELM_DRY_RUN,
    HELM_INSTALL,
    HELM_UNINSTALL,
    NODE,
    NODE_STATUS,
    SA_KUBECONFIG,
    SA_TOKEN,
    SA_CONTEXT,
    LOCAL_CONFIG,
    RUN_SCHEDULER,
];

/// What the scheduler does on the API, as `kubectl auth can-i` arguments: what the informers list and watch
/// (host/src/cluster/kube/informers.rs), what the cycle writes (host/src/cluster/kube/mod.rs, events.rs), leader election
/// (host/src/live/leader.rs), and what delegated authentication and authorization of the serving port need.
const MAY: &[&str] = &[
    "list pods --all-namespaces",
    "watch pods --all-namespaces",
    "list nodes",
    "watch nodes",
    "list namespaces",
    "watch namespaces",
    "list poddisruptionbudgets.policy --all-namespaces",
    "watch poddisruptionbudgets.policy --all-namespaces",
    "list services --all-namespaces",
    "watch services --all-namespaces",
    "list replicasets.apps --all-namespaces",
    "watch replicasets.apps --all-namespaces",
    "list statefulsets.apps --all-namespaces",
    "watch statefulsets.apps --all-namespaces",
    "list replicationcontrollers --all-namespaces",
    "watch replicationcontrollers --all-namespaces",
    "list persistentvolumeclaims --all-namespaces",
    "watch persistentvolumeclaims --all-namespaces",
    "list persistentvolumes",
    "watch persistentvolumes",
    "create pods --subresource=binding -n default",
    "delete pods -n default",
    "patch pods --subresource=status -n default",
    "create events.events.k8s.io -n default",
    "patch events.events.k8s.io -n default",
    "create leases.coordination.k8s.io -n kube-system",
    "get leases.coordination.k8s.io/kube-wasm-scheduler -n kube-system",
    "update leases.coordination.k8s.io/kube-wasm-scheduler -n kube-system",
    "create tokenreviews.authentication.k8s.io",
    "create subjectaccessreviews.authorization.k8s.io",
    "get configmaps/extension-apiserver-authentication -n kube-system",
    "list schedulingpolicies.scheduling.kube-wasm-scheduler.io --all-namespaces",
    "watch schedulingpolicies.scheduling.kube-wasm-scheduler.io --all-namespaces",
    "list clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io",
    "watch clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io",
    "patch schedulingpolicies.scheduling.kube-wasm-scheduler.io --subresource=status -n default",
    "update clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io --subresource=status",
];

/// What it is not given: another scheduler's Lease, its own Lease name elsewhere, pod writes beyond the cycle's.
const MAY_NOT: &[&str] = &[
    "update leases.coordination.k8s.io/kube-scheduler-other -n kube-system",
    "update leases.coordination.k8s.io/kube-wasm-scheduler -n default",
    "create pods -n default",
    "update pods -n default",
    "get secrets -n kube-system",
    // A tenant's policy is the tenant's to write; the scheduler only writes its status.
    "update schedulingpolicies.scheduling.kube-wasm-scheduler.io -n default",
    "create clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io",
];

/// The Role that lets the scheduler read and renew its Lease, with its one rule taken away: applied by the same
/// field manager as deploy/manifests, so applying the manifests again restores the rule.
const ROLE_WITHOUT_LEASE_RULE: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: kube-wasm-scheduler-leader-election
  namespace: kube-system
  labels:
    app.kubernetes.io/name: kube-wasm-scheduler
rules: []
";

/// Malformed tenant policies the API server refuses (the CRDs' schema and CEL rules), each with the field its
/// error names: (what, spec lines after schedulerName, the error's words).
const MALFORMED_POLICIES: &[(&str, &str, &str)] = &[
    ("a file on the scheduler's disk", "component: /etc/passwd\n  points: [Filter]", "spec.component: Invalid value: must start with oci:// or https://"),
    ("https without a digest", "component: https://policies.example/p.wasm\n  points: [Filter]", "spec.sha256: Required value"),
    ("a digest that is not one", "component: oci://r.example/p:1\n  sha256: abc\n  points: [Filter]", "spec.sha256"),
    ("a weight without Score", "component: oci://r.example/p:1\n  points: [Filter]\n  weight: 2", "spec.weight: Forbidden"),
    ("a weight over 100", "component: oci://r.example/p:1\n  points: [Score]\n  weight: 101", "spec.weight"),
    ("Bind in a namespace", "component: oci://r.example/p:1\n  points: [Bind]", "spec.points[0]: Unsupported value: \"Bind\""),
    ("QueueSort in a namespace", "component: oci://r.example/p:1\n  points: [QueueSort]", "spec.points[0]: Unsupported value"),
    ("no points", "component: oci://r.example/p:1\n  points: []", "spec.points"),
    ("a point twice", "component: oci://r.example/p:1\n  points: [Filter, Filter]", "spec.points[1]: Duplicate value"),
    ("8Gi of memory", "component: oci://r.example/p:1\n  points: [Filter]\n  memoryLimit: 8Gi", "spec.memoryLimit: Invalid value: must be a quantity between 1Mi and 4Gi"),
    ("a timeout in words", "component: oci://r.example/p:1\n  points: [Filter]\n  timeout: 5 seconds", "spec.timeout"),
    ("a failure policy of its own", "component: oci://r.example/p:1\n  points: [Filter]\n  failurePolicy: Retry", "spec.failurePolicy: Unsupported value"),
    ("In with no values", "component: oci://r.example/p:1\n  points: [Filter]\n  podSelector: {matchExpressions: [{key: a, operator: In}]}", "spec.podSelector.matchExpressions[0]"),
    ("a misspelt field", "component: oci://r.example/p:1\n  points: [Filter]\n  wieght: 3", "unknown field \"spec.wieght\""),
];

/// The tenant policy CRDs and roles of deploy/manifests on a real API server: established; a well-formed policy of
/// each kind passes `kubectl apply --dry-run=server`, every malformed one is refused with its field named; the
/// ServiceAccount reads both kinds and writes only their status (MAY, MAY_NOT); a user given the edit role's
/// aggregated rules in one namespace owns that namespace's policies and no other's, and no cluster policy.
fn tenant_policy_objects(sh: &Shell) {
    sh.run("kubectl wait --for condition=established --timeout=60s crd/schedulingpolicies.scheduling.kube-wasm-scheduler.io crd/clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io");
    sh.run("kubectl create namespace team-a && kubectl create namespace team-b");
    let policy = |kind: &str, ns: &str, spec: &str| {
        let ns = if ns.is_empty() { String::new() } else { format!("\n  namespace: {ns}") };
        format!("apiVersion: scheduling.kube-wasm-scheduler.io/v1alpha1\nkind: {kind}\nmetadata:\n  name: p{ns}\nspec:\n  schedulerName: kube-wasm-scheduler\n  {spec}\n")
    };
    let dry_run = |yaml: &str| {
        std::fs::write(sh.dir.join("policy.yaml"), yaml).unwrap();
        sh.try_run("kubectl apply --dry-run=server -f policy.yaml")
    };
    let good = "component: oci://registry.example/policies/avoid-latency:1.0\n  points: [Filter, Score]\n  weight: 3\n  timeout: 50ms\n  memoryLimit: 32Mi\n  failurePolicy: Ignore\n  config: {label: tier, value: latency}\n  podSelector: {matchLabels: {team: a}}";
    let (ok, out, err) = dry_run(&policy("SchedulingPolicy", "team-a", good));
    assert!(ok && out.contains("created (server dry run)"), "a well-formed SchedulingPolicy refused: {out}{err}");
    let cluster = format!("{good}\n  namespaceSelector: {{matchExpressions: [{{key: tier, operator: Exists}}]}}");
    let (ok, out, err) = dry_run(&policy(
        "ClusterSchedulingPolicy",
        "",
        &cluster.replace("[Filter, Score]", "[Filter, Score, PostFilter]"),
    ));
    assert!(ok, "a well-formed ClusterSchedulingPolicy refused: {out}{err}");
    for (what, spec, words) in MALFORMED_POLICIES {
        let (ok, out, err) = dry_run(&policy("SchedulingPolicy", "team-a", spec));
        assert!(!ok, "{what}: accepted: {out}");
        assert!(err.contains(words), "{what}: the error does not say {words:?}:\n{err}");
    }
    let (ok, _, err) =
        dry_run(&policy("ClusterSchedulingPolicy", "", "component: oci://r.example/p:1\n  points: [QueueSort]"));
    assert!(!ok && err.contains("spec.points[0]: Unsupported value"), "{err}");

    // No controller manager runs here to aggregate roles, so the rules are bound as the edit role would carry them.
    let labels =
        sh.run("kubectl get clusterrole kube-wasm-scheduler-schedulingpolicies-edit -o jsonpath='{.metadata.labels}'");
    assert!(labels.contains("aggregate-to-edit") && labels.contains("aggregate-to-admin"), "{labels}");
    sh.run("kubectl create rolebinding alice-policies --clusterrole=kube-wasm-scheduler-schedulingpolicies-edit --user=alice -n team-a");
    for (what, may) in [
        ("create schedulingpolicies.scheduling.kube-wasm-scheduler.io -n team-a", true),
        ("delete schedulingpolicies.scheduling.kube-wasm-scheduler.io -n team-a", true),
        ("create schedulingpolicies.scheduling.kube-wasm-scheduler.io -n team-b", false),
        ("patch schedulingpolicies.scheduling.kube-wasm-scheduler.io --subresource=status -n team-a", false),
        ("create clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io", false),
    ] {
        let (yes, _, _) = sh.try_run(&format!("kubectl auth can-i {what} --as alice"));
        assert_eq!(yes, may, "alice (edit in team-a) `{what}`");
    }
    sh.run("kubectl delete namespace team-a team-b --wait=false");
}

/// helm's bin directory (scripts/build-helm.sh: built once, cached under ~/.cache/kube-wasm-scheduler), asked for
/// once per process, as the tests here run side by side.
fn helm_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(root().join("scripts/build-helm.sh")).stderr(Stdio::inherit()).output().unwrap();
        assert!(out.status.success(), "scripts/build-helm.sh failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

/// Where the README's commands run: linked to the repository's deploy/ and guest-plugins/.
struct Shell {
    dir: PathBuf,
    path: String,
    kubeconfig: PathBuf,
}

impl Shell {
    fn new(dir: PathBuf, kubeconfig: PathBuf) -> Shell {
        std::fs::create_dir_all(&dir).unwrap();
        for link in ["deploy", "guest-plugins"] {
            let _ = std::fs::remove_file(dir.join(link));
            std::os::unix::fs::symlink(root().join(link), dir.join(link)).unwrap();
        }
        let scheduler_dir = Path::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler")).parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}:{}",
            helm_bin().display(),
            scheduler_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Shell { dir, path, kubeconfig }
    }

    /// Runs a command line with bash (at most two minutes); its stdout, or a panic naming it with its output.
    fn run(&self, cmd: &str) -> String {
        let (ok, out, err) = self.try_run(cmd);
        assert!(ok, "`{cmd}` failed:\n{out}\n{err}");
        out
    }

    fn try_run(&self, cmd: &str) -> (bool, String, String) {
        let out = Command::new("timeout")
            .args(["120", "bash", "-c", &format!("set -o pipefail; {cmd}")])
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.dir.join(".helm/cache"))
            .env("HELM_CONFIG_HOME", self.dir.join(".helm/config"))
            .env("HELM_DATA_HOME", self.dir.join(".helm/data"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Applies a YAML document given on stdin, server-side, as `kubectl apply --server-side` does for the manifests.
    fn apply_stdin(&self, yaml: &str) {
        let file = self.dir.join("stdin.yaml");
        std::fs::write(&file, yaml).unwrap();
        self.run("kubectl apply --server-side -f stdin.yaml");
    }

    /// Starts RUN_SCHEDULER in the background on `port`, its log in `log`.
    fn scheduler(&self, port: u16, log: &str) -> Scheduler {
        let mut words = RUN_SCHEDULER.split_whitespace();
        assert_eq!(words.next(), Some("kube-wasm-scheduler"));
        let args: Vec<String> = words.map(|w| if w == "10259" { port.to_string() } else { w.to_string() }).collect();
        let log = self.dir.join(log);
        let child = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(&args)
            .current_dir(&self.dir)
            // Guest plugins' lines at debug level too: RandomScore logs its decisions there.
            .env("KWS_LOG", "info,kube_wasm_scheduler::wasm::output=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the scheduler");
        Scheduler { child, log }
    }
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

#[test]
fn the_readme_shows_the_commands_this_test_runs() {
    let readme = readme();
    let section = readme.split("## Install as a second scheduler").nth(1).expect("README section");
    let section = section.split("\n## ").next().unwrap();
    for cmd in README_COMMANDS {
        assert!(section.contains(cmd), "README's install section lacks `{cmd}`");
    }
    // And shows no other command: every line of its shell blocks is one of them.
    let mut in_block = false;
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        let line = line.split("  #").next().unwrap().trim_end();
        if in_block && !line.is_empty() {
            assert!(README_COMMANDS.contains(&line), "README's install section runs `{line}`, which no test runs");
        }
    }
    // `make cluster-up` prints how to make a node.
    let make = std::fs::read_to_string(root().join("Makefile")).unwrap();
    assert!(make.contains("node-1") && make.contains("--subresource=status"), "cluster-up prints NODE, NODE_STATUS");
}

/// The chart with default values renders deploy/manifests, object for object.
#[test]
fn chart_renders_the_manifests() {
    let helm = helm_bin().join("helm");
    let render = |args: &[&str]| -> Vec<Value> {
        let out = Command::new(&helm)
            .args(["template", "kube-wasm-scheduler", "deploy/chart", "--namespace", "kube-system"])
            .args(args)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
        documents(&String::from_utf8(out.stdout).unwrap())
    };
    let rendered = by_identity(render(&[]));
    let manifests = by_identity(manifest_documents());
    assert_eq!(
        rendered.keys().collect::<Vec<_>>(),
        manifests.keys().collect::<Vec<_>>(),
        "the chart renders other objects than deploy/manifests holds"
    );
    for (id, m) in &manifests {
        assert_eq!(&rendered[id], m, "{id} differs between the chart and deploy/manifests");
    }

    // Values the defaults do not exercise: no leader election drops the Lease's Role; a native plugin's args and
    // a Wasm plugin's own limits reach the configuration.
    let other = by_identity(render(&[
        "--set",
        "scheduler.leaderElect=false",
        "--set-json",
        r#"pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]"#,
        "--set-json",
        r#"wasm.plugins=[{"name": "QosSort", "component": "/plugins/qos-sort.wasm", "timeout": "250ms"},
            {"name": "RandomScore", "component": "/plugins/random-score.wasm", "failurePolicy": "Ignore"}]"#,
    ]));
    assert!(!other.keys().any(|k| k.contains("leader-election")), "{:?}", other.keys());
    let cfg = &other["v1/ConfigMap/kube-system/kube-wasm-scheduler-config"]["data"]["config.yaml"];
    assert_eq!(cfg["leaderElection"]["leaderElect"], Value::Bool(false));
    let pc = &cfg["profiles"][0]["pluginConfig"];
    assert_eq!(pc[0]["name"].as_str(), Some("NodeResourcesFit"));
    assert_eq!(pc[0]["args"]["scoringStrategy"]["type"].as_str(), Some("MostAllocated"));
    let args = |i: usize, key: &str| pc[i]["args"][key].as_str().map(str::to_string);
    assert_eq!((args(1, "timeout"), args(1, "failurePolicy")), (Some("250ms".into()), Some("Fail".into())));
    assert_eq!((args(2, "timeout"), args(2, "failurePolicy")), (Some("100ms".into()), Some("Ignore".into())));
    let plugins = &cfg["profiles"][0]["plugins"];
    let multi_point: serde_yaml::Value =
        serde_yaml::from_str("{enabled: [{name: QosSort}, {name: RandomScore}], disabled: [{name: PrioritySort}]}")
            .unwrap();
    assert_eq!(plugins["multiPoint"], multi_point);
    assert!(plugins.get("score").is_none(), "no plugin enabled at score alone: {plugins:?}");

    let lint = Command::new(&helm).args(["lint", "--strict", "deploy/chart"]).current_dir(root()).output().unwrap();
    let text = String::from_utf8_lossy(&lint.stdout);
    assert!(lint.status.success() && !text.contains("[WARNING]") && !text.contains("[ERROR]"), "{text}");
}

/// Every document of deploy/manifests.
fn manifest_documents() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/manifests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| documents(&std::fs::read_to_string(f).unwrap())).collect()
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text).map(|d| Value::deserialize(d).unwrap()).filter(|v| !v.is_null()).collect()
}

/// Objects by `apiVersion/kind/namespace/name`, normalised: a ConfigMap's files parsed as YAML (so layout and key
/// order do not count), and the chart's own `checksum/config` annotation (it rolls the pods when the
/// configuration changes on `helm upgrade`) left out.
fn by_identity(docs: Vec<Value>) -> BTreeMap<String, Value> {
    docs.into_iter()
        .map(|mut d| {
            let id = format!(
                "{}/{}/{}/{}",
                d["apiVersion"].as_str().unwrap(),
                d["kind"].as_str().unwrap(),
                d["metadata"]["namespace"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap()
            );
            if d["kind"] == "ConfigMap" {
                for (_, v) in d["data"].as_mapping_mut().unwrap().iter_mut() {
                    *v = serde_yaml::from_str(v.as_str().unwrap()).unwrap();
                }
            }
            if let Some(meta) =
                d.get_mut("spec").and_then(|s| s.get_mut("template")).and_then(|t| t.get_mut("metadata"))
            {
                let annotations = meta.as_mapping_mut().unwrap().remove("annotations");
                if let Some(Value::Mapping(mut a)) = annotations {
                    a.remove("checksum/config");
                    if !a.is_empty() {
                        meta["annotations"] = Value::Mapping(a);
                    }
                }
            }
            (id, d)
        })
        .collect()
}

#[test]
fn install_as_a_second_scheduler() {
    // Its own control plane: the other e2e test runs in this process at the same time.
    let dir = std::env::temp_dir().join(format!("kws-e2e-deploy-{}", std::process::id()));
    let out = Command::new(root().join("scripts/control-plane.sh")).arg("up").arg(&dir).output().unwrap();
    assert!(out.status.success(), "control plane did not start:\n{}", String::from_utf8_lossy(&out.stderr));
    let cp = ControlPlane { dir };
    let k = Kube::new(&cp.kubeconfig());
    let sh = Shell::new(cp.dir.join("deploy-work"), cp.kubeconfig());

    // The chart: lint, the API server's dry run, a real install and uninstall.
    sh.run(HELM_LINT);
    let out = sh.run(HELM_DRY_RUN);
    assert!(out.contains("deployment.apps/kube-wasm-scheduler serverside-applied (server dry run)"), "{out}");
    let out = sh.run(HELM_INSTALL);
    assert!(out.contains("STATUS: deployed"), "{out}");
    assert!(sh
        .run("kubectl get deployment kube-wasm-scheduler -n kube-system -o name")
        .contains("kube-wasm-scheduler"));
    sh.run(HELM_UNINSTALL);
    let (found, _, _) = sh.try_run("kubectl get serviceaccount kube-wasm-scheduler -n kube-system");
    assert!(!found, "helm uninstall removes what helm install created");

    // The manifests: the dry run, then for real; every object is there.
    let out = sh.run(APPLY_DRY_RUN);
    assert!(out.contains("(server dry run)"), "{out}");
    let (found, _, _) = sh.try_run("kubectl get configmap kube-wasm-scheduler-config -n kube-system");
    assert!(!found, "a dry run creates nothing");
    sh.run(APPLY);
    for obj in [
        "serviceaccount/kube-wasm-scheduler",
        "configmap/kube-wasm-scheduler-config",
        "deployment/kube-wasm-scheduler",
        "role/kube-wasm-scheduler-leader-election",
        "rolebinding/kube-wasm-scheduler-leader-election",
        "rolebinding/kube-wasm-scheduler-extension-apiserver-authentication-reader",
        "clusterrolebinding/kube-wasm-scheduler-as-kube-scheduler",
        "clusterrolebinding/kube-wasm-scheduler-as-volume-scheduler",
    ] {
        sh.run(&format!("kubectl get {obj} -n kube-system -o name"));
    }
    tenant_policy_objects(&sh);

    // A node the way `make cluster-up` says: schedulable as created (the API server's TaintNodesByCondition
    // admission is off there; nothing would lift its not-ready taint).
    sh.run(NODE);
    sh.run(NODE_STATUS);
    let taints = sh.run("kubectl get node node-1 -o jsonpath='{.spec.taints}'");
    assert_eq!(taints.trim(), "", "a new node is not tainted not-ready");

    // The scheduler as its ServiceAccount, on the ConfigMap's configuration (leader election on its Lease).
    sh.run(SA_KUBECONFIG);
    sh.run(SA_TOKEN);
    sh.run(SA_CONTEXT);
    sh.run(LOCAL_CONFIG);
    let whoami = sh.run("kubectl --kubeconfig sa.kubeconfig auth whoami -o jsonpath='{.status.userInfo.username}'");
    assert_eq!(whoami.trim(), "system:serviceaccount:kube-system:kube-wasm-scheduler");
    for what in MAY {
        let (yes, out, err) = sh.try_run(&format!("kubectl --kubeconfig sa.kubeconfig auth can-i {what}"));
        assert!(yes, "the ServiceAccount may not `{what}`: {out}{err}");
    }
    for what in MAY_NOT {
        let (yes, _, _) = sh.try_run(&format!("kubectl --kubeconfig sa.kubeconfig auth can-i {what}"));
        assert!(!yes, "the ServiceAccount may `{what}`");
    }
    let config = std::fs::read_to_string(sh.dir.join("config.yaml")).unwrap();
    assert!(config.contains(&format!("{}/guest-plugins/build/qos-sort.wasm", sh.dir.display())), "{config}");
    // The seed's delegated authn/authz flags, through the ServiceAccount's own kubeconfig: its RBAC must cover
    // the TokenReviews, SubjectAccessReviews and the authentication ConfigMap lookup too.
    let port = super::free_port();
    let mut s = sh.scheduler(port, "scheduler.log");
    wait_until("the scheduler leads and is ready", Duration::from_secs(60), || {
        https_get(port, "/readyz", None).filter(|(c, _)| *c == 200)
    });
    sh.run(RUN_POD);
    let node =
        wait_until("web bound", Duration::from_secs(60), || Some(sh.run(POD_NODE)).filter(|n| !n.trim().is_empty()));
    assert_eq!(node.trim(), "node-1");
    // Every write the cycle makes went through: the binding, the Scheduled event, RandomScore's PostBind line
    // (a guest the ConfigMap names), and the Lease held by this replica.
    let note = wait_until("Scheduled event", Duration::from_secs(30), || {
        k.events("default").into_iter().find(|e| e.reason.as_deref() == Some("Scheduled")).and_then(|e| e.note)
    });
    assert_eq!(note, "Successfully assigned default/web to node-1");
    wait_until("PostBind log line", Duration::from_secs(10), || {
        s.log().contains("Decision: default/web => node-1").then_some(())
    });
    let leases: Api<Lease> = Api::namespaced(k.client.clone(), "kube-system");
    let lease = k.rt.block_on(leases.get("kube-wasm-scheduler")).unwrap();
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));
    assert!(!s.log().contains("forbidden"), "no request was refused:\n{}", s.log());
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());
    assert!(s.log().contains("lease released"), "the Lease is updated on the way out:\n{}", s.log());

    // Without the Lease rule the scheduler cannot lead, so it schedules nothing; the refusal is in its log.
    // Given the rule back, the same process takes the Lease and binds the pod.
    sh.apply_stdin(ROLE_WITHOUT_LEASE_RULE);
    let mut s = sh.scheduler(port, "scheduler-no-lease.log");
    sh.run(&RUN_POD.replace("kubectl run web", "kubectl run web-2"));
    let refused = Instant::now();
    wait_until("the Lease refused", Duration::from_secs(30), || {
        let log = s.log();
        (log.contains("forbidden") && log.contains("leases")).then_some(())
    });
    std::thread::sleep(Duration::from_secs(5).saturating_sub(refused.elapsed()));
    assert_eq!(k.node_of("default", "web-2"), None, "bound without the Lease rule:\n{}", s.log());
    assert_ne!(https_get(port, "/readyz", None).map(|(c, _)| c), Some(200), "ready without leading");
    assert!(!s.log().contains("became leader"));
    sh.run(APPLY);
    let node =
        wait_until("web-2 bound once the rule is back", Duration::from_secs(60), || k.node_of("default", "web-2"));
    assert_eq!(node, "node-1");
    assert!(s.log().contains("became leader"));
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());

    sh.run(DELETE);
    let (found, _, _) = sh.try_run("kubectl get serviceaccount kube-wasm-scheduler -n kube-system");
    assert!(!found, "kubectl delete -f deploy/manifests removes the ServiceAccount");
}
