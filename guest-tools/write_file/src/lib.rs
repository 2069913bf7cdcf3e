//! `write_file`: creates a file or replaces its whole content with the given text.
//!
//! The write is atomic (a temporary file in the same directory renamed over the target), so a
//! failure never leaves a half-written file. The parent directory must already exist.

use std::path::Path;

use serde::Deserialize;
use turngate_guest::{Access, Descriptor, Guest, ToolError, atomic_write, describe, parse_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    content: String,
}

struct WriteFile;

impl Guest for WriteFile {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "File to write, relative to the root, e.g. `notes/today.md`. Its directory must exist."
                },
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file, as UTF-8 text."
                }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        });
        describe(
            "write_file",
            "Create a file or replace its entire content with `content`. The write is atomic. The \
             parent directory must already exist (use make_dir). To change part of an existing \
             file, prefer edit_file.",
            &schema,
            &[("/path", Access::Write)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: Input = parse_input(&input)?;
        if input.path.is_empty() {
            return Err(ToolError::InvalidInput("path must not be empty".into()));
        }
        atomic_write(Path::new(&input.path), input.content.as_bytes())?;
        Ok(format!(
            "wrote {} bytes to {}",
            input.content.len(),
            input.path
        ))
    }
}

turngate_guest::export!(WriteFile);
