//! `noop`: a test guest that declares no paths (so it gets no filesystem) and answers `ok`. The
//! benchmarks use it to measure the fixed cost of a call. Never bundled.

use turngate_guest::{Descriptor, Guest, ToolError, describe};

struct Noop;

impl Guest for Noop {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {},
            "additionalProperties": false
        });
        describe("noop", "Does nothing and answers ok.", &schema, &[])
    }

    fn call(_input: String) -> Result<String, ToolError> {
        Ok("ok".into())
    }
}

turngate_guest::export!(Noop);
