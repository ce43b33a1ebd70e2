//! Codex: its adapter, install rules, history import and capability places.

pub mod adapter;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Codex host.
pub const HOST: Host = Host {
    name: "codex",
    aliases: &[],
    agent: proto::Agent::Codex,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// How Codex's history is imported.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = Some(import::IMPORT);

/// Where Codex keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 4] = [
    at(Kind::Skill, Root::User, ".codex/skills/*/SKILL.md"),
    at(Kind::Command, Root::User, ".codex/prompts/*.md"),
    at(Kind::McpServers, Root::User, ".codex/config.toml"),
    at(Kind::McpServers, Root::Project, ".codex/config.toml"),
];
