//! Work nobody waits for, on threads the scheduler runs only when nothing else wants the CPU:
//! compiling every tool ahead of its first call while a server waits for its clients. A call that
//! comes meanwhile runs at its normal priority and gets the CPU first, so work done ahead slows the
//! work it is ahead of as little as the machine allows.
//!
//! Each such thread is put in the lowest class the system has for one thread
//! (`platform::lower_this_thread`: Linux's `SCHED_IDLE`, else the lowest nice value; macOS's background
//! quality of service). Measured on the 2-core machine, a `read_file` call into an MCP server compiling
//! in the background took 1.6 ms at the median with `SCHED_IDLE`, 3.8 ms at nice 19, and 1.6 ms with
//! nothing compiling (`BENCHMARKS.md`).
//! wasmtime compiles a component's functions in parallel on the current rayon pool; the work runs
//! inside a pool of its own whose threads are in the same class, so that parallel compile stays in the
//! background too.

use crate::platform;

/// Runs `work` on a thread named `name` in the background class, with a rayon pool of such threads
/// (as many as the machine has cores) as its current pool; the thread is detached. Fails only when
/// no thread can be started.
pub(crate) fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let pool_name = name.to_owned();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            platform::lower_this_thread();
            let pool = rayon::ThreadPoolBuilder::new()
                .thread_name(move |i| format!("{pool_name}-{i}"))
                .start_handler(|_| platform::lower_this_thread())
                .build();
            match pool {
                Ok(pool) => pool.install(work),
                // Without a pool of its own, the compile's parallel part runs on the global pool.
                Err(_) => work(),
            }
        })
        .map(drop)
}
