//! The toolbox: every loaded tool, and the facade that runs one call from the gate to its applied effects.
//!
//! [`ToolboxBuilder`] collects components (the bundled tools, a directory of `*.wasm` files, or bytes),
//! and [`ToolboxBuilder::build`] prepares each in the [`Sandbox`](crate::sandbox), asks it to describe
//! itself, checks the descriptor and rejects duplicates, naming the file and the reason for every refusal.
//! [`Toolbox::call_in`] is the whole single-call pipeline: the gate; approval first for a tool that only
//! reads and needs it; a fresh sandboxed instance over a view of exactly what the gate approved; the
//! change set, checked against the approval and the policy again; review when asked for; and the
//! journaled apply. [`Toolbox::call`] is the same with no approver.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::approval::{ApprovalRequest, Approver, AskedBecause, ToolProvenance};
use crate::bundled::BUNDLED_COMPONENTS;
use crate::cancel::Cancel;
use crate::descriptor::{Access, DescriptorError, ToolContract, ToolDescriptor};
use crate::effects::journal::CallMeta;
use crate::effects::turn_order::TurnPlace;
use crate::effects::{ChangeSet, Effects, order};
use crate::gate::{ApprovedCall, ToolCatalog, check_call};
use crate::lockfile::{LOCK_FILE, LockError, PinnedTool, ToolLock};
use crate::network::{self, Asks, NetworkSetup, Resolver, SystemResolver};
use crate::outcome::{CallError, CallOutcome, CancelledAt};
use crate::policy::Policy;
use crate::registry::trust::Trust;
use crate::root::Root;
use crate::sandbox::{
    CacheSetting, CompileIn, EngineError, Instances, Limits, PrepareError, Prepared, RawDescriptor,
    RunError, RunReport, Sandbox,
};
use crate::view::staging::STAGING_DIR;
use crate::view::{CallView, Grant};

/// Where a tool came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolOrigin {
    /// Built into turngate.
    Bundled,
    /// Loaded from this file.
    File(PathBuf),
    /// Given as bytes by the embedding program, under this label.
    Bytes(String),
}

impl fmt::Display for ToolOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolOrigin::Bundled => f.write_str("bundled"),
            ToolOrigin::File(path) => write!(f, "{}", path.display()),
            ToolOrigin::Bytes(label) => write!(f, "{label}"),
        }
    }
}

/// A tool ready to be called: its checked contract (descriptor and compiled schema), its digest, and
/// its component, prepared on first call (a process knows its bundled tools from the build and the
/// others from the cache, and compiles or deserializes only the ones it calls).
pub struct LoadedTool {
    contract: ToolContract,
    origin: ToolOrigin,
    sha256: String,
    imports: Vec<String>,
    /// The lock entry of a tool installed from a registry (its source, manifest, signer).
    registry: Option<PinnedTool>,
    source: Source,
    /// Set once; concurrent first calls wait for the one preparation.
    prepared: tokio::sync::OnceCell<Prepared>,
    /// Set once the component's code is in the cache, put there by the background or by the first
    /// call; a call that comes while the background compiles it waits for that compile.
    compiled: tokio::sync::OnceCell<()>,
}

/// Where a tool's component bytes are, for preparing it when it is first called.
enum Source {
    Bundled(&'static [u8]),
    /// Read again (and its digest checked again) when first called.
    File(PathBuf),
    Bytes(Arc<[u8]>),
}

impl fmt::Debug for LoadedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedTool")
            .field("name", &self.contract.descriptor().name)
            .field("origin", &self.origin)
            .finish()
    }
}

impl LoadedTool {
    /// What the tool said about itself.
    pub fn descriptor(&self) -> &ToolDescriptor {
        self.contract.descriptor()
    }

    /// Where it came from.
    pub fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    /// For a tool installed from a registry, its lock entry: the source, the manifest digest, the
    /// signer and the grants accepted.
    pub fn registry(&self) -> Option<&PinnedTool> {
        self.registry.as_ref()
    }

    /// Every interface the component imports (each one the sandbox grants).
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// The WASI generation the component targets: "0.3" when it imports any WASI 0.3 interface (it may
    /// import 0.2 ones too, as toolchains' standard libraries do), "0.2" when it imports only 0.2 ones,
    /// `None` when it imports nothing of WASI.
    pub fn wasi(&self) -> Option<&'static str> {
        crate::sandbox::wasi_generation(&self.imports)
    }

    /// Whether the component imports `wasi:http`: it may make the requests its policy grants it.
    pub fn reaches_network(&self) -> bool {
        self.imports
            .iter()
            .any(|name| name.starts_with("wasi:http/"))
    }

    /// The SHA-256 of the component's bytes, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Where it came from, as a question about one of its calls shows it.
    pub fn provenance(&self) -> ToolProvenance {
        let registry = self.registry();
        ToolProvenance {
            origin: self.origin().to_string(),
            sha256: self.sha256.clone(),
            source: registry.and_then(|entry| entry.source.clone()),
            signer: registry.and_then(|entry| entry.signer.as_ref().map(ToString::to_string)),
        }
    }

    /// The prepared component, made on first use (once, however many calls ask for it at once).
    async fn prepared(&self, sandbox: &Sandbox) -> Result<&Prepared, PrepareError> {
        self.prepared
            .get_or_try_init(|| async {
                let bytes = self.bytes()?;
                if sandbox.caches() {
                    self.compiled(sandbox, &bytes).await?;
                }
                sandbox.prepare(&self.sha256, &bytes)
            })
            .await
    }

    /// Makes sure the cache holds the compiled code of `bytes`, the component's (once, whoever asks
    /// first), without loading it (see [`Sandbox::precompile`]).
    async fn compiled(&self, sandbox: &Sandbox, bytes: &[u8]) -> Result<(), PrepareError> {
        self.compiled
            .get_or_try_init(|| async {
                if self.prepared.initialized() {
                    return Ok(());
                }
                sandbox.precompile(&self.sha256, bytes)
            })
            .await
            .copied()
    }

    /// What the background does ahead of the tool's first call: its code compiled into the cache,
    /// not loaded (a server keeps no code of a tool nobody called); with no cache, the tool prepared.
    async fn prepare_ahead(&self, sandbox: &Sandbox) -> Result<(), PrepareError> {
        if !sandbox.caches() {
            return self.prepared(sandbox).await.map(drop);
        }
        // A file is read only for a tool nobody has compiled or prepared yet.
        if self.compiled.initialized() || self.prepared.initialized() {
            return Ok(());
        }
        self.compiled(sandbox, &self.bytes()?).await
    }

    /// The component's bytes: a file's are read again, and must still have the digest it was loaded
    /// with.
    fn bytes(&self) -> Result<Cow<'_, [u8]>, PrepareError> {
        Ok(match &self.source {
            Source::Bundled(bytes) => Cow::Borrowed(bytes),
            Source::Bytes(bytes) => Cow::Borrowed(bytes),
            Source::File(path) => {
                let bytes = std::fs::read(path).map_err(|e| PrepareError::Reread(e.to_string()))?;
                let now = sha256_hex(&bytes);
                if now != self.sha256 {
                    return Err(PrepareError::Changed {
                        loaded: self.sha256.clone(),
                        now,
                    });
                }
                Cow::Owned(bytes)
            }
        })
    }

    /// Whether `input` is valid against the tool's schema.
    pub fn accepts(&self, input: &serde_json::Value) -> bool {
        self.contract
            .validator()
            .is_ok_and(|validator| validator.is_valid(input))
    }
}

/// Why a toolbox could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolboxError {
    /// The engine could not be created.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A tools directory could not be read.
    #[error("cannot read tools directory {dir}: {error}")]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A component file could not be read.
    #[error("cannot read {path}: {error}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A component is not a usable tool.
    #[error("{origin}: {error}")]
    Component {
        /// Where it came from.
        origin: ToolOrigin,
        /// Why it was refused.
        error: PrepareError,
    },
    /// A component is not pinned by its directory's lock, or the lock is unusable.
    #[error("{}: {error}", path.display())]
    Lock {
        /// The component (or the lock file).
        path: PathBuf,
        /// What the lock says.
        error: LockError,
    },
    /// A tool from a registry whose kept manifest or signature no longer vouches for it (`--locked`).
    #[error("{}: {reason}", path.display())]
    Provenance {
        /// The component.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A tool described itself wrongly.
    #[error("{origin}: {error}")]
    Descriptor {
        /// Where it came from.
        origin: ToolOrigin,
        /// What is wrong with the descriptor.
        error: DescriptorError,
    },
    /// Two tools share a name.
    #[error("{second}: tool name `{name}` is already taken by {first}")]
    DuplicateName {
        /// The name.
        name: String,
        /// The tool that has it.
        first: ToolOrigin,
        /// The tool that asked for it again.
        second: ToolOrigin,
    },
}

/// Builds a [`Toolbox`]. Defaults: the bundled tools, no extra tools, [`Limits::default`], the user's
/// precompiled cache directory, tools directories not locked, [`DEFAULT_MAX_CONCURRENT`] calls at once,
/// [`Instances::Pooled`].
#[derive(Debug, Clone)]
pub struct ToolboxBuilder {
    without_bundled: bool,
    dirs: Vec<PathBuf>,
    components: Vec<(ToolOrigin, Vec<u8>)>,
    limits: Limits,
    cache: CacheSetting,
    locked: bool,
    trust: Trust,
    max_concurrent: usize,
    instances: Instances,
    compile_in: CompileIn,
    resolver: Arc<dyn Resolver>,
}

/// Calls a toolbox runs at once by default (more wait for a slot).
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

impl Default for ToolboxBuilder {
    fn default() -> Self {
        ToolboxBuilder {
            without_bundled: false,
            dirs: Vec::new(),
            components: Vec::new(),
            limits: Limits::default(),
            cache: CacheSetting::default(),
            locked: false,
            trust: Trust::default(),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            instances: Instances::default(),
            compile_in: CompileIn::default(),
            resolver: Arc::new(SystemResolver),
        }
    }
}

impl ToolboxBuilder {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves the bundled tools out.
    pub fn without_bundled(mut self) -> Self {
        self.without_bundled = true;
        self
    }

    /// Loads every `*.wasm` file in `dir` (not recursively).
    pub fn tools_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dirs.push(dir.into());
        self
    }

    /// Loads one component file.
    pub fn component_file(mut self, path: impl AsRef<Path>) -> Result<Self, ToolboxError> {
        let path = path.as_ref().to_path_buf();
        let bytes = std::fs::read(&path).map_err(|source| ToolboxError::ReadFile {
            path: path.clone(),
            error: source,
        })?;
        self.components.push((ToolOrigin::File(path), bytes));
        Ok(self)
    }

    /// Loads a component from bytes, labelled `label` in messages.
    pub fn component_bytes(mut self, label: impl Into<String>, bytes: Vec<u8>) -> Self {
        self.components
            .push((ToolOrigin::Bytes(label.into()), bytes));
        self
    }

    /// Sets the per-call limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets where precompiled components are cached.
    pub fn cache(mut self, cache: CacheSetting) -> Self {
        self.cache = cache;
        self
    }

    /// Loads from each tools directory only the components its `turngate.lock` pins, with the pinned
    /// digest ([`crate::lockfile`]); a tool installed from a registry also has its kept manifest and
    /// signature checked again ([`crate::registry::provenance`]).
    pub fn locked(mut self, locked: bool) -> Self {
        self.locked = locked;
        self
    }

    /// The policy's `[trust]`: with `locked`, the signer of a tool from a registry must still be one
    /// it trusts.
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// How many calls run at once (the instance pool's size); more wait for a slot.
    pub fn max_concurrent_calls(mut self, calls: usize) -> Self {
        self.max_concurrent = calls.max(1);
        self
    }

    /// How the engine allocates the instances calls run in.
    pub fn instances(mut self, instances: Instances) -> Self {
        self.instances = instances;
        self
    }

    /// Where components not in the cache are compiled: in this process by default; a program that
    /// hands [`COMPILE_COMMAND`](crate::sandbox::COMPILE_COMMAND) to
    /// [`compile_command`](crate::sandbox::compile_command) may compile them in a child of its own, so
    /// that a compile's memory never adds to its own (see [`CompileIn`]).
    pub fn compile_in(mut self, compile_in: CompileIn) -> Self {
        self.compile_in = compile_in;
        self
    }

    /// How the host resolves the names tools request (the system's resolver by default; a
    /// [`StaticResolver`](crate::network::StaticResolver) pins names to addresses).
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Checks and describes every component (from the descriptor cache when it knows the component's
    /// digest). Fails on the first component that is not a valid tool, naming it and the reason.
    pub async fn build(self) -> Result<Toolbox, ToolboxError> {
        let sandbox = Sandbox::new(
            self.limits,
            &self.cache,
            self.max_concurrent,
            self.instances,
            self.compile_in,
        )?;
        let mut pending: Vec<Pending> = Vec::new();
        if !self.without_bundled {
            pending.extend(BUNDLED_COMPONENTS.iter().map(|c| {
                Pending {
                    origin: ToolOrigin::Bundled,
                    sha256: c.sha256.to_owned(),
                    bytes: Some(Cow::Borrowed(c.bytes)),
                    source: Source::Bundled(c.bytes),
                    known: c
                        .descriptor
                        .and_then(|text| serde_json::from_str::<RawDescriptor>(text).ok()),
                    registry: None,
                }
            }));
        }
        for dir in &self.dirs {
            pending.extend(read_tools_dir(dir, self.locked, &self.trust)?);
        }
        for (origin, bytes) in self.components {
            let bytes: Arc<[u8]> = bytes.into();
            pending.push(Pending {
                origin,
                sha256: sha256_hex(&bytes),
                bytes: Some(Cow::Owned(bytes.to_vec())),
                source: Source::Bytes(bytes),
                known: None,
                registry: None,
            });
        }
        let mut tools: BTreeMap<String, LoadedTool> = BTreeMap::new();
        for source in pending {
            let tool = load_tool(&sandbox, source).await?;
            let name = tool.descriptor().name.clone();
            if let Some(first) = tools.get(&name) {
                return Err(ToolboxError::DuplicateName {
                    name,
                    first: first.origin.clone(),
                    second: tool.origin,
                });
            }
            tools.insert(name, tool);
        }
        Ok(Toolbox {
            sandbox,
            tools,
            resolver: self.resolver,
        })
    }
}

/// A component found, not yet loaded.
struct Pending {
    origin: ToolOrigin,
    sha256: String,
    /// The bytes, while they are at hand (a file's are read again if it is prepared later).
    bytes: Option<Cow<'static, [u8]>>,
    source: Source,
    /// What it says about itself, known without running it (a bundled tool's, from the build).
    known: Option<RawDescriptor>,
    /// Its lock entry, when it came from a registry.
    registry: Option<PinnedTool>,
}

/// Every `*.wasm` file in `dir`, in name order, hashed (and checked against the directory's lock when
/// `locked`: its digest, and for a tool from a registry its kept manifest and signature, the signer
/// held to `trust`). The lock, when there is one, also says which tools came from a registry.
fn read_tools_dir(dir: &Path, locked: bool, trust: &Trust) -> Result<Vec<Pending>, ToolboxError> {
    let read_dir_error = |source| ToolboxError::ReadDir {
        dir: dir.to_path_buf(),
        error: source,
    };
    let lock_path = dir.join(LOCK_FILE);
    let lock = match std::fs::read_to_string(&lock_path) {
        Ok(text) => Some(ToolLock::parse(&text).map_err(|source| ToolboxError::Lock {
            path: lock_path.clone(),
            error: source,
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !locked => None,
        Err(source) => {
            return Err(ToolboxError::ReadFile {
                path: lock_path,
                error: source,
            });
        }
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir_error)? {
        let path = entry.map_err(read_dir_error)?.path();
        if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).map_err(|source| ToolboxError::ReadFile {
                path: path.clone(),
                error: source,
            })?;
            let sha256 = sha256_hex(&bytes);
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let entry = lock.as_ref().and_then(|lock| lock.get(&file));
            if locked && let Some(lock) = &lock {
                lock.check(&file, &sha256)
                    .map_err(|source| ToolboxError::Lock {
                        path: path.clone(),
                        error: source,
                    })?;
                if let Some(entry) = entry.filter(|e| e.from_registry()) {
                    check_provenance(dir, entry, &sha256, trust).map_err(|reason| {
                        ToolboxError::Provenance {
                            path: path.clone(),
                            reason,
                        }
                    })?;
                }
            }
            Ok(Pending {
                origin: ToolOrigin::File(path.clone()),
                sha256,
                bytes: Some(Cow::Owned(bytes)),
                source: Source::File(path),
                known: None,
                registry: entry.filter(|e| e.from_registry()).cloned(),
            })
        })
        .collect()
}

/// Checks the kept manifest and signature of the registry tool `entry` of `dir` (`registry/provenance.rs`).
fn check_provenance(
    dir: &Path,
    entry: &PinnedTool,
    sha256: &str,
    trust: &Trust,
) -> Result<(), String> {
    let path = dir.join(crate::registry::provenance::file_name(&entry.file));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("its provenance {}: {e}", path.display()))?;
    let provenance: crate::registry::provenance::Provenance = serde_json::from_str(&text)
        .map_err(|e| format!("its provenance {}: {e}", path.display()))?;
    provenance.check(entry, sha256, Some(trust))
}

async fn load_tool(sandbox: &Sandbox, pending: Pending) -> Result<LoadedTool, ToolboxError> {
    let Pending {
        origin,
        sha256,
        bytes,
        source,
        known,
        registry,
    } = pending;
    let component_error = |source| ToolboxError::Component {
        origin: origin.clone(),
        error: source,
    };
    let prepared = tokio::sync::OnceCell::new();
    let remembered = known
        .filter(|raw| sandbox.grants_imports(raw))
        .or_else(|| sandbox.cached_descriptor(&sha256));
    let (raw, fresh) = match remembered {
        Some(raw) => (raw, false),
        None => {
            let bytes = bytes.unwrap_or_default();
            let ready = sandbox.prepare(&sha256, &bytes).map_err(component_error)?;
            let raw = sandbox.describe(&ready).await.map_err(component_error)?;
            let _ = prepared.set(ready);
            (raw, true)
        }
    };
    // A remembered descriptor (or a bundled tool's, held to its component by the tests) passed every
    // check when it was first loaded; its schema is compiled when the tool is first called.
    let check = if fresh {
        ToolDescriptor::from_guest
    } else {
        ToolDescriptor::remembered
    };
    let contract = check(
        raw.name.clone(),
        raw.description.clone(),
        &raw.input_schema,
        raw.paths.clone(),
        raw.urls.clone(),
    )
    .map_err(|source| ToolboxError::Descriptor {
        origin: origin.clone(),
        error: source,
    })?;
    // Only a component that passed every check is remembered.
    if fresh {
        sandbox.remember_descriptor(&sha256, &raw);
    }
    Ok(LoadedTool {
        contract,
        origin,
        sha256,
        imports: raw.imports,
        registry,
        source,
        prepared,
        compiled: tokio::sync::OnceCell::new(),
    })
}

/// The run error of a tool whose component could not be prepared when it was first called.
fn setup_error(error: PrepareError) -> RunError {
    RunError::Setup(format!(
        "the tool's component could not be prepared: {error}"
    ))
}

/// SHA-256 of `bytes`, hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// A set of tools and the sandbox that runs them. Share one per process: it owns the wasmtime engine.
pub struct Toolbox {
    sandbox: Sandbox,
    tools: BTreeMap<String, LoadedTool>,
    resolver: Arc<dyn Resolver>,
}

impl fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Toolbox {
    /// Starts a builder.
    pub fn builder() -> ToolboxBuilder {
        ToolboxBuilder::new()
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&LoadedTool> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &LoadedTool> {
        self.tools.values()
    }

    /// The per-call limits.
    pub fn limits(&self) -> Limits {
        self.sandbox.limits()
    }

    /// Runs one call with no approver and its own journal handle: [`Toolbox::call_in`] with a default
    /// [`CallContext`]. Nothing runs when the gate refuses; a tool marked `approval = "ask"` is denied.
    pub async fn call(
        &self,
        root: &Root,
        policy: &Policy,
        name: &str,
        raw_input: &str,
    ) -> CallOutcome {
        let effects = Effects::default();
        let mut context = CallContext::new(root, policy, &effects);
        self.call_in(&mut context, name, raw_input).await
    }

    /// Runs one call from the gate to its applied effects (see the module docs).
    pub async fn call_in(
        &self,
        context: &mut CallContext<'_>,
        name: &str,
        raw_input: &str,
    ) -> CallOutcome {
        self.prepare_thread_for(name);
        match check_call(self, context.root, context.policy, name, raw_input) {
            Ok(approved) => self.run_in(context, &approved, raw_input).await,
            Err(refusal) => CallOutcome::refused(name, CallError::Gate(refusal)),
        }
    }

    /// Compiles every tool whose code is not in the cache yet, one after another, on the calling
    /// thread, and loads none: what a long-running server does in the background when it starts, so
    /// that no first call waits for its tool's compile, while the server holds only the code of the
    /// tools it was called for, mapped from the cache (with no cache, every tool is prepared in
    /// memory). A call that comes meanwhile waits only for its own tool, which is compiled once by
    /// whichever asks first; a tool that fails here fails again, with its reason, when it is called.
    pub async fn prepare_all(&self) {
        crate::test_hooks::hold_prepare_all();
        for tool in self.tools.values() {
            let _ = tool.prepare_ahead(&self.sandbox).await;
        }
    }

    /// Wakes a call thread if `name` is a tool that declares paths (its call, once approved, runs on
    /// one with its view), so that the thread is ready when the gate and the view are.
    pub(crate) fn prepare_thread_for(&self, name: &str) {
        if let Some(tool) = self.tools.get(name)
            && tool.descriptor().filesystem_access().is_some()
        {
            self.sandbox.warm_call_thread();
        }
    }

    /// Calls a tool on `raw_input` directly, without the gate and without any filesystem or network: for
    /// conformance checks (`turngate tools check`), which must see how the tool itself answers input its
    /// schema forbids. Returns `None` when there is no tool of that name.
    pub async fn probe(&self, name: &str, raw_input: &str) -> Option<CallOutcome> {
        let tool = self.tools.get(name)?;
        let prepared = match tool.prepared(&self.sandbox).await {
            Ok(prepared) => prepared,
            Err(e) => return Some(CallOutcome::refused(name, CallError::Run(setup_error(e)))),
        };
        let report = self
            .sandbox
            .run(prepared, None, raw_input, (None, &[]), None)
            .await;
        Some(outcome(tool, report))
    }

    /// Runs a call the gate approved, with no approver: see [`Toolbox::run_in`].
    pub async fn run(
        &self,
        root: &Root,
        policy: &Policy,
        approved: &ApprovedCall<'_>,
    ) -> CallOutcome {
        let effects = Effects::default();
        let mut context = CallContext::new(root, policy, &effects);
        self.run_in(&mut context, approved, approved.input()).await
    }

    /// Runs a call the gate approved in a view of exactly its approved paths, then checks, reviews and
    /// applies what it changed. `raw_input` is the input as the model sent it (shown to the approver).
    pub async fn run_in(
        &self,
        context: &mut CallContext<'_>,
        approved: &ApprovedCall<'_>,
        raw_input: &str,
    ) -> CallOutcome {
        let name = approved.tool_name();
        let Some(tool) = self.tools.get(name) else {
            return CallOutcome::refused(
                name,
                CallError::Gate(crate::gate::GateError::UnknownTool(name.to_owned())),
            );
        };
        let access = tool.descriptor().filesystem_access();
        let asks = context.policy.needs_approval(name);
        let paths: Vec<_> = approved
            .paths()
            .iter()
            .map(|p| (p.location.clone(), p.access))
            .collect();
        // From before the view is taken until the changes are applied, calls touching the same paths
        // wait for each other, in the order they came. A turn's calls asked together take their
        // tickets in the turn's order, before a read is asked about (so a later write waits for it);
        // any other call takes its ticket once asked, holding no path while the user decides.
        let take_ticket = || {
            context
                .effects
                .order
                .take(order::held_paths(context.root, &paths))
        };
        let placed = match context.place {
            Some(place) => {
                place.before_taking_a_ticket().await;
                let ticket = take_ticket();
                place.placed();
                Some(ticket)
            }
            None => None,
        };
        // A call that only reads is asked about before it runs: what it reads is what it reveals.
        if asks && access != Some(Access::Write) {
            let provenance = tool.provenance();
            let request = ApprovalRequest {
                id: context.call_id.as_deref(),
                turn: context.turn.as_deref(),
                position: context.place.map(TurnPlace::position),
                tool: name,
                provenance: Some(&provenance),
                asked_because: AskedBecause::ToolAsks,
                input: raw_input,
                paths: paths.clone(),
                changes: None,
                diff: "",
                network: None,
            };
            if let Err(denied) = context.ask(&request).await {
                return CallOutcome::refused(name, denied);
            }
        }
        let ticket = placed.unwrap_or_else(take_ticket);
        ticket.ready().await;
        let view = match self.view(context, approved, access) {
            Ok(view) => view,
            Err(e) => {
                let error =
                    RunError::Setup(format!("cannot open the root for the call's view: {e}"));
                return CallOutcome::refused(name, CallError::Run(error));
            }
        };
        let prepared = match tool.prepared(&self.sandbox).await {
            Ok(prepared) => prepared,
            Err(e) => return CallOutcome::refused(name, CallError::Run(setup_error(e))),
        };
        let (asker, asks) = network::channel();
        let network = NetworkSetup {
            grant: context.policy.network(name),
            resolver: self.resolver.clone(),
            limits: self.sandbox.limits().network,
            secrets: context.policy.secrets_for(name),
            asker: Some(asker),
        };
        let env: Vec<(String, String)> = context
            .policy
            .env(name)
            .iter()
            .filter_map(|var| Some((var.clone(), std::env::var(var).ok()?)))
            .collect();
        let run = self.sandbox.run(
            prepared,
            view,
            approved.input(),
            (Some(network), &env),
            context.cancel,
        );
        let mut report = context.serve_network_asks(run, asks, tool, raw_input).await;
        let view = report.view.take();
        let mut outcome = outcome(tool, report);
        let (Ok(output), Some(view)) = (&outcome.result, view) else {
            return outcome;
        };
        let applied = self
            .apply(
                context,
                (approved, tool),
                raw_input,
                &paths,
                view,
                output.clone(),
            )
            .await;
        match applied {
            Ok(Some(entry)) => {
                outcome.journal_seq = Some(entry.seq);
                outcome.changes = entry.changes;
            }
            Ok(None) => {}
            Err(error) => outcome.result = Err(error),
        }
        outcome
    }

    /// The view of exactly the approved paths for a tool with `access` (`None`: no filesystem at all).
    fn view(
        &self,
        context: &CallContext<'_>,
        approved: &ApprovedCall<'_>,
        access: Option<Access>,
    ) -> std::io::Result<Option<CallView>> {
        let Some(access) = access else {
            return Ok(None);
        };
        let grants = approved
            .paths()
            .iter()
            .map(|p| Grant {
                location: p.location.clone(),
                access: p.access,
            })
            .collect();
        let staging_dir = match access {
            Access::Write => Some(context.root.staging_dir(STAGING_DIR)?),
            Access::Read => None,
        };
        Ok(Some(CallView::new(
            context.root,
            staging_dir,
            approved.tool_name(),
            context.policy,
            grants,
            self.sandbox.limits().staged_bytes,
        )))
    }

    /// The change set of a call that returned: checked, reviewed when asked for, applied.
    async fn apply(
        &self,
        context: &mut CallContext<'_>,
        (approved, tool): (&ApprovedCall<'_>, &LoadedTool),
        raw_input: &str,
        paths: &[(crate::resolve::RelPath, Access)],
        view: CallView,
        output: String,
    ) -> Result<Option<crate::effects::journal::JournalEntry>, CallError> {
        let name = approved.tool_name();
        let mut changes = ChangeSet::from_upper(view.finish())?;
        changes.check(name, approved.paths(), context.policy)?;
        if changes.is_empty() {
            return Ok(None);
        }
        let asked_because = match (context.policy.needs_approval(name), context.review) {
            (true, _) => Some(AskedBecause::ToolAsks),
            (false, true) => Some(AskedBecause::Review),
            (false, false) => None,
        };
        if let Some(asked_because) = asked_because {
            let size = context.approver.map(|a| a.diff_size()).unwrap_or_default();
            let diff = changes.diff(size);
            let provenance = tool.provenance();
            let request = ApprovalRequest {
                id: context.call_id.as_deref(),
                turn: context.turn.as_deref(),
                position: context.place.map(TurnPlace::position),
                tool: name,
                provenance: Some(&provenance),
                asked_because,
                input: raw_input,
                paths: paths.to_vec(),
                changes: Some(&changes),
                diff: &diff,
                network: None,
            };
            context.ask(&request).await?;
        }
        if let Some(place) = context.place {
            place.before_applying().await;
        }
        // The last point before anything moves: a cancel that came while the call ran, was checked,
        // was reviewed or waited for the calls before it in its turn wins over everything before it.
        crate::test_hooks::before_apply(context.cancel).await;
        context.not_cancelled(CancelledAt::Apply)?;
        let meta = CallMeta {
            call_id: context.call_id.clone(),
            turn: context.turn.clone(),
            tool: name.to_owned(),
            output: Some(output),
        };
        Ok(context.effects.apply(context.root, &meta, &changes)?)
    }
}

/// Everything one call runs with besides its tool and input.
pub struct CallContext<'a> {
    /// The root the call is confined to.
    pub root: &'a Root,
    /// The policy.
    pub policy: &'a Policy,
    /// What the calls on this root share: the journal, where changes are applied, and the order of
    /// calls that touch the same paths.
    pub effects: &'a Effects,
    /// Asked before calls of tools marked `approval = "ask"` (and every change set when `review`);
    /// `None` denies them.
    pub approver: Option<&'a dyn Approver>,
    /// Review every change set before it applies, not only those of tools marked `approval = "ask"`.
    pub review: bool,
    /// Stops the call while it runs; a stopped call applies nothing.
    pub cancel: Option<&'a Cancel>,
    /// The provider's call ID (journaled, shown to the approver).
    pub call_id: Option<String>,
    /// The turn the call belongs to (journaled; `turngate undo --turn`).
    pub turn: Option<String>,
    /// The call's place in its turn when the turn's calls are asked about together: it takes its
    /// ticket and applies after the calls before it.
    pub(crate) place: Option<&'a TurnPlace<'a>>,
}

impl<'a> CallContext<'a> {
    /// A context with no approver, no review, no cancellation and no IDs.
    pub fn new(root: &'a Root, policy: &'a Policy, effects: &'a Effects) -> CallContext<'a> {
        CallContext {
            root,
            policy,
            effects,
            approver: None,
            review: false,
            cancel: None,
            call_id: None,
            turn: None,
            place: None,
        }
    }

    /// Runs `run` while answering the network requests its hooks hold for approval (`asks`), one at a
    /// time, by asking the approver (nobody to ask: no). The time a question waits does not count
    /// against the call's wall time; cancelling the call stops the wait; the hook sends nothing until
    /// the answer is yes.
    async fn serve_network_asks(
        &self,
        run: impl Future<Output = RunReport>,
        mut asks: Asks,
        tool: &LoadedTool,
        raw_input: &str,
    ) -> RunReport {
        let mut run = std::pin::pin!(run);
        loop {
            let (shown, reply) = tokio::select! {
                report = &mut run => return report,
                Some(ask) = asks.recv() => ask,
            };
            let provenance = tool.provenance();
            let request = ApprovalRequest {
                id: self.call_id.as_deref(),
                turn: self.turn.as_deref(),
                position: self.place.map(TurnPlace::position),
                tool: &tool.descriptor().name,
                provenance: Some(&provenance),
                asked_because: AskedBecause::NetworkAsks,
                input: raw_input,
                paths: Vec::new(),
                changes: None,
                diff: "",
                network: Some(&shown),
            };
            let answer = async {
                match self.approver {
                    Some(approver) => approver.approve(&request).await,
                    None => false,
                }
            };
            tokio::select! {
                report = &mut run => return report,
                yes = answer => {
                    // A cancel that came while the user was asked wins over their yes: nothing is
                    // sent, and the run stops on the same cancel.
                    let _ = reply.send(yes && !self.cancel.is_some_and(Cancel::is_cancelled));
                }
            }
        }
    }

    /// Asks the approver; a denial (or no approver) is the call's error. A cancel ends the wait at
    /// once, and one that came while the approver decided wins over its yes: the call is cancelled.
    async fn ask(&self, request: &ApprovalRequest<'_>) -> Result<(), CallError> {
        let what = if request.changes.is_some() {
            "its changes were not applied"
        } else {
            "not run"
        };
        let Some(approver) = self.approver else {
            return Err(CallError::Approval(format!(
                "`{}` needs approval and there is nobody to ask: {what}",
                request.tool
            )));
        };
        self.not_cancelled(CancelledAt::Approval)?;
        let answer = approver.approve(request);
        let yes = match self.cancel {
            Some(cancel) => tokio::select! {
                yes = answer => yes,
                () = cancel.cancelled() => false,
            },
            None => answer.await,
        };
        self.not_cancelled(CancelledAt::Approval)?;
        if yes {
            Ok(())
        } else {
            Err(CallError::Approval(format!(
                "the user did not give approval for this `{}` call: {what}",
                request.tool
            )))
        }
    }

    /// `Err` once the call's cancel is set.
    fn not_cancelled(&self, stage: CancelledAt) -> Result<(), CallError> {
        match self.cancel {
            Some(cancel) if cancel.is_cancelled() => Err(CallError::Cancelled { stage }),
            _ => Ok(()),
        }
    }
}

impl ToolCatalog for Toolbox {
    fn contract(&self, name: &str) -> Option<&ToolContract> {
        self.tools.get(name).map(|tool| &tool.contract)
    }

    fn installed_from_registry(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|tool| tool.registry.is_some())
    }
}

fn outcome(tool: &LoadedTool, report: RunReport) -> CallOutcome {
    CallOutcome {
        tool: tool.descriptor().name.clone(),
        result: report.result.map_err(CallError::Run),
        stdout: report.stdout.to_vec(),
        stderr: report.stderr.to_vec(),
        duration: report.duration,
        changes: Vec::new(),
        journal_seq: None,
        requests: report.requests,
    }
}
