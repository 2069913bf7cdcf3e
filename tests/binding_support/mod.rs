//! What the binding tests (`tests/python.rs`, `tests/node.rs`) and the bindings bench share: commands
//! that fail with their output, and nested cargo builds that behave as builds from a shell.

#![allow(dead_code)] // each user takes its own subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The repository's top directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `command`, panicking with its output unless it succeeds; answers its stdout and stderr.
pub fn run(command: &mut Command, what: &str) -> String {
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

/// `command` without the variables cargo sets for a test or bench run (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, `OUT_DIR`, ...): some build scripts watch them (ring's watches both), so a nested
/// build that saw them would rebuild those crates, and the next build from a shell would rebuild them
/// again.
pub fn as_from_a_shell(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let cargo_run_var = [
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
        if cargo_run_var {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// `cargo`, as the build running this test or bench found it, started from the repository's top as
/// from a shell (see [`as_from_a_shell`]).
pub fn cargo() -> Command {
    let mut command = Command::new(env!("CARGO"));
    as_from_a_shell(&mut command).current_dir(repo());
    command
}

/// The shared library cargo built for the target `library`, from the output of a `cargo build
/// --message-format=json`.
pub fn built_library(messages: &str, library: &str) -> PathBuf {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == library)
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| {
            f.extension()
                .is_some_and(|e| e == "so" || e == "dylib" || e == "dll")
        })
        .unwrap_or_else(|| panic!("cargo built no {library} library"))
}

/// The Python package as `pip install ./python` lays it out: the package's Python sources with the
/// release extension module beside them, in a directory put first on `PYTHONPATH`.
#[allow(clippy::disallowed_methods)] // set-up outside any root
pub fn python_package(extension: &Path, into: &Path) -> PathBuf {
    let package = into.join("turngate");
    std::fs::create_dir_all(&package).unwrap();
    for entry in std::fs::read_dir(repo().join("python/turngate")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), package.join(entry.file_name())).unwrap();
    }
    std::fs::copy(extension, package.join("_turngate.abi3.so")).unwrap();
    into.to_path_buf()
}

/// Builds the Python extension module and the Node addon in the release profile (the one `pip install
/// ./python` and `npm install ./node` build); answers the two libraries' paths.
pub fn release_packages() -> (PathBuf, PathBuf) {
    let messages = run(
        cargo().args([
            "build",
            "--release",
            "-p",
            "turngate-python",
            "-p",
            "turngate-node",
            "--message-format=json",
        ]),
        "cargo build --release -p turngate-python -p turngate-node",
    );
    (
        built_library(&messages, "_turngate"),
        built_library(&messages, "turngate_node"),
    )
}
