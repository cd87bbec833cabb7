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
    kube_wasm_scheduler::scheduler::parse_config("sched.yaml", yaml, &|n| r.get(n).is_some())
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
    // A shadow listed first serves no pods, so it does not name the lease.
    let shadowed =
        parse(&format!("{HEAD}profiles:\n- schedulerName: trial\n- schedulerName: serving\n  shadow: trial\n"))
            .unwrap();
    assert_eq!(shadowed.leader_election.resource_name, "serving");
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
    // StorageCapacityScoring (beta, on since v1.37) makes VolumeBinding a Score plugin; multiPoint gives it 1.
    assert_eq!(w("VolumeBinding"), Some(1));
    assert_eq!(point(&l, "queueSort"), vec![("PrioritySort".to_string(), 1)]);
    assert_eq!(point(&l, "bind"), vec![("DefaultBinder".to_string(), 1)]);
    // Upstream puts DynamicResources before DefaultPreemption: deallocating an idle claim comes before evicting.
    // Its multiPoint weight is 2 since v1.35 (it scores only with DRA extended resources).
    assert_eq!(
        point(&l, "postFilter"),
        vec![("DynamicResources".to_string(), 2), ("DefaultPreemption".to_string(), 1)]
    );
    // v1.37's order: NodeName first; NodeDeclaredFeatures appended to the defaults.
    let filters: Vec<String> = point(&l, "filter").into_iter().map(|(n, _)| n).collect();
    assert_eq!(filters[..4], ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity"]);
    assert_eq!(filters.last().map(String::as_str), Some("NodeDeclaredFeatures"));
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
        (format!("{HEAD}profiles:\n- plugins:\n    filter:\n      enabled: [{{name: GCEPDLimits}}]\n"), "is an upstream plugin this scheduler does not implement"),
        (format!("{HEAD}leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n"), "sched.yaml: leaderElection.leaseDuration: must be greater than renewDeadline"),
        (format!("{HEAD}profiles:\n- schedulerName: a\n  plugins:\n    queueSort:\n      enabled: [{{name: Other}}]\n"), "unknown plugin \"Other\""),
    ];
    for (yaml, want) in cases {
        let e = parse(&yaml).unwrap_err();
        assert!(e.contains(want), "got {e:?}\nwant {want:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
    // Disabling upstream plugins this scheduler lacks is fine: configurations written for kube-scheduler load.
    parse(&format!("{HEAD}profiles:\n- plugins:\n    multiPoint:\n      disabled: [{{name: DynamicResources}}, {{name: GCEPDLimits}}]\n")).unwrap();
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
    let e = refused(&yaml);
    assert!(
        e.starts_with(
            "sched.yaml: profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: \"Sideways\""
        ),
        "{e}"
    );
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

/// The error for a configuration that must be refused (without printing the whole configuration when it is not).
fn refused(yaml: &str) -> String {
    match parse(yaml) {
        Ok(_) => panic!("accepted: {}", yaml.lines().take(12).collect::<Vec<_>>().join(" | ")),
        Err(e) => e,
    }
}

/// Runs the binary with `args` (each `{cfg}` replaced by a file holding `cfg`, `{cluster}` by a one-node cluster
/// file); returns the exit code and stderr.
fn run_binary(name: &str, cfg: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("kws-cfg-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("sched.yaml");
    let k = dir.join("cluster.yaml");
    std::fs::write(&c, cfg).unwrap();
    std::fs::write(&k, nodes_yaml(1)).unwrap();
    let out_file = dir.join("out.yaml");
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("{cfg}", &c.display().to_string())
                .replace("{cluster}", &k.display().to_string())
                .replace("{out}", &out_file.display().to_string())
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler")).args(&args).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Asserts exit code 2 and exactly one line on stderr containing `want`, and that nothing was written.
fn assert_refused(name: &str, cfg: &str, args: &[&str], want: &str) {
    let (code, stderr) = run_binary(name, cfg, args);
    assert_eq!(code, Some(2), "{name}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: one line: {stderr}");
    assert!(stderr.contains(want), "{name}: want {want:?} in {stderr}");
}

/// Durations past Go's limit (about 292 years) panicked in `Duration::from_secs_f64` (exit 101).
#[test]
fn regression_huge_durations_exit_2_not_101() {
    let sim = ["simulate", "--config", "{cfg}", "--cluster", "{cluster}"];
    let live = ["--config", "{cfg}", "--write-config-to", "{out}"];
    for (name, body, args, want) in [
        ("lease", "leaderElection:\n  leaseDuration: 99999999999999999h\n", &sim[..], "sched.yaml: leaderElection.leaseDuration: "),
        ("retry", "leaderElection:\n  leaderElect: false\n  retryPeriod: 2562048h\n", &sim[..], "sched.yaml: leaderElection.retryPeriod: "),
        ("renew-live", "leaderElection:\n  renewDeadline: 9223372036854775808ns\n", &live[..], "sched.yaml: leaderElection.renewDeadline: "),
        ("backoff", "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 9223372036854775807\n", &sim[..], "sched.yaml: podMaxBackoffSeconds: "),
        ("initial-backoff", "podInitialBackoffSeconds: 9223372037\npodMaxBackoffSeconds: 9223372037\n", &sim[..], "sched.yaml: podInitialBackoffSeconds: "),
        ("wasm-timeout", "profiles:\n- plugins:\n    filter:\n      enabled: [{name: W}]\n  pluginConfig:\n  - name: W\n    args: {component: x.wasm, timeout: 99999999999999999h}\n", &sim[..], "sched.yaml: profiles[0].pluginConfig[0].args"),
    ] {
        assert_refused(name, &format!("{HEAD}{body}"), args, want);
    }
    assert_refused(
        "flag",
        HEAD,
        &["--leader-elect-lease-duration=99999999999999999h", "--config", "{cfg}", "--write-config-to", "{out}"],
        "\"--leader-elect-lease-duration\"",
    );
}

/// `qps: .inf` and `.nan` were accepted (upstream cannot even decode them: JSON has no such numbers).
#[test]
fn regression_non_finite_qps_is_refused() {
    for qps in [".inf", "-.inf", ".nan", "1e39"] {
        let e = refused(&format!("{HEAD}clientConnection:\n  qps: {qps}\n"));
        assert!(e.starts_with("sched.yaml: clientConnection.qps: must be a finite number"), "{qps}: {e}");
    }
    parse(&format!("{HEAD}clientConnection:\n  qps: -1\n")).expect("a negative QPS turns the limit off, as upstream");
    assert_refused("qps-flag", HEAD, &["--kube-api-qps=NaN", "--write-config-to", "{out}"], "\"--kube-api-qps\"");
}

/// Plugin args were only checked when the framework was built (after the file was accepted), without the field
/// path, and VolumeBinding took any args at all.
#[test]
fn regression_plugin_args_are_checked_at_load_naming_the_field() {
    let pc = |name: &str, args: &str| format!("{HEAD}profiles:\n- pluginConfig:\n  - name: {name}\n    args: {args}\n");
    for (yaml, want) in [
        (pc("VolumeBinding", "{bindTimeoutSeconds: -1}"), "sched.yaml: profiles[0].pluginConfig[0].args.bindTimeoutSeconds: Invalid value: -1: "),
        (pc("VolumeBinding", "{shape: [{utilization: 0, score: 11}]}"), "sched.yaml: profiles[0].pluginConfig[0].args.shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
        (pc("VolumeBinding", "{bindTimeout: 5}"), "sched.yaml: profiles[0].pluginConfig[0].args.bindTimeout: unknown field"),
        (pc("InterPodAffinity", "{hardPodAffinityWeight: 101}"), "sched.yaml: profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
        (pc("NodeResourcesFit", "{scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 1}, {name: memory, weight: 101}]}}"), "sched.yaml: profiles[0].pluginConfig[0].args.scoringStrategy.resources[1].weight: Invalid value: 101: "),
        (pc("NodeResourcesFit", "{scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: -1}]}}"), "args.scoringStrategy.resources[0].weight: Invalid value: -1: "),
        (pc("NodeResourcesFit", "{scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: {shape: [{utilization: 0, score: 1}]}}}"), "args.scoringStrategy.requestedToCapacityRatio: Forbidden: "),
        (pc("NodeResourcesFit", "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 0, score: 11}]}}}"), "args.scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: "),
        (pc("NodeResourcesFit", "{scoringStrategy: {resources: [{name: cpu, weight: x}]}}"), "args.scoringStrategy.resources[0].weight: invalid type"),
        (pc("NodeResourcesBalancedAllocation", "{resources: [{name: cpu, weight: 2}]}"), "args.resources[0].weight: Invalid value: 2: must be 1"),
        (pc("DefaultPreemption", "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}"), "args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero"),
        (pc("PodTopologySpread", "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}"), "args.defaultConstraints[0].maxSkew: Invalid value: 0: "),
        (pc("NodeAffinity", "{addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Bogus}]}]}}}"), "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"),
        (pc("InterPodAffinity", "{kind: NodeResourcesFitArgs}"), "args.kind: "),
    ] {
        let e = refused(&yaml);
        assert!(e.contains(want), "got {e:?}\nwant {want:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
    assert_refused(
        "args",
        &pc("VolumeBinding", "{bindTimeoutSeconds: -1}"),
        &["simulate", "--config", "{cfg}", "--cluster", "{cluster}"],
        "sched.yaml: profiles[0].pluginConfig[0].args.bindTimeoutSeconds: ",
    );
}

/// A resource weight of 0 is upstream's "unset": it means 1 (v1 `ResourceSpec.weight` is not a pointer).
#[test]
fn scoring_resource_weight_zero_means_one_as_upstream() {
    let yaml = format!("{HEAD}profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {{scoringStrategy: {{type: LeastAllocated, resources: [{{name: cpu, weight: 0}}]}}}}\n  - name: NodeResourcesBalancedAllocation\n    args: {{resources: [{{name: cpu, weight: 0}}]}}\n");
    framework(&yaml);
}

/// 100,000 profiles took 1.2 GB: each was cloned and merged with the defaults before anything was refused.
#[test]
fn regression_many_profiles_are_refused_early() {
    let mut yaml = format!("{HEAD}profiles:\n");
    for i in 0..=config::MAX_PROFILES {
        yaml.push_str(&format!("- schedulerName: s{i}\n"));
    }
    let e = refused(&yaml);
    assert!(e.starts_with(&format!("sched.yaml: profiles: at most {} profiles", config::MAX_PROFILES)), "{e}");
}
