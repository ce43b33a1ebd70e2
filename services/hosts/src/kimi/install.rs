//! Installing mneme into Kimi Code: `[[hooks]]` tables in `config.toml` with exactly the four
//! keys Kimi accepts (user scope only), and MCP servers in `mcp.json`.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::edit::{edit_toml, parse_toml};
use crate::install::{Install, Mcp, Scope, home, hook_command, is_mneme_command, project};
use crate::paths::env_dir;

/// How mneme is installed into Kimi Code.
pub const INSTALL: Install = Install {
    hooks_path: |scope, _| match scope {
        Scope::User => Ok(kimi_dir()?.join("config.toml")),
        Scope::Project => bail!(
            "kimi has no project-level hooks; install with --scope user (~/.kimi-code/config.toml)"
        ),
    },
    install: |path, binary| {
        let command = hook_command(binary, "kimi")?;
        edit_toml(path, |doc| kimi_install(doc, &command))
    },
    uninstall: |path| edit_toml(path, |doc| Ok(kimi_uninstall(doc))),
    installed: |path| Ok(kimi_installed(&parse_toml(path)?.1)),
    enable: None,
    extension: None,
    mcp_path: |scope, project_dir| match scope {
        Scope::User => Ok(kimi_dir()?.join("mcp.json")),
        Scope::Project => Ok(project(project_dir)?.join(".kimi-code/mcp.json")),
    },
    mcp: Mcp::Json,
    note: None,
};

/// `$KIMI_CODE_HOME`, else `~/.kimi-code`, else the legacy `~/.kimi` when only it exists.
pub fn kimi_dir() -> Result<PathBuf> {
    if let Some(dir) = env_dir("KIMI_CODE_HOME") {
        return Ok(dir);
    }
    let home = home()?;
    let current = home.join(".kimi-code");
    let legacy = home.join(".kimi");
    Ok(if !current.exists() && legacy.exists() {
        legacy
    } else {
        current
    })
}

const KIMI_EVENTS: [(&str, u64); 13] = [
    ("SessionStart", 10),
    ("UserPromptSubmit", 10),
    ("PreToolUse", 5),
    ("PostToolUse", 5),
    ("PostToolUseFailure", 5),
    ("SubagentStart", 5),
    ("SubagentStop", 5),
    ("PreCompact", 5),
    ("PostCompact", 5),
    ("Stop", 5),
    ("StopFailure", 5),
    ("SessionEnd", 5),
    ("Notification", 5),
];

fn kimi_is_ours(table: &toml_edit::Table) -> bool {
    table
        .get("command")
        .and_then(|c| c.as_str())
        .is_some_and(|c| is_mneme_command(c, None, "kimi"))
}

fn kimi_install(doc: &mut toml_edit::DocumentMut, command: &str) -> Result<Vec<String>> {
    let item = doc.entry("hooks").or_insert(toml_edit::Item::ArrayOfTables(
        toml_edit::ArrayOfTables::new(),
    ));
    let Some(tables) = item.as_array_of_tables_mut() else {
        bail!("hooks in kimi's config.toml is not an array of tables; mneme will not overwrite it");
    };
    let mut changed = Vec::new();
    for (event, secs) in KIMI_EVENTS {
        let present = tables.iter().any(|t| {
            kimi_is_ours(t)
                && t.get("event").and_then(|e| e.as_str()) == Some(event)
                && t.get("command").and_then(|c| c.as_str()) == Some(command)
                && t.get("timeout").and_then(|v| v.as_integer()) == Some(secs as i64)
        });
        if present {
            continue;
        }
        // Stale entries for this event (an old path, another timeout) are replaced.
        tables.retain(|t| {
            !(kimi_is_ours(t) && t.get("event").and_then(|e| e.as_str()) == Some(event))
        });
        let mut table = toml_edit::Table::new();
        // Only `event`, `matcher`, `command` and `timeout` are accepted: a fifth key makes
        // Kimi reject its whole configuration.
        table["event"] = toml_edit::value(event);
        table["command"] = toml_edit::value(command);
        table["timeout"] = toml_edit::value(secs as i64);
        tables.push(table);
        changed.push(event.to_owned());
    }
    Ok(changed)
}

fn kimi_uninstall(doc: &mut toml_edit::DocumentMut) -> Vec<String> {
    let mut changed = Vec::new();
    let Some(tables) = doc
        .get_mut("hooks")
        .and_then(|item| item.as_array_of_tables_mut())
    else {
        return changed;
    };
    for t in tables.iter() {
        if kimi_is_ours(t) {
            changed.push(
                t.get("event")
                    .and_then(|e| e.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    tables.retain(|t| !kimi_is_ours(t));
    if tables.is_empty() && !changed.is_empty() {
        doc.remove("hooks");
    }
    changed
}

fn kimi_installed(doc: &toml_edit::DocumentMut) -> Vec<String> {
    doc.get("hooks")
        .and_then(|item| item.as_array_of_tables())
        .map(|tables| {
            tables
                .iter()
                .filter(|t| kimi_is_ours(t))
                .filter_map(|t| t.get("event").and_then(|e| e.as_str()).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
