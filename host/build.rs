//! Builds the guest tools in `guest-tools/` for `wasm32-wasip2` and embeds the bundled ones.
//!
//! Like wasmtime's `test-programs/artifacts`, this runs a nested `cargo build` of the guest workspace and
//! generates `$OUT_DIR/bundled.rs`, which `include_bytes!`s each bundled component. Test-only guests are
//! exposed to the crate's tests through `TURNGATE_TEST_GUEST_<NAME>` environment variables holding their
//! paths; they are never embedded in the library or the CLI.
//!
//! Each bundled component is embedded with what it says about itself, so that a process knows every
//! bundled tool without compiling any: its descriptor from `guest-tools/descriptors.json` (written and
//! held to the components by the test `bundled_descriptors_are_what_the_components_describe`) and the
//! interfaces it imports, read from its bytes. A tool missing from that file is described at load.
//!
//! Each bundled component is also compiled here, as the sandbox's engines compile (the settings of
//! `src/sandbox/settings.rs`, included below), and its code embedded beside it: a process loads a
//! bundled tool's code instead of compiling it at its first call. Only when the target has the build
//! machine's architecture (this build's Cranelift has that backend alone); a cross build embeds none,
//! and its bundled tools compile at their first call as any other tool does.
//!
//! A fresh machine needs no setup: when the `wasm32-wasip2` standard library is missing from the active
//! toolchain, the script installs it with `rustup target add`.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

// The library's own edition detection and engine settings, so that what is compiled here is what its
// engines would compile, and loads in them.
#[allow(
    dead_code,
    reason = "the library's module; this script uses `Edition::of` alone"
)]
#[path = "src/sandbox/edition.rs"]
mod edition;
#[path = "src/sandbox/settings.rs"]
mod settings;

const GUEST_TARGET: &str = "wasm32-wasip2";

/// Tools embedded in the library and offered by every toolbox that keeps the bundled tools.
const BUNDLED: &[&str] = &[
    "write_file",
    "read_file",
    "edit_file",
    "list_dir",
    "make_dir",
    "delete_file",
    "search_files",
    "fetch",
];

/// The bundled tools' descriptors, in `guest-tools/`.
const DESCRIPTORS: &str = "descriptors.json";

/// Guests built only for the tests (the containment suite's deliberately hostile tools).
const TEST_ONLY: &[&str] = &[
    "hostile_rw",
    "hostile_ro",
    "hostile_rw_p3",
    "hostile_ro_p3",
    "hostile_net",
    "net_probe",
    "p3_probe",
    "fetch_p2",
    "noop",
    "noop_p3",
    "bad_schema",
    "spin_describe",
    "busy",
    "not_a_tool",
];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let repo = manifest_dir
        .parent()
        .expect("host/ lives in the repository")
        .to_path_buf();
    let guests = repo.join("guest-tools");
    println!("cargo:rerun-if-changed={}", guests.display());
    println!("cargo:rerun-if-changed={}", repo.join("wit").display());

    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        repo.join("Cargo.lock").display()
    );
    println!(
        "cargo:rustc-env=TURNGATE_VERSION={}",
        version_line(&manifest_dir, &repo)
    );

    ensure_guest_target();
    let target_dir = guest_target_dir();
    build_guests(&guests, &target_dir);

    let artifacts = target_dir.join(GUEST_TARGET).join("release");
    let descriptors_path = guests.join(DESCRIPTORS);
    let descriptors: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&descriptors_path).expect("read descriptors.json"))
            .expect("guest-tools/descriptors.json is a JSON object");
    let mut bundled = String::from(
        "/// Every bundled tool's component, built from `guest-tools/`, with the SHA-256 of its bytes\n\
         /// (computed here, so a process never reads a component it does not call) and what it says\n\
         /// about itself.\n\
         pub(crate) const BUNDLED_COMPONENTS: &[BundledComponent] = &[\n",
    );
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let mut compiled = Precompiled::for_this_target(&out_dir);
    for name in BUNDLED {
        let path = artifact(&artifacts, name);
        let bytes = std::fs::read(&path).expect("read a built guest");
        let digest = Sha256::digest(&bytes)
            .iter()
            .fold(String::new(), |mut hex, b| {
                write!(hex, "{b:02x}").unwrap();
                hex
            });
        let descriptor = descriptors
            .get(*name)
            .map(|entry| raw_descriptor(entry, component_imports(&bytes)));
        writeln!(
            bundled,
            "    BundledComponent {{ sha256: {digest:?}, bytes: include_bytes!({:?}), descriptor: {descriptor:?} }},",
            path.display().to_string()
        )
        .unwrap();
        compiled.add(name, &digest, &bytes);
    }
    // For the test that holds descriptors.json to what the components describe.
    println!(
        "cargo:rustc-env=TURNGATE_BUNDLED_GUESTS={}",
        artifacts.display()
    );
    bundled.push_str("];\n");
    std::fs::write(out_dir.join("bundled.rs"), bundled).expect("write bundled.rs");
    std::fs::write(out_dir.join("precompiled.rs"), compiled.finish())
        .expect("write precompiled.rs");

    for name in TEST_ONLY {
        let path = artifact(&artifacts, name);
        println!(
            "cargo:rustc-env=TURNGATE_TEST_GUEST_{}={}",
            name.to_uppercase(),
            path.display()
        );
    }
}

/// The bundled tools' code compiled ahead, and the table of it (`$OUT_DIR/precompiled.rs`) that
/// `src/sandbox/precompiled.rs` includes.
struct Precompiled {
    /// Where each tool's code is written; `None` for a target of another architecture than this
    /// machine's, for which nothing is compiled.
    dir: Option<PathBuf>,
    /// The target's triple, which the code is compiled for.
    target: String,
    table: String,
}

/// The CPU features x86_64 code is compiled for: x86-64-v2 (SSE3 to SSE4.2 and POPCNT, in every x86_64
/// CPU made since 2009). wasmtime loads code only on a CPU that has every feature it was compiled
/// for; on one without them, the sandbox compiles the tool as it compiles any other.
const X86_64_FEATURES: &[&str] = &[
    "has_sse3",
    "has_ssse3",
    "has_sse41",
    "has_sse42",
    "has_popcnt",
];

impl Precompiled {
    fn for_this_target(out_dir: &Path) -> Precompiled {
        let target = env::var("TARGET").expect("set by cargo");
        let host = env::var("HOST").expect("set by cargo");
        let arch = |triple: &str| triple.split('-').next().unwrap_or_default().to_owned();
        let dir = (arch(&target) == arch(&host)).then(|| {
            let dir = out_dir.join("precompiled");
            std::fs::create_dir_all(&dir).expect("create the precompiled code's directory");
            dir
        });
        Precompiled {
            dir,
            target,
            table: String::from(
                "/// Each bundled component's SHA-256 and its code, compiled when turngate was built.\n\
                 pub(super) const PRECOMPILED: &[(&str, &[u8])] = &[\n",
            ),
        }
    }

    /// Compiles the component `name` (whose SHA-256 is `digest`) into the table.
    fn add(&mut self, name: &str, digest: &str, component: &[u8]) {
        let Some(dir) = &self.dir else {
            return;
        };
        let target = &self.target;
        let mut config = settings::config_for(edition::Edition::of(component));
        // An explicit target: Cranelift then uses the features named here, not this machine's.
        config
            .target(target)
            .unwrap_or_else(|e| panic!("wasmtime cannot compile for {target}: {e}"));
        if target.starts_with("x86_64-") {
            for feature in X86_64_FEATURES {
                // SAFETY: each is a CPU feature the loading engine checks the CPU for before it runs
                // code compiled with it (`Engine::check_compatible_with_isa_flag`).
                unsafe {
                    config.cranelift_flag_enable(feature);
                }
            }
        }
        let engine = wasmtime::Engine::new(&config).expect("an engine with the sandbox's settings");
        let code = engine
            .precompile_component(component)
            .unwrap_or_else(|e| panic!("compiling the bundled tool {name}: {e:?}"));
        let path = dir.join(format!("{name}.cwasm"));
        std::fs::write(&path, code).expect("write a bundled tool's code");
        writeln!(
            self.table,
            "    ({digest:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }

    fn finish(mut self) -> String {
        self.table.push_str("];\n");
        self.table
    }
}

/// The version of `package` the workspace's `Cargo.lock` holds (the one this build compiles), if the
/// lock is there and holds it once.
fn locked_version(repo: &Path, package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(repo.join("Cargo.lock")).ok()?;
    let name = format!("name = \"{package}\"");
    let mut versions = lock
        .split("[[package]]")
        .filter(|block| block.lines().any(|line| line.trim() == name))
        .filter_map(|block| {
            block
                .lines()
                .find_map(|line| line.trim().strip_prefix("version = \"")?.strip_suffix('"'))
        });
    let version = versions.next()?;
    versions.next().is_none().then(|| version.to_owned())
}

/// What `turngate --version` says after the name: the crate's version, the wasmtime it embeds (the exact
/// version `Cargo.lock` holds) and the tool worlds it serves (read from `wit/tool.wit`), so a bug report
/// or a tool author can tell what a binary runs without its sources.
fn version_line(manifest_dir: &Path, repo: &Path) -> String {
    let wasmtime = locked_version(repo, "wasmtime").unwrap_or_else(|| {
        // Built without the workspace's lock: the version the manifest asks for.
        let manifest =
            std::fs::read_to_string(manifest_dir.join("Cargo.toml")).expect("read Cargo.toml");
        manifest
            .lines()
            .find_map(|line| line.strip_prefix("wasmtime = { version = \""))
            .and_then(|rest| rest.split('"').next())
            .map(|requirement| requirement.trim_start_matches(['=', '~', '^']).to_owned())
            .expect("host/Cargo.toml asks for wasmtime as `wasmtime = { version = \"~X.Y.Z\"`")
    });
    let wit = std::fs::read_to_string(repo.join("wit/tool.wit")).expect("read wit/tool.wit");
    let package = wit
        .lines()
        .find_map(|line| line.strip_prefix("package ")?.strip_suffix(';'))
        .expect("wit/tool.wit names its package");
    let (namespace, version) = package.split_once('@').expect("the package is versioned");
    // The `async-` worlds are the WASI 0.3 edition (`call` an async func).
    let (wasi_0_3, wasi_0_2): (Vec<String>, Vec<String>) = wit
        .lines()
        .filter_map(|line| line.strip_prefix("world ")?.split_whitespace().next())
        .map(|world| format!("{namespace}/{world}@{version}"))
        .partition(|world| world.contains("/async-"));
    format!(
        "{} (wasmtime {wasmtime}; tool worlds {} on WASI 0.2, {} on WASI 0.3)",
        env::var("CARGO_PKG_VERSION").expect("set by cargo"),
        wasi_0_2.join(", "),
        wasi_0_3.join(", ")
    )
}

/// A bundled tool's entry of `descriptors.json` (its descriptor as `ToolDescriptor` serializes it) as
/// the sandbox's raw descriptor: the schema as text, with the component's imports.
fn raw_descriptor(entry: &serde_json::Value, imports: Vec<String>) -> String {
    let mut raw = entry.clone();
    let fields = raw.as_object_mut().expect("a descriptor is an object");
    let schema = fields
        .get("input_schema")
        .expect("a descriptor has an input_schema")
        .to_string();
    fields.insert("input_schema".into(), schema.into());
    fields.insert("imports".into(), imports.into());
    raw.to_string()
}

/// The interfaces a component imports (its own imports, not those of the modules and components nested
/// in it), as wasmtime names them.
fn component_imports(bytes: &[u8]) -> Vec<String> {
    let mut imports = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.expect("a bundled guest is a valid component") {
            wasmparser::Payload::Version { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth -= 1,
            wasmparser::Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    let import = import.expect("a valid import");
                    // A type the component imports is not an interface the host provides.
                    if !matches!(import.ty, wasmparser::ComponentTypeRef::Type(_)) {
                        imports.push(import.name.name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    imports
}

fn artifact(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "guest build did not produce {}",
        path.display()
    );
    path
}

/// Installs the guest target into the active toolchain when its standard library is missing.
fn ensure_guest_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("run rustc --print sysroot");
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if sysroot.join("lib/rustlib").join(GUEST_TARGET).is_dir() {
        return;
    }
    let status = Command::new("rustup")
        .args(["target", "add", GUEST_TARGET])
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "the {GUEST_TARGET} target is missing and rustup could not be run to add it: {e}"
            )
        });
    assert!(
        status.success(),
        "`rustup target add {GUEST_TARGET}` failed"
    );
}

/// One target directory for the guests, shared by every profile of the host build, so that `cargo build`,
/// `cargo test` and `cargo clippy` do not each rebuild them.
fn guest_target_dir() -> PathBuf {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out.
    let build = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .expect("OUT_DIR is inside a build directory");
    let mut target = build
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf();
    let triple = env::var_os("TARGET").expect("set by cargo");
    if target.file_name() == Some(triple.as_os_str()) {
        // A build for a named target (<target>/<triple>/<profile>): the target directory is one level
        // up. (Cargo does not always write a `CACHEDIR.TAG` to tell the target directory by.)
        target.pop();
    }
    target.join("guests")
}

fn build_guests(guests: &Path, target_dir: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(guests)
        .args([
            "build",
            "--release",
            "--locked",
            "--workspace",
            "--target",
            GUEST_TARGET,
        ])
        .arg("--target-dir")
        .arg(target_dir);
    // The host build's flags and target are not the guests'.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in env::vars_os() {
        if key.to_string_lossy().starts_with("CARGO_PROFILE_") {
            cmd.env_remove(key);
        }
    }
    let status = cmd.status().expect("run cargo to build the guest tools");
    assert!(
        status.success(),
        "building the guest tools for {GUEST_TARGET} failed"
    );
}
