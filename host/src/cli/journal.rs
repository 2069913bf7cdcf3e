//! `turngate journal` and `turngate undo`: the root's journal of applied calls, read and reversed.
//!
//! `journal` prints one JSON object per applied call, oldest first: `{"seq", "call_id", "turn", "tool",
//! "time_ms", "time", "state": "applied"|"undone", "changes": [{"path", "kind", "before", "after"}]}`,
//! with `"damage"` naming what the journal cannot vouch for (a damaged record, a missing pre-image).
//! `undo` restores what one call (`--last`, `--seq N`, `--call ID`) or a whole turn (`--turn ID`)
//! changed and prints the calls it undid the same way.

use std::io::Write;

use serde_json::{Value, json};
use turngate::effects::journal::{CallState, JournalEntry, UndoError};
use turngate::{Journal, Retention, Root, UndoTarget};

/// How `undo` ended.
pub enum UndoEnd {
    /// Restored.
    Restored,
    /// Refused: a file changed since, or nothing to undo (the message says which).
    Refused(String),
}

/// Prints the journal of `root`.
pub fn print(root: &Root, out: &mut impl Write) -> anyhow::Result<()> {
    let Some(mut journal) = Journal::open_existing(root, Retention::default())? else {
        return Ok(());
    };
    for entry in journal.entries()? {
        if matches!(entry.state, CallState::Applied | CallState::Undone) {
            writeln!(out, "{}", entry_json(&entry))?;
        }
    }
    Ok(())
}

/// Undoes `target` in `root`'s journal.
pub fn undo(root: &Root, target: &UndoTarget, out: &mut impl Write) -> anyhow::Result<UndoEnd> {
    let Some(mut journal) = Journal::open_existing(root, Retention::default())? else {
        return Ok(UndoEnd::Refused(
            "no applied call to undo (this root has no journal)".into(),
        ));
    };
    match journal.undo(root, target) {
        Ok(undone) => {
            for entry in &undone.calls {
                writeln!(out, "{}", entry_json(entry))?;
            }
            Ok(UndoEnd::Restored)
        }
        Err(
            error @ (UndoError::Changed { .. }
            | UndoError::NothingToUndo(_)
            | UndoError::Damaged { .. }),
        ) => Ok(UndoEnd::Refused(error.to_string())),
        Err(error) => Err(error.into()),
    }
}

fn entry_json(entry: &JournalEntry) -> Value {
    let mut json = json!({
        "seq": entry.seq,
        "call_id": entry.call_id,
        "turn": entry.turn,
        "tool": entry.tool,
        "time_ms": entry.time_ms,
        "time": rfc3339(entry.time_ms),
        "state": entry.state,
        "changes": entry.changes,
    });
    if let Some(damage) = &entry.damage {
        json["damage"] = json!(damage);
    }
    json
}

/// Milliseconds since the Unix epoch as an RFC 3339 UTC timestamp.
fn rfc3339(time_ms: u64) -> String {
    let seconds = (time_ms / 1000) as i64;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        time_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339(1_796_113_122_345),
            "2026-12-01T08:18:42.345Z"
        );
        assert_eq!(super::rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
