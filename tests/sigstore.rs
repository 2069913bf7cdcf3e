//! Sigstore bundles verified by `turngate::registry::bundle`, against public test vectors: the bundles
//! and trusted roots that ship in the `sigstore-verify` crate's `test_data` (a cosign 3 keyless blob
//! signature made on the public-good instance, the sigstore-conformance suite's managed-key bundle, a
//! DSSE SLSA attestation, and the public-good trusted root). They are read from the crate's source as
//! Cargo downloaded it (`cargo metadata`), not copied here.
//!
//! A bundle must verify over the exact digest the caller holds (a manifest's), by a signer the policy
//! trusts, under a root whose authorities were valid when it was signed, with its log entry intact.

mod registry_support;

use serde_json::Value;
use sha2::{Digest, Sha256};
use turngate::Policy;
use turngate::digest::Sha256Digest;
use turngate::lockfile::SignedBy;
use turngate::registry::bundle::{self, BundleError};

use registry_support::{sigstore_vector as vector, sigstore_vectors as vectors};

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest the cosign 3 blob bundle signs.
fn blob_digest() -> String {
    sha256_hex(vector("bundles/cosign-v3-blob.txt").as_bytes())
}

/// What signed the cosign 3 blob bundle: a GitHub login through the public-good Fulcio.
const BLOB_ISSUER: &str = "https://github.com/login/oauth";
const BLOB_SUBJECT: &str = "w.vollprecht@gmail.com";

/// The public-good instance's trusted root as sigstore-verify embeds it (the vectors' own copy predates
/// the timestamp authority that stamped the blob bundle).
const PUBLIC_GOOD: &str = sigstore_verify::trust_root::SIGSTORE_PRODUCTION_TRUSTED_ROOT;

/// A policy trusting `trust` (TOML of the `[trust]` table's body) under the trusted root `root`
/// (a path, or the embedded public-good root when `None`).
fn policy(trust: &str, root: Option<&std::path::Path>) -> Policy {
    let root = root.map_or(String::new(), |p| {
        format!("trusted_root = {:?}\n", p.display().to_string())
    });
    Policy::from_toml(&format!("[trust]\n{root}{trust}")).unwrap()
}

fn identity(issuer: &str, subject: &str) -> String {
    format!("[trust.identities.signer]\nissuer = {issuer:?}\nsubject = {subject:?}\n")
}

/// `bundle::verify` of `json` over `digest` for every signer `policy` trusts.
fn verify(json: &str, digest: &str, policy: &Policy) -> Result<SignedBy, BundleError> {
    let trust = policy.trust();
    let signers: Vec<_> = trust.signers_for_any().collect();
    let digest = Sha256Digest::from_hex(digest).expect("a SHA-256 digest, hex");
    bundle::verify(json, &digest, &signers, &trust)
}

#[test]
fn a_keyless_bundle_verifies_for_the_identity_its_certificate_names() {
    let json = vector("bundles/cosign-v3-blob.sigstore.json");
    // Under the embedded public-good root, and under the same root read from a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trusted_root.json");
    std::fs::write(&file, PUBLIC_GOOD).unwrap();
    for root in [None, Some(file)] {
        let policy = policy(&identity(BLOB_ISSUER, "*@gmail.com"), root.as_deref());
        let signer = verify(&json, &blob_digest(), &policy).unwrap();
        assert_eq!(
            signer.to_string(),
            format!("sigstore signer ({BLOB_ISSUER}, {BLOB_SUBJECT})")
        );
    }
}

#[test]
fn a_bundle_over_another_digest_is_refused() {
    let json = vector("bundles/cosign-v3-blob.sigstore.json");
    let policy = policy(&identity(BLOB_ISSUER, "**"), None);
    let replayed = verify(&json, &sha256_hex(b"another manifest"), &policy).unwrap_err();
    assert!(
        replayed.to_string().contains("artifact mismatch"),
        "{replayed}"
    );
}

#[test]
fn an_identity_or_issuer_not_matching_the_rule_is_refused() {
    let json = vector("bundles/cosign-v3-blob.sigstore.json");
    let other_subject = verify(
        &json,
        &blob_digest(),
        &policy(&identity(BLOB_ISSUER, "*@acme.example"), None),
    )
    .unwrap_err();
    assert!(
        other_subject.to_string().contains(&format!(
            "signed by {BLOB_SUBJECT}, which does not match `*@acme.example`"
        )),
        "{other_subject}"
    );
    // The right subject pattern from another issuer (a GitHub workflow's tokens, not a GitHub login).
    let other_issuer = verify(
        &json,
        &blob_digest(),
        &policy(
            &identity("https://token.actions.githubusercontent.com", "**"),
            None,
        ),
    )
    .unwrap_err();
    assert!(
        other_issuer.to_string().contains("issuer mismatch"),
        "{other_issuer}"
    );
}

#[test]
fn a_bundle_under_an_untrusted_root_or_outside_its_authority_s_validity_is_refused() {
    let json = vector("bundles/cosign-v3-blob.sigstore.json");
    let dir = tempfile::tempdir().unwrap();
    // A root of another instance (sigstore's scaffolding test instance): nothing in it vouches.
    let untrusted = verify(
        &json,
        &blob_digest(),
        &policy(
            &identity(BLOB_ISSUER, "**"),
            Some(&vectors().join("trusted_roots/scaffolding.json")),
        ),
    )
    .unwrap_err();
    assert!(
        untrusted
            .to_string()
            .contains("no timestamp authorities configured"),
        "{untrusted}"
    );
    // The public-good root with every authority but its certificate authorities: those of the other
    // instance. The bundle's time and log entry are vouched for; its certificate's chain is not.
    let mut root: Value = serde_json::from_str(PUBLIC_GOOD).unwrap();
    let scaffolding: Value = serde_json::from_str(
        &std::fs::read_to_string(vectors().join("trusted_roots/scaffolding.json")).unwrap(),
    )
    .unwrap();
    root["certificateAuthorities"] = scaffolding["certificateAuthorities"].clone();
    let other_authority = dir.path().join("other-authority.json");
    std::fs::write(&other_authority, root.to_string()).unwrap();
    let unchained = verify(
        &json,
        &blob_digest(),
        &policy(&identity(BLOB_ISSUER, "**"), Some(&other_authority)),
    )
    .unwrap_err();
    assert!(
        unchained
            .to_string()
            .contains("certificate chain is invalid")
            && unchained.to_string().contains("UnknownIssuer"),
        "{unchained}"
    );
    // The public-good root with its current Fulcio authority ending before the signature was made
    // (2025-12-03): the certificate is outside what the root vouches for.
    let mut root: Value = serde_json::from_str(PUBLIC_GOOD).unwrap();
    for authority in root["certificateAuthorities"].as_array_mut().unwrap() {
        authority["validFor"]["end"] = Value::from("2025-01-01T00:00:00.000Z");
    }
    let expired = dir.path().join("expired.json");
    std::fs::write(&expired, root.to_string()).unwrap();
    let outside = verify(
        &json,
        &blob_digest(),
        &policy(&identity(BLOB_ISSUER, "**"), Some(&expired)),
    )
    .unwrap_err();
    assert!(
        outside
            .to_string()
            .contains("no trusted certificate authority is valid at 2025-12-03T18:36:42Z"),
        "{outside}"
    );
}

#[test]
fn a_bundle_whose_log_entry_does_not_match_is_refused() {
    let policy = policy(&identity(BLOB_ISSUER, "**"), None);
    let mut bundle: Value =
        serde_json::from_str(&vector("bundles/cosign-v3-blob.sigstore.json")).unwrap();
    let entry = &mut bundle["verificationMaterial"]["tlogEntries"][0];
    // Another entry's body: the log promised and included a different record.
    let body = entry["canonicalizedBody"].as_str().unwrap().to_owned();
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut record: Value = serde_json::from_slice(&engine.decode(&body).unwrap()).unwrap();
    record["spec"]["data"]["hash"]["value"] = Value::from(sha256_hex(b"another artifact"));
    entry["canonicalizedBody"] = Value::from(engine.encode(record.to_string()));
    let refused = verify(&bundle.to_string(), &blob_digest(), &policy).unwrap_err();
    assert!(
        refused.to_string().contains("invalid inclusion promise"),
        "{refused}"
    );
    // A log time moved back: the signed entry timestamp no longer covers it.
    let mut bundle: Value =
        serde_json::from_str(&vector("bundles/cosign-v3-blob.sigstore.json")).unwrap();
    bundle["verificationMaterial"]["tlogEntries"][0]["integratedTime"] = Value::from("1764780000");
    let backdated = verify(&bundle.to_string(), &blob_digest(), &policy).unwrap_err();
    assert!(
        backdated.to_string().contains("invalid inclusion promise"),
        "{backdated}"
    );
}

#[test]
fn a_bundle_signed_with_a_trusted_key_verifies_and_with_another_key_is_refused() {
    let json = vector("managed-key/bundle.sigstore.json");
    let digest = sha256_hex(vector("managed-key/artifact.txt").as_bytes());
    let key = vectors().join("managed-key/key.pub");
    let trusted = policy(
        &format!(
            "[trust.keys.conformance]\nfile = {:?}\n",
            key.display().to_string()
        ),
        None,
    );
    let signer = verify(&json, &digest, &trusted).unwrap();
    assert!(
        matches!(&signer, SignedBy::Key { name, .. } if name == "conformance"),
        "{signer}"
    );
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.pub");
    std::fs::write(&other, other_public_key()).unwrap();
    let untrusted = policy(
        &format!(
            "[trust.keys.other]\nfile = {:?}\n",
            other.display().to_string()
        ),
        None,
    );
    let refused = verify(&json, &digest, &untrusted).unwrap_err();
    assert!(
        refused.to_string().contains("other: invalid signature"),
        "{refused}"
    );
}

#[test]
fn an_attestation_that_is_not_a_cosign_signature_is_refused() {
    let json = vector("bundles/dsse.sigstore.json");
    let refused = verify(
        &json,
        &sha256_hex(b"anything"),
        &policy(&identity(BLOB_ISSUER, "**"), None),
    )
    .unwrap_err();
    assert_eq!(
        refused,
        BundleError::Predicate("https://slsa.dev/provenance/v0.2".into())
    );
}

#[test]
fn what_is_not_a_bundle_is_refused_with_what_failed() {
    let policy = policy(&identity(BLOB_ISSUER, "**"), None);
    for bad in [
        "",
        "{}",
        "not json",
        r#"{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}"#,
    ] {
        let refused = verify(bad, &blob_digest(), &policy).unwrap_err();
        assert!(
            matches!(refused, BundleError::Format(_)),
            "{bad:?}: {refused}"
        );
    }
}

/// A P-256 public key no one signed these vectors with.
fn other_public_key() -> String {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let pair = sigstore_verify::crypto::KeyPair::from_pkcs8_der(pkcs8.as_ref()).unwrap();
    pair.public_key_der().unwrap().to_pem()
}
