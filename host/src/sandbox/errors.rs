//! How a started call can fail: the tool's own error answer, or a limit or trap of the sandbox.
//!
//! These are the sandbox's answers; `outcome.rs` puts them next to the gate's refusals and the effect
//! pipeline's.

use std::time::Duration;

use super::bindings;
use crate::network::{NetworkLimitError, mask_urls};

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

/// A tool's error answer, any URL it quotes shown with its query values masked (it goes into reports
/// and the audit log).
impl From<bindings::ToolError> for ToolError {
    fn from(e: bindings::ToolError) -> Self {
        let masked = |m: String| mask_urls(&m).into_owned();
        match e {
            bindings::ToolError::InvalidInput(m) => ToolError::InvalidInput(masked(m)),
            bindings::ToolError::NotFound(m) => ToolError::NotFound(masked(m)),
            bindings::ToolError::Denied(m) => ToolError::Denied(masked(m)),
            bindings::ToolError::Failed(m) => ToolError::Failed(masked(m)),
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
    /// The call exceeded a network limit and was stopped (nothing it did applies).
    #[error("network limit: {0}")]
    NetworkLimit(NetworkLimitError),
    /// The call was cancelled while it ran (nothing it did applies).
    #[error("cancelled while running: nothing it did was applied")]
    Cancelled,
    /// The sandbox could not be set up for this call.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
}

impl RunError {
    /// A short, stable name for the error class (`tool`, `timeout`, `memory_limit`, `output_limit`,
    /// `trap`, `network_limit`, `cancelled`, `setup`).
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Tool(_) => "tool",
            RunError::Timeout { .. } => "timeout",
            RunError::MemoryLimit { .. } => "memory_limit",
            RunError::OutputLimit { .. } => "output_limit",
            RunError::Trap { .. } => "trap",
            RunError::NetworkLimit(_) => "network_limit",
            RunError::Cancelled => "cancelled",
            RunError::Setup(_) => "setup",
        }
    }
}
