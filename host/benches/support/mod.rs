//! Timing helpers shared by the bench binaries: medians over many samples, after a warm-up.

#![allow(dead_code)] // each bench uses its own subset

use std::convert::Infallible;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::json;

/// The median of `samples`.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The `p`th percentile of `samples` (nearest rank).
pub fn percentile(mut samples: Vec<Duration>, p: usize) -> Duration {
    samples.sort();
    let rank = (samples.len() * p).div_ceil(100).clamp(1, samples.len());
    samples[rank - 1]
}

/// Runs `f` a few times to warm up, then `samples` times, and returns the median duration.
pub fn measure(samples: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..samples.clamp(1, 50) {
        f();
    }
    median(
        (0..samples)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// Runs `f` a few times to warm up, then `count` times, and returns every duration.
pub fn samples(count: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..count.clamp(1, 20) {
        f();
    }
    (0..count)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect()
}

/// Prints one Markdown table row: `name`, its median and p90, the baseline's name, median and p90, and
/// the ratio of the medians.
pub fn row(name: &str, ours: &[Duration], baseline_name: &str, baseline: &[Duration]) {
    let (m, b) = (median(ours.to_vec()), median(baseline.to_vec()));
    println!(
        "| {name} | {m:.2?} | {:.2?} | {baseline_name} | {b:.2?} | {:.2?} | {:.2}× |",
        percentile(ours.to_vec(), 90),
        percentile(baseline.to_vec(), 90),
        m.as_secs_f64() / b.as_secs_f64()
    );
}

/// An Anthropic turn of `calls` write_file calls, 1 KiB each, to distinct files.
pub fn write_turn(calls: usize) -> String {
    let mut s = String::new();
    let mut event = |name: &str, data: serde_json::Value| {
        s.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}),
    );
    let content = "x".repeat(1023) + "\n";
    for i in 0..calls {
        let input = json!({"path": format!("f{i}.txt"), "content": content}).to_string();
        event(
            "content_block_start",
            json!({"type":"content_block_start","index":i,"content_block":{"type":"tool_use","id":format!("u{i}"),"name":"write_file","input":{}}}),
        );
        event(
            "content_block_delta",
            json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":input}}),
        );
        event(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
    }
    event(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}),
    );
    event("message_stop", json!({"type":"message_stop"}));
    s
}

/// The native baseline of a durable write: temporary file, write, fsync, rename (the directory is not
/// flushed: a caller that needs the new name durable flushes it).
#[allow(clippy::disallowed_methods)] // the baseline is plain std::fs on purpose
pub fn native_durable_write(dir: &Path, name: &str, bytes: &[u8]) {
    let temp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
    std::fs::rename(&temp, dir.join(name)).unwrap();
}

/// The `turngate` binary of this build.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_turngate"))
}

/// `turngate mcp` on `root` with `cache` as its cache, over piped stdio.
pub fn spawn_mcp(root: &Path, cache: &Path) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new(bin())
        .args(["mcp", "--cache-dir"])
        .arg(cache)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The body `kib_server` answers with.
pub const KIB: &[u8] = &[b'x'; 1024];

/// Serves [`KIB`] (`text/plain`) for any request on 127.0.0.1 from `runtime`; answers the port.
pub fn kib_server(runtime: &tokio::runtime::Runtime) -> u16 {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "text/plain")
                            .body(Full::new(Bytes::from_static(KIB)))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}
