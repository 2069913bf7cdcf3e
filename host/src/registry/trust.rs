//! Whose signatures a tool from a registry must carry: the `[trust]` section of the policy file.
//!
//! ```toml
//! [trust.keys.acme]                     # a cosign key pair's public half (PEM, `PUBLIC KEY`)
//! file = "/etc/turngate/acme.pub"       # or: pem = "-----BEGIN PUBLIC KEY-----..."
//!
//! [trust.identities.acme-ci]            # a Sigstore keyless signer: the certificate's issuer and SAN
//! issuer = "https://token.actions.githubusercontent.com"
//! subject = "https://github.com/acme/tools/.github/workflows/release.yml@refs/tags/*"
//!
//! [[trust.rules]]                       # sources matching `source` accept only these signers
//! source = "ghcr.io/acme/*"             # a glob over REGISTRY/REPOSITORY (`*` does not cross `/`)
//! signers = ["acme", "acme-ci"]
//!
//! # trusted_root = "/etc/turngate/trusted_root.json"   # Sigstore's roots; default: the public-good
//! #                                                      # instance's, as sigstore-verify embeds it
//! ```
//!
//! A source that matches a rule accepts only that rule's signers (the first rule that matches); one
//! that matches none accepts any signer named here. A subject pattern is a glob in which `*` matches
//! anything but `/`, and `**` anything at all. Every `oci://` source needs a valid signature by an
//! accepted signer; installing an unsigned tool takes the command line's explicit flag.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use sigstore_verify::crypto::VerificationKey;
use sigstore_verify::trust_root::TrustedRoot;
use sigstore_verify::types::DerPublicKey;

use crate::digest::Sha256Digest;

/// The `[trust]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustFile {
    #[serde(default)]
    keys: BTreeMap<String, KeyFile>,
    #[serde(default)]
    identities: BTreeMap<String, IdentityFile>,
    #[serde(default)]
    rules: Vec<RuleFile>,
    trusted_root: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    file: Option<PathBuf>,
    pem: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    issuer: String,
    subject: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    source: String,
    signers: Vec<String>,
}

/// Why a `[trust]` table was refused.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// A key names neither or both of `file` and `pem`, or cannot be read or parsed.
    #[error("trust key `{name}`: {reason}")]
    Key {
        /// The key's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A pattern does not compile.
    #[error("trust: bad pattern `{pattern}`: {reason}")]
    Pattern {
        /// The pattern as written.
        pattern: String,
        /// What globset said.
        reason: String,
    },
    /// A rule names a signer that is neither a key nor an identity.
    #[error("trust rule for `{pattern}` names `{signer}`, which is no trusted key or identity")]
    UnknownSigner {
        /// The rule's source pattern.
        pattern: String,
        /// The name.
        signer: String,
    },
    /// A name is both a key's and an identity's.
    #[error("trust: `{0}` names both a key and an identity")]
    Ambiguous(String),
    /// The trusted root file cannot be read or parsed.
    #[error("trust: trusted root {path}: {reason}")]
    TrustedRoot {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// One signer the user trusts.
#[derive(Debug, Clone)]
pub enum Signer {
    /// A key: signatures made with its private half.
    Key {
        /// Its name in the policy.
        name: String,
        /// The public key.
        key: DerPublicKey,
        /// SHA-256 of the key's SubjectPublicKeyInfo DER: how the lock names it.
        fingerprint: Sha256Digest,
    },
    /// A Sigstore keyless identity: a certificate from the trusted CA for this issuer and subject.
    Identity {
        /// Its name in the policy.
        name: String,
        /// The OIDC issuer, exactly.
        issuer: String,
        /// The subject (the certificate's SAN) pattern as written.
        subject: String,
        /// The compiled subject pattern.
        matcher: GlobMatcher,
    },
}

impl Signer {
    /// The signer's name in the policy.
    pub fn name(&self) -> &str {
        match self {
            Signer::Key { name, .. } | Signer::Identity { name, .. } => name,
        }
    }

    /// A key's verification key (`None` for an identity, or a key of an algorithm this host cannot
    /// verify, refused when the policy is read).
    pub(crate) fn verification_key(&self) -> Option<VerificationKey> {
        match self {
            Signer::Key { key, .. } => VerificationKey::from_spki(key).ok(),
            Signer::Identity { .. } => None,
        }
    }
}

/// The compiled `[trust]` section.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    signers: Vec<Signer>,
    rules: Vec<Rule>,
    trusted_root: Option<PathBuf>,
    root: Arc<OnceLock<Result<Arc<TrustedRoot>, TrustError>>>,
}

/// A `[[trust.rules]]` entry, compiled.
#[derive(Debug, Clone)]
struct Rule {
    /// The sources it is for, compiled.
    source: GlobMatcher,
    /// The pattern as written.
    pattern: String,
    /// The signers it accepts, as indices into [`Trust::signers`].
    signers: Vec<usize>,
}

/// `*` within a path segment, `**` across them, matched against the whole text.
fn pattern(text: &str) -> Result<GlobMatcher, TrustError> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| TrustError::Pattern {
            pattern: text.to_owned(),
            reason: e.to_string(),
        })
}

impl Trust {
    /// Compiles a `[trust]` table: reads and parses every key (only `PUBLIC KEY` PEM of an algorithm
    /// this host verifies), compiles every pattern, checks every rule names known signers.
    pub(crate) fn compile(file: &TrustFile) -> Result<Trust, TrustError> {
        let mut signers = Vec::new();
        for (name, key) in &file.keys {
            let fail = |reason: String| TrustError::Key {
                name: name.clone(),
                reason,
            };
            let pem = match (&key.file, &key.pem) {
                (Some(path), None) => {
                    // The key file is the user's own, named in their policy.
                    #[allow(clippy::disallowed_methods)]
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| fail(format!("reading {}: {e}", path.display())))?;
                    text
                }
                (None, Some(pem)) => pem.clone(),
                _ => return Err(fail("needs exactly one of `file` and `pem`".into())),
            };
            let key = DerPublicKey::from_pem(&pem).map_err(|e| {
                fail(format!(
                    "{e} (a trusted key is the public half, `-----BEGIN PUBLIC KEY-----`)"
                ))
            })?;
            VerificationKey::from_spki(&key).map_err(|e| fail(e.to_string()))?;
            signers.push(Signer::Key {
                name: name.clone(),
                fingerprint: Sha256Digest::of(key.as_bytes()),
                key,
            });
        }
        for (name, identity) in &file.identities {
            if file.keys.contains_key(name) {
                return Err(TrustError::Ambiguous(name.clone()));
            }
            signers.push(Signer::Identity {
                name: name.clone(),
                issuer: identity.issuer.clone(),
                subject: identity.subject.clone(),
                matcher: pattern(&identity.subject)?,
            });
        }
        let mut rules = Vec::new();
        for rule in &file.rules {
            let signers_of_rule = rule
                .signers
                .iter()
                .map(|signer| {
                    signers
                        .iter()
                        .position(|s| s.name() == signer)
                        .ok_or_else(|| TrustError::UnknownSigner {
                            pattern: rule.source.clone(),
                            signer: signer.clone(),
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            rules.push(Rule {
                source: pattern(&rule.source)?,
                pattern: rule.source.clone(),
                signers: signers_of_rule,
            });
        }
        Ok(Trust {
            signers,
            rules,
            trusted_root: file.trusted_root.clone(),
            root: Arc::default(),
        })
    }

    /// Every trusted signer.
    pub fn signers_for_any(&self) -> impl Iterator<Item = &Signer> {
        self.signers.iter()
    }

    /// Whether any signer is trusted at all.
    pub fn is_empty(&self) -> bool {
        self.signers.is_empty()
    }

    /// The signers a tool from `source` (`REGISTRY/REPOSITORY`) may be signed by, and the rule that
    /// chose them (`None`: no rule matched, every trusted signer).
    pub fn signers_for(&self, source: &str) -> (Vec<&Signer>, Option<&str>) {
        match self.rules.iter().find(|rule| rule.source.is_match(source)) {
            Some(rule) => (
                rule.signers.iter().map(|&i| &self.signers[i]).collect(),
                Some(&rule.pattern),
            ),
            None => (self.signers.iter().collect(), None),
        }
    }

    /// The Sigstore trusted root: the policy's file, or the public-good instance's that
    /// sigstore-verify embeds. Read once.
    pub(crate) fn trusted_root(&self) -> Result<Arc<TrustedRoot>, TrustError> {
        self.root
            .get_or_init(|| {
                let parsed = match &self.trusted_root {
                    Some(path) => {
                        // The trusted root is the user's own file, named in their policy.
                        #[allow(clippy::disallowed_methods)]
                        let text = std::fs::read_to_string(path).map_err(|e| e.to_string());
                        text.and_then(|text| {
                            TrustedRoot::from_json(&text).map_err(|e| e.to_string())
                        })
                    }
                    None => TrustedRoot::from_json(
                        sigstore_verify::trust_root::SIGSTORE_PRODUCTION_TRUSTED_ROOT,
                    )
                    .map_err(|e| e.to_string()),
                };
                parsed
                    .map(Arc::new)
                    .map_err(|reason| TrustError::TrustedRoot {
                        path: self
                            .trusted_root
                            .clone()
                            .unwrap_or_else(|| PathBuf::from("(embedded public-good root)")),
                        reason,
                    })
            })
            .clone()
    }
}
