//! Shadow mode in the simulator: a profile's shadow decides beside it on every cycle and changes nothing the
//! serving profile decides; a shadow identical to the serving profile agrees on every decision, even where the
//! node search samples nodes and ties are broken at random.

use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::Report;

use crate::util::{config, nodes_yaml, pod_yaml, simulate};

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

/// 120 nodes (more than the 100 the node search must find, so it samples from a rotating start) and 300 pods of
/// varied requests, ten of which fit nowhere.
fn cluster() -> String {
    let mut c = nodes_yaml(120);
    for i in 0..300 {
        let cpu = if i % 30 == 29 { 5000 } else { 100 + (i * 37) % 900 };
        c.push_str(&pod_yaml(&format!("p{i}"), "").replace("cpu: 100m", &format!("cpu: {cpu}m")));
    }
    c
}

fn run(profiles: &str) -> Report {
    let registry = in_tree_registry();
    simulate(&registry, &config(&registry, &format!("{HEAD}profiles:\n{profiles}")), &cluster(), 7, &[])
}

fn placements(r: &Report) -> Vec<(String, Option<String>)> {
    r.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect()
}

#[test]
fn a_shadow_changes_no_serving_decision_and_a_twin_agrees_on_every_one() {
    let alone = run("- schedulerName: default-scheduler\n");
    assert!(alone.shadows.is_empty());
    let pending = alone.placements.iter().filter(|p| p.node.is_none()).count();
    assert_eq!(pending, 10, "the 5-CPU pods fit nowhere");

    let twin = run("- schedulerName: default-scheduler\n  shadow: twin\n- schedulerName: twin\n");
    assert_eq!(placements(&twin), placements(&alone), "a shadow must not change what the serving profile decides");
    let s = &twin.shadows[0];
    assert_eq!((s.profile.as_str(), s.shadow.as_str()), ("default-scheduler", "twin"));
    assert_eq!(s.decisions, twin.attempts, "every cycle is compared");
    assert_eq!((s.agree, s.disagree, s.error), (s.decisions, 0, 0), "an identical shadow always agrees");

    // Another scoring strategy, and a node search over every node where the serving one samples.
    let most = run(
        "- schedulerName: default-scheduler\n  shadow: most\n- schedulerName: most\n  percentageOfNodesToScore: 100\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]\n",
    );
    assert_eq!(placements(&most), placements(&alone), "a shadow must not change what the serving profile decides");
    let s = &most.shadows[0];
    assert_eq!(s.decisions, most.attempts);
    assert!(s.disagree > 100, "MostAllocated packs where LeastAllocated spreads: {s:?}");
    assert!(s.agree >= 10, "both find no node for the 5-CPU pods: {s:?}");
    assert_eq!(s.agree + s.disagree + s.error, s.decisions);
}

#[test]
fn a_profile_named_as_a_shadow_serves_no_pods() {
    let registry = in_tree_registry();
    let cfg = config(
        &registry,
        &format!("{HEAD}profiles:\n- schedulerName: serving\n  shadow: trial\n- schedulerName: trial\n"),
    );
    let cluster = format!(
        "{}{}{}",
        nodes_yaml(2),
        pod_yaml("for-serving", "  schedulerName: serving\n"),
        pod_yaml("for-trial", "  schedulerName: trial\n")
    );
    let r = simulate(&registry, &cfg, &cluster, 1, &[]);
    assert!(r.placements.iter().any(|p| p.pod == "default/for-serving" && p.node.is_some()));
    assert_eq!(r.ignored, vec!["default/for-trial".to_string()], "the shadow profile never binds a pod");
    assert_eq!(r.shadows[0].decisions, 1);
}
