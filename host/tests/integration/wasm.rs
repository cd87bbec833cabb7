//! Wasm plugins, with the real guests built by `make guests` (guest-plugins/build/*.wasm): the seed scenarios,
//! the same policy in four languages, hot reload under load, hostile guests, and `plugin check`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_wasm_scheduler::framework::{action, ClusterEvent, EventResource};
use kube_wasm_scheduler::sim::{self, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;

use crate::util::*;

/// A built guest; `make test` builds them first, so a missing one is a failure, not a skip.
pub fn guest(name: &str) -> PathBuf {
    let p = root().join("guest-plugins/build").join(format!("{name}.wasm"));
    assert!(p.exists(), "{} is missing: run `make guests`", p.display());
    p
}

pub fn registry_for(
    cfg_yaml: &str,
) -> (kube_wasm_scheduler::framework::Registry, kube_wasm_scheduler::config::SchedulerConfig) {
    let mut reg = registry_with(vec![]);
    let cfg = config(&reg, cfg_yaml);
    wasm::register_plugins(&mut reg, &cfg, std::path::Path::new("/"));
    (reg, cfg)
}

pub fn label_profile(component: &std::path::Path, extra_args: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: PriorityLabel, weight: 5}}]\n  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {}\n{extra_args}",
        component.display()
    )
}

pub fn node_yaml(name: &str, label: Option<&str>) -> String {
    let l = label.map(|v| format!(", priority.example.com: \"{v}\"")).unwrap_or_default();
    format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}{l}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 256Gi, pods: '500'}}\n---\n")
}

fn node_obj(name: &str, label: Option<&str>) -> k8s_openapi::api::core::v1::Node {
    let doc = node_yaml(name, label);
    serde_yaml::from_str(doc.trim_end_matches("---\n")).unwrap()
}

/// Relabels a node in the running simulation, as an informer would deliver the update.
fn relabel(s: &Simulation, name: &str, value: &str) {
    let sched = s.scheduler();
    sched.cache.lock().unwrap().add_node(node_obj(name, Some(value))).unwrap();
    let now = sched.clock.now();
    sched.queue.lock().unwrap().on_event(ClusterEvent::new(EventResource::Node, action::UPDATE_LABEL), now);
}

pub fn add_pod(s: &Simulation, name: &str) {
    let p = pod_yaml(name, "");
    let pod: k8s_openapi::api::core::v1::Pod = serde_yaml::from_str(p.trim_end_matches("---\n")).unwrap();
    let info = Arc::new(kube_wasm_scheduler::framework::PodInfo::new(pod).unwrap());
    let now = s.scheduler().clock.now();
    s.scheduler().queue.lock().unwrap().add(info, now);
}

/// The seed's label scenario with one implementation of the policy.
fn label_scenario(component: &str) {
    let (reg, cfg) = registry_for(&label_profile(&guest(component), ""));
    let cluster = node_yaml("scheduler-1", None) + &node_yaml("scheduler-2", None) + &pod_yaml("p1", "");
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();

    // No labels: both nodes rejected, the reason counted once for both.
    let r = s.run();
    assert_eq!(node_of(&r, "default/p1"), None, "{component}");
    let m = message_of(&r, "default/p1");
    assert!(
        m.starts_with("0/2 nodes are available: 2 node(s) didn't have label priority.example.com."),
        "{component}: {m}"
    );

    // scheduler-1=10: the pending pod lands there, with no change to the pod.
    relabel(&s, "scheduler-1", "10");
    let r = s.run();
    assert_eq!(node_of(&r, "default/p1").as_deref(), Some("scheduler-1"), "{component}");

    // scheduler-2=20: a new pod lands on scheduler-2.
    relabel(&s, "scheduler-2", "20");
    add_pod(&s, "p2");
    let r = s.run();
    assert_eq!(node_of(&r, "default/p2").as_deref(), Some("scheduler-2"), "{component}");

    // scheduler-1=30: the next pod lands on scheduler-1.
    relabel(&s, "scheduler-1", "30");
    add_pod(&s, "p3");
    let r = s.run();
    assert_eq!(node_of(&r, "default/p3").as_deref(), Some("scheduler-1"), "{component}");

    // A non-integer value is an Error naming the node and the value.
    relabel(&s, "scheduler-2", "high");
    add_pod(&s, "p4");
    let r = s.run();
    let m = message_of(&r, "default/p4");
    assert!(m.contains("scheduler-2") && m.contains("\"high\""), "{component}: {m}");
}

#[test]
fn seed_label_scenario_rust() {
    label_scenario("priority-label");
}

#[test]
fn seed_label_scenario_c() {
    label_scenario("priority-label-c");
}

#[test]
fn seed_label_scenario_python() {
    label_scenario("priority-label-py");
}

#[test]
fn seed_label_scenario_javascript() {
    label_scenario("priority-label-js");
}

/// Places three pods on a 3,000-node cluster (one node labelled far above the rest) with the given parallelism;
/// returns the placements and how many instances the Wasm plugin created.
fn large_cluster_run(parallelism: u32) -> (Vec<Option<String>>, u64) {
    // A name of its own, so the plugin can be told apart from other tests' in this process.
    let name = format!("LargeClusterLabel{parallelism}");
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: {parallelism}\npercentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: {name}, weight: 5}}]\n  pluginConfig:\n  - name: {name}\n    args:\n      component: {}\n",
        guest("priority-label").display()
    );
    let (reg, cfg) = registry_for(&yaml);
    let mut cluster = String::new();
    for i in 0..3000 {
        let value = if i == 2345 { 5000 } else { i % 1000 };
        cluster += &node_yaml(&format!("n-{i}"), Some(&value.to_string()));
    }
    for p in ["a", "b", "c"] {
        cluster += &pod_yaml(p, "");
    }
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();
    let r = s.run();
    let placed = ["a", "b", "c"].iter().map(|p| node_of(&r, &format!("default/{p}"))).collect();
    use kube_wasm_scheduler::framework::Plugin as _;
    let plugin = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
    let instances = plugin.stats.instances.load(std::sync::atomic::Ordering::Relaxed);
    (placed, instances)
}

#[test]
fn parallel_filter_and_score_run_on_separate_instances_and_agree_with_one() {
    // 3,000 nodes split into chunks of at least 1,024, one per thread: with two threads the guest's Filter and
    // Score run on two instances at once (a pool, not one instance behind a lock), each with its own node table.
    let (one, serial) = large_cluster_run(1);
    let (two, parallel) = large_cluster_run(2);
    let want = vec![Some("n-2345".to_string()); 3];
    assert_eq!(one, want, "the node labelled 5000 wins every time");
    assert_eq!(two, want, "the same decisions with the work split across instances");
    assert_eq!(serial, 1, "one thread needs one instance");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(parallel >= 2, "two threads ran the guest on {parallel} instance(s)");
    }
}

#[test]
fn qos_sort_guest_orders_guaranteed_first() {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .current_dir(root())
        .args([
            "simulate",
            "--config",
            "examples/wasm-qos-sort/profile.yaml",
            "--cluster",
            "examples/wasm-qos-sort/cluster.yaml",
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bound: Vec<&str> = v["placements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["node"].is_string())
        .map(|p| p["pod"].as_str().unwrap())
        .collect();
    assert_eq!(bound, ["default/guaranteed"], "the Guaranteed pod is scheduled first and takes the only slot");
    // The same cluster with the default PrioritySort: the first arrival (BestEffort) wins.
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .current_dir(root())
        .args(["simulate", "--cluster", "examples/wasm-qos-sort/cluster.yaml", "--output", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = v["placements"].as_array().unwrap().iter().find(|p| p["node"].is_string()).unwrap()["pod"].clone();
    assert_eq!(first, "default/best-effort");
}

#[test]
fn scoring_takes_the_instance_whose_node_table_is_loaded_not_one_that_only_served_post_bind() {
    use kube_wasm_scheduler::framework::{CycleState, Plugin as _};
    use std::sync::atomic::Ordering::Relaxed;
    const NODES: usize = 2000;
    // A name of its own, so the plugin's counters are this test's alone. The C fixture in its valid mode: a guest
    // at every point, Score and PostBind included, that promises nothing (so its Score is sent the table).
    let name = "PoolEveryPoint";
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 1\npercentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: {name}}}]\n    postBind:\n      enabled: [{{name: {name}}}]\n  pluginConfig:\n  - name: {name}\n    args:\n      component: {}\n      config: {{mode: valid}}\n",
        guest("hostile-c").display()
    );
    let (reg, cfg) = registry_for(&yaml);
    let cluster = nodes_yaml(NODES) + &pod_yaml("first", "");
    let s =
        Simulation::new(&cfg, &reg, &sim::load::parse("c.yaml", &cluster).unwrap(), &SimOptions::default()).unwrap();
    assert!(node_of(&s.run(), "default/first").is_some());
    let plugin = wasm::loaded_plugins().into_iter().find(|p| p.name() == name).expect("the plugin is loaded");
    let rows = || plugin.stats.node_rows_sent.load(Relaxed);
    assert!(rows() >= NODES as u64, "the first Score loaded the table: {} rows", rows());
    // Binding cycles run PostBind several at a time (live, one per core): the pool grows cold instances.
    let pod = Arc::new(
        kube_wasm_scheduler::framework::PodInfo::new(
            serde_yaml::from_str(pod_yaml("bound", "").trim_end_matches("---\n")).unwrap(),
        )
        .unwrap(),
    );
    // One thread scored (parallelism 1): one instance, with the whole table. Sixteen threads calling PostBind
    // together make the pool grow cold ones.
    let barrier = std::sync::Barrier::new(16);
    std::thread::scope(|t| {
        for _ in 0..16 {
            t.spawn(|| {
                barrier.wait();
                // Many calls, so that some overlap even on a busy machine with a guest whose PostBind is quick.
                for _ in 0..400 {
                    plugin.as_post_bind().expect("PostBind").post_bind(&mut CycleState::new(), &pod, "n1");
                }
            });
        }
    });
    let instances = plugin.stats.instances.load(Relaxed);
    assert!(instances >= 2, "concurrent PostBinds ran on {instances} instance(s): the pool did not grow");
    let before = rows();
    for p in ["a", "b", "c"] {
        add_pod(&s, p);
    }
    let r = s.run();
    assert!(["a", "b", "c"].iter().all(|p| node_of(&r, &format!("default/{p}")).is_some()));
    // The warm instance gets only the nodes that changed; a cold one would be sent all 2,000.
    let sent = rows() - before;
    assert!(sent < NODES as u64 / 10, "scoring 3 pods sent {sent} node rows over {instances} instances");
}

#[test]
fn random_score_spreads_pods_and_logs_each_decision_at_debug_level() {
    let dir = std::env::temp_dir().join(format!("kws-random-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: PrioritySort}}, {{name: DefaultBinder}}, {{name: RandomScore}}]\n  pluginConfig:\n  - name: RandomScore\n    args:\n      component: {}\n",
        guest("random-score").display()
    );
    std::fs::write(dir.join("p.yaml"), profile).unwrap();
    let cluster = nodes_yaml(4) + &(0..40).map(|i| pod_yaml(&format!("r{i}"), "")).collect::<String>();
    std::fs::write(dir.join("c.yaml"), cluster).unwrap();
    let run = |level: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .env("KWS_LOG", level)
            .args(["simulate", "--seed", "3", "--output", "json", "--config"])
            .arg(dir.join("p.yaml"))
            .arg("--cluster")
            .arg(dir.join("c.yaml"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["placements"].as_array().unwrap().clone(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (placements, log) = run("debug");
    let used: std::collections::HashSet<&str> = placements.iter().filter_map(|p| p["node"].as_str()).collect();
    assert_eq!(placements.iter().filter(|p| p["node"].is_string()).count(), 40);
    assert!(used.len() >= 3, "random scores spread pods: {used:?}");
    for p in &placements {
        let line = format!("Decision: {} => {}", p["pod"].as_str().unwrap(), p["node"].as_str().unwrap());
        assert!(log.contains(&line), "missing {line:?} in the log");
    }
    // At info level the guest asks `log-enabled` and builds no line: none written, none counted as dropped.
    let (at_info, log) = run("info");
    assert_eq!(at_info, placements, "the same seed, the same decisions");
    assert!(!log.contains("Decision:") && !log.contains("rate limit"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hot_reload_swaps_the_component_while_scheduling() {
    let dir = std::env::temp_dir().join(format!("kws-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let live = dir.join("priority-label.wasm");
    std::fs::copy(guest("priority-label"), &live).unwrap();
    let (reg, cfg) = registry_for(&label_profile(&live, ""));
    let cluster = node_yaml("low", Some("10")) + &node_yaml("high", Some("90"));
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(
        &cfg,
        &reg,
        &file,
        &SimOptions { reload_period: Some(Duration::from_millis(20)), ..Default::default() },
    )
    .unwrap();
    let fwk = s.scheduler().profiles.get("default-scheduler").unwrap().clone();
    let plugin = fwk.plugin("PriorityLabel").unwrap().clone();
    let before = wasm::engine::sha256_hex(&std::fs::read(&live).unwrap());

    // Pods keep coming while the file is replaced by a build that inverts the score.
    let mut placed = Vec::new();
    let swap_at = 30;
    for i in 0..200 {
        if i == swap_at {
            let tmp = dir.join("next.wasm");
            std::fs::copy(guest("priority-label-inverted"), &tmp).unwrap();
            std::fs::rename(&tmp, &live).unwrap();
        }
        add_pod(&s, &format!("p{i}"));
        let r = s.run();
        let p = r.placements.iter().find(|p| p.pod == format!("default/p{i}")).unwrap().clone();
        assert!(p.node.is_some(), "no cycle fails during the swap: {p:?}");
        placed.push(p.node.unwrap());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(placed[..swap_at].iter().all(|n| n == "high"), "before: {:?}", &placed[..swap_at]);
    assert_eq!(placed.last().unwrap(), "low", "later decisions follow the new file");
    let first_low = placed.iter().position(|n| n == "low").unwrap();
    assert!(placed[first_low..].iter().all(|n| n == "low"), "once swapped, every decision follows the new file");

    // A corrupt replacement keeps the previous version serving.
    assert_eq!(plugin.name(), "PriorityLabel");
    let wp = wasm::loaded_plugins()
        .into_iter()
        .find(|p| p.component().as_path() == Some(live.as_path()))
        .expect("the running plugin");
    let inverted = wasm::engine::sha256_hex(&std::fs::read(guest("priority-label-inverted")).unwrap());
    assert_ne!(wp.digest(), before);
    assert_eq!(wp.digest(), inverted, "the inverted build serves");
    assert!(wp.stats.reloads.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    std::fs::write(dir.join("bad.wasm"), b"\0asm garbage").unwrap();
    std::fs::rename(dir.join("bad.wasm"), &live).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    add_pod(&s, "after-corrupt");
    std::thread::sleep(Duration::from_millis(200));
    let r = s.run();
    assert_eq!(node_of(&r, "default/after-corrupt").as_deref(), Some("low"), "the inverted version still serves");
    assert!(Instant::now() < deadline);
    assert_eq!(wp.digest(), inverted, "the corrupt file was not swapped in");
    assert!(wp.stats.reload_failures.load(std::sync::atomic::Ordering::Relaxed) >= 1, "the refusal is reported");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plugin_check_describes_a_component_and_refuses_bad_files() {
    let bin = env!("CARGO_BIN_EXE_kube-wasm-scheduler");
    let out = Command::new(bin).args(["plugin", "check"]).arg(guest("priority-label")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("kws:plugin@0.2.1"), "{stdout}");
    assert!(stdout.contains("extension points: Filter, Score"), "{stdout}");
    assert!(stdout.contains("kws:plugin/host@0.2.1"), "{stdout}");
    assert!(
        stdout.contains(
            "declares:         ignores-node-usage, score-reads-node-only, normalize-default, needs-no-cycle-begin\n"
        ),
        "{stdout}"
    );

    let dir = std::env::temp_dir().join(format!("kws-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &[u8], &str); 6] = [
        ("core.wasm", b"\0asm\x01\0\0\0", "not a WebAssembly component: a core WebAssembly module"),
        ("junk.wasm", b"hello", "not a WebAssembly component"),
        (
            "foreign.wat",
            b"(component (import \"acme:net/socket@1.0.0\" (instance)))",
            "imports acme:net/socket@1.0.0, which this host does not offer",
        ),
        (
            "future.wat",
            b"(component (instance $i) (export \"kws:plugin/score@0.3.0\" (instance $i)))",
            "targets contract version 0.3.0",
        ),
        (
            "older.wat",
            b"(component (instance $i) (export \"kws:plugin/score@0.0.9\" (instance $i)))",
            "kws:plugin/score@0.0.9: it targets contract version 0.0.9; this host offers kws:plugin@0.2.1 (and every earlier 0.2.x): rebuild it against that version",
        ),
        (
            "newer.wat",
            b"(component (instance $i) (export \"kws:plugin/score@0.2.9\" (instance $i)))",
            "kws:plugin/score@0.2.9: contract version 0.2.9 is newer than this host's kws:plugin@0.2.1: run a scheduler that offers 0.2.9",
        ),
    ];
    for (name, bytes, want) in cases {
        let f = dir.join(name);
        std::fs::write(&f, bytes).unwrap();
        let out = Command::new(bin).args(["plugin", "check"]).arg(&f).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: one line: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plugin_componentize_makes_the_component_the_guest_build_makes_and_refuses_bad_input() {
    let bin = env!("CARGO_BIN_EXE_kube-wasm-scheduler");
    let core = root().join("guest-plugins/build/core/priority-label.wasm");
    assert!(core.exists(), "{} is missing: run `make guests`", core.display());
    let dir = std::env::temp_dir().join(format!("kws-componentize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("priority-label.wasm");
    let out = Command::new(bin).args(["plugin", "componentize"]).arg(&core).arg("-o").arg(&out_file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let check = |f: &Path| {
        let out = Command::new(bin).args(["plugin", "check", "--output", "json"]).arg(f).output().unwrap();
        assert!(out.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let made = check(&out_file);
    assert!(made.contains("\"Filter\"") && made.contains("\"Score\""), "{made}");
    assert_eq!(made, check(&guest("priority-label")), "the same exports and imports as the built guest");

    // Bad input: one line, exit 2, and nothing written.
    let junk = dir.join("junk.wasm");
    std::fs::write(&junk, b"hello").unwrap();
    let cases = [
        (junk.clone(), "not a WebAssembly core module"),
        (guest("priority-label"), "already a component"),
        (dir.join("missing.wasm"), "reading"),
    ];
    for (input, want) in cases {
        let target = dir.join("out.wasm");
        let out =
            Command::new(bin).args(["plugin", "componentize"]).arg(&input).arg("-o").arg(&target).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", input.display());
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(want) && stderr.contains(&*input.display().to_string()), "{stderr}");
        assert!(!target.exists() && !dir.join("out.wasm.tmp").exists(), "nothing written for {}", input.display());
    }
    // A core module without the contract's type section is refused, not wrapped into a plugin that exports nothing.
    let bare = dir.join("bare.wasm");
    std::fs::write(&bare, b"\0asm\x01\0\0\0").unwrap();
    let out = Command::new(bin)
        .args(["plugin", "componentize"])
        .arg(&bare)
        .arg("-o")
        .arg(dir.join("bare.out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.join("bare.out").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile `hostile` whose Hostile plugin misbehaves as `mode` asks, beside a plain default profile.
fn hostile_run(mode: &str, policy: &str) -> (kube_wasm_scheduler::sim::Report, Duration) {
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n- schedulerName: hostile\n  plugins:\n    multiPoint:\n      enabled: [{{name: Hostile}}]\n  pluginConfig:\n  - name: Hostile\n    args:\n      component: {}\n      config: {{mode: {mode}}}\n      timeout: 200ms\n      memoryLimit: 16Mi\n      failurePolicy: {policy}\n",
        guest("hostile").display()
    );
    let (reg, cfg) = registry_for(&yaml);
    let mut cluster = nodes_yaml(3);
    for i in 0..3 {
        cluster += &pod_yaml(&format!("bad-{i}"), "  schedulerName: hostile\n");
        cluster += &pod_yaml(&format!("good-{i}"), "");
    }
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions::default()).unwrap();
    let t = Instant::now();
    let r = s.run();
    (r, t.elapsed())
}

#[test]
fn hostile_guests_yield_errors_within_their_deadline_and_scheduling_goes_on() {
    // (mode, the failing call, its reason): the pod's last attempt may find the circuit breaker open after the
    // first attempts failed, and then its message repeats the last failure.
    let cases = [
        ("loop", "Filter", "timed out after 200ms"),
        ("grow", "Score", "trapped: memory limit reached"),
        ("trap-filter", "Filter", "trapped: wasm trap: wasm `unreachable` instruction executed"),
        ("trap-score", "Score", "trapped: wasm trap: wasm `unreachable` instruction executed"),
        ("trap-normalize", "NormalizeScore", "trapped: wasm trap: wasm `unreachable` instruction executed"),
        ("score-1000", "NormalizeScore", "returned an invalid score 1000"),
    ];
    for (mode, call, reason) in cases {
        let (r, took) = hostile_run(mode, "Fail");
        for i in 0..3 {
            assert!(node_of(&r, &format!("default/good-{i}")).is_some(), "{mode}: other pods are scheduled");
            assert_eq!(node_of(&r, &format!("default/bad-{i}")), None, "{mode}");
            let m = message_of(&r, &format!("default/bad-{i}"));
            assert!(m.contains(&format!("wasm plugin \"Hostile\" at {call}: ")), "{mode}: {m}");
            assert!(m.contains(&format!("{call}: {reason}")), "{mode}: {m}");
        }
        // Every failed attempt is bounded by the deadline (the simulator retries with backoff a few times).
        let attempts: u32 = r.placements.iter().filter(|p| p.pod.starts_with("default/bad-")).map(|p| p.attempts).sum();
        assert!(
            took < Duration::from_millis(400) * attempts.max(1) + Duration::from_secs(5),
            "{mode}: {took:?} for {attempts} attempts"
        );
    }
}

#[test]
fn each_cycle_s_filter_reads_its_own_pod_from_the_host() {
    // The pod is not an argument of Filter: the guest fetches it with host.cycle-pod, once per cycle.
    let (r, _) = hostile_run("name-the-pod", "Fail");
    for i in 0..3 {
        assert!(node_of(&r, &format!("default/good-{i}")).is_some());
        let m = message_of(&r, &format!("default/bad-{i}"));
        assert!(m.contains(&format!("3 node(s) not for pod default/bad-{i}")), "bad-{i}: {m}");
    }
}

#[test]
fn failure_policy_ignore_skips_a_failing_guest() {
    for mode in ["trap-filter", "trap-score", "loop"] {
        let (r, _) = hostile_run(mode, "Ignore");
        for i in 0..3 {
            assert!(
                node_of(&r, &format!("default/bad-{i}")).is_some(),
                "{mode}: with Ignore the pod is scheduled without the plugin"
            );
        }
    }
}

#[test]
fn a_configmap_style_symlink_swap_reloads_the_plugin() {
    // Kubernetes mounts a ConfigMap as `name -> ..data/name`, `..data -> ..<timestamp>`; an update writes a new
    // timestamped directory and swaps the `..data` link atomically.
    let dir = std::env::temp_dir().join(format!("kws-cm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("..2026_01")).unwrap();
    std::fs::copy(guest("priority-label"), dir.join("..2026_01/plugin.wasm")).unwrap();
    std::os::unix::fs::symlink("..2026_01", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/plugin.wasm", dir.join("plugin.wasm")).unwrap();
    let args =
        wasm::WasmArgs::parse(&serde_json::json!({"component": dir.join("plugin.wasm")}), std::path::Path::new("/"))
            .unwrap();
    let p = wasm::WasmPlugin::load("PriorityLabel", args, 0).unwrap();
    let original = p.digest();

    std::fs::create_dir_all(dir.join("..2026_02")).unwrap();
    std::fs::copy(guest("priority-label-inverted"), dir.join("..2026_02/plugin.wasm")).unwrap();
    std::os::unix::fs::symlink("..2026_02", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    assert_eq!(p.reload_if_changed(), Ok(true));
    assert_ne!(p.digest(), original);
    assert_eq!(p.digest(), wasm::engine::sha256_hex(&std::fs::read(guest("priority-label-inverted")).unwrap()));
    assert_eq!(p.reload_if_changed(), Ok(false), "nothing changed since");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn simulate_watch_runs_again_when_an_input_changes() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir().join(format!("kws-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = dir.join("c.yaml");
    std::fs::write(
        &cluster,
        node_yaml("scheduler-1", Some("10")) + &node_yaml("scheduler-2", None) + &pod_yaml("p", ""),
    )
    .unwrap();
    let profile = dir.join("p.yaml");
    std::fs::write(&profile, label_profile(&guest("priority-label"), "")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["simulate", "--watch", "--config"])
        .arg(&profile)
        .arg("--cluster")
        .arg(&cluster)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut placement = || loop {
        let l = lines.next().expect("output").unwrap();
        if l.starts_with("default/p ") {
            return l;
        }
    };
    assert!(placement().contains("scheduler-1"));
    // Relabel: scheduler-2 now outranks scheduler-1; the watcher runs the simulation again.
    std::thread::sleep(Duration::from_millis(50));
    std::fs::write(
        &cluster,
        node_yaml("scheduler-1", Some("10")) + &node_yaml("scheduler-2", Some("50")) + &pod_yaml("p", ""),
    )
    .unwrap();
    let second = placement();
    let _ = child.kill();
    let _ = child.wait();
    assert!(second.contains("scheduler-2"), "{second}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plugin_check_reads_a_file_whose_name_is_not_utf8() {
    // A file name is bytes on Linux; `plugin check` on one panicked (exit 101) twice over: reading the arguments as
    // text, then putting the path through JSON.
    use std::os::unix::ffi::OsStrExt;
    let dir = std::env::temp_dir().join(format!("kws-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(std::ffi::OsStr::from_bytes(b"plugin-\xff.wasm"));
    std::fs::copy(guest("qos-sort"), &file).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler")).args(["plugin", "check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("QueueSort"));
    let missing = dir.join(std::ffi::OsStr::from_bytes(b"missing-\xff.wasm"));
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args(["plugin", "check"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim().lines().count(), 1);
    // The live scheduler's flags are text: a flag that is not is bad input.
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler")).arg("--config").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid UTF-8"));
    let _ = std::fs::remove_dir_all(&dir);
}
