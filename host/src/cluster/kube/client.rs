//! The process's API clients: HTTPS with HTTP/2 when the API server offers it, as it does (every request, watches
//! included, is a stream on one connection, as with client-go), each behind a client-side rate limit, as
//! client-go's `rest.Config` QPS/Burst. The scheduler's requests and its events go through two clients, each with
//! its own connection and limit, as kube-scheduler's clientset and event clientset have their own limits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ConfigExt};
use thiserror::Error;
use tower::{BoxError, Layer, Service, ServiceBuilder};

/// kube-scheduler's default `clientConnection.qps` (v1 defaults, used when the field is unset or 0).
pub const DEFAULT_QPS: f32 = 50.0;
/// kube-scheduler's default `clientConnection.burst` (unset or 0).
pub const DEFAULT_BURST: i32 = 100;

/// How often an idle HTTP/2 connection is pinged, and how long a ping may go unanswered before the connection is
/// dropped and the next request dials again (client-go's `ReadIdleTimeout` and `PingTimeout`).
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// Requests a client has in flight at most (a watch counts until its response starts). kube-apiserver serves 100
/// concurrent streams per HTTP/2 connection; past that, hyper's pool dials another connection rather than wait
/// (42 connections under a 5,000-pod backlog). 80, plus the ten watches streaming on the same connection, stays
/// under 100, so each client keeps to its one connection.
const MAX_REQUESTS_IN_FLIGHT: usize = 80;

/// The client could not be built.
#[derive(Debug, Error)]
pub enum ClientError {
    /// A rate limit that cannot be honoured.
    #[error("clientConnection.burst: Invalid value: {0}: must be non-negative")]
    Burst(i32),
    /// TLS or authentication settings of the kubeconfig.
    #[error("{0}")]
    Config(#[source] kube::Error),
}

/// `clientConnection.qps` and `burst` after upstream's defaulting: unset or 0 take the defaults; a negative QPS
/// turns the limit off (client-go makes no limiter then).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests per second, sustained; `None`: unlimited.
    pub qps: Option<f64>,
    /// Requests that may go at once after a quiet spell.
    pub burst: u32,
}

impl RateLimit {
    /// The limit a `clientConnection` asks for.
    pub fn from_config(qps: Option<f32>, burst: Option<i32>) -> Result<RateLimit, ClientError> {
        let burst = match burst.unwrap_or(0) {
            b if b < 0 => return Err(ClientError::Burst(b)),
            0 => DEFAULT_BURST,
            b => b,
        };
        let qps = match qps.unwrap_or(0.0) {
            0.0 => Some(f64::from(DEFAULT_QPS)),
            q if q < 0.0 => None,
            q => Some(f64::from(q)),
        };
        Ok(RateLimit { qps, burst: burst as u32 })
    }
}

/// A token bucket with golang.org/x/time/rate's reservation semantics, as client-go's `tokenBucketRateLimiter`
/// uses it: a caller takes a token at once, going into debt when none is left, and waits until the debt would
/// have been refilled — so waiting callers are served in the order they arrived and never re-poll.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    /// Tokens (negative: reserved ahead) as of the instant.
    state: Mutex<(f64, Instant)>,
}

/// The longest a request waits for a token.
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        // A burst of 0 would refuse every request; client-go defaults it before it gets here.
        let burst = f64::from(burst.max(1));
        TokenBucket { qps, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token at `now`; returns how long the caller must wait before using it.
    pub fn reserve_at(&self, now: Instant) -> Duration {
        let mut s = self.state.lock().expect("token bucket lock");
        let elapsed = now.saturating_duration_since(s.1).as_secs_f64();
        let tokens = (s.0 + elapsed * self.qps).min(self.burst) - 1.0;
        *s = (tokens, now.max(s.1));
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            // A tiny qps (1e-30 is valid configuration) makes the wait overflow a Duration: wait a year instead.
            Duration::try_from_secs_f64(-tokens / self.qps).unwrap_or(MAX_WAIT).min(MAX_WAIT)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve_at(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Requests each of the process's clients sent, by client name (`kws_rest_client_requests_total{client}`), so
/// what spends a client's rate limit can be seen. Shared by clones.
#[derive(Clone, Default)]
pub struct RequestCounts(Arc<Mutex<Vec<NamedCounter>>>);

/// A client's name and its counter.
type NamedCounter = (&'static str, Arc<AtomicU64>);

impl RequestCounts {
    /// The counter of the client `name` (one per name).
    fn counter(&self, name: &'static str) -> Arc<AtomicU64> {
        let mut v = self.0.lock().expect("request counts lock");
        if let Some((_, c)) = v.iter().find(|(n, _)| *n == name) {
            return c.clone();
        }
        let c = Arc::new(AtomicU64::new(0));
        v.push((name, c.clone()));
        c
    }

    /// The requests `name` sent so far.
    pub fn get(&self, name: &str) -> u64 {
        let v = self.0.lock().expect("request counts lock");
        v.iter().find(|(n, _)| *n == name).map(|(_, c)| c.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// The counters in Prometheus text format.
    pub fn render(&self) -> String {
        let v = self.0.lock().expect("request counts lock");
        let mut out = String::from(
            "# HELP kws_rest_client_requests_total [ALPHA] Requests sent by each of the scheduler's API clients, \
             counted as they pass the client's rate limiter.\n# TYPE kws_rest_client_requests_total counter\n",
        );
        for (name, c) in v.iter() {
            out.push_str(&format!(
                "kws_rest_client_requests_total{{client=\"{name}\"}} {}\n",
                c.load(Ordering::Relaxed)
            ));
        }
        out
    }
}

/// A tower layer that takes a token before every request (`None`: no limit) and counts the requests.
#[derive(Clone)]
struct RateLimitLayer(Option<Arc<TokenBucket>>, Arc<AtomicU64>);

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, bucket: self.0.clone(), sent: self.1.clone() }
    }
}

/// The service under [`RateLimitLayer`].
#[derive(Clone)]
struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<TokenBucket>>,
    sent: Arc<AtomicU64>,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        // The readied service goes with the request; a clone stays for the next one (tower's usual move).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let bucket = self.bucket.clone();
        self.sent.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            if let Some(b) = bucket {
                b.acquire().await;
            }
            inner.call(req).await
        })
    }
}

/// The scheduler's clients: a connection and a rate limit each.
#[derive(Clone)]
pub struct ApiClients {
    /// Pods, bindings, leases, informers.
    pub main: kube::Client,
    /// Events only (kube-scheduler's separate event clientset), so a storm of events does not slow binding.
    pub events: kube::Client,
    /// What each client sent (`scheduler`, `events`, and any client built later with these counts).
    pub requests: RequestCounts,
}

/// Builds the clients for `config` under `limit`. Must run inside the tokio runtime that will drive them.
pub fn build(config: &kube::Config, limit: RateLimit) -> Result<ApiClients, ClientError> {
    let requests = RequestCounts::default();
    // Two connections, not one: kube-apiserver serves at most 100 concurrent streams per HTTP/2 connection
    // (`--http2-max-streams-per-connection`), and a burst of event writes on the scheduler's connection made
    // bindings wait for a stream behind them (streaming p50 tripled). Go's client would dial extra connections for
    // the overflow; here events have a connection of their own.
    Ok(ApiClients {
        main: build_one(config, limit, "scheduler", &requests)?,
        events: build_one(config, limit, "events", &requests)?,
        requests,
    })
}

/// One client named `name` in `requests`, with a connection and a rate limit of its own. Must run inside the tokio
/// runtime that will drive it.
pub fn build_one(
    config: &kube::Config,
    limit: RateLimit,
    name: &'static str,
    requests: &RequestCounts,
) -> Result<kube::Client, ClientError> {
    let tls = config.rustls_client_config().map_err(ClientError::Config)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    let pool: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            // Pings and idle expiry need a timer.
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .http2_keep_alive_interval(HTTP2_PING_INTERVAL)
            .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
            .http2_keep_alive_while_idle(true)
            .build(https);
    let bucket = limit.qps.map(|q| Arc::new(TokenBucket::new(q, limit.burst)));
    let service = ServiceBuilder::new()
        .concurrency_limit(MAX_REQUESTS_IN_FLIGHT)
        .layer(RateLimitLayer(bucket, requests.counter(name)))
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(ClientError::Config)?)
        .layer(config.extra_headers_layer().map_err(ClientError::Config)?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_limits_follow_upstream() {
        assert_eq!(RateLimit::from_config(None, None).unwrap(), RateLimit { qps: Some(50.0), burst: 100 });
        assert_eq!(RateLimit::from_config(Some(0.0), Some(0)).unwrap(), RateLimit { qps: Some(50.0), burst: 100 });
        assert_eq!(RateLimit::from_config(Some(-1.0), Some(3)).unwrap(), RateLimit { qps: None, burst: 3 });
        assert_eq!(RateLimit::from_config(Some(0.5), Some(1)).unwrap(), RateLimit { qps: Some(0.5), burst: 1 });
        let e = RateLimit::from_config(None, Some(-2)).unwrap_err().to_string();
        assert_eq!(e, "clientConnection.burst: Invalid value: -2: must be non-negative");
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_spaces_callers_in_arrival_order() {
        let t0 = Instant::now();
        let b = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(b.reserve_at(t0), Duration::ZERO, "the burst goes at once");
        }
        // Debt: the 4th waits 0.1 s, the 5th 0.2 s (reserved behind the 4th, not racing it).
        let w4 = b.reserve_at(t0);
        let w5 = b.reserve_at(t0);
        assert!((w4.as_secs_f64() - 0.1).abs() < 1e-9, "{w4:?}");
        assert!((w5.as_secs_f64() - 0.2).abs() < 1e-9, "{w5:?}");
        // One second later the debt (2) is repaid and 8 more tokens refilled, capped at the burst of 3.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..3 {
            assert_eq!(b.reserve_at(t1), Duration::ZERO);
        }
        assert!(b.reserve_at(t1) > Duration::ZERO, "the burst is a cap, not a credit");
    }

    #[test]
    fn a_fractional_rate_waits_whole_periods() {
        let t0 = Instant::now();
        let b = TokenBucket::new(0.5, 1);
        assert_eq!(b.reserve_at(t0), Duration::ZERO);
        assert_eq!(b.reserve_at(t0), Duration::from_secs(2));
    }

    #[test]
    fn a_tiny_rate_waits_long_but_does_not_panic() {
        // 1e-30 qps: the wait does not fit a Duration (it panicked in Duration::from_secs_f64).
        let t0 = Instant::now();
        let b = TokenBucket::new(1e-30, 1);
        assert_eq!(b.reserve_at(t0), Duration::ZERO);
        assert_eq!(b.reserve_at(t0), MAX_WAIT);
    }
}
