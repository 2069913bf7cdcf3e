//! The load scenario shared by `tests/live.rs` and `host/benches/load.rs`: many concurrent agent
//! sessions against one fake server per provider, each session three turns (two writes; a write and a
//! read; done), one session in ten with an injected fault (529, 429 with `retry-after-ms`, an
//! `overloaded_error` event mid-stream, a connection cut mid-stream, a truncated turn; the bad turns
//! carry a write of `bad.txt`). Checked per session: it finished, its files hold what the good turns
//! wrote, `bad.txt` does not exist, and every call ID has exactly one result in the conversation.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use turngate::Cancel;
use turngate::live::agent::{Agent, AgentConfig, Quiet};
use turngate::live::client::{ClientOptions, LiveClient};
use turngate::live::request::{ApiKey, Endpoint};
use turngate::live::retry::RetryPolicy;
use turngate::{Policy, Provider, Root, Toolbox};

use super::sse::{self, End, write};
use super::{FakeProvider, Recorded, Reply, missing_results};

/// What a load run measured.
#[derive(Debug)]
pub struct LoadReport {
    pub sessions: usize,
    pub faulty: usize,
    pub requests: usize,
    pub elapsed: Duration,
    /// Peak resident set size of the process (VmHWM), in KiB.
    pub peak_rss_kib: u64,
    /// Sessions that failed a check, with why.
    pub failures: Vec<String>,
}

impl LoadReport {
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// VmHWM from /proc/self/status, in KiB (0 when unavailable).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn session_of(path: &str) -> usize {
    path.trim_start_matches("/s/")
        .split('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Assistant turns already in the request's conversation: which stage the session is at.
fn stage(provider: Provider, body: &Value) -> usize {
    let empty = Vec::new();
    match provider {
        Provider::Anthropic | Provider::OpenAiChat => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count(),
        Provider::OpenAiResponses => body["input"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|m| m["type"] == "message" && m["role"] == "assistant")
            .count(),
        Provider::Gemini => body["contents"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|m| m["role"] == "model")
            .count(),
    }
}

fn fault(provider: Provider, kind: usize) -> Reply {
    let bad = |end| sse::turn(provider, "Bad.", &[write("bad", "bad.txt", "BAD")], end);
    match kind % 5 {
        0 => Reply::error(provider, 529, "overloaded_error", "Overloaded"),
        1 => Reply::error(provider, 429, "rate_limit_error", "slow down")
            .header("retry-after-ms", "5"),
        2 => Reply::Sse(bad(End::Overloaded)),
        3 => {
            let body = sse::tools(provider, &[write("bad", "bad.txt", "BAD")]);
            Reply::SseCut {
                cut_at: body.len() - 12,
                body,
            }
        }
        _ => Reply::Sse(bad(End::Truncated)),
    }
}

fn server(provider: Provider) -> FakeProvider {
    let faulted: Mutex<HashSet<(usize, usize)>> = Mutex::new(HashSet::new());
    FakeProvider::with_handler(provider, move |request: &Recorded, _| {
        let session = session_of(&request.path);
        let stage = stage(provider, &request.body);
        if session.is_multiple_of(10)
            && stage < 2
            && faulted.lock().unwrap().insert((session, stage))
        {
            return fault(provider, session / 10 + stage);
        }
        let id = |n: u32| format!("s{session}-{n}");
        match stage {
            0 => Reply::Sse(sse::tools(
                provider,
                &[
                    write(&id(1), "a.txt", &format!("a{session}")),
                    write(&id(2), "b.txt", "b"),
                ],
            )),
            1 => Reply::Sse(sse::tools(
                provider,
                &[
                    write(&id(3), "c.txt", "c"),
                    sse::call(&id(4), "read_file", json!({"path": "a.txt"})),
                ],
            )),
            _ => Reply::Sse(sse::done(provider)),
        }
    })
}

/// Runs `sessions` concurrent sessions (round-robin over the four providers) on the current runtime.
pub async fn run(sessions: usize, toolbox: &'static Toolbox) -> LoadReport {
    let servers: Vec<FakeProvider> = Provider::ALL.iter().map(|p| server(*p)).collect();
    let scratch = Arc::new(tempfile::tempdir().unwrap());
    let config = AgentConfig {
        retry: RetryPolicy {
            base_delay: Duration::from_millis(2),
            max_delay: Duration::from_millis(20),
            ..RetryPolicy::default()
        },
        audit: true,
        ..AgentConfig::default()
    };
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..sessions {
        let server = servers[i % servers.len()].clone();
        let scratch = scratch.clone();
        tasks.push(tokio::spawn(async move {
            let provider = server.provider;
            let dir = scratch.path().join(format!("s{i}"));
            std::fs::create_dir(&dir).unwrap();
            let root = Root::open(&dir).unwrap();
            let endpoint = Endpoint::new(
                provider,
                format!("{}/s/{i}", server.base_url()),
                "m",
                ApiKey::new("k"),
            );
            let client = LiveClient::new(endpoint, ClientOptions::default()).unwrap();
            let policy = Policy::allow_all();
            let agent = Agent {
                client: &client,
                toolbox,
                root: &root,
                policy: &policy,
                config,
                approver: None,
                cancel: Cancel::new(),
            };
            let outcome = agent.run("Write the files.", &mut Quiet).await;
            let mut problems = Vec::new();
            if outcome.end.kind() != "finished" {
                problems.push(format!(
                    "ended {}: {}",
                    outcome.end.kind(),
                    outcome.end.message()
                ));
            }
            for (file, content) in [
                ("a.txt", format!("a{i}")),
                ("b.txt", "b".into()),
                ("c.txt", "c".into()),
            ] {
                if std::fs::read_to_string(dir.join(file)).ok().as_deref() != Some(content.as_str())
                {
                    problems.push(format!("{file} does not hold what the good turn wrote"));
                }
            }
            if dir.join("bad.txt").exists() {
                problems.push("a bad turn wrote bad.txt".into());
            }
            let messages = outcome.conversation.messages();
            let body = json!({"messages": messages, "input": messages, "contents": messages});
            if let Some(missing) = missing_results(provider, &body) {
                problems.push(format!("results: {missing}"));
            }
            let answered: usize = outcome.turns.iter().map(|t| t.calls.len()).sum();
            if answered != 4 {
                problems.push(format!("{answered} calls answered, expected 4"));
            }
            let ok = outcome
                .turns
                .iter()
                .flat_map(|t| &t.calls)
                .all(|c| c.status == turngate::CallStatus::Ok);
            if !ok {
                problems.push("a call failed".into());
            }
            (!problems.is_empty())
                .then(|| format!("session {i} ({provider}): {}", problems.join("; ")))
        }));
    }
    let mut failures = Vec::new();
    for task in tasks {
        if let Some(problem) = task.await.unwrap() {
            failures.push(problem);
        }
    }
    let elapsed = started.elapsed();
    LoadReport {
        sessions,
        faulty: sessions.div_ceil(10),
        requests: servers.iter().map(FakeProvider::count).sum(),
        elapsed,
        peak_rss_kib: peak_rss_kib(),
        failures,
    }
}
