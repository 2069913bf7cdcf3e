//! Tools on the network: every request a tool makes is checked against its policy before anything is
//! sent, the host resolves names itself and refuses addresses that are not public, and per-call limits
//! stop a call that exceeds them.
//!
//! Every server here is a hyper server the test starts on 127.0.0.1, and every name the tools request
//! resolves through a `StaticResolver`: nothing here reaches another address. Names mapped to 10.0.0.1
//! or 169.254.169.254 are only ever refused, before any connection.

mod common;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use turngate::network::{NetworkLimits, StaticResolver};
use turngate::{CallError, CallOutcome, Limits, Policy, RunError, Toolbox};

use common::{Workspace, build, call, test_cache};

/// One request the test server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// A body that sends one piece and then never another (a stalled server).
struct Stalled(bool);

impl Body for Stalled {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 {
            Poll::Pending
        } else {
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"first")))))
        }
    }
}

type Reply = Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>;

fn text(status: u16, body: &str) -> Reply {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body.to_owned())).boxed())
        .unwrap()
}

/// The request header `name`'s value as text (empty when absent).
fn header_of(headers: &[(String, String)], name: &str) -> String {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// A body sent `size` bytes per frame.
fn dribbled(text: String, size: usize) -> Reply {
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = text
        .into_bytes()
        .chunks(size)
        .map(|piece| Ok(Frame::data(Bytes::copy_from_slice(piece))))
        .collect();
    Response::new(http_body_util::StreamBody::new(futures_util::stream::iter(frames)).boxed())
}

/// The routes: `/hello`, `/redirect?to=URL`, `/big` (64 KiB), `/stall` (one piece, then nothing),
/// `/silent` (no response head at all), `/echo` (the request's headers and body), `/slow` (answers
/// after 300 ms, noting `/slow answered` among the requests seen), `/control?n=N` (N bytes of a
/// control character), and the echoes of a request header `h`: `/echo-header?h=NAME` (in the response
/// header `x-echo`), `/echo-dribble?h=NAME` (in a body sent three bytes per frame),
/// `/echo-decoded?h=NAME` (a `Basic` credential's decoded `user:password`), `/gzip` (a body marked
/// `content-encoding: gzip`); anything else `ok`.
async fn serve(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Reply, Infallible> {
    let method = request.method().to_string();
    let path = request
        .uri()
        .path_and_query()
        .map_or("/".to_owned(), |p| p.to_string());
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    seen.lock().unwrap().push(Seen {
        method,
        path: path.clone(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let route = path.split('?').next().unwrap_or_default();
    let query = |key: &str| {
        path.split_once('?')
            .and_then(|(_, q)| {
                q.split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            })
            .unwrap_or_default()
            .to_owned()
    };
    Ok(match route {
        "/echo-header" => Response::builder()
            .header("x-echo", header_of(&headers, &query("h")))
            .body(Full::new(Bytes::from_static(b"ok")).boxed())
            .unwrap(),
        "/echo-dribble" => dribbled(
            format!("you sent: {}\n", header_of(&headers, &query("h"))),
            3,
        ),
        "/echo-decoded" => {
            use base64::Engine as _;
            let sent = header_of(&headers, &query("h"));
            let encoded = sent.strip_prefix("Basic ").unwrap_or_default();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap_or_default();
            text(
                200,
                &format!(
                    "{{\"credential\": \"{}\"}}",
                    String::from_utf8_lossy(&decoded)
                ),
            )
        }
        "/gzip" => Response::builder()
            .header("content-encoding", "gzip")
            .body(Full::new(Bytes::from_static(b"\x1f\x8b not really")).boxed())
            .unwrap(),
        "/control" => text(200, &"\u{1}".repeat(query("n").parse().unwrap_or(0))),
        "/hello" => text(200, "hello from the test server"),
        "/big" => text(200, &"x".repeat(64 * 1024)),
        "/stall" => Response::new(Stalled(false).boxed()),
        "/silent" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            text(200, "too late")
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            seen.lock().unwrap().push(Seen {
                method: String::new(),
                path: "/slow answered".into(),
                headers: Vec::new(),
                body: String::new(),
            });
            text(200, "slow")
        }
        "/echo" => {
            let lines: Vec<String> = headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            text(200, &format!("{}\n\n{body}", lines.join("\n")))
        }
        "/redirect" => Response::builder()
            .status(302)
            .header("location", path.split_once("?to=").map_or("", |(_, to)| to))
            .body(Full::new(Bytes::new()).boxed())
            .unwrap(),
        _ => text(200, "ok"),
    })
}

/// A server on 127.0.0.1 that records what it saw, on a runtime of its own.
struct TestServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    fn start() -> TestServer {
        static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        let runtime = RUNTIME.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap()
        });
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = seen.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |r| serve(r, log.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestServer { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests it saw with `method`.
    fn seen_with(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method)
            .collect()
    }

    fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }

    /// `http://NAME:PORT`.
    fn origin(&self, name: &str) -> String {
        format!("http://{name}:{}", self.port)
    }
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The names the tests request: every one leads to 127.0.0.1 except the two that must never be
/// connected to.
fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("allowed.test", &[LOOPBACK])
        .with("other.test", &[LOOPBACK])
        .with("evil.test", &[LOOPBACK])
        .with("named.test", &[LOOPBACK])
        .with("a.corp.test", &[LOOPBACK])
        .with(
            "mapped.corp.test",
            &[IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped())],
        )
        .with("six.corp.test", &[IpAddr::V6(Ipv6Addr::LOCALHOST)])
        .with(
            "private.corp.test",
            &[IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))],
        )
        .with(
            "metadata.corp.test",
            &[IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254))],
        )
}

/// The bundled tools (with `fetch`) and the `net_probe` and `p3_probe` (built for WASI 0.3) test
/// guests, with these network limits.
fn toolbox_with(network: NetworkLimits) -> Toolbox {
    let limits = Limits {
        wall_time: Duration::from_secs(10),
        network,
        ..Limits::default()
    };
    build(
        Toolbox::builder()
            .cache(test_cache())
            .limits(limits)
            .resolver(Arc::new(resolver()))
            .component_file(env!("TURNGATE_TEST_GUEST_NET_PROBE"))
            .unwrap()
            .component_file(env!("TURNGATE_TEST_GUEST_P3_PROBE"))
            .unwrap(),
    )
}

fn toolbox() -> &'static Toolbox {
    static TOOLBOX: OnceLock<Toolbox> = OnceLock::new();
    TOOLBOX.get_or_init(|| toolbox_with(NetworkLimits::default()))
}

fn policy(text: &str) -> Policy {
    Policy::from_toml(text).unwrap()
}

fn run(toolbox: &Toolbox, policy: &Policy, tool: &str, input: Value) -> (CallOutcome, Workspace) {
    let ws = Workspace::new();
    let outcome = call(toolbox, &ws.root, policy, tool, &input.to_string());
    (outcome, ws)
}

fn output(outcome: &CallOutcome) -> Value {
    match &outcome.result {
        Ok(text) => serde_json::from_str(text).unwrap(),
        Err(e) => panic!("the call failed: {e}; {outcome:?}"),
    }
}

/// The `net_probe` results, one per request it was given.
fn probe(toolbox: &Toolbox, policy: &Policy, requests: Value) -> (Vec<Value>, CallOutcome) {
    let (outcome, _ws) = run(toolbox, policy, "net_probe", json!({"requests": requests}));
    let results = output(&outcome)["results"].as_array().unwrap().clone();
    (results, outcome)
}

fn fetch_policy(server: &TestServer) -> Policy {
    policy(&format!(
        "[tools.fetch.network]\nget = [\"{}/**\"]\n[tools.net_probe.network]\nget = [\"{}/**\"]",
        server.origin("allowed.test"),
        server.origin("allowed.test"),
    ))
}

#[test]
fn an_allowed_get_works_end_to_end_and_is_recorded() {
    let server = TestServer::start();
    let url = format!("{}/hello?token=abc", server.origin("allowed.test"));
    let (outcome, _ws) = run(
        toolbox(),
        &fetch_policy(&server),
        "fetch",
        json!({"url": url}),
    );
    let answer = output(&outcome);
    assert_eq!(answer["status"], 200);
    assert_eq!(answer["body"], "hello from the test server");
    assert_eq!(answer["headers"]["content-type"], "text/plain");
    assert_eq!(server.paths(), ["/hello?token=abc"]);
    let host = server.seen()[0]
        .headers
        .iter()
        .find(|(n, _)| n == "host")
        .cloned();
    assert_eq!(host.unwrap().1, format!("allowed.test:{}", server.port));
    let [record] = &outcome.requests[..] else {
        panic!("{:?}", outcome.requests)
    };
    assert_eq!(record.method, "GET");
    assert_eq!(
        record.url,
        format!("{}/hello?token=***", server.origin("allowed.test"))
    );
    assert_eq!(
        record.address.unwrap(),
        (LOOPBACK, server.port).into(),
        "the address connected to"
    );
    assert_eq!(record.status, Some(200));
    assert_eq!(record.bytes_received, 26);
    assert!(
        outcome.to_json()["requests"][0]["url"]
            .as_str()
            .unwrap()
            .ends_with("token=***")
    );
}

#[test]
fn a_declared_url_outside_the_policy_never_starts_the_call() {
    let server = TestServer::start();
    for url in [
        format!("{}/hello", server.origin("other.test")),
        // The path glob, the port and the scheme are each part of the grant.
        format!("http://allowed.test:{}/hello", server.port + 1),
        format!("https://allowed.test:{}/hello", server.port),
        format!("{}/../hello", server.origin("allowed.test")),
    ] {
        let (outcome, _ws) = run(
            toolbox(),
            &fetch_policy(&server),
            "fetch",
            json!({"url": url}),
        );
        match &outcome.result {
            Err(CallError::Gate(e)) => assert_eq!(e.step(), "url", "{url}: {e}"),
            other => panic!("{url}: {other:?}"),
        }
        assert!(!outcome.ran(), "{url}");
    }
    // No policy at all: no network for any tool.
    let url = format!("{}/hello", server.origin("allowed.test"));
    let (outcome, _ws) = run(
        toolbox(),
        &Policy::allow_all(),
        "fetch",
        json!({"url": url}),
    );
    assert!(
        matches!(outcome.result, Err(CallError::Gate(_))),
        "{outcome:?}"
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[test]
fn an_undeclared_request_to_a_disallowed_host_is_refused_in_the_hook() {
    let server = TestServer::start();
    let (results, outcome) = probe(
        toolbox(),
        &fetch_policy(&server),
        json!([
            {"url": format!("{}/one", server.origin("allowed.test"))},
            {"url": format!("{}/two", server.origin("other.test"))},
        ]),
    );
    assert_eq!(results[0]["status"], 200, "{results:?}");
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("HttpRequestDenied"),
        "{results:?}"
    );
    assert_eq!(server.paths(), ["/one"]);
    assert!(
        outcome.requests[1]
            .error
            .as_deref()
            .unwrap()
            .contains("no network rule"),
        "{:?}",
        outcome.requests
    );
    assert_eq!(outcome.requests[1].address, None);
}

#[test]
fn a_method_not_granted_is_refused() {
    let server = TestServer::start();
    let origin = server.origin("allowed.test");
    let policy = policy(&format!(
        "[tools.net_probe.network]\nget = [\"{origin}/**\"]\nwrite = [\"POST {origin}/items\"]"
    ));
    let (results, outcome) = probe(
        toolbox(),
        &policy,
        json!([
            {"url": format!("{origin}/items"), "method": "DELETE"},
            {"url": format!("{origin}/other"), "method": "POST", "body": "x"},
            {"url": format!("{origin}/items"), "method": "PUT", "body": "x"},
            {"url": format!("{origin}/items"), "method": "POST", "body": "sent"},
        ]),
    );
    // The tool sees an error (a denied request with a body it was still writing may see its stream
    // closed instead); the record says why.
    for (denied, record) in results[..3].iter().zip(&outcome.requests) {
        assert!(denied["error"].is_string(), "{results:?}");
        assert!(
            record.error.as_deref().unwrap().contains("no network rule"),
            "{record:?}"
        );
        assert_eq!((record.address, record.bytes_sent), (None, 0), "{record:?}");
    }
    assert_eq!(results[3]["status"], 200, "{results:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].body.as_str()),
        ("POST", "sent")
    );
}

#[test]
fn a_redirect_to_a_disallowed_host_is_refused() {
    let server = TestServer::start();
    let allowed = server.origin("allowed.test");
    let evil = format!("{}/hello", server.origin("evil.test"));
    let url = format!("{allowed}/redirect?to={evil}");
    let (outcome, _ws) = run(
        toolbox(),
        &fetch_policy(&server),
        "fetch",
        json!({"url": url}),
    );
    let Err(CallError::Run(RunError::Tool(error))) = &outcome.result else {
        panic!("{outcome:?}")
    };
    assert!(error.to_string().contains("HttpRequestDenied"), "{error}");
    assert_eq!(server.paths(), [format!("/redirect?to={evil}")]);
    // A redirect within the grant is followed.
    let url = format!("{allowed}/redirect?to={allowed}/hello");
    let (outcome, _ws) = run(
        toolbox(),
        &fetch_policy(&server),
        "fetch",
        json!({"url": url}),
    );
    assert_eq!(output(&outcome)["body"], "hello from the test server");
}

#[test]
fn names_that_resolve_to_non_public_addresses_are_refused_unless_the_rule_names_the_host() {
    // If the address check under test broke, the transport's test guard (set for every process cargo
    // starts, `.cargo/config.toml`) still keeps the connection on loopback.
    assert!(
        std::env::var_os("TURNGATE_TEST_LOOPBACK_ONLY").is_some(),
        "the loopback guard must be on for these tests"
    );
    let server = TestServer::start();
    let port = server.port;
    // A wildcard rule (https only) does not name any host: every non-public address is refused before
    // a connection is made (10.0.0.1 and 169.254.169.254 are never connected to).
    let wildcard = policy(&format!(
        "[tools.net_probe.network]\nget = [\"https://*.corp.test:{port}/**\", \"http://named.test:{port}/**\"]"
    ));
    let names = ["a", "mapped", "six", "private", "metadata"];
    let requests: Vec<Value> = names
        .iter()
        .map(|n| json!({"url": format!("https://{n}.corp.test:{port}/x")}))
        .chain([json!({"url": format!("http://named.test:{port}/named")})])
        .collect();
    let (results, outcome) = probe(toolbox(), &wildcard, json!(requests));
    for (i, name) in names.iter().enumerate() {
        let error = results[i]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("DestinationIpProhibited"),
            "{name}: {results:?}"
        );
        let record = &outcome.requests[i];
        assert_eq!(record.address, None, "{name}");
        assert!(
            record
                .error
                .as_deref()
                .unwrap()
                .contains("no rule names that host"),
            "{record:?}"
        );
    }
    // named.test is named exactly by its rule, so its loopback address is allowed.
    assert_eq!(results[names.len()]["status"], 200, "{results:?}");
    assert_eq!(server.paths(), ["/named"]);
}

#[test]
fn a_response_over_the_byte_limit_and_a_stalled_server_stop_the_call_and_the_host_serves_on() {
    let server = TestServer::start();
    let limits = NetworkLimits {
        max_bytes_received: 16 * 1024,
        between_bytes_timeout: Duration::from_millis(300),
        first_byte_timeout: Duration::from_millis(300),
        max_requests: 3,
        ..NetworkLimits::default()
    };
    let toolbox = toolbox_with(limits);
    let policy = fetch_policy(&server);
    let origin = server.origin("allowed.test");
    let limit_of = |path: &str| {
        let (outcome, _ws) = run(
            &toolbox,
            &policy,
            "fetch",
            json!({"url": format!("{origin}{path}"), "max_bytes": 512 << 10}),
        );
        // Not a speed check: the time in the sandbox (compiling `fetch` into a cold cache is not in
        // it) is below the 10 s wall-time limit, so the network limit stopped the call, not that.
        assert!(
            outcome.duration < Duration::from_secs(10),
            "{path}: {:?}",
            outcome.duration
        );
        match outcome.result {
            Err(CallError::Run(RunError::NetworkLimit(limit))) => limit.to_string(),
            other => panic!("{path}: {other:?}"),
        }
    };
    assert!(limit_of("/big").contains("bytes received"));
    assert!(limit_of("/stall").contains("stalled"));
    assert!(limit_of("/silent").contains("no response"));
    let (_, outcome) = {
        let (outcome, _ws) = run(
            &toolbox,
            &policy,
            "net_probe",
            json!({"requests": [{"url": format!("{origin}/1")}, {"url": format!("{origin}/2")}, {"url": format!("{origin}/3")}, {"url": format!("{origin}/4")}]}),
        );
        ((), outcome)
    };
    assert!(
        matches!(
            &outcome.result,
            Err(CallError::Run(RunError::NetworkLimit(l))) if l.to_string().contains("requests")
        ),
        "{outcome:?}"
    );
    // The host goes on serving.
    let (outcome, _ws) = run(
        &toolbox,
        &policy,
        "fetch",
        json!({"url": format!("{origin}/hello")}),
    );
    assert_eq!(output(&outcome)["status"], 200);
}

#[test]
fn components_built_against_the_old_world_load_and_declare_no_urls() {
    let read_file = toolbox().get("read_file").unwrap();
    assert!(read_file.descriptor().urls.is_empty());
    assert!(
        !read_file
            .imports()
            .iter()
            .any(|i| i.starts_with("wasi:http")),
        "{:?}",
        read_file.imports()
    );
    assert_eq!(toolbox().get("fetch").unwrap().descriptor().urls, ["/url"]);
    assert!(
        toolbox()
            .get("net_probe")
            .unwrap()
            .descriptor()
            .urls
            .is_empty()
    );
}

/// A tool built for WASI 0.3 sends its requests through `wasi:http/client@0.3.0`, and they meet the
/// same checks as 0.2's: a declared URL outside the grant stops the call before it starts, an
/// undeclared one is refused in the hook before any connection, and what was sent is recorded.
#[test]
fn a_wasi_0_3_tool_s_requests_meet_the_same_grant_and_hook_as_0_2_s() {
    let server = TestServer::start();
    let allowed = server.origin("allowed.test");
    let policy = policy(&format!(
        "[tools.p3_probe.network]\nget = [\"{allowed}/**\"]"
    ));
    let p3 = toolbox().get("p3_probe").unwrap();
    assert_eq!(p3.wasi(), Some("0.3"));
    assert_eq!(p3.descriptor().urls, ["/url"]);

    let (outcome, _ws) = run(
        toolbox(),
        &policy,
        "p3_probe",
        json!({"op": "fetch", "url": format!("{allowed}/hello?token=abc")}),
    );
    assert_eq!(
        outcome.result.as_deref().unwrap(),
        "200 hello from the test server"
    );
    let [record] = &outcome.requests[..] else {
        panic!("{:?}", outcome.requests)
    };
    assert_eq!(record.url, format!("{allowed}/hello?token=***"));
    assert_eq!(record.address.unwrap(), (LOOPBACK, server.port).into());
    assert_eq!(record.status, Some(200));

    let other = format!("{}/declared", server.origin("other.test"));
    let (outcome, _ws) = run(
        toolbox(),
        &policy,
        "p3_probe",
        json!({"op": "fetch", "url": other}),
    );
    match &outcome.result {
        Err(CallError::Gate(e)) => assert_eq!(e.step(), "url", "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(!outcome.ran());

    let undeclared = format!("{}/undeclared", server.origin("other.test"));
    let (outcome, _ws) = run(
        toolbox(),
        &policy,
        "p3_probe",
        json!({"op": "probe", "target": undeclared}),
    );
    match &outcome.result {
        Err(CallError::Run(RunError::Tool(e))) => {
            assert!(e.to_string().contains("HttpRequestDenied"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        outcome.requests[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no network rule"),
        "{:?}",
        outcome.requests
    );
    assert_eq!(outcome.requests[0].address, None);
    assert_eq!(server.paths(), ["/hello?token=abc"]);
}

/// Header injection and request smuggling, from a tool of each WASI generation: a header value with a
/// line break, or a header only the host may set (`host`, `transfer-encoding`, `connection`), is refused
/// by the guest's own `fields` before anything is sent; a body longer than the `content-length` the
/// guest declared ends the request, and the request hidden in it never reaches the server.
#[test]
fn header_injection_and_request_smuggling_fail_in_both_generations() {
    let server = TestServer::start();
    let allowed = server.origin("allowed.test");
    let grant = format!("get = [\"{allowed}/**\"]\nwrite = [\"POST {allowed}/items\"]\n");
    let policy = policy(&format!(
        "[tools.net_probe.network]\n{grant}[tools.p3_probe.network]\n{grant}"
    ));
    let p3_error = |input: Value| match run(toolbox(), &policy, "p3_probe", input).0.result {
        Err(CallError::Run(RunError::Tool(e))) => e.to_string(),
        other => panic!("{other:?}"),
    };
    for (name, value) in [
        ("x-evil", "a\r\nx-injected: 1"),
        ("host", "evil.test"),
        ("transfer-encoding", "chunked"),
        ("connection", "upgrade"),
    ] {
        let headers = json!([[name, value]]);
        let (results, _) = probe(
            toolbox(),
            &policy,
            json!([{"url": format!("{allowed}/hello"), "headers": headers}]),
        );
        let error = results[0]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("header `{name}`")),
            "0.2 {name}: {results:?}"
        );
        let error = p3_error(
            json!({"op": "probe", "target": format!("{allowed}/hello"), "headers": headers}),
        );
        assert!(
            error.contains(&format!("header `{name}`")),
            "0.3 {name}: {error}"
        );
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    // The control: a header a tool may set reaches the server from either generation.
    let headers = json!([["x-ok", "1"]]);
    probe(
        toolbox(),
        &policy,
        json!([{"url": format!("{allowed}/hello"), "headers": headers}]),
    );
    let (outcome, _ws) = run(
        toolbox(),
        &policy,
        "p3_probe",
        json!({"op": "probe", "target": format!("{allowed}/hello"), "headers": headers}),
    );
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|s| header_of(&s.headers, "x-ok") == "1"),
        "{seen:?}"
    );

    let smuggled = "x\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: allowed.test\r\n\r\n";
    let (results, _) = probe(
        toolbox(),
        &policy,
        json!([{"url": format!("{allowed}/items"), "method": "POST", "headers": [["content-length", "1"]], "body": smuggled}]),
    );
    assert!(results[0]["error"].is_string(), "0.2: {results:?}");
    p3_error(json!({
        "op": "probe",
        "target": format!("{allowed}/items"),
        "method": "POST",
        "headers": [["content-length", "1"]],
        "body": smuggled,
    }));
    assert!(
        server.paths().iter().all(|path| path != "/smuggled"),
        "{:?}",
        server.paths()
    );
    // Nothing past the declared length reached the server in either request it may have seen.
    let posts = server.seen_with("POST");
    assert!(
        posts.iter().all(|s| s.body.len() <= 1),
        "a body past its content-length arrived: {posts:?}"
    );
    // The control: the same request with its true length arrives whole, from either generation.
    let whole = "name=widget&count=2";
    let length = whole.len().to_string();
    let (results, _) = probe(
        toolbox(),
        &policy,
        json!([{"url": format!("{allowed}/items"), "method": "POST", "headers": [["content-length", length]], "body": whole}]),
    );
    assert!(results[0]["error"].is_null(), "0.2: {results:?}");
    let (outcome, _ws) = run(
        toolbox(),
        &policy,
        "p3_probe",
        json!({
            "op": "probe",
            "target": format!("{allowed}/items"),
            "method": "POST",
            "headers": [["content-length", length]],
            "body": whole,
        }),
    );
    assert!(outcome.result.is_ok(), "0.3: {:?}", outcome.result);
    let arrived: Vec<Seen> = server
        .seen_with("POST")
        .into_iter()
        .filter(|s| s.path == "/items" && s.body == whole)
        .collect();
    assert_eq!(arrived.len(), 2, "{:?}", server.seen_with("POST"));
}

#[test]
fn a_component_importing_sockets_is_still_refused_at_load() {
    let error = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(
            Toolbox::builder()
                .cache(test_cache())
                .without_bundled()
                .component_file(env!("TURNGATE_TEST_GUEST_HOSTILE_NET"))
                .unwrap()
                .build(),
        )
        .unwrap_err();
    assert!(error.to_string().contains("wasi:sockets"), "{error}");
}

/// An Anthropic stream whose one call is `tool` with `input`, for the audit log of a whole turn.
fn one_call_turn(tool: &str, input: &Value) -> turngate::Turn {
    let events = [
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "u1", "name": tool, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    common::streams::decode_whole(
        turngate::Provider::Anthropic,
        Default::default(),
        body.as_bytes(),
    )
}

/// The calls of a turn that may reach the network run one after another: the host cannot tell which
/// remote state a request touches, so a call's requests go only after the calls before it are done.
#[test]
fn the_network_calls_of_a_turn_go_in_the_turn_s_order() {
    let server = TestServer::start();
    let request = |path: &str| json!({"requests": [{"url": format!("{}{path}", server.origin("allowed.test"))}]});
    let body = json!({
        "id": "m", "type": "message", "role": "assistant", "model": "x",
        "content": [
            {"type": "tool_use", "id": "u0", "name": "net_probe", "input": request("/slow")},
            {"type": "tool_use", "id": "u1", "name": "net_probe", "input": request("/hello")},
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    let turn = common::streams::decode_whole(
        turngate::Provider::Anthropic,
        Default::default(),
        body.to_string().as_bytes(),
    );
    let ws = Workspace::new();
    let report = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(turngate::process_turn(
            toolbox(),
            &ws.root,
            &fetch_policy(&server),
            turn,
            Default::default(),
        ));
    assert!(report.all_ok(), "{:?}", report.calls);
    assert_eq!(server.paths(), ["/slow", "/slow answered", "/hello"]);
}

#[test]
fn a_secret_reaches_its_origin_only_and_never_the_tool_the_outcome_or_the_audit_log() {
    let server = TestServer::start();
    let value = "s3cret-token-8d1f0c";
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, format!("{value}\n")).unwrap();
    // Plain http only because the origin is a loopback address (see network/secrets.rs); a name that
    // resolves to the same address is another origin and gets nothing.
    let secret_origin = format!("http://127.0.0.1:{}", server.port);
    let other = server.origin("allowed.test");
    let policy = policy(&format!(
        r#"
        [secrets.api]
        file = "{}"
        origins = ["{secret_origin}"]
        [tools.net_probe]
        env = ["CARGO_PKG_NAME"]
        [tools.net_probe.network]
        get = ["{secret_origin}/**", "{other}/**"]
        "#,
        token_file.display()
    ));
    let input = json!({"requests": [
        {"url": format!("{secret_origin}/hello")},
        {"url": format!("{other}/hello")},
    ]});
    let ws = Workspace::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(turngate::process_turn(
        toolbox(),
        &ws.root,
        &policy,
        one_call_turn("net_probe", &input),
        turngate::TurnOptions {
            audit: true,
            ..Default::default()
        },
    ));
    let call = &report.calls[0];
    assert_eq!(call.status, turngate::CallStatus::Ok, "{call:?}");
    let authorization = |seen: &Seen| {
        seen.headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .map(|(_, v)| v.clone())
    };
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(authorization(&seen[0]).unwrap(), format!("Bearer {value}"));
    assert_eq!(
        authorization(&seen[1]),
        None,
        "another origin: {:?}",
        seen[1]
    );
    assert_eq!(call.requests[0].secrets, ["api"]);
    assert!(call.requests[1].secrets.is_empty());
    // The tool saw its granted variable and nothing else of the environment, and not the secret.
    let (outcome, _ws) = run(toolbox(), &policy, "net_probe", input);
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert_eq!(stdout.trim(), "CARGO_PKG_NAME=turngate", "{stdout}");
    let mut log = Vec::new();
    turngate::audit::write_jsonl(&report.audit, &mut log).unwrap();
    let log = String::from_utf8(log).unwrap();
    assert!(log.contains(r#""secrets":["api"]"#), "{log}");
    for (what, text) in [
        ("the tool's output", format!("{:?}", outcome.result)),
        (
            "the tool's stdout and stderr",
            format!("{stdout}{:?}", outcome.stderr),
        ),
        ("the outcome", outcome.to_json().to_string()),
        ("the outcome's Debug", format!("{outcome:?}")),
        ("the turn report", report.to_json().to_string()),
        ("the audit log", log),
    ] {
        assert!(!text.contains(value), "{what}: {text}");
    }
}

/// A tool with a `secrets` list (what `tools add` writes for a tool from a registry) gets only the
/// secrets it names added to its requests, none with an empty list; a name no `[secrets.NAME]` binds is
/// refused when the policy is read.
#[test]
fn a_tool_with_a_secrets_list_gets_only_the_secrets_it_names() {
    let server = TestServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let with_list = |list: &str| {
        policy(&format!(
            r#"
            [secrets.api]
            env = "PATH"
            origins = ["{origin}"]
            [secrets.other]
            env = "HOME"
            origins = ["{origin}"]
            header = "x-other"
            format = "{{}}"
            [tools.net_probe]
            secrets = {list}
            [tools.net_probe.network]
            get = ["{origin}/**"]
            "#
        ))
    };
    let input = json!({"requests": [{"url": format!("{origin}/hello")}]});
    let added = |seen: &Seen| {
        let mut names: Vec<String> = seen
            .headers
            .iter()
            .filter(|(n, _)| n == "authorization" || n == "x-other")
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    };
    let (outcome, _ws) = run(
        toolbox(),
        &with_list(r#"["other"]"#),
        "net_probe",
        input.clone(),
    );
    assert!(outcome.result.is_ok(), "{outcome:?}");
    assert_eq!(outcome.requests[0].secrets, ["other"]);
    let (outcome, _ws) = run(toolbox(), &with_list("[]"), "net_probe", input.clone());
    assert!(outcome.result.is_ok(), "{outcome:?}");
    assert!(outcome.requests[0].secrets.is_empty(), "{outcome:?}");
    let seen = server.seen();
    assert_eq!(added(&seen[0]), ["x-other"], "{:?}", seen[0]);
    assert_eq!(added(&seen[1]), Vec::<String>::new(), "{:?}", seen[1]);
    let unknown =
        turngate::Policy::from_toml("[tools.net_probe]\nsecrets = [\"missing\"]\n").unwrap_err();
    assert!(unknown.to_string().contains("missing"), "{unknown}");
}

/// A server that echoes a secret back, in a header, a body dribbled across frames, or decoded from a
/// `Basic` credential, hands the tool nothing of it: every occurrence is masked before the tool reads
/// the response, the request's record names the secret as masked, and a compressed answer to a request
/// that carried one is refused (the request asked for none).
#[test]
fn a_secret_a_server_echoes_back_is_masked_before_the_tool_reads_it() {
    let server = TestServer::start();
    let bearer = "s3cret-token-8d1f0c";
    let basic = "YWxpY2U6b3BlbnNlc2FtZQ=="; // base64 of alice:opensesame
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("bearer"), bearer).unwrap();
    std::fs::write(secrets.path().join("basic"), basic).unwrap();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let policy = policy(&format!(
        r#"
        [secrets.api]
        file = "{}"
        origins = ["{origin}"]
        [secrets.proxy]
        file = "{}"
        origins = ["{origin}"]
        header = "x-api-auth"
        format = "Basic {{}}"
        [tools.net_probe.network]
        get = ["{origin}/**"]
        "#,
        secrets.path().join("bearer").display(),
        secrets.path().join("basic").display(),
    ));
    let urls = [
        "/echo",
        "/echo-header?h=authorization",
        "/echo-dribble?h=authorization",
        "/echo-decoded?h=x-api-auth",
        "/echo-header?h=x-api-auth",
        "/hello",
        "/gzip",
    ];
    let requests: Vec<Value> = urls
        .iter()
        .map(|path| json!({"url": format!("{origin}{path}")}))
        .collect();
    let (results, outcome) = probe(toolbox(), &policy, json!(requests));
    let shown = serde_json::to_string(&results).unwrap();
    for secret in [bearer, basic, "alice:opensesame", "opensesame"] {
        assert!(
            !shown.contains(secret),
            "{secret} reached the tool: {shown}"
        );
        assert!(!outcome.to_json().to_string().contains(secret), "{secret}");
    }
    assert!(
        results[0]["body"]
            .as_str()
            .unwrap()
            .contains(&format!("authorization: {}", "*".repeat(7 + bearer.len()))),
        "{}",
        results[0]
    );
    assert!(
        results[1]["headers"]
            .to_string()
            .contains(&"*".repeat(bearer.len())),
        "{}",
        results[1]
    );
    assert!(
        results[2]["body"]
            .as_str()
            .unwrap()
            .starts_with("you sent: ****"),
        "{}",
        results[2]
    );
    assert_eq!(
        results[3]["body"],
        format!("{{\"credential\": \"{}\"}}", "*".repeat(16))
    );
    let masked: Vec<Vec<String>> = outcome.requests.iter().map(|r| r.masked.clone()).collect();
    assert_eq!(masked[0], ["api", "proxy"]);
    assert_eq!(
        masked[1..5],
        [
            vec!["api".to_owned()],
            vec!["api".to_owned()],
            vec!["proxy".to_owned()],
            vec!["proxy".to_owned()]
        ]
    );
    assert!(masked[5].is_empty(), "nothing came back from /hello");
    assert!(results[6]["error"].is_string(), "{}", results[6]);
    assert!(
        outcome.requests[6]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("encoded (gzip)"),
        "{:?}",
        outcome.requests[6]
    );
    for seen in server.seen() {
        assert_eq!(
            header_of(&seen.headers, "accept-encoding"),
            "identity",
            "{seen:?}"
        );
    }
}

/// `fetch` at its largest `max_bytes`, of a body whose every byte JSON escapes into six, still fits
/// the default output limit: the body is cut shorter and marked truncated, not failed.
#[test]
fn fetch_at_its_largest_max_bytes_fits_the_default_output_limit() {
    let server = TestServer::start();
    let max_bytes = toolbox().get("fetch").unwrap().descriptor().input_schema["properties"]["max_bytes"]["maximum"]
        .as_u64()
        .unwrap();
    let url = format!(
        "{}/control?n={}",
        server.origin("allowed.test"),
        2 * max_bytes
    );
    let (outcome, _ws) = run(
        toolbox(),
        &fetch_policy(&server),
        "fetch",
        json!({"url": url, "max_bytes": max_bytes}),
    );
    let output = output(&outcome);
    assert_eq!(output["truncated"], true);
    let body = output["body"].as_str().unwrap();
    assert!(!body.is_empty() && body.chars().all(|c| c == '\u{1}'));
    assert!(outcome.result.as_ref().unwrap().len() <= Limits::default().output_bytes);
}

/// A read rule limited to `HEAD` lets `fetch` start (its declared URL is held to the methods the rule
/// grants), and then only `HEAD` is sent.
#[test]
fn a_head_only_rule_lets_fetch_start_and_only_head_goes_out() {
    let server = TestServer::start();
    let policy = policy(&format!(
        "[tools.fetch.network]\nget = [\"HEAD {}/**\"]",
        server.origin("allowed.test")
    ));
    let url = format!("{}/hello", server.origin("allowed.test"));
    let (head, _ws) = run(
        toolbox(),
        &policy,
        "fetch",
        json!({"url": url, "method": "HEAD"}),
    );
    assert_eq!(output(&head)["status"], 200);
    let (get, _ws) = run(toolbox(), &policy, "fetch", json!({"url": url}));
    let error = get.result.unwrap_err();
    assert_eq!(
        error.stage(),
        "tool",
        "the GET was refused in the hook, not at the gate: {error}"
    );
    assert_eq!(
        server
            .seen()
            .iter()
            .map(|s| s.method.as_str())
            .collect::<Vec<_>>(),
        ["HEAD"]
    );
}

/// Answers every question with `yes` and keeps what it was shown.
struct Recording {
    yes: bool,
    shown: Mutex<Vec<turngate::network::NetworkRequest>>,
}

impl turngate::Approver for Recording {
    fn approve<'a>(
        &'a self,
        request: &'a turngate::ApprovalRequest<'a>,
    ) -> turngate::ApprovalFuture<'a> {
        self.shown.lock().unwrap().extend(request.network.cloned());
        // A held request is shown with the rule that holds it and where its tool came from.
        assert_eq!(request.asked_because, turngate::AskedBecause::NetworkAsks);
        assert!(request.provenance.is_some_and(|p| p.sha256.len() == 64));
        let yes = self.yes;
        Box::pin(async move { yes })
    }
}

/// Calls `tool` with `input` in a fresh workspace, its approvals asked of `approver` (none: every
/// request that needs one is refused).
fn call_asking(
    toolbox: &Toolbox,
    policy: &Policy,
    approver: Option<&Recording>,
    tool: &str,
    input: &str,
) -> CallOutcome {
    let ws = Workspace::new();
    let effects = turngate::Effects::default();
    let mut context = turngate::CallContext::new(&ws.root, policy, &effects);
    context.approver = approver.map(|a| a as &dyn turngate::Approver);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, tool, input))
}

#[test]
fn a_post_under_ask_is_sent_once_on_yes_and_never_on_no_or_without_an_approver() {
    let server = TestServer::start();
    let origin = server.origin("allowed.test");
    let policy = policy(&format!(
        "[tools.net_probe.network]\nget = [\"{origin}/**\"]\nwrite = [\"POST {origin}/items\"]\napproval = \"ask\""
    ));
    let input = json!({"requests": [
        {"url": format!("{origin}/items"), "method": "POST", "body": "the body"},
        {"url": format!("{origin}/read")},
    ]})
    .to_string();
    let run_with = |approver: Option<&Recording>| {
        call_asking(toolbox(), &policy, approver, "net_probe", &input)
    };
    for approver in [
        None,
        Some(Recording {
            yes: false,
            shown: Mutex::default(),
        }),
    ] {
        let outcome = run_with(approver.as_ref());
        let results = output(&outcome)["results"].clone();
        assert!(results[0]["error"].is_string(), "{results}");
        assert_eq!(results[1]["status"], 200, "reads never ask: {results}");
        assert_eq!(outcome.requests[0].approved, Some(false));
        assert_eq!(outcome.requests[0].address, None, "nothing was sent");
        if let Some(approver) = approver {
            assert_eq!(approver.shown.lock().unwrap().len(), 1);
        }
    }
    assert_eq!(server.paths(), ["/read", "/read"], "no POST was sent");
    let approver = Recording {
        yes: true,
        shown: Mutex::default(),
    };
    let outcome = run_with(Some(&approver));
    assert_eq!(output(&outcome)["results"][0]["status"], 200);
    assert_eq!(outcome.requests[0].approved, Some(true));
    let shown = approver.shown.lock().unwrap().clone();
    let [shown] = &shown[..] else {
        panic!("{shown:?}")
    };
    assert_eq!(
        (
            shown.method.as_str(),
            shown.body_bytes,
            shown.body_start.as_deref()
        ),
        ("POST", 8, Some("the body"))
    );
    let posts = server.seen_with("POST");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(
        posts[0].body, "the body",
        "what was approved is what was sent"
    );
}

/// The hook's other duties hold for a tool built for WASI 0.3 as for 0.2's: a secret is added to the
/// requests to its origin only and masked in what comes back; a write under `ask` is sent once on yes
/// and never on no or without an approver; and the byte limit stops the call.
#[test]
fn a_wasi_0_3_tool_s_requests_get_the_same_secrets_approvals_and_limits() {
    let server = TestServer::start();
    let value = "s3cret-token-0d3c9a";
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("token"), value).unwrap();
    let secret_origin = format!("http://127.0.0.1:{}", server.port);
    let other = server.origin("allowed.test");
    let policy = policy(&format!(
        r#"
        [secrets.api]
        file = "{}"
        origins = ["{secret_origin}"]
        [tools.p3_probe.network]
        get = ["{secret_origin}/**", "{other}/**"]
        write = ["POST {other}/items"]
        approval = "ask"
        "#,
        secrets.path().join("token").display()
    ));
    let run_with = |toolbox: &Toolbox, approver: Option<&Recording>, input: Value| {
        call_asking(toolbox, &policy, approver, "p3_probe", &input.to_string())
    };
    let fetch = |url: String| json!({"op": "fetch", "url": url});

    // The secret goes to its origin, and its echo comes back masked; another origin gets nothing.
    let outcome = run_with(toolbox(), None, fetch(format!("{secret_origin}/echo")));
    let echoed = outcome.result.as_deref().unwrap();
    assert!(
        echoed.contains(&format!("authorization: {}", "*".repeat(7 + value.len()))),
        "{echoed}"
    );
    assert!(!outcome.to_json().to_string().contains(value));
    assert_eq!(outcome.requests[0].secrets, ["api"]);
    assert_eq!(outcome.requests[0].masked, ["api"]);
    let outcome = run_with(toolbox(), None, fetch(format!("{other}/echo")));
    assert!(!outcome.result.as_deref().unwrap().contains("authorization"));
    assert!(outcome.requests[0].secrets.is_empty());
    let seen = server.seen();
    assert_eq!(
        header_of(&seen[0].headers, "authorization"),
        format!("Bearer {value}")
    );
    assert_eq!(header_of(&seen[1].headers, "authorization"), "");

    // A POST under `ask`: refused without an approver and on no, sent once on yes.
    let post = json!({"op": "probe", "target": format!("{other}/items"), "method": "POST", "body": "the body"});
    let no = Recording {
        yes: false,
        shown: Mutex::default(),
    };
    for approver in [None, Some(&no)] {
        let outcome = run_with(toolbox(), approver, post.clone());
        assert!(
            matches!(&outcome.result, Err(CallError::Run(RunError::Tool(e))) if e.to_string().contains("HttpRequestDenied")),
            "{outcome:?}"
        );
        assert_eq!(outcome.requests[0].approved, Some(false));
        assert_eq!(outcome.requests[0].address, None, "nothing was sent");
    }
    assert_eq!(no.shown.lock().unwrap().len(), 1);
    let yes = Recording {
        yes: true,
        shown: Mutex::default(),
    };
    let outcome = run_with(toolbox(), Some(&yes), post);
    assert_eq!(outcome.result.as_deref().unwrap(), "200 ok");
    assert_eq!(outcome.requests[0].approved, Some(true));
    let posts = server.seen_with("POST");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].body, "the body");

    // More bytes than the limit: the call stops at the limit.
    let limited = toolbox_with(NetworkLimits {
        max_bytes_received: 16 * 1024,
        ..NetworkLimits::default()
    });
    let outcome = run_with(&limited, None, fetch(format!("{other}/big")));
    match &outcome.result {
        Err(CallError::Run(RunError::NetworkLimit(limit))) => {
            assert!(limit.to_string().contains("bytes received"), "{limit}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn turngate_call_runs_fetch_under_the_policy_file_and_prints_the_requests() {
    let server = TestServer::start();
    let ws = Workspace::new();
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policy.toml");
    // An IP literal: the CLI's system resolver is never asked.
    let origin = format!("http://127.0.0.1:{}", server.port);
    std::fs::write(
        &policy_file,
        format!("[tools.fetch.network]\nget = [\"{origin}/hello\"]\n"),
    )
    .unwrap();
    let turngate = |url: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
            .args(["call", "--root"])
            .arg(ws.root_path())
            .arg("--policy")
            .arg(&policy_file)
            .arg("--cache-dir")
            .arg(common::test_cache_dir())
            .args(["fetch", &json!({"url": url}).to_string()])
            .output()
            .unwrap();
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), printed)
    };
    let (code, printed) = turngate(&format!("{origin}/hello"));
    assert_eq!(code, Some(0), "{printed}");
    assert_eq!(printed["requests"][0]["status"], 200, "{printed}");
    assert_eq!(
        printed["requests"][0]["address"],
        format!("127.0.0.1:{}", server.port)
    );
    let (code, printed) = turngate(&format!("{origin}/other"));
    assert_eq!(code, Some(2), "{printed}");
    assert_eq!(printed["error"]["stage"], "gate", "{printed}");
    assert_eq!(server.paths(), ["/hello"]);
}

/// Says yes after a while, as a person would.
struct Slow(Duration);

impl turngate::Approver for Slow {
    fn approve<'a>(&'a self, _: &'a turngate::ApprovalRequest<'a>) -> turngate::ApprovalFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            true
        })
    }
}

#[test]
fn waiting_for_the_approver_does_not_count_against_the_wall_time() {
    let server = TestServer::start();
    let origin = server.origin("allowed.test");
    let toolbox = build(
        Toolbox::builder()
            .cache(test_cache())
            .limits(Limits {
                wall_time: Duration::from_millis(1000),
                ..Limits::default()
            })
            .resolver(Arc::new(resolver()))
            .component_file(env!("TURNGATE_TEST_GUEST_NET_PROBE"))
            .unwrap(),
    );
    let policy = policy(&format!(
        "[tools.net_probe.network]\nwrite = [\"POST {origin}/items\"]\napproval = \"ask\""
    ));
    let input =
        json!({"requests": [{"url": format!("{origin}/items"), "method": "POST", "body": "b"}]})
            .to_string();
    let ws = Workspace::new();
    let effects = turngate::Effects::default();
    let slow = Slow(Duration::from_millis(1500));
    let mut context = turngate::CallContext::new(&ws.root, &policy, &effects);
    context.approver = Some(&slow);
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox.call_in(&mut context, "net_probe", &input));
    assert_eq!(output(&outcome)["results"][0]["status"], 200, "{outcome:?}");
    assert_eq!(server.paths(), ["/items"]);
}
