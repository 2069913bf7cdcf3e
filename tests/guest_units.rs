//! The guest tools' own unit tests. `guest-tools/` is a workspace of its own (built for
//! `wasm32-wasip2` by `host/build.rs`), so `cargo test --workspace` here does not reach them; this
//! runs them, natively: what they test is the tools' logic (input parsing, error naming, cutting a
//! body, matching), not the WASI calls the sandbox tests cover. The hostile test guests, which read
//! wasm32 memory directly, have no unit tests and are left out.

mod binding_support;

use binding_support::{cargo, repo, run};

#[test]
fn the_guest_tools_unit_tests_pass() {
    let output = run(
        cargo()
            .args([
                "test",
                "--manifest-path",
                "guest-tools/Cargo.toml",
                "--workspace",
            ])
            .args(["--exclude", "hostile-rw", "--exclude", "hostile-ro"])
            .env("CARGO_TARGET_DIR", repo().join("target/guest-units")),
        "cargo test of guest-tools",
    );
    // The counts of every test binary, so a run that found no tests is no pass.
    let passed: usize = output
        .lines()
        .filter_map(|line| line.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(
        passed >= 40,
        "only {passed} guest unit tests ran:\n{output}"
    );
}
