//! Go guests: guest-plugins/priority-label-go (the Go SDK, the standard Go toolchain's wasip1 reactor and
//! `plugin componentize --world`) is checked like any component and places pods exactly as the Rust
//! priority-label does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::root;
use crate::wasm::guest;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"));
    c.current_dir(root());
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kws-go-guest-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// examples/wasm-priority-label/profile.yaml with its component replaced by `component` and, when given, its
/// guest config replaced by `config` (a YAML flow mapping).
fn example_profile(dir: &Path, component: &Path, config: Option<&str>) -> PathBuf {
    let text = std::fs::read_to_string(root().join("examples/wasm-priority-label/profile.yaml")).unwrap();
    let mut text = text.replace("../../guest-plugins/build/priority-label.wasm", &component.display().to_string());
    assert!(text.contains(&component.display().to_string()), "the example names the Rust guest's component");
    if let Some(config) = config {
        let old = "      config:\n        labelKey: priority.example.com\n";
        assert!(text.contains(old), "the example's guest config");
        text = text.replace(old, &format!("      config: {config}\n"));
    }
    let name = component.file_stem().unwrap().to_string_lossy().into_owned();
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, text).unwrap();
    file
}

/// `simulate --output json` of a cluster file with a profile: the placements (pod, node, message), in order.
fn placements(profile: &Path, cluster: &Path) -> Vec<(String, Option<String>, String)> {
    let out = bin()
        .args(["simulate", "--output", "json", "--config"])
        .arg(profile)
        .arg("--cluster")
        .arg(cluster)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", profile.display(), stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().to_string(),
                p["node"].as_str().map(str::to_string),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn plugin_check_shows_the_go_guest_s_points_and_the_rust_guest_s_imports() {
    let check = |f: &Path| {
        let out = bin().args(["plugin", "check", "--output", "json"]).arg(f).output().unwrap();
        assert!(out.status.success(), "{}: {}", f.display(), stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let mut go = check(&guest("priority-label-go"));
    assert_eq!(go["points"], serde_json::json!(["Filter", "Score"]), "{go}");
    // The host's wasip1 adapter for Go serves the Go runtime's WASI imports with kws:plugin/host, so the
    // component asks for nothing beyond the contract: the same exports and imports as the Rust guest.
    assert_eq!(go["imports_wasi"], false, "{go}");
    // Alike but for the promises: the Rust SDK exports kws:plugin/declarations, the Go SDK does not.
    let mut rust = check(&guest("priority-label"));
    let promises = ["ignores-node-usage", "score-reads-node-only", "normalize-default", "needs-no-cycle-begin"];
    assert_eq!(rust["declared"], serde_json::json!(promises), "{rust}");
    assert_eq!(go["declared"], serde_json::Value::Null, "{go}");
    // The Rust guest's world is derived from its exports (listed sorted), the Go guest's is a world of the contract.
    let exports = |v: &mut serde_json::Value| {
        let mut e: Vec<String> = serde_json::from_value(v["exports"].take()).unwrap();
        e.sort();
        e
    };
    let mut rust_exports = exports(&mut rust);
    rust_exports.retain(|e| e != "kws:plugin/declarations@0.2.1");
    let go_exports = exports(&mut go);
    assert_eq!(go_exports, rust_exports);
    rust["declared"] = serde_json::Value::Null;
    assert_eq!(go, rust, "the Go and the Rust guest describe alike");

    let out = bin().args(["plugin", "check"]).arg(guest("priority-label-go")).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("extension points: Filter, Score"), "{table}");
    assert!(table.contains("imports:          kws:plugin/types@0.2.1, kws:plugin/host@0.2.1"), "{table}");
}

#[test]
fn go_guest_places_pods_as_the_rust_guest_does() {
    let dir = scratch("placements");
    let rust = example_profile(&dir, &guest("priority-label"), None);
    let go = example_profile(&dir, &guest("priority-label-go"), None);

    // The example: web-1 goes to the highest label, web-2 to the node its selector names.
    let example = root().join("examples/wasm-priority-label/cluster.yaml");
    let want = placements(&rust, &example);
    assert_eq!(want.iter().filter(|p| p.1.is_some()).count(), 2, "{want:?}");
    assert_eq!(placements(&go, &example), want);

    // A cluster that fills up: labels high and low, zero, equal, with a leading zero and missing, so Filter, Score,
    // NormalizeScore (ties broken by the seeded simulator) and the unschedulable message all count.
    let mut cluster = String::new();
    for i in 0..60 {
        let label = match i % 9 {
            0 => String::new(),
            1 => ", priority.example.com: \"017\"".to_string(),
            _ => format!(", priority.example.com: \"{}\"", (i * 37) % 41),
        };
        cluster += &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}{label}}}\nstatus:\n  allocatable: {{cpu: '2', memory: 8Gi, pods: '110'}}\n---\n");
    }
    for i in 0..240 {
        cluster += &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default}}\nspec:\n  schedulerName: my-scheduler\n  containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]\n---\n");
    }
    let file = dir.join("cluster.yaml");
    std::fs::write(&file, cluster).unwrap();
    let want = placements(&rust, &file);
    let bound = want.iter().filter(|p| p.1.is_some()).count();
    assert!(bound > 100 && bound < 240, "the cluster fills up: {bound} of 240 bound");
    let got = placements(&go, &file);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "the Go guest placed {} differently", w.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn go_guest_refuses_a_bad_config_and_reports_a_non_integer_label_as_the_rust_guest_does() {
    let dir = scratch("errors");
    let example = root().join("examples/wasm-priority-label/cluster.yaml");
    for (config, reason) in
        [("{labelKey: 7}", "config \"labelKey\": expected a string"), ("{labelKey: ''}", "labelKey must not be empty")]
    {
        let refusal = |name: &str| {
            let profile = example_profile(&dir, &guest(name), Some(config));
            let out =
                bin().args(["simulate", "--config"]).arg(&profile).arg("--cluster").arg(&example).output().unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{name} with {config}: {err}");
            let (_, why) = err.split_once("the plugin refused its configuration: ").unwrap_or_else(|| panic!("{err}"));
            assert!(why.contains(reason), "{name}: {err}");
            why.to_string()
        };
        assert_eq!(refusal("priority-label-go"), refusal("priority-label"), "the same line from both SDKs");
    }

    // scheduler-2 carries a label that is not an integer: Score fails the pod with the same message.
    let text = std::fs::read_to_string(&example)
        .unwrap()
        .replace("priority.example.com: \"20\"", "priority.example.com: high");
    let cluster = dir.join("high.yaml");
    std::fs::write(&cluster, text).unwrap();
    let rust = placements(&example_profile(&dir, &guest("priority-label"), None), &cluster);
    let go = placements(&example_profile(&dir, &guest("priority-label-go"), None), &cluster);
    let web1 = go.iter().find(|p| p.0 == "default/web-1").unwrap();
    assert_eq!(web1.1, None);
    assert!(
        web1.2.contains("node scheduler-2: label priority.example.com has non-integer value \"high\""),
        "{}",
        web1.2
    );
    assert_eq!(go, rust);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn componentize_embeds_only_worlds_of_the_contract() {
    let core = root().join("guest-plugins/priority-label-go/build/priority-label-go.core.wasm");
    assert!(core.exists(), "{} is missing: run `make guests`", core.display());
    let dir = scratch("componentize");
    let target = dir.join("out.wasm");
    let out = bin().args(["plugin", "componentize", "--world", "nope", "-o"]).arg(&target).arg(&core).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains("kws:plugin@0.2.1 has no world \"nope\"") && err.contains("filter-score-plugin"), "{err}");
    assert!(!target.exists());
    // Without a world, the module's exports name the world: the same points as filter-score-plugin's.
    let out = bin().args(["plugin", "componentize", "-o"]).arg(&target).arg(&core).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let check = bin().args(["plugin", "check"]).arg(&target).output().unwrap();
    let table = String::from_utf8_lossy(&check.stdout);
    assert!(table.contains("extension points: Filter, Score"), "{table}");
    // A module that exports nothing of the contract is refused rather than made into a plugin that serves nothing.
    let empty = dir.join("empty.wasm");
    std::fs::write(&empty, wat::parse_str("(module (func (export \"run\")))").unwrap()).unwrap();
    let other = dir.join("other.wasm");
    let out = bin().args(["plugin", "componentize", "-o"]).arg(&other).arg(&empty).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("names no world and exports no kws:plugin@0.2.1 function"), "{err}");
    assert!(!other.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn go_sdk_decodes_every_field_of_the_pod_and_node_the_host_sends() {
    // guest-plugins/pod-echo-go rejects the node with the pod (host.cycle-pod) and node as the Go SDK read them
    // from the host's memory: every field of the contract's pod and node records, at the canonical ABI's offsets.
    let dir = scratch("echo");
    let profile = dir.join("profile.yaml");
    std::fs::write(&profile, format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: Echo}}]\n  pluginConfig:\n  - name: Echo\n    args:\n      component: {}\n",
        guest("pod-echo-go").display()
    )).unwrap();
    let cluster = dir.join("cluster.yaml");
    std::fs::write(
        &cluster,
        r#"apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {kubernetes.io/hostname: n1, zone: z1}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110", ephemeral-storage: 10Gi, example.com/gpu: "2"}
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  uid: u-123
  labels: {app: web, tier: front}
  annotations: {note: hello}
spec:
  priority: 7
  nodeSelector: {zone: z1}
  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}, {operator: Exists}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, values: [z1, z2]}]
          matchFields: [{key: metadata.name, operator: In, values: [n1]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 40
        preference:
          matchExpressions: [{key: tier, operator: Exists}]
  containers:
  - name: c
    image: x
    resources:
      requests: {cpu: 250m, memory: 64Mi, example.com/gpu: "1"}
      limits: {cpu: 500m, memory: 128Mi, example.com/gpu: "1"}
"#,
    )
    .unwrap();
    let placed = placements(&profile, &cluster);
    let (_, node, message) = &placed[0];
    assert_eq!(*node, None);
    let pod = "POD={UID:u-123 Namespace:shop Name:web Labels:[{Key:app Value:web} {Key:tier Value:front}] \
        Annotations:[{Key:note Value:hello}] Priority:7 QoSClass:1 \
        Requests:{MilliCPU:250 Memory:67108864 EphemeralStorage:0 Pods:0 Scalar:[{Name:example.com/gpu Value:1}]} \
        Limits:{MilliCPU:500 Memory:134217728 EphemeralStorage:0 Pods:0 Scalar:[{Name:example.com/gpu Value:1}]} \
        Tolerations:[{Key:dedicated Operator:Equal Value:gpu Effect:NoSchedule} {Key: Operator:Exists Value: Effect:}] \
        NodeSelector:[{Key:zone Value:z1}] \
        RequiredNodeAffinity:[{MatchExpressions:[{Key:zone Operator:In Values:[z1 z2]}] MatchFields:[{Key:metadata.name Operator:In Values:[n1]}]}] \
        PreferredNodeAffinity:[{Weight:40 Term:{MatchExpressions:[{Key:tier Operator:Exists Values:[]}] MatchFields:[]}}] \
        SchedulerName:default-scheduler NodeName:}";
    let node = "NODE={Name:n1 Labels:[{Key:kubernetes.io/hostname Value:n1} {Key:zone Value:z1}] \
        Taints:[{Key:dedicated Value:gpu Effect:NoSchedule}] \
        Allocatable:{MilliCPU:4000 Memory:8589934592 EphemeralStorage:10737418240 Pods:110 Scalar:[{Name:example.com/gpu Value:2}]} \
        Requested:{MilliCPU:0 Memory:0 EphemeralStorage:0 Pods:0 Scalar:[]} Unschedulable:false PodCount:0}";
    // Reading a file links WASI's file functions into the module; the host's adapter answers them, so the guest
    // builds and Go reports an error instead of the call trapping.
    assert!(message.contains(&format!("1 {pod} {node} FILE=open /etc/hostname: ")), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}
