//! Cursor: its adapter, install rules and capability places.

pub mod adapter;
#[cfg(feature = "install")]
pub mod install;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Cursor host.
pub const HOST: Host = Host {
    name: "cursor",
    aliases: &["cursor-agent"],
    agent: proto::Agent::Cursor,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// Cursor keeps no history mneme can read yet: its live hooks capture everything.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = None;

/// Where Cursor keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 4] = [
    at(Kind::Command, Root::User, ".cursor/commands/*.md"),
    at(Kind::Command, Root::Project, ".cursor/commands/*.md"),
    at(Kind::McpServers, Root::User, ".cursor/mcp.json"),
    at(Kind::McpServers, Root::Project, ".cursor/mcp.json"),
];
