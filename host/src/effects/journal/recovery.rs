//! Settling what a crashed process left: calls whose intent has no ending, undos cut half-way, and the
//! files dead processes staged.
//!
//! First, after a power loss, the calls written ahead in the boot before are rolled forward from the log
//! ([`super::ahead`]). Then, of the calls a dead process left unfinished, one whose every change is in
//! place is marked applied (and can be undone); any other is rolled back from its pre-images; an
//! unfinished undo is finished. So after a crash each file holds its old or its new content, and every
//! effect that survived can be undone.

use std::collections::BTreeSet;

use cap_std::fs::Dir;

use super::log::state_event;
use super::undo::{current_io, matches_after, pre_image_matches};
use super::{CallState, Journal, JournalChange, JournalEntry, journal_error};
use crate::effects::{ChangeKind, EffectError};
use crate::lower::Lower;
use crate::platform;
use crate::root::Root;
use crate::view::staging::STAGING_DIR;

impl Journal {
    /// Settles calls a crashed process left half-done. Called with the lock held.
    pub(super) fn recover(&mut self, root: &Root) -> Result<(), EffectError> {
        self.settle_exchanges_cut();
        self.roll_forward_lost(root)?;
        // Newest first, as undo goes: the calls of a turn are all marked for undo before the first is
        // put back, and an older call's files are as it left them only once the newer ones are undone.
        // (Of the applies, only the newest can be unfinished: the next call's intent flushes the log
        // with every mark before it.)
        let open: Vec<JournalEntry> = self
            .calls
            .values()
            .rev()
            .filter(|c| matches!(c.state, CallState::Intent | CallState::Undo))
            .cloned()
            .collect();
        if !open.is_empty() {
            let mut fresh = Lower::of(root);
            for call in open {
                let state = self.settle(&mut fresh, &call);
                // What the dead process moved, and what settling moved back, reaches the disk
                // before the call's ending does.
                self.sync_moved(&mut fresh, &call.changes)
                    .map_err(|e| journal_error("cannot sync a directory", e))?;
                self.append(&state_event(call.seq, state), true)?;
                if let Some(entry) = self.calls.get_mut(&call.seq) {
                    entry.state = state;
                }
                if state == CallState::RolledBack {
                    self.ahead.remove(&call.seq);
                }
            }
        }
        Ok(())
    }

    /// Settles what a cut left of `exchange`'s fallback (`moves.rs`: the old entry linked aside as
    /// `<pre>.old`, the new one renamed over it, the aside renamed to `<pre>`) in every change that
    /// trades places with its pre-image and may not have finished: of an unfinished apply or undo, and
    /// of a call written ahead in an earlier boot, whose exchanges a power loss may have cut (a call
    /// of this boot that was marked applied finished its exchanges), before anything looks at their
    /// pre-images. Cut after the rename into place, the aside is the entry that left: it takes the
    /// pre-image's name. Cut before, `<pre>` is still whole and the aside only links the entry still in
    /// place a second time: it goes.
    fn settle_exchanges_cut(&self) {
        let unfinished =
            |call: &&JournalEntry| matches!(call.state, CallState::Intent | CallState::Undo);
        // The calls written ahead are looked up from the few still waiting to be settled, not the
        // other way round: this runs before every apply, and the journal keeps a thousand calls.
        let lost = self
            .ahead
            .iter()
            .filter(|(_, ahead)| ahead.lost_with_the_power())
            .filter_map(|(seq, _)| self.calls.get(seq))
            .filter(|call| !unfinished(call));
        for call in self.calls.values().filter(unfinished).chain(lost) {
            for change in &call.changes {
                let (ChangeKind::Replace, Some(pre)) = (change.kind, &change.pre) else {
                    continue;
                };
                let aside = format!("{pre}.old");
                if self.pre.symlink_metadata(&aside).is_err() {
                    continue;
                }
                let _ = if self.pre.symlink_metadata(pre).is_ok() {
                    self.pre.remove_file(&aside)
                } else {
                    self.pre.rename(&aside, &self.pre, pre)
                };
            }
        }
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
}

/// Whether a change that removes or replaces has put its old entry in `pre/` (a replace whose `pre/`
/// entry still holds the new content had not traded places yet).
fn moved(change: &JournalChange, pre: &Dir) -> bool {
    match (&change.kind, &change.pre) {
        (ChangeKind::Replace, Some(_)) => pre_image_matches(pre, change).is_ok(),
        (ChangeKind::Delete | ChangeKind::RemoveDir, Some(name)) => {
            pre.symlink_metadata(name).is_ok()
        }
        _ => true,
    }
}

/// Removes what processes that no longer exist left in the staging directory: their staged files
/// (`<pid>@<boot>-...`, named by [`platform::process_mark`]: a process of another boot is dead
/// whoever has its ID now), and their staging directories (where earlier versions staged, `<pid>-...`).
pub(super) fn remove_dead_staging(state: &Dir) {
    let Ok(staging) = cap_fs_ext::DirExt::open_dir_nofollow(state, STAGING_DIR) else {
        return;
    };
    let Ok(entries) = staging.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mark = name.split('-').next().unwrap_or_default();
        if platform::process_alive(mark) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = staging.remove_dir_all(&name);
        } else {
            let _ = staging.remove_file(&name);
        }
    }
}
