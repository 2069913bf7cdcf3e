//! The Python package (`python/`) tested from Python: `python/tests/setup.sh` makes a virtual environment
//! under cargo's per-target temporary directory with the pinned maturin, pytest and official SDKs
//! (`python/tests/requirements.txt`), `maturin develop` builds the package into it in the dev profile,
//! sharing the workspace's target directory (only pyo3's build script and the extension module itself
//! are compiled again), and pytest runs `python/tests/`. Any pytest failure, or no test collected
//! (pytest's exit code 5), fails this test.
//!
//! The first run needs `python3` (3.11 or later, with venv) and PyPI; later runs find the venv
//! installed. Part of the packages and release step (`.ci/run`'s second command, which the README
//! names), not of `cargo test --workspace`: building the package and installing its test dependencies
//! take most of four minutes on two cores. `TURNGATE_TEST_BIN` is this build's `turngate`, which installs the tools the registry tests
//! load; `TURNGATE_TEST_FOLDING_DIR` is a directory on the test file system that folds names, mounted
//! by this process for as long as pytest runs (`test_folding.py`).

mod binding_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use binding_support::{as_from_a_shell, repo, run};

#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
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
                "TURNGATE_TEST_GUEST_HOSTILE_RW_P3",
                env!("TURNGATE_TEST_GUEST_HOSTILE_RW_P3"),
            )
            .env("TURNGATE_TEST_BIN", env!("CARGO_BIN_EXE_turngate"))
            .env("TURNGATE_TEST_FOLDING_DIR", turngate_testfs::folding_dir())
            .env(
                "TURNGATE_TEST_GUEST_NOT_A_TOOL",
                env!("TURNGATE_TEST_GUEST_NOT_A_TOOL"),
            ),
        "pytest python/tests",
    );
    eprintln!("{report}");
}
