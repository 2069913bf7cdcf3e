//! The agent loop: send the conversation, gate the streamed turn, run its approved calls, send the
//! results back, until the model ends without tool calls or the turn limit is reached.
//!
//! Per turn, two separate bounds apply:
//! * [`RegenerationPolicy`]: a turn that streamed fine but must not be acted on is discarded and
//!   requested again: truncated (with the output limit doubled, up to a cap), malformed, and refused or
//!   filtered only when asked for (`max_refused`, 0 by default).
//! * [`RetryPolicy`]: an API failure ([`ApiError`]) is retried after the server's delay or a backoff with
//!   jitter, when its class allows it.
//!
//! Every attempt goes through [`process_turn_with`], so a discarded turn is audited with each call
//! `not_run`, and nothing runs unless the turn completed. Every attempt is also recorded
//! ([`AttemptRecord`]) with what happened and why. The [`Cancel`] signal is checked before each request,
//! during streaming and backoff (both abort), and between calls (a running call finishes).

use serde::Serialize;

use crate::approval::Approver;
use crate::audit::{AuditRecord, now_ms};
use crate::cancel::Cancel;
use crate::pipeline::{CallReport, TurnHooks, TurnOptions, TurnReport, process_turn_with};
use crate::policy::Policy;
use crate::root::Root;
use crate::toolbox::Toolbox;
use crate::turn::TurnStatus;

use super::client::LiveClient;
use super::conversation::Conversation;
use super::errors::ApiError;
use super::request;
use super::retry::RetryPolicy;

/// Bounds of regeneration: how often a bad turn is discarded and requested again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegenerationPolicy {
    /// Regenerations of a truncated turn (default 2), each with the output limit doubled.
    pub max_truncated: u32,
    /// Regenerations of a malformed turn (default 2).
    pub max_malformed: u32,
    /// Regenerations of a refused or filtered turn (default 0: only when the user asks).
    pub max_refused: u32,
    /// The first request's output limit in tokens (default 4096).
    pub max_output_tokens: u32,
    /// The largest output limit a regeneration may ask for (default 32768).
    pub output_tokens_cap: u32,
}

impl Default for RegenerationPolicy {
    fn default() -> Self {
        RegenerationPolicy {
            max_truncated: 2,
            max_malformed: 2,
            max_refused: 0,
            max_output_tokens: 4096,
            output_tokens_cap: 32768,
        }
    }
}

/// How a session runs.
#[derive(Debug, Clone, Copy)]
pub struct AgentConfig {
    /// Most model turns (default 20).
    pub max_turns: u32,
    /// Regeneration bounds.
    pub regeneration: RegenerationPolicy,
    /// API-error retry bounds.
    pub retry: RetryPolicy,
    /// Produce the turn gate's audit records (with the hashes of every applied change).
    pub audit: bool,
    /// Ask the approver about every change set before it applies (`--review`).
    pub review: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_turns: 20,
            regeneration: RegenerationPolicy::default(),
            retry: RetryPolicy::default(),
            audit: true,
            review: false,
        }
    }
}

/// The record of one request of a session.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptRecord {
    /// Always `attempt`.
    #[serde(rename = "type")]
    pub record: &'static str,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u128,
    /// The provider.
    pub provider: &'static str,
    /// The model turn (1-based).
    pub turn: u32,
    /// The request within the turn (1-based).
    pub attempt: u32,
    /// The output limit asked for.
    pub max_output_tokens: u32,
    /// The turn's status (`completed`, `truncated`, ...) or `api_error`.
    pub outcome: &'static str,
    /// The error class of an API error (see [`ApiError::kind`]).
    pub error_kind: Option<&'static str>,
    /// The HTTP status of an API error.
    pub http_status: Option<u16>,
    /// What comes next: `accept`, `regenerate`, `retry` or `give_up`.
    pub action: &'static str,
    /// Why.
    pub reason: String,
    /// The wait before a retry, in milliseconds.
    pub wait_ms: Option<u64>,
}

/// A line of a session's log: the turn gate's records and the attempts.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum LogRecord {
    /// A turn or call record from the turn gate.
    Gate(AuditRecord),
    /// A request and its outcome.
    Attempt(AttemptRecord),
}

/// Sees a session as it runs. Both methods do nothing by default.
pub trait AgentObserver: Send {
    /// A visible text delta, as it streams.
    fn text(&mut self, _delta: &str) {}
    /// A log record, as it is made.
    fn record(&mut self, _record: &LogRecord) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;

impl AgentObserver for Quiet {}

/// Why a session ended.
#[derive(Debug, Clone)]
pub enum AgentEnd {
    /// The model ended a turn without tool calls.
    Finished,
    /// The turn limit was reached with calls answered but not sent back.
    MaxTurns,
    /// The cancel signal was set.
    Cancelled,
    /// A turn did not complete, and regeneration did not help (or was not allowed): nothing of it ran.
    NotCompleted {
        /// The last attempt's status.
        status: TurnStatus,
        /// The last attempt's detail.
        detail: String,
    },
    /// An API failure that could not be retried (or whose retries ran out).
    Api(ApiError),
}

impl AgentEnd {
    /// `finished`, `max_turns`, `cancelled`, `not_completed`, or the API error's class.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEnd::Finished => "finished",
            AgentEnd::MaxTurns => "max_turns",
            AgentEnd::Cancelled => "cancelled",
            AgentEnd::NotCompleted { .. } => "not_completed",
            AgentEnd::Api(e) => e.kind(),
        }
    }

    /// The exit code of `turngate agent`: 0 finished, 3 not completed, 4 max turns, 130 cancelled, and
    /// 10..=16 for the API error classes ([`ApiError::exit_code`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            AgentEnd::Finished => 0,
            AgentEnd::NotCompleted { .. } => 3,
            AgentEnd::MaxTurns => 4,
            AgentEnd::Cancelled => 130,
            AgentEnd::Api(e) => e.exit_code(),
        }
    }

    /// A one-line message.
    pub fn message(&self) -> String {
        match self {
            AgentEnd::Finished => "the model ended without tool calls".into(),
            AgentEnd::MaxTurns => "the turn limit was reached".into(),
            AgentEnd::Cancelled => "cancelled".into(),
            AgentEnd::NotCompleted { status, detail } => {
                format!("the turn ended {status}: nothing of it ran ({detail})")
            }
            AgentEnd::Api(e) => e.to_string(),
        }
    }
}

/// A model turn that was accepted (it completed), without the tools' outputs.
#[derive(Debug, Clone, Serialize)]
pub struct TurnSummary {
    /// Requests it took.
    pub attempts: u32,
    /// The verdict per call.
    pub calls: Vec<CallReport>,
}

/// What a session did.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// Why it ended.
    pub end: AgentEnd,
    /// The accepted turns, in order.
    pub turns: Vec<TurnSummary>,
    /// HTTP requests made.
    pub requests: u32,
    /// The conversation as it stands (prompt, then each accepted turn's history).
    pub conversation: Conversation,
}

impl AgentOutcome {
    /// `{"end": {"kind", "exit_code", "message"}, "requests", "turns": [{"attempts", "calls": [...]}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "end": {
                "kind": self.end.kind(),
                "exit_code": self.end.exit_code(),
                "message": self.end.message(),
            },
            "requests": self.requests,
            "turns": self.turns,
        })
    }
}

/// One session's settings and collaborators.
pub struct Agent<'a> {
    /// The provider client.
    pub client: &'a LiveClient,
    /// The tools (their schemas go into every request).
    pub toolbox: &'a Toolbox,
    /// The root calls are confined to.
    pub root: &'a Root,
    /// The policy.
    pub policy: &'a Policy,
    /// Bounds.
    pub config: AgentConfig,
    /// Asked before calls of tools marked `approval = "ask"`; `None` denies them.
    pub approver: Option<&'a dyn Approver>,
    /// Stops the session between calls and requests.
    pub cancel: Cancel,
}

enum Failure {
    Api(ApiError),
    Regenerate(TurnStatus, String),
    Stop(TurnStatus, String),
}

impl Agent<'_> {
    /// Runs a session opened by `prompt`.
    pub async fn run(&self, prompt: &str, observer: &mut dyn AgentObserver) -> AgentOutcome {
        let provider = self.client.provider();
        let tools = request::tool_definitions(provider, self.toolbox);
        let mut conversation = Conversation::new(provider, prompt);
        let mut turns = Vec::new();
        let mut requests = 0;
        let mut turn_number = 0;
        let end = loop {
            if turn_number >= self.config.max_turns {
                break AgentEnd::MaxTurns;
            }
            turn_number += 1;
            let (report, attempts) = match self
                .one_turn(turn_number, &conversation, &tools, &mut requests, observer)
                .await
            {
                Ok(accepted) => accepted,
                Err(end) => break end,
            };
            conversation.append(&report);
            turns.push(TurnSummary {
                attempts,
                calls: report
                    .calls
                    .into_iter()
                    .map(|c| CallReport { output: None, ..c })
                    .collect(),
            });
            if turns.last().is_some_and(|t| t.calls.is_empty()) {
                break AgentEnd::Finished;
            }
            if self.cancel.is_cancelled() {
                break AgentEnd::Cancelled;
            }
        };
        AgentOutcome {
            end,
            turns,
            requests,
            conversation,
        }
    }

    /// Requests one model turn until one completes (and its calls ran) or the bounds are reached.
    async fn one_turn(
        &self,
        turn_number: u32,
        conversation: &Conversation,
        tools: &serde_json::Value,
        requests: &mut u32,
        observer: &mut dyn AgentObserver,
    ) -> Result<(TurnReport, u32), AgentEnd> {
        let regeneration = self.config.regeneration;
        let provider = self.client.provider();
        let mut max_output_tokens = regeneration.max_output_tokens;
        let (mut truncated, mut malformed, mut refused, mut retries) = (0, 0, 0, 0);
        let mut attempt = 0;
        loop {
            if self.cancel.is_cancelled() {
                return Err(AgentEnd::Cancelled);
            }
            attempt += 1;
            *requests += 1;
            let body = request::body(
                self.client.endpoint(),
                conversation,
                tools,
                max_output_tokens,
            );
            let streamed = {
                let mut on_text = |t: &str| observer.text(t);
                tokio::select! {
                    result = self.client.stream_turn(&body, Some(max_output_tokens.into()), &mut on_text) => result,
                    () = self.cancel.cancelled() => return Err(AgentEnd::Cancelled),
                }
            };
            let record = move |outcome: &'static str,
                               error: Option<&ApiError>,
                               action: &'static str,
                               reason: String,
                               wait: Option<std::time::Duration>| {
                LogRecord::Attempt(AttemptRecord {
                    record: "attempt",
                    time_ms: now_ms(),
                    provider: provider.as_str(),
                    turn: turn_number,
                    attempt,
                    max_output_tokens,
                    outcome,
                    error_kind: error.map(ApiError::kind),
                    http_status: error.and_then(ApiError::status),
                    action,
                    reason,
                    wait_ms: wait.map(|w| w.as_millis() as u64),
                })
            };
            let failure = match streamed {
                Err(error) => Failure::Api(error),
                Ok(turn) => {
                    let status = turn.ending.status;
                    let detail = turn.ending.detail.clone();
                    let stop_reason = turn.ending.stop_reason.clone();
                    // Every attempt goes through the turn gate: it runs nothing unless the turn
                    // completed, and audits the calls of a discarded turn as not_run.
                    let hooks = TurnHooks {
                        approver: self.approver,
                        cancel: Some(&self.cancel),
                    };
                    let options = TurnOptions {
                        audit: self.config.audit,
                        review: self.config.review,
                        turn_id: None,
                    };
                    let report = process_turn_with(
                        self.toolbox,
                        self.root,
                        self.policy,
                        turn,
                        options,
                        hooks,
                    )
                    .await;
                    // The gate's records first, then the attempt's (which says what comes next).
                    for r in &report.audit {
                        observer.record(&LogRecord::Gate(r.clone()));
                    }
                    if status == TurnStatus::Completed {
                        observer.record(&record(status.as_str(), None, "accept", detail, None));
                        return Ok((report, attempt));
                    }
                    match status {
                        TurnStatus::Truncated => {
                            truncated += 1;
                            if truncated <= regeneration.max_truncated {
                                Failure::Regenerate(status, detail)
                            } else {
                                Failure::Stop(status, detail)
                            }
                        }
                        TurnStatus::Malformed => {
                            malformed += 1;
                            if malformed <= regeneration.max_malformed {
                                Failure::Regenerate(status, detail)
                            } else {
                                Failure::Api(ApiError::StreamParse { message: detail })
                            }
                        }
                        TurnStatus::Refused | TurnStatus::Filtered => {
                            refused += 1;
                            if refused <= regeneration.max_refused {
                                Failure::Regenerate(status, detail)
                            } else {
                                Failure::Stop(status, detail)
                            }
                        }
                        TurnStatus::Errored => Failure::Api(ApiError::from_stream_error(&detail)),
                        // No stop reason, or a normal one: the body ended before the provider's
                        // terminator (an abnormal reason such as `pause_turn` is not retried).
                        TurnStatus::Incomplete if ended_early(stop_reason.as_deref()) => {
                            Failure::Api(ApiError::Transport {
                                message: format!("the stream ended early: {detail}"),
                            })
                        }
                        _ => Failure::Stop(status, detail),
                    }
                }
            };
            match failure {
                Failure::Api(error) => {
                    let outcome = match &error {
                        ApiError::StreamParse { .. } => "malformed",
                        _ => "api_error",
                    };
                    match self.config.retry.delay(retries, &error) {
                        Some(wait) => {
                            observer.record(&record(
                                outcome,
                                Some(&error),
                                "retry",
                                error.to_string(),
                                Some(wait),
                            ));
                            retries += 1;
                            tokio::select! {
                                () = tokio::time::sleep(wait) => {}
                                () = self.cancel.cancelled() => return Err(AgentEnd::Cancelled),
                            }
                        }
                        None => {
                            observer.record(&record(
                                outcome,
                                Some(&error),
                                "give_up",
                                error.to_string(),
                                None,
                            ));
                            return Err(AgentEnd::Api(error));
                        }
                    }
                }
                Failure::Regenerate(status, detail) => {
                    let previous = max_output_tokens;
                    if status == TurnStatus::Truncated {
                        max_output_tokens = max_output_tokens
                            .saturating_mul(2)
                            .min(regeneration.output_tokens_cap)
                            .max(previous);
                    }
                    observer.record(&record(status.as_str(), None, "regenerate", detail, None));
                }
                Failure::Stop(status, detail) => {
                    observer.record(&record(
                        status.as_str(),
                        None,
                        "give_up",
                        detail.clone(),
                        None,
                    ));
                    return Err(AgentEnd::NotCompleted { status, detail });
                }
            }
        }
    }
}

/// Whether an `Incomplete` turn with this stop reason is a body that ended before the provider's
/// terminator (no stop reason, or a normal one), rather than an ending that does not allow execution.
fn ended_early(stop_reason: Option<&str>) -> bool {
    match stop_reason {
        None => true,
        Some(reason) => matches!(
            reason,
            "tool_use"
                | "end_turn"
                | "stop_sequence"
                | "tool_calls"
                | "stop"
                | "completed"
                | "STOP"
        ),
    }
}
