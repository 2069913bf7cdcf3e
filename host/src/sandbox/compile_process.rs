//! Compiling a component in a process of its own.
//!
//! A Cranelift compile peaks far above what it keeps. Compiling the bundled `search_files` (1 MiB of
//! wasm) holds at most 36 MiB of live allocations, yet the allocator's heap reaches 86 MiB resident
//! (113 MiB with two compile threads): each compiled function is kept until the end, between the
//! freed scratch of the functions compiled after it, so the heap fragments, and a process's peak is
//! what a desktop's many servers each pay at once (BENCHMARKS.md, "Memory and the first call of every
//! surface"). So the CLI compiles in a child: the running program again (`platform::own_program`; on
//! Linux this very build, even if its file was replaced since), given the component on stdin and the
//! cache directory and the component's digest as arguments; it ends if its server does
//! (`platform::end_with_this_thread`, `platform::end_with_parent`). The child compiles on an engine with the running
//! engine's settings (`engine.rs`), stores the code in the cache, and exits; the parent then maps the
//! entry, as a warm start does. The child inherits the calling thread's scheduling class, so a compile
//! done ahead stays in the background; its memory, and a compiler crash on hostile input, end with it.
//!
//! A library embedded in another program (the Python and Node packages) cannot start itself as a
//! compiler, and compiles in its own process on an engine apart.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use sha2::{Digest as _, Sha256};

use super::component_edition;
use super::engine::Compiler;
use crate::platform;

/// Where a toolbox compiles the components that are not in its cache yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileIn {
    /// In this process, on an engine made for the compile and dropped after it.
    #[default]
    ThisProcess,
    /// In a child process running this program with [`COMPILE_COMMAND`] as its first argument, which
    /// the program's `main` hands to [`compile_command`]. Only a toolbox with a cache compiles there
    /// (the code reaches the parent through the cache); without one, or when the child cannot be
    /// started, it compiles in this process.
    ChildProcess,
}

/// The first argument of the child a [`CompileIn::ChildProcess`] toolbox starts.
pub const COMPILE_COMMAND: &str = "__compile-component";

/// Exit status of a child that could not compile what it was given (the reason is on its stderr).
const REFUSED: u8 = 1;

/// The child's side of [`CompileIn::ChildProcess`]: `args` are the arguments after
/// [`COMPILE_COMMAND`] (the cache directory, the component's SHA-256), the component is on stdin.
/// Compiles it and stores the code in the cache; exits 0 when compiled (a cache that cannot be written
/// is only warned of: the parent then compiles in its own process), [`REFUSED`] with the reason on
/// stderr when not.
pub fn compile_command(args: &[OsString]) -> ExitCode {
    platform::end_with_parent();
    match compile_from_stdin(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            // Best effort: the parent reads stderr for the reason; a closed stderr changes nothing.
            let _ = writeln!(std::io::stderr(), "{reason}");
            ExitCode::from(REFUSED)
        }
    }
}

fn compile_from_stdin(args: &[OsString]) -> Result<(), String> {
    let [dir, sha256] = args else {
        return Err(format!(
            "usage: {COMPILE_COMMAND} CACHE_DIR SHA256 < COMPONENT"
        ));
    };
    let sha256 = sha256.to_str().ok_or("the digest is not UTF-8")?;
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the component: {e}"))?;
    if hex::encode(Sha256::digest(&bytes)) != sha256 {
        return Err(format!(
            "the component on stdin is not the one of SHA-256 {sha256}"
        ));
    }
    let edition = component_edition(&bytes).map_err(|e| e.to_string())?;
    crate::test_hooks::hold_compile();
    let compiler = Compiler::new(edition).map_err(|e| format!("{e:#}"))?;
    let cache = compiler.cache_in(Path::new(dir));
    let code = compiler
        .compile(sha256, &bytes)
        .map_err(|e| format!("{e:#}"))?;
    cache.store_code(sha256, &code);
    Ok(())
}

/// Why compiling in a child did not give the parent its code.
pub(super) enum ChildCompile {
    /// The child could not be started: compile in this process instead.
    NotStarted(std::io::Error),
    /// The child refused the component, or died compiling it.
    Failed(String),
}

/// Compiles the component in `bytes` (whose SHA-256 is `sha256`) into the cache in `dir` in a child
/// process (see the module docs).
pub(super) fn compile_in_child(dir: &Path, sha256: &str, bytes: &[u8]) -> Result<(), ChildCompile> {
    let mut command = Command::new(platform::own_program().map_err(ChildCompile::NotStarted)?);
    command
        .arg(COMPILE_COMMAND)
        .arg(dir)
        .arg(sha256)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // A server that exits (its client gone) while compiling ahead leaves no compiler running behind it.
    platform::end_with_this_thread(&mut command);
    let mut child = command.spawn().map_err(ChildCompile::NotStarted)?;
    // The child reads all of stdin before it writes anything, so this cannot block on its stderr; a
    // child that died before reading is reported by its status below.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(bytes);
    }
    let output = child
        .wait_with_output()
        .map_err(|e| ChildCompile::Failed(format!("waiting for the compiling process: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(ChildCompile::Failed(match said.trim() {
        "" => format!("the compiling process ended with {}", output.status),
        reason => reason.to_owned(),
    }))
}
