//! Faults survived without a hand on the scheduler: kube-apiserver killed and restarted mid-backlog (its watches
//! then expire, 410 Gone, and are listed again), the scheduler killed -9 and restarted, and the leader of two
//! replicas killed -9. Each ends with every pod bound once and none left pending.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, https_get, root, wait_until, write_profile, ControlPlane, Kube, Scheduler};

/// Pods waiting before each scenario's scheduler starts.
const PODS: usize = 120;

/// A namespace with `nodes` nodes labelled for it and `PODS` pods for `scheduler`, and a profile that keeps the
/// scheduler to those nodes, binding slowly enough (20 qps) that a fault lands mid-backlog.
fn backlog(k: &Kube, work: &Path, ns: &str, scheduler: &str, extra: &str) -> std::path::PathBuf {
    k.namespace(ns);
    for i in 0..4 {
        k.node(&format!("{ns}-{i}"), json!({"e2e": ns}));
    }
    for i in 0..PODS {
        k.pod(ns, &format!("p{i}"), Some(scheduler));
    }
    write_profile(
        work,
        &format!("{ns}.yaml"),
        &format!(
            "clientConnection:\n  qps: 20\n  burst: 5\n{extra}profiles:\n- schedulerName: {scheduler}\n  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions: [{{key: e2e, operator: In, values: [{ns}]}}]\n"
        ),
    )
}

fn bound(k: &Kube, ns: &str) -> usize {
    k.pods(ns).iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()).count()
}

fn wait_bound_at_least(k: &Kube, ns: &str, n: usize, timeout: Duration) {
    wait_until(&format!("{n} pods bound in {ns}"), timeout, || (bound(k, ns) >= n).then_some(()));
}

/// No pod was bound twice: at most one Scheduled event each (a scheduler killed -9 may lose its last events), and
/// every pod on one of the namespace's nodes.
fn bound_once(k: &Kube, ns: &str) {
    let mut scheduled: HashMap<String, usize> = HashMap::new();
    for e in k.events(ns).into_iter().filter(|e| e.reason.as_deref() == Some("Scheduled")) {
        let pod = e.regarding.and_then(|r| r.name).unwrap_or_default();
        *scheduled.entry(pod).or_default() += 1;
    }
    let twice: Vec<_> = scheduled.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pods with more than one Scheduled event: {twice:?}");
    for p in k.pods(ns) {
        let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
        assert!(node.starts_with(&format!("{ns}-")), "{:?} on {node:?}", p.metadata.name);
    }
}

fn control_plane(cp: &ControlPlane, cmd: &str) {
    let out = Command::new(root().join("scripts/control-plane.sh")).arg(cmd).arg(&cp.dir).output().unwrap();
    assert!(out.status.success(), "control-plane.sh {cmd}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A request to etcd's JSON gateway (keys base64): the response.
fn etcd(cp: &ControlPlane, path: &str, body: serde_json::Value) -> serde_json::Value {
    let ports = std::fs::read_to_string(cp.dir.join("ports")).unwrap();
    let port = ports.split_whitespace().next().unwrap();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-X", "POST", &format!("http://127.0.0.1:{port}{path}"), "-d"])
        .arg(body.to_string())
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("etcd {path}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Standard base64, with padding (etcd's gateway takes keys so).
fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { A[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

/// Pending pods the scheduler's queue holds, from its /metrics.
fn pending(port: u16, token: &str) -> Option<u64> {
    let (_, m) = https_get(port, "/metrics", Some(token))?;
    Some(
        m.lines()
            .filter(|l| l.starts_with("scheduler_pending_pods{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum(),
    )
}

pub(crate) fn apiserver_killed_mid_backlog_and_a_watch_expired(cp: &ControlPlane, k: &Kube, work: &Path) {
    let ns = "e2e-fault-api";
    let profile = backlog(k, work, ns, "fault-api", "");
    // A pod that fits nowhere waits in the queue; it is deleted behind the scheduler's back while the API server
    // is down, so only a relist can tell the scheduler it is gone.
    let api: Api<Pod> = Api::namespaced(k.client.clone(), ns);
    let doomed: Pod =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}, "spec": {"schedulerName": "fault-api",
        "nodeSelector": {"no": "such-node"}, "containers": [{"name": "c", "image": "registry.invalid/pause"}]}}))
        .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &doomed)).unwrap();
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("fault-api.log"));
    wait_bound_at_least(k, ns, 20, Duration::from_secs(60));

    control_plane(cp, "kill-apiserver");
    let gone = etcd(cp, "/v3/kv/deleterange", json!({"key": b64(&format!("/registry/pods/{ns}/doomed"))}));
    assert_eq!(gone["deleted"], "1", "{gone}");
    // Compacted to now: a watch resuming from any earlier resourceVersion is answered 410 Gone.
    let rev =
        etcd(cp, "/v3/kv/range", json!({"key": b64("/registry/namespaces/default")}))["header"]["revision"].clone();
    etcd(cp, "/v3/kv/compaction", json!({"revision": rev, "physical": true}));
    std::thread::sleep(Duration::from_secs(2));
    control_plane(cp, "up");

    // Pods created after the restart are seen as well.
    for i in PODS..PODS + 10 {
        k.pod(ns, &format!("p{i}"), Some("fault-api"));
    }
    wait_bound_at_least(k, ns, PODS + 10, Duration::from_secs(120));
    assert!(s.child.try_wait().unwrap().is_none(), "the scheduler kept running:\n{}", s.log());
    let token = cp.token();
    wait_until("the deleted pod forgotten (relist)", Duration::from_secs(30), || {
        (pending(port, &token) == Some(0)).then_some(())
    });
    let log = s.log();
    assert!(
        log.lines().any(|l| l.contains("watch error; retrying kind=Pod") && l.contains("too old resource version")),
        "the pod watch expired (410 Gone) and was listed again:\n{log}"
    );
    bound_once(k, ns);
    assert_eq!(s.term(), Some(0), "{}", s.log());
}

pub(crate) fn scheduler_killed_and_restarted_mid_backlog(cp: &ControlPlane, k: &Kube, work: &Path) {
    let ns = "e2e-fault-kill";
    let profile = backlog(k, work, ns, "fault-kill", "");
    let mut first = Scheduler::start(&cp.kubeconfig(), &profile, free_port(), &[], work.join("fault-kill-1.log"));
    wait_bound_at_least(k, ns, 30, Duration::from_secs(60));
    first.child.kill().unwrap(); // SIGKILL: bindings in flight are cut short
    first.child.wait().unwrap();
    let mut second = Scheduler::start(&cp.kubeconfig(), &profile, free_port(), &[], work.join("fault-kill-2.log"));
    wait_bound_at_least(k, ns, PODS, Duration::from_secs(120));
    bound_once(k, ns);
    assert!(!second.log().contains("panicked"), "{}", second.log());
    assert_eq!(second.term(), Some(0), "{}", second.log());
}

pub(crate) fn leader_killed_mid_backlog(cp: &ControlPlane, k: &Kube, work: &Path) {
    let ns = "e2e-fault-leader";
    let profile = backlog(k, work, ns, "fault-leader", "");
    std::fs::write(
        &profile,
        std::fs::read_to_string(&profile).unwrap().replace("leaderElect: false", "leaderElect: true"),
    )
    .unwrap();
    let flags = [
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "500ms",
        "--leader-elect-resource-namespace",
        "default",
    ];
    let mut a = Scheduler::start(&cp.kubeconfig(), &profile, free_port(), &flags, work.join("fault-leader-a.log"));
    wait_until("a leader", Duration::from_secs(30), || a.log().contains("became leader").then_some(()));
    let mut b = Scheduler::start(&cp.kubeconfig(), &profile, free_port(), &flags, work.join("fault-leader-b.log"));
    wait_bound_at_least(k, ns, 30, Duration::from_secs(60));
    assert!(!b.log().contains("became leader"), "one leader at a time");
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    wait_bound_at_least(k, ns, PODS, Duration::from_secs(120));
    assert!(b.log().contains("became leader"), "the follower took over:\n{}", b.log());
    bound_once(k, ns);
    assert_eq!(b.term(), Some(0), "{}", b.log());
}
