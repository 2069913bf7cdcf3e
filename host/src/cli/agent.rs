//! `turngate agent` glue: text to stderr, log records to the log file as they happen, approval asked
//! on the terminal (denied when standard input is not a terminal) or recorded in the root for
//! `turngate console` (`--approve-in console`), and Ctrl-C as a cancel, also for `run` and `call`.

use std::fs::File;
use std::io::{BufRead, IsTerminal, Write};

use turngate::effects::diff::DiffSize;
use turngate::live::agent::{AgentObserver, LogRecord};
use turngate::{
    ApprovalFuture, ApprovalRequest, Approver, Asking, Cancel, DurableApprover, PendingApprovals,
    Policy, Root,
};

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
        let question = question_text(&request.to_json(), None);
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                eprintln!(
                    "turngate: `{}` needs approval and there is no terminal to ask: denied",
                    request.tool
                );
                return false;
            }
            ask_on_terminal(question).await
        })
    }
}

/// A request as the terminal asks it: `shown` is [`ApprovalRequest::to_json`] (or a question read back
/// from where it was published), `job` the worker job that asked, if one did.
pub(crate) fn question_text(shown: &serde_json::Value, job: Option<&str>) -> String {
    let text = |value: &serde_json::Value| value.as_str().unwrap_or("-").to_owned();
    let of_job = job.map(|job| format!(" of job {job}")).unwrap_or_default();
    let from = &shown["provenance"];
    let from = match (from["source"].as_str(), from["signer"].as_str()) {
        (Some(source), Some(signer)) => format!(", installed from {source}, signed by {signer}"),
        (Some(source), None) => format!(", installed from {source}, unsigned"),
        (None, _) => from["origin"]
            .as_str()
            .map(|origin| format!(", {origin}"))
            .unwrap_or_default(),
    };
    let call = format!(
        "`{}`{from} (id {}){of_job} with {}",
        text(&shown["tool"]),
        text(&shown["id"]),
        text(&shown["input"])
    );
    let network = &shown["network"];
    if network.is_object() {
        let start = network["body_start"]
            .as_str()
            .map(|start| format!("\n  it starts: {start}"))
            .unwrap_or_default();
        return format!(
            "\nturngate: the model's call {call} wants to send {} {}\n  body: {} bytes, SHA-256 {}{start}\nSend it? [y/N] ",
            text(&network["method"]),
            text(&network["url"]),
            network["body_bytes"],
            text(&network["body_sha256"]),
        );
    }
    if shown["changes"].is_array() {
        return format!(
            "\nturngate: the model's call {call} would make these changes:\n{}Apply them? [y/N] ",
            text(&shown["diff"])
        );
    }
    let paths: Vec<String> = shown["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{} ({})", text(&p["path"]), text(&p["access"])))
        .collect();
    let paths = match paths.is_empty() {
        true => "none".to_owned(),
        false => paths.join(", "),
    };
    format!("\nturngate: the model calls {call}\n  paths: {paths}\nAllow this call? [y/N] ")
}

/// Writes `question` to standard error and reads the answer from the terminal: `true` for `y` or
/// `yes`, anything else (or nothing) is a no.
pub(crate) async fn ask_on_terminal(question: String) -> bool {
    // A thread of its own, not the runtime's blocking pool: a question left open by a cancel must not
    // keep the process from exiting while it waits for a line.
    let (answered, answer) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        eprint!("{question}");
        let mut line = String::new();
        let yes = std::io::stdin().lock().read_line(&mut line).is_ok()
            && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        let _ = answered.send(yes);
    });
    answer.await.unwrap_or(false)
}

/// Where `run`, `call` and `agent` ask (`--approve-in`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproveIn {
    /// On this terminal (denied when there is none).
    #[default]
    Terminal,
    /// Recorded in the root (`.turngate/approvals/`) and answered from `turngate console`: the
    /// question survives this process, and is denied after the policy's `approval_timeout_seconds`.
    Console,
}

/// The approver `--approve-in` chose.
pub enum CliApprover {
    /// Asks on the terminal.
    Terminal(TerminalApprover),
    /// Asks through the root's recorded approvals.
    Console(DurableApprover),
}

impl CliApprover {
    /// The approver for `choice` on `root`.
    pub fn new(choice: ApproveIn, root: &Root, policy: &Policy) -> anyhow::Result<CliApprover> {
        Ok(match choice {
            ApproveIn::Terminal => CliApprover::Terminal(TerminalApprover),
            ApproveIn::Console => CliApprover::Console(DurableApprover::new(
                PendingApprovals::open(root)?,
                policy.approval_timeout(),
            )),
        })
    }

    /// Says on stderr why a recorded question was denied without an answer, if one was.
    pub fn report_failure(&self) {
        if let CliApprover::Console(durable) = self
            && let Some(failure) = durable.take_failure()
        {
            eprintln!(
                "turngate: an approval could not be recorded or read, so it was denied: {failure}"
            );
        }
    }
}

impl Approver for CliApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        match self {
            CliApprover::Terminal(terminal) => terminal.approve(request),
            CliApprover::Console(durable) => {
                eprintln!(
                    "turngate: `{}` (id {}) waits for approval {} in `turngate console`",
                    request.tool,
                    request.id.unwrap_or("-"),
                    request.digest()
                );
                durable.approve(request)
            }
        }
    }

    fn asking(&self) -> Asking {
        match self {
            CliApprover::Terminal(terminal) => terminal.asking(),
            CliApprover::Console(durable) => durable.asking(),
        }
    }

    fn diff_size(&self) -> DiffSize {
        match self {
            CliApprover::Terminal(terminal) => terminal.diff_size(),
            CliApprover::Console(durable) => durable.diff_size(),
        }
    }
}

/// A [`Cancel`] set by Ctrl-C (SIGINT): the running call stops and applies nothing, an open question
/// is answered no, and nothing after it runs. The signal is set before the notice is printed, so
/// whoever reads the notice knows the cancel is in force.
pub fn cancel_on_ctrl_c() -> Cancel {
    let cancel = Cancel::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
            eprintln!(
                "\nturngate: stopping (the running call applies nothing; nothing after it runs)"
            );
        }
    });
    cancel
}
