//! OCI digests as they are read back from a registry or the plugin cache: only `sha256:` and 64 lowercase hex digits
//! are one, so nothing read back can name a path outside the cache or a URL outside the repository.

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
}
