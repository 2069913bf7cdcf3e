//! The `turngate` binary: `call` prints the outcome as JSON and exits 0, 2 or 1.

mod common;

use std::process::Command;

use common::terminal::ctrl_c_then_yes;
use serde_json::Value;

fn turngate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_turngate"));
    cmd.env(
        "TURNGATE_CACHE_DIR",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
    );
    cmd
}

#[test]
fn call_runs_one_tool_and_prints_json() {
    let root = tempfile::tempdir().unwrap();
    let out = turngate()
        .args(["call", "--root"])
        .arg(root.path())
        .args([
            "write_file",
            r#"{"path":"notes.txt","content":"from the cli"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "from the cli"
    );
}

/// Runs `turngate ARGS` in `root`'s journal commands; returns the exit code and stdout's JSON lines.
fn journal_command(args: &[&str], root: &std::path::Path) -> (Option<i32>, Vec<Value>) {
    let out = turngate()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (out.status.code(), lines)
}

/// Writes `content` to `path` with `turngate call` (plus `extra` flags); returns the printed outcome.
fn call_write(root: &std::path::Path, path: &str, content: &str, extra: &[&str]) -> Value {
    let input = serde_json::json!({"path": path, "content": content}).to_string();
    let out = turngate()
        .args(["call", "--root"])
        .arg(root)
        .args(extra)
        .args(["write_file", &input])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_applied_call_can_be_undone_by_its_seq_or_its_call_id() {
    let root = tempfile::tempdir().unwrap();
    let first = call_write(root.path(), "a.txt", "a", &[]);
    let second = call_write(root.path(), "b.txt", "b", &["--call-id", "mine-1"]);
    let third = call_write(root.path(), "c.txt", "c", &[]);
    // Every call has an ID: made up when none is given, the given one otherwise.
    let made_up = first["call_id"].as_str().expect("a call ID").to_owned();
    assert!(made_up.starts_with("call-"), "{first}");
    assert_ne!(third["call_id"], first["call_id"]);
    assert_eq!(second["call_id"], "mine-1");
    let (_, journal) = journal_command(&["journal"], root.path());
    assert_eq!(journal.len(), 3);
    assert_eq!(journal[0]["call_id"], made_up.as_str());
    assert_eq!(journal[1]["call_id"], "mine-1");

    // The first call, which is not the last, by its seq.
    let seq = journal[0]["seq"].as_u64().unwrap().to_string();
    let (code, undone) = journal_command(&["undo", "--seq", &seq], root.path());
    assert_eq!(code, Some(0));
    assert_eq!(undone[0]["seq"], journal[0]["seq"]);
    assert!(!root.path().join("a.txt").exists());
    assert!(root.path().join("b.txt").exists() && root.path().join("c.txt").exists());
    // Not twice.
    let (code, _) = journal_command(&["undo", "--seq", &seq], root.path());
    assert_eq!(code, Some(2));
    // The second by the ID given, the third by the made-up one.
    let (code, _) = journal_command(&["undo", "--call", "mine-1"], root.path());
    assert_eq!(code, Some(0));
    assert!(!root.path().join("b.txt").exists());
    let third_id = third["call_id"].as_str().unwrap();
    let (code, _) = journal_command(&["undo", "--call", third_id], root.path());
    assert_eq!(code, Some(0));
    assert!(!root.path().join("c.txt").exists());
    let (_, journal) = journal_command(&["journal"], root.path());
    assert!(
        journal.iter().all(|entry| entry["state"] == "undone"),
        "{journal:?}"
    );
}

#[test]
fn a_refused_call_exits_2_and_names_the_step() {
    let root = tempfile::tempdir().unwrap();
    let out = turngate()
        .args(["call", "--root"])
        .arg(root.path())
        .args(["write_file", r#"{"path":"/etc/passwd","content":"x"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["status"], "error");
    assert_eq!(outcome["error"]["stage"], "gate");
    assert_eq!(outcome["error"]["kind"], "path");
}

#[test]
fn a_policy_that_does_not_list_the_tool_denies_it() {
    let root = tempfile::tempdir().unwrap();
    let policy = root.path().join("policy.toml");
    std::fs::write(&policy, "[tools.read_file]\npaths = [\"**\"]\n").unwrap();
    let out = turngate()
        .args(["call", "--root"])
        .arg(root.path())
        .arg("--policy")
        .arg(&policy)
        .args(["write_file", r#"{"path":"notes.txt","content":"x"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["error"]["kind"], "policy");
    assert!(!root.path().join("notes.txt").exists());
}

/// `call` runs its tool in a pool sized by its flags: the memory, wall-time and output limits given on
/// the command line hold there.
#[test]
fn the_one_shot_engine_keeps_every_limit() {
    let root = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO"),
        tools.path().join("hostile_ro.wasm"),
    )
    .unwrap();
    let attack = |input: &str, limits: &[&str]| {
        let out = turngate()
            .args(["call", "--root"])
            .arg(root.path())
            .arg("--tools")
            .arg(tools.path())
            .args(limits)
            .args(["hostile_ro", input])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{input}");
        let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
        outcome["error"]["kind"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        attack(
            r#"{"attack":"alloc","size":1073741824}"#,
            &["--memory-mib", "64"]
        ),
        "memory_limit"
    );
    assert_eq!(
        attack(r#"{"attack":"sleep"}"#, &["--timeout-ms", "300"]),
        "timeout"
    );
    assert_eq!(
        attack(
            r#"{"attack":"print","size":10000000}"#,
            &["--max-output", "4096"]
        ),
        "output_limit"
    );
}

#[test]
fn a_missing_root_is_a_usage_error() {
    let out = turngate()
        .args([
            "call",
            "--root",
            "/nonexistent/turngate",
            "list_dir",
            r#"{"path":"."}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("opening root"));
}

#[test]
fn tools_list_shows_every_tool_with_its_access_and_origin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO"),
        dir.path().join("hostile_ro.wasm"),
    )
    .unwrap();
    let out = turngate()
        .args(["tools", "list", "--tools"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("write_file")
            && l.contains("read-write")
            && l.contains("bundled")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("read_file")
            && l.contains("read-only")
            && l.contains("/path (read)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("hostile_ro") && l.contains("hostile_ro.wasm")),
        "{text}"
    );
}

#[test]
fn tools_inspect_prints_the_descriptor_schema_and_imports() {
    let out = turngate()
        .args(["tools", "inspect", env!("TURNGATE_TEST_GUEST_HOSTILE_RO")])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let descriptor: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(descriptor["name"], "hostile_ro");
    assert_eq!(descriptor["sandbox_access"], "read");
    assert_eq!(
        descriptor["input_schema"]["required"],
        serde_json::json!(["attack"])
    );
    assert!(
        descriptor["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("wasi:filesystem/"))
    );
    assert_eq!(descriptor["wasi"], "0.2");
}

#[test]
fn tools_check_passes_a_conforming_tool() {
    let out = turngate()
        .args(["tools", "check", env!("TURNGATE_TEST_GUEST_HOSTILE_RO")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("with invalid-input") && text.trim_end().ends_with("passed"),
        "{text}"
    );
    assert!(text.contains("built for WASI 0.2"), "{text}");
}

#[test]
fn tools_check_fails_a_tool_that_accepts_what_its_schema_forbids() {
    let out = turngate()
        .args(["tools", "check", env!("TURNGATE_TEST_GUEST_NOOP")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("expected invalid-input"), "{text}");
}

#[test]
fn tools_check_rejects_a_component_that_imports_sockets() {
    let out = turngate()
        .args(["tools", "check", env!("TURNGATE_TEST_GUEST_HOSTILE_NET")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("wasi:sockets/tcp") && text.contains("does not grant"),
        "{text}"
    );
}

#[test]
fn a_component_that_does_not_compile_is_refused_with_the_compilers_reason() {
    // A component header, then bytes no validator accepts: the child that compiles for the CLI refuses
    // them, and what it said is the refusal's reason, not only that it failed.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm\x0d\x00\x01\x00\xff\xff\xff\xff").unwrap();
    let out = turngate()
        .args(["tools", "check"])
        .arg(&broken)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("does not compile"), "{text}");
    assert!(
        text.contains("section") && !text.contains("ended with"),
        "the compiler's own reason is not given: {text}"
    );
}

fn fixture(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(path)
}

/// Every subcommand's exit codes, usage errors included: the README's contract (0 ok, 2 a call error or
/// refusal, 3 not completed, 1 usage, configuration or I/O; help and version 0).
#[test]
fn every_subcommand_keeps_the_documented_exit_codes() {
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap().to_owned();
    let seed = |case: &str| {
        fixture(&format!("seed/anthropic_{case}.sse"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let ro = env!("TURNGATE_TEST_GUEST_HOSTILE_RO");
    let noop = env!("TURNGATE_TEST_GUEST_NOOP");
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(noop, tools.path().join("noop.wasm")).unwrap();
    let tools_arg = tools.path().to_str().unwrap().to_owned();
    let run = |case: &str| {
        vec![
            "run".to_owned(),
            "--provider".into(),
            "anthropic".into(),
            "--root".into(),
            root_arg.clone(),
            seed(case),
        ]
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let cases: Vec<(&str, Vec<String>, i32)> = vec![
        // run
        ("run: completed, every call ok", run("complete"), 0),
        ("run: completed, a call error", run("invalid"), 2),
        ("run: not completed", run("refusal"), 3),
        (
            "run: missing root",
            args(&[
                "run",
                "--provider",
                "anthropic",
                "--root",
                "/nonexistent/turngate",
                "-",
            ]),
            1,
        ),
        ("run: unknown flag", args(&["run", "--no-such-flag"]), 1),
        (
            "run: bad value",
            args(&["run", "--provider", "nope", "--root", &root_arg]),
            1,
        ),
        (
            "run: missing required argument",
            args(&["run", "--root", &root_arg]),
            1,
        ),
        ("run: help", args(&["run", "--help"]), 0),
        // call
        (
            "call: ok",
            args(&["call", "--root", &root_arg, "list_dir", r#"{"path":"."}"#]),
            0,
        ),
        (
            "call: refused",
            args(&[
                "call",
                "--root",
                &root_arg,
                "list_dir",
                r#"{"path":"/etc"}"#,
            ]),
            2,
        ),
        (
            "call: missing root",
            args(&["call", "--root", "/nonexistent/turngate", "list_dir", "{}"]),
            1,
        ),
        ("call: unknown flag", args(&["call", "--no-such-flag"]), 1),
        (
            "call: bad value",
            args(&[
                "call",
                "--timeout-ms",
                "soon",
                "--root",
                &root_arg,
                "list_dir",
                "{}",
            ]),
            1,
        ),
        (
            "call: missing required argument",
            args(&["call", "--root", &root_arg, "list_dir"]),
            1,
        ),
        // agent (its other codes are in live.rs)
        (
            "agent: no API key",
            args(&[
                "agent",
                "--provider",
                "anthropic",
                "--model",
                "m",
                "--root",
                &root_arg,
                "hi",
            ]),
            1,
        ),
        ("agent: unknown flag", args(&["agent", "--no-such-flag"]), 1),
        (
            "agent: bad value",
            args(&[
                "agent",
                "--provider",
                "nope",
                "--model",
                "m",
                "--root",
                &root_arg,
                "hi",
            ]),
            1,
        ),
        (
            "agent: missing required argument",
            args(&[
                "agent",
                "--provider",
                "anthropic",
                "--root",
                &root_arg,
                "hi",
            ]),
            1,
        ),
        // demo
        ("demo", args(&["demo"]), 0),
        ("demo: unknown flag", args(&["demo", "--no-such-flag"]), 1),
        // tools
        ("tools list", args(&["tools", "list"]), 0),
        ("tools inspect", args(&["tools", "inspect", ro]), 0),
        (
            "tools inspect: missing file",
            args(&["tools", "inspect", "/nonexistent/tool.wasm"]),
            1,
        ),
        ("tools check: passes", args(&["tools", "check", ro]), 0),
        ("tools check: fails", args(&["tools", "check", noop]), 2),
        ("tools: missing subcommand", args(&["tools"]), 1),
        ("tools: unknown subcommand", args(&["tools", "nope"]), 1),
        (
            "tools check: missing required argument",
            args(&["tools", "check"]),
            1,
        ),
        // tools lock, and --locked
        (
            "tools lock",
            args(&["tools", "lock", "--tools", &tools_arg]),
            0,
        ),
        (
            "tools lock: missing required argument",
            args(&["tools", "lock"]),
            1,
        ),
        (
            "call --locked: pinned",
            args(&[
                "call", "--root", &root_arg, "--tools", &tools_arg, "--locked", "noop", "{}",
            ]),
            0,
        ),
        (
            "call --locked without --tools",
            args(&["call", "--root", &root_arg, "--locked", "noop", "{}"]),
            1,
        ),
        // mcp (its sessions are tested in tests/mcp.rs)
        ("mcp: unknown flag", args(&["mcp", "--no-such-flag"]), 1),
        ("mcp: missing required argument", args(&["mcp"]), 1),
        (
            "mcp: missing root",
            args(&["mcp", "--root", "/nonexistent/turngate"]),
            1,
        ),
        (
            "mcp: --token-file without --listen",
            args(&["mcp", "--root", &root_arg, "--token-file", "t"]),
            1,
        ),
        (
            "mcp: locked, pinned, client gone at once",
            args(&[
                "mcp", "--root", &root_arg, "--tools", &tools_arg, "--locked",
            ]),
            0,
        ),
        ("mcp: help", args(&["mcp", "--help"]), 0),
        // journal and undo
        (
            "call: a write to undo",
            args(&[
                "call",
                "--root",
                &root_arg,
                "write_file",
                r#"{"path":"undo-me.txt","content":"x"}"#,
            ]),
            0,
        ),
        ("journal", args(&["journal", "--root", &root_arg]), 0),
        (
            "journal: missing root",
            args(&["journal", "--root", "/nonexistent/turngate"]),
            1,
        ),
        (
            "journal: unknown flag",
            args(&["journal", "--no-such-flag"]),
            1,
        ),
        (
            "undo: restored",
            args(&["undo", "--root", &root_arg, "--last"]),
            0,
        ),
        (
            "undo: nothing to undo",
            args(&["undo", "--root", &root_arg, "--call", "no-such-call"]),
            2,
        ),
        ("undo: no target", args(&["undo", "--root", &root_arg]), 1),
        (
            "undo: no such seq",
            args(&["undo", "--root", &root_arg, "--seq", "999999"]),
            2,
        ),
        (
            "undo: seq not a number",
            args(&["undo", "--root", &root_arg, "--seq", "x"]),
            1,
        ),
        (
            "undo: two targets",
            args(&["undo", "--root", &root_arg, "--last", "--turn", "t"]),
            1,
        ),
        // worker and submit (their other codes are in worker.rs)
        (
            "worker: unknown flag",
            args(&["worker", "--no-such-flag"]),
            1,
        ),
        (
            "worker: missing required argument",
            args(&["worker", "--nats", "nats://127.0.0.1:1"]),
            1,
        ),
        (
            "submit: unknown flag",
            args(&["submit", "--no-such-flag"]),
            1,
        ),
        (
            "submit: bad value",
            args(&[
                "submit",
                "--nats",
                "nats://127.0.0.1:1",
                "--provider",
                "nope",
                "--root",
                "r",
                "-",
            ]),
            1,
        ),
        // the binary
        ("no subcommand", args(&[]), 1),
        ("unknown subcommand", args(&["nope"]), 1),
        ("help", args(&["--help"]), 0),
        ("help subcommand", args(&["help", "run"]), 0),
        ("version", args(&["--version"]), 0),
    ];
    let mut failures = Vec::new();
    for (what, args, expected) in cases {
        let out = turngate()
            .args(&args)
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        if out.status.code() != Some(expected) {
            failures.push(format!(
                "{what}: exit {:?}, expected {expected}; stderr: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if what.starts_with("help") || what == "version" || what == "run: help" {
            assert!(
                !out.stdout.is_empty(),
                "{what}: help and version go to stdout"
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `--version` names what a binary runs, for a bug report or a tool author without the sources: the
/// version, the wasmtime really linked (Cargo.lock's) and the tool worlds of `wit/tool.wit`.
#[test]
fn version_names_the_wasmtime_linked_and_the_tool_worlds_served() {
    let out = turngate().arg("--version").output().unwrap();
    assert!(out.status.success());
    let lock = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"),
    )
    .unwrap();
    let wasmtime = lock
        .split("[[package]]")
        .find_map(|entry| {
            entry
                .contains("name = \"wasmtime\"\n")
                .then(|| entry.split("version = \"").nth(1)?.split('"').next())
                .flatten()
        })
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "turngate {} (wasmtime {wasmtime}; tool worlds turngate:tool/tool@0.1.0, \
             turngate:tool/network-tool@0.1.0 on WASI 0.2, turngate:tool/async-tool@0.1.0, \
             turngate:tool/async-network-tool@0.1.0 on WASI 0.3)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// `turngate run` on a turn: the exit code and the printed report.
fn run_fixture(root: &std::path::Path, provider: &str, file: &str) -> (Option<i32>, Value) {
    let out = turngate()
        .args(["run", "--provider", provider, "--root"])
        .arg(root)
        .arg(fixture(file))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{file}: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// `run --max-output-tokens N`: a `tool_calls` turn whose usage reached N (as vLLM reports cut turns) runs
/// nothing and exits 3; below the limit it runs; a whole JSON body given inline is gated like a stream.
#[test]
fn run_takes_the_output_limit_and_whole_json_bodies() {
    let fixture_file = "streams/constructed/openai_chat_vllm_tool_calls_at_limit.sse";
    for (limit, code, status) in [("64", 3, "truncated"), ("65", 0, "completed")] {
        let root = tempfile::tempdir().unwrap();
        let out = turngate()
            .args([
                "run",
                "--provider",
                "openai-chat",
                "--max-output-tokens",
                limit,
                "--root",
            ])
            .arg(root.path())
            .arg(fixture(fixture_file))
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(code), "{limit}: {report}");
        assert_eq!(report["turn"]["status"], status);
        assert_eq!(report["turn"]["stop_reason"], "tool_calls");
        assert_eq!(root.path().join("notes.txt").exists(), code == 0, "{limit}");
    }
    let root = tempfile::tempdir().unwrap();
    let body =
        std::fs::read_to_string(fixture("streams/constructed/anthropic_whole_tool_use.json"))
            .unwrap();
    let out = turngate()
        .args(["run", "--provider", "anthropic", "--root"])
        .arg(root.path())
        .arg(&body)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "hello"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Writing the file.");
}

#[test]
fn run_shows_each_call_kind_and_answers_every_client_item() {
    let root = tempfile::tempdir().unwrap();
    let (code, report) = run_fixture(
        root.path(),
        "openai-responses",
        "streams/constructed/openai_responses_client_items.sse",
    );
    assert_eq!(code, Some(2), "completed, with call errors: {report}");
    assert_eq!(report["turn"]["status"], "completed");
    let calls = report["calls"].as_array().unwrap();
    let kinds: Vec<&str> = calls.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "local_shell",
            "shell",
            "apply_patch",
            "custom_tool",
            "tool_search",
            "computer",
            "mcp_approval",
            "function"
        ]
    );
    for call in &calls[..7] {
        assert_eq!(call["status"], "error", "{call}");
        assert!(
            call["reason"].as_str().unwrap().contains("does not run"),
            "{call}"
        );
        for key in ["id", "name"] {
            assert!(call[key].is_string(), "{call}: {key} kept");
        }
    }
    assert_eq!(calls[7]["status"], "ok");
    let history = report["history"].as_array().unwrap();
    let answered: Vec<&str> = history[history.len() - 8..]
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        answered,
        [
            "local_shell_call_output",
            "shell_call_output",
            "apply_patch_call_output",
            "custom_tool_call_output",
            "tool_search_output",
            "computer_call_output",
            "mcp_approval_response",
            "function_call_output"
        ]
    );
}

#[test]
fn run_understands_every_real_provider_turn() {
    for (provider, file, code, status, kinds_statuses) in [
        (
            "anthropic",
            "anthropic_message_start_content.sse",
            0,
            "completed",
            &[("function", "ok")][..],
        ),
        (
            "openai-responses",
            "openai_responses_program_function_call.sse",
            0,
            "completed",
            &[("function", "ok")],
        ),
        (
            "openai-responses",
            "openai_responses_incomplete_item_left_out.sse",
            3,
            "truncated",
            &[("function", "not_run")],
        ),
        (
            "openai-responses",
            "openai_responses_item_id_per_event.sse",
            0,
            "completed",
            &[("function", "ok")],
        ),
        (
            "openai-chat",
            "openai_chat_mistral_whole_calls.sse",
            2,
            "completed",
            &[("function", "ok"), ("function", "error")],
        ),
        (
            "openai-chat",
            "openai_chat_magistral_thinking_chunks.sse",
            0,
            "completed",
            &[("function", "ok")],
        ),
        (
            "openai-chat",
            "openai_chat_deepseek_reasoning_content.sse",
            0,
            "completed",
            &[("function", "ok")],
        ),
        (
            "openai-chat",
            "openai_chat_xai_reasoning_content.sse",
            0,
            "completed",
            &[("function", "ok")],
        ),
        (
            "anthropic",
            "anthropic_duplicate_tool_use_id.sse",
            3,
            "malformed",
            &[("function", "not_run"), ("function", "not_run")],
        ),
        (
            "openai-chat",
            "openai_chat_duplicate_call_id.sse",
            3,
            "malformed",
            &[("function", "not_run"), ("function", "not_run")],
        ),
        (
            "openai-responses",
            "openai_responses_duplicate_call_id.sse",
            3,
            "malformed",
            &[("function", "not_run"), ("function", "not_run")],
        ),
        (
            "gemini",
            "gemini_duplicate_ids.sse",
            3,
            "malformed",
            &[("function", "not_run"), ("function", "not_run")],
        ),
    ] {
        let root = tempfile::tempdir().unwrap();
        let (got, report) = run_fixture(
            root.path(),
            provider,
            &format!("streams/constructed/{file}"),
        );
        assert_eq!(got, Some(code), "{file}: {report}");
        assert_eq!(report["turn"]["status"], status, "{file}");
        let calls: Vec<(&str, &str)> = report["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["kind"].as_str().unwrap(), c["status"].as_str().unwrap()))
            .collect();
        assert_eq!(calls, kinds_statuses, "{file}");
        let history = report["history"].as_array().unwrap();
        if status == "completed" {
            let ids: Vec<Value> = report["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].clone())
                .collect();
            // Anthropic tool_result blocks, OpenAI Chat tool messages, Responses function_call_output items.
            let mut answered = Vec::new();
            for m in history {
                for block in m["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        answered.push(block["tool_use_id"].clone());
                    }
                }
                if m["role"] == "tool" {
                    answered.push(m["tool_call_id"].clone());
                }
                if m["type"] == "function_call_output" {
                    answered.push(m["call_id"].clone());
                }
            }
            assert_eq!(answered, ids, "{file}: one answer per call ID");
        } else {
            assert!(history.is_empty(), "{file}");
        }
    }
}

#[test]
fn demo_shows_a_dropped_and_a_truncated_turn_per_provider_and_neither_writes() {
    let out = turngate().arg("demo").output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{table}");
    for provider in ["anthropic", "openai-chat", "openai-responses", "gemini"] {
        for (case, status) in [
            ("dropped, tool JSON parses", "incomplete"),
            ("output limit, JSON parses", "truncated"),
        ] {
            let row = table
                .lines()
                .find(|l| l.starts_with(provider) && l.contains(case))
                .unwrap_or_else(|| panic!("{provider} {case}: no row in\n{table}"));
            assert!(row.contains(status), "{row}");
            assert!(
                row.contains("not_run") && row.ends_with("unchanged"),
                "{row}"
            );
        }
    }
}

/// Whether `root` has a journal with any call in it.
fn journaled(root: &std::path::Path) -> bool {
    let (code, lines) = journal_command(&["journal"], root);
    assert_eq!(code, Some(0));
    !lines.is_empty()
}

/// Ctrl-C while `run --review` asks on the terminal: the question is answered no at once, the call is
/// cancelled and nothing is applied or journaled, though the user types yes afterwards; exit 130.
#[test]
fn ctrl_c_while_run_asks_cancels_the_call_and_a_later_yes_applies_nothing() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "Original notes\n").unwrap();
    let mut run = turngate();
    run.args(["run", "--provider", "anthropic", "--review", "--root"])
        .arg(root.path())
        .arg(fixture("seed/anthropic_complete.sse"));
    let (code, stdout) = ctrl_c_then_yes(run, "Apply them? [y/N]");
    assert_eq!(code, Some(130), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["calls"][0]["status"], "error", "{report}");
    assert!(
        report["calls"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cancelled while the user was being asked")),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "Original notes\n"
    );
    assert!(!journaled(root.path()));
}

/// The same for `call --review`: Ctrl-C while asked, then yes: nothing applied, exit 130.
#[test]
fn ctrl_c_while_call_asks_cancels_it() {
    let root = tempfile::tempdir().unwrap();
    let mut call = turngate();
    call.args(["call", "--review", "--root"])
        .arg(root.path())
        .args(["write_file", r#"{"path":"notes.txt","content":"x"}"#]);
    let (code, stdout) = ctrl_c_then_yes(call, "Apply them? [y/N]");
    assert_eq!(code, Some(130), "{stdout}");
    let outcome: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(outcome["error"]["kind"], "cancelled", "{outcome}");
    assert!(!root.path().join("notes.txt").exists());
    assert!(!journaled(root.path()));
}

/// `call --log` appends the call's audit record, as `run --log` does: its verdict, the paths it was
/// approved for, what it changed; a refused call's record masks the query values of the URL it quotes.
#[test]
fn call_log_appends_the_calls_audit_record() {
    let root = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.jsonl");
    let log_arg = log.to_str().unwrap();
    call_write(root.path(), "notes.txt", "logged", &["--log", log_arg]);
    let refused = turngate()
        .args(["call", "--log", log_arg, "--root"])
        .arg(root.path())
        .args(["fetch", r#"{"url":"https://api.test/x?key=s3cret"}"#])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("s3cret"));
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["type"], "call");
    assert_eq!(records[0]["verdict"], "ok");
    assert_eq!(records[0]["paths"][0]["path"], "notes.txt");
    assert_eq!(records[0]["changes"][0]["path"], "notes.txt");
    assert_eq!(records[1]["verdict"], "error");
    assert_eq!(records[1]["step"], "url");
    let reason = records[1]["reason"].as_str().unwrap();
    assert!(reason.contains("https://api.test/x?key=***"), "{reason}");
    assert!(!std::fs::read_to_string(&log).unwrap().contains("s3cret"));
}

#[test]
fn every_printing_command_ends_quietly_with_its_own_exit_status_when_its_reader_is_gone() {
    // As `turngate tools list | true`: the reader is gone before the first line. Each command must
    // end as it would have (its exit status), without a panic or a message about the pipe.
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap().to_owned();
    let seed = fixture("seed/anthropic_complete.sse");
    let ro = env!("TURNGATE_TEST_GUEST_HOSTILE_RO");
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_NOOP"),
        tools.path().join("noop.wasm"),
    )
    .unwrap();
    let tools_arg = tools.path().to_str().unwrap().to_owned();
    let cases: [(&str, Vec<&str>, i32); 11] = [
        ("demo", vec!["demo"], 0),
        ("tools list", vec!["tools", "list"], 0),
        ("tools inspect", vec!["tools", "inspect", ro], 0),
        ("tools check", vec!["tools", "check", ro], 0),
        (
            "tools lock",
            vec!["tools", "lock", "--tools", &tools_arg],
            0,
        ),
        (
            "call",
            vec![
                "call",
                "--root",
                &root_arg,
                "write_file",
                r#"{"path":"a.txt","content":"a"}"#,
            ],
            0,
        ),
        (
            "run",
            vec![
                "run",
                "--provider",
                "anthropic",
                "--root",
                &root_arg,
                seed.to_str().unwrap(),
            ],
            0,
        ),
        ("journal", vec!["journal", "--root", &root_arg], 0),
        ("undo", vec!["undo", "--root", &root_arg, "--last"], 0),
        ("help", vec!["--help"], 0),
        ("version", vec!["--version"], 0),
    ];
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|(what, args, expected)| {
            common::pipe::ends_quietly(turngate().args(&args), expected)
                .err()
                .map(|e| format!("{what}: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
