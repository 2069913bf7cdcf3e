//! The turn gate end to end: every fixture through `process_turn`, a stream fed slowly through a pipe,
//! a symlink swapped in between the gate's check and the run, and generated paths.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::streams::{all_fixtures, read_fixture, tool_use_turn_of};
use common::{Workspace, bundled, hash_tree, results_in};
use proptest::prelude::*;
use serde_json::{Value, json};
use turngate::gate::check_call;
use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::scope::check_path;
use turngate::{
    ApprovalFuture, ApprovalRequest, Approver, AskedBecause, Asking, CallError, CallStatus, Policy,
    Provider, RunError, TurnHooks, TurnOptions, process_turn, process_turn_with,
};

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn every_fixture_runs_nothing_unless_completed_and_answers_each_call_once() {
    let mut seen = BTreeMap::new();
    for (file, provider) in all_fixtures() {
        let forced = file.contains("forced_tool");
        let options = DecoderOptions {
            forced_tool_choice: forced,
            ..DecoderOptions::default()
        };
        let mut decoder = TurnDecoder::with_options(provider, options);
        decoder.feed(&read_fixture(&file));
        let turn = decoder.finish();
        // Many fixtures ask write_file for notes.txt: a fresh root per fixture shows what each one did.
        let ws = Workspace::new();
        let report = block_on(process_turn(
            bundled(),
            &ws.root,
            &Policy::allow_all(),
            turn,
            TurnOptions::default(),
        ));
        *seen.entry(report.turn.ending.status.as_str()).or_insert(0) += 1;
        if !report.turn.is_completed() {
            assert!(
                hash_tree(&ws.root_path()).is_empty(),
                "{file}: a turn that did not complete wrote"
            );
            assert!(
                report.history.is_empty(),
                "{file}: history of a turn that did not complete"
            );
            assert!(
                report.calls.iter().all(|c| c.status == CallStatus::NotRun),
                "{file}"
            );
            continue;
        }
        let expected: Vec<Option<String>> = report
            .turn
            .calls
            .iter()
            .filter(|c| c.id.is_some() || provider == Provider::Gemini)
            .map(|c| c.id.clone())
            .collect();
        // The answers follow the assistant turn (one message, or the Responses items).
        let answers_from = match &report.turn.assistant {
            Value::Array(items) if provider == Provider::OpenAiResponses => items.len(),
            _ => 1,
        };
        assert_eq!(
            results_in(provider, &report.history[answers_from..])
                .into_iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            expected,
            "{file}: one result per call ID, in order"
        );
        let assistant = match (provider, &report.turn.assistant) {
            (Provider::OpenAiResponses, Value::Array(items)) => {
                Value::Array(report.history[..items.len()].to_vec())
            }
            _ => report.history[0].clone(),
        };
        assert_eq!(
            assistant, report.turn.assistant,
            "{file}: the assistant turn goes back unchanged"
        );
    }
    for status in [
        "completed",
        "truncated",
        "refused",
        "filtered",
        "errored",
        "malformed",
        "incomplete",
    ] {
        assert!(
            seen.contains_key(status),
            "no fixture ends {status}: {seen:?}"
        );
    }
}

/// Where each provider's seed stream ends its turn: the bytes before this marker hold a complete call.
/// Gemini has no terminator but the end of the stream, so its whole body goes first.
fn ending_marker(provider: &str) -> Option<&'static str> {
    match provider {
        "anthropic" => Some("event: message_delta"),
        "openai-chat" => Some(
            "data: {\"id\": \"chatcmpl-seed\", \"object\": \"chat.completion.chunk\", \"created\": 1764460800, \"model\": \"gpt-seed\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"tool_calls\"}]}",
        ),
        "openai-responses" => Some("event: response.completed"),
        _ => None,
    }
}

/// Feeds the seed stream's first part through a pipe, waits while the call is complete but the ending
/// has not arrived, then either sends the ending or cuts the stream.
fn slow_pipe(provider: &str, send_ending: bool) {
    let body = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../tests/fixtures/seed/{provider}_complete.sse")),
    )
    .unwrap();
    let split = ending_marker(provider).map_or(body.len(), |m| {
        body.find(m).expect("marker in the seed stream")
    });
    let (head, tail) = body.split_at(split);
    let ws = Workspace::new();
    ws.write("notes.txt", "Original notes\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .args(["run", "--provider", provider, "--root"])
        .arg(ws.root_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(head.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The text delta echoed on stderr proves the process has read and decoded the head.
    let mut stderr = child.stderr.take().unwrap();
    let (echo_tx, echo_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 || echo_tx.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut echoed = Vec::new();
    while !String::from_utf8_lossy(&echoed).contains("notes") {
        let chunk = echo_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{provider}: no echo"));
        echoed.extend(chunk);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        ws.read("notes.txt"),
        "Original notes\n",
        "{provider}: written before the ending arrived"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "{provider}: finished before the stream ended"
    );
    if send_ending {
        stdin.write_all(tail.as_bytes()).unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    if send_ending {
        assert_eq!(output.status.code(), Some(0), "{provider}: {report}");
        assert_eq!(
            ws.read("notes.txt"),
            "Final notes\n",
            "{provider}: written after the ending"
        );
    } else if provider == "gemini" {
        // Gemini's whole body was sent: the end of the stream is its ending.
        assert_eq!(output.status.code(), Some(0), "{provider}: {report}");
    } else {
        assert_eq!(output.status.code(), Some(3), "{provider}: {report}");
        assert_eq!(
            ws.read("notes.txt"),
            "Original notes\n",
            "{provider}: a cut-off turn never writes"
        );
    }
}

#[test]
fn a_slow_stream_writes_only_after_its_normal_ending() {
    for provider in ["anthropic", "openai-chat", "openai-responses", "gemini"] {
        slow_pipe(provider, true);
    }
}

#[test]
fn a_slow_stream_cut_before_its_ending_never_writes() {
    for provider in ["anthropic", "openai-chat", "openai-responses"] {
        slow_pipe(provider, false);
    }
}

#[test]
fn a_symlink_swapped_in_after_the_gate_is_stopped_by_the_sandbox() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.root_path().join("drafts")).unwrap();
    let approved = check_call(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        "write_file",
        r#"{"path":"drafts/notes.txt","content":"swapped"}"#,
    )
    .expect("the gate approves a path inside the root");
    // The race: the directory becomes a symlink to the outside after the check.
    std::fs::remove_dir(ws.root_path().join("drafts")).unwrap();
    std::os::unix::fs::symlink("../outside", ws.root_path().join("drafts")).unwrap();
    let before = hash_tree(&ws.outside_path());
    let outcome = block_on(bundled().run(&ws.root, &Policy::allow_all(), &approved));
    assert!(
        matches!(outcome.result, Err(CallError::Run(RunError::Tool(_)))),
        "{:?}",
        outcome.result
    );
    assert_eq!(
        hash_tree(&ws.outside_path()),
        before,
        "the outside is unchanged"
    );
    assert!(!ws.outside_path().join("notes.txt").exists());
}

/// A fixed tree for the path property: real directories, and symlinks inside and out.
fn path_workspace() -> Workspace {
    let ws = Workspace::new();
    let root = ws.root_path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/file.txt"), "x").unwrap();
    std::os::unix::fs::symlink("a", root.join("in")).unwrap();
    std::os::unix::fs::symlink("../../outside", root.join("a/out")).unwrap();
    std::os::unix::fs::symlink(ws.outside_path(), root.join("abs")).unwrap();
    std::os::unix::fs::symlink("b/../../..", root.join("a/up")).unwrap();
    ws
}

fn component() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a", "b", "file.txt", "in", "out", "abs", "up", "..", ".", "", "new", "x\0y", "outside",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any path the gate accepts really resolves beneath the root: its longest existing prefix,
    /// canonicalized by the operating system, stays inside.
    #[test]
    fn accepted_paths_resolve_beneath_the_root(parts in prop::collection::vec(component(), 1..6), absolute in any::<bool>()) {
        static WS: std::sync::OnceLock<Workspace> = std::sync::OnceLock::new();
        let ws = WS.get_or_init(path_workspace);
        let path = format!("{}{}", if absolute { "/" } else { "" }, parts.join("/"));
        let root = std::fs::canonicalize(ws.root_path()).unwrap();
        if let Ok(scoped) = check_path(&ws.root, &path, false) {
            prop_assert!(!absolute && !parts.contains(&"..") && !path.contains('\0'), "{path:?} accepted");
            let mut existing = root.clone();
            for part in scoped.location.components() {
                let next = existing.join(part);
                match std::fs::canonicalize(&next) {
                    Ok(real) => existing = real,
                    Err(_) => break,
                }
                prop_assert!(existing.starts_with(&root), "{path:?} resolves to {}", existing.display());
            }
        }
    }
}

#[test]
fn the_audit_log_records_each_applied_change_with_its_hashes() {
    let ws = Workspace::new();
    ws.write("notes.txt", "before");
    let body = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/seed/anthropic_complete.sse"),
    )
    .unwrap();
    let mut decoder = TurnDecoder::new(Provider::Anthropic);
    decoder.feed(&body);
    let report = block_on(process_turn(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        decoder.finish(),
        TurnOptions {
            audit: true,
            ..TurnOptions::default()
        },
    ));
    let records: Vec<Value> = report
        .audit
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert_eq!(records[0]["type"], "turn");
    assert_eq!(records[0]["status"], "completed");
    assert_eq!(records[0]["stop_reason"], "tool_use");
    assert_eq!(records[1]["type"], "call");
    assert_eq!(records[1]["id"], "u1");
    let sha = |s: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(s.as_bytes()));
    assert_eq!(
        records[1]["paths"],
        json!([{"path": "notes.txt", "location": "notes.txt", "access": "write"}])
    );
    assert_eq!(
        records[1]["changes"],
        json!([{
            "path": "notes.txt", "kind": "replace", "sha256_before": sha("before"), "sha256_after": sha("Final notes\n")
        }])
    );
    assert_eq!(
        records[1]["input_sha256"],
        sha(&report.turn.calls[0].raw_input)
    );
}

/// Each call of a turn sees what the calls before it applied, though the next call is gated and run
/// while the one before it applies: two directories made beneath one that neither call's view had
/// (both make it), files written into them, an edit of the file a call before wrote, a read and a
/// listing after.
#[test]
fn each_call_of_a_turn_sees_what_the_calls_before_it_applied() {
    let calls = [
        ("make_dir", json!({"path": "new/x"})),
        ("make_dir", json!({"path": "new/y"})),
        (
            "write_file",
            json!({"path": "new/x/a.txt", "content": "one\n"}),
        ),
        (
            "write_file",
            json!({"path": "new/y/b.txt", "content": "two\n"}),
        ),
        (
            "edit_file",
            json!({"path": "new/x/a.txt", "old_string": "one", "new_string": "uno"}),
        ),
        ("read_file", json!({"path": "new/x/a.txt"})),
        ("list_dir", json!({"path": "new"})),
    ];
    let ws = Workspace::new();
    let report = block_on(process_turn(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        tool_use_turn(&calls),
        TurnOptions::default(),
    ));
    for call in &report.calls {
        assert_eq!(
            call.status,
            CallStatus::Ok,
            "{}: {:?}",
            call.name,
            call.reason
        );
    }
    assert_eq!(ws.read("new/x/a.txt"), "uno\n");
    assert_eq!(ws.read("new/y/b.txt"), "two\n");
    assert!(report.calls[5].output.as_deref().unwrap().contains("uno"));
    assert_eq!(report.calls[6].output.as_deref(), Some("x/\ny/"));
}

/// An Anthropic message ending in `tool_use` whose content is `calls`, with IDs `u0`, `u1`, ...
fn tool_use_turn(calls: &[(&str, Value)]) -> turngate::Turn {
    let calls: Vec<(String, &str, Value)> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, input))| (format!("u{i}"), *name, input.clone()))
        .collect();
    tool_use_turn_of(&calls)
}

/// Approves every request after a pause, noting the order and how many were asked at once.
#[derive(Default)]
struct SlowApprover {
    asked: std::sync::Mutex<Vec<String>>,
    waiting: AtomicUsize,
    most_at_once: AtomicUsize,
}

impl Approver for SlowApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let now = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            self.asked
                .lock()
                .unwrap()
                .push(request.id.unwrap_or_default().to_owned());
            tokio::time::sleep(Duration::from_millis(30)).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            true
        })
    }
}

/// A turn whose calls may wait for the approver runs them one after another: the user is asked about
/// one call at a time, in the turn's order.
#[test]
fn the_calls_of_a_turn_that_asks_are_asked_about_one_at_a_time_in_order() {
    let policy = Policy::from_toml(
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    let calls: Vec<(&str, Value)> = (0..4)
        .map(|i| {
            (
                "write_file",
                json!({"path": format!("f{i}.txt"), "content": "x"}),
            )
        })
        .collect();
    let ws = Workspace::new();
    let approver = SlowApprover::default();
    let hooks = TurnHooks {
        approver: Some(&approver),
        cancel: None,
    };
    let report = block_on(process_turn_with(
        bundled(),
        &ws.root,
        &policy,
        tool_use_turn(&calls),
        TurnOptions::default(),
        hooks,
    ));
    assert!(report.all_ok(), "{:?}", report.calls);
    assert_eq!(*approver.asked.lock().unwrap(), ["u0", "u1", "u2", "u3"]);
    assert_eq!(approver.most_at_once.load(Ordering::SeqCst), 1);
}

/// The policy that asks before every `write_file`.
fn asking_writes() -> Policy {
    Policy::from_toml(
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap()
}

/// An approver whose questions wait together, as a page's do: it says yes to each once `together`
/// questions were asked (no after 20 s without them), noting each call's ID and diff, and the files
/// of the root when the last of them came.
struct YesOnceAllAreAsked {
    together: usize,
    root: PathBuf,
    asked: std::sync::Mutex<Vec<(String, String)>>,
    files_when_all_asked: std::sync::Mutex<Option<Vec<String>>>,
    changed: tokio::sync::Notify,
}

impl Approver for YesOnceAllAreAsked {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            {
                let mut asked = self.asked.lock().unwrap();
                asked.push((
                    request.id.unwrap_or_default().to_owned(),
                    request.diff.to_owned(),
                ));
                if asked.len() == self.together {
                    let mut files: Vec<String> = std::fs::read_dir(&self.root)
                        .unwrap()
                        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                        .filter(|name| name != ".turngate")
                        .collect();
                    files.sort();
                    *self.files_when_all_asked.lock().unwrap() = Some(files);
                }
            }
            self.changed.notify_waiters();
            loop {
                let woken = self.changed.notified();
                if self.asked.lock().unwrap().len() >= self.together {
                    return true;
                }
                if tokio::time::timeout(Duration::from_secs(20), woken)
                    .await
                    .is_err()
                {
                    return false;
                }
            }
        })
    }

    fn asking(&self) -> Asking {
        Asking::Together
    }
}

/// With an approver whose questions wait together, a turn's calls on disjoint paths are all asked
/// about before any applies; a later call on a path an earlier one writes is asked about after that
/// one applied, and its diff shows what it wrote.
#[test]
fn a_turn_s_calls_on_disjoint_paths_are_asked_about_together_before_any_applies() {
    let calls = [
        ("write_file", json!({"path": "f0.txt", "content": "x0\n"})),
        ("write_file", json!({"path": "f1.txt", "content": "x1\n"})),
        ("write_file", json!({"path": "f2.txt", "content": "x2\n"})),
        (
            "write_file",
            json!({"path": "f0.txt", "content": "again\n"}),
        ),
    ];
    let ws = Workspace::new();
    let approver = YesOnceAllAreAsked {
        together: 3,
        root: ws.root_path(),
        asked: std::sync::Mutex::default(),
        files_when_all_asked: std::sync::Mutex::default(),
        changed: tokio::sync::Notify::new(),
    };
    let hooks = TurnHooks {
        approver: Some(&approver),
        cancel: None,
    };
    let report = block_on(process_turn_with(
        bundled(),
        &ws.root,
        &asking_writes(),
        tool_use_turn(&calls),
        TurnOptions::default(),
        hooks,
    ));
    assert!(report.all_ok(), "{:?}", report.calls);
    assert_eq!(
        *approver.files_when_all_asked.lock().unwrap(),
        Some(Vec::new()),
        "three questions stood at once, and nothing had applied"
    );
    let asked = approver.asked.lock().unwrap().clone();
    let mut first: Vec<&str> = asked[..3].iter().map(|(id, _)| id.as_str()).collect();
    first.sort_unstable();
    assert_eq!(first, ["u0", "u1", "u2"]);
    assert_eq!(asked[3].0, "u3");
    assert!(
        asked[3].1.contains("-x0") && asked[3].1.contains("+again"),
        "{}",
        asked[3].1
    );
    assert_eq!(ws.read("f0.txt"), "again\n");
    assert_eq!(ws.read("f1.txt"), "x1\n");
}

/// An approver whose questions wait together and which says yes to each a while after it is asked,
/// noting the order questions were asked and answered in.
#[derive(Default)]
struct YesAfterAWhile {
    events: std::sync::Mutex<Vec<String>>,
}

impl Approver for YesAfterAWhile {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let id = request.id.unwrap_or_default().to_owned();
        self.events.lock().unwrap().push(format!("asked {id}"));
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.events.lock().unwrap().push(format!("answered {id}"));
            true
        })
    }

    fn asking(&self) -> Asking {
        Asking::Together
    }
}

/// A read asked about before it runs holds its place: a later call of the turn writing the same file
/// waits until the read ran, so the read sees the file as the turn's order says.
#[test]
fn a_read_asked_about_in_a_turn_asked_together_runs_before_a_later_write_of_its_file() {
    let policy = Policy::from_toml(
        "default = \"workspace-write\"\n[tools.read_file]\npaths = [\"**\"]\napproval = \"ask\"\n\
         [tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    let calls = [
        ("read_file", json!({"path": "notes.txt"})),
        (
            "write_file",
            json!({"path": "notes.txt", "content": "new\n"}),
        ),
    ];
    let ws = Workspace::new();
    ws.write("notes.txt", "old\n");
    let approver = YesAfterAWhile::default();
    let hooks = TurnHooks {
        approver: Some(&approver),
        cancel: None,
    };
    // Were the read to take its place only once answered, the write (holding the file, waiting for
    // the read to be done before it applies) and the read (waiting for the file) would wait forever.
    let turn = process_turn_with(
        bundled(),
        &ws.root,
        &policy,
        tool_use_turn(&calls),
        TurnOptions::default(),
        hooks,
    );
    let report = block_on(async { tokio::time::timeout(Duration::from_secs(30), turn).await })
        .expect("the turn ended");
    assert!(report.all_ok(), "{:?}", report.calls);
    let read = report.calls[0].output.as_deref().unwrap_or_default();
    assert!(read.contains("old") && !read.contains("new"), "{read}");
    assert_eq!(
        *approver.events.lock().unwrap(),
        ["asked u0", "answered u0", "asked u1", "answered u1"]
    );
    assert_eq!(ws.read("notes.txt"), "new\n");
}

/// An approver whose questions wait together and which answers `u1` at once and `u0` a while after,
/// noting whether `u1`'s file was there when it answered `u0`; with `cancel`, it cancels the turn
/// before answering `u0`.
struct AnswersTheLaterCallFirst {
    root: PathBuf,
    cancel: Option<turngate::Cancel>,
    later_answered: tokio::sync::Notify,
    later_applied_first: std::sync::Mutex<Option<bool>>,
}

impl Approver for AnswersTheLaterCallFirst {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            if request.id == Some("u1") {
                self.later_answered.notify_one();
                return true;
            }
            if tokio::time::timeout(Duration::from_secs(20), self.later_answered.notified())
                .await
                .is_err()
            {
                return false;
            }
            // Time for the yes to `u1` to apply, were nothing holding it.
            tokio::time::sleep(Duration::from_millis(300)).await;
            *self.later_applied_first.lock().unwrap() = Some(self.root.join("f1.txt").exists());
            if let Some(cancel) = &self.cancel {
                cancel.cancel();
            }
            true
        })
    }

    fn asking(&self) -> Asking {
        Asking::Together
    }
}

fn answered_later_first(
    cancel: Option<turngate::Cancel>,
) -> (Workspace, turngate::TurnReport, bool) {
    let calls = [
        ("write_file", json!({"path": "f0.txt", "content": "x0\n"})),
        ("write_file", json!({"path": "f1.txt", "content": "x1\n"})),
    ];
    let ws = Workspace::new();
    let approver = AnswersTheLaterCallFirst {
        root: ws.root_path(),
        cancel: cancel.clone(),
        later_answered: tokio::sync::Notify::new(),
        later_applied_first: std::sync::Mutex::default(),
    };
    let hooks = TurnHooks {
        approver: Some(&approver),
        cancel: cancel.as_ref(),
    };
    let report = block_on(process_turn_with(
        bundled(),
        &ws.root,
        &asking_writes(),
        tool_use_turn(&calls),
        TurnOptions::default(),
        hooks,
    ));
    let applied_first = approver.later_applied_first.lock().unwrap().unwrap();
    (ws, report, applied_first)
}

/// Answered in another order, a turn's calls asked about together still apply in the turn's order.
#[test]
fn a_turn_s_calls_asked_about_together_apply_in_its_order_whatever_order_the_answers_come_in() {
    let (ws, report, applied_first) = answered_later_first(None);
    assert!(report.all_ok(), "{:?}", report.calls);
    assert!(!applied_first, "the second call applied before the first");
    assert_eq!(ws.read("f0.txt"), "x0\n");
    assert_eq!(ws.read("f1.txt"), "x1\n");
}

/// A cancel that comes while an earlier call of the turn is asked about stops a later call already
/// answered yes: nothing applies.
#[test]
fn a_cancel_while_a_turn_s_questions_stand_together_stops_the_calls_already_answered() {
    let (ws, report, applied_first) = answered_later_first(Some(turngate::Cancel::new()));
    assert!(!applied_first);
    for call in &report.calls {
        assert_eq!(call.step, Some("cancelled"), "{call:?}");
    }
    assert!(!ws.exists("f0.txt") && !ws.exists("f1.txt"));
}

/// A turn that can be cancelled runs its calls one after another: a call after the one a cancel stopped
/// is answered `cancelled` and writes nothing, even when it would have finished first.
#[test]
fn no_call_after_the_one_a_cancel_stops_applies() {
    let toolbox = common::build(
        turngate::Toolbox::builder()
            .cache(common::test_cache())
            .component_file(env!("TURNGATE_TEST_GUEST_BUSY"))
            .unwrap(),
    );
    let calls = [
        ("busy", json!({"mode": "sleep"})),
        ("write_file", json!({"path": "after.txt", "content": "x"})),
    ];
    let ws = Workspace::new();
    let cancel = turngate::Cancel::new();
    // Cancels once the second call's file is there (only if it ran while the first still slept), or
    // after a while.
    let trigger = cancel.clone();
    let written = ws.root_path().join("after.txt");
    std::thread::spawn(move || {
        for _ in 0..60 {
            if written.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        trigger.cancel();
    });
    let hooks = TurnHooks {
        approver: None,
        cancel: Some(&cancel),
    };
    let options = TurnOptions {
        audit: true,
        ..TurnOptions::default()
    };
    let report = block_on(process_turn_with(
        &toolbox,
        &ws.root,
        &Policy::allow_all(),
        tool_use_turn(&calls),
        options,
        hooks,
    ));
    // The first call was running (it ran for a while) when the cancel stopped it.
    assert_eq!(
        report.calls[0].step,
        Some("cancelled"),
        "{:?}",
        report.calls[0]
    );
    let ran = report.audit.iter().find_map(|record| match record {
        turngate::audit::AuditRecord::Call(call) if call.id.as_deref() == Some("u0") => {
            call.duration_ms
        }
        _ => None,
    });
    assert!(ran.is_some_and(|ms| ms > 0.0), "{:?}", report.audit);
    assert_eq!(
        report.calls[1].step,
        Some("cancelled"),
        "{:?}",
        report.calls[1]
    );
    assert!(!ws.exists("after.txt"));
}

/// Says yes to every question, but cancels the turn when it is asked its `at`-th (counting from 1):
/// a user who pressed stop while the question was open and then clicked yes.
struct CancelsThenSaysYes {
    cancel: turngate::Cancel,
    at: usize,
    asked: AtomicUsize,
}

impl Approver for CancelsThenSaysYes {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        // Asked under `review`, of a tool the policy does not mark: the question says so.
        assert_eq!(request.asked_because, AskedBecause::Review);
        assert_eq!(
            request.provenance.map(|p| p.origin.as_str()),
            Some("bundled")
        );
        if self.asked.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            self.cancel.cancel();
        }
        Box::pin(async { true })
    }
}

/// The journal's entries on a root (every applied call).
fn journaled(ws: &Workspace) -> usize {
    turngate::Journal::open(&ws.root, turngate::Retention::default())
        .unwrap()
        .entries()
        .unwrap()
        .len()
}

/// A cancel that comes while the user is asked wins over their yes: the call it came during applies
/// nothing and is answered `cancelled`, and so is every call after it.
#[test]
fn a_cancel_while_the_user_is_asked_wins_over_their_yes() {
    let calls: Vec<(&str, Value)> = (0..60)
        .map(|i| {
            (
                "write_file",
                json!({"path": format!("f{i:02}.txt"), "content": "x"}),
            )
        })
        .collect();
    let ws = Workspace::new();
    let cancel = turngate::Cancel::new();
    let approver = CancelsThenSaysYes {
        cancel: cancel.clone(),
        at: 50,
        asked: AtomicUsize::new(0),
    };
    let hooks = TurnHooks {
        approver: Some(&approver),
        cancel: Some(&cancel),
    };
    let options = TurnOptions {
        review: true,
        ..TurnOptions::default()
    };
    let report = block_on(process_turn_with(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        tool_use_turn(&calls),
        options,
        hooks,
    ));
    for (i, call) in report.calls.iter().enumerate() {
        if i < 49 {
            assert_eq!(call.status, CallStatus::Ok, "{call:?}");
        } else {
            assert_eq!(call.step, Some("cancelled"), "{call:?}");
        }
    }
    assert!(
        report.calls[49]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("while the user was being asked")),
        "{:?}",
        report.calls[49]
    );
    assert_eq!(
        approver.asked.load(Ordering::SeqCst),
        50,
        "nobody asked after the cancel"
    );
    assert!(ws.exists("f48.txt"));
    assert!(
        !ws.exists("f49.txt"),
        "the call the user said yes to after the cancel applied"
    );
    assert_eq!(ws.names().len(), 49);
    assert_eq!(journaled(&ws), 49);
    assert!(ws.no_staging_left());
}

/// Answers yes after a second, unless its question is dropped first; tells when it is asked and
/// notes whether it answered.
#[derive(Default)]
struct AnswersLate {
    asked: tokio::sync::Notify,
    answered: std::sync::atomic::AtomicBool,
}

impl Approver for AnswersLate {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            self.asked.notify_one();
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.answered.store(true, Ordering::SeqCst);
            true
        })
    }
}

/// A cancel ends the wait for the user at once: the question is dropped unanswered, and the call,
/// a read asked about before it runs or a write asked about after, is cancelled with nothing applied.
#[test]
fn a_cancel_stops_the_wait_for_the_user_and_nothing_applies() {
    let policy = Policy::from_toml(
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n\
         [tools.read_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    for (tool, input, stage) in [
        (
            "write_file",
            json!({"path": "notes.txt", "content": "new"}),
            "approval",
        ),
        ("read_file", json!({"path": "notes.txt"}), "approval"),
    ] {
        let ws = Workspace::new();
        ws.write("notes.txt", "old");
        let effects = turngate::Effects::default();
        let cancel = turngate::Cancel::new();
        let approver = AnswersLate::default();
        let mut context = turngate::CallContext::new(&ws.root, &policy, &effects);
        context.approver = Some(&approver);
        context.cancel = Some(&cancel);
        // Cancels once the question is open.
        let input = input.to_string();
        // Built outside the runtime below (the first test to ask builds it on a runtime of its own).
        let toolbox = bundled();
        let outcome = block_on(async {
            let call = toolbox.call_in(&mut context, tool, &input);
            let stop = async {
                approver.asked.notified().await;
                cancel.cancel();
                std::future::pending::<()>().await
            };
            tokio::select! {
                outcome = call => outcome,
                () = stop => unreachable!(),
            }
        });
        let error = outcome.result.expect_err("cancelled");
        assert_eq!(
            (error.stage(), error.kind()),
            (stage, "cancelled"),
            "{tool}: {error}"
        );
        assert!(
            !approver.answered.load(Ordering::SeqCst),
            "{tool}: the call waited for the user's answer after the cancel"
        );
        assert_eq!(ws.read("notes.txt"), "old", "{tool}");
        assert_eq!(journaled(&ws), 0, "{tool}");
        assert!(ws.no_staging_left(), "{tool}");
    }
}

/// Decodes a fixture and runs it through the turn gate on a fresh root holding `notes.txt`.
fn gate_fixture(file: &str, provider: Provider) -> (turngate::TurnReport, Workspace) {
    let mut decoder = TurnDecoder::new(provider);
    decoder.feed(&read_fixture(file));
    let ws = Workspace::new();
    ws.write("notes.txt", "Original notes\n");
    let report = block_on(process_turn(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        decoder.finish(),
        TurnOptions::default(),
    ));
    (report, ws)
}

/// Each call's (kind, status), as the CLI prints them.
fn verdicts(report: &turngate::TurnReport) -> Vec<(String, String)> {
    report
        .calls
        .iter()
        .map(|c| {
            let v = serde_json::to_value(c).unwrap();
            (
                v["kind"].as_str().unwrap().to_owned(),
                v["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn anthropic_content_whole_in_message_start_runs_and_is_answered() {
    let (report, ws) = gate_fixture(
        "constructed/anthropic_message_start_content.sse",
        Provider::Anthropic,
    );
    assert_eq!(report.turn.ending.status, turngate::TurnStatus::Completed);
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(ws.read("notes.txt"), "hello");
    assert_eq!(report.history.len(), 2);
    assert_eq!(report.history[1]["content"][0]["type"], "tool_result");
    assert_eq!(
        report.history[1]["content"][0]["tool_use_id"],
        "toolu_CONSTRUCTED_pt"
    );
    assert_eq!(report.history[1]["content"][0]["is_error"], false);
}

#[test]
fn a_program_made_responses_call_runs_and_its_answer_names_the_program() {
    let (report, ws) = gate_fixture(
        "constructed/openai_responses_program_function_call.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(ws.read("notes.txt"), "hi");
    let answer = &report.history[2];
    assert_eq!(answer["type"], "function_call_output");
    assert_eq!(answer["call_id"], "call_CONSTRUCTED_p");
    assert_eq!(
        answer["caller"],
        json!({"type": "program", "caller_id": "call_CONSTRUCTED_prog"})
    );
}

#[test]
fn every_responses_client_item_gets_one_refusal_in_its_own_shape_and_nothing_runs_for_it() {
    let (report, ws) = gate_fixture(
        "constructed/openai_responses_client_items.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(report.turn.ending.status, turngate::TurnStatus::Completed);
    assert_eq!(
        verdicts(&report),
        pairs(&[
            ("local_shell", "error"),
            ("shell", "error"),
            ("apply_patch", "error"),
            ("custom_tool", "error"),
            ("tool_search", "error"),
            ("computer", "error"),
            ("mcp_approval", "error"),
            ("function", "ok"),
        ])
    );
    for call in &report.calls[..7] {
        assert_eq!(call.step, Some("kind"));
        let reason = call.reason.as_deref().unwrap();
        assert!(reason.contains("does not run"), "{reason}");
    }
    assert_eq!(ws.read("notes.txt"), "hi", "only the function call wrote");
    let items = report.turn.assistant.as_array().unwrap().len();
    let answers: Vec<(&str, &str)> = report.history[items..]
        .iter()
        .map(|a| {
            let id = a
                .get("call_id")
                .or_else(|| a.get("approval_request_id"))
                .and_then(Value::as_str)
                .unwrap();
            (a["type"].as_str().unwrap(), id)
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("local_shell_call_output", "call_CONSTRUCTED_ls"),
            ("shell_call_output", "call_CONSTRUCTED_sh"),
            ("apply_patch_call_output", "call_CONSTRUCTED_ap"),
            ("custom_tool_call_output", "call_CONSTRUCTED_ct"),
            ("tool_search_output", "call_CONSTRUCTED_ts"),
            ("computer_call_output", "call_CONSTRUCTED_cu"),
            ("mcp_approval_response", "mcpr_CONSTRUCTED"),
            ("function_call_output", "call_CONSTRUCTED_r1"),
        ],
        "one answer per item, none for the hosted items"
    );
    let answer = |t: &str| {
        report.history[items..]
            .iter()
            .find(|a| a["type"] == t)
            .unwrap()
    };
    assert_eq!(answer("apply_patch_call_output")["status"], "failed");
    assert_eq!(answer("mcp_approval_response")["approve"], false);
    assert!(
        answer("mcp_approval_response")["reason"]
            .as_str()
            .unwrap()
            .contains("does not run")
    );
    assert_eq!(
        answer("shell_call_output")["output"][0]["outcome"],
        json!({"type": "exit", "exit_code": 1})
    );
    assert_eq!(answer("tool_search_output")["tools"], json!([]));
    assert_eq!(answer("tool_search_output")["status"], "incomplete");
    for t in ["local_shell_call_output", "custom_tool_call_output"] {
        assert!(
            answer(t)["output"]
                .as_str()
                .unwrap()
                .contains("does not run"),
            "{t}"
        );
    }
}

#[test]
fn a_responses_turn_cut_at_the_limit_mid_call_is_truncated_and_runs_nothing() {
    let (report, ws) = gate_fixture(
        "constructed/openai_responses_incomplete_item_left_out.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(report.turn.ending.status, turngate::TurnStatus::Truncated);
    assert_eq!(verdicts(&report), pairs(&[("function", "not_run")]));
    assert!(report.history.is_empty());
    assert_eq!(ws.read("notes.txt"), "Original notes\n");
}

#[test]
fn a_responses_turn_whose_item_ids_change_with_every_event_runs() {
    let (report, ws) = gate_fixture(
        "constructed/openai_responses_item_id_per_event.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(ws.read("notes.txt"), "hi");
    assert_eq!(report.history[2]["call_id"], "call_CONSTRUCTED_r1");
}

#[test]
fn chat_compatible_turns_run_and_keep_what_the_model_sent() {
    let (report, ws) = gate_fixture(
        "constructed/openai_chat_mistral_whole_calls.sse",
        Provider::OpenAiChat,
    );
    assert_eq!(report.turn.ending.status, turngate::TurnStatus::Completed);
    assert_eq!(ws.read("notes.txt"), "hi");
    assert_eq!(
        results_in(Provider::OpenAiChat, &report.history[1..])
            .into_iter()
            .map(|(id, _)| id.unwrap())
            .collect::<Vec<_>>(),
        ["CONSTRUCT1", "CONSTRUCT2"]
    );

    let (report, _ws) = gate_fixture(
        "constructed/openai_chat_magistral_thinking_chunks.sse",
        Provider::OpenAiChat,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(report.history[0]["content"][0]["type"], "thinking");
    assert_eq!(report.history[1]["tool_call_id"], "CONSTRUCT1");

    let (report, _ws) = gate_fixture(
        "constructed/openai_chat_deepseek_reasoning_content.sse",
        Provider::OpenAiChat,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(
        report.history[0]["reasoning_content"],
        "The user wants the notes saved."
    );
}

#[test]
fn a_turn_with_repeated_call_ids_runs_nothing_for_every_provider() {
    for (file, provider) in [
        (
            "constructed/anthropic_duplicate_tool_use_id.sse",
            Provider::Anthropic,
        ),
        (
            "constructed/openai_chat_duplicate_call_id.sse",
            Provider::OpenAiChat,
        ),
        (
            "constructed/openai_responses_duplicate_call_id.sse",
            Provider::OpenAiResponses,
        ),
        ("constructed/gemini_duplicate_ids.sse", Provider::Gemini),
    ] {
        let (report, ws) = gate_fixture(file, provider);
        assert_eq!(
            report.turn.ending.status,
            turngate::TurnStatus::Malformed,
            "{file}"
        );
        assert!(
            report.calls.iter().all(|c| c.status == CallStatus::NotRun),
            "{file}"
        );
        assert!(report.history.is_empty(), "{file}");
        assert_eq!(ws.read("notes.txt"), "Original notes\n", "{file}");
        assert!(!ws.exists("a.txt") && !ws.exists("b.txt"), "{file}");
    }
}

/// A whole JSON response body (no stream) goes through the same gate: a complete one writes once and is
/// answered; one cut at the limit, refused, filtered or not one strict JSON value runs nothing; a call whose
/// arguments are not valid JSON is refused by the gate, as when streamed.
#[test]
fn whole_json_bodies_run_only_when_complete() {
    for (file, provider) in [
        (
            "constructed/anthropic_whole_tool_use.json",
            Provider::Anthropic,
        ),
        (
            "constructed/openai_chat_whole_tool_calls.json",
            Provider::OpenAiChat,
        ),
        (
            "constructed/openai_responses_whole_function_call.json",
            Provider::OpenAiResponses,
        ),
        (
            "constructed/gemini_whole_generate_content.json",
            Provider::Gemini,
        ),
        (
            "constructed/gemini_whole_stream_array.json",
            Provider::Gemini,
        ),
    ] {
        let (report, ws) = gate_fixture(file, provider);
        assert_eq!(verdicts(&report), pairs(&[("function", "ok")]), "{file}");
        assert_eq!(ws.read("notes.txt"), "hello", "{file}");
        let answers_from = match &report.turn.assistant {
            Value::Array(items) => items.len(),
            _ => 1,
        };
        assert_eq!(
            results_in(provider, &report.history[answers_from..]).len(),
            1,
            "{file}: one answer"
        );
    }
    for (file, provider) in [
        (
            "constructed/anthropic_whole_max_tokens.json",
            Provider::Anthropic,
        ),
        (
            "constructed/anthropic_whole_refusal.json",
            Provider::Anthropic,
        ),
        (
            "constructed/anthropic_whole_duplicate_key.json",
            Provider::Anthropic,
        ),
        (
            "constructed/anthropic_whole_trailing_data.json",
            Provider::Anthropic,
        ),
        (
            "constructed/openai_chat_whole_length.json",
            Provider::OpenAiChat,
        ),
        (
            "constructed/openai_chat_whole_refusal.json",
            Provider::OpenAiChat,
        ),
        (
            "constructed/openai_responses_whole_incomplete.json",
            Provider::OpenAiResponses,
        ),
        (
            "constructed/openai_responses_whole_refusal.json",
            Provider::OpenAiResponses,
        ),
        ("constructed/gemini_whole_max_tokens.json", Provider::Gemini),
        ("constructed/gemini_whole_safety.json", Provider::Gemini),
        (
            "constructed/gemini_whole_prompt_blocked.json",
            Provider::Gemini,
        ),
        (
            "constructed/gemini_whole_array_trailing_comma.json",
            Provider::Gemini,
        ),
    ] {
        let (report, ws) = gate_fixture(file, provider);
        assert!(!report.turn.is_completed(), "{file}");
        assert!(
            report.calls.iter().all(|c| c.status == CallStatus::NotRun),
            "{file}"
        );
        assert!(report.history.is_empty(), "{file}");
        assert_eq!(ws.read("notes.txt"), "Original notes\n", "{file}");
    }
    let (report, ws) = gate_fixture(
        "constructed/openai_chat_whole_bad_arguments.json",
        Provider::OpenAiChat,
    );
    assert!(report.turn.is_completed());
    assert_eq!(verdicts(&report), pairs(&[("function", "error")]));
    assert_eq!(ws.read("notes.txt"), "Original notes\n");
}

/// OpenRouter's Responses stream ends with `data: [DONE]` after `response.completed`: the turn completes and
/// its call runs; OpenRouter's Chat stream carries signed `reasoning_details`, which the history keeps.
#[test]
fn gateway_streams_run_and_keep_their_reasoning_in_the_history() {
    let (report, ws) = gate_fixture(
        "constructed/openai_responses_openrouter_done.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(ws.read("notes.txt"), "hi");
    let (report, ws) = gate_fixture(
        "constructed/openai_chat_openrouter_reasoning_details.sse",
        Provider::OpenAiChat,
    );
    assert_eq!(verdicts(&report), pairs(&[("function", "ok")]));
    assert_eq!(ws.read("notes.txt"), "hi");
    let message = &report.history[0];
    assert_eq!(
        message["reasoning_details"][0]["signature"],
        "CONSTRUCTED_claude_sig=="
    );
    assert_eq!(
        message["reasoning_details"][0]["text"],
        "The user wants notes."
    );
    assert_eq!(
        message["reasoning_details"][1]["data"],
        "CONSTRUCTED_redacted=="
    );
    assert_eq!(message["reasoning"], "The user wants notes.");
    assert_eq!(report.history[1]["tool_call_id"], "toolu_CONSTRUCTED_or");
}

/// xAI's server-run X searches stay in the history as the assistant's items, unanswered; a client
/// `custom_tool_call` of the same response is answered (with an error: nothing here runs that kind).
#[test]
fn xai_server_searches_get_no_answer_and_a_client_custom_tool_call_does() {
    let (report, _ws) = gate_fixture(
        "constructed/openai_responses_xai_search.sse",
        Provider::OpenAiResponses,
    );
    assert!(report.turn.is_completed());
    assert!(report.calls.is_empty());
    assert_eq!(
        report.history,
        report.turn.assistant.as_array().unwrap().clone()
    );
    let (report, _ws) = gate_fixture(
        "constructed/openai_responses_xai_search_and_client_custom_tool.sse",
        Provider::OpenAiResponses,
    );
    assert_eq!(verdicts(&report), pairs(&[("custom_tool", "error")]));
    let answers: Vec<&Value> = report
        .history
        .iter()
        .filter(|item| item["type"] == "custom_tool_call_output")
        .collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["call_id"], "call_CONSTRUCTED_ctc");
}

/// vLLM answered `finish_reason: "tool_calls"` for a turn cut at the output limit (the arguments parse,
/// with a cut value): with the limit known, nothing runs.
#[test]
fn a_tool_calls_turn_whose_usage_reached_the_limit_runs_nothing() {
    let body = read_fixture("constructed/openai_chat_vllm_tool_calls_at_limit.sse");
    for (limit, writes) in [(Some(64), false), (Some(65), true), (None, true)] {
        let options = DecoderOptions {
            max_output_tokens: limit,
            ..DecoderOptions::default()
        };
        let mut decoder = TurnDecoder::with_options(Provider::OpenAiChat, options);
        decoder.feed(&body);
        let ws = Workspace::new();
        ws.write("notes.txt", "Original notes\n");
        let report = block_on(process_turn(
            bundled(),
            &ws.root,
            &Policy::allow_all(),
            decoder.finish(),
            TurnOptions::default(),
        ));
        if writes {
            assert_eq!(verdicts(&report), pairs(&[("function", "ok")]), "{limit:?}");
            assert_eq!(ws.read("notes.txt"), "Fil", "{limit:?}");
        } else {
            assert_eq!(report.turn.ending.status, turngate::TurnStatus::Truncated);
            assert_eq!(verdicts(&report), pairs(&[("function", "not_run")]));
            assert!(report.history.is_empty());
            assert_eq!(ws.read("notes.txt"), "Original notes\n");
        }
    }
}
