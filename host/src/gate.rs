//! The per-call gate: raw call in, [`ApprovedCall`] out, or the step that refused it.
//!
//! Steps, in order: strict parse of the raw input (one JSON object, the whole buffer, no duplicate keys),
//! the tool is one the toolbox has, the input is valid against the tool's JSON Schema, every declared path
//! argument resolves beneath the root (symlinks really resolved; hard-linked files refused unless the
//! policy allows them), and the policy allows the tool on each path. Only this module can construct an
//! [`ApprovedCall`], and the sandbox runs nothing else.

use serde_json::Value;

use crate::descriptor::Access;
use crate::json::{StrictJsonError, parse_strict};
use crate::policy::{Policy, Verdict};
use crate::root::Root;
use crate::scope::{ScopeError, check_path};
use crate::toolbox::{LoadedTool, Toolbox};

/// Most schema violations quoted in one refusal.
const MAX_SCHEMA_ERRORS: usize = 8;

/// A call that passed every step of the gate.
#[derive(Debug)]
pub struct ApprovedCall<'t> {
    tool: &'t LoadedTool,
    input: String,
    paths: Vec<ApprovedPath>,
}

/// One path argument of an approved call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedPath {
    /// The JSON Pointer of the field.
    pub pointer: String,
    /// The path relative to the root, normalized (`.` for the root).
    pub path: String,
    /// The access the tool declared for it.
    pub access: Access,
}

impl<'t> ApprovedCall<'t> {
    /// The tool to run.
    pub(crate) fn tool(&self) -> &'t LoadedTool {
        self.tool
    }

    /// The validated input, re-serialized from the strictly parsed value, so the tool sees exactly what
    /// was checked.
    pub(crate) fn input(&self) -> &str {
        &self.input
    }

    /// The path arguments that were checked.
    pub fn paths(&self) -> &[ApprovedPath] {
        &self.paths
    }
}

/// Why the gate refused a call. Nothing ran.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The raw input is not one strict JSON value.
    #[error("the input is not valid JSON: {0}")]
    Parse(#[from] StrictJsonError),
    /// The input parsed but is not an object.
    #[error("the input must be a JSON object")]
    NotObject,
    /// No tool of that name.
    #[error("there is no tool named `{0}`")]
    UnknownTool(String),
    /// The input does not match the tool's schema.
    #[error("the input does not match the schema of `{tool}`: {}", .errors.join("; "))]
    Schema {
        /// The tool.
        tool: String,
        /// Each violation, with its location in the input.
        errors: Vec<String>,
    },
    /// A declared path field is present but not a string.
    #[error("path field {pointer} must be a string")]
    PathNotString {
        /// The field.
        pointer: String,
    },
    /// A path argument is out of scope.
    #[error("path field {pointer} (`{path}`): {error}")]
    Scope {
        /// The field.
        pointer: String,
        /// The path as given.
        path: String,
        /// Why it is out of scope.
        error: ScopeError,
    },
    /// The policy denies the call.
    #[error("{0}")]
    Policy(String),
}

impl GateError {
    /// The gate step that refused the call: `parse`, `tool`, `schema`, `path` or `policy`.
    pub fn step(&self) -> &'static str {
        match self {
            GateError::Parse(_) | GateError::NotObject => "parse",
            GateError::UnknownTool(_) => "tool",
            GateError::Schema { .. } => "schema",
            GateError::PathNotString { .. } | GateError::Scope { .. } => "path",
            GateError::Policy(_) => "policy",
        }
    }
}

/// Runs every step of the gate on one call.
pub fn check_call<'t>(
    toolbox: &'t Toolbox,
    root: &Root,
    policy: &Policy,
    name: &str,
    raw_input: &str,
) -> Result<ApprovedCall<'t>, GateError> {
    let input = parse_strict(raw_input)?;
    if !input.is_object() {
        return Err(GateError::NotObject);
    }
    let tool = toolbox
        .get(name)
        .ok_or_else(|| GateError::UnknownTool(name.to_owned()))?;
    let errors: Vec<String> = tool
        .validator()
        .iter_errors(&input)
        .take(MAX_SCHEMA_ERRORS)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect();
    if !errors.is_empty() {
        return Err(GateError::Schema {
            tool: name.to_owned(),
            errors,
        });
    }
    if let Verdict::Deny(reason) = policy.check_tool(name) {
        return Err(GateError::Policy(reason));
    }
    let mut paths = Vec::new();
    for param in &tool.descriptor().paths {
        // An absent (optional) path field is held to the policy as the root itself, since that is
        // where a tool defaults to; it needs no scope check.
        let Some(value) = input.pointer(&param.pointer) else {
            if let Verdict::Deny(reason) = policy.check_path(name, ".") {
                return Err(GateError::Policy(reason));
            }
            continue;
        };
        let Value::String(path) = value else {
            return Err(GateError::PathNotString {
                pointer: param.pointer.clone(),
            });
        };
        let scoped = check_path(root, path, policy.allows_hard_links()).map_err(|error| {
            GateError::Scope {
                pointer: param.pointer.clone(),
                path: path.clone(),
                error,
            }
        })?;
        if let Verdict::Deny(reason) = policy.check_path(name, &scoped.normalized) {
            return Err(GateError::Policy(reason));
        }
        paths.push(ApprovedPath {
            pointer: param.pointer.clone(),
            path: scoped.normalized,
            access: param.access,
        });
    }
    let input = serde_json::to_string(&input).expect("a parsed JSON value serializes");
    Ok(ApprovedCall { tool, input, paths })
}
