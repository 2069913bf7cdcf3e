//! The binary's modules: reading streams for `run`, the `demo`, the tool author's commands, the
//! terminal glue of `agent` (and the approver `run` and `call` share), `journal` / `undo`,
//! `mcp`, and `worker` / `submit`.

pub mod agent;
pub mod demo;
pub mod journal;
pub mod mcp;
pub mod stream;
pub mod tools;
pub mod worker;
