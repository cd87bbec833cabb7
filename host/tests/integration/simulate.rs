//! Golden runs of `simulate` on every example in examples/: the printed placements must match
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
