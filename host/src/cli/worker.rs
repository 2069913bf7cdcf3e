//! `turngate worker` and `turngate submit`: flags and glue around `turngate::worker`.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use clap::Args;
use futures_util::StreamExt as _;
use turngate::turn::Provider;
use turngate::worker::approvals::{FleetAnswer, FleetApprovals};
use turngate::worker::job::{Job, is_job_id, new_job_id};
use turngate::worker::names::{DEFAULT_PREFIX, Names};
use turngate::worker::run::Worker;
use turngate::worker::setup::Settings;
use turngate::worker::submit::{submit as enqueue, wait_for_report};
use turngate::{Cancel, Instances};

use crate::ToolboxArgs;
use crate::cli::stream::StreamSource;

// The deployment: where NATS is, and which names (one prefix per tenant).
#[derive(Args)]
pub struct NatsArgs {
    /// The NATS server (`nats://host:port`, or `host:port`).
    #[arg(long)]
    nats: String,
    /// Prefix of every subject and stream (one per tenant): `P.jobs`, `P.results.<job>`, streams
    /// `P_jobs`, `P_results`, `P_dead`.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// Ack wait of the workers' consumer, in milliseconds (a worker extends it while a job runs).
    /// Used when the consumer is created.
    #[arg(long, default_value_t = Settings::default().ack_wait.as_millis() as u64)]
    ack_wait_ms: u64,
    /// Deliveries of a job before it is dead-lettered. Used when the consumer is created.
    #[arg(long, default_value_t = Settings::default().max_deliver)]
    max_deliver: i64,
    /// JetStream's de-duplication window for jobs and results, in seconds. Used when the streams
    /// are created.
    #[arg(long, default_value_t = Settings::default().duplicate_window.as_secs())]
    dedup_window_secs: u64,
}

impl NatsArgs {
    fn settings(&self) -> Result<Settings> {
        Ok(Settings {
            names: Names::new(&self.prefix).map_err(anyhow::Error::msg)?,
            ack_wait: Duration::from_millis(self.ack_wait_ms),
            max_deliver: self.max_deliver,
            duplicate_window: Duration::from_secs(self.dedup_window_secs),
        })
    }

    async fn connect(&self) -> Result<async_nats::Client> {
        connect(&self.nats).await
    }
}

/// A client of the NATS server at `url`, reconnecting for as long as the process runs.
pub(crate) async fn connect(url: &str) -> Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(|attempts| {
            Duration::from_millis((50 * attempts as u64).min(1000))
        })
        .connect(url)
        .await
        .with_context(|| format!("connecting to NATS at {url}"))
}

// `turngate worker`'s flags.
#[derive(Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    nats: NatsArgs,
    /// The directory holding the roots; a job names one of its entries.
    #[arg(long)]
    roots: PathBuf,
    /// A policy file (TOML), for every job; without one, every tool may act anywhere inside the root.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Jobs worked on at once (jobs on the same root wait for each other).
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    #[command(flatten)]
    toolbox: ToolboxArgs,
}

// `turngate submit`'s flags.
#[derive(Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    nats: NatsArgs,
    /// The provider protocol of the stream.
    #[arg(long, value_parser = crate::parse_provider)]
    provider: Provider,
    /// The root: a directory name beneath the workers' --roots.
    #[arg(long)]
    root: String,
    /// The job ID (default: made up); a job submitted twice with one ID runs once, and is answered
    /// with its stored report from then on.
    #[arg(long)]
    job_id: Option<String>,
    /// OpenAI Chat: the request forced a named tool (as `run --forced-tool-choice`).
    #[arg(long)]
    forced_tool_choice: bool,
    /// The output limit the turn's request asked for (as `run --max-output-tokens`).
    #[arg(long, value_name = "N")]
    max_output_tokens: Option<u64>,
    /// Wait for the job's report, print it as `turngate run` does and exit with run's exit code.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this many milliseconds (exit 1).
    #[arg(long, requires = "wait")]
    timeout_ms: Option<u64>,
    /// The raw response body, a file holding it, or `-` (or nothing) for standard input.
    stream: Option<String>,
}

/// Runs a worker until SIGTERM or Ctrl-C, which stop it: its running calls stop and apply nothing,
/// and their jobs go back to the queue unanswered, for another worker.
pub async fn worker(args: WorkerArgs) -> Result<ExitCode> {
    let settings = args.nats.settings()?;
    let policy = crate::load_policy(args.policy.as_ref())?;
    let roots = Dir::open_ambient_dir(&args.roots, ambient_authority())
        .with_context(|| format!("opening roots {}", args.roots.display()))?;
    let toolbox = args
        .toolbox
        .builder()
        .trust(policy.trust())
        .instances(Instances::Pooled)
        .build()
        .await?;
    let client = args.nats.connect().await?;
    eprintln!(
        "turngate worker: pulling {} from {}",
        settings.names.jobs_subject(),
        args.nats.nats
    );
    let log = Box::new(|line: &str| eprintln!("turngate worker: {line}"));
    let stop = Cancel::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match terminate.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminated => {}
        }
        on_signal.cancel();
        eprintln!(
            "turngate worker: stopping (the running calls stop and apply nothing; their jobs go back \
             to the queue)"
        );
    });
    Worker::new(
        toolbox,
        policy,
        roots,
        args.roots.clone(),
        settings,
        args.concurrency,
        log,
        stop,
    )
    .run(client)
    .await;
    Ok(ExitCode::from(crate::EXIT_OK))
}

/// Enqueues one job; with --wait, prints its report and exits as `run` would.
pub async fn submit(args: SubmitArgs) -> Result<ExitCode> {
    let settings = args.nats.settings()?;
    let id = args.job_id.clone().unwrap_or_else(new_job_id);
    anyhow::ensure!(
        is_job_id(&id),
        "job ID `{id}`: expected 1 to 64 ASCII letters, digits, `-` or `_`, starting with a letter or digit"
    );
    let job = Job {
        id: id.clone(),
        provider: args.provider,
        root: args.root.clone(),
        forced_tool_choice: args.forced_tool_choice,
        max_output_tokens: args.max_output_tokens,
        stream: read_stream(StreamSource::from_arg(args.stream.clone()))?,
    };
    let client = args.nats.connect().await?;
    let js = async_nats::jetstream::new(client);
    let submitted = enqueue(&js, &settings, &job).await?;
    if !args.wait {
        let line = serde_json::json!({
            "job": id,
            "stream_seq": submitted.stream_seq,
            "duplicate": submitted.duplicate,
            "answered": submitted.answered,
        });
        outln!("{line}")?;
        return Ok(ExitCode::from(crate::EXIT_OK));
    }
    let timeout = args.timeout_ms.map(Duration::from_millis);
    let waiting = wait_for_report(&js, &settings, &id, timeout);
    let report = if std::io::stdin().is_terminal() {
        // The job's questions (`approval = "ask"`) are asked here too, while the report is awaited.
        let approvals = FleetApprovals::new(js.clone(), settings.names.clone());
        tokio::select! {
            report = waiting => report?,
            never = answer_on_terminal(&approvals, &id) => match never {},
        }
    } else {
        waiting.await?
    };
    let mut stdout = super::stdout();
    stdout.write_all(&report.json)?;
    writeln!(stdout)?;
    Ok(ExitCode::from(report.exit_code))
}

/// How often `submit --wait` looks for its job's questions.
const LOOK_FOR_QUESTIONS: Duration = Duration::from_millis(200);
/// How often it looks again while it is told of each new question (covering one missed in a
/// reconnect).
const LOOK_AGAIN: Duration = Duration::from_secs(5);

/// Asks each question job `id` publishes on this terminal, once, and answers it with what is typed
/// (the first answer stands: one given meanwhile elsewhere is said). Runs until dropped.
async fn answer_on_terminal(approvals: &FleetApprovals, id: &str) -> std::convert::Infallible {
    let mut asked = std::collections::BTreeSet::new();
    // Told of each question as it is published; without that, looking every LOOK_FOR_QUESTIONS.
    let mut published = approvals.asked().await.ok();
    loop {
        // No stream yet (no question asked anywhere) reads as nothing waiting. A job's questions,
        // asked together, are put in its turn's order.
        let mut waiting = approvals.waiting().await.unwrap_or_default();
        waiting.retain(|q| q.job == id);
        waiting.sort_by_key(|q| (q.position.unwrap_or(usize::MAX), q.asked_ms));
        for question in &waiting {
            if !asked.insert(question.digest) {
                continue;
            }
            let text = super::agent::question_text(&question.request, Some(&question.job));
            let approved = super::agent::ask_on_terminal(text).await;
            match approvals.answer(&question.digest, approved).await {
                Ok(FleetAnswer::Recorded) => {}
                Ok(FleetAnswer::AlreadyAnswered(standing)) => eprintln!(
                    "turngate: approval {} was answered {} meanwhile: that answer stands",
                    question.digest,
                    if standing { "yes" } else { "no" }
                ),
                Ok(FleetAnswer::Expired) => eprintln!(
                    "turngate: approval {} was past its deadline: denied",
                    question.digest
                ),
                Ok(FleetAnswer::NotAsked) => {}
                Err(error) => eprintln!(
                    "turngate: approval {} could not be answered: {error}",
                    question.digest
                ),
            }
        }
        match &mut published {
            Some(published) => {
                let _ = tokio::time::timeout(LOOK_AGAIN, published.next()).await;
            }
            None => tokio::time::sleep(LOOK_FOR_QUESTIONS).await,
        }
    }
}

/// The raw bytes of a STREAM argument.
fn read_stream(source: StreamSource) -> Result<Bytes> {
    let mut bytes = Vec::new();
    match source {
        StreamSource::Inline(body) => bytes = body.into_bytes(),
        StreamSource::Stdin => {
            std::io::stdin()
                .lock()
                .read_to_end(&mut bytes)
                .context("reading the stream from standard input")?;
        }
        StreamSource::File(path) => {
            bytes = std::fs::read(&path)
                .with_context(|| format!("reading stream {}", path.display()))?;
        }
    }
    Ok(Bytes::from(bytes))
}
