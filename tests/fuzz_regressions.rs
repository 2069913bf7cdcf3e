//! Regression inputs found by fuzzing or by reading the decoders (`tests/fixtures/fuzz-regressions/`),
//! each pinned to the property it once broke.

mod common;

use common::streams::decode_whole;
use turngate::providers::DecoderOptions;
use turngate::turn::Provider;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/fuzz-regressions")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_long_block_type_cannot_grow_the_detail_past_its_bound() {
    // Five tool blocks whose type is 1000 × `x` + `tool_use` with input that is not an object: each note
    // quoted the whole type, giving a 5 KB detail.
    let turn = decode_whole(
        Provider::Anthropic,
        DecoderOptions::default(),
        &fixture("anthropic_long_block_type.sse"),
    );
    assert!(
        turn.ending.detail.len() <= 4096,
        "{}",
        turn.ending.detail.len()
    );
}

#[test]
fn deeply_nested_streamed_gemini_args_are_noted_not_dropped_silently() {
    // Vertex partialArgs assembled into an object nested deeper than serde_json's 128 levels: the history
    // cannot carry it, and the detail must say so.
    let turn = decode_whole(
        Provider::Gemini,
        DecoderOptions::default(),
        &fixture("gemini_deeply_nested_streamed_args.sse"),
    );
    assert!(
        turn.ending.detail.contains("do not parse"),
        "{}",
        turn.ending.detail
    );
}
