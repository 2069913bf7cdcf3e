//! Through a power loss, every promise of the journal holds: each file keeps its old or its new content
//! (never empty, never a mix), what the journal lists as applied is on disk, and undo of the turn puts
//! back every old content byte for byte.
//!
//! The root is on the tests' file system with power-loss simulation (`tests/testfs`): what was not
//! flushed is lost at the cut (a file's unsynced data, and as much of the unsynced metadata as the cut
//! keeps). One traced run of a workload lists every operation it makes; the workload then runs again
//! from the same start once for each cut: before and after each operation, keeping none or all of the
//! metadata not yet committed. After each cut the machine reboots (the file system is remounted, its
//! device number changes, and the next commands run with another boot identity through
//! `TURNGATE_TEST_BOOT_ID`), `turngate journal` settles the journal, and the files are held to what
//! the journal says, then to the start after `turngate undo --turn`.
// On the tests' FUSE file system (`tests/testfs`), which mounts only on Linux.
#![cfg(target_os = "linux")]
// The tests play the user's machine: they write the root's start and read what survived with std::fs.
#![allow(clippy::disallowed_methods)]

mod common;
mod worker_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::bundled;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use turngate::effects::journal::{Journal, Retention, UndoTarget};
use turngate::{CallContext, Effects, Policy, Root, Toolbox};
use turngate_testfs::{At, Cut, Keep, OpKind, Options, TestFs, TraceOp, When};

const CRASHABLE: Options = Options {
    folding: false,
    power_loss: true,
    plain_renames: false,
    lagging_renames: false,
};

/// The same, without `RENAME_NOREPLACE` and `RENAME_EXCHANGE` (as LazyFS, NFS and many FUSE file
/// systems): the journal takes its fallbacks, a link and an unlink, or a link and two renames.
const CRASHABLE_PLAIN_RENAMES: Options = Options {
    plain_renames: true,
    ..CRASHABLE
};

/// The turn every workload's calls belong to.
const TURN: &str = "t1";

/// What a path holds, as the checks compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    File(String),
    Dir,
}

/// One call of a workload: a bundled tool and its input.
type Call = (&'static str, Value);

/// A workload: the root's start (path, content), the calls of one turn, and whether what is cut is the
/// undo of that turn (the calls then apply whole first) rather than the calls.
struct Workload {
    name: &'static str,
    start: Vec<(String, String)>,
    calls: Vec<Call>,
    undo: bool,
    /// The file system the root is on.
    options: Options,
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every file and directory beneath `root` (turngate's state directory left out).
fn states(root: &Path) -> BTreeMap<String, State> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string();
            if rel == ".turngate" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                found.insert(rel, State::Dir);
                stack.push(entry.path());
            } else {
                found.insert(
                    rel,
                    State::File(sha256(&std::fs::read(entry.path()).unwrap())),
                );
            }
        }
    }
    found
}

/// A machine: the file system, the root on it and how many times it booted.
struct Machine {
    fs: TestFs,
    root: PathBuf,
    boots: u32,
}

impl Machine {
    /// A fresh file system with the workload's start on it, flushed.
    fn new(workload: &Workload) -> Machine {
        let fs = TestFs::mount(workload.options).unwrap();
        let root = fs.path().join("root");
        std::fs::create_dir(&root).unwrap();
        for (path, content) in &workload.start {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        fs.sync_all();
        Machine { fs, root, boots: 1 }
    }

    /// Runs the workload's calls in this process (its boot is the machine's real one); after a cut they
    /// fail, as the process would. `Err` lists the calls that failed.
    fn run(&self, calls: &[Call]) -> Result<(), String> {
        let root = Root::open(&self.root).map_err(|e| e.to_string())?;
        let policy = Policy::allow_all();
        let effects = Effects::default();
        let mut failed = Vec::new();
        for (n, (tool, input)) in calls.iter().enumerate() {
            let id = format!("c{n}");
            if let Err(error) = run_call(bundled(), &root, &policy, &effects, &id, tool, input) {
                failed.push(format!("{id} {tool} {input}: {error}"));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("\n"))
        }
    }

    /// What comes before the part of `workload` that is cut: the calls, when what is cut is their undo.
    fn prepare(&self, workload: &Workload) {
        if workload.undo {
            self.run(&workload.calls)
                .expect("the calls apply before their undo");
        }
    }

    /// The part of `workload` that is cut: its calls, or the undo of their turn (in this process too).
    fn act(&self, workload: &Workload) -> Result<(), String> {
        if !workload.undo {
            return self.run(&workload.calls);
        }
        let root = Root::open(&self.root).map_err(|e| e.to_string())?;
        let mut journal = Journal::open(&root, Retention::default()).map_err(|e| e.to_string())?;
        journal
            .undo(&root, &UndoTarget::Turn(TURN.into()))
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// The power went at the cut: the machine starts again, the file system as it survived.
    fn reboot(&mut self) {
        assert!(self.fs.is_frozen(), "the cut never struck");
        self.fs.reboot().unwrap();
        self.boots += 1;
    }

    /// `turngate ARGS --root ROOT` in the machine's current boot: exit code and standard output.
    fn turngate(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .env("TURNGATE_TEST_BOOT_ID", format!("boot-{}", self.boots))
            .env("TURNGATE_CACHE_DIR", common::test_cache_dir())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
    }

    /// The journal, settled by `turngate journal` in this boot.
    fn journal(&self) -> Vec<Value> {
        let (code, out) = self.turngate(&["journal"]);
        assert_eq!(code, 0, "turngate journal: {out}");
        out.lines()
            .filter(|line| line.starts_with('{'))
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

fn run_call(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    effects: &Effects,
    id: &str,
    tool: &str,
    input: &Value,
) -> Result<String, String> {
    let mut context = CallContext::new(root, policy, effects);
    context.call_id = Some(id.into());
    context.turn = Some(TURN.into());
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, tool, &input.to_string()));
    outcome.result.map_err(|error| error.to_string())
}

/// What the files must hold when the journal says `entries`: the start, changed by every call it lists
/// as applied, in order (a call undone or rolled back changed nothing).
fn expected(start: &BTreeMap<String, State>, entries: &[Value]) -> BTreeMap<String, State> {
    let mut expected = start.clone();
    for entry in entries.iter().filter(|e| e["state"] == "applied") {
        for change in entry["changes"].as_array().unwrap() {
            let path = change["path"].as_str().unwrap().to_owned();
            let state = match change["kind"].as_str().unwrap() {
                "create" | "replace" => {
                    State::File(change["after"]["sha256"].as_str().unwrap().to_owned())
                }
                "make_dir" => State::Dir,
                _ => State::Absent,
            };
            expected.insert(path, state);
        }
    }
    expected.retain(|_, state| *state != State::Absent);
    expected
}

/// After a reboot: the journal settles, the files are what it says, and undo of its turns (the
/// workload's, a worker's job, an MCP server's) brings back the start byte for byte. `Err` says what
/// broke.
fn check_after_reboot(machine: &Machine, start: &BTreeMap<String, State>) -> Result<(), String> {
    let entries = machine.journal();
    let now = states(&machine.root);
    let claimed = expected(start, &entries);
    if now != claimed {
        return Err(format!(
            "the files are not what the journal says:\n  on disk: {now:?}\n  journal: {claimed:?}\n  entries: {}",
            entries
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n           ")
        ));
    }
    let mut turns: Vec<&str> = Vec::new();
    for entry in entries.iter().filter(|e| e["state"] == "applied") {
        let turn = entry["turn"].as_str().expect("every call here has a turn");
        if !turns.contains(&turn) {
            turns.push(turn);
        }
    }
    for turn in turns.iter().rev() {
        let (code, out) = machine.turngate(&["undo", "--turn", turn]);
        if code != 0 {
            return Err(format!("undo --turn {turn} refused ({code}): {out}"));
        }
    }
    let undone = states(&machine.root);
    if &undone != start {
        return Err(format!(
            "undo did not restore the start:\n  on disk: {undone:?}\n  start: {start:?}"
        ));
    }
    Ok(())
}

/// The workload once, traced: every operation of what it cuts, in order.
fn trace(workload: &Workload) -> Vec<TraceOp> {
    let machine = Machine::new(workload);
    machine.prepare(workload);
    machine.fs.trace(true);
    if let Err(failed) = machine.act(workload) {
        panic!("`{}` failed without a cut: {failed}", workload.name);
    }
    let trace = machine.fs.take_trace();
    machine.fs.trace(false);
    trace
}

/// Whether a cut at operation `at` of `trace` can end differently from every other: a write in the
/// middle of a run of writes to one file cannot (only the file's data is cut there, and no flush
/// runs between them).
fn distinct(trace: &[TraceOp], at: usize) -> bool {
    let op = &trace[at];
    let same = |other: Option<&TraceOp>| {
        other.is_some_and(|other| other.op == OpKind::Write && other.path == op.path)
    };
    op.op != OpKind::Write
        || !same(at.checked_sub(1).and_then(|i| trace.get(i)))
        || !same(trace.get(at + 1))
}

/// Runs `workload` once for every cut of its traced run (by position, before and after, keeping each
/// of `keeps`) and checks every promise after each; panics listing every cut that broke one.
fn crash_matrix(workload: &Workload, keeps: &[Keep]) {
    let trace = trace(workload);
    let start = states(&Machine::new(workload).root);
    let mut broken = Vec::new();
    let mut cuts = 0;
    for &keep in keeps {
        for cut in Cut::every_index(&trace, keep) {
            let At::Index(index) = cut.at else {
                unreachable!("the matrix cuts by position")
            };
            if !distinct(&trace, index - 1) {
                continue;
            }
            cuts += 1;
            let mut machine = Machine::new(workload);
            machine.prepare(workload);
            machine.fs.cut_at(cut.clone());
            let _ = machine.act(workload);
            if !machine.fs.is_frozen() {
                // A run that took another path than the traced one (it cannot here: one thread).
                broken.push(format!("{cut:?} never struck"));
                continue;
            }
            machine.reboot();
            if let Err(why) = check_after_reboot(&machine, &start) {
                let op = &trace[index - 1];
                broken.push(format!("{cut:?} at {op:?}: {why}"));
            }
        }
    }
    eprintln!("`{}`: {cuts} cuts", workload.name);
    assert!(
        broken.is_empty(),
        "{} of {cuts} cuts of `{}` broke a promise:\n{}",
        broken.len(),
        workload.name,
        broken.join("\n\n")
    );
}

fn small_writes() -> Workload {
    Workload {
        name: "small calls written ahead",
        start: vec![
            ("f0.txt".into(), "old zero\n".into()),
            ("f1.txt".into(), "old one\n".into()),
        ],
        calls: vec![
            (
                "write_file",
                json!({"path": "f0.txt", "content": "new zero\n"}),
            ),
            ("write_file", json!({"path": "n0.txt", "content": "made\n"})),
            (
                "write_file",
                json!({"path": "f0.txt", "content": "newer zero\n"}),
            ),
            ("delete_file", json!({"path": "f1.txt"})),
        ],
        undo: false,
        options: CRASHABLE,
    }
}

#[test]
fn small_calls_written_ahead_keep_every_promise_at_every_cut() {
    crash_matrix(&small_writes(), &[Keep::Committed, Keep::All]);
}

/// Content of `size` bytes, different for each `tag`: past the most a call writes ahead, so a call
/// with it is flushed in place.
fn large(tag: &str, size: usize) -> String {
    let line = format!("{tag} line of a large file\n");
    line.repeat(size / line.len() + 1)
}

fn large_writes() -> Workload {
    Workload {
        name: "large calls flushed in place",
        start: vec![
            ("f0.txt".into(), large("old zero", 300 << 10)),
            ("f1.txt".into(), "old one\n".into()),
        ],
        calls: vec![
            (
                "write_file",
                json!({"path": "f0.txt", "content": large("new zero", 300 << 10)}),
            ),
            (
                "write_file",
                json!({"path": "n1.txt", "content": large("made", 280 << 10)}),
            ),
            // A small call written ahead, then a large one over the same file: the first one's file is
            // the second's pre-image.
            (
                "write_file",
                json!({"path": "f1.txt", "content": "new one\n"}),
            ),
            (
                "write_file",
                json!({"path": "f1.txt", "content": large("newer one", 300 << 10)}),
            ),
        ],
        undo: false,
        options: CRASHABLE,
    }
}

#[test]
fn large_calls_flushed_in_place_keep_every_promise_at_every_cut() {
    crash_matrix(&large_writes(), &[Keep::Committed, Keep::All]);
}

#[test]
fn edits_and_deletes_keep_every_promise_at_every_cut() {
    let workload = Workload {
        name: "edits and deletes",
        start: vec![
            ("f0.txt".into(), "alpha\nbeta\n".into()),
            ("f1.txt".into(), "old one\n".into()),
            ("d/f2.txt".into(), "old two\n".into()),
        ],
        calls: vec![
            (
                "edit_file",
                json!({"path": "f0.txt", "old_string": "alpha", "new_string": "ALPHA"}),
            ),
            (
                "edit_file",
                json!({"path": "f0.txt", "old_string": "beta", "new_string": "BETA"}),
            ),
            ("delete_file", json!({"path": "f1.txt"})),
            ("delete_file", json!({"path": "d/f2.txt"})),
            (
                "write_file",
                json!({"path": "f1.txt", "content": "one again\n"}),
            ),
        ],
        undo: false,
        options: CRASHABLE,
    };
    crash_matrix(&workload, &[Keep::Committed, Keep::All]);
}

#[test]
fn directories_made_and_files_written_in_them_keep_every_promise_at_every_cut() {
    let workload = Workload {
        name: "directories made",
        start: vec![
            ("f0.txt".into(), "old zero\n".into()),
            ("d/f1.txt".into(), "old one\n".into()),
        ],
        calls: vec![
            ("make_dir", json!({"path": "m/deep"})),
            (
                "write_file",
                json!({"path": "m/deep/a.txt", "content": "a\n"}),
            ),
            ("make_dir", json!({"path": "d/e"})),
            ("write_file", json!({"path": "d/e/b.txt", "content": "b\n"})),
            ("delete_file", json!({"path": "d/f1.txt"})),
        ],
        undo: false,
        options: CRASHABLE,
    };
    crash_matrix(&workload, &[Keep::Committed, Keep::All]);
}

#[test]
fn undo_keeps_every_promise_at_every_cut() {
    let mut workload = small_writes();
    workload.name = "undo of a turn";
    workload.undo = true;
    crash_matrix(&workload, &[Keep::Committed, Keep::All]);
}

#[test]
fn a_power_loss_during_recovery_is_recovered_from_in_the_next_boot() {
    // The first cut leaves work for recovery (after each flush of the log: intents and their new
    // content on disk, their moves and data not all); the second cuts that recovery at each of its
    // operations; the third boot must settle the journal as if nothing had interrupted the second.
    let workload = small_writes();
    let trace = trace(&workload);
    let start = states(&Machine::new(&workload).root);
    let first_cuts: Vec<Cut> = Cut::every_index(&trace, Keep::All)
        .into_iter()
        .filter(|cut| {
            let At::Index(index) = cut.at else {
                unreachable!("the matrix cuts by position")
            };
            cut.when == When::After && trace[index - 1].op == OpKind::Fsync
        })
        .collect();
    let crashed = |first: &Cut| {
        let mut machine = Machine::new(&workload);
        machine.fs.cut_at(first.clone());
        let _ = machine.act(&workload);
        machine.reboot();
        machine
    };
    let mut broken = Vec::new();
    let mut cuts = 0;
    for first in &first_cuts {
        let recovery = {
            let machine = crashed(first);
            machine.fs.trace(true);
            machine.journal();
            machine.fs.take_trace()
        };
        for second in Cut::every_index(&recovery, Keep::Committed) {
            let At::Index(index) = second.at else {
                unreachable!("the matrix cuts by position")
            };
            if !distinct(&recovery, index - 1) {
                continue;
            }
            cuts += 1;
            let mut machine = crashed(first);
            machine.fs.cut_at(second.clone());
            let _ = machine.turngate(&["journal"]);
            if !machine.fs.is_frozen() {
                broken.push(format!("{first:?}, then {second:?}: never struck"));
                continue;
            }
            machine.reboot();
            if let Err(why) = check_after_reboot(&machine, &start) {
                let op = &recovery[index - 1];
                broken.push(format!("{first:?}, then {second:?} at {op:?}: {why}"));
            }
        }
    }
    assert!(cuts > 0, "no recovery had anything to do");
    eprintln!("recoveries of `{}`: {cuts} cuts", workload.name);
    assert!(
        broken.is_empty(),
        "{} of {cuts} cuts of recoveries broke a promise:\n{}",
        broken.len(),
        broken.join("\n\n")
    );
}

#[test]
fn a_long_turn_cut_at_random_moments_keeps_every_promise() {
    // The report's run: 120 writes and a delete, cut at moments drawn at random (the seed is fixed, so
    // a failure repeats), each keeping a random part of the metadata not yet committed.
    let mut calls: Vec<Call> = (0..120)
        .map(|n| {
            let content = if n % 40 == 39 {
                large(&format!("call {n}"), 300 << 10)
            } else {
                format!("call {n}\n")
            };
            (
                "write_file",
                json!({"path": format!("f{:03}.txt", n % 50), "content": content}),
            )
        })
        .collect();
    calls.push(("delete_file", json!({"path": "f007.txt"})));
    let workload = Workload {
        name: "120 writes and a delete",
        start: (0..25)
            .map(|n| (format!("f{n:03}.txt"), format!("old {n}\n")))
            .collect(),
        calls,
        undo: false,
        options: CRASHABLE,
    };
    let trace = trace(&workload);
    let start = states(&Machine::new(&workload).root);
    let mut random = fastrand::Rng::with_seed(47);
    let mut broken = Vec::new();
    const CUTS: usize = 24;
    for _ in 0..CUTS {
        let cut = Cut {
            at: At::Index(random.usize(1..=trace.len())),
            when: if random.bool() {
                When::Before
            } else {
                When::After
            },
            keep: Keep::Prefix(random.usize(0..64)),
        };
        let mut machine = Machine::new(&workload);
        machine.fs.cut_at(cut.clone());
        let _ = machine.act(&workload);
        machine.reboot();
        if let Err(why) = check_after_reboot(&machine, &start) {
            broken.push(format!("{cut:?}: {why}"));
        }
    }
    assert!(
        broken.is_empty(),
        "{} of {CUTS} random cuts broke a promise:\n{}",
        broken.len(),
        broken.join("\n\n")
    );
}

#[test]
fn without_renames_that_exchange_or_never_replace_every_promise_holds_at_every_cut() {
    for mut workload in [small_writes(), large_writes()] {
        workload.name = match workload.name {
            "small calls written ahead" => "small calls, plain renames",
            _ => "large calls, plain renames",
        };
        workload.options = CRASHABLE_PLAIN_RENAMES;
        crash_matrix(&workload, &[Keep::Committed, Keep::All]);
    }
}

/// The cut points of a process's run where what is durable changes: before and after each flush and
/// each rename (its every write between them cut as the flush or rename after it does).
fn durable_points(trace: &[TraceOp], keeps: &[Keep]) -> Vec<Cut> {
    keeps
        .iter()
        .flat_map(|&keep| Cut::every_index(trace, keep))
        .filter(|cut| {
            let At::Index(index) = cut.at else {
                unreachable!("the matrix cuts by position")
            };
            matches!(
                trace[index - 1].op,
                OpKind::Fsync | OpKind::FsyncDir | OpKind::Rename
            )
        })
        .collect()
}

/// The small-call workload as one job of a worker (`turngate worker`, the real binary, its roots on
/// the machine's file system; NATS keeps its own storage, as a broker on another disk would).
struct WorkerRun<'n> {
    nats: &'n worker_support::Nats,
    calls: Vec<(String, &'static str, Value)>,
}

impl WorkerRun<'_> {
    /// Starts a worker in the machine's current boot for the roots beside the machine's root.
    fn worker(&self, machine: &Machine) -> worker_support::WorkerProcess {
        let mut spec = worker_support::WorkerSpec::new(self.nats.url(), machine.fs.path());
        spec.ack_wait_ms = 700;
        spec.concurrency = 1;
        let boot = format!("boot-{}", machine.boots);
        spec.spawn(&[("TURNGATE_TEST_BOOT_ID", boot.as_str())])
    }

    fn submit(&self, id: &str) {
        let job = turngate::worker::job::Job {
            id: id.into(),
            provider: turngate::Provider::Anthropic,
            root: "root".into(),
            forced_tool_choice: false,
            max_output_tokens: None,
            stream: worker_support::anthropic_turn(&self.calls, false).into(),
        };
        worker_support::runtime().block_on(worker_support::submit_job(
            &self.nats.url(),
            &turngate::worker::setup::Settings::default(),
            &job,
        ));
    }

    /// Every result message of job `id` once its report is in (waits at most `limit`).
    fn answered(
        &self,
        id: &str,
        limit: std::time::Duration,
    ) -> Option<Vec<worker_support::ResultMsg>> {
        let subject = format!("turngate.results.{id}");
        let mut results = Vec::new();
        let done = worker_support::wait_until(limit, || {
            results = worker_support::runtime()
                .block_on(worker_support::all_results(&self.nats.url(), "turngate"));
            results
                .iter()
                .any(|r| r.subject == subject && r.kind == "report")
        });
        results.retain(|r| r.subject == subject);
        done.then_some(results)
    }
}

#[test]
fn a_worker_cut_at_every_flush_and_rename_replays_its_job_once_and_keeps_every_promise() {
    let test = "a_worker_cut_at_every_flush_and_rename_replays_its_job_once";
    let Some(binary) = worker_support::nats_server_binary(test) else {
        return;
    };
    let nats = worker_support::Nats::start(binary);
    let workload = small_writes();
    let run = WorkerRun {
        nats: &nats,
        calls: workload
            .calls
            .iter()
            .enumerate()
            .map(|(n, (tool, input))| (format!("w{n}"), *tool, input.clone()))
            .collect(),
    };
    let start = states(&Machine::new(&workload).root);
    let limit = std::time::Duration::from_secs(60);
    // The traced run: the worker's every operation on the machine's file system for the job.
    let trace = {
        let machine = Machine::new(&workload);
        let _worker = run.worker(&machine);
        machine.fs.trace(true);
        run.submit("traced");
        let results = run
            .answered("traced", limit)
            .expect("the traced job is answered");
        assert!(
            results.iter().all(|r| r.exit.is_none_or(|exit| exit == 0)),
            "{results:?}"
        );
        machine.fs.take_trace()
    };
    let mut broken = Vec::new();
    let cuts = durable_points(&trace, &[Keep::Committed, Keep::All]);
    for (n, cut) in cuts.iter().enumerate() {
        let id = format!("cut-{n}");
        let mut machine = Machine::new(&workload);
        let mut first = run.worker(&machine);
        machine.fs.cut_at(cut.clone());
        run.submit(&id);
        let struck = worker_support::wait_until(limit, || machine.fs.is_frozen());
        // The power goes: the worker with it.
        first.kill();
        if !struck {
            broken.push(format!("{cut:?} never struck"));
            continue;
        }
        machine.reboot();
        // The next boot's worker gets the job again.
        let _second = run.worker(&machine);
        let Some(results) = run.answered(&id, limit) else {
            broken.push(format!(
                "{cut:?}: the job was not answered after the reboot"
            ));
            continue;
        };
        // Each call answered once, in the report.
        let reports: Vec<&worker_support::ResultMsg> =
            results.iter().filter(|r| r.kind == "report").collect();
        let answered: Vec<String> = reports
            .last()
            .map(|report| {
                report.payload["calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|call| format!("{} {}", call["id"], call["status"]))
                    .collect()
            })
            .unwrap_or_default();
        if reports.len() != 1 || answered.len() != run.calls.len() {
            broken.push(format!("{cut:?}: reports {reports:?}"));
            continue;
        }
        // Nothing applied twice: each call's ID at most once among the applied calls.
        let entries = machine.journal();
        let mut applied: Vec<&str> = entries
            .iter()
            .filter(|e| e["state"] == "applied")
            .filter_map(|e| e["call_id"].as_str())
            .collect();
        applied.sort();
        let before = applied.len();
        applied.dedup();
        if applied.len() != before {
            broken.push(format!("{cut:?}: a call applied twice: {entries:?}"));
            continue;
        }
        if let Err(why) = check_after_reboot(&machine, &start) {
            let At::Index(index) = cut.at else {
                unreachable!("the matrix cuts by position")
            };
            broken.push(format!("{cut:?} at {:?}: {why}", trace[index - 1]));
        }
    }
    eprintln!("a worker's job: {} cuts", cuts.len());
    assert!(
        broken.is_empty(),
        "{} of {} cuts of a worker's job broke a promise:\n{}",
        broken.len(),
        cuts.len(),
        broken.join("\n\n")
    );
}

/// A `turngate mcp` server (the real binary, over stdio) on the machine's root, in its current boot.
struct McpServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl McpServer {
    fn start(machine: &Machine) -> McpServer {
        use std::io::BufRead;
        let mut child = common::mcp_http::mcp_command(&machine.root)
            .env("TURNGATE_TEST_BOOT_ID", format!("boot-{}", machine.boots))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("turngate mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut server = McpServer {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "power-loss", "version": "0"}}),
        );
        assert!(init.is_some(), "the server initializes");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        let _ = writeln!(self.stdin, "{message}");
        let _ = self.stdin.flush();
    }

    /// Sends a request and waits for its answer (`None`: no answer, the server died with the power).
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .ok()?;
            let message: Value = serde_json::from_str(&line).ok()?;
            if message["id"] == id {
                return Some(message);
            }
        }
    }

    /// Runs `calls` one after another; answers whether each succeeded.
    fn call_all(&mut self, calls: &[Call]) -> Vec<bool> {
        calls
            .iter()
            .map(|(tool, input)| {
                self.request("tools/call", json!({"name": tool, "arguments": input}))
                    .is_some_and(|answer| answer["result"]["isError"] == false)
            })
            .collect()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_mcp_server_cut_at_every_flush_and_rename_keeps_every_promise() {
    let workload = small_writes();
    let start = states(&Machine::new(&workload).root);
    let trace = {
        let machine = Machine::new(&workload);
        let mut server = McpServer::start(&machine);
        machine.fs.trace(true);
        let done = server.call_all(&workload.calls);
        assert!(done.iter().all(|ok| *ok), "{done:?}");
        machine.fs.take_trace()
    };
    let cuts = durable_points(&trace, &[Keep::Committed, Keep::All]);
    let mut broken = Vec::new();
    for cut in &cuts {
        let mut machine = Machine::new(&workload);
        let mut server = McpServer::start(&machine);
        machine.fs.cut_at(cut.clone());
        let _ = server.call_all(&workload.calls);
        // The power goes: the server with it.
        drop(server);
        if !machine.fs.is_frozen() {
            broken.push(format!("{cut:?} never struck"));
            continue;
        }
        machine.reboot();
        if let Err(why) = check_after_reboot(&machine, &start) {
            let At::Index(index) = cut.at else {
                unreachable!("the matrix cuts by position")
            };
            broken.push(format!("{cut:?} at {:?}: {why}", trace[index - 1]));
        }
    }
    eprintln!("an MCP server's calls: {} cuts", cuts.len());
    assert!(
        broken.is_empty(),
        "{} of {} cuts of an MCP server's calls broke a promise:\n{}",
        broken.len(),
        cuts.len(),
        broken.join("\n\n")
    );
}
