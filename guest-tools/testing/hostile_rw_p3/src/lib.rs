//! `hostile_rw_p3`: the WASI 0.3 twin of `hostile_rw`, for turngate's containment tests, never bundled.
//!
//! It declares its `path` field with `write` access and makes the attacks of
//! `hostile_attacks_p3.rs` through `wasi:filesystem@0.3.0`.

/// The tool's name.
const NAME: &str = "hostile_rw_p3";
/// Whether its `path` field is declared `write`.
const WRITE: bool = true;

#[path = "../../hostile_attacks_p3.rs"]
mod attacks;
