//! The binary's modules: reading streams for `run`, the `demo`, and the tool author's commands.

pub mod demo;
pub mod stream;
pub mod tools;
