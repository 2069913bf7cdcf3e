//! The Node package (`node/`) tested from Node: `npm ci` installs the pinned dev dependencies from
//! `node/package-lock.json` into `node/node_modules` (without running the package's own install script),
//! a nested `cargo build -p turngate-node` builds the addon in the dev profile, sharing the workspace's
//! target directory (only napi and the addon itself are compiled again), `node scripts/types.js --check`
//! checks that the generated declarations (`native.d.ts` from the type definitions that build wrote,
//! `index.d.ts` from index.js's JSDoc) are current and that a typed use of the whole surface compiles,
//! and `node --test` runs `node/test/`. Any failing test, or no test run, fails this test.
//!
//! Needs `node` (20 or later) and `npm` on the PATH, and the npm registry on the first run. Part of the
//! packages and release step (`.ci/run`'s second command, which the README names), not of `cargo test
//! --workspace`: building the addon and installing its test dependencies take most of four minutes on
//! two cores.
//! `TURNGATE_TEST_FOLDING_DIR` is a directory on the test file system that folds names, mounted by this
//! process for as long as the tests run (`folding.test.js`).

mod binding_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use binding_support::{built_library, cargo, repo, run};

/// Builds the addon (dev profile) and copies it to `dest` as `turngate.node`; napi-derive writes the
/// addon's type definitions into `type_defs` as it compiles.
fn build_addon(dest: &Path, type_defs: &Path) -> PathBuf {
    std::fs::create_dir_all(type_defs).unwrap();
    let mut build = cargo();
    build
        .args(["build", "-p", "turngate-node", "--message-format=json"])
        .env("NAPI_TYPE_DEF_TMP_FOLDER", type_defs);
    // The folder is always the same, so the build is fresh whenever the addon's code is; only an
    // emptied folder needs the addon compiled again to fill it.
    if !type_defs.join("turngate-node").exists() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        build.env("NAPI_FORCE_BUILD_TURNGATE_NODE", now.as_nanos().to_string());
    }
    let messages = run(&mut build, "cargo build -p turngate-node (dev profile)");
    let built = built_library(&messages, "turngate_node");
    std::fs::create_dir_all(dest).unwrap();
    let addon = dest.join("turngate.node");
    std::fs::copy(&built, &addon).unwrap();
    addon
}

#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn node_package_tests_pass() {
    let dest = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("node-tests");
    let type_defs = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("node-type-defs");
    let addon = build_addon(&dest, &type_defs);
    let node = repo().join("node");
    run(
        Command::new("npm")
            .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
            .current_dir(&node),
        "npm ci (needs npm and the npm registry)",
    );
    run(
        Command::new("node")
            .args(["scripts/types.js", "--check", "--type-defs"])
            .arg(&type_defs)
            .current_dir(&node),
        "node scripts/types.js --check (the generated declarations are current)",
    );
    let report = run(
        Command::new("node")
            .args(["--test", "--test-reporter=tap", "test/"])
            .current_dir(&node)
            .env("TURNGATE_NODE_ADDON", &addon)
            .env(
                "TURNGATE_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
            )
            .env(
                "TURNGATE_TEST_GUEST_HOSTILE_RW",
                env!("TURNGATE_TEST_GUEST_HOSTILE_RW"),
            )
            .env(
                "TURNGATE_TEST_GUEST_HOSTILE_RW_P3",
                env!("TURNGATE_TEST_GUEST_HOSTILE_RW_P3"),
            )
            .env("TURNGATE_TEST_BIN", env!("CARGO_BIN_EXE_turngate"))
            .env("TURNGATE_TEST_FOLDING_DIR", turngate_testfs::folding_dir()),
        "node --test node/test",
    );
    eprintln!("{report}");
    let count = |label: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or_else(|| panic!("no `{label}` line in node's report"))
    };
    assert_eq!(count("# fail "), 0, "a Node test failed");
    assert!(count("# pass ") > 0, "no Node test ran");
}
