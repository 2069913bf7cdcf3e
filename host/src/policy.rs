//! The authorization policy: which tool may act on which paths.
//!
//! The format (TOML):
//!
//! ```toml
//! allow_hard_links = false        # optional: let tools touch files that have more than one hard link
//!
//! [tools.write_file]
//! paths = ["notes.txt", "drafts/**"]   # globs relative to the root; `*` does not cross `/`
//!
//! [tools.read_file]
//! paths = ["**"]
//!
//! [tools.delete_file]
//! paths = ["drafts/**"]
//! approval = "ask"                  # optional: ask the user before each call ("auto" is the default)
//! ```
//!
//! Without a policy file every tool may act anywhere inside the root ([`Policy::allow_all`]). With one, a
//! tool that is not listed is denied, and a listed tool may only touch paths that one of its globs matches.
//! A tool with `approval = "ask"` runs only when the embedding program's approver says yes
//! ([`Policy::needs_approval`]; see `pipeline::TurnHooks`); with no approver it is denied.

use std::collections::BTreeMap;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// An authorization policy.
#[derive(Debug, Clone)]
pub struct Policy {
    tools: Option<BTreeMap<String, GlobSet>>,
    ask: std::collections::BTreeSet<String>,
    allow_hard_links: bool,
}

/// Whether a tool's calls need the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// The gate's checks are enough (the default).
    #[default]
    Auto,
    /// Ask before every call; deny when nobody can be asked.
    Ask,
}

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The call may go ahead.
    Allow,
    /// The call is denied, with the reason.
    Deny(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    allow_hard_links: bool,
    #[serde(default)]
    tools: BTreeMap<String, ToolRules>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolRules {
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    approval: Approval,
}

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The TOML does not parse or has unknown keys.
    #[error("policy is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// A path glob does not compile.
    #[error("policy for `{tool}`: bad glob `{glob}`: {source}")]
    Glob {
        /// The tool the glob belongs to.
        tool: String,
        /// The glob as written.
        glob: String,
        /// What globset said.
        source: globset::Error,
    },
}

impl Default for Policy {
    fn default() -> Self {
        Policy::allow_all()
    }
}

impl Policy {
    /// Every tool may act anywhere inside the root (hard-linked files are still refused).
    pub fn allow_all() -> Policy {
        Policy {
            tools: None,
            ask: Default::default(),
            allow_hard_links: false,
        }
    }

    /// Parses a policy file's text.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text)?;
        let mut tools = BTreeMap::new();
        let mut ask = std::collections::BTreeSet::new();
        for (tool, rules) in file.tools {
            if rules.approval == Approval::Ask {
                ask.insert(tool.clone());
            }
            let mut set = GlobSetBuilder::new();
            for glob in &rules.paths {
                let compiled = GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|source| PolicyError::Glob {
                        tool: tool.clone(),
                        glob: glob.clone(),
                        source,
                    })?;
                set.add(compiled);
            }
            let set = set.build().map_err(|source| PolicyError::Glob {
                tool: tool.clone(),
                glob: rules.paths.join(", "),
                source,
            })?;
            tools.insert(tool, set);
        }
        Ok(Policy {
            tools: Some(tools),
            ask,
            allow_hard_links: file.allow_hard_links,
        })
    }

    /// Whether every call of `tool` must be approved by the user first (`approval = "ask"`).
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.ask.contains(tool)
    }

    /// Whether a regular file with more than one hard link may be touched.
    pub fn allows_hard_links(&self) -> bool {
        self.allow_hard_links
    }

    /// Whether `tool` may be called at all (before looking at paths).
    pub fn check_tool(&self, tool: &str) -> Verdict {
        match &self.tools {
            Some(tools) if !tools.contains_key(tool) => {
                Verdict::Deny(format!("the policy does not list tool `{tool}`"))
            }
            _ => Verdict::Allow,
        }
    }

    /// Whether `tool` may act on `path` (relative to the root, normalized, `.` for the root itself).
    pub fn check_path(&self, tool: &str, path: &str) -> Verdict {
        let Some(tools) = &self.tools else {
            return Verdict::Allow;
        };
        match tools.get(tool) {
            None => Verdict::Deny(format!("the policy does not list tool `{tool}`")),
            Some(globs) if globs.is_match(path) => Verdict::Allow,
            Some(_) => Verdict::Deny(format!("the policy does not allow `{tool}` on `{path}`")),
        }
    }
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

    #[test]
    fn globs_bind_tools_to_paths() {
        let policy = Policy::from_toml(POLICY).unwrap();
        assert_eq!(policy.check_path("write_file", "notes.txt"), Verdict::Allow);
        assert_eq!(
            policy.check_path("write_file", "drafts/a/b.md"),
            Verdict::Allow
        );
        assert!(matches!(
            policy.check_path("write_file", "secrets.txt"),
            Verdict::Deny(_)
        ));
        assert!(
            matches!(policy.check_path("list_dir", "a/b"), Verdict::Deny(_)),
            "* must not cross /"
        );
        assert_eq!(policy.check_path("read_file", "a/b/c"), Verdict::Allow);
        assert!(matches!(policy.check_tool("delete_file"), Verdict::Deny(_)));
        assert!(matches!(
            policy.check_path("delete_file", "notes.txt"),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn no_policy_allows_everything_but_hard_links() {
        let policy = Policy::allow_all();
        assert_eq!(policy.check_path("anything", "x/y"), Verdict::Allow);
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
    fn unknown_keys_are_errors() {
        assert!(Policy::from_toml("[tools.write_file]\npath = [\"x\"]").is_err());
        assert!(Policy::from_toml("[tools.write_file]\npaths = [\"a[\"]").is_err());
    }
}
