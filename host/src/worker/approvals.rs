//! `approval = "ask"` on workers: the question published in JetStream under the deployment's prefix,
//! answered from wherever the server is reached, and kept there when the worker that asked goes.
//!
//! The stream `P_approvals` (file storage) holds, for each question, up to three subjects named by the
//! question's digest ([`ApprovalRequest::digest`]: the SHA-256 of exactly what is shown: call ID,
//! tool, input, paths, staged changes or held request):
//!
//! * `P.approvals.ask.<sha256>`: the question ([`FleetQuestion`]: what is shown, the job, the deadline);
//! * `P.approvals.answer.<sha256>`: `yes` or `no`;
//! * `P.approvals.used.<sha256>`: a yes taken by the call it let through.
//!
//! A question is held to its digest: one whose shown request does not hash to the digest its subject
//! names is not listed and cannot be answered (a publisher cannot show one call and have the answer
//! let another through).
//!
//! Each is published only where its subject holds nothing yet (JetStream's expected last subject
//! sequence 0), so the first question, the first answer and the first taker stand: a no is final, and a
//! yes lets one call through. A worker stopped while its question waits hands its job back and the
//! question stays; the worker that runs the job again asks the same digest, finds the question (and its
//! deadline) and any answer given meanwhile. A question not answered by its deadline (the policy's
//! `approval_timeout_seconds` from its first ask) is answered no, by whichever worker sees it first. The
//! same call asked again after its yes was taken is a new question (the digest's subjects are purged).
//! The wait holds the root's lease but not the job's delivery: the job's in-progress acks go on.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::context::{Context, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind, StorageType, Stream};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::WorkerError;
use super::names::Names;
use crate::approval::{ApprovalFuture, ApprovalRequest, Approver, Asking, digest_of};
use crate::digest::Sha256Digest;

/// How long a question and its answers are kept (the longest approval timeout a policy should set).
const KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// What the published question holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetQuestion {
    /// The digest of what is shown, which an answer names.
    pub digest: Sha256Digest,
    /// The job that asked.
    pub job: String,
    /// The call's place in its job's turn, when known (the page lists a job's questions in this
    /// order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// What is shown ([`ApprovalRequest::to_json`]).
    pub request: serde_json::Value,
    /// When it was first asked, in milliseconds since the Unix epoch.
    pub asked_ms: u64,
    /// When it is answered no if nobody answered, in milliseconds since the Unix epoch.
    pub deadline_ms: u64,
}

/// What became of an answer given through [`FleetApprovals::answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetAnswer {
    /// Recorded: it is the question's answer.
    Recorded,
    /// The question had an answer already, which stands (`true`: yes).
    AlreadyAnswered(bool),
    /// No such question is published.
    NotAsked,
    /// The question was past its deadline: answered no.
    Expired,
}

/// A deployment's published questions.
#[derive(Clone)]
pub struct FleetApprovals {
    js: Context,
    names: Names,
}

impl std::fmt::Debug for FleetApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetApprovals")
            .field("stream", &self.names.approvals_stream())
            .finish()
    }
}

impl FleetApprovals {
    /// The questions of the deployment `names` names, creating its stream when missing.
    pub async fn open(js: Context, names: Names) -> Result<FleetApprovals, WorkerError> {
        let approvals = FleetApprovals::new(js, names);
        approvals.ensure_stream().await?;
        Ok(approvals)
    }

    /// The same, its stream not looked at yet (a worker's jobs create it at their first question; a
    /// listing finds nothing while it is not there).
    pub fn new(js: Context, names: Names) -> FleetApprovals {
        FleetApprovals { js, names }
    }

    async fn ensure_stream(&self) -> Result<(), WorkerError> {
        let config = stream::Config {
            name: self.names.approvals_stream(),
            subjects: vec![self.names.approvals_subjects()],
            storage: StorageType::File,
            max_age: KEPT_FOR,
            ..Default::default()
        };
        if let Err(error) = self.js.get_or_create_stream(config).await {
            // Made by another process meanwhile (as in `setup::ensure_streams`).
            self.js
                .get_stream(self.names.approvals_stream())
                .await
                .map_err(|_| WorkerError::nats("creating the approvals stream")(&error))?;
        }
        Ok(())
    }

    /// The approvals stream, as a name: no request is made until it is used.
    async fn stream(&self) -> Result<Stream<()>, WorkerError> {
        self.js
            .get_stream_no_info(self.names.approvals_stream())
            .await
            .map_err(|e| WorkerError::nats("opening the approvals stream")(&e))
    }

    /// Publishes `payload` on `subject` only if the subject holds nothing yet: `false` when it did.
    async fn publish_first(&self, subject: String, payload: Bytes) -> Result<bool, WorkerError> {
        let message = PublishMessage::build()
            .expected_last_subject_sequence(0)
            .payload(payload);
        let acked = self
            .js
            .send_publish(subject, message)
            .await
            .map_err(|e| WorkerError::nats("publishing an approval")(&e))?
            .await;
        match acked {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == PublishErrorKind::WrongLastSequence => Ok(false),
            Err(error) => Err(WorkerError::nats("publishing an approval")(&error)),
        }
    }

    /// What `subject` holds, if anything.
    async fn last(&self, subject: &str) -> Result<Option<Bytes>, WorkerError> {
        match self
            .stream()
            .await?
            .get_last_raw_message_by_subject(subject)
            .await
        {
            Ok(message) => Ok(Some(message.payload)),
            Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(error) => Err(WorkerError::nats("reading an approval")(&error)),
        }
    }

    /// The question published for `digest`, if it is one: it reads as a question and what it shows
    /// hashes to `digest` (a record published under a digest it does not show is no question, and
    /// cannot be answered).
    pub async fn question(
        &self,
        digest: &Sha256Digest,
    ) -> Result<Option<FleetQuestion>, WorkerError> {
        let found = self
            .last(&self.names.approval_subject("ask", digest))
            .await?;
        Ok(found.and_then(|payload| shown_as(digest, &payload)))
    }

    /// The answer given to `digest`, if any (`true`: yes).
    pub async fn answer_of(&self, digest: &Sha256Digest) -> Result<Option<bool>, WorkerError> {
        let found = self
            .last(&self.names.approval_subject("answer", digest))
            .await?;
        Ok(found.map(|payload| payload.as_ref() == b"yes"))
    }

    /// Answers the published question `digest`; the first answer stands, and a question past its
    /// deadline is answered no (as the worker waiting for it would: a yes after the deadline is not
    /// taken, whether or not a worker was there to record the no).
    pub async fn answer(
        &self,
        digest: &Sha256Digest,
        approved: bool,
    ) -> Result<FleetAnswer, WorkerError> {
        let Some(question) = self.question(digest).await? else {
            return Ok(FleetAnswer::NotAsked);
        };
        let expired = now_ms() >= question.deadline_ms;
        let word = if approved && !expired { "yes" } else { "no" };
        let subject = self.names.approval_subject("answer", digest);
        if self.publish_first(subject, Bytes::from(word)).await? {
            return Ok(match expired {
                true => FleetAnswer::Expired,
                false => FleetAnswer::Recorded,
            });
        }
        let standing = self.answer_of(digest).await?.unwrap_or(false);
        Ok(FleetAnswer::AlreadyAnswered(standing))
    }

    /// A subscription that receives each question as it is published (to look at [`Self::waiting`]
    /// again then, rather than every so often).
    pub async fn asked(&self) -> Result<async_nats::Subscriber, WorkerError> {
        self.js
            .client()
            .subscribe(self.names.approval_subject_all("ask"))
            .await
            .map_err(|e| WorkerError::nats("watching for approvals")(&e))
    }

    /// Every published question without an answer yet and within its deadline, oldest first.
    pub async fn waiting(&self) -> Result<Vec<FleetQuestion>, WorkerError> {
        let answered: BTreeSet<Sha256Digest> = self
            .last_per_subject("answer")
            .await?
            .into_iter()
            .map(|(digest, _)| digest)
            .collect();
        let now = now_ms();
        Ok(self
            .last_per_subject("ask")
            .await?
            .into_iter()
            .filter(|(digest, _)| !answered.contains(digest))
            .filter_map(|(digest, payload)| shown_as(&digest, &payload))
            .filter(|question| question.deadline_ms > now)
            .collect())
    }

    /// The last message of each subject of `kind` (`ask`, `answer`), with the digest the subject names,
    /// read through one ordered consumer.
    async fn last_per_subject(
        &self,
        kind: &str,
    ) -> Result<Vec<(Sha256Digest, Bytes)>, WorkerError> {
        let listing = |e: &dyn std::fmt::Display| WorkerError::nats("listing approvals")(e);
        let mut consumer = self
            .stream()
            .await?
            .create_consumer(pull::OrderedConfig {
                filter_subject: self.names.approval_subject_all(kind),
                deliver_policy: DeliverPolicy::LastPerSubject,
                ..Default::default()
            })
            .await
            .map_err(|e| listing(&e))?;
        let mut found = Vec::new();
        if consumer.info().await.map_err(|e| listing(&e))?.num_pending == 0 {
            return Ok(found);
        }
        let mut messages = consumer.messages().await.map_err(|e| listing(&e))?;
        while let Some(message) = messages.next().await {
            let message = message.map_err(|e| listing(&e))?;
            let last = message.info().map_or(true, |info| info.pending == 0);
            let named = message
                .subject
                .rsplit('.')
                .next()
                .and_then(|hex| Sha256Digest::from_hex(hex).ok());
            if let Some(digest) = named {
                found.push((digest, message.payload.clone()));
            }
            if last {
                break;
            }
        }
        Ok(found)
    }

    /// Publishes the question for `request` (asked by `job`, to be answered within `timeout`), or finds
    /// the one published before (its deadline stands); a question whose yes was taken is asked anew.
    async fn ask(
        &self,
        request: &ApprovalRequest<'_>,
        job: &str,
        timeout: Duration,
    ) -> Result<FleetQuestion, WorkerError> {
        self.ensure_stream().await?;
        let digest = request.digest();
        if self
            .last(&self.names.approval_subject("used", &digest))
            .await?
            .is_some()
        {
            let stream = self.stream().await?;
            for kind in ["ask", "answer", "used"] {
                stream
                    .purge()
                    .filter(self.names.approval_subject(kind, &digest))
                    .await
                    .map_err(|e| WorkerError::nats("asking again")(&e))?;
            }
        }
        let asked_ms = now_ms();
        let question = FleetQuestion {
            digest,
            job: job.to_owned(),
            position: request.position,
            request: request.to_json(),
            asked_ms,
            deadline_ms: asked_ms.saturating_add(millis(timeout)),
        };
        let payload = serde_json::to_vec(&question).expect("a question serializes");
        let subject = self.names.approval_subject("ask", &question.digest);
        if self.publish_first(subject, payload.into()).await? {
            return Ok(question);
        }
        Ok(self.question(&question.digest).await?.unwrap_or(question))
    }

    /// Takes the yes of `digest` for one call: `false` when another call took it first.
    async fn take_yes(&self, digest: &Sha256Digest) -> Result<bool, WorkerError> {
        let subject = self.names.approval_subject("used", digest);
        self.publish_first(subject, Bytes::from_static(b"used"))
            .await
    }
}

/// Asks a job's calls through the deployment's published questions.
pub struct FleetApprover {
    approvals: FleetApprovals,
    job: String,
    timeout: Duration,
}

impl FleetApprover {
    /// How often a wait looks for an answer besides when one is published (a published answer wakes
    /// it at once; looking again covers a reconnect that lost that message).
    pub const LOOK_AGAIN: Duration = Duration::from_secs(1);

    /// Asks for `job`'s calls; a question waits at most `timeout` from its first ask. A call whose
    /// question cannot be published or whose answer cannot be read is denied (and that logged).
    pub fn new(approvals: FleetApprovals, job: &str, timeout: Duration) -> FleetApprover {
        FleetApprover {
            approvals,
            job: job.to_owned(),
            timeout,
        }
    }

    async fn decide(&self, request: &ApprovalRequest<'_>) -> Result<bool, WorkerError> {
        let question = self.approvals.ask(request, &self.job, self.timeout).await?;
        tracing::info!(
            "job {}: waiting for the answer to approval {}",
            self.job,
            question.digest
        );
        // Subscribed before the first look, so an answer published after it wakes the wait.
        let subject = self
            .approvals
            .names
            .approval_subject("answer", &question.digest);
        let mut published = self
            .approvals
            .js
            .client()
            .subscribe(subject)
            .await
            .map_err(|e| WorkerError::nats("waiting for an approval")(&e))?;
        loop {
            if let Some(approved) = self.approvals.answer_of(&question.digest).await? {
                return Ok(approved && self.approvals.take_yes(&question.digest).await?);
            }
            let left = question.deadline_ms.saturating_sub(now_ms());
            if left == 0 {
                // Whoever comes first records the no; an answer given just before stands.
                self.approvals.answer(&question.digest, false).await?;
                continue;
            }
            let wait = Duration::from_millis(left).min(Self::LOOK_AGAIN);
            let _ = tokio::time::timeout(wait, published.next()).await;
        }
    }
}

impl Approver for FleetApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            match self.decide(request).await {
                Ok(approved) => approved,
                Err(error) => {
                    tracing::warn!("job {}: approval denied: {error}", self.job);
                    false
                }
            }
        })
    }

    /// Its questions wait in JetStream, to be answered one by one or a job at a time.
    fn asking(&self) -> Asking {
        Asking::Together
    }
}

/// `payload` as the question of `digest`, if it is one: what it shows hashes to `digest`, the digest
/// it names and its subject's.
fn shown_as(digest: &Sha256Digest, payload: &[u8]) -> Option<FleetQuestion> {
    let question: FleetQuestion = serde_json::from_slice(payload).ok()?;
    (question.digest == *digest && digest_of(&question.request) == *digest).then_some(question)
}

fn now_ms() -> u64 {
    u64::try_from(crate::audit::now_ms()).unwrap_or(u64::MAX)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
