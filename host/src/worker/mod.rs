//! Workers: turn jobs pulled from a NATS JetStream work queue, gated as `turngate run` gates a turn,
//! with every call's effect applied exactly once and every job answered.
//!
//! The main types, in the order a job flows through them:
//!
//! * [`job::Job`]: what a submitter enqueues ([`submit::submit`]): the job ID (also its `Nats-Msg-Id`,
//!   so a re-submitted job is dropped), the provider, the root (a plain directory name beneath the
//!   worker's `--roots`) and the raw streamed turn as the payload.
//! * [`run::Worker`]: pulls one job at a time per free slot from the durable pull consumer
//!   ([`setup`]) until it is told to stop, keeps its delivery alive with in-progress acks, takes the root's lease
//!   ([`Lease`](crate::effects::journal::Lease)), and runs the turn through
//!   [`process_turn_recorded`](crate::pipeline::process_turn_recorded) with the job ID as the turn
//!   ID: a call the root's journal already records for that turn is answered from the record, not run.
//! * [`answer::Answer`]: the job's result messages (one per call ID, then the turn report), published
//!   with de-duplication IDs; the job is acked (with confirmation) only once every publish is acked.
//! * [`dead`]: a job delivered `max_deliver` times without an ack is still answered, from the journal
//!   and with the calls that never applied marked not run.
//! * [`approvals`]: a call the policy asks about is asked through JetStream ([`approvals::FleetApprover`]),
//!   answered from anywhere the server is reached, and its question outlives the worker that asked.
//! * [`names::Names`]: every subject, stream and consumer name, from one prefix per tenant.
//!
//! Why this is exactly once per call ID (ARCHITECTURE.md has the argument per crash point): an
//! effect and the call's result are recorded together in the journal, atomically with respect to a
//! crash (intent, move, recovery); the lookup, run and apply of a call happen under the root's lease;
//! a redelivered job replays what was applied; and results are de-duplicated by their message IDs.

pub mod answer;
pub mod approvals;
pub mod dead;
pub mod job;
pub mod names;
pub mod run;
pub mod setup;
pub mod submit;

use crate::effects::EffectError;

/// Why a worker or a submitter could not go on. Nothing is acked after such an error: the job is
/// delivered again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// NATS or JetStream failed (connection, stream, consumer, publish, ack).
    #[error("NATS: {what}: {message}")]
    Nats {
        /// What was being done.
        what: &'static str,
        /// What the client said.
        message: String,
    },
    /// The root's journal or state directory could not be used.
    #[error(transparent)]
    Effects(#[from] EffectError),
    /// Waiting for something took longer than allowed.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// A setting is not usable.
    #[error("{0}")]
    Config(String),
    /// The worker was told to stop while it worked on the job: the running call stopped and applied
    /// nothing, and the job goes back to the queue for another worker (which replays what applied).
    #[error("the worker is stopping")]
    Stopping,
}

impl WorkerError {
    pub(crate) fn nats(what: &'static str) -> impl FnOnce(&dyn std::fmt::Display) -> WorkerError {
        move |error| WorkerError::Nats {
            what,
            message: error.to_string(),
        }
    }
}
