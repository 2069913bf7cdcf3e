//! `not_a_tool`: a plain WASI command (the `wasi:cli/command` world), which the host must refuse as
//! not being a turngate tool. Never bundled.

fn main() {
    println!("I am a command, not a tool.");
}
