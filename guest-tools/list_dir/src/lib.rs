//! `list_dir`: lists a directory's entries, sorted by name.
//!
//! One entry per line: directories end with `/`, symlinks show ` -> <target>` (never followed),
//! files show their size. At most 1000 entries are listed; the first 1000 by name are kept without
//! loading a huge directory whole.

use std::collections::BinaryHeap;
use std::fs;
use std::path::Path;

use serde::Deserialize;
use turngate_guest::{Access, Descriptor, Guest, ToolError, describe, io_error, parse_input};

/// The most entries listed.
const MAX_ENTRIES: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
}

/// Keeps the `max` smallest names pushed into it; counts them all.
#[derive(Debug)]
struct FirstNames {
    heap: BinaryHeap<String>,
    max: usize,
    total: usize,
}

impl FirstNames {
    fn new(max: usize) -> Self {
        FirstNames {
            heap: BinaryHeap::new(),
            max,
            total: 0,
        }
    }

    fn push(&mut self, name: String) {
        self.total += 1;
        self.heap.push(name);
        if self.heap.len() > self.max {
            self.heap.pop();
        }
    }

    /// The kept names in order, and how many names were pushed in all.
    fn finish(self) -> (Vec<String>, usize) {
        (self.heap.into_sorted_vec(), self.total)
    }
}

/// One entry's line, from its own metadata (symlinks are not followed).
fn describe_entry(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => format!("{name}/"),
        Ok(meta) if meta.is_symlink() => match fs::read_link(&path) {
            Ok(target) => format!("{name} -> {}", target.display()),
            Err(_) => format!("{name} -> ?"),
        },
        Ok(meta) if meta.is_file() => format!("{name} ({} bytes)", meta.len()),
        Ok(_) => name.to_owned(),
        // The entry went away or cannot be inspected: still list it.
        Err(_) => format!("{name} (?)"),
    }
}

fn list(input: &Input) -> Result<String, ToolError> {
    let dir = Path::new(&input.path);
    let meta = fs::metadata(dir).map_err(|err| io_error(dir, err))?;
    if !meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is not a directory; use read_file to read a file",
            input.path
        )));
    }
    let mut names = FirstNames::new(MAX_ENTRIES);
    for entry in fs::read_dir(dir).map_err(|err| io_error(dir, err))? {
        let entry = entry.map_err(|err| io_error(dir, err))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    let (names, total) = names.finish();
    if names.is_empty() {
        return Ok(format!("[{}: empty directory]", input.path));
    }
    let mut out: Vec<String> = names.iter().map(|name| describe_entry(dir, name)).collect();
    if total > names.len() {
        out.push(format!(
            "[truncated: listed the first {} of {total} entries by name]",
            names.len()
        ));
    }
    Ok(out.join("\n"))
}

struct ListDir;

impl Guest for ListDir {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Directory to list, relative to the root; `.` for the root itself."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        });
        describe(
            "list_dir",
            "List a directory's entries sorted by name, one per line: directories end with `/`, \
             symlinks show `-> target`, files show their size in bytes. At most 1000 entries.",
            &schema,
            &[("/path", Access::Read)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        list(&parse_input(&input)?)
    }
}

turngate_guest::export!(ListDir);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_names_in_order() {
        let mut names = FirstNames::new(3);
        for name in ["d", "b", "e", "a", "c"] {
            names.push(name.to_owned());
        }
        assert_eq!(
            names.finish(),
            (vec!["a".into(), "b".into(), "c".into()], 5)
        );
    }

    #[test]
    fn fewer_names_than_the_bound() {
        let mut names = FirstNames::new(3);
        names.push("b".into());
        names.push("a".into());
        assert_eq!(names.finish(), (vec!["a".into(), "b".into()], 2));
        assert_eq!(FirstNames::new(3).finish(), (vec![], 0));
    }
}
