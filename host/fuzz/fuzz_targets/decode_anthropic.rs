//! Bytes fed to the Anthropic decoder in several chunkings: no panic, the same turn whatever the chunking, and
//! the invariants of `turngate_fuzz::harness::check_decoder`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turngate_fuzz::harness::check_decoder;
use turngate_fuzz::turn::Provider;

fuzz_target!(|data: &[u8]| {
    check_decoder(Provider::Anthropic, data);
});
