//! OCI sources: a component stored as a CNCF Wasm OCI artifact (tag-compatible-wasm-oci: one layer of media type
//! `application/vnd.wasm.content.layer.v1+wasm`, config `application/vnd.wasm.config.v0+json`), pulled by tag or
//! digest and pushed by `plugin push`, over oras-project's `oci-client`.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use reqwest::Url;

use super::registry::{self, Registry};
use super::{
    auth, block_on, chain, http, signature, Fetched, PullArgs, PullPolicy, SourceError, CONNECT_TIMEOUT,
    DEFAULT_PULL_TIMEOUT, MAX_COMPONENT_BYTES,
};
use crate::wasm::cache::{CachedRef, PluginCache};
use crate::wasm::engine::sha256_hex;
use crate::wasm::{ComponentInfo, WasmError};

/// The component layer's media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// The config media type of the CNCF Wasm OCI artifact layout.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The config media type that wasm-to-oci (and oci-client's own example) wrote before the CNCF layout; read,
/// never written.
const LEGACY_WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";

/// An OCI reference to a component: `REGISTRY/REPO:TAG` or `REGISTRY/REPO@sha256:DIGEST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    text: String,
    reference: Reference,
    /// The registry's address: `http://` for the loopback interface, `https://` otherwise (boxed: a `Source` holds
    /// one, and a URL is large).
    origin: Box<Url>,
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}", self.text)
    }
}

impl OciRef {
    /// Parses what follows `oci://`.
    pub fn parse(text: &str) -> Result<OciRef, String> {
        let reference = Reference::try_from(text).map_err(|e| format!("\"oci://{text}\": {e}"))?;
        if let Some(d) = reference.digest() {
            registry::sha256_hex_of(d).map_err(|e| format!("\"oci://{text}\": {e}"))?;
        }
        let registry = reference.resolve_registry();
        // The reference's grammar takes any port; a URL does not (`:99999`).
        let scheme = if is_loopback_registry(registry) { "http" } else { "https" };
        let origin = Url::parse(&format!("{scheme}://{registry}/"))
            .map_err(|e| format!("\"oci://{text}\": registry {registry:?}: {e}"))?;
        Ok(OciRef { text: text.to_string(), reference, origin: Box::new(origin) })
    }

    /// The tag, when the reference names one and no digest.
    pub fn tag(&self) -> Option<&str> {
        self.reference.digest().is_none().then(|| self.reference.tag()).flatten()
    }

    /// True when the reference is a tag (it can move), not a digest.
    pub fn is_tag(&self) -> bool {
        self.reference.digest().is_none()
    }

    /// The same repository at a manifest digest.
    fn at(&self, digest: &str) -> Reference {
        self.reference.clone_with_digest(digest.to_string())
    }

    /// What the reference names in its repository: its digest, else its tag (`latest` when none is written).
    fn at_reference(&self) -> String {
        match self.reference.digest() {
            Some(d) => d.to_string(),
            None => self.reference.tag().unwrap_or("latest").to_string(),
        }
    }

    fn key(&self) -> String {
        self.reference.whole()
    }

    fn err(&self, source: oci_client::errors::OciDistributionError) -> SourceError {
        SourceError::Registry { reference: self.to_string(), detail: chain(&source), source: Arc::new(source) }
    }

    /// A client of the reference's repository for one pull.
    fn registry(&self, pull: &PullArgs) -> Result<Registry, SourceError> {
        let auth = registry_auth(self, pull.docker_config.as_deref())?;
        Registry::new(&self.origin, self.reference.repository(), &self.to_string(), auth, pull.timeout)
    }
}

/// A registry on the loopback interface is spoken to in plain HTTP, as the Docker daemon treats `localhost` and
/// 127.0.0.0/8 registries as insecure by default; any other over HTTPS.
fn is_loopback_registry(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => registry,
    };
    http::is_loopback_host(host)
}

/// An oci-client for the reference's registry (`plugin push`; pulls go through `registry.rs`).
fn client(r: &OciRef, timeout: std::time::Duration) -> Client {
    let registry = r.reference.resolve_registry().to_string();
    let loopback = is_loopback_registry(&registry);
    Client::new(ClientConfig {
        protocol: if loopback { ClientProtocol::HttpsExcept(vec![registry]) } else { ClientProtocol::Https },
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(timeout),
        user_agent: concat!("kube-wasm-scheduler/", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    })
}

fn registry_auth(r: &OciRef, docker_config: Option<&Path>) -> Result<RegistryAuth, SourceError> {
    match docker_config {
        Some(path) => auth::registry_auth(path, r.reference.resolve_registry()),
        None => Ok(RegistryAuth::Anonymous),
    }
}

/// Fetches a component with the pull policy: from the plugin cache when it holds what the reference last resolved
/// to (`IfNotPresent`, `Never`), from the registry otherwise.
pub(super) fn fetch(r: &OciRef, pull: &PullArgs, cache: Option<&PluginCache>) -> Result<Fetched, WasmError> {
    if pull.policy != PullPolicy::Always {
        let cached = cache.and_then(|c| {
            let resolved = c.reference(&r.key())?;
            // A version cached before a key was required (or with a key no longer accepted) is pulled and verified
            // again.
            let accepted =
                |id: &Option<String>| id.as_ref().is_some_and(|id| pull.signature.iter().any(|k| k.id == *id));
            if !pull.signature.is_empty() && !accepted(&resolved.verified_with) {
                return None;
            }
            let bytes = c.blob(&resolved.layer)?;
            Some(Fetched {
                bytes,
                digest: resolved.layer,
                revision: Some(resolved.manifest),
                verified_with: resolved.verified_with,
            })
        });
        if let Some(f) = cached {
            tracing::debug!(reference = %r, "component from the plugin cache");
            return Ok(f);
        }
        if pull.policy == PullPolicy::Never {
            return Err(SourceError::NotCached { source_name: r.to_string() }.into());
        }
    }
    let fetched = block_on(pull_at(r, &r.at_reference(), pull))?;
    remember(r, &fetched);
    Ok(fetched)
}

/// What a tag points at now (its manifest digest), asked of the registry.
pub(crate) fn resolve(r: &OciRef, pull: &PullArgs) -> Result<String, WasmError> {
    let tag = r.reference.tag().unwrap_or("latest");
    block_on(http::within(pull.timeout, &r.to_string(), async { r.registry(pull)?.manifest_digest(tag).await }))
        .map_err(WasmError::from)
}

/// Pulls the version at a manifest digest (what a re-checked tag moved to); the cache keeps its bytes, and the tag
/// is recorded as pointing there only once the caller calls `remember` (after the version was accepted).
pub(crate) fn fetch_revision(r: &OciRef, pull: &PullArgs, manifest_digest: &str) -> Result<Fetched, WasmError> {
    block_on(pull_at(r, manifest_digest, pull)).map_err(WasmError::from)
}

/// Records in the plugin cache what the reference resolved to (and the digest reference too, so a profile that
/// pins it later finds it).
pub(crate) fn remember(r: &OciRef, fetched: &Fetched) {
    let (Some(cache), Some(manifest)) = (PluginCache::shared(), &fetched.revision) else { return };
    cache.put_blob(&fetched.digest, &fetched.bytes);
    let resolved = CachedRef {
        manifest: manifest.clone(),
        layer: fetched.digest.clone(),
        verified_with: fetched.verified_with.clone(),
    };
    cache.put_reference(&r.key(), &resolved);
    cache.put_reference(&r.at(manifest).whole(), &resolved);
}

/// Pulls the manifest at `at` (a tag or a digest) once its signature is checked when a key is required, checks that
/// it is a Wasm component artifact, and pulls its one layer, all within the pull's deadline. Every read is bounded: the
/// manifest by `registry::MAX_MANIFEST_BYTES`, the layer by its descriptor's size, and the layer's bytes are checked
/// against its digest.
async fn pull_at(r: &OciRef, at: &str, pull: &PullArgs) -> Result<Fetched, SourceError> {
    http::within(pull.timeout, &r.to_string(), async {
        let registry = r.registry(pull)?;
        // With a key, the signature of the manifest's digest is checked before the manifest is read (a tag is
        // resolved by a HEAD first), then the manifest is read by that digest: an unsigned version is not even
        // downloaded.
        let (at, verified_with) = if pull.signature.is_empty() {
            (at.to_string(), None)
        } else {
            let digest = if at.contains(':') { at.to_string() } else { registry.manifest_digest(at).await? };
            let key = signature::verify(&registry, &r.to_string(), &digest, &pull.signature).await?;
            (digest, Some(key))
        };
        let (bytes, manifest_digest) = registry.manifest(&at).await?;
        let not_wasm = |detail| SourceError::NotWasmArtifact { reference: r.to_string(), detail };
        let manifest: OciImageManifest = serde_json::from_slice(&bytes)
            .map_err(|e| not_wasm(format!("not an OCI image manifest: {}", http::sanitize(&e.to_string(), 200))))?;
        let layer = wasm_layer(&manifest).map_err(not_wasm)?;
        let bytes = registry.blob(&layer.digest, layer.size as u64).await?;
        Ok(Fetched { digest: sha256_hex(&bytes), bytes, revision: Some(manifest_digest), verified_with })
    })
    .await
}

/// The component layer of a CNCF Wasm artifact manifest, or what the manifest is instead.
fn wasm_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, String> {
    let config = manifest.config.media_type.as_str();
    if config != WASM_CONFIG_MEDIA_TYPE && config != LEGACY_WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "not a Wasm artifact: its config media type is {config:?}, not {WASM_CONFIG_MEDIA_TYPE:?}"
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!("a Wasm artifact has one layer, this one has {}", manifest.layers.len()));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!("its layer's media type is {:?}, not {WASM_LAYER_MEDIA_TYPE:?}", layer.media_type));
    }
    if layer.size < 0 || layer.size as u64 > MAX_COMPONENT_BYTES {
        return Err(format!("its layer is {} bytes, over the {MAX_COMPONENT_BYTES}-byte maximum", layer.size));
    }
    Ok(layer)
}

/// `plugin push`: uploads a checked component as a CNCF Wasm artifact and returns the manifest digest.
pub fn push(
    bytes: Vec<u8>,
    info: &ComponentInfo,
    r: &OciRef,
    docker_config: Option<&Path>,
) -> Result<String, WasmError> {
    let layer_digest = format!("sha256:{}", sha256_hex(&bytes));
    // The layout's config: what the artifact is for tools that list it (`wkg`, registries' UIs).
    let config = serde_json::json!({
        "created": k8s_openapi::jiff::Timestamp::now().to_string(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"exports": info.exports, "imports": info.imports},
    });
    let config = Config {
        data: serde_json::to_vec(&config).expect("JSON encodes").into(),
        media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    let layers = vec![ImageLayer::new(bytes, WASM_LAYER_MEDIA_TYPE.to_string(), None)];
    let manifest = OciImageManifest::build(&layers, &config, None);
    let pull = operator_pull(docker_config);
    block_on(async {
        let auth = registry_auth(r, docker_config)?;
        let client = client(r, DEFAULT_PULL_TIMEOUT);
        client.push(&r.reference, &layers, config, &auth, Some(manifest)).await.map_err(|e| r.err(e))?;
        r.registry(&pull)?.manifest_digest(&r.at_reference()).await
    })
    .map_err(WasmError::from)
}

/// How `plugin push` and `plugin pull` reach a registry: always asking it, with the default deadline.
fn operator_pull(docker_config: Option<&Path>) -> PullArgs {
    PullArgs {
        policy: PullPolicy::Always,
        docker_config: docker_config.map(Path::to_path_buf),
        recheck_interval: None,
        signature: Vec::new(),
        timeout: DEFAULT_PULL_TIMEOUT,
    }
}

/// `plugin pull`: the component at a reference, straight from the registry (the cache is not consulted).
pub fn pull(r: &OciRef, docker_config: Option<&Path>) -> Result<Fetched, WasmError> {
    let pull = operator_pull(docker_config);
    block_on(pull_at(r, &r.at_reference(), &pull)).map_err(WasmError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[(&str, i64)]) -> OciImageManifest {
        let mut m = OciImageManifest::default();
        m.config.media_type = config.into();
        m.layers = layers
            .iter()
            .map(|(t, size)| OciDescriptor { media_type: t.to_string(), size: *size, ..Default::default() })
            .collect();
        m
    }

    #[test]
    fn only_a_one_layer_wasm_artifact_is_a_component() {
        assert!(wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, 10)])).is_ok());
        assert!(wasm_layer(&manifest(LEGACY_WASM_CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, 10)])).is_ok());
        for (m, want) in [
            (
                manifest("application/vnd.oci.image.config.v1+json", &[(WASM_LAYER_MEDIA_TYPE, 1)]),
                "config media type is \"application/vnd.oci.image.config.v1+json\"",
            ),
            (manifest(WASM_CONFIG_MEDIA_TYPE, &[]), "this one has 0"),
            (
                manifest(WASM_CONFIG_MEDIA_TYPE, &[("application/vnd.oci.image.layer.v1.tar+gzip", 1)]),
                "layer's media type",
            ),
            (manifest(WASM_CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, 1 << 40)]), "maximum"),
        ] {
            let e = wasm_layer(&m).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
