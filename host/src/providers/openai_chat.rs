//! OpenAI Chat Completions streaming (`data:` chunks, `data: [DONE]` at the end).
//!
//! Folds `choices[0].delta` (the choice whose `index` is 0; other choices are ignored): `content`,
//! `reasoning_content`, `refusal`, `tool_calls` by `index` (the first fragment of each index must carry `id`
//! and `function.name`; later fragments may repeat them unchanged; `arguments` are concatenated exactly as
//! received).
//!
//! What OpenAI-compatible servers add, folded the same way:
//! * Mistral sends each tool call whole, with `id` and `function.name` but no `index`: such a fragment is a new
//!   call at the next position.
//! * Magistral streams `content` as an array of typed chunks (`{"type":"text","text"}`, `{"type":"thinking",
//!   "thinking":[text chunks]}`): text chunks are visible text; the assistant message's `content` is then the
//!   chunk list as sent (adjacent text chunks, and adjacent thinking chunks, merged), so the thinking goes
//!   back with it.
//! * DeepSeek and xAI stream the reasoning in `reasoning_content`: it is kept in the assistant message
//!   (`reasoning_content`, even when empty), which DeepSeek requires back after a turn with tool calls. It is
//!   not visible text.
//! * Gateways (OpenRouter, the Vercel AI Gateway, Groq) stream the reasoning as plain text in `reasoning`,
//!   and the upstream model's structured, often signed reasoning in `reasoning_details`: an array of objects
//!   with a `type` (`reasoning.text` with `text` and `signature`, `reasoning.encrypted` with `data`,
//!   `reasoning.summary` with `summary`) and an `index`. Fragments with the same `index` are merged (their
//!   `text` and `summary` concatenated, every other field kept as first given, a later non-null value
//!   filling one that was null or absent); a fragment without an `index` is an entry of its own. Both go
//!   back in the assistant message as they came (`reasoning: "..."`, `reasoning_details: [...]`): OpenRouter
//!   requires the details back on multi-turn tool calls. Neither is visible text.
//!
//! Classification (the first fault wins, see [`crate::providers`]):
//! * An `{"error": ...}` chunk -> Errored.
//! * Malformed: unparseable or non-object chunks, `choices` not an array, a tool-call fragment without
//!   `index` (unless it carries both `id` and `function.name`), a first fragment without `id` or
//!   `function.name`, a later fragment changing them, a tool type other than `function`, `content` that is
//!   neither a string nor an array of typed chunks, `reasoning_content` that is not a string, deltas or a
//!   different `finish_reason` after the `finish_reason`, any data after `[DONE]`, stray lines.
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
    /// `delta.content` as typed chunks (`{"type":"text","text"}` for a string delta), adjacent text and
    /// thinking chunks merged.
    content: Vec<Map<String, Value>>,
    /// Some `delta.content` was an array of typed chunks (Magistral): the message's content is the chunk
    /// list, not a string.
    typed_content: bool,
    /// `delta.reasoning_content` (DeepSeek, xAI), concatenated; `None` when no delta carried the field.
    reasoning: Option<String>,
    /// `delta.reasoning` (gateways' plain reasoning text), concatenated; `None` when no delta carried it.
    reasoning_text: Option<String>,
    /// `delta.reasoning_details` entries, merged by their `index` (the index, if any, and the entry).
    reasoning_details: Vec<(Option<u64>, Map<String, Value>)>,
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
            content: Vec::new(),
            typed_content: false,
            reasoning: None,
            reasoning_text: None,
            reasoning_details: Vec::new(),
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
                && [
                    "content",
                    "reasoning_content",
                    "refusal",
                    "tool_calls",
                    "function_call",
                ]
                .iter()
                .any(|k| carries(k))
            {
                self.common.malformed("delta after finish_reason");
            }
            match delta.get("content") {
                Some(Value::String(s)) => self.text_chunk(s, out),
                Some(Value::Array(chunks)) => {
                    self.typed_content = true;
                    for chunk in chunks {
                        self.typed_chunk(chunk, out);
                    }
                }
                None | Some(Value::Null) => {}
                Some(_) => self
                    .common
                    .malformed("delta.content is neither a string nor an array of chunks"),
            }
            match delta.get("reasoning_content") {
                Some(Value::String(s)) => self.reasoning.get_or_insert_default().push_str(s),
                None | Some(Value::Null) => {}
                Some(_) => self
                    .common
                    .malformed("delta.reasoning_content is not a string"),
            }
            match delta.get("reasoning") {
                Some(Value::String(s)) => self.reasoning_text.get_or_insert_default().push_str(s),
                None | Some(Value::Null) => {}
                Some(_) => self.common.malformed("delta.reasoning is not a string"),
            }
            match delta.get("reasoning_details") {
                Some(Value::Array(details)) => {
                    for detail in details {
                        match detail.as_object() {
                            Some(d) => self.reasoning_detail(d),
                            None => self
                                .common
                                .malformed("a delta.reasoning_details entry is not an object"),
                        }
                    }
                }
                None | Some(Value::Null) => {}
                Some(_) => self
                    .common
                    .malformed("delta.reasoning_details is not an array"),
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

    /// One `reasoning_details` fragment, merged into the entry with its `index` (see the module doc).
    fn reasoning_detail(&mut self, fragment: &Map<String, Value>) {
        let index = match fragment.get("index") {
            None | Some(Value::Null) => None,
            Some(i) => match i.as_u64() {
                Some(i) => Some(i),
                None => {
                    self.common
                        .malformed("a delta.reasoning_details entry has an invalid index");
                    return;
                }
            },
        };
        let existing = index.and_then(|i| {
            self.reasoning_details
                .iter_mut()
                .find(|(at, _)| *at == Some(i))
        });
        let Some((_, entry)) = existing else {
            self.reasoning_details.push((index, fragment.clone()));
            return;
        };
        for (key, value) in fragment {
            match (entry.get_mut(key), value) {
                (Some(Value::String(kept)), Value::String(more))
                    if key == "text" || key == "summary" =>
                {
                    kept.push_str(more)
                }
                (Some(kept), value) if kept.is_null() && !value.is_null() => *kept = value.clone(),
                (Some(_), _) => {}
                (None, value) => {
                    entry.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// Visible text: a text chunk, merged into the one before it.
    fn text_chunk(&mut self, text: &str, out: &mut Vec<TextDelta>) {
        if text.is_empty() {
            return;
        }
        let mut chunk = Map::new();
        chunk.insert("type".into(), json!("text"));
        chunk.insert("text".into(), json!(text));
        merge_chunk(&mut self.content, chunk);
        self.common.text(text, out);
    }

    /// One chunk of an array `delta.content`: `text` is visible text, `thinking` (whose `thinking` is a list
    /// of text chunks) is kept for the message but not echoed, any other typed chunk is kept as sent.
    fn typed_chunk(&mut self, chunk: &Value, out: &mut Vec<TextDelta>) {
        let Some(map) = chunk.as_object() else {
            self.common
                .malformed("a delta.content chunk is not an object");
            return;
        };
        match str_field(map, "type") {
            Some("text") => match str_field(map, "text") {
                Some(text) => self.text_chunk(text, out),
                None => self
                    .common
                    .malformed("a text chunk of delta.content without a string text"),
            },
            Some(_) => merge_chunk(&mut self.content, map.clone()),
            None => self
                .common
                .malformed("a delta.content chunk without a string type"),
        }
    }

    fn fragment(&mut self, f: &Map<String, Value>) {
        let function = f.get("function").and_then(Value::as_object);
        let id = str_field(f, "id").filter(|s| !s.is_empty());
        let name = function
            .and_then(|func| str_field(func, "name"))
            .filter(|s| !s.is_empty());
        let index = match f.get("index") {
            Some(i) if !i.is_null() => i.as_u64(),
            // Mistral sends each call whole, with its id and name but no index: a new call, next in line.
            _ if id.is_some() && name.is_some() => self
                .calls
                .last_key_value()
                .map_or(Some(0), |(last, _)| last.checked_add(1)),
            _ => None,
        };
        let Some(index) = index else {
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
        if let Some(tokens) = obj
            .get("usage")
            .and_then(|u| u.get("completion_tokens"))
            .and_then(Value::as_u64)
        {
            self.common.output_tokens(tokens);
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
        let chunks = std::mem::take(&mut self.content);
        let content = if chunks.is_empty() {
            Value::Null
        } else if self.typed_content {
            Value::Array(chunks.into_iter().map(Value::Object).collect())
        } else {
            // Without typed chunks, there is at most the one merged text chunk.
            Value::String(chunks.iter().filter_map(|c| str_field(c, "text")).collect())
        };
        message.insert("content".into(), content);
        // Kept even when empty: DeepSeek wants it back with every earlier message that made tool calls.
        if let Some(reasoning) = self.reasoning.take() {
            message.insert("reasoning_content".into(), Value::String(reasoning));
        }
        if let Some(reasoning) = self.reasoning_text.take() {
            message.insert("reasoning".into(), Value::String(reasoning));
        }
        if !self.reasoning_details.is_empty() {
            let details = std::mem::take(&mut self.reasoning_details);
            message.insert(
                "reasoning_details".into(),
                Value::Array(details.into_iter().map(|(_, d)| Value::Object(d)).collect()),
            );
        }
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

/// Appends a typed content chunk, merging it into the last one when both are `text` (texts joined) or both
/// are `thinking` (their `thinking` lists joined, adjacent text pieces merged); the later chunk's other
/// fields win. Any other chunk is kept as sent.
fn merge_chunk(chunks: &mut Vec<Map<String, Value>>, chunk: Map<String, Value>) {
    let kind = str_field(&chunk, "type");
    let field = match kind {
        Some("text") => "text",
        Some("thinking") => "thinking",
        _ => {
            chunks.push(chunk);
            return;
        }
    };
    let Some(last) = chunks
        .last_mut()
        .filter(|last| str_field(last, "type") == kind)
    else {
        chunks.push(chunk);
        return;
    };
    let merged = match (last.get(field), chunk.get(field)) {
        (Some(Value::String(a)), Some(Value::String(b))) => Some(Value::String(format!("{a}{b}"))),
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            let mut parts = a.clone();
            for part in b {
                merge_text_part(&mut parts, part);
            }
            Some(Value::Array(parts))
        }
        _ => None,
    };
    let Some(merged) = merged else {
        chunks.push(chunk);
        return;
    };
    for (key, value) in chunk {
        if key != field {
            last.insert(key, value);
        }
    }
    last.insert(field.to_owned(), merged);
}

/// Appends a piece of a thinking chunk's list, joining two adjacent `{"type":"text","text"}` pieces.
fn merge_text_part(parts: &mut Vec<Value>, part: &Value) {
    let plain_text = |v: &Value| {
        v.as_object()
            .filter(|m| m.len() == 2 && str_field(m, "type") == Some("text"))
            .and_then(|m| str_field(m, "text"))
            .map(str::to_owned)
    };
    if let (Some(tail), Some(text)) = (parts.last_mut(), plain_text(part))
        && let Some(head) = plain_text(tail)
    {
        *tail = json!({"type": "text", "text": format!("{head}{text}")});
        return;
    }
    parts.push(part.clone());
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
    fn a_whole_call_without_index_takes_the_next_position() {
        let whole = |id: &str| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"id\":\"{id}\",\"function\":{{\"name\":\"w\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
            )
        };
        let end = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        let turn = decode(
            Provider::OpenAiChat,
            format!("{CALL}{}{end}", whole("m2")).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Completed);
        assert_eq!(turn.calls[1].id.as_deref(), Some("m2"));
        assert_eq!(turn.calls[1].index, 1);
        // No position after the largest index: malformed, not a panic.
        let last = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":18446744073709551615,\"id\":\"c\",\"function\":{\"name\":\"w\",\"arguments\":\"{}\"}}]}}]}\n\n";
        let turn = decode(
            Provider::OpenAiChat,
            format!("{last}{}{end}", whole("m2")).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Malformed);
        // Without an id, a fragment without index cannot start a call.
        let anonymous = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"w\",\"arguments\":\"{}\"}}]}}]}\n\n";
        let turn = decode(Provider::OpenAiChat, format!("{anonymous}{end}").as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Malformed);
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
