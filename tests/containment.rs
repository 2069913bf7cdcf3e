//! Containment: a deliberately hostile guest (built from `guest-tools/testing/`, never bundled) tries to
//! escape the root and exhaust the host, in each WASI generation (`hostile_rw` and `hostile_ro`, and their
//! 0.3 twins, which make the same attacks through `wasi:filesystem@0.3.0`). Every attempt must end in the right error, leave every file
//! outside the root byte-for-byte unchanged, and leave the host able to serve the next call.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::{HOSTILE_RO, HOSTILE_RW, Workspace, build, call, hash_tree, hostile, test_cache};
use serde_json::json;
use turngate::{
    CallContext, CallError, CallOutcome, Cancel, Effects, Instances, Limits, Policy, RunError,
    ToolError, Toolbox,
};

/// Longest a contained attack may take before the test calls it uncontained (the configured wall-time
/// limit is 1 s; without the epoch ticker a spinning guest would never return).
const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs one hostile call under a watchdog, checks the outside tree is unchanged and that the host still
/// serves a `noop` call afterwards, and returns the attack's outcome.
fn attack(ws: &Workspace, tool: &'static str, input: serde_json::Value) -> CallOutcome {
    let before = hash_tree(&ws.outside_path());
    let (send, receive) = mpsc::channel();
    let root = turngate::Root::open(ws.root_path()).unwrap();
    let input_text = input.to_string();
    std::thread::spawn(move || {
        let outcome = call(hostile(), &root, &Policy::allow_all(), tool, &input_text);
        let _ = send.send(outcome);
    });
    let outcome = receive
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{input}: not stopped within {WATCHDOG:?}"));
    assert_eq!(
        hash_tree(&ws.outside_path()),
        before,
        "{input}: a file outside the root changed"
    );
    let next = call(
        hostile(),
        &ws.root,
        &Policy::allow_all(),
        "hostile_ro",
        r#"{"attack":"noop"}"#,
    );
    assert_eq!(
        next.result.unwrap(),
        "ok",
        "the host keeps serving after {input}"
    );
    assert!(
        outcome.ran(),
        "{input}: the attack must reach the sandbox, not stop at the gate"
    );
    outcome
}

/// The attack must have failed inside the guest with a tool error (the guest reports `ESCAPED` when an
/// operation it should not be able to do succeeds).
fn assert_contained(outcome: &CallOutcome) -> ToolError {
    match &outcome.result {
        Err(CallError::Run(RunError::Tool(e))) => e.clone(),
        other => panic!("not contained: {other:?}"),
    }
}

/// The kind of the limit or trap that stopped the call (`timeout`, `memory_limit`, `output_limit`, `trap`).
fn sandbox_error(outcome: &CallOutcome) -> &'static str {
    match &outcome.result {
        Err(CallError::Run(e)) if !matches!(e, RunError::Tool(_)) => e.kind(),
        other => panic!("expected the sandbox to stop the call, got {other:?}"),
    }
}

fn escape_workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("inside.txt", "inside\n");
    let outside = ws.outside_path();
    std::fs::create_dir(outside.join("dir")).unwrap();
    std::fs::write(outside.join("dir/file.txt"), "outside dir file\n").unwrap();
    let root = ws.root_path();
    std::os::unix::fs::symlink("../outside", root.join("link_dir_relative")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link_dir_absolute")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link_file")).unwrap();
    ws
}

#[test]
fn parent_directory_paths_are_contained() {
    let ws = escape_workspace();
    for attack_name in ["read", "write", "append"] {
        for tool in HOSTILE_RW.into_iter().chain(HOSTILE_RO) {
            let outcome = attack(
                &ws,
                tool,
                json!({"attack": attack_name, "arg": "../outside/secret.txt"}),
            );
            assert_contained(&outcome);
        }
    }
    for tool in HOSTILE_RW {
        assert_contained(&attack(&ws, tool, json!({"attack": "list", "arg": ".."})));
        assert_contained(&attack(
            &ws,
            tool,
            json!({"attack": "write", "arg": "../outside/new.txt"}),
        ));
        assert!(!ws.outside_path().join("new.txt").exists(), "{tool}");
    }
}

#[test]
fn absolute_paths_are_contained() {
    let ws = escape_workspace();
    let secret = ws.outside_path().join("secret.txt").display().to_string();
    for tool in HOSTILE_RW {
        for attack_name in ["read", "write"] {
            assert_contained(&attack(
                &ws,
                tool,
                json!({"attack": attack_name, "arg": secret}),
            ));
        }
        // `/etc/passwd` names `etc/passwd` beneath the root inside the sandbox, which does not exist.
        let e = assert_contained(&attack(
            &ws,
            tool,
            json!({"attack": "read", "arg": "/etc/passwd"}),
        ));
        assert!(!format!("{e:?}").contains("root:"), "{tool}: {e:?}");
    }
}

#[test]
fn symlinks_leading_outside_are_contained() {
    let ws = escape_workspace();
    for link in [
        "link_dir_relative/secret.txt",
        "link_dir_absolute/secret.txt",
        "link_dir_relative/dir/file.txt",
        "link_file",
    ] {
        for attack_name in ["read", "write", "append"] {
            for tool in HOSTILE_RW {
                assert_contained(&attack(
                    &ws,
                    tool,
                    json!({"attack": attack_name, "arg": link}),
                ));
            }
        }
    }
    for tool in HOSTILE_RW {
        assert_contained(&attack(
            &ws,
            tool,
            json!({"attack": "write", "arg": "link_dir_absolute/planted.txt"}),
        ));
        assert_contained(&attack(
            &ws,
            tool,
            json!({"attack": "list", "arg": "link_dir_relative"}),
        ));
        assert!(!ws.outside_path().join("planted.txt").exists(), "{tool}");
    }
}

/// A directory descriptor is a capability, as WASI says: no path taken from it climbs above it, by `..`
/// or through a symlink (even to a file the call may read), and only one opened with `mutate-directory`
/// can have entries made in it. The view of either generation holds to this; a 0.3 guest is the one
/// that works with descriptors directly.
#[test]
fn a_wasi_0_3_guest_s_directory_descriptor_confines_its_paths_and_rights() {
    // The whole root is granted, writable (`path` is `.`): only the descriptor stands in the way.
    let ws = Workspace::new();
    ws.write("sub/inside.txt", "inside\n");
    ws.write("beside.txt", "beside\n");
    std::os::unix::fs::symlink("../beside.txt", ws.root_path().join("sub/up")).unwrap();
    let from = |attack_name: &str, arg: &str| {
        attack(
            &ws,
            "hostile_rw_p3",
            json!({"attack": attack_name, "path": ".", "arg": arg}),
        )
    };
    assert_eq!(
        from("read_from", "sub/inside.txt").result.unwrap(),
        "read inside.txt: inside\n"
    );
    // The same file is readable from the root: only climbing out of `sub` is refused.
    assert_eq!(
        from("read_from", "./beside.txt").result.unwrap(),
        "read beside.txt: beside\n"
    );
    for arg in ["sub/../beside.txt", "sub/up"] {
        let e = assert_contained(&from("read_from", arg));
        assert!(matches!(e, ToolError::Denied(_)), "{arg}: {e:?}");
    }
    let before = ws.tree();
    let e = assert_contained(&from("write_from", "sub/new.txt"));
    assert!(matches!(e, ToolError::Denied(_)), "{e:?}");
    assert_eq!(
        ws.tree(),
        before,
        "nothing made through a directory without mutate-directory"
    );
    let outcome = from("write_from_mutable", "sub/new.txt");
    assert_eq!(outcome.result.unwrap(), "wrote new.txt");
    assert_eq!(ws.read("sub/new.txt"), "PWNED");
}

/// WASI 0.3 lets a guest ask for a symlink or a hard link directly (0.2's std has no stable way): the
/// view makes neither, whether it would lead outside the root or stay inside, so no effect can reach a
/// file the approval never named.
#[test]
fn a_wasi_0_3_guest_makes_no_symlink_and_no_hard_link() {
    let ws = escape_workspace();
    for (attack_name, arg) in [
        ("symlink", "../outside"),
        ("symlink", "inside.txt"),
        ("link", "../outside/secret.txt"),
        ("link", "inside.txt"),
    ] {
        let e = assert_contained(&attack(
            &ws,
            "hostile_rw_p3",
            json!({"attack": attack_name, "path": "made", "arg": arg}),
        ));
        assert!(
            matches!(e, ToolError::Denied(_)),
            "{attack_name} {arg}: {e:?}"
        );
        assert!(
            std::fs::symlink_metadata(ws.root_path().join("made")).is_err(),
            "{attack_name} {arg}: nothing was made"
        );
    }
}

#[test]
fn read_only_tools_cannot_write() {
    let ws = escape_workspace();
    let before = hash_tree(&ws.root_path());
    for tool in HOSTILE_RO {
        for attack_name in ["write", "append", "create_new", "mkdir"] {
            for target in ["inside.txt", "new.txt"] {
                let e = assert_contained(&attack(
                    &ws,
                    tool,
                    json!({"attack": attack_name, "arg": target}),
                ));
                assert!(
                    matches!(e, ToolError::Denied(_) | ToolError::Failed(_)),
                    "{tool} {attack_name} {target}: {e:?}"
                );
            }
        }
    }
    assert_eq!(hash_tree(&ws.root_path()), before, "the root is unchanged");
    // The same attack from a tool that declared write access does write (the control case).
    for tool in HOSTILE_RW {
        let target = format!("new-{tool}.txt");
        let outcome = attack(&ws, tool, json!({"attack": "write", "arg": target}));
        assert!(outcome.result.is_ok(), "{tool}: {:?}", outcome.result);
        assert_eq!(ws.read(&target), "PWNED", "{tool}");
    }
}

#[test]
fn reading_inside_the_root_works() {
    // The control case for the escape tests: the same attack code reads a file beneath the root.
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(&ws, tool, json!({"attack": "read", "arg": "inside.txt"}));
        assert_eq!(outcome.result.unwrap(), "ESCAPED read: inside\n", "{tool}");
    }
}

#[test]
fn an_infinite_loop_times_out() {
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(&ws, tool, json!({"attack": "spin"}));
        assert_eq!(sandbox_error(&outcome), "timeout", "{tool}");
        // It ran to its 1 s limit; the upper bound is no speed check, only a limit that never fired
        // told from one that did on a loaded machine.
        assert!(
            outcome.duration >= Duration::from_secs(1)
                && outcome.duration < Duration::from_secs(30),
            "{tool}: {:?}",
            outcome.duration
        );
    }
}

/// A toolbox holding the `busy` guest, which declares no paths: its calls run on the caller's task.
fn busy(wall_time: Duration) -> Toolbox {
    build(
        Toolbox::builder()
            .cache(test_cache())
            .limits(Limits {
                wall_time,
                ..Limits::default()
            })
            .component_file(env!("TURNGATE_TEST_GUEST_BUSY"))
            .unwrap(),
    )
}

#[test]
fn a_computing_call_without_a_view_times_out_and_leaves_the_thread_to_other_tasks() {
    // One thread for the call and for a task that counts the milliseconds: the guest must yield to it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ws = Workspace::new();
    let toolbox = busy(Duration::from_secs(1));
    let ticks = Arc::new(AtomicUsize::new(0));
    let outcome = runtime.block_on(async {
        let counted = ticks.clone();
        let counter = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        let outcome = toolbox
            .call(&ws.root, &Policy::allow_all(), "busy", r#"{"mode":"spin"}"#)
            .await;
        counter.abort();
        outcome
    });
    assert_eq!(sandbox_error(&outcome), "timeout");
    // It ran to its 1 s limit; the upper bound only tells a limit that never fired from a loaded
    // machine's late one.
    assert!(
        outcome.duration >= Duration::from_secs(1) && outcome.duration < Duration::from_secs(30),
        "{:?}",
        outcome.duration
    );
    // The guest yields every epoch tick (5 ms): about 200 ticks in its second; none if it never
    // yielded.
    let ticks = ticks.load(Ordering::SeqCst);
    assert!(
        ticks >= 20,
        "the other task ran only {ticks} times during the call"
    );
}

#[test]
fn a_call_without_a_view_stops_when_cancelled_whether_it_computes_or_sleeps() {
    // The wall-time limit is far off: only the cancellation can stop these calls early.
    let toolbox = busy(Duration::from_secs(60));
    let ws = Workspace::new();
    let policy = Policy::allow_all();
    let effects = Effects::default();
    // Compiled once beforehand (a call cut at once by a cancel set before it), so the cancels below
    // come a second after calls that start within milliseconds.
    let warm = Cancel::new();
    warm.cancel();
    let mut context = CallContext::new(&ws.root, &policy, &effects);
    context.cancel = Some(&warm);
    let _ = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, "busy", r#"{"mode": "spin"}"#));
    for mode in ["spin", "sleep"] {
        let cancel = Cancel::new();
        let trigger = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            trigger.cancel();
        });
        let mut context = CallContext::new(&ws.root, &policy, &effects);
        context.cancel = Some(&cancel);
        let input = json!({ "mode": mode }).to_string();
        let outcome = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(toolbox.call_in(&mut context, "busy", &input));
        assert!(
            matches!(outcome.result, Err(CallError::Run(RunError::Cancelled))),
            "{mode}: {:?}",
            outcome.result
        );
        // It was running when the cancel stopped it.
        assert_eq!(
            String::from_utf8_lossy(&outcome.stdout),
            "busy: started\n",
            "{mode}"
        );
        // Not a speed check: uncancelled, the call would run to its 60 s wall-time limit.
        assert!(
            outcome.duration < Duration::from_secs(30),
            "{mode}: {:?}",
            outcome.duration
        );
    }
}

#[test]
fn a_sleeping_guest_times_out() {
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(&ws, tool, json!({"attack": "sleep"}));
        assert_eq!(sandbox_error(&outcome), "timeout", "{tool}");
    }
}

#[test]
fn allocating_a_gibibyte_hits_the_memory_limit() {
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(&ws, tool, json!({"attack": "alloc", "size": 1u64 << 30}));
        assert_eq!(sandbox_error(&outcome), "memory_limit", "{tool}");
    }
}

#[test]
fn printing_ten_megabytes_hits_the_output_limit() {
    // A 0.2 guest traps at the write that does not fit; a 0.3 guest is told through its stream's
    // error, and the call still ends at the output limit whatever the guest does next.
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(&ws, tool, json!({"attack": "print", "size": 10_000_000}));
        assert_eq!(sandbox_error(&outcome), "output_limit", "{tool}");
        assert!(
            outcome.stdout.len() <= hostile().limits().output_bytes,
            "{tool}"
        );
    }
}

#[test]
fn a_ten_megabyte_result_hits_the_output_limit() {
    let ws = escape_workspace();
    for tool in HOSTILE_RO {
        let outcome = attack(
            &ws,
            tool,
            json!({"attack": "big_result", "size": 10_000_000}),
        );
        assert_eq!(sandbox_error(&outcome), "output_limit", "{tool}");
    }
}

/// A 0.3 guest reading a huge file through a stream is bounded by its memory: the stream moves what the
/// guest's buffer holds, so the guest, not the host, runs out (a sparse gibibyte costs the test nothing).
#[test]
fn a_wasi_0_3_stream_read_of_a_huge_file_hits_the_memory_limit() {
    let ws = escape_workspace();
    let huge = std::fs::File::create(ws.root_path().join("huge.bin")).unwrap();
    huge.set_len(1 << 30).unwrap();
    let outcome = attack(
        &ws,
        "hostile_ro_p3",
        json!({"attack": "read", "arg": "huge.bin"}),
    );
    assert_eq!(sandbox_error(&outcome), "memory_limit");
}

#[test]
fn a_panic_is_a_trap_carrying_the_guest_message() {
    let ws = escape_workspace();
    let outcome = attack(&ws, "hostile_ro", json!({"attack": "panic", "arg": "boom"}));
    match outcome.result {
        Err(CallError::Run(RunError::Trap { guest_message, .. })) => {
            assert!(
                guest_message.contains("hostile panic: boom"),
                "{guest_message}"
            )
        }
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn no_state_survives_between_calls() {
    let ws = escape_workspace();
    let first = attack(&ws, "hostile_ro", json!({"attack": "counter"}));
    let second = attack(&ws, "hostile_ro", json!({"attack": "counter"}));
    assert_eq!(first.result.unwrap(), "1");
    assert_eq!(
        second.result.unwrap(),
        "1",
        "each call gets a fresh instance"
    );
}

/// A pooled slot keeps the low megabyte of memory mapped between calls (`sandbox/mod.rs`,
/// `Resident::Kept`): what a call left in it (here, in its unused stack) is reset before the next.
#[test]
fn no_state_survives_between_calls_in_the_memory_a_slot_keeps_resident() {
    const MARK: u64 = 0x7475_726e_6761_7465;
    let ws = escape_workspace();
    for _ in 0..3 {
        let outcome = attack(&ws, "hostile_ro", json!({"attack": "stack_residue"}));
        let answer = outcome.result.unwrap();
        let (seen, address) = answer.split_once(" at ").unwrap();
        assert!(
            address.parse::<u64>().unwrap() < 1 << 20,
            "the word is in the resident megabyte: {answer}"
        );
        assert_ne!(
            seen.parse::<u64>().unwrap(),
            MARK,
            "a previous call's mark survived"
        );
    }
}

/// A pooled slot leaves memory a call grew mapped for the next call (`sandbox/mod.rs`,
/// `engine_with`): what a call left there is reset before the next, which grows the same pages.
#[test]
fn no_state_survives_between_calls_in_the_memory_a_call_grew() {
    let ws = escape_workspace();
    let mut addresses = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let outcome = attack(&ws, "hostile_ro", json!({"attack": "grown_residue"}));
        let answer = outcome.result.unwrap();
        let (seen, address) = answer.split_once(" at ").unwrap();
        assert!(
            address.parse::<u64>().unwrap() >= 1 << 20,
            "the word is beyond the resident megabyte: {answer}"
        );
        addresses.insert(address.to_owned());
        // Grown memory reads as zeros: anything else is a previous call's mark.
        assert_eq!(seen, "0", "a previous call's mark survived");
    }
    assert_eq!(addresses.len(), 1, "each call grew the same pages");
}

#[test]
fn a_hard_link_to_an_outside_file_is_refused_by_the_gate() {
    let ws = Workspace::new();
    std::fs::hard_link(
        ws.outside_path().join("secret.txt"),
        ws.root_path().join("linked.txt"),
    )
    .unwrap();
    let before = hash_tree(&ws.outside_path());
    let outcome = call(
        hostile(),
        &ws.root,
        &Policy::allow_all(),
        "write_file",
        r#"{"path":"linked.txt","content":"overwritten"}"#,
    );
    match outcome.result {
        Err(CallError::Gate(e)) => assert_eq!(e.step(), "path", "{e}"),
        other => panic!("expected a path refusal, got {other:?}"),
    }
    assert_eq!(hash_tree(&ws.outside_path()), before);
}

#[test]
fn write_file_through_an_allowed_hard_link_replaces_the_link_not_the_outside_file() {
    let ws = Workspace::new();
    std::fs::hard_link(
        ws.outside_path().join("secret.txt"),
        ws.root_path().join("linked.txt"),
    )
    .unwrap();
    let before = hash_tree(&ws.outside_path());
    let policy =
        Policy::from_toml("allow_hard_links = true\n[tools.write_file]\npaths = [\"**\"]\n")
            .unwrap();
    let outcome = call(
        hostile(),
        &ws.root,
        &policy,
        "write_file",
        r#"{"path":"linked.txt","content":"overwritten"}"#,
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(ws.read("linked.txt"), "overwritten");
    assert_eq!(
        hash_tree(&ws.outside_path()),
        before,
        "the outside file keeps its content"
    );
}

#[test]
fn the_guest_gets_no_environment_and_no_arguments() {
    // The test process has PATH, HOME and cargo's variables: any of them would show if inherited.
    let ws = escape_workspace();
    let outcome = attack(&ws, "hostile_ro", json!({"attack": "env"}));
    assert_eq!(outcome.result.unwrap(), "vars=[] args=[]");
}

#[test]
fn a_conformance_probe_runs_without_any_filesystem() {
    // `Toolbox::probe` skips the gate, so it must not grant the root, `/` or the working directory:
    // files that exist at each (a workspace's file by its absolute path, this crate's Cargo.toml in
    // the working directory) are not there for the tool, and a walk from `/` or `.` sees nothing.
    let ws = escape_workspace();
    let absolute = ws.root_path().join("inside.txt");
    assert!(
        std::path::Path::new("Cargo.toml").exists(),
        "the working directory has one"
    );
    let probe = |input: serde_json::Value| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(hostile().probe("hostile_rw", &input.to_string()))
            .expect("hostile_rw is loaded")
    };
    for arg in [absolute.to_str().unwrap(), "Cargo.toml", "inside.txt"] {
        let outcome = probe(json!({"attack": "read", "arg": arg}));
        let error = assert_contained(&outcome);
        assert_eq!(error.kind(), "not-found", "{arg}: {error}");
    }
    for arg in ["/", "."] {
        let outcome = probe(json!({"attack": "walk", "arg": arg}));
        let seen = format!("{:?}", outcome.result);
        assert!(
            !seen.contains("inside") && !seen.contains("Cargo") && !seen.contains("[package]"),
            "{arg}: {seen}"
        );
    }
}

/// An engine that allocates each call's instance on demand (`Instances::OnDemand`: nothing reserved,
/// for a process whose address space is limited) keeps every limit too: memory, wall time, output.
#[test]
fn the_on_demand_engine_keeps_every_limit() {
    let ws = escape_workspace();
    let toolbox = build(
        Toolbox::builder()
            .cache(test_cache())
            .instances(Instances::OnDemand)
            .limits(Limits {
                wall_time: Duration::from_millis(300),
                memory_bytes: 64 << 20,
                output_bytes: 4096,
                ..Limits::default()
            })
            .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_RO"))
            .unwrap(),
    );
    let kind = |input: serde_json::Value| {
        let outcome = call(
            &toolbox,
            &ws.root,
            &Policy::allow_all(),
            "hostile_ro",
            &input.to_string(),
        );
        sandbox_error(&outcome)
    };
    assert_eq!(
        kind(json!({"attack": "alloc", "size": 1u64 << 30})),
        "memory_limit"
    );
    assert_eq!(kind(json!({"attack": "sleep"})), "timeout");
    assert_eq!(
        kind(json!({"attack": "print", "size": 10_000_000})),
        "output_limit"
    );
}

/// A toolbox holding the `p3_probe` guest, built for WASI 0.3, under these limits.
fn p3_probe(limits: Limits) -> Toolbox {
    build(
        Toolbox::builder()
            .cache(test_cache())
            .without_bundled()
            .limits(limits)
            .component_file(env!("TURNGATE_TEST_GUEST_P3_PROBE"))
            .unwrap(),
    )
}

/// Calls `p3_probe` with `input` on a thread of its own under [`WATCHDOG`], so a call nothing stops
/// fails the test instead of hanging it.
fn p3_call(toolbox: &Arc<Toolbox>, ws: &Workspace, input: serde_json::Value) -> CallOutcome {
    let (send, receive) = mpsc::channel();
    let (toolbox, root) = (
        toolbox.clone(),
        turngate::Root::open(ws.root_path()).unwrap(),
    );
    std::thread::spawn(move || {
        let outcome = call(
            &toolbox,
            &root,
            &Policy::allow_all(),
            "p3_probe",
            &input.to_string(),
        );
        let _ = send.send(outcome);
    });
    receive
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("not stopped within {WATCHDOG:?}"))
}

/// A WASI 0.3 guest parked in an async import (a clock wait of ten minutes) runs no wasm, so no epoch
/// check can stop it: the wall-time limit drops the whole call. One that computes is stopped as a 0.2
/// guest is. One that waits on a stream nobody writes, or a future nobody completes, can never go on:
/// wasmtime ends it at once as deadlocked, a trap. Every one is answered, and the host serves the next
/// call.
#[test]
fn a_wasi_0_3_guest_parked_in_a_host_future_or_computing_stops_at_its_wall_time() {
    let toolbox = Arc::new(p3_probe(Limits {
        wall_time: Duration::from_secs(1),
        ..Limits::default()
    }));
    let ws = Workspace::new();
    assert_eq!(
        p3_call(&toolbox, &ws, json!({"op": "sleep", "ms": 10}))
            .result
            .unwrap(),
        "slept"
    );
    for input in [json!({"op": "sleep", "ms": 600_000}), json!({"op": "spin"})] {
        let outcome = p3_call(&toolbox, &ws, input.clone());
        assert_eq!(sandbox_error(&outcome), "timeout", "{input}");
        // Not a speed check: the bounds tell a limit that fired from one that never did.
        assert!(
            outcome.duration >= Duration::from_secs(1)
                && outcome.duration < Duration::from_secs(30),
            "{input}: {:?}",
            outcome.duration
        );
        let next = p3_call(&toolbox, &ws, json!({"op": "noop"}));
        assert_eq!(next.result.unwrap(), "ok", "after {input}");
    }
    for input in [json!({"op": "stuck_stream"}), json!({"op": "stuck_future"})] {
        let outcome = p3_call(&toolbox, &ws, input.clone());
        assert_eq!(
            sandbox_error(&outcome),
            "trap",
            "{input}: {:?}",
            outcome.result
        );
        let trap = outcome.result.unwrap_err().to_string();
        assert!(trap.contains("deadlock"), "{input}: {trap}");
        let next = p3_call(&toolbox, &ws, json!({"op": "noop"}));
        assert_eq!(next.result.unwrap(), "ok", "after {input}");
    }
}

/// Cancel stops a WASI 0.3 call wherever it is: parked in a host future, or computing.
#[test]
fn a_wasi_0_3_call_stops_when_cancelled_whether_it_waits_or_computes() {
    // The wall-time limit is far off: only the cancellation can stop these calls early.
    let toolbox = p3_probe(Limits {
        wall_time: Duration::from_secs(60),
        ..Limits::default()
    });
    let ws = Workspace::new();
    let (policy, effects) = (Policy::allow_all(), Effects::default());
    // Compiled and run once beforehand, so the cancels below come a second after calls that start
    // within milliseconds (and the stdout check below tells if one did not).
    let mut context = CallContext::new(&ws.root, &policy, &effects);
    let warm = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, "p3_probe", r#"{"op": "noop"}"#));
    assert_eq!(warm.result.unwrap(), "ok");
    for input in [json!({"op": "sleep", "ms": 600_000}), json!({"op": "spin"})] {
        let cancel = Cancel::new();
        let trigger = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            trigger.cancel();
        });
        let mut context = CallContext::new(&ws.root, &policy, &effects);
        context.cancel = Some(&cancel);
        let outcome = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(toolbox.call_in(&mut context, "p3_probe", &input.to_string()));
        assert!(
            matches!(outcome.result, Err(CallError::Run(RunError::Cancelled))),
            "{input}: {:?}",
            outcome.result
        );
        // It was running when the cancel stopped it.
        assert_eq!(
            String::from_utf8_lossy(&outcome.stdout),
            "p3_probe: started\n",
            "{input}"
        );
        assert!(
            outcome.duration < Duration::from_secs(30),
            "{input}: {:?}",
            outcome.duration
        );
    }
}

/// A WASI 0.3 guest's memory is bounded as a 0.2 guest's is, and so are the streams and subtasks it may
/// open: a thousand are fine; thirty thousand streams (sixty thousand handles, each end one, in host
/// memory the memory limit does not see), or sixty thousand subtasks waiting at once, pass the call's
/// bound of 50,000 handles and end the call.
#[test]
fn a_wasi_0_3_guest_s_memory_and_stream_handles_are_bounded() {
    let toolbox = Arc::new(p3_probe(Limits {
        wall_time: Duration::from_secs(10),
        memory_bytes: 64 << 20,
        ..Limits::default()
    }));
    let ws = Workspace::new();
    let outcome = p3_call(&toolbox, &ws, json!({"op": "grow"}));
    assert_eq!(sandbox_error(&outcome), "memory_limit");
    let outcome = p3_call(&toolbox, &ws, json!({"op": "streams", "count": 1000}));
    assert_eq!(outcome.result.unwrap(), "opened 1000");
    let outcome = p3_call(&toolbox, &ws, json!({"op": "streams", "count": 30_000}));
    assert_eq!(sandbox_error(&outcome), "trap", "{:?}", outcome.result);
    let trap = outcome.result.unwrap_err().to_string();
    assert!(trap.contains("handle limit exceeded"), "{trap}");
    // Subtasks are handles too: a thousand waiting at once are fine, sixty thousand end the call.
    let outcome = p3_call(&toolbox, &ws, json!({"op": "subtasks", "count": 1000}));
    assert_eq!(outcome.result.unwrap(), "waited in 1000 subtasks");
    let outcome = p3_call(&toolbox, &ws, json!({"op": "subtasks", "count": 60_000}));
    assert_eq!(sandbox_error(&outcome), "trap", "{:?}", outcome.result);
    let trap = outcome.result.unwrap_err().to_string();
    assert!(trap.contains("handle limit exceeded"), "{trap}");
    let next = p3_call(&toolbox, &ws, json!({"op": "noop"}));
    assert_eq!(next.result.unwrap(), "ok");
}
