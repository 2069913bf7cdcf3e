//! A call's view of the root: exactly what the gate approved, and every write staged.
//!
//! A [`CallView`] is a copy-on-write overlay. The lower layer is the real root, read-only
//! ([`crate::lower`]); the upper layer is a private staging directory ([`staging`]) plus an in-memory map of
//! every location the call changed: a staged file, a directory it made, or a deletion (a whiteout). A
//! tool never writes the real root: opening an existing file for writing copies it up, creating a file
//! stages a new one, deleting records a whiteout. What the call changed is exactly the upper layer,
//! which the effect pipeline ([`crate::effects`]) checks and applies after the call returns.
//!
//! Every path the tool uses is resolved through the merged layers one component at a time, symlinks
//! followed ([`crate::resolve`]), and authorized on every use against the gate's [`Grant`]s and the
//! policy:
//!
//! * a location is **visible** (readable) when it lies within a grant and the policy lets the tool read
//!   it; the directories on the way to a grant can be walked through and list only what leads to a
//!   grant; everything else, and anything the policy denies, does not exist for the tool;
//! * a location is **writable** when it lies within a write grant and the policy lets the tool write it;
//!   a read-only call gets a read-only view;
//! * the tool may also create temporary entries next to a write-granted path and the parents of one
//!   (`mkdir -p`): they only take effect if the effect pipeline finds them within the approval;
//! * what the tool created itself is its own to read, change and delete;
//! * the name the tool used, every symlink it went through and the location it reached are each held
//!   to the policy; FIFOs, sockets and devices are never opened; turngate's state directory is invisible.
//!
//! Names are matched the way the real directory matches them ([`crate::names`]): a location is spelled as
//! the file system stores it, so on a folding directory `a.txt` and `A.txt` are one node, and what the
//! call makes there answers to every spelling of its name; a rename that changes only the spelling is a
//! rename (the old name removed, the new one made).
//!
//! The WASI adapters over this view are in `sandbox/filesystem/`; nothing here knows about wasmtime.

pub(crate) mod staging;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

use cap_std::fs::{Dir, Metadata};

use crate::descriptor::Access;
use crate::names::NameMatch;
use crate::policy::Policy;
use crate::resolve::{
    Entry, EntryKind, Identity, Namespace, RelPath, Resolution, ResolveError, ResolveOptions,
    resolve,
};
use crate::scope::is_reserved;

use self::staging::{Quota, Staged, Staging};
use crate::lower::Lower;
use crate::root::Root;

/// One path the gate approved for a call: the location it resolved to, and the access the tool declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Where the approved path leads (symlinks followed).
    pub location: RelPath,
    /// What the tool may do there.
    pub access: Access,
}

/// Why a view operation failed, in the terms of WASI's `error-code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ViewError {
    #[error("no such file or directory")]
    NoEntry,
    #[error("permission denied")]
    Access,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("read-only view")]
    ReadOnly,
    #[error("file exists")]
    Exist,
    #[error("is a directory")]
    IsDirectory,
    #[error("not a directory")]
    NotDirectory,
    #[error("directory not empty")]
    NotEmpty,
    #[error("too many symlinks")]
    Loop,
    #[error("invalid argument")]
    Invalid,
    #[error("cross-device link")]
    CrossDevice,
    #[error("the call's staging limit is reached")]
    InsufficientSpace,
    #[error("resource busy")]
    Busy,
    #[error("name too long")]
    NameTooLong,
    #[error("input/output error")]
    Io,
}

impl From<io::Error> for ViewError {
    fn from(error: io::Error) -> ViewError {
        match error.kind() {
            io::ErrorKind::NotFound => ViewError::NoEntry,
            io::ErrorKind::PermissionDenied => ViewError::Access,
            io::ErrorKind::AlreadyExists => ViewError::Exist,
            io::ErrorKind::NotADirectory => ViewError::NotDirectory,
            io::ErrorKind::IsADirectory => ViewError::IsDirectory,
            io::ErrorKind::DirectoryNotEmpty => ViewError::NotEmpty,
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidFilename => ViewError::Invalid,
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                ViewError::InsufficientSpace
            }
            io::ErrorKind::ResourceBusy => ViewError::Busy,
            io::ErrorKind::CrossesDevices => ViewError::CrossDevice,
            io::ErrorKind::ReadOnlyFilesystem => ViewError::ReadOnly,
            _ if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                ViewError::Loop
            }
            _ => ViewError::Io,
        }
    }
}

impl From<ResolveError> for ViewError {
    fn from(error: ResolveError) -> ViewError {
        match error {
            ResolveError::AboveRoot
            | ResolveError::AbsoluteLink { .. }
            | ResolveError::LinkEscapes { .. } => ViewError::NotPermitted,
            ResolveError::Loop => ViewError::Loop,
            ResolveError::NotDirectory(_) => ViewError::NotDirectory,
            ResolveError::Missing(_) | ResolveError::Hidden(_) => ViewError::NoEntry,
            ResolveError::Io { kind, .. } => ViewError::from(io::Error::from(kind)),
        }
    }
}

/// What the call did to one location, as the upper layer records it.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// The location now holds this staged file.
    File(Staged),
    /// The call made a directory here.
    Dir,
    /// The call deleted what was here.
    Absent,
}

bitflags::bitflags! {
    /// How a file or directory is opened: the WASI `open-at` flags that matter here, whichever
    /// generation asked (each translates its own path, open and descriptor flags into these).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub(crate) struct OpenRequest: u8 {
        /// A symlink as the last component is followed.
        const FOLLOW = 1 << 0;
        /// Made when missing.
        const CREATE = 1 << 1;
        /// Must be a directory.
        const DIRECTORY = 1 << 2;
        /// With `CREATE`: must not exist yet.
        const EXCLUSIVE = 1 << 3;
        /// Emptied when opened.
        const TRUNCATE = 1 << 4;
        /// Opened for reading.
        const READ = 1 << 5;
        /// Opened for writing.
        const WRITE = 1 << 6;
    }
}

/// An open file of the view.
#[derive(Debug, Clone)]
pub(crate) struct ViewFile {
    pub(crate) file: Arc<std::fs::File>,
    /// The staged file when the handle is in the upper layer (writes go there); `None`: a lower file.
    pub(crate) staged: Option<Staged>,
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// What `open` gave.
#[derive(Debug, Clone)]
pub(crate) enum Opened {
    Dir(RelPath),
    File(ViewFile),
}

/// `stat` of a view entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) kind: EntryKind,
    pub(crate) nlink: u64,
    pub(crate) size: u64,
    pub(crate) atime_ns: Option<i128>,
    pub(crate) mtime_ns: Option<i128>,
    pub(crate) ctime_ns: Option<i128>,
    /// For `metadata-hash`: the identity of the object (device and inode, or the location of a directory
    /// that exists only in the view).
    pub(crate) object: (u64, u64),
}

impl Stat {
    /// What `lstat` said of an entry, as the guest sees it.
    pub(crate) fn of(entry: &Entry) -> Stat {
        Stat {
            kind: entry.kind,
            nlink: entry.nlink,
            size: entry.identity.size,
            atime_ns: Some(entry.atime_ns),
            mtime_ns: Some(entry.identity.mtime_ns),
            ctime_ns: Some(entry.identity.ctime_ns),
            object: (entry.identity.dev, entry.identity.ino),
        }
    }
}

/// What a finished call leaves for the effect pipeline: the upper layer and what the lower layer held
/// where it changed things.
pub(crate) struct Upper {
    pub(crate) nodes: BTreeMap<RelPath, Node>,
    /// The lower layer's entry at each changed location when the view first looked (`None`: nothing).
    pub(crate) origins: BTreeMap<RelPath, Option<Entry>>,
    pub(crate) staging: Option<Staging>,
    /// The lower layer the view read through (for the old content of what changed).
    pub(crate) lower: Lower,
}

/// The access an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Walk through or list a directory.
    Traverse,
    Read,
    /// Change or delete something that exists.
    Write,
    /// Make something new.
    Create,
}

/// What a call was approved for: its tool, the policy and the gate's grants. It decides what exists for
/// the call in the real root; what the call made itself is decided by the view.
struct Approval {
    tool: String,
    policy: Policy,
    grants: Vec<Grant>,
}

impl Approval {
    /// Whether `location` (on directories matching names as `matching` says) lies within a grant, for
    /// writing if `write`.
    fn within_grant(&self, location: &RelPath, write: bool, matching: NameMatch) -> bool {
        self.grants.iter().any(|g| {
            (!write || g.access == Access::Write) && location.is_within_as(&g.location, matching)
        })
    }

    /// Whether a grant lies at or beneath `location` (so the call may walk through it).
    fn leads_to_grant(&self, location: &RelPath, matching: NameMatch) -> bool {
        self.grants
            .iter()
            .any(|g| g.location.is_within_as(location, matching))
    }

    fn policy_allows(&self, location: &RelPath, access: Access, matching: NameMatch) -> bool {
        self.policy
            .check_in(&self.tool, location.to_policy_path(), access, matching)
            .is_allow()
    }

    /// Whether what the real root holds at `location` exists for the call: the root, a directory on
    /// the way to a grant, or a location within a grant that the policy lets the tool read. Anything
    /// else is absent, whatever is there, so no operation can tell a hidden name from a missing one.
    fn shows(&self, location: &RelPath, matching: NameMatch) -> bool {
        location.is_root()
            || self.leads_to_grant(location, matching)
            || (self.within_grant(location, false, matching)
                && self.policy_allows(location, Access::Read, matching))
    }
}

/// A call's view of the root.
pub(crate) struct CallView {
    approval: Approval,
    writable: bool,
    allow_hard_links: bool,
    lower: Lower,
    nodes: BTreeMap<RelPath, Node>,
    /// What the lower layer held at each location the view looked at, when it first looked.
    observed: HashMap<RelPath, Option<Entry>>,
    staging: Option<Staging>,
    /// Where staged files go (the root handle's staging directory; `None` for a read-only view).
    staging_dir: Option<Arc<Dir>>,
    quota: Arc<Quota>,
}

impl CallView {
    /// A view of `root` for one call of `tool` with `grants`, staging writes in `staging_dir`. The view
    /// is read-only unless it has a staging directory, a grant is for writing and the policy lets the
    /// tool write somewhere.
    pub(crate) fn new(
        root: &Root,
        staging_dir: Option<Arc<Dir>>,
        tool: &str,
        policy: &Policy,
        grants: Vec<Grant>,
        staged_bytes: u64,
    ) -> CallView {
        let writable = staging_dir.is_some()
            && grants.iter().any(|g| g.access == Access::Write)
            && policy.may_write_somewhere(tool);
        CallView {
            approval: Approval {
                tool: tool.to_owned(),
                policy: policy.clone(),
                grants,
            },
            writable,
            allow_hard_links: policy.allows_hard_links(),
            lower: Lower::of(root),
            nodes: BTreeMap::new(),
            observed: HashMap::new(),
            staging: None,
            staging_dir,
            quota: Quota::new(staged_bytes),
        }
    }

    /// Whether the view may change anything at all.
    pub(crate) fn is_writable(&self) -> bool {
        self.writable
    }

    /// Ends the call: the upper layer and the origins of what it changed, for the effect pipeline.
    pub(crate) fn finish(self) -> Upper {
        let origins = self
            .nodes
            .keys()
            .map(|location| {
                let origin = self.observed.get(location).copied().flatten();
                (location.clone(), origin)
            })
            .collect();
        Upper {
            nodes: self.nodes,
            origins,
            staging: self.staging,
            lower: self.lower,
        }
    }

    /// Opens a file or directory.
    pub(crate) fn open(
        &mut self,
        base: &RelPath,
        path: &str,
        request: OpenRequest,
    ) -> Result<Opened, ViewError> {
        if request.intersects(OpenRequest::WRITE | OpenRequest::TRUNCATE | OpenRequest::CREATE)
            && !self.writable
        {
            return Err(ViewError::ReadOnly);
        }
        let parsed = GuestPath::parse(base, path)?;
        let follow = request.contains(OpenRequest::FOLLOW) || parsed.trailing_slash;
        let resolution = self.resolve(
            base,
            &parsed,
            follow,
            usize::from(request.contains(OpenRequest::CREATE)),
        )?;
        let Some(entry) = resolution.entry else {
            if !request.contains(OpenRequest::CREATE) {
                return Err(ViewError::NoEntry);
            }
            if request.contains(OpenRequest::DIRECTORY) || parsed.trailing_slash {
                return Err(ViewError::IsDirectory);
            }
            self.authorize(&parsed.name, &resolution, Need::Create)?;
            let staged = self.staging()?.new_file()?;
            let file = staged.file.clone();
            self.set_node(&resolution.location, Node::File(staged.clone()));
            return Ok(Opened::File(ViewFile {
                file,
                staged: Some(staged),
                read: request.contains(OpenRequest::READ),
                write: request.contains(OpenRequest::WRITE),
            }));
        };
        let location = resolution.location.clone();
        match entry.kind {
            EntryKind::Dir => {
                self.authorize(&parsed.name, &resolution, Need::Traverse)?;
                if request.contains(OpenRequest::CREATE | OpenRequest::EXCLUSIVE) {
                    return Err(ViewError::Exist);
                }
                if request.intersects(OpenRequest::WRITE | OpenRequest::TRUNCATE) {
                    return Err(ViewError::IsDirectory);
                }
                Ok(Opened::Dir(location))
            }
            EntryKind::File => {
                let writes = request.intersects(OpenRequest::WRITE | OpenRequest::TRUNCATE);
                let need = if writes { Need::Write } else { Need::Read };
                self.authorize(&parsed.name, &resolution, need)?;
                if request.contains(OpenRequest::CREATE | OpenRequest::EXCLUSIVE) {
                    return Err(ViewError::Exist);
                }
                if request.contains(OpenRequest::DIRECTORY) || parsed.trailing_slash {
                    return Err(ViewError::NotDirectory);
                }
                let staged = match self.nodes.get(&location) {
                    Some(Node::File(staged)) => Some(staged.clone()),
                    _ if writes => Some(self.copy_up(
                        &location,
                        &entry,
                        request.contains(OpenRequest::TRUNCATE),
                    )?),
                    _ => None,
                };
                let (file, staged) = match staged {
                    Some(staged) => {
                        if request.contains(OpenRequest::TRUNCATE) {
                            staged.reserve(0);
                            staged.file.set_len(0)?;
                        }
                        (staged.file.clone(), Some(staged))
                    }
                    None => {
                        let (file, _) = self.open_lower(&location, &entry)?;
                        (Arc::new(file.into_std()), None)
                    }
                };
                Ok(Opened::File(ViewFile {
                    file,
                    staged,
                    read: request.contains(OpenRequest::READ)
                        || !request.contains(OpenRequest::WRITE),
                    write: request.contains(OpenRequest::WRITE),
                }))
            }
            EntryKind::Symlink => {
                self.authorize(&parsed.name, &resolution, Need::Read)?;
                Err(
                    if request.contains(OpenRequest::CREATE | OpenRequest::EXCLUSIVE) {
                        ViewError::Exist
                    } else {
                        ViewError::Loop
                    },
                )
            }
            _ => {
                self.authorize(&parsed.name, &resolution, Need::Read)?;
                Err(ViewError::NotPermitted)
            }
        }
    }

    /// `stat` of what `path` names.
    pub(crate) fn stat_at(
        &mut self,
        base: &RelPath,
        path: &str,
        follow: bool,
    ) -> Result<Stat, ViewError> {
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, follow || parsed.trailing_slash, 0)?;
        let entry = resolution.entry.ok_or(ViewError::NoEntry)?;
        let need = if entry.kind == EntryKind::Dir {
            Need::Traverse
        } else {
            Need::Read
        };
        self.authorize(&parsed.name, &resolution, need)?;
        self.stat_entry(&resolution.location, &entry)
    }

    /// `stat` of a location the tool already holds open.
    pub(crate) fn stat_location(&mut self, location: &RelPath) -> Result<Stat, ViewError> {
        let entry = self.entry(location)?.ok_or(ViewError::NoEntry)?;
        self.stat_entry(location, &entry)
    }

    fn stat_entry(&mut self, location: &RelPath, entry: &Entry) -> Result<Stat, ViewError> {
        match self.nodes.get(location) {
            Some(Node::File(staged)) => {
                let metadata = Metadata::from_file(&staged.file)?;
                Ok(Stat::of(&Entry::from_metadata(&metadata)))
            }
            Some(Node::Dir) => Ok(Stat {
                kind: EntryKind::Dir,
                nlink: 1,
                size: 0,
                atime_ns: None,
                mtime_ns: None,
                ctime_ns: None,
                object: (0, fxhash(location.as_str())),
            }),
            _ => Ok(Stat::of(entry)),
        }
    }

    /// The visible entries of the directory at `location` (which the tool holds open).
    pub(crate) fn read_dir(
        &mut self,
        location: &RelPath,
    ) -> Result<Vec<(String, EntryKind)>, ViewError> {
        let children = self.children(location)?;
        let matching = self.matching_at(location)?;
        Ok(children
            .into_iter()
            .filter(|(name, kind)| {
                let child = location.join(name);
                match kind {
                    EntryKind::Dir => {
                        self.traversable(&child, matching) || self.readable(&child, matching)
                    }
                    _ => self.readable(&child, matching),
                }
            })
            .collect())
    }

    /// Makes a directory.
    pub(crate) fn create_dir(&mut self, base: &RelPath, path: &str) -> Result<(), ViewError> {
        if !self.writable {
            return Err(ViewError::ReadOnly);
        }
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, false, 1)?;
        if resolution.entry.is_some() {
            // Only what the call may see can be said to exist.
            self.authorize(&parsed.name, &resolution, Need::Traverse)?;
            return Err(ViewError::Exist);
        }
        self.authorize(&parsed.name, &resolution, Need::Create)?;
        self.set_node(&resolution.location, Node::Dir);
        Ok(())
    }

    /// Removes a file or symlink.
    pub(crate) fn unlink(&mut self, base: &RelPath, path: &str) -> Result<(), ViewError> {
        if !self.writable {
            return Err(ViewError::ReadOnly);
        }
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, false, 0)?;
        let entry = resolution.entry.ok_or(ViewError::NoEntry)?;
        if entry.kind == EntryKind::Dir {
            return Err(ViewError::IsDirectory);
        }
        if parsed.trailing_slash {
            return Err(ViewError::NotDirectory);
        }
        self.authorize(&parsed.name, &resolution, Need::Write)?;
        self.remove_node(&resolution.location);
        Ok(())
    }

    /// Removes an empty directory.
    pub(crate) fn remove_dir(&mut self, base: &RelPath, path: &str) -> Result<(), ViewError> {
        if !self.writable {
            return Err(ViewError::ReadOnly);
        }
        // As `rmdir(2)`: a path whose last component is `.` is invalid, whatever it names.
        if path.rsplit('/').next() == Some(".") {
            return Err(ViewError::Invalid);
        }
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, false, 0)?;
        let entry = resolution.entry.ok_or(ViewError::NoEntry)?;
        if entry.kind != EntryKind::Dir {
            return Err(ViewError::NotDirectory);
        }
        if resolution.location.is_root() {
            return Err(ViewError::Busy);
        }
        self.authorize(&parsed.name, &resolution, Need::Write)?;
        // Hidden entries count: a directory is removed only when it is really empty.
        if !self.children(&resolution.location)?.is_empty() {
            return Err(ViewError::NotEmpty);
        }
        self.remove_node(&resolution.location);
        Ok(())
    }

    /// Renames a file (or a directory the call made itself).
    pub(crate) fn rename(
        &mut self,
        old_base: &RelPath,
        old_path: &str,
        new_base: &RelPath,
        new_path: &str,
    ) -> Result<(), ViewError> {
        if !self.writable {
            return Err(ViewError::ReadOnly);
        }
        let old = GuestPath::parse(old_base, old_path)?;
        let new = GuestPath::parse(new_base, new_path)?;
        let from = self.resolve(old_base, &old, false, 0)?;
        let to = self.resolve(new_base, &new, false, 1)?;
        let entry = from.entry.ok_or(ViewError::NoEntry)?;
        self.authorize(&old.name, &from, Need::Write)?;
        let need = if to.entry.is_some() {
            Need::Write
        } else {
            Need::Create
        };
        self.authorize(&new.name, &to, need)?;
        let target = if from.location == to.location {
            // A directory that folds names found the entry itself under the new name: the rename
            // changes its spelling only, if anything.
            match respelling(&to.location, &new.name) {
                Some(respelled) => {
                    let made = Resolution {
                        location: respelled.clone(),
                        entry: None,
                        missing: 1,
                        ..to.clone()
                    };
                    self.authorize(&new.name, &made, Need::Create)?;
                    respelled
                }
                None => return Ok(()),
            }
        } else {
            to.location.clone()
        };
        // Over an entry, unless it is the one being respelled.
        let over = to.entry.filter(|_| target == to.location);
        if target.is_within(&from.location) {
            return Err(ViewError::Invalid);
        }
        match entry.kind {
            EntryKind::File => {
                if over.is_some_and(|over| over.kind == EntryKind::Dir) {
                    return Err(ViewError::IsDirectory);
                }
                if new.trailing_slash {
                    return Err(ViewError::NotDirectory);
                }
                let staged = match self.nodes.get(&from.location) {
                    Some(Node::File(staged)) => staged.clone(),
                    _ => self.copy_up(&from.location, &entry, false)?,
                };
                // Removed first: in a folding directory the two names may be one node's spellings.
                self.remove_node(&from.location);
                self.set_node(&target, Node::File(staged));
                Ok(())
            }
            EntryKind::Dir if self.is_own(&from.location) => {
                if over.is_some() {
                    return Err(ViewError::Exist);
                }
                let moved: Vec<(RelPath, Node)> = self
                    .nodes
                    .iter()
                    .filter(|(path, _)| path.is_within(&from.location))
                    .map(|(path, node)| (path.clone(), node.clone()))
                    .collect();
                for (path, node) in moved {
                    self.nodes.remove(&path);
                    self.observed.remove(&path);
                    let suffix = &path.as_str()[from.location.as_str().len()..];
                    let target = RelPath::parse(&format!("{}{suffix}", target.as_str()))
                        .ok_or(ViewError::Invalid)?;
                    self.set_node(&target, node);
                }
                Ok(())
            }
            // Moving a directory (or a symlink) of the real root would move what the call cannot see; a
            // tool gets the error `mv` falls back from to copying.
            EntryKind::Dir | EntryKind::Symlink => Err(ViewError::CrossDevice),
            _ => Err(ViewError::NotPermitted),
        }
    }

    /// The target of a symlink.
    pub(crate) fn read_link(&mut self, base: &RelPath, path: &str) -> Result<String, ViewError> {
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, false, 0)?;
        let entry = resolution.entry.ok_or(ViewError::NoEntry)?;
        self.authorize(&parsed.name, &resolution, Need::Read)?;
        if entry.kind != EntryKind::Symlink || self.nodes.contains_key(&resolution.location) {
            return Err(ViewError::Invalid);
        }
        Ok(self.lower.link_target(&resolution.location)?)
    }

    /// Sets the times of a file (copying it up first when it is in the lower layer).
    pub(crate) fn set_times_at(
        &mut self,
        base: &RelPath,
        path: &str,
        follow: bool,
        times: std::fs::FileTimes,
    ) -> Result<(), ViewError> {
        if !self.writable {
            return Err(ViewError::ReadOnly);
        }
        let parsed = GuestPath::parse(base, path)?;
        let resolution = self.resolve(base, &parsed, follow, 0)?;
        let entry = resolution.entry.ok_or(ViewError::NoEntry)?;
        self.authorize(&parsed.name, &resolution, Need::Write)?;
        match (entry.kind, self.nodes.get(&resolution.location)) {
            (EntryKind::File, Some(Node::File(staged))) => Ok(staged.file.set_times(times)?),
            (EntryKind::File, _) => {
                let staged = self.copy_up(&resolution.location, &entry, false)?;
                Ok(staged.file.set_times(times)?)
            }
            // A directory's times are the filesystem's business once it is applied.
            (EntryKind::Dir, Some(Node::Dir)) => Ok(()),
            _ => Err(ViewError::NotPermitted),
        }
    }

    /// Resolves a guest path in the merged layers.
    fn resolve(
        &mut self,
        base: &RelPath,
        path: &GuestPath<'_>,
        follow_final: bool,
        missing_allowed: usize,
    ) -> Result<Resolution, ViewError> {
        let mut merged = Merged {
            approval: &self.approval,
            nodes: &self.nodes,
            observed: &mut self.observed,
            lower: &mut self.lower,
        };
        let options = ResolveOptions {
            follow_final: follow_final || path.trailing_slash,
            missing_allowed,
        };
        let resolution = resolve(&mut merged, base, path.components.iter().copied(), options)?;
        if is_reserved(&resolution.location) || resolution.hops.iter().any(is_reserved) {
            return Err(ViewError::NoEntry);
        }
        // A symlink may not lead out of the directory the path is taken from either.
        if !resolution.location.is_within(base) {
            return Err(ViewError::NotPermitted);
        }
        // A path that ends in `/` names a directory (POSIX), whatever the operation.
        if path.trailing_slash
            && resolution
                .entry
                .is_some_and(|entry| entry.kind != EntryKind::Dir)
        {
            return Err(ViewError::NotDirectory);
        }
        Ok(resolution)
    }

    /// What is at `location` in the merged layers.
    fn entry(&mut self, location: &RelPath) -> Result<Option<Entry>, ViewError> {
        let mut merged = Merged {
            approval: &self.approval,
            nodes: &self.nodes,
            observed: &mut self.observed,
            lower: &mut self.lower,
        };
        Ok(merged.entry(location)?)
    }

    /// Every entry of the directory at `location` in the merged layers, hidden ones included (but never
    /// the state directory).
    fn children(&mut self, location: &RelPath) -> Result<BTreeMap<String, EntryKind>, ViewError> {
        let mut children = BTreeMap::new();
        let opaque = self.nodes.contains_key(location) || beneath_node(&self.nodes, location);
        if !opaque {
            for (name, kind) in self.lower.list(location)? {
                let child = location.join(&name);
                if !is_reserved(&child) {
                    children.insert(name, kind);
                }
            }
        }
        let depth = location.depth() + 1;
        for (path, node) in self
            .nodes
            .iter()
            .filter(|(p, _)| p.depth() == depth && p.parent().as_ref() == Some(location))
        {
            let name = path.file_name().unwrap_or_default().to_owned();
            match node {
                Node::File(_) => children.insert(name, EntryKind::File),
                Node::Dir => children.insert(name, EntryKind::Dir),
                Node::Absent => children.remove(&name),
            };
        }
        Ok(children)
    }

    /// How the directory at `location` matches names, as far as lookups have shown.
    fn matching_at(&mut self, location: &RelPath) -> Result<NameMatch, ViewError> {
        let below = lower_ancestor(&self.nodes, location);
        Ok(self.lower.known_matching(&below)?)
    }

    /// Whether the call made what is at `location` itself (nothing was there before).
    fn is_own(&self, location: &RelPath) -> bool {
        matches!(self.nodes.get(location), Some(Node::File(_) | Node::Dir))
            && self.observed.get(location).copied().flatten().is_none()
    }

    /// A directory the tool may walk through: on the way to a grant, or a visible one. `matching`:
    /// how the directories on the way to `location` match names.
    fn traversable(&self, location: &RelPath, matching: NameMatch) -> bool {
        self.approval.leads_to_grant(location, matching) || self.readable(location, matching)
    }

    fn readable(&self, location: &RelPath, matching: NameMatch) -> bool {
        self.is_own(location)
            || (self.approval.within_grant(location, false, matching)
                && self
                    .approval
                    .policy_allows(location, Access::Read, matching))
    }

    fn write_allowed(&self, location: &RelPath, matching: NameMatch) -> bool {
        self.is_own(location)
            || (self.approval.within_grant(location, true, matching)
                && self
                    .approval
                    .policy_allows(location, Access::Write, matching))
    }

    /// Whether the tool may make something new at `location`: where it may write, next to a path it may
    /// write (a temporary file), or on the way to one (`mkdir -p`).
    fn create_allowed(&self, location: &RelPath, matching: NameMatch) -> bool {
        self.write_allowed(location, matching)
            || self.approval.grants.iter().any(|g| {
                g.access == Access::Write
                    && (g.location.parent() == location.parent()
                        || g.location.is_within_as(location, matching))
            })
    }

    /// Holds one use of a path to the grants and the policy.
    fn authorize(
        &self,
        name: &RelPath,
        resolution: &Resolution,
        need: Need,
    ) -> Result<(), ViewError> {
        let location = &resolution.location;
        let matching = resolution.matching;
        if matches!(need, Need::Write | Need::Create) && !self.writable {
            return Err(ViewError::ReadOnly);
        }
        let allowed = match need {
            Need::Traverse => self.traversable(location, matching),
            Need::Read => self.readable(location, matching),
            Need::Write => self.write_allowed(location, matching),
            Need::Create => self.create_allowed(location, matching),
        };
        if !allowed {
            // What the tool may see but not change is `access`; the rest does not exist for it.
            let visible = self.readable(location, matching) || self.traversable(location, matching);
            return Err(if visible && need != Need::Read {
                ViewError::Access
            } else {
                ViewError::NoEntry
            });
        }
        let access = match need {
            Need::Traverse | Need::Read => Access::Read,
            Need::Write | Need::Create => Access::Write,
        };
        let temporary = need == Need::Create && !self.write_allowed(location, matching);
        if name != location
            && !temporary
            && !self.is_own(location)
            && need != Need::Traverse
            && !self.approval.policy_allows(name, access, matching)
        {
            return Err(ViewError::NoEntry);
        }
        if !resolution
            .hops
            .iter()
            .all(|hop| self.approval.policy_allows(hop, Access::Read, matching))
        {
            return Err(ViewError::NoEntry);
        }
        Ok(())
    }

    fn check_links(&self, entry: &Entry) -> Result<(), ViewError> {
        if entry.kind == EntryKind::File && entry.nlink > 1 && !self.allow_hard_links {
            return Err(ViewError::NotPermitted);
        }
        Ok(())
    }

    /// Opens the lower file at `location`, held to `entry`, the entry the call checked: what was opened
    /// must be that object (the descriptor's `fstat`), with no other hard link, and, once no rename is
    /// under way in its directory ([`Lower::settle`]), the name must still lead to it. The second look
    /// closes the window in which a lookup still finds a file that a rename has just unlinked from the
    /// name: its link count then already excludes the link being removed, so a hard link to a file
    /// outside the root, renamed away while it was opened, would otherwise pass as a file with a single
    /// link.
    fn open_lower(
        &mut self,
        location: &RelPath,
        entry: &Entry,
    ) -> Result<(cap_std::fs::File, Entry), ViewError> {
        self.check_links(entry)?;
        let (file, opened) = self.lower.open_file(location).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidInput {
                ViewError::NotPermitted
            } else {
                ViewError::from(e)
            }
        })?;
        if !opened.is_same_object(entry) {
            return Err(ViewError::Busy);
        }
        self.check_links(&opened)?;
        self.lower.settle(&location.parent().unwrap_or_default())?;
        match self.lower.entry(location)? {
            Some(again) if again.is_same_object(entry) => self.check_links(&again)?,
            _ => return Err(ViewError::Busy),
        }
        Ok((file, opened))
    }

    /// The call's staging, begun on first use.
    fn staging(&mut self) -> Result<&mut Staging, ViewError> {
        let Some(dir) = &self.staging_dir else {
            return Err(ViewError::ReadOnly);
        };
        let quota = self.quota.clone();
        Ok(self
            .staging
            .get_or_insert_with(|| Staging::new(dir.clone(), quota)))
    }

    /// Stages a copy of the lower file at `location` (empty when it is about to be truncated).
    fn copy_up(
        &mut self,
        location: &RelPath,
        entry: &Entry,
        empty: bool,
    ) -> Result<Staged, ViewError> {
        self.check_links(entry)?;
        let staged = if empty {
            self.staging()?.new_file()?
        } else {
            let (file, opened) = self.open_lower(location, entry)?;
            if opened.identity != entry.identity {
                // It changed between the lookup and the open: the copy would not be what was looked at.
                return Err(ViewError::Busy);
            }
            self.staging()?
                .copy_of(file, opened.identity.size)?
                .ok_or(ViewError::InsufficientSpace)?
        };
        self.set_node(location, Node::File(staged.clone()));
        Ok(staged)
    }

    /// Records what the call put at `location`, keeping what the lower layer held there first.
    fn set_node(&mut self, location: &RelPath, node: Node) {
        self.observed.entry(location.clone()).or_insert(None);
        self.nodes.insert(location.clone(), node);
    }

    /// Records that the call removed what is at `location`.
    fn remove_node(&mut self, location: &RelPath) {
        if self.is_own(location) {
            self.nodes.remove(location);
        } else {
            self.set_node(location, Node::Absent);
        }
    }
}

/// The merged layers as a [`Namespace`] for the resolver: the call's own nodes over what the real root
/// holds where the approval shows it.
struct Merged<'a> {
    approval: &'a Approval,
    nodes: &'a BTreeMap<RelPath, Node>,
    observed: &'a mut HashMap<RelPath, Option<Entry>>,
    lower: &'a mut Lower,
}

impl Merged<'_> {
    /// The name of the call's own node in `dir` that answers to `name`, if one does: `name` itself, or
    /// in a directory that folds, a node that differs from it only in spelling (a live one before a
    /// removal).
    fn node_answering(
        &mut self,
        dir: &RelPath,
        name: &str,
    ) -> Result<Option<String>, ResolveError> {
        let direct = self.nodes.get(&dir.join(name));
        if matches!(direct, Some(Node::File(_) | Node::Dir)) {
            return Ok(Some(name.to_owned()));
        }
        let mut others: Vec<(&str, bool)> = children_of(self.nodes, dir)
            .filter(|(other, _)| *other != name && NameMatch::Folding.same(other, name))
            .map(|(other, node)| (other, !matches!(node, Node::Absent)))
            .collect();
        if others.is_empty() {
            return Ok(direct.map(|_| name.to_owned()));
        }
        // A live node first, then a removal.
        others.sort_by_key(|(_, live)| !live);
        let (other, live) = (others[0].0.to_owned(), others[0].1);
        let folds = folding_at(self.nodes, self.lower, dir)? == NameMatch::Folding;
        Ok(match (folds, live, direct) {
            (true, true, _) | (true, false, None) => Some(other),
            (_, _, Some(_)) => Some(name.to_owned()),
            (false, _, None) => None,
        })
    }
}

impl Namespace for Merged<'_> {
    fn entry(&mut self, location: &RelPath) -> Result<Option<Entry>, ResolveError> {
        match self.nodes.get(location) {
            Some(Node::File(staged)) => {
                let metadata = Metadata::from_file(&staged.file)
                    .map_err(|e| ResolveError::io(location, &e))?;
                return Ok(Some(Entry::from_metadata(&metadata)));
            }
            Some(Node::Dir) => return Ok(Some(virtual_dir(location))),
            Some(Node::Absent) => return Ok(None),
            None => {}
        }
        if beneath_node(self.nodes, location) {
            // Beneath something the call made or removed, only the call's own nodes exist.
            return Ok(None);
        }
        // What the view already saw stays what it saw for the rest of the call: nothing, or a directory
        // (whose handle the lower layer keeps). Files are looked at again, since their content matters.
        match self.observed.get(location) {
            Some(None) => return Ok(None),
            Some(Some(entry)) if entry.kind == EntryKind::Dir => return Ok(Some(*entry)),
            _ => {}
        }
        // What the approval does not show is never looked at: it is absent, like a missing name.
        let matching = self.matching(&location.parent().unwrap_or_default())?;
        let entry = if self.approval.shows(location, matching) {
            Namespace::entry(self.lower, location)?
        } else {
            None
        };
        self.observed.entry(location.clone()).or_insert(entry);
        Ok(entry)
    }

    fn lookup(
        &mut self,
        dir: &RelPath,
        name: &str,
    ) -> Result<Option<(String, Entry)>, ResolveError> {
        if let Some(own) = self.node_answering(dir, name)? {
            let entry = self.entry(&dir.join(&own))?;
            return Ok(entry.map(|entry| (own, entry)));
        }
        let spelled = dir.join(name);
        if beneath_node(self.nodes, &spelled) {
            return Ok(None);
        }
        match self.observed.get(&spelled) {
            Some(None) => return Ok(None),
            Some(Some(entry)) if entry.kind == EntryKind::Dir => {
                return Ok(Some((name.to_owned(), *entry)));
            }
            _ => {}
        }
        // What the approval does not show is never looked at, in any spelling.
        let matching = self.matching(dir)?;
        if !self.approval.shows(&spelled, matching) {
            self.observed.entry(spelled).or_insert(None);
            return Ok(None);
        }
        let Some((stored, entry)) = self
            .lower
            .lookup(dir, name)
            .map_err(|e| ResolveError::io(&spelled, &e))?
        else {
            self.observed.entry(spelled).or_insert(None);
            return Ok(None);
        };
        if stored == name {
            self.observed.entry(spelled).or_insert(Some(entry));
            return Ok(Some((stored, entry)));
        }
        // Another spelling of what the directory stores: the stored location answers, as the view
        // knows it (a node of the call's, what it saw there) and as the approval shows it.
        let location = dir.join(&stored);
        if self.nodes.contains_key(&location) || self.observed.contains_key(&location) {
            let entry = self.entry(&location)?;
            return Ok(entry.map(|entry| (stored, entry)));
        }
        let matching = self.matching(dir)?;
        if !self.approval.shows(&location, matching) {
            return Ok(None);
        }
        self.observed.insert(location, Some(entry));
        Ok(Some((stored, entry)))
    }

    fn matching(&mut self, dir: &RelPath) -> Result<NameMatch, ResolveError> {
        let below = lower_ancestor(self.nodes, dir);
        self.lower
            .known_matching(&below)
            .map_err(|e| ResolveError::io(&below, &e))
    }

    fn link_target(&mut self, location: &RelPath) -> Result<String, ResolveError> {
        Namespace::link_target(self.lower, location)
    }
}

/// Whether something the call made or removed holds `location` (then the lower layer has nothing to
/// say at it).
fn beneath_node(nodes: &BTreeMap<RelPath, Node>, location: &RelPath) -> bool {
    let mut ancestor = location.parent();
    while let Some(path) = ancestor {
        if nodes.contains_key(&path) {
            return true;
        }
        ancestor = path.parent();
    }
    false
}

/// The call's own nodes directly in `dir`, by name.
fn children_of<'n>(
    nodes: &'n BTreeMap<RelPath, Node>,
    dir: &RelPath,
) -> impl Iterator<Item = (&'n str, &'n Node)> {
    let depth = dir.depth() + 1;
    let dir = dir.clone();
    nodes
        .iter()
        .filter(move |(path, _)| path.depth() == depth && path.parent().as_ref() == Some(&dir))
        .filter_map(|(path, node)| Some((path.file_name()?, node)))
}

/// The nearest directory at or above `dir` that the lower layer has (not one the call made, nor one
/// beneath something it made or removed): what a directory of the call's matches names like.
fn lower_ancestor(nodes: &BTreeMap<RelPath, Node>, dir: &RelPath) -> RelPath {
    let mut below = dir.clone();
    let mut ancestor = Some(dir.clone());
    while let Some(path) = ancestor {
        if nodes.contains_key(&path) {
            below = path.parent().unwrap_or_default();
        }
        ancestor = path.parent();
    }
    below
}

/// How `dir` matches names, learned from its entries (or its nearest lower ancestor's) if no lookup
/// showed it yet: a name the call makes there must answer to every spelling the directory would take
/// for it.
fn folding_at(
    nodes: &BTreeMap<RelPath, Node>,
    lower: &mut Lower,
    dir: &RelPath,
) -> Result<NameMatch, ResolveError> {
    let below = lower_ancestor(nodes, dir);
    lower
        .matching(&below)
        .map_err(|e| ResolveError::io(&below, &e))
}

/// The location `name` (a path as the tool spelled it) gives an entry found at `location` when its last
/// component is spelled otherwise than the directory stores it: a rename to it changes the spelling.
fn respelling(location: &RelPath, name: &RelPath) -> Option<RelPath> {
    let spelled = name.file_name()?;
    (Some(spelled) != location.file_name())
        .then(|| location.parent().unwrap_or_default().join(spelled))
}

/// The entry of a directory that exists only in the view.
fn virtual_dir(location: &RelPath) -> Entry {
    Entry {
        kind: EntryKind::Dir,
        identity: Identity {
            dev: 0,
            ino: fxhash(location.as_str()),
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        },
        nlink: 1,
        atime_ns: 0,
    }
}

/// A stable 64-bit hash of a string (FNV-1a), for identities of directories that exist only in a view.
fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A path as a guest passed it: its components (`.` and `..` kept for the resolver), the name it
/// lexically stands for, and whether it ended in `/`.
struct GuestPath<'a> {
    components: Vec<&'a str>,
    name: RelPath,
    trailing_slash: bool,
}

impl<'a> GuestPath<'a> {
    fn parse(base: &RelPath, path: &'a str) -> Result<GuestPath<'a>, ViewError> {
        if path.is_empty() {
            return Err(ViewError::NoEntry);
        }
        if path.starts_with('/') {
            return Err(ViewError::NotPermitted);
        }
        if path.contains('\0') {
            return Err(ViewError::Invalid);
        }
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        if components.iter().any(|c| c.len() > 255) {
            return Err(ViewError::NameTooLong);
        }
        let mut name: Vec<&str> = base.components().collect();
        // As WASI's descriptors are capabilities: `..` never climbs above the directory the path is
        // taken from (the resolver holds symlinks to the same).
        let floor = name.len();
        for component in &components {
            match *component {
                "." => {}
                ".." => {
                    if name.len() <= floor {
                        return Err(ViewError::NotPermitted);
                    }
                    name.pop();
                }
                other => name.push(other),
            }
        }
        Ok(GuestPath {
            components,
            name: RelPath::from_components(name),
            trailing_slash: path.ends_with('/') && path.len() > 1,
        })
    }
}
