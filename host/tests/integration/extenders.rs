//! HTTP extenders against real HTTP servers on 127.0.0.1 (each test starts its own on a free port and stops it):
//! filter with both failure kinds, prioritize with weights, IsInterested, ignoredByScheduler, nodeCacheCapable,
//! ignorable and non-ignorable extenders that are down, answers in lowercase JSON, a binder, preemption.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kube_wasm_scheduler::cluster::memory::Write as ClusterWrite;
use kube_wasm_scheduler::cluster::{ClusterError, PodEvent};
use kube_wasm_scheduler::framework::PodInfo;
use kube_wasm_scheduler::plugins::in_tree_registry;
use kube_wasm_scheduler::sim::{self, Report, SimOptions, Simulation};
use serde_json::{json, Value};

use crate::util::{config, message_of, node_of, nodes_yaml, pod_yaml, profile, root};

/// The verb and JSON body of one request an extender server received.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;
/// Answers a request: the verb (path without `/`) and body → HTTP status and JSON text.
type Answer = Arc<dyn Fn(&str, &Value) -> (u16, String) + Send + Sync>;

/// A minimal HTTP/1.1 server with keep-alive on a free loopback port; stopped when dropped.
struct ExtenderServer {
    url: String,
    seen: Seen,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

/// A connection the server reads requests from and writes answers to: plain TCP or TLS over it.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Turns an accepted connection into the stream to serve (None: drop it, e.g. a failed TLS handshake).
type Accept = Arc<dyn Fn(TcpStream) -> Option<Box<dyn Stream>> + Send + Sync>;

impl ExtenderServer {
    fn start(answer: impl Fn(&str, &Value) -> (u16, String) + Send + Sync + 'static) -> ExtenderServer {
        Self::start_with(Arc::new(|c| Some(Box::new(c) as Box<dyn Stream>)), answer)
    }

    fn start_with(
        accept: Accept,
        answer: impl Fn(&str, &Value) -> (u16, String) + Send + Sync + 'static,
    ) -> ExtenderServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Seen = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let answer: Answer = Arc::new(answer);
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (seen, answer, accept) = (seen2.clone(), answer.clone(), accept.clone());
                std::thread::spawn(move || {
                    if let Some(stream) = accept(conn) {
                        serve(stream, &seen, &*answer)
                    }
                });
            }
        });
        ExtenderServer { url: format!("http://{addr}"), seen, stop, addr }
    }

    /// The verbs called so far, in order.
    fn verbs(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|(v, _)| v.clone()).collect()
    }

    /// The bodies sent with `verb`.
    fn bodies(&self, verb: &str) -> Vec<Value> {
        self.seen.lock().unwrap().iter().filter(|(v, _)| v == verb).map(|(_, b)| b.clone()).collect()
    }
}

impl Drop for ExtenderServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(conn: Box<dyn Stream>, seen: &Seen, answer: &(dyn Fn(&str, &Value) -> (u16, String) + Send + Sync)) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let verb = path.trim_start_matches('/').to_string();
        seen.lock().unwrap().push((verb.clone(), body.clone()));
        let (code, text) = answer(&verb, &body);
        let reply = format!(
            "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        let out = reader.get_mut();
        if out.write_all(reply.as_bytes()).and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

/// The candidate node names of a filter or prioritize request, whichever form it came in.
fn names(body: &Value) -> Vec<String> {
    match body["NodeNames"].as_array() {
        Some(a) => a.iter().map(|n| n.as_str().unwrap().to_string()).collect(),
        None => body["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect(),
    }
}

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

/// The default profile plus these extenders (YAML list items).
fn with_extenders(extenders: &str) -> String {
    format!("{HEAD}extenders:\n{extenders}")
}

/// Only PrioritySort and DefaultBinder (no Filter or Score plugin) plus these extenders.
fn bare_with_extenders(extenders: &str) -> String {
    format!("{}extenders:\n{extenders}", profile(""))
}

fn run(cfg_yaml: &str, cluster: &str, explain: &[&str]) -> Report {
    let registry = in_tree_registry();
    let cfg = config(&registry, cfg_yaml);
    crate::util::simulate(&registry, &cfg, cluster, 1, explain)
}

fn gpu_pod(name: &str, gpus: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: uid-{name}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: 100m, example.com/gpu: '{gpus}'}}, limits: {{example.com/gpu: '{gpus}'}}}}}}]\n---\n"
    )
}

#[test]
fn filter_rejections_of_both_kinds_are_counted_in_the_message() {
    let ext = ExtenderServer::start(|_, body| {
        let mut failed = serde_json::Map::new();
        let mut unresolvable = serde_json::Map::new();
        for n in names(body) {
            match n.as_str() {
                "n0" => {
                    unresolvable.insert(n, json!("gpu driver missing"));
                }
                "n3" if body["Pod"]["metadata"]["name"] == "fits" => {}
                _ => {
                    failed.insert(n, json!("no gpu left"));
                }
            }
        }
        let kept: Vec<Value> = names(body)
            .into_iter()
            .filter(|n| !failed.contains_key(n) && !unresolvable.contains_key(n))
            .map(Value::from)
            .collect();
        (
            200,
            json!({"NodeNames": kept, "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""})
                .to_string(),
        )
    });
    let cfg =
        bare_with_extenders(&format!("- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n", ext.url));
    let cluster = format!("{}{}{}", nodes_yaml(4), pod_yaml("stuck", ""), pod_yaml("fits", ""));
    let r = run(&cfg, &cluster, &["default/fits"]);
    assert_eq!(node_of(&r, "default/stuck"), None);
    assert_eq!(message_of(&r, "default/stuck"), "0/4 nodes are available: 1 gpu driver missing, 3 no gpu left.");
    assert_eq!(node_of(&r, "default/fits").as_deref(), Some("n3"));
    let explain = sim::render_explain(&r);
    assert!(explain.contains(&format!("Extender {} filter:", ext.url)), "{explain}");
    assert!(explain.contains("UnschedulableAndUnresolvable: gpu driver missing"), "{explain}");
}

#[test]
fn prioritize_scores_are_weighted_and_scaled_to_the_framework_range() {
    // Alone, `a` (score 10 on n1) would beat `b` (5 on n2); `b`'s weight 3 makes n2 win: 10×1×10 < 5×3×10.
    let a = ExtenderServer::start(|_, body| {
        let list: Vec<Value> =
            names(body).iter().map(|n| json!({"Host": n, "Score": if n == "n1" { 10 } else { 0 }})).collect();
        (200, Value::Array(list).to_string())
    });
    let b = ExtenderServer::start(|_, body| {
        let list: Vec<Value> =
            names(body).iter().map(|n| json!({"Host": n, "Score": if n == "n2" { 5 } else { 0 }})).collect();
        (200, Value::Array(list).to_string())
    });
    let cfg = bare_with_extenders(&format!(
        "- urlPrefix: {}\n  prioritizeVerb: prioritize\n  weight: 1\n- urlPrefix: {}/\n  prioritizeVerb: prioritize\n  weight: 3\n",
        a.url, b.url
    ));
    let r = run(&cfg, &format!("{}{}", nodes_yaml(3), pod_yaml("p", "")), &["default/p"]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n2"));
    let t = &r.explain[0].trace;
    assert_eq!(t.totals.iter().find(|(n, _)| n == "n2").unwrap().1, 150);
    assert_eq!(t.totals.iter().find(|(n, _)| n == "n1").unwrap().1, 100);
    let explain = sim::render_explain(&r);
    assert!(explain.contains("5/150"), "{explain}");
    assert_eq!(a.verbs(), ["prioritize"]);
    assert_eq!(b.verbs(), ["prioritize"], "a trailing / in urlPrefix is trimmed");
}

#[test]
fn an_extender_with_managed_resources_is_called_only_for_pods_that_use_them() {
    let managing = ExtenderServer::start(|_, body| (200, json!({"NodeNames": names(body)}).to_string()));
    let everyone = ExtenderServer::start(|_, body| (200, json!({"NodeNames": names(body)}).to_string()));
    let cfg = bare_with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  managedResources: [{{name: example.com/gpu}}]\n- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        managing.url, everyone.url
    ));
    let cluster = format!("{}{}{}", nodes_yaml(2), pod_yaml("plain", ""), gpu_pod("gpu", 1));
    let r = run(&cfg, &cluster, &[]);
    assert!(node_of(&r, "default/plain").is_some() && node_of(&r, "default/gpu").is_some());
    let called: Vec<String> =
        managing.bodies("filter").iter().map(|b| b["Pod"]["metadata"]["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(called, ["gpu"], "the managing extender sees only the pod with a limit on its resource");
    assert_eq!(everyone.bodies("filter").len(), 2);
}

#[test]
fn resources_ignored_by_the_scheduler_do_not_need_node_capacity() {
    let ext = ExtenderServer::start(|_, body| (200, json!({"NodeNames": names(body)}).to_string()));
    let cluster = format!("{}{}", nodes_yaml(2), gpu_pod("gpu", 2));
    let ignored = with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  managedResources: [{{name: example.com/gpu, ignoredByScheduler: true}}]\n",
        ext.url
    ));
    let r = run(&ignored, &cluster, &[]);
    assert!(node_of(&r, "default/gpu").is_some(), "{}", message_of(&r, "default/gpu"));
    let counted = with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  managedResources: [{{name: example.com/gpu}}]\n",
        ext.url
    ));
    let r = run(&counted, &cluster, &[]);
    assert_eq!(node_of(&r, "default/gpu"), None);
    assert!(
        message_of(&r, "default/gpu").contains("2 Insufficient example.com/gpu"),
        "{}",
        message_of(&r, "default/gpu")
    );
}

#[test]
fn node_cache_capable_extenders_get_names_and_the_others_whole_nodes() {
    // The second answers in whole nodes, dropping n0.
    let names_only = ExtenderServer::start(|_, body| (200, json!({"NodeNames": names(body)}).to_string()));
    let whole = ExtenderServer::start(|_, body| {
        let items: Vec<Value> = body["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["metadata"]["name"] != "n0")
            .cloned()
            .collect();
        (200, json!({"Nodes": {"items": items}, "FailedNodes": {"n0": "not this one"}}).to_string())
    });
    let cfg = bare_with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n- urlPrefix: {}\n  filterVerb: filter\n",
        names_only.url, whole.url
    ));
    let r = run(&cfg, &format!("{}{}", nodes_yaml(2), pod_yaml("p", "")), &[]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n1"));
    let b = &names_only.bodies("filter")[0];
    assert_eq!(b["NodeNames"], json!(["n0", "n1"]));
    assert!(b["Nodes"].is_null() && b["Pod"]["metadata"]["name"] == "p");
    let b = &whole.bodies("filter")[0];
    assert!(b["NodeNames"].is_null());
    let items = b["Nodes"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["status"]["allocatable"]["cpu"], "4", "whole Node objects: {}", items[0]);
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn an_ignorable_extender_that_is_down_is_skipped_and_another_fails_the_attempt() {
    let port = closed_port();
    let cluster = format!("{}{}", nodes_yaml(2), pod_yaml("p", ""));
    let ignorable = bare_with_extenders(&format!(
        "- urlPrefix: http://127.0.0.1:{port}/ext\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 1\n  ignorable: true\n"
    ));
    let r = run(&ignorable, &cluster, &["default/p"]);
    assert!(node_of(&r, "default/p").is_some(), "{}", message_of(&r, "default/p"));
    let explain = sim::render_explain(&r);
    assert!(explain.contains("(ignorable: skipped)"), "{explain}");

    let required = bare_with_extenders(&format!("- urlPrefix: http://127.0.0.1:{port}/ext\n  filterVerb: filter\n"));
    let r = run(&required, &cluster, &[]);
    assert_eq!(node_of(&r, "default/p"), None);
    let m = message_of(&r, "default/p");
    assert!(m.starts_with(&format!("Post \"http://127.0.0.1:{port}/ext/filter\": ")), "{m}");
    assert!(m.to_lowercase().contains("refused"), "{m}");
}

#[test]
fn a_non_200_answer_and_a_timeout_are_errors_naming_the_url() {
    let failing = ExtenderServer::start(|_, _| (500, "{}".into()));
    let cluster = format!("{}{}", nodes_yaml(2), pod_yaml("p", ""));
    let r = run(&bare_with_extenders(&format!("- urlPrefix: {}\n  filterVerb: filter\n", failing.url)), &cluster, &[]);
    assert_eq!(
        message_of(&r, "default/p"),
        format!("failed filter with extender at URL {}/filter, code 500", failing.url)
    );
    let slow = ExtenderServer::start(|_, body| {
        std::thread::sleep(Duration::from_millis(600));
        (200, json!({"NodeNames": names(body)}).to_string())
    });
    let cfg = bare_with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  httpTimeout: 100ms\n",
        slow.url
    ));
    let r = run(&cfg, &cluster, &[]);
    assert!(message_of(&r, "default/p").contains("no answer within 100ms"), "{}", message_of(&r, "default/p"));
}

#[test]
fn answers_with_lowercase_json_keys_are_read_as_go_reads_them() {
    let ext = ExtenderServer::start(|verb, body| match verb {
        "filter" => {
            let kept: Vec<String> = names(body).into_iter().filter(|n| n != "n0").collect();
            // What follows the first JSON value is left unread, as Go's json.Decoder leaves it.
            let answer = json!({"nodenames": kept, "failednodes": {"n0": "lowercase says no"}, "error": ""});
            (200, format!("{answer}\n<!-- trailing -->"))
        }
        _ => {
            let list: Vec<Value> =
                names(body).iter().map(|n| json!({"host": n, "score": if n == "n1" { 0 } else { 10 }})).collect();
            (200, Value::Array(list).to_string())
        }
    });
    let cfg = bare_with_extenders(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 1\n  nodeCacheCapable: true\n",
        ext.url
    ));
    let r = run(&cfg, &format!("{}{}", nodes_yaml(3), pod_yaml("p", "")), &["default/p"]);
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n2"));
    assert!(sim::render_explain(&r).contains("Unschedulable: lowercase says no"));
}

/// A configuration whose one extender binds the pods that use example.com/gpu.
fn gpu_binder(url: &str) -> String {
    bare_with_extenders(&format!(
        "- urlPrefix: {url}\n  bindVerb: bind\n  managedResources: [{{name: example.com/gpu}}]\n"
    ))
}

#[test]
fn a_binder_extender_binds_the_pods_it_is_interested_in() {
    let ext = ExtenderServer::start(|_, body| {
        let error = if body["PodName"] == "refused" { "no room in the licence pool" } else { "" };
        (200, json!({"Error": error}).to_string())
    });
    let registry = in_tree_registry();
    let cfg = config(&registry, &gpu_binder(&ext.url));
    let cluster = format!("{}{}{}{}", nodes_yaml(1), gpu_pod("gpu", 1), gpu_pod("refused", 1), pod_yaml("plain", ""));
    let file = sim::load::parse("cluster.yaml", &cluster).unwrap();
    let s = Simulation::new(&cfg, &registry, &file, &SimOptions { seed: 1, ..Default::default() }).unwrap();
    let r = s.run();
    assert_eq!(node_of(&r, "default/gpu").as_deref(), Some("n0"));
    assert_eq!(node_of(&r, "default/refused"), None);
    assert_eq!(message_of(&r, "default/refused"), "no room in the licence pool");
    assert_eq!(node_of(&r, "default/plain").as_deref(), Some("n0"));
    let b = ext.bodies("bind");
    assert_eq!(b[0], json!({"PodName": "gpu", "PodNamespace": "default", "PodUID": "uid-gpu", "Node": "n0"}));
    assert!(b.iter().all(|b| b["PodName"] != "plain"), "the extender binds only pods it is interested in");
    assert_eq!(
        bound_by_the_framework(&s.cluster),
        ["default/plain"],
        "DefaultBinder bound only the pod no extender took"
    );
    let samples = s.scheduler().extenders().samples();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!((samples[0].call, samples[0].failed), (kube_wasm_scheduler::extender::Call::Bind, 0));
    assert!(samples[0].ok >= 2, "{samples:?}");
}

#[test]
fn an_ignorable_binder_that_is_down_leaves_the_pod_to_default_binder() {
    let registry = in_tree_registry();
    let port = closed_port();
    let cfg = config(
        &registry,
        &bare_with_extenders(&format!("- urlPrefix: http://127.0.0.1:{port}\n  bindVerb: bind\n  ignorable: true\n")),
    );
    let file = sim::load::parse("cluster.yaml", &format!("{}{}", nodes_yaml(1), pod_yaml("p", ""))).unwrap();
    let s = Simulation::new(&cfg, &registry, &file, &SimOptions { seed: 1, ..Default::default() }).unwrap();
    let r = s.run();
    assert_eq!(node_of(&r, "default/p").as_deref(), Some("n0"), "{}", message_of(&r, "default/p"));
    assert_eq!(bound_by_the_framework(&s.cluster), ["default/p"]);
    let samples = s.scheduler().extenders().samples();
    assert_eq!((samples[0].call, samples[0].ok, samples[0].failed), (kube_wasm_scheduler::extender::Call::Bind, 0, 1));
}

/// The pods a Bind plugin bound through the in-memory cluster (an extender binds through its own API client).
fn bound_by_the_framework(cluster: &kube_wasm_scheduler::cluster::memory::MemoryCluster) -> Vec<String> {
    cluster
        .writes()
        .iter()
        .filter_map(|w| match w {
            ClusterWrite::Bind { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

/// The in-memory cluster with the live cluster's asynchronous Binding request, so that DefaultBinder offers its
/// future to the binding cycle as it does live.
struct AsyncBindingCluster(kube_wasm_scheduler::cluster::memory::MemoryCluster);

impl kube_wasm_scheduler::cluster::ClusterClient for AsyncBindingCluster {
    fn bind(&self, pod: &PodInfo, node: &str) -> Result<(), ClusterError> {
        self.0.bind(pod, node)
    }
    fn bind_async(&self, pod: &PodInfo, node: &str) -> Option<BoxFuture<'static, Result<(), ClusterError>>> {
        let bound = self.0.bind(pod, node);
        Some(Box::pin(async move { bound }))
    }
    fn delete_pod(&self, pod: &PodInfo, preemptor: &PodInfo) -> Result<(), ClusterError> {
        self.0.delete_pod(pod, preemptor)
    }
    fn set_nominated_node(&self, pod: &PodInfo, node: Option<&str>) -> Result<(), ClusterError> {
        self.0.set_nominated_node(pod, node)
    }
    fn record(&self, pod: &PodInfo, event: PodEvent) {
        self.0.record(pod, event)
    }
}

/// The live scheduler binds asynchronously, a native binder's request as a future: a pod a binder extender is
/// interested in must still go to the extender, and the others to DefaultBinder.
#[test]
fn a_binder_extender_binds_in_asynchronous_binding_cycles_too() {
    use kube_wasm_scheduler::cache::Cache;
    use kube_wasm_scheduler::cluster::memory::MemoryCluster;
    use kube_wasm_scheduler::cluster::EventHandler;
    use kube_wasm_scheduler::extender::Extenders;
    use kube_wasm_scheduler::framework::PluginContext;
    use kube_wasm_scheduler::queue::SchedulingQueue;
    use kube_wasm_scheduler::scheduler::{build_profiles, NoopObserver, RealClock, Scheduler, SchedulerOptions};

    let ext = ExtenderServer::start(|_, _| (200, json!({"Error": ""}).to_string()));
    let registry = in_tree_registry();
    let cfg = config(&registry, &gpu_binder(&ext.url));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let cluster = Arc::new(AsyncBindingCluster(MemoryCluster::default()));
    let profiles = Arc::new(build_profiles(&cfg, &registry, &PluginContext::new(cluster.clone())).unwrap());
    let queue = SchedulingQueue::new(profiles.clone(), &profiles.names(), cfg.pod_initial_backoff, cfg.pod_max_backoff);
    let scheduler = Arc::new(
        Scheduler::new(
            profiles,
            queue,
            Cache::new(),
            cluster.clone(),
            Arc::new(RealClock::default()),
            Arc::new(NoopObserver),
            SchedulerOptions { async_binding: true, ..Default::default() },
        )
        .with_binding_runtime(rt.handle().clone())
        .with_extenders(Extenders::new(&cfg.extenders)),
    );
    let file =
        sim::load::parse("cluster.yaml", &format!("{}{}{}", nodes_yaml(1), gpu_pod("gpu", 1), pod_yaml("plain", "")))
            .unwrap();
    for n in file.nodes {
        EventHandler::node_applied(&*scheduler, n);
    }
    for p in file.pending_pods {
        EventHandler::pod_applied(&*scheduler, Arc::new(p));
    }
    while scheduler.schedule_one() {}
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while scheduler.bindings_in_flight() > 0 {
        assert!(std::time::Instant::now() < deadline, "binding cycles did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    let bound_by_extender: Vec<Value> = ext.bodies("bind").iter().map(|b| b["PodName"].clone()).collect();
    assert_eq!(bound_by_extender, [json!("gpu")]);
    assert_eq!(bound_by_the_framework(&cluster.0), ["default/plain"]);
    drop(scheduler);
    rt.shutdown_background();
}

#[test]
fn a_preempt_extender_vetoes_a_victim() {
    // Each node is full with one low-priority pod; the preemptor fits after one eviction. Without the extender
    // n0's victim goes (it has the lower priority); the extender protects it, so n1's is evicted instead.
    let ext = ExtenderServer::start(|_, body| {
        let mut keep = serde_json::Map::new();
        for (node, v) in body["NodeNameToVictims"].as_object().unwrap() {
            let pods = v["Pods"].as_array().unwrap();
            if pods.iter().any(|p| p["metadata"]["labels"]["protected"] == "true") {
                continue;
            }
            let uids: Vec<Value> = pods.iter().map(|p| json!({"UID": p["metadata"]["uid"]})).collect();
            keep.insert(node.clone(), json!({"Pods": uids, "NumPDBViolations": v["NumPDBViolations"]}));
        }
        (200, json!({"NodeNameToMetaVictims": keep}).to_string())
    });
    let bound = |name: &str, node: &str, priority: i32, labels: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: uid-{name}\n  labels: {{{labels}}}\nspec:\n  nodeName: {node}\n  priority: {priority}\n  containers: [{{name: c, resources: {{requests: {{cpu: '4'}}}}}}]\n---\n")
    };
    let cluster = format!(
        "{}{}{}apiVersion: v1\nkind: Pod\nmetadata:\n  name: urgent\n  namespace: default\nspec:\n  priority: 1000\n  containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]\n---\n",
        nodes_yaml(2),
        bound("a", "n0", 1, "protected: 'true'"),
        bound("b", "n1", 5, "")
    );
    let r = run(&with_extenders(&format!("- urlPrefix: {}\n  preemptVerb: preempt\n", ext.url)), &cluster, &[]);
    let evicted: Vec<&str> = r.evictions.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/b"]);
    assert_eq!(node_of(&r, "default/urgent").as_deref(), Some("n1"));
    let sent = &ext.bodies("preempt")[0];
    assert!(sent["NodeNameToMetaVictims"].is_null());
    assert_eq!(sent["Pod"]["metadata"]["name"], "urgent");

    // An extender with a node cache gets the victims' UIDs only, and answers the same way.
    let cached = ExtenderServer::start(|_, body| {
        let mut keep = serde_json::Map::new();
        for (node, v) in body["NodeNameToMetaVictims"].as_object().unwrap() {
            if v["Pods"].as_array().unwrap().iter().any(|p| p["UID"] == "uid-a") {
                continue;
            }
            keep.insert(node.clone(), v.clone());
        }
        (200, json!({"NodeNameToMetaVictims": keep}).to_string())
    });
    let cfg =
        with_extenders(&format!("- urlPrefix: {}\n  preemptVerb: preempt\n  nodeCacheCapable: true\n", cached.url));
    let r = run(&cfg, &cluster, &[]);
    let evicted: Vec<&str> = r.evictions.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/b"]);
    assert!(cached.bodies("preempt")[0]["NodeNameToVictims"].is_null());

    let without = run(HEAD, &cluster, &[]);
    let evicted: Vec<&str> = without.evictions.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["default/a"], "the veto is what changed the choice");
}

#[test]
fn bad_extender_configuration_is_one_line_naming_the_field_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("kws-ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "- urlPrefix: http://x\n  prioritizeVerb: p\n",
            "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
        ),
        (
            "- {urlPrefix: 'http://x', bindVerb: b}\n- {urlPrefix: 'http://y', bindVerb: b}\n",
            "extenders: Invalid value: \"found 2 extenders implementing bind\"",
        ),
        (
            "- urlPrefix: http://x\n  managedResources: [{name: cpu}]\n",
            "extenders[0].managedResources[0].name: Invalid value: \"cpu\": is an invalid extended resource name",
        ),
        (
            "- urlPrefix: http://x\n  managedResources: [{name: a.com/x}, {name: a.com/x}]\n",
            "extenders[0].managedResources[1].name: Invalid value: \"a.com/x\": duplicate",
        ),
        ("- urlPrefix: x\n", "extenders[0].urlPrefix: \"x\" must be an http:// or https:// URL"),
        ("- urlPrefix: http://x\n  httpTimeout: soon\n", "extenders[0].httpTimeout: invalid duration"),
        (
            "- urlPrefix: https://x\n  tlsConfig: {caFile: /nonexistent/ca.pem}\n",
            "extenders[0].tlsConfig.caFile: /nonexistent/ca.pem:",
        ),
        ("- urlPrefix: https://x\n  tlsConfig: {caData: '!!'}\n", "extenders[0].tlsConfig.caData: not valid base64"),
        ("- urlPrefix: http://x\n  filterVerbs: f\n", "unknown field `filterVerbs`"),
    ];
    for (i, (ext, want)) in cases.iter().enumerate() {
        let f = dir.join(format!("c{i}.yaml"));
        std::fs::write(&f, with_extenders(ext)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
            .args(["simulate", "--cluster", "examples/taints/cluster.yaml", "--config"])
            .arg(&f)
            .current_dir(root())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{ext}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{ext}: {err}");
        assert!(err.contains(want), "{ext}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts examples/extender/extender.py on a free port; returns the child and its URL.
fn start_example_extender() -> Option<(Child, String)> {
    let script = root().join("examples/extender/extender.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).ok()?;
    let url = line.trim().strip_prefix("listening on ")?.to_string();
    Some((child, url))
}

#[test]
fn the_example_extender_places_gpu_pods_in_simulate() {
    let Some((mut child, url)) = start_example_extender() else {
        panic!("python3 examples/extender/extender.py did not start");
    };
    let profile = std::fs::read_to_string(root().join("examples/extender/profile.yaml")).unwrap();
    let profile = profile.replace("http://127.0.0.1:8888", &url);
    let f = std::env::temp_dir().join(format!("kws-ext-example-{}.yaml", std::process::id()));
    std::fs::write(&f, profile).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-wasm-scheduler"))
        .args([
            "simulate",
            "--cluster",
            "examples/extender/cluster.yaml",
            "--seed",
            "1",
            "--explain",
            "default/trainer",
        ])
        .arg("--config")
        .arg(&f)
        .current_dir(root())
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&f);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let line = |pod: &str| stdout.lines().find(|l| l.starts_with(pod)).unwrap_or_default().to_string();
    assert!(line("default/trainer").contains("gpu-b"), "{stdout}");
    let too_big = line("default/too-big");
    assert!(
        too_big.contains("0/4 nodes are available: 2 node(s) have fewer than 16 GPUs, 2 node(s) have no GPUs."),
        "{stdout}"
    );
    assert!(line("default/web").contains("Scheduled"), "{stdout}");
    assert!(stdout.contains(&format!("Extender {url} filter:")), "{stdout}");
    assert!(Path::new(&root().join("examples/extender/README.md")).exists());
}

/// A CA, a server certificate it signed for `extender.test` only, and a client certificate it signed.
struct Pki {
    ca_pem: String,
    server: (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>),
    client_pem: (String, String),
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "extender test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["extender.test".to_string()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    let client_key = rcgen::KeyPair::generate().unwrap();
    let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params.distinguished_name.push(rcgen::DnType::CommonName, "kube-wasm-scheduler");
    let client = client_params.signed_by(&client_key, &issuer).unwrap();
    Pki {
        ca_pem: ca.pem(),
        server: (
            vec![server.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        ),
        client_pem: (client.pem(), client_key.serialize_pem()),
    }
}

/// An HTTPS extender answering every filter with all nodes; records whether each client presented a certificate
/// the CA signed.
fn https_extender(p: &Pki) -> (ExtenderServer, Arc<Mutex<Vec<bool>>>) {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(p.ca_pem.as_bytes()).unwrap()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(p.server.0.clone(), p.server.1.clone_key())
            .unwrap(),
    );
    let client_certs: Arc<Mutex<Vec<bool>>> = Arc::default();
    let certs = client_certs.clone();
    let accept: Accept = Arc::new(move |mut tcp: TcpStream| {
        let mut conn = rustls::ServerConnection::new(config.clone()).ok()?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).ok()?;
        }
        certs.lock().unwrap().push(conn.peer_certificates().is_some());
        Some(Box::new(rustls::StreamOwned::new(conn, tcp)) as Box<dyn Stream>)
    });
    let server = ExtenderServer::start_with(accept, |_, body| (200, json!({"NodeNames": names(body)}).to_string()));
    (server, client_certs)
}

#[test]
fn https_extenders_verify_with_the_configured_ca_and_present_the_client_certificate() {
    use base64::Engine;
    let p = pki();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (ext, client_certs) = https_extender(&p);
    let https = ext.url.replace("http://", "https://");
    let cluster = format!("{}{}", nodes_yaml(2), pod_yaml("p", ""));
    let filter = |tls: &str| {
        bare_with_extenders(&format!("- urlPrefix: {https}\n  filterVerb: filter\n  nodeCacheCapable: true\n{tls}"))
    };

    // The CA and the client pair as base64 data; the certificate names extender.test, not 127.0.0.1.
    let data = format!(
        "  tlsConfig:\n    serverName: extender.test\n    caData: {}\n    certData: {}\n    keyData: {}\n",
        b64(&p.ca_pem),
        b64(&p.client_pem.0),
        b64(&p.client_pem.1)
    );
    let r = run(&filter(&data), &cluster, &[]);
    assert!(node_of(&r, "default/p").is_some(), "{}", message_of(&r, "default/p"));
    assert_eq!(client_certs.lock().unwrap().as_slice(), [true], "the client certificate was presented");

    // The same CA from a file, without serverName: the certificate is not for 127.0.0.1.
    let dir = std::env::temp_dir().join(format!("kws-ext-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &p.ca_pem).unwrap();
    let r = run(&filter(&format!("  tlsConfig:\n    caFile: {}\n", ca_file.display())), &cluster, &[]);
    let m = message_of(&r, "default/p");
    assert!(node_of(&r, "default/p").is_none() && m.contains("certificate not valid for name \"127.0.0.1\""), "{m}");

    // Another CA (of the same name, so webpki finds the issuer and then the signature wrong): not trusted.
    std::fs::write(&ca_file, pki().ca_pem).unwrap();
    let other = format!("  tlsConfig:\n    serverName: extender.test\n    caFile: {}\n", ca_file.display());
    let r = run(&filter(&other), &cluster, &[]);
    let m = message_of(&r, "default/p");
    assert!(node_of(&r, "default/p").is_none() && m.contains("invalid peer certificate: BadSignature"), "{m}");

    // enableHTTPS without a CA: not verified, as upstream.
    let r = run(&filter("  enableHTTPS: true\n"), &cluster, &[]);
    assert!(node_of(&r, "default/p").is_some(), "{}", message_of(&r, "default/p"));
    let _ = std::fs::remove_dir_all(&dir);
}
