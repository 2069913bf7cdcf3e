//! The upper layer of a view: a private staging directory holding every file the call wrote.
//!
//! Staged files live flat in `.turngate/staging/<call>/` (named by number; which location each one stands
//! for is the view's business), on the root's filesystem so the effect pipeline can later move them
//! into place with a same-directory-tree rename. The directory is created on the first write, so a call
//! that writes nothing leaves nothing behind, and removed when the view is dropped: a call that traps,
//! times out or is cancelled leaves no temporary file anywhere. The bytes a call may stage are bounded
//! ([`Limits::staged_bytes`](crate::sandbox::Limits)).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cap_std::fs::{Dir, File, OpenOptions};

use crate::root::state_subdir;

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

/// One staged file: the open handle, how large it has grown, and whether its content is on disk.
#[derive(Debug, Clone)]
pub(crate) struct Staged {
    /// The file's name in the staging directory.
    pub(crate) name: String,
    pub(crate) file: Arc<std::fs::File>,
    high_water: Arc<AtomicU64>,
    synced: Arc<AtomicBool>,
    quota: Arc<Quota>,
}

impl Staged {
    /// Accounts for a write that ends at byte `end`; `false` when the call's staging limit is reached.
    pub(crate) fn reserve(&self, end: u64) -> bool {
        let old = self.high_water.fetch_max(end, Ordering::Relaxed);
        if end <= old {
            self.synced.store(false, Ordering::Relaxed);
            return true;
        }
        if self.quota.grow(old, end) {
            self.synced.store(false, Ordering::Relaxed);
            true
        } else {
            // Put the mark back where it was, unless another writer moved it since.
            let _ =
                self.high_water
                    .compare_exchange(end, old, Ordering::Relaxed, Ordering::Relaxed);
            false
        }
    }

    /// Flushes the content to disk (once; again only after a later write).
    pub(crate) fn sync(&self) -> io::Result<()> {
        if !self.synced.load(Ordering::Relaxed) {
            self.file.sync_all()?;
            self.synced.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// A call's staging directory.
pub(crate) struct Staging {
    parent: Dir,
    name: String,
    dir: Dir,
    next: u64,
    quota: Arc<Quota>,
}

impl Staging {
    /// Creates a fresh staging directory for one call.
    pub(crate) fn create(root: &Dir, quota: Arc<Quota>) -> io::Result<Staging> {
        let parent = state_subdir(root, STAGING_DIR)?;
        let mut attempt = 0u32;
        loop {
            let name = format!("{}-{:016x}", std::process::id(), fastrand::u64(..));
            match parent.create_dir(&name) {
                Ok(()) => {
                    let dir = cap_fs_ext::DirExt::open_dir_nofollow(&parent, &name)?;
                    return Ok(Staging {
                        parent,
                        name,
                        dir,
                        next: 0,
                        quota,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The staging directory's handle (for moving staged files into place).
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A new, empty staged file.
    pub(crate) fn new_file(&mut self) -> io::Result<Staged> {
        let name = self.next.to_string();
        self.next += 1;
        let file = self.dir.open_with(
            &name,
            OpenOptions::new().read(true).write(true).create_new(true),
        )?;
        Ok(Staged {
            name,
            file: Arc::new(file.into_std()),
            high_water: Arc::new(AtomicU64::new(0)),
            synced: Arc::new(AtomicBool::new(false)),
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
        // Whatever was not moved into place goes. A failure here leaves a directory that the journal's
        // recovery removes at the next start.
        let _ = self.parent.remove_dir_all(&self.name);
    }
}
