//! The component sandbox: one engine, tools compiled once, a fresh store per call.
//!
//! `Sandbox` owns the process's wasmtime `Engine` (pooling allocator, epoch interruption driven by a
//! ticker thread), a linker holding the WASI 0.2 interfaces tools may import (`wasi.rs`: no sockets), and
//! the precompiled-component cache. `Sandbox::prepare` turns component bytes into a `Prepared` tool (an
//! `InstancePre` of the tool world, refused if it imports anything the sandbox does not grant);
//! `Sandbox::run` instantiates it in a new `Store` whose WASI context holds
//! nothing but the root (read-only for read-only tools, absent for tools without paths), calls it under
//! the [`Limits`], and maps every way a call can end to its own [`RunError`].

pub(crate) mod bindings;
mod cache;
mod limits;
mod output;
mod wasi;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use self::bindings::{Tool, ToolPre};
use self::cache::PrecompiledCache;
use self::limits::{CallLimiter, MemoryLimitExceeded};
use self::output::{BoundedOutput, OutputLimitExceeded};
use crate::descriptor::{Access, PathParam};
use crate::outcome::{RunError, ToolError};
use crate::root::Root;

pub use self::limits::Limits;

/// How often the ticker thread advances the engine's epoch; the resolution of the wall-time limit.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Most bytes of a trapped guest's stderr quoted in its error (enough for a panic message).
const TRAP_STDERR_TAIL: usize = 4096;

/// The name under which a tool sees the root.
const GUEST_ROOT: &str = "/";

/// Where precompiled components are cached.
#[derive(Debug, Clone, Default)]
pub enum CacheSetting {
    /// The user's cache directory (`$TURNGATE_CACHE_DIR`, else the platform cache dir plus `turngate`).
    #[default]
    Default,
    /// This directory.
    Dir(PathBuf),
    /// Compile every component at load; keep nothing on disk.
    Disabled,
}

/// The process's engine, linker and cache.
pub(crate) struct Sandbox {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    cache: Option<PrecompiledCache>,
}

/// A component checked against the tool world and ready to instantiate for each call.
#[derive(Clone)]
pub(crate) struct Prepared {
    pre: ToolPre<CallState>,
    imports: Vec<String>,
}

impl Prepared {
    /// Every interface the component imports (all of them granted, or it would not be prepared).
    pub(crate) fn imports(&self) -> &[String] {
        &self.imports
    }
}

/// A guest's raw self-description, before the descriptor checks.
pub(crate) struct RawDescriptor {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: String,
    pub(crate) paths: Vec<PathParam>,
}

/// Everything one call produced.
#[derive(Debug)]
pub(crate) struct RunReport {
    pub(crate) result: Result<String, RunError>,
    pub(crate) stdout: Bytes,
    pub(crate) stderr: Bytes,
    pub(crate) duration: Duration,
}

/// Why a component was not accepted as a tool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// The bytes are not WebAssembly.
    #[error("not a WebAssembly file")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// The component does not validate or compile.
    #[error("the component does not compile: {0:#}")]
    Compile(wasmtime::Error),
    /// The component imports interfaces the sandbox does not grant (sockets, HTTP, another world's).
    #[error(
        "the component imports {}, which the sandbox does not grant (it grants wasi:io, wasi:cli, wasi:clocks, wasi:filesystem and wasi:random)",
        .0.join(", ")
    )]
    Imports(Vec<String>),
    /// The component's imports could not be satisfied for another reason (a version the host lacks).
    #[error("the component's imports cannot be satisfied: {0:#}")]
    Link(wasmtime::Error),
    /// The component does not export the tool world.
    #[error("the component is not a turngate tool (world turngate:tool/tool@0.1.0): {0:#}")]
    NotToolWorld(wasmtime::Error),
    /// `describe` failed.
    #[error("describe failed: {0}")]
    Describe(RunError),
}

/// The engine could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("could not set up the wasmtime engine: {0:#}")]
pub struct EngineError(wasmtime::Error);

/// Per-call store data: the WASI context and the memory limiter.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: CallLimiter,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl Sandbox {
    /// Creates the engine, starts its epoch ticker and links WASI 0.2.
    pub(crate) fn new(limits: Limits, cache: &CacheSetting) -> Result<Sandbox, EngineError> {
        let mut pool = PoolingAllocationConfig::default();
        pool.max_memory_size(limits.memory_bytes);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(EngineError)?;
        start_epoch_ticker(&engine);

        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker).map_err(EngineError)?;

        let cache_dir = match cache {
            CacheSetting::Default => PrecompiledCache::default_dir(),
            CacheSetting::Dir(dir) => Some(dir.clone()),
            CacheSetting::Disabled => None,
        };
        let cache = cache_dir.map(|dir| PrecompiledCache::new(dir, &engine));
        Ok(Sandbox {
            engine,
            linker,
            limits,
            cache,
        })
    }

    /// The limits every call runs under.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Compiles (or loads from the cache) a component and checks it against the tool world.
    pub(crate) fn prepare(&self, bytes: &[u8]) -> Result<Prepared, PrepareError> {
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(PrepareError::CoreModule),
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(PrepareError::NotWasm),
        }
        let component = match &self.cache {
            Some(cache) => cache.load(&self.engine, bytes),
            None => Component::new(&self.engine, bytes),
        }
        .map_err(PrepareError::Compile)?;
        let imports: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let ungranted: Vec<String> = imports
            .iter()
            .filter(|name| !wasi::is_granted(name))
            .cloned()
            .collect();
        if !ungranted.is_empty() {
            return Err(PrepareError::Imports(ungranted));
        }
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(PrepareError::Link)?;
        let pre = ToolPre::new(instance_pre).map_err(PrepareError::NotToolWorld)?;
        Ok(Prepared { pre, imports })
    }

    /// Asks a prepared tool to describe itself (in a store with no filesystem).
    pub(crate) async fn describe(&self, tool: &Prepared) -> Result<RawDescriptor, PrepareError> {
        let (mut store, _stdout, stderr) = self.new_store(None).map_err(PrepareError::Describe)?;
        let work = async {
            let instance = tool.pre.instantiate_async(&mut store).await?;
            instance.call_describe(&mut store).await
        };
        let descriptor = match tokio::time::timeout(self.limits.wall_time, work).await {
            Err(_) => Err(RunError::Timeout {
                limit: self.limits.wall_time,
            }),
            Ok(result) => result.map_err(|e| classify(e, &stderr.contents(), self.limits)),
        }
        .map_err(PrepareError::Describe)?;
        Ok(RawDescriptor {
            name: descriptor.name,
            description: descriptor.description,
            input_schema: descriptor.input_schema,
            paths: descriptor
                .paths
                .into_iter()
                .map(|p| PathParam {
                    pointer: p.pointer,
                    access: match p.access {
                        bindings::Access::Read => Access::Read,
                        bindings::Access::Write => Access::Write,
                    },
                })
                .collect(),
        })
    }

    /// Runs one call in a fresh instance. `filesystem` is the root and the access the tool declared;
    /// `None` gives the tool no filesystem at all.
    pub(crate) async fn run(
        &self,
        tool: &Prepared,
        filesystem: Option<(&Root, Access)>,
        input: &str,
    ) -> RunReport {
        let started = Instant::now();
        let (mut store, stdout, stderr) = match self.new_store(filesystem) {
            Ok(parts) => parts,
            Err(e) => {
                return RunReport {
                    result: Err(e),
                    stdout: Bytes::new(),
                    stderr: Bytes::new(),
                    duration: started.elapsed(),
                };
            }
        };
        let work = async {
            let instance: Tool = tool.pre.instantiate_async(&mut store).await?;
            instance.call_call(&mut store, input).await
        };
        let limits = self.limits;
        let result = match tokio::time::timeout(limits.wall_time, work).await {
            Err(_) => Err(RunError::Timeout {
                limit: limits.wall_time,
            }),
            Ok(Err(trap)) => Err(classify(trap, &stderr.contents(), limits)),
            Ok(Ok(Err(tool_error))) => Err(RunError::Tool(ToolError::from(tool_error))),
            Ok(Ok(Ok(output))) if output.len() > limits.output_bytes => {
                Err(RunError::OutputLimit {
                    limit: limits.output_bytes,
                })
            }
            Ok(Ok(Ok(output))) => Ok(output),
        };
        drop(store);
        RunReport {
            result,
            stdout: stdout.contents(),
            stderr: stderr.contents(),
            duration: started.elapsed(),
        }
    }

    /// A store with a WASI context that grants only the root (if any), bounded stdio, and the limits.
    fn new_store(
        &self,
        filesystem: Option<(&Root, Access)>,
    ) -> Result<(Store<CallState>, BoundedOutput, BoundedOutput), RunError> {
        let stdout = BoundedOutput::new(self.limits.output_bytes);
        let stderr = BoundedOutput::new(self.limits.output_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_blocking_current_thread(true);
        if let Some((root, access)) = filesystem {
            let perms = match access {
                Access::Read => FsPerms::ReadOnly,
                Access::Write => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(root.preopen_path(), GUEST_ROOT, perms)
                .map_err(|e| RunError::Setup(format!("cannot preopen the root: {e:#}")))?;
        }
        let state = CallState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new(self.limits.memory_bytes),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(deadline_ticks(self.limits.wall_time));
        store.epoch_deadline_trap();
        Ok((store, stdout, stderr))
    }
}

/// Maps a failed instantiation or call to the limit or trap that caused it.
fn classify(error: wasmtime::Error, stderr: &[u8], limits: Limits) -> RunError {
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return RunError::MemoryLimit {
            limit: limits.memory_bytes,
        };
    }
    if error.downcast_ref::<OutputLimitExceeded>().is_some() {
        return RunError::OutputLimit {
            limit: limits.output_bytes,
        };
    }
    if let Some(Trap::Interrupt) = error.downcast_ref::<Trap>() {
        return RunError::Timeout {
            limit: limits.wall_time,
        };
    }
    let tail_start = stderr.len().saturating_sub(TRAP_STDERR_TAIL);
    let guest_message = String::from_utf8_lossy(&stderr[tail_start..])
        .trim()
        .to_owned();
    RunError::Trap {
        trap: format!("{error:#}"),
        guest_message,
    }
}

fn deadline_ticks(wall_time: Duration) -> u64 {
    let ticks = wall_time.as_nanos() / EPOCH_TICK.as_nanos();
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is dropped. Without it, epoch
/// deadlines never fire.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
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
}
