//! Lifting guest answers: the hostile-c fixture (guest-plugins/hostile-c) answers every extension point with
//! valid, wrong, badly encoded or raw garbage bytes, from a seed. Whatever it hands back, the host must use the
//! answer as it is or fail the call and answer what the failure table says, and never panic or hang.
//!
//! Seeds: 200 by default; `KWS_FUZZ_SEEDS` runs more (`make fuzz`).

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::sim::{self, SimOptions, Simulation};
use kube_wasm_scheduler::wasm::{self, WasmArgs, WasmPlugin};

use crate::util::*;
use crate::wasm::guest;

/// The plugin's name in every test here.
const PLUGIN: &str = "HostileC";
/// The deadline of one guest call.
const TIMEOUT: &str = "500ms";
/// The most one trait call may take: the deadline, a fresh instance, and lifting a huge list in a debug build.
const CALL_BOUND: Duration = Duration::from_secs(5);
/// The most one seed (every point once, under one policy and mode) may take before it counts as a hang.
const SEED_BOUND: Duration = Duration::from_secs(60);

/// How many seeds to run.
fn seeds() -> u64 {
    std::env::var("KWS_FUZZ_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
}

/// The hostile plugin for one seed.
fn load(seed: u64, mode: &str, policy: &str) -> Arc<WasmPlugin> {
    let args = serde_json::json!({
        "component": guest("hostile-c"),
        "config": {"seed": seed, "mode": mode},
        "timeout": TIMEOUT,
        "memoryLimit": "64Mi",
        "failurePolicy": policy,
        // Every call must reach the guest: this is about lifting answers, not about the breaker.
        "circuitBreaker": {"consecutiveFailures": 0},
    });
    WasmPlugin::load(PLUGIN, WasmArgs::parse(&args, Path::new("/")).unwrap(), seed).unwrap()
}

/// The cluster every seed calls the plugin about: nodes n0..n3 and one pending pod.
struct World {
    snapshot: Snapshot,
    pod: Arc<PodInfo>,
    other: Arc<PodInfo>,
}

impl World {
    fn new() -> World {
        let nodes = nodes_yaml(4)
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| NodeInfo::new(Arc::new(serde_yaml::from_str::<Node>(d).unwrap())).unwrap())
            .collect();
        let pod = |name: &str| {
            let y = pod_yaml(name, "");
            Arc::new(PodInfo::new(serde_yaml::from_str::<Pod>(y.trim_end_matches("---\n")).unwrap()).unwrap())
        };
        World { snapshot: Snapshot::from_nodes(nodes), pod: pod("p"), other: pod("victim") }
    }

    fn nodes(&self) -> Vec<&NodeInfo> {
        self.snapshot.nodes().iter().map(|n| &**n).collect()
    }
}

/// PostFilter's handle: nothing to re-run.
struct Handle<'a>(&'a Snapshot);

impl PostFilterHandle for Handle<'_> {
    fn snapshot(&self) -> &Snapshot {
        self.0
    }
    fn run_filter_plugins_with_nominated_pods(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
    fn run_pre_filter_add_pod(&self, _: &mut CycleState, _: &PodInfo, _: &Arc<PodInfo>, _: &NodeInfo) -> Status {
        Status::success()
    }
    fn run_pre_filter_remove_pod(&self, _: &mut CycleState, _: &PodInfo, _: &Arc<PodInfo>, _: &NodeInfo) -> Status {
        Status::success()
    }
    fn random(&self, _: usize) -> usize {
        0
    }
}

/// What the failure table answers in the plugin's place when a call fails under Ignore (`wasm/failure.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Table {
    Success,
    Skip,
    Unschedulable,
}

/// The checks of one seed: a run of every point, each answer judged as it comes.
struct Judge<'a> {
    plugin: &'a WasmPlugin,
    fail: bool,
    /// The control run: every answer is well-formed, so none may fail.
    valid: bool,
    /// The plugin's trap count before the call being judged: a lifting failure counts as a trap.
    traps: u64,
    /// Calls that failed (the host refused the answer) and calls whose answer was used, for coverage.
    failed: u64,
    used: u64,
    errors: Vec<String>,
}

impl Judge<'_> {
    /// Times a call and remembers the trap count before it.
    fn time<R>(&mut self, point: &str, f: impl FnOnce() -> R) -> R {
        self.traps = self.plugin.stats.traps.load(Ordering::Relaxed);
        let t = Instant::now();
        let r = f();
        if t.elapsed() > CALL_BOUND {
            self.errors.push(format!("{point}: took {:?}", t.elapsed()));
        }
        r
    }

    /// True when the call just made trapped (lifting failures are traps).
    fn trapped(&self) -> bool {
        self.plugin.stats.traps.load(Ordering::Relaxed) > self.traps
    }

    /// The plugin's own Error for a failed call at `point`.
    fn is_failure(&self, s: &Status, point: &str) -> bool {
        s.code() == Code::Error && s.message().starts_with(&format!("wasm plugin {PLUGIN:?} at {point}: "))
    }

    /// Judges a status answered at `point`: a failed call (it trapped, or the host named itself the author of
    /// the Error) answers the plugin's Error under Fail and the table's `ignore` answer under Ignore; anything else
    /// is the guest's own answer, used as it is.
    fn status(&mut self, point: &str, s: &Status, ignore: Table) {
        let host_error = s.code() == Code::Error && s.message().starts_with("wasm plugin ");
        if host_error && !self.is_failure(s, point) {
            self.errors.push(format!("{point}: an Error that names another plugin or point: {:?}", s.message()));
        }
        if host_error && s.plugin() != Some(PLUGIN) {
            self.errors.push(format!("{point}: the Error is not tagged with the plugin: {:?}", s.plugin()));
        }
        let failed = self.trapped() || host_error;
        if failed {
            self.failed += 1;
        } else {
            self.used += 1;
        }
        if self.valid && failed {
            self.errors.push(format!("{point}: a valid answer failed: {:?}", s.message()));
        }
        // The control run's reasons are all the fixture's one valid reason: they must cross unchanged.
        if self.valid && s.reasons().iter().any(|r| r != "hostile: reason") {
            self.errors.push(format!("{point}: valid reasons came back as {:?}", s.reasons()));
        }
        if !failed {
            return;
        }
        if self.fail {
            if !self.is_failure(s, point) {
                self.errors.push(format!("{point}: failed under Fail but answered {:?} {:?}", s.code(), s.message()));
            }
            return;
        }
        let want = match ignore {
            Table::Success => s.is_success(),
            Table::Skip => s.code() == Code::Skip,
            Table::Unschedulable => s.code() == Code::Unschedulable && s.message().is_empty(),
        };
        if !want {
            self.errors.push(format!(
                "{point}: failed under Ignore but answered {:?} {:?}, not the table's {ignore:?}",
                s.code(),
                s.message()
            ));
        }
    }

    /// Judges scores that came back with a success: zeros after a failure under Ignore; in the control run, the
    /// guest's own in-range scores.
    fn scores(&mut self, point: &str, s: &Status, scores: &[i64]) {
        if !s.is_success() {
            return;
        }
        if self.trapped() && scores.iter().any(|&v| v != 0) {
            self.errors.push(format!("{point}: a failure under Ignore kept scores {scores:?}, not zeros"));
        }
        if self.valid && scores.iter().any(|v| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(v)) {
            self.errors.push(format!("{point}: valid scores came back as {scores:?}"));
        }
    }
}

/// Calls every extension point once through the framework's traits and judges each answer. Returns the problems
/// found and the (failed, used) counts.
fn run_seed(w: &World, seed: u64, mode: &str, policy: &str) -> Result<(u64, u64), Vec<String>> {
    let plugin = load(seed, mode, policy);
    let mut j = Judge {
        plugin: &plugin,
        fail: policy == "Fail",
        valid: mode == "valid",
        traps: 0,
        failed: 0,
        used: 0,
        errors: Vec::new(),
    };
    let p: &dyn Plugin = &*plugin;
    let (pod, nodes) = (&*w.pod, w.nodes());

    let s = j.time("PreEnqueue", || p.as_pre_enqueue().unwrap().pre_enqueue(pod));
    j.status("PreEnqueue", &s, Table::Success);

    let (qa, qb) = (QueuedPodInfo::new(w.pod.clone(), 1), QueuedPodInfo::new(w.other.clone(), 2));
    let less = j.time("QueueSort", || p.as_queue_sort().unwrap().less(&qa, &qb));
    if j.trapped() && !less {
        j.errors.push("QueueSort: a failure did not keep arrival order".into());
    }
    // The key, with the pod lent by reference (`sort-key-ref`): a garbage call may also misuse the handle (a method
    // on a made-up one, or the handle kept past the call), which must fail only the call.
    let key = j.time("QueueSort key", || p.as_queue_sort().unwrap().sort_key(&qa));
    if j.trapped() && key.is_some() {
        j.errors.push("QueueSort: a failed key call gave a key".into());
    }

    let mut state = CycleState::new();
    p.begin_cycle(&mut state, &Arc::new(pod.clone()));
    let (names, s) = j.time("PreFilter", || p.as_pre_filter().unwrap().pre_filter(&mut state, pod, &w.snapshot));
    j.status("PreFilter", &s, Table::Skip);
    if j.trapped() && names.is_some() {
        j.errors.push(format!("PreFilter: a failure kept node names {names:?}"));
    }
    if j.valid {
        let known: HashSet<String> = ["n0", "n1", "n2", "n3", "no-such-node"].iter().map(|n| n.to_string()).collect();
        if !names.iter().flatten().all(|n| known.contains(n)) {
            j.errors.push(format!("PreFilter: valid node names came back as {names:?}"));
        }
    }

    let pf = p.as_pre_filter().unwrap();
    let s = j.time("PreFilter.AddPod", || pf.add_pod(&mut state, pod, &w.other, nodes[1], &w.snapshot));
    j.status("PreFilter.AddPod", &s, Table::Success);
    let s = j.time("PreFilter.RemovePod", || pf.remove_pod(&mut state, pod, &w.other, nodes[2], &w.snapshot));
    j.status("PreFilter.RemovePod", &s, Table::Success);

    let mut verdicts = vec![Status::error("earlier")];
    j.time("Filter", || p.as_filter().unwrap().filter_nodes(&state, pod, &nodes, &mut verdicts));
    if verdicts.len() != 1 + nodes.len() || verdicts[0].message() != "earlier" {
        j.errors.push(format!("Filter: {} statuses after 1 for {} nodes", verdicts.len(), nodes.len()));
    } else {
        let batch = &verdicts[1..];
        if batch.iter().any(|s| j.is_failure(s, "Filter")) && batch.iter().any(|s| s.message() != batch[0].message()) {
            j.errors.push("Filter: a failure did not answer the same status for every node".into());
        }
        if j.trapped() || batch.iter().any(|s| j.is_failure(s, "Filter")) {
            j.status("Filter", &batch[0].clone(), Table::Success);
        } else {
            for s in batch {
                j.status("Filter", s, Table::Success);
            }
        }
    }
    let one = j.time("Filter", || p.as_filter().unwrap().filter(&state, pod, nodes[0]));
    j.status("Filter", &one, Table::Success);

    let filtered: NodeToStatus = nodes.iter().map(|n| (n.name.clone(), Status::unschedulable("full"))).collect();
    let handle = Handle(&w.snapshot);
    let (result, s) = j.time("PostFilter", || p.as_post_filter().unwrap().post_filter(&state, pod, &filtered, &handle));
    j.status("PostFilter", &s, Table::Unschedulable);
    if j.trapped() && result.is_some() {
        j.errors.push(format!("PostFilter: a failure kept a result {result:?}"));
    }

    let s =
        j.time("PreScore", || p.as_pre_score().unwrap().pre_score(&mut state, pod, w.snapshot.nodes(), &w.snapshot));
    j.status("PreScore", &s, Table::Skip);

    let sp = p.as_score().unwrap();
    let mut raw = vec![7i64; nodes.len()];
    let s = j.time("Score", || sp.score_nodes(&state, pod, &nodes, &mut raw));
    j.status("Score", &s, Table::Success);
    j.scores("Score", &s, &raw);
    let mut scores: Vec<NodeScore> = nodes.iter().map(|n| NodeScore { name: &n.name, id: n.id, score: 50 }).collect();
    let s = j.time("NormalizeScore", || sp.normalize_score(&state, pod, &mut scores));
    j.status("NormalizeScore", &s, Table::Success);
    // Normalized scores outside [0, 100] are a failure the table resolves: a success is always in range.
    let normalized: Vec<i64> = scores.iter().map(|s| s.score).collect();
    j.scores("NormalizeScore", &s, &normalized);
    if s.is_success() && normalized.iter().any(|v| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(v)) {
        j.errors.push(format!("NormalizeScore: a success carried scores {normalized:?}"));
    }

    let rp = p.as_reserve().unwrap();
    let s = j.time("Reserve", || rp.reserve(&mut state, pod, "n0"));
    j.status("Reserve", &s, Table::Success);
    j.time("Unreserve", || rp.unreserve(&mut state, pod, "n0"));

    let (s, wait) = j.time("Permit", || p.as_permit().unwrap().permit(&mut state, pod, "n0"));
    j.status("Permit", &s, Table::Success);
    if j.trapped() && wait != Duration::ZERO {
        j.errors.push(format!("Permit: a failure asked for a wait of {wait:?}"));
    }
    if j.valid && s.code() == Code::Wait && wait > Duration::from_millis(50) {
        j.errors.push(format!("Permit: a valid wait came back as {wait:?}"));
    }

    let s = j.time("PreBind", || p.as_pre_bind().unwrap().pre_bind(&state, pod, "n0"));
    j.status("PreBind", &s, Table::Success);
    let s = j.time("Bind", || p.as_bind().unwrap().bind(&mut state, pod, "n0"));
    j.status("Bind", &s, Table::Skip);
    j.time("PostBind", || p.as_post_bind().unwrap().post_bind(&mut state, &w.pod, "n0"));

    if j.errors.is_empty() {
        Ok((j.failed, j.used))
    } else {
        Err(j.errors)
    }
}

/// Runs the seeds on a thread of their own, each under catch_unwind, so that a panic names its seed and a hang
/// fails the test instead of stalling it. Returns the total (failed, used) counts; panics listing every seed that
/// panicked, hung or broke a check.
fn fuzz(seeds: std::ops::Range<u64>, modes: &'static [&'static str], policies: &'static [&'static str]) -> (u64, u64) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let w = World::new();
        for seed in seeds {
            for mode in modes {
                for policy in policies {
                    let r = catch_unwind(AssertUnwindSafe(|| run_seed(&w, seed, mode, policy)));
                    let r = r.map_err(|e| {
                        let m = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                        m.unwrap_or_else(|| "a panic with no message".into())
                    });
                    if tx.send((seed, *mode, *policy, r)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let (mut failed, mut used, mut problems) = (0, 0, Vec::new());
    loop {
        match rx.recv_timeout(SEED_BOUND) {
            Ok((_, _, _, Ok(Ok((f, u))))) => (failed, used) = (failed + f, used + u),
            Ok((seed, mode, policy, Ok(Err(errors)))) => {
                problems.push(format!("seed {seed} ({mode}, {policy}): {}", errors.join("; ")))
            }
            Ok((seed, mode, policy, Err(panic))) => {
                problems.push(format!("seed {seed} ({mode}, {policy}): the host panicked: {panic}"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                problems.push(format!("a seed hung: no answer within {SEED_BOUND:?}"));
                break;
            }
        }
    }
    if problems.is_empty() {
        worker.join().expect("the worker catches every panic");
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
    (failed, used)
}

#[test]
fn lifting_garbage_answers_are_used_or_fail_by_the_policy() {
    let (failed, used) = fuzz(0..seeds(), &["garbage", "random-memory"], &["Fail", "Ignore"]);
    // Coverage: the fuzzer makes both kinds, plenty of each.
    assert!(failed > 100 && used > 100, "{failed} failed calls, {used} used answers");
}

#[test]
fn lifting_valid_answers_are_taken_as_they_are() {
    let (failed, used) = fuzz(0..seeds().min(50), &["valid"], &["Fail", "Ignore"]);
    assert_eq!(failed, 0);
    assert!(used > 0);
}

/// A simulation with the hostile plugin at every point of profile `hostile` (and as the queue sort every profile
/// shares, since profiles must agree on it), beside the default profile's pods.
fn hostile_simulation(seed: u64, policy: &str) -> (sim::Report, Duration) {
    let args = format!(
        "  pluginConfig:\n  - name: {PLUGIN}\n    args:\n      component: {}\n      config: {{seed: {seed}, mode: random-memory, maxWaitMs: 20}}\n      timeout: 200ms\n      memoryLimit: 64Mi\n      failurePolicy: {policy}\n",
        guest("hostile-c").display()
    );
    let queue_sort = format!("    queueSort:\n      enabled: [{{name: {PLUGIN}}}]\n      disabled: [{{name: '*'}}]\n");
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n{queue_sort}{args}- schedulerName: hostile\n  plugins:\n    multiPoint:\n      enabled: [{{name: {PLUGIN}}}]\n{queue_sort}{args}"
    );
    let mut reg = registry_with(vec![]);
    let cfg = config(&reg, &yaml);
    wasm::register_plugins(&mut reg, &cfg, Path::new("/"));
    let mut cluster = nodes_yaml(4);
    for i in 0..4 {
        cluster += &pod_yaml(&format!("bad-{i}"), "  schedulerName: hostile\n");
        cluster += &pod_yaml(&format!("good-{i}"), "");
    }
    let file = sim::load::parse("c.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &reg, &file, &SimOptions { seed, ..Default::default() }).unwrap();
    let t = Instant::now();
    let r = s.run();
    (r, t.elapsed())
}

#[test]
fn lifting_simulations_finish_with_the_hostile_plugin_at_every_point() {
    for seed in 0..4 {
        for policy in ["Fail", "Ignore"] {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(catch_unwind(|| hostile_simulation(seed, policy)).map_err(|_| ()));
            });
            let (r, took) = match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(Ok(done)) => done,
                Ok(Err(())) => panic!("seed {seed} ({policy}): the simulation panicked"),
                Err(_) => panic!("seed {seed} ({policy}): the simulation did not finish within 120s"),
            };
            for i in 0..4 {
                let pod = format!("default/good-{i}");
                assert!(node_of(&r, &pod).is_some(), "seed {seed} ({policy}): {pod}: {}", message_of(&r, &pod));
            }
            assert!(r.placements.iter().any(|p| p.pod.starts_with("default/bad-")), "seed {seed} ({policy})");
            assert!(took < Duration::from_secs(120), "seed {seed} ({policy}): {took:?}");
        }
    }
}
