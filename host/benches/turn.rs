//! Decode and gate throughput per provider on a large turn, and the latency from a turn's last byte to
//! its result; prints Markdown tables. `cargo bench --bench turn`.
//!
//! The large turn holds about 1 MB of text (1000 deltas of 1 KiB) and 100 `write_file` calls to distinct
//! files, in each provider's wire format. Rows: decoding alone; decoding plus the gate's per-call checks
//! (strict parse, schema, path scope, policy) without running; and the whole pipeline, the 100 calls run
//! in the sandbox. Latency: the last byte of the seed's one-call turn to its checked result, next to the
//! same call through `Toolbox::call` in-process and through a `turngate call` process (warm cache).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{measure, median};

use serde_json::{Value, json};
use turngate::gate::check_call;
use turngate::providers::TurnDecoder;
use turngate::{CacheSetting, Policy, Provider, Root, Toolbox, TurnOptions, process_turn};

const TEXT_DELTAS: usize = 1000;
const CALLS: usize = 100;

fn event(name: Option<&str>, data: &Value, out: &mut String) {
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

fn call_input(i: usize) -> String {
    json!({"path": format!("f{i}.txt"), "content": format!("file {i}\n")}).to_string()
}

fn text_chunk() -> String {
    "lorem ipsum dolor sit amet "
        .repeat(38)
        .chars()
        .take(1024)
        .collect()
}

/// A large turn in `provider`'s format.
fn large_turn(provider: Provider) -> String {
    let mut s = String::new();
    let text = text_chunk();
    match provider {
        Provider::Anthropic => {
            event(
                Some("message_start"),
                &json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}),
                &mut s,
            );
            event(
                Some("content_block_start"),
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
                &mut s,
            );
            for _ in 0..TEXT_DELTAS {
                event(
                    Some("content_block_delta"),
                    &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
                    &mut s,
                );
            }
            event(
                Some("content_block_stop"),
                &json!({"type":"content_block_stop","index":0}),
                &mut s,
            );
            for i in 0..CALLS {
                let index = i + 1;
                event(
                    Some("content_block_start"),
                    &json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":format!("u{i}"),"name":"write_file","input":{}}}),
                    &mut s,
                );
                event(
                    Some("content_block_delta"),
                    &json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":call_input(i)}}),
                    &mut s,
                );
                event(
                    Some("content_block_stop"),
                    &json!({"type":"content_block_stop","index":index}),
                    &mut s,
                );
            }
            event(
                Some("message_delta"),
                &json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}),
                &mut s,
            );
            event(
                Some("message_stop"),
                &json!({"type":"message_stop"}),
                &mut s,
            );
        }
        Provider::OpenAiChat => {
            let chunk = |delta: Value, finish: Value| json!({"id":"c","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
            event(
                None,
                &chunk(json!({"role":"assistant","content":""}), Value::Null),
                &mut s,
            );
            for _ in 0..TEXT_DELTAS {
                event(None, &chunk(json!({"content":text}), Value::Null), &mut s);
            }
            for i in 0..CALLS {
                event(
                    None,
                    &chunk(
                        json!({"tool_calls":[{"index":i,"id":format!("u{i}"),"type":"function","function":{"name":"write_file","arguments":call_input(i)}}]}),
                        Value::Null,
                    ),
                    &mut s,
                );
            }
            event(None, &chunk(json!({}), json!("tool_calls")), &mut s);
            s.push_str("data: [DONE]\n\n");
        }
        Provider::OpenAiResponses => {
            let mut seq = 0;
            let mut e = |kind: &str, mut data: Value, s: &mut String| {
                data["type"] = json!(kind);
                data["sequence_number"] = json!(seq);
                seq += 1;
                event(Some(kind), &data, s);
            };
            e(
                "response.created",
                json!({"response":{"id":"r","object":"response","status":"in_progress","output":[]}}),
                &mut s,
            );
            e(
                "response.output_item.added",
                json!({"output_index":0,"item":{"type":"message","id":"msg","role":"assistant","status":"in_progress","content":[]}}),
                &mut s,
            );
            for _ in 0..TEXT_DELTAS {
                e(
                    "response.output_text.delta",
                    json!({"item_id":"msg","output_index":0,"content_index":0,"delta":text}),
                    &mut s,
                );
            }
            let full: String = text.repeat(TEXT_DELTAS);
            let message = json!({"type":"message","id":"msg","role":"assistant","status":"completed","content":[{"type":"output_text","text":full,"annotations":[]}]});
            e(
                "response.output_item.done",
                json!({"output_index":0,"item":message}),
                &mut s,
            );
            let mut output = vec![message];
            for i in 0..CALLS {
                let id = format!("fc{i}");
                let item = json!({"type":"function_call","id":id,"call_id":format!("u{i}"),"name":"write_file","arguments":call_input(i),"status":"completed"});
                e(
                    "response.output_item.added",
                    json!({"output_index":i+1,"item":{"type":"function_call","id":id,"call_id":format!("u{i}"),"name":"write_file","arguments":"","status":"in_progress"}}),
                    &mut s,
                );
                e(
                    "response.function_call_arguments.delta",
                    json!({"item_id":id,"output_index":i+1,"delta":call_input(i)}),
                    &mut s,
                );
                e(
                    "response.function_call_arguments.done",
                    json!({"item_id":id,"output_index":i+1,"arguments":call_input(i)}),
                    &mut s,
                );
                e(
                    "response.output_item.done",
                    json!({"output_index":i+1,"item":item}),
                    &mut s,
                );
                output.push(item);
            }
            e(
                "response.completed",
                json!({"response":{"id":"r","object":"response","status":"completed","output":output}}),
                &mut s,
            );
        }
        Provider::Gemini => {
            for _ in 0..TEXT_DELTAS {
                event(
                    None,
                    &json!({"candidates":[{"content":{"role":"model","parts":[{"text":text}]},"index":0}]}),
                    &mut s,
                );
            }
            let parts: Vec<Value> = (0..CALLS)
                .map(|i| json!({"functionCall":{"name":"write_file","args":serde_json::from_str::<Value>(&call_input(i)).unwrap(),"id":format!("u{i}")}}))
                .collect();
            event(
                None,
                &json!({"candidates":[{"content":{"role":"model","parts":parts},"finishReason":"STOP","index":0}]}),
                &mut s,
            );
        }
    }
    s
}

fn decode(provider: Provider, body: &[u8]) -> turngate::Turn {
    let mut decoder = TurnDecoder::new(provider);
    for chunk in body.chunks(16 * 1024) {
        decoder.feed(chunk);
    }
    decoder.finish()
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let toolbox = runtime
        .block_on(
            Toolbox::builder()
                .cache(CacheSetting::Dir(cache.path().to_path_buf()))
                .build(),
        )
        .unwrap();
    let policy = Policy::allow_all();
    let work = tempfile::tempdir().unwrap();
    let root = Root::open(work.path()).unwrap();

    println!(
        "| provider | turn size | decode | decode + gate checks | whole pipeline (100 sandboxed writes) |"
    );
    println!("|---|---|---|---|---|");
    for provider in Provider::ALL {
        let body = large_turn(provider);
        let turn = decode(provider, body.as_bytes());
        assert!(turn.is_completed(), "{provider}: {:?}", turn.ending);
        assert_eq!(turn.calls.len(), CALLS);
        let decode_time = measure(20, || {
            std::hint::black_box(decode(provider, body.as_bytes()));
        });
        let checked = measure(20, || {
            let turn = decode(provider, body.as_bytes());
            for call in &turn.calls {
                check_call(&toolbox, &root, &policy, &call.name, &call.raw_input).unwrap();
            }
        });
        let whole = measure(5, || {
            let report = runtime.block_on(process_turn(
                &toolbox,
                &root,
                &policy,
                decode(provider, body.as_bytes()),
                TurnOptions::default(),
            ));
            assert!(report.all_ok());
        });
        println!(
            "| {} | {:.2} MB | {:.0} MB/s ({decode_time:.1?}) | {:.0} MB/s ({checked:.1?}) | {:.1} MB/s ({whole:.1?}) |",
            provider.as_str(),
            body.len() as f64 / 1e6,
            mb_per_s(body.len(), decode_time),
            mb_per_s(body.len(), checked),
            mb_per_s(body.len(), whole),
        );
    }

    println!();
    println!(
        "| provider | last byte to result (in-process) | same call, Toolbox::call | same call, `turngate call` process |"
    );
    println!("|---|---|---|---|");
    let seed_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/seed");
    let input = json!({"path": "notes.txt", "content": "Final notes\n"}).to_string();
    let bin = Path::new(env!("CARGO_BIN_EXE_turngate"));
    let process_cache = tempfile::tempdir().unwrap();
    let cache_flag = ["--cache-dir", process_cache.path().to_str().unwrap()];
    let run_process = || {
        let status = Command::new(bin)
            .arg("call")
            .args(cache_flag)
            .arg("--root")
            .arg(work.path())
            .args(["write_file", &input])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    run_process();
    let process = measure(30, run_process);
    let direct = measure(500, || {
        let outcome = runtime.block_on(toolbox.call(&root, &policy, "write_file", &input));
        assert!(outcome.result.is_ok());
    });
    for provider in Provider::ALL {
        let body =
            std::fs::read(seed_dir.join(format!("{}_complete.sse", provider.as_str()))).unwrap();
        let (head, last) = body.split_at(body.len() - 1);
        let latency = median(
            (0..500)
                .map(|_| {
                    let mut decoder = TurnDecoder::new(provider);
                    decoder.feed(head);
                    let start = Instant::now();
                    decoder.feed(last);
                    let report = runtime.block_on(process_turn(
                        &toolbox,
                        &root,
                        &policy,
                        decoder.finish(),
                        TurnOptions::default(),
                    ));
                    let elapsed = start.elapsed();
                    assert!(report.all_ok());
                    elapsed
                })
                .collect(),
        );
        println!(
            "| {} | {latency:.1?} | {direct:.1?} | {process:.1?} |",
            provider.as_str()
        );
    }
}
