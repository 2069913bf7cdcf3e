//! `hostile_ro_p3`: the WASI 0.3 twin of `hostile_ro`, for turngate's containment tests, never bundled.
//!
//! It declares its `path` field with `read` access and makes the attacks of
//! `hostile_attacks_p3.rs` through `wasi:filesystem@0.3.0`.

/// The tool's name.
const NAME: &str = "hostile_ro_p3";
/// Whether its `path` field is declared `write`.
const WRITE: bool = false;

#[path = "../../hostile_attacks_p3.rs"]
mod attacks;
