//! The audit record: one JSON object per turn and one per call, written as JSON Lines by the caller.
//!
//! A call record carries the ID, tool, verdict, the gate step or failure kind and the reason, the SHA-256
//! of the raw input, the time in the sandbox, every path the call was approved for (the name it was
//! given and where it leads) and every change it applied, with the SHA-256 of the file before and after
//! (`null` where there was or is no file), and every request it made over the network. A call that did not run has no duration; a call that applied
//! nothing has no changes: "no execution" and "no effect" are both visible in the log.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::network::RequestRecord;

/// One line of the audit log.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum AuditRecord {
    /// A turn and how it ended.
    Turn(TurnRecord),
    /// One call of a turn.
    Call(CallRecord),
}

/// The audit record of a turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRecord {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u128,
    /// The turn's ID in the journal.
    pub turn_id: String,
    /// `anthropic`, `openai-chat`, `openai-responses` or `gemini`.
    pub provider: &'static str,
    /// The turn's status.
    pub status: &'static str,
    /// The raw provider stop reason.
    pub stop_reason: Option<String>,
    /// Why the turn ended as it did.
    pub detail: String,
    /// Calls in the turn.
    pub calls: usize,
    /// Calls that ran and succeeded.
    pub ok: usize,
    /// Calls refused or failed.
    pub error: usize,
    /// Calls not run because the turn did not complete.
    pub not_run: usize,
}

/// The audit record of a call.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u128,
    /// The provider's call ID.
    pub id: Option<String>,
    /// The tool name as the model gave it.
    pub tool: String,
    /// `ok`, `error` or `not_run`.
    pub verdict: &'static str,
    /// The gate step that refused the call (`parse`, `tool`, `schema`, `path`, `policy`, `id`), or the
    /// failure kind of a call that ran (`tool`, `timeout`, `memory_limit`, `output_limit`, `trap`, `setup`).
    pub step: Option<&'static str>,
    /// The reason for an error or `not_run`.
    pub reason: Option<String>,
    /// SHA-256 of the raw input text.
    pub input_sha256: String,
    /// Milliseconds in the sandbox; `None` when the call did not run.
    pub duration_ms: Option<f64>,
    /// The paths the call was approved for.
    pub paths: Vec<PathRecord>,
    /// Every change the call applied.
    pub changes: Vec<ChangeRecord>,
    /// Every request the call made over the network: method, URL with query values masked, the
    /// address connected to, status, bytes each way, time, approval (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestRecord>,
}

/// A path a call was approved for.
#[derive(Debug, Clone, Serialize)]
pub struct PathRecord {
    /// The path as given, relative to the root, normalized.
    pub path: String,
    /// Where it really leads (symlinks followed).
    pub location: String,
    /// `read` or `write`.
    pub access: &'static str,
}

/// A change a call applied.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeRecord {
    /// Relative to the root.
    pub path: String,
    /// `create`, `replace`, `delete`, `make_dir` or `remove_dir`.
    pub kind: &'static str,
    /// SHA-256 of the file before (`None`: no file there).
    pub sha256_before: Option<String>,
    /// SHA-256 of the file after (`None`: no file there).
    pub sha256_after: Option<String>,
}

/// Writes records as JSON Lines.
pub fn write_jsonl(records: &[AuditRecord], out: &mut impl Write) -> io::Result<()> {
    for record in records {
        serde_json::to_writer(&mut *out, record)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// SHA-256 of a text.
pub(crate) fn sha256_text(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}
