//! `read_file`: reads a UTF-8 text file, or a range of its lines.
//!
//! The file is streamed line by line, so only the requested lines are held in memory. Lines can be
//! numbered like `cat -n`. The output is bounded to 256 KiB; when more lines remain, a final
//! `[truncated: ...]` note says which `offset` continues the read. A file with a NUL byte or
//! invalid UTF-8 is refused as binary.

use std::fs::File;
use std::io::{self, BufRead, BufReader, ErrorKind};
use std::path::Path;

use serde::Deserialize;
use turngate_guest::{
    Access, BoundedText, Descriptor, Guest, ToolError, describe, io_error, looks_binary,
    parse_input,
};

/// Lines shown when the input sets no `limit`.
const DEFAULT_LIMIT: u64 = 2000;
/// The largest `limit` accepted.
const MAX_LIMIT: u64 = 10_000;
/// The most bytes of file content (with line numbers) returned by one call.
const MAX_OUTPUT: usize = 256 * 1024;
/// Buffer size of the streaming reader.
const READ_BUFFER: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
    #[serde(default)]
    line_numbers: bool,
}

/// Which lines to show and how.
#[derive(Clone, Copy, Debug)]
struct Request {
    /// 1-based number of the first line shown.
    offset: u64,
    /// The most lines shown.
    limit: u64,
    /// Whether to prefix each line with its number, like `cat -n`.
    line_numbers: bool,
    /// The most bytes of output, not counting the final note.
    max_bytes: usize,
}

/// Why [`render`] produced no text.
#[derive(Debug)]
enum RenderError {
    Io(io::Error),
    /// The line with this number has a NUL byte or is not UTF-8.
    Binary {
        line: u64,
    },
    /// `offset` is after the last line; the file has this many lines.
    PastEnd {
        lines: u64,
    },
}

impl From<io::Error> for RenderError {
    fn from(err: io::Error) -> Self {
        RenderError::Io(err)
    }
}

/// One line as read by [`next_line`]: its first bytes are in the caller's buffer.
#[derive(Clone, Copy, Debug)]
struct LineInfo {
    /// The full length of the line in bytes, with its `\n` if it has one.
    len: usize,
    /// Whether the line holds a NUL byte (also in the part that was not kept).
    nul: bool,
}

/// Reads the next line, keeping at most `keep` of its bytes in `buf` and skipping the rest, so a
/// huge line never sits in memory whole. Returns `None` at the end of the input.
fn next_line<R: BufRead>(
    reader: &mut R,
    keep: usize,
    buf: &mut Vec<u8>,
) -> io::Result<Option<LineInfo>> {
    buf.clear();
    let mut info = LineInfo { len: 0, nul: false };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if chunk.is_empty() {
            return Ok((info.len > 0).then_some(info));
        }
        let (take, end_of_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(newline) => (newline + 1, true),
            None => (chunk.len(), false),
        };
        let (part, _) = chunk.split_at(take);
        info.nul |= looks_binary(part);
        let room = keep.saturating_sub(buf.len()).min(take);
        buf.extend_from_slice(part.split_at(room).0);
        info.len += take;
        reader.consume(take);
        if end_of_line {
            return Ok(Some(info));
        }
    }
}

/// The text of a line read into `buf`: all of it, or when the line was cut (`cut`), its start up to
/// the last whole character. `None` if the bytes are not UTF-8.
fn decode(buf: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(buf) {
        Ok(text) => Some(text),
        // A cut can split a character: an incomplete sequence at the very end is fine.
        Err(err) if cut && err.error_len().is_none() => {
            std::str::from_utf8(buf.split_at(err.valid_up_to()).0).ok()
        }
        Err(_) => None,
    }
}

/// Renders the lines `request` asks for, with a `[truncated: ...]` note when lines remain.
fn render<R: BufRead>(mut reader: R, request: Request) -> Result<String, RenderError> {
    let Request {
        offset,
        limit,
        line_numbers,
        max_bytes,
    } = request;
    let mut out = BoundedText::new(max_bytes);
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut shown = 0u64;
    let mut note = None;
    while let Some(info) = next_line(&mut reader, max_bytes, &mut buf)? {
        line += 1;
        let cut = info.len > buf.len();
        if info.nul {
            return Err(RenderError::Binary { line });
        }
        let text = decode(&buf, cut).ok_or(RenderError::Binary { line })?;
        if line < offset {
            continue;
        }
        if shown == limit {
            note = Some(format!(
                "[truncated: showed lines {offset}-{last} (limit {limit}); more lines follow, \
                 continue with offset {line}]",
                last = line - 1
            ));
            break;
        }
        let numbered;
        let piece = if line_numbers {
            numbered = format!("{line:>6}\t{text}");
            numbered.as_str()
        } else {
            text
        };
        if cut || !out.push(piece) {
            if out.is_empty() {
                let kept = out.push_prefix(piece);
                note = Some(format!(
                    "[truncated: line {line} is {len} bytes, more than the {max_kib} KiB output \
                     limit; only its first {kept} bytes are shown. Continue with offset {next}]",
                    len = info.len,
                    max_kib = max_bytes / 1024,
                    next = line + 1
                ));
            } else {
                note = Some(format!(
                    "[truncated: output limit of {max_kib} KiB reached after line {last}; \
                     continue with offset {line}]",
                    max_kib = max_bytes / 1024,
                    last = line - 1
                ));
            }
            break;
        }
        shown += 1;
    }
    if shown == 0 && note.is_none() && !(line == 0 && offset == 1) {
        return Err(RenderError::PastEnd { lines: line });
    }
    Ok(out.finish(note.as_deref()))
}

fn read(input: &Input) -> Result<String, ToolError> {
    let offset = input.offset.unwrap_or(1);
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
    if offset == 0 {
        return Err(ToolError::InvalidInput(
            "offset is the 1-based number of the first line; it must be at least 1".into(),
        ));
    }
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ToolError::InvalidInput(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let path = Path::new(&input.path);
    let file = File::open(path).map_err(|err| io_error(path, err))?;
    let meta = file.metadata().map_err(|err| io_error(path, err))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory; use list_dir to see its entries",
            input.path
        )));
    }
    let request = Request {
        offset,
        limit,
        line_numbers: input.line_numbers,
        max_bytes: MAX_OUTPUT,
    };
    match render(BufReader::with_capacity(READ_BUFFER, file), request) {
        Ok(text) if text.is_empty() => Ok(format!("[{}: empty file]", input.path)),
        Ok(text) => Ok(text),
        Err(RenderError::Io(err)) => Err(io_error(path, err)),
        Err(RenderError::Binary { line }) => Err(ToolError::Failed(format!(
            "{} looks binary (NUL byte or invalid UTF-8 in line {line}); read_file reads UTF-8 \
             text only",
            input.path
        ))),
        Err(RenderError::PastEnd { lines }) => Err(ToolError::InvalidInput(format!(
            "offset {offset} is past the end of {}, which has {lines} lines",
            input.path
        ))),
    }
}

struct ReadFile;

impl Guest for ReadFile {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "File to read, relative to the root, e.g. `src/main.rs`."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "1-based number of the first line to show."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                    "description": "The most lines to show."
                },
                "line_numbers": {
                    "type": "boolean",
                    "default": false,
                    "description": "Prefix each line with its number and a tab, like `cat -n`."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        });
        describe(
            "read_file",
            "Read a UTF-8 text file, or a range of its lines with `offset` and `limit` (2000 lines \
             by default). Output is at most 256 KiB; a final `[truncated: ...]` line says which \
             offset continues. Binary files are refused. Set `line_numbers` to number the lines.",
            &schema,
            &[("/path", Access::Read)],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        read(&parse_input(&input)?)
    }
}

turngate_guest::export!(ReadFile);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn req(offset: u64, limit: u64, line_numbers: bool, max_bytes: usize) -> Request {
        Request {
            offset,
            limit,
            line_numbers,
            max_bytes,
        }
    }

    fn run(content: &[u8], request: Request) -> Result<String, RenderError> {
        // A tiny buffer exercises lines that span several reads.
        render(BufReader::with_capacity(3, Cursor::new(content)), request)
    }

    #[test]
    fn whole_file_is_returned_verbatim() {
        let text = "one\ntwo\r\nthree";
        assert_eq!(
            run(text.as_bytes(), req(1, 100, false, 1000)).unwrap(),
            text
        );
        assert_eq!(run(b"a\n", req(1, 100, false, 1000)).unwrap(), "a\n");
        assert_eq!(run(b"", req(1, 100, false, 1000)).unwrap(), "");
    }

    #[test]
    fn numbering_like_cat_n() {
        let out = run(b"a\nb\n", req(1, 100, true, 1000)).unwrap();
        assert_eq!(out, "     1\ta\n     2\tb\n");
        let out = run(b"a\nb\nc", req(2, 100, true, 1000)).unwrap();
        assert_eq!(out, "     2\tb\n     3\tc");
    }

    #[test]
    fn offset_and_limit_slice() {
        let content = b"1\n2\n3\n4\n5\n";
        assert_eq!(
            run(content, req(2, 2, false, 1000)).unwrap(),
            "2\n3\n[truncated: showed lines 2-3 (limit 2); more lines follow, continue with offset 4]"
        );
        assert_eq!(run(content, req(4, 2, false, 1000)).unwrap(), "4\n5\n");
        assert_eq!(run(content, req(5, 1, false, 1000)).unwrap(), "5\n");
    }

    #[test]
    fn past_end() {
        assert!(matches!(
            run(b"1\n2\n", req(3, 10, false, 100)),
            Err(RenderError::PastEnd { lines: 2 })
        ));
        assert!(matches!(
            run(b"", req(2, 10, false, 100)),
            Err(RenderError::PastEnd { lines: 0 })
        ));
    }

    #[test]
    fn output_bound_says_where_to_continue() {
        let content = b"aaaa\nbbbb\ncccc\n";
        let out = run(content, req(1, 100, false, 12)).unwrap();
        assert_eq!(
            out,
            "aaaa\nbbbb\n[truncated: output limit of 0 KiB reached after line 2; continue with offset 3]"
        );
    }

    #[test]
    fn overlong_first_line_is_cut() {
        let mut content = "é".repeat(10).into_bytes();
        content.extend_from_slice(b"\nnext\n");
        // 7 bytes fit: three 2-byte characters, never half of one.
        let out = run(&content, req(1, 100, false, 7)).unwrap();
        assert_eq!(
            out,
            "ééé\n[truncated: line 1 is 21 bytes, more than the 0 KiB output limit; only its first 6 bytes are shown. Continue with offset 2]"
        );
        // The rest of the file is still reachable.
        assert_eq!(run(&content, req(2, 100, false, 7)).unwrap(), "next\n");
        // With numbers, the prefix counts against the limit.
        let out = run(b"abcdefgh\n", req(1, 100, true, 10)).unwrap();
        assert!(
            out.starts_with("     1\tabc\n[truncated: line 1 is 9 bytes"),
            "{out}"
        );
    }

    #[test]
    fn binary_is_refused_anywhere() {
        assert!(matches!(
            run(b"ok\nbad\0\n", req(1, 10, false, 100)),
            Err(RenderError::Binary { line: 2 })
        ));
        assert!(matches!(
            run(b"ok\n\xff\xfe\n", req(1, 10, false, 100)),
            Err(RenderError::Binary { line: 2 })
        ));
        // Also before the offset.
        assert!(matches!(
            run(b"\0\nok\n", req(2, 10, false, 100)),
            Err(RenderError::Binary { line: 1 })
        ));
        // A NUL past the kept part of a long line is still seen.
        let mut long = vec![b'a'; 50];
        long.push(0);
        assert!(matches!(
            run(&long, req(1, 10, false, 10)),
            Err(RenderError::Binary { line: 1 })
        ));
    }

    #[test]
    fn decode_tolerates_only_a_cut_character() {
        assert_eq!(decode("é".as_bytes(), false), Some("é"));
        assert_eq!(decode(&"é".as_bytes()[..1], true), Some(""));
        assert_eq!(decode(&"é".as_bytes()[..1], false), None);
        assert_eq!(decode(b"\xff", true), None);
    }

    #[test]
    fn next_line_keeps_a_prefix_and_measures_the_rest() {
        let mut reader = BufReader::with_capacity(4, Cursor::new(b"abcdefghij\nxy".to_vec()));
        let mut buf = Vec::new();
        let info = next_line(&mut reader, 5, &mut buf).unwrap().unwrap();
        assert_eq!((info.len, buf.as_slice()), (11, &b"abcde"[..]));
        let info = next_line(&mut reader, 5, &mut buf).unwrap().unwrap();
        assert_eq!((info.len, buf.as_slice()), (2, &b"xy"[..]));
        assert!(next_line(&mut reader, 5, &mut buf).unwrap().is_none());
    }
}
