//! The file system's state (live, committed, pending) and the FUSE requests that read and change it.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, IoctlFlags, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow, WriteFlags,
};

use crate::tree::{Content, Dir, MetaOp, Node, Tree};
use crate::{At, Cut, Keep, OpKind, Options, TraceOp, When};

/// Entries and attributes are valid for no time at all: every lookup and stat reaches the file system,
/// which name folding needs (the kernel's dentry cache compares names byte for byte) and which keeps
/// the kernel from answering from what it saw before a power loss.
const TTL: Duration = Duration::ZERO;
/// The largest file the file system holds (it holds them in memory): a write or truncate past it
/// answers EFBIG.
const MAX_FILE_SIZE: u64 = 1 << 30;
/// The size `statfs` reports, in 4 KiB blocks and in inodes.
const FS_BLOCKS: u64 = 1 << 20;
const FS_FILES: u64 = 1 << 20;
/// The most entries one readdir answer collects (the kernel's buffer usually fills first).
const READDIR_BATCH: usize = 1024;

/// The path of `ino` for the trace, or a placeholder for an inode no entry names any more.
fn path(tree: &Tree, ino: u64) -> String {
    tree.path_of(ino)
        .unwrap_or_else(|| format!("(unlinked inode {ino})"))
}

/// Lock the state; a panic while it was locked (in a test thread, never in a request) does not make
/// it unusable.
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Everything the file system knows. One per [`crate::TestFs`], shared by the mounts it makes.
#[derive(Debug)]
pub(crate) struct State {
    power_loss: bool,
    /// Answer EINVAL to renames with flags ([`crate::Options::plain_renames`]).
    plain_renames: bool,
    /// Hold renames that replace a file between their halves ([`crate::Options::lagging_renames`]).
    pub(crate) lagging_renames: bool,
    /// Which mount is current: a request from an earlier mount (before a reboot) answers EIO.
    pub(crate) generation: u64,
    /// What processes see.
    live: Tree,
    /// What survives a power loss: the metadata of every committed operation, and for each file the
    /// bytes and mtime/ctime it had at its last fsync. Unused without power-loss simulation.
    committed: Tree,
    /// The metadata operations since the last commit, oldest first.
    pending: Vec<MetaOp>,
    /// Open file handles per inode: an inode removed while open lives until its last release.
    open: HashMap<u64, u32>,
    /// How many times each inode was handed to the kernel (lookup, create, mkdir, ...) and not yet
    /// forgotten: an inode removed while the kernel still knows it (a dentry, an `O_PATH` descriptor)
    /// lives until it is forgotten, so that `fstat` of it answers (with no links), as on any file
    /// system.
    known: HashMap<u64, u64>,
    next_ino: u64,
    next_fh: u64,
    /// Set from the power loss to the reboot, with what the reboot keeps of the pending operations.
    frozen: Option<Keep>,
    /// The armed cut and how many matching operations it has seen.
    cut: Option<(Cut, usize)>,
    tracing: bool,
    trace: Vec<TraceOp>,
}

impl State {
    pub(crate) fn new(options: Options, uid: u32, gid: u32) -> State {
        let tree = Tree::new(options.folding, uid, gid, SystemTime::now());
        State {
            power_loss: options.power_loss,
            plain_renames: options.plain_renames,
            lagging_renames: options.lagging_renames,
            generation: 0,
            live: tree.clone(),
            committed: tree,
            pending: Vec::new(),
            open: HashMap::new(),
            known: HashMap::new(),
            next_ino: crate::tree::ROOT + 1,
            next_fh: 1,
            frozen: None,
            cut: None,
            tracing: false,
            trace: Vec::new(),
        }
    }

    pub(crate) fn power_loss(&mut self, keep: Keep) {
        self.frozen.get_or_insert(keep);
    }

    pub(crate) fn is_frozen(&self) -> bool {
        self.frozen.is_some()
    }

    pub(crate) fn cut_at(&mut self, cut: Cut) {
        self.cut = Some((cut, 0));
    }

    pub(crate) fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    pub(crate) fn pending_ops(&self) -> usize {
        self.pending.len()
    }

    pub(crate) fn take_trace(&mut self) -> Vec<TraceOp> {
        std::mem::take(&mut self.trace)
    }

    /// Commit every pending operation and make every file's data durable (not on a dead machine).
    pub(crate) fn sync_all(&mut self) {
        if !self.power_loss || self.frozen.is_some() {
            return;
        }
        self.commit();
        let files: Vec<u64> = self
            .live
            .nodes
            .iter()
            .filter(|(_, node)| matches!(node.content, Content::File(_)))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in files {
            self.persist(ino);
        }
    }

    /// Restart from what is durable: the live state becomes the committed one plus the pending
    /// operations the power loss keeps (everything, after a clean shutdown), with each file's data as
    /// of its last fsync. Answers the new mount's generation.
    pub(crate) fn reboot(&mut self) -> u64 {
        let keep = match self.frozen.take() {
            Some(keep) => keep,
            None => {
                // No power loss: a clean shutdown writes everything back first.
                self.sync_all();
                Keep::Committed
            }
        };
        let image = if self.power_loss {
            let kept = match keep {
                Keep::Committed => 0,
                Keep::All => self.pending.len(),
                Keep::Prefix(n) => n.min(self.pending.len()),
            };
            let mut image = self.committed.clone();
            for op in &self.pending[..kept] {
                image.replay(op);
            }
            image
        } else {
            let mut image = self.live.clone();
            image.nodes.retain(|_, node| node.nlink > 0);
            image
        };
        self.live = image.clone();
        self.committed = image;
        self.pending.clear();
        self.open.clear();
        self.known.clear();
        self.cut = None;
        self.generation += 1;
        self.generation
    }

    /// Replay the pending operations onto the committed tree.
    fn commit(&mut self) {
        for op in std::mem::take(&mut self.pending) {
            self.committed.replay(&op);
        }
    }

    /// Make file `ino`'s live bytes and mtime/ctime durable (its entry must be committed already).
    fn persist(&mut self, ino: u64) {
        let Some(live) = self.live.nodes.get(&ino) else {
            return;
        };
        if let (Content::File(data), Some(durable)) =
            (&live.content, self.committed.nodes.get_mut(&ino))
        {
            durable.content = Content::File(Arc::clone(data));
            durable.mtime = live.mtime;
            durable.ctime = live.ctime;
        }
    }

    /// Count the operation against the trace and the armed cut, before it runs.
    ///
    /// Answers EIO when a `Before` cut fires (the file system is frozen and the operation does not
    /// run), and what to freeze with when an `After` cut fires (the caller runs the operation and then
    /// calls [`State::freeze_after`]). `describe` names the operation: (path, rename target, detail).
    fn gate(
        &mut self,
        op: OpKind,
        describe: impl FnOnce(&Tree) -> (String, Option<String>, String),
    ) -> Result<Option<Keep>, Errno> {
        if !self.tracing && self.cut.is_none() {
            return Ok(None);
        }
        let (path, to, detail) = describe(&self.live);
        let mut fire = None;
        if let Some((cut, seen)) = &mut self.cut {
            let counts = match &cut.at {
                At::Nth {
                    op: kind, path: at, ..
                } => *kind == op && (*at == path || to.as_deref() == Some(at.as_str())),
                At::Index(_) => true,
            };
            if counts {
                *seen += 1;
                let strike = match cut.at {
                    At::Nth { nth, .. } => nth,
                    At::Index(index) => index,
                };
                if *seen == strike {
                    fire = Some((cut.when, cut.keep));
                }
            }
        }
        if self.tracing {
            self.trace.push(TraceOp {
                op,
                path,
                to,
                detail,
            });
        }
        match fire {
            None => Ok(None),
            Some((when, keep)) => {
                self.cut = None;
                if when == When::Before {
                    self.frozen = Some(keep);
                    Err(Errno::EIO)
                } else {
                    Ok(Some(keep))
                }
            }
        }
    }

    fn freeze_after(&mut self, after: Option<Keep>) {
        if let Some(keep) = after {
            self.frozen.get_or_insert(keep);
        }
    }

    /// Run a metadata operation on the live tree and journal it.
    fn meta(&mut self, op: MetaOp) -> Result<(), Errno> {
        for ino in self.live.apply(&op)? {
            self.free_if_unused(ino);
        }
        if self.power_loss {
            self.pending.push(op);
        }
        Ok(())
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let node = self.live.node(ino)?;
        let size = node.size();
        let blocks = match node.content {
            Content::File(_) => size.div_ceil(4096) * 8,
            Content::Dir(_) => 8,
            Content::Symlink(_) | Content::Special(_) => 0,
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks,
            atime: node.atime,
            mtime: node.mtime,
            ctime: node.ctime,
            crtime: node.crtime,
            kind: node.kind(),
            perm: node.perm,
            nlink: node.nlink,
            uid: node.uid,
            gid: node.gid,
            rdev: node.rdev,
            blksize: 4096,
            flags: 0,
        })
    }

    fn lookup(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let ino = match name.as_bytes() {
            b"." => self.live.dir(parent).map(|_| parent)?,
            b".." => self.live.dir(parent).map(|_| self.live.parent_of(parent))?,
            _ => self.live.lookup(parent, name)?.ok_or(Errno::ENOENT)?.ino,
        };
        self.attr(ino)
    }

    /// Make a node (create, mknod, mkdir, symlink) owned by the requester, as `parent/name`.
    fn make(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        content: Content,
        perm: u32,
        rdev: u32,
    ) -> Result<FileAttr, Errno> {
        let mode = perm & 0o7777;
        let detail = match &content {
            Content::File(_) => format!("file {mode:04o}"),
            Content::Dir(_) => format!("dir {mode:04o}"),
            Content::Symlink(target) => format!("symlink -> {}", target.to_string_lossy()),
            Content::Special(kind) => format!("{kind:?} {mode:04o} rdev={rdev:#x}"),
        };
        let after = self.gate(OpKind::Create, |tree| {
            (tree.entry_path(parent, name), None, detail)
        })?;
        let result = self.make_now(req, parent, name, content, perm, rdev);
        self.freeze_after(after);
        result.and_then(|ino| self.attr(ino))
    }

    fn make_now(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        content: Content,
        perm: u32,
        rdev: u32,
    ) -> Result<u64, Errno> {
        let parent_node = self.live.node(parent)?;
        let is_dir = matches!(content, Content::Dir(_));
        // A set-group-ID directory passes on its group, and to a subdirectory its set-group-ID bit.
        let setgid = u32::from(parent_node.perm) & libc::S_ISGID != 0;
        let gid = if setgid { parent_node.gid } else { req.gid() };
        let perm = if setgid && is_dir {
            perm | libc::S_ISGID
        } else {
            perm
        };
        let node = Node::new(
            content,
            (perm & 0o7777) as u16,
            req.uid(),
            gid,
            rdev,
            SystemTime::now(),
        );
        let ino = self.next_ino;
        self.meta(MetaOp::Create {
            parent,
            name: name.to_owned(),
            ino,
            node: Box::new(node),
        })?;
        self.next_ino += 1;
        Ok(ino)
    }

    fn open_handle(&mut self, ino: u64) -> u64 {
        *self.open.entry(ino).or_default() += 1;
        self.next_fh += 1;
        self.next_fh
    }

    fn release(&mut self, ino: u64) {
        if let Some(count) = self.open.get_mut(&ino) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.open.remove(&ino);
                self.free_if_unused(ino);
            }
        }
    }

    /// Count an inode handed to the kernel in an entry.
    fn handed_out(&mut self, ino: u64) {
        *self.known.entry(ino).or_default() += 1;
    }

    /// The kernel forgot `lookups` of its references to `ino`.
    fn forget(&mut self, ino: u64, lookups: u64) {
        if let Some(count) = self.known.get_mut(&ino) {
            *count = count.saturating_sub(lookups);
            if *count == 0 {
                self.known.remove(&ino);
                self.free_if_unused(ino);
            }
        }
    }

    /// Drop `ino` if no entry names it, no handle has it open and the kernel forgot it.
    fn free_if_unused(&mut self, ino: u64) {
        let unlinked = self
            .live
            .nodes
            .get(&ino)
            .is_some_and(|node| node.nlink == 0);
        if unlinked && !self.open.contains_key(&ino) && !self.known.contains_key(&ino) {
            self.live.nodes.remove(&ino);
        }
    }

    fn create(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        perm: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64), Errno> {
        // The kernel looked the name up first, so it only gets here for a name it did not find; a name
        // made since then is opened as O_CREAT without O_EXCL opens one.
        if let Some(entry) = self.live.lookup(parent, name)? {
            let ino = entry.ino;
            if flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            match self.live.node(ino)?.content {
                Content::File(_) => {}
                Content::Dir(_) => return Err(Errno::EISDIR),
                _ => return Err(Errno::EEXIST),
            }
            if flags & libc::O_TRUNC != 0 {
                self.resize(ino, 0, SystemTime::now())?;
            }
            return Ok((self.attr(ino)?, self.open_handle(ino)));
        }
        let attr = self.make(req, parent, name, Content::File(Arc::default()), perm, 0)?;
        Ok((attr, self.open_handle(attr.ino.0)))
    }

    fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let detail = if dir { "rmdir" } else { "unlink" }.to_owned();
        let after = self.gate(OpKind::Unlink, |tree| {
            (tree.entry_path(parent, name), None, detail)
        })?;
        let result = self.meta(MetaOp::Remove {
            parent,
            name: name.to_owned(),
            dir,
            time: SystemTime::now(),
        });
        self.freeze_after(after);
        result
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let detail = match flags {
            0 => String::new(),
            libc::RENAME_NOREPLACE => "noreplace".to_owned(),
            libc::RENAME_EXCHANGE => "exchange".to_owned(),
            _ => format!("flags={flags:#x}"),
        };
        let after = self.gate(OpKind::Rename, |tree| {
            let to = tree.entry_path(newparent, newname);
            (tree.entry_path(parent, name), Some(to), detail)
        })?;
        if self.plain_renames && flags != 0 {
            self.freeze_after(after);
            return Err(Errno::EINVAL);
        }
        let result = self.meta(MetaOp::Rename {
            parent,
            name: name.to_owned(),
            newparent,
            newname: newname.to_owned(),
            flags,
            time: SystemTime::now(),
        });
        self.freeze_after(after);
        result
    }

    /// The first half of a lagging rename of `parent/name` over `newparent/newname`: the file it
    /// replaces loses that link now, and is returned for [`State::end_lag`]; `None` when the rename
    /// replaces no file (it then runs whole at once).
    fn begin_lag(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
    ) -> Option<u64> {
        let moved = self.live.lookup(parent, name).ok()??.ino;
        let replaced = self.live.lookup(newparent, newname).ok()??.ino;
        let node = self.live.node_mut(replaced).ok()?;
        if replaced == moved || node.is_dir() || node.nlink == 0 {
            return None;
        }
        node.nlink -= 1;
        Some(replaced)
    }

    /// Gives back the link [`State::begin_lag`] took, for the rename to take it as it runs.
    fn end_lag(&mut self, replaced: u64) {
        if let Ok(node) = self.live.node_mut(replaced) {
            node.nlink += 1;
        }
    }

    fn link(&mut self, ino: u64, newparent: u64, newname: &OsStr) -> Result<FileAttr, Errno> {
        let after = self.gate(OpKind::Create, |tree| {
            let detail = format!("link to {}", path(tree, ino));
            (tree.entry_path(newparent, newname), None, detail)
        })?;
        let result = self.meta(MetaOp::Link {
            ino,
            parent: newparent,
            name: newname.to_owned(),
            time: SystemTime::now(),
        });
        self.freeze_after(after);
        result.and_then(|()| self.attr(ino))
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &mut self,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> Result<FileAttr, Errno> {
        let after = self.gate(OpKind::SetAttr, |tree| {
            let mut detail = Vec::new();
            if let Some(size) = size {
                detail.push(format!("size={size}"));
            }
            if let Some(mode) = mode {
                detail.push(format!("mode={:04o}", mode & 0o7777));
            }
            if let Some(uid) = uid {
                detail.push(format!("uid={uid}"));
            }
            if let Some(gid) = gid {
                detail.push(format!("gid={gid}"));
            }
            if atime.is_some() {
                detail.push("atime".to_owned());
            }
            if mtime.is_some() {
                detail.push("mtime".to_owned());
            }
            (path(tree, ino), None, detail.join(" "))
        })?;
        let result = self.setattr_now(ino, mode, uid, gid, size, atime, mtime);
        self.freeze_after(after);
        result.and_then(|()| self.attr(ino))
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr_now(
        &mut self,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> Result<(), Errno> {
        let now = SystemTime::now();
        self.live.node(ino)?;
        // A size change is data, volatile until an fsync; the rest is metadata, journaled.
        if let Some(size) = size {
            self.resize(ino, size, now)?;
        }
        if mode.is_some() || uid.is_some() || gid.is_some() || atime.is_some() || mtime.is_some() {
            let time = |value: Option<TimeOrNow>| {
                value.map(|value| match value {
                    TimeOrNow::SpecificTime(time) => time,
                    TimeOrNow::Now => now,
                })
            };
            self.meta(MetaOp::SetAttr {
                ino,
                perm: mode.map(|mode| (mode & 0o7777) as u16),
                uid,
                gid,
                atime: time(atime),
                mtime: time(mtime),
                time: now,
            })?;
        }
        Ok(())
    }

    fn resize(&mut self, ino: u64, size: u64, now: SystemTime) -> Result<(), Errno> {
        if size > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        self.edit(ino, now, |data| data.resize(size as usize, 0))
    }

    fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<u32, Errno> {
        let after = self.gate(OpKind::Write, |tree| {
            let detail = format!("offset={offset} len={}", bytes.len());
            (path(tree, ino), None, detail)
        })?;
        let result = self.write_now(ino, offset, bytes);
        self.freeze_after(after);
        result
    }

    fn write_now(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<u32, Errno> {
        let written = u32::try_from(bytes.len()).map_err(|_| Errno::EINVAL)?;
        let end = offset.checked_add(bytes.len() as u64).ok_or(Errno::EFBIG)?;
        if end > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        let (start, end) = (offset as usize, end as usize);
        self.edit(ino, SystemTime::now(), |data| {
            if data.len() < end {
                // A write past the end leaves a hole, which reads as zeros.
                data.resize(end, 0);
            }
            if let Some(range) = data.get_mut(start..end) {
                range.copy_from_slice(bytes);
            }
        })?;
        Ok(written)
    }

    /// Change the regular file `ino`'s live bytes, and its mtime and ctime.
    fn edit(
        &mut self,
        ino: u64,
        now: SystemTime,
        change: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Errno> {
        let node = self.live.node_mut(ino)?;
        match &mut node.content {
            Content::File(data) => change(Arc::make_mut(data)),
            Content::Dir(_) => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        node.mtime = now;
        node.ctime = now;
        Ok(())
    }

    fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        match &self.live.node(ino)?.content {
            Content::File(data) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                Ok(data.get(start..end).unwrap_or_default().to_vec())
            }
            Content::Dir(_) => Err(Errno::EISDIR),
            _ => Err(Errno::EINVAL),
        }
    }

    fn fallocate(&mut self, ino: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let after = self.gate(OpKind::Write, |tree| {
            let detail = format!("fallocate offset={offset} len={length} mode={mode:#x}");
            (path(tree, ino), None, detail)
        })?;
        let result = self.fallocate_now(ino, offset, length, mode);
        self.freeze_after(after);
        result
    }

    /// Plain allocation extends the file with zeros; `FALLOC_FL_KEEP_SIZE` has nothing to reserve.
    fn fallocate_now(
        &mut self,
        ino: u64,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        match mode {
            0 => {
                let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
                if end > MAX_FILE_SIZE {
                    return Err(Errno::EFBIG);
                }
                self.edit(ino, SystemTime::now(), |data| {
                    if data.len() < end as usize {
                        data.resize(end as usize, 0);
                    }
                })
            }
            libc::FALLOC_FL_KEEP_SIZE => self.live.node(ino).map(|_| ()),
            _ => Err(Errno::EOPNOTSUPP),
        }
    }

    fn fsync(&mut self, ino: u64, datasync: bool) -> Result<(), Errno> {
        let detail = if datasync { "fdatasync" } else { "fsync" }.to_owned();
        let after = self.gate(OpKind::Fsync, |tree| (path(tree, ino), None, detail))?;
        let result = self.live.node(ino).map(|_| ());
        if result.is_ok() && self.power_loss {
            // Like a journaling file system's commit: everything journaled so far, then this file's data.
            self.commit();
            self.persist(ino);
        }
        self.freeze_after(after);
        result
    }

    fn fsyncdir(&mut self, ino: u64) -> Result<(), Errno> {
        let after = self.gate(OpKind::FsyncDir, |tree| {
            (path(tree, ino), None, String::new())
        })?;
        let result = self.live.dir(ino).map(|_| ());
        if result.is_ok() && self.power_loss {
            self.commit();
        }
        self.freeze_after(after);
        result
    }

    fn readdir(&self, ino: u64, offset: u64) -> Result<Vec<(u64, u64, FileType, OsString)>, Errno> {
        let dir: &Dir = self.live.dir(ino)?;
        let mut entries = Vec::new();
        if offset < 1 {
            entries.push((ino, 1, FileType::Directory, OsString::from(".")));
        }
        if offset < 2 {
            entries.push((
                self.live.parent_of(ino),
                2,
                FileType::Directory,
                OsString::from(".."),
            ));
        }
        for (cookie, entry) in dir.after(offset.max(2)).take(READDIR_BATCH) {
            let kind = self
                .live
                .node(entry.ino)
                .map_or(FileType::RegularFile, Node::kind);
            entries.push((entry.ino, cookie, kind, entry.name.clone()));
        }
        Ok(entries)
    }

    fn statfs(&self) -> (u64, u64) {
        let used: u64 = self
            .live
            .nodes
            .values()
            .map(|node| node.size().div_ceil(4096))
            .sum();
        let files = self.live.nodes.len() as u64;
        (
            FS_BLOCKS.saturating_sub(used),
            FS_FILES.saturating_sub(files),
        )
    }
}

/// The FUSE side of one mount: answers the kernel's requests from the shared state.
pub(crate) struct Server {
    pub(crate) state: Arc<Mutex<State>>,
    /// The mount this server answers for; once the state moves on (a reboot), every request answers EIO.
    pub(crate) generation: u64,
}

impl Server {
    /// Run `f` on the state, or answer EIO if the file system is frozen or this mount is gone.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Errno>) -> Result<T, Errno> {
        let mut state = lock(&self.state);
        if state.generation != self.generation || state.frozen.is_some() {
            return Err(Errno::EIO);
        }
        f(&mut state)
    }

    fn entry(&self, reply: ReplyEntry, result: Result<FileAttr, Errno>) {
        match result {
            Ok(attr) => {
                lock(&self.state).handed_out(attr.ino.0);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn empty(&self, reply: ReplyEmpty, result: Result<(), Errno>) {
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }
}

/// The file type bits of a mknod mode, as what the node holds.
fn special(mode: u32) -> Result<Content, Errno> {
    Ok(match mode & libc::S_IFMT {
        0 | libc::S_IFREG => Content::File(Arc::default()),
        libc::S_IFIFO => Content::Special(FileType::NamedPipe),
        libc::S_IFSOCK => Content::Special(FileType::Socket),
        libc::S_IFCHR => Content::Special(FileType::CharDevice),
        libc::S_IFBLK => Content::Special(FileType::BlockDevice),
        _ => return Err(Errno::EINVAL),
    })
}

impl Filesystem for Server {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(reply, self.with(|state| state.lookup(parent.0, name)));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut state = lock(&self.state);
        if state.generation == self.generation {
            state.forget(ino.0, nlookup);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|state| state.attr(ino.0)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.with(|state| state.setattr(ino.0, mode, uid, gid, size, atime, mtime)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = self.with(|state| match &state.live.node(ino.0)?.content {
            Content::Symlink(target) => Ok(target.as_bytes().to_vec()),
            _ => Err(Errno::EINVAL),
        });
        match result {
            Ok(target) => reply.data(&target),
            Err(errno) => reply.error(errno),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let result = self.with(|state| {
            let content = special(mode)?;
            let rdev = if matches!(
                content,
                Content::Special(FileType::CharDevice | FileType::BlockDevice)
            ) {
                rdev
            } else {
                0
            };
            state.make(req, parent.0, name, content, mode & !umask, rdev)
        });
        self.entry(reply, result);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let result = self.with(|state| {
            state.make(
                req,
                parent.0,
                name,
                Content::Dir(Dir::new()),
                mode & !umask,
                0,
            )
        });
        self.entry(reply, result);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(
            reply,
            self.with(|state| state.remove(parent.0, name, false)),
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, self.with(|state| state.remove(parent.0, name, true)));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let content = Content::Symlink(target.as_os_str().to_owned());
        let result = self.with(|state| state.make(req, parent.0, link_name, content, 0o777, 0));
        self.entry(reply, result);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (parent, newparent, flags) = (parent.0, newparent.0, flags.bits());
        let lagging = self.with(|state| {
            Ok((state.lagging_renames && flags == 0)
                .then(|| state.begin_lag(parent, name, newparent, newname))
                .flatten())
        });
        if let Ok(Some(replaced)) = lagging {
            // The second half answers from a thread of its own, so that this one serves the lookups
            // and reads that come meanwhile.
            let server = Server {
                state: self.state.clone(),
                generation: self.generation,
            };
            let (name, newname) = (name.to_owned(), newname.to_owned());
            std::thread::spawn(move || {
                std::thread::sleep(crate::RENAME_LAG);
                let result = server.with(|state| {
                    state.end_lag(replaced);
                    state.rename(parent, &name, newparent, &newname, flags)
                });
                server.empty(reply, result);
            });
            return;
        }
        let result = self.with(|state| state.rename(parent, name, newparent, newname, flags));
        self.empty(reply, result);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.entry(
            reply,
            self.with(|state| state.link(ino.0, newparent.0, newname)),
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let result = self.with(|state| {
            state.live.node(ino.0)?;
            Ok(state.open_handle(ino.0))
        });
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.with(|state| state.read(ino.0, offset, size)) {
            Ok(data) => reply.data(&data),
            Err(errno) => reply.error(errno),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.with(|state| state.write(ino.0, offset, data)) {
            Ok(written) => reply.written(written),
            Err(errno) => reply.error(errno),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, self.with(|_| Ok(())));
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Not through `with`: a handle closed on a frozen file system still stops pinning its inode.
        let mut state = lock(&self.state);
        if state.generation == self.generation {
            state.release(ino.0);
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, self.with(|state| state.fsync(ino.0, datasync)));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let result = self.with(|state| {
            state.live.dir(ino.0)?;
            state.next_fh += 1;
            Ok(state.next_fh)
        });
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.with(|state| state.readdir(ino.0, offset)) {
            Ok(entries) => {
                for (ino, cookie, kind, name) in entries {
                    if reply.add(INodeNo(ino), cookie, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, self.with(|state| state.fsyncdir(ino.0)));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.with(|state| Ok(state.statfs())) {
            Ok((bfree, ffree)) => {
                reply.statfs(FS_BLOCKS, bfree, bfree, FS_FILES, ffree, 4096, 255, 4096)
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The mount uses `default_permissions`, so the kernel checks permissions itself and does not
        // ask; should it ask, existing is enough.
        self.empty(reply, self.with(|state| state.live.node(ino.0).map(|_| ())));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.with(|state| state.create(req, parent.0, name, mode & !umask, flags)) {
            Ok((attr, fh)) => {
                lock(&self.state).handed_out(attr.ino.0);
                reply.created(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                );
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.empty(
            reply,
            self.with(|state| state.fallocate(ino.0, offset, length, mode)),
        );
    }
}
