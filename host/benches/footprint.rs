//! Memory and the first call of every surface that starts the toolbox, with an empty and a warm
//! cache, beside a peer MCP server in the same run; prints Markdown tables. `cargo bench --bench
//! footprint` (the worker rows need NATS at 127.0.0.1:4222, the package rows `python3` and `node`).
//!
//! * `turngate mcp` over stdio and over HTTP (`--listen`), `turngate worker`: the resident memory
//!   (RSS) once `initialize` has answered (the worker: once it has started), its peak (`VmHWM`) and
//!   where it settles, with an empty cache (the servers store every tool in the background) and
//!   with the cache that start filled.
//! * The Python and Node packages: a process that opens a toolbox, then calls `read_file` once: its
//!   RSS after the open and where it settles after the call, and its peak, both caches.
//! * `turngate mcp` over stdio: from spawning it to the result of its first `read_file` (1 KiB; the
//!   handshake and the call written at once, as a client does), empty cache and warm; then warm
//!   reads, one at a time, p50, p90 and p99.
//! * The same for `turngate mcp` compiling `read_file` at run time, as any tool that is not bundled is
//!   (`TURNGATE_TEST_IGNORE_PRECOMPILED`: the bundled tools' code built into the binary is ignored).
//! * The peer, when `TURNGATE_BENCH_PEER` names a Wassette binary and `TURNGATE_BENCH_PEER_COMPONENT`
//!   its filesystem example component: the same rows for `wassette serve --stdio` reading the same
//!   file (Wassette keeps no compiled code: every start compiles its components before it answers).
//!
//! Memory settles when two readings 200 ms apart differ by at most 256 KiB.

#[path = "../../tests/binding_support/mod.rs"]
mod binding_support;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use binding_support::{python_package, release_packages, repo};
use serde_json::{Value, json};
use support::{bin, median, percentile};

/// Starts of each process measured for memory, per cache state.
const MEMORY_SAMPLES: usize = 5;
/// Starts timed to their first read, per cache state.
const FIRST_READ_SAMPLES: usize = 15;
/// Warm reads over one server's stdio.
const WARM_READS: usize = 1000;

/// A field of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The RSS of `pid` once it stops changing, in KiB.
fn settled_kib(pid: u32) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = status_kib(pid, "VmRSS");
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = status_kib(pid, "VmRSS");
        if now.abs_diff(last) <= 256 || Instant::now() >= deadline {
            return now;
        }
        last = now;
    }
}

/// How many compiled components `cache` holds.
fn cached(cache: &Path) -> usize {
    std::fs::read_dir(cache)
        .map(|entries| {
            entries
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().ends_with(".cwasm")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits until `cache` holds `count` compiled components.
fn await_cached(cache: &Path, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while cached(cache) < count {
        assert!(Instant::now() < deadline, "the cache never filled");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Memory of one start, in KiB: once ready, at the peak, settled.
#[derive(Default, Clone, Copy)]
struct Memory {
    ready: u64,
    peak: u64,
    settled: u64,
}

/// The median of each column over `samples`.
fn medians(samples: Vec<Memory>) -> Memory {
    let column = |f: fn(&Memory) -> u64| {
        let mut values: Vec<u64> = samples.iter().map(f).collect();
        values.sort_unstable();
        values[values.len() / 2]
    };
    Memory {
        ready: column(|m| m.ready),
        peak: column(|m| m.peak),
        settled: column(|m| m.settled),
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// An MCP server over stdio: its process and pipes.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: BufReader<ChildStdout>,
}

impl Server {
    fn spawn(command: &mut Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Server {
            stdin: child.stdin.take().unwrap(),
            lines: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, messages: &str) {
        self.stdin.write_all(messages.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads lines until the response to `id`.
    fn response(&mut self, id: u64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.lines.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Reads until the result of the call `id`, and checks it read the file.
    fn read_result(&mut self, id: u64) {
        let message = self.response(id);
        let result = &message["result"];
        assert!(
            result.is_object() && result["isError"] != true,
            "the read failed: {message}"
        );
        assert!(message.to_string().contains(KIB_MARK), "{message}");
    }

    /// Closes stdin and waits for the server to leave, killing it after a second (Wassette does not
    /// leave when its client goes).
    fn finish(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() >= deadline {
                self.child.kill().unwrap();
                self.child.wait().unwrap();
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The start of the file every read reads (1 KiB in all).
const KIB_MARK: &str = "footprint-";

fn handshake() -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    format!("{init}\n{initialized}\n")
}

fn tools_call(id: u64, name: &str, arguments: &Value) -> String {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    format!("{call}\n")
}

/// An MCP server to measure: how to start it on a cache directory, and how it reads the file.
struct Side {
    name: &'static str,
    start: Box<dyn Fn(&Path) -> Command>,
    tool: String,
    arguments: Value,
    /// Whether the server keeps compiled code in the cache directory (a warm start exists).
    caches: bool,
}

impl Side {
    fn read(&self, id: u64) -> String {
        tools_call(id, &self.tool, &self.arguments)
    }

    /// Memory of a start on `cache`: ready once `initialize` answered; settled once every tool is in
    /// the cache (`tools` of them, when the server keeps a cache) and the RSS stops changing.
    fn memory(&self, cache: &Path, tools: usize) -> Memory {
        let mut server = Server::spawn(&mut (self.start)(cache));
        server.send(&handshake());
        server.response(0);
        let ready = status_kib(server.pid(), "VmRSS");
        if self.caches {
            await_cached(cache, tools);
        }
        let settled = settled_kib(server.pid());
        let peak = status_kib(server.pid(), "VmHWM");
        server.finish();
        Memory {
            ready,
            peak,
            settled,
        }
    }

    /// From spawning the server on `cache` to the result of its first read.
    fn first_read(&self, cache: &Path) -> Duration {
        let start = Instant::now();
        let mut server = Server::spawn(&mut (self.start)(cache));
        server.send(&(handshake() + &self.read(1)));
        server.read_result(1);
        let elapsed = start.elapsed();
        server.finish();
        elapsed
    }

    /// Warm reads, one at a time, over one server's stdio.
    fn warm_reads(&self, cache: &Path) -> Vec<Duration> {
        let mut server = Server::spawn(&mut (self.start)(cache));
        server.send(&handshake());
        server.response(0);
        let mut times = Vec::with_capacity(WARM_READS);
        for id in 1..=(WARM_READS as u64 + 20) {
            let call = self.read(id);
            let start = Instant::now();
            server.send(&call);
            server.read_result(id);
            times.push(start.elapsed());
        }
        server.finish();
        times.drain(..20);
        times
    }
}

/// The rows of one side: memory with an empty cache and a warm one, first reads, warm reads.
struct Rows {
    empty: Memory,
    warm: Memory,
    first_empty: Vec<Duration>,
    first_warm: Vec<Duration>,
    reads: Vec<Duration>,
}

fn measure(side: &Side, tools: usize) -> Rows {
    let fresh = || tempfile::tempdir().unwrap();
    let mut empty = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..MEMORY_SAMPLES {
        let cache = fresh();
        empty.push(side.memory(cache.path(), tools));
        warm.push(side.memory(cache.path(), tools));
    }
    let mut first_empty = Vec::new();
    let mut first_warm = Vec::new();
    // Filled by a server left running until it has compiled every tool.
    let warm_cache = fresh();
    side.memory(warm_cache.path(), tools);
    for _ in 0..FIRST_READ_SAMPLES {
        first_empty.push(side.first_read(fresh().path()));
        first_warm.push(side.first_read(warm_cache.path()));
    }
    Rows {
        empty: medians(empty),
        warm: medians(warm),
        first_empty,
        first_warm,
        reads: side.warm_reads(warm_cache.path()),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// The peer, when the environment names it: Wassette serving its filesystem example over stdio,
/// with read access to `root`.
fn peer(root: &Path, plugins: &Path) -> Option<Side> {
    let binary = PathBuf::from(std::env::var_os("TURNGATE_BENCH_PEER")?);
    let component = PathBuf::from(std::env::var_os("TURNGATE_BENCH_PEER_COMPONENT")?);
    std::fs::copy(&component, plugins.join("filesystem.wasm")).unwrap();
    let policy = format!(
        "version: \"1.0\"\ndescription: \"bench\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://{}\"\n        access: [\"read\"]\n",
        root.display()
    );
    std::fs::write(plugins.join("filesystem.policy.yaml"), policy).unwrap();
    let plugin_dir = plugins.to_path_buf();
    Some(Side {
        name: "Wassette",
        start: Box::new(move |_cache| {
            let mut command = Command::new(&binary);
            command
                .args(["serve", "--stdio", "--plugin-dir"])
                .arg(&plugin_dir);
            command
        }),
        tool: std::env::var("TURNGATE_BENCH_PEER_TOOL").unwrap_or_else(|_| "read-file".into()),
        arguments: json!({"path": root.join("small.txt")}),
        caches: false,
    })
}

/// A process of the Python or Node package: opens a toolbox on `cache` and says `ready`, then on a
/// line of stdin reads the file once and says `read`, then waits for stdin to close.
fn package_memory(command: &mut Command, cache: &Path) -> Memory {
    let mut child = command
        .env("TURNGATE_BENCH_CACHE", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "{line}");
    let opened = settled_kib(child.id());
    stdin.write_all(b"read\n").unwrap();
    stdin.flush().unwrap();
    line.clear();
    lines.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "read", "{line}");
    let settled = settled_kib(child.id());
    let peak = status_kib(child.id(), "VmHWM");
    drop(stdin);
    child.wait().unwrap();
    Memory {
        ready: opened,
        peak,
        settled,
    }
}

/// A server that is not driven over stdio (`turngate mcp --listen`, `turngate worker`): memory of a
/// start on `cache`, ready once it wrote `ready` to stderr, settled once the cache holds `tools`
/// compiled components (when it compiles ahead) and the RSS stops changing.
fn daemon_memory(command: &mut Command, ready: &str, compiles: Option<(&Path, usize)>) -> Memory {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains(ready) {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "never ready");
    }
    // Keeps draining stderr, so the server never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let pid = child.id();
    let at_ready = status_kib(pid, "VmRSS");
    if let Some((cache, tools)) = compiles {
        await_cached(cache, tools);
    }
    let settled = settled_kib(pid);
    let peak = status_kib(pid, "VmHWM");
    child.kill().unwrap();
    child.wait().unwrap();
    Memory {
        ready: at_ready,
        peak,
        settled,
    }
}

/// Memory of `MEMORY_SAMPLES` starts each with an empty cache and the cache the first start filled.
fn memory_rows(mut start: impl FnMut(&Path) -> Memory) -> (Memory, Memory) {
    let (mut empty, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..MEMORY_SAMPLES {
        let cache = tempfile::tempdir().unwrap();
        empty.push(start(cache.path()));
        warm.push(start(cache.path()));
    }
    (medians(empty), medians(warm))
}

fn memory_row(surface: &str, cache: &str, memory: Memory) {
    println!(
        "| {surface} | {cache} | {} | {} | {} |",
        mib(memory.ready),
        mib(memory.peak),
        mib(memory.settled)
    );
}

const PYTHON_DRIVER: &str = "
import os, sys, turngate
box = turngate.Toolbox(os.environ['TURNGATE_BENCH_ROOT'], cache_dir=os.environ['TURNGATE_BENCH_CACHE'])
print('ready', flush=True)
sys.stdin.readline()
outcome = box.call('read_file', {'path': 'small.txt'})
assert outcome['status'] == 'ok', outcome
print('read', flush=True)
sys.stdin.read()
";

const NODE_DRIVER: &str = "
const turngate = require(process.env.TURNGATE_BENCH_NODE_PACKAGE);
const readline = require('node:readline');
(async () => {
  const box = await turngate.Toolbox.open({ root: process.env.TURNGATE_BENCH_ROOT, cacheDir: process.env.TURNGATE_BENCH_CACHE });
  console.log('ready');
  const lines = readline.createInterface({ input: process.stdin });
  const next = lines[Symbol.asyncIterator]();
  await next.next();
  const outcome = await box.call('read_file', { path: 'small.txt' });
  if (outcome.status !== 'ok') throw new Error(JSON.stringify(outcome));
  console.log('read');
  await next.next();
})();
";

#[allow(clippy::disallowed_methods)] // bench set-up outside any root
/// `turngate mcp` on `root` reading `small.txt`, with `env` set.
fn turngate_side(name: &'static str, root: &Path, env: &[(&'static str, &'static str)]) -> Side {
    let root = root.to_path_buf();
    let env = env.to_vec();
    Side {
        name,
        start: Box::new(move |cache| {
            let mut command = Command::new(bin());
            command
                .args(["mcp", "--root"])
                .arg(&root)
                .arg("--cache-dir")
                .arg(cache)
                .envs(env.iter().copied());
            command
        }),
        tool: "read_file".into(),
        arguments: json!({"path": "small.txt"}),
        caches: true,
    }
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let content = format!("{KIB_MARK}{}\n", "x".repeat(1023 - KIB_MARK.len()));
    std::fs::write(root.path().join("small.txt"), &content).unwrap();
    let turngate = turngate_side("turngate", root.path(), &[]);
    let tools = {
        let mut server = Server::spawn(&mut (turngate.start)(tempfile::tempdir().unwrap().path()));
        server.send(&(handshake() + &tools_call(1, "read_file", &json!({"path": "small.txt"}))));
        server.read_result(1);
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        server.send(&format!("{list}\n"));
        let count = server.response(2)["result"]["tools"]
            .as_array()
            .unwrap()
            .len();
        server.finish();
        count
    };
    // The same server with `read_file` compiled at run time, as a tool that is not bundled is: the
    // first read before the bundled tools' code was built into the binary, in this run.
    let compiling = turngate_side(
        "turngate, compiling as for a tool not bundled",
        root.path(),
        &[("TURNGATE_TEST_IGNORE_PRECOMPILED", "1")],
    );
    let plugins = tempfile::tempdir().unwrap();
    let mut sides = vec![turngate, compiling];
    sides.extend(peer(root.path(), plugins.path()));
    let rows: Vec<(&str, Rows)> = sides.iter().map(|s| (s.name, measure(s, tools))).collect();

    println!("| server (stdio) | cache | RSS after `initialize` | peak | settled |");
    println!("|---|---|---|---|---|");
    for (name, row) in &rows {
        memory_row(name, "empty", row.empty);
        memory_row(name, "warm", row.warm);
    }
    println!();
    println!(
        "| server (stdio) | first read, empty cache (p50 / p90) | first read, warm (p50 / p90) | ratio | warm read p50 / p90 / p99 |"
    );
    println!("|---|---|---|---|---|");
    for (name, row) in &rows {
        let (empty, warm) = (
            median(row.first_empty.clone()),
            median(row.first_warm.clone()),
        );
        println!(
            "| {name} | {} / {} | {} / {} | {:.2}× | {} / {} / {} |",
            ms(empty),
            ms(percentile(row.first_empty.clone(), 90)),
            ms(warm),
            ms(percentile(row.first_warm.clone(), 90)),
            empty.as_secs_f64() / warm.as_secs_f64(),
            us(median(row.reads.clone())),
            us(percentile(row.reads.clone(), 90)),
            us(percentile(row.reads.clone(), 99)),
        );
    }

    // Every other surface that starts the toolbox.
    println!();
    println!("| surface | cache | RSS at start | peak | settled |");
    println!("|---|---|---|---|---|");
    let (empty, warm) = memory_rows(|cache| {
        daemon_memory(
            Command::new(bin())
                .args(["mcp", "--listen", "127.0.0.1:0", "--root"])
                .arg(root.path())
                .arg("--cache-dir")
                .arg(cache),
            "listening on ",
            Some((cache, tools)),
        )
    });
    memory_row("`turngate mcp --listen` (HTTP)", "empty", empty);
    memory_row("`turngate mcp --listen` (HTTP)", "warm", warm);
    let (empty, warm) = memory_rows(|cache| {
        daemon_memory(
            Command::new(bin())
                .args(["worker", "--nats", "nats://127.0.0.1:4222", "--prefix"])
                .arg(format!("footprint{}", fastrand::u32(..)))
                .arg("--roots")
                .arg(root.path())
                .arg("--cache-dir")
                .arg(cache),
            "turngate worker: pulling",
            None,
        )
    });
    memory_row("`turngate worker`", "empty", empty);
    memory_row("`turngate worker`", "warm", warm);
    packages(root.path());
}

/// The Python and Node rows: a process that opens a toolbox and reads the file once.
fn packages(root: &Path) {
    let (python_extension, node_addon) = release_packages();
    let work = tempfile::tempdir().unwrap();
    let python_path = python_package(&python_extension, work.path());
    let (empty, warm) = memory_rows(|cache| {
        package_memory(
            Command::new("python3")
                .args(["-c", PYTHON_DRIVER])
                .env("PYTHONPATH", &python_path)
                .env("TURNGATE_BENCH_ROOT", root),
            cache,
        )
    });
    memory_row("Python package (open, then one read)", "empty", empty);
    memory_row("Python package (open, then one read)", "warm", warm);
    let (empty, warm) = memory_rows(|cache| {
        package_memory(
            Command::new("node")
                .args(["-e", NODE_DRIVER])
                .env("TURNGATE_BENCH_NODE_PACKAGE", repo().join("node"))
                .env("TURNGATE_NODE_ADDON", &node_addon)
                .env("TURNGATE_BENCH_ROOT", root),
            cache,
        )
    });
    memory_row("Node package (open, then one read)", "empty", empty);
    memory_row("Node package (open, then one read)", "warm", warm);
}
