//! Loading third-party components: every refusal names the file and the reason; names are unique; the
//! precompiled cache is written on the first load and used on the next.

// These tests set up tool and cache directories, never a root: plain std::fs is what they mean.
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::test_cache;
use turngate::{CacheSetting, Limits, Toolbox, ToolboxBuilder, ToolboxError};

fn build_err(builder: ToolboxBuilder) -> ToolboxError {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(builder.build())
        .expect_err("the toolbox must refuse this")
}

fn dir_with(name: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    dir
}

fn message(error: &ToolboxError) -> String {
    error.to_string()
}

/// Loads `bytes` as `file_name` from a tools directory; the refusal must name the file and say each of
/// `reasons`.
fn assert_refused(file_name: &str, bytes: &[u8], reasons: &[&str]) {
    let dir = dir_with(file_name, bytes);
    let e = build_err(Toolbox::builder().cache(test_cache()).tools_dir(dir.path()));
    let message = message(&e);
    assert!(message.contains(file_name), "{e}");
    for reason in reasons {
        assert!(message.contains(reason), "{e}");
    }
}

fn test_guest(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn a_file_that_is_not_wasm_is_refused_by_name() {
    assert_refused(
        "notes.wasm",
        b"hello, not wasm",
        &["not a WebAssembly file"],
    );
}

#[test]
fn a_core_module_is_refused_by_name() {
    // The smallest valid core module: magic and version 1.
    assert_refused("core.wasm", b"\0asm\x01\0\0\0", &["not a component"]);
}

#[test]
fn a_component_of_another_world_is_refused_by_name() {
    let bytes = test_guest(env!("TURNGATE_TEST_GUEST_NOT_A_TOOL"));
    assert_refused("command.wasm", &bytes, &["not a turngate tool"]);
}

#[test]
fn an_invalid_schema_is_refused_by_name() {
    let bytes = test_guest(env!("TURNGATE_TEST_GUEST_BAD_SCHEMA"));
    assert_refused("bad.wasm", &bytes, &["not a valid JSON Schema"]);
}

#[test]
fn a_tool_that_never_finishes_describing_itself_is_stopped_at_its_limit_and_refused() {
    let dir = dir_with(
        "spin.wasm",
        &test_guest(env!("TURNGATE_TEST_GUEST_SPIN_DESCRIBE")),
    );
    let limits = Limits {
        wall_time: Duration::from_millis(200),
        ..Limits::default()
    };
    let builder = Toolbox::builder()
        .cache(test_cache())
        .without_bundled()
        .limits(limits)
        .tools_dir(dir.path());
    // Loaded on a thread of its own, so a guest nothing stops fails the test instead of hanging it.
    let (done, refused) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(build_err(builder).to_string());
    });
    let message = refused
        .recv_timeout(Duration::from_secs(30))
        .expect("describe must be stopped at the wall-time limit");
    assert!(message.contains("spin.wasm"), "{message}");
    assert!(message.contains("timed out"), "{message}");
}

#[test]
fn a_component_that_imports_sockets_is_refused_naming_the_imports() {
    let bytes = test_guest(env!("TURNGATE_TEST_GUEST_HOSTILE_NET"));
    assert_refused("net.wasm", &bytes, &["wasi:sockets/tcp", "does not grant"]);
}

/// The smallest component that imports `names`, each an instance of nothing.
fn component_importing(names: &[&str]) -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentImportSection, ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut types = ComponentTypeSection::new();
    types.instance(&InstanceType::new());
    let mut imports = ComponentImportSection::new();
    for name in names {
        imports.import(*name, ComponentTypeRef::Instance(0));
    }
    let mut component = Component::new();
    component.section(&types).section(&imports);
    component.finish()
}

/// A component that imports WASI 0.3 must export the `async-tool` world's `call` (a synchronous `call`
/// cannot wait on 0.3's imports), and may import only the 0.3 interfaces the sandbox serves: sockets,
/// time zones and release candidates (which no host links) are refused by name. A 0.2 component of the same shape is refused only because it is
/// not a tool.
#[test]
fn wasi_0_3_components_are_held_to_the_async_world_and_the_0_3_imports_granted() {
    let bytes = component_importing(&["wasi:cli/stdout@0.2.6", "wasi:cli/stdout@0.3.0"]);
    assert_refused(
        "p3.wasm",
        &bytes,
        &[
            "imports WASI 0.3 (wasi:cli/stdout@0.3.0)",
            "does not export `call` as an async func",
            "turngate:tool/async-tool@0.1.0",
        ],
    );
    for name in [
        "wasi:sockets/types@0.3.0",
        "wasi:clocks/timezone@0.3.0",
        "wasi:cli/stdout@0.3.0-rc-2025-09-16",
    ] {
        let bytes = component_importing(&["wasi:cli/stdout@0.3.0", name]);
        assert_refused(
            "p3.wasm",
            &bytes,
            &[&format!("imports {name}, which"), "does not grant"],
        );
    }
    let dir = dir_with("p2.wasm", &component_importing(&["wasi:cli/stdout@0.2.6"]));
    let e = build_err(Toolbox::builder().cache(test_cache()).tools_dir(dir.path()));
    assert!(message(&e).contains("not a turngate tool"), "{e}");
}

#[test]
fn tool_names_must_be_unique() {
    let bytes = std::fs::read(env!("TURNGATE_TEST_GUEST_HOSTILE_RO")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wasm"), &bytes).unwrap();
    std::fs::write(dir.path().join("b.wasm"), &bytes).unwrap();
    let e = build_err(
        Toolbox::builder()
            .cache(test_cache())
            .without_bundled()
            .tools_dir(dir.path()),
    );
    assert!(matches!(e, ToolboxError::DuplicateName { .. }), "{e}");
    assert!(
        message(&e).contains("b.wasm") && message(&e).contains("a.wasm"),
        "{e}"
    );
}

#[test]
fn a_third_party_tool_cannot_shadow_a_bundled_one() {
    let bytes = std::fs::read(env!("TURNGATE_TEST_GUEST_HOSTILE_RO")).unwrap();
    let dir = dir_with("hostile_ro.wasm", &bytes);
    // Loading it twice (bundled tools included) must be refused even when names collide with files.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(test_cache())
                .tools_dir(dir.path())
                .build(),
        )
        .unwrap();
    assert!(toolbox.get("hostile_ro").is_some() && toolbox.get("write_file").is_some());
    let e = build_err(
        Toolbox::builder()
            .cache(test_cache())
            .tools_dir(dir.path())
            .tools_dir(dir.path()),
    );
    assert!(matches!(e, ToolboxError::DuplicateName { .. }), "{e}");
}

/// The bundled components these tests load as third-party tools, from a tools directory: described
/// when first loaded and remembered in the cache (bundled, they are known from the build).
const THIRD_PARTY: &[&str] = &["read_file", "write_file", "list_dir"];

/// A tools directory holding copies of the [`THIRD_PARTY`] components.
fn third_party_tools() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in THIRD_PARTY {
        std::fs::copy(
            Path::new(env!("TURNGATE_BUNDLED_GUESTS")).join(format!("{name}.wasm")),
            dir.path().join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    dir
}

/// The bundled tools, with their cache in `cache`.
fn bundled_cached(cache: &Path) -> ToolboxBuilder {
    Toolbox::builder().cache(CacheSetting::Dir(cache.to_path_buf()))
}

/// A toolbox of the components in `tools` alone, with its cache in `cache`.
fn cached(tools: &Path, cache: &Path) -> ToolboxBuilder {
    Toolbox::builder()
        .without_bundled()
        .tools_dir(tools)
        .cache(CacheSetting::Dir(cache.to_path_buf()))
}

fn cache_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cwasm")
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn the_precompiled_cache_is_written_once_and_reused() {
    let cache = tempfile::tempdir().unwrap();
    let tools = third_party_tools();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let build = || {
        runtime
            .block_on(cached(tools.path(), cache.path()).build())
            .unwrap()
    };
    let first = build();
    let entries = cache_entries(cache.path());
    assert_eq!(entries, first.tools().count(), "one entry per component");
    let modified: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    let second = build();
    assert_eq!(second.tools().count(), first.tools().count());
    let again: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    assert_eq!(
        modified, again,
        "the second load deserializes; it rewrites nothing"
    );
}

#[test]
fn a_corrupt_cache_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let tools = third_party_tools();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let build = || runtime.block_on(cached(tools.path(), cache.path()).build());
    build().unwrap();
    assert_eq!(cache_entries(cache.path()), THIRD_PARTY.len());
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        std::fs::write(entry.unwrap().path(), b"garbage").unwrap();
    }
    let toolbox = build().expect("a corrupt cache costs time, never the load");
    assert_eq!(toolbox.tools().count(), THIRD_PARTY.len());
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn files_ending(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(suffix)
        })
        .count()
}

#[test]
fn a_warm_cache_describes_tools_without_their_code_and_prepares_only_what_is_called() {
    let cache = tempfile::tempdir().unwrap();
    let tools = third_party_tools();
    let builder = || cached(tools.path(), cache.path());
    runtime().block_on(builder().build()).unwrap();
    assert_eq!(
        files_ending(cache.path(), ".describe.json"),
        THIRD_PARTY.len()
    );
    // Without any precompiled code, a load with the descriptors cached compiles nothing...
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let runtime = runtime();
    let toolbox = runtime.block_on(builder().build()).unwrap();
    assert_eq!(toolbox.tools().count(), THIRD_PARTY.len());
    assert_eq!(
        files_ending(cache.path(), ".cwasm"),
        0,
        "nothing was compiled"
    );
    // ...and a call prepares its own tool only.
    assert_eq!(read_a(&runtime, &toolbox).result.unwrap(), "a");
    assert_eq!(files_ending(cache.path(), ".cwasm"), 1);
}

#[test]
fn a_remembered_schema_is_compiled_at_the_first_call_and_a_broken_one_refuses_only_that_call() {
    let cache = tempfile::tempdir().unwrap();
    let tools = third_party_tools();
    let builder = || cached(tools.path(), cache.path());
    runtime().block_on(builder().build()).unwrap();
    // The remembered descriptor of read_file now holds a schema no validator compiles (as if the cache
    // had been edited): nothing checks it at load, so loading still succeeds...
    let mut edited = 0;
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".describe.json") {
            continue;
        }
        let mut descriptor: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if descriptor["name"] == "read_file" {
            descriptor["input_schema"] =
                r#"{"type":"object","properties":{"path":{"type":"no-such-type"}}}"#.into();
            std::fs::write(&path, descriptor.to_string()).unwrap();
            edited += 1;
        }
    }
    assert_eq!(edited, 1);
    let runtime = runtime();
    let toolbox = runtime.block_on(builder().build()).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "a").unwrap();
    let root = turngate::Root::open(work.path()).unwrap();
    let policy = turngate::Policy::allow_all();
    // ...the call to it is refused at the schema step, naming why...
    let outcome =
        runtime.block_on(toolbox.call(&root, &policy, "read_file", r#"{"path":"a.txt"}"#));
    let error = outcome.result.unwrap_err();
    let turngate::CallError::Gate(refusal) = &error else {
        panic!("refused by the gate, not {error}");
    };
    assert_eq!(refusal.step(), "schema", "{error}");
    assert!(
        error
            .to_string()
            .contains("the input schema of `read_file` cannot be used: input schema is not a valid JSON Schema"),
        "{error}"
    );
    // ...and every other tool still answers.
    let listed = runtime.block_on(toolbox.call(&root, &policy, "list_dir", r#"{"path":"."}"#));
    assert!(listed.result.unwrap().contains("a.txt"));
}

fn locked_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_NOOP"),
        dir.path().join("noop.wasm"),
    )
    .unwrap();
    let sha = |path: &Path| {
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            std::fs::read(path).unwrap(),
        ))
    };
    let lock = turngate::lockfile::ToolLock::new([turngate::lockfile::PinnedTool::local(
        "noop.wasm".into(),
        "noop".into(),
        sha(&dir.path().join("noop.wasm")),
    )]);
    std::fs::write(
        dir.path().join(turngate::lockfile::LOCK_FILE),
        lock.render(),
    )
    .unwrap();
    dir
}

#[test]
fn a_locked_directory_loads_only_what_its_lock_pins() {
    let locked = |dir: &Path| {
        Toolbox::builder()
            .without_bundled()
            .cache(test_cache())
            .locked(true)
            .tools_dir(dir)
    };
    let dir = locked_dir();
    let toolbox = runtime().block_on(locked(dir.path()).build()).unwrap();
    assert_eq!(toolbox.tools().count(), 1);
    // An unlisted component is refused, naming it and its digest.
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO"),
        dir.path().join("extra.wasm"),
    )
    .unwrap();
    let e = message(&build_err(locked(dir.path())));
    assert!(e.contains("extra.wasm is not pinned"), "{e}");
    std::fs::remove_file(dir.path().join("extra.wasm")).unwrap();
    // A changed component is refused, naming it and both digests.
    let pinned = turngate::lockfile::ToolLock::parse(
        &std::fs::read_to_string(dir.path().join(turngate::lockfile::LOCK_FILE)).unwrap(),
    )
    .unwrap();
    let pinned_sha = pinned.tools().next().unwrap().sha256.clone();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO"),
        dir.path().join("noop.wasm"),
    )
    .unwrap();
    let e = message(&build_err(locked(dir.path())));
    assert!(
        e.contains("noop.wasm does not match") && e.contains(&pinned_sha),
        "{e}"
    );
    // A directory without a lock is refused.
    std::fs::remove_file(dir.path().join(turngate::lockfile::LOCK_FILE)).unwrap();
    let e = message(&build_err(locked(dir.path())));
    assert!(e.contains("turngate.lock"), "{e}");
    // Unlocked, the same directory loads.
    let toolbox = runtime()
        .block_on(
            Toolbox::builder()
                .without_bundled()
                .cache(test_cache())
                .tools_dir(dir.path())
                .build(),
        )
        .unwrap();
    assert_eq!(toolbox.tools().count(), 1);
}

#[test]
fn a_cache_entry_others_could_write_is_never_loaded() {
    // Precompiled code is native code: an entry planted by someone else (here: read_file's entry
    // replaced by list_dir's code) must not run, whether the entry or its directory is writable by
    // others.
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    let tools = third_party_tools();
    let builder = || cached(tools.path(), cache.path());
    let toolbox = runtime().block_on(builder().build()).unwrap();
    let entry_of = |tool: &str| cache_entry(&toolbox, cache.path(), tool);
    let (read_file, list_dir) = (entry_of("read_file"), entry_of("list_dir"));
    let plants: [(u32, u32); 2] = [(0o666, 0o700), (0o644, 0o777)];
    for (entry_mode, dir_mode) in plants {
        // Put in place by a rename, not written into the entry's file: a toolbox that mapped that file
        // (its calls' stores are freed on their threads after the calls return) would fault (SIGBUS)
        // on pages cut away under it.
        let plant = cache.path().join("plant");
        std::fs::copy(&list_dir, &plant).unwrap();
        std::fs::set_permissions(&plant, std::fs::Permissions::from_mode(entry_mode)).unwrap();
        std::fs::rename(&plant, &read_file).unwrap();
        std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
        let runtime = runtime();
        let toolbox = runtime.block_on(builder().build()).unwrap();
        assert_eq!(
            read_a(&runtime, &toolbox).result.unwrap(),
            "a",
            "read_file's own code ran (entry {entry_mode:o}, directory {dir_mode:o})"
        );
        std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

/// `read_file`'s outcome for `a.txt` (which holds `a`) in a new work directory.
fn read_a(runtime: &tokio::runtime::Runtime, toolbox: &Toolbox) -> turngate::CallOutcome {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "a").unwrap();
    let root = turngate::Root::open(work.path()).unwrap();
    runtime.block_on(toolbox.call(
        &root,
        &turngate::Policy::allow_all(),
        "read_file",
        r#"{"path":"a.txt"}"#,
    ))
}

/// The precompiled entry of `tool` in `cache`.
fn cache_entry(toolbox: &Toolbox, cache: &Path, tool: &str) -> std::path::PathBuf {
    let sha = toolbox
        .tools()
        .find(|t| t.descriptor().name == tool)
        .unwrap()
        .sha256()
        .to_owned();
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&sha) && name.ends_with(".cwasm")
        })
        .unwrap()
}

/// The cache's check is held to the file loaded, not to its name: code renamed over a checked entry
/// before the entry is mapped (list_dir's, writable by others, over read_file's) does not run. The
/// load is held there in a child process ([`child_of_a_cache_entry_replaced_after_its_check`]).
#[test]
#[allow(clippy::disallowed_methods)] // the plant is renamed into the test's own cache directory
fn a_cache_entry_replaced_after_its_check_is_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime();
    let toolbox = runtime
        .block_on(bundled_cached(cache.path()).build())
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = turngate::Root::open(work.path()).unwrap();
    for (tool, input) in [
        ("read_file", r#"{"path":"missing.txt"}"#),
        ("list_dir", r#"{"path":"."}"#),
    ] {
        // Each call compiles its tool into the cache; the read's answer does not matter.
        runtime.block_on(toolbox.call(&root, &turngate::Policy::allow_all(), tool, input));
    }
    let (read_file, list_dir) = (
        cache_entry(&toolbox, cache.path(), "read_file"),
        cache_entry(&toolbox, cache.path(), "list_dir"),
    );
    let gate = tempfile::tempdir().unwrap();
    let release = gate.path().join("release");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_of_a_cache_entry_replaced_after_its_check",
            "--test-threads=1",
        ])
        .env("TURNGATE_TEST_CACHE_CHECKED", &release)
        .env("TURNGATE_TEST_CHILD_CACHE", cache.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let reached = gate.path().join("release.reached");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !reached.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never loaded read_file"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let plant = cache.path().join("plant");
    std::fs::copy(&list_dir, &plant).unwrap();
    std::fs::set_permissions(&plant, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::rename(&plant, &read_file).unwrap();
    std::fs::write(&release, "").unwrap();
    assert!(child.wait().unwrap().success(), "the planted code ran");
}

/// The call of [`a_cache_entry_replaced_after_its_check_is_not_loaded`]; does nothing unless run by it.
#[test]
fn child_of_a_cache_entry_replaced_after_its_check() {
    let Some(cache) = std::env::var_os("TURNGATE_TEST_CHILD_CACHE") else {
        return;
    };
    let runtime = runtime();
    let toolbox = runtime
        .block_on(bundled_cached(Path::new(&cache)).build())
        .unwrap();
    assert_eq!(
        read_a(&runtime, &toolbox).result.unwrap(),
        "a",
        "read_file's own code ran"
    );
}

/// Four first calls of `read_file` at once, on four runtime workers, compile it once and load it
/// once. The record of compiles and preparations belongs to a process, so the calls run in a child
/// process of this test binary ([`child_of_concurrent_first_calls`]).
#[test]
fn concurrent_first_calls_of_a_tool_share_one_compile() {
    let record = tempfile::NamedTempFile::new().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_of_concurrent_first_calls",
            "--test-threads=1",
        ])
        .env("TURNGATE_TEST_PREPARE_RECORD", record.path())
        // read_file as a tool from elsewhere: compiled, not taken from the binary.
        .env("TURNGATE_TEST_IGNORE_PRECOMPILED", "1")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child's calls failed");
    let record = std::fs::read_to_string(record.path()).unwrap();
    let count = |what: &str| record.lines().filter(|l| l.starts_with(what)).count();
    assert_eq!(count("compiled "), 1, "{record}");
    assert_eq!(count("prepared "), 1, "{record}");
}

/// The calls of [`concurrent_first_calls_of_a_tool_share_one_compile`]; does nothing unless run by it.
#[test]
fn child_of_concurrent_first_calls() {
    if std::env::var_os("TURNGATE_TEST_PREPARE_RECORD").is_none() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let toolbox = std::sync::Arc::new(
        runtime
            .block_on(bundled_cached(cache.path()).build())
            .unwrap(),
    );
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "a").unwrap();
    let root = std::sync::Arc::new(turngate::Root::open(work.path()).unwrap());
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (toolbox, root) = (toolbox.clone(), root.clone());
            runtime.spawn(async move {
                let policy = turngate::Policy::allow_all();
                toolbox
                    .call(&root, &policy, "read_file", r#"{"path":"a.txt"}"#)
                    .await
            })
        })
        .collect();
    for call in calls {
        let outcome = runtime.block_on(call).unwrap();
        assert_eq!(outcome.result.unwrap(), "a");
    }
}

/// A bundled tool's first call compiles nothing: its code was compiled when turngate was built
/// (`build.rs`), and is loaded from the binary without a cache, or stored in an empty one and mapped
/// from there (the next process finds it as any cached tool).
#[test]
fn a_bundled_tool_runs_from_code_built_into_the_binary_with_or_without_a_cache() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "a").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let record = tempfile::NamedTempFile::new().unwrap();
    let call = |cache_args: &[&std::ffi::OsStr]| {
        std::fs::write(record.path(), "").unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(["call", "read_file", r#"{"path":"a.txt"}"#, "--root"])
            .arg(work.path())
            .args(cache_args)
            .env("TURNGATE_TEST_PREPARE_RECORD", record.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let record = std::fs::read_to_string(record.path()).unwrap();
        let words: Vec<&str> = record
            .lines()
            .map(|line| line.split(' ').next().unwrap())
            .collect();
        words.join(" ")
    };
    assert_eq!(call(&["--no-cache".as_ref()]), "embedded prepared");
    let in_cache = ["--cache-dir".as_ref(), cache.path().as_os_str()];
    assert_eq!(call(&in_cache), "embedded prepared");
    assert_eq!(files_ending(cache.path(), ".cwasm"), 1);
    assert_eq!(call(&in_cache), "prepared");
}

/// A toolbox that compiles in its own process (the library's default: the Python and Node packages')
/// gives back what its compiles used: compiling every bundled tool leaves its anonymous resident
/// memory within 40 MiB of what it was (Cranelift's contexts go with the engine that compiled, the freed
/// heap is returned, the code is in the cache, not loaded): 11 to 21 MiB more here (what stays is
/// fragments of the compiling threads' arenas), where the compiles keeping their heap left 82 MiB more,
/// and the engines kept 71 MiB more. Memory belongs to a process, so the
/// compiles run in a child process of this test binary ([`child_of_compiles_in_this_process`]).
#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs /proc/self/status (RssAnon), and its bound is glibc's (malloc_trim): Linux only"
)]
fn compiling_in_this_process_gives_the_memory_of_the_compiles_back() {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_of_compiles_in_this_process",
            "--test-threads=1",
        ])
        .env("TURNGATE_TEST_COMPILES_CHILD", "1")
        // The bundled tools compiled as tools from elsewhere are, not taken from the binary.
        .env("TURNGATE_TEST_IGNORE_PRECOMPILED", "1")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child's compiles kept their memory");
}

/// The compiles of [`compiling_in_this_process_gives_the_memory_of_the_compiles_back`]; does nothing
/// unless run by it.
#[test]
fn child_of_compiles_in_this_process() {
    if std::env::var_os("TURNGATE_TEST_COMPILES_CHILD").is_none() {
        return;
    }
    let anonymous_kib = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime();
    let toolbox = runtime
        .block_on(bundled_cached(cache.path()).build())
        .unwrap();
    let before = anonymous_kib();
    runtime.block_on(toolbox.prepare_all());
    let bundled = toolbox.tools().count();
    assert_eq!(files_ending(cache.path(), ".cwasm"), bundled);
    let after = anonymous_kib();
    assert!(
        after <= before + 40 * 1024,
        "compiling {bundled} tools left {after} KiB of anonymous memory, {before} KiB before"
    );
}

/// `guest-tools/descriptors.json`, which the build embeds so that no bundled tool is compiled before
/// it is called.
const BUNDLED_DESCRIPTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../guest-tools/descriptors.json"
);

/// Each bundled component loaded on its own with no cache, so that it is really asked to describe
/// itself: what it said must be what the build embedded for it (the descriptor from
/// `guest-tools/descriptors.json`, the imports read from its bytes). When the file is out of date the
/// test rewrites it and fails; the next build embeds the new one.
#[test]
fn bundled_descriptors_are_what_the_components_describe() {
    let bundled = common::build(Toolbox::builder().cache(CacheSetting::Disabled));
    let components = Path::new(env!("TURNGATE_BUNDLED_GUESTS"));
    let mut described = serde_json::Map::new();
    let mut stale = Vec::new();
    for tool in bundled.tools() {
        let name = &tool.descriptor().name;
        let alone = common::build(
            Toolbox::builder()
                .without_bundled()
                .cache(CacheSetting::Disabled)
                .component_file(components.join(format!("{name}.wasm")))
                .unwrap(),
        );
        let fresh = alone
            .get(name)
            .expect("the component describes the same tool");
        assert_eq!(tool.imports(), fresh.imports(), "{name}'s imports");
        let embedded = serde_json::to_value(tool.descriptor()).unwrap();
        let fresh = serde_json::to_value(fresh.descriptor()).unwrap();
        if embedded != fresh {
            stale.push(name.clone());
        }
        described.insert(name.clone(), fresh);
    }
    let expected = serde_json::to_string_pretty(&described).unwrap() + "\n";
    let embedded = std::fs::read_to_string(BUNDLED_DESCRIPTORS).unwrap();
    if embedded != expected {
        std::fs::write(BUNDLED_DESCRIPTORS, &expected).unwrap();
        panic!(
            "guest-tools/descriptors.json did not hold what the bundled components describe; it has \
             been rewritten: run the tests again"
        );
    }
    assert!(
        stale.is_empty(),
        "the build embedded other descriptors than the components describe for {stale:?}"
    );
}
