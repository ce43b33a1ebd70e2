//! The Cursor adapter (the editor's agent and the `cursor-agent` CLI).
//!
//! Cursor names its events in camelCase (`sessionStart`, `beforeSubmitPrompt`, `preToolUse`,
//! …), keys sessions by `conversation_id` and turns by `generation_id`, may send an empty
//! `cwd` (the project is then `workspace_roots[0]`), and sends a tool's output as a JSON
//! string in `tool_output`.
//!
//! Cursor wants JSON on stdout on every path, so the output is `{}` whenever there is nothing
//! to say. Context reaches the model only at session start, as `additional_context` (honoured
//! by some Cursor versions and not others); there is no per-prompt injection. With
//! `MNEME_CURSOR_RULES=1` the session-start context is also written to the project's
//! `.cursor/rules/mneme.mdc`, which Cursor includes in every chat, and refreshed at each stop.

use crate::adapter::{self, Adapter, ToolKeys, Want, take_first, take_i64, take_str};
use proto::Event;
use proto::event::Payload;
use serde_json::{Map, Value};
use std::path::Path;

/// No cap is documented; this keeps one injection to a few thousand tokens, like the others.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// The rules file written when `MNEME_CURSOR_RULES=1`, relative to the project.
pub const RULES_FILE: &str = ".cursor/rules/mneme.mdc";

/// How Cursor payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_CHARS,
    fill,
    wants,
    render,
};

const TOOL_KEYS: ToolKeys = ToolKeys {
    name: "tool_name",
    id: "tool_use_id",
    input: "tool_input",
    response: "tool_output",
    error: "error_message",
    duration_ms: "duration",
};

/// Every event name Cursor accepts in `hooks.json` (an unknown one makes it reject the file).
pub const EVENTS: [&str; 21] = [
    "sessionStart",
    "sessionEnd",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStart",
    "subagentStop",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeSubmitPrompt",
    "preCompact",
    "stop",
    "afterAgentResponse",
    "afterAgentThought",
    "beforeTabFileRead",
    "afterTabFileEdit",
    "workspaceOpen",
];

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    let name = take_str(object, "hook_event_name");
    event.session_id = take_first(object, &["conversation_id", "session_id"]);
    event.turn_id = take_str(object, "generation_id");
    event.model = take_str(object, "model");
    event.agent_version = take_str(object, "cursor_version");
    event.transcript_path = take_str(object, "transcript_path");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        // Session events carry no cwd and tool events may carry an empty one.
        event.cwd = object
            .get("workspace_roots")
            .and_then(|roots| roots.get(0))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| std::env::var("CURSOR_PROJECT_DIR").ok())
            .unwrap_or_else(adapter::current_dir);
    }
    let payload = match name.as_str() {
        "sessionStart" => Payload::SessionStart(proto::SessionStart::default()),
        "sessionEnd" => Payload::SessionEnd(proto::SessionEnd {
            reason: take_str(object, "reason"),
        }),
        "beforeSubmitPrompt" => Payload::Prompt(proto::Prompt {
            text: take_str(object, "prompt"),
        }),
        "preToolUse" => Payload::PreTool(adapter::take_tool(object, &TOOL_KEYS, sanitizer)),
        "postToolUse" => Payload::PostTool(adapter::take_tool(object, &TOOL_KEYS, sanitizer)),
        "postToolUseFailure" => {
            Payload::ToolFailure(adapter::take_tool(object, &TOOL_KEYS, sanitizer))
        }
        "subagentStart" | "subagentStop" => {
            event.subagent_id = take_str(object, "subagent_id");
            event.subagent_type = take_str(object, "subagent_type");
            let subagent = proto::Subagent {
                agent_id: event.subagent_id.clone(),
                agent_type: event.subagent_type.clone(),
                transcript_path: take_str(object, "agent_transcript_path"),
                last_message: take_str(object, "summary"),
            };
            adapter::subagent(name == "subagentStart", subagent)
        }
        "preCompact" => Payload::PreCompact(proto::Compact {
            trigger: take_str(object, "trigger"),
            tokens_before: take_i64(object, "context_tokens"),
            ..Default::default()
        }),
        "stop" => {
            let status = object.get("status").and_then(Value::as_str).unwrap_or("");
            Payload::Stop(proto::Stop {
                error: if status == "error" {
                    "error".to_owned()
                } else {
                    String::new()
                },
                ..Default::default()
            })
        }
        "" => adapter::no_event_name(),
        _ => adapter::unknown(object),
    };
    event.host_event = name;
    event.payload = Some(payload);
}

/// Whether the opt-in rules-file fallback is on.
fn rules_enabled() -> bool {
    std::env::var("MNEME_CURSOR_RULES").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn wants(event: &Event, _state: &Path) -> Want {
    match event.payload {
        Some(Payload::SessionStart(_)) => Want::SessionStart,
        Some(Payload::Stop(_)) if rules_enabled() => Want::SessionStart,
        _ => Want::Nothing,
    }
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    let context = context.map(str::trim).filter(|c| !c.is_empty());
    if let Some(context) = context
        && rules_enabled()
        && !event.project.is_empty()
    {
        write_rules(Path::new(&event.project), context);
    }
    match (context, &event.payload) {
        (Some(context), Some(Payload::SessionStart(_))) => Some(
            serde_json::json!({
                "additional_context": adapter::cut_chars(context, MAX_CONTEXT_CHARS)
            })
            .to_string(),
        ),
        _ => Some("{}".to_owned()),
    }
}

/// Write the rules file atomically; failing to is not worth disturbing the agent over.
fn write_rules(project: &Path, context: &str) {
    let path = project.join(RULES_FILE);
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let body = format!(
        "---\ndescription: Memory from earlier sessions, written by mneme at each stop\nalwaysApply: true\n---\n\n{}\n",
        adapter::cut_chars(context, MAX_CONTEXT_CHARS)
    );
    let temp = dir.join(format!(".mneme.mdc.{}", std::process::id()));
    if std::fs::write(&temp, body).is_ok() && std::fs::rename(&temp, &path).is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalise(input: &str) -> Event {
        adapter::normalise_default(&crate::cursor::HOST, input)
    }

    #[test]
    fn camel_case_events_map_and_the_project_comes_from_workspace_roots() {
        let event = normalise(
            r#"{"conversation_id":"c1","generation_id":"g1","model":"gpt-5.5","tool_name":"Shell",
               "tool_input":{"command":"cargo test"},"tool_output":"{\"output\":\"ok\",\"exitCode\":0}",
               "duration":23.6,"tool_use_id":"t1","cwd":"","session_id":"c1",
               "hook_event_name":"postToolUse","cursor_version":"3.1.15",
               "workspace_roots":["/tmp/ws"],"user_email":null,"transcript_path":null}"#,
        );
        assert_eq!(event.session_id, "c1");
        assert_eq!(event.turn_id, "g1");
        assert_eq!(event.cwd, "/tmp/ws");
        assert_eq!(event.agent_version, "3.1.15");
        let Some(Payload::PostTool(call)) = &event.payload else {
            panic!("{event:?}")
        };
        assert_eq!(call.response_json, r#"{"output":"ok","exitCode":0}"#);
        assert_eq!(call.duration_ms, 23);
    }

    #[test]
    fn output_is_json_on_every_path() {
        let start = normalise(r#"{"hook_event_name":"sessionStart","conversation_id":"c"}"#);
        let out = render(&start, Some(&"x".repeat(20_000))).unwrap();
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value["additional_context"].as_str().unwrap().len(),
            MAX_CONTEXT_CHARS
        );
        assert_eq!(render(&start, None).as_deref(), Some("{}"));
        let prompt = normalise(r#"{"hook_event_name":"beforeSubmitPrompt","prompt":"hi"}"#);
        assert_eq!(render(&prompt, Some("ctx")).as_deref(), Some("{}"));
    }
}
