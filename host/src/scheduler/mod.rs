//! The scheduler (upstream's `pkg/scheduler`): the loop's shared state, the scheduling and binding cycles of one
//! pod (`schedule_one`), the node search, the profiles, the clock, what it reports (`Observer`), and the event
//! handlers through which every cluster change reaches the cache and the queue. It drives the framework's runners
//! and never knows whether the cluster is a real API server or the simulator's in-memory one.

mod clock;
mod eventhandlers;
mod node_search;
mod observer;
mod pod_group_preemption;
mod profile;
mod schedule_one;
mod schedule_one_podgroup;
mod shadow;
mod tails;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use clock::{Clock, RealClock, VirtualClock};
pub use node_search::{num_feasible_nodes_to_find, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, MIN_FEASIBLE_NODES_TO_FIND};
pub use observer::{AttemptResult, NoopObserver, Observer};
pub use profile::{
    build_profiles, check_plugin_args, load_config, load_config_with, parse_config, parse_config_with, ProfileMap,
};
pub use shadow::{Decision, Disagreement, ShadowBook, Tally, Verdict, RECENT_DISAGREEMENTS};

use crate::cache::Cache;
use crate::extender::Extenders;
use crate::framework::rng::Rng;
use crate::framework::{ClusterClient, PodInfo, Snapshot};
use crate::queue::SchedulingQueue;

/// Options of a scheduler instance.
#[derive(Debug, Clone, Default)]
pub struct SchedulerOptions {
    /// Seed of the tie-breaking and candidate-sampling generator.
    pub seed: u64,
    /// Run binding cycles concurrently with scheduling (live) instead of inline (simulator: deterministic): as
    /// tasks on `binding_runtime` when one is given, else on threads of their own.
    pub async_binding: bool,
    /// How many binding cycles may run their PreBind/Bind/PostBind at once (0: the default,
    /// `DEFAULT_MAX_BINDINGS_IN_FLIGHT`); the others wait for a slot as tasks.
    pub max_bindings_in_flight: usize,
    /// Record a `CycleTrace` for pods whose `ns/name` is listed.
    pub trace_pods: Vec<String>,
    /// Share of scheduling cycles, in percent, whose plugin calls are timed for the observer's
    /// `plugin_execution` (kube-scheduler samples 10%); 0 times none.
    pub plugin_metrics_sample_percent: u32,
}

/// Binding cycles in PreBind/Bind/PostBind at once by default. The native binder's request is awaited; plugin
/// code that may block (PreBind, a Wasm binder, PostBind) holds a thread (the blocking pool's, or a tail thread).
/// 64 keep a local API server busy (a binding takes milliseconds) while the threads stay few whatever the backlog.
/// Upstream starts a goroutine per binding and lets the client's rate limit bound it.
pub const DEFAULT_MAX_BINDINGS_IN_FLIGHT: usize = 64;

/// How many binding cycles run the plugin code after their Binding request at once: one per core (at least two).
/// That code is CPU-bound and short (PostBind, say, logging the decision), so more at once would not finish sooner,
/// but each would hold a thread and, for a Wasm plugin, an instance (a guest's memory and node table) of its own:
/// with one per binding cycle, a backlog peaked at 50–66 threads where the default profile needs 5.
fn tail_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Nominated pods by node name, as the snapshot shares them.
type NominatedPods = Arc<HashMap<String, Vec<Arc<PodInfo>>>>;

/// Everything the scheduling loop, the binding cycles and the event handlers share. Locks are taken one at a
/// time, cache before queue where an operation needs both in turn (see `eventhandlers`).
pub struct Scheduler {
    /// Profiles.
    pub profiles: Arc<ProfileMap>,
    /// The queue.
    pub queue: Mutex<SchedulingQueue>,
    /// The cache.
    pub cache: Mutex<Cache>,
    snapshot: Mutex<Snapshot>,
    nominated_seen: Mutex<Option<NominatedPods>>,
    /// The cluster writes.
    pub cluster: Arc<dyn ClusterClient>,
    rng: Mutex<Rng>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The observer.
    pub observer: Arc<dyn Observer>,
    options: SchedulerOptions,
    /// The runtime binding tasks run on (live); `None`: threads (simulator).
    binding_runtime: Option<tokio::runtime::Handle>,
    /// Slots for binding cycles past WaitOnPermit.
    binding_slots: Arc<tokio::sync::Semaphore>,
    /// Threads for the plugin code that follows the native binder's request (PostBind, a binder after Skip,
    /// Unreserve after a failure): one per core (`tail_threads`).
    tails: tails::Tails,
    in_flight_bindings: AtomicU64,
    /// Scheduling cycles started, for sampling plugin metrics evenly.
    cycles_started: AtomicU64,
    /// Where the next node search starts, shared by all profiles as upstream's `nextStartNodeIndex`.
    next_start_node_index: AtomicUsize,
    /// HTTP extenders, shared by all profiles as upstream's `sched.Extenders`.
    extenders: Arc<Extenders>,
    /// Simulator: pods waiting at Permit, whose binding cycles run inline once decided.
    parked: Mutex<Vec<schedule_one::Parked>>,
    /// How shadow profiles' decisions compared with the serving ones.
    shadows: ShadowBook,
}

impl Scheduler {
    /// A scheduler over the given profiles, cache and cluster.
    pub fn new(
        profiles: Arc<ProfileMap>,
        queue: SchedulingQueue,
        cache: Cache,
        cluster: Arc<dyn ClusterClient>,
        clock: Arc<dyn Clock>,
        observer: Arc<dyn Observer>,
        options: SchedulerOptions,
    ) -> Scheduler {
        Scheduler {
            profiles,
            queue: Mutex::new(queue),
            cache: Mutex::new(cache),
            snapshot: Mutex::new(Snapshot::default()),
            nominated_seen: Mutex::new(None),
            cluster,
            rng: Mutex::new(Rng::new(options.seed)),
            clock,
            observer,
            binding_runtime: None,
            binding_slots: Arc::new(tokio::sync::Semaphore::new(match options.max_bindings_in_flight {
                0 => DEFAULT_MAX_BINDINGS_IN_FLIGHT,
                n => n,
            })),
            tails: tails::Tails::new(tail_threads()),
            options,
            in_flight_bindings: AtomicU64::new(0),
            cycles_started: AtomicU64::new(0),
            next_start_node_index: AtomicUsize::new(0),
            extenders: Arc::new(Extenders::default()),
            parked: Mutex::new(Vec::new()),
            shadows: ShadowBook::default(),
        }
    }

    /// Calls these HTTP extenders after Filter and Score, at preemption and to bind.
    pub fn with_extenders(mut self, extenders: Extenders) -> Scheduler {
        self.extenders = Arc::new(extenders);
        self
    }

    /// Runs binding cycles as tasks on `rt` (when `async_binding` is set).
    pub fn with_binding_runtime(mut self, rt: tokio::runtime::Handle) -> Scheduler {
        self.binding_runtime = Some(rt);
        self
    }

    /// The HTTP extenders (their call counters, for the metrics).
    pub fn extenders(&self) -> &Extenders {
        &self.extenders
    }

    /// How shadow profiles' decisions compared with the serving ones (`/debug/shadow`, the metrics).
    pub fn shadows(&self) -> &ShadowBook {
        &self.shadows
    }

    /// Binding cycles still running.
    pub fn bindings_in_flight(&self) -> u64 {
        self.in_flight_bindings.load(Ordering::SeqCst)
    }
}
