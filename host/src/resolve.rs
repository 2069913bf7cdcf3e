//! Path resolution beneath the root: which file a path really names, symlinks followed one at a time.
//!
//! [`RelPath`] is a location relative to the root with no `.`, `..` or empty components. [`resolve`] walks
//! a path component by component through a [`Namespace`] (the real root, or a call's view of it), follows
//! each symlink it meets by splicing the link's target into the rest of the path, and answers the
//! location the path really names, the symlinks it went through and what is there. A step above the
//! root, an absolute link target or a link loop is an error: resolution never leaves the root. Strings are
//! never compared to decide scope; the walk asks the filesystem at every step, and every component that
//! exists is answered spelled as the directory stores it ([`Namespace::lookup`]), so a location names the
//! file whatever spelling of it the path used; only the components still to be made keep the spelling
//! given. The [`Resolution`] also says whether a directory on the way folds names ([`NameMatch`]).
//!
//! [`Entry`] is what `lstat` says about a location, with the file identity (device, inode, size, times)
//! the effect pipeline uses to tell whether a file changed since a call saw it.

use std::fmt;
use std::io;

#[cfg(unix)]
use cap_std::fs::FileTypeExt;
use cap_std::fs::{FileType, Metadata, MetadataExt};

use crate::names::{NameMatch, fold};

/// Most symlinks one resolution follows (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// A normalized location relative to the root: components joined by `/`, none empty, `.` or `..`. The
/// root itself is the empty path (shown as `.`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RelPath(String);

impl RelPath {
    /// The root itself.
    pub fn root() -> RelPath {
        RelPath(String::new())
    }

    /// Builds a path from components that are already known to be plain names.
    pub(crate) fn from_components<'a>(components: impl IntoIterator<Item = &'a str>) -> RelPath {
        let mut path = RelPath::root();
        for component in components {
            path = path.join(component);
        }
        path
    }

    /// Parses a normalized path as stored (`.` or empty for the root); `None` if it is not normalized.
    pub fn parse(text: &str) -> Option<RelPath> {
        if text.is_empty() || text == "." {
            return Some(RelPath::root());
        }
        let ok = text
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        ok.then(|| RelPath(text.to_owned()))
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path with `name` (a single plain component) appended.
    pub fn join(&self, name: &str) -> RelPath {
        debug_assert!(!name.is_empty() && !name.contains('/') && name != "." && name != "..");
        if self.0.is_empty() {
            RelPath(name.to_owned())
        } else {
            RelPath(format!("{}/{name}", self.0))
        }
    }

    /// The parent location; `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(at) => RelPath(self.0[..at].to_owned()),
            None => RelPath::root(),
        })
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.0.is_empty() {
            return None;
        }
        Some(self.0.rsplit('/').next().unwrap_or(&self.0))
    }

    /// The components, outermost first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// How many components deep the path is (0 for the root).
    pub fn depth(&self) -> usize {
        self.components().count()
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn is_within(&self, other: &RelPath) -> bool {
        other.0.is_empty()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// [`RelPath::is_within`] for paths on directories that match names as `matching` says: where they
    /// fold, `Docs/A.txt` lies within `docs`.
    pub fn is_within_as(&self, other: &RelPath, matching: NameMatch) -> bool {
        self.is_within(other)
            || (matching == NameMatch::Folding
                && RelPath(fold(&self.0).into_owned())
                    .is_within(&RelPath(fold(&other.0).into_owned())))
    }

    /// The path as stored: empty for the root. Use `Display` for messages and policies.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as policies and messages see it: `.` for the root.
    pub fn to_policy_path(&self) -> &str {
        if self.0.is_empty() { "." } else { &self.0 }
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_policy_path())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_policy_path())
    }
}

/// What kind of object a location holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something else.
    Unknown,
}

impl EntryKind {
    pub(crate) fn from_file_type(file_type: FileType) -> EntryKind {
        if file_type.is_file() {
            return EntryKind::File;
        }
        if file_type.is_dir() {
            return EntryKind::Dir;
        }
        if file_type.is_symlink() {
            return EntryKind::Symlink;
        }
        #[cfg(unix)]
        {
            if file_type.is_fifo() {
                return EntryKind::Fifo;
            }
            if file_type.is_socket() {
                return EntryKind::Socket;
            }
            if file_type.is_char_device() {
                return EntryKind::CharDevice;
            }
            if file_type.is_block_device() {
                return EntryKind::BlockDevice;
            }
        }
        EntryKind::Unknown
    }

    /// Whether this is a FIFO, socket, device or unknown object: turngate never opens those.
    pub fn is_special(self) -> bool {
        !matches!(self, EntryKind::File | EntryKind::Dir | EntryKind::Symlink)
    }

    /// A name for messages: `a FIFO (named pipe)`, `a socket`, ...
    pub fn describe(self) -> &'static str {
        match self {
            EntryKind::File => "a regular file",
            EntryKind::Dir => "a directory",
            EntryKind::Symlink => "a symbolic link",
            EntryKind::Fifo => "a FIFO (named pipe)",
            EntryKind::Socket => "a socket",
            EntryKind::CharDevice => "a character device",
            EntryKind::BlockDevice => "a block device",
            EntryKind::Unknown => "a special file",
        }
    }
}

/// The identity of a file as `lstat` reports it: if any field differs, the file changed (or was replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

/// What is at a location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The kind of object.
    pub kind: EntryKind,
    /// Its identity.
    pub identity: Identity,
    /// Its hard-link count.
    pub nlink: u64,
    /// Last access time, nanoseconds since the epoch (not part of the identity: reading changes it).
    pub atime_ns: i128,
}

impl Entry {
    /// Whether `other` describes the same object: the same kind, device and inode (its size and times
    /// may differ). What was opened is held to what was checked with this.
    pub(crate) fn is_same_object(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.identity.dev == other.identity.dev
            && self.identity.ino == other.identity.ino
    }

    /// The entry `metadata` describes.
    pub(crate) fn from_metadata(metadata: &Metadata) -> Entry {
        Entry {
            kind: EntryKind::from_file_type(metadata.file_type()),
            identity: Identity {
                dev: metadata.dev(),
                ino: metadata.ino(),
                size: metadata.size(),
                mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000
                    + i128::from(metadata.mtime_nsec()),
                ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                    + i128::from(metadata.ctime_nsec()),
            },
            nlink: metadata.nlink(),
            atime_ns: i128::from(metadata.atime()) * 1_000_000_000
                + i128::from(metadata.atime_nsec()),
        }
    }
}

/// Something paths can be resolved in: the real root, or a call's view of it.
pub(crate) trait Namespace {
    /// What is at `path`, a location spelled as stored (not following a final symlink); `None` when
    /// nothing is.
    fn entry(&mut self, path: &RelPath) -> Result<Option<Entry>, ResolveError>;
    /// What answers to `name` in the directory `dir` (not following a symlink), as the namespace matches
    /// names there, with the name it is stored under; `None` when nothing does.
    fn lookup(
        &mut self,
        dir: &RelPath,
        name: &str,
    ) -> Result<Option<(String, Entry)>, ResolveError>;
    /// How the directory `dir` matches names, as far as the namespace knows.
    fn matching(&mut self, dir: &RelPath) -> Result<NameMatch, ResolveError>;
    /// The target of the symlink at `path`, as stored.
    fn link_target(&mut self, path: &RelPath) -> Result<String, ResolveError>;
}

/// Why a path could not be resolved beneath the root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// A `..` step would leave the root.
    #[error("`..` leads above the root")]
    AboveRoot,
    /// A symlink points at an absolute path.
    #[error("the symlink `{link}` points to the absolute path `{target}`, outside the root")]
    AbsoluteLink {
        /// Where the symlink is.
        link: RelPath,
        /// Its target.
        target: String,
    },
    /// A symlink leads above the root.
    #[error("the symlink `{link}` points to `{target}`, which leads outside the root")]
    LinkEscapes {
        /// Where the symlink is.
        link: RelPath,
        /// Its target.
        target: String,
    },
    /// Too many symlinks.
    #[error("more than {MAX_SYMLINK_HOPS} symlinks (a loop?)")]
    Loop,
    /// A component in the middle of the path is not a directory.
    #[error("`{0}` is not a directory")]
    NotDirectory(RelPath),
    /// A component in the middle of the path does not exist.
    #[error("`{0}` does not exist")]
    Missing(RelPath),
    /// The namespace refused to show a location.
    #[error("`{0}` is not visible to this call")]
    Hidden(RelPath),
    /// The filesystem failed.
    #[error("`{path}`: {message}")]
    Io {
        /// Where.
        path: RelPath,
        /// What the operating system said.
        message: String,
        /// The error kind.
        kind: io::ErrorKind,
    },
}

impl ResolveError {
    pub(crate) fn io(path: &RelPath, error: &io::Error) -> ResolveError {
        ResolveError::Io {
            path: path.clone(),
            message: error.to_string(),
            kind: error.kind(),
        }
    }
}

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The location the path names once every symlink is followed (beneath the root).
    pub location: RelPath,
    /// What is there (`None`: nothing yet).
    pub entry: Option<Entry>,
    /// The location of every symlink followed, in order.
    pub hops: Vec<RelPath>,
    /// Components at the end that do not exist yet (a path a tool may create); 0 when the path exists.
    pub missing: usize,
    /// Whether a directory the walk looked a name up in folds names: a policy glob is held to the
    /// location folded as well.
    pub matching: NameMatch,
}

/// How [`resolve`] treats the end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResolveOptions {
    /// Follow a symlink in the last component (`stat`) or not (`lstat`).
    pub follow_final: bool,
    /// How many trailing components may be missing (1: only the last, as for `open` with `create`; more
    /// for `mkdir -p`).
    pub missing_allowed: usize,
}

/// Resolves `components` (plain names, `.` and `..`) relative to the directory `base`.
pub(crate) fn resolve<'a>(
    namespace: &mut dyn Namespace,
    base: &RelPath,
    components: impl IntoIterator<Item = &'a str>,
    options: ResolveOptions,
) -> Result<Resolution, ResolveError> {
    let mut pending: std::collections::VecDeque<String> = components
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    let mut current = base.clone();
    let mut entry = namespace.entry(&current)?;
    let mut hops = Vec::new();
    let mut matching = NameMatch::Exact;
    while let Some(component) = pending.pop_front() {
        match component.as_str() {
            "." => continue,
            ".." => {
                current = current.parent().ok_or(ResolveError::AboveRoot)?;
                entry = namespace.entry(&current)?;
                continue;
            }
            _ => {}
        }
        let last = pending.is_empty();
        let found = namespace.lookup(&current, &component)?;
        matching = matching.or(namespace.matching(&current)?);
        let candidate = match &found {
            Some((stored, _)) => current.join(stored),
            None => current.join(&component),
        };
        match found.map(|(_, entry)| entry) {
            None => {
                let missing = 1 + pending.iter().filter(|c| *c != ".").count();
                if missing > options.missing_allowed || pending.iter().any(|c| c == "..") {
                    return Err(ResolveError::Missing(candidate));
                }
                let mut location = candidate;
                for rest in pending.iter().filter(|c| *c != ".") {
                    location = location.join(rest);
                }
                return Ok(Resolution {
                    location,
                    entry: None,
                    hops,
                    missing,
                    matching,
                });
            }
            Some(found) if found.kind == EntryKind::Symlink && (!last || options.follow_final) => {
                if hops.len() >= MAX_SYMLINK_HOPS {
                    return Err(ResolveError::Loop);
                }
                let target = namespace.link_target(&candidate)?;
                if target.starts_with('/')
                    || target.starts_with('\\')
                    || has_windows_prefix(&target)
                {
                    return Err(ResolveError::AbsoluteLink {
                        link: candidate,
                        target,
                    });
                }
                // The target is relative to the link's directory, `current`; check it does not climb
                // above the root before splicing it in.
                let mut depth = current.depth();
                for step in target.split('/') {
                    match step {
                        "" | "." => {}
                        ".." if depth == 0 => {
                            return Err(ResolveError::LinkEscapes {
                                link: candidate,
                                target,
                            });
                        }
                        ".." => depth -= 1,
                        _ => depth += 1,
                    }
                }
                hops.push(candidate);
                for step in target.split('/').rev() {
                    if !step.is_empty() {
                        pending.push_front(step.to_owned());
                    }
                }
            }
            Some(found) => {
                if !last && found.kind != EntryKind::Dir {
                    return Err(ResolveError::NotDirectory(candidate));
                }
                current = candidate;
                entry = Some(found);
            }
        }
    }
    Ok(Resolution {
        location: current,
        entry,
        hops,
        missing: 0,
        matching,
    })
}

/// Whether a path starts like a Windows drive (`C:`), which is absolute there.
pub(crate) fn has_windows_prefix(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A namespace made of a map: `path -> Some(target)` for symlinks, `None` for directories; names
    /// ending in `.txt` are files.
    struct Fake(HashMap<&'static str, Option<&'static str>>);

    fn entry(kind: EntryKind) -> Entry {
        Entry {
            kind,
            identity: Identity {
                dev: 0,
                ino: 0,
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
            },
            nlink: 1,
            atime_ns: 0,
        }
    }

    impl Namespace for Fake {
        fn entry(&mut self, path: &RelPath) -> Result<Option<Entry>, ResolveError> {
            if path.is_root() {
                return Ok(Some(entry(EntryKind::Dir)));
            }
            Ok(self.0.get(path.as_str()).map(|link| match link {
                Some(_) => entry(EntryKind::Symlink),
                None if path.as_str().ends_with(".txt") => entry(EntryKind::File),
                None => entry(EntryKind::Dir),
            }))
        }
        fn lookup(
            &mut self,
            dir: &RelPath,
            name: &str,
        ) -> Result<Option<(String, Entry)>, ResolveError> {
            Ok(self
                .entry(&dir.join(name))?
                .map(|entry| (name.to_owned(), entry)))
        }
        fn matching(&mut self, _dir: &RelPath) -> Result<NameMatch, ResolveError> {
            Ok(NameMatch::Exact)
        }
        fn link_target(&mut self, path: &RelPath) -> Result<String, ResolveError> {
            Ok(self.0[path.as_str()].unwrap().to_owned())
        }
    }

    fn fake() -> Fake {
        Fake(HashMap::from([
            ("public", None),
            ("private", None),
            ("private/secret.txt", None),
            ("public/peek", Some("../private/secret.txt")),
            ("drafts", Some("private")),
            ("loop", Some("loop")),
            ("up", Some("../outside")),
            ("abs", Some("/etc")),
        ]))
    }

    fn walk(path: &str, missing_allowed: usize) -> Result<Resolution, ResolveError> {
        resolve(
            &mut fake(),
            &RelPath::root(),
            path.split('/'),
            ResolveOptions {
                follow_final: true,
                missing_allowed,
            },
        )
    }

    #[test]
    fn symlinks_resolve_to_their_real_location() {
        let peek = walk("public/peek", 0).unwrap();
        assert_eq!(peek.location.as_str(), "private/secret.txt");
        assert_eq!(peek.hops, vec![RelPath::parse("public/peek").unwrap()]);
        let through_dir = walk("drafts/keep.txt", 1).unwrap();
        assert_eq!(through_dir.location.as_str(), "private/keep.txt");
        assert_eq!(through_dir.missing, 1);
    }

    #[test]
    fn escapes_and_loops_are_errors() {
        assert_eq!(walk("..", 0), Err(ResolveError::AboveRoot));
        assert!(matches!(
            walk("up", 0),
            Err(ResolveError::LinkEscapes { .. })
        ));
        assert!(matches!(
            walk("abs/passwd", 0),
            Err(ResolveError::AbsoluteLink { .. })
        ));
        assert_eq!(walk("loop", 0), Err(ResolveError::Loop));
        assert!(matches!(
            walk("private/secret.txt/x", 1),
            Err(ResolveError::NotDirectory(_))
        ));
        assert!(matches!(walk("nope/a/b", 2), Err(ResolveError::Missing(_))));
        assert_eq!(walk("nope/a/b", 3).unwrap().location.as_str(), "nope/a/b");
    }

    #[test]
    fn rel_paths_nest_by_component() {
        let a = RelPath::parse("a/b").unwrap();
        assert!(a.is_within(&RelPath::parse("a").unwrap()));
        assert!(a.is_within(&RelPath::root()));
        assert!(
            !RelPath::parse("ab")
                .unwrap()
                .is_within(&RelPath::parse("a").unwrap())
        );
        assert_eq!(a.parent().unwrap().as_str(), "a");
        assert_eq!(a.file_name(), Some("b"));
        assert_eq!(RelPath::root().to_string(), ".");
        assert!(RelPath::parse("a/../b").is_none());
    }
}
