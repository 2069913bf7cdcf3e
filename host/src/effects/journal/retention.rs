//! How much of the past the journal keeps, and pruning the rest.
//!
//! Retention is bounded by count and by pre-image bytes; the oldest finished calls are pruned first
//! (they can then no longer be undone). The log is rewritten without them before their pre-images go,
//! so a crash between the two leaves only unused pre-images.

use std::collections::BTreeSet;

use super::{CallState, Journal, JournalEntry};
use crate::effects::{ChangeKind, EffectError};
use crate::root::Root;

/// How much of the past the journal keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Most calls kept (default 1000).
    pub max_calls: usize,
    /// Most bytes of pre-images kept (default 512 MiB).
    pub max_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_calls: 1000,
            max_bytes: 512 << 20,
        }
    }
}

impl Journal {
    /// Drops the oldest finished calls (and their pre-images) while the journal is over its retention.
    /// The calls written ahead are settled first, so the rewritten log no longer carries their content.
    pub(super) fn prune(&mut self, root: &Root) -> Result<(), EffectError> {
        let finished = |c: &JournalEntry| {
            matches!(
                c.state,
                CallState::Applied | CallState::Undone | CallState::RolledBack
            )
        };
        let mut bytes: u64 = self.calls.values().map(JournalEntry::pre_bytes).sum();
        if self.calls.len() <= self.retention.max_calls && bytes <= self.retention.max_bytes {
            return Ok(());
        }
        // Prune down to nine tenths of the bounds, so the log is not rewritten at every call.
        let keep_calls = self.retention.max_calls - self.retention.max_calls / 10;
        let keep_bytes = self.retention.max_bytes - self.retention.max_bytes / 10;
        let mut dropped = BTreeSet::new();
        for call in self.calls.values() {
            if self.calls.len() - dropped.len() <= keep_calls && bytes <= keep_bytes {
                break;
            }
            if !finished(call) {
                break;
            }
            dropped.insert(call.seq);
            bytes -= call.pre_bytes();
        }
        if dropped.is_empty() {
            return Ok(());
        }
        self.settle_ahead(root)?;
        let removed: Vec<JournalEntry> = dropped
            .iter()
            .filter_map(|seq| self.calls.remove(seq))
            .collect();
        if let Err(error) = self.rewrite() {
            self.calls
                .extend(removed.into_iter().map(|call| (call.seq, call)));
            return Err(error);
        }
        for call in removed {
            for change in &call.changes {
                if let Some(pre) = &change.pre {
                    let _ = if change.kind == ChangeKind::RemoveDir {
                        self.pre.remove_dir(pre)
                    } else {
                        self.pre.remove_file(pre)
                    };
                }
            }
        }
        Ok(())
    }
}
