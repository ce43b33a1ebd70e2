//! Kiro CLI: its adapter, install rules, history import and capability places.

pub mod adapter;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Kiro CLI host.
pub const HOST: Host = Host {
    name: "kiro",
    aliases: &["kiro-cli"],
    agent: proto::Agent::Kiro,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// How Kiro CLI's history is imported.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = Some(import::IMPORT);

/// Where Kiro CLI keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 4] = [
    at(Kind::Agent, Root::User, ".kiro/agents/*.json"),
    at(Kind::Agent, Root::Project, ".kiro/agents/*.json"),
    at(Kind::McpServers, Root::User, ".kiro/settings/mcp.json"),
    at(Kind::McpServers, Root::Project, ".kiro/settings/mcp.json"),
];
