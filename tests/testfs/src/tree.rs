//! The file tree, and the metadata operations that change it.
//!
//! One [`Tree`] type serves both states of the file system: the live tree processes see, and the
//! committed tree that survives a power loss. Every metadata change is a [`MetaOp`] applied by
//! [`Tree::apply`], which validates it first and changes nothing when it fails; the live tree applies
//! an operation when the request arrives, and the committed tree replays the same operation when a
//! commit (or a power loss that keeps it) reaches it. Because both trees run the same code on the same
//! sequence of operations, a replay reproduces exactly what the live tree did.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{Errno, FileType};
use unicode_normalization::UnicodeNormalization;

/// The root directory's inode number (FUSE's `FUSE_ROOT_ID`).
pub(crate) const ROOT: u64 = 1;
/// The readdir cookie of the first real entry: cookies 1 and 2 are `.` and `..`.
pub(crate) const FIRST_SLOT: u64 = 3;
/// The longest name a directory accepts, in bytes (`NAME_MAX`).
pub(crate) const NAME_MAX: usize = 255;
/// How deep [`Tree::path_of`] walks before it gives up (a guard, not a limit anything reaches).
const MAX_DEPTH: usize = 4096;

/// The key a directory looks a name up by.
///
/// Without folding the key is the name's bytes. With folding it is NFC(lowercase(NFD(name))), so the
/// case and the Unicode normalization form of a name do not matter; a name that is not UTF-8 keeps its
/// bytes as its key.
pub(crate) fn name_key(name: &OsStr, folding: bool) -> Vec<u8> {
    if folding && let Some(name) = name.to_str() {
        let lower = name.nfd().collect::<String>().to_lowercase();
        return lower.nfc().collect::<String>().into_bytes();
    }
    name.as_bytes().to_vec()
}

/// A directory entry: the name as it was spelled when the entry was made, and the inode it names.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: OsString,
    pub(crate) ino: u64,
}

/// A directory's entries, looked up by key and listed in the order they were made.
///
/// Each entry has a slot number that never changes while the entry exists and is never reused, so
/// readdir can use it as its cookie: a listing resumed after other entries came or went neither skips
/// nor repeats an entry that stayed.
#[derive(Clone, Debug)]
pub(crate) struct Dir {
    by_key: HashMap<Vec<u8>, u64>,
    entries: BTreeMap<u64, Entry>,
    next_slot: u64,
}

impl Dir {
    pub(crate) fn new() -> Dir {
        Dir {
            by_key: HashMap::new(),
            entries: BTreeMap::new(),
            next_slot: FIRST_SLOT,
        }
    }

    /// The entry whose name has this key.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(self.by_key.get(key)?)
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.entries.get_mut(self.by_key.get(key)?)
    }

    fn insert(&mut self, key: Vec<u8>, name: OsString, ino: u64) {
        let slot = self.next_slot;
        self.next_slot += 1;
        self.by_key.insert(key, slot);
        self.entries.insert(slot, Entry { name, ino });
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let slot = self.by_key.remove(key)?;
        self.entries.remove(&slot)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries whose cookie is greater than `cookie`, in cookie order.
    pub(crate) fn after(&self, cookie: u64) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries
            .range(cookie.saturating_add(1)..)
            .map(|(slot, entry)| (*slot, entry))
    }
}

/// What a node holds besides its attributes.
#[derive(Clone, Debug)]
pub(crate) enum Content {
    /// A regular file's bytes, shared copy-on-write between the live and the committed tree.
    File(Arc<Vec<u8>>),
    Dir(Dir),
    Symlink(OsString),
    /// A FIFO, a socket or a device node: nothing but its type (and `rdev`).
    Special(FileType),
}

/// An inode.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) content: Content,
    /// The permission bits, with set-user-ID, set-group-ID and sticky (`mode & 0o7777`).
    pub(crate) perm: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) rdev: u32,
    /// Hard links for a non-directory; 2 plus the subdirectories for a directory; 0 once removed.
    pub(crate) nlink: u32,
    pub(crate) atime: SystemTime,
    pub(crate) mtime: SystemTime,
    pub(crate) ctime: SystemTime,
    pub(crate) crtime: SystemTime,
    /// The entries naming this node, as (parent directory, stored name): one for a directory (none
    /// for the root), one per hard link otherwise. It is what turns an inode back into a path.
    pub(crate) links: Vec<(u64, OsString)>,
}

impl Node {
    /// A node not yet linked anywhere, all its times `now`.
    pub(crate) fn new(
        content: Content,
        perm: u16,
        uid: u32,
        gid: u32,
        rdev: u32,
        now: SystemTime,
    ) -> Node {
        Node {
            content,
            perm: perm & 0o7777,
            uid,
            gid,
            rdev,
            nlink: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            links: Vec::new(),
        }
    }

    pub(crate) fn kind(&self) -> FileType {
        match &self.content {
            Content::File(_) => FileType::RegularFile,
            Content::Dir(_) => FileType::Directory,
            Content::Symlink(_) => FileType::Symlink,
            Content::Special(kind) => *kind,
        }
    }

    pub(crate) fn is_dir(&self) -> bool {
        matches!(self.content, Content::Dir(_))
    }

    pub(crate) fn dir(&self) -> Option<&Dir> {
        match &self.content {
            Content::Dir(dir) => Some(dir),
            _ => None,
        }
    }

    /// `st_size`: the bytes of a file, the target's length for a symlink, a block for a directory.
    pub(crate) fn size(&self) -> u64 {
        match &self.content {
            Content::File(data) => data.len() as u64,
            Content::Dir(_) => 4096,
            Content::Symlink(target) => target.len() as u64,
            Content::Special(_) => 0,
        }
    }
}

/// A metadata operation: what is journaled, committed by an fsync and replayed after a power loss.
///
/// Each carries the times it set when it ran live, so a replay sets the same ones.
#[derive(Clone, Debug)]
pub(crate) enum MetaOp {
    /// Make `node` (not yet linked) inode `ino` and link it as `parent/name` (create, mknod, mkdir,
    /// symlink). Its `ctime` is the operation's time.
    Create {
        parent: u64,
        name: OsString,
        ino: u64,
        node: Box<Node>,
    },
    /// A new hard link `parent/name` to `ino`.
    Link {
        ino: u64,
        parent: u64,
        name: OsString,
        time: SystemTime,
    },
    /// Remove `parent/name`: rmdir when `dir`, unlink otherwise.
    Remove {
        parent: u64,
        name: OsString,
        dir: bool,
        time: SystemTime,
    },
    /// `renameat2(parent/name, newparent/newname, flags)`.
    Rename {
        parent: u64,
        name: OsString,
        newparent: u64,
        newname: OsString,
        flags: u32,
        time: SystemTime,
    },
    /// chmod, chown and utimens: the values that change; `time` is the new ctime.
    SetAttr {
        ino: u64,
        perm: Option<u16>,
        uid: Option<u32>,
        gid: Option<u32>,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
        time: SystemTime,
    },
}

/// The inodes of a file system, by number.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    pub(crate) nodes: HashMap<u64, Node>,
    folding: bool,
}

impl Tree {
    /// A tree holding only an empty root directory (mode 0755).
    pub(crate) fn new(folding: bool, uid: u32, gid: u32, now: SystemTime) -> Tree {
        let mut root = Node::new(Content::Dir(Dir::new()), 0o755, uid, gid, 0, now);
        root.nlink = 2;
        Tree {
            nodes: HashMap::from([(ROOT, root)]),
            folding,
        }
    }

    pub(crate) fn key(&self, name: &OsStr) -> Vec<u8> {
        name_key(name, self.folding)
    }

    pub(crate) fn node(&self, ino: u64) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    pub(crate) fn node_mut(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    /// The directory `ino`: ENOENT if there is no such inode, ENOTDIR if it is not a directory.
    pub(crate) fn dir(&self, ino: u64) -> Result<&Dir, Errno> {
        self.node(ino)?.dir().ok_or(Errno::ENOTDIR)
    }

    fn dir_mut(&mut self, ino: u64) -> Result<&mut Dir, Errno> {
        match &mut self.node_mut(ino)?.content {
            Content::Dir(dir) => Ok(dir),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// The entry `parent/name`, if there is one.
    pub(crate) fn lookup(&self, parent: u64, name: &OsStr) -> Result<Option<&Entry>, Errno> {
        Ok(self.dir(parent)?.get(&self.key(name)))
    }

    /// The parent of directory `ino` (the root is its own parent).
    pub(crate) fn parent_of(&self, ino: u64) -> u64 {
        self.nodes
            .get(&ino)
            .and_then(|node| node.links.first())
            .map_or(ROOT, |(parent, _)| *parent)
    }

    /// The path of `ino` relative to the root, through stored names (a hard-linked file's first link):
    /// `""` for the root, `None` for an inode no entry names (removed while still open).
    pub(crate) fn path_of(&self, ino: u64) -> Option<String> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let (parent, name) = self.nodes.get(&at)?.links.first()?;
            names.push(name.to_string_lossy().into_owned());
            at = *parent;
            if names.len() > MAX_DEPTH {
                return None;
            }
        }
        names.reverse();
        Some(names.join("/"))
    }

    /// The path of the entry `parent/name` as the tree names it: the stored spelling if the entry
    /// exists, `name` as given if it does not.
    pub(crate) fn entry_path(&self, parent: u64, name: &OsStr) -> String {
        let stored = self
            .lookup(parent, name)
            .ok()
            .flatten()
            .map(|entry| entry.name.clone());
        let name = stored.as_deref().unwrap_or(name).to_string_lossy();
        match self.path_of(parent) {
            Some(dir) if dir.is_empty() => name.into_owned(),
            Some(dir) => format!("{dir}/{name}"),
            None => format!("(unlinked)/{name}"),
        }
    }

    /// Whether `ino` is `dir` or lies beneath it.
    fn is_within(&self, mut ino: u64, dir: u64) -> bool {
        for _ in 0..MAX_DEPTH {
            if ino == dir {
                return true;
            }
            if ino == ROOT {
                return false;
            }
            ino = self.parent_of(ino);
        }
        true
    }

    fn touch_dir(&mut self, ino: u64, time: SystemTime) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.mtime = time;
            node.ctime = time;
        }
    }

    /// Add the entry `parent/name` → `ino` (the key must be free) and count a subdirectory's `..`.
    fn link_entry(&mut self, parent: u64, name: &OsStr, ino: u64) -> Result<(), Errno> {
        let key = self.key(name);
        let child_is_dir = self.node(ino)?.is_dir();
        self.dir_mut(parent)?.insert(key, name.to_owned(), ino);
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.links.push((parent, name.to_owned()));
        }
        if child_is_dir && let Some(parent) = self.nodes.get_mut(&parent) {
            parent.nlink += 1;
        }
        Ok(())
    }

    /// Remove the entry `parent/<key>`, and its record in the child's links and the parent's count.
    fn unlink_entry(&mut self, parent: u64, key: &[u8]) -> Result<Entry, Errno> {
        let entry = self.dir_mut(parent)?.remove(key).ok_or(Errno::ENOENT)?;
        let folding = self.folding;
        let mut child_is_dir = false;
        if let Some(node) = self.nodes.get_mut(&entry.ino) {
            child_is_dir = node.is_dir();
            if let Some(at) = node
                .links
                .iter()
                .position(|(p, name)| *p == parent && name_key(name, folding) == key)
            {
                node.links.remove(at);
            }
        }
        if child_is_dir && let Some(parent) = self.nodes.get_mut(&parent) {
            parent.nlink = parent.nlink.saturating_sub(1);
        }
        Ok(entry)
    }

    /// Drop one link count of `ino` after its entry went; true when nothing names it any more.
    fn drop_link(&mut self, ino: u64, time: SystemTime) -> bool {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return false;
        };
        node.nlink = if node.is_dir() {
            0
        } else {
            node.nlink.saturating_sub(1)
        };
        node.ctime = time;
        node.nlink == 0
    }

    /// Apply `op`, or change nothing and answer the errno the operation fails with.
    ///
    /// Answers the inodes the operation left without any link: the caller frees them (the live tree
    /// keeps one while a process still has it open).
    pub(crate) fn apply(&mut self, op: &MetaOp) -> Result<Vec<u64>, Errno> {
        match op {
            MetaOp::Create {
                parent,
                name,
                ino,
                node,
            } => {
                check_name(name)?;
                if self.lookup(*parent, name)?.is_some() || self.nodes.contains_key(ino) {
                    return Err(Errno::EEXIST);
                }
                let mut node = (**node).clone();
                let time = node.ctime;
                node.nlink = if node.is_dir() { 2 } else { 1 };
                node.links.clear();
                self.nodes.insert(*ino, node);
                self.link_entry(*parent, name, *ino)?;
                self.touch_dir(*parent, time);
                Ok(Vec::new())
            }
            MetaOp::Link {
                ino,
                parent,
                name,
                time,
            } => {
                check_name(name)?;
                if self.node(*ino)?.is_dir() {
                    return Err(Errno::EPERM);
                }
                if self.lookup(*parent, name)?.is_some() {
                    return Err(Errno::EEXIST);
                }
                self.link_entry(*parent, name, *ino)?;
                let node = self.node_mut(*ino)?;
                node.nlink += 1;
                node.ctime = *time;
                self.touch_dir(*parent, *time);
                Ok(Vec::new())
            }
            MetaOp::Remove {
                parent,
                name,
                dir,
                time,
            } => {
                let key = self.key(name);
                let ino = self.dir(*parent)?.get(&key).ok_or(Errno::ENOENT)?.ino;
                let node = self.node(ino)?;
                match (node.dir(), dir) {
                    (Some(entries), true) if !entries.is_empty() => return Err(Errno::ENOTEMPTY),
                    (None, true) => return Err(Errno::ENOTDIR),
                    (Some(_), false) => return Err(Errno::EISDIR),
                    _ => {}
                }
                self.unlink_entry(*parent, &key)?;
                self.touch_dir(*parent, *time);
                Ok(if self.drop_link(ino, *time) {
                    vec![ino]
                } else {
                    Vec::new()
                })
            }
            MetaOp::Rename {
                parent,
                name,
                newparent,
                newname,
                flags,
                time,
            } => self.rename(*parent, name, *newparent, newname, *flags, *time),
            MetaOp::SetAttr {
                ino,
                perm,
                uid,
                gid,
                atime,
                mtime,
                time,
            } => {
                let node = self.node_mut(*ino)?;
                if let Some(perm) = perm {
                    node.perm = perm & 0o7777;
                }
                if let Some(uid) = uid {
                    node.uid = *uid;
                }
                if let Some(gid) = gid {
                    node.gid = *gid;
                }
                if let Some(atime) = atime {
                    node.atime = *atime;
                }
                if let Some(mtime) = mtime {
                    node.mtime = *mtime;
                }
                node.ctime = *time;
                Ok(Vec::new())
            }
        }
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        time: SystemTime,
    ) -> Result<Vec<u64>, Errno> {
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        if flags & !(libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) != 0 || (exchange && noreplace)
        {
            return Err(Errno::EINVAL);
        }
        check_name(newname)?;
        let (skey, dkey) = (self.key(name), self.key(newname));
        let source = self.dir(parent)?.get(&skey).ok_or(Errno::ENOENT)?.clone();
        let target = self.dir(newparent)?.get(&dkey).cloned();
        let source_is_dir = self.node(source.ino)?.is_dir();

        if parent == newparent && skey == dkey {
            // The same entry: a rename to itself, or to another spelling of its name, which the entry
            // then takes (as APFS does; Linux drops a same-inode rename before it reaches a FUSE file
            // system, so only a replay or another kernel gets here).
            if !exchange && source.name != newname {
                if let Some(entry) = self.dir_mut(parent)?.get_mut(&skey) {
                    entry.name = newname.to_owned();
                }
                let folding = self.folding;
                let node = self.node_mut(source.ino)?;
                for link in &mut node.links {
                    if link.0 == parent && name_key(&link.1, folding) == skey {
                        link.1 = newname.to_owned();
                    }
                }
                node.ctime = time;
                self.touch_dir(parent, time);
            }
            return Ok(Vec::new());
        }
        if source_is_dir && self.is_within(newparent, source.ino) {
            return Err(Errno::EINVAL);
        }

        if exchange {
            let target = target.ok_or(Errno::ENOENT)?;
            if self.node(target.ino)?.is_dir() && self.is_within(parent, target.ino) {
                return Err(Errno::EINVAL);
            }
            // Each name stays as it is spelled and now names the other inode.
            self.unlink_entry(parent, &skey)?;
            self.unlink_entry(newparent, &dkey)?;
            self.link_entry(parent, &source.name, target.ino)?;
            self.link_entry(newparent, &target.name, source.ino)?;
            for ino in [source.ino, target.ino] {
                self.node_mut(ino)?.ctime = time;
            }
            self.touch_dir(parent, time);
            self.touch_dir(newparent, time);
            return Ok(Vec::new());
        }

        let mut freed = Vec::new();
        if let Some(target) = target {
            if noreplace {
                return Err(Errno::EEXIST);
            }
            if target.ino == source.ino {
                // Two links to one inode: POSIX says rename does nothing.
                return Ok(Vec::new());
            }
            match (source_is_dir, self.node(target.ino)?.dir()) {
                (true, None) => return Err(Errno::ENOTDIR),
                (true, Some(entries)) if !entries.is_empty() => return Err(Errno::ENOTEMPTY),
                (false, Some(_)) => return Err(Errno::EISDIR),
                _ => {}
            }
            self.unlink_entry(newparent, &dkey)?;
            if self.drop_link(target.ino, time) {
                freed.push(target.ino);
            }
        }
        self.unlink_entry(parent, &skey)?;
        // The entry takes the name as this rename spells it.
        self.link_entry(newparent, newname, source.ino)?;
        self.node_mut(source.ino)?.ctime = time;
        self.touch_dir(parent, time);
        self.touch_dir(newparent, time);
        Ok(freed)
    }

    /// Apply `op` and free the inodes it unlinks (for a tree no process has open: the committed one).
    pub(crate) fn replay(&mut self, op: &MetaOp) {
        // An operation that succeeded live succeeds again on the same state, so an error cannot
        // happen; if one did, skipping the operation is all a replay could do.
        if let Ok(freed) = self.apply(op) {
            for ino in freed {
                self.nodes.remove(&ino);
            }
        }
    }
}

/// ENAMETOOLONG for a name longer than `NAME_MAX`; EINVAL for one no directory can hold.
fn check_name(name: &OsStr) -> Result<(), Errno> {
    let bytes = name.as_bytes();
    if bytes.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if bytes.is_empty()
        || bytes == b"."
        || bytes == b".."
        || bytes.contains(&b'/')
        || bytes.contains(&0)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Vec<u8> {
        name_key(OsStr::new(name), true)
    }

    #[test]
    fn folding_ignores_case_and_normalization() {
        assert_eq!(key(".ENV"), key(".env"));
        assert_eq!(key("caf\u{e9}.txt"), key("cafe\u{301}.txt"));
        assert_eq!(key("CAF\u{c9}.TXT"), key("cafe\u{301}.txt"));
        assert_ne!(key("a.txt"), key("b.txt"));
        assert_ne!(
            name_key(OsStr::new("A"), false),
            name_key(OsStr::new("a"), false)
        );
    }

    fn file(now: SystemTime) -> Box<Node> {
        Box::new(Node::new(
            Content::File(Arc::default()),
            0o644,
            0,
            0,
            0,
            now,
        ))
    }

    #[test]
    fn a_failed_operation_changes_nothing() {
        let now = SystemTime::now();
        let mut tree = Tree::new(true, 0, 0, now);
        let create = |name: &str, ino| MetaOp::Create {
            parent: ROOT,
            name: name.into(),
            ino,
            node: file(now),
        };
        assert!(tree.apply(&create("a.txt", 2)).is_ok());
        assert_eq!(tree.apply(&create("A.TXT", 3)), Err(Errno::EEXIST));
        assert!(!tree.nodes.contains_key(&3));
        let rename = MetaOp::Rename {
            parent: ROOT,
            name: "missing".into(),
            newparent: ROOT,
            newname: "b".into(),
            flags: 0,
            time: now,
        };
        assert_eq!(tree.apply(&rename), Err(Errno::ENOENT));
        assert_eq!(tree.dir(ROOT).map(|dir| dir.entries.len()), Ok(1));
    }
}
