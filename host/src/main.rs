//! The `turngate` command line: flags and glue around the library; errors become exit codes here.

mod cli;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use turngate::audit::{AuditRecord, write_jsonl};
use turngate::sandbox::{COMPILE_COMMAND, compile_command};
use turngate::turn::Provider;
use turngate::{
    CacheSetting, CallContext, Cancel, CompileIn, Effects, Limits, Policy, Root, Toolbox,
    ToolboxBuilder, TurnHooks, TurnOptions, UndoTarget, call_audited, process_turn_with,
};

use turngate::live::agent::{Agent, AgentConfig, RegenerationPolicy};
use turngate::live::client::{ClientOptions, LiveClient};
use turngate::live::request::{ApiKey, Endpoint, api_key_var, default_base_url};
use turngate::live::retry::RetryPolicy;

use crate::cli::outln;
use crate::cli::stream::{StreamSource, read_turn};

/// Exit status: a completed turn whose calls all succeeded (or that had none); a call that succeeded.
const EXIT_OK: u8 = 0;
/// Exit status: a usage, configuration or I/O error.
const EXIT_USAGE: u8 = 1;
/// Exit status: a completed turn with at least one call error; a call that was refused or failed.
const EXIT_CALL_ERROR: u8 = 2;
/// Exit status: the turn did not complete; nothing ran and the history is empty. For `agent`: a turn did
/// not complete and regeneration did not help (or was not allowed, as for refusals).
const EXIT_NOT_COMPLETED: u8 = 3;
/// Exit status: Ctrl-C cancelled the call or turn (an open question answered no, nothing applied
/// after it).
const EXIT_CANCELLED: u8 = 130;
// `agent` only (see `AgentEnd::exit_code` and `ApiError::exit_code`): 4 the turn limit was reached;
// 10 auth (401, 403); 11 invalid request (400, 404, 413, other 4xx); 12 rate limit (429, retries or
// the longest allowed wait exceeded); 13 overloaded (529, 503, `overloaded_error` event); 14 server
// (other 5xx, other error events); 15 transport (connect, reset, timeout, body cut); 16 stream parse
// (malformed turns beyond their regenerations); 130 cancelled (Ctrl-C; also `run` and `call`).

/// Run a model's tool calls safely: strict checks, then WASI components confined to one directory.
#[derive(Parser)]
#[command(name = "turngate", version = env!("TURNGATE_VERSION"), about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Each subcommand's arguments are built only when it is the one given: building all ten cost a
// one-shot `turngate call` 0.13 to 0.18 ms of its parse (BENCHMARKS.md). `clap_definition_is_valid`
// builds them all.
// The argument structs have plain comments, not doc comments: built late, a flattened struct's doc
// comment would replace its subcommand's description (`subcommands_keep_their_own_description`).
#[derive(Subcommand)]
#[command(defer = true)]
enum Command {
    /// Gate one streamed turn: decode the whole stream, check how it ended, then check and run each call.
    ///
    /// Prints `{"turn": {...}, "calls": [...], "history": [...]}`. Exit 0: completed and every call ok
    /// (or none); 2: completed with at least one call error; 3: not completed (nothing ran, history
    /// empty); 130: Ctrl-C while a question could be open (it is answered no; the calls from there
    /// on are `cancelled`); 1: usage, configuration or I/O error. Text deltas are echoed to stderr as
    /// they arrive.
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
        /// The output limit the request asked for (`max_tokens`, `max_completion_tokens`,
        /// `max_output_tokens`, `maxOutputTokens`): a turn whose reported usage reached it is truncated,
        /// whatever its finish reason says.
        #[arg(long, value_name = "N")]
        max_output_tokens: Option<u64>,
        /// Show each call's changes as a diff and apply them only on yes (denied without a terminal).
        #[arg(long)]
        review: bool,
        /// Where a call that needs approval is asked: on this terminal, or recorded in the root and
        /// answered from `turngate console` (surviving this process; denied after the policy's
        /// `approval_timeout_seconds`).
        #[arg(long, value_enum, default_value_t)]
        approve_in: cli::agent::ApproveIn,
        #[command(flatten)]
        toolbox: ToolboxArgs,
        /// The raw response body, a file holding it, or `-` (or nothing) for standard input.
        stream: Option<String>,
    },
    /// Talk to a live provider: send PROMPT, gate each streamed turn, run approved calls, send the
    /// results back, until the model ends without tool calls or --max-turns is reached.
    ///
    /// The key comes from ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY. Text streams to stderr;
    /// the session summary (JSON) goes to stdout. Exit 0: the model finished; 3: a turn did not
    /// complete (truncated beyond its regenerations, refused, filtered); 4: --max-turns reached; 10
    /// auth; 11 invalid request; 12 rate limit; 13 overloaded; 14 server error; 15 transport; 16 stream
    /// parse; 130 cancelled (Ctrl-C: the running call stops, an open question is answered no); 1: usage
    /// or configuration error.
    Agent(AgentArgs),
    /// Pull turn jobs from a NATS JetStream work queue and gate each as `run` does, applying every
    /// call's effect exactly once (see ARCHITECTURE.md, "Workers"). Runs until SIGTERM or Ctrl-C: the
    /// running calls stop and apply nothing, their jobs go back to the queue, and it exits 0.
    Worker(cli::worker::WorkerArgs),
    /// Enqueue a turn job for the workers. With --wait, print its report as `run` does and exit with
    /// run's exit codes (1 also for a job the workers refused).
    Submit(cli::worker::SubmitArgs),
    /// Serve the tools to Model Context Protocol clients (stdio, or Streamable HTTP with --listen):
    /// every `tools/call` goes through the same gate, view, staging, apply, journal and audit as `run`.
    Mcp(cli::mcp::McpArgs),
    /// Serve a local review page for one root: the journal as a timeline with diffs and undo, and the
    /// audit log. Prints the address to open (with its token) and serves until stopped.
    Console(cli::console::ConsoleArgs),
    /// Commands for tool authors: list the tools, inspect a component, check its conformance.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Play the bundled seed streams (four providers, six cases each) through the real pipeline on a
    /// throwaway root and show which turns wrote notes.txt.
    Demo {
        #[command(flatten)]
        toolbox: ToolboxArgs,
    },
    /// Run one tool call through the gate and the sandbox and print its outcome as JSON.
    ///
    /// Exit 0 when the call succeeded, 2 when it was refused or failed, 130 when Ctrl-C cancelled it
    /// (nothing applied), 1 on a usage or setup error.
    Call {
        /// The directory the call is confined to.
        #[arg(long)]
        root: PathBuf,
        /// A policy file (TOML); without one, every tool may act anywhere inside the root.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Show the call's changes as a diff and apply them only on yes (denied without a terminal).
        #[arg(long)]
        review: bool,
        /// Where a call that needs approval is asked: on this terminal, or recorded in the root and
        /// answered from `turngate console` (surviving this process; denied after the policy's
        /// `approval_timeout_seconds`).
        #[arg(long, value_enum, default_value_t)]
        approve_in: cli::agent::ApproveIn,
        /// The call's ID in the journal (`undo --call ID`); without it one is made up. Printed as
        /// `call_id` in the outcome.
        #[arg(long, value_name = "ID")]
        call_id: Option<String>,
        /// Append the call's audit record (JSON Lines, as `run --log` writes them) to this file.
        #[arg(long)]
        log: Option<PathBuf>,
        #[command(flatten)]
        toolbox: ToolboxArgs,
        /// The tool's name.
        tool: String,
        /// The tool's input, a JSON object.
        input: String,
    },
    /// Print the root's journal: one JSON object per applied call (seq, call_id, turn, tool, time,
    /// state, changes), oldest first.
    Journal {
        /// The root whose journal to print.
        #[arg(long)]
        root: PathBuf,
    },
    /// Undo applied calls: restore what they replaced or deleted, byte-identical, and remove what they
    /// created.
    ///
    /// Exit 0 when restored; 2 when refused (a file changed since the call, or nothing to undo: nothing
    /// is restored and the message names the file); 1 on a usage error.
    Undo {
        /// The root.
        #[arg(long)]
        root: PathBuf,
        #[command(flatten)]
        target: UndoArgs,
    },
}

// Which calls `undo` undoes: exactly one of the four.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct UndoArgs {
    /// The most recent applied call.
    #[arg(long)]
    last: bool,
    /// The applied call with this sequence number (the `seq` that `journal` prints).
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// The most recent applied call with this call ID.
    #[arg(long)]
    call: Option<String>,
    /// Every applied call of this turn (the `turn.id` that `run` prints).
    #[arg(long)]
    turn: Option<String>,
}

impl UndoArgs {
    fn target(self) -> UndoTarget {
        match (self.seq, self.call, self.turn) {
            (Some(seq), _, _) => UndoTarget::Seq(seq),
            (None, Some(id), _) => UndoTarget::Call(id),
            (None, None, Some(turn)) => UndoTarget::Turn(turn),
            (None, None, None) => UndoTarget::Last,
        }
    }
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
    /// Pin every component of a tools directory: write DIR/turngate.lock with each tool's name and the
    /// SHA-256 of its component, for `--locked`.
    Lock {
        /// The tools directory.
        #[arg(long)]
        tools: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Install a tool from a registry (oci://REGISTRY/REPO:TAG or @sha256:...) or an OCI layout
    /// directory (oci:DIR[:TAG]): pulled by digest, its signature verified against the policy's
    /// [trust], its requested grants shown and written into the policy only when accepted.
    ///
    /// Prints the lock entry as JSON. Exit 0 when installed, 1 when refused (nothing written).
    Add {
        /// The source.
        reference: String,
        #[command(flatten)]
        install: cli::registry::InstallArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Follow the tags of tools installed from registries: a moved tag is shown (old and new digest,
    /// signer, grants asked for more or less) and followed only on yes (--yes, or the terminal).
    Update {
        /// The tool (default: every tool installed from a registry).
        name: Option<String>,
        /// Follow a moved tag without asking (grants still need --accept-grants or a yes).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        install: cli::registry::InstallArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Remove a tool installed from a registry: its component, its provenance and its lock entry.
    Remove {
        /// The tool.
        name: String,
        /// The tools directory.
        #[arg(long)]
        tools: PathBuf,
    },
    /// For tool authors: publish a component as a Wasm OCI artifact (oci://REGISTRY/REPO:TAG, or a
    /// layout oci:DIR:TAG), its descriptor and requested grants (--grants FILE.json) as annotations.
    Publish {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Where to publish it.
        reference: String,
        /// The grants it asks for (JSON: paths, network, secrets, env).
        #[arg(long, value_name = "FILE")]
        grants: Option<PathBuf>,
        #[command(flatten)]
        registry: cli::registry::RegistryArgs,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// For tool authors: sign a published manifest (REF@sha256:...) with a key (unencrypted PKCS#8
    /// PEM), as cosign stores key signatures; `cosign verify --key` checks it.
    Sign {
        /// The private key.
        #[arg(long)]
        key: PathBuf,
        /// The manifest, by digest.
        reference: String,
        #[command(flatten)]
        registry: cli::registry::RegistryArgs,
    },
}

// `turngate agent`'s flags.
#[derive(Args)]
struct AgentArgs {
    /// The provider protocol.
    #[arg(long, value_parser = parse_provider)]
    provider: Provider,
    /// The model name.
    #[arg(long)]
    model: String,
    /// The directory calls are confined to.
    #[arg(long)]
    root: PathBuf,
    /// A policy file (TOML); without one, every tool may act anywhere inside the root.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Append the log (JSON Lines: each attempt, each turn and call record) to this file.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Most model turns.
    #[arg(long, default_value_t = AgentConfig::default().max_turns)]
    max_turns: u32,
    /// The API base URL (any compatible endpoint; default: the provider's public API).
    #[arg(long)]
    base_url: Option<String>,
    /// The first request's output limit, in tokens.
    #[arg(long, default_value_t = RegenerationPolicy::default().max_output_tokens)]
    max_output_tokens: u32,
    /// The largest output limit a regeneration of a truncated turn may ask for.
    #[arg(long, default_value_t = RegenerationPolicy::default().output_tokens_cap)]
    max_output_tokens_cap: u32,
    /// Regenerations of a truncated turn (each doubles the output limit).
    #[arg(long, default_value_t = RegenerationPolicy::default().max_truncated)]
    max_regenerations: u32,
    /// Regenerations of a malformed turn.
    #[arg(long, default_value_t = RegenerationPolicy::default().max_malformed)]
    max_malformed: u32,
    /// Regenerate refused or filtered turns too, at most N times (`--retry-refusals=N`; 1 without a
    /// value).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value_t = 0, default_missing_value = "1")]
    retry_refusals: u32,
    /// Retries of a failed API request (rate limit, overloaded, server, transport).
    #[arg(long, default_value_t = RetryPolicy::default().max_retries)]
    max_retries: u32,
    /// First backoff delay, in milliseconds (doubled per retry, less up to 25% jitter).
    #[arg(long, default_value_t = RetryPolicy::default().base_delay.as_millis() as u64)]
    retry_base_ms: u64,
    /// Largest backoff delay, in milliseconds.
    #[arg(long, default_value_t = RetryPolicy::default().max_delay.as_millis() as u64)]
    retry_max_ms: u64,
    /// Longest delay a server may ask for (retry-after), in milliseconds; a longer one ends the session.
    #[arg(long, default_value_t = RetryPolicy::default().max_wait.as_millis() as u64)]
    max_retry_wait_ms: u64,
    /// Longest silence while reading a response, in milliseconds.
    #[arg(long, default_value_t = ClientOptions::default().read_timeout.as_millis() as u64)]
    read_timeout_ms: u64,
    /// Show each call's changes as a diff and apply them only on yes (denied without a terminal).
    #[arg(long)]
    review: bool,
    /// Where a call that needs approval is asked: on this terminal, or recorded in the root and
    /// answered from `turngate console` (surviving this process; denied after the policy's
    /// `approval_timeout_seconds`).
    #[arg(long, value_enum, default_value_t)]
    approve_in: cli::agent::ApproveIn,
    #[command(flatten)]
    toolbox: ToolboxArgs,
    /// The user's prompt.
    prompt: String,
}

// Flags that shape the toolbox: extra tools plus the sandbox settings.
#[derive(Args)]
struct ToolboxArgs {
    /// Also load every `*.wasm` tool component in this directory.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Load only the components the directory's turngate.lock pins, with the pinned SHA-256.
    #[arg(long, requires = "tools")]
    locked: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

impl ToolboxArgs {
    /// The toolbox, its registry tools' signers held to `policy`'s `[trust]` when locked.
    async fn build(&self, policy: &Policy) -> Result<Toolbox> {
        Ok(self.builder().trust(policy.trust()).build().await?)
    }

    fn builder(&self) -> ToolboxBuilder {
        let mut builder = self.sandbox.builder().locked(self.locked);
        if let Some(dir) = &self.tools {
            builder = builder.tools_dir(dir);
        }
        builder
    }
}

// Per-call limits and the precompiled-component cache.
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
            ..Limits::default()
        };
        let cache = match (&self.cache_dir, self.no_cache) {
            (_, true) => CacheSetting::Disabled,
            (Some(dir), false) => CacheSetting::Dir(dir.clone()),
            (None, false) => CacheSetting::Default,
        };
        // Every command runs its calls in the pool (the library's default): reserving it costs less
        // than one call's instance allocated on demand, even for a one-shot `turngate call`. What is
        // not in the cache is compiled in a child (this program again, `main`), whose memory and any
        // compiler crash end with it.
        Toolbox::builder()
            .limits(limits)
            .cache(cache)
            .compile_in(CompileIn::ChildProcess)
    }
}

/// Leaves a one-shot command's toolbox to the process's exit, which comes next: its drop only frees
/// memory and unmaps code (every compiled schema, every prepared component), which the exit does at
/// once, and doing it piece by piece costs about a tenth of a millisecond of a `turngate call`.
fn leave_to_exit(toolbox: Toolbox) {
    std::mem::forget(toolbox);
}

/// The `--log` file, opened for appending (created if missing).
fn open_log(path: Option<&std::path::Path>) -> Result<Option<std::fs::File>> {
    let Some(path) = path else {
        return Ok(None);
    };
    // The log is the user's file, outside the root's scope.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening log {}", path.display()))?;
    Ok(Some(file))
}

/// Milliseconds since the Unix epoch (0 before it).
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
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

fn main() -> ExitCode {
    // A child this program started to compile a component (`CompileIn::ChildProcess`), before anything
    // else: no runtime, no arguments of a command.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|first| first == COMPILE_COMMAND) {
        return compile_command(&args.collect::<Vec<_>>());
    }
    run_command()
}

#[tokio::main(flavor = "current_thread")]
async fn run_command() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage(&error),
    };
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("turngate: {error:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// What clap could not parse, printed where clap prints it: `--help` and `--version` exit 0; everything
/// else (an unknown flag or subcommand, a bad value, a missing argument, even when clap shows the help for
/// it) is a usage error and exits 1, never clap's own 2, which here means a call error.
fn usage(error: &clap::Error) -> ExitCode {
    // Best effort: a closed stdout or stderr must not turn a usage error into a panic.
    let _ = error.print();
    match error.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
            ExitCode::from(EXIT_OK)
        }
        _ => ExitCode::from(EXIT_USAGE),
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Call {
            root,
            policy,
            review,
            approve_in,
            call_id,
            log,
            toolbox,
            tool,
            input,
        } => {
            let policy = load_policy(policy.as_ref())?;
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            let mut log_file = open_log(log.as_deref())?;
            let toolbox = toolbox.build(&policy).await?;
            let effects = Effects::default();
            let call_id =
                call_id.unwrap_or_else(|| format!("call-{}-{:08x}", unix_ms(), fastrand::u32(..)));
            let cancel = cli::agent::cancel_on_ctrl_c();
            let approver = cli::agent::CliApprover::new(approve_in, &root, &policy)?;
            let mut context = CallContext::new(&root, &policy, &effects);
            context.approver = Some(&approver);
            context.review = review;
            context.cancel = Some(&cancel);
            context.call_id = Some(call_id.clone());
            let (outcome, record) = call_audited(&toolbox, &mut context, &tool, &input).await;
            approver.report_failure();
            if let (Some(file), Some(path)) = (log_file.as_mut(), &log) {
                write_jsonl(&[AuditRecord::Call(record)], file)
                    .with_context(|| format!("writing log {}", path.display()))?;
            }
            let mut printed = outcome.to_json();
            printed["call_id"] = call_id.into();
            outln!("{}", serde_json::to_string_pretty(&printed)?)?;
            leave_to_exit(toolbox);
            Ok(ExitCode::from(if cancel.is_cancelled() {
                EXIT_CANCELLED
            } else if outcome.result.is_ok() {
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
            max_output_tokens,
            review,
            approve_in,
            toolbox,
            stream,
        } => {
            let policy = load_policy(policy.as_ref())?;
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            let mut log_file = open_log(log.as_deref())?;
            // Load the tools first: a bad tool is a configuration error, reported before the stream.
            let toolbox = toolbox.build(&policy).await?;
            let turn = read_turn(
                StreamSource::from_arg(stream),
                provider,
                forced_tool_choice,
                max_output_tokens,
                &mut std::io::stderr(),
            )?;
            let options = TurnOptions {
                audit: log_file.is_some(),
                review,
                turn_id: None,
            };
            // Ctrl-C matters while a question may be open (a reviewed turn, a call that may ask):
            // then it answers the question no and nothing after it runs. Such turns run one call
            // at a time anyway; any other turn keeps running its next call ahead, and Ctrl-C ends
            // the process as usual (the journal settles an apply it interrupted).
            let cancel = (review || turn.calls.iter().any(|c| policy.runs_alone(&c.name)))
                .then(cli::agent::cancel_on_ctrl_c);
            let approver = cli::agent::CliApprover::new(approve_in, &root, &policy)?;
            let hooks = TurnHooks {
                approver: Some(&approver),
                cancel: cancel.as_ref(),
            };
            let report = process_turn_with(&toolbox, &root, &policy, turn, options, hooks).await;
            approver.report_failure();
            leave_to_exit(toolbox);
            if let (Some(file), Some(path)) = (log_file.as_mut(), &log) {
                write_jsonl(&report.audit, file)
                    .with_context(|| format!("writing log {}", path.display()))?;
            }
            let mut stdout = cli::stdout();
            serde_json::to_writer(&mut stdout, &report.to_json())?;
            writeln!(stdout)?;
            Ok(ExitCode::from(if !report.turn.is_completed() {
                EXIT_NOT_COMPLETED
            } else if cancel.as_ref().is_some_and(Cancel::is_cancelled) {
                EXIT_CANCELLED
            } else if report.all_ok() {
                EXIT_OK
            } else {
                EXIT_CALL_ERROR
            }))
        }
        Command::Agent(args) => agent(args).await,
        Command::Worker(args) => cli::worker::worker(args).await,
        Command::Mcp(args) => cli::mcp::serve(args).await,
        Command::Console(args) => cli::console::serve(args).await,
        Command::Submit(args) => cli::worker::submit(args).await,
        Command::Journal { root } => {
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            cli::journal::print(&root, &mut cli::stdout())?;
            Ok(ExitCode::from(EXIT_OK))
        }
        Command::Undo { root, target } => {
            let root =
                Root::open(&root).with_context(|| format!("opening root {}", root.display()))?;
            let end = cli::journal::undo(&root, &target.target(), &mut cli::stdout())?;
            Ok(ExitCode::from(match end {
                cli::journal::UndoEnd::Restored => EXIT_OK,
                cli::journal::UndoEnd::Refused(message) => {
                    eprintln!("turngate: {message}");
                    EXIT_CALL_ERROR
                }
            }))
        }
        Command::Tools { command } => match command {
            ToolsCommand::List { toolbox } => {
                cli::tools::list(&toolbox.build(&Policy::allow_all()).await?)?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Inspect { file, sandbox } => {
                cli::tools::inspect(sandbox.builder(), &file).await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Lock { tools, sandbox } => {
                cli::tools::lock(sandbox.builder(), &tools).await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Add {
                reference,
                install,
                sandbox,
            } => {
                cli::registry::add(&reference, &install, sandbox.builder()).await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Update {
                name,
                yes,
                install,
                sandbox,
            } => {
                cli::registry::update(name.as_deref(), &install, yes, sandbox.builder()).await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Remove { name, tools } => {
                cli::registry::remove(&name, &tools)?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Publish {
                file,
                reference,
                grants,
                registry,
                sandbox,
            } => {
                cli::registry::publish(
                    &file,
                    &reference,
                    grants.as_deref(),
                    &registry,
                    sandbox.builder(),
                )
                .await?;
                Ok(ExitCode::from(EXIT_OK))
            }
            ToolsCommand::Sign {
                key,
                reference,
                registry,
            } => {
                cli::registry::sign(&reference, &key, &registry).await?;
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
            let toolbox = toolbox.build(&Policy::allow_all()).await?;
            let as_expected = cli::demo::run(&toolbox).await?;
            Ok(ExitCode::from(if as_expected {
                EXIT_OK
            } else {
                EXIT_USAGE
            }))
        }
    }
}

async fn agent(args: AgentArgs) -> Result<ExitCode> {
    let policy = load_policy(args.policy.as_ref())?;
    let root =
        Root::open(&args.root).with_context(|| format!("opening root {}", args.root.display()))?;
    let key = ApiKey::from_env(args.provider).with_context(|| {
        format!(
            "no API key: set {} for {}",
            api_key_var(args.provider),
            args.provider
        )
    })?;
    let log = open_log(args.log.as_deref())?;
    let toolbox = args.toolbox.build(&policy).await?;
    let base_url = args
        .base_url
        .clone()
        .unwrap_or_else(|| default_base_url(args.provider).to_owned());
    let endpoint = Endpoint::new(args.provider, base_url, args.model.clone(), key);
    let options = ClientOptions {
        read_timeout: Duration::from_millis(args.read_timeout_ms),
        ..ClientOptions::default()
    };
    let client = LiveClient::new(endpoint, options)?;
    let config = AgentConfig {
        max_turns: args.max_turns,
        regeneration: RegenerationPolicy {
            max_truncated: args.max_regenerations,
            max_malformed: args.max_malformed,
            max_refused: args.retry_refusals,
            max_output_tokens: args.max_output_tokens,
            output_tokens_cap: args.max_output_tokens_cap.max(args.max_output_tokens),
        },
        retry: RetryPolicy {
            max_retries: args.max_retries,
            base_delay: Duration::from_millis(args.retry_base_ms),
            max_delay: Duration::from_millis(args.retry_max_ms),
            max_wait: Duration::from_millis(args.max_retry_wait_ms),
            ..RetryPolicy::default()
        },
        audit: log.is_some(),
        review: args.review,
    };
    let cancel = cli::agent::cancel_on_ctrl_c();
    let approver = cli::agent::CliApprover::new(args.approve_in, &root, &policy)?;
    let session = Agent {
        client: &client,
        toolbox: &toolbox,
        root: &root,
        policy: &policy,
        config,
        approver: Some(&approver),
        cancel,
    };
    let mut observer = cli::agent::CliObserver {
        log,
        log_error: None,
    };
    let outcome = session.run(&args.prompt, &mut observer).await;
    approver.report_failure();
    eprintln!();
    if outcome.end.exit_code() != EXIT_OK {
        eprintln!(
            "turngate: {} ({})",
            outcome.end.message(),
            outcome.end.kind()
        );
    }
    let mut stdout = cli::stdout();
    serde_json::to_writer(&mut stdout, &outcome.to_json())?;
    writeln!(stdout)?;
    if let (Some(error), Some(path)) = (observer.log_error, &args.log) {
        return Err(error).with_context(|| format!("writing log {}", path.display()));
    }
    Ok(ExitCode::from(outcome.end.exit_code()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The subcommands' arguments are built lazily (`defer`), so clap's checks of a definition would
    /// otherwise run only for the subcommand given: build and check them all.
    #[test]
    fn clap_definition_is_valid() {
        super::Cli::command().debug_assert();
    }

    /// What `turngate --help` lists for a subcommand is what its own help says, once its arguments are
    /// built.
    #[test]
    fn subcommands_keep_their_own_description() {
        for listed in super::Cli::command().get_subcommands() {
            let mut built = listed.clone();
            built.build();
            for (what, before, after) in [
                ("about", listed.get_about(), built.get_about()),
                (
                    "long about",
                    listed.get_long_about(),
                    built.get_long_about(),
                ),
            ] {
                assert_eq!(
                    before.map(ToString::to_string),
                    after.map(ToString::to_string),
                    "`{}`'s {what}",
                    listed.get_name()
                );
            }
        }
    }
}
