//! The N-API addon behind the Node package `turngate`, as thin as the CLI: every function translates
//! JavaScript values into the library's types, runs the library off the JavaScript thread (on the
//! addon's threads, see [`running`]; the decoder on libuv's pool), and answers the library's
//! own JSON as text. The gate, the sandbox, approval and the journal are the library's.
//!
//! `index.js` is the package's face: it reads streams and async iterables into the decoder, parses the
//! JSON answers, wires `AbortSignal` to [`toolbox::NativeCancel`] and turns [`errors`] into `Error`
//! subclasses.

// napi-derive registers the exports only outside `cfg(test)`: a test build (clippy's `--all-targets`)
// would see them as unused.
#![cfg_attr(test, allow(dead_code))]

mod approver;
mod decoder;
mod errors;
mod running;
mod toolbox;
