//! MCP server mode and start-up, against baselines in the same run; prints Markdown tables.
//! `cargo bench --bench mcp`.
//!
//! * Cold start: from spawning `turngate mcp` (stdio, precompiled cache warm) to the result of its first
//!   `tools/call` (`read_file` of a small file), the three messages (initialize, initialized, the call)
//!   written at once, as a client does. Peak RSS of that process.
//! * Empty cache: from spawning `turngate mcp` with an empty cache directory to its `initialize`
//!   result and to its first `tools/call` result (the only tool compiled).
//! * Warm `tools/call`: the same `read_file` over one server's stdio, one call at a time, against the
//!   bare library call (`Toolbox::call`) in this process.
//! * The cold CLI call: a `turngate call write_file` process (1 KiB), cache warm, into a new root (its
//!   first call makes and flushes the journal's directory) and into a root whose journal is there,
//!   against a `cp` process writing the same bytes, and against a native process writing them
//!   durably (this bench run again with `--durable-copy`: temporary file, write, fsync, rename, the
//!   directory's fsync). Peak RSS of `turngate call` and `cp`.
//! * The floor of that call: a process that only runs the same precompiled `write_file` in wasmtime and
//!   flushes what it wrote (`host/benches/floor`, built here), against `cp` and against the call.
//!
//! Medians and p90 over the samples; the ratio column is turngate / baseline at the median.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{bin, median, native_durable_write, percentile, row, spawn_mcp as spawn_server};
use turngate::{CacheSetting, Policy, Root, Toolbox};

const COLD_SAMPLES: usize = 40;
const WARM_SAMPLES: usize = 2000;
const CLI_SAMPLES: usize = 60;
const EMPTY_CACHE_SAMPLES: usize = 10;

fn handshake() -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    format!("{init}\n{initialized}\n")
}

fn read_call(id: u64) -> String {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "small.txt"}}});
    format!("{call}\n")
}

/// Reads lines until the response to `id`, and returns it.
fn await_response(lines: &mut impl BufRead, id: u64) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "server closed stdout"
        );
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == json!(id) {
            return message;
        }
    }
}

/// Reads lines until the response to the call `id`; checks the call succeeded.
fn await_call(lines: &mut impl BufRead, id: u64) {
    let message = await_response(lines, id);
    assert_eq!(message["result"]["isError"], false, "{message}");
}

/// Peak resident set of a live process, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Peak RSS of a finished child, in KiB, as GNU time reports it.
fn peak_rss_of(command: &mut Command) -> u64 {
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M"])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap()
}

fn cold_rows(root: &Path, cache: &Path) -> (Vec<Duration>, u64) {
    let mut times = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..COLD_SAMPLES + 3 {
        let start = Instant::now();
        let mut child = spawn_server(root, cache);
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all((handshake() + &read_call(1)).as_bytes())
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        await_call(&mut lines, 1);
        times.push(start.elapsed());
        rss.push(peak_rss_kib(child.id()));
        drop(stdin);
        child.wait().unwrap();
    }
    times.drain(..3);
    rss.sort();
    (times, rss[rss.len() / 2])
}

/// From spawning `turngate mcp` with an empty cache to its `initialize` result, and to the result of
/// its first `tools/call` (which compiles `read_file`).
fn empty_cache_rows(root: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let mut initialize = Vec::new();
    let mut first_call = Vec::new();
    for _ in 0..EMPTY_CACHE_SAMPLES {
        let cache = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let mut child = spawn_server(root, cache.path());
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all((handshake() + &read_call(1)).as_bytes())
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        await_response(&mut lines, 0);
        initialize.push(start.elapsed());
        await_call(&mut lines, 1);
        first_call.push(start.elapsed());
        drop(stdin);
        child.wait().unwrap();
    }
    (initialize, first_call)
}

fn warm_rows(root_dir: &Path, cache: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let mut child = spawn_server(root_dir, cache);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(handshake().as_bytes()).unwrap();
    await_response(&mut lines, 0);
    let mut over_mcp = Vec::new();
    for id in 1..=(WARM_SAMPLES as u64 + 50) {
        let start = Instant::now();
        stdin.write_all(read_call(id).as_bytes()).unwrap();
        stdin.flush().unwrap();
        await_call(&mut lines, id);
        over_mcp.push(start.elapsed());
    }
    over_mcp.drain(..50);
    drop(stdin);
    child.wait().unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache.to_owned()))
                .build(),
        )
        .unwrap();
    let root = Root::open(root_dir).unwrap();
    let policy = Policy::allow_all();
    let mut bare = Vec::new();
    for i in 0..WARM_SAMPLES + 50 {
        let start = Instant::now();
        let outcome =
            runtime.block_on(toolbox.call(&root, &policy, "read_file", r#"{"path":"small.txt"}"#));
        if i >= 50 {
            bare.push(start.elapsed());
        }
        assert!(outcome.result.is_ok());
    }
    (over_mcp, bare)
}

/// The cold CLI call's samples: into new roots, into one root whose journal is there, and the
/// baselines (`cp`, the native durable copy), interleaved.
struct CliRows {
    new_root: Vec<Duration>,
    same_root: Vec<Duration>,
    cp: Vec<Duration>,
    durable: Vec<Duration>,
    floor: Vec<Duration>,
    rss: u64,
    cp_rss: u64,
}

#[allow(clippy::disallowed_methods)] // the baseline is plain processes on purpose
fn cli_rows(cache: &Path) -> CliRows {
    let source_dir = tempfile::tempdir().unwrap();
    let content = "x".repeat(1023) + "\n";
    let source = source_dir.path().join("source.txt");
    std::fs::write(&source, &content).unwrap();
    let input = |name: &str| json!({"path": name, "content": content}).to_string();
    let (floor_bin, floor_entry) = (floor_binary(), write_file_entry());
    let floor = |root: &Path| {
        let mut command = Command::new(&floor_bin);
        command
            .arg(&floor_entry)
            .arg(root)
            .arg("notes.txt")
            .arg(input("notes.txt"))
            .stdout(Stdio::null());
        command
    };
    let call = |root: &Path, name: &str| {
        let input = input(name);
        let mut command = Command::new(bin());
        command
            .args(["call", "--cache-dir"])
            .arg(cache)
            .arg("--root")
            .arg(root)
            .args(["write_file", &input])
            .stdout(Stdio::null());
        command
    };
    let cp = |root: &Path| {
        let mut command = Command::new("cp");
        command.arg(&source).arg(root.join("notes.txt"));
        command
    };
    let durable = |root: &Path| {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .arg("--durable-copy")
            .arg(&source)
            .arg(root.join("notes.txt"));
        command
    };
    let timed = |mut command: Command| {
        let start = Instant::now();
        assert!(command.status().unwrap().success());
        start.elapsed()
    };
    let same_root = tempfile::tempdir().unwrap();
    let mut rows = CliRows {
        new_root: Vec::new(),
        same_root: Vec::new(),
        cp: Vec::new(),
        durable: Vec::new(),
        floor: Vec::new(),
        rss: 0,
        cp_rss: 0,
    };
    for i in 0..CLI_SAMPLES + 3 {
        let roots: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let samples = [
            timed(call(roots[0].path(), "notes.txt")),
            timed(call(same_root.path(), &format!("notes-{i}.txt"))),
            timed(cp(roots[1].path())),
            timed(durable(roots[2].path())),
            timed(floor(roots[3].path())),
        ];
        if i >= 3 {
            rows.new_root.push(samples[0]);
            rows.same_root.push(samples[1]);
            rows.cp.push(samples[2]);
            rows.durable.push(samples[3]);
            rows.floor.push(samples[4]);
        }
    }
    let root = tempfile::tempdir().unwrap();
    rows.rss = peak_rss_of(&mut call(root.path(), "notes.txt"));
    let other = tempfile::tempdir().unwrap();
    rows.cp_rss = peak_rss_of(&mut cp(other.path()));
    rows
}

/// Builds the floor (`host/benches/floor`, a workspace of its own) into this build's scratch directory
/// and returns its binary.
fn floor_binary() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/floor/Cargo.toml");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-floor");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--quiet",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success(), "building {}", manifest.display());
    target.join("release/turngate-bench-floor")
}

/// The precompiled `write_file`, as a `turngate call` leaves it in an empty cache (only the called
/// tool is compiled): the entry the floor loads.
fn write_file_entry() -> PathBuf {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-floor-cache");
    let _ = std::fs::remove_dir_all(&cache);
    let root = tempfile::tempdir().unwrap();
    let status = Command::new(bin())
        .args(["call", "--cache-dir"])
        .arg(&cache)
        .arg("--root")
        .arg(root.path())
        .args(["write_file", r#"{"path":"notes.txt","content":"x"}"#])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let entries: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    let [entry] = entries.as_slice() else {
        panic!("expected one compiled tool in {}", cache.display());
    };
    entry.clone()
}

/// The native durable write a cold CLI call is also measured against: what an application that must
/// not lose the file does (temporary file, write, fsync, rename, the directory's fsync).
#[allow(clippy::disallowed_methods)] // the baseline is plain std::fs on purpose
fn durable_copy(source: &Path, target: &Path) {
    let dir = target.parent().unwrap();
    let name = target.file_name().unwrap().to_str().unwrap();
    native_durable_write(dir, name, &std::fs::read(source).unwrap());
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, source, target] = args.as_slice()
        && flag == "--durable-copy"
    {
        durable_copy(Path::new(source), Path::new(target));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("small.txt"), "hello, world\n").unwrap();
    // Warm the precompiled cache (and its descriptor cache) once.
    let status = Command::new(bin())
        .args(["tools", "list", "--cache-dir"])
        .arg(cache.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let (empty_initialize, empty_first_call) = empty_cache_rows(root.path());
    let (cold, cold_rss) = cold_rows(root.path(), cache.path());
    let (warm, bare) = warm_rows(root.path(), cache.path());
    let cli = cli_rows(cache.path());

    println!(
        "| case | turngate (median) | turngate (p90) | baseline | baseline (median) | baseline (p90) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| `turngate mcp` spawn to first `tools/call` result (read_file), cache warm | {:.2?} | {:.2?} | target | 30ms | | {:.2}× |",
        median(cold.clone()),
        percentile(cold.clone(), 90),
        median(cold.clone()).as_secs_f64() / 0.030
    );
    println!(
        "| `turngate mcp` spawn to `initialize` result, empty cache | {:.2?} | {:.2?} | target | 1s | | {:.2}× |",
        median(empty_initialize.clone()),
        percentile(empty_initialize.clone(), 90),
        median(empty_initialize.clone()).as_secs_f64()
    );
    println!(
        "| `turngate mcp` spawn to first `tools/call` result (read_file), empty cache | {:.2?} | {:.2?} | target | 200ms | | {:.2}× |",
        median(empty_first_call.clone()),
        percentile(empty_first_call.clone(), 90),
        median(empty_first_call.clone()).as_secs_f64() / 0.200
    );
    row(
        "warm `tools/call` read_file over stdio",
        &warm,
        "`Toolbox::call` in-process",
        &bare,
    );
    row(
        "`turngate call write_file` process (1 KiB), cache warm, new root",
        &cli.new_root,
        "`cp` process, same bytes",
        &cli.cp,
    );
    row(
        "`turngate call write_file` process (1 KiB), cache warm, new root",
        &cli.new_root,
        "native process writing them durably",
        &cli.durable,
    );
    row(
        "`turngate call write_file` process (1 KiB), cache warm, root with a journal",
        &cli.same_root,
        "`cp` process, same bytes",
        &cli.cp,
    );
    row(
        "`turngate call write_file` process (1 KiB), cache warm, new root",
        &cli.new_root,
        "the floor: only the tool run in wasmtime, its file flushed",
        &cli.floor,
    );
    row(
        "the floor: only the tool run in wasmtime, its file flushed",
        &cli.floor,
        "`cp` process, same bytes",
        &cli.cp,
    );
    println!();
    println!("| process | peak RSS |");
    println!("|---|---|");
    println!(
        "| `turngate mcp` after its first call | {:.1} MiB |",
        cold_rss as f64 / 1024.0
    );
    println!(
        "| `turngate call write_file` | {:.1} MiB |",
        cli.rss as f64 / 1024.0
    );
    println!("| `cp` | {:.1} MiB |", cli.cp_rss as f64 / 1024.0);
}
