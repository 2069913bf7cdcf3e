//! `fetch`: GET or HEAD one URL and return the status, the headers asked for and the body as text.
//!
//! The URL is a declared URL field (`url-fields`), so the host checks it against the policy before the
//! call starts. Redirects are followed by making the next request, which the host checks again; at
//! most [`MAX_REDIRECTS`]. The body is read up to `max_bytes` (at most [`MAX_BODY`]); a longer one is
//! cut and marked `truncated`, and a body that is not UTF-8 text is returned lossily. The whole output
//! fits [`OUTPUT_BUDGET`], the host's default output limit: a body whose JSON-escaped text would not
//! fit (control characters take six bytes each) is cut shorter, and marked `truncated` too.

use serde::Deserialize;
use serde_json::json;
use turngate_guest::http::{NetworkGuest, Url, request};
use turngate_guest::{Descriptor, ToolError, describe, parse_input};

/// Body bytes returned when the input sets no `max_bytes`.
const DEFAULT_BODY: usize = 64 * 1024;
/// The largest `max_bytes` accepted: half the output budget, so the status, the headers and the
/// escapes of ordinary text fit beside it.
const MAX_BODY: usize = 512 * 1024;
/// The most bytes the output takes: the host's default output limit (`Limits::output_bytes`).
const OUTPUT_BUDGET: usize = 1024 * 1024;
/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    url: String,
    #[serde(default)]
    method: Method,
    #[serde(default)]
    headers: Vec<String>,
    max_bytes: Option<usize>,
}

#[derive(Deserialize, Default, Clone, Copy)]
enum Method {
    #[default]
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "HEAD")]
    Head,
}

struct Fetch;

impl NetworkGuest for Fetch {
    fn describe() -> Descriptor {
        let schema = json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL to request."},
                "method": {"enum": ["GET", "HEAD"], "description": "GET (the default) or HEAD."},
                "headers": {
                    "type": "array", "items": {"type": "string"}, "maxItems": 32,
                    "description": "Names of the response headers to return (content-type is always returned)."
                },
                "max_bytes": {
                    "type": "integer", "minimum": 0, "maximum": MAX_BODY,
                    "description": "Most body bytes to return (default 65536)."
                }
            },
            "required": ["url"],
            "additionalProperties": false
        });
        describe(
            "fetch",
            "Requests a URL with GET or HEAD and returns the status, the content type (and other headers asked for) and the body as text, cut at max_bytes. Follows up to 5 redirects. Only URLs the policy allows can be fetched.",
            &schema,
            &[],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: Input = parse_input(&input)?;
        let max_bytes = input.max_bytes.unwrap_or(DEFAULT_BODY).min(MAX_BODY);
        let method = match input.method {
            Method::Get => "GET",
            Method::Head => "HEAD",
        };
        let mut url = Url::parse(&input.url).map_err(ToolError::InvalidInput)?;
        let mut redirects = 0;
        let response = loop {
            let response = request(method, &url, &[], None, max_bytes)
                .map_err(|e| ToolError::Failed(format!("{method} {url}: {e}")))?;
            let location = response.header("location");
            match (response.status, location) {
                (301 | 302 | 303 | 307 | 308, Some(location)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    url = url.join(&location).map_err(ToolError::Failed)?;
                }
                _ => break response,
            }
        };
        let mut headers = serde_json::Map::new();
        for name in std::iter::once("content-type".to_owned())
            .chain(input.headers.iter().map(|n| n.to_ascii_lowercase()))
        {
            if let Some(value) = response.header(&name) {
                headers.insert(name, json!(value));
            }
        }
        let output = |body: &str, truncated: bool| {
            json!({
                "url": url.to_string(),
                "status": response.status,
                "headers": headers,
                "body": body,
                "truncated": truncated,
            })
            .to_string()
        };
        let room = OUTPUT_BUDGET.saturating_sub(output("", true).len());
        let text = String::from_utf8_lossy(&response.body);
        let (body, cut) = escaped_prefix(&text, room);
        Ok(output(body, response.truncated || cut))
    }

    fn url_fields() -> Vec<String> {
        vec!["/url".to_owned()]
    }
}

/// The longest prefix of `text` whose JSON-escaped form takes at most `room` bytes, and whether that
/// cut anything.
fn escaped_prefix(text: &str, room: usize) -> (&str, bool) {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if used > room {
            return (&text[..at], true);
        }
    }
    (text, false)
}

turngate_guest::http::export_network_tool!(Fetch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_cut_where_its_escaped_text_would_not_fit() {
        assert_eq!(escaped_prefix("abc", 3), ("abc", false));
        assert_eq!(escaped_prefix("abcd", 3), ("abc", true));
        // A control character escapes to six bytes, a quote to two.
        assert_eq!(escaped_prefix("a\u{1}b", 6), ("a", true));
        assert_eq!(escaped_prefix("\"\"", 4), ("\"\"", false));
        let escaped = serde_json::to_string(&"\u{1}\u{8}\"é\n").unwrap();
        let text = "\u{1}\u{8}\"é\n";
        assert_eq!(escaped_prefix(text, escaped.len() - 2), (text, false));
    }
}
