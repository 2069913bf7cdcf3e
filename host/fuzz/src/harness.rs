//! Checks shared by the fuzz targets.
//!
//! # Chunkings
//!
//! A fuzz input is used verbatim as the response body, so the seed corpora are the `.sse` fixtures as they
//! are. The chunk boundaries are derived from the input itself ([`self_chunks`]): at each chunk start, the
//! byte found there gives the length of the chunk (1 to 67 bytes). A mutation anywhere therefore also moves
//! the boundaries after it, so the fuzzer explores chunkings without a header that would break the seeds.
//! Every body is also fed one byte at a time ([`bytewise`]), which puts a boundary at every position (inside
//! every UTF-8 sequence, between every `\r` and `\n`, at the byte budget).
//!
//! # Invariants
//!
//! For every body, [`check_decoder`] asserts (a panic is what libFuzzer reports):
//! * the decoder never panics;
//! * the turn and the text deltas are the same whatever the chunking;
//! * the concatenated text deltas equal [`Turn::text`];
//! * [`crate::turn::Ending::detail`] is non-empty and at most 4096 bytes (the bound `tests/decode_props.rs`
//!   asserts);
//! * every [`RawCall::index`] points at the matching call in [`Turn::assistant`] (for OpenAI Responses, an
//!   item of the type its [`CallKind`] names);
//! * a completed turn carries a stop reason, and its calls' non-empty IDs are unique;
//! * a body larger than the byte budget never yields a completed turn;
//! * for OpenAI Chat, `forced_tool_choice` changes nothing but a `finish_reason: "stop"` turn with calls,
//!   from Malformed to Completed;
//! * the turn serializes to JSON.

use serde_json::Value;

use crate::providers::{DecoderOptions, TextDelta, TurnDecoder};
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

/// Longest chunk [`self_chunks`] produces.
pub const MAX_CHUNK: usize = 67;

/// Splits `data` into chunks whose lengths come from the data: a chunk starting at `i` is
/// `1 + (data[i] ^ salt) % MAX_CHUNK` bytes long (cut at the end of the data).
pub fn self_chunks(data: &[u8], salt: u8) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut rest = data;
    while let Some(&b) = rest.first() {
        let n = (1 + usize::from(b ^ salt) % MAX_CHUNK).min(rest.len());
        let (head, tail) = rest.split_at(n);
        chunks.push(head);
        rest = tail;
    }
    chunks
}

/// `data` one byte per chunk.
pub fn bytewise(data: &[u8]) -> Vec<&[u8]> {
    data.chunks(1).collect()
}

/// A turn and the text deltas echoed while decoding it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The turn `finish` returned.
    pub turn: Turn,
    /// Every delta's text, in order, across all `feed` calls and `finish_with_deltas`.
    pub deltas: Vec<String>,
}

/// Feeds `chunks` in order (an empty chunk list feeds nothing) and finishes.
pub fn decode_chunks(provider: Provider, options: DecoderOptions, chunks: &[&[u8]]) -> Decoded {
    let mut decoder = TurnDecoder::with_options(provider, options);
    let mut deltas = Vec::new();
    for chunk in chunks {
        deltas.extend(
            decoder
                .feed(chunk)
                .into_iter()
                .map(|TextDelta { text }| text),
        );
    }
    let (turn, last) = decoder.finish_with_deltas();
    deltas.extend(last.into_iter().map(|TextDelta { text }| text));
    Decoded { turn, deltas }
}

/// Asserts that `got` equals `want`; on failure, says which chunking broke it and where they first differ.
#[track_caller]
pub fn assert_same(want: &Decoded, got: &Decoded, what: &str) {
    if want == got {
        return;
    }
    let a = format!("{want:#?}");
    let b = format!("{got:#?}");
    let at = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(0);
    let around = |s: &str| {
        s.lines()
            .skip(at.saturating_sub(3))
            .take(8)
            .collect::<Vec<_>>()
            .join("\n")
    };
    panic!(
        "{what}: result differs from the whole-body decode (first difference at line {at} of the debug dump)\n--- whole ---\n{}\n--- {what} ---\n{}",
        around(&a),
        around(&b)
    );
}

/// A byte budget taken from the body (first and last byte), somewhere in `0..=len`.
pub fn budget_for(data: &[u8]) -> usize {
    let (Some(&first), Some(&last)) = (data.first(), data.last()) else {
        return 0;
    };
    (usize::from(first) * 131 + usize::from(last) * 7919) % (data.len() + 1)
}

/// Everything a decoded turn must satisfy on its own.
pub fn check_turn(provider: Provider, decoded: &Decoded) {
    let turn = &decoded.turn;
    assert_eq!(turn.provider, provider);
    assert_eq!(
        decoded.deltas.concat(),
        turn.text,
        "the echoed deltas are not the turn's text"
    );
    let detail = &turn.ending.detail;
    assert!(!detail.is_empty(), "empty detail");
    assert!(
        detail.len() <= 4096,
        "detail of {} bytes (status {}): {}...",
        detail.len(),
        turn.ending.status,
        &detail[..detail.floor_char_boundary(600)]
    );
    if turn.ending.status == TurnStatus::Completed {
        assert!(
            turn.ending.stop_reason.is_some(),
            "completed without a stop reason"
        );
        let mut ids: Vec<&str> = turn
            .calls
            .iter()
            .filter_map(|c| c.id.as_deref())
            .filter(|id| !id.is_empty())
            .collect();
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all, "a completed turn repeats a call ID");
    }
    for call in &turn.calls {
        check_call_position(provider, &turn.assistant, call);
    }
    serde_json::to_string(turn).expect("a turn serializes");
}

fn check_call_position(provider: Provider, assistant: &Value, call: &RawCall) {
    let at = |v: Option<&Value>| -> Value {
        v.cloned().unwrap_or_else(|| {
            panic!(
                "call {call:?}: index {} is not a position in the assistant content",
                call.index
            )
        })
    };
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    match provider {
        Provider::Anthropic => {
            let block = at(assistant.pointer(&format!("/content/{}", call.index)));
            assert_eq!(
                str_at(&block, "/type").as_deref(),
                Some("tool_use"),
                "{call:?}"
            );
            assert_eq!(str_at(&block, "/id"), call.id, "{call:?}");
            assert_eq!(
                str_at(&block, "/name").unwrap_or_default(),
                call.name,
                "{call:?}"
            );
        }
        Provider::OpenAiChat => {
            let entry = at(assistant.pointer(&format!("/tool_calls/{}", call.index)));
            assert_eq!(str_at(&entry, "/id"), call.id, "{call:?}");
            assert_eq!(
                str_at(&entry, "/function/name").as_deref(),
                Some(call.name.as_str())
            );
            assert_eq!(
                str_at(&entry, "/function/arguments").as_deref(),
                Some(call.raw_input.as_str())
            );
        }
        Provider::OpenAiResponses => {
            let item = at(assistant.pointer(&format!("/{}", call.index)));
            let (item_type, id) = match call.kind {
                CallKind::Function => ("function_call", "/call_id"),
                CallKind::LocalShell => ("local_shell_call", "/call_id"),
                CallKind::Shell => ("shell_call", "/call_id"),
                CallKind::ApplyPatch => ("apply_patch_call", "/call_id"),
                CallKind::CustomTool => ("custom_tool_call", "/call_id"),
                CallKind::ToolSearch => ("tool_search_call", "/call_id"),
                CallKind::Computer => ("computer_call", "/call_id"),
                CallKind::McpApproval => ("mcp_approval_request", "/id"),
            };
            assert_eq!(
                str_at(&item, "/type").as_deref(),
                Some(item_type),
                "{call:?}"
            );
            assert_eq!(str_at(&item, id), call.id, "{call:?}");
        }
        Provider::Gemini => {
            let part = at(assistant.pointer(&format!("/parts/{}", call.index)));
            let fc = part
                .get("functionCall")
                .and_then(Value::as_object)
                .unwrap_or_else(|| panic!("{call:?}: part {part} has no functionCall object"));
            assert_eq!(
                fc.get("name").and_then(Value::as_str),
                Some(call.name.as_str()),
                "{call:?}"
            );
        }
    }
}

/// Decodes `data` whole, byte by byte and in data-derived chunks with `options`, checks the turn, and
/// asserts that every chunking gives the same result. Returns the whole-body result.
pub fn check_chunkings(provider: Provider, options: DecoderOptions, data: &[u8]) -> Decoded {
    let whole = decode_chunks(provider, options, &[data]);
    check_turn(provider, &whole);
    assert_same(
        &whole,
        &decode_chunks(provider, options, &self_chunks(data, 0)),
        "data-derived chunks",
    );
    assert_same(
        &whole,
        &decode_chunks(provider, options, &bytewise(data)),
        "one byte per chunk",
    );
    whole
}

/// The whole check for one provider target.
pub fn check_decoder(provider: Provider, data: &[u8]) {
    let plain = DecoderOptions::default();
    let whole = check_chunkings(provider, plain, data);

    if provider == Provider::OpenAiChat {
        let forced = DecoderOptions {
            forced_tool_choice: true,
            ..plain
        };
        let with_forced = check_chunkings(provider, forced, data);
        check_forced(&whole.turn, &with_forced.turn);
    }

    // A byte budget inside the body: the same under any chunking, and never a completed turn when cut.
    let budget = budget_for(data);
    let options = DecoderOptions {
        max_turn_bytes: budget,
        forced_tool_choice: data.len() % 2 == 1,
        ..DecoderOptions::default()
    };
    let cut = decode_chunks(provider, options, &[data]);
    check_turn(provider, &cut);
    assert_same(
        &cut,
        &decode_chunks(provider, options, &self_chunks(data, 0x5a)),
        "data-derived chunks under a byte budget",
    );
    if data.len() > budget {
        assert_ne!(
            cut.turn.ending.status,
            TurnStatus::Completed,
            "a body over the byte budget ({} > {budget}) completed",
            data.len()
        );
    }
}

/// `forced_tool_choice` only turns a `stop` turn with calls from Malformed into Completed.
fn check_forced(plain: &Turn, forced: &Turn) {
    if plain == forced {
        return;
    }
    assert_eq!(plain.assistant, forced.assistant);
    assert_eq!(plain.calls, forced.calls);
    assert_eq!(plain.text, forced.text);
    assert_eq!(plain.ending.stop_reason, forced.ending.stop_reason);
    assert_eq!(plain.ending.stop_reason.as_deref(), Some("stop"));
    assert!(!plain.calls.is_empty());
    assert_eq!(plain.ending.status, TurnStatus::Malformed, "{plain:?}");
    assert_eq!(forced.ending.status, TurnStatus::Completed, "{forced:?}");
}
