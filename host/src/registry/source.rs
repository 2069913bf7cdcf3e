//! Where a tool comes from: `oci://REGISTRY/REPOSITORY:TAG`, `oci://REGISTRY/REPOSITORY@sha256:...`,
//! or an OCI image layout directory, `oci:DIR[:TAG|@sha256:...]` (or just `DIR` when its index lists
//! one manifest), and the [`Store`] that reads it.

use std::path::PathBuf;

use bytes::Bytes;

use super::RegistryError;
use super::artifact::{Descriptor, Index, TagOrDigest};
use super::distribution::{Registry, RegistryOptions};
use super::layout::Layout;
use crate::digest::{DigestError, Sha256Digest};

/// A parsed source reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A repository of a registry.
    Registry(oci_client::Reference),
    /// A layout directory, and the tag or digest of the manifest in it (`None`: its only one).
    Layout {
        /// The directory.
        dir: PathBuf,
        /// The tag or digest.
        reference: Option<TagOrDigest>,
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
            return registry_reference(rest)
                .map(Source::Registry)
                .map_err(|reason| fail(&reason));
        }
        let (dir, reference) = match text.strip_prefix("oci:") {
            Some(rest) => match rest.rsplit_once('@') {
                Some((dir, digest)) if digest.contains(':') => {
                    let digest = digest
                        .parse()
                        .map_err(|e: DigestError| fail(&e.to_string()))?;
                    (dir, Some(TagOrDigest::Digest(digest)))
                }
                _ => match rest.rsplit_once(':') {
                    Some((dir, tag)) if !tag.contains('/') && !tag.is_empty() => {
                        (dir, Some(TagOrDigest::Tag(tag.to_owned())))
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
    pub fn pinned(&self, digest: &Sha256Digest) -> String {
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
                Some(TagOrDigest::Tag(tag)) => format!("oci:{}:{tag}", dir.display()),
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
    pub fn tag_or_digest(&self) -> Option<TagOrDigest> {
        match self {
            Source::Registry(reference) => match (reference.digest(), reference.tag()) {
                // `registry_reference` took only a SHA-256 digest.
                (Some(digest), _) => digest.parse().ok().map(TagOrDigest::Digest),
                (None, tag) => tag.map(|tag| TagOrDigest::Tag(tag.to_owned())),
            },
            Source::Layout { reference, .. } => reference.clone(),
        }
    }
}

/// The most bytes a repository name may take (the distribution spec's bound).
const MAX_REPOSITORY: usize = 255;
/// The most bytes a tag may take.
const MAX_TAG: usize = 128;

/// Parses `REGISTRY/REPOSITORY:TAG` or `REGISTRY/REPOSITORY@sha256:HEX` by the distribution spec's
/// grammar, the registry named explicitly (a host with a dot or a port, `localhost`, or an `[IPv6]`
/// address). Written out rather than through `oci_client::Reference`'s parser, whose one regular
/// expression (Unicode classes under a bounded repeat) takes about 40 ms to compile in each process:
/// more than the rest of an install. Accepts the subset of what that parser accepts that names its
/// registry, an ASCII tag and a `sha256` digest (the `registry_references_parse_as_oci_client_parses_them`
/// test holds them together).
fn registry_reference(text: &str) -> Result<oci_client::Reference, String> {
    let (registry, rest) = text
        .split_once('/')
        .ok_or("it names no repository after the registry")?;
    if !is_registry(registry) {
        return Err(format!(
            "`{registry}` is not a registry host (a name with a dot or a port, localhost, or [IPv6])"
        ));
    }
    let (name, tag, digest) = match rest.split_once('@') {
        Some((name, digest)) => (name, None, Some(digest)),
        None => match rest.rsplit_once(':') {
            Some((name, tag)) => (name, Some(tag), None),
            None => return Err("it names no tag or digest".into()),
        },
    };
    if name.len() > MAX_REPOSITORY || !name.split('/').all(is_path_component) {
        return Err(format!(
            "`{name}` is not a repository name (lower-case path components of letters and digits, \
             joined by `.`, `_`, `__` or dashes; {MAX_REPOSITORY} bytes at most)"
        ));
    }
    let (registry, name) = (registry.to_owned(), name.to_owned());
    match (tag, digest) {
        (Some(tag), None) if is_tag(tag) => Ok(oci_client::Reference::with_tag(
            registry,
            name,
            tag.to_owned(),
        )),
        (Some(tag), None) => Err(format!(
            "`{tag}` is not a tag (letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, \
             {MAX_TAG} bytes at most)"
        )),
        (None, Some(digest)) if digest.parse::<Sha256Digest>().is_ok() => Ok(
            oci_client::Reference::with_digest(registry, name, digest.to_owned()),
        ),
        _ => Err("its digest is not `sha256:` and 64 lower-case hex digits".into()),
    }
}

/// `host[:port]`: DNS labels of which there are several or a port follows, `localhost`, or `[IPv6]`.
fn is_registry(text: &str) -> bool {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => (host, Some(port)),
        _ => (text, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    host.split('.').all(label) && (host.contains('.') || port.is_some() || host == "localhost")
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alphanumeric = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    let run = |i: &mut usize| {
        let start = *i;
        while *i < bytes.len() && alphanumeric(bytes[*i]) {
            *i += 1;
        }
        *i > start
    };
    if !run(&mut i) {
        return false;
    }
    while i < bytes.len() {
        match bytes[i] {
            b'.' => i += 1,
            b'_' if bytes.get(i + 1) == Some(&b'_') => i += 2,
            b'_' => i += 1,
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        if !run(&mut i) {
            return false;
        }
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn is_tag(text: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    text.len() <= MAX_TAG
        && text.bytes().next().is_some_and(word)
        && text.bytes().all(|b| word(b) || b == b'.' || b == b'-')
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
        tag_or_digest: Option<&TagOrDigest>,
        limit: u64,
    ) -> Result<Option<(Bytes, Sha256Digest)>, RegistryError> {
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
    pub async fn referrers(
        &self,
        digest: &Sha256Digest,
        limit: u64,
    ) -> Result<Index, RegistryError> {
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
        let digest: Sha256Digest = format!("sha256:{}", "a".repeat(64)).parse().unwrap();
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
        assert_eq!(by_digest.tag_or_digest(), Some(TagOrDigest::Digest(digest)));
        assert_eq!(by_digest.trust_name(), "ghcr.io/acme/tool");
        assert!(
            Source::parse("oci://ghcr.io/acme/tool").is_err(),
            "no tag or digest"
        );
        assert_eq!(
            Source::parse("oci:/tmp/layout:1.0").unwrap(),
            Source::Layout {
                dir: "/tmp/layout".into(),
                reference: Some(TagOrDigest::Tag("1.0".into()))
            }
        );
        assert_eq!(
            Source::parse(&format!("oci:/tmp/layout@{digest}")).unwrap(),
            Source::Layout {
                dir: "/tmp/layout".into(),
                reference: Some(TagOrDigest::Digest(digest))
            }
        );
        assert!(Source::parse("oci:/tmp/layout@sha256:ab").is_err());
        assert_eq!(
            Source::parse("./layout").unwrap(),
            Source::Layout {
                dir: "./layout".into(),
                reference: None
            }
        );
        assert!(Source::parse("oci:").is_err());
        for refused in [
            "oci://acme/tool:1",                  // no registry host
            "oci://ghcr.io/Acme/tool:1",          // upper case in the repository
            "oci://ghcr.io/acme//tool:1",         // an empty component
            "oci://ghcr.io/acme/tool:.1",         // a tag starting with a dot
            "oci://ghcr.io/acme/tool@sha512:abc", // not sha256
            "oci://ghcr.io:port/acme/tool:1",
            "oci://ghcr.io/acme/tool:1/x",
        ] {
            assert!(Source::parse(refused).is_err(), "{refused}");
        }
        for accepted in [
            "oci://localhost:5000/a/b__c-d.e:v1.0-rc_1",
            "oci://localhost/tool:1",
            "oci://[::1]:5000/tool:1",
            "oci://127.0.0.1:5000/tool:1",
        ] {
            assert!(Source::parse(accepted).is_ok(), "{accepted}");
        }
    }

    proptest::proptest! {
        /// What this parser accepts, oci-client's parser accepts as the same reference; what that
        /// parser accepts with the registry named, an ASCII tag or a sha256 digest, so does this one.
        #[test]
        fn registry_references_parse_as_oci_client_parses_them(
            registry in "(localhost|[a-z0-9-]{1,4}(\\.[a-zA-Z0-9-]{1,4}){0,2})(:[0-9]{0,3})?",
            path in "[a-z0-9._/-]{1,12}",
            end in "(:[A-Za-z0-9_.-]{0,5})|(@sha256:[0-9a-f]{64})|(@sha256:[0-9a-fA-F]{1,3})|",
        ) {
            let text = format!("{registry}/{path}{end}");
            let ours = registry_reference(&text);
            let theirs: Result<oci_client::Reference, _> = text.parse();
            if let Ok(reference) = &ours {
                let theirs = theirs.as_ref().expect("oci-client accepts what this parser accepts");
                proptest::prop_assert_eq!(reference.registry(), theirs.registry());
                proptest::prop_assert_eq!(reference.repository(), theirs.repository());
                proptest::prop_assert_eq!(reference.tag(), theirs.tag());
                proptest::prop_assert_eq!(reference.digest(), theirs.digest());
            } else if let Ok(theirs) = &theirs {
                let tagged = end.strip_prefix(':').is_some_and(|t| theirs.tag() == Some(t));
                let by_digest = end.strip_prefix("@sha256:").is_some_and(|hex| hex.len() == 64);
                proptest::prop_assert!(
                    !(theirs.registry() == registry && (tagged || by_digest)),
                    "oci-client accepts `{}` and this parser refuses it: {:?}", text, ours
                );
            }
        }
    }
}
