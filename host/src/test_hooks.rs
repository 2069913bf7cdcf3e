//! Hooks the integration tests use to put the process where they need it: a crash at a chosen point
//! of an apply, and a host call that blocks. Each is inert unless its environment variable is set; the
//! variables are read once.
//!
//! * `TURNGATE_TEST_CRASH_AT=<point>` aborts the process at that point of an apply
//!   (`effects/journal.rs`): `intent` (the intent written, not yet durable), `durable` (the intent and
//!   pre-images on disk, nothing moved), `moved-one` (the first change in place), `moved-all` (every
//!   change in place, not yet marked applied).
//! * `TURNGATE_TEST_BLOCK_OPEN=<location>` makes the view's open of that file block for a minute, as a
//!   host call on a hung filesystem would (`view/lower.rs`).

use std::sync::OnceLock;
use std::time::Duration;

fn setting(cell: &'static OnceLock<Option<String>>, name: &str) -> Option<&'static str> {
    cell.get_or_init(|| std::env::var(name).ok()).as_deref()
}

/// Aborts the process if the crash point is `point`.
pub(crate) fn crash_point(point: &str) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if setting(&AT, "TURNGATE_TEST_CRASH_AT") == Some(point) {
        std::process::abort();
    }
}

/// Blocks the calling thread for a minute if `location` is the file to block on.
pub(crate) fn block_open(location: &str) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if setting(&AT, "TURNGATE_TEST_BLOCK_OPEN") == Some(location) {
        std::thread::sleep(Duration::from_secs(60));
    }
}
