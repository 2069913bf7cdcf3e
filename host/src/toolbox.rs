//! The toolbox: every loaded tool, and the facade that runs one call through gate and sandbox.
//!
//! [`ToolboxBuilder`] collects components (the bundled tools, a directory of `*.wasm` files, or bytes),
//! and [`ToolboxBuilder::build`] prepares each in the [`Sandbox`](crate::sandbox), asks it to describe
//! itself, checks the descriptor and rejects duplicates, naming the file and the reason for every refusal.
//! [`Toolbox::call`] is the whole single-call pipeline: gate, then a fresh sandboxed instance.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bundled::BUNDLED_COMPONENTS;
use crate::descriptor::{DescriptorError, ToolDescriptor};
use crate::gate::{ApprovedCall, check_call};
use crate::outcome::{CallError, CallOutcome};
use crate::policy::Policy;
use crate::root::Root;
use crate::sandbox::{
    CacheSetting, EngineError, Limits, PrepareError, Prepared, RunReport, Sandbox,
};

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

/// A tool ready to be called: its checked descriptor, compiled schema and prepared component.
pub struct LoadedTool {
    descriptor: ToolDescriptor,
    origin: ToolOrigin,
    validator: jsonschema::Validator,
    prepared: Prepared,
}

impl fmt::Debug for LoadedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedTool")
            .field("name", &self.descriptor.name)
            .field("origin", &self.origin)
            .finish()
    }
}

impl LoadedTool {
    /// What the tool said about itself.
    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    /// Where it came from.
    pub fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    /// Every interface the component imports (each one the sandbox grants).
    pub fn imports(&self) -> &[String] {
        self.prepared.imports()
    }

    /// Whether `input` is valid against the tool's schema.
    pub fn accepts(&self, input: &serde_json::Value) -> bool {
        self.validator.is_valid(input)
    }

    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        &self.validator
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
    #[error("cannot read tools directory {dir}: {source}")]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A component file could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A component is not a usable tool.
    #[error("{origin}: {source}")]
    Component {
        /// Where it came from.
        origin: ToolOrigin,
        /// Why it was refused.
        source: PrepareError,
    },
    /// A tool described itself wrongly.
    #[error("{origin}: {source}")]
    Descriptor {
        /// Where it came from.
        origin: ToolOrigin,
        /// What is wrong with the descriptor.
        source: DescriptorError,
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
/// precompiled cache directory.
#[derive(Debug, Default)]
pub struct ToolboxBuilder {
    without_bundled: bool,
    dirs: Vec<PathBuf>,
    components: Vec<(ToolOrigin, Vec<u8>)>,
    limits: Limits,
    cache: CacheSetting,
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
            source,
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

    /// Prepares and describes every component. Fails on the first component that is not a valid tool,
    /// naming it and the reason.
    pub async fn build(self) -> Result<Toolbox, ToolboxError> {
        let sandbox = Sandbox::new(self.limits, &self.cache)?;
        // Bundled bytes are borrowed from the binary; loaded ones are owned.
        let mut sources: Vec<(ToolOrigin, Cow<'static, [u8]>)> = Vec::new();
        if !self.without_bundled {
            sources.extend(
                BUNDLED_COMPONENTS
                    .iter()
                    .map(|bytes| (ToolOrigin::Bundled, Cow::Borrowed(*bytes))),
            );
        }
        for dir in &self.dirs {
            sources.extend(
                read_tools_dir(dir)?
                    .into_iter()
                    .map(|(o, b)| (o, Cow::Owned(b))),
            );
        }
        sources.extend(self.components.into_iter().map(|(o, b)| (o, Cow::Owned(b))));

        let mut tools: BTreeMap<String, LoadedTool> = BTreeMap::new();
        for (origin, bytes) in sources {
            let tool = load_tool(&sandbox, origin, &bytes).await?;
            if let Some(first) = tools.get(&tool.descriptor.name) {
                return Err(ToolboxError::DuplicateName {
                    name: tool.descriptor.name.clone(),
                    first: first.origin.clone(),
                    second: tool.origin,
                });
            }
            tools.insert(tool.descriptor.name.clone(), tool);
        }
        Ok(Toolbox { sandbox, tools })
    }
}

fn read_tools_dir(dir: &Path) -> Result<Vec<(ToolOrigin, Vec<u8>)>, ToolboxError> {
    let read_dir_error = |source| ToolboxError::ReadDir {
        dir: dir.to_path_buf(),
        source,
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
                source,
            })?;
            Ok((ToolOrigin::File(path), bytes))
        })
        .collect()
}

async fn load_tool(
    sandbox: &Sandbox,
    origin: ToolOrigin,
    bytes: &[u8],
) -> Result<LoadedTool, ToolboxError> {
    let component_error = |source| ToolboxError::Component {
        origin: origin.clone(),
        source,
    };
    let prepared = sandbox.prepare(bytes).map_err(component_error)?;
    let raw = sandbox.describe(&prepared).await.map_err(component_error)?;
    let (descriptor, validator) =
        ToolDescriptor::from_guest(raw.name, raw.description, &raw.input_schema, raw.paths)
            .map_err(|source| ToolboxError::Descriptor {
                origin: origin.clone(),
                source,
            })?;
    Ok(LoadedTool {
        descriptor,
        origin,
        validator,
        prepared,
    })
}

/// A set of tools and the sandbox that runs them. Share one per process: it owns the wasmtime engine.
pub struct Toolbox {
    sandbox: Sandbox,
    tools: BTreeMap<String, LoadedTool>,
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

    /// Runs one call: the gate's checks (strict parse, known tool, schema, path scope, policy), then, if
    /// approved, a fresh sandboxed instance of the tool. Nothing runs when the gate refuses.
    pub async fn call(
        &self,
        root: &Root,
        policy: &Policy,
        name: &str,
        raw_input: &str,
    ) -> CallOutcome {
        match check_call(self, root, policy, name, raw_input) {
            Ok(approved) => self.run(root, &approved).await,
            Err(refusal) => CallOutcome {
                tool: name.to_owned(),
                result: Err(CallError::Gate(refusal)),
                stdout: Vec::new(),
                stderr: Vec::new(),
                duration: Duration::ZERO,
            },
        }
    }

    /// Calls a tool on `raw_input` directly, without the gate and without any filesystem or network: for
    /// conformance checks (`turngate tools check`), which must see how the tool itself answers input its
    /// schema forbids. Returns `None` when there is no tool of that name.
    pub async fn probe(&self, name: &str, raw_input: &str) -> Option<CallOutcome> {
        let tool = self.tools.get(name)?;
        let report = self.sandbox.run(&tool.prepared, None, raw_input).await;
        Some(outcome(tool, report))
    }

    /// Runs a call the gate approved.
    pub async fn run(&self, root: &Root, approved: &ApprovedCall<'_>) -> CallOutcome {
        let tool = approved.tool();
        let filesystem = tool
            .descriptor
            .filesystem_access()
            .map(|access| (root, access));
        let report = self
            .sandbox
            .run(&tool.prepared, filesystem, approved.input())
            .await;
        outcome(tool, report)
    }
}

fn outcome(tool: &LoadedTool, report: RunReport) -> CallOutcome {
    CallOutcome {
        tool: tool.descriptor.name.clone(),
        result: report.result.map_err(CallError::Run),
        stdout: report.stdout.to_vec(),
        stderr: report.stderr.to_vec(),
        duration: report.duration,
    }
}
