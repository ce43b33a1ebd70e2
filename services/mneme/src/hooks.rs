//! `mneme hooks`: install, uninstall and inspect the hook entries of agent hosts.

use anyhow::Context as _;
use mneme_hook::install::{self, Scope};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// Add mneme's hooks to the host's settings (backs the file up first; idempotent).
    Install(Target),
    /// Remove exactly the hooks mneme added.
    Uninstall(Target),
    /// Show which events have a mneme hook.
    Status(Target),
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// The agent host.
    #[arg(long, default_value = "claude-code")]
    agent: String,
    /// `user` (all projects) or `project` (this project only).
    #[arg(long, default_value = "user")]
    scope: Scope,
    /// The project directory for `--scope project`.
    #[arg(long, default_value = ".")]
    project_dir: PathBuf,
    /// The `mneme-hook` binary to register; defaults to the one next to `mneme`, then `PATH`.
    #[arg(long, env = "MNEME_HOOK_BIN")]
    hook_bin: Option<PathBuf>,
}

pub fn run(command: HooksCommand) -> anyhow::Result<()> {
    let (
        Target {
            agent,
            scope,
            project_dir,
            hook_bin,
        },
        verb,
    ) = match command {
        HooksCommand::Install(t) => (t, "install"),
        HooksCommand::Uninstall(t) => (t, "uninstall"),
        HooksCommand::Status(t) => (t, "status"),
    };
    if agent != "claude-code" && agent != "claude" {
        anyhow::bail!("unsupported agent {agent:?}; supported: claude-code");
    }
    let settings = install::claude_code_settings_path(scope, &project_dir)?;
    match verb {
        "install" => {
            let binary = match hook_bin {
                Some(path) => path,
                None => find_hook_binary()?,
            };
            let report = install::install_claude_code(&settings, &binary)?;
            if report.changed {
                println!(
                    "installed mneme hooks for claude-code in {}",
                    settings.display()
                );
                println!("events: {}", report.events.join(", "));
                if let Some(backup) = report.backup_path {
                    println!("backup of the previous file: {}", backup.display());
                }
            } else {
                println!(
                    "mneme hooks already installed in {}; nothing changed",
                    settings.display()
                );
            }
        }
        "uninstall" => {
            let report = install::uninstall_claude_code(&settings)?;
            if report.changed {
                println!(
                    "removed mneme hooks from {} ({})",
                    settings.display(),
                    report.events.join(", ")
                );
                if let Some(backup) = report.backup_path {
                    println!("backup of the previous file: {}", backup.display());
                }
            } else {
                println!("no mneme hooks in {}; nothing changed", settings.display());
            }
        }
        _ => {
            let events = install::installed_claude_code_events(&settings)?;
            if events.is_empty() {
                println!("claude-code: no mneme hooks in {}", settings.display());
            } else {
                println!(
                    "claude-code: {} ({})",
                    settings.display(),
                    events.join(", ")
                );
            }
        }
    }
    Ok(())
}

fn find_hook_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the mneme binary")?;
    if let Some(sibling) = exe.parent().map(|d| d.join("mneme-hook"))
        && sibling.is_file()
    {
        return Ok(sibling);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("mneme-hook"))
        .find(|p| p.is_file())
        .context("mneme-hook not found next to mneme or on PATH; pass --hook-bin")
}
