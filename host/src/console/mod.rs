//! `turngate console`: a local review page for one root, served over HTTP to a browser.
//!
//! It shows the questions waiting for the user in the root (recorded by `--approve-in console`:
//! each call with its input, paths, diff or network request, to approve or deny alone or a turn's at
//! once), the root's journal as a timeline (newest first, paged, each call with the paths it
//! changed, its diff where the journal still holds both sides, and an undo button that is
//! [`Journal::undo`], as `turngate undo` is), and an audit log, filterable by tool, status and time.
//!
//! The modules, one job each:
//!
//! * [`approvals`]: the waiting questions and their answers, bound to what was shown by its digest;
//! * [`guard`]: who may use it (Host and Origin against DNS rebinding, the start token, the session
//!   cookie, CSRF) and the security headers of every response;
//! * [`timeline`]: the journal's pages, a call's diffs, and undo;
//! * [`audit_log`]: the audit log's records, filtered and paged;
//! * [`tools`]: the tools loaded, with where each came from (its digest, and for a tool from a
//!   registry its source, manifest, signer and the grants the user accepted);
//! * [`assets`]: the page, its script and its style, compiled into the binary.
//!
//! The page renders everything it shows from the JSON API with `textContent` (never as markup), so a
//! file name or content holding markup shows as text. Start it with [`Console::bind`], print
//! [`Console::url`], then [`Console::serve`].

pub mod approvals;
pub mod assets;
pub mod audit_log;
pub mod diff_pages;
pub mod guard;
pub mod timeline;
pub mod tools;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::effects::journal::{Journal, Retention};
use crate::root::Root;
use guard::{Admitted, Guard};

/// The body of the console's responses.
pub type Body = Full<Bytes>;

/// Largest request body accepted (an undo request is a few bytes).
pub const MAX_REQUEST_BYTES: usize = 16 << 10;

/// What a console serves.
#[derive(Debug)]
pub struct ConsoleOptions {
    /// The root whose journal it shows and undoes in.
    pub root: Root,
    /// The audit log (JSON Lines, as `run --log` writes it), if any.
    pub audit_log: Option<PathBuf>,
    /// The token every request must carry (`None`: a random one, 32 bytes as hex).
    pub token: Option<String>,
    /// The tools to list (`None`: the Tools view says none were loaded).
    pub tools: Option<crate::Toolbox>,
    /// A worker fleet's published questions, listed and answered beside the root's (`None`: the
    /// root's alone).
    pub fleet: Option<crate::worker::approvals::FleetApprovals>,
}

/// What the request handlers share.
pub(crate) struct State {
    root: Root,
    audit_log: Option<PathBuf>,
    /// The root's journal, opened on the first request that finds one.
    journal: Mutex<Option<Journal>>,
    tools: Option<crate::Toolbox>,
    fleet: Option<crate::worker::approvals::FleetApprovals>,
    guard: Guard,
}

impl State {
    /// Runs `f` on the root's journal (`None` when no call was ever applied there).
    fn with_journal<T>(
        &self,
        f: impl FnOnce(Option<&mut Journal>) -> T,
    ) -> Result<T, crate::EffectError> {
        let mut journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        if journal.is_none() {
            *journal = Journal::open_existing(&self.root, Retention::default())?;
        }
        Ok(f(journal.as_mut()))
    }
}

/// A console bound to its address, not yet serving.
pub struct Console {
    listener: TcpListener,
    addr: SocketAddr,
    token: String,
    state: Arc<State>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").field("addr", &self.addr).finish()
    }
}

impl Console {
    /// Binds `addr` (port 0: any free port).
    pub async fn bind(addr: SocketAddr, options: ConsoleOptions) -> std::io::Result<Console> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let token = options
            .token
            .unwrap_or_else(|| crate::http_checks::random_hex(32));
        let state = Arc::new(State {
            root: options.root,
            audit_log: options.audit_log,
            journal: Mutex::new(None),
            tools: options.tools,
            fleet: options.fleet,
            guard: Guard::new(addr, &token),
        });
        Ok(Console {
            listener,
            addr,
            token,
            state,
        })
    }

    /// The address it is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address to open, with the token (`http://127.0.0.1:PORT/?token=...`).
    pub fn url(&self) -> String {
        let host = match self.addr {
            SocketAddr::V4(v4) => v4.ip().to_string(),
            SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        };
        format!("http://{host}:{}/?token={}", self.addr.port(), self.token)
    }

    /// Serves until the process ends (or the future is dropped).
    pub async fn serve(self) -> std::io::Result<()> {
        loop {
            let (stream, _) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let state = Arc::clone(&self.state);
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let state = Arc::clone(&state);
                async move {
                    let mut response = handle(state, request).await;
                    guard::secure(&mut response);
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = connection {
                    tracing::debug!("console connection: {e}");
                }
            });
        }
    }
}

/// One request: the guard first, then the route.
async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<Body> {
    let session = match state.guard.admit(&request) {
        Admitted::As(session) => session,
        Admitted::Answer(answer) => return answer,
    };
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return guard::refusal(StatusCode::PAYLOAD_TOO_LARGE, "size", "request too large");
        }
    };
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    if let Some(asset) = assets::find(&path) {
        if parts.method != Method::GET && parts.method != Method::HEAD {
            return not_found();
        }
        let mut response = Response::new(body_of(asset.content.as_bytes().to_vec()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        return response;
    }
    let method = parts.method.clone();
    let runtime = tokio::runtime::Handle::current();
    // The journal and the audit log are files: read them off the async threads (a fleet's questions
    // are asked of NATS from there too, on the runtime).
    tokio::task::spawn_blocking(move || match (method, path.as_str()) {
        (Method::GET, "/api/session") => json(
            StatusCode::OK,
            &serde_json::json!({
                "csrf": state.guard.csrf(session.as_deref()),
                "root": state.root.path().display().to_string(),
                "audit_log": state.audit_log.as_ref().map(|p| p.display().to_string()),
            }),
        ),
        (Method::GET, "/api/approvals") => runtime.block_on(approvals::waiting(&state)),
        (Method::POST, "/api/approvals") => runtime.block_on(approvals::answer(&state, &body)),
        (Method::GET, "/api/approvals/diff") => {
            runtime.block_on(approvals::diff_page(&state, &query))
        }
        (Method::GET, "/api/journal") => timeline::page(&state, &query),
        (Method::GET, "/api/diff") => timeline::diff(&state, &query),
        (Method::POST, "/api/undo") => timeline::undo(&state, &body),
        (Method::GET, "/api/audit") => audit_log::page(&state, &query),
        (Method::GET, "/api/tools") => tools::listing(&state),
        _ => not_found(),
    })
    .await
    .unwrap_or_else(|_| {
        json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &serde_json::json!({"error": "the request failed"}),
        )
    })
}

/// A response body of `bytes`.
pub(crate) fn body_of(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
}

/// A JSON response. `<`, `>` and `&` (which JSON has only inside strings) are written as `\u003c`,
/// `\u003e` and `\u0026`: a file name holding markup never appears as markup, even in a response
/// read as something other than JSON.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let text = value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut response = Response::new(body_of(text.into_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn not_found() -> Response<Body> {
    json(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"error": "not found"}),
    )
}

/// The value of `name` in a query string, percent-decoded.
pub(crate) fn query_value(query: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty())
}
