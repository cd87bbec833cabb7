//! Where a Wasm plugin's component comes from (`component:` in its args) and how its bytes are fetched: a local
//! file (as today), an `https://` URL pinned by `sha256`, or an OCI artifact in the CNCF Wasm layout
//! (`oci://REGISTRY/REPO:TAG` or `@sha256:DIGEST`), through the plugin cache (`wasm/cache.rs`) with Kubernetes'
//! image pull policies. Istio's `WasmPlugin` and the kubelet's image pulls are the models.

mod auth;
mod http;
pub mod oci;
pub mod registry;
pub mod signature;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use super::cache::PluginCache;
use super::engine::sha256_hex;
use super::WasmError;

pub use oci::OciRef;
pub use signature::CosignKey;

/// How long a connection to a source may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole download may take by default (`pullTimeout`; a 20 MB guest over a slow link fits).
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest component downloaded: a guest is a few MB to a few tens of MB, and a download is held in memory.
pub const MAX_COMPONENT_BYTES: u64 = 512 << 20;

/// Where a component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A local file (a path, or `file://`), relative paths resolved against the configuration file's directory.
    File(PathBuf),
    /// An `https://` URL; `sha256` is required.
    Https(String),
    /// An OCI artifact.
    Oci(OciRef),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Https(u) => f.write_str(u),
            Source::Oci(r) => write!(f, "{r}"),
        }
    }
}

impl Source {
    /// Parses `component:`; `base` is the directory relative paths resolve against. Errors name no field (the
    /// caller prefixes `component:`).
    pub fn parse(text: &str, base: &Path) -> Result<Source, String> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return OciRef::parse(rest).map(Source::Oci);
        }
        if text.starts_with("https://") {
            return match reqwest::Url::parse(text) {
                Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(Source::Https(text.to_string())),
                Ok(_) => Err(format!("{text:?} names no host")),
                Err(e) => Err(format!("{text:?}: {e}")),
            };
        }
        if text.starts_with("http://") {
            return Err(format!("{text:?}: plain http is not accepted (use https:// with sha256, or oci://)"));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            if scheme != "file" {
                return Err(format!("{text:?}: unknown scheme {scheme:?} (a path, file://, https:// or oci://)"));
            }
        }
        let path = PathBuf::from(text.strip_prefix("file://").unwrap_or(text));
        Ok(Source::File(if path.is_absolute() { path } else { base.join(path) }))
    }

    /// The local file, for a file source.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Source::File(p) => Some(p),
            _ => None,
        }
    }

    /// True for a source that can change without the profile changing: an OCI tag.
    pub fn is_tag(&self) -> bool {
        matches!(self, Source::Oci(r) if r.is_tag())
    }
}

/// When a remote component is downloaded (Kubernetes' `imagePullPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum PullPolicy {
    /// Download at every load (each start); a tag is resolved with the registry each time.
    Always,
    /// Use the cached copy when there is one; download otherwise. The default, but for an OCI tag `latest`.
    IfNotPresent,
    /// Never download: the component must be in the plugin cache.
    Never,
}

/// How a remote component is pulled: the policy, registry credentials, and how often a tag is re-checked.
#[derive(Debug, Clone, PartialEq)]
pub struct PullArgs {
    /// When to download.
    pub policy: PullPolicy,
    /// A docker `config.json` (the `.dockerconfigjson` of an `imagePullSecret`) with registry credentials.
    pub docker_config: Option<PathBuf>,
    /// How often an OCI tag is resolved again; a moved tag is hot-reloaded. `None`: never.
    pub recheck_interval: Option<Duration>,
    /// The cosign keys a pulled version must be signed with, one of them (OCI only); empty: no signature asked.
    pub signature: Vec<CosignKey>,
    /// The deadline of a whole fetch (`pullTimeout`): every request of it, bodies included.
    pub timeout: Duration,
}

impl PullArgs {
    /// The default for a source: as the kubelet, `Always` for an OCI tag `latest`, `IfNotPresent` otherwise.
    pub fn default_for(source: &Source) -> PullArgs {
        let policy = match source {
            Source::Oci(r) if r.tag() == Some("latest") => PullPolicy::Always,
            _ => PullPolicy::IfNotPresent,
        };
        PullArgs {
            policy,
            docker_config: None,
            recheck_interval: None,
            signature: Vec::new(),
            timeout: DEFAULT_PULL_TIMEOUT,
        }
    }
}

/// A component's bytes, as fetched.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`, hex.
    pub digest: String,
    /// For an OCI source, the manifest digest it came from (what a tag is compared by).
    pub revision: Option<String>,
    /// The id of the cosign key its signature was verified with, if any.
    pub verified_with: Option<String>,
}

/// A remote source that could not be fetched. Clone (causes shared) so that `WasmError` stays a plain value.
#[derive(Debug, Clone, Error)]
pub enum SourceError {
    /// The HTTP request failed (connection, TLS, timeout, a refused redirect).
    #[error("{url}: {detail}")]
    Http {
        /// The source (its URL or OCI reference).
        url: String,
        /// What went wrong, with its causes, on one line.
        detail: String,
        /// The client's error.
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// The server answered an error status; its body is quoted by a short sanitized prefix only.
    #[error("{source_name}: {url} answered {status}{}", quoted(.body))]
    Status {
        /// The source.
        source_name: String,
        /// The URL asked (after redirects), cut.
        url: String,
        /// The status.
        status: String,
        /// The start of the answer's body, sanitized.
        body: String,
    },
    /// What the server sent is not what was asked for or declared (a digest, a length, a token answer).
    #[error("{source_name}: {detail}")]
    Invalid {
        /// The source.
        source_name: String,
        /// What is wrong.
        detail: String,
    },
    /// The whole fetch did not finish within its deadline.
    #[error("{source_name}: not fetched within its pullTimeout of {timeout:?}")]
    Deadline {
        /// The source.
        source_name: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The registry refused or failed a push (`plugin push`, through oci-client).
    #[error("{reference}: {detail}")]
    Registry {
        /// The OCI reference.
        reference: String,
        /// What went wrong, with its causes, on one line.
        detail: String,
        /// The client's error.
        #[source]
        source: Arc<oci_client::errors::OciDistributionError>,
    },
    /// The artifact is not a Wasm component artifact (CNCF layout).
    #[error("{reference}: {detail}")]
    NotWasmArtifact {
        /// The OCI reference.
        reference: String,
        /// What it is instead.
        detail: String,
    },
    /// The credentials file cannot be used.
    #[error("auth.dockerConfig {path}: {detail}")]
    Auth {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// The cosign signature is missing or does not verify.
    #[error("{reference}: signature refused: {detail}")]
    Signature {
        /// The OCI reference.
        reference: String,
        /// Why.
        detail: String,
    },
    /// A download is over its bound (a component, a manifest).
    #[error("{source_name}: {what} over the {limit}-byte maximum")]
    TooLarge {
        /// The source.
        source_name: String,
        /// What is too large ("the component is").
        what: &'static str,
        /// The bound.
        limit: u64,
    },
    /// `pullPolicy: Never` and the plugin cache does not hold it.
    #[error("{source_name}: not in the plugin cache and pullPolicy is Never")]
    NotCached {
        /// The source.
        source_name: String,
    },
}

/// `: BODY` when there is a body to quote.
fn quoted(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    }
}

impl SourceError {
    /// The message without the source's name in front (for an error quoted inside another about the same source).
    pub fn detail(&self) -> String {
        let text = self.to_string();
        let name = match self {
            SourceError::Http { url: n, .. }
            | SourceError::Status { source_name: n, .. }
            | SourceError::Invalid { source_name: n, .. }
            | SourceError::Deadline { source_name: n, .. }
            | SourceError::TooLarge { source_name: n, .. } => n,
            _ => return text,
        };
        text.strip_prefix(&format!("{name}: ")).map(str::to_string).unwrap_or(text)
    }
}

/// Errors are equal when they read the same (the causes are not comparable).
impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}
impl Eq for SourceError {}

/// An error and its causes on one line (`a: b: c`), skipping a cause its parent already quotes.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Fetches the component for a plugin's source with its pin and pull settings, through the plugin cache.
pub fn fetch(source: &Source, sha256: Option<&str>, pull: &PullArgs) -> Result<Fetched, WasmError> {
    let cache = PluginCache::shared();
    let fetched = match source {
        Source::File(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| WasmError::Read { path: path.display().to_string(), message: e.to_string() })?;
            Fetched { digest: sha256_hex(&bytes), bytes, revision: None, verified_with: None }
        }
        Source::Https(url) => {
            let want = sha256.expect("args validation requires sha256 for https");
            match cache.filter(|_| pull.policy != PullPolicy::Always).and_then(|c| c.blob(want)) {
                Some(bytes) => {
                    tracing::debug!(%url, "component from the plugin cache");
                    Fetched { digest: want.to_string(), bytes, revision: None, verified_with: None }
                }
                None if pull.policy == PullPolicy::Never => {
                    return Err(SourceError::NotCached { source_name: url.clone() }.into())
                }
                None => {
                    let bytes = block_on(https_get(url, pull.timeout))?;
                    let f = Fetched { digest: sha256_hex(&bytes), bytes, revision: None, verified_with: None };
                    check_pin(source, sha256, &f.digest)?;
                    if let Some(c) = cache {
                        c.put_blob(&f.digest, &f.bytes);
                    }
                    f
                }
            }
        }
        Source::Oci(r) => oci::fetch(r, pull, cache)?,
    };
    check_pin(source, sha256, &fetched.digest)?;
    Ok(fetched)
}

/// The profile's `sha256` holds for every version from every source.
pub(crate) fn check_pin(source: &Source, sha256: Option<&str>, got: &str) -> Result<(), WasmError> {
    match sha256 {
        Some(want) if want != got => {
            Err(WasmError::Digest { path: source.to_string(), want: want.to_string(), got: got.to_string() })
        }
        _ => Ok(()),
    }
}

/// Runs a fetch to completion from synchronous code, whether or not the caller is on a Tokio runtime (plugin
/// factories run on the live scheduler's): on a thread of its own with a runtime of its own.
pub(crate) fn block_on<F>(fut: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    install_crypto_provider();
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds")
                .block_on(fut)
        })
        .join()
        .expect("the fetch thread does not panic")
    })
}

/// reqwest is built without a crypto provider of its own: ring, the one the rest of the process uses.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means one is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// GETs a URL whole within `timeout`, on the guarded client (`http.rs`: no redirect to plain HTTP, the loopback
/// interface or a link-local address; an error answer quoted by a short prefix). The server's certificate is
/// verified against the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured, as by Go's and OpenSSL's
/// clients).
async fn https_get(url: &str, timeout: Duration) -> Result<Vec<u8>, SourceError> {
    http::within(timeout, url, async {
        let origin = reqwest::Url::parse(url)
            .map_err(|e| SourceError::Invalid { source_name: url.to_string(), detail: e.to_string() })?;
        let client = http::client(&origin, timeout).map_err(|e| http::failed(url, e))?;
        let response = client.get(origin).send().await.map_err(|e| http::failed(url, e))?;
        if !response.status().is_success() {
            return Err(http::refusal(url, response).await);
        }
        match http::read_bounded(response, MAX_COMPONENT_BYTES).await {
            Ok(bytes) => Ok(bytes),
            Err(http::BodyError::Over) => Err(SourceError::TooLarge {
                source_name: url.to_string(),
                what: "the component is",
                limit: MAX_COMPONENT_BYTES,
            }),
            Err(http::BodyError::Http(e)) => Err(http::failed(url, e)),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_parse_by_scheme() {
        let base = Path::new("/etc/sched");
        assert_eq!(Source::parse("x.wasm", base).unwrap(), Source::File("/etc/sched/x.wasm".into()));
        assert_eq!(Source::parse("file:///p/x.wasm", base).unwrap(), Source::File("/p/x.wasm".into()));
        assert_eq!(
            Source::parse("https://example.com/x.wasm", base).unwrap(),
            Source::Https("https://example.com/x.wasm".into())
        );
        let s = Source::parse("oci://ghcr.io/team/prio:v1", base).unwrap();
        assert!(s.is_tag());
        assert_eq!(s.to_string(), "oci://ghcr.io/team/prio:v1");
        let d = format!("oci://127.0.0.1:5000/prio@sha256:{}", "a".repeat(64));
        let s = Source::parse(&d, base).unwrap();
        assert!(!s.is_tag());
        assert_eq!(s.to_string(), d);
        for (bad, want) in [
            ("http://example.com/x.wasm", "plain http is not accepted"),
            ("ftp://example.com/x.wasm", "unknown scheme \"ftp\""),
            ("oci://", "oci://"),
            ("oci://ghcr.io/Team/x", "oci://ghcr.io/Team/x"),
            ("oci://r.io/x@sha256:abc", "oci://r.io/x@sha256:abc"),
            ("https://", "https://"),
            ("oci://127.0.0.1:99999/x:v1", "invalid port number"),
            (
                "oci://r.io/x@sha512:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "not a sha256 digest",
            ),
        ] {
            let e = Source::parse(bad, base).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn the_pull_policy_defaults_as_the_kubelet_s() {
        let p = |s: &str| PullArgs::default_for(&Source::parse(s, Path::new("/")).unwrap()).policy;
        assert_eq!(p("oci://r.io/x:latest"), PullPolicy::Always);
        assert_eq!(p("oci://r.io/x"), PullPolicy::Always, "no tag means latest");
        assert_eq!(p("oci://r.io/x:v1"), PullPolicy::IfNotPresent);
        assert_eq!(p("https://r.io/x.wasm"), PullPolicy::IfNotPresent);
    }
}
