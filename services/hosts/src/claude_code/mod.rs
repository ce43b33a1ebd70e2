//! Claude Code: its adapter, install rules, history import and capability places.

pub mod adapter;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;
#[cfg(feature = "import")]
pub mod transcript;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Claude Code host.
pub const HOST: Host = Host {
    name: "claude-code",
    aliases: &["claude"],
    agent: proto::Agent::ClaudeCode,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// How Claude Code's history is imported.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = Some(import::IMPORT);

/// Where Claude Code keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 8] = [
    at(Kind::Skill, Root::User, ".claude/skills/*/SKILL.md"),
    at(Kind::Skill, Root::Project, ".claude/skills/*/SKILL.md"),
    at(Kind::Command, Root::User, ".claude/commands/*.md"),
    at(Kind::Command, Root::Project, ".claude/commands/*.md"),
    at(Kind::Agent, Root::User, ".claude/agents/*.md"),
    at(Kind::Agent, Root::Project, ".claude/agents/*.md"),
    at(Kind::McpServers, Root::User, ".claude.json"),
    at(Kind::McpServers, Root::Project, ".mcp.json"),
];
