//! `p3_probe`: a test guest built for WASI 0.3 (world `async-network-tool`, `call` an `async func`).
//! Each input names one thing to do: answer at once, wait on a host clock, spin, grow its memory, open
//! streams, or fetch a URL (declared or not) through `wasi:http/client@0.3.0`. The tests use it to hold 0.3 calls to the
//! same limits, cancel and network hook as 0.2 ones. Never bundled.

#![allow(unsafe_code)] // what `wit_bindgen::generate!` expands to

mod bindings {
    #![allow(missing_docs)]
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "async-network-tool",
    });
}

use bindings::turngate::tool::types::{Descriptor, ToolError};
use serde::Deserialize;
use serde_json::json;
use turngate_guest::http::Url;
use wasip3::http::types::{ErrorCode, Fields, Method, Request, Scheme, Trailers};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, tag = "op", rename_all = "snake_case")]
enum Input {
    /// Answers `ok`.
    Noop,
    /// Waits `ms` milliseconds on `wasi:clocks/monotonic-clock@0.3.0.wait-for`: a guest parked in a host
    /// future, where no epoch check runs.
    Sleep { ms: u64 },
    /// Computes forever.
    Spin,
    /// Reads a stream whose writer it holds and never writes: waits on nothing that can come.
    StuckStream,
    /// Awaits a future whose writer it holds and never completes.
    StuckFuture,
    /// Grows its memory until an allocation fails.
    Grow,
    /// Opens `count` streams and holds them all.
    Streams { count: usize },
    /// Starts `count` tasks that each wait 50 ms on a host clock (`count` subtasks at once), and answers
    /// after 100 ms.
    Subtasks { count: usize },
    /// Sends a GET to `url` (declared in `url-fields`) and answers with the status and the body.
    Fetch { url: String },
    /// A request to `target`, which is not declared (only the network hook checks it), with
    /// `method` (GET by default), `headers` (injection attempts among them) and `body`; answered as
    /// `fetch` is.
    Probe {
        target: String,
        method: Option<String>,
        #[serde(default)]
        headers: Vec<(String, String)>,
        body: Option<String>,
    },
}

struct P3Probe;

impl bindings::Guest for P3Probe {
    fn describe() -> Descriptor {
        let schema = json!({
            "type": "object",
            "properties": {
                "op": {"enum": ["noop", "sleep", "spin", "stuck_stream", "stuck_future", "grow", "streams", "subtasks", "fetch", "probe"]},
                "ms": {"type": "integer", "minimum": 0},
                "count": {"type": "integer", "minimum": 0},
                "url": {"type": "string"},
                "target": {"type": "string"},
                "method": {"type": "string"},
                "headers": {"type": "array"},
                "body": {"type": "string"}
            },
            "required": ["op"],
            "additionalProperties": false
        });
        Descriptor {
            name: "p3_probe".into(),
            description: "A WASI 0.3 test tool.".into(),
            input_schema: schema.to_string(),
            paths: Vec::new(),
        }
    }

    fn url_fields() -> Vec<String> {
        vec!["/url".into()]
    }

    async fn call(input: String) -> Result<String, ToolError> {
        let input: Input = serde_json::from_str(&input)
            .map_err(|e| ToolError::InvalidInput(format!("bad input: {e}")))?;
        match input {
            Input::Noop => Ok("ok".into()),
            Input::Sleep { ms } => {
                started().await?;
                wasip3::clocks::monotonic_clock::wait_for(ms.saturating_mul(1_000_000)).await;
                Ok("slept".into())
            }
            Input::Spin => {
                started().await?;
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            Input::StuckStream => {
                let (_writer, mut reader) = wasip3::wit_stream::new::<u8>();
                let (_, read) = reader.read(Vec::with_capacity(1)).await;
                Ok(format!("read {} bytes nobody wrote", read.len()))
            }
            Input::StuckFuture => {
                let (_writer, reader) =
                    wasip3::wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
                Ok(format!("got {:?} nobody sent", reader.await))
            }
            Input::Grow => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            Input::Streams { count } => {
                let held: Vec<_> = (0..count).map(|_| wasip3::wit_stream::new::<u8>()).collect();
                Ok(format!("opened {}", held.len()))
            }
            Input::Subtasks { count } => {
                for _ in 0..count {
                    wasip3::wit_bindgen::spawn_local(async {
                        wasip3::clocks::monotonic_clock::wait_for(50_000_000).await;
                    });
                }
                // While this waits, each spawned task starts its own wait: a subtask the host holds.
                wasip3::clocks::monotonic_clock::wait_for(100_000_000).await;
                Ok(format!("waited in {count} subtasks"))
            }
            Input::Fetch { url } => send(&url, "GET", &[], None).await,
            Input::Probe {
                target,
                method,
                headers,
                body,
            } => send(&target, method.as_deref().unwrap_or("GET"), &headers, body).await,
        }
    }
}

/// A request to `url` through `wasi:http/client@0.3.0`: `"<status> <body>"`, or the error code (a header
/// the guest's own `fields` refuse is an error before anything is sent).
async fn send(
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: Option<String>,
) -> Result<String, ToolError> {
    let url = Url::parse(url).map_err(ToolError::InvalidInput)?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| ToolError::Failed(format!("header `{name}`: {e:?}")))?;
    }
    let (_, trailers) = wasip3::wit_future::new::<Result<Option<Trailers>, ErrorCode>>(|| Ok(None));
    let (contents, writer) = match body {
        Some(body) => {
            let (writer, reader) = wasip3::wit_stream::new::<u8>();
            (Some(reader), Some((writer, body)))
        }
        None => (None, None),
    };
    let (request, _sent) = Request::new(fields, contents, trailers, None);
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        other => Method::Other(other.to_owned()),
    };
    let set = request
        .set_method(&method)
        .and(request.set_scheme(Some(&if url.https { Scheme::Https } else { Scheme::Http })))
        .and(request.set_authority(Some(&url.authority)))
        .and(request.set_path_with_query(Some(&url.path_and_query)));
    set.map_err(|()| ToolError::InvalidInput("the URL does not make a request".into()))?;
    // The body is written while the request is sent (a server may read it before it answers).
    if let Some((mut writer, body)) = writer {
        wasip3::wit_bindgen::spawn_local(async move {
            let _ = writer.write_all(body.into_bytes()).await;
        });
    }
    let response = wasip3::http::client::send(request)
        .await
        .map_err(|e| ToolError::Failed(format!("{e:?}")))?;
    let status = response.get_status_code();
    let (_, processed) = wasip3::wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
    let (body, _trailers) = wasip3::http::types::Response::consume_body(response, processed);
    let body: Vec<u8> = body.collect().await;
    Ok(format!("{status} {}", String::from_utf8_lossy(&body)))
}

bindings::export!(P3Probe with_types_in bindings);

/// Says `p3_probe: started` on stdout (`wasi:cli/stdout@0.3.0`) once the host has taken it: what a test
/// that stops a waiting or computing call looks for, to know the call was running when it stopped.
async fn started() -> Result<(), ToolError> {
    let (mut writer, reader) = wasip3::wit_stream::new::<u8>();
    let done = wasip3::cli::stdout::write_via_stream(reader);
    let _ = writer.write_all(b"p3_probe: started\n".to_vec()).await;
    drop(writer);
    done.await
        .map_err(|e| ToolError::Failed(format!("stdout: {e:?}")))
}
