//! Giving the pages a compile freed back to the system.
//!
//! A Cranelift compile allocates tens of megabytes on the threads it runs on and frees them when it is
//! done. glibc's allocator keeps what a thread's arena freed for that arena's next allocation, and
//! returns only the top of each heap: compiling the bundled tools left 80 MiB resident that nothing used
//! again, 24.5 MiB after the trim (BENCHMARKS.md, "Memory and the first call of every surface").
//! `malloc_trim` returns every free page of every arena. musl's allocator returns freed memory to the
//! system itself, and the other platforms' allocators manage their own, so there this does nothing.

/// Returns the pages the allocator holds free to the system, where the allocator keeps them.
pub(super) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas; it takes the
    // arenas' locks and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
