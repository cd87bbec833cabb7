//! Shadow mode on a real API server: the serving profile prefers nodes with a higher `priority.example.com`
//! label, its shadow runs the build of the same plugin that inverts the score. The shadow disagrees on every
//! decision, every disagreement is counted and shown on `/debug/shadow`, and nothing the shadow decides is bound.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{counter, free_port, guest, https_get, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const NS: &str = "e2e-shadow";
const SERVING: &str = "shadow-serving";
const TRIAL: &str = "shadow-trial";
const PODS: usize = 8;

fn create(k: &Kube, name: &str, scheduler: &str) {
    let api: Api<Pod> = Api::namespaced(k.client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        // Only this scenario's nodes: earlier scenarios labelled nodes of their own.
        "spec": {"schedulerName": scheduler, "nodeSelector": {"e2e": "shadow"},
            "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": "10m"}}}]}
    }))
    .unwrap();
    k.rt.block_on(api.create(&PostParams::default(), &pod)).unwrap();
}

pub(crate) fn an_inverted_shadow_disagrees_on_every_decision_and_never_binds(cp: &ControlPlane, k: &Kube, work: &Path) {
    k.namespace(NS);
    for (node, priority) in [("shadow-1", "10"), ("shadow-2", "20"), ("shadow-3", "30")] {
        k.node(node, json!({"e2e": "shadow", "priority.example.com": priority}));
    }
    let profile = |name: &str, guest_name: &str, shadow: Option<&str>| {
        format!(
            "- schedulerName: {name}\n{}  plugins:\n    multiPoint:\n      enabled: [{{name: PriorityLabel, weight: 5}}]\n  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {}\n",
            shadow.map(|s| format!("  shadow: {s}\n")).unwrap_or_default(),
            guest(guest_name).display()
        )
    };
    let config = write_profile(
        work,
        "shadow.yaml",
        &format!(
            "profiles:\n{}{}",
            profile(SERVING, "priority-label", Some(TRIAL)),
            profile(TRIAL, "priority-label-inverted", None)
        ),
    );
    let port = free_port();
    let mut s = Scheduler::start(&cp.kubeconfig(), &config, port, &[], work.join("shadow.log"));
    wait_until("readyz", Duration::from_secs(60), || https_get(port, "/readyz", None).filter(|(c, _)| *c == 200));

    create(k, "for-the-trial", TRIAL);
    for i in 0..PODS {
        create(k, &format!("p{i}"), SERVING);
        // One at a time, so that each decision is its own cycle on a settled cache.
        let node = k.wait_bound(NS, &format!("p{i}"));
        assert_eq!(node, "shadow-3", "the serving profile's choice (the highest label) is bound");
    }
    let token = cp.token();
    let metrics = wait_until("shadow decisions counted", Duration::from_secs(20), || {
        let (_, m) = https_get(port, "/metrics", Some(&token))?;
        (counter(&m, "kws_shadow_decisions_total", &[]) >= PODS as u64).then_some(m)
    });
    let count = |result: &str| {
        counter(&metrics, "kws_shadow_decisions_total", &[("profile", SERVING), ("shadow", TRIAL), ("result", result)])
    };
    assert_eq!((count("disagree"), count("agree"), count("error")), (PODS as u64, 0, 0), "{metrics}");

    let (code, body) = https_get(port, "/debug/shadow", Some(&token)).unwrap();
    assert_eq!(code, 200, "{body}");
    let summary: serde_json::Value = serde_json::from_str(&body).unwrap();
    let tally = &summary["profiles"][SERVING];
    assert_eq!(tally["shadow"], TRIAL, "{body}");
    assert_eq!((tally["decisions"].as_u64(), tally["disagree"].as_u64()), (Some(PODS as u64), Some(PODS as u64)));
    let recent = tally["recent"].as_array().unwrap();
    assert_eq!(recent.len(), PODS, "{body}");
    for (i, d) in recent.iter().enumerate() {
        assert_eq!(d["pod"], format!("{NS}/p{i}"), "{body}");
        assert_eq!((d["serving"].as_str(), d["shadow"].as_str()), (Some("shadow-3"), Some("shadow-1")), "{body}");
    }
    let (code, _) = https_get(port, "/debug/shadow", None).unwrap();
    assert_ne!(code, 200, "the summary is not served to anonymous users");

    // Nothing the shadow decided was bound: no pod on its choice, and its own schedulerName is served by no one.
    assert!(k.pods(NS).iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some("shadow-1")));
    assert_eq!(k.node_of(NS, "for-the-trial"), None, "a shadow profile serves no pods of its own");
    let log = s.log();
    assert!(log.contains("shadow profile disagrees"), "disagreements are sampled into the log:\n{log}");
    assert_eq!(s.term(), Some(0), "{log}");
}
