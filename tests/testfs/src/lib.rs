//! An in-memory FUSE file system for turngate's tests, mounted in the test process itself.
//!
//! [`TestFs::mount`] mounts a fresh, empty file system on a new directory under the temporary
//! directory and serves it from a background thread; the tests then use it through ordinary system
//! calls on [`TestFs::path`]. It mounts through `/dev/fuse` directly, which needs root (there is no
//! `fusermount`). Two independent [`Options`] make it behave like file systems the project meets in
//! the field:
//!
//! - **Name folding** stands in for macOS APFS, ext4 casefold and vfat: a name matches whatever entry
//!   has the same key, NFC(lowercase(NFD(name))), so case and Unicode normalization do not matter,
//!   while each entry keeps the spelling it was made with (readdir shows it). Making a name whose key
//!   is taken acts on the entry that has it: mkdir, an exclusive create, symlink and link answer
//!   EEXIST, and a rename onto it replaces that entry, which then takes the new spelling. (The Linux
//!   kernel drops a rename between two spellings of one entry, the same inode, before it reaches the
//!   file system, so that rename keeps the old spelling here.)
//! - **Power-loss simulation** stands in for LazyFS on a journaling file system. Besides the live
//!   state processes see, the file system keeps what would survive a power loss:
//!   - a file's data (bytes, size, mtime and ctime) as of its last fsync or fdatasync, per inode;
//!     a truncate is data too. A file on disk whose data was never synced comes back empty, ext4's
//!     delayed-allocation "zero-length file after a crash";
//!   - the metadata operations (create, mknod, mkdir, symlink, link, unlink, rmdir, every kind of
//!     rename, and chmod, chown and utimens) in one ordered journal. Any fsync of a file and any
//!     fsync of a directory commits the whole journal up to that moment, as a journaling file system's
//!     commit does. A power loss keeps what is committed and, of the operations still pending, the
//!     prefix a [`Keep`] names: none, all (LazyFS's behaviour: metadata always survives), or the
//!     first n.
//!
//!   [`TestFs::power_loss`] stops the machine: every request answers EIO from then on.
//!   [`TestFs::reboot`] turns what survives into the live state and remounts the file system at the
//!   same path, so the kernel's caches start empty; inode numbers stay as they were and `st_dev`
//!   changes. [`TestFs::cut_at`] arms a power loss that strikes at the nth occurrence of an operation
//!   on a path, before or after it runs, and [`TestFs::trace`] records every operation that could
//!   be cut, so one traced run lists every cut point of a crash matrix ([`Cut::every`]).
//!
//! Without power-loss simulation everything is live and nothing is bookkept; a power loss then loses
//! nothing.
//!
//! # What it does not model
//!
//! - A file's data is all or nothing as of its last fsync: no torn or reordered writes within a file,
//!   no partial page, and no ext4 `auto_da_alloc` (a rename or truncate over a file does not flush its
//!   data: the worst case is what is modeled).
//! - The journal keeps its order: a power loss keeps a prefix of the pending operations, never an
//!   arbitrary subset, and a directory fsync commits everything (ext4 and XFS behave so; a file system
//!   that syncs only that directory is not modeled).
//! - `sync(2)` and `syncfs(2)` make nothing durable (FUSE does not forward them to a file system like
//!   this one); a test's baseline uses [`TestFs::sync_all`]. An `O_SYNC` or `O_DSYNC` write reaches the
//!   file system as a write and then an fsync, and counts as both.
//! - No extended attributes (they answer EOPNOTSUPP), no POSIX ACLs; file locks are the kernel's own.
//!   Reads do not update atime. `statfs` reports a fixed 4 GiB, and space never runs out; a file larger
//!   than 1 GiB answers EFBIG (files live in memory, holes included).
//! - Permissions are the kernel's checks (`default_permissions`), made against the modes and owners
//!   stored here; the mount is `nodev` and `nosuid`, so device nodes can be made but not opened.
//! - The file system is served by one thread: requests are answered one at a time.

// The file system lives in memory under a temporary mount point, outside any root that the workspace's
// disallowed-methods lint guards: the tests here and the mount handling open, rename and remove paths
// with std::fs as any process using a file system would.
#![allow(clippy::disallowed_methods)]

#[cfg(target_os = "linux")]
mod fs;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod tree;

#[cfg(target_os = "linux")]
pub use linux::*;

use std::path::Path;

/// A directory on a file system that folds case and Unicode forms, for roots the folding tests make
/// beneath it. On Linux, this file system with [`Options::folding`] alone, mounted by this process on
/// first use and shared by its tests. On macOS, the temporary directory: APFS folds both by default,
/// so there the tests meet the file system users have.
pub fn folding_dir() -> &'static Path {
    #[cfg(target_os = "linux")]
    {
        shared(Options {
            folding: true,
            power_loss: false,
            ..Options::default()
        })
        .path()
    }
    #[cfg(not(target_os = "linux"))]
    {
        static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
        DIR.get_or_init(std::env::temp_dir)
    }
}
