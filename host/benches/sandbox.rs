//! The sandbox's cost against native baselines, measured in the same run; prints a Markdown table.
//!
//! `cargo bench --bench sandbox`. Rows:
//!
//! * `write_file` of 1 KiB through the warm sandbox (gate + a fresh instance per call) vs `std::fs::write`
//!   of the same bytes, and vs the same atomic replace done natively (temporary file, then rename);
//! * a no-op call (a tool without paths, so no preopen) vs a native function call;
//! * `read_file` of a 1-byte file (a view, so the call runs on a call thread) vs the no-op call;
//! * what a hand-off between threads costs on this machine: a round trip to another thread and back,
//!   the other thread asleep between trips, vs both threads looking for the message (`sched_yield`
//!   between looks), as call threads and their callers do (`sandbox/threads.rs`);
//! * the first call of a new `turngate call` process with a warm and with no precompiled cache, vs a
//!   process per call that writes the file natively (`sh -c 'printf ... > file'`).
//!
//! Medians over many samples; the ratio column is sandbox / baseline.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{measure, median};

use turngate::{CacheSetting, Policy, Root, Toolbox};

const WARM_SAMPLES: usize = 2000;
const PROCESS_SAMPLES: usize = 40;
const COLD_SAMPLES: usize = 8;

fn first_call(bin: &Path, root: &Path, cache: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(bin)
        .arg("call")
        .args(cache)
        .arg("--root")
        .arg(root)
        .args(["write_file", r#"{"path":"notes.txt","content":"hello"}"#])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    start.elapsed()
}

/// The median round trip to another thread and back over channels, with 20 µs of work between trips:
/// the other thread waiting asleep (`recv`), or both looking for the message (`try_recv`, then
/// `sched_yield`).
fn hand_off(looking: bool) -> Duration {
    use std::sync::mpsc::{Receiver, channel};
    fn next(receive: &Receiver<u32>, looking: bool) -> Option<u32> {
        if !looking {
            return receive.recv().ok();
        }
        loop {
            match receive.try_recv() {
                Ok(value) => return Some(value),
                Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
            }
        }
    }
    let (there, receive_there) = channel::<u32>();
    let (back, receive_back) = channel::<u32>();
    let other = std::thread::spawn(move || {
        while let Some(value) = next(&receive_there, looking) {
            back.send(value).unwrap();
        }
    });
    let trips: Vec<Duration> = (0..WARM_SAMPLES)
        .map(|_| {
            let work = Instant::now();
            while work.elapsed() < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
            let start = Instant::now();
            there.send(1).unwrap();
            next(&receive_back, looking).unwrap();
            start.elapsed()
        })
        .collect();
    drop(there);
    other.join().unwrap();
    median(trips)
}

fn row(name: &str, sandbox: Duration, baseline_name: &str, baseline: Duration) {
    let ratio = sandbox.as_secs_f64() / baseline.as_secs_f64();
    println!("| {name} | {sandbox:.1?} | {baseline_name} | {baseline:.1?} | {ratio:.1}× |");
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to configure.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache_dir.path().to_path_buf()))
                .component_file(env!("TURNGATE_TEST_GUEST_NOOP"))
                .unwrap()
                .build(),
        )
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = Root::open(work.path()).unwrap();
    let policy = Policy::allow_all();
    let content = "x".repeat(1024);
    let input = serde_json::json!({"path": "notes.txt", "content": content}).to_string();

    println!("| case | turngate (median) | baseline | baseline (median) | ratio |");
    println!("|---|---|---|---|---|");

    let sandboxed = measure(WARM_SAMPLES, || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "write_file", &input));
        assert!(outcome.result.is_ok());
    });
    let native_path = work.path().join("native.txt");
    let native = measure(WARM_SAMPLES, || {
        std::fs::write(&native_path, content.as_bytes()).unwrap()
    });
    row(
        "write_file 1 KiB, warm sandbox, fresh instance per call",
        sandboxed,
        "std::fs::write",
        native,
    );
    let atomic_path = work.path().join("atomic.txt");
    let native_atomic = measure(WARM_SAMPLES, || {
        let mut temp = tempfile::NamedTempFile::new_in(work.path()).unwrap();
        std::io::Write::write_all(&mut temp, content.as_bytes()).unwrap();
        temp.persist(&atomic_path).unwrap();
    });
    row(
        "write_file 1 KiB, warm sandbox, fresh instance per call",
        sandboxed,
        "native temp file + rename",
        native_atomic,
    );

    let noop = measure(WARM_SAMPLES, || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "noop", "{}"));
        assert!(outcome.result.is_ok());
    });
    let native_noop = measure(WARM_SAMPLES, || {
        std::hint::black_box(
            serde_json::from_str::<serde_json::Value>(std::hint::black_box("{}")).unwrap(),
        );
    });
    row(
        "no-op call (no preopen), warm sandbox",
        noop,
        "native fn (parse {})",
        native_noop,
    );

    std::fs::write(work.path().join("one.txt"), "x").unwrap();
    let read = measure(WARM_SAMPLES, || {
        let outcome =
            runtime.block_on(toolbox.call(&root, &policy, "read_file", r#"{"path":"one.txt"}"#));
        assert!(outcome.result.is_ok());
    });
    row(
        "read_file of a 1-byte file (a view, on a call thread)",
        read,
        "no-op call (no view, on the caller's task)",
        noop,
    );
    let (asleep, looking) = (hand_off(false), hand_off(true));
    row(
        "hand-off to a thread and back, the thread asleep",
        asleep,
        "both threads looking (sched_yield)",
        looking,
    );

    let bin = PathBuf::from(env!("CARGO_BIN_EXE_turngate"));
    let process_cache = tempfile::tempdir().unwrap();
    let cache_flag = ["--cache-dir", process_cache.path().to_str().unwrap()];
    first_call(&bin, work.path(), &cache_flag); // fills the cache
    let warm_process = measure(PROCESS_SAMPLES, || {
        first_call(&bin, work.path(), &cache_flag);
    });
    let shell_path = work.path().join("shell.txt");
    let shell = measure(PROCESS_SAMPLES, || {
        let status = Command::new("sh")
            .args(["-c", "printf %s \"$1\" > \"$2\"", "sh", &content])
            .arg(&shell_path)
            .status()
            .unwrap();
        assert!(status.success());
    });
    row(
        "first call of a new process, warm cache",
        warm_process,
        "process per call (sh printf >)",
        shell,
    );
    let empty_cache = median(
        (0..COLD_SAMPLES)
            .map(|_| {
                let cache = tempfile::tempdir().unwrap();
                first_call(
                    &bin,
                    work.path(),
                    &["--cache-dir", cache.path().to_str().unwrap()],
                )
            })
            .collect(),
    );
    row(
        "first call of a new process, empty cache",
        empty_cache,
        "process per call (sh printf >)",
        shell,
    );
    let cold_process = median(
        (0..COLD_SAMPLES)
            .map(|_| first_call(&bin, work.path(), &["--no-cache"]))
            .collect(),
    );
    row(
        "first call of a new process, no cache",
        cold_process,
        "process per call (sh printf >)",
        shell,
    );
}
