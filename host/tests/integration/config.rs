//! KubeSchedulerConfiguration v1: defaults, multiPoint expansion, and one-line errors naming file and field.

use std::process::Command;

use kube_wasm_scheduler::config;
use kube_wasm_scheduler::framework::parallelize::Parallelizer;
use kube_wasm_scheduler::framework::Framework;
use kube_wasm_scheduler::framework::PluginContext;
use kube_wasm_scheduler::plugins::in_tree_registry;

use crate::util::*;

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

fn parse(yaml: &str) -> Result<config::SchedulerConfig, String> {
    let r = in_tree_registry();
    config::parse("sched.yaml", yaml, &|n| r.get(n).is_some())
        .map_err(|e| config::with_known_names(e, &r.names()).to_string())
}

fn framework(yaml: &str) -> Framework {
    let r = in_tree_registry();
    let cfg = parse(yaml).unwrap();
    let ctx = PluginContext::new(std::sync::Arc::new(kube_wasm_scheduler::cluster::memory::MemoryCluster::default()));
    Framework::new(&cfg.profiles[0], cfg.percentage_of_nodes_to_score, &r, &ctx, Parallelizer::new(2)).unwrap()
}

fn point(f: &[(&'static str, Vec<(String, i64)>)], p: &str) -> Vec<(String, i64)> {
    f.iter().find(|(n, _)| *n == p).unwrap().1.clone()
}

#[test]
fn defaults_apply_where_the_file_is_silent() {
    let cfg = parse(HEAD).unwrap();
    assert_eq!(cfg.profiles.len(), 1);
    assert_eq!(cfg.profiles[0].scheduler_name, "default-scheduler");
    assert_eq!(cfg.parallelism, 16);
    assert_eq!(cfg.pod_initial_backoff.as_secs(), 1);
    assert_eq!(cfg.pod_max_backoff.as_secs(), 10);
    assert!(cfg.leader_election.leader_elect);
    assert_eq!(cfg.leader_election.resource_name, "default-scheduler");
    let f = framework(HEAD);
    let l = f.list_plugins();
    let score = point(&l, "score");
    let w = |n: &str| score.iter().find(|(x, _)| x == n).map(|(_, w)| *w);
    assert_eq!(w("TaintToleration"), Some(3));
    assert_eq!(w("NodeAffinity"), Some(2));
    assert_eq!(w("PodTopologySpread"), Some(2));
    assert_eq!(w("InterPodAffinity"), Some(2));
    assert_eq!(w("NodeResourcesFit"), Some(1));
    assert_eq!(w("NodeResourcesBalancedAllocation"), Some(1));
    assert_eq!(w("ImageLocality"), Some(1));
    assert_eq!(point(&l, "queueSort"), vec![("PrioritySort".to_string(), 1)]);
    assert_eq!(point(&l, "bind"), vec![("DefaultBinder".to_string(), 1)]);
    assert_eq!(point(&l, "postFilter"), vec![("DefaultPreemption".to_string(), 1)]);
    let filters: Vec<String> = point(&l, "filter").into_iter().map(|(n, _)| n).collect();
    assert_eq!(filters[..4], ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"]);
}

#[test]
fn explicit_entries_override_multipoint_and_disabled_removes() {
    let yaml = format!(
        "{HEAD}profiles:\n- schedulerName: my-scheduler\n  plugins:\n    score:\n      enabled: [{{name: NodeResourcesFit, weight: 7}}]\n      disabled: [{{name: ImageLocality}}]\n    filter:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: NodeName}}]\n"
    );
    let f = framework(&yaml);
    let l = f.list_plugins();
    let score = point(&l, "score");
    assert_eq!(score[0], ("NodeResourcesFit".to_string(), 7), "an override comes first with its weight");
    assert!(!score.iter().any(|(n, _)| n == "ImageLocality"));
    assert_eq!(point(&l, "filter"), vec![("NodeName".to_string(), 1)], "'*' stops multiPoint expansion at filter");
    assert!(!point(&l, "preFilter").is_empty(), "other points still expand");
}

#[test]
fn errors_name_file_and_field_in_one_line() {
    let cases = [
        (format!("{HEAD}profiles:\n- plugins:\n    score:\n      enabled: [{{name: NoSuchPlugin}}]\n"), "sched.yaml: profiles[0].plugins.score.enabled[0].name: unknown plugin \"NoSuchPlugin\" (known plugins: DefaultBinder, "),
        (format!("{HEAD}profiles:\n- plugins:\n    score:\n      enabled: [{{name: ImageLocality, weight: -1}}]\n"), "sched.yaml: profiles[0].plugins.score.enabled[0].weight: must not be negative, got -1"),
        (format!("{HEAD}profiles:\n- plugins:\n    filtr:\n      enabled: []\n"), "sched.yaml: profiles[0].plugins.filtr: unknown field `filtr`, expected one of `preEnqueue`"),
        (format!("{HEAD}percentageOfNodesToScore: 120\n"), "sched.yaml: percentageOfNodesToScore: not in valid range [0-100], got 120"),
        (format!("{HEAD}podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"), "sched.yaml: podMaxBackoffSeconds: should be greater than or equal to podInitialBackoffSeconds"),
        (format!("{HEAD}clientConnection:\n  qps: 5\n  burst: -3\n"), "sched.yaml: clientConnection.burst: must be non-negative, got -3"),
        (format!("{HEAD}profiles:\n- schedulerName: a\n- schedulerName: a\n"), "sched.yaml: profiles[1].schedulerName: duplicate profile"),
        ("apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n".to_string(), "sched.yaml: apiVersion: kubescheduler.config.k8s.io/v1beta3 is not supported; this scheduler reads kubescheduler.config.k8s.io/v1"),
        (format!("{HEAD}profiles:\n- pluginConfig:\n  - name: Nope\n    args: {{}}\n"), "sched.yaml: profiles[0].pluginConfig[0].name: unknown plugin \"Nope\""),
        (format!("{HEAD}profiles:\n- plugins:\n    filter:\n      enabled: [{{name: VolumeZone}}]\n"), "is an upstream plugin this scheduler does not implement"),
        (format!("{HEAD}leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n"), "sched.yaml: leaderElection.leaseDuration: must be greater than renewDeadline"),
        (format!("{HEAD}profiles:\n- schedulerName: a\n  plugins:\n    queueSort:\n      enabled: [{{name: Other}}]\n"), "unknown plugin \"Other\""),
    ];
    for (yaml, want) in cases {
        let e = parse(&yaml).unwrap_err();
        assert!(e.contains(want), "got {e:?}\nwant {want:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
    // Disabling upstream plugins this scheduler lacks is fine: configurations written for kube-scheduler load.
    parse(&format!("{HEAD}profiles:\n- plugins:\n    multiPoint:\n      disabled: [{{name: VolumeZone}}, {{name: NodeVolumeLimits}}]\n")).unwrap();
}

#[test]
fn a_second_queue_sort_is_refused() {
    let yaml = format!(
        "{HEAD}profiles:\n- plugins:\n    queueSort:\n      enabled: [{{name: PrioritySort}}, {{name: NodeName}}]\n"
    );
    let r = in_tree_registry();
    let cfg = parse(&yaml).unwrap();
    let ctx = PluginContext::new(std::sync::Arc::new(kube_wasm_scheduler::cluster::memory::MemoryCluster::default()));
    let e = Framework::new(&cfg.profiles[0], None, &r, &ctx, Parallelizer::new(1)).unwrap_err().to_string();
    assert!(e.contains("NodeName") && e.contains("does not implement queueSort"), "{e}");
}

#[test]
fn bad_plugin_args_are_refused_naming_the_plugin() {
    let yaml = format!("{HEAD}profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Sideways\n");
    let r = in_tree_registry();
    let cfg = parse(&yaml).unwrap();
    let ctx = PluginContext::new(std::sync::Arc::new(kube_wasm_scheduler::cluster::memory::MemoryCluster::default()));
    let e = Framework::new(&cfg.profiles[0], None, &r, &ctx, Parallelizer::new(1)).unwrap_err().to_string();
    assert!(e.contains("NodeResourcesFit") && e.contains("Sideways"), "{e}");
}

/// The binary: exit code 2 and one line on stderr for bad configs and bad cluster files; nothing panics.
#[test]
fn cli_bad_input_exits_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("kws-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good_cluster = dir.join("ok.yaml");
    std::fs::write(&good_cluster, nodes_yaml(1) + &pod_yaml("p", "")).unwrap();
    let cases: Vec<(String, String, &str)> = vec![
        (format!("{HEAD}profiles:\n- plugins:\n    score:\n      enabled: [{{name: Nope}}]\n"), nodes_yaml(1), "profiles[0].plugins.score.enabled[0].name: unknown plugin \"Nope\""),
        (HEAD.to_string(), "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, ports: [{containerPort: x}]}]}\n".into(), "document 1 (Pod p): spec.containers[0].ports[0].containerPort"),
        ("{{{".to_string(), nodes_yaml(1), "not valid YAML"),
        (HEAD.to_string(), "- a\n- : b: c\n".into(), "document 0"),
    ];
    for (i, (cfg, cluster, want)) in cases.into_iter().enumerate() {
        let c = dir.join(format!("cfg{i}.yaml"));
        let k = dir.join(format!("cluster{i}.yaml"));
        std::fs::write(&c, cfg).unwrap();
        std::fs::write(&k, cluster).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(["simulate", "--config"])
            .arg(&c)
            .arg("--cluster")
            .arg(&k)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "case {i}: one line: {stderr}");
        assert!(stderr.contains(want), "case {i}: {stderr}");
        assert!(!stderr.contains("panicked"), "case {i}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
