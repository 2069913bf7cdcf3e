//! `bad_schema`: a test guest whose input schema is not valid JSON Schema (`"type": "nonsense"`), so
//! the host must refuse it at load. Never bundled.

use turngate_guest::{Descriptor, Guest, ToolError, describe};

struct BadSchema;

impl Guest for BadSchema {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "path": { "type": "nonsense" } },
            "additionalProperties": false
        });
        describe("bad_schema", "Declares an invalid schema.", &schema, &[])
    }

    fn call(_input: String) -> Result<String, ToolError> {
        Err(ToolError::Failed("never called".into()))
    }
}

turngate_guest::export!(BadSchema);
