//! HTTP scheduler extenders, as upstream's `pkg/scheduler/extender.go` and the extender parts of
//! `schedule_one.go` (`findNodesThatPassExtenders`, `prioritizeNodes`, `extendersBinding`) and of
//! `framework/preemption` (`callExtenders`). Teams keep the extenders they run today while they port policies to
//! Wasm one at a time.
//!
//! The scheduling cycle is synchronous; the calls run on a small runtime of their own (one worker thread, one
//! pooled client per extender) and the cycle waits for them, as kube-scheduler's cycle waits for its HTTP calls.
//! Prioritize calls of several extenders run at once, as upstream's goroutines do.

pub mod client;
pub mod wire;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use thiserror::Error;

use crate::config::{ConfigError, ExtenderConfig, SchedulerConfig};
use crate::framework::runtime::NodePluginScores;
use crate::framework::{ExtenderTrace, NodeInfo, NodeToStatus, PodInfo, PreemptionCandidate, Snapshot, Status};
use client::HttpClient;
use wire::{Candidates, GoDecode, SentVictims, MAX_EXTENDER_PRIORITY};

/// The framework's top score (upstream `MaxNodeScore`); an extender's 0–10 is scaled to it.
const MAX_NODE_SCORE: i64 = 100;

/// Upstream's `framework.ExtenderName`: the "plugin" a pod is unschedulable by when an extender rejected nodes.
/// No plugin registers events under it, so any cluster event requeues such a pod, as upstream does.
pub const EXTENDER_NAME: &str = "Extender";

/// A call to an extender that failed.
#[derive(Debug, Error)]
pub enum ExtenderError {
    /// The request could not be built from the URL.
    #[error("Post {url:?}: {source}")]
    Request {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: hyper::http::Error,
    },
    /// Connecting or exchanging failed.
    #[error("Post {url:?}: {detail}")]
    Transport {
        /// The URL.
        url: String,
        /// The error with its causes, on one line.
        detail: String,
        /// The client's error.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// No complete answer within `httpTimeout`.
    #[error("Post {url:?}: no answer within {timeout:?} (Client.Timeout exceeded)")]
    Timeout {
        /// The URL.
        url: String,
        /// The configured timeout.
        timeout: Duration,
    },
    /// The extender answered with another status than 200 (upstream's wording).
    #[error("failed {verb} with extender at URL {url}, code {code}")]
    Code {
        /// The verb.
        verb: String,
        /// The URL.
        url: String,
        /// The HTTP status.
        code: u16,
    },
    /// The answer's body could not be read.
    #[error("Post {url:?}: reading the answer: {detail}")]
    Body {
        /// The URL.
        url: String,
        /// Why.
        detail: String,
    },
    /// The answer is not JSON.
    #[error("Post {url:?}: the answer is not JSON: {source}")]
    Json {
        /// The URL.
        url: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The answer is JSON of the wrong shape.
    #[error("extender {extender}: {detail}")]
    Shape {
        /// The extender.
        extender: String,
        /// What did not fit.
        detail: String,
    },
    /// The extender's own `Error` field, passed on as upstream does.
    #[error("{0}")]
    Answered(String),
    /// A node in a filter answer that was not among the candidates (upstream's wording).
    #[error("extender {extender:?} claims a filtered node {node:?} which is not found in the input node list")]
    UnknownNode {
        /// The extender.
        extender: String,
        /// The node.
        node: String,
    },
    /// A preemption answer naming a node the snapshot does not hold.
    #[error("extender {extender}: node {node:?} of the preemption answer is not in the cluster")]
    UnknownCandidate {
        /// The extender.
        extender: String,
        /// The node.
        node: String,
    },
    /// A victim in a preemption answer that is not on its node (upstream's wording).
    #[error("extender: {extender} claims to preempt pod (UID: {uid}) on node: {node}, but the pod is not found on that node")]
    UnknownVictim {
        /// The extender.
        extender: String,
        /// The victim's UID.
        uid: String,
        /// The node.
        node: String,
    },
    /// A node left in a preemption answer without victims (upstream's wording).
    #[error("expected at least one victim pod on node {0:?}")]
    NoVictims(String),
    /// The call's task ended without an answer (it panicked or the runtime shut down).
    #[error("extender call did not complete: {0}")]
    Task(String),
}

/// The four calls an extender may serve; the `verb` label of its metrics (the configured verbs are free text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `filterVerb`.
    Filter,
    /// `prioritizeVerb`.
    Prioritize,
    /// `preemptVerb`.
    Preempt,
    /// `bindVerb`.
    Bind,
}

impl Call {
    /// Every call, in the order of the stats arrays.
    pub const ALL: [Call; 4] = [Call::Filter, Call::Prioritize, Call::Preempt, Call::Bind];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Filter => "filter",
            Call::Prioritize => "prioritize",
            Call::Preempt => "preempt",
            Call::Bind => "bind",
        }
    }
}

/// Counters of one extender's calls by [`Call`], read when metrics are scraped.
#[derive(Debug, Default)]
pub struct CallStats {
    ok: [AtomicU64; 4],
    failed: [AtomicU64; 4],
    micros: [AtomicU64; 4],
}

impl CallStats {
    fn record(&self, call: Call, ok: bool, took: Duration) {
        let i = call as usize;
        let counter = if ok { &self.ok[i] } else { &self.failed[i] };
        counter.fetch_add(1, Ordering::Relaxed);
        self.micros[i].fetch_add(took.as_micros().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }
}

/// One extender's counters for one call, as scraped.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSample {
    /// The extender (its URL prefix).
    pub extender: String,
    /// The call.
    pub call: Call,
    /// Calls answered usably.
    pub ok: u64,
    /// Calls that failed (transport, timeout, status, a malformed answer).
    pub failed: u64,
    /// Time spent in all of them.
    pub seconds: f64,
}

/// One configured extender (upstream `HTTPExtender`).
pub struct HttpExtender {
    /// The URL prefix: upstream names an extender by it in logs and scores.
    name: String,
    filter_verb: String,
    preempt_verb: String,
    prioritize_verb: String,
    bind_verb: String,
    weight: i64,
    node_cache_capable: bool,
    managed_resources: HashSet<String>,
    ignorable: bool,
    client: HttpClient,
    stats: Arc<CallStats>,
}

impl HttpExtender {
    fn new(c: &ExtenderConfig) -> HttpExtender {
        let s = &c.spec;
        let client = HttpClient::new(&s.url_prefix, c.tls.as_ref(), c.timeout)
            .unwrap_or_else(|(f, m)| panic!("extender {}: {f}: {m} (checked with the configuration)", s.url_prefix));
        HttpExtender {
            name: s.url_prefix.clone(),
            filter_verb: s.filter_verb.clone(),
            preempt_verb: s.preempt_verb.clone(),
            prioritize_verb: s.prioritize_verb.clone(),
            bind_verb: s.bind_verb.clone(),
            weight: s.weight,
            node_cache_capable: s.node_cache_capable,
            managed_resources: s.managed_resources.iter().map(|r| r.name.clone()).collect(),
            ignorable: s.ignorable,
            client,
            stats: Arc::default(),
        }
    }

    /// The call as a future for the extenders' runtime, counted in its stats.
    fn send(&self, call: Call, verb: &str, body: Vec<u8>) -> impl Future<Output = Result<Value, ExtenderError>> {
        let (client, stats, verb) = (self.client.clone(), self.stats.clone(), verb.to_string());
        async move {
            let t0 = Instant::now();
            let r = client.send(verb, body).await;
            stats.record(call, r.is_ok(), t0.elapsed());
            r
        }
    }

    /// The extender's name (its URL prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Upstream `IsInterested`: every pod when no resources are managed, else a pod whose containers or init
    /// containers request or limit one of them.
    pub fn is_interested(&self, pod: &PodInfo) -> bool {
        if self.managed_resources.is_empty() {
            return true;
        }
        let Some(spec) = pod.pod.spec.as_ref() else { return false };
        spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
            c.resources.as_ref().is_some_and(|r| {
                r.requests.iter().chain(r.limits.iter()).flatten().any(|(k, _)| self.managed_resources.contains(k))
            })
        })
    }

    /// The request body of a filter or prioritize call.
    fn args(&self, pod: &Value, nodes: &[Arc<NodeInfo>]) -> Vec<u8> {
        let candidates = if self.node_cache_capable {
            Candidates::Names(nodes.iter().map(|n| n.name.as_str()).collect())
        } else {
            Candidates::Nodes(nodes.iter().map(|n| serde_json::to_value(&*n.node).unwrap_or(Value::Null)).collect())
        };
        serde_json::to_vec(&wire::extender_args(pod, candidates)).expect("JSON values serialize")
    }

    fn shape(&self, detail: String) -> ExtenderError {
        ExtenderError::Shape { extender: self.name.clone(), detail }
    }
}

/// What a filter call decided.
struct Filtered {
    kept: Vec<Arc<NodeInfo>>,
    failed: BTreeMap<String, String>,
    unresolvable: BTreeMap<String, String>,
}

/// The runtime the calls run on; shut down without waiting when the scheduler goes (it may be dropped on an
/// async thread, where a blocking shutdown would panic).
struct CallRuntime(Option<tokio::runtime::Runtime>);

impl Drop for CallRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Checks that each extender's TLS material makes a client, as building it would: one line naming the field
/// (`extenders[i].tlsConfig.caFile`), before anything runs.
pub fn check_tls(cfg: &SchedulerConfig) -> Result<(), ConfigError> {
    for e in &cfg.extenders {
        if let Some(t) = &e.tls {
            t.check().map_err(|(f, m)| ConfigError {
                file: cfg.source.clone(),
                field: format!("extenders[{}].{f}", e.index),
                message: m,
            })?;
        }
    }
    Ok(())
}

/// The configured extenders, in call order (ignorable ones last), and the runtime their calls run on.
#[derive(Default)]
pub struct Extenders {
    list: Vec<HttpExtender>,
    runtime: Option<CallRuntime>,
    prioritizing: AtomicU64,
}

impl Extenders {
    /// Builds the clients of checked extender settings; none configured: nothing is started.
    pub fn new(configs: &[ExtenderConfig]) -> Extenders {
        if configs.is_empty() {
            return Extenders::default();
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("extender-http")
            .enable_all()
            .build()
            .expect("a runtime for extender calls");
        Extenders {
            list: configs.iter().map(HttpExtender::new).collect(),
            runtime: Some(CallRuntime(Some(rt))),
            prioritizing: AtomicU64::new(0),
        }
    }

    /// Whether no extender is configured (the cycle then runs exactly as without this module).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The extenders, in call order.
    pub fn list(&self) -> &[HttpExtender] {
        &self.list
    }

    /// Runs calls on the extenders' runtime and waits for them all, from any thread (the scheduling loop, a
    /// binding thread, or a blocking task of another runtime).
    fn wait_all<T: Send + 'static>(
        &self,
        calls: Vec<impl Future<Output = Result<T, ExtenderError>> + Send + 'static>,
    ) -> Vec<Result<T, ExtenderError>> {
        let rt = self.runtime.as_ref().and_then(|r| r.0.as_ref()).expect("extenders have a runtime");
        let handles: Vec<_> = calls.into_iter().map(|c| rt.spawn(c)).collect();
        futures::executor::block_on(futures::future::join_all(handles))
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| Err(ExtenderError::Task(e.to_string()))))
            .collect()
    }

    fn call(&self, e: &HttpExtender, call: Call, verb: &str, body: Vec<u8>) -> Result<Value, ExtenderError> {
        self.wait_all(vec![e.send(call, verb, body)]).pop().expect("one call, one answer")
    }

    /// Every extender's call counters, for the metrics.
    pub fn samples(&self) -> Vec<CallSample> {
        let mut out = Vec::new();
        for e in &self.list {
            for call in Call::ALL {
                let i = call as usize;
                let (ok, failed) = (e.stats.ok[i].load(Ordering::Relaxed), e.stats.failed[i].load(Ordering::Relaxed));
                if ok + failed == 0 {
                    continue;
                }
                let seconds = e.stats.micros[i].load(Ordering::Relaxed) as f64 / 1e6;
                out.push(CallSample { extender: e.name.clone(), call, ok, failed, seconds });
            }
        }
        out
    }

    /// Prioritize calls in flight (upstream `scheduler_goroutines{operation="prioritizing_extender"}`).
    pub fn prioritizing(&self) -> u64 {
        self.prioritizing.load(Ordering::Relaxed)
    }

    /// Upstream `findNodesThatPassExtenders`: each interested extender with a filter verb, in order, sees the
    /// nodes still feasible; the nodes it rejects get Unschedulable or UnschedulableAndUnresolvable (the latter
    /// wins) with its reason. A failing extender fails the attempt unless it is ignorable, which is skipped.
    pub fn filter(
        &self,
        pod: &PodInfo,
        mut feasible: Vec<Arc<NodeInfo>>,
        statuses: &mut NodeToStatus,
        mut trace: Option<&mut Vec<ExtenderTrace>>,
    ) -> Result<Vec<Arc<NodeInfo>>, Status> {
        let mut pod_json = None;
        for e in &self.list {
            if feasible.is_empty() {
                break;
            }
            if e.filter_verb.is_empty() || !e.is_interested(pod) {
                continue;
            }
            let pod_json = pod_json.get_or_insert_with(|| pod_value(pod));
            let mut t = ExtenderTrace { extender: e.name.clone(), verb: "filter".into(), ..Default::default() };
            match self.filter_one(e, pod_json, &feasible) {
                Err(err) if e.ignorable => {
                    tracing::info!(extender = %e.name, pod = %pod.key(), error = %err,
                        "Skipping extender as it returned error and has ignorable flag set");
                    t.error = Some(format!("{err} (ignorable: skipped)"));
                    push(&mut trace, t);
                }
                Err(err) => {
                    t.error = Some(err.to_string());
                    push(&mut trace, t);
                    return Err(Status::error(err.to_string()));
                }
                Ok(f) => {
                    for (node, msg) in &f.unresolvable {
                        statuses.insert(node.clone(), Status::unresolvable(msg.clone()));
                    }
                    for (node, msg) in f.failed.iter().filter(|(n, _)| !f.unresolvable.contains_key(*n)) {
                        statuses.insert(node.clone(), Status::unschedulable(msg.clone()));
                    }
                    if trace.is_some() {
                        t.verdicts = feasible
                            .iter()
                            .map(|n| {
                                let v = if let Some(m) = f.unresolvable.get(&n.name) {
                                    format!("UnschedulableAndUnresolvable: {m}")
                                } else if let Some(m) = f.failed.get(&n.name) {
                                    format!("Unschedulable: {m}")
                                } else if f.kept.iter().any(|k| k.name == n.name) {
                                    "feasible".into()
                                } else {
                                    "dropped (not in the answer)".into()
                                };
                                (n.name.clone(), v)
                            })
                            .collect();
                        push(&mut trace, t);
                    }
                    feasible = f.kept;
                }
            }
        }
        Ok(feasible)
    }

    fn filter_one(&self, e: &HttpExtender, pod: &Value, nodes: &[Arc<NodeInfo>]) -> Result<Filtered, ExtenderError> {
        let answer = self.call(e, Call::Filter, &e.filter_verb, e.args(pod, nodes))?;
        let r = wire::FilterResult::decode(&answer, "ExtenderFilterResult").map_err(|d| e.shape(d))?;
        if !r.error.is_empty() {
            return Err(ExtenderError::Answered(r.error));
        }
        let names: Vec<String> = match (e.node_cache_capable, r.node_names, r.nodes) {
            (true, Some(names), _) => names,
            (_, _, Some(list)) => list.items.into_iter().map(|n| n.metadata.name).collect(),
            // Neither list: nothing passed (upstream's nil result).
            _ => Vec::new(),
        };
        let kept = names
            .into_iter()
            .map(|name| {
                nodes
                    .iter()
                    .find(|n| n.name == name)
                    .cloned()
                    .ok_or_else(|| ExtenderError::UnknownNode { extender: e.name.clone(), node: name })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Filtered { kept, failed: r.failed_nodes, unresolvable: r.failed_and_unresolvable_nodes })
    }

    /// The extenders' part of upstream `prioritizeNodes`: every interested extender with a prioritize verb is
    /// called at once; each score × weight × (MaxNodeScore / MaxExtenderPriority) is added to the node's total.
    /// A failing prioritizer gives no scores and is otherwise ignored, ignorable or not, as upstream.
    pub fn prioritize(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        totals: &mut [NodePluginScores],
        mut trace: Option<&mut Vec<ExtenderTrace>>,
    ) {
        let callers: Vec<&HttpExtender> =
            self.list.iter().filter(|e| !e.prioritize_verb.is_empty() && e.is_interested(pod)).collect();
        if callers.is_empty() {
            return;
        }
        let pod_json = pod_value(pod);
        let calls = callers
            .iter()
            .map(|e| e.send(Call::Prioritize, &e.prioritize_verb, e.args(&pod_json, nodes)))
            .collect::<Vec<_>>();
        self.prioritizing.fetch_add(calls.len() as u64, Ordering::Relaxed);
        let answers = self.wait_all(calls);
        self.prioritizing.fetch_sub(callers.len() as u64, Ordering::Relaxed);
        let mut added: BTreeMap<&str, i64> = BTreeMap::new();
        for (e, answer) in callers.iter().zip(answers) {
            let mut t = ExtenderTrace { extender: e.name.clone(), verb: "prioritize".into(), ..Default::default() };
            let list =
                answer.and_then(|v| Vec::<wire::HostPriority>::decode(&v, "HostPriorityList").map_err(|d| e.shape(d)));
            match list {
                Err(err) => {
                    tracing::debug!(extender = %e.name, pod = %pod.key(), error = %err,
                        "Failed to run extender's priority function. No score given by this extender.");
                    t.error = Some(format!("{err} (no scores from this extender)"));
                }
                Ok(list) => {
                    for hp in list {
                        // Go's int64 arithmetic wraps; saturating keeps an absurd score absurd instead.
                        let score =
                            hp.score.saturating_mul(e.weight).saturating_mul(MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY);
                        t.scores.push((hp.host.clone(), hp.score, score));
                        if let Some(n) = nodes.iter().find(|n| n.name == hp.host) {
                            let sum = added.entry(n.name.as_str()).or_insert(0);
                            *sum = sum.saturating_add(score);
                        }
                    }
                }
            }
            push(&mut trace, t);
        }
        for t in totals.iter_mut() {
            if let Some(a) = added.get(nodes[t.index].name.as_str()) {
                t.total = t.total.saturating_add(*a);
                // Upstream draws a tie-breaker for exactly these nodes (any non-zero value marks them here; the
                // scheduler draws the real one from its own random source).
                t.randomizer = 1;
            }
        }
    }

    /// Upstream `callExtenders`: each interested extender with a preempt verb, in order, gets the candidates and
    /// answers which nodes and victims remain; the next one sees that answer. An empty answer ends preemption.
    pub fn process_preemption(
        &self,
        pod: &PodInfo,
        mut candidates: Vec<PreemptionCandidate>,
        snapshot: &Snapshot,
    ) -> Result<Vec<PreemptionCandidate>, Status> {
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let mut pod_json = None;
        for e in &self.list {
            if e.preempt_verb.is_empty() || !e.is_interested(pod) {
                continue;
            }
            let pod_json = pod_json.get_or_insert_with(|| pod_value(pod));
            let answered = self.preempt_one(e, pod_json, &candidates, snapshot);
            let mut kept = match answered {
                Err(err) if e.ignorable => {
                    tracing::info!(extender = %e.name, pod = %pod.key(), error = %err,
                        "Skipped extender as it returned error and has ignorable flag set");
                    continue;
                }
                Err(err) => return Err(Status::error(err.to_string())),
                Ok(kept) => kept,
            };
            if let Some(empty) = kept.iter().find(|c| c.victims.is_empty()) {
                if !e.ignorable {
                    return Err(Status::error(ExtenderError::NoVictims(empty.node.clone()).to_string()));
                }
                kept.retain(|c| !c.victims.is_empty());
            }
            candidates = kept;
            if candidates.is_empty() {
                break;
            }
        }
        Ok(candidates)
    }

    /// One preempt call; the answer's candidates in the order of the ones sent (nodes the scheduler did not send
    /// follow by name), victims resolved by UID from the snapshot.
    fn preempt_one(
        &self,
        e: &HttpExtender,
        pod: &Value,
        candidates: &[PreemptionCandidate],
        snapshot: &Snapshot,
    ) -> Result<Vec<PreemptionCandidate>, ExtenderError> {
        let sent = candidates
            .iter()
            .map(|c| {
                let v = if e.node_cache_capable {
                    SentVictims::Uids(c.victims.iter().map(|p| p.uid.clone()).collect())
                } else {
                    SentVictims::Pods(c.victims.iter().map(|p| pod_value(p)).collect())
                };
                (c.node.clone(), v, c.num_pdb_violations as i64)
            })
            .collect();
        let body =
            serde_json::to_vec(&wire::preemption_args(pod, sent, e.node_cache_capable)).expect("JSON values serialize");
        let answer = self.call(e, Call::Preempt, &e.preempt_verb, body)?;
        let mut r = wire::PreemptionResult::decode(&answer, "ExtenderPreemptionResult").map_err(|d| e.shape(d))?;
        let mut order: Vec<String> =
            candidates.iter().map(|c| c.node.clone()).filter(|n| r.node_name_to_meta_victims.contains_key(n)).collect();
        order.extend(r.node_name_to_meta_victims.keys().filter(|n| !order.contains(n)).cloned().collect::<Vec<_>>());
        let mut out = Vec::with_capacity(order.len());
        for node in order {
            let meta = r.node_name_to_meta_victims.remove(&node).expect("ordered from the answer's keys");
            let info = snapshot
                .get(&node)
                .ok_or_else(|| ExtenderError::UnknownCandidate { extender: e.name.clone(), node: node.clone() })?;
            let victims = meta
                .pods
                .iter()
                .map(|m| {
                    info.pods.iter().find(|p| p.uid == m.uid).cloned().ok_or_else(|| ExtenderError::UnknownVictim {
                        extender: e.name.clone(),
                        uid: m.uid.clone(),
                        node: node.clone(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            out.push(PreemptionCandidate {
                node,
                victims,
                num_pdb_violations: meta.num_pdb_violations.max(0) as usize,
            });
        }
        Ok(out)
    }

    /// Whether an extender binds this pod instead of the framework's binders.
    pub fn binds(&self, pod: &PodInfo) -> bool {
        self.list.iter().any(|e| !e.bind_verb.is_empty() && e.is_interested(pod))
    }

    /// Upstream `extendersBinding`: binds through the first interested extender with a bind verb. `None`: no
    /// extender bound the pod (none is a binder for it, or an ignorable one failed) and the framework's Bind
    /// plugins go on; otherwise the binding's outcome.
    pub fn bind(&self, pod: &PodInfo, node: &str) -> Option<Status> {
        for e in self.list.iter().filter(|e| !e.bind_verb.is_empty() && e.is_interested(pod)) {
            let body = serde_json::to_vec(&wire::binding_args(
                &pod.name,
                &pod.namespace,
                pod.pod.metadata.uid.as_deref().unwrap_or_default(),
                node,
            ))
            .expect("JSON values serialize");
            let result = self.call(e, Call::Bind, &e.bind_verb, body).and_then(|v| {
                let r = wire::BindingResult::decode(&v, "ExtenderBindingResult").map_err(|d| e.shape(d))?;
                if r.error.is_empty() {
                    Ok(())
                } else {
                    Err(ExtenderError::Answered(r.error))
                }
            });
            match result {
                Err(err) if e.ignorable => {
                    tracing::info!(extender = %e.name, pod = %pod.key(), error = %err,
                        "Skipping extender in bind as it returned error and has ignorable flag set");
                }
                Err(err) => return Some(Status::error(err.to_string())),
                Ok(()) => return Some(Status::success()),
            }
        }
        None
    }
}

/// The pod as its API object, as upstream sends `*v1.Pod`.
fn pod_value(pod: &PodInfo) -> Value {
    serde_json::to_value(&*pod.pod).unwrap_or(Value::Null)
}

fn push(trace: &mut Option<&mut Vec<ExtenderTrace>>, t: ExtenderTrace) {
    if let Some(v) = trace.as_deref_mut() {
        v.push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Extender, ExtenderManagedResource};

    fn extenders(managed: &[&str]) -> Extenders {
        let spec = Extender {
            url_prefix: "http://127.0.0.1:1".into(),
            managed_resources: managed
                .iter()
                .map(|n| ExtenderManagedResource { name: n.to_string(), ignored_by_scheduler: false })
                .collect(),
            ..Default::default()
        };
        Extenders::new(&[ExtenderConfig { spec, timeout: client::DEFAULT_TIMEOUT, tls: None, index: 0 }])
    }

    fn pod(containers: serde_json::Value, init: serde_json::Value) -> PodInfo {
        let pod =
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init}});
        PodInfo::new(serde_json::from_value(pod).unwrap()).unwrap()
    }

    #[test]
    fn is_interested_as_upstream() {
        let gpu = extenders(&["example.com/gpu"]);
        let all = extenders(&[]);
        let plain = serde_json::json!([{"name": "c", "resources": {"requests": {"cpu": "1"}}}]);
        let cases = [
            ("no managed resource", pod(plain.clone(), serde_json::json!([])), false),
            (
                "a request",
                pod(
                    serde_json::json!([{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]),
                    serde_json::json!([]),
                ),
                true,
            ),
            (
                "a limit only",
                pod(
                    serde_json::json!([{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]),
                    serde_json::json!([]),
                ),
                true,
            ),
            (
                "an init container",
                pod(
                    plain.clone(),
                    serde_json::json!([{"name": "i", "resources": {"limits": {"example.com/gpu": "1"}}}]),
                ),
                true,
            ),
            (
                "another extended resource",
                pod(
                    serde_json::json!([{"name": "c", "resources": {"limits": {"example.com/fpga": "1"}}}]),
                    serde_json::json!([]),
                ),
                false,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(gpu.list()[0].is_interested(&p), want, "{name}");
            assert!(all.list()[0].is_interested(&p), "{name}: without managedResources every pod");
        }
    }
}
