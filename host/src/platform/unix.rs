//! What every Unix provides alike: process IDs and the signal that probes them, reading a directory's
//! entries, `/dev/fd`, `fsync`, renames with flags where the system has them, and dropping read-only
//! pages of the program's own file from the process. macOS takes these
//! paths; Linux takes them where it has nothing better, and all of them when a test asks
//! (`TURNGATE_TEST_PLATFORM=posix`, `linux.rs`).

use std::io;
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd};
use std::path::PathBuf;

use super::{RenameError, boot_id};

/// This process among every process that ever ran on the machine: its ID and, after `@`, the start of
/// the boot's identity (`<pid>@<boot>`, or the ID alone where the boot is not known). A process ID is
/// reused, within a boot and across boots; with the boot, what a process left is known to be dead once
/// the machine booted again, whoever has its ID now.
pub(crate) fn process_mark() -> String {
    let pid = std::process::id();
    match boot_id() {
        Some(boot) => format!("{pid}@{}", boot_prefix(boot)),
        None => pid.to_string(),
    }
}

/// Drops from this process the pages wholly inside `bytes`, a part of the program's read-only data
/// (`include_bytes!`) it has read once and will not soon read again: they stop counting in its
/// resident memory, and a later read faults them in again from the program's file.
pub(crate) fn release_read_only(bytes: &'static [u8]) {
    // SAFETY: `sysconf` reads a constant of the system.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0);
    if page == 0 {
        return;
    }
    let start = (bytes.as_ptr() as usize).next_multiple_of(page);
    let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
    if end <= start {
        return;
    }
    // SAFETY: the range is whole pages inside `bytes`, which is `'static` and never written (a
    // read-only mapping of the program's file): a page dropped there reads the same when it is faulted
    // in again. `madvise` changes nothing else.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

/// Whether the process a [`process_mark`] names is still running: its boot is this one (or unknown)
/// and a process has its ID. (A process of this boot that died and whose ID was reused counts as
/// running; what it left waits for that one.)
pub(crate) fn process_alive(mark: &str) -> bool {
    let (pid, boot) = mark.split_once('@').unwrap_or((mark, ""));
    let this_boot = match (boot, boot_id()) {
        ("", _) | (_, None) => true,
        (boot, Some(current)) => boot == boot_prefix(current),
    };
    this_boot
        && pid
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

/// A boot identity as names keep it: its first 16 characters that are not `-` (of a UUID, 64 bits).
fn boot_prefix(boot: &str) -> String {
    boot.chars().filter(|c| *c != '-').take(16).collect()
}

/// Waits until no rename is under way in `directory` (a descriptor opened for reading its entries) by
/// reading its first entry through a stream of its own (`readdir`, from the start). A rename holds
/// the directory and the file locked from the link count's change to the name's, and reading the
/// entries takes the directory's lock: on Linux `getdents` takes the directory's inode lock; on
/// macOS `getdirentries` locks the directory's vnode, as a rename locks the vnodes of both
/// directories and of the files it moves and replaces (xnu's VFS and HFS+, whose sources are public;
/// APFS keeps the same locking protocol, which only the macOS runners' race tests check).
pub(crate) fn wait_for_directory_renames(directory: impl AsFd) -> io::Result<()> {
    if let Some(entry) = rustix::fs::Dir::read_from(directory)?.read() {
        entry?;
    }
    Ok(())
}

/// `/dev/fd/N`: opening it reaches the file the descriptor holds, whatever stands at the name the
/// descriptor was opened by (macOS duplicates the descriptor; on Linux it is a link to
/// `/proc/self/fd/N`, which opens the file again).
pub(crate) fn descriptor_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/dev/fd/{}", fd.as_raw_fd()))
}

/// `fsync`: a file's data and metadata, or a directory's entries, handed to the storage device (on
/// macOS the drive may still hold them in its own cache: see [`super::flush_data`]).
pub(crate) fn fsync(file: &std::fs::File) -> io::Result<()> {
    Ok(rustix::fs::fsync(file)?)
}

/// Renames with `flags` (`renameat2` on Linux, `renameatx_np` on macOS); a system or file system
/// that has no such rename says so as [`RenameError::Unsupported`].
pub(crate) fn rename_with(
    from_dir: impl AsFd,
    from: &str,
    to_dir: impl AsFd,
    to: &str,
    flags: rustix::fs::RenameFlags,
) -> Result<(), RenameError> {
    use rustix::io::Errno;
    rustix::fs::renameat_with(from_dir, from, to_dir, to, flags).map_err(|error| {
        if error == Errno::INVAL || error == Errno::NOSYS || error == Errno::NOTSUP {
            RenameError::Unsupported
        } else {
            RenameError::Failed(error.into())
        }
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // the tests' own temporary files
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn a_mark_of_another_boot_is_dead_whoever_has_its_id() {
        let mark = process_mark();
        assert!(process_alive(&mark), "{mark}");
        let pid = std::process::id();
        assert!(!process_alive(&format!("{pid}@00000000")) || boot_id().is_none());
        assert!(
            process_alive(&pid.to_string()),
            "a mark without a boot: by its ID"
        );
    }

    #[test]
    fn reading_a_directory_from_a_shared_descriptor_works_again_and_again() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::File::create(dir.path().join("a")).unwrap();
        let shared = std::fs::File::open(dir.path()).unwrap();
        for _ in 0..3 {
            wait_for_directory_renames(&shared).unwrap();
        }
        let empty = tempfile::tempdir().unwrap();
        wait_for_directory_renames(std::fs::File::open(empty.path()).unwrap()).unwrap();
    }

    #[test]
    fn a_descriptor_path_reaches_the_file_held_not_the_one_at_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("entry");
        std::fs::write(&name, "checked").unwrap();
        let held = std::fs::File::open(&name).unwrap();
        let mut replacement = tempfile::NamedTempFile::new_in(dir.path()).unwrap();
        replacement.write_all(b"swapped in").unwrap();
        replacement.persist(&name).unwrap();
        let reached = std::fs::read_to_string(descriptor_path(held.as_fd())).unwrap();
        assert_eq!(reached, "checked");
    }
}
