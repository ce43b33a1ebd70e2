//! `mneme`: the command a developer runs.
//!
//! - `mneme up` runs every service in one process (starting a local `nats-server` when
//!   `MNEME_NATS_URL` is not set), and `mneme serve <service>` runs one of them;
//! - `mneme status` shows counts and service health;
//! - `mneme search`, `timeline`, `get` and `context` read memory the way an agent does;
//! - `mneme hooks install|uninstall|status` wires agent hosts to `mneme-hook`;
//! - `mneme export --markdown` writes MEMORY.md and HISTORY.md per project;
//! - `mneme mcp` serves the MCP tools over stdio for an agent host;
//! - `mneme nats-key` makes an NKey user for a box whose NATS requires one;
//! - `mneme token` prints the api's token, and `mneme token rotate` replaces it.

mod backup;
mod capabilities;
mod doctor;
mod export;
mod hooks;
mod import;
mod memory;
mod nats_key;
mod nats_server;
mod ports;
mod progress;
mod serve;
mod status;
mod team;
mod token;
mod up;

use clap::{Parser, Subcommand};
use common::CommonArgs;

/// The version and the commit it was built from (`build.rs`), so a report names exactly what
/// ran.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MNEME_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "mneme",
    version = VERSION,
    about = "Persistent memory for AI coding agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every service in this process until interrupted.
    Up(Box<up::UpArgs>),
    /// Print a completion script for SHELL (for example `mneme completions bash >
    /// ~/.local/share/bash-completion/completions/mneme`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `mneme man | man -l -`).
    Man,
    /// Run one service in this process until interrupted (what the container image runs).
    Serve {
        #[command(subcommand)]
        service: Box<serve::Service>,
    },
    /// Show what is stored and which services answer.
    Status {
        #[command(flatten)]
        common: CommonArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Probe only SERVICE and exit non-zero unless it answers (a container health check).
        #[arg(long, value_name = "SERVICE", value_parser = clap::builder::PossibleValuesParser::new(status::SERVICES))]
        check: Option<String>,
    },
    /// Check what protects this machine's memory: file modes, whether NATS requires
    /// credentials and which identity the hook uses, the spool against its bounds, and the
    /// api's reach. Exits non-zero when something needs attention.
    Doctor(doctor::DoctorArgs),
    /// The capability registry: scan, list, add, remove, and what matches a prompt.
    Capabilities {
        #[command(subcommand)]
        command: capabilities::CapabilitiesCommand,
    },
    /// Search memory: a compact index of matching items (step 1 of 3).
    Search(memory::SearchArgs),
    /// The items around one item in its session (step 2 of 3).
    Timeline(memory::TimelineArgs),
    /// Whole items by id (step 3 of 3).
    Get(memory::GetArgs),
    /// Show exactly what an agent would be given at session start or with a prompt.
    Context(memory::ContextArgs),
    /// Write workspace memory files (MEMORY.md, HISTORY.md) per project; safe to repeat.
    Export(export::ExportArgs),
    /// Install, remove or inspect agent host hooks.
    Hooks {
        #[command(subcommand)]
        command: hooks::HooksCommand,
    },
    /// Backfill past sessions from an agent host's own files.
    Import(import::ImportArgs),
    /// List stored sessions.
    Sessions(import::SessionsArgs),
    /// Make NKey users for NATS: one seed into FILE (its public key on stdout), or with
    /// --users the whole set of mneme's identities into DIR (the server's authorization block,
    /// with each identity's permissions, on stdout; with --members, a team hub's members too).
    NatsKey {
        /// Where to write the seed (created, never overwritten; readable by its owner only).
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "users",
            conflicts_with = "users"
        )]
        out: Option<std::path::PathBuf>,
        /// A directory for every identity's seed (`hook.nk`, `ingest.nk`, …, `admin.nk`):
        /// the missing ones are made, existing ones kept.
        #[arg(long, value_name = "DIR")]
        users: Option<std::path::PathBuf>,
        /// With --users, for a team hub: a file of the members' public keys (one `U…` key a
        /// line, optionally followed by a name; `#` starts a comment), each admitted as a leaf
        /// node (deploy/nats/nats-hub.conf, docs/team.md).
        #[arg(long, value_name = "FILE", requires = "users")]
        members: Option<std::path::PathBuf>,
    },
    /// Team memory: join a hub, share projects, and see what flows.
    Team {
        #[command(subcommand)]
        command: team::TeamCommand,
    },
    /// Print the api's token (for the dashboard, scripts and MCP over HTTP), or rotate it.
    Token(token::TokenArgs),
    /// Serve mneme's MCP tools over stdio (no subcommand), or register them with agent hosts.
    Mcp {
        /// Without a subcommand: serve the tools over stdin and stdout, for a host to spawn.
        #[command(subcommand)]
        command: Option<hooks::McpCommand>,
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli.command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // A person reads this: the error and its causes on one line. The debug form, with
            // a backtrace when one was captured, only when a backtrace was asked for.
            let wants_trace = ["RUST_BACKTRACE", "RUST_LIB_BACKTRACE"]
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty() && v != "0"));
            if wants_trace {
                eprintln!("error: {error:?}");
            } else {
                eprintln!("error: {error:#}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Up(args) => up::run(*args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "mneme", &mut script);
            print_all(&script)
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut page)?;
            print_all(&page)
        }
        Command::Serve { service } => serve::run(*service).await,
        Command::Status {
            common,
            check: Some(service),
            ..
        } => status::check(&common, &service).await,
        Command::Status { common, json, .. } => status::status(&common, json).await,
        Command::Doctor(args) => doctor::run(args).await,
        Command::Capabilities { command } => capabilities::run(command).await,
        Command::Search(args) => memory::search(args).await,
        Command::Timeline(args) => memory::timeline(args).await,
        Command::Get(args) => memory::get(args).await,
        Command::Context(args) => memory::context(args).await,
        Command::Export(args) => export::run(args).await,
        Command::Hooks { command } => hooks::run(command).await,
        Command::Mcp {
            command: Some(command),
            ..
        } => hooks::run_mcp(command),
        Command::Mcp {
            command: None,
            common,
        } => {
            // Logs go to stderr: stdout is the protocol.
            let _telemetry = common::telemetry::init("mcp", &common.log_format, None);
            api::mcp::stdio(common).await
        }
        Command::Import(args) => import::run(args).await,
        Command::Sessions(args) => import::sessions(args).await,
        Command::NatsKey {
            out,
            users,
            members,
        } => match (out, users) {
            (_, Some(dir)) => nats_key::users(&dir, members.as_deref()),
            (Some(out), None) => nats_key::run(&out),
            (None, None) => unreachable!("clap requires --out or --users"),
        },
        Command::Token(args) => token::run(args),
        Command::Team { command } => team::run(command).await,
    }
}

/// Write generated text to stdout whole; a reader that closes the pipe early (`| head`) has
/// what it wanted, and that is not an error.
fn print_all(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(()),
    }
}
