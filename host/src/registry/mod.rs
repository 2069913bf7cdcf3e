//! Tools from registries: a component pulled by digest from an OCI registry (or an OCI image layout
//! directory), its origin proven by a signature the user trusts, and the grants it asks for shown
//! before anything is granted.
//!
//! [`install::fetch`] does everything that can refuse a tool, in this order, and writes nothing but a
//! temporary file in the tools directory (removed on any refusal):
//!
//! 1. the manifest, by the tag or digest of the source ([`source`]), read to its bound and held to the
//!    digest it was asked by and the registry's own ([`distribution`], [`layout`]);
//! 2. the manifest is a Wasm component artifact ([`artifact`]): exactly one `application/wasm` layer,
//!    its requested grants valid ([`grants`]);
//! 3. a signature over the manifest's digest by a signer the policy's `[trust]` accepts for the source
//!    ([`trust`]): a cosign key signature ([`cosign`]) or a Sigstore bundle ([`bundle`]); without one
//!    the tool is refused unless the user said `--allow-unsigned`, and the lock then says it is;
//! 4. the component, streamed to the temporary file, hashed as it comes and held to the layer's digest
//!    and size, and its header must be a component's (a core module is refused). No code of it has
//!    been compiled up to here.
//!
//! [`install::install`] then moves it into place under its digest, keeps the manifest and signature
//! beside it for `--locked` to check again ([`provenance`]), and records the lock entry; the grants go
//! into the policy file only when the user accepts them ([`policy_file`]).

pub mod artifact;
pub mod bundle;
pub mod cosign;
pub mod distribution;
pub mod grants;
pub mod install;
pub mod layout;
pub mod policy_file;
pub mod provenance;
pub mod source;
pub mod trust;

use crate::digest::{DigestError, Sha256Digest};

/// Why a registry, a layout or what they hold was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Plain HTTP to a registry that is not on loopback.
    #[error("plain http is only for a loopback registry, and `{0}` is not one")]
    PlainHttp(String),
    /// The HTTP client could not be made.
    #[error("the HTTP client could not be made")]
    Http(#[source] reqwest::Error),
    /// A request failed (connection, TLS, a stall past the limit, a body cut).
    #[error("{url}: {}", if .source.is_timeout() {
        "the registry sent nothing for longer than the stall limit"
    } else {
        "the request failed"
    })]
    Request {
        /// What was requested.
        url: String,
        /// What went wrong.
        #[source]
        source: reqwest::Error,
    },
    /// The registry answered with an error status.
    #[error("{url}: the registry answered {status}")]
    Status {
        /// What was requested.
        url: String,
        /// The status.
        status: u16,
    },
    /// The registry's token service refused, or could not be reached.
    #[error("authenticating to the registry")]
    Auth(#[source] oci_client::errors::OciDistributionError),
    /// The credentials hold what an HTTP header cannot carry.
    #[error("the registry credentials cannot be sent in an Authorization header")]
    Credentials(#[source] http::header::InvalidHeaderValue),
    /// Something was larger than allowed.
    #[error("{url} is larger than the {limit} bytes allowed")]
    TooLarge {
        /// What it was.
        url: String,
        /// The bound.
        limit: u64,
    },
    /// A manifest's bytes are not the digest they were asked by (or the registry said).
    #[error("the manifest received has digest {received}, not {asked}")]
    ManifestDigest {
        /// The digest expected, as it was given.
        asked: String,
        /// The digest of what came.
        received: Sha256Digest,
    },
    /// A blob's bytes are not its descriptor's digest.
    #[error("the blob received has digest {received}, not its descriptor's {expected}")]
    BlobDigest {
        /// The descriptor's digest.
        expected: Sha256Digest,
        /// The digest of what came.
        received: Sha256Digest,
    },
    /// A digest is not a SHA-256 one.
    #[error(transparent)]
    Digest(#[from] DigestError),
    /// A blob's size is not its descriptor's.
    #[error("the blob {digest} is {received} bytes or more, not its descriptor's {expected}")]
    BlobSize {
        /// The blob.
        digest: String,
        /// The descriptor's size.
        expected: u64,
        /// What came (so far).
        received: u64,
    },
    /// A descriptor or index is malformed.
    #[error("{0}")]
    Descriptor(String),
    /// A manifest or index received is not the JSON it must be.
    #[error("{what}")]
    DescriptorJson {
        /// What it was ("a referrers index", "the signature manifest").
        what: &'static str,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The layout directory cannot be used.
    #[error("layout {0}")]
    Layout(String),
    /// A file of the layout could not be opened, read or written.
    #[error("layout {}", .path.display())]
    LayoutIo {
        /// The file (or the layout directory).
        path: std::path::PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// A file of the layout is not the JSON it must be.
    #[error("layout {file}")]
    LayoutJson {
        /// The file (`oci-layout`, `index.json`).
        file: &'static str,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// Pushing failed.
    #[error("pushing to the registry")]
    Push(#[source] oci_client::errors::OciDistributionError),
    /// Writing what was received locally failed.
    #[error("writing what the registry sent")]
    Io(#[source] std::io::Error),
}

impl RegistryError {
    /// A failed request to `url`, keeping reqwest's error as its cause.
    pub(crate) fn request(url: &str) -> impl FnOnce(reqwest::Error) -> RegistryError {
        let url = url.to_owned();
        move |source| RegistryError::Request { url, source }
    }
}
