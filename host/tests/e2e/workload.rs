//! The Workload API's gang scheduling (scheduling.k8s.io/v1beta1 PodGroups, `--feature-gates=GenericWorkload=true`
//! on the API server and the scheduler): a PodGroup with `minCount: 3` and two members is held — neither member is
//! bound, tried or reported — while a plain pod created after them binds, which shows the scheduler was running
//! and the members are held rather than slow; the third member's arrival lets the group in and all three bind.
//!
//! `KWS_E2E_UPSTREAM_SCHEDULER=/path/to/kube-scheduler` runs the same scenario against that binary instead of ours
//! (with `KWS_E2E_ONLY=a_pod_group_is_held_until_min_count_members_exist`), printing what it wrote: the README's
//! comparison with kube-scheduler v1.37.2 was made so.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{bin, counter, free_port, https_get, wait_until, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-podgroup";
const SCHEDULER: &str = "podgroup-scheduler";

fn member(k: &Kube, name: &str, group: Option<&str>) {
    member_of(k, name, group, "100m");
}

/// A pod of `cpu` on this scenario's node, in `group`.
fn member_of(k: &Kube, name: &str, group: Option<&str>, cpu: &str) {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let mut spec = json!({"schedulerName": SCHEDULER, "nodeSelector": {"e2e": "podgroup"},
        "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &pod)).unwrap();
}

/// What the scheduler wrote about the namespace's pods and the group, one line each, for the record.
fn record(k: &Kube, group: &Api<PodGroup>) -> String {
    let mut out = String::new();
    let mut events = k.events(NS);
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    for e in events {
        let who = e.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
        out += &format!(
            "  event {who}: {} {} {:?} (by {})\n",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default(),
            e.reporting_controller.unwrap_or_default()
        );
    }
    for p in k.pods(NS) {
        let status = p.status.unwrap_or_default();
        let conds: Vec<String> = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == "PodScheduled")
            .map(|c| format!("{}={} {:?} {:?}", c.type_, c.status, c.reason, c.message))
            .collect();
        let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
        out += &format!(
            "  pod {}: node {node:?}, nominated {:?}, {conds:?}\n",
            p.metadata.name.unwrap_or_default(),
            status.nominated_node_name
        );
    }
    for pg in k.rt.block_on(group.list(&Default::default())).map(|l| l.items).unwrap_or_default() {
        let name = pg.metadata.name.clone().unwrap_or_default();
        let conds = pg.status.and_then(|s| s.conditions).unwrap_or_default();
        for c in conds {
            out += &format!(
                "  podgroup {name}: {}={} reason {:?} message {:?} observedGeneration {:?}\n",
                c.type_, c.status, c.reason, c.message, c.observed_generation
            );
        }
    }
    out
}

pub(crate) fn a_pod_group_is_held_until_min_count_members_exist(cp: &ControlPlane, k: &Kube, work: &Path) {
    if !super::serves_workload_api() {
        eprintln!("e2e: podgroup: skipped, the API server is not v1.37 (KUBE_VERSION)");
        return;
    }
    k.namespace(NS);
    k.node("podgroup-1", json!({"e2e": "podgroup"}));
    let upstream = std::env::var_os("KWS_E2E_UPSTREAM_SCHEDULER");
    let binary = upstream.clone().map(std::path::PathBuf::from).unwrap_or_else(bin);
    let config = work.join("podgroup.yaml");
    // The default profile (GangScheduling joins it with the gate) under our own name; the kubeconfig in the file,
    // where kube-scheduler reads it once it has a --config.
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nclientConnection:\n  kubeconfig: {}\npodInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\nprofiles:\n- schedulerName: {SCHEDULER}\n",
            cp.kubeconfig().display()
        ),
    )
    .unwrap();
    let port = free_port();
    let log = work.join("podgroup.log");
    let child = Command::new(&binary)
        .arg("--config")
        .arg(&config)
        .args(["--bind-address", "127.0.0.1", "--secure-port", &port.to_string()])
        .arg("--cert-dir")
        .arg(work.join("podgroup-certs"))
        .arg("--feature-gates=GenericWorkload=true")
        // Who may read /metrics: the admin's token, reviewed by the API server.
        .arg("--authentication-kubeconfig")
        .arg(cp.kubeconfig())
        .arg("--authorization-kubeconfig")
        .arg(cp.kubeconfig())
        .args(if upstream.is_some() { &["-v=5"][..] } else { &[][..] })
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the scheduler");
    let mut s = Scheduler { child, log };
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let token = cp.token();
    let metrics = || https_get(port, "/metrics", Some(&token)).map(|(_, m)| m).unwrap_or_default();

    let groups: Api<PodGroup> = Api::namespaced(k.client.clone(), NS);
    let pg: PodGroup = serde_json::from_value(json!({"metadata": {"name": "pg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}))
    .unwrap();
    k.rt.block_on(groups.create(&PostParams::default(), &pg)).unwrap();

    // Two of three members, then a plain pod: once the plain pod is bound, the members have been seen (they were
    // created first, on the same watch) and are held.
    member(k, "m-1", Some("pg"));
    member(k, "m-2", Some("pg"));
    member(k, "plain", None);
    k.wait_bound(NS, "plain");
    let bound = |name: &str| k.node_of(NS, name).is_some();
    assert!(!bound("m-1") && !bound("m-2"), "two of three members are held:\n{}", record(k, &groups));
    let held = record(k, &groups);
    eprintln!("e2e: podgroup: held (two of three members):\n{held}");
    if upstream.is_none() {
        let m = metrics();
        assert_eq!(counter(&m, "scheduler_pending_pods", &[("queue", "gated")]), 2, "{m}");
        assert_eq!(counter(&m, "scheduler_unschedulable_pods", &[("plugin", "GangScheduling")]), 2, "{m}");
        // Held at PreEnqueue: never tried, so nothing is written about them (as upstream: no event, no condition).
        let members: Vec<&str> = held.lines().filter(|l| l.contains(" m-")).collect();
        assert!(members.iter().all(|l| !l.contains("event") && !l.contains("PodScheduled")), "{held}");
    }

    // The third member: all three bind.
    member(k, "m-3", Some("pg"));
    let nodes: Vec<String> = ["m-1", "m-2", "m-3"].iter().map(|n| k.wait_bound(NS, n)).collect();
    assert!(nodes.iter().all(|n| n == "podgroup-1"), "{nodes:?}");
    wait_until("three Scheduled events", Duration::from_secs(30), || {
        let n = k
            .events(NS)
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some("Scheduled") && e.note.as_deref().is_some_and(|n| n.contains("/m-"))
            })
            .count();
        (n == 3).then_some(())
    });
    let condition = wait_until("the PodGroup's condition", Duration::from_secs(30), || {
        let pg = k.rt.block_on(groups.get("pg")).ok()?;
        pg.status?.conditions?.into_iter().find(|c| c.type_ == "PodGroupInitiallyScheduled")
    });
    let done = record(k, &groups);
    eprintln!("e2e: podgroup: after the third member:\n{done}");
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "Scheduled"), "{done}");
    // observedGeneration is the PodGroup's metadata.generation, which the API server leaves unset for PodGroups
    // (the condition then carries none, as kube-scheduler's).
    assert_eq!(condition.observed_generation.unwrap_or(0), 0, "{done}");
    for m in ["m-1", "m-2", "m-3"] {
        assert!(done.contains(&format!("Successfully assigned {NS}/{m} to podgroup-1")), "{done}");
    }
    assert!(!done.contains("FailedScheduling"), "{done}");
    if upstream.is_none() {
        let m = metrics();
        let attempts = |result| counter(&m, "scheduler_podgroup_schedule_attempts_total", &[("result", result)]);
        assert_eq!((attempts("scheduled"), attempts("unschedulable")), (1, 0), "one PodGroup cycle: {m}");
    }

    // All or nothing: a gang of two whose members need 20 of the node's 32 CPUs each. The first fits, the second
    // does not, so neither is bound and both are told why: the one that did not fit with its own reasons, the one
    // that did with the group's.
    let big: PodGroup = serde_json::from_value(json!({"metadata": {"name": "big"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}))
    .unwrap();
    k.rt.block_on(groups.create(&PostParams::default(), &big)).unwrap();
    member_of(k, "b-1", Some("big"), "20");
    member_of(k, "b-2", Some("big"), "20");
    let failed = |name: &str| {
        k.events(NS).into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
    };
    let notes: Vec<String> = ["b-1", "b-2"]
        .iter()
        .map(|n| wait_until(&format!("{n} FailedScheduling"), Duration::from_secs(30), || failed(n)))
        .map(|e| e.note.unwrap_or_default())
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let refused = record(k, &groups);
    eprintln!("e2e: podgroup: a gang that cannot all fit:\n{refused}");
    assert!(!bound("b-1") && !bound("b-2"), "all or nothing:\n{refused}");
    if upstream.is_none() {
        // b-2's own reasons: the node it fits by selector is full; other scenarios' nodes (if any) say why not.
        let own = format!("0/{} nodes are available: 1 Insufficient cpu", k.nodes_count());
        assert!(notes[1].starts_with(&own) && notes[1].ends_with('.'), "{refused}");
        // As kube-scheduler v1.37.2 wrote them (see the README), preemption's part included: no pod here has a
        // lower priority than the group's.
        let group = "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, pod group preemption: No \
                     preemption victims found for incoming preemptor";
        assert_eq!(notes[0], format!("pod group is unschedulable, {group}"), "{refused}");
        let condition =
            format!("podgroup big: PodGroupInitiallyScheduled=False reason \"Unschedulable\" message {group:?}");
        assert!(refused.contains(&condition), "{refused}");
        let m = metrics();
        let attempts = |result| counter(&m, "scheduler_podgroup_schedule_attempts_total", &[("result", result)]);
        assert!(attempts("unschedulable") >= 1, "{m}");
        let s_log = s.log();
        assert!(s.term() == Some(0), "{s_log}");
    } else {
        let m = metrics();
        let lines: Vec<&str> =
            m.lines().filter(|l| l.starts_with("scheduler_podgroup_schedule_attempts_total")).collect();
        eprintln!("e2e: podgroup: upstream metrics: {lines:?}");
        s.term();
        let log = s.log();
        let cycles: Vec<&str> =
            log.lines().filter(|l| l.contains("pod group") || l.contains("PodGroup")).take(40).collect();
        eprintln!("e2e: podgroup: upstream log:\n{}", cycles.join("\n"));
    }
}
