//! Undo: putting back what applied calls changed, only when every file is still as they left it.
//!
//! Everything is checked before anything moves: each file a call changed must hold what the call left
//! (hashed), and each pre-image must be the very file the call replaced or removed (hashed, never
//! followed). A call whose record the journal cannot vouch for (a damaged log, a missing pre-image) is
//! refused with that reason. Each move is then checked on what it moved ([`super::moves`]).

use std::collections::HashMap;
use std::io;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};

use super::apply::parent_of;
use super::log::state_event;
use super::moves::{ensure_arrived, exchange, object_at, rename_no_replace};
use super::{CallState, Journal, JournalChange, JournalEntry, PRE_DIR};
use crate::effects::{ChangeKind, Content, EffectError, hash_reader};
use crate::lower::Lower;
use crate::resolve::{EntryKind, RelPath};
use crate::root::{Root, STATE_DIR};

/// Which calls to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoTarget {
    /// The most recent applied call.
    Last,
    /// The most recent applied call with this call ID.
    Call(String),
    /// Every applied call of this turn.
    Turn(String),
    /// The applied call with this sequence number (`seq` in `turngate journal`).
    Seq(u64),
}

/// Why an undo was refused or failed. Nothing of the calls was restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UndoError {
    /// No applied call matches.
    #[error("no applied call to undo ({0})")]
    NothingToUndo(String),
    /// A file changed since the call applied it.
    #[error(
        "`{path}` changed since call {call} applied it ({detail}): nothing of that call was restored"
    )]
    Changed {
        /// The file.
        path: String,
        /// The call (its ID, or its journal sequence number).
        call: String,
        /// What differs.
        detail: String,
    },
    /// The journal cannot vouch for the call's record.
    #[error("call {call} cannot be undone: {reason}")]
    Damaged {
        /// The call (its ID, or its journal sequence number).
        call: String,
        /// What is wrong with its record.
        reason: String,
    },
    /// The journal or the filesystem failed.
    #[error("{0}")]
    Journal(String),
}

/// What [`Journal::undo`] restored.
#[derive(Debug, Clone)]
pub struct Undone {
    /// The calls undone, newest first.
    pub calls: Vec<JournalEntry>,
}

impl Journal {
    /// Undoes calls: each must be applied, and every file it changed must still be as it left it;
    /// otherwise nothing is restored. A turn's calls are undone newest first.
    pub fn undo(&mut self, root: &Root, target: &UndoTarget) -> Result<Undone, UndoError> {
        let failed = |e: EffectError| UndoError::Journal(e.to_string());
        let guard = self.locked().map_err(failed)?;
        self.refresh().map_err(failed)?;
        self.recover(root).map_err(failed)?;
        // Undo relies on every file the calls wrote being on disk, not only in the log.
        self.settle_ahead(root).map_err(failed)?;
        let applied = self
            .calls
            .values()
            .rev()
            .filter(|c| c.state == CallState::Applied);
        let chosen: Vec<JournalEntry> = match target {
            UndoTarget::Last => applied.take(1).cloned().collect(),
            UndoTarget::Call(id) => applied
                .filter(|c| c.call_id.as_deref() == Some(id))
                .take(1)
                .cloned()
                .collect(),
            UndoTarget::Turn(turn) => applied
                .filter(|c| c.turn.as_deref() == Some(turn))
                .cloned()
                .collect(),
            UndoTarget::Seq(seq) => applied.filter(|c| c.seq == *seq).take(1).cloned().collect(),
        };
        if chosen.is_empty() {
            let what = match target {
                UndoTarget::Last => "the journal has none".to_owned(),
                UndoTarget::Call(id) => format!("no applied call has ID `{id}`"),
                UndoTarget::Turn(turn) => format!("no applied call belongs to turn `{turn}`"),
                UndoTarget::Seq(seq) => format!("no applied call has seq {seq}"),
            };
            return Err(UndoError::NothingToUndo(what));
        }
        let name = |call: &JournalEntry| {
            call.call_id
                .clone()
                .unwrap_or_else(|| format!("#{}", call.seq))
        };
        if let Some((call, reason)) = chosen.iter().find_map(|call| {
            call.damage
                .clone()
                .or_else(|| missing_pre_image(&self.pre, call))
                .map(|reason| (call, reason))
        }) {
            return Err(UndoError::Damaged {
                call: name(call),
                reason,
            });
        }
        let mut fresh = Lower::of(root);
        // Check everything first, newest call first, as if the later calls were already undone.
        let mut expected: HashMap<String, Expected> = HashMap::new();
        for call in &chosen {
            for change in call.changes.iter().rev() {
                let now = match expected.get(&change.path) {
                    Some(state) => state.clone(),
                    None => current(&mut fresh, &change.path)?,
                };
                let gone = |child: &str| expected.get(child) == Some(&Expected::Absent);
                if let Err(detail) = matches_after(&now, change, &self.pre, &gone) {
                    return Err(UndoError::Changed {
                        path: change.path.clone(),
                        call: name(call),
                        detail,
                    });
                }
                expected.insert(change.path.clone(), before_state(change));
            }
        }
        for call in &chosen {
            self.append(&state_event(call.seq, CallState::Undo), true)
                .map_err(failed)?;
        }
        for call in &chosen {
            for change in call.changes.iter().rev() {
                self.put_back(&mut fresh, change)
                    .map_err(|e| UndoError::Journal(format!("restoring `{}`: {e}", change.path)))?;
            }
            // The moves back reach the disk before the mark that they were made.
            self.sync_moved(&mut fresh, &call.changes)
                .map_err(|e| UndoError::Journal(format!("cannot sync a directory: {e}")))?;
            self.append(&state_event(call.seq, CallState::Undone), false)
                .map_err(failed)?;
            if let Some(entry) = self.calls.get_mut(&call.seq) {
                entry.state = CallState::Undone;
            }
        }
        drop(guard);
        let calls = chosen
            .iter()
            .filter_map(|c| self.calls.get(&c.seq).cloned())
            .collect();
        Ok(Undone { calls })
    }

    /// Puts back what a change did (rollback, recovery and undo): the pre-image returns, a new entry
    /// goes. What leaves the root is checked to be what the change left there, and what returns to be
    /// its pre-image; otherwise the move is put back and this fails.
    pub(super) fn put_back(&self, fresh: &mut Lower, change: &JournalChange) -> io::Result<()> {
        let path = RelPath::parse(&change.path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad path in journal"))?;
        let (parent, name) =
            parent_of(fresh, &path).map_err(|e| io::Error::other(e.to_string()))?;
        let pre = change.pre.as_deref().unwrap_or_default();
        match change.kind {
            ChangeKind::Create => {
                // Moved aside and checked before it is removed: only the file the call made goes.
                let aside = format!("gone.{:016x}", fastrand::u64(..));
                rename_no_replace(&parent, name, &self.pre, &aside)?;
                let left = self.file_content(&aside);
                if left.is_err() || left.ok() != change.after {
                    let _ = rename_no_replace(&self.pre, &aside, &parent, name);
                    return Err(changed_meanwhile());
                }
                self.pre.remove_file(&aside)
            }
            ChangeKind::MakeDir => parent.remove_dir(name),
            ChangeKind::Replace => {
                let old = pre_image_matches(&self.pre, change).map_err(io::Error::other)?;
                exchange(&self.pre, pre, &parent, name)?;
                // What left must be what the call wrote, and what returned its pre-image.
                let left = self.file_content(pre);
                if object_at(&parent, name)? != old || left.is_err() || left.ok() != change.after {
                    let _ = exchange(&self.pre, pre, &parent, name);
                    return Err(changed_meanwhile());
                }
                self.pre.remove_file(pre)
            }
            ChangeKind::Delete | ChangeKind::RemoveDir => {
                let old = pre_image_matches(&self.pre, change).map_err(io::Error::other)?;
                rename_no_replace(&self.pre, pre, &parent, name)?;
                ensure_arrived(&parent, name, old, || {
                    rename_no_replace(&parent, name, &self.pre, pre)
                })
            }
        }
    }

    /// The content of the regular file `name` in `pre/`, opened without following it.
    fn file_content(&self, name: &str) -> io::Result<Content> {
        let file = open_regular(&self.pre, name)?;
        hash_reader(file)
    }
}

fn changed_meanwhile() -> io::Error {
    io::Error::new(
        io::ErrorKind::ResourceBusy,
        "another file was swapped in while it was being restored",
    )
}

/// Opens the regular file `name` in `dir` for reading without following a link or blocking, and
/// refuses anything else (checked on the opened descriptor).
pub(super) fn open_regular(dir: &Dir, name: &str) -> io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let file = dir.open_with(name, &options)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() || metadata.nlink() > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file with a single link",
        ));
    }
    Ok(file.into_std())
}

/// Checks that a change's pre-image is the very entry it replaced or removed: a file with the content
/// it had (hashed, never followed), a directory for a removed directory. Answers its device and inode.
pub(super) fn pre_image_matches(pre: &Dir, change: &JournalChange) -> Result<(u64, u64), String> {
    let name = change.pre.as_deref().unwrap_or_default();
    let shown = format!("{STATE_DIR}/{PRE_DIR}/{name}");
    let metadata = pre
        .symlink_metadata(name)
        .map_err(|_| format!("its pre-image `{shown}` is missing from the journal"))?;
    let object = (metadata.dev(), metadata.ino());
    let not_it = || format!("its pre-image `{shown}` is not what the call replaced or removed");
    match (change.kind, &change.before) {
        (ChangeKind::RemoveDir, _) => {
            if EntryKind::from_file_type(metadata.file_type()) != EntryKind::Dir {
                return Err(not_it());
            }
        }
        (_, Some(before)) => {
            let file = open_regular(pre, name).map_err(|_| not_it())?;
            let opened = file.metadata().map_err(|_| not_it())?;
            let opened = (
                std::os::unix::fs::MetadataExt::dev(&opened),
                std::os::unix::fs::MetadataExt::ino(&opened),
            );
            if opened != object || hash_reader(file).ok().as_ref() != Some(before) {
                return Err(not_it());
            }
        }
        // A removed symlink: nothing to hash.
        (_, None) => {}
    }
    Ok(object)
}

/// Why an applied call cannot be undone because a pre-image it needs is gone, if one is.
pub(super) fn missing_pre_image(pre: &Dir, call: &JournalEntry) -> Option<String> {
    call.changes.iter().find_map(|change| {
        let name = change.pre.as_deref()?;
        pre.symlink_metadata(name).is_err().then(|| {
            format!("its pre-image `{STATE_DIR}/{PRE_DIR}/{name}` is missing from the journal")
        })
    })
}

/// The state of a path as undo and recovery compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expected {
    Absent,
    File(Content),
    /// A directory, with the paths of its entries.
    Dir(Vec<String>),
    Other,
}

fn before_state(change: &JournalChange) -> Expected {
    match change.kind {
        ChangeKind::Create | ChangeKind::MakeDir => Expected::Absent,
        ChangeKind::RemoveDir => Expected::Dir(Vec::new()),
        ChangeKind::Replace | ChangeKind::Delete => match &change.before {
            Some(content) => Expected::File(content.clone()),
            None => Expected::Other,
        },
    }
}

fn current(fresh: &mut Lower, path: &str) -> Result<Expected, UndoError> {
    current_io(fresh, path).map_err(|e| UndoError::Journal(format!("`{path}`: {e}")))
}

/// What is at `path` now, under that very name (on a directory that folds names, an entry stored under
/// another spelling is not at `path`: a call that changed only a name's spelling left nothing at the
/// old one): a file is hashed through the descriptor `lstat` described (a file swapped in between the
/// two is an error, not a match).
pub(super) fn current_io(fresh: &mut Lower, path: &str) -> io::Result<Expected> {
    let location = RelPath::parse(path)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad path in journal"))?;
    let Some(entry) = fresh.stored_entry(&location)? else {
        return Ok(Expected::Absent);
    };
    Ok(match entry.kind {
        EntryKind::File => {
            let (file, opened) = fresh.open_file(&location)?;
            if !opened.is_same_object(&entry) {
                return Err(changed_meanwhile());
            }
            Expected::File(hash_reader(file.into_std())?)
        }
        EntryKind::Dir => Expected::Dir(
            fresh
                .list(&location)?
                .into_iter()
                .map(|(name, _)| location.join(&name).to_string())
                .collect(),
        ),
        _ => Expected::Other,
    })
}

/// Whether `now` is what the change left, and its pre-image is there to go back to. A directory the
/// change made counts as left alone when every entry in it is one `gone` says goes away first.
pub(super) fn matches_after(
    now: &Expected,
    change: &JournalChange,
    pre: &Dir,
    gone: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    let as_left = match (change.kind, now) {
        (ChangeKind::Create | ChangeKind::Replace, Expected::File(content)) => {
            if change.after.as_ref() == Some(content) {
                Ok(())
            } else {
                Err("its content changed")
            }
        }
        (ChangeKind::Delete | ChangeKind::RemoveDir, Expected::Absent) => Ok(()),
        (ChangeKind::MakeDir, Expected::Dir(children)) => {
            if children.iter().all(|child| gone(child)) {
                Ok(())
            } else {
                Err("it is no longer empty")
            }
        }
        (_, Expected::Absent) => Err("it was removed"),
        (ChangeKind::Delete | ChangeKind::RemoveDir, _) => Err("something was put there"),
        _ => Err("it was replaced"),
    };
    as_left.map_err(str::to_owned)?;
    if change.pre.is_some() {
        pre_image_matches(pre, change)?;
    }
    Ok(())
}
