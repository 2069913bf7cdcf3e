//! `Toolbox`: the library's [`Toolbox`] with one root, its policy and its journal, as `turngate call`,
//! `turngate run`, `turngate journal` and `turngate undo` use them. Every method runs the library with
//! the GIL released, on one shared tokio runtime, and answers the library's own JSON.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;
use turngate::digest::Sha256Digest;
use turngate::effects::journal::{CallState, UndoError as LibUndoError};
use turngate::live::request::tool_definitions;
use turngate::{
    CacheSetting, CallContext, Cancel, Effects, Journal, Limits, PendingApprovals, Policy,
    Retention, Root, Toolbox, TurnHooks, TurnOptions, TurnStatus, UndoTarget, process_turn_with,
};

use crate::approver;
use crate::convert::{json_text, to_python};
use crate::decoder::{PyTurn, parse_provider};
use crate::errors::{
    PolicyError, StreamParseError, ToolLoadError, UndoError, UsageError, detached,
};

/// The runtime every call and turn runs on (each caller drives its own future with `block_on`; the
/// workers only serve what the library spawns).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("turngate")
            .enable_all()
            .build()
            .expect("start the tokio runtime")
    })
}

/// A cancellation signal: `cancel()` stops a running call or turn (a stopped call applies nothing; the
/// calls after it are answered `cancelled`).
#[pyclass(name = "Cancel", module = "turngate", frozen)]
pub struct PyCancel(Cancel);

#[pymethods]
impl PyCancel {
    #[new]
    fn new() -> Self {
        PyCancel(Cancel::new())
    }

    /// Sets the signal.
    fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether the signal is set.
    #[getter]
    fn cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// Tools, a root, a policy and the root's journal.
#[pyclass(name = "Toolbox", module = "turngate", frozen)]
pub struct PyToolbox {
    toolbox: Toolbox,
    root: Root,
    policy: Policy,
    effects: Effects,
}

#[pymethods]
impl PyToolbox {
    #[new]
    #[pyo3(signature = (root, *, policy = None, tools_dir = None, locked = false, bundled = true,
        timeout_ms = None, memory_mib = None, max_output = None, cache_dir = None, cache = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        policy: Option<&Bound<'_, PyAny>>,
        tools_dir: Option<PathBuf>,
        locked: bool,
        bundled: bool,
        timeout_ms: Option<u64>,
        memory_mib: Option<usize>,
        max_output: Option<usize>,
        cache_dir: Option<PathBuf>,
        cache: bool,
    ) -> PyResult<Self> {
        let policy = load_policy(policy)?;
        if locked && tools_dir.is_none() {
            return Err(UsageError::new_err("locked=True needs tools_dir"));
        }
        let defaults = Limits::default();
        let limits = Limits {
            wall_time: timeout_ms.map_or(defaults.wall_time, Duration::from_millis),
            memory_bytes: memory_mib.map_or(defaults.memory_bytes, |m| m << 20),
            output_bytes: max_output.unwrap_or(defaults.output_bytes),
            ..defaults
        };
        let cache = match (cache, cache_dir) {
            (false, _) => CacheSetting::Disabled,
            (true, Some(dir)) => CacheSetting::Dir(dir),
            (true, None) => CacheSetting::Default,
        };
        let mut builder = Toolbox::builder()
            .limits(limits)
            .cache(cache)
            .locked(locked)
            .trust(policy.trust());
        if !bundled {
            builder = builder.without_bundled();
        }
        if let Some(dir) = tools_dir {
            builder = builder.tools_dir(dir);
        }
        let opened = Root::open(&root)
            .map_err(|e| UsageError::new_err(format!("opening root {}: {e}", root.display())))?;
        let toolbox = detached(py, || runtime().block_on(builder.build()))?
            .map_err(|e| ToolLoadError::new_err(e.to_string()))?;
        Ok(PyToolbox {
            toolbox,
            root: opened,
            policy,
            effects: Effects::default(),
        })
    }

    /// The root every call is confined to.
    #[getter]
    fn root(&self) -> PathBuf {
        self.root.path().to_path_buf()
    }

    /// The loaded tools' names.
    #[getter]
    fn tool_names(&self) -> Vec<String> {
        self.toolbox
            .tools()
            .map(|t| t.descriptor().name.clone())
            .collect()
    }

    /// The tools as the provider's request expects them (`tools` of Messages, Chat or Responses; Gemini's
    /// `tools` with `functionDeclarations`).
    fn tool_definitions<'py>(
        &self,
        py: Python<'py>,
        provider: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        to_python(
            py,
            &tool_definitions(parse_provider(provider)?, &self.toolbox),
        )
    }

    /// Runs one call as `turngate call` does: gate, sandbox, review, apply. Returns the outcome
    /// (`{"tool", "status", "output" | "error": {"stage", "kind", "message"}, "changes", ...}`).
    #[pyo3(signature = (tool, input, *, approver = None, review = false, call_id = None, turn_id = None,
        cancel = None))]
    #[allow(clippy::too_many_arguments)]
    fn call<'py>(
        &self,
        py: Python<'py>,
        tool: &str,
        input: &Bound<'py, PyAny>,
        approver: Option<Py<PyAny>>,
        review: bool,
        call_id: Option<String>,
        turn_id: Option<String>,
        cancel: Option<PyRef<'py, PyCancel>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input = json_text(input)?;
        let approver = approver
            .map(|a| approver::given(py, a, &self.root, &self.policy))
            .transpose()?;
        let cancel = cancel.map(|c| c.0.clone());
        let outcome = detached(py, || {
            let mut context = CallContext::new(&self.root, &self.policy, &self.effects);
            context.approver = approver.as_deref();
            context.review = review;
            context.cancel = cancel.as_ref();
            context.call_id = call_id;
            context.turn = turn_id;
            runtime().block_on(self.toolbox.call_in(&mut context, tool, &input))
        })?;
        to_python(py, &outcome.to_json())
    }

    /// Gates a decoded turn as `turngate run` does and answers the report: `{"turn": {"id", "status",
    /// "stop_reason", "detail"}, "calls": [{"kind", "id", "name", "status", "reason", "step", "output",
    /// "changes"}], "history": [...]}` (and `"audit"` when asked for). A malformed turn raises
    /// `StreamParseError` with the report as its `report` (nothing ran).
    #[pyo3(signature = (turn, *, approver = None, review = false, turn_id = None, cancel = None,
        audit = false))]
    #[allow(clippy::too_many_arguments)]
    fn process_turn<'py>(
        &self,
        py: Python<'py>,
        turn: &PyTurn,
        approver: Option<Py<PyAny>>,
        review: bool,
        turn_id: Option<String>,
        cancel: Option<PyRef<'py, PyCancel>>,
        audit: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let approver = approver
            .map(|a| approver::given(py, a, &self.root, &self.policy))
            .transpose()?;
        let cancel = cancel.map(|c| c.0.clone());
        let turn = turn.turn.clone();
        let report = detached(py, || {
            let options = TurnOptions {
                audit,
                review,
                turn_id,
            };
            let hooks = TurnHooks {
                approver: approver.as_deref(),
                cancel: cancel.as_ref(),
            };
            runtime().block_on(process_turn_with(
                &self.toolbox,
                &self.root,
                &self.policy,
                turn,
                options,
                hooks,
            ))
        })?;
        let value = to_python(py, &report.to_embedding_json(audit))?;
        if report.turn.ending.status == TurnStatus::Malformed {
            let error = StreamParseError::new_err(report.turn.ending.detail.clone());
            error.value(py).setattr("report", value)?;
            return Err(error);
        }
        Ok(value)
    }

    /// The questions waiting in the root (asked with `approver="console"` here, or by `turngate
    /// run --approve-in console` and the other surfaces), oldest first: `{"digest", "asked_ms",
    /// "deadline_ms", "turn", "request"}` each.
    fn waiting_approvals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let waiting = PendingApprovals::waiting_in(&self.root)
            .map_err(|e| UsageError::new_err(e.to_string()))?;
        to_python(py, &serde_json::json!(waiting.questions))
    }

    /// Answers the question `digest` (`sha256:...`, as `waiting_approvals` gives it): the first
    /// answer stands. Raises `UsageError` when no such question waits (answered already, past its
    /// deadline, never asked).
    fn answer_approval<'py>(
        &self,
        py: Python<'py>,
        digest: &str,
        approve: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let digest: Sha256Digest = digest
            .parse()
            .map_err(|e: turngate::digest::DigestError| UsageError::new_err(e.to_string()))?;
        let answer = PendingApprovals::answer_in(&self.root, &digest, approve)
            .map_err(|e| UsageError::new_err(e.to_string()))?;
        to_python(py, &serde_json::json!(answer))
    }

    /// The root's journal, oldest first: `{"seq", "call_id", "turn", "tool", "time_ms", "state",
    /// "changes", "output"}` per applied (or undone) call.
    fn journal<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let entries = detached(py, || -> Result<Vec<Value>, String> {
            let Some(mut journal) = Journal::open_existing(&self.root, Retention::default())
                .map_err(|e| e.to_string())?
            else {
                return Ok(Vec::new());
            };
            let entries = journal.entries().map_err(|e| e.to_string())?;
            Ok(entries
                .iter()
                .filter(|e| matches!(e.state, CallState::Applied | CallState::Undone))
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect())
        })?
        .map_err(UndoError::new_err)?;
        to_python(py, &Value::Array(entries))
    }

    /// Undoes the last applied call, the last call with an ID, or every call of a turn (exactly one of
    /// `last`, `call`, `turn`); answers the calls undone, newest first. Raises `UndoError` when a file
    /// changed since or nothing matches; then nothing is restored.
    #[pyo3(signature = (*, last = false, call = None, turn = None))]
    fn undo<'py>(
        &self,
        py: Python<'py>,
        last: bool,
        call: Option<String>,
        turn: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = match (last, call, turn) {
            (true, None, None) => UndoTarget::Last,
            (false, Some(id), None) => UndoTarget::Call(id),
            (false, None, Some(id)) => UndoTarget::Turn(id),
            _ => {
                return Err(UsageError::new_err(
                    "undo needs exactly one of last=True, call=ID, turn=ID",
                ));
            }
        };
        let undone = detached(py, || -> Result<Vec<Value>, String> {
            let Some(mut journal) = Journal::open_existing(&self.root, Retention::default())
                .map_err(|e| e.to_string())?
            else {
                return Err(
                    LibUndoError::NothingToUndo("this root has no journal".into()).to_string(),
                );
            };
            let undone = journal
                .undo(&self.root, &target)
                .map_err(|e| e.to_string())?;
            Ok(undone
                .calls
                .iter()
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect())
        })?
        .map_err(UndoError::new_err)?;
        to_python(py, &Value::Array(undone))
    }
}

/// A policy from a path (`os.PathLike`: a TOML file), TOML text (`str`) or a dict of the same tables;
/// `None` allows every tool everywhere in the root.
fn load_policy(policy: Option<&Bound<'_, PyAny>>) -> PyResult<Policy> {
    let Some(policy) = policy.filter(|p| !p.is_none()) else {
        return Ok(Policy::allow_all());
    };
    let text = if let Ok(text) = policy.cast::<PyString>() {
        text.to_str()?.to_owned()
    } else if policy.cast::<PyDict>().is_ok() {
        let json = json_text(policy)?;
        let table: toml::Table = serde_json::from_str(&json)
            .map_err(|e| PolicyError::new_err(format!("policy dict is not a TOML table: {e}")))?;
        table.to_string()
    } else if policy.hasattr("__fspath__")? {
        let path: PathBuf = policy.extract()?;
        // The policy file is the caller's own, outside the root.
        #[allow(clippy::disallowed_methods)]
        std::fs::read_to_string(&path)
            .map_err(|e| PolicyError::new_err(format!("reading policy {}: {e}", path.display())))?
    } else {
        return Err(UsageError::new_err(
            "policy must be a path (os.PathLike), TOML text (str) or a dict",
        ));
    };
    Policy::from_toml(&text).map_err(|e| PolicyError::new_err(e.to_string()))
}
