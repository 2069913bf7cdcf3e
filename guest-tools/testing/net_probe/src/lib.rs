//! `net_probe`: a test guest that makes whatever requests its input lists, none of them declared (it
//! implements the plain `tool` world, no `url-fields`), prints its whole environment to stdout, and
//! answers with the headers it set on each request and what each request got. The network tests use it
//! to show that the host checks undeclared requests, and that a secret the host adds never reaches the
//! tool. Never bundled.

use serde::Deserialize;
use serde_json::json;
use turngate_guest::http::{Url, request};
use turngate_guest::{Descriptor, Guest, ToolError, describe, parse_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    requests: Vec<Probe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Probe {
    url: String,
    #[serde(default = "get")]
    method: String,
    body: Option<String>,
    #[serde(default = "small")]
    max_bytes: usize,
    /// Headers set on the request besides the probe's own (injection attempts among them).
    #[serde(default)]
    headers: Vec<(String, String)>,
}

fn get() -> String {
    "GET".to_owned()
}

fn small() -> usize {
    64 * 1024
}

struct NetProbe;

impl Guest for NetProbe {
    fn describe() -> Descriptor {
        let schema = json!({"type": "object", "properties": {"requests": {"type": "array"}}, "required": ["requests"]});
        describe("net_probe", "Makes the requests it is given.", &schema, &[])
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: Input = parse_input(&input)?;
        for (name, value) in std::env::vars() {
            println!("{name}={value}");
        }
        let own_headers = [("x-probe", "1"), ("accept", "*/*")];
        let mut results = Vec::new();
        for probe in &input.requests {
            let url = Url::parse(&probe.url).map_err(ToolError::InvalidInput)?;
            let headers: Vec<(&str, &str)> = own_headers
                .iter()
                .copied()
                .chain(probe.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
                .collect();
            let result = request(
                &probe.method,
                &url,
                &headers,
                probe.body.as_deref().map(str::as_bytes),
                probe.max_bytes,
            );
            results.push(match result {
                Ok(response) => json!({
                    "status": response.status,
                    "body": String::from_utf8_lossy(&response.body),
                    "headers": response.headers.iter().map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v))).collect::<Vec<_>>(),
                }),
                Err(error) => json!({"error": error}),
            });
        }
        let sent: Vec<String> = own_headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        Ok(json!({"sent_headers": sent, "results": results}).to_string())
    }
}

turngate_guest::export!(NetProbe);
