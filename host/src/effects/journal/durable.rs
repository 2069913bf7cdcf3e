//! Flushing exactly what the journal relies on, and nothing of anybody else's: a file's data
//! (`fdatasync`: its bytes and its size), a directory's entries (`fsync` of the directory). Each flush
//! is recorded for the crash tests ([`crate::test_hooks::made_durable`]).
//!
//! The entries the log is found by (the state directory's in the root, the log's in the state
//! directory) are flushed once, by the first apply that relies on them; the layout mark then tells later
//! processes so, naming the log it vouches for (a log made again since is flushed again). The mark is
//! written only after the flush, so wherever it is found the flush was done.

use std::io::{self, Read, Write};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use super::state;

use crate::test_hooks::made_durable;

/// Makes the data of `file` durable.
pub(super) fn sync_file(file: &std::fs::File) -> io::Result<()> {
    file.sync_data()?;
    made_durable(file);
    Ok(())
}

/// Makes the entries of `dir` durable (`fsync` through a descriptor opened for reading: a directory
/// handle may not allow it).
pub(super) fn sync_dir(dir: &Dir) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    cap_fs_ext::OpenOptionsMaybeDirExt::maybe_dir(&mut options, true);
    let opened = dir.open_with(".", &options)?.into_std();
    opened.sync_all()?;
    made_durable(&opened);
    Ok(())
}

/// The layout mark's name in the state directory.
pub(super) const LAYOUT_MARK: &str = "layout";

/// Whether the layout mark vouches for the log with inode `log`: the entries it is found by are
/// durable.
pub(super) fn layout_marked(state: &Dir, log: u64) -> bool {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let Ok(file) = state.open_with(LAYOUT_MARK, &options) else {
        return false;
    };
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).is_ok() && text == log.to_string()
}

/// Leaves the layout mark for the log with inode `log`, once the entries it is found by are durable.
/// The mark itself needs no flush: if it is lost, the next apply flushes again.
pub(super) fn mark_layout(state: &Dir, log: u64) -> io::Result<()> {
    let (mut file, temporary) = state::create_temporary(state, LAYOUT_MARK)?;
    let written = file
        .write_all(log.to_string().as_bytes())
        .and_then(|()| state.rename(&temporary, state, LAYOUT_MARK));
    if written.is_err() {
        let _ = state.remove_file(&temporary);
    }
    written
}
