//! The supply chain as `deny.toml` states it, checked offline: no locked crate version with an
//! advisory in the RustSec database snapshot (`tests/supply_chain/advisory-db`) that `deny.toml` does
//! not accept with a reason, every crate from crates.io, no banned crate built (OpenSSL, and ring: the
//! host's one crypto provider is aws-lc-rs), every dependency under a
//! licence `deny.toml` allows. Both locks are checked: the workspace's and `guest-tools/`'s (the bundled
//! tools are compiled into the binary). The same checks run on made-up locks that hold what each
//! refuses, so a check that stopped refusing fails here too.
//!
//! And the README's commands build one set of dependencies: every build they make takes each crate
//! `cargo run -- demo` built with the features the demo built it with, so each compiles only what is
//! its own (a dev-dependency or a binding that turns on a feature of a shared crate rebuilds it and
//! everything above it: rustsec's `serde` in semver rebuilt wasmtime).
//!
//! Licences come from `cargo metadata` (every package of the resolved graph, for every platform); bans
//! from `cargo tree` (what is built, for every platform); advisories and sources from the lock files
//! themselves, through rustsec (cargo-audit's library) and spdx (the licence-expression crate
//! cargo-deny uses).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rustsec::advisory::{Id, Informational};
use rustsec::report::{Report, Settings};
use rustsec::{Database, Lockfile};
use serde::Deserialize;

/// `deny.toml`, the parts this test reads (in cargo-deny's format).
#[derive(Debug, Deserialize)]
struct Deny {
    advisories: Advisories,
    licenses: Licenses,
    sources: Sources,
    bans: Bans,
}

#[derive(Debug, Deserialize)]
struct Advisories {
    ignore: Vec<Accepted>,
}

/// An advisory accepted, and why.
#[derive(Debug, Deserialize)]
struct Accepted {
    id: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
struct Licenses {
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Sources {
    unknown_registry: String,
    unknown_git: String,
    allow_registry: Vec<String>,
    allow_git: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Bans {
    deny: Vec<Ban>,
}

#[derive(Debug, Deserialize)]
struct Ban {
    #[serde(rename = "crate")]
    name: String,
    reason: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read_deny() -> Deny {
    let text = std::fs::read_to_string(repo().join("deny.toml")).expect("deny.toml");
    toml::from_str(&text).expect("deny.toml parses")
}

fn deny() -> &'static Deny {
    static DENY: OnceLock<Deny> = OnceLock::new();
    DENY.get_or_init(read_deny)
}

fn database() -> &'static Database {
    static DATABASE: OnceLock<Database> = OnceLock::new();
    DATABASE.get_or_init(|| {
        Database::open(&repo().join("tests/supply_chain/advisory-db"))
            .expect("the advisory database snapshot opens")
    })
}

fn lock(path: &str) -> Lockfile {
    Lockfile::load(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The advisories against `lock`'s crate versions that `deny` does not accept, as
/// `ID crate version: title`: vulnerabilities, and the informational kinds (unmaintained, unsound,
/// notices). Withdrawn advisories are none.
fn advisories(lock: &Lockfile, deny: &Deny) -> Vec<String> {
    let settings = Settings {
        ignore: deny
            .advisories
            .ignore
            .iter()
            .map(|a| a.id.parse::<Id>().expect("an advisory id"))
            .collect(),
        informational_warnings: vec![
            Informational::Unmaintained,
            Informational::Unsound,
            Informational::Notice,
        ],
        ..Settings::default()
    };
    let report = Report::generate(database(), lock, &settings);
    let vulnerabilities = report
        .vulnerabilities
        .list
        .iter()
        .map(|v| (&v.advisory, &v.package));
    let warnings = report
        .warnings
        .values()
        .flatten()
        .filter_map(|w| Some((w.advisory.as_ref()?, &w.package)));
    let mut found: Vec<String> = vulnerabilities
        .chain(warnings)
        .map(|(advisory, package)| {
            format!(
                "{} {} {}: {}",
                advisory.id, package.name, package.version, advisory.title
            )
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The crates of `lock` from anywhere but the registries `deny` allows.
fn foreign_sources(lock: &Lockfile, deny: &Deny) -> Vec<String> {
    assert_eq!(
        (
            deny.sources.unknown_registry.as_str(),
            deny.sources.unknown_git.as_str()
        ),
        ("deny", "deny")
    );
    lock.packages
        .iter()
        .filter_map(|package| {
            let source = package.source.as_ref()?;
            let allowed = match source.is_git() {
                true => deny
                    .sources
                    .allow_git
                    .iter()
                    .any(|g| source.url().as_str() == g),
                false => {
                    source.is_registry()
                        && deny
                            .sources
                            .allow_registry
                            .iter()
                            .any(|r| source.url().as_str() == r)
                }
            };
            (!allowed).then(|| format!("{} {} from {source}", package.name, package.version))
        })
        .collect()
}

/// The crates of `graph` (names and versions) that `deny` bans.
fn banned(graph: &[(String, String)], deny: &Deny) -> Vec<String> {
    graph
        .iter()
        .filter_map(|(name, version)| {
            let ban = deny.bans.deny.iter().find(|b| b.name == *name)?;
            Some(format!("{name} {version}: {}", ban.reason))
        })
        .collect()
}

/// Every crate the workspace whose manifest is `manifest` builds, for every platform, with the
/// features it is built with (`cargo tree`: a lock also lists the optional dependencies no feature
/// turns on).
fn graph(manifest: &Path) -> Vec<(String, String)> {
    let output = cargo(
        &[
            "tree",
            "--workspace",
            "--locked",
            "--target",
            "all",
            "--edges",
            "normal,build,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ],
        manifest,
    );
    let mut crates: Vec<(String, String)> = String::from_utf8_lossy(&output)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect();
    crates.sort();
    crates.dedup();
    crates
}

/// The packages of `metadata` (`cargo metadata` output) whose licence expression `deny` does not
/// allow (or that have none).
fn unlicensed(metadata: &serde_json::Value, deny: &Deny) -> Vec<String> {
    let allowed = |req: &spdx::LicenseReq| {
        let text = req.to_string();
        deny.licenses.allow.contains(&text)
    };
    let packages = metadata["packages"].as_array().expect("packages");
    packages
        .iter()
        .filter_map(|package| {
            let who = format!("{} {}", package["name"], package["version"]);
            let Some(text) = package["license"].as_str() else {
                return Some(format!("{who}: no licence expression"));
            };
            match spdx::Expression::parse_mode(text, spdx::ParseMode::LAX) {
                Ok(expression) if expression.evaluate(allowed) => None,
                Ok(_) => Some(format!("{who}: {text}")),
                Err(e) => Some(format!("{who}: `{text}` does not parse: {e}")),
            }
        })
        .collect()
}

/// `cargo metadata` of the workspace whose manifest is `manifest`, as locked.
fn metadata(manifest: &Path) -> serde_json::Value {
    let output = cargo(&["metadata", "--format-version", "1", "--locked"], manifest);
    serde_json::from_slice(&output).expect("cargo metadata's JSON")
}

/// What `cargo ARGS --manifest-path MANIFEST` prints; it must succeed.
fn cargo(args: &[&str], manifest: &Path) -> Vec<u8> {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

const LOCKS: [&str; 2] = ["Cargo.lock", "guest-tools/Cargo.lock"];

#[test]
fn no_locked_crate_has_an_advisory_deny_toml_does_not_accept() {
    for path in LOCKS {
        let found = advisories(&lock(path), deny());
        assert!(
            found.is_empty(),
            "{path} holds crate versions with advisories (update them, or accept each in deny.toml \
             with its reason):\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn every_accepted_advisory_says_why_and_still_applies() {
    let locks: Vec<Lockfile> = LOCKS.iter().map(|path| lock(path)).collect();
    let nothing_accepted = Deny {
        advisories: Advisories { ignore: Vec::new() },
        ..read_deny()
    };
    let applying: Vec<String> = locks
        .iter()
        .flat_map(|lock| advisories(lock, &nothing_accepted))
        .collect();
    for accepted in &deny().advisories.ignore {
        assert!(
            !accepted.reason.trim().is_empty(),
            "{} is accepted without a reason",
            accepted.id
        );
        assert!(
            applying
                .iter()
                .any(|a| a.starts_with(&format!("{} ", accepted.id))),
            "{} is accepted in deny.toml but no locked crate has it any more: remove it",
            accepted.id
        );
    }
}

/// A lock of one crate version, as Cargo writes it.
fn lock_of(name: &str, version: &str, source: &str) -> Lockfile {
    format!(
        "version = 4\n\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\nsource = \"{source}\"\n"
    )
    .parse()
    .expect("a lock")
}

const CRATES_IO: &str = "registry+https://github.com/rust-lang/crates.io-index";

#[test]
fn a_lock_holding_a_known_vulnerable_version_fails_the_check_unless_accepted() {
    // smallvec 1.6.0: RUSTSEC-2021-0003, a buffer overflow in `insert_many`.
    let vulnerable = lock_of("smallvec", "1.6.0", CRATES_IO);
    let found = advisories(&vulnerable, deny());
    assert!(
        found
            .iter()
            .any(|a| a.starts_with("RUSTSEC-2021-0003 smallvec 1.6.0")),
        "{found:?}"
    );
    let fixed = lock_of("smallvec", "1.6.1", CRATES_IO);
    assert_eq!(advisories(&fixed, deny()), Vec::<String>::new());
    let accepting = Deny {
        advisories: Advisories {
            ignore: vec![Accepted {
                id: "RUSTSEC-2021-0003".into(),
                reason: "a test".into(),
            }],
        },
        ..read_deny()
    };
    assert_eq!(advisories(&vulnerable, &accepting), Vec::<String>::new());
    // An unmaintained crate fails it too: RUSTSEC-2020-0016, net2.
    let unmaintained = lock_of("net2", "0.2.39", CRATES_IO);
    let found = advisories(&unmaintained, deny());
    assert!(
        found
            .iter()
            .any(|a| a.starts_with("RUSTSEC-2020-0016 net2")),
        "{found:?}"
    );
}

#[test]
fn every_crate_comes_from_crates_io() {
    for path in LOCKS {
        let foreign = foreign_sources(&lock(path), deny());
        assert!(foreign.is_empty(), "{path}:\n{}", foreign.join("\n"));
    }
    let from_git = lock_of(
        "smallvec",
        "1.13.2",
        "git+https://github.com/servo/rust-smallvec?rev=1#0123456789abcdef0123456789abcdef01234567",
    );
    assert_eq!(foreign_sources(&from_git, deny()).len(), 1);
    let other_registry = lock_of(
        "smallvec",
        "1.13.2",
        "registry+https://registry.example/index",
    );
    assert_eq!(foreign_sources(&other_registry, deny()).len(), 1);
}

#[test]
fn no_banned_crate_is_built() {
    for manifest in ["Cargo.toml", "guest-tools/Cargo.toml"] {
        let built = graph(&repo().join(manifest));
        assert!(
            built.iter().any(|(name, _)| name == "aws-lc-rs") || manifest != "Cargo.toml",
            "the graph lists the host's crates: {built:?}"
        );
        let found = banned(&built, deny());
        assert!(found.is_empty(), "{manifest}:\n{}", found.join("\n"));
    }
    for name in ["openssl-sys", "native-tls", "ring"] {
        let made_up = [(name.to_owned(), "v1.0.0".to_owned())];
        assert_eq!(banned(&made_up, deny()).len(), 1, "{name}");
    }
}

#[test]
fn every_dependency_has_a_licence_deny_toml_allows() {
    for manifest in ["Cargo.toml", "guest-tools/Cargo.toml"] {
        let found = unlicensed(&metadata(&repo().join(manifest)), deny());
        assert!(
            found.is_empty(),
            "{manifest}: dependencies under licences deny.toml does not allow:\n{}",
            found.join("\n")
        );
    }
    let made_up = serde_json::json!({"packages": [
        {"name": "copyleft", "version": "1.0.0", "license": "GPL-3.0-only"},
        {"name": "either", "version": "1.0.0", "license": "GPL-3.0-only OR MIT"},
        {"name": "both", "version": "1.0.0", "license": "GPL-3.0-only AND MIT"},
        {"name": "silent", "version": "1.0.0", "license": null},
    ]});
    let found = unlicensed(&made_up, deny());
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(!found.iter().any(|f| f.contains("either")), "{found:?}");
}

/// `cargo tree` of `selection` (the packages and edges a build selects), for this machine's platform:
/// each package with its features, once.
fn features(selection: &[&str]) -> Vec<String> {
    let mut args = vec![
        "tree", "--locked", "--prefix", "none", "--format", "{p} {f}",
    ];
    args.extend_from_slice(selection);
    let output = cargo(&args, &repo().join("Cargo.toml"));
    let mut packages: Vec<String> = String::from_utf8_lossy(&output)
        .lines()
        .map(|line| line.trim_end_matches(" (*)").to_owned())
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

/// Every build the README's commands make (the demo's, the tests', the package suites' `cargo test -p
/// turngate`, `maturin develop` and the addon's) builds each shared dependency with the same features,
/// so none compiles a crate, and all above it, again.
#[test]
fn every_build_of_the_two_commands_takes_the_demo_s_dependencies_as_built() {
    let demo = features(&["--workspace", "--edges", "normal,build"]);
    let name_version = |line: &str| line.split(' ').take(2).collect::<Vec<_>>().join(" ");
    let builds: [(&str, &[&str]); 4] = [
        (
            "cargo test --workspace",
            &["--workspace", "--edges", "normal,build,dev"],
        ),
        (
            "cargo test -p turngate",
            &["-p", "turngate", "--edges", "normal,build,dev"],
        ),
        (
            "maturin develop",
            &["-p", "turngate-python", "--edges", "normal,build"],
        ),
        (
            "the Node addon",
            &["-p", "turngate-node", "--edges", "normal,build"],
        ),
    ];
    let mut differing = Vec::new();
    for (build, selection) in builds {
        for line in features(selection) {
            let built: Vec<&String> = demo
                .iter()
                .filter(|d| name_version(d) == name_version(&line))
                .collect();
            if !built.is_empty() && !built.contains(&&line) {
                differing.push(format!("{build}: {line} (the demo: {built:?})"));
            }
        }
    }
    assert!(
        differing.is_empty(),
        "these builds take crates with other features than the demo did, so those and all above them \
         compile again (ask for the features in host/Cargo.toml's [dependencies]):\n{}",
        differing.join("\n")
    );
}
