//! `delete_file`: deletes one file or symlink.
//!
//! A symlink is removed itself, never its target. Directories are refused.

use std::fs;
use std::path::Path;

use serde::Deserialize;
use turngate_guest::{Access, Descriptor, Guest, ToolError, describe, io_error, parse_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
}

fn delete(input: &Input) -> Result<String, ToolError> {
    let path = Path::new(&input.path);
    // Not followed: a symlink to a directory is a symlink here, and is what gets removed.
    let meta = fs::symlink_metadata(path).map_err(|err| io_error(path, err))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory; delete_file removes files only",
            input.path
        )));
    }
    fs::remove_file(path).map_err(|err| io_error(path, err))?;
    let what = if meta.is_symlink() { "symlink" } else { "file" };
    Ok(format!("deleted {what} {}", input.path))
}

struct DeleteFile;

impl Guest for DeleteFile {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "File or symlink to delete, relative to the root. A symlink is removed itself, not its target."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        });
        describe(
            "delete_file",
            "Delete a file or a symlink (the link itself, never its target). Directories are not \
             deleted.",
            &schema,
            &[("/path", Access::Write)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        delete(&parse_input(&input)?)
    }
}

turngate_guest::export!(DeleteFile);
