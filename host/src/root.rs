//! The allowed root: the one directory a call may touch, held as a capability.
//!
//! A [`Root`] is opened once, at the edge, with the only ambient-authority call in the library. Everything
//! after that (the gate's path checks, every call's view, the journal) goes through the open handle, so
//! renaming or replacing the directory's path afterwards does not redirect a call somewhere else.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cap_fs_ext::DirExt;
use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// The directory beneath the root where turngate keeps its state (the journal of applied calls, their
/// pre-images and the staging area of running calls). No tool ever sees it: the gate refuses paths into
/// it and every view hides it.
pub const STATE_DIR: &str = ".turngate";

/// A directory that tool calls are confined to.
#[derive(Debug)]
pub struct Root {
    dir: Arc<Dir>,
    /// A descriptor of the root opened for reading its entries (the handle above is `O_PATH`), opened
    /// on first use and shared by every call: see [`crate::lower::Lower::settle`].
    entries: Arc<OnceLock<rustix::fd::OwnedFd>>,
    path: PathBuf,
    /// The state directory's staging directory, opened (and made when missing) on the first call that
    /// may write.
    staging: Mutex<Option<Arc<Dir>>>,
    /// What lookups have shown of how each directory beneath the root matches names, by the
    /// directory's device and inode: learned once for every call (see [`crate::lower`]).
    folds: Arc<FoldsSeen>,
    /// The device and inode of the directory opened as the root.
    id: (u64, u64),
}

/// What every [`crate::lower::Lower`] of a root shares ([`Root::handles`]).
pub(crate) struct RootHandles {
    pub(crate) dir: Arc<Dir>,
    pub(crate) entries: Arc<OnceLock<rustix::fd::OwnedFd>>,
    pub(crate) folds: Arc<FoldsSeen>,
    pub(crate) id: (u64, u64),
}

/// How the directories beneath one root fold names, as lookups showed it, by device and inode.
pub(crate) type FoldsSeen = Mutex<HashMap<(u64, u64), Folds>>;

/// What lookups have shown of how one directory matches names: whether it folds case, and whether it
/// folds Unicode normalization forms (`None`: no lookup has shown it yet). A directory's folding
/// cannot change while it holds entries (ext4 sets casefold only on an empty directory; elsewhere it is
/// the volume's), so what was seen holds for the life of the root handle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Folds {
    pub(crate) case: Option<bool>,
    pub(crate) forms: Option<bool>,
    /// Whether the directory's first entries were read to learn the rest (once is enough).
    pub(crate) scanned: bool,
}

impl Root {
    /// Opens `path` as the allowed root. The path is canonicalized for display and audit records; access
    /// goes through the opened handle.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Root> {
        let path = std::fs::canonicalize(path.as_ref())?;
        let dir = Dir::open_ambient_dir(&path, ambient_authority())?;
        Root::with(dir, path)
    }

    /// Opens the directory `name` directly inside `parent` (without following a symlink) as the root:
    /// a worker's root, named by a job, beneath its `--roots` directory. `name` must be a plain name
    /// ([`is_plain_name`]); `parent_path` is where `parent` is, for messages.
    pub fn open_in(parent: &Dir, parent_path: &Path, name: &str) -> io::Result<Root> {
        if !is_plain_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a plain directory name"),
            ));
        }
        let dir = parent.open_dir_nofollow(name)?;
        Root::with(dir, parent_path.join(name))
    }

    fn with(dir: Dir, path: PathBuf) -> io::Result<Root> {
        use cap_std::fs::MetadataExt as _;
        let opened = dir.dir_metadata()?;
        Ok(Root {
            dir: Arc::new(dir),
            entries: Arc::default(),
            path,
            staging: Mutex::new(None),
            folds: Arc::default(),
            id: (opened.dev(), opened.ino()),
        })
    }

    /// The canonical path the root was opened at (for messages; not used for access).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory opened as the root is the one at `path` (symlinks followed): the same
    /// device and inode as the open handle, whatever either is named. False when `path` cannot be
    /// looked up.
    pub fn is_at(&self, path: &Path) -> bool {
        use cap_std::fs::MetadataExt as _;
        use std::os::unix::fs::MetadataExt as _;
        match (self.dir.dir_metadata(), std::fs::metadata(path)) {
            (Ok(opened), Ok(named)) => opened.dev() == named.dev() && opened.ino() == named.ino(),
            _ => false,
        }
    }

    /// The capability handle every host-side access beneath the root goes through.
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The handle again, shared, with the root's descriptor for reading its entries (opened on first
    /// use), what is known of how its directories fold names and its device and inode: what
    /// [`crate::lower::Lower`] reads the root through.
    pub(crate) fn handles(&self) -> RootHandles {
        RootHandles {
            dir: self.dir.clone(),
            entries: self.entries.clone(),
            folds: self.folds.clone(),
            id: self.id,
        }
    }

    /// The directory `name` inside the state directory, both created when missing. Refuses a state
    /// directory (or subdirectory) that is a symlink, so nobody can redirect turngate's own writes.
    pub(crate) fn state_subdir(&self, name: &str) -> io::Result<Dir> {
        let state = open_or_create_dir(&self.dir, STATE_DIR, STATE_DIR)?;
        open_or_create_dir(&state, name, &format!("{STATE_DIR}/{name}"))
    }

    /// The staging directory (`.turngate/staging/`), opened on first use and made when missing. Calls
    /// stage their files in it under names that start with this process's ID (see `view::staging`);
    /// the journal's recovery removes the files of processes that are gone.
    pub(crate) fn staging_dir(&self, name: &str) -> io::Result<Arc<Dir>> {
        let mut staging = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = staging.as_ref() {
            return Ok(dir.clone());
        }
        let dir = Arc::new(self.state_subdir(name)?);
        *staging = Some(dir.clone());
        Ok(dir)
    }

    /// The state directory, if it exists (without creating it).
    pub(crate) fn existing_state_dir(&self) -> io::Result<Option<Dir>> {
        match self.dir.open_dir_nofollow(STATE_DIR) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Whether `name` names an entry directly inside a directory: not empty, not `.` or `..`, at most 255
/// bytes, no `/`, no control characters (NUL included).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name.chars().any(|c| c == '/' || c.is_control())
}

/// Opens the directory `name` in `parent` without following a symlink, creating it when missing. What
/// else stands there is refused with a message naming it (`shown`) and what it is.
fn open_or_create_dir(parent: &Dir, name: &str, shown: &str) -> io::Result<Dir> {
    match parent.create_dir(name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    parent.open_dir_nofollow(name).map_err(|error| {
        let Ok(found) = parent.symlink_metadata(name) else {
            return error;
        };
        let kind = crate::resolve::EntryKind::from_file_type(found.file_type());
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{shown}` is {}, which turngate did not make; it was not followed: move it out of the way to go on",
                kind.describe()
            ),
        )
    })
}
