//! Sigstore bundles (v0.1 to v0.3: a Fulcio certificate or a public-key hint, Rekor transparency-log
//! entries with their inclusion proofs and signed timestamps), verified offline with sigstore-verify
//! against the trusted root and the policy's signers.
//!
//! A bundle is found as an OCI 1.1 referrer of the manifest (cosign 3 attaches its signatures so), or in
//! the referrers tag fallback (`sha256-<hex>`): a manifest whose one layer has a media type starting
//! [`BUNDLE_LAYER_PREFIX`]. What it must sign is the manifest's digest: a message signature over it, or
//! a DSSE in-toto statement naming it as subject whose predicate is cosign's signature
//! ([`COSIGN_PREDICATE`]) rather than some other attestation.
//!
//! Why sigstore-verify rather than sigstore (sigstore-rs): it verifies the inclusion proof, the
//! checkpoint and the signed entry timestamp (sigstore-rs 0.15 leaves both as TODO), handles Rekor v2
//! and timestamp authorities, passes the sigstore-conformance suite in its CI, and pulls in no HTTP
//! client: bytes, a trusted root and a policy in, a verdict out.

use sigstore_verify::types::{Bundle, Sha256Hash, SignatureContent};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

use super::trust::{Signer, Trust};
use crate::digest::Sha256Digest;
use crate::lockfile::SignedBy;

/// What a bundle layer's media type starts with.
pub const BUNDLE_LAYER_PREFIX: &str = "application/vnd.dev.sigstore.bundle";
/// The in-toto predicate of a cosign signature (cosign 3's `cosign sign`).
pub const COSIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
/// The most bytes a bundle may take (a bundle with a certificate chain and a proof is a few KiB).
pub const MAX_BUNDLE_BYTES: u64 = 1 << 20;

/// Why a bundle does not vouch for the manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// Not a bundle this verifier reads.
    #[error("the Sigstore bundle does not parse: {0}")]
    Format(String),
    /// A DSSE statement that is another attestation, not a signature.
    #[error("the Sigstore bundle is an attestation of `{0}`, not a cosign signature")]
    Predicate(String),
    /// No accepted signer's verification passed; each one's reason.
    #[error("the Sigstore bundle verifies for no accepted signer: {}", .0.join("; "))]
    Unverified(Vec<String>),
    /// The trusted root is unusable.
    #[error("{0}")]
    Root(String),
}

/// Verifies `json` as a bundle over manifest `digest` for one of `signers`; answers the signer that
/// verified, as the lock records it.
pub fn verify(
    json: &str,
    digest: &Sha256Digest,
    signers: &[&Signer],
    trust: &Trust,
) -> Result<SignedBy, BundleError> {
    let bundle = Bundle::from_json(json).map_err(|e| BundleError::Format(e.to_string()))?;
    if let SignatureContent::DsseEnvelope(envelope) = &bundle.content {
        let statement: serde_json::Value = serde_json::from_slice(envelope.payload.as_bytes())
            .map_err(|e| BundleError::Format(format!("its DSSE statement: {e}")))?;
        let predicate = statement["predicateType"].as_str().unwrap_or_default();
        if predicate != COSIGN_PREDICATE {
            return Err(BundleError::Predicate(predicate.to_owned()));
        }
    }
    let digest =
        Sha256Hash::from_hex(&digest.hex()).map_err(|e| BundleError::Format(e.to_string()))?;
    let root = trust
        .trusted_root()
        .map_err(|e| BundleError::Root(e.to_string()))?;
    let verifier = Verifier::new(&root).map_err(|e| BundleError::Root(e.to_string()))?;
    let mut reasons = Vec::new();
    for signer in signers {
        let verdict = match signer {
            Signer::Identity {
                name,
                issuer,
                subject,
                matcher,
            } => {
                let policy = VerificationPolicy::any_identity().require_issuer(issuer.clone());
                match verifier.verify(digest, &bundle, &policy) {
                    Ok(result) => match result.identity() {
                        Some(identity) if matcher.is_match(identity.as_str()) => {
                            Ok(SignedBy::Sigstore {
                                name: name.clone(),
                                issuer: issuer.clone(),
                                identity: identity.as_str().to_owned(),
                            })
                        }
                        identity => Err(format!(
                            "{name}: signed by {}, which does not match `{subject}`",
                            identity.map_or("no identity", |i| i.as_str())
                        )),
                    },
                    Err(e) => Err(format!("{name}: {e}")),
                }
            }
            Signer::Key {
                name,
                key,
                fingerprint,
            } => {
                let policy = PublicKeyVerificationPolicy::new(key.clone());
                match verifier.verify(digest, &bundle, &policy) {
                    Ok(_) => Ok(SignedBy::Key {
                        name: name.clone(),
                        fingerprint: *fingerprint,
                    }),
                    Err(e) => Err(format!("{name}: {e}")),
                }
            }
        };
        match verdict {
            Ok(signed) => return Ok(signed),
            Err(reason) => reasons.push(reason),
        }
    }
    if reasons.is_empty() {
        reasons.push("no signer is trusted for this source".into());
    }
    Err(BundleError::Unverified(reasons))
}
