//! The bundled tools' components, built from `guest-tools/` by `build.rs` and embedded in the library
//! with their descriptors, so that no bundled tool is compiled before it is called.

/// One bundled component.
pub(crate) struct BundledComponent {
    /// The SHA-256 of `bytes`, hex.
    pub(crate) sha256: &'static str,
    /// The component.
    pub(crate) bytes: &'static [u8],
    /// What it says about itself, as the sandbox's raw descriptor in JSON, known at build time
    /// (`None`: not in `guest-tools/descriptors.json`, so it is described when loaded).
    pub(crate) descriptor: Option<&'static str>,
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
