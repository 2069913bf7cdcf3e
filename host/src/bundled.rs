//! The bundled tools' components, built from `guest-tools/` by `build.rs` and embedded in the library.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
