//! The Python package (`python/`) tested from Python: `python/tests/setup.sh` makes a virtual environment
//! under cargo's per-target temporary directory with the pinned maturin, pytest and official SDKs
//! (`python/tests/requirements.txt`), `maturin develop` builds the package into it in the dev profile,
//! sharing the workspace's target directory (only pyo3's build script and the extension module itself
//! are compiled again), and pytest runs `python/tests/`. Any pytest failure, or no test collected
//! (pytest's exit code 5), fails this test.
//!
//! The first run needs `python3` (3.11 or later, with venv) and PyPI; later runs find the venv
//! installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn run(command: &mut Command, what: &str) -> String {
    let started = Instant::now();
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    eprintln!("{what}: done in {:.1?}", started.elapsed());
    format!("{stdout}{stderr}")
}

/// `command` without the variables cargo sets for a test run (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`,
/// `OUT_DIR`, ...): some build scripts watch them (ring's watches both), so a nested build that saw them
/// would rebuild those crates, and the next build from a shell would rebuild them again.
fn as_from_a_shell(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let cargo_test_var = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
            || name == "OUT_DIR";
        if cargo_test_var {
            command.env_remove(name.as_ref());
        }
    }
    command
}

#[test]
fn python_package_tests_pass() {
    let dest = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-tests");
    run(
        Command::new("bash")
            .arg(repo().join("python/tests/setup.sh"))
            .arg(&dest),
        "python/tests/setup.sh (needs python3 with venv, and PyPI)",
    );
    let venv = dest.join("venv");
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    run(
        as_from_a_shell(&mut Command::new(venv.join("bin/maturin")))
            .args(["develop", "--manifest-path"])
            .arg(repo().join("python/Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path),
        "maturin develop (dev profile)",
    );
    let report = run(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE"])
            .arg(repo().join("python/tests"))
            .current_dir(repo().join("python/tests"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path)
            .env(
                "TURNGATE_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
            )
            .env(
                "TURNGATE_TEST_GUEST_HOSTILE_RW",
                env!("TURNGATE_TEST_GUEST_HOSTILE_RW"),
            )
            .env(
                "TURNGATE_TEST_GUEST_NOT_A_TOOL",
                env!("TURNGATE_TEST_GUEST_NOT_A_TOOL"),
            ),
        "pytest python/tests",
    );
    eprintln!("{report}");
}
