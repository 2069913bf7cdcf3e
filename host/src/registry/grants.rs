//! What a tool asks to be granted, as its author publishes it: the manifest annotation
//! [`GRANTS_ANNOTATION`], a JSON object checked strictly and within bounds, shown to the user beside the
//! signer and digest, and written into the policy only when the user accepts it.
//!
//! ```json
//! {"paths": {"read": ["docs/**"], "write": ["reports/**"]},
//!  "network": {"get": ["https://api.weather.example/**"],
//!              "write": ["POST https://api.weather.example/reports"]},
//!  "secrets": ["weather"],
//!  "env": ["LANG"]}
//! ```
//!
//! Every key is optional; anything else is refused. Paths are globs relative to the root (no absolute
//! path, no `..`); network rules are the policy's (`network/rules.rs`: `get` only reads); secrets are
//! the names of the policy's `[secrets.NAME]` tables the tool's requests may carry (the user binds the
//! values and origins); env names environment variables it may see. An annotation is the author's
//! request, never a grant: accepted, it becomes the tool's `[tools.NAME]` table.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::network::NetworkGrant;

/// The manifest annotation that carries a tool's requested grants.
pub const GRANTS_ANNOTATION: &str = "dev.turngate.grants";

/// The most bytes the annotation may take.
pub const MAX_GRANTS_BYTES: usize = 64 << 10;
/// The most entries one list may have.
pub const MAX_ENTRIES: usize = 64;
/// The most bytes one entry may take.
pub const MAX_ENTRY_BYTES: usize = 512;

/// The paths a tool asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathGrants {
    /// Globs it may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Globs it may read and write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

/// The network a tool asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkGrants {
    /// Rules for reads (`GET`, `HEAD`, `OPTIONS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub get: Vec<String>,
    /// Rules for methods that change things.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

/// Everything a tool asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Paths beneath the root.
    #[serde(default, skip_serializing_if = "is_default")]
    pub paths: PathGrants,
    /// Requests over HTTP.
    #[serde(default, skip_serializing_if = "is_default")]
    pub network: NetworkGrants,
    /// Secrets (by the policy's names) its requests may carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Environment variables it may see.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Why an annotation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the tool's requested grants ({GRANTS_ANNOTATION}) are not valid: {0}")]
pub struct GrantsError(pub String);

impl Grants {
    /// Parses and checks the annotation's text.
    pub fn parse(text: &str) -> Result<Grants, GrantsError> {
        if text.len() > MAX_GRANTS_BYTES {
            return Err(GrantsError(format!(
                "{} bytes, more than the {MAX_GRANTS_BYTES} allowed",
                text.len()
            )));
        }
        let value = crate::json::parse_strict(text).map_err(|e| GrantsError(e.to_string()))?;
        if !value.is_object() {
            return Err(GrantsError("not a JSON object".into()));
        }
        let grants: Grants =
            serde_json::from_value(value).map_err(|e| GrantsError(e.to_string()))?;
        grants.check()?;
        Ok(grants)
    }

    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        *self == Grants::default()
    }

    fn check(&self) -> Result<(), GrantsError> {
        let lists: [(&str, &[String]); 6] = [
            ("paths.read", &self.paths.read),
            ("paths.write", &self.paths.write),
            ("network.get", &self.network.get),
            ("network.write", &self.network.write),
            ("secrets", &self.secrets),
            ("env", &self.env),
        ];
        for (what, list) in lists {
            if list.len() > MAX_ENTRIES {
                return Err(GrantsError(format!(
                    "{what} has {} entries, more than the {MAX_ENTRIES} allowed",
                    list.len()
                )));
            }
            if let Some(long) = list.iter().find(|e| e.len() > MAX_ENTRY_BYTES) {
                return Err(GrantsError(format!(
                    "an entry of {what} has {} bytes, more than the {MAX_ENTRY_BYTES} allowed",
                    long.len()
                )));
            }
        }
        for glob in self.paths.read.iter().chain(&self.paths.write) {
            let relative = !glob.starts_with('/')
                && !glob.split('/').any(|c| c == "..")
                && !glob.contains('\0');
            if !relative {
                return Err(GrantsError(format!(
                    "path `{glob}` is not relative to the root (no leading `/`, no `..`)"
                )));
            }
            globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map_err(|e| GrantsError(format!("path `{glob}`: {e}")))?;
        }
        NetworkGrant::from_rules(&self.network.get, &self.network.write)
            .map_err(|e| GrantsError(e.to_string()))?;
        for name in &self.secrets {
            let plain = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !plain {
                return Err(GrantsError(format!(
                    "secret name `{name}` is not letters, digits, `_` or `-`"
                )));
            }
        }
        for name in &self.env {
            let variable = name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !variable {
                return Err(GrantsError(format!(
                    "environment variable `{name}` is not a variable name"
                )));
            }
        }
        Ok(())
    }

    /// The grants as JSON text (how the lock keeps the accepted ones).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("grants serialize")
    }

    /// One line per grant, for the user to read before accepting (`(nothing)` when empty).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let mut line = |what: &str, items: &[String]| {
            if !items.is_empty() {
                let _ = writeln!(out, "  {what:<14} {}", items.join(", "));
            }
        };
        line("read", &self.paths.read);
        line("read+write", &self.paths.write);
        line("network reads", &self.network.get);
        line("network writes", &self.network.write);
        line("secrets", &self.secrets);
        line("environment", &self.env);
        if out.is_empty() {
            out.push_str("  (nothing)\n");
        }
        out
    }

    /// What `self` asks for that `before` did not, and what it no longer asks for, one line each
    /// (`+ ...` / `- ...`), for `tools update`.
    pub fn difference(&self, before: &Grants) -> String {
        let mut out = String::new();
        let mut compare = |what: &str, now: &[String], then: &[String]| {
            for item in now.iter().filter(|i| !then.contains(i)) {
                let _ = writeln!(out, "  + {what} {item}");
            }
            for item in then.iter().filter(|i| !now.contains(i)) {
                let _ = writeln!(out, "  - {what} {item}");
            }
        };
        compare("read", &self.paths.read, &before.paths.read);
        compare("read+write", &self.paths.write, &before.paths.write);
        compare("network read", &self.network.get, &before.network.get);
        compare("network write", &self.network.write, &before.network.write);
        compare("secret", &self.secrets, &before.secrets);
        compare("environment", &self.env, &before.env);
        if out.is_empty() {
            out.push_str("  (no change)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_annotation_is_parsed_strictly_and_held_to_its_bounds() {
        let grants = Grants::parse(
            r#"{"paths": {"read": ["docs/**"]}, "network": {"get": ["https://a.test/**"]},
                "secrets": ["weather"], "env": ["LANG"]}"#,
        )
        .unwrap();
        assert_eq!(grants.paths.read, ["docs/**"]);
        assert_eq!(Grants::parse(&grants.to_json()).unwrap(), grants);
        assert!(Grants::parse("{}").unwrap().is_empty());
        for bad in [
            r#"{"paths": {"read": ["/etc/**"]}}"#,
            r#"{"paths": {"write": ["../out"]}}"#,
            r#"{"paths": {"execute": ["x"]}}"#,
            r#"{"network": {"get": ["POST https://a.test/x"]}}"#,
            r#"{"network": {"get": ["ftp://a.test/x"]}}"#,
            r#"{"secrets": ["a b"]}"#,
            r#"{"env": ["1X"]}"#,
            r#"{"root": true}"#,
            r#"{"env": ["A"], "env": ["B"]}"#,
            r#"{"env": ["A"]} trailing"#,
            "[]",
        ] {
            assert!(Grants::parse(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("\"V{i}\"")).collect();
        let error = Grants::parse(&format!("{{\"env\": [{}]}}", many.join(","))).unwrap_err();
        assert!(error.0.contains("more than the 64 allowed"), "{error}");
        let big = format!("{{\"env\": [\"{}\"]}}", "A".repeat(MAX_GRANTS_BYTES));
        assert!(Grants::parse(&big).is_err());
    }

    #[test]
    fn the_difference_names_what_is_added_and_what_is_dropped() {
        let before = Grants::parse(r#"{"network": {"get": ["https://a.test/**"]}}"#).unwrap();
        let after =
            Grants::parse(r#"{"network": {"get": ["https://b.test/**"]}, "env": ["HOME"]}"#)
                .unwrap();
        let difference = after.difference(&before);
        assert!(
            difference.contains("+ network read https://b.test/**"),
            "{difference}"
        );
        assert!(
            difference.contains("- network read https://a.test/**"),
            "{difference}"
        );
        assert!(difference.contains("+ environment HOME"), "{difference}");
        assert_eq!(before.difference(&before), "  (no change)\n");
    }
}
