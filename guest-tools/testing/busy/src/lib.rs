//! `busy`: a test guest that declares no paths (so its calls get no view and run on the caller's task)
//! and, as its input asks, computes forever (`{"mode": "spin"}`) or sleeps forever (`{"mode":
//! "sleep"}`), after printing `busy: started`. The host must stop either at the wall-time limit or a
//! cancellation, and keep running the caller's other tasks meanwhile. Never bundled.

use turngate_guest::{Descriptor, Guest, ToolError, describe};

struct Busy;

impl Guest for Busy {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "mode": { "enum": ["spin", "sleep"] } },
            "required": ["mode"],
            "additionalProperties": false
        });
        describe("busy", "Computes or sleeps forever.", &schema, &[])
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: serde_json::Value = turngate_guest::parse_input(&input)?;
        // What a stopped call's outcome keeps of its stdout shows it was running when it was stopped.
        println!("busy: started");
        if input.get("mode").and_then(serde_json::Value::as_str) == Some("sleep") {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

turngate_guest::export!(Busy);
