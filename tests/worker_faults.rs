//! The fault test of the workers: 3 worker processes (the real binary) on 300 jobs of 3 calls each
//! (writes, edits, deletes, writes the policy refuses, truncated turns), stopped 28 times (8 at
//! test-hook points: before a call, mid-apply at each journal point, between apply and publish,
//! mid-publish, between publish and ack; 20 by SIGKILL at random moments), with the NATS server
//! restarted once mid-run. Afterwards: every call's effect applied exactly once (file contents and
//! journal), exactly one result per call ID and one report per job, no write from a turn that did
//! not complete.

mod worker_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use turngate::Provider;
use turngate::effects::journal::CallState;
use turngate::worker::job::Job;
use turngate::worker::setup::Settings;
use worker_support::*;

const JOBS: usize = 300;
const ROOTS: usize = 10;
const WORKERS: usize = 3;
const RANDOM_KILLS: usize = 20;
const PREFIX: &str = "turngate";

/// The hook stops, one per respawn until they are used up.
const HOOKS: [(&str, &str); 8] = [
    ("TURNGATE_TEST_WORKER_CRASH_AT", "before-call@3"),
    ("TURNGATE_TEST_CRASH_AT", "intent"),
    ("TURNGATE_TEST_CRASH_AT", "durable"),
    ("TURNGATE_TEST_CRASH_AT", "moved-one"),
    ("TURNGATE_TEST_CRASH_AT", "moved-all"),
    ("TURNGATE_TEST_WORKER_CRASH_AT", "after-apply@2"),
    ("TURNGATE_TEST_WORKER_CRASH_AT", "mid-publish@2"),
    ("TURNGATE_TEST_WORKER_CRASH_AT", "after-publish@2"),
];

/// What job `n` does: a write, an edit a second application would show (`job n` becomes
/// `job n edited`, then `job n edited edited`), and by `n % 3` a delete, a write the policy refuses
/// or another write. One job in ten is cut off at `max_tokens`.
fn job(n: usize) -> Job {
    let third = match n % 3 {
        0 => ("delete_file", json!({"path": format!("d{n}.txt")})),
        1 => (
            "write_file",
            json!({"path": format!("secret/s{n}.txt"), "content": "no"}),
        ),
        _ => (
            "write_file",
            json!({"path": format!("g{n}.txt"), "content": format!("extra {n}")}),
        ),
    };
    let calls = [
        (
            format!("toolu_{n}_1"),
            "write_file",
            json!({"path": format!("f{n}.txt"), "content": format!("job {n}")}),
        ),
        (
            format!("toolu_{n}_2"),
            "edit_file",
            json!({"path": format!("f{n}.txt"), "old_string": format!("job {n}"),
                "new_string": format!("job {n} edited")}),
        ),
        (format!("toolu_{n}_3"), third.0, third.1),
    ];
    Job {
        id: format!("f{n:03}"),
        provider: Provider::Anthropic,
        root: format!("r{}", n % ROOTS),
        forced_tool_choice: false,
        max_output_tokens: None,
        stream: Bytes::from(anthropic_turn(&calls, truncated(n))),
    }
}

fn truncated(n: usize) -> bool {
    n % 10 == 7
}

async fn pending_jobs(url: &str) -> Option<u64> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_millis(500))
        .connect(url)
        .await
        .ok()?;
    let js = async_nats::jetstream::new(client);
    let stream = js.get_stream(format!("{PREFIX}_jobs")).await.ok()?;
    Some(stream.get_info().await.ok()?.state.messages)
}

#[test]
fn workers_apply_every_call_exactly_once_through_kills_and_a_server_restart() {
    let test = "workers_apply_every_call_exactly_once_through_kills_and_a_server_restart";
    let Some(binary) = nats_server_binary(test) else {
        return;
    };
    let started = Instant::now();
    let mut nats = Nats::start(binary);
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("roots");
    for r in 0..ROOTS {
        std::fs::create_dir_all(roots.join(format!("r{r}/secret"))).unwrap();
    }
    for n in 0..JOBS {
        std::fs::write(root_of(&roots, n).join(format!("d{n}.txt")), "delete me").unwrap();
    }
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "default = \"workspace-write\"\ndeny = [\"secret/**\"]\n",
    )
    .unwrap();
    let mut spec = WorkerSpec::new(nats.url(), &roots);
    spec.policy = Some(policy);
    spec.log = Some(dir.path().join("workers.log"));

    let runtime = runtime();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        for n in 0..JOBS {
            turngate::worker::submit::submit(&js, &Settings::default(), &job(n))
                .await
                .unwrap();
        }
    });

    let mut hooks = HOOKS.iter();
    let mut next_env = || hooks.next().map(|h| vec![*h]).unwrap_or_default();
    // Each worker with the hook it carries: one killed before its hook fired hands the hook to the
    // worker that replaces it, so every hook gets to stop a worker.
    let mut envs: Vec<Vec<(&str, &str)>> = (0..WORKERS).map(|_| next_env()).collect();
    let mut workers: Vec<WorkerProcess> = envs.iter().map(|env| spec.spawn(env)).collect();
    let mut hook_stops = 0;
    let mut kills = 0;
    let mut restarted = false;
    let mut kill_at: Vec<usize> = (1..=RANDOM_KILLS)
        .map(|i| i * JOBS / (RANDOM_KILLS + 2) + fastrand::usize(0..JOBS / (RANDOM_KILLS * 2)))
        .collect();
    kill_at.sort_unstable();
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(
            Instant::now() < deadline,
            "the jobs were not all answered in time ({kills} kills, {hook_stops} hook stops); \
             see {}",
            dir.path().join("workers.log").display()
        );
        for (worker, env) in workers.iter_mut().zip(envs.iter_mut()) {
            if !worker.alive() {
                hook_stops += 1;
                *env = next_env();
                *worker = spec.spawn(env);
            }
        }
        let pending = runtime.block_on(pending_jobs(&nats.url()));
        let answered = pending.map(|p| JOBS - p as usize);
        if let Some(answered) = answered {
            if kills < RANDOM_KILLS && answered >= kill_at[kills] {
                std::thread::sleep(Duration::from_millis(fastrand::u64(0..300)));
                let victim = fastrand::usize(0..WORKERS);
                if workers[victim].alive() {
                    workers[victim].kill();
                    // Its hook, if it had one, has not fired (it would have exited): re-armed.
                    workers[victim] = spec.spawn(&envs[victim]);
                    kills += 1;
                }
            }
            if !restarted && answered >= JOBS / 2 {
                nats.restart();
                restarted = true;
            }
            if answered == JOBS && kills == RANDOM_KILLS {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let any late copy of a result (a worker that published, then lost its ack) reach the stream.
    std::thread::sleep(Duration::from_secs(2));
    drop(workers);
    assert!(restarted);
    assert_eq!(kills, RANDOM_KILLS);
    assert_eq!(hook_stops, HOOKS.len(), "every hook stopped a worker");

    let results = runtime.block_on(all_results(&nats.url(), PREFIX));
    let mut seen: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for r in &results {
        *seen
            .entry((
                r.subject.clone(),
                r.kind.clone(),
                r.key.clone().unwrap_or_default(),
            ))
            .or_default() += 1;
    }
    let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "results stored twice: {doubled:?}");
    let reports = reports(&results, PREFIX);
    assert_eq!(reports.len(), JOBS, "one report per job");

    let mut journals: BTreeMap<usize, Vec<_>> = BTreeMap::new();
    for r in 0..ROOTS {
        journals.insert(r, journal(&roots.join(format!("r{r}"))));
    }
    for n in 0..JOBS {
        let id = format!("f{n:03}");
        let root = root_of(&roots, n);
        let report = &reports[&id][0].payload;
        let calls = report["calls"].as_array().unwrap();
        let keys: Vec<_> = results
            .iter()
            .filter(|r| r.subject == format!("{PREFIX}.results.{id}") && r.kind == "call")
            .map(|r| r.key.clone().unwrap())
            .collect();
        let ids: Vec<_> = calls
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(keys, ids, "{id}: one result per call ID, in order");
        let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
        let applied = |call: usize| {
            journals[&(n % ROOTS)]
                .iter()
                .filter(|e| {
                    e.turn.as_deref() == Some(id.as_str())
                        && e.call_id.as_deref() == Some(format!("toolu_{n}_{call}").as_str())
                })
                .map(|e| e.state)
                .collect::<Vec<_>>()
        };
        let once = |call: usize| {
            let states = applied(call);
            assert_eq!(
                states.iter().filter(|s| **s == CallState::Applied).count(),
                1,
                "{id} call {call}: {states:?}"
            );
            assert!(!states.contains(&CallState::Intent), "{id}: {states:?}");
        };
        if truncated(n) {
            assert_eq!(reports[&id][0].exit, Some(3), "{id}: {report:#}");
            assert_eq!(read(&format!("f{n}.txt")), None, "{id}");
            assert_eq!(read(&format!("d{n}.txt")).as_deref(), Some("delete me"));
            assert!((1..=3).all(|c| applied(c).is_empty()), "{id}");
            continue;
        }
        assert_eq!(
            read(&format!("f{n}.txt")).as_deref(),
            Some(format!("job {n} edited").as_str()),
            "{id}"
        );
        once(1);
        once(2);
        match n % 3 {
            0 => {
                assert_eq!(read(&format!("d{n}.txt")), None, "{id}");
                once(3);
            }
            1 => {
                assert_eq!(reports[&id][0].exit, Some(2), "{id}: {report:#}");
                assert_eq!(calls[2]["status"], "error");
                assert_eq!(read(&format!("secret/s{n}.txt")), None);
                assert!(applied(3).is_empty());
                continue;
            }
            _ => {
                assert_eq!(
                    read(&format!("g{n}.txt")).as_deref(),
                    Some(format!("extra {n}").as_str())
                );
                once(3);
            }
        }
        assert_eq!(reports[&id][0].exit, Some(0), "{id}: {report:#}");
    }
    // The stops hit jobs in flight: each hook stop (inside a job, by its point) and some kills left
    // a job to be taken again. Counted by the workers' own `taken` lines, not the server's delivery
    // counts, which a server killed mid-run can lose.
    let log = std::fs::read_to_string(dir.path().join("workers.log")).unwrap();
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains(" taken (delivery ")) {
        let job = line.split_once("job #").map_or("", |(_, rest)| rest);
        *taken
            .entry(job.split(' ').next().unwrap_or_default())
            .or_default() += 1;
    }
    let redelivered = taken.values().filter(|&&n| n > 1).count();
    assert!(
        redelivered >= HOOKS.len(),
        "{redelivered} jobs taken more than once"
    );
    eprintln!(
        "worker faults: {JOBS} jobs, {kills} SIGKILLs, {hook_stops} hook stops, 1 NATS restart, \
         {redelivered} jobs taken more than once, {} result messages, {:.1} s",
        results.len(),
        started.elapsed().as_secs_f64()
    );
}

fn root_of(roots: &Path, n: usize) -> std::path::PathBuf {
    roots.join(format!("r{}", n % ROOTS))
}
