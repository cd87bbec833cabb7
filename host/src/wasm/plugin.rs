//! `WasmPlugin`: a component served at the extension points it exports, through the same traits as native
//! plugins. Calls run on a pool of instances (each with its own `Store`), under an epoch deadline and a memory
//! cap; a trap, timeout or invalid answer becomes an `Error` status naming the plugin and the point (or is
//! ignored, with `failurePolicy: Ignore`). The component can be replaced while the scheduler runs: a cycle keeps
//! the version it started with.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use wasmtime::component::{Component, HasSelf, Instance, InstancePre, Linker, ResourceTable};
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::args::{FailurePolicy, WasmArgs};
use super::bindings::exports::kws::plugin as ex;
use super::bindings::kws::plugin::{host, types as wit};
use super::convert;
use super::engine::{first_line, WasmEngine};
use super::{ComponentInfo, WasmError};
use crate::cache::Snapshot;
use crate::framework::rng::Rng;
use crate::framework::*;

/// Every Wasm plugin alive in the process (for metrics and tests).
static LOADED: Mutex<Vec<Weak<WasmPlugin>>> = Mutex::new(Vec::new());

/// The Wasm plugins alive in this process.
pub fn loaded_plugins() -> Vec<Arc<WasmPlugin>> {
    LOADED.lock().expect("loaded plugins lock").iter().filter_map(Weak::upgrade).collect()
}

/// Extra deadline per node sent to a guest's node table.
const SYNC_BUDGET_PER_NODE: Duration = Duration::from_millis(1);
/// The most a node table load may take.
const MAX_SYNC_BUDGET: Duration = Duration::from_secs(10);

/// Guest output kept per call before it is flushed to the log.
const OUTPUT_CAPACITY: usize = 64 * 1024;

/// Counters of one Wasm plugin (exported as metrics by the live scheduler).
#[derive(Debug, Default)]
pub struct WasmStats {
    /// Successful (re)loads, the first one included.
    pub loads: AtomicU64,
    /// Replacements of a running version.
    pub reloads: AtomicU64,
    /// Replacement files that were refused (the previous version kept serving).
    pub reload_failures: AtomicU64,
    /// Calls that trapped.
    pub traps: AtomicU64,
    /// Calls that ran past their deadline.
    pub timeouts: AtomicU64,
    /// Instances created.
    pub instances: AtomicU64,
}

/// A plugin's private cycle state (`host.cycle-state-write` / `-read`), shared by the instances of one cycle.
type GuestCycleState = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// The cycle's pod in contract form, with the UID it was converted from.
type CachedPod = Arc<Mutex<Option<(String, Arc<wit::Pod>)>>>;

/// What a guest may reach: its name (for logs), its config, a random source, and this cycle's state.
pub(crate) struct HostState {
    plugin: Arc<str>,
    config: Arc<str>,
    rng: Arc<Mutex<Rng>>,
    cycle: Option<GuestCycleState>,
    /// The cycle's pod during Filter, Score and NormalizeScore calls (`host.cycle-pod`).
    pod: Option<Arc<wit::Pod>>,
    limits: StoreLimits,
    wasi: WasiCtx,
    table: ResourceTable,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    printed: (usize, usize),
}

impl host::Host for HostState {
    fn log(&mut self, level: host::Level, message: String) {
        let plugin = &*self.plugin;
        match level {
            host::Level::Debug => tracing::debug!(plugin, "{message}"),
            host::Level::Info => tracing::info!(plugin, "{message}"),
            host::Level::Warn => tracing::warn!(plugin, "{message}"),
            host::Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
    fn config(&mut self) -> String {
        self.config.to_string()
    }
    fn random(&mut self) -> u64 {
        self.rng.lock().expect("rng lock").next_u64()
    }
    fn now_ns(&mut self) -> u64 {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    }
    fn cycle_state_write(&mut self, key: String, value: Vec<u8>) {
        if let Some(c) = &self.cycle {
            c.lock().expect("cycle state lock").insert(key, value);
        }
    }
    fn cycle_state_read(&mut self, key: String) -> Option<Vec<u8>> {
        self.cycle.as_ref().and_then(|c| c.lock().expect("cycle state lock").get(&key).cloned())
    }
    fn cycle_pod(&mut self) -> Option<wit::Pod> {
        self.pod.as_deref().cloned()
    }
}

impl wit::Host for HostState {}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Export lookups of one component, resolved once.
#[derive(Default)]
struct Indices {
    nodes: Option<ex::nodes::GuestIndices>,
    cycle: Option<ex::cycle::GuestIndices>,
    pre_enqueue: Option<ex::pre_enqueue::GuestIndices>,
    queue_sort: Option<ex::queue_sort::GuestIndices>,
    pre_filter: Option<ex::pre_filter::GuestIndices>,
    filter: Option<ex::filter::GuestIndices>,
    post_filter: Option<ex::post_filter::GuestIndices>,
    pre_score: Option<ex::pre_score::GuestIndices>,
    score: Option<ex::score::GuestIndices>,
    reserve: Option<ex::reserve::GuestIndices>,
    permit: Option<ex::permit::GuestIndices>,
    pre_bind: Option<ex::pre_bind::GuestIndices>,
    bind: Option<ex::bind::GuestIndices>,
    post_bind: Option<ex::post_bind::GuestIndices>,
}

/// One instance: its store, its copy of the node table's generations, and the hot exports, looked up (and
/// type-checked) once rather than on every call.
struct GuestInstance {
    store: Store<HostState>,
    instance: Instance,
    /// Node generation last sent, by slot (`u64::MAX`: never sent).
    synced: Vec<u64>,
    /// The cycle (`CycleCtx::id`) whose pod this instance holds (0: none).
    cycle_id: u64,
    cycle: Option<ex::cycle::Guest>,
    filter: Option<ex::filter::Guest>,
    score: Option<ex::score::Guest>,
    nodes: Option<ex::nodes::Guest>,
}

/// One version of the component, with its instance pool.
pub(crate) struct Loaded {
    /// SHA-256 of the file.
    pub digest: String,
    pre: InstancePre<HostState>,
    idx: Indices,
    pool: Mutex<Vec<GuestInstance>>,
    /// What the component exports and imports.
    pub info: ComponentInfo,
}

/// Data a cycle keeps for each Wasm plugin: the version it started with, its private cycle state, and the cycle's
/// pod in contract form (converted once per cycle for `host.cycle-pod`, not for each of Filter, Score and
/// NormalizeScore).
#[derive(Clone)]
struct CycleCtx {
    /// Unique in the process: an instance that has been handed this cycle's pod remembers it.
    id: u64,
    loaded: Arc<Loaded>,
    data: GuestCycleState,
    pod: CachedPod,
}

impl CycleCtx {
    fn new(loaded: Arc<Loaded>) -> CycleCtx {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        CycleCtx { id, loaded, data: Arc::new(Mutex::new(HashMap::new())), pod: Arc::new(Mutex::new(None)) }
    }

    /// `pod` in contract form, converted on first use in this cycle.
    fn pod(&self, pod: &PodInfo) -> Arc<wit::Pod> {
        let mut cached = self.pod.lock().expect("cycle pod lock");
        match &*cached {
            Some((uid, p)) if *uid == pod.uid => p.clone(),
            _ => {
                let p = Arc::new(convert::pod(pod));
                *cached = Some((pod.uid.clone(), p.clone()));
                p
            }
        }
    }
}

/// A Wasm plugin.
pub struct WasmPlugin {
    name: Arc<str>,
    args: WasmArgs,
    current: RwLock<Arc<Loaded>>,
    rng: Arc<Mutex<Rng>>,
    state_key: String,
    watched: Mutex<Option<(std::path::PathBuf, SystemTime, u64)>>,
    /// Counters.
    pub stats: WasmStats,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin").field("name", &self.name).field("component", &self.args.component).finish()
    }
}

/// Reads and compiles a component file, checking its digest when one is pinned.
pub(crate) fn load_component(path: &Path, sha256: Option<&str>) -> Result<(Component, String), WasmError> {
    let bytes = std::fs::read(path)
        .map_err(|e| WasmError::Read { path: path.display().to_string(), message: e.to_string() })?;
    let engine = WasmEngine::shared();
    let digest = super::engine::sha256_hex(&bytes);
    if let Some(want) = sha256 {
        if want != digest {
            return Err(WasmError::Digest { path: path.display().to_string(), want: want.to_string(), got: digest });
        }
    }
    engine.compile(&bytes)
}

fn linker_for(info: &ComponentInfo) -> Result<Linker<HostState>, WasmError> {
    let engine = WasmEngine::shared().engine();
    let mut linker: Linker<HostState> = Linker::new(engine);
    super::bindings::SchedulerPlugin::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
        .map_err(|e| WasmError::Link(first_line(&e)))?;
    if info.imports_wasi {
        // Only for components that import WASI; the context they get has no files, network or environment.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| WasmError::Link(first_line(&e)))?;
    }
    Ok(linker)
}

impl Loaded {
    fn new(component: Component, digest: String) -> Result<Loaded, WasmError> {
        let info = super::describe(&component)?;
        let linker = linker_for(&info)?;
        let pre = linker.instantiate_pre(&component).map_err(|e| WasmError::Link(first_line(&e)))?;
        let idx = Indices {
            nodes: ex::nodes::GuestIndices::new(&pre).ok(),
            cycle: ex::cycle::GuestIndices::new(&pre).ok(),
            pre_enqueue: ex::pre_enqueue::GuestIndices::new(&pre).ok(),
            queue_sort: ex::queue_sort::GuestIndices::new(&pre).ok(),
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
        if (idx.filter.is_some() || idx.score.is_some()) && idx.cycle.is_none() {
            return Err(WasmError::Contract("it exports filter or score but not kws:plugin/cycle".into()));
        }
        Ok(Loaded { digest, pre, idx, pool: Mutex::new(Vec::new()), info })
    }

    fn points(&self) -> Vec<&'static str> {
        self.info.points.clone()
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

/// A hot export of an instance, looked up on the instance's first call.
macro_rules! cached_guest {
    ($loaded:expr, $inst:expr, $field:ident) => {{
        if $inst.$field.is_none() {
            $inst.$field = Some(guest!($loaded, $inst, $field));
        }
        $inst.$field.as_ref().expect("looked up above")
    }};
}

/// Why a guest call failed.
enum CallError {
    Timeout,
    Trap(String),
    Invalid(String),
}

impl WasmPlugin {
    /// Loads the component named in `args` (compiled once per digest) for a plugin called `name`.
    pub fn load(name: &str, args: WasmArgs, seed: u64) -> Result<Arc<WasmPlugin>, WasmError> {
        let (component, digest) = load_component(&args.component, args.sha256.as_deref())?;
        let loaded = Loaded::new(component, digest)?;
        let watched = file_stamp(&args.component);
        let p = Arc::new(WasmPlugin {
            name: Arc::from(name),
            state_key: format!("wasm/{name}"),
            args,
            current: RwLock::new(Arc::new(loaded)),
            rng: Arc::new(Mutex::new(Rng::new(seed ^ 0x5_EED0_F7A5))),
            watched: Mutex::new(watched),
            stats: WasmStats::default(),
        });
        p.stats.loads.fetch_add(1, Ordering::Relaxed);
        let mut all = LOADED.lock().expect("loaded plugins lock");
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&p));
        Ok(p)
    }

    /// The extension points the current version serves.
    pub fn points(&self) -> Vec<&'static str> {
        self.current().points()
    }

    /// The component file this plugin serves from.
    pub fn component(&self) -> &Path {
        &self.args.component
    }

    /// SHA-256 of the version serving now.
    pub fn digest(&self) -> String {
        self.current().digest.clone()
    }

    fn current(&self) -> Arc<Loaded> {
        self.current.read().expect("current version lock").clone()
    }

    /// Checks the component file: when it changed, compiles and checks the new version off the hot path and swaps
    /// it in. A file that cannot serve the same points keeps the old version serving and is reported. Returns
    /// `Ok(true)` when a new version was swapped in.
    pub fn reload_if_changed(&self) -> Result<bool, WasmError> {
        let stamp = file_stamp(&self.args.component);
        {
            let mut w = self.watched.lock().expect("watch lock");
            if stamp.is_none() || *w == stamp {
                return Ok(false);
            }
            *w = stamp;
        }
        let result = (|| {
            let (component, digest) = load_component(&self.args.component, None)?;
            if digest == self.current().digest {
                return Ok(false);
            }
            let loaded = Loaded::new(component, digest)?;
            let (old, new) = (self.points(), loaded.points());
            if old != new {
                return Err(WasmError::Contract(format!("the new file serves {new:?}, the running version {old:?}")));
            }
            *self.current.write().expect("current version lock") = Arc::new(loaded);
            Ok(true)
        })();
        match &result {
            Ok(true) => {
                self.stats.reloads.fetch_add(1, Ordering::Relaxed);
                self.stats.loads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(plugin = &*self.name, digest = %self.digest(), "wasm plugin reloaded");
            }
            Ok(false) => {}
            Err(e) => {
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(plugin = &*self.name, error = %e, "wasm plugin reload refused; the previous version keeps serving");
            }
        }
        result
    }

    /// Polls the component file every `period` on a background thread until the plugin is dropped.
    pub fn watch(self: &Arc<Self>, period: Duration) {
        let weak: Weak<WasmPlugin> = Arc::downgrade(self);
        let _ = std::thread::Builder::new().name(format!("wasm-watch-{}", self.name)).spawn(move || loop {
            std::thread::sleep(period);
            let Some(p) = weak.upgrade() else { return };
            let _ = p.reload_if_changed();
        });
    }

    fn ctx(&self, state: Option<&CycleState>) -> CycleCtx {
        state
            .and_then(|s| s.read::<CycleCtx>(&self.state_key))
            .cloned()
            .unwrap_or_else(|| CycleCtx::new(self.current()))
    }

    fn new_instance(&self, loaded: &Loaded) -> wasmtime::Result<GuestInstance> {
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let wasi = WasiCtxBuilder::new().stdout(stdout.clone()).stderr(stderr.clone()).build();
        let state = HostState {
            plugin: self.name.clone(),
            config: Arc::from(self.args.config_json.as_str()),
            rng: self.rng.clone(),
            cycle: None,
            pod: None,
            limits: StoreLimitsBuilder::new()
                .memory_size(self.args.memory_limit as usize)
                .trap_on_grow_failure(true)
                .build(),
            wasi,
            table: ResourceTable::new(),
            stdout,
            stderr,
            printed: (0, 0),
        };
        let mut store = Store::new(WasmEngine::shared().engine(), state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(WasmEngine::ticks_for(self.args.timeout));
        let instance = loaded.pre.instantiate(&mut store)?;
        self.stats.instances.fetch_add(1, Ordering::Relaxed);
        Ok(GuestInstance {
            store,
            instance,
            synced: Vec::new(),
            cycle_id: 0,
            cycle: None,
            filter: None,
            score: None,
            nodes: None,
        })
    }

    /// Runs `f` on an instance of the cycle's version under the deadline; a trapped instance is discarded.
    fn call<R>(
        &self,
        ctx: &CycleCtx,
        point: &'static str,
        f: impl FnOnce(&WasmPlugin, &Loaded, &mut GuestInstance) -> Result<R, CallError>,
    ) -> Result<R, Status> {
        let loaded = &ctx.loaded;
        let taken = loaded.pool.lock().expect("pool lock").pop();
        let mut inst = match taken {
            Some(i) => i,
            None => self.new_instance(loaded).map_err(|e| self.fail_status(point, CallError::Trap(first_line(&e))))?,
        };
        inst.store.data_mut().cycle = Some(ctx.data.clone());
        inst.store.set_epoch_deadline(WasmEngine::ticks_for(self.args.timeout));
        let r = f(self, loaded, &mut inst);
        let data = inst.store.data_mut();
        data.cycle = None;
        data.pod = None;
        self.flush_output(&mut inst);
        match r {
            Ok(v) => {
                loaded.pool.lock().expect("pool lock").push(inst);
                Ok(v)
            }
            Err(e) => {
                // A guest that trapped or overran may hold broken state: drop the instance.
                if matches!(e, CallError::Invalid(_)) {
                    loaded.pool.lock().expect("pool lock").push(inst);
                }
                Err(self.fail_status(point, e))
            }
        }
    }

    fn fail_status(&self, point: &'static str, e: CallError) -> Status {
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
        };
        let msg = format!("wasm plugin {:?} at {point}: {what}", &*self.name);
        tracing::warn!(plugin = &*self.name, point, "{msg}");
        Status::error(msg).with_plugin(&self.name)
    }

    fn flush_output(&self, inst: &mut GuestInstance) {
        let data = inst.store.data_mut();
        for (pipe, seen, stream) in
            [(&data.stdout, &mut data.printed.0, "stdout"), (&data.stderr, &mut data.printed.1, "stderr")]
        {
            let bytes = pipe.contents();
            if bytes.len() > *seen {
                for line in String::from_utf8_lossy(&bytes[*seen..]).lines() {
                    tracing::info!(plugin = &*data.plugin, stream, "{line}");
                }
                *seen = bytes.len();
            }
        }
    }

    /// Slots (node ids) for the nodes, and the changes this instance has not seen yet.
    fn slots_and_changes(&self, inst: &mut GuestInstance, nodes: &[&NodeInfo]) -> (Vec<u32>, Vec<wit::NodeChange>) {
        let mut slots = Vec::with_capacity(nodes.len());
        let mut changes = Vec::new();
        for n in nodes {
            let slot = n.id;
            slots.push(slot);
            let i = slot as usize;
            if inst.synced.len() <= i {
                inst.synced.resize(i + 1, u64::MAX);
            }
            // Generation 0 marks a node changed outside the cache (a what-if copy): always send it.
            if n.generation == 0 || inst.synced[i] != n.generation {
                changes.push(wit::NodeChange::Upsert((slot, convert::node(n))));
                inst.synced[i] = n.generation;
            }
        }
        (slots, changes)
    }

    /// Makes the cycle's pod available to `host.cycle-pod` for this call, and tells the instance a new cycle began
    /// (`cycle.begin`) unless it was already told. The pod crosses only if the guest asks for it.
    fn begin(&self, ctx: &CycleCtx, pod: &PodInfo, loaded: &Loaded, inst: &mut GuestInstance) -> Result<(), CallError> {
        inst.store.data_mut().pod = Some(ctx.pod(pod));
        if inst.cycle_id != ctx.id {
            cached_guest!(loaded, inst, cycle).call_begin(&mut inst.store).map_err(trap)?;
            inst.cycle_id = ctx.id;
        }
        Ok(())
    }

    fn sync(&self, loaded: &Loaded, inst: &mut GuestInstance, nodes: &[&NodeInfo]) -> Result<Vec<u32>, CallError> {
        let (slots, changes) = self.slots_and_changes(inst, nodes);
        if !changes.is_empty() {
            // Present whenever a node point is: checked at load.
            let guest = cached_guest!(loaded, inst, nodes).clone();
            // Loading a table is proportional to the nodes sent (a fresh instance gets the whole cluster): it has
            // its own budget, and the call that follows gets the plugin's full deadline.
            let budget = (self.args.timeout + SYNC_BUDGET_PER_NODE * changes.len() as u32).min(MAX_SYNC_BUDGET);
            inst.store.set_epoch_deadline(WasmEngine::ticks_for(budget));
            let r = guest.call_apply(&mut inst.store, &changes);
            inst.store.set_epoch_deadline(WasmEngine::ticks_for(self.args.timeout));
            if let Err(e) = r {
                // The table is in an unknown state: resend everything next time.
                inst.synced.clear();
                return Err(trap(e));
            }
        }
        Ok(slots)
    }

    fn ignore(&self) -> bool {
        self.args.failure_policy == FailurePolicy::Ignore
    }
}

fn trap(e: wasmtime::Error) -> CallError {
    if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        CallError::Timeout
    } else {
        CallError::Trap(first_line(&e))
    }
}

fn file_stamp(path: &Path) -> Option<(std::path::PathBuf, SystemTime, u64)> {
    // Canonical path: a ConfigMap's `..data` symlink swap changes it even when size and time would not.
    let canon = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canon).ok()?;
    Some((canon, meta.modified().ok()?, meta.len()))
}

impl Plugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn begin_cycle(&self, state: &mut CycleState) {
        state.write(self.state_key.clone(), CycleCtx::new(self.current()));
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        self.current().idx.pre_enqueue.as_ref().map(|_| self as _)
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        self.current().idx.queue_sort.as_ref().map(|_| self as _)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.current().idx.pre_filter.as_ref().map(|_| self as _)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.current().idx.filter.as_ref().map(|_| self as _)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        self.current().idx.post_filter.as_ref().map(|_| self as _)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        self.current().idx.pre_score.as_ref().map(|_| self as _)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.current().idx.score.as_ref().map(|_| self as _)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        self.current().idx.reserve.as_ref().map(|_| self as _)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        self.current().idx.permit.as_ref().map(|_| self as _)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        self.current().idx.pre_bind.as_ref().map(|_| self as _)
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        self.current().idx.bind.as_ref().map(|_| self as _)
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        self.current().idx.post_bind.as_ref().map(|_| self as _)
    }
}

impl PreEnqueuePlugin for WasmPlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(None), "PreEnqueue", |_, l, i| {
            Ok(convert::status(guest!(l, i, pre_enqueue).call_pre_enqueue(&mut i.store, &p).map_err(trap)?))
        });
        r.unwrap_or_else(|s| if self.ignore() { Status::success() } else { s })
    }
}

impl QueueSortPlugin for WasmPlugin {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (qa, qb) = (convert::queued_pod(a), convert::queued_pod(b));
        // A failing QueueSort cannot reject anything: fall back to arrival order, as the queue must stay ordered.
        self.call(&self.ctx(None), "QueueSort", |_, l, i| {
            guest!(l, i, queue_sort).call_less(&mut i.store, &qa, &qb).map_err(trap)
        })
        .unwrap_or(a.timestamp < b.timestamp)
    }
}

impl PreFilterPlugin for WasmPlugin {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(Some(state)), "PreFilter", |_, l, i| {
            let r = guest!(l, i, pre_filter).call_pre_filter(&mut i.store, &p).map_err(trap)?;
            Ok((r.node_names.map(|v| v.into_iter().collect()), convert::status(r.status)))
        });
        match r {
            Ok(v) => v,
            Err(_) if self.ignore() => (None, Status::skip()),
            Err(s) => (None, s),
        }
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        add: &Arc<PodInfo>,
        node: &NodeInfo,
        _s: &Snapshot,
    ) -> Status {
        self.what_if(state, pod, add, node, true)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        remove: &Arc<PodInfo>,
        node: &NodeInfo,
        _s: &Snapshot,
    ) -> Status {
        self.what_if(state, pod, remove, node, false)
    }
}

impl WasmPlugin {
    fn what_if(&self, state: &CycleState, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, add: bool) -> Status {
        let (p, o) = (convert::pod(pod), convert::pod(other));
        let r = self.call(
            &self.ctx(Some(state)),
            if add { "PreFilter.AddPod" } else { "PreFilter.RemovePod" },
            |me, l, i| {
                let slot = me.sync(l, i, &[node])?[0];
                let g = guest!(l, i, pre_filter);
                let s = if add {
                    g.call_add_pod(&mut i.store, &p, &o, slot)
                } else {
                    g.call_remove_pod(&mut i.store, &p, &o, slot)
                };
                Ok(convert::status(s.map_err(trap)?))
            },
        );
        r.unwrap_or_else(|s| if self.ignore() { Status::success() } else { s })
    }
}

impl FilterPlugin for WasmPlugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut out = Vec::with_capacity(1);
        self.filter_nodes(state, pod, &[node], &mut out);
        out.pop().unwrap_or_else(Status::success)
    }

    /// One crossing per batch: the nodes that changed, then the slots.
    fn filter_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Status>) {
        let ctx = self.ctx(Some(state));
        let r = self.call(&ctx, "Filter", |me, l, i| {
            me.begin(&ctx, pod, l, i)?;
            let slots = me.sync(l, i, nodes)?;
            let answer = cached_guest!(l, i, filter).call_filter(&mut i.store, &slots).map_err(trap)?;
            convert::filter_verdicts(answer, nodes.len(), out).map_err(CallError::Invalid)
        });
        match r {
            Ok(()) => {}
            Err(_) if self.ignore() => out.extend(nodes.iter().map(|_| Status::success())),
            Err(s) => out.extend(nodes.iter().map(|_| s.clone())),
        }
    }
}

impl PostFilterPlugin for WasmPlugin {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        filtered: &NodeToStatus,
        handle: &dyn PostFilterHandle,
    ) -> (Option<PostFilterResult>, Status) {
        let p = convert::pod(pod);
        let nodes: Vec<&NodeInfo> = filtered.keys().filter_map(|n| handle.snapshot().get(n).map(|a| &**a)).collect();
        let r = self.call(&self.ctx(Some(state)), "PostFilter", |me, l, i| {
            let slots = me.sync(l, i, &nodes)?;
            let rejected: Vec<(u32, wit::Status)> =
                slots.iter().zip(&nodes).map(|(s, n)| (*s, convert::status_to_wit(&filtered[&n.name]))).collect();
            let r = guest!(l, i, post_filter).call_post_filter(&mut i.store, &p, &rejected).map_err(trap)?;
            Ok((
                r.nominated_node.map(|n| PostFilterResult { nominated_node_name: Some(n), victims: Vec::new() }),
                convert::status(r.status),
            ))
        });
        match r {
            Ok(v) => v,
            Err(_) if self.ignore() => (None, Status::unschedulable("")),
            Err(s) => (None, s),
        }
    }
}

impl PreScorePlugin for WasmPlugin {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>], _s: &Snapshot) -> Status {
        let p = convert::pod(pod);
        let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
        let r = self.call(&self.ctx(Some(state)), "PreScore", |me, l, i| {
            let slots = me.sync(l, i, &refs)?;
            Ok(convert::status(guest!(l, i, pre_score).call_pre_score(&mut i.store, &p, &slots).map_err(trap)?))
        });
        r.unwrap_or_else(|s| if self.ignore() { Status::skip() } else { s })
    }
}

impl ScorePlugin for WasmPlugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0i64];
        let s = self.score_nodes(state, pod, &[node], &mut out);
        if s.is_success() {
            Ok(out[0])
        } else {
            Err(s)
        }
    }

    /// One crossing per batch: the nodes that changed, then the slots.
    fn score_nodes(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo], out: &mut [i64]) -> Status {
        let ctx = self.ctx(Some(state));
        let r = self.call(&ctx, "Score", |me, l, i| {
            me.begin(&ctx, pod, l, i)?;
            let slots = me.sync(l, i, nodes)?;
            let scores = cached_guest!(l, i, score).call_score(&mut i.store, &slots).map_err(trap)?;
            Ok(scores.map(|v| if v.len() == nodes.len() { Ok(v) } else { Err(v.len()) }))
        });
        match r {
            Ok(Ok(Ok(v))) => {
                out.copy_from_slice(&v);
                Status::success()
            }
            Ok(Ok(Err(n))) => {
                self.fail_status("Score", CallError::Invalid(format!("returned {n} scores for {} nodes", nodes.len())))
            }
            // The guest's own Error status (e.g. a bad label value) fails the pod's attempt, as upstream.
            Ok(Err(s)) => convert::status(s).with_plugin(&self.name),
            Err(_) if self.ignore() => {
                out.fill(0);
                Status::success()
            }
            Err(s) => s,
        }
    }

    fn normalize_score(&self, state: &CycleState, pod: &PodInfo, scores: &mut [NodeScore<'_>]) -> Status {
        let ctx = self.ctx(Some(state));
        let slots: Vec<u32> = scores.iter().map(|s| s.id).collect();
        let raw: Vec<i64> = scores.iter().map(|s| s.score).collect();
        let r = self.call(&ctx, "NormalizeScore", |me, l, i| {
            me.begin(&ctx, pod, l, i)?;
            let r = cached_guest!(l, i, score).call_normalize_score(&mut i.store, &slots, &raw).map_err(trap)?;
            match r {
                Ok(v) if v.len() == raw.len() => Ok(Ok(v)),
                Ok(v) => {
                    Err(CallError::Invalid(format!("returned {} normalized scores for {} nodes", v.len(), raw.len())))
                }
                Err(s) => Ok(Err(s)),
            }
        });
        match r {
            Ok(Ok(v)) => {
                for (s, n) in scores.iter_mut().zip(v) {
                    s.score = n;
                }
                Status::success()
            }
            Ok(Err(s)) => convert::status(s).with_plugin(&self.name),
            Err(_) if self.ignore() => {
                scores.iter_mut().for_each(|s| s.score = 0);
                Status::success()
            }
            Err(s) => s,
        }
    }

    fn has_normalize(&self) -> bool {
        true
    }
}

impl WasmPlugin {
    fn at_node(
        &self,
        state: Option<&CycleState>,
        point: &'static str,
        pod: &PodInfo,
        f: impl FnOnce(&Loaded, &mut GuestInstance, &wit::Pod) -> Result<Status, CallError>,
    ) -> Status {
        let p = convert::pod(pod);
        self.call(&self.ctx(state), point, |_, l, i| f(l, i, &p)).unwrap_or_else(|s| {
            if self.ignore() {
                Status::success()
            } else {
                s
            }
        })
    }
}

impl ReservePlugin for WasmPlugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), "Reserve", pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, reserve).call_reserve(&mut i.store, p, node).map_err(trap)?))
        })
    }
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        self.at_node(Some(state), "Unreserve", pod, |l, i, p| {
            guest!(l, i, reserve).call_unreserve(&mut i.store, p, node).map_err(trap)?;
            Ok(Status::success())
        });
    }
}

impl PermitPlugin for WasmPlugin {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        let p = convert::pod(pod);
        let r = self.call(&self.ctx(Some(state)), "Permit", |_, l, i| {
            let r = guest!(l, i, permit).call_permit(&mut i.store, &p, node).map_err(trap)?;
            Ok((convert::status(r.status), Duration::from_millis(r.timeout_ms)))
        });
        r.unwrap_or_else(|s| (if self.ignore() { Status::success() } else { s }, Duration::ZERO))
    }
}

impl PreBindPlugin for WasmPlugin {
    fn pre_bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), "PreBind", pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, pre_bind).call_pre_bind(&mut i.store, p, node).map_err(trap)?))
        })
    }
}

impl BindPlugin for WasmPlugin {
    fn bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        self.at_node(Some(state), "Bind", pod, |l, i, p| {
            Ok(convert::status(guest!(l, i, bind).call_bind(&mut i.store, p, node).map_err(trap)?))
        })
    }
}

impl PostBindPlugin for WasmPlugin {
    fn post_bind(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        self.at_node(Some(state), "PostBind", pod, |l, i, p| {
            guest!(l, i, post_bind).call_post_bind(&mut i.store, p, node).map_err(trap)?;
            Ok(Status::success())
        });
    }
}
