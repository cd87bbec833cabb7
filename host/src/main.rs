//! The `kube-wasm-scheduler` binary: `simulate` (offline, the default way to try a profile), `bench`, and the
//! live scheduler.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};

use kube_wasm_scheduler::author;
use kube_wasm_scheduler::config::{self, SchedulerConfig};
use kube_wasm_scheduler::framework::Registry;
use kube_wasm_scheduler::live::{LiveError, LiveOptions};
use kube_wasm_scheduler::options::{self, LoggingFormat, Options};
use kube_wasm_scheduler::sim::{self, render_explain, render_table, SimOptions, Simulation};
use kube_wasm_scheduler::wasm;
use kube_wasm_scheduler::yaml::escape_controls;

/// The binary's plugins: the in-tree ones and the tenant policies' `TenantPolicies`.
fn in_tree_registry() -> Registry {
    let mut r = kube_wasm_scheduler::plugins::in_tree_registry();
    kube_wasm_scheduler::tenancy::register(&mut r);
    r
}

/// A Kubernetes scheduler that runs the framework cycle natively and serves extension points from WebAssembly
/// components. Without a subcommand it runs on a cluster and takes kube-scheduler's flags (see `--help`).
#[derive(Parser, Debug)]
#[command(name = "kube-wasm-scheduler", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands; any other first argument starts the live scheduler.
const SUBCOMMANDS: &[&str] = &["simulate", "snapshot", "plugin", "bench", "help"];

#[derive(Subcommand, Debug)]
enum Command {
    /// Schedule the pending pods of a cluster file offline and print where each goes.
    Simulate {
        /// KubeSchedulerConfiguration (v1). Upstream's default profile when omitted. Given more than once, each
        /// runs on the same cluster and seed and the runs are compared side by side.
        #[arg(long)]
        config: Vec<PathBuf>,
        /// Multi-document Kubernetes YAML: Nodes, Pods, PriorityClasses, PodDisruptionBudgets, ...
        #[arg(long)]
        cluster: PathBuf,
        /// Seed for breaking score ties.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Show per-node filter verdicts and per-plugin scores for NS/POD (repeatable).
        #[arg(long, value_name = "NS/POD")]
        explain: Vec<String>,
        /// Keep running: swap in changed Wasm plugin files during a run, and run again whenever the profile,
        /// the cluster file or a plugin file changes.
        #[arg(long)]
        watch: bool,
        /// Also write one self-contained HTML page: per profile, each node's requested CPU and memory as bars and
        /// each pod's placement with its per-plugin explanation.
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        /// Feature gates, as kube-scheduler's flag: GenericWorkload=true (or AllBeta=true) schedules the cluster
        /// file's PodGroups' members as the live scheduler does with the gate (gang scheduling); the other gates
        /// of `config::features::GATES` as the live scheduler takes them.
        #[arg(long = "feature-gates", value_name = "GATE=BOOL,...")]
        feature_gates: Vec<String>,
        /// The Kubernetes release whose feature-gate defaults apply, as kube-scheduler's flag (1.34 to 1.37): a
        /// 1.35 cluster simulated as a 1.35 scheduler would place it.
        #[arg(long = "emulated-version", value_name = "1.MINOR")]
        emulated_version: Option<String>,
    },
    /// Write a live cluster as a cluster file for `simulate` (stdout): nodes, running and pending pods,
    /// workloads, PodDisruptionBudgets, PriorityClasses, storage and DRA objects. Secrets are never read.
    Snapshot {
        /// The kubeconfig (default: KUBECONFIG, ~/.kube/config, or in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Inspect, build, push and pull WebAssembly plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Measure scheduling throughput on a synthetic cluster (no API server).
    Bench {
        /// KubeSchedulerConfiguration (v1). Upstream's default profile when omitted.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Number of nodes.
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        /// Number of pods.
        #[arg(long, default_value_t = 5000)]
        pods: usize,
    },
}

#[derive(Subcommand, Debug)]
enum PluginCommand {
    /// Write a new plugin project into DIR (default ./NAME): the contract, the language's SDK or glue, a sample
    /// policy, a README, and a profile and a cluster to try it on with `plugin test`.
    New {
        /// The plugin's name, a DNS-1123 label (my-filter): the crate, the component file, and in CamelCase
        /// (MyFilter) the plugin's name in the profile.
        name: String,
        /// rust, c, python or js.
        #[arg(long, value_name = "LANG")]
        lang: String,
        /// The extension points the sample policy serves, comma-separated (default filter,score; only Rust
        /// serves other mixes): pre-enqueue, queue-sort, pre-filter, filter, post-filter, pre-score, score,
        /// reserve, permit, pre-bind, bind, post-bind.
        #[arg(long, value_name = "POINT,...")]
        points: Option<String>,
        /// Where to write it (a missing or empty directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build the plugin project in DIR (default .) into DIR/build/NAME.wasm, checked as `plugin check` does.
    Build {
        /// The project (where plugin.yaml is).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Write the component here instead of DIR/build/NAME.wasm.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Build the plugin project in DIR (default .) if it changed, then simulate its cluster.yaml with its
    /// profile.yaml and explain a pod.
    Test {
        /// The project (where plugin.yaml is).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Pods to explain (repeatable); default the first pending pod of cluster.yaml.
        #[arg(long, value_name = "NS/POD")]
        explain: Vec<String>,
        /// Seed for breaking score ties.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Install the toolchain that builds plugins in LANG (idempotent; what is installed is skipped).
    Setup {
        /// rust, c, python or js.
        #[arg(long, value_name = "LANG")]
        lang: String,
    },
    /// Print the contract version, extension points and imports of a component; refuse one the host cannot run.
    Check {
        /// The component file.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Turn a core module built with wit-bindgen (for example cargo's wasm32-unknown-unknown output) or Go's
    /// wasip1 reactor (with --world) into a component, check it as `plugin check` does, and write it.
    Componentize {
        /// The core module.
        module: PathBuf,
        /// Where to write the component.
        #[arg(short, long)]
        output: PathBuf,
        /// Embed this world of the host's contract (e.g. filter-score-plugin), for a module that carries no
        /// component-type section of its own (Go's output).
        #[arg(long)]
        world: Option<String>,
    },
    /// Check a component as `plugin check` does and push it to an OCI registry as a CNCF Wasm artifact.
    Push {
        /// The component file.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPO:TAG
        reference: String,
        /// Registry credentials, a docker config.json (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json).
        #[arg(long, value_name = "PATH")]
        docker_config: Option<PathBuf>,
    },
    /// Pull a component from an OCI registry, check it as `plugin check` does, and write it.
    Pull {
        /// oci://REGISTRY/REPO:TAG or oci://REGISTRY/REPO@sha256:DIGEST
        reference: String,
        /// Where to write the component.
        #[arg(short, long)]
        output: PathBuf,
        /// Registry credentials, a docker config.json (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json).
        #[arg(long, value_name = "PATH")]
        docker_config: Option<PathBuf>,
    },
}

/// `--docker-config`, or docker's own file when there is one, as docker and oras find it.
fn docker_config(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| {
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
        Some(dir.join("config.json")).filter(|p| p.exists())
    })
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Output {
    Table,
    Json,
}

/// Prints what `plugin check` and `plugin componentize` found in a component.
fn print_component(info: &wasm::ComponentInfo, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(info).context("encoding")?),
        Output::Table => {
            // An earlier patch is served as it is (additions only); say so, so an author knows what to rebuild for.
            let served = if info.contract_version == wasm::CONTRACT_VERSION {
                String::new()
            } else if info.contract_version == wasm::PREVIOUS_CONTRACT_VERSION {
                format!(
                    " (the previous minor, served through an adapter: rebuild it against {})",
                    wasm::CONTRACT_VERSION
                )
            } else {
                format!(" (an earlier patch, served by this host's {})", wasm::CONTRACT_VERSION)
            };
            println!("contract:         {}@{}{served}", wasm::CONTRACT_PACKAGE, info.contract_version);
            println!("extension points: {}", info.points.join(", "));
            println!("exports:          {}", info.exports.join(", "));
            println!(
                "imports:          {}",
                if info.imports.is_empty() { "(none)".to_string() } else { info.imports.join(", ") }
            );
            let events = match &info.events {
                None => "every event (it does not export kws:plugin/events)".to_string(),
                Some(e) if e.is_empty() => "none (a pod it rejects waits for the periodic flush)".to_string(),
                Some(e) => format!("{} (with queueing hints)", e.join(", ")),
            };
            println!("events:           {events}");
            let declared = match &info.declared {
                None => "nothing (it does not export kws:plugin/declarations)".to_string(),
                Some(d) if d.is_empty() => "nothing".to_string(),
                Some(d) => d.join(", "),
            };
            println!("declares:         {declared}");
            if info.imports_wasi {
                println!(
                    "wasi:             imported; granted with no files, network or environment, output to the log"
                );
            }
        }
    }
    Ok(())
}

/// Input the user can fix: printed as one line, exit code 2.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BadInput {}

fn main() -> ExitCode {
    // Arguments as the OS gives them: a file name need not be UTF-8 (`std::env::args` panics on one).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = if args.first().and_then(|a| a.to_str()).is_some_and(|a| SUBCOMMANDS.contains(&a)) {
        let cli = Cli::parse();
        init_logging(LoggingFormat::Text, "warn");
        run(cli)
    } else {
        utf8_args(&args).and_then(|args| live_main(&args))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line whatever the error quotes: a key or value from the input may hold a line break, written
            // escaped (`\n`) as Go's `%q` would.
            if let Some(b) = e.downcast_ref::<BadInput>() {
                eprintln!("error: {}", escape_controls(&b.to_string()));
                ExitCode::from(2)
            } else {
                eprintln!("error: {}", escape_controls(&format!("{e:#}")));
                ExitCode::from(1)
            }
        }
    }
}

/// The live scheduler's flags as text: kube-scheduler's flags are all text, so one that is not is bad input.
fn utf8_args(args: &[std::ffi::OsString]) -> anyhow::Result<Vec<String>> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            a.to_str().map(str::to_string).ok_or_else(|| {
                BadInput(format!("argument {} is not valid UTF-8: {}", i + 1, a.to_string_lossy())).into()
            })
        })
        .collect()
}

/// Targets whose ERROR events repeat an error this program reports itself, in one line of its own: rustls's
/// platform verifier logs every refused certificate before returning it, and kube's client stack logs every failed
/// request before returning it.
const REPEATED_ERRORS: &[&str] = &["rustls_platform_verifier", "kube_client::client::builder"];

/// Logs to stderr, coloured only on a terminal; `KWS_LOG` (an `EnvFilter`) overrides the level. ERROR events of
/// [`REPEATED_ERRORS`] are dropped (their lower levels stay, for debugging).
fn init_logging(format: LoggingFormat, default_level: &str) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("KWS_LOG").unwrap_or_else(|_| default_level.into());
    let repeated = tracing_subscriber::filter::filter_fn(|m| {
        !(*m.level() == tracing::Level::ERROR && REPEATED_ERRORS.iter().any(|t| m.target().starts_with(t)))
    });
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let layer = match format {
        LoggingFormat::Text => layer.with_ansi(std::io::stderr().is_terminal()).with_filter(repeated).boxed(),
        LoggingFormat::Json => layer.json().with_filter(repeated).boxed(),
    };
    tracing_subscriber::registry().with(filter).with(layer).init();
}

/// The live scheduler: kube-scheduler's flags, logging as they say, then the scheduler.
fn live_main(args: &[String]) -> anyhow::Result<()> {
    let opts = options::parse(args).map_err(|e| BadInput(e.to_string()))?;
    if opts.help {
        println!(
            "Usage: kube-wasm-scheduler [flags]   (kube-scheduler's flags)\n       kube-wasm-scheduler <{}> ...\n\nFlags:\n{}",
            SUBCOMMANDS.join("|"),
            options::usage()
        );
        return Ok(());
    }
    if opts.version {
        println!("kube-wasm-scheduler {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    init_logging(opts.logging_format, if opts.verbosity >= 4 { "debug" } else { "info" });
    for w in &opts.warnings {
        tracing::warn!("{w}");
    }
    run_live(opts, in_tree_registry())
}

/// Loads the configuration and registers the Wasm plugins it declares.
fn load_config(path: Option<&PathBuf>, registry: &mut Registry) -> anyhow::Result<SchedulerConfig> {
    load_config_with(path, registry, config::Features::default())
}

/// `load_config` under the feature gates of `--feature-gates`.
fn load_config_with(
    path: Option<&PathBuf>,
    registry: &mut Registry,
    features: config::Features,
) -> anyhow::Result<SchedulerConfig> {
    let Some(path) = path else { return Ok(SchedulerConfig::default_config_with(features)) };
    let known = |n: &str| registry.get(n).is_some();
    let cfg = kube_wasm_scheduler::scheduler::load_config_with(path, &known, features)
        .map_err(|e| BadInput(config::with_known_names(e, &registry.names()).to_string()))?;
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    wasm::register_plugins(registry, &cfg, base);
    Ok(cfg)
}

/// Files whose change re-runs `simulate --watch`: the profile, the cluster and every Wasm component.
fn watched_files(config: Option<&PathBuf>, cluster: &Path) -> Vec<PathBuf> {
    let mut files = vec![cluster.to_path_buf()];
    if let Some(c) = config {
        files.push(c.clone());
        let mut reg = in_tree_registry();
        if let Ok(cfg) = load_config(Some(c), &mut reg) {
            let base = c.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
            for p in &cfg.profiles {
                for args in p.plugin_args.values() {
                    if let Some(path) = wasm::WasmArgs::parse(args, base)
                        .ok()
                        .and_then(|a| a.component.as_path().map(Path::to_path_buf))
                    {
                        files.push(path);
                    }
                }
            }
        }
    }
    files
}

fn stamps(files: &[PathBuf]) -> Vec<Option<(PathBuf, std::time::SystemTime, u64)>> {
    files
        .iter()
        .map(|f| {
            let c = std::fs::canonicalize(f).ok()?;
            let m = std::fs::metadata(&c).ok()?;
            Some((c, m.modified().ok()?, m.len()))
        })
        .collect()
}

/// `simulate --feature-gates` and `--emulated-version`: as kube-scheduler's flags take them. A gate the simulator
/// does not act on is refused by name, so that a typo is not silently ignored.
fn sim_features(flags: &[String], emulated: Option<&str>) -> Result<config::Features, BadInput> {
    let bad = |e: String| BadInput(format!("--feature-gates: {e}"));
    let pairs = config::features::parse_pairs(flags.iter().map(String::as_str)).map_err(bad)?;
    if let Some((other, _)) = pairs.iter().find(|(k, _)| !config::features::is_ours(k)) {
        let names: Vec<&str> = config::features::GATES.iter().map(|g| g.name).collect();
        return Err(bad(format!("{other}: the simulator takes AllAlpha, AllBeta and {}", names.join(", "))));
    }
    let emulated = emulated
        .map(kube_wasm_scheduler::options::kube_minor)
        .transpose()
        .map_err(|e| BadInput(format!("--emulated-version: {e}")))?;
    config::Features::resolve(config::Versions::new(emulated, None), &pairs).map_err(bad)
}

/// Runs each profile (`None`: upstream's default) on the cluster file with the same seed. With `html`, every
/// pending pod is traced and the page is written; the reports keep only the explanations `opts` asked for.
fn run_profiles(
    configs: &[Option<&PathBuf>],
    cluster: &Path,
    opts: &SimOptions,
    html: Option<&Path>,
    features: config::Features,
) -> anyhow::Result<(Vec<String>, Vec<sim::Report>)> {
    let file = sim::load::load(cluster).map_err(|e| BadInput(e.to_string()))?;
    for line in &file.skipped {
        eprintln!("{}: {line}", cluster.display());
    }
    let mut run_opts = opts.clone();
    if html.is_some() {
        run_opts.explain = file.pending_pods.iter().map(|p| p.key()).collect();
    }
    let (mut names, mut reports) = (Vec::new(), Vec::new());
    for c in configs {
        let mut registry = in_tree_registry();
        let cfg = load_config_with(*c, &mut registry, features)?;
        let sim =
            Simulation::new(&cfg, &registry, &file, &run_opts).map_err(|e| BadInput(format!("{}: {e}", cfg.source)))?;
        names.push(c.map_or_else(|| "default profile".to_string(), |p| p.display().to_string()));
        reports.push(sim.run());
    }
    if let Some(path) = html {
        let title = format!("kube-wasm-scheduler simulate: {}", cluster.display());
        std::fs::write(path, sim::render_html(&title, &names, &reports))
            .map_err(|e| BadInput(format!("--report {}: {e}", path.display())))?;
        eprintln!("wrote {}", path.display());
        for r in &mut reports {
            r.explain.retain(|e| opts.explain.contains(&e.pod));
        }
    }
    Ok((names, reports))
}

fn simulate_once(
    config: Option<&PathBuf>,
    cluster: &Path,
    opts: &SimOptions,
    output: Output,
    html: Option<&Path>,
    features: config::Features,
) -> anyhow::Result<()> {
    let (_, reports) = run_profiles(&[config], cluster, opts, html, features)?;
    let report = &reports[0];
    match output {
        Output::Table => {
            print!("{}", render_table(report));
            if !opts.explain.is_empty() {
                print!("\n{}", render_explain(report));
            }
        }
        Output::Json => println!("{}", serde_json::to_string_pretty(report).context("encoding the report")?),
    }
    Ok(())
}

/// `simulate` with several profiles: each runs on the same cluster and seed; the runs side by side.
fn simulate_compare(
    configs: &[PathBuf],
    cluster: &Path,
    opts: &SimOptions,
    output: Output,
    html: Option<&Path>,
    features: config::Features,
) -> anyhow::Result<()> {
    let configs: Vec<Option<&PathBuf>> = configs.iter().map(Some).collect();
    let (names, reports) = run_profiles(&configs, cluster, opts, html, features)?;
    match output {
        Output::Table => print!("{}", sim::render_compare(&names, &reports)),
        Output::Json => {
            let runs: Vec<serde_json::Value> =
                names.iter().zip(&reports).map(|(n, r)| serde_json::json!({"config": n, "report": r})).collect();
            println!("{}", serde_json::to_string_pretty(&runs).context("encoding the reports")?);
        }
    }
    Ok(())
}

/// `snapshot`: the cluster file on stdout, the kinds left out on stderr. An unreadable kubeconfig is bad input.
fn snapshot(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let snap = rt.block_on(async {
        let config = match kubeconfig {
            Some(p) => {
                let kc =
                    kube::config::Kubeconfig::read_from(p).map_err(|e| BadInput(format!("{}: {e}", p.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .map_err(|e| BadInput(format!("{}: {e}", p.display())))?
            }
            None => kube::Config::infer().await.map_err(|e| BadInput(format!("no kubeconfig: {e}")))?,
        };
        let client = kube::Client::try_from(config).context("building the client")?;
        anyhow::Ok(kube_wasm_scheduler::cluster::kube::snapshot::take(client).await?)
    })?;
    for note in &snap.notes {
        eprintln!("snapshot: {note}");
    }
    eprintln!("snapshot: {} objects", snap.objects);
    print!("{}", snap.yaml);
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let registry = in_tree_registry();
    match cli.command {
        Command::Snapshot { kubeconfig } => snapshot(kubeconfig.as_deref()),
        Command::Simulate {
            config,
            cluster,
            seed,
            output,
            explain,
            watch,
            report,
            feature_gates,
            emulated_version,
        } => {
            let reload_period = watch.then_some(std::time::Duration::from_millis(500));
            let opts = SimOptions { seed, explain, reload_period };
            let features = sim_features(&feature_gates, emulated_version.as_deref())?;
            if config.len() > 1 {
                if watch {
                    return Err(BadInput("--watch takes at most one --config".into()).into());
                }
                return simulate_compare(&config, &cluster, &opts, output, report.as_deref(), features);
            }
            let config = config.into_iter().next();
            if !watch {
                return simulate_once(config.as_ref(), &cluster, &opts, output, report.as_deref(), features);
            }
            loop {
                let files = watched_files(config.as_ref(), &cluster);
                let before = stamps(&files);
                if let Err(e) = simulate_once(config.as_ref(), &cluster, &opts, output, report.as_deref(), features) {
                    // While watching, a broken input is reported and the next change is awaited.
                    eprintln!("error: {e}");
                }
                eprintln!("-- watching {} file(s) for changes", files.len());
                while stamps(&files) == before {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
            }
        }
        Command::Plugin { command: PluginCommand::Check { file, output } } => {
            let info = wasm::check_file(&file).map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
            print_component(&info, output)
        }
        Command::Plugin { command: PluginCommand::Componentize { module, output, world } } => {
            let info = wasm::componentize(&module, world.as_deref(), &output)
                .map_err(|e| BadInput(format!("{}: {e}", module.display())))?;
            eprintln!(
                "wrote {} ({} bytes)",
                output.display(),
                std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0)
            );
            print_component(&info, Output::Table)
        }
        Command::Plugin { command: PluginCommand::Push { file, reference, docker_config: auth } } => {
            let (info, digest) = wasm::push_file(&file, &reference, docker_config(auth).as_deref())
                .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
            eprintln!("pushed {} to {reference} (manifest {digest})", file.display());
            print_component(&info, Output::Table)
        }
        Command::Plugin { command: PluginCommand::Pull { reference, output, docker_config: auth } } => {
            let (info, sha256) =
                wasm::pull_file(&reference, &output, docker_config(auth).as_deref()).map_err(|e| match e {
                    // These name the reference already.
                    wasm::WasmError::Source(_) | wasm::WasmError::InvalidSource(_) => BadInput(e.to_string()),
                    e => BadInput(format!("{reference}: {e}")),
                })?;
            eprintln!("wrote {} (sha256 {sha256})", output.display());
            print_component(&info, Output::Table)
        }
        Command::Plugin { command: PluginCommand::New { name, lang, points, dir } } => {
            let language = author::Language::parse(&lang).map_err(bad)?;
            let points = author::Point::parse_list(points.as_deref(), language).map_err(bad)?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let req = author::NewProject { name, language, points, dir };
            author::new_project(&req).map_err(bad)?;
            let points: Vec<&str> = req.points.iter().map(|p| p.wit_interface()).collect();
            println!(
                "created {} in {} ({}, serving {}): build it with `kube-wasm-scheduler plugin build {}`, try it with `kube-wasm-scheduler plugin test {}`",
                author::plugin_name(&req.name),
                req.dir.display(),
                language.as_str(),
                points.join(", "),
                req.dir.display(),
                req.dir.display()
            );
            Ok(())
        }
        Command::Plugin { command: PluginCommand::Build { dir, output } } => {
            let project = author::Project::open(&dir).map_err(author_error)?;
            plugin_build(&project, output.as_deref())
        }
        Command::Plugin { command: PluginCommand::Test { dir, explain, seed } } => {
            let project = author::Project::open(&dir).map_err(author_error)?;
            if !project.is_built() {
                plugin_build(&project, None)?;
                println!();
            }
            let (profile, cluster) = (project.profile(), project.cluster());
            let explain = if explain.is_empty() {
                let file = sim::load::load(&cluster).map_err(|e| BadInput(e.to_string()))?;
                file.pending_pods.first().map(|p| format!("{}/{}", p.namespace, p.name)).into_iter().collect()
            } else {
                explain
            };
            let opts = SimOptions { seed, explain, reload_period: None };
            simulate_once(Some(&profile), &cluster, &opts, Output::Table, None, config::Features::default())
        }
        Command::Plugin { command: PluginCommand::Setup { lang } } => {
            let language = author::Language::parse(&lang).map_err(bad)?;
            author::setup(language).map_err(author_error)
        }
        Command::Bench { config, nodes, pods } => {
            let mut registry = registry;
            let cfg = load_config(config.as_ref(), &mut registry)?;
            let file = sim::generate::cluster(nodes, pods);
            let sim =
                Simulation::new(&cfg, &registry, &file, &SimOptions::default()).map_err(|e| BadInput(e.to_string()))?;
            let t = Instant::now();
            let report = sim.run();
            let secs = t.elapsed().as_secs_f64();
            let bound = report.placements.iter().filter(|p| p.node.is_some()).count();
            println!("{nodes} nodes, {pods} pods: {bound} bound in {secs:.3}s = {:.0} pods/s", bound as f64 / secs);
            Ok(())
        }
    }
}

/// An error of the plugin author's commands: bad input (exit code 2) unless a compiler failed (it printed why).
fn author_error(e: author::AuthorError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

/// `plugin new`'s checks: always bad input.
fn bad(e: author::AuthorError) -> BadInput {
    BadInput(e.to_string())
}

/// `plugin build` (and `plugin test` when the project changed): builds and prints what the component serves.
fn plugin_build(project: &author::Project, output: Option<&Path>) -> anyhow::Result<()> {
    let built = project.build(output).map_err(author_error)?;
    eprintln!(
        "wrote {} ({} bytes)",
        built.component.display(),
        std::fs::metadata(&built.component).map(|m| m.len()).unwrap_or(0)
    );
    print_component(&built.info, Output::Table)
}

fn run_live(opts: Options, registry: Registry) -> anyhow::Result<()> {
    let mut registry = registry;
    // The gates of the emulated release with --feature-gates applied (checked when the flags were parsed).
    let features = opts.features().map_err(|e| BadInput(e.to_string()))?;
    let mut cfg = load_config_with(opts.config.as_ref(), &mut registry, features)?;
    for w in opts.apply_to(&mut cfg) {
        tracing::warn!("{w}");
    }
    // Upstream validates the configuration after the flags are applied: the same checks, naming both sources.
    if opts.leader_election != options::LeaderElectionFlags::default() {
        let source = format!("{} with the --leader-elect-* flags", cfg.source);
        cfg.leader_election.validate(&source).map_err(|e| BadInput(e.to_string()))?;
    }
    if let Some(path) = &opts.write_config_to {
        let yaml = serde_yaml::to_string(&cfg).context("encoding the configuration")?;
        std::fs::write(path, yaml).map_err(|e| BadInput(format!("--write-config-to {}: {e}", path.display())))?;
        tracing::info!(file = %path.display(), "wrote the configuration");
        return Ok(());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "scheduler".into());
    let config_dir = opts
        .config
        .as_ref()
        .and_then(|p| p.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| PathBuf::from("."));
    // ComponentFlagz and ComponentStatusz are beta and on by default in v1.37; --feature-gates may turn them off.
    let flagz = (opts.beta_gate("ComponentFlagz") != Some(false)).then(|| opts.flagz());
    let statusz = opts.beta_gate("ComponentStatusz") != Some(false);
    let live = LiveOptions {
        kubeconfig: opts.kubeconfig,
        master: opts.master,
        serving: kube_wasm_scheduler::server::SecureServingOptions {
            limits: kube_wasm_scheduler::server::ServingLimits::from_env().map_err(|e| BadInput(e.to_string()))?,
            ..opts.serving
        },
        authentication: opts.authentication,
        authorization: opts.authorization,
        verbosity: opts.verbosity,
        pod_max_in_unschedulable: opts.pod_max_in_unschedulable_pods_duration,
        leader_election: cfg.leader_election.clone(),
        identity: format!("{host}_{}", std::process::id()),
        config_dir,
        explain: opts.explain,
        flagz,
        statusz,
    };
    kube_wasm_scheduler::live::run(cfg, registry, live).map_err(|e| match e {
        LiveError::Client(_) | LiveError::Profile(_) => BadInput(e.to_string()).into(),
        e => anyhow::Error::new(e),
    })
}
