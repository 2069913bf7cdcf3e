//! Live providers against a fake provider on loopback (`fake_provider/`), through `turngate agent`
//! and through the library's agent loop. Every test asserts the number of HTTP requests, the error
//! class and exit code, and that no file changed on a bad turn.

mod common;
mod fake_provider;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use turngate::live::agent::{Agent, AgentConfig, AgentObserver, LogRecord, RegenerationPolicy};
use turngate::live::client::{ClientOptions, LiveClient};
use turngate::live::request::{ApiKey, Endpoint};
use turngate::live::retry::RetryPolicy;
use turngate::{ApprovalFuture, ApprovalRequest, Approver, Cancel};
use turngate::{Policy, Provider};

use common::{Workspace, bundled, hash_tree, results_in};
use fake_provider::sse::{self, End, write};
use fake_provider::{FakeProvider, Reply};

const KEY: &str = "sk-test-do-not-print-0123456789";
const ORIGINAL: &str = "Original notes\n";

struct Session {
    code: Option<i32>,
    summary: Value,
    log: Vec<Value>,
    stderr: String,
    elapsed: Duration,
}

impl Session {
    fn attempts(&self) -> Vec<&Value> {
        self.log.iter().filter(|r| r["type"] == "attempt").collect()
    }
    fn calls(&self) -> Vec<&Value> {
        self.log.iter().filter(|r| r["type"] == "call").collect()
    }
}

fn key_var(provider: Provider) -> &'static str {
    turngate::live::request::api_key_var(provider)
}

/// A workspace whose root holds notes.txt.
fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("notes.txt", ORIGINAL);
    ws
}

/// `turngate agent` against the fake, with tiny backoff delays, logging to `log`.
fn agent_command(server: &FakeProvider, ws: &Workspace, log: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .env(key_var(server.provider), KEY)
        .args([
            "agent",
            "--provider",
            server.provider.as_str(),
            "--model",
            "m-1",
        ])
        .arg("--root")
        .arg(ws.root_path())
        .arg("--log")
        .arg(log)
        .args(["--base-url", &server.base_url()])
        .args(["--retry-base-ms", "1", "--retry-max-ms", "5"])
        .args(extra)
        .arg("Update the notes.")
        .stdin(std::process::Stdio::null());
    command
}

/// Runs `turngate agent` against the fake, with tiny backoff delays.
fn agent(server: &FakeProvider, ws: &Workspace, extra: &[&str]) -> Session {
    let log = ws
        .dir
        .path()
        .join(format!("log-{}.jsonl", fastrand::u64(..)));
    let started = Instant::now();
    let output = agent_command(server, ws, &log, extra).output().unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the API key leaked: {stdout} {stderr}"
    );
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!log_text.contains(KEY), "the API key leaked into the log");
    let summary = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}; stderr: {stderr}"));
    Session {
        code: output.status.code(),
        summary,
        log: log_text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        stderr,
        elapsed,
    }
}

fn assert_end(s: &Session, kind: &str, code: i32, what: &str) {
    assert_eq!(
        s.summary["end"]["kind"], kind,
        "{what}: {} / {}",
        s.summary, s.stderr
    );
    assert_eq!(s.code, Some(code), "{what}: {}", s.stderr);
}

/// The output-limit field of a request body.
fn max_tokens(provider: Provider, body: &Value) -> u64 {
    let v = match provider {
        Provider::Anthropic => &body["max_tokens"],
        Provider::OpenAiChat => &body["max_completion_tokens"],
        Provider::OpenAiResponses => &body["max_output_tokens"],
        Provider::Gemini => &body["generationConfig"]["maxOutputTokens"],
    };
    v.as_u64().unwrap()
}

fn good_write(provider: Provider) -> String {
    sse::tools(provider, &[write("u1", "notes.txt", "Final notes\n")])
}

/// A turn whose calls look complete (a write of notes.txt) but that ended `end`.
fn bad_write(provider: Provider, end: End) -> String {
    sse::turn(
        provider,
        "Updating.",
        &[write("u1", "notes.txt", "BAD\n")],
        end,
    )
}

/// As `turngate agent ... | true`: the reader of its stdout is gone before the summary. The session runs
/// to its end as it would have (the write applies, exit 0), without a panic or a word about the pipe.
#[test]
fn an_agent_whose_reader_is_gone_ends_quietly_with_its_own_exit_status() {
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(good_write(provider)),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let log = ws.dir.path().join("log.jsonl");
    common::pipe::ends_quietly(&mut agent_command(&server, &ws, &log, &[]), 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ws.read("notes.txt"), "Final notes\n");
}

// ---------------------------------------------------------------------------------------------------
// Error classes

#[test]
fn a_401_is_an_auth_error_never_retried_for_every_provider() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::error(provider, 401, "authentication_error", "invalid x-api-key")
                    .header("x-should-retry", "true"),
                Reply::Sse(good_write(provider)),
            ],
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "auth", 10, provider.as_str());
        assert_eq!(server.count(), 1, "{provider}: never retried");
        assert_eq!(hash_tree(&ws.root_path()), before, "{provider}");
        let attempts = s.attempts();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0]["error_kind"], "auth");
        assert_eq!(attempts[0]["http_status"], 401);
        assert_eq!(attempts[0]["action"], "give_up");
        assert!(
            s.summary["end"]["message"]
                .as_str()
                .unwrap()
                .contains("invalid x-api-key")
        );
    }
}

#[test]
fn the_request_carries_the_key_tools_and_stream_flag_in_each_providers_shape() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(provider, vec![Reply::Sse(sse::done(provider))]);
        let ws = workspace();
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "finished", 0, provider.as_str());
        let request = &server.requests()[0];
        let (path, tools) = match provider {
            Provider::Anthropic => {
                assert_eq!(request.headers["x-api-key"], KEY);
                assert_eq!(request.headers["anthropic-version"], "2023-06-01");
                ("/v1/messages", &request.body["tools"])
            }
            Provider::OpenAiChat => {
                assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
                ("/v1/chat/completions", &request.body["tools"])
            }
            Provider::OpenAiResponses => {
                assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
                ("/v1/responses", &request.body["tools"])
            }
            Provider::Gemini => {
                assert_eq!(request.headers["x-goog-api-key"], KEY);
                (
                    "/v1beta/models/m-1:streamGenerateContent?alt=sse",
                    &request.body["tools"][0]["functionDeclarations"],
                )
            }
        };
        assert_eq!(request.path, path);
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.get("name")
                    .or_else(|| t.pointer("/function/name"))
                    .and_then(Value::as_str)
                    .unwrap()
            })
            .collect();
        assert!(names.contains(&"write_file"), "{provider}: {names:?}");
        let write_schema = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| {
                t.get("name") == Some(&json!("write_file"))
                    || t.pointer("/function/name") == Some(&json!("write_file"))
            })
            .unwrap();
        let schema = write_schema
            .get("input_schema")
            .or_else(|| write_schema.get("parameters"))
            .or_else(|| write_schema.pointer("/function/parameters"))
            .or_else(|| write_schema.get("parametersJsonSchema"))
            .unwrap();
        assert_eq!(
            schema,
            &bundled()
                .get("write_file")
                .unwrap()
                .descriptor()
                .input_schema,
            "{provider}: the schema is the tool's own"
        );
    }
}

#[test]
fn invalid_requests_are_never_retried() {
    for status in [400, 404, 413] {
        let provider = Provider::OpenAiChat;
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::error(provider, status, "invalid_request_error", "bad"),
                Reply::Sse(good_write(provider)),
            ],
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "invalid_request", 11, &status.to_string());
        assert_eq!(server.count(), 1);
        assert_eq!(hash_tree(&ws.root_path()), before);
    }
}

#[test]
fn a_429_waits_for_the_servers_delay_then_succeeds_for_every_provider() {
    for provider in Provider::ALL {
        // Anthropic: retry-after in seconds; OpenAI: retry-after-ms; Gemini: RetryInfo.retryDelay.
        let (limited, min_wait) = match provider {
            Provider::Anthropic => (
                Reply::error(provider, 429, "rate_limit_error", "slow down").header("retry-after", "1"),
                Duration::from_secs(1),
            ),
            Provider::OpenAiChat | Provider::OpenAiResponses => (
                Reply::error(provider, 429, "rate_limit_exceeded", "slow down")
                    .header("retry-after-ms", "300"),
                Duration::from_millis(300),
            ),
            Provider::Gemini => (
                Reply::Status {
                    status: 429,
                    headers: Vec::new(),
                    body: json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED", "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}]}})
                    .to_string(),
                },
                Duration::from_millis(300),
            ),
        };
        let server = FakeProvider::scripted(
            provider,
            vec![
                limited,
                Reply::Sse(good_write(provider)),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert!(s.elapsed >= min_wait, "{provider}: waited {:?}", s.elapsed);
        assert_eq!(ws.read("notes.txt"), "Final notes\n");
        let attempts = s.attempts();
        assert_eq!(attempts[0]["error_kind"], "rate_limit");
        assert_eq!(attempts[0]["action"], "retry");
        assert_eq!(
            attempts[0]["wait_ms"],
            min_wait.as_millis() as u64,
            "{provider}"
        );
        assert_eq!(s.calls().iter().filter(|c| c["verdict"] == "ok").count(), 1);
    }
}

#[test]
fn a_429_asking_longer_than_the_bound_ends_the_session_at_once() {
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::error(provider, 429, "rate_limit_error", "slow down")
                .header("retry-after", "30"),
            Reply::Sse(good_write(provider)),
        ],
    );
    let ws = workspace();
    let before = hash_tree(&ws.root_path());
    let s = agent(&server, &ws, &["--max-retry-wait-ms", "1000"]);
    assert_end(&s, "rate_limit", 12, "long retry-after");
    assert_eq!(server.count(), 1);
    assert!(s.elapsed < Duration::from_secs(20));
    assert_eq!(hash_tree(&ws.root_path()), before);
}

#[test]
fn a_529_is_overloaded_and_retried_within_its_own_bound() {
    for provider in Provider::ALL {
        let overloaded = || Reply::error(provider, 529, "overloaded_error", "Overloaded");
        let server = FakeProvider::scripted(
            provider,
            vec![
                overloaded(),
                overloaded(),
                overloaded(),
                Reply::Sse(good_write(provider)),
            ],
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &["--max-retries", "2"]);
        assert_end(&s, "overloaded", 13, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}: one request and two retries");
        assert_eq!(hash_tree(&ws.root_path()), before);
        let actions: Vec<&Value> = s.attempts().iter().map(|a| &a["action"]).collect();
        assert_eq!(
            actions,
            [&json!("retry"), &json!("retry"), &json!("give_up")]
        );
    }
}

#[test]
fn x_should_retry_false_stops_a_retry() {
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::error(provider, 529, "overloaded_error", "Overloaded")
                .header("x-should-retry", "false"),
            Reply::Sse(good_write(provider)),
        ],
    );
    let ws = workspace();
    let s = agent(&server, &ws, &[]);
    assert_end(&s, "overloaded", 13, "x-should-retry: false");
    assert_eq!(server.count(), 1);
    assert_eq!(ws.read("notes.txt"), ORIGINAL);
}

#[test]
fn a_503_is_overloaded_and_a_500_is_a_server_error() {
    let provider = Provider::Gemini;
    for (status, kind, code) in [(503, "overloaded", 13), (500, "server", 14)] {
        let server = FakeProvider::scripted(
            provider,
            vec![Reply::error(provider, status, "UNAVAILABLE", "busy")],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &["--max-retries", "0"]);
        assert_end(&s, kind, code, &status.to_string());
        assert_eq!(server.count(), 1);
    }
}

#[test]
fn an_overloaded_error_event_on_a_200_stream_runs_nothing_and_is_retried() {
    for provider in Provider::ALL {
        // Always overloaded: gives up as `overloaded` after the retries; the streamed write never ran.
        let server = FakeProvider::scripted(
            provider,
            (0..3)
                .map(|_| Reply::Sse(bad_write(provider, End::Overloaded)))
                .collect(),
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &["--max-retries", "2"]);
        assert_end(&s, "overloaded", 13, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert_eq!(
            hash_tree(&ws.root_path()),
            before,
            "{provider}: a bad turn wrote"
        );
        assert!(
            s.calls().iter().all(|c| c["verdict"] == "not_run"),
            "{provider}"
        );
        assert!(s.attempts().iter().all(|a| a["http_status"].is_null()));

        // Overloaded once, then fine: written exactly once, by the good turn.
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(bad_write(provider, End::Overloaded)),
                Reply::Sse(good_write(provider)),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3);
        assert_eq!(ws.read("notes.txt"), "Final notes\n");
        let ok: Vec<_> = s
            .calls()
            .into_iter()
            .filter(|c| c["verdict"] == "ok")
            .collect();
        assert_eq!(ok.len(), 1, "{provider}: written once");
    }
}

#[test]
fn a_connection_dropped_mid_stream_is_a_transport_error_and_runs_nothing() {
    for provider in Provider::ALL {
        // Cut just before the end: the call's input is all there, its ending is not.
        let body = good_write(provider);
        let cut = || Reply::SseCut {
            cut_at: body.len() - 12,
            body: body.clone(),
        };
        let server = FakeProvider::scripted(provider, vec![cut(), cut(), cut()]);
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &["--max-retries", "2"]);
        assert_end(&s, "transport", 15, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert_eq!(
            hash_tree(&ws.root_path()),
            before,
            "{provider}: a cut turn wrote"
        );

        let server = FakeProvider::scripted(
            provider,
            vec![
                cut(),
                Reply::Sse(body.clone()),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3);
        assert_eq!(ws.read("notes.txt"), "Final notes\n");
    }
}

#[test]
fn a_stream_that_ends_cleanly_before_its_terminator_is_a_transport_error() {
    for provider in Provider::ALL {
        // The HTTP body is well-framed but stops before the provider's ending: no stop reason at all.
        let body = good_write(provider);
        let short = match provider {
            Provider::Gemini => body[..body.rfind("data:").unwrap()].to_owned(),
            _ => body[..body.len() - 40].to_owned(),
        };
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(short.clone()),
                Reply::Sse(short.clone()),
                Reply::Sse(short),
            ],
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &["--max-retries", "2"]);
        assert_end(&s, "transport", 15, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert_eq!(hash_tree(&ws.root_path()), before, "{provider}");
    }
}

#[test]
fn an_abnormal_ending_such_as_pause_turn_is_neither_retried_nor_regenerated() {
    let provider = Provider::Anthropic;
    let paused = good_write(provider).replace(
        r#""stop_reason":"tool_use""#,
        r#""stop_reason":"pause_turn""#,
    );
    assert!(paused.contains("pause_turn"));
    let server = FakeProvider::scripted(
        provider,
        vec![Reply::Sse(paused), Reply::Sse(good_write(provider))],
    );
    let ws = workspace();
    let s = agent(&server, &ws, &[]);
    assert_end(&s, "not_completed", 3, "pause_turn");
    assert_eq!(server.count(), 1);
    assert_eq!(ws.read("notes.txt"), ORIGINAL);
}

#[test]
fn a_stalled_stream_times_out_as_a_transport_error() {
    let provider = Provider::Anthropic;
    let body = good_write(provider);
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::SseStall {
                stall_at: body.len() - 12,
                body: body.clone(),
            },
            Reply::Sse(body),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let s = agent(&server, &ws, &["--read-timeout-ms", "300"]);
    assert_end(&s, "finished", 0, "stall then success");
    assert_eq!(server.count(), 3);
    assert_eq!(s.attempts()[0]["error_kind"], "transport");
    assert_eq!(ws.read("notes.txt"), "Final notes\n");
    assert!(s.elapsed < Duration::from_secs(30));
}

#[test]
fn a_refused_connection_is_a_transport_error() {
    // A port bound but not listening, held for the whole test: a connection to it is refused, and
    // no other test's server can take it meanwhile (neither side may reuse the address).
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.set_reuseaddr(false).unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = closed.local_addr().unwrap().port();
    let ws = workspace();
    let output = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .env("OPENAI_API_KEY", KEY)
        .args([
            "agent",
            "--provider",
            "openai-chat",
            "--model",
            "m",
            "--max-retries",
            "1",
            "--retry-base-ms",
            "1",
        ])
        .arg("--root")
        .arg(ws.root_path())
        .args(["--base-url", &format!("http://127.0.0.1:{port}"), "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(15));
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["end"]["kind"], "transport");
    assert_eq!(summary["requests"], 2);
    drop(closed);
}

// ---------------------------------------------------------------------------------------------------
// Regeneration

#[test]
fn a_truncated_turn_is_discarded_and_requested_again_with_a_doubled_limit() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(bad_write(provider, End::Truncated)),
                Reply::Sse(good_write(provider)),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &["--max-output-tokens", "1000"]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3);
        let limits: Vec<u64> = server
            .requests()
            .iter()
            .map(|r| max_tokens(provider, &r.body))
            .collect();
        assert_eq!(
            limits,
            [1000, 2000, 1000],
            "{provider}: doubled for the regeneration only"
        );
        assert_eq!(ws.read("notes.txt"), "Final notes\n");
        let attempts = s.attempts();
        assert_eq!(attempts[0]["outcome"], "truncated");
        assert_eq!(attempts[0]["action"], "regenerate");
        assert_eq!(attempts[1]["action"], "accept");
        let ok: Vec<_> = s
            .calls()
            .into_iter()
            .filter(|c| c["verdict"] == "ok")
            .collect();
        assert_eq!(ok.len(), 1, "{provider}: the truncated write did not run");
    }
}

/// A server (a proxy ignoring `stream: true`) answers the streaming request with one whole JSON body
/// (`content-type: application/json`): the agent gates it as the streamed turn, runs the write once and
/// goes on; a whole body cut at the output limit is regenerated like a streamed one.
#[test]
fn agent_takes_a_whole_json_body_answered_to_a_streaming_request() {
    use fake_provider::whole;
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::json(whole::turn(
                    provider,
                    "Updating.",
                    &[write("u1", "notes.txt", "BAD\n")],
                    End::Truncated,
                    1000,
                )),
                Reply::json(whole::turn(
                    provider,
                    "Writing.",
                    &[write("u1", "notes.txt", "Final notes\n")],
                    End::Complete,
                    20,
                )),
                Reply::json(whole::turn(provider, "All done.", &[], End::Complete, 5)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &["--max-output-tokens", "1000"]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert_eq!(ws.read("notes.txt"), "Final notes\n", "{provider}");
        let attempts = s.attempts();
        assert_eq!(attempts[0]["outcome"], "truncated", "{provider}");
        assert_eq!(attempts[0]["action"], "regenerate", "{provider}");
        assert_eq!(attempts[1]["action"], "accept", "{provider}");
        let ok = s
            .calls()
            .into_iter()
            .filter(|c| c["verdict"] == "ok")
            .count();
        assert_eq!(ok, 1, "{provider}: the write ran once");
        assert!(
            s.stderr.contains("Writing."),
            "{provider}: text echoed: {}",
            s.stderr
        );
    }
}

/// A server (vLLM, Dynamo) reports a turn cut at the output limit as finished (`tool_calls`, `tool_use`,
/// `completed`, `STOP`): the agent knows the limit it asked for, sees the usage reached it, runs nothing
/// and regenerates the turn as a truncated one, with a doubled limit.
#[test]
fn a_finished_looking_turn_whose_usage_reached_the_limit_is_regenerated() {
    use fake_provider::whole;
    let cut_write = || write("u1", "notes.txt", "Fil");
    for provider in Provider::ALL {
        let mut first = vec![Reply::json(whole::turn(
            provider,
            "Updating.",
            &[cut_write()],
            End::Complete,
            1000,
        ))];
        if provider == Provider::OpenAiChat {
            // Streamed, with the usage chunk `stream_options.include_usage` asks for.
            let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1000, "total_tokens": 1010}});
            let body = sse::tools(provider, &[cut_write()])
                .replace("data: [DONE]", &format!("data: {usage}\n\ndata: [DONE]"));
            first.push(Reply::Sse(body));
        }
        for cut in first {
            let server = FakeProvider::scripted(
                provider,
                vec![
                    cut,
                    Reply::Sse(good_write(provider)),
                    Reply::Sse(sse::done(provider)),
                ],
            );
            let ws = workspace();
            let s = agent(&server, &ws, &["--max-output-tokens", "1000"]);
            assert_end(&s, "finished", 0, provider.as_str());
            assert_eq!(server.count(), 3, "{provider}");
            let limits: Vec<u64> = server
                .requests()
                .iter()
                .map(|r| max_tokens(provider, &r.body))
                .collect();
            assert_eq!(limits, [1000, 2000, 1000], "{provider}");
            if provider == Provider::OpenAiChat {
                let asked = &server.requests()[0].body["stream_options"]["include_usage"];
                assert_eq!(asked, &json!(true), "Chat asks for the usage chunk");
            }
            assert_eq!(ws.read("notes.txt"), "Final notes\n", "{provider}");
            let attempts = s.attempts();
            assert_eq!(attempts[0]["outcome"], "truncated", "{provider}");
            assert_eq!(attempts[0]["action"], "regenerate", "{provider}");
            let ok = s
                .calls()
                .into_iter()
                .filter(|c| c["verdict"] == "ok")
                .count();
            assert_eq!(ok, 1, "{provider}: the cut write did not run");
        }
    }
}

#[test]
fn three_truncated_turns_give_up_after_two_regenerations_and_write_nothing() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            (0..4)
                .map(|_| Reply::Sse(bad_write(provider, End::Truncated)))
                .collect(),
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(
            &server,
            &ws,
            &[
                "--max-output-tokens",
                "1000",
                "--max-output-tokens-cap",
                "3000",
            ],
        );
        assert_end(&s, "not_completed", 3, provider.as_str());
        assert_eq!(
            server.count(),
            3,
            "{provider}: one request and two regenerations"
        );
        let limits: Vec<u64> = server
            .requests()
            .iter()
            .map(|r| max_tokens(provider, &r.body))
            .collect();
        assert_eq!(
            limits,
            [1000, 2000, 3000],
            "{provider}: doubled up to the cap"
        );
        assert_eq!(
            hash_tree(&ws.root_path()),
            before,
            "{provider}: nothing written"
        );
        assert_eq!(s.calls().len(), 3);
        assert!(
            s.calls()
                .iter()
                .all(|c| c["verdict"] == "not_run" && c["duration_ms"].is_null())
        );
        let actions: Vec<&Value> = s.attempts().iter().map(|a| &a["action"]).collect();
        assert_eq!(
            actions,
            [
                &json!("regenerate"),
                &json!("regenerate"),
                &json!("give_up")
            ]
        );
    }
}

#[test]
fn a_refusal_is_not_regenerated_unless_asked() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(bad_write(provider, End::Refused)),
                Reply::Sse(good_write(provider)),
            ],
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "not_completed", 3, provider.as_str());
        assert_eq!(server.count(), 1, "{provider}: not regenerated");
        assert_eq!(hash_tree(&ws.root_path()), before, "{provider}");
        let attempts = s.attempts();
        assert_eq!(attempts.len(), 1);
        let expected = if provider == Provider::Gemini {
            "filtered"
        } else {
            "refused"
        };
        assert_eq!(attempts[0]["outcome"], expected);
        assert_eq!(attempts[0]["action"], "give_up");
    }
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(bad_write(provider, End::Refused)),
            Reply::Sse(good_write(provider)),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let s = agent(&server, &ws, &["--retry-refusals"]);
    assert_end(&s, "finished", 0, "--retry-refusals");
    assert_eq!(server.count(), 3);
    assert_eq!(ws.read("notes.txt"), "Final notes\n");
}

#[test]
fn a_malformed_turn_is_regenerated_twice_then_is_a_stream_parse_error() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            (0..4)
                .map(|_| Reply::Sse(bad_write(provider, End::Malformed)))
                .collect(),
        );
        let ws = workspace();
        let before = hash_tree(&ws.root_path());
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "stream_parse", 16, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}");
        assert_eq!(hash_tree(&ws.root_path()), before, "{provider}");
    }
}

// ---------------------------------------------------------------------------------------------------
// Conversation

/// (call ID, content) of every result a request carries, in the provider's shape.
fn request_results(provider: Provider, body: &Value) -> Vec<(String, String)> {
    let key = match provider {
        Provider::Anthropic | Provider::OpenAiChat => "messages",
        Provider::OpenAiResponses => "input",
        Provider::Gemini => "contents",
    };
    results_in(provider, body[key].as_array().unwrap())
        .into_iter()
        .map(|(id, content)| (id.expect("every result names its call"), content))
        .collect()
}

#[test]
fn a_multi_turn_conversation_answers_every_call_id_in_the_providers_shape() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(sse::tools(
                    provider,
                    &[
                        write("c1", "a.txt", "A\n"),
                        write("c2", "../escape.txt", "X\n"),
                    ],
                )),
                Reply::Sse(sse::tools(
                    provider,
                    &[sse::call("c3", "read_file", json!({"path": "a.txt"}))],
                )),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let s = agent(&server, &ws, &[]);
        assert_end(&s, "finished", 0, provider.as_str());
        assert_eq!(server.count(), 3, "{provider}: no request was refused");
        assert_eq!(ws.read("a.txt"), "A\n");
        assert!(
            !ws.outside_path()
                .parent()
                .unwrap()
                .join("escape.txt")
                .exists()
        );
        let requests = server.requests();
        let second = request_results(provider, &requests[1].body);
        let ids: Vec<&str> = second.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"], "{provider}");
        assert!(
            second[1].1.contains("path"),
            "{provider}: the refusal is the result: {}",
            second[1].1
        );
        let third = request_results(provider, &requests[2].body);
        let ids: Vec<&str> = third.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2", "c3"], "{provider}");
        assert!(
            third[2].1.contains('A'),
            "{provider}: read_file's output went back"
        );
        // The shape the protocol wants, checked by the fake as the real API would.
        for r in &requests {
            assert_eq!(fake_provider::missing_results(provider, &r.body), None);
        }
        let turns = s.summary["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0]["calls"][1]["status"], "error");
    }
}

#[test]
fn the_fake_refuses_a_conversation_with_a_result_missing_as_the_apis_do() {
    // The protection the multi-turn test relies on: drop one result and the fake answers 400.
    let anthropic = json!({"stream": true, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}, {"type": "tool_use", "id": "b", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]}]});
    assert!(fake_provider::missing_results(Provider::Anthropic, &anthropic).is_some());
    let chat = json!({"messages": [
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"}]});
    assert!(fake_provider::missing_results(Provider::OpenAiChat, &chat).is_some());
    let responses = json!({"input": [{"type": "function_call", "call_id": "a"}, {"type": "function_call", "call_id": "b"},
        {"type": "function_call_output", "call_id": "a", "output": "ok"}, {"type": "function_call_output", "call_id": "a", "output": "ok"}]});
    assert!(fake_provider::missing_results(Provider::OpenAiResponses, &responses).is_some());
    let gemini = json!({"contents": [
        {"role": "model", "parts": [{"functionCall": {"name": "t", "id": "a"}}, {"functionCall": {"name": "t", "id": "b"}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "t", "id": "a", "response": {}}}]}]});
    assert!(fake_provider::missing_results(Provider::Gemini, &gemini).is_some());
    // And through HTTP: a 400 ends the session as an invalid request, not retried.
    let provider = Provider::OpenAiChat;
    let server = FakeProvider::scripted(provider, vec![]);
    let mut request = chat.clone();
    request["stream"] = json!(true);
    let status = runtime().block_on(async {
        common::http_client()
            .post(format!("{}/v1/chat/completions", server.base_url()))
            .header("authorization", "Bearer k")
            .body(request.to_string())
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 400);
    assert_eq!(server.count(), 1);
}

#[test]
fn max_turns_stops_the_loop() {
    let provider = Provider::OpenAiResponses;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(sse::tools(provider, &[write("t1", "one.txt", "1")])),
            Reply::Sse(sse::tools(provider, &[write("t2", "two.txt", "2")])),
            Reply::Sse(sse::tools(provider, &[write("t3", "three.txt", "3")])),
        ],
    );
    let ws = workspace();
    let s = agent(&server, &ws, &["--max-turns", "2"]);
    assert_end(&s, "max_turns", 4, "max turns");
    assert_eq!(server.count(), 2);
    assert!(ws.exists("two.txt") && !ws.exists("three.txt"));
}

#[test]
fn a_missing_key_is_a_usage_error_and_sends_nothing() {
    let server = FakeProvider::scripted(Provider::Gemini, vec![]);
    let ws = workspace();
    let output = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env_remove("GEMINI_API_KEY")
        .args(["agent", "--provider", "gemini", "--model", "m", "--root"])
        .arg(ws.root_path())
        .args(["--base-url", &server.base_url(), "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("GEMINI_API_KEY"));
    assert_eq!(server.count(), 0);
}

// ---------------------------------------------------------------------------------------------------
// Approval and cancellation

const ASK_POLICY: &str = "[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n[tools.read_file]\npaths = [\"**\"]\n";

#[test]
fn the_cli_denies_a_call_that_needs_approval_when_there_is_no_terminal() {
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(good_write(provider)),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let policy = ws.dir.path().join("policy.toml");
    std::fs::write(&policy, ASK_POLICY).unwrap();
    let s = agent(&server, &ws, &["--policy", policy.to_str().unwrap()]);
    assert_end(&s, "finished", 0, "denied");
    assert_eq!(ws.read("notes.txt"), ORIGINAL);
    assert_eq!(s.calls()[0]["step"], "approval");
    let results = request_results(provider, &server.requests()[1].body);
    assert_eq!(results[0].0, "u1");
    assert!(results[0].1.contains("approval"), "{}", results[0].1);
}

/// Ctrl-C while `turngate agent` asks on the terminal: the question is answered no at once, the call
/// applies nothing and is journaled nowhere though the user types yes afterwards, and the session ends
/// cancelled (130) without another request.
#[test]
fn ctrl_c_while_the_agent_asks_cancels_the_call_and_a_later_yes_applies_nothing() {
    let provider = Provider::Anthropic;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(good_write(provider)),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let policy = ws.dir.path().join("policy.toml");
    std::fs::write(&policy, ASK_POLICY).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .env(key_var(provider), KEY)
        .args(["agent", "--provider", provider.as_str(), "--model", "m-1"])
        .arg("--root")
        .arg(ws.root_path())
        .arg("--policy")
        .arg(&policy)
        .args(["--base-url", &server.base_url()])
        .arg("Update the notes.");
    let (code, stdout) = common::terminal::ctrl_c_then_yes(command, "Apply them? [y/N]");
    assert_eq!(code, Some(130), "{stdout}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["end"]["kind"], "cancelled", "{summary}");
    assert_eq!(ws.read("notes.txt"), ORIGINAL);
    let journal = turngate::Journal::open_existing(&ws.root, turngate::Retention::default());
    assert!(
        journal
            .unwrap()
            .is_none_or(|mut j| j.entries().unwrap().is_empty())
    );
    assert_eq!(server.count(), 1, "no request after the cancel");
}

struct Recorder(Vec<LogRecord>);

impl AgentObserver for Recorder {
    fn record(&mut self, record: &LogRecord) {
        self.0.push(record.clone());
    }
}

/// Approves, and sets `cancel` when asked about `cancel_on`.
struct Approve {
    cancel: Cancel,
    cancel_on: &'static str,
    asked: std::sync::Mutex<Vec<String>>,
}

impl Approver for Approve {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap()
                .push(request.id.unwrap_or_default().to_owned());
            if request.id == Some(self.cancel_on) {
                self.cancel.cancel();
            }
            true
        })
    }
}

fn library_agent(provider: Provider, server: &FakeProvider) -> (LiveClient, AgentConfig) {
    let endpoint = Endpoint::new(provider, server.base_url(), "m", ApiKey::new(KEY));
    let client = LiveClient::new(endpoint, ClientOptions::default()).unwrap();
    let config = AgentConfig {
        retry: RetryPolicy {
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            ..RetryPolicy::default()
        },
        regeneration: RegenerationPolicy::default(),
        ..AgentConfig::default()
    };
    (client, config)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_library_asks_its_approver_and_a_cancel_while_asked_stops_that_call_and_the_rest() {
    for provider in Provider::ALL {
        let server = FakeProvider::scripted(
            provider,
            vec![
                Reply::Sse(sse::tools(
                    provider,
                    &[
                        write("k1", "first.txt", "1"),
                        write("k2", "second.txt", "2"),
                        write("k3", "third.txt", "3"),
                    ],
                )),
                Reply::Sse(sse::done(provider)),
            ],
        );
        let ws = workspace();
        let (client, config) = library_agent(provider, &server);
        let policy = Policy::from_toml(ASK_POLICY).unwrap();
        let cancel = Cancel::new();
        let approver = Approve {
            cancel: cancel.clone(),
            cancel_on: "k1",
            asked: Default::default(),
        };
        let agent = Agent {
            client: &client,
            toolbox: bundled(),
            root: &ws.root,
            policy: &policy,
            config,
            approver: Some(&approver),
            cancel,
        };
        let mut recorder = Recorder(Vec::new());
        let outcome = runtime().block_on(agent.run("go", &mut recorder));
        assert_eq!(outcome.end.kind(), "cancelled", "{provider}");
        assert_eq!(outcome.end.exit_code(), 130);
        assert_eq!(
            server.count(),
            1,
            "{provider}: nothing sent after the cancel"
        );
        assert_eq!(*approver.asked.lock().unwrap(), ["k1"], "{provider}");
        // The cancel came while k1 was asked: it wins over the approver's yes.
        assert!(
            !ws.exists("first.txt") && !ws.exists("second.txt") && !ws.exists("third.txt"),
            "{provider}"
        );
        let calls = &outcome.turns[0].calls;
        for call in calls {
            assert_eq!(call.step, Some("cancelled"), "{provider}: {call:?}");
        }
        // Every call ID still has exactly one result in the conversation.
        let body = json!({"stream": true, "messages": outcome.conversation.messages(), "input": outcome.conversation.messages(), "contents": outcome.conversation.messages()});
        assert_eq!(
            fake_provider::missing_results(provider, &body),
            None,
            "{provider}"
        );
    }
}

#[test]
fn a_call_needing_approval_is_denied_without_an_approver() {
    let provider = Provider::Gemini;
    let server = FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(good_write(provider)),
            Reply::Sse(sse::done(provider)),
        ],
    );
    let ws = workspace();
    let (client, config) = library_agent(provider, &server);
    let policy = Policy::from_toml(ASK_POLICY).unwrap();
    let agent = Agent {
        client: &client,
        toolbox: bundled(),
        root: &ws.root,
        policy: &policy,
        config,
        approver: None,
        cancel: Cancel::new(),
    };
    let outcome = runtime().block_on(agent.run("go", &mut Recorder(Vec::new())));
    assert_eq!(outcome.end.kind(), "finished");
    assert_eq!(outcome.turns[0].calls[0].step, Some("approval"));
    assert_eq!(ws.read("notes.txt"), ORIGINAL);
    assert_eq!(server.count(), 2);
}

// ---------------------------------------------------------------------------------------------------
// Load

#[test]
fn concurrent_sessions_answer_every_call_once_and_bad_turns_write_nothing() {
    // A CI-sized run of the load scenario (`cargo bench --bench load` runs 200 sessions).
    let sessions = 40;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(fake_provider::load::run(sessions, bundled()));
    assert!(report.failures.is_empty(), "{:#?}", report.failures);
    // Three turns each, plus one extra request per fault (two faults per faulty session).
    assert_eq!(
        report.requests,
        sessions * 3 + report.faulty * 2,
        "{report:?}"
    );
    // VmHWM is read from /proc: off Linux `peak_rss_kib` is 0, and this bound says nothing there.
    assert!(
        report.peak_rss_kib < 1024 * 1024,
        "peak RSS {} KiB",
        report.peak_rss_kib
    );
}

#[test]
fn ctrl_c_stops_the_cli_cleanly_with_nothing_run() {
    let provider = Provider::OpenAiChat;
    let body = good_write(provider);
    let server = FakeProvider::scripted(
        provider,
        vec![Reply::SseStall {
            stall_at: body.len() - 12,
            body,
        }],
    );
    let ws = workspace();
    let before = hash_tree(&ws.root_path());
    let child = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .env(key_var(provider), KEY)
        .args([
            "agent",
            "--provider",
            provider.as_str(),
            "--model",
            "m",
            "--root",
        ])
        .arg(ws.root_path())
        .args(["--base-url", &server.base_url(), "hi"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["end"]["kind"], "cancelled");
    assert_eq!(server.count(), 1);
    assert_eq!(hash_tree(&ws.root_path()), before);
}
