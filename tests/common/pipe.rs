//! The command line with its reader gone, as in `turngate tools list | true`.

#![allow(dead_code)] // each test binary uses its own subset of these helpers

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `command` with its stdout a pipe whose reader is already closed, and holds it to ending as it
/// would have: exit `expected`, and nothing on stderr about a panic or the pipe. Says what differed.
pub fn ends_quietly(command: &mut Command, expected: i32) -> Result<(), String> {
    run(command.stdin(Stdio::null()), None, expected)
}

/// As [`ends_quietly`], for a command that answers what it reads: `input` is written to its stdin, which
/// stays open (a client that is still there, but no longer reads) until the command has exited.
pub fn ends_quietly_reading(
    command: &mut Command,
    input: &[u8],
    expected: i32,
) -> Result<(), String> {
    run(command.stdin(Stdio::piped()), Some(input), expected)
}

fn run(command: &mut Command, input: Option<&[u8]>, expected: i32) -> Result<(), String> {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = command
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = input.map(|input| {
        let mut stdin = child.stdin.take().unwrap();
        // The command may have ended before reading it all: a write that fails here is no failure.
        let _ = stdin.write_all(input);
        stdin
    });
    let out = child.wait_with_output().unwrap();
    drop(stdin);
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
