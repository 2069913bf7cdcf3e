//! Where a tool comes from: `oci://REGISTRY/REPOSITORY:TAG`, `oci://REGISTRY/REPOSITORY@sha256:...`,
//! or an OCI image layout directory, `oci:DIR[:TAG|@sha256:...]` (or just `DIR` when its index lists
//! one manifest), and the [`Store`] that reads it.

use std::path::PathBuf;

use bytes::Bytes;

use super::RegistryError;
use super::artifact::{Descriptor, Index};
use super::distribution::{Registry, RegistryOptions};
use super::layout::Layout;

/// A parsed source reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A repository of a registry.
    Registry(oci_client::Reference),
    /// A layout directory, and the tag or digest of the manifest in it (`None`: its only one).
    Layout {
        /// The directory.
        dir: PathBuf,
        /// The tag or `sha256:` digest.
        reference: Option<String>,
    },
}

/// Why a reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{reference}` is not a tool source: {reason} (give oci://REGISTRY/REPOSITORY:TAG, oci://REGISTRY/REPOSITORY@sha256:..., or an OCI layout directory, oci:DIR[:TAG])"
)]
pub struct SourceError {
    /// The reference as given.
    pub reference: String,
    /// What is wrong.
    pub reason: String,
}

impl Source {
    /// Parses a source reference.
    pub fn parse(text: &str) -> Result<Source, SourceError> {
        let fail = |reason: &str| SourceError {
            reference: text.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(rest) = text.strip_prefix("oci://") {
            let reference: oci_client::Reference =
                rest.parse().map_err(|e| fail(&format!("{e}")))?;
            if !rest.contains(':') && !rest.contains('@') {
                return Err(fail("it names no tag or digest"));
            }
            return Ok(Source::Registry(reference));
        }
        let (dir, reference) = match text.strip_prefix("oci:") {
            Some(rest) => match rest.rsplit_once('@') {
                Some((dir, digest)) if digest.starts_with("sha256:") => {
                    (dir, Some(digest.to_owned()))
                }
                _ => match rest.rsplit_once(':') {
                    Some((dir, tag)) if !tag.contains('/') && !tag.is_empty() => {
                        (dir, Some(tag.to_owned()))
                    }
                    _ => (rest, None),
                },
            },
            None => (text, None),
        };
        if dir.is_empty() {
            return Err(fail("it names no directory"));
        }
        Ok(Source::Layout {
            dir: PathBuf::from(dir),
            reference,
        })
    }

    /// The text a trust rule's `source` pattern is matched against: `REGISTRY/REPOSITORY`, or
    /// `oci:DIR` for a layout.
    pub fn trust_name(&self) -> String {
        match self {
            Source::Registry(reference) => {
                format!("{}/{}", reference.registry(), reference.repository())
            }
            Source::Layout { dir, .. } => format!("oci:{}", dir.display()),
        }
    }

    /// The source as the lock records it, pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> String {
        match self {
            Source::Registry(reference) => match reference.tag() {
                Some(tag) => format!(
                    "oci://{}/{}:{tag}",
                    reference.registry(),
                    reference.repository()
                ),
                None => format!(
                    "oci://{}/{}@{digest}",
                    reference.registry(),
                    reference.repository()
                ),
            },
            Source::Layout { dir, reference } => match reference {
                Some(tag) if !tag.starts_with("sha256:") => format!("oci:{}:{tag}", dir.display()),
                _ => format!("oci:{}@{digest}", dir.display()),
            },
        }
    }

    /// Opens the store it names.
    pub fn open(&self, options: &RegistryOptions) -> Result<Store, RegistryError> {
        Ok(match self {
            Source::Registry(reference) => {
                Store::Registry(Box::new(Registry::connect(reference, options)?))
            }
            Source::Layout { dir, .. } => Store::Layout(Layout::open(dir, false)?),
        })
    }

    /// The tag or digest the source names (`None`: a layout's only manifest).
    pub fn tag_or_digest(&self) -> Option<String> {
        match self {
            Source::Registry(reference) => {
                reference.digest().or(reference.tag()).map(str::to_owned)
            }
            Source::Layout { reference, .. } => reference.clone(),
        }
    }
}

/// A registry's repository or a layout: manifests, blobs and referrers.
pub enum Store {
    /// A registry.
    Registry(Box<Registry>),
    /// A layout directory.
    Layout(Layout),
}

impl Store {
    /// The manifest named `tag_or_digest` (`None`: a layout's only one), at most `limit` bytes, held
    /// to its digest; `Ok(None)` when there is none.
    pub async fn manifest(
        &self,
        tag_or_digest: Option<&str>,
        limit: u64,
    ) -> Result<Option<(Bytes, String)>, RegistryError> {
        match self {
            Store::Registry(registry) => match tag_or_digest {
                Some(name) => registry.manifest(name, limit).await,
                None => Err(RegistryError::Descriptor(
                    "a registry source needs a tag or digest".into(),
                )),
            },
            Store::Layout(layout) => Ok(layout
                .manifest(tag_or_digest, limit)?
                .map(|(bytes, digest)| (Bytes::from(bytes), digest))),
        }
    }

    /// Copies the blob `descriptor` names into `to` (see [`Registry::blob`]).
    pub async fn blob(
        &self,
        descriptor: &Descriptor,
        limit: u64,
        to: &mut impl std::io::Write,
    ) -> Result<(), RegistryError> {
        match self {
            Store::Registry(registry) => registry.blob(descriptor, limit, to).await,
            Store::Layout(layout) => layout.blob(descriptor, limit, to),
        }
    }

    /// The blob `descriptor` names, whole (for small ones: payloads, bundles).
    pub async fn small_blob(
        &self,
        descriptor: &Descriptor,
        limit: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let mut bytes = Vec::new();
        self.blob(descriptor, limit, &mut bytes).await?;
        Ok(bytes)
    }

    /// The manifests that refer to `digest`.
    pub async fn referrers(&self, digest: &str, limit: u64) -> Result<Index, RegistryError> {
        match self {
            Store::Registry(registry) => registry.referrers(digest, limit).await,
            Store::Layout(layout) => layout.referrers(digest, limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_registries_by_tag_or_digest_or_layouts() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let Source::Registry(tagged) =
            Source::parse("oci://registry.test:5000/acme/tool:1.2").unwrap()
        else {
            panic!("a registry");
        };
        assert_eq!(
            (tagged.registry(), tagged.repository(), tagged.tag()),
            ("registry.test:5000", "acme/tool", Some("1.2"))
        );
        let by_digest = Source::parse(&format!("oci://ghcr.io/acme/tool@{digest}")).unwrap();
        assert_eq!(by_digest.tag_or_digest().as_deref(), Some(digest.as_str()));
        assert_eq!(by_digest.trust_name(), "ghcr.io/acme/tool");
        assert!(
            Source::parse("oci://ghcr.io/acme/tool").is_err(),
            "no tag or digest"
        );
        assert_eq!(
            Source::parse("oci:/tmp/layout:1.0").unwrap(),
            Source::Layout {
                dir: "/tmp/layout".into(),
                reference: Some("1.0".into())
            }
        );
        assert_eq!(
            Source::parse(&format!("oci:/tmp/layout@{digest}")).unwrap(),
            Source::Layout {
                dir: "/tmp/layout".into(),
                reference: Some(digest.clone())
            }
        );
        assert_eq!(
            Source::parse("./layout").unwrap(),
            Source::Layout {
                dir: "./layout".into(),
                reference: None
            }
        );
        assert!(Source::parse("oci:").is_err());
    }
}
