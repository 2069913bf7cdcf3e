//! `edit_file`: replaces an exact piece of text in a UTF-8 file.
//!
//! `old_string` must occur exactly once, unless `replace_all` is set, so an edit never lands in an
//! unexpected place. The file is rewritten atomically.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use turngate_guest::{
    Access, Descriptor, Guest, ToolError, atomic_write, describe, io_error, looks_binary,
    parse_input,
};

/// The largest file edit_file loads, in bytes.
const MAX_FILE: u64 = 16 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// Why [`apply_edit`] did not edit.
#[derive(Debug, PartialEq)]
enum EditError {
    /// `old_string` does not occur.
    NotFound,
    /// `old_string` occurs this many times and `replace_all` is not set.
    Ambiguous(usize),
}

/// Replaces `old` with `new` in `content`: its only occurrence, or every (non-overlapping)
/// occurrence when `replace_all` is set. Returns the new content and how many replacements.
fn apply_edit(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), EditError> {
    let count = content.matches(old).count();
    match count {
        0 => Err(EditError::NotFound),
        1 => Ok((content.replacen(old, new, 1), 1)),
        _ if replace_all => Ok((content.replace(old, new), count)),
        _ => Err(EditError::Ambiguous(count)),
    }
}

fn edit(input: &Input) -> Result<String, ToolError> {
    if input.old_string.is_empty() {
        return Err(ToolError::InvalidInput(
            "old_string must not be empty; use write_file to create or replace a whole file".into(),
        ));
    }
    if input.old_string == input.new_string {
        return Err(ToolError::InvalidInput(
            "old_string and new_string are the same; there is nothing to change".into(),
        ));
    }
    let path = Path::new(&input.path);
    let file = File::open(path).map_err(|err| io_error(path, err))?;
    let meta = file.metadata().map_err(|err| io_error(path, err))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory; edit_file edits files only",
            input.path
        )));
    }
    if meta.len() > MAX_FILE {
        return Err(ToolError::Failed(format!(
            "{} is {} bytes; edit_file edits files up to {} MiB",
            input.path,
            meta.len(),
            MAX_FILE / (1024 * 1024)
        )));
    }
    let mut bytes = Vec::new();
    // Read at most one byte over the limit, in case the file grew since `metadata`.
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| io_error(path, err))?;
    if u64::try_from(bytes.len()).map_or(true, |len| len > MAX_FILE) {
        return Err(ToolError::Failed(format!(
            "{} is larger than {} MiB; edit_file edits files up to that size",
            input.path,
            MAX_FILE / (1024 * 1024)
        )));
    }
    let content = match String::from_utf8(bytes) {
        Ok(content) if !looks_binary(content.as_bytes()) => content,
        _ => {
            return Err(ToolError::Failed(format!(
                "{} looks binary (NUL byte or invalid UTF-8); edit_file edits UTF-8 text only",
                input.path
            )));
        }
    };
    let (edited, count) = apply_edit(
        &content,
        &input.old_string,
        &input.new_string,
        input.replace_all,
    )
    .map_err(|err| match err {
        EditError::NotFound => ToolError::Failed(format!("old_string not found in {}", input.path)),
        EditError::Ambiguous(count) => ToolError::Failed(format!(
            "old_string occurs {count} times in {}; add surrounding context to make it unique, \
             or set replace_all to replace every occurrence",
            input.path
        )),
    })?;
    atomic_write(path, edited.as_bytes())?;
    let plural = if count == 1 { "" } else { "s" };
    Ok(format!(
        "made {count} replacement{plural} in {}",
        input.path
    ))
}

struct EditFile;

impl Guest for EditFile {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "File to edit, relative to the root, e.g. `src/main.rs`."
                },
                "old_string": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Exact text to replace, including whitespace and indentation. It must occur exactly once unless replace_all is true."
                },
                "new_string": {
                    "type": "string",
                    "description": "Text to put in its place; must differ from old_string. Empty to delete old_string."
                },
                "replace_all": {
                    "type": "boolean",
                    "default": false,
                    "description": "Replace every occurrence of old_string instead of requiring exactly one."
                }
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        });
        describe(
            "edit_file",
            "Replace an exact piece of text in a UTF-8 text file. `old_string` must match the \
             file exactly (read the file first) and occur once, unless `replace_all` is set. The \
             file is rewritten atomically.",
            &schema,
            &[("/path", Access::Write)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        edit(&parse_input(&input)?)
    }
}

turngate_guest::export!(EditFile);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_match_is_replaced() {
        assert_eq!(
            apply_edit("let a = 1;\nlet b = 2;\n", "b = 2", "b = 3", false),
            Ok(("let a = 1;\nlet b = 3;\n".to_owned(), 1))
        );
        assert_eq!(apply_edit("abc", "b", "", false), Ok(("ac".to_owned(), 1)));
    }

    #[test]
    fn no_match() {
        assert_eq!(apply_edit("abc", "x", "y", false), Err(EditError::NotFound));
        assert_eq!(apply_edit("abc", "x", "y", true), Err(EditError::NotFound));
        assert_eq!(apply_edit("", "x", "y", true), Err(EditError::NotFound));
    }

    #[test]
    fn several_matches_need_replace_all() {
        assert_eq!(
            apply_edit("a-a-a", "a", "b", false),
            Err(EditError::Ambiguous(3))
        );
        assert_eq!(
            apply_edit("a-a-a", "a", "bb", true),
            Ok(("bb-bb-bb".to_owned(), 3))
        );
    }

    #[test]
    fn matches_do_not_overlap() {
        assert_eq!(
            apply_edit("aaaa", "aa", "b", false),
            Err(EditError::Ambiguous(2))
        );
        assert_eq!(
            apply_edit("aaa", "aa", "b", false),
            Ok(("ba".to_owned(), 1))
        );
        assert_eq!(
            apply_edit("aaaa", "aa", "b", true),
            Ok(("bb".to_owned(), 2))
        );
    }

    #[test]
    fn replacement_containing_the_pattern_is_not_rescanned() {
        assert_eq!(apply_edit("x", "x", "xx", false), Ok(("xx".to_owned(), 1)));
        assert_eq!(
            apply_edit("x x", "x", "xx", true),
            Ok(("xx xx".to_owned(), 2))
        );
    }

    #[test]
    fn crlf_and_unicode_are_exact() {
        assert_eq!(
            apply_edit("a\r\nb", "a\nb", "c", false),
            Err(EditError::NotFound)
        );
        assert_eq!(
            apply_edit("a\r\nb", "a\r\nb", "c", false),
            Ok(("c".to_owned(), 1))
        );
        assert_eq!(
            apply_edit("naïve", "ï", "i", false),
            Ok(("naive".to_owned(), 1))
        );
    }
}
