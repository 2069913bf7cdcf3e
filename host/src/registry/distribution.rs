//! One repository of an OCI registry, read and written over the distribution API.
//!
//! oci-client does what is the protocol's: the token exchange a registry asks for (`401` with
//! `WWW-Authenticate: Bearer realm=...`), and pushing blobs and manifests. Reads go through turngate's
//! own bounded requests, because oci-client reads a manifest or an index whole, whatever its size:
//! every manifest, index and blob is read to at most its bound, a blob hashed as it streams and held to
//! its descriptor's digest and size, a manifest to the digest it was asked by and the registry's
//! `Docker-Content-Digest`. A redirect to another host never carries the credentials (reqwest drops
//! `Authorization` when the host changes); a registry that stops sending is cut after the stall limit.
//! Plain `http` is used only for a loopback registry the user names with `--plain-http`.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Reference, RegistryOperation};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use sha2::{Digest as _, Sha256};

use super::RegistryError;
use super::artifact::{Descriptor, Index, OCI_INDEX, OCI_MANIFEST, TagOrDigest};
use crate::digest::Sha256Digest;

/// How a registry is reached.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Use plain `http` (only for a loopback registry: refused for any other).
    pub plain_http: bool,
    /// How long a registry may send nothing before the request is cut.
    pub stall: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            plain_http: false,
            stall: Duration::from_secs(30),
        }
    }
}

/// A repository of a registry.
pub struct Registry {
    reference: Reference,
    client: oci_client::Client,
    http: reqwest::Client,
    auth: RegistryAuth,
    scheme: &'static str,
    /// The `Authorization` for reads, once the registry has been asked.
    pull: tokio::sync::OnceCell<Option<HeaderValue>>,
}

/// Whether `registry` (`host[:port]`) is a loopback address or `localhost`.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The credentials for `registry`: `TURNGATE_REGISTRY_USERNAME` and `TURNGATE_REGISTRY_PASSWORD`, else
/// the user's Docker configuration (`~/.docker/config.json`, its credential helpers included), else
/// none.
fn credentials(registry: &str) -> RegistryAuth {
    if let (Ok(user), Ok(password)) = (
        std::env::var("TURNGATE_REGISTRY_USERNAME"),
        std::env::var("TURNGATE_REGISTRY_PASSWORD"),
    ) {
        return RegistryAuth::Basic(user, password);
    }
    match docker_credential::get_credential(registry) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            RegistryAuth::Basic(user, password)
        }
        Ok(docker_credential::DockerCredential::IdentityToken(token)) => {
            RegistryAuth::Bearer(token)
        }
        Err(_) => RegistryAuth::Anonymous,
    }
}

impl Registry {
    /// The repository `reference` names (its tag or digest is not used here).
    pub fn connect(
        reference: &Reference,
        options: &RegistryOptions,
    ) -> Result<Registry, RegistryError> {
        let registry = reference.resolve_registry().to_owned();
        if options.plain_http && !is_loopback(&registry) {
            return Err(RegistryError::PlainHttp(registry));
        }
        // rustls needs a process-wide provider for oci-client's client: the host's (an embedding
        // program that installed its own keeps it).
        let _ = crate::tls::provider().install_default();
        let protocol = if options.plain_http {
            ClientProtocol::HttpsExcept(vec![registry.clone()])
        } else {
            ClientProtocol::Https
        };
        let client = oci_client::Client::new(ClientConfig {
            protocol,
            // The roots every request of this host trusts (webpki's, Mozilla's set), the same as the
            // bounded reads' client below; not the system's, which oci-client's HTTP client would
            // otherwise read from disk in every process.
            tls_certs_only: webpki_root_certs::TLS_SERVER_ROOT_CERTS
                .iter()
                .map(|certificate| Certificate {
                    encoding: CertificateEncoding::Der,
                    data: certificate.to_vec(),
                })
                .collect(),
            read_timeout: Some(options.stall),
            connect_timeout: Some(options.stall),
            platform_resolver: None,
            ..ClientConfig::default()
        });
        let http = crate::tls::http_client()
            .connect_timeout(options.stall)
            .read_timeout(options.stall)
            .build()
            .map_err(RegistryError::Http)?;
        Ok(Registry {
            auth: credentials(&registry),
            reference: reference.clone(),
            client,
            http,
            scheme: if options.plain_http { "http" } else { "https" },
            pull: tokio::sync::OnceCell::new(),
        })
    }

    /// `REGISTRY/REPOSITORY`.
    pub fn repository(&self) -> String {
        format!(
            "{}/{}",
            self.reference.registry(),
            self.reference.repository()
        )
    }

    fn url(&self, kind: &str, name: &str) -> String {
        format!(
            "{}://{}/v2/{}/{kind}/{name}",
            self.scheme,
            self.reference.resolve_registry(),
            self.reference.repository()
        )
    }

    /// The `Authorization` to send: a bearer token from the registry's token service (oci-client
    /// performs the exchange), the basic credentials, or none.
    async fn authorization(
        &self,
        operation: RegistryOperation,
    ) -> Result<Option<HeaderValue>, RegistryError> {
        let token = self
            .client
            .auth(&self.reference, &self.auth, operation)
            .await
            .map_err(RegistryError::Auth)?;
        let value = match (token, &self.auth) {
            (Some(token), _) => format!("Bearer {token}"),
            (None, RegistryAuth::Basic(user, password)) => {
                use base64::Engine as _;
                let pair =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                format!("Basic {pair}")
            }
            (None, RegistryAuth::Bearer(token)) => format!("Bearer {token}"),
            (None, RegistryAuth::Anonymous) => return Ok(None),
        };
        let mut value = HeaderValue::from_str(&value).map_err(RegistryError::Credentials)?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    /// The `Authorization` for reads, asked for once.
    async fn pull_authorization(&self) -> Result<Option<HeaderValue>, RegistryError> {
        self.pull
            .get_or_try_init(|| self.authorization(RegistryOperation::Pull))
            .await
            .cloned()
    }

    /// GETs `url` and reads at most `limit` bytes of its body; `None` for a 404.
    async fn get(
        &self,
        url: &str,
        accept: &str,
        limit: u64,
    ) -> Result<Option<(Bytes, reqwest::header::HeaderMap)>, RegistryError> {
        let mut request = self.http.get(url).header(ACCEPT, accept);
        if let Some(authorization) = self.pull_authorization().await? {
            request = request.header(AUTHORIZATION, authorization);
        }
        let mut response = request.send().await.map_err(RegistryError::request(url))?;
        match response.status() {
            reqwest::StatusCode::NOT_FOUND => return Ok(None),
            status if !status.is_success() => {
                return Err(RegistryError::Status {
                    url: url.to_owned(),
                    status: status.as_u16(),
                });
            }
            _ => {}
        }
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(RegistryError::TooLarge {
                url: url.to_owned(),
                limit,
            });
        }
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(RegistryError::request(url))?
        {
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(RegistryError::TooLarge {
                    url: url.to_owned(),
                    limit,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some((Bytes::from(body), headers)))
    }

    /// The manifest `tag_or_digest` (an image manifest or an index), at most `limit` bytes, held to the
    /// digest it was asked by (if it is one) and to the registry's `Docker-Content-Digest`; `None` when
    /// there is none. Answers the bytes and their digest.
    pub async fn manifest(
        &self,
        name: &TagOrDigest,
        limit: u64,
    ) -> Result<Option<(Bytes, Sha256Digest)>, RegistryError> {
        let url = self.url("manifests", &name.to_string());
        let Some((body, headers)) = self
            .get(&url, &format!("{OCI_MANIFEST}, {OCI_INDEX}"), limit)
            .await?
        else {
            return Ok(None);
        };
        let digest = Sha256Digest::of(&body);
        if let Some(asked) = name.digest()
            && asked != digest
        {
            return Err(RegistryError::ManifestDigest {
                asked: asked.to_string(),
                received: digest,
            });
        }
        if let Some(said) = headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && said.parse() != Ok(digest)
        {
            return Err(RegistryError::ManifestDigest {
                asked: said.to_owned(),
                received: digest,
            });
        }
        Ok(Some((body, digest)))
    }

    /// Streams the blob `descriptor` names into `to`, at most `limit` bytes, hashing as it goes:
    /// fails unless its digest and size are the descriptor's (`to` then holds bytes to throw away).
    pub async fn blob(
        &self,
        descriptor: &Descriptor,
        limit: u64,
        to: &mut impl Write,
    ) -> Result<(), RegistryError> {
        let expected = descriptor.sha256()?;
        if descriptor.size > limit {
            return Err(RegistryError::TooLarge {
                url: descriptor.digest.clone(),
                limit,
            });
        }
        let url = self.url("blobs", &expected.to_string());
        let mut request = self.http.get(&url);
        if let Some(authorization) = self.pull_authorization().await? {
            request = request.header(AUTHORIZATION, authorization);
        }
        let mut response = request.send().await.map_err(RegistryError::request(&url))?;
        if !response.status().is_success() {
            return Err(RegistryError::Status {
                url,
                status: response.status().as_u16(),
            });
        }
        let mut hasher = Sha256::new();
        let mut received = 0u64;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(RegistryError::request(&url))?
        {
            received += chunk.len() as u64;
            if received > descriptor.size {
                return Err(RegistryError::BlobSize {
                    digest: descriptor.digest.clone(),
                    expected: descriptor.size,
                    received,
                });
            }
            hasher.update(&chunk);
            to.write_all(&chunk).map_err(RegistryError::Io)?;
        }
        if received != descriptor.size {
            return Err(RegistryError::BlobSize {
                digest: descriptor.digest.clone(),
                expected: descriptor.size,
                received,
            });
        }
        let received = Sha256Digest::finish(hasher);
        if received != expected {
            return Err(RegistryError::BlobDigest { expected, received });
        }
        Ok(())
    }

    /// The manifests that refer to `digest` (OCI 1.1 referrers API; the `sha256-<hex>` tag where the
    /// registry has no such API); an empty index when there are none.
    pub async fn referrers(
        &self,
        digest: &Sha256Digest,
        limit: u64,
    ) -> Result<Index, RegistryError> {
        let url = self.url("referrers", &digest.to_string());
        let listed = self.get(&url, OCI_INDEX, limit).await?;
        let body = match listed {
            Some((body, headers))
                if headers
                    .get(CONTENT_TYPE)
                    .is_some_and(|t| t.as_bytes().starts_with(OCI_INDEX.as_bytes())) =>
            {
                body
            }
            // No referrers API (a 404, or a page that is not an index): the tag schema.
            _ => match self
                .manifest(&TagOrDigest::Tag(digest.dashed()), limit)
                .await?
            {
                Some((body, _)) => body,
                None => return Ok(Index::default()),
            },
        };
        serde_json::from_slice(&body).map_err(|source| RegistryError::DescriptorJson {
            what: "a referrers index",
            source,
        })
    }

    /// Pushes `blobs` (bytes and their digests) and then `manifest` under `name`; answers the
    /// manifest's digest.
    pub async fn push(
        &self,
        blobs: &[(&[u8], Sha256Digest)],
        manifest: &[u8],
        name: &TagOrDigest,
    ) -> Result<Sha256Digest, RegistryError> {
        let target = Reference::with_tag(
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
            "_".to_owned(),
        );
        self.client
            .auth(&target, &self.auth, RegistryOperation::Push)
            .await
            .map_err(RegistryError::Auth)?;
        for (bytes, digest) in blobs {
            self.client
                .push_blob(&target, bytes.to_vec(), &digest.to_string())
                .await
                .map_err(RegistryError::Push)?;
        }
        let (registry, repository) = (
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
        );
        let target = match name {
            TagOrDigest::Digest(digest) => {
                Reference::with_digest(registry, repository, digest.to_string())
            }
            TagOrDigest::Tag(tag) => Reference::with_tag(registry, repository, tag.clone()),
        };
        self.client
            .push_manifest_raw(
                &target,
                manifest.to_vec(),
                HeaderValue::from_static(OCI_MANIFEST),
            )
            .await
            .map_err(RegistryError::Push)?;
        Ok(Sha256Digest::of(manifest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_for_loopback_registries_only() {
        for loopback in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.0.0.2",
        ] {
            assert!(is_loopback(loopback), "{loopback}");
        }
        for remote in [
            "ghcr.io",
            "registry.test:5000",
            "10.0.0.1:5000",
            "localhost.example",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
        let reference: Reference = "ghcr.io/acme/tool:1".parse().unwrap();
        let options = RegistryOptions {
            plain_http: true,
            ..RegistryOptions::default()
        };
        assert!(matches!(
            Registry::connect(&reference, &options),
            Err(RegistryError::PlainHttp(_))
        ));
    }

    /// A request that fails keeps what failed as its cause (the CLI prints the chain), and says it once.
    #[tokio::test]
    async fn a_registry_nothing_answers_is_an_error_that_keeps_its_cause() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let reference: Reference = format!("127.0.0.1:{port}/acme/tool:1").parse().unwrap();
        let options = RegistryOptions {
            plain_http: true,
            ..RegistryOptions::default()
        };
        let registry = Registry::connect(&reference, &options).unwrap();
        let error = registry
            .manifest(&TagOrDigest::Tag("1".to_owned()), 1024)
            .await
            .unwrap_err();
        let chain: Vec<String> =
            std::iter::successors(Some(&error as &dyn std::error::Error), |e| e.source())
                .map(ToString::to_string)
                .collect();
        assert!(
            matches!(
                error,
                RegistryError::Request { .. } | RegistryError::Auth(_)
            ),
            "{chain:?}"
        );
        let refused = |text: &String| text.to_lowercase().contains("connection refused");
        assert!(chain[1..].iter().any(refused), "{chain:?}");
        assert!(!refused(&chain[0]), "{chain:?}");
    }
}
