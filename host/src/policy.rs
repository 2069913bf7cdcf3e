//! The authorization policy: which tool may read or write which paths.
//!
//! The format (TOML), every key optional:
//!
//! ```toml
//! # Tools not listed under [tools]: "deny" (the default), "read-only" (read anywhere, write nowhere)
//! # or "workspace-write" (read and write anywhere), as in Codex's sandbox modes.
//! default = "deny"
//!
//! # Paths no tool may read or write, whatever else allows them. Deny beats every allow.
//! deny = [".env", "**/.env", "**/.git/**", "**/*.pem"]
//!
//! allow_hard_links = false        # let tools touch files that have more than one hard link
//! approval_timeout_seconds = 600  # a question recorded for `approval = "ask"` (answered from
//!                                 # `turngate console`) not answered by then is denied
//!
//! [tools.write_file]
//! paths = ["notes.txt", "drafts/**"]   # read and write (`write` is the same key under another name)
//! read = ["docs/**"]                   # read only
//! deny = ["drafts/private/**"]         # denied for this tool, whatever its allows say
//! approval = "ask"                     # ask the user before applying each call ("auto" is the default;
//!                                      # "deny" refuses every call)
//!
//! [tools.fetch.network]                # what the tool may request over HTTP (none without this table)
//! get = ["https://example.org/**"]     # reads: GET, HEAD, OPTIONS
//! write = ["POST https://api.example.org/items"]   # methods that change things
//! deny = ["https://example.org/private/**"]
//! ```
//!
//! `env = ["LANG"]` under `[tools.NAME]` passes those environment variables to the tool (none by
//! default); `[secrets.NAME]` tables name secrets the host adds to requests (`network/secrets.rs`), to
//! every tool's requests for their origins, or with `secrets = ["NAME"]` under `[tools.NAME]` only the
//! ones listed. `[trust]` says whose signatures a tool from a registry must carry (`registry/trust.rs`).
//! The `network` tables (a tool's, and a top-level `[network]` whose `deny` binds every tool and whose
//! grant is the default of tools without one) are described in `network/grant.rs`; no table, no network.
//!
//! Globs are relative to the root and `*` does not cross `/`. A glob `dir/**` covers `dir` itself and
//! everything beneath it; a denied directory denies everything beneath it. Without a policy file every
//! tool may read and write anywhere inside the root ([`Policy::allow_all`]).
//!
//! Paths are held to globs as the file system stores them (the resolver answers stored names), and
//! where names fold ([`crate::names`]): a deny glob matches a path in every spelling a folding file
//! system would take for it, on every file system (`.env` denies `.ENV` and `.Env`); an allow glob
//! matches folded only where a directory on the path is known to fold ([`Policy::check_in`]), so it never
//! reaches a file it does not name.
//!
//! Every check takes a path *and* the access it needs ([`Policy::check`]): the gate and the per-call view
//! ask it for the name a tool used and for the location that name really resolves to, and both must be
//! allowed. A tool with `approval = "ask"` has its calls approved by the embedding program's approver
//! ([`Policy::needs_approval`]; see `pipeline::TurnHooks`); with no approver it is denied.

use std::collections::BTreeMap;
use std::time::Duration;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::descriptor::Access;
use crate::names::{NameMatch, fold};
use crate::network::{
    GrantError, NetworkFile, NetworkGrant, SecretBinding, SecretError, SecretFile,
};
use crate::registry::trust::{Trust, TrustError, TrustFile};
use std::sync::Arc;

/// An authorization policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `None`: no policy file, everything allowed.
    rules: Option<Rules>,
}

#[derive(Debug, Clone)]
struct Rules {
    default: DefaultMode,
    deny: Globs,
    tools: BTreeMap<String, ToolRules>,
    allow_hard_links: bool,
    /// The network grant of tools without a network table of their own.
    network: NetworkGrant,
    secrets: Arc<Vec<SecretBinding>>,
    trust: Trust,
    approval_timeout: Duration,
}

/// How long a recorded question waits for its answer without a policy that says
/// (`approval_timeout_seconds`).
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

impl Rules {
    /// Whether `tool` is denied whole: not listed, under `default = "deny"`.
    fn denies_unlisted(&self, tool: &str) -> bool {
        !self.tools.contains_key(tool) && self.default == DefaultMode::Deny
    }
}

#[derive(Debug, Clone)]
struct ToolRules {
    read: Globs,
    write: Globs,
    deny: Globs,
    approval: Approval,
    network: NetworkGrant,
    env: Vec<String>,
    /// The secrets its requests may carry (`None`: every secret, by origin).
    secrets: Option<Vec<String>>,
}

/// How tools that the policy does not list are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DefaultMode {
    /// Denied (the default).
    #[default]
    Deny,
    /// May read anywhere the deny list allows, and write nowhere.
    ReadOnly,
    /// May read and write anywhere the deny list allows.
    WorkspaceWrite,
}

/// Whether a tool's calls need the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// The gate's checks are enough (the default).
    #[default]
    Auto,
    /// Ask before every call is applied; deny when nobody can be asked.
    Ask,
    /// Refuse every call (a tool installed without its grants).
    Deny,
}

/// What the policy says about one call or path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The call may go ahead.
    Allow,
    /// The call is denied, with the reason.
    Deny(String),
}

impl Verdict {
    /// Whether this is [`Verdict::Allow`].
    pub fn is_allow(&self) -> bool {
        matches!(self, Verdict::Allow)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    default: DefaultMode,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    allow_hard_links: bool,
    approval_timeout_seconds: Option<u64>,
    #[serde(default)]
    tools: BTreeMap<String, ToolFile>,
    network: Option<NetworkFile>,
    #[serde(default)]
    secrets: BTreeMap<String, SecretFile>,
    trust: Option<TrustFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    approval: Approval,
    network: Option<NetworkFile>,
    #[serde(default)]
    env: Vec<String>,
    secrets: Option<Vec<String>>,
}

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The TOML does not parse or has unknown keys.
    #[error("policy is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// A path glob does not compile.
    #[error("policy for `{scope}`: bad glob `{glob}`: {error}")]
    Glob {
        /// The tool the glob belongs to, or `deny` for the top-level list.
        scope: String,
        /// The glob as written.
        glob: String,
        /// What globset said.
        error: globset::Error,
    },
    /// A `[secrets.NAME]` table is unusable.
    #[error("policy: {0}")]
    Secret(#[from] SecretError),
    /// The `[trust]` section is unusable.
    #[error("policy: {0}")]
    Trust(#[from] TrustError),
    /// A tool lists a secret the policy does not define.
    #[error("policy for `{tool}`: no `[secrets.{secret}]` for its `secrets` list")]
    UnknownSecret {
        /// The tool.
        tool: String,
        /// The name.
        secret: String,
    },
    /// A network rule does not parse.
    #[error("policy for `{scope}`: {error}")]
    Network {
        /// The tool the rule belongs to, or `network` for the top-level table.
        scope: String,
        /// What is wrong with the rule.
        error: GrantError,
    },
}

impl Default for Policy {
    fn default() -> Self {
        Policy::allow_all()
    }
}

impl Policy {
    /// Every tool may read and write anywhere inside the root (hard-linked files are still refused).
    pub fn allow_all() -> Policy {
        Policy { rules: None }
    }

    /// Parses a policy file's text.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text)?;
        let deny = compile("deny", &file.deny)?;
        let top = file.network.as_ref();
        let network_error = |scope: &str, error| PolicyError::Network {
            scope: scope.to_owned(),
            error,
        };
        let network = NetworkGrant::compile(None, top).map_err(|e| network_error("network", e))?;
        let secrets = file
            .secrets
            .iter()
            .map(|(name, secret)| SecretBinding::compile(name, secret))
            .collect::<Result<Vec<_>, _>>()?;
        let trust = Trust::compile(&file.trust.unwrap_or_default())?;
        let mut tools = BTreeMap::new();
        for (tool, rules) in file.tools {
            if let Some(unknown) = rules
                .secrets
                .iter()
                .flatten()
                .find(|name| !file.secrets.contains_key(*name))
            {
                return Err(PolicyError::UnknownSecret {
                    tool,
                    secret: unknown.clone(),
                });
            }
            let tool_network = NetworkGrant::compile(rules.network.as_ref(), top)
                .map_err(|e| network_error(&tool, e))?;
            let writes: Vec<String> = rules.paths.iter().chain(&rules.write).cloned().collect();
            let reads: Vec<String> = writes.iter().chain(&rules.read).cloned().collect();
            let compiled = ToolRules {
                read: compile(&tool, &reads)?,
                write: compile(&tool, &writes)?,
                deny: compile(&tool, &rules.deny)?,
                approval: rules.approval,
                network: tool_network,
                env: rules.env,
                secrets: rules.secrets,
            };
            tools.insert(tool, compiled);
        }
        Ok(Policy {
            rules: Some(Rules {
                default: file.default,
                deny,
                tools,
                allow_hard_links: file.allow_hard_links,
                network,
                secrets: Arc::new(secrets),
                trust,
                approval_timeout: file
                    .approval_timeout_seconds
                    .map_or(DEFAULT_APPROVAL_TIMEOUT, Duration::from_secs),
            }),
        })
    }

    /// How long a question recorded for the user ([`crate::approval::durable::DurableApprover`])
    /// waits for an answer before it is denied.
    pub fn approval_timeout(&self) -> Duration {
        self.rules
            .as_ref()
            .map_or(DEFAULT_APPROVAL_TIMEOUT, |rules| rules.approval_timeout)
    }

    /// Whose signatures a tool from a registry must carry (empty without a policy file or a
    /// `[trust]` section).
    pub fn trust(&self) -> Trust {
        self.rules
            .as_ref()
            .map(|r| r.trust.clone())
            .unwrap_or_default()
    }

    /// Whether every call of `tool` must be approved by the user first (`approval = "ask"`).
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.rules
            .as_ref()
            .and_then(|r| r.tools.get(tool))
            .is_some_and(|t| t.approval == Approval::Ask)
    }

    /// Whether a call of `tool` runs alone in its turn, after the calls before it and before the ones
    /// after it: it may wait for the approver (the tool is marked `approval = "ask"`, unless the
    /// approver takes a turn's questions together), or it may reach the network
    /// ([`Policy::reaches_network`]).
    pub fn runs_alone(&self, tool: &str) -> bool {
        self.needs_approval(tool) || self.reaches_network(tool)
    }

    /// Whether a call of `tool` may reach the network: it then always runs alone in its turn, since a
    /// write may wait for the approver, and the host cannot tell which remote state a request touches,
    /// as it can tell the paths a call touches.
    pub fn reaches_network(&self, tool: &str) -> bool {
        self.grant(tool).is_some_and(NetworkGrant::any)
    }

    /// What `tool` may request over the network (nothing without a policy file, or without a network
    /// table for it or a top-level one).
    pub fn network(&self, tool: &str) -> NetworkGrant {
        self.grant(tool).cloned().unwrap_or_default()
    }

    /// The network grant `tool` has under the policy file (`None` without one, or for a tool the
    /// policy denies whole): its own table's, else the top-level one's.
    fn grant(&self, tool: &str) -> Option<&NetworkGrant> {
        let rules = self.rules.as_ref().filter(|r| !r.denies_unlisted(tool))?;
        Some(rules.tools.get(tool).map_or(&rules.network, |t| &t.network))
    }

    /// The secrets the host may add to `tool`'s requests for their origins: every secret, or only
    /// those its `secrets` list names (none without a policy file).
    pub fn secrets_for(&self, tool: &str) -> Arc<Vec<SecretBinding>> {
        let Some(rules) = &self.rules else {
            return Arc::default();
        };
        match rules.tools.get(tool).and_then(|t| t.secrets.as_ref()) {
            Some(names) => Arc::new(
                rules
                    .secrets
                    .iter()
                    .filter(|s| names.iter().any(|n| n == s.name()))
                    .cloned()
                    .collect(),
            ),
            None => rules.secrets.clone(),
        }
    }

    /// The environment variables `tool` may see (`[tools.NAME] env`; none by default).
    pub fn env(&self, tool: &str) -> &[String] {
        self.rules
            .as_ref()
            .and_then(|r| r.tools.get(tool))
            .map_or(&[], |t| &t.env)
    }

    /// Whether the policy file has a `[tools.NAME]` table for `tool` (a tool from a registry runs only
    /// under a policy that lists it: its grants are never implied).
    pub fn lists(&self, tool: &str) -> bool {
        self.rules
            .as_ref()
            .is_some_and(|r| r.tools.contains_key(tool))
    }

    /// Whether a regular file with more than one hard link may be touched.
    pub fn allows_hard_links(&self) -> bool {
        self.rules.as_ref().is_some_and(|r| r.allow_hard_links)
    }

    /// Whether `tool` may be called at all (before looking at paths). Under `default = "deny"` a tool
    /// the policy does not list may not, and that includes the top-level `[network]` grant: the
    /// refusal says how to give it.
    pub fn check_tool(&self, tool: &str) -> Verdict {
        match &self.rules {
            Some(rules)
                if rules
                    .tools
                    .get(tool)
                    .is_some_and(|t| t.approval == Approval::Deny) =>
            {
                Verdict::Deny(format!(
                    "the policy denies every call of `{tool}` (`approval = \"deny\"`: a tool installed \
                     without its grants); grant it paths or network under `[tools.{tool}]`"
                ))
            }
            Some(rules) if rules.denies_unlisted(tool) => {
                let network = if rules.network.any() {
                    format!(
                        "; list it (an empty `[tools.{tool}]` will do) to give it the top-level \
                         `[network]` grant"
                    )
                } else {
                    String::new()
                };
                Verdict::Deny(format!(
                    "the policy does not list tool `{tool}`, and `default` is `deny`{network}"
                ))
            }
            _ => Verdict::Allow,
        }
    }

    /// Whether `tool` may act on `path` with `access` (relative to the root, normalized, `.` for the root
    /// itself), on directories that match names exactly as far as anyone knows. Deny globs win over
    /// every allow, and match in every spelling; writing includes reading.
    pub fn check(&self, tool: &str, path: &str, access: Access) -> Verdict {
        self.check_in(tool, path, access, NameMatch::Exact)
    }

    /// [`Policy::check`] for a path on directories that match names as `matching` says: where they
    /// fold, an allow glob matches the path folded as well.
    pub fn check_in(&self, tool: &str, path: &str, access: Access, matching: NameMatch) -> Verdict {
        let Some(rules) = &self.rules else {
            return Verdict::Allow;
        };
        let verb = match access {
            Access::Read => "read",
            Access::Write => "write",
        };
        let folded = fold(path);
        if rules.deny.denies(path, &folded) {
            return Verdict::Deny(format!("the policy denies every tool access to `{path}`"));
        }
        let allowed = match rules.tools.get(tool) {
            Some(tool_rules) => {
                if tool_rules.deny.denies(path, &folded) {
                    return Verdict::Deny(format!("the policy denies `{tool}` access to `{path}`"));
                }
                let globs = match access {
                    Access::Read => &tool_rules.read,
                    Access::Write => &tool_rules.write,
                };
                globs.exact.is_match(path)
                    || (matching == NameMatch::Folding && globs.folded.is_match(&*folded))
            }
            None => match rules.default {
                DefaultMode::Deny => return self.check_tool(tool),
                DefaultMode::ReadOnly => access == Access::Read,
                DefaultMode::WorkspaceWrite => true,
            },
        };
        if allowed {
            Verdict::Allow
        } else {
            Verdict::Deny(format!(
                "the policy does not allow `{tool}` to {verb} `{path}`"
            ))
        }
    }

    /// Whether `tool` may write anywhere at all (a tool that may not gets a read-only view).
    pub fn may_write_somewhere(&self, tool: &str) -> bool {
        match &self.rules {
            None => true,
            Some(rules) => match rules.tools.get(tool) {
                Some(tool_rules) => !tool_rules.write.is_empty(),
                None => rules.default == DefaultMode::WorkspaceWrite,
            },
        }
    }
}

/// A list of globs, compiled as written and folded ([`crate::names::fold`]), to match a path as written
/// and folded.
#[derive(Debug, Clone)]
struct Globs {
    exact: GlobSet,
    folded: GlobSet,
}

impl Globs {
    fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Whether this deny list matches `path` or one of its ancestors (denying a directory denies its
    /// content), as written or folded (`folded` is `path` folded): a deny holds in every spelling.
    fn denies(&self, path: &str, folded: &str) -> bool {
        !self.is_empty()
            && (matches_or_parent(&self.exact, path) || matches_or_parent(&self.folded, folded))
    }
}

/// Whether `globs` match `path` or one of its ancestors.
fn matches_or_parent(globs: &GlobSet, path: &str) -> bool {
    let mut prefix = path;
    loop {
        if globs.is_match(prefix) {
            return true;
        }
        match prefix.rfind('/') {
            Some(at) => prefix = &prefix[..at],
            None => return false,
        }
    }
}

/// Compiles a list of globs, as written and folded; `dir/**` also matches `dir` itself.
fn compile(scope: &str, globs: &[String]) -> Result<Globs, PolicyError> {
    let error = |glob: &str, source| PolicyError::Glob {
        scope: scope.to_owned(),
        glob: glob.to_owned(),
        error: source,
    };
    let mut exact = GlobSetBuilder::new();
    let mut folded = GlobSetBuilder::new();
    for glob in globs {
        let mut patterns = vec![glob.as_str()];
        if let Some(dir) = glob.strip_suffix("/**").filter(|d| !d.is_empty()) {
            patterns.push(dir);
        }
        for pattern in patterns {
            for (set, text) in [(&mut exact, pattern), (&mut folded, &*fold(pattern))] {
                let compiled = GlobBuilder::new(text)
                    .literal_separator(true)
                    .build()
                    .map_err(|source| error(glob, source))?;
                set.add(compiled);
            }
        }
    }
    let build = |set: GlobSetBuilder| {
        set.build()
            .map_err(|source| error(&globs.join(", "), source))
    };
    Ok(Globs {
        exact: build(exact)?,
        folded: build(folded)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
        [tools.write_file]
        paths = ["notes.txt", "drafts/**"]
        [tools.read_file]
        paths = ["**"]
        [tools.list_dir]
        paths = ["*"]
    "#;

    fn allows(policy: &Policy, tool: &str, path: &str, access: Access) -> bool {
        policy.check(tool, path, access).is_allow()
    }

    #[test]
    fn globs_bind_tools_to_paths() {
        let policy = Policy::from_toml(POLICY).unwrap();
        assert!(allows(&policy, "write_file", "notes.txt", Access::Write));
        assert!(allows(
            &policy,
            "write_file",
            "drafts/a/b.md",
            Access::Write
        ));
        assert!(allows(&policy, "write_file", "drafts", Access::Write));
        assert!(!allows(&policy, "write_file", "secrets.txt", Access::Write));
        assert!(
            !allows(&policy, "list_dir", "a/b", Access::Read),
            "* must not cross /"
        );
        assert!(allows(&policy, "read_file", "a/b/c", Access::Read));
        assert!(!policy.check_tool("delete_file").is_allow());
        assert!(!allows(&policy, "delete_file", "notes.txt", Access::Read));
    }

    #[test]
    fn deny_beats_every_allow_and_covers_what_is_beneath() {
        let policy = Policy::from_toml(
            r#"
            deny = [".env", "**/.git/**", "**/*.pem"]
            default = "workspace-write"
            [tools.read_file]
            paths = ["**"]
            deny = ["private/**"]
            "#,
        )
        .unwrap();
        for path in [
            ".env",
            ".git",
            ".git/config",
            "a/.git/HEAD",
            "keys/server.pem",
        ] {
            assert!(!allows(&policy, "read_file", path, Access::Read), "{path}");
            assert!(
                !allows(&policy, "anything", path, Access::Write),
                "{path} (default mode)"
            );
        }
        assert!(!allows(&policy, "read_file", "private/x/y", Access::Read));
        assert!(allows(&policy, "read_file", "public/x", Access::Read));
        assert!(
            allows(&policy, "other", "private/x/y", Access::Write),
            "a tool's deny list is its own"
        );
    }

    #[test]
    fn a_deny_holds_in_every_spelling_and_an_allow_folds_only_where_names_do() {
        let policy = Policy::from_toml(
            r#"
            deny = [".env", "**/.env", "secrets/**", "caf\u00e9/**"]
            default = "workspace-write"
            [tools.write_file]
            paths = ["notes.txt", "drafts/**"]
            deny = ["drafts/Private/**"]
            "#,
        )
        .unwrap();
        let nfd_cafe = "cafe\u{301}/menu.txt";
        for path in [
            ".ENV",
            ".Env",
            "a/b/.eNv",
            "SECRETS/key.txt",
            "Secrets",
            nfd_cafe,
        ] {
            for matching in [NameMatch::Exact, NameMatch::Folding] {
                let verdict = policy.check_in("anything", path, Access::Read, matching);
                assert!(!verdict.is_allow(), "{path} ({matching:?})");
            }
        }
        let tool_denied = policy.check_in(
            "write_file",
            "DRAFTS/private/x",
            Access::Read,
            NameMatch::Folding,
        );
        assert!(!tool_denied.is_allow(), "a tool's own deny folds too");
        // An allow names a file: folded only where the directories fold, so on an exact directory
        // `NOTES.TXT` (another file there) stays outside it.
        let write = |path, matching| {
            policy
                .check_in("write_file", path, Access::Write, matching)
                .is_allow()
        };
        assert!(!write("NOTES.TXT", NameMatch::Exact));
        assert!(write("NOTES.TXT", NameMatch::Folding));
        assert!(write("Drafts/x.txt", NameMatch::Folding));
        assert!(!write("Drafts/x.txt", NameMatch::Exact));
    }

    #[test]
    fn read_globs_do_not_allow_writes_and_writes_include_reads() {
        let policy = Policy::from_toml(
            r#"
            [tools.edit_file]
            read = ["docs/**"]
            write = ["out/**"]
            "#,
        )
        .unwrap();
        assert!(allows(&policy, "edit_file", "docs/a.md", Access::Read));
        assert!(!allows(&policy, "edit_file", "docs/a.md", Access::Write));
        assert!(allows(&policy, "edit_file", "out/a.md", Access::Write));
        assert!(allows(&policy, "edit_file", "out/a.md", Access::Read));
        assert!(policy.may_write_somewhere("edit_file"));
    }

    #[test]
    fn default_modes_for_unlisted_tools() {
        let read_only = Policy::from_toml("default = \"read-only\"").unwrap();
        assert!(read_only.check_tool("list_dir").is_allow());
        assert!(allows(&read_only, "list_dir", "a/b", Access::Read));
        assert!(!allows(&read_only, "write_file", "a/b", Access::Write));
        assert!(!read_only.may_write_somewhere("write_file"));
        let deny = Policy::from_toml("").unwrap();
        assert!(!deny.check_tool("list_dir").is_allow());
        assert!(!allows(&deny, "list_dir", ".", Access::Read));
        assert!(Policy::from_toml("default = \"sometimes\"").is_err());
    }

    #[test]
    fn no_policy_allows_everything_but_hard_links() {
        let policy = Policy::allow_all();
        assert!(allows(&policy, "anything", "x/y", Access::Write));
        assert!(!policy.allows_hard_links());
    }

    #[test]
    fn approval_ask_is_per_tool_and_auto_by_default() {
        let policy = Policy::from_toml(
            "[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n[tools.read_file]\npaths = [\"**\"]\napproval = \"auto\"\n[tools.list_dir]\npaths = [\"**\"]",
        )
        .unwrap();
        assert!(policy.needs_approval("write_file"));
        assert!(!policy.needs_approval("read_file"));
        assert!(!policy.needs_approval("list_dir"));
        assert!(!Policy::allow_all().needs_approval("write_file"));
        assert!(Policy::from_toml("[tools.write_file]\napproval = \"maybe\"").is_err());
    }

    #[test]
    fn a_call_runs_alone_when_it_may_ask_or_reach_the_network() {
        let policy = Policy::from_toml(
            r#"
            [tools.write_file]
            paths = ["**"]
            approval = "ask"
            [tools.read_file]
            paths = ["**"]
            [tools.post.network]
            write = ["POST https://api.test/issues"]
            approval = "ask"
            [tools.get.network]
            get = ["https://api.test/**"]
            "#,
        )
        .unwrap();
        assert!(policy.runs_alone("write_file"));
        assert!(policy.runs_alone("post"));
        assert!(policy.runs_alone("get"));
        assert!(!policy.runs_alone("read_file"));
        assert!(!Policy::allow_all().runs_alone("post"));
    }

    /// The top-level `[network]` is the grant of every tool the policy lets run without a table of its
    /// own: listed tools, and unlisted ones unless `default = "deny"`, which denies them whole and
    /// says how to give them the grant.
    #[test]
    fn the_top_level_network_grant_goes_to_the_tools_the_policy_lets_run() {
        let top = "[network]\nget = [\"https://api.test/**\"]\n";
        let denying = Policy::from_toml(&format!("default = \"deny\"\n{top}")).unwrap();
        assert!(!denying.network("fetch").any());
        let Verdict::Deny(reason) = denying.check_tool("fetch") else {
            panic!("an unlisted tool under default = deny runs");
        };
        assert!(
            reason.contains("[tools.fetch]") && reason.contains("[network]"),
            "{reason}"
        );
        let listed =
            Policy::from_toml(&format!("default = \"deny\"\n{top}[tools.fetch]\n")).unwrap();
        assert_eq!(listed.check_tool("fetch"), Verdict::Allow);
        assert!(listed.network("fetch").any());
        let reading = Policy::from_toml(&format!("default = \"read-only\"\n{top}")).unwrap();
        assert_eq!(reading.check_tool("fetch"), Verdict::Allow);
        assert!(reading.network("fetch").any());
        // Without a top-level grant the refusal names no network table.
        let Verdict::Deny(plain) = Policy::from_toml("default = \"deny\"")
            .unwrap()
            .check_tool("x")
        else {
            panic!("runs");
        };
        assert!(!plain.contains("[network]"), "{plain}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert!(Policy::from_toml("[tools.write_file]\npath = [\"x\"]").is_err());
        assert!(Policy::from_toml("[tools.write_file]\npaths = [\"a[\"]").is_err());
        assert!(Policy::from_toml("deny = [\"a[\"]").is_err());
    }
}
