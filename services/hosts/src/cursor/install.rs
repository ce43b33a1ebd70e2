//! Installing mneme into Cursor: a flat `hooks.json` (version 1) in `~/.cursor` or the
//! project's `.cursor`, and MCP servers in `mcp.json` beside it.

use anyhow::bail;
use serde_json::{Map, Value, json};

use crate::install::{Flat, Install, Mcp, scoped};

/// How mneme is installed into Cursor.
pub const INSTALL: Install = Install {
    hooks_path: |scope, project_dir| scoped(scope, project_dir, ".cursor", "hooks.json"),
    install: |path, binary| CURSOR.install(path, binary),
    uninstall: |path| CURSOR.uninstall(path),
    installed: |path| CURSOR.installed(path),
    enable: None,
    extension: None,
    mcp_path: |scope, project_dir| scoped(scope, project_dir, ".cursor", "mcp.json"),
    mcp: Mcp::Json,
    note: Some(
        "cursor reloads hooks.json on save; set MNEME_CURSOR_RULES=1 in Cursor's environment to also keep .cursor/rules/mneme.mdc up to date for versions that ignore session-start context",
    ),
};

/// Cursor's events mneme registers: the generic tool family only, because Cursor fires both
/// the generic and the specific hooks (shell, file) for one action.
pub const EVENTS: [(&str, u64); 10] = [
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

/// Cursor's `hooks.json`: `{"version": 1, "hooks": {<event>: [{command, timeout}]}}`.
pub const CURSOR: Flat = Flat {
    agent_arg: "cursor",
    events: &EVENTS,
    entry: |_, command, secs| json!({"command": command, "timeout": secs}),
    prepare: |root| match root.get("version") {
        None => {
            root.insert("version".to_owned(), json!(1));
            Ok(vec!["version".to_owned()])
        }
        Some(v) if v == &json!(1) => Ok(Vec::new()),
        Some(other) => bail!(
            "cursor hooks.json has version {other}; mneme knows version 1 only and will not change it"
        ),
    },
    skeleton,
};

/// A hooks file holding nothing but its version.
fn skeleton() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("version".to_owned(), json!(1));
    map
}
