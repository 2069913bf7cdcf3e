//! The attacks shared by the `hostile_rw` and `hostile_ro` test guests.
//!
//! Each call performs the attack named by `attack`. Paths come from `arg`, which is deliberately
//! not a declared path field, so the host cannot check it: only the sandbox stands between it and
//! the outside (`../outside/secret.txt`, `/etc/passwd`). Without `arg`, the declared `path` field
//! is used, to test what the root's mount allows through an in-scope path. A success that should
//! be impossible is reported as `ESCAPED ...`.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use turngate_guest::{Access, Descriptor, ToolError, describe, io_error, parse_input};

/// Bytes allocated by `alloc` without a `size`.
const DEFAULT_ALLOC: u64 = 1 << 30;
/// Bytes printed by `print` and returned by `big_result` without a `size`.
const DEFAULT_OUTPUT: u64 = 10_000_000;
/// Calls this instance has served, for the `counter` attack.
static CALLS: AtomicU64 = AtomicU64::new(0);
/// Chunk size of `print`.
const PRINT_CHUNK: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    attack: String,
    arg: Option<String>,
    size: Option<u64>,
    path: Option<String>,
}

impl Input {
    /// The path to attack: `arg`, else the declared `path`.
    fn target(&self) -> Result<&Path, ToolError> {
        self.arg
            .as_deref()
            .or(self.path.as_deref())
            .map(Path::new)
            .ok_or_else(|| {
                ToolError::InvalidInput(format!("attack {} needs arg or path", self.attack))
            })
    }

    fn size(&self, default: u64) -> Result<usize, ToolError> {
        usize::try_from(self.size.unwrap_or(default))
            .map_err(|_| ToolError::InvalidInput("size does not fit in memory".into()))
    }
}

/// The descriptor of a hostile guest named `name` whose `path` field has `access`.
pub fn descriptor(name: &str, access: Access) -> Descriptor {
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "attack": {
                "type": "string",
                "description": "noop, counter, stack_residue, grown_residue, env, read, read_repeatedly, write, append, create_new, mkdir, rename, list, walk, write_all, write_all_then_panic, write_all_then_spin, symlink, spin, sleep, alloc, print, big_result or panic."
            },
            "arg": {
                "type": "string",
                "description": "Path the attack uses, not checked by the host (not a declared path field)."
            },
            "size": {
                "type": "integer",
                "minimum": 0,
                "description": "Bytes for alloc, print and big_result; reads for read_repeatedly."
            },
            "path": {
                "type": "string",
                "description": "Declared path field: the host checks it and mounts the root for its access. Used when arg is absent."
            }
        },
        "required": ["attack"],
        "additionalProperties": false
    });
    describe(
        name,
        "Test guest that tries to escape turngate's sandbox. Never bundled.",
        &schema,
        &[("/path", access)],
    )
}

/// Runs the attack `input` names.
pub fn call(input: &str) -> Result<String, ToolError> {
    let input: Input = parse_input(input)?;
    match input.attack.as_str() {
        "noop" => Ok("ok".into()),
        // What the sandbox must not hand over: environment variables and arguments. (The network is not
        // linked at all: `hostile_net`, which imports it, is refused at load.)
        "env" => Ok(format!(
            "vars={:?} args={:?}",
            std::env::vars().collect::<Vec<_>>(),
            std::env::args().collect::<Vec<_>>()
        )),
        // State that would leak between calls if an instance were reused: each fresh instance says 1.
        "counter" => Ok(CALLS
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
            .to_string()),
        "stack_residue" => Ok(stack_residue()),
        "grown_residue" => Ok(grown_residue()),
        "read" => {
            let target = input.target()?;
            let content = fs::read_to_string(target).map_err(|err| io_error(target, err))?;
            Ok(format!("ESCAPED read: {content}"))
        }
        // Reads `arg` `size` times and answers how often each outcome came back, as JSON
        // (`{"content or error": count}`): what a tool sees of a file that is swapped while it reads.
        "read_repeatedly" => {
            let target = input.target()?;
            let mut seen = std::collections::BTreeMap::<String, u64>::new();
            for _ in 0..input.size(1)? {
                let outcome = match fs::read_to_string(target) {
                    Ok(content) => content,
                    Err(err) => format!("error: {}", io_error(target, err)),
                };
                *seen.entry(outcome).or_default() += 1;
            }
            Ok(serde_json::to_string(&seen).unwrap_or_default())
        }
        // Exclusive create, `mkdir` and a rename from `path` to `arg`: their errors must not tell whether
        // a name the call may not see exists.
        "create_new" => {
            let target = input.target()?;
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(target)
                .map_err(|err| io_error(target, err))?;
            Ok(format!("created {}", target.display()))
        }
        "mkdir" => {
            let target = input.target()?;
            fs::create_dir(target).map_err(|err| io_error(target, err))?;
            Ok(format!("made {}", target.display()))
        }
        "rename" => {
            let (Some(from), Some(to)) = (input.path.as_deref(), input.arg.as_deref()) else {
                return Err(ToolError::InvalidInput("rename needs path and arg".into()));
            };
            fs::rename(from, to).map_err(|err| io_error(Path::new(to), err))?;
            Ok(format!("renamed {from} to {to}"))
        }
        "write" => {
            let target = input.target()?;
            fs::write(target, "PWNED").map_err(|err| io_error(target, err))?;
            Ok(format!("ESCAPED write to {}", target.display()))
        }
        "append" => {
            let target = input.target()?;
            OpenOptions::new()
                .append(true)
                .open(target)
                .and_then(|mut file| file.write_all(b"PWNED"))
                .map_err(|err| io_error(target, err))?;
            Ok(format!("ESCAPED append to {}", target.display()))
        }
        "list" => {
            let target = input.target()?;
            let mut names = Vec::new();
            for entry in fs::read_dir(target).map_err(|err| io_error(target, err))? {
                let entry = entry.map_err(|err| io_error(target, err))?;
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names.join("\n"))
        }
        // Everything the tool can see from `arg` down, with the content of every file it can read.
        "walk" => {
            let target = input.target()?;
            let mut seen = Vec::new();
            walk(target, &mut seen);
            Ok(seen.join("\n"))
        }
        // Writes `PWNED` to every comma-separated path of `arg`; then returns, traps or spins past the
        // time limit. What a call that trapped or timed out wrote must not apply.
        "write_all" | "write_all_then_panic" | "write_all_then_spin" => {
            let targets = input.arg.clone().unwrap_or_default();
            for target in targets.split(',') {
                fs::write(target, "PWNED").map_err(|err| io_error(Path::new(target), err))?;
            }
            match input.attack.as_str() {
                "write_all_then_panic" => panic!("trapped after writing {targets}"),
                "write_all_then_spin" => spin(),
                _ => Ok(format!("wrote {targets}")),
            }
        }
        // `std::os::wasi::fs::symlink_path` is unstable (`wasi_ext`) and std has no other way to
        // make a symlink on WASI, so this attack is not available; plant links from the host.
        "symlink" => Err(ToolError::Failed(
            "symlink attack not available: std has no stable symlink on wasm32-wasip2".into(),
        )),
        "spin" => spin(),
        "sleep" => {
            std::thread::sleep(Duration::from_secs(3600));
            Ok("slept an hour".into())
        }
        "alloc" => {
            let size = input.size(DEFAULT_ALLOC)?;
            let block = std::hint::black_box(vec![1u8; size]);
            let sum: u64 = block.iter().map(|&b| u64::from(b)).sum();
            Ok(format!("allocated {size} bytes, sum {sum}"))
        }
        "print" => {
            let size = input.size(DEFAULT_OUTPUT)?;
            let chunk = vec![b'x'; PRINT_CHUNK];
            let mut stdout = std::io::stdout();
            let mut left = size;
            while left > 0 {
                let (part, _) = chunk.split_at(left.min(PRINT_CHUNK));
                // Like `println!`: a failed write to stdout is a panic.
                if let Err(err) = stdout.write_all(part) {
                    panic!("failed printing to stdout: {err}");
                }
                left -= part.len();
            }
            Ok(format!("printed {size} bytes"))
        }
        "big_result" => Ok("x".repeat(input.size(DEFAULT_OUTPUT)?)),
        "panic" => panic!("hostile panic: {}", input.arg.unwrap_or_default()),
        other => Err(ToolError::InvalidInput(format!("unknown attack: {other}"))),
    }
}

/// Spins until the sandbox stops it.
fn spin() -> ! {
    let mut counter = 0u64;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

/// Lists `dir` recursively into `seen` as `path` or `path: content` lines; errors become lines too.
fn walk(dir: &Path, seen: &mut Vec<String>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            seen.push(format!("{}: cannot list: {err}", dir.display()));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => {
                seen.push(format!("{}/", path.display()));
                walk(&path, seen);
            }
            _ => match fs::read_to_string(&path) {
                Ok(content) => seen.push(format!("{}: {}", path.display(), content.trim_end())),
                Err(err) => seen.push(format!("{}: cannot read: {err}", path.display())),
            },
        }
    }
}

/// Grows linear memory by 16 pages (beyond the megabyte a pooled slot keeps resident), then reads
/// and marks the first word of what it grew. Answers `<word read> at <address>`; a call in a fresh
/// instance never reads the mark a previous call left, though the pool leaves grown memory mapped
/// between the calls of a slot (`sandbox/mod.rs`, `engine_with`).
#[allow(unsafe_code)] // reading memory no Rust object owns is the point of this attack
fn grown_residue() -> String {
    const PAGE: usize = 64 << 10;
    let pages = core::arch::wasm32::memory_grow(0, 16);
    if pages == usize::MAX {
        return "cannot grow".into();
    }
    // SAFETY: the 16 pages from there were just grown, and nothing (the allocator included) knows of
    // them.
    unsafe { read_then_mark(pages * PAGE) }
}

/// What `stack_residue` and `grown_residue` leave behind: "turngate" in ASCII.
const RESIDUE_MARK: u64 = 0x7475_726e_6761_7465;

/// Reads, then marks, a word of linear memory 32 KiB below the frame in use: stack that this call
/// does not use, at the low addresses a pooled slot keeps resident between calls. Answers
/// `<word read> at <address>`; a call in a fresh instance never reads the mark a previous call left.
#[inline(never)]
#[allow(unsafe_code)] // reading memory no Rust object owns is the point of this attack
fn stack_residue() -> String {
    let here = 0u8;
    let address = (std::ptr::addr_of!(here) as usize).saturating_sub(32 << 10) & !7;
    // SAFETY: on wasm32 every address below the memory's size is linear memory, and this one is
    // in the stack region below every frame of the call, which nothing else uses meanwhile.
    unsafe { read_then_mark(address) }
}

/// Reads the word at `address`, then writes [`RESIDUE_MARK`] there. Answers `<word read> at <address>`.
///
/// # Safety
///
/// `address` is 8-byte aligned, below the memory's size, and no Rust object uses the word there.
#[allow(unsafe_code)]
unsafe fn read_then_mark(address: usize) -> String {
    let word = address as *mut u64;
    // SAFETY: the caller's promise.
    let seen = unsafe {
        let seen = std::ptr::read_volatile(word);
        std::ptr::write_volatile(word, RESIDUE_MARK);
        seen
    };
    format!("{seen} at {address}")
}
