//! `turngate worker` and `turngate submit` against a real NATS server (started by each test from the
//! system binary): answers as `run` gives them, refusals of malformed jobs, and one test per
//! protection of exactly-once (journal lookup, de-duplication IDs, ack after store, the lease per
//! root, recovery), each stopping a worker at a test-hook point and letting another finish the job.

#[path = "common/pipe.rs"]
mod pipe;
#[allow(dead_code)] // the terminal helpers this suite does not need
#[path = "common/terminal.rs"]
mod terminal;
mod worker_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use turngate::Provider;
use turngate::worker::job::Job;
use turngate::worker::setup::Settings;
use worker_support::*;

const PREFIX: &str = "turngate";

struct Setup {
    nats: Nats,
    dir: tempfile::TempDir,
    spec: WorkerSpec,
}

impl Setup {
    fn new(test: &str) -> Option<Setup> {
        Setup::in_dir(test, &std::env::temp_dir())
    }

    /// A setup whose roots are in a new temporary directory beneath `parent`.
    fn in_dir(test: &str, parent: &Path) -> Option<Setup> {
        let nats = Nats::start(nats_server_binary(test)?);
        let dir = tempfile::tempdir_in(parent).unwrap();
        std::fs::create_dir_all(dir.path().join("roots/r1")).unwrap();
        let spec = WorkerSpec::new(nats.url(), &dir.path().join("roots"));
        Some(Setup { nats, dir, spec })
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("roots/r1")
    }

    fn write(&self, rel: &str, content: &str) {
        std::fs::write(self.root().join(rel), content).unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(rel)).ok()
    }

    fn submit(&self, id: &str, stream: &str) {
        let job = Job {
            id: id.into(),
            provider: Provider::Anthropic,
            root: "r1".into(),
            forced_tool_choice: false,
            max_output_tokens: None,
            stream: Bytes::from(stream.to_owned()),
        };
        runtime().block_on(submit_job(&self.nats.url(), &Settings::default(), &job));
    }

    /// A worker whose log goes to `name` in the test directory.
    fn spawn_logged(&self, name: &str, env: &[(&str, &str)]) -> WorkerProcess {
        let mut spec = self.spec.clone();
        spec.log = Some(self.dir.path().join(name));
        spec.spawn(env)
    }

    /// Waits until the worker logging to `name` has acked a job, so every copy of its results is in.
    fn acked_by(&self, name: &str) {
        self.logged(name, " answered (delivery ");
    }

    /// Waits until the worker logging to `name` has logged `needle`.
    fn logged(&self, name: &str, needle: &str) {
        let path = self.dir.path().join(name);
        let done = wait_until(Duration::from_secs(30), || {
            std::fs::read_to_string(&path).is_ok_and(|log| log.contains(needle))
        });
        assert!(done, "{name} did not log `{needle}`");
    }

    fn results(&self) -> Vec<ResultMsg> {
        runtime().block_on(all_results(&self.nats.url(), PREFIX))
    }

    /// Waits for job `id`'s report and returns every result of that job.
    fn answered(&self, id: &str, limit: Duration) -> Vec<ResultMsg> {
        let subject = format!("{PREFIX}.results.{id}");
        let mut results = Vec::new();
        let done = wait_until(limit, || {
            results = self.results();
            results
                .iter()
                .any(|r| r.subject == subject && r.kind == "report")
        });
        assert!(done, "job {id} was not answered in {limit:?}: {results:#?}");
        results.retain(|r| r.subject == subject);
        results
    }
}

/// `turngate submit` (the real binary): exit code and standard output.
fn submit_cli(url: &str, root: &str, id: &str, stream: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args([
            "submit",
            "--nats",
            url,
            "--provider",
            "anthropic",
            "--root",
            root,
        ])
        .args(["--job-id", id, "--wait", "--timeout-ms", "30000"])
        .arg(stream)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The three-call job of the protection tests: a write, an edit that a second run would apply again
/// (`one` becomes `one more`, then `one more more`), and a delete.
fn three_calls() -> String {
    let calls = [
        (
            "c1".to_owned(),
            "write_file",
            json!({"path": "a.txt", "content": "one"}),
        ),
        (
            "c2".to_owned(),
            "edit_file",
            json!({"path": "a.txt", "old_string": "one", "new_string": "one more"}),
        ),
        ("c3".to_owned(), "delete_file", json!({"path": "b.txt"})),
    ];
    anthropic_turn(&calls, false)
}

/// Exactly once: each call of job `id` applied once in the journal, one result per call ID and one
/// report, the files as one run leaves them.
fn assert_once(setup: &Setup, id: &str, results: &[ResultMsg]) {
    assert_eq!(setup.read("a.txt").as_deref(), Some("one more"));
    assert_eq!(setup.read("b.txt"), None);
    let journal = journal(&setup.root());
    for call in ["c1", "c2", "c3"] {
        let entries: Vec<_> = journal
            .iter()
            .filter(|e| e.turn.as_deref() == Some(id) && e.call_id.as_deref() == Some(call))
            .collect();
        assert_eq!(entries.len(), 1, "{call}: {entries:#?}");
        assert_eq!(
            entries[0].state,
            turngate::effects::journal::CallState::Applied
        );
    }
    let mut keys: Vec<_> = results
        .iter()
        .map(|r| format!("{}:{}", r.kind, r.key.clone().unwrap_or_default()))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["call:c1", "call:c2", "call:c3", "report:"],
        "{results:#?}"
    );
    let report = results.iter().find(|r| r.kind == "report").unwrap();
    assert_eq!(report.exit, Some(0), "{:#}", report.payload);
}

#[test]
fn submit_ends_quietly_with_its_own_exit_status_when_its_reader_is_gone() {
    let Some(setup) = Setup::new("submit_ends_quietly_with_its_own_exit_status") else {
        return;
    };
    let _worker = setup.spec.spawn(&[]);
    let seed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/seed");
    for (id, wait) in [("gone-1", false), ("gone-2", true)] {
        let mut submit = Command::new(env!("CARGO_BIN_EXE_turngate"));
        submit
            .args([
                "submit",
                "--nats",
                &setup.nats.url(),
                "--provider",
                "anthropic",
            ])
            .args(["--root", "r1", "--job-id", id])
            .args(if wait { &["--wait"][..] } else { &[][..] })
            .arg(seed.join("anthropic_complete.sse"));
        pipe::ends_quietly(&mut submit, 0).unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}

#[test]
fn a_submitted_job_is_answered_as_run_answers_it() {
    let Some(setup) = Setup::new("a_submitted_job_is_answered_as_run_answers_it") else {
        return;
    };
    let _worker = setup.spec.spawn(&[]);
    let run_root = tempfile::tempdir().unwrap();
    let seed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/seed");
    for (n, case) in ["complete", "cutoff", "outside", "invalid", "refusal"]
        .iter()
        .enumerate()
    {
        let stream = seed.join(format!("anthropic_{case}.sse"));
        let run = Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(["run", "--provider", "anthropic", "--root"])
            .arg(run_root.path())
            .arg("--cache-dir")
            .arg(test_cache_dir())
            .arg(&stream)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let (code, out) = submit_cli(&setup.nats.url(), "r1", &format!("seed-{n}"), &stream);
        assert_eq!(code, run.status.code().unwrap(), "{case}: {out}");
        let mut submitted: Value = serde_json::from_str(&out).unwrap();
        let mut ran: Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(submitted["turn"]["id"], format!("seed-{n}"));
        submitted["turn"]["id"] = Value::Null;
        ran["turn"]["id"] = Value::Null;
        assert_eq!(submitted, ran, "{case}");
    }
    assert_eq!(
        std::fs::read_to_string(setup.root().join("notes.txt")).unwrap(),
        std::fs::read_to_string(run_root.path().join("notes.txt")).unwrap()
    );
    // The same job ID again: stored once by JetStream, answered with the first report.
    let (code, _) = submit_cli(
        &setup.nats.url(),
        "r1",
        "seed-0",
        &seed.join("anthropic_complete.sse"),
    );
    assert_eq!(code, 0);
    let reports = reports(&setup.results(), PREFIX);
    assert!(reports.values().all(|r| r.len() == 1), "{reports:#?}");
}

/// Publishes job `id` straight onto the jobs subject (as a client that does not ask first would),
/// waiting for JetStream to store it; returns whether JetStream took it for a duplicate.
fn publish_raw(url: &str, id: &str, stream: &str) -> bool {
    let job = Job {
        id: id.into(),
        provider: Provider::Anthropic,
        root: "r1".into(),
        forced_tool_choice: false,
        max_output_tokens: None,
        stream: Bytes::from(stream.to_owned()),
    };
    runtime().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        // A server that just restarted may not have JetStream back yet.
        let mut tries = 0;
        loop {
            let publish = async_nats::jetstream::message::PublishMessage::build()
                .headers(job.headers().unwrap())
                .payload(job.stream.clone());
            let acked = match js.send_publish(format!("{PREFIX}.jobs"), publish).await {
                Ok(ack) => ack.await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match acked {
                Ok(ack) => return ack.duplicate,
                Err(error) if tries == 100 => panic!("publishing job {id}: {error}"),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
}

/// Waits until the workers have acked every job (the work queue is empty).
fn wait_for_no_jobs(url: &str) {
    let left = || {
        runtime().block_on(async {
            let client = async_nats::connect(url).await.ok()?;
            let js = async_nats::jetstream::new(client);
            let stream = js.get_stream(format!("{PREFIX}_jobs")).await.ok()?;
            Some(stream.get_info().await.ok()?.state.messages)
        })
    };
    let done = wait_until(Duration::from_secs(30), || left() == Some(0));
    assert!(done, "jobs left: {:?}", left());
}

#[test]
fn a_job_id_answered_before_a_server_restart_is_answered_from_its_report() {
    let test = "a_job_id_answered_before_a_server_restart_is_answered_from_its_report";
    let Some(mut setup) = Setup::new(test) else {
        return;
    };
    setup.write("b.txt", "delete me");
    let stream = setup.dir.path().join("job-a.sse");
    std::fs::write(&stream, three_calls()).unwrap();
    let _worker = setup.spawn_logged("worker.log", &[]);
    let (code, first) = submit_cli(&setup.nats.url(), "r1", "job-A", &stream);
    assert_eq!(code, 0, "{first}");
    setup.acked_by("worker.log");
    let journaled = journal(&setup.root()).len();
    // A user's edit after the job: a second run of job-A's write would overwrite it.
    setup.write("a.txt", "the user's text");
    let untouched = |setup: &Setup| {
        assert_eq!(setup.read("a.txt").as_deref(), Some("the user's text"));
        assert_eq!(setup.read("b.txt"), None);
        let reports = reports(&setup.results(), PREFIX);
        assert_eq!(reports["job-A"].len(), 1, "{reports:#?}");
    };

    // The server restarts: JetStream's de-duplication forgets job-A.
    setup.nats.restart();
    // `submit` finds the stored report and does not enqueue the job again (tried again while the
    // restarted server's JetStream comes back).
    let submit = || {
        Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args([
                "submit",
                "--nats",
                &setup.nats.url(),
                "--provider",
                "anthropic",
            ])
            .args(["--root", "r1", "--job-id", "job-A"])
            .arg(&stream)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let mut out = submit();
    for _ in 0..50 {
        if out.status.success() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        out = submit();
    }
    let submitted: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(submitted["answered"], true, "{submitted}");
    assert_eq!(submitted["duplicate"], true, "{submitted}");
    // A client that enqueues it anyway (JetStream takes it: it forgot the ID).
    assert!(
        !publish_raw(&setup.nats.url(), "job-A", &three_calls()),
        "JetStream remembered the job ID through the restart: the test shows nothing"
    );
    // The worker finds the stored report and runs nothing.
    wait_for_no_jobs(&setup.nats.url());
    untouched(&setup);
    assert_eq!(journal(&setup.root()).len(), journaled);
    // `submit --wait` answers with the stored report, without enqueuing the job again.
    let (code, again) = submit_cli(&setup.nats.url(), "r1", "job-A", &stream);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again, first);
    untouched(&setup);

    // The journal prunes job-A's calls; the stored report still answers the job.
    prune_journal(&setup.root(), 2, 3);
    let journal_now = journal(&setup.root());
    assert!(
        journal_now
            .iter()
            .all(|e| e.turn.as_deref() != Some("job-A")),
        "{journal_now:#?}"
    );
    setup.nats.restart();
    assert!(!publish_raw(&setup.nats.url(), "job-A", &three_calls()));
    wait_for_no_jobs(&setup.nats.url());
    untouched(&setup);
    let log = std::fs::read_to_string(setup.dir.path().join("worker.log")).unwrap();
    assert_eq!(
        log.matches("(job-A) was answered before").count(),
        2,
        "{log}"
    );
    assert_eq!(journal(&setup.root()).len(), journal_now.len());
    untouched(&setup);
    let (code, again) = submit_cli(&setup.nats.url(), "r1", "job-A", &stream);
    assert_eq!((code, again), (0, first));
    untouched(&setup);
}

#[test]
fn malformed_jobs_are_answered_and_the_worker_goes_on() {
    let Some(setup) = Setup::new("malformed_jobs_are_answered_and_the_worker_goes_on") else {
        return;
    };
    let mut worker = setup.spec.spawn(&[]);
    let good = anthropic_turn(
        &[(
            "w1".into(),
            "write_file",
            json!({"path": "ok.txt", "content": "ok"}),
        )],
        false,
    );
    let runtime = runtime();
    runtime.block_on(async {
        let client = async_nats::connect(setup.nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        turngate::worker::setup::ensure_streams(&js, &Settings::default())
            .await
            .unwrap();
        type Headers<'a> = Vec<(&'a str, &'a str)>;
        let bad: Vec<(Headers, &[u8])> = vec![
            (vec![], b"no headers at all"),
            (vec![("Nats-Msg-Id", "bad id!")], b""),
            (
                vec![
                    ("Nats-Msg-Id", "escape"),
                    ("Turngate-Provider", "anthropic"),
                    ("Turngate-Root", "../r1"),
                ],
                good.as_bytes(),
            ),
            (
                vec![
                    ("Nats-Msg-Id", "absolute"),
                    ("Turngate-Provider", "anthropic"),
                    ("Turngate-Root", "/etc"),
                ],
                good.as_bytes(),
            ),
            (
                vec![
                    ("Nats-Msg-Id", "missing-root"),
                    ("Turngate-Provider", "anthropic"),
                    ("Turngate-Root", "nope"),
                ],
                good.as_bytes(),
            ),
            (
                vec![
                    ("Nats-Msg-Id", "provider"),
                    ("Turngate-Provider", "cohere"),
                    ("Turngate-Root", "r1"),
                ],
                good.as_bytes(),
            ),
            (
                vec![
                    ("Nats-Msg-Id", "garbage"),
                    ("Turngate-Provider", "gemini"),
                    ("Turngate-Root", "r1"),
                ],
                &[0xff, 0x00, b'\n', b'{', 0xfe],
            ),
        ];
        for (headers, payload) in bad {
            let mut map = async_nats::HeaderMap::new();
            for (name, value) in headers {
                map.insert(name, value);
            }
            js.publish_with_headers("turngate.jobs", map, Bytes::copy_from_slice(payload))
                .await
                .unwrap()
                .await
                .unwrap();
        }
    });
    setup.submit("good", &good);
    setup.answered("good", Duration::from_secs(30));
    let results = setup.results();
    let reports = reports(&results, PREFIX);
    for (job, exit) in [
        ("escape", 1),
        ("absolute", 1),
        ("missing-root", 1),
        ("provider", 1),
        ("garbage", 3),
        ("good", 0),
    ] {
        let report = &reports[job];
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].exit, Some(exit), "{job}: {:#}", report[0].payload);
    }
    assert_eq!(reports["_invalid"].len(), 2, "{reports:#?}");
    assert!(worker.alive(), "the worker keeps going");
    assert_eq!(setup.read("ok.txt").as_deref(), Some("ok"));
    assert!(!setup.dir.path().join("r1").exists());
}

/// A worker stops at a test-hook point of job `id`; a second worker finishes it.
fn crash_and_finish(setup: &Setup, id: &str, env: &[(&str, &str)]) -> Vec<ResultMsg> {
    setup.write("b.txt", "to delete");
    let mut first = setup.spec.spawn(env);
    setup.submit(id, &three_calls());
    assert!(
        first.wait_exit(Duration::from_secs(30)),
        "the hook stopped the worker"
    );
    let _second = setup.spawn_logged("second.log", &[]);
    setup.acked_by("second.log");
    setup.answered(id, Duration::from_secs(30))
}

#[test]
fn a_job_redelivered_after_its_calls_applied_replays_them() {
    let Some(setup) = Setup::new("a_job_redelivered_after_its_calls_applied_replays_them") else {
        return;
    };
    let results = crash_and_finish(
        &setup,
        "replay",
        &[("TURNGATE_TEST_WORKER_CRASH_AT", "after-apply")],
    );
    assert_once(&setup, "replay", &results);
    assert!(
        results
            .iter()
            .filter(|r| r.kind == "call")
            .all(|r| r.replayed),
        "every call answered from the journal: {results:#?}"
    );
}

#[test]
fn a_job_redelivered_after_publishing_is_answered_once() {
    let Some(setup) = Setup::new("a_job_redelivered_after_publishing_is_answered_once") else {
        return;
    };
    // The second worker publishes its copies (which JetStream drops) before it acks.
    let results = crash_and_finish(
        &setup,
        "published",
        &[("TURNGATE_TEST_WORKER_CRASH_AT", "after-publish")],
    );
    assert_once(&setup, "published", &results);
}

#[test]
fn a_worker_killed_before_its_results_are_stored_still_answers_the_job() {
    let Some(setup) =
        Setup::new("a_worker_killed_before_its_results_are_stored_still_answers_the_job")
    else {
        return;
    };
    let results = crash_and_finish(
        &setup,
        "half-published",
        &[("TURNGATE_TEST_WORKER_CRASH_AT", "mid-publish")],
    );
    assert_once(&setup, "half-published", &results);
}

#[test]
fn a_worker_killed_before_a_call_leaves_it_to_the_next() {
    let Some(setup) = Setup::new("a_worker_killed_before_a_call_leaves_it_to_the_next") else {
        return;
    };
    let results = crash_and_finish(
        &setup,
        "before-call",
        &[("TURNGATE_TEST_WORKER_CRASH_AT", "before-call@2")],
    );
    assert_once(&setup, "before-call", &results);
    let replayed: Vec<_> = results
        .iter()
        .filter(|r| r.replayed)
        .map(|r| r.key.clone().unwrap())
        .collect();
    assert_eq!(replayed, ["c1"], "{results:#?}");
}

#[test]
fn a_crash_half_way_through_an_apply_is_settled_and_not_repeated() {
    let Some(setup) = Setup::new("a_crash_half_way_through_an_apply_is_settled_and_not_repeated")
    else {
        return;
    };
    // The edit's changes are all in place, not yet marked applied: recovery marks it applied.
    let results = crash_and_finish(&setup, "moved", &[("TURNGATE_TEST_CRASH_AT", "moved-all")]);
    assert_once(&setup, "moved", &results);
    let journal = journal(&setup.root());
    assert!(
        journal
            .iter()
            .all(|e| e.state == turngate::effects::journal::CallState::Applied),
        "{journal:#?}"
    );
}

#[test]
fn two_workers_never_run_the_same_call_at_once() {
    let Some(mut setup) = Setup::new("two_workers_never_run_the_same_call_at_once") else {
        return;
    };
    setup.spec.ack_wait_ms = 1000;
    setup.write("b.txt", "to delete");
    // The first worker stalls (no in-progress acks) after looking up its first call, for longer than
    // the ack wait: JetStream delivers the job to the second worker meanwhile.
    let _stalled = setup.spawn_logged(
        "first.log",
        &[("TURNGATE_TEST_WORKER_STALL_AT", "before-call:5000")],
    );
    setup.submit("stalled", &three_calls());
    std::thread::sleep(Duration::from_millis(700));
    // The second worker gets the job again while the first holds the root's lease, waits for it,
    // and answers from the journal.
    let _second = setup.spawn_logged("second.log", &[]);
    setup.acked_by("second.log");
    // The first worker is done with its delivery too (answered, or its late ack refused).
    setup.logged("first.log", "job #1 ");
    let results = setup.answered("stalled", Duration::from_secs(30));
    assert_once(&setup, "stalled", &results);
    let log = std::fs::read_to_string(setup.dir.path().join("second.log")).unwrap();
    assert!(
        log.contains(" answered (delivery ") && !log.contains("(delivery 1)"),
        "{log}"
    );
}

#[test]
fn a_job_past_max_deliver_is_answered_with_a_dead_letter_report() {
    let Some(mut setup) =
        Setup::new("a_job_past_max_deliver_is_answered_with_a_dead_letter_report")
    else {
        return;
    };
    setup.spec.ack_wait_ms = 1000;
    setup.spec.max_deliver = 2;
    setup.write("b.txt", "to delete");
    // Delivery 1 applies c1 and dies before c2; delivery 2 replays c1 and dies before c2 again.
    let mut first = setup
        .spec
        .spawn(&[("TURNGATE_TEST_WORKER_CRASH_AT", "before-call@2")]);
    setup.submit("dead", &three_calls());
    assert!(first.wait_exit(Duration::from_secs(30)));
    let mut second = setup
        .spec
        .spawn(&[("TURNGATE_TEST_WORKER_CRASH_AT", "before-call")]);
    assert!(second.wait_exit(Duration::from_secs(30)));
    let _third = setup.spec.spawn(&[]);
    let results = setup.answered("dead", Duration::from_secs(30));
    let report = results.iter().find(|r| r.kind == "report").unwrap();
    assert_eq!(report.exit, Some(2), "{:#}", report.payload);
    assert_eq!(report.payload["dead_letter"]["deliveries"], 2);
    let statuses: Vec<_> = report.payload["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["ok", "error", "error"]);
    assert_eq!(results.iter().filter(|r| r.kind == "call").count(), 3);
    // c1 applied once; c2 and c3 never ran.
    assert_eq!(setup.read("a.txt").as_deref(), Some("one"));
    assert_eq!(setup.read("b.txt").as_deref(), Some("to delete"));
    let journal = journal(&setup.root());
    assert_eq!(journal.len(), 1, "{journal:#?}");
}

#[test]
fn call_ids_that_cannot_be_headers_are_answered_under_their_hash() {
    let Some(setup) = Setup::new("call_ids_that_cannot_be_headers_are_answered_under_their_hash")
    else {
        return;
    };
    let mut worker = setup.spec.spawn(&[]);
    let hostile = ["line\r\nNats-Msg-Id: forged".to_owned(), "x".repeat(300)];
    let calls: Vec<_> = hostile
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.clone(),
                "write_file",
                json!({"path": format!("h{i}.txt"), "content": "h"}),
            )
        })
        .collect();
    setup.submit("hostile", &anthropic_turn(&calls, false));
    let results = setup.answered("hostile", Duration::from_secs(30));
    let report = results.iter().find(|r| r.kind == "report").unwrap();
    assert_eq!(report.exit, Some(0), "{:#}", report.payload);
    let answered: Vec<_> = results
        .iter()
        .filter(|r| r.kind == "call")
        .map(|r| {
            (
                r.key.clone().unwrap(),
                r.payload["key"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(answered.len(), 2);
    for ((header, key), id) in answered.iter().zip(&hostile) {
        assert!(header.starts_with("sha256-"), "{header}");
        assert_eq!(key, id);
    }
    assert!(worker.alive());
}

#[test]
fn a_worker_runs_network_tools_under_its_policy() {
    let Some(mut setup) = Setup::new("a_worker_runs_network_tools_under_its_policy") else {
        return;
    };
    // A server on 127.0.0.1 that answers every request and reports its request line before it
    // answers (so every request a call made is reported by the time the call's answer is).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = sent.send(request_line.trim().to_owned());
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
        }
    });
    let policy = setup.dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("[tools.fetch.network]\nget = [\"http://127.0.0.1:{port}/allowed\"]\n"),
    )
    .unwrap();
    setup.spec.policy = Some(policy);
    let _worker = setup.spec.spawn(&[]);
    let calls = [
        (
            "n1".to_owned(),
            "fetch",
            json!({"url": format!("http://127.0.0.1:{port}/allowed")}),
        ),
        (
            "n2".to_owned(),
            "fetch",
            json!({"url": format!("http://127.0.0.1:{port}/other")}),
        ),
    ];
    setup.submit("net-1", &anthropic_turn(&calls, false));
    let results = setup.answered("net-1", Duration::from_secs(60));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["status"], "ok", "{report}");
    assert_eq!(calls[0]["requests"][0]["status"], 200, "{report}");
    // The URL outside the policy is refused at the gate, and the server never sees it.
    assert_eq!(calls[1]["status"], "error", "{report}");
    assert!(
        calls[1]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("refused at url: ")),
        "{report}"
    );
    assert_eq!(
        seen.try_iter().collect::<Vec<_>>(),
        ["GET /allowed HTTP/1.1"]
    );
}

#[test]
fn on_roots_that_fold_names_a_worker_refuses_every_spelling_of_a_denied_name_or_the_state_directory()
 {
    // The roots are on the test file system that folds case and Unicode forms.
    let test = "on_roots_that_fold_names_a_worker_refuses_every_spelling";
    let Some(mut setup) = Setup::in_dir(test, turngate_testfs::folding_dir()) else {
        return;
    };
    setup.write(".env", "TOKEN=do-not-leak\n");
    let policy = setup.dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "default = \"workspace-write\"\ndeny = [\".env\", \"**/.env\"]\n",
    )
    .unwrap();
    setup.spec.policy = Some(policy);
    let _worker = setup.spec.spawn(&[]);
    let calls = [
        (
            "f1".to_owned(),
            "write_file",
            json!({"path": "a.txt", "content": "a"}),
        ),
        ("f2".to_owned(), "read_file", json!({"path": ".ENV"})),
        (
            "f3".to_owned(),
            "write_file",
            json!({"path": ".Env", "content": "PWNED"}),
        ),
        ("f4".to_owned(), "list_dir", json!({"path": ".TurnGate"})),
        (
            "f5".to_owned(),
            "make_dir",
            json!({"path": ".TURNGATE/evil"}),
        ),
        ("f6".to_owned(), "list_dir", json!({"path": "."})),
    ];
    setup.submit("fold-1", &anthropic_turn(&calls, false));
    let results = setup.answered("fold-1", Duration::from_secs(60));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    let statuses: Vec<&str> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["ok", "error", "error", "error", "error", "ok"],
        "{report}"
    );
    let text = report.to_string().to_lowercase();
    assert!(!text.contains("do-not-leak"), "{report}");
    assert_eq!(setup.read(".env").as_deref(), Some("TOKEN=do-not-leak\n"));
    assert!(!setup.root().join(".turngate/evil").exists());
}

/// A tool built for WASI 0.3 runs in a worker as a 0.2 one does, with nothing in the worker's surface
/// changed: its call is answered once, in the report, and its write applied and journaled once.
#[test]
fn a_worker_runs_a_tool_built_for_wasi_0_3() {
    let Some(mut setup) = Setup::new("a_worker_runs_a_tool_built_for_wasi_0_3") else {
        return;
    };
    let tools = setup.dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(
        env!("TURNGATE_TEST_GUEST_HOSTILE_RW_P3"),
        tools.join("hostile_rw_p3.wasm"),
    )
    .unwrap();
    let lock = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["tools", "lock", "--tools"])
        .arg(&tools)
        .arg("--cache-dir")
        .arg(test_cache_dir())
        .output()
        .unwrap();
    assert!(lock.status.success(), "{lock:?}");
    setup.spec.tools = Some(tools);
    let _worker = setup.spec.spawn(&[]);
    let calls = [(
        "p1".to_owned(),
        "hostile_rw_p3",
        json!({"attack": "write_all", "path": "p3.txt", "arg": "p3.txt"}),
    )];
    setup.submit("p3-1", &anthropic_turn(&calls, false));
    let results = setup.answered("p3-1", Duration::from_secs(60));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert_eq!(setup.read("p3.txt").as_deref(), Some("PWNED"));
    let answers = results
        .iter()
        .filter(|r| r.kind == "call" && r.key.as_deref() == Some("p1"))
        .count();
    assert_eq!(answers, 1, "{results:#?}");
    let applied = journal(&setup.root())
        .into_iter()
        .filter(|e| e.call_id.as_deref() == Some("p1"))
        .count();
    assert_eq!(applied, 1);
}

/// A tool installed from a registry (a layout `tools publish` wrote, `tools add` installed with its
/// grants accepted) runs in a worker that loads the tools directory `--locked`, within those grants.
#[test]
fn a_worker_runs_a_tool_installed_from_a_registry_within_its_accepted_grants() {
    let Some(mut setup) =
        Setup::new("a_worker_runs_a_tool_installed_from_a_registry_within_its_accepted_grants")
    else {
        return;
    };
    let dir = setup.dir.path().to_path_buf();
    let (layout, tools, grants, policy) = (
        dir.join("layout"),
        dir.join("tools"),
        dir.join("grants.json"),
        dir.join("policy.toml"),
    );
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(&grants, r#"{"paths": {"write": ["out/**"]}}"#).unwrap();
    std::fs::write(&policy, "default = \"read-only\"\n").unwrap();
    let source = format!("oci:{}:1.0", layout.display());
    let turngate = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    turngate(&[
        "tools".as_ref(),
        "publish".as_ref(),
        env!("TURNGATE_TEST_GUEST_HOSTILE_RW").as_ref(),
        source.as_ref(),
        "--grants".as_ref(),
        grants.as_os_str(),
    ]);
    turngate(&[
        "tools".as_ref(),
        "add".as_ref(),
        source.as_ref(),
        "--tools".as_ref(),
        tools.as_os_str(),
        "--allow-unsigned".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--accept-grants".as_ref(),
    ]);
    std::fs::create_dir(setup.root().join("out")).unwrap();
    setup.write("notes.txt", "mine");
    setup.spec.policy = Some(policy);
    setup.spec.tools = Some(tools);
    let _worker = setup.spec.spawn(&[]);
    let calls = [
        (
            "r1".to_owned(),
            "hostile_rw",
            json!({"attack": "write", "path": "out/a.txt"}),
        ),
        (
            "r2".to_owned(),
            "hostile_rw",
            json!({"attack": "write", "path": "notes.txt"}),
        ),
    ];
    setup.submit("registry-1", &anthropic_turn(&calls, false));
    let results = setup.answered("registry-1", Duration::from_secs(60));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["status"], "ok", "{report}");
    assert_eq!(setup.read("out/a.txt").as_deref(), Some("PWNED"));
    assert_eq!(calls[1]["status"], "error", "{report}");
    assert_eq!(setup.read("notes.txt").as_deref(), Some("mine"));
}

/// SIGTERM while a job's call is about to apply (the test hook holds it there): the worker stops
/// that call, which applies nothing, hands the job back unanswered and exits 0; another worker then
/// answers the job whole. Killed instead of stopped, the first worker would exit by the signal; had
/// it not looked at the stop before applying, the file would be written by the stopped worker.
#[test]
fn a_worker_told_to_stop_applies_nothing_more_and_hands_its_job_back() {
    let Some(setup) =
        Setup::new("a_worker_told_to_stop_applies_nothing_more_and_hands_its_job_back")
    else {
        return;
    };
    let held = setup.dir.path().join("held");
    let mut first = setup.spawn_logged(
        "first.log",
        &[("TURNGATE_TEST_HOLD_BEFORE_APPLY", held.to_str().unwrap())],
    );
    let calls = [(
        "c1".to_owned(),
        "write_file",
        json!({"path": "a.txt", "content": "one"}),
    )];
    setup.submit("stopped", &anthropic_turn(&calls, false));
    assert!(
        wait_until(Duration::from_secs(30), || held.exists()),
        "the call never got to its apply"
    );
    signal(&first.child, "TERM");
    assert!(
        first.wait_exit(Duration::from_secs(30)),
        "the worker did not stop"
    );
    let status = first.child.wait().unwrap();
    assert!(
        status.success(),
        "the worker did not stop cleanly: {status:?}"
    );
    setup.logged(
        "first.log",
        "left for a later delivery: the worker is stopping",
    );
    assert_eq!(
        setup.read("a.txt"),
        None,
        "the stopped worker applied the call"
    );
    assert!(journal(&setup.root()).is_empty());
    assert!(
        !setup
            .results()
            .iter()
            .any(|r| r.subject.ends_with(".stopped")),
        "the stopped worker answered the job"
    );
    let _second = setup.spawn_logged("second.log", &[]);
    let results = setup.answered("stopped", Duration::from_secs(30));
    let report = results.iter().find(|r| r.kind == "report").unwrap();
    assert_eq!(report.exit, Some(0), "{:#}", report.payload);
    assert_eq!(setup.read("a.txt").as_deref(), Some("one"));
    assert_eq!(journal(&setup.root()).len(), 1);
}

/// The consumers on the results stream (the waiting submitter's), as the server lists them.
fn results_consumers(url: &str) -> usize {
    runtime().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream(format!("{PREFIX}_results")).await else {
            return 0;
        };
        stream
            .info()
            .await
            .map_or(0, |info| info.state.consumer_count)
    })
}

/// `submit --wait` started before any worker waits on through a broker restart (its consumer is
/// gone with the server) and prints the report once a worker answers the job.
#[test]
fn a_submitter_waits_on_through_a_broker_restart() {
    let Some(mut setup) = Setup::new("a_submitter_waits_on_through_a_broker_restart") else {
        return;
    };
    let stream = setup.dir.path().join("late.sse");
    let calls = [(
        "c1".to_owned(),
        "write_file",
        json!({"path": "late.txt", "content": "late"}),
    )];
    std::fs::write(&stream, anthropic_turn(&calls, false)).unwrap();
    let waiting = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args([
            "submit",
            "--nats",
            &setup.nats.url(),
            "--provider",
            "anthropic",
        ])
        .args([
            "--root",
            "r1",
            "--job-id",
            "late",
            "--wait",
            "--timeout-ms",
            "120000",
        ])
        .arg(&stream)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || results_consumers(
            &setup.nats.url()
        ) > 0),
        "the submitter never waited"
    );
    setup.nats.restart();
    let _worker = setup.spec.spawn(&[]);
    let out = waiting.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert_eq!(setup.read("late.txt").as_deref(), Some("late"));
}

/// The questions waiting in the deployment's approvals stream (none while it does not exist yet).
fn waiting_questions(url: &str) -> Vec<turngate::worker::approvals::FleetQuestion> {
    runtime().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        if js.get_stream(format!("{PREFIX}_approvals")).await.is_err() {
            return Vec::new();
        }
        approvals(js).await.waiting().await.unwrap()
    })
}

async fn approvals(
    js: async_nats::jetstream::Context,
) -> turngate::worker::approvals::FleetApprovals {
    turngate::worker::approvals::FleetApprovals::open(js, Settings::default().names)
        .await
        .unwrap()
}

/// Answers the published question `digest` as a console or `submit --wait` would.
fn answer_question(
    url: &str,
    digest: &turngate::digest::Sha256Digest,
    approved: bool,
) -> turngate::worker::approvals::FleetAnswer {
    runtime().block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        approvals(async_nats::jetstream::new(client))
            .await
            .answer(digest, approved)
            .await
            .unwrap()
    })
}

/// Waits until one question of job `id` is published, and returns it.
fn question_of(setup: &Setup, id: &str) -> turngate::worker::approvals::FleetQuestion {
    let mut found = Vec::new();
    let asked = wait_until(Duration::from_secs(30), || {
        found = waiting_questions(&setup.nats.url());
        found.iter().any(|q| q.job == id)
    });
    assert!(asked, "job {id} asked nothing: {found:#?}");
    found.into_iter().find(|q| q.job == id).unwrap()
}

/// A write the policy asks about, in a job of its own.
fn asked_write(setup: &mut Setup, content: &str) -> String {
    let policy = setup.dir.path().join("ask.toml");
    std::fs::write(
        &policy,
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    setup.spec.policy = Some(policy);
    let calls = [(
        "w1".to_owned(),
        "write_file",
        json!({"path": "asked.txt", "content": content}),
    )];
    anthropic_turn(&calls, false)
}

#[test]
fn a_call_the_policy_asks_about_waits_for_its_answer_in_jetstream() {
    let Some(mut setup) = Setup::new("a_call_the_policy_asks_about_waits_for_its_answer") else {
        return;
    };
    let turn = asked_write(&mut setup, "yes please");
    let _worker = setup.spec.spawn(&[]);
    setup.submit("ask-yes", &turn);
    let question = question_of(&setup, "ask-yes");
    assert_eq!(question.request["tool"], "write_file", "{question:#?}");
    assert_eq!(question.request["id"], "w1");
    // Published, not answered: nothing is written and the job is not answered.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(setup.read("asked.txt"), None);
    assert!(setup.results().is_empty());
    // A digest nobody asked is not answered; the question's is, once: the first answer stands.
    let unknown = turngate::digest::Sha256Digest::of(b"not asked");
    assert_eq!(
        answer_question(&setup.nats.url(), &unknown, true),
        turngate::worker::approvals::FleetAnswer::NotAsked
    );
    assert_eq!(
        answer_question(&setup.nats.url(), &question.digest, true),
        turngate::worker::approvals::FleetAnswer::Recorded
    );
    assert_eq!(
        answer_question(&setup.nats.url(), &question.digest, false),
        turngate::worker::approvals::FleetAnswer::AlreadyAnswered(true)
    );
    let first_digest = question.digest;
    let results = setup.answered("ask-yes", Duration::from_secs(30));
    assert_eq!(setup.read("asked.txt").as_deref(), Some("yes please"));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert!(waiting_questions(&setup.nats.url()).is_empty());

    // A no is final: the call is denied and writes nothing.
    let other = asked_write(&mut setup, "no thanks");
    setup.submit("ask-no", &other);
    let question = question_of(&setup, "ask-no");
    answer_question(&setup.nats.url(), &question.digest, false);
    let results = setup.answered("ask-no", Duration::from_secs(30));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "error", "{report}");
    let reason = report["calls"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("did not give approval"), "{report}");
    assert_eq!(setup.read("asked.txt").as_deref(), Some("yes please"));

    // A yes lets one call through: the same call asked again (the same input, the file as it was
    // then, so the same digest) is a new question, not answered by the first yes.
    #[allow(clippy::disallowed_methods)] // the test puts the root back as it was, from outside
    std::fs::remove_file(setup.root().join("asked.txt")).unwrap();
    setup.submit("ask-again", &turn);
    let again = question_of(&setup, "ask-again");
    assert_eq!(again.digest, first_digest);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(setup.read("asked.txt"), None);
    assert_eq!(
        answer_question(&setup.nats.url(), &again.digest, true),
        turngate::worker::approvals::FleetAnswer::Recorded
    );
    setup.answered("ask-again", Duration::from_secs(30));
    assert_eq!(setup.read("asked.txt").as_deref(), Some("yes please"));
}

/// A job's calls on disjoint paths are asked about together: both questions stand before either is
/// answered, and nothing applies before its answer; answered, both apply.
#[test]
fn a_job_s_calls_are_asked_about_together() {
    let Some(mut setup) = Setup::new("a_job_s_calls_are_asked_about_together") else {
        return;
    };
    asked_write(&mut setup, "");
    let calls = [
        (
            "w1".to_owned(),
            "write_file",
            json!({"path": "one.txt", "content": "1"}),
        ),
        (
            "w2".to_owned(),
            "write_file",
            json!({"path": "two.txt", "content": "2"}),
        ),
    ];
    let _worker = setup.spec.spawn(&[]);
    setup.submit("ask-both", &anthropic_turn(&calls, false));
    let mut found = Vec::new();
    let both = wait_until(Duration::from_secs(30), || {
        found = waiting_questions(&setup.nats.url());
        found.iter().filter(|q| q.job == "ask-both").count() == 2
    });
    assert!(
        both,
        "the job's two questions did not stand at once: {found:#?}"
    );
    let mut places: Vec<(String, Option<usize>)> = found
        .iter()
        .map(|q| (q.request["id"].as_str().unwrap().to_owned(), q.position))
        .collect();
    places.sort();
    assert_eq!(places, [("w1".into(), Some(0)), ("w2".into(), Some(1))]);
    assert_eq!((setup.read("one.txt"), setup.read("two.txt")), (None, None));
    for question in &found {
        answer_question(&setup.nats.url(), &question.digest, true);
    }
    let results = setup.answered("ask-both", Duration::from_secs(30));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert_eq!(report["calls"][1]["status"], "ok", "{report}");
    assert_eq!(setup.read("one.txt").as_deref(), Some("1"));
    assert_eq!(setup.read("two.txt").as_deref(), Some("2"));
}

#[test]
fn a_worker_killed_while_its_question_waits_leaves_it_and_the_yes_applies_once() {
    let Some(mut setup) = Setup::new("a_worker_killed_while_its_question_waits") else {
        return;
    };
    setup.spec.ack_wait_ms = 1_000;
    let turn = asked_write(&mut setup, "asked once");
    let mut first = setup.spec.spawn(&[]);
    setup.submit("ask-killed", &turn);
    let question = question_of(&setup, "ask-killed");
    first.kill();
    // The worker is gone; its question is not, and is answered meanwhile.
    assert_eq!(
        answer_question(&setup.nats.url(), &question.digest, true),
        turngate::worker::approvals::FleetAnswer::Recorded
    );
    assert_eq!(setup.read("asked.txt"), None);
    // The next worker runs the job again, asks the same question, finds its yes and applies once.
    let _second = setup.spec.spawn(&[]);
    let results = setup.answered("ask-killed", Duration::from_secs(60));
    assert_eq!(setup.read("asked.txt").as_deref(), Some("asked once"));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    let applied = journal(&setup.root())
        .iter()
        .filter(|e| e.turn.as_deref() == Some("ask-killed"))
        .count();
    assert_eq!(applied, 1);
    let calls: Vec<_> = results.iter().filter(|r| r.kind == "call").collect();
    assert_eq!(calls.len(), 1, "{results:#?}");
}

#[test]
fn a_worker_stopped_while_its_question_waits_hands_the_job_back_and_the_question_stays() {
    let Some(mut setup) = Setup::new("a_worker_stopped_while_its_question_waits") else {
        return;
    };
    let turn = asked_write(&mut setup, "after the stop");
    let mut first = setup.spec.spawn(&[]);
    setup.submit("ask-stopped", &turn);
    let question = question_of(&setup, "ask-stopped");
    // Stopped as an operator stops it: the job goes back unanswered, the question stays unanswered.
    signal(&first.child, "TERM");
    assert!(
        first.wait_exit(Duration::from_secs(30)),
        "the worker did not stop"
    );
    assert!(setup.results().is_empty(), "{:#?}", setup.results());
    let waiting = waiting_questions(&setup.nats.url());
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(waiting[0].digest, question.digest);
    let _second = setup.spec.spawn(&[]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(setup.read("asked.txt"), None);
    answer_question(&setup.nats.url(), &question.digest, true);
    setup.answered("ask-stopped", Duration::from_secs(60));
    assert_eq!(setup.read("asked.txt").as_deref(), Some("after the stop"));
}

#[test]
fn a_question_not_answered_by_its_deadline_is_denied_for_good() {
    let Some(mut setup) = Setup::new("a_question_not_answered_by_its_deadline") else {
        return;
    };
    let turn = asked_write(&mut setup, "too late");
    let policy = setup.spec.policy.clone().unwrap();
    let mut text = std::fs::read_to_string(&policy).unwrap();
    text.insert_str(0, "approval_timeout_seconds = 1\n");
    std::fs::write(&policy, text).unwrap();
    let _worker = setup.spec.spawn(&[]);
    setup.submit("ask-late", &turn);
    let question = question_of(&setup, "ask-late");
    let results = setup.answered("ask-late", Duration::from_secs(30));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "error", "{report}");
    assert_eq!(setup.read("asked.txt"), None);
    // The no is recorded: a yes given after the deadline does not stand.
    assert_eq!(
        answer_question(&setup.nats.url(), &question.digest, true),
        turngate::worker::approvals::FleetAnswer::AlreadyAnswered(false)
    );
}

/// `turngate submit --wait` on a terminal asks its job's questions there: a yes applies, a no denies.
#[test]
fn submit_wait_asks_its_job_s_questions_on_its_terminal() {
    let Some(mut setup) = Setup::new("submit_wait_asks_its_job_s_questions_on_its_terminal") else {
        return;
    };
    let turns = [("term-yes", "typed yes", "y"), ("term-no", "typed no", "n")]
        .map(|(job, content, typed)| (job, content, typed, asked_write(&mut setup, content)));
    let _worker = setup.spec.spawn(&[]);
    for (job, content, typed, turn) in turns {
        let stream = setup.dir.path().join(format!("{job}.sse"));
        std::fs::write(&stream, turn).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
        command
            .args([
                "submit",
                "--nats",
                &setup.nats.url(),
                "--provider",
                "anthropic",
            ])
            .args(["--root", "r1", "--job-id", job, "--wait"])
            .arg(&stream);
        let mut terminal = terminal::OnTerminal::spawn(command);
        terminal.wait_for("Apply them? [y/N]");
        assert!(
            terminal.seen.contains(&format!("+{content}")) && terminal.seen.contains(job),
            "{}",
            terminal.seen
        );
        terminal.type_line(typed);
        let (code, stdout) = terminal.finish();
        let report: Value = serde_json::from_str(&stdout).unwrap();
        let status = &report["calls"][0]["status"];
        if typed == "y" {
            assert_eq!((code, status.as_str()), (Some(0), Some("ok")), "{report}");
        } else {
            assert_eq!(status, "error", "{report}");
        }
    }
    assert_eq!(setup.read("asked.txt").as_deref(), Some("typed yes"));
}

/// A question is held to its digest: a record published under a digest that what it shows does not
/// hash to (someone who may publish on the subjects showing one call to have another let through) is
/// not listed and cannot be answered.
#[test]
fn a_question_that_does_not_show_what_its_digest_names_is_not_listed_or_answered() {
    let Some(setup) = Setup::new("a_question_that_does_not_show_what_its_digest_names") else {
        return;
    };
    let shown = json!({"id": "w1", "tool": "write_file", "input": {"path": "harmless.txt"}});
    let named = turngate::digest::Sha256Digest::of(b"the digest of another call");
    let forged = json!({
        "digest": named,
        "job": "forged",
        "request": shown,
        "asked_ms": 0,
        "deadline_ms": u64::MAX,
    });
    runtime().block_on(async {
        let client = async_nats::connect(setup.nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        approvals(js.clone()).await;
        js.publish(
            format!("{PREFIX}.approvals.ask.{}", named.hex()),
            forged.to_string().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    });
    assert!(waiting_questions(&setup.nats.url()).is_empty());
    assert_eq!(
        answer_question(&setup.nats.url(), &named, true),
        turngate::worker::approvals::FleetAnswer::NotAsked
    );
}

/// A yes given after the deadline is not taken, even when no worker was there to record the no.
#[test]
fn a_yes_given_after_the_deadline_with_no_worker_waiting_is_not_taken() {
    let Some(mut setup) = Setup::new("a_yes_given_after_the_deadline_with_no_worker") else {
        return;
    };
    setup.spec.ack_wait_ms = 1_000;
    let turn = asked_write(&mut setup, "too late");
    let policy = setup.spec.policy.clone().unwrap();
    let mut text = std::fs::read_to_string(&policy).unwrap();
    text.insert_str(0, "approval_timeout_seconds = 1\n");
    std::fs::write(&policy, text).unwrap();
    let mut first = setup.spec.spawn(&[]);
    setup.submit("late-yes", &turn);
    let question = question_of(&setup, "late-yes");
    first.kill();
    std::thread::sleep(Duration::from_millis(1_200));
    assert!(waiting_questions(&setup.nats.url()).is_empty());
    assert_eq!(
        answer_question(&setup.nats.url(), &question.digest, true),
        turngate::worker::approvals::FleetAnswer::Expired
    );
    let _second = setup.spec.spawn(&[]);
    let results = setup.answered("late-yes", Duration::from_secs(60));
    let report = &results.iter().find(|r| r.kind == "report").unwrap().payload;
    assert_eq!(report["calls"][0]["status"], "error", "{report}");
    assert_eq!(setup.read("asked.txt"), None);
}
