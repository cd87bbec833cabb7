//! A backlog — pods waiting before the scheduler starts, as after a restart or a failover — is bound over a
//! handful of connections to the API server and a bounded number of threads, within `clientConnection.qps/burst`.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{free_port, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const PODS: usize = 300;
const QPS: f64 = 40.0;
const BURST: usize = 10;

/// The API server's port, from the kubeconfig's server URL.
fn api_port(cp: &ControlPlane) -> u16 {
    let kc = std::fs::read_to_string(cp.kubeconfig()).unwrap();
    let server = kc.lines().find_map(|l| l.trim().strip_prefix("server:")).expect("a server in the kubeconfig");
    server.trim().rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

/// Established TCP connections the process `pid` holds to 127.0.0.1:`port`: its socket inodes matched against
/// the kernel's TCP tables.
fn connections_to(pid: u32, port: u16) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let want = format!("{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // rem_address is f[2] (addr:port), st f[3] (01 established), inode f[9].
            f.len() > 9 && f[2].ends_with(&format!(":{want}")) && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}

fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

pub(crate) fn backlog_on_few_connections_within_the_rate_limit(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace("e2e-backlog");
    for i in 0..20 {
        k.node(&format!("backlog-{i}"), json!({"e2e": "backlog"}));
    }
    for i in 0..PODS {
        k.pod("e2e-backlog", &format!("b{i}"), Some("backlog-scheduler"));
    }
    let profile = write_profile(
        work,
        "backlog.yaml",
        &format!(
            "clientConnection:\n  qps: {QPS}\n  burst: {BURST}\nprofiles:\n- schedulerName: backlog-scheduler\n  plugins:\n    filter:\n      enabled: [{{name: NodeAffinity}}]\n  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions: [{{key: e2e, operator: In, values: [backlog]}}]\n"
        ),
    );
    let port = free_port();
    let api = api_port(cp);
    let t = Instant::now();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("backlog.log"));
    let pid = s.child.id();
    let (mut peak_conns, mut peak_threads) = (0, 0);
    let bound = |k: &Kube| {
        k.pods("e2e-backlog").iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()).count()
    };
    let mut polls = 0u32;
    wait_until(&format!("{PODS} backlog pods bound"), Duration::from_secs(120), || {
        peak_conns = peak_conns.max(connections_to(pid, api));
        peak_threads = peak_threads.max(threads_of(pid));
        polls += 1;
        // Listing every 100 ms would itself load the API server; every 10th poll is enough.
        (polls.is_multiple_of(10) && bound(k) == PODS).then_some(())
    });
    let took = t.elapsed();
    assert!(https_get(port, "/healthz", None).is_some_and(|(c, _)| c == 200), "still serving");
    eprintln!("e2e: {PODS} waiting pods bound in {took:?}: peak {peak_conns} connection(s), {peak_threads} threads");
    assert!(peak_conns >= 1, "the sampler sees the scheduler's connection (else the check below proves nothing)");
    assert!(peak_conns <= 4, "connections to the API server stay few under a backlog: {peak_conns}");
    // The native binder's requests are awaited, not parked on threads: the runtime's two workers, the scheduling
    // loop and a few helpers (a thread per binding in flight made it 71-74 here, one per pod 299).
    assert!(peak_threads <= 16, "no thread per binding in flight: {peak_threads}");
    // Every binding is a request under the limit: after the burst, at most QPS per second go out. This bounds the
    // time from below, so it cannot fail on a slow machine.
    let floor = Duration::from_secs_f64((PODS - BURST) as f64 / QPS);
    assert!(took >= floor, "{PODS} bindings at qps {QPS}/burst {BURST} cannot take less than {floor:?}: {took:?}");
    let scheduled = || k.events("e2e-backlog").iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
    wait_until("a Scheduled event per pod", Duration::from_secs(60), || (scheduled() >= PODS).then_some(()));
    assert_eq!(scheduled(), PODS, "a Scheduled event per pod, none twice");
    drop(s);
}
