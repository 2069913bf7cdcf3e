//! Fuzzing support for turngate's stream decoding: the SSE framer and the four provider decoders.
//!
//! # Why the decoding modules are included by path
//!
//! The decoding layer (`host/src/sse.rs`, `host/src/turn.rs`, `host/src/json.rs`, `host/src/providers/`)
//! is pure Rust that only needs serde, serde_json and thiserror, but the `turngate` crate as a whole also
//! depends on wasmtime, whose build with the fuzzer's coverage instrumentation takes well over ten minutes
//! and whose code the fuzzers never reach. So this crate does not depend on `turngate`: it compiles the
//! very same source files as its own modules with `#[path]`. They refer to each other as `crate::sse`,
//! `crate::turn`, `crate::json` and `crate::providers`, which resolve here exactly as in the main crate,
//! because this crate's root declares modules of the same names (the `providers` submodules resolve next
//! to `providers/mod.rs`). What is fuzzed is therefore the decoder code itself, not a copy; if those
//! modules ever gain a dependency on the rest of the crate, this crate stops compiling, which is the
//! signal to keep the layer self-contained.
//!
//! [`harness`] holds the checks the fuzz targets share: feeding one body in several chunkings, comparing
//! the results, and the invariants every decoded [`turn::Turn`] must satisfy.

#[path = "../../src/sse.rs"]
pub mod sse;

#[path = "../../src/turn.rs"]
pub mod turn;

#[path = "../../src/json.rs"]
pub mod json;

#[path = "../../src/providers/mod.rs"]
pub mod providers;

pub mod harness;
pub mod reference;
