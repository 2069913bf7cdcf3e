//! Path scope: the file a path argument really names, found by resolving it beneath the root.
//!
//! [`check_path`] refuses what is wrong in the text of a path (empty, NUL, absolute, `..`), then resolves
//! it through the root's capability handle one component at a time ([`crate::resolve`] over
//! [`crate::lower`]'s no-follow directory handles), following each
//! symlink while it stays beneath the root. The answer carries both the name the tool used and the
//! location it leads to, so the gate can hold the policy to both. Special files (FIFOs, sockets,
//! devices) and turngate's own state directory (in any spelling: [`is_reserved`]) are refused here and
//! never opened; so are hard-linked regular files unless the policy allows them. The location is spelled
//! as the file system stores it (see [`crate::resolve`]). The per-call view resolves every path the tool opens at
//! run time the same way, so a symlink swapped in after this check is still caught.

use crate::lower::Lower;
use crate::names::{NameMatch, fold};
use crate::resolve::{
    Entry, EntryKind, RelPath, ResolveError, ResolveOptions, has_windows_prefix, resolve,
};
use crate::root::{Root, STATE_DIR};

/// A path argument that passed the scope check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedPath {
    /// The path as given, normalized (`.` components and repeated `/` removed); what the tool will use.
    pub name: RelPath,
    /// Where the path really leads once every symlink is followed.
    pub location: RelPath,
    /// Every symlink followed on the way, in order.
    pub hops: Vec<RelPath>,
    /// What is at the location now (`None`: it does not exist yet).
    pub entry: Option<Entry>,
    /// Whether a directory on the way folds names (the policy is held to the folded path too).
    pub matching: NameMatch,
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
        /// Why.
        reason: String,
    },
    /// The path names a regular file with more than one hard link, which may be a file outside the root.
    #[error("`{0}` is a file with more than one hard link; the policy does not allow that")]
    HardLink(String),
    /// The path names a FIFO, socket or device, which turngate never opens.
    #[error("`{path}` is {kind}; turngate refuses special files")]
    Special {
        /// The location.
        path: String,
        /// What it is (`a FIFO (named pipe)`, `a socket`, ...).
        kind: &'static str,
    },
    /// The path leads into turngate's own state directory (the journal), which no tool may touch.
    #[error("`{0}` is inside turngate's state directory `{STATE_DIR}`, which no tool may touch")]
    Reserved(String),
}

/// Splits a path argument into plain components, refusing what is wrong in its text.
pub(crate) fn lexical_components(path: &str) -> Result<Vec<&str>, ScopeError> {
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
    Ok(components)
}

/// Whether `path` is turngate's state directory or lies beneath it, in any spelling a folding file
/// system would take for it (`.TurnGate` is refused on every file system: on one that folds it is the
/// state directory, and on one that does not nobody needs it).
pub(crate) fn is_reserved(path: &RelPath) -> bool {
    path.components()
        .next()
        .is_some_and(|first| fold(first) == STATE_DIR)
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
    let components = lexical_components(path)?;
    let name = RelPath::from_components(components.iter().copied());
    if is_reserved(&name) {
        return Err(ScopeError::Reserved(name.to_string()));
    }
    let options = ResolveOptions {
        follow_final: true,
        missing_allowed: usize::MAX,
    };
    // The walk goes through directory handles opened one component at a time without following links,
    // each held to what `lstat` said of it (`crate::lower`), so what is checked is what was walked.
    let mut real = Lower::of(root);
    let resolution = resolve(
        &mut real,
        &RelPath::root(),
        components.iter().copied(),
        options,
    )
    .map_err(|error| escapes(&name, error))?;
    if let Some(hop) = resolution
        .hops
        .iter()
        .chain([&resolution.location])
        .find(|p| is_reserved(p))
    {
        return Err(ScopeError::Reserved(hop.to_string()));
    }
    if let Some(entry) = &resolution.entry {
        if entry.kind.is_special() {
            return Err(ScopeError::Special {
                path: resolution.location.to_string(),
                kind: entry.kind.describe(),
            });
        }
        if entry.kind == EntryKind::File && !allow_hard_links && entry.nlink > 1 {
            return Err(ScopeError::HardLink(resolution.location.to_string()));
        }
    }
    Ok(ScopedPath {
        name,
        location: resolution.location,
        hops: resolution.hops,
        entry: resolution.entry,
        matching: resolution.matching,
    })
}

/// The scope error for a resolution failure, naming the prefix that failed.
fn escapes(name: &RelPath, error: ResolveError) -> ScopeError {
    let prefix = match &error {
        ResolveError::AbsoluteLink { link, .. } | ResolveError::LinkEscapes { link, .. } => {
            link.to_string()
        }
        ResolveError::NotDirectory(path)
        | ResolveError::Missing(path)
        | ResolveError::Hidden(path) => path.to_string(),
        ResolveError::Io { path, .. } => path.to_string(),
        ResolveError::AboveRoot | ResolveError::Loop => name.to_string(),
    };
    ScopeError::Escapes {
        prefix,
        reason: error.to_string(),
    }
}
