//! Rust, Python and JavaScript tools side by side: component size, first load with and without the
//! precompiled cache, and the warm per-call time; prints a Markdown table. `cargo bench --bench languages`
//! (builds the examples with `guest-tools/examples/build.sh` first).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::median;

use serde_json::json;
use turngate::{CacheSetting, Policy, Root, Toolbox};

fn load(file: &Path, cache: CacheSetting) -> (Toolbox, Duration) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .without_bundled()
                .cache(cache)
                .component_file(file)
                .unwrap()
                .build(),
        )
        .unwrap();
    (toolbox, start.elapsed())
}

fn main() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/examples");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/examples/build.sh");
    assert!(
        Command::new("bash")
            .arg(script)
            .arg(&examples)
            .status()
            .unwrap()
            .success()
    );
    let guests = PathBuf::from(env!("TURNGATE_TEST_GUEST_NOOP"))
        .parent()
        .unwrap()
        .to_path_buf();

    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("essay.txt"),
        "the quick brown fox jumps over the lazy dog\n".repeat(20),
    )
    .unwrap();
    std::fs::write(
        work.path().join("people.csv"),
        "name,age\nAda,36\nAlan,41\nGrace,85\n",
    )
    .unwrap();
    let root = Root::open(work.path()).unwrap();
    let policy = Policy::allow_all();

    let cases = [
        (
            "Rust",
            "read_file",
            guests.join("read_file.wasm"),
            json!({"path": "essay.txt"}),
        ),
        (
            "Rust",
            "write_file",
            guests.join("write_file.wasm"),
            json!({"path": "out.txt", "content": "x".repeat(1024)}),
        ),
        (
            "Python",
            "text_stats",
            examples.join("text_stats.wasm"),
            json!({"path": "essay.txt"}),
        ),
        (
            "JavaScript",
            "csv_to_json",
            examples.join("csv_to_json.wasm"),
            json!({"input_path": "people.csv", "output_path": "people.json"}),
        ),
    ];
    println!(
        "| language | tool | component size | first load, no cache | first load, warm cache | warm call |"
    );
    println!("|---|---|---|---|---|---|");
    for (language, tool, file, input) in cases {
        let size = std::fs::metadata(&file).unwrap().len();
        let cold = median(
            (0..3)
                .map(|_| load(&file, CacheSetting::Disabled).1)
                .collect(),
        );
        let cache = tempfile::tempdir().unwrap();
        load(&file, CacheSetting::Dir(cache.path().to_path_buf()));
        let warm_load = median(
            (0..10)
                .map(|_| load(&file, CacheSetting::Dir(cache.path().to_path_buf())).1)
                .collect(),
        );
        let (toolbox, _) = load(&file, CacheSetting::Dir(cache.path().to_path_buf()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let input = input.to_string();
        let call = || {
            let start = Instant::now();
            let outcome = runtime.block_on(toolbox.call(&root, &policy, tool, &input));
            assert!(outcome.result.is_ok(), "{tool}: {:?}", outcome.result);
            start.elapsed()
        };
        for _ in 0..20 {
            call();
        }
        let warm_call = median((0..300).map(|_| call()).collect());
        println!(
            "| {language} | {tool} | {:.2} MB | {cold:.1?} | {warm_load:.1?} | {warm_call:.1?} |",
            size as f64 / 1e6
        );
    }
}
