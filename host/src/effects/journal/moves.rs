//! The filesystem moves the journal is made of, and the check that each moved what was meant.
//!
//! Every move is by name, so each is followed by a look at what now stands where it moved (the device
//! and inode, not followed): if another object was swapped in between the check and the move, the move
//! is put back and the step fails.

use std::io;

use cap_std::fs::{Dir, MetadataExt};

use crate::platform::{self, RenameError};

/// The device and inode of the entry `name` in `dir`, not following it.
pub(super) fn object_at(dir: &Dir, name: &str) -> io::Result<(u64, u64)> {
    let metadata = dir.symlink_metadata(name)?;
    Ok((metadata.dev(), metadata.ino()))
}

/// Moves `from` to `to`, then checks that what arrived is `expected`; if not, moves it back and fails.
pub(super) fn rename_checked(
    from_dir: &Dir,
    from: &str,
    to_dir: &Dir,
    to: &str,
    expected: (u64, u64),
) -> io::Result<()> {
    from_dir.rename(from, to_dir, to)?;
    ensure_arrived(to_dir, to, expected, || to_dir.rename(to, from_dir, from))
}

/// Fails (after `undo`) unless `name` in `dir` is the object `expected`.
pub(super) fn ensure_arrived(
    dir: &Dir,
    name: &str,
    expected: (u64, u64),
    undo: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    if object_at(dir, name)? == expected {
        return Ok(());
    }
    let _ = undo();
    Err(io::Error::new(
        io::ErrorKind::ResourceBusy,
        "another file was swapped in while it was being moved",
    ))
}

/// Swaps two directory entries atomically ([`platform::exchange_entries`]). Where the system or the
/// file system cannot, the old entry is linked aside, the new one renamed over it, and the old one
/// moved to where the new one was: the same end state, with the old file linked twice for a moment.
pub(super) fn exchange(a_dir: &Dir, a: &str, b_dir: &Dir, b: &str) -> io::Result<()> {
    match platform::exchange_entries(a_dir, a, b_dir, b) {
        Ok(()) => Ok(()),
        Err(RenameError::Unsupported) => {
            let aside = format!("{a}.old");
            b_dir.hard_link(b, a_dir, &aside)?;
            a_dir.rename(a, b_dir, b)?;
            a_dir.rename(&aside, a_dir, a)
        }
        Err(RenameError::Failed(e)) => Err(e),
    }
}

/// Renames `from` to `to` unless `to` exists ([`platform::rename_if_absent`]; elsewhere a link, which
/// fails when the name is taken, and an unlink).
pub(crate) fn rename_no_replace(
    from_dir: &Dir,
    from: &str,
    to_dir: &Dir,
    to: &str,
) -> io::Result<()> {
    match platform::rename_if_absent(from_dir, from, to_dir, to) {
        Ok(()) => Ok(()),
        Err(RenameError::Unsupported) => {
            from_dir.hard_link(from, to_dir, to)?;
            from_dir.remove_file(from)
        }
        Err(RenameError::Failed(e)) => Err(e),
    }
}
