//! The journal as the console shows it: pages of applied (and undone) calls, newest first; a call's
//! diffs; and undo, which is [`Journal::undo`], the call `turngate undo` makes.
//!
//! `GET /api/journal?before=SEQ&limit=N` answers `{"calls": [...], "next_before": SEQ|null,
//! "total": N}`: at most `limit` calls (default [`PAGE`], at most [`MAX_PAGE`]) with a sequence number
//! below `before`, each `{"seq", "call_id", "turn", "tool", "time_ms", "state", "damage", "changes":
//! [{"path", "kind", "before", "after"}]}`. `GET /api/diff?seq=N` answers `{"seq", "changes":
//! [{"path", "kind", "diff"|null, "hunks", "next", "binary", "before_note", "after_note"}]}`, each
//! diff its first page (files up to [`MAX_PAGED_FILE`]), `next` the line its next page starts at;
//! `GET /api/diff?seq=N&change=I&from=L` answers change `I`'s page from line `L`: `{"diff", "from",
//! "next", "hunks"}`. `POST /api/undo` with `{"seq": N}`
//! or `{"turn": ID}` answers 200 `{"undone": [seq...]}`, or 409 `{"error", "path"}` when refused (a file
//! changed since the call, named in both; nothing to undo; a damaged record).

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::{Body, State, diff_pages, json, query_value};
use crate::effects::diff::{MAX_PAGED_FILE, unified};
use crate::effects::journal::{CallState, JournalEntry, Shown, UndoError, UndoTarget};

/// Calls on a page unless the request asks for another number.
pub const PAGE: usize = 50;

/// Most calls on one page.
pub const MAX_PAGE: usize = 500;

/// `GET /api/journal`.
pub(super) fn page(state: &State, query: &str) -> Response<Body> {
    let before = query_value(query, "before").and_then(|v| v.parse::<u64>().ok());
    let limit = query_value(query, "limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(PAGE)
        .clamp(1, MAX_PAGE);
    let shown =
        |entry: &JournalEntry| matches!(entry.state, CallState::Applied | CallState::Undone);
    let page = state.with_journal(|journal| match journal {
        Some(journal) => journal.newest_page(before, limit, shown).map(Some),
        None => Ok(None),
    });
    let page = match page {
        Ok(Ok(page)) => page,
        Ok(Err(e)) | Err(e) => return failed(&e.to_string()),
    };
    let (calls, more, total) = match page {
        Some(page) => (page.calls, page.more, page.total),
        None => (Vec::new(), false, 0),
    };
    let next_before = if more {
        calls.last().map(|c| c.seq)
    } else {
        None
    };
    json(
        StatusCode::OK,
        &json!({
            "calls": calls.iter().map(entry_json).collect::<Vec<_>>(),
            "next_before": next_before,
            "total": total,
        }),
    )
}

/// `GET /api/diff`: every change of call `seq`, its diff's first page; with `change=I` (and `from=L`),
/// the page of change `I`'s diff from line `L`.
pub(super) fn diff(state: &State, query: &str) -> Response<Body> {
    let Some(seq) = query_value(query, "seq").and_then(|v| v.parse::<u64>().ok()) else {
        return bad_request("give seq=N");
    };
    let one = query_value(query, "change").and_then(|v| v.parse::<usize>().ok());
    let from = query_value(query, "from")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let changes = state.with_journal(|journal| {
        let journal = journal?;
        let entry = journal.entry(seq).ok()??;
        let mut out = Vec::new();
        for (index, change) in entry.changes.iter().enumerate() {
            if one.is_some_and(|one| one != index) {
                continue;
            }
            let (before, after) =
                journal.change_contents(&state.root, &entry, change, MAX_PAGED_FILE);
            out.push(shown_change(
                &change.path,
                change.kind.as_str(),
                before,
                after,
                from,
            ));
        }
        Some(out)
    });
    match (changes, one) {
        (Ok(Some(mut changes)), Some(_)) if changes.len() == 1 => {
            let change = changes.remove(0);
            json(
                StatusCode::OK,
                &json!({
                    "diff": change["diff"], "from": from, "next": change["next"], "hunks": change["hunks"]
                }),
            )
        }
        (Ok(Some(_)), Some(index)) => json(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("call {seq} has no change {index}")}),
        ),
        (Ok(Some(changes)), None) => json(StatusCode::OK, &json!({"seq": seq, "changes": changes})),
        (Ok(None), _) => json(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("the journal has no call with seq {seq}")}),
        ),
        (Err(e), _) => failed(&e.to_string()),
    }
}

/// `POST /api/undo`.
pub(super) fn undo(state: &State, body: &[u8]) -> Response<Body> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let target = match (
        request.get("seq").and_then(Value::as_u64),
        request.get("turn"),
    ) {
        (Some(seq), _) => UndoTarget::Seq(seq),
        (None, Some(Value::String(turn))) => UndoTarget::Turn(turn.clone()),
        _ => return bad_request("give {\"seq\": N} or {\"turn\": ID}"),
    };
    let undone = state.with_journal(|journal| match journal {
        Some(journal) => journal.undo(&state.root, &target),
        None => Err(UndoError::NothingToUndo(
            "this root has no journal".to_owned(),
        )),
    });
    match undone {
        Ok(Ok(undone)) => json(
            StatusCode::OK,
            &json!({"undone": undone.calls.iter().map(|c| c.seq).collect::<Vec<_>>()}),
        ),
        Ok(Err(error)) => {
            let path = match &error {
                UndoError::Changed { path, .. } => Some(path.clone()),
                UndoError::NothingToUndo(_) | UndoError::Damaged { .. } => None,
                _ => return failed(&error.to_string()),
            };
            json(
                StatusCode::CONFLICT,
                &json!({"error": error.to_string(), "path": path}),
            )
        }
        Err(e) => failed(&e.to_string()),
    }
}

/// A call as the timeline shows it (its output is left out: it can be large, and the audit log
/// has the call's record).
fn entry_json(entry: &JournalEntry) -> Value {
    json!({
        "seq": entry.seq,
        "call_id": entry.call_id,
        "turn": entry.turn,
        "tool": entry.tool,
        "time_ms": entry.time_ms,
        "state": entry.state,
        "damage": entry.damage,
        "changes": entry.changes.iter().map(|change| json!({
            "path": change.path,
            "kind": change.kind.as_str(),
            "before": change.before,
            "after": change.after,
        })).collect::<Vec<_>>(),
    })
}

/// One change's diff (the page from line `from`, where the next starts, how many hunks it has), or
/// notes saying why a side is not shown.
fn shown_change(path: &str, kind: &str, before: Shown, after: Shown, from: usize) -> Value {
    let note = |side: &Shown| side.as_ref().err().cloned();
    let (before_note, after_note) = (note(&before), note(&after));
    let binary = [&before, &after]
        .into_iter()
        .any(|side| matches!(side, Ok(Some(bytes)) if std::str::from_utf8(bytes).is_err()));
    let page = match (before, after) {
        (Ok(old), Ok(new)) if !binary => {
            // Both sides are UTF-8 (`binary` is false); a missing file is empty text.
            let text = |side: Option<Vec<u8>>| String::from_utf8(side.unwrap_or_default());
            let (old, new) = (text(old).unwrap_or_default(), text(new).unwrap_or_default());
            let whole = unified(&old, &new, &format!("a/{path}"), &format!("b/{path}"));
            Some(diff_pages::page(&whole, from))
        }
        _ => None,
    };
    json!({
        "path": path,
        "kind": kind,
        "diff": page.as_ref().map(|page| page.diff.as_str()),
        "hunks": page.as_ref().map_or(0, |page| page.hunks),
        "next": page.as_ref().and_then(|page| page.next),
        "binary": binary,
        "before_note": before_note,
        "after_note": after_note,
    })
}

fn bad_request(message: &str) -> Response<Body> {
    json(StatusCode::BAD_REQUEST, &json!({"error": message}))
}

fn failed(message: &str) -> Response<Body> {
    json(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"error": message}),
    )
}
