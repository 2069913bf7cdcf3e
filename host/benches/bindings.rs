//! The Python and Node packages against the library they wrap, in one run; prints a Markdown table.
//! `cargo bench --bench bindings` (needs `python3` and `node`; nothing from a registry).
//!
//! Builds the Python extension module and the Node addon in the release profile (the one
//! `pip install ./python` and `npm install ./node` build), starts a driver process for each
//! (`python/benches/driver.py`, `node/benches/driver.js`), and measures in rounds that alternate the
//! three, so whatever else the machine does falls on all of them alike:
//!
//! * a no-op call (the test guest `noop`: no paths, so no view), `toolbox.call("noop", {})` from Python
//!   and from Node against `Toolbox::call` in-process, driven as the Python binding drives it
//!   (`block_on` on a two-worker runtime from the caller's thread);
//! * the 500-write turn (1 KiB each, distinct files, a fresh root and toolbox per run): the raw body
//!   through `run_turn` / `runTurn` against `decode` plus `process_turn` in-process.
//!
//! The drivers speak one line per request on stdin (`noop N`, `turn N`) and answer one line of JSON:
//! the N timings in nanoseconds, each taken around one call or one turn in the driver's own language.

#[path = "../../tests/binding_support/mod.rs"]
mod binding_support;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use binding_support::{python_package, release_packages, repo};
use support::{median, row, write_turn};
use turngate::providers::decode;
use turngate::{CacheSetting, Policy, Provider, Root, Toolbox, TurnOptions, process_turn};

const ROUNDS: usize = 5;
const NOOP_PER_ROUND: usize = 2000;
const TURNS_PER_ROUND: usize = 6;
const TURN_CALLS: usize = 500;

/// What every driver and the in-process side share: the tools, the compiled-component cache, the turn.
struct Setup {
    noop_tools: tempfile::TempDir,
    cache: tempfile::TempDir,
    turn_file: PathBuf,
    work: tempfile::TempDir,
}

/// A driver process and its two pipes.
struct Driver {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    fn start(name: &'static str, command: &mut Command, setup: &Setup) -> Driver {
        let mut child = command
            .env("TURNGATE_BENCH_TOOLS", setup.noop_tools.path())
            .env("TURNGATE_BENCH_CACHE", setup.cache.path())
            .env("TURNGATE_BENCH_TURN", &setup.turn_file)
            .env("TURNGATE_BENCH_WORK", setup.work.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting the {name} driver: {e}"));
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        assert_eq!(ready.trim(), "ready", "the {name} driver did not start");
        Driver {
            name,
            child,
            stdin,
            stdout,
        }
    }

    /// Asks for `count` timings of `case` and answers them.
    fn timings(&mut self, case: &str, count: usize) -> Vec<Duration> {
        writeln!(self.stdin, "{case} {count}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let nanos: Vec<u64> = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the {} driver answered {line:?}: {e}", self.name));
        assert_eq!(nanos.len(), count, "the {} driver's answer", self.name);
        nanos.into_iter().map(Duration::from_nanos).collect()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn toolbox(runtime: &tokio::runtime::Runtime, setup: &Setup) -> Toolbox {
    runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(setup.cache.path().to_path_buf()))
                .tools_dir(setup.noop_tools.path())
                .build(),
        )
        .unwrap()
}

#[allow(clippy::disallowed_methods)] // bench set-up outside any root
fn main() {
    let (python_extension, node_addon) = release_packages();

    let work = tempfile::tempdir().unwrap();
    let noop_tools = tempfile::tempdir().unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_NOOP"),
        noop_tools.path().join("noop.wasm"),
    )
    .unwrap();
    let turn_body = write_turn(TURN_CALLS);
    let turn_file = work.path().join("turn.sse");
    std::fs::write(&turn_file, &turn_body).unwrap();
    let setup = Setup {
        noop_tools,
        cache: tempfile::tempdir().unwrap(),
        turn_file,
        work,
    };

    // The runtime the Python binding drives calls on: two workers, `block_on` from the caller.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rust_toolbox = toolbox(&runtime, &setup); // also fills the cache the drivers load from
    let noop_root_dir = tempfile::tempdir().unwrap();
    let noop_root = Root::open(noop_root_dir.path()).unwrap();
    let policy = Policy::allow_all();

    let python_path = python_package(&python_extension, &setup.work.path().join("python"));
    let mut python = Driver::start(
        "Python",
        Command::new("python3")
            .arg(repo().join("python/benches/driver.py"))
            .env("PYTHONPATH", &python_path),
        &setup,
    );
    let mut node = Driver::start(
        "Node",
        Command::new("node")
            .arg(repo().join("node/benches/driver.js"))
            .env("TURNGATE_NODE_ADDON", &node_addon),
        &setup,
    );

    let mut rust_noop = Vec::new();
    let mut rust_turn = Vec::new();
    let (mut python_noop, mut python_turn) = (Vec::new(), Vec::new());
    let (mut node_noop, mut node_turn) = (Vec::new(), Vec::new());
    let mut turn_index = 0usize;
    for _ in 0..ROUNDS {
        rust_noop.extend((0..NOOP_PER_ROUND).map(|_| {
            let start = Instant::now();
            let outcome = runtime.block_on(rust_toolbox.call(&noop_root, &policy, "noop", "{}"));
            let elapsed = start.elapsed();
            assert!(outcome.result.is_ok());
            elapsed
        }));
        python_noop.extend(python.timings("noop", NOOP_PER_ROUND));
        node_noop.extend(node.timings("noop", NOOP_PER_ROUND));

        rust_turn.extend((0..TURNS_PER_ROUND).map(|_| {
            turn_index += 1;
            let dir = setup.work.path().join(format!("rust-turn-{turn_index}"));
            std::fs::create_dir(&dir).unwrap();
            let root = Root::open(&dir).unwrap();
            let toolbox = toolbox(&runtime, &setup);
            let start = Instant::now();
            let turn = decode(Provider::Anthropic, turn_body.as_bytes());
            let report = runtime.block_on(process_turn(
                &toolbox,
                &root,
                &policy,
                turn,
                TurnOptions::default(),
            ));
            let elapsed = start.elapsed();
            assert!(report.all_ok() && report.calls.len() == TURN_CALLS);
            elapsed
        }));
        python_turn.extend(python.timings("turn", TURNS_PER_ROUND));
        node_turn.extend(node.timings("turn", TURNS_PER_ROUND));
    }

    println!("| case | binding (median) | p90 | baseline | baseline (median) | p90 | ratio |");
    println!("|---|---|---|---|---|---|---|");
    let in_process = "`Toolbox::call` in-process";
    row(
        "no-op call from Python",
        &python_noop,
        in_process,
        &rust_noop,
    );
    row("no-op call from Node", &node_noop, in_process, &rust_noop);
    let turn_baseline = "`decode` + `process_turn` in-process";
    row(
        "500-write turn from Python",
        &python_turn,
        turn_baseline,
        &rust_turn,
    );
    row(
        "500-write turn from Node",
        &node_turn,
        turn_baseline,
        &rust_turn,
    );
    let added = |ours: &[Duration]| {
        median(ours.to_vec()).as_secs_f64() * 1e6 - median(rust_noop.clone()).as_secs_f64() * 1e6
    };
    println!();
    println!(
        "added per no-op call (medians): Python {:+.1} µs, Node {:+.1} µs",
        added(&python_noop),
        added(&node_noop)
    );
}
