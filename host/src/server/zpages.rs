//! `/flagz` and `/statusz` as kube-scheduler v1.37 serves them (k8s.io/apiserver `pkg/server/flagz` and
//! `pkg/server/statusz`, on by default since v1.36 through the ComponentFlagz and ComponentStatusz gates): plain
//! text by default, or a `Flagz`/`Statusz` object of `config.k8s.io/v1beta1` (or the deprecated `v1alpha1`) as
//! JSON or YAML when the Accept header asks for it with `as`, `g` and `v`; anything else is 406.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The component name both pages carry.
const COMPONENT: &str = "kube-scheduler";

/// The API group of the structured answers.
const GROUP: &str = "config.k8s.io";

/// The versions served; the first is deprecated (a `Warning` header says so).
const VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// The kube-scheduler release whose behaviour this scheduler follows, reported as the binary version.
pub const BINARY_VERSION: &str = "1.37.2";

/// The emulation version upstream reports: its build's, whatever `--emulated-version` says
/// (`compatibility.DefaultBuildEffectiveVersion()` in cmd/kube-scheduler/app/server.go).
const EMULATION_VERSION: &str = "1.37";

/// Upstream picks one of these at random for each text rendering, so that nobody parses the text.
const DELIMITERS: [&str; 4] = [":", ": ", "=", " "];

/// The warning both text pages start with.
const HEADER_WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.";

/// What `/flagz` and `/statusz` answer with.
pub struct ZPages {
    /// Every flag and its value as pflag prints it (None: ComponentFlagz is off and `/flagz` is not served).
    flags: Option<BTreeMap<String, String>>,
    /// `/flagz`'s text, rendered once as upstream caches it (with one delimiter for the process's life).
    flagz_text: String,
    /// Whether `/statusz` is served (ComponentStatusz).
    statusz: bool,
    /// When the process started, to the second.
    started: SystemTime,
    /// The listed paths' first segments, as `/statusz` shows them.
    paths: Vec<String>,
}

/// An answer: status code, headers and body.
pub struct Page {
    /// The HTTP status.
    pub code: u16,
    /// The Content-Type.
    pub content_type: String,
    /// A `Warning` header, for a deprecated version.
    pub warning: Option<&'static str>,
    /// The body.
    pub body: String,
}

/// What a request asks for, from its Accept header, query and User-Agent.
pub struct Ask<'a> {
    /// The Accept header (empty when absent).
    pub accept: &'a str,
    /// The query string.
    pub query: Option<&'a str>,
    /// The User-Agent header.
    pub user_agent: &'a str,
}

#[derive(Serialize)]
struct Meta {
    name: &'static str,
}

#[derive(Serialize)]
struct Flagz<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Meta,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    flags: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Statusz {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Meta,
    #[serde(rename = "startTime")]
    start_time: String,
    #[serde(rename = "uptimeSeconds")]
    uptime_seconds: u64,
    #[serde(rename = "goVersion")]
    go_version: &'static str,
    #[serde(rename = "binaryVersion")]
    binary_version: &'static str,
    #[serde(rename = "emulationVersion")]
    emulation_version: &'static str,
    paths: Vec<String>,
}

impl ZPages {
    /// The pages for these flags (None: `/flagz` off) and with `/statusz` on or off; `listed` are the served paths
    /// `/statusz` names (upstream lists its mux's listed paths, `/statusz` itself not among them).
    pub fn new(flags: Option<BTreeMap<String, String>>, statusz: bool, listed: &[&str]) -> ZPages {
        let delimiter = pick_delimiter();
        let mut flagz_text = format!("\n{COMPONENT} flagz\n{HEADER_WARNING}\n");
        for (name, value) in flags.iter().flatten() {
            flagz_text.push_str(&format!("{name}{delimiter}{value}\n"));
        }
        ZPages { flags, flagz_text, statusz, started: process_start(), paths: aggregate_paths(listed) }
    }

    /// Pages that serve nothing (both gates off).
    pub fn off() -> ZPages {
        ZPages { flags: None, flagz_text: String::new(), statusz: false, started: UNIX_EPOCH, paths: Vec::new() }
    }

    /// The answer for `path`, or None when it is neither page or that page is off.
    pub fn answer(&self, path: &str, ask: &Ask<'_>) -> Option<Page> {
        match path {
            "/flagz" => {
                let flags = self.flags.as_ref()?;
                Some(negotiate(
                    ask,
                    "Flagz",
                    || self.flagz_text.clone(),
                    |version| {
                        let object = Flagz {
                            kind: "Flagz",
                            api_version: format!("{GROUP}/{version}"),
                            metadata: Meta { name: COMPONENT },
                            flags,
                        };
                        serde_json::to_value(object).expect("flagz encodes")
                    },
                ))
            }
            "/statusz" if self.statusz => Some(negotiate(
                ask,
                "Statusz",
                || self.statusz_text(),
                |version| serde_json::to_value(self.statusz_object(version)).expect("statusz encodes"),
            )),
            _ => None,
        }
    }

    fn uptime(&self) -> u64 {
        SystemTime::now().duration_since(self.started).unwrap_or(Duration::ZERO).as_secs()
    }

    fn statusz_object(&self, version: &str) -> Statusz {
        Statusz {
            kind: "Statusz",
            api_version: format!("{GROUP}/{version}"),
            metadata: Meta { name: COMPONENT },
            start_time: rfc3339(self.started),
            uptime_seconds: self.uptime(),
            // No Go runtime here: the field is required upstream, so it is present and empty.
            go_version: "",
            binary_version: BINARY_VERSION,
            emulation_version: EMULATION_VERSION,
            paths: self.paths.clone(),
        }
    }

    fn statusz_text(&self) -> String {
        let d = pick_delimiter();
        let up = self.uptime();
        let uptime = format!("{} hr {:02} min {:02} sec", up / 3600, (up / 60) % 60, up % 60);
        let paths = match self.paths.join(" ") {
            p if p.is_empty() => p,
            p => format!("Paths{d} {p}"),
        };
        format!(
            "\n{COMPONENT} statusz\n{HEADER_WARNING}\n\nStarted{d} {}\nUp{d} {uptime}\nGo version{d} \nBinary version{d} {BINARY_VERSION}\nEmulation version{d} {EMULATION_VERSION}\n{paths}\n",
            unix_date(self.started)
        )
    }
}

/// A media type the pages serve, in upstream's codec factory order.
#[derive(Clone, Copy, PartialEq)]
enum Media {
    Json,
    Yaml,
    Text,
}

const SERVED: [(Media, &str, &str); 3] =
    [(Media::Json, "application", "json"), (Media::Yaml, "application", "yaml"), (Media::Text, "text", "plain")];

/// One clause of an Accept header (goautoneg's `ParseAccept`).
struct Clause {
    q: f32,
    kind: String,
    sub: String,
    params: Vec<(String, String)>,
}

fn parse_accept(header: &str) -> Vec<Clause> {
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("");
        let mut halves = media.split('/');
        let kind = halves.next().unwrap_or("").trim_matches(' ').to_string();
        let sub = match (halves.next(), halves.next()) {
            (None, _) if kind == "*" => "*".to_string(),
            (Some(s), None) => s.trim_matches(' ').to_string(),
            _ => continue,
        };
        let mut clause = Clause { q: 1.0, kind, sub, params: Vec::new() };
        for param in pieces {
            let Some((k, v)) = param.split_once('=') else { continue };
            if v.contains('=') {
                continue;
            }
            match k.trim_matches(' ') {
                // Go's ParseFloat leaves 0 on an error.
                "q" => clause.q = v.parse().unwrap_or(0.0),
                k => clause.params.push((k.to_string(), v.trim_matches(' ').to_string())),
            }
        }
        clauses.push(clause);
    }
    // Higher q first, then specific types before wildcards.
    clauses.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.sub == "*").cmp(&(b.sub == "*")))
    });
    clauses
}

/// The first served media type (and version, for a structured one) that a clause accepts, with whether it asks
/// for pretty output (upstream's `NegotiateMediaTypeOptions` with the zpages' endpoint restrictions).
fn choose(header: &str, kind: &str) -> Option<(Media, Option<&'static str>, bool)> {
    for clause in parse_accept(header) {
        for (media, t, s) in SERVED {
            let matches = (clause.kind == t && (clause.sub == s || clause.sub == "*"))
                || (clause.kind == "*" && clause.sub == "*");
            if !matches {
                continue;
            }
            let (mut convert, mut pretty, mut refused) = (None::<[String; 3]>, false, false);
            for (k, v) in &clause.params {
                let slot = match k.as_str() {
                    "as" => 0,
                    "g" => 1,
                    "v" => 2,
                    // No stream schema or server version is served.
                    "stream" | "sv" => {
                        refused |= !v.is_empty();
                        continue;
                    }
                    "pretty" => {
                        pretty = v == "1";
                        continue;
                    }
                    _ => continue,
                };
                convert.get_or_insert_with(Default::default)[slot] = v.clone();
            }
            if refused {
                continue;
            }
            match (media, convert) {
                (Media::Text, None) => return Some((media, None, pretty)),
                (Media::Json | Media::Yaml, Some([as_kind, group, version])) if as_kind == kind && group == GROUP => {
                    if let Some(v) = VERSIONS.iter().find(|v| **v == version) {
                        return Some((media, Some(v), pretty));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// Whether upstream pretty-prints for this request: `?pretty=true`, or a browser or command-line User-Agent.
fn pretty_request(ask: &Ask<'_>) -> bool {
    if let Some(q) = ask.query.filter(|q| q.contains("pretty")) {
        let value = q.split('&').find_map(|kv| kv.strip_prefix("pretty=")).unwrap_or("");
        if !value.is_empty() {
            return matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True");
        }
    }
    ["curl", "Wget", "Mozilla/5.0"].iter().any(|p| ask.user_agent.starts_with(p))
}

fn negotiate(
    ask: &Ask<'_>,
    kind: &'static str,
    text: impl FnOnce() -> String,
    object: impl FnOnce(&'static str) -> serde_json::Value,
) -> Page {
    let text_page = |body| Page { code: 200, content_type: "text/plain; charset=utf-8".into(), warning: None, body };
    if ask.accept.trim().is_empty() {
        return text_page(text());
    }
    let Some((media, version, pretty)) = choose(ask.accept, kind) else {
        return not_acceptable();
    };
    let Some(version) = version else {
        return text_page(text());
    };
    let value = object(version);
    let (subtype, body) = match media {
        Media::Yaml => ("yaml", serde_yaml::to_string(&value).expect("yaml encodes")),
        _ if pretty || pretty_request(ask) => ("json", serde_json::to_string_pretty(&value).expect("json encodes")),
        _ => ("json", serde_json::to_string(&value).expect("json encodes") + "\n"),
    };
    let warning = (version == VERSIONS[0]).then_some(match kind {
        "Flagz" => r#"299 - "This version of the flagz endpoint is deprecated. Please use a newer version.""#,
        _ => r#"299 - "This version of the statusz endpoint is deprecated. Please use a newer version.""#,
    });
    Page { code: 200, content_type: format!("application/{subtype};g={GROUP};v={version};as={kind}"), warning, body }
}

/// Upstream's 406: a Status naming what can be served.
fn not_acceptable() -> Page {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "only the following media types are accepted: application/json, application/yaml, text/plain",
        "reason": "NotAcceptable",
        "code": 406,
    });
    Page {
        code: 406,
        content_type: "application/json".into(),
        warning: None,
        body: serde_json::to_string_pretty(&body).expect("json encodes"),
    }
}

fn pick_delimiter() -> &'static str {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    DELIMITERS[(nanos / 1000) as usize % DELIMITERS.len()]
}

/// The first path segments of the listed paths, sorted and without upstream's non-debugging roots.
fn aggregate_paths(listed: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = listed
        .iter()
        .filter_map(|p| p.split('/').nth(1).filter(|s| !s.is_empty()))
        .map(|s| format!("/{s}"))
        .filter(|p| !["/apis", "/api", "/openid", "/openapi", "/.well-known"].contains(&p.as_str()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// When this process started, from /proc (as upstream's `GetProcessStart`), to the second; now when /proc cannot
/// tell.
fn process_start() -> SystemTime {
    let from_proc = || -> Option<SystemTime> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command may hold spaces and parentheses: fields are counted after the last ')'.
        let after = &stat[stat.rfind(')')? + 2..];
        let ticks: u64 = after.split(' ').nth(19)?.parse().ok()?;
        let boot: u64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        // USER_HZ is 100 on every Linux the scheduler runs on.
        Some(UNIX_EPOCH + Duration::from_secs(boot + ticks / 100))
    };
    from_proc().unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        UNIX_EPOCH + Duration::from_secs(now.as_secs())
    })
}

/// Days since the epoch to (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn split(t: SystemTime) -> (i64, u32, u32, u64, i64) {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let days = (secs / 86_400) as i64;
    let (y, m, d) = civil(days);
    (y, m, d, secs % 86_400, days)
}

/// RFC 3339 in UTC to the second, as `metav1.Time` encodes.
fn rfc3339(t: SystemTime) -> String {
    let (y, m, d, s, _) = split(t);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// Go's `time.UnixDate` layout in UTC (`Mon Jan _2 15:04:05 MST 2006`).
fn unix_date(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (y, m, d, s, days) = split(t);
    format!(
        "{} {} {d:>2} {:02}:{:02}:{:02} UTC {y}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[m as usize - 1],
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(accept: &str) -> Ask<'_> {
        Ask { accept, query: None, user_agent: "test" }
    }

    fn pages() -> ZPages {
        let flags = BTreeMap::from([("secure-port".to_string(), "10259".to_string()), ("v".into(), "2".into())]);
        ZPages::new(
            Some(flags),
            true,
            &["/healthz", "/livez", "/readyz", "/metrics", "/metrics/slis", "/configz", "/flagz"],
        )
    }

    #[test]
    fn text_by_default_with_upstreams_header_and_one_delimiter() {
        let p = pages().answer("/flagz", &ask("")).unwrap();
        assert_eq!((p.code, p.content_type.as_str()), (200, "text/plain; charset=utf-8"));
        let lines: Vec<&str> = p.body.lines().collect();
        assert_eq!(lines[1], "kube-scheduler flagz");
        assert!(lines[2].starts_with("Warning: This endpoint is not meant to be machine parseable"));
        let d = lines[3].strip_prefix("secure-port").unwrap().strip_suffix("10259").unwrap();
        assert!(DELIMITERS.contains(&d), "{d:?}");
        assert_eq!(lines[4], format!("v{d}2"));
        // Wildcards and text/plain get the text too; the cached text does not change.
        assert_eq!(pages().answer("/flagz", &ask("*/*")).unwrap().content_type, "text/plain; charset=utf-8");
        let z = pages();
        assert_eq!(z.answer("/flagz", &ask("text/plain")).unwrap().body, z.answer("/flagz", &ask("")).unwrap().body);
    }

    #[test]
    fn structured_answers_need_kind_group_and_version() {
        let z = pages();
        let p = z.answer("/flagz", &ask("application/json;as=Flagz;v=v1beta1;g=config.k8s.io")).unwrap();
        assert_eq!(p.content_type, "application/json;g=config.k8s.io;v=v1beta1;as=Flagz");
        assert!(p.warning.is_none());
        let v: serde_json::Value = serde_json::from_str(&p.body).unwrap();
        assert_eq!(v["kind"], "Flagz");
        assert_eq!(v["apiVersion"], "config.k8s.io/v1beta1");
        assert_eq!(v["metadata"]["name"], "kube-scheduler");
        assert_eq!(v["flags"]["secure-port"], "10259");
        let p = z.answer("/statusz", &ask("application/json;as=Statusz;v=v1alpha1;g=config.k8s.io")).unwrap();
        assert!(p.warning.unwrap().contains("statusz endpoint is deprecated"));
        let v: serde_json::Value = serde_json::from_str(&p.body).unwrap();
        assert_eq!(v["paths"], serde_json::json!(["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"]));
        assert_eq!(v["binaryVersion"], "1.37.2");
        assert!(v["startTime"].as_str().unwrap().ends_with('Z'));
        let p = z.answer("/statusz", &ask("application/yaml;as=Statusz;v=v1beta1;g=config.k8s.io")).unwrap();
        assert!(p.body.starts_with("apiVersion: config.k8s.io/v1beta1\n"), "{}", p.body);
        // JSON without a kind, the other page's kind, a wrong group, or text with a kind: 406.
        for bad in [
            "application/json",
            "application/json;as=Flagz;v=v1beta1;g=config.k8s.io",
            "application/json;as=Statusz;v=v1beta1",
            "text/plain;as=Statusz;v=v1beta1;g=config.k8s.io",
            "application/protobuf",
        ] {
            let p = z.answer("/statusz", &ask(bad)).unwrap();
            assert_eq!(p.code, 406, "{bad}");
            assert!(p.body.contains("NotAcceptable"));
        }
        // A later acceptable clause wins over an unacceptable first one.
        assert_eq!(z.answer("/statusz", &ask("application/json, text/plain")).unwrap().code, 200);
    }

    #[test]
    fn off_pages_are_not_found() {
        let z = ZPages::new(None, false, &[]);
        assert!(z.answer("/flagz", &ask("")).is_none());
        assert!(z.answer("/statusz", &ask("")).is_none());
    }

    #[test]
    fn dates_are_gos() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_822_371);
        assert_eq!(rfc3339(t), "2026-11-27T23:32:51Z");
        assert_eq!(unix_date(t), "Fri Nov 27 23:32:51 UTC 2026");
        assert_eq!(unix_date(UNIX_EPOCH + Duration::from_secs(86_400 * 4)), "Mon Jan  5 00:00:00 UTC 1970");
    }
}
