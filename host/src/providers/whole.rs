//! Whole JSON response bodies: a non-streamed answer turned into the events its streamed equivalent
//! carries, so that it goes through the same provider fold (same gate, same ending rules, same history).
//!
//! [`super::TurnDecoder`] tells a whole body from an SSE stream by its first non-whitespace byte (`{` or
//! `[`; an SSE stream starts with a field name, a comment or a blank line), parses it with
//! [`crate::json::parse_strict`] (no duplicate keys, no trailing data) and hands the events below to the
//! fold:
//! * Anthropic `{"type":"message",...}`: `message_start` carrying the whole message (its content blocks are
//!   complete blocks, as a resumed message's are), then `message_stop`. `{"type":"error",...}` is the
//!   `error` event.
//! * OpenAI Chat `{"object":"chat.completion","choices":[{"message",...}],...}`: one chunk whose choices
//!   carry the `message` as their `delta` (tool calls numbered by position when they have no `index`), the
//!   other fields (`usage`) kept, then `[DONE]`. A body with an `error` is the error chunk.
//! * OpenAI Responses `{"object":"response",...}`: per output item `response.output_item.added`, its
//!   `output_text` parts as `response.output_text.delta`, `response.output_item.done`; then the terminal
//!   event named by `status` (`completed`, `incomplete`, `failed`; any other status is
//!   `response.completed`, whose status check makes the turn Incomplete). `{"error":...}` is the `error`
//!   event.
//! * Gemini `generateContent` (one object) is one chunk; `streamGenerateContent` without `alt=sse` (a JSON
//!   array of response objects) is one chunk per element, in order.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::turn::Provider;

/// One event for the fold: its `event:` name (if any) and its data.
pub(crate) type Event = (Option<String>, String);

/// Whether a body whose first non-whitespace byte is `first` is a whole JSON body.
pub(crate) fn starts_json(first: u8) -> bool {
    matches!(first, b'{' | b'[')
}

/// Whitespace that may precede a whole JSON body (RFC 8259 `ws`).
pub(crate) fn is_json_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// The events equivalent to the whole body `text` (already parsed strictly into `value`), or why the body
/// is not a response of `provider`.
pub(crate) fn events(provider: Provider, text: &str, value: &Value) -> Result<Vec<Event>, String> {
    let object = || {
        value.as_object().ok_or_else(|| {
            format!("a whole {provider} response body must be one JSON object, not an array")
        })
    };
    match provider {
        Provider::Anthropic => anthropic(text, object()?),
        Provider::OpenAiChat => Ok(chat(text, object()?)),
        Provider::OpenAiResponses => responses(object()?),
        Provider::Gemini => gemini(text, value),
    }
}

fn anthropic(text: &str, body: &Map<String, Value>) -> Result<Vec<Event>, String> {
    match body.get("type").and_then(Value::as_str) {
        Some("message") => Ok(vec![
            (
                Some("message_start".into()),
                format!("{{\"type\":\"message_start\",\"message\":{text}}}"),
            ),
            (
                Some("message_stop".into()),
                r#"{"type":"message_stop"}"#.into(),
            ),
        ]),
        Some("error") => Ok(vec![(Some("error".into()), text.to_owned())]),
        other => Err(format!(
            "a whole Anthropic body must have type message or error, not {}",
            super::clip(other.unwrap_or("(none)"))
        )),
    }
}

fn chat(text: &str, body: &Map<String, Value>) -> Vec<Event> {
    if body.get("error").is_some_and(|e| !e.is_null()) {
        return vec![(None, text.to_owned())];
    }
    let mut chunk = body.clone();
    if let Some(Value::Array(choices)) = chunk.get_mut("choices") {
        for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
            let Some(mut message) = choice.remove("message") else {
                continue;
            };
            if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                for (position, call) in calls.iter_mut().enumerate() {
                    if let Some(call) = call.as_object_mut() {
                        call.entry("index").or_insert(json!(position));
                    }
                }
            }
            choice.insert("delta".into(), message);
        }
    }
    vec![
        (None, Value::Object(chunk).to_string()),
        (None, "[DONE]".into()),
    ]
}

fn responses(body: &Map<String, Value>) -> Result<Vec<Event>, String> {
    let is_response = body.get("object").and_then(Value::as_str) == Some("response")
        || body.contains_key("output")
        || body.contains_key("status");
    if !is_response {
        return match body.get("error").filter(|e| !e.is_null()) {
            Some(error) => Ok(vec![(
                Some("error".into()),
                json!({"type": "error", "error": error}).to_string(),
            )]),
            None => Err("a whole Responses body must be a response object or an error".into()),
        };
    }
    let mut events = Vec::new();
    let typed = |kind: &str, mut fields: Map<String, Value>| {
        fields.insert("type".into(), json!(kind));
        (Some(kind.to_owned()), Value::Object(fields).to_string())
    };
    if let Some(Value::Array(output)) = body.get("output") {
        for (index, item) in output.iter().enumerate() {
            let mut fields = Map::new();
            fields.insert("output_index".into(), json!(index));
            fields.insert("item".into(), item.clone());
            events.push(typed("response.output_item.added", fields.clone()));
            let parts = item.get("content").and_then(Value::as_array);
            for (content_index, part) in parts.into_iter().flatten().enumerate() {
                if part.get("type").and_then(Value::as_str) != Some("output_text") {
                    continue;
                }
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    let mut delta = Map::new();
                    delta.insert("output_index".into(), json!(index));
                    delta.insert("content_index".into(), json!(content_index));
                    delta.insert("delta".into(), json!(text));
                    events.push(typed("response.output_text.delta", delta));
                }
            }
            events.push(typed("response.output_item.done", fields));
        }
    }
    let terminal = match body.get("status").and_then(Value::as_str) {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    let mut fields = Map::new();
    fields.insert("response".into(), Value::Object(body.clone()));
    events.push(typed(terminal, fields));
    Ok(events)
}

fn gemini(text: &str, value: &Value) -> Result<Vec<Event>, String> {
    match value {
        Value::Object(_) => Ok(vec![(None, text.to_owned())]),
        Value::Array(_) => {
            let elements: Vec<&RawValue> = serde_json::from_str(text)
                .map_err(|e| format!("the Gemini response array does not split: {e}"))?;
            Ok(elements
                .into_iter()
                .map(|raw| (None, raw.get().to_owned()))
                .collect())
        }
        _ => Err("a whole Gemini body must be a response object or an array of them".into()),
    }
}
