//! A call's outcome as the `CallToolResult` the client gets, shaped for the model that reads it.
//!
//! `structuredContent` is what the call did, output first: `{"output": ..., "paths": [{"path",
//! "change"}], "status": "ok"}`, or `{"error": {"stage", "kind", "message"}, "paths": [], "status":
//! "error"}` (named so that the output comes first in the sorted order the keys are written in), with
//! `"requests"` (method, masked URL, address, status, bytes, approval) when the tool used the network. The
//! text block is that same object serialized, as the MCP specification asks of a tool that returns
//! structured content, so a client that shows the model either one shows the same thing. What only an operator needs (digests,
//! durations, the tool's stdout and stderr) stays in the audit log and the journal. `isError` is true
//! for every refusal and failure, so a client never mistakes a refused call for a result.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::outcome::CallOutcome;

/// The result of one call.
pub fn call_result(outcome: &CallOutcome) -> CallToolResult {
    let structured = structured(outcome);
    let text = vec![ContentBlock::text(structured.to_string())];
    let mut result = match &outcome.result {
        Ok(_) => CallToolResult::success(text),
        Err(_) => CallToolResult::error(text),
    };
    result.structured_content = Some(structured);
    result
}

/// The call's `structuredContent`.
fn structured(outcome: &CallOutcome) -> Value {
    let paths: Vec<Value> = outcome
        .changes
        .iter()
        .map(|change| json!({"path": change.path, "change": change.kind}))
        .collect();
    let mut structured = match &outcome.result {
        Ok(output) => json!({"output": output, "paths": paths, "status": "ok"}),
        Err(error) => json!({
            "error": {"stage": error.stage(), "kind": error.kind(), "message": error.to_string()},
            "paths": paths,
            "status": "error",
        }),
    };
    if !outcome.requests.is_empty() {
        structured["requests"] = json!(outcome.requests);
    }
    structured
}
