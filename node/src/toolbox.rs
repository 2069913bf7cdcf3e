//! `NativeToolbox`: the library's [`Toolbox`] with one root, its policy and its journal, as
//! `turngate call`, `turngate run`, `turngate journal` and `turngate undo` use them. Every method runs
//! the library off the JavaScript thread ([`crate::running`]) and answers the library's own JSON as text.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::{Either, Promise, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::Value;
use turngate::digest::Sha256Digest;
use turngate::effects::journal::{CallState, UndoError as LibUndoError};
use turngate::live::request::tool_definitions;
use turngate::threads::LINGER;
use turngate::{
    CacheSetting, CallContext, Cancel, Effects, Journal, Limits, PendingApprovals, Policy,
    Retention, Root, Toolbox, TurnHooks, TurnOptions, TurnStatus, UndoTarget, process_turn_with,
};

use crate::approver;
use crate::decoder::{NativeTurn, parse_provider};
use crate::errors::{Class, error, error_with};
use crate::running::{answer_or_promise, promise_of};

/// A cancellation signal (`index.js` sets it when the call's `AbortSignal` aborts): a stopped call
/// applies nothing; the calls of a turn after it are answered `cancelled`.
#[napi]
pub struct NativeCancel(Cancel);

#[napi]
impl NativeCancel {
    /// A signal that is not set.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        NativeCancel(Cancel::new())
    }

    /// Sets the signal.
    #[napi]
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

/// The toolbox's options, as `index.js` passes them (camelCase, from `Toolbox.open`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    root: PathBuf,
    /// A policy file (TOML).
    policy_file: Option<PathBuf>,
    /// TOML text, or the same tables as an object.
    policy: Option<Value>,
    tools_dir: Option<PathBuf>,
    #[serde(default)]
    locked: bool,
    #[serde(default = "yes")]
    bundled: bool,
    timeout_ms: Option<u64>,
    memory_mib: Option<usize>,
    max_output: Option<usize>,
    cache_dir: Option<PathBuf>,
    #[serde(default = "yes")]
    cache: bool,
}

fn yes() -> bool {
    true
}

/// What every call on the toolbox shares.
struct State {
    toolbox: Toolbox,
    root: Root,
    policy: Policy,
    effects: Effects,
    /// Each tool's last call: whether it took less than [`LINGER`].
    quick: Mutex<HashMap<String, bool>>,
}

impl State {
    /// Whether the tool's last call took less than [`LINGER`] (or it has not been called yet).
    fn answered_quickly(&self, tool: &str) -> bool {
        let quick = self.quick.lock().unwrap_or_else(|e| e.into_inner());
        quick.get(tool).copied().unwrap_or(true)
    }

    /// Remembers how long a call of `tool` took.
    fn took(&self, tool: String, duration: Duration) {
        let mut quick = self.quick.lock().unwrap_or_else(|e| e.into_inner());
        quick.insert(tool, duration < LINGER);
    }
}

/// Tools, a root, a policy and the root's journal.
#[napi]
pub struct NativeToolbox(Arc<State>);

/// Loads the tools and opens the root (the options as JSON text); answers the toolbox.
#[napi]
pub fn open_toolbox(env: &Env, options: String) -> napi::Result<PromiseRaw<'_, NativeToolbox>> {
    promise_of(env, async move {
        let options: Options = serde_json::from_str(&options)
            .map_err(|e| error(Class::Usage, format!("toolbox options: {e}")))?;
        let policy = load_policy(&options)?;
        if options.locked && options.tools_dir.is_none() {
            return Err(error(Class::Usage, "locked needs toolsDir"));
        }
        let defaults = Limits::default();
        let limits = Limits {
            wall_time: options
                .timeout_ms
                .map_or(defaults.wall_time, Duration::from_millis),
            memory_bytes: options
                .memory_mib
                .map_or(defaults.memory_bytes, |m| m << 20),
            output_bytes: options.max_output.unwrap_or(defaults.output_bytes),
            ..defaults
        };
        let cache = match (options.cache, options.cache_dir) {
            (false, _) => CacheSetting::Disabled,
            (true, Some(dir)) => CacheSetting::Dir(dir),
            (true, None) => CacheSetting::Default,
        };
        let mut builder = Toolbox::builder()
            .limits(limits)
            .cache(cache)
            .locked(options.locked)
            .trust(policy.trust());
        if !options.bundled {
            builder = builder.without_bundled();
        }
        if let Some(dir) = options.tools_dir {
            builder = builder.tools_dir(dir);
        }
        let root = Root::open(&options.root).map_err(|e| {
            error(
                Class::Usage,
                format!("opening root {}: {e}", options.root.display()),
            )
        })?;
        let toolbox = builder
            .build()
            .await
            .map_err(|e| error(Class::ToolLoad, e.to_string()))?;
        Ok(NativeToolbox(Arc::new(State {
            toolbox,
            root,
            policy,
            effects: Effects::default(),
            quick: Mutex::default(),
        })))
    })
}

/// The policy from a file, TOML text or an object of the same tables; none allows every tool
/// everywhere in the root.
fn load_policy(options: &Options) -> napi::Result<Policy> {
    let text = match (&options.policy_file, &options.policy) {
        (Some(_), Some(_)) => {
            return Err(error(Class::Usage, "give policyFile or policy, not both"));
        }
        (None, None) => return Ok(Policy::allow_all()),
        // The policy file is the caller's own, outside the root.
        #[allow(clippy::disallowed_methods)]
        (Some(path), None) => std::fs::read_to_string(path).map_err(|e| {
            error(
                Class::Policy,
                format!("reading policy {}: {e}", path.display()),
            )
        })?,
        (None, Some(Value::String(text))) => text.clone(),
        (None, Some(tables)) => {
            let table: toml::Table = serde_json::from_value(tables.clone()).map_err(|e| {
                error(
                    Class::Policy,
                    format!("policy object is not a TOML table: {e}"),
                )
            })?;
            table.to_string()
        }
    };
    Policy::from_toml(&text).map_err(|e| error(Class::Policy, e.to_string()))
}

#[napi]
impl NativeToolbox {
    /// The root every call is confined to.
    #[napi(getter)]
    pub fn root(&self) -> String {
        self.0.root.path().display().to_string()
    }

    /// The loaded tools' names.
    #[napi(getter)]
    pub fn tool_names(&self) -> Vec<String> {
        self.0
            .toolbox
            .tools()
            .map(|t| t.descriptor().name.clone())
            .collect()
    }

    /// The tools as the provider's request expects them, as JSON text.
    #[napi]
    pub fn tool_definitions(&self, provider: String) -> napi::Result<String> {
        Ok(tool_definitions(parse_provider(&provider)?, &self.0.toolbox).to_string())
    }

    /// The questions waiting in the root, oldest first, as JSON text: `[{"digest", "asked_ms",
    /// "deadline_ms", "turn", "request"}]`.
    #[napi]
    pub fn waiting_approvals(&self) -> napi::Result<String> {
        let waiting = PendingApprovals::waiting_in(&self.0.root)
            .map_err(|e| error(Class::Usage, e.to_string()))?;
        Ok(serde_json::json!(waiting.questions).to_string())
    }

    /// Answers the question `digest` (`sha256:...`); the first answer stands. A usage error when no
    /// such question waits. Answers the answer as JSON text.
    #[napi]
    pub fn answer_approval(&self, digest: String, approve: bool) -> napi::Result<String> {
        let digest: Sha256Digest = digest
            .parse()
            .map_err(|e: turngate::digest::DigestError| error(Class::Usage, e.to_string()))?;
        let answer = PendingApprovals::answer_in(&self.0.root, &digest, approve)
            .map_err(|e| error(Class::Usage, e.to_string()))?;
        Ok(serde_json::json!(answer).to_string())
    }

    /// Runs one call as `turngate call` does (options as JSON text: `review`, `callId`, `turnId`);
    /// answers the outcome as JSON text: itself when the call finished within a moment and its tool's
    /// last call did too (without an approver), else a promise of it ([`answer_or_promise`]).
    #[napi(ts_return_type = "string | Promise<string>")]
    pub fn call<'env>(
        &self,
        env: &'env Env,
        tool: String,
        input: String,
        options: String,
        approver: Option<ThreadsafeFunction<String, Promise<bool>, String, napi::Status, false>>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Either<String, PromiseRaw<'env, String>>> {
        let state = Arc::clone(&self.0);
        let cancel = cancel.map(|c| c.0.clone());
        let options: CallOptions = serde_json::from_str(&options)
            .map_err(|e| error(Class::Usage, format!("call options: {e}")))?;
        let approver = approver::given(
            approver,
            options.recorded_approvals,
            &state.root,
            &state.policy,
        )?;
        let look = approver.is_none() && state.answered_quickly(&tool);
        answer_or_promise(env, look, async move {
            let started = Instant::now();
            let mut context = CallContext::new(&state.root, &state.policy, &state.effects);
            context.approver = approver.as_deref();
            context.review = options.review;
            context.cancel = cancel.as_ref();
            context.call_id = options.call_id;
            context.turn = options.turn_id;
            let outcome = state.toolbox.call_in(&mut context, &tool, &input).await;
            state.took(tool, started.elapsed());
            Ok(outcome.to_json().to_string())
        })
    }

    /// Gates a decoded turn as `turngate run` does (options as JSON text: `review`, `turnId`, `audit`);
    /// answers the report as JSON text. A malformed turn is a `StreamParseError` carrying the report
    /// (nothing ran).
    #[napi]
    pub fn process_turn<'env>(
        &self,
        env: &'env Env,
        turn: &NativeTurn,
        options: String,
        approver: Option<ThreadsafeFunction<String, Promise<bool>, String, napi::Status, false>>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let state = Arc::clone(&self.0);
        let cancel = cancel.map(|c| c.0.clone());
        let turn = turn.0.clone();
        let options: TurnCallOptions = serde_json::from_str(&options)
            .map_err(|e| error(Class::Usage, format!("turn options: {e}")))?;
        let approver = approver::given(
            approver,
            options.recorded_approvals,
            &state.root,
            &state.policy,
        )?;
        promise_of(env, async move {
            let hooks = TurnHooks {
                approver: approver.as_deref(),
                cancel: cancel.as_ref(),
            };
            let turn_options = TurnOptions {
                audit: options.audit,
                review: options.review,
                turn_id: options.turn_id,
            };
            let report = process_turn_with(
                &state.toolbox,
                &state.root,
                &state.policy,
                turn,
                turn_options,
                hooks,
            )
            .await;
            let value = report.to_embedding_json(options.audit);
            if report.turn.ending.status == TurnStatus::Malformed {
                return Err(error_with(
                    Class::StreamParse,
                    report.turn.ending.detail.clone(),
                    value,
                ));
            }
            Ok(value.to_string())
        })
    }

    /// The root's journal, oldest first, as JSON text: one entry per applied (or undone) call.
    #[napi]
    pub fn journal<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, String>> {
        let state = Arc::clone(&self.0);
        promise_of(env, async move {
            let Some(mut journal) = Journal::open_existing(&state.root, Retention::default())
                .map_err(|e| error(Class::Undo, e.to_string()))?
            else {
                return Ok("[]".to_owned());
            };
            let entries = journal
                .entries()
                .map_err(|e| error(Class::Undo, e.to_string()))?;
            let shown: Vec<_> = entries
                .iter()
                .filter(|e| matches!(e.state, CallState::Applied | CallState::Undone))
                .collect();
            serde_json::to_string(&shown).map_err(|e| error(Class::Internal, e.to_string()))
        })
    }

    /// Undoes calls (`target` as JSON text: `{"last": true}`, `{"call": ID}`, `{"turn": ID}` or
    /// `{"seq": N}`); answers the calls undone, newest first, as JSON text. An `UndoError` when a file
    /// changed since or nothing matches; then nothing is restored.
    #[napi]
    pub fn undo<'env>(
        &self,
        env: &'env Env,
        target: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let state = Arc::clone(&self.0);
        let target = undo_target(&target)?;
        promise_of(env, async move {
            let Some(mut journal) = Journal::open_existing(&state.root, Retention::default())
                .map_err(|e| error(Class::Undo, e.to_string()))?
            else {
                let nothing = LibUndoError::NothingToUndo("this root has no journal".into());
                return Err(error(Class::Undo, nothing.to_string()));
            };
            let undone = journal
                .undo(&state.root, &target)
                .map_err(|e| error(Class::Undo, e.to_string()))?;
            serde_json::to_string(&undone.calls).map_err(|e| error(Class::Internal, e.to_string()))
        })
    }
}

/// `toolbox.call`'s options.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallOptions {
    #[serde(default)]
    review: bool,
    call_id: Option<String>,
    turn_id: Option<String>,
    /// Ask through the root's recorded approvals (`approver: "console"`).
    #[serde(default)]
    recorded_approvals: bool,
}

/// `toolbox.processTurn`'s options.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TurnCallOptions {
    #[serde(default)]
    review: bool,
    turn_id: Option<String>,
    #[serde(default)]
    audit: bool,
    /// Ask through the root's recorded approvals (`approver: "console"`).
    #[serde(default)]
    recorded_approvals: bool,
}

/// Exactly one of `last`, `call`, `turn`, `seq`.
fn undo_target(text: &str) -> napi::Result<UndoTarget> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| error(Class::Usage, format!("undo target: {e}")))?;
    let usage = || {
        error(
            Class::Usage,
            "undo needs exactly one of {last: true}, {call: ID}, {turn: ID}, {seq: N}",
        )
    };
    let object = value.as_object().ok_or_else(usage)?;
    if object.len() != 1 {
        return Err(usage());
    }
    match object.iter().next() {
        Some((key, Value::Bool(true))) if key == "last" => Ok(UndoTarget::Last),
        Some((key, Value::String(id))) if key == "call" => Ok(UndoTarget::Call(id.clone())),
        Some((key, Value::String(id))) if key == "turn" => Ok(UndoTarget::Turn(id.clone())),
        Some((key, Value::Number(n))) if key == "seq" => {
            n.as_u64().map(UndoTarget::Seq).ok_or_else(usage)
        }
        _ => Err(usage()),
    }
}
