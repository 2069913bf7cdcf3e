//! One wasmtime engine and what runs on it: its linkers, its precompiled cache and its epoch ticker.
//!
//! The engine that runs calls never compiles. A component not in the cache is compiled by an engine
//! made for that compile alone, with the same settings (so its code loads in the running engine), and
//! dropped after it: Cranelift's contexts, kept by an engine for its next compile, and the compile's
//! own heap go with it, and `platform::release_freed_heap` gives the freed pages back to the system. The
//! compiled code is then mapped from its cache entry, as a warm start maps it: a server that compiled
//! every tool holds what one that found them cached does (BENCHMARKS.md, "Memory and the first call
//! of every surface").
//!
//! The sandbox has one [`Runtime`] per [`Edition`]. Tools built for WASI 0.2 run on an engine with the
//! component model's concurrency support off: with it on, every call goes through wasmtime's
//! concurrent event loop, which made a 0.2 no-op call 1.29x slower (BENCHMARKS.md, "WASI 0.3 beside
//! 0.2"). Tools built for WASI 0.3 need it on, and get an engine of their own, made when the first
//! such tool is prepared, with its own instance pool.

use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::PrecompiledCache;
use super::edition::Edition;
use super::settings::config_for;
use super::{CallState, Instances, Limits, wasi};

/// How often the ticker thread advances an engine's epoch once a tool has described itself or a call
/// ran on the caller's task; the resolution of the wall-time limit and cancellation of those, and how
/// often their guests yield to the executor.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Core instances one call may have (a component is several core modules: a Python or JavaScript tool
/// carries its interpreter and adapters).
const CORE_INSTANCES_PER_CALL: u32 = 32;

/// Linear memories (and tables) one call may have.
const MEMORIES_PER_CALL: u32 = 8;

/// Fiber stacks one WASI 0.3 call may hold: its task's, and one more for a guest blocked in a
/// synchronously lowered async import while the event loop runs the rest.
const STACKS_PER_0_3_CALL: u32 = 2;

/// An engine, the linkers for its components, and its share of the precompiled cache.
pub(super) struct Runtime {
    pub(super) engine: Engine,
    edition: Edition,
    linker: Linker<CallState>,
    /// `linker` plus `wasi:http`, for components that import it: made when the first is prepared
    /// (making it with the sandbox cost every process 0.15 to 0.17 ms, BENCHMARKS.md).
    network_linker: OnceLock<Linker<CallState>>,
    pub(super) cache: Option<PrecompiledCache>,
    /// The epoch ticker, started at the first `describe` or call on the caller's task.
    ticker: Once,
}

impl Runtime {
    /// An engine for `edition` whose pool (when pooled) holds `slots` calls, with its linker.
    pub(super) fn new(
        edition: Edition,
        limits: Limits,
        slots: usize,
        instances: Instances,
        cache_dir: Option<&PathBuf>,
    ) -> wasmtime::Result<Runtime> {
        let engine = match instances {
            Instances::Pooled => {
                let pooled = |resident| {
                    engine_with(
                        edition,
                        InstanceAllocationStrategy::Pooling(pool_for(
                            edition, slots, limits, resident,
                        )),
                    )
                };
                // The kernel may lack `PAGEMAP_SCAN` (before Linux 6.7): then memory is released.
                pooled(Resident::Kept).or_else(|_| pooled(Resident::Released))
            }
            Instances::OnDemand => engine_with(edition, InstanceAllocationStrategy::OnDemand),
        }?;
        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker, CallState::filesystem)?;
        if edition == Edition::Wasi03 {
            wasi::add_0_3_to_linker(&mut linker, CallState::filesystem)?;
        }
        let cache = cache_dir.map(|dir| PrecompiledCache::new(dir.clone(), &engine));
        Ok(Runtime {
            engine,
            edition,
            linker,
            network_linker: OnceLock::new(),
            cache,
            ticker: Once::new(),
        })
    }

    /// The component whose SHA-256 is `sha256`, mapped from the cache, if a usable entry is there.
    pub(super) fn cached(&self, sha256: &str) -> Option<Component> {
        self.cache.as_ref()?.load(&self.engine, sha256)
    }

    /// The component in `bytes` (whose SHA-256 is `sha256`): mapped from the cache, else loaded from
    /// `embedded` (its code compiled into the binary, for a bundled tool), else compiled apart by a
    /// [`Compiler`], stored in the cache and mapped from there.
    pub(super) fn compile(
        &self,
        sha256: &str,
        bytes: &[u8],
        embedded: Option<&'static [u8]>,
    ) -> wasmtime::Result<Component> {
        if let Some(component) = self.cached(sha256) {
            return Ok(component);
        }
        if let Some(code) = embedded {
            // SAFETY: `code` was compiled by `build.rs` into this binary, by this wasmtime with this
            // engine's settings (`settings.rs`); wasmtime checks its header against this engine.
            let loaded = unsafe { Component::deserialize(&self.engine, code) };
            super::precompiled::release(code);
            match loaded {
                Ok(component) => {
                    crate::test_hooks::embedded(sha256);
                    return Ok(component);
                }
                Err(e) => tracing::info!("compiling a bundled tool: its built-in code: {e:#}"),
            }
        }
        let code = Compiler::new(self.edition)?.compile(sha256, bytes)?;
        if let Some(cache) = &self.cache {
            cache.store_code(sha256, &code);
            if let Some(component) = cache.load(&self.engine, sha256) {
                return Ok(component);
            }
        }
        // SAFETY: `code` was just made by `Engine::precompile_component` of an engine with this one's
        // settings (a `Compiler`'s); wasmtime checks its header against this engine.
        unsafe { Component::deserialize(&self.engine, &code) }
    }

    /// The linker for a component with these imports: with `wasi:http` when it imports it.
    pub(super) fn linker_for(&self, imports: &[String]) -> wasmtime::Result<&Linker<CallState>> {
        if !wasi::imports_http(imports) {
            return Ok(&self.linker);
        }
        // Two callers racing both make one; the first kept is used by all.
        if let Some(linker) = self.network_linker.get() {
            return Ok(linker);
        }
        let mut linker = self.linker.clone();
        wasi::add_http_to_linker(&mut linker, self.edition == Edition::Wasi03)?;
        Ok(self.network_linker.get_or_init(|| linker))
    }

    /// Starts advancing the epoch every [`EPOCH_TICK`] (once; until the engine is dropped).
    pub(super) fn start_ticker(&self) {
        self.ticker.call_once(|| {
            let weak = self.engine.weak();
            std::thread::Builder::new()
                .name("turngate-epoch".into())
                .spawn(move || {
                    while let Some(engine) = weak.upgrade() {
                        engine.increment_epoch();
                        drop(engine);
                        std::thread::sleep(EPOCH_TICK);
                    }
                })
                .expect("spawn the epoch ticker thread");
        });
    }
}

/// The engine every call of `edition` runs in: components, epoch interruption, and `instances`.
fn engine_with(
    edition: Edition,
    instances: InstanceAllocationStrategy,
) -> wasmtime::Result<Engine> {
    let mut config = config_for(edition);
    config.allocation_strategy(instances);
    Engine::new(&config)
}

/// An engine made for one compile (or a few) and dropped after it (see the module docs).
pub(super) struct Compiler {
    engine: Engine,
}

impl Compiler {
    /// A compiling engine for `edition`: no instances, so nothing reserved.
    pub(super) fn new(edition: Edition) -> wasmtime::Result<Compiler> {
        let engine = engine_with(edition, InstanceAllocationStrategy::OnDemand)?;
        Ok(Compiler { engine })
    }

    /// The cache in `dir` as this engine's code is keyed there (the same key as the running
    /// engine's, whose settings are the same).
    pub(super) fn cache_in(&self, dir: &Path) -> PrecompiledCache {
        PrecompiledCache::new(dir.to_path_buf(), &self.engine)
    }

    /// Whether `code`, compiled ahead with this engine's settings, loads here: made for this
    /// machine's architecture with CPU features this machine has.
    pub(super) fn loads(&self, code: &[u8]) -> wasmtime::Result<()> {
        // SAFETY: `code` is compiled into this binary by `build.rs` (`precompiled.rs`); wasmtime checks
        // its header against this engine, and the component is dropped unused.
        unsafe { Component::deserialize(&self.engine, code) }.map(drop)
    }

    /// Compiles the component in `bytes` (whose SHA-256 is `sha256`) and returns its precompiled
    /// form; the engine is dropped, and what the compile held given back, before this returns.
    pub(super) fn compile(self, sha256: &str, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        let compiled = self.engine.precompile_component(bytes);
        drop(self.engine);
        crate::platform::release_freed_heap();
        crate::test_hooks::compiled(sha256);
        compiled
    }
}

/// What the pool does with a finished call's memory and tables.
#[derive(Clone, Copy)]
enum Resident {
    /// Their first [`KEEP_RESIDENT_MEMORY`] and [`KEEP_RESIDENT_TABLE`] bytes stay mapped, and only the
    /// pages the call touched are reset to the component's image, found by the `PAGEMAP_SCAN` ioctl
    /// (the engine is not created if the kernel lacks it); the rest is released.
    Kept,
    /// All of it is released (`madvise`), and faulted in again by the next call.
    Released,
}

/// The bytes of each linear memory kept mapped between calls: a Rust guest's data, heap and stack
/// start within it. Measured (`cargo bench --bench fetch`, `--bench sandbox`): a no-op call 21 µs
/// instead of 38 µs, and 9.2 µs instead of 22.6 µs; without `PAGEMAP_SCAN`, resetting the whole
/// region by `memset` made it 70 to 80 µs, hence [`Resident::Released`] then.
const KEEP_RESIDENT_MEMORY: usize = 1 << 20;
/// The bytes of each table kept mapped between calls.
const KEEP_RESIDENT_TABLE: usize = 64 << 10;

/// A pool sized to what runs at once: every slot costs set-up (a guard page per stack) at start.
fn pool_for(
    edition: Edition,
    slots: usize,
    limits: Limits,
    resident: Resident,
) -> PoolingAllocationConfig {
    let slots = u32::try_from(slots).unwrap_or(u32::MAX);
    let stacks = match edition {
        Edition::Wasi02 => slots,
        Edition::Wasi03 => slots.saturating_mul(STACKS_PER_0_3_CALL),
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.max_memory_size(limits.memory_bytes)
        .total_component_instances(slots)
        .total_stacks(stacks)
        .total_core_instances(slots.saturating_mul(CORE_INSTANCES_PER_CALL))
        .total_memories(slots.saturating_mul(MEMORIES_PER_CALL))
        .total_tables(slots.saturating_mul(MEMORIES_PER_CALL));
    if let Resident::Kept = resident {
        pool.linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_TABLE)
            .pagemap_scan(wasmtime::Enabled::Yes);
    }
    pool
}
