//! The bundled tools' components, built from `guest-tools/` by `build.rs` and embedded in the library.

/// One bundled component.
pub(crate) struct BundledComponent {
    /// The SHA-256 of `bytes`, hex.
    pub(crate) sha256: &'static str,
    /// The component.
    pub(crate) bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
