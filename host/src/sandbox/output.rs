//! Bounded capture of a guest's stdout and stderr.
//!
//! `MemoryOutputPipe` alone reports a full buffer as a closed stream, which a Rust guest turns into a
//! panic that looks like any other. This wrapper traps a WASI 0.2 guest with [`OutputLimitExceeded`]
//! instead, so the host can say the output limit was hit. A WASI 0.3 guest writes through a stream
//! whose failure it is told of as an `error-code` (no trap can be raised there), so the wrapper also
//! remembers that the limit was hit ([`BoundedOutput::exceeded`]), and the call's result is the
//! output limit whatever the guest did next.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

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
    /// Set when a write did not fit.
    overflowed: Arc<AtomicBool>,
}

impl BoundedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        BoundedOutput {
            pipe: MemoryOutputPipe::new(limit),
            limit,
            overflowed: Arc::default(),
        }
    }

    /// What the guest wrote.
    pub(crate) fn contents(&self) -> Bytes {
        self.pipe.contents()
    }

    /// The limit, when a write did not fit in it.
    pub(crate) fn exceeded(&self) -> Option<usize> {
        self.overflowed.load(Ordering::SeqCst).then_some(self.limit)
    }

    /// Writes `bytes` whole, or nothing and remembers the limit was hit.
    fn write_bounded(&mut self, bytes: Bytes) -> Result<(), OutputLimitExceeded> {
        let room = self.pipe.check_write().unwrap_or(0);
        if bytes.len() > room || self.pipe.write(bytes).is_err() {
            self.overflowed.store(true, Ordering::SeqCst);
            return Err(OutputLimitExceeded { limit: self.limit });
        }
        Ok(())
    }

    fn trap(&self) -> StreamError {
        self.overflowed.store(true, Ordering::SeqCst);
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
        // Only WASI 0.3 guests use this path.
        Box::new(self.clone())
    }
}

/// WASI 0.3's stdout and stderr: a write that does not fit fails (the guest's stream gets `error-code`
/// `io`) and marks the output as over its limit.
impl tokio::io::AsyncWrite for BoundedOutput {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(
            self.write_bounded(Bytes::copy_from_slice(buf))
                .map(|()| buf.len())
                .map_err(io::Error::other),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for BoundedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.write_bounded(bytes)
            .map_err(|exceeded| StreamError::Trap(exceeded.into()))
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        match self.pipe.check_write() {
            Ok(room) => Ok(room),
            Err(_) => Err(self.trap()),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for BoundedOutput {
    async fn ready(&mut self) {}
}
