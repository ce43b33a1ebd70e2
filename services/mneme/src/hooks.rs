//! `mneme hooks` and `mneme mcp`: install, uninstall and inspect mneme's entries in every
//! agent host's configuration (see [`crate::hosts_config`] for where each host keeps it).

use crate::hosts_config::{self as hosts, AGENTS};
use anyhow::{Context as _, bail};
use common::CommonArgs;
use mneme_hook::install::{InstallReport, Scope};
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

/// What the user must still do by hand after installing for `agent`.
fn after_install(agent: &str, form: Form) {
    match agent {
        "codex" => println!(
            "codex runs a new or changed hook only after you approve it: open codex, type /hooks and trust mneme's hooks (until then they silently do nothing; `mneme hooks status` shows codex as never fired)"
        ),
        "kiro" => println!(
            "kiro runs hooks only for the agent that declares them: start kiro-cli with `--agent mneme`, or make mneme your default agent"
        ),
        "gemini" if form == Form::Settings => println!(
            "gemini registers settings hooks only in trusted folders; `mneme hooks install --agent gemini --form extension` works everywhere"
        ),
        "cursor" => println!(
            "cursor reloads hooks.json on save; set MNEME_CURSOR_RULES=1 in Cursor's environment to also keep .cursor/rules/mneme.mdc up to date for versions that ignore session-start context"
        ),
        _ => {}
    }
}

pub async fn run(command: HooksCommand) -> anyhow::Result<()> {
    match command {
        HooksCommand::Install(t) => {
            let agent = hosts::agent_name(&t.agent)?;
            let binary = match t.hook_bin {
                Some(path) => path,
                None => find_binary("mneme-hook")?,
            };
            if t.form == Form::Extension {
                if agent != "gemini" {
                    bail!("--form extension is for gemini only");
                }
                let dir = hosts::gemini_extension_dir()?;
                let report = hosts::install_gemini_extension(&dir, &binary)?;
                print_report("installed", agent, &report);
                return Ok(());
            }
            let path = hosts::hooks_path(agent, t.scope, &t.project_dir)?;
            let report = hosts::install_hooks(agent, &path, &binary)?;
            print_report("installed", agent, &report);
            if agent == "codex" {
                let config = path.with_file_name("config.toml");
                if let Some(flag) = hosts::codex_enable_feature(&config)? {
                    print_report("enabled hooks", agent, &flag);
                }
            }
            if agent == "gemini"
                && let Some(flag) = hosts::gemini_enable_hooks(&path)?
            {
                print_report("enabled hooks", agent, &flag);
            }
            after_install(agent, t.form);
            Ok(())
        }
        HooksCommand::Uninstall(t) => {
            let agent = hosts::agent_name(&t.agent)?;
            let path = if t.form == Form::Extension {
                let dir = hosts::gemini_extension_dir()?;
                let report = hosts::uninstall_hooks(agent, &dir.join("hooks/hooks.json"))?;
                print_report("removed", agent, &report);
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(());
            } else {
                hosts::hooks_path(agent, t.scope, &t.project_dir)?
            };
            let report = hosts::uninstall_hooks(agent, &path)?;
            print_report("removed", agent, &report);
            Ok(())
        }
        HooksCommand::Status(args) => {
            let last_seen = last_events(&args.common).await;
            status(&args, &last_seen)
        }
    }
}

pub fn run_mcp(command: McpCommand) -> anyhow::Result<()> {
    let (t, install) = match command {
        McpCommand::Install(t) => (t, true),
        McpCommand::Uninstall(t) => (t, false),
    };
    let agent = hosts::agent_name(&t.agent)?;
    let path = hosts::mcp_path(agent, t.scope, &t.project_dir)?;
    if install {
        let binary = find_binary("mneme")?;
        let report = hosts::install_mcp(agent, &path, &binary)?;
        print_report("registered the MCP server of", agent, &report);
    } else {
        let report = hosts::uninstall_mcp(agent, &path)?;
        print_report("removed the MCP server of", agent, &report);
    }
    Ok(())
}

/// The newest event time (Unix ms) stored per agent, and the count of sessions.
async fn last_events(common: &CommonArgs) -> std::collections::BTreeMap<String, (i64, i64)> {
    let mut seen = std::collections::BTreeMap::new();
    let Ok(store) = store::Store::open_read_only(&common.db_path()).await else {
        return seen;
    };
    let rows: Vec<(String, i64, i64)> =
        sqlx::query_as("SELECT agent, MAX(last_event_at), count(*) FROM sessions GROUP BY agent")
            .fetch_all(store.pool())
            .await
            .unwrap_or_default();
    for (agent, at, n) in rows {
        seen.insert(agent, (at, n));
    }
    seen
}

fn status(
    args: &StatusArgs,
    last_seen: &std::collections::BTreeMap<String, (i64, i64)>,
) -> anyhow::Result<()> {
    let agents: Vec<&str> = match &args.agent {
        Some(agent) => vec![hosts::agent_name(agent)?],
        None => AGENTS.to_vec(),
    };
    let mut report = Vec::new();
    for agent in agents {
        let mut places = Vec::new();
        for scope in [Scope::User, Scope::Project] {
            if args.scope.is_some_and(|only| only != scope) {
                continue;
            }
            let Ok(path) = hosts::hooks_path(agent, scope, &args.project_dir) else {
                continue;
            };
            let events = match hosts::installed_hooks(agent, &path) {
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
        if agent == "gemini"
            && let Ok(dir) = hosts::gemini_extension_dir()
        {
            let path = dir.join("hooks/hooks.json");
            if let Ok(events) = hosts::installed_hooks(agent, &path)
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
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let secs = ((now - ms) / 1000).max(0);
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
