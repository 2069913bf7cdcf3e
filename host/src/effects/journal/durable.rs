//! Flushing exactly what the journal relies on, and nothing of anybody else's: a file's data (its
//! bytes and its size), a directory's entries, each as the platform makes it durable
//! ([`crate::platform::flush_data`], [`crate::platform::flush_entries`]: `fdatasync` and `fsync` on
//! Linux, `F_FULLFSYNC` on macOS). Each flush is recorded for the crash tests
//! ([`crate::test_hooks::made_durable`]).
//!
//! The entries the log is found by (the state directory's in the root, the log's in the state
//! directory) are flushed once for each log, by the first apply that relies on them; the log's layout
//! line then tells later processes so (`log.rs`).

use std::io;

use cap_std::fs::{Dir, OpenOptions};

use crate::test_hooks::made_durable;

/// Makes the data of `file` durable.
pub(crate) fn sync_file(file: &std::fs::File) -> io::Result<()> {
    crate::platform::flush_data(file)?;
    made_durable(file);
    Ok(())
}

/// Makes the entries of `dir` durable (through a descriptor opened for reading: a directory handle may
/// not allow a flush).
pub(crate) fn sync_dir(dir: &Dir) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    cap_fs_ext::OpenOptionsMaybeDirExt::maybe_dir(&mut options, true);
    let opened = dir.open_with(".", &options)?.into_std();
    crate::platform::flush_entries(&opened)?;
    made_durable(&opened);
    Ok(())
}
