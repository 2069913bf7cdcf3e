//! Streamed turns in each provider's SSE protocol, shaped like the recorded ones
//! (`tests/fixtures/seed/generate.py`): text, then tool calls with their input in fragments, then an
//! ending that is normal, truncated, refused, cut by an overload error event, or broken.

use serde_json::{Value, json};
use turngate::Provider;

/// One tool call of a turn.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// A call of `name` with `input`.
pub fn call(id: &str, name: &str, input: Value) -> Call {
    Call {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
    }
}

/// A `write_file` call.
pub fn write(id: &str, path: &str, content: &str) -> Call {
    call(id, "write_file", json!({"path": path, "content": content}))
}

/// How a turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The provider's normal ending (tool-call ending when there are calls).
    Complete,
    /// Cut by the output limit (`max_tokens`, `length`, `max_output_tokens`, `MAX_TOKENS`).
    Truncated,
    /// A refusal (Gemini: a `SAFETY` stop).
    Refused,
    /// An overload error event after the calls streamed, on the HTTP 200 stream.
    Overloaded,
    /// An event whose data is not JSON, after the first event.
    Malformed,
}

/// A whole turn.
pub fn turn(provider: Provider, text: &str, calls: &[Call], end: End) -> String {
    match provider {
        Provider::Anthropic => anthropic(text, calls, end),
        Provider::OpenAiChat => chat(text, calls, end),
        Provider::OpenAiResponses => responses(text, calls, end),
        Provider::Gemini => gemini(text, calls, end),
    }
}

/// A complete turn with these calls.
pub fn tools(provider: Provider, calls: &[Call]) -> String {
    turn(provider, "Working on it.", calls, End::Complete)
}

/// A complete turn without calls.
pub fn done(provider: Provider) -> String {
    turn(provider, "All done.", &[], End::Complete)
}

fn fragments(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = (chars.len() / 3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn sse(events: &[(Option<&str>, String)], sep: &str) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}{sep}"));
        }
        out.push_str(&format!("data: {data}{sep}{sep}"));
    }
    out
}

fn anthropic(text: &str, calls: &[Call], end: End) -> String {
    let mut ev: Vec<(Option<&str>, String)> = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}).to_string(),
    )];
    if end == End::Malformed {
        ev.push((Some("content_block_delta"), "{broken".into()));
    }
    ev.push((Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}).to_string()));
    ev.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}).to_string()));
    ev.push((
        Some("content_block_stop"),
        json!({"type": "content_block_stop", "index": 0}).to_string(),
    ));
    for (i, c) in calls.iter().enumerate() {
        let index = i + 1;
        ev.push((Some("content_block_start"), json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}).to_string()));
        for f in std::iter::once(String::new()).chain(fragments(&c.input.to_string())) {
            ev.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": f}}).to_string()));
        }
        ev.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": index}).to_string(),
        ));
    }
    let stop = match end {
        End::Overloaded => {
            ev.push((Some("error"), json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string()));
            return sse(&ev, "\n");
        }
        End::Truncated => "max_tokens",
        End::Refused => "refusal",
        _ if calls.is_empty() => "end_turn",
        _ => "tool_use",
    };
    ev.push((Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 40}}).to_string()));
    ev.push((
        Some("message_stop"),
        json!({"type": "message_stop"}).to_string(),
    ));
    sse(&ev, "\n")
}

fn chat(text: &str, calls: &[Call], end: End) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1764460800, "model": "gpt-fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string()
    };
    let mut ev: Vec<(Option<&str>, String)> = vec![(
        None,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    if end == End::Malformed {
        ev.push((None, "{broken".into()));
    }
    if end == End::Refused {
        ev.push((
            None,
            chunk(json!({"refusal": "I can't help with that."}), Value::Null),
        ));
    } else {
        ev.push((None, chunk(json!({"content": text}), Value::Null)));
    }
    for (i, c) in calls.iter().enumerate() {
        ev.push((None, chunk(json!({"tool_calls": [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}), Value::Null)));
        for f in fragments(&c.input.to_string()) {
            ev.push((
                None,
                chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": f}}]}),
                    Value::Null,
                ),
            ));
        }
    }
    let finish = match end {
        End::Overloaded => {
            ev.push((None, json!({"error": {"message": "The server is overloaded.", "type": "overloaded_error", "code": null}}).to_string()));
            ev.push((None, "[DONE]".into()));
            return sse(&ev, "\n");
        }
        End::Truncated => "length",
        End::Refused => "stop",
        _ if calls.is_empty() => "stop",
        _ => "tool_calls",
    };
    ev.push((None, chunk(json!({}), json!(finish))));
    ev.push((None, "[DONE]".into()));
    sse(&ev, "\n")
}

fn responses(text: &str, calls: &[Call], end: End) -> String {
    let mut seq = 0;
    let mut ev: Vec<(Option<&'static str>, String)> = Vec::new();
    let mut e =
        |ev: &mut Vec<(Option<&'static str>, String)>, kind: &'static str, mut fields: Value| {
            fields["type"] = json!(kind);
            fields["sequence_number"] = json!(seq);
            seq += 1;
            ev.push((Some(kind), fields.to_string()));
        };
    e(
        &mut ev,
        "response.created",
        json!({"response": {"id": "resp_fake", "object": "response", "status": "in_progress", "output": []}}),
    );
    if end == End::Malformed {
        ev.push((Some("response.output_text.delta"), "{broken".into()));
    }
    let mut output = Vec::new();
    let msg = json!({"type": "message", "id": "msg_fake", "role": "assistant", "status": "in_progress", "content": []});
    e(
        &mut ev,
        "response.output_item.added",
        json!({"output_index": 0, "item": msg}),
    );
    let part = if end == End::Refused {
        let refusal = "I can't help with that.";
        e(
            &mut ev,
            "response.content_part.added",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": {"type": "refusal", "refusal": ""}}),
        );
        e(
            &mut ev,
            "response.refusal.delta",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": refusal}),
        );
        e(
            &mut ev,
            "response.refusal.done",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "refusal": refusal}),
        );
        json!({"type": "refusal", "refusal": refusal})
    } else {
        e(
            &mut ev,
            "response.content_part.added",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        e(
            &mut ev,
            "response.output_text.delta",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": text}),
        );
        e(
            &mut ev,
            "response.output_text.done",
            json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "text": text}),
        );
        json!({"type": "output_text", "text": text, "annotations": []})
    };
    e(
        &mut ev,
        "response.content_part.done",
        json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": part}),
    );
    let done_msg = json!({"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed", "content": [part]});
    e(
        &mut ev,
        "response.output_item.done",
        json!({"output_index": 0, "item": done_msg}),
    );
    output.push(done_msg);
    for (i, c) in calls.iter().enumerate() {
        let index = i + 1;
        let item_id = format!("fc_{}", c.id);
        let args = c.input.to_string();
        e(
            &mut ev,
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "function_call", "id": item_id, "call_id": c.id, "name": c.name, "arguments": "", "status": "in_progress"}}),
        );
        for f in fragments(&args) {
            e(
                &mut ev,
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": f}),
            );
        }
        e(
            &mut ev,
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "arguments": args}),
        );
        let done = json!({"type": "function_call", "id": item_id, "call_id": c.id, "name": c.name, "arguments": args, "status": "completed"});
        e(
            &mut ev,
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
        output.push(done);
    }
    match end {
        End::Overloaded => {
            e(
                &mut ev,
                "error",
                json!({"code": "server_is_overloaded", "message": "The server is overloaded.", "param": null}),
            );
        }
        End::Truncated => {
            e(
                &mut ev,
                "response.incomplete",
                json!({"response": {"id": "resp_fake", "object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": output}}),
            );
        }
        _ => {
            e(
                &mut ev,
                "response.completed",
                json!({"response": {"id": "resp_fake", "object": "response", "status": "completed", "output": output}}),
            );
        }
    }
    sse(&ev, "\n")
}

fn gemini(text: &str, calls: &[Call], end: End) -> String {
    let mut ev: Vec<(Option<&str>, String)> = vec![(
        None,
        json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}], "modelVersion": "gemini-fake"}).to_string(),
    )];
    if end == End::Malformed {
        ev.push((None, "{broken".into()));
    }
    let parts: Vec<Value> = calls
        .iter()
        .map(|c| json!({"functionCall": {"name": c.name, "args": c.input, "id": c.id}}))
        .collect();
    let finish = match end {
        End::Overloaded => {
            if !parts.is_empty() {
                ev.push((None, json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]}).to_string()));
            }
            ev.push((None, json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}).to_string()));
            return sse(&ev, "\r\n");
        }
        End::Truncated => "MAX_TOKENS",
        End::Refused => "SAFETY",
        _ => "STOP",
    };
    let parts = if parts.is_empty() {
        vec![json!({"text": ""})]
    } else {
        parts
    };
    ev.push((None, json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}], "modelVersion": "gemini-fake"}).to_string()));
    sse(&ev, "\r\n")
}
