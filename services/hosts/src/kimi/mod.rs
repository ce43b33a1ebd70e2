//! Kimi Code: its adapter, install rules, history import and capability places.

pub mod adapter;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Kimi Code host.
pub const HOST: Host = Host {
    name: "kimi",
    aliases: &["kimi-code", "kimi-cli"],
    agent: proto::Agent::Kimi,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// How Kimi Code's history is imported.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = Some(import::IMPORT);

/// Where Kimi Code keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 3] = [
    at(Kind::Skill, Root::User, ".kimi-code/skills/*/SKILL.md"),
    at(Kind::McpServers, Root::User, ".kimi-code/mcp.json"),
    at(Kind::McpServers, Root::Project, ".kimi-code/mcp.json"),
];
