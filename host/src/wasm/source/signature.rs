//! Keyed cosign signatures of OCI components (`signature: {key: cosign.pub}` in a plugin's args), checked offline
//! as `cosign verify --key cosign.pub --insecure-ignore-tlog` does for the signature scheme of cosign's
//! `specs/SIGNATURE_SPEC.md`: the signature image is the tag `sha256-<manifest hex>.sig` in the same repository,
//! each layer a simple-signing payload (`application/vnd.dev.cosign.simplesigning.v1+json`) whose
//! `dev.cosignproject.cosign/signature` annotation is the base64 ECDSA P-256 SHA-256 signature of the payload, and
//! the payload names the signed manifest's digest. One valid layer suffices.
//!
//! What is verified: that the holder of the key signed this manifest digest (and so, through the manifest, the
//! component's bytes). What is not: a transparency log entry (Rekor), keyless (Fulcio) certificates, annotations
//! in the payload's `optional` part, and cosign v3's bundle format (sign with `--new-bundle-format=false`).

use std::path::Path;

use base64::Engine as _;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::Deserialize;
use x509_parser::prelude::FromDer as _;

use super::registry::Registry;
use super::SourceError;
use crate::wasm::engine::sha256_hex;

/// The layer media type of a cosign signature.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const SIGNATURE_TYPE: &str = "cosign container image signature";
/// A payload is a few hundred bytes; a larger layer is not read.
const MAX_PAYLOAD_BYTES: i64 = 64 << 10;
/// OID of the P-256 curve (prime256v1), the curve of `cosign generate-key-pair`.
const P256: &str = "1.2.840.10045.3.1.7";

/// A cosign public key (ECDSA P-256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignKey {
    /// The uncompressed point.
    point: Vec<u8>,
    /// SHA-256 of the key's DER, hex: what the plugin cache records a version as verified with.
    pub id: String,
}

impl CosignKey {
    /// Reads a PEM `PUBLIC KEY` (as `cosign generate-key-pair` writes `cosign.pub`). Errors name no field.
    pub fn load(path: &Path) -> Result<CosignKey, String> {
        use rustls::pki_types::pem::PemObject as _;
        let der = rustls::pki_types::SubjectPublicKeyInfoDer::from_pem_file(path)
            .map_err(|e| format!("{}: not a PEM public key: {e}", path.display()))?;
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(der.as_ref())
            .map_err(|e| format!("{}: not a public key: {e}", path.display()))?;
        let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| o.to_id_string());
        if curve.as_deref() != Some(P256) {
            return Err(format!("{}: not an ECDSA P-256 key (cosign's); other keys are not supported", path.display()));
        }
        Ok(CosignKey { point: spki.subject_public_key.data.to_vec(), id: sha256_hex(der.as_ref()) })
    }

    /// True when `signature` (ASN.1 DER) signs `payload`.
    fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, signature)
            .is_ok()
    }
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The tag of the signature of `manifest_digest` (`sha256:HEX` → `sha256-HEX.sig`).
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replace(':', "-"))
}

/// Checks that one of `keys` signed the manifest `manifest_digest` of the registry's repository (the signature image
/// is in the same repository; its reads are bounded as the component's are), and returns that key's id.
pub(super) async fn verify(
    registry: &Registry,
    shown: &str,
    manifest_digest: &str,
    keys: &[CosignKey],
) -> Result<String, SourceError> {
    let refused = |detail: String| SourceError::Signature { reference: shown.to_string(), detail };
    let tag = signature_tag(manifest_digest);
    let (bytes, _) = registry
        .manifest(&tag)
        .await
        .map_err(|e| refused(format!("no cosign signature of {manifest_digest} ({tag}): {}", e.detail())))?;
    let manifest: OciImageManifest = serde_json::from_slice(&bytes)
        .map_err(|e| refused(format!("the signature image {tag} is not an image manifest: {e}")))?;
    let mut why = format!("the signature image {tag} has no {SIMPLE_SIGNING_MEDIA_TYPE} layer");
    for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE) {
        match check_layer(registry, layer, manifest_digest, keys).await {
            Ok(id) => return Ok(id),
            Err(e) => why = e,
        }
    }
    Err(refused(why))
}

/// Checks one signature layer against each key; the id of the key it verifies with.
async fn check_layer(
    registry: &Registry,
    layer: &OciDescriptor,
    manifest_digest: &str,
    keys: &[CosignKey],
) -> Result<String, String> {
    let encoded = layer
        .annotations
        .as_ref()
        .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        .ok_or_else(|| format!("a signature layer has no {SIGNATURE_ANNOTATION} annotation"))?;
    let signature =
        base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| format!("signature not base64: {e}"))?;
    if layer.size < 0 || layer.size > MAX_PAYLOAD_BYTES {
        return Err(format!(
            "a signature payload of {} bytes is over the {MAX_PAYLOAD_BYTES}-byte maximum",
            layer.size
        ));
    }
    let payload = registry.blob(&layer.digest, layer.size as u64).await.map_err(|e| e.detail())?;
    let Some(key) = keys.iter().find(|k| k.verifies(&payload, &signature)) else {
        return Err(match keys {
            [_] => format!("the signature of {manifest_digest} does not verify with the key"),
            _ => format!("the signature of {manifest_digest} verifies with none of the {} keys", keys.len()),
        });
    };
    let p: Payload = serde_json::from_slice(&payload).map_err(|e| format!("signed payload: {e}"))?;
    if p.critical.type_ != SIGNATURE_TYPE {
        return Err(format!("signed payload's type is {:?}, not {SIGNATURE_TYPE:?}", p.critical.type_));
    }
    if p.critical.image.docker_manifest_digest != manifest_digest {
        return Err(format!(
            "the signed payload names {}, not {manifest_digest}",
            p.critical.image.docker_manifest_digest
        ));
    }
    Ok(key.id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_load_from_pem_and_signatures_verify() {
        let rng = ring::rand::SystemRandom::new();
        let alg = &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING;
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        use ring::signature::KeyPair as _;
        let dir = std::env::temp_dir().join(format!("kws-cosign-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pem = dir.join("cosign.pub");
        std::fs::write(&pem, public_key_pem(pair.public_key().as_ref())).unwrap();
        let key = CosignKey::load(&pem).unwrap();
        let sig = pair.sign(&rng, b"payload").unwrap();
        assert!(key.verifies(b"payload", sig.as_ref()));
        assert!(!key.verifies(b"other payload", sig.as_ref()));

        std::fs::write(&pem, "not a key").unwrap();
        assert!(CosignKey::load(&pem).unwrap_err().contains("not a PEM public key"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(signature_tag(&format!("sha256:{}", "a".repeat(64))), format!("sha256-{}.sig", "a".repeat(64)));
    }

    /// The PEM SubjectPublicKeyInfo of an uncompressed P-256 point.
    pub(crate) fn public_key_pem(point: &[u8]) -> String {
        let mut der = hex_bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200");
        der.extend_from_slice(point);
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n")
    }

    fn hex_bytes(h: &str) -> Vec<u8> {
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    }
}
