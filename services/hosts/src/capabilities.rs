//! Where a host keeps the capabilities an agent can use: skills, slash commands, subagents and
//! MCP servers. Each host's `mod.rs` lists its places; the capability registry scans them
//! (reading files only, running nothing).

/// What a place holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A skill: a folder with a `SKILL.md` (name, description, instructions).
    Skill,
    /// A slash command or saved prompt: one Markdown (or TOML) file a command.
    Command,
    /// A subagent or custom agent definition.
    Agent,
    /// A configuration file listing MCP servers.
    McpServers,
}

/// What a place's pattern is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// The host's user directory (under `$HOME`, or the variable the host honours).
    User,
    /// The project's directory.
    Project,
}

/// One place a host keeps capabilities: a glob relative to its root (`*` within one path
/// component).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub kind: Kind,
    pub root: Root,
    pub pattern: &'static str,
}

/// A place, for the host tables.
pub const fn at(kind: Kind, root: Root, pattern: &'static str) -> Capability {
    Capability {
        kind,
        root,
        pattern,
    }
}
