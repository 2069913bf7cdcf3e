//! Writing ahead: a small call's new content goes into its intent, so one flush of the log makes the
//! call durable; its files reach the disk later ([`Journal::settle_ahead`]), and a call whose moves or
//! data a power loss took is rolled forward from the log ([`Journal::roll_forward_lost`]).
//!
//! A flush matters only across a power loss (or a kernel crash): while the kernel keeps running, every
//! process sees what was written, flushed or not, and a killed process loses nothing it wrote. So a call
//! written ahead records the machine (`/etc/machine-id`, else the host name) and the boot
//! (`/proc/sys/kernel/random/boot_id`) it was applied in, and recovery rolls forward only the unsettled
//! calls of an earlier boot of this machine (a root on a filesystem that several machines mount may hold
//! calls of another machine that is still running: those are left to that machine, or to settling), and
//! only where it finds what a lost write leaves behind:
//!
//! * a created file missing (its rename was lost), or still the very inode the call moved there (by its
//!   number: a device number is the boot's), not modified since the call wrote it, holding other bytes
//!   (its data was lost);
//! * a replaced file still holding its old content (the exchange was lost), or the call's inode with its
//!   data lost as above (its pre-image in place);
//! * a removed file or directory still there as it was, its pre-image missing; a made directory missing.
//!
//! A change whose result a later call replaced or removed (its pre-image is there) is not put in place
//! again: its file is that call's pre-image now, rolled forward there if its data was lost.
//! Anything else was changed by someone after the call and is left alone. One case cannot be told from a
//! lost write: a file the call created, removed by someone in the same boot before the power loss,
//! before the call was settled, comes back with the call's content (and can be undone).
//!
//! Settling flushes each call's files (those still the call's inode) and the directories its moves
//! changed, then marks it settled in the log, which then no longer needs its content. A file a later
//! call moved on (into `pre/`, as its pre-image) is flushed there, and after a power loss written again
//! there from the log: the later call's undo puts it back. Calls are settled
//! before any is undone or pruned, when the content waiting in the log passes [`PENDING_LIMIT`], and
//! when the oldest has waited longer than [`SETTLE_AFTER_MS`] (the kernel's own writeback is due by
//! then, so the flushes find little left to do).
//!
//! A call whose new content passes [`INLINE_LIMIT`] is not written ahead: its staged files are flushed
//! before it moves and its directories after, as the module docs of [`super::apply`] say.

use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::apply::parent_of;
use super::durable::sync_file;
use super::log::settled_event;
use super::moves::{exchange, object_at, rename_no_replace};
use super::state;
use super::undo::{Expected, current_io, open_regular, pre_image_matches};
use super::{CallState, Journal, JournalChange, journal_error};
use crate::audit::now_ms;
use crate::effects::{ChangeKind, ChangeSet, EffectError, hash_reader};
use crate::lower::Lower;
use crate::platform;
use crate::resolve::{EntryKind, RelPath};
use crate::root::{Root, STATE_DIR};
use crate::view::staging::STAGING_DIR;

/// The most new content (bytes, all files of a call together) written ahead into the log.
pub(super) const INLINE_LIMIT: u64 = 256 << 10;
/// The most content waiting in the log before the calls written ahead are settled.
pub(super) const PENDING_LIMIT: u64 = 8 << 20;
/// How long the oldest call written ahead may wait before the calls are settled.
pub(super) const SETTLE_AFTER_MS: u64 = 30_000;

/// What the log holds of a call written ahead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Ahead {
    /// The machine the call was applied on.
    pub(super) machine: String,
    /// The boot the call was applied in.
    pub(super) boot: String,
    /// For each change, in order: the new file a create or a replace moved into place.
    pub(super) files: Vec<Option<AheadFile>>,
}

/// A new file written ahead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AheadFile {
    /// Its bytes, in base64 (after the line's JSON, [`super::log`]).
    #[serde(skip)]
    pub(super) bytes: String,
    /// The device and inode it was staged as (the target's after the move).
    pub(super) object: (u64, u64),
    /// Its modification time when it was written ahead, in nanoseconds since the epoch.
    pub(super) mtime_ns: i128,
}

impl Ahead {
    /// Whether this call was written ahead in an earlier boot of this machine: a power loss may have
    /// taken its moves and its data since, and it is this machine's to roll forward.
    pub(super) fn lost_with_the_power(&self) -> bool {
        self.machine == platform::machine_id() && Some(self.boot.as_str()) != platform::boot_id()
    }

    fn size(&self) -> u64 {
        self.files
            .iter()
            .flatten()
            .map(|file| file.bytes.len() as u64)
            .sum()
    }
}

/// What to write ahead for `changes`: every new file's bytes, or `None` when together they pass
/// [`INLINE_LIMIT`] (or the boot is unknown).
pub(super) fn write_ahead(changes: &ChangeSet) -> io::Result<Option<Ahead>> {
    let Some(boot) = platform::boot_id() else {
        return Ok(None);
    };
    let new_bytes: u64 = changes
        .changes()
        .iter()
        .filter(|change| change.staged().is_some())
        .filter_map(|change| change.after.as_ref().map(|after| after.size))
        .sum();
    if new_bytes > crate::test_hooks::inline_limit().unwrap_or(INLINE_LIMIT) {
        return Ok(None);
    }
    let mut files = Vec::with_capacity(changes.changes().len());
    for change in changes.changes() {
        let file = match (change.staged(), &change.after) {
            (Some(staged), Some(after)) => {
                let metadata = staged.file.metadata()?;
                if metadata.len() != after.size {
                    return Err(io::Error::other(
                        "a staged file changed size after the call",
                    ));
                }
                let mut bytes = vec![0; usize::try_from(after.size).map_err(io::Error::other)?];
                staged.file.read_exact_at(&mut bytes, 0)?;
                // What the log holds is what was checked, reviewed and hashed, or nothing.
                if hash_reader(&bytes[..])? != *after {
                    return Err(io::Error::other("a staged file changed after the call"));
                }
                Some(AheadFile {
                    bytes: STANDARD.encode(&bytes),
                    object: (metadata.dev(), metadata.ino()),
                    mtime_ns: mtime_ns(&metadata),
                })
            }
            _ => None,
        };
        files.push(file);
    }
    Ok(Some(Ahead {
        machine: platform::machine_id().to_owned(),
        boot: boot.to_owned(),
        files,
    }))
}

fn mtime_ns(metadata: &std::fs::Metadata) -> i128 {
    i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec())
}

impl Journal {
    /// Whether the calls written ahead are due to be settled (see the module docs).
    pub(super) fn settle_due(&self) -> bool {
        let waiting: u64 = self.ahead.values().map(Ahead::size).sum();
        let oldest = self
            .ahead
            .keys()
            .next()
            .and_then(|seq| self.calls.get(seq))
            .map(|call| call.time_ms);
        let now = u64::try_from(now_ms()).unwrap_or(u64::MAX);
        waiting > PENDING_LIMIT
            || oldest.is_some_and(|time| now.saturating_sub(time) > SETTLE_AFTER_MS)
    }

    /// Makes what every call written ahead did durable without the log: the files still the call's
    /// inode, then the directories its moves changed; then marks each settled, durably. Called with the
    /// lock held.
    pub(super) fn settle_ahead(&mut self, root: &Root) -> Result<(), EffectError> {
        if self.ahead.is_empty() {
            return Ok(());
        }
        let mut fresh = Lower::of(root);
        let mut moved = Vec::new();
        for (seq, ahead) in &self.ahead {
            let Some(call) = self.calls.get(seq) else {
                continue;
            };
            if call.state == CallState::Applied {
                for (change, file) in call.changes.iter().zip(&ahead.files) {
                    let Some(file) = file else {
                        continue;
                    };
                    // Where the call put it, or where a later call moved it on to: its pre-image.
                    let synced = match self.moved_on_to(*seq, &change.path) {
                        Some(pre) if self.pre_holds(pre, file.object.1) => {
                            sync_pre_if_still(&self.pre, pre, file.object)
                        }
                        _ => sync_if_still(&mut fresh, &change.path, file.object),
                    };
                    synced.map_err(|e| EffectError::Io {
                        path: change.path.clone(),
                        message: e.to_string(),
                    })?;
                }
            }
            moved.extend(call.changes.iter().cloned());
        }
        self.sync_moved(&mut fresh, &moved)
            .map_err(|e| journal_error("cannot sync a directory", e))?;
        let settled: Vec<(u64, CallState)> = self
            .ahead
            .keys()
            .filter_map(|seq| self.calls.get(seq).map(|call| (*seq, call.state)))
            .collect();
        for (index, (seq, state)) in settled.iter().enumerate() {
            let last = index + 1 == settled.len();
            self.append(&settled_event(*seq, *state), last)?;
        }
        self.ahead.clear();
        Ok(())
    }

    /// Rolls forward the calls written ahead in an earlier boot of this machine and never settled (see
    /// the module docs), flushes what that wrote and moved, and marks them applied and settled. A call that cannot
    /// be rolled forward is marked damaged, saying why. Called with the lock held.
    pub(super) fn roll_forward_lost(&mut self, root: &Root) -> Result<(), EffectError> {
        let lost: Vec<u64> =
            self.ahead
                .iter()
                .filter(|(seq, ahead)| {
                    ahead.lost_with_the_power()
                        && self.calls.get(seq).is_some_and(|c| {
                            matches!(c.state, CallState::Intent | CallState::Applied)
                        })
                })
                .map(|(seq, _)| *seq)
                .collect();
        if lost.is_empty() {
            return Ok(());
        }
        let staging = state::open_own_dir(&self.state, STATE_DIR, STAGING_DIR)?;
        let mut fresh = Lower::of(root);
        for seq in &lost {
            let (Some(call), Some(ahead)) = (self.calls.get(seq), self.ahead.get(seq)) else {
                continue;
            };
            let (changes, files) = (call.changes.clone(), ahead.files.clone());
            let mut failure = None;
            for (change, file) in changes.iter().zip(&files) {
                let redone = match (self.moved_on_to(*seq, &change.path), file) {
                    // A later call moved the call's file on: it is that call's pre-image now, and
                    // what its undo puts back. (A pre-image that is not the call's file is the later
                    // call's new content, staged there before an exchange a power loss took.)
                    (Some(pre), Some(file)) if self.pre_holds(pre, file.object.1) => {
                        self.redo_pre_image(&staging, change, pre, file)
                    }
                    (Some(_), None) => Ok(()),
                    _ => self.redo(&mut fresh, &staging, change, file.as_ref()),
                };
                if let Err(error) = redone {
                    failure = Some(format!(
                        "it could not be rolled forward after a power loss at `{}`: {error}",
                        change.path
                    ));
                    break;
                }
            }
            self.sync_moved(&mut fresh, &changes)
                .map_err(|e| journal_error("cannot sync a directory", e))?;
            if let Some(call) = self.calls.get_mut(seq) {
                call.state = CallState::Applied;
                if failure.is_some() {
                    call.damage = failure;
                }
            }
        }
        for (index, seq) in lost.iter().enumerate() {
            let damage = self.calls.get(seq).and_then(|c| c.damage.clone());
            let mut event = settled_event(*seq, CallState::Applied);
            event.damage = damage;
            self.append(&event, index + 1 == lost.len())?;
            self.ahead.remove(seq);
        }
        Ok(())
    }

    /// Where in `pre/` what call `seq` left at `path` went, if a later call replaced or removed it: the
    /// pre-image of the first such call whose pre-image is there. What call `seq` left is then that
    /// call's to put back, not to be put in place again.
    fn moved_on_to(&self, seq: u64, path: &str) -> Option<&str> {
        self.calls
            .range(seq + 1..)
            .filter(|(_, later)| matches!(later.state, CallState::Intent | CallState::Applied))
            .flat_map(|(_, later)| &later.changes)
            .filter(|change| change.path == path)
            .filter_map(|change| change.pre.as_deref())
            .find(|pre| self.pre.symlink_metadata(pre).is_ok())
    }

    /// Whether the pre-image `pre` is the inode numbered `ino` (a number, as it survives a reboot).
    fn pre_holds(&self, pre: &str, ino: u64) -> bool {
        self.pre
            .symlink_metadata(pre)
            .is_ok_and(|metadata| cap_std::fs::MetadataExt::ino(&metadata) == ino)
    }

    /// Writes again from the log the file a call written ahead put in place and a later call moved on
    /// into `pre/` as `pre`, if it is still that file (its inode) and a power loss took its data.
    fn redo_pre_image(
        &self,
        staging: &Dir,
        change: &JournalChange,
        pre: &str,
        file: &AheadFile,
    ) -> io::Result<()> {
        let entry = crate::resolve::Entry::from_metadata(&self.pre.symlink_metadata(pre)?);
        if !lost_data(&entry, file) || pre_image_content(&self.pre, pre)? == change.after {
            return Ok(());
        }
        replace_lost(staging, &self.pre, pre, file)
    }

    /// Puts one change of a call written ahead back in place if a lost write undid it, from the
    /// content in the log.
    fn redo(
        &self,
        fresh: &mut Lower,
        staging: &Dir,
        change: &JournalChange,
        file: Option<&AheadFile>,
    ) -> io::Result<()> {
        let path = RelPath::parse(&change.path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad path in journal"))?;
        let now = fresh.stored_entry(&path)?;
        let (parent, name) =
            parent_of(fresh, &path).map_err(|e| io::Error::other(e.to_string()))?;
        let pre = change.pre.as_deref().unwrap_or_default();
        let missing =
            || io::Error::new(io::ErrorKind::InvalidData, "its content is not in the log");
        match change.kind {
            ChangeKind::MakeDir => {
                if now.is_none() {
                    parent.create_dir(name)?;
                }
            }
            ChangeKind::Delete | ChangeKind::RemoveDir => {
                if now.is_some()
                    && self.pre.symlink_metadata(pre).is_err()
                    && as_before(&current_io(fresh, &change.path)?, change)
                {
                    parent.rename(name, &self.pre, pre)?;
                }
            }
            ChangeKind::Create => {
                let file = file.ok_or_else(missing)?;
                match now {
                    None => {
                        let staged = stage(staging, file, None)?;
                        rename_no_replace(staging, &staged, &parent, name)?;
                    }
                    Some(entry) if lost_data(&entry, file) => {
                        if current_io(fresh, &change.path)? != after(change) {
                            replace_lost(staging, &parent, name, file)?;
                        }
                    }
                    Some(_) => {}
                }
            }
            ChangeKind::Replace => {
                let file = file.ok_or_else(missing)?;
                let current = current_io(fresh, &change.path)?;
                let pre_image = pre_image_matches(&self.pre, change);
                if current == after(change) && pre_image.is_ok() {
                    return Ok(());
                }
                if as_before(&current, change) {
                    // The exchange was lost: what stands under the pre-image's name is the call's
                    // staged file, never the old one (which is still in place).
                    if self.pre.symlink_metadata(pre).is_ok() {
                        self.pre.remove_file(pre)?;
                    }
                    let mode = cap_std::fs::MetadataExt::mode(&parent.symlink_metadata(name)?);
                    let staged = stage(staging, file, Some(mode))?;
                    staging.rename(&staged, &self.pre, pre)?;
                    exchange(&self.pre, pre, &parent, name)?;
                } else if now.is_some_and(|entry| lost_data(&entry, file)) && pre_image.is_ok() {
                    replace_lost(staging, &parent, name, file)?;
                }
            }
        }
        Ok(())
    }
}

/// The content of the regular file `name` in `pre/`, not following it.
fn pre_image_content(pre: &Dir, name: &str) -> io::Result<Option<crate::effects::Content>> {
    hash_reader(open_regular(pre, name)?).map(Some)
}

/// Flushes the data of the pre-image `name` if it is still `object`.
fn sync_pre_if_still(pre: &Dir, name: &str, object: (u64, u64)) -> io::Result<()> {
    let file = open_regular(pre, name)?;
    let metadata = file.metadata()?;
    if (metadata.dev(), metadata.ino()) == object {
        sync_file(&file)?;
    }
    Ok(())
}

/// Flushes the data of the file at `path` if it is still `object`.
fn sync_if_still(fresh: &mut Lower, path: &str, object: (u64, u64)) -> io::Result<()> {
    let Some(location) = RelPath::parse(path) else {
        return Ok(());
    };
    match fresh.open_file(&location) {
        Ok((file, entry)) if (entry.identity.dev, entry.identity.ino) == object => {
            sync_file(&file.into_std())
        }
        _ => Ok(()),
    }
}

/// Whether `entry` is the inode the call moved into place, not modified since the call wrote it: what
/// a write whose data a power loss took leaves. The inode number is compared, not the device: a device
/// number is the boot's (a FUSE mount gets a new one each time, a disk may be numbered otherwise),
/// while a file system keeps its inode numbers across a reboot.
fn lost_data(entry: &crate::resolve::Entry, file: &AheadFile) -> bool {
    entry.kind == EntryKind::File
        && entry.identity.ino == file.object.1
        && entry.identity.mtime_ns <= file.mtime_ns
}

fn after(change: &JournalChange) -> Expected {
    change.after.clone().map_or(Expected::Other, Expected::File)
}

/// Whether `now` is what the change found before it.
fn as_before(now: &Expected, change: &JournalChange) -> bool {
    match (change.kind, now, &change.before) {
        (ChangeKind::RemoveDir, Expected::Dir(children), _) => children.is_empty(),
        (_, Expected::File(content), Some(before)) => content == before,
        (ChangeKind::Delete, Expected::Other, None) => true,
        _ => false,
    }
}

/// Writes `file`'s bytes to a new file in the staging directory, durably; answers its name.
fn stage(staging: &Dir, file: &AheadFile, mode: Option<u32>) -> io::Result<String> {
    let bytes = STANDARD
        .decode(&file.bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let (mut staged, name) = state::create_exclusive(
        staging,
        &format!("{}-recovered", platform::process_mark()),
        "",
    )?;
    let written = staged
        .write_all(&bytes)
        .and_then(|()| match mode {
            Some(mode) => staged.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777)),
            None => Ok(()),
        })
        .and_then(|()| sync_file(&staged));
    if let Err(error) = written {
        let _ = staging.remove_file(&name);
        return Err(error);
    }
    Ok(name)
}

/// Replaces the file at `name`, whose data was lost, with `file`'s bytes: the new file trades places
/// with it, and what left must be the lost inode (anything else is put back).
fn replace_lost(staging: &Dir, parent: &Dir, name: &str, file: &AheadFile) -> io::Result<()> {
    let mode = cap_std::fs::MetadataExt::mode(&parent.symlink_metadata(name)?);
    let staged = stage(staging, file, Some(mode))?;
    exchange(staging, &staged, parent, name)?;
    // The lost inode, by its number: the device's number is the boot's.
    if object_at(staging, &staged)?.1 != file.object.1 {
        let _ = exchange(staging, &staged, parent, name);
        let _ = staging.remove_file(&staged);
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "another file was swapped in while it was being restored",
        ));
    }
    staging.remove_file(&staged)
}
