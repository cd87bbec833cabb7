//! `/healthz`, `/livez` and `/readyz` as k8s.io/apiserver's `pkg/server/healthz/healthz.go` installs them: the root
//! path runs every check (`?exclude=NAME` skips one, `?verbose` lists them), `<root>/<check>` runs one, and any other
//! path under the root is not found. A root without checks gets upstream's `ping`.

use std::collections::BTreeSet;

use hyper::StatusCode;

/// One named check (upstream `HealthChecker`).
pub struct HealthCheck {
    /// The name, as `/readyz/<name>` and in verbose output.
    pub name: &'static str,
    /// `Err(reason)` when failing; the reason goes to the log and to `/<root>/<name>`, never to the root's answer.
    pub check: Box<dyn Fn() -> Result<(), String> + Send + Sync>,
}

impl HealthCheck {
    /// A check named `name`.
    pub fn new(name: &'static str, check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> HealthCheck {
        HealthCheck { name, check: Box::new(check) }
    }
}

/// Upstream's `PingHealthz`: always ok, installed when a root has no checks.
const PING: &str = "ping";

/// An answer: status and plain-text body.
pub(crate) type Answer = (StatusCode, String);

/// The answer for `path` if it is under `root` (`/healthz`, `/livez`, `/readyz`), else `None`.
pub(crate) fn answer(root: &str, checks: &[HealthCheck], path: &str, query: Option<&str>) -> Option<Answer> {
    let rest = path.strip_prefix(root)?;
    let name = root.trim_start_matches('/');
    if rest.is_empty() {
        return Some(root_answer(name, checks, query));
    }
    let sub = rest.strip_prefix('/')?;
    if checks.is_empty() {
        return Some(if sub == PING { (StatusCode::OK, "ok".into()) } else { not_found() });
    }
    Some(match checks.iter().find(|c| c.name == sub) {
        Some(c) => match (c.check)() {
            Ok(()) => (StatusCode::OK, "ok".into()),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("internal server error: {e}\n")),
        },
        None => not_found(),
    })
}

/// Go's `http.NotFound` body.
pub(crate) fn not_found() -> Answer {
    (StatusCode::NOT_FOUND, "404 page not found\n".into())
}

/// Upstream's `handleRootHealth`.
fn root_answer(name: &str, checks: &[HealthCheck], query: Option<&str>) -> Answer {
    let params: Vec<(String, String)> = query.map(parse_query).unwrap_or_default();
    let excluded: BTreeSet<&str> = params.iter().filter(|(k, _)| k == "exclude").map(|(_, v)| v.as_str()).collect();
    let verbose = params.iter().any(|(k, _)| k == "verbose");
    let mut unknown_excluded = excluded.clone();
    let mut out = String::new();
    let mut failed = Vec::new();
    let ping = [HealthCheck::new(PING, || Ok(()))];
    let checks = if checks.is_empty() { &ping[..] } else { checks };
    for c in checks {
        if excluded.contains(c.name) {
            unknown_excluded.remove(c.name);
            out.push_str(&format!("[+]{} excluded: ok\n", c.name));
            continue;
        }
        match (c.check)() {
            Ok(()) => out.push_str(&format!("[+]{} ok\n", c.name)),
            Err(e) => {
                // As upstream: the endpoint is public, the reason goes to the log only.
                tracing::debug!(check = c.name, "{name} check failed: {e}");
                out.push_str(&format!("[-]{} failed: reason withheld\n", c.name));
                failed.push(c.name);
            }
        }
    }
    if !unknown_excluded.is_empty() {
        let names: Vec<String> = unknown_excluded.iter().map(|n| format!("{n:?}")).collect();
        out.push_str(&format!("warn: some health checks cannot be excluded: no matches for {}\n", names.join(",")));
    }
    if !failed.is_empty() {
        // Go's http.Error appends a newline.
        return (StatusCode::INTERNAL_SERVER_ERROR, format!("{out}{name} check failed\n"));
    }
    if !verbose {
        return (StatusCode::OK, "ok".into());
    }
    (StatusCode::OK, format!("{out}{name} check passed\n"))
}

/// `a=b&c` into pairs, `%XX` and `+` decoded as Go's `url.ParseQuery` does.
fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (super::authn::percent_decode(k, true), super::authn::percent_decode(v, true))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readyz(synced: bool) -> Vec<HealthCheck> {
        vec![
            HealthCheck::new("shutdown", || Ok(())),
            HealthCheck::new("sched-handler-sync", move || {
                if synced {
                    Ok(())
                } else {
                    Err("handlers are not fully synchronized".into())
                }
            }),
        ]
    }

    #[test]
    fn checks_answer_under_their_root_and_unknown_names_are_not_found() {
        let r = readyz(true);
        assert_eq!(answer("/readyz", &r, "/readyz", None), Some((StatusCode::OK, "ok".into())));
        assert_eq!(answer("/readyz", &r, "/readyz/sched-handler-sync", None), Some((StatusCode::OK, "ok".into())));
        assert_eq!(answer("/readyz", &r, "/readyz/anything", None), Some(not_found()));
        assert_eq!(answer("/readyz", &r, "/readyz/", None), Some(not_found()));
        assert_eq!(
            answer("/readyz", &r, "/readyz/ping", None),
            Some(not_found()),
            "ping only on a root without checks"
        );
        assert_eq!(answer("/readyz", &r, "/readyzz", None), None, "not under the root");
        assert_eq!(answer("/livez", &[], "/livez/ping", None), Some((StatusCode::OK, "ok".into())));
        assert_eq!(answer("/livez", &[], "/livez/log", None), Some(not_found()));
    }

    #[test]
    fn a_failing_check_fails_the_root_with_its_reason_withheld() {
        let r = readyz(false);
        let (code, body) = answer("/readyz", &r, "/readyz", None).unwrap();
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, "[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n");
        let (code, body) = answer("/readyz", &r, "/readyz/sched-handler-sync", None).unwrap();
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, "internal server error: handlers are not fully synchronized\n");
        let (code, body) = answer("/readyz", &r, "/readyz", Some("exclude=sched-handler-sync&verbose")).unwrap();
        assert_eq!(code, StatusCode::OK);
        assert_eq!(body, "[+]shutdown ok\n[+]sched-handler-sync excluded: ok\nreadyz check passed\n");
        let (_, body) = answer("/livez", &[], "/livez", Some("verbose=1&exclude=nope")).unwrap();
        assert_eq!(
            body,
            "[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n"
        );
    }
}
