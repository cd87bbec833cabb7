//! Helpers shared by the integration tests: a configurable test plugin, cluster builders, and runners.

#![allow(dead_code)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_wasm_scheduler::config::SchedulerConfig;
use kube_wasm_scheduler::framework::Registry;
use kube_wasm_scheduler::framework::Snapshot;
use kube_wasm_scheduler::framework::*;
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{self, ClusterFile, Report, SimOptions, Simulation};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A shared log of plugin calls: "Name.point" or "Name.point(node)".
pub type CallLog = Arc<Mutex<Vec<String>>>;

type FilterFn = dyn Fn(&PodInfo, &NodeInfo) -> Status + Send + Sync;
type ScoreFn = dyn Fn(&PodInfo, &NodeInfo) -> Result<i64, Status> + Send + Sync;
/// NormalizeScore's closure.
type NormalizeFn = dyn Fn(&mut [NodeScore]) + Send + Sync;
/// QueueSort's closure.
type LessFn = dyn Fn(&QueuedPodInfo, &QueuedPodInfo) -> bool + Send + Sync;
/// A closure of one pod (PreScore, PostFilter, PreEnqueue).
type PodFn<R> = Option<Arc<dyn Fn(&PodInfo) -> R + Send + Sync>>;
/// A closure of one pod and the node it is placed on (Reserve, Permit, PreBind, Bind).
type PodNodeFn<R> = Option<Arc<dyn Fn(&PodInfo, &str) -> R + Send + Sync>>;

/// A plugin whose behaviour at each point is a closure; points without a closure are not implemented.
#[derive(Default, Clone)]
pub struct TestPlugin {
    pub name: String,
    pub log: Option<CallLog>,
    pub pre_filter: PodFn<(PreFilterResult, Status)>,
    pub filter: Option<Arc<FilterFn>>,
    pub post_filter: PodFn<Status>,
    pub pre_score: PodFn<Status>,
    pub score: Option<Arc<ScoreFn>>,
    pub normalize: Option<Arc<NormalizeFn>>,
    pub reserve: PodNodeFn<Status>,
    pub permit: PodNodeFn<(Status, Duration)>,
    pub pre_bind: PodNodeFn<Status>,
    /// Whether its PreBind may run at once with its neighbours' (`PreBindPlugin::pre_bind_in_parallel`).
    pub pre_bind_in_parallel: bool,
    pub bind: PodNodeFn<Status>,
    pub post_bind: bool,
    pub queue_sort: Option<Arc<LessFn>>,
    pub pre_enqueue: PodFn<Status>,
}

impl TestPlugin {
    pub fn new(name: &str, log: &CallLog) -> TestPlugin {
        TestPlugin { name: name.to_string(), log: Some(log.clone()), ..Default::default() }
    }
    fn record(&self, what: String) {
        if let Some(l) = &self.log {
            l.lock().unwrap().push(format!("{}.{}", self.name, what));
        }
    }
}

impl Plugin for TestPlugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        self.pre_enqueue.as_ref().map(|_| self as _)
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        self.queue_sort.as_ref().map(|_| self as _)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.pre_filter.as_ref().map(|_| self as _)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.filter.as_ref().map(|_| self as _)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        self.post_filter.as_ref().map(|_| self as _)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        self.pre_score.as_ref().map(|_| self as _)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.score.as_ref().map(|_| self as _)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        self.reserve.as_ref().map(|_| self as _)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        self.permit.as_ref().map(|_| self as _)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        self.pre_bind.as_ref().map(|_| self as _)
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        self.bind.as_ref().map(|_| self as _)
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        self.post_bind.then_some(self as _)
    }
}

impl PreEnqueuePlugin for TestPlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        (self.pre_enqueue.as_ref().unwrap())(pod)
    }
}
impl QueueSortPlugin for TestPlugin {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        (self.queue_sort.as_ref().unwrap())(a, b)
    }
}
impl PreFilterPlugin for TestPlugin {
    fn pre_filter(&self, _s: &mut CycleState, pod: &PodInfo, _snap: &Snapshot) -> (PreFilterResult, Status) {
        self.record("preFilter".into());
        (self.pre_filter.as_ref().unwrap())(pod)
    }
}
impl FilterPlugin for TestPlugin {
    fn filter(&self, _s: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        self.record(format!("filter({})", node.name));
        (self.filter.as_ref().unwrap())(pod, node)
    }
}
impl PostFilterPlugin for TestPlugin {
    fn post_filter(
        &self,
        _s: &CycleState,
        pod: &PodInfo,
        _f: &NodeToStatus,
        _h: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        self.record("postFilter".into());
        (None, (self.post_filter.as_ref().unwrap())(pod))
    }
}
impl PreScorePlugin for TestPlugin {
    fn pre_score(&self, _s: &mut CycleState, pod: &PodInfo, _n: &[Arc<NodeInfo>], _snap: &Snapshot) -> Status {
        self.record("preScore".into());
        (self.pre_score.as_ref().unwrap())(pod)
    }
}
impl ScorePlugin for TestPlugin {
    fn score(&self, _s: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        self.record(format!("score({})", node.name));
        (self.score.as_ref().unwrap())(pod, node)
    }
    fn normalize_score(&self, _s: &CycleState, _p: &PodInfo, scores: &mut [NodeScore]) -> Status {
        if let Some(f) = &self.normalize {
            f(scores);
        }
        Status::success()
    }
}
impl ReservePlugin for TestPlugin {
    fn reserve(&self, _s: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.record("reserve".into());
        (self.reserve.as_ref().unwrap())(pod, node)
    }
    fn unreserve(&self, _s: &mut CycleState, _pod: &PodInfo, _node: &str) {
        self.record("unreserve".into());
    }
}
impl PermitPlugin for TestPlugin {
    fn permit(&self, _s: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        self.record("permit".into());
        (self.permit.as_ref().unwrap())(pod, node)
    }
}
impl PreBindPlugin for TestPlugin {
    fn pre_bind(&self, _s: &CycleState, pod: &PodInfo, node: &str) -> Status {
        self.record("preBind".into());
        (self.pre_bind.as_ref().unwrap())(pod, node)
    }
    fn pre_bind_in_parallel(&self) -> bool {
        self.pre_bind_in_parallel
    }
}
impl BindPlugin for TestPlugin {
    fn bind(&self, _s: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.record(format!("bind({node})"));
        (self.bind.as_ref().unwrap())(pod, node)
    }
}
impl PostBindPlugin for TestPlugin {
    fn post_bind(&self, _s: &mut CycleState, _pod: &Arc<PodInfo>, node: &str) {
        self.record(format!("postBind({node})"));
    }
}

/// The in-tree registry plus the given test plugins.
pub fn registry_with(plugins: Vec<TestPlugin>) -> Registry {
    let mut r = in_tree_registry();
    for p in plugins {
        let name = p.name.clone();
        r.register(&name, Arc::new(move |_args, _ctx| Ok(Arc::new(p.clone()) as Arc<dyn Plugin>))).unwrap();
    }
    r
}

/// Parses a configuration against a registry; panics on errors (tests of errors call `config::parse`).
pub fn config(registry: &Registry, yaml: &str) -> SchedulerConfig {
    kube_wasm_scheduler::scheduler::parse_config("test.yaml", yaml, &|n| registry.get(n).is_some())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A profile that uses only the given plugins at the given points (multiPoint off), PrioritySort and
/// DefaultBinder kept unless replaced. `points` is YAML for `plugins:` entries other than multiPoint.
pub fn profile(points: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{{name: '*'}}]\n    queueSort:\n      enabled: [{{name: PrioritySort}}]\n    bind:\n      enabled: [{{name: DefaultBinder}}]\n{points}"
    )
}

/// Nodes named n0..n(count-1), 4 CPU each.
pub fn nodes_yaml(count: usize) -> String {
    (0..count)
        .map(|i| format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: n{i}\n  labels: {{kubernetes.io/hostname: n{i}}}\nstatus:\n  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}\n---\n"))
        .collect()
}

/// A pending pod.
pub fn pod_yaml(name: &str, extra_spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]\n{extra_spec}---\n")
}

/// Runs a simulation of `cluster` YAML with a configuration and registry.
pub fn simulate(registry: &Registry, cfg: &SchedulerConfig, cluster: &str, seed: u64, explain: &[&str]) -> Report {
    let file: ClusterFile = sim::load::parse("cluster.yaml", cluster).unwrap_or_else(|e| panic!("{e}"));
    let s = Simulation::new(
        cfg,
        registry,
        &file,
        &SimOptions { seed, explain: explain.iter().map(|s| s.to_string()).collect(), ..Default::default() },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    s.run()
}

/// The node a pod landed on in a report.
pub fn node_of(r: &Report, pod: &str) -> Option<String> {
    r.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not in report")).node.clone()
}

/// The message of a pod in a report.
pub fn message_of(r: &Report, pod: &str) -> String {
    r.placements.iter().find(|p| p.pod == pod).unwrap_or_else(|| panic!("{pod} not in report")).message.clone()
}

/// Names in a set.
pub fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The log's entries, drained.
pub fn take(log: &CallLog) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Property-test settings: `default` cases unless `PROPTEST_CASES` says otherwise (`make fuzz` raises it), and no
/// regression files written into the source tree (a case that fails becomes a named test instead).
pub fn proptest_config(default: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    proptest::test_runner::Config { cases, failure_persistence: None, ..Default::default() }
}

/// A directory under the system's temporary directory (outside the repository), removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A new empty directory; `tag` goes into its name.
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = std::env::temp_dir().join(format!("kws-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!dir.starts_with(root().canonicalize().unwrap()), "{} is inside the repository", dir.display());
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TLS server configuration for a test server on 127.0.0.1: a fresh self-signed certificate for `names`,
/// returned with its PEM (for clients that should trust it). Ring, as the scheduler itself uses.
pub fn self_signed_tls(names: &[&str]) -> (String, rustls::ServerConfig) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .unwrap();
    (cert.pem(), config)
}
