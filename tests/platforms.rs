//! One platform layer: what differs between operating systems lives in `host/src/platform/`, and the
//! macOS side of it compiles, checked here where no Mac is.
//!
//! `everything_compiles_for_apple_silicon` is part of the packages and release step (`.ci/run`'s second
//! command): it checks (`release/check-macos`, clippy with zig as the C compiler) the whole workspace,
//! every test and bench included, for `aarch64-apple-darwin`, about three minutes on two cores; the
//! same script checks `x86_64-apple-darwin` by hand (only the architecture differs, and no code asks
//! for it). Nothing here runs a macOS binary.

mod binding_support;

use std::path::Path;
use std::process::Command;

use binding_support::{as_from_a_shell, repo, run};

/// The words that ask which system the code is built for.
const SYSTEM_QUESTIONS: [&str; 3] = ["target_os", "target_env", "target_vendor"];

#[test]
fn nothing_outside_the_platform_layer_asks_which_system_it_runs_on() {
    let source = repo().join("host/src");
    let platform = source.join("platform");
    let mut asked = Vec::new();
    let mut files = 0;
    let mut pending = vec![source];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path != platform {
                    pending.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for (number, line) in text.lines().enumerate() {
                if SYSTEM_QUESTIONS.iter().any(|word| line.contains(word)) {
                    asked.push(format!("{}:{}: {}", shown(&path), number + 1, line.trim()));
                }
            }
        }
    }
    assert!(files > 50, "only {files} source files were read");
    assert!(
        asked.is_empty(),
        "outside host/src/platform/:\n{}",
        asked.join("\n")
    );
}

fn shown(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn everything_compiles_for_apple_silicon() {
    run(
        as_from_a_shell(&mut Command::new(repo().join("release/check-macos")))
            .args(["--arch", "aarch64"]),
        "release/check-macos --arch aarch64",
    );
}
