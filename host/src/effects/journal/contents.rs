//! What an applied change's file held before and after the call, read back for showing (the
//! console's diffs): the pre-image from `pre/`, and the new content from the root while it is still
//! what the call left, else from the pre-image of a later applied call that replaced or removed it
//! (what one call wrote is what the next call on the file kept). Each is held to the SHA-256 the
//! journal recorded, read without following a link, and only up to a limit; this is for showing,
//! never for restoring (undo checks for itself).
//!
//! The journal keeps pre-images, not what a call wrote: once an edit outside the journal replaced a
//! file (or the call that replaced it was undone or pruned), the content the call left there is gone,
//! and only its hash and size remain in the log.

use std::io::Read;

use super::undo::open_regular;
use super::{CallState, Journal, JournalChange, JournalEntry};
use crate::effects::{ChangeKind, Content, hash_reader};
use crate::root::Root;

/// A side of a change as it can be shown: its bytes (`None`: no file on that side), or why they are
/// not shown.
pub type Shown = Result<Option<Vec<u8>>, String>;

impl Journal {
    /// The content before and after `change` of `call`, each at most `limit` bytes (`None` where no
    /// file is on that side), or why it is not shown (too large, no longer kept).
    pub fn change_contents(
        &self,
        root: &Root,
        call: &JournalEntry,
        change: &JournalChange,
        limit: u64,
    ) -> (Shown, Shown) {
        if matches!(change.kind, ChangeKind::MakeDir | ChangeKind::RemoveDir) {
            return (Err("a directory".into()), Err("a directory".into()));
        }
        if call.state != CallState::Applied {
            let why = "the call is no longer applied: the journal keeps only hashes of what it did";
            return (Err(why.into()), Err(why.into()));
        }
        let before = match (&change.before, change.pre.as_deref()) {
            (None, _) => Ok(None),
            (Some(before), Some(pre)) => read_checked(&self.pre, pre, before, limit)
                .map(Some)
                .map_err(|why| format!("the pre-image is not shown: {why}")),
            (Some(_), None) => Err("the journal keeps no pre-image".to_owned()),
        };
        let after = match &change.after {
            None => Ok(None),
            Some(after) => read_checked(root.dir(), &change.path, after, limit)
                .or_else(|why| self.kept_by_a_later_call(call, after, limit).ok_or(why))
                .map(Some)
                .map_err(|why| {
                    format!(
                        "not shown: {why} (the journal keeps only the hash of what the call wrote)"
                    )
                }),
        };
        (before, after)
    }

    /// `content`, written by `call`, as a later applied call kept it: the first pre-image of a call
    /// after it that holds exactly that content (the file's next version may have come from anywhere;
    /// the hash tells whether it is the one).
    fn kept_by_a_later_call(
        &self,
        call: &JournalEntry,
        content: &Content,
        limit: u64,
    ) -> Option<Vec<u8>> {
        self.calls
            .range(call.seq + 1..)
            .filter(|(_, later)| later.state == CallState::Applied)
            .flat_map(|(_, later)| &later.changes)
            .filter(|change| change.before.as_ref() == Some(content))
            .find_map(|change| read_checked(&self.pre, change.pre.as_deref()?, content, limit).ok())
    }
}

/// The regular file `name` in `dir` if it holds `expected`, read up to `limit` bytes.
fn read_checked(
    dir: &cap_std::fs::Dir,
    name: &str,
    expected: &Content,
    limit: u64,
) -> Result<Vec<u8>, String> {
    if expected.size > limit {
        return Err(format!("{} bytes, more than {limit}", expected.size));
    }
    let mut file = open_regular(dir, name).map_err(|_| "the file is gone".to_owned())?;
    let mut bytes = Vec::new();
    (&mut file)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if hash_reader(&bytes[..]).ok().as_ref() != Some(expected) {
        return Err("the file changed since the call".into());
    }
    Ok(bytes)
}
