//! Hooks the integration tests use to put the process where they need it: a crash at a chosen point
//! of an apply, and a host call that blocks. Each is inert unless its environment variable is set; the
//! variables are read once.
//!
//! * `TURNGATE_TEST_CRASH_AT=<point>` aborts the process at that point of an apply
//!   (`effects/journal/apply.rs`): `intent` (the intent written, not yet durable), `durable` (the intent and
//!   pre-images on disk, nothing moved), `moved-one` (the first change in place), `moved-all` (every
//!   change in place, its directories flushed unless the call is written ahead, not yet marked
//!   applied).
//! * `TURNGATE_TEST_FAIL_AT=second-move` makes an apply's second move fail as the filesystem could, so
//!   the call is rolled back by the process that applied it.
//! * `TURNGATE_TEST_DURABLE_RECORD=<file>` appends a line to that file for each flush the journal makes
//!   (`synced <dev> <ino>`, of the descriptor flushed) and each change it moves into place (`moved`),
//!   in order: what was durable at a crash point, for the crash tests to hold against what recovery
//!   needs there (a killed process keeps its page cache, so a missing flush is otherwise invisible).
//! * `TURNGATE_TEST_BOOT_ID=<id>` stands for the boot's identity in the journal
//!   (`effects/journal/ahead.rs`): a run with another ID than the one a call was written ahead in is a
//!   run after a power loss, which rolls forward what the call's lost writes undid.
//! * `TURNGATE_TEST_MACHINE_ID=<id>` stands for the machine's identity there: a call written ahead on
//!   another machine is not this machine's to roll forward.
//! * `TURNGATE_TEST_INLINE_LIMIT=<bytes>` replaces the most new content a call may write ahead into
//!   the log (`0`: no call is written ahead, every apply flushes its staged files and directories).
//! * `TURNGATE_TEST_PREPARE_RECORD=<file>` appends `compiled <sha256>` to that file each time the
//!   sandbox compiles a component, and `prepared <sha256>` each time it prepares one (its code compiled
//!   or loaded from the cache into the process): which tools a process compiled and loaded, and how
//!   often; `embedded <sha256>` each time it takes a bundled tool's code compiled into the binary
//!   (`sandbox/precompiled.rs`) instead of compiling.
//! * `TURNGATE_TEST_IGNORE_PRECOMPILED=1` makes the sandbox ignore the bundled tools' code compiled
//!   into the binary, so they compile at their first call as any other tool does: the tests of that
//!   path (the compiling child, the cache, the memory a compile leaves) use the bundled tools.
//! * `TURNGATE_TEST_LOOPBACK_ONLY=1` refuses every connection to an address that is not loopback, in
//!   the network transport (`network/transport.rs`), whatever the policy and the address checks
//!   decided: the tests' machine may reach no other address, even when a check they exercise is broken.
//! * `TURNGATE_TEST_CACHE_CHECKED=<path>` holds each load of a precompiled cache entry between its
//!   check and its mapping (`sandbox/cache.rs`): it creates `<path>.reached`, then waits (a minute at
//!   most) until `<path>` exists, so a test can replace the entry there.
//! * `TURNGATE_TEST_HOLD_PREPARE_ALL=<path>` holds the background preparation of every tool a server
//!   starts (`Toolbox::prepare_all`): it creates `<path>.reached`, then waits (a minute at most) until
//!   `<path>` exists, so a test can look at the preparing threads, call a tool before it and see that
//!   nothing is prepared twice.
//! * `TURNGATE_TEST_HOLD_COMPILE=<path>` holds each compiling child process before it compiles
//!   (`sandbox/compile_process.rs`): it creates `<path>.reached`, then waits (a minute at most) until
//!   `<path>` exists, so a test can see what becomes of the child when its server goes.
//! * `TURNGATE_TEST_HOLD_BEFORE_APPLY=<path>` holds a call that can be cancelled once its change set
//!   is checked (and approved, when asked), just before the last look at its cancel and the apply
//!   (`toolbox.rs`): it appends `held` to `<path>`, then waits (a minute at most) until the call is
//!   cancelled, so a test can cancel it between the user's yes (or the end of its run) and the apply.
//! * `TURNGATE_TEST_PLATFORM=posix` makes the platform layer take, on Linux, the paths macOS takes
//!   where those are plain POSIX (read in `platform/linux.rs`, the one place it matters): a directory's renames waited for through
//!   `readdir`, a checked descriptor reached through `/dev/fd`, files and directories flushed with
//!   `fsync`, and renames without `renameat2`'s flags (the journal's fallbacks, as on a file system
//!   without `renameatx_np`'s). `tests/posix.rs` sets it before `main` and runs the containment,
//!   least-authority, journal and scope suites on those paths.
//! * `TURNGATE_TEST_BLOCK_OPEN=<location>` makes the view's open of that file block for a minute, as a
//!   host call on a hung filesystem would (`lower.rs`).
//! * `TURNGATE_TEST_WORKER_CRASH_AT=<point>[@<n>]` aborts a worker the n-th time (the first without
//!   `@n`) it reaches that point of a job (`worker/run.rs`): `before-call` (a call looked up in the
//!   journal, not found, about to run), `after-apply` (every call of the job answered and applied,
//!   nothing published), `mid-publish` (the first result message stored), `after-publish` (every
//!   result stored, the job not acked).
//! * `TURNGATE_TEST_WORKER_STALL_AT=<point>:<ms>` blocks the worker's thread for that long the first
//!   time it reaches the point, as a stalled process would (no in-progress acks meanwhile).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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

/// Whether the step `point` is to fail.
pub(crate) fn fail_point(point: &str) -> bool {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_FAIL_AT") == Some(point)
}

/// The record of flushes and moves, when one is asked for.
fn durable_record() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_DURABLE_RECORD")
}

fn record(line: &str) {
    if let Some(path) = durable_record() {
        append(path, line);
    }
}

#[allow(clippy::disallowed_methods)] // the record is the test's own file, outside any root
fn append(path: &str, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        // One write of the whole line: threads recording at once must not interleave their lines.
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

/// Records that `file` (a file or a directory) was just flushed.
pub(crate) fn made_durable(file: &std::fs::File) {
    use std::os::unix::fs::MetadataExt;
    if durable_record().is_some()
        && let Ok(metadata) = file.metadata()
    {
        record(&format!("synced {} {}", metadata.dev(), metadata.ino()));
    }
}

/// Records that a change was just moved into place.
pub(crate) fn moved() {
    if durable_record().is_some() {
        record("moved");
    }
}

/// The boot identity the tests stand in for this boot's, if any.
pub(crate) fn boot_id() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_BOOT_ID")
}

/// The machine identity the tests stand in for this machine's, if any.
pub(crate) fn machine_id() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_MACHINE_ID")
}

/// The most new content a call may write ahead, if the tests set it.
pub(crate) fn inline_limit() -> Option<u64> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_INLINE_LIMIT").and_then(|limit| limit.parse().ok())
}

/// Records that the component with this digest was just compiled (into the cache, or for this process
/// alone when there is none).
pub(crate) fn compiled(sha256: &str) {
    if let Some(path) = prepare_record() {
        append(path, &format!("compiled {sha256}"));
    }
}

/// Records that the code compiled into the binary for the component with this digest was just taken.
pub(crate) fn embedded(sha256: &str) {
    if let Some(path) = prepare_record() {
        append(path, &format!("embedded {sha256}"));
    }
}

/// Whether the bundled tools' code compiled into the binary is to be ignored.
pub(crate) fn ignore_precompiled() -> bool {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_IGNORE_PRECOMPILED") == Some("1")
}

/// Records that the component with this digest was just prepared (its code compiled or loaded from the
/// cache into this process).
pub(crate) fn prepared(sha256: &str) {
    if let Some(path) = prepare_record() {
        append(path, &format!("prepared {sha256}"));
    }
}

/// The file compiles and preparations are recorded in, if the tests set one.
fn prepare_record() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    setting(&AT, "TURNGATE_TEST_PREPARE_RECORD")
}

/// Holds a cache entry's load between its check and its mapping, if the tests asked to act there.
pub(crate) fn cache_entry_checked() {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if let Some(release) = setting(&AT, "TURNGATE_TEST_CACHE_CHECKED") {
        hold_until(release);
    }
}

/// Holds a compiling child process (`sandbox/compile_process.rs`) before it compiles, if the tests
/// asked to hold it.
pub(crate) fn hold_compile() {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if let Some(release) = setting(&AT, "TURNGATE_TEST_HOLD_COMPILE") {
        hold_until(release);
    }
}

/// Holds [`Toolbox::prepare_all`](crate::toolbox::Toolbox::prepare_all) until its release file exists,
/// if the tests asked to hold it.
pub(crate) fn hold_prepare_all() {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if let Some(release) = setting(&AT, "TURNGATE_TEST_HOLD_PREPARE_ALL") {
        hold_until(release);
    }
}

/// Holds a call about to apply until it is cancelled, if the tests asked to act there.
pub(crate) async fn before_apply(cancel: Option<&crate::cancel::Cancel>) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if let (Some(path), Some(cancel)) = (setting(&AT, "TURNGATE_TEST_HOLD_BEFORE_APPLY"), cancel) {
        append(path, "held");
        let _ = tokio::time::timeout(Duration::from_secs(60), cancel.cancelled()).await;
    }
}

/// Blocks the calling thread for a minute if `location` is the file to block on.
pub(crate) fn block_open(location: &str) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    if setting(&AT, "TURNGATE_TEST_BLOCK_OPEN") == Some(location) {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// A worker's test points: aborts or stalls there if asked to (see the module docs).
pub(crate) fn worker_point(point: &str) {
    static CRASH: OnceLock<Option<String>> = OnceLock::new();
    static REACHED: AtomicU32 = AtomicU32::new(0);
    if let Some(setting) = setting(&CRASH, "TURNGATE_TEST_WORKER_CRASH_AT") {
        let (at, nth) = setting
            .split_once('@')
            .map_or((setting, 1), |(at, n)| (at, n.parse().unwrap_or(1)));
        if at == point && REACHED.fetch_add(1, Ordering::SeqCst) + 1 == nth {
            std::process::abort();
        }
    }
    static STALL: OnceLock<Option<String>> = OnceLock::new();
    static STALLED: AtomicBool = AtomicBool::new(false);
    if let Some((at, ms)) =
        setting(&STALL, "TURNGATE_TEST_WORKER_STALL_AT").and_then(|s| s.split_once(':'))
        && at == point
        && !STALLED.swap(true, Ordering::SeqCst)
    {
        std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
    }
}

/// Whether the tests forbid connecting to `ip` (`TURNGATE_TEST_LOOPBACK_ONLY`).
pub(crate) fn connection_forbidden(ip: std::net::IpAddr) -> bool {
    static ONLY: OnceLock<Option<String>> = OnceLock::new();
    setting(&ONLY, "TURNGATE_TEST_LOOPBACK_ONLY").is_some() && !ip.is_loopback()
}

/// Says a hold was reached (`<release>.reached`), then waits, a minute at most, until `release` exists.
fn hold_until(release: &str) {
    append(&format!("{release}.reached"), "reached");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::path::Path::new(release).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
