//! The Claude Code adapter: hook payload → [`proto::Event`], and context → Claude Code's output.
//!
//! Claude Code sends one JSON object on stdin with `hook_event_name`, `session_id`, `cwd`,
//! `transcript_path` and event-specific fields; unknown events are kept as
//! [`proto::event::Payload::Unknown`], never dropped. Input that is not a JSON object becomes
//! [`proto::event::Payload::Invalid`] so ingest can dead-letter it with the reason.

use proto::event::Payload;
use proto::{Agent, Event};
use serde_json::{Map, Value};
use std::path::Path;

/// The most context Claude Code takes from one hook before it moves it into a file.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// How much of an unparseable payload is kept for the dead-letter record.
const INVALID_EXCERPT_BYTES: usize = 2048;

/// Whether the host can take context back from this event.
pub fn wants_context(event: &Event) -> bool {
    matches!(
        event.payload,
        Some(Payload::SessionStart(_)) | Some(Payload::Prompt(_))
    )
}

/// Normalise a raw Claude Code payload into an event envelope (id and timestamps included).
pub fn normalise(input: &[u8], sanitizer: &sanitize::Sanitizer) -> Event {
    let now = now_ms();
    let mut event = Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: now,
        captured_at_ms: now,
        agent: Agent::ClaudeCode as i32,
        host: hostname(),
        user: std::env::var("USER")
            .or_else(|_| std::env::var("USERNAME"))
            .unwrap_or_default(),
        ..Default::default()
    };
    event.content_hash = sanitize::content_hash(&[&String::from_utf8_lossy(input)]);
    let mut object = match parse_object(input) {
        Ok(object) => object,
        Err(reason) => {
            let end = input.len().min(INVALID_EXCERPT_BYTES);
            let (excerpt, _) = sanitizer.clean_text(&String::from_utf8_lossy(&input[..end]));
            event.payload = Some(Payload::Invalid(proto::Invalid {
                reason,
                excerpt,
                size_bytes: input.len() as u64,
            }));
            event.cwd = current_dir();
            event.project = project_of(&event.cwd);
            return event;
        }
    };
    // Secrets, private blocks and system tags are scrubbed before the event can reach the
    // spool or the NATS store, both of which are on disk.
    let mut value = Value::Object(std::mem::take(&mut object));
    sanitizer.clean_json(&mut value);
    let Value::Object(mut object) = value else {
        unreachable!("cleaning keeps the object")
    };
    fill(&mut event, &mut object, sanitizer);
    event
}

fn parse_object(input: &[u8]) -> Result<Map<String, Value>, String> {
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err("empty payload".to_owned());
    }
    let text = std::str::from_utf8(input)
        .map_err(|e| format!("payload is not valid utf-8 at byte {}", e.valid_up_to()))?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(format!(
            "payload is a json {}, not an object",
            type_name(&other)
        )),
        Err(e) if e.to_string().contains("recursion limit") => {
            Err("payload nests deeper than 128 levels".to_owned())
        }
        Err(e) => Err(format!("payload is not valid json: {e}")),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Take `key` out of the payload as a string (numbers and booleans are rendered).
fn take_str(object: &mut Map<String, Value>, key: &str) -> String {
    match object.remove(key) {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn take_bool(object: &mut Map<String, Value>, key: &str) -> bool {
    matches!(object.remove(key), Some(Value::Bool(true)))
}

fn take_i64(object: &mut Map<String, Value>, key: &str) -> i64 {
    object
        .remove(key)
        .and_then(|v| v.as_f64())
        .map_or(0, |v| v as i64)
}

/// Shorten every string longer than the sanitizer's limit inside `value` to a head and a tail,
/// keeping the JSON valid; returns the largest string's original size when any was shortened.
fn shorten_strings(
    value: &mut Value,
    sanitizer: &sanitize::Sanitizer,
) -> Option<sanitize::Truncation> {
    let mut largest: Option<sanitize::Truncation> = None;
    let mut visit = |s: &mut String| {
        if let (short, Some(t)) = sanitizer.truncate(s) {
            *s = short;
            if largest
                .as_ref()
                .is_none_or(|l| l.original_chars < t.original_chars)
            {
                largest = Some(t);
            }
        }
    };
    fn walk(value: &mut Value, visit: &mut impl FnMut(&mut String)) {
        match value {
            Value::String(s) => visit(s),
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, visit)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, visit)),
            _ => {}
        }
    }
    walk(value, &mut visit);
    largest
}

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    let name = take_str(object, "hook_event_name");
    event.session_id = take_str(object, "session_id");
    event.transcript_path = take_str(object, "transcript_path");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        event.cwd = std::env::var("CLAUDE_PROJECT_DIR").unwrap_or_else(|_| current_dir());
    }
    event.project = project_of(&event.cwd);
    event.permission_mode = take_str(object, "permission_mode");
    event.model = take_str(object, "model");
    event.subagent_id = take_str(object, "agent_id");
    event.subagent_type = take_str(object, "agent_type");

    let tool = |object: &mut Map<String, Value>| {
        let mut input = object.remove("tool_input").unwrap_or(Value::Null);
        let mut response = object.remove("tool_response").unwrap_or(Value::Null);
        shorten_strings(&mut input, sanitizer);
        let original = shorten_strings(&mut response, sanitizer);
        let json = |v: Value| {
            if v.is_null() {
                String::new()
            } else {
                v.to_string()
            }
        };
        proto::ToolCall {
            tool_name: take_str(object, "tool_name"),
            tool_use_id: take_str(object, "tool_use_id"),
            input_json: json(input),
            response_json: json(response),
            error: take_str(object, "error"),
            is_interrupt: take_bool(object, "is_interrupt"),
            duration_ms: take_i64(object, "duration_ms"),
            response_chars: original.map_or(0, |t| t.original_chars as u64),
            response_lines: original.map_or(0, |t| t.original_lines as u64),
        }
    };
    let payload = match name.as_str() {
        "SessionStart" => Payload::SessionStart(proto::SessionStart {
            source: take_str(object, "source"),
        }),
        "UserPromptSubmit" => Payload::Prompt(proto::Prompt {
            text: take_str(object, "prompt"),
        }),
        "PreToolUse" => Payload::PreTool(tool(object)),
        "PostToolUse" => Payload::PostTool(tool(object)),
        "PostToolUseFailure" => Payload::ToolFailure(tool(object)),
        "SubagentStart" | "SubagentStop" => {
            let subagent = proto::Subagent {
                agent_id: event.subagent_id.clone(),
                agent_type: event.subagent_type.clone(),
                transcript_path: take_str(object, "agent_transcript_path"),
                last_message: take_str(object, "last_assistant_message"),
            };
            if name == "SubagentStart" {
                Payload::SubagentStart(subagent)
            } else {
                Payload::SubagentStop(subagent)
            }
        }
        "PreCompact" | "PostCompact" => {
            let compact = proto::Compact {
                trigger: take_str(object, "trigger"),
                custom_instructions: take_str(object, "custom_instructions"),
                summary: take_str(object, "compact_summary"),
                tokens_before: 0,
                tokens_after: 0,
            };
            if name == "PreCompact" {
                Payload::PreCompact(compact)
            } else {
                Payload::PostCompact(compact)
            }
        }
        "Stop" | "StopFailure" => Payload::Stop(proto::Stop {
            stop_hook_active: take_bool(object, "stop_hook_active"),
            last_message: take_str(object, "last_assistant_message"),
            error: take_str(object, "error"),
        }),
        "SessionEnd" => Payload::SessionEnd(proto::SessionEnd {
            reason: take_str(object, "reason"),
        }),
        "Notification" => Payload::Notification(proto::Notification {
            message: take_str(object, "message"),
            title: take_str(object, "title"),
            notification_type: take_str(object, "notification_type"),
        }),
        "" => Payload::Invalid(proto::Invalid {
            reason: "payload has no hook_event_name".to_owned(),
            excerpt: String::new(),
            size_bytes: 0,
        }),
        _ => Payload::Unknown(proto::Unknown {
            raw_json: Value::Object(std::mem::take(object)).to_string(),
        }),
    };
    event.host_event = name;
    if !object.is_empty() {
        event.extra_json = Value::Object(std::mem::take(object)).to_string();
    }
    event.payload = Some(payload);
}

/// Claude Code's output for context, or `None` when there is nothing to say (print nothing).
pub fn render_context(event: &Event, context: &str) -> Option<String> {
    let context = context.trim();
    if context.is_empty() || !wants_context(event) {
        return None;
    }
    let context = cut_chars(context, MAX_CONTEXT_CHARS);
    let output = serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": event.host_event,
            "additionalContext": context,
        }
    });
    Some(output.to_string())
}

/// The first `max` characters of `text`.
fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The git root containing `cwd`, or `cwd` itself outside git.
pub fn project_of(cwd: &str) -> String {
    if cwd.is_empty() {
        return String::new();
    }
    let mut dir = Some(Path::new(cwd));
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.to_string_lossy().into_owned();
        }
        dir = d.parent();
    }
    cwd.to_owned()
}

fn current_dir() -> String {
    std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn hostname() -> String {
    if let Ok(name) = std::env::var("HOSTNAME") {
        return name;
    }
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalise_str(input: &str) -> Event {
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
        normalise(input.as_bytes(), &sanitizer)
    }

    #[test]
    fn every_claude_code_event_maps_to_its_kind() {
        let cases = [
            ("SessionStart", "session_start"),
            ("UserPromptSubmit", "prompt"),
            ("PreToolUse", "pre_tool"),
            ("PostToolUse", "post_tool"),
            ("PostToolUseFailure", "tool_failure"),
            ("SubagentStart", "subagent_start"),
            ("SubagentStop", "subagent_stop"),
            ("PreCompact", "pre_compact"),
            ("PostCompact", "post_compact"),
            ("Stop", "stop"),
            ("StopFailure", "stop"),
            ("SessionEnd", "session_end"),
            ("Notification", "notification"),
            ("TeammateIdle", "other"),
        ];
        for (name, kind) in cases {
            let event = normalise_str(&format!(
                r#"{{"hook_event_name":"{name}","session_id":"s1","cwd":"/tmp"}}"#
            ));
            assert_eq!(event.kind(), kind, "{name}");
            assert_eq!(event.host_event, name);
            assert_eq!(event.session_id, "s1");
            assert!(proto::is_valid_event_id(&event.id));
        }
    }

    #[test]
    fn tool_calls_keep_input_response_and_extra_fields() {
        let event = normalise_str(
            r#"{"hook_event_name":"PostToolUse","session_id":"s","cwd":"/tmp","tool_name":"Bash",
               "tool_input":{"command":"ls"},"tool_response":{"stdout":"a\nb"},"tool_use_id":"t1",
               "duration_ms":12,"brand_new_field":[1,2]}"#,
        );
        let Some(Payload::PostTool(call)) = &event.payload else {
            panic!("{event:?}")
        };
        assert_eq!(call.tool_name, "Bash");
        assert_eq!(call.tool_use_id, "t1");
        assert_eq!(call.input_json, r#"{"command":"ls"}"#);
        assert_eq!(call.response_json, r#"{"stdout":"a\nb"}"#);
        assert_eq!(call.duration_ms, 12);
        assert_eq!(event.extra_json, r#"{"brand_new_field":[1,2]}"#);
    }

    #[test]
    fn unknown_events_are_kept_whole() {
        let event =
            normalise_str(r#"{"hook_event_name":"FileChanged","session_id":"s","file_path":"/a"}"#);
        let Some(Payload::Unknown(unknown)) = &event.payload else {
            panic!("{event:?}")
        };
        assert!(unknown.raw_json.contains("/a"));
    }

    #[test]
    fn malformed_input_becomes_invalid_with_a_reason() {
        let cases: [(&[u8], &str); 6] = [
            (b"", "empty payload"),
            (b"{\"hook_event_name\": ", "not valid json"),
            (b"[1,2]", "json array, not an object"),
            (b"{\"a\":\"\xff\xfe\"}", "not valid utf-8"),
            (b"{\"session_id\":\"s\"}", "no hook_event_name"),
            (&[b'['; 200], "deeper than 128"),
        ];
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
        for (input, reason) in cases {
            let event = normalise(input, &sanitizer);
            let Some(Payload::Invalid(invalid)) = &event.payload else {
                panic!("{event:?}")
            };
            assert!(
                invalid.reason.contains(reason),
                "{} vs {reason}",
                invalid.reason
            );
        }
    }

    #[test]
    fn secrets_are_scrubbed_before_the_event_leaves_the_hook() {
        let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
        let event = normalise_str(&format!(
            r#"{{"hook_event_name":"UserPromptSubmit","session_id":"s","prompt":"use {token} <private>my diary</private>"}}"#
        ));
        let Some(Payload::Prompt(prompt)) = &event.payload else {
            panic!("{event:?}")
        };
        assert!(!prompt.text.contains(&token), "{}", prompt.text);
        assert!(!prompt.text.contains("diary"), "{}", prompt.text);
        assert!(prompt.text.contains("[PRIVATE]"), "{}", prompt.text);
    }

    #[test]
    fn context_output_follows_the_claude_code_contract() {
        let start = normalise_str(r#"{"hook_event_name":"SessionStart","session_id":"s"}"#);
        let out = render_context(&start, &"é".repeat(20_000)).unwrap();
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["hookSpecificOutput"]["hookEventName"], "SessionStart");
        let text = value["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert_eq!(text.chars().count(), MAX_CONTEXT_CHARS);
        assert_eq!(render_context(&start, "  "), None);
        let tool = normalise_str(r#"{"hook_event_name":"PostToolUse","session_id":"s"}"#);
        assert_eq!(render_context(&tool, "something"), None);
    }

    #[test]
    fn project_is_the_git_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
        std::fs::create_dir_all(dir.path().join("repo/src/deep")).unwrap();
        let cwd = dir.path().join("repo/src/deep");
        assert_eq!(
            project_of(cwd.to_str().unwrap()),
            dir.path().join("repo").to_str().unwrap()
        );
        let plain = dir.path().join("elsewhere");
        assert_eq!(project_of(plain.to_str().unwrap()), plain.to_str().unwrap());
    }
}
