//! What the registry tests share: a real registry (Debian's `docker-registry`, CNCF distribution 2.8)
//! on 127.0.0.1, keys made by the test, tools published and signed with the real binary, OCI layout
//! directories written by hand for what no honest publisher writes, and running `turngate` itself.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `docker-registry`, or `None` (said loudly) when it is missing; under `TURNGATE_REQUIRE_REGISTRY=1`
/// (`.ci/run`) a missing one fails the test.
pub fn registry_binary(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("docker-registry"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin/docker-registry")])
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("TURNGATE_REQUIRE_REGISTRY").is_none(),
            "{test}: docker-registry is required (TURNGATE_REQUIRE_REGISTRY) but missing: apt-get install docker-registry"
        );
        eprintln!(
            "\n*** SKIPPED {test}: docker-registry (Debian package docker-registry) is not installed ***\n"
        );
    }
    found
}

/// A registry on 127.0.0.1 on a port it chose, storing in a temporary directory.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Its storage.
    pub storage: tempfile::TempDir,
}

impl Registry {
    /// Starts one and waits until it says where it listens.
    pub fn start(binary: &Path) -> Registry {
        let storage = tempfile::tempdir().unwrap();
        let config = storage.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:0\n  secret: turngate-tests\n",
                storage.path().join("data").display()
            ),
        )
        .unwrap();
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("docker-registry starts");
        let stderr = child.stderr.take().unwrap();
        let (send, found) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("listening on ") {
                    let addr = line[at + 13..]
                        .split(['"', ' '])
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = send.send(addr);
                }
            }
        });
        let addr = found
            .recv_timeout(Duration::from_secs(30))
            .expect("docker-registry listens");
        Registry {
            child,
            addr,
            storage,
        }
    }

    /// `oci://127.0.0.1:PORT/REPO:TAG`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        format!("oci://{}/{repository}:{tag}", self.addr)
    }

    /// `oci://127.0.0.1:PORT/REPO@DIGEST`.
    pub fn by_digest(&self, repository: &str, digest: &str) -> String {
        format!("oci://{}/{repository}@{digest}", self.addr)
    }

    /// Where the registry keeps the blob `digest` on disk.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.storage.path().join(format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `turngate ARGS`, with the tests' cache and no registry credentials.
pub fn turngate(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .args(args)
        .env_remove("TURNGATE_REGISTRY_USERNAME")
        .env_remove("TURNGATE_REGISTRY_PASSWORD")
        .env("DOCKER_CONFIG", "/nonexistent-docker-config");
    run(&mut command)
}

/// Runs `command` (a `turngate` command) with the tests' cache, and asserts that a refusal (exit 1)
/// compiled no code: every component a process prepares is recorded (`TURNGATE_TEST_PREPARE_RECORD`).
pub fn run(command: &mut Command) -> Output {
    let record = tempfile::NamedTempFile::new().unwrap();
    let out = command
        .env(
            "TURNGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .env("TURNGATE_TEST_PREPARE_RECORD", record.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if out.status.code() == Some(1) {
        let prepared = std::fs::read_to_string(record.path()).unwrap();
        assert!(
            prepared.is_empty(),
            "a refused command compiled code ({prepared}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// The JSON `turngate` printed, asserting it exited 0.
pub fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "turngate failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// What `turngate` said on stderr, asserting it exited 1 (refused).
pub fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}{}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// A test guest's component (`TURNGATE_TEST_GUEST_<NAME>`).
pub fn guest(name: &str) -> PathBuf {
    let variable = format!("TURNGATE_TEST_GUEST_{}", name.to_uppercase());
    PathBuf::from(
        std::env::var(&variable).unwrap_or_else(|_| panic!("{variable} is set by host/build.rs")),
    )
}

/// A P-256 key pair written as `NAME.key` (PKCS#8 PEM) and `NAME.pub` in `dir`; answers both paths.
pub fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let private = pem::encode(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref()));
    let pair = sigstore_verify::crypto::KeyPair::from_pkcs8_der(pkcs8.as_ref()).unwrap();
    let public = pair.public_key_der().unwrap().to_pem();
    let (key, public_path) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pub")),
    );
    std::fs::write(&key, private).unwrap();
    std::fs::write(&public_path, public).unwrap();
    (key, public_path)
}

/// A policy trusting the keys `(name, public key file)`, with `rest` after it.
pub fn trusting(dir: &Path, keys: &[(&str, &Path)], rest: &str) -> PathBuf {
    let mut text = String::new();
    for (name, file) in keys {
        text.push_str(&format!(
            "[trust.keys.{name}]\nfile = \"{}\"\n",
            file.display()
        ));
    }
    text.push_str(rest);
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// An OCI layout written by hand: `blobs` and one manifest (any JSON, as given) tagged `tag`.
pub fn layout(dir: &Path, blobs: &[&[u8]], manifest: &Value, tag: &str) -> String {
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion": "1.0.0"}"#).unwrap();
    let manifest = serde_json::to_vec(manifest).unwrap();
    for blob in blobs.iter().copied().chain([manifest.as_slice()]) {
        let name = digest(blob);
        std::fs::write(dir.join("blobs/sha256").join(&name[7..]), blob).unwrap();
    }
    let index = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest(&manifest), "size": manifest.len(),
        "annotations": {"org.opencontainers.image.ref.name": tag},
    }]});
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    digest(&manifest)
}

/// A Wasm artifact manifest for `layers` (media type, bytes) with `annotations`.
pub fn wasm_manifest(layers: &[(&str, &[u8])], annotations: Value) -> (Vec<u8>, Value) {
    let config = br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": digest(&config), "size": config.len()},
        "layers": layers.iter().map(|(media, bytes)| json!({"mediaType": media, "digest": digest(bytes), "size": bytes.len()})).collect::<Vec<_>>(),
        "annotations": annotations,
    });
    (config, manifest)
}

/// Every file beneath `dir` (relative paths), sorted: what a refusal must not have changed.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The `test_data` directory of the `sigstore-verify` this workspace builds: public Sigstore test
/// vectors (bundles made on the public-good instance, the sigstore-conformance suite's managed-key
/// bundle, trusted roots), read from the crate's source as Cargo downloaded it, not copied here.
pub fn sigstore_vectors() -> &'static PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        // Not `--offline`: the metadata covers every platform's packages, and a build downloads only
        // this platform's.
        let out = Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
        let manifest = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "sigstore-verify")
            .and_then(|p| p["manifest_path"].as_str())
            .expect("sigstore-verify is a dependency");
        PathBuf::from(manifest).parent().unwrap().join("test_data")
    })
}

/// One file of [`sigstore_vectors`].
pub fn sigstore_vector(name: &str) -> String {
    std::fs::read_to_string(sigstore_vectors().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}
