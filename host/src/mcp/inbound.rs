//! What every incoming JSON-RPC message is checked for before rmcp parses it, and the JSON-RPC error
//! each failure is answered with, so that no message goes unanswered.
//!
//! * Larger than [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES): `-32600`, never buffered whole;
//!   its `id` is read by [`IdScan`] as the bytes go by.
//! * Nested deeper than [`MAX_NESTING`]: `-32600` with its `id` (serde_json would refuse it anyway, at
//!   128 levels, with nothing to tell the client).
//! * Not JSON: `-32700`, `id: null` (JSON-RPC 2.0: the request could not be read).
//! * JSON but not a message rmcp knows: `-32600` with its `id`; a notification (a `method` and no
//!   `id`) is dropped, as JSON-RPC 2.0 says a notification is never answered.
//!
//! The `id` of a message that is not parsed is read by a single pass over its bytes that keeps a few
//! bytes of state, whatever the message's length or depth: the value of a top-level `id` member that is
//! a number or a string; anything else answers `id: null`.

use rmcp::model::{ErrorCode, RequestId};
use serde_json::{Value, json};

/// The deepest nesting of objects and arrays a message may have (the message itself is level 1; a
/// `tools/call`'s arguments start at level 3). Deeper messages are answered with an error unparsed.
pub const MAX_NESTING: usize = 64;

/// The longest `id` value read from an unparsed message, in bytes.
const MAX_ID_BYTES: usize = 256;

/// A message the server does not pass on, with the JSON-RPC error it is answered with.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The JSON-RPC error code.
    pub code: ErrorCode,
    /// What was wrong with the message.
    pub message: String,
    /// The message's `id`, when it could be read.
    pub id: Option<RequestId>,
}

impl Rejected {
    /// A message larger than `limit` bytes; `scan` has seen all of it.
    pub fn oversized(limit: usize, scan: &IdScan) -> Rejected {
        Rejected {
            code: ErrorCode::INVALID_REQUEST,
            message: format!("message larger than the server's limit of {limit} bytes"),
            id: scan.id(),
        }
    }

    /// The JSON-RPC error response. Its `id` is `null` when it could not be read (JSON-RPC 2.0).
    pub fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code.0, "message": self.message},
        })
    }
}

/// What the check makes of one message.
#[derive(Debug)]
pub enum Checked<T> {
    /// A message for rmcp.
    Message(T),
    /// Answered with an error.
    Rejected(Rejected),
    /// A notification rmcp does not know: dropped unanswered.
    Ignored,
}

/// Checks one whole message (at most [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES), a leading byte
/// order mark allowed) and parses it as `T`.
pub fn check<T: serde::de::DeserializeOwned>(message: &[u8]) -> Checked<T> {
    let message = message.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(message);
    let mut scan = IdScan::default();
    scan.feed(message);
    if scan.max_depth > MAX_NESTING {
        return Checked::Rejected(Rejected {
            code: ErrorCode::INVALID_REQUEST,
            message: format!("message nested deeper than {MAX_NESTING} levels"),
            id: scan.id(),
        });
    }
    let error = match serde_json::from_slice::<T>(message) {
        Ok(parsed) => return Checked::Message(parsed),
        Err(e) => e,
    };
    match serde_json::from_slice::<Value>(message) {
        Err(e) => Checked::Rejected(Rejected {
            code: ErrorCode::PARSE_ERROR,
            message: format!("parse error: {e}"),
            id: None,
        }),
        Ok(value) if value.get("method").is_some() && value.get("id").is_none() => {
            tracing::debug!("dropping a notification the server does not know: {error}");
            Checked::Ignored
        }
        Ok(value) => Checked::Rejected(Rejected {
            code: ErrorCode::INVALID_REQUEST,
            message: format!("invalid request: {error}"),
            id: value
                .get("id")
                .and_then(|id| serde_json::from_value(id.clone()).ok()),
        }),
    }
}

/// A single pass over a message's bytes, fed in pieces, that finds its nesting depth and the raw text
/// of its top-level `id` member, holding at most [`MAX_ID_BYTES`] of it.
#[derive(Debug, Default)]
pub struct IdScan {
    depth: usize,
    max_depth: usize,
    in_string: bool,
    escaped: bool,
    /// At the top level: the next string is a member's name.
    expecting_name: bool,
    /// At the top level: the string being read is a member's name.
    in_name: bool,
    /// The member name read so far, when it still could be `id`.
    name: Option<Vec<u8>>,
    /// Whether the value being read is the top-level `id`'s.
    in_id: bool,
    id_text: Vec<u8>,
    /// The last complete `id` value's text (`None`: none, or one too long).
    id: Option<Vec<u8>>,
}

impl IdScan {
    /// Reads the next bytes of the message.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.step(byte);
        }
    }

    /// The top-level `id`, when one was read and is a number or a string.
    pub fn id(&self) -> Option<RequestId> {
        let text = if self.in_id {
            &self.id_text
        } else {
            self.id.as_ref()?
        };
        serde_json::from_slice(text.trim_ascii()).ok()
    }

    fn step(&mut self, byte: u8) {
        if self.in_id && self.depth == 1 && !self.in_string && matches!(byte, b',' | b'}') {
            self.in_id = false;
            self.id =
                (self.id_text.len() <= MAX_ID_BYTES).then(|| std::mem::take(&mut self.id_text));
        }
        if self.in_id && self.id_text.len() <= MAX_ID_BYTES {
            self.id_text.push(byte);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if self.in_name {
                    self.in_name = false;
                    self.expecting_name = false;
                    return;
                }
            }
            // A name with an escape, or longer than `id`, is not `id`.
            if self.in_name
                && let Some(name) = &mut self.name
            {
                if self.escaped || name.len() >= 2 {
                    self.name = None;
                } else {
                    name.push(byte);
                }
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expecting_name {
                    self.in_name = true;
                    self.name = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
                self.expecting_name = self.depth == 1 && byte == b'{';
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.expecting_name = true,
            b':' if self.depth == 1 && self.name.take().is_some_and(|name| name == b"id") => {
                self.in_id = true;
                self.id_text.clear();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientJsonRpcMessage, NumberOrString};

    use super::*;

    fn id_of(message: &str) -> Option<RequestId> {
        let mut scan = IdScan::default();
        for piece in message.as_bytes().chunks(3) {
            scan.feed(piece);
        }
        scan.id()
    }

    #[test]
    fn the_scan_reads_only_a_top_level_id_that_is_a_number_or_a_string() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            Some(NumberOrString::Number(7))
        );
        assert_eq!(
            id_of(r#"{"method":"x","params":{"id":1,"s":"\"id\":2"},"id" : "a,}b" }"#),
            Some(NumberOrString::String("a,}b".into()))
        );
        for none in [
            r#"{"params":{"id":1}}"#,
            r#"{"id":{"a":1}}"#,
            r#"{"id":null}"#,
            r#"{"i\u0064":5}"#,
            r#"["id", 5]"#,
            r#"{"x":"{\"id\":5}"}"#,
        ] {
            assert_eq!(id_of(none), None, "{none}");
        }
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES));
        assert_eq!(id_of(&long), None);
    }

    #[test]
    fn each_kind_of_bad_message_gets_its_error() {
        let rejected = |message: &[u8]| match check::<ClientJsonRpcMessage>(message) {
            Checked::Rejected(rejected) => (rejected.code, rejected.id),
            other => panic!("{other:?}"),
        };
        assert_eq!(rejected(b"{\"id\":1,"), (ErrorCode::PARSE_ERROR, None));
        assert_eq!(rejected(b"\xff\xfe"), (ErrorCode::PARSE_ERROR, None));
        let deep = format!(r#"{{"id":2,"p":{}{}}}"#, "[".repeat(65), "]".repeat(65));
        assert_eq!(
            rejected(deep.as_bytes()),
            (ErrorCode::INVALID_REQUEST, Some(NumberOrString::Number(2)))
        );
        assert_eq!(
            rejected(br#"{"jsonrpc":"2.0","id":3}"#),
            (ErrorCode::INVALID_REQUEST, Some(NumberOrString::Number(3)))
        );
        assert!(matches!(
            check::<ClientJsonRpcMessage>(br#"{"jsonrpc":"1.0","method":"notifications/x"}"#),
            Checked::Ignored
        ));
        assert!(matches!(
            check::<ClientJsonRpcMessage>(
                b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
            ),
            Checked::Message(_)
        ));
    }

    proptest::proptest! {
        /// No byte sequence makes the check or the scan panic (bytes from JSON's punctuation mostly,
        /// so that structures, strings and escapes come up).
        #[test]
        fn no_bytes_make_the_check_panic(
            bytes in proptest::collection::vec(
                proptest::sample::select(b"{}[]\":,\\id 0-a\xff".to_vec()),
                0..256,
            )
        ) {
            let _ = check::<ClientJsonRpcMessage>(&bytes);
            let mut scan = IdScan::default();
            scan.feed(&bytes);
            let _ = scan.id();
        }
    }
}
