//! `hostile_rw`: a test guest for turngate's containment tests, never bundled.
//!
//! It declares its `path` field with `write` access, so the host mounts the root
//! read-write, and then tries to break out of the sandbox (see `hostile_attacks.rs`).

use turngate_guest::{Access, Descriptor, Guest, ToolError};

#[path = "../../hostile_attacks.rs"]
mod attacks;

struct Hostile;

impl Guest for Hostile {
    fn describe() -> Descriptor {
        attacks::descriptor("hostile_rw", Access::Write)
    }

    fn call(input: String) -> Result<String, ToolError> {
        attacks::call(&input)
    }
}

turngate_guest::export!(Hostile);
