//! Installing mneme into Kiro CLI: an agent file of mneme's own (`~/.kiro/agents/mneme.json` or
//! the project's), which Kiro runs hooks for only when that agent is used, and MCP servers in
//! `.kiro/settings/mcp.json`.

use serde_json::{Map, Value, json};

use crate::install::{Flat, Install, Mcp, scoped};

/// How mneme is installed into Kiro CLI.
pub const INSTALL: Install = Install {
    hooks_path: |scope, project_dir| scoped(scope, project_dir, ".kiro/agents", "mneme.json"),
    install: |path, binary| KIRO.install(path, binary),
    uninstall: |path| KIRO.uninstall(path),
    installed: |path| KIRO.installed(path),
    enable: None,
    extension: None,
    mcp_path: |scope, project_dir| scoped(scope, project_dir, ".kiro/settings", "mcp.json"),
    mcp: Mcp::Json,
    note: Some(
        "kiro runs hooks only for the agent that declares them: start kiro-cli with `--agent mneme`, or make mneme your default agent",
    ),
};

/// Kiro CLI 2.x agent-file triggers; timeouts in milliseconds.
const EVENTS: [(&str, u64); 5] = [
    ("agentSpawn", 10),
    ("userPromptSubmit", 10),
    ("preToolUse", 5),
    ("postToolUse", 5),
    ("stop", 5),
];

/// Kiro's agent file: `hooks.<trigger>` lists `{command, timeout_ms, matcher}` entries.
const KIRO: Flat = Flat {
    agent_arg: "kiro",
    events: &EVENTS,
    entry: |event, command, secs| {
        let mut entry = json!({"command": command, "timeout_ms": secs * 1000});
        if event.ends_with("ToolUse") {
            entry["matcher"] = "*".into();
        }
        entry
    },
    // A new file becomes an agent with every tool, so running it changes nothing but memory.
    prepare: |root| {
        if root.is_empty() {
            root.extend(kiro_agent_skeleton());
        }
        Ok(Vec::new())
    },
    skeleton: kiro_agent_skeleton,
};

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
