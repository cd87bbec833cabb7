//! `WasmPlugin`: a component served at the extension points it exports, through the same traits as native
//! plugins (`adapters`). Calls run on a pool of instances under a deadline and a memory cap (`instance`); a
//! failed call answers what the failure policy says (`failure`); the component can be replaced while the
//! scheduler runs, and a cycle keeps the version it started with (`reload`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::args::WasmArgs;
use super::convert::QueuedPodCache;
use super::failure::Breaker;
use super::host::GuestHandle;
use super::instance::{CycleCtx, Loaded};
use super::output::GuestLog;
use super::reload::{file_stamp, load_version, FileStamp};
use super::source::Source;
use super::WasmError;
use crate::framework::rng::Rng;
use crate::framework::{CycleState, PluginContext};

/// Every Wasm plugin alive in the process (for metrics and tests).
static LOADED: Mutex<Vec<Weak<WasmPlugin>>> = Mutex::new(Vec::new());

/// The Wasm plugins alive in this process.
pub fn loaded_plugins() -> Vec<Arc<WasmPlugin>> {
    LOADED.lock().expect("loaded plugins lock").iter().filter_map(Weak::upgrade).collect()
}

/// A version of a Wasm plugin refused while the running one keeps serving (a bad file, a failed pull or re-check,
/// a digest that does not match the pin, something that is not a component).
#[derive(Debug)]
pub struct RefusedVersion<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// Where its component comes from.
    pub source: &'a Source,
    /// Why the version was refused.
    pub error: &'a WasmError,
}

/// Called for every refused version, besides the log line and the counter.
pub type RefusalObserver = Arc<dyn Fn(&RefusedVersion<'_>) + Send + Sync>;

static REFUSAL_OBSERVERS: RwLock<Vec<RefusalObserver>> = RwLock::new(Vec::new());

/// Adds an observer of refused versions (the live scheduler turns them into Kubernetes Events).
pub fn observe_refusals(observer: RefusalObserver) {
    REFUSAL_OBSERVERS.write().expect("refusal observers lock").push(observer);
}

/// Tells the observers of a refused version.
pub(super) fn notify_refusal(refused: &RefusedVersion<'_>) {
    for o in REFUSAL_OBSERVERS.read().expect("refusal observers lock").iter() {
        o(refused);
    }
}

/// Counters of one Wasm plugin (exported as metrics by the live scheduler).
#[derive(Debug, Default)]
pub struct WasmStats {
    /// Successful (re)loads, the first one included.
    pub loads: AtomicU64,
    /// Whether the version serving was built for the previous contract and is served through the adapter.
    pub previous_contract: std::sync::atomic::AtomicBool,
    /// Replacements of a running version.
    pub reloads: AtomicU64,
    /// Replacement versions that were refused (the previous version kept serving): a bad file, a failed pull or
    /// re-check of a tag, a digest that does not match the pin, a tag moved to something that is not a component.
    pub reload_failures: AtomicU64,
    /// Versions loaded precompiled from the plugin cache (no compile).
    pub precompiled_loads: AtomicU64,
    /// Calls that trapped.
    pub traps: AtomicU64,
    /// Calls that ran past their deadline.
    pub timeouts: AtomicU64,
    /// Instances created.
    pub instances: AtomicU64,
    /// Times the circuit breaker opened.
    pub circuit_opens: AtomicU64,
    /// Calls answered by the failure policy without reaching the guest, the breaker being open.
    pub short_circuited: AtomicU64,
    /// Guest log and output lines dropped by the plugin's log rate limit.
    pub log_lines_dropped: AtomicU64,
    /// Guest output bytes dropped past the per-call cap.
    pub output_bytes_dropped: AtomicU64,
    /// Node table rows sent to instances (a fresh instance is sent every node it is asked about).
    pub node_rows_sent: AtomicU64,
    /// Pods lent by reference (`host.pod-ref`: QueueSort's key, PostBind) instead of copied into the guest.
    pub pods_lent: AtomicU64,
    /// Whole pods a guest copied from a lent one anyway (`pod-ref.get`, e.g. the SDK's by-value fallback).
    pub pods_fetched: AtomicU64,
    /// Raw scores reused without a call, for a guest that promised `score-reads-node-only`.
    pub scores_reused: AtomicU64,
    /// NormalizeScore computed by the host as the guest promised (`normalize-default`, `-reversed`), not called.
    pub normalized_by_host: AtomicU64,
}

/// A Wasm plugin.
pub struct WasmPlugin {
    pub(super) name: Arc<str>,
    pub(super) args: WasmArgs,
    /// The version new cycles start on; swapped by a reload.
    pub(super) current: RwLock<Arc<Loaded>>,
    /// Shared by all instances, so `host.random` is one seeded sequence per plugin.
    pub(super) rng: Arc<Mutex<Rng>>,
    /// Where a cycle's `CycleCtx` for this plugin is kept in its `CycleState`.
    pub(super) state_key: String,
    /// The component file's stamp when it was last read.
    pub(super) watched: Mutex<Option<FileStamp>>,
    /// For an OCI tag, the manifest digest it pointed at when last pulled.
    pub(super) revision: Mutex<Option<String>>,
    /// Counters.
    pub stats: Arc<WasmStats>,
    /// Where every instance's `host.log` lines and output go, under one rate limit.
    pub(super) log: Arc<GuestLog>,
    /// Stops calls to a guest that keeps failing.
    pub(super) breaker: Breaker,
    /// QueueSort's pods in contract form, converted once per queue entry rather than once per comparison.
    pub(super) queued_pods: QueuedPodCache,
    /// The profile's waiting pods and the pod view, which the guest reaches through its host imports and exports.
    pub(super) handle: GuestHandle,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin").field("name", &self.name).field("component", &self.args.component).finish()
    }
}

impl WasmPlugin {
    /// Loads the component named in `args` (compiled once per digest) for a plugin called `name`, and has the
    /// guest validate its configuration.
    pub fn load(name: &str, args: WasmArgs, seed: u64) -> Result<Arc<WasmPlugin>, WasmError> {
        Self::load_with(name, args, seed, GuestHandle::default())
    }

    /// `load` for a profile: the guest reaches the profile's waiting pods and the scheduler's pod view of `ctx`.
    pub fn load_in(name: &str, args: WasmArgs, ctx: &PluginContext) -> Result<Arc<WasmPlugin>, WasmError> {
        Self::load_with(name, args, ctx.seed, GuestHandle::of(ctx))
    }

    /// `load_in` for a tenant's policy: with `namespace`, its guest sees other namespaces' pods only anonymously and
    /// can act only on its own namespace's waiting pods (`host::TenantScope`).
    pub fn load_for_tenant(
        name: &str,
        args: WasmArgs,
        ctx: &PluginContext,
        namespace: Option<&str>,
    ) -> Result<Arc<WasmPlugin>, WasmError> {
        let handle = GuestHandle::of(ctx);
        let handle = match namespace {
            Some(ns) => handle.scoped(ns),
            None => handle,
        };
        Self::load_with(name, args, ctx.seed, handle)
    }

    fn load_with(name: &str, args: WasmArgs, seed: u64, handle: GuestHandle) -> Result<Arc<WasmPlugin>, WasmError> {
        let p = Self::load_unvalidated(name, args, seed, handle)?;
        p.validate_config(&p.current())?;
        p.ready_version(&p.current())?;
        Ok(p)
    }

    /// Loads the component without asking the guest about its configuration (`plugin check` describes a file).
    pub(super) fn load_unvalidated(
        name: &str,
        args: WasmArgs,
        seed: u64,
        handle: GuestHandle,
    ) -> Result<Arc<WasmPlugin>, WasmError> {
        let watched = args.component.as_path().and_then(file_stamp);
        let version = load_version(&args)?;
        let precompiled = version.origin == super::engine::Origin::Precompiled;
        let adapted = version.adapted;
        let revision = version.revision;
        let loaded = Loaded::new(version.component, version.digest)?;
        let stats = Arc::new(WasmStats::default());
        let state_key = format!("wasm/{name}");
        let name: Arc<str> = Arc::from(name);
        let p = Arc::new(WasmPlugin {
            log: Arc::new(GuestLog::new(name.clone(), stats.clone())),
            breaker: Breaker::new(args.circuit_breaker),
            queued_pods: QueuedPodCache::default(),
            handle,
            name,
            state_key,
            args,
            current: RwLock::new(Arc::new(loaded)),
            rng: Arc::new(Mutex::new(Rng::new(seed ^ 0x5_EED0_F7A5))),
            watched: Mutex::new(watched),
            revision: Mutex::new(revision),
            stats,
        });
        p.stats.loads.fetch_add(1, Ordering::Relaxed);
        p.stats.previous_contract.store(adapted, Ordering::Relaxed);
        if precompiled {
            p.stats.precompiled_loads.fetch_add(1, Ordering::Relaxed);
        }
        let mut all = LOADED.lock().expect("loaded plugins lock");
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&p));
        Ok(p)
    }

    /// The extension points the current version serves.
    pub fn points(&self) -> Vec<&'static str> {
        self.current().points()
    }

    /// Where this plugin's component comes from.
    pub fn component(&self) -> &Source {
        &self.args.component
    }

    /// SHA-256 of the version serving now.
    pub fn digest(&self) -> String {
        self.current().digest.clone()
    }

    /// The version serving now.
    pub(super) fn current(&self) -> Arc<Loaded> {
        self.current.read().expect("current version lock").clone()
    }

    /// The cycle's data for this plugin, or a fresh one on the current version for a call outside a cycle.
    pub(super) fn ctx(&self, state: Option<&CycleState>) -> CycleCtx {
        state
            .and_then(|s| s.read::<CycleCtx>(&self.state_key))
            .cloned()
            .unwrap_or_else(|| CycleCtx::new(self.current()))
    }
}

/// A Wasm plugin whose component could not be loaded at start, with `failurePolicy: Ignore`: it serves no
/// extension point, and the profile runs without it.
#[derive(Debug)]
pub struct Unavailable {
    name: String,
    reason: String,
}

impl Unavailable {
    /// The plugin `name`, unavailable for `reason`.
    pub fn new(name: &str, reason: String) -> Unavailable {
        Unavailable { name: name.to_string(), reason }
    }
}

impl crate::framework::Plugin for Unavailable {
    fn name(&self) -> &str {
        &self.name
    }
    fn unavailable(&self) -> Option<&str> {
        Some(&self.reason)
    }
}
