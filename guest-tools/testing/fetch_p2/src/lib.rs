//! `fetch_p2`: `p3_probe`'s `fetch` op built for WASI 0.2 (`wasi:http/outgoing-handler`), so that the
//! benchmarks compare the two generations doing the same work: one GET of the declared `/url`,
//! answered as `"<status> <body>"`. Never bundled.

use serde::Deserialize;
use turngate_guest::http::{NetworkGuest, Url, request};
use turngate_guest::{Descriptor, ToolError, describe, parse_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    url: String,
}

/// The most body bytes read (as `p3_probe`, which reads the whole body, would for these tests).
const MAX_BODY: usize = 1 << 20;

struct FetchP2;

impl NetworkGuest for FetchP2 {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"],
            "additionalProperties": false
        });
        describe("fetch_p2", "GETs a URL (a WASI 0.2 test tool).", &schema, &[])
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: Input = parse_input(&input)?;
        let url = Url::parse(&input.url).map_err(ToolError::InvalidInput)?;
        let response =
            request("GET", &url, &[], None, MAX_BODY).map_err(ToolError::Failed)?;
        Ok(format!(
            "{} {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        ))
    }

    fn url_fields() -> Vec<String> {
        vec!["/url".into()]
    }
}

turngate_guest::http::export_network_tool!(FetchP2);
