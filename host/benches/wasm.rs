//! The Wasm boundary's cost, side by side with the same policy written natively (priority-label: Filter rejects
//! nodes without the label, Score is its integer value, normalized by the maximum):
//! (a) one pod's whole scheduling cycle over 5,000 nodes, default profile + priority-label;
//! (b) priority-label's Filter + Score alone for one pod over 5,000 nodes, and one node update reaching the guest,
//!     for the Rust guest and the Go one (guest-plugins/priority-label-go);
//! (c) compiling and instantiating each guest.
//! Needs `make guests` (guest-plugins/build/priority-label.wasm, priority-label-go.wasm).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

use kube_wasm_scheduler::config;
use kube_wasm_scheduler::framework::Registry;
use kube_wasm_scheduler::framework::Snapshot;
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{generate, SimOptions, Simulation};
use kube_wasm_scheduler::wasm::{self, WasmArgs, WasmPlugin};

const NODES: usize = 5000;
const KEY: &str = "priority.example.com";

/// The guests of the same policy, by language.
const GUESTS: [(&str, &str); 2] = [("rust", "priority-label"), ("go", "priority-label-go")];

fn component(guest: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../guest-plugins/build/{guest}.wasm"));
    assert!(p.exists(), "run `make guests` first: {} is missing", p.display());
    p
}

/// The same policy as the guest, natively.
struct NativePriorityLabel;

impl Plugin for NativePriorityLabel {
    fn name(&self) -> &str {
        "PriorityLabel"
    }
    kube_wasm_scheduler::serves!(filter, score);
}

impl FilterPlugin for NativePriorityLabel {
    fn filter(&self, _s: &CycleState, _p: &PodInfo, node: &NodeInfo) -> Status {
        if node.labels().contains_key(KEY) {
            Status::success()
        } else {
            Status::unresolvable(format!("node(s) didn't have label {KEY}"))
        }
    }
}

impl ScorePlugin for NativePriorityLabel {
    fn score(&self, _s: &CycleState, _p: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match node.labels().get(KEY) {
            None => Ok(0),
            Some(v) => v
                .parse()
                .map_err(|_| Status::error(format!("node {}: label {KEY} has non-integer value {v:?}", node.name))),
        }
    }
    fn normalize_score(&self, _s: &CycleState, _p: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        for s in scores.iter_mut() {
            s.score = if max <= 0 { 0 } else { s.score.max(0) * 100 / max };
        }
        Status::success()
    }
}

fn labelled_cluster(pods: usize) -> kube_wasm_scheduler::sim::ClusterFile {
    let mut c = generate::cluster(NODES, pods);
    for (i, n) in c.nodes.iter_mut().enumerate() {
        n.metadata.labels.get_or_insert_with(Default::default).insert(KEY.into(), format!("{}", i % 100));
    }
    c
}

fn profile(wasm: bool) -> (Registry, config::SchedulerConfig) {
    let mut reg = in_tree_registry();
    let args = if wasm {
        format!(
            "  pluginConfig:\n  - name: PriorityLabel\n    args:\n      component: {}\n",
            component("priority-label").display()
        )
    } else {
        String::new()
    };
    let yaml = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{{name: PriorityLabel, weight: 2}}]\n{args}"
    );
    if !wasm {
        reg.register("PriorityLabel", Arc::new(|_, _| Ok(Arc::new(NativePriorityLabel) as Arc<dyn Plugin>))).unwrap();
    }
    let known = |n: &str| n == "PriorityLabel" || reg.get(n).is_some();
    let cfg = kube_wasm_scheduler::scheduler::parse_config("bench.yaml", &yaml, &known).expect("bench profile");
    wasm::register_plugins(&mut reg, &cfg, std::path::Path::new("/"));
    (reg, cfg)
}

/// One scheduler on the 5,000-node cluster, scheduling one pod per call and removing it again, so every call (and
/// both variants) schedules onto the same cluster; the pod's node still changes twice per call, and those changes
/// still reach the guest.
struct CycleBench {
    sched: Arc<kube_wasm_scheduler::scheduler::Scheduler>,
    _sim: Simulation,
    template: PodInfo,
    n: u64,
}

impl CycleBench {
    fn new(wasm: bool) -> CycleBench {
        let (reg, cfg) = profile(wasm);
        let sim = Simulation::new(&cfg, &reg, &labelled_cluster(0), &SimOptions::default()).unwrap();
        let template = generate::cluster(1, 1).pending_pods.remove(0);
        CycleBench { sched: sim.scheduler().clone(), _sim: sim, template, n: 0 }
    }

    /// Schedules one pod; returns how long the scheduling cycle took (pod creation and removal excluded).
    fn cycle(&mut self) -> Duration {
        self.n += 1;
        let mut pod = (*self.template.pod).clone();
        pod.metadata.name = Some(format!("b-{}", self.n));
        pod.metadata.uid = Some(format!("b-{}", self.n));
        let info = Arc::new(PodInfo::new(pod).unwrap());
        let uid = info.uid.clone();
        let now = self.sched.clock.now();
        self.sched.queue.lock().unwrap().add(info, now);
        let t = Instant::now();
        assert!(self.sched.schedule_one());
        let took = t.elapsed();
        self.sched.cache.lock().unwrap().remove_pod(&uid).expect("the pod was placed");
        took
    }
}

/// One native cycle, in a frame of its own so a profile (`perf record --call-graph=dwarf`) can tell the variants
/// apart; the distinct constant keeps the linker from folding it into `cycle_wasm`.
#[inline(never)]
fn cycle_native(b: &mut CycleBench) -> Duration {
    std::hint::black_box(0u32);
    b.cycle()
}

/// One Wasm cycle, in a frame of its own (see `cycle_native`).
#[inline(never)]
fn cycle_wasm(b: &mut CycleBench) -> Duration {
    std::hint::black_box(1u64);
    b.cycle()
}

/// (a) Whole cycles, native and Wasm interleaved: every measured iteration runs one cycle of each variant and each
/// benchmark reports its own variant's time, so both see the same machine at the same moments (on a shared VM the
/// absolute times drift by up to 2x between runs seconds apart; interleaving keeps the ratio meaningful). The ratio
/// over all interleaved cycles is printed at the end.
fn whole_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle_5000_nodes_default_profile_plus_priority_label");
    g.sample_size(20);
    let mut pair = [CycleBench::new(false), CycleBench::new(true)];
    for (which, name) in ["native", "wasm"].into_iter().enumerate() {
        let mut totals = [Duration::ZERO; 2];
        let mut cycles = 0u64;
        g.bench_function(BenchmarkId::new(name, NODES), |b| {
            b.iter_custom(|iters| {
                let mut mine = Duration::ZERO;
                for i in 0..iters {
                    // Alternate which variant goes first, so neither always runs on the other's cache leftovers.
                    let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
                    for v in order {
                        let d = if v == 0 { cycle_native(&mut pair[0]) } else { cycle_wasm(&mut pair[1]) };
                        totals[v] += d;
                        if v == which {
                            mine += d;
                        }
                    }
                }
                cycles += iters;
                mine
            })
        });
        eprintln!(
            "cycle_5000_nodes (while measuring {name}): wasm/native = {:.3} over {cycles} interleaved cycles of each ({:.1} µs vs {:.1} µs mean)",
            totals[1].as_secs_f64() / totals[0].as_secs_f64(),
            totals[1].as_secs_f64() * 1e6 / cycles as f64,
            totals[0].as_secs_f64() * 1e6 / cycles as f64,
        );
    }
    g.finish();
}

/// (b) Filter + Score (+ NormalizeScore) of one pod over 5,000 nodes, and one node update reaching the guest.
fn filter_score(c: &mut Criterion) {
    let file = labelled_cluster(1);
    let mut cache = kube_wasm_scheduler::cache::Cache::new();
    for n in &file.nodes {
        cache.add_node(n.clone()).unwrap();
    }
    let mut snap = Snapshot::default();
    cache.update_snapshot(&mut snap);
    let nodes: Vec<&NodeInfo> = snap.nodes().iter().map(|n| &**n).collect();
    let pod = &file.pending_pods[0];
    let load = |guest: &str| {
        let args = WasmArgs::parse(&serde_json::json!({"component": component(guest)}), std::path::Path::new("/"));
        WasmPlugin::load("PriorityLabel", args.unwrap(), 0).unwrap()
    };
    let (rust, go) = (load("priority-label"), load("priority-label-go"));
    let native = NativePriorityLabel;
    let mut g = c.benchmark_group("priority_label_filter_score_5000_nodes");
    g.sample_size(30);
    let variants =
        [("native", &native as &dyn Plugin), ("wasm", &*rust as &dyn Plugin), ("wasm_go", &*go as &dyn Plugin)];
    for (name, p) in variants {
        let mut state = CycleState::new();
        p.begin_cycle(&mut state, &Arc::new(pod.clone()));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(nodes.len());
                p.as_filter().unwrap().filter_nodes(&state, pod, &nodes, &mut out);
                let mut scores = vec![0i64; nodes.len()];
                let s = p.as_score().unwrap().score_nodes(&state, pod, &nodes, &mut scores);
                assert!(s.is_success(), "{name}: {}", s.message());
                let mut list: Vec<NodeScore> =
                    nodes.iter().zip(&scores).map(|(n, &score)| NodeScore { name: &n.name, id: n.id, score }).collect();
                p.as_score().unwrap().normalize_score(&state, pod, &mut list);
                out.len()
            })
        });
    }
    // One node changes (a pod bound to it): the next call carries that node to the guest. The Rust guest keeps the
    // names it had before the Go guest was added.
    for (prefix, plugin) in [("wasm", &rust), ("wasm_go", &go)] {
        let mut state = CycleState::new();
        plugin.begin_cycle(&mut state, &Arc::new(pod.clone()));
        let mut changed = (*snap.nodes()[0]).clone();
        let mut gen = 1_000_000u64;
        g.bench_function(format!("{prefix}_one_node_update_then_score_one_node"), |b| {
            b.iter(|| {
                gen += 1;
                changed.generation = gen;
                let mut s = [0i64];
                plugin.score_nodes(&state, pod, &[&changed], &mut s)
            })
        });
        g.bench_function(format!("{prefix}_score_one_node_no_update"), |b| {
            b.iter(|| {
                let mut s = [0i64];
                plugin.score_nodes(&state, pod, &[&changed], &mut s)
            })
        });
    }
    g.finish();
}

/// (c) What a guest costs before it serves: its size (printed), compiling it (uncached, as on the first load of a
/// file) and instantiating the compiled component. Instantiation links the host functions a guest may call while
/// it starts (Go's runtime asks for random bytes and the time from `_initialize`); every other import traps.
fn load(c: &mut Criterion) {
    use wasmtime::component::{Component, Linker};
    let engine = wasm::engine::WasmEngine::shared().engine();
    let mut g = c.benchmark_group("priority_label_load");
    g.sample_size(10);
    for (lang, guest) in GUESTS {
        let bytes = std::fs::read(component(guest)).unwrap();
        eprintln!("{guest}: component of {} bytes", bytes.len());
        g.bench_function(BenchmarkId::new("compile", lang), |b| b.iter(|| Component::new(engine, &bytes).unwrap()));
        let compiled = Component::new(engine, &bytes).unwrap();
        let mut linker = Linker::<()>::new(engine);
        let mut host = linker.instance(&format!("{}/host@{}", wasm::CONTRACT_PACKAGE, wasm::CONTRACT_VERSION)).unwrap();
        host.func_wrap("random", |_, (): ()| Ok((0x5eed_u64,))).unwrap();
        host.func_wrap("now-ns", |_, (): ()| Ok((1_700_000_000_000_000_000_u64,))).unwrap();
        linker.define_unknown_imports_as_traps(&compiled).unwrap();
        let pre = linker.instantiate_pre(&compiled).unwrap();
        g.bench_function(BenchmarkId::new("instantiate", lang), |b| {
            b.iter(|| {
                let mut store = wasmtime::Store::new(engine, ());
                store.set_epoch_deadline(wasm::engine::WasmEngine::deadline(Duration::from_secs(10)));
                pre.instantiate(&mut store).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, whole_cycle, filter_score, load);
criterion_main!(benches);
