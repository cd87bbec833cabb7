//! Connections and requests: TLS (a plain-HTTP request gets Go's 400 answer), HTTP/1.1 and HTTP/2, then
//! upstream's handler chain (`buildHandlerChain` in cmd/kube-scheduler/app/server.go): authentication (401 when
//! presented credentials are refused), authorization (403 when denied, 500 when no review could be made), then
//! the endpoints.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use rustls::ServerConfig;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::health::{self, HealthCheck};
use super::limits::{Admitted, Connections, Tracked};
use super::zpages::{Ask, ZPages};
use super::{Authenticator, Authorizer, Decision, SecureServingOptions, UserInfo};

/// How long an HTTP/2 connection past its idle timeout gets to deliver its GOAWAY before it is dropped.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// What Go's HTTPS server answers to plain HTTP on its port.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// A TLS record starts with this content type (handshake) in its first byte.
const TLS_HANDSHAKE: u8 = 0x16;

/// What the server answers behind authentication and authorization.
pub struct Endpoints {
    /// `/healthz`'s checks (none: upstream's `ping`).
    pub healthz: Vec<HealthCheck>,
    /// `/livez`'s checks (none: `ping`).
    pub livez: Vec<HealthCheck>,
    /// `/readyz`'s checks.
    pub readyz: Vec<HealthCheck>,
    /// `/metrics`: Prometheus text.
    pub metrics: Box<dyn Fn() -> String + Send + Sync>,
    /// `/configz`: the effective configuration as JSON.
    pub configz: String,
    /// `/debug/shadow`: how each profile's shadow compared with it, as JSON.
    pub shadow: Box<dyn Fn() -> String + Send + Sync>,
    /// `/flagz` and `/statusz`.
    pub zpages: ZPages,
}

/// Shared by every connection.
pub(crate) struct State {
    acceptor: TlsAcceptor,
    authn: Authenticator,
    authz: Authorizer,
    endpoints: Endpoints,
    http1_only: bool,
    max_streams: u32,
    /// The open connections and the limits they live under.
    pub connections: Arc<Connections>,
}

impl State {
    pub fn new(
        tls: Arc<ServerConfig>,
        authn: Authenticator,
        authz: Authorizer,
        endpoints: Endpoints,
        opts: &SecureServingOptions,
    ) -> State {
        State {
            acceptor: TlsAcceptor::from(tls),
            authn,
            authz,
            endpoints,
            http1_only: opts.disable_http2,
            max_streams: opts.http2_max_concurrent_streams(),
            connections: Arc::new(Connections::new(opts.limits)),
        }
    }
}

/// Binds with the socket options the flags ask for.
pub(crate) fn bind(addr: SocketAddr, opts: &SecureServingOptions) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(opts.permit_address_sharing)?;
    socket.set_reuseport(opts.permit_port_sharing)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Accepts connections until the runtime stops.
pub(crate) async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        match listener.accept().await {
            // Admitted here, in the order connections arrive, so the newest is never the one evicted to make room
            // (an admission in the spawned task may run after later connections').
            Ok((sock, _)) => match state.connections.admit() {
                Some(admitted) => {
                    tokio::spawn(connection(sock, admitted, state.clone()));
                }
                None => {
                    // Every place serves a request: dropping the socket closes it (the client sees a reset
                    // handshake).
                    tracing::debug!(
                        "connection refused: every one of the {} places serves a request",
                        state.connections.count()
                    );
                }
            },
            Err(e) => {
                // Out of file descriptors and the like: try again shortly rather than spin.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves one connection within the limits: a handshake that takes too long, a header that comes too slowly and a
/// connection idle for too long are closed, and a connection is closed at once to make room past the cap.
async fn connection(sock: TcpStream, admitted: Admitted, state: Arc<State>) {
    let activity = admitted.activity.clone();
    let limits = *state.connections.limits();
    let handshake = async {
        let mut sock = sock;
        let mut first = [0u8; 1];
        match sock.peek(&mut first).await {
            Ok(1) if first[0] == TLS_HANDSHAKE => {}
            Ok(1) => {
                let _ = sock.write_all(PLAIN_HTTP_ANSWER).await;
                let _ = sock.shutdown().await;
                return None;
            }
            _ => return None,
        }
        state.acceptor.accept(sock).await.ok()
    };
    let tls = tokio::select! {
        r = tokio::time::timeout(limits.handshake_timeout, handshake) => match r {
            Ok(Some(tls)) => tls,
            _ => return,
        },
        _ = activity.evict.notified() => return,
    };
    activity.handshake_done();
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let peer: Arc<[CertificateDer<'static>]> = tls
        .get_ref()
        .1
        .peer_certificates()
        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
        .unwrap_or_default();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(state.max_streams);
    let builder = if state.http1_only { builder.http1_only() } else { builder };
    let (handler_state, requests) = (state.clone(), activity.clone());
    let service = hyper::service::service_fn(move |req| {
        let (state, peer) = (handler_state.clone(), peer.clone());
        let in_flight = requests.request();
        async move {
            let answer = handle(&state, &peer, req).await;
            drop(in_flight);
            Ok::<_, Infallible>(answer)
        }
    });
    let conn = builder.serve_connection(TokioIo::new(Tracked::new(tls, activity.clone())), service);
    tokio::pin!(conn);
    loop {
        let deadline = activity.deadline(&limits, http2);
        let expired = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = activity.evict.notified() => return,
            // A request started or ended, or a header began: the deadline moved.
            _ = activity.changed.notified() => {}
            _ = expired => break,
        }
    }
    // Past its deadline with nothing in flight. Go's server closes an HTTP/1.1 connection without a word and sends
    // an HTTP/2 one a GOAWAY first.
    if http2 {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(GOAWAY_GRACE, conn).await;
    }
}

/// Authenticates, authorizes and answers one request.
async fn handle(state: &State, peer: &[CertificateDer<'static>], req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let req_query = req.uri().query().map(str::to_string);
    let verb = req.method().as_str().to_ascii_lowercase();
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let (accept, user_agent) = (header(hyper::header::ACCEPT), header(hyper::header::USER_AGENT));
    let user = match state.authn.authenticate(req.headers(), peer).await {
        Ok(Some(u)) => u,
        Ok(None) => UserInfo::anonymous(),
        Err(e) => {
            tracing::debug!(path = %path, "authentication failed: {e}");
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    };
    match state.authz.authorize(&user, &path, &verb).await {
        Ok(Decision::Allow) => {}
        Ok(Decision::Deny(reason)) => {
            let mut message = format!("forbidden: User {:?} cannot {verb} path {path:?}", user.name);
            if !reason.is_empty() {
                message = format!("{message}: {reason}");
            }
            return status(StatusCode::FORBIDDEN, "Forbidden", &message);
        }
        Err(e) => {
            tracing::warn!(path = %path, user = %user.name, "authorization failed: {e}");
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!("Internal error occurred: {e}"),
            );
        }
    }
    let ask = Ask { accept: &accept, query: req_query.as_deref(), user_agent: &user_agent };
    route(&state.endpoints, &path, &ask)
}

fn route(endpoints: &Endpoints, path: &str, ask: &Ask<'_>) -> Response<Full<Bytes>> {
    let query = ask.query;
    if let Some(page) = endpoints.zpages.answer(path, ask) {
        let code = StatusCode::from_u16(page.code).expect("a valid status");
        let mut response = text(code, &page.content_type, page.body);
        if let Some(w) = page.warning {
            response.headers_mut().insert(hyper::header::WARNING, hyper::header::HeaderValue::from_static(w));
        }
        return response;
    }
    let roots = [("/healthz", &endpoints.healthz), ("/livez", &endpoints.livez), ("/readyz", &endpoints.readyz)];
    for (root, checks) in roots {
        if let Some((code, body)) = health::answer(root, checks, path, query) {
            return text(code, "text/plain; charset=utf-8", body);
        }
    }
    match path {
        "/metrics" => text(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", (endpoints.metrics)()),
        "/configz" => text(StatusCode::OK, "application/json", endpoints.configz.clone()),
        "/debug/shadow" => text(StatusCode::OK, "application/json", (endpoints.shadow)()),
        _ => {
            let (code, body) = health::not_found();
            text(code, "text/plain; charset=utf-8", body)
        }
    }
}

fn text(code: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .header(hyper::header::CACHE_CONTROL, "no-cache, private")
        .body(Full::new(Bytes::from(body)))
        .expect("a response")
}

/// A `metav1.Status` body, as upstream's 401, 403 and 500 answers.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    text(code, "application/json", body.to_string())
}
