//! Secrets the tool never sees: named in the policy, read by the host from the environment or a file
//! when a request needs one, and added to requests for their origins only.
//!
//! ```toml
//! [secrets.github]
//! env = "GITHUB_TOKEN"                 # or: file = "/run/secrets/github"
//! origins = ["https://api.github.com"] # scheme, host and port; the secret goes nowhere else
//! header = "authorization"             # the default
//! format = "Bearer {}"                 # the default; {} is the secret
//! ```
//!
//! A secret is added after the request passed every check (and its approval), so a redirect to another
//! origin never carries it; it replaces any header of that name the tool set. It travels over `https`
//! only: an `http://` origin is accepted only for a loopback IP address (`127.0.0.0/8`, `[::1]`), which
//! never leaves the machine. The value is held in [`Secret`], whose `Debug` and `Display` are masked,
//! is marked sensitive in the request, and is never in the tool's environment, a record or a message.
//! A server that echoes it back (a debugging endpoint, an error page quoting the header) has it masked
//! in the response before the tool reads it (`mask.rs`, which says which encodings it knows); bind a
//! secret only to the origins that need it all the same.

use std::path::PathBuf;

use http::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::rules::Target;

/// A secret's value; shown as `***`.
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// A `[secrets.NAME]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretFile {
    env: Option<String>,
    file: Option<PathBuf>,
    origins: Vec<String>,
    header: Option<String>,
    format: Option<String>,
}

/// Why a `[secrets.NAME]` table was refused.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// Neither or both of `env` and `file`.
    #[error("secret `{0}` needs exactly one of `env` and `file`")]
    Source(String),
    /// An origin is not `https://host[:port]` (or `http://` a loopback address).
    #[error(
        "secret `{name}`: origin `{origin}` must be https://host[:port] (http:// only for a loopback IP address)"
    )]
    Origin {
        /// The secret.
        name: String,
        /// The origin as written.
        origin: String,
    },
    /// The header name or the format is unusable.
    #[error("secret `{0}`: the header must be a header name and the format must contain {{}}")]
    Header(String),
}

#[derive(Debug, Clone)]
enum Source {
    Env(String),
    File(PathBuf),
}

/// One secret, bound to its origins.
#[derive(Debug, Clone)]
pub struct SecretBinding {
    name: String,
    source: Source,
    origins: Vec<Target>,
    header: HeaderName,
    format: String,
}

impl SecretBinding {
    /// Compiles a `[secrets.NAME]` table.
    pub(crate) fn compile(name: &str, file: &SecretFile) -> Result<SecretBinding, SecretError> {
        let source = match (&file.env, &file.file) {
            (Some(var), None) => Source::Env(var.clone()),
            (None, Some(path)) => Source::File(path.clone()),
            _ => return Err(SecretError::Source(name.to_owned())),
        };
        let origins = file
            .origins
            .iter()
            .map(|origin| {
                origin_target(origin).ok_or_else(|| SecretError::Origin {
                    name: name.to_owned(),
                    origin: origin.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let header =
            HeaderName::from_bytes(file.header.as_deref().unwrap_or("authorization").as_bytes())
                .map_err(|_| SecretError::Header(name.to_owned()))?;
        let format = file.format.clone().unwrap_or_else(|| "Bearer {}".into());
        if !format.contains("{}") {
            return Err(SecretError::Header(name.to_owned()));
        }
        Ok(SecretBinding {
            name: name.to_owned(),
            source,
            origins,
            header,
            format,
        })
    }

    /// The secret's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether requests to `target` get this secret.
    pub(crate) fn applies_to(&self, target: &Target) -> bool {
        self.origins
            .iter()
            .any(|o| o.https == target.https && o.host == target.host && o.port == target.port)
    }

    /// The header to add, read from its source now, and the texts the secret could come back as in a
    /// response (`mask.rs`); the error names the secret, never its value.
    pub(crate) fn header(&self) -> Result<(HeaderName, HeaderValue, Vec<Vec<u8>>), String> {
        let secret = match &self.source {
            Source::Env(var) => std::env::var(var).ok(),
            Source::File(path) => std::fs::read_to_string(path).ok(),
        }
        .map(|v| Secret(v.trim().to_owned()))
        .filter(|s| !s.0.is_empty())
        .ok_or_else(|| format!("the secret `{}` is not available", self.name))?;
        let mut value = HeaderValue::from_str(&self.format.replace("{}", &secret.0))
            .map_err(|_| format!("the secret `{}` is not a valid header value", self.name))?;
        value.set_sensitive(true);
        let texts = super::mask::encodings(secret.0.as_bytes(), value.as_bytes());
        Ok((self.header.clone(), value, texts))
    }
}

/// `https://host[:port]`, or `http://` with a loopback IP address; no path.
fn origin_target(origin: &str) -> Option<Target> {
    let uri: http::Uri = origin.parse().ok()?;
    if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return None;
    }
    let target = Target::of(&uri).ok()?;
    let loopback = target
        .host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    (target.https || loopback).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(origins: &[&str]) -> SecretFile {
        SecretFile {
            env: Some("NOT_SET_ANYWHERE_FOR_TURNGATE".into()),
            file: None,
            origins: origins.iter().map(|o| o.to_string()).collect(),
            header: None,
            format: None,
        }
    }

    #[test]
    fn secrets_go_over_https_or_to_loopback_only() {
        assert!(SecretBinding::compile("s", &file(&["https://api.test"])).is_ok());
        assert!(SecretBinding::compile("s", &file(&["http://127.0.0.1:8080"])).is_ok());
        for bad in ["http://api.test", "https://api.test/path", "api.test"] {
            assert!(SecretBinding::compile("s", &file(&[bad])).is_err(), "{bad}");
        }
        let binding = SecretBinding::compile("s", &file(&["https://api.test"])).unwrap();
        let target = |url: &str| Target::of(&url.parse().unwrap()).unwrap();
        assert!(binding.applies_to(&target("https://api.test/x")));
        assert!(!binding.applies_to(&target("https://api.test:8443/x")));
        assert!(!binding.applies_to(&target("https://other.test/x")));
        let missing = binding.header().unwrap_err();
        assert!(missing.contains("`s` is not available"), "{missing}");
        assert_eq!(
            format!("{:?} {}", Secret("v".into()), Secret("v".into())),
            "*** ***"
        );
    }
}
