//! Installing mneme into Claude Code: `settings.json` hooks (user or project) and MCP servers in
//! `~/.claude.json` or the project's `.mcp.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};

use crate::install::{EventSpec, Flavor, Install, Mcp, Scope, event, home, project};

/// How mneme is installed into Claude Code.
pub const INSTALL: Install = Install {
    hooks_path: settings_path,
    install: |path, binary| CLAUDE_CODE.install(path, binary),
    uninstall: |path| CLAUDE_CODE.uninstall(path),
    installed: |path| CLAUDE_CODE.installed(path),
    enable: None,
    extension: None,
    mcp_path,
    mcp: Mcp::Json,
    note: None,
};

/// Claude Code's `settings.json`.
pub const CLAUDE_CODE: Flavor = Flavor {
    agent_arg: "claude-code",
    events: &EVENTS,
    entry: desired_entry,
};

/// Every event mneme registers on, in the order they are written to a fresh file.
pub(crate) const EVENTS: [EventSpec; 13] = [
    // These two fetch context for the agent, so they get a longer budget than the
    // fire-and-forget events below.
    event("SessionStart", false, 10),
    event("UserPromptSubmit", false, 10),
    event("PreToolUse", true, 5),
    event("PostToolUse", true, 5),
    event("PostToolUseFailure", true, 5),
    event("SubagentStart", false, 5),
    event("SubagentStop", false, 5),
    event("PreCompact", false, 5),
    event("PostCompact", false, 5),
    event("Stop", false, 5),
    event("StopFailure", false, 5),
    event("SessionEnd", false, 5),
    event("Notification", false, 5),
];

/// The exact entry install writes for an event.
fn desired_entry(spec: &EventSpec, command: &str) -> Value {
    json!({ "type": "command", "command": command, "timeout": spec.timeout_secs })
}

/// Returns the path of Claude Code's settings file for `scope`.
///
/// User scope honours `CLAUDE_CONFIG_DIR`, which replaces `~/.claude` entirely, and otherwise
/// uses `$HOME/.claude`. Project scope uses `<project_dir>/.claude/settings.json`.
pub fn settings_path(scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    match scope {
        Scope::User => user_settings_path(
            std::env::var_os("CLAUDE_CONFIG_DIR"),
            // Windows shells do not always set HOME, but always set USERPROFILE.
            std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")),
        ),
        Scope::Project => {
            let project = std::path::absolute(project_dir).with_context(|| {
                format!("cannot resolve project directory {}", project_dir.display())
            })?;
            Ok(project.join(".claude").join("settings.json"))
        }
    }
}

/// The environment-free core of the user-scope lookup, separate so tests need not mutate the
/// process environment.
pub(crate) fn user_settings_path(
    config_dir: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf> {
    // An empty variable is treated as unset, as a shell user would expect from `FOO=`.
    if let Some(dir) = config_dir.filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("settings.json"));
    }
    let home = home.filter(|h| !h.is_empty()).ok_or_else(|| {
        anyhow!(
            "cannot locate claude code's user settings: neither CLAUDE_CONFIG_DIR nor HOME is set"
        )
    })?;
    Ok(PathBuf::from(home).join(".claude").join("settings.json"))
}

/// Claude Code keeps user-scope MCP servers in `~/.claude.json` and project ones in `.mcp.json`.
fn mcp_path(scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(".claude.json"),
        Scope::Project => project(project_dir)?.join(".mcp.json"),
    })
}
