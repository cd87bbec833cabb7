//! Delegated authentication as upstream's `DelegatingAuthenticatorConfig` builds it: the front proxy
//! (`pkg/authentication/request/headerrequest`), then client certificates (`request/x509`, CN the user, O the
//! groups), then a bearer token checked with a TokenReview (`request/bearertoken`, cached). The first that
//! recognises the request wins; if none does and one failed, the request is refused (401); with no credentials at
//! all it is anonymous.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::HeaderMap;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::server::danger::ClientCertVerifier;
use sha2::{Digest, Sha256};

use super::tls::{client_verifier, verifier_from_pem, verify_client};
use super::ttl_cache::TtlCache;
use super::{DelegatingAuthenticationOptions, RequestHeaderOptions, ServeError};

/// How long one TokenReview may take (upstream `TokenRequestTimeout`).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Upstream's user and group names for requests without credentials, and the group every other user gets.
const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const AUTHENTICATED: &str = "system:authenticated";

/// Who made a request (upstream `user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The user's UID, when the authenticator knows one.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes (passed on to the SubjectAccessReview).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user of requests without credentials.
    pub fn anonymous() -> UserInfo {
        UserInfo { name: ANONYMOUS.into(), groups: vec![UNAUTHENTICATED.into()], ..Default::default() }
    }

    /// Adds `system:authenticated` as upstream's `AuthenticatedGroupAdder` does.
    fn authenticated(mut self) -> UserInfo {
        if self.name != ANONYMOUS && !self.groups.iter().any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED) {
            self.groups.push(AUTHENTICATED.into());
        }
        self
    }
}

/// The front proxy: a client certificate from its CA, with an allowed name, vouches for the user in the headers.
struct RequestHeader {
    verifier: Arc<dyn ClientCertVerifier>,
    headers: RequestHeaderOptions,
}

/// Bearer tokens checked with TokenReviews, answers cached for the TTL.
struct TokenReviews {
    client: kube::Client,
    ttl: Duration,
    cache: TtlCache<Option<UserInfo>>,
}

/// Authenticates requests; built once from the flags.
pub struct Authenticator {
    request_header: Option<RequestHeader>,
    client_cert: Option<Arc<dyn ClientCertVerifier>>,
    tokens: Option<TokenReviews>,
}

impl Authenticator {
    /// Reads the CA files; missing ones are looked up in the cluster's
    /// `kube-system/extension-apiserver-authentication` configmap unless `--authentication-skip-lookup`. Tokens are
    /// reviewed through `client` (none: every token is refused).
    pub async fn new(opts: &DelegatingAuthenticationOptions, client: Option<kube::Client>) -> Result<Self, ServeError> {
        let mut client_cert = match &opts.client_ca_file {
            Some(f) => Some(client_verifier(f)?),
            None => None,
        };
        let mut request_header = match &opts.request_header.client_ca_file {
            Some(f) => Some(RequestHeader { verifier: client_verifier(f)?, headers: opts.request_header.clone() }),
            None => None,
        };
        let lookup = !opts.skip_in_cluster_lookup && (client_cert.is_none() || request_header.is_none());
        if let (true, Some(c)) = (lookup, &client) {
            match in_cluster(c).await {
                Ok(found) => {
                    if client_cert.is_none() {
                        client_cert = found.client_ca;
                    }
                    if request_header.is_none() {
                        request_header = found.request_header;
                    }
                }
                Err(e) if opts.tolerate_in_cluster_lookup_failure => tracing::warn!(
                    "looking up configmap kube-system/extension-apiserver-authentication: {e}; continuing with the \
                     flags' CAs only (--authentication-tolerate-lookup-failure)"
                ),
                Err(e) => return Err(ServeError::Lookup(e)),
            }
        }
        let tokens = client.map(|client| TokenReviews { client, ttl: opts.cache_ttl, cache: TtlCache::new() });
        Ok(Authenticator { request_header, client_cert, tokens })
    }

    /// Whether clients should be asked for a certificate.
    pub fn wants_client_certificates(&self) -> bool {
        self.request_header.is_some() || self.client_cert.is_some()
    }

    /// The request's user: `Ok(None)` when it carries no credentials (anonymous), `Err` when credentials were
    /// presented and none was accepted.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: &[CertificateDer<'static>],
    ) -> Result<Option<UserInfo>, String> {
        let mut errors = Vec::new();
        if let (Some(rh), false) = (&self.request_header, peer.is_empty()) {
            match rh.authenticate(headers, peer) {
                Ok(Some(u)) => return Ok(Some(u.authenticated())),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let (Some(v), false) = (&self.client_cert, peer.is_empty()) {
            match verify_client(&**v, peer) {
                Ok((cn, _)) if cn.is_empty() => {}
                Ok((cn, orgs)) => {
                    return Ok(Some(UserInfo { name: cn, groups: orgs, ..Default::default() }.authenticated()))
                }
                Err(e) => errors.push(e),
            }
        }
        if let Some(token) = bearer_token(headers) {
            match &self.tokens {
                Some(t) => match t.review(token).await {
                    Ok(Some(u)) => return Ok(Some(u.authenticated())),
                    Ok(None) => errors.push("invalid bearer token".into()),
                    Err(e) => errors.push(e),
                },
                None => errors.push("invalid bearer token (no client to review tokens with)".into()),
            }
        }
        if errors.is_empty() {
            Ok(None)
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header, as upstream's bearertoken authenticator reads it.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let auth = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl RequestHeader {
    fn authenticate(&self, headers: &HeaderMap, peer: &[CertificateDer<'static>]) -> Result<Option<UserInfo>, String> {
        let (cn, _) = verify_client(&*self.verifier, peer)?;
        let allowed = &self.headers.allowed_names;
        if !allowed.is_empty() && !allowed.contains(&cn) {
            return Err(format!("x509: subject with cn={cn} is not in the allowed list"));
        }
        let values = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .flat_map(|n| headers.get_all(n.as_str()).iter())
                .filter_map(|v| v.to_str().ok())
                .filter(|v| !v.trim().is_empty())
                .map(str::to_string)
                .collect()
        };
        let Some(name) = values(&self.headers.username_headers).into_iter().next() else { return Ok(None) };
        let uid = values(&self.headers.uid_headers).into_iter().next().unwrap_or_default();
        let groups = values(&self.headers.group_headers);
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            for prefix in &self.headers.extra_header_prefixes {
                let prefix = prefix.to_ascii_lowercase();
                if let (Some(key), Ok(v)) = (header.as_str().strip_prefix(&prefix), value.to_str()) {
                    extra.entry(percent_decode(key, false).to_lowercase()).or_default().push(v.to_string());
                }
            }
        }
        Ok(Some(UserInfo { name, uid, groups, extra }))
    }
}

/// `%XX` escapes decoded (upstream unescapes extra keys, which headers cannot carry otherwise); a malformed escape
/// stays as written. With `plus_is_space`, `+` is a space too, as in a URL's query.
pub(super) fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl TokenReviews {
    /// The token's user (`None`: the API server does not know the token); answers are cached, errors are not.
    async fn review(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let key = format!("{:x}", Sha256::digest(token.as_bytes()));
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let review: TokenReview = serde_json::from_value(serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }))
        .expect("a TokenReview");
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
            .await
            .map_err(|_| "TokenReview timed out".to_string())?
            .map_err(|e| format!("TokenReview: {e}"))?;
        let status = answer.status.unwrap_or_default();
        if let Some(e) = status.error.filter(|e| !e.is_empty()) {
            return Err(e);
        }
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Some(UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            }),
            _ => None,
        };
        self.cache.insert(key, user.clone(), self.ttl);
        Ok(user)
    }
}

/// What the cluster's `extension-apiserver-authentication` configmap provides.
struct InCluster {
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    request_header: Option<RequestHeader>,
}

async fn in_cluster(client: &kube::Client) -> Result<InCluster, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let cm = tokio::time::timeout(REVIEW_TIMEOUT, api.get_opt("extension-apiserver-authentication"))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let data = cm.and_then(|c| c.data).unwrap_or_default();
    let client_ca = match data.get("client-ca-file") {
        Some(pem) => Some(verifier_from_pem(pem.as_bytes()).map_err(|e| format!("client-ca-file: {e}"))?),
        None => None,
    };
    let list = |key: &str| -> Result<Option<Vec<String>>, String> {
        data.get(key).map(|v| serde_json::from_str(v).map_err(|e| format!("{key}: {e}"))).transpose()
    };
    let request_header = match data.get("requestheader-client-ca-file") {
        Some(pem) => {
            let d = RequestHeaderOptions::default();
            Some(RequestHeader {
                verifier: verifier_from_pem(pem.as_bytes())
                    .map_err(|e| format!("requestheader-client-ca-file: {e}"))?,
                headers: RequestHeaderOptions {
                    client_ca_file: None,
                    allowed_names: list("requestheader-allowed-names")?.unwrap_or_default(),
                    username_headers: list("requestheader-username-headers")?.unwrap_or(d.username_headers),
                    uid_headers: list("requestheader-uid-headers")?.unwrap_or(d.uid_headers),
                    group_headers: list("requestheader-group-headers")?.unwrap_or(d.group_headers),
                    extra_header_prefixes: list("requestheader-extra-headers-prefix")?
                        .unwrap_or(d.extra_header_prefixes),
                },
            })
        }
        None => None,
    };
    Ok(InCluster { client_ca, request_header })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream() {
        for (value, want) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("  Bearer abc  ", Some("abc")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer  abc", None),
        ] {
            assert_eq!(bearer_token(&headers(&[("authorization", value)])), want, "{value:?}");
        }
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn authenticated_users_get_the_authenticated_group_once() {
        let u = UserInfo { name: "alice".into(), groups: vec!["g".into()], ..Default::default() }.authenticated();
        assert_eq!(u.groups, ["g", AUTHENTICATED]);
        assert_eq!(u.clone().authenticated().groups, ["g", AUTHENTICATED]);
        assert_eq!(UserInfo::anonymous().authenticated().groups, [UNAUTHENTICATED]);
    }

    #[tokio::test]
    async fn no_credentials_is_anonymous_and_a_token_nobody_can_review_is_refused() {
        let a = Authenticator::new(
            &DelegatingAuthenticationOptions { skip_in_cluster_lookup: true, ..Default::default() },
            None,
        )
        .await
        .unwrap();
        assert_eq!(a.authenticate(&HeaderMap::new(), &[]).await, Ok(None));
        assert!(a.authenticate(&headers(&[("authorization", "Bearer x")]), &[]).await.is_err());
    }

    #[test]
    fn extra_keys_are_unescaped() {
        assert_eq!(percent_decode("scopes%2Fa", false), "scopes/a");
        assert_eq!(percent_decode("plain%zz", false), "plain%zz");
        assert_eq!(percent_decode("a+b%20c", true), "a b c");
    }
}
