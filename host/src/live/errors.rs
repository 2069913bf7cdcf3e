//! The classes of API failure, kept apart: each has a stable [`ApiError::kind`], its own exit code
//! ([`ApiError::exit_code`]) and its own retry rule ([`ApiError::retryable`]).
//!
//! | class | cause | retried |
//! |---|---|---|
//! | `auth` | HTTP 401, 403 | never |
//! | `invalid_request` | HTTP 400, 404, 413, other 4xx | never (other 4xx only on `x-should-retry: true`) |
//! | `rate_limit` | HTTP 429, a rate-limit error event | yes, after the server's delay, bounded |
//! | `overloaded` | HTTP 529, 503, an `overloaded_error` event on an HTTP 200 stream | yes, backoff |
//! | `server` | other 5xx, other error events | yes, backoff |
//! | `transport` | connect, reset, timeout, body cut mid-stream (or ended before its terminator) | yes, backoff |
//! | `stream_parse` | a malformed stream, after its regenerations | no (regenerated first) |
//!
//! `x-should-retry: false` stops a retry the class would allow.

use std::time::Duration;

/// An API failure, classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 401 or 403: the key is wrong or lacks permission. Never retried.
    #[error("authentication or permission refused (HTTP {status}): {message}")]
    Auth {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// 400, 404, 413 or another 4xx: the request itself is wrong. Never retried.
    #[error("invalid request (HTTP {status}): {message}")]
    InvalidRequest {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
        /// The server's `x-should-retry` header, when present.
        should_retry: Option<bool>,
    },
    /// 429 (or a rate-limit error event): retried after the server's delay, within bounds.
    #[error("rate limited{}: {message}", status_suffix(*status))]
    RateLimited {
        /// The HTTP status (`None` for an error event in a 200 stream).
        status: Option<u16>,
        /// The provider's message.
        message: String,
        /// The delay the server asked for (`retry-after-ms`, `retry-after`, Gemini `RetryInfo.retryDelay`).
        retry_after: Option<Duration>,
        /// The server's `x-should-retry` header.
        should_retry: Option<bool>,
    },
    /// 529, 503, or an `overloaded_error` event on a 200 stream.
    #[error("provider overloaded{}: {message}", status_suffix(*status))]
    Overloaded {
        /// The HTTP status (`None` for an error event in a 200 stream).
        status: Option<u16>,
        /// The provider's message.
        message: String,
        /// The delay the server asked for, if any.
        retry_after: Option<Duration>,
        /// The server's `x-should-retry` header.
        should_retry: Option<bool>,
    },
    /// Another 5xx, or another error event on a 200 stream.
    #[error("server error{}: {message}", status_suffix(*status))]
    Server {
        /// The HTTP status (`None` for an error event in a 200 stream).
        status: Option<u16>,
        /// The provider's message.
        message: String,
        /// The delay the server asked for, if any.
        retry_after: Option<Duration>,
        /// The server's `x-should-retry` header.
        should_retry: Option<bool>,
    },
    /// Connect, reset, timeout, or the body cut mid-stream.
    #[error("transport error: {message}")]
    Transport {
        /// What failed.
        message: String,
    },
    /// The stream broke its protocol (and regeneration did not help).
    #[error("stream parse failure: {message}")]
    StreamParse {
        /// The decoder's detail.
        message: String,
    },
}

fn status_suffix(status: Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

impl ApiError {
    /// The stable class name: `auth`, `invalid_request`, `rate_limit`, `overloaded`, `server`,
    /// `transport`, `stream_parse`.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Auth { .. } => "auth",
            ApiError::InvalidRequest { .. } => "invalid_request",
            ApiError::RateLimited { .. } => "rate_limit",
            ApiError::Overloaded { .. } => "overloaded",
            ApiError::Server { .. } => "server",
            ApiError::Transport { .. } => "transport",
            ApiError::StreamParse { .. } => "stream_parse",
        }
    }

    /// The exit code of `turngate agent` when this error ends the session: 10 auth, 11 invalid
    /// request, 12 rate limit, 13 overloaded, 14 server, 15 transport, 16 stream parse.
    pub fn exit_code(&self) -> u8 {
        match self {
            ApiError::Auth { .. } => 10,
            ApiError::InvalidRequest { .. } => 11,
            ApiError::RateLimited { .. } => 12,
            ApiError::Overloaded { .. } => 13,
            ApiError::Server { .. } => 14,
            ApiError::Transport { .. } => 15,
            ApiError::StreamParse { .. } => 16,
        }
    }

    /// The HTTP status, when the error came with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Auth { status, .. } | ApiError::InvalidRequest { status, .. } => {
                Some(*status)
            }
            ApiError::RateLimited { status, .. }
            | ApiError::Overloaded { status, .. }
            | ApiError::Server { status, .. } => *status,
            ApiError::Transport { .. } | ApiError::StreamParse { .. } => None,
        }
    }

    /// The delay the server asked for before a retry.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::RateLimited { retry_after, .. }
            | ApiError::Overloaded { retry_after, .. }
            | ApiError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the class allows a retry, with the server's `x-should-retry` applied: `false` stops any
    /// retry; `true` also allows one for a 4xx other than 400, 404 and 413. 401, 403, 400, 404 and 413 are
    /// never retried.
    pub fn retryable(&self) -> bool {
        match self {
            ApiError::Auth { .. } | ApiError::StreamParse { .. } => false,
            ApiError::InvalidRequest {
                status,
                should_retry,
                ..
            } => *should_retry == Some(true) && !matches!(status, 400 | 404 | 413),
            ApiError::RateLimited { should_retry, .. }
            | ApiError::Overloaded { should_retry, .. }
            | ApiError::Server { should_retry, .. } => *should_retry != Some(false),
            ApiError::Transport { .. } => true,
        }
    }

    /// Classifies an HTTP error response.
    pub fn from_status(
        status: u16,
        message: String,
        retry_after: Option<Duration>,
        should_retry: Option<bool>,
    ) -> ApiError {
        match status {
            401 | 403 => ApiError::Auth { status, message },
            429 => ApiError::RateLimited {
                status: Some(status),
                message,
                retry_after,
                should_retry,
            },
            408 => ApiError::Transport {
                message: format!("HTTP 408 request timeout: {message}"),
            },
            503 | 529 => ApiError::Overloaded {
                status: Some(status),
                message,
                retry_after,
                should_retry,
            },
            500..=599 => ApiError::Server {
                status: Some(status),
                message,
                retry_after,
                should_retry,
            },
            _ => ApiError::InvalidRequest {
                status,
                message,
                should_retry,
            },
        }
    }

    /// Classifies an error event carried by an HTTP 200 stream (the turn's `Errored` detail).
    pub fn from_stream_error(detail: &str) -> ApiError {
        let lower = detail.to_ascii_lowercase();
        let message = detail.to_owned();
        if lower.contains("overloaded") || lower.contains("unavailable") {
            ApiError::Overloaded {
                status: None,
                message,
                retry_after: None,
                should_retry: None,
            }
        } else if lower.contains("rate_limit") || lower.contains("resource_exhausted") {
            ApiError::RateLimited {
                status: None,
                message,
                retry_after: None,
                should_retry: None,
            }
        } else {
            ApiError::Server {
                status: None,
                message,
                retry_after: None,
                should_retry: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_classes() {
        let class = |s| ApiError::from_status(s, "m".into(), None, None).kind();
        assert_eq!(class(401), "auth");
        assert_eq!(class(403), "auth");
        for s in [400, 404, 413, 422] {
            assert_eq!(class(s), "invalid_request");
        }
        assert_eq!(class(429), "rate_limit");
        assert_eq!(class(529), "overloaded");
        assert_eq!(class(503), "overloaded");
        assert_eq!(class(500), "server");
        assert_eq!(class(502), "server");
        assert_eq!(class(408), "transport");
    }

    #[test]
    fn never_retried_classes_ignore_x_should_retry() {
        for s in [401, 403, 400, 404, 413] {
            assert!(!ApiError::from_status(s, "m".into(), None, Some(true)).retryable());
        }
        assert!(ApiError::from_status(409, "m".into(), None, Some(true)).retryable());
        assert!(!ApiError::from_status(409, "m".into(), None, None).retryable());
        assert!(ApiError::from_status(529, "m".into(), None, None).retryable());
        assert!(!ApiError::from_status(529, "m".into(), None, Some(false)).retryable());
        assert!(!ApiError::from_status(429, "m".into(), None, Some(false)).retryable());
    }

    #[test]
    fn stream_errors_are_classified_by_type() {
        assert_eq!(
            ApiError::from_stream_error("error event: overloaded_error: Overloaded").kind(),
            "overloaded"
        );
        assert_eq!(
            ApiError::from_stream_error("error event: api_error: boom").kind(),
            "server"
        );
    }

    #[test]
    fn exit_codes_are_distinct() {
        let errors = [
            ApiError::from_status(401, String::new(), None, None),
            ApiError::from_status(400, String::new(), None, None),
            ApiError::from_status(429, String::new(), None, None),
            ApiError::from_status(529, String::new(), None, None),
            ApiError::from_status(500, String::new(), None, None),
            ApiError::Transport {
                message: String::new(),
            },
            ApiError::StreamParse {
                message: String::new(),
            },
        ];
        let mut codes: Vec<u8> = errors.iter().map(ApiError::exit_code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
    }
}
