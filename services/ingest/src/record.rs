//! From a hook event to the observation row ingest stores: sanitised, truncated, titled, and
//! given a searchable body. Pure functions, no I/O.

use proto::event::Payload;
use proto::{Event, ToolCall};
use sanitize::{Report, Sanitizer};
use serde_json::{Value, json};

/// The longest searchable body kept for one observation; the full (truncated) output stays in
/// `output`.
const MAX_BODY_CHARS: usize = 20_000;
/// The longest title.
const MAX_TITLE_CHARS: usize = 160;

/// An observation ready to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub event_id: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    /// Who worked in the session (the host's user), so memory can be asked about a person.
    pub author: String,
    pub kind: &'static str,
    pub host_event: String,
    pub tool_name: String,
    pub tool_use_id: String,
    pub subagent_id: String,
    pub title: String,
    pub body: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub meta: Value,
    pub content_hash: String,
    pub occurred_at: i64,
}

/// Input keys that name the file a tool works on.
const PATH_KEYS: [&str; 5] = ["file_path", "path", "notebook_path", "filePath", "filename"];
/// Input keys that carry file content, dropped with the output when the file is excluded.
const CONTENT_KEYS: [&str; 6] = [
    "content",
    "old_string",
    "new_string",
    "edits",
    "new_source",
    "text",
];

/// Build the observation for `event`, sanitising every piece of text on the way.
pub fn build_observation(event: &Event, sanitizer: &Sanitizer) -> Observation {
    let mut report = Report::default();
    let mut meta = serde_json::Map::new();
    let mut tool_name = String::new();
    let mut tool_use_id = String::new();
    let mut input = None;
    let mut output = None;
    let (title, body) = match &event.payload {
        Some(Payload::SessionStart(s)) => (
            format!("session started ({})", or(&s.source, "startup")),
            String::new(),
        ),
        Some(Payload::Prompt(p)) => {
            let text = clean(sanitizer, &mut report, &p.text);
            (first_line(&text), text)
        }
        Some(Payload::PreTool(call) | Payload::PostTool(call) | Payload::ToolFailure(call)) => {
            tool_name = call.tool_name.clone();
            tool_use_id = call.tool_use_id.clone();
            let tool = build_tool(event.kind(), call, sanitizer, &mut report, &mut meta);
            input = tool.input;
            output = tool.output;
            (tool.title, tool.body)
        }
        Some(Payload::SubagentStart(s)) => (
            format!("subagent {} started", or(&s.agent_type, &s.agent_id)),
            String::new(),
        ),
        Some(Payload::SubagentStop(s)) => {
            let text = clean(sanitizer, &mut report, &s.last_message);
            (
                format!("subagent {} finished", or(&s.agent_type, &s.agent_id)),
                text,
            )
        }
        Some(Payload::PreCompact(c)) => (
            format!("context compaction starting ({})", or(&c.trigger, "auto")),
            clean(sanitizer, &mut report, &c.custom_instructions),
        ),
        Some(Payload::PostCompact(c)) => (
            format!("context compacted ({})", or(&c.trigger, "auto")),
            clean(sanitizer, &mut report, &c.summary),
        ),
        Some(Payload::Stop(s)) => {
            let title = if s.error.is_empty() {
                "turn ended".to_owned()
            } else {
                format!("turn failed: {}", clean(sanitizer, &mut report, &s.error))
            };
            (title, clean(sanitizer, &mut report, &s.last_message))
        }
        Some(Payload::SessionEnd(s)) => (
            format!("session ended ({})", or(&s.reason, "other")),
            String::new(),
        ),
        Some(Payload::Notification(n)) => {
            let message = clean(sanitizer, &mut report, &n.message);
            (first_line(&message), message)
        }
        Some(Payload::Unknown(u)) => {
            let raw = clean_json_text(&u.raw_json, sanitizer, &mut report);
            let body = flatten_json_text(&raw);
            input = Some(raw);
            (format!("{} event", or(&event.host_event, "unknown")), body)
        }
        Some(Payload::Memory(m)) => {
            let text = clean(sanitizer, &mut report, &m.text);
            let title = if m.title.trim().is_empty() {
                first_line(&text)
            } else {
                clean(sanitizer, &mut report, &m.title)
            };
            // The tags travel in `input`, where retrieval reads a memory's files and concepts.
            if !m.concepts.is_empty() || !m.files.is_empty() {
                let mut tags = json!({"concepts": m.concepts, "files": m.files});
                report.merge(sanitizer.clean_json(&mut tags));
                input = Some(tags.to_string());
            }
            (title, text)
        }
        Some(Payload::Workflow(w)) => {
            let situation = clean(sanitizer, &mut report, &w.situation);
            let failed = w.outcome == "failure";
            let title = format!(
                "workflow {}: {}",
                if failed { "failed" } else { "worked" },
                first_line(&situation)
            );
            // The steps, the outcome and its reason travel in `input`, where the pattern
            // service reads a reported run the way it reads a run it found in a session.
            let mut run = json!({
                "steps": w.steps,
                "outcome": if failed { "failure" } else { "success" },
                "reason": w.reason,
                "files": w.files,
            });
            report.merge(sanitizer.clean_json(&mut run));
            input = Some(run.to_string());
            (title, situation)
        }
        // Invalid payloads never reach this point: the worker dead-letters them.
        Some(Payload::Invalid(_)) | None => (
            format!("{} event", or(&event.host_event, "unknown")),
            String::new(),
        ),
    };
    if !event.extra_json.is_empty() {
        let extra = clean_json_text(&event.extra_json, sanitizer, &mut report);
        meta.insert(
            "host_fields".into(),
            serde_json::from_str(&extra).unwrap_or(Value::String(extra)),
        );
    }
    let title = cut(&clean(sanitizer, &mut report, &title), MAX_TITLE_CHARS);
    let body = cut(&body, MAX_BODY_CHARS);
    if report.secrets_redacted > 0 {
        meta.insert("secrets_redacted".into(), json!(report.secrets_redacted));
    }
    if report.private_blocks > 0 {
        meta.insert("private_blocks".into(), json!(report.private_blocks));
    }
    if report.system_tags_stripped > 0 {
        meta.insert(
            "system_tags_stripped".into(),
            json!(report.system_tags_stripped),
        );
    }
    let kind = event.kind();
    // The hook hashes the raw payload; events from elsewhere are hashed on their clean content.
    let content_hash = if !event.content_hash.is_empty() {
        event.content_hash.clone()
    } else {
        sanitize::content_hash(&[
            &event.session_id,
            &event.host_event,
            &event.subagent_id,
            kind,
            &tool_name,
            &tool_use_id,
            &title,
            &body,
            input.as_deref().unwrap_or(""),
            output.as_deref().unwrap_or(""),
        ])
    };
    Observation {
        event_id: event.id.clone(),
        session_id: event.session_id.clone(),
        project: event.project.clone(),
        agent: event.agent().slug().to_owned(),
        author: event.user.clone(),
        kind,
        host_event: event.host_event.clone(),
        tool_name,
        tool_use_id,
        subagent_id: event.subagent_id.clone(),
        title,
        body,
        input,
        output,
        meta: Value::Object(meta),
        content_hash,
        occurred_at: event.occurred_at_ms,
    }
}

struct Tool {
    title: String,
    body: String,
    input: Option<String>,
    output: Option<String>,
}

fn build_tool(
    kind: &str,
    call: &ToolCall,
    sanitizer: &Sanitizer,
    report: &mut Report,
    meta: &mut serde_json::Map<String, Value>,
) -> Tool {
    let mut input: Value = parse_or_string(&call.input_json);
    report.merge(sanitizer.clean_json(&mut input));
    let summary = summarise_input(&call.tool_name, &input);

    let excluded = excluded_path(&call.tool_name, &input, sanitizer);
    let mut response = if kind == "tool_failure" {
        Value::String(call.error.clone())
    } else {
        parse_or_string(&call.response_json)
    };
    if let Some(path) = &excluded {
        // The file matches an exclude glob: keep that the tool ran, drop what it read or wrote.
        if let Value::Object(object) = &mut input {
            for key in CONTENT_KEYS {
                if object.contains_key(key) {
                    object.insert(key.to_owned(), Value::String("[EXCLUDED]".into()));
                }
            }
        }
        response = Value::String(format!("[EXCLUDED: {path} matches an exclude glob]"));
        meta.insert("excluded".into(), Value::String(path.clone()));
    } else {
        report.merge(sanitizer.clean_json(&mut response));
    }
    let output_text = match &response {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => flatten_json(other),
    };
    let (output_text, truncation) = sanitizer.truncate(&output_text);
    // When the hook already shortened the response, its sizes are the original ones.
    let truncation = if call.response_chars > 0 {
        Some(sanitize::Truncation {
            original_chars: call.response_chars as usize,
            original_lines: call.response_lines as usize,
        })
    } else {
        truncation
    };
    if let Some(t) = truncation {
        report.truncated = true;
        meta.insert(
            "truncated".into(),
            json!({"original_chars": t.original_chars, "original_lines": t.original_lines}),
        );
    }
    let (input_text, input_truncation) = sanitizer.truncate(&input.to_string());
    if input_truncation.is_some() {
        meta.insert("input_truncated".into(), Value::Bool(true));
    }

    let verb = match kind {
        "pre_tool" => "",
        "tool_failure" => " failed",
        _ => "",
    };
    let title = if summary.is_empty() {
        format!("{}{verb}", call.tool_name)
    } else {
        format!("{}{verb}: {}", call.tool_name, first_line(&summary))
    };
    let mut body = summary;
    let input_words = flatten_json(&input);
    if !input_words.is_empty() && input_words != body {
        body.push('\n');
        body.push_str(&input_words);
    }
    if !output_text.is_empty() {
        body.push('\n');
        body.push_str(&output_text);
    }
    Tool {
        title,
        body,
        input: (!call.input_json.is_empty()).then_some(input_text),
        output: (!output_text.is_empty()).then_some(output_text),
    }
}

/// The one-line gist of a tool call's input: the command, the file, the pattern, the URL.
fn summarise_input(tool: &str, input: &Value) -> String {
    let field = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let keys: &[&str] = match tool {
        "Bash" | "Shell" | "run_shell_command" => &["command"],
        "Read" | "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => &["file_path", "notebook_path"],
        "Grep" | "Glob" => &["pattern"],
        "WebFetch" => &["url"],
        "WebSearch" => &["query"],
        "Task" | "Agent" => &["description", "prompt"],
        _ => &[
            "command",
            "file_path",
            "path",
            "pattern",
            "query",
            "url",
            "description",
        ],
    };
    keys.iter().find_map(|k| field(k)).unwrap_or_default()
}

/// The path that makes this tool call excluded, if any.
fn excluded_path(tool: &str, input: &Value, sanitizer: &Sanitizer) -> Option<String> {
    for key in PATH_KEYS {
        if let Some(path) = input.get(key).and_then(Value::as_str)
            && sanitizer.is_excluded_path(path)
        {
            return Some(path.to_owned());
        }
    }
    if matches!(tool, "Bash" | "Shell" | "run_shell_command")
        && let Some(command) = input.get("command").and_then(Value::as_str)
    {
        // A shell command that names an excluded file (`cat .env`) may print its content.
        return command
            .split(|c: char| {
                c.is_whitespace() || matches!(c, ';' | '|' | '&' | '<' | '>' | '\'' | '"')
            })
            .find(|word| !word.is_empty() && sanitizer.is_excluded_path(word))
            .map(str::to_owned);
    }
    None
}

fn clean(sanitizer: &Sanitizer, report: &mut Report, text: &str) -> String {
    let (text, r) = sanitizer.clean_text(text);
    report.merge(r);
    text
}

fn parse_or_string(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn clean_json_text(text: &str, sanitizer: &Sanitizer, report: &mut Report) -> String {
    let mut value = parse_or_string(text);
    report.merge(sanitizer.clean_json(&mut value));
    match value {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn flatten_json_text(text: &str) -> String {
    flatten_json(&parse_or_string(text))
}

/// Every string and number inside a JSON value, one per line, keys left out: the words a person
/// would search for.
fn flatten_json(value: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        match value {
            Value::String(s) if !s.is_empty() => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(s);
            }
            Value::Number(n) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&n.to_string());
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(value, &mut out);
    out
}

fn first_line(text: &str) -> String {
    cut(
        text.trim().lines().next().unwrap_or_default(),
        MAX_TITLE_CHARS,
    )
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn or<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sanitizer() -> Sanitizer {
        Sanitizer::new(&sanitize::Config::default()).unwrap()
    }

    fn tool_event(kind: &str, tool: &str, input: &str, response: &str) -> Event {
        let call = ToolCall {
            tool_name: tool.into(),
            tool_use_id: "t1".into(),
            input_json: input.into(),
            response_json: response.into(),
            error: if kind == "tool_failure" {
                response.into()
            } else {
                String::new()
            },
            ..Default::default()
        };
        let payload = match kind {
            "pre_tool" => Payload::PreTool(call),
            "tool_failure" => Payload::ToolFailure(call),
            _ => Payload::PostTool(call),
        };
        Event {
            id: proto::new_event_id(),
            session_id: "s".into(),
            project: "/p".into(),
            agent: proto::Agent::ClaudeCode as i32,
            payload: Some(payload),
            ..Default::default()
        }
    }

    #[test]
    fn tool_calls_get_a_title_body_and_output() {
        let obs = build_observation(
            &tool_event(
                "post_tool",
                "Bash",
                r#"{"command":"cargo test","description":"run tests"}"#,
                r#"{"stdout":"test result: ok","stderr":""}"#,
            ),
            &sanitizer(),
        );
        assert_eq!(obs.kind, "post_tool");
        assert_eq!(obs.title, "Bash: cargo test");
        assert!(
            obs.body.contains("run tests") && obs.body.contains("test result: ok"),
            "{}",
            obs.body
        );
        assert_eq!(obs.output.as_deref(), Some("test result: ok"));
        let failed = build_observation(
            &tool_event(
                "tool_failure",
                "Bash",
                r#"{"command":"cargo build"}"#,
                "error[E0425]: cannot find value",
            ),
            &sanitizer(),
        );
        assert_eq!(failed.title, "Bash failed: cargo build");
        assert!(failed.body.contains("E0425"));
    }

    #[test]
    fn excluded_files_keep_the_call_but_not_the_content() {
        let read = build_observation(
            &tool_event(
                "post_tool",
                "Read",
                r#"{"file_path":"/app/.env.local"}"#,
                r#"{"file":{"content":"DB_HOST=internal"}}"#,
            ),
            &sanitizer(),
        );
        assert!(
            !read.body.contains("internal")
                && !read.output.as_deref().unwrap().contains("internal")
        );
        assert_eq!(read.meta["excluded"], "/app/.env.local");
        let cat = build_observation(
            &tool_event(
                "post_tool",
                "Bash",
                r#"{"command":"cat .env"}"#,
                r#"{"stdout":"HOSTNAME=internal"}"#,
            ),
            &sanitizer(),
        );
        assert!(!cat.body.contains("internal"), "{}", cat.body);
        let write = build_observation(
            &tool_event(
                "pre_tool",
                "Write",
                r#"{"file_path":"/k/server.pem","content":"abc"}"#,
                "",
            ),
            &sanitizer(),
        );
        assert!(!write.input.as_deref().unwrap().contains("abc"));
    }

    #[test]
    fn huge_outputs_are_truncated_with_sizes() {
        let big = "line\n".repeat(50_000);
        let obs = build_observation(
            &tool_event(
                "post_tool",
                "Bash",
                r#"{"command":"yes"}"#,
                &serde_json::to_string(&json!({"stdout": big})).unwrap(),
            ),
            &sanitizer(),
        );
        assert!(obs.output.as_ref().unwrap().chars().count() < 100_000);
        assert_eq!(obs.meta["truncated"]["original_chars"], 250_000);
        assert!(obs.meta["truncated"]["original_lines"].as_u64().unwrap() >= 50_000);
    }

    #[test]
    fn the_content_hash_tells_repeats_from_duplicates() {
        let a = tool_event("post_tool", "Bash", r#"{"command":"ls"}"#, r#""x""#);
        let mut b = a.clone();
        b.id = proto::new_event_id();
        assert_eq!(
            build_observation(&a, &sanitizer()).content_hash,
            build_observation(&b, &sanitizer()).content_hash
        );
        let mut c = a.clone();
        if let Some(Payload::PostTool(call)) = &mut c.payload {
            call.tool_use_id = "t2".into();
        }
        assert_ne!(
            build_observation(&a, &sanitizer()).content_hash,
            build_observation(&c, &sanitizer()).content_hash
        );
    }
}
