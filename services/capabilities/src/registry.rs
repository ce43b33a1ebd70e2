//! Where the registry's files are, and the registry they make together.
//!
//! Each directory holds a hand-written `capabilities.yaml` and the scanner's
//! `capabilities.generated.yaml`. They are merged generated user < hand user < generated project
//! < hand project: a later file's entry replaces an earlier one of the same id, and a
//! hand-written `disabled: true` removes it, so a person always has the last word over what the
//! scanner found.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::file::{Entry, Origin, Problem, parse};
use crate::model::{Capability, Category, Scope};

/// The hand-written file's name.
pub const HAND_FILE: &str = "capabilities.yaml";
/// The scanner's file's name.
pub const GENERATED_FILE: &str = "capabilities.generated.yaml";
/// The directory inside a project that holds its files.
pub const PROJECT_DIR: &str = ".mneme";

/// The largest registry file read; anything bigger is a mistake, not a registry.
const MAX_FILE: u64 = 4 << 20;

/// The directories whose registry files are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    /// The user's directories, in increasing precedence: mneme's home first (where the scanner
    /// writes), then the configuration directory. Each may hold both files.
    pub user_dirs: Vec<PathBuf>,
    /// The project's directory (its files are in its `.mneme/`), when there is one.
    pub project: Option<PathBuf>,
}

impl Locations {
    /// The user's directories: `mneme_home`, and `config_dir` (`~/.config/mneme`) when given.
    pub fn user(mneme_home: &Path, config_dir: Option<&Path>) -> Locations {
        let mut user_dirs = vec![mneme_home.to_path_buf()];
        if let Some(config) = config_dir.filter(|dir| *dir != mneme_home) {
            user_dirs.push(config.to_path_buf());
        }
        Locations {
            user_dirs,
            project: None,
        }
    }

    /// The user's directories as the environment names them: `$MNEME_HOME` (through
    /// [`proto::defaults::home`]), and `$XDG_CONFIG_HOME/mneme`, else `~/.config/mneme`.
    pub fn from_env() -> Locations {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|dir| !dir.is_empty())
                    .map(|home| PathBuf::from(home).join(".config"))
            })
            .map(|dir| dir.join("mneme"));
        Locations::user(&proto::defaults::home(), config.as_deref())
    }

    /// The same directories with a project's files read after them.
    pub fn with_project(mut self, project: impl Into<PathBuf>) -> Locations {
        self.project = Some(project.into());
        self
    }

    /// Where the scanner writes the user's generated file: the first user directory.
    pub fn user_generated(&self) -> Option<PathBuf> {
        self.user_dirs.first().map(|dir| dir.join(GENERATED_FILE))
    }

    /// The user's hand-written file that `mneme capabilities add` edits: the first user
    /// directory's.
    pub fn user_hand(&self) -> Option<PathBuf> {
        self.user_dirs.first().map(|dir| dir.join(HAND_FILE))
    }

    /// The project's generated file.
    pub fn project_generated(&self) -> Option<PathBuf> {
        self.project
            .as_ref()
            .map(|dir| dir.join(PROJECT_DIR).join(GENERATED_FILE))
    }

    /// The project's hand-written file.
    pub fn project_hand(&self) -> Option<PathBuf> {
        self.project
            .as_ref()
            .map(|dir| dir.join(PROJECT_DIR).join(HAND_FILE))
    }

    /// Every file, in the order they are merged, with its origin and scope.
    fn files(&self) -> Vec<(PathBuf, Origin, Scope)> {
        let mut files = Vec::new();
        for dir in &self.user_dirs {
            files.push((dir.join(GENERATED_FILE), Origin::Generated, Scope::User));
        }
        for dir in &self.user_dirs {
            files.push((dir.join(HAND_FILE), Origin::Hand, Scope::User));
        }
        if let Some(project) = &self.project {
            let scope = Scope::Project(project.to_string_lossy().into_owned());
            if let Some(generated) = self.project_generated() {
                files.push((generated, Origin::Generated, scope.clone()));
            }
            if let Some(hand) = self.project_hand() {
                files.push((hand, Origin::Hand, scope));
            }
        }
        files
    }
}

/// The registry: every capability in force, the categories, and what in the files could not be
/// used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// Sorted by id.
    pub capabilities: Vec<Capability>,
    /// Every category a file describes or a capability names (the latter with an empty
    /// description when no file describes it), sorted by id.
    pub categories: Vec<Category>,
    /// In the order the files were read.
    pub problems: Vec<Problem>,
}

impl Registry {
    /// The capability with this id.
    pub fn get(&self, id: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|cap| cap.id == id)
    }
}

/// Reads and merges every registry file in `locations`. A missing file is nothing; a file that
/// cannot be read or parsed, and each entry that cannot be used, is a [`Problem`], and the rest
/// is loaded all the same.
pub fn load(locations: &Locations) -> Registry {
    let mut capabilities: BTreeMap<String, Capability> = BTreeMap::new();
    let mut categories: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for (path, origin, scope) in locations.files() {
        let text = match read(&path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(message) => {
                problems.push(Problem {
                    file: path,
                    line: None,
                    field: None,
                    message,
                });
                continue;
            }
        };
        let parsed = parse(&path, &text, origin);
        problems.extend(parsed.problems);
        for category in parsed.categories {
            categories.insert(category.id, category.description);
        }
        for entry in parsed.entries {
            match entry {
                Entry::Capability(mut cap) => {
                    cap.scope = scope.clone();
                    capabilities.insert(cap.id.clone(), cap);
                }
                Entry::Disabled(id) => {
                    capabilities.remove(&id);
                }
            }
        }
    }
    for cap in capabilities.values() {
        categories.entry(cap.category.clone()).or_default();
    }
    Registry {
        capabilities: capabilities.into_values().collect(),
        categories: categories
            .into_iter()
            .map(|(id, description)| Category { id, description })
            .collect(),
        problems,
    }
}

/// A registry file's text; `None` when there is no file.
fn read(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read: {err}")),
    };
    if !meta.is_file() {
        return Err("not a file".to_owned());
    }
    if meta.len() > MAX_FILE {
        return Err(format!("larger than {} MiB; not read", MAX_FILE >> 20));
    }
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "not utf-8 text".to_owned()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot read: {err}")),
    }
}
