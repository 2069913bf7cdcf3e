//! The `turngate mcp` command the MCP tests start (with the tests' precompiled cache), and a
//! `--listen 127.0.0.1:0` process of it: its URL read from its `listening on URL` stderr line, all of
//! its stderr collected for failure messages, killed on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the server may take to print its URL (a loaded 2-core machine; only a hang reaches it).
const STARTUP_PATIENCE: Duration = Duration::from_secs(180);

/// `turngate mcp --root ROOT` with the tests' precompiled cache: what both the stdio and the HTTP tests
/// start, each adding its transport's flags and pipes.
pub fn mcp_command(root: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turngate"));
    command
        .arg("mcp")
        .arg("--root")
        .arg(root)
        .arg("--cache-dir")
        .arg(super::test_cache_dir());
    command
}

/// A running `turngate mcp --listen` server.
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// Everything it wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    /// Starts `turngate mcp --root ROOT --listen 127.0.0.1:0 EXTRA...`.
    pub fn start(root: &Path, extra: &[&str]) -> HttpServer {
        let mut child = mcp_command(root)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start turngate mcp --listen");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (send_url, url_line) = channel();
        let pipe = child.stderr.take().unwrap();
        let collected = Arc::clone(&stderr);
        // Keeps draining stderr, so the server never blocks on it.
        std::thread::spawn(move || {
            let mut send_url = Some(send_url);
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("listening on ")
                    && let Some(send_url) = send_url.take()
                {
                    send_url.send(line.clone()).ok();
                }
                let mut text = collected.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        let line = url_line.recv_timeout(STARTUP_PATIENCE).unwrap_or_else(|_| {
            panic!(
                "turngate mcp --listen printed no URL ({:?}): {}",
                child.try_wait(),
                stderr.lock().unwrap()
            )
        });
        let url = line["listening on ".len()..].to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{line}"
        );
        HttpServer { child, url, stderr }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
