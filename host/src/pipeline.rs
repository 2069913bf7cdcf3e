//! The turn gate: a decoded [`Turn`] in, one checked result per call out.
//!
//! Nothing runs unless the turn ended the provider's normal way ([`TurnStatus::Completed`]); otherwise
//! every call is `not_run` and the history is empty. For a completed turn each call, in order, goes
//! through the per-call gate ([`check_call`]) and, if approved, the sandbox; a refused or failed call gets
//! an error result naming the step and the reason, and the other calls still run. A client item that is
//! not a function call ([`CallKind`]) skips the gate: no loaded tool runs that kind of item, so it gets an
//! error result saying so (step `kind`), answered in its own protocol shape.
//!
//! Calls run in order, each in a view of exactly what the gate approved for it; a call's changes are
//! checked, reviewed when asked for and applied (journaled, undoable) before any later call that touches
//! the same paths takes its view (`effects/order.rs`), so each call sees the effects of the calls
//! before it. The next call is gated and run while the one before it applies, unless a call of the turn
//! may wait for the approver or reach the network ([`Policy::runs_alone`]), or the turn can be
//! cancelled (or is reviewed, or recorded): then one after another, so the user is asked about one call
//! at a time, in the turn's order, requests go out in the turn's order, and no call after the one a
//! cancel stopped runs. With an approver whose questions wait together ([`Asking::Together`]) and a
//! call it asks about, every call starts at once (a call that may reach the network still runs alone)
//! and the turn's questions stand together; the calls still take their paths and apply in the turn's
//! order (`effects/turn_order.rs`).
//!
//! [`process_turn_with`] adds [`TurnHooks`]: an [`Approver`] consulted for calls of a tool the policy
//! marks `approval = "ask"` (no approver: denied), and a [`Cancel`] signal (the calls after it get a
//! `cancelled` error result, so every call ID is still answered exactly once).
//!
//! [`process_turn_recorded`] is the same gate for a turn that may be attempted more than once (a
//! worker's redelivered job): a call an earlier attempt applied is answered from its journal entry and
//! not run again.

use std::future::Future;
use std::time::Duration;

use futures_util::future::{self, Either};
use futures_util::stream::{FuturesOrdered, StreamExt};
use serde::Serialize;
use serde_json::Value;

use crate::approval::{Approver, Asking};
use crate::audit::{
    AuditRecord, CallRecord, ChangeRecord, PathRecord, TurnRecord, now_ms, sha256_text,
};
use crate::cancel::Cancel;
use crate::descriptor::Access;
use crate::effects::Effects;
use crate::effects::journal::{JournalChange, JournalEntry};
use crate::effects::turn_order::{TurnOrder, TurnPlace};
use crate::gate::{ApprovedCall, check_call};
use crate::history::{ToolResult, render};
use crate::network::RequestRecord;
use crate::outcome::{CallError, CallOutcome};
use crate::policy::Policy;
use crate::root::Root;
use crate::toolbox::{CallContext, Toolbox};
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

/// What the turn gate does besides gating.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// Produce audit records (with the SHA-256 before and after of every applied change).
    pub audit: bool,
    /// Ask the approver about every change set before it applies, not only for tools marked
    /// `approval = "ask"` (`--review`).
    pub review: bool,
    /// The turn's ID in the journal (`turngate undo --turn ID`); one is made up when `None`.
    pub turn_id: Option<String>,
}

/// What [`process_turn_with`] consults besides the gate.
#[derive(Clone, Copy, Default)]
pub struct TurnHooks<'a> {
    /// Asked before each call of a tool marked `approval = "ask"` (and each change set under `review`);
    /// `None` denies such calls.
    pub approver: Option<&'a dyn Approver>,
    /// Checked before each call; once set, the remaining calls are answered `cancelled` and not run,
    /// and a call running when it is set is stopped and applies nothing.
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
    /// What the call changed, as applied (`path` and `kind` of each change).
    #[serde(serialize_with = "change_summaries")]
    pub changes: Vec<crate::effects::journal::JournalChange>,
    /// Every request the call made over the network (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestRecord>,
}

fn change_summaries<S: serde::Serializer>(
    changes: &[crate::effects::journal::JournalChange],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = serializer.serialize_seq(Some(changes.len()))?;
    for change in changes {
        seq.serialize_element(&serde_json::json!({"path": change.path, "kind": change.kind}))?;
    }
    seq.end()
}

impl CallReport {
    /// The result the model gets for this call, at `position` in the turn: the output, or the reason.
    pub(crate) fn result_for(&self, position: usize) -> ToolResult {
        ToolResult {
            call: position,
            content: self
                .output
                .clone()
                .or_else(|| self.reason.clone())
                .unwrap_or_default(),
            is_error: self.status != CallStatus::Ok,
        }
    }
}

/// Everything the turn gate decided.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The turn's ID in the journal.
    pub turn_id: String,
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
    /// `{"turn": {"id", "status", "stop_reason", "detail"}, "calls": [{"kind", "id", "name", "status",
    /// "reason", "changes"}], "history": [...]}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "turn": {
                "id": self.turn_id,
                "status": self.turn.ending.status.as_str(),
                "stop_reason": self.turn.ending.stop_reason,
                "detail": self.turn.ending.detail,
            },
            "calls": self.calls,
            "history": self.history,
        })
    }

    /// The report as the Python and Node packages answer it: [`TurnReport::to_json`] with each call's
    /// `output` (`null` unless ok) and `step` (`null` when ok), which the next request of an SDK
    /// that keeps its own tool results needs, and `"audit"` when `audit` is set.
    pub fn to_embedding_json(&self, audit: bool) -> Value {
        let mut value = self.to_json();
        if let Some(calls) = value["calls"].as_array_mut() {
            for (json, call) in calls.iter_mut().zip(&self.calls) {
                json["output"] = call.output.clone().into();
                json["step"] = call.step.into();
            }
        }
        if audit {
            value["audit"] = serde_json::to_value(&self.audit).unwrap_or(Value::Null);
        }
        value
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
    let Ok(report) =
        gate_turn::<std::convert::Infallible>(toolbox, root, policy, turn, options, hooks, None)
            .await;
    report
}

/// What an earlier attempt at the same turn applied for a call: asked with the call's key (see
/// [`process_turn_recorded`]), it answers the call's journal entry, or `None` when the call must run.
pub type Recorded<'a, E> = &'a mut (dyn FnMut(&str) -> Result<Option<JournalEntry>, E> + Send);

/// Runs the turn gate like [`process_turn_with`], once per call across attempts at the same turn
/// (the same `turn_id`): before each call of a completed turn runs, `recorded` is asked for the
/// call's key (its ID, or `#<position>` for a Gemini call without one, which is also the call ID the
/// journal then records). A call it answers is not run again: its result is the recorded output and
/// changes. An error from `recorded` stops the turn at that call, and is returned.
pub async fn process_turn_recorded<E>(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    turn: Turn,
    options: TurnOptions,
    hooks: TurnHooks<'_>,
    recorded: Recorded<'_, E>,
) -> Result<TurnReport, E> {
    gate_turn(toolbox, root, policy, turn, options, hooks, Some(recorded)).await
}

/// The key a call is recorded under: its ID, or its position for a call without one.
pub fn call_key(id: Option<&str>, position: usize) -> String {
    id.map_or_else(|| format!("#{position}"), str::to_owned)
}

async fn gate_turn<E>(
    toolbox: &Toolbox,
    root: &Root,
    policy: &Policy,
    turn: Turn,
    options: TurnOptions,
    hooks: TurnHooks<'_>,
    mut recorded: Option<Recorded<'_, E>>,
) -> Result<TurnReport, E> {
    let turn_id = options.turn_id.clone().unwrap_or_else(new_turn_id);
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
                changes: Vec::new(),
                requests: Vec::new(),
            };
            if options.audit {
                call_records.push(call_record(call, &report, None, Vec::new()));
            }
            calls.push(report);
        }
    } else {
        let effects = Effects::default();
        let run = TurnRun {
            toolbox,
            root,
            policy,
            effects: &effects,
            hooks,
            review: options.review,
            turn_id: &turn_id,
            provider: turn.provider,
        };
        let schedule = Schedule::of(&turn, policy, &options, hooks, recorded.is_some());
        let turn_order = TurnOrder::default();
        let mut waiting = turn.calls.iter().enumerate().peekable();
        let mut running = FuturesOrdered::new();
        // Whether the last call started runs alone: nothing starts beside it.
        let mut alone = false;
        loop {
            while let Some((_, call)) = waiting.peek() {
                let may_start = match schedule {
                    Schedule::OneAtATime => running.is_empty(),
                    Schedule::Ahead => running.len() < CALLS_AHEAD,
                    Schedule::Together => {
                        running.is_empty() || !(alone || policy.reaches_network(&call.name))
                    }
                };
                if !may_start {
                    break;
                }
                let Some((position, call)) = waiting.next() else {
                    break;
                };
                alone = policy.reaches_network(&call.name);
                let place = (schedule == Schedule::Together).then(|| turn_order.start(position));
                running.push_back(run.start(position, call, place, recorded.as_mut()));
            }
            let Some(next) = running.next().await else {
                break;
            };
            let (report, duration, paths) = next?;
            let position = calls.len();
            results.push(report.result_for(position));
            if options.audit {
                call_records.push(call_record(&turn.calls[position], &report, duration, paths));
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
            turn_id: turn_id.clone(),
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
    Ok(TurnReport {
        turn_id,
        turn,
        calls,
        history,
        audit,
    })
}

/// How many calls of a turn are under way at once when none runs alone and nobody can cancel the turn:
/// the next one is gated and runs while the one before it applies (its flush is the longest step of a
/// small write); calls on overlapping paths still go one after the other.
const CALLS_AHEAD: usize = 2;

/// How a completed turn's calls are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schedule {
    /// Each once the one before it is done: a call may wait for an approver that asks one question at
    /// a time or reach the network, the turn can be cancelled, is reviewed or is recorded.
    OneAtATime,
    /// [`CALLS_AHEAD`] at once: nothing waits for anyone, nothing reaches the network.
    Ahead,
    /// A call the policy asks about, and an approver whose questions wait together
    /// ([`Asking::Together`]): every call at once ([`TurnOrder`] keeps them in the turn's order on
    /// the paths they share and when they apply), except that a call that may reach the network
    /// runs alone, so requests still go out in the turn's order.
    Together,
}

impl Schedule {
    fn of(
        turn: &Turn,
        policy: &Policy,
        options: &TurnOptions,
        hooks: TurnHooks<'_>,
        recorded: bool,
    ) -> Schedule {
        let asks = |call: &RawCall| options.review || policy.needs_approval(&call.name);
        let together = hooks
            .approver
            .is_some_and(|approver| approver.asking() == Asking::Together);
        if together && turn.calls.iter().any(asks) {
            Schedule::Together
        } else if !recorded
            && !options.review
            && hooks.cancel.is_none()
            && turn.calls.iter().all(|call| !policy.runs_alone(&call.name))
        {
            Schedule::Ahead
        } else {
            Schedule::OneAtATime
        }
    }
}

/// A call's report, how long it ran (`None` when it did not) and the paths it was approved for.
type Ran = (CallReport, Option<Duration>, Vec<PathRecord>);

/// What every call of one completed turn runs with.
struct TurnRun<'a> {
    toolbox: &'a Toolbox,
    root: &'a Root,
    policy: &'a Policy,
    effects: &'a Effects,
    hooks: TurnHooks<'a>,
    review: bool,
    turn_id: &'a str,
    provider: Provider,
}

impl<'a> TurnRun<'a> {
    /// Starts the call at `position`: its report at once when it is not run (cancelled, not a
    /// function call, or applied by an earlier attempt, which `recorded` tells), else its run. An error
    /// from `recorded` is the call's.
    fn start<E>(
        &'a self,
        position: usize,
        call: &'a RawCall,
        place: Option<TurnPlace<'a>>,
        recorded: Option<&mut Recorded<'_, E>>,
    ) -> Either<future::Ready<Result<Ran, E>>, impl Future<Output = Result<Ran, E>> + use<'a, E>>
    {
        let done = |report| Either::Left(future::ready(Ok((report, None, Vec::new()))));
        if self.hooks.cancel.is_some_and(Cancel::is_cancelled) {
            return done(CallReport {
                kind: call.kind,
                id: call.id.clone(),
                name: call.name.clone(),
                status: CallStatus::Error,
                reason: Some("cancelled by the user before this call: not run".into()),
                step: Some("cancelled"),
                output: None,
                changes: Vec::new(),
                requests: Vec::new(),
            });
        }
        if call.kind != CallKind::Function {
            return done(not_run_here(call));
        }
        let key = recorded
            .is_some()
            .then(|| call_key(call.id.as_deref(), position));
        let prior = match (recorded, &key) {
            (Some(recorded), Some(key)) => recorded(key),
            _ => Ok(None),
        };
        match prior {
            Err(error) => Either::Left(future::ready(Err(error))),
            Ok(Some(entry)) => done(replayed(call, entry)),
            Ok(None) => {
                let call_id = key.or_else(|| call.id.clone());
                Either::Right(async move {
                    let mut context = CallContext {
                        root: self.root,
                        policy: self.policy,
                        effects: self.effects,
                        approver: self.hooks.approver,
                        review: self.review,
                        cancel: self.hooks.cancel,
                        call_id,
                        turn: Some(self.turn_id.to_owned()),
                        place: place.as_ref(),
                    };
                    Ok(run_call(self.toolbox, &mut context, self.provider, call).await)
                })
            }
        }
    }
}

/// The verdict on a call an earlier attempt applied: its recorded output and changes.
pub(crate) fn replayed(call: &RawCall, entry: JournalEntry) -> CallReport {
    CallReport {
        kind: call.kind,
        id: call.id.clone(),
        name: call.name.clone(),
        status: CallStatus::Ok,
        reason: None,
        step: None,
        output: Some(entry.output.unwrap_or_default()),
        changes: entry.changes,
        requests: Vec::new(),
    }
}

/// A turn ID for the journal when the caller gives none: the time and a random suffix.
fn new_turn_id() -> String {
    format!("turn-{}-{:08x}", now_ms(), fastrand::u32(..))
}

/// Gates, runs and applies one call of a completed turn.
async fn run_call(
    toolbox: &Toolbox,
    context: &mut CallContext<'_>,
    provider: Provider,
    call: &RawCall,
) -> (CallReport, Option<Duration>, Vec<PathRecord>) {
    let error = |step: &'static str, reason: String| CallReport {
        kind: call.kind,
        id: call.id.clone(),
        name: call.name.clone(),
        status: CallStatus::Error,
        reason: Some(reason),
        step: Some(step),
        output: None,
        changes: Vec::new(),
        requests: Vec::new(),
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
    let (outcome, paths) = gate_and_run(toolbox, context, &call.name, &call.raw_input).await;
    let duration = outcome.ran().then_some(outcome.duration);
    let mut report = match outcome.result {
        Ok(output) => CallReport {
            kind: call.kind,
            id: call.id.clone(),
            name: call.name.clone(),
            status: CallStatus::Ok,
            reason: None,
            step: None,
            output: Some(output),
            changes: outcome.changes,
            requests: Vec::new(),
        },
        Err(e) => error(e.kind(), e.to_string()),
    };
    report.requests = outcome.requests;
    (report, duration, paths)
}

/// Gates one call and, when approved, runs and applies it: the outcome, with the paths the call was
/// approved for as the audit log records them (none when the gate refused it). `turngate run`, the
/// workers and the MCP server all go through here.
pub(crate) async fn gate_and_run(
    toolbox: &Toolbox,
    context: &mut CallContext<'_>,
    name: &str,
    raw_input: &str,
) -> (CallOutcome, Vec<PathRecord>) {
    toolbox.prepare_thread_for(name);
    match check_call(toolbox, context.root, context.policy, name, raw_input) {
        Ok(approved) => {
            let paths = path_records(&approved);
            (toolbox.run_in(context, &approved, raw_input).await, paths)
        }
        Err(refusal) => (
            CallOutcome::refused(name, CallError::Gate(refusal)),
            Vec::new(),
        ),
    }
}

/// Runs one call on its own (not in a turn), as `turngate call` does: its outcome, and its audit
/// record as `--log` writes it (the paths it was approved for, what it changed and every request it
/// made, query values masked).
pub async fn call_audited(
    toolbox: &Toolbox,
    context: &mut CallContext<'_>,
    name: &str,
    raw_input: &str,
) -> (CallOutcome, CallRecord) {
    let (outcome, paths) = gate_and_run(toolbox, context, name, raw_input).await;
    let record = outcome_record(context.call_id.clone(), raw_input, &outcome, paths);
    (outcome, record)
}

fn path_records(approved: &ApprovedCall<'_>) -> Vec<PathRecord> {
    approved
        .paths()
        .iter()
        .map(|p| PathRecord {
            path: p.name.to_string(),
            location: p.location.to_string(),
            access: match p.access {
                Access::Read => "read",
                Access::Write => "write",
            },
        })
        .collect()
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
        changes: Vec::new(),
        requests: Vec::new(),
    }
}

fn call_record(
    call: &RawCall,
    report: &CallReport,
    duration: Option<Duration>,
    paths: Vec<PathRecord>,
) -> CallRecord {
    let verdict = CallVerdict {
        verdict: report.status.as_str(),
        step: report.step,
        reason: report.reason.clone(),
    };
    record(
        call.id.clone(),
        &call.name,
        &call.raw_input,
        verdict,
        duration,
        paths,
        (&report.changes, &report.requests),
    )
}

/// The audit record of a call that ran on its own (not in a turn), as the MCP server logs it.
pub(crate) fn outcome_record(
    id: Option<String>,
    raw_input: &str,
    outcome: &CallOutcome,
    paths: Vec<PathRecord>,
) -> CallRecord {
    let verdict = match &outcome.result {
        Ok(_) => CallVerdict {
            verdict: CallStatus::Ok.as_str(),
            step: None,
            reason: None,
        },
        Err(error) => CallVerdict {
            verdict: CallStatus::Error.as_str(),
            step: Some(error.kind()),
            reason: Some(error.to_string()),
        },
    };
    let duration = outcome.ran().then_some(outcome.duration);
    record(
        id,
        &outcome.tool,
        raw_input,
        verdict,
        duration,
        paths,
        (&outcome.changes, &outcome.requests),
    )
}

struct CallVerdict {
    verdict: &'static str,
    step: Option<&'static str>,
    reason: Option<String>,
}

fn record(
    id: Option<String>,
    tool: &str,
    raw_input: &str,
    verdict: CallVerdict,
    duration: Option<Duration>,
    paths: Vec<PathRecord>,
    (changes, requests): (&[JournalChange], &[RequestRecord]),
) -> CallRecord {
    CallRecord {
        time_ms: now_ms(),
        id,
        tool: tool.to_owned(),
        verdict: verdict.verdict,
        step: verdict.step,
        reason: verdict.reason,
        input_sha256: sha256_text(raw_input),
        duration_ms: duration.map(|d| d.as_secs_f64() * 1000.0),
        paths,
        changes: changes
            .iter()
            .map(|c| ChangeRecord {
                path: c.path.clone(),
                kind: c.kind.as_str(),
                sha256_before: c.before.as_ref().map(|b| b.sha256.clone()),
                sha256_after: c.after.as_ref().map(|a| a.sha256.clone()),
            })
            .collect(),
        requests: requests.to_vec(),
    }
}
