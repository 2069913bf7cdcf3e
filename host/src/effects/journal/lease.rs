//! A worker's exclusive hold on a root for a whole job.
//!
//! An exclusive `flock` on `.turngate/lease`, so the lookup, run and apply of a call is atomic with
//! respect to every other worker. It is a file of its own because a `flock` is per open file: the
//! journal takes and drops `lock` around each operation, which would release a lease held on the same
//! file.

use std::fs::File;

use super::state::{open_own_dir, open_own_file};
use super::{LEASE_FILE, PRE_DIR, state_dir};
use crate::effects::EffectError;
use crate::root::{Root, STATE_DIR};

/// A worker's exclusive hold on a root, released when dropped, or by the kernel when the process dies.
#[derive(Debug)]
pub struct Lease {
    /// Open for as long as the lease is held: closing it releases the lock.
    _locked: File,
}

impl Lease {
    /// Takes the lease of `root` if no other process (or task) holds it; `None` when one does.
    pub fn try_take(root: &Root) -> Result<Option<Lease>, EffectError> {
        let state = state_dir(root)?;
        open_own_dir(&state, STATE_DIR, PRE_DIR)?;
        let file = open_own_file(&state, STATE_DIR, LEASE_FILE)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lease { _locked: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(EffectError::Journal(format!("cannot take the lease: {e}")))
            }
        }
    }
}
