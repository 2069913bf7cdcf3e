//! Egress rules: which requests a tool may make, by method, origin and path.
//!
//! A rule is text: an optional comma-separated method list, then a URL pattern,
//! `[METHOD[,METHOD...] ]scheme://host[:port][/path-glob]`:
//!
//! * `scheme` is `https` or `http`; `http` only with a host named exactly (no wildcard), so plain text
//!   goes only where a rule says so for that one host;
//! * `host` is a name (`api.github.com`), `*.` plus a name (any subdomain, not the name itself), an IPv4
//!   address or a bracketed IPv6 address; compared case-insensitively, a trailing dot ignored;
//! * `port` defaults to the scheme's (443, 80);
//! * `path-glob` is a glob over the request's path (without the query): `*` does not cross `/`, `/**`
//!   at the end covers the directory itself and everything beneath it; no path means every path.
//!
//! Reads (`GET`, `HEAD`, `OPTIONS`) and everything else (methods that change things) are granted by
//! separate lists; a method list narrows a rule further. Deny rules beat every allow. A rule that names
//! its host exactly (not through `*.`) also lets that host resolve to a non-public address
//! (`addresses.rs`).

use globset::{GlobBuilder, GlobMatcher};
use http::{Method, Uri};

/// The methods that only read.
pub(crate) fn is_read(method: &Method) -> bool {
    *method == Method::GET || *method == Method::HEAD || *method == Method::OPTIONS
}

/// Why a rule's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The scheme is missing or neither `https` nor `http`.
    #[error("a rule must start with https:// or http://")]
    Scheme,
    /// `http` with a wildcard host.
    #[error("an http:// rule must name its host exactly (no `*.`)")]
    PlainWildcard,
    /// The host is empty or malformed.
    #[error("the host is missing or malformed")]
    Host,
    /// The port is not a number from 1 to 65535.
    #[error("the port is not a number from 1 to 65535")]
    Port,
    /// A method is not a valid HTTP method name.
    #[error("`{0}` is not an HTTP method")]
    Method(String),
    /// A read list names a method that changes things.
    #[error("`{0}` changes things: grant it under `write`, not `get`")]
    WriteInReadList(String),
    /// The path glob does not compile.
    #[error("bad path glob: {0}")]
    Glob(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// Exactly this host (lowercase, no trailing dot; an IPv6 address without brackets).
    Exact(String),
    /// Any subdomain of this name.
    Subdomains(String),
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    text: String,
    methods: Option<Vec<Method>>,
    https: bool,
    host: HostPattern,
    port: u16,
    path: Option<GlobMatcher>,
}

/// The parts of a request URL a rule is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Whether the scheme is `https`.
    pub(crate) https: bool,
    /// Lowercase, no trailing dot; an IPv6 address without brackets.
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) path: String,
}

impl Target {
    /// The target of a request URI; `None` for a URI without scheme or host, with another scheme, or
    /// with a path whose meaning a server may change (dot segments, encoded slashes or backslashes).
    pub(crate) fn of(uri: &Uri) -> Result<Target, String> {
        let https = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("https") => true,
            Some(s) if s.eq_ignore_ascii_case("http") => false,
            Some(other) => return Err(format!("the scheme `{other}` is not http or https")),
            None => return Err("the URL has no scheme".into()),
        };
        let host = uri.host().ok_or("the URL has no host")?;
        let host = normalize_host(host).ok_or("the URL's host is malformed")?;
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let raw = uri.path();
        let path = decode_unreserved(if raw.is_empty() { "/" } else { raw });
        if !path_is_plain(&path) {
            return Err(format!(
                "the path `{raw}` has dot segments, encoded slashes or backslashes"
            ));
        }
        Ok(Target {
            https,
            host,
            port,
            path,
        })
    }
}

/// The path as a server reads it: escaped unreserved characters (letters, digits, `-._~`) decoded,
/// since RFC 3986 makes `%61` and `a` the same path, so no escape slips past a deny rule; every other
/// escape stays as written.
fn decode_unreserved(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at + 1..at + 3);
        let byte = escape.and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match byte {
            Some(b) if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => {
                out.push(char::from(b));
                rest = &rest[at + 3..];
            }
            _ => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether a path means the same to every server: no `.` or `..` segment (also percent-encoded), no
/// encoded `/` or `\`, no `\`.
fn path_is_plain(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") || lower.contains('\\') {
        return false;
    }
    !lower.split('/').any(|segment| {
        let decoded = segment.replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// Lowercase, without a trailing dot, IPv6 brackets removed; `None` when empty.
fn normalize_host(host: &str) -> Option<String> {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    ok.then_some(host)
}

impl Rule {
    /// Parses a rule's text. `reads_only`: the rule is in a list of reads, so its methods must be reads.
    pub(crate) fn parse(text: &str, reads_only: bool) -> Result<Rule, RuleError> {
        let trimmed = text.trim();
        let (methods, url) = match trimmed.split_once(char::is_whitespace) {
            Some((methods, url)) if !methods.contains("://") => {
                let mut list = Vec::new();
                for name in methods.split(',') {
                    let method = Method::from_bytes(name.trim().as_bytes())
                        .map_err(|_| RuleError::Method(name.to_owned()))?;
                    if reads_only && !is_read(&method) {
                        return Err(RuleError::WriteInReadList(name.to_owned()));
                    }
                    list.push(method);
                }
                (Some(list), url.trim())
            }
            _ => (None, trimmed),
        };
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(RuleError::Scheme);
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (host, port) = split_port(authority)?;
        let host = match host.strip_prefix("*.") {
            Some(name) => HostPattern::Subdomains(normalize_host(name).ok_or(RuleError::Host)?),
            None => HostPattern::Exact(normalize_host(host).ok_or(RuleError::Host)?),
        };
        if !https && matches!(host, HostPattern::Subdomains(_)) {
            return Err(RuleError::PlainWildcard);
        }
        let port = port.unwrap_or(if https { 443 } else { 80 });
        let path = match path {
            "" | "/**" => None,
            glob => Some(compile_path(glob)?),
        };
        Ok(Rule {
            text: trimmed.to_owned(),
            methods,
            https,
            host,
            port,
            path,
        })
    }

    /// The rule as written.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule covers `method` on `target`.
    pub(crate) fn matches(&self, method: &Method, target: &Target) -> bool {
        self.methods.as_ref().is_none_or(|m| m.contains(method)) && self.matches_url(target)
    }

    /// Whether the rule covers `target` for some method.
    pub(crate) fn matches_url(&self, target: &Target) -> bool {
        self.https == target.https
            && self.port == target.port
            && self.matches_host(&target.host)
            && self.path.as_ref().is_none_or(|g| g.is_match(&target.path))
    }

    /// The methods the rule names (`None`: it names none, and covers every method of its list).
    pub(crate) fn methods(&self) -> Option<&[Method]> {
        self.methods.as_deref()
    }

    /// Whether the rule names `host` exactly (not through a wildcard).
    pub(crate) fn names_host(&self, host: &str) -> bool {
        matches!(&self.host, HostPattern::Exact(h) if h == host)
    }

    fn matches_host(&self, host: &str) -> bool {
        match &self.host {
            HostPattern::Exact(h) => h == host,
            HostPattern::Subdomains(name) => host
                .strip_suffix(name.as_str())
                .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.')),
        }
    }
}

fn split_port(authority: &str) -> Result<(&str, Option<u16>), RuleError> {
    let port_at = if authority.starts_with('[') {
        authority.find(']').map(|end| end + 1)
    } else {
        Some(authority.rfind(':').unwrap_or(authority.len()))
    };
    let Some(at) = port_at else {
        return Err(RuleError::Host);
    };
    let (host, port) = authority.split_at(at);
    match port.strip_prefix(':') {
        None if port.is_empty() => Ok((host, None)),
        None => Err(RuleError::Host),
        Some(digits) => match digits.parse::<u16>() {
            Ok(p) if p > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok((host, Some(p))),
            _ => Err(RuleError::Port),
        },
    }
}

/// Compiles a path glob; `/dir/**` also matches `/dir` itself.
fn compile_path(glob: &str) -> Result<GlobMatcher, RuleError> {
    let pattern = match glob.strip_suffix("/**") {
        Some(dir) if !dir.is_empty() => format!("{{{dir},{dir}/**}}"),
        _ => glob.to_owned(),
    };
    GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| RuleError::Glob(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::of(&url.parse().unwrap()).unwrap()
    }

    fn allows(rule: &str, method: Method, url: &str) -> bool {
        let reads = Rule::parse(rule, false).unwrap();
        reads.matches(&method, &target(url))
    }

    #[test]
    fn origins_ports_paths_and_methods() {
        let rule = "https://example.org/docs/**";
        assert!(allows(rule, Method::GET, "https://example.org/docs"));
        assert!(allows(
            rule,
            Method::GET,
            "https://EXAMPLE.org./docs/a/b?q=1"
        ));
        assert!(!allows(rule, Method::GET, "https://example.org/docsx"));
        assert!(!allows(rule, Method::GET, "http://example.org/docs/a"));
        assert!(!allows(
            rule,
            Method::GET,
            "https://example.org:8443/docs/a"
        ));
        assert!(!allows(
            rule,
            Method::GET,
            "https://evil.example.org/docs/a"
        ));
        let star = "https://api.test/repos/*/issues";
        assert!(allows(star, Method::GET, "https://api.test/repos/a/issues"));
        assert!(!allows(
            star,
            Method::GET,
            "https://api.test/repos/a/b/issues"
        ));
        let post = "POST,PUT https://api.test:8443";
        assert!(allows(post, Method::POST, "https://api.test:8443/x"));
        assert!(!allows(post, Method::DELETE, "https://api.test:8443/x"));
    }

    #[test]
    fn wildcards_cover_subdomains_only() {
        let rule = "https://*.example.org";
        assert!(allows(rule, Method::GET, "https://a.example.org/"));
        assert!(allows(rule, Method::GET, "https://a.b.example.org/"));
        assert!(!allows(rule, Method::GET, "https://example.org/"));
        assert!(!allows(rule, Method::GET, "https://badexample.org/"));
        let parsed = Rule::parse(rule, false).unwrap();
        assert!(!parsed.names_host("a.example.org"));
        assert!(
            Rule::parse("https://a.test", false)
                .unwrap()
                .names_host("a.test")
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        for (text, error) in [
            ("example.org", RuleError::Scheme),
            ("ftp://example.org", RuleError::Scheme),
            ("http://*.example.org", RuleError::PlainWildcard),
            ("https://", RuleError::Host),
            ("https://a.test:0", RuleError::Port),
            ("https://a.test:99999", RuleError::Port),
        ] {
            assert_eq!(Rule::parse(text, false).unwrap_err(), error, "{text}");
        }
        assert!(matches!(
            Rule::parse("POST https://a.test", true),
            Err(RuleError::WriteInReadList(_))
        ));
        assert!(matches!(
            Rule::parse("https://a.test/[", false),
            Err(RuleError::Glob(_))
        ));
        assert!(Rule::parse("http://[::1]:8080/x", false).is_ok());
    }

    #[test]
    fn escaped_unreserved_characters_cannot_slip_past_a_deny_rule() {
        let deny = Rule::parse("https://api.test/repos/acme/secret/**", false).unwrap();
        let escaped = target("https://api.test/repos/acme/%73%65cret/x");
        assert_eq!(escaped.path, "/repos/acme/secret/x");
        assert!(deny.matches(&Method::GET, &escaped));
        assert_eq!(target("https://api.test/a%20b%25").path, "/a%20b%25");
    }

    #[test]
    fn paths_a_server_may_reinterpret_are_refused() {
        for url in [
            "https://a.test/docs/../admin",
            "https://a.test/docs/%2e%2E/admin",
            "https://a.test/docs%2fadmin",
            "https://a.test/docs/./x",
        ] {
            assert!(Target::of(&url.parse().unwrap()).is_err(), "{url}");
        }
        assert!(Target::of(&"ftp://a.test/".parse().unwrap()).is_err());
    }
}
