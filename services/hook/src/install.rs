//! Installs and uninstalls mneme's hook entries in Claude Code's `settings.json`.
//!
//! `mneme hooks install --agent claude-code` must register the hook client on every event
//! mneme listens to, but the settings file belongs to the user: it holds their model choice,
//! their permissions and often hooks of their own, sometimes on the very same events. So this
//! module edits the file surgically. It adds one matcher group per event, recognises its own
//! entries on later runs (even after the `mneme-hook` binary moved), and on uninstall removes
//! exactly those entries and nothing else. A run that would change nothing leaves the file's
//! bytes alone; a run that changes an existing file first copies it to
//! `settings.json.mneme-backup-<unix seconds>` and then replaces it atomically, so a crash or a
//! full disk can never leave the user with a half-written settings file. Files that are not
//! valid JSON, or whose `hooks` is not an object, are refused rather than "repaired".

use std::fmt;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

/// The file name the hook client binary must have for an entry to be recognised as mneme's.
const HOOK_BINARY_NAME: &str = "mneme-hook";

/// The argument that tells the hook client which host's payload format to expect.
const AGENT_ARG: &str = "claude-code";

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

/// Claude Code's `settings.json`.
pub const CLAUDE_CODE: Flavor = Flavor {
    agent_arg: AGENT_ARG,
    events: &EVENTS,
    entry: desired_entry,
};

/// Every event mneme registers on, in the order they are written to a fresh file.
const EVENTS: [EventSpec; 13] = [
    // These two fetch context for the agent, so they get a longer budget than the
    // fire-and-forget events below.
    event("SessionStart", false, 10),
    event("UserPromptSubmit", false, 10),
    event("PreToolUse", true, 5),
    event("PostToolUse", true, 5),
    event("PostToolUseFailure", true, 5),
    event("SubagentStart", false, 5),
    event("SubagentStop", false, 5),
    event("PreCompact", false, 5),
    event("PostCompact", false, 5),
    event("Stop", false, 5),
    event("StopFailure", false, 5),
    event("SessionEnd", false, 5),
    event("Notification", false, 5),
];

pub const fn event(name: &'static str, tool: bool, timeout_secs: u64) -> EventSpec {
    EventSpec {
        name,
        tool,
        timeout_secs,
    }
}

/// Which Claude Code settings file to edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`): every project.
    User,
    /// `<project>/.claude/settings.json`: one project only.
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

/// Returns the path of Claude Code's settings file for `scope`.
///
/// User scope honours `CLAUDE_CONFIG_DIR`, which replaces `~/.claude` entirely, and otherwise
/// uses `$HOME/.claude`. Project scope uses `<project_dir>/.claude/settings.json`.
pub fn claude_code_settings_path(scope: Scope, project_dir: &Path) -> Result<PathBuf> {
    match scope {
        Scope::User => user_settings_path(
            std::env::var_os("CLAUDE_CONFIG_DIR"),
            // Windows shells do not always set HOME, but always set USERPROFILE.
            std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")),
        ),
        Scope::Project => {
            let project = std::path::absolute(project_dir).with_context(|| {
                format!("cannot resolve project directory {}", project_dir.display())
            })?;
            Ok(project.join(".claude").join("settings.json"))
        }
    }
}

/// The environment-free core of the user-scope lookup, separate so tests need not mutate the
/// process environment.
fn user_settings_path(
    config_dir: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf> {
    // An empty variable is treated as unset, as a shell user would expect from `FOO=`.
    if let Some(dir) = config_dir.filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("settings.json"));
    }
    let home = home.filter(|h| !h.is_empty()).ok_or_else(|| {
        anyhow!(
            "cannot locate claude code's user settings: neither CLAUDE_CONFIG_DIR nor HOME is set"
        )
    })?;
    Ok(PathBuf::from(home).join(".claude").join("settings.json"))
}

/// Adds or updates mneme's hook entries in the Claude Code settings file at `settings_path`.
///
/// `hook_binary` is the `mneme-hook` executable; it is made absolute and must be named
/// `mneme-hook` (or `mneme-hook.exe`) so that later runs can recognise the entry even after
/// the binary moves. Existing mneme entries with another path are rewritten in place rather
/// than duplicated. A mneme entry sitting in a matcher group that does not match everything
/// (for example one the user narrowed to `Bash`) is moved into a match-all group, because
/// mneme needs every event to keep its memory complete. Nothing is written when the file
/// already holds exactly what install would write.
pub fn install_claude_code(settings_path: &Path, hook_binary: &Path) -> Result<InstallReport> {
    install_hooks(settings_path, hook_binary, &CLAUDE_CODE)
}

/// [`install_claude_code`] for any host with Claude Code's configuration shape.
pub fn install_hooks(
    settings_path: &Path,
    hook_binary: &Path,
    flavor: &Flavor,
) -> Result<InstallReport> {
    let command = hook_command(hook_binary, flavor.agent_arg)?;
    let mut loaded = load(settings_path)?;

    let hooks = loaded
        .root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| hooks_not_object(settings_path))?;

    let mut events = Vec::new();
    for spec in flavor.events {
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
        if install_event(groups, spec, &command, flavor) {
            events.push(spec.name.to_owned());
        }
    }

    finish(settings_path, &loaded, events)
}

/// Removes every mneme hook entry from the Claude Code settings file at `settings_path`.
///
/// Entries are recognised by their command (`<…>/mneme-hook claude-code …`), so this works
/// whichever path install used. User entries are never touched: a matcher group is removed
/// only when removing mneme's entry left it empty, and an event key (or the `hooks` object)
/// only when this removal emptied it. A missing file is simply reported as unchanged.
pub fn uninstall_claude_code(settings_path: &Path) -> Result<InstallReport> {
    uninstall_hooks(settings_path, &CLAUDE_CODE)
}

/// [`uninstall_claude_code`] for any host with Claude Code's configuration shape.
pub fn uninstall_hooks(settings_path: &Path, flavor: &Flavor) -> Result<InstallReport> {
    let mut loaded = load(settings_path)?;
    let events = remove_all_mneme_entries(&mut loaded.root, flavor.agent_arg);
    finish(settings_path, &loaded, events)
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

/// Events that have a mneme entry in this file (for `mneme hooks status`).
///
/// A missing file has none. Events mneme registers come in registration order, followed by
/// any other event holding a mneme entry (left by another mneme version, say) in file order.
pub fn installed_claude_code_events(settings_path: &Path) -> Result<Vec<String>> {
    installed_events(settings_path, &CLAUDE_CODE)
}

/// [`installed_claude_code_events`] for any host with Claude Code's configuration shape.
pub fn installed_events(settings_path: &Path, flavor: &Flavor) -> Result<Vec<String>> {
    let loaded = load(settings_path)?;
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
                    .any(|entry| is_mneme_entry(entry, None, flavor.agent_arg))
            })
        })
        .map(|(name, _)| name.clone())
        .collect();
    // The sort is stable, so events mneme does not know keep the file's order.
    events.sort_by_key(|name| {
        flavor
            .events
            .iter()
            .position(|spec| spec.name == name)
            .unwrap_or(flavor.events.len())
    });
    Ok(events)
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

/// The exact entry install writes for an event.
fn desired_entry(spec: &EventSpec, command: &str) -> Value {
    json!({ "type": "command", "command": command, "timeout": spec.timeout_secs })
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

/// A parsed settings file together with what is needed to write it back safely.
struct Loaded {
    /// The file actually read and written, which differs from the requested path when that
    /// is a symlink: replacing the link itself would break dotfile managers.
    target: PathBuf,
    /// The bytes read, or `None` when the file did not exist.
    original: Option<Vec<u8>>,
    root: Map<String, Value>,
}

/// Reads and validates a settings file. A missing or blank file counts as `{}`.
fn load(settings_path: &Path) -> Result<Loaded> {
    let target = match fs::symlink_metadata(settings_path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(settings_path).with_context(|| {
                format!(
                    "settings file {} is a symlink that cannot be resolved",
                    settings_path.display()
                )
            })?
        }
        _ => settings_path.to_path_buf(),
    };
    let original = match fs::read(&target) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(err)
                .with_context(|| format!("cannot read settings file {}", settings_path.display()));
        }
    };

    let mut root = Map::new();
    if let Some(bytes) = &original {
        // Some Windows editors prefix a byte order mark, which serde_json rejects.
        let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        if !text.iter().all(u8::is_ascii_whitespace) {
            let value: Value = serde_json::from_slice(text).with_context(|| {
                format!(
                    "settings file {} is not valid json; fix or move it, mneme will not overwrite it",
                    settings_path.display()
                )
            })?;
            let Value::Object(map) = value else {
                bail!(
                    "settings file {} does not hold a json object; fix or move it, mneme will not overwrite it",
                    settings_path.display()
                );
            };
            root = map;
        }
    }
    if root.get("hooks").is_some_and(|hooks| !hooks.is_object()) {
        return Err(hooks_not_object(settings_path));
    }

    Ok(Loaded {
        target,
        original,
        root,
    })
}

/// Edit any JSON settings file with the same care as the hook installers: a missing file is
/// `{}`, one that does not parse is refused untouched, `edit` says which changes it made (an
/// empty list writes nothing), and a changed file is backed up first and replaced atomically.
pub fn edit_json(
    path: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> Result<Vec<String>>,
) -> Result<InstallReport> {
    let mut loaded = load(path)?;
    let changes = edit(&mut loaded.root)?;
    finish(path, &loaded, changes)
}

/// Read a JSON settings file as [`edit_json`] would (missing or blank = `{}`).
pub fn read_json(path: &Path) -> Result<Map<String, Value>> {
    Ok(load(path)?.root)
}

fn hooks_not_object(settings_path: &Path) -> anyhow::Error {
    anyhow!(
        "\"hooks\" in settings file {} is not an object; fix or move it, mneme will not overwrite it",
        settings_path.display()
    )
}

/// Writes the file if `events` says something changed and builds the report.
fn finish(settings_path: &Path, loaded: &Loaded, events: Vec<String>) -> Result<InstallReport> {
    let changed = !events.is_empty();
    let backup_path = if changed {
        save(settings_path, loaded)?
    } else {
        None
    };
    Ok(InstallReport {
        settings_path: settings_path.to_path_buf(),
        backup_path,
        changed,
        events,
    })
}

/// Backs up the existing file (if any) and atomically replaces it with the new contents,
/// keeping its permissions. Returns the backup's path.
fn save(settings_path: &Path, loaded: &Loaded) -> Result<Option<PathBuf>> {
    let target = &loaded.target;
    let mut bytes = serde_json::to_vec_pretty(&loaded.root)
        .with_context(|| format!("cannot serialise settings for {}", settings_path.display()))?;
    bytes.push(b'\n');
    // When the edit brings the file back to what a backup held (an uninstall after an
    // install), the backup's own bytes are written, so the user's formatting comes back too.
    if let Some(original) = matching_backup(target, &loaded.root) {
        bytes = original;
    }

    let dir = parent_dir(target);
    let permissions = match &loaded.original {
        Some(_) => Some(
            fs::metadata(target)
                .with_context(|| format!("cannot stat settings file {}", settings_path.display()))?
                .permissions(),
        ),
        None => {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create directory {}", dir.display()))?;
            None
        }
    };

    let backup_path = match &loaded.original {
        Some(original) => Some(write_backup(target, original, permissions.as_ref())?),
        None => None,
    };
    if let Err(err) = write_atomically(target, &bytes, loaded.original.as_deref(), permissions) {
        // The file was not changed, so the backup would only be clutter.
        if let Some(backup) = &backup_path {
            let _ = fs::remove_file(backup);
        }
        return Err(err)
            .with_context(|| format!("cannot write settings file {}", settings_path.display()));
    }
    Ok(backup_path)
}

/// The bytes of the newest backup of `target` whose JSON equals `root`, if any.
fn matching_backup(target: &Path, root: &Map<String, Value>) -> Option<Vec<u8>> {
    let prefix = format!("{}.mneme-backup-", file_name(target));
    let mut backups: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(parent_dir(target))
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    backups.sort();
    backups.into_iter().rev().take(8).find_map(|(_, path)| {
        let bytes = fs::read(&path).ok()?;
        let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let value: Value = serde_json::from_slice(text).ok()?;
        (value.as_object() == Some(root)).then_some(bytes)
    })
}

/// The directory holding `path`, as something that can be opened (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Copies the bytes that were parsed (not whatever is on disk now) next to the file.
fn write_backup(
    target: &Path,
    original: &[u8],
    permissions: Option<&Permissions>,
) -> Result<PathBuf> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default();
    let name = format!("{}.mneme-backup-{seconds}", file_name(target));
    let (path, mut file) = create_unique(parent_dir(target), &name, permissions.is_some())
        .with_context(|| format!("cannot create a backup of {}", target.display()))?;
    let written = (|| {
        file.write_all(original)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions.clone())?;
        }
        file.sync_all()
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&path);
        return Err(err).with_context(|| format!("cannot write backup {}", path.display()));
    }
    Ok(path)
}

/// Writes `bytes` to a temporary file beside `target`, syncs it and renames it over `target`,
/// so readers see either the old or the new file, never a partial one.
fn write_atomically(
    target: &Path,
    bytes: &[u8],
    expected: Option<&[u8]>,
    permissions: Option<Permissions>,
) -> Result<()> {
    let dir = parent_dir(target);
    let name = format!(".{}.mneme-tmp-{}", file_name(target), std::process::id());
    let (temp_path, file) = create_unique(dir, &name, permissions.is_some())?;
    let result = fill_and_swap(file, &temp_path, target, bytes, expected, permissions);
    if result.is_err() {
        let _ = fs::remove_file(&temp_path);
        return result;
    }
    // Syncing the directory makes the rename itself durable; failing to is not worth an
    // error because the new contents are already in place.
    #[cfg(unix)]
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn fill_and_swap(
    mut file: File,
    temp_path: &Path,
    target: &Path,
    bytes: &[u8],
    expected: Option<&[u8]>,
    permissions: Option<Permissions>,
) -> Result<()> {
    file.write_all(bytes)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);

    // Claude Code itself rewrites this file (for example from `/config`); if it did so while
    // we were working, renaming would silently discard its change.
    let current = match fs::read(target) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(err.into()),
    };
    if current.as_deref() != expected {
        bail!(
            "the file changed while mneme was updating it; nothing was written, run the command again"
        );
    }
    fs::rename(temp_path, target)?;
    Ok(())
}

/// Creates a new file named `name` in `dir`, or `name-1`, `name-2`, … if that exists, so
/// two backups within one second, or a stale temporary file, never collide. A file meant to
/// receive the original's permissions starts owner-only, so a private settings file is never
/// briefly readable by others through its copy.
fn create_unique(dir: &Path, name: &str, private: bool) -> Result<(PathBuf, File)> {
    for attempt in 0..1000 {
        let path = if attempt == 0 {
            dir.join(name)
        } else {
            dir.join(format!("{name}-{attempt}"))
        };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => {
                return Err(err).with_context(|| format!("cannot create {}", path.display()));
            }
        }
    }
    bail!(
        "cannot find a free file name for {} in {}",
        name,
        dir.display()
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let project = claude_code_settings_path(Scope::Project, Path::new("/p/q")).unwrap();
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
