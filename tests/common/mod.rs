//! Shared test context: one toolbox per test binary, temporary roots, and hashing of trees.

#![allow(dead_code)] // each test binary uses its own subset of these helpers

pub mod mcp_http;
pub mod pipe;
pub mod streams;
pub mod terminal;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use turngate::Provider;
use turngate::{CacheSetting, CallOutcome, Limits, Policy, Root, Toolbox, ToolboxBuilder};

/// The precompiled cache shared by the tests (inside cargo's per-target temporary directory).
pub fn test_cache() -> CacheSetting {
    CacheSetting::Dir(test_cache_dir())
}

/// The directory of [`test_cache`], for `--cache-dir` of the binary.
pub fn test_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache")
}

/// Builds a toolbox on a throwaway runtime, so it can be shared by tests with their own runtimes.
pub fn build(builder: ToolboxBuilder) -> Toolbox {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(builder.build())
        .expect("toolbox builds")
}

/// The bundled tools with default limits.
pub fn bundled() -> &'static Toolbox {
    static TOOLBOX: OnceLock<Toolbox> = OnceLock::new();
    TOOLBOX.get_or_init(|| build(Toolbox::builder().cache(test_cache())))
}

/// The bundled tools plus the hostile test guests, with short limits so the containment tests are quick.
pub fn hostile() -> &'static Toolbox {
    static TOOLBOX: OnceLock<Toolbox> = OnceLock::new();
    TOOLBOX.get_or_init(|| {
        let limits = Limits {
            wall_time: Duration::from_secs(1),
            ..Limits::default()
        };
        build(
            Toolbox::builder()
                .cache(test_cache())
                .limits(limits)
                .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_RW"))
                .unwrap()
                .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_RO"))
                .unwrap()
                .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_RW_P3"))
                .unwrap()
                .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_RO_P3"))
                .unwrap(),
        )
    })
}

/// The hostile guest that declares `write` access, in each WASI generation: `hostile_rw` (0.2) and its
/// twin `hostile_rw_p3`, which makes the same attacks through `wasi:filesystem@0.3.0`.
pub const HOSTILE_RW: [&str; 2] = ["hostile_rw", "hostile_rw_p3"];

/// The hostile guest that declares `read` access, in each WASI generation.
pub const HOSTILE_RO: [&str; 2] = ["hostile_ro", "hostile_ro_p3"];

/// Runs one call on a fresh current-thread runtime.
pub fn call(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    tool: &str,
    input: &str,
) -> CallOutcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call(root, policy, tool, input))
}

/// Runs one call with no policy, panicking with the outcome if the call did not succeed.
pub fn call_ok(toolbox: &Toolbox, root: &Root, tool: &str, input: Value) -> String {
    let outcome = call(
        toolbox,
        root,
        &Policy::allow_all(),
        tool,
        &input.to_string(),
    );
    match outcome.result {
        Ok(output) => output,
        Err(e) => panic!("{tool} {input} failed: {e}"),
    }
}

/// Whether this test binary's workspaces are on a file system that folds case and Unicode
/// normalization (`turngate_testfs::folding_dir`: the test file system of `tests/testfs` on Linux,
/// mounted once per process; APFS on macOS): the suites that
/// `tests/folding.rs` compiles again run there, the rest on the ordinary temporary directory.
pub fn folding_roots() -> bool {
    env!("CARGO_CRATE_NAME") == "folding"
}

/// Waits until a running call has staged at least `count` files in the staging directory of the root
/// at `root`: the sign a guest has started and written, for a test to act while it still runs.
pub fn wait_for_staged(root: &Path, count: usize) {
    let staging = root.join(turngate::root::STATE_DIR).join("staging");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let staged = std::fs::read_dir(&staging).map_or(0, |entries| entries.count());
        if staged >= count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no call staged {count} files in {} (it holds {staged})",
            staging.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A temporary directory with `root/` (the allowed root) and `outside/` next to it.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub root: Root,
}

impl Workspace {
    /// A workspace on the file system this test binary runs on ([`folding_roots`]).
    pub fn new() -> Workspace {
        if folding_roots() {
            Workspace::in_dir(turngate_testfs::folding_dir())
        } else {
            Workspace::in_dir(&std::env::temp_dir())
        }
    }

    /// A workspace in a new temporary directory beneath `parent`.
    pub fn in_dir(parent: &Path) -> Workspace {
        let dir = tempfile::tempdir_in(parent).unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret.txt"), "outside secret\n").unwrap();
        let root = Root::open(dir.path().join("root")).unwrap();
        Workspace { dir, root }
    }

    pub fn root_path(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn outside_path(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    /// Writes a file beneath the root (test setup, from the host side).
    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root_path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root_path().join(rel)).unwrap()
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root_path().join(rel).symlink_metadata().is_ok()
    }

    /// The names in the root, turngate's state directory left out, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root_path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name != turngate::root::STATE_DIR)
            .collect();
        names.sort();
        names
    }

    /// Whether no staged file is left in turngate's state directory (every call cleaned up; a root
    /// handle's staging directory itself lives as long as the handle).
    pub fn no_staging_left(&self) -> bool {
        let staging = self
            .root_path()
            .join(turngate::root::STATE_DIR)
            .join("staging");
        !staging.exists() || hash_tree(&staging).is_empty()
    }

    /// Every file beneath the root (see [`hash_tree`]), turngate's state directory left out.
    pub fn tree(&self) -> BTreeMap<PathBuf, String> {
        let mut tree = hash_tree(&self.root_path());
        tree.retain(|path, _| !path.starts_with(turngate::root::STATE_DIR));
        tree
    }
}

/// Everything beneath `dir` (not following symlinks), keyed by relative path: a file's SHA-256, a
/// link's target, and `directory` for each directory (so an empty one made or removed shows).
pub fn hash_tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut hashes = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            let rel = entry.path().strip_prefix(dir).unwrap().to_path_buf();
            if kind.is_dir() {
                hashes.insert(rel, "directory".to_owned());
                stack.push(entry.path());
            } else if kind.is_symlink() {
                hashes.insert(
                    rel,
                    format!(
                        "symlink -> {}",
                        std::fs::read_link(entry.path()).unwrap().display()
                    ),
                );
            } else {
                hashes.insert(
                    rel,
                    hex::encode(Sha256::digest(std::fs::read(entry.path()).unwrap())),
                );
            }
        }
    }
    hashes
}

/// Every tool result in a list of messages (a history, or a request's messages / input / contents), in
/// the provider's shape, as (call ID, content). Gemini results may lack an ID; their content is the
/// `response` object as JSON text. For OpenAI Responses, every kind of answer item counts (a hosted
/// `shell_call_output` or `tool_search_output` in the model's own items too: pass only the answers).
pub fn results_in(provider: Provider, messages: &[Value]) -> Vec<(Option<String>, String)> {
    let id = |v: &Value| v.as_str().map(str::to_owned);
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let nested = |key: &'static str| {
        messages
            .iter()
            .flat_map(move |m| m[key].as_array().cloned().unwrap_or_default())
    };
    match provider {
        Provider::Anthropic => nested("content")
            .filter(|b| b["type"] == "tool_result")
            .map(|b| (id(&b["tool_use_id"]), text(&b["content"])))
            .collect(),
        Provider::OpenAiChat => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| (id(&m["tool_call_id"]), text(&m["content"])))
            .collect(),
        Provider::OpenAiResponses => messages
            .iter()
            .filter_map(|m| {
                let answer = match m["type"].as_str()? {
                    "mcp_approval_response" => (id(&m["approval_request_id"]), text(&m["reason"])),
                    "tool_search_output" => (id(&m["call_id"]), text(&m["status"])),
                    "function_call_output"
                    | "local_shell_call_output"
                    | "shell_call_output"
                    | "apply_patch_call_output"
                    | "custom_tool_call_output"
                    | "computer_call_output" => (id(&m["call_id"]), text(&m["output"])),
                    _ => return None,
                };
                Some(answer)
            })
            .collect(),
        Provider::Gemini => nested("parts")
            .filter_map(|p| p.get("functionResponse").cloned())
            .map(|r| (id(&r["id"]), r["response"].to_string()))
            .collect(),
    }
}

/// A plain reqwest client for a test's own requests. reqwest is built without a crypto provider of its
/// own (the host's TLS is aws-lc-rs, `host/src/tls.rs`), so the process default is set to that one.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    reqwest::Client::new()
}

/// Makes a FIFO at `path` (`mkfifo`, which every Unix has: Linux's `mknodat` of a FIFO is not macOS's).
pub fn make_fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt as _;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a NUL-terminated path that lives across the call.
    let made = unsafe { libc::mkfifo(name.as_ptr(), 0o644) };
    assert_eq!(
        made,
        0,
        "mkfifo {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}
