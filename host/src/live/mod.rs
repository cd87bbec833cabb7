//! The live scheduler on a real API server: informers feed the cache and the queue, one thread runs scheduling
//! cycles, binding cycles run on their own threads, a Lease elects the leader, and `/healthz` `/livez` `/readyz`
//! `/metrics` answer on HTTP. SIGTERM stops taking pods, lets binding cycles finish, releases the lease, exits 0.

mod leader;
pub mod metrics;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cache::Cache;
use crate::cluster::kube::{informers, KubeCluster};
use crate::config::{LeaderElection, SchedulerConfig};
use crate::framework::{PluginContext, Registry};
use crate::queue::SchedulingQueue;
use crate::scheduler::{build_profiles, RealClock, Scheduler, SchedulerOptions};

/// Share of cycles whose plugin calls are timed for `scheduler_plugin_execution_duration_seconds` (upstream's
/// `pluginMetricsSamplePercent`).
const PLUGIN_METRICS_SAMPLE_PERCENT: u32 = 10;

/// How long unschedulable pods wait before they are retried anyway (upstream `podMaxInUnschedulablePodsDuration`).
const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

/// The live scheduler could not start or run.
#[derive(Debug, Error)]
pub enum LiveError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("cluster access: {0}")]
    Client(String),
    /// A profile could not be built.
    #[error("{0}")]
    Profile(String),
    /// The HTTP endpoint could not be bound.
    #[error("serving on {addr}: {message}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
    /// The lease was lost: another replica may be scheduling.
    #[error("leader election lost")]
    LeaseLost,
}

/// Flags that override or complete the configuration.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// `--kubeconfig` (else `clientConnection.kubeconfig`, else KUBECONFIG, else in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// `--bind-address`:`--secure-port` for the health and metrics endpoints.
    pub serve: SocketAddr,
    /// Leader election after flags.
    pub leader_election: LeaderElection,
    /// This replica's identity in the lease.
    pub identity: String,
    /// Directory relative component paths resolve against.
    pub config_dir: PathBuf,
}

async fn client(cfg: &SchedulerConfig, opts: &LiveOptions) -> Result<kube::Client, LiveError> {
    let path = opts.kubeconfig.clone().or_else(|| {
        let k = &cfg.client_connection.kubeconfig;
        (!k.is_empty()).then(|| PathBuf::from(k))
    });
    let config = match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(&p)
                .map_err(|e| LiveError::Client(format!("{}: {e}", p.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| LiveError::Client(format!("{}: {e}", p.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| LiveError::Client(e.to_string()))?,
    };
    kube::Client::try_from(config).map_err(|e| LiveError::Client(e.to_string()))
}

/// Shared state of a running scheduler.
pub(crate) struct Live {
    pub scheduler: Arc<Scheduler>,
    pub metrics: Arc<metrics::Metrics>,
    pub synced: Arc<AtomicBool>,
    pub running: AtomicBool,
}

/// Runs the scheduler until SIGTERM/SIGINT (Ok) or a lost lease (Err).
pub fn run(cfg: SchedulerConfig, mut registry: Registry, opts: LiveOptions) -> Result<(), LiveError> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    let handle = rt.handle().clone();
    rt.block_on(async move {
        let client = client(&cfg, &opts).await?;
        crate::wasm::register_plugins(&mut registry, &cfg, &opts.config_dir);
        let cluster = Arc::new(KubeCluster::new(client.clone(), handle.clone(), opts.identity.clone()));
        let ctx =
            PluginContext { cluster: cluster.clone(), seed: rand_seed(), reload_period: Some(Duration::from_secs(2)) };
        let profiles = Arc::new(
            build_profiles(&cfg, &registry, &ctx).map_err(|e| LiveError::Profile(format!("{}: {e}", cfg.source)))?,
        );
        let names = profiles.names();
        let metrics = Arc::new(metrics::Metrics::default());
        let queue = SchedulingQueue::new(profiles.clone(), &names, cfg.pod_initial_backoff, cfg.pod_max_backoff)
            .with_observer(metrics.clone());
        let scheduler = Arc::new(Scheduler::new(
            profiles,
            queue,
            Cache::new(),
            cluster,
            Arc::new(RealClock::default()),
            metrics.clone(),
            SchedulerOptions {
                seed: ctx.seed,
                async_binding: true,
                trace_pods: Vec::new(),
                plugin_metrics_sample_percent: PLUGIN_METRICS_SAMPLE_PERCENT,
            },
        ));
        let live = Arc::new(Live { scheduler, metrics, synced: Arc::default(), running: AtomicBool::new(true) });

        let listener = tokio::net::TcpListener::bind(opts.serve)
            .await
            .map_err(|e| LiveError::Serve { addr: opts.serve, message: e.to_string() })?;
        tokio::spawn(serve(listener, live.clone()));
        tracing::info!(addr = %opts.serve, "serving /healthz /livez /readyz /metrics");

        let lease = leader::Lease::new(client.clone(), &opts.leader_election, opts.identity.clone());
        if opts.leader_election.leader_elect {
            tokio::select! {
                r = lease.acquire() => r?,
                _ = shutdown_signal() => return Ok(()),
            }
            tracing::info!(identity = %opts.identity, lease = %opts.leader_election.resource_name, "became leader");
        }

        informers::start(client.clone(), live.scheduler.clone(), live.synced.clone());
        let loop_live = live.clone();
        let loop_thread = std::thread::Builder::new()
            .name("scheduling".into())
            .spawn(move || scheduling_loop(loop_live))
            .expect("spawn the scheduling loop");

        let outcome = if opts.leader_election.leader_elect {
            tokio::select! {
                r = lease.keep() => r,
                _ = shutdown_signal() => Ok(()),
            }
        } else {
            shutdown_signal().await;
            Ok(())
        };
        // Stop taking pods; binding cycles in flight finish (or unwind) before the lease is released.
        live.running.store(false, Ordering::SeqCst);
        let _ = tokio::task::spawn_blocking(move || loop_thread.join()).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while live.scheduler.bindings_in_flight() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if opts.leader_election.leader_elect {
            lease.release().await;
        }
        tracing::info!("stopped");
        outcome
    })
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        ^ u64::from(std::process::id())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
}

fn scheduling_loop(live: Arc<Live>) {
    let s = &live.scheduler;
    let mut last_flush = Instant::now();
    while live.running.load(Ordering::SeqCst) {
        if !live.synced.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let now = s.clock.now();
        {
            let mut q = s.queue.lock().expect("queue lock");
            q.flush_backoff_completed(now);
            if last_flush.elapsed() > Duration::from_secs(30) {
                q.flush_unschedulable_leftover(now, MAX_IN_UNSCHEDULABLE);
                last_flush = Instant::now();
            }
        }
        if !s.schedule_one() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

async fn serve(listener: tokio::net::TcpListener, live: Arc<Live>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { continue };
        let live = live.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, body, ctype) = match path {
                "/healthz" | "/livez" => (200, "ok".to_string(), "text/plain"),
                "/readyz" if live.synced.load(Ordering::SeqCst) => (200, "ok".to_string(), "text/plain"),
                "/readyz" => (503, "caches not synced".to_string(), "text/plain"),
                "/metrics" => (200, live.metrics.render(&live.scheduler), "text/plain; version=0.0.4"),
                _ => (404, "not found".to_string(), "text/plain"),
            };
            let reason = match code {
                200 => "OK",
                503 => "Service Unavailable",
                _ => "Not Found",
            };
            let resp = format!("HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            let _ = sock.write_all(resp.as_bytes()).await;
        });
    }
}
