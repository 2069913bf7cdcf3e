//! The view's WASI 0.3 filesystem held to the standard's own tests: the filesystem tests of the WASI
//! test suite (WebAssembly/wasi-testsuite, `tests/rust/wasm32-wasip3`, built from the commit in
//! `tests/fixtures/wasi-testsuite/README.md`), each run as a command over a view whose root, and only
//! grant, is its test directory (`fs-tests.dir`), writable: the view's one preopen is that directory, as
//! the suite's own runner preopens it (`turngate::sandbox::run_wasi_command`).
//!
//! Every test must pass except the deliberate differences listed in [`DIFFERENCES`], each of which must
//! fail: a difference that starts passing means the list (and what the view promises) changed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use turngate::sandbox::run_wasi_command;
use turngate::{Limits, Root};

/// Tests the view fails on purpose, with why. Everything else in the suite passes.
const DIFFERENCES: &[(&str, &str)] = &[
    (
        "filesystem-hard-links",
        "the view makes no hard link (link-at is not-permitted, before its arguments are looked at): a \
         link would let an effect reach a file the approval never named",
    ),
    (
        "filesystem-is-same-object",
        "it makes a hard link to compare the two names' objects, and the view makes none",
    ),
    (
        "filesystem-metadata-hash",
        "it makes a hard link to compare the two names' hashes, and the view makes none",
    ),
    (
        "filesystem-rename",
        "it makes a symlink (symlink-at) to rename over, and the view makes none: a symlink a tool made \
         could point anywhere once applied",
    ),
    (
        "filesystem-stat",
        "writes are staged: set-times-at on a file copies it up into the call's staging, and a \
         descriptor opened before that first change keeps seeing the original, whose times did not \
         change (the call's later opens see the new ones)",
    ),
];

/// The built test commands.
fn suite() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/wasi-testsuite");
    let mut tests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "wasm"))
        .collect();
    tests.sort();
    tests
}

#[test]
fn the_wasi_testsuite_filesystem_tests_pass_over_a_view() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let limits = Limits {
        wall_time: Duration::from_secs(60),
        ..Limits::default()
    };
    let mut report = Vec::new();
    for test in suite() {
        let name = test.file_stem().unwrap().to_string_lossy().into_owned();
        let work = tempfile::tempdir().unwrap();
        // The suite's fixture directory (`fs-tests.dir`): two small files.
        let dir = work.path().join("fs-tests.dir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "test-a\n").unwrap();
        std::fs::write(dir.join("b.txt"), "test-b\n").unwrap();
        let before = (
            std::fs::read(dir.join("a.txt")).unwrap(),
            std::fs::read(dir.join("b.txt")).unwrap(),
        );
        let root = Root::open(&dir).unwrap();
        let bytes = std::fs::read(&test).unwrap();
        let run = runtime.block_on(run_wasi_command(&bytes, &root, limits));
        let (passed, detail) = match &run {
            Ok(run) => (
                run.exit == 0,
                format!(
                    "exit {}; stderr: {}",
                    run.exit,
                    String::from_utf8_lossy(&run.stderr).trim()
                ),
            ),
            Err(error) => (false, error.to_string()),
        };
        // Whatever the test wrote stayed in its view.
        assert_eq!(
            (
                std::fs::read(dir.join("a.txt")).unwrap(),
                std::fs::read(dir.join("b.txt")).unwrap()
            ),
            before,
            "{name}"
        );
        report.push((name, passed, detail));
    }
    for (name, passed, detail) in &report {
        eprintln!("{} {name}: {detail}", if *passed { "pass" } else { "FAIL" });
    }
    assert_eq!(report.len(), 14, "the suite's 14 filesystem tests");
    for (name, passed, detail) in &report {
        let difference = DIFFERENCES.iter().find(|(test, _)| test == name);
        match difference {
            None => assert!(passed, "{name} failed: {detail}"),
            Some((_, why)) => assert!(
                !passed,
                "{name} passes, but is listed as a difference: {why}"
            ),
        }
    }
}
