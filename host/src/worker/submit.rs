//! The submitter's side: enqueue a job, and wait for its report.

use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::context::Context;
use async_nats::jetstream::message::PublishMessage;
use futures_util::StreamExt;

use super::WorkerError;
pub use super::answer::Report;
use super::answer::{HEADER_EXIT, HEADER_KIND, stored_report};
use super::job::Job;
use super::setup::{self, Settings};

/// How a submission went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The job's sequence in the jobs stream.
    pub stream_seq: u64,
    /// The job was not enqueued again: JetStream had this job ID already (within the
    /// de-duplication window), or it was answered already.
    pub duplicate: bool,
    /// The job has a stored report already (see [`stored_report`]): it was not enqueued, and the
    /// stored report is its answer (`stream_seq` is then 0).
    pub answered: bool,
}

/// Enqueues `job` (creating the streams when missing), waiting for JetStream to store it; a job that
/// was answered already is not enqueued again.
pub async fn submit(
    js: &Context,
    settings: &Settings,
    job: &Job,
) -> Result<Submitted, WorkerError> {
    let headers = job
        .headers()
        .map_err(|e| WorkerError::Config(e.to_string()))?;
    setup::ensure_streams(js, settings).await?;
    if stored_report(js, &settings.names, &job.id).await?.is_some() {
        return Ok(Submitted {
            stream_seq: 0,
            duplicate: true,
            answered: true,
        });
    }
    let publish = PublishMessage::build()
        .headers(headers)
        .payload(job.stream.clone());
    let ack = js
        .send_publish(settings.names.jobs_subject(), publish)
        .await
        .map_err(|e| WorkerError::nats("submitting the job")(&e))?
        .await
        .map_err(|e| WorkerError::nats("submitting the job")(&e))?;
    Ok(Submitted {
        stream_seq: ack.sequence,
        duplicate: ack.duplicate,
        answered: false,
    })
}

/// How long a submitter waits before it reads the results again after the server went away.
const WAIT_RETRY: Duration = Duration::from_millis(250);

/// Waits for the report of job `id` (which may have arrived already, or long ago), at most `timeout`
/// (none: for as long as it takes). The server may restart meanwhile (its consumers go with it): the
/// submitter then looks for the stored report again and reads the results through a new consumer,
/// until the report comes or its own timeout passes.
pub async fn wait_for_report(
    js: &Context,
    settings: &Settings,
    id: &str,
    timeout: Option<Duration>,
) -> Result<Report, WorkerError> {
    let wait = async {
        loop {
            match read_report(js, settings, id).await {
                Ok(report) => return report,
                // The server restarted, or is restarting: its ephemeral consumers are gone.
                Err(_) => tokio::time::sleep(WAIT_RETRY).await,
            }
        }
    };
    match timeout {
        Some(limit) => tokio::time::timeout(limit, wait)
            .await
            .map_err(|_| WorkerError::Timeout(format!("the report of job {id}"))),
        None => Ok(wait.await),
    }
}

/// The report of job `id`: the stored one, else the first that comes on its subject through an
/// ordered consumer; `Err` when the server goes away meanwhile.
async fn read_report(js: &Context, settings: &Settings, id: &str) -> Result<Report, WorkerError> {
    if let Some(report) = stored_report(js, &settings.names, id).await? {
        return Ok(report);
    }
    let stream = js
        .get_stream(settings.names.results_stream())
        .await
        .map_err(|e| WorkerError::nats("opening the results stream")(&e))?;
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            filter_subject: settings.names.results_subject(id),
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(|e| WorkerError::nats("reading the results")(&e))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| WorkerError::nats("reading the results")(&e))?;
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| WorkerError::nats("reading the results")(&e))?;
        let headers = message.headers.as_ref();
        let header = |name| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
        if header(HEADER_KIND) == Some("report") {
            let exit_code = header(HEADER_EXIT)
                .and_then(|e| e.parse().ok())
                .unwrap_or(1);
            return Ok(Report {
                exit_code,
                json: message.payload.clone(),
            });
        }
    }
    Err(WorkerError::Nats {
        what: "reading the results",
        message: "the stream ended".into(),
    })
}
