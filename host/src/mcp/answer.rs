//! A call's outcome as the `CallToolResult` the client gets.
//!
//! The text content is what a model reads: the tool's output, or the error message. The structured
//! content is the outcome exactly as `turngate call` prints it (`status`, `output` or
//! `error: {stage, kind, message}`, `changes`, `stdout`, `stderr`, `duration_ms`), and `isError` is true
//! for every refusal and failure, so a client never mistakes a refused call for a result.

use rmcp::model::{CallToolResult, ContentBlock};

use crate::outcome::CallOutcome;

/// The result of one call.
pub fn call_result(outcome: &CallOutcome) -> CallToolResult {
    let mut result = match &outcome.result {
        Ok(output) => CallToolResult::success(vec![ContentBlock::text(output.clone())]),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]),
    };
    result.structured_content = Some(outcome.to_json());
    result
}
