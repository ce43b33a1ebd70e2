//! Gemini CLI: its adapter, install rules, history import and capability places.

pub mod adapter;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;

use crate::Host;
use crate::capabilities::{Capability, Kind, Root, at};

/// The Gemini CLI host.
pub const HOST: Host = Host {
    name: "gemini",
    aliases: &["gemini-cli"],
    agent: proto::Agent::Gemini,
    adapter: adapter::ADAPTER,
    capabilities: &CAPABILITIES,
};

/// How Gemini CLI's history is imported.
#[cfg(feature = "import")]
pub const IMPORT: Option<crate::import::Import> = Some(import::IMPORT);

/// Where Gemini CLI keeps skills, commands, subagents and MCP servers.
const CAPABILITIES: [Capability; 4] = [
    at(Kind::Command, Root::User, ".gemini/commands/*.toml"),
    at(Kind::Command, Root::Project, ".gemini/commands/*.toml"),
    at(Kind::McpServers, Root::User, ".gemini/settings.json"),
    at(Kind::McpServers, Root::Project, ".gemini/settings.json"),
];
