//! Gang scheduling by a guest on a real API server: the coscheduling guest keeps a group's pods unbound until the
//! last member exists, and a pod it rejected is retried only on the events it registered (a new pod of its group),
//! as its queueing hints say, which the queue's metrics show. A member waiting at Permit is nominated to its node
//! before it waits (NominatedNodeNameForExpectation).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::{counter, free_port, guest, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-gang";
const SCHEDULER: &str = "gang-scheduler";

/// Creates a pod of group `group` (min-available 4), or a lone pod when `group` is None.
fn create(k: &Kube, name: &str, group: Option<&str>) {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let labels = match group {
        Some(g) => {
            json!({"pod-group.scheduling.sigs.k8s.io/name": g, "pod-group.scheduling.sigs.k8s.io/min-available": "4"})
        }
        None => json!({}),
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "registry.invalid/pause",
            "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &pod)).unwrap();
}

/// Starts a scheduler whose profile `scheduler` runs the coscheduling guest (60 s at Permit), `head` before its
/// profiles; answers its port once it is ready.
fn start_coscheduling(cp: &ControlPlane, work: &Path, name: &str, scheduler: &str, head: &str) -> (u16, Scheduler) {
    let profile = write_profile(
        work,
        &format!("{name}.yaml"),
        &format!(
            "{head}profiles:\n- schedulerName: {scheduler}\n  plugins:\n    multiPoint:\n      enabled: [{{name: Coscheduling}}]\n      disabled: [{{name: PrioritySort}}]\n  pluginConfig:\n  - name: Coscheduling\n    args:\n      component: {}\n      config: {{permitWaitingTimeSeconds: 60}}\n",
            guest("coscheduling").display()
        ),
    );
    let port = free_port();
    let s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join(format!("{name}.log")));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    (port, s)
}

pub(crate) fn a_gang_binds_only_when_its_last_member_is_created(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    k.node("gang-1", json!({"e2e": "gang"}));
    let (port, mut s) =
        start_coscheduling(cp, work, "gang", SCHEDULER, "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\n");
    let token = cp.token();
    let metrics = || https_get(port, "/metrics", Some(&token)).map(|(_, m)| m).unwrap_or_default();
    let attempts = |result: &str| {
        counter(&metrics(), "scheduler_schedule_attempts_total", &[("profile", SCHEDULER), ("result", result)])
    };
    // Moves out of the unschedulable pods into activeQ or backoffQ because of `event`.
    let moved = |event: &str| {
        let m = metrics();
        let to = |queue| counter(&m, "scheduler_queue_incoming_pods_total", &[("event", event), ("queue", queue)]);
        to("active") + to("backoff")
    };

    // Three of four members: each is refused at PreFilter (too few siblings) and waits; a new sibling retries the
    // others (their hint answers Queue), so every member's last attempt saw all three.
    for i in 1..=3 {
        create(k, &format!("g-{i}"), Some("g"));
    }
    wait_until("three unschedulable attempts", Duration::from_secs(30), || {
        (attempts("unschedulable") >= 3).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let settled = (attempts("unschedulable"), moved("NodeAdd"), moved("NodeUpdate"), moved("UnschedulablePodAdd"));
    assert!(k.pods(NS).iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none()), "none bound yet");

    // Events the guest did not register (a new node, a node's labels) and one it registered but whose hint answers
    // QueueSkip (a lone pod, not of the group) retry none of the members.
    k.node("gang-2", json!({"e2e": "gang"}));
    k.label_node("gang-1", "tick", "1");
    create(k, "lone", None);
    k.wait_bound(NS, "lone");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(attempts("unschedulable"), settled.0, "no member was retried");
    assert_eq!((moved("NodeAdd"), moved("NodeUpdate")), (settled.1, settled.2), "node events moved no pod");
    assert_eq!(moved("UnschedulablePodAdd"), settled.3 + 1, "the lone pod's own arrival only");
    assert!(k.pods(NS).iter().filter(|p| p.metadata.name.as_deref() != Some("lone")).all(|p| p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_none()));

    // The last member: its arrival retries the three (hint Queue); each waits at Permit until the fourth has a
    // node, then all four bind.
    create(k, "g-4", Some("g"));
    let nodes: Vec<String> = (1..=4).map(|i| k.wait_bound(NS, &format!("g-{i}"))).collect();
    assert_eq!(nodes.len(), 4);
    assert_eq!(moved("UnschedulablePodAdd"), settled.3 + 1 + 1 + 3, "g-4 itself and the three members it retried");
    let log = s.log();
    assert!(s.term() == Some(0), "{log}");
}

/// NominatedNodeNameForExpectation (on by default since v1.35): a member that Permit makes wait for its group is
/// nominated to its node (`status.nominatedNodeName`) before it waits, so other components see where it is about
/// to go; the member that completes the group binds at once and is never nominated; binding clears the field (the
/// API server's ClearingNominatedNodeNameAfterBinding). A watch sees every version of the pods.
pub(crate) fn a_waiting_member_is_nominated_before_it_binds(cp: &ControlPlane, k: &Kube, work: &Path) {
    const NS2: &str = "e2e-nominate";
    k.namespace(NS2);
    k.node("nominate-1", json!({"e2e": "nominate"}));
    let (_, mut s) = start_coscheduling(cp, work, "nominate", "nominate-scheduler", "");

    // Every version of the namespace's pods: (name, nominatedNodeName, nodeName).
    let kubeconfig = cp.kubeconfig();
    let versions = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Option<String>, Option<String>)>::new()));
    let seen = versions.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    // Its own thread, runtime and client: the helper's runtime runs tasks only inside its block_on calls.
    let watch = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            use futures::{StreamExt, TryStreamExt};
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
            let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
            let api: Api<Pod> = Api::namespaced(kube::Client::try_from(cfg).unwrap(), NS2);
            let params = WatchParams::default().timeout(60);
            // From the list's version: a watch from "0" asks for a stream this control plane does not serve.
            let rv = api.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap_or_default();
            let mut stream = api.watch(&params, &rv).await.unwrap().boxed();
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(next) = tokio::time::timeout(Duration::from_millis(200), stream.try_next()).await else {
                    continue;
                };
                match next {
                    Ok(Some(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
                        let nnn =
                            p.status.as_ref().and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty());
                        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                        seen.lock().unwrap().push((p.metadata.name.clone().unwrap_or_default(), nnn, node));
                    }
                    Ok(Some(other)) => eprintln!("e2e: nominate watch: {other:?}"),
                    end => {
                        eprintln!("e2e: nominate watch ended: {end:?}");
                        break;
                    }
                }
            }
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS2);
    for name in ["n-1", "n-2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pod-group.scheduling.sigs.k8s.io/name": "n",
                "pod-group.scheduling.sigs.k8s.io/min-available": "2"}},
            "spec": {"schedulerName": "nominate-scheduler", "containers": [{"name": "c",
                "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "100m"}}}]}
        }))
        .unwrap();
        k.rt.block_on(api.create(&PostParams::default(), &pod)).unwrap();
    }
    // Other scenarios' nodes may be there too: each member is checked against the node it was bound to.
    let bound: Vec<(&str, String)> = ["n-1", "n-2"].into_iter().map(|n| (n, k.wait_bound(NS2, n))).collect();
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    watch.join().unwrap();
    let versions = versions.lock().unwrap().clone();
    let nominated_unbound = |name: &str, node: &str| {
        versions.iter().any(|(n, nnn, on)| n == name && nnn.as_deref() == Some(node) && on.is_none())
    };
    let nominated: Vec<&str> = bound.iter().filter(|(n, node)| nominated_unbound(n, node)).map(|(n, _)| *n).collect();
    assert_eq!(nominated.len(), 1, "exactly the member that waited at Permit was nominated first: {versions:?}");
    for (name, node) in &bound {
        let last = versions.iter().rev().find(|(n, _, _)| n == name).unwrap();
        assert_eq!((last.1.as_deref(), last.2.as_deref()), (None, Some(node.as_str())), "{name}: {versions:?}");
    }
    let log = s.log();
    assert!(s.term() == Some(0), "{log}");
}
