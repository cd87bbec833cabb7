//! Delegated authorization as upstream's `DelegatingAuthorizationOptions.toAuthorizer` builds it: privileged groups
//! (system:masters), then always-allowed paths (`plugin/pkg/authorizer/path`), then a SubjectAccessReview for the
//! non-resource path and verb (`authorizerfactory.DelegatingAuthorizerConfig`), with allowed and denied answers
//! cached for their TTLs.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};

use super::ttl_cache::TtlCache;
use super::{DelegatingAuthorizationOptions, UserInfo};

/// How long one SubjectAccessReview may take (upstream `ClientTimeout`).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// An authorization answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The request may proceed.
    Allow,
    /// Forbidden, with the reviewer's reason (may be empty).
    Deny(String),
}

/// Authorizes requests; built once from the flags.
pub struct Authorizer {
    opts: DelegatingAuthorizationOptions,
    client: Option<kube::Client>,
    cache: TtlCache<Decision>,
}

impl Authorizer {
    /// Reviews go through `client`; without one only the privileged groups and always-allowed paths pass.
    pub fn new(opts: &DelegatingAuthorizationOptions, client: Option<kube::Client>) -> Authorizer {
        Authorizer { opts: opts.clone(), client, cache: TtlCache::new() }
    }

    /// May `user` use `verb` (the HTTP method, lower-cased) on the non-resource `path`? `Err` when the review
    /// could not be made (upstream answers 500).
    pub async fn authorize(&self, user: &UserInfo, path: &str, verb: &str) -> Result<Decision, String> {
        if user.groups.iter().any(|g| self.opts.always_allow_groups.contains(g)) {
            return Ok(Decision::Allow);
        }
        if self.opts.always_allow_paths.iter().any(|p| path_matches(p, path)) {
            return Ok(Decision::Allow);
        }
        let Some(client) = &self.client else { return Ok(Decision::Deny(String::new())) };
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "uid": user.uid,
                "groups": user.groups,
                "extra": user.extra,
                "nonResourceAttributes": {"path": path, "verb": verb},
            },
        });
        let key = review["spec"].to_string();
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let review: SubjectAccessReview = serde_json::from_value(review).expect("a SubjectAccessReview");
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        let answer = tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
            .await
            .map_err(|_| "SubjectAccessReview timed out".to_string())?
            .map_err(|e| format!("SubjectAccessReview: {e}"))?;
        let status = answer.status.unwrap_or_default();
        let (decision, ttl) = if status.allowed {
            (Decision::Allow, self.opts.allow_cache_ttl)
        } else {
            (Decision::Deny(status.reason.unwrap_or_default()), self.opts.deny_cache_ttl)
        };
        self.cache.insert(key, decision.clone(), ttl);
        Ok(decision)
    }
}

/// Upstream's path authorizer: an exact path, or a prefix when the pattern ends with `*`.
fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_exactly_or_by_star_prefix() {
        assert!(path_matches("/healthz", "/healthz"));
        assert!(!path_matches("/healthz", "/healthz/ping"));
        assert!(path_matches("/healthz*", "/healthz/ping"));
        assert!(!path_matches("/readyz", "/metrics"));
    }

    #[tokio::test]
    async fn without_a_reviewer_only_masters_and_allowed_paths_pass() {
        let a = Authorizer::new(&DelegatingAuthorizationOptions::default(), None);
        let anon = UserInfo::anonymous();
        assert_eq!(a.authorize(&anon, "/healthz", "get").await, Ok(Decision::Allow));
        assert_eq!(a.authorize(&anon, "/metrics", "get").await, Ok(Decision::Deny(String::new())));
        let admin = UserInfo { name: "admin".into(), groups: vec!["system:masters".into()], ..Default::default() };
        assert_eq!(a.authorize(&admin, "/metrics", "get").await, Ok(Decision::Allow));
    }
}
