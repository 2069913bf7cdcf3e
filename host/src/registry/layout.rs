//! An OCI image layout directory (what `skopeo copy ... oci:DIR:TAG` and `turngate tools publish FILE
//! oci:DIR:TAG` write): `oci-layout`, `index.json` listing the manifests (a tag in the annotation
//! `org.opencontainers.image.ref.name`), and every blob at `blobs/sha256/<hex>`.
//!
//! For machines without a registry. Nothing in it is trusted more than a registry's answer: it is read
//! through a `Dir` handle opened once, blobs without following a link (a symlink leading out of the
//! layout, or anywhere, is refused), each checked to be a regular file, read to at most its bound and
//! held to its digest; tags and referrers work as a registry's do (cosign's `sha256-<hex>.sig` tag and
//! the `sha256-<hex>` referrers tag are tags like any other).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};

use super::RegistryError;
use super::artifact::{Descriptor, Index, OCI_INDEX, TagOrDigest};
use crate::digest::Sha256Digest;

/// The annotation that tags a manifest in `index.json`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Where a layout keeps the blob `digest`.
fn blob_path(digest: &Sha256Digest) -> String {
    format!("blobs/sha256/{}", digest.hex())
}

/// The most manifests of a layout's index looked through for referrers.
const MAX_LISTED: usize = 1024;

/// An OCI image layout directory.
pub struct Layout {
    dir: Dir,
    path: PathBuf,
}

impl Layout {
    /// Opens the layout at `path` (for writing, creating it when `create`).
    pub fn open(path: &Path, create: bool) -> Result<Layout, RegistryError> {
        let io = |source| RegistryError::LayoutIo {
            path: path.to_path_buf(),
            source,
        };
        if create {
            std::fs::create_dir_all(path.join("blobs/sha256")).map_err(io)?;
        }
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(io)?;
        let layout = Layout {
            dir,
            path: path.to_path_buf(),
        };
        if create && !layout.dir.exists("oci-layout") {
            layout.write_file("oci-layout", br#"{"imageLayoutVersion": "1.0.0"}"#)?;
            layout.write_file(
                "index.json",
                &serde_json::to_vec(&Index {
                    schema_version: 2,
                    media_type: Some(OCI_INDEX.to_owned()),
                    manifests: Vec::new(),
                })
                .expect("an index serializes"),
            )?;
        }
        let marker = layout.read("oci-layout", 4096)?;
        let version: serde_json::Value =
            serde_json::from_slice(&marker).map_err(|source| RegistryError::LayoutJson {
                file: "oci-layout",
                source,
            })?;
        if version["imageLayoutVersion"] != "1.0.0" {
            return Err(RegistryError::Layout(format!(
                "{}: not an OCI image layout 1.0.0",
                path.display()
            )));
        }
        Ok(layout)
    }

    /// The directory, as the user named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The regular file `name` (beneath the layout, no link followed), at most `limit` bytes.
    fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>, RegistryError> {
        let fail = |source| RegistryError::LayoutIo {
            path: self.path.join(name),
            source,
        };
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let file = self.dir.open_with(name, &options).map_err(fail)?;
        let metadata = file.metadata().map_err(fail)?;
        if !metadata.is_file() {
            return Err(RegistryError::Layout(format!(
                "{}/{name}: not a regular file",
                self.path.display()
            )));
        }
        if metadata.len() > limit {
            return Err(RegistryError::TooLarge {
                url: format!("{}/{name}", self.path.display()),
                limit,
            });
        }
        let mut bytes = Vec::new();
        file.into_std()
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(fail)?;
        if bytes.len() as u64 > limit {
            return Err(RegistryError::TooLarge {
                url: format!("{}/{name}", self.path.display()),
                limit,
            });
        }
        Ok(bytes)
    }

    fn write_file(&self, name: &str, bytes: &[u8]) -> Result<(), RegistryError> {
        let fail = |source| RegistryError::LayoutIo {
            path: self.path.join(name),
            source,
        };
        let temp = format!("{name}.{:016x}.tmp", fastrand::u64(..));
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .follow(FollowSymlinks::No);
        let mut file = self.dir.open_with(&temp, &options).map_err(fail)?;
        file.write_all(bytes).map_err(fail)?;
        self.dir.rename(&temp, &self.dir, name).map_err(fail)
    }

    fn index(&self, limit: u64) -> Result<Index, RegistryError> {
        let bytes = self.read("index.json", limit)?;
        serde_json::from_slice(&bytes).map_err(|source| RegistryError::LayoutJson {
            file: "index.json",
            source,
        })
    }

    /// The manifest `name`d (`None`: the only one the index lists), held to its digest; `Ok(None)`
    /// when there is no such manifest.
    pub fn manifest(
        &self,
        name: Option<&TagOrDigest>,
        limit: u64,
    ) -> Result<Option<(Vec<u8>, Sha256Digest)>, RegistryError> {
        let index = self.index(limit)?;
        let found = match name {
            Some(TagOrDigest::Digest(digest)) => index
                .manifests
                .iter()
                .find(|m| m.sha256().ok() == Some(*digest)),
            Some(TagOrDigest::Tag(tag)) => index
                .manifests
                .iter()
                .find(|m| m.annotations.get(REF_NAME).is_some_and(|t| t == tag)),
            None if index.manifests.len() == 1 => index.manifests.first(),
            None => {
                return Err(RegistryError::Layout(format!(
                    "{} lists {} manifests: name one by its tag (`oci:DIR:TAG`)",
                    self.path.display(),
                    index.manifests.len()
                )));
            }
        };
        match (found, name) {
            (Some(descriptor), _) => self.manifest_blob(&descriptor.sha256()?, limit).map(Some),
            // A digest the index does not list may still be a blob of the layout (a signature's).
            (None, Some(TagOrDigest::Digest(digest))) => {
                self.manifest_blob(digest, limit).map(Some)
            }
            (None, _) => Ok(None),
        }
    }

    fn manifest_blob(
        &self,
        digest: &Sha256Digest,
        limit: u64,
    ) -> Result<(Vec<u8>, Sha256Digest), RegistryError> {
        let bytes = self.read(&blob_path(digest), limit)?;
        let received = Sha256Digest::of(&bytes);
        if received != *digest {
            return Err(RegistryError::ManifestDigest {
                asked: digest.to_string(),
                received,
            });
        }
        Ok((bytes, received))
    }

    /// Copies the blob `descriptor` names into `to`, at most `limit` bytes, held to its digest and size.
    pub fn blob(
        &self,
        descriptor: &Descriptor,
        limit: u64,
        to: &mut impl Write,
    ) -> Result<(), RegistryError> {
        let expected = descriptor.sha256()?;
        if descriptor.size > limit {
            return Err(RegistryError::TooLarge {
                url: descriptor.digest.clone(),
                limit,
            });
        }
        let bytes = self.read(&blob_path(&expected), descriptor.size)?;
        if bytes.len() as u64 != descriptor.size {
            return Err(RegistryError::BlobSize {
                digest: descriptor.digest.clone(),
                expected: descriptor.size,
                received: bytes.len() as u64,
            });
        }
        let received = Sha256Digest::of(&bytes);
        if received != expected {
            return Err(RegistryError::BlobDigest { expected, received });
        }
        to.write_all(&bytes).map_err(RegistryError::Io)
    }

    /// The manifests that refer to `digest`: those the index lists whose `subject` is it (how OCI 1.1
    /// tools such as oras and cosign 3 keep a referrer in a layout), then those of the index tagged
    /// `sha256-<hex>` (the referrers tag schema).
    pub fn referrers(&self, digest: &Sha256Digest, limit: u64) -> Result<Index, RegistryError> {
        let index = self.index(limit)?;
        let mut referrers = Index::default();
        for listed in index.manifests.iter().take(MAX_LISTED) {
            if listed.media_type != super::artifact::OCI_MANIFEST {
                continue;
            }
            let listed_digest = listed.sha256()?;
            if listed_digest == *digest {
                continue;
            }
            let (bytes, _) = self.manifest_blob(&listed_digest, limit)?;
            let refers = serde_json::from_slice::<super::artifact::Manifest>(&bytes)
                .ok()
                .and_then(|m| m.subject)
                .is_some_and(|subject| subject.sha256().ok() == Some(*digest));
            if refers {
                referrers.manifests.push(listed.clone());
            }
        }
        if let Some((bytes, _)) = self.manifest(Some(&TagOrDigest::Tag(digest.dashed())), limit)? {
            let tagged: Index =
                serde_json::from_slice(&bytes).map_err(|source| RegistryError::DescriptorJson {
                    what: "a referrers index",
                    source,
                })?;
            referrers.manifests.extend(tagged.manifests);
        }
        Ok(referrers)
    }

    /// Writes `blobs` and `manifest`, and tags the manifest `tag` in the index (replacing what had
    /// that tag); answers the manifest's digest.
    pub fn push(
        &self,
        blobs: &[(&[u8], Sha256Digest)],
        manifest: &[u8],
        tag: &str,
        media_type: &str,
    ) -> Result<Sha256Digest, RegistryError> {
        let digest = Sha256Digest::of(manifest);
        let all = blobs.iter().map(|(bytes, digest)| (*bytes, digest));
        for (bytes, blob_digest) in all.chain([(manifest, &digest)]) {
            self.write_file(&blob_path(blob_digest), bytes)?;
        }
        let mut index = self.index(super::artifact::MAX_MANIFEST_BYTES)?;
        index
            .manifests
            .retain(|m| m.annotations.get(REF_NAME).is_none_or(|t| t != tag));
        index.manifests.push(Descriptor {
            media_type: media_type.to_owned(),
            digest: digest.to_string(),
            size: manifest.len() as u64,
            artifact_type: None,
            annotations: [(REF_NAME.to_owned(), tag.to_owned())].into(),
        });
        self.write_file(
            "index.json",
            &serde_json::to_vec(&index).expect("an index serializes"),
        )?;
        Ok(digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What could not be read, and why, stays a cause the CLI prints after the file it names.
    #[test]
    fn a_layout_that_cannot_be_read_keeps_the_io_or_json_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let error = Layout::open(&missing, false).err().expect("no such layout");
        assert!(
            matches!(&error, RegistryError::LayoutIo { path, source }
                if path == &missing && source.kind() == std::io::ErrorKind::NotFound),
            "{error:?}"
        );

        let layout = Layout::open(dir.path(), true).unwrap();
        std::fs::write(dir.path().join("index.json"), b"{not json").unwrap();
        let error = layout.manifest(None, 4096).expect_err("a broken index");
        let source = std::error::Error::source(&error).expect("the cause is kept");
        assert!(source.is::<serde_json::Error>(), "{error:?}");
        assert_eq!(error.to_string(), "layout index.json");
    }
}
