//! The plugin cache on disk, by content digest: component bytes fetched from https or OCI sources
//! (`blobs/sha256/HEX`), what an OCI reference last resolved to (`refs/`), and wasmtime's precompiled artifacts
//! (`compiled/HEX-ENGINE.cwasm`), so a restart neither downloads nor recompiles a 12–18 MB interpreted guest.
//! Bounded in size: past the bound the least recently used files go first.
//!
//! Where: `$KWS_PLUGIN_CACHE`, else `$XDG_CACHE_HOME/kube-wasm-scheduler/plugins`, else
//! `~/.cache/kube-wasm-scheduler/plugins`; `KWS_PLUGIN_CACHE=off` turns it off. The bound is
//! `$KWS_PLUGIN_CACHE_MAX` (a quantity such as `2Gi`, default [`DEFAULT_MAX_BYTES`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use wasmtime::component::Component;
use wasmtime::Engine;

use super::engine::sha256_hex;

/// The default bound on the cache's size.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// The on-disk plugin cache.
#[derive(Debug, Clone)]
pub struct PluginCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// What an OCI reference resolved to when it was last pulled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedRef {
    /// The manifest's digest (`sha256:…`).
    pub manifest: String,
    /// SHA-256 of the component layer, hex (the key of its bytes in `blobs/`).
    pub layer: String,
    /// The id of the cosign key its signature was verified with, if any.
    pub verified_with: Option<String>,
}

impl PluginCache {
    /// A cache in `dir` holding at most `max_bytes`.
    pub fn new(dir: PathBuf, max_bytes: u64) -> PluginCache {
        PluginCache { dir, max_bytes }
    }

    /// The process's cache, as the environment says (`None` when turned off or no directory can be named).
    pub fn shared() -> Option<&'static PluginCache> {
        static CACHE: OnceLock<Option<PluginCache>> = OnceLock::new();
        CACHE.get_or_init(PluginCache::from_env).as_ref()
    }

    fn from_env() -> Option<PluginCache> {
        let dir = match std::env::var_os("KWS_PLUGIN_CACHE") {
            Some(v) if v == "off" => return None,
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
                Some(x) => PathBuf::from(x).join("kube-wasm-scheduler/plugins"),
                None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/kube-wasm-scheduler/plugins"),
            },
        };
        let max_bytes = match std::env::var("KWS_PLUGIN_CACHE_MAX") {
            Ok(v) => match crate::framework::quantity::parse_value(&v) {
                Ok(n) if n >= 0 => n as u64,
                _ => {
                    tracing::warn!(value = %v, "KWS_PLUGIN_CACHE_MAX is not a quantity; using the default");
                    DEFAULT_MAX_BYTES
                }
            },
            Err(_) => DEFAULT_MAX_BYTES,
        };
        Some(PluginCache::new(dir, max_bytes))
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn blob_path(&self, sha256: &str) -> PathBuf {
        self.dir.join("blobs/sha256").join(sha256)
    }

    fn ref_path(&self, reference: &str) -> PathBuf {
        // A reference holds '/' and ':'; its digest names it without quoting rules.
        self.dir.join("refs").join(sha256_hex(reference.as_bytes()))
    }

    /// The bytes whose SHA-256 is `sha256`, when cached and intact (a damaged file is removed).
    pub fn blob(&self, sha256: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(sha256);
        let bytes = std::fs::read(&path).ok()?;
        if sha256_hex(&bytes) != sha256 {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        touch(&path);
        Some(bytes)
    }

    /// Keeps bytes under their SHA-256. Failures are logged: the cache only ever saves work.
    pub fn put_blob(&self, sha256: &str, bytes: &[u8]) {
        self.write(&self.blob_path(sha256), bytes);
    }

    /// What `reference` resolved to when last pulled.
    pub fn reference(&self, reference: &str) -> Option<CachedRef> {
        let text = std::fs::read_to_string(self.ref_path(reference)).ok()?;
        let mut lines = text.lines();
        let (name, manifest, layer) = (lines.next()?, lines.next()?, lines.next()?);
        let verified_with = lines.next().filter(|k| !k.is_empty()).map(str::to_string);
        (name == reference).then(|| CachedRef { manifest: manifest.into(), layer: layer.into(), verified_with })
    }

    /// Records what `reference` resolved to.
    pub fn put_reference(&self, reference: &str, resolved: &CachedRef) {
        let key = resolved.verified_with.as_deref().unwrap_or("");
        let text = format!("{reference}\n{}\n{}\n{key}\n", resolved.manifest, resolved.layer);
        self.write(&self.ref_path(reference), text.as_bytes());
    }

    /// The name of a precompiled artifact: the component's digest and what wasmtime says must match for its
    /// artifacts to load (its version, the target, the compiler settings).
    fn compiled_path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        self.dir.join("compiled").join(format!("{sha256}-{:016x}.cwasm", h.finish()))
    }

    /// The precompiled component for `sha256`, when this cache wrote one for a compatible engine.
    pub fn compiled(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.compiled_path(engine, sha256);
        let meta = std::fs::metadata(&path).ok()?;
        if !self.written_by_us(&path, &meta) {
            tracing::warn!(file = %path.display(), "not loading a precompiled artifact this cache did not write (owner or mode)");
            return None;
        }
        match deserialize(engine, &path) {
            Ok(c) => {
                touch(&path);
                Some(c)
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %super::engine::first_line(&e), "discarding a precompiled artifact");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps the precompiled form of a component.
    pub fn put_compiled(&self, engine: &Engine, sha256: &str, component: &Component) {
        match component.serialize() {
            Ok(bytes) => self.write(&self.compiled_path(engine, sha256), &bytes),
            Err(e) => tracing::warn!(error = %super::engine::first_line(&e), "cannot serialize a compiled component"),
        }
    }

    /// Only files this process's user wrote, in directories no one else can write to, are ever deserialized:
    /// a precompiled artifact is machine code that wasmtime trusts.
    fn written_by_us(&self, path: &Path, meta: &std::fs::Metadata) -> bool {
        let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX);
        let private = |m: &std::fs::Metadata| m.uid() == uid && m.permissions().mode() & 0o022 == 0;
        private(meta) && path.parent().and_then(|d| std::fs::metadata(d).ok()).is_some_and(|m| private(&m))
    }

    /// Writes a file whole (a temporary file, then one rename, so a reader never sees half of it), then keeps the
    /// cache under its bound.
    fn write(&self, path: &Path, bytes: &[u8]) {
        let result = (|| -> std::io::Result<()> {
            let dir = path.parent().expect("cache paths have a parent");
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            let tmp = dir.join(format!(".tmp-{}-{:?}", std::process::id(), std::thread::current().id()));
            let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        match result {
            Ok(()) => self.evict(path),
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "cannot write to the plugin cache"),
        }
    }

    /// Removes the least recently used files until the cache fits its bound, never `keep` (just written).
    fn evict(&self, keep: &Path) {
        let mut files: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for sub in ["blobs/sha256", "compiled", "refs"] {
            let Ok(entries) = std::fs::read_dir(self.dir.join(sub)) else { continue };
            for e in entries.flatten() {
                let Ok(m) = e.metadata() else { continue };
                if m.is_file() {
                    files.push((m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), e.path()));
                }
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if path != keep && std::fs::remove_file(&path).is_ok() {
                tracing::info!(file = %path.display(), bytes = len, "evicted from the plugin cache");
                total -= len;
            }
        }
    }
}

/// Marks a file as used now, for eviction by age of last use.
fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// The one unsafe call of the crate.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires that the file be an artifact it produced (`Component::serialize`) and that it not
    // change while mapped. `PluginCache::compiled` only gets here for files under the cache's own directory,
    // owned by this user and writable by no one else, which `write` creates whole and renames into place (a
    // rename or an eviction never changes a mapped file's contents); wasmtime itself checks the artifact's
    // header and its engine compatibility, and refuses a mismatch with an error.
    unsafe { Component::deserialize_file(engine, path) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_cache(max: u64) -> PluginCache {
        let dir = std::env::temp_dir().join(format!("kws-cache-test-{}-{max}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        PluginCache::new(dir, max)
    }

    #[test]
    fn blobs_are_checked_on_read_and_references_round_trip() {
        let c = temp_cache(1 << 20);
        let bytes = b"component bytes".to_vec();
        let digest = sha256_hex(&bytes);
        assert_eq!(c.blob(&digest), None);
        c.put_blob(&digest, &bytes);
        assert_eq!(c.blob(&digest), Some(bytes));
        std::fs::write(c.blob_path(&digest), b"tampered").unwrap();
        assert_eq!(c.blob(&digest), None, "a damaged blob is not served");
        assert!(!c.blob_path(&digest).exists(), "and is removed");

        let r = CachedRef { manifest: "sha256:abc".into(), layer: digest.clone(), verified_with: Some("k".into()) };
        c.put_reference("127.0.0.1:5000/p:v1", &r);
        assert_eq!(c.reference("127.0.0.1:5000/p:v1"), Some(r));
        assert_eq!(c.reference("127.0.0.1:5000/p:v2"), None);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn the_least_recently_used_files_are_evicted_past_the_bound() {
        let c = temp_cache(250);
        let blobs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 100]).collect();
        let digests: Vec<String> = blobs.iter().map(|b| sha256_hex(b)).collect();
        c.put_blob(&digests[0], &blobs[0]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.put_blob(&digests[1], &blobs[1]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Reading the first makes the second the oldest.
        assert!(c.blob(&digests[0]).is_some());
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.put_blob(&digests[2], &blobs[2]);
        assert!(c.blob(&digests[0]).is_some());
        assert!(c.blob(&digests[1]).is_none(), "the least recently used went");
        assert!(c.blob(&digests[2]).is_some());
        let _ = std::fs::remove_dir_all(c.dir());
    }
}
