//! The streams and consumers of a deployment, created by whichever worker or submitter comes first.
//!
//! * `P_jobs`: work-queue retention (a job leaves the stream when acked), file storage,
//!   de-duplication of submissions by job ID over [`Settings::duplicate_window`];
//! * `P_results`: limits retention without an age limit (a job's stored report is its answer for
//!   good: see `answer`), file storage, de-duplication of result messages over the same window;
//! * `P_dead`: work-queue retention, file storage, capturing the max-deliveries advisories;
//! * the durable pull consumer `workers` on `P_jobs`: explicit acks, [`Settings::ack_wait`] (which a
//!   worker extends with in-progress acks while it works on a job), [`Settings::max_deliver`], and
//!   one on `P_dead` for the dead letters.
//!
//! An existing stream or consumer is used as it is: changing a deployment's settings is an operator's
//! job (`nats stream edit`, `nats consumer edit`).

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::context::Context;
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};

use super::WorkerError;
use super::names::{CONSUMER, Names};

/// A deployment's delivery settings. Defaults: 30 s ack wait, 5 deliveries, a 10-minute
/// de-duplication window.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The names.
    pub names: Names,
    /// How long a delivery may go without an ack (or an in-progress ack) before JetStream delivers
    /// the job again.
    pub ack_wait: Duration,
    /// Deliveries of one job before it is dead-lettered.
    pub max_deliver: i64,
    /// How long JetStream remembers message IDs. It must exceed the longest time between a job's
    /// first result and its last redelivery (about `max_deliver` × `ack_wait` plus the longest job),
    /// or a result may be stored twice.
    pub duplicate_window: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            names: Names::default(),
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
            duplicate_window: Duration::from_secs(600),
        }
    }
}

/// Creates the three streams when missing.
pub async fn ensure_streams(js: &Context, settings: &Settings) -> Result<(), WorkerError> {
    let names = &settings.names;
    let configs = [
        stream::Config {
            name: names.jobs_stream(),
            subjects: vec![names.jobs_subject()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            duplicate_window: settings.duplicate_window,
            ..Default::default()
        },
        stream::Config {
            name: names.results_stream(),
            subjects: vec![names.results_subjects()],
            retention: RetentionPolicy::Limits,
            storage: StorageType::File,
            duplicate_window: settings.duplicate_window,
            // Kept until an operator removes them: a job ID is answered from its report for good.
            max_age: Duration::ZERO,
            ..Default::default()
        },
        stream::Config {
            name: names.dead_stream(),
            subjects: vec![names.dead_subject()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            ..Default::default()
        },
    ];
    for config in configs {
        let name = config.name.clone();
        if let Err(error) = js.get_or_create_stream(config).await {
            // Another process (a worker, a submitter) may have made it between this one's look and
            // its create, which JetStream then refuses (as overlapping subjects, or as a name in use):
            // found now, it is there. A stream that is still missing keeps the create's error.
            js.get_stream(&name)
                .await
                .map_err(|_| WorkerError::nats("creating a stream")(&error))?;
        }
    }
    Ok(())
}

/// The workers' consumer on the jobs stream.
pub async fn jobs_consumer(js: &Context, settings: &Settings) -> Result<PullConsumer, WorkerError> {
    consumer(
        js,
        &settings.names.jobs_stream(),
        settings.ack_wait,
        settings.max_deliver,
    )
    .await
}

/// The workers' consumer on the dead-letter stream (delivered until answered).
pub async fn dead_consumer(js: &Context, settings: &Settings) -> Result<PullConsumer, WorkerError> {
    consumer(js, &settings.names.dead_stream(), settings.ack_wait, -1).await
}

async fn consumer(
    js: &Context,
    stream: &str,
    ack_wait: Duration,
    max_deliver: i64,
) -> Result<PullConsumer, WorkerError> {
    let stream = js
        .get_stream(stream)
        .await
        .map_err(|e| WorkerError::nats("opening a stream")(&e))?;
    stream
        .get_or_create_consumer(
            CONSUMER,
            pull::Config {
                durable_name: Some(CONSUMER.to_owned()),
                ack_policy: AckPolicy::Explicit,
                ack_wait,
                max_deliver,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| WorkerError::nats("creating the consumer")(&e))
}
