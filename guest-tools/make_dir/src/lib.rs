//! `make_dir`: creates a directory and any missing parents, like `mkdir -p`.
//!
//! A directory that already exists is fine; a file in the way is an error.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde::Deserialize;
use turngate_guest::{Access, Descriptor, Guest, ToolError, describe, io_error, parse_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
}

fn make(input: &Input) -> Result<String, ToolError> {
    let path = Path::new(&input.path);
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Ok(format!("directory {} already exists", input.path));
        }
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "{} exists and is not a directory",
                input.path
            )));
        }
        // Missing, or a file in the way higher up: `create_dir_all` tells which.
        Err(_) => {}
    }
    fs::create_dir_all(path).map_err(|err| match err.kind() {
        // A file (or a dangling symlink) is in the way on the path.
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory => ToolError::Failed(format!(
            "cannot create directory {}: part of the path exists and is not a directory ({err})",
            input.path
        )),
        _ => io_error(path, err),
    })?;
    Ok(format!("created directory {}", input.path))
}

struct MakeDir;

impl Guest for MakeDir {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Directory to create, relative to the root, e.g. `notes/2024`. Missing parents are created too."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        });
        describe(
            "make_dir",
            "Create a directory and any missing parent directories (like `mkdir -p`). Succeeds if \
             the directory already exists; fails if a file is in the way.",
            &schema,
            &[("/path", Access::Write)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        make(&parse_input(&input)?)
    }
}

turngate_guest::export!(MakeDir);
