//! The code-generation settings every engine of an edition shares: those that run calls, those that
//! compile apart from them, and the one `build.rs` compiles the bundled tools with when turngate is
//! built (it includes this file). The same settings make the same code, which one compiles and
//! another loads; wasmtime refuses code made with other settings.

use wasmtime::Config;

use super::edition::Edition;

/// The settings of every engine of `edition`.
pub(crate) fn config_for(edition: Edition) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .concurrency_support(edition == Edition::Wasi03)
        .epoch_interruption(true)
        // Bounds checked by the compiled code rather than by guard pages: memory a call grew then stays
        // mapped for the next call of its pool slot (reset like the rest), where otherwise each call's
        // `memory.grow` and the next instantiation `mprotect` it, each a TLB shootdown across the
        // process's threads. Measured (a throwaway A/B, both engines in one process, calls
        // interleaved): `read_file` on a call thread 57 to 58 µs against 80 to 89 µs; a no-op and a
        // `write_file` unchanged; a compute-bound `search_files` about 3% slower.
        .signals_based_traps(false)
        .memory_guard_size(0);
    config
}
