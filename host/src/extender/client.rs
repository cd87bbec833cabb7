//! The HTTP side of an extender (upstream `makeTransport` and `HTTPExtender.send`): TLS settings read once from
//! the configuration, one pooled hyper client per extender, `POST <urlPrefix>/<verb>` with a JSON body under the
//! configured timeout, which covers the whole exchange as Go's `http.Client.Timeout` does.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::Value;

use super::ExtenderError;

pub use crate::config::extenders::{TlsMaterial, DEFAULT_TIMEOUT};
/// Idle connections kept per extender: the scheduler calls each one from a single thread, prioritize and
/// filter overlap at most with binding and preemption.
const MAX_IDLE_PER_HOST: usize = 8;
/// An idle pooled connection is closed after this (Go's `DefaultTransport` `IdleConnTimeout`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Connecting may take at most this (Go's dialer `Timeout` in `SetTransportDefaults`), within the call's timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// An answer larger than this is refused rather than buffered: a filter answer with 5,000 whole Node objects
/// is a few tens of MB.
const MAX_ANSWER_BYTES: usize = 256 << 20;

impl TlsMaterial {
    /// Checks that the material makes a TLS client and that `serverName` is a name, as building the client would;
    /// errors carry the field below the extender and the message.
    pub fn check(&self) -> Result<(), (String, String)> {
        self.client_config()?;
        if !self.server_name.is_empty() {
            ServerName::try_from(self.server_name.clone())
                .map_err(|e| ("tlsConfig.serverName".to_string(), format!("{:?}: {e}", self.server_name)))?;
        }
        Ok(())
    }

    /// The rustls configuration; errors carry the field below the extender and the message.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, (String, String)> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ("tlsConfig".to_string(), e.to_string()))?;
        let builder = if self.insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
        } else {
            let roots = match &self.ca {
                Some(pem) => roots_from_pem(pem).map_err(|m| ("tlsConfig.caFile".to_string(), m))?,
                None => system_roots(),
            };
            builder.with_root_certificates(roots)
        };
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<_, _>>()
                    .map_err(|e| ("tlsConfig.certFile".to_string(), format!("not a PEM certificate: {e}")))?;
                if chain.is_empty() {
                    return Err(("tlsConfig.certFile".into(), "no certificate in the PEM data".into()));
                }
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| ("tlsConfig.keyFile".to_string(), format!("not a PEM private key: {e}")))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| ("tlsConfig.keyFile".to_string(), e.to_string()))
            }
            _ => Ok(builder.with_no_client_auth()),
        }
    }
}

fn roots_from_pem(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("unusable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("no certificate in the CA bundle".into());
    }
    Ok(roots)
}

/// The system's trust store; certificates it cannot parse are skipped, as Go's `SystemCertPool` skips them.
fn system_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    roots
}

/// `insecure: true` (or `enableHTTPS` without a CA): any server certificate is accepted, as Go's
/// `InsecureSkipVerify`; the handshake's signatures are still checked so the session keys are the server's.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One extender's HTTP client: a connection pool to its URL prefix.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    prefix: String,
    timeout: Duration,
}

impl HttpClient {
    /// A client for `prefix` with the given TLS material (already checked by the configuration).
    pub fn new(prefix: &str, tls: Option<&TlsMaterial>, timeout: Duration) -> Result<HttpClient, (String, String)> {
        let config = match tls {
            Some(m) => m.client_config()?,
            None => TlsMaterial::default().client_config()?,
        };
        let mut http = HttpConnector::new();
        // https URLs go through the TLS layer, which needs the connector to pass them on.
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_nodelay(true);
        let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config).https_or_http();
        let builder = match tls.filter(|m| !m.server_name.is_empty()) {
            Some(m) => {
                let name = ServerName::try_from(m.server_name.clone())
                    .map_err(|e| ("tlsConfig.serverName".to_string(), e.to_string()))?;
                builder.with_server_name_resolver(FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        let connector = builder.enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
            .build(connector);
        Ok(HttpClient { client, prefix: prefix.trim_end_matches('/').to_string(), timeout })
    }

    /// `POST <prefix>/<verb>` with `body`; the decoded JSON answer of a 200, else an error naming verb and URL.
    /// Runs on the extenders' runtime.
    pub async fn send(self, verb: String, body: Vec<u8>) -> Result<Value, ExtenderError> {
        let url = format!("{}/{verb}", self.prefix);
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.exchange(&url, body)).await {
            Ok(r) => r.map_err(|e| e.at(&verb, &url)),
            Err(_) => Err(ExtenderError::Timeout { url, timeout }),
        }
    }

    async fn exchange(&self, url: &str, body: Vec<u8>) -> Result<Value, CallFailure> {
        let req = hyper::Request::post(url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(CallFailure::Request)?;
        let resp = self.client.request(req).await.map_err(CallFailure::Transport)?;
        let status = resp.status();
        if status != hyper::StatusCode::OK {
            return Err(CallFailure::Code(status.as_u16()));
        }
        let limited = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES);
        let bytes = limited.collect().await.map_err(|e| CallFailure::Body(e.to_string()))?.to_bytes();
        // Go's json.Decoder reads the first value and leaves whatever follows it unread.
        let first = serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>().next();
        match first {
            Some(v) => v.map_err(CallFailure::Json),
            None => Err(CallFailure::Json(serde_json::from_slice::<Value>(&bytes).expect_err("no value in it"))),
        }
    }
}

/// How an exchange failed, before the verb and URL are attached.
enum CallFailure {
    Request(hyper::http::Error),
    Transport(hyper_util::client::legacy::Error),
    Code(u16),
    Body(String),
    Json(serde_json::Error),
}

impl CallFailure {
    fn at(self, verb: &str, url: &str) -> ExtenderError {
        let url = url.to_string();
        match self {
            CallFailure::Request(source) => ExtenderError::Request { url, source },
            CallFailure::Transport(source) => {
                ExtenderError::Transport { url: url.clone(), detail: error_chain(&source), source }
            }
            CallFailure::Code(code) => ExtenderError::Code { verb: verb.to_string(), url, code },
            CallFailure::Body(detail) => ExtenderError::Body { url, detail },
            CallFailure::Json(source) => ExtenderError::Json { url, source },
        }
    }
}

/// An error and its causes on one line: hyper's outer errors say only "client error (Connect)".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if !parts.iter().any(|p| p.contains(&m)) {
            parts.push(m);
        }
        cur = s.source();
    }
    parts.join(": ")
}
