//! A fake model provider served over real HTTP/1.1 on loopback, for the live-provider tests and the
//! load bench. It speaks each provider's SSE protocol ([`sse`]) and whole JSON answers ([`whole`]), answers from a script (a 400 past its end) or a handler,
//! counts and records every request, and checks every request the way the real APIs do: the key header
//! must be there (else 401), streaming must be asked for, and every tool call in the conversation must
//! have exactly one result in the provider's shape (else 400 `invalid_request_error`).
//!
//! The server is a plain tokio accept loop (no framework) so faults can be injected at the byte level:
//! a connection closed mid-body, a status with any headers.

#![allow(dead_code)] // each test binary uses its own subset

pub mod load;
pub mod sse;
pub mod whole;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use turngate::Provider;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request target (path and query).
    pub path: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The body (`Null` when it is not JSON).
    pub body: Value,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this SSE body, sent in small chunks (chunked transfer encoding).
    Sse(String),
    /// 200, the first `cut_at` bytes of this SSE body, then the connection is closed without ending
    /// the chunked body: the client sees the body cut mid-stream.
    SseCut { body: String, cut_at: usize },
    /// 200, the first `stall_at` bytes of this SSE body, then silence for a minute with the connection
    /// open: the client's read timeout must end it.
    SseStall { body: String, stall_at: usize },
    /// An HTTP error status with headers and a body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

impl Reply {
    /// An HTTP error in the provider's JSON error shape.
    pub fn error(provider: Provider, status: u16, kind: &str, message: &str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: error_body(provider, status, kind, message).to_string(),
        }
    }

    /// 200 with a whole JSON body (`content-type: application/json`), whatever the request asked for.
    pub fn json(body: String) -> Reply {
        Reply::Status {
            status: 200,
            headers: Vec::new(),
            body,
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }
}

/// The provider's error body: Anthropic `{"type":"error","error":{"type","message"}}`, OpenAI
/// `{"error":{"message","type","param","code"}}`, Gemini `{"error":{"code","message","status"}}`.
pub fn error_body(provider: Provider, status: u16, kind: &str, message: &str) -> Value {
    match provider {
        Provider::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Provider::Gemini => json!({"error": {"code": status, "message": message, "status": kind}}),
    }
}

type Handler = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

struct State {
    provider: Provider,
    requests: Mutex<Vec<Recorded>>,
    script: Mutex<VecDeque<Reply>>,
    handler: Option<Box<Handler>>,
    record_bodies: bool,
}

/// A running fake provider. The server lives as long as the process.
#[derive(Clone)]
pub struct FakeProvider {
    pub provider: Provider,
    addr: SocketAddr,
    state: Arc<State>,
}

impl FakeProvider {
    /// A server answering the `n`-th valid request with the `n`-th reply of `script` (a 400 once the
    /// script is exhausted).
    pub fn scripted(provider: Provider, script: Vec<Reply>) -> FakeProvider {
        Self::start(State {
            provider,
            requests: Mutex::new(Vec::new()),
            script: Mutex::new(script.into()),
            handler: None,
            record_bodies: true,
        })
    }

    /// A server answering each valid request with `handler(request, index)`. Bodies are not kept
    /// (for load tests); the count is.
    pub fn with_handler(
        provider: Provider,
        handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
    ) -> FakeProvider {
        Self::start(State {
            provider,
            requests: Mutex::new(Vec::new()),
            script: Mutex::new(VecDeque::new()),
            handler: Some(Box::new(handler)),
            record_bodies: false,
        })
    }

    fn start(state: State) -> FakeProvider {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(state);
        let server = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((socket, _)) = listener.accept().await else {
                        continue;
                    };
                    let state = server.clone();
                    tokio::spawn(async move {
                        let _ = serve(state, socket).await;
                    });
                }
            });
        });
        FakeProvider {
            provider: state.provider,
            addr,
            state,
        }
    }

    /// The base URL to give the client.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far (bodies are `Null` for handler servers).
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// How many requests were made.
    pub fn count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }
}

async fn serve(state: Arc<State>, mut socket: TcpStream) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    let reply = {
        let index = {
            let mut requests = state.requests.lock().unwrap();
            requests.push(if state.record_bodies {
                request.clone()
            } else {
                Recorded {
                    body: Value::Null,
                    ..request.clone()
                }
            });
            requests.len() - 1
        };
        match check_request(state.provider, &request) {
            Some(reply) => reply,
            None => match &state.handler {
                Some(handler) => handler(&request, index),
                // Past the script: a 400, never retried, so a client that asks too often fails
                // fast instead of looping.
                None => state.script.lock().unwrap().pop_front().unwrap_or_else(|| {
                    Reply::error(
                        state.provider,
                        400,
                        "invalid_request_error",
                        "the fake's script is exhausted",
                    )
                }),
            },
        }
    };
    write_reply(&mut socket, reply).await
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let path = request_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(Some(Recorded {
        path,
        headers,
        body,
    }))
}

async fn write_reply(socket: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
        }
        Reply::Sse(body) => {
            write_sse(socket, body.as_bytes()).await?;
            socket.write_all(b"0\r\n\r\n").await?;
        }
        Reply::SseCut { body, cut_at } => {
            write_sse(socket, &body.as_bytes()[..cut_at.min(body.len())]).await?;
            // No final chunk: the connection closes in the middle of the body.
        }
        Reply::SseStall { body, stall_at } => {
            write_sse(socket, &body.as_bytes()[..stall_at.min(body.len())]).await?;
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
    }
    socket.flush().await?;
    socket.shutdown().await
}

async fn write_sse(socket: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    // Small chunks that do not align with events, flushed one by one.
    for piece in body.chunks(97) {
        socket
            .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await?;
        socket.write_all(piece).await?;
        socket.write_all(b"\r\n").await?;
        socket.flush().await?;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// What a real API would refuse before generating anything: a missing key (401), a request that does
/// not ask for streaming, or a conversation with a tool call left unanswered (400).
fn check_request(provider: Provider, request: &Recorded) -> Option<Reply> {
    let has_key = match provider {
        // Anthropic takes a key or a bearer token; its newer SDKs send the key as a bearer token.
        Provider::Anthropic => {
            request.headers.contains_key("x-api-key")
                || request
                    .headers
                    .get("authorization")
                    .is_some_and(|v| v.starts_with("Bearer "))
        }
        Provider::OpenAiChat | Provider::OpenAiResponses => request
            .headers
            .get("authorization")
            .is_some_and(|v| v.starts_with("Bearer ")),
        Provider::Gemini => request.headers.contains_key("x-goog-api-key"),
    };
    if !has_key {
        return Some(Reply::error(
            provider,
            401,
            "authentication_error",
            "missing API key",
        ));
    }
    let streaming = match provider {
        Provider::Gemini => request.path.contains(":streamGenerateContent?alt=sse"),
        _ => request.body["stream"] == json!(true),
    };
    if !streaming {
        return Some(Reply::error(
            provider,
            400,
            "invalid_request_error",
            "the fake only streams",
        ));
    }
    missing_results(provider, &request.body)
        .map(|message| Reply::error(provider, 400, "invalid_request_error", &message))
}

/// Checks that every tool call in a request's conversation has exactly one result, in the provider's
/// shape, where the protocol wants it; returns what is wrong.
pub fn missing_results(provider: Provider, body: &Value) -> Option<String> {
    let empty = Vec::new();
    match provider {
        Provider::Anthropic => {
            let messages = body["messages"].as_array().unwrap_or(&empty);
            for (i, message) in messages.iter().enumerate() {
                if message["role"] != "assistant" {
                    continue;
                }
                let ids: Vec<&str> = blocks(message)
                    .filter(|b| b["type"] == "tool_use")
                    .filter_map(|b| b["id"].as_str())
                    .collect();
                if ids.is_empty() {
                    continue;
                }
                let Some(next) = messages.get(i + 1) else {
                    return Some(format!(
                        "messages.{i}: tool_use ids {ids:?} have no tool_result"
                    ));
                };
                let leading: Vec<&str> = blocks(next)
                    .take_while(|b| b["type"] == "tool_result")
                    .filter_map(|b| b["tool_use_id"].as_str())
                    .collect();
                if next["role"] != "user" || !same_set(&ids, &leading) {
                    return Some(format!(
                        "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids:?} vs {leading:?}",
                        i + 1
                    ));
                }
            }
            None
        }
        Provider::OpenAiChat => {
            let messages = body["messages"].as_array().unwrap_or(&empty);
            for (i, message) in messages.iter().enumerate() {
                let ids: Vec<&str> = message["tool_calls"]
                    .as_array()
                    .unwrap_or(&empty)
                    .iter()
                    .filter_map(|c| c["id"].as_str())
                    .collect();
                if message["role"] != "assistant" || ids.is_empty() {
                    continue;
                }
                let answered: Vec<&str> = messages[i + 1..]
                    .iter()
                    .take_while(|m| m["role"] == "tool")
                    .filter_map(|m| m["tool_call_id"].as_str())
                    .collect();
                if !same_set(&ids, &answered) {
                    return Some(format!(
                        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id': {ids:?} vs {answered:?}"
                    ));
                }
            }
            None
        }
        Provider::OpenAiResponses => {
            let items = body["input"].as_array().unwrap_or(&empty);
            let calls: Vec<&str> = items
                .iter()
                .filter(|i| i["type"] == "function_call")
                .filter_map(|i| i["call_id"].as_str())
                .collect();
            let outputs: Vec<&str> = items
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .filter_map(|i| i["call_id"].as_str())
                .collect();
            (!same_set(&calls, &outputs)).then(|| {
                format!("No tool output found for function call: {calls:?} vs {outputs:?}")
            })
        }
        Provider::Gemini => {
            let contents = body["contents"].as_array().unwrap_or(&empty);
            for (i, content) in contents.iter().enumerate() {
                let calls: Vec<&Value> = parts(content)
                    .filter_map(|p| p.get("functionCall"))
                    .collect();
                if content["role"] != "model" || calls.is_empty() {
                    continue;
                }
                let responses: Vec<&Value> = contents
                    .get(i + 1)
                    .filter(|c| c["role"] == "user")
                    .map(|c| parts(c).filter_map(|p| p.get("functionResponse")).collect())
                    .unwrap_or_default();
                let matches = calls.len() == responses.len()
                    && calls.iter().zip(&responses).all(|(c, r)| {
                        c["name"] == r["name"]
                            && c.get("id").is_none_or(|id| r.get("id") == Some(id))
                    });
                if !matches {
                    return Some(
                        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into(),
                    );
                }
            }
            None
        }
    }
}

fn blocks(message: &Value) -> impl Iterator<Item = &Value> {
    message["content"].as_array().into_iter().flatten()
}

fn parts(content: &Value) -> impl Iterator<Item = &Value> {
    content["parts"].as_array().into_iter().flatten()
}

/// Same IDs, each exactly once.
fn same_set(calls: &[&str], answers: &[&str]) -> bool {
    let mut a = calls.to_vec();
    let mut b = answers.to_vec();
    a.sort();
    b.sort();
    let unique = b.windows(2).all(|w| w[0] != w[1]);
    a == b && unique
}
