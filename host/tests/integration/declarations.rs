//! What guests promise (`kws:plugin/declarations`), with the real guests: read once per version, the promises take
//! work away from the host and change no decision. The C build of PriorityLabel is the same policy without
//! promises (the C guest does not export the interface), so it is the control.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

use kube_wasm_scheduler::framework::Plugin as _;
use kube_wasm_scheduler::sim::{self, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;

use crate::util::TempDir;
use crate::wasm::{guest, registry_for};

const NODES: usize = 40;
const PODS: usize = 150;

/// The default profile plus a PriorityLabel build named `name`, at Score with weight 3, as `make bench-live`
/// configures the guests (the default plugins read usage, so placements depend on every binding).
fn label_profile(name: &str, component: &Path) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 1\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: {name}, weight: 3}}]\n  pluginConfig:\n  - name: {name}\n    args:\n      component: {}\n",
        component.display()
    )
}

/// `NODES` nodes of 4 CPU labelled 0–4, and `PODS` pods of 500m: the label pulls pods together, the default
/// plugins spread them, and the 8 nodes labelled 4 hold 64 of them at most.
fn cluster() -> String {
    let nodes: String = (0..NODES)
        .map(|i| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}, priority.example.com: \"{}\"}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}\n---\n", i % 5))
        .collect();
    let pods: String = (0..PODS)
        .map(|i| format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]\n---\n"))
        .collect();
    nodes + &pods
}

/// How a PriorityLabel build's run went: placements in scheduling order, the node rows the plugin was sent, and
/// the raw scores the host reused instead of asking it.
struct Run {
    placements: Vec<(String, Option<String>)>,
    rows: u64,
    reused: u64,
    normalized_by_host: u64,
}

/// Runs the cluster under a PriorityLabel build.
fn run(name: &str, component: &Path) -> Run {
    let (reg, cfg) = registry_for(&label_profile(name, component));
    let file = sim::load::parse("c.yaml", &cluster()).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions { seed: 7, ..Default::default() }).unwrap();
    let r = s.run();
    let placements = r.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect();
    let plugin = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
    let stats = &plugin.stats;
    Run {
        placements,
        rows: stats.node_rows_sent.load(Relaxed),
        reused: stats.scores_reused.load(Relaxed),
        normalized_by_host: stats.normalized_by_host.load(Relaxed),
    }
}

/// Node-pod pairs scored over a run: all nodes are scored (fewer than 100), less those Filter keeps out because
/// they are full (a node holds 8 pods).
fn pairs_scored(placements: &[(String, Option<String>)]) -> u64 {
    let mut held = std::collections::HashMap::<&str, usize>::new();
    let mut total = 0;
    for (_, node) in placements {
        total += (NODES - held.values().filter(|&&n| n == 8).count()) as u64;
        if let Some(n) = node {
            *held.entry(n).or_default() += 1;
        }
    }
    total
}

#[test]
fn a_guest_that_promises_is_sent_each_node_once_scores_it_once_and_decides_as_one_that_does_not() {
    let promised = run("DeclaringLabel", &guest("priority-label"));
    let plain = run("PlainLabel", &guest("priority-label-c"));
    let bound = plain.placements.iter().filter(|(_, n)| n.is_some()).count();
    assert_eq!(bound, PODS, "every pod fits");
    let nodes_used: std::collections::HashSet<_> = plain.placements.iter().filter_map(|(_, n)| n.as_ref()).collect();
    assert!(nodes_used.len() > 16, "usage matters to the decisions: pods spread over {} nodes", nodes_used.len());
    assert_eq!(promised.placements, plain.placements, "the promises change no decision");
    // One instance (parallelism 1) holds the table: each node once, never again, since only pods changed.
    assert_eq!(promised.rows, NODES as u64, "the guest that ignores usage");
    // Without the promise, a binding resends its node before the next cycle's Score, unless the binding filled it
    // (Filter then keeps it out of scoring): about 19 nodes fill up.
    assert!(plain.rows > (NODES + PODS / 2) as u64, "the guest without promises was sent {} rows", plain.rows);
    // Its Score reads only the node: the guest scored each node once, the host reused that for every later pod.
    assert_eq!(promised.reused, pairs_scored(&promised.placements) - NODES as u64, "scores reused");
    assert_eq!(plain.reused, 0, "a guest that promises nothing is asked every time");
    // Its NormalizeScore is upstream's helper: the host computed it in every cycle, and the C build's own
    // NormalizeScore (the same arithmetic, in the guest) gave the same decisions above.
    assert_eq!(promised.normalized_by_host, PODS as u64, "NormalizeScore computed by the host");
    assert_eq!(plain.normalized_by_host, 0);
}

#[test]
fn a_score_that_needs_no_normalize_and_reads_no_node_is_not_asked_to_normalize_nor_sent_rows() {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: NoNormalizeRandom}}, {{name: NormalizingLabel}}, {{name: PlainGoLabel}}]\n  pluginConfig:\n  - name: NoNormalizeRandom\n    args:\n      component: {}\n  - name: NormalizingLabel\n    args:\n      component: {}\n  - name: PlainGoLabel\n    args:\n      component: {}\n",
        guest("random-score").display(),
        guest("priority-label").display(),
        guest("priority-label-go").display()
    );
    let (reg, cfg) = registry_for(&yaml);
    let file = sim::load::parse("c.yaml", &cluster()).unwrap();
    // Explaining a decision asks every Score plugin for its normalized scores, the promised one included.
    let opts = SimOptions { seed: 7, explain: vec!["default/p0".into()], ..Default::default() };
    // Kept alive while its plugins are looked up.
    let s = Simulation::new(&cfg, &reg, &file, &opts).unwrap();
    let r = s.run();
    assert_eq!(r.placements.iter().filter(|p| p.node.is_some()).count(), PODS);
    assert!(!r.explain.is_empty(), "the decision was explained");
    let has_normalize = |name: &str| {
        let p = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
        p.as_score().expect("a Score plugin").has_normalize()
    };
    assert!(!has_normalize("NoNormalizeRandom"), "RandomScore promises its scores need no NormalizeScore");
    // Nor does its Score read a node: it was never sent one, while the label guests were sent every node.
    let rows = |name: &str| {
        let p = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
        p.stats.node_rows_sent.load(Relaxed)
    };
    assert_eq!(rows("NoNormalizeRandom"), 0, "RandomScore promises its Score reads no node");
    assert_eq!(rows("NormalizingLabel"), NODES as u64);
    assert!(rows("PlainGoLabel") >= NODES as u64);
    assert!(has_normalize("NormalizingLabel"), "PriorityLabel normalizes");
    assert!(has_normalize("PlainGoLabel"), "a guest that promises nothing is asked");
}

/// A profile with the hostile-c fixture at Score, its `declare` behaving as `declare` says.
fn hostile_profile(dir: &Path, declare: &str) -> std::path::PathBuf {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: HostileDeclare}}]\n  pluginConfig:\n  - name: HostileDeclare\n    args:\n      component: {}\n      config: {{mode: valid, declare: {declare}}}\n",
        guest("hostile-c").display()
    );
    let p = dir.join(format!("profile-{declare}.yaml"));
    std::fs::write(&p, yaml).unwrap();
    p
}

#[test]
fn a_declare_that_traps_or_contradicts_itself_refuses_the_plugin_and_unknown_bits_are_ignored() {
    let dir = TempDir::new("declare");
    let cluster_file = dir.path().join("c.yaml");
    std::fs::write(&cluster_file, cluster()).unwrap();
    let run = |declare: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(["simulate", "--config"])
            .arg(hostile_profile(dir.path(), declare))
            .arg("--cluster")
            .arg(&cluster_file)
            .output()
            .unwrap()
    };
    // Refused at load, before anything is scheduled, in one line that says why.
    let refused = |declare: &str, why: &str| {
        let out = run(declare);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(why), "{stderr}");
        assert!(out.stdout.is_empty(), "nothing was scheduled: {}", String::from_utf8_lossy(&out.stdout));
    };
    // A guest that cannot answer.
    refused("trap", "\"HostileDeclare\" at Declare: trapped");
    // Every bit of the answer set: normalize-default and normalize-default-reversed contradict each other.
    refused("every-bit", "normalize-default and normalize-default-reversed exclude each other");

    // Two of the contract's flags and 25 bits it does not have: the flags are taken, the other bits ignored.
    let out = run("unknown-bits");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (reg, cfg) = registry_for(&std::fs::read_to_string(hostile_profile(dir.path(), "unknown-bits")).unwrap());
    let file = sim::load::parse("c.yaml", &cluster()).unwrap();
    let _s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();
    let p = wasm::loaded_plugins().into_iter().find(|p| p.name() == "HostileDeclare").expect("the plugin is loaded");
    assert!(!p.as_score().expect("a Score plugin").has_normalize(), "score-needs-no-normalize was taken");
}
