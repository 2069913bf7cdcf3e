//! A cancellation signal: set once (on Ctrl-C, an MCP `notifications/cancelled`, a dropped client),
//! seen by whoever holds a clone.
//!
//! The turn gate checks it between calls (the calls after it are answered `cancelled`); the sandbox
//! stops a running call when it is set, and a stopped call applies nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cancellation signal shared by clones.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

#[derive(Debug, Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Cancel {
    /// A signal that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Sets the signal and wakes every waiter.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether the signal is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Resolves once the signal is set.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
