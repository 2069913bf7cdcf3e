//! Names to addresses: the host resolves a request's host itself and refuses addresses that are not
//! public, unless a rule names that host exactly.
//!
//! [`Resolver`] is injectable: [`SystemResolver`] asks the system (`getaddrinfo` through tokio),
//! [`StaticResolver`] maps names to fixed addresses (for tests and for pinning). The request is then
//! sent to the address that was checked, never to a name resolved a second time.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;

/// The future a [`Resolver`] returns.
pub type ResolveFuture<'a> =
    Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a host name into addresses.
pub trait Resolver: Send + Sync + std::fmt::Debug {
    /// Every address of `host` (a name; never an IP literal).
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a>;
}

/// The system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            let found = tokio::net::lookup_host((host, 0)).await?;
            Ok(found.map(|a| a.ip()).collect())
        })
    }
}

/// Fixed answers; any other name does not resolve.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: BTreeMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// No names.
    pub fn new() -> StaticResolver {
        StaticResolver::default()
    }

    /// `host` resolves to `addresses`.
    pub fn with(mut self, host: &str, addresses: &[IpAddr]) -> StaticResolver {
        self.names
            .insert(host.to_ascii_lowercase(), addresses.to_vec());
        self
    }
}

impl Resolver for StaticResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        let found = self.names.get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "name does not resolve")
            })
        })
    }
}

/// Why an address is not public (`None`: it is).
pub(crate) fn not_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => not_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => not_public_v4(v4),
            None => not_public_v6(v6),
        },
    }
}

fn not_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match () {
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "cloud metadata",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..128).contains(&b) => "shared (CGNAT)",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ if a == 192 && b == 0 && c == 0 => "IETF protocol assignments",
        _ if ip.is_documentation() => "documentation",
        _ if a == 198 && (18..20).contains(&b) => "benchmarking",
        _ => return None,
    })
}

fn not_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match () {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => "cloud metadata",
        _ if first & 0xfe00 == 0xfc00 => "private (unique local)",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local",
        _ if ip.is_multicast() => "multicast",
        _ if first == 0x2001 && ip.segments()[1] == 0x0db8 => "documentation",
        // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) forms can reach IPv4 addresses.
        _ if ip.segments()[..6].iter().all(|s| *s == 0) => "IPv4-compatible",
        _ if first == 0x64 && ip.segments()[1] == 0xff9b => "NAT64",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses_are_named() {
        for (text, kind) in [
            ("127.0.0.1", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.3.4", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("224.0.0.1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "private (unique local)"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::7f00:1", "IPv4-compatible"),
            ("64:ff9b::a00:1", "NAT64"),
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(not_public(ip), Some(kind), "{text}");
        }
        for text in ["93.184.215.14", "2606:4700::1111", "1.1.1.1"] {
            assert_eq!(not_public(text.parse().unwrap()), None, "{text}");
        }
    }

    #[tokio::test]
    async fn a_static_resolver_answers_only_its_names() {
        let resolver = StaticResolver::new().with("A.test", &[Ipv4Addr::LOCALHOST.into()]);
        assert_eq!(
            resolver.resolve("a.test").await.unwrap(),
            vec![IpAddr::from(Ipv4Addr::LOCALHOST)]
        );
        assert!(resolver.resolve("b.test").await.is_err());
    }
}
