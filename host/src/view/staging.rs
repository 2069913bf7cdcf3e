//! The upper layer of a view: the staged files holding everything the call wrote.
//!
//! Staged files live flat in the root's staging directory (`.turngate/staging/`, see
//! `Root::staging_dir`), named by the process (its ID and boot, `crate::platform::process_mark`), the
//! call's token and a number (`<pid>@<boot>-<token>-<n>`;
//! which location each one stands for is the view's business), on the root's filesystem so the effect
//! pipeline can move them into place with a rename. Whatever a call staged and did not apply is removed
//! when its staging is dropped: a call that traps, times out or is cancelled leaves no temporary file
//! anywhere. The bytes a call may
//! stage are bounded ([`Limits::staged_bytes`](crate::sandbox::Limits)).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, File, OpenOptions};

/// Where in the state directory each call's staging directory is made.
pub(crate) const STAGING_DIR: &str = "staging";

/// The bytes a call has staged, against its limit; shared by the view and every stream it hands out.
#[derive(Debug)]
pub(crate) struct Quota {
    used: AtomicU64,
    limit: u64,
}

impl Quota {
    pub(crate) fn new(limit: u64) -> Arc<Quota> {
        Arc::new(Quota {
            used: AtomicU64::new(0),
            limit,
        })
    }

    /// Accounts for a staged file growing from `old` to `new` bytes; `false` (and nothing accounted)
    /// when that would pass the limit.
    fn grow(&self, old: u64, new: u64) -> bool {
        if new <= old {
            return true;
        }
        let delta = new - old;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let Some(after) = used.checked_add(delta).filter(|a| *a <= self.limit) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }
}

/// One staged file: the open handle and how large it has grown. Its content reaches the disk when the
/// journal applies it (a tool's `sync` of a staged file has nothing to do before then: nobody can see
/// the file until it is applied, and the journal makes it durable first).
#[derive(Debug, Clone)]
pub(crate) struct Staged {
    /// The file's name in the staging directory.
    pub(crate) name: String,
    pub(crate) file: Arc<std::fs::File>,
    high_water: Arc<AtomicU64>,
    quota: Arc<Quota>,
}

impl Staged {
    /// Accounts for a write that ends at byte `end`; `false` when the call's staging limit is reached.
    pub(crate) fn reserve(&self, end: u64) -> bool {
        let old = self.high_water.fetch_max(end, Ordering::Relaxed);
        if end <= old || self.quota.grow(old, end) {
            true
        } else {
            // Put the mark back where it was, unless another writer moved it since.
            let _ =
                self.high_water
                    .compare_exchange(end, old, Ordering::Relaxed, Ordering::Relaxed);
            false
        }
    }
}

/// A call's part of the staging directory: the files it stages there, under names of its own.
pub(crate) struct Staging {
    dir: Arc<Dir>,
    token: String,
    created: Vec<String>,
    quota: Arc<Quota>,
}

impl Staging {
    /// A call's staging in `dir` (the root's staging directory).
    pub(crate) fn new(dir: Arc<Dir>, quota: Arc<Quota>) -> Staging {
        Staging {
            dir,
            // The process first: the journal's recovery removes what a dead process left.
            token: format!(
                "{}-{:016x}",
                crate::platform::process_mark(),
                fastrand::u64(..)
            ),
            created: Vec::new(),
            quota,
        }
    }

    /// The staging directory's handle (for moving staged files into place).
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A new, empty staged file.
    pub(crate) fn new_file(&mut self) -> io::Result<Staged> {
        let name = format!("{}-{}", self.token, self.created.len());
        let file = self.dir.open_with(
            &name,
            OpenOptions::new().read(true).write(true).create_new(true),
        )?;
        self.created.push(name.clone());
        Ok(Staged {
            name,
            file: Arc::new(file.into_std()),
            high_water: Arc::new(AtomicU64::new(0)),
            quota: self.quota.clone(),
        })
    }

    /// A staged copy of `source` (copy-up before a write to an existing file).
    pub(crate) fn copy_of(&mut self, source: File, len: u64) -> io::Result<Option<Staged>> {
        let staged = self.new_file()?;
        if !staged.reserve(len) {
            return Ok(None);
        }
        let mut source = source.into_std();
        let mut target = &*staged.file;
        io::copy(&mut source, &mut target)?;
        Ok(Some(staged))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Whatever was not moved into place goes (a file that was is no longer there to remove).
        for name in &self.created {
            let _ = self.dir.remove_file(name);
        }
    }
}
