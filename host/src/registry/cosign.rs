//! cosign key-pair signatures, as cosign stores them in a registry (the "simple signing" format of
//! cosign 2, and of cosign 3 with `--new-bundle-format=false`): beside manifest `sha256:<hex>`, a
//! manifest tagged `sha256-<hex>.sig` ([`signature_tag`]) whose layers ([`SIGNATURE_LAYER`]) are
//! payloads naming the signed manifest, each with its signature in the annotation
//! [`SIGNATURE_ANNOTATION`]: base64 of the DER ECDSA signature over the payload's exact bytes.
//! `cosign verify --key cosign.pub --insecure-ignore-tlog=true REF` checks what [`sign`] writes.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sigstore_verify::crypto::{KeyPair, VerificationKey};
use sigstore_verify::types::SignatureBytes;

use crate::digest::Sha256Digest;

/// A signature layer's media type.
pub const SIGNATURE_LAYER: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The most bytes a payload may take (cosign's are a few hundred).
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// The tag cosign stores the signatures of manifest `sha256:<hex>` under: `sha256-<hex>.sig`.
pub fn signature_tag(manifest_digest: &Sha256Digest) -> String {
    format!("{}.sig", manifest_digest.dashed())
}

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Why a signature layer does not sign this manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The payload is not cosign's simple signing JSON.
    #[error("a signature payload is not cosign's simple signing format: {0}")]
    Format(String),
    /// The payload signs another manifest: a signature replayed from elsewhere.
    #[error(
        "a signature signs manifest {signed}, not {expected} (a signature of another manifest)"
    )]
    OtherManifest {
        /// What it signs.
        signed: String,
        /// The manifest being installed.
        expected: Sha256Digest,
    },
}

/// The payload that signs `manifest_digest` of `repository` (`REGISTRY/REPO`).
pub fn payload(repository: &str, manifest_digest: &Sha256Digest) -> Vec<u8> {
    serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.to_owned(),
            },
            image: Image {
                docker_manifest_digest: manifest_digest.to_string(),
            },
            kind: SIGNATURE_TYPE.to_owned(),
        },
        optional: None,
    })
    .expect("a payload serializes")
}

/// Checks that `payload` is a cosign signature payload of `manifest_digest`.
pub fn check_payload(payload: &[u8], manifest_digest: &Sha256Digest) -> Result<(), PayloadError> {
    let parsed: Payload =
        serde_json::from_slice(payload).map_err(|e| PayloadError::Format(e.to_string()))?;
    if parsed.critical.kind != SIGNATURE_TYPE {
        return Err(PayloadError::Format(format!(
            "its type is `{}`",
            parsed.critical.kind
        )));
    }
    let signed = &parsed.critical.image.docker_manifest_digest;
    if signed.parse::<Sha256Digest>().ok() != Some(*manifest_digest) {
        return Err(PayloadError::OtherManifest {
            signed: signed.clone(),
            expected: *manifest_digest,
        });
    }
    Ok(())
}

/// Whether `signature` (the annotation's base64) is `key`'s signature over `payload`.
pub fn verifies(payload: &[u8], signature: &str, key: &VerificationKey) -> bool {
    base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .is_ok_and(|der| key.verify(payload, &SignatureBytes::from(der)).is_ok())
}

/// The annotation value signing `payload` with `key`.
pub fn sign(payload: &[u8], key: &KeyPair) -> Result<String, String> {
    let signature = key.sign(payload).map_err(|e| e.to_string())?;
    Ok(base64::engine::general_purpose::STANDARD.encode(signature.as_bytes()))
}

/// A signing key from a PEM file: an unencrypted PKCS#8 `PRIVATE KEY` (what `openssl genpkey` and
/// `openssl pkcs8 -topk8 -nocrypt` write, and what `cosign import-key-pair` reads).
pub fn private_key(pem: &str) -> Result<KeyPair, String> {
    let parsed = ::pem::parse(pem).map_err(|e| format!("not a PEM key: {e}"))?;
    match parsed.tag() {
        "PRIVATE KEY" => KeyPair::from_pkcs8_der(parsed.contents()).map_err(|e| e.to_string()),
        "ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY" => Err(
            "an encrypted cosign key: give an unencrypted PKCS#8 key (`-----BEGIN PRIVATE KEY-----`)"
                .into(),
        ),
        "EC PRIVATE KEY" => Err(
            "a SEC1 key: convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt -in KEY`".into(),
        ),
        other => Err(format!("a `{other}` PEM block is no private key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_signs_its_manifest_only_and_verifies_with_its_key_only() {
        let digest = Sha256Digest::from_hex(&"ab".repeat(32)).unwrap();
        let signed = payload("registry.test/acme/tool", &digest);
        assert_eq!(check_payload(&signed, &digest), Ok(()));
        let other = Sha256Digest::from_hex(&"cd".repeat(32)).unwrap();
        assert!(matches!(
            check_payload(&signed, &other),
            Err(PayloadError::OtherManifest { .. })
        ));
        assert!(check_payload(b"{}", &digest).is_err());
        let key = KeyPair::generate_ecdsa_p256().unwrap();
        let signature = sign(&signed, &key).unwrap();
        let public = VerificationKey::from_spki(&key.public_key_der().unwrap()).unwrap();
        assert!(verifies(&signed, &signature, &public));
        let stranger = KeyPair::generate_ecdsa_p256().unwrap();
        let stranger = VerificationKey::from_spki(&stranger.public_key_der().unwrap()).unwrap();
        assert!(!verifies(&signed, &signature, &stranger));
        let mut tampered = signed.clone();
        tampered[10] ^= 1;
        assert!(!verifies(&tampered, &signature, &public));
        assert!(!verifies(&signed, "not base64", &public));
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "ab".repeat(32))
        );
    }
}
