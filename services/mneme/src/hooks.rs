//! `mneme hooks` and `mneme mcp`: install, uninstall and inspect mneme's entries in every
//! agent host's configuration (each host's `install.rs` in the `hosts` crate says where it
//! keeps it and how mneme's entries are merged).

use anyhow::Context as _;
use common::CommonArgs;
use hosts::install::{self, InstallReport, Scope};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// Add mneme's hooks to the host's settings (backs the file up first; idempotent).
    Install(Target),
    /// Remove exactly the hooks mneme added.
    Uninstall(Target),
    /// Show where mneme's hooks are installed and the last event seen from each host.
    Status(StatusArgs),
}

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Register mneme's MCP server (`mneme mcp`) in the host's MCP configuration.
    Install(Target),
    /// Remove mneme's MCP server entry.
    Uninstall(Target),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Form {
    /// The host's settings file.
    Settings,
    /// Gemini only: an extension (`~/.gemini/extensions/mneme`), loaded even in folders
    /// Gemini does not trust.
    Extension,
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// The agent host: claude-code, kimi, codex, cursor, kiro or gemini.
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
    /// Where the hooks go (Gemini can also take them as an extension).
    #[arg(long, value_enum, default_value = "settings")]
    form: Form,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this agent host.
    #[arg(long)]
    agent: Option<String>,
    /// Only this scope (`user` or `project`); both by default.
    #[arg(long)]
    scope: Option<Scope>,
    /// The project directory whose project-scope files are inspected.
    #[arg(long, default_value = ".")]
    project_dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    common: CommonArgs,
}

fn print_report(verb: &str, agent: &str, report: &InstallReport) {
    let path = report.settings_path.display();
    if report.changed {
        println!("{verb} mneme for {agent} in {path}");
        println!("changed: {}", report.events.join(", "));
        if let Some(backup) = &report.backup_path {
            println!("backup of the previous file: {}", backup.display());
        }
    } else {
        println!("{agent}: nothing changed in {path}");
    }
}

pub async fn run(command: HooksCommand) -> anyhow::Result<()> {
    match command {
        HooksCommand::Install(t) => {
            let host = hosts::named(&t.agent)?;
            let binary = match t.hook_bin {
                Some(path) => path,
                None => find_binary("mneme-hook")?,
            };
            if t.form == Form::Extension {
                let extension = extension_of(host)?;
                let report = (extension.install)(&(extension.dir)()?, &binary)?;
                print_report("installed", host.name, &report);
                return Ok(());
            }
            let path = (host.install().hooks_path)(t.scope, &t.project_dir)?;
            let report = (host.install().install)(&path, &binary)?;
            print_report("installed", host.name, &report);
            if let Some(enable) = host.install().enable
                && let Some(flag) = enable(&path)?
            {
                print_report("enabled hooks", host.name, &flag);
            }
            if let Some(note) = host.install().note {
                println!("{note}");
            }
            Ok(())
        }
        HooksCommand::Uninstall(t) => {
            let host = hosts::named(&t.agent)?;
            if t.form == Form::Extension {
                let extension = extension_of(host)?;
                let dir = (extension.dir)()?;
                let report =
                    install::uninstall_hooks(host.install(), &dir.join(extension.hooks_file))?;
                print_report("removed", host.name, &report);
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(());
            }
            let path = (host.install().hooks_path)(t.scope, &t.project_dir)?;
            let report = install::uninstall_hooks(host.install(), &path)?;
            print_report("removed", host.name, &report);
            Ok(())
        }
        HooksCommand::Status(args) => {
            let last_seen = last_events(&args.common).await;
            status(&args, &last_seen)
        }
    }
}

/// The extension form of `host`'s hooks, or an error naming the hosts that have one.
fn extension_of(host: &hosts::Host) -> anyhow::Result<&install::Extension> {
    host.install().extension.as_ref().with_context(|| {
        let with: Vec<&str> = hosts::HOSTS
            .iter()
            .filter(|h| h.install().extension.is_some())
            .map(|h| h.name)
            .collect();
        format!("--form extension is for {} only", with.join(", "))
    })
}

pub fn run_mcp(command: McpCommand) -> anyhow::Result<()> {
    let (t, installing) = match command {
        McpCommand::Install(t) => (t, true),
        McpCommand::Uninstall(t) => (t, false),
    };
    let host = hosts::named(&t.agent)?;
    let path = (host.install().mcp_path)(t.scope, &t.project_dir)?;
    if installing {
        let binary = find_binary("mneme")?;
        let report = install::install_mcp(host.install(), &path, &binary)?;
        print_report("registered the MCP server of", host.name, &report);
    } else {
        let report = install::uninstall_mcp(host.install(), &path)?;
        print_report("removed the MCP server of", host.name, &report);
    }
    Ok(())
}

/// The newest event time (Unix ms) stored per agent, and the count of sessions.
async fn last_events(common: &CommonArgs) -> std::collections::BTreeMap<String, (i64, i64)> {
    let mut seen = std::collections::BTreeMap::new();
    let Ok(store) = store::Store::open_read_only(&common.db_path()).await else {
        return seen;
    };
    for activity in archive::agent_activity(store.pool())
        .await
        .unwrap_or_default()
    {
        seen.insert(
            activity.agent,
            (activity.last_event_at_ms, activity.sessions),
        );
    }
    seen
}

fn status(
    args: &StatusArgs,
    last_seen: &std::collections::BTreeMap<String, (i64, i64)>,
) -> anyhow::Result<()> {
    let chosen: Vec<&hosts::Host> = match &args.agent {
        Some(agent) => vec![hosts::named(agent)?],
        None => hosts::HOSTS.to_vec(),
    };
    let mut report = Vec::new();
    for host in chosen {
        let agent = host.name;
        let mut places = Vec::new();
        for scope in [Scope::User, Scope::Project] {
            if args.scope.is_some_and(|only| only != scope) {
                continue;
            }
            let Ok(path) = (host.install().hooks_path)(scope, &args.project_dir) else {
                continue;
            };
            let events = match (host.install().installed)(&path) {
                Ok(events) => events,
                Err(error) => {
                    places.push(serde_json::json!({"scope": scope.to_string(), "path": path.display().to_string(), "error": format!("{error:#}")}));
                    continue;
                }
            };
            if !events.is_empty() {
                places.push(serde_json::json!({"scope": scope.to_string(), "path": path.display().to_string(), "events": events}));
            }
        }
        if let Some(extension) = &host.install().extension
            && let Ok(dir) = (extension.dir)()
        {
            let path = dir.join(extension.hooks_file);
            if let Ok(events) = (host.install().installed)(&path)
                && !events.is_empty()
            {
                places.push(serde_json::json!({"scope": "extension", "path": path.display().to_string(), "events": events}));
            }
        }
        let (last, sessions) = last_seen.get(agent).copied().unwrap_or((0, 0));
        report.push(serde_json::json!({
            "agent": agent,
            "installed": places,
            "last_event_at_ms": (last > 0).then_some(last),
            "sessions": sessions,
        }));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    for entry in &report {
        let agent = entry["agent"].as_str().unwrap_or_default();
        let places = entry["installed"].as_array().cloned().unwrap_or_default();
        let seen = match entry["last_event_at_ms"].as_i64() {
            Some(ms) => format!("last event {}", ago(ms)),
            None if places.is_empty() => "no events".to_owned(),
            // Installed but silent: Codex hooks wait for approval in /hooks, Kiro hooks for
            // their agent, Gemini settings hooks for a trusted folder.
            None => "installed but never fired".to_owned(),
        };
        println!("{agent}: {seen}");
        if places.is_empty() {
            println!("  not installed");
        }
        for place in places {
            match place.get("error") {
                Some(error) => println!(
                    "  {} {}: {}",
                    place["scope"].as_str().unwrap_or_default(),
                    place["path"].as_str().unwrap_or_default(),
                    error.as_str().unwrap_or_default()
                ),
                None => println!(
                    "  {} {}: {}",
                    place["scope"].as_str().unwrap_or_default(),
                    place["path"].as_str().unwrap_or_default(),
                    place["events"]
                        .as_array()
                        .map(|events| events
                            .iter()
                            .filter_map(|e| e.as_str())
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                ),
            }
        }
    }
    Ok(())
}

fn ago(ms: i64) -> String {
    let secs = ((common::time::now_ms() - ms) / 1000).max(0);
    match secs {
        0..60 => format!("{secs} s ago"),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}

fn find_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the mneme binary")?;
    if name == "mneme" {
        return Ok(exe);
    }
    if let Some(sibling) = exe.parent().map(|d| d.join(name))
        && sibling.is_file()
    {
        return Ok(sibling);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d: PathBuf| d.join(name))
        .find(|p: &PathBuf| Path::is_file(p))
        .with_context(|| format!("{name} not found next to mneme or on PATH; pass --hook-bin"))
}
