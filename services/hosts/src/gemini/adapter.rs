//! The Gemini CLI adapter.
//!
//! Gemini sends `session_id`, `transcript_path`, `cwd`, `hook_event_name` and `timestamp` on
//! every event, with its own event names: `BeforeAgent` is the prompt, `AfterAgent` the end of
//! a turn, `BeforeTool`/`AfterTool` the tool calls (a failed call has `tool_response.error`),
//! `PreCompress` the compaction.
//!
//! Gemini parses stdout as one JSON object (plain text becomes a message to the user, never
//! context) and treats an exit code of 2 or more with text as a block, so the hook always
//! exits 0 and prints exactly one JSON object: `{}` when there is nothing to say, and
//! `hookSpecificOutput.additionalContext` on SessionStart and BeforeAgent, the two events
//! whose context reaches the model before it answers.

use crate::adapter::{self, Adapter, CLAUDE_TOOL_KEYS, Want, take_str};
use proto::Event;
use proto::event::Payload;
use serde_json::{Map, Value};
use std::path::Path;

/// No cap is documented; this keeps one injection to a few thousand tokens, like the others.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// How Gemini CLI payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_CHARS,
    fill,
    wants,
    render,
};

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    let name = take_str(object, "hook_event_name");
    event.session_id = take_str(object, "session_id");
    event.transcript_path = take_str(object, "transcript_path");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        event.cwd = std::env::var("GEMINI_PROJECT_DIR").unwrap_or_else(|_| adapter::current_dir());
    }
    let payload = match name.as_str() {
        "SessionStart" => Payload::SessionStart(proto::SessionStart {
            source: take_str(object, "source"),
        }),
        "SessionEnd" => Payload::SessionEnd(proto::SessionEnd {
            reason: take_str(object, "reason"),
        }),
        "BeforeAgent" => Payload::Prompt(proto::Prompt {
            text: take_str(object, "prompt"),
        }),
        "AfterAgent" => Payload::Stop(proto::Stop {
            stop_hook_active: adapter::take_bool(object, "stop_hook_active"),
            last_message: take_str(object, "prompt_response"),
            error: String::new(),
        }),
        "BeforeTool" => Payload::PreTool(adapter::take_tool(object, &CLAUDE_TOOL_KEYS, sanitizer)),
        "AfterTool" => {
            let mut call = adapter::take_tool(object, &CLAUDE_TOOL_KEYS, sanitizer);
            let error = serde_json::from_str::<Value>(&call.response_json)
                .ok()
                .and_then(|r| r.get("error").cloned())
                .filter(|e| !e.is_null());
            match error {
                Some(error) => {
                    call.error = match error {
                        Value::String(s) => s,
                        Value::Object(map) => map
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .unwrap_or_else(|| Value::Object(map).to_string()),
                        other => other.to_string(),
                    };
                    Payload::ToolFailure(call)
                }
                None => Payload::PostTool(call),
            }
        }
        "PreCompress" => Payload::PreCompact(proto::Compact {
            trigger: take_str(object, "trigger"),
            ..Default::default()
        }),
        "Notification" => Payload::Notification(proto::Notification {
            message: take_str(object, "message"),
            title: String::new(),
            notification_type: take_str(object, "notification_type"),
        }),
        "" => adapter::no_event_name(),
        _ => adapter::unknown(object),
    };
    event.host_event = name;
    event.payload = Some(payload);
}

fn wants(event: &Event, state: &Path) -> Want {
    adapter::wants_start_or_prompt(event, state)
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    let context = context.map(str::trim).filter(|c| !c.is_empty());
    match context {
        Some(context) if adapter::is_start_or_prompt(event) => Some(adapter::hook_specific_output(
            &event.host_event,
            adapter::cut_chars(context, MAX_CONTEXT_CHARS),
        )),
        _ => Some("{}".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalise(input: &str) -> Event {
        adapter::normalise_default(&crate::gemini::HOST, input)
    }

    #[test]
    fn gemini_names_map_and_a_tool_error_is_a_failure() {
        for (name, kind) in [
            ("SessionStart", "session_start"),
            ("BeforeAgent", "prompt"),
            ("AfterAgent", "stop"),
            ("BeforeTool", "pre_tool"),
            ("AfterTool", "post_tool"),
            ("PreCompress", "pre_compact"),
            ("SessionEnd", "session_end"),
            ("Notification", "notification"),
            ("BeforeModel", "other"),
        ] {
            let event = normalise(&format!(
                r#"{{"hook_event_name":"{name}","session_id":"g","cwd":"/tmp","timestamp":"2026-08-21T10:00:00Z"}}"#
            ));
            assert_eq!(event.kind(), kind, "{name}");
        }
        let failed = normalise(
            r#"{"hook_event_name":"AfterTool","session_id":"g","tool_name":"run_shell_command",
               "tool_input":{"command":"false"},
               "tool_response":{"llmContent":"","returnDisplay":"","error":{"message":"exit 1"}}}"#,
        );
        let Some(Payload::ToolFailure(call)) = &failed.payload else {
            panic!("{failed:?}")
        };
        assert_eq!(call.error, "exit 1");
    }

    #[test]
    fn output_is_always_one_json_object() {
        let prompt = normalise(r#"{"hook_event_name":"BeforeAgent","session_id":"g"}"#);
        let out = render(&prompt, Some("remember this")).unwrap();
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
        assert_eq!(render(&prompt, None).as_deref(), Some("{}"));
        let tool = normalise(r#"{"hook_event_name":"AfterTool","session_id":"g"}"#);
        assert_eq!(render(&tool, Some("x")).as_deref(), Some("{}"));
    }
}
