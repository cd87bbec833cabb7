//! Registry credentials from a docker `config.json`, the format of a Kubernetes `imagePullSecret`
//! (`kubernetes.io/dockerconfigjson`, `{"auths": {...}}`) and of the older `.dockercfg` (the map alone), looked up
//! by registry host as the kubelet's credential provider does (`pkg/credentialprovider/config.go`).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::SourceError;

/// One registry's entry.
#[derive(Debug, Default, Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    #[serde(rename = "registrytoken")]
    registry_token: Option<String>,
}

/// Either form of the file.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum File {
    Config { auths: BTreeMap<String, Entry> },
    Legacy(BTreeMap<String, Entry>),
}

/// The credentials `path` holds for `registry` (`host[:port]`), or anonymous access when it holds none.
pub(super) fn registry_auth(path: &Path, registry: &str) -> Result<RegistryAuth, SourceError> {
    let err = |detail: String| SourceError::Auth { path: path.display().to_string(), detail };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let auths = match serde_json::from_str::<File>(&text).map_err(|_| {
        err("not a docker config.json ({\"auths\": {REGISTRY: {\"auth\": BASE64}}}) or .dockercfg".into())
    })? {
        File::Config { auths } | File::Legacy(auths) => auths,
    };
    let Some((key, entry)) = auths.iter().find(|(k, _)| matches_registry(k, registry)) else {
        return Ok(RegistryAuth::Anonymous);
    };
    let field = |f: &str| format!("auths[{key:?}].{f}");
    if let Some(token) = &entry.registry_token {
        return Ok(RegistryAuth::Bearer(token.clone()));
    }
    if let Some(encoded) = &entry.auth {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| err(format!("{}: not base64: {e}", field("auth"))))?;
        let decoded = String::from_utf8(decoded).map_err(|_| err(format!("{}: not UTF-8", field("auth"))))?;
        let (user, password) =
            decoded.split_once(':').ok_or_else(|| err(format!("{}: not USERNAME:PASSWORD", field("auth"))))?;
        return Ok(RegistryAuth::Basic(user.to_string(), password.to_string()));
    }
    match (&entry.username, &entry.password) {
        (Some(u), Some(p)) => Ok(RegistryAuth::Basic(u.clone(), p.clone())),
        _ => Err(err(format!("{}: neither auth, username and password, nor registrytoken", field("auth")))),
    }
}

/// True when a config key names `registry`: keys may carry a scheme and a path (`https://index.docker.io/v1/`).
fn matches_registry(key: &str, registry: &str) -> bool {
    let host = key.split_once("://").map_or(key, |(_, rest)| rest);
    let host = host.split('/').next().unwrap_or(host);
    let docker_hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    host == registry || (docker_hub(host) && docker_hub(registry))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credentials `text` as a file, parsed for `registry` (the file removed again).
    fn auth_of(text: &str, registry: &str) -> Result<RegistryAuth, SourceError> {
        let name = &crate::wasm::engine::sha256_hex(text.as_bytes())[..12];
        let p = std::env::temp_dir().join(format!("kws-auth-{}-{name}.json", std::process::id()));
        std::fs::write(&p, text).unwrap();
        let auth = registry_auth(&p, registry);
        std::fs::remove_file(&p).unwrap();
        auth
    }

    #[test]
    fn credentials_are_found_by_registry_in_both_forms() {
        let basic = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let config = format!(r#"{{"auths": {{"https://r.example:5000/v1/": {{"auth": "{basic}"}}}}}}"#);
        assert_eq!(auth_of(&config, "r.example:5000").unwrap(), RegistryAuth::Basic("alice".into(), "s3cret".into()));
        assert_eq!(auth_of(&config, "other.example").unwrap(), RegistryAuth::Anonymous);
        let legacy = r#"{"index.docker.io": {"username": "bob", "password": "pw"}}"#;
        assert_eq!(auth_of(legacy, "docker.io").unwrap(), RegistryAuth::Basic("bob".into(), "pw".into()));
        for (text, want) in [
            ("[]", "not a docker config.json"),
            (r#"{"auths": {"r.io": {"auth": "***"}}}"#, "auths[\"r.io\"].auth: not base64"),
            (r#"{"auths": {"r.io": {"auth": "YWxpY2U="}}}"#, "not USERNAME:PASSWORD"),
            (r#"{"auths": {"r.io": {}}}"#, "neither auth"),
        ] {
            let e = auth_of(text, "r.io").unwrap_err().to_string();
            assert!(e.starts_with("auth.dockerConfig ") && e.contains(want), "{text}: {e}");
        }
        let e = registry_auth(Path::new("/nonexistent/config.json"), "r.io").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/config.json"), "{e}");
    }
}
