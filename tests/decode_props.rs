//! Property tests: no input panics a decoder, and chunking never changes the result.

mod common;

use std::sync::OnceLock;

use common::streams::{all_fixtures, decode_split, decode_whole, read_fixture};
use proptest::prelude::*;
use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::sse::{SseFramer, SseItem};
use turngate::turn::Provider;

fn fixtures() -> &'static [(String, Provider, Vec<u8>)] {
    static CELL: OnceLock<Vec<(String, Provider, Vec<u8>)>> = OnceLock::new();
    CELL.get_or_init(|| {
        all_fixtures()
            .into_iter()
            .map(|(file, provider)| {
                let body = read_fixture(&file);
                (file, provider, body)
            })
            .collect()
    })
}

fn provider() -> impl Strategy<Value = Provider> {
    prop::sample::select(Provider::ALL.to_vec())
}

fn options() -> impl Strategy<Value = DecoderOptions> {
    (
        any::<bool>(),
        prop_oneof![Just(usize::MAX), 0usize..4096],
        prop::option::of(0u64..64),
    )
        .prop_map(|(forced, max, max_output_tokens)| DecoderOptions {
            forced_tool_choice: forced,
            max_turn_bytes: max,
            max_output_tokens,
        })
}

/// Bytes that look a bit like SSE so the decoders get past the framing.
fn sse_ish() -> impl Strategy<Value = Vec<u8>> {
    let atoms = prop::sample::select(vec![
        &b"data: "[..],
        b"event: ",
        b"\n",
        b"\r\n",
        b"\r",
        b"\n\n",
        b":",
        b"{",
        b"}",
        b"[DONE]",
        b"\"type\":\"message_start\"",
        b"\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"x\",\"name\":\"n\",\"input\":{}}",
        b"\"type\":\"message_stop\"",
        b"\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}]",
        b"\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"willContinue\":true,\"partialArgs\":[{\"jsonPath\":\"$.a[0]\",\"stringValue\":\"x\",\"willContinue\":true}]}}]},\"finishReason\":\"STOP\"}]",
        b"\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"i\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\"}",
        b",",
        b"\xff",
        b"\xe2\x82",
        b"\xef\xbb\xbf",
    ]);
    prop::collection::vec(atoms, 0..60).prop_map(|v| v.concat())
}

/// Bytes that start like a whole JSON response body (`{` or `[` first) so the decoders take the whole-body
/// path: pieces of every provider's non-streamed shape, brackets, separators and bad bytes.
fn json_ish() -> impl Strategy<Value = Vec<u8>> {
    let atoms = prop::sample::select(vec![
        &b"{"[..],
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b" \n",
        b"\"type\":\"message\"",
        b"\"type\":\"error\",\"error\":{}",
        b"\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}]",
        b"\"stop_reason\":\"tool_use\"",
        b"\"usage\":{\"output_tokens\":7,\"completion_tokens\":7}",
        b"\"choices\":[{\"index\":0,\"message\":{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]",
        b"\"object\":\"response\"",
        b"\"status\":\"completed\"",
        b"\"output\":[{\"id\":\"i\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\",\"arguments\":\"{}\",\"status\":\"completed\"}]",
        b"\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]},\"finishReason\":\"STOP\"}]",
        b"\"usageMetadata\":{\"candidatesTokenCount\":3,\"thoughtsTokenCount\":18446744073709551615}",
        b"\"a\":1",
        b"\xff",
        b"\xef\xbb\xbf",
    ]);
    (
        prop::sample::select(vec![&b"{"[..], b"[", b" {", b"\r\n["]),
        prop::collection::vec(atoms, 0..40),
    )
        .prop_map(|(start, v)| [start.to_vec(), v.concat()].concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_is_irrelevant(
        provider in provider(),
        options in options(),
        body in prop_oneof![prop::collection::vec(any::<u8>(), 0..2048), sse_ish(), json_ish()],
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = decode_whole(provider, options, &body);
        let split = decode_split(provider, options, &body, &points);
        prop_assert!(whole.ending.detail.len() <= 4096, "{}", whole.ending.detail.len());
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn valid_fixture_split_anywhere_gives_the_same_turn(
        pick in any::<prop::sample::Index>(),
        points in prop::collection::vec(any::<usize>(), 1..24),
        forced in any::<bool>(),
    ) {
        let (file, provider, body) = &fixtures()[pick.index(fixtures().len())];
        let options = DecoderOptions { forced_tool_choice: forced, ..DecoderOptions::default() };
        let whole = decode_whole(*provider, options, body);
        let split = decode_split(*provider, options, body, &points);
        prop_assert_eq!(split, whole, "{}", file);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        other in provider(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..16),
        points in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let (_, provider, body) = &fixtures()[pick.index(fixtures().len())];
        let mut body = body.clone();
        for (at, op, byte) in edits {
            if body.is_empty() {
                body.push(byte);
                continue;
            }
            let i = at.index(body.len());
            match op {
                0 => body[i] = byte,
                1 => body.insert(i, byte),
                2 => { body.remove(i); }
                _ => body.truncate(i),
            }
        }
        for p in [*provider, other] {
            let whole = decode_whole(p, DecoderOptions::default(), &body);
            let split = decode_split(p, DecoderOptions::default(), &body, &points);
            prop_assert_eq!(split, whole);
        }
    }

    #[test]
    fn shuffled_events_never_panic(
        pick in any::<prop::sample::Index>(),
        order in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let (_, provider, body) = &fixtures()[pick.index(fixtures().len())];
        let text = String::from_utf8_lossy(body);
        let events: Vec<&str> = text.split_inclusive("\n\n").collect();
        let mut soup = String::new();
        for i in order {
            soup.push_str(events[i.index(events.len())]);
        }
        let mut decoder = TurnDecoder::new(*provider);
        decoder.feed(soup.as_bytes());
        let turn = decoder.finish();
        // A reordered stream may still be a valid one, but never one that completes without its terminator.
        prop_assert!(!turn.ending.detail.is_empty());
    }

    #[test]
    fn framer_items_do_not_depend_on_chunking(
        body in prop_oneof![prop::collection::vec(any::<u8>(), 0..1024), sse_ish()],
        points in prop::collection::vec(any::<usize>(), 0..12),
        max_line in 1usize..64,
        max_event in 1usize..128,
    ) {
        let run = |chunks: &[&[u8]]| {
            let mut framer = SseFramer::with_limits(max_line, max_event);
            let mut items: Vec<SseItem> = Vec::new();
            for c in chunks {
                items.extend(framer.feed(c));
            }
            (items, framer.finish())
        };
        let mut cuts: Vec<usize> = points.iter().map(|p| p % (body.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut chunks = Vec::new();
        let mut start = 0;
        for c in cuts {
            chunks.push(&body[start..c]);
            start = c;
        }
        chunks.push(&body[start..]);
        let (items, finish) = run(&chunks);
        prop_assert_eq!((items.clone(), finish.clone()), run(&[&body]));
        for item in &items {
            match item {
                SseItem::Event { data, event } => {
                    prop_assert!(data.len() <= max_event);
                    prop_assert!(event.as_ref().is_none_or(|e| e.len() <= max_line));
                }
                SseItem::StrayLine(line) => prop_assert!(line.len() <= max_line),
                _ => {}
            }
        }
    }
}
