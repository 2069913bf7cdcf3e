//! Streamable HTTP: the MCP endpoint at `/mcp`, with the checks the transport's spec asks of servers.
//!
//! rmcp's `StreamableHttpService` speaks the transport (sessions for clients before 2026-07-28,
//! stateless requests after) and validates `Host` (DNS rebinding: only the allowed hosts, loopback
//! names by default) and `Origin` (refused unless it is the server's own, a loopback name on its
//! port, or explicitly allowed; requests without one, from non-browser clients, pass). In front of it, this module answers other paths with
//! 404 and, when a bearer token is set, every request without `Authorization: Bearer <token>` with
//! 401. Request bodies are bounded by [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tower_service::Service as _;

use super::{MAX_MESSAGE_BYTES, McpServer};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// The HTTP server's checks.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Requests must carry `Authorization: Bearer <token>` (`None`: no token).
    pub bearer_token: Option<String>,
    /// `Host` values accepted besides the loopback names (`localhost`, `127.0.0.1`, `::1`).
    pub extra_hosts: Vec<String>,
    /// `Origin` values accepted besides the server's own (scheme, host and port, as
    /// `http://localhost:3000`); any other `Origin` header is refused.
    pub allowed_origins: Vec<String>,
}

/// Serves MCP over Streamable HTTP on `listener` until the process ends.
pub async fn serve(
    server: McpServer,
    listener: TcpListener,
    options: HttpOptions,
) -> std::io::Result<()> {
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(options.extra_hosts.iter().cloned());
    // A page served by this very server (a loopback name on its own port) is its own origin; a
    // rebinding page's Origin names the attacker's host, and other local ports stay refused.
    let port = listener.local_addr()?.port();
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect();
    origins.extend(options.allowed_origins.iter().cloned());
    // The list is never empty, so rmcp checks every Origin header against it.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = options
        .bearer_token
        .as_deref()
        .map(|t| Sha256::digest(t.as_bytes()));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // A connection that failed before it was accepted (reset, out of descriptors for a
            // moment) must not stop the server.
            Err(e) => {
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let mcp = mcp.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let mut mcp = mcp.clone();
            async move {
                if request.uri().path() != ENDPOINT {
                    return Ok::<_, Infallible>(plain(
                        StatusCode::NOT_FOUND,
                        "not found: use /mcp",
                    ));
                }
                if let Some(expected) = token
                    && !bearer_matches(&request, &expected)
                {
                    let mut response =
                        plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
                    response.headers_mut().insert(
                        hyper::header::WWW_AUTHENTICATE,
                        hyper::header::HeaderValue::from_static("Bearer"),
                    );
                    return Ok(response);
                }
                mcp.call(request).await
            }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = connection {
                tracing::debug!("HTTP connection: {e}");
            }
        });
    }
}

/// Whether the request carries the token (compared as digests, so the time taken says nothing about
/// how much of it matched).
fn bearer_matches<B>(request: &Request<B>, expected: &[u8]) -> bool {
    request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|given| Sha256::digest(given.trim().as_bytes()).as_slice() == expected)
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
