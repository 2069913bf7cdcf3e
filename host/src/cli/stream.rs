//! Reading a turn for `turngate run`: the STREAM argument (a streamed body or a whole JSON response body),
//! incremental decoding, text echoed to stderr.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use turngate::Turn;
use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::turn::Provider;

/// Bytes read per `read` call; a pipe hands over whatever has arrived, up to this.
const READ_CHUNK: usize = 64 * 1024;

/// Where the raw response body comes from.
pub enum StreamSource {
    /// Standard input (`-` or no argument).
    Stdin,
    /// A file.
    File(PathBuf),
    /// The body itself, given on the command line.
    Inline(String),
}

impl StreamSource {
    /// `-` or nothing is standard input; text that looks like SSE (has a newline or starts with a field
    /// name or a comment) or like a whole JSON body (starts with `{` or `[`) is the body itself; anything
    /// else is a file path.
    pub fn from_arg(arg: Option<String>) -> StreamSource {
        match arg {
            None => StreamSource::Stdin,
            Some(arg) if arg == "-" => StreamSource::Stdin,
            Some(arg)
                if arg.contains('\n')
                    || arg.starts_with("data:")
                    || arg.starts_with("event:")
                    || arg.starts_with(':')
                    || arg.starts_with('{')
                    || arg.starts_with('[') =>
            {
                StreamSource::Inline(arg)
            }
            Some(arg) => StreamSource::File(PathBuf::from(arg)),
        }
    }
}

/// Consumes the whole stream into a [`Turn`]. Text deltas are echoed to `echo` as they arrive; tool input
/// is never acted on here, only collected.
pub fn read_turn(
    source: StreamSource,
    provider: Provider,
    forced_tool_choice: bool,
    max_output_tokens: Option<u64>,
    echo: &mut dyn Write,
) -> Result<Turn> {
    let options = DecoderOptions {
        forced_tool_choice,
        max_output_tokens,
        ..DecoderOptions::default()
    };
    let mut decoder = TurnDecoder::with_options(provider, options);
    let mut feed = |bytes: &[u8], echo: &mut dyn Write| {
        for delta in decoder.feed(bytes) {
            // Echo is best effort: a closed stderr must not stop the turn from being read.
            let _ = echo.write_all(delta.text.as_bytes());
            let _ = echo.flush();
        }
    };
    match source {
        StreamSource::Inline(body) => feed(body.as_bytes(), echo),
        StreamSource::Stdin => pump(&mut io::stdin().lock(), &mut feed, echo)
            .context("reading the stream from standard input")?,
        StreamSource::File(path) => {
            // The stream file is the user's argument, not a path beneath the root.
            #[allow(clippy::disallowed_methods)]
            let mut file = std::fs::File::open(&path)
                .with_context(|| format!("opening stream {}", path.display()))?;
            pump(&mut file, &mut feed, echo)
                .with_context(|| format!("reading stream {}", path.display()))?;
        }
    }
    let (turn, deltas) = decoder.finish_with_deltas();
    for delta in deltas {
        let _ = echo.write_all(delta.text.as_bytes());
        let _ = echo.flush();
    }
    Ok(turn)
}

fn pump(
    input: &mut dyn Read,
    feed: &mut dyn FnMut(&[u8], &mut dyn Write),
    echo: &mut dyn Write,
) -> io::Result<()> {
    let mut buffer = vec![0; READ_CHUNK];
    loop {
        match input.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => feed(&buffer[..n], echo),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
