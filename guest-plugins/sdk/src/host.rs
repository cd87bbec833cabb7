//! What the scheduler offers a plugin: logging, configuration, randomness, time, per-cycle state and the pods
//! waiting at Permit (upstream's `framework.Handle`: `IterateOverWaitingPods`, `GetWaitingPod`).
//!
//! Inside a component these call the host's `kws:plugin/host` imports. Compiled natively (for a plugin's unit
//! tests) they are simulated in-process, per thread; see [`crate::testing`].

pub use crate::bindings::kws::plugin::host::Level;

/// Writes `message` to the scheduler's log at `level`, tagged with the plugin's name. See also the
/// [`info!`](crate::info)-style macros.
pub fn log(level: Level, message: &str) {
    imp::log(level, message)
}

/// Whether a line logged at `level` would be written at the scheduler's verbosity. The [`info!`](crate::info)-style
/// macros ask before they format their message, so a message nobody reads costs one short host call.
pub fn log_enabled(level: Level) -> bool {
    imp::log_enabled(level)
}

/// The plugin's configuration as JSON text (`{}` when none is given). The SDK already parses it once and hands
/// it to [`Plugin::new`](crate::Plugin::new).
pub fn config() -> String {
    imp::config()
}

/// 64 random bits from the scheduler's generator (seeded in the simulator, so runs repeat).
pub fn random_u64() -> u64 {
    imp::random()
}

/// A random number in `0..n` (0 when `n` is 0), from [`random_u64`].
pub fn random_below(n: u64) -> u64 {
    // Lemire's multiply-shift: the bias is below n / 2^64.
    ((u128::from(random_u64()) * u128::from(n)) >> 64) as u64
}

/// Wall-clock time, nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    imp::now_ns()
}

thread_local! {
    /// The cycle state read during the batched call in progress (Filter, Score, NormalizeScore); `None` outside one.
    static BATCH_READS: std::cell::RefCell<Option<std::collections::HashMap<String, Option<Vec<u8>>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs one batched call (Filter, Score or NormalizeScore over many nodes). Nothing else writes the plugin's cycle
/// state while it runs, so a key is read from the host once per batch, however many nodes read it.
pub(crate) fn in_batch<R>(f: impl FnOnce() -> R) -> R {
    BATCH_READS.with(|r| *r.borrow_mut() = Some(Default::default()));
    let out = f();
    BATCH_READS.with(|r| *r.borrow_mut() = None);
    out
}

/// Stores `value` under `key` for the rest of this pod's scheduling cycle (keys are private to the plugin).
pub fn cycle_state_write(key: &str, value: &[u8]) {
    imp::cycle_state_write(key, value);
    BATCH_READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.insert(key.to_string(), Some(value.to_vec()));
        }
    });
}

/// Reads what was stored under `key` earlier in this pod's scheduling cycle. Within a Filter or Score batch the
/// host is asked once per key: reading it for every node costs no more crossings than reading it once.
pub fn cycle_state_read(key: &str) -> Option<Vec<u8>> {
    if let Some(hit) = BATCH_READS.with(|r| r.borrow().as_ref().and_then(|reads| reads.get(key).cloned())) {
        return hit;
    }
    let value = imp::cycle_state_read(key);
    BATCH_READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.insert(key.to_string(), value.clone());
        }
    });
    value
}

/// The pods of this plugin's profile waiting at Permit, in no order (upstream's `IterateOverWaitingPods`). Each
/// call copies them across the boundary: call it once per decision.
pub fn waiting_pods() -> Vec<crate::WaitingPod> {
    imp::waiting_pods()
}

/// Allows the waiting pod with this UID on behalf of this plugin (upstream's `WaitingPod.Allow(pluginName)`):
/// once every Permit plugin that answered Wait has allowed it, it goes on to binding. False when no pod with that
/// UID waits.
pub fn allow_waiting_pod(uid: &str) -> bool {
    imp::allow_waiting_pod(uid, None)
}

/// Allows the waiting pod with this UID on behalf of the Permit plugin named `plugin` (a plugin that coordinates
/// others'). False when no pod with that UID waits.
pub fn allow_waiting_pod_for(uid: &str, plugin: &str) -> bool {
    imp::allow_waiting_pod(uid, Some(plugin))
}

/// Rejects the waiting pod with this UID on behalf of this plugin (upstream's `WaitingPod.Reject`): its binding
/// cycle fails as Unschedulable with `reason`, Unreserve runs, and it goes back to the queue. False when no pod
/// with that UID waits.
pub fn reject_waiting_pod(uid: &str, reason: &str) -> bool {
    imp::reject_waiting_pod(uid, None, reason)
}

/// Rejects the waiting pod with this UID on behalf of the Permit plugin named `plugin`. False when no pod with that
/// UID waits.
pub fn reject_waiting_pod_for(uid: &str, plugin: &str, reason: &str) -> bool {
    imp::reject_waiting_pod(uid, Some(plugin), reason)
}

/// The pod group of the pod with this UID (`host.scheduling-group`): `spec.schedulingGroup.podGroupName`, a
/// PodGroup of the Workload API in the pod's namespace; `None` when it names none or the scheduler does not know the
/// pod. Needs a scheduler that offers it (contract 0.2.1 on, where `scheduling-group` was first versioned).
pub fn scheduling_group(pod_uid: &str) -> Option<String> {
    imp::scheduling_group(pod_uid)
}

/// The pod of the cycle in progress (`host.cycle-pod`): `None` outside Filter, Score and NormalizeScore. Plugins
/// get it as the [`CyclePod`](crate::CyclePod) their methods receive, which calls this once per cycle at most.
pub(crate) fn cycle_pod() -> Option<crate::Pod> {
    imp::cycle_pod()
}

/// The scheduling cycle of the call in progress (`host.cycle-id`, 0 outside one).
pub(crate) fn cycle_id() -> u64 {
    imp::cycle_id()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Level;
    use crate::bindings::kws::plugin::host as h;

    pub fn log(level: Level, message: &str) {
        h::log(level, message)
    }
    pub fn log_enabled(level: Level) -> bool {
        h::log_enabled(level)
    }
    pub fn config() -> String {
        h::config()
    }
    pub fn random() -> u64 {
        h::random()
    }
    pub fn now_ns() -> u64 {
        h::now_ns()
    }
    pub fn cycle_state_write(key: &str, value: &[u8]) {
        h::cycle_state_write(key, value)
    }
    pub fn cycle_state_read(key: &str) -> Option<Vec<u8>> {
        h::cycle_state_read(key)
    }
    pub fn cycle_pod() -> Option<crate::Pod> {
        h::cycle_pod()
    }
    pub fn cycle_id() -> u64 {
        h::cycle_id()
    }
    pub fn waiting_pods() -> Vec<crate::WaitingPod> {
        h::waiting_pods()
    }
    pub fn allow_waiting_pod(uid: &str, plugin: Option<&str>) -> bool {
        h::allow_waiting_pod(uid, plugin)
    }
    pub fn reject_waiting_pod(uid: &str, plugin: Option<&str>, reason: &str) -> bool {
        h::reject_waiting_pod(uid, plugin, reason)
    }
    pub fn scheduling_group(pod_uid: &str) -> Option<String> {
        h::scheduling_group(pod_uid)
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod imp {
    //! In-process stand-ins for the host imports, one set per thread (each Rust test runs on its own thread).

    use super::Level;
    use crate::WaitingPod;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// The name the simulated host gives the plugin under test (the `plugin` of an allow or reject on its own
    /// behalf).
    pub const PLUGIN_NAME: &str = "plugin-under-test";

    /// A call the plugin made on a waiting pod, as the simulated host recorded it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum WaitingPodCall {
        /// `allow-waiting-pod`.
        Allow {
            /// The pod's UID.
            uid: String,
            /// On whose behalf: [`PLUGIN_NAME`] when the plugin allowed it for itself.
            plugin: String,
            /// What the host answered (false: no such pod was waiting).
            found: bool,
        },
        /// `reject-waiting-pod`.
        Reject {
            /// The pod's UID.
            uid: String,
            /// On whose behalf: [`PLUGIN_NAME`] when the plugin rejected it for itself.
            plugin: String,
            /// The reason given.
            reason: String,
            /// What the host answered (false: no such pod was waiting).
            found: bool,
        },
    }

    /// The simulated host's state.
    pub(crate) struct FakeHost {
        /// What `config()` returns.
        pub config: String,
        /// Everything logged, in order.
        pub logs: Vec<(Level, String)>,
        /// The lowest level `log_enabled` answers true for (every level by default).
        pub log_level: Level,
        /// xorshift64* state.
        pub rng: u64,
        /// Cycle state.
        pub cycle: HashMap<String, Vec<u8>>,
        /// What `cycle_id()` returns: one more at each [`crate::testing::begin`].
        pub cycle_id: u64,
        /// What `cycle_pod()` returns.
        pub pod: Option<crate::Pod>,
        /// How often the plugin asked for the cycle's pod.
        pub pod_fetches: u32,
        /// How often the plugin read the cycle state from the host.
        pub cycle_state_reads: u32,
        /// The pods waiting at Permit.
        pub waiting: Vec<WaitingPod>,
        /// Every allow and reject, in order.
        pub waiting_calls: Vec<WaitingPodCall>,
        /// What `scheduling_group` answers, by pod UID.
        pub scheduling_groups: HashMap<String, String>,
    }

    impl Default for FakeHost {
        fn default() -> Self {
            Self {
                config: "{}".to_string(),
                logs: Vec::new(),
                log_level: Level::Debug,
                rng: 0x9E37_79B9_7F4A_7C15,
                cycle: HashMap::new(),
                pod: None,
                pod_fetches: 0,
                cycle_id: 0,
                cycle_state_reads: 0,
                waiting: Vec::new(),
                waiting_calls: Vec::new(),
                scheduling_groups: HashMap::new(),
            }
        }
    }

    thread_local! {
        pub(crate) static HOST: RefCell<FakeHost> = RefCell::new(FakeHost::default());
    }

    pub fn log(level: Level, message: &str) {
        HOST.with(|h| h.borrow_mut().logs.push((level, message.to_string())))
    }
    pub fn log_enabled(level: Level) -> bool {
        HOST.with(|h| level as u8 >= h.borrow().log_level as u8)
    }
    pub fn config() -> String {
        HOST.with(|h| h.borrow().config.clone())
    }
    pub fn random() -> u64 {
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            let mut x = h.rng;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            h.rng = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
    }
    pub fn now_ns() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    }
    pub fn cycle_state_write(key: &str, value: &[u8]) {
        HOST.with(|h| h.borrow_mut().cycle.insert(key.to_string(), value.to_vec()));
    }
    pub fn cycle_state_read(key: &str) -> Option<Vec<u8>> {
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            h.cycle_state_reads += 1;
            h.cycle.get(key).cloned()
        })
    }
    pub fn cycle_pod() -> Option<crate::Pod> {
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            h.pod_fetches += 1;
            h.pod.clone()
        })
    }
    pub fn cycle_id() -> u64 {
        HOST.with(|h| h.borrow().cycle_id)
    }
    pub fn scheduling_group(pod_uid: &str) -> Option<String> {
        HOST.with(|h| h.borrow().scheduling_groups.get(pod_uid).cloned())
    }
    pub fn waiting_pods() -> Vec<WaitingPod> {
        HOST.with(|h| h.borrow().waiting.clone())
    }
    /// As the scheduler does: the plugin leaves the pod's pending list, and a pod nobody holds any more goes on to
    /// binding (leaves the list).
    pub fn allow_waiting_pod(uid: &str, plugin: Option<&str>) -> bool {
        let plugin = plugin.unwrap_or(PLUGIN_NAME).to_string();
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            let at = h.waiting.iter().position(|w| w.pod.uid == uid);
            if let Some(at) = at {
                h.waiting[at].pending_plugins.retain(|p| *p != plugin);
                if h.waiting[at].pending_plugins.is_empty() {
                    h.waiting.remove(at);
                }
            }
            h.waiting_calls.push(WaitingPodCall::Allow { uid: uid.to_string(), plugin, found: at.is_some() });
            at.is_some()
        })
    }
    /// As the scheduler does: the pod leaves the list (its binding cycle fails).
    pub fn reject_waiting_pod(uid: &str, plugin: Option<&str>, reason: &str) -> bool {
        let plugin = plugin.unwrap_or(PLUGIN_NAME).to_string();
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            let at = h.waiting.iter().position(|w| w.pod.uid == uid);
            if let Some(at) = at {
                h.waiting.remove(at);
            }
            let call = WaitingPodCall::Reject {
                uid: uid.to_string(),
                plugin,
                reason: reason.to_string(),
                found: at.is_some(),
            };
            h.waiting_calls.push(call);
            at.is_some()
        })
    }
}

/// Logs a `format!`-style message at debug level: `kws_plugin_sdk::debug!("x = {x}")`.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => {
        if $crate::host::log_enabled($crate::host::Level::Debug) {
            $crate::host::log($crate::host::Level::Debug, &::std::format!($($arg)+))
        }
    };
}

/// Logs a `format!`-style message at info level: `kws_plugin_sdk::info!("x = {x}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => {
        if $crate::host::log_enabled($crate::host::Level::Info) {
            $crate::host::log($crate::host::Level::Info, &::std::format!($($arg)+))
        }
    };
}

/// Logs a `format!`-style message at warn level: `kws_plugin_sdk::warn!("x = {x}")`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => {
        if $crate::host::log_enabled($crate::host::Level::Warn) {
            $crate::host::log($crate::host::Level::Warn, &::std::format!($($arg)+))
        }
    };
}

/// Logs a `format!`-style message at error level: `kws_plugin_sdk::error!("x = {x}")`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => {
        if $crate::host::log_enabled($crate::host::Level::Error) {
            $crate::host::log($crate::host::Level::Error, &::std::format!($($arg)+))
        }
    };
}
