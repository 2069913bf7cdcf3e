//! The per-call gate: raw call in, [`ApprovedCall`] out, or the step that refused it.
//!
//! Steps, in order: strict parse of the raw input (one JSON object, the whole buffer, no duplicate keys),
//! the tool is one the catalog has, the input is valid against the tool's JSON Schema, the policy lets
//! the tool be called, and every declared path argument resolves beneath the root (symlinks really
//! resolved; special files, turngate's state directory and hard-linked files refused) and is allowed by
//! the policy for the access the tool declared: the name as given, each symlink on the way, and the
//! location it really leads to; every declared URL field is allowed by the tool's network grant (so a
//! call whose URL is not allowed never starts; the requests themselves are checked again when they are
//! made, `network/call.rs`). Only this module can construct an [`ApprovedCall`]; its paths are what
//! the call's view will grant, and nothing else.

use serde_json::Value;

use crate::descriptor::{Access, DescriptorError, ToolContract};
use crate::json::{StrictJsonError, parse_strict};
use crate::names::NameMatch;
use crate::policy::{Policy, Verdict};
use crate::resolve::{Entry, RelPath};
use crate::root::Root;
use crate::scope::{ScopeError, check_path};

/// Most schema violations quoted in one refusal.
const MAX_SCHEMA_ERRORS: usize = 8;

/// The tools the gate checks calls against.
pub trait ToolCatalog {
    /// The contract of the tool called `name`, if there is one.
    fn contract(&self, name: &str) -> Option<&ToolContract>;

    /// Whether the tool `name` was installed from a registry: its calls run only under a policy that
    /// lists it, whatever the default mode (its grants are never implied).
    fn installed_from_registry(&self, _name: &str) -> bool {
        false
    }
}

/// A call that passed every step of the gate.
#[derive(Debug)]
pub struct ApprovedCall<'t> {
    tool: &'t ToolContract,
    input: String,
    paths: Vec<ApprovedPath>,
}

/// One path argument of an approved call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedPath {
    /// The JSON Pointer of the field (for an absent optional field, the field it would be).
    pub pointer: String,
    /// The path as given, normalized (`.` for the root, also for an absent optional field).
    pub name: RelPath,
    /// Where it really leads, symlinks followed: what the call's view grants.
    pub location: RelPath,
    /// The access the tool declared for it.
    pub access: Access,
    /// What was there when the gate looked (`None`: nothing yet).
    pub entry: Option<Entry>,
}

impl<'t> ApprovedCall<'t> {
    /// The tool's name.
    pub fn tool_name(&self) -> &'t str {
        &self.tool.descriptor().name
    }

    /// The tool's contract.
    pub fn contract(&self) -> &'t ToolContract {
        self.tool
    }

    /// The validated input, re-serialized from the strictly parsed value, so the tool sees exactly what
    /// was checked.
    pub fn input(&self) -> &str {
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
    /// The tool's own schema cannot be compiled (a remembered descriptor is compiled at its first call).
    #[error("the input schema of `{tool}` cannot be used: {error}")]
    SchemaUnusable {
        /// The tool.
        tool: String,
        /// What is wrong with the schema.
        error: DescriptorError,
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
    /// A declared URL field is present but not a string.
    #[error("URL field {pointer} must be a string")]
    UrlNotString {
        /// The field.
        pointer: String,
    },
    /// A declared URL is not one the tool's network grant allows.
    #[error("URL field {pointer} (`{url}`): {reason}")]
    Url {
        /// The field.
        pointer: String,
        /// The URL as given.
        url: String,
        /// Why it is not allowed.
        reason: String,
    },
}

impl GateError {
    /// The gate step that refused the call: `parse`, `tool`, `schema`, `path`, `policy` or `url`.
    pub fn step(&self) -> &'static str {
        match self {
            GateError::Parse(_) | GateError::NotObject => "parse",
            GateError::UnknownTool(_) => "tool",
            GateError::Schema { .. } | GateError::SchemaUnusable { .. } => "schema",
            GateError::PathNotString { .. } | GateError::Scope { .. } => "path",
            GateError::Policy(_) => "policy",
            GateError::UrlNotString { .. } | GateError::Url { .. } => "url",
        }
    }
}

/// Runs every step of the gate on one call.
pub fn check_call<'t>(
    tools: &'t dyn ToolCatalog,
    root: &Root,
    policy: &Policy,
    name: &str,
    raw_input: &str,
) -> Result<ApprovedCall<'t>, GateError> {
    let input = parse_strict(raw_input)?;
    if !input.is_object() {
        return Err(GateError::NotObject);
    }
    let tool = tools
        .contract(name)
        .ok_or_else(|| GateError::UnknownTool(name.to_owned()))?;
    let validator = tool
        .validator()
        .map_err(|error| GateError::SchemaUnusable {
            tool: name.to_owned(),
            error,
        })?;
    let errors: Vec<String> = validator
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
    if tools.installed_from_registry(name) && !policy.lists(name) {
        return Err(GateError::Policy(format!(
            "`{name}` was installed from a registry and no policy grants it anything: it runs only \
             under a policy that lists it (`[tools.{name}]`, which `turngate tools add \
             --accept-grants --policy FILE` writes)"
        )));
    }
    let mut paths = Vec::new();
    for param in &tool.descriptor().paths {
        // An absent (optional) path field is held to the policy as the root itself, since that is
        // where a tool defaults to.
        let Some(value) = input.pointer(&param.pointer) else {
            allow(
                policy,
                name,
                &RelPath::root(),
                param.access,
                NameMatch::Exact,
            )?;
            paths.push(ApprovedPath {
                pointer: param.pointer.clone(),
                name: RelPath::root(),
                location: RelPath::root(),
                access: param.access,
                entry: None,
            });
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
        // The name the tool will use, every symlink it goes through, and where it really leads (spelled
        // as stored, and matched the way the directories on the way match names).
        let matching = scoped.matching;
        allow(policy, name, &scoped.name, param.access, matching)?;
        for hop in &scoped.hops {
            allow(policy, name, hop, Access::Read, matching)?;
        }
        if scoped.location != scoped.name {
            allow(policy, name, &scoped.location, param.access, matching)?;
        }
        paths.push(ApprovedPath {
            pointer: param.pointer.clone(),
            name: scoped.name,
            location: scoped.location,
            access: param.access,
            entry: scoped.entry,
        });
    }
    let urls = &tool.descriptor().urls;
    if !urls.is_empty() {
        let grant = policy.network(name);
        for pointer in urls {
            let Some(value) = input.pointer(pointer) else {
                continue;
            };
            let Value::String(url) = value else {
                return Err(GateError::UrlNotString {
                    pointer: pointer.clone(),
                });
            };
            grant.allows_url(url).map_err(|reason| GateError::Url {
                pointer: pointer.clone(),
                url: crate::network::mask_urls(url).into_owned(),
                reason,
            })?;
        }
    }
    let input = serde_json::to_string(&input).expect("a parsed JSON value serializes");
    Ok(ApprovedCall { tool, input, paths })
}

fn allow(
    policy: &Policy,
    tool: &str,
    path: &RelPath,
    access: Access,
    matching: NameMatch,
) -> Result<(), GateError> {
    match policy.check_in(tool, path.to_policy_path(), access, matching) {
        Verdict::Allow => Ok(()),
        Verdict::Deny(reason) => Err(GateError::Policy(reason)),
    }
}
