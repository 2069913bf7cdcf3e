//! The stdio transport: one JSON-RPC message per line, each line checked by [`inbound`](super::inbound)
//! and every rejected line answered.
//!
//! rmcp's line transport drops a line that is not JSON, a line longer than its bound and a message
//! serde_json will not nest that deep, without a word (its authors chose silence for unparsable input,
//! rust-sdk#938), so a client waiting for the answer to such a request waits forever. This transport
//! reads the lines itself (never holding more than [`MAX_MESSAGE_BYTES`] of one), answers each rejected
//! line with the JSON-RPC error `inbound` gives it, and passes the others to rmcp.
//!
//! A write that fails (the reader of stdout went away: `turngate mcp | true`, a client that stopped
//! reading) ends reading too, so the session ends, although the client may still write.
//!
//! `receive` is polled in a `select!` and may be dropped at any await, so its state lives in the
//! struct: a partly read line stays buffered, and bytes not yet written stay queued in [`Output`] for
//! the next write.

use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::MAX_MESSAGE_BYTES;
use super::inbound::{Checked, IdScan, Rejected, check};

/// Reads messages from `R`, writes messages to `W`.
pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    /// The line being read.
    line: Vec<u8>,
    /// Set while the rest of a line longer than [`MAX_MESSAGE_BYTES`] is skipped; it reads the line's
    /// `id` as it goes by.
    skipping: Option<IdScan>,
    output: Arc<Output<W>>,
    /// An error answer was queued and may not have been written yet.
    unflushed: bool,
}

/// The writing side, shared by the answers of concurrent requests. A message is queued whole before
/// anything awaits, and only the holder of `sink` writes the queue out, a chunk at a time, removing
/// what was written: an abandoned write loses nothing and leaves no half line for another message.
struct Output<W> {
    queue: std::sync::Mutex<Vec<u8>>,
    sink: Mutex<W>,
    /// Set once a write has failed: the reader of stdout is gone, and the session with it (reading
    /// ends, so rmcp ends the session, whatever the client still writes).
    gone: tokio::sync::watch::Sender<bool>,
}

/// The most bytes handed to one write.
const WRITE_CHUNK: usize = 64 << 10;

impl<W: AsyncWrite + Unpin> Output<W> {
    /// Queues one message as a line.
    fn queue(&self, message: &[u8]) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.extend_from_slice(message);
        queue.push(b'\n');
    }

    /// Writes out everything queued.
    async fn flush(&self) -> io::Result<()> {
        let flushed = self.write_queued().await;
        if flushed.is_err() {
            self.gone.send_replace(true);
        }
        flushed
    }

    /// Waits until a write has failed.
    async fn gone(&self) {
        let mut gone = self.gone.subscribe();
        let _ = gone.wait_for(|gone| *gone).await;
    }

    async fn write_queued(&self) -> io::Result<()> {
        let mut sink = self.sink.lock().await;
        loop {
            let chunk = {
                let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.is_empty() {
                    break;
                }
                queue[..queue.len().min(WRITE_CHUNK)].to_vec()
            };
            // `write` either writes some bytes or, abandoned, none: the rest stays queued.
            let written = sink.write(&chunk).await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..written);
        }
        sink.flush().await
    }
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading messages from `read` and writing them to `write`.
    pub fn new(read: R, write: W) -> Self {
        StdioTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            output: Arc::new(Output {
                queue: std::sync::Mutex::new(Vec::new()),
                sink: Mutex::new(write),
                gone: tokio::sync::watch::Sender::new(false),
            }),
            unflushed: false,
        }
    }

    /// Reads up to the end of the next line; `None` at the end of input. An oversized line comes back
    /// as its rejection.
    async fn next_line(&mut self) -> io::Result<Option<Result<(), Rejected>>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(None);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let piece = &available[..take];
            let mut done = None;
            if let Some(scan) = &mut self.skipping {
                scan.feed(piece);
                if newline.is_some() {
                    done = Some(Err(Rejected::oversized(MAX_MESSAGE_BYTES, scan)));
                }
            } else if self.line.len() + take > MAX_MESSAGE_BYTES + 1 {
                // Over the limit (the newline not counted): from here on the line is only scanned.
                let mut scan = IdScan::default();
                scan.feed(&self.line);
                scan.feed(piece);
                self.line.clear();
                if newline.is_some() {
                    done = Some(Err(Rejected::oversized(MAX_MESSAGE_BYTES, &scan)));
                } else {
                    self.skipping = Some(scan);
                }
            } else {
                self.line.extend_from_slice(piece);
                if newline.is_some() {
                    done = Some(Ok(()));
                }
            }
            self.read.consume(take);
            if let Some(done) = done {
                if done.is_err() {
                    self.skipping = None;
                }
                return Ok(Some(done));
            }
        }
    }

    /// Answers a rejected line.
    async fn answer(&mut self, rejected: &Rejected) -> io::Result<()> {
        tracing::debug!("answering a rejected message: {}", rejected.message);
        self.output.queue(rejected.to_json().to_string().as_bytes());
        self.unflushed = true;
        self.output.flush().await?;
        self.unflushed = false;
        Ok(())
    }
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let queued = serde_json::to_vec(&item).map(|message| output.queue(&message));
        async move {
            queued?;
            output.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.unflushed {
                if let Err(e) = self.output.flush().await {
                    tracing::error!("writing to stdout: {e}");
                    return None;
                }
                self.unflushed = false;
            }
            let output = self.output.clone();
            let next = tokio::select! {
                next = self.next_line() => next,
                () = output.gone() => return None,
            };
            let read = match next {
                Ok(Some(read)) => read,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
            };
            let checked = match read {
                Err(rejected) => Checked::Rejected(rejected),
                Ok(()) => {
                    let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    let checked = if line.trim_ascii().is_empty() {
                        Checked::Ignored
                    } else {
                        check(line)
                    };
                    self.line.clear();
                    checked
                }
            };
            match checked {
                Checked::Message(message) => return Some(message),
                Checked::Ignored => {}
                Checked::Rejected(rejected) => {
                    if let Err(e) = self.answer(&rejected).await {
                        tracing::error!("writing to stdout: {e}");
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.output.flush().await
    }
}
