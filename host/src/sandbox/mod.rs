//! The component sandbox: an engine per WASI generation, tools compiled once, a fresh store per call.
//!
//! `Sandbox` owns the process's wasmtime engines (`engine.rs`: one for tools built for WASI 0.2, and
//! one for tools built for 0.3, made when the first is prepared; each a pooling or an on-demand instance
//! allocator, see [`Instances`]; epoch interruption, see `Sandbox::run` and `Sandbox::describe`), their
//! linkers holding the WASI interfaces tools may import (`wasi.rs`: no sockets; `filesystem/`:
//! `wasi:filesystem` of both generations over the call's view), and the precompiled-component cache.
//! `Sandbox::prepare` turns component bytes into a `Prepared` tool (an `InstancePre` of the tool world
//! on the engine its edition needs, `edition.rs`; refused if it imports anything the sandbox does not
//! grant); `Sandbox::run` instantiates it in a new
//! `Store` whose only filesystem is the call's [`CallView`] (none for tools without paths), calls it
//! under the [`Limits`] (on a call thread when it has a view, else on the caller's task), and maps
//! every way a call can end to its own [`RunError`]. The caller waits for the wall-time limit at most
//! (not counting the time a network request waited for the approver), whatever the guest or a host
//! call is doing, and gets the view back (with what the call staged) only when the call returned. A
//! component that imports `wasi:http` is prepared with a second linker that adds it (made when the
//! first such component is prepared); every request goes to the call's network hooks
//! (`crate::network`), which deny everything the policy does not grant. A 0.3 call runs the same way:
//! a guest parked in an async import runs no wasm, so no epoch check stops it, but the caller's
//! wall-time limit and cancel drop the whole call (its store with it) wherever it waits.

pub(crate) mod bindings;
mod cache;
mod command;
mod compile_process;
mod edition;
mod engine;
mod errors;
pub(crate) mod filesystem;
mod limits;
mod output;
mod precompiled;
mod settings;
mod wasi;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ResourceTable};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use self::bindings::network_tool::NetworkTool;
use self::bindings::{Tool, ToolPre};
use self::cache::PrecompiledCache;
use self::compile_process::ChildCompile;
use self::edition::Edition;
pub(crate) use self::edition::generation as wasi_generation;
use self::engine::{Compiler, Runtime};
use self::filesystem::ViewCtx;
use self::limits::{CallLimiter, MemoryLimitExceeded};
use self::output::{BoundedOutput, OutputLimitExceeded};
use crate::cancel::Cancel;
use crate::descriptor::{Access, PathParam};
use crate::network::{CallNetwork, NetworkHooks, NetworkSetup, RequestRecord};
use crate::threads::{Threads, answer_of};
use crate::view::CallView;

pub use self::command::{CommandRun, run_wasi_command};
pub use self::compile_process::{COMPILE_COMMAND, CompileIn, compile_command};
pub use self::errors::{RunError, ToolError};
pub use self::limits::Limits;

/// How often the wall-time clock looks again while a network request waits for the approver.
const APPROVAL_RECHECK: Duration = Duration::from_millis(50);

/// Most bytes of a trapped guest's stderr quoted in its error (enough for a panic message).
const TRAP_STDERR_TAIL: usize = 4096;

/// How the engine allocates the instances calls run in. Either way a call's memory is bounded by
/// [`Limits::memory_bytes`] (the store's limiter enforces it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Instances {
    /// A pool with one slot per call that may run at once, reserved when the engine is made: the
    /// cheapest per call, and cheaper than one instance allocated on demand even for a process that
    /// makes a single call and exits (`turngate call`: 3.66 against 4.79 ms, BENCHMARKS).
    #[default]
    Pooled,
    /// Each call's instance allocated when it starts: nothing reserved, for a process whose address
    /// space is limited (the pool reserves every slot's memory and guard regions up front).
    OnDemand,
}

/// How long a call that hit its wall-time limit is given to unwind (drop its store and remove its
/// staged files) before the caller stops waiting for it. A guest stuck in a host call past this is left
/// to its thread; it can change nothing, since the real root is never writable through a view.
const UNWIND_GRACE: Duration = Duration::from_secs(2);

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

/// The process's engines, linkers and cache.
pub(crate) struct Sandbox {
    /// For tools built for WASI 0.2; its cache also holds every tool's descriptor.
    wasi_0_2: Runtime,
    /// For tools built for WASI 0.3: made when the first is prepared (its pool reserves as much as
    /// the 0.2 engine's, which a process with no 0.3 tool should not pay for).
    wasi_0_3: OnceLock<Runtime>,
    instances: Instances,
    cache_dir: Option<PathBuf>,
    limits: Limits,
    threads: Threads,
    /// One permit per instance slot of a pool: a call waits for one rather than fail.
    slots: Arc<tokio::sync::Semaphore>,
    max_concurrent: usize,
    compile_in: CompileIn,
    /// Whether the bundled tools' code compiled into the binary loads on this machine, per edition
    /// (looked at when the first is needed).
    embedded_loads: [OnceLock<bool>; 2],
}

/// A component checked against the tool world and ready to instantiate for each call.
#[derive(Clone)]
pub(crate) struct Prepared {
    pre: ToolPre<CallState>,
    edition: Edition,
    imports: Vec<String>,
    /// The component exports `url-fields` (the `network-tool` world).
    declares_urls: bool,
}

/// A guest's raw self-description, before the descriptor checks, with the imports it was checked for.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct RawDescriptor {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: String,
    pub(crate) paths: Vec<PathParam>,
    /// JSON Pointers of the input fields that are URLs (`url-fields`; empty for a plain `tool`).
    #[serde(default)]
    pub(crate) urls: Vec<String>,
    pub(crate) imports: Vec<String>,
}

/// Everything one call produced.
pub(crate) struct RunReport {
    pub(crate) result: Result<String, RunError>,
    pub(crate) stdout: Bytes,
    pub(crate) stderr: Bytes,
    pub(crate) duration: Duration,
    /// The call's view, with what it staged, when the call's thread finished (after a timeout or a
    /// cancel it is dropped there); the toolbox applies it only when the call returned ok.
    pub(crate) view: Option<CallView>,
    /// Every request the call made over the network.
    pub(crate) requests: Vec<RequestRecord>,
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
    /// The component imports WASI 0.3 interfaces (named) but does not export `call` as an async
    /// function: a synchronous one cannot wait on them (the component model traps it).
    #[error(
        "the component imports WASI 0.3 ({}) but does not export `call` as an async func, and a synchronous one cannot wait on them; build it against world turngate:tool/async-tool@0.1.0",
        .0.join(", ")
    )]
    SyncCall(Vec<String>),
    /// The component imports interfaces the sandbox does not grant (sockets, HTTP, another world's).
    #[error(
        "the component imports {}, which the sandbox does not grant (it grants WASI 0.2's wasi:io, wasi:cli, wasi:clocks, wasi:filesystem, wasi:random and wasi:http's outgoing-handler, and WASI 0.3's wasi:cli, wasi:clocks, wasi:filesystem, wasi:random and wasi:http's client)",
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
    /// The component file changed since it was loaded.
    #[error("the component changed since it was loaded (SHA-256 {loaded} then, {now} now)")]
    Changed {
        /// Its digest at load.
        loaded: String,
        /// Its digest now.
        now: String,
    },
    /// The component file could not be read again.
    #[error("the component could not be read again: {0}")]
    Reread(String),
}

/// The engine could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("could not set up the wasmtime engine: {0:#}")]
pub struct EngineError(wasmtime::Error);

/// Per-call store data: the WASI context, the call's view of the root and the memory limiter.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    view: Option<CallView>,
    limiter: CallLimiter,
    http: WasiHttpCtx,
    hooks: NetworkHooks,
}

impl CallState {
    fn filesystem(&mut self) -> ViewCtx<'_> {
        ViewCtx {
            table: &mut self.table,
            view: self.view.as_mut(),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl Sandbox {
    /// Creates the WASI 0.2 engine and its linker. At most `max_concurrent` calls run at once (each
    /// pool's size, when pooled); more wait for a slot.
    pub(crate) fn new(
        limits: Limits,
        cache: &CacheSetting,
        max_concurrent: usize,
        instances: Instances,
        compile_in: CompileIn,
    ) -> Result<Sandbox, EngineError> {
        let slots = max_concurrent.max(1);
        let cache_dir = match cache {
            CacheSetting::Default => PrecompiledCache::default_dir(),
            CacheSetting::Dir(dir) => Some(dir.clone()),
            CacheSetting::Disabled => None,
        };
        let wasi_0_2 = Runtime::new(
            Edition::Wasi02,
            limits,
            slots,
            instances,
            cache_dir.as_ref(),
        )
        .map_err(EngineError)?;
        Ok(Sandbox {
            wasi_0_2,
            wasi_0_3: OnceLock::new(),
            instances,
            cache_dir,
            limits,
            threads: Threads::new("turngate-call"),
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            max_concurrent: slots,
            compile_in,
            embedded_loads: [OnceLock::new(), OnceLock::new()],
        })
    }

    /// The runtime for `edition`; the WASI 0.3 one is made at its first use (two callers racing both
    /// make one; the first kept is used by all).
    fn runtime(&self, edition: Edition) -> wasmtime::Result<&Runtime> {
        if edition == Edition::Wasi02 {
            return Ok(&self.wasi_0_2);
        }
        if let Some(runtime) = self.wasi_0_3.get() {
            return Ok(runtime);
        }
        let runtime = Runtime::new(
            edition,
            self.limits,
            self.max_concurrent,
            self.instances,
            self.cache_dir.as_ref(),
        )?;
        Ok(self.wasi_0_3.get_or_init(|| runtime))
    }

    /// The runtime a prepared tool was compiled by (made by `prepare`, so there).
    fn runtime_of(&self, tool: &Prepared) -> &Runtime {
        match tool.edition {
            Edition::Wasi02 => &self.wasi_0_2,
            Edition::Wasi03 => self
                .wasi_0_3
                .get()
                .expect("a 0.3 tool was prepared by the 0.3 runtime"),
        }
    }

    /// Wakes the call thread the next call with a view will run on (see [`crate::threads`]).
    pub(crate) fn warm_call_thread(&self) {
        self.threads.warm();
    }

    /// The limits every call runs under.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// What the component with this digest said about itself, from the cache (`None`: describe it).
    pub(crate) fn cached_descriptor(&self, sha256: &str) -> Option<RawDescriptor> {
        let descriptor = self.wasi_0_2.cache.as_ref()?.descriptor(sha256)?;
        // Checked again, in case what the sandbox grants has changed since.
        self.grants_imports(&descriptor).then_some(descriptor)
    }

    /// Whether the sandbox grants every interface the descriptor says its component imports.
    pub(crate) fn grants_imports(&self, descriptor: &RawDescriptor) -> bool {
        descriptor.imports.iter().all(|name| wasi::is_granted(name))
    }

    /// Remembers a descriptor that passed every load check.
    pub(crate) fn remember_descriptor(&self, sha256: &str, descriptor: &RawDescriptor) {
        if let Some(cache) = &self.wasi_0_2.cache {
            cache.store_descriptor(sha256, descriptor);
        }
    }

    /// Compiles (or loads from the cache) a component whose SHA-256 is `sha256` on the engine its
    /// edition needs, and checks it against the tool world.
    pub(crate) fn prepare(&self, sha256: &str, bytes: &[u8]) -> Result<Prepared, PrepareError> {
        let edition = component_edition(bytes)?;
        let runtime = self.runtime(edition).map_err(PrepareError::Link)?;
        let component = match runtime.cached(sha256) {
            Some(component) => component,
            None => {
                self.precompile(sha256, bytes)?;
                let embedded = self.embedded_code(edition, sha256);
                runtime
                    .compile(sha256, bytes, embedded)
                    .map_err(PrepareError::Compile)?
            }
        };
        crate::test_hooks::prepared(sha256);
        let imports: Vec<String> = component
            .component_type()
            .imports(&runtime.engine)
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
        let wasi_0_3: Vec<String> = imports
            .iter()
            .filter(|name| edition::is_wasi_0_3(name))
            .cloned()
            .collect();
        if !wasi_0_3.is_empty() && !exports_async_call(&component, &runtime.engine) {
            return Err(PrepareError::SyncCall(wasi_0_3));
        }
        let linker = runtime.linker_for(&imports).map_err(PrepareError::Link)?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(PrepareError::Link)?;
        let declares_urls = component.get_export_index(None, "url-fields").is_some();
        let pre = ToolPre::new(instance_pre).map_err(PrepareError::NotToolWorld)?;
        Ok(Prepared {
            pre,
            edition,
            imports,
            declares_urls,
        })
    }

    /// Whether compiled code is kept in a cache (else every process compiles what it prepares).
    pub(crate) fn caches(&self) -> bool {
        self.cache_dir.is_some()
    }

    /// Makes sure the cache holds the compiled code of the component in `bytes` (whose SHA-256 is
    /// `sha256`), compiling it apart from the engines that run calls when it does not (in a child
    /// process, `compile_process.rs`, or on an engine of its own, `engine.rs`); loads nothing, so a
    /// process keeps no code of a tool it has not called. Without a cache there is nothing to do
    /// ahead. The checks against the tool world are [`Sandbox::prepare`]'s.
    pub(crate) fn precompile(&self, sha256: &str, bytes: &[u8]) -> Result<(), PrepareError> {
        let Some(dir) = &self.cache_dir else {
            return Ok(());
        };
        let edition = component_edition(bytes)?;
        let running = match edition {
            Edition::Wasi02 => Some(&self.wasi_0_2),
            Edition::Wasi03 => self.wasi_0_3.get(),
        };
        // The running engine's key when it is there, else a compiler's: the same settings, the same key.
        let mut compiler = None;
        let keyed_by_compiler;
        let cache = match running.and_then(|runtime| runtime.cache.as_ref()) {
            Some(cache) => cache,
            None => {
                let made = Compiler::new(edition).map_err(PrepareError::Compile)?;
                keyed_by_compiler = made.cache_in(dir);
                compiler = Some(made);
                &keyed_by_compiler
            }
        };
        if cache.holds(sha256) {
            return Ok(());
        }
        if let Some(code) = self.embedded_code(edition, sha256) {
            cache.store_code(sha256, code);
            precompiled::release(code);
            crate::test_hooks::embedded(sha256);
            return Ok(());
        }
        if self.compile_in == CompileIn::ChildProcess {
            match compile_process::compile_in_child(dir, sha256, bytes) {
                Ok(()) => return Ok(()),
                Err(ChildCompile::Failed(reason)) => {
                    return Err(PrepareError::Compile(wasmtime::Error::msg(reason)));
                }
                Err(ChildCompile::NotStarted(e)) => tracing::warn!(
                    "compiling in this process: a compiling process cannot be started: {e}"
                ),
            }
        }
        let compiler = match compiler {
            Some(compiler) => compiler,
            None => Compiler::new(edition).map_err(PrepareError::Compile)?,
        };
        let code = compiler
            .compile(sha256, bytes)
            .map_err(PrepareError::Compile)?;
        cache.store_code(sha256, &code);
        Ok(())
    }

    /// The code compiled into the binary for the bundled component whose SHA-256 is `sha256`, if
    /// there is one and this machine's CPU can run it (looked at once per edition, by loading the
    /// first such code asked for in an engine of the edition's settings).
    fn embedded_code(&self, edition: Edition, sha256: &str) -> Option<&'static [u8]> {
        let code = precompiled::code_of(sha256)?;
        let loads = self.embedded_loads[edition as usize].get_or_init(|| {
            let loaded = Compiler::new(edition).and_then(|compiler| compiler.loads(code));
            precompiled::release(code);
            if let Err(e) = &loaded {
                tracing::info!(
                    "compiling the bundled tools: the code built in does not load here: {e:#}"
                );
            }
            loaded.is_ok()
        });
        loads.then_some(code)
    }

    /// Asks a prepared tool to describe itself (in a store with no filesystem). The guest runs on the
    /// caller's task, where nothing but its own epoch checks can stop it, so from the first `describe`
    /// on a ticker thread advances the epoch every few milliseconds and the store traps past the limit.
    pub(crate) async fn describe(&self, tool: &Prepared) -> Result<RawDescriptor, PrepareError> {
        let runtime = self.runtime_of(tool);
        runtime.start_ticker();
        let _slot = self
            .slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let (mut store, _stdout, stderr, _network) =
            self.new_store(&runtime.engine, None, None, &[], Arc::default());
        let work = async {
            let instance = tool
                .pre
                .instance_pre()
                .instantiate_async(&mut store)
                .await?;
            let descriptor = Tool::new(&mut store, &instance)?
                .call_describe(&mut store)
                .await?;
            let urls = if tool.declares_urls {
                NetworkTool::new(&mut store, &instance)?
                    .call_url_fields(&mut store)
                    .await?
            } else {
                Vec::new()
            };
            Ok((descriptor, urls))
        };
        let (descriptor, urls) = match tokio::time::timeout(self.limits.wall_time, work).await {
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
            urls,
            imports: tool.imports.clone(),
        })
    }

    /// Runs one call in a fresh instance whose only filesystem is `view` (`None`: no filesystem) and
    /// whose only network is `network` (`None`: every request denied) and whose environment is `env`.
    ///
    /// A call with a view runs on a call thread: its filesystem host calls are synchronous, so only a
    /// thread of its own lets the caller stop waiting at the wall-time limit whatever such a call is
    /// doing. A call without one (every host call it can make is asynchronous) runs on the caller's
    /// task, saving the two thread hand-offs; the epoch ticker makes its guest yield every
    /// few milliseconds (`engine.rs`), so the wall-time limit and `cancel` stop it even while it computes. When the
    /// caller stops waiting (the wall-time limit, or `cancel`), it advances the engine's epoch, so the
    /// guest traps at its next epoch check (see `new_store`).
    pub(crate) async fn run(
        &self,
        tool: &Prepared,
        view: Option<CallView>,
        input: &str,
        (network, env): (Option<NetworkSetup>, &[(String, String)]),
        cancel: Option<&Cancel>,
    ) -> RunReport {
        let started = Instant::now();
        // A call stuck past its limit keeps its slot (its instance is still there) until it unwinds.
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let on_thread = view.is_some();
        let engine = &self.runtime_of(tool).engine;
        if !on_thread {
            self.runtime_of(tool).start_ticker();
        }
        // Set when the caller stops waiting (the wall-time limit or a cancellation): the guest traps at
        // its next epoch check, so its instance slot is free at once even while it computes.
        let stop = Arc::new(AtomicBool::new(false));
        let (store, stdout, stderr, network) =
            self.new_store(engine, view, network, env, stop.clone());
        let limits = self.limits;
        let work = call_in(store, tool.pre.clone(), input.to_owned(), slot);
        let mut running = if on_thread {
            match self.on_call_thread(work) {
                Ok(running) => running,
                Err(e) => {
                    let error = RunError::Setup(format!("cannot start the call's thread: {e}"));
                    return self.report(Err(error), &stdout, &stderr, started, None, &network);
                }
            }
        } else {
            Running::Inline(Box::pin(work))
        };
        let stopped = async {
            match cancel {
                Some(signal) => signal.cancelled().await,
                None => std::future::pending().await,
            }
        };
        // The wall-time limit, moved on by the time the call's network requests waited for the approver.
        let paused = network.paused();
        let waiting_since = Instant::now();
        let wall_time = async {
            loop {
                if paused.is_waiting() {
                    tokio::time::sleep(APPROVAL_RECHECK).await;
                    continue;
                }
                let elapsed = waiting_since.elapsed().saturating_sub(paused.waited());
                match limits.wall_time.checked_sub(elapsed) {
                    Some(left) if !left.is_zero() => tokio::time::sleep(left).await,
                    _ => return,
                }
            }
        };
        let waited = tokio::select! {
            finished = running.finished() => Ok(finished),
            () = wall_time => Err(RunError::Timeout {
                limit: limits.wall_time,
            }),
            () = stopped => Err(RunError::Cancelled),
        };
        let (result, view) = match waited {
            Ok(Some(finished)) => finished,
            Ok(None) => {
                let error = RunError::Setup("the call's thread ended without an answer".into());
                return self.report(Err(error), &stdout, &stderr, started, None, &network);
            }
            Err(stopped) => {
                stop.store(true, Ordering::SeqCst);
                engine.increment_epoch();
                running.stop().await;
                return self.report(Err(stopped), &stdout, &stderr, started, None, &network);
            }
        };
        let result = match result {
            Err(trap) => Err(classify(trap, &stderr.contents(), limits)),
            Ok(Err(tool_error)) => Err(RunError::Tool(ToolError::from(tool_error))),
            Ok(Ok(output)) if output.len() > limits.output_bytes => Err(RunError::OutputLimit {
                limit: limits.output_bytes,
            }),
            Ok(Ok(output)) => Ok(output),
        };
        self.report(result, &stdout, &stderr, started, view, &network)
    }

    /// Moves `work` to a call thread, which drives it with the caller's runtime (so timers, such as a
    /// guest's sleep, still run there) until it finishes or is stopped.
    fn on_call_thread<F>(&self, work: F) -> std::io::Result<Running<F>>
    where
        F: Future<Output = (Finished, Leftover)> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done, answer) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Handle::current();
        self.threads.spawn_with_tail(move || {
            let finished = runtime.block_on(async {
                tokio::select! {
                    finished = work => Some(finished),
                    _ = stopped => None,
                }
            });
            let leftover = finished.map(|(finished, leftover)| {
                let _ = done.send(finished);
                leftover
            });
            Box::new(move || drop(leftover))
        })?;
        Ok(Running::OnThread { answer, stop })
    }

    /// The call's report; a network or output limit the call exceeded is its result, whatever the guest
    /// did after it (a WASI 0.3 guest is told of a full stdout as an error it may ignore).
    fn report(
        &self,
        result: Result<String, RunError>,
        stdout: &BoundedOutput,
        stderr: &BoundedOutput,
        started: Instant,
        view: Option<CallView>,
        network: &CallNetwork,
    ) -> RunReport {
        let (requests, exceeded) = network.finish();
        let output_exceeded = stdout.exceeded().or_else(|| stderr.exceeded());
        let (result, view) = match (exceeded, output_exceeded) {
            (Some(limit), _) => (Err(RunError::NetworkLimit(limit)), None),
            (None, Some(limit)) => (Err(RunError::OutputLimit { limit }), None),
            (None, None) => (result, view),
        };
        RunReport {
            result,
            stdout: stdout.contents(),
            stderr: stderr.contents(),
            duration: started.elapsed(),
            view,
            requests,
        }
    }

    /// A store whose WASI context grants only `view` (if any), the network of `network` (none: every
    /// request denied), bounded stdio, and the limits.
    fn new_store(
        &self,
        engine: &Engine,
        view: Option<CallView>,
        network: Option<NetworkSetup>,
        env: &[(String, String)],
        stop: Arc<AtomicBool>,
    ) -> (
        Store<CallState>,
        BoundedOutput,
        BoundedOutput,
        Arc<CallNetwork>,
    ) {
        let stdout = BoundedOutput::new(self.limits.output_bytes);
        let stderr = BoundedOutput::new(self.limits.output_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone()).stderr(stderr.clone()).envs(env);
        let network = network.unwrap_or_else(|| NetworkSetup::none(self.limits.network));
        // A network limit exceeded stops the guest as the caller does: the stop flag, then an epoch tick.
        let weak_engine = engine.weak();
        let stop_flag = stop.clone();
        let network = CallNetwork::new(
            network,
            Box::new(move || {
                stop_flag.store(true, Ordering::SeqCst);
                if let Some(engine) = weak_engine.upgrade() {
                    engine.increment_epoch();
                }
            }),
        );
        let state = CallState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            view,
            limiter: CallLimiter::new(self.limits.memory_bytes),
            http: WasiHttpCtx::new(),
            hooks: NetworkHooks::new(network.clone()),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_max_component_handles(limits::MAX_HANDLES);
        // Checked whenever the epoch advances: past the wall-time limit, or once the caller stopped the
        // call, the guest traps with `Interrupt`.
        // Time spent waiting for the approver of a network request does not count.
        let deadline = Instant::now() + self.limits.wall_time;
        let paused = network.paused();
        store.epoch_deadline_callback(move |_| {
            let deadline = deadline + paused.waited();
            if stop.load(Ordering::SeqCst) || Instant::now() >= deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                // Back to the executor, so that a guest that computes on the caller's task lets the
                // caller's wall-time limit and cancellation (and other tasks) run.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        (store, stdout, stderr, network)
    }
}

/// What a call's instance answered (`Err`: a trap), and the view it ran with.
type Finished = (
    wasmtime::Result<Result<String, bindings::ToolError>>,
    Option<CallView>,
);

/// What is left of a call once it answered: its store (the instance, whose memory the pool resets when
/// it is dropped, and the guest's resources) and then its instance slot, freed in that order. A call
/// thread sends the answer first and frees these after, off the caller's path.
struct Leftover {
    _store: Store<CallState>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// Instantiates the tool in `store` and calls it with `input`: its answer, and what is left to free.
async fn call_in(
    mut store: Store<CallState>,
    pre: ToolPre<CallState>,
    input: String,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> (Finished, Leftover) {
    let result = async {
        let instance: Tool = pre.instantiate_async(&mut store).await?;
        instance.call_call(&mut store, &input).await
    }
    .await;
    let view = store.data_mut().view.take();
    let leftover = Leftover {
        _store: store,
        _slot: slot,
    };
    ((result, view), leftover)
}

/// A call under way: on the caller's task, or on a call thread.
enum Running<F> {
    Inline(Pin<Box<F>>),
    OnThread {
        answer: tokio::sync::oneshot::Receiver<Finished>,
        stop: tokio::sync::oneshot::Sender<()>,
    },
}

impl<F: Future<Output = (Finished, Leftover)>> Running<F> {
    /// The call's answer; `None` if its thread ended without one.
    async fn finished(&mut self) -> Option<Finished> {
        match self {
            Running::Inline(work) => Some(work.as_mut().await.0),
            Running::OnThread { answer, .. } => answer_of(answer).await,
        }
    }

    /// Stops the call: an inline one is dropped on the spot (its store with it); a call thread is told
    /// to stop and given [`UNWIND_GRACE`] to drop its store and remove its staged files.
    async fn stop(self) {
        if let Running::OnThread { answer, stop } = self {
            let _ = stop.send(());
            let _ = tokio::time::timeout(UNWIND_GRACE, answer).await;
        }
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
    let guest_message =
        crate::network::mask_urls(String::from_utf8_lossy(&stderr[tail_start..]).trim())
            .into_owned();
    RunError::Trap {
        trap: format!("{error:#}"),
        guest_message,
    }
}

/// The edition of the component in `bytes`, once they are seen to be a component at all.
fn component_edition(bytes: &[u8]) -> Result<Edition, PrepareError> {
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => Err(PrepareError::CoreModule),
        Some([0, b'a', b's', b'm', ..]) => Ok(Edition::of(bytes)),
        _ => Err(PrepareError::NotWasm),
    }
}

/// Whether the component's `call` export is an `async func` (the `async-tool` world's).
fn exports_async_call(component: &Component, engine: &Engine) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, item)| {
            name == "call" && matches!(item.ty, ComponentItem::ComponentFunc(f) if f.async_())
        })
}
