//! `line_count`: counts the lines, words and bytes of a file, read through WASI 0.3's filesystem.
//!
//! An example turngate tool in Rust built for WASI 0.3. It implements the `async-tool` world of the
//! repository's `wit/tool.wit`, where `call` is an `async func` (wit-bindgen 0.61 makes it an
//! `async fn`), and reads through `wasi:filesystem@0.3.0` from the `wasip3` crate: an awaited `open-at`
//! from the preopened root, then `read-via-stream`, a `stream<u8>` read 64 KiB at a time, and the
//! stream's future for the error, if any, that ended it. The host serves that filesystem with the same
//! view as a 0.2 tool's: only the approved path, read-only for a tool whose paths are all `read`.
//!
//! Built with `cargo build --release --target wasm32-wasip2` (Rust's standard library still imports
//! WASI 0.2, which the host serves beside 0.3).

#![allow(unsafe_code)] // what `wit_bindgen::generate!` expands to

mod bindings {
    wit_bindgen::generate!({
        path: "../../../../wit",
        world: "async-tool",
    });
}

use bindings::turngate::tool::types::{Access, Descriptor, PathParam, ToolError};
use serde::Deserialize;
use wasip3::filesystem::types::{DescriptorFlags, ErrorCode, OpenFlags, PathFlags};
use wasip3::wit_bindgen::StreamResult;

/// How many bytes one stream read asks for.
const CHUNK: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
}

/// What was counted.
#[derive(Default)]
struct Counts {
    lines: u64,
    words: u64,
    bytes: u64,
    in_word: bool,
}

impl Counts {
    fn add(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        for &byte in chunk {
            if byte == b'\n' {
                self.lines += 1;
            }
            let space = byte.is_ascii_whitespace();
            if !space && !self.in_word {
                self.words += 1;
            }
            self.in_word = !space;
        }
    }
}

/// The tool error for a filesystem `error-code` on `path`.
fn failed(path: &str, code: ErrorCode) -> ToolError {
    let message = format!("{path}: {code:?}");
    match code {
        ErrorCode::NoEntry => ToolError::NotFound(message),
        ErrorCode::Access | ErrorCode::NotPermitted => ToolError::Denied(message),
        _ => ToolError::Failed(message),
    }
}

struct LineCount;

impl bindings::Guest for LineCount {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "Path of the file, relative to the root."}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        Descriptor {
            name: "line_count".into(),
            description: "Count the lines, words and bytes of a file (as `wc` does); answers JSON: `path`, `lines`, `words`, `bytes`.".into(),
            input_schema: schema.to_string(),
            paths: vec![PathParam {
                pointer: "/path".into(),
                access: Access::Read,
            }],
        }
    }

    async fn call(input: String) -> Result<String, ToolError> {
        let Input { path } = serde_json::from_str(&input)
            .map_err(|e| ToolError::InvalidInput(format!("bad input: {e}")))?;
        let (root, _) = wasip3::filesystem::preopens::get_directories()
            .into_iter()
            .next()
            .ok_or_else(|| ToolError::Denied("no filesystem: the host preopened no root".into()))?;
        let file = root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                path.clone(),
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .await
            .map_err(|code| failed(&path, code))?;
        let (mut stream, done) = file.read_via_stream(0);
        let mut counts = Counts::default();
        loop {
            let (result, chunk) = stream.read(Vec::with_capacity(CHUNK)).await;
            counts.add(&chunk);
            if !matches!(result, StreamResult::Complete(_)) {
                break;
            }
        }
        drop(stream);
        done.await.map_err(|code| failed(&path, code))?;
        Ok(serde_json::json!({
            "path": path,
            "lines": counts.lines,
            "words": counts.words,
            "bytes": counts.bytes,
        })
        .to_string())
    }
}

bindings::export!(LineCount with_types_in bindings);
