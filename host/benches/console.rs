//! The console's server time and the cost of a recorded approval, against baselines in the same run;
//! prints a Markdown table. `cargo bench --bench console`. Rows:
//!
//! * the timeline's first page and a page from the middle of a 10,000-call journal (1,000 turns of 10
//!   `write_file` calls), each request over loopback HTTP as the page makes it, against the
//!   smallest request the console answers (`/api/session`: the same connection, guard and JSON);
//! * the approvals page with 100 questions waiting, against the same baseline;
//! * a `write_file` call whose tool asks, from the ask to the applied change, answered at once: through
//!   the root's recorded approvals (`DurableApprover`, answered by a thread watching the questions
//!   as the console does) against the in-process approver (`ApproveAll`);
//! * a turn of 10 such calls on 10 files, from the turn's start to its report, through the same
//!   recorded approvals and watcher: its questions asked together (`DurableApprover` as it is,
//!   `Asking::Together`) against asked one at a time (the same approver saying `Asking::OneAtATime`).

mod support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use support::{row, samples};
use turngate::console::{Console, ConsoleOptions};
use turngate::effects::diff::DiffSize;
use turngate::effects::journal::Retention;
use turngate::providers::TurnDecoder;
use turngate::{
    ApprovalFuture, ApprovalRequest, ApproveAll, Approver, CacheSetting, CallContext,
    DurableApprover, Effects, PendingApproval, PendingApprovals, Policy, Provider, Root, Toolbox,
    TurnHooks, TurnOptions, call_audited, process_turn_with,
};

const JOURNAL_CALLS: usize = 10_000;
const CALLS_PER_TURN: usize = 10;
const PENDING: usize = 100;
const PAGE_SAMPLES: usize = 200;
const APPROVAL_SAMPLES: usize = 300;
const TOKEN: &str = "bench-token-bench-token-bench-token";

/// One GET over a new connection, as a script with the token makes it; the body's length.
fn get(addr: SocketAddr, path: &str) -> usize {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{path}");
    answer.len()
}

fn asking_policy() -> Policy {
    Policy::from_toml("[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n").unwrap()
}

/// A `write_file` call of 1 KiB, asking `approver`.
fn asked_call(
    runtime: &tokio::runtime::Runtime,
    toolbox: &Toolbox,
    root: &Root,
    effects: &Effects,
    approver: &dyn Approver,
    prefix: &str,
    n: usize,
) -> Duration {
    let policy = asking_policy();
    let mut context = CallContext::new(root, &policy, effects);
    context.approver = Some(approver);
    context.call_id = Some(format!("a{n}"));
    // A new file each call: a call that changes nothing asks nothing.
    let input =
        serde_json::json!({"path": format!("{prefix}{n}.txt"), "content": "y".repeat(1024)})
            .to_string();
    let start = Instant::now();
    let (outcome, _) = runtime.block_on(call_audited(toolbox, &mut context, "write_file", &input));
    let elapsed = start.elapsed();
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    elapsed
}

/// Turns a sample of the turn rows (each side).
const TURN_SAMPLES: usize = 100;

/// A turn of [`CALLS_PER_TURN`] `write_file` calls of 1 KiB on new files, each asking `approver`:
/// from its start to its report.
fn asked_turn(
    runtime: &tokio::runtime::Runtime,
    toolbox: &Toolbox,
    root: &Root,
    approver: &dyn Approver,
    n: usize,
) -> Duration {
    let content: Vec<serde_json::Value> = (0..CALLS_PER_TURN)
        .map(|call| {
            serde_json::json!({"type": "tool_use", "id": format!("t{n}c{call}"), "name": "write_file",
                "input": {"path": format!("turn{n}-f{call}.txt"), "content": "z".repeat(1024)}})
        })
        .collect();
    let body = serde_json::json!({
        "id": "m", "type": "message", "role": "assistant", "model": "x", "content": content,
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    let mut decoder = TurnDecoder::new(Provider::Anthropic);
    decoder.feed(body.to_string().as_bytes());
    let turn = decoder.finish();
    let policy = asking_policy();
    let hooks = TurnHooks {
        approver: Some(approver),
        cancel: None,
    };
    let start = Instant::now();
    let report = runtime.block_on(process_turn_with(
        toolbox,
        root,
        &policy,
        turn,
        TurnOptions::default(),
        hooks,
    ));
    let elapsed = start.elapsed();
    assert!(report.all_ok(), "{:?}", report.calls);
    elapsed
}

/// An approver asking one question at a time through another.
struct OneAtATime<'a>(&'a DurableApprover);

impl Approver for OneAtATime<'_> {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        self.0.approve(request)
    }

    fn diff_size(&self) -> DiffSize {
        self.0.diff_size()
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache.path().to_path_buf()))
                .build(),
        )
        .unwrap();

    // The journal: 10,000 applied calls.
    let journal_dir = tempfile::tempdir().unwrap();
    let root = Root::open(journal_dir.path()).unwrap();
    let effects = Effects::new(Retention {
        max_calls: 2 * JOURNAL_CALLS,
        ..Retention::default()
    });
    let policy = Policy::allow_all();
    let made = Instant::now();
    for i in 0..JOURNAL_CALLS {
        let mut context = CallContext::new(&root, &policy, &effects);
        context.call_id = Some(format!("c{i}"));
        context.turn = Some(format!("t{}", i / CALLS_PER_TURN));
        let input =
            serde_json::json!({"path": format!("f{}.txt", i % 200), "content": format!("{i}\n")})
                .to_string();
        let (outcome, _) =
            runtime.block_on(call_audited(&toolbox, &mut context, "write_file", &input));
        assert!(outcome.result.is_ok());
    }
    eprintln!(
        "{JOURNAL_CALLS} journaled calls made in {:.1?}",
        made.elapsed()
    );

    // 100 questions waiting in another root.
    let pending_dir = tempfile::tempdir().unwrap();
    let pending_root = Root::open(pending_dir.path()).unwrap();
    let approvals = PendingApprovals::open(&pending_root).unwrap();
    let diff = format!(
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-{}\n+{}\n",
        "o".repeat(500),
        "n".repeat(500)
    );
    for i in 0..PENDING {
        let input = format!(
            r#"{{"path":"notes{i}.txt","content":"{}"}}"#,
            "n".repeat(500)
        );
        let id = format!("q{i}");
        let request = ApprovalRequest {
            id: Some(&id),
            turn: Some("t1"),
            position: Some(i),
            tool: "write_file",
            provenance: None,
            asked_because: turngate::AskedBecause::ToolAsks,
            input: &input,
            paths: Vec::new(),
            changes: None,
            diff: &diff,
            network: None,
        };
        approvals
            .ask(&PendingApproval {
                digest: request.digest(),
                asked_ms: 0,
                deadline_ms: u64::MAX,
                turn: Some("t1".into()),
                position: Some(i),
                request: request.to_json(),
            })
            .unwrap();
    }

    let serve = |root: Root| -> SocketAddr {
        let options = ConsoleOptions {
            root,
            audit_log: None,
            token: Some(TOKEN.into()),
            tools: None,
            fleet: None,
        };
        let console = runtime
            .block_on(Console::bind("127.0.0.1:0".parse().unwrap(), options))
            .unwrap();
        let addr = console.local_addr();
        runtime.spawn(console.serve());
        addr
    };
    let journal_console = serve(Root::open(journal_dir.path()).unwrap());
    let pending_console = serve(Root::open(pending_dir.path()).unwrap());

    println!("| case | turngate (median) | p90 | baseline | baseline (median) | p90 | ratio |");
    println!("|---|---|---|---|---|---|---|");
    let session = samples(PAGE_SAMPLES, || {
        get(journal_console, "/api/session");
    });
    let first_page = samples(PAGE_SAMPLES, || {
        get(journal_console, "/api/journal");
    });
    row(
        "timeline, first page (50 calls) of a 10,000-call journal",
        &first_page,
        "`/api/session`",
        &session,
    );
    let middle = format!("/api/journal?before={}", JOURNAL_CALLS / 2);
    let middle_page = samples(PAGE_SAMPLES, || {
        get(journal_console, &middle);
    });
    row(
        "timeline, a page from its middle",
        &middle_page,
        "`/api/session`",
        &session,
    );
    let pending_page = samples(PAGE_SAMPLES, || {
        get(pending_console, "/api/approvals");
    });
    row(
        "approvals page, 100 waiting",
        &pending_page,
        "`/api/session`",
        &session,
    );

    // Ask to applied, answered at once.
    let asked_dir = tempfile::tempdir().unwrap();
    let asked_root = Root::open(asked_dir.path()).unwrap();
    let asked_effects = Effects::default();
    let mut n = 0;
    let in_process = samples(APPROVAL_SAMPLES, || {
        n += 1;
        let approver = &ApproveAll;
        asked_call(
            &runtime,
            &toolbox,
            &asked_root,
            &asked_effects,
            approver,
            "in",
            n,
        );
    });
    let durable = DurableApprover::new(
        PendingApprovals::open(&asked_root).unwrap(),
        Duration::from_secs(600),
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answerer = {
        let durable = durable.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for question in durable.approvals().waiting().unwrap().questions {
                    let _ = durable.answer(&question.digest, true);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let mut n = 0;
    let recorded = samples(APPROVAL_SAMPLES, || {
        n += 1;
        asked_call(
            &runtime,
            &toolbox,
            &asked_root,
            &asked_effects,
            &durable,
            "rec",
            n,
        );
    });
    let mut n = 0;
    let mut turn_of = |approver: &dyn Approver| {
        n += 1;
        asked_turn(&runtime, &toolbox, &asked_root, approver, n)
    };
    let (mut together, mut one_at_a_time) = (Vec::new(), Vec::new());
    for _ in 0..TURN_SAMPLES {
        together.push(turn_of(&durable));
        one_at_a_time.push(turn_of(&OneAtATime(&durable)));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    answerer.join().unwrap();
    row(
        "`write_file` that asks, ask to applied: recorded in the root, answered by a watcher",
        &recorded,
        "`ApproveAll` in-process",
        &in_process,
    );
    row(
        "a turn of 10 `write_file` calls that ask, recorded and answered by a watcher: asked together",
        &together,
        "asked one at a time",
        &one_at_a_time,
    );
    let extra = |a: &[Duration], b: &[Duration]| {
        support::median(a.to_vec()).as_secs_f64() - support::median(b.to_vec()).as_secs_f64()
    };
    println!(
        "\nrecorded approval over the in-process approver: {:.2} ms (median against median)",
        extra(&recorded, &in_process) * 1e3
    );
}
