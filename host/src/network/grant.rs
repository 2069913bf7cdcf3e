//! A tool's network grant: its egress rules compiled from the policy, and the decision for one request.
//!
//! In the policy file (see `policy.rs` for the whole format):
//!
//! ```toml
//! [network]                        # every tool
//! deny = ["https://*.internal.example"]   # beats every allow of every tool
//! # get / write / approval here are the grant of tools without a network table of their own
//!
//! [tools.fetch.network]
//! get = ["https://example.org/**", "https://*.wikipedia.org/wiki/**"]
//!
//! [tools.github.network]
//! get = ["https://api.github.com/repos/acme/**"]
//! write = ["POST,PATCH https://api.github.com/repos/acme/*/issues/**"]
//! deny = ["https://api.github.com/repos/acme/secret/**"]
//! approval = "ask"                 # each write request waits for the approver
//! ```
//!
//! No table: no network. `get` grants reads (`GET`, `HEAD`, `OPTIONS`), `write` every method (or the
//! ones its rules name); `approval = "ask"` holds write requests for the approver (reads never ask).

use http::Method;
use serde::Deserialize;

use super::rules::{Rule, RuleError, Target, is_read};

/// The `network` table of a tool (or the top-level one), as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkFile {
    #[serde(default)]
    get: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    approval: Approval,
}

/// Whether write requests wait for the approver (`approval` in a network table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Approval {
    #[default]
    Auto,
    Ask,
}

/// A rule that did not compile, with the list it was in.
#[derive(Debug, Clone, thiserror::Error)]
#[error("network rule `{rule}`: {error}")]
pub struct GrantError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub error: RuleError,
}

/// What a tool may request over the network.
#[derive(Debug, Clone, Default)]
pub struct NetworkGrant {
    reads: Vec<Rule>,
    writes: Vec<Rule>,
    deny: Vec<Rule>,
    ask_for_writes: bool,
}

/// The decision on one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Allowed by `rule`.
    Allow {
        /// The allowing rule as written.
        rule: String,
        /// The rule names the host exactly: it may resolve to a non-public address.
        names_host: bool,
        /// The request waits for the approver.
        ask: bool,
    },
    /// Denied, with the reason.
    Deny(String),
}

fn compile(list: &[String], reads_only: bool) -> Result<Vec<Rule>, GrantError> {
    list.iter()
        .map(|text| {
            Rule::parse(text, reads_only).map_err(|error| GrantError {
                rule: text.clone(),
                error,
            })
        })
        .collect()
}

impl NetworkGrant {
    /// Compiles a tool's table (`own`, else the top-level default's grant) with the top-level deny list.
    pub(crate) fn compile(
        own: Option<&NetworkFile>,
        top: Option<&NetworkFile>,
    ) -> Result<NetworkGrant, GrantError> {
        let grant = own.or(top);
        let mut deny = compile(top.map_or(&[][..], |t| &t.deny), false)?;
        if let Some(own) = own {
            deny.extend(compile(&own.deny, false)?);
        }
        let Some(grant) = grant else {
            return Ok(NetworkGrant {
                deny,
                ..NetworkGrant::default()
            });
        };
        Ok(NetworkGrant {
            reads: compile(&grant.get, true)?,
            writes: compile(&grant.write, false)?,
            deny,
            ask_for_writes: grant.approval == Approval::Ask,
        })
    }

    /// A grant of exactly these read and write rules (as a tool's requested grants list them), with
    /// no deny rules and no approval.
    pub fn from_rules(get: &[String], write: &[String]) -> Result<NetworkGrant, GrantError> {
        Ok(NetworkGrant {
            reads: compile(get, true)?,
            writes: compile(write, false)?,
            deny: Vec::new(),
            ask_for_writes: false,
        })
    }

    /// Whether the grant allows any request at all.
    pub fn any(&self) -> bool {
        !self.reads.is_empty() || !self.writes.is_empty()
    }

    /// Whether a call may start with `url` in a declared URL field: the tool may use some method on it,
    /// that is a read or write rule grants a method there that no deny rule takes away (a rule limited
    /// to `HEAD` lets the call start; a deny rule covering every method does not). Each request the
    /// call then makes is decided on its own method in the hook.
    pub fn allows_url(&self, url: &str) -> Result<(), String> {
        let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
        let target = Target::of(&uri)?;
        let mut first_refusal = None;
        for method in self.methods_granted_at(&target) {
            match self.decide(&method, &target) {
                Decision::Allow { .. } => return Ok(()),
                Decision::Deny(reason) => {
                    first_refusal.get_or_insert(reason);
                }
            }
        }
        Err(first_refusal.unwrap_or_else(|| "no network rule of the tool allows it".into()))
    }

    /// Every method an allow rule grants at `target`: the methods it names, or for a rule naming none,
    /// the reads (a `get` rule) or the common methods (a `write` rule).
    fn methods_granted_at(&self, target: &Target) -> Vec<Method> {
        const READS: [Method; 3] = [Method::GET, Method::HEAD, Method::OPTIONS];
        const ALL: [Method; 8] = [
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::TRACE,
        ];
        let mut methods: Vec<Method> = Vec::new();
        let rules = self.reads.iter().map(|r| (r, &READS[..]));
        for (rule, unnamed) in rules.chain(self.writes.iter().map(|r| (r, &ALL[..]))) {
            if rule.matches_url(target) {
                for method in rule.methods().unwrap_or(unnamed) {
                    if !methods.contains(method) {
                        methods.push(method.clone());
                    }
                }
            }
        }
        methods
    }

    /// The decision on `method` to `target`.
    pub(crate) fn decide(&self, method: &Method, target: &Target) -> Decision {
        if let Some(rule) = self.deny.iter().find(|r| r.matches(method, target)) {
            return Decision::Deny(format!("denied by the network rule `{}`", rule.text()));
        }
        let read = is_read(method);
        let allowing = read
            .then(|| self.reads.iter().find(|r| r.matches(method, target)))
            .flatten()
            .map(|rule| (rule, false))
            .or_else(|| {
                self.writes
                    .iter()
                    .find(|r| r.matches(method, target))
                    .map(|rule| (rule, !read && self.ask_for_writes))
            });
        match allowing {
            Some((rule, ask)) => Decision::Allow {
                rule: rule.text().to_owned(),
                names_host: rule.names_host(&target.host),
                ask,
            },
            None if read => Decision::Deny("no network rule of the tool allows it".into()),
            None => Decision::Deny(format!(
                "no network rule of the tool allows {method} (methods that change things are granted under `write`)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(own: &str, top: &str) -> NetworkGrant {
        let own: Option<NetworkFile> = (!own.is_empty()).then(|| toml::from_str(own).unwrap());
        let top: Option<NetworkFile> = (!top.is_empty()).then(|| toml::from_str(top).unwrap());
        NetworkGrant::compile(own.as_ref(), top.as_ref()).unwrap()
    }

    fn decide(grant: &NetworkGrant, method: Method, url: &str) -> Decision {
        grant.decide(&method, &Target::of(&url.parse().unwrap()).unwrap())
    }

    #[test]
    fn reads_and_writes_are_granted_apart_and_deny_wins() {
        let g = grant(
            r#"
            get = ["https://api.test/repos/**"]
            write = ["POST https://api.test/repos/*/issues"]
            deny = ["https://api.test/repos/secret/**"]
            approval = "ask"
            "#,
            r#"deny = ["https://api.test/repos/blocked/**"]"#,
        );
        assert!(matches!(
            decide(&g, Method::GET, "https://api.test/repos/a"),
            Decision::Allow { ask: false, .. }
        ));
        assert!(matches!(
            decide(&g, Method::POST, "https://api.test/repos/a/issues"),
            Decision::Allow { ask: true, .. }
        ));
        for (method, url) in [
            (Method::DELETE, "https://api.test/repos/a/issues"),
            (Method::POST, "https://api.test/repos/a"),
            (Method::GET, "https://api.test/repos/secret/x"),
            (Method::GET, "https://api.test/repos/blocked/x"),
            (Method::GET, "https://other.test/repos/a"),
        ] {
            assert!(
                matches!(decide(&g, method.clone(), url), Decision::Deny(_)),
                "{method} {url}"
            );
        }
    }

    /// A declared URL is held to the methods the tool may use there, not to `GET` alone.
    #[test]
    fn a_declared_url_passes_when_some_granted_method_is_allowed_there() {
        let head_only = grant(r#"get = ["HEAD https://a.test/**"]"#, "");
        assert_eq!(head_only.allows_url("https://a.test/x"), Ok(()));
        assert!(head_only.allows_url("https://b.test/x").is_err());
        let options_only = grant(r#"get = ["OPTIONS https://a.test/**"]"#, "");
        assert_eq!(options_only.allows_url("https://a.test/x"), Ok(()));
        // A deny rule for GET leaves HEAD; one covering every method leaves nothing.
        let get_denied = grant(
            r#"get = ["https://a.test/**"]
            deny = ["GET https://a.test/private/**"]"#,
            "",
        );
        assert_eq!(get_denied.allows_url("https://a.test/private/x"), Ok(()));
        let all_denied = grant(
            r#"get = ["https://a.test/**"]
            deny = ["https://a.test/private/**"]"#,
            "",
        );
        let refusal = all_denied
            .allows_url("https://a.test/private/x")
            .unwrap_err();
        assert!(refusal.contains("denied by the network rule"), "{refusal}");
        let write_only = grant(r#"write = ["POST https://a.test/hook"]"#, "");
        assert_eq!(write_only.allows_url("https://a.test/hook"), Ok(()));
        assert!(write_only.allows_url("https://a.test/other").is_err());
    }

    #[test]
    fn no_table_no_network_and_the_top_level_grant_is_a_default() {
        let none = grant("", "");
        assert!(!none.any());
        assert!(matches!(
            decide(&none, Method::GET, "https://a.test/"),
            Decision::Deny(_)
        ));
        let default = grant("", r#"get = ["https://a.test"]"#);
        assert!(matches!(
            decide(&default, Method::GET, "https://a.test/x"),
            Decision::Allow { .. }
        ));
        let own = grant(r#"get = ["https://b.test"]"#, r#"get = ["https://a.test"]"#);
        assert!(matches!(
            decide(&own, Method::GET, "https://a.test/x"),
            Decision::Deny(_)
        ));
    }
}
