//! OCI sources: a component stored as a CNCF Wasm OCI artifact (tag-compatible-wasm-oci: one layer of media type
//! `application/vnd.wasm.content.layer.v1+wasm`, config `application/vnd.wasm.config.v0+json`), pulled by tag or
//! digest and pushed by `plugin push`, over oras-project's `oci-client`.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, ParseError, Reference};
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
        let reference = parse_reference(text).map_err(|e| format!("\"oci://{text}\": {e}"))?;
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

/// A reference as oci-client's `Reference::try_from` reads it, without its regular expression for ASCII text:
/// that expression's Unicode classes take tens of milliseconds to compile, paid by the first reference a process
/// reads (a scheduler's start, every `plugin` command). The grammar is distribution's (`[domain/]path[:tag][@digest]`);
/// text that is not ASCII goes to oci-client, whose `\w` in tags is Unicode's. The same answers, field by field
/// and error by error, are checked against oci-client in the tests.
fn parse_reference(text: &str) -> Result<Reference, ParseError> {
    if !text.is_ascii() {
        return Reference::try_from(text);
    }
    if text.is_empty() {
        return Err(ParseError::NameEmpty);
    }
    let (before, digest) = match text.split_once('@') {
        Some((b, d)) => (b, Some(d)),
        None => (text, None),
    };
    // A ':' after the last '/' starts the tag; one before it can only be a registry's port.
    let (name, tag) = match before.rfind(':') {
        Some(i) if !before[i..].contains('/') => (&before[..i], Some(&before[i + 1..])),
        _ => (before, None),
    };
    let tag_ok = |t: &str| {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        (1..=128).contains(&t.len()) && t.starts_with(word) && t.chars().all(|c| word(c) || c == '.' || c == '-')
    };
    let digest_ok = |d: &str| {
        let Some((algorithm, hex)) = d.split_once(':') else { return false };
        let parts_ok = algorithm
            .split(['-', '_', '+', '.'])
            .all(|p| p.starts_with(|c: char| c.is_ascii_alphabetic()) && p.chars().all(|c| c.is_ascii_alphanumeric()));
        parts_ok && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
    };
    if !reference_name_ok(name) || !tag.is_none_or(tag_ok) || !digest.is_none_or(digest_ok) {
        return Err(ParseError::ReferenceInvalidFormat);
    }
    let (registry, repository) = split_domain(name);
    if repository.len() > 255 {
        return Err(ParseError::NameTooLong);
    }
    // A well-formed digest has its ':' (digest_ok).
    if let Some((algorithm, hex)) = digest.and_then(|d| d.split_once(':')) {
        let want = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return Err(ParseError::DigestUnsupported),
        };
        if hex.len() != want {
            return Err(ParseError::DigestInvalidLength);
        }
    }
    Ok(match (tag, digest) {
        (Some(t), Some(d)) => Reference::with_tag_and_digest(registry, repository, t.into(), d.into()),
        (None, Some(d)) => Reference::with_digest(registry, repository, d.into()),
        (t, None) => Reference::with_tag(registry, repository, t.unwrap_or("latest").into()),
    })
}

/// `[domain/]path(/path)*`: a domain is dot-separated alphanumeric labels (inner '-') with an optional numeric
/// port; a path component is lowercase alphanumeric runs joined by '.', '_', '__' or any run of '-'.
fn reference_name_ok(name: &str) -> bool {
    let label = |l: &str| {
        l.starts_with(|c: char| c.is_ascii_alphanumeric())
            && l.ends_with(|c: char| c.is_ascii_alphanumeric())
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let domain = |d: &str| {
        let (host, port) = match d.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (d, None),
        };
        host.split('.').all(label) && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    let path = |p: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        p.starts_with(alnum)
            && p.ends_with(alnum)
            && p.split(alnum)
                .filter(|sep| !sep.is_empty())
                .all(|sep| matches!(sep, "." | "_" | "__") || sep.chars().all(|c| c == '-'))
    };
    // The first component may be a domain only when a path follows it.
    match name.split_once('/') {
        None => path(name),
        Some((first, rest)) => rest.split('/').all(path) && (path(first) || domain(first)),
    }
}

/// distribution's `splitDockerDomain`: a first component without '.' or ':' (and not `localhost`) is a Docker Hub
/// repository, and a Docker Hub name of one component is under `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((left, right)) if left.contains(['.', ':']) || left == "localhost" => {
            (left.to_string(), right.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".into();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
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

    /// The same answer as oci-client's parser: the fields of a reference, or the same error.
    fn same_as_oci_client(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let ours = parse_reference(text);
        let theirs = Reference::try_from(text);
        let fields = |r: &Reference| {
            (
                r.registry().to_string(),
                r.repository().to_string(),
                r.tag().map(str::to_string),
                r.digest().map(str::to_string),
            )
        };
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(fields(a), fields(b), "{:?}", text),
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a, b, "{:?}", text),
            _ => proptest::prop_assert!(false, "{text:?}: ours {ours:?}, oci-client {theirs:?}"),
        }
        Ok(())
    }

    #[test]
    fn references_read_as_oci_client_reads_them() {
        let hex = "0123456789abcdef".repeat(8);
        for text in [
            "127.0.0.1:5000/policies/drain-guard:1",
            "localhost:5000/a@sha256:",
            &format!("localhost:5000/a@sha256:{}", &hex[..64]),
            &format!("r.example.com/a/b:v1.2_x@sha256:{}", &hex[..64]),
            &format!("a@sha512:{hex}"),
            &format!("a@sha384:{}", &hex[..96]),
            &format!("a@sha256:{}", &hex[..63]),
            &format!("a@md5:{}", &hex[..32]),
            "localhost:5000",
            "localhost/a",
            "index.docker.io/nginx",
            "Foo/bar",
            "foo/Bar",
            "a__b/c---d.e_f:tag",
            "a___b",
            "a._b",
            "a:",
            "a:b:c",
            "a:b/c",
            ":tag",
            "host:99999/x",
            "host:/x",
            "-a/b",
            "a-/b",
            &format!("a:{}", "t".repeat(128)),
            &format!("a:{}", "t".repeat(129)),
            &format!("r.io/{}", "a".repeat(260)),
            "a:.x",
            "a:_x",
            "a@sha256:xyz",
            "",
            "a:tägg",
        ] {
            same_as_oci_client(text).unwrap();
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 2000, failure_persistence: None, ..Default::default() })]

        /// Random text over the grammar's characters, and references built from random parts.
        #[test]
        fn random_references_read_as_oci_client_reads_them(
            text in "[a-zA-Z0-9._:/@+-]{0,24}",
            domain in "([a-zA-Z0-9-]{1,6}(\\.[a-zA-Z0-9-]{1,6}){0,2}(:[0-9]{0,5})?/)?",
            path in "[a-z0-9._-]{1,8}(/[a-z0-9._-]{1,8}){0,2}",
            tag in "(:[a-zA-Z0-9_.-]{0,10})?",
            digest in "(@[a-zA-Z0-9+._-]{1,7}:[0-9a-fA-F]{0,3}([0-9a-f]{32}){0,4})?",
        ) {
            same_as_oci_client(&text)?;
            same_as_oci_client(&format!("{domain}{path}{tag}{digest}"))?;
        }
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
