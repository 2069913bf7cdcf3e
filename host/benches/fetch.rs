//! A tool's HTTP request against a native one, measured in the same run; prints a Markdown table.
//!
//! `cargo bench --bench fetch`. A hyper server on 127.0.0.1 answers `GET /kib` with 1 KiB. Rows:
//!
//! * the bundled `fetch` tool getting it through `Toolbox::call` (the gate with its URL check, a fresh
//!   instance, `wasi:http` through the policy hook, the host's own resolution and connection, the
//!   request record) against a native hyper client doing the same exchange (a new connection, one
//!   HTTP/1.1 request, the whole body read), as turngate's transport does;
//! * a no-op call (a tool without paths or network) against a native function call: the sandbox's
//!   fixed cost, to tell it from what the network path adds.
//!
//! Medians and p90 over many samples, taken alternately so both sides see the same machine.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use support::{KIB, kib_server, median, row};
use turngate::{CacheSetting, Policy, Root, Toolbox};

const SAMPLES: usize = 2000;

/// One native GET: a new connection, one HTTP/1.1 exchange, the whole body read.
async fn native_get(port: u16) -> usize {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get("/kib")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .len()
}

fn main() {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let port = kib_server(&server_runtime);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache.path().to_path_buf()))
                .component_file(env!("TURNGATE_TEST_GUEST_NOOP"))
                .unwrap()
                .build(),
        )
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = Root::open(work.path()).unwrap();
    let policy = Policy::from_toml(&format!(
        "default = \"read-only\"\n[tools.fetch.network]\nget = [\"http://127.0.0.1:{port}/**\"]\n"
    ))
    .unwrap();
    let input = format!(r#"{{"url":"http://127.0.0.1:{port}/kib"}}"#);
    let fetch = || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "fetch", &input));
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    };
    let native = || assert_eq!(runtime.block_on(native_get(port)), KIB.len());
    let noop = || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "noop", "{}"));
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    };
    let function = || std::hint::black_box(KIB.len());
    for _ in 0..50 {
        fetch();
        native();
        noop();
    }
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    let (mut fetched, mut natively, mut nooped, mut called) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        fetched.push(time(&fetch));
        natively.push(time(&native));
        nooped.push(time(&noop));
        called.push(time(&|| {
            function();
        }));
    }
    println!(
        "| case | turngate (median) | turngate (p90) | baseline | baseline (median) | baseline (p90) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    row(
        "fetch 1 KiB from 127.0.0.1 (`Toolbox::call`)",
        &fetched,
        "native hyper GET, new connection",
        &natively,
    );
    row(
        "no-op call (no paths, no network)",
        &nooped,
        "native function call",
        &called,
    );
    let overhead = |ours: &[Duration], base: &[Duration]| {
        median(ours.to_vec()).as_secs_f64() - median(base.to_vec()).as_secs_f64()
    };
    println!();
    println!(
        "Overhead of fetch over the native GET: {:.1} µs; of it, the sandbox's fixed cost (no-op call): {:.1} µs.",
        overhead(&fetched, &natively) * 1e6,
        overhead(&nooped, &called) * 1e6
    );
}
