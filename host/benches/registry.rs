//! Tools from registries, against baselines in the same run; prints Markdown tables.
//! `cargo bench --bench registry` (needs Debian's `docker-registry` and `skopeo`).
//!
//! * Install: `turngate tools add` of a 10 MB component (the `net_probe` test guest padded with a
//!   custom section), key-signed, from a registry on loopback into a new tools directory with an empty
//!   cache (pull, signature, digest checks, the write, the lock, the compile into the cache), against
//!   `skopeo copy` of the same artifact into an OCI layout (pull and write only).
//! * Verification alone, in this process: a cosign key signature (the payload checked, the key parsed,
//!   the ECDSA verification), and a Sigstore bundle (cosign 3 keyless, the public-good instance: the
//!   certificate chain, the SCT, the log entry's promise and inclusion proof, the timestamp) from
//!   sigstore-verify's test vectors.
//! * A `--locked` start with ten tools installed from a layout with a key signature (each kept
//!   manifest and signature checked again) against the same ten components copied by hand and pinned
//!   by `tools lock`: `ToolboxBuilder::build` in this process, cache warm.
//! * The first `turngate call` of a tool just installed with `tools add` against a warm call of it, and
//!   the first call when nothing was compiled at install (an empty cache), for where the time goes.
//! * An MCP client's first `tools/call` (`read_file`) sent one second after `initialize`, as a person's
//!   first prompt comes: with an empty cache (the tools prepared in the background meanwhile) against a
//!   warm cache; the time from sending the call to its result.
//!
//! Medians and p90 over the samples; the ratio is turngate / baseline at the median.

#[path = "../../tests/registry_support/mod.rs"]
mod registry_support;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use registry_support::{Registry, key_pair, registry_binary, sigstore_vector, trusting};
use serde_json::{Value, json};
use support::{bin, median, percentile, row};
use turngate::digest::Sha256Digest;
use turngate::registry::{bundle, cosign};
use turngate::{CacheSetting, Policy, ToolboxBuilder};

const INSTALL_SAMPLES: usize = 15;
const VERIFY_SAMPLES: usize = 300;
const LOCKED_SAMPLES: usize = 200;
const FIRST_CALL_SAMPLES: usize = 15;
const MCP_SAMPLES: usize = 16;

/// `turngate ARGS` with `cache` as its cache; asserts it succeeded.
fn turngate(args: &[&str], cache: &Path) -> Duration {
    let start = Instant::now();
    let out = Command::new(bin())
        .args(args)
        .env("TURNGATE_CACHE_DIR", cache)
        .env("DOCKER_CONFIG", "/nonexistent-docker-config")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "turngate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// `turngate tools publish COMPONENT REFERENCE EXTRA...`; answers the manifest digest it printed.
fn publish(component: &Path, reference: &str, extra: &[&str]) -> String {
    let out = Command::new(bin())
        .args(["tools", "publish"])
        .arg(component)
        .arg(reference)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    printed["manifest"].as_str().unwrap().to_owned()
}

/// The `net_probe` guest with a custom section appended, `size` bytes in all.
fn padded_component(size: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(env!("TURNGATE_TEST_GUEST_NET_PROBE")).unwrap();
    let name = b"padding";
    let body_len = size - bytes.len() - 1 - 4;
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.resize(body_len, 0);
    for (i, byte) in body.iter_mut().enumerate().skip(1 + name.len()) {
        *byte = (i as u32).wrapping_mul(2654435761).to_le_bytes()[0];
    }
    bytes.push(0);
    // The section's size as a 4-byte LEB128.
    let n = body.len() as u32;
    bytes.extend_from_slice(&[
        (n & 0x7f) as u8 | 0x80,
        ((n >> 7) & 0x7f) as u8 | 0x80,
        ((n >> 14) & 0x7f) as u8 | 0x80,
        (n >> 21) as u8,
    ]);
    bytes.extend_from_slice(&body);
    assert_eq!(bytes.len(), size);
    bytes
}

struct InstallRows {
    add: Vec<Duration>,
    /// The same into another tools directory, the compiled component already in the cache: the pull,
    /// the checks and the install without the compile.
    add_cached: Vec<Duration>,
    skopeo: Vec<Duration>,
}

fn install_rows(registry: &Registry, dir: &Path, key: &Path, policy: &Path) -> InstallRows {
    let component = dir.join("big.wasm");
    std::fs::write(&component, padded_component(10 << 20)).unwrap();
    let reference = registry.reference("acme/big", "1.0");
    let scratch = dir.join("scratch-cache");
    let manifest = publish(&component, &reference, &["--plain-http"]);
    turngate(
        &[
            "tools",
            "sign",
            "--key",
            key.to_str().unwrap(),
            &registry.by_digest("acme/big", &manifest),
            "--plain-http",
        ],
        &scratch,
    );
    let source = format!("docker://{}/acme/big:1.0", registry.addr);
    let (mut add, mut add_cached, mut skopeo) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 0..INSTALL_SAMPLES + 2 {
        let cache = dir.join(format!("cache-{sample}"));
        // Into a new tools directory: the first with an empty cache, the second with the component's
        // compiled form in it.
        let add_into = |tools: &Path| {
            std::fs::create_dir(tools).unwrap();
            turngate(
                &[
                    "tools",
                    "add",
                    &reference,
                    "--tools",
                    tools.to_str().unwrap(),
                    "--plain-http",
                    "--policy",
                    policy.to_str().unwrap(),
                ],
                &cache,
            )
        };
        let (tools, again) = (
            dir.join(format!("tools-{sample}")),
            dir.join(format!("tools-again-{sample}")),
        );
        let took = add_into(&tools);
        let cached = add_into(&again);
        let layout = dir.join(format!("layout-{sample}"));
        let start = Instant::now();
        let status = Command::new("skopeo")
            .args(["copy", "--quiet", "--src-tls-verify=false", &source])
            .arg(format!("oci:{}:1.0", layout.display()))
            .stdin(Stdio::null())
            .status()
            .unwrap();
        let copied = start.elapsed();
        assert!(status.success());
        if sample >= 2 {
            add.push(took);
            add_cached.push(cached);
            skopeo.push(copied);
        }
        std::fs::remove_dir_all(&again).unwrap();
        std::fs::remove_dir_all(&tools).unwrap();
        std::fs::remove_dir_all(&cache).unwrap();
        std::fs::remove_dir_all(&layout).unwrap();
    }
    InstallRows {
        add,
        add_cached,
        skopeo,
    }
}

fn timed(samples: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..samples.min(20) {
        f();
    }
    (0..samples)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect()
}

/// Verifying a cosign key signature, and a Sigstore bundle.
fn verify_rows(dir: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let (key, public) = key_pair(dir, "verify");
    let pair = cosign::private_key(&std::fs::read_to_string(key).unwrap()).unwrap();
    let manifest = Sha256Digest::of(b"a manifest");
    let payload = cosign::payload("127.0.0.1:5000/acme/tool", &manifest);
    let signature = cosign::sign(&payload, &pair).unwrap();
    let public =
        sigstore_verify::types::DerPublicKey::from_pem(&std::fs::read_to_string(public).unwrap())
            .unwrap();
    let key_rows = timed(VERIFY_SAMPLES, || {
        cosign::check_payload(&payload, &manifest).unwrap();
        let key = sigstore_verify::crypto::VerificationKey::from_spki(&public).unwrap();
        assert!(cosign::verifies(&payload, &signature, &key));
    });
    let json = sigstore_vector("bundles/cosign-v3-blob.sigstore.json");
    let blob_digest = Sha256Digest::of(sigstore_vector("bundles/cosign-v3-blob.txt").as_bytes());
    let policy = Policy::from_toml(
        "[trust.identities.upstream]\nissuer = \"https://github.com/login/oauth\"\nsubject = \"*@gmail.com\"\n",
    )
    .unwrap();
    let trust = policy.trust();
    let signers: Vec<_> = trust.signers_for_any().collect();
    let bundle_rows = timed(VERIFY_SAMPLES / 3, || {
        bundle::verify(&json, &blob_digest, &signers, &trust).unwrap();
    });
    (key_rows, bundle_rows)
}

/// The bundled components (those `guest-tools/descriptors.json` describes), `net_probe` and `noop`:
/// ten tools of distinct names.
fn ten_components() -> Vec<PathBuf> {
    let built = Path::new(env!("TURNGATE_BUNDLED_GUESTS"));
    let descriptors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/descriptors.json");
    let bundled: serde_json::Map<String, Value> =
        serde_json::from_slice(&std::fs::read(descriptors).unwrap()).unwrap();
    let components: Vec<PathBuf> = bundled
        .keys()
        .map(String::as_str)
        .chain(["net_probe", "noop"])
        .map(|name| built.join(format!("{name}.wasm")))
        .collect();
    assert_eq!(components.len(), 10);
    components
}

/// Builds the toolbox of `tools` `--locked` under `policy`'s trust.
fn locked_build(tools: &Path, policy: &Policy, cache: &Path, runtime: &tokio::runtime::Runtime) {
    let toolbox = runtime
        .block_on(
            ToolboxBuilder::new()
                .without_bundled()
                .tools_dir(tools)
                .locked(true)
                .trust(policy.trust())
                .cache(CacheSetting::Dir(cache.to_path_buf()))
                .build(),
        )
        .unwrap();
    assert_eq!(toolbox.tools().count(), 10);
}

fn locked_rows(dir: &Path, key: &Path, policy_file: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let cache = dir.join("locked-cache");
    let (by_hand, installed) = (dir.join("by-hand"), dir.join("installed"));
    std::fs::create_dir(&by_hand).unwrap();
    std::fs::create_dir(&installed).unwrap();
    let layout = dir.join("ten-layout");
    for component in ten_components() {
        let name = component.file_stem().unwrap().to_str().unwrap().to_owned();
        std::fs::copy(&component, by_hand.join(format!("{name}.wasm"))).unwrap();
        let source = format!("oci:{}:{name}", layout.display());
        let by_digest = format!(
            "oci:{}@{}",
            layout.display(),
            publish(&component, &source, &[])
        );
        turngate(
            &["tools", "sign", "--key", key.to_str().unwrap(), &by_digest],
            &cache,
        );
        turngate(
            &[
                "tools",
                "add",
                &source,
                "--tools",
                installed.to_str().unwrap(),
                "--policy",
                policy_file.to_str().unwrap(),
            ],
            &cache,
        );
    }
    turngate(
        &["tools", "lock", "--tools", by_hand.to_str().unwrap()],
        &cache,
    );
    let policy = Policy::from_toml(&std::fs::read_to_string(policy_file).unwrap()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Alternated, so that both sides see the same machine.
    let (mut hand, mut registry) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        locked_build(&by_hand, &policy, &cache, &runtime);
        locked_build(&installed, &policy, &cache, &runtime);
    }
    for _ in 0..LOCKED_SAMPLES {
        let start = Instant::now();
        locked_build(&by_hand, &policy, &cache, &runtime);
        hand.push(start.elapsed());
        let start = Instant::now();
        locked_build(&installed, &policy, &cache, &runtime);
        registry.push(start.elapsed());
    }
    (registry, hand)
}

struct FirstCallRows {
    after_add: Vec<Duration>,
    warm: Vec<Duration>,
    empty_cache: Vec<Duration>,
}

fn first_call_rows(dir: &Path, key: &Path, public: &Path, policy_file: &Path) -> FirstCallRows {
    let layout = dir.join("call-layout");
    let source = format!("oci:{}:1.0", layout.display());
    let scratch = dir.join("call-scratch");
    let by_digest = format!(
        "oci:{}@{}",
        layout.display(),
        publish(
            Path::new(env!("TURNGATE_TEST_GUEST_NET_PROBE")),
            &source,
            &[]
        )
    );
    turngate(
        &["tools", "sign", "--key", key.to_str().unwrap(), &by_digest],
        &scratch,
    );
    let root = dir.join("call-root");
    std::fs::create_dir_all(&root).unwrap();
    // `tools add` writes the tool into the policy it is given with no grant (`approval = "deny"`):
    // the calls run under another that lists it.
    let call_policy = dir.join("call-policy.toml");
    std::fs::write(
        &call_policy,
        format!(
            "[trust.keys.acme]\nfile = {:?}\n[tools.net_probe]\n",
            public.display().to_string()
        ),
    )
    .unwrap();
    let mut rows = FirstCallRows {
        after_add: Vec::new(),
        warm: Vec::new(),
        empty_cache: Vec::new(),
    };
    for sample in 0..FIRST_CALL_SAMPLES + 2 {
        let tools = dir.join(format!("call-tools-{sample}"));
        std::fs::create_dir(&tools).unwrap();
        let cache = dir.join(format!("call-cache-{sample}"));
        turngate(
            &[
                "tools",
                "add",
                &source,
                "--tools",
                tools.to_str().unwrap(),
                "--policy",
                policy_file.to_str().unwrap(),
            ],
            &cache,
        );
        let call = |cache: &Path| {
            turngate(
                &[
                    "call",
                    "--root",
                    root.to_str().unwrap(),
                    "--policy",
                    call_policy.to_str().unwrap(),
                    "--tools",
                    tools.to_str().unwrap(),
                    "--locked",
                    "net_probe",
                    r#"{"requests": []}"#,
                ],
                cache,
            )
        };
        let first = call(&cache);
        let warm = call(&cache);
        let empty = dir.join(format!("call-empty-{sample}"));
        let empty_first = call(&empty);
        if sample >= 2 {
            rows.after_add.push(first);
            rows.warm.push(warm);
            rows.empty_cache.push(empty_first);
        }
        for done in [&tools, &cache, &empty] {
            std::fs::remove_dir_all(done).unwrap();
        }
    }
    rows
}

/// From sending a `tools/call` of `read_file`, one second after `initialize`'s result, to its result.
fn mcp_first_call(root: &Path, cache: &Path) -> Duration {
    let mut child = support::spawn_mcp(root, cache);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
    writeln!(
        stdin,
        "{init}\n{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let await_id = |lines: &mut BufReader<_>, id: u64| loop {
        let mut line = String::new();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "server closed stdout"
        );
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == json!(id) {
            return message;
        }
    };
    await_id(&mut lines, 0);
    std::thread::sleep(Duration::from_secs(1));
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "small.txt"}}});
    let start = Instant::now();
    writeln!(stdin, "{call}").unwrap();
    let answer = await_id(&mut lines, 1);
    let took = start.elapsed();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    drop(stdin);
    child.wait().unwrap();
    took
}

fn mcp_rows(dir: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let root = dir.join("mcp-root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("small.txt"), "hello, world\n").unwrap();
    let warm_cache = dir.join("mcp-warm");
    mcp_first_call(&root, &warm_cache);
    let (mut empty, mut warm) = (Vec::new(), Vec::new());
    for sample in 0..MCP_SAMPLES {
        let cache = dir.join(format!("mcp-empty-{sample}"));
        empty.push(mcp_first_call(&root, &cache));
        warm.push(mcp_first_call(&root, &warm_cache));
        std::fs::remove_dir_all(&cache).unwrap();
    }
    (empty, warm)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let binary = registry_binary("the registry bench").expect("docker-registry is installed");
    let registry = Registry::start(&binary);
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = key_pair(dir.path(), "acme");
    let policy = trusting(dir.path(), &[("acme", &public)], "");

    let install = install_rows(&registry, dir.path(), &key, &policy);
    let (key_verify, bundle_verify) = verify_rows(dir.path());
    let (locked_registry, locked_hand) = locked_rows(dir.path(), &key, &policy);
    let first = first_call_rows(dir.path(), &key, &public, &policy);
    let (mcp_empty, mcp_warm) = mcp_rows(dir.path());

    println!(
        "| case | turngate (median) | turngate (p90) | baseline | baseline (median) | baseline (p90) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    row(
        "`tools add` of a 10 MB component, key-signed, loopback registry, empty cache",
        &install.add,
        "`skopeo copy` of it into an OCI layout",
        &install.skopeo,
    );
    row(
        "`tools add` of it, its compiled form already cached (no compile)",
        &install.add_cached,
        "`skopeo copy` of it into an OCI layout",
        &install.skopeo,
    );
    println!(
        "| cosign key signature verified, in-process | {:.2?} | {:.2?} | target | 5ms | | |",
        median(key_verify.clone()),
        percentile(key_verify, 90)
    );
    println!(
        "| Sigstore bundle verified (cosign 3 keyless, public good), in-process | {:.2?} | {:.2?} | target | 20ms | | |",
        median(bundle_verify.clone()),
        percentile(bundle_verify, 90)
    );
    row(
        "`--locked` toolbox of ten tools installed from a layout, signed",
        &locked_registry,
        "the same ten copied by hand, `tools lock`",
        &locked_hand,
    );
    println!(
        "| added by the registry tools, median | {:.2?} | | target | 1ms | | |",
        median(locked_registry).saturating_sub(median(locked_hand))
    );
    row(
        "first `turngate call` after `tools add`",
        &first.after_add,
        "the next (warm) call",
        &first.warm,
    );
    row(
        "first `turngate call`, nothing compiled at install (empty cache)",
        &first.empty_cache,
        "a warm call",
        &first.warm,
    );
    row(
        "MCP first `tools/call` read_file 1 s after `initialize`, empty cache",
        &mcp_empty,
        "the same, warm cache",
        &mcp_warm,
    );
}
