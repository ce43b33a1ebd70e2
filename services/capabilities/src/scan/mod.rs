//! The scanner: what the agents on this machine and the project offer, found by reading files
//! and never by running anything.
//!
//! Every host in [`hosts::HOSTS`] names the places it keeps skills, commands, subagents and MCP
//! servers ([`hosts::capabilities`]); the project's build files name its tasks (Makefile, justfile,
//! `package.json`, cargo aliases, Python scripts, Taskfile). Each becomes a [`Capability`] with
//! an id made from where it came from (`skill:db-migrate`, `make:test`), so a rescan finds the
//! same ids and a hand-written override keeps applying.

mod glob;
mod places;
mod secret;
mod tasks;

use std::collections::BTreeSet;
use std::path::Path;

use hosts::capabilities::{Kind as Place, Root};

use crate::model::{Capability, Category, Kind, Scope, make_id};

/// The categories the scanner files what it finds under, with their descriptions.
pub const CATEGORIES: [(&str, &str); 5] = [
    (
        "skills",
        "Skills: instructions an agent loads when a task calls for them",
    ),
    ("commands", "Slash commands and saved prompts"),
    ("agents", "Subagents and custom agents to hand a task to"),
    ("mcp-servers", "MCP servers whose tools an agent can call"),
    (
        "project-tasks",
        "The project's own tasks: make, just, npm, cargo, Python and Task",
    ),
];

/// The largest file the scanner reads, but for MCP configurations (Claude Code's `.claude.json`
/// also holds its history and grows large).
const MAX_FILE: u64 = 1 << 20;
const MAX_CONFIG: u64 = 64 << 20;

/// What a scan found, by scope, and the categories it filed it under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scanned {
    /// From the user's directories: for `$MNEME_HOME/capabilities.generated.yaml`.
    pub user: Vec<Capability>,
    /// From the project: for `<project>/.mneme/capabilities.generated.yaml`.
    pub project: Vec<Capability>,
    /// The scanner's categories that the capabilities use, sorted by id.
    pub categories: Vec<Category>,
}

/// Scans the user's home directory `home` and, when given, the project's directory. Reads
/// files only. Each list is sorted by id; when two places give one id (the same MCP server
/// configured for two hosts), the first host's is kept.
pub fn scan(home: &Path, project: Option<&Path>) -> Scanned {
    let project_scope = project.map(|dir| Scope::Project(dir.to_string_lossy().into_owned()));
    let mut user = Found::new(Scope::User);
    let mut found_project = Found::new(project_scope.clone().unwrap_or_default());
    for host in hosts::HOSTS {
        for place in host.capabilities {
            let (base, scope_is_user) = match (place.root, project) {
                (Root::User, _) => (home, true),
                (Root::Project, Some(dir)) => (dir, false),
                (Root::Project, None) => continue,
            };
            for path in glob::matches(base, place.pattern) {
                let source = source_of(base, &path, place.root);
                let ctx = Context {
                    path: &path,
                    source: &source,
                    project,
                };
                let (here, for_project) = match place.kind {
                    Place::Skill => (places::skill(&ctx).into_iter().collect(), Vec::new()),
                    Place::Command => (places::command(&ctx).into_iter().collect(), Vec::new()),
                    Place::Agent => (places::agent(&ctx).into_iter().collect(), Vec::new()),
                    // Claude Code keeps each project's own servers in the user's file.
                    Place::McpServers => places::mcp_servers(&ctx),
                };
                if scope_is_user {
                    user.extend(here);
                } else {
                    found_project.extend(here);
                }
                found_project.extend(for_project);
            }
        }
    }
    if let Some(dir) = project {
        found_project.extend(tasks::scan(dir));
    }
    let user = user.finish();
    let project = found_project.finish();
    let used: BTreeSet<&str> = user
        .iter()
        .chain(&project)
        .map(|cap| cap.category.as_str())
        .collect();
    let mut categories: Vec<Category> = CATEGORIES
        .iter()
        .filter(|(id, _)| used.contains(id))
        .map(|(id, description)| Category {
            id: (*id).to_owned(),
            description: (*description).to_owned(),
        })
        .collect();
    categories.sort();
    Scanned {
        user,
        project,
        categories,
    }
}

/// One file being read, and where it is.
pub(crate) struct Context<'a> {
    pub path: &'a Path,
    /// How the file is named in `source`: `~/…` under the home directory, relative in a project.
    pub source: &'a str,
    pub project: Option<&'a Path>,
}

/// The capabilities of one scope, the first of each id kept.
struct Found {
    scope: Scope,
    ids: BTreeSet<String>,
    list: Vec<Capability>,
}

impl Found {
    fn new(scope: Scope) -> Found {
        Found {
            scope,
            ids: BTreeSet::new(),
            list: Vec::new(),
        }
    }

    fn extend(&mut self, caps: impl IntoIterator<Item = Capability>) {
        for mut cap in caps {
            if self.ids.insert(cap.id.clone()) {
                cap.scope = self.scope.clone();
                self.list.push(cap.clipped());
            }
        }
    }

    fn finish(mut self) -> Vec<Capability> {
        self.list.sort_by(|a, b| a.id.cmp(&b.id));
        self.list
    }
}

/// A capability found by the scanner; `None` when nothing of `name` makes an id.
pub(crate) fn found(
    prefix: &str,
    name: &str,
    kind: Kind,
    category: &str,
    description: String,
    invoke: String,
    source: &str,
) -> Option<Capability> {
    Some(Capability {
        id: make_id(prefix, name)?,
        name: name.to_owned(),
        category: category.to_owned(),
        kind,
        description,
        when: Vec::new(),
        invoke,
        source: source.to_owned(),
        disabled: false,
        scope: Scope::User,
    })
}

/// How a found file is named: `~/…` for the user's, relative for the project's, so the
/// registry does not spell out the user's home directory.
fn source_of(base: &Path, path: &Path, root: Root) -> String {
    let relative = path.strip_prefix(base).unwrap_or(path);
    let relative = relative.to_string_lossy();
    match root {
        Root::User => format!("~/{relative}"),
        Root::Project => relative.into_owned(),
    }
}

/// A file's text when it is not larger than `max`; a file that cannot be read is skipped with a
/// note in the log, as the scan goes on.
pub(crate) fn read(path: &Path, max: u64) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.len() > max {
        tracing::warn!(path = %path.display(), size = meta.len(), "capability scan skips a file too large to be what it should");
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "capability scan cannot read a file");
            None
        }
    }
}

pub(crate) fn read_small(path: &Path) -> Option<String> {
    read(path, MAX_FILE)
}

pub(crate) fn read_config(path: &Path) -> Option<String> {
    read(path, MAX_CONFIG)
}

/// The file's name without its extension.
pub(crate) fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The name of the directory holding the file (a skill's folder).
pub(crate) fn parent_name(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests;
