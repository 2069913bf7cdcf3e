//! Stream-decoding helpers: fixtures and feeding a decoder in chunks.

use std::path::PathBuf;

use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::turn::{Provider, Turn};

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/streams")
}

pub fn read_fixture(file: &str) -> Vec<u8> {
    let path = fixture_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Decodes `body` fed in the given chunk sizes (cycled); returns the turn and the echoed text.
pub fn decode_chunked(
    provider: Provider,
    options: DecoderOptions,
    body: &[u8],
    sizes: &[usize],
) -> (Turn, String) {
    let mut decoder = TurnDecoder::with_options(provider, options);
    let mut echoed = String::new();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        for delta in decoder.feed(&rest[..n]) {
            echoed.push_str(&delta.text);
        }
        rest = &rest[n..];
    }
    let (turn, deltas) = decoder.finish_with_deltas();
    for delta in deltas {
        echoed.push_str(&delta.text);
    }
    (turn, echoed)
}

/// Decodes `body` split at the given points (sorted, deduplicated, clamped).
pub fn decode_split(
    provider: Provider,
    options: DecoderOptions,
    body: &[u8],
    points: &[usize],
) -> Turn {
    let mut points: Vec<usize> = points.iter().map(|p| p % (body.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut decoder = TurnDecoder::with_options(provider, options);
    let mut start = 0;
    for p in points {
        decoder.feed(&body[start..p]);
        start = p;
    }
    decoder.feed(&body[start..]);
    decoder.finish()
}

pub fn decode_whole(provider: Provider, options: DecoderOptions, body: &[u8]) -> Turn {
    decode_chunked(provider, options, body, &[usize::MAX]).0
}

/// Every fixture file (relative path) with the provider its name implies.
pub fn all_fixtures() -> Vec<(String, Provider)> {
    let mut out = Vec::new();
    for sub in ["", "constructed"] {
        let dir = fixture_dir().join(sub);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sse") || n.ends_with(".json"))
            .collect();
        names.sort();
        for name in names {
            let provider = provider_of(&name);
            let rel = if sub.is_empty() {
                name
            } else {
                format!("{sub}/{name}")
            };
            out.push((rel, provider));
        }
    }
    out
}

pub fn provider_of(name: &str) -> Provider {
    if name.starts_with("anthropic_") {
        Provider::Anthropic
    } else if name.starts_with("openai_chat_") {
        Provider::OpenAiChat
    } else if name.starts_with("openai_responses_") {
        Provider::OpenAiResponses
    } else if name.starts_with("gemini_") || name.starts_with("vertex_") {
        Provider::Gemini
    } else {
        panic!("no provider for fixture {name}")
    }
}

/// An Anthropic message ending in `tool_use` whose content is `calls` (`(ID, tool, input)` each),
/// decoded.
pub fn tool_use_turn_of(calls: &[(String, &str, serde_json::Value)]) -> Turn {
    let content: Vec<serde_json::Value> = calls
        .iter()
        .map(|(id, name, input)| {
            serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": input})
        })
        .collect();
    let body = serde_json::json!({
        "id": "m", "type": "message", "role": "assistant", "model": "x", "content": content,
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    let mut decoder = TurnDecoder::new(Provider::Anthropic);
    decoder.feed(body.to_string().as_bytes());
    decoder.finish()
}
