//! Loading a component (fetched from its source, with its digest) and hot reload: a changed file, or an OCI tag
//! that moved, is compiled and checked off the hot path and swapped in, while cycles that began on the previous
//! version finish on it. A version that cannot serve is refused, reported, and the running one keeps serving.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use wasmtime::component::Component;

use super::args::WasmArgs;
use super::engine::{Origin, WasmEngine};
use super::instance::Loaded;
use super::plugin::{notify_refusal, RefusedVersion};
use super::source::{self, Fetched, Source};
use super::{WasmError, WasmPlugin};

/// What identifies a version of the file without reading it: its canonical path, modification time and size.
pub(super) type FileStamp = (PathBuf, SystemTime, u64);

/// A version of a plugin's component, fetched and compiled.
pub(crate) struct Version {
    /// The compiled component.
    pub(crate) component: Component,
    /// SHA-256 of its bytes, hex.
    pub(crate) digest: String,
    /// For an OCI source, the manifest digest it came from.
    pub(crate) revision: Option<String>,
    /// Whether it was compiled now or loaded compiled.
    pub(crate) origin: Origin,
    /// Whether it was built for the previous contract (served through the adapter).
    pub(crate) adapted: bool,
}

/// Fetches a plugin's component from its source (pin and pull policy applied) and compiles it.
pub(crate) fn load_version(args: &WasmArgs) -> Result<Version, WasmError> {
    compile(&source::fetch(&args.component, args.sha256.as_deref(), &args.pull)?)
}

/// Compiles fetched bytes (borrowed: an accepted OCI version's bytes go on to the plugin cache).
fn compile(fetched: &Fetched) -> Result<Version, WasmError> {
    let (component, origin, adapted) = WasmEngine::shared().compile_digest(&fetched.bytes, &fetched.digest)?;
    Ok(Version { component, digest: fetched.digest.clone(), revision: fetched.revision.clone(), origin, adapted })
}

/// The file's stamp, or `None` while it cannot be read.
pub(super) fn file_stamp(path: &Path) -> Option<FileStamp> {
    // Canonical path: a ConfigMap's `..data` symlink swap changes it even when size and time would not.
    let canon = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canon).ok()?;
    Some((canon, meta.modified().ok()?, meta.len()))
}

impl WasmPlugin {
    /// Checks the component file: when it changed, compiles and checks the new version off the hot path and swaps
    /// it in. A file that cannot serve the same points keeps the old version serving and is reported. Returns
    /// `Ok(true)` when a new version was swapped in. A remote source is checked by `recheck`.
    pub fn reload_if_changed(&self) -> Result<bool, WasmError> {
        let Some(path) = self.args.component.as_path() else { return Ok(false) };
        let stamp = file_stamp(path);
        {
            let mut w = self.watched.lock().expect("watch lock");
            if stamp.is_none() || *w == stamp {
                return Ok(false);
            }
            *w = stamp;
        }
        // The profile's pin holds for every version: a file that does not match is refused like any bad one.
        let result = load_version(&self.args).and_then(|v| self.swap_in(v));
        self.report(result)
    }

    /// Resolves an OCI tag again: when it moved, pulls, compiles and checks the version it points at now off the
    /// hot path and swaps it in. An unreachable registry, a failed pull, a digest that does not match the pin or a
    /// tag that now names something that is not a component is refused and reported, and the running version keeps
    /// serving. Returns `Ok(true)` when a new version was swapped in.
    pub fn recheck(&self) -> Result<bool, WasmError> {
        let Source::Oci(r) = &self.args.component else { return Ok(false) };
        if !r.is_tag() {
            return Ok(false);
        }
        let result = (|| {
            let now = source::oci::resolve(r, &self.args.pull)?;
            if self.revision.lock().expect("revision lock").as_deref() == Some(now.as_str()) {
                return Ok(false);
            }
            let fetched = source::oci::fetch_revision(r, &self.args.pull, &now)?;
            // Once pulled, a version is judged once: a refused one is not pulled again at every re-check (a failed
            // pull is retried), only a further move of the tag is.
            *self.revision.lock().expect("revision lock") = Some(now);
            source::check_pin(&self.args.component, self.args.sha256.as_deref(), &fetched.digest)?;
            let swapped = self.swap_in(compile(&fetched)?)?;
            // Only an accepted version becomes what the tag means in the cache (an `IfNotPresent` restart uses it).
            source::oci::remember(r, &fetched);
            Ok(swapped)
        })();
        self.report(result)
    }

    /// Swaps a checked version in, unless it is the one serving.
    fn swap_in(&self, v: Version) -> Result<bool, WasmError> {
        if v.digest == self.current().digest {
            return Ok(false);
        }
        let loaded = Loaded::new(v.component, v.digest)?;
        let (old, new) = (self.points(), loaded.points());
        if old != new {
            return Err(WasmError::Contract(format!("the new version serves {new:?}, the running one {old:?}")));
        }
        self.validate_config(&loaded)?;
        let loaded = Arc::new(loaded);
        self.ready_version(&loaded)?;
        if v.origin == Origin::Precompiled {
            self.stats.precompiled_loads.fetch_add(1, Ordering::Relaxed);
        }
        self.stats.previous_contract.store(v.adapted, Ordering::Relaxed);
        *self.current.write().expect("current version lock") = loaded;
        Ok(true)
    }

    /// Logs and counts the outcome of a reload.
    fn report(&self, result: Result<bool, WasmError>) -> Result<bool, WasmError> {
        match &result {
            Ok(true) => {
                self.stats.reloads.fetch_add(1, Ordering::Relaxed);
                self.stats.loads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(plugin = &*self.name, source = %self.args.component, digest = %self.digest(), "wasm plugin reloaded");
            }
            Ok(false) => {}
            Err(e) => {
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                notify_refusal(&RefusedVersion { plugin: &self.name, source: &self.args.component, error: e });
                tracing::error!(plugin = &*self.name, source = %self.args.component, error = %e, "wasm plugin reload refused; the previous version keeps serving");
            }
        }
        result
    }

    /// Polls the component file every `period` (and re-checks an OCI tag every `recheckInterval`, when set) on a
    /// background thread until the plugin is dropped.
    pub fn watch(self: &Arc<Self>, period: Duration) {
        type Check = fn(&WasmPlugin) -> Result<bool, WasmError>;
        let (period, check): (Duration, Check) = match (&self.args.component, self.args.pull.recheck_interval) {
            (Source::File(_), _) => (period, WasmPlugin::reload_if_changed),
            (Source::Oci(_), Some(interval)) => (interval, WasmPlugin::recheck),
            // A pinned https download or an OCI digest cannot change.
            _ => return,
        };
        let weak: Weak<WasmPlugin> = Arc::downgrade(self);
        let _ = std::thread::Builder::new().name(format!("wasm-watch-{}", self.name)).spawn(move || loop {
            std::thread::sleep(period);
            let Some(p) = weak.upgrade() else { return };
            let _ = check(&p);
        });
    }
}
