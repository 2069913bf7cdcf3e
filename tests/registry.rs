//! Tools from registries: `turngate tools add | update | remove | publish | sign` against a real
//! registry on loopback (Debian's `docker-registry`), OCI layout directories written by hand, and a fake
//! registry for what an honest one never does (redirect credentials away, stall, send an endless
//! manifest). Every refusal names what failed, and writes nothing to the tools directory, the lock or
//! the policy.

#[path = "common/pipe.rs"]
mod pipe;
mod registry_support;
#[path = "common/terminal.rs"]
#[allow(dead_code)] // the Ctrl-C helpers are for the CLI tests
mod terminal;

use std::path::Path;

use registry_support::*;
use serde_json::{Value, json};

/// The test guest installed in these tests: it imports `wasi:http`, declares no paths.
const TOOL: &str = "net_probe";

/// A registry and a directory with a trusted key pair and a tools directory.
struct Setup {
    registry: Option<Registry>,
    dir: tempfile::TempDir,
    key: std::path::PathBuf,
    public: std::path::PathBuf,
}

impl Setup {
    fn with_registry(test: &str) -> Option<Setup> {
        let registry = Registry::start(&registry_binary(test)?);
        let mut setup = Setup::without_registry();
        setup.registry = Some(registry);
        Some(setup)
    }

    fn without_registry() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tools")).unwrap();
        let (key, public) = key_pair(dir.path(), "acme");
        Setup {
            registry: None,
            dir,
            key,
            public,
        }
    }

    fn registry(&self) -> &Registry {
        self.registry.as_ref().unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn tools(&self) -> String {
        self.path("tools")
    }

    /// A policy trusting the key `acme`, then `rest`.
    fn policy(&self, rest: &str) -> String {
        trusting(self.dir.path(), &[("acme", &self.public)], rest)
            .display()
            .to_string()
    }

    /// Publishes the guest with `grants` under `reference`; answers the manifest digest.
    fn publish(&self, reference: &str, grants: Value) -> String {
        let grants_file = self
            .dir
            .path()
            .join(format!("grants-{}.json", fastrand::u32(..)));
        std::fs::write(&grants_file, grants.to_string()).unwrap();
        let published = ok_json(&turngate(&[
            "tools",
            "publish",
            guest(TOOL).to_str().unwrap(),
            reference,
            "--grants",
            grants_file.to_str().unwrap(),
            "--plain-http",
        ]));
        published["manifest"].as_str().unwrap().to_owned()
    }

    /// Publishes the guest with `grants` to `acme/probe:TAG` of the registry and signs it with the
    /// trusted key; answers the reference and the manifest digest.
    fn publish_signed(&self, tag: &str, grants: Value) -> (String, String) {
        let reference = self.registry().reference("acme/probe", tag);
        let digest = self.publish(&reference, grants);
        self.sign(&self.registry().by_digest("acme/probe", &digest), &self.key);
        (reference, digest)
    }

    fn sign(&self, reference_by_digest: &str, key: &Path) {
        ok_json(&turngate(&[
            "tools",
            "sign",
            "--key",
            key.to_str().unwrap(),
            reference_by_digest,
            "--plain-http",
        ]));
    }

    /// `tools add REF` into the tools directory, plus `extra`.
    fn add(&self, reference: &str, extra: &[&str]) -> std::process::Output {
        let tools = self.tools();
        let mut args = vec!["tools", "add", reference, "--tools", &tools, "--plain-http"];
        args.extend_from_slice(extra);
        turngate(&args)
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tools/turngate.lock")).unwrap_or_default()
    }

    /// `turngate call` of the tool (no requests) under `policy`, locked: its outcome.
    fn call(&self, policy: &str) -> Value {
        let root = self.dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let tools = self.tools();
        let out = turngate(&[
            "call",
            "--root",
            root.to_str().unwrap(),
            "--policy",
            policy,
            "--tools",
            &tools,
            "--locked",
            TOOL,
            r#"{"requests": []}"#,
        ]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| json!({"load_error": String::from_utf8_lossy(&out.stderr)}))
    }
}

fn grants() -> Value {
    json!({"network": {"get": ["https://api.weather.example/**"]}, "env": ["LANG"]})
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn a_tool_signed_by_a_trusted_key_installs_by_tag_and_runs_only_with_its_accepted_grants() {
    let test =
        "a_tool_signed_by_a_trusted_key_installs_by_tag_and_runs_only_with_its_accepted_grants";
    let Some(setup) = Setup::with_registry(test) else {
        return;
    };
    let (reference, digest) = setup.publish_signed("1.0", grants());
    let policy = setup.policy("");

    // Not accepted (no terminal, no --accept-grants): installed, every call denied.
    let installed = ok_json(&setup.add(&reference, &["--policy", &policy]));
    assert_eq!(installed["name"], TOOL);
    assert_eq!(installed["manifest"], digest);
    assert_eq!(installed["grants_accepted"], false);
    assert!(
        installed["signer"]
            .as_str()
            .unwrap()
            .starts_with("key acme (SHA-256 of its key: ")
    );
    let denied = setup.call(&policy);
    assert_eq!(denied["error"]["kind"], "policy", "{denied}");
    assert!(
        std::fs::read_to_string(&policy)
            .unwrap()
            .contains("approval = \"deny\"")
    );

    // Accepted: the grants become its table, and it runs, locked.
    let accepted = ok_json(&setup.add(&reference, &["--policy", &policy, "--accept-grants"]));
    assert_eq!(accepted["grants_accepted"], true);
    let policy_text = std::fs::read_to_string(&policy).unwrap();
    assert!(
        policy_text.contains("[tools.net_probe.network]"),
        "{policy_text}"
    );
    assert!(
        !policy_text.contains("approval = \"deny\""),
        "{policy_text}"
    );
    let ran = setup.call(&policy);
    assert_eq!(ran["status"], "ok", "{ran}");
    let lock = setup.lock();
    for field in [
        format!("source = \"{reference}\""),
        format!("manifest = \"{digest}\""),
        "signer = \"key acme".to_owned(),
        "grants = '".to_owned(),
    ] {
        assert!(lock.contains(&field), "{field} in {lock}");
    }
    let listed = turngate(&["tools", "list", "--tools", &setup.tools()]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains(&reference) && listed.contains("signed by key acme"),
        "{listed}"
    );
    // A question about one of its calls shows where it came from and who signed it, as the lock says.
    let trusted = turngate::Policy::from_toml(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    let builder = turngate::Toolbox::builder()
        .without_bundled()
        .tools_dir(setup.tools())
        .locked(true)
        .trust(trusted.trust());
    let toolbox = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(builder.build())
        .unwrap();
    let provenance = toolbox.get(TOOL).unwrap().provenance();
    assert_eq!(provenance.source.as_deref(), Some(reference.as_str()));
    assert!(
        provenance
            .signer
            .as_deref()
            .is_some_and(|signer| signer.starts_with("key acme (SHA-256 of its key: ")),
        "{provenance:?}"
    );
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn unsigned_or_untrusted_tools_are_refused_and_nothing_is_written() {
    let Some(setup) =
        Setup::with_registry("unsigned_or_untrusted_tools_are_refused_and_nothing_is_written")
    else {
        return;
    };
    let reference = setup.registry().reference("acme/probe", "1.0");
    let digest = setup.publish(&reference, grants());
    let policy = setup.policy("");
    let before = (
        listing(Path::new(&setup.tools())),
        std::fs::read_to_string(&policy).unwrap(),
    );
    let unchanged = |setup: &Setup| {
        assert_eq!(
            (
                listing(Path::new(&setup.tools())),
                std::fs::read_to_string(&policy).unwrap()
            ),
            before
        );
    };

    let unsigned = refused(&setup.add(&reference, &["--policy", &policy, "--accept-grants"]));
    assert!(
        unsigned.contains("carries no signature") && unsigned.contains("--allow-unsigned"),
        "{unsigned}"
    );
    unchanged(&setup);

    // Signed by a key nobody trusts.
    let (stranger, _) = key_pair(setup.dir.path(), "stranger");
    setup.sign(
        &setup.registry().by_digest("acme/probe", &digest),
        &stranger,
    );
    let untrusted = refused(&setup.add(&reference, &["--policy", &policy]));
    assert!(
        untrusted.contains("verifies with no key the policy trusts"),
        "{untrusted}"
    );
    unchanged(&setup);

    // Allowed unsigned: installed, and the lock says so.
    let installed = ok_json(&setup.add(&reference, &["--policy", &policy, "--allow-unsigned"]));
    assert_eq!(installed["unsigned"], true);
    assert_eq!(installed["signer"], Value::Null);
    assert!(setup.lock().contains("unsigned = true"), "{}", setup.lock());
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn a_signature_replayed_from_another_manifest_is_refused() {
    let Some(setup) = Setup::with_registry("a_signature_replayed_from_another_manifest_is_refused")
    else {
        return;
    };
    let signed = setup.publish(
        &setup.registry().reference("acme/probe", "signed"),
        grants(),
    );
    setup.sign(
        &setup.registry().by_digest("acme/probe", &signed),
        &setup.key,
    );
    let other = setup.publish(
        &setup.registry().reference("acme/probe", "other"),
        json!({"env": ["HOME"]}),
    );
    // The signed manifest's signatures, stored under the other manifest's signature tag.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use turngate::registry::artifact::TagOrDigest;
        use turngate::registry::distribution::{Registry as Client, RegistryOptions};
        let reference: oci_client::Reference = format!("{}/acme/probe:x", setup.registry().addr)
            .parse()
            .unwrap();
        let options = RegistryOptions {
            plain_http: true,
            ..RegistryOptions::default()
        };
        let client = Client::connect(&reference, &options).unwrap();
        let signature_tag = |digest: &str| {
            TagOrDigest::Tag(turngate::registry::cosign::signature_tag(
                &digest.parse().unwrap(),
            ))
        };
        let (manifest, _) = client
            .manifest(&signature_tag(&signed), 1 << 20)
            .await
            .unwrap()
            .unwrap();
        client
            .push(&[], &manifest, &signature_tag(&other))
            .await
            .unwrap();
    });
    let policy = setup.policy("");
    let replayed = refused(&setup.add(
        &setup.registry().reference("acme/probe", "other"),
        &["--policy", &policy],
    ));
    assert!(
        replayed.contains(&format!("signs manifest {signed}, not {other}")),
        "{replayed}"
    );
    assert!(listing(Path::new(&setup.tools())).is_empty());
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn a_moved_tag_is_shown_and_followed_only_on_yes() {
    let Some(setup) = Setup::with_registry("a_moved_tag_is_shown_and_followed_only_on_yes") else {
        return;
    };
    let (reference, first) = setup.publish_signed("stable", grants());
    let policy = setup.policy("");
    ok_json(&setup.add(&reference, &["--policy", &policy, "--accept-grants"]));
    let lock_before = setup.lock();
    // The tag moves to a version that asks for more.
    let moved = setup.publish(
        &reference,
        json!({"network": {"get": ["https://api.weather.example/**", "https://tracker.example/**"]}, "env": ["LANG"]}),
    );
    setup.sign(
        &setup.registry().by_digest("acme/probe", &moved),
        &setup.key,
    );
    assert_ne!(first, moved);
    // The pinned version still loads, locked.
    assert_eq!(setup.call(&policy)["status"], "ok");

    let tools = setup.tools();
    let asked = turngate(&[
        "tools",
        "update",
        "--tools",
        &tools,
        "--policy",
        &policy,
        "--plain-http",
    ]);
    let report = ok_json(&asked);
    assert_eq!(
        report["tools"][0]["status"], "moved, not followed",
        "{report}"
    );
    let shown = String::from_utf8_lossy(&asked.stderr);
    assert!(shown.contains(&format!("{first} -> {moved}")), "{shown}");
    assert!(
        shown.contains("+ network read https://tracker.example/**"),
        "{shown}"
    );
    assert_eq!(setup.lock(), lock_before, "the lock changed without a yes");

    let followed = ok_json(&turngate(&[
        "tools",
        "update",
        "--tools",
        &tools,
        "--policy",
        &policy,
        "--plain-http",
        "--yes",
    ]));
    assert_eq!(followed["tools"][0]["status"], "updated", "{followed}");
    assert_eq!(
        followed["tools"][0]["grants_accepted"], false,
        "more grants need their own yes"
    );
    assert!(setup.lock().contains(&moved));
    assert!(
        !std::fs::read_to_string(&policy)
            .unwrap()
            .contains("tracker.example")
    );
    assert_eq!(setup.call(&policy)["status"], "ok");
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn bytes_not_matching_the_layer_digest_are_refused() {
    let Some(setup) = Setup::with_registry("bytes_not_matching_the_layer_digest_are_refused")
    else {
        return;
    };
    let policy = setup.policy("");
    // The layer's bytes, changed in the registry's storage (same length).
    let (reference, _) = setup.publish_signed("1.0", grants());
    let layer = digest_of_file(&guest(TOOL));
    let stored = setup.registry().blob_file(&layer);
    let mut bytes = std::fs::read(&stored).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&stored, &bytes).unwrap();
    let tampered = refused(&setup.add(&reference, &["--policy", &policy]));
    assert!(
        tampered.contains(&format!("not its descriptor's {layer}")),
        "{tampered}"
    );
    assert!(
        listing(Path::new(&setup.tools())).is_empty(),
        "{:?}",
        listing(Path::new(&setup.tools()))
    );
}

fn digest_of_file(path: &Path) -> String {
    digest(&std::fs::read(path).unwrap())
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs docker-registry (the Debian package docker-registry): Linux only"
)]
fn a_locked_load_refuses_a_tool_whose_kept_signature_or_manifest_was_changed() {
    let Some(setup) = Setup::with_registry(
        "a_locked_load_refuses_a_tool_whose_kept_signature_or_manifest_was_changed",
    ) else {
        return;
    };
    let (reference, _) = setup.publish_signed("1.0", grants());
    let policy = setup.policy("");
    let installed = ok_json(&setup.add(&reference, &["--policy", &policy, "--accept-grants"]));
    assert_eq!(setup.call(&policy)["status"], "ok");
    let provenance = setup.dir.path().join("tools").join(format!(
        "{}.provenance.json",
        installed["file"].as_str().unwrap()
    ));
    let kept = std::fs::read_to_string(&provenance).unwrap();
    let mut changed: Value = serde_json::from_str(&kept).unwrap();
    // Another key's signature over the same payload.
    let (stranger, stranger_public) = key_pair(setup.dir.path(), "stranger");
    let payload = changed["signature"]["payload"].as_str().unwrap().to_owned();
    let key = turngate::registry::cosign::private_key(&std::fs::read_to_string(&stranger).unwrap())
        .unwrap();
    changed["signature"]["signature"] =
        json!(turngate::registry::cosign::sign(payload.as_bytes(), &key).unwrap());
    changed["signature"]["key"] = json!(std::fs::read_to_string(&stranger_public).unwrap());
    std::fs::write(&provenance, changed.to_string()).unwrap();
    let refused_load = setup.call(&policy);
    assert!(
        refused_load["load_error"]
            .as_str()
            .is_some_and(|e| e.contains("is not the signer the lock records")),
        "{refused_load}"
    );
    // The kept manifest changed (one annotation more): not the manifest the lock records.
    std::fs::write(&provenance, &kept).unwrap();
    assert_eq!(setup.call(&policy)["status"], "ok");
    let kept_json: Value = serde_json::from_str(&kept).unwrap();
    let manifest_text = kept_json["manifest"].as_str().unwrap();
    let mut manifest: Value = serde_json::from_str(manifest_text).unwrap();
    manifest["annotations"]["org.example.note"] = json!("changed after install");
    let other_manifest = manifest.to_string();
    let mut with_other = kept_json.clone();
    with_other["manifest"] = json!(other_manifest);
    std::fs::write(&provenance, with_other.to_string()).unwrap();
    let changed_manifest = setup.call(&policy);
    assert!(
        changed_manifest["load_error"]
            .as_str()
            .is_some_and(|e| e.contains("its kept manifest has digest")),
        "{changed_manifest}"
    );
    // And the lock changed to name it too: the kept signature signs the manifest installed.
    let lock_path = setup.dir.path().join("tools/turngate.lock");
    let lock = setup.lock();
    let (installed_digest, other_digest) = (
        digest(manifest_text.as_bytes()),
        digest(other_manifest.as_bytes()),
    );
    assert!(lock.contains(&installed_digest), "{lock}");
    std::fs::write(&lock_path, lock.replace(&installed_digest, &other_digest)).unwrap();
    let other_signed = setup.call(&policy);
    assert!(
        other_signed["load_error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!(
                "signs manifest {installed_digest}, not {other_digest}"
            ))),
        "{other_signed}"
    );
    std::fs::write(&lock_path, &lock).unwrap();
    // The key no longer trusted by the policy.
    std::fs::write(&provenance, &kept).unwrap();
    assert_eq!(setup.call(&policy)["status"], "ok");
    let (_, other_public) = key_pair(setup.dir.path(), "other");
    let text = std::fs::read_to_string(&policy).unwrap().replace(
        &setup.public.display().to_string(),
        &other_public.display().to_string(),
    );
    std::fs::write(&policy, text).unwrap();
    let untrusted = setup.call(&policy);
    assert!(
        untrusted["load_error"]
            .as_str()
            .is_some_and(|e| e.contains("no longer a key the policy trusts")),
        "{untrusted}"
    );
}

/// A layout holding one hand-written manifest, in a fresh directory; answers the setup and its source.
fn hand_written(layers: &[(&str, &[u8])], annotations: Value) -> (Setup, String) {
    let setup = Setup::without_registry();
    let (config, manifest) = wasm_manifest(layers, annotations);
    let mut blobs: Vec<&[u8]> = layers.iter().map(|(_, b)| *b).collect();
    blobs.push(&config);
    let dir = setup.dir.path().join("layout");
    layout(&dir, &blobs, &manifest, "1.0");
    let source = format!("oci:{}:1.0", dir.display());
    (setup, source)
}

/// Runs `turngate ARGS` with the reader of its stdout gone before the first line: it must exit 0,
/// without a panic or a word about the pipe.
fn closed_stdout(args: &[&str]) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .args(args)
        .env("DOCKER_CONFIG", "/nonexistent-docker-config");
    pipe::ends_quietly(&mut command, 0).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// As `turngate tools add ... | true`: the reader of its stdout is gone before the first line. `tools
/// add` and `tools remove` still do what they were asked and exit 0, without a panic or a word about
/// the pipe.
#[test]
fn tools_add_and_remove_end_quietly_with_their_own_exit_status_when_their_reader_is_gone() {
    let component = std::fs::read(guest(TOOL)).unwrap();
    let (setup, source) = hand_written(&[("application/wasm", &component)], json!({}));
    let tools = setup.tools();
    closed_stdout(&[
        "tools",
        "add",
        &source,
        "--tools",
        &tools,
        "--allow-unsigned",
    ]);
    assert_eq!(
        listing(Path::new(&tools)).len(),
        3,
        "{:?}",
        listing(Path::new(&tools))
    );
    closed_stdout(&["tools", "remove", TOOL, "--tools", &tools]);
    assert_eq!(listing(Path::new(&tools)), ["turngate.lock"]);
}

/// As `turngate tools publish ... | true`, `tools sign ... | true` and `tools update ... | true`, into
/// and from a layout directory: each still does what it was asked and exits 0, without a panic or a
/// word about the pipe.
#[test]
fn tools_publish_sign_and_update_end_quietly_when_their_reader_is_gone() {
    let setup = Setup::without_registry();
    let layout = setup.dir.path().join("layout");
    let tagged = |index: &Value, tag: &str| {
        index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
            .map(|m| m["digest"].as_str().unwrap().to_owned())
    };
    let index = || -> Value {
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap()
    };
    let source = format!("oci:{}:1.0", layout.display());
    closed_stdout(&["tools", "publish", guest(TOOL).to_str().unwrap(), &source]);
    let digest = tagged(&index(), "1.0").expect("published under its tag");
    let key = setup.key.display().to_string();
    let by_digest = format!("oci:{}@{digest}", layout.display());
    closed_stdout(&["tools", "sign", "--key", &key, &by_digest]);
    let signature_tag = format!("{}.sig", digest.replacen(':', "-", 1));
    assert!(tagged(&index(), &signature_tag).is_some(), "{}", index());
    let policy = setup.policy("");
    ok_json(&setup.add(&source, &["--policy", &policy, "--accept-grants"]));
    let tools = setup.tools();
    closed_stdout(&["tools", "update", "--tools", &tools, "--policy", &policy]);
    assert!(setup.lock().contains(&digest), "{}", setup.lock());
}

#[test]
fn what_is_not_one_component_or_asks_for_invalid_grants_is_refused() {
    let component = std::fs::read(guest(TOOL)).unwrap();
    let core_module = b"\0asm\x01\0\0\0".as_slice();
    // (what, layers as media type and bytes, annotations, what the refusal says)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a [u8])>, Value, &'a str);
    let cases: Vec<Case> = vec![
        ("no layer", vec![], json!({}), "0 `application/wasm` layers"),
        (
            "two layers",
            vec![
                ("application/wasm", &component),
                ("application/wasm", core_module),
            ],
            json!({}),
            "2 `application/wasm` layers",
        ),
        (
            "a core module",
            vec![("application/wasm", core_module)],
            json!({}),
            "a core WebAssembly module, not a WebAssembly component",
        ),
        (
            "not wasm",
            vec![("application/wasm", b"hello, world".as_slice())],
            json!({}),
            "not WebAssembly at all",
        ),
        (
            "a grant outside the root",
            vec![("application/wasm", &component)],
            json!({"dev.turngate.grants": r#"{"paths": {"read": ["/etc/**"]}}"#}),
            "is not relative to the root",
        ),
        (
            "an unknown grant",
            vec![("application/wasm", &component)],
            json!({"dev.turngate.grants": r#"{"root": true}"#}),
            "unknown field `root`",
        ),
        (
            "too many grants",
            vec![("application/wasm", &component)],
            json!({"dev.turngate.grants": serde_json::to_string(&json!({"env": (0..65).map(|i| format!("V{i}")).collect::<Vec<_>>()})).unwrap()}),
            "more than the 64 allowed",
        ),
    ];
    for (what, layers, annotations, expected) in cases {
        let (setup, source) = hand_written(&layers, annotations);
        let error = refused(&setup.add(&source, &["--allow-unsigned"]));
        assert!(error.contains(expected), "{what}: {error}");
        assert!(listing(Path::new(&setup.tools())).is_empty(), "{what}");
    }
}

#[test]
fn an_oversized_manifest_or_layer_is_refused_before_it_is_read() {
    // A layer whose descriptor says it is larger than allowed: refused from the manifest alone.
    let setup = Setup::without_registry();
    let config = br#"{}"#.to_vec();
    let manifest = json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": digest(&config), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": digest(b"x"), "size": 300u64 << 20}],
    });
    let dir = setup.dir.path().join("layout");
    layout(&dir, &[&config], &manifest, "1.0");
    let error = refused(&setup.add(&format!("oci:{}:1.0", dir.display()), &["--allow-unsigned"]));
    assert!(error.contains("more than the 268435456 allowed"), "{error}");
    // A manifest larger than a registry keeps (4 MiB).
    let (setup, source) = hand_written(
        &[("application/wasm", &std::fs::read(guest(TOOL)).unwrap())],
        json!({"padding": "x".repeat(5 << 20)}),
    );
    let error = refused(&setup.add(&source, &["--allow-unsigned"]));
    assert!(
        error.contains("larger than the 4194304 bytes allowed"),
        "{error}"
    );
    assert!(listing(Path::new(&setup.tools())).is_empty());
}

/// On a terminal, `tools add` asks before it grants what the tool asks for: a no installs it with no
/// grant (`approval = "deny"`), a yes writes the grants into the policy.
#[test]
fn grants_are_written_on_a_yes_typed_at_the_terminal_and_not_on_a_no() {
    let setup = Setup::without_registry();
    let source = format!("oci:{}:1.0", setup.dir.path().join("layout").display());
    setup.publish(&source, grants());
    let policy = setup.policy("");
    let add_answering = |answer: &str| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"));
        command
            .args([
                "tools",
                "add",
                &source,
                "--tools",
                &setup.tools(),
                "--policy",
                &policy,
            ])
            .arg("--allow-unsigned")
            .env(
                "TURNGATE_CACHE_DIR",
                std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
            );
        let mut terminal = terminal::OnTerminal::spawn(command);
        terminal.wait_for("grant these to `net_probe`? [y/N]");
        assert!(
            terminal.seen.contains("https://api.weather.example/**"),
            "{}",
            terminal.seen
        );
        terminal.type_line(answer);
        let (code, stdout) = terminal.finish();
        assert_eq!(code, Some(0), "{stdout}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let refused = add_answering("n");
    assert_eq!(refused["grants_accepted"], false);
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("approval = \"deny\""), "{text}");
    assert!(!text.contains("[tools.net_probe.network]"), "{text}");
    let accepted = add_answering("y");
    assert_eq!(accepted["grants_accepted"], true);
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("[tools.net_probe.network]"), "{text}");
    assert!(!text.contains("approval = \"deny\""), "{text}");
}

#[test]
fn a_layout_with_a_symlink_leading_out_of_it_is_refused() {
    let component = std::fs::read(guest(TOOL)).unwrap();
    let (setup, source) = hand_written(&[("application/wasm", &component)], json!({}));
    let blob = setup
        .dir
        .path()
        .join("layout/blobs/sha256")
        .join(&digest(&component)[7..]);
    let outside = setup.dir.path().join("outside.wasm");
    // The test's own layout, outside any root.
    #[allow(clippy::disallowed_methods)]
    std::fs::rename(&blob, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &blob).unwrap();
    let error = refused(&setup.add(&source, &["--allow-unsigned"]));
    assert!(error.contains(&digest(&component)[7..]), "{error}");
    assert!(listing(Path::new(&setup.tools())).is_empty());
}

#[test]
fn a_sigstore_bundle_beside_a_layout_is_found_and_held_to_the_manifest_digest() {
    // A real bundle (cosign 3, public-good instance) over another artifact, attached to this tool's
    // manifest as an OCI 1.1 referrer in the layout: found, verified against the manifest's digest,
    // refused for not signing it.
    let component = std::fs::read(guest(TOOL)).unwrap();
    let (setup, source) = hand_written(&[("application/wasm", &component)], json!({}));
    let layout_dir = setup.dir.path().join("layout");
    let index_file = layout_dir.join("index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&index_file).unwrap()).unwrap();
    let subject = index["manifests"][0].clone();
    let bundle = sigstore_vector("bundles/cosign-v3-blob.sigstore.json").into_bytes();
    let empty = b"{}".to_vec();
    let referrer = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(&empty), "size": 2},
        "layers": [{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "digest": digest(&bundle), "size": bundle.len()}],
        "subject": {"mediaType": subject["mediaType"], "digest": subject["digest"], "size": subject["size"]},
    }))
    .unwrap();
    for blob in [&bundle, &empty, &referrer] {
        std::fs::write(
            layout_dir.join("blobs/sha256").join(&digest(blob)[7..]),
            blob,
        )
        .unwrap();
    }
    index["manifests"].as_array_mut().unwrap().push(json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(&referrer), "size": referrer.len(),
    }));
    std::fs::write(&index_file, index.to_string()).unwrap();
    let policy = trusting(
        setup.dir.path(),
        &[],
        "[trust.identities.upstream]\nissuer = \"https://github.com/login/oauth\"\nsubject = \"**\"\n",
    );
    let error = refused(&setup.add(&source, &["--policy", policy.to_str().unwrap()]));
    assert!(error.contains("upstream: artifact mismatch"), "{error}");
    assert!(listing(Path::new(&setup.tools())).is_empty());
}

#[test]
fn a_layout_signed_with_a_trusted_key_installs_and_is_listed_over_mcp_with_its_origin() {
    let setup = Setup::without_registry();
    let source = format!("oci:{}:1.0", setup.dir.path().join("layout").display());
    let digest = setup.publish(&source, grants());
    setup.sign(
        &format!("oci:{}@{digest}", setup.dir.path().join("layout").display()),
        &setup.key,
    );
    let policy = setup.policy("");
    let installed = ok_json(&setup.add(&source, &["--policy", &policy, "--accept-grants"]));
    assert_eq!(installed["manifest"], digest);
    // `tools/list` over MCP says where it came from.
    let root = setup.dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args([
            "mcp",
            "--root",
            root.to_str().unwrap(),
            "--policy",
            &policy,
            "--tools",
            &setup.tools(),
            "--locked",
        ])
        .env(
            "TURNGATE_CACHE_DIR",
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = server.stdin.as_mut().unwrap();
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
    }
    let stdout = server.stdout.take().unwrap();
    let listed = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap())
        .find(|m| m["id"] == 2)
        .unwrap();
    drop(server.stdin.take());
    let _ = server.wait();
    let tool = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == TOOL)
        .cloned()
        .unwrap();
    assert_eq!(tool["_meta"]["dev.turngate/manifest"], digest, "{tool}");
    assert_eq!(tool["_meta"]["dev.turngate/source"], source);
    assert!(
        tool["_meta"]["dev.turngate/signer"]
            .as_str()
            .unwrap()
            .starts_with("key acme")
    );
    let bundled = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap();
    assert!(bundled.get("_meta").is_none(), "{bundled}");
    let removed = ok_json(&turngate(&[
        "tools",
        "remove",
        TOOL,
        "--tools",
        &setup.tools(),
    ]));
    assert_eq!(removed["removed"], true);
    assert_eq!(listing(Path::new(&setup.tools())), ["turngate.lock"]);
}

/// What a fake registry answers one request with.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: FakeBody,
}

enum FakeBody {
    Bytes(Vec<u8>),
    /// Sends the head, then nothing.
    Stall,
    /// Sends forever.
    Endless,
}

impl Reply {
    fn ok(body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: FakeBody::Bytes(body),
        }
    }
    fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: FakeBody::Bytes(Vec::new()),
        }
    }
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A server on `ip` that answers every request with `answer(path)` and records each path with the
/// `Authorization` it carried.
fn fake_server(ip: &str, answer: impl Fn(&str) -> Reply + Send + Sync + 'static) -> (String, Seen) {
    use http_body_util::BodyExt;
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Seen = Default::default();
    let log = seen.clone();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (log, answer) = (log.clone(), answer.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let path = request.uri().path().to_owned();
                            let authorization = request
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap_or_default().to_owned());
                            log.lock().unwrap().push((path.clone(), authorization));
                            let reply = answer(&path);
                            async move {
                                let mut response = hyper::Response::builder().status(reply.status);
                                for (name, value) in reply.headers {
                                    response = response.header(name, value);
                                }
                                let body = match reply.body {
                                    FakeBody::Bytes(bytes) => {
                                        http_body_util::Full::new(bytes::Bytes::from(bytes))
                                            .map_err(|never| match never {})
                                            .boxed()
                                    }
                                    FakeBody::Stall => http_body_util::StreamBody::new(
                                        futures_util::stream::pending::<
                                            Result<
                                                hyper::body::Frame<bytes::Bytes>,
                                                std::convert::Infallible,
                                            >,
                                        >(),
                                    )
                                    .boxed(),
                                    FakeBody::Endless => http_body_util::StreamBody::new(
                                        futures_util::stream::repeat_with(|| {
                                            Ok::<_, std::convert::Infallible>(
                                                hyper::body::Frame::data(bytes::Bytes::from(
                                                    vec![b' '; 65536],
                                                )),
                                            )
                                        }),
                                    )
                                    .boxed(),
                                };
                                Ok::<_, std::convert::Infallible>(response.body(body).unwrap())
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    (addr, seen)
}

/// A fake registry of one repository, `acme/tool`, whose tag `1.0` is the guest; `blob` answers the
/// layer's request.
fn fake_registry(
    manifest_reply: impl Fn(&[u8]) -> Reply + Send + Sync + 'static,
    blob: impl Fn() -> Reply + Send + Sync + 'static,
) -> (String, Seen, String) {
    let component = std::fs::read(guest(TOOL)).unwrap();
    let (config, manifest) = wasm_manifest(&[("application/wasm", &component)], json!({}));
    let manifest = serde_json::to_vec(&manifest).unwrap();
    let layer = digest(&component);
    let manifest_digest = digest(&manifest);
    let manifest_digest_answered = manifest_digest.clone();
    let (addr, seen) = fake_server("127.0.0.1", move |path| {
        if path == "/v2/" {
            return Reply {
                status: 401,
                headers: vec![("www-authenticate", "Basic realm=\"fake\"".into())],
                body: FakeBody::Bytes(Vec::new()),
            };
        }
        if path == "/v2/acme/tool/manifests/1.0"
            || path == format!("/v2/acme/tool/manifests/{manifest_digest}")
        {
            return manifest_reply(&manifest);
        }
        if path == format!("/v2/acme/tool/blobs/{layer}") {
            return blob();
        }
        if path == format!("/v2/acme/tool/blobs/{}", digest(&config)) {
            return Reply::ok(config.clone());
        }
        Reply::status(404)
    });
    (addr, seen, manifest_digest_answered)
}

/// What `tools add` from the fake registry at `addr` (its `acme/tool`, by `tag_or_digest`) said when
/// it refused, with `extra` arguments.
fn refused_from(setup: &Setup, addr: &str, tag_or_digest: &str, extra: &[&str]) -> String {
    let separator = if tag_or_digest.starts_with("sha256:") {
        '@'
    } else {
        ':'
    };
    refused(&add_from(
        setup,
        &format!("oci://{addr}/acme/tool{separator}{tag_or_digest}"),
        extra,
    ))
}

fn add_from(setup: &Setup, reference: &str, extra: &[&str]) -> std::process::Output {
    let tools = setup.tools();
    let mut args = vec![
        "tools",
        "add",
        reference,
        "--tools",
        &tools,
        "--plain-http",
        "--allow-unsigned",
    ];
    args.extend_from_slice(extra);
    run(std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(&args)
        .env("TURNGATE_REGISTRY_USERNAME", "alice")
        .env("TURNGATE_REGISTRY_PASSWORD", "s3cret-registry-password"))
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "needs a second loopback address, 127.0.0.2 (Linux routes all of 127.0.0.0/8 to the \
              loopback interface; macOS has only 127.0.0.1 unless an alias is added): Linux only"
)]
fn a_blob_redirected_to_another_host_is_fetched_without_the_registry_credentials() {
    let setup = Setup::without_registry();
    let component = std::fs::read(guest(TOOL)).unwrap();
    let component_bytes = component.clone();
    let (storage, storage_seen) = fake_server("127.0.0.2", move |_| Reply::ok(component.clone()));
    let (addr, seen, _) = fake_registry(
        |manifest| Reply::ok(manifest.to_vec()),
        move || Reply {
            status: 307,
            headers: vec![(
                "location",
                format!("http://{storage}/signed/blob?token=presigned"),
            )],
            body: FakeBody::Bytes(Vec::new()),
        },
    );
    ok_json(&add_from(
        &setup,
        &format!("oci://{addr}/acme/tool:1.0"),
        &[],
    ));
    // The registry got the credentials with the very request it redirected (the layer's blob); the
    // storage host got none.
    let blob_path = format!("/v2/acme/tool/blobs/{}", digest(&component_bytes));
    let seen = seen.lock().unwrap().clone();
    let blob_requests: Vec<_> = seen.iter().filter(|(path, _)| *path == blob_path).collect();
    assert!(!blob_requests.is_empty(), "{seen:?}");
    assert!(
        blob_requests
            .iter()
            .all(|(_, auth)| auth.as_deref().is_some_and(|a| a.starts_with("Basic "))),
        "a redirected request went without the credentials: {seen:?}"
    );
    let storage_seen = storage_seen.lock().unwrap().clone();
    assert_eq!(storage_seen.len(), 1, "{storage_seen:?}");
    assert_eq!(
        storage_seen[0].1, None,
        "credentials went to another host: {storage_seen:?}"
    );
}

#[test]
fn a_registry_that_stalls_or_sends_without_end_or_lies_about_a_digest_is_refused() {
    let setup = Setup::without_registry();
    let component = std::fs::read(guest(TOOL)).unwrap();
    // A blob that never comes: cut at the stall limit.
    let (addr, _, _) = fake_registry(
        |manifest| Reply::ok(manifest.to_vec()),
        || Reply {
            status: 200,
            headers: Vec::new(),
            body: FakeBody::Stall,
        },
    );
    let stalled = refused_from(&setup, &addr, "1.0", &["--stall-ms", "300"]);
    assert!(
        stalled.contains("sent nothing for longer than the stall limit"),
        "{stalled}"
    );
    // A manifest without end: refused at its bound, never read whole.
    let (addr, _, _) = fake_registry(
        |_| Reply {
            status: 200,
            headers: Vec::new(),
            body: FakeBody::Endless,
        },
        || Reply::status(404),
    );
    let endless = refused_from(&setup, &addr, "1.0", &[]);
    assert!(
        endless.contains("larger than the 4194304 bytes allowed"),
        "{endless}"
    );
    // A manifest whose registry digest header is not its bytes'.
    let (addr, _, _) = fake_registry(
        |manifest| Reply {
            status: 200,
            headers: vec![("docker-content-digest", digest(b"something else"))],
            body: FakeBody::Bytes(manifest.to_vec()),
        },
        move || Reply::ok(component.clone()),
    );
    let lying = refused_from(&setup, &addr, "1.0", &[]);
    assert!(
        lying.contains("the manifest received has digest"),
        "{lying}"
    );
    // A manifest asked by digest that comes back as other bytes.
    let (addr, _, asked) = fake_registry(
        |manifest| Reply::ok([manifest, b" "].concat()),
        || Reply::status(404),
    );
    let other = refused_from(&setup, &addr, &asked, &[]);
    assert!(other.contains(&format!("not {asked}")), "{other}");
    assert!(listing(Path::new(&setup.tools())).is_empty());
}
