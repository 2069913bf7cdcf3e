//! Load: concurrent agent sessions against the fake provider over loopback HTTP; prints requests per
//! second and the process's peak RSS (VmHWM). `cargo bench --bench load [-- SESSIONS]` (default 200).
//!
//! Each session: three model turns (two `write_file` calls; a write and a `read_file`; done), the
//! bundled tools in the sandbox, audit records on; one session in ten gets two injected faults (529,
//! 429 with `retry-after-ms: 5`, an overload event mid-stream, a connection cut mid-stream, a truncated
//! turn). Every session is checked: finished, every call ID answered once, no write from a bad turn.

#[path = "../../tests/fake_provider/mod.rs"]
mod fake_provider;

use std::path::PathBuf;
use std::sync::OnceLock;

use turngate::{CacheSetting, Toolbox};

fn toolbox() -> &'static Toolbox {
    static TOOLBOX: OnceLock<Toolbox> = OnceLock::new();
    TOOLBOX.get_or_init(|| {
        let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache");
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(Toolbox::builder().cache(CacheSetting::Dir(cache)).build())
            .expect("toolbox builds")
    })
}

fn main() {
    let sessions: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let toolbox = toolbox();
    let before = fake_provider::load::peak_rss_kib();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(fake_provider::load::run(sessions, toolbox));
    println!(
        "| sessions | faulty | requests | wall time | requests/s | peak RSS (baseline: toolbox loaded) |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {:.2} s | {:.0} | {:.1} MiB ({:.1} MiB) |",
        report.sessions,
        report.faulty,
        report.requests,
        report.elapsed.as_secs_f64(),
        report.requests_per_second(),
        report.peak_rss_kib as f64 / 1024.0,
        before as f64 / 1024.0,
    );
    if !report.failures.is_empty() {
        eprintln!("{:#?}", report.failures);
        std::process::exit(1);
    }
}
