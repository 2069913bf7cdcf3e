//! Results in the provider's own protocol: the assistant turn unchanged, then exactly one result per call.
//!
//! * Anthropic: a `user` message whose content starts with one `tool_result` block per `tool_use`
//!   (`tool_use_id`, `content`, `is_error`).
//! * OpenAI Chat: one `{"role":"tool","tool_call_id",...}` message per call (errors go in the content).
//! * OpenAI Responses: the output items, then one answer per call, in the shape its item type asks for (see
//!   [`CallKind`]): `function_call_output` for a function call; for the items this host does not run, the
//!   answer saying so (`local_shell_call_output`, `shell_call_output` with the reason on stderr and exit code
//!   1, `apply_patch_call_output` with `status: "failed"`, `custom_tool_call_output`, `tool_search_output`
//!   with no tools and `status: "incomplete"`, `computer_call_output` with a blank 1x1 screenshot since its
//!   shape holds nothing else, `mcp_approval_response` with `approve: false` and the reason). An answer
//!   repeats the call's `caller` where its shape has one (function, shell, patch and custom tool outputs), so
//!   a program's call is answered to the program.
//! * Gemini: a `user` turn with one `functionResponse` per `functionCall`, same order, echoing `id` when the
//!   call had one (Gemini matches results by order; an absent id is the protocol, not a gap).
//!
//! A call without an ID in a protocol that needs one gets no result: nothing is invented. A turn that did
//! not complete has no history at all; it is to be discarded or regenerated, never half-answered.

use serde_json::{Value, json};

use crate::turn::{CallKind, Provider, Turn};

/// The screenshot a `computer_call_output` carries for a computer call this host did not run: a transparent
/// 1x1 PNG (the shape requires an image; the one OpenAI's Agents SDK sends for a rejected computer call).
const BLANK_SCREENSHOT: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

/// The result of one call, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The call's position in [`Turn::calls`].
    pub call: usize,
    /// The output, or the error message.
    pub content: String,
    /// Whether `content` is an error.
    pub is_error: bool,
}

/// Renders the history entries for a turn and its results: empty unless the turn completed.
///
/// `results` must hold one entry per call of the turn; calls without a result (or without the ID their
/// protocol needs) are left unanswered rather than given a made-up one.
pub fn render(turn: &Turn, results: &[ToolResult]) -> Vec<Value> {
    if !turn.is_completed() {
        return Vec::new();
    }
    match turn.provider {
        Provider::Anthropic => {
            let mut history = vec![turn.assistant.clone()];
            let blocks: Vec<Value> = results
                .iter()
                .filter_map(|r| with_id(turn, r))
                .map(|(id, r)| {
                    json!({"type": "tool_result", "tool_use_id": id, "content": r.content, "is_error": r.is_error})
                })
                .collect();
            if !blocks.is_empty() {
                history.push(json!({"role": "user", "content": blocks}));
            }
            history
        }
        Provider::OpenAiChat => {
            let mut history = vec![turn.assistant.clone()];
            history.extend(
                results.iter().filter_map(|r| with_id(turn, r)).map(
                    |(id, r)| json!({"role": "tool", "tool_call_id": id, "content": r.content}),
                ),
            );
            history
        }
        Provider::OpenAiResponses => {
            let mut history = match &turn.assistant {
                Value::Array(items) => items.clone(),
                other => vec![other.clone()],
            };
            history.extend(
                results
                    .iter()
                    .filter_map(|r| with_id(turn, r))
                    .map(|(id, r)| responses_answer(turn, id, r)),
            );
            history
        }
        Provider::Gemini => {
            let mut history = vec![turn.assistant.clone()];
            let parts: Vec<Value> = results
                .iter()
                .filter_map(|r| turn.calls.get(r.call).map(|call| (call, r)))
                .map(|(call, r)| {
                    let response = if r.is_error {
                        json!({"error": r.content})
                    } else {
                        json!({"output": r.content})
                    };
                    let mut function_response = json!({"name": call.name, "response": response});
                    if let Some(id) = &call.id {
                        function_response["id"] = json!(id);
                    }
                    json!({"functionResponse": function_response})
                })
                .collect();
            if !parts.is_empty() {
                history.push(json!({"role": "user", "parts": parts}));
            }
            history
        }
    }
}

/// The Responses input item that answers one call. Only function calls run here; an item of another kind
/// gets the answer saying it did not run (`result` holds the reason), in that item type's own shape.
fn responses_answer(turn: &Turn, id: &str, result: &ToolResult) -> Value {
    let kind = turn
        .calls
        .get(result.call)
        .map_or(CallKind::Function, |c| c.kind);
    let reason = &result.content;
    let mut answer = match kind {
        CallKind::Function => {
            json!({"type": "function_call_output", "call_id": id, "output": result.content})
        }
        CallKind::LocalShell => {
            json!({"type": "local_shell_call_output", "call_id": id, "output": reason})
        }
        CallKind::Shell => json!({"type": "shell_call_output", "call_id": id, "output": [
            {"stdout": "", "stderr": reason, "outcome": {"type": "exit", "exit_code": 1}}
        ]}),
        CallKind::ApplyPatch => json!({
            "type": "apply_patch_call_output", "call_id": id, "status": "failed", "output": reason
        }),
        CallKind::CustomTool => {
            json!({"type": "custom_tool_call_output", "call_id": id, "output": reason})
        }
        CallKind::ToolSearch => json!({
            "type": "tool_search_output", "call_id": id, "execution": "client",
            "status": "incomplete", "tools": []
        }),
        CallKind::Computer => json!({
            "type": "computer_call_output", "call_id": id,
            "output": {"type": "computer_screenshot", "image_url": BLANK_SCREENSHOT}
        }),
        CallKind::McpApproval => json!({
            "type": "mcp_approval_response", "approval_request_id": id, "approve": false,
            "reason": reason
        }),
    };
    let caller = turn
        .calls
        .get(result.call)
        .and_then(|c| turn.assistant.get(c.index))
        .and_then(|item| item.get("caller"))
        .filter(|c| !c.is_null());
    if let Some(caller) = caller
        && matches!(
            kind,
            CallKind::Function | CallKind::Shell | CallKind::ApplyPatch | CallKind::CustomTool
        )
    {
        answer["caller"] = caller.clone();
    }
    answer
}

/// The call ID a result answers, if the call has one.
fn with_id<'a>(turn: &'a Turn, result: &'a ToolResult) -> Option<(&'a str, &'a ToolResult)> {
    let id = turn.calls.get(result.call)?.id.as_deref()?;
    Some((id, result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::{Ending, RawCall, TurnStatus};

    fn turn(
        provider: Provider,
        assistant: Value,
        ids: &[Option<&str>],
        status: TurnStatus,
    ) -> Turn {
        Turn {
            provider,
            assistant,
            calls: ids
                .iter()
                .enumerate()
                .map(|(index, id)| RawCall {
                    kind: CallKind::Function,
                    id: id.map(str::to_owned),
                    name: "write_file".into(),
                    raw_input: "{}".into(),
                    index,
                })
                .collect(),
            ending: Ending {
                status,
                stop_reason: None,
                detail: String::new(),
            },
            text: String::new(),
        }
    }

    fn results(n: usize) -> Vec<ToolResult> {
        (0..n)
            .map(|call| ToolResult {
                call,
                content: format!("r{call}"),
                is_error: call == 1,
            })
            .collect()
    }

    #[test]
    fn anthropic_results_lead_the_next_user_message() {
        let t = turn(
            Provider::Anthropic,
            json!({"role": "assistant", "content": []}),
            &[Some("u1"), Some("u2")],
            TurnStatus::Completed,
        );
        let h = render(&t, &results(2));
        assert_eq!(h.len(), 2);
        assert_eq!(h[0], t.assistant);
        assert_eq!(
            h[1]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "u1", "content": "r0", "is_error": false})
        );
        assert_eq!(h[1]["content"][1]["is_error"], json!(true));
    }

    #[test]
    fn openai_chat_gets_one_tool_message_per_id_and_none_invented() {
        let t = turn(
            Provider::OpenAiChat,
            json!({"role": "assistant"}),
            &[Some("c1"), None],
            TurnStatus::Completed,
        );
        let h = render(&t, &results(2));
        assert_eq!(
            h,
            vec![
                t.assistant.clone(),
                json!({"role": "tool", "tool_call_id": "c1", "content": "r0"})
            ]
        );
    }

    #[test]
    fn responses_append_function_call_outputs_to_the_items() {
        let items = json!([{"type": "function_call", "call_id": "a"}]);
        let t = turn(
            Provider::OpenAiResponses,
            items,
            &[Some("a")],
            TurnStatus::Completed,
        );
        let h = render(&t, &results(1));
        assert_eq!(
            h[1],
            json!({"type": "function_call_output", "call_id": "a", "output": "r0"})
        );
    }

    #[test]
    fn responses_answer_each_item_kind_in_its_own_shape_and_echo_the_caller() {
        let program = json!({"type": "program", "caller_id": "prog_1"});
        let items = json!([
            {"type": "function_call", "call_id": "f", "caller": program},
            {"type": "local_shell_call", "call_id": "l"},
            {"type": "shell_call", "call_id": "s", "caller": program},
            {"type": "apply_patch_call", "call_id": "p"},
            {"type": "custom_tool_call", "call_id": "c"},
            {"type": "tool_search_call", "call_id": "t", "execution": "client"},
            {"type": "computer_call", "call_id": "k"},
            {"type": "mcp_approval_request", "id": "m"},
        ]);
        let kinds = [
            CallKind::Function,
            CallKind::LocalShell,
            CallKind::Shell,
            CallKind::ApplyPatch,
            CallKind::CustomTool,
            CallKind::ToolSearch,
            CallKind::Computer,
            CallKind::McpApproval,
        ];
        let ids = ["f", "l", "s", "p", "c", "t", "k", "m"];
        let mut t = turn(
            Provider::OpenAiResponses,
            items,
            &ids.map(Some),
            TurnStatus::Completed,
        );
        for (call, kind) in t.calls.iter_mut().zip(kinds) {
            call.kind = kind;
        }
        let results: Vec<ToolResult> = (0..ids.len())
            .map(|call| ToolResult {
                call,
                content: "no".into(),
                is_error: true,
            })
            .collect();
        let h = render(&t, &results);
        assert_eq!(h.len(), 16, "the items, then one answer each");
        let answers = &h[8..];
        assert_eq!(
            answers[0],
            json!({"type": "function_call_output", "call_id": "f", "output": "no", "caller": program})
        );
        assert_eq!(
            answers[1],
            json!({"type": "local_shell_call_output", "call_id": "l", "output": "no"})
        );
        assert_eq!(
            answers[2],
            json!({"type": "shell_call_output", "call_id": "s", "caller": program, "output": [
                {"stdout": "", "stderr": "no", "outcome": {"type": "exit", "exit_code": 1}}
            ]})
        );
        assert_eq!(
            answers[3],
            json!({"type": "apply_patch_call_output", "call_id": "p", "status": "failed", "output": "no"})
        );
        assert_eq!(
            answers[4],
            json!({"type": "custom_tool_call_output", "call_id": "c", "output": "no"})
        );
        assert_eq!(
            answers[5],
            json!({"type": "tool_search_output", "call_id": "t", "execution": "client", "status": "incomplete", "tools": []})
        );
        assert_eq!(answers[6]["type"], "computer_call_output");
        assert_eq!(answers[6]["call_id"], "k");
        assert_eq!(answers[6]["output"]["type"], "computer_screenshot");
        assert_eq!(
            answers[7],
            json!({"type": "mcp_approval_response", "approval_request_id": "m", "approve": false, "reason": "no"})
        );
    }

    #[test]
    fn gemini_answers_every_call_in_order_echoing_ids() {
        let t = turn(
            Provider::Gemini,
            json!({"role": "model", "parts": []}),
            &[None, Some("g2")],
            TurnStatus::Completed,
        );
        let h = render(&t, &results(2));
        let parts = &h[1]["parts"];
        assert_eq!(
            parts[0],
            json!({"functionResponse": {"name": "write_file", "response": {"output": "r0"}}})
        );
        assert_eq!(
            parts[1],
            json!({"functionResponse": {"name": "write_file", "response": {"error": "r1"}, "id": "g2"}})
        );
    }

    #[test]
    fn a_turn_that_did_not_complete_has_no_history() {
        for status in [
            TurnStatus::Truncated,
            TurnStatus::Refused,
            TurnStatus::Incomplete,
            TurnStatus::Malformed,
        ] {
            let t = turn(Provider::Anthropic, json!({}), &[Some("u1")], status);
            assert!(render(&t, &results(1)).is_empty());
        }
    }
}
