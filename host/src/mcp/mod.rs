//! MCP server mode: the toolbox's tools offered to Model Context Protocol clients, over stdio or
//! Streamable HTTP, through `rmcp` (the official Rust SDK).
//!
//! Every `tools/call` goes through exactly what a call of `turngate run` goes through: the strict gate
//! (parse, tool, JSON Schema, real path resolution, policy), a view of exactly the approved paths,
//! staging, the re-check of the change set, review when the policy asks for it, the atomic apply into
//! the root's journal, and the audit log. The client can change none of it: no tool loads components or
//! touches the policy, and the arguments it sends are the input the gate checks and the tool gets (rmcp
//! parses the JSON-RPC message; the gate parses the arguments again as the text the tool receives).
//!
//! * [`listing`]: the tools as `tools/list` shows them, with hints from their declared access.
//! * [`answer`]: a call's outcome as a `CallToolResult`.
//! * [`consent`]: `approval = "ask"` put to the user through the client.
//! * [`inbound`]: what every incoming message is checked for, and the error each failure gets.
//! * [`stdio`]: the stdio transport, which answers every line it rejects.
//! * [`http`]: Streamable HTTP: Host and Origin checks, an optional bearer token.
//!
//! Calls run concurrently (rmcp runs each request as a task of its own), bounded by the toolbox's
//! instance pool (`--max-concurrent`); calls touching the same paths apply in arrival order through
//! the shared [`Effects`]. A cancelled request (`notifications/cancelled`, or a client that went
//! away) stops its call, which then applies nothing.

pub mod answer;
pub mod consent;
pub mod http;
pub mod inbound;
pub mod listing;
pub mod stdio;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::audit::{AuditRecord, now_ms, write_jsonl};
use crate::cancel::Cancel;
use crate::effects::Effects;
use crate::outcome::{CallError, CallOutcome};
use crate::pipeline::{gate_and_run, outcome_record};
use crate::policy::Policy;
use crate::root::Root;
use crate::toolbox::{CallContext, Toolbox};

/// The largest JSON-RPC message the server reads, in bytes (a stdio line, an HTTP request body). A
/// longer stdio line is skipped and answered with a JSON-RPC error, and the server goes on reading; a
/// longer HTTP body gets `413 Payload Too Large`.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// How long a stdio server whose client went away waits for its cancelled calls to unwind.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The client's connection could not be set up (over stdio: the `initialize` exchange failed).
    #[error("MCP session: {0}")]
    Session(String),
    /// Reading or writing the transport failed.
    #[error("MCP transport: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether a transport's `error` is the reader of stdout going away: the client is gone.
fn reader_gone(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// The server: one root, one policy, one toolbox, shared by every session and every call.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

struct Shared {
    toolbox: Toolbox,
    root: Root,
    policy: Policy,
    effects: Effects,
    tools: Vec<Tool>,
    audit: Option<Mutex<Box<dyn Write + Send>>>,
    /// The journal's turn for every call of this server process (`turngate undo --turn`).
    journal_turn: String,
    approvals: consent::PendingApprovals,
    /// Where `approval = "ask"` is asked instead of the client (`--approve-in console`).
    recorded: Option<crate::approval::durable::DurableApprover>,
    in_flight: InFlight,
}

impl McpServer {
    /// A server for `toolbox` on `root` under `policy`; `audit`, when given, receives one audit record
    /// (JSON Lines) per call.
    pub fn new(
        toolbox: Toolbox,
        root: Root,
        policy: Policy,
        audit: Option<Box<dyn Write + Send>>,
    ) -> McpServer {
        let tools = listing::tools(&toolbox);
        McpServer {
            shared: Arc::new(Shared {
                toolbox,
                root,
                policy,
                effects: Effects::default(),
                tools,
                audit: audit.map(Mutex::new),
                journal_turn: format!("mcp-{}-{:08x}", now_ms(), fastrand::u32(..)),
                approvals: consent::PendingApprovals::default(),
                recorded: None,
                in_flight: InFlight::default(),
            }),
        }
    }

    /// Asks calls that need approval through the root's recorded approvals (answered from `turngate
    /// console`, surviving this server) instead of through the client.
    pub fn asking_through(mut self, approver: crate::approval::durable::DurableApprover) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("a new server is not shared yet")
            .recorded = Some(approver);
        self
    }

    /// Prepares every tool in the background (`background.rs`: the lowest priority, so a call that
    /// comes meanwhile is not slowed), so that no client's first call waits for a compile (an empty
    /// cache is filled meanwhile; a warm one is only read).
    pub(crate) fn prepare_in_background(&self) {
        let shared = self.shared.clone();
        let runtime = tokio::runtime::Handle::current();
        let spawned = crate::background::spawn("turngate-prepare", move || {
            runtime.block_on(shared.toolbox.prepare_all())
        });
        if let Err(e) = spawned {
            // Each tool is then prepared by its first call, as without this.
            tracing::warn!("preparing the tools in the background: {e}");
        }
    }

    /// Serves one client over standard input and output until it disconnects (before its first
    /// message too: that is not an error). Only protocol messages are written to stdout.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.prepare_in_background();
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let transport = stdio::StdioTransport::new(stdin, stdout);
        let shared = self.shared.clone();
        let running = match self.serve(transport).await {
            Ok(running) => running,
            // A client that goes away before its first message asked for nothing; one that stopped
            // reading before its answer is gone as well (`turngate mcp | true`).
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(rmcp::service::ServerInitializeError::TransportError { error, .. })
                if reader_gone(&*error.error) =>
            {
                return Ok(());
            }
            Err(e) => return Err(McpError::Session(e.to_string())),
        };
        let waited = running.waiting().await;
        // The client is gone and rmcp has cancelled its open requests: let their calls unwind (stop
        // their guests, drop their staging) before the process ends.
        shared.in_flight.drained(SHUTDOWN_GRACE).await;
        waited.map_err(|e| McpError::Session(e.to_string()))?;
        Ok(())
    }

    /// Runs one `tools/call`: the same gate, view, staging, review, apply and audit as `turngate run`.
    async fn call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let shared = &*self.shared;
        let _in_flight = shared.in_flight.enter();
        let name = request.name.to_string();
        let raw_input = Value::Object(request.arguments.take().unwrap_or_default()).to_string();
        let call_id = context.id.to_string();
        let cancel = Cancel::new();
        let consent = consent::Consent::for_request(
            &shared.approvals,
            shared.recorded.as_ref(),
            &context,
            &cancel,
            &name,
            &raw_input,
            &request,
        );
        let consent = match consent {
            Ok(consent) => consent,
            Err(denied) => {
                let outcome = CallOutcome::refused(&name, CallError::Approval(denied));
                self.audit(&call_id, &raw_input, &outcome, Vec::new());
                return CallToolResponse::Complete(answer::call_result(&outcome));
            }
        };
        // A cancelled request, or a client that went away, cancels the call.
        let bridge = tokio::spawn({
            let requested = context.ct.clone();
            let cancel = cancel.clone();
            async move {
                requested.cancelled().await;
                cancel.cancel();
            }
        });
        let mut call = CallContext::new(&shared.root, &shared.policy, &shared.effects);
        call.approver = consent.approver();
        call.cancel = Some(&cancel);
        call.call_id = Some(call_id.clone());
        call.turn = Some(shared.journal_turn.clone());
        let (outcome, paths) = gate_and_run(&shared.toolbox, &mut call, &name, &raw_input).await;
        bridge.abort();
        match consent.finish(&shared.approvals, &name, &raw_input, outcome) {
            consent::Finished::Answered(outcome) => {
                self.audit(&call_id, &raw_input, &outcome, paths);
                CallToolResponse::Complete(answer::call_result(&outcome))
            }
            consent::Finished::InputRequired(input_required) => {
                CallToolResponse::InputRequired(input_required)
            }
        }
    }

    fn audit(
        &self,
        call_id: &str,
        raw_input: &str,
        outcome: &CallOutcome,
        paths: Vec<crate::audit::PathRecord>,
    ) {
        let Some(log) = &self.shared.audit else {
            return;
        };
        let record = outcome_record(Some(call_id.to_owned()), raw_input, outcome, paths);
        let mut log = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = write_jsonl(&[AuditRecord::Call(record)], &mut *log) {
            tracing::error!("writing the audit log: {e}");
            eprintln!("turngate: writing the audit log: {e}");
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("turngate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools confined to one directory. Each call is checked strictly (JSON, schema, the \
                 paths it really touches, the policy), runs in a sandbox that sees only what was \
                 approved, and its changes are applied atomically and can be undone \
                 (`turngate undo`). A refusal or failure is a result with isError and \
                 structuredContent.error {stage, kind, message}.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(request, context).await)
    }
}

/// The calls running now, so that a server can wait for them before it exits.
#[derive(Default)]
struct InFlight {
    calls: AtomicUsize,
    ended: tokio::sync::Notify,
}

impl InFlight {
    fn enter(&self) -> InFlightCall<'_> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        InFlightCall(self)
    }

    /// Waits until no call runs, or `within` has passed.
    async fn drained(&self, within: Duration) {
        let _ = tokio::time::timeout(within, async {
            loop {
                let ended = self.ended.notified();
                if self.calls.load(Ordering::SeqCst) == 0 {
                    return;
                }
                ended.await;
            }
        })
        .await;
    }
}

struct InFlightCall<'a>(&'a InFlight);

impl Drop for InFlightCall<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}
