//! `spin_describe`: a test guest whose `describe` never returns (it computes forever), so the host must
//! stop it at the wall-time limit and refuse it at load. Never bundled.

use turngate_guest::{Descriptor, Guest, ToolError};

struct SpinDescribe;

impl Guest for SpinDescribe {
    fn describe() -> Descriptor {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn call(_input: String) -> Result<String, ToolError> {
        Err(ToolError::Failed("never called".into()))
    }
}

turngate_guest::export!(SpinDescribe);
