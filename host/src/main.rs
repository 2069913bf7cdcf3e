//! The `turngate` command line: flags and glue around the library; errors become exit codes here.

mod cli;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use turngate::audit::write_jsonl;
use turngate::turn::Provider;
use turngate::{
    CacheSetting, Limits, Policy, Root, Toolbox, ToolboxBuilder, TurnOptions, process_turn,
};

use crate::cli::stream::{StreamSource, read_turn};

/// Exit status: a completed turn whose calls all succeeded (or that had none); a call that succeeded.
const EXIT_OK: u8 = 0;
/// Exit status: a usage, configuration or I/O error.
const EXIT_USAGE: u8 = 1;
/// Exit status: a completed turn with at least one call error; a call that was refused or failed.
const EXIT_CALL_ERROR: u8 = 2;
/// Exit status: the turn did not complete; nothing ran and the history is empty.
const EXIT_NOT_COMPLETED: u8 = 3;

/// Run a model's tool calls safely: strict checks, then WASI components confined to one directory.
#[derive(Parser)]
#[command(name = "turngate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Gate one streamed turn: decode the whole stream, check how it ended, then check and run each call.
    ///
    /// Prints `{"turn": {...}, "calls": [...], "history": [...]}`. Exit 0: completed and every call ok
    /// (or none); 2: completed with at least one call error; 3: not completed (nothing ran, history
    /// empty); 1: usage, configuration or I/O error. Text deltas are echoed to stderr as they arrive.
    Run {
        /// The provider protocol of the stream.
        #[arg(long, value_parser = parse_provider)]
        provider: Provider,
        /// The directory calls are confined to.
        #[arg(long)]
        root: PathBuf,
        /// A policy file (TOML); without one, every tool may act anywhere inside the root.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Append audit records (JSON Lines) to this file.
        #[arg(long)]
        log: Option<PathBuf>,
        /// OpenAI Chat: the request forced a named tool (`tool_choice`), so `finish_reason: "stop"` with
        /// calls and no refusal is a normal tool turn.
        #[arg(long)]
        forced_tool_choice: bool,
        #[command(flatten)]
        toolbox: ToolboxArgs,
        /// The raw response body, a file holding it, or `-` (or nothing) for standard input.
        stream: Option<String>,
    },
    /// Commands for tool authors: list the tools, inspect a component, check its conformance.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Play the bundled seed streams (four providers, five cases each) through the real pipeline on a
    /// throwaway root and show which turns wrote notes.txt.
    Demo {
        #[command(flatten)]
        toolbox: ToolboxArgs,
    },
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

#[derive(Subcommand)]
enum ToolsCommand {
    /// List every tool: name, the access the sandbox gives it, its path fields, and where it came from.
    List {
        #[command(flatten)]
        toolbox: ToolboxArgs,
    },
    /// Print a component's descriptor, input schema and imports.
    Inspect {
        /// The component (`.wasm`).
        file: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Check a component's conformance: it loads as a tool, its schema is valid JSON Schema, it imports
    /// nothing the sandbox does not grant, and it answers input its schema forbids with invalid-input.
    /// Exit 0 when it passes, 2 when it does not.
    Check {
        /// The component (`.wasm`).
        file: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
}

/// Flags that shape the toolbox: extra tools plus the sandbox settings.
#[derive(Args)]
struct ToolboxArgs {
    /// Also load every `*.wasm` tool component in this directory.
    #[arg(long)]
    tools: Option<PathBuf>,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

impl ToolboxArgs {
    async fn build(&self) -> Result<Toolbox> {
        let mut builder = self.sandbox.builder();
        if let Some(dir) = &self.tools {
            builder = builder.tools_dir(dir);
        }
        Ok(builder.build().await?)
    }
}

/// Per-call limits and the precompiled-component cache.
#[derive(Args)]
struct SandboxArgs {
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

impl SandboxArgs {
    fn builder(&self) -> ToolboxBuilder {
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
        Toolbox::builder().limits(limits).cache(cache)
    }
}

fn parse_provider(name: &str) -> Result<Provider, String> {
    name.parse()
        .map_err(|_| "expected one of: anthropic, openai-chat, openai-responses, gemini".to_owned())
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
            ExitCode::from(EXIT_USAGE)
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
            Ok(ExitCode::from(if outcome.result.is_ok() {
                EXIT_OK
            } else {
                EXIT_CALL_ERROR
            }))
        }
        Command::Run {
            provider,
            root,
            policy,
            log,
            forced_tool_choice,
            toolbox,
            stream,
        } => {
            let policy = load_policy(policy.as_ref())?;
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            // The log is the user's file, outside the root's scope.
            #[allow(clippy::disallowed_methods)]
            let mut log_file = match &log {
                Some(path) => Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .with_context(|| format!("opening log {}", path.display()))?,
                ),
                None => None,
            };
            // Load the tools first: a bad tool is a configuration error, reported before the stream.
            let toolbox = toolbox.build().await?;
            let turn = read_turn(
                StreamSource::from_arg(stream),
                provider,
                forced_tool_choice,
                &mut std::io::stderr(),
            )?;
            let options = TurnOptions {
                audit: log_file.is_some(),
            };
            let report = process_turn(&toolbox, &root, &policy, turn, options).await;
            if let (Some(file), Some(path)) = (log_file.as_mut(), &log) {
                write_jsonl(&report.audit, file)
                    .with_context(|| format!("writing log {}", path.display()))?;
            }
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, &report.to_json())?;
            writeln!(stdout)?;
            Ok(ExitCode::from(if !report.turn.is_completed() {
                EXIT_NOT_COMPLETED
            } else if report.all_ok() {
                EXIT_OK
            } else {
                EXIT_CALL_ERROR
            }))
        }
        Command::Tools { command } => match command {
            ToolsCommand::List { toolbox } => {
                cli::tools::list(&toolbox.build().await?);
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Inspect { file, sandbox } => {
                cli::tools::inspect(sandbox.builder(), &file).await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Check { file, sandbox } => {
                let passed = cli::tools::check(sandbox.builder(), &file).await?;
                Ok(ExitCode::from(if passed {
                    EXIT_OK
                } else {
                    EXIT_CALL_ERROR
                }))
            }
        },
        Command::Demo { toolbox } => {
            let toolbox = toolbox.build().await?;
            let as_expected = cli::demo::run(&toolbox).await?;
            Ok(ExitCode::from(if as_expected {
                EXIT_OK
            } else {
                EXIT_USAGE
            }))
        }
    }
}
