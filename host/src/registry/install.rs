//! Installing a tool from a source: [`fetch`] does everything that can refuse it (see the module docs
//! of `registry`), [`install`] puts what was fetched in place and pins it.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::RegistryError;
use super::artifact::TagOrDigest;
use super::artifact::{
    ArtifactError, MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES, Manifest, ToolArtifact,
};
use super::bundle::{self, BUNDLE_LAYER_PREFIX, MAX_BUNDLE_BYTES};
use super::cosign::{self, MAX_PAYLOAD_BYTES, SIGNATURE_ANNOTATION, SIGNATURE_LAYER};
use super::distribution::RegistryOptions;
use super::grants::Grants;
use super::provenance::{KeptSignature, Provenance};
use super::source::{Source, Store};
use super::trust::{Signer, Trust};
use crate::digest::Sha256Digest;
use crate::lockfile::{LOCK_FILE, LockError, PinnedTool, SignedBy, ToolLock};

/// How a source is fetched.
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// How the registry is reached.
    pub registry: RegistryOptions,
    /// Install it without a signature the policy accepts (the lock then says it is unsigned).
    pub allow_unsigned: bool,
}

/// Why a tool was not installed. Nothing was written to the tools directory, the lock or the policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The registry or layout refused, or what it sent was not what was asked for.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// There is no such manifest.
    #[error("{0} names no manifest")]
    NotFound(String),
    /// The manifest is not a Wasm component tool.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// No signature, and none was allowed to be missing.
    #[error(
        "{repository} carries no signature (the policy trusts {trusted}): install it unsigned only with --allow-unsigned"
    )]
    Unsigned {
        /// The source.
        repository: String,
        /// Who would have been accepted.
        trusted: String,
    },
    /// Signatures, but none by an accepted signer over this manifest.
    #[error("{repository}: no signature verifies for a signer the policy accepts: {}", .reasons.join("; "))]
    Unverified {
        /// The source.
        repository: String,
        /// What each signature found said.
        reasons: Vec<String>,
    },
    /// The layer is not a component.
    #[error("the layer is {0}, not a WebAssembly component")]
    NotAComponent(&'static str),
    /// The lock cannot be read or written.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// No tool of that name is pinned in the tools directory's lock.
    #[error("the tools directory {dir}: no tool `{name}` is pinned in its {LOCK_FILE}")]
    NotPinned {
        /// The directory.
        dir: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// Writing to the tools directory failed.
    #[error("the tools directory {dir}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// What failed.
        #[source]
        error: std::io::Error,
    },
}

/// Who vouched for a fetched tool.
#[derive(Debug, Clone)]
pub enum Vouched {
    /// A signer the policy accepts: how the lock names it, and the signature kept.
    Signed {
        /// The signer.
        signer: SignedBy,
        /// The signature, for `--locked` to check again.
        kept: KeptSignature,
    },
    /// Nobody: installed unsigned by the user's choice.
    Unsigned,
}

/// A tool fetched and verified, its component in a temporary file of the tools directory.
pub struct Fetched {
    /// The source, as the lock records it (pinned by the tag or digest it was asked by).
    pub source: String,
    /// The manifest's exact bytes.
    pub manifest: Bytes,
    /// Its digest.
    pub manifest_digest: Sha256Digest,
    /// The artifact: its layer and requested grants.
    pub artifact: ToolArtifact,
    /// Who vouched for it.
    pub vouched: Vouched,
    /// The component, verified, not yet in place.
    pub component: tempfile::NamedTempFile,
    /// Its SHA-256, hex.
    pub sha256: String,
}

impl Fetched {
    /// The grants the tool asks for.
    pub fn grants(&self) -> &Grants {
        &self.artifact.grants
    }

    /// Who signed it, as shown to the user.
    pub fn signer(&self) -> String {
        match &self.vouched {
            Vouched::Signed { signer, .. } => signer.to_string(),
            Vouched::Unsigned => "nobody (installed unsigned, as asked)".into(),
        }
    }
}

fn io(dir: &Path) -> impl Fn(std::io::Error) -> InstallError + '_ {
    move |error| InstallError::Io {
        dir: dir.to_path_buf(),
        error,
    }
}

/// Fetches and verifies the tool `source` names (see the module docs of `registry`), its component
/// into a temporary file of `tools_dir`.
pub async fn fetch(
    source: &Source,
    tools_dir: &Path,
    trust: &Trust,
    options: &FetchOptions,
) -> Result<Fetched, InstallError> {
    let store = source.open(&options.registry)?;
    let named = source.tag_or_digest();
    let (manifest, digest) = store
        .manifest(named.as_ref(), MAX_MANIFEST_BYTES)
        .await?
        .ok_or_else(|| InstallError::NotFound(source.trust_name()))?;
    let artifact = ToolArtifact::from_manifest(&manifest)?;
    let (signers, _) = trust.signers_for(&source.trust_name());
    let vouched = match vouch(&store, &source.trust_name(), &digest, &signers, trust).await? {
        Found::Verified { signer, kept } => Vouched::Signed { signer, kept },
        // Signatures that do not verify are no reason to trust it, and the user accepts none.
        Found::Nothing | Found::Unverified(_) if options.allow_unsigned => Vouched::Unsigned,
        Found::Nothing => {
            let names: Vec<&str> = signers.iter().map(|s| s.name()).collect();
            return Err(InstallError::Unsigned {
                repository: source.trust_name(),
                trusted: if names.is_empty() {
                    "nobody yet: add keys or identities under [trust]".into()
                } else {
                    names.join(", ")
                },
            });
        }
        Found::Unverified(reasons) => {
            return Err(InstallError::Unverified {
                repository: source.trust_name(),
                reasons,
            });
        }
    };
    let mut component = tempfile::Builder::new()
        .prefix(".turngate-pull-")
        .suffix(".tmp")
        .tempfile_in(tools_dir)
        .map_err(io(tools_dir))?;
    store
        .blob(
            &artifact.layer,
            MAX_COMPONENT_BYTES,
            component.as_file_mut(),
        )
        .await?;
    let mut header = [0u8; 8];
    let file = component.as_file_mut();
    file.seek(SeekFrom::Start(0)).map_err(io(tools_dir))?;
    let read = file.read(&mut header).map_err(io(tools_dir))?;
    if !wasmparser::Parser::is_component(&header[..read]) {
        let what = if wasmparser::Parser::is_core_wasm(&header[..read]) {
            "a core WebAssembly module"
        } else {
            "not WebAssembly at all"
        };
        return Err(InstallError::NotAComponent(what));
    }
    file.flush().map_err(io(tools_dir))?;
    let sha256 = artifact.layer_digest.hex();
    Ok(Fetched {
        source: source.pinned(&digest),
        manifest,
        manifest_digest: digest,
        artifact,
        vouched,
        component,
        sha256,
    })
}

/// What [`vouch`] found.
enum Found {
    /// A signature by an accepted signer.
    Verified {
        /// The signer.
        signer: SignedBy,
        /// The signature, to keep.
        kept: KeptSignature,
    },
    /// No signature at all.
    Nothing,
    /// Signatures, none by an accepted signer over this manifest: what each one found said.
    Unverified(Vec<String>),
}

/// Looks for a signature over manifest `digest` of `repository` by one of `signers`: a cosign key
/// signature under its `.sig` tag, or a Sigstore bundle among its referrers.
async fn vouch(
    store: &Store,
    repository: &str,
    digest: &Sha256Digest,
    signers: &[&Signer],
    trust: &Trust,
) -> Result<Found, InstallError> {
    let mut reasons = Vec::new();
    let signature_tag = TagOrDigest::Tag(cosign::signature_tag(digest));
    if let Some((bytes, _)) = store
        .manifest(Some(&signature_tag), MAX_MANIFEST_BYTES)
        .await?
    {
        let signatures: Manifest =
            serde_json::from_slice(&bytes).map_err(|source| RegistryError::DescriptorJson {
                what: "the signature manifest",
                source,
            })?;
        for layer in signatures
            .layers
            .iter()
            .filter(|l| l.media_type == SIGNATURE_LAYER)
        {
            let payload = store.small_blob(layer, MAX_PAYLOAD_BYTES).await?;
            if let Err(e) = cosign::check_payload(&payload, digest) {
                reasons.push(e.to_string());
                continue;
            }
            let Some(signature) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
                reasons.push("a cosign signature layer has no signature".into());
                continue;
            };
            let verified = signers.iter().find_map(|signer| match signer {
                Signer::Key {
                    name,
                    key,
                    fingerprint,
                } => {
                    let verification = signer.verification_key()?;
                    cosign::verifies(&payload, signature, &verification).then(|| {
                        let signer = SignedBy::Key {
                            name: name.clone(),
                            fingerprint: *fingerprint,
                        };
                        (signer, key.to_pem())
                    })
                }
                Signer::Identity { .. } => None,
            });
            match verified {
                Some((signer, key)) => {
                    return Ok(Found::Verified {
                        signer,
                        kept: KeptSignature::Cosign {
                            payload: String::from_utf8_lossy(&payload).into_owned(),
                            signature: signature.clone(),
                            key,
                        },
                    });
                }
                None => reasons.push(format!(
                    "a cosign signature of {repository} verifies with no key the policy trusts for it"
                )),
            }
        }
    }
    let referrers = store.referrers(digest, MAX_MANIFEST_BYTES).await?;
    for referrer in &referrers.manifests {
        let Ok(referrer) = referrer.sha256() else {
            reasons.push(format!(
                "a referrer's digest {} is not a SHA-256 one",
                referrer.digest
            ));
            continue;
        };
        let Some((bytes, _)) = store
            .manifest(Some(&TagOrDigest::Digest(referrer)), MAX_MANIFEST_BYTES)
            .await?
        else {
            continue;
        };
        let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes) else {
            continue;
        };
        let [layer] = manifest.layers.as_slice() else {
            continue;
        };
        if !layer.media_type.starts_with(BUNDLE_LAYER_PREFIX) {
            continue;
        }
        let json = store.small_blob(layer, MAX_BUNDLE_BYTES).await?;
        let json = String::from_utf8_lossy(&json).into_owned();
        match bundle::verify(&json, digest, signers, trust) {
            Ok(signer) => {
                return Ok(Found::Verified {
                    signer,
                    kept: KeptSignature::Bundle { bundle: json },
                });
            }
            Err(e) => reasons.push(e.to_string()),
        }
    }
    Ok(match reasons.is_empty() {
        true => Found::Nothing,
        false => Found::Unverified(reasons),
    })
}

/// What [`install`] did.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The lock entry written.
    pub entry: PinnedTool,
    /// The component's path.
    pub path: PathBuf,
    /// The entry it replaced (a tool of the same name), if any.
    pub replaced: Option<PinnedTool>,
}

/// Writes `path` atomically: a temporary file in its directory, flushed, renamed over it.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), InstallError> {
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    temp.write_all(bytes).map_err(io(dir))?;
    temp.as_file().sync_all().map_err(io(dir))?;
    temp.persist(dir.join(name)).map_err(|e| io(dir)(e.error))?;
    Ok(())
}

/// The lock of `tools_dir` (empty when there is none).
pub fn read_lock(tools_dir: &Path) -> Result<ToolLock, InstallError> {
    match std::fs::read_to_string(tools_dir.join(LOCK_FILE)) {
        Ok(text) => Ok(ToolLock::parse(&text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ToolLock::default()),
        Err(e) => Err(io(tools_dir)(e)),
    }
}

/// Puts the fetched tool `name` in place as `sha256-<hex>.wasm`, with its provenance beside it, and
/// pins it in the lock (replacing the entry of the same name), recording `accepted` grants (`None`:
/// none accepted). A tool of that name installed before is replaced; its file is removed when no
/// entry uses it any more.
pub fn install(
    fetched: Fetched,
    name: &str,
    tools_dir: &Path,
    accepted: Option<&Grants>,
) -> Result<Installed, InstallError> {
    let file = format!("sha256-{}.wasm", fetched.sha256);
    let (signer, unsigned, kept) = match fetched.vouched {
        Vouched::Signed { signer, kept } => (Some(signer), false, Some(kept)),
        Vouched::Unsigned => (None, true, None),
    };
    let provenance = Provenance {
        manifest: String::from_utf8_lossy(&fetched.manifest).into_owned(),
        signature: kept,
    };
    write_atomically(
        tools_dir,
        &super::provenance::file_name(&file),
        &serde_json::to_vec_pretty(&provenance).expect("provenance serializes"),
    )?;
    fetched
        .component
        .as_file()
        .sync_all()
        .map_err(io(tools_dir))?;
    let path = tools_dir.join(&file);
    fetched
        .component
        .persist(&path)
        .map_err(|e| io(tools_dir)(e.error))?;
    let entry = PinnedTool {
        file: file.clone(),
        name: name.to_owned(),
        sha256: fetched.sha256,
        source: Some(fetched.source),
        manifest: Some(fetched.manifest_digest),
        signer,
        unsigned,
        grants: accepted.map(Grants::to_json),
    };
    let mut lock = read_lock(tools_dir)?;
    let replaced = lock.by_name(name).cloned();
    lock.insert(entry.clone());
    write_atomically(tools_dir, LOCK_FILE, lock.render().as_bytes())?;
    if let Some(old) = &replaced
        && old.file != file
        && lock.get(&old.file).is_none()
    {
        remove_files(tools_dir, &old.file);
    }
    Ok(Installed {
        entry,
        path,
        replaced,
    })
}

/// Removes component `file` and its provenance from `tools_dir` (what is already gone is no error).
fn remove_files(tools_dir: &Path, file: &str) {
    // The tools directory is the user's own, outside any root; these are the files turngate wrote.
    #[allow(clippy::disallowed_methods)]
    for name in [file.to_owned(), super::provenance::file_name(file)] {
        let _ = std::fs::remove_file(tools_dir.join(name));
    }
}

/// Unpins the tool `name` and removes its files; answers its entry.
pub fn remove(tools_dir: &Path, name: &str) -> Result<PinnedTool, InstallError> {
    let mut lock = read_lock(tools_dir)?;
    let entry = lock.remove(name).ok_or_else(|| InstallError::NotPinned {
        dir: tools_dir.to_path_buf(),
        name: name.to_owned(),
    })?;
    write_atomically(tools_dir, LOCK_FILE, lock.render().as_bytes())?;
    remove_files(tools_dir, &entry.file);
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An I/O failure keeps its cause (the CLI prints the chain), and says which directory it was.
    #[test]
    fn a_lock_that_cannot_be_read_is_an_io_error_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(LOCK_FILE)).unwrap();
        let error = read_lock(dir.path()).unwrap_err();
        assert!(matches!(error, InstallError::Io { .. }), "{error:?}");
        let cause = std::error::Error::source(&error).expect("the cause is kept");
        assert_eq!(
            cause
                .downcast_ref::<std::io::Error>()
                .map(std::io::Error::kind),
            Some(std::io::ErrorKind::IsADirectory)
        );
        assert!(
            error
                .to_string()
                .contains(&dir.path().display().to_string())
        );
    }
}
