//! The attacks of `hostile_attacks.rs`, made through `wasi:filesystem@0.3.0` from an async `call`: the
//! WASI 0.3 twins of the `hostile_rw` and `hostile_ro` test guests (`hostile_rw_p3`, `hostile_ro_p3`).
//!
//! Each call performs the attack named by `attack` on `arg` (not a declared path field: only the
//! sandbox stands between it and the outside), else on the declared `path`. A success that should be
//! impossible is reported as `ESCAPED ...`. Paths are opened from the one preopened directory, as a
//! libc would: a leading `/` names the preopen itself. The crate that includes this file names the tool
//! (`crate::NAME`) and its access (`crate::WRITE`).

#![allow(unsafe_code)] // what `wit_bindgen::generate!` expands to

mod bindings {
    #![allow(missing_docs)]
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "async-tool",
    });
}

use bindings::turngate::tool::types::{Access, Descriptor as ToolDescriptor, PathParam, ToolError};
use serde::Deserialize;
use wasip3::filesystem::types::{Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    attack: String,
    arg: Option<String>,
    path: Option<String>,
    size: Option<u64>,
}

impl Input {
    /// The path to attack: `arg`, else the declared `path`, relative to the preopen.
    fn target(&self) -> Result<String, ToolError> {
        self.arg
            .as_deref()
            .or(self.path.as_deref())
            .map(|path| path.trim_start_matches('/').to_owned())
            .ok_or_else(|| ToolError::InvalidInput(format!("attack {} needs arg or path", self.attack)))
    }
}

struct Hostile;

impl bindings::Guest for Hostile {
    fn describe() -> ToolDescriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "attack": {"type": "string"},
                "arg": {"type": "string"},
                "path": {"type": "string"},
                "size": {"type": "integer", "minimum": 0}
            },
            "required": ["attack"],
            "additionalProperties": false
        });
        ToolDescriptor {
            name: crate::NAME.into(),
            description: "Tries to escape the sandbox through WASI 0.3 (a test guest).".into(),
            input_schema: schema.to_string(),
            paths: vec![PathParam {
                pointer: "/path".into(),
                access: if crate::WRITE { Access::Write } else { Access::Read },
            }],
        }
    }

    async fn call(input: String) -> Result<String, ToolError> {
        let input: Input = serde_json::from_str(&input)
            .map_err(|e| ToolError::InvalidInput(format!("bad input: {e}")))?;
        attack(&input).await
    }
}

bindings::export!(Hostile with_types_in bindings);

/// The error of `code` on `path`, in the words `turngate_guest::io_error` gives a 0.2 one.
fn failed(path: &str, code: ErrorCode) -> ToolError {
    let words = match &code {
        ErrorCode::NoEntry => "no such file or directory".to_owned(),
        ErrorCode::Access | ErrorCode::NotPermitted => "permission denied".to_owned(),
        ErrorCode::ReadOnly => "read-only file system".to_owned(),
        ErrorCode::Exist => "file exists".to_owned(),
        ErrorCode::NotDirectory => "not a directory".to_owned(),
        ErrorCode::IsDirectory => "is a directory".to_owned(),
        ErrorCode::NotEmpty => "directory not empty".to_owned(),
        ErrorCode::CrossDevice => "cross-device link".to_owned(),
        ErrorCode::Loop => "too many levels of symbolic links".to_owned(),
        ErrorCode::InsufficientSpace => "no space left on device".to_owned(),
        ErrorCode::BadDescriptor => "bad file descriptor".to_owned(),
        other => format!("{other:?}"),
    };
    let message = format!("{path}: {words}");
    match code {
        ErrorCode::NoEntry => ToolError::NotFound(message),
        ErrorCode::Access | ErrorCode::NotPermitted | ErrorCode::ReadOnly => ToolError::Denied(message),
        _ => ToolError::Failed(message),
    }
}

/// The preopened directory (the root's view).
fn root() -> Result<Descriptor, ToolError> {
    wasip3::filesystem::preopens::get_directories()
        .into_iter()
        .next()
        .map(|(dir, _)| dir)
        .ok_or_else(|| ToolError::Denied("no preopened directory".into()))
}

async fn open(path: &str, open_flags: OpenFlags, flags: DescriptorFlags) -> Result<Descriptor, ToolError> {
    root()?
        .open_at(PathFlags::SYMLINK_FOLLOW, path.to_owned(), open_flags, flags)
        .await
        .map_err(|code| failed(path, code))
}

/// The whole file at `path`, as [`read_all`] reads it.
async fn read(path: &str) -> Result<Vec<u8>, ToolError> {
    let file = open(path, OpenFlags::empty(), DescriptorFlags::READ).await?;
    read_all(&file, path).await
}

/// The whole of `file` (opened at `path`), read into a buffer of its size (as `std::fs::read` does for
/// a 0.2 guest), one stream read after another until the stream ends.
async fn read_all(file: &Descriptor, path: &str) -> Result<Vec<u8>, ToolError> {
    let size = file.stat().await.map_err(|code| failed(path, code))?.size;
    let (mut stream, done) = file.read_via_stream(0);
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    loop {
        if content.len() == content.capacity() {
            content.reserve(content.capacity().max(4096));
        }
        let (result, buffer) = stream.read(content).await;
        content = buffer;
        if !matches!(result, wasip3::wit_bindgen::StreamResult::Complete(_)) {
            break;
        }
    }
    drop(stream);
    done.await.map_err(|code| failed(path, code))?;
    Ok(content)
}

/// The whole file as text, as `std::fs::read_to_string` gives it to a 0.2 guest (UTF-8 checked once,
/// not replaced byte by byte).
async fn read_to_string(path: &str) -> Result<String, ToolError> {
    String::from_utf8(read(path).await?)
        .map_err(|_| ToolError::Failed(format!("{path}: stream did not contain valid UTF-8")))
}

/// Writes `data` through a stream at `offset`, or appended (`None`).
async fn write_through(file: &Descriptor, path: &str, data: &[u8], offset: Option<u64>) -> Result<(), ToolError> {
    let (mut writer, reader) = wasip3::wit_stream::new::<u8>();
    let done = match offset {
        Some(offset) => file.write_via_stream(reader, offset),
        None => file.append_via_stream(reader),
    };
    let _ = writer.write_all(data.to_vec()).await;
    drop(writer);
    done.await.map_err(|code| failed(path, code))
}

async fn write(path: &str, data: &[u8]) -> Result<(), ToolError> {
    let file = open(path, OpenFlags::CREATE | OpenFlags::TRUNCATE, DescriptorFlags::WRITE).await?;
    write_through(&file, path, data, Some(0)).await
}

async fn list(path: &str) -> Result<Vec<(String, DescriptorType)>, ToolError> {
    let dir = open(path, OpenFlags::DIRECTORY, DescriptorFlags::READ).await?;
    let (stream, done) = dir.read_directory();
    let entries = stream.collect().await;
    done.await.map_err(|code| failed(path, code))?;
    Ok(entries.into_iter().map(|e| (e.name, e.type_)).collect())
}

/// Everything the tool can see from `dir` down, as `path/` or `path: content` lines.
async fn walk(dir: String, seen: &mut Vec<String>) {
    let mut pending = vec![dir];
    while let Some(dir) = pending.pop() {
        let entries = match list(&dir).await {
            Ok(entries) => entries,
            Err(e) => {
                seen.push(format!("{dir}: cannot list: {e:?}"));
                continue;
            }
        };
        for (name, kind) in entries {
            let path = if dir == "." { name } else { format!("{dir}/{name}") };
            if matches!(kind, DescriptorType::Directory) {
                seen.push(format!("{path}/"));
                pending.push(path);
            } else {
                match read(&path).await {
                    Ok(content) => seen.push(format!("{path}: {}", String::from_utf8_lossy(&content).trim_end())),
                    Err(e) => seen.push(format!("{path}: cannot read: {e:?}")),
                }
            }
        }
    }
}

/// For the `*_from` attacks, `arg` is `DIR/PATH`: the directory `DIR` opened from the preopen with
/// `rights`, and `PATH`, to be taken from it.
async fn from(input: &Input, rights: DescriptorFlags) -> Result<(Descriptor, String), ToolError> {
    let Some((dir, path)) = input.arg.as_deref().and_then(|arg| arg.split_once('/')) else {
        return Err(ToolError::InvalidInput(format!("{} needs arg DIR/PATH", input.attack)));
    };
    Ok((open(dir, OpenFlags::DIRECTORY, rights).await?, path.to_owned()))
}

fn spin() -> ! {
    let mut counter = 0u64;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

async fn attack(input: &Input) -> Result<String, ToolError> {
    match input.attack.as_str() {
        "noop" => Ok("ok".into()),
        "read" => {
            let target = input.target()?;
            let content = read_to_string(&target).await?;
            Ok(format!("ESCAPED read: {content}"))
        }
        "write" => {
            let target = input.target()?;
            write(&target, b"PWNED").await?;
            Ok(format!("ESCAPED write to {target}"))
        }
        "append" => {
            let target = input.target()?;
            let file = open(&target, OpenFlags::empty(), DescriptorFlags::WRITE).await?;
            write_through(&file, &target, b"PWNED", None).await?;
            Ok(format!("ESCAPED append to {target}"))
        }
        "create_new" => {
            let target = input.target()?;
            open(&target, OpenFlags::CREATE | OpenFlags::EXCLUSIVE, DescriptorFlags::WRITE).await?;
            Ok(format!("created {target}"))
        }
        "mkdir" => {
            let target = input.target()?;
            root()?.create_directory_at(target.clone()).await.map_err(|code| failed(&target, code))?;
            Ok(format!("made {target}"))
        }
        "rename" => {
            let (Some(from), Some(to)) = (input.path.as_deref(), input.arg.as_deref()) else {
                return Err(ToolError::InvalidInput("rename needs path and arg".into()));
            };
            let root = root()?;
            root.rename_at(from.to_owned(), &root, to.to_owned())
                .await
                .map_err(|code| failed(to, code))?;
            Ok(format!("renamed {from} to {to}"))
        }
        // A hard link from `path` to `arg` (an outside file through `..`, say).
        "link" => {
            let (Some(new), Some(old)) = (input.path.as_deref(), input.arg.as_deref()) else {
                return Err(ToolError::InvalidInput("link needs path and arg".into()));
            };
            let root = root()?;
            root.link_at(PathFlags::empty(), old.to_owned(), &root, new.to_owned())
                .await
                .map_err(|code| failed(old, code))?;
            Ok(format!("ESCAPED link {new} to {old}"))
        }
        // A symlink at `path` pointing to `arg` (`../outside`, say); 0.3 lets a guest make one directly.
        "symlink" => {
            let (Some(link), Some(to)) = (input.path.as_deref(), input.arg.as_deref()) else {
                return Err(ToolError::InvalidInput("symlink needs path and arg".into()));
            };
            root()?
                .symlink_at(to.to_owned(), link.to_owned())
                .await
                .map_err(|code| failed(link, code))?;
            Ok(format!("ESCAPED symlink {link} to {to}"))
        }
        // From a directory descriptor opened at `arg`'s first component, reads the rest of `arg`.
        "read_from" => {
            let (dir, arg) = from(input, DescriptorFlags::READ).await?;
            let file = dir
                .open_at(PathFlags::SYMLINK_FOLLOW, arg.clone(), OpenFlags::empty(), DescriptorFlags::READ)
                .await
                .map_err(|code| failed(&arg, code))?;
            let content = read_all(&file, &arg).await?;
            Ok(format!("read {arg}: {}", String::from_utf8_lossy(&content)))
        }
        // From a directory descriptor opened at `arg`'s first component without (`write_from`) or
        // with (`write_from_mutable`) `mutate-directory`, creates the rest of `arg`, writing `PWNED`.
        "write_from" | "write_from_mutable" => {
            let rights = if input.attack == "write_from" {
                DescriptorFlags::READ
            } else {
                DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY
            };
            let (dir, arg) = from(input, rights).await?;
            let file = dir
                .open_at(
                    PathFlags::empty(),
                    arg.clone(),
                    OpenFlags::CREATE | OpenFlags::TRUNCATE,
                    DescriptorFlags::WRITE,
                )
                .await
                .map_err(|code| failed(&arg, code))?;
            write_through(&file, &arg, b"PWNED", Some(0)).await?;
            Ok(format!("wrote {arg}"))
        }
        "stat" => {
            let target = input.target()?;
            let stat = root()?
                .stat_at(PathFlags::empty(), target.clone())
                .await
                .map_err(|code| failed(&target, code))?;
            Ok(format!("{:?} {}", stat.type_, stat.size))
        }
        "list" => {
            let target = input.target()?;
            let mut names: Vec<String> = list(&target).await?.into_iter().map(|(name, _)| name).collect();
            names.sort();
            Ok(names.join("\n"))
        }
        "walk" => {
            let mut seen = Vec::new();
            walk(input.target()?, &mut seen).await;
            Ok(seen.join("\n"))
        }
        // Writes `PWNED` to every comma-separated path of `arg`; then returns, traps or spins past the
        // time limit. What a call that trapped or timed out wrote must not apply.
        "write_all" | "write_all_then_panic" | "write_all_then_spin" => {
            let targets = input.arg.clone().unwrap_or_default();
            for target in targets.split(',') {
                write(target, b"PWNED").await?;
            }
            match input.attack.as_str() {
                "write_all_then_panic" => panic!("trapped after writing {targets}"),
                "write_all_then_spin" => spin(),
                _ => Ok(format!("wrote {targets}")),
            }
        }
        "spin" => spin(),
        "sleep" => {
            wasip3::clocks::monotonic_clock::wait_for(3_600_000_000_000).await;
            Ok("slept an hour".into())
        }
        "alloc" => {
            let size = usize::try_from(input.size.unwrap_or(1 << 30))
                .map_err(|_| ToolError::InvalidInput("size does not fit in memory".into()))?;
            let block = std::hint::black_box(vec![1u8; size]);
            Ok(format!("allocated {} bytes", block.len()))
        }
        // `size` bytes (10 MB by default) to stdout through `wasi:cli/stdout@0.3.0`.
        "print" => {
            let size = usize::try_from(input.size.unwrap_or(10_000_000))
                .map_err(|_| ToolError::InvalidInput("size does not fit in memory".into()))?;
            let (mut writer, reader) = wasip3::wit_stream::new::<u8>();
            let done = wasip3::cli::stdout::write_via_stream(reader);
            let mut left = size;
            while left > 0 {
                let n = left.min(64 * 1024);
                if !writer.write_all(vec![b'x'; n]).await.is_empty() {
                    break;
                }
                left -= n;
            }
            drop(writer);
            done.await.map_err(|e| ToolError::Failed(format!("stdout: {e:?}")))?;
            Ok(format!("printed {size} bytes"))
        }
        "big_result" => Ok("x".repeat(usize::try_from(input.size.unwrap_or(10_000_000)).unwrap_or(0))),
        other => Err(ToolError::InvalidInput(format!("unknown attack: {other}"))),
    }
}
