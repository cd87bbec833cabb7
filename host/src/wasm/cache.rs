//! The plugin cache on disk, by content digest: component bytes fetched from https or OCI sources
//! (`blobs/sha256/HEX`), what an OCI reference last resolved to (`refs/`), and wasmtime's precompiled artifacts
//! (`compiled/HEX-ENGINE.cwasm`), so a restart neither downloads nor recompiles a 12–18 MB interpreted guest.
//! Bounded in size: past the bound the least recently used files go first.
//!
//! Nothing is read back from a file this user did not write or that someone else could have changed: a file, and
//! every directory from it up to the cache's own, must be owned by this process's user and writable by no one else
//! (issue 34: a shared or wrongly-permissioned cache let anyone plant a `refs/` file naming their own blob, served
//! with no request and no signature check). A `refs/` file also records which cosign key its version was verified
//! with, so that check protects the record too. Names read back are 64 hex digits or nothing: no path outside
//! `blobs/` is ever opened or removed.
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
use super::source::registry::{is_sha256_hex, sha256_hex_of};

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

    /// Where the bytes of `sha256` are kept; `None` for anything but 64 hex digits (a name read back from a
    /// `refs/` file must not lead out of `blobs/`).
    fn blob_path(&self, sha256: &str) -> Option<PathBuf> {
        is_sha256_hex(sha256).then(|| self.dir.join("blobs/sha256").join(sha256))
    }

    fn ref_path(&self, reference: &str) -> PathBuf {
        // A reference holds '/' and ':'; its digest names it without quoting rules.
        self.dir.join("refs").join(sha256_hex(reference.as_bytes()))
    }

    /// The bytes whose SHA-256 is `sha256`, when cached and intact (a damaged file is removed).
    pub fn blob(&self, sha256: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(sha256)?;
        self.trusted(&path)?;
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
        match self.blob_path(sha256) {
            Some(path) => self.write(&path, bytes),
            None => tracing::warn!(digest = %sha256, "not caching bytes under a name that is not a sha256 digest"),
        }
    }

    /// What `reference` resolved to when last pulled.
    pub fn reference(&self, reference: &str) -> Option<CachedRef> {
        let path = self.ref_path(reference);
        self.trusted(&path)?;
        let text = std::fs::read_to_string(&path).ok()?;
        let mut lines = text.lines();
        let (name, manifest, layer) = (lines.next()?, lines.next()?, lines.next()?);
        let verified_with = lines.next().filter(|k| !k.is_empty()).map(str::to_string);
        if name != reference {
            return None;
        }
        if sha256_hex_of(manifest).is_err()
            || !is_sha256_hex(layer)
            || verified_with.as_deref().is_some_and(|k| !is_sha256_hex(k))
        {
            tracing::warn!(
                file = %path.display(),
                "ignoring a plugin cache reference whose digests are not sha256 digests"
            );
            return None;
        }
        Some(CachedRef { manifest: manifest.into(), layer: layer.into(), verified_with })
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
        if !is_sha256_hex(sha256) {
            return None;
        }
        let path = self.compiled_path(engine, sha256);
        // Machine code that wasmtime trusts: only from a file this cache wrote.
        self.trusted(&path)?;
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

    /// `Some(())` when `path` is a file this process's user owns and no one else can write, in directories up to the
    /// cache's own of which the same holds; `None` (and a warning) when it exists but does not pass, or is absent.
    fn trusted(&self, path: &Path) -> Option<()> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX);
        let private = |m: &std::fs::Metadata| m.uid() == uid && m.permissions().mode() & 0o022 == 0;
        let mut why = (!meta.is_file() || !private(&meta)).then_some(path);
        let mut dir = path.parent();
        while let (None, Some(d)) = (why, dir) {
            if !std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && private(&m)) {
                why = Some(d);
            }
            if d == self.dir {
                break;
            }
            dir = d.parent();
        }
        match why {
            None => Some(()),
            Some(p) => {
                tracing::warn!(
                    file = %path.display(),
                    untrusted = %p.display(),
                    "not trusting the plugin cache's copy: another user owns it or others can write to it; fetching from the source instead"
                );
                None
            }
        }
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
        let path = c.blob_path(&digest).unwrap();
        std::fs::write(&path, b"tampered").unwrap();
        assert_eq!(c.blob(&digest), None, "a damaged blob is not served");
        assert!(!path.exists(), "and is removed");

        let manifest = format!("sha256:{}", "b".repeat(64));
        let r = CachedRef { manifest, layer: digest.clone(), verified_with: Some("c".repeat(64)) };
        c.put_reference("127.0.0.1:5000/p:v1", &r);
        assert_eq!(c.reference("127.0.0.1:5000/p:v1"), Some(r));
        assert_eq!(c.reference("127.0.0.1:5000/p:v2"), None);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn only_private_files_are_read_back_and_only_digests_name_them() {
        let c = temp_cache(1 << 21);
        let bytes = b"component bytes".to_vec();
        let digest = sha256_hex(&bytes);
        c.put_blob(&digest, &bytes);
        let r = CachedRef { manifest: format!("sha256:{digest}"), layer: digest.clone(), verified_with: None };
        c.put_reference("r.io/p:v1", &r);
        assert!(c.blob(&digest).is_some() && c.reference("r.io/p:v1").is_some());
        let chmod = |p: &Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        let blob = c.blob_path(&digest).unwrap();
        let reference = c.ref_path("r.io/p:v1");
        for (loose, mode, dir_mode) in [
            (c.dir().to_path_buf(), 0o777, 0o700),
            (c.dir().join("blobs"), 0o775, 0o700),
            (c.dir().join("refs"), 0o777, 0o700),
            (blob.clone(), 0o666, 0o600),
            (reference.clone(), 0o622, 0o600),
        ] {
            chmod(&loose, mode);
            assert!(c.blob(&digest).is_none() || c.reference("r.io/p:v1").is_none(), "{}", loose.display());
            chmod(&loose, dir_mode);
        }
        assert!(c.blob(&digest).is_some() && c.reference("r.io/p:v1").is_some());
        assert!(blob.exists(), "an untrusted blob is left alone, not removed");

        // Names that are not digests open nothing and remove nothing.
        let victim = c.dir().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        assert_eq!(c.blob("../../victim"), None);
        c.put_blob("../../victim", b"x");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        for bad in ["../../victim", "sha256:../x"] {
            std::fs::write(&reference, format!("r.io/p:v1\nsha256:{digest}\n{bad}\n\n")).unwrap();
            assert_eq!(c.reference("r.io/p:v1"), None, "{bad}");
            std::fs::write(&reference, format!("r.io/p:v1\n{bad}\n{digest}\n\n")).unwrap();
            assert_eq!(c.reference("r.io/p:v1"), None, "{bad}");
        }
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
