//! The cost of least authority (a view per call, staged effects, the journal) against native code doing
//! the same work in the same run; prints Markdown tables. `cargo bench --bench effects`.
//!
//! * A turn of 500 `write_file` calls (1 KiB each, distinct files) through a `turngate run` process,
//!   against a native loop doing the same durable steps per file (temporary file, write, fsync,
//!   rename), and against the same turn through `process_turn` in-process; then both in-process again
//!   while another process writes to the same filesystem (a loop of buffered 200 MiB `dd` writes, as
//!   a build or a package install would).
//! * `edit_file` on a 1 KiB and a 1 MiB file (warm, in-process) against a native edit (read, replace,
//!   temporary file, write, fsync, rename).
//! * `search_files` over a 1,000-file tree against a native walk plus regex.
//! * The cost of the view for a one-file call: `read_file` of a one-byte file against a tool that
//!   declares no path (so it gets no view), and against a native open and read.
//!
//! Medians and p90 over the samples; the ratio column is turngate / baseline at the median.
//!
//! `EFFECTS_ROWS=turn,writer,edit,search,view` runs only the rows named (all by default).
//! `EFFECTS_ROOTS=folding` puts every root and every baseline's directory on the tests' file system
//! that folds case and Unicode forms (`tests/testfs`, FUSE, mounted by this process; run as root):
//! compare its rows with the ordinary run's to see what a folding root costs (the baselines show what
//! the FUSE file system itself costs).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{native_durable_write, row, samples, write_turn};
use turngate::providers::TurnDecoder;
use turngate::{CacheSetting, Policy, Provider, Root, Toolbox, TurnOptions, process_turn};

const TURN_CALLS: usize = 500;
const TURN_RUNS: usize = 9;
const EDIT_SMALL_SAMPLES: usize = 300;
const EDIT_LARGE_SAMPLES: usize = 40;
const SEARCH_FILES: usize = 1000;
const SEARCH_SAMPLES: usize = 30;
const VIEW_SAMPLES: usize = 2000;

/// A new directory for a root or a baseline, where `EFFECTS_ROOTS` says.
fn workdir() -> tempfile::TempDir {
    static BASE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(|| match std::env::var("EFFECTS_ROOTS").as_deref() {
        Ok("folding") => turngate_testfs::folding_dir().to_path_buf(),
        Ok(other) => panic!("EFFECTS_ROOTS={other}: only `folding` is known"),
        Err(_) => std::env::temp_dir(),
    });
    tempfile::tempdir_in(base).unwrap()
}

/// Whether the rows named `name` run (`EFFECTS_ROWS`, all when unset).
fn runs(name: &str) -> bool {
    std::env::var("EFFECTS_ROWS").map_or(true, |rows| rows.split(',').any(|row| row == name))
}

/// The native loop's time for one turn's files, in a new directory.
fn native_turn(content: &str) -> Duration {
    let dir = workdir();
    let start = Instant::now();
    for i in 0..TURN_CALLS {
        native_durable_write(dir.path(), &format!("f{i}.txt"), content.as_bytes());
    }
    start.elapsed()
}

/// One turn through `process_turn`, in a new root.
fn in_process_turn(toolbox: &Toolbox, runtime: &tokio::runtime::Runtime) -> Duration {
    let root_dir = workdir();
    let root = Root::open(root_dir.path()).unwrap();
    let mut decoder = TurnDecoder::new(Provider::Anthropic);
    decoder.feed(write_turn(TURN_CALLS).as_bytes());
    let turn = decoder.finish();
    let start = Instant::now();
    let report = runtime.block_on(process_turn(
        toolbox,
        &root,
        &Policy::allow_all(),
        turn,
        TurnOptions::default(),
    ));
    let elapsed = start.elapsed();
    assert!(report.all_ok());
    elapsed
}

/// Another process writing to the filesystem the temporary directories are on, until dropped.
struct Writer {
    shell: std::process::Child,
    /// Where it writes; removed after it stops.
    _dir: tempfile::TempDir,
}

impl Writer {
    fn start() -> Writer {
        let dir = workdir();
        let target = dir.path().join("writer.bin");
        let shell = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while :; do dd if=/dev/zero of='{}' bs=1M count=200 status=none; done",
                target.display()
            ))
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        Writer { shell, _dir: dir }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

fn writer_rows(toolbox: &Toolbox, runtime: &tokio::runtime::Runtime) {
    let content = "x".repeat(1023) + "\n";
    let _writer = Writer::start();
    let mut in_process = Vec::new();
    let mut native = Vec::new();
    for _ in 0..TURN_RUNS {
        native.push(native_turn(&content));
        in_process.push(in_process_turn(toolbox, runtime));
    }
    row(
        "the same turn in-process, another process writing to the filesystem",
        &in_process,
        "native loop, the same writer",
        &native,
    );
}

fn turn_rows(toolbox: &Toolbox, cache: &Path, runtime: &tokio::runtime::Runtime) {
    let bin = Path::new(env!("CARGO_BIN_EXE_turngate"));
    let stream_dir = workdir();
    let stream = stream_dir.path().join("turn.sse");
    std::fs::write(&stream, write_turn(TURN_CALLS)).unwrap();
    let content = "x".repeat(1023) + "\n";
    let mut ours = Vec::new();
    let mut native = Vec::new();
    let mut in_process = Vec::new();
    for _ in 0..TURN_RUNS {
        let root = workdir();
        let start = Instant::now();
        let status = Command::new(bin)
            .args(["run", "--provider", "anthropic", "--cache-dir"])
            .arg(cache)
            .arg("--root")
            .arg(root.path())
            .arg(&stream)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        ours.push(start.elapsed());
        assert!(status.success());
        assert!(
            root.path()
                .join(format!("f{}.txt", TURN_CALLS - 1))
                .exists()
        );

        native.push(native_turn(&content));
        in_process.push(in_process_turn(toolbox, runtime));
    }
    row(
        "500 write_file (1 KiB, distinct files), `turngate run` process",
        &ours,
        "native loop: temp, write, fsync, rename",
        &native,
    );
    row(
        "the same turn, `process_turn` in-process",
        &in_process,
        "native loop: temp, write, fsync, rename",
        &native,
    );
}

#[allow(clippy::disallowed_methods)] // the baseline is plain std::fs on purpose
fn edit_rows(toolbox: &Toolbox, runtime: &tokio::runtime::Runtime) {
    for (label, size, count) in [
        ("1 KiB", 1024usize, EDIT_SMALL_SAMPLES),
        ("1 MiB", 1 << 20, EDIT_LARGE_SAMPLES),
    ] {
        let body = "lorem ipsum dolor sit amet\n".repeat(size / 27);
        let work = workdir();
        std::fs::write(work.path().join("doc.txt"), format!("MARK-0\n{body}")).unwrap();
        let root = Root::open(work.path()).unwrap();
        let policy = Policy::allow_all();
        let mut turn = 0usize;
        let ours = samples(count, || {
            let input = json!({"path": "doc.txt", "old_string": format!("MARK-{turn}\n"), "new_string": format!("MARK-{}\n", turn + 1)});
            turn += 1;
            let outcome =
                runtime.block_on(toolbox.call(&root, &policy, "edit_file", &input.to_string()));
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        });
        let native_dir = workdir();
        let path = native_dir.path().join("doc.txt");
        std::fs::write(&path, format!("MARK-0\n{body}")).unwrap();
        let mut turn = 0usize;
        let native = samples(count, || {
            let text = std::fs::read_to_string(&path).unwrap();
            let (old, new) = (format!("MARK-{turn}\n"), format!("MARK-{}\n", turn + 1));
            turn += 1;
            assert_eq!(text.matches(&old).count(), 1);
            let edited = text.replacen(&old, &new, 1);
            native_durable_write(native_dir.path(), "doc.txt", edited.as_bytes());
        });
        row(
            &format!("edit_file on a {label} file, warm, in-process"),
            &ours,
            "native: read, replace, temp, write, fsync, rename",
            &native,
        );
    }
}

#[allow(clippy::disallowed_methods)] // the baseline is plain std::fs on purpose
fn search_rows(toolbox: &Toolbox, runtime: &tokio::runtime::Runtime) {
    let work = workdir();
    for i in 0..SEARCH_FILES {
        let dir = work.path().join(format!("d{}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        let needle = if i % 50 == 0 { "needle_42 here\n" } else { "" };
        let text = format!("{}{needle}", "some ordinary line of text\n".repeat(40));
        std::fs::write(dir.join(format!("f{i}.txt")), text).unwrap();
    }
    let root = Root::open(work.path()).unwrap();
    let policy = Policy::allow_all();
    let input = json!({"pattern": "needle_[0-9]+"}).to_string();
    let ours = samples(SEARCH_SAMPLES, || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "search_files", &input));
        let found = outcome.result.unwrap();
        assert_eq!(
            found.matches("needle_42").count(),
            SEARCH_FILES / 50,
            "{found}"
        );
    });
    let regex = regex::Regex::new("needle_[0-9]+").unwrap();
    let native = samples(SEARCH_SAMPLES, || {
        let mut hits = 0;
        let mut stack = vec![work.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                } else {
                    let text = std::fs::read_to_string(entry.path()).unwrap();
                    hits += text.lines().filter(|l| regex.is_match(l)).count();
                }
            }
        }
        assert_eq!(hits, SEARCH_FILES / 50);
    });
    row(
        "search_files over 1,000 files (43 KB each dir of 100)",
        &ours,
        "native walk + regex",
        &native,
    );
}

#[allow(clippy::disallowed_methods)] // the baseline is plain std::fs on purpose
fn view_rows(toolbox: &Toolbox, runtime: &tokio::runtime::Runtime) {
    let work = workdir();
    std::fs::write(work.path().join("one.txt"), "x").unwrap();
    let root = Root::open(work.path()).unwrap();
    let policy = Policy::allow_all();
    let read = samples(VIEW_SAMPLES, || {
        let outcome =
            runtime.block_on(toolbox.call(&root, &policy, "read_file", r#"{"path":"one.txt"}"#));
        assert_eq!(outcome.result.unwrap(), "x");
    });
    let noop = samples(VIEW_SAMPLES, || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "noop", "{}"));
        assert!(outcome.result.is_ok());
    });
    let path = work.path().join("one.txt");
    let native = samples(VIEW_SAMPLES, || {
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    });
    row(
        "read_file of a 1-byte file (view, one open, one read)",
        &read,
        "a tool with no path (no view)",
        &noop,
    );
    row(
        "read_file of a 1-byte file",
        &read,
        "native open + read",
        &native,
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache.path().to_path_buf()))
                .component_file(env!("TURNGATE_TEST_GUEST_NOOP"))
                .unwrap()
                .build(),
        )
        .unwrap();
    println!(
        "| case | turngate (median) | turngate (p90) | baseline | baseline (median) | baseline (p90) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    if runs("turn") {
        turn_rows(&toolbox, cache.path(), &runtime);
    }
    if runs("writer") {
        writer_rows(&toolbox, &runtime);
    }
    if runs("edit") {
        edit_rows(&toolbox, &runtime);
    }
    if runs("search") {
        search_rows(&toolbox, &runtime);
    }
    if runs("view") {
        view_rows(&toolbox, &runtime);
    }
}
