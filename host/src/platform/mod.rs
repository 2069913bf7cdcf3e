//! What turngate needs from the operating system beyond the file and network calls every platform
//! shares: each function here serves one property and says how each platform provides it.
//!
//! The rest of the crate calls only this module; nothing outside it asks which system it runs on.
//! `unix.rs` holds what every Unix does alike, `linux.rs` and `macos.rs` what differs; Windows is the
//! next implementation of the same functions. The functions:
//!
//! - the identities the journal's write-ahead log is keyed on: [`machine_id`], [`boot_id`], and the
//!   marks of processes made from them ([`process_mark`], [`process_alive`]);
//! - [`wait_for_directory_renames`], the wait that closes the hard-link rename race in the scope check;
//! - [`descriptor_path`], the path a library opens to reach a descriptor already checked (the
//!   precompiled cache's entries);
//! - [`own_program`], [`end_with_this_thread`] and [`end_with_parent`], to start this program again as a
//!   compiler that does not outlive the server that started it;
//! - [`lower_this_thread`], the priority of work done ahead (compiles nobody waits for yet);
//! - [`release_freed_heap`], giving back to the system what a compile freed, and [`release_read_only`],
//!   dropping from the process the bundled tools' built-in code once it is in the cache;
//! - [`flush_data`] and [`flush_entries`], what the journal's promise after a power loss rests on;
//! - [`exchange_entries`] and [`rename_if_absent`], the renames the journal applies with, which say
//!   when the system or the file system has none ([`RenameError::Unsupported`]: the journal then
//!   takes its fallbacks, `effects/journal/moves.rs`).
//!
//! Linux takes `unix.rs`'s paths, the ones macOS takes, when a test asks
//! (`TURNGATE_TEST_PLATFORM=posix`): `tests/posix.rs` runs the containment, least-authority, journal
//! and scope suites on them, so every CI run exercises them here, where no Mac is.

use std::io;
use std::os::fd::AsFd;
use std::sync::OnceLock;

use rustix::fs::RenameFlags;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!(
    "turngate runs on Linux and macOS: `platform/` has no implementation for this system yet"
);
mod unix;

pub(crate) use os::{
    descriptor_path, end_with_parent, end_with_this_thread, flush_data, flush_entries,
    lower_this_thread, own_program, release_freed_heap, wait_for_directory_renames,
};
pub(crate) use unix::{process_alive, process_mark, release_read_only};

/// This machine's identity (Linux: `/etc/machine-id`, else the host name; macOS: the host UUID). A
/// call written ahead records it, so a root that several machines mount leaves each machine's calls to
/// that machine.
pub(crate) fn machine_id() -> &'static str {
    static MACHINE: OnceLock<String> = OnceLock::new();
    MACHINE.get_or_init(|| {
        crate::test_hooks::machine_id()
            .map(str::to_owned)
            .or_else(os::machine_id)
            .unwrap_or_default()
    })
}

/// This boot's identity (Linux: `/proc/sys/kernel/random/boot_id`; macOS: `kern.bootsessionuuid`),
/// new at every boot; `None` where the system does not say. What a call wrote in another boot may have
/// been lost with the power.
pub(crate) fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(|| {
        crate::test_hooks::boot_id()
            .map(str::to_owned)
            .or_else(os::boot_id)
    })
    .as_deref()
}

/// Why a rename with flags did not happen.
#[derive(Debug)]
pub(crate) enum RenameError {
    /// The system or the file system has no such rename (`EINVAL`, `ENOSYS`, `ENOTSUP`).
    Unsupported,
    /// It has one, and the rename failed.
    Failed(io::Error),
}

/// Swaps the entries `a` in `a_dir` and `b` in `b_dir` in one step (`renameat2(RENAME_EXCHANGE)`,
/// `renameatx_np(RENAME_SWAP)`).
pub(crate) fn exchange_entries(
    a_dir: impl AsFd,
    a: &str,
    b_dir: impl AsFd,
    b: &str,
) -> Result<(), RenameError> {
    os::rename_with(a_dir, a, b_dir, b, RenameFlags::EXCHANGE)
}

/// Renames `from` to `to` in one step that fails if `to` exists (`renameat2(RENAME_NOREPLACE)`,
/// `renameatx_np(RENAME_EXCL)`).
pub(crate) fn rename_if_absent(
    from_dir: impl AsFd,
    from: &str,
    to_dir: impl AsFd,
    to: &str,
) -> Result<(), RenameError> {
    os::rename_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE)
}
