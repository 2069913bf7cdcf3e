//! `turngate mcp`: flags and glue around `turngate::mcp`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use turngate::mcp::McpServer;
use turngate::mcp::http::{ENDPOINT, HttpOptions};
use turngate::{DurableApprover, Instances, PendingApprovals, Root};

use crate::{EXIT_OK, ToolboxArgs, load_policy};

/// Where `turngate mcp` asks (`--approve-in`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproveIn {
    /// The MCP client, by form elicitation.
    #[default]
    Client,
    /// The root's recorded approvals, answered from `turngate console`.
    Console,
}

// `turngate mcp`'s flags.
#[derive(Args)]
pub struct McpArgs {
    /// The directory calls are confined to. Give an absolute path: clients often start servers in `/`.
    #[arg(long)]
    root: PathBuf,
    /// Serve a root that is `/`, the home directory or a directory above it, or a system directory
    /// (refused otherwise: every tool could read and change everything in it).
    #[arg(long)]
    allow_broad_root: bool,
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
    /// Where a call that needs approval is asked: through the client (form elicitation; denied when
    /// it has none), or recorded in the root and answered from `turngate console` (surviving this
    /// server; denied after the policy's `approval_timeout_seconds`).
    #[arg(long, value_enum, default_value_t)]
    approve_in: ApproveIn,
    #[command(flatten)]
    toolbox: ToolboxArgs,
}

/// Runs the server until the client disconnects (stdio) or the process is stopped (HTTP).
pub async fn serve(args: McpArgs) -> Result<ExitCode> {
    let policy = load_policy(args.policy.as_ref())?;
    let root =
        Root::open(&args.root).with_context(|| format!("opening root {}", args.root.display()))?;
    if !args.allow_broad_root
        && let Some(what) = broad_root(&root)
    {
        bail!(
            "refusing to serve {} as the root: it is {what}, and every tool could read and change \
             everything in it. Give the project's directory as an absolute path (MCP clients often \
             start servers in `/`, so `--root .` may mean `/`), or add --allow-broad-root if you \
             mean it",
            root.path().display()
        );
    }
    eprintln!("turngate mcp: root {}", root.path().display());
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
        .trust(policy.trust())
        .instances(Instances::Pooled)
        .max_concurrent_calls(max_concurrent)
        .build()
        .await?;
    let recorded = match args.approve_in {
        ApproveIn::Client => None,
        ApproveIn::Console => Some(DurableApprover::new(
            PendingApprovals::open(&root)?,
            policy.approval_timeout(),
        )),
    };
    let mut server = McpServer::new(toolbox, root, policy, log);
    if let Some(recorded) = recorded {
        server = server.asking_through(recorded);
    }
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

/// System directories refused as a root (besides `/` and the home directory and the directories above
/// it): what the operating system runs from, its configuration and state, and the kernel's views.
/// Listed as the paths Linux and macOS give them; a directory that is not there is skipped.
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/sbin",
    "/usr/share",
    "/var",
    "/home",
    "/Applications",
    "/Library",
    "/System",
    "/Users",
    "/Volumes",
    "/private",
    "/private/etc",
    "/private/var",
];

/// What makes `root` too broad to serve without --allow-broad-root, if anything. The directory opened
/// is compared with each named one by device and inode, so no spelling (`/usr/..`, a symlink) gets
/// past it.
fn broad_root(root: &Root) -> Option<String> {
    if root.is_at(Path::new("/")) {
        return Some("the filesystem's root".into());
    }
    if let Some(home) = dirs::home_dir() {
        if root.is_at(&home) {
            return Some("your home directory".into());
        }
        if let Some(above) = home.ancestors().skip(1).find(|dir| root.is_at(dir)) {
            return Some(format!(
                "{}, which holds your home directory",
                above.display()
            ));
        }
    }
    SYSTEM_DIRS
        .iter()
        .find(|dir| root.is_at(Path::new(dir)))
        .map(|dir| format!("the system directory {dir}"))
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
