//! The node-resources plugins, as upstream's `noderesources` package: NodeResourcesFit (`fit`, upstream's
//! `fit.go`) and NodeResourcesBalancedAllocation (`balanced_allocation`), which both score through one
//! resource-allocation scorer (`resource_allocation`). Here too the resource-name classes both use, as upstream's
//! `v1helper`.

pub mod balanced_allocation;
pub mod fit;
pub mod resource_allocation;

/// Checks a qualified name (`[prefix/]name`, as label keys and resource names); returns the detail of the error.
fn qualified_name_error(s: &str) -> Option<&'static str> {
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

/// Upstream's `IsScalarResourceName`: extended, hugepages, prefixed native or attachable-volume resources.
fn is_scalar_resource_name(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || (name.contains('/') && name.contains("kubernetes.io/"))
        || is_extended_resource_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_name_classes() {
        assert!(is_extended_resource_name("example.com/aaa"));
        assert!(!is_extended_resource_name("kubernetes.io/something"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("subdomain.kubernetes.io/something"));
        assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
        assert!(!is_scalar_resource_name("pods"));
    }
}
