//! WASI 0.3 against WASI 0.2 doing the same work, measured in the same run; prints a Markdown table.
//!
//! `cargo bench --bench generations`. Each row is one piece of work done by a tool built for each
//! generation, the samples taken alternately (0.3, then 0.2) so both see the same machine:
//!
//! * a no-op call: `noop_p3` against `noop`, each a tool that declares no paths and answers `ok`
//!   (so no view: the call runs on the caller's task);
//! * the same no-op made by the hostile twins below (`{"attack":"noop"}`): components with many more
//!   imports, each instantiated per call, the 0.3 twin with the async ABI's built-ins besides;
//! * a one-file read: the same guests reading a 4 KiB file through the view (on a call thread), 0.2
//!   with `std::fs::read_to_string`, 0.3 through a `stream<u8>` (`read-via-stream`);
//! * a 1 MiB file read, likewise;
//! * a 1 KiB fetch from a hyper server on 127.0.0.1: `p3_probe` (`wasi:http/client@0.3.0`) against
//!   `fetch_p2` (`wasi:http/outgoing-handler@0.2`), each a GET of the declared URL answered as
//!   `"<status> <body>"`, through the same gate, hook and transport.
//!
//! The issue's gates: the no-op and the one-file read at most 1.1× 0.2's, the 1 MiB read and the fetch
//! at most 0.2's time. Medians and p90 over many samples; the ratio column is 0.3 / 0.2.
//!
//! To see where the time goes, `GENERATIONS_PROFILE="ROW GENERATION CALLS"` (say `"0 0.3 201"`) makes
//! only that many calls of one side of one row (rows counted from 0), with a cache directory named by
//! `GENERATIONS_CACHE` (so a second run compiles nothing) and a pool of one call: run it under
//! `valgrind --tool=callgrind` with 1 call and with 201, and the difference over 200 is one call's
//! instructions (BENCHMARKS.md, "WASI 0.3 beside 0.2").

mod support;

use std::time::{Duration, Instant};

use support::{kib_server, row};
use turngate::{CacheSetting, Limits, Policy, Root, Toolbox};

const SAMPLES: usize = 2000;
const BIG_SAMPLES: usize = 400;

/// A tool and its input.
type Call<'a> = (&'a str, &'a str);

fn main() {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let port = kib_server(&server_runtime);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let profile = Profile::from_env();
    let cache = tempfile::tempdir().unwrap();
    let mut builder = Toolbox::builder()
        .cache(CacheSetting::Dir(match &profile {
            Some(profile) => profile.cache.clone(),
            None => cache.path().to_path_buf(),
        }))
        .without_bundled()
        // Room for the 1 MiB read's answer.
        .limits(Limits {
            output_bytes: 4 << 20,
            ..Limits::default()
        });
    if profile.is_some() {
        // Valgrind cannot reserve the address space of a pool for the default 16 calls.
        builder = builder.max_concurrent_calls(1);
    }
    for guest in [
        env!("TURNGATE_TEST_GUEST_NOOP"),
        env!("TURNGATE_TEST_GUEST_NOOP_P3"),
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO"),
        env!("TURNGATE_TEST_GUEST_HOSTILE_RO_P3"),
        env!("TURNGATE_TEST_GUEST_FETCH_P2"),
        env!("TURNGATE_TEST_GUEST_P3_PROBE"),
    ] {
        builder = builder.component_file(guest).unwrap();
    }
    let toolbox = runtime.block_on(builder.build()).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("four.txt"), "x".repeat(4096)).unwrap();
    std::fs::write(work.path().join("mib.txt"), "x".repeat(1 << 20)).unwrap();
    let root = Root::open(work.path()).unwrap();
    let origin = format!("http://127.0.0.1:{port}");
    let policy = Policy::from_toml(&format!(
        "default = \"read-only\"\n[tools.fetch_p2.network]\nget = [\"{origin}/**\"]\n[tools.p3_probe.network]\nget = [\"{origin}/**\"]\n"
    ))
    .unwrap();
    let call = |tool: &str, input: &str| {
        let start = Instant::now();
        let outcome = runtime.block_on(toolbox.call(&root, &policy, tool, input));
        let took = start.elapsed();
        assert!(outcome.result.is_ok(), "{tool}: {:?}", outcome.result);
        took
    };
    let fetch_input =
        serde_json::json!({"op": "fetch", "url": format!("{origin}/kib")}).to_string();
    let fetch_p2_input = serde_json::json!({"url": format!("{origin}/kib")}).to_string();
    let pairs: [(&str, Call, Call, usize); 5] = [
        (
            "no-op call (no view)",
            ("noop_p3", "{}"),
            ("noop", "{}"),
            SAMPLES,
        ),
        (
            "no-op call of the hostile twins (more imports)",
            ("hostile_ro_p3", r#"{"attack":"noop"}"#),
            ("hostile_ro", r#"{"attack":"noop"}"#),
            SAMPLES,
        ),
        (
            "read a 4 KiB file (a view, on a call thread)",
            ("hostile_ro_p3", r#"{"attack":"read","path":"four.txt"}"#),
            ("hostile_ro", r#"{"attack":"read","path":"four.txt"}"#),
            SAMPLES,
        ),
        (
            "read a 1 MiB file (0.3: a stream)",
            ("hostile_ro_p3", r#"{"attack":"read","path":"mib.txt"}"#),
            ("hostile_ro", r#"{"attack":"read","path":"mib.txt"}"#),
            BIG_SAMPLES,
        ),
        (
            "fetch 1 KiB from 127.0.0.1",
            ("p3_probe", &fetch_input),
            ("fetch_p2", &fetch_p2_input),
            SAMPLES,
        ),
    ];
    if let Some(profile) = profile {
        let (_, p3, p2, _) = pairs[profile.row];
        let (tool, input) = if profile.wasi_0_3 { p3 } else { p2 };
        for _ in 0..profile.calls {
            call(tool, input);
        }
        return;
    }
    println!(
        "| case | WASI 0.3 (median) | 0.3 (p90) | baseline | WASI 0.2 (median) | 0.2 (p90) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, (p3, p3_input), (p2, p2_input), samples) in pairs {
        for _ in 0..50 {
            call(p3, p3_input);
            call(p2, p2_input);
        }
        let (mut ours, mut theirs): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
        for _ in 0..samples {
            ours.push(call(p3, p3_input));
            theirs.push(call(p2, p2_input));
        }
        row(name, &ours, &format!("`{p2}`, WASI 0.2"), &theirs);
    }
}

/// One side of one row, to run under a profiler (`GENERATIONS_PROFILE`, `GENERATIONS_CACHE`).
struct Profile {
    row: usize,
    wasi_0_3: bool,
    calls: usize,
    cache: std::path::PathBuf,
}

impl Profile {
    fn from_env() -> Option<Profile> {
        let spec = std::env::var("GENERATIONS_PROFILE").ok()?;
        let fields: Vec<&str> = spec.split_whitespace().collect();
        let [row, generation, calls] = fields[..] else {
            panic!("GENERATIONS_PROFILE is \"ROW 0.3|0.2 CALLS\", not {spec:?}");
        };
        Some(Profile {
            row: row.parse().expect("ROW is a number"),
            wasi_0_3: match generation {
                "0.3" => true,
                "0.2" => false,
                other => panic!("GENERATION is 0.3 or 0.2, not {other:?}"),
            },
            calls: calls.parse().expect("CALLS is a number"),
            cache: std::env::var_os("GENERATIONS_CACHE")
                .expect("GENERATIONS_CACHE names a cache directory")
                .into(),
        })
    }
}
