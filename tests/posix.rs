//! The code paths macOS takes, run here where no Mac is: `TURNGATE_TEST_PLATFORM=posix`, set before
//! `main`, makes the platform layer take on Linux the plain POSIX paths macOS takes
//! (`host/src/platform/unix.rs`): a directory's renames waited for through `readdir`, a checked cache
//! entry reached through `/dev/fd`, the journal's flushes by `fsync`, and its renames without
//! `renameat2`'s flags (the fallbacks macOS takes on a file system without `renameatx_np`'s). The
//! containment, least-authority, journal (undo included) and scope suites run again below on those
//! paths, so a change that breaks them fails here, not first on a Mac.
//!
//! What is not plain POSIX (`F_FULLFSYNC`, `kqueue`, quality of service classes, the host and boot
//! UUIDs) only the macOS runners run (`docs/release.md`).
#![cfg(target_os = "linux")]
// Each suite below brings its own `common`, as it does when it is compiled alone.
#![allow(clippy::duplicate_mod)]

mod common;

// The suites again, on the POSIX paths.
#[path = "containment.rs"]
mod containment;
#[path = "journal.rs"]
mod journal;
#[path = "least_authority.rs"]
mod least_authority;
#[path = "scope.rs"]
mod scope;

ctor::declarative::ctor! {
    /// Asks for the POSIX paths before any test thread starts (the library reads the variable once).
    #[ctor(unsafe)]
    fn take_the_posix_paths() {
        // SAFETY: this runs before `main`, on the only thread there is, so nothing reads the
        // environment while it changes.
        unsafe { std::env::set_var("TURNGATE_TEST_PLATFORM", "posix") };
    }
}

#[test]
fn the_suites_here_run_on_the_posix_paths() {
    assert_eq!(
        std::env::var("TURNGATE_TEST_PLATFORM").as_deref(),
        Ok("posix"),
        "the constructor did not run: the suites above ran on Linux's own paths"
    );
}
