//! Streamable HTTP: the MCP endpoint at `/mcp`, with the checks the transport's spec asks of servers.
//!
//! rmcp's `StreamableHttpService` speaks the transport (sessions for clients before 2026-07-28,
//! stateless requests after) and validates `Host` (DNS rebinding: only the allowed hosts, loopback
//! names by default) and `Origin` (refused unless it is the server's own, a loopback name on its
//! port, or explicitly allowed; requests without one, from non-browser clients, pass). In front of it,
//! this module answers other paths with 404 and, when a bearer token is set, every request without
//! `Authorization: Bearer <token>` with 401. A POST body larger than
//! [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES) gets 413, and one that [`inbound`](super::inbound)
//! rejects gets 400 with the JSON-RPC error it would get over stdio.
//!
//! The 401 is the one the MCP authorization spec describes, so that clients that speak OAuth (VS
//! Code, Claude Code) tell their user what is wrong instead of failing their discovery:
//! `WWW-Authenticate: Bearer resource_metadata="<origin>/.well-known/oauth-protected-resource/mcp",
//! error="invalid_token", error_description="..."`, an OAuth error body, and at that address the
//! protected resource metadata (RFC 9728) naming no authorization server: the token is given to the
//! client by its user, not obtained through OAuth. The authorization server metadata addresses
//! answer 404 with an OAuth error body saying the same.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tower_service::Service as _;

use super::inbound::{Checked, check};
use super::{MAX_MESSAGE_BYTES, McpServer};
use crate::http_checks::{SecretDigest, bearer, split_host};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// Where the protected resource metadata of [`ENDPOINT`] is (RFC 9728, section 3.1: the well-known
/// name inserted before the resource's path).
pub const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource/mcp";

/// What a client is told when its request has no valid token (an RFC 6750 `error_description`: no
/// quote or backslash).
const TOKEN_REQUIRED: &str = "this MCP server requires a bearer token: configure the client to send \
     the header Authorization: Bearer <token>, the token being the content of the file given to \
     turngate mcp --token-file (the server offers no OAuth sign-in)";

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
    server.prepare_in_background();
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
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = options.bearer_token.as_deref().map(SecretDigest::of);
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
        let hosts = hosts.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let mut mcp = mcp.clone();
            let origin = origin_of(&request, &hosts, port);
            async move {
                let path = request.uri().path();
                if token.is_some() && path.starts_with("/.well-known/") {
                    return Ok::<_, Infallible>(well_known(path, &origin));
                }
                if path != ENDPOINT {
                    return Ok(plain(StatusCode::NOT_FOUND, "not found: use /mcp"));
                }
                if let Some(expected) = token
                    && !bearer(&request).is_some_and(|given| expected.matches(given))
                {
                    return Ok(unauthorized(&origin));
                }
                if request.method() != hyper::Method::POST {
                    return mcp.call(request).await;
                }
                // A message is checked as over stdio, so both transports answer bad input alike.
                let (parts, body) = request.into_parts();
                let body = match Limited::new(body, MAX_MESSAGE_BYTES).collect().await {
                    Ok(body) => body.to_bytes(),
                    Err(e) if e.is::<LengthLimitError>() => {
                        return Ok(plain(StatusCode::PAYLOAD_TOO_LARGE, "message too large"));
                    }
                    Err(_) => return Ok(plain(StatusCode::BAD_REQUEST, "unreadable body")),
                };
                if let Checked::Rejected(rejected) = check::<ClientJsonRpcMessage>(&body) {
                    return Ok(json_response(StatusCode::BAD_REQUEST, &rejected.to_json()));
                }
                mcp.call(Request::from_parts(parts, Full::new(body))).await
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

/// The scheme, host and port the client reached the server at: its `Host` when that is one of the
/// accepted hosts, else the loopback address on the server's port.
fn origin_of<B>(request: &Request<B>, hosts: &[String], port: u16) -> String {
    let host = request
        .headers()
        .get(hyper::header::HOST)
        .and_then(|value| value.to_str().ok())
        .filter(|host| {
            let (name, _) = split_host(host);
            hosts
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(name))
        });
    match host {
        Some(host) => format!("http://{host}"),
        None => format!("http://127.0.0.1:{port}"),
    }
}

/// The 401 for a request without the token.
fn unauthorized(origin: &str) -> Response<BoxBody<Bytes, Infallible>> {
    let challenge = format!(
        "Bearer resource_metadata=\"{origin}{RESOURCE_METADATA}\", error=\"invalid_token\", \
         error_description=\"{TOKEN_REQUIRED}\""
    );
    let body = serde_json::json!({"error": "invalid_token", "error_description": TOKEN_REQUIRED});
    let mut response = json_response(StatusCode::UNAUTHORIZED, &body);
    if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A `/.well-known/` address: the protected resource metadata, or a 404 that says why there is no
/// authorization server.
fn well_known(path: &str, origin: &str) -> Response<BoxBody<Bytes, Infallible>> {
    if path == RESOURCE_METADATA || path == "/.well-known/oauth-protected-resource" {
        let metadata = serde_json::json!({
            "resource": format!("{origin}{ENDPOINT}"),
            "authorization_servers": [],
            "bearer_methods_supported": ["header"],
            "resource_name": "turngate mcp",
        });
        return json_response(StatusCode::OK, &metadata);
    }
    let body = serde_json::json!({"error": "invalid_request", "error_description": TOKEN_REQUIRED});
    json_response(StatusCode::NOT_FOUND, &body)
}

fn json_response(
    status: StatusCode,
    body: &serde_json::Value,
) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
