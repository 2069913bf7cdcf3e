//! Helpers for the text a tool returns: binary detection, cutting and bounding.

/// Whether `bytes` look like binary data rather than text: they contain a NUL byte.
///
/// Callers pass what they have read (for a whole file, its first 8 KiB is the usual sniff).
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

/// The longest prefix of `text` with at most `max_chars` characters.
pub fn cut_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => text.get(..end).unwrap_or(text),
        None => text,
    }
}

/// Text that grows up to a byte limit; a piece that does not fit is refused whole.
#[derive(Debug)]
pub struct BoundedText {
    text: String,
    max_bytes: usize,
}

impl BoundedText {
    /// Empty text that will hold at most `max_bytes` bytes.
    pub fn new(max_bytes: usize) -> Self {
        BoundedText {
            text: String::new(),
            max_bytes,
        }
    }

    /// Appends `piece` if it fits in the limit and returns true; otherwise leaves the text as it
    /// is and returns false.
    pub fn push(&mut self, piece: &str) -> bool {
        if piece.len() > self.remaining() {
            return false;
        }
        self.text.push_str(piece);
        true
    }

    /// Appends the longest prefix of `piece` that fits (cut on a character boundary) and returns
    /// its length in bytes.
    pub fn push_prefix(&mut self, piece: &str) -> usize {
        let end = piece.floor_char_boundary(self.remaining());
        let prefix = piece.get(..end).unwrap_or_default();
        self.text.push_str(prefix);
        prefix.len()
    }

    /// How many more bytes fit.
    pub fn remaining(&self) -> usize {
        self.max_bytes.saturating_sub(self.text.len())
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The text, with `note` (if any) on a line of its own after it. The note is not counted
    /// against the limit.
    pub fn finish(mut self, note: Option<&str>) -> String {
        if let Some(note) = note {
            if !self.text.is_empty() && !self.text.ends_with('\n') {
                self.text.push('\n');
            }
            self.text.push_str(note);
        }
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_detection() {
        assert!(!looks_binary(b""));
        assert!(!looks_binary("héllo\n".as_bytes()));
        assert!(looks_binary(b"ab\0cd"));
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut_chars("hello", 10), "hello");
        assert_eq!(cut_chars("hello", 5), "hello");
        assert_eq!(cut_chars("hello", 2), "he");
        assert_eq!(cut_chars("héllo", 2), "hé");
        assert_eq!(cut_chars("日本語", 1), "日");
        assert_eq!(cut_chars("abc", 0), "");
    }

    #[test]
    fn bounded_text_refuses_what_does_not_fit() {
        let mut t = BoundedText::new(10);
        assert!(t.is_empty());
        assert!(t.push("12345"));
        assert!(!t.push("123456"));
        assert_eq!(t.remaining(), 5);
        assert!(t.push("67890"));
        assert!(!t.push("x"));
        assert!(t.push(""));
        assert_eq!(t.finish(Some("[note]")), "1234567890\n[note]");
    }

    #[test]
    fn push_prefix_cuts_on_char_boundary() {
        let mut t = BoundedText::new(4);
        assert_eq!(t.push_prefix("ab日本"), 2);
        assert_eq!(t.remaining(), 2);
        assert_eq!(t.push_prefix("é"), 2);
        assert_eq!(t.push_prefix("x"), 0);
        assert_eq!(t.finish(None), "abé");
        let mut t = BoundedText::new(10);
        assert_eq!(t.push_prefix("short"), 5);
        assert_eq!(t.finish(None), "short");
    }

    #[test]
    fn finish_without_note_or_with_trailing_newline() {
        let mut t = BoundedText::new(100);
        assert!(t.push("a\n"));
        assert_eq!(t.finish(Some("[n]")), "a\n[n]");
        assert_eq!(BoundedText::new(1).finish(None), "");
        assert_eq!(BoundedText::new(1).finish(Some("[n]")), "[n]");
    }
}
