//! `turngate mcp`: flags and glue around `turngate::mcp`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use turngate::mcp::McpServer;
use turngate::mcp::http::{ENDPOINT, HttpOptions};
use turngate::{Instances, Root};

use crate::{EXIT_OK, ToolboxArgs, load_policy};

/// `turngate mcp`'s flags.
#[derive(Args)]
pub struct McpArgs {
    /// The directory calls are confined to.
    #[arg(long)]
    root: PathBuf,
    /// A policy file (TOML); without one, every tool may act anywhere inside the root.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Append one audit record (JSON Lines) per call to this file.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio. A non-loopback address needs
    /// --token-file.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// HTTP: require `Authorization: Bearer <token>`, the token being this file's content (trimmed).
    #[arg(long, requires = "listen", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// HTTP: accept this `Origin` (as `http://localhost:3000`); any other Origin header is refused.
    #[arg(long, requires = "listen", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// HTTP: accept this `Host` besides the loopback names (needed when clients reach the server by
    /// another name).
    #[arg(long, requires = "listen", value_name = "HOST")]
    allow_host: Vec<String>,
    /// Most calls running at once (each in a fresh instance); default: the number of cores.
    #[arg(long)]
    max_concurrent: Option<usize>,
    #[command(flatten)]
    toolbox: ToolboxArgs,
}

/// Runs the server until the client disconnects (stdio) or the process is stopped (HTTP).
pub async fn serve(args: McpArgs) -> Result<ExitCode> {
    let policy = load_policy(args.policy.as_ref())?;
    let root =
        Root::open(&args.root).with_context(|| format!("opening root {}", args.root.display()))?;
    // The log is the user's file, outside the root's scope.
    #[allow(clippy::disallowed_methods)]
    let log: Option<Box<dyn std::io::Write + Send>> = match &args.log {
        Some(path) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening log {}", path.display()))?,
        )),
        None => None,
    };
    let max_concurrent = args.max_concurrent.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if max_concurrent == 0 {
        bail!("--max-concurrent must be at least 1");
    }
    let http = match args.listen {
        Some(addr) => Some((addr, http_options(&args, addr)?)),
        None => None,
    };
    let toolbox = args
        .toolbox
        .builder()
        .instances(Instances::Pooled)
        .max_concurrent_calls(max_concurrent)
        .build()
        .await?;
    let server = McpServer::new(toolbox, root, policy, log);
    match http {
        None => server.serve_stdio().await?,
        Some((addr, options)) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on {addr}"))?;
            let local = listener.local_addr()?;
            eprintln!("listening on http://{local}{ENDPOINT}");
            turngate::mcp::http::serve(server, listener, options).await?;
        }
    }
    Ok(ExitCode::from(EXIT_OK))
}

fn http_options(args: &McpArgs, addr: SocketAddr) -> Result<HttpOptions> {
    let bearer_token = match &args.token_file {
        Some(path) => {
            // The token is the user's file, outside the root's scope.
            #[allow(clippy::disallowed_methods)]
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading token file {}", path.display()))?;
            let token = text.trim();
            if token.is_empty() {
                bail!("token file {} is empty", path.display());
            }
            Some(token.to_owned())
        }
        None => None,
    };
    if !addr.ip().is_loopback() && bearer_token.is_none() {
        bail!("--listen {addr} is reachable from other machines: give --token-file too");
    }
    Ok(HttpOptions {
        bearer_token,
        extra_hosts: args.allow_host.clone(),
        allowed_origins: args.allow_origin.clone(),
    })
}
