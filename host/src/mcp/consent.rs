//! `approval = "ask"` put to the user through the MCP client.
//!
//! The question is the one `--review` asks on a terminal: for a call that can change files, after it
//! ran in its staged view, "apply these changes?" with the change set's unified diff; for a call that
//! only reads, before it runs. How it reaches the user depends on the client:
//!
//! * A client on a protocol revision before 2026-07-28 that declares form elicitation gets an
//!   `elicitation/create` request while the call waits ([`Consent::Elicit`]).
//! * A client on 2026-07-28 or later, where a server may not send requests, gets an
//!   `input_required` result (SEP-2322) carrying the same elicitation ([`Consent::Capture`]); the
//!   call applied nothing. Its retry carries the user's answer and the request state, a handle to what
//!   was shown, kept here ([`PendingApprovals`]). On yes the call runs again, and its changes apply
//!   only if their diff is exactly the one the user saw ([`Consent::Answered`]); otherwise (a file
//!   changed in between) nothing applies and the result says so.
//! * A client that declares no form elicitation cannot be asked: the call is denied ([`Consent::Nobody`]).
//! * A server started with `--approve-in console` asks none of them: the question is recorded in the
//!   root and answered from `turngate console` while the call waits ([`Consent::Recorded`]).
//!
//! Accept means yes unless the form's `apply` field is `false`; decline, cancel, a failed request or
//! a cancelled call mean no.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde_json::json;

use crate::approval::durable::DurableApprover;
use crate::approval::{ApprovalFuture, ApprovalRequest, Approver};
use crate::audit::sha256_text;
use crate::cancel::Cancel;
use crate::outcome::{CallError, CallOutcome};

/// The key of the one input request in an `input_required` result.
pub const APPROVAL_INPUT: &str = "approval";

/// How long an `input_required` approval waits for its retry.
pub const PENDING_APPROVAL_TTL: Duration = Duration::from_secs(600);

/// Most approvals waiting for their retry at once; past it the oldest is forgotten.
pub const MAX_PENDING_APPROVALS: usize = 256;

/// How one call's approval is obtained.
pub(super) enum Consent {
    /// Nobody can be asked: calls that need approval are denied.
    Nobody,
    /// Ask with an `elicitation/create` request while the call waits.
    Elicit(Eliciting),
    /// Record the question and answer `input_required`.
    Capture(Capturing),
    /// The user said yes to a recorded question: approve exactly the changes they saw.
    Answered(Answered),
    /// Ask through the root's recorded approvals while the call waits.
    Recorded(DurableApprover),
}

/// How a call ended, for the client.
pub(super) enum Finished {
    /// The call's outcome.
    Answered(CallOutcome),
    /// The client must ask the user and retry.
    InputRequired(InputRequiredResult),
}

impl Consent {
    /// The consent for one `tools/call` request. `Err` is a denial that needs no run: the retry of
    /// an approval the user declined, or one this server does not know.
    pub(super) fn for_request(
        pending: &PendingApprovals,
        recorded: Option<&DurableApprover>,
        context: &RequestContext<RoleServer>,
        cancel: &Cancel,
        tool: &str,
        raw_input: &str,
        request: &CallToolRequestParams,
    ) -> Result<Consent, String> {
        if let Some(state) = &request.request_state {
            let asked = pending.take(state).ok_or_else(|| {
                format!(
                    "this retry answers an approval this server does not know (it waits {} s, and \
                     not across restarts): call `{tool}` again",
                    PENDING_APPROVAL_TTL.as_secs()
                )
            })?;
            if asked.tool != tool || asked.input != raw_input {
                return Err(format!(
                    "this retry's tool or arguments differ from the `{}` call the approval was asked \
                     for: call again",
                    asked.tool
                ));
            }
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(APPROVAL_INPUT))
                .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok());
            if !answer.as_ref().is_some_and(accepted) {
                let what = if asked.about_changes {
                    "its changes were not applied"
                } else {
                    "not run"
                };
                return Err(format!(
                    "the user did not give approval for this `{tool}` call: {what}"
                ));
            }
            return Ok(Consent::Answered(Answered {
                diff_sha256: asked.diff_sha256,
                differed: AtomicBool::new(false),
            }));
        }
        if let Some(recorded) = recorded {
            return Ok(Consent::Recorded(recorded.clone()));
        }
        if !asks_forms(context) {
            return Ok(Consent::Nobody);
        }
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        Ok(if modern {
            Consent::Capture(Capturing::default())
        } else {
            Consent::Elicit(Eliciting {
                peer: context.peer.clone(),
                cancel: cancel.clone(),
            })
        })
    }

    /// The approver for the call's context.
    pub(super) fn approver(&self) -> Option<&dyn Approver> {
        match self {
            Consent::Nobody => None,
            Consent::Elicit(approver) => Some(approver),
            Consent::Capture(approver) => Some(approver),
            Consent::Answered(approver) => Some(approver),
            Consent::Recorded(approver) => Some(approver),
        }
    }

    /// What the client gets once the call ran with [`Consent::approver`].
    pub(super) fn finish(
        self,
        pending: &PendingApprovals,
        tool: &str,
        raw_input: &str,
        mut outcome: CallOutcome,
    ) -> Finished {
        let denied = matches!(outcome.result, Err(CallError::Approval(_)));
        match self {
            Consent::Capture(capturing) => {
                let captured = capturing
                    .captured
                    .into_inner()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(question) = captured {
                    let state = pending.insert(
                        tool,
                        raw_input,
                        question.about_changes,
                        question.diff_sha256,
                    );
                    let form = elicitation(question.message, question.about_changes);
                    return Finished::InputRequired(input_required(form, state));
                }
            }
            Consent::Answered(answered) if denied && answered.differed.load(Ordering::SeqCst) => {
                outcome.result = Err(CallError::Approval(format!(
                    "the changes of this `{tool}` call differ from those the user approved (a file \
                     changed since): nothing was applied; call again"
                )));
            }
            Consent::Nobody if denied => {
                outcome.result = Err(CallError::Approval(format!(
                    "`{tool}` needs the user's approval, and this client cannot be asked (it declares \
                     no form elicitation): nothing was applied"
                )));
            }
            _ => {}
        }
        Finished::Answered(outcome)
    }
}

/// Asks with `elicitation/create` while the call waits; a cancelled call stops waiting.
pub(super) struct Eliciting {
    peer: Peer<RoleServer>,
    cancel: Cancel,
}

impl Approver for Eliciting {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let question = elicitation(question_text(request), request.changes.is_some());
            tokio::select! {
                answer = self.peer.create_elicitation(question) => {
                    answer.is_ok_and(|answer| accepted(&answer))
                }
                () = self.cancel.cancelled() => false,
            }
        })
    }
}

/// Records the question and says no, so the call applies nothing.
#[derive(Default)]
pub(super) struct Capturing {
    captured: Mutex<Option<Question>>,
}

struct Question {
    message: String,
    about_changes: bool,
    diff_sha256: String,
}

impl Approver for Capturing {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let question = Question {
            message: question_text(request),
            about_changes: request.changes.is_some(),
            diff_sha256: approval_digest(request),
        };
        *self
            .captured
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(question);
        Box::pin(async { false })
    }
}

/// Says yes to exactly the diff the user approved.
pub(super) struct Answered {
    diff_sha256: String,
    differed: AtomicBool,
}

impl Approver for Answered {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let same = approval_digest(request) == self.diff_sha256;
        self.differed.store(!same, Ordering::SeqCst);
        Box::pin(async move { same })
    }
}

/// Approvals asked with `input_required`, waiting for their retry.
#[derive(Default)]
pub(super) struct PendingApprovals {
    waiting: Mutex<HashMap<String, Asked>>,
}

struct Asked {
    tool: String,
    input: String,
    about_changes: bool,
    diff_sha256: String,
    at: Instant,
}

impl PendingApprovals {
    /// Keeps a question; returns its request state.
    fn insert(&self, tool: &str, input: &str, about_changes: bool, diff_sha256: String) -> String {
        let mut waiting = self.lock();
        waiting.retain(|_, asked| asked.at.elapsed() < PENDING_APPROVAL_TTL);
        if waiting.len() >= MAX_PENDING_APPROVALS
            && let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, asked)| asked.at)
                .map(|(state, _)| state.clone())
        {
            waiting.remove(&oldest);
        }
        let state = format!("{:032x}", fastrand::u128(..));
        waiting.insert(
            state.clone(),
            Asked {
                tool: tool.to_owned(),
                input: input.to_owned(),
                about_changes,
                diff_sha256,
                at: Instant::now(),
            },
        );
        state
    }

    /// The question a retry answers, once.
    fn take(&self, state: &str) -> Option<Asked> {
        self.lock()
            .remove(state)
            .filter(|asked| asked.at.elapsed() < PENDING_APPROVAL_TTL)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Asked>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether the client declared form elicitation (a declaration with neither mode means form).
fn asks_forms(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|modes| modes.form.is_some() || modes.url.is_none())
}

fn accepted(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|content| content.get("apply"))
            .and_then(serde_json::Value::as_bool)
            != Some(false)
}

/// What an answer approves: the diff, and the network request (method, URL, body digest) if there
/// is one, so a retry's yes covers exactly what the user saw.
fn approval_digest(request: &ApprovalRequest<'_>) -> String {
    match request.network {
        Some(n) => sha256_text(&format!(
            "{}\n{} {} {}",
            request.diff, n.method, n.url, n.body_sha256
        )),
        None => sha256_text(request.diff),
    }
}

/// What the user is asked: the tool, the call ID, and the diff (or, for a call that only reads, what
/// it would read).
fn question_text(request: &ApprovalRequest<'_>) -> String {
    let call = match request.id {
        Some(id) => format!("`{}` call {id}", request.tool),
        None => format!("`{}` call", request.tool),
    };
    if let Some(network) = request.network {
        return format!(
            "turngate: let this {call} send {} {}?\n\nBody: {} bytes, SHA-256 {}{}",
            network.method,
            network.url,
            network.body_bytes,
            network.body_sha256,
            network
                .body_start
                .as_deref()
                .map(|start| format!("\n\n{start}"))
                .unwrap_or_default()
        );
    }
    match request.changes {
        Some(_) => format!(
            "turngate: apply the changes of this {call}?\n\n{}",
            request.diff
        ),
        None => {
            let paths: Vec<String> = request.paths.iter().map(|(p, _)| p.to_string()).collect();
            format!(
                "turngate: run this {call}, which reads {}?\n\nInput: {}",
                if paths.is_empty() {
                    "no files".to_owned()
                } else {
                    paths.join(", ")
                },
                request.input
            )
        }
    }
}

/// The form: one boolean, `apply`, ticked by default.
fn elicitation(message: String, about_changes: bool) -> ElicitRequestParams {
    let (title, description) = if about_changes {
        ("Apply", "Apply the changes shown")
    } else {
        ("Run", "Let the call run and read what it names")
    };
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "apply": {
                "type": "boolean",
                "title": title,
                "description": description,
                "default": true
            }
        }
    }))
    .expect("the approval form is a valid elicitation schema");
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

fn input_required(form: ElicitRequestParams, state: String) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_answers_once_and_the_oldest_goes_past_the_bound() {
        let pending = PendingApprovals::default();
        let first = pending.insert("write_file", "{}", true, "d0".into());
        let states: Vec<String> = (1..MAX_PENDING_APPROVALS)
            .map(|n| pending.insert("write_file", "{}", true, format!("d{n}")))
            .collect();
        // Full: the next question pushes out the oldest.
        let last = pending.insert("write_file", "{}", true, "last".into());
        assert!(pending.take(&first).is_none());
        assert_eq!(pending.lock().len(), MAX_PENDING_APPROVALS);
        let asked = pending.take(&states[0]).expect("kept");
        assert_eq!(asked.diff_sha256, "d1");
        assert!(pending.take(&states[0]).is_none(), "a state answers once");
        assert_eq!(pending.take(&last).unwrap().diff_sha256, "last");
    }
}
