//! `mneme`: the command a developer runs.
//!
//! - `mneme up` runs every service in one process (starting a local `nats-server` when
//!   `MNEME_NATS_URL` is not set);
//! - `mneme status` shows counts and service health;
//! - `mneme search` searches memory;
//! - `mneme hooks install|uninstall|status` wires agent hosts to `mneme-hook`.

mod hooks;
mod nats_server;
mod status;
mod up;

use clap::{Parser, Subcommand};
use common::CommonArgs;

#[derive(Debug, Parser)]
#[command(
    name = "mneme",
    version,
    about = "Persistent memory for AI coding agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every service in this process until interrupted.
    Up(up::UpArgs),
    /// Show what is stored and which services answer.
    Status {
        #[command(flatten)]
        common: CommonArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Search memory (full-text for now).
    Search(status::SearchArgs),
    /// Install, remove or inspect agent host hooks.
    Hooks {
        #[command(subcommand)]
        command: hooks::HooksCommand,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Up(args) => up::run(args).await,
        Command::Status { common, json } => status::status(&common, json).await,
        Command::Search(args) => status::search(args).await,
        Command::Hooks { command } => hooks::run(command),
    }
}
