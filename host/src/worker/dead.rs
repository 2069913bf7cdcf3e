//! Dead letters: a job JetStream delivered `max_deliver` times without an ack is still answered.
//!
//! JetStream stops delivering such a job and publishes a max-deliveries advisory, which the `P_dead`
//! stream captures (so an advisory published while no worker runs is kept). A worker pulls each
//! advisory, reads the job from the jobs stream by its sequence (it is still there: it was never
//! acked), answers it under the root's lease from the journal alone (calls recorded for the job are
//! answered from their records, the others are errors, not run; nothing runs), publishes the answer
//! under the same message IDs as any other attempt (so a report that did get out is not doubled),
//! deletes the job from the jobs stream and acks the advisory. A job with a stored report was
//! answered already: it is only deleted.

use std::rc::Rc;

use async_nats::jetstream;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::Context;
use serde::Deserialize;

use super::WorkerError;
use super::answer::{Answer, stored_report};
use super::job::Job;
use super::run::{Mode, Worker, next_message, with_progress};

/// The part of JetStream's `io.nats.jetstream.advisory.v1.max_deliver` advisory a worker needs.
#[derive(Debug, Deserialize)]
struct MaxDeliveries {
    stream_seq: u64,
    deliveries: u64,
}

/// Pulls and answers dead letters until the connection is gone for good.
pub(crate) async fn answer_dead_letters(worker: Rc<Worker>, js: Context, dead: PullConsumer) {
    loop {
        match next_message(&dead).await {
            Ok(Some(message)) => {
                let every = worker.settings().ack_wait / 3;
                let answered = with_progress(&message, every, answer(&worker, &js, &message)).await;
                if let Err(error) = answered {
                    worker.log(&format!("dead letter left for later: {error}"));
                }
            }
            Ok(None) => {}
            Err(error) => {
                worker.log(&format!("pulling a dead letter: {error}"));
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}

async fn answer(
    worker: &Worker,
    js: &Context,
    message: &jetstream::Message,
) -> Result<(), WorkerError> {
    let names = &worker.settings().names;
    let advisory: Option<MaxDeliveries> = serde_json::from_slice(&message.payload).ok();
    if let Some(advisory) = advisory {
        let jobs = js
            .get_stream(names.jobs_stream())
            .await
            .map_err(|e| WorkerError::nats("opening the jobs stream")(&e))?;
        // Gone: acked after all (a late ack of the last delivery), or deleted by a dead letter before.
        if let Ok(raw) = jobs.get_raw_message(advisory.stream_seq).await {
            let job = Job::from_parts(Some(&raw.headers), raw.payload);
            let id = match &job {
                Ok(job) => Some(job.id.as_str()),
                Err((id, _)) => id.as_deref(),
            };
            let answered = match id {
                Some(id) => stored_report(js, names, id).await?.is_some(),
                None => false,
            };
            if !answered {
                let answer = match job {
                    Ok(job) => {
                        worker
                            .answer(js, &job, Mode::DeadLetter(advisory.deliveries))
                            .await?
                    }
                    Err((id, error)) => {
                        Answer::refused(names, id.as_deref(), raw.sequence, &error.to_string())
                    }
                };
                answer.publish(js).await?;
            }
            jobs.delete_message(advisory.stream_seq)
                .await
                .map_err(|e| WorkerError::nats("deleting a dead job")(&e))?;
            worker.log(&format!(
                "job #{} dead-lettered after {} deliveries, answered",
                advisory.stream_seq, advisory.deliveries
            ));
        }
    }
    message
        .double_ack()
        .await
        .map_err(|e| WorkerError::nats("acking a dead letter")(&e))
}
