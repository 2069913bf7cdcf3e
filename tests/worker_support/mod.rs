//! Shared context of the worker tests and the workers bench: NATS servers started from the system
//! binary (free port, temporary storage, killable and restartable), turns built to order, worker
//! processes (the real binary), and the results stream read back.

#![allow(dead_code)] // each test binary uses its own subset of these helpers

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Where the system's NATS server is, if it is installed. Without it: fails when
/// `TURNGATE_REQUIRE_NATS=1` (CI), and otherwise says loudly that the test is skipped.
pub fn nats_server_binary(test: &str) -> Option<PathBuf> {
    let found = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("nats-server"))
                    .find(|p| p.exists())
            })
        });
    if found.is_none() {
        if std::env::var("TURNGATE_REQUIRE_NATS").as_deref() == Ok("1") {
            panic!("nats-server not found: install the Debian package nats-server");
        }
        eprintln!();
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        eprintln!("!! SKIPPED {test}: nats-server not found (Debian package nats-server);");
        eprintln!("!! set TURNGATE_REQUIRE_NATS=1 to make this a failure.");
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    }
    found
}

/// A NATS server with JetStream on a loopback port of its own choosing, storing in a temporary
/// directory.
pub struct Nats {
    binary: PathBuf,
    pub port: u16,
    pub storage: tempfile::TempDir,
    /// Where the server names the port it listens on (`--ports_file_dir`).
    ports: tempfile::TempDir,
    child: Option<Child>,
}

impl Nats {
    /// Starts a server that binds a free port itself: a port picked by the test and let go could be
    /// taken by another test's server or listener before this one binds it, and the test would then
    /// talk to the wrong server.
    pub fn start(binary: PathBuf) -> Nats {
        let mut nats = Nats {
            binary,
            port: 0,
            storage: tempfile::tempdir().unwrap(),
            ports: tempfile::tempdir().unwrap(),
            child: None,
        };
        nats.spawn("-1");
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server on `port` (`-1`: one it chooses) and waits until it listens, taking the port
    /// from what this very server wrote to its ports file.
    fn spawn(&mut self, port: &str) {
        let mut child = Command::new(&self.binary)
            .args(["-js", "-a", "127.0.0.1", "-p", port, "-sd"])
            .arg(self.storage.path())
            .arg("--ports_file_dir")
            .arg(self.ports.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.port = wait_for_ports_file(&mut child, self.ports.path());
        self.child = Some(child);
    }

    /// Stops the server (SIGTERM, as an operator's restart does) and starts it again on the same
    /// port and storage.
    pub fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, "TERM");
            let _ = child.wait();
        }
        self.spawn(&self.port.to_string());
    }
}

/// The client port the server `child`, started with `--ports_file_dir DIR`, wrote to its ports file
/// (`DIR/<executable>_<pid>.ports`: `{"nats": ["nats://127.0.0.1:PORT"]}`) once it listens. Fails at
/// once, naming the exit, when the server exits first (its port was taken).
fn wait_for_ports_file(child: &mut Child, dir: &Path) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let suffix = format!("_{}.ports", child.id());
    loop {
        // A read half-way through the write does not parse, and is tried again.
        let written = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .find(|entry| entry.file_name().to_string_lossy().ends_with(&suffix))
            .and_then(|entry| std::fs::read(entry.path()).ok())
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        if let Some(ports) = written {
            let url = ports["nats"][0].as_str().expect("a client URL");
            return url.rsplit(':').next().unwrap().parse().expect("a port");
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("nats-server exited before it listened: {status}");
        }
        assert!(Instant::now() < deadline, "nats-server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends a signal to a child process (by its ID).
pub fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status();
}

/// A worker process: the real binary.
pub struct WorkerProcess {
    pub child: Child,
}

/// How to start a worker.
#[derive(Clone)]
pub struct WorkerSpec {
    pub url: String,
    pub roots: PathBuf,
    pub policy: Option<PathBuf>,
    /// A tools directory, loaded `--locked`.
    pub tools: Option<PathBuf>,
    pub ack_wait_ms: u64,
    pub max_deliver: i64,
    pub concurrency: usize,
    pub log: Option<PathBuf>,
    pub prefix: String,
}

impl WorkerSpec {
    pub fn new(url: String, roots: &Path) -> WorkerSpec {
        WorkerSpec {
            url,
            roots: roots.to_path_buf(),
            policy: None,
            tools: None,
            ack_wait_ms: 1500,
            max_deliver: 20,
            concurrency: 2,
            log: None,
            prefix: "turngate".into(),
        }
    }

    pub fn spawn(&self, env: &[(&str, &str)]) -> WorkerProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
        command
            .args(["worker", "--nats", &self.url, "--roots"])
            .arg(&self.roots)
            .args(["--ack-wait-ms", &self.ack_wait_ms.to_string()])
            .args(["--max-deliver", &self.max_deliver.to_string()])
            .args(["--concurrency", &self.concurrency.to_string()])
            .args(["--prefix", &self.prefix])
            .arg("--cache-dir")
            .arg(test_cache_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(policy) = &self.policy {
            command.arg("--policy").arg(policy);
        }
        if let Some(tools) = &self.tools {
            command.arg("--tools").arg(tools).arg("--locked");
        }
        match &self.log {
            Some(log) => {
                // The test's own log file, not a path beneath a root.
                #[allow(clippy::disallowed_methods)]
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .unwrap();
                command.stderr(file);
            }
            None => {
                command.stderr(Stdio::null());
            }
        }
        for (key, value) in env {
            command.env(key, value);
        }
        WorkerProcess {
            child: command.spawn().expect("the worker starts"),
        }
    }
}

impl WorkerProcess {
    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, and wait for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until it has exited on its own (a test hook stopped it).
    pub fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The precompiled cache shared by the tests.
pub fn test_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache")
}

/// An Anthropic stream of one assistant turn with these tool calls (ID, tool, input); `truncated`
/// ends it at `max_tokens` half-way through the last call's input.
pub fn anthropic_turn(calls: &[(String, &str, Value)], truncated: bool) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_w", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    for (index, (id, tool, input)) in calls.iter().enumerate() {
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": tool, "input": {}}}),
        );
        let text = input.to_string();
        let last = index + 1 == calls.len();
        let cut = text.len() / 2;
        let (first, second) = text.split_at(cut);
        for part in [first, second] {
            if truncated && last && part == second {
                break;
            }
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part}}),
            );
        }
        if !(truncated && last) {
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
        }
    }
    let stop = if truncated { "max_tokens" } else { "tool_use" };
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 50}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// One message of the results stream.
#[derive(Debug, Clone)]
pub struct ResultMsg {
    pub subject: String,
    pub kind: String,
    pub key: Option<String>,
    pub replayed: bool,
    pub exit: Option<u8>,
    pub payload: Value,
}

/// A current-thread runtime for the async parts.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every message of the results stream under `prefix`, in stream order (empty if there is none).
pub async fn all_results(url: &str, prefix: &str) -> Vec<ResultMsg> {
    let client = async_nats::connect(url).await.unwrap();
    let js = jetstream::new(client);
    let Ok(stream) = js.get_stream(format!("{prefix}_results")).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .unwrap();
    let total = stream.get_info().await.unwrap().state.messages;
    if total == 0 {
        return out;
    }
    let mut messages = consumer.messages().await.unwrap();
    while let Some(message) = messages.next().await {
        let message = message.unwrap();
        let header = |name: &str| {
            message
                .headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_owned())
        };
        out.push(ResultMsg {
            subject: message.subject.to_string(),
            kind: header("Turngate-Kind").unwrap_or_default(),
            key: header("Turngate-Call"),
            replayed: header("Turngate-Replayed").as_deref() == Some("true"),
            exit: header("Turngate-Exit").and_then(|e| e.parse().ok()),
            payload: serde_json::from_slice(&message.payload).unwrap_or(Value::Null),
        });
        if message.info().unwrap().pending == 0 {
            break;
        }
    }
    out
}

/// The reports in `results`, by job ID (the last one wins: the tests check there is one).
pub fn reports(results: &[ResultMsg], prefix: &str) -> BTreeMap<String, Vec<ResultMsg>> {
    let mut by_job: BTreeMap<String, Vec<ResultMsg>> = BTreeMap::new();
    for result in results.iter().filter(|r| r.kind == "report") {
        let job = result
            .subject
            .strip_prefix(&format!("{prefix}.results."))
            .unwrap_or(&result.subject)
            .to_owned();
        by_job.entry(job).or_default().push(result.clone());
    }
    by_job
}

/// Polls `done` until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// Every journal entry of a root, as `turngate journal` would list them plus those not applied
/// (read through the library).
pub fn journal(root: &Path) -> Vec<turngate::effects::journal::JournalEntry> {
    let root = turngate::Root::open(root).unwrap();
    match turngate::Journal::open_existing(&root, turngate::Retention::default()).unwrap() {
        Some(mut journal) => journal.entries().unwrap(),
        None => Vec::new(),
    }
}

/// Publishes a job through the library, as `turngate submit` does.
pub async fn submit_job(
    url: &str,
    settings: &turngate::worker::setup::Settings,
    job: &turngate::worker::job::Job,
) {
    let client = async_nats::connect(url).await.unwrap();
    let js = jetstream::new(client);
    turngate::worker::submit::submit(&js, settings, job)
        .await
        .unwrap();
}

/// Applies `count` writes (`pruner-N.txt`) to the root at `root` under a journal that keeps `keep`
/// calls, so that its older calls are pruned as `Retention` prunes them after many calls.
pub fn prune_journal(root: &Path, keep: usize, count: usize) {
    runtime().block_on(async {
        let toolbox = turngate::Toolbox::builder()
            .cache(turngate::CacheSetting::Dir(test_cache_dir()))
            .build()
            .await
            .unwrap();
        let root = turngate::Root::open(root).unwrap();
        let policy = turngate::Policy::allow_all();
        let effects = turngate::Effects::new(turngate::Retention {
            max_calls: keep,
            ..turngate::Retention::default()
        });
        for n in 0..count {
            let mut context = turngate::CallContext::new(&root, &policy, &effects);
            let input = json!({"path": format!("pruner-{n}.txt"), "content": "x"}).to_string();
            let outcome = toolbox.call_in(&mut context, "write_file", &input).await;
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        }
    });
}
