//! A deliberately simple, non-incremental model of [`crate::sse::SseFramer`] with its default limits.
//!
//! It splits the whole body into lines first and then interprets them, following the rules written in the
//! `sse` module documentation (WHATWG event stream interpretation plus the framer's departures: stray lines,
//! invalid UTF-8 items, a reported undispatched event). The `sse_framer` fuzz target checks that the real,
//! incremental framer produces exactly what this model produces, for inputs far below the framer's limits
//! (16 MiB lines, 32 MiB events), which this model does not implement.

use crate::sse::{Finish, SseItem, Undispatched};

#[derive(Default)]
struct State {
    data: Vec<String>,
    event: String,
    poisoned: bool,
    last_event_id: String,
    retry: Option<u64>,
}

/// What the model says the framer produces for `input` fed whole: the items of all terminated lines, what
/// `finish` returns, and the last event ID and retry as the framer reports them before `finish` (a field in
/// an unterminated last line is only interpreted by `finish`, which consumes the framer).
pub struct Model {
    /// Items from terminated lines.
    pub items: Vec<SseItem>,
    /// What `finish` reports.
    pub finish: Finish,
    /// Last `id` field (without NUL) of a terminated line.
    pub last_event_id: String,
    /// Last valid `retry` field of a terminated line.
    pub retry: Option<u64>,
}

/// Splits `input` into (line, terminated) pairs: terminators are `\r\n`, `\r` and `\n`.
fn lines(input: &[u8]) -> Vec<(&[u8], bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\n' => {
                out.push((&input[start..i], true));
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push((&input[start..i], true));
                i += if input.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < input.len() {
        out.push((&input[start..], false));
    }
    out
}

fn field_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

impl State {
    fn line(&mut self, raw: &[u8], out: &mut Vec<SseItem>) {
        let Ok(line) = std::str::from_utf8(raw) else {
            self.data.clear();
            self.poisoned = true;
            out.push(SseItem::InvalidUtf8);
            return;
        };
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if std::mem::take(&mut self.poisoned) || self.data.is_empty() {
                self.data.clear();
                return;
            }
            out.push(SseItem::Event {
                event: if event.is_empty() { None } else { Some(event) },
                data: std::mem::take(&mut self.data).join("\n"),
            });
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (name, value, field) = match line.split_once(':') {
            Some((name, value)) => (
                name,
                value.strip_prefix(' ').unwrap_or(value),
                field_name_ok(name),
            ),
            None => (
                line,
                "",
                ["data", "event", "id", "retry"].contains(&line),
            ),
        };
        if !field {
            out.push(SseItem::StrayLine(line.to_owned()));
            return;
        }
        match name {
            "data" if !self.poisoned => self.data.push(value.to_owned()),
            "event" => self.event = value.to_owned(),
            "id" if !value.contains('\0') => self.last_event_id = value.to_owned(),
            "retry" if !value.is_empty() && value.chars().all(|c| c.is_ascii_digit()) => {
                self.retry = Some(value.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
    }
}

/// Runs the model on a whole body.
pub fn frame(input: &[u8]) -> Model {
    let input = input.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(input);
    let mut state = State::default();
    let mut items = Vec::new();
    let mut finish_items = Vec::new();
    let mut before_finish = None;
    for (line, terminated) in lines(input) {
        if terminated {
            state.line(line, &mut items);
        } else {
            before_finish = Some((state.last_event_id.clone(), state.retry));
            state.line(line, &mut finish_items);
        }
    }
    let (last_event_id, retry) =
        before_finish.unwrap_or_else(|| (state.last_event_id.clone(), state.retry));
    let undispatched = (!state.data.is_empty() && !state.poisoned).then(|| Undispatched {
        event: (!state.event.is_empty()).then(|| state.event.clone()),
        data: state.data.join("\n"),
    });
    Model {
        items,
        finish: Finish {
            items: finish_items,
            undispatched,
        },
        last_event_id,
        retry,
    }
}
