//! The turn gate: a decoded [`Turn`] in, one checked result per call out.
//!
//! Nothing runs unless the turn ended the provider's normal way ([`TurnStatus::Completed`]); otherwise
//! every call is `not_run` and the history is empty. For a completed turn each call, in order, goes
//! through the per-call gate ([`check_call`]) and, if approved, the sandbox; a refused or failed call gets
//! an error result naming the step and the reason, and the other calls still run. A client item that is
//! not a function call ([`CallKind`]) skips the gate: no loaded tool runs that kind of item, so it gets an
//! error result saying so (step `kind`), answered in its own protocol shape.
//!
//! [`process_turn_with`] adds [`TurnHooks`]: an [`Approver`] consulted before each gate-approved call
//! of a tool the policy marks `approval = "ask"` (no approver: denied), and a [`Cancel`] signal checked
//! between calls (a call that has started finishes; the calls after it get a `cancelled` error result,
//! so every call ID is still answered exactly once).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::audit::{
    AuditRecord, CallRecord, PathRecord, TurnRecord, now_ms, sha256_file, sha256_text,
};
use crate::descriptor::Access;
use crate::gate::check_call;
use crate::history::{ToolResult, render};
use crate::outcome::{CallError, RunError};
use crate::policy::Policy;
use crate::root::Root;
use crate::toolbox::Toolbox;
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

/// What the turn gate does besides gating.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnOptions {
    /// Produce audit records (this hashes every approved path before and after its call).
    pub audit: bool,
}

/// One call waiting for the user's approval: the gate has approved it, and its tool is marked
/// `approval = "ask"` in the policy.
#[derive(Debug, Clone)]
pub struct ApprovalRequest<'a> {
    /// The provider's call ID.
    pub id: Option<&'a str>,
    /// The tool.
    pub tool: &'a str,
    /// The input exactly as the model sent it (already parsed strictly and schema-checked).
    pub input: &'a str,
    /// The paths the call would touch (relative to the root, normalized) and whether it writes them.
    pub paths: Vec<(String, Access)>,
}

/// The future an [`Approver`] returns: `true` lets the call run.
pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Asks the user before a call of a tool marked `approval = "ask"`. Answering `false` denies the call
/// (its result tells the model so); the other calls of the turn are unaffected.
pub trait Approver: Send + Sync {
    /// Decides one call.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a>;
}

/// Approves everything, for embedders whose users approved in advance (and for tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async { true })
    }
}

/// A cancellation signal shared by clones: set once (say on Ctrl-C), checked between calls and
/// between requests. Setting it never interrupts a call that is running.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Cancel {
    /// A signal that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Sets the signal and wakes every waiter.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether the signal is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Resolves once the signal is set.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// What [`process_turn_with`] consults besides the gate.
#[derive(Clone, Copy, Default)]
pub struct TurnHooks<'a> {
    /// Asked before each call of a tool marked `approval = "ask"`; `None` denies such calls.
    pub approver: Option<&'a dyn Approver>,
    /// Checked before each call; once set, the remaining calls are answered `cancelled` and not run.
    pub cancel: Option<&'a Cancel>,
}

impl std::fmt::Debug for TurnHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnHooks")
            .field("approver", &self.approver.is_some())
            .field("cancel", &self.cancel)
            .finish()
    }
}

/// A call's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Ran and succeeded.
    Ok,
    /// Refused by the gate, or ran and failed.
    Error,
    /// Not run because the turn did not complete.
    NotRun,
}

impl CallStatus {
    /// `ok`, `error` or `not_run`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Error => "error",
            CallStatus::NotRun => "not_run",
        }
    }
}

/// The verdict on one call of a turn.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    /// What the call asked for: `function` for a tool call, or the kind of client item.
    pub kind: CallKind,
    /// The provider's call ID.
    pub id: Option<String>,
    /// The tool name as the model gave it.
    pub name: String,
    /// The verdict.
    pub status: CallStatus,
    /// Why it is an error or not run; `None` when ok.
    pub reason: Option<String>,
    /// The gate step or failure kind behind an error (see [`CallRecord::step`]).
    #[serde(skip)]
    pub step: Option<&'static str>,
    /// The tool's output when ok.
    #[serde(skip)]
    pub output: Option<String>,
}

/// Everything the turn gate decided.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The decoded turn (its ending is the turn's status).
    pub turn: Turn,
    /// One verdict per call, in stream order.
    pub calls: Vec<CallReport>,
    /// The history in the provider's protocol: the assistant turn, then the results. Empty unless the
    /// turn completed.
    pub history: Vec<Value>,
    /// Audit records (when asked for): the turn, then each call.
    pub audit: Vec<AuditRecord>,
}

impl TurnReport {
    /// Whether the turn completed and every call succeeded (or there were none).
    pub fn all_ok(&self) -> bool {
        self.turn.is_completed() && self.calls.iter().all(|c| c.status == CallStatus::Ok)
    }

    /// The report as the CLI prints it:
    /// `{"turn": {"status", "stop_reason", "detail"}, "calls": [{"kind", "id", "name", "status", "reason"}],
    /// "history": [...]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "turn": {
                "status": self.turn.ending.status.as_str(),
                "stop_reason": self.turn.ending.stop_reason,
                "detail": self.turn.ending.detail,
            },
            "calls": self.calls,
            "history": self.history,
        })
    }
}

/// Runs the turn gate on a decoded turn (no approver: calls of tools marked `approval = "ask"` are
/// denied; no cancellation).
pub async fn process_turn(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    turn: Turn,
    options: TurnOptions,
) -> TurnReport {
    process_turn_with(toolbox, root, policy, turn, options, TurnHooks::default()).await
}

/// Runs the turn gate on a decoded turn, consulting `hooks` before each call.
pub async fn process_turn_with(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    turn: Turn,
    options: TurnOptions,
    hooks: TurnHooks<'_>,
) -> TurnReport {
    let mut calls = Vec::with_capacity(turn.calls.len());
    let mut call_records = Vec::new();
    let mut results = Vec::new();
    if !turn.is_completed() {
        let reason = format!("the turn ended {}: nothing runs", turn.ending.status);
        for call in &turn.calls {
            let report = CallReport {
                kind: call.kind,
                id: call.id.clone(),
                name: call.name.clone(),
                status: CallStatus::NotRun,
                reason: Some(reason.clone()),
                step: None,
                output: None,
            };
            if options.audit {
                call_records.push(call_record(call, &report, None, Vec::new()));
            }
            calls.push(report);
        }
    } else {
        for (position, call) in turn.calls.iter().enumerate() {
            let (report, duration, paths) = if hooks.cancel.is_some_and(Cancel::is_cancelled) {
                let report = CallReport {
                    kind: call.kind,
                    id: call.id.clone(),
                    name: call.name.clone(),
                    status: CallStatus::Error,
                    reason: Some("cancelled by the user before this call: not run".into()),
                    step: Some("cancelled"),
                    output: None,
                };
                (report, None, Vec::new())
            } else if call.kind != CallKind::Function {
                (not_run_here(call), None, Vec::new())
            } else {
                run_call(toolbox, root, policy, turn.provider, call, options, hooks).await
            };
            results.push(ToolResult {
                call: position,
                content: report
                    .output
                    .clone()
                    .or_else(|| report.reason.clone())
                    .unwrap_or_default(),
                is_error: report.status != CallStatus::Ok,
            });
            if options.audit {
                call_records.push(call_record(call, &report, duration, paths));
            }
            calls.push(report);
        }
    }
    let history = render(&turn, &results);
    let mut audit = Vec::new();
    if options.audit {
        let count = |status| calls.iter().filter(|c| c.status == status).count();
        audit.push(AuditRecord::Turn(TurnRecord {
            time_ms: now_ms(),
            provider: turn.provider.as_str(),
            status: turn.ending.status.as_str(),
            stop_reason: turn.ending.stop_reason.clone(),
            detail: turn.ending.detail.clone(),
            calls: calls.len(),
            ok: count(CallStatus::Ok),
            error: count(CallStatus::Error),
            not_run: count(CallStatus::NotRun),
        }));
        audit.extend(call_records.into_iter().map(AuditRecord::Call));
    }
    debug_assert!(turn.ending.status == TurnStatus::Completed || history.is_empty());
    TurnReport {
        turn,
        calls,
        history,
        audit,
    }
}

/// Gates and runs one call of a completed turn.
async fn run_call(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    provider: Provider,
    call: &RawCall,
    options: TurnOptions,
    hooks: TurnHooks<'_>,
) -> (CallReport, Option<Duration>, Vec<PathRecord>) {
    let error = |step: &'static str, reason: String| CallReport {
        kind: call.kind,
        id: call.id.clone(),
        name: call.name.clone(),
        status: CallStatus::Error,
        reason: Some(reason),
        step: Some(step),
        output: None,
    };
    // Gemini matches results by order; every other protocol needs the ID to answer the call.
    if call.id.is_none() && provider != Provider::Gemini {
        return (
            error(
                "id",
                "the call has no ID, so no result could be returned for it: not run".into(),
            ),
            None,
            Vec::new(),
        );
    }
    let approved = match check_call(toolbox, root, policy, &call.name, &call.raw_input) {
        Ok(approved) => approved,
        Err(refusal) => {
            let reason = format!("refused at {}: {refusal}", refusal.step());
            return (error(refusal.step(), reason), None, Vec::new());
        }
    };
    if policy.needs_approval(&call.name) {
        let request = ApprovalRequest {
            id: call.id.as_deref(),
            tool: &call.name,
            input: &call.raw_input,
            paths: approved
                .paths()
                .iter()
                .map(|p| (p.path.clone(), p.access))
                .collect(),
        };
        let approved_by_user = match hooks.approver {
            Some(approver) => approver.approve(&request).await,
            None => false,
        };
        if !approved_by_user {
            let reason = match hooks.approver {
                Some(_) => format!(
                    "the user did not give approval for this `{}` call: not run",
                    call.name
                ),
                None => format!(
                    "the policy asks for approval of `{}` and there is nobody to ask: not run",
                    call.name
                ),
            };
            return (error("approval", reason), None, Vec::new());
        }
    }
    let hashes_before: Vec<Option<String>> = if options.audit {
        approved
            .paths()
            .iter()
            .map(|p| sha256_file(root, &p.path))
            .collect()
    } else {
        Vec::new()
    };
    let outcome = toolbox.run(root, &approved).await;
    let paths = if options.audit {
        approved
            .paths()
            .iter()
            .zip(hashes_before)
            .map(|(p, before)| PathRecord {
                path: p.path.clone(),
                access: match p.access {
                    Access::Read => "read",
                    Access::Write => "write",
                },
                sha256_before: before,
                sha256_after: sha256_file(root, &p.path),
            })
            .collect()
    } else {
        Vec::new()
    };
    let report = match outcome.result {
        Ok(output) => CallReport {
            kind: call.kind,
            id: call.id.clone(),
            name: call.name.clone(),
            status: CallStatus::Ok,
            reason: None,
            step: None,
            output: Some(output),
        },
        Err(CallError::Run(RunError::Tool(e))) => error("tool", e.to_string()),
        Err(CallError::Run(e)) => error(e.kind(), e.to_string()),
        Err(CallError::Gate(e)) => error(e.step(), e.to_string()),
    };
    (report, Some(outcome.duration), paths)
}

/// The answer to a client item this host does not run (no loaded tool maps to its kind): an error that
/// says so, without going through the gate. Its history entry is that item's own refusal shape.
fn not_run_here(call: &RawCall) -> CallReport {
    CallReport {
        kind: call.kind,
        id: call.id.clone(),
        name: call.name.clone(),
        status: CallStatus::Error,
        reason: Some(format!(
            "this host does not run {} items (no loaded tool runs them): not run",
            call.kind
        )),
        step: Some("kind"),
        output: None,
    }
}

fn call_record(
    call: &RawCall,
    report: &CallReport,
    duration: Option<Duration>,
    paths: Vec<PathRecord>,
) -> CallRecord {
    CallRecord {
        time_ms: now_ms(),
        id: call.id.clone(),
        tool: call.name.clone(),
        verdict: report.status.as_str(),
        step: report.step,
        reason: report.reason.clone(),
        input_sha256: sha256_text(&call.raw_input),
        duration_ms: duration.map(|d| d.as_secs_f64() * 1000.0),
        paths,
    }
}
