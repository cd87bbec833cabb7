//! HTTP for remote sources that may be hostile (issue 34), shared by the `https://` source and the registry client:
//! redirects that cannot lead to plain HTTP, the loopback interface or link-local addresses (cloud metadata), error
//! answers quoted by a short sanitized prefix only (they end in logs and Events), and bodies read against a bound.
//! The deadline of a whole fetch is the caller's (`within`).

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use reqwest::Url;

use super::{SourceError, CONNECT_TIMEOUT};

/// The most redirects one request follows (a registry's blob redirect to its storage is one).
const MAX_REDIRECTS: usize = 5;
/// How much of an error answer's body is read to quote it.
const ERROR_BODY_READ: usize = 4 << 10;
/// How many characters of an error answer's body are quoted.
pub(crate) const ERROR_BODY_QUOTED: usize = 200;
/// How many characters of a client error's description are kept (it can hold a long redirect target).
const DETAIL_QUOTED: usize = 400;

/// A client for one source whose own address is `origin` (scheme, host and port): a redirect elsewhere is held to
/// `redirect_allowed`; `timeout` bounds each request, bodies included.
pub(crate) fn client(origin: &Url, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    let origin = origin.clone();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(timeout)
        .user_agent(concat!("kube-wasm-scheduler/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            match redirect_allowed(&origin, attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(why),
            }
        }))
        .build()
}

/// Whether a source at `origin` may send a request on to `to`. Its own address always; elsewhere never from HTTPS
/// down to plain HTTP, only over HTTPS (a plain-HTTP loopback registry cannot hand a request to another plain-HTTP
/// server), never to a link-local address (169.254.0.0/16, fe80::/10: the cloud metadata service), and never to
/// the loopback interface or the unspecified address (the machine's own services). Names other than `localhost`
/// are not resolved here: reaching one over HTTPS needs a certificate for it.
pub(crate) fn redirect_allowed(origin: &Url, to: &Url) -> Result<(), String> {
    let same = to.scheme() == origin.scheme()
        && to.host_str() == origin.host_str()
        && to.port_or_known_default() == origin.port_or_known_default();
    if same {
        return Ok(());
    }
    let shown = sanitize(to.as_str(), 120);
    let refused = |why: &str| Err(format!("redirect to {shown} refused: {why}"));
    let Some(host) = to.host_str() else { return refused("it names no host") };
    if origin.scheme() == "https" && to.scheme() != "https" {
        return refused("a downgrade from https to plain http");
    }
    let host = host.trim_end_matches('.');
    // The URL parser has already turned the other spellings of an IPv4 address (`2852039166`, `0xa9.254.169.254`)
    // into the dotted one.
    match host.trim_matches(['[', ']']).parse::<IpAddr>().map(|ip| ip.to_canonical()) {
        Ok(ip) if is_link_local(ip) => return refused("a link-local address"),
        Ok(ip) if ip.is_loopback() || ip.is_unspecified() => {
            return refused("a loopback address other than the source's own")
        }
        Err(_) if is_loopback_host(host) || host.to_ascii_lowercase().ends_with(".localhost") => {
            return refused("a loopback address other than the source's own")
        }
        _ => {}
    }
    if to.scheme() != "https" {
        return refused("plain http is followed only to the source's own address");
    }
    Ok(())
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    }
}

/// True for `localhost` and loopback addresses.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// `text` as it may appear in a log line or an Event: control and invisible formatting characters (newlines,
/// terminal escapes, bidirectional overrides) become spaces, runs of spaces one, and at most `max` characters.
pub(crate) fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        let invisible =
            matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if c.is_whitespace() || c.is_control() || invisible {
            space = !out.is_empty();
            continue;
        }
        if count == max {
            out.push('…');
            break;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// An error answer: its status and the start of its body, sanitized.
pub(crate) async fn refusal(source_name: &str, mut response: reqwest::Response) -> SourceError {
    let url = sanitize(response.url().as_str(), 200);
    let status = response.status().to_string();
    let mut body = Vec::new();
    // Only the start is read: a 20 MB error page is not a log line.
    while body.len() < ERROR_BODY_READ {
        match response.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c[..c.len().min(ERROR_BODY_READ - body.len())]),
            _ => break,
        }
    }
    let body = sanitize(&String::from_utf8_lossy(&body), ERROR_BODY_QUOTED);
    SourceError::Status { source_name: source_name.to_string(), url, status, body }
}

/// A client error (connection, TLS, timeout, refused redirect) for the source, its description cut.
pub(crate) fn failed(source_name: &str, e: reqwest::Error) -> SourceError {
    SourceError::Http {
        url: source_name.to_string(),
        detail: sanitize(&super::chain(&e), DETAIL_QUOTED),
        source: std::sync::Arc::new(e),
    }
}

/// Why a body was not read whole.
pub(crate) enum BodyError {
    /// It is longer than the bound (declared or sent).
    Over,
    /// The connection failed or timed out.
    Http(reqwest::Error),
}

/// Reads a body whole, refusing it as soon as it is over `limit` bytes, declared or sent: a server that declares no
/// length, or lies about it, cannot fill the memory.
pub(crate) async fn read_bounded(mut response: reqwest::Response, limit: u64) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit) {
        return Err(BodyError::Over);
    }
    let mut bytes = Vec::with_capacity(response.content_length().unwrap_or(0) as usize);
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Http)? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(BodyError::Over);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Runs a whole fetch (every request of it, bodies included) against its deadline, `pullTimeout`.
pub(crate) async fn within<T>(
    timeout: Duration,
    source_name: &str,
    fetch: impl Future<Output = Result<T, SourceError>>,
) -> Result<T, SourceError> {
    tokio::time::timeout(timeout, fetch)
        .await
        .unwrap_or_else(|_| Err(SourceError::Deadline { source_name: source_name.to_string(), timeout }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_off_plain_http_loopback_and_link_local() {
        let url = |s: &str| Url::parse(s).unwrap();
        let registry = url("http://127.0.0.1:5000/v2/x/blobs/sha256:aa");
        let public = url("https://ghcr.io/v2/x/blobs/sha256:aa");
        for (origin, to, want) in [
            (&registry, "http://127.0.0.1:5000/storage/aa", None),
            (&public, "https://ghcr.io/other", None),
            (&public, "https://pkg-containers.githubusercontent.com/ghcr1/blobs/x", None),
            (&public, "https://10.0.0.7/blobs", None),
            (&public, "http://ghcr.io/v2/x", Some("downgrade")),
            (&public, "http://pkg-containers.githubusercontent.com/x", Some("downgrade")),
            (&public, "http://169.254.169.254/", Some("downgrade")),
            (&registry, "http://127.0.0.1:5001/", Some("loopback")),
            (&registry, "http://169.254.169.254/latest/meta-data/", Some("link-local")),
            (&registry, "http://10.0.0.7/blobs", Some("plain http")),
            (&registry, "https://127.0.0.1:5001/", Some("loopback")),
            (&registry, "https://127.0.0.2:5000/", Some("loopback")),
            (&public, "https://localhost/", Some("loopback")),
            (&public, "https://[::1]:443/", Some("loopback")),
            (&public, "https://0.0.0.0/", Some("loopback")),
            (&public, "https://169.254.169.254/latest/meta-data/", Some("link-local")),
            (&public, "https://[fe80::1]/", Some("link-local")),
            (&public, "https://[::ffff:169.254.169.254]/", Some("link-local")),
            (&public, "https://2852039166/", Some("link-local")),
        ] {
            match (redirect_allowed(origin, &url(to)), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w) && e.contains("refused"), "{to}: {e}"),
                (got, _) => panic!("{origin} -> {to}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn quoted_text_is_one_short_line_of_visible_characters() {
        assert_eq!(sanitize("  a\r\n\x1b[31mb\tc\u{202e}d  ", 100), "a [31mb c d");
        let long = sanitize(&"x".repeat(10_000), ERROR_BODY_QUOTED);
        assert_eq!(long.chars().count(), ERROR_BODY_QUOTED + 1);
        assert!(long.ends_with('…'));
        assert_eq!(sanitize("\n\n", 10), "");
        assert!(is_loopback_host("localhost") && is_loopback_host("127.0.0.1") && is_loopback_host("[::1]"));
        assert!(!is_loopback_host("ghcr.io") && !is_loopback_host("10.0.0.1"));
    }
}
