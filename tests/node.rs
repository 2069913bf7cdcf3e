//! The Node package (`node/`) tested from Node: `npm ci` installs the pinned dev dependencies from
//! `node/package-lock.json` into `node/node_modules` (without running the package's own install script),
//! a nested `cargo build -p turngate-node` builds the addon in the dev profile, sharing the workspace's
//! target directory (only napi and the addon itself are compiled again), `node scripts/types.js --check`
//! checks that the generated declarations (`native.d.ts` from the type definitions that build wrote,
//! `index.d.ts` from index.js's JSDoc) are current and that a typed use of the whole surface compiles,
//! and `node --test` runs `node/test/`. Any failing test, or no test run, fails this test.
//!
//! Needs `node` (20 or later) and `npm` on the PATH, and the npm registry on the first run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `command`, failing the test with its output unless it succeeds; answers its output.
fn run(command: &mut Command, what: &str) -> String {
    let started = Instant::now();
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    eprintln!("{what}: done in {:.1?}", started.elapsed());
    format!("{stdout}{stderr}")
}

/// `command` without the variables cargo sets for a test run: build scripts that watch them would make
/// the nested build (and the next build from a shell) rebuild their crates.
fn as_from_a_shell(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let cargo_test_var = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
            || name == "OUT_DIR";
        if cargo_test_var {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// Builds the addon (dev profile) and copies it to `dest` as `turngate.node`; napi-derive writes the
/// addon's type definitions into `type_defs` as it compiles.
fn build_addon(dest: &Path, type_defs: &Path) -> PathBuf {
    std::fs::create_dir_all(type_defs).unwrap();
    let mut build = Command::new(env!("CARGO"));
    as_from_a_shell(&mut build)
        .args(["build", "-p", "turngate-node", "--message-format=json"])
        .env("NAPI_TYPE_DEF_TMP_FOLDER", type_defs)
        .current_dir(repo());
    // The folder is always the same, so the build is fresh whenever the addon's code is; only an
    // emptied folder needs the addon compiled again to fill it.
    if !type_defs.join("turngate-node").exists() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        build.env("NAPI_FORCE_BUILD_TURNGATE_NODE", now.as_nanos().to_string());
    }
    let messages = run(&mut build, "cargo build -p turngate-node (dev profile)");
    let built = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "turngate_node")
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| {
            f.extension()
                .is_some_and(|e| e == "so" || e == "dylib" || e == "dll")
        })
        .expect("cargo built no turngate_node library");
    std::fs::create_dir_all(dest).unwrap();
    let addon = dest.join("turngate.node");
    std::fs::copy(&built, &addon).unwrap();
    addon
}

#[test]
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
            ),
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
