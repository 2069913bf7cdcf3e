//! What a tool installed from a registry keeps beside its component (`<file>.provenance.json`): the
//! manifest it was pulled by, exactly as received, and the signature that vouched for it, so that a
//! `--locked` load checks again that the component is that manifest's layer, that the manifest is the
//! one the lock records, and that the signature over it verifies for the signer the lock records.

use serde::{Deserialize, Serialize};

use super::artifact::ToolArtifact;
use super::trust::{Signer, Trust};
use super::{bundle, cosign};
use crate::digest::Sha256Digest;
use crate::lockfile::{PinnedTool, SignedBy};

/// The signature material kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum KeptSignature {
    /// A cosign key signature: the payload's exact text, the signature, and the public key it
    /// verified with.
    Cosign {
        /// The payload.
        payload: String,
        /// The annotation's base64 signature.
        signature: String,
        /// The signer's public key, PEM.
        key: String,
    },
    /// A Sigstore bundle, JSON.
    Bundle {
        /// The bundle.
        bundle: String,
    },
}

/// The provenance file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The manifest's exact text.
    pub manifest: String,
    /// The signature (`None` for a tool installed unsigned).
    pub signature: Option<KeptSignature>,
}

/// The provenance file of component `file`.
pub fn file_name(file: &str) -> String {
    format!("{file}.provenance.json")
}

impl Provenance {
    /// Checks that this provenance vouches for `entry` and the component with digest `sha256`: the
    /// manifest is the recorded one and its layer is the component, and the signature verifies over
    /// the manifest for the recorded signer. With `trust` (the policy's `[trust]`), the signer must
    /// also still be trusted there by name (a bundle must verify for that signer as the lock records
    /// it); without it, a key signature is held to the key the lock names by its digest, and a
    /// bundle's digest to the manifest.
    pub fn check(
        &self,
        entry: &PinnedTool,
        sha256: &str,
        trust: Option<&Trust>,
    ) -> Result<(), String> {
        let digest = Sha256Digest::of(self.manifest.as_bytes());
        if entry.manifest != Some(digest) {
            return Err(format!(
                "its kept manifest has digest {digest}, not the {} the lock records",
                entry
                    .manifest
                    .map_or_else(|| "(none)".to_owned(), |d| d.to_string())
            ));
        }
        let artifact =
            ToolArtifact::from_manifest(self.manifest.as_bytes()).map_err(|e| e.to_string())?;
        if artifact.layer_digest.hex() != sha256 {
            return Err(format!(
                "its manifest's component is {}, not this file ({sha256})",
                artifact.layer_digest
            ));
        }
        let trust = trust.filter(|t| !t.is_empty());
        match (&self.signature, &entry.signer, entry.unsigned) {
            (None, None, true) => Ok(()),
            (
                Some(KeptSignature::Cosign {
                    payload,
                    signature,
                    key,
                }),
                Some(signer @ SignedBy::Key { name, fingerprint }),
                false,
            ) => {
                cosign::check_payload(payload.as_bytes(), &digest).map_err(|e| e.to_string())?;
                let der = sigstore_verify::types::DerPublicKey::from_pem(key)
                    .map_err(|e| e.to_string())?;
                let kept = Sha256Digest::of(der.as_bytes());
                if kept != *fingerprint {
                    return Err(format!(
                        "its kept key ({}) is not the signer the lock records ({signer})",
                        kept.hex()
                    ));
                }
                if let Some(trust) = trust {
                    let trusted = trust.signers_for_any().any(|s| {
                        matches!(s, Signer::Key { fingerprint: f, name: n, .. } if f == fingerprint && n == name)
                    });
                    if !trusted {
                        return Err(format!(
                            "its signer ({signer}) is no longer a key the policy trusts"
                        ));
                    }
                }
                let verification = sigstore_verify::crypto::VerificationKey::from_spki(&der)
                    .map_err(|e| e.to_string())?;
                if cosign::verifies(payload.as_bytes(), signature, &verification) {
                    Ok(())
                } else {
                    Err("its kept signature does not verify".into())
                }
            }
            (Some(KeptSignature::Bundle { bundle: json }), Some(signer), false) => {
                let Some(trust) = trust else {
                    return Ok(());
                };
                let named: Vec<&Signer> = trust
                    .signers_for_any()
                    .filter(|s| s.name() == signer.name())
                    .collect();
                let verified =
                    bundle::verify(json, &digest, &named, trust).map_err(|e| e.to_string())?;
                if verified != *signer {
                    return Err(format!(
                        "its bundle verifies for {verified}, not the signer the lock records ({signer})"
                    ));
                }
                Ok(())
            }
            (_, signer, unsigned) => Err(format!(
                "its kept signature is not what the lock records (signer {}, unsigned {unsigned})",
                signer
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), |s| s.to_string()),
            )),
        }
    }
}
