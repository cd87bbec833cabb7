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

/// Placements of the cluster under a PriorityLabel build, and the node rows the plugin was sent.
fn run(name: &str, component: &Path) -> (Vec<(String, Option<String>)>, u64) {
    let (reg, cfg) = registry_for(&label_profile(name, component));
    let file = sim::load::parse("c.yaml", &cluster()).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions { seed: 7, ..Default::default() }).unwrap();
    let r = s.run();
    let placements = r.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect();
    let plugin = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
    (placements, plugin.stats.node_rows_sent.load(Relaxed))
}

#[test]
fn a_guest_that_ignores_usage_is_sent_each_node_once_and_decides_as_one_that_reads_it() {
    let (promised, promised_rows) = run("DeclaringLabel", &guest("priority-label"));
    let (plain, plain_rows) = run("PlainLabel", &guest("priority-label-c"));
    let bound = plain.iter().filter(|(_, n)| n.is_some()).count();
    assert_eq!(bound, PODS, "every pod fits");
    let nodes_used: std::collections::HashSet<_> = plain.iter().filter_map(|(_, n)| n.as_ref()).collect();
    assert!(nodes_used.len() > 16, "usage matters to the decisions: pods spread over {} nodes", nodes_used.len());
    assert_eq!(promised, plain, "the promise changes no decision");
    // One instance (parallelism 1) holds the table: each node once, never again, since only pods changed.
    assert_eq!(promised_rows, NODES as u64, "the guest that ignores usage");
    // Without the promise, a binding resends its node before the next cycle's Score, unless the binding filled it
    // (Filter then keeps it out of scoring): about 19 nodes fill up.
    assert!(plain_rows > (NODES + PODS / 2) as u64, "the guest without promises was sent {plain_rows} rows");
}

#[test]
fn a_score_that_needs_no_normalize_is_not_asked_to_normalize() {
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
fn a_declare_that_traps_refuses_the_plugin_and_unknown_bits_are_ignored() {
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
    // Asked at load: a guest that cannot answer is refused before anything is scheduled, in one line.
    let out = run("trap");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("\"HostileDeclare\" at Declare: trapped"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was scheduled: {}", String::from_utf8_lossy(&out.stdout));

    // Every bit of the answer set: the two flags the contract has are taken, the other 30 bits ignored.
    let out = run("every-bit");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (reg, cfg) = registry_for(&std::fs::read_to_string(hostile_profile(dir.path(), "every-bit")).unwrap());
    let file = sim::load::parse("c.yaml", &cluster()).unwrap();
    let _s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();
    let p = wasm::loaded_plugins().into_iter().find(|p| p.name() == "HostileDeclare").expect("the plugin is loaded");
    assert!(!p.as_score().expect("a Score plugin").has_normalize(), "score-needs-no-normalize was taken");
}
