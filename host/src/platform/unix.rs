//! What every Unix provides alike: process IDs and the signal that probes them.

use super::boot_id;

/// This process among every process that ever ran on the machine: its ID and, after `@`, the start of
/// the boot's identity (`<pid>@<boot>`, or the ID alone where the boot is not known). A process ID is
/// reused, within a boot and across boots; with the boot, what a process left is known to be dead once
/// the machine booted again, whoever has its ID now.
pub(crate) fn process_mark() -> String {
    let pid = std::process::id();
    match boot_id() {
        Some(boot) => format!("{pid}@{}", boot_prefix(boot)),
        None => pid.to_string(),
    }
}

/// Whether the process a [`process_mark`] names is still running: its boot is this one (or unknown)
/// and a process has its ID. (A process of this boot that died and whose ID was reused counts as
/// running; what it left waits for that one.)
pub(crate) fn process_alive(mark: &str) -> bool {
    let (pid, boot) = mark.split_once('@').unwrap_or((mark, ""));
    let this_boot = match (boot, boot_id()) {
        ("", _) | (_, None) => true,
        (boot, Some(current)) => boot == boot_prefix(current),
    };
    this_boot
        && pid
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

/// A boot identity as names keep it: its first 16 characters that are not `-` (of a UUID, 64 bits).
fn boot_prefix(boot: &str) -> String {
    boot.chars().filter(|c| *c != '-').take(16).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_of_another_boot_is_dead_whoever_has_its_id() {
        let mark = process_mark();
        assert!(process_alive(&mark), "{mark}");
        let pid = std::process::id();
        assert!(!process_alive(&format!("{pid}@00000000")) || boot_id().is_none());
        assert!(
            process_alive(&pid.to_string()),
            "a mark without a boot: by its ID"
        );
    }
}
