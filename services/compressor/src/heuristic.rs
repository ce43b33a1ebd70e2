//! The heuristic compressor: from raw observations to structured ones, and from structured ones
//! to session summaries and checkpoints. Pure functions, no I/O, no model: it is the default,
//! and the fallback whenever the optional LLM compressor cannot be used.

use observation::identity::{command_key, relative};
use observation::row::Observation;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// Characters per token, for estimates: close enough for English and code, and an upper bound
/// for the budgets is taken elsewhere (see `llm`).
pub const CHARS_PER_TOKEN: i64 = 4;

/// The longest title, narrative and fact kept.
const MAX_TITLE: usize = 140;
const MAX_NARRATIVE: usize = 400;
const MAX_FACT: usize = 240;

/// What kind of tool a call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    FileRead,
    FileEdit,
    Shell,
    Search,
    Web,
    Subagent,
    Mcp,
    Prompt,
    Other,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::FileRead => "file_read",
            Category::FileEdit => "file_edit",
            Category::Shell => "shell",
            Category::Search => "search",
            Category::Web => "web",
            Category::Subagent => "subagent",
            Category::Mcp => "mcp",
            Category::Prompt => "prompt",
            Category::Other => "other",
        }
    }
}

/// The category of a tool, across the hosts' tool names.
pub fn categorize(tool: &str) -> Category {
    match tool {
        "Read" | "NotebookRead" | "read_file" | "read_many_files" | "ReadFile" => {
            Category::FileRead
        }
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "write_file" | "replace"
        | "edit_file" | "StrReplaceFile" | "WriteFile" => Category::FileEdit,
        "Bash" | "Shell" | "run_shell_command" | "BashOutput" | "KillShell" | "KillBash" => {
            Category::Shell
        }
        "Grep" | "Glob" | "LS" | "search_file_content" | "glob" | "list_directory" | "Grep2" => {
            Category::Search
        }
        "WebFetch" | "WebSearch" | "web_fetch" | "google_web_search" => Category::Web,
        "Task" | "Agent" | "TaskOutput" => Category::Subagent,
        t if t.starts_with("mcp__") => Category::Mcp,
        _ => Category::Other,
    }
}

/// What the compressor knows of the session when it structures one call.
#[derive(Debug, Clone, Default)]
pub struct SessionContext {
    /// The latest prompt, lowercased.
    pub last_prompt: String,
    /// Subjects (commands, files) whose last call failed and has not succeeded since.
    pub failing: BTreeSet<String>,
}

/// A structured observation before it is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Structured {
    pub category: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub tool_name: String,
    pub outcome: String,
    pub subject_key: String,
    pub title: String,
    pub narrative: String,
    pub facts: Vec<String>,
    pub concepts: Vec<String>,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
}

/// Structure one tool call (`post_tool` or `tool_failure`).
pub fn structure_tool(raw: &Observation, ctx: &SessionContext) -> Structured {
    let category = categorize(&raw.tool_name);
    let failed = raw.kind == "tool_failure";
    let input = parse_input(raw);
    let field = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or("").trim();
    let file = tool_file(raw, &input);
    let rel = relative(&file, &raw.project);
    let output = raw.output.as_deref().unwrap_or("");
    let error = if failed {
        error_line(output)
    } else {
        String::new()
    };
    let mut facts = Vec::new();
    let mut concepts = BTreeSet::new();
    let mut files_read = Vec::new();
    let mut files_modified = Vec::new();
    let mut subject_key = String::new();
    if !rel.is_empty() {
        concepts.extend(file_concepts(&rel));
    }

    let (title, narrative, kind) = match category {
        Category::FileRead => {
            subject_key = rel.clone();
            if !failed && !file.is_empty() {
                files_read.push(file.clone());
            }
            (
                format!("Read {}", or(&rel, "a file")),
                format!("Read {} to understand it.", or(&rel, "a file")),
                "discovery",
            )
        }
        Category::FileEdit => {
            subject_key = rel.clone();
            if !failed && !file.is_empty() {
                files_modified.push(file.clone());
            }
            let created = raw.tool_name == "Write" && output.trim_start().starts_with("create");
            let verb = if created { "Created" } else { "Edited" };
            let kind = edit_kind(ctx, created);
            let why = gist(&ctx.last_prompt, 120);
            let narrative = if why.is_empty() {
                format!("{verb} {}.", or(&rel, "a file"))
            } else {
                format!("{verb} {} while working on: {why}", or(&rel, "a file"))
            };
            (format!("{verb} {}", or(&rel, "a file")), narrative, kind)
        }
        Category::Shell => {
            let command = first_line(field("command"));
            subject_key = command_key(command);
            concepts.extend(command_concepts(command));
            let description = field("description");
            let title = format!("Ran `{}`", cut(command, 90));
            let narrative = if description.is_empty() {
                format!("Ran `{}`.", cut(command, 160))
            } else {
                format!("{}: `{}`.", capitalise(description), cut(command, 160))
            };
            if !failed && let Some(line) = outcome_line(output) {
                facts.push(cut(&line, MAX_FACT));
            }
            let kind = if is_mutating(command) {
                "change"
            } else {
                "discovery"
            };
            (title, narrative, kind)
        }
        Category::Search => {
            let pattern = or(field("pattern"), field("query")).to_owned();
            let path = relative(field("path"), &raw.project);
            let title = if path.is_empty() {
                format!("Searched for `{}`", cut(&pattern, 80))
            } else {
                format!("Searched for `{}` in {path}", cut(&pattern, 80))
            };
            (title.clone(), format!("{title}."), "discovery")
        }
        Category::Web => {
            let target = or(field("url"), field("query")).to_owned();
            let title = if raw.tool_name.contains("Search") || raw.tool_name.contains("search") {
                format!("Searched the web for `{}`", cut(&target, 100))
            } else {
                format!("Fetched {}", cut(&target, 120))
            };
            concepts.insert("web".to_owned());
            (title.clone(), format!("{title}."), "discovery")
        }
        Category::Subagent => {
            let who = or(field("subagent_type"), "a subagent").to_owned();
            let what = or(field("description"), &gist(field("prompt"), 100)).to_owned();
            concepts.insert("subagent".to_owned());
            (
                format!("Delegated to {who}: {}", cut(&what, 100)),
                format!("Delegated to {who}: {}", cut(&what, 300)),
                "discovery",
            )
        }
        Category::Mcp => {
            let name = raw.tool_name.trim_start_matches("mcp__").replace("__", "/");
            concepts.insert("mcp".to_owned());
            (
                format!("Called {name}"),
                format!("Called the MCP tool {name}."),
                "discovery",
            )
        }
        Category::Prompt | Category::Other => {
            let rest = raw
                .title
                .split_once(": ")
                .map(|(_, rest)| rest)
                .unwrap_or("");
            let title = if rest.is_empty() {
                format!("Used {}", raw.tool_name)
            } else {
                format!("{}: {}", raw.tool_name, cut(rest, 100))
            };
            (title.clone(), format!("{title}."), "discovery")
        }
    };

    let (title, narrative, kind) = if failed {
        concepts.insert("error".to_owned());
        if !error.is_empty() {
            facts.insert(0, cut(&error, MAX_FACT));
        }
        (
            format!("{title} (failed: {})", cut(or(&error, "error"), 60)),
            format!("{narrative} It failed: {}", cut(or(&error, "error"), 200)),
            "discovery",
        )
    } else {
        (title, narrative, kind)
    };
    Structured {
        category: category.as_str().to_owned(),
        kind: kind.to_owned(),
        tool_name: raw.tool_name.clone(),
        outcome: if failed { "error" } else { "ok" }.to_owned(),
        subject_key,
        title: cut(&title, MAX_TITLE),
        narrative: cut(&narrative, MAX_NARRATIVE),
        facts,
        concepts: concepts.into_iter().collect(),
        files_read,
        files_modified,
    }
}

/// A prompt worth a structured observation of its own: one that states a decision.
pub fn structure_prompt(raw: &Observation) -> Option<Structured> {
    let statement = decision_statement(&raw.body)?;
    Some(Structured {
        category: Category::Prompt.as_str().to_owned(),
        kind: "decision".to_owned(),
        tool_name: String::new(),
        outcome: "ok".to_owned(),
        subject_key: String::new(),
        title: cut(&format!("Decision: {statement}"), MAX_TITLE),
        narrative: cut(&statement, MAX_NARRATIVE),
        facts: vec![cut(&statement, MAX_FACT)],
        concepts: vec!["decision".to_owned()],
        files_read: Vec::new(),
        files_modified: Vec::new(),
    })
}

/// Phrases that mark a decision or a standing preference, English and Chinese.
const DECISION_PHRASES: [&str; 22] = [
    "let's use",
    "lets use",
    "let's go with",
    "we decided",
    "we'll use",
    "we will use",
    "decided to",
    "i prefer",
    "we prefer",
    "prefer ",
    "always ",
    "never ",
    "from now on",
    "instead of",
    "我们决定",
    "决定用",
    "决定使用",
    "就用",
    "改用",
    "偏好",
    "总是",
    "不要用",
];

/// The sentence of `text` that states a decision, if one does.
pub fn decision_statement(text: &str) -> Option<String> {
    for sentence in sentences(text) {
        let lower = sentence.to_lowercase();
        if DECISION_PHRASES.iter().any(|p| lower.contains(p)) {
            return Some(sentence.trim().to_owned());
        }
    }
    None
}

/// Split text into sentences (English and Chinese punctuation, and lines).
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '。', '！', '？', '!', '?', ';', '；'])
        .flat_map(|s| s.split(". "))
        .map(str::trim)
        .filter(|s| s.chars().count() >= 6)
}

fn edit_kind(ctx: &SessionContext, created: bool) -> &'static str {
    let prompt = ctx.last_prompt.as_str();
    let has = |words: &[&str]| words.iter().any(|w| prompt.contains(w));
    if !ctx.failing.is_empty()
        || has(&[
            "fix", "bug", "error", "fail", "broken", "crash", "wrong", "修复", "错误",
        ])
    {
        "bugfix"
    } else if has(&[
        "refactor", "rename", "clean up", "cleanup", "extract", "simplify", "重构",
    ]) {
        "refactor"
    } else if created
        || has(&[
            "add ",
            "implement",
            "feature",
            "support",
            "create",
            "添加",
            "实现",
        ])
    {
        "feature"
    } else {
        "change"
    }
}

fn parse_input(raw: &Observation) -> Value {
    raw.input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or(Value::Null)
}

/// The file a file tool worked on, from its input, or from the title ingest wrote
/// (`Edit: /path`) when the input was too long to keep whole.
pub fn tool_file(raw: &Observation, input: &Value) -> String {
    for key in ["file_path", "notebook_path", "path", "filePath", "filename"] {
        if let Some(path) = input.get(key).and_then(Value::as_str)
            && !path.is_empty()
        {
            return path.to_owned();
        }
    }
    if matches!(
        categorize(&raw.tool_name),
        Category::FileRead | Category::FileEdit
    ) && let Some((_, rest)) = raw.title.split_once(": ")
    {
        return rest.trim().to_owned();
    }
    String::new()
}

fn is_mutating(command: &str) -> bool {
    let key = command_key(command);
    let lower = command.to_lowercase();
    matches!(
        key.as_str(),
        "git commit"
            | "git push"
            | "git merge"
            | "git rebase"
            | "git add"
            | "git checkout"
            | "git switch"
            | "git reset"
            | "git stash"
            | "git tag"
            | "mv"
            | "rm"
            | "cp"
            | "mkdir"
            | "touch"
            | "npm install"
            | "cargo add"
            | "pip install"
            | "mix deps.get"
    ) || lower.contains("sed -i")
}

fn command_concepts(command: &str) -> Vec<String> {
    let key = command_key(command);
    let lower = command.to_lowercase();
    let mut out = Vec::new();
    if let Some(program) = key.split_whitespace().next() {
        out.push(program.to_owned());
    }
    if lower.contains("test") || lower.contains("pytest") || lower.contains("vitest") {
        out.push("testing".to_owned());
    }
    if lower.contains("build") || lower.contains("compile") {
        out.push("build".to_owned());
    }
    if key.starts_with("git ") {
        out.push("git".to_owned());
    }
    if lower.contains("lint") || lower.contains("credo") || lower.contains("clippy") {
        out.push("lint".to_owned());
    }
    out
}

fn file_concepts(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let language = match ext {
        "rs" => "rust",
        "ex" | "exs" | "heex" => "elixir",
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" => "javascript",
        "py" => "python",
        "go" => "go",
        "md" => "docs",
        "toml" | "yaml" | "yml" | "json" => "config",
        "sql" => "sql",
        "sh" => "shell",
        "css" | "scss" => "css",
        "html" => "html",
        _ => "",
    };
    if !language.is_empty() {
        out.push(language.to_owned());
    }
    if path.contains("test") || path.contains("spec") {
        out.push("testing".to_owned());
    }
    out
}

/// The line of a failure's output that says what went wrong.
pub fn error_line(output: &str) -> String {
    let text = strip_tags(output);
    let mut exit = "";
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Exit code") {
            exit = line;
            continue;
        }
        let lower = line.to_lowercase();
        if [
            "error",
            "fatal",
            "failed",
            "failure",
            "exception",
            "traceback",
            "not found",
            "does not exist",
            "denied",
            "cannot",
            "could not",
            "no such",
            "panicked",
            "rejected",
            "invalid",
        ]
        .iter()
        .any(|w| lower.contains(w))
        {
            return cut(line, MAX_FACT);
        }
    }
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("Exit code"))
        .unwrap_or("");
    match (exit.is_empty(), first.is_empty()) {
        (true, _) => cut(first, MAX_FACT),
        (false, true) => exit.to_owned(),
        (false, false) => cut(&format!("{exit}: {first}"), MAX_FACT),
    }
}

/// A line of a successful command's output worth keeping (test results, build status).
fn outcome_line(output: &str) -> Option<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .find(|l| {
            let lower = l.to_lowercase();
            (lower.contains("passed") || lower.contains("tests") || lower.contains("failures"))
                && lower.chars().any(|c| c.is_ascii_digit())
                || lower.starts_with("test result")
                || lower.starts_with("finished")
        })
        .map(str::to_owned)
}

fn strip_tags(text: &str) -> String {
    // Hooks can deliver an error that was JSON-escaped once more, with literal `\\n`s.
    text.replace("\\n", "\n")
        .replace("<tool_use_error>", "")
        .replace("</tool_use_error>", "")
}

/// Whether a failure is not the tool's: the user rejected the call, or the host cancelled it
/// because a parallel call failed.
pub fn is_cancellation(title: &str) -> bool {
    let lower = title.to_lowercase();
    lower.contains("sibling tool call errored")
        || lower.contains("doesn't want to proceed")
        || lower.contains("tool use was rejected")
}

/// A session's structured observation as the summary and the checkpoint read it back.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct StructuredRow {
    pub id: i64,
    pub category: String,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub outcome: String,
    pub subject_key: String,
    pub title: String,
    pub narrative: String,
    pub files_read: String,
    pub files_modified: String,
    pub last_observation_id: i64,
}

/// A prompt of the session (its start).
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Prompt {
    pub id: i64,
    pub text: String,
}

/// A todo item the agent keeps (Claude Code's TodoWrite).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    #[serde(default)]
    pub status: String,
}

/// The todo list a TodoWrite call set, if `raw` is one.
pub fn todos_of(raw: &Observation) -> Option<Vec<Todo>> {
    if raw.tool_name != "TodoWrite" {
        return None;
    }
    let input = parse_input(raw);
    let todos = input.get("todos")?.as_array()?;
    Some(
        todos
            .iter()
            .filter_map(|t| {
                Some(Todo {
                    content: t.get("content")?.as_str()?.to_owned(),
                    status: t
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                })
            })
            .collect(),
    )
}

/// One error of a session and whether a later call on the same subject succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionError {
    pub error: String,
    pub resolved: bool,
}

/// The fields of a summary, the schema the heuristic fills and LLM output is validated against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryFields {
    pub request: String,
    pub done: Vec<String>,
    pub decisions: Vec<String>,
    pub errors: Vec<SessionError>,
    pub open_items: Vec<String>,
}

/// Everything a summary or a checkpoint is made from.
#[derive(Debug, Clone, Default)]
pub struct SessionMaterial {
    pub prompts: Vec<Prompt>,
    pub structured: Vec<StructuredRow>,
    pub todos: Vec<Todo>,
}

impl SessionMaterial {
    /// Files modified in the session, in the order they were first touched.
    pub fn files_modified(&self) -> Vec<String> {
        ordered_union(self.structured.iter().map(|s| s.files_modified.as_str()))
    }

    pub fn files_read(&self) -> Vec<String> {
        ordered_union(self.structured.iter().map(|s| s.files_read.as_str()))
    }
}

fn ordered_union<'a>(lists: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for list in lists {
        for file in serde_json::from_str::<Vec<String>>(list).unwrap_or_default() {
            if seen.insert(file.clone()) {
                out.push(file);
            }
        }
    }
    out
}

/// Prompts shorter than this ("yes", "go on") say nothing about the work.
const MIN_PROMPT_CHARS: usize = 12;

/// Summarise a session: what was asked, done, decided, what failed and what remains.
pub fn summarise(material: &SessionMaterial) -> SummaryFields {
    let asks: Vec<String> = material
        .prompts
        .iter()
        .map(|p| gist(&p.text, 160))
        .filter(|p| p.chars().count() >= MIN_PROMPT_CHARS)
        .collect();
    let request = match asks.len() {
        0 => String::new(),
        1 => asks[0].clone(),
        n => {
            let later: Vec<&str> = asks[1..].iter().take(3).map(String::as_str).collect();
            let more = if n > 4 {
                format!(" (and {} more requests)", n - 4)
            } else {
                String::new()
            };
            format!("{}; then: {}{more}", asks[0], later.join("; "))
        }
    };
    let mut done = Vec::new();
    let mut seen = BTreeSet::new();
    for row in &material.structured {
        if row.outcome == "ok"
            && row.kind != "discovery"
            && row.kind != "decision"
            && seen.insert(row.title.clone())
        {
            done.push(row.title.clone());
        }
    }
    if done.len() > 20 {
        let rest = done.len() - 19;
        done.truncate(19);
        done.push(format!("… and {rest} more changes"));
    }
    let decisions: Vec<String> = material
        .structured
        .iter()
        .filter(|r| r.kind == "decision")
        .map(|r| r.narrative.clone())
        .collect();
    let errors = session_errors(&material.structured);
    let mut open_items: Vec<String> = material
        .todos
        .iter()
        .filter(|t| t.status != "completed")
        .map(|t| t.content.clone())
        .collect();
    open_items.extend(
        errors
            .iter()
            .filter(|e| !e.resolved)
            .map(|e| format!("unresolved: {}", e.error)),
    );
    SummaryFields {
        request,
        done,
        decisions,
        errors,
        open_items,
    }
}

/// The failures of a session, each once per subject, resolved when a later call on the same
/// subject succeeded.
pub fn session_errors(rows: &[StructuredRow]) -> Vec<SessionError> {
    let mut out: Vec<SessionError> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if row.outcome != "error" || is_cancellation(&row.title) {
            continue;
        }
        let key = if row.subject_key.is_empty() {
            row.title.clone()
        } else {
            row.subject_key.clone()
        };
        let resolved = rows[i + 1..]
            .iter()
            .any(|later| later.outcome == "ok" && !key.is_empty() && later.subject_key == key);
        if let Some(at) = keys.iter().position(|k| *k == key) {
            // The latest failure on a subject says whether it was resolved in the end.
            out[at] = SessionError {
                error: row.title.clone(),
                resolved,
            };
        } else {
            keys.push(key);
            out.push(SessionError {
                error: row.title.clone(),
                resolved,
            });
        }
    }
    out
}

/// The readable text of a summary; files are shown relative to `project`.
pub fn render_summary(
    fields: &SummaryFields,
    files_modified: &[String],
    project: &str,
    status: &str,
) -> String {
    let mut out = String::new();
    out.push_str(if status == "final" {
        "Session summary"
    } else {
        "Session summary (in progress)"
    });
    if !fields.request.is_empty() {
        out.push_str(&format!("\nAsked: {}", fields.request));
    }
    list(&mut out, "Done", &fields.done);
    if !files_modified.is_empty() {
        let shown: Vec<String> = files_modified
            .iter()
            .map(|f| relative(f, project))
            .collect();
        out.push_str(&format!("\nFiles changed: {}", shown.join(", ")));
    }
    list(&mut out, "Decisions", &fields.decisions);
    let errors: Vec<String> = fields
        .errors
        .iter()
        .map(|e| {
            format!(
                "{} ({})",
                e.error,
                if e.resolved { "resolved" } else { "unresolved" }
            )
        })
        .collect();
    list(&mut out, "Errors", &errors);
    list(&mut out, "Open", &fields.open_items);
    out
}

/// The fields of a checkpoint: where work stands, what was decided, what is left.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointFields {
    pub summary: String,
    pub decisions: Vec<String>,
    pub open_tasks: Vec<String>,
}

/// Make a checkpoint of a session as it stands; files are shown relative to `project`.
pub fn checkpoint(material: &SessionMaterial, project: &str) -> CheckpointFields {
    let fields = summarise(material);
    let mut summary = String::new();
    if let Some(last) = material
        .prompts
        .iter()
        .rev()
        .find(|p| p.text.chars().count() >= MIN_PROMPT_CHARS)
    {
        summary.push_str(&format!("Working on: {}", gist(&last.text, 240)));
    }
    if !fields.request.is_empty() && material.prompts.len() > 1 {
        summary.push_str(&format!("\nSession goal: {}", cut(&fields.request, 300)));
    }
    let recent: Vec<&str> = material
        .structured
        .iter()
        .rev()
        .filter(|r| r.kind != "decision")
        .take(8)
        .map(|r| r.title.as_str())
        .collect();
    if !recent.is_empty() {
        summary.push_str("\nRecent steps: ");
        summary.push_str(&recent.into_iter().rev().collect::<Vec<_>>().join("; "));
    }
    let files: Vec<String> = material
        .files_modified()
        .iter()
        .map(|f| relative(f, project))
        .collect();
    if !files.is_empty() {
        summary.push_str(&format!("\nFiles changed so far: {}", files.join(", ")));
    }
    let mut open_tasks = fields.open_items;
    if open_tasks.is_empty()
        && let Some(last) = material.prompts.last()
    {
        // With no todo list and nothing failing, the last request is what was in hand.
        let done_since = material
            .structured
            .iter()
            .any(|r| r.last_observation_id > last.id && r.kind != "discovery");
        if !done_since && last.text.chars().count() >= MIN_PROMPT_CHARS {
            open_tasks.push(gist(&last.text, 200));
        }
    }
    CheckpointFields {
        summary: summary.trim().to_owned(),
        decisions: fields.decisions,
        open_tasks,
    }
}

/// The readable text of a checkpoint.
pub fn render_checkpoint(fields: &CheckpointFields, host_summary: &str) -> String {
    let mut out = String::from("Checkpoint");
    if !fields.summary.is_empty() {
        out.push('\n');
        out.push_str(&fields.summary);
    }
    list(&mut out, "Key decisions", &fields.decisions);
    list(&mut out, "Open tasks", &fields.open_tasks);
    if !host_summary.trim().is_empty() {
        out.push_str("\nHost summary: ");
        out.push_str(&cut(host_summary.trim(), 1_500));
    }
    out
}

fn list(out: &mut String, heading: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push_str(&format!("\n{heading}:"));
    for item in items {
        out.push_str("\n- ");
        out.push_str(item);
    }
}

/// Estimated tokens of `chars` characters.
pub fn tokens(chars: i64) -> i64 {
    (chars + CHARS_PER_TOKEN - 1) / CHARS_PER_TOKEN
}

/// The first line of `text`, squeezed, at most `max` characters.
pub fn gist(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    cut(&line.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn or<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(kind: &str, name: &str, input: &str, output: &str) -> Observation {
        Observation {
            id: 1,
            session_id: "s".into(),
            project: "/p".into(),
            kind: kind.into(),
            tool_name: name.into(),
            title: format!("{name}: x"),
            input: Some(input.into()),
            output: Some(output.into()),
            ..Default::default()
        }
    }

    #[test]
    fn tools_fall_into_categories() {
        assert_eq!(categorize("Read"), Category::FileRead);
        assert_eq!(categorize("MultiEdit"), Category::FileEdit);
        assert_eq!(categorize("Bash"), Category::Shell);
        assert_eq!(categorize("Grep"), Category::Search);
        assert_eq!(categorize("WebFetch"), Category::Web);
        assert_eq!(categorize("Task"), Category::Subagent);
        assert_eq!(categorize("mcp__github__create_issue"), Category::Mcp);
        assert_eq!(categorize("TodoWrite"), Category::Other);
    }

    #[test]
    fn an_edit_after_a_failure_is_a_bugfix_with_its_file() {
        let mut ctx = SessionContext::default();
        ctx.failing.insert("mix test".into());
        let s = structure_tool(
            &tool(
                "post_tool",
                "Edit",
                r#"{"file_path":"/p/lib/a.ex","old_string":"x","new_string":"y"}"#,
                "",
            ),
            &ctx,
        );
        assert_eq!(s.category, "file_edit");
        assert_eq!(s.kind, "bugfix");
        assert_eq!(s.files_modified, vec!["/p/lib/a.ex"]);
        assert_eq!(s.title, "Edited lib/a.ex");
        assert!(s.concepts.contains(&"elixir".to_owned()));
        let created = structure_tool(
            &tool(
                "post_tool",
                "Write",
                r#"{"file_path":"/p/src/new.rs"}"#,
                "create\n/p/src/new.rs",
            ),
            &SessionContext::default(),
        );
        assert_eq!(created.kind, "feature");
        assert_eq!(created.title, "Created src/new.rs");
    }

    #[test]
    fn failed_commands_keep_the_error_line() {
        let s = structure_tool(
            &tool(
                "tool_failure",
                "Bash",
                r#"{"command":"git push 2>&1"}"#,
                "Exit code 128\nfatal: The current branch x has no upstream branch.",
            ),
            &SessionContext::default(),
        );
        assert_eq!(s.outcome, "error");
        assert_eq!(s.subject_key, "git push");
        assert!(s.title.starts_with("Ran `git push 2>&1` (failed: fatal"));
        assert!(s.facts[0].contains("no upstream branch"));
        assert!(s.concepts.contains(&"git".to_owned()));
    }

    #[test]
    fn a_truncated_input_still_names_its_file() {
        let mut raw = tool(
            "post_tool",
            "Write",
            "{\"file_path\": \"/p/big.json\", \"co",
            "",
        );
        raw.title = "Write: /p/big.json".into();
        let s = structure_tool(&raw, &SessionContext::default());
        assert_eq!(s.files_modified, vec!["/p/big.json"]);
    }

    #[test]
    fn decisions_are_found_in_english_and_chinese() {
        assert_eq!(
            decision_statement("ok. Let's use sqlx for the store, not diesel").as_deref(),
            Some("Let's use sqlx for the store, not diesel")
        );
        assert!(decision_statement("我们决定使用 NATS 作为消息总线。").is_some());
        assert!(decision_statement("run the tests please").is_none());
    }

    fn row(
        id: i64,
        kind: &str,
        outcome: &str,
        key: &str,
        title: &str,
        files: &str,
    ) -> StructuredRow {
        StructuredRow {
            id,
            category: "shell".into(),
            kind: kind.into(),
            outcome: outcome.into(),
            subject_key: key.into(),
            title: title.into(),
            narrative: title.into(),
            files_read: "[]".into(),
            files_modified: files.into(),
            last_observation_id: id,
        }
    }

    #[test]
    fn summaries_say_what_was_asked_done_and_left() {
        let material = SessionMaterial {
            prompts: vec![Prompt {
                id: 1,
                text: "Fix the failing login test\nmore".into(),
            }],
            structured: vec![
                row(
                    2,
                    "discovery",
                    "error",
                    "mix test",
                    "Ran `mix test` (failed: boom)",
                    "[]",
                ),
                row(
                    3,
                    "bugfix",
                    "ok",
                    "lib/a.ex",
                    "Edited lib/a.ex",
                    r#"["/p/lib/a.ex"]"#,
                ),
                row(4, "discovery", "ok", "mix test", "Ran `mix test`", "[]"),
                row(
                    5,
                    "discovery",
                    "error",
                    "git push",
                    "Ran `git push` (failed: x)",
                    "[]",
                ),
            ],
            todos: vec![Todo {
                content: "write docs".into(),
                status: "pending".into(),
            }],
        };
        let fields = summarise(&material);
        assert_eq!(fields.request, "Fix the failing login test");
        assert_eq!(fields.done, vec!["Edited lib/a.ex"]);
        assert_eq!(fields.errors.len(), 2);
        assert!(fields.errors[0].resolved && !fields.errors[1].resolved);
        assert_eq!(fields.open_items[0], "write docs");
        let text = render_summary(&fields, &material.files_modified(), "/p", "final");
        assert!(text.contains("Files changed: lib/a.ex"), "{text}");
        let cp = checkpoint(&material, "/p");
        assert!(
            cp.summary
                .starts_with("Working on: Fix the failing login test")
        );
        assert!(cp.open_tasks.iter().any(|t| t.contains("git push")));
    }
}
