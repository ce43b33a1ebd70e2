//! The Codex CLI adapter.
//!
//! Codex sends Claude Code's payload shape (`hook_event_name`, `session_id`, `cwd`,
//! `transcript_path`, `tool_name`, `tool_input`, `tool_response`, …) plus `turn_id` and
//! `model`, so the mapping is Claude Code's with the turn id kept.
//!
//! Its output rules are stricter: stdout whose trimmed text starts with `{` or `[` is parsed
//! as that event's JSON output, and unknown keys make the run fail, so mneme prints exactly
//! `hookSpecificOutput{hookEventName, additionalContext}` on SessionStart and
//! UserPromptSubmit and nothing at all otherwise (Stop hooks must print JSON or nothing).
//! Context over 2,500 approximate tokens (UTF-8 bytes / 4) is spilled to a file and the model
//! only sees a preview, so the context is cut to [`MAX_CONTEXT_BYTES`] first.

use crate::adapter::{self, Adapter, take_str};
use proto::Event;
use serde_json::{Map, Value};

/// Codex counts about four bytes a token and spills context over 2,500 tokens; 9,000 bytes
/// stays safely under it.
pub const MAX_CONTEXT_BYTES: usize = 9_000;

/// How Codex payloads and context are mapped.
pub const ADAPTER: Adapter = Adapter {
    max_context_chars: MAX_CONTEXT_BYTES,
    fill,
    wants: adapter::wants_start_or_prompt,
    render,
};

fn fill(event: &mut Event, object: &mut Map<String, Value>, sanitizer: &sanitize::Sanitizer) {
    event.turn_id = take_str(object, "turn_id");
    crate::claude_code::adapter::fill_claude_shaped(event, object, sanitizer);
    // Codex's transcript path may be null; the shared mapping already reads it as empty.
}

fn render(event: &Event, context: Option<&str>) -> Option<String> {
    let context = context.map(str::trim).filter(|c| !c.is_empty())?;
    if !adapter::is_start_or_prompt(event) {
        return None;
    }
    let context = adapter::cut_bytes(context, MAX_CONTEXT_BYTES);
    Some(adapter::hook_specific_output(&event.host_event, context))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Agent;
    use proto::event::Payload;

    fn normalise(input: &str) -> Event {
        adapter::normalise_default(&crate::codex::HOST, input)
    }

    #[test]
    fn turn_id_and_model_are_kept() {
        let event = normalise(
            r#"{"session_id":"s","turn_id":"t1","transcript_path":null,"cwd":"/tmp",
               "hook_event_name":"UserPromptSubmit","model":"gpt-5.5","permission_mode":"default",
               "prompt":"fix it"}"#,
        );
        assert_eq!(event.turn_id, "t1");
        assert_eq!(event.model, "gpt-5.5");
        assert_eq!(event.agent(), Agent::Codex);
        assert!(matches!(&event.payload, Some(Payload::Prompt(p)) if p.text == "fix it"));
        assert_eq!(event.extra_json, "");
    }

    #[test]
    fn output_is_strict_json_under_the_cap_or_nothing() {
        let start = normalise(r#"{"hook_event_name":"SessionStart","session_id":"s"}"#);
        let out = render(&start, Some(&"文".repeat(10_000))).unwrap();
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value.as_object().unwrap().len(), 1);
        let text = value["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert!(text.len() <= MAX_CONTEXT_BYTES);
        assert_eq!(render(&start, None), None);
        let stop = normalise(r#"{"hook_event_name":"Stop","session_id":"s"}"#);
        assert_eq!(render(&stop, Some("context")), None);
    }
}
