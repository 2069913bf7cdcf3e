//! Path scope: does a path argument stay beneath the root once symlinks are really resolved?
//!
//! The check walks the path one component at a time through the root's capability handle (cap-std), which
//! follows symlinks only while they stay beneath the root and fails otherwise. Strings are never compared
//! to decide scope. The sandbox enforces the same boundary again at run time, so a symlink swapped in after
//! this check is still stopped there.

use std::io;

use crate::root::Root;

/// A path argument that passed the scope check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedPath {
    /// The path relative to the root with `.` components removed; `.` for the root itself. This is what
    /// policies match against.
    pub normalized: String,
}

/// Why a path argument is out of scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// The path is the empty string.
    #[error("the path is empty")]
    Empty,
    /// The path holds a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The path is absolute.
    #[error("the path is absolute; paths are relative to the root")]
    Absolute,
    /// The path has a `..` component.
    #[error("the path has a `..` component")]
    ParentComponent,
    /// Resolving the path (through symlinks) leaves the root or fails for another reason.
    #[error("`{prefix}` does not resolve beneath the root: {reason}")]
    Escapes {
        /// The part of the path whose resolution failed.
        prefix: String,
        /// What the operating system said.
        reason: String,
    },
    /// The path names a regular file with more than one hard link, which may be a file outside the root.
    #[error("`{0}` is a file with more than one hard link; the policy does not allow that")]
    HardLink(String),
}

/// Checks one path argument.
///
/// A path that does not exist yet is in scope as long as its existing prefix is (a tool that writes may
/// create it; a tool that reads reports it missing). Reads and writes are held to the same boundary: a
/// hard link is refused for both, since reading one can leak a file from outside the root.
pub fn check_path(
    root: &Root,
    path: &str,
    allow_hard_links: bool,
) -> Result<ScopedPath, ScopeError> {
    if path.is_empty() {
        return Err(ScopeError::Empty);
    }
    if path.contains('\0') {
        return Err(ScopeError::Nul);
    }
    if path.starts_with('/') || path.starts_with('\\') || has_windows_prefix(path) {
        return Err(ScopeError::Absolute);
    }
    let mut components = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(ScopeError::ParentComponent),
            other => components.push(other),
        }
    }
    let dir = root.dir();
    for depth in 1..=components.len() {
        let prefix = components[..depth].join("/");
        match dir.metadata(&prefix) {
            Ok(meta) => {
                let last = depth == components.len();
                if last && meta.is_file() && !allow_hard_links && hard_link_count(&meta) > 1 {
                    return Err(ScopeError::HardLink(prefix));
                }
            }
            // The rest does not exist yet (or a file is where a directory should be): the tool will say so.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                break;
            }
            Err(e) => {
                return Err(ScopeError::Escapes {
                    prefix,
                    reason: e.to_string(),
                });
            }
        }
    }
    let normalized = if components.is_empty() {
        ".".to_owned()
    } else {
        components.join("/")
    };
    Ok(ScopedPath { normalized })
}

fn has_windows_prefix(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

#[cfg(unix)]
fn hard_link_count(meta: &cap_std::fs::Metadata) -> u64 {
    use cap_std::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
fn hard_link_count(_meta: &cap_std::fs::Metadata) -> u64 {
    1
}
