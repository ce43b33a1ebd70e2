//! Installing mneme into Gemini CLI: hooks in `settings.json` (`~/.gemini` or the project's
//! `.gemini`) or as an extension (`~/.gemini/extensions/mneme`), the `hooksConfig.enabled`
//! switch, and MCP servers in `settings.json`.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::edit::edit_json;
use crate::install::{
    EventSpec, Extension, Flavor, Install, InstallReport, Mcp, event, home, scoped,
};

/// How mneme is installed into Gemini CLI.
pub const INSTALL: Install = Install {
    hooks_path: |scope, project_dir| scoped(scope, project_dir, ".gemini", "settings.json"),
    install: |path, binary| GEMINI.install(path, binary),
    uninstall: |path| GEMINI.uninstall(path),
    installed: |path| GEMINI.installed(path),
    enable: Some(enable_hooks),
    extension: Some(Extension {
        dir: || Ok(home()?.join(".gemini/extensions/mneme")),
        install: install_extension,
        hooks_file: "hooks/hooks.json",
    }),
    mcp_path: |scope, project_dir| scoped(scope, project_dir, ".gemini", "settings.json"),
    mcp: Mcp::Json,
    note: Some(
        "gemini registers settings hooks only in trusted folders; `mneme hooks install --agent gemini --form extension` works everywhere",
    ),
};

const GEMINI_EVENTS: [EventSpec; 8] = [
    event("SessionStart", false, 10),
    event("BeforeAgent", false, 10),
    event("BeforeTool", true, 5),
    event("AfterTool", true, 5),
    event("AfterAgent", false, 5),
    event("PreCompress", false, 5),
    event("Notification", false, 5),
    event("SessionEnd", false, 5),
];

fn gemini_entry(spec: &EventSpec, command: &str) -> Value {
    // Gemini's timeouts are milliseconds, and hooks are enabled and disabled by name.
    json!({
        "name": format!("mneme-{}", spec.name),
        "type": "command",
        "command": command,
        "timeout": spec.timeout_secs * 1000,
    })
}

/// Gemini's `settings.json` and extension `hooks/hooks.json` (timeouts in milliseconds).
pub const GEMINI: Flavor = Flavor {
    agent_arg: "gemini",
    events: &GEMINI_EVENTS,
    entry: gemini_entry,
};

/// Gemini: `hooksConfig.enabled` defaults to true; an explicit `false` is turned on.
pub fn enable_hooks(settings: &Path) -> Result<Option<InstallReport>> {
    let report = edit_json(settings, |root| {
        let enabled = root.get("hooksConfig").and_then(|h| h.get("enabled"));
        if enabled == Some(&Value::Bool(false)) {
            root["hooksConfig"]["enabled"] = Value::Bool(true);
            return Ok(vec!["hooksConfig.enabled".to_owned()]);
        }
        Ok(Vec::new())
    })?;
    Ok(report.changed.then_some(report))
}

/// Gemini's extension form: `~/.gemini/extensions/mneme/{gemini-extension.json,hooks/hooks.json}`,
/// which Gemini loads whether or not the folder is trusted.
pub fn install_extension(dir: &Path, hook_binary: &Path) -> Result<InstallReport> {
    let manifest = dir.join("gemini-extension.json");
    edit_json(&manifest, |root| {
        let desired = json!({
            "name": "mneme",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Persistent memory across sessions and agents",
        });
        if Value::Object(root.clone()) == desired {
            return Ok(Vec::new());
        }
        *root = desired.as_object().cloned().unwrap_or_default();
        Ok(vec!["gemini-extension.json".to_owned()])
    })?;
    GEMINI.install(&dir.join("hooks/hooks.json"), hook_binary)
}
