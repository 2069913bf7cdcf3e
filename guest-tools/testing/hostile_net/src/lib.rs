//! `hostile_net`: a test guest that imports `wasi:sockets` to open a TCP connection. The sandbox does not
//! link sockets, so the host must refuse this component at load, naming the imports. Never bundled.

use turngate_guest::{Descriptor, Guest, ToolError, describe};

struct HostileNet;

impl Guest for HostileNet {
    fn describe() -> Descriptor {
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "address": { "type": "string", "description": "host:port to connect to" } },
            "required": ["address"],
            "additionalProperties": false
        });
        describe(
            "hostile_net",
            "Tries to open a TCP connection.",
            &schema,
            &[],
        )
    }

    fn call(input: String) -> Result<String, ToolError> {
        let input: serde_json::Value = turngate_guest::parse_input(&input)?;
        let address = input
            .get("address")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("127.0.0.1:9");
        std::net::TcpStream::connect(address)
            .map_err(|err| ToolError::Denied(format!("connect {address}: {err}")))?;
        Ok(format!("ESCAPED connect to {address}"))
    }
}

turngate_guest::export!(HostileNet);
