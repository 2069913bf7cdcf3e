//! Pinned tools: `turngate.lock` names every component of a tools directory with the SHA-256 of its
//! bytes, so a component swapped in later is refused at load instead of run.
//!
//! `turngate tools lock --tools DIR` writes it, and `turngate tools add` adds to it; `--locked` (on
//! `run`, `call`, `agent` and `mcp`) makes a component that is not in the lock, or whose digest
//! differs, a load error naming the file and both digests. The check comes before the component is
//! described: a pinned directory runs no code that was not pinned. A tool installed from a registry
//! also records where it came from, the digest of the manifest it was pulled by, who signed it (or
//! that nobody did) and the grants the user accepted; `--locked` checks its stored manifest and
//! signature again (`toolbox.rs`). The format (TOML; version 1 has no registry fields):
//!
//! ```toml
//! version = 2
//!
//! [[tool]]
//! file = "text_stats.wasm"
//! name = "text_stats"
//! sha256 = "9f2c..."
//!
//! [[tool]]
//! file = "sha256-4be1....wasm"
//! name = "weather"
//! sha256 = "4be1..."
//! source = "oci://ghcr.io/acme/weather:1.2.0"
//! manifest = "sha256:77aa..."
//! signer = "key acme (SHA-256 of its key: 5d0c...)"
//! grants = '{"network": {"get": ["https://api.weather.example/**"]}}'
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;

/// The lock file's name in a tools directory.
pub const LOCK_FILE: &str = "turngate.lock";

/// The format version written; version 1 (no registry fields) is read too.
const VERSION: u32 = 2;

/// One pinned component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedTool {
    /// The component's file name in the directory.
    pub file: String,
    /// The tool name it describes itself with (for people reading the lock).
    pub name: String,
    /// SHA-256 of the component's bytes, hex.
    pub sha256: String,
    /// Where a tool installed from a registry came from: `oci://REGISTRY/REPO:TAG` (or `@sha256:...`),
    /// or the OCI image layout directory it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The digest of the manifest it was pulled by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Sha256Digest>,
    /// Who signed it, as the install verified; `None` for a tool installed unsigned
    /// (`unsigned = true`) or not from a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<SignedBy>,
    /// Installed without a signature, by the user's explicit choice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsigned: bool,
    /// The grants the user accepted, as JSON text (`None`: none accepted; the tool's calls are
    /// denied until a policy grants them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<String>,
}

impl PinnedTool {
    /// A component pinned by file, name and digest, with no registry fields.
    pub fn local(file: String, name: String, sha256: String) -> PinnedTool {
        PinnedTool {
            file,
            name,
            sha256,
            source: None,
            manifest: None,
            signer: None,
            unsigned: false,
            grants: None,
        }
    }

    /// Whether it came from a registry (or a layout directory): then its manifest and signature are
    /// kept beside it and checked again by `--locked`.
    pub fn from_registry(&self) -> bool {
        self.source.is_some()
    }
}

/// Who signed a tool from a registry, as the install verified it. The lock writes it as text a person
/// reads (`key NAME (SHA-256 of its key: HEX)`, `sigstore NAME (ISSUER, IDENTITY)`), and reads that
/// text back into this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedBy {
    /// A key the policy trusts.
    Key {
        /// Its name in the policy.
        name: String,
        /// The SHA-256 of its SubjectPublicKeyInfo DER.
        fingerprint: Sha256Digest,
    },
    /// A Sigstore keyless identity the policy trusts.
    Sigstore {
        /// Its name in the policy.
        name: String,
        /// The certificate's OIDC issuer.
        issuer: String,
        /// The certificate's subject (its SAN).
        identity: String,
    },
}

/// How the lock writes a key's fingerprint, after its name.
const KEY_FINGERPRINT: &str = " (SHA-256 of its key: ";

impl SignedBy {
    /// The signer's name in the policy.
    pub fn name(&self) -> &str {
        match self {
            SignedBy::Key { name, .. } | SignedBy::Sigstore { name, .. } => name,
        }
    }
}

impl fmt::Display for SignedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignedBy::Key { name, fingerprint } => {
                write!(f, "key {name}{KEY_FINGERPRINT}{})", fingerprint.hex())
            }
            SignedBy::Sigstore {
                name,
                issuer,
                identity,
            } => write!(f, "sigstore {name} ({issuer}, {identity})"),
        }
    }
}

/// Text that is no signer as the lock writes one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is no signer (`key NAME (SHA-256 of its key: HEX)` or `sigstore NAME (ISSUER, IDENTITY)`)"
)]
pub struct SignedByError(String);

impl FromStr for SignedBy {
    type Err = SignedByError;

    fn from_str(text: &str) -> Result<SignedBy, SignedByError> {
        let fail = || SignedByError(text.to_owned());
        let inner = text.strip_suffix(')').ok_or_else(fail)?;
        if let Some(key) = inner.strip_prefix("key ") {
            let (name, hex) = key.rsplit_once(KEY_FINGERPRINT).ok_or_else(fail)?;
            let fingerprint = Sha256Digest::from_hex(hex).map_err(|_| fail())?;
            return Ok(SignedBy::Key {
                name: name.to_owned(),
                fingerprint,
            });
        }
        let sigstore = inner.strip_prefix("sigstore ").ok_or_else(fail)?;
        let (name, certificate) = sigstore.split_once(" (").ok_or_else(fail)?;
        let (issuer, identity) = certificate.split_once(", ").ok_or_else(fail)?;
        Ok(SignedBy::Sigstore {
            name: name.to_owned(),
            issuer: issuer.to_owned(),
            identity: identity.to_owned(),
        })
    }
}

impl Serialize for SignedBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SignedBy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockText {
    version: u32,
    #[serde(default)]
    tool: Vec<PinnedTool>,
}

/// A parsed `turngate.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLock {
    by_file: BTreeMap<String, PinnedTool>,
}

/// Why a lock file was refused, or a component was refused by it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock file does not parse.
    #[error("not a valid {LOCK_FILE}: {0}")]
    Invalid(String),
    /// The component is not in the lock.
    #[error(
        "{file} is not pinned in {LOCK_FILE} (its SHA-256 is {actual}); run `turngate tools lock` to pin it"
    )]
    Unpinned {
        /// The component's file name.
        file: String,
        /// Its digest.
        actual: String,
    },
    /// The component's digest differs from the pinned one.
    #[error("{file} does not match {LOCK_FILE}: pinned SHA-256 {pinned}, found {actual}")]
    Mismatch {
        /// The component's file name.
        file: String,
        /// The pinned digest.
        pinned: String,
        /// Its digest now.
        actual: String,
    },
}

impl ToolLock {
    /// A lock pinning `tools`.
    pub fn new(tools: impl IntoIterator<Item = PinnedTool>) -> ToolLock {
        ToolLock {
            by_file: tools.into_iter().map(|t| (t.file.clone(), t)).collect(),
        }
    }

    /// Parses a lock file's text.
    pub fn parse(text: &str) -> Result<ToolLock, LockError> {
        let parsed: LockText =
            toml::from_str(text).map_err(|e| LockError::Invalid(e.to_string()))?;
        if !(1..=VERSION).contains(&parsed.version) {
            return Err(LockError::Invalid(format!(
                "version {} (this turngate reads versions 1 to {VERSION})",
                parsed.version
            )));
        }
        if parsed.version == 1 && parsed.tool.iter().any(PinnedTool::from_registry) {
            return Err(LockError::Invalid(
                "version 1 has no registry fields".into(),
            ));
        }
        Ok(ToolLock::new(parsed.tool))
    }

    /// The entry of the component `file`, if pinned.
    pub fn get(&self, file: &str) -> Option<&PinnedTool> {
        self.by_file.get(file)
    }

    /// The entry of the tool named `name`, if pinned.
    pub fn by_name(&self, name: &str) -> Option<&PinnedTool> {
        self.by_file.values().find(|t| t.name == name)
    }

    /// Pins `tool` (replacing any entry of the same file or the same name).
    pub fn insert(&mut self, tool: PinnedTool) {
        self.by_file.retain(|_, t| t.name != tool.name);
        self.by_file.insert(tool.file.clone(), tool);
    }

    /// Unpins the tool named `name`; answers its entry.
    pub fn remove(&mut self, name: &str) -> Option<PinnedTool> {
        let file = self.by_name(name)?.file.clone();
        self.by_file.remove(&file)
    }

    /// The lock file's text.
    pub fn render(&self) -> String {
        let text = LockText {
            version: VERSION,
            tool: self.by_file.values().cloned().collect(),
        };
        let body = toml::to_string(&text).expect("a lock serializes");
        format!(
            "# The tool components of this directory, pinned by SHA-256. Written by `turngate tools lock`\n# and `turngate tools add`; checked by `--locked`.\n{body}"
        )
    }

    /// The pinned components, by file name.
    pub fn tools(&self) -> impl Iterator<Item = &PinnedTool> {
        self.by_file.values()
    }

    /// Whether the component `file` with digest `actual` is the pinned one.
    pub fn check(&self, file: &str, actual: &str) -> Result<(), LockError> {
        match self.by_file.get(file) {
            None => Err(LockError::Unpinned {
                file: file.to_owned(),
                actual: actual.to_owned(),
            }),
            Some(pinned) if pinned.sha256 != actual => Err(LockError::Mismatch {
                file: file.to_owned(),
                pinned: pinned.sha256.clone(),
                actual: actual.to_owned(),
            }),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned(file: &str, sha: &str) -> PinnedTool {
        PinnedTool::local(
            file.into(),
            file.trim_end_matches(".wasm").into(),
            sha.into(),
        )
    }

    #[test]
    fn a_lock_round_trips_and_checks_files_and_digests() {
        let lock = ToolLock::new([pinned("a.wasm", "aa"), pinned("b.wasm", "bb")]);
        let text = lock.render();
        assert_eq!(ToolLock::parse(&text).unwrap(), lock);
        assert_eq!(lock.check("a.wasm", "aa"), Ok(()));
        assert!(matches!(
            lock.check("a.wasm", "ff"),
            Err(LockError::Mismatch { .. })
        ));
        assert!(matches!(
            lock.check("c.wasm", "cc"),
            Err(LockError::Unpinned { .. })
        ));
        assert!(ToolLock::parse("version = 3").is_err());
        assert!(ToolLock::parse("version = 1\nextra = 1").is_err());
        // A version 1 lock reads as before; registry fields need version 2.
        let v1 = "version = 1\n[[tool]]\nfile = \"a.wasm\"\nname = \"a\"\nsha256 = \"aa\"\n";
        assert_eq!(ToolLock::parse(v1).unwrap().check("a.wasm", "aa"), Ok(()));
        assert!(ToolLock::parse(&format!("{v1}source = \"oci://r/a:1\"\n")).is_err());
    }

    #[test]
    fn a_registry_entry_round_trips_and_replaces_the_entry_of_its_name() {
        let mut lock = ToolLock::new([pinned("a.wasm", "aa")]);
        let mut from_registry = pinned("sha256-bb.wasm", "bb");
        from_registry.name = "a".into();
        from_registry.source = Some("oci://registry.test/acme/a:1".into());
        from_registry.manifest = Some(Sha256Digest::of(b"manifest"));
        from_registry.signer = Some(SignedBy::Key {
            name: "acme".into(),
            fingerprint: Sha256Digest::of(b"key"),
        });
        from_registry.grants = Some("{}".into());
        lock.insert(from_registry.clone());
        assert_eq!(
            lock.tools().count(),
            1,
            "the new entry replaced the old one of its name"
        );
        let parsed = ToolLock::parse(&lock.render()).unwrap();
        assert_eq!(parsed.by_name("a"), Some(&from_registry));
        assert!(ToolLock::parse(&lock.render().replace("signer", "singer")).is_err());
        assert_eq!(lock.remove("a"), Some(from_registry));
        assert_eq!(lock.tools().count(), 0);
    }

    /// A lock as the version before typed signers wrote it (signers as display text): it loads into
    /// the types, and is written back with the same signer and manifest lines.
    #[test]
    fn a_lock_written_before_the_signer_had_a_type_loads_and_renders_the_same() {
        let key = "5d0c".repeat(16);
        let manifest = format!("sha256:{}", "77aa".repeat(16));
        let written = format!(
            r#"version = 2

[[tool]]
file = "sha256-4be1.wasm"
name = "weather"
sha256 = "4be1"
source = "oci://ghcr.io/acme/weather:1.2.0"
manifest = "{manifest}"
signer = "key acme tools (SHA-256 of its key: {key})"
grants = '{{"network": {{"get": ["https://api.weather.example/**"]}}}}'

[[tool]]
file = "sha256-5cf2.wasm"
name = "notes"
sha256 = "5cf2"
source = "oci://ghcr.io/acme/notes@{manifest}"
manifest = "{manifest}"
signer = "sigstore acme-ci (https://token.actions.githubusercontent.com, https://github.com/acme/tools/.github/workflows/release.yml@refs/tags/v1, 2)"
"#
        );
        let lock = ToolLock::parse(&written).unwrap();
        assert_eq!(
            lock.by_name("weather").unwrap().signer,
            Some(SignedBy::Key {
                name: "acme tools".into(),
                fingerprint: Sha256Digest::from_hex(&key).unwrap(),
            })
        );
        assert_eq!(
            lock.by_name("notes").unwrap().signer,
            Some(SignedBy::Sigstore {
                name: "acme-ci".into(),
                issuer: "https://token.actions.githubusercontent.com".into(),
                identity:
                    "https://github.com/acme/tools/.github/workflows/release.yml@refs/tags/v1, 2"
                        .into(),
            })
        );
        assert_eq!(
            lock.by_name("notes").unwrap().manifest.unwrap().to_string(),
            manifest
        );
        let rendered = lock.render();
        assert_eq!(ToolLock::parse(&rendered).unwrap(), lock);
        for line in written
            .lines()
            .filter(|l| l.starts_with("signer") || l.starts_with("manifest"))
        {
            assert!(rendered.contains(line), "{line} in\n{rendered}");
        }
        for bad in [
            "key acme",
            "key acme (SHA-256 of its key: 5d0c)",
            "sigstore acme-ci",
            "signed by acme",
        ] {
            assert!(
                ToolLock::parse(
                    &written.replace(&format!("key acme tools (SHA-256 of its key: {key})"), bad)
                )
                .is_err(),
                "{bad}"
            );
        }
    }
}
