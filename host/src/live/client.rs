//! One streaming request: the body goes out, the response body goes through the same
//! [`TurnDecoder`] as `turngate run`, and a whole [`Turn`] comes back. Text deltas are passed on as they
//! arrive; tool input is only collected. A server that answers the streaming request with one whole JSON
//! body (`content-type: application/json`: a proxy that ignores `stream: true`) is decoded the same way:
//! the decoder tells the two apart by the body itself, whatever the content type says, and the body's text
//! is passed on once it is whole. An HTTP error status, its headers (`retry-after-ms`,
//! `retry-after`, `x-should-retry`) and body (Gemini `RetryInfo`), and transport failures (connect,
//! reset, timeout, a body cut mid-stream) become an [`ApiError`] of the right class.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::providers::{DecoderOptions, TurnDecoder, clip, describe_error};
use crate::turn::{Provider, Turn};

use super::errors::ApiError;
use super::request::Endpoint;
use super::retry;

/// Timeouts and limits of the HTTP client.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// Connecting (default 10 s).
    pub connect_timeout: Duration,
    /// Longest silence while reading the response (default 120 s): a stalled stream is a transport
    /// error.
    pub read_timeout: Duration,
    /// Most bytes of an error response body read for its message (default 64 KiB).
    pub max_error_body: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            max_error_body: 64 * 1024,
        }
    }
}

/// A client for one endpoint. Cheap to share: one connection pool.
#[derive(Debug, Clone)]
pub struct LiveClient {
    http: reqwest::Client,
    endpoint: Endpoint,
    options: ClientOptions,
}

impl LiveClient {
    /// A client for `endpoint`.
    pub fn new(endpoint: Endpoint, options: ClientOptions) -> Result<LiveClient, ApiError> {
        let http = crate::tls::http_client()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .build()
            .map_err(|e| ApiError::Transport {
                message: format!("cannot build the HTTP client: {}", error_chain(&e)),
            })?;
        Ok(LiveClient {
            http,
            endpoint,
            options,
        })
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The protocol.
    pub fn provider(&self) -> Provider {
        self.endpoint.provider
    }

    /// Sends one request and consumes the whole streamed response into a [`Turn`], calling `on_text`
    /// for each visible text delta as it arrives. `max_output_tokens` is the output limit `body` asked for:
    /// a turn whose reported usage reaches it is truncated ([`DecoderOptions::max_output_tokens`]).
    /// Dropping the future aborts the request.
    pub async fn stream_turn(
        &self,
        body: &Value,
        max_output_tokens: Option<u64>,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Turn, ApiError> {
        let mut request = self
            .http
            .post(self.endpoint.url())
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).expect("a JSON value serializes"));
        for (name, value) in self.endpoint.headers() {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.http_error(response).await);
        }
        let options = DecoderOptions {
            max_output_tokens,
            ..DecoderOptions::default()
        };
        let mut decoder = TurnDecoder::with_options(self.endpoint.provider, options);
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ApiError::Transport {
                message: format!("the response body was cut: {}", error_chain(&e)),
            })?;
            for delta in decoder.feed(&chunk) {
                on_text(&delta.text);
            }
        }
        let (turn, deltas) = decoder.finish_with_deltas();
        for delta in deltas {
            on_text(&delta.text);
        }
        Ok(turn)
    }

    async fn http_error(&self, response: reqwest::Response) -> ApiError {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut retry_after = retry::retry_after(&headers);
        let should_retry = retry::should_retry(&headers);
        let mut bytes = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(Ok(chunk)) = stream.next().await {
            let room = self.options.max_error_body - bytes.len();
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if bytes.len() >= self.options.max_error_body {
                break;
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let message = match serde_json::from_str::<Value>(&text) {
            Ok(json) => {
                if retry_after.is_none() {
                    retry_after = retry::gemini_retry_delay(&json);
                }
                match json.get("error") {
                    Some(error @ Value::Object(_)) => describe_error(error),
                    Some(Value::String(s)) => clip(s),
                    _ => clip(&text),
                }
            }
            Err(_) if text.trim().is_empty() => "(no body)".to_owned(),
            Err(_) => clip(text.trim()),
        };
        ApiError::from_status(status, message, retry_after, should_retry)
    }
}

fn transport(error: reqwest::Error) -> ApiError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    ApiError::Transport {
        message: format!("{what}: {}", error_chain(&error)),
    }
}

/// An error and its sources, joined (reqwest's `Display` omits the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
