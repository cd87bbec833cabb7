//! The pull side of the OCI distribution API (distribution-spec `spec.md`: `GET /v2/<name>/manifests/<reference>`,
//! `GET /v2/<name>/blobs/<digest>`; the bearer token flow of distribution's `docs/spec/auth/token.md`) on the
//! guarded client of `http.rs`: a manifest is read up to 4 MiB (containerd's bound), a blob up to its descriptor's
//! size, a digest must be `sha256:` and 64 hex digits before it is put in a URL, and no redirect leads inwards.
//! oci-client's pull calls read bodies whole and follow any redirect; it is kept for `plugin push`.

use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode, Url};
use serde::Deserialize;

use super::http::{self, BodyError};
use super::SourceError;
use crate::wasm::engine::sha256_hex;

/// The largest manifest read: containerd's bound (`MaxManifestSize`). A Wasm artifact's is under 1 KiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest token answer read.
const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// What a manifest may be (an image index is refused after reading: a Wasm artifact is one manifest).
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// The hex of a `sha256:HEX` digest, or why it is not one. Only SHA-256 is used, and only 64 lowercase hex digits
/// are a digest: anything else from a manifest, a header or the cache never reaches a URL or a path.
pub fn sha256_hex_of(digest: &str) -> Result<&str, String> {
    match digest.strip_prefix("sha256:") {
        Some(hex) if is_sha256_hex(hex) => Ok(hex),
        // Quoted with escapes, and cut: it came from the registry or a file.
        _ => Err(format!(
            "{:?} is not a sha256 digest (sha256: and 64 lowercase hex digits)",
            digest.chars().take(80).collect::<String>()
        )),
    }
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A repository of a registry, for one fetch.
pub(super) struct Registry {
    client: reqwest::Client,
    /// `scheme://host:port/v2/REPO/`.
    base: Url,
    repository: String,
    /// The source as the profile names it, for errors.
    shown: String,
    auth: RegistryAuth,
    /// The `Authorization` header learnt from a challenge.
    authorization: Mutex<Option<String>>,
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Basic,
    Bearer { realm: String, service: Option<String> },
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: Option<String>,
    access_token: Option<String>,
}

impl Registry {
    /// A client for `repository` at `origin` (`scheme://host:port/`), with credentials and the fetch's deadline.
    pub(super) fn new(
        origin: &Url,
        repository: &str,
        shown: &str,
        auth: RegistryAuth,
        timeout: Duration,
    ) -> Result<Registry, SourceError> {
        let client = http::client(origin, timeout).map_err(|e| http::failed(shown, e))?;
        let base = origin
            .join(&format!("v2/{repository}/"))
            .map_err(|e| SourceError::Invalid { source_name: shown.to_string(), detail: e.to_string() })?;
        let authorization = match &auth {
            RegistryAuth::Bearer(token) => Some(format!("Bearer {token}")),
            _ => None,
        };
        Ok(Registry {
            client,
            base,
            repository: repository.to_string(),
            shown: shown.to_string(),
            auth,
            authorization: Mutex::new(authorization),
        })
    }

    fn invalid(&self, detail: String) -> SourceError {
        SourceError::Invalid { source_name: self.shown.clone(), detail }
    }

    /// The manifest at a tag or a digest, and its digest (of the bytes read; a digest asked for must match).
    pub(super) async fn manifest(&self, reference: &str) -> Result<(Vec<u8>, String), SourceError> {
        let asked =
            reference.contains(':').then(|| sha256_hex_of(reference)).transpose().map_err(|e| self.invalid(e))?;
        let response = self.send(Method::GET, &format!("manifests/{reference}"), Some(MANIFEST_ACCEPT)).await?;
        let bytes = match http::read_bounded(response, MAX_MANIFEST_BYTES).await {
            Ok(b) => b,
            Err(BodyError::Over) => {
                return Err(SourceError::TooLarge {
                    source_name: self.shown.clone(),
                    what: "its manifest is",
                    limit: MAX_MANIFEST_BYTES,
                })
            }
            Err(BodyError::Http(e)) => return Err(http::failed(&self.shown, e)),
        };
        let digest = sha256_hex(&bytes);
        if asked.is_some_and(|want| want != digest) {
            return Err(
                self.invalid(format!("the registry answered a manifest whose sha256 is {digest}, not {reference}"))
            );
        }
        Ok((bytes, format!("sha256:{digest}")))
    }

    /// What a tag points at now, by a HEAD (its `Docker-Content-Digest`), or a GET when the registry does not say.
    pub(super) async fn manifest_digest(&self, tag: &str) -> Result<String, SourceError> {
        let response = self.send(Method::HEAD, &format!("manifests/{tag}"), Some(MANIFEST_ACCEPT)).await?;
        match response.headers().get("docker-content-digest").map(|v| v.to_str().unwrap_or("")) {
            Some(d) => {
                sha256_hex_of(d).map(|_| d.to_string()).map_err(|e| self.invalid(format!("Docker-Content-Digest: {e}")))
            }
            None => Ok(self.manifest(tag).await?.1),
        }
    }

    /// The blob `digest` of `size` bytes, as its descriptor says: refused past that size, checked against the digest.
    pub(super) async fn blob(&self, digest: &str, size: u64) -> Result<Vec<u8>, SourceError> {
        let want = sha256_hex_of(digest).map_err(|e| self.invalid(format!("its layer: {e}")))?;
        let response = self.send(Method::GET, &format!("blobs/{digest}"), None).await?;
        let over = || {
            self.invalid(format!("the registry sent more than the {size} bytes the descriptor of {digest} declares"))
        };
        let bytes = match http::read_bounded(response, size).await {
            Ok(b) => b,
            Err(BodyError::Over) => return Err(over()),
            Err(BodyError::Http(e)) => return Err(http::failed(&self.shown, e)),
        };
        if bytes.len() as u64 != size {
            return Err(self.invalid(format!("the registry sent {} of the {size} bytes of {digest}", bytes.len())));
        }
        let got = sha256_hex(&bytes);
        if got != want {
            return Err(self.invalid(format!("the registry sent bytes whose sha256 is {got} for {digest}")));
        }
        Ok(bytes)
    }

    /// Sends a request under the repository, answering an authentication challenge once; an error status is an
    /// error.
    async fn send(&self, method: Method, path: &str, accept: Option<&str>) -> Result<Response, SourceError> {
        let url = self.base.join(path).map_err(|e| self.invalid(e.to_string()))?;
        // A joined path that left the repository (a `..` the checks above missed) is never requested.
        if !url.path().starts_with(self.base.path()) {
            return Err(self.invalid(format!("{path:?} leaves the repository")));
        }
        let mut response = self.request(method.clone(), &url, accept).await?;
        if response.status() == StatusCode::UNAUTHORIZED && self.answer_challenge(&response).await? {
            response = self.request(method, &url, accept).await?;
        }
        if !response.status().is_success() {
            return Err(http::refusal(&self.shown, response).await);
        }
        Ok(response)
    }

    async fn request(&self, method: Method, url: &Url, accept: Option<&str>) -> Result<Response, SourceError> {
        let mut request = self.client.request(method, url.clone());
        if let Some(a) = accept {
            request = request.header(ACCEPT, a);
        }
        if let Some(a) = self.authorization.lock().expect("authorization lock").clone() {
            request = request.header(AUTHORIZATION, a);
        }
        request.send().await.map_err(|e| http::failed(&self.shown, e))
    }

    /// Learns the `Authorization` a 401 asks for; false when there is nothing to answer it with.
    async fn answer_challenge(&self, response: &Response) -> Result<bool, SourceError> {
        let challenge =
            response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).and_then(parse_challenge);
        let authorization = match (challenge, &self.auth) {
            (Some(Challenge::Basic), RegistryAuth::Basic(user, password)) => {
                format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
            }
            (Some(Challenge::Bearer { realm, service }), auth) if !matches!(auth, RegistryAuth::Bearer(_)) => {
                format!("Bearer {}", self.token(&realm, service.as_deref()).await?)
            }
            _ => return Ok(false),
        };
        *self.authorization.lock().expect("authorization lock") = Some(authorization);
        Ok(true)
    }

    /// A pull token for the repository from the challenge's realm, asked with the credentials when there are some.
    async fn token(&self, realm: &str, service: Option<&str>) -> Result<String, SourceError> {
        let realm_url =
            Url::parse(realm).map_err(|e| self.invalid(format!("token realm {:?}: {e}", http::sanitize(realm, 80))))?;
        // The realm is held to the rule of a redirect: credentials may go there.
        http::redirect_allowed(&self.base, &realm_url)
            .map_err(|e| self.invalid(format!("token realm: {}", e.trim_start_matches("redirect to "))))?;
        let scope = format!("repository:{}:pull", self.repository);
        let mut query = vec![("scope", scope.as_str())];
        if let Some(s) = service {
            query.push(("service", s));
        }
        let mut request = self.client.get(realm_url).query(&query);
        if let RegistryAuth::Basic(user, password) = &self.auth {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(|e| http::failed(&self.shown, e))?;
        if !response.status().is_success() {
            return Err(http::refusal(&self.shown, response).await);
        }
        let body = match http::read_bounded(response, MAX_TOKEN_BYTES).await {
            Ok(b) => b,
            Err(BodyError::Over) => return Err(self.invalid("the token answer is over 64 KiB".into())),
            Err(BodyError::Http(e)) => return Err(http::failed(&self.shown, e)),
        };
        let answer: TokenAnswer =
            serde_json::from_slice(&body).map_err(|e| self.invalid(format!("the token answer: {e}")))?;
        answer.token.or(answer.access_token).ok_or_else(|| self.invalid("the token answer holds no token".into()))
    }
}

/// A `WWW-Authenticate` header's challenge: `Basic realm=...` or `Bearer realm="...",service="...",scope="..."`.
fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    let mut rest = params.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(',').map_or((after, ""), |(v, a)| (v, a)),
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "realm" => realm = Some(value.to_string()),
            "service" => service = Some(value.to_string()),
            _ => {}
        }
        rest = after.trim_start_matches([',', ' ']);
    }
    Some(Challenge::Bearer { realm: realm?, service })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sha256_and_64_lowercase_hex_digits_are_a_digest() {
        let hex = "a".repeat(64);
        assert_eq!(sha256_hex_of(&format!("sha256:{hex}")), Ok(hex.as_str()));
        for bad in [
            "sha256:../../../../victim.txt".to_string(),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:{}", "a".repeat(63)),
            format!("sha256:{}/..", "a".repeat(64)),
            format!("sha512:{}", "a".repeat(128)),
            hex.clone(),
            String::new(),
        ] {
            let e = sha256_hex_of(&bad).unwrap_err();
            assert!(e.contains("not a sha256 digest"), "{bad}: {e}");
        }
        assert!(is_sha256_hex(&hex) && !is_sha256_hex("../x") && !is_sha256_hex(&"g".repeat(64)));
    }

    #[test]
    fn challenges_parse_as_distribution_and_docker_hub_send_them() {
        assert_eq!(parse_challenge(r#"Basic realm="kws""#), Some(Challenge::Basic));
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/x:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into())
            })
        );
        assert_eq!(
            parse_challenge("bearer realm=https://r.io/token, scope=x"),
            Some(Challenge::Bearer { realm: "https://r.io/token".into(), service: None })
        );
        assert_eq!(parse_challenge(r#"Bearer service="x""#), None, "no realm");
        assert_eq!(parse_challenge("Negotiate abc"), None);
        assert_eq!(parse_challenge(r#"Bearer realm="unterminated"#), None);
    }
}
