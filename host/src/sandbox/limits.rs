//! Per-call resource limits and the store's resource limiter that enforces memory with a typed error.

use std::time::Duration;

use wasmtime::ResourceLimiter;

use crate::network::NetworkLimits;

/// Limits applied to every call. Each limit hit is reported as its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for instantiation plus the call. Default 10 s.
    pub wall_time: Duration,
    /// Linear memory of one call's instance, in bytes (all its memories together). Default 64 MiB.
    pub memory_bytes: usize,
    /// Bytes of output: the returned result, and each of stdout and stderr. Default 1 MiB.
    pub output_bytes: usize,
    /// Bytes a call may stage (write into its view) before they are applied; past it, writes fail with
    /// `insufficient-space`. Default 256 MiB.
    pub staged_bytes: u64,
    /// What a call may do over the network (requests, bytes, timeouts), when its policy grants any.
    pub network: NetworkLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall_time: Duration::from_secs(10),
            memory_bytes: 64 << 20,
            output_bytes: 1 << 20,
            staged_bytes: 256 << 20,
            network: NetworkLimits::default(),
        }
    }
}

/// Most component-model handles a call may hold at once: resources (descriptors, requests, pollables),
/// and for a WASI 0.3 tool every end of a stream or future and every subtask. Each is host memory the
/// memory limit does not see; past this the guest traps. (wasmtime's default is 100,000.)
pub(crate) const MAX_HANDLES: usize = 50_000;

/// Most table elements a call may grow to; tables hold function references, and no honest tool needs
/// more than this.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The error a memory growth beyond the limit traps with, so the outcome can be attributed reliably (a
/// Rust guest turns a refused `memory.grow` into an abort indistinguishable from a panic).
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {limit} bytes exceeded (asked for {desired} bytes)")]
pub(crate) struct MemoryLimitExceeded {
    pub(crate) limit: usize,
    pub(crate) desired: usize,
}

/// Tracks memory across all of a call's linear memories against [`Limits::memory_bytes`].
pub(crate) struct CallLimiter {
    limit: usize,
    in_use: usize,
}

impl CallLimiter {
    pub(crate) fn new(limit: usize) -> Self {
        CallLimiter { limit, in_use: 0 }
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.in_use - current.min(self.in_use) + desired;
        if after > self.limit {
            return Err(MemoryLimitExceeded {
                limit: self.limit,
                desired: after,
            }
            .into());
        }
        self.in_use = after;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
