//! Workers: jobs per second and job latency (p50, p99) with 1, 2 and 3 worker processes on NATS
//! JetStream, against the in-process pipeline (`process_turn`) on the same turns, in one run.
//! `cargo bench --bench workers [-- JOBS]` (default 300). Needs the system's nats-server.
//!
//! Each job: one Anthropic turn of three calls (a write, an edit of it, a second write) on one of 20
//! roots. The in-process pipeline runs the turns one after another; the workers (each
//! `--concurrency 2`) get them from a submitter that keeps four jobs per worker in flight, and a job's
//! latency is from its submission to its report arriving at the submitter.
//!
//! Then a recorded approval through a worker: one-write jobs, one at a time, to a worker whose policy
//! asks before `write_file` (the question published in JetStream, answered yes at once by a watcher
//! subscribed to the questions) and, alternately, to one whose policy does not ask: the latency of
//! each, p50 and p90, and the difference.

#[path = "../../tests/worker_support/mod.rs"]
mod worker_support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::json;
use turngate::providers::TurnDecoder;
use turngate::worker::job::Job;
use turngate::worker::names::Names;
use turngate::worker::setup::Settings;
use turngate::{CacheSetting, Policy, Provider, Root, Toolbox, TurnOptions, process_turn};
use worker_support::*;

const ROOTS: usize = 20;

fn job(n: usize, prefix: &str) -> Job {
    let calls = [
        (
            format!("c{n}a"),
            "write_file",
            json!({"path": format!("f{n}.txt"), "content": format!("job {n}\n")}),
        ),
        (
            format!("c{n}b"),
            "edit_file",
            json!({"path": format!("f{n}.txt"), "old_string": format!("job {n}"),
                "new_string": format!("job {n} edited")}),
        ),
        (
            format!("c{n}c"),
            "write_file",
            json!({"path": format!("g{n}.txt"), "content": "second\n"}),
        ),
    ];
    Job {
        id: format!("{prefix}-{n}"),
        provider: Provider::Anthropic,
        root: format!("r{}", n % ROOTS),
        forced_tool_choice: false,
        max_output_tokens: None,
        stream: Bytes::from(anthropic_turn(&calls, false)),
    }
}

fn roots(dir: &Path) -> PathBuf {
    let roots = dir.join("roots");
    for r in 0..ROOTS {
        std::fs::create_dir_all(roots.join(format!("r{r}"))).unwrap();
    }
    roots
}

struct Row {
    setup: String,
    jobs: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Row {
    fn print(&mut self) {
        self.latencies.sort_unstable();
        let at = |q: f64| {
            let i = ((self.latencies.len() as f64 - 1.0) * q).round() as usize;
            self.latencies[i].as_secs_f64() * 1000.0
        };
        println!(
            "| {} | {} | {:.1} | {:.0} ms | {:.0} ms |",
            self.setup,
            self.jobs,
            self.jobs as f64 / self.elapsed.as_secs_f64(),
            at(0.5),
            at(0.99)
        );
    }
}

fn in_process(jobs: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let runtime = runtime();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(test_cache_dir()))
                .build(),
        )
        .unwrap();
    let opened: Vec<Root> = (0..ROOTS)
        .map(|r| Root::open(roots.join(format!("r{r}"))).unwrap())
        .collect();
    let mut latencies = Vec::with_capacity(jobs);
    let started = Instant::now();
    for n in 0..jobs {
        let job = job(n, "inproc");
        let begun = Instant::now();
        let mut decoder = TurnDecoder::new(job.provider);
        decoder.feed(&job.stream);
        let options = TurnOptions {
            turn_id: Some(job.id.clone()),
            ..TurnOptions::default()
        };
        let report = runtime.block_on(process_turn(
            &toolbox,
            &opened[n % ROOTS],
            &Policy::allow_all(),
            decoder.finish(),
            options,
        ));
        assert!(report.all_ok(), "{:#}", report.to_json());
        latencies.push(begun.elapsed());
    }
    Row {
        setup: "in-process `process_turn`, sequential".into(),
        jobs,
        elapsed: started.elapsed(),
        latencies,
    }
}

fn workers(nats: &Nats, count: usize, jobs: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("bench{count}");
    let mut spec = WorkerSpec::new(nats.url(), &roots(dir.path()));
    spec.ack_wait_ms = 30_000;
    spec.prefix = prefix.clone();
    let settings = Settings {
        names: Names::new(&prefix).unwrap(),
        ..Settings::default()
    };
    let _workers: Vec<WorkerProcess> = (0..count).map(|_| spec.spawn(&[])).collect();
    let runtime = runtime();
    let (elapsed, latencies) = runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client.clone());
        turngate::worker::setup::ensure_streams(&js, &settings)
            .await
            .unwrap();
        let mut reports = client
            .subscribe(format!("{prefix}.results.*"))
            .await
            .unwrap();
        let submit = |n: usize| {
            let js = js.clone();
            let settings = settings.clone();
            let prefix = prefix.clone();
            async move {
                turngate::worker::submit::submit(&js, &settings, &job(n, &prefix))
                    .await
                    .unwrap();
            }
        };
        // Warm up: every worker has loaded its tools and pulls.
        submit(jobs).await;
        while let Some(message) = reports.next().await {
            if is_report(&message) {
                break;
            }
        }
        let in_flight = 4 * count;
        let mut submitted: HashMap<String, Instant> = HashMap::new();
        let mut latencies = Vec::with_capacity(jobs);
        let started = Instant::now();
        let mut next = 0;
        while next < jobs.min(in_flight) {
            submitted.insert(format!("{prefix}-{next}"), Instant::now());
            submit(next).await;
            next += 1;
        }
        while latencies.len() < jobs {
            let message = reports.next().await.unwrap();
            if !is_report(&message) {
                continue;
            }
            let job = message.subject.rsplit('.').next().unwrap_or_default();
            if let Some(at) = submitted.remove(job) {
                latencies.push(at.elapsed());
                if next < jobs {
                    submitted.insert(format!("{prefix}-{next}"), Instant::now());
                    submit(next).await;
                    next += 1;
                }
            }
        }
        (started.elapsed(), latencies)
    });
    Row {
        setup: format!(
            "{count} worker{} (`--concurrency 2`)",
            if count > 1 { "s" } else { "" }
        ),
        jobs,
        elapsed,
        latencies,
    }
}

fn is_report(message: &async_nats::Message) -> bool {
    message
        .headers
        .as_ref()
        .and_then(|h| h.get("Turngate-Kind"))
        .is_some_and(|k| k.as_str() == "report")
}

/// The watcher that answers every question of deployment `prefix` yes as soon as it is published.
async fn answer_every_question(client: async_nats::Client, prefix: String) {
    let approvals = turngate::worker::approvals::FleetApprovals::open(
        jetstream::new(client.clone()),
        Names::new(&prefix).unwrap(),
    )
    .await
    .unwrap();
    let mut asked = client
        .subscribe(format!("{prefix}.approvals.ask.*"))
        .await
        .unwrap();
    while let Some(message) = asked.next().await {
        let question: turngate::worker::approvals::FleetQuestion =
            serde_json::from_slice(&message.payload).unwrap();
        approvals.answer(&question.digest, true).await.unwrap();
    }
}

/// One-write jobs alternately to a worker that asks and one that does not: their latencies.
fn approvals(nats: &Nats, jobs: usize) -> (Vec<Duration>, Vec<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("ask.toml");
    std::fs::write(
        &policy,
        "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    let start = |prefix: &str, policy: Option<PathBuf>| {
        let mut spec = WorkerSpec::new(nats.url(), &roots(&dir.path().join(prefix)));
        spec.prefix = prefix.to_owned();
        spec.policy = policy;
        spec.spawn(&[])
    };
    let _asking = start("asked", Some(policy));
    let _plain = start("plain", None);
    let runtime = runtime();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client.clone());
        tokio::spawn(answer_every_question(client.clone(), "asked".into()));
        let mut latencies = (Vec::new(), Vec::new());
        // The first two of each: the workers load their tools.
        for n in 0..jobs + 2 {
            for prefix in ["asked", "plain"] {
                let settings = Settings {
                    names: Names::new(prefix).unwrap(),
                    ..Settings::default()
                };
                let calls = [(
                    format!("w{n}"),
                    "write_file",
                    json!({"path": format!("w{n}.txt"), "content": "asked\n"}),
                )];
                let job = Job {
                    id: format!("{prefix}-{n}"),
                    provider: Provider::Anthropic,
                    root: "r0".into(),
                    forced_tool_choice: false,
                    max_output_tokens: None,
                    stream: Bytes::from(anthropic_turn(&calls, false)),
                };
                let begun = Instant::now();
                turngate::worker::submit::submit(&js, &settings, &job)
                    .await
                    .unwrap();
                let report =
                    turngate::worker::submit::wait_for_report(&js, &settings, &job.id, None)
                        .await
                        .unwrap();
                let took = begun.elapsed();
                assert_eq!(
                    report.exit_code,
                    0,
                    "{}",
                    String::from_utf8_lossy(&report.json)
                );
                if n >= 2 {
                    match prefix {
                        "asked" => latencies.0.push(took),
                        _ => latencies.1.push(took),
                    }
                }
            }
        }
        latencies
    })
}

fn percentile(mut samples: Vec<Duration>, q: f64) -> f64 {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

fn main() {
    let jobs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let Some(binary) = nats_server_binary("the workers bench") else {
        std::process::exit(1);
    };
    let nats = Nats::start(binary);
    let mut rows = vec![in_process(jobs)];
    for count in 1..=3 {
        rows.push(workers(&nats, count, jobs));
    }
    println!("| setup | jobs | jobs/s | p50 latency | p99 latency |");
    println!("|---|---|---|---|---|");
    for row in &mut rows {
        row.print();
    }
    let (asked, plain) = approvals(&nats, jobs.min(100));
    println!();
    println!("| one-write job, one at a time | jobs | p50 | p90 |");
    println!("|---|---|---|---|");
    for (name, samples) in [("asked, answered at once", &asked), ("not asked", &plain)] {
        println!(
            "| {name} | {} | {:.2} ms | {:.2} ms |",
            samples.len(),
            percentile(samples.clone(), 0.5),
            percentile(samples.clone(), 0.9)
        );
    }
    println!(
        "\nThe approval through a worker: +{:.2} ms at p50.",
        percentile(asked, 0.5) - percentile(plain, 0.5)
    );
}
