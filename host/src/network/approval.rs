//! Network requests that wait for the approver: what is shown, and the channel from a call's hook to
//! the task that asks.
//!
//! A request the policy marks `ask` has its body read first (bounded by the call's bytes-sent limit),
//! so what the approver sees (method, URL, body size, SHA-256 and the start of a text body) is exactly
//! what is sent; the hook then waits for the answer. No answer, a no, or nobody to ask: nothing is
//! sent and the tool gets `HTTP-request-denied`.

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

/// Bytes of a text body shown to the approver.
const SHOWN_BODY_BYTES: usize = 512;

/// A request waiting for the approver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRequest {
    /// The method.
    pub method: String,
    /// The URL as the tool asked for it.
    pub url: String,
    /// The body's size in bytes.
    pub body_bytes: u64,
    /// The body's SHA-256, hex.
    pub body_sha256: String,
    /// The body's first bytes, when it is UTF-8 text (`None`: empty or binary).
    pub body_start: Option<String>,
}

impl NetworkRequest {
    pub(crate) fn new(method: &http::Method, url: &http::Uri, body: &[u8]) -> NetworkRequest {
        let start = &body[..body.len().min(SHOWN_BODY_BYTES)];
        let text = match std::str::from_utf8(start) {
            Ok(text) => Some(text),
            // A character cut at the end of the shown part is still text.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(&start[..e.valid_up_to()]).ok()
            }
            Err(_) => None,
        };
        NetworkRequest {
            method: method.to_string(),
            url: url.to_string(),
            body_bytes: body.len() as u64,
            body_sha256: hex::encode(Sha256::digest(body)),
            body_start: text.filter(|t| !t.is_empty()).map(str::to_owned),
        }
    }
}

/// One question from a hook: the request, and where the answer goes.
pub(crate) type Ask = (NetworkRequest, oneshot::Sender<bool>);

/// The hook's end of the channel.
pub(crate) type Asker = mpsc::UnboundedSender<Ask>;

/// The asking task's end of the channel.
pub type Asks = mpsc::UnboundedReceiver<Ask>;

/// A channel for one call.
pub(crate) fn channel() -> (Asker, Asks) {
    mpsc::unbounded_channel()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_shown_by_size_digest_and_start() {
        let uri: http::Uri = "https://a.test/x?q=1".parse().unwrap();
        let shown = NetworkRequest::new(&http::Method::POST, &uri, "héllo".as_bytes());
        assert_eq!(shown.body_bytes, 6);
        assert_eq!(shown.body_start.as_deref(), Some("héllo"));
        assert_eq!(shown.url, "https://a.test/x?q=1");
        assert_eq!(
            shown.body_sha256,
            hex::encode(Sha256::digest("héllo".as_bytes()))
        );
        let binary = NetworkRequest::new(&http::Method::POST, &uri, &[0xff, 0xfe]);
        assert_eq!(binary.body_start, None);
        let long = "é".repeat(400);
        let cut = NetworkRequest::new(&http::Method::POST, &uri, long.as_bytes());
        assert_eq!(cut.body_start.unwrap().len(), 512);
    }
}
