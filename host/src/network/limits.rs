//! Per-call network limits, and the typed error a call is stopped with when it exceeds one.

use std::time::Duration;

/// What one call may do over the network. Every limit holds inside the call's wall time, which bounds
/// everything besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkLimits {
    /// Requests one call may make (denied ones included). Default 16.
    pub max_requests: u32,
    /// Bytes of request bodies one call may send, all requests together. Default 1 MiB.
    pub max_bytes_sent: u64,
    /// Bytes of response bodies one call may receive, all requests together. Default 8 MiB.
    pub max_bytes_received: u64,
    /// Longest wait for a connection (TCP and TLS). Default 5 s; a tool may ask for less.
    pub connect_timeout: Duration,
    /// Longest wait from sending a request to the response's head. Default 5 s; a tool may ask for less.
    pub first_byte_timeout: Duration,
    /// Longest wait between two pieces of a response body. Default 5 s; a tool may ask for less.
    pub between_bytes_timeout: Duration,
}

impl Default for NetworkLimits {
    fn default() -> Self {
        NetworkLimits {
            max_requests: 16,
            max_bytes_sent: 1 << 20,
            max_bytes_received: 8 << 20,
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(5),
            between_bytes_timeout: Duration::from_secs(5),
        }
    }
}

/// A network limit a call exceeded: the call is stopped and nothing it did applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkLimitError {
    /// More requests than [`NetworkLimits::max_requests`].
    #[error("more than {limit} network requests")]
    Requests {
        /// The limit in force.
        limit: u32,
    },
    /// More request body bytes than [`NetworkLimits::max_bytes_sent`].
    #[error("more than {limit} bytes sent")]
    BytesSent {
        /// The limit in force.
        limit: u64,
    },
    /// More response body bytes than [`NetworkLimits::max_bytes_received`].
    #[error("more than {limit} bytes received")]
    BytesReceived {
        /// The limit in force.
        limit: u64,
    },
    /// No connection within [`NetworkLimits::connect_timeout`].
    #[error("no connection within {limit:?}")]
    Connect {
        /// The limit in force.
        limit: Duration,
    },
    /// No response within [`NetworkLimits::first_byte_timeout`].
    #[error("no response within {limit:?}")]
    FirstByte {
        /// The limit in force.
        limit: Duration,
    },
    /// The response body stalled longer than [`NetworkLimits::between_bytes_timeout`].
    #[error("the response stalled for {limit:?}")]
    BetweenBytes {
        /// The limit in force.
        limit: Duration,
    },
}
