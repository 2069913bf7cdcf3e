//! Provider decoders: bytes -> SSE framer -> per-provider event folding -> [`Turn`].
//!
//! [`TurnDecoder`] owns the framing, the byte budget ([`MAX_TURN_BYTES`]) and the mapping of framing errors to
//! [`TurnStatus::Malformed`]; each provider module implements [`ProviderFold`] to fold its events. A body
//! whose first non-whitespace byte is `{` or `[` is a whole JSON response (a non-streamed answer, or a
//! server that ignored `stream: true`): it is read whole, parsed strictly and folded as the events of its
//! streamed equivalent (see `whole.rs`).
//!
//! Classification principle, shared by every provider: the first fault in stream order (a protocol violation,
//! an error event, a framing error, the byte limit) decides the status and cannot be undone by anything that
//! follows; events after a fault are still folded so that every call seen is reported. Without a fault, the
//! provider's terminator and stop reason decide, except that a turn they call completed is truncated when
//! the output limit is known and the reported usage reached it ([`DecoderOptions::max_output_tokens`]).
//! Nothing about a call is surfaced before [`TurnDecoder::finish`].

use serde_json::{Map, Value};

use crate::sse::{Finish, SseFramer, SseItem, Undispatched};
use crate::turn::{Ending, Provider, RawCall, Turn, TurnStatus};

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
mod whole;

/// Most bytes one turn may have: 64 MiB. Bytes beyond it are not read and the turn is
/// [`TurnStatus::Malformed`].
pub const MAX_TURN_BYTES: usize = 64 * 1024 * 1024;

/// Visible text as it streams, for echoing (never tool input, never thinking).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    /// The text, exactly as the provider streamed it.
    pub text: String,
}

/// Decoder options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderOptions {
    /// OpenAI Chat only: the request forced a named tool (`tool_choice: {"type":"function","function":{...}}`).
    /// Then `finish_reason: "stop"` with calls and no refusal is a normal tool turn.
    pub forced_tool_choice: bool,
    /// Byte budget of the turn; [`MAX_TURN_BYTES`] by default.
    pub max_turn_bytes: usize,
    /// The output limit the request asked for, when known. A turn that would be completed but whose
    /// reported usage reached it is [`TurnStatus::Truncated`], whatever its finish reason says (servers
    /// have answered `tool_calls` for turns cut at the limit). The usage read: Anthropic
    /// `usage.output_tokens` (`message_delta`, or the whole message), OpenAI Chat `usage.completion_tokens`
    /// (the chunk that carries it, with `stream_options.include_usage`, or the whole body), Responses
    /// `response.usage.output_tokens`, Gemini `usageMetadata.candidatesTokenCount` plus
    /// `thoughtsTokenCount` (Gemini's `maxOutputTokens` bounds thinking and answer together). The largest
    /// value reported counts. `None` (the default): usage is not compared.
    pub max_output_tokens: Option<u64>,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        Self {
            forced_tool_choice: false,
            max_turn_bytes: MAX_TURN_BYTES,
            max_output_tokens: None,
        }
    }
}

/// Decodes one turn of one provider: a streamed (SSE) body, or a whole JSON response body, told apart by the
/// body's first non-whitespace byte. Feed the body in any chunking, then [`finish`](Self::finish).
pub struct TurnDecoder {
    provider: Provider,
    body: Body,
    fold: Box<dyn ProviderFold + Send>,
    fed: usize,
    max_turn_bytes: usize,
    over_budget: bool,
}

/// What the body has shown itself to be so far.
enum Body {
    /// Only whitespace so far (kept, to be framed if the body turns out to be SSE).
    Undecided(Vec<u8>),
    /// An SSE stream.
    Sse(SseFramer),
    /// A whole JSON body, collected until the end.
    Json(Vec<u8>),
}

impl std::fmt::Debug for TurnDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnDecoder")
            .field("fed", &self.fed)
            .field("over_budget", &self.over_budget)
            .finish()
    }
}

impl TurnDecoder {
    /// A decoder with default options.
    pub fn new(provider: Provider) -> Self {
        Self::with_options(provider, DecoderOptions::default())
    }

    /// A decoder with explicit options.
    pub fn with_options(provider: Provider, options: DecoderOptions) -> Self {
        let mut fold: Box<dyn ProviderFold + Send> = match provider {
            Provider::Anthropic => Box::new(anthropic::AnthropicFold::default()),
            Provider::OpenAiChat => {
                Box::new(openai_chat::ChatFold::new(options.forced_tool_choice))
            }
            Provider::OpenAiResponses => Box::new(openai_responses::ResponsesFold::default()),
            Provider::Gemini => Box::new(gemini::GeminiFold::default()),
        };
        fold.common().max_output_tokens = options.max_output_tokens;
        Self {
            provider,
            body: Body::Undecided(Vec::new()),
            fold,
            fed: 0,
            max_turn_bytes: options.max_turn_bytes,
            over_budget: false,
        }
    }

    /// A decoder for OpenAI Chat (or any provider) that knows whether the request forced a named tool.
    pub fn forced_tool_choice(provider: Provider, forced: bool) -> Self {
        Self::with_options(
            provider,
            DecoderOptions {
                forced_tool_choice: forced,
                ..DecoderOptions::default()
            },
        )
    }

    /// Feeds the next chunk of the response body; returns the visible text deltas it completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<TextDelta> {
        let mut out = Vec::new();
        if self.over_budget {
            return out;
        }
        let room = self.max_turn_bytes - self.fed;
        let take = bytes.len().min(room);
        self.fed += take;
        self.take(&bytes[..take], &mut out);
        if take < bytes.len() {
            self.over_budget = true;
            self.fold.common().fault(
                TurnStatus::Malformed,
                format!(
                    "the turn exceeds the {} byte limit; the rest of the stream was not read",
                    self.max_turn_bytes
                ),
            );
        }
        out
    }

    /// Ends the body and classifies the turn.
    pub fn finish(self) -> Turn {
        self.finish_with_deltas().0
    }

    /// Ends the body and classifies the turn; also returns the visible text that only the end of the body
    /// completed (the text of a whole JSON body, which [`feed`](Self::feed) cannot return before the body is
    /// whole; empty for a stream). Echo these after the ones `feed` returned.
    pub fn finish_with_deltas(mut self) -> (Turn, Vec<TextDelta>) {
        let mut deltas = Vec::new();
        let body = std::mem::replace(&mut self.body, Body::Undecided(Vec::new()));
        let undispatched = match body {
            Body::Json(bytes) => {
                self.whole_body(&bytes, &mut deltas);
                None
            }
            Body::Undecided(pending) => {
                let mut framer = SseFramer::default();
                let items = framer.feed(&pending);
                self.finish_stream(items, framer)
            }
            Body::Sse(framer) => self.finish_stream(Vec::new(), framer),
        };
        (self.fold.finish(undispatched), deltas)
    }

    /// Routes accepted bytes: while only whitespace came, keeps them; the first other byte decides.
    fn take(&mut self, bytes: &[u8], out: &mut Vec<TextDelta>) {
        match &mut self.body {
            Body::Sse(framer) => {
                let items = framer.feed(bytes);
                for item in items {
                    self.item(item, out);
                }
            }
            Body::Json(buffer) => buffer.extend_from_slice(bytes),
            Body::Undecided(pending) => {
                let Some(first) = bytes.iter().find(|b| !whole::is_json_space(**b)) else {
                    pending.extend_from_slice(bytes);
                    return;
                };
                let mut start = std::mem::take(pending);
                if whole::starts_json(*first) {
                    start.extend_from_slice(bytes);
                    self.body = Body::Json(start);
                    return;
                }
                let mut framer = SseFramer::default();
                let items = framer.feed(&start);
                self.body = Body::Sse(framer);
                for item in items {
                    self.item(item, out);
                }
                self.take(bytes, out);
            }
        }
    }

    /// Ends a stream: `items` are still to fold (from the whitespace a body that never decided held), then
    /// the framer's last ones. Text in them is not echoed (whitespace and stray lines carry none).
    fn finish_stream(
        &mut self,
        mut items: Vec<SseItem>,
        framer: SseFramer,
    ) -> Option<Undispatched> {
        let Finish {
            items: last,
            undispatched,
        } = framer.finish();
        items.extend(last);
        let mut sink = Vec::new();
        for item in items {
            self.item(item, &mut sink);
        }
        undispatched
    }

    /// Folds a whole JSON body as the events of its streamed equivalent. A body cut at the byte limit was
    /// already recorded as a fault and is not parsed.
    fn whole_body(&mut self, bytes: &[u8], out: &mut Vec<TextDelta>) {
        if self.over_budget {
            return;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.fold
                .common()
                .malformed("the whole JSON body is not valid UTF-8");
            return;
        };
        let value = match crate::json::parse_strict(text) {
            Ok(value) => value,
            Err(e) => {
                self.fold.common().malformed(format!(
                    "the body starts like a whole JSON response but is not one strict JSON value ({e})"
                ));
                return;
            }
        };
        match whole::events(self.provider, text, &value) {
            Ok(events) => {
                for (event, data) in events {
                    self.fold.event(event, data, out);
                }
            }
            Err(detail) => self.fold.common().malformed(detail),
        }
    }

    fn item(&mut self, item: SseItem, out: &mut Vec<TextDelta>) {
        match item {
            SseItem::Event { event, data } => self.fold.event(event, data, out),
            SseItem::StrayLine(line) => self.fold.stray_line(line),
            SseItem::InvalidUtf8 => self.fold.common().fault(
                TurnStatus::Malformed,
                "a line of the stream is not valid UTF-8",
            ),
            SseItem::LineTooLong => self.fold.common().fault(
                TurnStatus::Malformed,
                format!(
                    "a line of the stream exceeds {} bytes",
                    crate::sse::MAX_LINE_BYTES
                ),
            ),
            SseItem::EventTooLarge => self.fold.common().fault(
                TurnStatus::Malformed,
                format!(
                    "an event of the stream exceeds {} bytes",
                    crate::sse::MAX_EVENT_BYTES
                ),
            ),
        }
    }
}

/// Decodes a whole body at once: a complete SSE stream, or a whole JSON response body (Anthropic
/// `{"type":"message"}`, Chat `{"object":"chat.completion"}`, Responses `{"object":"response"}`, Gemini
/// `generateContent`'s object or `streamGenerateContent`'s JSON array), told apart by the body itself.
pub fn decode(provider: Provider, body: &[u8]) -> Turn {
    decode_with(provider, DecoderOptions::default(), body)
}

/// Decodes a whole body at once, with options.
pub fn decode_with(provider: Provider, options: DecoderOptions, body: &[u8]) -> Turn {
    let mut decoder = TurnDecoder::with_options(provider, options);
    decoder.feed(body);
    decoder.finish()
}

/// The per-provider event fold.
pub trait ProviderFold {
    /// The shared state (first fault, visible text).
    fn common(&mut self) -> &mut Common;
    /// One dispatched SSE event.
    fn event(&mut self, event: Option<String>, data: String, out: &mut Vec<TextDelta>);
    /// A non-field line. A protocol violation unless the provider says otherwise.
    fn stray_line(&mut self, line: String) {
        self.common().fault(
            TurnStatus::Malformed,
            format!("stray non-field line in the stream: {}", clip(&line)),
        );
    }
    /// End of stream; `undispatched` is an event left without its terminating blank line.
    fn finish(self: Box<Self>, undispatched: Option<Undispatched>) -> Turn;
}

/// State every fold shares: the first fault, visible text, notes for the detail, and the output usage
/// reported against the known output limit.
#[derive(Debug, Default)]
pub struct Common {
    fault: Option<(TurnStatus, String)>,
    text: String,
    notes: Vec<String>,
    output_tokens: Option<u64>,
    max_output_tokens: Option<u64>,
}

impl Common {
    /// Records a fault; only the first one counts. The detail is clipped, since it may quote the stream.
    pub fn fault(&mut self, status: TurnStatus, detail: impl Into<String>) {
        if self.fault.is_none() {
            self.fault = Some((status, clip_note(detail.into())));
        }
    }

    /// Records a protocol violation.
    pub fn malformed(&mut self, detail: impl Into<String>) {
        self.fault(TurnStatus::Malformed, detail);
    }

    /// Whether a fault was recorded.
    pub fn has_fault(&self) -> bool {
        self.fault.is_some()
    }

    /// Appends visible text and reports it as a delta.
    pub fn text(&mut self, text: &str, out: &mut Vec<TextDelta>) {
        if !text.is_empty() {
            self.text.push_str(text);
            out.push(TextDelta {
                text: text.to_owned(),
            });
        }
    }

    /// Records the output tokens the provider reported (see [`DecoderOptions::max_output_tokens`]); the
    /// largest value reported counts.
    pub fn output_tokens(&mut self, tokens: u64) {
        self.output_tokens = Some(self.output_tokens.map_or(tokens, |seen| seen.max(tokens)));
    }

    /// Adds a remark to the final detail (for example a tool input replaced by `{}` in the history). Each
    /// remark is clipped here, once, so no caller can make the detail grow with the stream.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(clip_note(note.into()));
    }

    /// Builds the turn, the finish step every fold shares: a completed `verdict` is truncated when the
    /// reported output usage reached the known output limit; a recorded fault overrides `verdict`; without one,
    /// call IDs that are not unique make the turn Malformed (two results would carry the same ID, so no
    /// answer could be matched to its call); `stop_reason` is kept either way. Calls without an ID (Gemini
    /// answers by order) are not compared.
    pub fn into_turn(
        mut self,
        provider: Provider,
        assistant: Value,
        calls: Vec<RawCall>,
        verdict: (TurnStatus, String),
        stop_reason: Option<String>,
    ) -> Turn {
        if let Some(id) = repeated_id(&calls) {
            self.malformed(format!(
                "call ID {} appears more than once in the turn (call IDs must be unique)",
                clip(id)
            ));
        }
        let verdict = match (verdict, self.output_tokens, self.max_output_tokens) {
            ((TurnStatus::Completed, said), Some(used), Some(limit)) if used >= limit => (
                TurnStatus::Truncated,
                format!(
                    "the reported usage, {used} output tokens, reached the output limit of {limit}: the turn was cut, whatever its ending said ({said})"
                ),
            ),
            (verdict, ..) => verdict,
        };
        let (status, mut detail) = self.fault.unwrap_or(verdict);
        const MAX_NOTES: usize = 5;
        for note in self.notes.iter().take(MAX_NOTES) {
            detail.push_str("; ");
            detail.push_str(note);
        }
        if self.notes.len() > MAX_NOTES {
            detail.push_str(&format!("; and {} more", self.notes.len() - MAX_NOTES));
        }
        Turn {
            provider,
            assistant,
            calls,
            ending: Ending {
                status,
                stop_reason,
                detail,
            },
            text: self.text,
        }
    }
}

/// The first non-empty call ID that an earlier call of the turn already carries.
fn repeated_id(calls: &[RawCall]) -> Option<&str> {
    let mut seen = std::collections::BTreeSet::new();
    calls
        .iter()
        .filter_map(|call| call.id.as_deref())
        .filter(|id| !id.is_empty())
        .find(|id| !seen.insert(*id))
}

/// Parses an event's data as a JSON object, recording a violation otherwise.
pub(crate) fn parse_object(
    common: &mut Common,
    what: &str,
    data: &str,
) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(map)) => Some(map),
        Ok(_) => {
            common.malformed(format!("{what}: data is not a JSON object: {}", clip(data)));
            None
        }
        Err(err) => {
            common.malformed(format!(
                "{what}: data is not valid JSON ({err}): {}",
                clip(data)
            ));
            None
        }
    }
}

/// Explains an undispatched event for a detail message.
pub(crate) fn describe_undispatched(u: &Undispatched) -> String {
    match &u.event {
        Some(name) => format!(
            "a final `{}` event had no terminating blank line and was not dispatched",
            clip(name)
        ),
        None => "a final event had no terminating blank line and was not dispatched".to_owned(),
    }
}

/// Formats a provider error object (`{"type"?, "code"?, "status"?, "message"?}`) for a detail message.
pub(crate) fn describe_error(error: &Value) -> String {
    let field = |k: &str| match error.get(k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let mut parts: Vec<String> = Vec::new();
    for key in ["type", "code", "status"] {
        if let Some(v) = field(key)
            && !parts.contains(&v)
        {
            parts.push(v);
        }
    }
    let head = parts.join(" / ");
    match (head.is_empty(), field("message")) {
        (false, Some(m)) => clip(&format!("{head}: {m}")),
        (true, Some(m)) => clip(&m),
        (false, None) => clip(&head),
        (true, None) => clip(&error.to_string()),
    }
}

/// Shortens text for a detail message (at a char boundary).
/// Longest fault detail or note kept, in bytes (each quoted value inside is already [`clip`]ped).
const MAX_NOTE_BYTES: usize = 600;

fn clip_note(note: String) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note;
    }
    let mut end = MAX_NOTE_BYTES;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A string field of a JSON object.
/// Parses the data of a protocol whose events are named after `data.type` (Anthropic, OpenAI Responses):
/// the data must be an object with a string `type`, equal to the `event:` name when there is one. Returns
/// the type and the object, or records why the event is malformed.
pub(crate) fn typed_event(
    common: &mut Common,
    event: Option<&str>,
    data: &str,
) -> Option<(String, Map<String, Value>)> {
    let what = clip(event.unwrap_or("event"));
    let obj = parse_object(common, &what, data)?;
    let Some(kind) = str_field(&obj, "type") else {
        common.malformed(format!("{what}: data has no string type"));
        return None;
    };
    if let Some(name) = event
        && name != kind
    {
        common.malformed(format!(
            "event name {} differs from data.type {}",
            clip(name),
            clip(kind)
        ));
        return None;
    }
    Some((kind.to_owned(), obj))
}

pub(crate) fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_respects_char_boundaries() {
        let s = "é".repeat(400);
        let c = clip(&s);
        assert!(c.len() <= 304);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn describe_error_shapes() {
        let e = serde_json::json!({"type":"overloaded_error","message":"Overloaded"});
        assert_eq!(describe_error(&e), "overloaded_error: Overloaded");
        let e = serde_json::json!({"code":503,"message":"busy","status":"UNAVAILABLE"});
        assert_eq!(describe_error(&e), "503 / UNAVAILABLE: busy");
    }

    #[test]
    fn byte_budget_is_exact_and_chunking_independent() {
        let body = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";
        let opts = DecoderOptions {
            max_turn_bytes: 10,
            ..DecoderOptions::default()
        };
        let whole = decode_with(Provider::Anthropic, opts, body);
        assert_eq!(whole.ending.status, TurnStatus::Malformed);
        let mut d = TurnDecoder::with_options(Provider::Anthropic, opts);
        for b in body {
            d.feed(std::slice::from_ref(b));
        }
        assert_eq!(d.finish(), whole);
    }
}
