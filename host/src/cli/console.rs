//! `turngate console`: flags and glue around `turngate::console`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use turngate::Root;
use turngate::console::{Console, ConsoleOptions};
use turngate::worker::approvals::FleetApprovals;
use turngate::worker::names::{DEFAULT_PREFIX, Names};

use crate::EXIT_OK;

// `turngate console`'s flags.
#[derive(Args)]
pub struct ConsoleArgs {
    /// The root whose journal the page shows (and undoes in).
    #[arg(long)]
    root: PathBuf,
    /// The audit log to show (the JSON Lines file `run`, `call` or `mcp --log` append to).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The address to serve at (default 127.0.0.1:0, any free port); a loopback address only.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// A policy file (TOML): whose signatures a `--locked` registry tool must carry.
    #[arg(long)]
    policy: Option<PathBuf>,
    #[command(flatten)]
    toolbox: crate::ToolboxArgs,
    /// A worker fleet's NATS server (`nats://host:port`): its questions (`approval = "ask"` on
    /// workers) are listed and answered beside the root's.
    #[arg(long, value_name = "URL")]
    nats: Option<String>,
    /// The fleet's prefix (with --nats).
    #[arg(long, default_value = DEFAULT_PREFIX, requires = "nats")]
    prefix: String,
}

/// Serves the console until the process is stopped; prints its address, with the token, first.
pub async fn serve(args: ConsoleArgs) -> Result<ExitCode> {
    let root =
        Root::open(&args.root).with_context(|| format!("opening root {}", args.root.display()))?;
    let addr = args
        .listen
        .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    if !addr.ip().is_loopback() {
        bail!(
            "--listen {addr} is reachable from other machines: the console serves plain HTTP on \
             loopback only"
        );
    }
    // The tools the page lists: what `run` and `mcp` with the same flags load.
    let policy = crate::load_policy(args.policy.as_ref())?;
    let tools = args.toolbox.build(&policy).await?;
    let fleet = match &args.nats {
        Some(url) => {
            let names = Names::new(&args.prefix).map_err(anyhow::Error::msg)?;
            let js = async_nats::jetstream::new(super::worker::connect(url).await?);
            let fleet = FleetApprovals::open(js, names)
                .await
                .with_context(|| format!("opening the approvals of the fleet at {url}"))?;
            Some(fleet)
        }
        None => None,
    };
    let options = ConsoleOptions {
        root,
        audit_log: args.log,
        token: None,
        tools: Some(tools),
        fleet,
    };
    let console = Console::bind(addr, options)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    eprintln!("turngate console: open this address (it holds the token; keep it to yourself):");
    outln!("{}", console.url())?;
    console.serve().await?;
    Ok(ExitCode::from(EXIT_OK))
}
