//! OpenAI Chat Completions streaming (`data:` chunks, `data: [DONE]` at the end).
//!
//! Folds `choices[0].delta` (the choice whose `index` is 0; other choices are ignored): `content`, `refusal`,
//! `tool_calls` by `index` (the first fragment of each index must carry `id` and `function.name`; later
//! fragments may repeat them unchanged; `arguments` are concatenated exactly as received).
//!
//! Classification (the first fault wins, see [`crate::providers`]):
//! * An `{"error": ...}` chunk -> Errored.
//! * Malformed: unparseable or non-object chunks, `choices` not an array, a tool-call fragment without
//!   `index`, a first fragment without `id` or `function.name`, a later fragment changing them, a tool type
//!   other than `function`, deltas or a different `finish_reason` after the `finish_reason`, any data after
//!   `[DONE]`, stray lines.
//! * No `[DONE]` -> Incomplete (with or without a `finish_reason`); `[DONE]` without any `finish_reason` ->
//!   Incomplete.
//! * By `finish_reason`: `content_filter` -> Filtered; `length` -> Truncated; otherwise a streamed refusal ->
//!   Refused; `tool_calls` -> Completed with at least one call (none -> Malformed); `stop` -> Completed with no
//!   calls, or with calls when the request forced a named tool (`forced_tool_choice`), else Malformed;
//!   `function_call` (deprecated) and unknown values -> Incomplete.
//!
//! A usage chunk with `choices: []` is fine anywhere before `[DONE]`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::providers::{
    Common, ProviderFold, TextDelta, clip, describe_error, describe_undispatched, parse_object,
    str_field,
};
use crate::sse::Undispatched;
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

#[derive(Debug)]
struct ChatCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Fold for [`Provider::OpenAiChat`].
#[derive(Debug)]
pub struct ChatFold {
    common: Common,
    forced_tool_choice: bool,
    content: String,
    refusal: String,
    calls: BTreeMap<u64, ChatCall>,
    function_call: Option<(String, String)>,
    finish_reason: Option<String>,
    done: bool,
}

impl ChatFold {
    /// `forced_tool_choice`: the request forced a named tool.
    pub fn new(forced_tool_choice: bool) -> Self {
        Self {
            common: Common::default(),
            forced_tool_choice,
            content: String::new(),
            refusal: String::new(),
            calls: BTreeMap::new(),
            function_call: None,
            finish_reason: None,
            done: false,
        }
    }

    fn choice(&mut self, choice: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        let delta = match choice.get("delta") {
            Some(Value::Object(d)) => Some(d),
            None | Some(Value::Null) => None,
            Some(_) => {
                self.common.malformed("choices[0].delta is not an object");
                None
            }
        };
        if let Some(delta) = delta {
            let carries = |k: &str| match delta.get(k) {
                None | Some(Value::Null) => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if self.finish_reason.is_some()
                && ["content", "refusal", "tool_calls", "function_call"]
                    .iter()
                    .any(|k| carries(k))
            {
                self.common.malformed("delta after finish_reason");
            }
            match delta.get("content") {
                Some(Value::String(s)) => {
                    self.content.push_str(s);
                    self.common.text(s, out);
                }
                None | Some(Value::Null) => {}
                Some(_) => self.common.malformed("delta.content is not a string"),
            }
            match delta.get("refusal") {
                Some(Value::String(s)) => self.refusal.push_str(s),
                None | Some(Value::Null) => {}
                Some(_) => self.common.malformed("delta.refusal is not a string"),
            }
            match delta.get("tool_calls") {
                Some(Value::Array(fragments)) => {
                    for fragment in fragments {
                        match fragment.as_object() {
                            Some(f) => self.fragment(f),
                            None => self.common.malformed("tool call fragment is not an object"),
                        }
                    }
                }
                None | Some(Value::Null) => {}
                Some(_) => self.common.malformed("delta.tool_calls is not an array"),
            }
            if let Some(fc) = delta.get("function_call").and_then(Value::as_object) {
                let entry = self.function_call.get_or_insert_with(Default::default);
                if let Some(n) = str_field(fc, "name") {
                    entry.0.push_str(n);
                }
                if let Some(a) = str_field(fc, "arguments") {
                    entry.1.push_str(a);
                }
            }
        }
        match choice.get("finish_reason") {
            Some(Value::String(reason)) => match &self.finish_reason {
                Some(prev) if prev != reason => self.common.malformed(format!(
                    "finish_reason changed from {} to {}",
                    clip(prev),
                    clip(reason)
                )),
                _ => self.finish_reason = Some(reason.clone()),
            },
            None | Some(Value::Null) => {}
            Some(_) => self.common.malformed("finish_reason is not a string"),
        }
    }

    fn fragment(&mut self, f: &Map<String, Value>) {
        let Some(index) = f.get("index").and_then(Value::as_u64) else {
            self.common
                .malformed("tool call fragment without a valid index");
            return;
        };
        if let Some(kind) = f.get("type").filter(|v| !v.is_null())
            && kind.as_str() != Some("function")
        {
            self.common.malformed(format!(
                "tool call {index} has type {}, not function",
                clip(&kind.to_string())
            ));
        }
        let function = f.get("function").and_then(Value::as_object);
        let id = str_field(f, "id").filter(|s| !s.is_empty());
        let name = function
            .and_then(|func| str_field(func, "name"))
            .filter(|s| !s.is_empty());
        match self.calls.get_mut(&index) {
            None => {
                if id.is_none() {
                    self.common
                        .malformed(format!("first fragment of tool call {index} has no id"));
                }
                if name.is_none() {
                    self.common.malformed(format!(
                        "first fragment of tool call {index} has no function.name"
                    ));
                }
                self.calls.insert(
                    index,
                    ChatCall {
                        id: id.map(str::to_owned),
                        name: name.unwrap_or_default().to_owned(),
                        arguments: String::new(),
                    },
                );
            }
            Some(call) => {
                if let Some(id) = id
                    && call.id.as_deref() != Some(id)
                {
                    self.common
                        .malformed(format!("tool call {index} changed its id to {}", clip(id)));
                }
                if let Some(name) = name
                    && call.name != name
                {
                    self.common.malformed(format!(
                        "tool call {index} changed its name to {}",
                        clip(name)
                    ));
                }
            }
        }
        match function.and_then(|func| func.get("arguments")) {
            Some(Value::String(a)) => {
                if let Some(call) = self.calls.get_mut(&index) {
                    call.arguments.push_str(a);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => self
                .common
                .malformed(format!("tool call {index}: arguments is not a string")),
        }
    }

    fn verdict(&self, undispatched: Option<&Undispatched>) -> (TurnStatus, String) {
        if !self.done {
            let mut detail = match &self.finish_reason {
                Some(r) => format!(
                    "stream ended without data: [DONE] after finish_reason {}",
                    clip(r)
                ),
                None => "stream ended before a finish_reason and data: [DONE]".to_owned(),
            };
            if let Some(u) = undispatched {
                detail = format!("{detail} ({})", describe_undispatched(u));
            }
            return (TurnStatus::Incomplete, detail);
        }
        let n = self.calls.len();
        let refused = !self.refusal.is_empty();
        match self.finish_reason.as_deref() {
            None => (
                TurnStatus::Incomplete,
                "data: [DONE] without any finish_reason".into(),
            ),
            Some("content_filter") => (TurnStatus::Filtered, "finish_reason content_filter".into()),
            Some("length") => (
                TurnStatus::Truncated,
                "finish_reason length: output cut at the token limit".into(),
            ),
            Some(r) if refused => (
                TurnStatus::Refused,
                format!(
                    "refusal streamed (finish_reason {}): {}",
                    clip(r),
                    clip(&self.refusal)
                ),
            ),
            Some("tool_calls") if n == 0 => (
                TurnStatus::Malformed,
                "finish_reason tool_calls without any tool call".into(),
            ),
            Some("tool_calls") => (
                TurnStatus::Completed,
                format!("finish_reason tool_calls: {n} tool call(s)"),
            ),
            Some("stop") if n == 0 => (
                TurnStatus::Completed,
                "finish_reason stop, no tool calls".into(),
            ),
            Some("stop") if self.forced_tool_choice => (
                TurnStatus::Completed,
                format!("finish_reason stop after a forced tool_choice: {n} tool call(s)"),
            ),
            Some("stop") => (
                TurnStatus::Malformed,
                format!(
                    "finish_reason stop with {n} tool call(s), but the request did not force a named tool (expected tool_calls)"
                ),
            ),
            Some("function_call") => (
                TurnStatus::Incomplete,
                "finish_reason function_call (deprecated functions API) is not supported".into(),
            ),
            Some(r) => (
                TurnStatus::Incomplete,
                format!("unknown finish_reason {}", clip(r)),
            ),
        }
    }
}

impl ProviderFold for ChatFold {
    fn common(&mut self) -> &mut Common {
        &mut self.common
    }

    fn event(&mut self, _event: Option<String>, data: String, out: &mut Vec<TextDelta>) {
        if self.done {
            self.common
                .malformed(format!("data after [DONE]: {}", clip(&data)));
            return;
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let Some(obj) = parse_object(&mut self.common, "chunk", &data) else {
            return;
        };
        if let Some(error) = obj.get("error").filter(|e| !e.is_null()) {
            self.common.fault(
                TurnStatus::Errored,
                format!("error chunk: {}", describe_error(error)),
            );
            return;
        }
        match obj.get("choices") {
            Some(Value::Array(choices)) => {
                for choice in choices {
                    let Some(choice) = choice.as_object() else {
                        self.common.malformed("a choice is not an object");
                        continue;
                    };
                    match choice.get("index") {
                        None | Some(Value::Null) => {}
                        Some(i) if i.as_u64() == Some(0) => {}
                        Some(_) => continue, // other choices (n > 1) are not folded
                    }
                    self.choice(choice, out);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => self.common.malformed("choices is not an array"),
        }
    }

    fn finish(mut self: Box<Self>, undispatched: Option<Undispatched>) -> Turn {
        if self.done
            && let Some(u) = &undispatched
        {
            self.common
                .malformed(format!("data after [DONE]: {}", describe_undispatched(u)));
        }
        let verdict = self.verdict(undispatched.as_ref());
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        let content = std::mem::take(&mut self.content);
        message.insert(
            "content".into(),
            if content.is_empty() {
                Value::Null
            } else {
                Value::String(content)
            },
        );
        if !self.refusal.is_empty() {
            message.insert(
                "refusal".into(),
                Value::String(std::mem::take(&mut self.refusal)),
            );
        }
        let mut calls = Vec::new();
        let mut tool_calls = Vec::new();
        for (position, call) in std::mem::take(&mut self.calls).into_values().enumerate() {
            tool_calls.push(json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }));
            calls.push(RawCall {
                kind: CallKind::Function,
                id: call.id,
                name: call.name,
                raw_input: call.arguments,
                index: position,
            });
        }
        if !tool_calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        if let Some((name, arguments)) = self.function_call.take() {
            message.insert(
                "function_call".into(),
                json!({"name": name, "arguments": arguments}),
            );
        }
        let stop_reason = self.finish_reason.clone();
        self.common.into_turn(
            Provider::OpenAiChat,
            Value::Object(message),
            calls,
            verdict,
            stop_reason,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::{DecoderOptions, decode, decode_with};
    use crate::turn::{Provider, TurnStatus};

    const CALL: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":\"\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n";

    fn body(finish: &str, done: bool) -> String {
        let mut s = CALL.to_owned();
        s.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{finish}\"}}]}}\n\n"
        ));
        s.push_str("data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n");
        if done {
            s.push_str("data: [DONE]\n\n");
        }
        s
    }

    #[test]
    fn classification() {
        let forced = DecoderOptions {
            forced_tool_choice: true,
            ..DecoderOptions::default()
        };
        let run = |b: String, o| {
            decode_with(Provider::OpenAiChat, o, b.as_bytes())
                .ending
                .status
        };
        let plain = DecoderOptions::default();
        assert_eq!(run(body("tool_calls", true), plain), TurnStatus::Completed);
        assert_eq!(
            run(body("tool_calls", false), plain),
            TurnStatus::Incomplete
        );
        assert_eq!(run(body("stop", true), plain), TurnStatus::Malformed);
        assert_eq!(run(body("stop", true), forced), TurnStatus::Completed);
        assert_eq!(run(body("length", true), forced), TurnStatus::Truncated);
        assert_eq!(
            run(body("content_filter", true), plain),
            TurnStatus::Filtered
        );
        assert_eq!(
            run(body("function_call", true), plain),
            TurnStatus::Incomplete
        );
        let turn = decode(Provider::OpenAiChat, body("tool_calls", true).as_bytes());
        assert_eq!(turn.calls[0].raw_input, "{}");
        assert_eq!(turn.calls[0].id.as_deref(), Some("c1"));
    }

    #[test]
    fn error_chunk_is_errored() {
        let b = format!(
            "{CALL}data: {{\"error\":{{\"message\":\"boom\",\"type\":\"server_error\"}}}}\n\ndata: [DONE]\n\n"
        );
        let turn = decode(Provider::OpenAiChat, b.as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Errored);
        assert_eq!(turn.ending.detail, "error chunk: server_error: boom");
        assert_eq!(turn.calls.len(), 1);
    }
}
