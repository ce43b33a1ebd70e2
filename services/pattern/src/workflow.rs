//! Procedural memory: what a turn of work did, as steps that could be run again.
//!
//! A turn is a prompt and the tool calls that answer it, up to the next prompt, the end of the
//! turn or of the session. Its run keeps only what changed something: shell commands that are
//! not read-only and file edits (consecutive edits folded into one step). Reads, listings,
//! searches and fetches are not steps; a failed call that a later call on the same command or
//! file made work is not a step either (the call that worked is), and a command run several
//! times counts once, where it last ran. A run whose last action failed, with nothing after it
//! that worked, is a failed run of the same workflow: two runs are one workflow when they have
//! the same shape (the programs they ran, and that they edited) on the same files (relative to
//! the project), so a workflow that worked last week and fails today says so.
//!
//! Pure functions, no I/O: [`crate::walk`] reads the turn and records what this returns.

use crate::detect;
use observation::identity::{command_key, relative};
use observation::row::Observation;
use serde_json::Value;
use std::collections::BTreeSet;

/// The most steps a workflow keeps: the last ones, which led to the outcome.
pub const MAX_STEPS: usize = 12;
/// The longest command line kept in a step.
const MAX_STEP_CHARS: usize = 160;
/// The longest situation kept.
pub const MAX_SITUATION_CHARS: usize = 300;

/// One step of a run, as it would be run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A command line (its first line, without `cd` into the project or a trailing pager).
    Command { line: String, key: String },
    /// Edits of these files (relative to the project), with the line the edit of a single
    /// file brought in, which is what makes the step repeatable ("edit the migration" says
    /// where, not what).
    Edit {
        files: Vec<String>,
        change: Option<String>,
    },
    /// Another action: a skill, a slash command, an MCP tool.
    Tool { name: String },
}

impl Step {
    /// How the step reads in a workflow.
    pub fn text(&self) -> String {
        match self {
            Step::Command { line, .. } => format!("`{line}`"),
            Step::Edit { files, .. } if files.is_empty() => "edit".to_owned(),
            Step::Edit { files, change } => {
                let shown: Vec<&str> = files.iter().take(4).map(String::as_str).collect();
                match (files.len().saturating_sub(shown.len()), change) {
                    (0, Some(change)) if files.len() == 1 => {
                        format!("edit {} (`{change}`)", shown[0])
                    }
                    (0, _) => format!("edit {}", shown.join(", ")),
                    (more, _) => format!("edit {} and {more} more", shown.join(", ")),
                }
            }
            Step::Tool { name } => name.clone(),
        }
    }

    /// What makes two steps the same step of a workflow: the program and subcommand, that it
    /// is an edit, the tool.
    fn shape(&self) -> String {
        match self {
            Step::Command { key, .. } => key.clone(),
            Step::Edit { .. } => "edit".to_owned(),
            Step::Tool { name } => name.clone(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The last action failed and nothing after it worked: which step, and why.
    Failure {
        step: String,
        reason: String,
    },
}

/// A run of a workflow, found in a turn or reported on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub steps: Vec<Step>,
    /// Earlier steps left out to keep [`MAX_STEPS`].
    pub dropped: usize,
    pub files: Vec<String>,
    pub outcome: Outcome,
}

impl Run {
    /// The shape of the run: the sequence of its steps' shapes, consecutive repeats folded.
    pub fn shape(&self) -> Vec<String> {
        let mut shape: Vec<String> = Vec::new();
        for step in &self.steps {
            let s = step.shape();
            if shape.last() != Some(&s) {
                shape.push(s);
            }
        }
        shape
    }

    /// The steps as text, in order.
    pub fn step_texts(&self) -> Vec<String> {
        let mut texts: Vec<String> = self.steps.iter().map(Step::text).collect();
        if self.dropped > 0 {
            texts.insert(0, format!("… {} earlier steps", self.dropped));
        }
        texts
    }
}

/// Tools whose calls change files.
fn is_edit_tool(tool: &str) -> bool {
    matches!(
        tool,
        "Edit"
            | "Write"
            | "MultiEdit"
            | "NotebookEdit"
            | "write_file"
            | "replace"
            | "WriteFile"
            | "StrReplaceFile"
            | "fs_write"
            | "apply_patch"
            | "edit_file"
    )
}

/// Tools that only look: reading, listing, searching, fetching, planning, asking, and the
/// agent's own bookkeeping. A subagent's work is its own session.
fn is_looking_tool(tool: &str) -> bool {
    matches!(
        tool,
        "Read"
            | "Grep"
            | "Glob"
            | "LS"
            | "WebFetch"
            | "WebSearch"
            | "TodoWrite"
            | "TodoRead"
            | "Task"
            | "TaskOutput"
            | "BashOutput"
            | "KillShell"
            | "KillBash"
            | "AskUserQuestion"
            | "EnterPlanMode"
            | "ExitPlanMode"
            | "read_file"
            | "read_many_files"
            | "list_directory"
            | "glob"
            | "search_file_content"
            | "web_fetch"
            | "google_web_search"
            | "save_memory"
            | "ReadFile"
            | "SearchWeb"
            | "FetchURL"
            | "SetTodoList"
            | "fs_read"
            | "update_plan"
    ) || is_looking_mcp_tool(tool)
}

/// An MCP tool (`mcp__server__tool`) whose name says it only reads.
fn is_looking_mcp_tool(tool: &str) -> bool {
    let Some(name) = tool.strip_prefix("mcp__") else {
        return false;
    };
    let name = name
        .rsplit("__")
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase();
    [
        "get", "list", "read", "search", "find", "fetch", "show", "query", "view", "describe",
    ]
    .iter()
    .any(|verb| name.starts_with(verb))
}

/// Programs that only look, whatever their arguments (a few are read-only only without some
/// flags; those are checked in [`is_read_only_command`]).
const LOOKING_PROGRAMS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "rg",
    "ag",
    "ack",
    "find",
    "fd",
    "tree",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "wc",
    "file",
    "stat",
    "du",
    "df",
    "env",
    "printenv",
    "ps",
    "top",
    "date",
    "whoami",
    "id",
    "uname",
    "hostname",
    "sleep",
    "true",
    "jq",
    "yq",
    "diff",
    "cmp",
    "sort",
    "uniq",
    "cut",
    "column",
    "nl",
    "realpath",
    "dirname",
    "basename",
    "readlink",
    "md5sum",
    "sha256sum",
    "test",
    "[",
    "man",
    "history",
    "lsof",
    "free",
    "uptime",
    "cd",
    "wait",
    "open",
    "xdg-open",
    "bat",
    "awk",
];

/// Subcommands that only look, for any program (`git status`, `bd show`, `kubectl get`).
const LOOKING_SUBCOMMANDS: &[&str] = &[
    "show",
    "list",
    "ls",
    "status",
    "log",
    "logs",
    "diff",
    "view",
    "get",
    "describe",
    "inspect",
    "info",
    "ready",
    "search",
    "help",
    "version",
    "blame",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "shortlog",
    "reflog",
    "grep",
    "whoami",
    "outdated",
    "tree",
    "top",
];

/// Whether a shell command only looks. The program is the first one after any `cd`
/// ([`command_key`]); `sed` without `-i`, `curl` without a method or data, and `git branch`,
/// `git remote` or `git stash` without an action only look too.
pub fn is_read_only_command(command: &str) -> bool {
    let key = command_key(command);
    let mut words = key.split_whitespace();
    let Some(program) = words.next() else {
        return true;
    };
    let sub = words.next().unwrap_or("");
    let line = command.lines().next().unwrap_or("");
    let has = |flags: &[&str]| {
        line.split_whitespace().any(|w| {
            flags
                .iter()
                .any(|f| w == *f || w.starts_with(&format!("{f}=")))
        })
    };
    match program {
        "sed" => !has(&["-i", "--in-place"]) && !line.contains(" -i"),
        "curl" | "wget" | "http" => !has(&[
            "-X",
            "--request",
            "-d",
            "--data",
            "--data-raw",
            "-F",
            "--form",
            "-T",
        ]),
        "git" if matches!(sub, "branch" | "remote" | "stash" | "tag" | "config") => {
            // `git branch` lists; `git branch -d x` or `git branch x` changes something.
            let rest: Vec<&str> = line
                .split_whitespace()
                .skip_while(|w| *w != sub)
                .skip(1)
                .filter(|w| !w.starts_with('>') && *w != "2>&1")
                .collect();
            rest.iter().all(|w| {
                matches!(
                    *w,
                    "-a" | "-r"
                        | "-v"
                        | "-vv"
                        | "--list"
                        | "list"
                        | "--show-current"
                        | "-l"
                        | "--get"
                        | "|"
                ) || w.starts_with("--format")
            })
        }
        _ if LOOKING_PROGRAMS.contains(&program) => true,
        _ => {
            // A flag is not a subcommand, so `cargo --version` has none: look at the word
            // after the program itself.
            let first_argument = line
                .split_whitespace()
                .skip_while(|w| w.rsplit('/').next() != Some(program))
                .nth(1)
                .unwrap_or("");
            LOOKING_SUBCOMMANDS.contains(&sub)
                || matches!(first_argument, "--version" | "-V" | "--help" | "-h")
        }
    }
}

/// The command line as it would be run again: its first line, without a leading `cd` into
/// the project, a trailing `2>&1` or a pager (`| head`, `| tail`), cut short.
pub fn runnable(command: &str, project: &str) -> String {
    let mut line = command.lines().next().unwrap_or("").trim().to_owned();
    // A here-document (`git commit -m "$(cat <<'EOF'`) goes on past this line: what follows
    // its start is the message, not the command.
    if let Some(at) = line.find("\"$(cat <<").or_else(|| line.find("<<")) {
        line = format!("{} …", line[..at].trim_end());
    }
    if let Some((first, rest)) = line.split_once("&&") {
        let dir = first.trim().strip_prefix("cd ").map(str::trim);
        if dir.is_some_and(|d| {
            project.is_empty() || d.trim_matches('"') == project.trim_end_matches('/') || d == "."
        }) {
            line = rest.trim().to_owned();
        }
    }
    loop {
        let before = line.clone();
        if let Some((head, tail)) = line.rsplit_once('|') {
            let pager = tail.trim();
            if ["head", "tail", "less", "more", "cat"]
                .iter()
                .any(|p| pager == *p || pager.starts_with(&format!("{p} ")))
            {
                line = head.trim().to_owned();
            }
        }
        if let Some(stripped) = line.strip_suffix("2>&1") {
            line = stripped.trim().to_owned();
        }
        if line == before {
            break;
        }
    }
    cut(&line, MAX_STEP_CHARS)
}

fn input(raw: &Observation) -> Value {
    raw.input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or(Value::Null)
}

/// The longest change kept in an edit step.
const MAX_CHANGE_CHARS: usize = 100;

/// The first line an edit brought in that was not there before, from the edit tools' inputs
/// (a replacement's new text against its old text, a patch's added lines against its removed
/// ones); `None` for a whole file written, whose first line says nothing of a change.
fn change_of(input: &Value) -> Option<String> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or("");
    let (added, removed): (Vec<&str>, Vec<&str>) = if let Some(patch) = ["patch", "input", "diff"]
        .iter()
        .map(|k| text(k))
        .find(|t| !t.is_empty())
    {
        let lines = || {
            patch
                .lines()
                .filter(|l| !l.starts_with("+++") && !l.starts_with("---"))
        };
        (
            lines().filter_map(|l| l.strip_prefix('+')).collect(),
            lines().filter_map(|l| l.strip_prefix('-')).collect(),
        )
    } else if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        // Several replacements in one call: the last is the one the change ends on.
        let last = edits.last()?;
        let field = |k: &str| last.get(k).and_then(Value::as_str).unwrap_or("");
        (
            field("new_string").lines().collect(),
            field("old_string").lines().collect(),
        )
    } else {
        let new = ["new_string", "new_str", "new"]
            .iter()
            .map(|k| text(k))
            .find(|t| !t.is_empty())?;
        let old = ["old_string", "old_str", "old"]
            .iter()
            .map(|k| text(k))
            .find(|t| !t.is_empty())
            .unwrap_or("");
        (new.lines().collect(), old.lines().collect())
    };
    let before: BTreeSet<&str> = removed.iter().map(|l| l.trim()).collect();
    added
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !before.contains(l))
        .map(|l| cut(&l.replace('`', "'"), MAX_CHANGE_CHARS))
}

/// Whether a call only looks (reads, lists, searches): not a step of anything.
pub fn only_looks(raw: &Observation) -> bool {
    step_of(raw).is_none()
}

/// The step a call would be, or `None` when it only looks.
fn step_of(raw: &Observation) -> Option<Step> {
    let tool = raw.tool_name.as_str();
    if detect::is_shell(tool) {
        let command = input(raw)
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| raw.title.split_once(": ").map(|(_, c)| c.to_owned()))
            .unwrap_or_default();
        if command.trim().is_empty() || is_read_only_command(&command) {
            return None;
        }
        return Some(Step::Command {
            line: runnable(&command, &raw.project),
            key: command_key(&command),
        });
    }
    if is_edit_tool(tool) {
        let (_, file) = detect::command_and_file(raw);
        return Some(Step::Edit {
            files: (!file.is_empty())
                .then(|| relative(&file, &raw.project))
                .into_iter()
                .collect(),
            change: change_of(&input(raw)),
        });
    }
    if is_looking_tool(tool) || tool.is_empty() {
        return None;
    }
    let name = match tool {
        "Skill" | "SlashCommand" => {
            let input = input(raw);
            let what = ["skill", "command", "name"]
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str))
                .unwrap_or("");
            if what.is_empty() {
                tool.to_owned()
            } else {
                format!("{tool} {}", cut(what, 80))
            }
        }
        _ => tool.to_owned(),
    };
    Some(Step::Tool { name })
}

/// The run of one turn's tool calls (in order), or `None` when the turn did nothing worth
/// repeating: fewer than two steps, or no command that ran.
pub fn run_of(calls: &[Observation]) -> Option<Run> {
    // Each action with why it failed, when it did.
    struct Action {
        step: Step,
        failed: Option<String>,
    }
    let mut actions: Vec<Action> = Vec::new();
    for raw in calls {
        let failed = raw.kind == "tool_failure";
        let output = raw.output.as_deref().unwrap_or("");
        if failed && detect::is_not_a_failure(output) {
            continue;
        }
        let Some(step) = step_of(raw) else { continue };
        actions.push(Action {
            step,
            failed: failed.then(|| detect::error_class(output)),
        });
    }
    let outcome = match actions.last() {
        Some(Action {
            step,
            failed: Some(reason),
            ..
        }) => Outcome::Failure {
            step: step.text(),
            reason: reason.clone(),
        },
        _ => Outcome::Success,
    };
    // A failure is not a step: the call that later worked is, and a failure nothing fixed
    // before the end did not lead anywhere. The last action stays when it failed, since that is
    // where the run stopped.
    let last = actions.len().saturating_sub(1);
    let mut kept: Vec<Step> = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        if action.failed.is_some() && !(i == last && outcome != Outcome::Success) {
            continue;
        }
        kept.push(action.step.clone());
    }
    // A command run again later counts once, where it last ran (the run that worked).
    let mut steps: Vec<Step> = Vec::new();
    for (i, step) in kept.iter().enumerate() {
        if let Step::Command { line, .. } = step {
            let again = kept[i + 1..]
                .iter()
                .any(|later| matches!(later, Step::Command { line: l, .. } if l == line));
            if again {
                continue;
            }
        }
        match (steps.last_mut(), step) {
            (
                Some(Step::Edit { files, change }),
                Step::Edit {
                    files: more,
                    change: later,
                },
            ) => {
                for file in more {
                    if !files.contains(file) {
                        files.push(file.clone());
                    }
                }
                // The later edit of a file is the one that stayed.
                if later.is_some() {
                    change.clone_from(later);
                }
            }
            (Some(Step::Tool { name }), Step::Tool { name: again }) if name == again => {}
            _ => steps.push(step.clone()),
        }
    }
    let commands = steps
        .iter()
        .filter(|s| matches!(s, Step::Command { .. }))
        .count();
    if steps.len() < 2 || commands == 0 {
        return None;
    }
    let files: BTreeSet<String> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Edit { files, .. } => Some(files.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    let dropped = steps.len().saturating_sub(MAX_STEPS);
    steps.drain(..dropped);
    Some(Run {
        steps,
        dropped,
        files: files.into_iter().collect(),
        outcome,
    })
}

/// The run a person or an agent reported (`record_workflow`): steps as given, an edit when a
/// step starts with `Edit `, a command otherwise.
pub fn reported_run(steps: &[String], files: &[String], failed: bool, reason: &str) -> Option<Run> {
    let steps: Vec<Step> = steps
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(
            |s| match s.strip_prefix("Edit ").or_else(|| s.strip_prefix("edit ")) {
                Some(file) => Step::Edit {
                    files: vec![file.trim().to_owned()],
                    change: None,
                },
                None => {
                    let line = s.trim_matches('`');
                    Step::Command {
                        line: cut(line, MAX_STEP_CHARS),
                        key: command_key(line),
                    }
                }
            },
        )
        .collect();
    let last = steps.last()?.text();
    let mut all: BTreeSet<String> = files.iter().cloned().collect();
    for step in &steps {
        if let Step::Edit { files, .. } = step {
            all.extend(files.iter().cloned());
        }
    }
    Some(Run {
        steps,
        dropped: 0,
        files: all.into_iter().collect(),
        outcome: if failed {
            Outcome::Failure {
                step: last,
                reason: if reason.trim().is_empty() {
                    "it did not work".to_owned()
                } else {
                    cut(reason.trim(), 300)
                },
            }
        } else {
            Outcome::Success
        },
    })
}

/// Whether a prompt says what the work is about, rather than only to go on ("continue", "yes")
/// or being the host's own text (a task notification, a resumed session's summary).
pub fn is_situation(prompt: &str) -> bool {
    let text = prompt.trim();
    let first = text
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    text.split_whitespace().count() >= 4
        && !matches!(
            first.as_str(),
            "continue" | "proceed" | "resume" | "ok" | "okay" | "yes"
        )
        && !text.starts_with('<')
        && !text.starts_with("This session is being continued")
        && !text.starts_with("Caveat:")
}

/// The situation as kept: one line, cut short.
pub fn situation_text(prompt: &str) -> String {
    let flat = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&flat, MAX_SITUATION_CHARS)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(kind: &str, tool: &str, input: Value, output: &str) -> Observation {
        Observation {
            kind: kind.to_owned(),
            tool_name: tool.to_owned(),
            project: "/p".to_owned(),
            input: Some(input.to_string()),
            output: Some(output.to_owned()),
            ..Default::default()
        }
    }

    fn bash(command: &str) -> Observation {
        call(
            "post_tool",
            "Bash",
            serde_json::json!({ "command": command }),
            "ok",
        )
    }

    fn bash_failed(command: &str, output: &str) -> Observation {
        call(
            "tool_failure",
            "Bash",
            serde_json::json!({ "command": command }),
            output,
        )
    }

    fn edit(file: &str) -> Observation {
        call(
            "post_tool",
            "Edit",
            serde_json::json!({ "file_path": file }),
            "ok",
        )
    }

    fn read(file: &str) -> Observation {
        call(
            "post_tool",
            "Read",
            serde_json::json!({ "file_path": file }),
            "text",
        )
    }

    #[test]
    fn read_only_commands_are_told_from_actions() {
        for looking in [
            "ls -la",
            "cd /p && git status",
            "git diff --stat 2>&1",
            "git log --oneline -5",
            "bd show spotter-dov",
            "bd ready",
            "tail -20 /tmp/out",
            "sed -n 1,20p src/a.rs",
            "curl -s https://example.com | jq .",
            "git branch",
            "cargo --version",
            "kubectl get pods",
        ] {
            assert!(is_read_only_command(looking), "{looking} should only look");
        }
        for acting in [
            "mix test",
            "cargo nextest run --workspace",
            "git commit -m x",
            "git push --set-upstream origin x",
            "bd close spotter-dov.1",
            "sed -i s/a/b/ f",
            "curl -X POST https://example.com",
            "git branch -d old",
            "make release",
            "mix format",
        ] {
            assert!(!is_read_only_command(acting), "{acting} should be a step");
        }
    }

    #[test]
    fn runnable_lines_lose_the_cd_and_the_pager() {
        assert_eq!(
            runnable("cd /p && mix test 2>&1 | tail -10", "/p"),
            "mix test"
        );
        assert_eq!(
            runnable("cd /other && make", "/p"),
            "cd /other && make",
            "a cd elsewhere is part of the step"
        );
        assert_eq!(
            runnable("mix credo --strict 2>&1 | head -20\nmore", ""),
            "mix credo --strict"
        );
        assert_eq!(
            runnable("git commit -m \"$(cat <<'EOF'\nfeat: x\nEOF\n)\"", ""),
            "git commit -m …"
        );
    }

    #[test]
    fn a_turn_keeps_actions_and_the_fix_not_reads_or_failed_tries() {
        let calls = [
            read("/p/lib/a.ex"),
            bash("bd update x --status in_progress"),
            edit("/p/lib/a.ex"),
            edit("/p/lib/b.ex"),
            bash("mix compile 2>&1 | head -40"),
            bash_failed("mix test", "Exit code 2\n1 failure"),
            call("post_tool", "Grep", serde_json::json!({"pattern": "x"}), ""),
            edit("/p/test/a_test.exs"),
            bash("mix compile 2>&1 | head -40"),
            bash("mix test"),
            bash("git status"),
        ];
        let run = run_of(&calls).expect("a run");
        assert_eq!(run.outcome, Outcome::Success);
        assert_eq!(
            run.step_texts(),
            [
                "`bd update x --status in_progress`",
                "edit lib/a.ex, lib/b.ex, test/a_test.exs",
                "`mix compile`",
                "`mix test`",
            ]
        );
        assert_eq!(
            run.shape(),
            ["bd update", "edit", "mix compile", "mix test"]
        );
        assert_eq!(run.files, ["lib/a.ex", "lib/b.ex", "test/a_test.exs"]);
    }

    #[test]
    fn an_edit_step_says_what_it_brought_in() {
        let replace = |old: &str, new: &str| {
            call(
                "post_tool",
                "Edit",
                serde_json::json!({"file_path": "/p/migrations/0007_email.sql",
                    "old_string": old, "new_string": new}),
                "ok",
            )
        };
        let calls = [
            bash_failed("sqlx migrate run", "error: duplicate column name: email"),
            replace(
                "-- email\nALTER TABLE users ADD COLUMN email TEXT;",
                "-- email\nALTER TABLE users ADD COLUMN IF NOT EXISTS email TEXT;",
            ),
            bash("sqlx migrate run"),
        ];
        let run = run_of(&calls).expect("a run");
        assert_eq!(
            run.step_texts(),
            [
                "edit migrations/0007_email.sql (`ALTER TABLE users ADD COLUMN IF NOT EXISTS email TEXT;`)",
                "`sqlx migrate run`",
            ]
        );
        // A patch's added lines count, not the context or the header; the later edit of a
        // file is the one kept.
        let patch = call(
            "post_tool",
            "apply_patch",
            serde_json::json!({"file_path": "/p/migrations/0007_email.sql",
                "patch": "--- a/m.sql\n+++ b/m.sql\n keep\n-ADD COLUMN email;\n+ADD COLUMN IF NOT EXISTS email;"}),
            "ok",
        );
        let run =
            run_of(&[replace("a", "first try"), patch, bash("sqlx migrate run")]).expect("a run");
        assert_eq!(
            run.step_texts()[0],
            "edit migrations/0007_email.sql (`ADD COLUMN IF NOT EXISTS email;`)"
        );
        // A whole file written, or edits of several files, name the files only.
        let write = call(
            "post_tool",
            "Write",
            serde_json::json!({"file_path": "/p/lib/new.ex", "content": "defmodule New do"}),
            "ok",
        );
        let run = run_of(&[write, bash("mix test")]).expect("a run");
        assert_eq!(run.step_texts()[0], "edit lib/new.ex");
        let run =
            run_of(&[replace("a", "b"), edit("/p/lib/b.ex"), bash("mix test")]).expect("a run");
        assert_eq!(
            run.step_texts()[0],
            "edit migrations/0007_email.sql, lib/b.ex"
        );
    }

    #[test]
    fn a_turn_that_ends_failing_is_a_failed_run() {
        let calls = [
            edit("/p/lib/a.ex"),
            bash_failed("mix test", "Exit code 2\n** (CompileError) lib/a.ex:3"),
        ];
        let run = run_of(&calls).expect("a run");
        match &run.outcome {
            Outcome::Failure { step, reason } => {
                assert_eq!(step, "`mix test`");
                assert!(!reason.is_empty());
            }
            Outcome::Success => panic!("the run failed"),
        }
        assert_eq!(run.shape(), ["edit", "mix test"]);
    }

    #[test]
    fn looking_around_is_no_workflow() {
        assert!(run_of(&[read("/p/a"), bash("ls"), bash("git log")]).is_none());
        assert!(
            run_of(&[edit("/p/a"), edit("/p/b")]).is_none(),
            "no command ran"
        );
        assert!(
            run_of(&[bash("mix test")]).is_none(),
            "one step is not a workflow"
        );
    }

    #[test]
    fn situations_are_requests_not_continuations() {
        assert!(is_situation("add tracing to the hook controllers"));
        assert!(!is_situation("continue"));
        assert!(!is_situation("continue until all are done"));
        assert!(!is_situation(
            "<task-notification> done </task-notification>"
        ));
        assert!(!is_situation(
            "This session is being continued from a previous conversation"
        ));
    }

    #[test]
    fn a_reported_run_reads_edits_and_commands() {
        let run = reported_run(
            &["Edit CHANGELOG.md".into(), "`make release`".into()],
            &[],
            true,
            "the tag already existed",
        )
        .unwrap();
        assert_eq!(run.shape(), ["edit", "make release"]);
        assert_eq!(run.files, ["CHANGELOG.md"]);
        assert!(
            matches!(run.outcome, Outcome::Failure { ref reason, .. } if reason.contains("tag"))
        );
    }
}
