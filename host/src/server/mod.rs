//! Secure serving as kube-scheduler does it (k8s.io/apiserver `pkg/server/options/serving.go`, `authentication.go`,
//! `authorization.go` and the handler chain of `cmd/kube-scheduler/app/server.go`): HTTPS only, every request
//! authenticated (front proxy, client certificate, bearer token through a TokenReview, else anonymous) and then
//! authorized (always-allowed groups and paths, else a SubjectAccessReview for the non-resource path). `/flagz` and
//! `/statusz` are served as v1.37 serves them (see `zpages`).

mod authn;
mod authz;
mod handler;
mod health;
mod limits;
mod tls;
mod ttl_cache;
mod zpages;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

pub use authn::{Authenticator, UserInfo};
pub use authz::{Authorizer, Decision};
pub use handler::Endpoints;
pub use health::HealthCheck;
pub use limits::{ServingLimits, LIMITS_ENV};
pub use zpages::{ZPages, BINARY_VERSION};

/// kube-scheduler's default `--secure-port`.
pub const DEFAULT_SECURE_PORT: u16 = 10259;

/// The certificate pair's file names under `--cert-dir` (`kube-scheduler.crt`, `kube-scheduler.key`).
pub const PAIR_NAME: &str = "kube-scheduler";

/// Secure serving could not be set up.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The port could not be bound.
    #[error("serving on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A certificate, key or CA file could not be read or used.
    #[error("{file}: {message}")]
    File {
        /// The file (or the flag naming it).
        file: String,
        /// Why.
        message: String,
    },
    /// The self-signed serving certificate could not be generated or written.
    #[error("self-signed serving certificate: {0}")]
    SelfSigned(String),
    /// The TLS configuration was refused.
    #[error("tls: {0}")]
    Tls(#[source] rustls::Error),
    /// The in-cluster authentication configuration could not be read and failures are not tolerated.
    #[error("looking up configmap kube-system/extension-apiserver-authentication: {0}")]
    Lookup(String),
    /// The serving limits' override could not be read.
    #[error("{var}: {message}")]
    Limits {
        /// The environment variable.
        var: &'static str,
        /// Why.
        message: String,
    },
}

/// The lowest TLS version served (`--tls-min-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinTlsVersion {
    /// TLS 1.2 and 1.3 (also what `VersionTLS10`/`VersionTLS11` mean here: rustls serves nothing older).
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

/// `--bind-address`, `--secure-port` and the TLS flags (upstream `SecureServingOptions`).
#[derive(Debug, Clone)]
pub struct SecureServingOptions {
    /// `--bind-address` (default 0.0.0.0).
    pub bind_address: IpAddr,
    /// `--secure-port` (default 10259; 0 serves nothing).
    pub bind_port: u16,
    /// `--cert-dir`: where a generated pair is written (and read back on the next start).
    pub cert_dir: Option<PathBuf>,
    /// `--tls-cert-file` (chain, leaf first).
    pub tls_cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// `--tls-min-version`.
    pub min_tls_version: MinTlsVersion,
    /// `--disable-http2-serving`.
    pub disable_http2: bool,
    /// `--http2-max-streams-per-connection`, a Go `int` upstream (see [`Self::http2_max_concurrent_streams`]).
    pub http2_max_streams_per_connection: i64,
    /// `--permit-port-sharing` (SO_REUSEPORT).
    pub permit_port_sharing: bool,
    /// `--permit-address-sharing` (SO_REUSEADDR).
    pub permit_address_sharing: bool,
    /// Timeouts and the connection cap (no flags upstream; [`ServingLimits::from_env`] shortens them for tests).
    pub limits: ServingLimits,
}

impl SecureServingOptions {
    /// The HTTP/2 streams a client may open at once, as upstream derives them from the flag: 100 (what Go's
    /// clients assume) when it is not positive, else the flag narrowed to 32 bits as Go's `uint32(...)` does, where
    /// a narrowed 0 means x/net/http2's default of 250.
    pub fn http2_max_concurrent_streams(&self) -> u32 {
        match self.http2_max_streams_per_connection {
            n if n <= 0 => 100,
            n => match n as u32 {
                0 => 250,
                m => m,
            },
        }
    }
}

impl Default for SecureServingOptions {
    fn default() -> Self {
        SecureServingOptions {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            bind_port: DEFAULT_SECURE_PORT,
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            min_tls_version: MinTlsVersion::Tls12,
            disable_http2: false,
            http2_max_streams_per_connection: 0,
            permit_port_sharing: false,
            permit_address_sharing: false,
            limits: ServingLimits::default(),
        }
    }
}

/// Front-proxy authentication flags (upstream `RequestHeaderAuthenticationOptions`).
#[derive(Debug, Clone)]
pub struct RequestHeaderOptions {
    /// `--requestheader-client-ca-file`: the proxy's client certificate must chain to it.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`: common names the proxy may present (empty: any).
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_header_prefixes: Vec<String>,
}

impl Default for RequestHeaderOptions {
    fn default() -> Self {
        RequestHeaderOptions {
            client_ca_file: None,
            allowed_names: Vec::new(),
            username_headers: vec!["x-remote-user".into()],
            uid_headers: Vec::new(),
            group_headers: vec!["x-remote-group".into()],
            extra_header_prefixes: vec!["x-remote-extra-".into()],
        }
    }
}

/// Delegated authentication flags (upstream `DelegatingAuthenticationOptions`).
#[derive(Debug, Clone)]
pub struct DelegatingAuthenticationOptions {
    /// `--authentication-kubeconfig` (else the scheduler's own client).
    pub remote_kubeconfig: Option<PathBuf>,
    /// `--authentication-token-webhook-cache-ttl` (default 10s).
    pub cache_ttl: Duration,
    /// `--client-ca-file`: client certificates chaining to it authenticate as CN, groups O.
    pub client_ca_file: Option<PathBuf>,
    /// The front-proxy flags.
    pub request_header: RequestHeaderOptions,
    /// `--authentication-skip-lookup`: do not read missing CAs from the cluster.
    pub skip_in_cluster_lookup: bool,
    /// `--authentication-tolerate-lookup-failure` (kube-scheduler's default: true).
    pub tolerate_in_cluster_lookup_failure: bool,
}

impl Default for DelegatingAuthenticationOptions {
    fn default() -> Self {
        DelegatingAuthenticationOptions {
            remote_kubeconfig: None,
            cache_ttl: Duration::from_secs(10),
            client_ca_file: None,
            request_header: RequestHeaderOptions::default(),
            skip_in_cluster_lookup: false,
            tolerate_in_cluster_lookup_failure: true,
        }
    }
}

/// Delegated authorization flags (upstream `DelegatingAuthorizationOptions`).
#[derive(Debug, Clone)]
pub struct DelegatingAuthorizationOptions {
    /// `--authorization-kubeconfig` (else the scheduler's own client).
    pub remote_kubeconfig: Option<PathBuf>,
    /// `--authorization-webhook-cache-authorized-ttl` (default 10s).
    pub allow_cache_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (default 10s).
    pub deny_cache_ttl: Duration,
    /// `--authorization-always-allow-paths` (default /healthz, /readyz, /livez; a trailing `*` matches a prefix).
    pub always_allow_paths: Vec<String>,
    /// Groups allowed everything without a review (upstream's default: system:masters; no flag).
    pub always_allow_groups: Vec<String>,
}

impl Default for DelegatingAuthorizationOptions {
    fn default() -> Self {
        DelegatingAuthorizationOptions {
            remote_kubeconfig: None,
            allow_cache_ttl: Duration::from_secs(10),
            deny_cache_ttl: Duration::from_secs(10),
            always_allow_paths: vec!["/healthz".into(), "/readyz".into(), "/livez".into()],
            always_allow_groups: vec!["system:masters".into()],
        }
    }
}

/// A running HTTPS server.
pub struct SecureServer {
    /// The address it listens on (the real port when 0 was asked).
    pub local_addr: SocketAddr,
    connections: Arc<limits::Connections>,
}

impl SecureServer {
    /// Connections open now (at most the cap, plus those being closed to make room).
    pub fn open_connections(&self) -> usize {
        self.connections.count()
    }
}

/// Binds `opts`' address and serves `endpoints` over HTTPS on the current tokio runtime, every request
/// authenticated by `authn` and authorized by `authz`.
pub async fn serve(
    opts: &SecureServingOptions,
    authn: Authenticator,
    authz: Authorizer,
    endpoints: Endpoints,
) -> Result<SecureServer, ServeError> {
    let tls = tls::server_config(opts, authn.wants_client_certificates())?;
    let addr = SocketAddr::new(opts.bind_address, opts.bind_port);
    let listener = handler::bind(addr, opts).map_err(|source| ServeError::Bind { addr, source })?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
    let state = Arc::new(handler::State::new(tls, authn, authz, endpoints, opts));
    let connections = state.connections.clone();
    tokio::spawn(handler::accept_loop(listener, state));
    Ok(SecureServer { local_addr, connections })
}

#[cfg(test)]
mod tests;
