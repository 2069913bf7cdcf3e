//! A SHA-256 content digest as OCI writes it (`sha256:` and 64 lower-case hex digits): the one type
//! every manifest, blob and signature of a registry is named and checked by, and the lock records a
//! manifest by. OCI allows other algorithms on the wire (a descriptor keeps its digest as received);
//! turngate fetches and checks by SHA-256 only, so anything else is refused where it would be used.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// The prefix of a SHA-256 digest.
const PREFIX: &str = "sha256:";

/// A SHA-256 digest of some bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

/// Text that is not `sha256:` and 64 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a sha256 digest (`sha256:` and 64 lower-case hex digits)")]
pub struct DigestError(pub String);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256Digest {
        Sha256Digest(Sha256::digest(bytes).into())
    }

    /// The digest `hasher` has computed.
    pub fn finish(hasher: Sha256) -> Sha256Digest {
        Sha256Digest(hasher.finalize().into())
    }

    /// Parses 64 lower-case hex digits (the digest without its `sha256:`).
    pub fn from_hex(hex: &str) -> Result<Sha256Digest, DigestError> {
        let lower = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let mut bytes = [0; 32];
        match lower && hex::decode_to_slice(hex, &mut bytes).is_ok() {
            true => Ok(Sha256Digest(bytes)),
            false => Err(DigestError(hex.to_owned())),
        }
    }

    /// The 64 lower-case hex digits, without `sha256:` (how blob paths and the lock name it).
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The tag cosign and the referrers fallback name it by: `sha256-<hex>`.
    pub fn dashed(&self) -> String {
        format!("sha256-{}", self.hex())
    }
}

impl FromStr for Sha256Digest {
    type Err = DigestError;

    fn from_str(text: &str) -> Result<Sha256Digest, DigestError> {
        text.strip_prefix(PREFIX)
            .and_then(|hex| Sha256Digest::from_hex(hex).ok())
            .ok_or_else(|| DigestError(text.to_owned()))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_sha256_and_64_lower_case_hex_digits() {
        let hex = "ab".repeat(32);
        let digest: Sha256Digest = format!("sha256:{hex}").parse().unwrap();
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
        assert_eq!(digest.hex(), hex);
        assert_eq!(digest.dashed(), format!("sha256-{hex}"));
        for bad in [
            hex.clone(),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{hex}0"),
            format!("sha512:{hex}"),
            format!("sha256:{}g", &hex[1..]),
            String::new(),
        ] {
            assert!(bad.parse::<Sha256Digest>().is_err(), "{bad}");
        }
        assert_eq!(
            Sha256Digest::of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                .parse()
                .unwrap()
        );
    }

    #[test]
    fn a_digest_is_text_in_json_and_toml() {
        let digest = Sha256Digest::of(b"x");
        let json = serde_json::to_string(&digest).unwrap();
        assert_eq!(json, format!("\"{digest}\""));
        assert_eq!(serde_json::from_str::<Sha256Digest>(&json).unwrap(), digest);
        assert!(serde_json::from_str::<Sha256Digest>("\"sha256:AB\"").is_err());
    }
}
