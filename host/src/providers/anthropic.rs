//! Anthropic Messages streaming.
//!
//! Order: `message_start`, per content block `content_block_start` / `content_block_delta`* /
//! `content_block_stop`, `message_delta` (with `stop_reason`), `message_stop`. `ping` and unknown event types
//! are tolerated anywhere before `message_stop`. A resumed message (programmatic tool calling, for example) can
//! carry its content whole in `message_start` (`message.content`, complete blocks, a `tool_use` with its full
//! `input` object) and its `stop_reason` there too, then go straight to `message_stop`: like the SDKs, the
//! message starts from what `message_start` holds; its blocks count as started and stopped.
//!
//! Classification (the first fault wins, see [`crate::providers`]):
//! * `error` event -> Errored (detail: error type and message, e.g. `overloaded_error: Overloaded`).
//! * Protocol violations -> Malformed: unparseable data, data that is not an object with a string `type`, an
//!   `event:` name that differs from `data.type` (a missing `event:` line is tolerated), any event before
//!   `message_start` or a second one, a start for an index already started, a delta or stop for an index never
//!   started (or already stopped; a block from `message_start` is stopped), a delta type that does not fit its
//!   block, a block event after `message_delta`, a `message_start` content that is not an array of typed
//!   objects (or a `tool_use` there without an `input` object), a `stop_reason` that changes, anything after
//!   `message_stop` (including an undispatched trailing event), stray lines.
//! * No `message_stop` dispatched (also when it sits at EOF without its blank line) -> Incomplete.
//! * After `message_stop`, by `stop_reason`: `tool_use` -> Completed when at least one `tool_use` block exists
//!   and every block got its `content_block_stop` (else Malformed); `end_turn` / `stop_sequence` -> Completed
//!   when there is no `tool_use` block and every block was stopped (else Malformed); `max_tokens`,
//!   `model_context_window_exceeded` -> Truncated; `refusal` -> Refused; `pause_turn`, unknown, or no stop
//!   reason at all (neither in `message_start` nor in `message_delta`) -> Incomplete.
//!
//! Tool input: the `input_json_delta.partial_json` fragments concatenated. An empty buffer means `{}`: then
//! `raw_input` is `{}` (or, if the block's start carried a non-empty `input` object and no fragment came, that
//! object serialized). Only `tool_use` blocks are client calls; `server_tool_use` / `mcp_tool_use` run on
//! Anthropic's side and are kept in `assistant` only.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::providers::{
    Common, ProviderFold, TextDelta, clip, describe_error, describe_undispatched, str_field,
    typed_event,
};
use crate::sse::Undispatched;
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

#[derive(Debug)]
struct Block {
    start: Map<String, Value>,
    kind: String,
    text: String,
    thinking: String,
    signature: String,
    json: String,
    citations: Vec<Value>,
    stopped: bool,
}

/// Fold for [`Provider::Anthropic`].
#[derive(Debug, Default)]
pub struct AnthropicFold {
    common: Common,
    started: bool,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    stop_details: Option<Value>,
    saw_message_delta: bool,
    stopped: bool,
}

impl AnthropicFold {
    fn on_object(&mut self, kind: &str, obj: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        match kind {
            "ping" => {}
            "error" => {
                let detail = obj
                    .get("error")
                    .map(describe_error)
                    .unwrap_or_else(|| "error event without details".into());
                self.common
                    .fault(TurnStatus::Errored, format!("error event: {detail}"));
            }
            "message_start" => {
                if self.started {
                    self.common.malformed("second message_start");
                    return;
                }
                self.started = true;
                self.message_start(obj, out);
            }
            "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "message_stop"
                if !self.started =>
            {
                self.common
                    .malformed(format!("{kind} before message_start"));
            }
            "content_block_start" | "content_block_delta" | "content_block_stop"
                if self.saw_message_delta =>
            {
                self.common.malformed(format!("{kind} after message_delta"));
            }
            "content_block_start" => self.block_start(obj, out),
            "content_block_delta" => self.block_delta(obj, out),
            "content_block_stop" => {
                let Some(index) = self.index(obj, kind) else {
                    return;
                };
                match self.blocks.get_mut(&index) {
                    None => self.common.malformed(format!(
                        "content_block_stop for index {index}, never started"
                    )),
                    Some(b) if b.stopped => self
                        .common
                        .malformed(format!("second content_block_stop for index {index}")),
                    Some(b) => b.stopped = true,
                }
            }
            "message_delta" => {
                self.saw_message_delta = true;
                self.usage(obj.get("usage"));
                let delta = obj.get("delta").and_then(Value::as_object);
                match delta.and_then(|d| d.get("stop_reason")) {
                    Some(Value::String(reason)) => {
                        if let Some(prev) = &self.stop_reason
                            && prev != reason
                        {
                            self.common.malformed(format!(
                                "stop_reason changed from {} to {}",
                                clip(prev),
                                clip(reason)
                            ));
                        }
                        self.stop_reason = Some(reason.clone());
                    }
                    None | Some(Value::Null) => {}
                    Some(other) => self.common.malformed(format!(
                        "stop_reason is not a string: {}",
                        clip(&other.to_string())
                    )),
                }
                if let Some(details) = delta
                    .and_then(|d| d.get("stop_details"))
                    .filter(|v| !v.is_null())
                {
                    self.stop_details = Some(details.clone());
                }
            }
            "message_stop" => self.stopped = true,
            _ => {} // unknown event types are tolerated
        }
    }

    /// Takes what `message_start` already carries, as the SDKs do when they build the final message from
    /// it: its content blocks are complete blocks (a `tool_use` has its whole `input` object), and its
    /// `stop_reason`, when set, is the message's unless a `message_delta` says otherwise.
    fn message_start(&mut self, obj: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        let Some(message) = obj.get("message").and_then(Value::as_object) else {
            return;
        };
        match message.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::Array(blocks)) => {
                for (index, block) in (0u64..).zip(blocks) {
                    match block.as_object() {
                        Some(block) => self.complete_block(index, block, out),
                        None => self.common.malformed(format!(
                            "message_start content block {index} is not an object"
                        )),
                    }
                }
            }
            Some(_) => self
                .common
                .malformed("message_start content is not an array"),
        }
        match message.get("stop_reason") {
            None | Some(Value::Null) => {}
            Some(Value::String(reason)) => self.stop_reason = Some(reason.clone()),
            Some(other) => self.common.malformed(format!(
                "message_start stop_reason is not a string: {}",
                clip(&other.to_string())
            )),
        }
        if let Some(details) = message.get("stop_details").filter(|v| !v.is_null()) {
            self.stop_details = Some(details.clone());
        }
        self.usage(message.get("usage"));
    }

    /// `usage.output_tokens` (cumulative) of `message_start`'s message or of a `message_delta`.
    fn usage(&mut self, usage: Option<&Value>) {
        if let Some(tokens) = usage
            .and_then(|u| u.get("output_tokens"))
            .and_then(Value::as_u64)
        {
            self.common.output_tokens(tokens);
        }
    }

    /// A block that arrived whole in `message_start`: started and stopped at once.
    fn complete_block(&mut self, index: u64, block: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        let Some(kind) = str_field(block, "type") else {
            self.common.malformed(format!(
                "message_start content block {index} without a block type"
            ));
            return;
        };
        if kind == "text"
            && let Some(text) = str_field(block, "text")
        {
            self.common.text(text, out);
        }
        if kind == "tool_use" {
            if str_field(block, "id").is_none() || str_field(block, "name").is_none() {
                self.common.malformed(format!(
                    "tool_use block {index} without a string id and name"
                ));
            }
            if !block.get("input").is_some_and(Value::is_object) {
                self.common.malformed(format!(
                    "tool_use block {index} in message_start without an input object"
                ));
            }
        }
        let block = Block {
            kind: kind.to_owned(),
            start: block.clone(),
            text: String::new(),
            thinking: String::new(),
            signature: String::new(),
            json: String::new(),
            citations: Vec::new(),
            stopped: true,
        };
        self.blocks.insert(index, block);
    }

    fn index(&mut self, obj: &Map<String, Value>, kind: &str) -> Option<u64> {
        let index = obj.get("index").and_then(Value::as_u64);
        if index.is_none() {
            self.common
                .malformed(format!("{kind} without a valid index"));
        }
        index
    }

    fn block_start(&mut self, obj: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        let Some(index) = self.index(obj, "content_block_start") else {
            return;
        };
        let Some(start) = obj.get("content_block").and_then(Value::as_object) else {
            self.common.malformed(format!(
                "content_block_start for index {index} without a content_block object"
            ));
            return;
        };
        let Some(kind) = str_field(start, "type") else {
            self.common.malformed(format!(
                "content_block_start for index {index} without a block type"
            ));
            return;
        };
        if self.blocks.contains_key(&index) {
            self.common
                .malformed(format!("second content_block_start for index {index}"));
            return;
        }
        if kind == "text"
            && let Some(text) = str_field(start, "text")
        {
            self.common.text(text, out);
        }
        if kind == "tool_use"
            && (str_field(start, "id").is_none() || str_field(start, "name").is_none())
        {
            self.common.malformed(format!(
                "tool_use block {index} without a string id and name"
            ));
        }
        let block = Block {
            kind: kind.to_owned(),
            start: start.clone(),
            text: String::new(),
            thinking: String::new(),
            signature: String::new(),
            json: String::new(),
            citations: Vec::new(),
            stopped: false,
        };
        self.blocks.insert(index, block);
    }

    fn block_delta(&mut self, obj: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        let Some(index) = self.index(obj, "content_block_delta") else {
            return;
        };
        let Some(block) = self.blocks.get_mut(&index) else {
            self.common.malformed(format!(
                "content_block_delta for index {index}, never started"
            ));
            return;
        };
        if block.stopped {
            self.common.malformed(format!(
                "content_block_delta for index {index} after its content_block_stop"
            ));
            return;
        }
        let Some(delta) = obj.get("delta").and_then(Value::as_object) else {
            self.common.malformed(format!(
                "content_block_delta for index {index} without a delta object"
            ));
            return;
        };
        let Some(delta_type) = str_field(delta, "type") else {
            self.common.malformed(format!(
                "content_block_delta for index {index} without a delta type"
            ));
            return;
        };
        let is_tool = block.kind.ends_with("tool_use");
        let (field, fits) = match delta_type {
            "text_delta" => ("text", block.kind == "text"),
            "input_json_delta" => ("partial_json", is_tool),
            "thinking_delta" => ("thinking", block.kind == "thinking"),
            "signature_delta" => ("signature", block.kind == "thinking"),
            "citations_delta" => ("citation", block.kind == "text"),
            _ => return, // unknown delta types are tolerated
        };
        if !fits {
            self.common.malformed(format!(
                "{delta_type} for a {} block (index {index})",
                clip(&block.kind)
            ));
            return;
        }
        if delta_type == "citations_delta" {
            match delta.get("citation") {
                Some(c) => block.citations.push(c.clone()),
                None => self
                    .common
                    .malformed(format!("citations_delta without citation (index {index})")),
            }
            return;
        }
        let Some(piece) = str_field(delta, field) else {
            self.common.malformed(format!(
                "{delta_type} without a string {field} (index {index})"
            ));
            return;
        };
        match delta_type {
            "text_delta" => {
                block.text.push_str(piece);
                self.common.text(piece, out);
            }
            "input_json_delta" => block.json.push_str(piece),
            "thinking_delta" => block.thinking.push_str(piece),
            _ => block.signature.push_str(piece),
        }
    }

    fn verdict(&self, undispatched: Option<&Undispatched>) -> (TurnStatus, String) {
        let reason = self.stop_reason.as_deref();
        if !self.stopped {
            let mut detail = "stream ended before message_stop".to_owned();
            if let Some(u) = undispatched {
                detail = format!("{detail} ({})", describe_undispatched(u));
            }
            if let Some(r) = reason {
                detail = format!("{detail}; stop_reason was {}", clip(r));
            }
            return (TurnStatus::Incomplete, detail);
        }
        let tool_blocks = self
            .blocks
            .values()
            .filter(|b| b.kind == "tool_use")
            .count();
        let unstopped: Vec<String> = self
            .blocks
            .iter()
            .filter(|(_, b)| !b.stopped)
            .map(|(i, b)| format!("{} block {i}", clip(&b.kind)))
            .take(5)
            .collect();
        match reason {
            None => (
                TurnStatus::Incomplete,
                "message_stop without a stop_reason in message_start or message_delta".into(),
            ),
            Some("tool_use") if tool_blocks == 0 => (
                TurnStatus::Malformed,
                "stop_reason tool_use but the message has no tool_use block".into(),
            ),
            Some("tool_use" | "end_turn" | "stop_sequence") if !unstopped.is_empty() => (
                TurnStatus::Malformed,
                format!(
                    "stop_reason {} but no content_block_stop for {}",
                    reason.unwrap_or_default(),
                    unstopped.join(", ")
                ),
            ),
            Some("tool_use") => (
                TurnStatus::Completed,
                format!("stop_reason tool_use: {tool_blocks} tool call(s)"),
            ),
            Some(r @ ("end_turn" | "stop_sequence")) if tool_blocks > 0 => (
                TurnStatus::Malformed,
                format!(
                    "stop_reason {r} but the message has {tool_blocks} tool_use block(s) (expected tool_use)"
                ),
            ),
            Some(r @ ("end_turn" | "stop_sequence")) => (
                TurnStatus::Completed,
                format!("stop_reason {r}, no tool calls"),
            ),
            Some(r @ ("max_tokens" | "model_context_window_exceeded")) => (
                TurnStatus::Truncated,
                format!("stop_reason {r}: output cut at a limit"),
            ),
            Some("refusal") => {
                let mut detail = "stop_reason refusal".to_owned();
                if let Some(d) = &self.stop_details {
                    detail = format!("{detail}: {}", clip(&d.to_string()));
                }
                (TurnStatus::Refused, detail)
            }
            Some("pause_turn") => (
                TurnStatus::Incomplete,
                "stop_reason pause_turn: the turn must be continued".into(),
            ),
            Some(r) => (
                TurnStatus::Incomplete,
                format!("unknown stop_reason {}", clip(r)),
            ),
        }
    }
}

impl ProviderFold for AnthropicFold {
    fn common(&mut self) -> &mut Common {
        &mut self.common
    }

    fn event(&mut self, event: Option<String>, data: String, out: &mut Vec<TextDelta>) {
        if self.stopped {
            self.common.malformed(format!(
                "event after message_stop: {}",
                clip(event.as_deref().unwrap_or(&data))
            ));
            return;
        }
        let Some((kind, obj)) = typed_event(&mut self.common, event.as_deref(), &data) else {
            return;
        };
        self.on_object(&kind, &obj, out);
    }

    fn finish(mut self: Box<Self>, undispatched: Option<Undispatched>) -> Turn {
        if self.stopped
            && let Some(u) = &undispatched
        {
            self.common.malformed(format!(
                "data after message_stop: {}",
                describe_undispatched(u)
            ));
        }
        let verdict = self.verdict(undispatched.as_ref());
        let mut content = Vec::with_capacity(self.blocks.len());
        let mut calls = Vec::new();
        for (position, (index, block)) in std::mem::take(&mut self.blocks).into_iter().enumerate() {
            let mut value = block.start;
            match block.kind.as_str() {
                "text" => {
                    append_str(&mut value, "text", &block.text);
                    if !block.citations.is_empty() {
                        let mut all = match value.remove("citations") {
                            Some(Value::Array(a)) => a,
                            _ => Vec::new(),
                        };
                        all.extend(block.citations);
                        value.insert("citations".into(), Value::Array(all));
                    }
                }
                "thinking" => {
                    append_str(&mut value, "thinking", &block.thinking);
                    append_str(&mut value, "signature", &block.signature);
                }
                kind if kind.ends_with("tool_use") => {
                    let raw = if block.json.is_empty() {
                        match value.get("input") {
                            Some(Value::Object(m)) if !m.is_empty() => {
                                Value::Object(m.clone()).to_string()
                            }
                            _ => "{}".to_owned(),
                        }
                    } else {
                        block.json
                    };
                    let input = match serde_json::from_str::<Value>(&raw) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => {
                            self.common.note(format!(
                                "{kind} block {index}: input is not a JSON object; the history carries {{}}"
                            ));
                            json!({})
                        }
                    };
                    value.insert("input".into(), input);
                    if kind == "tool_use" {
                        calls.push(RawCall {
                            kind: CallKind::Function,
                            id: str_field(&value, "id").map(str::to_owned),
                            name: str_field(&value, "name").unwrap_or_default().to_owned(),
                            raw_input: raw,
                            index: position,
                        });
                    }
                }
                _ => {}
            }
            content.push(Value::Object(value));
        }
        let assistant = json!({"role": "assistant", "content": content});
        let stop_reason = self.stop_reason.clone();
        self.common
            .into_turn(Provider::Anthropic, assistant, calls, verdict, stop_reason)
    }
}

fn append_str(block: &mut Map<String, Value>, key: &str, tail: &str) {
    if tail.is_empty() {
        return;
    }
    match block.get_mut(key) {
        Some(Value::String(s)) => s.push_str(tail),
        _ => {
            block.insert(key.to_owned(), Value::String(tail.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::decode;
    use crate::turn::{Provider, TurnStatus};

    fn ev(kind: &str, body: &str) -> String {
        format!("event: {kind}\ndata: {{\"type\":\"{kind}\"{body}}}\n\n")
    }

    fn tool_turn(stop_reason: &str) -> String {
        [
            ev(
                "message_start",
                r#","message":{"id":"m","role":"assistant","content":[]}"#,
            ),
            ev(
                "content_block_start",
                r#","index":0,"content_block":{"type":"tool_use","id":"t1","name":"w","input":{}}"#,
            ),
            ev(
                "content_block_delta",
                r#","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}"#,
            ),
            ev("content_block_stop", r#","index":0"#),
            ev(
                "message_delta",
                &format!(r#","delta":{{"stop_reason":"{stop_reason}"}}"#),
            ),
            ev("message_stop", ""),
        ]
        .concat()
    }

    #[test]
    fn only_tool_use_then_message_stop_completes() {
        let turn = decode(Provider::Anthropic, tool_turn("tool_use").as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Completed);
        assert_eq!(turn.calls[0].raw_input, r#"{"a":1}"#);
        assert_eq!(turn.calls[0].id.as_deref(), Some("t1"));
        for (reason, status) in [
            ("max_tokens", TurnStatus::Truncated),
            ("refusal", TurnStatus::Refused),
            ("pause_turn", TurnStatus::Incomplete),
            ("end_turn", TurnStatus::Malformed),
            ("mystery", TurnStatus::Incomplete),
        ] {
            let turn = decode(Provider::Anthropic, tool_turn(reason).as_bytes());
            assert_eq!(turn.ending.status, status, "{reason}");
            assert_eq!(turn.ending.stop_reason.as_deref(), Some(reason));
            assert_eq!(
                turn.calls.len(),
                1,
                "calls are reported whatever the ending"
            );
        }
    }

    #[test]
    fn message_stop_must_be_dispatched() {
        let body = tool_turn("tool_use");
        let turn = decode(Provider::Anthropic, body.trim_end_matches('\n').as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Incomplete);
        let turn = decode(Provider::Anthropic, &body.as_bytes()[..body.len() - 1]);
        assert_eq!(turn.ending.status, TurnStatus::Incomplete);
    }

    #[test]
    fn error_event_wins_over_a_later_normal_ending() {
        let mut body = tool_turn("tool_use");
        let at = body.find("event: message_delta").unwrap();
        body.insert_str(
            at,
            &ev(
                "error",
                r#","error":{"type":"overloaded_error","message":"Overloaded"}"#,
            ),
        );
        let turn = decode(Provider::Anthropic, body.as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Errored);
        assert_eq!(
            turn.ending.detail,
            "error event: overloaded_error: Overloaded"
        );
    }
}
