//! The journal of applied calls: how a change set is applied crash-consistently, and how it is undone.
//!
//! It lives in the root's state directory (`.turngate/`, found from the root alone, never visible to a
//! tool):
//!
//! * `journal.jsonl`: one JSON object per event, appended: a call's `intent` (its call ID, turn, tool,
//!   time, output and every change with the SHA-256 before and after and the name of its pre-image;
//!   for a small call, its new content too, written ahead: [`ahead`]), then `applied` or
//!   `rolled_back`; later `settled`, `undo` (intent) and `undone` ([`log`]);
//! * `pre/`: the pre-images: the very inode a change replaced or removed, moved there (a replace trades
//!   places with the new content by an atomic exchange, so the target never has two links), so undo
//!   restores it byte-identical with a rename;
//! * `lock`: every apply, undo and recovery holds an exclusive lock on it, so two processes (or
//!   workers) never apply to the same root at once;
//! * `staging/`: the files the views stage, each named by its process and boot (recovery removes those
//!   of a process that is gone, and after a reboot those of every earlier process);
//! * `lease`: a worker holds an exclusive lock on it ([`Lease`]) for a whole job on the root;
//! * `damaged/`: logs found damaged, kept aside for the user ([`log`]).
//!
//! Nothing found in the state directory is trusted: its files are opened without following links and
//! held to what was opened ([`state`]); a link, a special file or a hard-linked file where turngate
//! expects its own is refused, naming it ([`EffectError::Foreign`]).
//!
//! The steps live apart: [`apply`] (check, make durable, move into place, each move verified),
//! [`ahead`] (the content written ahead, settling it, rolling it forward after a power loss),
//! [`durable`] (the flushes),
//! [`recovery`] (settling what a crashed process left), [`undo`], [`contents`] (a change's
//! content read back for showing), [`retention`] (pruning), and the
//! moves themselves ([`moves`]).
//!
//! Retention ([`Retention`]) is bounded by count and by pre-image bytes; the oldest finished calls are
//! pruned first (they can then no longer be undone).
//!
//! # Through a power loss
//!
//! A power loss keeps what was flushed and may drop anything else: a file's unflushed data (it comes
//! back empty), and of the metadata the file system had not committed, any tail. What held the
//! promise (each file old or new, what is listed applied is on disk, every applied call undoable)
//! at every such cut, proven on a file system that drops exactly that (`tests/power_loss.rs`), and
//! what broke it before:
//!
//! * A call written ahead leaves its file's data to the kernel until it is settled. When a later call
//!   replaced or removed that file first, the file moved into `pre/` as the later call's pre-image
//!   with its data still unflushed, and both settling (which flushed a call's files only where it had
//!   put them) and roll-forward (which left a path a later call had moved on to that call) passed it
//!   over: after a power loss the pre-image was empty, and both calls were listed applied (one with an
//!   empty file, the other undoable only into an empty file). Now settling flushes a call's file
//!   where it is, in place or as a later call's pre-image, and roll-forward writes it again there from
//!   the log (`ahead.rs`: `moved_on_to`, a pre-image recognized as the call's file by its inode).
//! * Roll-forward recognized the call's own file, whose data a power loss took, by device and inode.
//!   A device number is the boot's (a FUSE mount gets a new one at each mount, disks may be numbered
//!   otherwise), so after the reboot no file was recognized and the file stayed empty under a call
//!   listed applied. Now the inode number is compared ([`ahead`]).
//! * On a file system without `RENAME_EXCHANGE` (LazyFS, NFS, many FUSE file systems) an exchange is
//!   a link aside, a rename and a rename back ([`moves`]); cut between them, roll-forward found the
//!   pre-image missing ("is missing from the journal") or tripped over the aside ("File exists").
//!   Recovery now settles a cut fallback first, before anything looks at a pre-image
//!   ([`recovery`]).
//! * A turn's undo marks each of its calls before putting back the newest first; recovery settled
//!   an undo cut half-way oldest first, so an older call found a newer call's content, took it for
//!   someone else's change and was marked undone with nothing put back. Recovery now goes newest first.
//! * A staged file was named by its process's ID; after a reboot a new process may have that ID, and
//!   what the dead one left (on a file system without `RENAME_NOREPLACE`, a second link of a file just
//!   created) stayed, so the file could not be undone. Staged files now name the boot too.

mod ahead;
mod apply;
mod contents;
pub(crate) mod durable;
mod lease;
mod log;
pub(crate) mod moves;
mod recovery;
mod retention;
pub(crate) mod state;
mod undo;

use std::collections::BTreeMap;
use std::fs::File;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::{ChangeKind, Content, EffectError};
use crate::root::{Root, STATE_DIR};

pub use self::contents::Shown;
pub use self::lease::Lease;
pub use self::retention::Retention;
pub use self::undo::{UndoError, UndoTarget, Undone};

/// The log's file name in the state directory.
pub const LOG_FILE: &str = "journal.jsonl";
/// The pre-images' directory in the state directory.
pub const PRE_DIR: &str = "pre";
/// The lock file in the state directory.
pub const LOCK_FILE: &str = "lock";
/// The workers' lease file in the state directory.
pub const LEASE_FILE: &str = "lease";
/// Where damaged logs are kept aside, in the state directory.
pub const DAMAGED_DIR: &str = "damaged";

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
    /// Why the journal cannot vouch for this call (its record was damaged, or a pre-image is missing):
    /// it cannot be undone. `None` for a sound record.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub damage: Option<String>,
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

/// A page of the journal ([`Journal::newest_page`]).
#[derive(Debug, Clone)]
pub struct JournalPage {
    /// The page's calls, newest first.
    pub calls: Vec<JournalEntry>,
    /// Whether older calls follow.
    pub more: bool,
    /// How many calls were shown in all, on every page.
    pub total: usize,
}

/// A root's journal, opened for reading or applying.
pub struct Journal {
    state: Dir,
    pre: Dir,
    lock: std::sync::Arc<File>,
    log: File,
    /// Bytes of the log folded into `calls`: where the next line is written (the log only grows
    /// between rewrites).
    log_read: u64,
    /// The log's size, its room included.
    log_len: u64,
    /// The log's device and inode, from the descriptor's `fstat`.
    log_object: (u64, u64),
    calls: BTreeMap<u64, JournalEntry>,
    /// The content of the calls written ahead and not yet settled, by sequence number.
    ahead: BTreeMap<u64, ahead::Ahead>,
    retention: Retention,
    /// Whether the entries an apply relies on (the state directory's in the root, the log's in the
    /// state directory) are durable: flushed by this journal, or by an earlier one (the log's layout
    /// line).
    layout_durable: bool,
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

/// The state directory of `root`, made when missing; refused when something else stands there.
fn state_dir(root: &Root) -> Result<Dir, EffectError> {
    state::open_own_dir(root.dir(), ".", STATE_DIR)
}

impl Journal {
    /// Opens (creating when missing) the journal of `root`, settling anything a crashed process left
    /// and keeping aside a log found damaged.
    pub fn open(root: &Root, retention: Retention) -> Result<Journal, EffectError> {
        let state = state_dir(root)?;
        let pre = state::open_own_dir(&state, STATE_DIR, PRE_DIR)?;
        let lock = std::sync::Arc::new(state::open_own_file(&state, STATE_DIR, LOCK_FILE)?);
        let log = state::open_own_file(&state, STATE_DIR, LOG_FILE)?;
        let log_object = log::object_of(
            &log.metadata()
                .map_err(|e| journal_error("cannot stat the log", e))?,
        );
        let mut journal = Journal {
            state,
            pre,
            lock,
            log,
            log_read: 0,
            log_len: 0,
            log_object,
            calls: BTreeMap::new(),
            ahead: BTreeMap::new(),
            retention,
            layout_durable: false,
        };
        let guard = journal.locked()?;
        journal.remove_temporaries();
        journal.refresh()?;
        journal.recover(root)?;
        recovery::remove_dead_staging(&journal.state);
        drop(guard);
        Ok(journal)
    }

    /// Opens the journal of `root` only if it exists (`None` when no call was ever applied there).
    /// Whatever stands at the log's name counts: a link there is refused by [`Journal::open`], not
    /// taken for a missing journal.
    pub fn open_existing(
        root: &Root,
        retention: Retention,
    ) -> Result<Option<Journal>, EffectError> {
        match root.existing_state_dir() {
            Ok(Some(state)) if state.symlink_metadata(LOG_FILE).is_ok() => {
                Journal::open(root, retention).map(Some)
            }
            Ok(_) => Ok(None),
            Err(e) => Err(journal_error("cannot open the state directory", e)),
        }
    }

    /// Every journaled call, oldest first, each with what the journal knows to be wrong with it (a
    /// damaged record, a missing pre-image) in `damage`.
    pub fn entries(&mut self) -> Result<Vec<JournalEntry>, EffectError> {
        self.refresh_locked()?;
        Ok(self
            .calls
            .values()
            .map(|call| {
                let mut call = call.clone();
                if call.damage.is_none() && call.state == CallState::Applied {
                    call.damage = undo::missing_pre_image(&self.pre, &call);
                }
                call
            })
            .collect())
    }

    /// A page of the journal, newest first: at most `limit` of the calls `shown` holds whose sequence
    /// number is below `before` (all when `None`), each with its `damage` as [`Journal::entries`]
    /// gives it (only the page's calls are looked at for it), whether more follow, and how many calls
    /// `shown` holds in all. A page of a long journal costs its own calls, not the journal's.
    pub fn newest_page(
        &mut self,
        before: Option<u64>,
        limit: usize,
        shown: impl Fn(&JournalEntry) -> bool,
    ) -> Result<JournalPage, EffectError> {
        self.refresh_locked()?;
        let total = self.calls.values().filter(|call| shown(call)).count();
        let mut calls: Vec<JournalEntry> = self
            .calls
            .range(..before.unwrap_or(u64::MAX))
            .rev()
            .map(|(_, call)| call)
            .filter(|call| shown(call))
            .take(limit.saturating_add(1))
            .cloned()
            .collect();
        let more = calls.len() > limit;
        calls.truncate(limit);
        for call in &mut calls {
            if call.damage.is_none() && call.state == CallState::Applied {
                call.damage = undo::missing_pre_image(&self.pre, call);
            }
        }
        Ok(JournalPage { calls, more, total })
    }

    /// The call with sequence number `seq`, if the journal has it (with its `damage` as
    /// [`Journal::entries`] gives it).
    pub fn entry(&mut self, seq: u64) -> Result<Option<JournalEntry>, EffectError> {
        self.refresh_locked()?;
        Ok(self.calls.get(&seq).map(|call| {
            let mut call = call.clone();
            if call.damage.is_none() && call.state == CallState::Applied {
                call.damage = undo::missing_pre_image(&self.pre, &call);
            }
            call
        }))
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

    /// Removes the temporary files a process left in the state directory when it died while
    /// rewriting the log (removing a name never follows it). Called with the lock held.
    fn remove_temporaries(&self) {
        let Ok(entries) = self.state.entries() else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if state::is_temporary(&name, LOG_FILE) {
                let _ = self.state.remove_file(&name);
            }
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
