//! Bounded capture of a guest's stdout and stderr.
//!
//! `MemoryOutputPipe` alone reports a full buffer as a closed stream, which a Rust guest turns into a
//! panic that looks like any other. This wrapper traps with [`OutputLimitExceeded`] instead, so the host
//! can say the output limit was hit.

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// The error a write beyond the output limit traps with.
#[derive(Debug, thiserror::Error)]
#[error("output limit of {limit} bytes exceeded")]
pub(crate) struct OutputLimitExceeded {
    pub(crate) limit: usize,
}

/// A stdout or stderr that holds at most `limit` bytes and traps on more.
#[derive(Clone)]
pub(crate) struct BoundedOutput {
    pipe: MemoryOutputPipe,
    limit: usize,
}

impl BoundedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        BoundedOutput {
            pipe: MemoryOutputPipe::new(limit),
            limit,
        }
    }

    /// What the guest wrote.
    pub(crate) fn contents(&self) -> Bytes {
        self.pipe.contents()
    }

    fn exceeded(&self) -> StreamError {
        StreamError::Trap(OutputLimitExceeded { limit: self.limit }.into())
    }
}

impl IsTerminal for BoundedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for BoundedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASI 0.3 guests use this path; the pipe itself truncates at the limit there.
        self.pipe.async_stream()
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for BoundedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        let room = self.pipe.check_write().unwrap_or(0);
        if bytes.len() > room {
            return Err(self.exceeded());
        }
        self.pipe.write(bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        match self.pipe.check_write() {
            Ok(room) => Ok(room),
            Err(_) => Err(self.exceeded()),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for BoundedOutput {
    async fn ready(&mut self) {}
}
