//! The journal does not trust its own state directory: what is planted there is never followed, a
//! damaged log is kept aside without stopping later writes, and undo refuses what it cannot vouch for.
//!
//! Each test names the protection it shows; removing that protection makes it fail (see the note of the
//! issue that introduced them for how each was checked).

// The tests play someone who plants and removes entries in the state directory: they use the std::fs
// calls the library may not.
#![allow(clippy::disallowed_methods)]

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{HOSTILE_RW, Workspace, bundled, hostile};
use serde_json::{Value, json};
use turngate::effects::EffectError;
use turngate::effects::journal::{Journal, JournalEntry, Retention, UndoError, UndoTarget};
use turngate::{CallContext, Effects, Policy, Toolbox};

/// Writes `content` to `path` as call `id`, through `effects` (one journal for the whole test).
fn write(ws: &Workspace, effects: &Effects, id: &str, path: &str, content: &str) {
    let input = json!({"path": path, "content": content});
    call_as(ws, effects, id, (bundled(), "write_file"), input);
}

/// Calls `tool` of `toolbox` with `input` as call `id`, through `effects`, and checks that it succeeded.
fn call_as(
    ws: &Workspace,
    effects: &Effects,
    id: &str,
    (toolbox, tool): (&Toolbox, &str),
    input: Value,
) {
    let policy = Policy::allow_all();
    let mut context = CallContext::new(&ws.root, &policy, effects);
    context.call_id = Some(id.into());
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, tool, &input.to_string()));
    assert!(
        outcome.result.is_ok(),
        "{id} ({tool}): {:?}",
        outcome.result
    );
}

fn state(ws: &Workspace) -> PathBuf {
    ws.root_path().join(".turngate")
}

fn open(ws: &Workspace) -> Result<Journal, EffectError> {
    Journal::open(&ws.root, Retention::default())
}

fn undo(ws: &Workspace, id: &str) -> Result<Vec<u64>, UndoError> {
    open(ws)
        .unwrap()
        .undo(&ws.root, &UndoTarget::Call(id.into()))
        .map(|undone| undone.calls.iter().map(|c| c.seq).collect())
}

fn entry(entries: &[JournalEntry], id: &str) -> JournalEntry {
    entries
        .iter()
        .find(|e| e.call_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no entry for {id}: {entries:?}"))
        .clone()
}

/// The call IDs of `entries`, in order.
fn call_ids(entries: &[JournalEntry]) -> Vec<&str> {
    entries
        .iter()
        .filter_map(|e| e.call_id.as_deref())
        .collect()
}

fn foreign_path(error: EffectError) -> String {
    match error {
        EffectError::Foreign { path, .. } => path,
        other => panic!("expected a refusal of something foreign, got {other:?}"),
    }
}

#[test]
fn temporary_log_names_planted_as_links_are_never_written_through() {
    // Links at the very names the log's temporary file will be drawn from: the journal draws them
    // from this thread's generator, seeded here, so the first names it draws are these, planted before
    // a call passes the retention bound and the log is rewritten (state.rs's unit test shows a planted
    // name is passed over; this shows a whole run of rewrites writes through none).
    let ws = Workspace::new();
    let effects = Effects::new(Retention {
        max_calls: 3,
        max_bytes: u64::MAX,
    });
    write(&ws, &effects, "c0", "notes.txt", "zero");
    let target = ws.outside_path().join("secret.txt");
    let mut predicted = fastrand::Rng::with_seed(11);
    let planted: Vec<PathBuf> = (0..4096)
        .map(|_| state(&ws).join(format!("journal.jsonl.{:016x}.tmp", predicted.u64(..))))
        .collect();
    for name in &planted {
        symlink(&target, name).unwrap();
    }
    fastrand::seed(11);
    for round in 1..8 {
        write(
            &ws,
            &effects,
            &format!("c{round}"),
            "notes.txt",
            &format!("round {round}"),
        );
    }
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "outside secret\n",
        "nothing was written through a link"
    );
    let log = state(&ws).join("journal.jsonl");
    assert!(log.symlink_metadata().unwrap().file_type().is_file());
    // A planted name is a link still, or was removed as a dead process's leftover: never a file.
    for name in &planted {
        assert!(
            name.symlink_metadata().map_or(true, |m| m.is_symlink()),
            "{}",
            name.display()
        );
    }
    let entries = open(&ws).unwrap().entries().unwrap();
    assert_eq!(
        call_ids(&entries),
        ["c5", "c6", "c7"],
        "pruned: {entries:?}"
    );
}

#[test]
fn a_link_fifo_or_hard_link_where_the_journal_keeps_its_files_is_refused_by_name() {
    let ws = Workspace::new();
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c1", "notes.txt", "one");
    let outside = ws.outside_path().join("secret.txt");
    let make_fifo = |path: &Path| common::make_fifo(path);
    type Plant<'a> = Box<dyn Fn(&Path) + 'a>;
    let plants: Vec<(&str, Plant)> = vec![
        (
            "journal.jsonl",
            Box::new(|p: &Path| symlink(&outside, p).unwrap()),
        ),
        (
            "journal.jsonl",
            Box::new(|p: &Path| std::fs::hard_link(&outside, p).unwrap()),
        ),
        ("lock", Box::new(|p: &Path| symlink(&outside, p).unwrap())),
        ("lock", Box::new(make_fifo)),
        ("pre", Box::new(|p: &Path| symlink("..", p).unwrap())),
    ];
    for (name, plant) in plants {
        let path = state(&ws).join(name);
        let aside = state(&ws).join(format!("{name}.kept"));
        std::fs::rename(&path, &aside).unwrap();
        plant(&path);
        let refused = foreign_path(open(&ws).unwrap_err());
        assert_eq!(refused, format!(".turngate/{name}"));
        // Looking at the journal says the same; it is not taken for a root without a journal.
        let looked = Journal::open_existing(&ws.root, Retention::default()).unwrap_err();
        assert_eq!(foreign_path(looked), format!(".turngate/{name}"));
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "outside secret\n"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&aside, &path).unwrap();
    }
    // With turngate's own files back, the journal works on.
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c2", "notes.txt", "two");
    assert_eq!(undo(&ws, "c2").unwrap().len(), 1);
    assert_eq!(ws.read("notes.txt"), "one");
}

#[test]
fn a_pre_image_swapped_for_a_link_is_not_restored() {
    let ws = Workspace::new();
    ws.write("notes.txt", "the user's notes\n");
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c1", "notes.txt", "overwritten");
    let pre = state(&ws).join("pre/1-0");
    std::fs::remove_file(&pre).unwrap();
    symlink(ws.outside_path().join("secret.txt"), &pre).unwrap();
    let refused = undo(&ws, "c1").unwrap_err();
    assert!(
        matches!(&refused, UndoError::Changed { detail, .. } if detail.contains("pre-image")),
        "{refused}"
    );
    assert_eq!(ws.read("notes.txt"), "overwritten", "nothing restored");
    assert!(
        !ws.root_path()
            .join("notes.txt")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Applies c1 (a.txt) and c2 (b.txt), damages the log with `damage`, then checks that a new call
/// applies, that `damaged` (the calls the damage may be about) cannot be undone and say why, that the
/// others can, and that the log as it was is kept aside.
fn damaged_log_is_kept_aside(damage: impl Fn(&str) -> String, damaged: &[&str], sound: &[&str]) {
    let ws = Workspace::new();
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c1", "a.txt", "one");
    write(&ws, &effects, "c2", "b.txt", "two");
    let log = state(&ws).join("journal.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, damage(&text)).unwrap();
    // New calls apply.
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c3", "c.txt", "three");
    assert_eq!(ws.read("c.txt"), "three");
    let entries = open(&ws).unwrap().entries().unwrap();
    for id in damaged {
        let reason = entry(&entries, id)
            .damage
            .unwrap_or_else(|| panic!("{id} marked"));
        assert!(reason.contains(".turngate/damaged/"), "{reason}");
        let refused = undo(&ws, id).unwrap_err();
        assert!(
            matches!(&refused, UndoError::Damaged { reason, .. } if reason.contains("damaged")),
            "{id}: {refused}"
        );
    }
    for id in sound.iter().chain(&["c3"]) {
        assert_eq!(entry(&entries, id).damage, None, "{id}");
        assert_eq!(undo(&ws, id).unwrap().len(), 1, "{id}");
    }
    let kept: Vec<PathBuf> = std::fs::read_dir(state(&ws).join("damaged"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), damage(&text));
}

/// Where the intent of the call with `call_id` is among the log's `lines`.
fn intent_line(lines: &[impl AsRef<str>], call_id: &str) -> usize {
    let id = format!("\"call_id\":\"{call_id}\"");
    lines
        .iter()
        .position(|line| line.as_ref().contains(&id))
        .unwrap()
}

#[test]
fn a_garbage_line_in_the_log_is_kept_aside_and_stops_nothing() {
    // Between c1's lines and c2's: c1 may be what it was about, c2 came after it.
    damaged_log_is_kept_aside(
        |text| {
            let mut lines: Vec<&str> = text.lines().collect();
            lines.insert(intent_line(&lines, "c2"), "\u{0}garbage{");
            lines.join("\n") + "\n"
        },
        &["c1"],
        &["c2"],
    );
}

#[test]
fn a_truncated_line_in_the_log_is_kept_aside_and_stops_nothing() {
    // c2's intent cut in half: both calls came before the damage.
    damaged_log_is_kept_aside(
        |text| {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            let c2 = intent_line(&lines, "c2");
            let half = lines[c2].len() / 2;
            lines[c2].truncate(half);
            lines.join("\n") + "\n"
        },
        &["c1", "c2"],
        &[],
    );
}

#[test]
fn a_missing_pre_image_is_reported_and_refuses_only_that_undo() {
    let ws = Workspace::new();
    ws.write("notes.txt", "the user's notes\n");
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c1", "notes.txt", "overwritten");
    write(&ws, &effects, "c2", "other.txt", "new");
    std::fs::remove_file(state(&ws).join("pre/1-0")).unwrap();
    write(&ws, &effects, "c3", "third.txt", "new");
    let entries = open(&ws).unwrap().entries().unwrap();
    let reason = entry(&entries, "c1").damage.expect("reported");
    assert!(reason.contains(".turngate/pre/1-0"), "{reason}");
    let refused = undo(&ws, "c1").unwrap_err();
    assert!(refused.to_string().contains("pre/1-0"), "{refused}");
    assert_eq!(ws.read("notes.txt"), "overwritten");
    assert_eq!(undo(&ws, "c2").unwrap().len(), 1);
}

#[test]
fn a_link_planted_as_the_staging_directory_is_refused_by_name_and_never_written_through() {
    let ws = Workspace::new();
    std::fs::create_dir(state(&ws)).unwrap();
    symlink(ws.outside_path(), state(&ws).join("staging")).unwrap();
    let policy = Policy::allow_all();
    let effects = Effects::new(Retention::default());
    let mut context = CallContext::new(&ws.root, &policy, &effects);
    let input = json!({"path": "notes.txt", "content": "staged"}).to_string();
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bundled().call_in(&mut context, "write_file", &input));
    let error = outcome.result.unwrap_err().to_string();
    assert!(
        error.contains("`.turngate/staging` is a symbolic link"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(ws.outside_path()).unwrap().count(),
        1,
        "nothing staged through the link"
    );
    assert!(!ws.exists("notes.txt"));
}

/// A line its writer died in the middle of (no newline, written over the log's room) was never durable:
/// it is not damage, and it is zeroed back into room, leaving nothing of it behind the next lines.
#[test]
fn a_torn_last_line_is_dropped_and_the_next_line_is_written_clean() {
    use std::os::unix::fs::FileExt;
    let ws = Workspace::new();
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c1", "a.txt", "one");
    write(&ws, &effects, "c2", "b.txt", "two");
    let log = state(&ws).join("journal.jsonl");
    let text = std::fs::read(&log).unwrap();
    let end = text.iter().rposition(|b| *b == b'\n').unwrap() + 1;
    assert!(
        text[end..].iter().all(|b| *b == 0),
        "room after the last line"
    );
    let torn = format!(
        r#"{{"seq":3,"event":"intent","call":{{"call_id":"torn","tool":"write_file","output":"{}"#,
        "x".repeat(4000)
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .write_all_at(torn.as_bytes(), end as u64)
        .unwrap();
    let effects = Effects::new(Retention::default());
    write(&ws, &effects, "c3", "c.txt", "three");
    let entries = open(&ws).unwrap().entries().unwrap();
    assert_eq!(call_ids(&entries), ["c1", "c2", "c3"]);
    assert!(entries.iter().all(|e| e.damage.is_none()), "{entries:?}");
    assert!(!state(&ws).join("damaged").exists(), "nothing kept aside");
    let text = String::from_utf8(std::fs::read(&log).unwrap()).unwrap();
    assert!(
        !text.contains("xxxxxxxx"),
        "{}",
        text.trim_end_matches('\0')
    );
}

/// The log's zeroed room is in proportion to what it holds: a new log's first flush writes a block or
/// two, not a quarter of a megabyte; the next calls' lines go into that room (the size, a record of the
/// filesystem's own, does not change); and a log that outgrows it gets room as large as itself, up to
/// 256 KiB, so a long log grows rarely.
#[test]
fn the_logs_room_grows_with_the_log() {
    let ws = Workspace::new();
    let effects = Effects::new(Retention::default());
    let log = state(&ws).join("journal.jsonl");
    let size = || std::fs::metadata(&log).unwrap().len();
    write(&ws, &effects, "c1", "a.txt", "one");
    let first = size();
    assert!(first <= 8 << 10, "a new log's room: {first} bytes");
    write(&ws, &effects, "c2", "b.txt", "two");
    assert_eq!(size(), first, "the second call's lines went into the room");
    let mut grown = first;
    for i in 3..40 {
        write(
            &ws,
            &effects,
            &format!("c{i}"),
            "c.txt",
            &format!("{i}{}", "x".repeat(2000)),
        );
        let now = size();
        if now != grown {
            let text = std::fs::read(&log).unwrap();
            let used = text.iter().rposition(|b| *b != 0).unwrap() as u64 + 1;
            assert!(now - used >= used.min(256 << 10) - 4096, "{now} {used}");
            grown = now;
        }
    }
    assert!(grown > 4 * first, "the log grew: {grown}");
}

#[test]
fn each_journal_reads_on_whatever_another_appended_since_it_last_looked() {
    // Two journals of one root, as two processes hold them: each apply first reads what the other
    // appended since it last looked (here a line longer than its first look, and one longer than a
    // whole chunk), so the calls keep distinct numbers and every one can be undone.
    let ws = Workspace::new();
    let (first, second) = (Effects::default(), Effects::default());
    write(&ws, &first, "a0", "a0.txt", "first");
    write(&ws, &second, "b0", "b0.txt", &"b".repeat(2_000));
    write(&ws, &second, "b1", "b1.txt", &"c".repeat(40_000));
    write(&ws, &first, "a1", "a1.txt", "first again");
    let entries = open(&ws).unwrap().entries().unwrap();
    assert_eq!(call_ids(&entries), ["a0", "b0", "b1", "a1"], "{entries:?}");
    let mut seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 4, "distinct numbers: {entries:?}");
    assert!(entries.iter().all(|e| e.damage.is_none()), "{entries:?}");
    for id in ["a1", "b1", "b0", "a0"] {
        undo(&ws, id).unwrap_or_else(|e| panic!("undo {id}: {e}"));
    }
    for name in ["a0.txt", "a1.txt", "b0.txt", "b1.txt"] {
        assert!(!ws.root_path().join(name).exists(), "{name} undone");
    }
}

/// What a tool of either WASI generation changes goes through the same journal: the change is recorded
/// under its call ID with the file's pre-image, and undoing the call puts the file back.
#[test]
fn a_change_by_a_tool_of_either_generation_is_journaled_and_undone() {
    for tool in HOSTILE_RW {
        let ws = Workspace::new();
        ws.write("notes.txt", "the user's notes\n");
        let effects = Effects::new(Retention::default());
        let input = json!({"attack": "write", "path": "notes.txt"});
        call_as(&ws, &effects, "c1", (hostile(), tool), input);
        assert_eq!(ws.read("notes.txt"), "PWNED", "{tool}");
        let entries = open(&ws).unwrap().entries().unwrap();
        assert_eq!(entry(&entries, "c1").tool, tool);
        assert_eq!(undo(&ws, "c1").unwrap().len(), 1, "{tool}");
        assert_eq!(ws.read("notes.txt"), "the user's notes\n", "{tool}");
    }
}

#[test]
fn undoing_calls_that_made_nested_directories_removes_them() {
    // The undo removes `m/deep` through a handle of `m`, then `m`, then flushes the directories it
    // changed: `m` among them, gone by then but still held.
    let ws = Workspace::new();
    let effects = Effects::new(Retention::default());
    call_as(
        &ws,
        &effects,
        "d1",
        (bundled(), "make_dir"),
        json!({"path": "m/deep"}),
    );
    write(&ws, &effects, "d2", "m/deep/a.txt", "a\n");
    let mut journal = open(&ws).unwrap();
    journal
        .undo(&ws.root, &UndoTarget::Call("d2".into()))
        .expect("the file's undo");
    journal
        .undo(&ws.root, &UndoTarget::Call("d1".into()))
        .expect("the directories' undo");
    assert!(!ws.exists("m"));
}
