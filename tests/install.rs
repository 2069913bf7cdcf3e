//! Installable without Rust: the artifacts `release/build` makes, installed the way users install them,
//! then used on a PATH that holds no `cargo` and no `rustc` (only the venv, `node` and the system's
//! `/usr/bin:/bin`), from folders outside the checkout.
//!
//! `release/build --native --profile dev` builds them here, reusing the workspace's dev build: the wheel,
//! the npm packages and the CLI for this machine's own glibc, and the sdist. Each test then installs an
//! artifact with the user's tool (pip, npm, a copied binary; the sdist is the one artifact built where
//! Rust is), runs what the docs say to run (the Python and Node agent loop examples against a fake
//! provider on loopback, `turngate demo`), and checks that a wrong platform or a tampered download is
//! refused in words. What only the release's zig builds make (the static musl CLIs, the manylinux_2_28
//! bindings, the aarch64 artifacts) is run by `release/check`, on each release runner for its own
//! architecture and under QEMU for aarch64: a musl build compiles every dependency again, 220 to 450 s
//! of the 30 minutes CI has (BENCHMARKS.md, "The README's commands").
//!
//! Needs python3 with venv, node and npm; the SDKs the examples drive come from PyPI and npm at the
//! versions the binding tests pin.
//!
//! The packages and release step, not the test command: the package builds and their test dependencies
//! from PyPI and npm take minutes, so these tests are `#[ignore]`d in `cargo test --workspace` and run by
//! `.ci/run` after it, with the Python and Node packages' own suites, as
//! `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored` (the README names both
//! commands).
//!
//! The artifacts these tests hold to their names and formats are Linux's (a manylinux wheel with an ELF
//! extension module, the `linux-*-gnu` npm packages, the `unknown-linux-gnu` CLI, a `SHA256SUMS` checked
//! with GNU `sha256sum`): those tests are compiled on Linux only (`#[cfg]`, not `#[ignore]`: they are
//! ignored already, and `--ignored` runs them). The sdist's test runs everywhere.

mod binding_support;
mod fake_provider;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
#[cfg(target_os = "linux")]
use std::time::Instant;

use binding_support::{as_from_a_shell, repo, run};
use fake_provider::sse::{self, End};
use fake_provider::{FakeProvider, Reply};
use turngate::Provider;

/// The artifacts, built once for every test of this binary.
fn dist() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let out = scratch("dist");
        run(
            as_from_a_shell(&mut Command::new(repo().join("release/build")))
                .args(["--native", "--profile", "dev", "--out"])
                .arg(&out)
                // The folder tests/node.rs builds with, so the two builds of the addon are one.
                .env(
                    "NAPI_TYPE_DEF_TMP_FOLDER",
                    Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-type-defs"),
                ),
            "release/build --native --profile dev",
        );
        out
    })
}

/// A fresh folder for this test binary, outside the checkout's source folders.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("install")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The one artifact in `dist()` whose name starts with `prefix` and ends with `suffix`.
fn artifact(prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dist())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "one {prefix}*{suffix} in dist: {found:?}");
    found.into_iter().next().unwrap()
}

/// The wheel, tagged abi3 (CPython 3.10 and later) and manylinux.
#[cfg(target_os = "linux")]
fn wheel() -> PathBuf {
    let wheel = artifact("turngate-", ".whl");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("-cp310-abi3-manylinux_2_"), "{name}");
    wheel
}

/// A PATH of `first` and the system's own folders, with no `cargo` and no `rustc` on it.
fn bare_path(first: &[&Path]) -> OsString {
    let dirs: Vec<PathBuf> = first
        .iter()
        .map(|dir| dir.to_path_buf())
        .chain(["/usr/bin", "/bin"].map(PathBuf::from))
        .collect();
    for dir in &dirs {
        for tool in ["cargo", "rustc", "rustup"] {
            assert!(
                !dir.join(tool).exists(),
                "{} holds {tool}: not a PATH without Rust",
                dir.display()
            );
        }
    }
    std::env::join_paths(dirs).unwrap()
}

/// `command` with nothing of this process's environment but `path`, a fresh HOME and cache, and `vars`.
fn bare<'a>(command: &'a mut Command, home: &Path, path: &OsString) -> &'a mut Command {
    command
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("TURNGATE_CACHE_DIR", home.join("cache"))
        .env("LANG", "C.UTF-8")
}

/// Runs `command`, answering its output whatever its status.
fn output(command: &mut Command) -> Output {
    command.output().unwrap()
}

/// A provider whose first turn writes notes.txt and whose second ends the loop.
fn fake(provider: Provider) -> FakeProvider {
    FakeProvider::scripted(
        provider,
        vec![
            Reply::Sse(sse::turn(
                provider,
                "",
                &[sse::write("u1", "notes.txt", "Final notes\n")],
                End::Complete,
            )),
            Reply::Sse(sse::done(provider)),
        ],
    )
}

/// A workspace holding notes.txt, for an example to change.
fn workspace(at: &Path) -> PathBuf {
    let root = at.join("workspace");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "Original notes\n").unwrap();
    root
}

/// Checks what an agent loop example did against `fake`: two requests, every call answered, the file
/// written, the model's last text printed.
fn assert_example_ran(
    what: &str,
    out: &Output,
    fake: &FakeProvider,
    provider: Provider,
    root: &Path,
) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}\n{stderr}",
        out.status
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{what}: {stderr}");
    for request in &requests {
        assert_eq!(
            fake_provider::missing_results(provider, &request.body),
            None
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "Final notes\n"
    );
    assert!(stdout.contains("All done."), "{what}: {stdout}");
}

/// The SDKs the examples drive, at the versions the package's tests pin (and maturin: the pins are the
/// package tests' own), into `venv`.
fn install_sdks(venv: &Path, home: &Path, path: &OsString) {
    run(
        bare(
            Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "--disable-pip-version-check", "-r"])
                .arg(repo().join("python/tests/requirements.txt")),
            home,
            path,
        ),
        "pip install the SDKs (needs PyPI)",
    );
}

/// Both Python agent loop examples, run with `venv`'s turngate against a fake provider, each in a
/// folder named after `label` and the example.
fn assert_python_examples_run(label: &str, venv: &Path, home: &Path, path: &OsString) {
    for (example, provider, variable) in [
        ("anthropic_agent.py", Provider::Anthropic, "ANTHROPIC"),
        ("openai_agent.py", Provider::OpenAiResponses, "OPENAI"),
    ] {
        let at = scratch(&format!("{label}-{example}"));
        let root = workspace(&at);
        std::fs::copy(
            repo().join("python/examples").join(example),
            at.join(example),
        )
        .unwrap();
        let fake = fake(provider);
        let base_url = match provider {
            Provider::OpenAiResponses => format!("{}/v1", fake.base_url()),
            _ => fake.base_url(),
        };
        let out = output(
            bare(
                Command::new(venv.join("bin/python"))
                    .arg(example)
                    .arg(&root)
                    .arg("Update the notes.")
                    .current_dir(&at),
                home,
                path,
            )
            .env(format!("{variable}_BASE_URL"), base_url)
            .env(format!("{variable}_API_KEY"), "test"),
        );
        assert_example_ran(example, &out, &fake, provider, &root);
    }
}

/// Every `(name, version)` a Cargo.lock pins.
fn packages_of(lock: &str) -> std::collections::BTreeSet<(String, String)> {
    let mut packages = std::collections::BTreeSet::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(value) = line.strip_prefix("name = ") {
            name = Some(value.trim_matches('"').to_owned());
        } else if let (Some(value), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            packages.insert((n, value.trim_matches('"').to_owned()));
        }
    }
    packages
}

/// The real interpreter behind `python3` (not a shim), for the fresh venv.
fn python3() -> PathBuf {
    let out = run(
        Command::new("python3").args(["-c", "import sys; print(sys.executable)"]),
        "python3 (needs CPython 3.10 or later with venv)",
    );
    PathBuf::from(out.trim())
}

// Linux only: the wheel is manylinux.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn the_wheel_installs_with_pip_into_a_fresh_venv_and_the_python_examples_run_without_rust() {
    let wheel = wheel();
    let home = scratch("python");
    let venv = home.join("venv");
    let path = bare_path(&[&venv.join("bin")]);

    let started = Instant::now();
    run(
        bare(
            Command::new(python3()).args(["-m", "venv"]).arg(&venv),
            &home,
            &path,
        ),
        "python3 -m venv",
    );
    run(
        bare(
            Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "--no-index", "--disable-pip-version-check"])
                .arg(&wheel),
            &home,
            &path,
        ),
        "pip install the wheel",
    );
    let imported = run(
        bare(
            Command::new(venv.join("bin/python"))
                .args(["-c", "import turngate; print(turngate.__file__)"])
                .current_dir(&home),
            &home,
            &path,
        ),
        "import turngate",
    );
    eprintln!(
        "from nothing to `import turngate`: {:.1?} (venv, pip install of the wheel, import)",
        started.elapsed()
    );
    assert!(
        Path::new(imported.trim()).starts_with(&venv),
        "turngate imported from the venv, not the checkout: {imported}"
    );

    install_sdks(&venv, &home, &path);
    assert_python_examples_run("python", &venv, &home, &path);
}

/// The sdist, installed by pip where Rust is (the from-source path: maturin and cargo), builds a working
/// package: the library's build script compiles the bundled tools from the `guest-tools/` and `wit/` the
/// archive carries, and both examples run. Built in the dev profile into the workspace's target folder,
/// so only the workspace's own crates compile again. The archive is unpacked into a folder that is the
/// same on every run (pip builds an unpacked sdist in place, as it does the one it unpacks itself), so
/// reruns do not leave a new copy of those crates in the target folder each time.
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn the_sdist_builds_with_pip_where_rust_is_and_the_python_examples_run() {
    let sdist = artifact("turngate-", ".tar.gz");
    let home = scratch("python-sdist");
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&sdist)
            .arg("-C")
            .arg(&home),
        "unpack the sdist",
    );
    let unpacked = home.join(
        sdist
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".tar.gz"),
    );
    let venv = home.join("venv");
    let bare_venv = bare_path(&[&venv.join("bin")]);
    run(
        bare(
            Command::new(python3()).args(["-m", "venv"]).arg(&venv),
            &home,
            &bare_venv,
        ),
        "python3 -m venv",
    );
    install_sdks(&venv, &home, &bare_venv);
    let with_rust = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    run(
        as_from_a_shell(&mut Command::new(venv.join("bin/pip")))
            .args(["install", "-q", "--no-index", "--no-build-isolation"])
            .arg("--disable-pip-version-check")
            .arg(&unpacked)
            .current_dir(&home)
            .env("PATH", &with_rust)
            .env("VIRTUAL_ENV", &venv)
            .env("MATURIN_PEP517_ARGS", "--profile dev")
            .env("CARGO_TARGET_DIR", target),
        "pip install the sdist (builds it with maturin and cargo)",
    );
    // Not `--locked`: the archive's Cargo.lock is the workspace's, which also pins the Node addon's
    // crates, and cargo drops those. What it keeps is pinned as the workspace pins it: nothing resolved anew.
    let workspace_lock = packages_of(&std::fs::read_to_string(repo().join("Cargo.lock")).unwrap());
    let built_with = packages_of(&std::fs::read_to_string(unpacked.join("Cargo.lock")).unwrap());
    let anew: Vec<_> = built_with.difference(&workspace_lock).collect();
    assert!(anew.is_empty(), "the sdist's build resolved {anew:?} anew");
    assert_python_examples_run("python-sdist", &venv, &home, &bare_venv);
}

// Linux only: the wheel is manylinux, and macOS is one of the other platforms it is refused on.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn pip_refuses_the_wheel_on_another_platform_or_python_naming_it() {
    let wheel = wheel();
    let home = scratch("python-platforms");
    for (what, args) in [
        ("musl", &["--platform", "musllinux_1_2_x86_64"][..]),
        ("another CPU", &["--platform", "manylinux_2_28_ppc64le"][..]),
        ("macOS", &["--platform", "macosx_14_0_arm64"][..]),
        ("CPython 3.9", &["--python-version", "3.9"][..]),
    ] {
        let out = output(
            Command::new(python3())
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--dry-run",
                    "--no-index",
                    "--only-binary=:all:",
                ])
                .args(["--disable-pip-version-check", "--target"])
                .arg(home.join("target"))
                .args(args)
                .arg(&wheel),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: pip installed the wheel");
        assert!(
            stderr.contains("is not a supported wheel on this platform"),
            "{what}: {stderr}"
        );
    }
}

/// A wheel's files copied onto a machine they were not built for (here: the extension module marked as
/// another CPU's, as an aarch64 wheel unpacked on x86_64 is) fail at import with the platform found and
/// what is prebuilt, not only the dynamic linker's words.
// Linux only: the extension module is ELF, and the message names Linux.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn an_extension_module_that_does_not_load_is_an_import_error_naming_the_platform() {
    let wheel = wheel();
    let home = scratch("python-unloadable");
    let site = home.join("site");
    run(
        Command::new(python3())
            .args(["-m", "pip", "install", "-q", "--no-index", "--no-deps"])
            .args(["--disable-pip-version-check", "--target"])
            .arg(&site)
            .arg(&wheel),
        "pip install --target",
    );
    let module = std::fs::read_dir(site.join("turngate"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().ends_with(".so"))
        .expect("the wheel holds the extension module");
    let mut elf = std::fs::read(&module).unwrap();
    let other_machine: u16 = if cfg!(target_arch = "x86_64") {
        183
    } else {
        62
    }; // EM_AARCH64, EM_X86_64
    elf[18..20].copy_from_slice(&other_machine.to_le_bytes());
    std::fs::write(&module, elf).unwrap();
    let out = output(
        Command::new(python3())
            .args(["-c", "import turngate"])
            .env("PYTHONPATH", &site)
            .current_dir(&home),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ImportError: turngate's extension module does not load on linux")
            && stderr.contains(
                "The prebuilt wheels are for CPython 3.10 or later on Linux x86_64 and aarch64"
            ),
        "{stderr}"
    );
}

/// `npm install` of the tarballs, offline: nothing of turngate comes from a registry.
#[cfg(target_os = "linux")]
fn npm_install(folder: &Path, home: &Path, path: &OsString, tarballs: &[&Path]) -> Output {
    output(bare(
        Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .args(tarballs)
            .current_dir(folder),
        home,
        path,
    ))
}

/// The folder `node` lives in, for a PATH without Rust.
#[cfg(target_os = "linux")]
fn node_dir() -> PathBuf {
    let out = run(
        Command::new("node").args(["-p", "process.execPath"]),
        "node (needs Node 20 or later)",
    );
    Path::new(out.trim()).parent().unwrap().to_path_buf()
}

// Linux only: the platform package is `turngate-linux-<cpu>-gnu`.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn the_npm_packages_install_into_a_fresh_folder_and_the_node_example_runs_without_rust() {
    let main = artifact("turngate-0", ".tgz");
    let platform = artifact(&format!("turngate-linux-{}-gnu-", node_cpu()), ".tgz");
    let home = scratch("node");
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("package.json"), "{\"private\": true}\n").unwrap();
    let node = node_dir();
    let path = bare_path(&[&node]);

    let started = Instant::now();
    let out = npm_install(&project, &home, &path, &[&main, &platform]);
    assert!(
        out.status.success(),
        "npm install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let required = run(
        bare(
            Command::new(node.join("node"))
                .args([
                    "-p",
                    "require.resolve('turngate') + ' ' + typeof require('turngate').Toolbox",
                ])
                .current_dir(&project),
            &home,
            &path,
        ),
        "require('turngate')",
    );
    eprintln!(
        "from nothing to `require('turngate')`: {:.1?} (npm install of the two tarballs, require)",
        started.elapsed()
    );
    assert!(
        required.starts_with(&project.join("node_modules/turngate").display().to_string())
            && required.contains(" function"),
        "{required}"
    );

    // The SDK the example drives, at the version the package's tests pin.
    let sdk = run(
        Command::new("node")
            .args([
                "-p",
                "require('./package.json').devDependencies['@anthropic-ai/sdk']",
            ])
            .current_dir(repo().join("node")),
        "the pinned @anthropic-ai/sdk",
    );
    let out = output(bare(
        Command::new("npm")
            .args([
                "install",
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg(format!("@anthropic-ai/sdk@{}", sdk.trim()))
            .current_dir(&project),
        &home,
        &path,
    ));
    assert!(
        out.status.success(),
        "npm install the SDK: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(
        repo().join("node/examples/anthropic-agent.js"),
        project.join("agent.js"),
    )
    .unwrap();
    let root = workspace(&home);
    let fake = fake(Provider::Anthropic);
    let out = output(
        bare(
            Command::new(node.join("node"))
                .arg("agent.js")
                .arg(&root)
                .arg("Update the notes.")
                .current_dir(&project),
            &home,
            &path,
        )
        .env("ANTHROPIC_BASE_URL", fake.base_url())
        .env("ANTHROPIC_API_KEY", "test"),
    );
    assert_example_ran("node example", &out, &fake, Provider::Anthropic, &root);
}

/// This machine's CPU in Node's words.
#[cfg(target_os = "linux")]
fn node_cpu() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => panic!("no prebuilt addon for {other}"),
    }
}

// Linux only: the packages and the message are `linux-<cpu>-gnu`'s.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn the_npm_packages_say_which_platform_is_missing_when_none_fits() {
    let main = artifact("turngate-0", ".tgz");
    let home = scratch("node-platforms");
    let node = node_dir();
    let path = bare_path(&[&node]);

    // The main package alone (npm --omit=optional, or a lockfile from another platform).
    let alone = home.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::write(alone.join("package.json"), "{\"private\": true}\n").unwrap();
    let out = npm_install(&alone, &home, &path, &[&main]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = output(bare(
        Command::new(node.join("node"))
            .args(["-e", "require('turngate')"])
            .current_dir(&alone),
        &home,
        &path,
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "turngate's addon for linux-{0}-gnu is the package turngate-linux-{0}-gnu, which is not installed",
            node_cpu()
        )),
        "{stderr}"
    );

    // Another CPU's package: npm refuses it by its `cpu` field.
    let other_cpu = if node_cpu() == "x64" { "arm64" } else { "x64" };
    let addon = alone.join("node_modules/turngate/index.js"); // any file stands in for the addon
    run(
        Command::new("node")
            .arg(repo().join("node/scripts/pack.js"))
            .args(["platform", &format!("linux-{other_cpu}-gnu"), "--addon"])
            .arg(&addon)
            .arg("--out")
            .arg(&home),
        "pack another CPU's package",
    );
    let foreign = home.join(format!("turngate-linux-{other_cpu}-gnu-0.1.0.tgz"));
    let out = npm_install(&alone, &home, &path, &[&foreign]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "npm installed another CPU's addon");
    assert!(
        stderr.contains("EBADPLATFORM") && stderr.contains(&format!("\"cpu\":\"{other_cpu}\"")),
        "{stderr}"
    );
}

// Linux only: the CLI is `unknown-linux-gnu`'s.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn the_cli_runs_the_demo_from_a_folder_outside_the_checkout() {
    let binary = artifact("turngate-0", "-unknown-linux-gnu");
    let home = scratch("cli");
    let installed = home.join("bin/turngate");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    std::fs::copy(&binary, &installed).unwrap();
    let path = bare_path(&[installed.parent().unwrap()]);
    let version = run(
        bare(Command::new("turngate").arg("--version"), &home, &path),
        "turngate --version",
    );
    assert!(version.contains("(wasmtime "), "{version}");
    let started = Instant::now();
    let demo = run(
        bare(Command::new("turngate").arg("demo"), &home, &path).current_dir(&home),
        "turngate demo",
    );
    eprintln!("`turngate demo` of the CLI: {:.1?}", started.elapsed());
    for provider in ["anthropic", "openai-chat", "openai-responses", "gemini"] {
        let rows = demo.lines().filter(|l| l.starts_with(provider)).count();
        assert_eq!(rows, 6, "six {provider} cases in\n{demo}");
    }
}

// Linux only: GNU `sha256sum --check`, and the manylinux wheel.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "the packages and release step: `.ci/run` runs it, `cargo test -p turngate --test python --test node --test install --test platforms --test console -- --ignored`"]
fn a_tampered_artifact_fails_its_sha256sums_check() {
    let copy = scratch("sums");
    for entry in std::fs::read_dir(dist()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
    }
    let sums = std::fs::read_to_string(copy.join("SHA256SUMS")).unwrap();
    let listed: Vec<&str> = sums.lines().map(|line| &line[66..]).collect();
    let mut present: Vec<String> = std::fs::read_dir(&copy)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "SHA256SUMS")
        .collect();
    present.sort();
    assert_eq!(listed, present, "SHA256SUMS lists every artifact");
    let out = output(
        Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&copy),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let wheel = copy.join(wheel().file_name().unwrap());
    let mut bytes = std::fs::read(&wheel).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&wheel, bytes).unwrap();
    let out = output(
        Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&copy),
    );
    assert!(!out.status.success(), "a changed wheel passed its check");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!(
        "{}: FAILED",
        wheel.file_name().unwrap().to_string_lossy()
    )));
}
