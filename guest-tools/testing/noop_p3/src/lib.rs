//! `noop_p3`: the WASI 0.3 twin of `noop` (world `async-tool`, `call` an `async func`): declares no
//! paths and answers `ok`. The benchmarks set it beside `noop` to measure the fixed cost of a call in
//! each generation. Never bundled.

#![allow(unsafe_code)] // what `wit_bindgen::generate!` expands to

mod bindings {
    #![allow(missing_docs)]
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "async-tool",
    });
}

use bindings::turngate::tool::types::{Descriptor, ToolError};

struct NoopP3;

impl bindings::Guest for NoopP3 {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {},
            "additionalProperties": false
        });
        Descriptor {
            name: "noop_p3".into(),
            description: "Does nothing and answers ok.".into(),
            input_schema: schema.to_string(),
            paths: Vec::new(),
        }
    }

    async fn call(_input: String) -> Result<String, ToolError> {
        Ok("ok".into())
    }
}

bindings::export!(NoopP3 with_types_in bindings);
