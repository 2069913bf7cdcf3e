//! Least authority per call: each call sees only what the gate approved, and its effects are staged,
//! checked again, applied atomically, reviewable and undoable.
//!
//! Each test names the protection it shows; removing that protection makes it fail (see the note of the
//! issue that introduced them for how each was checked).

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use common::{HOSTILE_RO, HOSTILE_RW, Workspace, bundled, call, hash_tree, hostile};
use serde_json::{Value, json};
use turngate::effects::journal::{Journal, Retention, UndoError, UndoTarget};
use turngate::{
    ApprovalFuture, ApprovalRequest, Approver, CallContext, CallError, CallOutcome, Effects,
    Policy, Root, RunError, Toolbox,
};

/// Longest any contained operation may take before the test calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn policy(text: &str) -> Policy {
    Policy::from_toml(text).unwrap()
}

/// Runs a call on another thread and fails the test if it does not end within the watchdog.
fn call_within_watchdog(
    toolbox: &'static Toolbox,
    root: &Path,
    policy: Policy,
    tool: &'static str,
    input: Value,
) -> CallOutcome {
    let (send, receive) = mpsc::channel();
    let root = Root::open(root).unwrap();
    std::thread::spawn(move || {
        let _ = send.send(call(toolbox, &root, &policy, tool, &input.to_string()));
    });
    receive
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{tool}: not stopped within {WATCHDOG:?}"))
}

fn gate_step(outcome: &CallOutcome) -> &'static str {
    match &outcome.result {
        Err(CallError::Gate(e)) => e.step(),
        other => panic!("expected a gate refusal, got {other:?}"),
    }
}

fn tool_error(outcome: &CallOutcome) -> String {
    match &outcome.result {
        Err(CallError::Run(RunError::Tool(e))) => e.to_string(),
        other => panic!("expected a tool error, got {other:?}"),
    }
}

/// A root with `public/`, `private/`, a file link `public/peek -> ../private/secret.txt` and a
/// directory link `drafts -> private`, both inside the root.
fn linked_workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("public/readme.txt", "public\n");
    ws.write("private/secret.txt", "private secret\n");
    ws.write("private/keep.txt", "keep\n");
    let root = ws.root_path();
    std::os::unix::fs::symlink("../private/secret.txt", root.join("public/peek")).unwrap();
    std::os::unix::fs::symlink("private", root.join("drafts")).unwrap();
    ws
}

const PUBLIC_ONLY: &str = r#"
    [tools.read_file]
    paths = ["public/**"]
    [tools.edit_file]
    paths = ["public/**"]
    [tools.write_file]
    paths = ["drafts/**"]
    [tools.hostile_ro]
    paths = ["public/**"]
    [tools.hostile_rw]
    paths = ["public/**", "drafts/**"]
    [tools.hostile_ro_p3]
    paths = ["public/**"]
    [tools.hostile_rw_p3]
    paths = ["public/**", "drafts/**"]
"#;

#[test]
fn reading_through_a_file_link_is_held_to_where_it_leads() {
    let ws = linked_workspace();
    let policy = policy(PUBLIC_ONLY);
    let outcome = call(
        bundled(),
        &ws.root,
        &policy,
        "read_file",
        r#"{"path":"public/peek"}"#,
    );
    assert_eq!(gate_step(&outcome), "policy");
    for tool in HOSTILE_RO {
        // The same link opened at run time, through an undeclared field, inside an approved directory.
        let outcome = call(
            hostile(),
            &ws.root,
            &policy,
            tool,
            r#"{"attack":"read","path":"public","arg":"public/peek"}"#,
        );
        let error = tool_error(&outcome);
        assert!(!error.contains("private secret"), "{tool}: {error}");
        // The control case: the plain file next to it reads.
        let outcome = call(
            hostile(),
            &ws.root,
            &policy,
            tool,
            r#"{"attack":"read","path":"public","arg":"public/readme.txt"}"#,
        );
        assert_eq!(outcome.result.unwrap(), "ESCAPED read: public\n", "{tool}");
    }
}

#[test]
fn writing_through_a_directory_link_is_held_to_where_it_leads() {
    let ws = linked_workspace();
    let before = ws.tree();
    let outcome = call(
        bundled(),
        &ws.root,
        &policy(PUBLIC_ONLY),
        "write_file",
        r#"{"path":"drafts/keep.txt","content":"PWNED"}"#,
    );
    assert_eq!(gate_step(&outcome), "policy");
    assert_eq!(ws.tree(), before);
    assert_eq!(ws.read("private/keep.txt"), "keep\n");
}

#[test]
fn editing_through_a_file_link_is_held_to_where_it_leads() {
    let ws = linked_workspace();
    let before = ws.tree();
    let outcome = call(
        bundled(),
        &ws.root,
        &policy(PUBLIC_ONLY),
        "edit_file",
        r#"{"path":"public/peek","old_string":"private","new_string":"copied"}"#,
    );
    assert_eq!(gate_step(&outcome), "policy");
    assert_eq!(ws.tree(), before, "nothing copied into the allowed path");
}

#[test]
fn a_writing_tool_reaches_nothing_it_was_not_approved_for() {
    // hostile_rw is approved for drafts/ok.txt only; its undeclared `arg` goes for the rest of the root.
    let ws = Workspace::new();
    ws.write("drafts/ok.txt", "ok\n");
    ws.write("private/secret.txt", "private secret\n");
    let before = ws.tree();
    for tool in HOSTILE_RW {
        for attack in ["read", "write", "append"] {
            let outcome = call(
                hostile(),
                &ws.root,
                &Policy::allow_all(),
                tool,
                &json!({"attack": attack, "path": "drafts/ok.txt", "arg": "private/secret.txt"})
                    .to_string(),
            );
            let error = tool_error(&outcome);
            assert!(
                !error.contains("private secret"),
                "{tool} {attack}: {error}"
            );
        }
        let walked = call(
            hostile(),
            &ws.root,
            &Policy::allow_all(),
            tool,
            r#"{"attack":"walk","path":"drafts/ok.txt","arg":"."}"#,
        );
        let seen = walked.result.unwrap();
        assert!(!seen.contains("private"), "{tool}: {seen}");
        assert!(seen.contains("drafts/ok.txt: ok"), "{tool}: {seen}");
    }
    assert_eq!(ws.tree(), before, "the root is unchanged");
}

#[test]
fn a_hard_link_swapped_in_while_a_tool_reads_never_hands_it_the_outside_file() {
    // The issue's probe: while the tool reads drafts/data.txt over and over, another thread renames a
    // hard link of a file outside the root over it, then a plain file back. The view checks the entry
    // it looked up; only holding the opened descriptor to that entry keeps the swap out.
    let reads = if common::folding_roots() { 200 } else { 2000 };
    let ws = Workspace::new();
    hard_link_swapped_in_while_reading(ws, "drafts", "drafts/data.txt", "drafts/**", reads);
}

#[test]
fn a_hard_link_swapped_in_at_the_root_while_a_tool_reads_never_hands_it_the_outside_file() {
    // The same in the root itself, whose entries every call reads through one shared descriptor.
    let reads = if common::folding_roots() { 200 } else { 2000 };
    let ws = Workspace::new();
    hard_link_swapped_in_while_reading(ws, ".", "data.txt", "**", reads);
}

#[test]
#[cfg(target_os = "linux")] // the test file system is FUSE on Linux
fn a_hard_link_being_renamed_away_is_never_read_for_a_file_with_one_link() {
    // The window the view's second look closes, held open: on the test file system a rename that
    // replaces a file drops the replaced file's link at once and moves the name 30 ms later
    // (`turngate_testfs::Options::lagging_renames`), so while the plain file is renamed over the
    // hard link, a lookup of the name still finds the outside file, with a single link. Only waiting
    // for the rename to end (reading the directory's entries) before looking again keeps it out.
    let lagging = turngate_testfs::shared(turngate_testfs::Options {
        lagging_renames: true,
        ..Default::default()
    });
    let ws = Workspace::in_dir(lagging.path());
    // Each read may wait out a rename: few enough that a call ends within its 1 s limit.
    hard_link_swapped_in_while_reading(ws, "drafts", "drafts/data.txt", "drafts/**", 10);
}

/// Reads `file` (the tool approved for `path`, the policy's `grant`), `reads` times a call, over and
/// over for 4 s, while another thread swaps a hard link of an outside file in and the plain file back.
fn hard_link_swapped_in_while_reading(
    ws: Workspace,
    path: &str,
    file: &str,
    grant: &str,
    reads: usize,
) {
    ws.write(file, "inside data\n");
    let policy = policy(&format!("[tools.hostile_ro]\npaths = [\"{grant}\"]\n"));
    let target = ws.root_path().join(file);
    let spare = ws.dir.path().join("spare");
    let (outside, plain) = (ws.outside_path().join("secret.txt"), spare.join("plain"));
    std::fs::create_dir(&spare).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swaps = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    // The test plays another process swapping the file: it renames beneath the root on purpose.
    #[allow(clippy::disallowed_methods)]
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            let link = spare.join("link");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&link);
                std::fs::hard_link(&outside, &link).unwrap();
                std::fs::rename(&link, &target).unwrap();
                std::fs::write(&plain, "inside data\n").unwrap();
                std::fs::rename(&plain, &target).unwrap();
                swaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let mut seen: std::collections::BTreeMap<String, u64> = Default::default();
    let swaps_before = swaps.load(std::sync::atomic::Ordering::Relaxed);
    let started = std::time::Instant::now();
    // Each call reads within the 1 s limit: on the FUSE file system of the folding run, whose one
    // thread also serves the swaps, a read costs ten times what it does on the ordinary one.
    while started.elapsed() < Duration::from_secs(4) {
        let input = json!({"attack": "read_repeatedly", "path": path, "arg": file, "size": reads});
        let outcome = call(
            hostile(),
            &ws.root,
            &policy,
            "hostile_ro",
            &input.to_string(),
        );
        let counts: std::collections::BTreeMap<String, u64> =
            serde_json::from_str(&outcome.result.expect("the reads run")).unwrap();
        for (what, count) in counts {
            *seen.entry(what).or_default() += count;
        }
    }
    let swaps_while_reading = swaps.load(std::sync::atomic::Ordering::Relaxed) - swaps_before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        !seen.keys().any(|what| what.contains("outside secret")),
        "the outside file was read: {seen:?}"
    );
    // The race was run: files were swapped while the tool read, and some of its reads met the swapped
    // in link (and were refused) rather than only ever the plain file.
    assert!(swaps_while_reading > 0, "the swapping thread never ran");
    assert!(
        seen.keys().any(|what| what.starts_with("error: ")),
        "no read met a swap ({swaps_while_reading} swaps): {seen:?}"
    );
    assert!(
        seen.get("inside data\n").is_some_and(|n| *n > 0),
        "reads of the real file still work: {seen:?}"
    );
}

#[test]
fn a_name_the_call_may_not_see_answers_the_same_whether_it_exists_or_not() {
    // hostile_rw is approved for drafts/ok.txt only. In one root the hidden names exist, in the other
    // they do not: every operation must answer the same, so the call learns nothing of them.
    let with = Workspace::new();
    let without = Workspace::new();
    for ws in [&with, &without] {
        ws.write("drafts/ok.txt", "ok\n");
    }
    with.write("private/secret.txt", "private secret\n");
    with.write(".env", "TOKEN=1\n");
    let before = with.tree();
    for tool in HOSTILE_RW {
        let answer = |ws: &Workspace, attack: &str, arg: &str| {
            let input = json!({"attack": attack, "path": "drafts/ok.txt", "arg": arg});
            let outcome = call(
                hostile(),
                &ws.root,
                &Policy::allow_all(),
                tool,
                &input.to_string(),
            );
            match outcome.result {
                Ok(output) => format!("ok: {output}"),
                Err(error) => error.to_string(),
            }
        };
        for attack in ["create_new", "mkdir", "rename", "read"] {
            for hidden in [
                "private/secret.txt",
                ".env",
                "private/secret.txt/x",
                "private",
            ] {
                let (there, missing) = (
                    answer(&with, attack, hidden),
                    answer(&without, attack, hidden),
                );
                assert_eq!(there, missing, "{tool} {attack} {hidden}");
                assert!(
                    there.contains("no such file or directory"),
                    "{tool} {attack} {hidden}: {there}"
                );
            }
        }
        // The control: what the call may see still exists for it.
        assert!(answer(&with, "create_new", "drafts/ok.txt").contains("file exists"));
        assert!(answer(&with, "mkdir", "drafts").contains("file exists"));
    }
    assert_eq!(with.tree(), before, "nothing changed");
}

#[test]
fn special_files_are_refused_quickly_and_never_opened() {
    let ws = Workspace::new();
    let root = ws.root_path();
    common::make_fifo(&root.join("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(root.join("socket")).unwrap();
    for name in ["pipe", "socket"] {
        // Declared: the gate refuses it.
        let outcome = call_within_watchdog(
            bundled(),
            &root,
            Policy::allow_all(),
            "read_file",
            json!({ "path": name }),
        );
        assert_eq!(gate_step(&outcome), "path", "{name}");
        let reason = outcome.result.unwrap_err().to_string();
        assert!(reason.contains("special file"), "{reason}");
        // Opened at run time by a tool: the view refuses it without opening it.
        let outcome = call_within_watchdog(
            hostile(),
            &root,
            Policy::allow_all(),
            "hostile_ro",
            json!({"attack": "read", "arg": name}),
        );
        tool_error(&outcome);
    }
}

#[test]
fn a_guest_blocked_in_a_host_call_is_stopped_at_its_limit_and_the_host_keeps_serving() {
    let ws = Workspace::new();
    let outcome = call_within_watchdog(
        hostile(),
        &ws.root_path(),
        Policy::allow_all(),
        "hostile_ro",
        json!({"attack": "sleep"}),
    );
    assert!(
        matches!(
            outcome.result,
            Err(CallError::Run(RunError::Timeout { .. }))
        ),
        "{:?}",
        outcome.result
    );
    let next = call(
        hostile(),
        &ws.root,
        &Policy::allow_all(),
        "hostile_ro",
        r#"{"attack":"noop"}"#,
    );
    assert_eq!(next.result.unwrap(), "ok");
}

#[test]
fn a_host_call_that_blocks_is_cut_at_the_wall_time_limit() {
    // A hung filesystem, played by the test hook: the view's open of slow.txt blocks for a minute.
    let ws = Workspace::new();
    ws.write("slow.txt", "slow\n");
    let (send, receive) = mpsc::channel();
    let root = ws.root_path();
    std::thread::spawn(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(["call", "--timeout-ms", "1000", "--cache-dir"])
            .arg(common::test_cache_dir())
            .arg("--root")
            .arg(&root)
            .args(["read_file", r#"{"path":"slow.txt"}"#])
            .env("TURNGATE_TEST_BLOCK_OPEN", "slow.txt")
            .output()
            .unwrap();
        let _ = send.send(out);
    });
    let out = receive
        .recv_timeout(Duration::from_secs(30))
        .expect("the call is stopped at its limit, not when the host call returns");
    assert_eq!(out.status.code(), Some(2));
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["error"]["kind"], "timeout", "{outcome}");
}

#[test]
fn a_call_cancelled_while_it_runs_applies_nothing() {
    let ws = Workspace::new();
    ws.write("drafts/one.txt", "one\n");
    let before = ws.tree();
    let policy = Policy::allow_all();
    let effects = Effects::default();
    for tool in HOSTILE_RW {
        let cancel = turngate::Cancel::new();
        let trigger = cancel.clone();
        let outcome = std::thread::scope(|scope| {
            // Cancelled once the guest has written (its file staged) and spins: while it runs.
            scope.spawn(|| {
                common::wait_for_staged(&ws.root_path(), 1);
                trigger.cancel();
            });
            let mut context = CallContext::new(&ws.root, &policy, &effects);
            context.cancel = Some(&cancel);
            let input =
                r#"{"attack":"write_all_then_spin","path":"drafts","arg":"drafts/one.txt"}"#;
            runtime().block_on(hostile().call_in(&mut context, tool, input))
        });
        assert!(
            matches!(outcome.result, Err(CallError::Run(RunError::Cancelled))),
            "{tool}: {:?}",
            outcome.result
        );
        assert_eq!(ws.tree(), before, "{tool}");
        assert!(ws.no_staging_left(), "{tool}");
    }
}

#[test]
fn concurrent_calls_on_the_same_file_go_one_after_the_other_without_a_lost_update() {
    let ws = Workspace::new();
    let lines: Vec<String> = (0..8).map(|i| format!("line {i}")).collect();
    ws.write("notes.txt", &(lines.join("\n") + "\n"));
    let policy = Policy::allow_all();
    let effects = Effects::default();
    let toolbox = bundled();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let outcomes = runtime.block_on(async {
        let calls = lines.iter().map(|line| {
            let input =
                json!({"path": "notes.txt", "old_string": line, "new_string": line.to_uppercase()});
            let (root, policy, effects) = (&ws.root, &policy, &effects);
            async move {
                let mut context = CallContext::new(root, policy, effects);
                toolbox
                    .call_in(&mut context, "edit_file", &input.to_string())
                    .await
            }
        });
        futures_util::future::join_all(calls).await
    });
    for outcome in &outcomes {
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    }
    let expected: Vec<String> = lines.iter().map(|l| l.to_uppercase()).collect();
    assert_eq!(ws.read("notes.txt"), expected.join("\n") + "\n");
}

#[test]
fn a_change_outside_the_approval_fails_the_whole_call() {
    // The view lets a tool make temporary files next to a path it may write; one left behind is a
    // change outside the approval, and then nothing of the call applies.
    let ws = Workspace::new();
    ws.write("drafts/ok.txt", "ok\n");
    let before = ws.tree();
    let outcome = call(
        hostile(),
        &ws.root,
        &Policy::allow_all(),
        "hostile_rw",
        r#"{"attack":"write_all","path":"drafts/ok.txt","arg":"drafts/ok.txt,drafts/stray.txt"}"#,
    );
    let (kind, message) = apply_error(&outcome);
    assert_eq!(kind, "outside_approval", "{message}");
    assert!(message.contains("drafts/stray.txt"), "{message}");
    assert_eq!(ws.tree(), before, "not even the approved file changed");
}

#[test]
fn deny_beats_every_allow_at_the_gate_and_in_the_view() {
    let ws = Workspace::new();
    ws.write(".env", "API_KEY=hunter2\n");
    ws.write("keys/server.pem", "KEY hunter2\n");
    ws.write("src/main.rs", "fn main() {} // hunter2 is not here\n");
    let policy = policy(
        r#"
        deny = [".env", "**/*.pem", "**/.git/**"]
        default = "workspace-write"
        [tools.read_file]
        paths = ["**"]
        "#,
    );
    let outcome = call(
        bundled(),
        &ws.root,
        &policy,
        "read_file",
        r#"{"path":".env"}"#,
    );
    assert_eq!(gate_step(&outcome), "policy");
    // search_files is not listed: the default mode lets it read the whole root, the deny list does not.
    let found = call(
        bundled(),
        &ws.root,
        &policy,
        "search_files",
        r#"{"pattern":"hunter2"}"#,
    )
    .result
    .unwrap();
    assert!(found.contains("src/main.rs"), "{found}");
    assert!(
        !found.contains(".env") && !found.contains("server.pem"),
        "{found}"
    );
    for tool in HOSTILE_RO {
        let walked = call(
            hostile(),
            &ws.root,
            &policy,
            tool,
            r#"{"attack":"walk","arg":"."}"#,
        )
        .result
        .unwrap();
        assert!(
            !walked.contains("hunter2\n") && !walked.contains(".env"),
            "{tool}: {walked}"
        );
        assert!(
            walked.contains("keys/"),
            "{tool}: the directory itself is not denied: {walked}"
        );
    }
}

#[test]
fn a_call_that_traps_or_times_out_half_way_applies_nothing() {
    for tool in HOSTILE_RW {
        for attack in ["write_all_then_panic", "write_all_then_spin"] {
            let ws = Workspace::new();
            ws.write("drafts/one.txt", "one\n");
            let before = ws.tree();
            let outcome = call_within_watchdog(
                hostile(),
                &ws.root_path(),
                Policy::allow_all(),
                tool,
                json!({"attack": attack, "path": "drafts", "arg": "drafts/one.txt,drafts/two.txt"}),
            );
            assert!(
                matches!(
                    outcome.result,
                    Err(CallError::Run(
                        RunError::Trap { .. } | RunError::Timeout { .. }
                    ))
                ),
                "{tool} {attack}: {:?}",
                outcome.result
            );
            assert_eq!(ws.tree(), before, "{tool} {attack}: nothing applied");
            assert!(
                ws.no_staging_left(),
                "{tool} {attack}: no temporary files left"
            );
        }
        // The control case: the same writes from a call that returns do apply, both of them.
        let ws = Workspace::new();
        ws.write("drafts/one.txt", "one\n");
        let outcome = call(
            hostile(),
            &ws.root,
            &Policy::allow_all(),
            tool,
            r#"{"attack":"write_all","path":"drafts","arg":"drafts/one.txt,drafts/two.txt"}"#,
        );
        assert!(outcome.result.is_ok(), "{tool}: {:?}", outcome.result);
        assert_eq!(ws.read("drafts/one.txt"), "PWNED", "{tool}");
        assert_eq!(ws.read("drafts/two.txt"), "PWNED", "{tool}");
    }
}

/// An approver that runs `action` on the root while it reviews, then answers `answer`.
struct Meddler<F: Fn(&Path) + Send + Sync> {
    root: std::path::PathBuf,
    action: F,
    answer: bool,
    asked: Mutex<Vec<String>>,
}

impl<F: Fn(&Path) + Send + Sync> Approver for Meddler<F> {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        self.asked.lock().unwrap().push(request.diff.to_owned());
        (self.action)(&self.root);
        let answer = self.answer;
        Box::pin(async move { answer })
    }
}

fn reviewed<F: Fn(&Path) + Send + Sync>(
    ws: &Workspace,
    toolbox: &Toolbox,
    approver: &Meddler<F>,
    tool: &str,
    input: Value,
) -> CallOutcome {
    let policy = Policy::allow_all();
    let effects = Effects::default();
    let mut context = CallContext::new(&ws.root, &policy, &effects);
    context.approver = Some(approver);
    context.review = true;
    runtime().block_on(toolbox.call_in(&mut context, tool, &input.to_string()))
}

fn meddler<F: Fn(&Path) + Send + Sync>(ws: &Workspace, answer: bool, action: F) -> Meddler<F> {
    Meddler {
        root: ws.root_path(),
        action,
        answer,
        asked: Mutex::new(Vec::new()),
    }
}

fn apply_error(outcome: &CallOutcome) -> (&'static str, String) {
    match &outcome.result {
        Err(CallError::Effect(e)) => (e.kind(), e.to_string()),
        other => panic!("expected the apply to be refused, got {other:?}"),
    }
}

#[test]
fn a_review_shows_the_diff_and_a_denial_applies_nothing() {
    let ws = Workspace::new();
    ws.write("notes.txt", "one\ntwo\n");
    let before = ws.tree();
    let approver = meddler(&ws, false, |_| {});
    let outcome = reviewed(
        &ws,
        bundled(),
        &approver,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "two", "new_string": "three"}),
    );
    assert!(
        matches!(outcome.result, Err(CallError::Approval(_))),
        "{:?}",
        outcome.result
    );
    assert_eq!(ws.tree(), before);
    assert!(ws.no_staging_left());
    let diff = approver.asked.lock().unwrap()[0].clone();
    assert!(
        diff.contains("--- a/notes.txt\n+++ b/notes.txt\n"),
        "{diff}"
    );
    assert!(diff.contains("-two\n+three\n"), "{diff}");
}

#[test]
fn a_symlink_swapped_in_between_gate_and_apply_is_refused() {
    let ws = Workspace::new();
    ws.write("drafts/notes.txt", "draft\n");
    ws.write("private/notes.txt", "private\n");
    // The test plays another process swapping the directory: it renames beneath the root on purpose.
    #[allow(clippy::disallowed_methods)]
    let swap = |root: &Path| {
        std::fs::rename(root.join("drafts"), root.join("drafts.old")).unwrap();
        std::os::unix::fs::symlink("private", root.join("drafts")).unwrap();
    };
    let approver = meddler(&ws, true, swap);
    let outcome = reviewed(
        &ws,
        bundled(),
        &approver,
        "write_file",
        json!({"path": "drafts/notes.txt", "content": "overwritten"}),
    );
    let (kind, message) = apply_error(&outcome);
    assert_eq!(kind, "moved", "{message}");
    assert!(message.contains("drafts"), "{message}");
    assert_eq!(ws.read("private/notes.txt"), "private\n");
    assert_eq!(ws.read("drafts.old/notes.txt"), "draft\n");
}

/// What the journal writes ahead is what was checked and reviewed: a staged file another process
/// rewrote during the review fails the call, and nothing of it applies.
#[test]
fn a_staged_file_rewritten_during_the_review_fails_the_call() {
    let ws = Workspace::new();
    let tamper = |root: &Path| {
        for entry in std::fs::read_dir(root.join(".turngate/staging")).unwrap() {
            std::fs::write(entry.unwrap().path(), "tampered").unwrap();
        }
    };
    let approver = meddler(&ws, true, tamper);
    let outcome = reviewed(
        &ws,
        bundled(),
        &approver,
        "write_file",
        json!({"path": "new.txt", "content": "reviewed"}),
    );
    // Refused for exactly that: what was reviewed is not what is staged now.
    let (_, message) = apply_error(&outcome);
    assert!(
        message.contains("a staged file changed after the call"),
        "{message}"
    );
    assert!(!ws.root_path().join("new.txt").exists(), "nothing applied");
}

#[test]
fn a_file_edited_between_view_and_apply_is_not_overwritten() {
    let ws = Workspace::new();
    ws.write("notes.txt", "one\ntwo\n");
    let user_edit =
        |root: &Path| std::fs::write(root.join("notes.txt"), "the user's edit\n").unwrap();
    let approver = meddler(&ws, true, user_edit);
    let outcome = reviewed(
        &ws,
        bundled(),
        &approver,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "two", "new_string": "three"}),
    );
    let (kind, message) = apply_error(&outcome);
    assert_eq!(kind, "changed", "{message}");
    assert!(message.contains("notes.txt"), "{message}");
    assert_eq!(ws.read("notes.txt"), "the user's edit\n", "no lost update");
}

fn undo(ws: &Workspace, target: UndoTarget) -> Result<Vec<u64>, UndoError> {
    let mut journal = Journal::open(&ws.root, Retention::default()).unwrap();
    journal
        .undo(&ws.root, &target)
        .map(|undone| undone.calls.iter().map(|c| c.seq).collect())
}

fn ok(ws: &Workspace, tool: &str, input: Value) -> CallOutcome {
    let outcome = call(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        tool,
        &input.to_string(),
    );
    assert!(outcome.result.is_ok(), "{tool}: {:?}", outcome.result);
    outcome
}

#[test]
fn undo_restores_replaced_created_and_deleted_files_byte_identically() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new();
    ws.write("script.sh", "#!/bin/sh\necho one\n");
    ws.write("old.txt", "to be deleted\n");
    let script = ws.root_path().join("script.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = hash_tree(&ws.root_path());
    let replace = ok(
        &ws,
        "edit_file",
        json!({"path": "script.sh", "old_string": "one", "new_string": "two"}),
    );
    assert_eq!(replace.changes[0].kind.as_str(), "replace");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&script),
        0o755,
        "a replaced file keeps its permissions"
    );
    ok(
        &ws,
        "write_file",
        json!({"path": "new.txt", "content": "created"}),
    );
    ok(&ws, "delete_file", json!({"path": "old.txt"}));
    assert!(!ws.exists("old.txt"));
    for _ in 0..3 {
        undo(&ws, UndoTarget::Last).unwrap();
    }
    assert_eq!(ws.tree(), before, "every byte back, and new.txt gone");
    assert_eq!(mode(&script), 0o755);
    assert_eq!(
        undo(&ws, UndoTarget::Last),
        Err(UndoError::NothingToUndo("the journal has none".into()))
    );
}

#[test]
fn undo_is_refused_after_a_later_edit_and_restores_nothing() {
    let ws = Workspace::new();
    ws.write("a.txt", "a\n");
    ws.write("b.txt", "b\n");
    let outcome = call(
        hostile(),
        &ws.root,
        &Policy::allow_all(),
        "hostile_rw",
        r#"{"attack":"write_all","path":".","arg":"a.txt,b.txt"}"#,
    );
    assert_eq!(outcome.changes.len(), 2, "{:?}", outcome.result);
    ws.write("b.txt", "the user's later edit\n");
    match undo(&ws, UndoTarget::Last) {
        Err(UndoError::Changed { path, .. }) => assert_eq!(path, "b.txt"),
        other => panic!("expected a refusal naming b.txt, got {other:?}"),
    }
    assert_eq!(
        ws.read("a.txt"),
        "PWNED",
        "nothing of the call was restored"
    );
    assert_eq!(ws.read("b.txt"), "the user's later edit\n");
    // Once the file is back as the call left it, the undo goes through.
    ws.write("b.txt", "PWNED");
    undo(&ws, UndoTarget::Last).unwrap();
    assert_eq!(
        (ws.read("a.txt"), ws.read("b.txt")),
        ("a\n".into(), "b\n".into())
    );
}

#[test]
fn the_journal_is_invisible_to_tools() {
    let ws = Workspace::new();
    ok(
        &ws,
        "write_file",
        json!({"path": "notes.txt", "content": "journaled"}),
    );
    assert!(ws.root_path().join(".turngate/journal.jsonl").exists());
    let listed = ok(&ws, "list_dir", json!({"path": "."})).result.unwrap();
    assert!(!listed.contains(".turngate"), "{listed}");
    let found = ok(&ws, "search_files", json!({"pattern": "write_file"}))
        .result
        .unwrap();
    assert!(!found.contains(".turngate"), "{found}");
    let outcome = call(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        "read_file",
        r#"{"path":".turngate/journal.jsonl"}"#,
    );
    assert_eq!(gate_step(&outcome), "path");
    for (rw, ro) in HOSTILE_RW.into_iter().zip(HOSTILE_RO) {
        for attack in ["read", "write"] {
            let outcome = call(
                hostile(),
                &ws.root,
                &Policy::allow_all(),
                rw,
                &json!({"attack": attack, "path": ".", "arg": ".turngate/journal.jsonl"})
                    .to_string(),
            );
            tool_error(&outcome);
        }
        let walked = call(
            hostile(),
            &ws.root,
            &Policy::allow_all(),
            ro,
            r#"{"attack":"walk","arg":"."}"#,
        )
        .result
        .unwrap();
        assert!(!walked.contains(".turngate"), "{ro}: {walked}");
    }
}

#[test]
fn retention_prunes_the_oldest_calls_and_their_pre_images() {
    let ws = Workspace::new();
    let retention = Retention {
        max_calls: 5,
        max_bytes: u64::MAX,
    };
    let policy = Policy::allow_all();
    let effects = Effects::new(retention);
    for round in 0..8 {
        let mut context = CallContext::new(&ws.root, &policy, &effects);
        context.call_id = Some(format!("c{round}"));
        let input = json!({"path": "notes.txt", "content": format!("round {round}")}).to_string();
        let outcome = runtime().block_on(bundled().call_in(&mut context, "write_file", &input));
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    }
    let mut journal = Journal::open(&ws.root, retention).unwrap();
    let entries = journal.entries().unwrap();
    let kept: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.call_id.as_deref())
        .collect();
    // Exactly the newest `max_calls`, in order.
    assert_eq!(kept, ["c3", "c4", "c5", "c6", "c7"]);
    assert!(
        !kept.contains(&"c0") && !kept.contains(&"c1"),
        "the oldest went first: {kept:?}"
    );
    // The calls were settled before the log was rewritten: it carries no content written ahead.
    let log = std::fs::read_to_string(ws.root_path().join(".turngate/journal.jsonl")).unwrap();
    assert!(!log.contains("\"ahead\""), "{log}");
    // Every pre-image left belongs to a kept call (named `<seq>-<change>`), and each kept one has its own.
    let kept_seqs: Vec<String> = entries.iter().map(|e| e.seq.to_string()).collect();
    let pre_images: Vec<String> = std::fs::read_dir(ws.root_path().join(".turngate/pre"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for name in &pre_images {
        let seq = name.split('-').next().unwrap().to_owned();
        assert!(kept_seqs.contains(&seq), "{name} belongs to a pruned call");
    }
    assert_eq!(pre_images.len(), kept.len(), "{pre_images:?}");
    assert!(matches!(
        journal.undo(&ws.root, &UndoTarget::Call("c0".into())),
        Err(UndoError::NothingToUndo(_))
    ));
}

#[test]
fn each_call_of_a_turn_sees_the_effects_of_the_calls_before_it_and_the_turn_undoes_whole() {
    use turngate::turn::{Ending, RawCall, Turn, TurnStatus};
    let ws = Workspace::new();
    let call = |id: &str, name: &str, input: Value, index| RawCall {
        kind: turngate::CallKind::Function,
        id: Some(id.into()),
        name: name.into(),
        raw_input: input.to_string(),
        index,
    };
    let turn = Turn {
        provider: turngate::Provider::Anthropic,
        assistant: json!({"role": "assistant", "content": []}),
        calls: vec![
            call("w1", "make_dir", json!({"path": "notes"}), 0),
            call(
                "w2",
                "write_file",
                json!({"path": "notes/a.txt", "content": "one\n"}),
                1,
            ),
            call(
                "w3",
                "edit_file",
                json!({"path": "notes/a.txt", "old_string": "one", "new_string": "two"}),
                2,
            ),
        ],
        ending: Ending {
            status: TurnStatus::Completed,
            stop_reason: Some("tool_use".into()),
            detail: String::new(),
        },
        text: String::new(),
    };
    let options = turngate::TurnOptions {
        turn_id: Some("turn-1".into()),
        ..turngate::TurnOptions::default()
    };
    let report = runtime().block_on(turngate::process_turn(
        bundled(),
        &ws.root,
        &Policy::allow_all(),
        turn,
        options,
    ));
    assert!(report.all_ok(), "{:?}", report.calls);
    assert_eq!(ws.read("notes/a.txt"), "two\n");
    let undone = undo(&ws, UndoTarget::Turn("turn-1".into())).unwrap();
    assert_eq!(undone.len(), 3);
    assert!(
        ws.tree().is_empty() && ws.names().is_empty(),
        "{:?}",
        ws.names()
    );
}

/// A killed process keeps its page cache, so a crash test alone cannot see a missing flush: this
/// holds the record of every flush and move the dead process made (`TURNGATE_TEST_DURABLE_RECORD`,
/// each flush by the device and inode of the descriptor flushed) against what recovery after a power
/// loss at `point` relies on. Before the first move: the intent (the log, and the entries it is found
/// by: the state directory's in the root, the log's in the state directory) and the new content of
/// every file: in the intent when the call is written `ahead`, else each staged file's data. After
/// the last move, before a call flushed in place can be marked applied: the entries of the
/// directories the moves changed (the targets' parent, `pre/`).
fn assert_flushed_before_crash(point: &str, ahead: bool, ws: &Workspace, record: &Path) {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string(record).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let moves = lines.iter().filter(|l| **l == "moved").count();
    let expected_moves = match point {
        "moved-one" => 1,
        "moved-all" => 2,
        _ => 0,
    };
    assert_eq!(moves, expected_moves, "{point}: {text}");
    if point == "intent" {
        return;
    }
    let first_move = lines
        .iter()
        .position(|l| *l == "moved")
        .unwrap_or(lines.len());
    let flushed_in = |lines: &[&str], path: &Path| {
        let metadata = std::fs::symlink_metadata(path).unwrap();
        lines.contains(&format!("synced {} {}", metadata.dev(), metadata.ino()).as_str())
    };
    let root = ws.root_path();
    let state = root.join(turngate::root::STATE_DIR);
    let mut needed = vec![root.clone(), state.clone(), state.join("journal.jsonl")];
    if ahead {
        let intent = std::fs::read_to_string(state.join("journal.jsonl")).unwrap();
        // "PWNED" in base64, once for each file.
        assert_eq!(
            intent
                .lines()
                .find(|line| line.contains(r#""event":"intent""#))
                .unwrap()
                .matches("UFdORUQ=")
                .count(),
            2,
            "{point}: the intent carries the new content\n{intent}"
        );
    } else {
        for entry in std::fs::read_dir(state.join("staging")).unwrap() {
            let path = entry.unwrap().path();
            if std::fs::read(&path).unwrap() == b"PWNED" {
                needed.push(path);
            }
        }
        for name in ["a.txt", "b.txt"] {
            if ws.read(name) == "PWNED" {
                needed.push(root.join(name));
            }
        }
        assert_eq!(needed.len(), 5, "{point}: both new files found");
    }
    for path in &needed {
        assert!(
            flushed_in(&lines[..first_move], path),
            "{point}: `{}` was not flushed before the first move\n{text}",
            path.display()
        );
    }
    if point == "moved-all" && !ahead {
        let last_move = lines.iter().rposition(|l| *l == "moved").unwrap();
        for path in [root.clone(), state.join("pre")] {
            assert!(
                flushed_in(&lines[last_move + 1..], &path),
                "{point}: `{}` was not flushed after the moves\n{text}",
                path.display()
            );
        }
    }
}

/// Recovery moves files too (back, for a call it rolls back), and finds a dead process's moves perhaps
/// only in the page cache: the directories the call's moves changed (the root, `pre/`) are flushed
/// before the call's ending is (the last flush of the log).
fn assert_recovery_flushed_its_moves(point: &str, ws: &Workspace, record: &Path) {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string(record).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let synced = |path: &Path| {
        let metadata = std::fs::symlink_metadata(path).unwrap();
        let line = format!("synced {} {}", metadata.dev(), metadata.ino());
        lines.iter().rposition(|l| *l == line)
    };
    let state = ws.root_path().join(turngate::root::STATE_DIR);
    let ending = synced(&state.join("journal.jsonl"));
    assert!(
        ending.is_some(),
        "{point}: the ending was not flushed\n{text}"
    );
    for path in [ws.root_path(), state.join("pre")] {
        assert!(
            synced(&path) < ending && synced(&path).is_some(),
            "{point}: recovery did not flush `{}` before the ending\n{text}",
            path.display()
        );
    }
}

/// Undo's moves back are flushed (the root, `pre/`) after its intent is (the last flush of the log).
fn assert_flushed_after_the_last_log_flush(point: &str, ws: &Workspace, record: &Path) {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string(record).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let synced = |path: &Path| {
        let metadata = std::fs::symlink_metadata(path).unwrap();
        let line = format!("synced {} {}", metadata.dev(), metadata.ino());
        lines.iter().rposition(|l| *l == line)
    };
    let state = ws.root_path().join(turngate::root::STATE_DIR);
    let intent = synced(&state.join("journal.jsonl"));
    assert!(
        intent.is_some(),
        "{point}: the undo's intent was not flushed\n{text}"
    );
    for path in [ws.root_path(), state.join("pre")] {
        assert!(
            synced(&path) > intent,
            "{point}: undo did not flush `{}` after its moves\n{text}",
            path.display()
        );
    }
}

/// The last event of the root's log (the log's room, NULs after its last line, is not an event).
fn last_event(ws: &Workspace) -> Value {
    let log = std::fs::read_to_string(ws.root_path().join(".turngate/journal.jsonl")).unwrap();
    let line = log.trim_end_matches('\0').lines().last().unwrap();
    serde_json::from_str(line).unwrap()
}

fn turngate() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
}

/// `turngate undo --last` on the workspace's root, in the boot `boot` stands for, with the record of
/// its flushes written to `record` when one is given.
fn undo_last(ws: &Workspace, boot: &str, record: Option<&Path>) {
    let mut command = turngate();
    command
        .args(["undo", "--last", "--root"])
        .arg(ws.root_path())
        .env("TURNGATE_TEST_BOOT_ID", boot);
    if let Some(record) = record {
        command.env("TURNGATE_TEST_DURABLE_RECORD", record);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A `turngate call` of `tool` with `input` on the workspace's root, with the tests' settings `env`
/// (the test guest `hostile_rw` is given to it in a tools directory of the workspace).
fn cli_call(
    ws: &Workspace,
    tool: &str,
    input: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> std::process::Output {
    let mut command = turngate();
    command
        .args(["call", "--root"])
        .arg(ws.root_path())
        .arg("--cache-dir")
        .arg(common::test_cache_dir());
    if tool == "hostile_rw" {
        let tools = ws.dir.path().join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::copy(
            env!("TURNGATE_TEST_GUEST_HOSTILE_RW"),
            tools.join("hostile_rw.wasm"),
        )
        .unwrap();
        command.arg("--tools").arg(&tools);
    }
    command.arg(tool).arg(input).envs(env.iter().copied());
    command.output().unwrap()
}

/// The state of a root's journal as `turngate journal` prints it (which settles what a crash left),
/// with the record of its flushes written to `record`, in the boot `boot` stands for.
fn journal_states(root: &Path, record: &Path, boot: &str) -> Vec<String> {
    let out = turngate()
        .args(["journal", "--root"])
        .arg(root)
        .env("TURNGATE_TEST_DURABLE_RECORD", record)
        .env("TURNGATE_TEST_BOOT_ID", boot)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_crash_at_any_point_of_an_apply_leaves_old_or_new_content_and_an_undoable_journal() {
    // Written ahead (the default for a call this small), and flushed in place (nothing written ahead).
    for (ahead, inline_limit) in [(true, "262144"), (false, "0")] {
        for (point, survives) in [
            ("intent", false),
            ("durable", false),
            ("moved-one", false),
            ("moved-all", true),
        ] {
            crash_at(point, survives, ahead, inline_limit);
        }
    }
}

/// One crash of [`a_crash_at_any_point_of_an_apply_leaves_old_or_new_content_and_an_undoable_journal`].
fn crash_at(at: &str, survives: bool, ahead: bool, inline_limit: &str) {
    let point = format!("{at}, written ahead: {ahead}");
    let ws = Workspace::new();
    ws.write("a.txt", "old a\n");
    ws.write("b.txt", "old b\n");
    let before = ws.tree();
    let record = ws.dir.path().join("durable.record");
    let out = cli_call(
        &ws,
        "hostile_rw",
        r#"{"attack":"write_all","path":".","arg":"a.txt,b.txt"}"#,
        &[
            ("TURNGATE_TEST_CRASH_AT", at.as_ref()),
            ("TURNGATE_TEST_INLINE_LIMIT", inline_limit.as_ref()),
            ("TURNGATE_TEST_BOOT_ID", "boot-1".as_ref()),
            ("TURNGATE_TEST_DURABLE_RECORD", record.as_ref()),
        ],
    );
    assert!(
        !out.status.success(),
        "{point}: the process was meant to die"
    );
    assert_flushed_before_crash(at, ahead, &ws, &record);
    if !survives {
        assert!(
            !ws.no_staging_left(),
            "{point}: the dead process left staged files"
        );
    }
    // The next journal operation settles what the crash left, and removes what it staged.
    let recovered = ws.dir.path().join("recovery.record");
    let states = journal_states(&ws.root_path(), &recovered, "boot-1");
    assert_recovery_flushed_its_moves(&point, &ws, &recovered);
    assert!(
        ws.no_staging_left(),
        "{point}: staged files of a dead process"
    );
    if survives {
        assert_eq!(states, ["applied"], "{point}");
        assert_eq!(
            (ws.read("a.txt"), ws.read("b.txt")),
            ("PWNED".into(), "PWNED".into())
        );
        // Undone by the CLI, with the record of its flushes: the moves back are flushed after
        // the undo's intent (the last flush of the log), before `undone` is written.
        let new_files: Vec<String> = ["a.txt", "b.txt"]
            .iter()
            .map(|name| {
                use std::os::unix::fs::MetadataExt;
                let metadata = std::fs::metadata(ws.root_path().join(name)).unwrap();
                format!("synced {} {}", metadata.dev(), metadata.ino())
            })
            .collect();
        let undone = ws.dir.path().join("undo.record");
        undo_last(&ws, "boot-1", Some(&undone));
        assert_flushed_after_the_last_log_flush(&point, &ws, &undone);
        if ahead {
            // Undo settles the call first: its files, then the directory its moves changed, were
            // on disk before the log said so (its first flush in the undo), before anything moved
            // back.
            use std::os::unix::fs::MetadataExt;
            let text = std::fs::read_to_string(&undone).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let synced = |path: &Path| {
                let metadata = std::fs::metadata(path).unwrap();
                format!("synced {} {}", metadata.dev(), metadata.ino())
            };
            let log = synced(&ws.root_path().join(".turngate/journal.jsonl"));
            let settled = lines.iter().position(|l| *l == log).unwrap();
            for file in new_files.iter().chain([&synced(&ws.root_path())]) {
                assert!(
                    lines[..settled].contains(&file.as_str()),
                    "{point}: {file}\n{text}"
                );
            }
        }
    } else {
        assert!(states.is_empty(), "{point}: {states:?}");
    }
    assert_eq!(ws.tree(), before, "{point}: every file has its old content");
    let pre = std::fs::read_dir(ws.root_path().join(".turngate/pre"))
        .unwrap()
        .count();
    assert_eq!(pre, 0, "{point}: no stray pre-image");
    let last = last_event(&ws);
    let expected = if survives { "undone" } else { "rolled_back" };
    assert_eq!(last["event"], expected, "{point}: {last}");
    // After a power loss nothing of a call rolled back or undone comes back.
    let after_reboot = ws.dir.path().join("reboot.record");
    journal_states(&ws.root_path(), &after_reboot, "boot-2");
    assert_eq!(
        ws.tree(),
        before,
        "{point}: nothing comes back after a reboot"
    );
}

/// Runs `hostile_rw`'s `write_all` on `targets` (each gets `PWNED`) through the CLI, as in the boot
/// `boot` stands for.
fn write_all_in_boot(ws: &Workspace, targets: &str, boot: &str) {
    let input = json!({"attack": "write_all", "path": ".", "arg": targets}).to_string();
    let out = cli_call(
        ws,
        "hostile_rw",
        &input,
        &[("TURNGATE_TEST_BOOT_ID", boot.as_ref())],
    );
    assert!(out.status.success(), "{out:?}");
}

/// The one pre-image in the journal.
fn only_pre_image(ws: &Workspace) -> std::path::PathBuf {
    let mut pre: Vec<_> = std::fs::read_dir(ws.root_path().join(".turngate/pre"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(pre.len(), 1, "{pre:?}");
    pre.pop().unwrap()
}

/// A call written ahead is durable by its intent alone: a power loss may still take its moves and its
/// files' data (a killed process cannot show that: the kernel keeps what it wrote). Here the test
/// undoes them by hand, as the disk would, and the next run in another boot rolls the call forward
/// from the log: the exchange of a replaced file, the rename of a created one, and the data of a file
/// whose inode survived empty. The same undoing in the same boot is someone's edit, and stays.
#[test]
fn a_call_written_ahead_whose_writes_a_power_loss_took_is_rolled_forward_from_the_log() {
    #[allow(clippy::disallowed_methods)] // the test plays the disk, beneath its own temporary root
    fn lose_moves(ws: &Workspace) {
        // The exchange lost: the old file back in place, its pre-image entry gone; the rename lost.
        std::fs::rename(only_pre_image(ws), ws.root_path().join("a.txt")).unwrap();
        std::fs::remove_file(ws.root_path().join("c.txt")).unwrap();
    }
    let ws = Workspace::new();
    ws.write("a.txt", "old a\n");
    let before = ws.tree();
    write_all_in_boot(&ws, "a.txt,c.txt", "boot-1");
    lose_moves(&ws);

    // In the same boot, that was someone else: nothing is rolled forward.
    let same_boot = ws.dir.path().join("same.record");
    assert_eq!(
        journal_states(&ws.root_path(), &same_boot, "boot-1"),
        ["applied"]
    );
    assert_eq!(ws.tree(), before, "nothing rolled forward in the same boot");

    // Another machine mounting the same root, in its own boot, leaves this machine's calls alone.
    let out = turngate()
        .args(["journal", "--root"])
        .arg(ws.root_path())
        .env("TURNGATE_TEST_BOOT_ID", "boot-of-another-machine")
        .env("TURNGATE_TEST_MACHINE_ID", "another-machine")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        ws.tree(),
        before,
        "nothing rolled forward by another machine"
    );

    // After a reboot the call is put back in place, flushed before it is marked settled.
    let rebooted = ws.dir.path().join("rebooted.record");
    assert_eq!(
        journal_states(&ws.root_path(), &rebooted, "boot-2"),
        ["applied"]
    );
    assert_eq!(
        (ws.read("a.txt"), ws.read("c.txt")),
        ("PWNED".into(), "PWNED".into())
    );
    assert_recovery_flushed_its_moves("rolled forward", &ws, &rebooted);
    undo_last(&ws, "boot-2", None);
    assert_eq!(ws.tree(), before, "the call rolled forward undoes whole");

    // A created file whose inode survived with its data lost is rewritten; a file someone replaced
    // after the call is left as they left it.
    write_all_in_boot(&ws, "a.txt,d.txt", "boot-2");
    let d = ws.root_path().join("d.txt");
    let written = std::fs::metadata(&d).unwrap().modified().unwrap();
    #[allow(clippy::disallowed_methods)] // the test plays the disk and the user
    {
        let file = std::fs::OpenOptions::new().write(true).open(&d).unwrap();
        file.set_len(0).unwrap();
        file.set_modified(written).unwrap();
    }
    ws.write("a.txt.new", "someone's edit\n");
    #[allow(clippy::disallowed_methods)]
    std::fs::rename(
        ws.root_path().join("a.txt.new"),
        ws.root_path().join("a.txt"),
    )
    .unwrap();
    let rebooted = ws.dir.path().join("rebooted-again.record");
    journal_states(&ws.root_path(), &rebooted, "boot-3");
    assert_eq!(ws.read("d.txt"), "PWNED", "the lost data is written again");
    assert_eq!(ws.read("a.txt"), "someone's edit\n", "a later edit stays");
}

/// A call written ahead that fails half-way is put back, and its rollback reaches the disk before the
/// call returns: after a power loss it is not rolled forward.
#[test]
fn a_call_written_ahead_that_fails_is_rolled_back_on_disk_and_never_rolled_forward() {
    let ws = Workspace::new();
    ws.write("a.txt", "old a\n");
    ws.write("b.txt", "old b\n");
    let before = ws.tree();
    let record = ws.dir.path().join("failed.record");
    let out = cli_call(
        &ws,
        "hostile_rw",
        r#"{"attack":"write_all","path":".","arg":"a.txt,b.txt"}"#,
        &[
            ("TURNGATE_TEST_FAIL_AT", "second-move".as_ref()),
            ("TURNGATE_TEST_BOOT_ID", "boot-1".as_ref()),
            ("TURNGATE_TEST_DURABLE_RECORD", record.as_ref()),
        ],
    );
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(ws.tree(), before, "nothing of the call stays");
    // The moves back, then the rollback, reached the disk.
    assert_recovery_flushed_its_moves("failed", &ws, &record);
    let rebooted = ws.dir.path().join("rebooted.record");
    let states = journal_states(&ws.root_path(), &rebooted, "boot-2");
    assert!(states.is_empty(), "{states:?}");
    assert_eq!(ws.tree(), before, "nothing rolled forward after a reboot");
    let last = last_event(&ws);
    assert_eq!(last["event"], "rolled_back", "{last}");
}

/// Runs a bundled tool through the CLI, as in the boot `boot` stands for.
fn call_in_boot(ws: &Workspace, tool: &str, input: Value, boot: &str) {
    let out = cli_call(
        ws,
        tool,
        &input.to_string(),
        &[("TURNGATE_TEST_BOOT_ID", boot.as_ref())],
    );
    assert!(out.status.success(), "{out:?}");
}

/// Rolling forward goes call by call: a file a later call removed stays removed, and a file two calls
/// wrote one after the other ends with the second's content, each undoable in turn.
#[test]
#[allow(clippy::disallowed_methods)] // the test plays the disk, beneath its own temporary root
fn calls_written_ahead_on_the_same_file_roll_forward_in_order() {
    let ws = Workspace::new();
    let write = |path: &str, content: &str, boot: &str| {
        call_in_boot(
            &ws,
            "write_file",
            json!({"path": path, "content": content}),
            boot,
        );
    };
    write("e.txt", "A", "boot-1");
    call_in_boot(&ws, "delete_file", json!({"path": "e.txt"}), "boot-1");
    let record = ws.dir.path().join("first.record");
    journal_states(&ws.root_path(), &record, "boot-2");
    assert!(
        !ws.root_path().join("e.txt").exists(),
        "what a later call removed stays removed"
    );

    write("f.txt", "A", "boot-2");
    write("f.txt", "B", "boot-2");
    // Both calls' moves lost: the file was never made, the second call's pre-image never moved.
    let pre = only_pre_image_named(&ws, "4-0");
    std::fs::remove_file(pre).unwrap();
    std::fs::remove_file(ws.root_path().join("f.txt")).unwrap();
    let record = ws.dir.path().join("second.record");
    journal_states(&ws.root_path(), &record, "boot-3");
    assert_eq!(ws.read("f.txt"), "B");
    for expected in [Some("A"), None] {
        undo_last(&ws, "boot-3", None);
        match expected {
            Some(content) => assert_eq!(ws.read("f.txt"), content),
            None => assert!(!ws.root_path().join("f.txt").exists()),
        }
    }
}

/// The pre-image `name` in the journal, which must be there.
fn only_pre_image_named(ws: &Workspace, name: &str) -> std::path::PathBuf {
    let path = ws.root_path().join(".turngate/pre").join(name);
    assert!(path.exists(), "{}", path.display());
    path
}

/// The entries the log is found by are flushed by the first apply in a root, and again whenever the
/// log was made anew (here, removed and made again by someone, its inode number perhaps reused, then
/// replaced by a copy of itself); not by every process in between.
#[test]
#[allow(clippy::disallowed_methods)] // the test removes the log beneath its own temporary root
fn the_entries_the_log_is_found_by_are_flushed_once_for_each_log() {
    use std::os::unix::fs::MetadataExt;
    let ws = Workspace::new();
    let flushed_dirs = |record: &Path| {
        let text = std::fs::read_to_string(record).unwrap();
        let state = ws.root_path().join(turngate::root::STATE_DIR);
        [ws.root_path(), state].map(|dir| {
            let metadata = std::fs::metadata(dir).unwrap();
            let line = format!("synced {} {}", metadata.dev(), metadata.ino());
            text.lines().any(|l| l == line)
        })
    };
    let call = |content: &str, record: &Path| {
        let input = json!({"path": "g.txt", "content": content}).to_string();
        let out = cli_call(
            &ws,
            "write_file",
            &input,
            &[("TURNGATE_TEST_DURABLE_RECORD", record.as_ref())],
        );
        assert!(out.status.success(), "{out:?}");
    };
    let records = ws.dir.path();
    call("one", &records.join("1.record"));
    assert_eq!(flushed_dirs(&records.join("1.record")), [true, true]);
    call("two", &records.join("2.record"));
    assert_eq!(flushed_dirs(&records.join("2.record")), [false, false]);
    let log = ws.root_path().join(".turngate/journal.jsonl");
    let removed = std::fs::metadata(&log).unwrap().ino();
    std::fs::remove_file(&log).unwrap();
    // Made anew at once, ext4 tends to give it the removed one's inode number: nothing may go by it.
    std::fs::File::create(&log).unwrap();
    call("three", &records.join("3.record"));
    eprintln!(
        "the new log reused the inode number: {}",
        std::fs::metadata(&log).unwrap().ino() == removed
    );
    assert_eq!(flushed_dirs(&records.join("3.record")), [true, true]);
    // A copy put in the log's place carries the layout line, naming the log it was copied from.
    let copy = ws.root_path().join(".turngate/journal.copy");
    std::fs::copy(&log, &copy).unwrap();
    std::fs::rename(&copy, &log).unwrap();
    call("four", &records.join("4.record"));
    assert_eq!(flushed_dirs(&records.join("4.record")), [true, true]);
    call("five", &records.join("5.record"));
    assert_eq!(flushed_dirs(&records.join("5.record")), [false, false]);
}
