//! The checks the local HTTP servers share (`mcp::http` and `console`): a secret compared as a
//! digest, the bearer token of a request, a `Host` value split into name and port, and random secrets.

use hyper::Request;
use sha2::{Digest, Sha256};

/// A secret held as its SHA-256, so comparing a given value takes the same time however much of it
/// matched.
#[derive(Clone, Copy)]
pub(crate) struct SecretDigest([u8; 32]);

impl SecretDigest {
    /// The digest of `secret`.
    pub(crate) fn of(secret: &str) -> SecretDigest {
        SecretDigest(Sha256::digest(secret.as_bytes()).into())
    }

    /// Whether `given` is the secret.
    pub(crate) fn matches(&self, given: &str) -> bool {
        Sha256::digest(given.as_bytes()).as_slice() == self.0
    }
}

impl std::fmt::Debug for SecretDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretDigest(..)")
    }
}

/// The token of an `Authorization: Bearer <token>` header, trimmed.
pub(crate) fn bearer<B>(request: &Request<B>) -> Option<&str> {
    request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

/// A `Host` header's value as name and port (`[::1]:8080` gives `::1` and `8080`; a value without
/// a port gives `None`).
pub(crate) fn split_host(host: &str) -> (&str, Option<&str>) {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') => {
            (name, Some(port))
        }
        _ => (host, None),
    };
    (name.trim_start_matches('[').trim_end_matches(']'), port)
}

/// `bytes` random bytes from the host's crypto provider, as lowercase hex.
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut buffer)
        .expect("the system's random source works");
    hex::encode(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_split_into_name_and_port() {
        assert_eq!(split_host("127.0.0.1:8080"), ("127.0.0.1", Some("8080")));
        assert_eq!(split_host("[::1]:8080"), ("::1", Some("8080")));
        assert_eq!(split_host("localhost"), ("localhost", None));
        assert_eq!(split_host("::1"), ("::1", None));
    }

    #[test]
    fn secrets_match_only_themselves() {
        let secret = SecretDigest::of("abc");
        assert!(secret.matches("abc"));
        assert!(!secret.matches("abd"));
        assert_ne!(random_hex(16), random_hex(16));
    }
}
