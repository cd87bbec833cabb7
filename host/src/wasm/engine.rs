//! The process's one wasmtime `Engine`: configured once, its epoch clock turning wall-clock deadlines into
//! epochs (`epoch.rs`), and components compiled once per content digest (in memory, and on disk through the plugin
//! cache).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use super::cache::PluginCache;
use super::epoch::Ticker;
use super::WasmError;

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled earlier in this process.
    Memory,
    /// Loaded precompiled from the plugin cache on disk: no compile.
    Precompiled,
    /// Compiled now (and written to the plugin cache).
    Compiled,
}

/// The shared engine and its compile cache.
pub struct WasmEngine {
    engine: Engine,
    ticker: Arc<Ticker>,
    compiled: Mutex<HashMap<String, Component>>,
}

impl WasmEngine {
    /// The process-wide engine (created, with its epoch thread, on first use).
    pub fn shared() -> &'static WasmEngine {
        static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
        ENGINE.get_or_init(|| {
            let mut config = Config::new();
            config.wasm_component_model(true);
            config.epoch_interruption(true);
            // For profiling guests with `perf`: KWS_WASM_PERFMAP=1 writes /tmp/perf-<pid>.map naming JIT code.
            if std::env::var_os("KWS_WASM_PERFMAP").is_some_and(|v| v == "1") {
                config.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
            let engine = Engine::new(&config).expect("the engine configuration is valid");
            let ticker = Arc::new(Ticker::default());
            ticker.start(engine.clone(), "wasm-epoch").expect("spawn the epoch thread");
            WasmEngine { engine, ticker, compiled: Mutex::new(HashMap::new()) }
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Epochs for a call that begins now under `deadline` (never less than the deadline; wakes the epoch thread
    /// if it slept), for `Store::set_epoch_deadline`.
    pub fn deadline(deadline: Duration) -> u64 {
        Self::shared().ticker.deadline(deadline)
    }

    /// Compiles a component, or returns the one already compiled from the same bytes. Returns it with the bytes'
    /// SHA-256 (hex).
    pub fn compile(&self, bytes: &[u8]) -> Result<(Component, String), WasmError> {
        let digest = sha256_hex(bytes);
        let (c, _, _) = self.compile_digest(bytes, &digest)?;
        Ok((c, digest))
    }

    /// Compiles bytes whose SHA-256 is `digest` (the caller computed it), or returns them compiled: from this
    /// process, or precompiled from the plugin cache, which keeps what is compiled here for the next start. The
    /// flag says whether the component was built for the previous contract (served through the adapter).
    pub fn compile_digest(&self, bytes: &[u8], digest: &str) -> Result<(Component, Origin, bool), WasmError> {
        // A component of the previous contract is compiled adapted, and kept under the adapted bytes' digest: an
        // artifact compiled from its own bytes (by a host without the adapter) must never stand in for it.
        let adapted = super::adapt_previous_contract(bytes);
        let adapted_digest = adapted.as_deref().map(sha256_hex);
        let digest = adapted_digest.as_deref().unwrap_or(digest);
        if let Some(c) = self.compiled.lock().expect("compile cache lock").get(digest) {
            return Ok((c.clone(), Origin::Memory, adapted.is_some()));
        }
        let cache = PluginCache::shared();
        let start = Instant::now();
        if let Some(c) = cache.and_then(|cache| cache.compiled(&self.engine, digest)) {
            tracing::info!(
                digest,
                ms = start.elapsed().as_millis() as u64,
                "component loaded precompiled from the plugin cache (no compile)"
            );
            self.compiled.lock().expect("compile cache lock").insert(digest.to_string(), c.clone());
            return Ok((c, Origin::Precompiled, adapted.is_some()));
        }
        if is_core_module(bytes) {
            return Err(WasmError::NotAComponent(
                "a core WebAssembly module, not a component (wrap it with `kube-wasm-scheduler plugin componentize`)"
                    .into(),
            ));
        }
        if adapted.is_some() {
            tracing::warn!(
                digest,
                "component built for contract kws:plugin@{} served through the adapter: rebuild it against {}",
                super::PREVIOUS_CONTRACT_VERSION,
                super::CONTRACT_VERSION
            );
        }
        let component = Component::new(&self.engine, adapted.as_deref().unwrap_or(bytes))
            .map_err(|e| WasmError::NotAComponent(first_line(&e)))?;
        tracing::info!(digest, bytes = bytes.len(), ms = start.elapsed().as_millis() as u64, "component compiled");
        if let Some(cache) = cache {
            cache.put_compiled(&self.engine, digest, &component);
        }
        self.compiled.lock().expect("compile cache lock").insert(digest.to_string(), component.clone());
        Ok((component, Origin::Compiled, adapted.is_some()))
    }
}

/// SHA-256 of bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A core module starts with the magic and version 1; a component with the magic and a layer-1 version.
/// A core module (not a component): the preamble's version is 1 and its layer 0.
pub(crate) fn is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}

/// The first line of an error chain, for one-line messages.
pub(crate) fn first_line(e: &dyn std::fmt::Display) -> String {
    let s = format!("{e:#}");
    s.lines().next().unwrap_or("").to_string()
}
