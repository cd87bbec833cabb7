//! The live scheduler on a real API server: informers feed the cache and the queue, one thread runs scheduling
//! cycles, binding cycles run as tasks (a bounded number at a time; their plugin code on threads of its own), all
//! API calls share one rate-limited HTTP/2 connection pool, a Lease elects the leader, and `/healthz` `/livez`
//! `/readyz` `/metrics` `/configz` answer over HTTPS with delegated authentication and authorization
//! (`crate::server`).
//! SIGTERM stops taking pods, lets binding cycles finish, releases the lease, exits 0.

mod leader;
pub mod metrics;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::cache::Cache;
use crate::cluster::kube::client::{self as kube_client, ApiClients, RateLimit};
use crate::cluster::kube::{informers, KubeCluster};
use crate::config::{LeaderElection, SchedulerConfig};
use crate::framework::metrics::PluginMetrics;
use crate::framework::{Code, CycleTrace, PluginContext, PodInfo, Registry};
use crate::queue::SchedulingQueue;
use crate::scheduler::{build_profiles, AttemptResult, Observer, RealClock, Scheduler, SchedulerOptions};
use crate::server::{
    self, Authenticator, Authorizer, DelegatingAuthenticationOptions, DelegatingAuthorizationOptions, Endpoints,
    HealthCheck, SecureServingOptions, ServeError,
};

/// Share of cycles whose plugin calls are timed for `scheduler_plugin_execution_duration_seconds` (upstream's
/// `pluginMetricsSamplePercent`).
const PLUGIN_METRICS_SAMPLE_PERCENT: u32 = 10;

/// The review clients' limit: k8s.io/apiserver's delegated authentication and authorization set QPS 200 and burst
/// 400 on theirs, "since this will effectively limit API server responsiveness".
const REVIEW_LIMIT: RateLimit = RateLimit { qps: Some(200.0), burst: 400 };

/// How long shutdown waits for queued events to be written.
const EVENTS_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Verbosity from which every attempt gets a log line (kube-scheduler logs "Successfully bound pod" at V(2)).
const POD_LOG_VERBOSITY: u32 = 2;

/// The live scheduler could not start or run.
#[derive(Debug, Error)]
pub enum LiveError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("cluster access: {0}")]
    Client(String),
    /// A profile could not be built.
    #[error("{0}")]
    Profile(String),
    /// The HTTPS endpoint could not be set up.
    #[error(transparent)]
    Serving(#[from] ServeError),
    /// The lease was lost: another replica may be scheduling.
    #[error("leader election lost")]
    LeaseLost,
}

/// Flags that override or complete the configuration.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// `--kubeconfig` (else `clientConnection.kubeconfig`, else KUBECONFIG, else in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: the API server's address, over the kubeconfig's.
    pub master: Option<String>,
    /// `--bind-address`, `--secure-port` and TLS (port 0: nothing is served).
    pub serving: SecureServingOptions,
    /// Who may call the endpoints: how requests are authenticated.
    pub authentication: DelegatingAuthenticationOptions,
    /// Who may call the endpoints: how requests are authorized.
    pub authorization: DelegatingAuthorizationOptions,
    /// `-v`: from 2, a log line per scheduling attempt.
    pub verbosity: u32,
    /// `--pod-max-in-unschedulable-pods-duration`.
    pub pod_max_in_unschedulable: Duration,
    /// Leader election after flags.
    pub leader_election: LeaderElection,
    /// This replica's identity in the lease.
    pub identity: String,
    /// Directory relative component paths resolve against.
    pub config_dir: PathBuf,
    /// `--explain`: pods (`ns/name`) whose attempts are logged with every plugin's and extender's verdicts.
    pub explain: Vec<String>,
    /// What `/flagz` shows (None: the ComponentFlagz gate is off).
    pub flagz: Option<std::collections::BTreeMap<String, String>>,
    /// Whether `/statusz` is served (the ComponentStatusz gate).
    pub statusz: bool,
}

/// The process's clients (one connection pool; the scheduler's and the events' rate limits) from `--kubeconfig`,
/// else `clientConnection.kubeconfig`, else KUBECONFIG, else in-cluster; `--master` overrides the server. Returns
/// the configuration too, for the review clients.
async fn clients(cfg: &SchedulerConfig, opts: &LiveOptions) -> Result<(ApiClients, kube::Config), LiveError> {
    let path = opts.kubeconfig.clone().or_else(|| {
        let k = &cfg.client_connection.kubeconfig;
        (!k.is_empty()).then(|| PathBuf::from(k))
    });
    let mut config = match path {
        Some(p) => kubeconfig(&p).await?,
        None => kube::Config::infer().await.map_err(|e| LiveError::Client(e.to_string()))?,
    };
    if let Some(master) = &opts.master {
        config.cluster_url = master.parse().map_err(|e| LiveError::Client(format!("--master {master:?}: {e}")))?;
    }
    let cc = &cfg.client_connection;
    let limit = RateLimit::from_config(cc.qps, cc.burst).map_err(|e| LiveError::Client(e.to_string()))?;
    let clients = kube_client::build(&config, limit).map_err(|e| LiveError::Client(e.to_string()))?;
    Ok((clients, config))
}

async fn kubeconfig(p: &Path) -> Result<kube::Config, LiveError> {
    let kc = kube::config::Kubeconfig::read_from(p).map_err(|e| LiveError::Client(format!("{}: {e}", p.display())))?;
    kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| LiveError::Client(format!("{}: {e}", p.display())))
}

/// The client for TokenReviews (`name` "authentication") or SubjectAccessReviews ("authorization"): from
/// `--authentication-kubeconfig` or `--authorization-kubeconfig`, else the scheduler's own configuration, always with
/// a connection and a rate limit of its own (upstream's QPS 200, burst 400), so requests to the endpoint never
/// spend the scheduler's limit. Upstream falls back to the in-cluster configuration only; the scheduler's own also
/// serves a scheduler run outside the cluster.
async fn review_client(
    path: Option<&Path>,
    own: &kube::Config,
    name: &'static str,
    requests: &kube_client::RequestCounts,
) -> Result<kube::Client, LiveError> {
    let config = match path {
        Some(p) => kubeconfig(p).await?,
        None => own.clone(),
    };
    let at = |e: kube_client::ClientError| match path {
        Some(p) => LiveError::Client(format!("{}: {e}", p.display())),
        None => LiveError::Client(e.to_string()),
    };
    kube_client::build_one(&config, REVIEW_LIMIT, name, requests).map_err(at)
}

/// Starts HTTPS serving of the health, metrics and configuration endpoints.
async fn start_serving(
    cfg: &SchedulerConfig,
    opts: &LiveOptions,
    clients: &ApiClients,
    config: &kube::Config,
    live: &Arc<Live>,
) -> Result<(), LiveError> {
    let (own, requests) = (config, &clients.requests);
    let authn_path = opts.authentication.remote_kubeconfig.as_deref();
    let authn_client = review_client(authn_path, own, "authentication", requests).await?;
    let authz_path = opts.authorization.remote_kubeconfig.as_deref();
    let authz_client = review_client(authz_path, own, "authorization", requests).await?;
    let authn = Authenticator::new(&opts.authentication, Some(authn_client)).await?;
    let authz = Authorizer::new(&opts.authorization, Some(authz_client));
    let (ready, running, scrape, shadow, requests) =
        (live.clone(), live.clone(), live.clone(), live.clone(), clients.requests.clone());
    // Upstream's checks: leaderElection on /healthz and /readyz with leader election, shutdown and
    // sched-handler-sync on /readyz. Its leaderElection watchdog fails once a leader's lease is 20 s past expiry;
    // this process exits when it cannot renew within the renew deadline, so while it answers, the check passes.
    let leader_election = || HealthCheck::new("leaderElection", || Ok(()));
    let le = opts.leader_election.leader_elect;
    let mut readyz: Vec<HealthCheck> = le.then(leader_election).into_iter().collect();
    readyz.push(HealthCheck::new("shutdown", move || {
        if running.running.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("process is shutting down".into())
        }
    }));
    readyz.push(HealthCheck::new("sched-handler-sync", move || {
        if ready.synced.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("handlers are not fully synchronized".into())
        }
    }));
    // What upstream's mux lists when /statusz is installed (itself not yet among them); /debug/shadow is ours and
    // unlisted, as upstream's debugging handlers are.
    let listed: Vec<&str> = ["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"]
        .into_iter()
        .filter(|p| *p != "/flagz" || opts.flagz.is_some())
        .collect();
    let endpoints = Endpoints {
        healthz: le.then(leader_election).into_iter().collect(),
        livez: Vec::new(),
        readyz,
        metrics: Box::new(move || scrape.metrics.render(&scrape.scheduler) + &requests.render()),
        configz: configz(cfg),
        shadow: Box::new(move || shadow.scheduler.shadows().to_json()),
        zpages: server::ZPages::new(opts.flagz.clone(), opts.statusz, &listed),
    };
    let served = server::serve(&opts.serving, authn, authz, endpoints).await?;
    tracing::info!(addr = %served.local_addr, "serving securely /healthz /livez /readyz /metrics /configz /flagz /statusz /debug/shadow");
    Ok(())
}

/// `/configz`'s body: the effective configuration under upstream's `componentconfig` key, with
/// `clientConnection.qps` and `burst` as upstream's defaulting leaves them (0 or unset: 50 and 100; a negative QPS,
/// which turns the limiter off, as given) rather than unset.
fn configz(cfg: &SchedulerConfig) -> String {
    let mut effective = cfg.clone();
    let cc = &mut effective.client_connection;
    cc.qps = Some(cc.qps.filter(|q| *q != 0.0).unwrap_or(kube_client::DEFAULT_QPS));
    cc.burst = Some(cc.burst.filter(|b| *b != 0).unwrap_or(kube_client::DEFAULT_BURST));
    // v1.37 serves the versioned object: its kind and apiVersion lead the configuration.
    let mut body = serde_json::json!({
        "kind": crate::config::KIND,
        "apiVersion": crate::config::API_VERSION,
    });
    if let (Some(o), serde_json::Value::Object(fields)) = (body.as_object_mut(), serde_json::json!(effective)) {
        o.extend(fields);
    }
    serde_json::json!({ "componentconfig": body }).to_string()
}

/// Logs each attempt from `-v=2` (as kube-scheduler's "Successfully bound pod" and "Unable to schedule pod"),
/// errors always, and hands everything on to the metrics.
struct LoggingObserver {
    metrics: Arc<metrics::Metrics>,
    verbosity: u32,
}

impl PluginMetrics for LoggingObserver {
    fn plugin_execution(&self, plugin: &str, point: &'static str, status: Code, d: Duration) {
        self.metrics.plugin_execution(plugin, point, status, d);
    }
}

impl crate::framework::metrics::BatchMetrics for LoggingObserver {
    fn batch_attempt(&self, profile: &str, result: &'static str) {
        self.metrics.batch_attempt(profile, result);
    }
    fn batch_cache_flushed(&self, profile: &str, reason: &'static str) {
        self.metrics.batch_cache_flushed(profile, reason);
    }
    fn batch_rescore(&self, profile: &str, d: Duration) {
        self.metrics.batch_rescore(profile, d);
    }
    fn get_node_hint(&self, profile: &str, hinted: bool, d: Duration) {
        self.metrics.get_node_hint(profile, hinted, d);
    }
    fn store_schedule_results(&self, profile: &str, d: Duration) {
        self.metrics.store_schedule_results(profile, d);
    }
}

impl Observer for LoggingObserver {
    fn attempt(&self, profile: &str, pod: &PodInfo, result: &AttemptResult, d: Duration, t: Option<CycleTrace>) {
        let verbose = self.verbosity >= POD_LOG_VERBOSITY;
        match result {
            AttemptResult::Scheduled(node) if verbose => {
                tracing::info!(pod = %pod.key(), node = %node, profile, "scheduled")
            }
            AttemptResult::Unschedulable(msg) if verbose => {
                tracing::info!(pod = %pod.key(), profile, "unschedulable: {msg}")
            }
            AttemptResult::Error(msg) => tracing::warn!(pod = %pod.key(), profile, "scheduling error: {msg}"),
            _ => {}
        }
        if let Some(trace) = &t {
            // Traced only for the pods named by --explain: one multi-line record per attempt.
            let outcome = match result {
                AttemptResult::Scheduled(node) => format!("scheduled on {node}"),
                AttemptResult::Unschedulable(msg) => msg.clone(),
                AttemptResult::Error(msg) => format!("error: {msg}"),
            };
            let text = crate::sim::render_trace(&pod.key(), 0, &outcome, trace);
            tracing::info!(pod = %pod.key(), profile, "explain:\n{text}");
        }
        self.metrics.attempt(profile, pod, result, d, t);
    }

    fn preempted(&self, victim: &PodInfo, preemptor: &PodInfo, node: &str) {
        if self.verbosity >= POD_LOG_VERBOSITY {
            tracing::info!(victim = %victim.key(), preemptor = %preemptor.key(), node, "preempted");
        }
        self.metrics.preempted(victim, preemptor, node);
    }

    fn extension_point(&self, profile: &str, point: &'static str, status: Code, d: Duration) {
        self.metrics.extension_point(profile, point, status, d);
    }

    fn scheduling_algorithm(&self, d: Duration) {
        self.metrics.scheduling_algorithm(d);
    }

    fn preemption_attempt(&self, victims: Option<usize>) {
        self.metrics.preemption_attempt(victims);
    }

    fn permit_wait(&self, result: Code, d: Duration) {
        self.metrics.permit_wait(result, d);
    }

    fn pod_scheduled(&self, attempts: u32, since_queued: Option<Duration>) {
        self.metrics.pod_scheduled(attempts, since_queued);
    }

    fn pod_scheduled_after_flush(&self) {
        self.metrics.pod_scheduled_after_flush();
    }

    fn pod_group_attempt(&self, profile: &str, result: &'static str, d: Duration) {
        self.metrics.pod_group_attempt(profile, result, d);
    }

    fn pod_group_algorithm(&self, d: Duration) {
        self.metrics.pod_group_algorithm(d);
    }
}

/// Shared state of a running scheduler.
pub(crate) struct Live {
    pub scheduler: Arc<Scheduler>,
    pub metrics: Arc<metrics::Metrics>,
    pub synced: Arc<AtomicBool>,
    pub running: AtomicBool,
    pub max_in_unschedulable: Duration,
}

/// Runs the scheduler until SIGTERM/SIGINT (Ok) or a lost lease (Err).
pub fn run(cfg: SchedulerConfig, mut registry: Registry, opts: LiveOptions) -> Result<(), LiveError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Binding cycles hold at most DEFAULT_MAX_BINDINGS_IN_FLIGHT of these; the rest is headroom.
        .max_blocking_threads(2 * crate::scheduler::DEFAULT_MAX_BINDINGS_IN_FLIGHT)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let handle = rt.handle().clone();
    rt.block_on(async move {
        let (clients, config) = clients(&cfg, &opts).await?;
        let client = clients.main.clone();
        crate::wasm::register_plugins(&mut registry, &cfg, &opts.config_dir);
        let cluster =
            Arc::new(KubeCluster::new(client.clone(), clients.events.clone(), handle.clone(), opts.identity.clone()));
        let events = cluster.events().clone();
        // A refused Wasm plugin version (log line and counter in wasm/reload.rs) is also a Warning Event.
        let (recorder, le, instance) = (events.clone(), cfg.leader_election.clone(), opts.identity.clone());
        crate::wasm::observe_refusals(Arc::new(move |refused| {
            let e = crate::cluster::kube::refused_version_event(
                &le.resource_namespace,
                &le.resource_name,
                &instance,
                refused.plugin,
                refused.source,
                refused.error,
            );
            recorder.record(e);
        }));
        let metrics = Arc::new(metrics::Metrics::default());
        if cfg.features.generic_workload {
            metrics.enable_pod_groups().map_err(|e| LiveError::Profile(format!("metrics: {e}")))?;
        }
        if cfg.features.scheduler_async_preemption {
            metrics.enable_async_preemption().map_err(|e| LiveError::Profile(format!("metrics: {e}")))?;
        }
        if cfg.features.dra_device_binding_conditions {
            metrics.enable_dra_binding_conditions().map_err(|e| LiveError::Profile(format!("metrics: {e}")))?;
        }
        let ctx = PluginContext {
            seed: rand_seed(),
            reload_period: Some(Duration::from_secs(2)),
            dra_metrics: metrics.clone(),
            ..PluginContext::new(cluster.clone())
        };
        let profiles = Arc::new(
            build_profiles(&cfg, &registry, &ctx).map_err(|e| LiveError::Profile(format!("{}: {e}", cfg.source)))?,
        );
        let names = profiles.names();
        // Tenant policies are watched only where a profile serves them; their CRDs must then be installed.
        let policies = profiles.uses_plugin(crate::tenancy::NAME);
        if policies {
            crate::cluster::kube::policies::served(&client).await.map_err(LiveError::Profile)?;
        }
        if cfg.features.generic_workload {
            crate::cluster::kube::pod_groups::served(&client).await.map_err(LiveError::Profile)?;
        }
        let queue = SchedulingQueue::new(profiles.clone(), &names, cfg.pod_initial_backoff, cfg.pod_max_backoff)
            .with_pop_from_backoff(cfg.features.scheduler_pop_from_backoff_q)
            .with_observer(metrics.clone());
        let scheduler = Arc::new(
            Scheduler::new(
                profiles,
                queue,
                Cache::new(),
                cluster,
                Arc::new(RealClock::default()),
                Arc::new(LoggingObserver { metrics: metrics.clone(), verbosity: opts.verbosity }),
                SchedulerOptions {
                    seed: ctx.seed,
                    async_binding: true,
                    trace_pods: opts.explain.clone(),
                    plugin_metrics_sample_percent: PLUGIN_METRICS_SAMPLE_PERCENT,
                    ..Default::default()
                },
            )
            .with_binding_runtime(handle.clone())
            .with_extenders(crate::extender::Extenders::new(&cfg.extenders)),
        );
        let live = Arc::new(Live {
            scheduler,
            metrics,
            synced: Arc::default(),
            running: AtomicBool::new(true),
            max_in_unschedulable: opts.pod_max_in_unschedulable,
        });
        if opts.serving.bind_port != 0 {
            start_serving(&cfg, &opts, &clients, &config, &live).await?;
        }

        let lease = leader::Lease::new(client.clone(), &opts.leader_election, opts.identity.clone());
        if opts.leader_election.leader_elect {
            tokio::select! {
                r = lease.acquire() => r?,
                _ = shutdown_signal() => return Ok(()),
            }
            tracing::info!(identity = %opts.identity, lease = %opts.leader_election.resource_name, "became leader");
        }

        // One request on each client before requests go out in bursts (the informers' twenty lists and watches at
        // once, then a backlog's bindings and events), so the bursts find the connection up and share it as HTTP/2
        // streams. On a cold client each request of a burst would dial a connection of its own: the pool cannot
        // know the server speaks HTTP/2 until ALPN says so (hyper-util locks a dial only for a pool known to be
        // HTTP/2), and the extra connections linger (5 to 11 under a loaded backlog, where 2 are needed).
        let (main_up, events_up) = tokio::join!(client.apiserver_version(), clients.events.apiserver_version());
        if let Err(e) = main_up.and(events_up) {
            tracing::warn!(error = %e, "asking the API server for its version before the informers start");
        }
        // DeviceTaintRules are resource.k8s.io/v1 from v1.37 on. Where the gate is on but the API server is older
        // and does not serve them, no rule can exist: the scheduler runs without them rather than wait forever for
        // a watch that cannot start (kube-scheduler v1.37 would; --emulated-version=1.36 turns the gate off).
        let device_taint_rules = cfg.features.dra_device_taint_rules
            && informers::serves::<k8s_openapi::api::resource::v1::DeviceTaintRule>(&client).await;
        if cfg.features.dra_device_taint_rules && !device_taint_rules {
            tracing::warn!(
                "deviceTaintRules.resource.k8s.io/v1 is not served by the API server (a release before v1.37): no \
                 DeviceTaintRule applies; --emulated-version gives the gates of the cluster's release"
            );
        }
        let watched = informers::Watched { policies, pod_groups: cfg.features.generic_workload, device_taint_rules };
        informers::start(client.clone(), live.scheduler.clone(), live.synced.clone(), watched);
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
        // Events are written in the background: the last bindings' (and the series' latest counts) still go out,
        // after the lease so a successor is not kept waiting.
        events.flush(EVENTS_FLUSH_TIMEOUT).await;
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
    let mut plugins_synced = false;
    while live.running.load(Ordering::SeqCst) {
        if !live.synced.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if !plugins_synced {
            s.profiles.cluster_synced();
            plugins_synced = true;
        }
        let now = s.clock.now();
        {
            let mut q = s.queue.lock().expect("queue lock");
            q.flush_backoff_completed(now);
            if last_flush.elapsed() > Duration::from_secs(30) {
                q.flush_unschedulable_leftover(now, live.max_in_unschedulable);
                last_flush = Instant::now();
            }
        }
        if !s.schedule_one() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logging_observer_feeds_every_metric_hook() {
        let metrics = Arc::new(metrics::Metrics::default());
        let o = LoggingObserver { metrics: metrics.clone(), verbosity: 0 };
        o.scheduling_algorithm(Duration::from_millis(2));
        o.preemption_attempt(Some(1));
        o.permit_wait(Code::Success, Duration::from_millis(5));
        o.pod_scheduled(1, Some(Duration::from_millis(9)));
        o.pod_scheduled_after_flush();
        let out = metrics.render_state(&metrics::SchedulerState::default());
        for line in [
            "scheduler_scheduling_algorithm_duration_seconds_count 1",
            "scheduler_preemption_attempts_total 1",
            "scheduler_preemption_victims_count 1",
            r#"scheduler_permit_wait_duration_seconds_count{result="Success"} 1"#,
            "scheduler_pod_scheduling_attempts_count 1",
            r#"scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1"#,
            "scheduler_pod_scheduled_after_flush_total 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing:\n{out}");
        }
    }

    #[test]
    fn configz_shows_the_effective_client_limits() {
        let qps_burst = |cfg: &SchedulerConfig| {
            let v: serde_json::Value = serde_json::from_str(&configz(cfg)).unwrap();
            let cc = &v["componentconfig"]["clientConnection"];
            (cc["qps"].as_f64(), cc["burst"].as_i64())
        };
        let mut cfg = SchedulerConfig::default_config();
        assert_eq!(qps_burst(&cfg), (Some(50.0), Some(100)), "upstream's defaults");
        let v: serde_json::Value = serde_json::from_str(&configz(&cfg)).unwrap();
        assert_eq!(v["componentconfig"]["kind"], "KubeSchedulerConfiguration");
        assert_eq!(v["componentconfig"]["apiVersion"], "kubescheduler.config.k8s.io/v1");
        cfg.client_connection.qps = Some(5.0);
        cfg.client_connection.burst = Some(7);
        assert_eq!(qps_burst(&cfg), (Some(5.0), Some(7)));
        // A negative QPS turns the limiter off and is shown as given, as upstream keeps it.
        cfg.client_connection.qps = Some(-1.0);
        cfg.client_connection.burst = Some(0);
        assert_eq!(qps_burst(&cfg), (Some(-1.0), Some(100)));
    }
}
