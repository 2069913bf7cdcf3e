//! The Python and JavaScript example tools (`guest-tools/examples/`) under the same gate and sandbox as the
//! bundled ones: end to end through `turngate run --tools DIR`, containment by the gate and by the
//! sandbox, the Python network tool against a server the test starts on 127.0.0.1, and `turngate tools
//! check`.
//!
//! The components are built on first use by `guest-tools/examples/build.sh`, which installs the pinned
//! tool-chains (a Python virtualenv with componentize-py, `npm ci` for jco) inside the target directory.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{Workspace, build, call, hash_tree, test_cache};
use serde_json::{Value, json};
use turngate::gate::check_call;
use turngate::{CallError, Policy, RunError, Toolbox};

/// Builds the example components once per test run and returns their directory.
fn examples_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("examples");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/examples/build.sh");
        let status = Command::new("bash")
            .arg(&script)
            .arg(&out)
            .status()
            .expect("run build.sh");
        assert!(status.success(), "guest-tools/examples/build.sh failed");
        out
    })
}

/// The bundled tools plus both examples, under the default limits (the Python runtime needs about 14 MiB).
fn toolbox() -> &'static Toolbox {
    static TOOLBOX: OnceLock<Toolbox> = OnceLock::new();
    TOOLBOX.get_or_init(|| {
        build(
            Toolbox::builder()
                .cache(test_cache())
                .tools_dir(examples_dir()),
        )
    })
}

fn turngate_run(root: &Path, provider: &str, stream: &str) -> (Option<i32>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
        .env(
            "TURNGATE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
        )
        .args(["run", "--provider", provider, "--tools"])
        .arg(examples_dir())
        .arg("--root")
        .arg(root)
        .arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/examples")
                .join(stream),
        )
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{stream}: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

#[test]
fn python_text_stats_answers_its_call_through_turngate_run() {
    let ws = Workspace::new();
    ws.write("essay.txt", "the cat and the dog and the bird\nsat\n");
    let (code, report) = turngate_run(&ws.root_path(), "anthropic", "anthropic_text_stats.sse");
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        report["calls"],
        json!([{"kind": "function", "id": "t1", "name": "text_stats", "status": "ok", "reason": null, "changes": []}])
    );
    let result = &report["history"][1]["content"][0];
    assert_eq!(result["tool_use_id"], "t1");
    assert_eq!(result["is_error"], false);
    let stats: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(stats["words"], 9, "{stats}");
    assert_eq!(stats["lines"], 2, "{stats}");
}

#[test]
fn javascript_csv_to_json_answers_its_call_through_turngate_run() {
    let ws = Workspace::new();
    ws.write("data/people.csv", "name,age\nAda,36\n\"Turing, Alan\",41\n");
    let (code, report) = turngate_run(
        &ws.root_path(),
        "openai-chat",
        "openai-chat_csv_to_json.sse",
    );
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["calls"][0]["id"], "c1");
    assert_eq!(report["calls"][0]["status"], "ok");
    let tool_message = &report["history"][1];
    assert_eq!(tool_message["role"], "tool");
    assert_eq!(tool_message["tool_call_id"], "c1");
    let written: Value = serde_json::from_str(&ws.read("data/people.json")).unwrap();
    assert_eq!(
        written,
        json!([{"name": "Ada", "age": "36"}, {"name": "Turing, Alan", "age": "41"}])
    );
}

#[test]
fn the_gate_refuses_example_paths_outside_the_root() {
    let ws = Workspace::new();
    let before = hash_tree(&ws.outside_path());
    for (tool, input) in [
        ("text_stats", json!({"path": "../outside/secret.txt"})),
        (
            "csv_to_json",
            json!({"input_path": "../outside/secret.txt", "output_path": "out.json"}),
        ),
        (
            "csv_to_json",
            json!({"input_path": "in.csv", "output_path": "../outside/out.json"}),
        ),
    ] {
        let outcome = call(
            toolbox(),
            &ws.root,
            &Policy::allow_all(),
            tool,
            &input.to_string(),
        );
        match outcome.result {
            Err(CallError::Gate(e)) => assert_eq!(e.step(), "path", "{tool}: {e}"),
            other => panic!("{tool}: expected a path refusal, got {other:?}"),
        }
    }
    assert_eq!(hash_tree(&ws.outside_path()), before);
}

/// Approves a call on a directory inside the root, then swaps that directory for a symlink to the outside:
/// only the sandbox stands between the tool and the outside files.
fn run_after_swap(ws: &Workspace, tool: &str, input: Value, dir: &str) -> turngate::CallOutcome {
    let approved = check_call(
        toolbox(),
        &ws.root,
        &Policy::allow_all(),
        tool,
        &input.to_string(),
    )
    .unwrap_or_else(|e| panic!("{tool}: the gate must approve {input}: {e}"));
    let inside = ws.root_path().join(dir);
    std::fs::remove_dir_all(&inside).unwrap();
    std::os::unix::fs::symlink(ws.outside_path(), &inside).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(toolbox().run(&ws.root, &Policy::allow_all(), &approved))
}

#[test]
fn the_sandbox_stops_a_python_read_through_a_swapped_symlink() {
    let ws = Workspace::new();
    ws.write("docs/secret.txt", "inside words only\n");
    let outcome = run_after_swap(
        &ws,
        "text_stats",
        json!({"path": "docs/secret.txt"}),
        "docs",
    );
    assert!(
        matches!(outcome.result, Err(CallError::Run(RunError::Tool(_)))),
        "{:?}",
        outcome.result
    );
}

#[test]
fn the_sandbox_stops_a_javascript_write_through_a_swapped_symlink() {
    let ws = Workspace::new();
    ws.write("data/in.csv", "a,b\n1,2\n");
    std::fs::write(ws.outside_path().join("in.csv"), "a,b\n3,4\n").unwrap();
    let before = hash_tree(&ws.outside_path());
    let input = json!({"input_path": "data/in.csv", "output_path": "data/out.json"});
    let outcome = run_after_swap(&ws, "csv_to_json", input, "data");
    assert!(
        matches!(outcome.result, Err(CallError::Run(RunError::Tool(_)))),
        "{:?}",
        outcome.result
    );
    assert_eq!(
        hash_tree(&ws.outside_path()),
        before,
        "nothing was written outside"
    );
}

/// A server on 127.0.0.1 answering every request with a small HTML page; answers its port and the
/// request lines it saw.
fn page_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            log.lock().unwrap().push(line.trim_end().to_owned());
            // The rest of the head, up to the empty line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let page = "<html><head><title>\n  Ada &amp; the\n Engine </title></head><body>hi</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn python_page_title_fetches_only_what_its_network_grant_allows() {
    let ws = Workspace::new();
    let (port, seen) = page_server();
    let policy = Policy::from_toml(&format!(
        "[tools.page_title.network]\nget = [\"http://127.0.0.1:{port}/pages/**\"]\n"
    ))
    .unwrap();
    let page_title = |url: String| {
        call(
            toolbox(),
            &ws.root,
            &policy,
            "page_title",
            &json!({ "url": url }).to_string(),
        )
    };
    let outcome = page_title(format!("http://127.0.0.1:{port}/pages/ada"));
    let answer: Value = serde_json::from_str(&outcome.result.unwrap()).unwrap();
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["title"], "Ada & the Engine", "{answer}");
    assert_eq!(*seen.lock().unwrap(), ["GET /pages/ada HTTP/1.1"]);
    // A declared URL outside the grant never starts the call: the server sees nothing more.
    let outcome = page_title(format!("http://127.0.0.1:{port}/private/ada"));
    match outcome.result {
        Err(CallError::Gate(e)) => assert_eq!(e.step(), "url", "{e}"),
        other => panic!("expected a refusal at the gate, got {other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// The JavaScript network example awaits `fetch` from its `call` (componentize-js runs the event loop
/// until the promise settles); its request goes through the same grant and hook as any other.
#[test]
fn javascript_url_info_awaits_fetch_within_its_network_grant() {
    let ws = Workspace::new();
    let (port, seen) = page_server();
    let policy = Policy::from_toml(&format!(
        "[tools.url_info.network]\nget = [\"http://127.0.0.1:{port}/pages/**\"]\n"
    ))
    .unwrap();
    let url_info = |url: String| {
        call(
            toolbox(),
            &ws.root,
            &policy,
            "url_info",
            &json!({ "url": url }).to_string(),
        )
    };
    let outcome = url_info(format!("http://127.0.0.1:{port}/pages/ada"));
    let answer: Value = serde_json::from_str(&outcome.result.unwrap()).unwrap();
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(
        answer["content_type"], "text/html; charset=utf-8",
        "{answer}"
    );
    assert_eq!(answer["bytes"], 81, "{answer}");
    assert_eq!(*seen.lock().unwrap(), ["GET /pages/ada HTTP/1.1"]);
    let [record] = &outcome.requests[..] else {
        panic!("{:?}", outcome.requests)
    };
    assert_eq!(record.status, Some(200));
    // A declared URL outside the grant never starts the call: the server sees nothing more.
    let outcome = url_info(format!("http://127.0.0.1:{port}/private/ada"));
    match outcome.result {
        Err(CallError::Gate(e)) => assert_eq!(e.step(), "url", "{e}"),
        other => panic!("expected a refusal at the gate, got {other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// The Python example built for WASI 0.3 (componentize-py 0.25, `call` an `async def`) reads through
/// `wasi:filesystem@0.3.0` and the same view as a 0.2 tool: the approved file reads, anything else the
/// call was not approved for is absent.
#[test]
fn python_file_head_reads_through_wasi_0_3_within_its_view() {
    let ws = Workspace::new();
    ws.write("notes.txt", "one\ntwo\nthree\n");
    ws.write("secret.txt", "secret\n");
    let tool = toolbox().get("file_head").unwrap();
    assert_eq!(tool.wasi(), Some("0.3"));
    let head = |input: Value| {
        call(
            toolbox(),
            &ws.root,
            &Policy::allow_all(),
            "file_head",
            &input.to_string(),
        )
    };
    let outcome = head(json!({"path": "notes.txt", "lines": 2}));
    let answer: Value = serde_json::from_str(&outcome.result.unwrap()).unwrap();
    assert_eq!(answer["text"], "one\ntwo\n", "{answer}");
    assert_eq!(answer["lines"], 2, "{answer}");
    match head(json!({"path": "missing.txt"})).result {
        Err(CallError::Run(RunError::Tool(e))) => {
            assert!(e.to_string().contains("not found"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // The gate resolves the declared path: outside the root, the call never starts.
    match head(json!({"path": "../outside/secret.txt"})).result {
        Err(CallError::Gate(e)) => assert_eq!(e.step(), "path", "{e}"),
        other => panic!("{other:?}"),
    }
}

/// The Rust example built for WASI 0.3 (wit-bindgen's async export, the `wasip3` crate) counts a file
/// it reads through a 0.3 stream; a file its call was not approved for is absent.
#[test]
fn rust_line_count_reads_through_wasi_0_3() {
    let ws = Workspace::new();
    ws.write("notes.txt", "one two\nthree\n");
    assert_eq!(toolbox().get("line_count").unwrap().wasi(), Some("0.3"));
    let count = |path: &str| {
        call(
            toolbox(),
            &ws.root,
            &Policy::allow_all(),
            "line_count",
            &json!({ "path": path }).to_string(),
        )
    };
    let answer: Value = serde_json::from_str(&count("notes.txt").result.unwrap()).unwrap();
    assert_eq!(
        answer,
        json!({"path": "notes.txt", "lines": 2, "words": 3, "bytes": 14})
    );
    match count("missing.txt").result {
        Err(CallError::Run(RunError::Tool(e))) => {
            assert!(e.to_string().contains("not found"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_example_passes_the_conformance_check() {
    for file in [
        "text_stats.wasm",
        "page_title.wasm",
        "csv_to_json.wasm",
        "url_info.wasm",
        "file_head.wasm",
        "line_count.wasm",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_turngate"))
            .env(
                "TURNGATE_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("turngate-cache"),
            )
            .args(["tools", "check"])
            .arg(examples_dir().join(file))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{file}: {text}");
    }
}
