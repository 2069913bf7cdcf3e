//! When to retry a failed request, and how long to wait: the server's own delay (`retry-after-ms`,
//! `retry-after` in seconds or as an HTTP date, Gemini's `RetryInfo.retryDelay` such as `"3s"`), or
//! exponential backoff with jitter. Bounds live in [`RetryPolicy`]; they are separate from the
//! regeneration bounds of bad turns.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::errors::ApiError;

/// Bounds of API-error retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first request of a turn (default 2: three requests at most).
    pub max_retries: u32,
    /// First backoff delay (default 500 ms); doubled per retry.
    pub base_delay: Duration,
    /// Largest backoff delay (default 8 s).
    pub max_delay: Duration,
    /// Longest delay the server may ask for (default 60 s): a longer `retry-after` is not waited for,
    /// and the error ends the session.
    pub max_wait: Duration,
    /// Fraction of each backoff delay taken off at random (default 0.25), so that clients that failed
    /// together do not retry together.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_wait: Duration::from_secs(60),
            jitter: 0.25,
        }
    }
}

impl RetryPolicy {
    /// How long to wait before retry number `retry` (0 for the first) after `error`; `None` when the
    /// error must not be retried: its class forbids it, the bound is reached, or the server asked for a
    /// delay longer than [`max_wait`](Self::max_wait).
    pub fn delay(&self, retry: u32, error: &ApiError) -> Option<Duration> {
        if !error.retryable() || retry >= self.max_retries {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > self.max_wait => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(retry)),
        }
    }

    /// Exponential backoff with jitter: `base * 2^retry`, capped at `max_delay`, less a random fraction
    /// of up to `jitter`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let full = self
            .base_delay
            .saturating_mul(1u32 << retry.min(20))
            .min(self.max_delay);
        let jitter = self.jitter.clamp(0.0, 1.0);
        full.mul_f64(1.0 - jitter * fastrand::f64())
    }
}

/// The server's requested delay from the headers: `retry-after-ms` (milliseconds), else `retry-after`
/// (seconds, possibly fractional, or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    parse_retry_after(text("retry-after")?, SystemTime::now())
}

/// Parses a `retry-after` value (seconds or an HTTP date) relative to `now`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The server's `x-should-retry` header: `Some(true)`, `Some(false)`, or `None` when absent or unclear.
pub fn should_retry(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Gemini's delay from an error body: `error.details[]` entry of type `google.rpc.RetryInfo`, field
/// `retryDelay` in the protobuf JSON form of a duration (`"3s"`, `"0.250s"`).
pub fn gemini_retry_delay(body: &Value) -> Option<Duration> {
    body.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| parse_proto_duration(d.get("retryDelay")?.as_str()?))
}

/// Parses a protobuf JSON duration: decimal seconds followed by `s`.
pub fn parse_proto_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        let h = headers(&[("retry-after-ms", "1500"), ("retry-after", "9")]);
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let h = headers(&[("retry-after", "2")]);
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")])), None);
    }

    #[test]
    fn retry_after_accepts_an_http_date() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn gemini_retry_delay_is_read_from_retry_info() {
        let body = serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
        ]}});
        assert_eq!(gemini_retry_delay(&body), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_proto_duration("0.250s"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_proto_duration("3"), None);
    }

    #[test]
    fn x_should_retry_is_read() {
        assert_eq!(
            should_retry(&headers(&[("x-should-retry", "false")])),
            Some(false)
        );
        assert_eq!(
            should_retry(&headers(&[("x-should-retry", "true")])),
            Some(true)
        );
        assert_eq!(should_retry(&HeaderMap::new()), None);
    }

    #[test]
    fn backoff_doubles_is_capped_and_jittered() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            max_wait: Duration::from_secs(1),
            jitter: 0.25,
        };
        for _ in 0..100 {
            let d0 = policy.backoff(0);
            assert!(d0 <= Duration::from_millis(100) && d0 >= Duration::from_millis(75));
            let d1 = policy.backoff(1);
            assert!(d1 <= Duration::from_millis(200) && d1 >= Duration::from_millis(150));
            assert!(policy.backoff(5) <= Duration::from_millis(350));
        }
        let distinct: std::collections::BTreeSet<_> = (0..20).map(|_| policy.backoff(3)).collect();
        assert!(distinct.len() > 1, "jitter varies the delay");
    }

    #[test]
    fn the_bounds_stop_retries() {
        let policy = RetryPolicy {
            max_retries: 2,
            max_wait: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        let overloaded = ApiError::from_status(529, String::new(), None, None);
        assert!(policy.delay(0, &overloaded).is_some());
        assert!(policy.delay(1, &overloaded).is_some());
        assert!(policy.delay(2, &overloaded).is_none());
        let long = ApiError::from_status(429, String::new(), Some(Duration::from_secs(30)), None);
        assert_eq!(
            policy.delay(0, &long),
            None,
            "longer than max_wait: give up"
        );
        let short = ApiError::from_status(429, String::new(), Some(Duration::from_secs(3)), None);
        assert_eq!(policy.delay(0, &short), Some(Duration::from_secs(3)));
        let auth = ApiError::from_status(401, String::new(), None, None);
        assert_eq!(policy.delay(0, &auth), None);
    }
}
