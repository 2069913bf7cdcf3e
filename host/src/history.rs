//! Results in the provider's own protocol: the assistant turn unchanged, then exactly one result per call.
//!
//! * Anthropic: a `user` message whose content starts with one `tool_result` block per `tool_use`
//!   (`tool_use_id`, `content`, `is_error`).
//! * OpenAI Chat: one `{"role":"tool","tool_call_id",...}` message per call (errors go in the content).
//! * OpenAI Responses: the output items, then one `function_call_output` item per `call_id`.
//! * Gemini: a `user` turn with one `functionResponse` per `functionCall`, same order, echoing `id` when the
//!   call had one (Gemini matches results by order; an absent id is the protocol, not a gap).
//!
//! A call without an ID in a protocol that needs one gets no result: nothing is invented. A turn that did
//! not complete has no history at all; it is to be discarded or regenerated, never half-answered.

use serde_json::{Value, json};

use crate::turn::{Provider, Turn};

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
            history.extend(results.iter().filter_map(|r| with_id(turn, r)).map(|(id, r)| {
                json!({"type": "function_call_output", "call_id": id, "output": r.content})
            }));
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

/// The call ID a result answers, if the call has one.
fn with_id<'a>(turn: &'a Turn, result: &'a ToolResult) -> Option<(&'a str, &'a ToolResult)> {
    let id = turn.calls.get(result.call)?.id.as_deref()?;
    Some((id, result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::{CallKind, Ending, RawCall, TurnStatus};

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
