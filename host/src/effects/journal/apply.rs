//! Applying a checked change set.
//!
//! Check every target (it must still resolve beneath the root through real directories, and be what the
//! view first saw), write the intent, make it durable, then move everything into place: a new file by a
//! rename that never replaces, a replaced file by an exchange with its new content, a removed one into
//! `pre/`. Each move is checked on what it moved (the object that arrived, [`super::moves`]): a file
//! swapped in after the check is put back and the call fails. If the process dies at any point, the
//! next journal operation settles the intent ([`super::recovery`]).
//!
//! Only what the call wrote is flushed ([`super::durable`]), never the whole filesystem, in one of two
//! ways:
//!
//! * **Written ahead** (a call whose new content is small, [`super::ahead`]): the intent carries the new
//!   bytes, and one flush of the log (with, on a journal's first apply, the entries of the state
//!   directory and of the log) makes the call durable before anything moves. Its files and directories
//!   reach the disk later; after a power loss, recovery rolls the call forward from the log.
//! * **Flushed in place** (any other call): before the first move, each staged file's data and the log
//!   up to the intent; after the last, the entries of every directory a move changed (each target's
//!   parent, and `pre/`), before the call can be marked applied.
//!
//! Either way a rename is atomic across a crash, so each target holds its old or its new file; the
//! intent and the new content are on disk before any target can change; and a call that failed is
//! marked rolled back on disk before a call written ahead could be rolled forward.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::PermissionsExt;

use cap_std::fs::{Dir, MetadataExt};

use super::ahead::write_ahead;
use super::durable::{sync_dir, sync_file};
use super::log::{entry_event, state_event};
use super::moves::{ensure_arrived, exchange, object_at, rename_checked, rename_no_replace};
use super::{CallMeta, CallState, Journal, JournalChange, JournalEntry, journal_error};
use crate::audit::now_ms;
use crate::effects::{Change, ChangeKind, ChangeSet, EffectError};
use crate::lower::Lower;
use crate::names::NameMatch;
use crate::resolve::{Entry, EntryKind, RelPath};
use crate::root::Root;
use crate::test_hooks::{crash_point, fail_point, moved};

impl Journal {
    /// Applies a checked change set: see the module docs for the steps. Returns the call's journal
    /// entry (`None` when the set is empty: nothing is journaled).
    pub fn apply(
        &mut self,
        root: &Root,
        meta: &CallMeta,
        changes: &ChangeSet,
    ) -> Result<Option<JournalEntry>, EffectError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let guard = self.locked()?;
        self.refresh()?;
        self.recover(root)?;
        let mut fresh = Lower::of(root);
        preflight(&mut fresh, changes)?;
        let seq = self.calls.keys().next_back().map_or(1, |last| last + 1);
        let recorded: Vec<JournalChange> = changes
            .changes()
            .iter()
            .enumerate()
            .map(|(index, change)| JournalChange {
                path: change.path.to_string(),
                kind: change.kind,
                before: change.before.clone(),
                after: change.after.clone(),
                pre: matches!(
                    change.kind,
                    ChangeKind::Replace | ChangeKind::Delete | ChangeKind::RemoveDir
                )
                .then(|| format!("{seq}-{index}")),
            })
            .collect();
        let entry = JournalEntry {
            seq,
            call_id: meta.call_id.clone(),
            turn: meta.turn.clone(),
            tool: meta.tool.clone(),
            time_ms: u64::try_from(now_ms()).unwrap_or(u64::MAX),
            changes: recorded,
            output: meta.output.clone(),
            state: CallState::Intent,
            damage: None,
        };
        let ahead =
            write_ahead(changes).map_err(|e| journal_error("cannot read a staged file", e))?;
        self.make_layout_durable(root)?;
        // Written now, made durable in `perform` (together with the staged files when not ahead).
        self.append(
            &entry_event(&entry, CallState::Intent, ahead.as_ref()),
            false,
        )?;
        self.calls.insert(seq, entry.clone());
        let result = self.perform(&mut fresh, changes, &entry, ahead.is_some());
        let state = match &result {
            Ok(()) => CallState::Applied,
            Err(_) => CallState::RolledBack,
        };
        // A call written ahead would be rolled forward after a power loss unless its rollback is on
        // disk.
        self.append(&state_event(seq, state), ahead.is_some() && result.is_err())?;
        if let Some(call) = self.calls.get_mut(&seq) {
            call.state = state;
        }
        result?;
        if let Some(ahead) = ahead {
            self.ahead.insert(seq, ahead);
            if self.settle_due() {
                self.settle_ahead(root)?;
            }
        }
        self.prune(root)?;
        drop(guard);
        Ok(self.calls.get(&seq).cloned())
    }

    /// Makes the intent durable, moves every change into place, then (unless the call is written
    /// ahead) makes the moves durable; on a failure, puts back what was done.
    fn perform(
        &mut self,
        fresh: &mut Lower,
        changes: &ChangeSet,
        entry: &JournalEntry,
        ahead: bool,
    ) -> Result<(), EffectError> {
        crash_point("intent");
        self.make_durable(changes, ahead)?;
        crash_point("durable");
        let staging = changes.staging();
        let mut done: Vec<usize> = Vec::new();
        for (index, (change, recorded)) in changes.changes().iter().zip(&entry.changes).enumerate()
        {
            let result = if index > 0 && fail_point("second-move") {
                Err(EffectError::io(
                    &change.path,
                    &io::Error::other("TURNGATE_TEST_FAIL_AT"),
                ))
            } else {
                self.move_into_place(fresh, staging, change, recorded)
            };
            if let Err(error) = result {
                // A replace that failed half-way may have left the new content under its
                // pre-image's name; it is nobody's pre-image.
                if let Some(pre) = &entry.changes[index].pre
                    && entry.changes[index].kind == ChangeKind::Replace
                {
                    let _ = self.pre.remove_file(pre);
                }
                self.put_back_all(fresh, entry, &done);
                return Err(error);
            }
            moved();
            done.push(index);
            crash_point("moved-one");
        }
        if !ahead && let Err(error) = self.sync_moved(fresh, &entry.changes) {
            self.put_back_all(fresh, entry, &done);
            return Err(journal_error("cannot sync a directory", error));
        }
        crash_point("moved-all");
        Ok(())
    }

    /// Puts back the changes of `entry` that were done (newest first), and flushes what that moved,
    /// before the call is marked rolled back.
    fn put_back_all(&self, fresh: &mut Lower, entry: &JournalEntry, done: &[usize]) {
        for &undo in done.iter().rev() {
            let _ = self.put_back(fresh, &entry.changes[undo]);
        }
        let _ = self.sync_moved(fresh, &entry.changes);
    }

    /// Makes the entries the intent is found by durable (the log's in the state directory, and the
    /// state directory's in the root: both may have just been made), unless the log's layout line
    /// says they are already; then writes that line, to go to disk with the intent.
    fn make_layout_durable(&mut self, root: &Root) -> Result<(), EffectError> {
        if self.layout_durable {
            return Ok(());
        }
        sync_dir(&self.state)
            .and_then(|()| sync_dir(root.dir()))
            .map_err(|e| journal_error("cannot sync the state directory", e))?;
        self.layout_durable = true;
        // Only a hint for later journals: without it they flush again.
        let _ = self.append_layout();
        Ok(())
    }

    /// Makes the intent and the new content durable before anything moves: each staged file's data
    /// (unless the intent carries it, `ahead`), then the log.
    fn make_durable(&mut self, changes: &ChangeSet, ahead: bool) -> Result<(), EffectError> {
        for change in changes.changes() {
            if let Some(staged) = change.staged().filter(|_| !ahead) {
                sync_file(&staged.file).map_err(|e| EffectError::io(&change.path, &e))?;
            }
        }
        sync_file(&self.log).map_err(|e| journal_error("cannot sync the log", e))
    }

    /// Flushes the entries of every directory that moving `changes` (into place or back) changed:
    /// each one's parent (a directory the call made, as the parent of what it holds), and `pre/` when
    /// one has a pre-image. The staging directory is not flushed: nothing recovery needs is found
    /// through it (a staged file's name left there by a crash is removed with the dead process's
    /// staging).
    pub(super) fn sync_moved(
        &self,
        fresh: &mut Lower,
        changes: &[JournalChange],
    ) -> std::io::Result<()> {
        let mut synced = BTreeSet::new();
        for change in changes {
            let Some(path) = RelPath::parse(&change.path) else {
                continue;
            };
            // A parent that is gone (a directory the call made, put back) has nothing to flush.
            let Ok((parent, _)) = parent_of(fresh, &path) else {
                continue;
            };
            let metadata = parent.dir_metadata()?;
            if synced.insert((metadata.dev(), metadata.ino())) {
                sync_dir(&parent)?;
            }
        }
        if changes.iter().any(|c| c.pre.is_some()) {
            sync_dir(&self.pre)?;
        }
        Ok(())
    }

    fn move_into_place(
        &self,
        fresh: &mut Lower,
        staging: Option<&crate::view::staging::Staging>,
        change: &Change,
        recorded: &JournalChange,
    ) -> Result<(), EffectError> {
        let io = |e: io::Error| EffectError::io(&change.path, &e);
        let (parent, name) = parent_of(fresh, &change.path)?;
        let pre = recorded.pre.as_deref().unwrap_or_default();
        let origin = change.origin().map(|o| (o.identity.dev, o.identity.ino));
        match change.kind {
            ChangeKind::Delete | ChangeKind::RemoveDir => {
                let origin = origin.ok_or_else(|| journal_error("no origin", &change.path))?;
                rename_checked(&parent, name, &self.pre, pre, origin).map_err(io)
            }
            ChangeKind::MakeDir => parent.create_dir(name).map_err(io),
            ChangeKind::Create | ChangeKind::Replace => {
                let (Some(staged), Some(staging)) = (change.staged(), staging) else {
                    return Err(journal_error("a staged file is missing", &change.path));
                };
                let metadata = staged.file.metadata().map_err(io)?;
                let new = (
                    std::os::unix::fs::MetadataExt::dev(&metadata),
                    std::os::unix::fs::MetadataExt::ino(&metadata),
                );
                if change.kind == ChangeKind::Create {
                    // Never over something that appeared since the check.
                    rename_no_replace(staging.dir(), &staged.name, &parent, name).map_err(io)?;
                    return ensure_arrived(&parent, name, new, || {
                        parent.rename(name, staging.dir(), &staged.name)
                    })
                    .map_err(io);
                }
                let origin = origin.ok_or_else(|| journal_error("no origin", &change.path))?;
                // The new content keeps the old file's permissions.
                let mode = parent.symlink_metadata(name).map_err(io)?.mode();
                staged
                    .file
                    .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(io)?;
                // The new content goes under the pre-image's name, then trades places with the old:
                // the target always holds one whole file, and is never linked twice.
                staging
                    .dir()
                    .rename(&staged.name, &self.pre, pre)
                    .map_err(io)?;
                exchange(&self.pre, pre, &parent, name).map_err(io)?;
                // What left must be the file the call saw: one swapped in since the check is put
                // back where it was.
                if object_at(&self.pre, pre).map_err(io)? != origin {
                    let _ = exchange(&self.pre, pre, &parent, name);
                    return Err(EffectError::Changed {
                        path: change.path.to_string(),
                        detail: "another file was swapped in while it was being replaced".into(),
                    });
                }
                Ok(())
            }
        }
    }
}

/// The parent directory of `path` (reached through real directories only) and the last component.
pub(super) fn parent_of<'p>(
    fresh: &mut Lower,
    path: &'p RelPath,
) -> Result<(std::sync::Arc<Dir>, &'p str), EffectError> {
    let parent = path.parent().unwrap_or_default();
    let dir = fresh.dir(&parent).map_err(|e| EffectError::Moved {
        path: path.to_string(),
        detail: format!("`{parent}` is not a directory beneath the root: {e}"),
    })?;
    Ok((dir, path.file_name().unwrap_or(".")))
}

/// Checks every target before anything is written: each parent is a real directory beneath the root
/// (or one this set makes first), and each target is what the call's view first saw.
fn preflight(fresh: &mut Lower, changes: &ChangeSet) -> Result<(), EffectError> {
    let made: BTreeSet<&RelPath> = changes
        .changes()
        .iter()
        .filter(|c| c.kind == ChangeKind::MakeDir)
        .map(|c| &c.path)
        .collect();
    let staging_dev = changes
        .staging()
        .and_then(|s| s.dir().dir_metadata().ok())
        .map(|m| m.dev());
    for change in changes.changes() {
        let parent = change.path.parent().unwrap_or_default();
        let made_here = made.contains(&parent) || made.iter().any(|m| parent.is_within(m));
        if made_here {
            continue;
        }
        let dir = fresh.dir(&parent).map_err(|e| EffectError::Moved {
            path: change.path.to_string(),
            detail: format!("`{parent}` is not a directory beneath the root: {e}"),
        })?;
        let now = fresh
            .entry(&change.path)
            .map_err(|e| EffectError::io(&change.path, &e))?;
        let changed = |detail: String| EffectError::Changed {
            path: change.path.to_string(),
            detail,
        };
        match (change.kind, change.origin(), now) {
            (ChangeKind::Create | ChangeKind::MakeDir, _, None) => {}
            (ChangeKind::Create | ChangeKind::MakeDir, _, Some(entry))
                if respelled(changes, change, &entry) => {}
            (ChangeKind::Create | ChangeKind::MakeDir, _, Some(entry)) => {
                return Err(changed(format!("{} appeared there", entry.kind.describe())));
            }
            (_, _, None) => return Err(changed("it was removed".into())),
            (_, None, Some(_)) => return Err(changed("it appeared".into())),
            (ChangeKind::RemoveDir, Some(origin), Some(entry)) => {
                if entry.kind != EntryKind::Dir || origin.identity.ino != entry.identity.ino {
                    return Err(changed("it was replaced".into()));
                }
                if dir
                    .read_dir(change.path.file_name().unwrap_or("."))
                    .map(|mut entries| entries.next().is_some())
                    .unwrap_or(true)
                {
                    return Err(changed("it is no longer empty".into()));
                }
            }
            (_, Some(origin), Some(entry)) => {
                if entry.kind != origin.kind || entry.identity != origin.identity {
                    return Err(changed(identity_difference(origin, &entry)));
                }
            }
        }
        if let (Some(_), Some(staging_dev)) = (change.staged(), staging_dev) {
            let parent_dev = dir.dir_metadata().map(|m| m.dev()).unwrap_or(staging_dev);
            if parent_dev != staging_dev {
                return Err(EffectError::Io {
                    path: change.path.to_string(),
                    message: "it is on another filesystem than the root's state directory".into(),
                });
            }
        }
    }
    Ok(())
}

/// Whether what answers to a new entry's name (`found`, on a directory that folds names) is the entry
/// the same change set removes first from beside it under another spelling: the set changes only
/// the spelling of a name, and the name is free once the removal moved.
fn respelled(changes: &ChangeSet, made: &Change, found: &Entry) -> bool {
    changes.changes().iter().any(|removal| {
        matches!(removal.kind, ChangeKind::Delete | ChangeKind::RemoveDir)
            && removal.path.parent() == made.path.parent()
            && removal.path != made.path
            && removal.matching == NameMatch::Folding
            && removal
                .origin()
                .is_some_and(|origin| origin.is_same_object(found))
            && NameMatch::Folding.same(
                removal.path.file_name().unwrap_or_default(),
                made.path.file_name().unwrap_or_default(),
            )
    })
}

fn identity_difference(origin: &Entry, now: &Entry) -> String {
    if origin.kind != now.kind {
        return format!("it is now {}", now.kind.describe());
    }
    if origin.identity.ino != now.identity.ino {
        return "it was replaced by another file".into();
    }
    if origin.identity.size != now.identity.size {
        return format!(
            "its size went from {} to {} bytes",
            origin.identity.size, now.identity.size
        );
    }
    "it was modified".into()
}
