//! Gemini `streamGenerateContent?alt=sse` (and Vertex AI) streaming.
//!
//! Each event's data is a `GenerateContentResponse`; the parts of `candidates[0].content.parts` are appended
//! in order (other candidates are ignored). A `functionCall` normally arrives whole: its `args` are kept as raw
//! text (via [`RawValue`], so duplicate keys and formatting reach the gate's strict parser untouched); its `id`
//! is optional. Vertex can stream a call in pieces: a part `functionCall {name, willContinue: true}`, then
//! pieces `functionCall {partialArgs: [{jsonPath, stringValue | numberValue | boolValue | nullValue,
//! willContinue?}], willContinue?}`; a piece whose call-level `willContinue` is not `true` (often an empty
//! `functionCall {}`) closes the call. String pieces for the same path with `willContinue: true` are
//! concatenated. The pieces are assembled into one object (keys in arrival order); a redundant empty
//! `functionCall {}` after a closed streamed call is ignored.
//!
//! Classification (the first fault wins, see [`crate::providers`]):
//! * An `error` key in a chunk -> Errored. Stray non-field lines (a bare JSON body without `data:`) -> Errored
//!   when, joined, they form an `{"error": ...}` object (or an array whose first element is one), else
//!   Malformed.
//! * Malformed: unparseable data, a `functionCall` without a name outside a streamed call, a named call while
//!   a streamed call is open, invalid or conflicting `partialArgs`, content or a different `finishReason` after
//!   the `finishReason`.
//! * `promptFeedback.blockReason` -> Filtered.
//! * No `finishReason` before EOF -> Incomplete.
//! * `finishReason`: `STOP` -> Completed (Incomplete if a streamed call is still open, or an event was left
//!   undispatched at EOF); `MAX_TOKENS` -> Truncated; `SAFETY`, `RECITATION`, `BLOCKLIST`,
//!   `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY`, `IMAGE_PROHIBITED_CONTENT`, `IMAGE_RECITATION` -> Filtered;
//!   `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS` -> Malformed; `OTHER` and unknown
//!   values -> Incomplete.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::providers::{
    Common, ProviderFold, TextDelta, clip, describe_error, describe_undispatched, parse_object,
    str_field,
};
use crate::sse::Undispatched;
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

/// Deepest `jsonPath` accepted in Vertex `partialArgs` (keeps the assembled object's nesting bounded).
const MAX_PATH_SEGMENTS: usize = 64;

const FILTERED: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];
const MALFORMED: &[&str] = &[
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
];

#[derive(Deserialize)]
struct RawResponse {
    candidates: Option<Vec<RawCandidate>>,
}

#[derive(Deserialize)]
struct RawCandidate {
    content: Option<RawContent>,
}

#[derive(Deserialize)]
struct RawContent {
    parts: Option<Vec<RawPart>>,
}

#[derive(Deserialize)]
struct RawPart {
    #[serde(rename = "functionCall")]
    function_call: Option<RawFunctionCall>,
}

#[derive(Deserialize)]
struct RawFunctionCall {
    args: Option<Box<RawValue>>,
}

/// An object assembled from `partialArgs`, keeping keys in arrival order.
#[derive(Debug)]
enum Node {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Leaf(Value),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Node::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
            Node::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Node::Leaf(v) => out.push_str(&v.to_string()),
        }
    }
}

/// Sets (or, with `append`, extends a string at) `path` in `root`.
fn put(root: &mut Node, path: &[Seg], value: Value, append: bool) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("empty jsonPath".into());
    };
    let mut node = root;
    for (depth, seg) in parents.iter().enumerate() {
        let next_is_index = matches!(path[depth + 1], Seg::Index(_));
        let fresh = || {
            if next_is_index {
                Node::Array(Vec::new())
            } else {
                Node::Object(Vec::new())
            }
        };
        node = child(node, seg, fresh)?;
    }
    let existing = match (&mut *node, last) {
        (Node::Object(entries), Seg::Key(k)) => {
            entries.iter_mut().find(|(key, _)| key == k).map(|(_, v)| v)
        }
        (Node::Array(items), Seg::Index(i)) if *i < items.len() => items.get_mut(*i),
        (Node::Array(items), Seg::Index(i)) if *i > items.len() => {
            return Err(format!("array index {i} skips elements"));
        }
        (Node::Array(_), Seg::Index(_)) => None,
        _ => return Err("jsonPath does not match the shape assembled so far".into()),
    };
    match existing {
        Some(Node::Leaf(Value::String(s))) if append => {
            if let Value::String(tail) = value {
                s.push_str(&tail);
            }
            Ok(())
        }
        Some(_) => Err("value set twice".into()),
        None => {
            match (node, last) {
                (Node::Object(entries), Seg::Key(k)) => {
                    entries.push((k.clone(), Node::Leaf(value)))
                }
                (Node::Array(items), _) => items.push(Node::Leaf(value)),
                _ => {}
            }
            Ok(())
        }
    }
}

fn child<'a>(
    node: &'a mut Node,
    seg: &Seg,
    fresh: impl Fn() -> Node,
) -> Result<&'a mut Node, String> {
    match (node, seg) {
        (Node::Object(entries), Seg::Key(k)) => {
            let pos = match entries.iter().position(|(key, _)| key == k) {
                Some(p) => p,
                None => {
                    entries.push((k.clone(), fresh()));
                    entries.len() - 1
                }
            };
            Ok(&mut entries[pos].1)
        }
        (Node::Array(items), Seg::Index(i)) => {
            if *i == items.len() {
                items.push(fresh());
            }
            items
                .get_mut(*i)
                .ok_or_else(|| format!("array index {i} skips elements"))
        }
        _ => Err("jsonPath does not match the shape assembled so far".into()),
    }
}

/// Parses `$.a.b[0].c` (also `$['a']` and `$["a"]`).
fn parse_path(path: &str) -> Result<Vec<Seg>, String> {
    let bad = || format!("unsupported jsonPath {}", clip(path));
    let mut rest = path.strip_prefix('$').ok_or_else(bad)?;
    let mut segs = Vec::new();
    while !rest.is_empty() {
        if segs.len() >= MAX_PATH_SEGMENTS {
            return Err(format!("jsonPath deeper than {MAX_PATH_SEGMENTS} segments"));
        }
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(bad());
            }
            segs.push(Seg::Key(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').ok_or_else(bad)?;
            let inner = &r[..close];
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(key) => segs.push(Seg::Key(key.to_owned())),
                None => segs.push(Seg::Index(inner.parse().map_err(|_| bad())?)),
            }
            rest = &r[close + 1..];
        } else {
            return Err(bad());
        }
    }
    if segs.is_empty() {
        return Err(bad());
    }
    Ok(segs)
}

#[derive(Debug)]
struct StreamedCall {
    /// The starting part, without `willContinue` / `partialArgs` in its `functionCall`.
    part: Map<String, Value>,
    args: Node,
    open: bool,
    open_string: Option<Vec<Seg>>,
}

#[derive(Debug)]
enum Slot {
    Part(Value),
    Streamed(usize),
}

#[derive(Debug)]
enum Input {
    Raw(String),
    Streamed(usize),
}

#[derive(Debug)]
struct CallEntry {
    id: Option<String>,
    name: String,
    input: Input,
    index: usize,
}

/// Fold for [`Provider::Gemini`].
#[derive(Debug, Default)]
pub struct GeminiFold {
    common: Common,
    parts: Vec<Slot>,
    streamed: Vec<StreamedCall>,
    open: Option<usize>,
    last_call_streamed: bool,
    calls: Vec<CallEntry>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    block_reason: Option<String>,
    stray: Option<String>,
}

impl GeminiFold {
    fn close_stray_group(&mut self) {
        let Some(body) = self.stray.take() else {
            return;
        };
        let parsed: Option<Value> = serde_json::from_str(&body).ok();
        let error = match &parsed {
            Some(Value::Object(o)) => o.get("error"),
            Some(Value::Array(a)) => a.first().and_then(|first| first.get("error")),
            _ => None,
        };
        match error {
            Some(e) => self.common.fault(
                TurnStatus::Errored,
                format!("error body in the stream: {}", describe_error(e)),
            ),
            None => self.common.malformed(format!(
                "stray non-field lines that are not a JSON error body: {}",
                clip(&body)
            )),
        }
    }

    fn part(&mut self, part: &Value, raw_args: Option<&RawValue>, out: &mut Vec<TextDelta>) {
        let Some(obj) = part.as_object() else {
            self.common.malformed("a part is not an object");
            return;
        };
        let Some(fc) = obj.get("functionCall") else {
            if obj.get("thought").and_then(Value::as_bool) != Some(true)
                && let Some(text) = str_field(obj, "text")
            {
                self.common.text(text, out);
            }
            self.parts.push(Slot::Part(part.clone()));
            return;
        };
        let Some(fc) = fc.as_object() else {
            self.common.malformed("functionCall is not an object");
            return;
        };
        let name = str_field(fc, "name").filter(|n| !n.is_empty());
        let will_continue = fc.get("willContinue").and_then(Value::as_bool) == Some(true);
        let partial = fc.get("partialArgs");

        if let Some(open) = self.open {
            if name.is_some() {
                self.common.malformed(format!(
                    "functionCall {} started while a streamed call was still open",
                    clip(name.unwrap_or_default())
                ));
                self.open = None;
            } else {
                self.apply_partial(open, partial);
                if !will_continue {
                    self.streamed[open].open = false;
                    self.streamed[open].open_string = None;
                    self.open = None;
                }
                return;
            }
        }
        let Some(name) = name else {
            let empty = partial.is_none() && fc.get("args").is_none();
            if !(empty && self.last_call_streamed) {
                self.common
                    .malformed("functionCall without a name outside a streamed call");
            }
            return;
        };
        let id = str_field(fc, "id").map(str::to_owned);
        let index = self.parts.len();
        if will_continue || partial.is_some() {
            let mut start = obj.clone();
            if let Some(Value::Object(f)) = start.get_mut("functionCall") {
                f.remove("willContinue");
                f.remove("partialArgs");
            }
            let s = self.streamed.len();
            self.streamed.push(StreamedCall {
                part: start,
                args: Node::Object(Vec::new()),
                open: true,
                open_string: None,
            });
            self.apply_partial(s, partial);
            if will_continue {
                self.open = Some(s);
            } else {
                self.streamed[s].open = false;
            }
            self.parts.push(Slot::Streamed(s));
            self.calls.push(CallEntry {
                id,
                name: name.to_owned(),
                input: Input::Streamed(s),
                index,
            });
            self.last_call_streamed = true;
        } else {
            let raw = match (raw_args, fc.get("args")) {
                (Some(raw), _) => raw.get().to_owned(),
                (None, Some(Value::Null)) => "null".to_owned(),
                (None, Some(other)) => other.to_string(),
                (None, None) => "{}".to_owned(),
            };
            self.parts.push(Slot::Part(part.clone()));
            self.calls.push(CallEntry {
                id,
                name: name.to_owned(),
                input: Input::Raw(raw),
                index,
            });
            self.last_call_streamed = false;
        }
    }

    fn apply_partial(&mut self, call: usize, partial: Option<&Value>) {
        let pieces = match partial {
            None | Some(Value::Null) => return,
            Some(Value::Array(p)) => p,
            Some(_) => {
                self.common.malformed("partialArgs is not an array");
                return;
            }
        };
        for piece in pieces {
            if let Err(e) = self.apply_piece(call, piece) {
                self.common.malformed(format!("partialArgs: {e}"));
            }
        }
    }

    fn apply_piece(&mut self, call: usize, piece: &Value) -> Result<(), String> {
        let piece = piece.as_object().ok_or("a piece is not an object")?;
        let path = parse_path(str_field(piece, "jsonPath").ok_or("a piece without jsonPath")?)?;
        let continues = piece.get("willContinue").and_then(Value::as_bool) == Some(true);
        let call = &mut self.streamed[call];
        if let Some(s) = piece.get("stringValue").and_then(Value::as_str) {
            let append = call.open_string.as_ref() == Some(&path);
            put(&mut call.args, &path, Value::String(s.to_owned()), append)?;
            call.open_string = continues.then_some(path);
            return Ok(());
        }
        let value = ["numberValue", "boolValue", "structValue", "listValue"]
            .iter()
            .find_map(|k| piece.get(*k).filter(|v| !v.is_null()).cloned())
            .or_else(|| piece.contains_key("nullValue").then_some(Value::Null))
            .ok_or("a piece without a value")?;
        call.open_string = None;
        put(&mut call.args, &path, value, false)
    }

    fn verdict(&self, undispatched: Option<&Undispatched>) -> (TurnStatus, String) {
        if let Some(block) = &self.block_reason {
            return (
                TurnStatus::Filtered,
                format!("prompt blocked: promptFeedback.blockReason {}", clip(block)),
            );
        }
        let Some(reason) = self.finish_reason.as_deref() else {
            let mut detail = "stream ended without a finishReason".to_owned();
            if let Some(u) = undispatched {
                detail = format!("{detail} ({})", describe_undispatched(u));
            }
            return (TurnStatus::Incomplete, detail);
        };
        let message = self
            .finish_message
            .as_deref()
            .map(|m| format!(": {}", clip(m)))
            .unwrap_or_default();
        match reason {
            "STOP" => {
                if let Some(u) = undispatched {
                    (
                        TurnStatus::Incomplete,
                        format!("finishReason STOP but {}", describe_undispatched(u)),
                    )
                } else if self.open.is_some() {
                    (
                        TurnStatus::Incomplete,
                        "finishReason STOP but a streamed call was still open".into(),
                    )
                } else {
                    (
                        TurnStatus::Completed,
                        format!("finishReason STOP: {} function call(s)", self.calls.len()),
                    )
                }
            }
            "MAX_TOKENS" => (
                TurnStatus::Truncated,
                format!("finishReason MAX_TOKENS{message}"),
            ),
            r if FILTERED.contains(&r) => {
                (TurnStatus::Filtered, format!("finishReason {r}{message}"))
            }
            r if MALFORMED.contains(&r) => {
                (TurnStatus::Malformed, format!("finishReason {r}{message}"))
            }
            r => (
                TurnStatus::Incomplete,
                format!("finishReason {}{message}", clip(r)),
            ),
        }
    }
}

impl ProviderFold for GeminiFold {
    fn common(&mut self) -> &mut Common {
        &mut self.common
    }

    fn stray_line(&mut self, line: String) {
        let body = self.stray.get_or_insert_with(String::new);
        body.push_str(&line);
        body.push('\n');
    }

    fn event(&mut self, _event: Option<String>, data: String, out: &mut Vec<TextDelta>) {
        self.close_stray_group();
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
        let raw: Option<RawResponse> = match serde_json::from_str(&data) {
            Ok(r) => Some(r),
            Err(e) => {
                self.common.malformed(format!("chunk structure: {e}"));
                None
            }
        };
        if let Some(usage) = obj.get("usageMetadata") {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64);
            let answer = count("candidatesTokenCount");
            let thoughts = count("thoughtsTokenCount");
            if answer.is_some() || thoughts.is_some() {
                let tokens = answer.unwrap_or(0).saturating_add(thoughts.unwrap_or(0));
                self.common.output_tokens(tokens);
            }
        }
        if let Some(block) = obj
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            self.block_reason.get_or_insert_with(|| block.to_owned());
        }
        let candidate = match obj.get("candidates") {
            None | Some(Value::Null) => return,
            Some(Value::Array(c)) => match c.first() {
                Some(first) => first,
                None => return,
            },
            Some(_) => {
                self.common.malformed("candidates is not an array");
                return;
            }
        };
        let raw_parts = raw
            .and_then(|r| r.candidates)
            .and_then(|c| c.into_iter().next())
            .and_then(|c| c.content)
            .and_then(|c| c.parts)
            .unwrap_or_default();
        let parts = candidate.get("content").and_then(|c| c.get("parts"));
        match parts {
            None | Some(Value::Null) => {}
            Some(Value::Array(parts)) => {
                if self.finish_reason.is_some() && !parts.is_empty() {
                    self.common.malformed("content after the finishReason");
                }
                for (i, part) in parts.iter().enumerate() {
                    let raw_args = raw_parts
                        .get(i)
                        .and_then(|p| p.function_call.as_ref())
                        .and_then(|f| f.args.as_deref());
                    self.part(part, raw_args, out);
                }
            }
            Some(_) => self.common.malformed("content.parts is not an array"),
        }
        match candidate.get("finishReason") {
            Some(Value::String(reason)) => match &self.finish_reason {
                Some(prev) if prev != reason => self.common.malformed(format!(
                    "finishReason changed from {} to {}",
                    clip(prev),
                    clip(reason)
                )),
                _ => self.finish_reason = Some(reason.clone()),
            },
            None | Some(Value::Null) => {}
            Some(_) => self.common.malformed("finishReason is not a string"),
        }
        if let Some(m) = candidate.get("finishMessage").and_then(Value::as_str) {
            self.finish_message = Some(m.to_owned());
        }
    }

    fn finish(mut self: Box<Self>, undispatched: Option<Undispatched>) -> Turn {
        self.close_stray_group();
        let verdict = self.verdict(undispatched.as_ref());
        for call in self.streamed.iter().filter(|c| c.open) {
            let name = call.part.get("functionCall").and_then(|f| f.get("name"));
            let name = clip(name.and_then(Value::as_str).unwrap_or_default());
            self.common
                .note(format!("streamed call {name} never closed (willContinue)"));
        }
        let assembled: Vec<String> = self
            .streamed
            .iter()
            .map(|c| {
                let mut s = String::new();
                c.args.write(&mut s);
                s
            })
            .collect();
        let mut parts = Vec::with_capacity(self.parts.len());
        for slot in std::mem::take(&mut self.parts) {
            match slot {
                Slot::Part(v) => parts.push(v),
                Slot::Streamed(s) => {
                    let mut part = std::mem::take(&mut self.streamed[s].part);
                    let args: Value = match serde_json::from_str(&assembled[s]) {
                        Ok(args) => args,
                        Err(e) => {
                            self.common.note(format!(
                                "streamed call {s}: assembled args do not parse ({e}); the history carries {{}}"
                            ));
                            json!({})
                        }
                    };
                    if let Some(Value::Object(f)) = part.get_mut("functionCall") {
                        f.insert("args".into(), args);
                    }
                    parts.push(Value::Object(part));
                }
            }
        }
        let calls = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|c| RawCall {
                kind: CallKind::Function,
                id: c.id,
                name: c.name,
                raw_input: match c.input {
                    Input::Raw(r) => r,
                    Input::Streamed(s) => assembled[s].clone(),
                },
                index: c.index,
            })
            .collect();
        let assistant = json!({"role": "model", "parts": parts});
        let stop_reason = self
            .finish_reason
            .clone()
            .or_else(|| self.block_reason.clone());
        self.common
            .into_turn(Provider::Gemini, assistant, calls, verdict, stop_reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("$.a.b[0]['c d'][12]").unwrap(),
            vec![
                Seg::Key("a".into()),
                Seg::Key("b".into()),
                Seg::Index(0),
                Seg::Key("c d".into()),
                Seg::Index(12)
            ]
        );
        assert!(parse_path("a.b").is_err());
        assert!(parse_path("$").is_err());
        assert!(parse_path("$.").is_err());
        assert!(parse_path("$[x]").is_err());
        assert!(parse_path(&format!("${}", ".a".repeat(100))).is_err());
    }

    #[test]
    fn assemble_in_arrival_order() {
        let mut root = Node::Object(Vec::new());
        let p = |s: &str| parse_path(s).unwrap();
        put(&mut root, &p("$.z"), json!("ab"), false).unwrap();
        put(&mut root, &p("$.z"), json!("c"), true).unwrap();
        put(&mut root, &p("$.list[0].n"), json!(1), false).unwrap();
        put(&mut root, &p("$.list[1].n"), json!(2.5), false).unwrap();
        put(&mut root, &p("$.a"), Value::Null, false).unwrap();
        assert!(put(&mut root, &p("$.a"), json!(1), false).is_err());
        assert!(put(&mut root, &p("$.list[5]"), json!(1), false).is_err());
        assert!(put(&mut root, &p("$.z.q"), json!(1), false).is_err());
        let mut s = String::new();
        root.write(&mut s);
        assert_eq!(s, r#"{"z":"abc","list":[{"n":1},{"n":2.5}],"a":null}"#);
    }
}

#[cfg(test)]
mod stream_tests {
    use crate::providers::decode;
    use crate::turn::{Provider, TurnStatus};

    const CALL: &str = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"add\",\"args\":{\"a\":1}}}]}}]}\r\n\r\n";

    #[test]
    fn bare_json_error_body_is_errored() {
        let body = format!(
            "{CALL}{{\n  \"error\": {{\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }}\n}}\n"
        );
        let turn = decode(Provider::Gemini, body.as_bytes());
        assert_eq!(turn.ending.status, TurnStatus::Errored);
        assert_eq!(turn.calls[0].raw_input, r#"{"a":1}"#);
        let body = format!("{CALL}{{\n  \"oops\": 1\n}}\n");
        assert_eq!(
            decode(Provider::Gemini, body.as_bytes()).ending.status,
            TurnStatus::Malformed
        );
    }

    #[test]
    fn finish_reasons() {
        for (reason, status) in [
            ("STOP", TurnStatus::Completed),
            ("MAX_TOKENS", TurnStatus::Truncated),
            ("SPII", TurnStatus::Filtered),
            ("TOO_MANY_TOOL_CALLS", TurnStatus::Malformed),
            ("NEW_REASON", TurnStatus::Incomplete),
        ] {
            let end =
                format!("data: {{\"candidates\":[{{\"finishReason\":\"{reason}\"}}]}}\r\n\r\n");
            let turn = decode(Provider::Gemini, format!("{CALL}{end}").as_bytes());
            assert_eq!(turn.ending.status, status, "{reason}");
            assert_eq!(turn.ending.stop_reason.as_deref(), Some(reason));
        }
        assert_eq!(
            decode(Provider::Gemini, CALL.as_bytes()).ending.status,
            TurnStatus::Incomplete
        );
    }
}
