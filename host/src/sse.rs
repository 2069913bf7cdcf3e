//! Incremental Server-Sent Events framer (WHATWG "event stream interpretation"), hardened for the gate.
//!
//! Bytes go in in any chunking; [`SseItem`]s come out in stream order. The framer buffers bytes and decodes
//! UTF-8 on whole lines only, so a chunk may end inside a UTF-8 sequence or between `\r` and `\n`, and the items
//! produced never depend on where the chunks were split.
//!
//! Departures from a plain WHATWG parser, each on purpose:
//! * A non-empty line that is not a field line is reported as [`SseItem::StrayLine`] instead of being ignored
//!   (Gemini can send a bare, pretty-printed JSON error body in the middle of an SSE stream). A line is a field
//!   line when it is a comment (`:` first), when the text before its first colon is a plain field name
//!   (ASCII letters, digits, `-`, `_`, `.`), or when the whole line is one of `data`, `event`, `id`, `retry`
//!   (a field with an empty value). So `foo: bar` is an unknown field and ignored, while `{`, `}` and
//!   `  "error": {` are stray lines.
//! * A line that is not valid UTF-8 yields [`SseItem::InvalidUtf8`] (never a panic, never a lossy guess), and the
//!   event it belonged to is discarded up to the next blank line.
//! * Lines and events are bounded ([`MAX_LINE_BYTES`], [`MAX_EVENT_BYTES`]): exceeding one yields an error item
//!   and discards the buffered data, so memory stays bounded whatever the input.
//! * [`SseFramer::finish`] reports an event whose terminating blank line never came (it is not dispatched, as
//!   the WHATWG rules say, but the caller learns that it was there).

/// Longest line (without its terminator) the framer buffers: 16 MiB. A longer line yields
/// [`SseItem::LineTooLong`]; its bytes and the event it belonged to are discarded.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Largest `data` buffer of one event (all its `data` lines joined): 32 MiB. A larger event yields
/// [`SseItem::EventTooLarge`] and is discarded up to its terminating blank line.
pub const MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// One thing the framer found in the byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A dispatched event: its `event` field (`None` when absent or empty) and its `data` lines joined with `\n`.
    Event {
        /// The `event` field, `None` when absent or empty.
        event: Option<String>,
        /// The `data` lines joined with `\n`.
        data: String,
    },
    /// A non-empty line that is neither a comment nor a field line (for example a bare JSON body line `{`).
    StrayLine(String),
    /// A line that is not valid UTF-8. The line and the event it belonged to were discarded.
    InvalidUtf8,
    /// A line longer than the line limit. The line and the event it belonged to were discarded.
    LineTooLong,
    /// An event whose data exceeded the event limit. The event was discarded.
    EventTooLarge,
}

/// An event that had data buffered when the stream ended but never got its terminating blank line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undispatched {
    /// Its `event` field, if one was seen.
    pub event: Option<String>,
    /// Its data lines joined with `\n`.
    pub data: String,
}

/// What remained at end of stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Finish {
    /// Items produced by a last line that had no line terminator (a stray line or an error item; never an
    /// `Event`, because an event needs a blank line to be dispatched).
    pub items: Vec<SseItem>,
    /// The event left undispatched at end of stream (data pending without its blank line), if any.
    pub undispatched: Option<Undispatched>,
}

impl Finish {
    /// Whether an unterminated event (data pending without its blank line) was left undispatched.
    pub fn unterminated_event(&self) -> bool {
        self.undispatched.is_some()
    }
}

/// Incremental SSE framer. See the module documentation for the rules.
#[derive(Debug, Clone)]
pub struct SseFramer {
    max_line: usize,
    max_event: usize,
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The current line exceeded `max_line`: drop bytes until its terminator.
    skipping_line: bool,
    /// The previous chunk ended with `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    /// No line has been completed yet (a leading UTF-8 BOM is stripped from the first line).
    first_line: bool,
    data: String,
    has_data: bool,
    event: String,
    /// The current event is being discarded (error inside it) until the next blank line.
    poisoned: bool,
    last_event_id: String,
    retry: Option<u64>,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::with_limits(MAX_LINE_BYTES, MAX_EVENT_BYTES)
    }
}

impl SseFramer {
    /// A framer with custom limits (the defaults are [`MAX_LINE_BYTES`] and [`MAX_EVENT_BYTES`]).
    pub fn with_limits(max_line_bytes: usize, max_event_bytes: usize) -> Self {
        Self {
            max_line: max_line_bytes,
            max_event: max_event_bytes,
            line: Vec::new(),
            skipping_line: false,
            after_cr: false,
            first_line: true,
            data: String::new(),
            has_data: false,
            event: String::new(),
            poisoned: false,
            last_event_id: String::new(),
            retry: None,
        }
    }

    /// The last `id` field seen (WHATWG "last event ID"; an `id` containing NUL is ignored).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The last valid `retry` field seen, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Feeds the next chunk of the body; returns the items completed by it, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseItem> {
        let mut out = Vec::new();
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while !rest.is_empty() {
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.push_line_bytes(rest, &mut out);
                    break;
                }
                Some(pos) => {
                    self.push_line_bytes(&rest[..pos], &mut out);
                    self.end_line(&mut out);
                    let terminator = rest[pos];
                    rest = &rest[pos + 1..];
                    if terminator == b'\r' {
                        match rest.first() {
                            Some(b'\n') => rest = &rest[1..],
                            Some(_) => {}
                            None => self.after_cr = true,
                        }
                    }
                }
            }
        }
        out
    }

    /// Ends the stream. A last line without terminator is interpreted (it can add data to the pending event or
    /// be a stray line) but nothing is dispatched: an event still pending is reported in
    /// [`Finish::undispatched`].
    pub fn finish(mut self) -> Finish {
        let mut items = Vec::new();
        if !self.skipping_line && !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut items);
        }
        let undispatched = (self.has_data && !self.poisoned).then(|| {
            let mut data = std::mem::take(&mut self.data);
            data.pop(); // the '\n' appended after the last data line
            Undispatched {
                event: (!self.event.is_empty()).then(|| std::mem::take(&mut self.event)),
                data,
            }
        });
        Finish {
            items,
            undispatched,
        }
    }

    fn push_line_bytes(&mut self, bytes: &[u8], out: &mut Vec<SseItem>) {
        if self.skipping_line || bytes.is_empty() {
            return;
        }
        if self.line.len().saturating_add(bytes.len()) > self.max_line {
            self.line = Vec::new();
            self.skipping_line = true;
            self.discard_event();
            out.push(SseItem::LineTooLong);
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<SseItem>) {
        if self.skipping_line {
            self.skipping_line = false;
            self.first_line = false;
            return;
        }
        let line = std::mem::take(&mut self.line);
        self.process_line(&line, out);
        // Keep the allocation for the next line unless it grew large.
        if line.capacity() <= 64 * 1024 {
            self.line = line;
            self.line.clear();
        }
    }

    fn discard_event(&mut self) {
        self.data = String::new();
        self.has_data = false;
        self.poisoned = true;
    }

    fn process_line(&mut self, raw: &[u8], out: &mut Vec<SseItem>) {
        let mut raw = raw;
        if self.first_line {
            self.first_line = false;
            raw = raw.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(raw);
        }
        let Ok(line) = std::str::from_utf8(raw) else {
            self.discard_event();
            out.push(SseItem::InvalidUtf8);
            return;
        };
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return; // comment
        }
        let (name, value) = match line.find(':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line, ""),
        };
        let is_field = if line.contains(':') {
            is_field_name(name)
        } else {
            matches!(name, "data" | "event" | "id" | "retry")
        };
        if !is_field {
            out.push(SseItem::StrayLine(line.to_owned()));
            return;
        }
        match name {
            "data" => {
                if self.poisoned {
                    return;
                }
                if self
                    .data
                    .len()
                    .saturating_add(value.len())
                    .saturating_add(1)
                    > self.max_event
                {
                    self.discard_event();
                    out.push(SseItem::EventTooLarge);
                    return;
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "id" if !value.contains('\0') => {
                self.last_event_id.clear();
                self.last_event_id.push_str(value);
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = Some(value.parse().unwrap_or(u64::MAX));
            }
            _ => {} // unknown field: ignored
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseItem>) {
        let event = std::mem::take(&mut self.event);
        if self.poisoned {
            self.poisoned = false;
            return;
        }
        if !self.has_data {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the '\n' appended after the last data line
        self.has_data = false;
        out.push(SseItem::Event {
            event: (!event.is_empty()).then_some(event),
            data,
        });
    }
}

fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseItem {
        SseItem::Event {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    fn all(input: &[u8]) -> (Vec<SseItem>, Finish) {
        let mut f = SseFramer::default();
        let items = f.feed(input);
        (items, f.finish())
    }

    #[test]
    fn basic_fields_and_joining() {
        let (items, fin) =
            all(b"event: a\ndata: x\ndata:  y\ndata\nid: 7\nretry: 10\nfoo: bar\n: comment\n\n");
        assert_eq!(items, vec![ev(Some("a"), "x\n y\n")]);
        assert!(!fin.unterminated_event());
    }

    #[test]
    fn line_endings_all_kinds() {
        let (items, _) = all(b"data: 1\r\rdata: 2\r\n\r\ndata: 3\n\n");
        assert_eq!(items, vec![ev(None, "1"), ev(None, "2"), ev(None, "3")]);
    }

    #[test]
    fn cr_lf_split_across_chunks_is_one_terminator() {
        let mut f = SseFramer::default();
        let mut items = f.feed(b"data: 1\r");
        items.extend(f.feed(b"\n"));
        items.extend(f.feed(b"\r"));
        items.extend(f.feed(b"\ndata: 2\n\n"));
        assert_eq!(items, vec![ev(None, "1"), ev(None, "2")]);
    }

    #[test]
    fn utf8_split_across_chunks() {
        let input = "data: h\u{e9}llo \u{1F600}\n\n".as_bytes();
        for split in 0..input.len() {
            let mut f = SseFramer::default();
            let mut items = f.feed(&input[..split]);
            items.extend(f.feed(&input[split..]));
            assert_eq!(items, vec![ev(None, "h\u{e9}llo \u{1F600}")]);
        }
    }

    #[test]
    fn invalid_utf8_is_an_item_and_discards_the_event() {
        let (items, fin) = all(b"data: ok\ndata: \xff\xfe\n\ndata: next\n\n");
        assert_eq!(items, vec![SseItem::InvalidUtf8, ev(None, "next")]);
        assert!(fin.undispatched.is_none());
    }

    #[test]
    fn stray_lines() {
        let (items, _) = all(b"{\n  \"error\": {\n    \"code\": 503,\n  }\n}\nfoo: bar\n");
        assert_eq!(
            items,
            vec![
                SseItem::StrayLine("{".into()),
                SseItem::StrayLine("  \"error\": {".into()),
                SseItem::StrayLine("    \"code\": 503,".into()),
                SseItem::StrayLine("  }".into()),
                SseItem::StrayLine("}".into()),
            ]
        );
    }

    #[test]
    fn unterminated_event_is_reported_not_dispatched() {
        let (items, fin) = all(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n");
        assert!(items.is_empty());
        assert_eq!(
            fin.undispatched,
            Some(Undispatched {
                event: Some("message_stop".into()),
                data: "{\"type\":\"message_stop\"}".into()
            })
        );
        // Same when the last line itself has no terminator.
        let (items, fin) = all(b"event: message_stop\ndata: {}");
        assert!(items.is_empty());
        assert!(fin.unterminated_event());
        // A trailing stray line without terminator still shows up.
        let (_, fin) = all(b"data: 1\n\n}");
        assert_eq!(fin.items, vec![SseItem::StrayLine("}".into())]);
        assert!(!fin.unterminated_event());
    }

    #[test]
    fn bom_stripped_once() {
        let (items, _) = all(b"\xEF\xBB\xBFdata: a\n\n");
        assert_eq!(items, vec![ev(None, "a")]);
    }

    #[test]
    fn empty_event_name_is_none_and_event_without_data_is_dropped() {
        let (items, _) = all(b"event:\ndata: a\n\nevent: x\n\ndata: b\n\n");
        assert_eq!(items, vec![ev(None, "a"), ev(None, "b")]);
    }

    #[test]
    fn line_limit() {
        let mut f = SseFramer::with_limits(8, 100);
        let mut items = f.feed(b"data: 1\n");
        items.extend(f.feed(b"data: 0123456789"));
        items.extend(f.feed(b"abcdef\n\ndata: 2\n\n"));
        assert_eq!(items, vec![SseItem::LineTooLong, ev(None, "2")]);
        assert!(f.line.capacity() <= 64 * 1024);
    }

    #[test]
    fn event_limit() {
        let mut f = SseFramer::with_limits(100, 10);
        let items = f.feed(b"data: 12345\ndata: 67890\ndata: x\n\ndata: ok\n\n");
        assert_eq!(items, vec![SseItem::EventTooLarge, ev(None, "ok")]);
    }

    #[test]
    fn id_and_retry() {
        let mut f = SseFramer::default();
        f.feed(b"id: 5\nretry: 300\nretry: x\nid: a\0b\n\n");
        assert_eq!(f.last_event_id(), "5");
        assert_eq!(f.retry(), Some(300));
    }
}
