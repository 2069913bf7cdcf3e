//! Pinned tools: `turngate.lock` names every component of a tools directory with the SHA-256 of its
//! bytes, so a component swapped in later is refused at load instead of run.
//!
//! `turngate tools lock --tools DIR` writes it; `--locked` (on `run`, `call`, `agent` and `mcp`) makes a
//! component that is not in the lock, or whose digest differs, a load error naming the file and both
//! digests. The check comes before the component is described: a pinned directory runs no code that was
//! not pinned. The format (TOML):
//!
//! ```toml
//! version = 1
//!
//! [[tool]]
//! file = "text_stats.wasm"
//! name = "text_stats"
//! sha256 = "9f2c..."
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The lock file's name in a tools directory.
pub const LOCK_FILE: &str = "turngate.lock";

/// The format version written and understood.
const VERSION: u32 = 1;

/// One pinned component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedTool {
    /// The component's file name in the directory.
    pub file: String,
    /// The tool name it describes itself with (for people reading the lock).
    pub name: String,
    /// SHA-256 of the component's bytes, hex.
    pub sha256: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockText {
    version: u32,
    #[serde(default)]
    tool: Vec<PinnedTool>,
}

/// A parsed `turngate.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLock {
    by_file: BTreeMap<String, PinnedTool>,
}

/// Why a lock file was refused, or a component was refused by it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock file does not parse.
    #[error("not a valid {LOCK_FILE}: {0}")]
    Invalid(String),
    /// The component is not in the lock.
    #[error(
        "{file} is not pinned in {LOCK_FILE} (its SHA-256 is {actual}); run `turngate tools lock` to pin it"
    )]
    Unpinned {
        /// The component's file name.
        file: String,
        /// Its digest.
        actual: String,
    },
    /// The component's digest differs from the pinned one.
    #[error("{file} does not match {LOCK_FILE}: pinned SHA-256 {pinned}, found {actual}")]
    Mismatch {
        /// The component's file name.
        file: String,
        /// The pinned digest.
        pinned: String,
        /// Its digest now.
        actual: String,
    },
}

impl ToolLock {
    /// A lock pinning `tools`.
    pub fn new(tools: impl IntoIterator<Item = PinnedTool>) -> ToolLock {
        ToolLock {
            by_file: tools.into_iter().map(|t| (t.file.clone(), t)).collect(),
        }
    }

    /// Parses a lock file's text.
    pub fn parse(text: &str) -> Result<ToolLock, LockError> {
        let parsed: LockText =
            toml::from_str(text).map_err(|e| LockError::Invalid(e.to_string()))?;
        if parsed.version != VERSION {
            return Err(LockError::Invalid(format!(
                "version {} (this turngate reads version {VERSION})",
                parsed.version
            )));
        }
        Ok(ToolLock::new(parsed.tool))
    }

    /// The lock file's text.
    pub fn render(&self) -> String {
        let text = LockText {
            version: VERSION,
            tool: self.by_file.values().cloned().collect(),
        };
        let body = toml::to_string(&text).expect("a lock serializes");
        format!(
            "# The tool components of this directory, pinned by SHA-256. Written by `turngate tools lock`;\n# checked by `--locked`.\n{body}"
        )
    }

    /// The pinned components, by file name.
    pub fn tools(&self) -> impl Iterator<Item = &PinnedTool> {
        self.by_file.values()
    }

    /// Whether the component `file` with digest `actual` is the pinned one.
    pub fn check(&self, file: &str, actual: &str) -> Result<(), LockError> {
        match self.by_file.get(file) {
            None => Err(LockError::Unpinned {
                file: file.to_owned(),
                actual: actual.to_owned(),
            }),
            Some(pinned) if pinned.sha256 != actual => Err(LockError::Mismatch {
                file: file.to_owned(),
                pinned: pinned.sha256.clone(),
                actual: actual.to_owned(),
            }),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned(file: &str, sha: &str) -> PinnedTool {
        PinnedTool {
            file: file.into(),
            name: file.trim_end_matches(".wasm").into(),
            sha256: sha.into(),
        }
    }

    #[test]
    fn a_lock_round_trips_and_checks_files_and_digests() {
        let lock = ToolLock::new([pinned("a.wasm", "aa"), pinned("b.wasm", "bb")]);
        let text = lock.render();
        assert_eq!(ToolLock::parse(&text).unwrap(), lock);
        assert_eq!(lock.check("a.wasm", "aa"), Ok(()));
        assert!(matches!(
            lock.check("a.wasm", "ff"),
            Err(LockError::Mismatch { .. })
        ));
        assert!(matches!(
            lock.check("c.wasm", "cc"),
            Err(LockError::Unpinned { .. })
        ));
        assert!(ToolLock::parse("version = 2").is_err());
        assert!(ToolLock::parse("version = 1\nextra = 1").is_err());
    }
}
