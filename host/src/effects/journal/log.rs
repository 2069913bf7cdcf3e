//! The log, `journal.jsonl`: events appended one per line, folded into the journal's calls, rewritten
//! whole by pruning, and kept aside when damaged.
//!
//! The log keeps zeroed room after its last line (as much as it holds, within [`ROOM_BOUNDS`],
//! written out when the log grows), and a line is written over that room: an append then changes
//! neither the log's size nor its blocks, so flushing it writes the line's block and nothing of the
//! filesystem's own records (one write, not a journal commit). Lines of NULs are room, not events.
//!
//! A line is `{"seq", "event"}`, with the call for an intent (`"call": {...}`), `"ahead"` and after the
//! JSON the content of an intent written ahead ([`encode`]), `"settled"` when such a call no longer
//! needs it, and `"damage"` when the journal marked the call as one it cannot vouch for; or the layout
//! line ([`LayoutLine`]), written once the entries this log is found by were flushed, so it lives and
//! dies with the log it vouches for, naming it. A last line without its newline was being
//! written when its writer died and was never durable: it is cut off. Any other line that does not
//! parse is damage: the log as it was is copied to `damaged/` for the user, every call the damaged
//! line could have been about (each whose intent came before it, and any whose intent was lost, with
//! the number, call ID, turn and tool that can still be read of it) is marked damaged (it cannot be
//! undone, and says why), and the log is rewritten from what could be read, so new calls apply again.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

use cap_std::fs::MetadataExt;
use serde::{Deserialize, Serialize};

use super::ahead::Ahead;
use super::state;
use super::{
    CallState, DAMAGED_DIR, Journal, JournalChange, JournalEntry, LOG_FILE, journal_error,
};
use crate::audit::now_ms;
use crate::effects::EffectError;
use crate::root::STATE_DIR;

/// The zeroed room the log adds when it runs out: as much as it holds, within these bounds. A new
/// log's first flush writes a block or two, not a quarter of a megabyte of zeros (0.16 to 0.24 ms of
/// a first call into a new root, BENCHMARKS.md); a long log grows once per 256 KiB of lines.
const ROOM_BOUNDS: (u64, u64) = (4 << 10, 256 << 10);
/// How much of the log is read at a time when looking for what others appended.
const READ_CHUNK: u64 = 16 << 10;
/// How much is read first: what an apply reads when nobody else appended (the start of the room).
const FIRST_LOOK: u64 = 512;
/// How many NULs at the start of a line mark the room (a damaged line may start with a few).
const ROOM_MARK: usize = 64;

/// The layout line: the entries the log with this device and inode is found by (its own in the state
/// directory, the state directory's in the root) are durable ([`super::durable`]). Written only after
/// they were flushed, so wherever it is found in that log they were. It vouches only for the log it is
/// in and that it names: a log made anew (removed by someone, its inode number perhaps reused) does not
/// have it, and a copy put in the log's place names another inode.
#[derive(Serialize, Deserialize)]
struct LayoutLine {
    layout: LogObject,
}

/// A log's device and inode, as its descriptor's `fstat` says.
#[derive(Serialize, Deserialize, PartialEq)]
struct LogObject {
    dev: u64,
    ino: u64,
}

/// The layout line for the log `object` (device, inode).
fn layout_line((dev, ino): (u64, u64)) -> Vec<u8> {
    let mut line = serde_json::to_vec(&LayoutLine {
        layout: LogObject { dev, ino },
    })
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// The device and inode of a log, from its metadata.
pub(super) fn object_of(metadata: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

/// What one line of the log says.
pub(super) enum Line {
    /// A layout line, naming the log it vouches for (device, inode).
    Layout((u64, u64)),
    /// An event about a call.
    Event(Box<Event>),
}

/// One line of the log for `event`: its JSON, then, for an intent written ahead, a tab and the new
/// content of each change (base64, empty for a change without one), so that reading the log finds the
/// end of the content without parsing it (serde_json writes a tab inside a string as `\t`).
fn encode(event: &Event) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(event)?;
    if let Some(ahead) = &event.ahead {
        for file in &ahead.files {
            line.push(b'\t');
            if let Some(file) = file {
                line.extend_from_slice(file.bytes.as_bytes());
            }
        }
    }
    line.push(b'\n');
    Ok(line)
}

/// What one line of the log says (see [`encode`] and [`LayoutLine`]).
fn decode(line: &[u8]) -> Result<Line, String> {
    if line.starts_with(b"{\"layout\":") {
        let LayoutLine { layout } = serde_json::from_slice(line).map_err(|e| e.to_string())?;
        return Ok(Line::Layout((layout.dev, layout.ino)));
    }
    let mut fields = line.split(|b| *b == b'\t');
    let head = fields.next().unwrap_or_default();
    let mut event: Event = serde_json::from_slice(head).map_err(|e| e.to_string())?;
    if let Some(ahead) = &mut event.ahead {
        for file in &mut ahead.files {
            let field = fields.next().ok_or("content missing")?;
            if let Some(file) = file {
                file.bytes = std::str::from_utf8(field)
                    .map_err(|e| e.to_string())?
                    .to_owned();
            }
        }
    }
    if fields.next().is_some() {
        return Err("more content than changes".into());
    }
    Ok(Line::Event(Box::new(event)))
}

/// Where the bytes that are not NUL end in `text` (the room is most of a short log: it is skipped a
/// block at a time).
fn end_of_data(text: &[u8]) -> usize {
    const BLOCK: usize = 512;
    let mut end = text.len();
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let block = &text[start..end];
        // An OR over the block, which the compiler vectorizes, before looking for where data ends.
        if block.iter().fold(0, |any, b| any | b) != 0 {
            return start + block.iter().rposition(|b| *b != 0).map_or(0, |at| at + 1);
        }
        end = start;
    }
    0
}

/// The log's lines in `text`, without the room.
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty() && line.iter().any(|b| *b != 0))
}

/// Where the room begins in `text` (read from the start of a line): the first line that begins with
/// [`ROOM_MARK`] NULs (or with NULs up to the end of the file, at `at_eof`).
fn room_begins(text: &[u8], at_eof: bool) -> Option<usize> {
    let starts = std::iter::once(0).chain(
        text.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(at, _)| at + 1),
    );
    starts.into_iter().find(|&start| {
        let mark = &text[start.min(text.len())..(start + ROOM_MARK).min(text.len())];
        !mark.is_empty() && mark.iter().all(|b| *b == 0) && (mark.len() == ROOM_MARK || at_eof)
    })
}

/// One line of the log.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Event {
    seq: u64,
    event: CallState,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    call: Option<EventCall>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(super) damage: Option<String>,
    /// The call's new content, with an intent written ahead ([`super::ahead`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    ahead: Option<Ahead>,
    /// The call written ahead is settled: its effect is durable without its content in the log.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    settled: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct EventCall {
    call_id: Option<String>,
    turn: Option<String>,
    tool: String,
    time_ms: u64,
    changes: Vec<JournalChange>,
    output: Option<String>,
}

/// The intent line of `entry` (with `state` as its event), with its content when written ahead.
pub(super) fn entry_event(entry: &JournalEntry, state: CallState, ahead: Option<&Ahead>) -> Event {
    Event {
        seq: entry.seq,
        event: state,
        call: Some(EventCall {
            call_id: entry.call_id.clone(),
            turn: entry.turn.clone(),
            tool: entry.tool.clone(),
            time_ms: entry.time_ms,
            changes: entry.changes.clone(),
            output: entry.output.clone(),
        }),
        damage: entry.damage.clone(),
        ahead: ahead.cloned(),
        settled: false,
    }
}

/// The line that moves call `seq` to `state`.
pub(super) fn state_event(seq: u64, state: CallState) -> Event {
    Event {
        seq,
        event: state,
        call: None,
        damage: None,
        ahead: None,
        settled: false,
    }
}

/// The line that marks call `seq` (now in `state`) settled: its effect no longer needs the log.
pub(super) fn settled_event(seq: u64, state: CallState) -> Event {
    Event {
        settled: true,
        ..state_event(seq, state)
    }
}

/// Folds one event into `calls` (and the content of calls written ahead into `ahead`); answers
/// whether the event was about a call the log had not introduced (its intent missing).
fn fold(
    calls: &mut BTreeMap<u64, JournalEntry>,
    ahead: &mut BTreeMap<u64, Ahead>,
    event: Event,
) -> bool {
    if event.settled {
        ahead.remove(&event.seq);
    }
    if let Some(content) = event.ahead {
        ahead.insert(event.seq, content);
    }
    match event.call {
        Some(call) => {
            calls.insert(
                event.seq,
                JournalEntry {
                    seq: event.seq,
                    call_id: call.call_id,
                    turn: call.turn,
                    tool: call.tool,
                    time_ms: call.time_ms,
                    changes: call.changes,
                    output: call.output,
                    state: event.event,
                    damage: event.damage,
                },
            );
            false
        }
        None => match calls.get_mut(&event.seq) {
            Some(entry) => {
                entry.state = event.event;
                if event.damage.is_some() {
                    entry.damage = event.damage;
                }
                false
            }
            None => true,
        },
    }
}

impl Journal {
    /// Folds whatever other processes appended since the last look (or everything, after a rewrite by
    /// another process replaced the log); a damaged log is kept aside and rewritten. Called with the
    /// lock held.
    pub(super) fn refresh(&mut self) -> Result<(), EffectError> {
        let on_disk = self
            .state
            .symlink_metadata(LOG_FILE)
            .map_err(|e| journal_error("cannot stat the log", e))?;
        if (on_disk.dev(), on_disk.ino()) != self.log_object {
            self.reopen_log()?;
            self.calls.clear();
            self.ahead.clear();
            self.layout_durable = false;
        }
        let text = self.read_log_from(self.log_read)?;
        let mut read = Vec::new();
        for line in lines(&text) {
            match decode(line) {
                Ok(line) => read.push(line),
                Err(_) => return self.keep_damaged_aside(),
            }
        }
        for line in read {
            match line {
                Line::Layout(object) => self.layout_durable |= object == self.log_object,
                Line::Event(event) => {
                    fold(&mut self.calls, &mut self.ahead, *event);
                }
            }
        }
        self.log_read += text.len() as u64;
        Ok(())
    }

    /// The complete lines of the log from `offset` (where a line begins) up to its end, where the room
    /// begins. Read from the start, the end is after the last byte that is not a NUL, so
    /// damage anywhere is seen; read on from where this journal last looked, it is where a line begins
    /// with the room's NULs. A last line without its newline was being written when its writer died,
    /// and was never durable: it is zeroed, becoming room.
    fn read_log_from(&mut self, offset: u64) -> Result<Vec<u8>, EffectError> {
        let length = self
            .log
            .metadata()
            .map_err(|e| journal_error("cannot stat the log", e))?
            .len();
        self.log_len = length;
        if length <= offset {
            return Ok(Vec::new());
        }
        let mut text = Vec::new();
        let end = loop {
            let at = offset + text.len() as u64;
            let chunk = match (offset, text.is_empty()) {
                (0, _) => length,
                (_, true) => FIRST_LOOK,
                (_, false) => READ_CHUNK,
            }
            .min(length - at);
            let mut buffer = vec![0; usize::try_from(chunk).unwrap_or(usize::MAX)];
            self.log
                .read_exact_at(&mut buffer, at)
                .map_err(|e| journal_error("cannot read the log", e))?;
            text.extend_from_slice(&buffer);
            let at_eof = offset + text.len() as u64 >= length;
            if offset == 0 {
                break end_of_data(&text);
            }
            if let Some(room) = room_begins(&text, at_eof) {
                break room;
            }
            if at_eof {
                break text.len();
            }
        };
        text.truncate(end);
        let complete = text
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        if complete < text.len() {
            let torn = vec![0; text.len() - complete];
            self.log
                .write_all_at(&torn, offset + complete as u64)
                .map_err(|e| journal_error("cannot zero a torn line in the log", e))?;
            text.truncate(complete);
        }
        Ok(text)
    }

    /// Copies the log as it is to `damaged/`, folds every line that still parses, marks the calls a
    /// damaged line may have been about, and rewrites the log from that.
    fn keep_damaged_aside(&mut self) -> Result<(), EffectError> {
        let text = self.read_log_from(0)?;
        let damaged_dir = state::open_own_dir(&self.state, STATE_DIR, DAMAGED_DIR)?;
        let (mut kept, name) =
            state::create_exclusive(&damaged_dir, &format!("journal-{}", now_ms()), ".jsonl")
                .map_err(|e| journal_error("cannot keep the damaged log aside", e))?;
        kept.write_all(&text)
            .and_then(|()| kept.sync_all())
            .map_err(|e| journal_error("cannot keep the damaged log aside", e))?;
        let aside = format!("{STATE_DIR}/{DAMAGED_DIR}/{name}");
        let note = format!(
            "the journal's record of this call was damaged (the log as it was is kept in `{aside}`)"
        );
        let mut calls = BTreeMap::new();
        let mut ahead = BTreeMap::new();
        for line in lines(&text) {
            match decode(line) {
                Ok(Line::Layout(object)) => self.layout_durable |= object == self.log_object,
                Ok(Line::Event(event)) => {
                    let (seq, state) = (event.seq, event.event);
                    if fold(&mut calls, &mut ahead, *event) {
                        calls.insert(seq, placeholder(seq, state, &note));
                    }
                }
                // The line could have been about any call introduced before it, or introduce one.
                Err(_) => {
                    for call in calls.values_mut() {
                        call.damage.get_or_insert_with(|| note.clone());
                    }
                    if let Some(call) = salvage(line, &note) {
                        calls.entry(call.seq).or_insert(call);
                    }
                }
            }
        }
        self.calls = calls;
        self.ahead = ahead;
        self.rewrite()
    }

    /// Appends one event at the log's end (into its room, which grows when it runs out, see
    /// [`ROOM_BOUNDS`]); `durable` makes it reach the disk before returning.
    pub(super) fn append(&mut self, event: &Event, durable: bool) -> Result<(), EffectError> {
        let line = encode(event).map_err(|e| journal_error("encoding", e))?;
        self.append_line(&line, durable)
    }

    /// Appends the layout line ([`LayoutLine`]), once the entries the log is found by were flushed;
    /// it needs no flush of its own (lost, it only costs the next journal a flush of them again).
    pub(super) fn append_layout(&mut self) -> Result<(), EffectError> {
        self.append_line(&layout_line(self.log_object), false)
    }

    /// Appends one encoded line (see [`Journal::append`]).
    fn append_line(&mut self, line: &[u8], durable: bool) -> Result<(), EffectError> {
        let end = self.log_read + line.len() as u64;
        if end > self.log_len {
            let (least, most) = ROOM_BOUNDS;
            let grown = (end + end.clamp(least, most)).next_multiple_of(4096);
            let zeros = vec![0; usize::try_from(grown - self.log_len).unwrap_or(usize::MAX)];
            self.log
                .write_all_at(&zeros, self.log_len)
                .map_err(|e| journal_error("cannot grow the log", e))?;
            self.log_len = grown;
        }
        self.log
            .write_all_at(line, self.log_read)
            .map_err(|e| journal_error("cannot write the log", e))?;
        if durable {
            super::durable::sync_file(&self.log)
                .map_err(|e| journal_error("cannot sync the log", e))?;
        }
        self.log_read += line.len() as u64;
        Ok(())
    }

    /// Replaces the log with one written from the journal's calls: a new file with a random name,
    /// created exclusively, made durable, then renamed over the log. The new log keeps the layout line
    /// when the old one had it: its own entry is flushed here, the state directory's was already.
    pub(super) fn rewrite(&mut self) -> Result<(), EffectError> {
        let mut text = Vec::new();
        for call in self.calls.values() {
            let intent = entry_event(call, CallState::Intent, self.ahead.get(&call.seq));
            text.extend(encode(&intent).unwrap_or_default());
            if call.state != CallState::Intent {
                text.extend(encode(&state_event(call.seq, call.state)).unwrap_or_default());
            }
        }
        let write = |text: &mut Vec<u8>| -> io::Result<()> {
            let (mut file, temp) = state::create_temporary(&self.state, LOG_FILE)?;
            if self.layout_durable {
                text.splice(0..0, layout_line(object_of(&file.metadata()?)));
            }
            file.write_all(text)?;
            super::durable::sync_file(&file)?;
            self.state.rename(&temp, &self.state, LOG_FILE)?;
            super::durable::sync_dir(&self.state)
        };
        write(&mut text).map_err(|e| journal_error("cannot rewrite the log", e))?;
        self.reopen_log()?;
        self.log_read = text.len() as u64;
        Ok(())
    }

    /// Opens the log again (another file now stands at its name); nothing of it is read yet.
    fn reopen_log(&mut self) -> Result<(), EffectError> {
        self.log = state::open_own_file(&self.state, STATE_DIR, LOG_FILE)?;
        let metadata = self
            .log
            .metadata()
            .map_err(|e| journal_error("cannot stat the log", e))?;
        self.log_object = object_of(&metadata);
        self.log_read = 0;
        self.log_len = metadata.len();
        Ok(())
    }
}

/// A call the log lost the intent of: known only by its number and its last state.
fn placeholder(seq: u64, state: CallState, note: &str) -> JournalEntry {
    JournalEntry {
        seq,
        call_id: None,
        turn: None,
        tool: String::new(),
        time_ms: 0,
        changes: Vec::new(),
        output: None,
        state,
        damage: Some(note.to_owned()),
    }
}

/// What can still be read of a damaged intent line (its number, and the call ID, turn and tool when
/// their whole value is there), as a damaged call; `None` when the line names no call.
fn salvage(line: &[u8], note: &str) -> Option<JournalEntry> {
    let text = String::from_utf8_lossy(line);
    if !text.contains("\"call\":{") {
        return None;
    }
    let seq = text
        .split_once("\"seq\":")?
        .1
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let string = |key: &str| {
        let rest = text.split_once(&format!("\"{key}\":\""))?.1;
        let (value, _) = rest.split_once('"')?;
        (!value.contains('\\')).then(|| value.to_owned())
    };
    let mut call = placeholder(seq, CallState::Intent, note);
    call.call_id = string("call_id");
    call.turn = string("turn");
    call.tool = string("tool").unwrap_or_default();
    Some(call)
}
