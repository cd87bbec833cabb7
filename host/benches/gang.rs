//! What gang scheduling costs as a guest beside the same policy native: the default profile at 5,000 nodes with
//! 1,000 pods in gangs of 4, with the coscheduling guest (guest-plugins/coscheduling: QueueSort, PreFilter,
//! PostFilter, Permit, Reserve, over the pod view and the waiting pods) or with `NativeCoscheduling` below, a
//! line-for-line port of the guest's decisions to a native plugin reading the same pod view and waiting pods.
//! Each run's placements are checked equal, so the two measure the same work; the default profile alone on the same
//! pods is the baseline that both add to.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

use kube_wasm_scheduler::config::SchedulerConfig;
use kube_wasm_scheduler::framework::pod_view::{PodChange, PodState, PodView};
use kube_wasm_scheduler::framework::waiting_pods::WaitingPods;
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{generate, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;

const NODES: usize = 5000;
const PODS: usize = 1000;
const GANG: usize = 4;
const GROUP: &str = "pod-group.scheduling.sigs.k8s.io/name";
const MIN: &str = "pod-group.scheduling.sigs.k8s.io/min-available";

/// The guest's policy, natively: the same pod view (followed through its change log, indexed by group as the
/// SDK indexes the group label) and the same waiting pods.
struct NativeCoscheduling {
    view: Arc<PodView>,
    waiting: Arc<WaitingPods>,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    cursor: u64,
    /// Group key → member UID → (placed, first seen).
    groups: HashMap<String, HashMap<String, (bool, u64)>>,
    group_of: HashMap<String, String>,
}

fn group_key(p: &PodInfo) -> Option<String> {
    let g = p.pod.metadata.labels.as_ref()?.get(GROUP).filter(|g| !g.is_empty())?;
    Some(format!("{}/{g}", p.namespace))
}

fn min_available(p: &PodInfo) -> usize {
    p.pod.metadata.labels.as_ref().and_then(|l| l.get(MIN)).and_then(|v| v.trim().parse().ok()).unwrap_or(1)
}

impl NativeCoscheduling {
    /// The index after the view's changes since last time.
    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        let mut ix = self.index.lock().unwrap();
        if ix.cursor < self.view.head() || ix.cursor == 0 {
            let delta = self.view.since(ix.cursor);
            if delta.reset {
                *ix = Index::default();
            }
            for c in delta.changes {
                match c {
                    PodChange::Upsert(k) => {
                        if let Some(g) = group_key(&k.pod) {
                            let placed = k.state != PodState::Pending;
                            ix.groups.entry(g.clone()).or_default().insert(k.pod.uid.clone(), (placed, k.first_seen));
                            ix.group_of.insert(k.pod.uid.clone(), g);
                        }
                    }
                    PodChange::Remove(k) => {
                        if let Some(g) = ix.group_of.remove(&k.pod.uid) {
                            ix.groups.get_mut(&g).map(|m| m.remove(&k.pod.uid));
                        }
                    }
                }
            }
            ix.cursor = delta.cursor;
        }
        ix
    }

    fn waiting_of(&self, group: &str, except: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .waiting
            .list()
            .iter()
            .filter(|w| !w.pending_plugins().is_empty())
            .filter(|w| w.pod().uid != except && group_key(w.pod()).as_deref() == Some(group))
            .map(|w| w.pod().uid.clone())
            .collect();
        v.sort();
        v
    }

    fn queue_key(&self, q: &QueuedPodInfo) -> (u64, String, u64) {
        match group_key(&q.pod_info) {
            Some(g) => {
                let first = self.index().groups.get(&g).and_then(|m| m.values().map(|(_, t)| *t).min());
                (first.unwrap_or(q.timestamp), g, q.timestamp)
            }
            None => (q.timestamp, q.pod_info.key(), q.timestamp),
        }
    }
}

impl Plugin for NativeCoscheduling {
    fn name(&self) -> &str {
        "Coscheduling"
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::UnscheduledPod, action::ADD | action::UPDATE_LABEL)]
    }
    kube_wasm_scheduler::serves!(queue_sort, pre_filter, post_filter, reserve, permit);
}

impl QueueSortPlugin for NativeCoscheduling {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        if a.pod_info.priority != b.pod_info.priority {
            return a.pod_info.priority > b.pod_info.priority;
        }
        self.queue_key(a) < self.queue_key(b)
    }
}

impl PreFilterPlugin for NativeCoscheduling {
    fn pre_filter(&self, _s: &mut CycleState, pod: &PodInfo, _snap: &Snapshot) -> (PreFilterResult, Status) {
        let Some(g) = group_key(pod) else { return (None, Status::success()) };
        let (members, min) = (self.index().groups.get(&g).map_or(0, HashMap::len), min_available(pod));
        if members < min {
            let msg = format!("pre-filter pod {} cannot find enough sibling pods, current pods number: {members}, minMember: {min}, podGroup: {g}", pod.name);
            return (None, Status::unresolvable(msg));
        }
        (None, Status::success())
    }
}

impl PostFilterPlugin for NativeCoscheduling {
    fn post_filter(
        &self,
        _s: &CycleState,
        pod: &PodInfo,
        _f: &NodeToStatus,
        _h: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let Some(g) = group_key(pod) else { return (None, Status::unschedulable("")) };
        let placed = self.index().groups.get(&g).map_or(0, |m| m.values().filter(|(p, _)| *p).count());
        if placed >= min_available(pod) {
            return (None, Status::unschedulable(""));
        }
        let reason = format!("optimistic rejection in PostFilter: pod {} of PodGroup {g} is unschedulable", pod.key());
        for uid in self.waiting_of(&g, &pod.uid) {
            if let Some(w) = self.waiting.get(&uid) {
                w.reject("Coscheduling", &reason);
            }
        }
        let msg = format!("PodGroup {g} gets rejected due to Pod {} is unschedulable even after PostFilter", pod.name);
        (None, Status::unschedulable(msg))
    }
}

impl ReservePlugin for NativeCoscheduling {
    fn reserve(&self, _s: &mut CycleState, _p: &PodInfo, _n: &str) -> Status {
        Status::success()
    }
    fn unreserve(&self, _s: &mut CycleState, pod: &PodInfo, _n: &str) {
        let Some(g) = group_key(pod) else { return };
        let reason = format!("rejection in Unreserve: pod {} of PodGroup {g} left", pod.key());
        for uid in self.waiting_of(&g, &pod.uid) {
            if let Some(w) = self.waiting.get(&uid) {
                w.reject("Coscheduling", &reason);
            }
        }
    }
}

impl PermitPlugin for NativeCoscheduling {
    fn permit(&self, _s: &mut CycleState, pod: &PodInfo, _n: &str) -> (Status, Duration) {
        let Some(g) = group_key(pod) else { return (Status::success(), Duration::ZERO) };
        let min = min_available(pod);
        let placed = {
            let ix = self.index();
            let m = ix.groups.get(&g);
            let this = m.and_then(|m| m.get(&pod.uid)).is_some_and(|(p, _)| *p);
            m.map_or(0, |m| m.values().filter(|(p, _)| *p).count()) + usize::from(!this)
        };
        if placed < min {
            let reason = format!("waiting for {} more pod(s) of PodGroup {g} (minMember {min})", min - placed);
            return (Status::with_reasons(Code::Wait, vec![reason]), Duration::from_secs(60));
        }
        for uid in self.waiting_of(&g, &pod.uid) {
            if let Some(w) = self.waiting.get(&uid) {
                w.allow("Coscheduling");
            }
        }
        (Status::success(), Duration::ZERO)
    }
}

const PROFILE: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{name: Coscheduling}]\n      disabled: [{name: PrioritySort}]\n";

fn guest_setup() -> (Registry, SchedulerConfig) {
    let component = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-plugins/build/coscheduling.wasm");
    assert!(component.exists(), "{} is missing: run `make guests`", component.display());
    let yaml = format!(
        "{PROFILE}  pluginConfig:\n  - name: Coscheduling\n    args:\n      component: {}\n      config: {{permitWaitingTimeSeconds: 60}}\n",
        component.display()
    );
    let mut reg = in_tree_registry();
    let cfg = kube_wasm_scheduler::scheduler::parse_config("gang.yaml", &yaml, &|_| true).expect("profile");
    wasm::register_plugins(&mut reg, &cfg, std::path::Path::new("/"));
    (reg, cfg)
}

fn native_setup() -> (Registry, SchedulerConfig) {
    let mut reg = in_tree_registry();
    reg.register(
        "Coscheduling",
        Arc::new(|_, ctx: &PluginContext| {
            ctx.pods.follow();
            Ok(Arc::new(NativeCoscheduling {
                view: ctx.pods.clone(),
                waiting: ctx.waiting.clone(),
                index: Mutex::default(),
            }) as Arc<dyn Plugin>)
        }),
    )
    .unwrap();
    let cfg = kube_wasm_scheduler::scheduler::parse_config("gang.yaml", PROFILE, &|_| true).expect("profile");
    (reg, cfg)
}

/// The generated cluster with its pods in gangs of `GANG` (min-available `GANG`), members arriving together.
fn cluster() -> kube_wasm_scheduler::sim::load::ClusterFile {
    let mut c = generate::cluster(NODES, PODS);
    for (i, p) in c.pending_pods.iter_mut().enumerate() {
        let mut pod = (*p.pod).clone();
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(GROUP.into(), format!("gang-{}", i / GANG));
        labels.insert(MIN.into(), GANG.to_string());
        *p = PodInfo::new(pod).expect("pod");
    }
    c
}

fn run(reg: &Registry, cfg: &SchedulerConfig, file: &kube_wasm_scheduler::sim::load::ClusterFile) -> Vec<String> {
    let sim = Simulation::new(cfg, reg, file, &SimOptions::default()).expect("simulation");
    let r = sim.run();
    let placed: Vec<String> = r.placements.iter().map(|p| format!("{} {:?}", p.pod, p.node)).collect();
    assert_eq!(r.placements.iter().filter(|p| p.node.is_some()).count(), PODS);
    placed
}

fn gangs(c: &mut Criterion) {
    let file = cluster();
    let (greg, gcfg) = guest_setup();
    let (nreg, ncfg) = native_setup();
    let same: HashSet<Vec<String>> = [run(&greg, &gcfg, &file), run(&nreg, &ncfg, &file)].into_iter().collect();
    assert_eq!(same.len(), 1, "the guest and the native twin place the pods alike");
    let mut g = c.benchmark_group("coscheduling_5000_nodes");
    g.sample_size(10);
    g.throughput(Throughput::Elements(PODS as u64));
    // The default profile alone on the same pods (no gangs in effect): what the two add is each one's time less
    // this.
    let (breg, bcfg) = (in_tree_registry(), SchedulerConfig::default_config());
    for (name, reg, cfg) in [("no_coscheduling", &breg, &bcfg), ("native", &nreg, &ncfg), ("guest", &greg, &gcfg)] {
        g.bench_function(BenchmarkId::new("gangs_of_4", name), |b| {
            b.iter_batched(
                || Simulation::new(cfg, reg, &file, &SimOptions::default()).expect("simulation"),
                |sim| sim.run(),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, gangs);
criterion_main!(benches);
