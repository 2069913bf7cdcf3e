//! `search_files`: searches file contents with a regular expression, like `grep -rn`.
//!
//! Every file under `path` is searched, recursively and in sorted order, without following
//! symlinks. Files that look binary (a NUL byte in their first 8 KiB) and files over 4 MiB are
//! skipped; `glob` narrows the files searched. Each matching line is printed as
//! `path:LINE:text`; the output stops at 200 matches or 64 KiB.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use turngate_guest::{
    Access, BoundedText, Descriptor, Guest, ToolError, cut_chars, describe, io_error, looks_binary,
    parse_input,
};

/// The most matching lines reported.
const MAX_MATCHES: usize = 200;
/// The most bytes of output, not counting the final note.
const MAX_OUTPUT: usize = 64 * 1024;
/// Files larger than this are skipped.
const MAX_FILE: u64 = 4 * 1024 * 1024;
/// A file with a NUL byte in this many first bytes is skipped as binary.
const SNIFF_LEN: usize = 8 * 1024;
/// A matching line is cut to this many characters.
const MAX_LINE_CHARS: usize = 300;
/// Limits on the compiled regex and its lazy DFA cache, in bytes.
const REGEX_SIZE_LIMIT: usize = 4 * 1024 * 1024;
const DFA_SIZE_LIMIT: usize = 8 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

/// The report being built, and whether it is full.
#[derive(Debug)]
struct Report {
    out: BoundedText,
    matches: usize,
    max_matches: usize,
    /// Why the search stopped early, as the note for the end of the output.
    stopped: Option<String>,
    /// Files skipped for their size, and entries that could not be read.
    too_large: usize,
    unreadable: usize,
}

impl Report {
    fn new(max_matches: usize, max_bytes: usize) -> Self {
        Report {
            out: BoundedText::new(max_bytes),
            matches: 0,
            max_matches,
            stopped: None,
            too_large: 0,
            unreadable: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.stopped.is_some()
    }

    /// Adds the lines of `content` that `regex` matches, as `display:LINE:text`.
    fn search(&mut self, regex: &Regex, display: &str, content: &[u8]) {
        for (index, line) in content.split(|&b| b == b'\n').enumerate() {
            if self.is_full() {
                return;
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if !regex.is_match(line) {
                continue;
            }
            if self.matches == self.max_matches {
                self.stopped = Some(format!(
                    "[truncated: stopped after {} matches; narrow the pattern, path or glob]",
                    self.matches
                ));
                return;
            }
            let text = String::from_utf8_lossy(line);
            let cut = cut_chars(&text, MAX_LINE_CHARS);
            let ellipsis = if cut.len() < text.len() { "…" } else { "" };
            let entry = format!("{display}:{}:{cut}{ellipsis}\n", index + 1);
            if !self.out.push(&entry) {
                self.stopped = Some(format!(
                    "[truncated: output limit of {} KiB reached after {} matches; narrow the \
                     pattern, path or glob]",
                    MAX_OUTPUT / 1024,
                    self.matches
                ));
                return;
            }
            self.matches += 1;
        }
    }

    fn finish(self) -> String {
        let mut notes = Vec::new();
        if self.matches == 0 && !self.is_full() {
            notes.push("no matches".to_owned());
        }
        if self.too_large > 0 {
            notes.push(format!(
                "[skipped {} file(s) over {} MiB]",
                self.too_large,
                MAX_FILE / (1024 * 1024)
            ));
        }
        if self.unreadable > 0 {
            notes.push(format!(
                "[skipped {} file(s) or directories that could not be read]",
                self.unreadable
            ));
        }
        notes.extend(self.stopped);
        let note = notes.join("\n");
        self.out.finish((!note.is_empty()).then_some(note.as_str()))
    }
}

/// Reads a file for searching: `None` if it is too large, looks binary or cannot be read.
fn load(path: &Path, report: &mut Report) -> Option<Vec<u8>> {
    let Ok(file) = File::open(path) else {
        report.unreadable += 1;
        return None;
    };
    let mut bytes = Vec::new();
    // One byte over the limit tells a file that is too large, even if it grew since it was listed.
    if file.take(MAX_FILE + 1).read_to_end(&mut bytes).is_err() {
        report.unreadable += 1;
        return None;
    }
    if u64::try_from(bytes.len()).map_or(true, |len| len > MAX_FILE) {
        report.too_large += 1;
        return None;
    }
    let sniff = bytes.get(..SNIFF_LEN).unwrap_or(&bytes);
    (!looks_binary(sniff)).then_some(bytes)
}

/// What to search for and where.
struct Search {
    regex: Regex,
    glob: Option<GlobMatcher>,
    /// The `path` input: files are printed as `root/relative`.
    root: PathBuf,
}

impl Search {
    /// How a file is printed: its path as another tool would take it (relative to the allowed
    /// root).
    fn display(&self, relative: &Path) -> String {
        if self.root == Path::new(".") {
            relative.display().to_string()
        } else {
            self.root.join(relative).display().to_string()
        }
    }

    /// Searches the file at `path` if the glob (if any) matches `relative` or `display`.
    fn search_file(&self, path: &Path, relative: &Path, display: &str, report: &mut Report) {
        let wanted = self
            .glob
            .as_ref()
            .is_none_or(|glob| glob.is_match(relative) || glob.is_match(display));
        if wanted && let Some(content) = load(path, report) {
            report.search(&self.regex, display, &content);
        }
    }

    /// Walks the directory `root` depth-first in name order, not following symlinks.
    fn walk(&self, report: &mut Report) {
        // Entries still to visit, relative to the root, the next one last.
        let mut pending: Vec<(PathBuf, bool)> = Vec::new();
        self.push_children(Path::new(""), &mut pending, report);
        while let Some((relative, is_dir)) = pending.pop() {
            if report.is_full() {
                return;
            }
            if is_dir {
                self.push_children(&relative, &mut pending, report);
            } else {
                let display = self.display(&relative);
                self.search_file(&self.root.join(&relative), &relative, &display, report);
            }
        }
    }

    /// Queues the files and directories in `relative` (symlinks and other kinds are left out).
    fn push_children(
        &self,
        relative: &Path,
        pending: &mut Vec<(PathBuf, bool)>,
        report: &mut Report,
    ) {
        let Ok(entries) = fs::read_dir(self.root.join(relative)) else {
            report.unreadable += 1;
            return;
        };
        let mut children = Vec::new();
        for entry in entries {
            let Ok(entry) = entry else {
                report.unreadable += 1;
                continue;
            };
            // `file_type` does not follow symlinks.
            let Ok(kind) = entry.file_type() else {
                report.unreadable += 1;
                continue;
            };
            if kind.is_dir() || kind.is_file() {
                children.push((relative.join(entry.file_name()), kind.is_dir()));
            }
        }
        children.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        pending.extend(children);
    }
}

fn search(input: &Input) -> Result<String, ToolError> {
    if input.pattern.is_empty() {
        return Err(ToolError::InvalidInput("pattern must not be empty".into()));
    }
    let regex = RegexBuilder::new(&input.pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
        .map_err(|err| ToolError::InvalidInput(format!("invalid pattern: {err}")))?;
    let glob = match &input.glob {
        Some(glob) => Some(
            Glob::new(glob)
                .map_err(|err| ToolError::InvalidInput(format!("invalid glob: {err}")))?
                .compile_matcher(),
        ),
        None => None,
    };
    let root = PathBuf::from(input.path.as_deref().unwrap_or("."));
    let search = Search { regex, glob, root };
    let mut report = Report::new(MAX_MATCHES, MAX_OUTPUT);
    let meta = fs::metadata(&search.root).map_err(|err| io_error(&search.root, err))?;
    if meta.is_dir() {
        search.walk(&mut report);
    } else {
        // A single file: printed and globbed by its own path.
        let display = search.root.display().to_string();
        search.search_file(&search.root, &search.root, &display, &mut report);
    }
    Ok(report.finish())
}

struct SearchFiles;

impl Guest for SearchFiles {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Regular expression (Rust regex syntax) matched against each line, e.g. `fn \\w+\\(` or `(?i)todo`."
                },
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "default": ".",
                    "description": "File or directory to search, relative to the root; `.` (the default) for everything."
                },
                "glob": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Only search files whose path matches this glob, e.g. `*.rs` or `docs/**/*.md`. The path is taken relative to `path` and also as printed; `*` matches across `/`."
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        });
        describe(
            "search_files",
            "Search the contents of files under a directory with a regular expression, \
             recursively (like `grep -rn`). Prints `path:LINE:text` for each matching line, at \
             most 200 matches. Binary files, files over 4 MiB and symlinks are skipped.",
            &schema,
            &[("/path", Access::Read)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        search(&parse_input(&input)?)
    }
}

turngate_guest::export!(SearchFiles);

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, RandomState};

    fn regex(pattern: &str) -> Regex {
        Regex::new(pattern).unwrap()
    }

    #[test]
    fn lines_are_numbered_and_cut() {
        let mut report = Report::new(10, 10_000);
        let long = format!("x{}", "é".repeat(400));
        let content = format!("alpha\nbeta\r\nxalpha\n{long}\n");
        report.search(&regex("alpha$|^x"), "f.txt", content.as_bytes());
        let out = report.finish();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "f.txt:1:alpha");
        assert_eq!(lines[1], "f.txt:3:xalpha");
        assert_eq!(lines[2], format!("f.txt:4:x{}…", "é".repeat(299)));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn crlf_line_ends_still_anchor() {
        let mut report = Report::new(10, 10_000);
        report.search(&regex("^b$"), "f", b"a\r\nb\r\n");
        assert_eq!(report.finish(), "f:2:b\n");
    }

    #[test]
    fn no_matches() {
        let mut report = Report::new(10, 10_000);
        report.search(&regex("zzz"), "f", b"a\nb\n");
        assert_eq!(report.finish(), "no matches");
    }

    #[test]
    fn stops_at_match_limit() {
        let mut report = Report::new(2, 10_000);
        report.search(&regex("a"), "f", b"a\na\na\n");
        assert!(report.is_full());
        report.search(&regex("a"), "g", b"a\n");
        assert_eq!(
            report.finish(),
            "f:1:a\nf:2:a\n[truncated: stopped after 2 matches; narrow the pattern, path or glob]"
        );
    }

    #[test]
    fn exactly_the_match_limit_is_not_truncated() {
        let mut report = Report::new(2, 10_000);
        report.search(&regex("a"), "f", b"a\na\nb\n");
        assert_eq!(report.finish(), "f:1:a\nf:2:a\n");
    }

    #[test]
    fn stops_at_output_limit() {
        let mut report = Report::new(100, 12);
        report.search(&regex("a"), "f", b"aaa\naaa\n");
        let out = report.finish();
        assert!(
            out.starts_with("f:1:aaa\n[truncated: output limit"),
            "{out}"
        );
    }

    #[test]
    fn invalid_utf8_lines_are_shown_lossily() {
        let mut report = Report::new(10, 10_000);
        report.search(&regex("ok"), "f", b"ok \xff\n");
        assert_eq!(report.finish(), "f:1:ok \u{fffd}\n");
    }

    #[test]
    fn walks_in_sorted_order_and_skips_binary() {
        let token = RandomState::new().hash_one("walk");
        let root = std::env::temp_dir().join(format!("turngate-search-{token:x}"));
        fs::create_dir_all(root.join("b/c")).unwrap();
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("z.txt"), "hit\n").unwrap();
        fs::write(root.join("b/c/d.rs"), "hit\n").unwrap();
        fs::write(root.join("b/a.txt"), "hit\n").unwrap();
        fs::write(root.join("a/bin"), "hit\0\n").unwrap();
        fs::write(root.join("a.txt"), "miss\nhit\n").unwrap();
        let mut report = Report::new(10, 10_000);
        let search = Search {
            regex: regex("hit"),
            glob: None,
            root: root.clone(),
        };
        search.walk(&mut report);
        let out = report.finish();
        let files: Vec<String> = out
            .lines()
            .map(|l| {
                l.strip_prefix(&format!("{}/", root.display()))
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            files,
            [
                "a.txt:2:hit",
                "b/a.txt:1:hit",
                "b/c/d.rs:1:hit",
                "z.txt:1:hit"
            ]
        );

        let glob = Glob::new("*.rs").unwrap().compile_matcher();
        let search = Search {
            regex: regex("hit"),
            glob: Some(glob),
            root: root.clone(),
        };
        let mut report = Report::new(10, 10_000);
        search.walk(&mut report);
        assert!(report.finish().ends_with("b/c/d.rs:1:hit\n"));
        fs::remove_dir_all(&root).unwrap();
    }
}
