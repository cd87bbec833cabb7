//! The serving certificate (from `--tls-cert-file`/`--tls-private-key-file`, else a self-signed pair kept under
//! `--cert-dir` as upstream's `MaybeDefaultWithSelfSignedCerts`, else in memory) and client certificates, which
//! are requested at the handshake but verified per request against each CA, as Go's `tls.RequestClientCert` with
//! upstream's x509 authenticators.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme};

use super::{MinTlsVersion, SecureServingOptions, ServeError, PAIR_NAME};

/// The crypto provider used for serving and verifying (ring, as the kube client).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS configuration; `request_client_certs` asks clients for a certificate (never requires one).
pub(crate) fn server_config(
    opts: &SecureServingOptions,
    request_client_certs: bool,
) -> Result<Arc<ServerConfig>, ServeError> {
    let (chain, key) = serving_pair(opts)?;
    let versions: &[&'static rustls::SupportedProtocolVersion] = match opts.min_tls_version {
        MinTlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinTlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(ServeError::Tls)?;
    let builder = if request_client_certs {
        builder.with_client_cert_verifier(Arc::new(RequestClientCert {
            algorithms: provider.signature_verification_algorithms,
        }))
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).map_err(ServeError::Tls)?;
    config.alpn_protocols =
        if opts.disable_http2 { vec![b"http/1.1".to_vec()] } else { vec![b"h2".to_vec(), b"http/1.1".to_vec()] };
    Ok(Arc::new(config))
}

type Pair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn serving_pair(opts: &SecureServingOptions) -> Result<Pair, ServeError> {
    match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        (Some(c), Some(k)) => return read_pair(c, k),
        (Some(_), None) | (None, Some(_)) => {
            return Err(ServeError::File {
                file: "--tls-cert-file/--tls-private-key-file".into(),
                message: "both must be given, or neither".into(),
            })
        }
        (None, None) => {}
    }
    let Some(dir) = &opts.cert_dir else { return self_signed(opts).map(|(pair, _, _)| pair) };
    let (crt, key) = (dir.join(format!("{PAIR_NAME}.crt")), dir.join(format!("{PAIR_NAME}.key")));
    if crt.exists() && key.exists() {
        return read_pair(&crt, &key);
    }
    let (pair, crt_pem, key_pem) = self_signed(opts)?;
    write_pair(dir, &crt, &crt_pem, &key, &key_pem)?;
    tracing::info!(cert = %crt.display(), key = %key.display(), "generated a self-signed serving certificate");
    Ok(pair)
}

fn read_pair(crt: &Path, key: &Path) -> Result<Pair, ServeError> {
    let file_err = |p: &Path, message: String| ServeError::File { file: p.display().to_string(), message };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(crt)
        .map_err(|e| file_err(crt, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_err(crt, e.to_string()))?;
    if chain.is_empty() {
        return Err(file_err(crt, "no PEM certificate in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, e.to_string()))?;
    Ok((chain, key))
}

fn write_pair(dir: &Path, crt: &Path, crt_pem: &str, key: &Path, key_pem: &str) -> Result<(), ServeError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |p: &Path, e: std::io::Error| ServeError::SelfSigned(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    std::fs::write(crt, crt_pem).map_err(|e| err(crt, e))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(key)
        .map_err(|e| err(key, e))?;
    f.write_all(key_pem.as_bytes()).map_err(|e| err(key, e))
}

/// A self-signed certificate for localhost, the loopback addresses, this host's name and the bind address
/// (upstream names its pair `<host>@<unix time>` and covers the same names).
fn self_signed(opts: &SecureServingOptions) -> Result<(Pair, String, String), ServeError> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if host != "localhost" {
        names.push(host.clone());
    }
    if !opts.bind_address.is_unspecified() && !opts.bind_address.is_loopback() {
        names.push(opts.bind_address.to_string());
    }
    let err = |e: rcgen::Error| ServeError::SelfSigned(e.to_string());
    let mut params = rcgen::CertificateParams::new(names).map_err(err)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("{host}@{now}"));
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    let der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    Ok(((vec![cert.der().clone()], der), cert.pem(), key.serialize_pem()))
}

/// Reads the CA bundle `file` into a verifier of client certificates (chain and clientAuth usage).
pub(crate) fn client_verifier(file: &Path) -> Result<Arc<dyn ClientCertVerifier>, ServeError> {
    let bundle = std::fs::read(file).map_err(|e| file_err(file, e.to_string()))?;
    verifier_from_pem(&bundle).map_err(|m| file_err(file, m))
}

/// A verifier of client certificates from a PEM CA bundle.
pub(crate) fn verifier_from_pem(pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| e.to_string())
}

fn file_err(file: &Path, message: String) -> ServeError {
    ServeError::File { file: PathBuf::from(file).display().to_string(), message }
}

/// Verifies a presented chain (leaf first) now; on success returns the leaf's subject CN and O values.
pub(crate) fn verify_client(
    verifier: &dyn ClientCertVerifier,
    chain: &[CertificateDer<'static>],
) -> Result<(String, Vec<String>), String> {
    let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
    verifier
        .verify_client_cert(leaf, intermediates, UnixTime::now())
        .map_err(|e| format!("verifying certificate: {e}"))?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf.as_ref()).map_err(|e| format!("parsing certificate: {e}"))?;
    let subject = cert.subject();
    let cn = subject.iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or("").to_string();
    let orgs = subject.iter_organization().filter_map(|a| a.as_str().ok()).map(str::to_string).collect();
    Ok((cn, orgs))
}

/// Asks for a client certificate and checks that the client holds its key, but leaves the chain to the
/// authenticators: a certificate no CA vouches for then falls through to the next authenticator (or 401) instead of
/// failing the handshake, as with Go's `tls.RequestClientCert`.
#[derive(Debug)]
struct RequestClientCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
