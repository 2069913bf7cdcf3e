//! macOS's side of the platform layer: the host and boot-session UUIDs, `kqueue`, quality of service
//! classes, `F_FULLFSYNC` and the malloc zones; reading a directory, `/dev/fd` and `renameatx_np` are
//! `unix.rs`'s.
//!
//! Checked here by `cargo check` for `aarch64-apple-darwin` and `x86_64-apple-darwin` only: nothing on
//! the project's Linux machines runs a macOS binary.

use std::ffi::CStr;
use std::io;
use std::path::PathBuf;
use std::process::Command;

use super::unix::fsync;
pub(crate) use super::unix::{descriptor_path, rename_with, wait_for_directory_renames};

/// The host UUID (`gethostuuid`), as `IOPlatformUUID` reports it.
pub(super) fn machine_id() -> Option<String> {
    let mut uuid = [0u8; 16];
    let wait = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    // SAFETY: `uuid` has the 16 bytes a `uuid_t` holds, and `wait` is a valid timeout.
    let done = unsafe { libc::gethostuuid(uuid.as_mut_ptr(), &wait) } == 0;
    done.then(|| uuid.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// `kern.bootsessionuuid`, new at every boot.
pub(super) fn boot_id() -> Option<String> {
    let mut value = [0u8; 64];
    let mut length = value.len();
    let name = c"kern.bootsessionuuid";
    // SAFETY: `name` is NUL-terminated; `value` has `length` writable bytes, and the call writes at
    // most that many and sets `length` to what it wrote; no new value is set.
    let read = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            &mut length,
            std::ptr::null_mut(),
            0,
        )
    } == 0;
    if !read {
        return None;
    }
    let text = CStr::from_bytes_until_nul(&value[..length.min(value.len())]).ok()?;
    let text = text.to_str().ok()?.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Full flushes: `fsync` on macOS hands the data to the drive, which may keep it in its own cache
/// and write it in any order; only `F_FULLFSYNC` asks the drive to write everything it holds to
/// stable storage. The journal's promise after a power loss needs it for the staged files and the log
/// (their bytes) and for the directories it renames in and out of (their entries): one
/// `F_FULLFSYNC` flushes the whole drive's cache, so each costs at least a round trip to the drive
/// (not measured: nothing on the project's Linux machines runs macOS). A file system that does not offer it (some network and FUSE ones
/// refuse it as `ENOTSUP` or `ENOTTY`) gets `fsync`, the most it offers.
pub(crate) fn flush_data(file: &std::fs::File) -> io::Result<()> {
    full_flush(file)
}

/// A directory's entries, flushed as [`flush_data`] flushes a file.
pub(crate) fn flush_entries(directory: &std::fs::File) -> io::Result<()> {
    full_flush(directory)
}

fn full_flush(file: &std::fs::File) -> io::Result<()> {
    use rustix::io::Errno;
    match rustix::fs::fcntl_fullfsync(file) {
        Ok(()) => Ok(()),
        Err(error) if error == Errno::NOTSUP || error == Errno::NOTTY || error == Errno::INVAL => {
            fsync(file)
        }
        Err(error) => Err(error.into()),
    }
}

/// The path the running program was started from (`_NSGetExecutablePath`); macOS has no name for the
/// running image itself.
pub(crate) fn own_program() -> io::Result<PathBuf> {
    std::env::current_exe()
}

/// Nothing to set before the child starts: macOS has no parent-death signal. The child watches its
/// parent instead ([`end_with_parent`]).
pub(crate) fn end_with_this_thread(command: &mut Command) {
    let _ = command;
}

/// Ends this process when its parent does: a thread waits on a `kqueue` for the parent's exit
/// (`EVFILT_PROC`, `NOTE_EXIT`). A parent already gone (this process adopted by launchd, or `ESRCH`
/// when the watch is set) ends it at once; where no watch can be set, the compile runs on.
pub(crate) fn end_with_parent() {
    // SAFETY: `getppid` takes no arguments and cannot fail.
    let parent = unsafe { libc::getppid() };
    if parent <= 1 {
        // Adopted by launchd: the parent is already gone.
        std::process::exit(1);
    }
    // SAFETY: `kqueue` takes no arguments; a failure is a negative descriptor.
    let queue = unsafe { libc::kqueue() };
    if queue < 0 {
        // No watch can be set (the descriptor limit): the compile runs on, as any would without one.
        return;
    }
    // SAFETY: an all-zero `kevent` is valid; the fields the filter reads are set below.
    let mut change: libc::kevent = unsafe { std::mem::zeroed() };
    change.ident = parent as libc::uintptr_t;
    change.filter = libc::EVFILT_PROC;
    change.flags = libc::EV_ADD | libc::EV_ONESHOT;
    change.fflags = libc::NOTE_EXIT;
    // SAFETY: one valid change, no events asked back, no timeout.
    let added =
        unsafe { libc::kevent(queue, &change, 1, std::ptr::null_mut(), 0, std::ptr::null()) } == 0;
    if !added {
        if io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            // The parent ended before the watch was set.
            std::process::exit(1);
        }
        return;
    }
    let watching = std::thread::Builder::new()
        .name("turngate-parent".into())
        .spawn(move || {
            // SAFETY: an all-zero `kevent` is valid as the buffer for one event.
            let mut event: libc::kevent = unsafe { std::mem::zeroed() };
            loop {
                // SAFETY: waits for one event into `event`, with no changes and no timeout.
                let got = unsafe {
                    libc::kevent(queue, std::ptr::null(), 0, &mut event, 1, std::ptr::null())
                };
                if got > 0 {
                    std::process::exit(1);
                }
                // A signal that interrupts the wait is not the parent's exit: wait again; any other
                // failure ends the watch, not the compile.
                if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
        });
    // A watch that cannot get its thread is no watch: the compile runs on.
    drop(watching);
}

/// Puts the calling thread in the background quality of service class, which macOS schedules (and
/// throttles its I/O) only when nothing of a higher class wants the CPU; per thread, as Linux's
/// `SCHED_IDLE` is.
pub(crate) fn lower_this_thread() {
    // SAFETY: sets the calling thread's own class; no pointers.
    let _ =
        unsafe { libc::pthread_set_qos_class_self_np(libc::qos_class_t::QOS_CLASS_BACKGROUND, 0) };
}

/// Asks the malloc zones to return their free pages to the system (`malloc_zone_pressure_relief`, as
/// the system does under memory pressure).
pub(crate) fn release_freed_heap() {
    unsafe extern "C" {
        fn malloc_zone_pressure_relief(zone: *mut libc::c_void, goal: libc::size_t)
        -> libc::size_t;
    }
    // SAFETY: a null zone means every zone, and a goal of 0 as much as can be returned.
    unsafe {
        malloc_zone_pressure_relief(std::ptr::null_mut(), 0);
    }
}
