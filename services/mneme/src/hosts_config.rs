//! Where each agent host keeps its hook and MCP configuration, and how mneme's entries are
//! added to it and removed from it again.
//!
//! Every edit keeps the rest of the user's file: JSON files go through
//! [`mneme_hook::install::edit_json`] (refuses a file that does not parse, backs up before
//! writing, replaces atomically, restores the original bytes when an uninstall brings the file
//! back to what it was), TOML files through `toml_edit`, which keeps comments, key order and
//! formatting. Installing twice is the same as installing once.

use anyhow::{Context as _, Result, bail};
use mneme_hook::install::{self, EventSpec, Flavor, InstallReport, Scope, event};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// The hosts `mneme hooks` and `mneme mcp` know.
pub const AGENTS: [&str; 6] = ["claude-code", "kimi", "codex", "cursor", "kiro", "gemini"];

/// The canonical name of an agent given on the command line.
pub fn agent_name(agent: &str) -> Result<&'static str> {
    mneme_hook::hosts::find(agent)
        .map(|host| host.name)
        .with_context(|| format!("unknown agent {agent:?}; known: {}", AGENTS.join(", ")))
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn project(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir)
        .with_context(|| format!("cannot resolve project directory {}", dir.display()))
}

/// `$CODEX_HOME`, else `~/.codex`; `<project>/.codex` for project scope.
fn codex_dir(scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    Ok(match scope {
        Scope::User => match env_dir("CODEX_HOME") {
            Some(dir) => dir,
            None => home()?.join(".codex"),
        },
        Scope::Project => project(project_dir)?.join(".codex"),
    })
}

/// `$KIMI_CODE_HOME`, else `~/.kimi-code`, else the legacy `~/.kimi` when only it exists.
fn kimi_dir() -> Result<PathBuf> {
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

fn scoped(scope: Scope, project_dir: &Path, dir: &str, file: &str) -> Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(dir).join(file),
        Scope::Project => project(project_dir)?.join(dir).join(file),
    })
}

/// The file holding mneme's hooks for `agent` at `scope`.
pub fn hooks_path(agent: &str, scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    match agent {
        "claude-code" => install::claude_code_settings_path(scope, project_dir),
        "codex" => Ok(codex_dir(scope, project_dir)?.join("hooks.json")),
        "cursor" => scoped(scope, project_dir, ".cursor", "hooks.json"),
        "kiro" => scoped(scope, project_dir, ".kiro/agents", "mneme.json"),
        "gemini" => scoped(scope, project_dir, ".gemini", "settings.json"),
        "kimi" => match scope {
            Scope::User => Ok(kimi_dir()?.join("config.toml")),
            Scope::Project => bail!(
                "kimi has no project-level hooks; install with --scope user (~/.kimi-code/config.toml)"
            ),
        },
        other => bail!("unknown agent {other:?}"),
    }
}

/// The directory of mneme's Gemini extension (`~/.gemini/extensions/mneme`).
pub fn gemini_extension_dir() -> Result<PathBuf> {
    Ok(home()?.join(".gemini/extensions/mneme"))
}

/// The file holding mneme's MCP server entry for `agent` at `scope`.
pub fn mcp_path(agent: &str, scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    match (agent, scope) {
        // Claude Code keeps user-scope servers in ~/.claude.json and project ones in .mcp.json.
        ("claude-code", Scope::User) => Ok(home()?.join(".claude.json")),
        ("claude-code", Scope::Project) => Ok(project(project_dir)?.join(".mcp.json")),
        ("codex", _) => Ok(codex_dir(scope, project_dir)?.join("config.toml")),
        ("cursor", _) => scoped(scope, project_dir, ".cursor", "mcp.json"),
        ("kimi", Scope::User) => Ok(kimi_dir()?.join("mcp.json")),
        ("kimi", Scope::Project) => Ok(project(project_dir)?.join(".kimi-code/mcp.json")),
        ("kiro", _) => scoped(scope, project_dir, ".kiro/settings", "mcp.json"),
        ("gemini", _) => scoped(scope, project_dir, ".gemini", "settings.json"),
        (other, _) => bail!("unknown agent {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Hosts whose hook configuration has Claude Code's shape.

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

// ---------------------------------------------------------------------------------------------
// Hosts with a flat list of handlers per event (Cursor's hooks.json, Kiro's agent file).

/// Cursor's events mneme registers: the generic tool family only, because Cursor fires both
/// the generic and the specific hooks (shell, file) for one action.
const CURSOR_EVENTS: [(&str, u64); 10] = [
    ("sessionStart", 10),
    ("beforeSubmitPrompt", 5),
    ("preToolUse", 5),
    ("postToolUse", 5),
    ("postToolUseFailure", 5),
    ("subagentStart", 5),
    ("subagentStop", 5),
    ("preCompact", 5),
    ("stop", 10),
    ("sessionEnd", 5),
];

/// Kiro CLI 2.x agent-file triggers; timeouts in milliseconds.
const KIRO_EVENTS: [(&str, u64); 5] = [
    ("agentSpawn", 10),
    ("userPromptSubmit", 10),
    ("preToolUse", 5),
    ("postToolUse", 5),
    ("stop", 5),
];

fn flat_entry(agent: &str, event: &str, command: &str, secs: u64) -> Value {
    match agent {
        "kiro" => {
            let mut entry = json!({"command": command, "timeout_ms": secs * 1000});
            if event.ends_with("ToolUse") {
                entry["matcher"] = "*".into();
            }
            entry
        }
        _ => json!({"command": command, "timeout": secs}),
    }
}

fn is_ours(entry: &Value, agent: &str) -> bool {
    entry
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|command| install::is_mneme_command(command, None, agent))
}

/// The skeleton of the agent file mneme creates for Kiro: an agent with every tool.
fn kiro_agent_skeleton() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "name": "mneme",
        "description": "The default tools, with mneme's memory hooks",
        "tools": ["*"],
    }) else {
        unreachable!()
    };
    map
}

fn flat_install(root: &mut Map<String, Value>, agent: &str, command: &str) -> Result<Vec<String>> {
    let events: &[(&str, u64)] = if agent == "kiro" {
        &KIRO_EVENTS
    } else {
        &CURSOR_EVENTS
    };
    let mut changed = Vec::new();
    if agent == "cursor" {
        match root.get("version") {
            None => {
                root.insert("version".to_owned(), json!(1));
                changed.push("version".to_owned());
            }
            Some(v) if v == &json!(1) => {}
            Some(other) => bail!(
                "cursor hooks.json has version {other}; mneme knows version 1 only and will not change it"
            ),
        }
    }
    if agent == "kiro" && root.is_empty() {
        root.extend(kiro_agent_skeleton());
    }
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .context("\"hooks\" is not an object; mneme will not overwrite it")?;
    for (event, secs) in events {
        let desired = flat_entry(agent, event, command, *secs);
        let list = hooks
            .entry(event.to_string())
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .with_context(|| format!("hooks.{event} is not a list; mneme will not overwrite it"))?;
        let ours: Vec<usize> = (0..list.len())
            .filter(|&i| is_ours(&list[i], agent))
            .collect();
        if ours.len() == 1 && list[ours[0]] == desired {
            continue;
        }
        // An old path or a duplicate is rewritten as the one entry mneme needs.
        let keep = ours.first().copied();
        for &i in ours.iter().skip(1).rev() {
            list.remove(i);
        }
        match keep {
            Some(i) => list[i] = desired,
            None => list.push(desired),
        }
        changed.push(event.to_string());
    }
    Ok(changed)
}

fn flat_uninstall(root: &mut Map<String, Value>, agent: &str) -> Vec<String> {
    let mut changed = Vec::new();
    if let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) {
        let mut emptied = Vec::new();
        for (event, list) in hooks.iter_mut() {
            let Some(list) = list.as_array_mut() else {
                continue;
            };
            let before = list.len();
            list.retain(|entry| !is_ours(entry, agent));
            if list.len() != before {
                changed.push(event.clone());
                if list.is_empty() {
                    emptied.push(event.clone());
                }
            }
        }
        for event in emptied {
            hooks.shift_remove(&event);
        }
        if hooks.is_empty() && !changed.is_empty() {
            root.shift_remove("hooks");
        }
    }
    if !changed.is_empty() {
        if agent == "cursor" && root.len() == 1 && root.get("version") == Some(&json!(1)) {
            root.clear();
        }
        if agent == "kiro" && *root == kiro_agent_skeleton() {
            root.clear();
        }
    }
    changed
}

fn flat_installed(root: &Map<String, Value>, agent: &str) -> Vec<String> {
    root.get("hooks")
        .and_then(Value::as_object)
        .map(|hooks| {
            hooks
                .iter()
                .filter(|(_, list)| {
                    list.as_array()
                        .is_some_and(|l| l.iter().any(|e| is_ours(e, agent)))
                })
                .map(|(event, _)| event.clone())
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Kimi: `[[hooks]]` tables in config.toml, with exactly the four keys Kimi accepts.

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

fn parse_toml(path: &Path) -> Result<(Option<String>, toml_edit::DocumentMut)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let doc = text
        .as_deref()
        .unwrap_or("")
        .parse::<toml_edit::DocumentMut>()
        .with_context(|| {
            format!(
                "{} is not valid toml; fix or move it, mneme will not overwrite it",
                path.display()
            )
        })?;
    Ok((text, doc))
}

fn kimi_is_ours(table: &toml_edit::Table) -> bool {
    table
        .get("command")
        .and_then(|c| c.as_str())
        .is_some_and(|c| install::is_mneme_command(c, None, "kimi"))
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

/// Write a TOML file the way [`install::edit_json`] writes JSON: back up, then replace
/// atomically; a file that did not exist gets no backup.
fn save_toml(path: &Path, original: Option<&str>, text: &str) -> Result<Option<PathBuf>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let backup = match original {
        Some(original) => {
            let seconds = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let name = format!(
                "{}.mneme-backup-{seconds}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            let mut backup = dir.join(&name);
            let mut n = 0;
            while backup.exists() {
                n += 1;
                backup = dir.join(format!("{name}-{n}"));
            }
            std::fs::write(&backup, original)
                .with_context(|| format!("cannot write backup {}", backup.display()))?;
            Some(backup)
        }
        None => None,
    };
    let temp = dir.join(format!(
        ".{}.mneme-tmp-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&temp, text).with_context(|| format!("cannot write {}", temp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    std::fs::rename(&temp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(backup)
}

fn edit_toml(
    path: &Path,
    edit: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<Vec<String>>,
) -> Result<InstallReport> {
    let (original, mut doc) = parse_toml(path)?;
    let events = edit(&mut doc)?;
    let mut report = InstallReport {
        settings_path: path.to_path_buf(),
        backup_path: None,
        changed: !events.is_empty(),
        events,
    };
    if report.changed {
        let text = doc.to_string();
        if original.as_deref() != Some(text.as_str()) {
            report.backup_path = save_toml(path, original.as_deref(), &text)?;
        }
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// The operations.

/// Install mneme's hooks for `agent` in `path`.
pub fn install_hooks(agent: &str, path: &Path, hook_binary: &Path) -> Result<InstallReport> {
    match agent {
        "claude-code" => install::install_claude_code(path, hook_binary),
        "codex" => install::install_hooks(path, hook_binary, &CODEX),
        "gemini" => install::install_hooks(path, hook_binary, &GEMINI),
        "cursor" | "kiro" => {
            let command = install::hook_command(hook_binary, agent)?;
            install::edit_json(path, |root| flat_install(root, agent, &command))
        }
        "kimi" => {
            let command = install::hook_command(hook_binary, "kimi")?;
            edit_toml(path, |doc| kimi_install(doc, &command))
        }
        other => bail!("unknown agent {other:?}"),
    }
}

/// Remove exactly mneme's hooks for `agent` from `path`.
pub fn uninstall_hooks(agent: &str, path: &Path) -> Result<InstallReport> {
    let report = match agent {
        "claude-code" => install::uninstall_claude_code(path)?,
        "codex" => install::uninstall_hooks(path, &CODEX)?,
        "gemini" => install::uninstall_hooks(path, &GEMINI)?,
        "cursor" | "kiro" => install::edit_json(path, |root| Ok(flat_uninstall(root, agent)))?,
        "kimi" => edit_toml(path, |doc| Ok(kimi_uninstall(doc)))?,
        other => bail!("unknown agent {other:?}"),
    };
    remove_if_emptied(path, &report);
    Ok(report)
}

/// A file that mneme created (no backup of it predates this uninstall) and that the
/// uninstall left empty is removed rather than left behind as `{}`.
fn remove_if_emptied(path: &Path, report: &InstallReport) {
    if !report.changed
        || !std::fs::read_to_string(path).is_ok_and(|t| matches!(t.trim(), "{}" | ""))
    {
        return;
    }
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let prefix = format!("{name}.mneme-backup-");
    let dir = path.parent().unwrap_or(Path::new("."));
    let older_backups = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .filter(|e| Some(e.path()) != report.backup_path)
                .count()
        })
        .unwrap_or(1);
    if older_backups == 0 {
        let _ = std::fs::remove_file(path);
        // That backup only held mneme's own entries.
        if let Some(backup) = &report.backup_path {
            let _ = std::fs::remove_file(backup);
        }
    }
}

/// The events mneme's hooks for `agent` are registered on in `path`.
pub fn installed_hooks(agent: &str, path: &Path) -> Result<Vec<String>> {
    match agent {
        "claude-code" => install::installed_claude_code_events(path),
        "codex" => install::installed_events(path, &CODEX),
        "gemini" => install::installed_events(path, &GEMINI),
        "cursor" | "kiro" => Ok(flat_installed(&install::read_json(path)?, agent)),
        "kimi" => Ok(kimi_installed(&parse_toml(path)?.1)),
        other => bail!("unknown agent {other:?}"),
    }
}

/// Codex: hooks run by default in current versions, but a `[features]` flag that turns them
/// off (`hooks = false`, or the older `codex_hooks = false`) must be turned on again.
pub fn codex_enable_feature(config: &Path) -> Result<Option<InstallReport>> {
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

/// Gemini: `hooksConfig.enabled` defaults to true; an explicit `false` is turned on.
pub fn gemini_enable_hooks(settings: &Path) -> Result<Option<InstallReport>> {
    let report = install::edit_json(settings, |root| {
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
pub fn install_gemini_extension(dir: &Path, hook_binary: &Path) -> Result<InstallReport> {
    let manifest = dir.join("gemini-extension.json");
    install::edit_json(&manifest, |root| {
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
    install::install_hooks(&dir.join("hooks/hooks.json"), hook_binary, &GEMINI)
}

/// The MCP server entry that launches `mneme mcp`.
fn mcp_entry(mneme: &str) -> Value {
    json!({"command": mneme, "args": ["mcp"]})
}

/// Register mneme's MCP server for `agent` in `path`.
pub fn install_mcp(agent: &str, path: &Path, mneme_binary: &Path) -> Result<InstallReport> {
    let binary = std::path::absolute(mneme_binary)?;
    let binary = binary
        .to_str()
        .context("the mneme binary path is not valid utf-8")?
        .to_owned();
    if agent == "codex" {
        return edit_toml(path, |doc| {
            let servers = doc
                .entry("mcp_servers")
                .or_insert(toml_edit::table())
                .as_table_mut()
                .context("mcp_servers in codex's config.toml is not a table")?;
            servers.set_implicit(true);
            let current = servers.get("mneme").and_then(|t| t.as_table());
            let same = current.is_some_and(|t| {
                t.get("command").and_then(|c| c.as_str()) == Some(binary.as_str())
                    && t.get("args").and_then(|a| a.as_array()).is_some_and(|a| {
                        a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp")
                    })
            });
            if same {
                return Ok(Vec::new());
            }
            let mut table = toml_edit::Table::new();
            table["command"] = toml_edit::value(binary.as_str());
            let mut args = toml_edit::Array::new();
            args.push("mcp");
            table["args"] = toml_edit::value(args);
            servers.insert("mneme", toml_edit::Item::Table(table));
            Ok(vec!["mcp_servers.mneme".to_owned()])
        });
    }
    let desired = mcp_entry(&binary);
    install::edit_json(path, |root| {
        let servers = root
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context("\"mcpServers\" is not an object; mneme will not overwrite it")?;
        if servers.get("mneme") == Some(&desired) {
            return Ok(Vec::new());
        }
        servers.insert("mneme".to_owned(), desired.clone());
        Ok(vec!["mcpServers.mneme".to_owned()])
    })
}

/// Remove mneme's MCP server entry for `agent` from `path`.
pub fn uninstall_mcp(agent: &str, path: &Path) -> Result<InstallReport> {
    let report = if agent == "codex" {
        edit_toml(path, |doc| {
            let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut()) else {
                return Ok(Vec::new());
            };
            if servers.remove("mneme").is_none() {
                return Ok(Vec::new());
            }
            if servers.is_empty() {
                doc.remove("mcp_servers");
            }
            Ok(vec!["mcp_servers.mneme".to_owned()])
        })?
    } else {
        install::edit_json(path, |root| {
            let Some(servers) = root.get_mut("mcpServers").and_then(Value::as_object_mut) else {
                return Ok(Vec::new());
            };
            if servers.shift_remove("mneme").is_none() {
                return Ok(Vec::new());
            }
            if servers.is_empty() {
                root.shift_remove("mcpServers");
            }
            Ok(vec!["mcpServers.mneme".to_owned()])
        })?
    };
    remove_if_emptied(path, &report);
    Ok(report)
}
