//! The `extenders` of a configuration: upstream's `validateExtenders` (positive weights for prioritizers, at most
//! one binder, managed resources that are valid, distinct extended-resource names), plus what kube-scheduler only
//! finds when it builds the clients (a URL it cannot call, TLS files it cannot read), checked here so that they too
//! are one line naming the field before anything runs.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use super::{parse_go_duration, Extender, ProfileConfig};
use base64::Engine;

/// The timeout of a call when `httpTimeout` is unset or 0 (upstream `DefaultExtenderTimeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// An extender's TLS settings with the files and `*Data` fields read and decoded, kept from the configuration
/// until the client is built (so a missing file is a configuration error, not a failed call).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsMaterial {
    /// Do not verify the server's certificate.
    pub insecure: bool,
    /// The name to verify and send as SNI instead of the URL's host.
    pub server_name: String,
    /// CA bundle, PEM.
    pub ca: Option<Vec<u8>>,
    /// Client certificate chain, PEM.
    pub cert: Option<Vec<u8>>,
    /// Client key, PEM.
    pub key: Option<Vec<u8>>,
}

impl TlsMaterial {
    /// Reads the extender's TLS settings as client-go's `TLSConfigFor` does: `*Data` wins over the file, a CA and
    /// `insecure` exclude each other, a certificate needs its key; `enableHTTPS` without a CA means no
    /// verification. `None`: no TLS settings at all (an https URL then verifies against the system's roots).
    /// Errors carry the field below the extender and the message. Whether the PEM data makes a TLS client is the
    /// extender client's to say (`extender::check_tls`).
    pub fn read(ext: &Extender) -> Result<Option<TlsMaterial>, (String, String)> {
        let default = super::ExtenderTlsConfig::default();
        let t = ext.tls_config.as_ref().unwrap_or(&default);
        let pick = |data: &str, data_field: &str, file: &str, file_field: &str| -> Result<_, (String, String)> {
            if !data.is_empty() {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| (format!("tlsConfig.{data_field}"), format!("not valid base64: {e}")))?;
                return Ok(Some(bytes));
            }
            if file.is_empty() {
                return Ok(None);
            }
            std::fs::read(file).map(Some).map_err(|e| (format!("tlsConfig.{file_field}"), format!("{file}: {e}")))
        };
        let ca = pick(&t.ca_data, "caData", &t.ca_file, "caFile")?;
        let cert = pick(&t.cert_data, "certData", &t.cert_file, "certFile")?;
        let key = pick(&t.key_data, "keyData", &t.key_file, "keyFile")?;
        let insecure = t.insecure || (ext.enable_https && ca.is_none());
        if ext.tls_config.is_none() && !ext.enable_https {
            return Ok(None);
        }
        if t.insecure && ca.is_some() {
            return Err((
                "tlsConfig.insecure".into(),
                "specifying a root certificates file with the insecure flag is not allowed".into(),
            ));
        }
        match (&cert, &key) {
            (Some(_), None) => {
                return Err((
                    "tlsConfig.keyFile".into(),
                    "a client certificate needs its key (keyFile or keyData)".into(),
                ))
            }
            (None, Some(_)) => {
                return Err((
                    "tlsConfig.certFile".into(),
                    "a client key needs its certificate (certFile or certData)".into(),
                ))
            }
            _ => {}
        }
        Ok(Some(TlsMaterial { insecure, server_name: t.server_name.clone(), ca, cert, key }))
    }
}

/// One extender ready to build a client from: its settings, the timeout parsed and the TLS material read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderConfig {
    /// The settings as written.
    #[serde(flatten)]
    pub spec: Extender,
    /// `httpTimeout`, defaulted (written out as the file gave it, in `spec`).
    #[serde(skip)]
    pub timeout: Duration,
    /// The TLS material (never written out: it holds the client key).
    #[serde(skip)]
    pub tls: Option<TlsMaterial>,
    /// Its place in the file's `extenders` (errors found later name it there; the list is reordered).
    #[serde(skip)]
    pub index: usize,
}

/// Checks every extender; errors carry the field (from `extenders`) and the message. Ignorable extenders go
/// last, as upstream's `buildExtenders` orders them.
pub fn check(extenders: Vec<Extender>) -> Result<Vec<ExtenderConfig>, (String, String)> {
    let mut out = Vec::with_capacity(extenders.len());
    let mut binders = 0;
    let mut managed = HashSet::new();
    for (i, e) in extenders.into_iter().enumerate() {
        let at = |f: &str| format!("extenders[{i}].{f}");
        if !e.prioritize_verb.is_empty() && e.weight <= 0 {
            return Err((
                at("weight"),
                format!("Invalid value: {}: must have a positive weight applied to it", e.weight),
            ));
        }
        if !e.bind_verb.is_empty() {
            binders += 1;
        }
        for (j, r) in e.managed_resources.iter().enumerate() {
            let f = at(&format!("managedResources[{j}].name"));
            if let Some(m) = super::names::qualified_name(&r.name) {
                return Err((f, format!("Invalid value: {:?}: {m}", r.name)));
            }
            if !super::names::is_extended_resource_name(&r.name) {
                return Err((f, format!("Invalid value: {:?}: is an invalid extended resource name", r.name)));
            }
            if !managed.insert(r.name.clone()) {
                return Err((f, format!("Invalid value: {:?}: duplicate extender managed resource name", r.name)));
            }
        }
        check_url(&e.url_prefix).map_err(|m| (at("urlPrefix"), m))?;
        let timeout = match e.http_timeout.as_deref() {
            None => DEFAULT_TIMEOUT,
            Some(t) => match parse_go_duration(t).map_err(|m| (at("httpTimeout"), m))? {
                d if d.is_zero() => DEFAULT_TIMEOUT,
                d => d,
            },
        };
        let tls = TlsMaterial::read(&e).map_err(|(f, m)| (at(&f), m))?;
        out.push(ExtenderConfig { spec: e, timeout, tls, index: i });
    }
    if binders > 1 {
        return Err((
            "extenders".into(),
            format!(
                "Invalid value: \"found {binders} extenders implementing bind\": only one extender can implement bind"
            ),
        ));
    }
    out.sort_by_key(|e| e.spec.ignorable);
    Ok(out)
}

/// The URL prefix must be an absolute http or https URL: the verbs are appended to it.
fn check_url(prefix: &str) -> Result<(), String> {
    let uri: hyper::Uri = prefix.parse().map_err(|e| format!("{prefix:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        _ => Err(format!("{prefix:?} must be an http:// or https:// URL with a host")),
    }
}

/// The plugin whose `ignoredResources` the extenders' ignored resources replace.
const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";

/// Resources the extenders manage with `ignoredByScheduler`: NodeResourcesFit's `ignoredResources` in every
/// profile become exactly these, as upstream's `buildExtenders` overwrites them.
pub fn apply_ignored_resources(extenders: &[ExtenderConfig], profiles: &mut [ProfileConfig]) {
    let ignored: Vec<serde_json::Value> = extenders
        .iter()
        .flat_map(|e| &e.spec.managed_resources)
        .filter(|r| r.ignored_by_scheduler)
        .map(|r| serde_json::Value::String(r.name.clone()))
        .collect();
    if ignored.is_empty() {
        return;
    }
    for p in profiles {
        let args = p.plugin_args.entry(NODE_RESOURCES_FIT.to_string()).or_insert_with(|| serde_json::json!({}));
        if !args.is_object() {
            *args = serde_json::json!({});
        }
        args["ignoredResources"] = serde_json::Value::Array(ignored.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(url: &str, ignorable: bool) -> Extender {
        Extender { url_prefix: url.into(), ignorable, ..Default::default() }
    }

    #[test]
    fn ignorable_extenders_are_called_last_in_their_order() {
        let got = check(vec![ext("http://a", true), ext("http://b", false), ext("http://c", true)]).unwrap();
        let order: Vec<&str> = got.iter().map(|e| e.spec.url_prefix.as_str()).collect();
        assert_eq!(order, ["http://b", "http://a", "http://c"]);
        assert_eq!(got[0].timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn resources_ignored_by_the_scheduler_replace_node_resources_fits_ignored_resources() {
        let mut e = ext("http://a", false);
        e.managed_resources = vec![
            crate::config::ExtenderManagedResource { name: "example.com/gpu".into(), ignored_by_scheduler: true },
            crate::config::ExtenderManagedResource { name: "example.com/fpga".into(), ignored_by_scheduler: false },
        ];
        let exts = check(vec![e]).unwrap();
        let mut profiles = crate::config::SchedulerConfig::default_config().profiles;
        profiles[0]
            .plugin_args
            .insert("NodeResourcesFit".into(), serde_json::json!({"ignoredResources": ["example.com/old"]}));
        apply_ignored_resources(&exts, &mut profiles);
        assert_eq!(
            profiles[0].plugin_args["NodeResourcesFit"]["ignoredResources"],
            serde_json::json!(["example.com/gpu"])
        );
    }

    #[test]
    fn the_client_key_is_never_written_out() {
        let mut e = ext("https://a", false);
        e.tls_config = Some(crate::config::ExtenderTlsConfig { key_data: "c2VjcmV0".into(), ..Default::default() });
        let v = serde_json::to_value(&e).unwrap();
        assert!(v["tlsConfig"].get("keyData").is_none(), "{v}");
        assert_eq!(v["urlPrefix"], "https://a");
    }
}
