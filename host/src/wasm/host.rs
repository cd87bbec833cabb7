//! What a guest may reach: the `kws:plugin/host` imports (log, config, random, clock, cycle state, cycle pod) and
//! a WASI context with no files, network or environment. One `HostState` lives in each instance's `Store`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime::StoreLimits;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::kws::plugin::{host, types as wit};
use super::engine::{first_line, WasmEngine};
use super::instance::CyclePod;
use super::output::{GuestLog, GuestOutput, Source};
use super::{ComponentInfo, WasmError, WasmStats};
use crate::framework::pod_view::{KnownPod, PodView};
use crate::framework::rng::Rng;
use crate::framework::waiting_pods::{WaitingPod, WaitingPods};
use crate::framework::{PluginContext, PodInfo};

/// The log level of a guest's `host.log` line.
fn tracing_level(level: host::Level) -> tracing::Level {
    match level {
        host::Level::Debug => tracing::Level::DEBUG,
        host::Level::Info => tracing::Level::INFO,
        host::Level::Warn => tracing::Level::WARN,
        host::Level::Error => tracing::Level::ERROR,
    }
}

/// A plugin's private cycle state (`host.cycle-state-write` / `-read`), shared by the instances of one cycle.
pub(super) type GuestCycleState = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// What the framework shares with a plugin's guests: its profile's waiting pods and the scheduler's pod view, and
/// for a tenant's policy the namespace that bounds what it sees.
#[derive(Clone, Default)]
pub(crate) struct GuestHandle {
    pub(super) waiting: Arc<WaitingPods>,
    pub(super) pods: Arc<PodView>,
    pub(super) scope: Option<Arc<TenantScope>>,
}

impl GuestHandle {
    /// The profile's waiting pods and the pod view of a plugin context.
    pub(crate) fn of(ctx: &PluginContext) -> GuestHandle {
        GuestHandle { waiting: ctx.waiting.clone(), pods: ctx.pods.clone(), scope: None }
    }

    /// The same, seen from a tenant's namespace.
    pub(crate) fn scoped(mut self, namespace: &str) -> GuestHandle {
        self.scope = Some(Arc::new(TenantScope::new(namespace)));
        self
    }

    /// Whether the guest may see this pod whole (and act on it, when it waits at Permit).
    fn visible(&self, pod: &PodInfo) -> bool {
        self.scope.as_ref().is_none_or(|s| s.owns(pod))
    }
}

/// What a tenant's guest may see of the cluster: its own namespace's pods whole; other namespaces' pods only as
/// usage on a node (requests, limits, QoS, priority, node and state), under a UID of its own that cannot be turned
/// back into the pod's (a keyed hash, the key drawn per policy load), with no name, namespace, labels,
/// annotations, tolerations or affinity.
#[derive(Debug)]
pub(crate) struct TenantScope {
    namespace: String,
    key: [u8; 16],
}

impl TenantScope {
    fn new(namespace: &str) -> TenantScope {
        let mut key = [0u8; 16];
        // A fresh key per load: the anonymous UIDs of one policy version cannot be matched with another's either.
        // Should the system's source fail, the clock stands in: the key only has to be unknown to the guest.
        if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key).is_err() {
            let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
            key = now.to_le_bytes();
        }
        TenantScope { namespace: namespace.to_string(), key }
    }

    /// Whether `pod` is of the tenant's namespace.
    pub(super) fn owns(&self, pod: &PodInfo) -> bool {
        pod.namespace == self.namespace
    }

    /// The UID the tenant knows another namespace's pod by.
    pub(super) fn uid(&self, uid: &str) -> String {
        let mut input = self.key.to_vec();
        input.extend_from_slice(uid.as_bytes());
        let d = ring::digest::digest(&ring::digest::SHA256, &input);
        let hex: String = d.as_ref()[..12].iter().map(|b| format!("{b:02x}")).collect();
        format!("anonymous-{hex}")
    }

    /// Another namespace's pod as the tenant sees it.
    pub(super) fn anonymous(&self, k: &KnownPod) -> wit::KnownPod {
        let pod = wit::Pod { uid: self.uid(&k.pod.uid), ..super::convert::pod_usage(&k.pod) };
        super::convert::known_pod_as(k, pod)
    }
}

/// The data of one instance's `Store`: its config, a random source, this cycle's state, its
/// limits and its captured output.
pub(crate) struct HostState {
    pub(super) config: Arc<str>,
    pub(super) rng: Arc<Mutex<Rng>>,
    /// Set for the length of one call: the instances of a cycle share it.
    pub(super) cycle: Option<GuestCycleState>,
    /// The cycle's pod during Filter, Score and NormalizeScore calls (`host.cycle-pod`).
    pub(super) pod: Option<CyclePod>,
    /// The cycle of the call in progress (`host.cycle-id`; 0 outside one).
    pub(super) cycle_id: u64,
    pub(super) limits: StoreLimits,
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) stdout: GuestOutput,
    pub(super) stderr: GuestOutput,
    /// The plugin's rate-limited log, shared by its instances.
    pub(super) log: Arc<GuestLog>,
    /// While `config.validate` runs: `host.log` lines held back, written only if the guest accepts its
    /// configuration (a refusal is reported once, as the load error, not also as the guest's own log lines).
    pub(super) held: Option<Vec<(Source, String)>>,
    /// The plugin's name: whom `allow-waiting-pod` and `reject-waiting-pod` act for by default.
    pub(super) plugin: Arc<str>,
    pub(super) handle: GuestHandle,
    /// The plugin's counters (`pod-ref.get` counts the pods a guest copies from a lent one).
    pub(super) stats: Arc<WasmStats>,
}

/// The host side of `host.pod-ref`: the pod a by-reference call passes (`post-bind-ref`, `sort-key-ref`), shared
/// with the framework. The adapter puts it in the instance's table for the length of one call.
pub struct PodRef(pub(super) Arc<PodInfo>);

impl HostState {
    /// The pod behind a handle the guest passed back.
    fn pod_ref(&self, r: &Resource<PodRef>) -> wasmtime::Result<&PodInfo> {
        Ok(&self.table.get(r)?.0)
    }

    /// The waiting pod with this UID the guest may act on, and the plugin it acts for: any plugin's name for the
    /// platform's guests (upstream's `WaitingPod.Allow(pluginName)`), only its own for a tenant's, whose pods may
    /// also wait on the platform's Permit plugins (a tenant that allowed them on their behalf would skip them).
    fn waiting_pod_for(&self, uid: &str, plugin: Option<String>) -> Option<(Arc<WaitingPod>, String)> {
        let plugin = plugin.unwrap_or_else(|| self.plugin.to_string());
        if self.handle.scope.is_some() && plugin != *self.plugin {
            return None;
        }
        let w = self.handle.waiting.get(uid).filter(|w| self.handle.visible(w.pod()))?;
        Some((w, plugin))
    }
}

impl host::HostPodRef for HostState {
    fn uid(&mut self, r: Resource<PodRef>) -> wasmtime::Result<String> {
        Ok(self.pod_ref(&r)?.uid.clone())
    }
    fn namespace(&mut self, r: Resource<PodRef>) -> wasmtime::Result<String> {
        Ok(self.pod_ref(&r)?.namespace.clone())
    }
    fn name(&mut self, r: Resource<PodRef>) -> wasmtime::Result<String> {
        Ok(self.pod_ref(&r)?.name.clone())
    }
    fn priority(&mut self, r: Resource<PodRef>) -> wasmtime::Result<i32> {
        Ok(self.pod_ref(&r)?.priority)
    }
    fn qos_class(&mut self, r: Resource<PodRef>) -> wasmtime::Result<wit::QosClass> {
        Ok(super::convert::qos_class(self.pod_ref(&r)?.qos))
    }
    fn label(&mut self, r: Resource<PodRef>, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.pod_ref(&r)?.pod.metadata.labels.as_ref().and_then(|m| m.get(&key)).cloned())
    }
    fn annotation(&mut self, r: Resource<PodRef>, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.pod_ref(&r)?.pod.metadata.annotations.as_ref().and_then(|m| m.get(&key)).cloned())
    }
    fn get(&mut self, r: Resource<PodRef>) -> wasmtime::Result<wit::Pod> {
        let pod = super::convert::pod(self.pod_ref(&r)?);
        self.stats.pods_fetched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(pod)
    }
    fn drop(&mut self, r: Resource<PodRef>) -> wasmtime::Result<()> {
        // Only an owned handle's drop reaches the host, and the host lends pods only as borrows; the adapter that
        // put the pod in the table takes it out when its call returns.
        self.table.delete(r)?;
        Ok(())
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: host::Level, message: String) {
        let level = tracing_level(level);
        for line in message.lines() {
            match &mut self.held {
                Some(held) => held.push((Source::Log(level), line.to_string())),
                None => self.log.line(Source::Log(level), line),
            }
        }
    }
    fn log_enabled(&mut self, level: host::Level) -> bool {
        // Lines held while the configuration is validated are written later at their own level: the same answer.
        super::output::enabled(Source::Log(tracing_level(level)))
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
    fn cycle_id(&mut self) -> u64 {
        self.cycle_id
    }
    fn cycle_pod(&mut self) -> Option<wit::Pod> {
        self.pod.as_ref().map(|p| (*p.get()).clone())
    }
    fn waiting_pods(&mut self) -> Vec<wit::WaitingPod> {
        let mut v: Vec<wit::WaitingPod> = self
            .handle
            .waiting
            .list()
            .iter()
            .filter(|w| self.handle.visible(w.pod()))
            .filter_map(|w| {
                // A pod whose verdict is known is leaving: not waiting any more.
                let pending_plugins = w.pending_plugins();
                (!pending_plugins.is_empty()).then(|| wit::WaitingPod {
                    pod: super::convert::pod(w.pod()),
                    node: w.node().to_string(),
                    pending_plugins,
                })
            })
            .collect();
        // Repeatable for the guest (the map has no order).
        v.sort_by(|a, b| a.pod.uid.cmp(&b.pod.uid));
        v
    }
    fn allow_waiting_pod(&mut self, uid: String, plugin: Option<String>) -> bool {
        let Some((w, plugin)) = self.waiting_pod_for(&uid, plugin) else { return false };
        w.allow(&plugin);
        true
    }
    fn reject_waiting_pod(&mut self, uid: String, plugin: Option<String>, reason: String) -> bool {
        let Some((w, plugin)) = self.waiting_pod_for(&uid, plugin) else { return false };
        w.reject(&plugin, &reason);
        true
    }
    fn scheduling_group(&mut self, pod_uid: String) -> Option<String> {
        // A tenant's guest learns nothing of another namespace's pods (it never sees their UIDs anyway).
        let pod = self.handle.pods.pod_group_member(&pod_uid).filter(|p| self.handle.visible(p))?;
        pod.pod_group().map(str::to_string)
    }
}

impl wit::Host for HostState {}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A linker offering the contract's host imports, and WASI only to a component that imports it.
pub(super) fn linker_for(info: &ComponentInfo) -> Result<Linker<HostState>, WasmError> {
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
