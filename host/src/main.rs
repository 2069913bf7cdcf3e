//! The `turngate` command line: flags and glue around the library; errors become exit codes here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use turngate::{CacheSetting, Limits, Policy, Root, Toolbox};

/// Run a model's tool calls safely: strict checks, then WASI components confined to one directory.
#[derive(Parser)]
#[command(name = "turngate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool call through the gate and the sandbox and print its outcome as JSON.
    ///
    /// Exit 0 when the call succeeded, 2 when it was refused or failed, 1 on a usage or setup error.
    Call {
        /// The directory the call is confined to.
        #[arg(long)]
        root: PathBuf,
        /// A policy file (TOML); without one, every tool may act anywhere inside the root.
        #[arg(long)]
        policy: Option<PathBuf>,
        #[command(flatten)]
        toolbox: ToolboxArgs,
        /// The tool's name.
        tool: String,
        /// The tool's input, a JSON object.
        input: String,
    },
}

/// Flags that shape the toolbox.
#[derive(Args)]
struct ToolboxArgs {
    /// Also load every `*.wasm` tool component in this directory.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Wall-time limit per call, in milliseconds.
    #[arg(long, default_value_t = Limits::default().wall_time.as_millis() as u64)]
    timeout_ms: u64,
    /// Memory limit per call, in MiB.
    #[arg(long, default_value_t = Limits::default().memory_bytes >> 20)]
    memory_mib: usize,
    /// Output limit per call (result, stdout and stderr each), in bytes.
    #[arg(long, default_value_t = Limits::default().output_bytes)]
    max_output: usize,
    /// Directory for precompiled components (default: $TURNGATE_CACHE_DIR or the user cache directory).
    #[arg(long, conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Compile every component at start-up and keep nothing on disk.
    #[arg(long)]
    no_cache: bool,
}

impl ToolboxArgs {
    async fn build(&self) -> Result<Toolbox> {
        let limits = Limits {
            wall_time: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_mib << 20,
            output_bytes: self.max_output,
        };
        let cache = match (&self.cache_dir, self.no_cache) {
            (_, true) => CacheSetting::Disabled,
            (Some(dir), false) => CacheSetting::Dir(dir.clone()),
            (None, false) => CacheSetting::Default,
        };
        let mut builder = Toolbox::builder().limits(limits).cache(cache);
        if let Some(dir) = &self.tools {
            builder = builder.tools_dir(dir);
        }
        Ok(builder.build().await?)
    }
}

fn load_policy(path: Option<&PathBuf>) -> Result<Policy> {
    let Some(path) = path else {
        return Ok(Policy::allow_all());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading policy {}", path.display()))?;
    Policy::from_toml(&text).with_context(|| format!("policy {}", path.display()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("turngate: {error:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Call {
            root,
            policy,
            toolbox,
            tool,
            input,
        } => {
            let policy = load_policy(policy.as_ref())?;
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            let toolbox = toolbox.build().await?;
            let outcome = toolbox.call(&root, &policy, &tool, &input).await;
            println!("{}", serde_json::to_string_pretty(&outcome.to_json())?);
            Ok(if outcome.result.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}
