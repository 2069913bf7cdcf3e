//! A secret's value kept out of what a server answers.
//!
//! A server that echoes the request back (a debugging endpoint, a proxy's error page, an API that
//! quotes the `Authorization` header it refused) would hand the tool the secret the host added. So a
//! response to a request that carried a secret has every occurrence of the secret, in the encodings
//! [`encodings`] lists, replaced by as many `*` before the tool reads it: in its header values, across
//! the chunks of its body (a value split between two chunks included) and in its trailers. Lengths
//! stay as they were, so `content-length` still holds. Values shorter than [`MIN_MASKED`] bytes are
//! not looked for; a body the server compressed cannot be looked into, so the request asks for none
//! and a response that is encoded anyway is refused (`call.rs`).

use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use memchr::memmem::Finder;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// The shortest text looked for: shorter ones (a one-letter password of a basic credential) would
/// mask ordinary text and are no secret.
pub(crate) const MIN_MASKED: usize = 4;

/// The texts a secret may come back as: the header value as sent (`Bearer ...`), the value itself, for
/// a `Basic` credential its decoded `user:password` and the password, and each of those as a JSON
/// string writes it (quotes and backslashes escaped, and slashes too, as some encoders do).
pub(crate) fn encodings(secret: &[u8], sent: &[u8]) -> Vec<Vec<u8>> {
    let mut texts = vec![sent.to_vec(), secret.to_vec()];
    let basic = sent
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"basic "));
    if basic
        && let Ok(decoded) =
            base64::engine::general_purpose::STANDARD.decode(sent[6..].trim_ascii())
    {
        if let Some(colon) = decoded.iter().position(|&b| b == b':') {
            texts.push(decoded[colon + 1..].to_vec());
        }
        texts.push(decoded);
    }
    let escaped: Vec<Vec<u8>> = texts
        .iter()
        .flat_map(|text| {
            let json = json_escaped(text, false);
            let slashes = json_escaped(text, true);
            [json, slashes]
        })
        .collect();
    texts.extend(escaped);
    texts.retain(|text| text.len() >= MIN_MASKED);
    texts.sort();
    texts.dedup();
    texts
}

/// `text` as the inside of a JSON string: `"` and `\` escaped, and `/` as `\/` when `slashes`.
fn json_escaped(text: &[u8], slashes: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for &byte in text {
        match byte {
            b'"' | b'\\' => out.extend([b'\\', byte]),
            b'/' if slashes => out.extend(*b"\\/"),
            _ => out.push(byte),
        }
    }
    out
}

/// The texts of the secrets one request carried, each with its secret's name.
#[derive(Clone)]
pub(crate) struct SecretMask {
    texts: Vec<(Finder<'static>, usize)>,
    names: Vec<String>,
    longest: usize,
}

impl SecretMask {
    /// A mask for no secret yet.
    pub(crate) fn new() -> SecretMask {
        SecretMask {
            texts: Vec::new(),
            names: Vec::new(),
            longest: 0,
        }
    }

    /// Looks for the secret `name` as `texts` ([`encodings`]).
    pub(crate) fn add(&mut self, name: &str, texts: Vec<Vec<u8>>) {
        let index = self.names.len();
        self.names.push(name.to_owned());
        for text in texts {
            self.longest = self.longest.max(text.len());
            self.texts.push((Finder::new(&text).into_owned(), index));
        }
    }

    /// Whether there is anything to look for.
    pub(crate) fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Masks every occurrence in `bytes`; answers the names of the secrets found.
    fn mask(&self, bytes: &mut [u8]) -> Vec<&str> {
        let mut found = Vec::new();
        let mut spans = Vec::new();
        for (finder, secret) in &self.texts {
            for at in finder.find_iter(bytes) {
                spans.push(at..at + finder.needle().len());
                if !found.contains(secret) {
                    found.push(*secret);
                }
            }
        }
        for span in spans {
            bytes[span].fill(b'*');
        }
        found.iter().map(|&i| self.names[i].as_str()).collect()
    }

    /// Masks every header value in `headers`; answers the names of the secrets found.
    pub(crate) fn mask_headers(&self, headers: &mut HeaderMap) -> Vec<String> {
        let mut found = Vec::new();
        for value in headers.values_mut() {
            let mut bytes = value.as_bytes().to_vec();
            let names = self.mask(&mut bytes);
            if !names.is_empty() {
                found.extend(names.into_iter().map(str::to_owned));
                // Only visible ASCII replaced visible ASCII: the value stays valid.
                if let Ok(masked) = http::HeaderValue::from_bytes(&bytes) {
                    *value = masked;
                }
            }
        }
        found.sort();
        found.dedup();
        found
    }
}

/// Called with a secret's name each time it is found in a body.
pub(crate) type OnMasked = Box<dyn Fn(&str) + Send + Sync>;

/// A response body with the secrets masked, across chunk boundaries: the last `longest - 1` bytes
/// seen are held back until the next chunk (or the end) shows they start no secret.
pub(crate) struct MaskedBody {
    inner: WasiBody,
    mask: SecretMask,
    on_masked: OnMasked,
    held: BytesMut,
    trailers: Option<HeaderMap>,
    ended: bool,
}

impl MaskedBody {
    pub(crate) fn new(inner: WasiBody, mask: SecretMask, on_masked: OnMasked) -> MaskedBody {
        MaskedBody {
            inner,
            mask,
            on_masked,
            held: BytesMut::new(),
            trailers: None,
            ended: false,
        }
    }

    /// Masks what is held and splits off what can go: all of it at the end, else all but the tail
    /// that could begin a secret.
    fn release(&mut self, at_end: bool) -> Option<Bytes> {
        for name in self.mask.mask(&mut self.held) {
            (self.on_masked)(name);
        }
        let keep = if at_end {
            0
        } else {
            self.mask.longest.saturating_sub(1)
        };
        let ready = self.held.len().saturating_sub(keep);
        (ready > 0).then(|| self.held.split_to(ready).freeze())
    }
}

impl Body for MaskedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                if let Some(ready) = this.release(true) {
                    return Poll::Ready(Some(Ok(Frame::data(ready))));
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        if let Some(ready) = this.release(false) {
                            return Poll::Ready(Some(Ok(Frame::data(ready))));
                        }
                    }
                    Err(frame) => {
                        if let Ok(mut trailers) = frame.into_trailers() {
                            for name in this.mask.mask_headers(&mut trailers) {
                                (this.on_masked)(&name);
                            }
                            this.trailers = Some(trailers);
                        }
                        this.ended = true;
                    }
                },
                Poll::Ready(None) => this.ended = true,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn mask_of(secret: &str, sent: &str) -> SecretMask {
        let mut mask = SecretMask::new();
        mask.add("api", encodings(secret.as_bytes(), sent.as_bytes()));
        mask
    }

    #[test]
    fn a_basic_credential_is_looked_for_as_sent_decoded_and_as_its_password() {
        // base64 of `alice:opensesame`
        let sent = "Basic YWxpY2U6b3BlbnNlc2FtZQ==";
        let texts = encodings(b"YWxpY2U6b3BlbnNlc2FtZQ==", sent.as_bytes());
        for text in [
            sent,
            "YWxpY2U6b3BlbnNlc2FtZQ==",
            "alice:opensesame",
            "opensesame",
        ] {
            assert!(texts.contains(&text.as_bytes().to_vec()), "{text}");
        }
        // Short ones are not looked for.
        assert!(encodings(b"abc", b"abc").is_empty());
        // JSON's escapes, with and without escaped slashes.
        let texts = encodings(b"to/k\"en", b"Bearer to/k\"en");
        assert!(texts.contains(&br#"to\/k\"en"#.to_vec()));
        assert!(texts.contains(&br#"to/k\"en"#.to_vec()));
    }

    #[test]
    fn headers_are_masked_and_named() {
        let mask = mask_of("s3cret-value", "Bearer s3cret-value");
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", "got Bearer s3cret-value!".parse().unwrap());
        headers.insert("x-other", "nothing".parse().unwrap());
        assert_eq!(mask.mask_headers(&mut headers), ["api"]);
        assert_eq!(headers["x-echo"], "got *******************!");
        assert_eq!(headers["x-other"], "nothing");
    }

    /// A body in pieces of every size, the secret across their boundaries: masked, same length.
    #[test]
    fn a_secret_split_across_chunks_is_masked_in_a_body_of_any_chunking() {
        let secret = "s3cret-value-0123";
        let text = format!("before {secret} middle Bearer {secret} after {secret}");
        // The header value as sent is a text of its own, `Bearer ` and all.
        let sent = format!("Bearer {secret}");
        let expected = text
            .replace(&sent, &"*".repeat(sent.len()))
            .replace(secret, &"*".repeat(secret.len()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for size in 1..=text.len() {
            let chunks: Vec<Result<Frame<Bytes>, HttpError>> = text
                .as_bytes()
                .chunks(size)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            let inner = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
            let found = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = found.clone();
            let body = MaskedBody::new(
                http_body_util::BodyExt::boxed_unsync(inner),
                mask_of(secret, &format!("Bearer {secret}")),
                Box::new(move |name| seen.lock().unwrap().push(name.to_owned())),
            );
            let read = runtime.block_on(body.collect()).unwrap().to_bytes();
            assert_eq!(String::from_utf8_lossy(&read), expected, "chunks of {size}");
            assert!(!found.lock().unwrap().is_empty(), "chunks of {size}");
        }
    }
}
