//! The binary's modules: reading streams for `run`, the `demo`, the tool author's commands, and the
//! `agent`'s terminal glue.

pub mod agent;
pub mod demo;
pub mod stream;
pub mod tools;
