//! kube-scheduler's command line (`cmd/kube-scheduler/app/options` of v1.37 with k8s.io/apiserver's secure serving,
//! authentication and authorization flags and component-base's logs, metrics and feature-gate flags), read with
//! Go pflag's rules: `--flag=value`, `--flag value`, a bare `--flag` for a boolean, `-v 4`, `-v=4`, `-v4`; `--`
//! ends the flags. Every upstream flag is accepted: one that means nothing here is checked, then accepted with one
//! warning naming it; a wrong value or an unknown flag is refused with one line naming the flag.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::config::{parse_go_duration, SchedulerConfig};
use crate::server::{
    DelegatingAuthenticationOptions, DelegatingAuthorizationOptions, MinTlsVersion, SecureServingOptions,
};

/// A command line that cannot be used. The message is one line naming the flag, as pflag words it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FlagError {
    /// No such flag.
    #[error("unknown flag: --{0}")]
    Unknown(String),
    /// No such shorthand flag.
    #[error("unknown shorthand flag: '{0}' in -{1}")]
    UnknownShorthand(char, String),
    /// A flag that takes a value came last without one.
    #[error("flag needs an argument: --{0}")]
    MissingValue(String),
    /// The value cannot be used.
    #[error("invalid argument {value:?} for \"--{flag}\" flag: {reason}")]
    Invalid {
        /// The flag's name.
        flag: String,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// kube-scheduler takes no positional arguments.
    #[error("kube-scheduler does not take any arguments, got {0:?}")]
    Positional(String),
}

/// `--logging-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoggingFormat {
    /// klog-like text (the default).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The leader-election flags, each only when given (they override `leaderElection` in the configuration).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaderElectionFlags {
    /// `--leader-elect`.
    pub leader_elect: Option<bool>,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Option<Duration>,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Option<Duration>,
    /// `--leader-elect-retry-period`.
    pub retry_period: Option<Duration>,
    /// `--leader-elect-resource-name`.
    pub resource_name: Option<String>,
    /// `--leader-elect-resource-namespace`.
    pub resource_namespace: Option<String>,
}

/// The deprecated client-connection flags, each only when given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientConnectionFlags {
    /// `--kube-api-qps`.
    pub qps: Option<f32>,
    /// `--kube-api-burst`.
    pub burst: Option<i32>,
    /// `--kube-api-content-type`.
    pub content_type: Option<String>,
}

/// Everything the command line says.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--write-config-to`: write the effective configuration there and exit.
    pub write_config_to: Option<PathBuf>,
    /// `--master`: the API server's address, over the kubeconfig's.
    pub master: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// Secure serving.
    pub serving: SecureServingOptions,
    /// Delegated authentication.
    pub authentication: DelegatingAuthenticationOptions,
    /// Delegated authorization.
    pub authorization: DelegatingAuthorizationOptions,
    /// Leader election.
    pub leader_election: LeaderElectionFlags,
    /// `--kube-api-*`.
    pub client_connection: ClientConnectionFlags,
    /// `--pod-max-in-unschedulable-pods-duration` (default 5m).
    pub pod_max_in_unschedulable_pods_duration: Duration,
    /// `-v`.
    pub verbosity: u32,
    /// `--logging-format`.
    pub logging_format: LoggingFormat,
    /// `-h`/`--help`.
    pub help: bool,
    /// `--version`.
    pub version: bool,
    /// `--explain ns/name,...` (ours, as `simulate --explain`): log what each plugin and extender said about these
    /// pods at every attempt.
    pub explain: Vec<String>,
    /// One line per accepted flag that has no effect here, naming it.
    pub warnings: Vec<String>,
    /// `--emulated-version`'s kube minor, checked (the v1.37 defaults apply whatever it says).
    pub emulated_minor: Option<u32>,
    /// `--min-compatibility-version`'s kube minor, checked.
    pub min_compatibility_minor: Option<u32>,
    /// Every flag given, in order, with its value as given (what `/flagz` shows).
    pub given: Vec<(&'static str, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            config: None,
            write_config_to: None,
            master: None,
            kubeconfig: None,
            serving: SecureServingOptions::default(),
            authentication: DelegatingAuthenticationOptions::default(),
            authorization: DelegatingAuthorizationOptions::default(),
            leader_election: LeaderElectionFlags::default(),
            client_connection: ClientConnectionFlags::default(),
            pod_max_in_unschedulable_pods_duration: Duration::from_secs(5 * 60),
            verbosity: 0,
            logging_format: LoggingFormat::Text,
            help: false,
            version: false,
            explain: Vec::new(),
            warnings: Vec::new(),
            emulated_minor: None,
            min_compatibility_minor: None,
            given: Vec::new(),
        }
    }
}

/// Whether a flag needs a value after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `--flag` means `--flag=true`.
    Bool,
    /// `--flag=value` or `--flag value`.
    Value,
}

/// One upstream flag: its name, shorthand, kind, and why it has no effect here (None: it has one).
struct Flag {
    name: &'static str,
    short: Option<char>,
    kind: Kind,
    ignored: Option<&'static str>,
    help: &'static str,
}

const fn used(name: &'static str, kind: Kind, help: &'static str) -> Flag {
    Flag { name, short: None, kind, ignored: None, help }
}

const fn ignored(name: &'static str, kind: Kind, why: &'static str) -> Flag {
    Flag { name, short: None, kind, ignored: Some(why), help: why }
}

use Kind::{Bool, Value};

const NO_PROFILING: &str = "accepted, no effect: there are no /debug/pprof endpoints";
const NO_METRICS_FILTER: &str = "accepted, no effect: every metric is always exposed";
const NOT_STORED: &str = "accepted, no effect: removed from kube-scheduler, kept so old manifests start";
const LOG_TUNING: &str = "accepted, no effect: logs go to stderr unbuffered";

/// kube-scheduler v1.37's flags, in its help's order, and three flags it removed that manifests still carry.
const FLAGS: &[Flag] = &[
    // misc
    used("config", Value, "KubeSchedulerConfiguration file"),
    used("write-config-to", Value, "write the effective configuration to this file and exit"),
    used("master", Value, "the API server's address (overrides the kubeconfig's)"),
    // secure serving
    used("bind-address", Value, "address of --secure-port (default 0.0.0.0)"),
    used("secure-port", Value, "HTTPS port of /healthz /livez /readyz /metrics /configz (default 10259; 0: off)"),
    used("disable-http2-serving", Bool, "serve HTTP/1.1 only"),
    used("cert-dir", Value, "where the self-signed pair kube-scheduler.crt/.key is kept"),
    used("tls-cert-file", Value, "serving certificate (chain, leaf first)"),
    used("tls-private-key-file", Value, "serving key"),
    ignored("tls-cipher-suites", Value, "checked, no effect: rustls's safe suites are served"),
    used("tls-min-version", Value, "VersionTLS12 or VersionTLS13 (10 and 11 mean 12)"),
    ignored("tls-sni-cert-key", Value, "accepted, no effect: one serving certificate is used"),
    ignored("tls-curve-preferences", Value, "checked, no effect: rustls's default key exchange groups are offered"),
    used("http2-max-streams-per-connection", Value, "HTTP/2 streams per connection (0 or less: 100)"),
    used("permit-port-sharing", Bool, "bind with SO_REUSEPORT"),
    used("permit-address-sharing", Bool, "bind with SO_REUSEADDR"),
    // authentication
    used("authentication-kubeconfig", Value, "kubeconfig for TokenReviews (else the scheduler's own)"),
    used("authentication-token-webhook-cache-ttl", Value, "how long token reviews are cached (default 10s)"),
    used("client-ca-file", Value, "CA of client certificates (CN the user, O the groups)"),
    used("requestheader-username-headers", Value, "front proxy: user headers (default x-remote-user)"),
    used("requestheader-uid-headers", Value, "front proxy: UID headers"),
    used("requestheader-group-headers", Value, "front proxy: group headers (default x-remote-group)"),
    used("requestheader-extra-headers-prefix", Value, "front proxy: extra header prefixes (default x-remote-extra-)"),
    used("requestheader-client-ca-file", Value, "front proxy: CA of its client certificate"),
    used("requestheader-allowed-names", Value, "front proxy: allowed certificate common names (empty: any)"),
    used(
        "authentication-skip-lookup",
        Bool,
        "do not read missing CAs from kube-system/extension-apiserver-authentication",
    ),
    used("authentication-tolerate-lookup-failure", Bool, "start even when that lookup fails (default true)"),
    // authorization
    used("authorization-kubeconfig", Value, "kubeconfig for SubjectAccessReviews (else the scheduler's own)"),
    used("authorization-webhook-cache-authorized-ttl", Value, "how long allowed reviews are cached (default 10s)"),
    used("authorization-webhook-cache-unauthorized-ttl", Value, "how long denied reviews are cached (default 10s)"),
    used("authorization-always-allow-paths", Value, "paths any user may get (default /healthz,/readyz,/livez)"),
    // deprecated
    ignored("profiling", Bool, NO_PROFILING),
    ignored("contention-profiling", Bool, NO_PROFILING),
    used("kubeconfig", Value, "kubeconfig file (else clientConnection.kubeconfig, KUBECONFIG, in-cluster)"),
    used("kube-api-content-type", Value, "clientConnection.contentType when there is no --config"),
    used("kube-api-qps", Value, "clientConnection.qps when there is no --config"),
    used("kube-api-burst", Value, "clientConnection.burst when there is no --config"),
    used("pod-max-in-unschedulable-pods-duration", Value, "retry unschedulable pods after this long (default 5m)"),
    // leader election
    used("leader-elect", Bool, "elect a leader through a Lease before scheduling"),
    used("leader-elect-lease-duration", Value, "lease duration"),
    used("leader-elect-renew-deadline", Value, "renew deadline"),
    used("leader-elect-retry-period", Value, "retry period"),
    used("leader-elect-resource-lock", Value, "lock type: leases"),
    used("leader-elect-resource-name", Value, "Lease name"),
    used("leader-elect-resource-namespace", Value, "Lease namespace"),
    // feature gate
    used(
        "feature-gates",
        Value,
        "the gates of config::features::GATES (at the emulated release's defaults), \
         ComponentFlagz, ComponentStatusz and AllAlpha/AllBeta take effect; others are checked only",
    ),
    used("emulated-version", Value, "the release whose feature-gate defaults apply (kube=1.34..1.37)"),
    used("min-compatibility-version", Value, "kube=1.34..1.37, at most --emulated-version: gates' defaults"),
    // metrics
    ignored("show-hidden-metrics-for-version", Value, NO_METRICS_FILTER),
    ignored("disabled-metrics", Value, NO_METRICS_FILTER),
    ignored("allow-metric-labels", Value, NO_METRICS_FILTER),
    ignored("allow-metric-labels-manifest", Value, NO_METRICS_FILTER),
    // logs
    used("logging-format", Value, "text or json"),
    ignored("log-flush-frequency", Value, LOG_TUNING),
    Flag { name: "v", short: Some('v'), kind: Value, ignored: None, help: "verbosity (2: a line per pod; 4: debug)" },
    ignored("vmodule", Value, "checked, no effect: verbosity is global"),
    ignored("log-text-split-stream", Bool, LOG_TUNING),
    ignored("log-text-info-buffer-size", Value, LOG_TUNING),
    ignored("log-json-split-stream", Bool, LOG_TUNING),
    ignored("log-json-info-buffer-size", Value, LOG_TUNING),
    // removed upstream, still in manifests
    used("port", Value, "insecure port: only 0 (off) is accepted"),
    ignored("logtostderr", Bool, NOT_STORED),
    ignored("log-file", Value, NOT_STORED),
    // ours
    used(
        "explain",
        Value,
        "ns/name[,ns/name...]: log each attempt's verdicts and scores of these pods, plugins' and extenders'",
    ),
    // global
    Flag { name: "help", short: Some('h'), kind: Bool, ignored: None, help: "print this help" },
    used("version", Bool, "print the version"),
];

fn lookup(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

/// Parses the live scheduler's arguments (without the program name).
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Options, FlagError> {
    let mut o = Options::default();
    let mut seen: Vec<&'static str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        i += 1;
        if arg == "--" {
            if let Some(extra) = args.get(i) {
                return Err(FlagError::Positional(extra.as_ref().to_string()));
            }
            break;
        }
        let (flag, inline) = if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            (lookup(name).ok_or_else(|| FlagError::Unknown(name.to_string()))?, value)
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().expect("not empty");
            let flag = FLAGS
                .iter()
                .find(|f| f.short == Some(c))
                .ok_or_else(|| FlagError::UnknownShorthand(c, short.to_string()))?;
            let rest = &short[c.len_utf8()..];
            let value = rest.strip_prefix('=').unwrap_or(rest);
            (flag, (!rest.is_empty()).then(|| value.to_string()))
        } else {
            return Err(FlagError::Positional(arg.to_string()));
        };
        let value = match (inline, flag.kind) {
            (Some(v), _) => v,
            (None, Bool) => "true".into(),
            (None, Value) => {
                let v = args.get(i).ok_or_else(|| FlagError::MissingValue(flag.name.into()))?;
                i += 1;
                v.as_ref().to_string()
            }
        };
        let first = !seen.contains(&flag.name);
        set(&mut o, flag.name, &value, first).map_err(|reason| FlagError::Invalid {
            flag: flag.name.into(),
            value: value.clone(),
            reason,
        })?;
        o.given.push((flag.name, value));
        if first {
            seen.push(flag.name);
            if let Some(why) = flag.ignored {
                o.warnings.push(format!("--{}: {why}", flag.name));
            }
        }
    }
    check_relations(&o)?;
    o.features()?;
    Ok(o)
}

/// The minor version of the `kube` component in a component-base version list (`1.36`, `kube=1.36`,
/// `kube=1.36,other=2.0` is refused: no other component is registered), within what a v1.37 binary can emulate.
pub fn kube_minor(v: &str) -> Result<u32, String> {
    let mut minor = None;
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (component, version) = part.split_once('=').unwrap_or(("kube", part));
        if component.trim() != "kube" {
            return Err(format!("component not registered: {}", component.trim()));
        }
        let version = version.trim();
        let m = version
            .strip_prefix("1.")
            .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|m| m.parse::<u32>().ok())
            .ok_or_else(|| format!("illegal version string {version:?}: must be major.minor, such as 1.36"))?;
        if !(MIN_EMULATED_MINOR..=BINARY_MINOR).contains(&m) {
            return Err(format!("version 1.{m} is not between [1.{MIN_EMULATED_MINOR}, 1.{BINARY_MINOR}]"));
        }
        minor = Some(m);
    }
    minor.ok_or_else(|| "no version given".to_string())
}

pub use crate::config::features::{BINARY_MINOR, MIN_EMULATED_MINOR};

/// Checks between flags that pflag leaves to upstream's `Validate`.
fn check_relations(o: &Options) -> Result<(), FlagError> {
    if let (Some(min), emulated) = (o.min_compatibility_minor, o.emulated_minor.unwrap_or(BINARY_MINOR)) {
        if min > emulated {
            return Err(FlagError::Invalid {
                flag: "min-compatibility-version".into(),
                value: format!("1.{min}"),
                reason: format!("must be less than or equal to the emulated version 1.{emulated}"),
            });
        }
    }
    let s = &o.serving;
    if s.tls_cert_file.is_some() != s.tls_private_key_file.is_some() {
        let (flag, value) = match &s.tls_cert_file {
            Some(f) => ("tls-cert-file", f),
            None => ("tls-private-key-file", s.tls_private_key_file.as_ref().expect("one is set")),
        };
        return Err(FlagError::Invalid {
            flag: flag.into(),
            value: value.display().to_string(),
            reason: "--tls-cert-file and --tls-private-key-file go together".into(),
        });
    }
    Ok(())
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("strconv.ParseBool: parsing {v:?}: invalid syntax")),
    }
}

fn parse_int<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    let digits = v.strip_prefix('+').unwrap_or(v);
    digits.parse().map_err(|_| {
        // Go tells a number too large for the type from one that is no number.
        let number = digits.strip_prefix('-').unwrap_or(digits);
        let why = if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("strconv.ParseInt: parsing {v:?}: {why}")
    })
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    parse_go_duration(v).map_err(|_| format!("time: invalid duration {v:?}"))
}

/// A pflag string slice: comma-separated; the first use replaces the default, later uses append.
fn set_list(into: &mut Vec<String>, v: &str, first: bool) {
    if first {
        into.clear();
    }
    into.extend(v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string));
}

/// `key=value` pairs separated by commas, each value checked by `value_ok`.
fn check_pairs(v: &str, value_ok: impl Fn(&str) -> bool, what: &str) -> Result<(), String> {
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((k, val)) if !k.trim().is_empty() && value_ok(val.trim()) => {}
            _ => return Err(format!("{pair:?} is not {what}")),
        }
    }
    Ok(())
}

/// pflag's string-to-string map: one `key=value` (the value may hold commas, as `metric,label=v1,v2`), or several
/// comma-separated.
fn check_string_to_string(v: &str) -> Result<(), String> {
    match v.matches('=').count() {
        0 => Err(format!("{v} must be formatted as key=value")),
        1 => Ok(()),
        _ => check_pairs(v, |_| true, "formatted as key=value"),
    }
}

/// Go's cipher suite names (crypto/tls `CipherSuites` and `InsecureCipherSuites`), which upstream accepts.
const GO_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_RC4_128_SHA",
];

fn path(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// Applies one flag's value; `first` is whether this flag was not given before.
fn set(o: &mut Options, name: &str, v: &str, first: bool) -> Result<(), String> {
    let (s, an, az, le) = (&mut o.serving, &mut o.authentication, &mut o.authorization, &mut o.leader_election);
    match name {
        "config" => o.config = path(v),
        "write-config-to" => o.write_config_to = path(v),
        "master" => o.master = (!v.is_empty()).then(|| v.to_string()),
        "kubeconfig" => o.kubeconfig = path(v),
        "bind-address" => s.bind_address = v.parse::<IpAddr>().map_err(|_| format!("failed to parse IP: {v:?}"))?,
        "secure-port" => {
            let p: i64 = parse_int(v)?;
            s.bind_port =
                u16::try_from(p).map_err(|_| format!("--secure-port {p} must be between 0 and 65535, inclusive"))?;
        }
        "disable-http2-serving" => s.disable_http2 = parse_bool(v)?,
        "cert-dir" => s.cert_dir = path(v),
        "tls-cert-file" => s.tls_cert_file = path(v),
        "tls-private-key-file" => s.tls_private_key_file = path(v),
        "tls-cipher-suites" => {
            if let Some(bad) = v.split(',').map(str::trim).find(|c| !c.is_empty() && !GO_CIPHER_SUITES.contains(c)) {
                return Err(format!("Cipher suite {bad} not supported or doesn't exist"));
            }
        }
        "tls-min-version" => {
            s.min_tls_version = match v {
                "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => MinTlsVersion::Tls12,
                "VersionTLS13" => MinTlsVersion::Tls13,
                _ => {
                    return Err(
                        "unknown tls version; use VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13".into()
                    )
                }
            }
        }
        "http2-max-streams-per-connection" => {
            // A Go int, used as upstream does (SecureServingOptions::http2_max_concurrent_streams).
            s.http2_max_streams_per_connection = parse_int(v)?
        }
        "permit-port-sharing" => s.permit_port_sharing = parse_bool(v)?,
        "permit-address-sharing" => s.permit_address_sharing = parse_bool(v)?,
        "authentication-kubeconfig" => an.remote_kubeconfig = path(v),
        "authentication-token-webhook-cache-ttl" => an.cache_ttl = parse_duration(v)?,
        "client-ca-file" => an.client_ca_file = path(v),
        "requestheader-username-headers" => set_list(&mut an.request_header.username_headers, v, first),
        "requestheader-uid-headers" => set_list(&mut an.request_header.uid_headers, v, first),
        "requestheader-group-headers" => set_list(&mut an.request_header.group_headers, v, first),
        "requestheader-extra-headers-prefix" => set_list(&mut an.request_header.extra_header_prefixes, v, first),
        "requestheader-client-ca-file" => an.request_header.client_ca_file = path(v),
        "requestheader-allowed-names" => set_list(&mut an.request_header.allowed_names, v, first),
        "authentication-skip-lookup" => an.skip_in_cluster_lookup = parse_bool(v)?,
        "authentication-tolerate-lookup-failure" => an.tolerate_in_cluster_lookup_failure = parse_bool(v)?,
        "authorization-kubeconfig" => az.remote_kubeconfig = path(v),
        "authorization-webhook-cache-authorized-ttl" => az.allow_cache_ttl = parse_duration(v)?,
        "authorization-webhook-cache-unauthorized-ttl" => az.deny_cache_ttl = parse_duration(v)?,
        "authorization-always-allow-paths" => set_list(&mut az.always_allow_paths, v, first),
        "profiling" | "contention-profiling" | "log-text-split-stream" | "log-json-split-stream" | "logtostderr" => {
            parse_bool(v)?;
        }
        "kube-api-content-type" => o.client_connection.content_type = Some(v.to_string()),
        "kube-api-qps" => {
            let q: f32 = v.parse().map_err(|_| format!("strconv.ParseFloat: parsing {v:?}: invalid syntax"))?;
            if !q.is_finite() {
                return Err(format!("must be a finite number, got {q}"));
            }
            o.client_connection.qps = Some(q)
        }
        "kube-api-burst" => {
            let b: i32 = parse_int(v)?;
            if b < 0 {
                return Err(format!("must be non-negative, got {b}"));
            }
            o.client_connection.burst = Some(b)
        }
        "pod-max-in-unschedulable-pods-duration" => o.pod_max_in_unschedulable_pods_duration = parse_duration(v)?,
        "leader-elect" => le.leader_elect = Some(parse_bool(v)?),
        "leader-elect-lease-duration" => le.lease_duration = Some(parse_duration(v)?),
        "leader-elect-renew-deadline" => le.renew_deadline = Some(parse_duration(v)?),
        "leader-elect-retry-period" => le.retry_period = Some(parse_duration(v)?),
        "leader-elect-resource-lock" => {
            if v != "leases" {
                return Err("only \"leases\" is supported (as kube-scheduler since v1.28)".into());
            }
        }
        "leader-elect-resource-name" => le.resource_name = Some(v.to_string()),
        "leader-elect-resource-namespace" => le.resource_namespace = Some(v.to_string()),
        "feature-gates" => {
            check_pairs(v, |b| parse_bool(b).is_ok(), "a Gate=true|false pair")?;
            // A gate upstream has but this scheduler does not act on changes nothing here: say so once per name.
            for (k, _) in v.split(',').filter_map(|p| p.split_once('=')) {
                let k = k.trim();
                let acted = crate::config::features::is_ours(k) || matches!(k, "ComponentFlagz" | "ComponentStatusz");
                let warning = format!("--feature-gates: {k}: checked, no effect here");
                if !acted && !o.warnings.contains(&warning) {
                    o.warnings.push(warning);
                }
            }
        }
        "vmodule" => check_pairs(v, |n| n.parse::<u32>().is_ok(), "a pattern=N pair")?,
        "show-hidden-metrics-for-version" => {
            let ok = v.is_empty()
                || v.split_once('.').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !ok {
                return Err("must be MAJOR.MINOR, such as 1.33".into());
            }
        }
        "allow-metric-labels" => check_string_to_string(v)?,
        "log-flush-frequency" => {
            parse_duration(v)?;
        }
        "emulated-version" => o.emulated_minor = Some(kube_minor(v)?),
        "min-compatibility-version" => o.min_compatibility_minor = Some(kube_minor(v)?),
        "tls-curve-preferences" => {
            for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                parse_int::<i32>(id)?;
            }
        }
        "tls-sni-cert-key"
        | "disabled-metrics"
        | "allow-metric-labels-manifest"
        | "log-text-info-buffer-size"
        | "log-json-info-buffer-size"
        | "log-file" => {}
        "logging-format" => {
            o.logging_format = match v {
                "text" => LoggingFormat::Text,
                "json" => LoggingFormat::Json,
                _ => return Err("unsupported logging format; permitted formats: json, text".into()),
            }
        }
        "v" => o.verbosity = v.parse().map_err(|_| format!("strconv.ParseUint: parsing {v:?}: invalid syntax"))?,
        "port" => {
            if parse_int::<i64>(v)? != 0 {
                return Err("insecure serving was removed from kube-scheduler; only --port=0 is accepted".into());
            }
        }
        "explain" => {
            if first {
                o.explain.clear();
            }
            for pod in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if pod.split('/').filter(|x| !x.is_empty()).count() != 2 {
                    return Err(format!("{pod:?} is not namespace/name"));
                }
                o.explain.push(pod.to_string());
            }
        }
        "help" => o.help = parse_bool(v)?,
        "version" => o.version = parse_bool(v)?,
        other => unreachable!("flag {other} is in the table but not handled"),
    }
    Ok(())
}

impl Options {
    /// Applies the flags that override the configuration, as upstream's `ApplyTo`: leader election always; the
    /// deprecated `--kube-api-*` flags only without `--config` (upstream ignores them then; a warning says so).
    /// Returns warnings to log.
    pub fn apply_to(&self, cfg: &mut SchedulerConfig) -> Vec<String> {
        let f = &self.leader_election;
        let le = &mut cfg.leader_election;
        if let Some(v) = f.leader_elect {
            le.leader_elect = v;
        }
        if let Some(v) = f.lease_duration {
            le.lease_duration = v;
        }
        if let Some(v) = f.renew_deadline {
            le.renew_deadline = v;
        }
        if let Some(v) = f.retry_period {
            le.retry_period = v;
        }
        if let Some(v) = &f.resource_name {
            le.resource_name = v.clone();
        }
        if let Some(v) = &f.resource_namespace {
            le.resource_namespace = v.clone();
        }
        let c = &self.client_connection;
        let given: Vec<&str> = [
            c.qps.map(|_| "--kube-api-qps"),
            c.burst.map(|_| "--kube-api-burst"),
            c.content_type.as_ref().map(|_| "--kube-api-content-type"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if self.config.is_some() {
            return given
                .into_iter()
                .map(|flag| format!("{flag}: ignored because --config is given (as kube-scheduler does)"))
                .collect();
        }
        let cc = &mut cfg.client_connection;
        if let Some(v) = c.qps {
            cc.qps = Some(v);
        }
        if let Some(v) = c.burst {
            cc.burst = Some(v);
        }
        if let Some(v) = &c.content_type {
            cc.content_type = v.clone();
        }
        Vec::new()
    }
}

/// Each flag kube-scheduler v1.37 registers and the value its `/flagz` shows when the flag is not given (taken from
/// a v1.37.2 binary's `/flagz`); `--port`, `--logtostderr`, `--log-file` and our `--explain` are not among them.
const FLAGZ_DEFAULTS: &[(&str, &str)] = &[
    ("allow-metric-labels", "[]"),
    ("allow-metric-labels-manifest", ""),
    ("authentication-kubeconfig", ""),
    ("authentication-skip-lookup", "false"),
    ("authentication-token-webhook-cache-ttl", "10s"),
    ("authentication-tolerate-lookup-failure", "true"),
    ("authorization-always-allow-paths", "[/healthz,/readyz,/livez]"),
    ("authorization-kubeconfig", ""),
    ("authorization-webhook-cache-authorized-ttl", "10s"),
    ("authorization-webhook-cache-unauthorized-ttl", "10s"),
    ("bind-address", "0.0.0.0"),
    ("cert-dir", ""),
    ("client-ca-file", ""),
    ("config", ""),
    ("contention-profiling", "true"),
    ("disable-http2-serving", "false"),
    ("disabled-metrics", "[]"),
    ("emulated-version", "[]"),
    ("feature-gates", ""),
    ("help", "false"),
    ("http2-max-streams-per-connection", "0"),
    ("kube-api-burst", "100"),
    ("kube-api-content-type", "application/vnd.kubernetes.protobuf"),
    ("kube-api-qps", "50"),
    ("kubeconfig", ""),
    ("leader-elect", "true"),
    ("leader-elect-lease-duration", "15s"),
    ("leader-elect-renew-deadline", "10s"),
    ("leader-elect-resource-lock", "leases"),
    ("leader-elect-resource-name", "kube-scheduler"),
    ("leader-elect-resource-namespace", "kube-system"),
    ("leader-elect-retry-period", "2s"),
    ("log-flush-frequency", "5s"),
    ("log-json-info-buffer-size", "0"),
    ("log-json-split-stream", "false"),
    ("log-text-info-buffer-size", "0"),
    ("log-text-split-stream", "false"),
    ("logging-format", "text"),
    ("master", ""),
    ("min-compatibility-version", "[]"),
    ("permit-address-sharing", "false"),
    ("permit-port-sharing", "false"),
    ("pod-max-in-unschedulable-pods-duration", "5m0s"),
    ("profiling", "true"),
    ("requestheader-allowed-names", "[]"),
    ("requestheader-client-ca-file", ""),
    ("requestheader-extra-headers-prefix", "[x-remote-extra-]"),
    ("requestheader-group-headers", "[x-remote-group]"),
    ("requestheader-uid-headers", "[]"),
    ("requestheader-username-headers", "[x-remote-user]"),
    ("secure-port", "10259"),
    ("show-hidden-metrics-for-version", ""),
    ("tls-cert-file", ""),
    ("tls-cipher-suites", "[]"),
    ("tls-curve-preferences", "[]"),
    ("tls-min-version", ""),
    ("tls-private-key-file", ""),
    ("tls-sni-cert-key", "[]"),
    ("v", "0"),
    ("version", "false"),
    ("vmodule", ""),
    ("write-config-to", ""),
];

impl Options {
    /// What `/flagz` shows: every upstream flag with its value as pflag prints it (durations as Go prints them,
    /// lists in brackets, the first use of a list replacing its default), and the generated serving pair's paths
    /// under `--cert-dir` when no pair is given, as upstream fills them in.
    pub fn flagz(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> =
            FLAGZ_DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut lists: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (name, v) in &self.given {
            let Some(slot) = out.get_mut(*name) else { continue };
            *slot = match *name {
                _ if slot.starts_with('[') && !name.ends_with("-version") => {
                    let items = lists.entry(name).or_default();
                    if *name == "allow-metric-labels" {
                        items.push(v.clone());
                    } else {
                        items.extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string));
                    }
                    format!("[{}]", items.join(","))
                }
                "emulated-version" | "min-compatibility-version" => {
                    kube_minor(v).map(|m| format!("[kube=1.{m}]")).unwrap_or_default()
                }
                "feature-gates" => {
                    let gates = lists.entry(name).or_default();
                    gates.extend(v.split(',').map(str::trim).filter(|p| !p.is_empty()).map(|p| format!(":{p}")));
                    gates.join(",")
                }
                _ if slot == "true" || slot == "false" => parse_bool(v).map(|b| b.to_string()).unwrap_or_default(),
                _ if slot.ends_with('s') && slot.as_bytes()[0].is_ascii_digit() => {
                    parse_duration(v).map(crate::config::format_go_duration).unwrap_or_default()
                }
                "secure-port" | "http2-max-streams-per-connection" | "kube-api-burst" | "v" => {
                    parse_int::<i64>(v).map(|n| n.to_string()).unwrap_or_default()
                }
                "kube-api-qps" => v.parse::<f32>().map(|q| q.to_string()).unwrap_or_default(),
                _ => v.clone(),
            };
        }
        let s = &self.serving;
        if let (None, Some(dir)) = (&s.tls_cert_file, &s.cert_dir) {
            let file = |ext: &str| dir.join(format!("{}.{ext}", crate::server::PAIR_NAME)).display().to_string();
            out.insert("tls-cert-file".into(), file("crt"));
            out.insert("tls-private-key-file".into(), file("key"));
        }
        out
    }

    /// A feature gate's value from `--feature-gates` (the last mention wins, `AllBeta` for a beta gate), None when
    /// the command line does not set it.
    pub fn beta_gate(&self, gate: &str) -> Option<bool> {
        let pairs = crate::config::features::parse_pairs(self.values("feature-gates")).ok()?;
        let last = |name: &str| pairs.iter().rev().find(|(k, _)| *k == name).map(|&(_, on)| on);
        last(gate).or(last("AllBeta"))
    }

    /// The releases emulated (`--emulated-version`, `--min-compatibility-version`).
    pub fn versions(&self) -> crate::config::Versions {
        crate::config::Versions::new(self.emulated_minor, self.min_compatibility_minor)
    }

    /// The gates this scheduler acts on, at the emulated release with `--feature-gates` applied; refused as
    /// upstream refuses (a locked gate changed, a gate set before its release).
    pub fn features(&self) -> Result<crate::config::Features, FlagError> {
        let values: Vec<&str> = self.values("feature-gates").collect();
        let invalid =
            |reason: String| FlagError::Invalid { flag: "feature-gates".into(), value: values.join(","), reason };
        let pairs = crate::config::features::parse_pairs(values.iter().copied()).map_err(invalid)?;
        crate::config::Features::resolve(self.versions(), &pairs).map_err(invalid)
    }

    /// The values given to flag `name`, in order.
    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.given.iter().filter(move |(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

/// The flags, one per line, for `--help`.
pub fn usage() -> String {
    let mut out = String::new();
    for f in FLAGS {
        let name = match f.short {
            Some(c) => format!("-{c}, --{}", f.name),
            None => format!("    --{}", f.name),
        };
        let arg = if f.kind == Value { " value" } else { "" };
        out.push_str(&format!("  {:<52} {}\n", format!("{name}{arg}"), f.help));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(args: &[&str]) -> Options {
        parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn err(args: &[&str]) -> String {
        parse(args).err().unwrap_or_else(|| panic!("{args:?} was accepted")).to_string()
    }

    #[test]
    fn flagz_prints_values_as_upstreams_pflag_does() {
        // What a v1.37.2 kube-scheduler's /flagz showed for these flags.
        let o = ok(&[
            "--leader-elect-lease-duration=60s",
            "--pod-max-in-unschedulable-pods-duration=90s",
            "--authorization-always-allow-paths=/flagz",
            "--authorization-always-allow-paths=/statusz,/healthz",
            "--requestheader-allowed-names=a,b",
            "--feature-gates=ComponentStatusz=true,AllAlpha=false",
            "--emulated-version=kube=1.36",
            "--kube-api-qps=20.5",
            "--leader-elect=false",
            "-v=3",
            "--vmodule=x=2",
            "--cert-dir=/tmp/certs",
            "--port=0",
            "--explain=a/b",
        ]);
        let f = o.flagz();
        let want = [
            ("leader-elect-lease-duration", "1m0s"),
            ("pod-max-in-unschedulable-pods-duration", "1m30s"),
            ("authorization-always-allow-paths", "[/flagz,/statusz,/healthz]"),
            ("requestheader-allowed-names", "[a,b]"),
            ("requestheader-group-headers", "[x-remote-group]"),
            ("feature-gates", ":ComponentStatusz=true,:AllAlpha=false"),
            ("emulated-version", "[kube=1.36]"),
            ("min-compatibility-version", "[]"),
            ("kube-api-qps", "20.5"),
            ("kube-api-burst", "100"),
            ("leader-elect", "false"),
            ("v", "3"),
            ("vmodule", "x=2"),
            ("tls-cert-file", "/tmp/certs/kube-scheduler.crt"),
            ("tls-private-key-file", "/tmp/certs/kube-scheduler.key"),
            ("profiling", "true"),
            ("secure-port", "10259"),
        ];
        for (k, v) in want {
            assert_eq!(f.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(f.len(), 62, "upstream's flags, and only those");
        assert!(!f.contains_key("port") && !f.contains_key("explain"));
        assert_eq!(ok(&[]).flagz()["leader-elect"], "true");
        assert_eq!(ok(&[]).flagz()["tls-cert-file"], "");
    }

    #[test]
    fn component_gates_follow_feature_gates() {
        assert_eq!(ok(&[]).beta_gate("ComponentFlagz"), None);
        let o = ok(&["--feature-gates=AllBeta=false", "--feature-gates=ComponentStatusz=true"]);
        assert_eq!((o.beta_gate("ComponentFlagz"), o.beta_gate("ComponentStatusz")), (Some(false), Some(true)));
    }

    #[test]
    fn defaults_are_upstreams() {
        let o = ok(&[]);
        assert_eq!(o.serving.bind_port, 10259);
        assert_eq!(o.serving.bind_address.to_string(), "0.0.0.0");
        assert_eq!(o.authentication.cache_ttl, Duration::from_secs(10));
        assert!(o.authentication.tolerate_in_cluster_lookup_failure);
        assert_eq!(o.authorization.always_allow_paths, ["/healthz", "/readyz", "/livez"]);
        assert_eq!(o.authorization.always_allow_groups, ["system:masters"]);
        assert_eq!(
            (o.authorization.allow_cache_ttl, o.authorization.deny_cache_ttl),
            (Duration::from_secs(10), Duration::from_secs(10))
        );
        assert_eq!(o.authentication.request_header.username_headers, ["x-remote-user"]);
        assert_eq!(o.pod_max_in_unschedulable_pods_duration, Duration::from_secs(300));
        assert!(o.warnings.is_empty());
    }

    #[test]
    fn values_come_inline_or_as_the_next_argument() {
        for args in [&["--secure-port=1234"][..], &["--secure-port", "1234"]] {
            assert_eq!(ok(args).serving.bind_port, 1234, "{args:?}");
        }
        for args in [&["-v=4"][..], &["-v", "4"], &["-v4"], &["--v=4"], &["--v", "4"]] {
            assert_eq!(ok(args).verbosity, 4, "{args:?}");
        }
    }

    #[test]
    fn booleans_take_no_separate_value() {
        assert_eq!(ok(&["--leader-elect"]).leader_election.leader_elect, Some(true));
        assert_eq!(ok(&["--leader-elect=false"]).leader_election.leader_elect, Some(false));
        assert_eq!(ok(&["--leader-elect=F"]).leader_election.leader_elect, Some(false));
        // As pflag: a bare boolean does not consume the next argument.
        assert_eq!(err(&["--leader-elect", "false"]), "kube-scheduler does not take any arguments, got \"false\"");
    }

    #[test]
    fn lists_replace_the_default_then_append() {
        let o =
            ok(&["--authorization-always-allow-paths=/healthz", "--authorization-always-allow-paths", "/metrics,/x*"]);
        assert_eq!(o.authorization.always_allow_paths, ["/healthz", "/metrics", "/x*"]);
        let o = ok(&["--authorization-always-allow-paths="]);
        assert!(o.authorization.always_allow_paths.is_empty());
    }

    #[test]
    fn flags_without_effect_are_accepted_with_one_warning_each() {
        let o =
            ok(&["--profiling", "--profiling=false", "--feature-gates=A=true,B=false", "--logtostderr", "--port=0"]);
        assert_eq!(o.warnings.len(), 4, "{:?}", o.warnings);
        assert!(o.warnings[0].starts_with("--profiling: "));
        assert_eq!(
            o.warnings[1..3],
            ["--feature-gates: A: checked, no effect here", "--feature-gates: B: checked, no effect here"]
        );
        assert!(o.warnings[3].starts_with("--logtostderr: "));
        // v1.37's compatibility-version flags: the kube component's minor kept, the gates' defaults of that release.
        let o = ok(&["--emulated-version=kube=1.35", "--min-compatibility-version=1.35", "--tls-curve-preferences=29"]);
        assert_eq!((o.emulated_minor, o.min_compatibility_minor, o.warnings.len()), (Some(35), Some(35), 1));
        let f = o.features().unwrap();
        assert!(!f.node_declared_features && !f.dra_extended_resource && f.nominated_node_name_for_expectation);
        assert!(ok(&[]).features().unwrap().node_declared_features);
        // Locked at v1.37, not at v1.36.
        assert!(
            !ok(&["--emulated-version=1.36", "--feature-gates=NodeDeclaredFeatures=false"])
                .features()
                .unwrap()
                .node_declared_features
        );
    }

    #[test]
    fn wrong_values_are_refused_naming_the_flag() {
        for (args, flag) in [
            (&["--secure-port=abc"][..], "--secure-port"),
            (&["--secure-port=70000"], "--secure-port"),
            (&["--kube-api-qps=fast"], "--kube-api-qps"),
            (&["--kube-api-qps=NaN"], "--kube-api-qps"),
            (&["--kube-api-qps=inf"], "--kube-api-qps"),
            (&["--kube-api-qps=1e39"], "--kube-api-qps"),
            (&["--leader-elect-retry-period=2562048h"], "--leader-elect-retry-period"),
            (&["--kube-api-burst=-1"], "--kube-api-burst"),
            (&["--feature-gates=NodeDeclaredFeatures=false"], "--feature-gates"),
            (&["--emulated-version=1.34", "--feature-gates=GenericWorkload=true"], "--feature-gates"),
            (&["--leader-elect-lease-duration=15"], "--leader-elect-lease-duration"),
            (&["--profiling=maybe"], "--profiling"),
            (&["--logging-format=xml"], "--logging-format"),
            (&["--port=10251"], "--port"),
            (&["--bind-address=localhost"], "--bind-address"),
            (&["-v=high"], "--v"),
            (&["--tls-min-version=VersionTLS9"], "--tls-min-version"),
            (&["--emulated-version=1.33"], "--emulated-version"),
            (&["--emulated-version=wardle=1.2"], "--emulated-version"),
            (&["--min-compatibility-version=kube=1.38"], "--min-compatibility-version"),
            (&["--emulated-version=1.35", "--min-compatibility-version=1.36"], "--min-compatibility-version"),
            (&["--tls-curve-preferences=23,x"], "--tls-curve-preferences"),
            (&["--tls-cipher-suites=TLS_NOPE"], "--tls-cipher-suites"),
            (&["--feature-gates=A=yes"], "--feature-gates"),
            (&["--leader-elect-resource-lock=endpoints"], "--leader-elect-resource-lock"),
            (&["--tls-cert-file=a.crt"], "--tls-cert-file"),
        ] {
            let e = err(args);
            assert!(e.contains(&format!("\"{flag}\"")), "{args:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn unknown_and_incomplete_flags_are_refused() {
        assert_eq!(err(&["--secure-prot=1"]), "unknown flag: --secure-prot");
        assert_eq!(err(&["--permit-address-reuse"]), "unknown flag: --permit-address-reuse");
        assert_eq!(err(&["-x"]), "unknown shorthand flag: 'x' in -x");
        assert_eq!(err(&["--config"]), "flag needs an argument: --config");
        assert_eq!(err(&["serve"]), "kube-scheduler does not take any arguments, got \"serve\"");
    }

    #[test]
    fn every_flag_in_the_table_is_handled() {
        for f in FLAGS {
            let value = match (f.name, f.kind) {
                (_, Bool) => "true",
                ("port", _) => "0",
                ("bind-address", _) => "127.0.0.1",
                ("logging-format", _) => "json",
                ("tls-min-version", _) => "VersionTLS12",
                ("tls-cipher-suites", _) => "TLS_AES_128_GCM_SHA256",
                ("leader-elect-resource-lock", _) => "leases",
                ("show-hidden-metrics-for-version", _) => "1.33",
                ("feature-gates", _) => "A=true",
                ("vmodule", _) => "x=2",
                ("allow-metric-labels", _) => "m,l=a,b",
                ("explain", _) => "default/p",
                ("emulated-version" | "min-compatibility-version", _) => "kube=1.36",
                ("tls-curve-preferences", _) => "23,29",
                (n, _)
                    if n.ends_with("ttl")
                        || n.contains("duration")
                        || n.contains("deadline")
                        || n.contains("period")
                        || n.contains("frequency") =>
                {
                    "1s"
                }
                _ => "1",
            };
            let mut args = vec![format!("--{}={value}", f.name)];
            if f.name == "tls-cert-file" {
                args.push("--tls-private-key-file=k".into());
            }
            if f.name == "tls-private-key-file" {
                args.push("--tls-cert-file=c".into());
            }
            parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn http2_max_streams_takes_a_go_int() {
        // Upstream's flag is a Go int (64 bits): every value in range is accepted, and narrowed as upstream does.
        for (v, streams) in [
            ("0", 100),
            ("-1", 100),
            ("100", 100),
            ("4294967296", 250),
            ("4294967297", 1),
            ("9223372036854775807", u32::MAX),
        ] {
            let o = ok(&[&format!("--http2-max-streams-per-connection={v}")]);
            assert_eq!(o.serving.http2_max_concurrent_streams(), streams, "{v}");
        }
        assert!(err(&["--http2-max-streams-per-connection=9223372036854775808"]).contains("out of range"));
    }

    #[test]
    fn deprecated_client_flags_apply_only_without_a_config_file() {
        let mut cfg = SchedulerConfig::default_config();
        let o = ok(&["--kube-api-qps=5", "--kube-api-burst", "7", "--leader-elect=false"]);
        let warnings = o.apply_to(&mut cfg);
        assert_eq!((cfg.client_connection.qps, cfg.client_connection.burst), (Some(5.0), Some(7)));
        assert!(!cfg.leader_election.leader_elect);
        assert!(warnings.is_empty(), "applied, and enforced by the client: {warnings:?}");
        let mut cfg = SchedulerConfig::default_config();
        let o = ok(&["--config=x.yaml", "--kube-api-qps=5"]);
        let warnings = o.apply_to(&mut cfg);
        assert_eq!(cfg.client_connection.qps, SchedulerConfig::default_config().client_connection.qps);
        assert!(warnings[0].contains("ignored because --config is given"), "{warnings:?}");
    }
}
