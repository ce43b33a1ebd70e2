//! Installing mneme into Codex: `hooks.json` beside `config.toml` (`$CODEX_HOME`, else
//! `~/.codex`, or the project's `.codex`), the `[features]` switch that can turn hooks off, and
//! MCP servers in `config.toml`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Value, json};

use crate::edit::edit_toml;
use crate::install::{EventSpec, Flavor, Install, InstallReport, Mcp, Scope, event, home, project};
use crate::paths::env_dir;

/// How mneme is installed into Codex.
pub const INSTALL: Install = Install {
    hooks_path: |scope, project_dir| Ok(codex_dir(scope, project_dir)?.join("hooks.json")),
    install: |path, binary| CODEX.install(path, binary),
    uninstall: |path| CODEX.uninstall(path),
    installed: |path| CODEX.installed(path),
    enable: Some(|hooks| enable_feature(&hooks.with_file_name("config.toml"))),
    extension: None,
    mcp_path: |scope, project_dir| Ok(codex_dir(scope, project_dir)?.join("config.toml")),
    mcp: Mcp::Toml,
    note: Some(
        "codex runs a new or changed hook only after you approve it: open codex, type /hooks and trust mneme's hooks (until then they silently do nothing; `mneme hooks status` shows codex as never fired)",
    ),
};

/// `$CODEX_HOME`, else `~/.codex`; `<project>/.codex` for project scope.
pub fn codex_dir(scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    Ok(match scope {
        Scope::User => match env_dir("CODEX_HOME") {
            Some(dir) => dir,
            None => home()?.join(".codex"),
        },
        Scope::Project => project(project_dir)?.join(".codex"),
    })
}

const CODEX_EVENTS: [EventSpec; 9] = [
    event("SessionStart", false, 10),
    event("UserPromptSubmit", false, 10),
    event("PreToolUse", true, 5),
    event("PostToolUse", true, 5),
    event("PreCompact", false, 5),
    event("PostCompact", false, 5),
    event("SubagentStart", false, 5),
    event("SubagentStop", false, 5),
    event("Stop", false, 5),
];

fn codex_entry(spec: &EventSpec, command: &str) -> Value {
    json!({"type": "command", "command": command, "timeout": spec.timeout_secs})
}

/// Codex's `hooks.json` (timeouts in seconds).
pub const CODEX: Flavor = Flavor {
    agent_arg: "codex",
    events: &CODEX_EVENTS,
    entry: codex_entry,
};

/// Codex: hooks run by default in current versions, but a `[features]` flag that turns them
/// off (`hooks = false`, or the older `codex_hooks = false`) must be turned on again.
pub fn enable_feature(config: &Path) -> Result<Option<InstallReport>> {
    if !config.exists() {
        return Ok(None);
    }
    let report = edit_toml(config, |doc| {
        let mut changed = Vec::new();
        if let Some(features) = doc.get_mut("features").and_then(|f| f.as_table_like_mut()) {
            for key in ["hooks", "codex_hooks"] {
                if features.get(key).and_then(|v| v.as_bool()) == Some(false) {
                    if let Some(value) = features.get_mut(key) {
                        *value = toml_edit::value(true);
                    }
                    changed.push(format!("features.{key}"));
                }
            }
        }
        Ok(changed)
    })?;
    Ok(report.changed.then_some(report))
}
