//! The journal of applied calls: how a change set is applied crash-consistently, and how it is undone.
//!
//! It lives in the root's state directory (`.turngate/`, found from the root alone, never visible to a
//! tool):
//!
//! * `journal.jsonl`: one JSON object per event, appended: a call's `intent` (its call ID, turn, tool,
//!   time, output and every change with the SHA-256 before and after and the name of its pre-image),
//!   then `applied` or `rolled_back`; later `undo` (intent) and `undone`;
//! * `pre/`: the pre-images: the very inode a change replaced or removed, moved there (a replace trades
//!   places with the new content by an atomic exchange, so the target never has two links), so undo
//!   restores it byte-identical with a rename;
//! * `lock`: every apply, undo and recovery holds an exclusive lock on it, so two processes (or
//!   workers) never apply to the same root at once;
//! * `staging/`: the files the views stage, each named by its process (recovery removes those of a
//!   process that is gone);
//! * `lease`: a worker holds an exclusive lock on it ([`Lease`]) for a whole job on the root, so the
//!   lookup, run and apply of a call is atomic with respect to every other worker. It is a file of its
//!   own because a `flock` is per open file: the journal takes and drops `lock` around each operation,
//!   which would release a lease held on the same file.
//!
//! Applying a call: check every target (it must still resolve beneath the root through real
//! directories, and be what the view first saw), write the intent, make it and the staged files durable
//! (one `syncfs`), then move everything into place: a new file by a rename that never replaces, a
//! replaced file by an exchange with its new content, a removed one into `pre/`. If the process dies at any point, the next journal
//! operation on that root finds the intent without an ending and settles it: a call whose every change
//! is in place is marked applied (and can be undone); any other is rolled back from its pre-images. So
//! after a crash each file holds its old or its new content, and every effect that survived can be
//! undone.
//!
//! Retention ([`Retention`]) is bounded by count and by pre-image bytes; the oldest finished calls are
//! pruned first (they can then no longer be undone).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt};

use cap_std::fs::{Dir, MetadataExt, OpenOptions};
use serde::{Deserialize, Serialize};

use super::{Change, ChangeKind, ChangeSet, Content, EffectError, hash_reader};
use crate::audit::now_ms;
use crate::resolve::{Entry, EntryKind, RelPath};
use crate::root::Root;
use crate::test_hooks::crash_point;
use crate::view::lower::Lower;
use crate::view::staging::STAGING_DIR;

/// The log's file name in the state directory.
pub const LOG_FILE: &str = "journal.jsonl";
/// The pre-images' directory in the state directory.
pub const PRE_DIR: &str = "pre";
/// The lock file in the state directory.
pub const LOCK_FILE: &str = "lock";
/// The workers' lease file in the state directory.
pub const LEASE_FILE: &str = "lease";

/// How much of the past the journal keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Most calls kept (default 1000).
    pub max_calls: usize,
    /// Most bytes of pre-images kept (default 512 MiB).
    pub max_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_calls: 1000,
            max_bytes: 512 << 20,
        }
    }
}

/// Who made a change set: what the journal records about the call.
#[derive(Debug, Clone, Default)]
pub struct CallMeta {
    /// The provider's call ID.
    pub call_id: Option<String>,
    /// The turn the call belongs to.
    pub turn: Option<String>,
    /// The tool.
    pub tool: String,
    /// The tool's output (so a call already applied can be answered without running it again).
    pub output: Option<String>,
}

/// Where a journaled call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Being applied (or the process applying it died).
    Intent,
    /// Applied: its changes are in place.
    Applied,
    /// Not applied after all: everything it did was put back.
    RolledBack,
    /// Being undone.
    Undo,
    /// Undone: its pre-images are back in place.
    Undone,
}

/// One change as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalChange {
    /// Relative to the root.
    pub path: String,
    /// What the change did.
    pub kind: ChangeKind,
    /// The file before.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub before: Option<Content>,
    /// The file after.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub after: Option<Content>,
    /// The pre-image's name in `pre/` (replaced and removed entries).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pre: Option<String>,
}

/// A journaled call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Its place in the journal (increasing).
    pub seq: u64,
    /// The provider's call ID.
    pub call_id: Option<String>,
    /// The turn.
    pub turn: Option<String>,
    /// The tool.
    pub tool: String,
    /// When it was applied, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Its changes, in the order they were applied.
    pub changes: Vec<JournalChange>,
    /// The tool's output.
    pub output: Option<String>,
    /// Where it stands.
    pub state: CallState,
}

impl JournalEntry {
    fn pre_bytes(&self) -> u64 {
        self.changes
            .iter()
            .filter(|c| c.pre.is_some())
            .filter_map(|c| c.before.as_ref().map(|b| b.size))
            .sum()
    }
}

/// One line of the log: `{"seq", "event"}`, and for an intent `"call": {...}`.
#[derive(Debug, Serialize, Deserialize)]
struct Event {
    seq: u64,
    event: CallState,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    call: Option<EventCall>,
}

#[derive(Debug, Serialize, Deserialize)]
struct EventCall {
    call_id: Option<String>,
    turn: Option<String>,
    tool: String,
    time_ms: u64,
    changes: Vec<JournalChange>,
    output: Option<String>,
}

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

/// A root's journal, opened for reading or applying.
pub struct Journal {
    state: Dir,
    pre: Dir,
    lock: std::sync::Arc<File>,
    log: File,
    /// Bytes of the log folded into `calls` (the log only grows between prunes).
    log_read: u64,
    log_ino: u64,
    calls: BTreeMap<u64, JournalEntry>,
    retention: Retention,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("calls", &self.calls.len())
            .finish()
    }
}

fn journal_error(what: &str, error: impl std::fmt::Display) -> EffectError {
    EffectError::Journal(format!("{what}: {error}"))
}

impl Journal {
    /// Opens (creating when missing) the journal of `root`, settling anything a crashed process left.
    pub fn open(root: &Root, retention: Retention) -> Result<Journal, EffectError> {
        let state = root
            .state_subdir(PRE_DIR)
            .and_then(|_| root.existing_state_dir())
            .map_err(|e| journal_error("cannot open the state directory", e))?
            .ok_or_else(|| journal_error("the state directory", "vanished"))?;
        let pre = cap_fs_ext::DirExt::open_dir_nofollow(&state, PRE_DIR)
            .map_err(|e| journal_error("cannot open pre/", e))?;
        let options = |append: bool| {
            let mut options = OpenOptions::new();
            options.read(true).create(true);
            if append {
                options.append(true);
            } else {
                options.write(true);
            }
            cap_fs_ext::OpenOptionsFollowExt::follow(&mut options, cap_fs_ext::FollowSymlinks::No);
            options
        };
        let lock = std::sync::Arc::new(
            state
                .open_with(LOCK_FILE, &options(false))
                .map_err(|e| journal_error("cannot open the lock", e))?
                .into_std(),
        );
        let log = state
            .open_with(LOG_FILE, &options(true))
            .map_err(|e| journal_error("cannot open the log", e))?
            .into_std();
        let log_ino = log.metadata().map(|m| m.ino()).unwrap_or(0);
        let mut journal = Journal {
            state,
            pre,
            lock,
            log,
            log_read: 0,
            log_ino,
            calls: BTreeMap::new(),
            retention,
        };
        let guard = journal.locked()?;
        journal.refresh()?;
        journal.recover(root)?;
        remove_dead_staging(&journal.state);
        drop(guard);
        Ok(journal)
    }

    /// Opens the journal of `root` only if it exists (`None` when no call was ever applied there).
    pub fn open_existing(
        root: &Root,
        retention: Retention,
    ) -> Result<Option<Journal>, EffectError> {
        match root.existing_state_dir() {
            Ok(Some(state)) if state.exists(LOG_FILE) => Journal::open(root, retention).map(Some),
            Ok(_) => Ok(None),
            Err(e) => Err(journal_error("cannot open the state directory", e)),
        }
    }

    /// Every journaled call, oldest first.
    pub fn entries(&mut self) -> Result<Vec<JournalEntry>, EffectError> {
        self.refresh_locked()?;
        Ok(self.calls.values().cloned().collect())
    }

    /// The applied call with this call ID, if the journal has one (newest first).
    pub fn find_applied(&mut self, call_id: &str) -> Result<Option<JournalEntry>, EffectError> {
        self.refresh_locked()?;
        Ok(self
            .calls
            .values()
            .rev()
            .find(|c| c.state == CallState::Applied && c.call_id.as_deref() == Some(call_id))
            .cloned())
    }

    /// The applied call of `turn` with this call ID, if the journal has one: a call that was applied
    /// (and perhaps undone since) was run once, and is not to be run again for that turn.
    pub fn find_applied_in(
        &mut self,
        turn: &str,
        call_id: &str,
    ) -> Result<Option<JournalEntry>, EffectError> {
        self.refresh_locked()?;
        Ok(self
            .calls
            .values()
            .find(|c| {
                matches!(
                    c.state,
                    CallState::Applied | CallState::Undo | CallState::Undone
                ) && c.turn.as_deref() == Some(turn)
                    && c.call_id.as_deref() == Some(call_id)
            })
            .cloned())
    }

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
        let mut fresh = Lower::new(
            root.dir()
                .try_clone()
                .map_err(|e| journal_error("cannot open the root", e))?,
        );
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
        };
        // Written now, made durable in `perform` together with the pre-image links.
        self.append(&entry_event(&entry, CallState::Intent), false)?;
        self.calls.insert(seq, entry.clone());
        let result = self.perform(&mut fresh, changes, &entry);
        let state = match &result {
            Ok(()) => CallState::Applied,
            Err(_) => CallState::RolledBack,
        };
        self.append(&state_event(seq, state), false)?;
        if let Some(call) = self.calls.get_mut(&seq) {
            call.state = state;
        }
        result?;
        self.prune()?;
        drop(guard);
        Ok(self.calls.get(&seq).cloned())
    }

    /// Links the pre-images, makes the intent durable, then moves every change into place; on a failure,
    /// puts back what was done.
    fn perform(
        &mut self,
        fresh: &mut Lower,
        changes: &ChangeSet,
        entry: &JournalEntry,
    ) -> Result<(), EffectError> {
        crash_point("intent");
        self.make_durable(changes)?;
        crash_point("durable");
        let staging = changes.staging();
        let mut done: Vec<usize> = Vec::new();
        for (index, (change, recorded)) in changes.changes().iter().zip(&entry.changes).enumerate()
        {
            match self.move_into_place(fresh, staging, change, recorded) {
                Ok(()) => {
                    done.push(index);
                    crash_point("moved-one");
                }
                Err(error) => {
                    for &undo in done.iter().rev() {
                        let _ = self.put_back(fresh, &entry.changes[undo]);
                    }
                    // A replace that failed half-way may have left the new content under its
                    // pre-image's name; it is nobody's pre-image.
                    if let Some(pre) = &entry.changes[index].pre
                        && entry.changes[index].kind == ChangeKind::Replace
                    {
                        let _ = self.pre.remove_file(pre);
                    }
                    return Err(error);
                }
            }
        }
        crash_point("moved-all");
        Ok(())
    }

    /// Makes the intent and every staged file durable before anything moves. On Linux that is one
    /// `syncfs` of the root's filesystem (which holds both): the same single flush a native durable
    /// write does. Elsewhere each file is synced on its own.
    fn make_durable(&self, changes: &ChangeSet) -> Result<(), EffectError> {
        #[cfg(target_os = "linux")]
        {
            let _ = changes;
            rustix::fs::syncfs(&self.log)
                .map_err(|e| journal_error("cannot sync the filesystem", e))
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.log
                .sync_data()
                .map_err(|e| journal_error("cannot sync the log", e))?;
            for change in changes.changes() {
                if let Some(staged) = change.staged() {
                    staged
                        .file
                        .sync_all()
                        .map_err(|e| EffectError::io(&change.path, &e))?;
                }
            }
            Ok(())
        }
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
        match change.kind {
            ChangeKind::Delete | ChangeKind::RemoveDir => {
                let pre = recorded.pre.as_deref().unwrap_or_default();
                parent.rename(name, &self.pre, pre).map_err(io)
            }
            ChangeKind::MakeDir => parent.create_dir(name).map_err(io),
            ChangeKind::Create | ChangeKind::Replace => {
                let (Some(staged), Some(staging)) = (change.staged(), staging) else {
                    return Err(journal_error("a staged file is missing", &change.path));
                };
                if change.kind == ChangeKind::Create {
                    // Never over something that appeared since the check.
                    return rename_no_replace(staging.dir(), &staged.name, &parent, name)
                        .map_err(io);
                }
                // The new content keeps the old file's permissions.
                let mode = parent.symlink_metadata(name).map_err(io)?.mode();
                staged
                    .file
                    .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(io)?;
                // The new content goes under the pre-image's name, then trades places with the old:
                // the target always holds one whole file, and is never linked twice.
                let pre = recorded.pre.as_deref().unwrap_or_default();
                staging
                    .dir()
                    .rename(&staged.name, &self.pre, pre)
                    .map_err(io)?;
                exchange(&self.pre, pre, &parent, name).map_err(io)
            }
        }
    }

    /// Puts back what a change did (rollback and undo): the pre-image returns, a new entry goes.
    fn put_back(&self, fresh: &mut Lower, change: &JournalChange) -> io::Result<()> {
        let path = RelPath::parse(&change.path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad path in journal"))?;
        let (parent, name) =
            parent_of(fresh, &path).map_err(|e| io::Error::other(e.to_string()))?;
        match change.kind {
            ChangeKind::Create => parent.remove_file(name),
            ChangeKind::MakeDir => parent.remove_dir(name),
            ChangeKind::Replace | ChangeKind::Delete | ChangeKind::RemoveDir => {
                let pre = change.pre.as_deref().unwrap_or_default();
                self.pre.rename(pre, &parent, name)
            }
        }
    }

    /// Undoes calls: each must be applied, and every file it changed must still be as it left it;
    /// otherwise nothing is restored. A turn's calls are undone newest first.
    pub fn undo(&mut self, root: &Root, target: &UndoTarget) -> Result<Undone, UndoError> {
        let failed = |e: EffectError| UndoError::Journal(e.to_string());
        let guard = self.locked().map_err(failed)?;
        self.refresh().map_err(failed)?;
        self.recover(root).map_err(failed)?;
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
        let mut fresh = Lower::new(
            root.dir()
                .try_clone()
                .map_err(|e| UndoError::Journal(e.to_string()))?,
        );
        // Check everything first, newest call first, as if the later calls were already undone.
        let mut expected: HashMap<String, Expected> = HashMap::new();
        for call in &chosen {
            let name = call
                .call_id
                .clone()
                .unwrap_or_else(|| format!("#{}", call.seq));
            for change in call.changes.iter().rev() {
                let now = match expected.get(&change.path) {
                    Some(state) => state.clone(),
                    None => current(&mut fresh, &change.path)?,
                };
                let gone = |child: &str| expected.get(child) == Some(&Expected::Absent);
                if let Err(detail) = matches_after(&now, change, &self.pre, &gone) {
                    return Err(UndoError::Changed {
                        path: change.path.clone(),
                        call: name,
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

    /// Settles calls a crashed process left half-done. Called with the lock held.
    fn recover(&mut self, root: &Root) -> Result<(), EffectError> {
        let open: Vec<JournalEntry> = self
            .calls
            .values()
            .filter(|c| matches!(c.state, CallState::Intent | CallState::Undo))
            .cloned()
            .collect();
        if !open.is_empty() {
            let mut fresh = Lower::new(
                root.dir()
                    .try_clone()
                    .map_err(|e| journal_error("cannot open the root", e))?,
            );
            for call in open {
                let state = self.settle(&mut fresh, &call);
                self.append(&state_event(call.seq, state), true)?;
                if let Some(entry) = self.calls.get_mut(&call.seq) {
                    entry.state = state;
                }
            }
        }
        Ok(())
    }

    /// Settles one unfinished call: an intent whose every change is in place is applied, any other is
    /// rolled back; an unfinished undo is finished.
    fn settle(&self, fresh: &mut Lower, call: &JournalEntry) -> CallState {
        // Entries the call itself made: a directory it made may hold them.
        let made: BTreeSet<&str> = call
            .changes
            .iter()
            .filter(|c| matches!(c.kind, ChangeKind::Create | ChangeKind::MakeDir))
            .map(|c| c.path.as_str())
            .collect();
        let gone = |child: &str| made.contains(child);
        // A replace cut inside `exchange`'s fallback left the old file under `<pre>.old`: finish its
        // last step first, so the old file is where the journal says it is.
        for change in &call.changes {
            if let (ChangeKind::Replace, Some(pre)) = (change.kind, &change.pre) {
                let aside = format!("{pre}.old");
                if self.pre.exists(&aside) {
                    let _ = self.pre.rename(&aside, &self.pre, pre);
                }
            }
        }
        if call.state == CallState::Undo {
            for change in call.changes.iter().rev() {
                if let Ok(now) = current_io(fresh, &change.path) {
                    let nothing_left = |_: &str| false;
                    if matches_after(&now, change, &self.pre, &nothing_left).is_ok() {
                        let _ = self.put_back(fresh, change);
                    }
                }
            }
            return CallState::Undone;
        }
        let in_place: Vec<bool> = call
            .changes
            .iter()
            .map(|change| {
                current_io(fresh, &change.path)
                    .map(|now| {
                        matches_after(&now, change, &self.pre, &gone).is_ok()
                            && moved(change, &self.pre)
                    })
                    .unwrap_or(false)
            })
            .collect();
        if in_place.iter().all(|done| *done) {
            return CallState::Applied;
        }
        for (change, done) in call.changes.iter().zip(&in_place).rev() {
            if *done {
                let _ = self.put_back(fresh, change);
            } else if change.kind == ChangeKind::Replace
                && let Some(pre) = &change.pre
            {
                let _ = self.pre.remove_file(pre);
            }
        }
        CallState::RolledBack
    }

    /// Drops the oldest finished calls (and their pre-images) while the journal is over its retention.
    fn prune(&mut self) -> Result<(), EffectError> {
        let finished = |c: &JournalEntry| {
            matches!(
                c.state,
                CallState::Applied | CallState::Undone | CallState::RolledBack
            )
        };
        let mut bytes: u64 = self.calls.values().map(JournalEntry::pre_bytes).sum();
        if self.calls.len() <= self.retention.max_calls && bytes <= self.retention.max_bytes {
            return Ok(());
        }
        // Prune down to nine tenths of the bounds, so the log is not rewritten at every call.
        let keep_calls = self.retention.max_calls - self.retention.max_calls / 10;
        let keep_bytes = self.retention.max_bytes - self.retention.max_bytes / 10;
        let mut dropped = BTreeSet::new();
        for call in self.calls.values() {
            if self.calls.len() - dropped.len() <= keep_calls && bytes <= keep_bytes {
                break;
            }
            if !finished(call) {
                break;
            }
            dropped.insert(call.seq);
            bytes -= call.pre_bytes();
        }
        if dropped.is_empty() {
            return Ok(());
        }
        let kept: Vec<&JournalEntry> = self
            .calls
            .values()
            .filter(|c| !dropped.contains(&c.seq))
            .collect();
        let mut text = String::new();
        for call in &kept {
            text.push_str(
                &serde_json::to_string(&entry_event(call, CallState::Intent)).unwrap_or_default(),
            );
            text.push('\n');
            if call.state != CallState::Intent {
                text.push_str(
                    &serde_json::to_string(&state_event(call.seq, call.state)).unwrap_or_default(),
                );
                text.push('\n');
            }
        }
        let temp = format!("{LOG_FILE}.{}.tmp", std::process::id());
        let write = || -> io::Result<()> {
            let mut file = self
                .state
                .open_with(
                    &temp,
                    OpenOptions::new().write(true).create(true).truncate(true),
                )?
                .into_std();
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            self.state.rename(&temp, &self.state, LOG_FILE)?;
            sync_dir(&self.state)
        };
        write().map_err(|e| journal_error("cannot rewrite the log", e))?;
        for seq in &dropped {
            if let Some(call) = self.calls.remove(seq) {
                for change in &call.changes {
                    if let Some(pre) = &change.pre {
                        let _ = if change.kind == ChangeKind::RemoveDir {
                            self.pre.remove_dir(pre)
                        } else {
                            self.pre.remove_file(pre)
                        };
                    }
                }
            }
        }
        self.reopen_log()
    }

    fn reopen_log(&mut self) -> Result<(), EffectError> {
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        self.log = self
            .state
            .open_with(LOG_FILE, &options)
            .map_err(|e| journal_error("cannot reopen the log", e))?
            .into_std();
        self.log_ino = self.log.metadata().map(|m| m.ino()).unwrap_or(0);
        self.log_read = self.log.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(())
    }

    /// Takes the root's journal lock until the guard is dropped.
    fn locked(&self) -> Result<LockGuard, EffectError> {
        self.lock
            .lock()
            .map_err(|e| journal_error("cannot lock the journal", e))?;
        Ok(LockGuard(self.lock.clone()))
    }

    /// [`Journal::refresh`] under the lock, for a read.
    fn refresh_locked(&mut self) -> Result<(), EffectError> {
        let _guard = self.locked()?;
        self.refresh()
    }

    /// Folds whatever other processes appended since the last look (or everything, after a prune by
    /// another process replaced the log). Called with the lock held.
    fn refresh(&mut self) -> Result<(), EffectError> {
        let on_disk = self
            .state
            .symlink_metadata(LOG_FILE)
            .map_err(|e| journal_error("cannot stat the log", e))?;
        if on_disk.ino() != self.log_ino {
            self.reopen_log()?;
            self.calls.clear();
            self.log_read = 0;
        }
        let length = self
            .log
            .metadata()
            .map_err(|e| journal_error("cannot stat the log", e))?
            .len();
        if length == self.log_read {
            return Ok(());
        }
        let mut text = Vec::new();
        self.log
            .seek(io::SeekFrom::Start(self.log_read))
            .and_then(|_| {
                (&self.log)
                    .take(length - self.log_read)
                    .read_to_end(&mut text)
            })
            .map_err(|e| journal_error("cannot read the log", e))?;
        // A last line without its newline was being written when its writer died, and was never
        // durable: cut it off.
        let complete = text
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        if complete < text.len() {
            self.log
                .set_len(self.log_read + complete as u64)
                .map_err(|e| journal_error("cannot trim the log", e))?;
        }
        for line in text[..complete].split(|b| *b == b'\n') {
            if line.is_empty() {
                continue;
            }
            let event: Event = serde_json::from_slice(line)
                .map_err(|e| journal_error("a journal line does not parse", e))?;
            self.fold(event);
        }
        self.log_read += complete as u64;
        Ok(())
    }

    fn fold(&mut self, event: Event) {
        match event.call {
            Some(call) => {
                self.calls.insert(
                    event.seq,
                    JournalEntry {
                        seq: event.seq,
                        call_id: call.call_id,
                        turn: call.turn,
                        tool: call.tool,
                        time_ms: call.time_ms,
                        changes: call.changes,
                        output: call.output,
                        state: event.event,
                    },
                );
            }
            None => {
                if let Some(entry) = self.calls.get_mut(&event.seq) {
                    entry.state = event.event;
                }
            }
        }
    }

    /// Appends one event; `durable` makes it reach the disk before returning.
    fn append(&mut self, event: &Event, durable: bool) -> Result<(), EffectError> {
        let mut line = serde_json::to_vec(event).map_err(|e| journal_error("encoding", e))?;
        line.push(b'\n');
        self.log
            .write_all(&line)
            .map_err(|e| journal_error("cannot write the log", e))?;
        if durable {
            self.log
                .sync_data()
                .map_err(|e| journal_error("cannot sync the log", e))?;
        }
        self.log_read += line.len() as u64;
        Ok(())
    }
}

/// A worker's exclusive hold on a root for a whole job (see the module docs): an exclusive `flock` on
/// `.turngate/lease`, released when dropped, or by the kernel when the process dies.
#[derive(Debug)]
pub struct Lease {
    /// Open for as long as the lease is held: closing it releases the lock.
    _locked: File,
}

impl Lease {
    /// Takes the lease of `root` if no other process (or task) holds it; `None` when one does.
    pub fn try_take(root: &Root) -> Result<Option<Lease>, EffectError> {
        let state = root
            .state_subdir(PRE_DIR)
            .and_then(|_| root.existing_state_dir())
            .map_err(|e| journal_error("cannot open the state directory", e))?
            .ok_or_else(|| journal_error("the state directory", "vanished"))?;
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true);
        cap_fs_ext::OpenOptionsFollowExt::follow(&mut options, cap_fs_ext::FollowSymlinks::No);
        let file = state
            .open_with(LEASE_FILE, &options)
            .map_err(|e| journal_error("cannot open the lease", e))?
            .into_std();
        match file.try_lock() {
            Ok(()) => Ok(Some(Lease { _locked: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(journal_error("cannot take the lease", e)),
        }
    }
}

/// Holds the journal lock; releases it when dropped.
struct LockGuard(std::sync::Arc<File>);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn entry_event(entry: &JournalEntry, state: CallState) -> Event {
    Event {
        seq: entry.seq,
        event: state,
        call: Some(EventCall {
            call_id: entry.call_id.clone(),
            turn: entry.turn.clone(),
            tool: entry.tool.clone(),
            time_ms: entry.time_ms,
            changes: entry.changes.clone(),
            output: entry.output.clone(),
        }),
    }
}

fn state_event(seq: u64, state: CallState) -> Event {
    Event {
        seq,
        event: state,
        call: None,
    }
}

/// The parent directory of `path` (reached through real directories only) and the last component.
fn parent_of<'p>(
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

/// The state of a path as undo and recovery compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
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

fn current_io(fresh: &mut Lower, path: &str) -> io::Result<Expected> {
    let location = RelPath::parse(path)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad path in journal"))?;
    let Some(entry) = fresh.entry(&location)? else {
        return Ok(Expected::Absent);
    };
    Ok(match entry.kind {
        EntryKind::File => {
            let (file, _) = fresh.open_file(&location)?;
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
fn matches_after(
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
    if let Some(name) = &change.pre
        && !pre.exists(name)
    {
        return Err("its pre-image is missing from the journal".into());
    }
    Ok(())
}

/// Whether a change that removes or replaces has put its old entry in `pre/` (recovery: a replace whose
/// `pre/` entry still holds the new content had not traded places yet).
fn moved(change: &JournalChange, pre: &Dir) -> bool {
    match (&change.kind, &change.pre) {
        (ChangeKind::Replace, Some(name)) => {
            let held = pre
                .open(name)
                .and_then(|file| hash_reader(file.into_std()))
                .ok();
            held.is_some() && held == change.before
        }
        (ChangeKind::Delete | ChangeKind::RemoveDir, Some(name)) => pre.exists(name),
        _ => true,
    }
}

/// Swaps two directory entries atomically (`renameat2(RENAME_EXCHANGE)`). Where the filesystem cannot,
/// the old entry is linked aside, the new one renamed over it, and the old one moved to where the new
/// one was: the same end state, with the old file linked twice for a moment.
fn exchange(a_dir: &Dir, a: &str, b_dir: &Dir, b: &str) -> io::Result<()> {
    use rustix::fs::{RenameFlags, renameat_with};
    match renameat_with(a_dir, a, b_dir, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(e) if unsupported(e) => {
            let aside = format!("{a}.old");
            b_dir.hard_link(b, a_dir, &aside)?;
            a_dir.rename(a, b_dir, b)?;
            a_dir.rename(&aside, a_dir, a)
        }
        Err(e) => Err(e.into()),
    }
}

/// Renames `from` to `to` unless `to` exists (`renameat2(RENAME_NOREPLACE)`; elsewhere a link, which
/// fails when the name is taken, and an unlink).
fn rename_no_replace(from_dir: &Dir, from: &str, to_dir: &Dir, to: &str) -> io::Result<()> {
    use rustix::fs::{RenameFlags, renameat_with};
    match renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if unsupported(e) => {
            from_dir.hard_link(from, to_dir, to)?;
            from_dir.remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `renameat2` with flags is not available on this system or filesystem.
fn unsupported(error: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    error == Errno::INVAL || error == Errno::NOSYS || error == Errno::NOTSUP
}

/// `fsync` of a directory, through a descriptor opened for reading (a directory handle may not allow it).
fn sync_dir(dir: &Dir) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    cap_fs_ext::OpenOptionsMaybeDirExt::maybe_dir(&mut options, true);
    dir.open_with(".", &options)?.sync_all()
}

/// Removes what processes that no longer exist left in the staging directory: their staged files
/// (`<pid>-...`), and their staging directories (where earlier versions staged).
fn remove_dead_staging(state: &Dir) {
    let Ok(staging) = cap_fs_ext::DirExt::open_dir_nofollow(state, STAGING_DIR) else {
        return;
    };
    let Ok(entries) = staging.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        let alive = pid.is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok());
        if alive {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = staging.remove_dir_all(&name);
        } else {
            let _ = staging.remove_file(&name);
        }
    }
}
