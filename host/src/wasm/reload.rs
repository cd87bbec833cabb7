//! Loading a component file (with its digest) and hot reload: a changed file is compiled and checked off the hot
//! path and swapped in, while cycles that began on the previous version finish on it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use wasmtime::component::Component;

use super::engine::{sha256_hex, WasmEngine};
use super::instance::Loaded;
use super::{WasmError, WasmPlugin};

/// What identifies a version of the file without reading it: its canonical path, modification time and size.
pub(super) type FileStamp = (PathBuf, SystemTime, u64);

/// Reads and compiles a component file, checking its digest when one is pinned.
pub(crate) fn load_component(path: &Path, sha256: Option<&str>) -> Result<(Component, String), WasmError> {
    let bytes = std::fs::read(path)
        .map_err(|e| WasmError::Read { path: path.display().to_string(), message: e.to_string() })?;
    let engine = WasmEngine::shared();
    let digest = sha256_hex(&bytes);
    if let Some(want) = sha256 {
        if want != digest {
            return Err(WasmError::Digest { path: path.display().to_string(), want: want.to_string(), got: digest });
        }
    }
    engine.compile(&bytes)
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
            // The profile's pin holds for every version: a file that does not match is refused like any bad one.
            let (component, digest) = load_component(&self.args.component, self.args.sha256.as_deref())?;
            if digest == self.current().digest {
                return Ok(false);
            }
            let loaded = Loaded::new(component, digest)?;
            let (old, new) = (self.points(), loaded.points());
            if old != new {
                return Err(WasmError::Contract(format!("the new file serves {new:?}, the running version {old:?}")));
            }
            self.validate_config(&loaded)?;
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
}
