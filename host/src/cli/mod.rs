//! The binary's modules: reading streams for `run`, and the `demo`.

pub mod demo;
pub mod stream;
