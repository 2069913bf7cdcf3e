//! A name means one file: on a root whose file system folds case and Unicode normalization (as APFS,
//! NTFS, vfat, SMB shares and ext4 casefold directories do; here the test file system of
//! `tests/testfs`), every spelling of a denied name, of a hidden name and of turngate's state directory
//! is that name, for the gate, every call's view, the effect check, the journal and undo.
//!
//! The spellings of the issue that found it are cases here, for every bundled tool that takes a path
//! and for the hostile guests of both WASI generations (whose paths only the view checks). The
//! containment, least-authority, scope and journal suites run again below with every workspace on the
//! folding file system (`common::folding_roots`). Each test fails without the stored-name resolution
//! and the folded deny and reserved checks (see the note of the issue for how each was checked).

// Each suite below brings its own `common`, as it does when it is compiled alone.
#![allow(clippy::duplicate_mod)]

mod common;

// The suites again, on the folding file system (each compiles with its own `common`).
#[path = "containment.rs"]
mod containment;
#[path = "journal.rs"]
mod journal;
#[path = "least_authority.rs"]
mod least_authority;
#[path = "scope.rs"]
mod scope;

use std::path::Path;

use common::{HOSTILE_RW, Workspace, bundled, call, hostile};
use serde_json::{Value, json};
use turngate::effects::journal::{Journal, JournalEntry, Retention, UndoTarget};
use turngate::{CallOutcome, Policy, Root, Toolbox};

/// The policy of the report: tools may write the workspace, but never `.env` or `secrets/`.
const POLICY: &str = r#"
default = "workspace-write"
deny = [".env", "**/.env", "secrets/**"]
"#;

const SECRET: &str = "TOKEN=do-not-leak\n";

/// A workspace on the folding file system with `.env`, `secrets/key.txt` and `notes.txt`, and a
/// journal already (so `.turngate/` exists, as it does after a root's first change).
fn workspace() -> Workspace {
    let ws = Workspace::in_dir(turngate_testfs::folding_dir());
    ws.write(".env", SECRET);
    ws.write("secrets/key.txt", SECRET);
    ws.write("notes.txt", "notes\n");
    let outcome = run(
        bundled(),
        &ws.root,
        "write_file",
        json!({"path": "a.txt", "content": "a\n"}),
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(ws.root_path().join(".turngate").is_dir());
    ws
}

fn run(toolbox: &Toolbox, root: &Root, tool: &str, input: Value) -> CallOutcome {
    call(
        toolbox,
        root,
        &Policy::from_toml(POLICY).unwrap(),
        tool,
        &input.to_string(),
    )
}

/// What the workspace holds that a tool could have changed: every file and directory, and in the state
/// directory every name turngate does not make itself (a directory a tool made there shows).
fn snapshot(root: &Path) -> Vec<(String, String)> {
    let own = [".turngate", ".turngate/staging", ".turngate/lock"];
    let mut tree: Vec<(String, String)> = common::hash_tree(root)
        .into_iter()
        .filter(|(path, _)| {
            !own.iter().any(|name| path == Path::new(name))
                && !path.starts_with(".turngate/journal.jsonl")
                && !path.starts_with(".turngate/pre")
        })
        .map(|(path, hash)| (path.display().to_string(), hash))
        .collect();
    tree.sort();
    tree
}

/// Whether `text` names `.env`, `secrets` or the state directory in any spelling, or leaks the secret.
fn leaks(text: &str) -> bool {
    let folded = text.to_lowercase();
    folded.contains(".env")
        || folded.contains("secrets")
        || folded.contains(".turngate")
        || text.contains("do-not-leak")
}

#[test]
fn every_spelling_of_a_denied_name_or_of_the_state_directory_is_refused_by_every_path_tool() {
    let ws = workspace();
    let nfd_env = ".e\u{301}nv"; // not `.env`: a name of its own, made below
    let cases = [
        ("read_file", json!({"path": ".ENV"})),
        ("read_file", json!({"path": ".Env"})),
        ("read_file", json!({"path": "SECRETS/key.txt"})),
        ("read_file", json!({"path": "Secrets/KEY.TXT"})),
        ("list_dir", json!({"path": "SECRETS"})),
        (
            "search_files",
            json!({"pattern": "TOKEN", "path": "SECRETS"}),
        ),
        ("search_files", json!({"pattern": "TOKEN", "path": ".ENV"})),
        ("write_file", json!({"path": ".ENV", "content": "PWNED"})),
        (
            "write_file",
            json!({"path": "SECRETS/key.txt", "content": "PWNED"}),
        ),
        (
            "write_file",
            json!({"path": "SECRETS/new.txt", "content": "PWNED"}),
        ),
        (
            "edit_file",
            json!({"path": ".ENV", "old_string": "TOKEN", "new_string": "PWNED"}),
        ),
        ("delete_file", json!({"path": ".Env"})),
        ("delete_file", json!({"path": "SECRETS/key.txt"})),
        ("make_dir", json!({"path": "SECRETS/inner"})),
        ("list_dir", json!({"path": ".Turngate"})),
        ("read_file", json!({"path": ".TURNGATE/journal.jsonl"})),
        ("make_dir", json!({"path": ".TurnGate/evil"})),
        (
            "write_file",
            json!({"path": ".TURNGATE/evil.txt", "content": "PWNED"}),
        ),
        ("delete_file", json!({"path": ".TURNGATE/journal.jsonl"})),
    ];
    let before = snapshot(&ws.root_path());
    for (tool, input) in &cases {
        let outcome = run(bundled(), &ws.root, tool, input.clone());
        match &outcome.result {
            Ok(output) => panic!("{tool} {input} ran: {output}"),
            Err(error) => assert!(!error.to_string().contains("do-not-leak"), "{error}"),
        }
        assert_eq!(
            snapshot(&ws.root_path()),
            before,
            "{tool} {input} changed the root"
        );
    }
    // A name that is not `.env` in any form a file system folds stays an ordinary name.
    let outcome = run(
        bundled(),
        &ws.root,
        "write_file",
        json!({"path": nfd_env, "content": "x"}),
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    // A listing shows neither the denied names nor the state directory, in any spelling.
    let listed = run(bundled(), &ws.root, "list_dir", json!({"path": "."}));
    let listed = listed.result.expect("the root lists");
    assert!(!leaks(&listed), "{listed}");
    assert!(listed.contains("notes.txt"), "{listed}");
    let found = run(
        bundled(),
        &ws.root,
        "search_files",
        json!({"pattern": "TOKEN|notes"}),
    );
    let found = found.result.expect("searching the root");
    assert!(!leaks(&found), "{found}");
    assert!(found.contains("notes"), "{found}");
}

#[test]
fn no_tool_makes_a_second_spelling_of_a_denied_name_or_of_the_state_directory() {
    // Nothing stands under these names yet: what a tool would make is new, and on this file system it
    // would be found later as `.env`, `secrets/...` or the state directory.
    let ws = Workspace::in_dir(turngate_testfs::folding_dir());
    ws.write("notes.txt", "notes\n");
    let before = snapshot(&ws.root_path());
    // The state directory first, while there is none yet.
    assert!(!ws.root_path().join(".turngate").exists());
    for (tool, input) in [
        ("make_dir", json!({"path": ".TurnGate"})),
        (
            "write_file",
            json!({"path": ".TURNGATE/journal.jsonl", "content": "{}"}),
        ),
        ("write_file", json!({"path": ".ENV", "content": "PWNED"})),
        (
            "write_file",
            json!({"path": "SECRETS/key.txt", "content": "PWNED"}),
        ),
        ("make_dir", json!({"path": "Secrets"})),
    ] {
        let outcome = run(bundled(), &ws.root, tool, input.clone());
        assert!(
            outcome.result.is_err(),
            "{tool} {input}: {:?}",
            outcome.result
        );
        assert_eq!(snapshot(&ws.root_path()), before, "{tool} {input}");
    }
    for tool in HOSTILE_RW {
        for (attack, arg) in [
            ("write", ".ENV"),
            ("mkdir", "SECRETS"),
            ("mkdir", ".TurnGate"),
        ] {
            let input = json!({"attack": attack, "arg": arg, "path": "."});
            let outcome = run(hostile(), &ws.root, tool, input);
            if let Ok(output) = &outcome.result {
                assert!(
                    !output.starts_with("ESCAPED"),
                    "{tool} {attack} {arg}: {output}"
                );
            }
            assert_eq!(snapshot(&ws.root_path()), before, "{tool} {attack} {arg}");
        }
    }
}

#[test]
fn a_state_directory_stored_under_another_spelling_is_still_the_state_directory() {
    // Made before turngate first ran on this root: turngate's `.turngate` is this directory.
    let ws = Workspace::in_dir(turngate_testfs::folding_dir());
    std::fs::create_dir(ws.root_path().join(".TurnGate")).unwrap();
    let outcome = run(
        bundled(),
        &ws.root,
        "write_file",
        json!({"path": "a.txt", "content": "a"}),
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(ws.root_path().join(".TurnGate/journal.jsonl").is_file());
    for spelling in [".TurnGate", ".turngate", ".TURNGATE"] {
        for (tool, input) in [
            ("list_dir", json!({"path": spelling})),
            (
                "read_file",
                json!({"path": format!("{spelling}/journal.jsonl")}),
            ),
            (
                "write_file",
                json!({"path": format!("{spelling}/evil.txt"), "content": "x"}),
            ),
        ] {
            let outcome = run(bundled(), &ws.root, tool, input.clone());
            assert!(
                outcome.result.is_err(),
                "{tool} {input}: {:?}",
                outcome.result
            );
        }
    }
    for tool in HOSTILE_RW {
        let input = json!({"attack": "walk", "arg": ".", "path": "."});
        let walked = run(hostile(), &ws.root, tool, input)
            .result
            .expect("the root walks");
        assert!(!leaks(&walked), "{tool}: {walked}");
    }
    let listed = run(bundled(), &ws.root, "list_dir", json!({"path": "."}));
    assert!(!leaks(&listed.result.expect("the root lists")));
    assert!(!ws.root_path().join(".TurnGate/evil.txt").exists());
}

#[test]
fn a_deny_holds_for_both_unicode_forms_of_a_name() {
    let ws = Workspace::in_dir(turngate_testfs::folding_dir());
    let nfc = "caf\u{e9}.txt";
    let nfd = "cafe\u{301}.txt";
    // Stored in one form, denied in the other, asked for in either.
    ws.write(nfd, SECRET);
    let policy = Policy::from_toml(&format!(
        "default = \"workspace-write\"\ndeny = [\"{nfc}\"]"
    ))
    .unwrap();
    for name in [nfc, nfd, "CAF\u{c9}.TXT"] {
        for (tool, input) in [
            ("read_file", json!({"path": name})),
            ("write_file", json!({"path": name, "content": "PWNED"})),
        ] {
            let outcome = call(bundled(), &ws.root, &policy, tool, &input.to_string());
            assert!(
                outcome.result.is_err(),
                "{tool} {name}: {:?}",
                outcome.result
            );
        }
    }
    assert_eq!(ws.read(nfd), SECRET);
}

#[test]
fn hostile_guests_of_both_generations_meet_every_spelling_as_the_name_it_is() {
    for tool in HOSTILE_RW {
        let ws = workspace();
        let before = snapshot(&ws.root_path());
        let attack = |attack: &str, arg: &str| {
            // The declared path is the root, so the view grants everything the policy allows.
            let input = json!({"attack": attack, "arg": arg, "path": "."});
            run(hostile(), &ws.root, tool, input)
        };
        for arg in [
            ".ENV",
            ".Env",
            "SECRETS/key.txt",
            "Secrets/Key.Txt",
            ".TURNGATE/journal.jsonl",
        ] {
            let read = attack("read", arg);
            if let Ok(output) = &read.result {
                assert!(
                    !output.contains("do-not-leak") && !output.contains("\"seq\""),
                    "{tool} read {arg}: {output}"
                );
            }
        }
        for arg in ["SECRETS", ".Turngate", ".TURNGATE/pre"] {
            let listed = attack("list", arg);
            assert!(
                listed.result.is_err(),
                "{tool} list {arg}: {:?}",
                listed.result
            );
        }
        let listed = attack("list", ".").result.expect("the root lists");
        assert!(!leaks(&listed), "{tool} list: {listed}");
        assert!(listed.contains("notes.txt"), "{tool} list: {listed}");
        let walked = attack("walk", ".").result.expect("the root walks");
        assert!(!leaks(&walked), "{tool} walk: {walked}");
        for (attack_name, arg) in [
            ("write", ".ENV"),
            ("append", ".Env"),
            ("write", "SECRETS/key.txt"),
            ("create_new", "SECRETS/new.txt"),
            ("mkdir", ".TurnGate"),
            ("mkdir", ".TurnGate/evil"),
            ("write", ".TURNGATE/evil.txt"),
            ("write_all", ".env,.ENV"),
        ] {
            let outcome = attack(attack_name, arg);
            if let Ok(output) = &outcome.result {
                assert!(
                    !output.starts_with("ESCAPED"),
                    "{tool} {attack_name} {arg}: {output}"
                );
            }
            assert_eq!(
                snapshot(&ws.root_path()),
                before,
                "{tool} {attack_name} {arg}"
            );
        }
        // Renaming onto another spelling of a denied name is creating it.
        let renamed = run(
            hostile(),
            &ws.root,
            tool,
            json!({"attack": "rename", "path": "notes.txt", "arg": ".ENV"}),
        );
        assert!(renamed.result.is_err(), "{tool}: {:?}", renamed.result);
        assert_eq!(snapshot(&ws.root_path()), before, "{tool} rename onto .ENV");
        assert_eq!(ws.read(".env"), SECRET);
    }
}

/// The names the root's directory stores (the state directory left out), as `readdir` gives them.
fn stored_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".turngate")
        .collect();
    names.sort();
    names
}

fn last_entry(root: &Root) -> JournalEntry {
    let mut journal = Journal::open(root, Retention::default()).unwrap();
    journal.entries().unwrap().pop().expect("a journaled call")
}

fn undo(root: &Root, id: &str) {
    Journal::open(root, Retention::default())
        .unwrap()
        .undo(root, &UndoTarget::Call(id.into()))
        .unwrap_or_else(|e| panic!("undo {id}: {e}"));
}

/// Runs `tool` as call `id` through one journal for the workspace, which must succeed.
fn run_as(ws: &Workspace, id: &str, toolbox: &Toolbox, tool: &str, input: Value) -> String {
    let policy = Policy::from_toml(POLICY).unwrap();
    let effects = turngate::Effects::default();
    let mut context = turngate::CallContext::new(&ws.root, &policy, &effects);
    context.call_id = Some(id.into());
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, tool, &input.to_string()));
    outcome
        .result
        .unwrap_or_else(|e| panic!("{id} {tool} {input}: {e}"))
}

#[test]
fn each_spelling_of_a_name_is_one_node_of_the_view_and_one_file_of_the_journal() {
    let ws = workspace();
    // The bundled tool writes `A.TXT`: the file stored as `a.txt` changes, under its own name.
    run_as(
        &ws,
        "w1",
        bundled(),
        "write_file",
        json!({"path": "A.TXT", "content": "one\n"}),
    );
    assert_eq!(
        stored_names(&ws.root_path()),
        [".env", "a.txt", "notes.txt", "secrets"]
    );
    assert_eq!(ws.read("a.txt"), "one\n");
    let last = last_entry(&ws.root);
    assert_eq!(last.changes.len(), 1);
    assert_eq!(last.changes[0].path, "a.txt");
    for tool in HOSTILE_RW {
        // Two spellings written in one call are one node: one change, to the stored name.
        run_as(
            &ws,
            tool,
            hostile(),
            tool,
            json!({"attack": "write_all", "arg": "notes.txt,NOTES.TXT,Notes.txt", "path": "."}),
        );
        assert_eq!(ws.read("notes.txt"), "PWNED");
        let last = last_entry(&ws.root);
        let paths: Vec<&str> = last.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["notes.txt"], "{tool}");
        undo(&ws.root, tool);
        assert_eq!(ws.read("notes.txt"), "notes\n");
        // What the call makes itself answers to every spelling of its name as well.
        let id = format!("{tool}-new");
        let input =
            json!({"attack": "write_all", "arg": "fresh.txt,FRESH.TXT,Fresh.Txt", "path": "."});
        run_as(&ws, &id, hostile(), tool, input);
        let last = last_entry(&ws.root);
        let changes: Vec<(&str, &str)> = last
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind.as_str()))
            .collect();
        assert_eq!(changes, [("fresh.txt", "create")], "{tool}");
        assert_eq!(ws.read("fresh.txt"), "PWNED");
        undo(&ws.root, &id);
        assert!(!ws.exists("fresh.txt"));
    }
}

#[test]
fn a_rename_that_changes_only_the_spelling_is_a_rename_journaled_and_undone() {
    for tool in HOSTILE_RW {
        let ws = workspace();
        let id = format!("respell-{tool}");
        run_as(
            &ws,
            &id,
            hostile(),
            tool,
            json!({"attack": "rename", "path": "a.txt", "arg": "A.txt"}),
        );
        assert_eq!(
            stored_names(&ws.root_path()),
            [".env", "A.txt", "notes.txt", "secrets"],
            "{tool}"
        );
        assert_eq!(ws.read("A.txt"), "a\n");
        let last = last_entry(&ws.root);
        let changes: Vec<(&str, &str)> = last
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind.as_str()))
            .collect();
        assert_eq!(
            changes,
            [("a.txt", "delete"), ("A.txt", "create")],
            "{tool}"
        );
        undo(&ws.root, &id);
        assert_eq!(
            stored_names(&ws.root_path()),
            [".env", "a.txt", "notes.txt", "secrets"],
            "{tool}"
        );
        assert_eq!(ws.read("a.txt"), "a\n");
    }
}
