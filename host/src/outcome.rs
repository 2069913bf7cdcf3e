//! How a call ends: run and applied, refused by the gate, denied by the user, failed in the tool,
//! stopped by the sandbox, or run but not applied.
//!
//! The kinds of failure stay apart: [`GateError`] means nothing ran, `Approval` that the user said no,
//! [`ToolError`] that the tool ran and said no, [`RunError`] that the sandbox stopped it, and
//! [`EffectError`] that it ran but its changes were not applied. Only a call whose result is `Ok` has
//! changed anything, and [`CallOutcome::changes`] says exactly what.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

pub use crate::effects::EffectError;
use crate::effects::journal::JournalChange;
use crate::gate::GateError;
use crate::network::RequestRecord;
pub use crate::sandbox::{RunError, ToolError};

/// Why a call produced no output.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The gate refused the call; nothing ran.
    #[error("refused at {step}: {0}", step = .0.step())]
    Gate(#[from] GateError),
    /// The user (or the embedding program's approver) did not approve the call; nothing was applied.
    #[error("{0}")]
    Approval(String),
    /// The call ran and failed; nothing was applied.
    #[error("{0}")]
    Run(#[from] RunError),
    /// The call ran but its changes were not applied.
    #[error("{0}")]
    Effect(#[from] EffectError),
    /// The call was cancelled while it waited (for the user's answer, or to apply its changes);
    /// nothing was applied, whatever the approver answered.
    #[error("cancelled while {stage}: nothing was applied")]
    Cancelled {
        /// What the call was waiting for: `approval` or `apply`.
        stage: CancelledAt,
    },
}

/// Where a call that was cancelled outside its run stood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelledAt {
    /// Waiting for the approver's answer.
    Approval,
    /// Its changes checked (and approved, if asked), about to be applied.
    Apply,
}

impl std::fmt::Display for CancelledAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CancelledAt::Approval => "the user was being asked",
            CancelledAt::Apply => "its changes were about to be applied",
        })
    }
}

impl CallError {
    /// The stage that stopped the call: `gate`, `approval`, `tool`, `sandbox` or `apply`.
    pub fn stage(&self) -> &'static str {
        match self {
            CallError::Gate(_) => "gate",
            CallError::Approval(_) => "approval",
            CallError::Run(RunError::Tool(_)) => "tool",
            CallError::Run(_) => "sandbox",
            CallError::Effect(_) => "apply",
            CallError::Cancelled {
                stage: CancelledAt::Approval,
            } => "approval",
            CallError::Cancelled {
                stage: CancelledAt::Apply,
            } => "apply",
        }
    }

    /// The kind within the stage: the gate step, the tool error's variant, the sandbox limit or the
    /// reason changes were not applied; `cancelled` for a call cancelled at any stage.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Gate(e) => e.step(),
            CallError::Approval(_) => "approval",
            CallError::Run(RunError::Tool(e)) => e.kind(),
            CallError::Run(e) => e.kind(),
            CallError::Effect(e) => e.kind(),
            CallError::Cancelled { .. } => "cancelled",
        }
    }
}

/// The structured outcome of one call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The tool that was asked for.
    pub tool: String,
    /// The tool's output, or why there is none.
    pub result: Result<String, CallError>,
    /// What the tool wrote to stdout (bounded by the output limit).
    pub stdout: Vec<u8>,
    /// What the tool wrote to stderr (bounded by the output limit).
    pub stderr: Vec<u8>,
    /// Time in the sandbox (zero when the gate refused the call).
    pub duration: Duration,
    /// What the call changed, as applied and journaled (empty unless it succeeded and changed something).
    pub changes: Vec<JournalChange>,
    /// The call's place in the root's journal, when it changed something.
    pub journal_seq: Option<u64>,
    /// Every request the call made over the network, in order (denied ones included).
    pub requests: Vec<RequestRecord>,
}

impl CallOutcome {
    /// An outcome for a call that stopped before its tool ran.
    pub(crate) fn refused(tool: &str, error: CallError) -> CallOutcome {
        CallOutcome {
            tool: tool.to_owned(),
            result: Err(error),
            stdout: Vec::new(),
            stderr: Vec::new(),
            duration: Duration::ZERO,
            changes: Vec::new(),
            journal_seq: None,
            requests: Vec::new(),
        }
    }

    /// Whether the tool ran (successfully or not).
    pub fn ran(&self) -> bool {
        !matches!(
            self.result,
            Err(CallError::Gate(_) | CallError::Approval(_) | CallError::Cancelled { .. })
        ) || self.duration > Duration::ZERO
    }

    /// The outcome as JSON, the shape `turngate call` prints:
    /// `{"tool", "status": "ok"|"error", "output"?, "error"?: {"stage": "gate"|"approval"|"tool"|"sandbox"|"apply",
    /// "kind" (`cancelled` for a cancelled call, at any stage), "message"}, "changes": [{"path", "kind", "before"?, "after"?}], "requests"?: [{"method", "url",
    /// "address", "status", "bytes_sent", "bytes_received", "duration_ms", "approved", "error"}], "stdout",
    /// "stderr", "duration_ms"}`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "tool": self.tool,
            "stdout": String::from_utf8_lossy(&self.stdout),
            "stderr": String::from_utf8_lossy(&self.stderr),
            "duration_ms": self.duration.as_secs_f64() * 1000.0,
        });
        match &self.result {
            Ok(output) => {
                out["status"] = json!("ok");
                out["output"] = json!(output);
            }
            Err(error) => {
                out["status"] = json!("error");
                out["error"] = json!(ErrorJson {
                    stage: error.stage(),
                    kind: error.kind(),
                    message: error.to_string(),
                });
            }
        }
        out["changes"] = json!(
            self.changes
                .iter()
                .map(|c| json!({"path": c.path, "kind": c.kind, "before": c.before, "after": c.after}))
                .collect::<Vec<_>>()
        );
        if !self.requests.is_empty() {
            out["requests"] = json!(self.requests);
        }
        out
    }
}

#[derive(Serialize)]
struct ErrorJson {
    stage: &'static str,
    kind: &'static str,
    message: String,
}
