//! The binary's modules: reading streams for `run`, the `demo`, the tool author's commands, the
//! terminal glue of `agent` (and the approver `run` and `call` share), `journal` / `undo`,
//! `console`, `mcp`, `worker` / `submit`, and tools from registries (`tools add`, `update`, `remove`,
//! `publish`, `sign`).

//!
//! Everything the commands print on standard output goes through [`stdout`] (and the `out!` and
//! `outln!` macros over it): a reader that went away (`turngate tools list | head -1`) took all it
//! wanted, so what is left is dropped and the command ends as it would have, quietly, with its own
//! exit status (as ripgrep does), instead of panicking in `println!`.

use std::io::{self, Write};

/// Standard output as the commands print to it: a broken pipe drops the rest (see the module docs).
pub(crate) fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

/// [`stdout`]'s writer.
pub(crate) struct Stdout(io::StdoutLock<'static>);

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0.write(buf) {
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(buf.len()),
            written => written,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.0.flush() {
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            flushed => flushed,
        }
    }
}

/// `print!` to [`stdout`]: evaluates to the write's `io::Result`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!($crate::cli::stdout(), $($arg)*)
    }};
}

/// `println!` to [`stdout`]: evaluates to the write's `io::Result`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!($crate::cli::stdout(), $($arg)*)
    }};
}

pub(crate) use outln;

pub mod agent;
pub mod console;
pub mod demo;
pub mod journal;
pub mod mcp;
pub mod registry;
pub mod stream;
pub mod tools;
pub mod worker;
