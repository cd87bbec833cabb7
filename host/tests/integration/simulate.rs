//! Golden runs of `simulate` on every example in examples/ (with the flags its `args` file lists, if any): the
//! printed placements must match
//! tests/data/golden/<example>.txt (regenerate with `UPDATE_GOLDEN=1 cargo test`).

use std::path::Path;
use std::process::Command;

use crate::util::root;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler")).current_dir(root()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each example directory holds `profile.yaml` and `cluster.yaml` (and optionally `explain` naming pods).
fn examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("cluster.yaml").exists())
        // An example with an extender needs its server running: its own test starts it (extenders.rs).
        .filter(|e| !e.path().join("extender.py").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn golden_runs_of_every_example() {
    let ex = examples();
    assert!(ex.len() >= 6, "examples: {ex:?}");
    let update = std::env::var("UPDATE_GOLDEN").is_ok();
    let golden_dir = root().join("tests/data/golden");
    std::fs::create_dir_all(&golden_dir).unwrap();
    let mut failures = Vec::new();
    for name in ex {
        let dir = format!("examples/{name}");
        let mut args = vec![
            "simulate".to_string(),
            "--cluster".into(),
            format!("{dir}/cluster.yaml"),
            "--seed".into(),
            "1".into(),
        ];
        if Path::new(&root().join(&dir).join("profile.yaml")).exists() {
            args.extend(["--config".into(), format!("{dir}/profile.yaml")]);
        }
        // More flags for `simulate` (the Workload API example's feature gate).
        if let Ok(a) = std::fs::read_to_string(root().join(&dir).join("args")) {
            args.extend(a.split_whitespace().map(str::to_string));
        }
        if let Ok(e) = std::fs::read_to_string(root().join(&dir).join("explain")) {
            for p in e.split_whitespace() {
                args.extend(["--explain".into(), p.to_string()]);
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = run(&refs);
        assert_eq!(code, 0, "{name}: {stderr}");
        let golden = golden_dir.join(format!("{name}.txt"));
        if update {
            std::fs::write(&golden, &stdout).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        if want != stdout {
            failures.push(format!("{name}: got\n{stdout}\nwant\n{want}"));
        }
        // JSON has the same placements.
        let mut jargs = refs.clone();
        jargs.extend(["--output", "json"]);
        let (code, json, _) = run(&jargs);
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let placements = v["placements"].as_array().unwrap();
        for p in placements {
            assert!(p["pod"].is_string() && p["message"].is_string() && (p["node"].is_string() || p["node"].is_null()));
            let line = stdout
                .lines()
                .find(|l| l.split_whitespace().next() == p["pod"].as_str())
                .unwrap_or_else(|| panic!("{name}: {p} not in table"));
            assert!(line.contains(p["node"].as_str().unwrap_or("<none>")), "{name}: {line} vs {p}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn same_seed_same_result() {
    let args = [
        "simulate",
        "--cluster",
        "examples/spreading/cluster.yaml",
        "--config",
        "examples/spreading/profile.yaml",
        "--seed",
        "42",
        "--output",
        "json",
    ];
    let (_, a, _) = run(&args);
    let (_, b, _) = run(&args);
    assert_eq!(a, b);
}

#[test]
fn a_pod_whose_claim_is_missing_or_unbound_gets_a_clear_reason() {
    use crate::util::*;
    let reg = registry_with(vec![]);
    let cfg = config(&reg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n");
    let claim = |pod: &str, claim: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: default}}\nspec:\n  containers: [{{name: c}}]\n  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]\n---\n")
    };
    let cluster = nodes_yaml(2)
        + "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: pending-claim, namespace: default}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n---\n"
        + &claim("missing", "nope")
        + &claim("unbound", "pending-claim");
    let r = simulate(&reg, &cfg, &cluster, 0, &[]);
    assert_eq!(node_of(&r, "default/missing"), None);
    assert!(
        message_of(&r, "default/missing")
            .starts_with("0/2 nodes are available: persistentvolumeclaim \"nope\" not found."),
        "{}",
        message_of(&r, "default/missing")
    );
    assert!(
        message_of(&r, "default/unbound")
            .starts_with("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."),
        "{}",
        message_of(&r, "default/unbound")
    );
}

/// Runs `simulate` on `cluster` (bytes written to a temporary file) and expects the refusal a user can fix: exit
/// code 2 and one line on stderr naming the file. Returns that line.
fn refused(name: &str, cluster: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("kws-refused-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, cluster).unwrap();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run(&["simulate", "--cluster", path.to_str().unwrap()]);
    let elapsed = started.elapsed();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 2, "{name}: exit code {code}, stderr {stderr:?} after {elapsed:?}");
    assert!(stdout.is_empty(), "{name}: nothing runs half: {stdout:?}");
    let line = stderr.strip_suffix('\n').unwrap_or(&stderr);
    assert!(!line.contains('\n'), "{name}: one line: {stderr:?}");
    let prefix = format!("error: {}: ", path.display());
    assert!(line.starts_with(&prefix), "{name}: names the file: {line:?}");
    line[prefix.len()..].to_string()
}

/// The input probe's defects through the real binary: each was a panic, a hang or a silent acceptance.
#[test]
fn cluster_file_defects_are_one_line_refusals() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1e2147483647}}}]}\n";
    let rows: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "list_in_list",
            b"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, metadata: {name: inner}, items: []}\n"
                .to_vec(),
            "document 0.items[0] (List inner): kind: a List cannot be an item of a List",
        ),
        (
            // Found by properties::mutated_examples_load_or_give_one_line: a key holding a newline made the error
            // two lines.
            "key_with_a_newline",
            b"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {\"A\\n16\": null}}\n".to_vec(),
            "document 0 (Node n): status.allocatable.A\\n16: invalid type: null, expected Quantity",
        ),
        ("open_brackets", "[".repeat(100_000).into_bytes(), "nesting deeper than 100 (line 1)"),
        ("open_braces", "{".repeat(100_000).into_bytes(), "nesting deeper than 100 (line 1)"),
        (
            "indented_block",
            (0..3_000).map(|i| format!("{}k:\n", " ".repeat(i))).collect::<String>().into_bytes(),
            "nesting deeper than 100 (line 101)",
        ),
        (
            "not_utf8",
            b"apiVersion: v1\nkind: Node\nmetadata: {name: \xff}\n".to_vec(),
            "not UTF-8 text (invalid byte at offset 43)",
        ),
        (
            "negative_allocatable",
            b"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '-4'}}\n".to_vec(),
            "document 0 (Node n): status.allocatable[cpu]: Invalid value: \"-4\": must be greater than or equal to 0",
        ),
        (
            "unknown_field",
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeSelecter: {a: b}, containers: [{name: c}]}\n"
                .to_vec(),
            "document 0 (Pod p): spec.nodeSelecter: unknown field",
        ),
    ];
    let mut failures = Vec::new();
    for (name, text, want) in rows {
        match std::panic::catch_unwind(|| refused(name, &text)) {
            Ok(line) if line == want => {}
            Ok(line) => failures.push(format!("{name}: got {line:?}, want {want:?}")),
            Err(e) => failures.push(format!(
                "{name}: {}",
                e.downcast_ref::<String>().cloned().unwrap_or_default().replace('\n', " ")
            )),
        }
    }
    // A pod asking an astronomical amount of CPU is read exactly and fits nowhere.
    let cluster = format!("apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus: {{allocatable: {{cpu: '4', memory: 4Gi, pods: '10'}}}}\n---\n{pod}");
    let dir = std::env::temp_dir().join(format!("kws-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.yaml"), cluster).unwrap();
    let (code, stdout, stderr) = run(&["simulate", "--cluster", dir.join("c.yaml").to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    if code != 0 || !stdout.contains("Insufficient cpu") {
        failures.push(format!("huge_cpu_request: exit {code}, stdout {stdout:?}, stderr {stderr:?}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// kubectl skips a UTF-8 byte order mark at the start of a file; so do we.
#[test]
fn byte_order_mark_is_accepted() {
    let dir = std::env::temp_dir().join(format!("kws-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.yaml");
    std::fs::write(&path, "\u{feff}apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', memory: 4Gi, pods: '10'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n").unwrap();
    let (code, stdout, stderr) = run(&["simulate", "--cluster", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("default/p"), "{stdout}");
}

/// kube-scheduler v1.37's messages with DynamicResources in the default profile: its PostFilter runs before
/// preemption and, having no claims to deallocate, says nothing; for a pod an earlier PreFilter rejected outright, its
/// PostFilter finds no cycle data and the error's text ("not found") ends the message, as upstream's does.
#[test]
fn dynamic_resources_post_filter_messages_are_upstream_s() {
    use crate::util::*;
    let reg = registry_with(vec![]);
    let cfg = config(&reg, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n");
    let cluster = nodes_yaml(2)
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: default}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: \"1000\"}}}]\n---\n"
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: missing, namespace: default}\nspec:\n  containers: [{name: c}]\n  volumes: [{name: data, persistentVolumeClaim: {claimName: nope}}]\n---\n"
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: waits, namespace: default}\nspec:\n  containers: [{name: c}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: absent}]\n";
    let r = simulate(&reg, &cfg, &cluster, 0, &[]);
    assert_eq!(
        message_of(&r, "default/huge"),
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    assert_eq!(
        message_of(&r, "default/missing"),
        "0/2 nodes are available: persistentvolumeclaim \"nope\" not found. not found"
    );
    // No template in the file: the claim is never made, and PreEnqueue keeps the pod out of the queue (never
    // attempted: listed pending with PreEnqueue's message, as a gated pod).
    let waits = r.placements.iter().find(|p| p.pod == "default/waits").expect("listed");
    assert_eq!(
        (waits.node.as_deref(), waits.attempts, waits.message.as_str()),
        (None, 0, "pod \"default/waits\": ResourceClaim not created yet"),
        "{:?}",
        r.placements
    );
}

/// A `kubectl get nodes,pods -o yaml` dump of a v1.37 cluster: fields of v1.36+ (`status.declaredFeatures`,
/// `restartPolicyRules`, a pod's `generation` and `observedGeneration`) are read, and NodeDeclaredFeatures (v1.37's
/// default profile) places the pod that needs a feature on the one node that declares it.
#[test]
fn a_v1_37_dump_is_read_and_declared_features_decide() {
    let dump = r#"apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Node
  metadata: {name: plain, generation: 1, labels: {kubernetes.io/hostname: plain}}
  status:
    allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
    declaredFeatures: [InPlacePodLevelResourcesVerticalScaling]
    features: {supplementalGroupsPolicy: true}
    nodeInfo: {swap: {capacity: 0}, architecture: amd64, bootID: b, containerRuntimeVersion: c, kernelVersion: k,
      kubeProxyVersion: "", kubeletVersion: v1.37.2, machineID: m, operatingSystem: linux, osImage: o, systemUUID: s}
- apiVersion: v1
  kind: Node
  metadata: {name: declaring, labels: {kubernetes.io/hostname: declaring}}
  status:
    allocatable: {cpu: "2", memory: 4Gi, pods: "110"}
    declaredFeatures: [RestartAllContainersOnContainerExits]
- apiVersion: v1
  kind: Pod
  metadata: {name: restarts-all, namespace: default, generation: 1}
  spec:
    containers:
    - name: c
      image: busybox
      restartPolicy: Never
      restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]
  status:
    phase: Pending
    conditions: [{type: PodScheduled, status: "False", reason: Unschedulable, observedGeneration: 1}]
- apiVersion: v1
  kind: Pod
  metadata: {name: plain-pod, namespace: default}
  spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}
"#;
    let dir = std::env::temp_dir().join(format!("kws-v137-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, dump).unwrap();
    let simulate = |extra: &[&str]| {
        let mut args = vec!["simulate", "--cluster", path.to_str().unwrap(), "--output", "json"];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let node_of = |pod: &str| {
            report["placements"].as_array().unwrap().iter().find(|p| p["pod"] == pod).map(|p| p["node"].clone())
        };
        (node_of("default/restarts-all"), node_of("default/plain-pod"), stdout)
    };
    let (restarts_all, plain, stdout) = simulate(&[]);
    assert_eq!(restarts_all, Some(serde_json::json!("declaring")), "{stdout}");
    // The plain pod is free to go where the scores say: the bigger, emptier node.
    assert_eq!(plain, Some(serde_json::json!("plain")), "{stdout}");
    // A v1.35 scheduler (the gate alpha and off there) does not read declared features: the scores decide.
    let (restarts_all, _, stdout) = simulate(&["--emulated-version", "1.35"]);
    assert_eq!(restarts_all, Some(serde_json::json!("plain")), "{stdout}");
    // Nor does v1.36's with the gate turned off (not locked before v1.37); v1.37 refuses that, as upstream.
    let (restarts_all, _, stdout) =
        simulate(&["--emulated-version", "1.36", "--feature-gates", "NodeDeclaredFeatures=false"]);
    assert_eq!(restarts_all, Some(serde_json::json!("plain")), "{stdout}");
    let (code, _, stderr) =
        run(&["simulate", "--cluster", path.to_str().unwrap(), "--feature-gates", "NodeDeclaredFeatures=false"]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"),
        "{stderr}"
    );
}
