//! The binary's modules: reading streams for `run`, the `demo`, the tool author's commands, the
//! terminal glue of `agent` (and the approver `run` and `call` share), `journal` / `undo`,
//! `mcp`, `worker` / `submit`, and tools from registries (`tools add`, `update`, `remove`,
//! `publish`, `sign`).

pub mod agent;
pub mod demo;
pub mod journal;
pub mod mcp;
pub mod registry;
pub mod stream;
pub mod tools;
pub mod worker;
