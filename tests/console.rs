//! `turngate console`: the review page of one root, over HTTP. Calls are made and journaled through the
//! library (as in `tests/least_authority.rs`); the console runs in this process (and once as the
//! binary), and the requests are written by hand, so every header is the test's choice: the timeline,
//! the diffs, undo and its refusal, the audit filter, and each of the checks that make it safe to open
//! (the token, Host, Origin, CSRF, the security headers, escaping).

mod common;
mod worker_support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use common::streams::tool_use_turn_of;
use common::{Workspace, bundled};
use serde_json::{Value, json};
use turngate::audit::{AuditRecord, write_jsonl};
use turngate::console::guard::CONTENT_SECURITY_POLICY;
use turngate::console::{Console, ConsoleOptions};
use turngate::{
    CallContext, Cancel, DurableApprover, Effects, PendingApprovals, Policy, Root, TurnHooks,
    TurnOptions, call_audited, process_turn_with,
};

/// A console serving a workspace, with its audit log.
struct Served {
    ws: Workspace,
    log: PathBuf,
    addr: SocketAddr,
    token: String,
    runtime: tokio::runtime::Runtime,
}

/// An answer as it came over the wire.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// Which check refused the request (`host`, `origin`, `token`, `csrf`).
    fn check(&self) -> String {
        self.json()["check"].as_str().unwrap_or_default().to_owned()
    }
}

impl Served {
    fn start() -> Served {
        Served::start_with(|_| None)
    }

    /// A console that also lists the questions `fleet` opens (on the console's runtime).
    fn start_with(
        fleet: impl FnOnce(
            &tokio::runtime::Runtime,
        ) -> Option<turngate::worker::approvals::FleetApprovals>,
    ) -> Served {
        let ws = Workspace::new();
        let log = ws.dir.path().join("audit.jsonl");
        std::fs::write(&log, "").unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let fleet = fleet(&runtime);
        let options = ConsoleOptions {
            root: Root::open(ws.root_path()).unwrap(),
            audit_log: Some(log.clone()),
            token: None,
            tools: Some(common::build(
                turngate::Toolbox::builder()
                    .cache(common::test_cache())
                    .component_file(env!("TURNGATE_TEST_GUEST_NOOP"))
                    .unwrap(),
            )),
            fleet,
        };
        let console = runtime
            .block_on(Console::bind("127.0.0.1:0".parse().unwrap(), options))
            .unwrap();
        let addr = console.local_addr();
        let url = console.url();
        let token = url.split_once("?token=").unwrap().1.to_owned();
        assert!(token.len() >= 32, "a long random token: {url}");
        runtime.spawn(console.serve());
        Served {
            ws,
            log,
            addr,
            token,
            runtime,
        }
    }

    /// `127.0.0.1:PORT`, the Host a browser sends.
    fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `http://127.0.0.1:PORT`.
    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Runs one call through the library (journaled), appending its audit record to the log.
    fn apply(&self, turn: &str, call_id: &str, tool: &str, input: Value) -> Value {
        let effects = Effects::default();
        let policy = Policy::allow_all();
        let mut context = CallContext::new(&self.ws.root, &policy, &effects);
        context.call_id = Some(call_id.to_owned());
        context.turn = Some(turn.to_owned());
        let (outcome, record) = self.runtime.block_on(call_audited(
            bundled(),
            &mut context,
            tool,
            &input.to_string(),
        ));
        let mut log = std::fs::read(&self.log).unwrap();
        write_jsonl(&[AuditRecord::Call(record)], &mut log).unwrap();
        std::fs::write(&self.log, log).unwrap();
        json!({"ok": outcome.result.is_ok(), "changes": outcome.changes.len()})
    }

    /// Sends a request written by hand: `headers` are all it carries besides the body's length.
    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        Reply {
            status: status.parse().unwrap(),
            headers: lines
                .filter_map(|line| line.split_once(':'))
                .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                .collect(),
            body: body.to_owned(),
        }
    }

    /// A first visit with the token: the session cookie (`name=value`) it sets.
    fn login(&self) -> String {
        let reply = self.raw(
            "GET",
            &format!("/?token={}", self.token),
            &[("Host", &self.host())],
            "",
        );
        assert_eq!(reply.status, 303, "{reply:?}");
        assert_eq!(
            reply.header("location"),
            Some("/"),
            "the token leaves the URL"
        );
        let cookie = reply.header("set-cookie").expect("a session cookie");
        assert!(cookie.contains("HttpOnly"), "{cookie}");
        assert!(cookie.contains("SameSite=Strict"), "{cookie}");
        cookie.split(';').next().unwrap().to_owned()
    }

    /// A GET as the page makes it: the session cookie and the console's own Host.
    fn get(&self, cookie: &str, path: &str) -> Reply {
        self.raw(
            "GET",
            path,
            &[("Host", &self.host()), ("Cookie", cookie)],
            "",
        )
    }

    /// The session's CSRF token.
    fn csrf(&self, cookie: &str) -> String {
        let reply = self.get(cookie, "/api/session");
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["csrf"].as_str().unwrap().to_owned()
    }

    /// A POST to undo as the page makes it: cookie, Host, Origin and CSRF token.
    fn undo(&self, cookie: &str, target: Value) -> Reply {
        let csrf = self.csrf(cookie);
        self.raw(
            "POST",
            "/api/undo",
            &[
                ("Host", &self.host()),
                ("Origin", &self.origin()),
                ("Cookie", cookie),
                ("X-CSRF-Token", &csrf),
                ("Content-Type", "application/json"),
            ],
            &target.to_string(),
        )
    }

    /// The timeline's first page (or the page of `query`).
    fn journal(&self, cookie: &str, query: &str) -> Value {
        let reply = self.get(cookie, &format!("/api/journal{query}"));
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()
    }
}

/// The sequence numbers of the calls on a timeline page.
fn seqs(page: &Value) -> Vec<u64> {
    page["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seq"].as_u64().unwrap())
        .collect()
}

/// Three calls in two turns: `t1` writes a.txt and b.txt, `t2` edits a.txt.
fn three_calls(served: &Served) {
    served.ws.write("a.txt", "old line\nsecond\n");
    let write = json!({"path": "a.txt", "content": "first\nsecond\n"});
    assert_eq!(served.apply("t1", "c1", "write_file", write)["ok"], true);
    let write = json!({"path": "b.txt", "content": "b\n"});
    assert_eq!(served.apply("t1", "c2", "write_file", write)["ok"], true);
    let edit = json!({"path": "a.txt", "old_string": "first", "new_string": "changed"});
    assert_eq!(served.apply("t2", "c3", "edit_file", edit)["ok"], true);
}

#[test]
fn the_timeline_lists_the_calls_newest_first_with_their_turns_and_paths() {
    let served = Served::start();
    let cookie = served.login();
    assert_eq!(served.journal(&cookie, "")["total"], 0, "no journal yet");
    three_calls(&served);
    let page = served.journal(&cookie, "");
    assert_eq!(page["total"], 3);
    let calls = page["calls"].as_array().unwrap();
    let shown: Vec<(&str, &str, &str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["turn"].as_str().unwrap(),
                c["call_id"].as_str().unwrap(),
                c["tool"].as_str().unwrap(),
                c["changes"][0]["path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("t2", "c3", "edit_file", "a.txt"),
            ("t1", "c2", "write_file", "b.txt"),
            ("t1", "c1", "write_file", "a.txt"),
        ]
    );
    assert_eq!(calls[1]["changes"][0]["kind"], "create");
    assert!(calls.iter().all(|c| c["state"] == "applied"));
}

#[test]
fn the_timeline_is_paged() {
    let served = Served::start();
    let cookie = served.login();
    three_calls(&served);
    let all = seqs(&served.journal(&cookie, ""));
    let first = served.journal(&cookie, "?limit=2");
    assert_eq!(seqs(&first), all[..2]);
    let next = first["next_before"].as_u64().expect("a next page");
    let second = served.journal(&cookie, &format!("?limit=2&before={next}"));
    assert_eq!(seqs(&second), all[2..]);
    assert_eq!(second["next_before"], Value::Null, "the last page");
}

#[test]
fn a_call_s_diff_shows_what_it_replaced_and_what_it_wrote() {
    let served = Served::start();
    let cookie = served.login();
    three_calls(&served);
    let newest = seqs(&served.journal(&cookie, ""))[0];
    let reply = served.get(&cookie, &format!("/api/diff?seq={newest}"));
    assert_eq!(reply.status, 200, "{reply:?}");
    let diff = reply.json()["changes"][0]["diff"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        diff.contains("--- a/a.txt") && diff.contains("+++ b/a.txt"),
        "{diff}"
    );
    assert!(
        diff.contains("-first\n") && diff.contains("+changed\n"),
        "{diff}"
    );
    // The first call's file was replaced by the third call since: what the first wrote is the
    // third's pre-image, and its diff is still shown.
    let oldest = *seqs(&served.journal(&cookie, "")).last().unwrap();
    let first_diff = |served: &Served| {
        let reply = served.get(&cookie, &format!("/api/diff?seq={oldest}"));
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["changes"][0].clone()
    };
    let before_the_edit = first_diff(&served);
    let diff = before_the_edit["diff"].as_str().unwrap_or_default();
    assert!(
        diff.contains("-old line\n") && diff.contains("+first\n"),
        "{before_the_edit}"
    );
    // Once an edit outside the journal replaced what the last call wrote, only its hash is left: no
    // diff, and the reason. The first call's diff does not depend on the root's file.
    served.ws.write("a.txt", "the user's edit\n");
    let reply = served.get(&cookie, &format!("/api/diff?seq={newest}"));
    let change = &reply.json()["changes"][0];
    assert_eq!(change["diff"], Value::Null, "{change}");
    assert!(
        change["after_note"]
            .as_str()
            .unwrap()
            .contains("changed since the call"),
        "{change}"
    );
    assert_eq!(first_diff(&served), before_the_edit);
}

#[test]
fn undo_from_the_console_restores_the_call_and_a_changed_file_is_refused_by_name() {
    let served = Served::start();
    let cookie = served.login();
    three_calls(&served);
    let seq = seqs(&served.journal(&cookie, ""))[0];
    let reply = served.undo(&cookie, json!({"seq": seq}));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json()["undone"], json!([seq]));
    assert_eq!(
        served.ws.read("a.txt"),
        "first\nsecond\n",
        "the edit is undone"
    );
    assert_eq!(served.journal(&cookie, "")["calls"][0]["state"], "undone");

    // The user changes b.txt after the call that created it: its undo is refused, naming it.
    served.ws.write("b.txt", "the user's edit\n");
    let reply = served.undo(&cookie, json!({"turn": "t1"}));
    assert_eq!(reply.status, 409, "{reply:?}");
    let refusal = reply.json();
    assert_eq!(refusal["path"], "b.txt");
    let message = refusal["error"].as_str().unwrap();
    assert!(message.contains("`b.txt` changed since call"), "{message}");
    assert_eq!(served.ws.read("b.txt"), "the user's edit\n");
    assert_eq!(
        served.ws.read("a.txt"),
        "first\nsecond\n",
        "nothing restored"
    );
}

#[test]
fn requests_without_the_token_are_refused() {
    let served = Served::start();
    let host = served.host();
    for path in ["/", "/console.js", "/api/journal", "/api/session"] {
        let reply = served.raw("GET", path, &[("Host", &host)], "");
        assert_eq!(
            (reply.status, reply.check()),
            (401, "token".into()),
            "{path}"
        );
    }
    let wrong = served.raw("GET", "/?token=0123456789abcdef", &[("Host", &host)], "");
    assert_eq!((wrong.status, wrong.check()), (401, "token".into()));
    assert_eq!(
        wrong.header("set-cookie"),
        None,
        "no session for a wrong token"
    );
    let forged = format!("turngate_console_{}=forged", served.addr.port());
    let forged = served.get(&forged, "/api/journal");
    assert_eq!((forged.status, forged.check()), (401, "token".into()));
    let crafted = served.raw(
        "GET",
        &format!("//evil.example/?token={}", served.token),
        &[("Host", &host)],
        "",
    );
    assert_eq!(
        crafted.header("location"),
        Some("/"),
        "the token's redirect goes only to the page"
    );
    let bearer = format!("Bearer {}", served.token);
    let reply = served.raw(
        "GET",
        "/api/journal",
        &[("Host", &host), ("Authorization", &bearer)],
        "",
    );
    assert_eq!(reply.status, 200, "the token as a header: {reply:?}");
    let reply = served.raw(
        "GET",
        "/api/journal",
        &[("Host", &host), ("Authorization", "Bearer wrong")],
        "",
    );
    assert_eq!((reply.status, reply.check()), (401, "token".into()));
}

#[test]
fn a_foreign_host_is_refused_even_with_the_session() {
    let served = Served::start();
    let cookie = served.login();
    let port = served.addr.port();
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_owned(),
    ] {
        let reply = served.raw(
            "GET",
            "/api/journal",
            &[("Host", &host), ("Cookie", &cookie)],
            "",
        );
        assert_eq!(
            (reply.status, reply.check()),
            (403, "host".into()),
            "{host}"
        );
    }
    let first_visit = served.raw(
        "GET",
        &format!("/?token={}", served.token),
        &[("Host", &format!("evil.example:{port}"))],
        "",
    );
    assert_eq!(first_visit.status, 403, "{first_visit:?}");
    let localhost = served.raw(
        "GET",
        "/api/journal",
        &[("Host", &format!("localhost:{port}")), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(
        localhost.status, 200,
        "localhost on the port is the console"
    );
}

#[test]
fn a_foreign_origin_is_refused() {
    let served = Served::start();
    let cookie = served.login();
    three_calls(&served);
    let host = served.host();
    let reply = served.raw(
        "GET",
        "/api/journal",
        &[
            ("Host", &host),
            ("Cookie", &cookie),
            ("Origin", "http://evil.example"),
        ],
        "",
    );
    assert_eq!((reply.status, reply.check()), (403, "origin".into()));
    let csrf = served.csrf(&cookie);
    for origin in [
        Some("http://evil.example".to_owned()),
        Some(format!(
            "http://127.0.0.1:{}",
            served.addr.port().wrapping_add(1)
        )),
        None,
    ] {
        let mut headers = vec![
            ("Host", host.clone()),
            ("Cookie", cookie.clone()),
            ("X-CSRF-Token", csrf.clone()),
        ];
        if let Some(origin) = &origin {
            headers.push(("Origin", origin.clone()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply = served.raw("POST", "/api/undo", &headers, r#"{"turn":"t2"}"#);
        assert_eq!(
            (reply.status, reply.check()),
            (403, "origin".into()),
            "{origin:?}"
        );
    }
    assert_eq!(
        served.ws.read("a.txt"),
        "changed\nsecond\n",
        "nothing undone"
    );
}

#[test]
fn a_post_without_the_session_s_csrf_token_is_refused() {
    let served = Served::start();
    let cookie = served.login();
    three_calls(&served);
    let other_session = served.login();
    let other_csrf = served.csrf(&other_session);
    assert_ne!(other_csrf, served.csrf(&cookie), "a token per session");
    let (host, origin) = (served.host(), served.origin());
    for csrf in [None, Some("0".repeat(64)), Some(other_csrf)] {
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Origin", origin.as_str()),
            ("Cookie", cookie.as_str()),
        ];
        if let Some(csrf) = &csrf {
            headers.push(("X-CSRF-Token", csrf.as_str()));
        }
        let reply = served.raw("POST", "/api/undo", &headers, r#"{"turn":"t2"}"#);
        assert_eq!(
            (reply.status, reply.check()),
            (403, "csrf".into()),
            "{csrf:?}"
        );
    }
    assert_eq!(
        served.ws.read("a.txt"),
        "changed\nsecond\n",
        "nothing undone"
    );
    let reply = served.undo(&cookie, json!({"turn": "t2"}));
    assert_eq!(
        reply.status, 200,
        "with the token it goes through: {reply:?}"
    );
}

#[test]
fn every_response_carries_the_security_headers() {
    let served = Served::start();
    let cookie = served.login();
    let page = served.get(&cookie, "/");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#"<script src="/console.js" defer></script>"#)
    );
    let refused = served.raw("GET", "/api/journal", &[("Host", &served.host())], "");
    for reply in [
        page,
        served.get(&cookie, "/console.js"),
        served.get(&cookie, "/api/journal"),
        refused,
    ] {
        let csp = reply.header("content-security-policy").unwrap_or_default();
        assert_eq!(csp, CONTENT_SECURITY_POLICY, "{reply:?}");
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    }
}

#[test]
fn a_file_name_holding_markup_comes_back_only_as_escaped_json_data() {
    let served = Served::start();
    let cookie = served.login();
    let name = "<img src=x onerror=alert(1)>";
    let content = "</script><script>alert(1)</script>\n";
    let write = json!({"path": name, "content": content});
    assert_eq!(served.apply("x", "x1", "write_file", write)["ok"], true);
    let reply = served.get(&cookie, "/api/journal");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(
        !reply.body.contains('<'),
        "no markup in the body: {}",
        reply.body
    );
    assert_eq!(reply.json()["calls"][0]["changes"][0]["path"], name);
    let seq = seqs(&reply.json())[0];
    let diff = served.get(&cookie, &format!("/api/diff?seq={seq}"));
    assert!(!diff.body.contains("</script>"), "{}", diff.body);
    let text = diff.json()["changes"][0]["diff"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("+</script><script>alert(1)</script>"),
        "{text}"
    );
    // The page puts data on the page only as text.
    let script = served.get(&cookie, "/console.js").body;
    for sink in [
        ".innerHTML",
        ".outerHTML",
        "insertAdjacentHTML",
        "document.write",
    ] {
        assert!(!script.contains(sink), "the script uses {sink}");
    }
    assert!(script.contains(".textContent"));
    let page = served.get(&cookie, "/").body;
    assert!(!page.contains("onerror"), "the page holds no data");
}

#[test]
fn the_audit_log_filters_by_tool_status_and_time() {
    let served = Served::start();
    let cookie = served.login();
    let start = now_ms();
    three_calls(&served);
    let read = json!({"path": "b.txt"});
    assert_eq!(served.apply("t3", "c4", "read_file", read)["ok"], true);
    let outside = json!({"path": "../outside/x.txt", "content": "no"});
    assert_eq!(served.apply("t3", "c5", "write_file", outside)["ok"], false);
    let end = now_ms();
    let ids = |query: &str| -> Vec<String> {
        let reply = served.get(&cookie, &format!("/api/audit?{query}"));
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["record"]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(""), ["c5", "c4", "c3", "c2", "c1"], "newest first");
    assert_eq!(ids("tool=write_file"), ["c5", "c2", "c1"]);
    assert_eq!(ids("status=error"), ["c5"]);
    assert_eq!(ids("tool=write_file&status=ok"), ["c2", "c1"]);
    assert_eq!(ids(&format!("since={start}&until={end}")).len(), 5);
    assert!(ids(&format!("since={}", end + 1)).is_empty());
    assert!(ids(&format!("until={}", start - 1)).is_empty());
    assert_eq!(ids("limit=2"), ["c5", "c4"]);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn the_console_command_prints_a_url_with_a_token_and_serves_only_loopback() {
    use std::io::BufRead as _;
    let ws = Workspace::new();
    let mut refused = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["console", "--listen", "0.0.0.0:0", "--root"])
        .arg(ws.root_path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = refused.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            refused.kill().unwrap();
            refused.wait().unwrap();
            panic!("turngate console served 0.0.0.0");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    refused
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success());
    assert!(stderr.contains("loopback only"), "{stderr}");

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"))
        .args(["console", "--root"])
        .arg(ws.root_path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    let rest = url.strip_prefix("http://127.0.0.1:").expect(&url);
    let (port, token) = rest.split_once("/?token=").expect(&url);
    assert_eq!(token.len(), 64, "{url}");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /?token={token} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
}

// ---- Approvals recorded in the root and answered from the console ----

/// A policy that asks before every `write_file` call applies; a question waits `timeout` seconds.
fn asking_policy(timeout: u64) -> Policy {
    Policy::from_toml(&format!(
        "approval_timeout_seconds = {timeout}\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n"
    ))
    .unwrap()
}

/// Runs `write_file` of `content` to `path` as call `call_id` of `turn`, asking through the root's
/// recorded approvals, on the console's runtime: answers the call's outcome JSON when it ends.
fn ask_in_background(
    served: &Served,
    turn: &str,
    call_id: &str,
    path: &str,
    content: &str,
    timeout: u64,
) -> tokio::task::JoinHandle<Value> {
    ask_until_cancelled(served, turn, call_id, path, content, timeout, Cancel::new())
}

/// [`ask_in_background`], the call stopped by `cancel`.
fn ask_until_cancelled(
    served: &Served,
    turn: &str,
    call_id: &str,
    path: &str,
    content: &str,
    timeout: u64,
    cancel: Cancel,
) -> tokio::task::JoinHandle<Value> {
    let root = Root::open(served.ws.root_path()).unwrap();
    let (turn, call_id) = (turn.to_owned(), call_id.to_owned());
    let input = json!({"path": path, "content": content}).to_string();
    let toolbox = bundled();
    served.runtime.spawn(async move {
        let policy = asking_policy(timeout);
        let approver = DurableApprover::new(
            PendingApprovals::open(&root).unwrap(),
            policy.approval_timeout(),
        );
        let effects = Effects::default();
        let mut context = CallContext::new(&root, &policy, &effects);
        context.approver = Some(&approver);
        context.cancel = Some(&cancel);
        context.call_id = Some(call_id);
        context.turn = Some(turn);
        let (outcome, _) = call_audited(toolbox, &mut context, "write_file", &input).await;
        outcome.to_json()
    })
}

/// Runs a turn of `write_file` calls (`(call ID, path, content)` each) as turn `turn`, asking through
/// the root's recorded approvals (whose questions wait together), on the console's runtime: answers
/// the turn's report as JSON when it ends.
fn turn_in_background(
    served: &Served,
    turn: &str,
    writes: &[(&str, &str, &str)],
) -> tokio::task::JoinHandle<Value> {
    let root = Root::open(served.ws.root_path()).unwrap();
    let calls: Vec<(String, &str, Value)> = writes
        .iter()
        .map(|(id, path, content)| {
            let input = json!({"path": path, "content": content});
            ((*id).to_owned(), "write_file", input)
        })
        .collect();
    let decoded = tool_use_turn_of(&calls);
    let options = TurnOptions {
        turn_id: Some(turn.to_owned()),
        ..TurnOptions::default()
    };
    let toolbox = bundled();
    served.runtime.spawn(async move {
        let policy = asking_policy(600);
        let approver = DurableApprover::new(
            PendingApprovals::open(&root).unwrap(),
            policy.approval_timeout(),
        );
        let hooks = TurnHooks {
            approver: Some(&approver),
            cancel: None,
        };
        process_turn_with(toolbox, &root, &policy, decoded, options, hooks)
            .await
            .to_json()
    })
}

/// The questions waiting in the root, once there are `count`.
fn waiting(served: &Served, cookie: &str, count: usize) -> Vec<Value> {
    waiting_on(served, cookie, count, None)
}

/// [`waiting`], while `asking` (the process that asks) still runs: its output if it ended.
fn waiting_on(
    served: &Served,
    cookie: &str,
    count: usize,
    mut asking: Option<&mut std::process::Child>,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(child) = asking.as_deref_mut()
            && child.try_wait().unwrap().is_some()
        {
            let (mut stdout, mut stderr) = (String::new(), String::new());
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut stdout)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            let status = child.wait().unwrap();
            panic!("the asking process ended ({status}) before it asked: {stdout}\n{stderr}");
        }
        let reply = served.get(cookie, "/api/approvals");
        assert_eq!(reply.status, 200, "{reply:?}");
        let questions = reply.json()["approvals"].as_array().unwrap().clone();
        if questions.len() >= count {
            assert_eq!(questions.len(), count, "{questions:?}");
            return questions;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{count} questions never came: {questions:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Served {
    /// A POST of answers as the page makes it.
    fn answer(&self, cookie: &str, answers: Value) -> Reply {
        let csrf = self.csrf(cookie);
        self.raw(
            "POST",
            "/api/approvals",
            &[
                ("Host", &self.host()),
                ("Origin", &self.origin()),
                ("Cookie", cookie),
                ("X-CSRF-Token", &csrf),
                ("Content-Type", "application/json"),
            ],
            &json!({ "answers": answers }).to_string(),
        )
    }

    fn finish(&self, call: tokio::task::JoinHandle<Value>) -> Value {
        self.runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(60), call).await })
            .expect("the call ended after its answer")
            .unwrap()
    }
}

#[test]
fn a_call_waiting_in_the_root_is_shown_with_its_diff_and_applies_once_approved() {
    let served = Served::start();
    let cookie = served.login();
    served.ws.write("notes.txt", "old\n");
    let call = ask_in_background(&served, "t1", "c1", "notes.txt", "new\n", 600);
    let question = waiting(&served, &cookie, 1).remove(0);
    assert_eq!(question["turn"], "t1");
    assert_eq!(question["request"]["tool"], "write_file");
    assert_eq!(question["request"]["id"], "c1");
    // Where the tool came from and the rule that asks, part of what the digest names.
    let provenance = &question["request"]["provenance"];
    assert_eq!(provenance["origin"], "bundled", "{provenance}");
    assert_eq!(provenance["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(provenance["source"], Value::Null);
    assert_eq!(question["request"]["asked_because"], "tool_asks");
    assert_eq!(question["request"]["changes"][0]["path"], "notes.txt");
    assert_eq!(question["request"]["changes"][0]["kind"], "replace");
    let diff = question["request"]["diff"].as_str().unwrap();
    assert!(diff.contains("-old") && diff.contains("+new"), "{diff}");
    assert_eq!(served.ws.read("notes.txt"), "old\n", "nothing applied yet");

    // Without the CSRF token, nothing is answered.
    let digest = question["digest"].as_str().unwrap().to_owned();
    let forged = served.raw(
        "POST",
        "/api/approvals",
        &[
            ("Host", &served.host()),
            ("Origin", &served.origin()),
            ("Cookie", &cookie),
            ("Content-Type", "application/json"),
        ],
        &json!({"answers": [{"digest": digest, "approve": true}]}).to_string(),
    );
    assert_eq!((forged.status, forged.check()), (403, "csrf".to_owned()));
    assert_eq!(waiting(&served, &cookie, 1).len(), 1);

    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_eq!(reply.status, 200, "{reply:?}");
    let outcome = served.finish(call);
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(served.ws.read("notes.txt"), "new\n");
    assert_eq!(
        waiting(&served, &cookie, 0).len(),
        0,
        "taken, the question is gone"
    );

    // The first answer stands: answering again is refused.
    let again = served.answer(&cookie, json!([{"digest": digest, "approve": false}]));
    assert_eq!(again.status, 409, "{again:?}");
    assert_eq!(served.ws.read("notes.txt"), "new\n");
}

#[test]
fn a_turn_s_calls_are_answered_in_one_request_and_a_stale_digest_answers_none() {
    let served = Served::start();
    let cookie = served.login();
    // One turn of two writes: both questions stand at once, and nothing applies before the answers.
    let turn = turn_in_background(
        &served,
        "t7",
        &[("c1", "a.txt", "a\n"), ("c2", "b.txt", "b\n")],
    );
    let questions = waiting(&served, &cookie, 2);
    assert!(questions.iter().all(|q| q["turn"] == "t7"), "{questions:?}");
    // Each knows its place in the turn, which the page lists them by.
    let mut places: Vec<(String, Value)> = questions
        .iter()
        .map(|q| {
            (
                q["request"]["id"].as_str().unwrap().to_owned(),
                q["position"].clone(),
            )
        })
        .collect();
    places.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(places, [("c1".into(), json!(0)), ("c2".into(), json!(1))]);
    assert!(!served.ws.exists("a.txt") && !served.ws.exists("b.txt"));
    let digests: Vec<&str> = questions
        .iter()
        .map(|q| q["digest"].as_str().unwrap())
        .collect();

    // One digest the root never asked: nothing of the request is answered.
    let unknown = format!("sha256:{}", "0".repeat(64));
    let reply = served.answer(
        &cookie,
        json!([
            {"digest": digests[0], "approve": true},
            {"digest": unknown, "approve": true},
        ]),
    );
    assert_eq!(reply.status, 409, "{reply:?}");
    assert_eq!(reply.json()["digest"], unknown.as_str());
    assert_eq!(waiting(&served, &cookie, 2).len(), 2, "none was answered");

    let reply = served.answer(
        &cookie,
        json!(
            digests
                .iter()
                .map(|d| json!({"digest": d, "approve": true}))
                .collect::<Vec<_>>()
        ),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let report = served.finish(turn);
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert_eq!(report["calls"][1]["status"], "ok", "{report}");
    assert_eq!(served.ws.read("a.txt"), "a\n");
    assert_eq!(served.ws.read("b.txt"), "b\n");
}

/// A text file over 1 MiB (50,000 lines) and the same with every 1,000th line changed: 50 hunks.
fn long_file() -> (String, String) {
    let line = |n: usize| match n % 1000 {
        0 => format!("changed {n:06} ..........\n"),
        _ => format!("line {n:06} .............\n"),
    };
    let old: String = (0..50_000)
        .map(|n| format!("line {n:06} .............\n"))
        .collect();
    let new: String = (0..50_000).map(line).collect();
    assert!(old.len() > 1 << 20);
    (old, new)
}

/// The `@@` lines of a diff page.
fn hunk_heads(page: &Value) -> Vec<String> {
    page["diff"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("@@"))
        .map(str::to_owned)
        .collect()
}

/// A held write to a file over 1 MiB is diffed (not summarized) and the page is given it a page at a
/// time (20 hunks, or 256 KiB of one long hunk), the rest on request from where the last page ended;
/// so is the applied call's diff on the timeline.
#[test]
fn a_held_diff_of_a_file_over_1_mib_is_paged_from_the_server() {
    let served = Served::start();
    let cookie = served.login();
    let (old, new) = long_file();
    served.ws.write("long.txt", &old);
    let asked = ask_in_background(&served, "t1", "c1", "long.txt", &new, 600);
    let question = waiting(&served, &cookie, 1).remove(0);
    assert_eq!(question["diff_hunks"], 50, "{}", question["diff_hunks"]);
    let first = &question["request"];
    assert_eq!(hunk_heads(first).len(), 20);
    assert!(
        first["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- a/long.txt\n+++ b/long.txt\n")
    );
    let digest = question["digest"].as_str().unwrap().to_owned();
    let rest = pages_after(&served, &cookie, &question["diff_next"], |from| {
        format!("/api/approvals/diff?digest={digest}&from={from}")
    });
    assert_eq!(rest.len(), 2);
    assert!(rest.iter().all(|page| page["hunks"] == 50));
    assert_eq!(hunk_heads(&rest[0]).len(), 20);
    assert!(
        rest[0]["diff"]
            .as_str()
            .unwrap()
            .contains("+changed 020000")
    );
    assert_eq!(hunk_heads(&rest[1]).len(), 10);
    assert!(
        rest[1]["diff"]
            .as_str()
            .unwrap()
            .contains("+changed 049000")
    );
    let unknown = served.get(
        &cookie,
        &format!(
            "/api/approvals/diff?digest=sha256:{}&from=0",
            "0".repeat(64)
        ),
    );
    assert_eq!(unknown.status, 409, "{unknown:?}");
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(served.finish(asked)["status"], "ok");
    let seq = seqs(&served.journal(&cookie, ""))[0];
    let reply = served.get(&cookie, &format!("/api/diff?seq={seq}"));
    let change = reply.json()["changes"][0].clone();
    assert_eq!(change["hunks"], 50, "{change}");
    assert_eq!(hunk_heads(&change).len(), 20);
    let rest = pages_after(&served, &cookie, &change["next"], |from| {
        format!("/api/diff?seq={seq}&change=0&from={from}")
    });
    assert_eq!(
        rest.iter().map(|p| hunk_heads(p).len()).collect::<Vec<_>>(),
        [20, 10]
    );

    // Every line changed: one hunk of 2.6 MB, listed a page of about 256 KiB at a time.
    let other: String = new.lines().map(|line| format!("{line}!\n")).collect();
    let asked = ask_in_background(&served, "t2", "c2", "long.txt", &other, 600);
    let question = waiting(&served, &cookie, 1).remove(0);
    let first = question["request"]["diff"].as_str().unwrap().to_owned();
    assert_eq!(question["diff_hunks"], 1);
    assert!(first.len() < 300 << 10, "{} bytes listed", first.len());
    let digest = question["digest"].as_str().unwrap().to_owned();
    let rest = pages_after(&served, &cookie, &question["diff_next"], |from| {
        format!("/api/approvals/diff?digest={digest}&from={from}")
    });
    assert!(rest.len() > 5, "{} pages", rest.len());
    let whole: String = std::iter::once(first.as_str())
        .chain(rest.iter().map(|page| page["diff"].as_str().unwrap()))
        .collect();
    assert_eq!(
        whole.lines().filter(|line| line.starts_with('+')).count(),
        50_001
    );
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": false}]));
    assert_eq!(reply.status, 200, "{reply:?}");
    served.finish(asked);
}

/// The pages of a diff from `next` on (following each page's `next`), each asked at `address(from)`.
fn pages_after(
    served: &Served,
    cookie: &str,
    next: &Value,
    address: impl Fn(u64) -> String,
) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut next = next.as_u64();
    while let Some(from) = next {
        let reply = served.get(cookie, &address(from));
        assert_eq!(reply.status, 200, "{reply:?}");
        let page = reply.json();
        assert_eq!(page["from"], from);
        next = page["next"].as_u64();
        pages.push(page);
    }
    pages
}

#[test]
fn an_answer_is_held_to_what_was_shown() {
    let served = Served::start();
    let cookie = served.login();
    let call = ask_in_background(&served, "t1", "c1", "notes.txt", "shown\n", 600);
    let question = waiting(&served, &cookie, 1).remove(0);
    let digest = question["digest"].as_str().unwrap().to_owned();
    // Someone rewrites the recorded question to show other content: it no longer hashes to its name,
    // so it is neither listed nor answerable.
    let name = format!(
        ".turngate/approvals/{}.ask",
        digest.strip_prefix("sha256:").unwrap()
    );
    let recorded = served.ws.read(&name);
    assert!(recorded.contains("shown"), "{recorded}");
    served.ws.write(&name, &recorded.replace("shown", "other"));
    let listed = served.get(&cookie, "/api/approvals");
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(listed.json()["approvals"], json!([]), "{listed:?}");
    let damaged = listed.json()["damaged"].to_string();
    assert!(damaged.contains("not to its name"), "{listed:?}");
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_ne!(reply.status, 200, "{reply:?}");
    served.ws.write(&name, &recorded);
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": false}]));
    assert_eq!(reply.status, 200, "{reply:?}");
    let outcome = served.finish(call);
    assert_eq!(outcome["status"], "error");
    assert!(
        outcome["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not give approval"),
        "{outcome}"
    );
    assert!(!served.ws.exists("notes.txt"));
}

#[test]
fn a_question_not_answered_by_its_deadline_is_denied_and_stays_denied() {
    let served = Served::start();
    let cookie = served.login();
    let call = ask_in_background(&served, "t1", "c1", "notes.txt", "x\n", 1);
    let question = waiting(&served, &cookie, 1).remove(0);
    let outcome = served.finish(call);
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert!(!served.ws.exists("notes.txt"));
    let digest = question["digest"].as_str().unwrap();
    let late = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_eq!(late.status, 409, "{late:?}");
    assert!(
        late.json()["error"].as_str().unwrap().contains("denied"),
        "{late:?}"
    );
    // The same call asked again meets the recorded no at once.
    let again = ask_in_background(&served, "t1", "c1", "notes.txt", "x\n", 600);
    let outcome = served.finish(again);
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert!(!served.ws.exists("notes.txt"));
}

#[test]
fn a_cancelled_call_takes_its_question_back() {
    let served = Served::start();
    let cookie = served.login();
    let cancel = Cancel::new();
    let call = ask_until_cancelled(&served, "t1", "c1", "notes.txt", "x\n", 600, cancel.clone());
    waiting(&served, &cookie, 1);
    cancel.cancel();
    let outcome = served.finish(call);
    assert_eq!(outcome["error"]["kind"], "cancelled", "{outcome}");
    assert_eq!(waiting(&served, &cookie, 0).len(), 0, "nobody waits for it");
    assert!(!served.ws.exists("notes.txt"));
}

#[test]
fn a_question_two_waits_share_stays_while_one_of_them_waits() {
    let served = Served::start();
    let cookie = served.login();
    // The same call twice (the same ID, input and change, so the same digest): the first cancelled.
    let cancel = Cancel::new();
    let first = ask_until_cancelled(&served, "t1", "c1", "notes.txt", "x\n", 600, cancel.clone());
    let second = ask_in_background(&served, "t1", "c1", "notes.txt", "x\n", 600);
    let question = waiting(&served, &cookie, 1).remove(0);
    // Both are waiting on it by now (staging a write takes milliseconds).
    std::thread::sleep(Duration::from_secs(1));
    cancel.cancel();
    assert_eq!(served.finish(first)["error"]["kind"], "cancelled");
    // The first took the question back; the second, still waiting, asks it again.
    let again = waiting(&served, &cookie, 1).remove(0);
    assert_eq!(again["digest"], question["digest"]);
    assert_eq!(
        again["deadline_ms"], question["deadline_ms"],
        "as first asked"
    );
    let reply = served.answer(
        &cookie,
        json!([{"digest": again["digest"], "approve": true}]),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(served.finish(second)["status"], "ok");
    assert_eq!(served.ws.read("notes.txt"), "x\n");
}

/// `turngate call --approve-in console` killed while its question waits; the question answered yes
/// meanwhile; the same call run again applies, once, without asking again.
#[test]
fn a_question_outlives_the_process_that_asked_and_its_yes_applies_once() {
    let served = Served::start();
    let cookie = served.login();
    let policy = served.ws.dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
    )
    .unwrap();
    let call = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_turngate"));
        command
            .env(
                "TURNGATE_CACHE_DIR",
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
            )
            .args([
                "call",
                "--approve-in",
                "console",
                "--call-id",
                "c1",
                "--policy",
            ])
            .arg(&policy)
            .arg("--root")
            .arg(served.ws.root_path())
            .args([
                "write_file",
                r#"{"path":"notes.txt","content":"approved\n"}"#,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    };
    let mut asking = call().spawn().unwrap();
    let question = waiting_on(&served, &cookie, 1, Some(&mut asking)).remove(0);
    asking.kill().unwrap();
    asking.wait().unwrap();
    assert!(!served.ws.exists("notes.txt"));
    let digest = question["digest"].as_str().unwrap();
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_eq!(reply.status, 200, "{reply:?}");

    let again = call().output().unwrap();
    assert!(again.status.success(), "{again:?}");
    assert_eq!(served.ws.read("notes.txt"), "approved\n");
    let journal = served.journal(&cookie, "");
    assert_eq!(journal["total"], 1, "{journal}");
    let used = format!(
        ".turngate/approvals/{}.used",
        digest.strip_prefix("sha256:").unwrap()
    );
    assert!(served.ws.exists(&used), "the yes was taken");

    // The yes was taken: with the file gone again, the very same call (the same digest) waits for a
    // new answer instead of taking that yes a second time.
    #[allow(clippy::disallowed_methods)] // the user removes it, outside turngate
    std::fs::remove_file(served.ws.root_path().join("notes.txt")).unwrap();
    let mut third = call().spawn().unwrap();
    let next = waiting_on(&served, &cookie, 1, Some(&mut third)).remove(0);
    assert_eq!(next["digest"], question["digest"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(third.try_wait().unwrap().is_none(), "it waits");
    assert!(!served.ws.exists("notes.txt"));
    third.kill().unwrap();
    third.wait().unwrap();
}

#[test]
fn the_tools_view_lists_each_tool_with_its_digest_and_where_it_came_from() {
    let served = Served::start();
    let cookie = served.login();
    let reply = served.get(&cookie, "/api/tools");
    assert_eq!(reply.status, 200, "{reply:?}");
    let listing = reply.json();
    assert_eq!(listing["loaded"], true);
    let tools = listing["tools"].as_array().unwrap();
    let find = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {listing}"))
    };
    let write = find("write_file");
    assert_eq!(write["origin"], "bundled");
    assert_eq!(write["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(write["paths"][0]["access"], "write");
    assert_eq!(write["registry"], Value::Null);
    let noop = tools
        .iter()
        .find(|t| {
            t["origin"]
                .as_str()
                .is_some_and(|o| o == env!("TURNGATE_TEST_GUEST_NOOP"))
        })
        .unwrap_or_else(|| panic!("the component file in {listing}"));
    let bytes = std::fs::read(env!("TURNGATE_TEST_GUEST_NOOP")).unwrap();
    assert_eq!(
        noop["sha256"].as_str().unwrap(),
        turngate::digest::Sha256Digest::of(&bytes).hex(),
        "the digest of the very bytes loaded"
    );
}

// ---- In a real browser: headless Chromium through ChromeDriver (Debian's `chromium` and
// `chromium-driver`, installed by `.ci/run`), run by the README's second test command. With
// `TURNGATE_CONSOLE_SCREENSHOTS=DIR`, each view is saved there as a PNG (docs/console/ holds them).

/// A headless Chromium session driven over WebDriver.
struct Browser {
    driver: std::process::Child,
    session: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Browser {
    fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = std::process::Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; .ci/run installs it)");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = common::http_client();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while runtime
            .block_on(client.get(format!("{base}/status")).send())
            .is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1100",
                         "--host-resolver-rules=MAP rebound.test 127.0.0.1"]
            }
        }}});
        let created: Value = runtime.block_on(async {
            client
                .post(format!("{base}/session"))
                .json(&capabilities)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        });
        let id = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Browser {
            driver,
            session: format!("{base}/session/{id}"),
            client,
            runtime,
        }
    }

    /// One WebDriver command; its `value`.
    fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.session);
        let answer: Value = self.runtime.block_on(async {
            let request = self.client.request(method, url);
            let request = match body {
                Some(body) => request.json(&body),
                None => request,
            };
            request.send().await.unwrap().json().await.unwrap()
        });
        answer["value"].clone()
    }

    fn open(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})));
    }

    /// Runs `script` in the page (with `arguments`), answering its return value.
    fn run(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Runs `script` until it returns something truthy, at most 30 s.
    fn until(&self, what: &str, script: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let value = self.run(script);
            if !(value.is_null() || value == json!(false) || value == json!("")) {
                return value;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: never, the page says {}",
                self.run("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the button whose text is `label` inside the first element `scope` selects, the status
    /// line cleared first (so [`Browser::status`] reads what the click brought).
    fn click(&self, scope: &str, label: &str) {
        let clicked = self.run(&format!(
            "document.getElementById('status').textContent = '';
             const scope = document.querySelector({scope:?});
             const b = scope && [...scope.querySelectorAll('button')].find(b => b.textContent === {label:?});
             if (!b) return false; b.click(); return true;"
        ));
        assert_eq!(clicked, json!(true), "no `{label}` button in {scope}");
    }

    /// The text of the status line, once it says something that is not work in progress.
    fn status(&self) -> String {
        self.until(
            "a status",
            "const s = document.getElementById('status').textContent; return s.endsWith('...') ? '' : s;",
        )
        .as_str()
        .unwrap()
        .to_owned()
    }

    fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("TURNGATE_CONSOLE_SCREENSHOTS") else {
            return;
        };
        use base64::Engine as _;
        let png = self.command(reqwest::Method::GET, "/screenshot", None);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(
            std::path::Path::new(&dir).join(format!("{name}.png")),
            bytes,
        )
        .unwrap();
    }

    /// Whether a dialog (`alert`) is open: a script the page ran.
    fn alert_open(&self) -> bool {
        let value = self.command(reqwest::Method::GET, "/alert/text", None);
        value.get("error").is_none()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self
            .runtime
            .block_on(self.client.delete(&self.session).send());
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The page's own address with the start token.
fn page_url(served: &Served) -> String {
    format!("http://{}/?token={}", served.addr, served.token)
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_held_writes_are_approved_denied_and_approved_by_turn() {
    let served = Served::start();
    let browser = Browser::start();
    served.ws.write("notes.txt", "old\n");
    let approved = ask_in_background(&served, "t1", "c1", "notes.txt", "new\n", 600);
    browser.open(&page_url(&served));
    browser.until(
        "the held write on the page",
        "return document.querySelector('#questions .question') !== null",
    );
    let shown = browser.run("return document.getElementById('questions').innerText");
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("write_file") && shown.contains("-old") && shown.contains("+new"),
        "{shown}"
    );
    assert!(
        shown.contains("bundled (SHA-256 ")
            && shown.contains("asked because")
            && shown.contains("approval = \"ask\""),
        "{shown}"
    );
    browser.screenshot("approvals");
    browser.click("#questions", "Approve");
    let said = browser.status();
    assert!(said.starts_with("answered"), "{said}");
    assert_eq!(served.finish(approved)["status"], "ok");
    assert_eq!(served.ws.read("notes.txt"), "new\n");

    let denied = ask_in_background(&served, "t2", "c2", "other.txt", "x\n", 600);
    browser.until(
        "the second question, alone",
        "const q = document.querySelectorAll('#questions .question');
         return q.length === 1 && q[0].textContent.includes('call c2');",
    );
    browser.click("#questions", "Deny");
    let said = browser.status();
    assert!(said.starts_with("answered"), "{said}");
    assert_eq!(served.finish(denied)["status"], "error");
    assert!(!served.ws.exists("other.txt"));

    let turn = turn_in_background(
        &served,
        "t3",
        &[("c3", "a.txt", "a\n"), ("c4", "b.txt", "b\n")],
    );
    browser.until(
        "a turn of two",
        "return [...document.querySelectorAll('#questions button')].some(b => b.textContent === 'Approve all 2')",
    );
    let order = browser.run(
        "return [...document.querySelectorAll('#questions .question .muted')].map(e => e.textContent).filter(t => t.startsWith('call '))",
    );
    assert_eq!(
        order,
        json!(["call c3", "call c4"]),
        "listed in the turn's order"
    );
    browser.screenshot("approvals-turn");
    browser.click("#questions", "Approve all 2");
    let said = browser.status();
    assert!(said.starts_with("answered"), "{said}");
    let report = served.finish(turn);
    assert_eq!(report["calls"][0]["status"], "ok", "{report}");
    assert_eq!(report["calls"][1]["status"], "ok", "{report}");
    assert_eq!(served.ws.read("a.txt"), "a\n");
    assert_eq!(served.ws.read("b.txt"), "b\n");
}

/// A large diff is shown 20 hunks at a time, the rest one click each away.
#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_a_large_diff_is_shown_a_page_of_hunks_at_a_time() {
    let served = Served::start();
    let browser = Browser::start();
    // A file over 1 MiB, 50 changed lines 1,000 lines apart: 50 hunks.
    let (old, new) = long_file();
    served.ws.write("long.txt", &old);
    let asked = ask_in_background(&served, "t1", "c1", "long.txt", &new, 600);
    browser.open(&page_url(&served));
    let hunks = "return document.querySelectorAll('#questions pre.diff .diff-hunk').length";
    browser.until("the held write on the page", &format!("{hunks} > 0"));
    assert_eq!(browser.run(hunks), json!(20));
    let shown = browser.run("return document.getElementById('questions').innerText");
    assert!(
        shown.as_str().unwrap().contains("+changed 019000")
            && !shown.as_str().unwrap().contains("+changed 020000"),
        "{shown}"
    );
    browser.click("#questions", "Show 20 more hunks (30 not shown)");
    browser.until("40 hunks", &format!("{hunks} === 40"));
    browser.click("#questions", "Show 10 more hunks (10 not shown)");
    browser.until("50 hunks", &format!("{hunks} === 50"));
    let shown = browser.run("return document.getElementById('questions').innerText");
    assert!(
        shown.as_str().unwrap().contains("+changed 049000"),
        "{shown}"
    );
    let more =
        "return [...document.querySelectorAll('#questions button.more')].every(b => b.hidden)";
    assert_eq!(
        browser.run(more),
        json!(true),
        "every hunk shown, no more button"
    );
    browser.click("#questions", "Approve");
    assert_eq!(served.finish(asked)["status"], "ok");
    assert_eq!(served.ws.read("long.txt"), new);
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_undo_applies_and_a_refused_undo_is_explained() {
    let served = Served::start();
    three_calls(&served);
    let browser = Browser::start();
    browser.open(&page_url(&served));
    browser.click("nav", "Timeline");
    browser.until(
        "the timeline",
        "return document.querySelectorAll('#calls .call').length === 3",
    );
    // Show c3's diff, then undo it (the newest call: the first Undo).
    browser.click("#calls .call", "Show diff");
    browser.until(
        "the diff",
        "return document.querySelector('#calls pre.diff') !== null",
    );
    browser.screenshot("timeline");
    browser.click("#calls .call", "Undo");
    let said = browser.status();
    assert!(said.starts_with("undone"), "{said}");
    assert_eq!(served.ws.read("a.txt"), "first\nsecond\n");
    // a.txt changed by hand since c1: c1's undo is refused and the page names the file.
    served.ws.write("a.txt", "by hand\n");
    browser.until(
        "the reloaded timeline",
        "return document.querySelectorAll('#calls .call.undone').length === 1",
    );
    let refused = browser.run(
        "document.getElementById('status').textContent = '';
         const calls = [...document.querySelectorAll('#calls .call')];
         const c1 = calls.find(c => c.textContent.includes('call c1'));
         const b = [...c1.querySelectorAll('button')].find(b => b.textContent === 'Undo');
         b.click(); return true;",
    );
    assert_eq!(refused, json!(true));
    let said = browser.status();
    assert!(
        said.starts_with("undo refused")
            && said.contains("a.txt")
            && said.contains("changed since"),
        "{said}"
    );
    browser.screenshot("timeline-refused");
    assert_eq!(served.ws.read("a.txt"), "by hand\n");
    browser.click("nav", "Tools");
    browser.until(
        "the tools",
        "return document.querySelectorAll('#tool-list tbody tr').length > 1",
    );
    browser.screenshot("tools");
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_markup_in_names_and_contents_renders_as_text() {
    let served = Served::start();
    let name = "<img src=x onerror=alert(1)>.txt";
    let content = "</script><script>alert(2)</script>\n<b>bold</b>\n";
    assert_eq!(
        served.apply(
            "t1",
            "c1",
            "write_file",
            json!({"path": name, "content": content})
        )["ok"],
        true
    );
    let waiting = ask_in_background(&served, "t2", "c2", name, "<svg onload=alert(3)>\n", 600);
    let browser = Browser::start();
    browser.open(&page_url(&served));
    browser.until(
        "the question",
        "return document.querySelector('#questions .question') !== null",
    );
    browser.click("nav", "Timeline");
    browser.until(
        "the call",
        "return document.querySelector('#calls .call') !== null",
    );
    browser.click("#calls .call", "Show diff");
    browser.until(
        "the diff",
        "return document.querySelector('#calls pre.diff') !== null",
    );
    browser.screenshot("markup-as-text");
    browser.click("nav", "Audit log");
    browser.until(
        "the audit log",
        "return document.querySelector('#records tbody tr') !== null",
    );
    browser.screenshot("audit-log");
    assert!(!browser.alert_open(), "a script from the data ran");
    let markup =
        browser.run("return document.querySelectorAll('img, svg, b, script:not([src])').length");
    assert_eq!(markup, json!(0), "an element was made from the data");
    let text = browser
        .run("return document.body.innerText + document.getElementById('questions').textContent + document.getElementById('calls').textContent")
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains(name), "the name shows as text");
    assert!(
        text.contains("</script><script>alert(2)</script>"),
        "the content shows as text"
    );
    assert!(
        text.contains("<svg onload=alert(3)>"),
        "the held change shows as text"
    );
    let reply = served.answer(
        &served.login(),
        json!([{"digest": served_digest(&served), "approve": false}]),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(served.finish(waiting)["status"], "error");
}

/// The digest of the one question waiting.
fn served_digest(served: &Served) -> String {
    let cookie = served.login();
    waiting(served, &cookie, 1)[0]["digest"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_no_token_a_rebound_host_a_foreign_page_or_no_csrf_token_is_refused() {
    let served = Served::start();
    three_calls(&served);
    let browser = Browser::start();
    // No token: the page is not served.
    browser.open(&format!("http://{}/", served.addr));
    let body = browser.run("return document.body.innerText");
    assert!(body.as_str().unwrap().contains("token"), "{body}");
    assert!(
        browser
            .run("return document.getElementById('calls')")
            .is_null()
    );
    // A name that resolves to 127.0.0.1 (DNS rebinding): refused, token or not.
    browser.open(&format!(
        "http://rebound.test:{}/?token={}",
        served.addr.port(),
        served.token
    ));
    let body = browser.run("return document.body.innerText");
    assert!(body.as_str().unwrap().contains("host"), "{body}");
    // The page itself, logged in; a POST without the CSRF token is refused.
    browser.open(&page_url(&served));
    browser.until(
        "the page",
        "return document.getElementById('root-line').textContent !== ''",
    );
    let status = browser.command(
        reqwest::Method::POST,
        "/execute/async",
        Some(json!({"script": "const done = arguments[arguments.length - 1];
            fetch('/api/undo', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                body: JSON.stringify({seq: 3})}).then(r => done(r.status));", "args": []})),
    );
    assert_eq!(status, json!(403));
    // A page of another origin (another loopback port) posting to the console: refused.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_addr = other.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in other.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let page = "<!doctype html><title>elsewhere</title><p>elsewhere</p>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    browser.open(&format!("http://{other_addr}/"));
    let foreign = browser.command(
        reqwest::Method::POST,
        "/execute/async",
        Some(
            json!({"script": format!("const done = arguments[arguments.length - 1];
            fetch('http://{}/api/undo', {{method: 'POST', credentials: 'include', mode: 'no-cors',
                headers: {{'Content-Type': 'text/plain'}}, body: JSON.stringify({{seq: 3}})}})
              .then(() => done('sent'), e => done('failed: ' + e));", served.addr), "args": []}),
        ),
    );
    assert!(foreign.is_string(), "{foreign}");
    std::thread::sleep(Duration::from_millis(300));
    let cookie = served.login();
    let page = served.journal(&cookie, "");
    assert!(
        page["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "applied"),
        "nothing was undone: {page}"
    );
}

/// A console beside a worker fleet (a NATS server of its own, a roots directory, a policy that asks
/// before `write_file`), and a worker whose job `fleet-1` has published its question.
struct Fleet {
    served: Served,
    roots: tempfile::TempDir,
    spec: worker_support::WorkerSpec,
    asked: worker_support::WorkerProcess,
    _nats: worker_support::Nats,
}

impl Fleet {
    fn start(test: &str) -> Option<Fleet> {
        use worker_support::{Nats, WorkerSpec, anthropic_turn, nats_server_binary, submit_job};
        let nats = Nats::start(nats_server_binary(test)?);
        let roots = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(roots.path().join("r1")).unwrap();
        let policy = roots.path().join("ask.toml");
        std::fs::write(
            &policy,
            "default = \"workspace-write\"\n[tools.write_file]\npaths = [\"**\"]\napproval = \"ask\"\n",
        )
        .unwrap();
        let mut spec = WorkerSpec::new(nats.url(), roots.path());
        spec.policy = Some(policy);
        spec.ack_wait_ms = 1_000;
        let url = nats.url();
        let served = Served::start_with(|runtime| {
            runtime.block_on(async {
                let js = async_nats::jetstream::new(async_nats::connect(&url).await.unwrap());
                Some(
                    turngate::worker::approvals::FleetApprovals::open(js, Default::default())
                        .await
                        .unwrap(),
                )
            })
        });
        let asked = spec.spawn(&[]);
        let calls = [(
            "f1".to_owned(),
            "write_file",
            json!({"path": "fleet.txt", "content": "from the page"}),
        )];
        let job = turngate::worker::job::Job {
            id: "fleet-1".into(),
            provider: turngate::Provider::Anthropic,
            root: "r1".into(),
            forced_tool_choice: false,
            max_output_tokens: None,
            stream: anthropic_turn(&calls, false).into(),
        };
        served
            .runtime
            .block_on(submit_job(&nats.url(), &Default::default(), &job));
        Some(Fleet {
            served,
            roots,
            spec,
            asked,
            _nats: nats,
        })
    }

    fn written(&self) -> Option<String> {
        std::fs::read_to_string(self.roots.path().join("r1/fleet.txt")).ok()
    }

    /// Starts the next worker and waits until it has applied the job's call; the journal's entries.
    fn applied_by_the_next_worker(&self) -> usize {
        let _next = self.spec.spawn(&[]);
        let root = self.roots.path().join("r1");
        let applied = worker_support::wait_until(Duration::from_secs(60), || {
            !worker_support::journal(&root).is_empty() && self.written().is_some()
        });
        assert!(applied, "the next worker did not apply the approved call");
        worker_support::journal(&root).len()
    }
}

/// A worker fleet's question beside the root's: shown with its job, answered from the page while the
/// worker that asked is dead, and applied once by the worker that runs the job next.
#[test]
fn a_fleet_s_question_is_answered_from_the_page_after_its_worker_died_and_applies_once() {
    let Some(mut fleet) = Fleet::start("a_fleet_s_question_is_answered_from_the_page") else {
        return;
    };
    let served = &fleet.served;
    let cookie = served.login();
    let question = waiting(served, &cookie, 1).remove(0);
    assert_eq!(question["fleet"], true, "{question}");
    assert_eq!(question["turn"], "fleet-1");
    assert_eq!(question["request"]["id"], "f1");
    assert_eq!(question["request"]["changes"][0]["path"], "fleet.txt");
    fleet.asked.kill();
    let digest = question["digest"].as_str().unwrap().to_owned();
    let reply = served.answer(&cookie, json!([{"digest": digest, "approve": true}]));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(waiting(served, &cookie, 0).len(), 0);
    assert_eq!(fleet.written(), None, "applied with no worker running");
    assert_eq!(fleet.applied_by_the_next_worker(), 1);
    assert_eq!(fleet.written().as_deref(), Some("from the page"));
    // The first answer stands: the page cannot answer it again.
    let again = fleet
        .served
        .answer(&cookie, json!([{"digest": digest, "approve": false}]));
    assert_eq!(again.status, 409, "{again:?}");
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver: the README's second test command"]
fn in_a_browser_a_fleet_s_question_is_approved_after_its_worker_died_and_applies_once() {
    let Some(mut fleet) = Fleet::start("in_a_browser_a_fleet_s_question_is_approved") else {
        return;
    };
    let browser = Browser::start();
    browser.open(&page_url(&fleet.served));
    browser.until(
        "the fleet's question on the page",
        "return document.querySelector('#questions .question') !== null",
    );
    let shown = browser.run("return document.getElementById('questions').innerText");
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("Job fleet-1 (worker fleet)") && shown.contains("+from the page"),
        "{shown}"
    );
    browser.screenshot("approvals-fleet");
    fleet.asked.kill();
    browser.click("#questions", "Approve");
    let said = browser.status();
    assert!(said.starts_with("answered"), "{said}");
    assert_eq!(fleet.written(), None, "applied with no worker running");
    assert_eq!(fleet.applied_by_the_next_worker(), 1);
    assert_eq!(fleet.written().as_deref(), Some("from the page"));
}
