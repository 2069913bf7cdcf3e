//! The audit log as the console shows it: its records (JSON Lines, as `run --log`, `call --log` and
//! `mcp --log` append them, [`crate::audit`]), newest first, filtered and paged.
//!
//! `GET /api/audit?tool=T&status=S&since=MS&until=MS&before=LINE&limit=N` answers `{"records":
//! [{"line", "record"}...], "next_before": LINE|null, "log": PATH|null}`: the records whose `tool` is
//! `T` (only call records have one), whose `verdict` (a call's) or `status` (a turn's) is `S`, and whose
//! `time_ms` is within `[since, until]`, each with its line number in the file. A line that is not a
//! JSON object is skipped.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read as _};

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::timeline::{MAX_PAGE, PAGE};
use super::{Body, State, json, query_value};

/// Longest line read as a record; a longer one is skipped.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// What a request filters on.
#[derive(Debug, Default)]
struct Filter {
    tool: Option<String>,
    status: Option<String>,
    since: Option<u64>,
    until: Option<u64>,
}

impl Filter {
    fn matches(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        if let Some(tool) = &self.tool
            && field("tool") != Some(tool)
        {
            return false;
        }
        if let Some(status) = &self.status
            && field("verdict").or_else(|| field("status")) != Some(status)
        {
            return false;
        }
        let time = record.get("time_ms").and_then(Value::as_u64);
        if let Some(since) = self.since
            && time.is_none_or(|time| time < since)
        {
            return false;
        }
        if let Some(until) = self.until
            && time.is_none_or(|time| time > until)
        {
            return false;
        }
        true
    }
}

/// `GET /api/audit`.
pub(super) fn page(state: &State, query: &str) -> Response<Body> {
    let number = |name: &str| query_value(query, name).and_then(|v| v.parse::<u64>().ok());
    let filter = Filter {
        tool: query_value(query, "tool"),
        status: query_value(query, "status"),
        since: number("since"),
        until: number("until"),
    };
    let before = number("before");
    let limit = number("limit")
        .map_or(PAGE, |n| n as usize)
        .clamp(1, MAX_PAGE);
    let Some(path) = &state.audit_log else {
        return json(
            StatusCode::OK,
            &json!({"records": [], "next_before": null, "log": null}),
        );
    };
    // The audit log is the user's file, named on the command line, outside the root's scope.
    #[allow(clippy::disallowed_methods)]
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) => {
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"error": format!("cannot read the audit log {}: {e}", path.display())}),
            );
        }
    };
    // Only the newest `limit` matching records (and whether there were more) are kept.
    let mut matching: VecDeque<(u64, Value)> = VecDeque::new();
    let mut more = false;
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        match reader
            .by_ref()
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n") {
            // Too long: skip to the end of this line.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                break;
            }
        }
        number += 1;
        if before.is_some_and(|before| number >= before) {
            break;
        }
        let Ok(record @ Value::Object(_)) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if filter.matches(&record) {
            if matching.len() == limit {
                matching.pop_front();
                more = true;
            }
            matching.push_back((number, record));
        }
    }
    let records: Vec<Value> = matching
        .iter()
        .rev()
        .map(|(line, record)| json!({"line": line, "record": record}))
        .collect();
    let next_before = if more {
        records.last().and_then(|r| r["line"].as_u64())
    } else {
        None
    };
    json(
        StatusCode::OK,
        &json!({
            "records": records,
            "next_before": next_before,
            "log": path.display().to_string(),
        }),
    )
}
