//! How a call ends: approved and run, refused by the gate, failed in the tool, or stopped by the sandbox.
//!
//! The three kinds of failure stay apart: [`GateError`] means nothing ran,
//! [`ToolError`] means the tool ran and said no, [`RunError`] means the sandbox stopped it.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::gate::GateError;
use crate::sandbox::bindings;

/// A tool's own error answer, as declared in the tool world.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The input does not fit the tool.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A named file or directory does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The operation is not permitted.
    #[error("denied: {0}")]
    Denied(String),
    /// Anything else.
    #[error("failed: {0}")]
    Failed(String),
}

impl ToolError {
    /// The variant's name as in the WIT file (`invalid-input`, `not-found`, `denied`, `failed`).
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidInput(_) => "invalid-input",
            ToolError::NotFound(_) => "not-found",
            ToolError::Denied(_) => "denied",
            ToolError::Failed(_) => "failed",
        }
    }
}

impl From<bindings::ToolError> for ToolError {
    fn from(e: bindings::ToolError) -> Self {
        match e {
            bindings::ToolError::InvalidInput(m) => ToolError::InvalidInput(m),
            bindings::ToolError::NotFound(m) => ToolError::NotFound(m),
            bindings::ToolError::Denied(m) => ToolError::Denied(m),
            bindings::ToolError::Failed(m) => ToolError::Failed(m),
        }
    }
}

/// Why a call that was started did not return a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The tool answered with an error.
    #[error("tool error: {0}")]
    Tool(ToolError),
    /// The call ran past the wall-time limit.
    #[error("timed out after {limit:?}")]
    Timeout {
        /// The limit in force.
        limit: Duration,
    },
    /// The instance asked for more memory than the limit.
    #[error("memory limit of {limit} bytes exceeded")]
    MemoryLimit {
        /// The limit in force.
        limit: usize,
    },
    /// The result, stdout or stderr grew past the output limit.
    #[error("output limit of {limit} bytes exceeded")]
    OutputLimit {
        /// The limit in force.
        limit: usize,
    },
    /// The guest trapped (a panic, an unreachable, a bad memory access).
    #[error("the tool trapped: {trap}{}", if guest_message.is_empty() { String::new() } else { format!("; the tool said: {guest_message}") })]
    Trap {
        /// wasmtime's description of the trap, with the guest backtrace when available.
        trap: String,
        /// The tail of the guest's stderr (a Rust guest's panic message lands there).
        guest_message: String,
    },
    /// The sandbox could not be set up for this call.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
}

impl RunError {
    /// A short, stable name for the error class (`tool`, `timeout`, `memory_limit`, `output_limit`,
    /// `trap`, `setup`).
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Tool(_) => "tool",
            RunError::Timeout { .. } => "timeout",
            RunError::MemoryLimit { .. } => "memory_limit",
            RunError::OutputLimit { .. } => "output_limit",
            RunError::Trap { .. } => "trap",
            RunError::Setup(_) => "setup",
        }
    }
}

/// Why a call produced no output.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The gate refused the call; nothing ran.
    #[error("refused at {step}: {0}", step = .0.step())]
    Gate(#[from] GateError),
    /// The call ran and failed.
    #[error("{0}")]
    Run(#[from] RunError),
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
}

impl CallOutcome {
    /// Whether the gate approved the call and it ran (successfully or not).
    pub fn ran(&self) -> bool {
        !matches!(self.result, Err(CallError::Gate(_)))
    }

    /// The outcome as JSON, the shape `turngate call` prints:
    /// `{"tool", "status": "ok"|"error", "output"?, "error"?: {"stage": "gate"|"tool"|"sandbox", "kind", "message"},
    /// "stdout", "stderr", "duration_ms"}`.
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
                let (stage, kind, message) = match error {
                    CallError::Gate(e) => ("gate", e.step(), e.to_string()),
                    CallError::Run(RunError::Tool(e)) => ("tool", e.kind(), e.to_string()),
                    CallError::Run(e) => ("sandbox", e.kind(), e.to_string()),
                };
                out["status"] = json!("error");
                out["error"] = json!(ErrorJson {
                    stage,
                    kind,
                    message
                });
            }
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
