//! OpportunisticBatching end to end in the simulator: which profiles sign pods, and a run of identical pods in a
//! profile that does (PodTopologySpread with `defaultingType: List`, no default constraints) placed one per node,
//! from the hints, exactly where the run without the gate places them.

use kube_wasm_scheduler::config::{Features, SchedulerConfig};
use kube_wasm_scheduler::framework::{PodInfo, Snapshot};
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{self, Report, SimOptions, Simulation};

/// Upstream's default plugins, PodTopologySpread without system defaults: the default profile's pods are never
/// signed (its system default constraints make every pod unsignable), this one's are.
const LIST_PROFILE: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args: {defaultingType: List}
";

const DEFAULT_PROFILE: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
";

fn config(yaml: &str, batching: bool) -> SchedulerConfig {
    let registry = in_tree_registry();
    let features = Features { opportunistic_batching: batching, ..Features::default() };
    kube_wasm_scheduler::scheduler::parse_config_with("test.yaml", yaml, &|n| registry.get(n).is_some(), features)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `nodes` nodes where one pod of `pods` fits each (1 CPU asked, n{i} offers 1 CPU + 50m·i: the bigger the node,
/// the higher its score, every score distinct), then the pods, alike but for their names.
fn cluster(nodes: usize, pods: usize) -> String {
    let mut out = String::new();
    for i in 0..nodes {
        out.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: '{}m', memory: 8Gi, pods: '110'}}\n---\n",
            1000 + 50 * i
        ));
    }
    for p in 0..pods {
        out.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{p:02}\n  namespace: default\n  labels: {{app: web}}\nspec:\n  containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: '1', memory: 100Mi}}}}}}]\n---\n"
        ));
    }
    out
}

/// Runs the cluster; returns the report and how many pods went to their hint.
fn run(cfg: &SchedulerConfig, cluster: &str) -> (Report, u64) {
    let file = sim::load::parse("cluster.yaml", cluster).unwrap_or_else(|e| panic!("{e}"));
    let s = Simulation::new(cfg, &in_tree_registry(), &file, &SimOptions { seed: 1, ..Default::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    let report = s.run();
    let batched = s.scheduler().profiles.get("default-scheduler").expect("profile").total_batched_pods();
    (report, batched)
}

fn placements(r: &Report) -> Vec<(String, Option<String>)> {
    r.placements.iter().map(|p| (p.pod.clone(), p.node.clone())).collect()
}

#[test]
fn only_a_profile_without_default_spread_constraints_signs_pods() {
    let registry = in_tree_registry();
    let ctx = kube_wasm_scheduler::framework::PluginContext::new(std::sync::Arc::new(
        kube_wasm_scheduler::cluster::memory::MemoryCluster::default(),
    ));
    let pod = PodInfo::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .unwrap(),
    )
    .unwrap();
    let other = PodInfo::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "tolerations": [{"key": "k", "operator": "Exists"}]}
        }))
        .unwrap(),
    )
    .unwrap();
    let snapshot = Snapshot::default();
    let signature = |yaml: &str, batching: bool, pod: &PodInfo| {
        let profiles =
            kube_wasm_scheduler::scheduler::build_profiles(&config(yaml, batching), &registry, &ctx).unwrap();
        let fwk = profiles.get("default-scheduler").unwrap().clone();
        (fwk.batching(), fwk.signs_pods(), fwk.sign_pod(pod, &snapshot, &None))
    };
    let (on, signs, sig) = signature(DEFAULT_PROFILE, true, &pod);
    // Every default plugin can sign, but PodTopologySpread refuses every pod while it has default constraints.
    assert!(on && signs && sig.is_none(), "the default profile batches nothing");
    let (on, signs, sig) = signature(LIST_PROFILE, true, &pod);
    assert!(on && signs, "defaultingType: List signs");
    let sig = sig.expect("a plain pod is signed");
    let renamed = PodInfo::new({
        let mut p = (*pod.pod).clone();
        p.metadata.name = Some("a2".into());
        p
    })
    .unwrap();
    assert_eq!(signature(LIST_PROFILE, true, &renamed).2, Some(sig.clone()), "the name is not part of it");
    assert_ne!(signature(LIST_PROFILE, true, &other).2, Some(sig), "tolerations are");
    let (on, signs, _) = signature(LIST_PROFILE, false, &pod);
    assert!(!on && !signs, "the gate off");
}

#[test]
fn identical_pods_go_to_their_hints_where_the_gate_off_places_them() {
    const NODES: usize = 12;
    const PODS: usize = 10;
    let cluster = cluster(NODES, PODS);
    let (on, batched) = run(&config(LIST_PROFILE, true), &cluster);
    let (off, unbatched) = run(&config(LIST_PROFILE, false), &cluster);
    assert_eq!(placements(&on), placements(&off));
    // One per node, biggest node first.
    let want: Vec<(String, Option<String>)> =
        (0..PODS).map(|p| (format!("default/p{p:02}"), Some(format!("n{}", NODES - 1 - p)))).collect();
    assert_eq!(placements(&on), want);
    // The first pod is scored in full; every later one takes its hint.
    assert_eq!((batched, unbatched), (PODS as u64 - 1, 0));
    // The default profile signs no pod, so it batches none, and places them the same way.
    let (default_on, default_batched) = run(&config(DEFAULT_PROFILE, true), &cluster);
    assert_eq!(default_batched, 0);
    assert_eq!(placements(&default_on), want);
}

#[test]
fn a_node_that_still_fits_is_rescored_and_placements_stay_those_of_the_gate_off() {
    const NODES: usize = 6;
    const PODS: usize = 10;
    // Two pods fit each node: the previous pod's node is rescored before each hint.
    let mut cluster = String::new();
    for i in 0..NODES {
        cluster.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: '{}m', memory: 8Gi, pods: '110'}}\n---\n",
            2000 + 130 * i
        ));
    }
    for p in 0..PODS {
        cluster.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{p:02}\n  namespace: default\nspec:\n  containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: '1', memory: 100Mi}}}}}}]\n---\n"
        ));
    }
    let (on, batched) = run(&config(LIST_PROFILE, true), &cluster);
    let (off, _) = run(&config(LIST_PROFILE, false), &cluster);
    assert_eq!(placements(&on), placements(&off));
    assert!(placements(&on).iter().all(|(_, n)| n.is_some()), "{:?}", placements(&on));
    // After the first pod, every pod takes its hint: the rescored previous node while it has room, the next
    // cached node once it is full.
    assert_eq!(batched, PODS as u64 - 1);
}
