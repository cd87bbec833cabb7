//! Events as kube-scheduler's events broadcaster writes them: a pod that keeps failing the same way gets one
//! FailedScheduling Event whose `series.count` grows, not one Event per attempt.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-events";

fn about<'a>(events: &'a [Event], pod: &str, reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
        })
        .collect()
}

fn series_count(e: &Event) -> i32 {
    e.series.as_ref().map_or(1, |s| s.count)
}

/// A pod retried while unschedulable, with the same message each time, has one FailedScheduling Event whose
/// series counts the attempts (2 at the first repeat; every attempt once the scheduler stops and writes the
/// series' last count); once schedulable it gets its Scheduled event.
pub(crate) fn failed_scheduling_is_one_series(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    k.node("events-1", json!({"e2e": "events"}));
    // Backoff pinned to 1 s: each requeue below is retried within a second or two.
    let profile = write_profile(
        work,
        "events.yaml",
        "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\nprofiles:\n- schedulerName: events-scheduler\n  plugins:\n    filter:\n      enabled: [{name: NodeAffinity}]\n",
    );
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &profile, port, &[], work.join("events.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "waits"}, "spec": {"schedulerName": "events-scheduler",
        "nodeSelector": {"e2e": "events", "ready": "yes"}, "containers": [{"name": "c", "image": "registry.invalid/pause"}]}}))
    .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &pod)).unwrap();

    let token = cp.token();
    let unschedulable = || -> u64 {
        let Some((_, m)) = https_get(port, "/metrics", Some(&token)) else { return 0 };
        let prefix = "scheduler_schedule_attempts_total{profile=\"events-scheduler\",result=\"unschedulable\"} ";
        m.lines().find_map(|l| l.strip_prefix(prefix)?.parse().ok()).unwrap_or(0)
    };
    wait_until("the first attempt", Duration::from_secs(30), || (unschedulable() >= 1).then_some(()));
    // A label change on the node requeues the pod (NodeAffinity registers node label updates); the node still
    // lacks `ready`, so each retry fails with the same message.
    for attempt in 2..=4u64 {
        k.label_node("events-1", "tick", &attempt.to_string());
        wait_until(&format!("attempt {attempt}"), Duration::from_secs(30), || {
            (unschedulable() >= attempt).then_some(())
        });
    }
    let attempts = unschedulable();
    let failed = wait_until("the series' first repeat written", Duration::from_secs(30), || {
        let events = k.events(NS);
        let failed: Vec<Event> = about(&events, "waits", "FailedScheduling").into_iter().cloned().collect();
        assert!(failed.len() <= 1, "{attempts} attempts, one Event each instead of one series: {failed:#?}");
        failed.into_iter().find(|e| series_count(e) >= 2)
    });
    assert_eq!(failed.action.as_deref(), Some("Scheduling"));
    assert_eq!(failed.reporting_controller.as_deref(), Some("events-scheduler"));
    assert!(failed.note.as_deref().unwrap_or_default().starts_with("0/"), "{failed:?}");

    // Schedulable now: bound, with a Scheduled event of its own beside the FailedScheduling series.
    k.label_node("events-1", "ready", "yes");
    let node = k.wait_bound(NS, "waits");
    let scheduled = wait_until("Scheduled event", Duration::from_secs(30), || {
        about(&k.events(NS), "waits", "Scheduled").first().map(|e| (*e).clone())
    });
    assert_eq!(scheduled.action.as_deref(), Some("Binding"));
    assert_eq!(scheduled.note.as_deref(), Some(format!("Successfully assigned {NS}/waits to {node}").as_str()));
    let attempts = unschedulable().max(attempts);

    // On SIGTERM the recorder writes what it still holds: the series' last count, every attempt.
    assert_eq!(s.term(), Some(0), "SIGTERM exits 0:\n{}", s.log());
    let events = k.events(NS);
    let failed = about(&events, "waits", "FailedScheduling");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(series_count(failed[0]) as u64, attempts, "{:#?}", failed[0]);
    assert_eq!(about(&events, "waits", "Scheduled").len(), 1);
    let log = s.log();
    assert!(!log.contains("rejected event") && !log.contains("unable to write event"), "{log}");
    eprintln!("e2e: {attempts} unschedulable attempts, one FailedScheduling Event with series.count {attempts}");
}
