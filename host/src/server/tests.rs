//! The HTTPS endpoint against real TLS clients on loopback: idle and slow connections are cut at their timeouts,
//! and past the connection cap idle ones make room while a probe's `/healthz` still answers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::*;

/// A server on 127.0.0.1 with a certificate the clients trust, removed with its directory when dropped.
struct Served {
    addr: SocketAddr,
    server: SecureServer,
    client: Arc<ClientConfig>,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Serves with `limits`; `/metrics` takes `metrics_delay` (to hold a request in flight).
async fn start(name: &str, limits: ServingLimits, metrics_delay: Duration) -> Served {
    let dir = std::env::temp_dir().join(format!("kws-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = SecureServingOptions {
        bind_address: "127.0.0.1".parse().unwrap(),
        bind_port: 0,
        cert_dir: Some(dir.clone()),
        limits,
        ..Default::default()
    };
    let authn = Authenticator::new(
        &DelegatingAuthenticationOptions { skip_in_cluster_lookup: true, ..Default::default() },
        None,
    )
    .await
    .unwrap();
    let authz = Authorizer::new(
        &DelegatingAuthorizationOptions {
            always_allow_paths: ["/healthz*", "/livez*", "/readyz*", "/metrics"].map(String::from).to_vec(),
            ..Default::default()
        },
        None,
    );
    let endpoints = Endpoints {
        healthz: Vec::new(),
        livez: Vec::new(),
        readyz: vec![HealthCheck::new("shutdown", || Ok(())), HealthCheck::new("sched-handler-sync", || Ok(()))],
        metrics: Box::new(move || {
            // A blocking sleep on purpose: the request stays in flight however the runtime is driven.
            std::thread::sleep(metrics_delay);
            "m 1\n".into()
        }),
        configz: "{}".into(),
        shadow: Box::new(|| "{}".into()),
        zpages: super::ZPages::off(),
    };
    let served = serve(&opts, authn, authz, endpoints).await.unwrap();
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("kube-scheduler.crt")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Served { addr: served.local_addr, server: served, client: Arc::new(config), dir }
}

impl Served {
    /// A TLS connection offering `alpn` (HTTP/1.1 when empty), handshake done.
    async fn connect(&self, alpn: &[&[u8]]) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let mut config = (*self.client).clone();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let name = ServerName::try_from("localhost").unwrap();
        tokio::time::timeout(Duration::from_secs(10), TlsConnector::from(Arc::new(config)).connect(name, tcp))
            .await
            .map_err(|_| std::io::Error::other("handshake timed out"))?
    }
}

/// One HTTP/1.1 GET on a kept-alive connection: the status code.
async fn get(s: &mut TlsStream<TcpStream>, path: &str) -> u16 {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk)).await.unwrap().unwrap();
        assert!(n > 0, "closed before the response: {}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            if body.len() >= len {
                return head.split(' ').nth(1).unwrap().parse().unwrap();
            }
        }
    }
}

/// Whether the peer closes the connection (end of stream or an error) within `d`.
async fn closed_within(s: &mut (impl AsyncRead + Unpin), d: Duration) -> bool {
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(d, async {
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

fn limits(header: u64, idle: u64, connections: usize) -> ServingLimits {
    ServingLimits {
        handshake_timeout: Duration::from_secs(2),
        read_header_timeout: Duration::from_secs(header),
        idle_timeout: Duration::from_secs(idle),
        max_connections: connections,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_http1_connection_is_closed_after_the_idle_timeout() {
    let s = start("idle1", limits(1, 3, 64), Duration::ZERO).await;
    let mut c = s.connect(&[]).await.unwrap();
    assert_eq!(get(&mut c, "/healthz").await, 200);
    // Between requests the idle timeout applies, not the (shorter) header timeout.
    assert!(!closed_within(&mut c, Duration::from_secs(2)).await, "closed before the idle timeout");
    assert_eq!(get(&mut c, "/healthz").await, 200, "kept alive within the idle timeout");
    assert!(closed_within(&mut c, Duration::from_secs(6)).await, "still open well after the idle timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_that_sends_no_request_is_closed_after_the_header_timeout() {
    let s = start("silent", limits(1, 30, 64), Duration::ZERO).await;
    let mut c = s.connect(&[]).await.unwrap();
    let t = Instant::now();
    assert!(closed_within(&mut c, Duration::from_secs(5)).await, "a silent connection stayed open");
    assert!(t.elapsed() >= Duration::from_millis(800), "closed before the header timeout: {:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slowloris_header_is_cut_at_the_header_timeout() {
    let s = start("slowloris", limits(2, 30, 64), Duration::ZERO).await;
    for warm in [false, true] {
        let mut c = s.connect(&[]).await.unwrap();
        if warm {
            // A later request on a kept-alive connection: its header timeout runs from its first byte.
            assert_eq!(get(&mut c, "/healthz").await, 200);
        }
        let (mut r, mut w) = tokio::io::split(c);
        let drip = tokio::spawn(async move {
            w.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n").await?;
            for i in 0..100u32 {
                w.write_all(format!("x-{i}: y\r\n").as_bytes()).await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok::<_, std::io::Error>(())
        });
        assert!(closed_within(&mut r, Duration::from_secs(6)).await, "a header dripped a line at a time was not cut");
        drip.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    let s = start("idle2", limits(1, 2, 64), Duration::ZERO).await;
    let c = s.connect(&[b"h2"]).await.unwrap();
    assert_eq!(c.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(c)).await.unwrap();
    let conn = tokio::spawn(conn);
    let req = hyper::Request::get("https://localhost/healthz").body(Empty::<Bytes>::new()).unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok");
    // The client keeps the connection; only the server's idle timeout ends it.
    let ended = tokio::time::timeout(Duration::from_secs(6), conn).await;
    assert!(ended.is_ok(), "an idle HTTP/2 connection stayed open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_past_the_cap_make_idle_ones_close_and_healthz_still_answers() {
    let s = start("cap", limits(30, 30, 4), Duration::ZERO).await;
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(s.connect(&[]).await.unwrap());
    }
    let mut probe = s.connect(&[]).await.unwrap();
    assert_eq!(get(&mut probe, "/healthz").await, 200, "a probe is answered past the cap");
    let mut closed = Vec::new();
    for c in &mut idle {
        closed.push(closed_within(c, Duration::from_millis(300)).await);
    }
    // Nine connections for four places: at least five idle ones went, the oldest first.
    let n = closed.iter().filter(|c| **c).count();
    assert!(n >= 5, "only {n} of 8 idle connections were closed past a cap of 4: {closed:?}");
    assert!(closed[0], "the oldest idle connection goes first: {closed:?}");
    assert!(s.server.open_connections() <= 4, "{} connections open past a cap of 4", s.server.open_connections());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_past_the_cap_is_refused_while_every_place_serves_a_request() {
    let s = Arc::new(start("busy", limits(30, 30, 2), Duration::from_millis(1500)).await);
    let mut busy = Vec::new();
    for _ in 0..2 {
        let s = s.clone();
        busy.push(tokio::spawn(async move {
            let mut c = s.connect(&[]).await.unwrap();
            get(&mut c, "/metrics").await
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Both places are serving: the third connection is closed at once, during or right after its handshake.
    let t = Instant::now();
    let refused = match s.connect(&[]).await {
        Err(_) => true,
        Ok(mut c) => closed_within(&mut c, Duration::from_millis(500)).await,
    };
    assert!(refused && t.elapsed() < Duration::from_secs(1), "a third connection was kept past a cap of 2");
    for b in busy {
        assert_eq!(b.await.unwrap(), 200, "requests in flight are not cut by the cap");
    }
    let mut probe = s.connect(&[]).await.unwrap();
    assert_eq!(get(&mut probe, "/healthz").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_paths_are_upstreams_and_an_unknown_check_is_not_found() {
    let s = start("health", limits(30, 30, 64), Duration::ZERO).await;
    let mut c = s.connect(&[]).await.unwrap();
    for (path, want) in [
        ("/readyz", 200),
        ("/readyz/sched-handler-sync", 200),
        ("/readyz/shutdown", 200),
        ("/readyz/anything", 404),
        ("/livez", 200),
        ("/livez/ping", 200),
        ("/livez/anything", 404),
        ("/healthz", 200),
        ("/healthz/ping", 200),
        ("/healthz/anything", 404),
    ] {
        assert_eq!(get(&mut c, path).await, want, "{path}");
    }
}
