//! The Claude Code adapter: hook payload → [`proto::Event`], and context → Claude Code's output.
//!
//! Claude Code sends one JSON object on stdin with `hook_event_name`, `session_id`, `cwd`,
//! `transcript_path` and event-specific fields; unknown events are kept as
//! [`proto::event::Payload::Unknown`], never dropped. Input that is not a JSON object becomes
//! [`proto::event::Payload::Invalid`] so ingest can dead-letter it with the reason.
//!
//! Cursor can run Claude Code's hooks too (its "third-party hooks" setting). Such a run is
//! recognised by Cursor's `cursor_version` field or `CURSOR_VERSION` variable and recorded
//! under Cursor, the host that really ran it; the hook client drops it altogether when
//! mneme's own Cursor hooks are installed, since those capture the same action.

use crate::adapter::{self, Adapter, CLAUDE_TOOL_KEYS, take_bool, take_str};
use proto::event::Payload;
use proto::{Agent, Event};
use serde_json::{Map, Value};

pub use crate::adapter::project_of;

/// The most context Claude Code takes from one hook before it moves it into a file.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// How Claude Code payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_CHARS,
    fill,
    wants: adapter::wants_start_or_prompt,
    render,
};

/// Whether the host can take context back from this event.
pub fn wants_context(event: &Event) -> bool {
    adapter::is_start_or_prompt(event)
}

/// Normalise a raw Claude Code payload into an event envelope (id and timestamps included).
pub fn normalise(input: &[u8], sanitizer: &sanitize::Sanitizer) -> Event {
    adapter::normalise(&super::HOST, input, sanitizer)
}

/// Whether this payload was sent by Cursor running Claude Code's hooks.
pub fn is_cursor_run(object: &Map<String, Value>) -> bool {
    object.contains_key("cursor_version")
        || std::env::var_os("CURSOR_VERSION").is_some_and(|v| !v.is_empty())
}

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    if is_cursor_run(object) {
        event.agent = Agent::Cursor as i32;
        let name = object
            .get("hook_event_name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Cursor's own event names are camelCase; those payloads have Cursor's shape.
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            (crate::cursor::HOST.adapter.fill)(event, object, sanitizer);
            return;
        }
    }
    fill_claude_shaped(event, object, sanitizer);
}

/// Map a payload with Claude Code's field names (Codex sends the same shape).
pub fn fill_claude_shaped(
    event: &mut Event,
    object: &mut Map<String, Value>,
    sanitizer: &sanitize::Sanitizer,
) {
    let name = take_str(object, "hook_event_name");
    event.session_id = take_str(object, "session_id");
    event.transcript_path = take_str(object, "transcript_path");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        event.cwd = std::env::var("CLAUDE_PROJECT_DIR").unwrap_or_else(|_| adapter::current_dir());
    }
    event.permission_mode = take_str(object, "permission_mode");
    event.model = take_str(object, "model");
    event.subagent_id = take_str(object, "agent_id");
    event.subagent_type = take_str(object, "agent_type");

    let payload = match name.as_str() {
        "SessionStart" => Payload::SessionStart(proto::SessionStart {
            source: take_str(object, "source"),
        }),
        "UserPromptSubmit" => Payload::Prompt(proto::Prompt {
            text: take_str(object, "prompt"),
        }),
        "PreToolUse" => Payload::PreTool(adapter::take_tool(object, &CLAUDE_TOOL_KEYS, sanitizer)),
        "PostToolUse" => {
            Payload::PostTool(adapter::take_tool(object, &CLAUDE_TOOL_KEYS, sanitizer))
        }
        "PostToolUseFailure" => {
            Payload::ToolFailure(adapter::take_tool(object, &CLAUDE_TOOL_KEYS, sanitizer))
        }
        "SubagentStart" | "SubagentStop" => {
            let subagent = proto::Subagent {
                agent_id: event.subagent_id.clone(),
                agent_type: event.subagent_type.clone(),
                transcript_path: take_str(object, "agent_transcript_path"),
                last_message: take_str(object, "last_assistant_message"),
            };
            adapter::subagent(name == "SubagentStart", subagent)
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
        "" => adapter::no_event_name(),
        _ => adapter::unknown(object),
    };
    event.host_event = name;
    event.payload = Some(payload);
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    if event.agent == Agent::Cursor as i32 {
        // Cursor ran this hook and reads its output as Cursor output: `{}` says nothing.
        return Some("{}".to_owned());
    }
    render_context(event, context.unwrap_or_default())
}

/// Claude Code's output for context, or `None` when there is nothing to say (print nothing).
pub fn render_context(event: &Event, context: &str) -> Option<String> {
    let context = context.trim();
    if context.is_empty() || !wants_context(event) {
        return None;
    }
    let context = adapter::cut_chars(context, MAX_CONTEXT_CHARS);
    Some(adapter::hook_specific_output(&event.host_event, context))
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
