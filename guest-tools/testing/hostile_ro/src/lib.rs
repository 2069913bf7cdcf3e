//! `hostile_ro`: a test guest for turngate's containment tests, never bundled.
//!
//! It declares its `path` field with `read` access, so the host mounts the root
//! read-only, and then tries to break out of the sandbox (see `hostile_attacks.rs`).

use turngate_guest::{Access, Descriptor, Guest, ToolError};

#[path = "../../hostile_attacks.rs"]
mod attacks;

struct Hostile;

impl Guest for Hostile {
    fn describe() -> Descriptor {
        attacks::descriptor("hostile_ro", Access::Read)
    }

    fn call(input: String) -> Result<String, ToolError> {
        attacks::call(&input)
    }
}

turngate_guest::export!(Hostile);
