//! Guests at the extension points beyond Filter and Score, each a small real policy run by the simulator:
//! PreEnqueue (require-annotation), PreScore + Score (prescore-spread), PreBind (drain-guard) and Bind
//! (bind-delegate).

use crate::util::*;
use crate::wasm::{guest, registry_for};

/// `profile()`'s profile (PrioritySort and DefaultBinder only) plus `points`, with guest `name` from `component`.
fn with_guest(points: &str, name: &str, component: &str, config: &str) -> String {
    format!(
        "{}  pluginConfig:\n  - name: {name}\n    args:\n      component: {}\n      config: {config}\n",
        profile(points),
        guest(component).display()
    )
}

fn run(profile: &str, cluster: &str) -> kube_wasm_scheduler::sim::Report {
    let (reg, cfg) = registry_for(profile);
    simulate(&reg, &cfg, cluster, 1, &[])
}

fn placed(r: &kube_wasm_scheduler::sim::Report, pod: &str) -> Option<String> {
    r.placements.iter().find(|p| p.pod == pod).and_then(|p| p.node.clone())
}

#[test]
fn pre_enqueue_keeps_pods_without_the_annotation_out_of_the_queue() {
    let p = with_guest(
        "    preEnqueue:\n      enabled: [{name: RequireAnnotation}]\n",
        "RequireAnnotation",
        "require-annotation",
        "{annotation: example.com/approved}",
    );
    let cluster = nodes_yaml(1)
        + &pod_yaml("approved", "")
            .replace("namespace: default\n", "namespace: default\n  annotations: {example.com/approved: 'yes'}\n")
        + &pod_yaml("unapproved", "");
    let r = run(&p, &cluster);
    assert_eq!(placed(&r, "default/approved").as_deref(), Some("n0"));
    assert_eq!(placed(&r, "default/unapproved"), None, "gated: never scheduled");
}

#[test]
fn pre_score_counts_once_per_pod_and_score_spreads_an_app_evenly() {
    let p = with_guest(
        "    preScore:\n      enabled: [{name: PrescoreSpread}]\n    score:\n      enabled: [{name: PrescoreSpread}]\n",
        "PrescoreSpread",
        "prescore-spread",
        "{}",
    );
    let cluster = nodes_yaml(3)
        + &(0..6)
            .map(|i| {
                pod_yaml(&format!("web-{i}"), "")
                    .replace("namespace: default\n", "namespace: default\n  labels: {app: web}\n")
            })
            .collect::<String>();
    let r = run(&p, &cluster);
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..6 {
        *per_node.entry(placed(&r, &format!("default/web-{i}")).expect("bound")).or_default() += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [2, 2, 2], "{per_node:?}");
}

#[test]
fn filter_and_pre_bind_keep_pods_off_a_node_being_drained() {
    let p = with_guest(
        "    filter:\n      enabled: [{name: DrainGuard}]\n    preBind:\n      enabled: [{name: DrainGuard}]\n",
        "DrainGuard",
        "drain-guard",
        "{nodes: [n0]}",
    );
    let cluster = nodes_yaml(2) + &pod_yaml("a", "") + &pod_yaml("b", "");
    let r = run(&p, &cluster);
    assert_eq!(placed(&r, "default/a").as_deref(), Some("n1"));
    assert_eq!(placed(&r, "default/b").as_deref(), Some("n1"));
    let one = run(&p, &(nodes_yaml(1) + &pod_yaml("c", "")));
    assert_eq!(message_of(&one, "default/c"), "0/1 nodes are available: 1 node(s) were being drained.");
}

#[test]
fn a_bind_plugin_that_skips_hands_the_pod_to_the_default_binder() {
    let p = with_guest(
        "    bind:\n      enabled: [{name: BindDelegate}, {name: DefaultBinder}]\n",
        "BindDelegate",
        "bind-delegate",
        "{}",
    )
    .replace("    bind:\n      enabled: [{name: DefaultBinder}]\n", "");
    let r = run(&p, &(nodes_yaml(1) + &pod_yaml("a", "")));
    assert_eq!(placed(&r, "default/a").as_deref(), Some("n0"));
    assert_eq!(message_of(&r, "default/a"), "Successfully assigned default/a to n0");
}
