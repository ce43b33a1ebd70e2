//! The Kimi Code CLI adapter (`kimi-code`, and the older Python `kimi-cli`, which sends a
//! subset of the same events with the same field names).
//!
//! Payloads carry `hook_event_name` (PascalCase), `session_id` and `cwd`, and no transcript
//! path. Differences from Claude Code: `prompt` on UserPromptSubmit is a list of content
//! parts (the text parts are joined into the prompt, the others kept as `prompt_parts`), tool
//! calls have `tool_call_id` and `tool_output`, a failed call's `error` is an object, and
//! compactions carry token counts.
//!
//! Only UserPromptSubmit can inject context, and Kimi injects its stdout verbatim (parsing it
//! only when it is a JSON object with `message`), so the output is plain text and only ever on
//! a prompt. SessionStart output is dropped by Kimi, so the session-start context goes out
//! with the first prompt of each session instead: a marker file per session in the hook's
//! state directory records that the first prompt has been served; SessionStart (a new or
//! resumed session) and SessionEnd remove it.

use crate::adapter::{self, Adapter, ToolKeys, Want, take_i64, take_str};
use proto::Event;
use proto::event::Payload;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// No cap is documented; this keeps one injection to a few thousand tokens, like the others.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// How Kimi Code payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_CHARS,
    fill,
    wants,
    render,
};

const TOOL_KEYS: ToolKeys = ToolKeys {
    name: "tool_name",
    id: "tool_call_id",
    input: "tool_input",
    response: "tool_output",
    error: "error",
    duration_ms: "duration_ms",
};

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    let name = take_str(object, "hook_event_name");
    event.session_id = take_str(object, "session_id");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        event.cwd = adapter::current_dir();
    }
    event.model = take_str(object, "model");
    let payload = match name.as_str() {
        "SessionStart" => Payload::SessionStart(proto::SessionStart {
            source: take_str(object, "source"),
        }),
        "UserPromptSubmit" => {
            let (text, others) = flatten_prompt(object.remove("prompt"));
            if !others.is_empty() {
                object.insert("prompt_parts".to_owned(), Value::Array(others));
            }
            Payload::Prompt(proto::Prompt { text })
        }
        "PreToolUse" => Payload::PreTool(adapter::take_tool(object, &TOOL_KEYS, sanitizer)),
        "PostToolUse" => Payload::PostTool(adapter::take_tool(object, &TOOL_KEYS, sanitizer)),
        "PostToolUseFailure" => {
            Payload::ToolFailure(adapter::take_tool(object, &TOOL_KEYS, sanitizer))
        }
        "SubagentStart" | "SubagentStop" => {
            event.subagent_type = take_str(object, "agent_name");
            let subagent = proto::Subagent {
                agent_id: String::new(),
                agent_type: event.subagent_type.clone(),
                transcript_path: String::new(),
                last_message: take_str(object, "response"),
            };
            adapter::subagent(name == "SubagentStart", subagent)
        }
        "PreCompact" => Payload::PreCompact(proto::Compact {
            trigger: take_str(object, "trigger"),
            tokens_before: take_i64(object, "token_count"),
            ..Default::default()
        }),
        // Live payloads carry no summary or answer text; imported sessions do.
        "PostCompact" => Payload::PostCompact(proto::Compact {
            trigger: take_str(object, "trigger"),
            tokens_after: take_i64(object, "estimated_token_count"),
            summary: take_str(object, "compact_summary"),
            ..Default::default()
        }),
        "Stop" => Payload::Stop(proto::Stop {
            stop_hook_active: adapter::take_bool(object, "stop_hook_active"),
            last_message: take_str(object, "last_assistant_message"),
            ..Default::default()
        }),
        "StopFailure" => {
            let kind = take_str(object, "error_type");
            let message = take_str(object, "error_message");
            Payload::Stop(proto::Stop {
                error: [kind, message]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": "),
                ..Default::default()
            })
        }
        "SessionEnd" => Payload::SessionEnd(proto::SessionEnd {
            reason: take_str(object, "reason"),
        }),
        "Notification" => Payload::Notification(proto::Notification {
            message: take_str(object, "body"),
            title: take_str(object, "title"),
            notification_type: take_str(object, "notification_type"),
        }),
        "" => adapter::no_event_name(),
        _ => adapter::unknown(object),
    };
    // Kimi numbers turns; the id is kept where the event has one.
    if let Some(turn) = object.remove("turn_id") {
        event.turn_id = match turn {
            Value::String(s) => s,
            other => other.to_string(),
        };
    }
    event.host_event = name;
    event.payload = Some(payload);
}

/// The text of a prompt given as a string or as content parts, and the non-text parts.
pub fn flatten_prompt(prompt: Option<Value>) -> (String, Vec<Value>) {
    match prompt {
        Some(Value::String(text)) => (text, Vec::new()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            let mut others = Vec::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(text))) => texts.push(text.clone()),
                    // Thinking is not something the user said.
                    (Some("think"), _) => {}
                    _ => others.push(part),
                }
            }
            (texts.join("\n"), others)
        }
        Some(Value::Null) | None => (String::new(), Vec::new()),
        Some(other) => (other.to_string(), Vec::new()),
    }
}

/// The marker recording that a session's first prompt has had the session-start context.
fn marker(state: &Path, session_id: &str) -> PathBuf {
    let safe: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    state.join("kimi-first-prompt").join(safe)
}

fn wants(event: &Event, state: &Path) -> Want {
    if event.session_id.is_empty() {
        return match event.payload {
            Some(Payload::Prompt(_)) => Want::Prompt,
            _ => Want::Nothing,
        };
    }
    let marker = marker(state, &event.session_id);
    match event.payload {
        Some(Payload::SessionStart(_) | Payload::SessionEnd(_)) => {
            let _ = std::fs::remove_file(&marker);
            Want::Nothing
        }
        Some(Payload::Prompt(_)) => {
            let _ = std::fs::create_dir_all(marker.parent().unwrap_or(state));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&marker)
            {
                Ok(_) => Want::StartAndPrompt,
                Err(_) => Want::Prompt,
            }
        }
        _ => Want::Nothing,
    }
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    let context = context.map(str::trim).filter(|c| !c.is_empty())?;
    if !matches!(event.payload, Some(Payload::Prompt(_))) {
        return None;
    }
    let context = adapter::cut_chars(context, MAX_CONTEXT_CHARS);
    // Kimi reads stdout that is a JSON object as its own output format; context that happens
    // to look like JSON gets a plain first line so it is injected as the text it is.
    if context.starts_with(['{', '[']) {
        return Some(format!("Memory from mneme:\n{context}"));
    }
    Some(context.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalise(input: &str) -> Event {
        adapter::normalise_default(&crate::kimi::HOST, input)
    }

    #[test]
    fn prompt_parts_are_flattened_and_the_rest_kept() {
        let event = normalise(
            r#"{"hook_event_name":"UserPromptSubmit","session_id":"k1","cwd":"/tmp",
               "client_type":"kimi_code_cli","is_steer":false,
               "prompt":[{"type":"text","text":"fix the bug"},
                         {"type":"image_url","imageUrl":{"url":"file:///a.png"}},
                         {"type":"text","text":"in login"}]}"#,
        );
        let Some(Payload::Prompt(prompt)) = &event.payload else {
            panic!("{event:?}")
        };
        assert_eq!(prompt.text, "fix the bug\nin login");
        let extra: Value = serde_json::from_str(&event.extra_json).unwrap();
        assert_eq!(extra["prompt_parts"][0]["type"], "image_url");
        assert_eq!(extra["client_type"], "kimi_code_cli");
    }

    #[test]
    fn tool_output_and_structured_errors_are_read() {
        let post = normalise(
            r#"{"hook_event_name":"PostToolUse","session_id":"k","cwd":"/tmp","tool_name":"Bash",
               "tool_input":{"command":"ls"},"tool_call_id":"c1","tool_output":"a\nb"}"#,
        );
        let Some(Payload::PostTool(call)) = &post.payload else {
            panic!("{post:?}")
        };
        assert_eq!(
            (call.tool_use_id.as_str(), call.response_json.as_str()),
            ("c1", r#""a\nb""#)
        );
        let failed = normalise(
            r#"{"hook_event_name":"PostToolUseFailure","session_id":"k","tool_name":"Bash",
               "tool_call_id":"c2","error":{"code":"E","message":"exit 1","retryable":false}}"#,
        );
        let Some(Payload::ToolFailure(call)) = &failed.payload else {
            panic!("{failed:?}")
        };
        assert_eq!(call.error, "exit 1");
    }

    #[test]
    fn start_context_goes_out_with_the_first_prompt_only() {
        let state = tempfile::tempdir().unwrap();
        let start = normalise(r#"{"hook_event_name":"SessionStart","session_id":"k"}"#);
        let prompt = normalise(r#"{"hook_event_name":"UserPromptSubmit","session_id":"k"}"#);
        assert_eq!(wants(&start, state.path()), Want::Nothing);
        assert_eq!(wants(&prompt, state.path()), Want::StartAndPrompt);
        assert_eq!(wants(&prompt, state.path()), Want::Prompt);
        // A resumed session starts again and gets the start context again.
        assert_eq!(wants(&start, state.path()), Want::Nothing);
        assert_eq!(wants(&prompt, state.path()), Want::StartAndPrompt);
        assert_eq!(render(&start, Some("ctx")), None);
        assert_eq!(render(&prompt, Some("  ctx \n")).as_deref(), Some("ctx"));
        assert_eq!(render(&prompt, Some("")), None);
    }
}
