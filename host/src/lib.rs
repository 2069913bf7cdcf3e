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
//! * [`Toolbox`], built with [`ToolboxBuilder`]: the bundled tools plus any loaded components, each
//!   described, schema-checked and compiled once (precompiled code is cached on disk).
//! * [`Root`]: the directory calls are confined to, held as a capability handle.
//! * [`Policy`]: which tool may act on which paths.
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

pub mod audit;
mod bundled;
pub mod descriptor;
pub mod gate;
pub mod history;
pub mod json;
pub mod live;
pub mod outcome;
pub mod pipeline;
pub mod policy;
pub mod providers;
pub mod root;
pub mod sandbox;
pub mod scope;
pub mod sse;
pub mod toolbox;
pub mod turn;

pub use descriptor::{Access, PathParam, ToolDescriptor};
pub use gate::{ApprovedCall, GateError};
pub use outcome::{CallError, CallOutcome, RunError, ToolError};
pub use pipeline::{
    ApprovalRequest, Approver, CallReport, CallStatus, Cancel, TurnHooks, TurnOptions, TurnReport,
    process_turn, process_turn_with,
};
pub use policy::{Approval, Policy};
pub use root::Root;
pub use sandbox::{CacheSetting, Limits};
pub use toolbox::{LoadedTool, ToolOrigin, Toolbox, ToolboxBuilder, ToolboxError};
pub use turn::{CallKind, Provider, Turn, TurnStatus};
