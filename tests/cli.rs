//! The `turngate` binary: `call` prints the outcome as JSON and exits 0, 2 or 1.

use std::process::Command;

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
