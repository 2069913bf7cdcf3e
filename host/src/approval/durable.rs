//! [`DurableApprover`]: asks by recording the question in the root and waits for its answer there,
//! so neither is lost with the process that asked.
//!
//! A question is answered from another process (`turngate console`, or a script through its API) or
//! from this one ([`PendingApprovals::answer`]). The wait looks for the answer every
//! [`DurableApprover::LOOK_EVERY`], and again at once when this process answers. When the process that
//! asked dies, its question stays: the same call asked again (the turn run again: the same call ID,
//! input and staged changes, so the same digest) finds the answer given meanwhile, and a yes is taken
//! once ([`PendingApprovals::take_yes`]). A question not answered by its deadline (the policy's
//! `approval_timeout_seconds`, counted from its first ask) is denied, and the denial recorded. A wait
//! that ends otherwise (the call cancelled) takes its question back.

use std::sync::Arc;
use std::time::Duration;

use super::pending::{
    Answer, ApprovalError, PendingApproval, PendingApprovals, deadline_ms, now_ms,
};
use super::{ApprovalFuture, ApprovalRequest, Approver, Asking};
use crate::digest::Sha256Digest;
use crate::effects::diff::DiffSize;

/// Asks through the root's recorded approvals.
#[derive(Debug, Clone)]
pub struct DurableApprover {
    approvals: Arc<PendingApprovals>,
    timeout: Duration,
    answered: Arc<tokio::sync::Notify>,
    /// What went wrong with the store the last time, for the caller to report (the approver itself
    /// answers no).
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl DurableApprover {
    /// How often a wait looks for an answer another process recorded.
    pub const LOOK_EVERY: Duration = Duration::from_millis(20);

    /// Asks through `approvals`; a question waits at most `timeout` from its first ask.
    pub fn new(approvals: PendingApprovals, timeout: Duration) -> DurableApprover {
        DurableApprover {
            approvals: Arc::new(approvals),
            timeout,
            answered: Arc::new(tokio::sync::Notify::new()),
            failure: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    /// The store it asks through.
    pub fn approvals(&self) -> &PendingApprovals {
        &self.approvals
    }

    /// Answers `digest` from this process (as [`PendingApprovals::answer`]) and wakes the wait at once.
    pub fn answer(&self, digest: &Sha256Digest, approved: bool) -> Result<Answer, ApprovalError> {
        let answer = self.approvals.answer(digest, approved);
        self.answered.notify_waiters();
        answer
    }

    /// Why the last question could not be recorded or its answer read, if it could not (it was then
    /// denied).
    pub fn take_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn decide(&self, request: &ApprovalRequest<'_>) -> Result<bool, ApprovalError> {
        let shown = request.to_json();
        let digest = super::digest_of(&shown);
        let question = PendingApproval {
            digest,
            asked_ms: now_ms(),
            deadline_ms: deadline_ms(self.timeout),
            turn: request.turn.map(str::to_owned),
            position: request.position,
            request: shown,
        };
        // However the wait ends here (answered, denied, failed, or dropped by a cancel), nobody waits
        // for the question any more; a process that dies leaves it, for the same call run again.
        let _take_back = TakeBack {
            approvals: &self.approvals,
            digest,
        };
        let mut standing: Option<PendingApproval> = None;
        loop {
            let woken = self.answered.notified();
            if let Some(answer) = self.approvals.answer_of(&digest)? {
                return match answer.approved {
                    true => self.approvals.take_yes(&digest),
                    false => {
                        self.approvals.withdraw(&digest)?;
                        Ok(false)
                    }
                };
            }
            // Asked once; again, as first asked, only if another process asking the same took it
            // back (the record is not read again while it stands).
            let asked = match standing.take() {
                Some(asked) if self.approvals.is_asked(&digest)? => asked,
                Some(asked) => self.approvals.ask(&asked)?,
                None => self.approvals.ask(&question)?,
            };
            let deadline_ms = asked.deadline_ms;
            standing = Some(asked);
            if now_ms() > deadline_ms {
                let answer = self.approvals.expire(&digest)?;
                return match answer.approved {
                    true => self.approvals.take_yes(&digest),
                    false => {
                        self.approvals.withdraw(&digest)?;
                        Ok(false)
                    }
                };
            }
            let _ = tokio::time::timeout(Self::LOOK_EVERY, woken).await;
        }
    }
}

/// Takes the question `digest` back when dropped.
struct TakeBack<'a> {
    approvals: &'a PendingApprovals,
    digest: Sha256Digest,
}

impl Drop for TakeBack<'_> {
    fn drop(&mut self) {
        // Best effort: a question left behind is denied at its deadline.
        let _ = self.approvals.withdraw(&self.digest);
    }
}

impl Approver for DurableApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            match self.decide(request).await {
                Ok(yes) => yes,
                Err(e) => {
                    *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                    false
                }
            }
        })
    }

    /// Its questions wait in the root, to be answered one by one or a turn at a time.
    fn asking(&self) -> Asking {
        Asking::Together
    }

    /// The console shows its questions' diffs a page of hunks at a time.
    fn diff_size(&self) -> DiffSize {
        DiffSize::Paged
    }
}
