//! Installing mneme into a host's configuration: the shapes of hook configuration hosts share,
//! the MCP server entry, and what each host declares in its `install.rs` ([`Install`]).
//!
//! `mneme hooks install` must register the hook client on every event mneme listens to, but a
//! settings file belongs to the user: it holds their model choice, their permissions and often
//! hooks of their own, sometimes on the very same events. So the edits here are surgical. They
//! add one entry per event, recognise mneme's own entries on later runs (even after the
//! `mneme-hook` binary moved), and on uninstall remove exactly those entries and nothing else.
//! Every file is read and written through [`crate::edit`], which refuses files it cannot parse,
//! backs up before writing and replaces atomically.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

use crate::edit::{self, edit_json, edit_toml, read_json};

/// The file name the hook client binary must have for an entry to be recognised as mneme's.
const HOOK_BINARY_NAME: &str = "mneme-hook";

/// What a host declares about installing mneme into it: where its hook and MCP files are, and
/// how mneme's entries are merged into them. [`install_hooks`], [`uninstall_hooks`],
/// [`installed_hooks`], [`install_mcp`] and [`uninstall_mcp`] do the rest for every host.
pub struct Install {
    /// The file holding mneme's hooks at `scope`, given the project directory.
    pub hooks_path: fn(Scope, &Path) -> Result<PathBuf>,
    /// Add mneme's hooks to the file, given the hook binary; returns the events changed.
    pub install: fn(&Path, &Path) -> Result<InstallReport>,
    /// Remove exactly mneme's hooks from the file.
    pub uninstall: fn(&Path) -> Result<InstallReport>,
    /// The events mneme's hooks are registered on in the file.
    pub installed: fn(&Path) -> Result<Vec<String>>,
    /// A switch in the host's configuration that must be on for hooks to run, turned on after
    /// installing (given the hooks file); `None` when the host has none.
    pub enable: Option<Enable>,
    /// Where the host can also take mneme's hooks as an extension, loaded everywhere.
    pub extension: Option<Extension>,
    /// The file holding mneme's MCP server entry at `scope`.
    pub mcp_path: fn(Scope, &Path) -> Result<PathBuf>,
    /// How that file lists MCP servers.
    pub mcp: Mcp,
    /// What the user must still do by hand after installing hooks into the settings file.
    pub note: Option<&'static str>,
}

/// Turn on a host's switch for hooks, given the hooks file; `None` when it was already on.
pub type Enable = fn(&Path) -> Result<Option<InstallReport>>;

/// A host's extension form of the hooks (Gemini's `~/.gemini/extensions/mneme`).
pub struct Extension {
    /// The extension's directory.
    pub dir: fn() -> Result<PathBuf>,
    /// Write the extension into the directory, given the hook binary.
    pub install: fn(&Path, &Path) -> Result<InstallReport>,
    /// The file inside the directory holding the hooks.
    pub hooks_file: &'static str,
}

/// How a host's MCP configuration lists servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mcp {
    /// A JSON object `mcpServers` of `{command, args}` entries.
    Json,
    /// A TOML table `mcp_servers` of `{command, args}` tables (Codex).
    Toml,
}

/// One hook event mneme registers on.
pub struct EventSpec {
    pub name: &'static str,
    /// Tool events get an explicit `"*"` matcher; for the others the matcher is omitted.
    pub tool: bool,
    /// Seconds the host waits for the hook before giving up on it.
    pub timeout_secs: u64,
}

/// A host whose hook configuration has Claude Code's shape: `hooks.<Event>` is a list of
/// matcher groups, each with a list of handlers (Claude Code, Codex's `hooks.json`, Gemini's
/// `settings.json` and extension `hooks/hooks.json`).
pub struct Flavor {
    /// The `mneme-hook` argument naming the host, which also recognises mneme's entries.
    pub agent_arg: &'static str,
    /// The events registered, in the order written to a fresh file.
    pub events: &'static [EventSpec],
    /// The handler written for an event, given the command line.
    pub entry: fn(&EventSpec, &str) -> Value,
}

pub const fn event(name: &'static str, tool: bool, timeout_secs: u64) -> EventSpec {
    EventSpec {
        name,
        tool,
        timeout_secs,
    }
}

/// Which of a host's configuration files to edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's file (`~/.claude/settings.json`, say): every project.
    User,
    /// The project's file (`<project>/.claude/settings.json`, say): one project only.
    Project,
}

impl FromStr for Scope {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(Self::User),
            "project" => Ok(Self::Project),
            other => bail!("unknown scope {other:?}; expected user or project"),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::User => "user",
            Self::Project => "project",
        })
    }
}

/// What an install or uninstall did to a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The settings file that was examined (as given, even when it is a symlink).
    pub settings_path: PathBuf,
    /// The copy of the previous contents, made only when an existing file was changed.
    pub backup_path: Option<PathBuf>,
    /// Whether the file was written at all.
    pub changed: bool,
    /// Install: events whose mneme entry was added or updated. Uninstall: events from which
    /// a mneme entry was removed.
    pub events: Vec<String>,
}

impl Flavor {
    /// Adds or updates mneme's hook entries in the settings file at `settings_path`.
    ///
    /// `hook_binary` is the `mneme-hook` executable; it is made absolute and must be named
    /// `mneme-hook` (or `mneme-hook.exe`) so that later runs can recognise the entry even after
    /// the binary moves. Existing mneme entries with another path are rewritten in place rather
    /// than duplicated. A mneme entry sitting in a matcher group that does not match everything
    /// (for example one the user narrowed to `Bash`) is moved into a match-all group, because
    /// mneme needs every event to keep its memory complete. Nothing is written when the file
    /// already holds exactly what install would write.
    pub fn install(&self, settings_path: &Path, hook_binary: &Path) -> Result<InstallReport> {
        let command = hook_command(hook_binary, self.agent_arg)?;
        let mut loaded = edit::load(settings_path)?;

        let hooks = loaded
            .root
            .entry("hooks")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| edit::hooks_not_object(settings_path))?;

        let mut events = Vec::new();
        for spec in self.events {
            let groups = hooks
                .entry(spec.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            let groups = groups.as_array_mut().ok_or_else(|| {
            anyhow!(
                "hooks.{} in settings file {} is not a list; fix or move it, mneme will not overwrite it",
                spec.name,
                settings_path.display()
            )
        })?;
            if install_event(groups, spec, &command, self) {
                events.push(spec.name.to_owned());
            }
        }

        edit::finish(settings_path, &loaded, events)
    }

    /// Removes every mneme hook entry from the settings file at `settings_path`.
    ///
    /// Entries are recognised by their command (`<…>/mneme-hook claude-code …`), so this works
    /// whichever path install used. User entries are never touched: a matcher group is removed
    /// only when removing mneme's entry left it empty, and an event key (or the `hooks` object)
    /// only when this removal emptied it. A missing file is simply reported as unchanged.
    pub fn uninstall(&self, settings_path: &Path) -> Result<InstallReport> {
        let mut loaded = edit::load(settings_path)?;
        let events = remove_all_mneme_entries(&mut loaded.root, self.agent_arg);
        edit::finish(settings_path, &loaded, events)
    }

    /// Events that have a mneme entry in this file (for `mneme hooks status`).
    ///
    /// A missing file has none. Events mneme registers come in registration order, followed by
    /// any other event holding a mneme entry (left by another mneme version, say) in file order.
    pub fn installed(&self, settings_path: &Path) -> Result<Vec<String>> {
        let loaded = edit::load(settings_path)?;
        // `load` has already refused a `hooks` that is not an object.
        let Some(hooks) = loaded.root.get("hooks").and_then(Value::as_object) else {
            return Ok(Vec::new());
        };
        let mut events: Vec<String> = hooks
            .iter()
            .filter(|(_, groups)| {
                groups.as_array().is_some_and(|groups| {
                    groups
                        .iter()
                        .filter_map(group_entries)
                        .flatten()
                        .any(|entry| is_mneme_entry(entry, None, self.agent_arg))
                })
            })
            .map(|(name, _)| name.clone())
            .collect();
        // The sort is stable, so events mneme does not know keep the file's order.
        events.sort_by_key(|name| {
            self.events
                .iter()
                .position(|spec| spec.name == name)
                .unwrap_or(self.events.len())
        });
        Ok(events)
    }
}

/// Removes every mneme entry from a settings object and returns the events it was removed
/// from, in the file's order. `load` has already refused a `hooks` that is not an object.
fn remove_all_mneme_entries(root: &mut Map<String, Value>, agent: &str) -> Vec<String> {
    let mut events = Vec::new();
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return events;
    };
    let mut emptied = Vec::new();
    for (name, groups) in hooks.iter_mut() {
        // A non-list value cannot hold a mneme entry, and it is not ours to judge.
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        if remove_mneme_entries(groups, None, None, agent) {
            events.push(name.clone());
            if groups.is_empty() {
                emptied.push(name.clone());
            }
        }
    }
    // `shift_remove` keeps the order of the remaining keys, unlike `remove`.
    for name in &emptied {
        hooks.shift_remove(name);
    }
    if !emptied.is_empty() && hooks.is_empty() {
        root.shift_remove("hooks");
    }
    events
}

/// Builds the command string the host will run: `<absolute hook binary> <agent>`.
pub fn hook_command(hook_binary: &Path, agent: &str) -> Result<String> {
    let binary = std::path::absolute(hook_binary)
        .with_context(|| format!("cannot resolve hook binary path {}", hook_binary.display()))?;
    let binary_str = binary.to_str().ok_or_else(|| {
        anyhow!(
            "hook binary path {} is not valid utf-8 and cannot be written to settings.json",
            binary.display()
        )
    })?;
    // Without this name uninstall and status could not tell the entry apart from the user's.
    if !is_hook_binary_name(binary_str) {
        bail!(
            "hook binary {} is not named {HOOK_BINARY_NAME}; mneme could not recognise the entry later",
            binary.display()
        );
    }
    Ok(format!("{} {agent}", shell_quote(binary_str)))
}

/// Claude Code runs hook commands through a shell, so a path with spaces or other special
/// characters has to be quoted; ordinary paths are left bare to stay readable.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Splits off at most `max` words of a shell command, honouring quotes and backslashes well
/// enough to read back what `shell_quote` wrote and what people typically type by hand.
fn shell_words(command: &str, max: usize) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = command.chars().peekable();
    while words.len() < max {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '\'' => {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                        word.push(c);
                    }
                }
                '"' => {
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => match chars.next_if(|n| matches!(n, '"' | '\\' | '$' | '`')) {
                                Some(escaped) => word.push(escaped),
                                None => word.push('\\'),
                            },
                            c => word.push(c),
                        }
                    }
                }
                '\\' => word.extend(chars.next()),
                c => word.push(c),
            }
        }
        words.push(word);
    }
    words
}

/// Whether the last component of `path` is the hook client's file name. Both separators are
/// accepted because a Windows path may reach us through a quoted shell word.
fn is_hook_binary_name(path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    name == HOOK_BINARY_NAME
        || name
            .strip_suffix(".exe")
            .is_some_and(|stem| stem == HOOK_BINARY_NAME)
}

/// Whether a command is mneme's: exactly `ours`, or any `…/mneme-hook <agent> …`.
pub fn is_mneme_command(command: &str, ours: Option<&str>, agent: &str) -> bool {
    if ours == Some(command) {
        return true;
    }
    match shell_words(command, 2).as_slice() {
        [program, word] => is_hook_binary_name(program) && word == agent,
        _ => false,
    }
}

/// Whether a hook entry is a command hook running mneme's hook client.
fn is_mneme_entry(entry: &Value, ours: Option<&str>, agent: &str) -> bool {
    entry.get("type").and_then(Value::as_str) == Some("command")
        && entry
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|command| is_mneme_command(command, ours, agent))
}

/// The hook entries of a matcher group, if it is shaped like one.
fn group_entries(group: &Value) -> Option<&Vec<Value>> {
    group.get("hooks")?.as_array()
}

/// Whether a matcher group fires for everything: Claude Code treats a missing, empty or `*`
/// matcher alike.
fn is_match_all(group: &Value) -> bool {
    match group.get("matcher") {
        None | Some(Value::Null) => true,
        Some(Value::String(matcher)) => matcher.is_empty() || matcher == "*",
        Some(_) => false,
    }
}

/// Brings one event's matcher groups to the installed state. Returns whether anything changed.
fn install_event(
    groups: &mut Vec<Value>,
    spec: &EventSpec,
    command: &str,
    flavor: &Flavor,
) -> bool {
    let desired = (flavor.entry)(spec, command);
    let keeper = find_keeper(groups, &desired, command, flavor.agent_arg);
    let mut changed = false;

    // Updating in place keeps the entry where it was, including any user commands the user
    // put next to it in the same group.
    if let Some((group_index, entry_index)) = keeper
        && let Some(slot) = groups
            .get_mut(group_index)
            .and_then(|group| group.get_mut("hooks"))
            .and_then(|entries| entries.get_mut(entry_index))
        && *slot != desired
    {
        *slot = desired.clone();
        changed = true;
    }

    // Any other mneme entry is a leftover (an old path, a duplicate, a narrowed matcher) and
    // would make the hook run twice or only sometimes.
    if remove_mneme_entries(groups, Some(command), keeper, flavor.agent_arg) {
        changed = true;
    }

    if keeper.is_none() {
        let mut group = Map::new();
        if spec.tool {
            group.insert("matcher".to_owned(), Value::from("*"));
        }
        group.insert("hooks".to_owned(), Value::Array(vec![desired]));
        groups.push(Value::Object(group));
        changed = true;
    }
    changed
}

/// Picks the existing mneme entry install keeps, as (group index, entry index): one that is
/// already exactly right if possible, otherwise the first mneme entry in a match-all group.
fn find_keeper(
    groups: &[Value],
    desired: &Value,
    command: &str,
    agent: &str,
) -> Option<(usize, usize)> {
    let find = |accept: &dyn Fn(&Value) -> bool| {
        groups
            .iter()
            .enumerate()
            .filter(|(_, group)| is_match_all(group))
            .find_map(|(group_index, group)| {
                group_entries(group)?
                    .iter()
                    .position(accept)
                    .map(|entry_index| (group_index, entry_index))
            })
    };
    find(&|entry| entry == desired)
        .or_else(|| find(&|entry| is_mneme_entry(entry, Some(command), agent)))
}

/// Removes mneme entries from one event's matcher groups, except the one at `keep`, and drops
/// groups this left empty. Groups that were empty before are left alone because the user made
/// them. Returns whether anything was removed.
fn remove_mneme_entries(
    groups: &mut Vec<Value>,
    ours: Option<&str>,
    keep: Option<(usize, usize)>,
    agent: &str,
) -> bool {
    let mut removed = false;
    let mut emptied = Vec::new();
    for (group_index, group) in groups.iter_mut().enumerate() {
        let Some(entries) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = entries.len();
        // `retain` visits elements in order, so counting calls yields each entry's index.
        let mut entry_index = 0;
        entries.retain(|entry| {
            let index = entry_index;
            entry_index += 1;
            keep == Some((group_index, index)) || !is_mneme_entry(entry, ours, agent)
        });
        if entries.len() != before {
            removed = true;
            if entries.is_empty() {
                emptied.push(group_index);
            }
        }
    }
    for group_index in emptied.into_iter().rev() {
        groups.remove(group_index);
    }
    removed
}

// ---------------------------------------------------------------------------------------------
// Hosts with a flat list of handlers per event (Cursor's hooks.json, Kiro's agent file).

/// A host whose hook configuration is a flat list of handlers per event: `hooks.<event>` is a
/// list of `{command, …}` entries with no matcher groups.
pub struct Flat {
    /// The `mneme-hook` argument naming the host, which also recognises mneme's entries.
    pub agent_arg: &'static str,
    /// The events registered, with their timeouts in seconds, in the order written.
    pub events: &'static [(&'static str, u64)],
    /// The handler written for an event, given the event, the command line and the timeout.
    pub entry: fn(&str, &str, u64) -> Value,
    /// What the file must hold besides hooks before mneme's entries go in; returns the keys
    /// it changed, or refuses a file it does not understand.
    pub prepare: fn(&mut Map<String, Value>) -> Result<Vec<String>>,
    /// What a file mneme created holds once its hooks are gone: such a file is emptied.
    pub skeleton: fn() -> Map<String, Value>,
}

impl Flat {
    /// Add or update mneme's entries in the file at `path`.
    pub fn install(&self, path: &Path, hook_binary: &Path) -> Result<InstallReport> {
        let command = hook_command(hook_binary, self.agent_arg)?;
        edit_json(path, |root| self.install_into(root, &command))
    }

    fn install_into(&self, root: &mut Map<String, Value>, command: &str) -> Result<Vec<String>> {
        let mut changed = (self.prepare)(root)?;
        let hooks = root
            .entry("hooks")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context("\"hooks\" is not an object; mneme will not overwrite it")?;
        for (event, secs) in self.events {
            let desired = (self.entry)(event, command, *secs);
            let list = hooks
                .entry(event.to_string())
                .or_insert_with(|| Value::Array(Vec::new()))
                .as_array_mut()
                .with_context(|| {
                    format!("hooks.{event} is not a list; mneme will not overwrite it")
                })?;
            let ours: Vec<usize> = (0..list.len())
                .filter(|&i| self.is_ours(&list[i]))
                .collect();
            if ours.len() == 1 && list[ours[0]] == desired {
                continue;
            }
            // An old path or a duplicate is rewritten as the one entry mneme needs.
            let keep = ours.first().copied();
            for &i in ours.iter().skip(1).rev() {
                list.remove(i);
            }
            match keep {
                Some(i) => list[i] = desired,
                None => list.push(desired),
            }
            changed.push(event.to_string());
        }
        Ok(changed)
    }

    /// Remove exactly mneme's entries from the file at `path`.
    pub fn uninstall(&self, path: &Path) -> Result<InstallReport> {
        edit_json(path, |root| Ok(self.uninstall_from(root)))
    }

    fn uninstall_from(&self, root: &mut Map<String, Value>) -> Vec<String> {
        let mut changed = Vec::new();
        if let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) {
            let mut emptied = Vec::new();
            for (event, list) in hooks.iter_mut() {
                let Some(list) = list.as_array_mut() else {
                    continue;
                };
                let before = list.len();
                list.retain(|entry| !self.is_ours(entry));
                if list.len() != before {
                    changed.push(event.clone());
                    if list.is_empty() {
                        emptied.push(event.clone());
                    }
                }
            }
            for event in emptied {
                hooks.shift_remove(&event);
            }
            if hooks.is_empty() && !changed.is_empty() {
                root.shift_remove("hooks");
            }
        }
        if !changed.is_empty() && *root == (self.skeleton)() {
            root.clear();
        }
        changed
    }

    /// The events holding a mneme entry in the file at `path`.
    pub fn installed(&self, path: &Path) -> Result<Vec<String>> {
        Ok(read_json(path)?
            .get("hooks")
            .and_then(Value::as_object)
            .map(|hooks| {
                hooks
                    .iter()
                    .filter(|(_, list)| {
                        list.as_array()
                            .is_some_and(|l| l.iter().any(|e| self.is_ours(e)))
                    })
                    .map(|(event, _)| event.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    fn is_ours(&self, entry: &Value) -> bool {
        entry
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|command| is_mneme_command(command, None, self.agent_arg))
    }
}

// ---------------------------------------------------------------------------------------------
// The operations every host shares.

/// Remove exactly mneme's hooks from `path`; a file mneme created and this left empty goes.
pub fn uninstall_hooks(install: &Install, path: &Path) -> Result<InstallReport> {
    let report = (install.uninstall)(path)?;
    edit::remove_if_emptied(path, &report);
    Ok(report)
}

/// The MCP server entry that launches `mneme mcp`.
fn mcp_entry(mneme: &str) -> Value {
    json!({"command": mneme, "args": ["mcp"]})
}

/// Register mneme's MCP server (`<mneme_binary> mcp`) in `path`.
pub fn install_mcp(install: &Install, path: &Path, mneme_binary: &Path) -> Result<InstallReport> {
    let binary = std::path::absolute(mneme_binary)?;
    let binary = binary
        .to_str()
        .context("the mneme binary path is not valid utf-8")?
        .to_owned();
    if install.mcp == Mcp::Toml {
        return edit_toml(path, |doc| {
            let servers = doc
                .entry("mcp_servers")
                .or_insert(toml_edit::table())
                .as_table_mut()
                .context("mcp_servers in codex's config.toml is not a table")?;
            servers.set_implicit(true);
            let current = servers.get("mneme").and_then(|t| t.as_table());
            let same = current.is_some_and(|t| {
                t.get("command").and_then(|c| c.as_str()) == Some(binary.as_str())
                    && t.get("args").and_then(|a| a.as_array()).is_some_and(|a| {
                        a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp")
                    })
            });
            if same {
                return Ok(Vec::new());
            }
            let mut table = toml_edit::Table::new();
            table["command"] = toml_edit::value(binary.as_str());
            let mut args = toml_edit::Array::new();
            args.push("mcp");
            table["args"] = toml_edit::value(args);
            servers.insert("mneme", toml_edit::Item::Table(table));
            Ok(vec!["mcp_servers.mneme".to_owned()])
        });
    }
    let desired = mcp_entry(&binary);
    edit_json(path, |root| {
        let servers = root
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context("\"mcpServers\" is not an object; mneme will not overwrite it")?;
        if servers.get("mneme") == Some(&desired) {
            return Ok(Vec::new());
        }
        servers.insert("mneme".to_owned(), desired.clone());
        Ok(vec!["mcpServers.mneme".to_owned()])
    })
}

/// Remove mneme's MCP server entry from `path`.
pub fn uninstall_mcp(install: &Install, path: &Path) -> Result<InstallReport> {
    let report = if install.mcp == Mcp::Toml {
        edit_toml(path, |doc| {
            let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut()) else {
                return Ok(Vec::new());
            };
            if servers.remove("mneme").is_none() {
                return Ok(Vec::new());
            }
            if servers.is_empty() {
                doc.remove("mcp_servers");
            }
            Ok(vec!["mcp_servers.mneme".to_owned()])
        })?
    } else {
        edit_json(path, |root| {
            let Some(servers) = root.get_mut("mcpServers").and_then(Value::as_object_mut) else {
                return Ok(Vec::new());
            };
            if servers.shift_remove("mneme").is_none() {
                return Ok(Vec::new());
            }
            if servers.is_empty() {
                root.shift_remove("mcpServers");
            }
            Ok(vec!["mcpServers.mneme".to_owned()])
        })?
    };
    edit::remove_if_emptied(path, &report);
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Where hosts keep their files.

/// The user's home directory (`HOME`, or `USERPROFILE` on Windows).
pub fn home() -> Result<PathBuf> {
    crate::paths::home().context("HOME is not set")
}

/// The project directory, made absolute.
pub fn project(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir)
        .with_context(|| format!("cannot resolve project directory {}", dir.display()))
}

/// `~/<dir>/<file>` at user scope, `<project>/<dir>/<file>` at project scope.
pub fn scoped(scope: Scope, project_dir: &Path, dir: &str, file: &str) -> Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(dir).join(file),
        Scope::Project => project(project_dir)?.join(dir).join(file),
    })
}

#[cfg(test)]
mod tests {
    //! The shared merge and the file care, exercised through Claude Code's flavor.

    use super::*;
    use crate::claude_code::install::{CLAUDE_CODE, EVENTS, settings_path, user_settings_path};
    use crate::edit::file_name;
    use std::fs::{self, Permissions};

    const AGENT_ARG: &str = "claude-code";

    fn install_claude_code(path: &Path, binary: &Path) -> Result<InstallReport> {
        CLAUDE_CODE.install(path, binary)
    }

    fn uninstall_claude_code(path: &Path) -> Result<InstallReport> {
        CLAUDE_CODE.uninstall(path)
    }

    fn installed_claude_code_events(path: &Path) -> Result<Vec<String>> {
        CLAUDE_CODE.installed(path)
    }

    const OLD_BINARY: &str = "/opt/mneme/bin/mneme-hook";
    const NEW_BINARY: &str = "/usr/local/bin/mneme-hook";

    fn all_events() -> Vec<String> {
        EVENTS.iter().map(|spec| spec.name.to_owned()).collect()
    }

    fn read_json(path: &Path) -> Value {
        serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
    }

    fn backups(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| file_name(path).contains(".mneme-backup-"))
            .collect();
        found.sort();
        found
    }

    /// The settings value with every mneme entry stripped the way uninstall strips it.
    fn without_mneme(mut value: Value) -> Value {
        remove_all_mneme_entries(value.as_object_mut().unwrap(), AGENT_ARG);
        value
    }

    /// Every mneme entry in one event, across all its groups.
    fn mneme_entries(settings: &Value, event: &str) -> Vec<Value> {
        settings["hooks"][event]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(group_entries)
            .flatten()
            .filter(|entry| is_mneme_entry(entry, None, AGENT_ARG))
            .cloned()
            .collect()
    }

    fn user_settings() -> &'static str {
        r#"{
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "/home/u/fmt.sh", "timeout": 30}]}
        ],
        "Stop": [
            {"hooks": [{"type": "command", "command": "notify-send done"}]}
        ],
        "CustomEvent": "left alone"
    },
    "env": {"FOO": "bar"},
    "zzz": [1, 2.5, "três", null]
}"#
    }

    #[test]
    fn fresh_install_creates_file_and_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join("nested")
            .join(".claude")
            .join("settings.json");

        let report = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        assert!(report.changed);
        assert_eq!(report.backup_path, None);
        assert_eq!(report.settings_path, path);
        assert_eq!(report.events, all_events());
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"));
        assert!(text.contains("\n  \"hooks\": {\n    \"SessionStart\""));

        let settings = read_json(&path);
        let command = format!("{NEW_BINARY} claude-code");
        for spec in &EVENTS {
            let groups = settings["hooks"][spec.name].as_array().unwrap();
            assert_eq!(groups.len(), 1, "{}", spec.name);
            let group = groups[0].as_object().unwrap();
            if spec.tool {
                assert_eq!(group["matcher"], "*");
            } else {
                assert!(!group.contains_key("matcher"), "{}", spec.name);
            }
            let timeout = if matches!(spec.name, "SessionStart" | "UserPromptSubmit") {
                10
            } else {
                5
            };
            assert_eq!(
                group["hooks"],
                json!([{"type": "command", "command": command, "timeout": timeout}])
            );
        }
        assert_eq!(installed_claude_code_events(&path).unwrap(), all_events());
        assert!(backups(path.parent().unwrap()).is_empty());
    }

    #[test]
    fn install_preserves_user_settings_and_backs_up_original() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, user_settings()).unwrap();
        let original: Value = serde_json::from_str(user_settings()).unwrap();

        let report = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        assert!(report.changed);
        assert_eq!(report.events, all_events());
        let installed = read_json(&path);
        assert_eq!(without_mneme(installed.clone()), original);
        // Key order survives: the user's keys first, in their order.
        let keys: Vec<&String> = installed.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "permissions", "hooks", "env", "zzz"]);
        let hook_keys: Vec<&String> = installed["hooks"]
            .as_object()
            .unwrap()
            .keys()
            .take(3)
            .collect();
        assert_eq!(hook_keys, ["PostToolUse", "Stop", "CustomEvent"]);
        // The user's group stays first; ours is appended after it.
        assert_eq!(
            installed["hooks"]["PostToolUse"][0],
            original["hooks"]["PostToolUse"][0]
        );
        assert_eq!(installed["hooks"]["PostToolUse"][1]["matcher"], "*");

        let backup = report.backup_path.unwrap();
        assert_eq!(backups(dir.path()), std::slice::from_ref(&backup));
        assert_eq!(fs::read(&backup).unwrap(), user_settings().as_bytes());
        assert!(file_name(&backup).starts_with("settings.json.mneme-backup-"));
    }

    #[test]
    fn second_install_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, user_settings()).unwrap();
        install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();
        let bytes = fs::read(&path).unwrap();
        let modified = fs::metadata(&path).unwrap().modified().unwrap();
        let backups_before = backups(dir.path());

        let report = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        assert!(!report.changed);
        assert_eq!(report.backup_path, None);
        assert!(report.events.is_empty());
        assert_eq!(fs::read(&path).unwrap(), bytes);
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), modified);
        assert_eq!(backups(dir.path()), backups_before);
    }

    #[test]
    fn uninstall_restores_original_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, user_settings()).unwrap();
        let original: Value = serde_json::from_str(user_settings()).unwrap();
        install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        let report = uninstall_claude_code(&path).unwrap();

        assert!(report.changed);
        assert!(report.backup_path.is_some());
        let mut removed = report.events.clone();
        removed.sort();
        let mut expected = all_events();
        expected.sort();
        assert_eq!(removed, expected);
        let restored = read_json(&path);
        assert_eq!(restored, original);
        // Equality of maps ignores order, so check the order separately.
        let keys: Vec<&String> = restored["hooks"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["PostToolUse", "Stop", "CustomEvent"]);
        assert!(installed_claude_code_events(&path).unwrap().is_empty());
    }

    #[test]
    fn uninstall_of_fresh_install_removes_hooks_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, "{\"model\": \"sonnet\"}").unwrap();
        install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        uninstall_claude_code(&path).unwrap();

        assert_eq!(read_json(&path), json!({"model": "sonnet"}));
    }

    #[test]
    fn uninstall_when_nothing_installed_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");

        let report = uninstall_claude_code(&path).unwrap();
        assert!(!report.changed);
        assert!(!path.exists(), "uninstall must not create the file");

        fs::write(&path, user_settings()).unwrap();
        let report = uninstall_claude_code(&path).unwrap();
        assert!(!report.changed);
        assert_eq!(report.backup_path, None);
        assert!(report.events.is_empty());
        assert_eq!(fs::read(&path).unwrap(), user_settings().as_bytes());
        assert!(backups(dir.path()).is_empty());
    }

    #[test]
    fn install_after_binary_moved_updates_path_without_duplicating() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, user_settings()).unwrap();
        install_claude_code(&path, Path::new(OLD_BINARY)).unwrap();

        let report = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        assert!(report.changed);
        assert_eq!(report.events, all_events());
        let settings = read_json(&path);
        for spec in &EVENTS {
            let entries = mneme_entries(&settings, spec.name);
            assert_eq!(entries.len(), 1, "{}", spec.name);
            assert_eq!(entries[0]["command"], format!("{NEW_BINARY} claude-code"));
        }
        let original: Value = serde_json::from_str(user_settings()).unwrap();
        assert_eq!(without_mneme(settings), original);
    }

    #[test]
    fn duplicates_and_narrowed_entries_are_collapsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let old = format!("{OLD_BINARY} claude-code");
        fs::write(
            &path,
            json!({"hooks": {"PreToolUse": [
                {"matcher": "Bash", "hooks": [
                    {"type": "command", "command": old},
                    {"type": "command", "command": "/home/u/guard.sh"}
                ]},
                {"matcher": "Read", "hooks": [{"type": "command", "command": old}]}
            ]}})
            .to_string(),
        )
        .unwrap();

        install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        let settings = read_json(&path);
        assert_eq!(
            settings["hooks"]["PreToolUse"],
            json!([
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/u/guard.sh"}]},
                {"matcher": "*", "hooks": [
                    {"type": "command", "command": format!("{NEW_BINARY} claude-code"), "timeout": 5}
                ]}
            ])
        );
    }

    #[test]
    fn invalid_json_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let broken = "{ \"model\": \"opus\", ";
        fs::write(&path, broken).unwrap();

        let err = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "settings file {} is not valid json; fix or move it, mneme will not overwrite it",
                path.display()
            )),
            "{err:#}"
        );
        assert!(uninstall_claude_code(&path).is_err());
        assert!(installed_claude_code_events(&path).is_err());
        assert_eq!(fs::read(&path).unwrap(), broken.as_bytes());
        assert!(backups(dir.path()).is_empty());
    }

    #[test]
    fn non_object_hooks_and_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        for contents in [
            r#"{"hooks": []}"#,
            r#"{"hooks": null}"#,
            "[1, 2]",
            r#"{"hooks": {"Stop": {}}}"#,
        ] {
            fs::write(&path, contents).unwrap();
            let err = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap_err();
            assert!(
                err.to_string().contains("mneme will not overwrite it"),
                "{err:#}"
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), contents);
        }
        assert!(backups(dir.path()).is_empty());
    }

    #[test]
    fn user_command_added_to_our_group_survives_uninstall() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();
        let mut settings = read_json(&path);
        let user_entry = json!({"type": "command", "command": "/home/u/log.sh"});
        settings["hooks"]["PostToolUse"][0]["hooks"]
            .as_array_mut()
            .unwrap()
            .push(user_entry.clone());
        fs::write(&path, serde_json::to_vec_pretty(&settings).unwrap()).unwrap();

        // A repeated install leaves the shared group alone.
        assert!(
            !install_claude_code(&path, Path::new(NEW_BINARY))
                .unwrap()
                .changed
        );
        let report = uninstall_claude_code(&path).unwrap();

        assert!(report.changed);
        assert_eq!(
            read_json(&path),
            json!({"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [user_entry]}]}})
        );
    }

    #[test]
    fn empty_file_is_treated_as_empty_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        fs::write(&path, "\n").unwrap();

        let report = install_claude_code(&path, Path::new(NEW_BINARY)).unwrap();

        assert!(report.changed);
        assert_eq!(fs::read(report.backup_path.unwrap()).unwrap(), b"\n");
        assert_eq!(installed_claude_code_events(&path).unwrap(), all_events());
    }

    #[test]
    fn paths_needing_quotes_are_quoted_and_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let binary = "/Users/o'neil/My Tools/mneme-hook";

        install_claude_code(&path, Path::new(binary)).unwrap();

        let settings = read_json(&path);
        assert_eq!(
            settings["hooks"]["Stop"][0]["hooks"][0]["command"],
            r"'/Users/o'\''neil/My Tools/mneme-hook' claude-code"
        );
        assert!(
            !install_claude_code(&path, Path::new(binary))
                .unwrap()
                .changed
        );
        assert_eq!(
            uninstall_claude_code(&path).unwrap().events.len(),
            EVENTS.len()
        );
    }

    #[test]
    fn recognition_matches_only_mneme_commands() {
        for ours in [
            "/usr/bin/mneme-hook claude-code",
            "mneme-hook claude-code",
            "  ~/bin/mneme-hook   claude-code --verbose",
            "'/a b/mneme-hook' claude-code",
            "\"/a b/mneme-hook\" \"claude-code\"",
            r"/a\ b/mneme-hook claude-code",
            r"'C:\Program Files\mneme\mneme-hook.exe' claude-code",
        ] {
            assert!(is_mneme_command(ours, None, AGENT_ARG), "{ours}");
        }
        for theirs in [
            "/usr/bin/mneme-hook codex",
            "/usr/bin/mneme-hook",
            "/usr/bin/mneme-hook-wrapper claude-code",
            "/usr/bin/not-mneme-hook claude-code",
            "echo mneme-hook claude-code",
            "/usr/bin/mneme-hook claude-code; rm -rf /tmp/x",
            "",
        ] {
            assert!(!is_mneme_command(theirs, None, AGENT_ARG), "{theirs}");
        }
        let prompt = json!({"type": "prompt", "command": "/usr/bin/mneme-hook claude-code"});
        assert!(!is_mneme_entry(&prompt, None, AGENT_ARG));
    }

    #[test]
    fn binary_with_another_name_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let err = install_claude_code(&path, Path::new("/usr/bin/hook")).unwrap_err();
        assert!(
            err.to_string().contains("is not named mneme-hook"),
            "{err:#}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn user_settings_path_prefers_config_dir() {
        assert_eq!(
            user_settings_path(Some("/cfg".into()), Some("/home/u".into())).unwrap(),
            Path::new("/cfg/settings.json")
        );
        assert_eq!(
            user_settings_path(Some("".into()), Some("/home/u".into())).unwrap(),
            Path::new("/home/u/.claude/settings.json")
        );
        assert!(user_settings_path(None, None).is_err());
        let project = settings_path(Scope::Project, Path::new("/p/q")).unwrap();
        assert_eq!(project, Path::new("/p/q/.claude/settings.json"));
        assert_eq!("project".parse::<Scope>().unwrap(), Scope::Project);
        assert!("global".parse::<Scope>().is_err());
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept_and_symlinks_followed() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles-settings.json");
        fs::write(&real, user_settings()).unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("settings.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        let report = install_claude_code(&link, Path::new(NEW_BINARY)).unwrap();

        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let backup = report.backup_path.unwrap();
        assert_eq!(
            fs::metadata(&backup).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(installed_claude_code_events(&link).unwrap(), all_events());
        // No temporary files are left behind.
        let leftovers: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| file_name(&entry.unwrap().path()))
            .filter(|name| name.contains("mneme-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
