//! The seed regression check, for every provider, through `turngate run` on a temporary root holding
//! `notes.txt`: a dropped connection and a turn ended at the output limit, both after tool JSON that
//! parses, a refusal, invalid JSON and an out-of-root path each cause zero writes
//! (same hash, no execution in the audit log); a complete, valid, authorized `write_file` for call `u1`
//! writes once and returns a result for `u1` in the provider's protocol.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

use common::results_in;

const PROVIDERS: [&str; 4] = ["anthropic", "openai-chat", "openai-responses", "gemini"];
const ORIGINAL: &str = "Original notes\n";

struct Run {
    output: Output,
    report: Value,
    audit: Vec<Value>,
}

fn seed(provider: &str, case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/fixtures/seed/{provider}_{case}.sse"))
}

fn hash(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

fn run(root: &Path, provider: &str, case: &str) -> Run {
    let log = root
        .parent()
        .unwrap()
        .join(format!("{provider}-{case}.jsonl"));
    let output = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .args(["run", "--provider", provider, "--root"])
        .arg(root)
        .arg("--log")
        .arg(&log)
        .arg(seed(provider, case))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{provider} {case}: {e}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let audit = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Run {
        output,
        report,
        audit,
    }
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("notes.txt"), ORIGINAL).unwrap();
    (dir, root)
}

fn call_records(audit: &[Value]) -> Vec<&Value> {
    audit.iter().filter(|r| r["type"] == "call").collect()
}

#[test]
fn bad_turns_write_nothing_for_every_provider() {
    for provider in PROVIDERS {
        for (case, exit, status, step) in [
            ("cutoff", 3, "incomplete", None),
            ("truncated", 3, "truncated", None),
            (
                "refusal",
                3,
                if provider == "gemini" {
                    "filtered"
                } else {
                    "refused"
                },
                None,
            ),
            ("invalid", 2, "completed", Some("parse")),
            ("outside", 2, "completed", Some("path")),
        ] {
            let (_dir, root) = workspace();
            let before = hash(&root.join("notes.txt"));
            let run = run(&root, provider, case);
            let what = format!("{provider} {case}");
            assert_eq!(run.output.status.code(), Some(exit), "{what}");
            assert_eq!(run.report["turn"]["status"], status, "{what}");
            assert_eq!(
                hash(&root.join("notes.txt")),
                before,
                "{what}: notes.txt changed"
            );
            assert!(
                !root.parent().unwrap().join("outside.txt").exists(),
                "{what}"
            );
            let calls = call_records(&run.audit);
            assert_eq!(calls.len(), 1, "{what}");
            assert_ne!(calls[0]["verdict"], "ok", "{what}");
            assert_eq!(
                calls[0]["duration_ms"],
                Value::Null,
                "{what}: the audit log shows an execution"
            );
            assert_eq!(calls[0]["paths"], serde_json::json!([]), "{what}");
            assert_eq!(
                calls[0]["step"],
                step.map_or(Value::Null, Value::from),
                "{what}"
            );
            if exit == 3 {
                assert_eq!(
                    run.report["history"],
                    serde_json::json!([]),
                    "{what}: history must be empty"
                );
                assert_eq!(run.report["calls"][0]["status"], "not_run", "{what}");
            } else {
                assert_eq!(run.report["calls"][0]["status"], "error", "{what}");
            }
        }
    }
}

#[test]
fn a_complete_valid_write_runs_once_and_answers_u1_for_every_provider() {
    for provider in PROVIDERS {
        let (_dir, root) = workspace();
        let run = run(&root, provider, "complete");
        assert_eq!(
            run.output.status.code(),
            Some(0),
            "{provider}: {}",
            String::from_utf8_lossy(&run.output.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(root.join("notes.txt")).unwrap(),
            "Final notes\n",
            "{provider}"
        );
        assert_eq!(
            run.report["calls"],
            serde_json::json!([{"kind": "function", "id": "u1", "name": "write_file", "status": "ok", "reason": null,
                "changes": [{"path": "notes.txt", "kind": "replace"}]}])
        );
        let calls = call_records(&run.audit);
        assert_eq!(calls.len(), 1, "{provider}: written once");
        assert_eq!(calls[0]["verdict"], "ok");
        assert!(calls[0]["duration_ms"].is_number());
        assert_eq!(calls[0]["paths"][0]["path"], "notes.txt");
        let change = &calls[0]["changes"][0];
        assert_eq!(change["path"], "notes.txt");
        assert_eq!(change["kind"], "replace");
        assert_ne!(change["sha256_before"], change["sha256_after"]);
        let history = run.report["history"].as_array().unwrap();
        let results = results_in(provider.parse().unwrap(), history);
        assert_eq!(results.len(), 1, "{provider}: exactly one result");
        assert_eq!(results[0].0.as_deref(), Some("u1"), "{provider}");
    }
}
