//! Kubernetes' name rules (apimachinery's validation: qualified names, RFC 1123 subdomains, extended resource
//! names), the problem described in upstream's words. At the floor: configuration checks names too, and the
//! plugins and the simulator's cluster-file checks build on these.

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// An RFC 1123 label's characters: lowercase alphanumerics and '-', alphanumeric at both ends (no length check).
pub(crate) fn dns_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || *c == b'-')
}

/// Upstream `IsDNS1123Subdomain`: the problem, if any.
pub fn dns1123_subdomain(s: &str) -> Option<String> {
    if s.len() > 253 {
        Some("must be no more than 253 characters".into())
    } else if !s.split('.').all(dns_label_chars) {
        Some(DNS1123_SUBDOMAIN_MSG.into())
    } else {
        None
    }
}

/// A label name's or value's characters: alphanumerics, '-', '_' and '.', alphanumeric at both ends.
pub(crate) fn label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Upstream `IsQualifiedName` (label keys, taint and toleration keys, topology keys): the problem, if any.
pub fn qualified_name(s: &str) -> Option<String> {
    let (prefix, name) = match s.split('/').collect::<Vec<_>>()[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => return Some(("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')").into()),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(m) = dns1123_subdomain(p) {
            return Some(format!("prefix part {m}"));
        }
    }
    if name.is_empty() {
        Some("name part must be non-empty".into())
    } else if name.len() > 63 {
        Some("name part must be no more than 63 characters".into())
    } else if !label_chars(name) {
        Some(QUALIFIED_NAME_MSG.into())
    } else {
        None
    }
}

/// Checks a qualified name (`[prefix/]name`, as label keys and resource names); returns the detail of the error.
pub(crate) fn qualified_name_error(s: &str) -> Option<&'static str> {
    let name_ok = |n: &str| {
        let b = n.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    };
    let prefix_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                let b = l.as_bytes();
                !b.is_empty()
                    && b.len() <= 63
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            })
    };
    match s.split_once('/') {
        Some((p, n)) => {
            if !prefix_ok(p) {
                Some("prefix part must be a lowercase RFC 1123 subdomain")
            } else if !name_ok(n) {
                Some("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)")
            } else {
                None
            }
        }
        None if name_ok(s) => None,
        None => Some("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"),
    }
}

/// Upstream's `IsExtendedResourceName`: a domain-qualified name outside `kubernetes.io/` (and not a quota name).
pub(crate) fn is_extended_resource_name(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && qualified_name_error(&format!("requests.{name}")).is_none()
}
