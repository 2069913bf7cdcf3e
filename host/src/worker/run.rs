//! The worker: pulls jobs, gates each turn under its root's lease, publishes the answer, then acks.
//!
//! Per job, in this order (each step's crash is covered, see ARCHITECTURE.md):
//!
//! 1. pull one job per free slot (`--concurrency`) from the durable consumer, and from then on send
//!    an in-progress ack every third of the ack wait, so a long job is not delivered again;
//! 2. read the job strictly ([`Job::from_parts`]); a message that is not a job, or whose root cannot
//!    be opened, is answered with a refusal (and acked), never retried; a job whose ID has a stored
//!    report ([`stored_report`]) was answered already, whatever JetStream's de-duplication forgot
//!    since: it is acked, nothing runs and nothing is published;
//! 3. open the root through the roots directory's handle and wait for its [`Lease`];
//! 4. open the root's journal (which settles whatever a crashed worker left half-applied), then run
//!    the turn through [`process_turn_recorded`] with the job ID as the turn ID: before each call,
//!    the journal is asked for that call of that turn; an applied one is answered from its record;
//! 5. release the lease, publish the answer ([`Answer::publish`]: every message acknowledged by
//!    JetStream), and only then ack the job with confirmation (`double_ack`).
//!
//! Any error before the ack leaves the job unacked (nak'ed with a delay when the worker is still
//! there): it is delivered again, replays what was applied, and publishes under the same IDs.
//!
//! Told to stop (its [`Cancel`], SIGTERM or Ctrl-C for `turngate worker`), a worker pulls nothing
//! more; the call each job is running stops and applies nothing (a yes or a finished run that comes
//! after the stop is looked at again before anything applies), and those jobs are nak'ed unanswered,
//! so another worker answers them whole, replaying what applied before the stop. Then `run` returns.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use async_nats::jetstream::context::Context;
use async_nats::jetstream::{self, AckKind};
use cap_std::fs::Dir;
use futures_util::StreamExt;

use super::WorkerError;
use super::answer::{Answer, stored_report};
use super::approvals::{FleetApprovals, FleetApprover};
use super::job::Job;
use super::setup::{self, Settings};
use crate::cancel::Cancel;
use crate::effects::EffectError;
use crate::effects::journal::{JournalEntry, Lease, Retention};
use crate::history::render;
use crate::pipeline::{
    CallReport, CallStatus, TurnHooks, TurnOptions, TurnReport, call_key, process_turn_recorded,
    process_turn_with,
};
use crate::test_hooks::worker_point;
use crate::{Journal, Policy, Root, Toolbox};

/// How often a worker looks again at a lease another worker holds.
const LEASE_POLL: Duration = Duration::from_millis(20);
/// How long a pull request waits for a job before it is renewed.
const PULL_EXPIRES: Duration = Duration::from_secs(5);

/// What a worker says about its jobs (for its log).
pub type Log = Box<dyn Fn(&str)>;

/// A stateless worker: a toolbox, a policy and a directory of roots.
pub struct Worker {
    toolbox: Toolbox,
    policy: Policy,
    roots: Dir,
    roots_path: PathBuf,
    settings: Settings,
    concurrency: usize,
    log: Log,
    stop: Cancel,
}

/// How a job is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Gate and run the turn.
    Run,
    /// The job was delivered this many times without an ack: answer it from the journal, run nothing.
    DeadLetter(u64),
}

impl Worker {
    /// A worker over the roots in `roots` (opened at `roots_path`, which is only for messages), running
    /// up to `concurrency` jobs at once (on different roots; jobs on one root wait for its lease),
    /// until `stop` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        toolbox: Toolbox,
        policy: Policy,
        roots: Dir,
        roots_path: PathBuf,
        settings: Settings,
        concurrency: usize,
        log: Log,
        stop: Cancel,
    ) -> Worker {
        Worker {
            toolbox,
            policy,
            roots,
            roots_path,
            settings,
            concurrency: concurrency.max(1),
            log,
            stop,
        }
    }

    /// Works until it is stopped (or killed): creates the streams and consumers when missing
    /// (retrying while the server is not there yet, or restarting), then answers jobs and dead
    /// letters; once stopped, returns when the jobs under way have stopped and been handed back.
    /// Runs on the current thread (a `LocalSet`).
    pub async fn run(self, client: async_nats::Client) {
        let js = jetstream::new(client);
        let stop = self.stop.clone();
        let (jobs, dead) = loop {
            let ready = async {
                setup::ensure_streams(&js, &self.settings).await?;
                let jobs = setup::jobs_consumer(&js, &self.settings).await?;
                let dead = setup::dead_consumer(&js, &self.settings).await?;
                Ok::<_, WorkerError>((jobs, dead))
            };
            let ready = tokio::select! {
                ready = ready => ready,
                () = stop.cancelled() => return,
            };
            match ready {
                Ok(consumers) => break consumers,
                Err(error) => {
                    (self.log)(&format!("setting up (retrying): {error}"));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        };
        let worker = Rc::new(self);
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                tokio::task::spawn_local(super::dead::answer_dead_letters(
                    worker.clone(),
                    js.clone(),
                    dead,
                ));
                worker.pull_jobs(js, jobs).await
            })
            .await
    }

    async fn pull_jobs(self: Rc<Self>, js: Context, jobs: jetstream::consumer::PullConsumer) {
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        loop {
            let pulled = async {
                let slot = slots.clone().acquire_owned().await.ok()?;
                Some((slot, next_message(&jobs).await))
            };
            let (slot, pulled) = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                pulled = pulled => match pulled {
                    Some(pulled) => pulled,
                    None => break,
                },
            };
            let message = match pulled {
                Ok(Some(message)) => message,
                Ok(None) => continue,
                Err(error) => {
                    (self.log)(&format!("pulling a job: {error}"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let worker = self.clone();
            let js = js.clone();
            tokio::task::spawn_local(async move {
                worker.handle(&js, message).await;
                drop(slot);
            });
        }
        // Stopping: the jobs under way stop their calls and hand their jobs back; wait for them.
        let all = u32::try_from(self.concurrency).unwrap_or(u32::MAX);
        let _ = slots.acquire_many(all).await;
    }

    /// Answers one delivery of a job, then acks it; on an error, leaves it to a later delivery.
    async fn handle(&self, js: &Context, message: jetstream::Message) {
        let (seq, deliveries) = message
            .info()
            .map(|info| (info.stream_sequence, info.delivered.max(1) as u64))
            .unwrap_or((0, 1));
        // Logged before anything of the job is done, so a job whose worker died is seen taken twice
        // (the server's delivery count may not say so: it can be lost with a server that was killed).
        (self.log)(&format!("job #{seq} taken (delivery {deliveries})"));
        let work = async {
            let names = &self.settings.names;
            let job = Job::from_parts(message.headers.as_ref(), message.payload.clone());
            let id = match &job {
                Ok(job) => Some(job.id.as_str()),
                Err((id, _)) => id.as_deref(),
            };
            if let Some(id) = id
                && stored_report(js, names, id).await?.is_some()
            {
                (self.log)(&format!(
                    "job #{seq} ({id}) was answered before: its report stands"
                ));
            } else {
                let answer = match &job {
                    Ok(job) => self.answer(js, job, Mode::Run).await?,
                    Err((id, error)) => {
                        Answer::refused(names, id.as_deref(), seq, &error.to_string())
                    }
                };
                worker_point("after-apply");
                answer.publish(js).await?;
                worker_point("after-publish");
            }
            message
                .double_ack()
                .await
                .map_err(|e| WorkerError::nats("acking a job")(&e))
        };
        let every = self.settings.ack_wait / 3;
        match with_progress(&message, every, work).await {
            Ok(()) => (self.log)(&format!("job #{seq} answered (delivery {deliveries})")),
            Err(error) => {
                (self.log)(&format!(
                    "job #{seq} (delivery {deliveries}) left for a later delivery: {error}"
                ));
                let _ = message
                    .ack_with(AckKind::Nak(Some(Duration::from_millis(500))))
                    .await;
            }
        }
    }

    /// The answer to one job: gated and run (or, for a dead letter, read from the journal) under the
    /// root's lease.
    pub(crate) async fn answer(
        &self,
        js: &Context,
        job: &Job,
        mode: Mode,
    ) -> Result<Answer, WorkerError> {
        let names = &self.settings.names;
        let root = match Root::open_in(&self.roots, &self.roots_path, &job.root) {
            Ok(root) => root,
            Err(error) if is_refusal(&error) => {
                let message = format!("cannot open root `{}`: {error}", job.root);
                return Ok(Answer::refused(names, Some(&job.id), 0, &message));
            }
            Err(error) => {
                return Err(WorkerError::Config(format!(
                    "cannot open root `{}`: {error}",
                    job.root
                )));
            }
        };
        let turn = job.decode();
        let lease = loop {
            if let Some(lease) = Lease::try_take(&root)? {
                break lease;
            }
            tokio::time::sleep(LEASE_POLL).await;
        };
        // Opening the journal settles any apply a crashed worker left half-done.
        let mut journal = Journal::open_existing(&root, Retention::default())?;
        let mut replayed = BTreeSet::new();
        let mut lookup = |key: &str| -> Result<Option<JournalEntry>, EffectError> {
            let found = match journal.as_mut() {
                Some(journal) => journal.find_applied_in(&job.id, key)?,
                None => None,
            };
            if found.is_some() {
                replayed.insert(key.to_owned());
            }
            Ok(found)
        };
        let options = TurnOptions {
            audit: false,
            review: false,
            turn_id: Some(job.id.clone()),
        };
        let report = match mode {
            Mode::Run => {
                let mut recorded = |key: &str| {
                    let found = lookup(key)?;
                    if found.is_none() {
                        worker_point("before-call");
                    }
                    Ok::<_, EffectError>(found)
                };
                let approvals = FleetApprovals::new(js.clone(), names.clone());
                let approver =
                    FleetApprover::new(approvals, &job.id, self.policy.approval_timeout());
                let hooks = TurnHooks {
                    approver: Some(&approver),
                    cancel: Some(&self.stop),
                };
                let report = process_turn_recorded(
                    &self.toolbox,
                    &root,
                    &self.policy,
                    turn,
                    options,
                    hooks,
                    &mut recorded,
                )
                .await?;
                // Stopped meanwhile: some call was cancelled, so the report is not the job's answer.
                if self.stop.is_cancelled() {
                    return Err(WorkerError::Stopping);
                }
                report
            }
            Mode::DeadLetter(_) if !turn.is_completed() => {
                process_turn_with(
                    &self.toolbox,
                    &root,
                    &self.policy,
                    turn,
                    options,
                    TurnHooks::default(),
                )
                .await
            }
            Mode::DeadLetter(deliveries) => dead_letter_report(job, turn, deliveries, &mut lookup)?,
        };
        drop(lease);
        let dead = match mode {
            Mode::Run => None,
            Mode::DeadLetter(deliveries) => Some(deliveries),
        };
        Ok(Answer::of_report(names, &report, &replayed, dead))
    }

    /// The worker's settings.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Says something in the worker's log.
    pub(crate) fn log(&self, line: &str) {
        (self.log)(line)
    }
}

/// A completed turn's report when its job was dead-lettered: calls the journal records for the job
/// are answered from their records, every other call is an error, not run.
fn dead_letter_report(
    job: &Job,
    turn: crate::Turn,
    deliveries: u64,
    lookup: &mut dyn FnMut(&str) -> Result<Option<JournalEntry>, EffectError>,
) -> Result<TurnReport, EffectError> {
    let mut calls = Vec::with_capacity(turn.calls.len());
    let mut results = Vec::with_capacity(turn.calls.len());
    for (position, call) in turn.calls.iter().enumerate() {
        let report = match lookup(&call_key(call.id.as_deref(), position))? {
            Some(entry) => crate::pipeline::replayed(call, entry),
            None => CallReport {
                kind: call.kind,
                id: call.id.clone(),
                name: call.name.clone(),
                status: CallStatus::Error,
                reason: Some(format!(
                    "the job was delivered {deliveries} times without being answered \
                     (max_deliver): this call was not run"
                )),
                step: Some("dead_letter"),
                output: None,
                changes: Vec::new(),
                requests: Vec::new(),
            },
        };
        results.push(report.result_for(position));
        calls.push(report);
    }
    let history = render(&turn, &results);
    Ok(TurnReport {
        turn_id: job.id.clone(),
        turn,
        calls,
        history,
        audit: Vec::new(),
    })
}

/// Whether a failure to open a root is the job's fault (no such root, not a directory, not a plain
/// name, a symlink) rather than the filesystem's.
fn is_refusal(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::NotFound | ErrorKind::InvalidInput | ErrorKind::NotADirectory
    ) || error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

/// The next message of a pull consumer, waiting at most [`PULL_EXPIRES`] (`None`: none came).
pub(crate) async fn next_message(
    consumer: &jetstream::consumer::PullConsumer,
) -> Result<Option<jetstream::Message>, WorkerError> {
    let mut batch = consumer
        .batch()
        .max_messages(1)
        .expires(PULL_EXPIRES)
        .messages()
        .await
        .map_err(|e| WorkerError::nats("pulling")(&e))?;
    match batch.next().await {
        Some(Ok(message)) => Ok(Some(message)),
        Some(Err(error)) => Err(WorkerError::nats("pulling")(&error)),
        None => Ok(None),
    }
}

/// Runs `work` while sending an in-progress ack for `message` every `every`.
pub(crate) async fn with_progress<T>(
    message: &jetstream::Message,
    every: Duration,
    work: impl Future<Output = T>,
) -> T {
    tokio::pin!(work);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.tick().await;
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => {
                let _ = message.ack_with(AckKind::Progress).await;
            }
        }
    }
}
