//! Tenant policies on the real API server: the CRDs of deploy/manifests applied, components pushed to the CNCF
//! distribution registry on 127.0.0.1, policies created, changed and deleted with kubectl as a tenant would, the
//! scheduler watching them and writing their status.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{
    bin, counter, free_port, guest, https_get, root, wait_until, write_profile, ControlPlane, Kube, Scheduler,
};
use crate::oci_registry::{push, Registry};

const SCHEDULER: &str = "tenant-scheduler";

/// `kubectl` on the control plane; its stdout, or a panic with its output.
fn kubectl(cp: &ControlPlane, args: &str, stdin: Option<&str>) -> String {
    let mut c = Command::new("bash");
    c.args(["-c", &format!("kubectl {args}")]).env("KUBECONFIG", cp.kubeconfig()).current_dir(root());
    let out = match stdin {
        Some(text) => {
            use std::io::Write;
            let mut child = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        }
        None => c.output().unwrap(),
    };
    assert!(
        out.status.success(),
        "kubectl {args}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn policy(kind: &str, ns: Option<&str>, name: &str, spec: &str) -> String {
    let ns = ns.map(|n| format!("\n  namespace: {n}")).unwrap_or_default();
    format!("apiVersion: scheduling.kube-wasm-scheduler.io/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}{ns}\nspec:\n  schedulerName: {SCHEDULER}\n{spec}")
}

/// A pod of 1 CPU for the tenant scheduler, on the nodes labelled `e2e: group`.
fn pod(k: &Kube, ns: &str, name: &str, group: &str) {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"schedulerName": SCHEDULER, "nodeSelector": {"e2e": group},
                 "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &p)).unwrap();
}

/// Places `names` in `ns` one at a time on the `tenancy` nodes, each waited for; where each went.
fn place(k: &Kube, ns: &str, names: &[String]) -> Vec<String> {
    place_in(k, ns, names, "tenancy")
}

/// `place` on the nodes of `group`.
fn place_in(k: &Kube, ns: &str, names: &[String], group: &str) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            pod(k, ns, n, group);
            k.wait_bound(ns, n)
        })
        .collect()
}

/// The policy's status field at `path` (jsonpath), as kubectl prints it.
fn status(cp: &ControlPlane, what: &str, path: &str) -> String {
    kubectl(cp, &format!("get {what} -o jsonpath='{{{path}}}'"), None)
}

/// Waits until the policy's Ready condition is `ready` for `generation`; how long that took.
fn wait_status(cp: &ControlPlane, what: &str, generation: i64, ready: &str) -> Duration {
    let start = Instant::now();
    wait_until(&format!("{what}: Ready={ready} at generation {generation}"), Duration::from_secs(60), || {
        let g = status(cp, what, ".status.observedGeneration");
        let r = status(cp, what, ".status.conditions[?(@.type==\"Ready\")].status");
        (g == generation.to_string() && r == ready).then_some(())
    });
    start.elapsed()
}

/// Two tenants' policies (a Filter, a Score) and a cluster policy place their pods as they say, pod by pod, while a
/// namespace no policy selects is placed exactly as with no policies at all; the status says Ready with the digest
/// and generation; an update swaps the component's config, a refused update leaves the previous version serving
/// with the reason in status and a Warning Event, a delete unloads it — all under a stream of pods that all bind,
/// with no failed cycle; a hostile tenant's pods fail while everyone else's bind.
pub fn tenant_policies_as_kubernetes_objects(cp: &ControlPlane, k: &Kube, work: &Path) {
    kubectl(cp, "apply --server-side -f deploy/manifests/crds.yaml", None);
    kubectl(cp, "wait --for condition=established --timeout=60s crd/schedulingpolicies.scheduling.kube-wasm-scheduler.io crd/clusterschedulingpolicies.scheduling.kube-wasm-scheduler.io", None);
    let reg = Registry::start("e2e-tenancy");
    for g in ["drain-guard", "priority-label", "hostile"] {
        push(&guest(g), &format!("oci://{}/policies/{g}:1", reg.host));
    }
    for ns in ["ten-a", "ten-b", "ten-c", "ten-other", "ten-stream"] {
        kubectl(cp, &format!("create namespace {ns}"), None);
        kubectl(cp, &format!("label namespace {ns} tier={ns}"), None);
    }
    // Two identical groups of four nodes: `base-N` for the placements with no policy, `ten-N` for the same pods with
    // the policies (the same order, so the same ties fall the same way).
    for group in ["base", "ten"] {
        let label = if group == "base" { "tenancy-base" } else { "tenancy" };
        for i in 1..=4 {
            k.node(&format!("{group}-{i}"), json!({"e2e": label, "rank": (5 - i).to_string()}));
        }
    }
    let profile = write_profile(
        work,
        "tenancy.yaml",
        &format!(
            "profiles:\n- schedulerName: {SCHEDULER}\n  plugins:\n    multiPoint:\n      enabled: [{{name: TenantPolicies, weight: 10}}]\n  pluginConfig:\n  - name: TenantPolicies\n    args:\n      namespaced: {{maxWeight: 10, maxTimeout: 200ms}}\n      allowedSources: [\"oci://{}/policies/\"]\n",
            reg.host
        ),
    );
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("tenancy.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let names = |prefix: &str, n: usize| (1..=n).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();

    // Without policies, on the base nodes: where everyone goes (named as the same ten-N node).
    let alone = |ns: &str, prefix: &str| -> Vec<String> {
        place_in(k, ns, &names(prefix, 3), "tenancy-base").into_iter().map(|n| n.replace("base-", "ten-")).collect()
    };
    let other_alone = alone("ten-other", "base-o");
    let a_alone = alone("ten-a", "base-a");

    let host = &reg.host;
    let a = policy("SchedulingPolicy", Some("ten-a"), "avoid-top", &format!("  component: oci://{host}/policies/drain-guard:1\n  points: [Filter]\n  config: {{nodes: [ten-1, ten-2]}}\n"));
    let b = policy("SchedulingPolicy", Some("ten-b"), "prefer-rank", &format!("  component: oci://{host}/policies/priority-label:1\n  points: [Score]\n  weight: 10\n  config: {{labelKey: rank}}\n"));
    let c = policy("ClusterSchedulingPolicy", None, "keep-b-off-ten-1", &format!("  component: oci://{host}/policies/drain-guard:1\n  points: [Filter]\n  config: {{nodes: [ten-1]}}\n  namespaceSelector: {{matchLabels: {{tier: ten-b}}}}\n"));
    let applied = Instant::now();
    kubectl(cp, "apply -f -", Some(&format!("{a}\n---\n{b}\n---\n{c}")));
    for what in [
        "schedulingpolicy avoid-top -n ten-a",
        "schedulingpolicy prefer-rank -n ten-b",
        "clusterschedulingpolicy keep-b-off-ten-1",
    ] {
        wait_status(cp, what, 1, "True");
        let digest = status(cp, what, ".status.digest");
        assert!(digest.starts_with("sha256:") && digest.len() == 71, "{what}: {digest}");
    }
    eprintln!("e2e: tenancy: three policies Ready {:?} after kubectl apply", applied.elapsed());

    // `snapshot` writes the policies out; `simulate` on it serves them as the live scheduler does.
    let out = Command::new(bin()).arg("snapshot").arg("--kubeconfig").arg(cp.kubeconfig()).output().unwrap();
    assert!(out.status.success(), "snapshot: {}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("kind: SchedulingPolicy") && yaml.contains("kind: ClusterSchedulingPolicy"), "{yaml}");
    let file = work.join("tenancy-snapshot.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let out = Command::new(bin())
        .args(["simulate", "--output", "json", "--config"])
        .arg(&profile)
        .arg("--cluster")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "simulate: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ready: Vec<&str> = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["ready"] == true)
        .filter_map(|p| p["policy"].as_str())
        .collect();
    assert_eq!(
        ready,
        [
            "ClusterSchedulingPolicy keep-b-off-ten-1",
            "SchedulingPolicy ten-a/avoid-top",
            "SchedulingPolicy ten-b/prefer-rank"
        ],
        "{report}"
    );

    // The namespace no policy selects: pod by pod as before. Each tenant: as its policy says.
    assert_eq!(place(k, "ten-other", &names("o", 3)), other_alone, "ten-other noticed the tenants' policies");
    let a_with = place(k, "ten-a", &names("a", 3));
    assert!(a_with.iter().all(|n| n == "ten-3" || n == "ten-4"), "{a_with:?}");
    assert!(
        a_alone.iter().any(|n| n == "ten-1" || n == "ten-2"),
        "without its policy ten-a used the top nodes: {a_alone:?}"
    );
    let b_with = place(k, "ten-b", &names("b", 2));
    assert!(b_with.iter().all(|n| n == "ten-2"), "{b_with:?}");

    // Under a stream of pods: update (ten-a now avoids the bottom nodes), a refused update (weight over the cap),
    // then delete; each change timed from kubectl to the status, the stream all bound, no failed cycle.
    let stream = {
        let kubeconfig = cp.kubeconfig();
        std::thread::spawn(move || {
            let k = Kube::new(&kubeconfig);
            for i in 1..=30 {
                pod(&k, "ten-stream", &format!("s-{i}"), "tenancy");
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    let t = Instant::now();
    kubectl(cp, "apply -f -", Some(&a.replace("[ten-1, ten-2]", "[ten-3, ten-4]")));
    let took_update = t.elapsed() + wait_status(cp, "schedulingpolicy avoid-top -n ten-a", 2, "True");
    let a_updated = place(k, "ten-a", &names("a2", 2));
    assert!(a_updated.iter().all(|n| n == "ten-1" || n == "ten-2"), "{a_updated:?}");
    let t = Instant::now();
    kubectl(cp, "apply -f -", Some(&b.replace("weight: 10", "weight: 50")));
    let took_refusal = t.elapsed() + wait_status(cp, "schedulingpolicy prefer-rank -n ten-b", 2, "False");
    let why = status(cp, "schedulingpolicy prefer-rank -n ten-b", ".status.conditions[0].message");
    assert!(
        why.contains("spec.weight: 50 is over this profile's maxWeight 10") && why.contains("previous version"),
        "{why}"
    );
    assert_eq!(status(cp, "schedulingpolicy prefer-rank -n ten-b", ".status.conditions[0].reason"), "OverLimit");
    wait_until("PolicyRefused event in ten-b", Duration::from_secs(30), || {
        k.events("ten-b").into_iter().find(|e| e.reason.as_deref() == Some("PolicyRefused"))
    });
    // The previous version still serves ten-b.
    assert!(place(k, "ten-b", &names("b2", 1)).iter().all(|n| n == "ten-2"));
    let t = Instant::now();
    kubectl(cp, "delete schedulingpolicy avoid-top -n ten-a", None);
    // Unloaded: ten-a's next pods go wherever the default plugins send them, as before its policy.
    let took_delete = t.elapsed();
    wait_until("ten-a's policy unloaded", Duration::from_secs(30), || {
        s.log().contains("tenant policy unloaded").then_some(())
    });
    let took_delete = took_delete.max(t.elapsed());
    stream.join().unwrap();
    for i in 1..=30 {
        k.wait_bound("ten-stream", &format!("s-{i}"));
    }
    let (_, metrics) = https_get(port, "/metrics", Some(&cp.token())).unwrap();
    let failed = counter(&metrics, "scheduler_schedule_attempts_total", &[("profile", SCHEDULER), ("result", "error")]);
    assert_eq!(failed, 0, "failed scheduling cycles while policies changed");
    eprintln!("e2e: tenancy: update effective {took_update:?}, refusal in status {took_refusal:?}, delete {took_delete:?} after kubectl");

    // A hostile tenant: its Filter loops; its pods fail with the policy named, everyone else's bind.
    let h = policy("SchedulingPolicy", Some("ten-c"), "rogue", &format!("  component: oci://{host}/policies/hostile:1\n  points: [Filter]\n  config: {{mode: loop}}\n  timeout: 50ms\n"));
    kubectl(cp, "apply -f -", Some(&h));
    wait_status(cp, "schedulingpolicy rogue -n ten-c", 1, "True");
    pod(k, "ten-c", "victim", "tenancy");
    let before = Instant::now();
    place(k, "ten-other", &names("o2", 2));
    assert!(before.elapsed() < Duration::from_secs(30), "ten-other waited {:?}", before.elapsed());
    let ev = wait_until("ten-c's FailedScheduling", Duration::from_secs(60), || {
        k.events("ten-c").into_iter().find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    });
    assert!(ev.note.as_deref().unwrap_or_default().contains("ten-c/rogue"), "{ev:?}");
    assert_eq!(k.node_of("ten-c", "victim"), None);

    assert!(!s.log().contains("panicked"), "{}", s.log());
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());
}
