//! turngate: act on a model's tool calls only when it is safe to.
//!
//! A model streams its turn; tool-call input arrives in fragments that can look finished long before
//! they are. turngate checks each call strictly and runs approved calls as WASI components confined to
//! one directory.
//!
//! The main types, in the order data flows through them:
//!
//! * [`providers::TurnDecoder`]: a provider's streamed response body (Anthropic, OpenAI Chat, OpenAI
//!   Responses, Gemini) in, a [`Turn`] out: the assistant content as sent, the raw calls, and how the
//!   turn ended.
//! * [`process_turn`]: the turn gate. Nothing runs unless the turn completed; then each call goes through
//!   the gate and the sandbox, and the [`TurnReport`] holds one result per call ID in the provider's
//!   protocol, plus audit records.
//! * [`live`]: the same pipeline around live HTTP requests, with retries, bounded regeneration and the
//!   agent loop.
//! * [`worker`]: the same pipeline behind a NATS JetStream work queue, exactly once per call across
//!   worker crashes and redeliveries.
//! * [`mcp`]: the same gate for every `tools/call` of a Model Context Protocol client, over stdio or
//!   Streamable HTTP.
//! * [`console`]: a local web page for one root: the journal as a timeline with diffs and undo, and
//!   the audit log, behind a start token, Host and Origin checks and CSRF tokens.
//! * [`Toolbox`], built with [`ToolboxBuilder`]: the bundled tools plus any loaded components, each
//!   described, schema-checked and compiled once (precompiled code is cached on disk).
//! * [`Root`]: the directory calls are confined to, held as a capability handle.
//! * [`Policy`]: which tool may act on which paths, and request which URLs ([`network`]).
//! * [`gate::check_call`]: strict parse, known tool, JSON Schema, path scope, policy; gives an
//!   [`ApprovedCall`], the only thing the sandbox runs.
//! * [`CallOutcome`]: the tool's output, or the gate step, tool error or sandbox limit that stopped it.
//!
//! ```ignore
//! use turngate::{Policy, Root, Toolbox};
//!
//! let toolbox = Toolbox::builder().build().await?;
//! let root = Root::open("workspace")?;
//! let outcome = toolbox
//!     .call(&root, &Policy::allow_all(), "write_file", r#"{"path":"notes.txt","content":"hi"}"#)
//!     .await;
//! println!("{}", outcome.to_json());
//! ```
//!
//! This example is `examples/embed.rs`, which `cargo test` compiles. (Doc tests are off: the tool
//! world's WIT package is also called `turngate`, and its generated bindings would be ambiguous with
//! the crate itself inside a doc test.)
#![deny(missing_docs)]

pub mod approval;
pub mod audit;
mod background;
mod bundled;
pub mod cancel;
pub mod console;
pub mod descriptor;
pub mod digest;
pub mod effects;
pub mod gate;
pub mod history;
pub(crate) mod http_checks;
pub mod json;
pub mod live;
pub mod lockfile;
pub(crate) mod lower;
pub mod mcp;
pub mod names;
pub mod network;
pub mod outcome;
pub mod pipeline;
mod platform;
pub mod policy;
pub mod providers;
pub mod registry;
pub mod resolve;
pub mod root;
pub mod sandbox;
pub mod scope;
pub mod sse;
mod test_hooks;
pub mod threads;
mod tls;
pub mod toolbox;
pub mod turn;
pub mod view;
pub mod worker;

pub use approval::durable::DurableApprover;
pub use approval::pending::{ApprovalError, PendingApproval, PendingApprovals};
pub use approval::{
    ApprovalFuture, ApprovalRequest, ApproveAll, Approver, AskedBecause, Asking, ToolProvenance,
};
pub use cancel::Cancel;
pub use descriptor::{Access, PathParam, ToolDescriptor};
pub use effects::journal::{Journal, Retention, UndoTarget};
pub use effects::{ChangeSet, EffectError, Effects};
pub use gate::{ApprovedCall, GateError};
pub use outcome::{CallError, CallOutcome, CancelledAt, RunError, ToolError};
pub use pipeline::{
    CallReport, CallStatus, TurnHooks, TurnOptions, TurnReport, call_audited, process_turn,
    process_turn_with,
};
pub use policy::{Approval, Policy};
pub use root::Root;
pub use sandbox::{CacheSetting, CompileIn, Instances, Limits};
pub use toolbox::{CallContext, LoadedTool, ToolOrigin, Toolbox, ToolboxBuilder, ToolboxError};
pub use turn::{CallKind, Provider, Turn, TurnStatus};
