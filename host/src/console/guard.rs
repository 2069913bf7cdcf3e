//! Who may use the console: every request is checked here before anything else sees it.
//!
//! In this order: the `Host` header must name the bound address (or `localhost` on its port when
//! bound to loopback), so a page on a rebinding name cannot reach it; an `Origin` header, when sent,
//! must be the console's own; the request must carry the start token (a `?token=` query on the first
//! visit, which trades it for a session cookie and a redirect to the page without it; then the
//! `HttpOnly; SameSite=Strict` cookie; or `Authorization: Bearer <token>` for API clients); and a
//! state-changing request (any method but GET and HEAD) must also carry a same-origin `Origin` and
//! the session's CSRF token in `X-CSRF-Token`. Each refusal says which check failed. Every response
//! gets the security headers ([`secure`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use sha2::{Digest, Sha256};

use super::Body;
use crate::http_checks::{SecretDigest, bearer, random_hex, split_host};

/// The header a state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The Content-Security-Policy of every response: nothing but the console's own script, style and API.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Most sessions kept at once (each first visit with the token makes one); the oldest go first.
const MAX_SESSIONS: usize = 64;

/// The checks and the sessions they admitted.
pub(super) struct Guard {
    token: SecretDigest,
    /// `Host` values accepted (lowercase `name:port`).
    hosts: Vec<String>,
    /// `Origin` values accepted (`http://name:port`).
    origins: Vec<String>,
    /// The session cookie's name (per port: cookies do not tell ports apart).
    cookie: String,
    /// Keys the CSRF tokens (a token is SHA-256 of this and the session).
    csrf_key: String,
    sessions: Mutex<VecDeque<String>>,
}

/// Who a request was admitted as.
pub(super) enum Admitted {
    /// A session (its cookie value), or an API client with the bearer token (`None`).
    As(Option<String>),
    /// Refused or redirected: answer this.
    Answer(Response<Body>),
}

impl Guard {
    /// The checks of a console bound to `addr` whose start token is `token`.
    pub(super) fn new(addr: SocketAddr, token: &str) -> Guard {
        let port = addr.port();
        let ip = match addr {
            SocketAddr::V4(v4) => v4.ip().to_string(),
            SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        };
        let mut names = vec![ip];
        if addr.ip().is_loopback() {
            names.push("localhost".into());
        }
        Guard {
            token: SecretDigest::of(token),
            hosts: names.iter().map(|name| format!("{name}:{port}")).collect(),
            origins: names
                .iter()
                .map(|name| format!("http://{name}:{port}"))
                .collect(),
            cookie: format!("turngate_console_{port}"),
            csrf_key: random_hex(32),
            sessions: Mutex::new(VecDeque::new()),
        }
    }

    /// The CSRF token of a session (`None`: the bearer token's).
    pub(super) fn csrf(&self, session: Option<&str>) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.csrf_key.as_bytes());
        hasher.update(session.unwrap_or("bearer:").as_bytes());
        hex::encode(hasher.finalize())
    }

    /// Checks `request`; see the module docs.
    pub(super) fn admit<B>(&self, request: &Request<B>) -> Admitted {
        let headers = request.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            let (name, _) = split_host(host);
            return Admitted::Answer(refusal(
                StatusCode::FORBIDDEN,
                "host",
                &format!(
                    "the Host header `{name}` is not this console's address (DNS rebinding?): open {}",
                    self.origins[0]
                ),
            ));
        }
        let origin = headers.get(header::ORIGIN).map(|value| value.to_str());
        let same_origin = match origin {
            None => false,
            Some(Ok(origin)) if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) => true,
            Some(_) => {
                return Admitted::Answer(refusal(
                    StatusCode::FORBIDDEN,
                    "origin",
                    "the request's Origin is not this console: a page elsewhere cannot use it",
                ));
            }
        };
        let session = match self.authenticate(request) {
            Ok(session) => session,
            Err(answer) => return Admitted::Answer(*answer),
        };
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            if !same_origin {
                return Admitted::Answer(refusal(
                    StatusCode::FORBIDDEN,
                    "origin",
                    "a request that changes something must carry this console's Origin header",
                ));
            }
            let given = headers
                .get(CSRF_HEADER)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default();
            if given.is_empty() || !SecretDigest::of(&self.csrf(session.as_deref())).matches(given)
            {
                return Admitted::Answer(refusal(
                    StatusCode::FORBIDDEN,
                    "csrf",
                    "a request that changes something must carry the session's CSRF token in \
                     X-CSRF-Token (reload the page)",
                ));
            }
        }
        Admitted::As(session)
    }

    /// The session (or bearer client) the request is authenticated as, or the answer: a redirect that
    /// sets the cookie for a first visit with the token, a 401 without it.
    fn authenticate<B>(&self, request: &Request<B>) -> Result<Option<String>, Box<Response<Body>>> {
        if let Some(given) = bearer(request) {
            if self.token.matches(given) {
                return Ok(None);
            }
            return Err(Box::new(refusal(
                StatusCode::UNAUTHORIZED,
                "token",
                "the bearer token is not this console's",
            )));
        }
        if let Some(session) = self.session_cookie(request) {
            return Ok(Some(session));
        }
        let query = request.uri().query().unwrap_or_default();
        let token = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="));
        if let Some(token) = token
            && self.token.matches(token)
            && *request.method() == Method::GET
        {
            let session = random_hex(32);
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            if sessions.len() >= MAX_SESSIONS {
                sessions.pop_front();
            }
            sessions.push_back(session.clone());
            drop(sessions);
            // The token leaves the address bar (and the history) at once; always to the page, so
            // a crafted path (`//elsewhere`) cannot make this a redirect away.
            let mut answer = Response::new(super::body_of(Vec::new()));
            *answer.status_mut() = StatusCode::SEE_OTHER;
            let headers = answer.headers_mut();
            headers.insert(header::LOCATION, HeaderValue::from_static("/"));
            let cookie = format!(
                "{}={session}; Path=/; HttpOnly; SameSite=Strict",
                self.cookie
            );
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                headers.insert(header::SET_COOKIE, cookie);
            }
            return Err(Box::new(answer));
        }
        Err(Box::new(refusal(
            StatusCode::UNAUTHORIZED,
            "token",
            "this console needs its token: open the URL turngate console printed (with ?token=), \
             or send Authorization: Bearer <token>",
        )))
    }

    /// The request's session cookie, if it names a live session.
    fn session_cookie<B>(&self, request: &Request<B>) -> Option<String> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value)
            .find(|value| {
                sessions
                    .iter()
                    .any(|session| SecretDigest::of(session).matches(value))
            })
            .map(str::to_owned)
    }
}

/// A refusal: `{"error": message, "check": which}` with `status`.
pub(super) fn refusal(status: StatusCode, check: &str, message: &str) -> Response<Body> {
    super::json(
        status,
        &serde_json::json!({"error": message, "check": check}),
    )
}

/// Adds the headers every response carries: the Content-Security-Policy, no sniffing, no referrer,
/// no framing, no caching.
pub(super) fn secure(response: &mut Response<Body>) {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}
