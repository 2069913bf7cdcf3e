//! Linux's side of the platform layer: `/proc`, `getdents`, `PR_SET_PDEATHSIG`, `SCHED_IDLE`,
//! `fdatasync`, `renameat2` and glibc's `malloc_trim`.
//!
//! Where macOS takes a plain POSIX path (`unix.rs`), `TURNGATE_TEST_PLATFORM=posix` makes Linux take it
//! too ([`posix_paths`]), for the test suites to run the code macOS runs.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use super::{RenameError, unix};

/// Whether a test asked for the POSIX paths macOS takes (`TURNGATE_TEST_PLATFORM=posix`, read once;
/// see `test_hooks.rs`).
fn posix_paths() -> bool {
    static POSIX: OnceLock<bool> = OnceLock::new();
    *POSIX.get_or_init(|| {
        std::env::var_os("TURNGATE_TEST_PLATFORM").is_some_and(|value| value == "posix")
    })
}

/// `/etc/machine-id`, else the host name.
pub(super) fn machine_id() -> Option<String> {
    first_line_of("/etc/machine-id").or_else(|| first_line_of("/proc/sys/kernel/hostname"))
}

/// `/proc/sys/kernel/random/boot_id`.
pub(super) fn boot_id() -> Option<String> {
    first_line_of("/proc/sys/kernel/random/boot_id")
}

/// The first line of a file the system keeps, if it has one that is not empty.
fn first_line_of(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

/// Waits until no rename is under way in `directory` (a descriptor opened for reading its entries):
/// one `getdents` into a buffer on the stack (room for any one entry). A rename holds the locks of both
/// directories until the name cache shows its result, and reading a directory takes the directory's
/// lock; what is read is not needed.
pub(crate) fn wait_for_directory_renames(directory: impl AsFd) -> io::Result<()> {
    if posix_paths() {
        return unix::wait_for_directory_renames(directory);
    }
    let mut buffer = [MaybeUninit::<u8>::uninit(); 512];
    if let Some(entry) = rustix::fs::RawDir::new(directory, &mut buffer).next() {
        entry?;
    }
    Ok(())
}

/// `/proc/self/fd/N`: opening it opens the file the descriptor holds, whatever stands at the name the
/// descriptor was opened by.
pub(crate) fn descriptor_path(fd: BorrowedFd<'_>) -> PathBuf {
    if posix_paths() {
        return unix::descriptor_path(fd);
    }
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// `fdatasync`: the file's bytes and its size on the device (Linux's `fsync` family asks the device
/// to write its cache through as well).
pub(crate) fn flush_data(file: &std::fs::File) -> io::Result<()> {
    if posix_paths() {
        return unix::fsync(file);
    }
    Ok(rustix::fs::fdatasync(file)?)
}

/// `fsync` of a directory (a descriptor opened for reading it): its entries on the device.
pub(crate) fn flush_entries(directory: &std::fs::File) -> io::Result<()> {
    unix::fsync(directory)
}

/// `renameat2` with `flags`; as if the system had none when a test asks for the POSIX paths (a file
/// system without `renameatx_np`'s flags on macOS: the journal's fallbacks).
pub(crate) fn rename_with(
    from_dir: impl AsFd,
    from: &str,
    to_dir: impl AsFd,
    to: &str,
    flags: rustix::fs::RenameFlags,
) -> Result<(), RenameError> {
    if posix_paths() {
        return Err(RenameError::Unsupported);
    }
    unix::rename_with(from_dir, from, to_dir, to, flags)
}

/// `/proc/self/exe`: the running image itself, even if the file at its path was replaced since.
pub(crate) fn own_program() -> io::Result<PathBuf> {
    Ok(PathBuf::from("/proc/self/exe"))
}

/// Makes the child `command` starts end when the thread that starts it does (`PR_SET_PDEATHSIG`, set
/// in the child before `exec`). A thread that waits for its child ends before it only when the whole
/// process does.
pub(crate) fn end_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the forked child before `exec`, and only makes one system call,
    // which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(io::Error::from)
        });
    }
}

/// Nothing to do in the child: the kernel ends it (see [`end_with_this_thread`]).
pub(crate) fn end_with_parent() {}

/// The nice value of background threads where `SCHED_IDLE` is refused: the lowest priority.
const LOWEST_NICE: i32 = 19;

/// Puts the calling thread in `SCHED_IDLE`, which a thread may always enter (lowering one's own
/// priority needs no privilege), else at [`LOWEST_NICE`]; a system that refuses both leaves it as it
/// was.
pub(crate) fn lower_this_thread() {
    // The system call, not libc's wrapper: musl's `sched_setscheduler` always fails (POSIX means the
    // whole process, Linux's call one thread), and its `sched_param` has more fields than glibc's.
    // SAFETY: an all-zero `sched_param` is valid (priority 0, which SCHED_IDLE requires).
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: `sched_setscheduler` on the calling thread (tid 0) with a valid, initialized parameter;
    // it reads `param` and changes only this thread's scheduling class.
    let idle = unsafe {
        libc::syscall(
            libc::SYS_sched_setscheduler,
            0,
            libc::SCHED_IDLE,
            &raw const param,
        )
    } == 0;
    if !idle {
        let _ = rustix::process::setpriority_process(None, LOWEST_NICE);
    }
}

/// glibc keeps what a thread's arena freed for that arena's next allocation and returns only the top
/// of each heap: compiling the bundled tools left 80 MiB resident that nothing used again, 24.5 MiB
/// after `malloc_trim(0)`, which returns every free page of every arena (BENCHMARKS.md, "Memory and the
/// first call of every surface"). musl's allocator returns freed memory to the system itself: there
/// this does nothing.
pub(crate) fn release_freed_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas; it takes the
    // arenas' locks and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
