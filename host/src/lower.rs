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
//!
//! A name is looked up as the file system matches it ([`Lower::lookup`]), and what comes back is the name
//! the directory stores: on a directory that folds case or Unicode forms, `.ENV` finds `.env`, and every
//! location this layer answers is spelled as stored, so what is checked later (the policy, the state
//! directory, the view's nodes, the journal) is the file, not the spelling. Whether a directory folds
//! is learned by the lookups themselves: the first name looked up there that has another spelling (its
//! case flipped, its other normalization form) is looked up in that spelling too, and finding the same
//! object means the directory folds that way ([`crate::root::Folds`], kept per root by the directory's
//! device and inode). On a folding directory the stored name is the entry that links that object
//! (`getdents`' inode numbers, read once per call and directory). A directory no lookup has shown to
//! fold is taken as exact: what is kept of it then is the spelling looked up, which is what
//! the file system stores as far as any lookup could tell.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, OnceLock};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, MetadataExt, OpenOptions, OpenOptionsExt};
use rustix::fd::OwnedFd;

use crate::names::{self, NameMatch};
use crate::resolve::{Entry, EntryKind, Namespace, RelPath, ResolveError};
use crate::root::{Folds, FoldsSeen, Root};

/// Most entries of a directory read to find a name to learn its folding from.
const PROBE_ENTRIES: usize = 64;

/// The real root, with a cache of the directory handles opened beneath it.
pub(crate) struct Lower {
    root: Arc<Dir>,
    /// The root's own descriptor for reading its entries, shared by every `Lower` of the root.
    root_entries: Arc<OnceLock<OwnedFd>>,
    dirs: HashMap<RelPath, Arc<Dir>>,
    /// The device and inode `lstat` reported for each directory looked at before its handle was opened:
    /// the handle opened later must be that directory.
    looked_at: HashMap<RelPath, (u64, u64)>,
    /// How the root's directories fold names, shared by every `Lower` of the root.
    folds: Arc<FoldsSeen>,
    /// The root's device and inode.
    root_id: (u64, u64),
    /// The entries (name, inode) of each folding directory a stored name was looked for in.
    listings: HashMap<RelPath, Vec<(String, u64)>>,
}

impl Lower {
    /// The lower layer of `root`, sharing the root's handle, its descriptor for reading entries and
    /// what is known of how its directories fold names.
    pub(crate) fn of(root: &Root) -> Lower {
        let handles = root.handles();
        Lower {
            root: handles.dir,
            root_entries: handles.entries,
            dirs: HashMap::new(),
            looked_at: HashMap::new(),
            folds: handles.folds,
            root_id: handles.id,
            listings: HashMap::new(),
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
                return Err(replaced(location));
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
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `lstat` of `name` in the directory at `dir`, as the file system matches names there, with the
    /// name that directory stores for it (see the module docs); `None` when nothing answers to `name`.
    pub(crate) fn lookup(
        &mut self,
        dir: &RelPath,
        name: &str,
    ) -> io::Result<Option<(String, Entry)>> {
        let Some(entry) = self.entry(&dir.join(name))? else {
            return Ok(None);
        };
        let stored = self.stored_name(dir, name, &entry)?;
        if stored == name {
            return Ok(Some((stored, entry)));
        }
        // Known from here on by its stored name: a directory looked at is held to what was seen.
        match self.entry(&dir.join(&stored))? {
            Some(again) if again.is_same_object(&entry) => Ok(Some((stored, again))),
            _ => Err(replaced(&dir.join(&stored))),
        }
    }

    /// What the directory stores under exactly the name `location` ends in: `None` when nothing answers
    /// to that name, and when what answers is stored under another spelling (on a directory that folds
    /// names). The journal, which records names as stored, looks at its paths this way.
    pub(crate) fn stored_entry(&mut self, location: &RelPath) -> io::Result<Option<Entry>> {
        let (Some(parent), Some(name)) = (location.parent(), location.file_name()) else {
            return self.entry(location);
        };
        Ok(self
            .lookup(&parent, name)?
            .filter(|(stored, _)| stored == name)
            .map(|(_, entry)| entry))
    }

    /// How the directory at `dir` matches names, as far as lookups have shown (exact until one shows
    /// it folds).
    pub(crate) fn known_matching(&mut self, dir: &RelPath) -> io::Result<NameMatch> {
        let id = self.identity_of(dir)?;
        Ok(matching_of(self.learned(id)))
    }

    /// How the directory at `dir` matches names, learning it from its first entries when no lookup has
    /// shown it yet (for a name about to be made there).
    pub(crate) fn matching(&mut self, dir: &RelPath) -> io::Result<NameMatch> {
        let id = self.identity_of(dir)?;
        let mut folds = self.learned(id);
        if !folds.scanned && (folds.case.is_none() || folds.forms.is_none()) {
            folds.scanned = true;
            let handle = self.dir(dir)?;
            for entry in reader(&handle)?.take(PROBE_ENTRIES) {
                let entry = entry?;
                let Ok(name) = entry.file_name().to_str() else {
                    continue;
                };
                if name == "." || name == ".." {
                    continue;
                }
                let Ok(metadata) = handle.symlink_metadata(name) else {
                    continue;
                };
                learn(&handle, name, &Entry::from_metadata(&metadata), &mut folds);
                if folds.case.is_some() && folds.forms.is_some() {
                    break;
                }
            }
            self.remember(id, folds);
        }
        Ok(matching_of(folds))
    }

    /// The name the directory at `dir` stores for `entry`, found there as `name`.
    fn stored_name(&mut self, dir: &RelPath, name: &str, entry: &Entry) -> io::Result<String> {
        let (case, forms) = (names::has_case(name), names::has_forms(name));
        if !case && !forms {
            // No other spelling could have found it.
            return Ok(name.to_owned());
        }
        let id = self.identity_of(dir)?;
        let mut folds = self.learned(id);
        if (case && folds.case.is_none()) || (forms && folds.forms.is_none()) {
            let handle = self.dir(dir)?;
            learn(&handle, name, entry, &mut folds);
            self.remember(id, folds);
        }
        let folded = (case && folds.case == Some(true)) || (forms && folds.forms == Some(true));
        if !folded {
            return Ok(name.to_owned());
        }
        for fresh in [false, true] {
            if fresh || !self.listings.contains_key(dir) {
                let listing = self.list_inodes(dir)?;
                self.listings.insert(dir.clone(), listing);
            }
            if let Some(stored) = pick_stored(&self.listings[dir], name, entry.identity.ino) {
                return Ok(stored);
            }
        }
        // Inode numbers in the listing that are not the files' (overlayfs, some FUSE file systems):
        // look at each entry that folds to the name.
        let handle = self.dir(dir)?;
        let folded = names::fold(name);
        for (candidate, _) in &self.listings[dir] {
            if names::fold(candidate) == folded
                && let Ok(metadata) = handle.symlink_metadata(candidate)
                && Entry::from_metadata(&metadata).is_same_object(entry)
            {
                return Ok(candidate.clone());
            }
        }
        Err(io::Error::other(format!(
            "cannot tell which name the file system stores for `{}`",
            dir.join(name)
        )))
    }

    /// The names and inode numbers of the entries of the directory at `dir`.
    fn list_inodes(&mut self, dir: &RelPath) -> io::Result<Vec<(String, u64)>> {
        let handle = self.dir(dir)?;
        let mut listing = Vec::new();
        for entry in reader(&handle)? {
            let entry = entry?;
            if let Ok(name) = entry.file_name().to_str()
                && name != "."
                && name != ".."
            {
                listing.push((name.to_owned(), entry.ino()));
            }
        }
        Ok(listing)
    }

    /// The device and inode of the directory at `dir`: what its folding is kept by.
    fn identity_of(&mut self, dir: &RelPath) -> io::Result<(u64, u64)> {
        if dir.is_root() {
            return Ok(self.root_id);
        }
        if let Some(&id) = self.looked_at.get(dir) {
            return Ok(id);
        }
        let metadata = self.dir(dir)?.dir_metadata()?;
        let id = (metadata.dev(), metadata.ino());
        self.looked_at.insert(dir.clone(), id);
        Ok(id)
    }

    fn learned(&self, id: (u64, u64)) -> Folds {
        let seen = self.folds.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&id).copied().unwrap_or_default()
    }

    fn remember(&self, id: (u64, u64), folds: Folds) {
        let mut seen = self.folds.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(id, folds);
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
            return crate::platform::wait_for_directory_renames(entries);
        }
        let dir = self.dir(location)?;
        crate::platform::wait_for_directory_renames(readable(&dir)?)
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

/// Learns from `name` (found in `dir` as `entry`) what is not yet known of how `dir` folds: the same
/// object found under the name's other spelling means the directory folds that way; nothing there, or
/// another object, means it does not. A lookup that fails otherwise (the other spelling too long, say)
/// teaches nothing, nor does a file with other hard links found again (the other spelling may be one).
fn learn(dir: &Dir, name: &str, entry: &Entry, folds: &mut Folds) {
    let probe = |variant: Option<String>, known: &mut Option<bool>| {
        let Some(variant) = variant.filter(|_| known.is_none()) else {
            return;
        };
        *known = match dir.symlink_metadata(&variant) {
            Ok(metadata) => {
                let same = Entry::from_metadata(&metadata).is_same_object(entry);
                if same && entry.kind != EntryKind::Dir && entry.nlink > 1 {
                    None
                } else {
                    Some(same)
                }
            }
            Err(e) if absent(&e) => Some(false),
            Err(_) => None,
        };
    };
    probe(names::case_variant(name), &mut folds.case);
    probe(names::form_variant(name), &mut folds.forms);
}

fn matching_of(folds: Folds) -> NameMatch {
    if folds.case == Some(true) || folds.forms == Some(true) {
        NameMatch::Folding
    } else {
        NameMatch::Exact
    }
}

/// The entry of `listing` that links inode `ino`: `name` itself if it does, else the one that folds
/// to it, else the only one (a file system may fold more than [`names::fold`] does: ext4's `ß` and
/// `ss`).
fn pick_stored(listing: &[(String, u64)], name: &str, ino: u64) -> Option<String> {
    let links: Vec<&str> = listing
        .iter()
        .filter(|(_, entry)| *entry == ino)
        .map(|(stored, _)| stored.as_str())
        .collect();
    if links.contains(&name) {
        return Some(name.to_owned());
    }
    let folded = names::fold(name);
    let stored = match links.iter().find(|stored| names::fold(stored) == folded) {
        Some(stored) => stored,
        None if links.len() == 1 => &links[0],
        None => return None,
    };
    Some((*stored).to_owned())
}

/// Whether a lookup failed because nothing is there (or a component is not a directory).
fn absent(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn replaced(location: &RelPath) -> io::Error {
    io::Error::new(
        io::ErrorKind::ResourceBusy,
        format!("`{location}` was replaced while it was in use"),
    )
}

/// A reader of the entries of `dir` (`getdents`), through a descriptor of its own opened for reading.
fn reader(dir: &Dir) -> io::Result<rustix::fs::Dir> {
    Ok(rustix::fs::Dir::new(readable(dir)?)?)
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

    fn lookup(
        &mut self,
        dir: &RelPath,
        name: &str,
    ) -> Result<Option<(String, Entry)>, ResolveError> {
        Lower::lookup(self, dir, name).map_err(|e| ResolveError::io(&dir.join(name), &e))
    }

    fn matching(&mut self, dir: &RelPath) -> Result<NameMatch, ResolveError> {
        self.known_matching(dir)
            .map_err(|e| ResolveError::io(dir, &e))
    }

    fn link_target(&mut self, location: &RelPath) -> Result<String, ResolveError> {
        Lower::link_target(self, location).map_err(|e| ResolveError::io(location, &e))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt as _;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking_even_when_asked_for_as_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let pipe =
            std::ffi::CString::new(dir.path().join("pipe").into_os_string().into_vec()).unwrap();
        // SAFETY: `pipe` is a NUL-terminated path that lives across the call (`mkfifo`, which every
        // Unix has; a FIFO by `mknodat` is Linux's).
        assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o644) }, 0);
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
