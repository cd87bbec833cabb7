//! How long a connection to the HTTPS endpoint may take and sit, and how many may be open, after k8s.io/apiserver's
//! `pkg/server/secure_serving.go` (`ReadHeaderTimeout` 32 s, `IdleTimeout` 90 s, HTTP/2 `MaxConcurrentStreams`)
//! and Go's net/http server, whose TLS handshake is bounded by the same deadline.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::config::parse_go_duration;

use super::ServeError;

/// The environment variable that overrides the limits (tests and `make campaign` shorten them; no flag upstream).
pub const LIMITS_ENV: &str = "KWS_SERVING_LIMITS";

/// Time and connection limits of the HTTPS endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServingLimits {
    /// From accepting a connection to the end of its TLS handshake.
    pub handshake_timeout: Duration,
    /// From the end of the handshake (first request) or the first byte of a request (later ones) to the end of
    /// its header: upstream's `ReadHeaderTimeout`.
    pub read_header_timeout: Duration,
    /// How long a connection may wait, no request in flight, for its next request (HTTP/1.1) or stream
    /// (HTTP/2): upstream's `IdleTimeout`.
    pub idle_timeout: Duration,
    /// Connections open at most (handshaking, idle or serving).
    pub max_connections: usize,
}

impl Default for ServingLimits {
    fn default() -> Self {
        ServingLimits {
            // Go bounds the handshake by ReadHeaderTimeout (32 s); 10 s is Go's http2 preface timeout and
            // client-go's TLSHandshakeTimeout, plenty on a network where the endpoint is scraped.
            handshake_timeout: Duration::from_secs(10),
            read_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            // Upstream has no cap (its fds are bounded by RLIMIT_NOFILE, which Go raises to the hard limit). This
            // process keeps the soft limit, often 1024: half of it for the endpoint leaves the rest for the API
            // connections, plugin files and the kernel backlog, and is far above what probes and scrapers use.
            max_connections: 512,
        }
    }
}

impl ServingLimits {
    /// The defaults, overridden by [`LIMITS_ENV`] when set: comma-separated `handshake=`, `header=`, `idle=`
    /// (Go durations) and `connections=` (a count), e.g. `header=2s,idle=3s,connections=16`.
    pub fn from_env() -> Result<ServingLimits, ServeError> {
        match std::env::var(LIMITS_ENV) {
            Ok(v) => ServingLimits::parse(&v),
            Err(_) => Ok(ServingLimits::default()),
        }
    }

    fn parse(v: &str) -> Result<ServingLimits, ServeError> {
        let bad = |message: String| ServeError::Limits { var: LIMITS_ENV, message };
        let mut l = ServingLimits::default();
        for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            let duration = || match parse_go_duration(value) {
                Ok(d) if !d.is_zero() => Ok(d),
                Ok(_) => Err(bad(format!("{key}: must be positive"))),
                Err(e) => Err(bad(format!("{key}: {e}"))),
            };
            match key {
                "handshake" => l.handshake_timeout = duration()?,
                "header" => l.read_header_timeout = duration()?,
                "idle" => l.idle_timeout = duration()?,
                "connections" => {
                    l.max_connections = value
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad(format!("connections: {value:?} is not a positive count")))?
                }
                _ => return Err(bad(format!("unknown key {key:?} (handshake, header, idle, connections)"))),
            }
        }
        Ok(l)
    }
}

/// The open connections, for the cap: each registered until it ends or is evicted.
pub(crate) struct Connections {
    limits: ServingLimits,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    by_id: HashMap<u64, Arc<Activity>>,
}

impl Connections {
    /// No connection yet.
    pub fn new(limits: ServingLimits) -> Connections {
        Connections { limits, open: Mutex::default() }
    }

    /// The limits in force.
    pub fn limits(&self) -> &ServingLimits {
        &self.limits
    }

    /// Connections open now.
    pub fn count(&self) -> usize {
        self.open.lock().expect("connections lock").by_id.len()
    }

    /// Registers a new connection. At the cap, the connection that has waited longest without a request in flight
    /// is told to close and makes room; when every connection is serving a request, `None`: the new one is
    /// refused (requests here take milliseconds, so this only lasts as long as an attack that completes them).
    pub fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut open = self.open.lock().expect("connections lock");
        if open.by_id.len() >= self.limits.max_connections {
            let oldest =
                open.by_id.iter().filter_map(|(id, a)| a.waiting_since().map(|t| (t, *id))).min().map(|(_, id)| id)?;
            if let Some(a) = open.by_id.remove(&oldest) {
                a.evict.notify_one();
            }
        }
        let id = open.next;
        open.next += 1;
        let activity = Arc::new(Activity::new());
        open.by_id.insert(id, activity.clone());
        Some(Admitted { id, activity, connections: self.clone() })
    }
}

/// A registered connection; dropping it unregisters it.
pub(crate) struct Admitted {
    id: u64,
    /// What the connection is doing.
    pub activity: Arc<Activity>,
    connections: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.open.lock().expect("connections lock").by_id.remove(&self.id);
    }
}

/// What one connection is doing, for its deadlines and for eviction.
pub(crate) struct Activity {
    state: Mutex<ActivityState>,
    /// Notified when the connection must close to make room.
    pub evict: Notify,
    /// Notified when a deadline may have moved (a request started or ended, a request's first byte arrived).
    pub changed: Notify,
}

struct ActivityState {
    /// Requests being handled.
    in_flight: usize,
    /// Since when nothing has been in flight (accept, end of handshake, end of the last request).
    idle_since: Instant,
    /// HTTP/1.1: when the first byte of the next request arrived, if one did.
    reading_since: Option<Instant>,
    /// Requests answered so far.
    served: u64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                idle_since: Instant::now(),
                reading_since: None,
                served: 0,
            }),
            evict: Notify::new(),
            changed: Notify::new(),
        }
    }

    /// Since when the connection has had nothing in flight (`None`: serving a request).
    fn waiting_since(&self) -> Option<Instant> {
        let s = self.state.lock().expect("activity lock");
        (s.in_flight == 0).then_some(s.idle_since)
    }

    /// The handshake is done: the wait for the first request starts.
    pub fn handshake_done(&self) {
        self.state.lock().expect("activity lock").idle_since = Instant::now();
    }

    /// Bytes arrived: on an HTTP/1.1 connection with nothing in flight, the next request's header has begun.
    fn read_some(&self) {
        let mut s = self.state.lock().expect("activity lock");
        if s.in_flight == 0 && s.reading_since.is_none() {
            s.reading_since = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// A request was handed to the handler; the returned guard marks its end.
    pub fn request(self: &Arc<Self>) -> InFlight {
        let mut s = self.state.lock().expect("activity lock");
        s.in_flight += 1;
        s.reading_since = None;
        InFlight(self.clone())
    }

    /// When the connection must close if nothing changes (`None`: a request is in flight, which has no deadline).
    /// As Go's server: HTTP/1.1's first header is due `read_header_timeout` after the handshake, a later one that
    /// long after its first byte, and between requests the wait is `idle_timeout`; HTTP/2 has only the idle wait
    /// (no stream open).
    pub fn deadline(&self, limits: &ServingLimits, http2: bool) -> Option<Instant> {
        let s = self.state.lock().expect("activity lock");
        if s.in_flight > 0 {
            return None;
        }
        Some(match (http2, s.served, s.reading_since) {
            (true, _, _) => s.idle_since + limits.idle_timeout,
            (false, 0, _) => s.idle_since + limits.read_header_timeout,
            (false, _, Some(t)) => t + limits.read_header_timeout,
            (false, _, None) => s.idle_since + limits.idle_timeout,
        })
    }
}

/// A request in flight; dropped when its handler returns (or is dropped).
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().expect("activity lock");
        s.in_flight -= 1;
        s.served += 1;
        if s.in_flight == 0 {
            s.idle_since = Instant::now();
        }
        drop(s);
        self.0.changed.notify_one();
    }
}

/// A connection's stream that tells its [`Activity`] when bytes arrive.
pub(crate) struct Tracked<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> Tracked<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, activity: Arc<Activity>) -> Tracked<T> {
        Tracked { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_some();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_names_the_variable_and_the_key() {
        let l = ServingLimits::parse("header=2s, idle=3s,connections=16").unwrap();
        assert_eq!(
            l,
            ServingLimits {
                read_header_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(3),
                max_connections: 16,
                ..ServingLimits::default()
            }
        );
        for (bad, want) in [("idle=0s", "idle"), ("connections=0", "connections"), ("header", "header"), ("x=1", "x")] {
            let e = ServingLimits::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("KWS_SERVING_LIMITS: ") && e.contains(want), "{bad}: {e}");
        }
    }
}
