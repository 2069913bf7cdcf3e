//! Arbitrary bytes through the SSE framer: no panic; the same items, `finish` result, last event ID and
//! retry whatever the chunking (whole, one byte at a time, data-derived chunks); with the default limits
//! the result equals the simple whole-body model in `turngate_fuzz::reference`; with small limits (taken
//! from the input) chunking still does not matter and no item exceeds them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turngate_fuzz::harness::{bytewise, self_chunks};
use turngate_fuzz::reference;
use turngate_fuzz::sse::{Finish, SseFramer, SseItem};

#[derive(Debug, PartialEq)]
struct Framed {
    items: Vec<SseItem>,
    finish: Finish,
    last_event_id: String,
    retry: Option<u64>,
}

fn frame(framer: SseFramer, chunks: &[&[u8]]) -> Framed {
    let mut framer = framer;
    let mut items = Vec::new();
    for chunk in chunks {
        items.extend(framer.feed(chunk));
    }
    let last_event_id = framer.last_event_id().to_owned();
    let retry = framer.retry();
    Framed {
        items,
        finish: framer.finish(),
        last_event_id,
        retry,
    }
}

fn check_items(f: &Framed, max_line: usize, max_event: usize) {
    let finish_items = &f.finish.items;
    assert!(finish_items.len() <= 2, "{finish_items:?}");
    assert!(
        !finish_items.iter().any(|i| matches!(i, SseItem::Event { .. })),
        "finish produced an event: {finish_items:?}"
    );
    for item in f.items.iter().chain(finish_items) {
        match item {
            SseItem::Event { event, data } => {
                assert!(!data.contains('\r'), "{item:?}");
                assert!(data.len() < max_event, "{} >= {max_event}", data.len());
                if let Some(e) = event {
                    assert!(!e.is_empty() && !e.contains(['\r', '\n']), "{item:?}");
                    assert!(e.len() <= max_line);
                }
            }
            SseItem::StrayLine(line) => {
                assert!(!line.is_empty() && !line.contains(['\r', '\n']), "{item:?}");
                assert!(!line.starts_with(':'), "{item:?}");
                assert!(line.len() <= max_line);
            }
            _ => {}
        }
    }
    if let Some(u) = &f.finish.undispatched {
        assert!(!u.data.contains('\r') && u.data.len() < max_event);
    }
}

fuzz_target!(|data: &[u8]| {
    // Default limits: far above any fuzz input, so no limit item may appear, and the model applies.
    let whole = frame(SseFramer::default(), &[data]);
    check_items(&whole, usize::MAX, usize::MAX);
    assert!(
        !whole
            .items
            .iter()
            .chain(&whole.finish.items)
            .any(|i| matches!(i, SseItem::LineTooLong | SseItem::EventTooLarge)),
        "a limit item below the default limits"
    );
    let model = reference::frame(data);
    assert_eq!(
        whole,
        Framed {
            items: model.items,
            finish: model.finish,
            last_event_id: model.last_event_id,
            retry: model.retry,
        },
        "framer and model disagree"
    );
    assert_eq!(whole, frame(SseFramer::default(), &self_chunks(data, 0)), "data-derived chunks");
    assert_eq!(whole, frame(SseFramer::default(), &bytewise(data)), "one byte per chunk");

    // Small limits taken from the input: the limit paths, under two chunkings.
    let max_line = 1 + usize::from(data.first().copied().unwrap_or(0)) % 97;
    let max_event = 1 + usize::from(data.last().copied().unwrap_or(0)) * 3 % 241;
    let limited = || SseFramer::with_limits(max_line, max_event);
    let small = frame(limited(), &[data]);
    check_items(&small, max_line, max_event);
    assert_eq!(small, frame(limited(), &self_chunks(data, 0x33)), "data-derived chunks, small limits");
    assert_eq!(small, frame(limited(), &bytewise(data)), "one byte per chunk, small limits");
});
