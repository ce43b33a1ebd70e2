//! The Kiro CLI adapter.
//!
//! Kiro CLI 2.x runs the hooks of an agent file with camelCase triggers (`agentSpawn`,
//! `userPromptSubmit`, `preToolUse`, `postToolUse`, `stop`); the v3 preview uses PascalCase
//! (`SessionStart`, `UserPromptSubmit`, …). Both are accepted. Payloads carry
//! `hook_event_name`, `cwd`, `prompt`, `tool_name`, `tool_input`, `tool_response`
//! (`{success, result}`) and, on `stop`, `assistant_response`.
//!
//! `session_id` is only sent by the interactive TUI. Without it the session id is derived
//! from the Kiro process that ran the hook: the first ancestor of the hook that is not a shell
//! (Kiro runs hooks through `bash -c`), identified by its pid and its start time (from
//! `/proc` on Linux; the parent pid alone elsewhere), hashed with the working directory. Every
//! hook of one Kiro run therefore shares one id, and two runs never do, even when a pid is
//! reused. Such ids start with `kiro-`.
//!
//! Kiro injects the raw stdout of `agentSpawn` (for the whole conversation) and
//! `userPromptSubmit` (for that turn), cut at the hook's `max_output_size` (10 KiB by default);
//! other triggers' output is ignored, so nothing is printed for them.

use crate::adapter::{self, Adapter, take_str};
use proto::Event;
use proto::event::Payload;
use serde_json::{Map, Value};

/// Kiro cuts hook output at 10,240 bytes by default and appends " ... truncated"; staying
/// under it keeps the context whole.
pub const MAX_CONTEXT_BYTES: usize = 10_000;

/// How Kiro CLI payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_BYTES,
    fill,
    wants: adapter::wants_start_or_prompt,
    render,
};

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    let name = take_str(object, "hook_event_name");
    event.cwd = take_str(object, "cwd");
    if event.cwd.is_empty() {
        event.cwd = adapter::current_dir();
    }
    event.session_id = take_str(object, "session_id");
    if event.session_id.is_empty() {
        event.session_id = derived_session_id(&event.cwd);
    }
    let payload = match name.as_str() {
        // The first prompt rides along on agentSpawn; userPromptSubmit follows with it, so it
        // stays an extra field here rather than a second prompt.
        "agentSpawn" | "SessionStart" => Payload::SessionStart(proto::SessionStart::default()),
        "userPromptSubmit" | "UserPromptSubmit" => Payload::Prompt(proto::Prompt {
            text: take_str(object, "prompt"),
        }),
        "preToolUse" | "PreToolUse" => Payload::PreTool(tool(object, sanitizer)),
        "postToolUse" | "PostToolUse" => {
            let call = tool(object, sanitizer);
            let failed = serde_json::from_str::<Value>(&call.response_json)
                .is_ok_and(|r| r.get("success") == Some(&Value::Bool(false)));
            if failed {
                Payload::ToolFailure(proto::ToolCall {
                    error: call.response_json.clone(),
                    ..call
                })
            } else {
                Payload::PostTool(call)
            }
        }
        "stop" | "Stop" => Payload::Stop(proto::Stop {
            last_message: take_str(object, "assistant_response"),
            ..Default::default()
        }),
        "" => adapter::no_event_name(),
        _ => adapter::unknown(object),
    };
    event.host_event = name;
    event.payload = Some(payload);
}

fn tool(object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) -> proto::ToolCall {
    adapter::take_tool(object, &adapter::CLAUDE_TOOL_KEYS, sanitizer)
}

/// A session id for a Kiro run that did not send one (see the module documentation).
pub fn derived_session_id(cwd: &str) -> String {
    let process = kiro_process();
    let hash = sanitize::content_hash(&[cwd, &process]);
    format!("kiro-{}", &hash[..24])
}

/// `pid:start time` of the first non-shell ancestor, or the parent pid where `/proc` is absent.
fn kiro_process() -> String {
    #[cfg(unix)]
    let mut pid = std::os::unix::process::parent_id();
    #[cfg(not(unix))]
    let pid = 0u32;
    #[cfg(unix)]
    for _ in 0..8 {
        let Some((comm, parent, start)) = proc_stat(pid) else {
            return pid.to_string();
        };
        if !matches!(comm.as_str(), "sh" | "bash" | "dash" | "zsh" | "fish") || parent <= 1 {
            return format!("{pid}:{start}");
        }
        pid = parent;
    }
    pid.to_string()
}

/// The command name, parent pid and start time (clock ticks since boot) of a process.
fn proc_stat(pid: u32) -> Option<(String, u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces or parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    // Taken with `get`, so a line not of that shape gives no answer rather than a panic.
    let comm = stat.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name: state, ppid, … ; starttime is field 22 of the line, 20th after the name.
    let parent = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.to_string();
    Some((comm, parent, start))
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    let context = context.map(str::trim).filter(|c| !c.is_empty())?;
    if !adapter::is_start_or_prompt(event) {
        return None;
    }
    Some(adapter::cut_bytes(context, MAX_CONTEXT_BYTES).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalise(input: &str) -> Event {
        adapter::normalise_default(&crate::kiro::HOST, input)
    }

    #[test]
    fn both_generations_map_and_a_missing_session_id_is_derived_stably() {
        for (name, kind) in [
            ("agentSpawn", "session_start"),
            ("SessionStart", "session_start"),
            ("userPromptSubmit", "prompt"),
            ("UserPromptSubmit", "prompt"),
            ("preToolUse", "pre_tool"),
            ("postToolUse", "post_tool"),
            ("stop", "stop"),
            ("PostFileSave", "other"),
        ] {
            let event = normalise(&format!(
                r#"{{"hook_event_name":"{name}","cwd":"/tmp/kiro-sid"}}"#
            ));
            assert_eq!(event.kind(), kind, "{name}");
            assert!(
                event.session_id.starts_with("kiro-"),
                "{}",
                event.session_id
            );
        }
        let a = normalise(r#"{"hook_event_name":"stop","cwd":"/tmp/a"}"#);
        let b = normalise(r#"{"hook_event_name":"stop","cwd":"/tmp/a"}"#);
        assert_eq!(a.session_id, b.session_id);
        let tui = normalise(r#"{"hook_event_name":"stop","cwd":"/tmp/a","session_id":"c186"}"#);
        assert_eq!(tui.session_id, "c186");
    }

    #[test]
    fn a_failed_tool_is_a_failure_and_output_is_raw_text_under_the_cap() {
        let failed = normalise(
            r#"{"hook_event_name":"postToolUse","cwd":"/tmp","tool_name":"execute_bash",
               "tool_input":{"command":"false"},"tool_response":{"success":false,"result":["exit 1"]}}"#,
        );
        assert_eq!(failed.kind(), "tool_failure");
        let spawn = normalise(r#"{"hook_event_name":"agentSpawn","cwd":"/tmp"}"#);
        let out = render(&spawn, Some(&"é".repeat(8_000))).unwrap();
        assert!(out.len() <= MAX_CONTEXT_BYTES && out.starts_with('é'));
        assert_eq!(render(&failed, Some("ctx")), None);
    }
}
