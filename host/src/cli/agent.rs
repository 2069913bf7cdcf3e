//! `turngate agent` glue: text to stderr, log records to the log file as they happen, and approval
//! asked on the terminal (denied when standard input is not a terminal), also for `run` and `call`.

use std::fs::File;
use std::io::{BufRead, IsTerminal, Write};

use turngate::live::agent::{AgentObserver, LogRecord};
use turngate::{ApprovalFuture, ApprovalRequest, Approver};

/// Echoes text deltas to stderr and appends every log record to the log file.
pub struct CliObserver {
    /// The `--log` file.
    pub log: Option<File>,
    /// Set when writing the log failed (reported at the end).
    pub log_error: Option<std::io::Error>,
}

impl AgentObserver for CliObserver {
    fn text(&mut self, delta: &str) {
        // Echo is best effort: a closed stderr must not stop the session.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(delta.as_bytes());
        let _ = err.flush();
    }

    fn record(&mut self, record: &LogRecord) {
        if let Some(file) = self.log.as_mut() {
            let line = serde_json::to_string(record).expect("a record serializes");
            if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush())
                && self.log_error.is_none()
            {
                self.log_error = Some(e);
            }
        }
    }
}

/// Asks on the terminal: `y` or `yes` approves, anything else (or no terminal) denies. A call that
/// changes files is shown as the unified diff of its changes; a call that only reads, by its input.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let call = format!(
            "`{}` (id {}) with {}",
            request.tool,
            request.id.unwrap_or("-"),
            request.input
        );
        let question = match (request.network, request.changes) {
            (Some(network), _) => format!(
                "\nturngate: the model's call {call} wants to send {} {}\n  body: {} bytes, SHA-256 {}{}\nSend it? [y/N] ",
                network.method,
                network.url,
                network.body_bytes,
                network.body_sha256,
                network
                    .body_start
                    .as_deref()
                    .map(|start| format!("\n  it starts: {start}"))
                    .unwrap_or_default()
            ),
            (None, Some(_)) => format!(
                "\nturngate: the model's call {call} would make these changes:\n{}Apply them? [y/N] ",
                request.diff
            ),
            (None, None) => format!(
                "\nturngate: the model calls {call}\n  paths: {}\nAllow this call? [y/N] ",
                if request.paths.is_empty() {
                    "none".to_owned()
                } else {
                    request
                        .paths
                        .iter()
                        .map(|(p, a)| format!("{p} ({a:?})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        };
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                eprintln!(
                    "turngate: `{}` needs approval and there is no terminal to ask: denied",
                    request.tool
                );
                return false;
            }
            tokio::task::spawn_blocking(move || {
                eprint!("{question}");
                let mut answer = String::new();
                if std::io::stdin().lock().read_line(&mut answer).is_err() {
                    return false;
                }
                matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
            })
            .await
            .unwrap_or(false)
        })
    }
}
