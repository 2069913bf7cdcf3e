//! `turngate mcp`: the MCP server over stdio (raw JSON-RPC, so every byte the client sends is ours to
//! choose) and over Streamable HTTP. The same gates as `turngate run`, bad input answered without
//! stopping the server, approval through the client, cancellation, order, `--locked`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use common::mcp_http::{HttpServer, mcp_command};
use serde_json::{Value, json};

/// Long enough for any answer on a loaded 2-core machine; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(60);

/// A policy under which every tool may write anywhere, and `write_file` asks first.
const ASKS_BEFORE_WRITES: &str =
    "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n";

/// A `turngate mcp` process spoken to over its stdin and stdout.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Every line the server wrote to stdout.
    seen: Vec<String>,
}

impl Server {
    fn start(root: &Path, extra: &[&str]) -> Server {
        let mut command = mcp_command(root);
        command.args(extra);
        Server::spawn(command)
    }

    fn spawn(mut command: Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start turngate mcp");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            seen: Vec::new(),
        }
    }

    /// Starts a server and completes the `initialize` handshake (protocol 2025-11-25) with
    /// `capabilities`.
    fn initialized(root: &Path, extra: &[&str], capabilities: Value) -> Server {
        let mut server = Server::start(root, extra);
        server.initialize(capabilities);
        server
    }

    /// The `initialize` handshake (protocol 2025-11-25) with `capabilities`.
    fn initialize(&mut self, capabilities: Value) {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "turngate-tests", "version": "0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "turngate", "{init}");
        self.send_raw(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        );
    }

    /// Sends `notifications/cancelled` for request `id`.
    fn cancel(&mut self, id: u64) {
        let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": id, "reason": "the user pressed stop"}});
        self.send_raw(&cancelled.to_string());
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its ID.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&message.to_string());
        id
    }

    /// The next message from the server.
    fn next(&mut self, within: Duration) -> Result<Value, RecvTimeoutError> {
        let line = self.lines.recv_timeout(within)?;
        self.seen.push(line.clone());
        Ok(serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC messages: {e}: {line:?}")))
    }

    /// Waits for the response to request `id`, answering nothing else (messages in between are
    /// returned to `other`).
    fn response(&mut self, id: u64, mut other: impl FnMut(&mut Server, Value)) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .next(left)
                .unwrap_or_else(|e| panic!("no response to request {id}: {e:?}"));
            if message.get("method").is_none() && message["id"] == json!(id) {
                return message;
            }
            other(self, message);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.response(id, |_, message| {
            assert!(
                message["method"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("notifications/")),
                "unexpected message: {message}"
            );
        })
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        response["result"].clone()
    }

    /// Closes stdin and waits for the process to end.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn write_policy(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A tools directory holding the hostile test guest (`hostile_rw`: spins, sleeps, writes undeclared
/// paths) and its WASI 0.3 twin (`hostile_rw_p3`).
fn hostile_tools() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (guest, name) in [
        (env!("TURNGATE_TEST_GUEST_HOSTILE_RW"), "hostile_rw.wasm"),
        (
            env!("TURNGATE_TEST_GUEST_HOSTILE_RW_P3"),
            "hostile_rw_p3.wasm",
        ),
    ] {
        std::fs::copy(guest, dir.path().join(name)).unwrap();
    }
    dir
}

/// Sends a `tool` call (`hostile_rw` or its twin) that writes `a.txt` and `b.txt` in its view, then
/// spins until stopped, and waits until both files are staged under `root` (the guest is running,
/// past its writes); returns the request's ID.
fn start_spinning_call(server: &mut Server, root: &Path, tool: &str) -> u64 {
    let id = server.send(
        "tools/call",
        json!({"name": tool, "arguments": {"attack": "write_all_then_spin", "arg": "a.txt,b.txt"}}),
    );
    common::wait_for_staged(root, 2);
    id
}

/// Whether the root's staging directory holds nothing: staged files sit flat in it, one per file a
/// call wrote (`view/staging.rs`), so any entry is one a call left behind.
fn no_staging_left(root: &Path) -> bool {
    let staging = root.join(".turngate/staging");
    !staging.exists() || std::fs::read_dir(&staging).unwrap().next().is_none()
}

#[test]
fn tools_are_listed_with_their_schema_and_hints_from_the_declared_access() {
    let root = workspace();
    let mut server = Server::initialized(root.path(), &[], json!({}));
    let listed = server.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed: {listed}"))
    };
    for name in ["read_file", "list_dir", "search_files"] {
        assert_eq!(tool(name)["annotations"]["readOnlyHint"], true, "{name}");
        assert_eq!(
            tool(name)["annotations"]["destructiveHint"],
            false,
            "{name}"
        );
    }
    for name in ["write_file", "edit_file", "delete_file", "make_dir"] {
        assert_eq!(tool(name)["annotations"]["readOnlyHint"], false, "{name}");
        assert_eq!(tool(name)["annotations"]["destructiveHint"], true, "{name}");
    }
    // Only a tool that imports wasi:http may reach the network.
    for t in tools {
        let network = t["name"] == "fetch";
        assert_eq!(t["annotations"]["openWorldHint"], network, "{t}");
    }
    assert_eq!(tool("fetch")["annotations"]["readOnlyHint"], false);
    let schema = &tool("write_file")["inputSchema"];
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["path"].is_object(), "{schema}");
    // Nothing that loads components or changes the policy.
    assert_eq!(tools.len(), 8, "{listed}");
    assert!(server.finish().success());
}

#[test]
fn a_call_goes_through_the_gate_view_and_journal_and_is_audited() {
    let root = workspace();
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_arg = log.path().to_str().unwrap().to_owned();
    let mut server = Server::initialized(root.path(), &["--log", &log_arg], json!({}));
    let result = server.call(
        "write_file",
        json!({"path": "notes.txt", "content": "from mcp\n"}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["status"], "ok", "{result}");
    assert_eq!(
        result["structuredContent"]["paths"][0],
        json!({"path": "notes.txt", "change": "create"}),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "from mcp\n"
    );
    let read = server.call("read_file", json!({"path": "notes.txt"}));
    assert_eq!(read["structuredContent"]["output"], "from mcp\n", "{read}");
    assert!(server.finish().success());

    // One audit record per call, with the change's digests.
    let records: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["type"], "call");
    assert_eq!(records[0]["tool"], "write_file");
    assert_eq!(records[0]["verdict"], "ok");
    assert_eq!(records[0]["paths"][0]["location"], "notes.txt");
    assert!(records[0]["changes"][0]["sha256_after"].is_string());

    // The journal holds the write, under this server's turn, and `undo` removes it.
    let journal = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["journal", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    let entry: Value = serde_json::from_slice(&journal.stdout).unwrap();
    assert_eq!(entry["tool"], "write_file");
    assert!(
        entry["turn"].as_str().unwrap().starts_with("mcp-"),
        "{entry}"
    );
    let undo = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["undo", "--last", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(undo.status.success());
    assert!(!root.path().join("notes.txt").exists());
}

/// `turngate mcp` on `root` with `cache` as its compiled-component cache (not the tests' shared one).
fn mcp_with_cache(root: &Path, cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .args(["mcp", "--root"])
        .arg(root)
        .arg("--cache-dir")
        .arg(cache);
    command
}

/// The scheduling policy of each thread of process `pid` whose name starts `turngate-prepar` (a
/// thread's name is cut to 15 bytes), from `/proc`: Linux only.
#[cfg(target_os = "linux")]
fn background_policies(pid: u32) -> Vec<i64> {
    let mut values = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !name.starts_with("turngate-prepar") {
            continue;
        }
        let stat = std::fs::read_to_string(task.join("stat")).unwrap();
        // The fields after the parenthesized name: state is field 3, policy field 41.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        values.push(fields[38].parse().unwrap());
    }
    values
}

#[test]
fn with_an_empty_cache_every_tool_is_compiled_once_in_the_background_and_no_call_waits_for_the_others()
 {
    let root = workspace();
    std::fs::write(root.path().join("a.txt"), "first\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let record = tempfile::NamedTempFile::new().unwrap();
    let hooks = tempfile::tempdir().unwrap();
    let release = hooks.path().join("release");
    let mut command = mcp_with_cache(root.path(), cache.path());
    command
        .env("TURNGATE_TEST_PREPARE_RECORD", record.path())
        .env("TURNGATE_TEST_HOLD_PREPARE_ALL", &release)
        // The compile path, as a tool from elsewhere takes it (the bundled tools' built-in code is
        // `with_an_empty_cache_the_bundled_tools_code_comes_from_the_binary_and_nothing_compiles`).
        .env("TURNGATE_TEST_IGNORE_PRECOMPILED", "1");
    let mut server = Server::spawn(command);
    server.initialize(json!({}));
    // What the process compiled, and what it loaded (its code compiled or mapped from the cache).
    let recorded = |what: &str| -> Vec<String> {
        std::fs::read_to_string(record.path())
            .unwrap()
            .lines()
            .filter_map(|line| line.strip_prefix(what))
            .map(str::to_owned)
            .collect()
    };
    let compiled = || recorded("compiled ");
    let loaded = || recorded("prepared ");

    // Listing waits for no compile: the background preparation is held, and every tool is listed.
    let listed = server.request("tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for name in ["write_file", "read_file", "search_files", "fetch"] {
        assert!(names.contains(&name), "{name} not listed: {names:?}");
    }
    assert_eq!(
        std::fs::read_to_string(record.path()).unwrap(),
        "",
        "a tool was compiled or loaded to list it"
    );
    // The threads that prepare in the background run only when nothing else wants the CPU (Linux's
    // SCHED_IDLE, policy 5), so that the compile does not slow the calls that come meanwhile. Each
    // thread puts itself there as it starts: the preparing thread before it reaches the hold, each of
    // its pool's threads when the pool starts it, so they are looked at until all have (a thread
    // left at another policy fails the test at the deadline).
    let reached = hooks.path().join("release.reached");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(reached.exists(), "the background preparation never started");
    // The policies are read from /proc: Linux only. (macOS puts these threads in the background
    // quality of service class instead, which this test does not read.)
    #[cfg(target_os = "linux")]
    {
        let background = loop {
            let policies = background_policies(server.child.id());
            let settled = !policies.is_empty() && policies.iter().all(|&policy| policy == 5);
            if settled || Instant::now() >= deadline {
                break policies;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(!background.is_empty(), "no background thread found");
        assert!(
            background.iter().all(|&policy| policy == 5),
            "{background:?}"
        );
    }

    // A call while the background preparation has not started compiles its own tool, and no other.
    let read = server.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(read["structuredContent"]["output"], "first\n", "{read}");
    assert_eq!(compiled().len(), 1, "{:?}", compiled());
    assert_eq!(loaded(), compiled());

    // Released, the background preparation compiles every other tool, each once, and not the one the
    // call prepared; it loads none of them: the server keeps only the code of the tool it was called
    // for (what it compiled in the background stays in the cache until a call asks for it).
    std::fs::write(&release, "").unwrap();
    let bundled = names.len();
    let deadline = Instant::now() + Duration::from_secs(120);
    while compiled().len() < bundled && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        compiled().len(),
        bundled,
        "not every tool was compiled in the background: {:?}",
        compiled()
    );
    let mut unique = compiled();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        bundled,
        "a tool was compiled twice: {:?}",
        compiled()
    );
    let entries = std::fs::read_dir(cache.path())
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_str().unwrap().ends_with(".cwasm")
        })
        .count();
    assert_eq!(entries, bundled, "every compiled tool is in the cache");
    assert_eq!(
        loaded().len(),
        1,
        "the background loaded code: {:?}",
        loaded()
    );
    let read = server.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(read["structuredContent"]["output"], "first\n", "{read}");
    let write = server.call("write_file", json!({"path": "b.txt", "content": "b"}));
    assert_eq!(write["isError"], false, "{write}");
    assert_eq!(compiled().len(), bundled, "{:?}", compiled());
    assert_eq!(loaded().len(), 2, "{:?}", loaded());
    assert!(server.finish().success());
}

#[test]
fn with_an_empty_cache_the_bundled_tools_code_comes_from_the_binary_and_nothing_compiles() {
    let root = workspace();
    std::fs::write(root.path().join("a.txt"), "first\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let record = tempfile::NamedTempFile::new().unwrap();
    let recorded = |what: &str| -> Vec<String> {
        std::fs::read_to_string(record.path())
            .unwrap()
            .lines()
            .filter_map(|line| line.strip_prefix(what))
            .map(str::to_owned)
            .collect()
    };
    let mut command = mcp_with_cache(root.path(), cache.path());
    command.env("TURNGATE_TEST_PREPARE_RECORD", record.path());
    let mut server = Server::spawn(command);
    server.initialize(json!({}));
    let bundled = server.request("tools/list", json!({}))["result"]["tools"]
        .as_array()
        .unwrap()
        .len();

    // The first call, whether or not the background has reached its tool, takes its code from the
    // binary: no compile, no compiling process.
    let read = server.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(read["structuredContent"]["output"], "first\n", "{read}");
    assert!(
        children_with(server.child.id(), "__compile-component").is_empty(),
        "a compiling process was started"
    );
    // The background stores every tool's built-in code in the cache, compiling none.
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorded("embedded ").len() < bundled && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut embedded = recorded("embedded ");
    embedded.sort();
    embedded.dedup();
    assert_eq!(embedded.len(), bundled, "{:?}", recorded(""));
    assert_eq!(recorded("compiled "), Vec::<String>::new());
    let write = server.call("write_file", json!({"path": "b.txt", "content": "b"}));
    assert_eq!(write["isError"], false, "{write}");
    assert!(server.finish().success());
    assert_eq!(recorded("compiled "), Vec::<String>::new());

    // The next server maps that code from the cache, as a warm start does.
    std::fs::write(record.path(), "").unwrap();
    let mut command = mcp_with_cache(root.path(), cache.path());
    command.env("TURNGATE_TEST_PREPARE_RECORD", record.path());
    let mut server = Server::spawn(command);
    server.initialize(json!({}));
    let read = server.call("read_file", json!({"path": "b.txt"}));
    assert_eq!(read["structuredContent"]["output"], "b", "{read}");
    assert!(server.finish().success());
    assert_eq!(recorded("compiled "), Vec::<String>::new());
    assert_eq!(recorded("embedded "), Vec::<String>::new());
    assert_eq!(recorded("prepared ").len(), 1, "{:?}", recorded(""));
}

/// The bundled tools' built-in code is read from the binary once, to store it in the cache: those
/// pages of the binary are then dropped from the server (10 MiB for the eight tools), which holds what
/// a server that found them cached holds.
#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs /proc/PID/status (VmRSS): Linux only"
)]
fn a_server_that_stored_the_built_in_code_holds_no_more_memory_than_one_that_found_it_cached() {
    let root = workspace();
    let cache = tempfile::tempdir().unwrap();
    let record = tempfile::NamedTempFile::new().unwrap();
    let start = || {
        let mut command = mcp_with_cache(root.path(), cache.path());
        command.env("TURNGATE_TEST_PREPARE_RECORD", record.path());
        let mut server = Server::spawn(command);
        server.initialize(json!({}));
        server
    };
    let mut empty = start();
    let bundled = empty.request("tools/list", json!({}))["result"]["tools"]
        .as_array()
        .unwrap()
        .len();
    let stored = || {
        std::fs::read_to_string(record.path())
            .unwrap()
            .lines()
            .filter(|line| line.starts_with("embedded "))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored() < bundled && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stored(), bundled, "the background did not store every tool");
    let after_storing = settled_kib(empty.child.id(), "VmRSS");
    let mut warm = start();
    warm.request("tools/list", json!({}));
    std::thread::sleep(Duration::from_millis(500));
    let warm_start = settled_kib(warm.child.id(), "VmRSS");
    assert!(
        after_storing <= warm_start + 4 * 1024,
        "after storing every tool's built-in code the server holds {after_storing} KiB, one that \
         found it cached {warm_start} KiB"
    );
    assert!(empty.finish().success());
    assert!(warm.finish().success());
}

/// The processes whose parent is `pid` and whose command line has `argument`, from `/proc`.
#[cfg(target_os = "linux")]
fn children_with(pid: u32, argument: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let children =
            std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
        for child in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            if cmdline.split(|&b| b == 0).any(|a| a == argument.as_bytes()) {
                found.push(child);
            }
        }
    }
    found
}

/// The processes whose parent is `pid` and whose command line has `argument`, from `ps` (no `/proc`
/// off Linux; `-ww`: command lines not cut to a width).
#[cfg(not(target_os = "linux"))]
fn children_with(pid: u32, argument: &str) -> Vec<u32> {
    let listed = Command::new("ps")
        .args(["-A", "-ww", "-o", "pid=,ppid=,command="])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let child = fields.next()?.parse::<u32>().ok()?;
            let parent = fields.next()?.parse::<u32>().ok()?;
            (parent == pid && fields.any(|a| a == argument)).then_some(child)
        })
        .collect()
}

/// Whether process `pid` has ended (gone, or a zombie waiting for its reaper).
#[cfg(target_os = "linux")]
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat[stat.rfind(')').unwrap() + 2..].starts_with('Z'),
    }
}

/// Whether process `pid` has ended (gone, or a zombie waiting for its reaper), from `ps`.
#[cfg(not(target_os = "linux"))]
fn ended(pid: u32) -> bool {
    let listed = Command::new("ps")
        .args(["-o", "stat=", "-p", &pid.to_string()])
        .output()
        .expect("ps");
    let state = String::from_utf8_lossy(&listed.stdout);
    state.trim().is_empty() || state.trim_start().starts_with('Z')
}

/// Linux ends the compiler with its server by `PR_SET_PDEATHSIG`, macOS by the compiler's own watch of
/// its parent (a kqueue): this holds on both.
#[test]
fn a_server_that_goes_leaves_no_compiler_running_behind_it() {
    let root = workspace();
    let cache = tempfile::tempdir().unwrap();
    let hooks = tempfile::tempdir().unwrap();
    let release = hooks.path().join("release");
    let mut command = mcp_with_cache(root.path(), cache.path());
    command
        .env("TURNGATE_TEST_HOLD_COMPILE", &release)
        .env("TURNGATE_TEST_IGNORE_PRECOMPILED", "1");
    let mut server = Server::spawn(command);
    server.initialize(json!({}));
    // The background's first compile runs in a child process, held before it compiles.
    let reached = hooks.path().join("release.reached");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(reached.exists(), "no compiling child was started");
    let compilers = children_with(server.child.id(), "__compile-component");
    assert_eq!(compilers.len(), 1, "{compilers:?}");
    // The client goes, and the server with it: the compiler it started ends too.
    assert!(server.finish().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ended(compilers[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = !ended(compilers[0]);
    std::fs::write(&release, "").unwrap();
    assert!(!left, "the compiling child outlived its server");
}

/// A memory field of process `pid`, in KiB, from `/proc/PID/status`: `RssAnon` (its heaps and anonymous
/// mappings), `VmRSS` (those and the pages of files it mapped, its own binary's among them) or `VmHWM`
/// (the peak).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| {
            l.strip_prefix(field)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// [`status_kib`] once it stops changing (two readings 200 ms apart within 256 KiB).
fn settled_kib(pid: u32, field: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = status_kib(pid, field);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = status_kib(pid, field);
        if now.abs_diff(last) <= 256 || Instant::now() >= deadline {
            return now;
        }
        last = now;
    }
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs /proc/PID/status (RssAnon, VmHWM), and its bounds are glibc's (malloc_trim): Linux only"
)]
fn a_server_that_compiled_every_tool_holds_no_more_memory_than_one_that_found_them_cached() {
    let root = workspace();
    let cache = tempfile::tempdir().unwrap();
    let start = || {
        let mut command = mcp_with_cache(root.path(), cache.path());
        // Every tool compiled, as tools from elsewhere are (not taken from the binary).
        command.env("TURNGATE_TEST_IGNORE_PRECOMPILED", "1");
        let mut server = Server::spawn(command);
        server.initialize(json!({}));
        server
    };
    let listed = |server: &mut Server| {
        server.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len()
    };
    // From an empty cache: the background compiles every tool (Cranelift's heaps on its threads).
    let mut empty = start();
    let bundled = listed(&mut empty);
    let entries = || {
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .ends_with(".cwasm")
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while entries() < bundled && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        entries(),
        bundled,
        "the background did not compile every tool"
    );
    let after_compile = settled_kib(empty.child.id(), "RssAnon");
    let empty_peak = status_kib(empty.child.id(), "VmHWM");
    // From the cache it filled: nothing compiled, nothing loaded until a call.
    let mut warm = start();
    assert_eq!(listed(&mut warm), bundled);
    std::thread::sleep(Duration::from_millis(500));
    let warm_start = settled_kib(warm.child.id(), "RssAnon");
    let warm_peak = status_kib(warm.child.id(), "VmHWM");
    // What the compile used is given back: Cranelift's contexts go with the engine that compiled, the
    // freed heap goes back to the system, and no tool's code is kept.
    assert!(
        after_compile <= warm_start + 10 * 1024,
        "after compiling every tool the server holds {after_compile} KiB of anonymous memory, one \
         that found them cached {warm_start} KiB"
    );
    // And the compile's own peak is not the server's: it compiles in a child of its own.
    assert!(
        empty_peak <= warm_peak + 16 * 1024,
        "compiling every tool took the server's resident memory to {empty_peak} KiB, a warm start's \
         to {warm_peak} KiB"
    );
    assert!(empty.finish().success());
    assert!(warm.finish().success());
}

#[test]
fn refusals_are_tool_errors_that_name_the_gate_step_and_change_nothing() {
    let root = workspace();
    std::fs::create_dir(root.path().join("private")).unwrap();
    std::fs::write(root.path().join("private/secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink("private/secret.txt", root.path().join("peek")).unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(
        policy_dir.path(),
        "default = \"deny\"\n[tools.write_file]\npaths = [\"drafts/**\"]\n[tools.read_file]\npaths = [\"peek\", \"public/**\"]\n",
    );
    let policy = policy.to_str().unwrap().to_owned();
    let before = common::hash_tree(root.path());
    let mut server = Server::initialized(root.path(), &["--policy", &policy], json!({}));
    let cases = [
        (
            "write_file",
            json!({"path": "private/x.txt", "content": "x"}),
            "policy",
        ),
        ("write_file", json!({"path": "drafts/x.txt"}), "schema"),
        (
            "write_file",
            json!({"path": "../outside.txt", "content": "x"}),
            "path",
        ),
        // The name is allowed, where it leads is not.
        ("read_file", json!({"path": "peek"}), "policy"),
        ("no_such_tool", json!({}), "tool"),
    ];
    for (tool, arguments, kind) in cases {
        let result = server.call(tool, arguments.clone());
        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        let error = &result["structuredContent"]["error"];
        assert_eq!(error["stage"], "gate", "{tool} {arguments}: {result}");
        assert_eq!(error["kind"], kind, "{tool} {arguments}: {result}");
        assert!(
            !result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("secret\""),
            "{result}"
        );
    }
    assert!(server.finish().success());
    assert_eq!(common::hash_tree(root.path()), before);
}

#[test]
fn on_a_root_that_folds_names_every_spelling_of_a_denied_name_or_the_state_directory_is_refused() {
    // The root is on the test file system that folds case and Unicode forms, as a Mac's would be.
    let dir = tempfile::tempdir_in(turngate_testfs::folding_dir()).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("secrets")).unwrap();
    std::fs::write(root.join(".env"), "TOKEN=do-not-leak\n").unwrap();
    std::fs::write(root.join("secrets/key.txt"), "TOKEN=do-not-leak\n").unwrap();
    let policy = write_policy(
        dir.path(),
        "default = \"workspace-write\"\ndeny = [\".env\", \"**/.env\", \"secrets/**\"]\n",
    );
    let mut server = Server::initialized(&root, &["--policy", policy.to_str().unwrap()], json!({}));
    let written = server.call("write_file", json!({"path": "a.txt", "content": "a"}));
    assert_eq!(written["isError"], false, "{written}");
    let before = common::hash_tree(&root);
    for (tool, arguments) in [
        ("read_file", json!({"path": ".ENV"})),
        ("read_file", json!({"path": "Secrets/KEY.txt"})),
        ("write_file", json!({"path": ".Env", "content": "PWNED"})),
        ("list_dir", json!({"path": ".TurnGate"})),
        ("make_dir", json!({"path": ".TURNGATE/evil"})),
    ] {
        let result = server.call(tool, arguments.clone());
        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        assert!(!result.to_string().contains("do-not-leak"), "{result}");
    }
    let listed = server.call("list_dir", json!({"path": "."}));
    let text = listed["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(
        !text.contains(".env") && !text.contains(".turngate") && !text.contains("secrets"),
        "{text}"
    );
    assert!(server.finish().success());
    let after = common::hash_tree(&root);
    let user_files = |tree: &std::collections::BTreeMap<PathBuf, String>| {
        tree.iter()
            .filter(|(path, _)| !path.starts_with(".turngate/journal.jsonl"))
            .map(|(path, hash)| (path.clone(), hash.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(user_files(&after), user_files(&before));
}

#[test]
fn bad_messages_get_json_rpc_errors_and_the_server_keeps_serving() {
    let root = workspace();
    let mut server = Server::initialized(root.path(), &[], json!({}));
    // Not JSON at all: a parse error, `id: null` (the ID cannot be read).
    server.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": \"tools/list\"");
    let parse_error = server
        .next(PATIENCE)
        .expect("an answer to a line that is not JSON");
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], Value::Null, "{parse_error}");
    assert!(parse_error.get("id").is_some(), "{parse_error}");
    // JSON, but not a JSON-RPC message: invalid request, with its ID.
    server.send_raw(r#"{"jsonrpc": "2.0", "id": 98, "params": {}}"#);
    let invalid = server
        .next(PATIENCE)
        .expect("an answer to an invalid request");
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    assert_eq!(invalid["id"], 98, "{invalid}");
    // An unknown method.
    let unknown = server.request("no/such/method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // Arguments that are not an object.
    let not_object = server.request(
        "tools/call",
        json!({"name": "write_file", "arguments": ["notes.txt", "x"]}),
    );
    assert!(
        not_object["error"]["code"].is_i64() || not_object["result"]["isError"] == true,
        "{not_object}"
    );
    assert!(!root.path().join("notes.txt").exists());
    // A message beyond the documented bound (4 MiB) is skipped, not buffered without end, and answered
    // with an error that carries its ID.
    let huge = "x".repeat(turngate::mcp::MAX_MESSAGE_BYTES + 1024);
    let id = server.send(
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "big.txt", "content": huge}}),
    );
    let oversized = server.response(id, |_, m| panic!("only the error is expected: {m}"));
    assert_eq!(oversized["error"]["code"], -32600, "{oversized}");
    // Still serving: a ping and a real call answer.
    let ping = server.request("ping", json!({}));
    assert!(ping["result"].is_object(), "{ping}");
    let ok = server.call("write_file", json!({"path": "after.txt", "content": "ok"}));
    assert_eq!(ok["isError"], false, "{ok}");
    assert!(!root.path().join("big.txt").exists());
    // Whatever the server said about the malformed and the oversized message, it was JSON-RPC (every
    // line is checked as it is read) and never a result for the oversized call.
    assert!(
        !server.seen.iter().any(|line| {
            serde_json::from_str::<Value>(line)
                .is_ok_and(|m| m["id"] == json!(id) && m.get("result").is_some())
        }),
        "{:?}",
        server.seen
    );
    assert!(server.finish().success());
}

/// A `tools/call` request as a client that puts the ID last writes it (the TypeScript SDK does), with
/// `content` as the written file's content.
fn id_last_write(id: u64, content: &str) -> String {
    format!(
        r#"{{"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"big.txt","content":{}}}}},"jsonrpc":"2.0","id":{id}}}"#,
        serde_json::to_string(content).unwrap()
    )
}

#[test]
fn oversized_and_too_deep_messages_are_answered_with_their_id_and_the_next_request_is_served() {
    let root = workspace();
    let mut server = Server::initialized(root.path(), &[], json!({}));
    // 5 MiB, the ID after the content: read as the bytes go by.
    server.send_raw(&id_last_write(501, &"y".repeat(5 << 20)));
    let oversized = server.next(PATIENCE).expect("an answer to a 5 MiB request");
    assert_eq!(oversized["id"], 501, "{oversized}");
    assert_eq!(oversized["error"]["code"], -32600, "{oversized}");
    assert!(
        oversized["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4194304"),
        "{oversized}"
    );
    let ping = server.request("ping", json!({}));
    assert!(ping["result"].is_object(), "{ping}");

    // 100,000 levels deep, inside the arguments.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":"deep-1","method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"deep.txt","content":{}{}}}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    server.send_raw(&deep);
    let too_deep = server
        .next(PATIENCE)
        .expect("an answer to a 100,000-deep request");
    assert_eq!(too_deep["id"], "deep-1", "{too_deep}");
    assert_eq!(too_deep["error"]["code"], -32600, "{too_deep}");
    // Deep and not even closed: still answered.
    server.send_raw(&format!(r#"{{"id":3,"x":{}"#, "{\"a\":".repeat(50_000)));
    let unclosed = server
        .next(PATIENCE)
        .expect("an answer to an unclosed deep line");
    assert!(unclosed["error"]["code"].is_i64(), "{unclosed}");

    let ok = server.call("write_file", json!({"path": "after.txt", "content": "ok"}));
    assert_eq!(ok["isError"], false, "{ok}");
    assert!(!root.path().join("big.txt").exists());
    assert!(!root.path().join("deep.txt").exists());
    assert!(server.finish().success());
}

#[test]
fn calls_to_the_same_file_apply_in_arrival_order_without_lost_updates() {
    let root = workspace();
    let mut server = Server::initialized(root.path(), &["--max-concurrent", "4"], json!({}));
    let ids: Vec<u64> = (0..12)
        .map(|n| {
            server.send(
                "tools/call",
                json!({"name": "write_file", "arguments": {"path": "same.txt", "content": format!("{n}")}}),
            )
        })
        .collect();
    for id in &ids {
        let response = server.response(*id, |_, _| {});
        assert_eq!(response["result"]["isError"], false, "{response}");
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("same.txt")).unwrap(),
        "11"
    );
    let journal = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["journal", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    let call_ids: Vec<String> = String::from_utf8(journal.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["call_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let expected: Vec<String> = ids.iter().map(u64::to_string).collect();
    assert_eq!(
        call_ids, expected,
        "each write applied once, in the order the calls came"
    );
    assert!(server.finish().success());
}

/// Of a tool built for either WASI generation (the same surface serves both).
#[test]
fn a_cancelled_call_stops_applies_nothing_and_frees_its_slot() {
    for tool in ["hostile_rw", "hostile_rw_p3"] {
        let root = workspace();
        let tools = hostile_tools();
        let tools_arg = tools.path().to_str().unwrap().to_owned();
        // One slot and a wall-time limit far beyond the test's patience: the next call can only run if
        // the cancelled one really stopped.
        let mut server = Server::initialized(
            root.path(),
            &[
                "--tools",
                &tools_arg,
                "--max-concurrent",
                "1",
                "--timeout-ms",
                "600000",
            ],
            json!({}),
        );
        let spinning = start_spinning_call(&mut server, root.path(), tool);
        server.cancel(spinning);
        let next = server.call("write_file", json!({"path": "after.txt", "content": "ok"}));
        assert_eq!(next["isError"], false, "{tool}: {next}");
        assert!(!root.path().join("a.txt").exists(), "{tool}");
        assert!(!root.path().join("b.txt").exists(), "{tool}");
        assert!(no_staging_left(root.path()), "{tool}");
        // The same call without the spin applies: only the cancellation kept it out.
        let done = server.call(
            tool,
            json!({"attack": "write_all", "arg": "a.txt", "path": "a.txt"}),
        );
        assert_eq!(done["isError"], false, "{tool}: {done}");
        assert_eq!(
            std::fs::read_to_string(root.path().join("a.txt")).unwrap(),
            "PWNED"
        );
        assert!(server.finish().success());
    }
}

#[test]
fn a_client_that_disconnects_mid_call_leaves_nothing_half_applied() {
    let root = workspace();
    let tools = hostile_tools();
    let tools_arg = tools.path().to_str().unwrap().to_owned();
    let mut server = Server::initialized(
        root.path(),
        &["--tools", &tools_arg, "--timeout-ms", "600000"],
        json!({}),
    );
    start_spinning_call(&mut server, root.path(), "hostile_rw");
    let status = server.finish();
    assert!(status.success(), "{status:?}");
    assert!(!root.path().join("a.txt").exists());
    assert!(no_staging_left(root.path()));
}

/// Answers the server's `elicitation/create` with `answer`; returns the message it showed.
fn answer_elicitation(server: &mut Server, message: &Value, answer: &Value, shown: &mut String) {
    assert_eq!(message["method"], "elicitation/create", "{message}");
    *shown = message["params"]["message"].as_str().unwrap().to_owned();
    let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": answer});
    server.send_raw(&reply.to_string());
}

#[test]
fn approval_is_asked_through_elicitation_with_the_diff_and_applies_only_on_yes() {
    let root = workspace();
    std::fs::write(root.path().join("notes.txt"), "old line\n").unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(policy_dir.path(), ASKS_BEFORE_WRITES);
    let policy = policy.to_str().unwrap().to_owned();
    let mut server = Server::initialized(
        root.path(),
        &["--policy", &policy],
        json!({"elicitation": {"form": {}}}),
    );
    let ask = |server: &mut Server, content: &str, answer: Value| {
        let id = server.send(
            "tools/call",
            json!({"name": "write_file", "arguments": {"path": "notes.txt", "content": content}}),
        );
        let mut shown = String::new();
        let response = server.response(id, |server, message| {
            answer_elicitation(server, &message, &answer, &mut shown)
        });
        (response["result"].clone(), shown)
    };
    // Declined: nothing applied.
    let (declined, shown) = ask(&mut server, "declined\n", json!({"action": "decline"}));
    assert!(
        shown.contains("-old line") && shown.contains("+declined"),
        "{shown}"
    );
    assert_eq!(declined["isError"], true, "{declined}");
    assert_eq!(declined["structuredContent"]["error"]["stage"], "approval");
    // Accepted, but the form says no: nothing applied.
    let (unticked, _) = ask(
        &mut server,
        "unticked\n",
        json!({"action": "accept", "content": {"apply": false}}),
    );
    assert_eq!(unticked["isError"], true, "{unticked}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "old line\n"
    );
    // Accepted: applied.
    let (accepted, _) = ask(
        &mut server,
        "new line\n",
        json!({"action": "accept", "content": {"apply": true}}),
    );
    assert_eq!(accepted["isError"], false, "{accepted}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "new line\n"
    );
    assert!(server.finish().success());
}

/// The audit log's record of the call with JSON-RPC ID `id`, once the server has written it.
fn audited(log: &Path, id: u64) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|record| record["id"] == json!(id.to_string()));
        if let Some(record) = found {
            return record;
        }
        assert!(Instant::now() < deadline, "no record of call {id}: {text}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the root's journal records any applied call.
fn journaled(root: &Path) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["journal", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success());
    !out.stdout.is_empty()
}

/// Call `id` is audited `cancelled`, `notes.txt` still holds `notes`, nothing is journaled, and the
/// server ends cleanly.
fn assert_cancelled_with_nothing_applied(
    server: Server,
    log: &Path,
    id: u64,
    root: &Path,
    notes: &str,
) {
    let record = audited(log, id);
    assert_eq!(record["step"], "cancelled", "{record}");
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        notes
    );
    assert!(!journaled(root));
    assert!(server.finish().success());
}

/// `notifications/cancelled` while the user is asked through an elicitation: the call is cancelled
/// (audited `cancelled`), and the user's accept that comes after it applies nothing.
#[test]
fn a_cancel_during_an_elicitation_wins_over_the_accept_that_follows() {
    let root = workspace();
    std::fs::write(root.path().join("notes.txt"), "old line\n").unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(policy_dir.path(), ASKS_BEFORE_WRITES);
    let log = policy_dir.path().join("audit.jsonl");
    let mut server = Server::initialized(
        root.path(),
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ],
        json!({"elicitation": {"form": {}}}),
    );
    let id = server.send(
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "notes.txt", "content": "new line\n"}}),
    );
    let question = server.next(PATIENCE).unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    server.cancel(id);
    let yes = json!({"action": "accept", "content": {"apply": true}});
    server.send_raw(&json!({"jsonrpc": "2.0", "id": question["id"], "result": yes}).to_string());
    assert_cancelled_with_nothing_applied(server, &log, id, root.path(), "old line\n");
}

/// A 2026 client's retry carries the user's yes; `notifications/cancelled` for that retry, coming
/// between the yes and the apply (the test hook holds the call there), wins: nothing applies.
#[test]
fn a_cancel_of_an_input_required_retry_after_the_yes_applies_nothing() {
    let root = workspace();
    std::fs::write(root.path().join("notes.txt"), "old\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path(), ASKS_BEFORE_WRITES);
    let log = dir.path().join("audit.jsonl");
    let held = dir.path().join("held");
    let mut command = mcp_command(root.path());
    command
        .args([
            "--policy",
            policy.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ])
        .env("TURNGATE_TEST_HOLD_BEFORE_APPLY", &held);
    let mut server = Server::spawn(command);
    let mut params = json!({
        "_meta": modern_meta(),
        "name": "write_file",
        "arguments": {"path": "notes.txt", "content": "new\n"}
    });
    let asked = server.request("tools/call", params.clone())["result"].clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    params["requestState"] = asked["requestState"].clone();
    params["inputResponses"] =
        json!({"approval": {"action": "accept", "content": {"apply": true}}});
    let retry = server.send("tools/call", params);
    let deadline = Instant::now() + PATIENCE;
    while !held.exists() {
        assert!(
            Instant::now() < deadline,
            "the retry never reached the user's yes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.cancel(retry);
    assert_cancelled_with_nothing_applied(server, &log, retry, root.path(), "old\n");
}

#[test]
fn a_client_that_cannot_be_asked_is_denied_with_the_reason() {
    let root = workspace();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(policy_dir.path(), ASKS_BEFORE_WRITES);
    let policy = policy.to_str().unwrap().to_owned();
    let mut server = Server::initialized(root.path(), &["--policy", &policy], json!({}));
    let result = server.call("write_file", json!({"path": "notes.txt", "content": "x"}));
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["error"]["stage"], "approval");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("cannot be asked"),
        "{result}"
    );
    assert!(!root.path().join("notes.txt").exists());
    assert!(server.finish().success());
}

/// As a desktop client that stopped reading: `turngate mcp` on stdio, its stdout's reader gone before
/// the answer to `initialize`, or after it (the next answer is the one that cannot be written), ends
/// with exit 0 and without a panic or a word about the pipe, although its stdin is still open.
#[test]
fn the_stdio_server_ends_quietly_when_its_reader_is_gone() {
    let root = workspace();
    let command = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
        command
            .arg("mcp")
            .arg("--root")
            .arg(root.path())
            .arg("--cache-dir")
            .arg(common::test_cache_dir());
        command
    };
    let initialize = format!("{}\n", initialize_body());
    common::pipe::ends_quietly_reading(&mut command(), initialize.as_bytes(), 0).unwrap();

    let mut child = command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(initialize.as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("serverInfo"), "{answer}");
    // The reader is gone now; the client still writes.
    for message in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    // A server that kept serving a client it cannot answer would never end: it is stopped after a
    // minute, and the test fails on its signal.
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}

#[test]
fn locked_refuses_a_tools_directory_whose_components_are_not_pinned() {
    let root = workspace();
    let tools = hostile_tools();
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .arg("mcp")
        .arg("--root")
        .arg(root.path())
        .arg("--cache-dir")
        .arg(common::test_cache_dir())
        .arg("--tools")
        .arg(tools.path())
        .arg("--locked")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("turngate.lock"), "{stderr}");
    assert!(out.stdout.is_empty());
}

fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "turngate-tests", "version": "0"}
        }
    })
    .to_string()
}

/// POSTs one JSON-RPC message; returns the status, the session header and the JSON-RPC messages in
/// the body (plain JSON or server-sent events).
fn post(url: &str, body: String, headers: &[(&str, &str)]) -> (u16, Option<String>, Vec<Value>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = common::http_client()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("HTTP request");
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let messages = if text.trim_start().starts_with('{') {
            vec![serde_json::from_str(&text).unwrap()]
        } else {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter(|data| !data.trim().is_empty())
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .collect()
        };
        (status, session, messages)
    })
}

#[test]
fn http_serves_calls_through_the_same_gate() {
    let root = workspace();
    let server = HttpServer::start(root.path(), &[]);
    let (status, session, messages) = post(&server.url, initialize_body(), &[]);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(messages[0]["result"]["serverInfo"]["name"], "turngate");
    let session = session.expect("a session for a 2025-11-25 client");
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, _) = post(&server.url, initialized, &headers);
    assert!((200..300).contains(&status), "{status}");
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "web.txt", "content": "over http"}}
    });
    let (status, _, messages) = post(&server.url, call.to_string(), &headers);
    assert_eq!(status, 200);
    let result = &messages.last().expect("a response")["result"];
    assert_eq!(result["structuredContent"]["status"], "ok", "{messages:?}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("web.txt")).unwrap(),
        "over http"
    );
    let refused = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "../escape.txt", "content": "x"}}
    });
    let (_, _, messages) = post(&server.url, refused.to_string(), &headers);
    let result = &messages.last().expect("a response")["result"];
    assert_eq!(result["isError"], true, "{messages:?}");
    assert_eq!(result["structuredContent"]["error"]["kind"], "path");
}

#[test]
fn http_refuses_foreign_hosts_and_origins_other_paths_and_missing_tokens() {
    let root = workspace();
    let server = HttpServer::start(root.path(), &["--allow-origin", "http://localhost:3000"]);
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1.
    let (status, _, _) = post(&server.url, initialize_body(), &[("host", "evil.example")]);
    assert!((400..500).contains(&status), "foreign Host: {status}");
    let (status, _, _) = post(
        &server.url,
        initialize_body(),
        &[("origin", "http://evil.example")],
    );
    assert!((400..500).contains(&status), "foreign Origin: {status}");
    let (status, _, _) = post(
        &server.url,
        initialize_body(),
        &[("origin", "http://localhost:3000")],
    );
    assert_eq!(status, 200, "allowed Origin");
    // The server's own origin passes; the same host on another port does not.
    let own = server.url.trim_end_matches("/mcp").to_owned();
    let (status, _, _) = post(&server.url, initialize_body(), &[("origin", own.as_str())]);
    assert_eq!(status, 200, "own Origin {own}");
    let (status, _, _) = post(
        &server.url,
        initialize_body(),
        &[("origin", "http://127.0.0.1:1")],
    );
    assert!((400..500).contains(&status), "another local port: {status}");
    // A body beyond the documented bound is refused before it is read whole.
    let huge = "x".repeat(turngate::mcp::MAX_MESSAGE_BYTES + 1024);
    let (status, _, _) = post(&server.url, huge, &[]);
    assert_eq!(status, 413, "oversized body");
    let other = server.url.replace("/mcp", "/other");
    let (status, _, _) = post(&other, initialize_body(), &[]);
    assert_eq!(status, 404);

    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token_arg = token_file.to_str().unwrap().to_owned();
    let guarded = HttpServer::start(root.path(), &["--token-file", &token_arg]);
    let (status, _, _) = post(&guarded.url, initialize_body(), &[]);
    assert_eq!(status, 401, "no token");
    let (status, _, _) = post(
        &guarded.url,
        initialize_body(),
        &[("authorization", "Bearer wrong")],
    );
    assert_eq!(status, 401, "wrong token");
    let (status, _, messages) = post(
        &guarded.url,
        initialize_body(),
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(status, 200, "{messages:?}");
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let root = workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .arg("mcp")
        .arg("--root")
        .arg(root.path())
        .args(["--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--token-file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The per-request `_meta` of a 2026-07-28 client (no `initialize`), declaring form elicitation.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "turngate-tests", "version": "0"}
    })
}

#[test]
fn a_2026_client_approves_through_an_input_required_round_trip_and_only_what_it_saw_applies() {
    let root = workspace();
    std::fs::write(root.path().join("notes.txt"), "old\n").unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(policy_dir.path(), ASKS_BEFORE_WRITES);
    let policy = policy.to_str().unwrap().to_owned();
    let mut server = Server::start(root.path(), &["--policy", &policy]);
    let notes = || std::fs::read_to_string(root.path().join("notes.txt")).unwrap();
    let write = |server: &mut Server, content: &str, retry: Option<(&str, Value)>| {
        let mut params = json!({
            "_meta": modern_meta(),
            "name": "write_file",
            "arguments": {"path": "notes.txt", "content": content}
        });
        if let Some((state, answer)) = retry {
            params["requestState"] = json!(state);
            params["inputResponses"] = json!({"approval": answer});
        }
        server.request("tools/call", params)["result"].clone()
    };
    let ask = |server: &mut Server, content: &str| {
        let asked = write(server, content, None);
        assert_eq!(asked["resultType"], "input_required", "{asked}");
        let question = &asked["inputRequests"]["approval"];
        assert_eq!(question["method"], "elicitation/create", "{asked}");
        let message = question["params"]["message"].as_str().unwrap().to_owned();
        (asked["requestState"].as_str().unwrap().to_owned(), message)
    };
    let yes = json!({"action": "accept", "content": {"apply": true}});

    // Asked with the diff; nothing applied until the retry says yes.
    let (state, message) = ask(&mut server, "new\n");
    assert!(
        message.contains("-old") && message.contains("+new"),
        "{message}"
    );
    assert_eq!(notes(), "old\n");
    let applied = write(&mut server, "new\n", Some((&state, yes.clone())));
    assert_eq!(applied["isError"], false, "{applied}");
    assert_eq!(notes(), "new\n");
    // The same request state answers once.
    let replayed = write(&mut server, "new\n", Some((&state, yes.clone())));
    assert_eq!(replayed["isError"], true, "{replayed}");

    // Declined: nothing applied.
    let (state, _) = ask(&mut server, "declined\n");
    let declined = write(
        &mut server,
        "declined\n",
        Some((&state, json!({"action": "decline"}))),
    );
    assert_eq!(
        declined["structuredContent"]["error"]["stage"], "approval",
        "{declined}"
    );
    assert_eq!(notes(), "new\n");

    // The file changed between the question and the answer: what the user saw is no longer what
    // would apply, so nothing applies.
    let (state, _) = ask(&mut server, "third\n");
    std::fs::write(root.path().join("notes.txt"), "edited meanwhile\n").unwrap();
    let stale = write(&mut server, "third\n", Some((&state, yes.clone())));
    assert_eq!(stale["isError"], true, "{stale}");
    assert!(
        stale["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("differ"),
        "{stale}"
    );
    assert_eq!(notes(), "edited meanwhile\n");

    // A retry whose arguments differ from the question's is refused.
    let (state, _) = ask(&mut server, "fourth\n");
    let swapped = write(&mut server, "something else\n", Some((&state, yes)));
    assert_eq!(swapped["isError"], true, "{swapped}");
    assert_eq!(notes(), "edited meanwhile\n");
    assert!(server.finish().success());
}

#[test]
fn a_result_shows_the_output_first_and_its_text_is_its_structured_content() {
    let root = workspace();
    let mut server = Server::initialized(root.path(), &[], json!({}));
    let written = server.call(
        "write_file",
        json!({"path": "notes.txt", "content": "line one\nline two\n"}),
    );
    let read = server.call("read_file", json!({"path": "notes.txt"}));
    let refused = server.call("write_file", json!({"path": "../x.txt", "content": "x"}));
    for result in [&written, &read, &refused] {
        let structured = &result["structuredContent"];
        let text = result["content"][0]["text"].as_str().expect("a text block");
        // The text block is the structured content, serialized (the MCP spec's SHOULD).
        assert_eq!(
            &serde_json::from_str::<Value>(text).unwrap(),
            structured,
            "{result}"
        );
        // What the model reads comes first; nothing only an operator needs.
        let first = if result["isError"] == true {
            r#"{"error":"#
        } else {
            r#"{"output":"#
        };
        assert!(text.starts_with(first), "{text}");
        for operator_only in ["sha256", "duration_ms", "stdout", "stderr"] {
            assert!(!text.contains(operator_only), "{operator_only} in {text}");
        }
    }
    assert_eq!(read["structuredContent"]["output"], "line one\nline two\n");
    assert_eq!(read["structuredContent"]["status"], "ok");
    assert_eq!(
        written["structuredContent"]["paths"],
        json!([{"path": "notes.txt", "change": "create"}])
    );
    assert_eq!(refused["structuredContent"]["error"]["kind"], "path");
    assert!(server.finish().success());
}

/// `turngate mcp ARGS` with stdin closed and `HOME` set to `home`; returns the exit code and stderr.
fn mcp_start(args: &[&std::ffi::OsStr], home: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .arg("mcp")
        .args(args)
        .arg("--cache-dir")
        .arg(common::test_cache_dir())
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_root_that_is_the_filesystem_the_home_or_a_system_directory_is_refused_unless_allowed() {
    let home = workspace();
    let home_path = home.path().canonicalize().unwrap();
    let project = home_path.join("project");
    std::fs::create_dir(&project).unwrap();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let refused: [(Vec<&std::ffi::OsStr>, &str); 5] = [
        (vec![os("--root"), os("/")], "the filesystem's root"),
        // Another spelling of the same directory.
        (vec![os("--root"), os("/usr/..")], "the filesystem's root"),
        (
            vec![os("--root"), home_path.as_os_str()],
            "your home directory",
        ),
        (
            vec![os("--root"), home_path.parent().unwrap().as_os_str()],
            "which holds your home directory",
        ),
        (vec![os("--root"), os("/etc")], "the system directory /etc"),
    ];
    for (args, why) in refused {
        let (code, stderr) = mcp_start(&args, &home_path);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(why) && stderr.contains("--allow-broad-root"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("turngate mcp: root"), "{stderr}");
    }
    // Allowed when asked for; a project directory needs nothing. Either way the resolved root is named.
    let (code, stderr) = mcp_start(
        &[
            os("--root"),
            home_path.as_os_str(),
            os("--allow-broad-root"),
        ],
        &home_path,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("turngate mcp: root {}", home_path.display())),
        "{stderr}"
    );
    let dotted = project.join("..").join("project");
    let (code, stderr) = mcp_start(&[os("--root"), dotted.as_os_str()], &home_path);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("turngate mcp: root {}\n", project.display())),
        "{stderr}"
    );
}

/// GETs `url`; returns the status, the `WWW-Authenticate` header and the body as JSON.
fn get(url: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = common::http_client().get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("HTTP request");
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null);
        (status, challenge, body)
    })
}

#[test]
fn a_missing_token_gets_a_401_that_oauth_clients_can_follow_to_the_resource_metadata() {
    let root = workspace();
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token_arg = token_file.to_str().unwrap().to_owned();
    let server = HttpServer::start(root.path(), &["--token-file", &token_arg]);
    let origin = server.url.trim_end_matches("/mcp").to_owned();
    let metadata_url = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        let (status, challenge, body) = get(&server.url, headers);
        assert_eq!(status, 401);
        let challenge = challenge.expect("WWW-Authenticate");
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{challenge}"
        );
        assert!(challenge.contains("bearer token"), "{challenge}");
        assert_eq!(body["error"], "invalid_token", "{body}");
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| d.contains("requires a bearer token")),
            "{body}"
        );
    }
    // RFC 9728: the resource is the endpoint, and no authorization server is offered.
    let (status, _, metadata) = get(&metadata_url, &[]);
    assert_eq!(status, 200, "{metadata}");
    assert_eq!(metadata["resource"], server.url.as_str(), "{metadata}");
    assert_eq!(metadata["authorization_servers"], json!([]), "{metadata}");
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    // Where a client looks for an authorization server: a JSON answer that says why there is none.
    let (status, _, body) = get(
        &format!("{origin}/.well-known/oauth-authorization-server"),
        &[],
    );
    assert_eq!(status, 404);
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| d.contains("bearer token")),
        "{body}"
    );
    // With the token, the endpoint answers.
    let (status, _, messages) = post(
        &server.url,
        initialize_body(),
        &[("authorization", "Bearer s3cret-token")],
    );
    assert_eq!(status, 200, "{messages:?}");
}

#[test]
fn http_answers_messages_it_cannot_take_as_stdio_does() {
    let root = workspace();
    let server = HttpServer::start(root.path(), &[]);
    let (status, _, messages) = post(&server.url, "{\"jsonrpc\": \"2.0\", \"id\": 4".into(), &[]);
    assert_eq!(status, 400);
    assert_eq!(messages[0]["error"]["code"], -32700, "{messages:?}");
    assert_eq!(messages[0]["id"], Value::Null, "{messages:?}");
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"deep.txt","content":{}{}}}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (status, _, messages) = post(&server.url, deep, &[]);
    assert_eq!(status, 400);
    assert_eq!(messages[0]["error"]["code"], -32600, "{messages:?}");
    assert_eq!(messages[0]["id"], 5, "{messages:?}");
    let (status, _, messages) = post(&server.url, initialize_body(), &[]);
    assert_eq!(status, 200, "{messages:?}");
    assert!(!root.path().join("deep.txt").exists());
}

/// Answers one HTTP request on 127.0.0.1 with `hello` and hands back its request line.
fn one_shot_http_server() -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            line.clear();
        }
        let _ = sent.send(request_line.trim().to_owned());
        let mut stream = stream;
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
        );
    });
    (port, seen)
}

#[test]
fn a_network_tool_call_goes_through_the_same_gate_and_its_requests_are_in_the_result_and_the_log() {
    let root = workspace();
    let (port, seen) = one_shot_http_server();
    let policy = tempfile::NamedTempFile::new().unwrap();
    // An IP literal, named exactly by its rule: no name to resolve, loopback allowed.
    std::fs::write(
        policy.path(),
        format!("[tools.fetch.network]\nget = [\"http://127.0.0.1:{port}/allowed\"]\n"),
    )
    .unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut server = Server::initialized(
        root.path(),
        &[
            "--policy",
            policy.path().to_str().unwrap(),
            "--log",
            log.path().to_str().unwrap(),
        ],
        json!({}),
    );
    let refused = server.call(
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/other")}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["structuredContent"]["error"]["stage"], "gate");
    let fetched = server.call(
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/allowed")}),
    );
    assert_eq!(fetched["isError"], false, "{fetched}");
    let requests = &fetched["structuredContent"]["requests"];
    assert_eq!(requests[0]["status"], 200, "{fetched}");
    assert_eq!(requests[0]["address"], format!("127.0.0.1:{port}"));
    assert!(server.finish().success());
    assert_eq!(
        seen.recv_timeout(Duration::from_secs(5)).unwrap(),
        "GET /allowed HTTP/1.1"
    );
    let records: Vec<Value> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[1]["requests"][0]["status"], 200, "{records:?}");
}

/// `turngate mcp --approve-in console`: the client is not asked (it declares no elicitation); the
/// question waits in the root until it is answered there, and the call then applies.
#[test]
fn with_approve_in_console_a_call_waits_for_the_answer_recorded_in_the_root() {
    let root = workspace();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = write_policy(policy_dir.path(), ASKS_BEFORE_WRITES);
    let policy = policy.to_str().unwrap().to_owned();
    let mut server = Server::initialized(
        root.path(),
        &["--policy", &policy, "--approve-in", "console"],
        json!({}),
    );
    let id = server.send(
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "notes.txt", "content": "yes\n"}}),
    );
    let approvals =
        turngate::PendingApprovals::open(&turngate::Root::open(root.path()).unwrap()).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let question = loop {
        if let Some(question) = approvals.waiting().unwrap().questions.pop() {
            break question;
        }
        assert!(Instant::now() < deadline, "no question was recorded");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(question.request["tool"], "write_file");
    assert!(
        !root.path().join("notes.txt").exists(),
        "nothing before the answer"
    );
    approvals.answer(&question.digest, true).unwrap();
    let response = server.response(id, |_, other| panic!("the client was asked: {other}"));
    assert_eq!(response["result"]["isError"], false, "{response}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "yes\n"
    );
    assert!(server.finish().success());
}
