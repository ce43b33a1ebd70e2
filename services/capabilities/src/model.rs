//! What a capability is: the entry of the registry's files, its kinds and categories, and the
//! limits every text field is held to.

use serde::{Deserialize, Serialize};

/// The longest description kept; a registry is read by people and by models, and a long
/// description only crowds out the others.
pub const MAX_DESCRIPTION: usize = 300;
/// The longest id, name, category, trigger or invocation kept.
pub const MAX_SHORT: usize = 120;
/// The longest source kept (a path, usually).
pub const MAX_SOURCE: usize = 300;
/// The most triggers (`when`) kept for one capability.
pub const MAX_WHEN: usize = 20;

/// What a capability is, which says how an agent reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A skill: instructions an agent loads when a task calls for them.
    Skill,
    /// A slash command or saved prompt.
    Command,
    /// A subagent or custom agent.
    Agent,
    /// One tool of an MCP server.
    McpTool,
    /// An MCP server, with all its tools.
    McpServer,
    /// A project task: a Makefile target, an npm script, a cargo alias, …
    Task,
    /// A program on the machine.
    Tool,
}

impl Kind {
    /// Every kind, in the order the file format lists them.
    pub const ALL: [Kind; 7] = [
        Kind::Skill,
        Kind::Command,
        Kind::Agent,
        Kind::McpTool,
        Kind::McpServer,
        Kind::Task,
        Kind::Tool,
    ];

    /// The name the files use.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Skill => "skill",
            Kind::Command => "command",
            Kind::Agent => "agent",
            Kind::McpTool => "mcp-tool",
            Kind::McpServer => "mcp-server",
            Kind::Task => "task",
            Kind::Tool => "tool",
        }
    }

    /// The kind the files call `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose a capability is: every project's (the user's files), or one project's.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// From the user's files: available in every project.
    #[default]
    User,
    /// From one project's files; the project's directory.
    Project(String),
}

/// One capability: something an agent can use, and how.
///
/// The serialised fields are the file format's; `scope` is where the entry was read from,
/// set by [`crate::load`] and the scanner, never written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// Unique within the registry: lowercase `[a-z0-9._:-]+`.
    pub id: String,
    pub name: String,
    pub category: String,
    pub kind: Kind,
    pub description: String,
    /// Triggers: intents in the user's words that this capability answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<String>,
    /// How to invoke it (a command line, a slash command, `mcp server <name>`, …).
    pub invoke: String,
    /// Where it came from: a file, or `hand-written`.
    #[serde(default)]
    pub source: String,
    /// In a hand-written file, hides the entry of the same id from the files before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    #[serde(skip)]
    pub scope: Scope,
}

/// A category: an id and a one-line description of what its capabilities are for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Category {
    pub id: String,
    /// Empty for a category capabilities name but no file describes.
    pub description: String,
}

/// Why an id is not one: `None` for a good id.
pub fn id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if id.len() > MAX_SHORT {
        return Some(format!("longer than {MAX_SHORT} characters"));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "._:-".contains(*c)))
    {
        return Some(format!(
            "`{bad}` is not allowed: use lowercase letters, digits and . _ : -"
        ));
    }
    None
}

/// An id made of `prefix:` and any name: lowercased, with every run of characters an id may
/// not hold turned into one `-`. `None` when nothing of the name is left.
pub fn make_id(prefix: &str, name: &str) -> Option<String> {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || "._:-".contains(c) {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-');
    if slug.is_empty() {
        return None;
    }
    let id = clip(&format!("{prefix}:{slug}"), MAX_SHORT);
    id_problem(&id).is_none().then_some(id)
}

/// `text` on one line (every run of whitespace one space) and at most `max` characters, cut
/// on a character boundary with `…` marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

impl Capability {
    /// Holds every text field to its limit, so nothing read from a file can grow the registry
    /// without bound.
    pub fn clipped(mut self) -> Self {
        self.name = clip(&self.name, MAX_SHORT);
        self.category = clip(&self.category, MAX_SHORT);
        self.description = clip(&self.description, MAX_DESCRIPTION);
        self.invoke = clip(&self.invoke, MAX_SHORT * 2);
        self.source = clip(&self.source, MAX_SOURCE);
        self.when = self
            .when
            .iter()
            .map(|w| clip(w, MAX_SHORT))
            .filter(|w| !w.is_empty())
            .take(MAX_WHEN)
            .collect();
        self
    }
}

/// One scope's registry as it crosses NATS to retrieval: the capabilities of `scope` (the
/// user's, or one project's) among `capabilities`, with every category's description.
pub fn sync_request(
    scope: &Scope,
    capabilities: &[Capability],
    categories: &[Category],
) -> proto::SyncCapabilitiesRequest {
    proto::SyncCapabilitiesRequest {
        scope: match scope {
            Scope::User => String::new(),
            Scope::Project(dir) => dir.clone(),
        },
        capabilities: capabilities
            .iter()
            .filter(|c| c.scope == *scope)
            .map(to_proto)
            .collect(),
        categories: categories
            .iter()
            .map(|c| proto::CapabilityCategory {
                id: c.id.clone(),
                description: c.description.clone(),
            })
            .collect(),
    }
}

/// The capability as it crosses NATS to retrieval, which matches prompts against it.
pub fn to_proto(capability: &Capability) -> proto::Capability {
    proto::Capability {
        id: capability.id.clone(),
        name: capability.name.clone(),
        category: capability.category.clone(),
        kind: capability.kind.as_str().to_owned(),
        description: capability.description.clone(),
        when: capability.when.clone(),
        invoke: capability.invoke.clone(),
        source: capability.source.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_and_made_from_any_name() {
        assert_eq!(id_problem("make:test"), None);
        assert_eq!(id_problem("a.b_c-d:9"), None);
        assert!(id_problem("").is_some());
        assert!(id_problem("Make").unwrap().contains("`M`"));
        assert!(id_problem("a b").is_some());
        assert_eq!(
            make_id("skill", "DB Migrate!").as_deref(),
            Some("skill:db-migrate")
        );
        assert_eq!(
            make_id("npm", "build:prod").as_deref(),
            Some("npm:build:prod")
        );
        assert_eq!(make_id("npm", "  ¿¿ "), None);
    }

    #[test]
    fn clip_keeps_one_line_and_cuts_on_a_character_boundary() {
        assert_eq!(clip("  a\n\tb  ", 10), "a b");
        let long = "é".repeat(400);
        let cut = clip(&long, MAX_DESCRIPTION);
        assert_eq!(cut.chars().count(), MAX_DESCRIPTION);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn kinds_have_their_file_names() {
        for kind in Kind::ALL {
            assert_eq!(Kind::from_name(kind.as_str()), Some(kind));
            let yaml = yaml_serde::to_string(&kind).unwrap();
            assert_eq!(yaml.trim(), kind.as_str());
        }
        assert_eq!(Kind::from_name("macro"), None);
    }
}
