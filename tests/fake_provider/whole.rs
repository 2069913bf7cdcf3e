//! Whole JSON answers (what a server that ignores `stream: true` sends back), in each provider's
//! non-streamed response shape: text, then the tool calls with their input whole, then the ending, and
//! the usage the server reports (`output_tokens` of the answer).

use serde_json::{Value, json};
use turngate::Provider;

use super::sse::{Call, End};

/// A whole response body.
pub fn turn(
    provider: Provider,
    text: &str,
    calls: &[Call],
    end: End,
    output_tokens: u64,
) -> String {
    let body = match provider {
        Provider::Anthropic => anthropic(text, calls, end, output_tokens),
        Provider::OpenAiChat => chat(text, calls, end, output_tokens),
        Provider::OpenAiResponses => responses(text, calls, end, output_tokens),
        Provider::Gemini => gemini(text, calls, end, output_tokens),
    };
    serde_json::to_string_pretty(&body).expect("a JSON value serializes")
}

fn anthropic(text: &str, calls: &[Call], end: End, output_tokens: u64) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    for c in calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}));
    }
    let stop = match end {
        End::Complete if calls.is_empty() => "end_turn",
        End::Complete => "tool_use",
        End::Truncated => "max_tokens",
        _ => "refusal",
    };
    json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": "m-1", "content": content,
           "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 10, "output_tokens": output_tokens}})
}

fn chat(text: &str, calls: &[Call], end: End, output_tokens: u64) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                   "function": {"name": c.name, "arguments": c.input.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = match end {
        End::Complete if calls.is_empty() => "stop",
        End::Complete => "tool_calls",
        End::Truncated => "length",
        _ => "content_filter",
    };
    json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "m-1",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": output_tokens,
                     "total_tokens": 10 + output_tokens}})
}

fn responses(text: &str, calls: &[Call], end: End, output_tokens: u64) -> Value {
    let mut output = vec![
        json!({"id": "msg_fake", "type": "message", "status": "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    ];
    for (i, c) in calls.iter().enumerate() {
        output.push(
            json!({"id": format!("fc_fake_{i}"), "type": "function_call", "status": "completed",
            "call_id": c.id, "name": c.name, "arguments": c.input.to_string()}),
        );
    }
    let (status, details) = match end {
        End::Complete => ("completed", Value::Null),
        End::Truncated => ("incomplete", json!({"reason": "max_output_tokens"})),
        _ => ("incomplete", json!({"reason": "content_filter"})),
    };
    json!({"id": "resp_fake", "object": "response", "status": status, "incomplete_details": details,
           "error": null, "model": "m-1", "output": output,
           "usage": {"input_tokens": 10, "output_tokens": output_tokens,
                     "total_tokens": 10 + output_tokens}})
}

fn gemini(text: &str, calls: &[Call], end: End, output_tokens: u64) -> Value {
    let mut parts = vec![json!({"text": text})];
    for c in calls {
        parts.push(json!({"functionCall": {"id": c.id, "name": c.name, "args": c.input}}));
    }
    let finish = match end {
        End::Complete => "STOP",
        End::Truncated => "MAX_TOKENS",
        _ => "SAFETY",
    };
    json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": output_tokens,
                             "totalTokenCount": 10 + output_tokens},
           "modelVersion": "m-1"})
}
