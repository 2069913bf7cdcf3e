//! The command line with its reader gone, as in `turngate tools list | true`.

use std::process::{Command, Stdio};

/// Runs `command` with its stdout a pipe whose reader is already closed, and holds it to ending as it
/// would have: exit `expected`, and nothing on stderr about a panic or the pipe. Says what differed.
pub fn ends_quietly(command: &mut Command, expected: i32) -> Result<(), String> {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = command
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(expected)
        || stderr.contains("panicked")
        || stderr.contains("Broken pipe")
    {
        return Err(format!(
            "exit {:?}, expected {expected}; stderr: {stderr}",
            out.status.code()
        ));
    }
    Ok(())
}
