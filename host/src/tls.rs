//! The host's TLS client: rustls on aws-lc-rs (the one crypto provider of the host, which
//! sigstore-verify's verification also runs on) with the webpki roots, configured once per process for
//! every client that speaks TLS: the network hook's connections, the model providers' and the
//! registries' HTTP clients.

use std::sync::{Arc, OnceLock};

/// The crypto provider every TLS client of the host uses.
pub(crate) fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// The client configuration: the provider above and the webpki roots (Mozilla's set, built in; not
/// the system's, which would be read from disk in every process).
pub(crate) fn client_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
                .with_safe_default_protocol_versions()
                .expect("aws-lc-rs supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// A reqwest client builder speaking TLS with [`client_config`].
pub(crate) fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_backend_preconfigured(client_config().as_ref().clone())
}

#[cfg(test)]
mod tests {
    /// reqwest takes the configuration (it refuses one of another rustls as an unknown backend).
    #[test]
    fn reqwest_takes_the_host_s_tls_configuration() {
        super::http_client().build().expect("a client");
    }
}
