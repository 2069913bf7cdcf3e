//! The real root, read through directory handles opened without following symlinks: the lower layer of
//! every call's view, and what the gate's scope check and the journal's checks walk.
//!
//! Every operation takes a location that the resolver already walked, opens (or reuses) the handle of
//! its parent directory one component at a time with `O_NOFOLLOW`, and acts on a single name inside it.
//! So a symlink swapped into the middle of a path after it was resolved makes the operation fail instead
//! of redirecting it, and nothing is ever opened beyond what the location names. What is opened is held
//! to what was looked at: a directory handle must be the directory `lstat` reported at that location
//! (and, once open, the handle is what the location means), and a file is returned with its own `fstat`
//! for the caller to compare. Files are opened read-only, with `O_NONBLOCK` (a FIFO swapped in cannot
//! block the open), and checked to be regular files before they are used. This layer never writes.

use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, MetadataExt, OpenOptions, OpenOptionsExt};
use rustix::fd::{AsFd, OwnedFd};

use crate::resolve::{Entry, EntryKind, Namespace, RelPath, ResolveError};
use crate::root::Root;

/// The real root, with a cache of the directory handles opened beneath it.
pub(crate) struct Lower {
    root: Arc<Dir>,
    /// The root's own descriptor for reading its entries, shared by every `Lower` of the root.
    root_entries: Arc<OnceLock<OwnedFd>>,
    dirs: HashMap<RelPath, Arc<Dir>>,
    /// The device and inode `lstat` reported for each directory looked at before its handle was opened:
    /// the handle opened later must be that directory.
    looked_at: HashMap<RelPath, (u64, u64)>,
}

impl Lower {
    /// The lower layer of `root`, sharing the root's handle and its descriptor for reading entries.
    pub(crate) fn of(root: &Root) -> Lower {
        let (root, root_entries) = root.handles();
        Lower {
            root,
            root_entries,
            dirs: HashMap::new(),
            looked_at: HashMap::new(),
        }
    }

    /// The handle of the directory at `location`, opened component by component without following links.
    pub(crate) fn dir(&mut self, location: &RelPath) -> io::Result<Arc<Dir>> {
        if location.is_root() {
            return Ok(self.root.clone());
        }
        if let Some(dir) = self.dirs.get(location) {
            return Ok(dir.clone());
        }
        let parent = self.dir(&location.parent().unwrap_or_default())?;
        let name = location.file_name().unwrap_or(".");
        let dir = parent.open_dir_nofollow(name)?;
        if let Some(&looked_at) = self.looked_at.get(location) {
            let opened = dir.dir_metadata()?;
            if (opened.dev(), opened.ino()) != looked_at {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!("`{location}` was replaced while it was in use"),
                ));
            }
        }
        let dir = Arc::new(dir);
        self.dirs.insert(location.clone(), dir.clone());
        Ok(dir)
    }

    /// `lstat` of `location`; `None` when nothing is there (or a component on the way is not a directory).
    /// A directory whose handle is open is described by the handle's own `fstat`.
    pub(crate) fn entry(&mut self, location: &RelPath) -> io::Result<Option<Entry>> {
        let result = match location.parent() {
            None => self.root.dir_metadata(),
            Some(_) if self.dirs.contains_key(location) => self.dirs[location].dir_metadata(),
            Some(parent) => match self.dir(&parent) {
                Ok(dir) => dir.symlink_metadata(location.file_name().unwrap_or(".")),
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(metadata) => {
                let entry = Entry::from_metadata(&metadata);
                if entry.kind == EntryKind::Dir && !location.is_root() {
                    self.looked_at
                        .entry(location.clone())
                        .or_insert((entry.identity.dev, entry.identity.ino));
                }
                Ok(Some(entry))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The raw target of the symlink at `location`.
    pub(crate) fn link_target(&mut self, location: &RelPath) -> io::Result<String> {
        let parent = self.dir(&location.parent().unwrap_or_default())?;
        let target = parent.read_link_contents(location.file_name().unwrap_or("."))?;
        target
            .into_os_string()
            .into_string()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "symlink target is not UTF-8"))
    }

    /// Opens the regular file at `location` for reading, answering the opened file's own `fstat`, which
    /// the caller holds to what it checked. Refuses anything else without blocking.
    pub(crate) fn open_file(&mut self, location: &RelPath) -> io::Result<(File, Entry)> {
        crate::test_hooks::block_open(location.as_str());
        let parent = self.dir(&location.parent().unwrap_or_default())?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .follow(FollowSymlinks::No)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        let file = parent.open_with(location.file_name().unwrap_or("."), &options)?;
        let entry = Entry::from_metadata(&file.metadata()?);
        if entry.kind != EntryKind::File {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{location} is {}", entry.kind.describe()),
            ));
        }
        Ok((file, entry))
    }

    /// Waits until no rename is under way in the directory at `location`. A rename holds the locks of
    /// both directories until the name cache shows its result, and reading a directory takes the
    /// directory's lock: so after this returns, a lookup in that directory no longer finds an entry a
    /// rename that had begun has replaced. (Until then a lookup can still find a file whose link from
    /// that name is already gone, and whose link count already says so.)
    pub(crate) fn settle(&mut self, location: &RelPath) -> io::Result<()> {
        if location.is_root() {
            // The root's shared descriptor: each read moves it on by at most one buffer of entries, so
            // it soon stays at their end, where a read takes the lock and returns at once.
            let entries = match self.root_entries.get() {
                Some(entries) => entries,
                None => {
                    let opened = readable(&self.root)?;
                    self.root_entries.get_or_init(|| opened)
                }
            };
            return read_one_entry(entries);
        }
        let dir = self.dir(location)?;
        read_one_entry(readable(&dir)?)
    }

    /// The names and kinds of the entries of the directory at `location` (not following symlinks), as
    /// `getdents` reports them (a name that is not UTF-8 cannot be shown to a WASI tool and is left out).
    pub(crate) fn list(&mut self, location: &RelPath) -> io::Result<Vec<(String, EntryKind)>> {
        use rustix::fs::{AtFlags, FileType};
        let dir = self.dir(location)?;
        let mut entries = Vec::new();
        for entry in reader(&dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let file_type = match entry.file_type() {
                FileType::Unknown => rustix::fs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|stat| FileType::from_raw_mode(stat.st_mode))
                    .unwrap_or(FileType::Unknown),
                known => known,
            };
            let kind = match file_type {
                FileType::RegularFile => EntryKind::File,
                FileType::Directory => EntryKind::Dir,
                FileType::Symlink => EntryKind::Symlink,
                FileType::Fifo => EntryKind::Fifo,
                FileType::Socket => EntryKind::Socket,
                FileType::CharacterDevice => EntryKind::CharDevice,
                FileType::BlockDevice => EntryKind::BlockDevice,
                FileType::Unknown => EntryKind::Unknown,
            };
            entries.push((name.to_owned(), kind));
        }
        Ok(entries)
    }
}

/// A reader of the entries of `dir` (`getdents`), through a descriptor of its own opened for reading.
fn reader(dir: &Dir) -> io::Result<rustix::fs::Dir> {
    Ok(rustix::fs::Dir::new(readable(dir)?)?)
}

/// One `getdents` of `directory` into a buffer on the stack (room for any one entry): it takes the
/// directory's lock; what it reads is not needed.
fn read_one_entry(directory: impl AsFd) -> io::Result<()> {
    let mut buffer = [MaybeUninit::<u8>::uninit(); 512];
    if let Some(entry) = rustix::fs::RawDir::new(directory, &mut buffer).next() {
        entry?;
    }
    Ok(())
}

/// A descriptor of `dir` of its own, opened for reading its entries (`dir`'s own handle is `O_PATH`).
fn readable(dir: &Dir) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

impl Namespace for Lower {
    fn entry(&mut self, location: &RelPath) -> Result<Option<Entry>, ResolveError> {
        Lower::entry(self, location).map_err(|e| ResolveError::io(location, &e))
    }

    fn link_target(&mut self, location: &RelPath) -> Result<String, ResolveError> {
        Lower::link_target(self, location).map_err(|e| ResolveError::io(location, &e))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking_even_when_asked_for_as_a_file() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let root = Root::open(dir.path()).unwrap();
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lower = Lower::of(&root);
            let _ = send.send(
                lower
                    .open_file(&RelPath::parse("pipe").unwrap())
                    .map(|_| ()),
            );
        });
        let opened = receive
            .recv_timeout(Duration::from_secs(10))
            .expect("opening a FIFO must not block");
        assert_eq!(opened.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
