//! A change set as a unified diff, for the user (or the embedding program) to review before it applies.
//!
//! Text files get `diff -u` hunks (`--- a/path`, `+++ b/path`, three lines of context); binary files,
//! symlinks and directories get one line saying what happens. How much a diff holds depends on where
//! it is shown ([`DiffSize`]): shown whole (a terminal, a callback, a message), each file's text is
//! diffed up to [`MAX_DIFF_FILE`] bytes and the whole diff is cut at [`MAX_DIFF_BYTES`], with a line
//! saying so, so a huge change cannot flood a terminal or a client; shown a page of hunks at a time
//! (the console), files up to [`MAX_PAGED_FILE`] are diffed. Diffing stops refining after
//! [`DIFF_TIME`] (a coarser diff, still correct), so a large file cannot hold the call.

use std::fmt::Write as _;
use std::io::Read;
use std::time::Duration;

use similar::TextDiff;

use super::{Change, ChangeKind, ChangeSet};

/// Largest file whose text is diffed line by line in a diff shown whole; bigger ones are summarized.
pub const MAX_DIFF_FILE: u64 = 1 << 20;

/// Largest diff shown whole; the rest is cut with a note.
pub const MAX_DIFF_BYTES: usize = 256 << 10;

/// Largest file whose text is diffed line by line in a diff shown a page at a time.
pub const MAX_PAGED_FILE: u64 = 16 << 20;

/// Largest diff shown a page at a time; the rest is cut with a note.
pub const MAX_PAGED_BYTES: usize = 48 << 20;

/// How long a diff is refined before the rest is diffed coarsely.
pub const DIFF_TIME: Duration = Duration::from_secs(5);

/// Where a diff is shown, and so how much of the change set it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffSize {
    /// Shown whole at once: [`MAX_DIFF_FILE`] a file, cut at [`MAX_DIFF_BYTES`].
    #[default]
    Whole,
    /// Shown a page of hunks at a time by a server: [`MAX_PAGED_FILE`] a file, cut at
    /// [`MAX_PAGED_BYTES`].
    Paged,
}

impl DiffSize {
    /// The largest file diffed line by line.
    pub fn max_file(self) -> u64 {
        match self {
            DiffSize::Whole => MAX_DIFF_FILE,
            DiffSize::Paged => MAX_PAGED_FILE,
        }
    }

    fn max_bytes(self) -> usize {
        match self {
            DiffSize::Whole => MAX_DIFF_BYTES,
            DiffSize::Paged => MAX_PAGED_BYTES,
        }
    }
}

/// `old` against `new` as unified diff hunks under the two names (empty when they are equal).
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIME)
        .diff_lines(old, new);
    let mut unified = diff.unified_diff();
    unified.context_radius(3).header(old_name, new_name);
    unified.to_string()
}

impl ChangeSet {
    /// The changes as a unified diff, as much of it as `size` holds.
    pub fn diff(&mut self, size: DiffSize) -> String {
        let (max_file, max_bytes) = (size.max_file(), size.max_bytes());
        let mut out = String::new();
        for index in 0..self.changes.len() {
            if out.len() >= max_bytes {
                let _ = writeln!(out, "... diff cut at {max_bytes} bytes");
                break;
            }
            let old = match self.changes[index].kind {
                ChangeKind::Replace | ChangeKind::Delete => self.old_text(index, max_file),
                _ => Ok(String::new()),
            };
            let new = match self.changes[index].kind {
                ChangeKind::Create | ChangeKind::Replace => {
                    new_text(&self.changes[index], max_file)
                }
                _ => Ok(String::new()),
            };
            render(&mut out, &self.changes[index], old, new);
        }
        if out.len() > max_bytes {
            let mut cut = max_bytes;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            let _ = writeln!(out, "\n... diff cut at {max_bytes} bytes");
        }
        out
    }

    /// The old text at a change's path, or why it is not shown as text.
    fn old_text(&mut self, index: usize, max_file: u64) -> Result<String, String> {
        let change = &self.changes[index];
        let Some(before) = &change.before else {
            return Err("not a regular file".into());
        };
        if before.size > max_file {
            return Err(format!("{} bytes", before.size));
        }
        let (file, opened) = self
            .lower
            .open_file(&change.path)
            .map_err(|e| e.to_string())?;
        if change
            .origin()
            .is_some_and(|origin| origin.identity != opened.identity)
        {
            return Err("it changed since the call read it".into());
        }
        let mut bytes = Vec::new();
        file.into_std()
            .take(max_file)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        text(bytes, before.size)
    }
}

fn new_text(change: &Change, max_file: u64) -> Result<String, String> {
    let (Some(staged), Some(after)) = (&change.staged, &change.after) else {
        return Err("no content".into());
    };
    if after.size > max_file {
        return Err(format!("{} bytes", after.size));
    }
    let mut bytes = vec![0; after.size as usize];
    std::os::unix::fs::FileExt::read_exact_at(&*staged.file, &mut bytes, 0)
        .map_err(|e| e.to_string())?;
    text(bytes, after.size)
}

/// The bytes as text, or a summary when they are not UTF-8 text.
fn text(bytes: Vec<u8>, size: u64) -> Result<String, String> {
    if bytes.contains(&0) {
        return Err(format!("binary, {size} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| format!("binary, {size} bytes"))
}

fn render(
    out: &mut String,
    change: &Change,
    old: Result<String, String>,
    new: Result<String, String>,
) {
    let path = change.path.to_string();
    match change.kind {
        ChangeKind::MakeDir => {
            let _ = writeln!(out, "new directory {path}/");
        }
        ChangeKind::RemoveDir => {
            let _ = writeln!(out, "removed directory {path}/");
        }
        kind => {
            let old_name = if kind == ChangeKind::Create {
                "/dev/null".to_owned()
            } else {
                format!("a/{path}")
            };
            let new_name = if kind == ChangeKind::Delete {
                "/dev/null".to_owned()
            } else {
                format!("b/{path}")
            };
            match (old, new) {
                (Ok(old), Ok(new)) => {
                    let rendered = unified(&old, &new, &old_name, &new_name);
                    if rendered.is_empty() {
                        let _ = writeln!(out, "--- {old_name}\n+++ {new_name}\n(empty file)");
                    } else {
                        out.push_str(&rendered);
                        if !rendered.ends_with('\n') {
                            out.push('\n');
                        }
                    }
                }
                (old, new) => {
                    let describe = |side: Result<String, String>| match side {
                        Ok(text) => format!("{} bytes of text", text.len()),
                        Err(why) => why,
                    };
                    let what = match kind {
                        ChangeKind::Create => format!("created ({})", describe(new)),
                        ChangeKind::Delete => format!("deleted ({})", describe(old)),
                        _ => format!("changed ({} -> {})", describe(old), describe(new)),
                    };
                    let _ = writeln!(out, "--- {old_name}\n+++ {new_name}\n{path}: {what}");
                }
            }
        }
    }
}
