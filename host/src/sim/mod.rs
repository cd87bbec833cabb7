//! The simulator: schedules the pending pods of a cluster file with the real framework, cache and queue on an
//! in-memory cluster and a virtual clock, and reports where each pod went or why it could not.

pub mod generate;
mod html;
pub mod load;
mod report;
pub mod validate;
pub mod workloads;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::cache::Cache;
use crate::cluster::memory::{MemoryCluster, Write};
use crate::cluster::EventHandler;
use crate::config::SchedulerConfig;
use crate::framework::metrics::PluginMetrics;
use crate::framework::{CycleTrace, FrameworkError, PluginContext, PodInfo, Registry};
use crate::queue::SchedulingQueue;
use crate::scheduler::{build_profiles, AttemptResult, Clock, Observer, Scheduler, SchedulerOptions, VirtualClock};

pub use html::{render_html, CPU_COLOR, MEMORY_COLOR};
pub use load::{ClusterFile, ClusterFileError};
pub use report::{render_compare, render_explain, render_table, render_trace};

/// Simulated time one scheduling attempt takes, so that backoffs expire in a deterministic order.
const ATTEMPT_TIME: Duration = Duration::from_millis(1);

/// Where one pod went.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Placement {
    /// `ns/name`.
    pub pod: String,
    /// The node, or None when the pod stays pending.
    pub node: Option<String>,
    /// `Successfully assigned ...` or the reason it is pending.
    pub message: String,
    /// The profile that scheduled it.
    pub profile: String,
    /// Scheduling attempts.
    pub attempts: u32,
}

/// A pod evicted by preemption.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Eviction {
    /// `ns/name` of the victim.
    pub pod: String,
    /// `ns/name` of the preemptor.
    pub preemptor: String,
    /// The node.
    pub node: String,
}

/// A claim bound while the simulation ran (its volume found, or provisioned for the chosen node).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ClaimBinding {
    /// `ns/name` of the PersistentVolumeClaim.
    pub claim: String,
    /// The PersistentVolume.
    pub volume: String,
    /// The node the volume was provisioned for; `None` when an existing volume was bound.
    pub provisioned_for: Option<String>,
}

/// A node as the run left it: what its pods request of what it has.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NodeUsage {
    /// The node.
    pub node: String,
    /// Its `topology.kubernetes.io/zone` label, if any.
    pub zone: Option<String>,
    /// Pods on it.
    pub pods: usize,
    /// CPU requested, millicores.
    pub cpu_requested: i64,
    /// CPU allocatable, millicores.
    pub cpu_allocatable: i64,
    /// Memory requested, bytes.
    pub memory_requested: i64,
    /// Memory allocatable, bytes.
    pub memory_allocatable: i64,
}

/// A ResourceClaim allocated while the simulation ran.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ClaimAllocation {
    /// `ns/name` of the ResourceClaim.
    pub claim: String,
    /// The devices allocated to it, `driver/pool/device`.
    pub devices: Vec<String>,
}

/// One attempt's trace for `--explain`.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    /// `ns/name`.
    pub pod: String,
    /// Attempt number.
    pub attempt: u32,
    /// The outcome.
    pub result: String,
    /// The trace.
    pub trace: CycleTrace,
}

/// How a profile's shadow compared with it over the run.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowSummary {
    /// The serving profile.
    pub profile: String,
    /// The shadow profile.
    pub shadow: String,
    /// Cycles compared.
    pub decisions: u64,
    /// Cycles in which the serving node was among the shadow's best, or neither found a node.
    pub agree: u64,
    /// Cycles in which they differed.
    pub disagree: u64,
    /// Cycles in which the shadow ended with an Error status.
    pub error: u64,
}

/// The simulator's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Placements in the order the pods' final outcome was decided.
    pub placements: Vec<Placement>,
    /// Preemption evictions, in order.
    pub evictions: Vec<Eviction>,
    /// Claims bound by the scheduler's choices, in order.
    pub claims: Vec<ClaimBinding>,
    /// ResourceClaims allocated by the scheduler's choices, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<ClaimAllocation>,
    /// Pending pods whose schedulerName matches no profile (left alone, as a second scheduler would).
    pub ignored: Vec<String>,
    /// Traces of the explained pods.
    pub explain: Vec<Explained>,
    /// Number of nodes.
    pub nodes: usize,
    /// Every node as the run left it, in name order.
    pub usage: Vec<NodeUsage>,
    /// Scheduling attempts in total.
    pub attempts: u64,
    /// How each profile's shadow compared with it (profiles that name one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<ShadowSummary>,
    /// What each profile made of the tenant policies in the cluster file (as their status would say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicySummary>,
}

/// A tenant policy's status at the end of the run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySummary {
    /// `SchedulingPolicy ns/name` or `ClusterSchedulingPolicy name`.
    pub policy: String,
    /// The profile it attached to.
    pub profile: String,
    /// Whether it served.
    pub ready: bool,
    /// `Loaded`, or why not.
    pub reason: String,
    /// One line.
    pub message: String,
}

#[derive(Default)]
struct Collector {
    /// Pod → sequence number of its latest outcome (the report sorts by it).
    order: HashMap<String, u64>,
    seq: u64,
    last: HashMap<String, Placement>,
    evictions: Vec<Eviction>,
    explain: Vec<Explained>,
    attempts: u64,
}

/// Collects outcomes for the report.
#[derive(Default)]
struct SimObserver(Mutex<Collector>);

impl PluginMetrics for SimObserver {}

impl crate::framework::metrics::BatchMetrics for SimObserver {}

impl Observer for SimObserver {
    fn attempt(&self, profile: &str, pod: &PodInfo, result: &AttemptResult, _d: Duration, trace: Option<CycleTrace>) {
        let mut c = self.0.lock().expect("collector lock");
        c.attempts += 1;
        let key = pod.key();
        let attempts = c.last.get(&key).map(|p| p.attempts).unwrap_or(0) + 1;
        let (node, message) = match result {
            AttemptResult::Scheduled(n) => (Some(n.clone()), format!("Successfully assigned {key} to {n}")),
            AttemptResult::Unschedulable(m) | AttemptResult::Error(m) => (None, m.clone()),
        };
        if let Some(t) = trace {
            let r = node.clone().map(|n| format!("scheduled on {n}")).unwrap_or_else(|| message.clone());
            c.explain.push(Explained { pod: key.clone(), attempt: attempts, result: r, trace: t });
        }
        c.seq += 1;
        let seq = c.seq;
        c.order.insert(key.clone(), seq);
        c.last.insert(key.clone(), Placement { pod: key, node, message, profile: profile.to_string(), attempts });
    }

    fn preempted(&self, victim: &PodInfo, preemptor: &PodInfo, node: &str) {
        let mut c = self.0.lock().expect("collector lock");
        c.evictions.push(Eviction { pod: victim.key(), preemptor: preemptor.key(), node: node.to_string() });
        let key = victim.key();
        c.order.remove(&key);
        c.last.remove(&key);
    }
}

/// Simulator options.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Seed for tie-breaking.
    pub seed: u64,
    /// Pods (`ns/name`) to trace.
    pub explain: Vec<String>,
    /// When set, Wasm plugin files are watched and replaced while the simulation runs.
    pub reload_period: Option<Duration>,
}

/// A simulation ready to run.
pub struct Simulation {
    scheduler: Arc<Scheduler>,
    clock: Arc<VirtualClock>,
    observer: Arc<SimObserver>,
    /// The in-memory cluster (what was written).
    pub cluster: Arc<MemoryCluster>,
    ignored: Vec<String>,
    nodes: usize,
    node_names: Vec<String>,
    pending: usize,
}

impl Simulation {
    /// Loads the cluster into a fresh cache and queue.
    pub fn new(
        config: &SchedulerConfig,
        registry: &Registry,
        cluster_file: &ClusterFile,
        opts: &SimOptions,
    ) -> Result<Simulation, FrameworkError> {
        let cluster = Arc::new(MemoryCluster::default());
        let ctx =
            PluginContext { seed: opts.seed, reload_period: opts.reload_period, ..PluginContext::new(cluster.clone()) };
        // Plugins that load from cluster objects (tenant policies) find them at construction, before any pod.
        ctx.listers.set(Arc::new(cluster_file.objects.clone()));
        let profiles = Arc::new(build_profiles(config, registry, &ctx)?);
        let clock = Arc::new(VirtualClock::default());
        let queue = SchedulingQueue::new(
            profiles.clone(),
            &profiles.names(),
            config.pod_initial_backoff,
            config.pod_max_backoff,
        )
        .with_pop_from_backoff(config.features.scheduler_pop_from_backoff_q);
        let observer = Arc::new(SimObserver::default());
        let scheduler = Arc::new(
            Scheduler::new(
                profiles.clone(),
                queue,
                Cache::new(),
                cluster.clone(),
                clock.clone(),
                observer.clone(),
                SchedulerOptions {
                    seed: opts.seed,
                    async_binding: false,
                    trace_pods: opts.explain.clone(),
                    // The simulator reports no metrics.
                    plugin_metrics_sample_percent: 0,
                    ..Default::default()
                },
            )
            // The simulator calls the configured extenders' real URLs, as the live scheduler does.
            .with_extenders(crate::extender::Extenders::new(&config.extenders)),
        );
        // The file reaches the scheduler as the live one sees a cluster: through its event handlers.
        let handler: Arc<dyn EventHandler> = scheduler.clone();
        cluster.connect(Arc::downgrade(&handler));
        for n in &cluster_file.nodes {
            cluster.apply_node(n.clone());
        }
        for p in &cluster_file.bound_pods {
            cluster.apply_pod(Arc::new(p.clone()));
        }
        cluster.set_objects(cluster_file.objects.clone());
        let mut ignored = Vec::new();
        let mut pending = 0;
        for p in &cluster_file.pending_pods {
            if profiles.get(p.scheduler_name()).is_none() {
                ignored.push(p.key());
                continue;
            }
            // File order is arrival order.
            clock.advance(Duration::from_micros(1));
            cluster.apply_pod(Arc::new(p.clone()));
            pending += 1;
        }
        let node_names = cluster_file.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        Ok(Simulation {
            scheduler,
            clock,
            observer,
            cluster,
            ignored,
            nodes: cluster_file.nodes.len(),
            node_names,
            pending,
        })
    }

    /// The scheduler (for tests that inspect the cache or queue).
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// Schedules until no pod can make progress: activeQ empty and no backoff left, or the remaining pods keep
    /// failing without anything changing in the cluster.
    pub fn run(&self) -> Report {
        let mut idle_attempts = 0usize;
        let mut last_writes = 0usize;
        let limit = self.pending.max(1) * 4 + 16;
        loop {
            self.scheduler.queue.lock().expect("queue lock").flush_backoff_completed(self.clock.now());
            // Pods a plugin released from Permit bind (or unwind) before the next pod is scheduled.
            if self.scheduler.finish_decided_waits() {
                continue;
            }
            if self.scheduler.schedule_one() {
                self.clock.advance(ATTEMPT_TIME);
                let writes = self.cluster.changes();
                if writes != last_writes {
                    last_writes = writes;
                    idle_attempts = 0;
                } else {
                    idle_attempts += 1;
                    if idle_attempts > limit {
                        break;
                    }
                }
                continue;
            }
            if self.scheduler.bindings_in_flight() > self.scheduler.parked_waits() {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            // Idle: the clock jumps to the next backoff expiry or Permit timeout, whichever comes first.
            let backoff = self.scheduler.queue.lock().expect("queue lock").next_backoff_expiry();
            let permit = self.scheduler.next_permit_deadline();
            match (backoff, permit) {
                (b, Some(p)) if b.is_none_or(|b| p <= b) => {
                    self.clock.advance_to(p);
                    self.scheduler.expire_waits(p);
                }
                (Some(b), _) => self.clock.advance_to(b),
                _ => break,
            }
        }
        // Pods still parked at Permit when the run stops making progress: their waits run out now.
        while self.scheduler.parked_waits() > 0 {
            if let Some(p) = self.scheduler.next_permit_deadline() {
                self.clock.advance_to(p);
                self.scheduler.expire_waits(p);
            }
            self.scheduler.finish_decided_waits();
        }
        self.report()
    }

    fn usage(&self) -> Vec<NodeUsage> {
        let cache = self.scheduler.cache.lock().expect("cache lock");
        let mut names: Vec<String> = self.node_names.clone();
        names.sort();
        names
            .into_iter()
            .filter_map(|n| cache.node(&n).cloned())
            .map(|n| NodeUsage {
                node: n.name.clone(),
                zone: n.labels().get("topology.kubernetes.io/zone").cloned(),
                pods: n.pods.len(),
                cpu_requested: n.requested.milli_cpu,
                cpu_allocatable: n.allocatable.milli_cpu,
                memory_requested: n.requested.memory,
                memory_allocatable: n.allocatable.memory,
            })
            .collect()
    }

    /// Pods a PreEnqueue plugin still keeps out of the queue at the end (never tried, so never reported by an
    /// attempt), in queue order, each with the plugin's message (a gang short of members says so).
    fn gated(&self, tried: &HashMap<String, Placement>) -> Vec<Placement> {
        let mut gated: Vec<(u64, String, Arc<PodInfo>)> = self
            .scheduler
            .queue
            .lock()
            .expect("queue lock")
            .pending_pods()
            .into_iter()
            .filter(|(_, q)| *q == crate::queue::QueueName::Gated)
            .map(|(info, _)| (info.timestamp, info.pod_info.key(), info.pod_info))
            .filter(|(_, key, _)| !tried.contains_key(key))
            .collect();
        gated.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        gated
            .into_iter()
            .map(|(_, key, pod)| {
                let profile = pod.scheduler_name().to_string();
                let message = self.scheduler.profiles.get(&profile).map(|f| f.run_pre_enqueue(&pod).message());
                Placement { pod: key, node: None, message: message.unwrap_or_default(), profile, attempts: 0 }
            })
            .collect()
    }

    fn report(&self) -> Report {
        let c = self.observer.0.lock().expect("collector lock");
        let mut order: Vec<(&u64, &String)> = c.order.iter().map(|(k, s)| (s, k)).collect();
        order.sort();
        let gated = self.gated(&c.last);
        Report {
            placements: order.into_iter().filter_map(|(_, k)| c.last.get(k).cloned()).chain(gated).collect(),
            evictions: c.evictions.clone(),
            claims: self
                .cluster
                .writes()
                .into_iter()
                .filter_map(|w| match w {
                    Write::BindClaim { claim, volume, provisioned_for } => {
                        Some(ClaimBinding { claim, volume, provisioned_for })
                    }
                    _ => None,
                })
                .collect(),
            resource_claims: self
                .cluster
                .writes()
                .into_iter()
                .filter_map(|w| match w {
                    Write::AllocateClaim { claim, devices } => Some(ClaimAllocation { claim, devices }),
                    _ => None,
                })
                .collect(),
            ignored: self.ignored.clone(),
            explain: c.explain.clone(),
            nodes: self.nodes,
            usage: self.usage(),
            attempts: c.attempts,
            shadows: self
                .scheduler
                .shadows()
                .tallies()
                .into_iter()
                .map(|(profile, t)| ShadowSummary {
                    profile,
                    shadow: t.shadow,
                    decisions: t.decisions,
                    agree: t.agree,
                    disagree: t.disagree,
                    error: t.error,
                })
                .collect(),
            policies: self
                .cluster
                .policy_statuses()
                .into_iter()
                .map(|p| PolicySummary {
                    policy: format!("{} {}", p.kind, p.key()),
                    profile: p.profile.clone(),
                    ready: p.ready,
                    reason: p.reason,
                    message: p.message,
                })
                .collect(),
        }
    }
}
