//! Guest instances: each with its own `Store` (memory cap, epoch deadline, captured output), pooled per version of
//! the component and entered by one call at a time. A call that traps or overruns its deadline loses its instance
//! and becomes a [`Failed`] that the failure table resolves; the guest's output is flushed to the log after every
//! call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre, Resource, ResourceTable, Val};
use wasmtime::{Store, StoreLimitsBuilder, Trap, WasmBacktrace};
use wasmtime_wasi::WasiCtxBuilder;

use super::bindings::exports::kws::plugin as ex;
use super::bindings::exports::kws::plugin::declarations::Declared;
use super::bindings::kws::plugin::types as wit;
use super::convert;
use super::engine::{first_line, WasmEngine};
use super::failure::{self, Call, Failed, Gate};
use super::host::{linker_for, GuestCycleState, HostState, PodRef};
use super::output::{GuestOutput, Source};
use super::{ComponentInfo, WasmError, WasmPlugin};
use crate::framework::pod_view::PodChange;
use crate::framework::{ClusterEvent, NodeInfo, PodInfo, Status};

/// The least time `config.validate` gets when a plugin loads, whatever the plugin's per-call deadline.
const CONFIG_VALIDATE_DEADLINE: Duration = Duration::from_secs(2);

/// Extra deadline per node sent to a guest's node table.
const SYNC_BUDGET_PER_NODE: Duration = Duration::from_millis(1);
/// The most a node table load may take.
const MAX_SYNC_BUDGET: Duration = Duration::from_secs(10);

/// The cycle's pod in contract form, with the UID it was converted from.
pub(super) type CachedPod = Arc<Mutex<Option<(String, Arc<wit::Pod>)>>>;

/// The pod `host.cycle-pod` answers during a call.
pub(super) enum CyclePod {
    /// Already in contract form.
    Converted(Arc<wit::Pod>),
    /// The framework's pod, converted into the cycle's cache when first asked for.
    Lazy(Arc<PodInfo>, CachedPod),
}

impl CyclePod {
    /// The pod in contract form.
    pub(super) fn get(&self) -> Arc<wit::Pod> {
        match self {
            CyclePod::Converted(p) => p.clone(),
            CyclePod::Lazy(info, cache) => convert_once(cache, info),
        }
    }
}

/// `pod` in contract form from `cache`, converted into it unless it holds that pod already.
fn convert_once(cache: &CachedPod, pod: &PodInfo) -> Arc<wit::Pod> {
    let mut cached = cache.lock().expect("cycle pod lock");
    match &*cached {
        Some((uid, p)) if *uid == pod.uid => p.clone(),
        _ => {
            let p = Arc::new(convert::pod(pod));
            *cached = Some((pod.uid.clone(), p.clone()));
            p
        }
    }
}

/// Export lookups of one component, resolved once.
#[derive(Default)]
pub(super) struct Indices {
    pub(super) config: Option<ex::config::GuestIndices>,
    /// `declarations.declare`, called dynamically: its flags are read by name, so a component built when the set
    /// had fewer flags keeps its promises (a typed lookup would refuse the older type).
    pub(super) declare: Option<ComponentExportIndex>,
    pub(super) nodes: Option<ex::nodes::GuestIndices>,
    pub(super) pods: Option<ex::pods::GuestIndices>,
    pub(super) events: Option<ex::events::GuestIndices>,
    pub(super) cycle: Option<ex::cycle::GuestIndices>,
    pub(super) pre_enqueue: Option<ex::pre_enqueue::GuestIndices>,
    pub(super) queue_sort: Option<ex::queue_sort::GuestIndices>,
    pub(super) sort_key_ref: Option<ex::sort_key_ref::GuestIndices>,
    pub(super) pre_filter: Option<ex::pre_filter::GuestIndices>,
    pub(super) filter: Option<ex::filter::GuestIndices>,
    pub(super) post_filter: Option<ex::post_filter::GuestIndices>,
    pub(super) pre_score: Option<ex::pre_score::GuestIndices>,
    pub(super) score: Option<ex::score::GuestIndices>,
    pub(super) reserve: Option<ex::reserve::GuestIndices>,
    pub(super) permit: Option<ex::permit::GuestIndices>,
    pub(super) pre_bind: Option<ex::pre_bind::GuestIndices>,
    pub(super) bind: Option<ex::bind::GuestIndices>,
    pub(super) post_bind: Option<ex::post_bind::GuestIndices>,
    pub(super) post_bind_ref: Option<ex::post_bind_ref::GuestIndices>,
}

/// One instance: its store, its copy of the node table's generations, and the hot exports, looked up (and
/// type-checked) once rather than on every call.
pub(super) struct GuestInstance {
    pub(super) store: Store<HostState>,
    pub(super) instance: Instance,
    /// Node generation last sent, by slot (`u64::MAX`: never sent); the node object's generation for a guest that
    /// ignores usage.
    synced: Vec<u64>,
    /// Slots of `synced` that were sent (the size of the guest's table).
    rows: usize,
    /// The cycle (`CycleCtx::id`) whose pod this instance holds (0: none).
    cycle_id: u64,
    /// How far into the pod view's log this instance has been sent (0: nothing).
    pods_cursor: u64,
    pub(super) cycle: Option<ex::cycle::Guest>,
    pub(super) queue_sort: Option<ex::queue_sort::Guest>,
    pub(super) sort_key_ref: Option<ex::sort_key_ref::Guest>,
    pub(super) filter: Option<ex::filter::Guest>,
    pub(super) score: Option<ex::score::Guest>,
    pub(super) post_bind: Option<ex::post_bind::Guest>,
    pub(super) post_bind_ref: Option<ex::post_bind_ref::Guest>,
    pub(super) nodes: Option<ex::nodes::Guest>,
    pub(super) pods: Option<ex::pods::Guest>,
}

/// Runs `f` with `pod` lent to the guest of `store` as a `host.pod-ref` for the length of one call, and takes it
/// back after, whatever the call did.
pub(super) fn with_pod_ref<R>(
    store: &mut Store<HostState>,
    pod: Arc<PodInfo>,
    f: impl FnOnce(&mut Store<HostState>, Resource<PodRef>) -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    let data = store.data_mut();
    data.stats.pods_lent.fetch_add(1, Ordering::Relaxed);
    let own = data.table.push(PodRef(pod)).map_err(|e| CallError::Trap(e.to_string()))?;
    let r = f(store, Resource::new_borrow(own.rep()));
    // The pod is the framework's: out of the table even when the call trapped.
    let _ = store.data_mut().table.delete(own);
    r.map_err(trap)
}

/// Whether a call may send node-table changes to the guest (the calls that take node slots), so that it wants an
/// instance whose table is already loaded.
fn reads_node_table(call: Call) -> bool {
    use crate::framework::ExtensionPoint as P;
    !matches!(
        call,
        Call::Point(P::PreEnqueue | P::QueueSort | P::Reserve | P::Permit | P::PreBind | P::Bind | P::PostBind)
            | Call::Unreserve
    )
}

/// The generation a guest's copy of a node is stamped with: the node object's when the guest promised to ignore
/// usage, else the node's (0: a copy the cache never stamped, never taken as seen).
fn generation(n: &NodeInfo, ignores_usage: bool) -> u64 {
    if ignores_usage {
        n.node_generation
    } else {
        n.generation
    }
}

/// The interface whose `declare` a component may export.
const DECLARATIONS: &str = "kws:plugin/declarations@0.2.1";

/// Every flag of `declarations.declared` and its WIT name, in the contract's order.
const DECLARED_FLAGS: [(Declared, &str); 7] = [
    (Declared::SCORE_NEEDS_NO_NORMALIZE, "score-needs-no-normalize"),
    (Declared::IGNORES_NODE_USAGE, "ignores-node-usage"),
    (Declared::SCORE_READS_NODE_ONLY, "score-reads-node-only"),
    (Declared::NORMALIZE_DEFAULT, "normalize-default"),
    (Declared::NORMALIZE_DEFAULT_REVERSED, "normalize-default-reversed"),
    (Declared::SCORE_READS_NO_NODE, "score-reads-no-node"),
    (Declared::NEEDS_NO_CYCLE_BEGIN, "needs-no-cycle-begin"),
];

/// The WIT names of the flags in `d`, in the contract's order.
pub(super) fn declared_names(d: Declared) -> Vec<String> {
    DECLARED_FLAGS.iter().filter(|(flag, _)| d.contains(*flag)).map(|(_, name)| name.to_string()).collect()
}

/// The flags named in a `declare` answer, and the names this host does not know (a newer contract's promises,
/// which it cannot act on and so leaves unused).
pub(super) fn declared_from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> (Declared, Vec<String>) {
    let mut d = Declared::empty();
    let mut unknown = Vec::new();
    for name in names {
        match DECLARED_FLAGS.iter().find(|(_, n)| *n == name) {
            Some((flag, _)) => d |= *flag,
            None => unknown.push(name.to_string()),
        }
    }
    (d, unknown)
}

/// The export index of function `func` of the exported interface `iface`, if the component has one.
fn export_func(component: &Component, iface: &str, func: &str) -> Option<ComponentExportIndex> {
    let (_, i) = component.get_export(None, iface)?;
    let (_, f) = component.get_export(Some(&i), func)?;
    Some(f)
}

/// One version of the component, with its instance pool.
pub(crate) struct Loaded {
    /// SHA-256 of the file.
    pub digest: String,
    pre: InstancePre<HostState>,
    pub(super) idx: Indices,
    pool: Mutex<Vec<GuestInstance>>,
    /// What the component exports and imports.
    pub info: ComponentInfo,
    /// The events the guest registered (`events.events-to-register`), asked once when the version loads; unset
    /// for a component that does not export `events`.
    pub(super) events: OnceLock<Vec<ClusterEvent>>,
    /// Whether this version's QueueSort gives sort keys, once its first answer is known.
    sort_keys: OnceLock<bool>,
    /// What the guest promised (`declarations.declare`), asked once when the version loads; unset for a component
    /// that does not export `declarations` (it promised nothing).
    pub(super) declared: OnceLock<Declared>,
    /// Raw scores kept for a guest that promised `score-reads-node-only`: by node slot, the generation the score
    /// was computed at (the node object's generation when it also ignores usage) and the score.
    node_scores: Mutex<Vec<(u64, i64)>>,
}

impl Loaded {
    /// An idle instance for a call of cycle `ctx`. The pool holds as many instances as calls ever ran at once,
    /// and binding cycles run many at once (PostBind, Reserve…). A call that reads the node table takes the
    /// instance whose table already holds the first node of its batch (parallel batches split the nodes between
    /// instances), then one that holds this cycle's pod, then the fullest table; any other call takes the emptiest.
    /// Taking the last one pushed instead handed scheduling cycles instances that had only ever served PostBind,
    /// or the other batch's half of the nodes, each then sent the rows it lacked (a 5,000-node table costs ~30 ms
    /// in a Rust guest).
    fn take(&self, ctx: &CycleCtx, reads_node_table: bool) -> Option<GuestInstance> {
        let mut pool = self.pool.lock().expect("pool lock");
        let pick = if reads_node_table {
            let holds = |i: &GuestInstance, slot: u32| i.synced.get(slot as usize).is_some_and(|g| *g != u64::MAX);
            let warmth =
                |i: &GuestInstance| (ctx.first_slot.is_some_and(|s| holds(i, s)), i.cycle_id == ctx.id, i.rows);
            pool.iter().enumerate().max_by_key(|(_, i)| warmth(i)).map(|(n, _)| n)
        } else {
            pool.iter().enumerate().min_by_key(|(_, i)| i.rows).map(|(n, _)| n)
        };
        pick.map(|n| pool.swap_remove(n))
    }

    /// Links a compiled component and checks that the exports a node-level point relies on are there.
    pub(super) fn new(component: Component, digest: String) -> Result<Loaded, WasmError> {
        let info = super::describe(&component)?;
        let linker = linker_for(&info)?;
        let pre = linker.instantiate_pre(&component).map_err(|e| WasmError::Link(first_line(&e)))?;
        let idx = Indices {
            config: ex::config::GuestIndices::new(&pre).ok(),
            declare: export_func(&component, DECLARATIONS, "declare"),
            nodes: ex::nodes::GuestIndices::new(&pre).ok(),
            pods: ex::pods::GuestIndices::new(&pre).ok(),
            events: ex::events::GuestIndices::new(&pre).ok(),
            cycle: ex::cycle::GuestIndices::new(&pre).ok(),
            pre_enqueue: ex::pre_enqueue::GuestIndices::new(&pre).ok(),
            queue_sort: ex::queue_sort::GuestIndices::new(&pre).ok(),
            sort_key_ref: ex::sort_key_ref::GuestIndices::new(&pre).ok(),
            pre_filter: ex::pre_filter::GuestIndices::new(&pre).ok(),
            filter: ex::filter::GuestIndices::new(&pre).ok(),
            post_filter: ex::post_filter::GuestIndices::new(&pre).ok(),
            pre_score: ex::pre_score::GuestIndices::new(&pre).ok(),
            score: ex::score::GuestIndices::new(&pre).ok(),
            reserve: ex::reserve::GuestIndices::new(&pre).ok(),
            permit: ex::permit::GuestIndices::new(&pre).ok(),
            pre_bind: ex::pre_bind::GuestIndices::new(&pre).ok(),
            bind: ex::bind::GuestIndices::new(&pre).ok(),
            post_bind: ex::post_bind::GuestIndices::new(&pre).ok(),
            post_bind_ref: ex::post_bind_ref::GuestIndices::new(&pre).ok(),
        };
        if (idx.filter.is_some()
            || idx.score.is_some()
            || idx.pre_score.is_some()
            || idx.pre_filter.is_some()
            || idx.post_filter.is_some())
            && idx.nodes.is_none()
        {
            return Err(WasmError::Contract(
                "it exports a node-level point (filter, score, ...) but not kws:plugin/nodes".into(),
            ));
        }
        if idx.sort_key_ref.is_some() && idx.queue_sort.is_none() {
            return Err(WasmError::Contract("it exports kws:plugin/sort-key-ref but not kws:plugin/queue-sort".into()));
        }
        if (idx.filter.is_some() || idx.score.is_some()) && idx.cycle.is_none() {
            return Err(WasmError::Contract("it exports filter or score but not kws:plugin/cycle".into()));
        }
        Ok(Loaded {
            digest,
            pre,
            idx,
            pool: Mutex::new(Vec::new()),
            info,
            events: OnceLock::new(),
            sort_keys: OnceLock::new(),
            declared: OnceLock::new(),
            node_scores: Mutex::new(Vec::new()),
        })
    }

    /// Whether its QueueSort gives sort keys (`None` until its first answer).
    pub(super) fn gives_sort_keys(&self) -> Option<bool> {
        self.sort_keys.get().copied()
    }

    /// Records the first `sort-key` answer: a key, or none (then it is not asked again).
    pub(super) fn saw_sort_key(&self, some: bool) {
        let _ = self.sort_keys.set(some);
    }

    /// Whether the guest promised `what` (nothing is promised until its answer is known).
    pub(super) fn declares(&self, what: Declared) -> bool {
        self.declared.get().is_some_and(|d| d.contains(what))
    }

    /// Fills `out` with the kept raw scores of `nodes` (a guest that promised `score-reads-node-only`) and returns
    /// the positions of the nodes without one.
    pub(super) fn kept_scores(&self, nodes: &[&NodeInfo], out: &mut [i64]) -> Vec<usize> {
        let ignores_usage = self.declares(Declared::IGNORES_NODE_USAGE);
        let kept = self.node_scores.lock().expect("node scores lock");
        let mut missing = Vec::new();
        for (k, (n, o)) in nodes.iter().zip(out.iter_mut()).enumerate() {
            let g = generation(n, ignores_usage);
            match kept.get(n.id as usize) {
                Some(&(at, score)) if at == g && g != 0 => *o = score,
                _ => missing.push(k),
            }
        }
        missing
    }

    /// Keeps the raw scores the guest just computed for `nodes`.
    pub(super) fn keep_scores(&self, nodes: &[&NodeInfo], scores: &[i64]) {
        let ignores_usage = self.declares(Declared::IGNORES_NODE_USAGE);
        let mut kept = self.node_scores.lock().expect("node scores lock");
        for (n, &score) in nodes.iter().zip(scores) {
            let g = generation(n, ignores_usage);
            // A copy the cache never stamped (a preemption what-if) shares the real node's slot: keep the real one's.
            if g == 0 {
                continue;
            }
            let i = n.id as usize;
            if kept.len() <= i {
                kept.resize(i + 1, (0, 0));
            }
            kept[i] = (g, score);
        }
    }

    /// The extension points it serves (upstream names).
    pub(super) fn points(&self) -> Vec<&'static str> {
        self.info.points.clone()
    }
}

/// Data a cycle keeps for each Wasm plugin: the version it started with, its private cycle state, and the cycle's
/// pod in contract form (converted once per cycle for `host.cycle-pod`, not for each of Filter, Score and
/// NormalizeScore).
#[derive(Clone)]
pub(super) struct CycleCtx {
    /// Unique in the process: an instance that has been handed this cycle's pod remembers it.
    id: u64,
    loaded: Arc<Loaded>,
    data: GuestCycleState,
    pod: CachedPod,
    /// The pod the cycle schedules, when the cycle began through `begin_cycle`: converted only if a guest asks.
    pod_info: Option<Arc<PodInfo>>,
    /// The slot of the first node of the batch a call is about (`for_nodes`), to pick the instance holding it.
    first_slot: Option<u32>,
}

impl CycleCtx {
    /// A new cycle on version `loaded`.
    pub(super) fn new(loaded: Arc<Loaded>) -> CycleCtx {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        CycleCtx {
            id,
            loaded,
            data: Arc::new(Mutex::new(HashMap::new())),
            pod: Arc::new(Mutex::new(None)),
            pod_info: None,
            first_slot: None,
        }
    }

    /// The same cycle, scheduling `pod`.
    pub(super) fn for_pod(mut self, pod: Arc<PodInfo>) -> CycleCtx {
        self.pod_info = Some(pod);
        self
    }

    /// The version the cycle runs on.
    pub(super) fn loaded(&self) -> &Arc<Loaded> {
        &self.loaded
    }

    /// The same cycle, for a call about a batch of `nodes`.
    pub(super) fn for_nodes(mut self, nodes: &[&NodeInfo]) -> CycleCtx {
        self.first_slot = nodes.first().map(|n| n.id);
        self
    }

    /// What `host.cycle-pod` answers during a call about `pod`: the cycle's pod, converted when first asked for in
    /// this cycle (a guest that never asks costs no conversion); converted now when the cycle did not begin with
    /// it (a call outside a scheduling cycle).
    fn cycle_pod(&self, pod: &PodInfo) -> CyclePod {
        match &self.pod_info {
            Some(info) if info.uid == pod.uid => CyclePod::Lazy(info.clone(), self.pod.clone()),
            _ => CyclePod::Converted(convert_once(&self.pod, pod)),
        }
    }
}

/// An export of an instance, looked up now.
macro_rules! guest {
    ($loaded:expr, $inst:expr, $field:ident) => {
        $loaded
            .idx
            .$field
            .as_ref()
            .expect("registered only at exported points")
            .load(&mut $inst.store, &$inst.instance)
            .map_err(trap)?
    };
}
pub(super) use guest;

/// A hot export of an instance, looked up on the instance's first call.
macro_rules! cached_guest {
    ($loaded:expr, $inst:expr, $field:ident) => {{
        if $inst.$field.is_none() {
            $inst.$field = Some(guest!($loaded, $inst, $field));
        }
        $inst.$field.as_ref().expect("looked up above")
    }};
}
pub(super) use cached_guest;

/// Why a guest call failed.
pub(super) enum CallError {
    /// It ran past its deadline.
    Timeout,
    /// It trapped, or no instance could be made.
    Trap(String),
    /// Its answer cannot be used.
    Invalid(String),
    /// Not made: the plugin's circuit breaker is open for this much longer; why the last call failed.
    CircuitOpen(Duration, Arc<str>),
}

/// A wasmtime error from a guest call, as a timeout (the epoch deadline interrupted it) or a trap with its reason.
pub(super) fn trap(e: wasmtime::Error) -> CallError {
    if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        CallError::Timeout
    } else {
        CallError::Trap(trap_reason(&e))
    }
}

/// Frames of a guest backtrace kept in a message.
const BACKTRACE_FRAMES: usize = 8;

/// Why a call trapped, on one line: the reason (wasmtime puts it last, after the backtrace) and the guest's frames,
/// innermost first, so an `unreachable` (a guest panic), a stack overflow, an out-of-bounds access and the memory
/// cap read differently.
fn trap_reason(e: &wasmtime::Error) -> String {
    let mut reasons: Vec<String> = Vec::new();
    for cause in e.chain() {
        // The backtrace is one of the causes; its own text is the backtrace, printed below.
        let text = cause.to_string();
        let text = match text.strip_prefix("forcing trap when growing memory to ") {
            Some(rest) => format!("memory limit reached (growing memory to {rest})"),
            None => text,
        };
        let line = text.lines().next().unwrap_or("").trim().to_string();
        if !line.is_empty() && !line.starts_with("error while executing at wasm backtrace") && !reasons.contains(&line)
        {
            reasons.push(line);
        }
    }
    let mut out = if reasons.is_empty() { first_line(e) } else { reasons.join(": ") };
    if let Some(bt) = e.downcast_ref::<WasmBacktrace>() {
        let frames: Vec<String> = bt
            .frames()
            .iter()
            .take(BACKTRACE_FRAMES)
            .map(|f| match f.func_name() {
                Some(name) => name.to_string(),
                None => format!("func[{}]", f.func_index()),
            })
            .collect();
        if !frames.is_empty() {
            let more = bt.frames().len().saturating_sub(BACKTRACE_FRAMES);
            let more = if more > 0 { format!(" <- {more} more") } else { String::new() };
            out += &format!(" (guest backtrace: {}{more})", frames.join(" <- "));
        }
    }
    out
}

impl WasmPlugin {
    fn new_instance(&self, loaded: &Loaded) -> wasmtime::Result<GuestInstance> {
        let (stdout, stderr) = (GuestOutput::default(), GuestOutput::default());
        let wasi = WasiCtxBuilder::new().stdout(stdout.clone()).stderr(stderr.clone()).build();
        let state = HostState {
            config: Arc::from(self.args.config_json.as_str()),
            rng: self.rng.clone(),
            cycle: None,
            pod: None,
            cycle_id: 0,
            limits: StoreLimitsBuilder::new()
                .memory_size(self.args.memory_limit as usize)
                .trap_on_grow_failure(true)
                .build(),
            wasi,
            table: ResourceTable::new(),
            stdout,
            stderr,
            log: self.log.clone(),
            held: None,
            plugin: self.name.clone(),
            handle: self.handle.clone(),
            stats: self.stats.clone(),
        };
        let mut store = Store::new(WasmEngine::shared().engine(), state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(WasmEngine::deadline(self.args.timeout));
        let instance = loaded.pre.instantiate(&mut store)?;
        self.stats.instances.fetch_add(1, Ordering::Relaxed);
        Ok(GuestInstance {
            store,
            instance,
            synced: Vec::new(),
            rows: 0,
            cycle_id: 0,
            pods_cursor: 0,
            cycle: None,
            queue_sort: None,
            sort_key_ref: None,
            filter: None,
            score: None,
            post_bind: None,
            post_bind_ref: None,
            nodes: None,
            pods: None,
        })
    }

    /// Asks a fresh instance of `loaded` whether the guest accepts its configuration (`config.validate`, when the
    /// component exports it), under the plugin's deadline; the instance then joins the pool.
    pub(super) fn validate_config(&self, loaded: &Loaded) -> Result<(), WasmError> {
        let Some(idx) = &loaded.idx.config else { return Ok(()) };
        let refused = |why: String| WasmError::Config(why);
        let mut inst =
            self.new_instance(loaded).map_err(|e| refused(format!("cannot start it: {}", trap_reason(&e))))?;
        // Loading is not on the scheduling path, and a fresh instance's first call may start an interpreter (the
        // Python and JavaScript guests), which on a busy machine can take longer than a per-call deadline meant
        // for Filter or Score: validate gets at least CONFIG_VALIDATE_DEADLINE, still a bound on a guest that loops.
        let limit = self.args.timeout.max(CONFIG_VALIDATE_DEADLINE);
        inst.store.set_epoch_deadline(WasmEngine::deadline(limit));
        inst.store.data_mut().held = Some(Vec::new());
        let r = idx.load(&mut inst.store, &inst.instance).and_then(|g| g.call_validate(&mut inst.store)).map_err(|e| {
            match trap(e) {
                CallError::Timeout => refused(format!("config.validate timed out after {limit:?}")),
                CallError::Trap(m) | CallError::Invalid(m) => refused(format!("config.validate trapped: {m}")),
                // trap() answers Timeout or Trap only.
                CallError::CircuitOpen(..) => refused("config.validate failed".into()),
            }
        });
        let held = inst.store.data_mut().held.take().unwrap_or_default();
        let accepted = matches!(r, Ok(Ok(())));
        if accepted {
            for (source, line) in held {
                self.log.line(source, &line);
            }
            self.flush_output(&mut inst);
        }
        match r? {
            Ok(()) => {
                loaded.pool.lock().expect("pool lock").push(inst);
                Ok(())
            }
            // One line, whatever the guest wrote.
            Err(why) => Err(refused(why.split_whitespace().collect::<Vec<_>>().join(" "))),
        }
    }

    /// Readies a newly loaded version (at start and on reload) once its configuration is accepted: the pod view
    /// records from now on if it follows the view (a version that starts following on reload sees the pods that
    /// change from then on), and it is asked what it promises, when it exports `declarations`, and which cluster
    /// events it registers, when it exports `events`. A guest that cannot answer is refused as one that refuses its
    /// configuration is: it could never be served or retried correctly.
    pub(super) fn ready_version(&self, loaded: &Arc<Loaded>) -> Result<(), WasmError> {
        if loaded.idx.pods.is_some() {
            self.handle.pods.follow();
        }
        if let Some(declare) = loaded.idx.declare {
            let r = self.call(&CycleCtx::new(loaded.clone()), Call::Declare, |_, _, i| {
                let f = i
                    .instance
                    .get_func(&mut i.store, declare)
                    .ok_or_else(|| CallError::Invalid("declarations.declare is not a function".into()))?;
                let mut out = [Val::Bool(false)];
                f.call(&mut i.store, &[], &mut out).map_err(trap)?;
                match &out[0] {
                    Val::Flags(names) => Ok(declared_from_names(names.iter().map(String::as_str))),
                    other => Err(CallError::Invalid(format!("declarations.declare returned {other:?}, not flags"))),
                }
            });
            let (declared, unknown) = r.map_err(|f| WasmError::Contract(f.error.message()))?;
            if !unknown.is_empty() {
                tracing::warn!(
                    plugin = &*self.name,
                    "the plugin promises {} that this scheduler does not know; it is served without them",
                    unknown.join(", ")
                );
            }
            if declared.contains(Declared::NORMALIZE_DEFAULT | Declared::NORMALIZE_DEFAULT_REVERSED) {
                return Err(WasmError::Contract(
                    "declarations.declare: normalize-default and normalize-default-reversed exclude each other".into(),
                ));
            }
            let _ = loaded.declared.set(declared);
        }
        if loaded.idx.events.is_none() {
            return Ok(());
        }
        let r = self.call(&CycleCtx::new(loaded.clone()), Call::EventsToRegister, |_, l, i| {
            guest!(l, i, events).call_events_to_register(&mut i.store).map_err(trap)
        });
        let events = r.map_err(|f| WasmError::Contract(f.error.message()))?;
        let _ = loaded.events.set(events.iter().flat_map(convert::registered_events).collect());
        Ok(())
    }

    /// Runs `f` on an instance of the cycle's version under the deadline; a trapped instance is discarded. A
    /// failure comes back with what the failure table makes of it for `call` under this plugin's policy.
    pub(super) fn call<R>(
        &self,
        ctx: &CycleCtx,
        call: Call,
        f: impl FnOnce(&WasmPlugin, &Loaded, &mut GuestInstance) -> Result<R, CallError>,
    ) -> Result<R, Failed> {
        let failed = |e| Failed {
            error: self.fail_status(call, e),
            fallback: failure::fallback(call, self.args.failure_policy),
        };
        if let Gate::Open(left, why) = self.breaker.gate_now() {
            self.stats.short_circuited.fetch_add(1, Ordering::Relaxed);
            return Err(failed(CallError::CircuitOpen(left, why)));
        }
        let loaded = &ctx.loaded;
        let taken = loaded.take(ctx, reads_node_table(call));
        let mut inst = match taken {
            Some(i) => i,
            None => match self.new_instance(loaded) {
                Ok(i) => i,
                Err(e) => {
                    let f = failed(CallError::Trap(trap_reason(&e)));
                    self.record_outcome(Some(&f.error));
                    return Err(f);
                }
            },
        };
        inst.store.data_mut().cycle = Some(ctx.data.clone());
        inst.store.set_epoch_deadline(WasmEngine::deadline(self.args.timeout));
        let r = self.sync_pods(loaded, &mut inst).and_then(|()| f(self, loaded, &mut inst));
        let data = inst.store.data_mut();
        data.cycle = None;
        data.pod = None;
        data.cycle_id = 0;
        self.flush_output(&mut inst);
        match r {
            Ok(v) => {
                self.record_outcome(None);
                loaded.pool.lock().expect("pool lock").push(inst);
                Ok(v)
            }
            Err(e) => {
                // A guest that trapped or overran may hold broken state: drop the instance.
                if matches!(e, CallError::Invalid(_)) {
                    loaded.pool.lock().expect("pool lock").push(inst);
                }
                let f = failed(e);
                self.record_outcome(Some(&f.error));
                Err(f)
            }
        }
    }

    /// Tells the circuit breaker how a call went (`None`: it succeeded); logs and counts an opening.
    fn record_outcome(&self, failure: Option<&Status>) {
        // Without the "wasm plugin NAME at " that an open breaker's own message repeats.
        let why = failure.map(|s| {
            let (m, prefix) = (s.message(), format!("wasm plugin {:?} at ", &*self.name));
            m.strip_prefix(&prefix).map(str::to_string).unwrap_or(m)
        });
        if let Some(backoff) = self.breaker.record_now(why.as_deref()) {
            self.stats.circuit_opens.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                plugin = &*self.name,
                backoff = ?backoff,
                "wasm plugin circuit breaker open: {} failed call(s) in a row; calls answer the failure policy's fallback for {backoff:?}",
                self.args.circuit_breaker.consecutive_failures
            );
        }
    }

    /// The Error status of a failed call, naming the plugin and the call; counted and logged here, once.
    pub(super) fn fail_status(&self, call: Call, e: CallError) -> Status {
        let what = match e {
            CallError::Timeout => {
                self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                format!("timed out after {:?}", self.args.timeout)
            }
            CallError::Trap(m) => {
                self.stats.traps.fetch_add(1, Ordering::Relaxed);
                format!("trapped: {m}")
            }
            CallError::Invalid(m) => m,
            CallError::CircuitOpen(left, why) => {
                // Not logged: the opening was, and this would be one line per call.
                let msg = format!(
                    "wasm plugin {:?} at {}: not called, its circuit breaker is open for {:.1}s more after {} failed call(s) in a row; the last: {why}",
                    &*self.name,
                    call.name(),
                    left.as_secs_f64(),
                    self.args.circuit_breaker.consecutive_failures
                );
                return Status::error(msg).with_plugin(&self.name);
            }
        };
        let point = call.name();
        let msg = format!("wasm plugin {:?} at {point}: {what}", &*self.name);
        tracing::warn!(plugin = &*self.name, point, "{msg}");
        Status::error(msg).with_plugin(&self.name)
    }

    /// Writes what the call printed to the log (rate-limited) and empties the instance's buffers.
    fn flush_output(&self, inst: &mut GuestInstance) {
        let data = inst.store.data();
        self.log.drain(Source::Stdout, &data.stdout);
        self.log.drain(Source::Stderr, &data.stderr);
    }

    /// Slots (node ids) for the nodes, and the changes this instance has not seen yet: every change of a node, or
    /// only changes of the node object when the guest promised to ignore usage (`ignores-node-usage`).
    fn slots_and_changes(
        &self,
        inst: &mut GuestInstance,
        nodes: &[&NodeInfo],
        ignores_usage: bool,
    ) -> (Vec<u32>, Vec<wit::NodeChange>) {
        let slots: Vec<u32> = nodes.iter().map(|n| n.id).collect();
        // Grown once for the batch, so the loop below indexes without resizing (this runs for every node of every
        // batch: it is the host's per-node cost of a guest that is already up to date).
        let top = slots.iter().copied().max().map_or(0, |m| m as usize + 1);
        if inst.synced.len() < top {
            inst.synced.resize(top, u64::MAX);
        }
        let mut changes = Vec::new();
        for n in nodes {
            let seen = &mut inst.synced[n.id as usize];
            let g = generation(n, ignores_usage);
            // 0 marks a node changed outside the cache (a what-if copy) or never stamped by one: always send it.
            if g == 0 || *seen != g {
                if *seen == u64::MAX {
                    inst.rows += 1;
                }
                *seen = g;
                changes.push(wit::NodeChange::Upsert((n.id, convert::node(n))));
            }
        }
        (slots, changes)
    }

    /// Makes the cycle's pod and number available to `host.cycle-pod` and `host.cycle-id` for this call, and tells
    /// the instance a new cycle began (`cycle.begin`) unless it was already told or promised it needs no telling.
    /// The pod crosses only if the guest asks for it.
    pub(super) fn begin(
        &self,
        ctx: &CycleCtx,
        pod: &PodInfo,
        loaded: &Loaded,
        inst: &mut GuestInstance,
    ) -> Result<(), CallError> {
        let data = inst.store.data_mut();
        data.pod = Some(ctx.cycle_pod(pod));
        data.cycle_id = ctx.id;
        if inst.cycle_id != ctx.id {
            // A guest that tells cycles apart by `host.cycle-id` is not told: one crossing less per cycle.
            if !loaded.declares(Declared::NEEDS_NO_CYCLE_BEGIN) {
                cached_guest!(loaded, inst, cycle).call_begin(&mut inst.store).map_err(trap)?;
            }
            inst.cycle_id = ctx.id;
        }
        Ok(())
    }

    /// Sends the instance the pod view's changes it has not seen, when the component follows the view (exports
    /// `pods`): before every call, so whatever the guest decides on sees the pods as they are now.
    fn sync_pods(&self, loaded: &Loaded, inst: &mut GuestInstance) -> Result<(), CallError> {
        if loaded.idx.pods.is_none() {
            return Ok(());
        }
        let view = &self.handle.pods;
        // Up to date: no lock taken.
        if inst.pods_cursor >= view.head() && inst.pods_cursor != 0 {
            return Ok(());
        }
        let delta = view.since(inst.pods_cursor);
        if delta.changes.is_empty() && !delta.reset {
            inst.pods_cursor = delta.cursor;
            return Ok(());
        }
        let mut changes = Vec::with_capacity(delta.changes.len() + 1);
        if delta.reset {
            changes.push(wit::PodChange::Reset);
        }
        // A tenant's guest sees other namespaces' pods only as anonymous usage (`TenantScope`).
        let scope = self.handle.scope.as_deref();
        for c in &delta.changes {
            changes.push(match (c, scope) {
                (PodChange::Upsert(k), Some(s)) if !s.owns(&k.pod) => wit::PodChange::Upsert(s.anonymous(k)),
                (PodChange::Upsert(k), _) => wit::PodChange::Upsert(convert::known_pod(k)),
                (PodChange::Remove(k), Some(s)) if !s.owns(&k.pod) => wit::PodChange::Remove(s.uid(&k.pod.uid)),
                (PodChange::Remove(k), _) => wit::PodChange::Remove(k.pod.uid.clone()),
            });
        }
        let guest = cached_guest!(loaded, inst, pods).clone();
        // As a node table load: proportional to what is sent, with its own budget.
        let budget = (self.args.timeout + SYNC_BUDGET_PER_NODE * changes.len() as u32).min(MAX_SYNC_BUDGET);
        inst.store.set_epoch_deadline(WasmEngine::deadline(budget));
        let r = guest.call_apply(&mut inst.store, &changes);
        inst.store.set_epoch_deadline(WasmEngine::deadline(self.args.timeout));
        match r {
            Ok(()) => {
                inst.pods_cursor = delta.cursor;
                Ok(())
            }
            Err(e) => {
                // The view is in an unknown state: send all of it next time.
                inst.pods_cursor = 0;
                Err(trap(e))
            }
        }
    }

    /// Sends the instance the nodes it has not seen at their current generation; returns the nodes' slots.
    pub(super) fn sync(
        &self,
        loaded: &Loaded,
        inst: &mut GuestInstance,
        nodes: &[&NodeInfo],
    ) -> Result<Vec<u32>, CallError> {
        let (slots, changes) = self.slots_and_changes(inst, nodes, loaded.declares(Declared::IGNORES_NODE_USAGE));
        if !changes.is_empty() {
            self.stats.node_rows_sent.fetch_add(changes.len() as u64, Ordering::Relaxed);
            // Present whenever a node point is: checked at load.
            let guest = cached_guest!(loaded, inst, nodes).clone();
            // Loading a table is proportional to the nodes sent (a fresh instance gets the whole cluster): it has
            // its own budget, and the call that follows gets the plugin's full deadline.
            let budget = (self.args.timeout + SYNC_BUDGET_PER_NODE * changes.len() as u32).min(MAX_SYNC_BUDGET);
            inst.store.set_epoch_deadline(WasmEngine::deadline(budget));
            let r = guest.call_apply(&mut inst.store, &changes);
            inst.store.set_epoch_deadline(WasmEngine::deadline(self.args.timeout));
            if let Err(e) = r {
                // The table is in an unknown state: resend everything next time.
                inst.synced.clear();
                inst.rows = 0;
                return Err(trap(e));
            }
        }
        Ok(slots)
    }
}
