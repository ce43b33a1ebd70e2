//! What every host adapter shares: the [`Adapter`] each host's `adapter.rs` declares, the
//! envelope every adapter fills (id, times, machine, user, hash, invalid input), and
//! small helpers for taking fields out of a payload and for cutting context to a host's cap.
//!
//! An adapter is two pure functions over this envelope: `fill` maps the host's JSON object onto
//! one lifecycle kind of the shared vocabulary ([`proto::event::Payload`]), leaving every field
//! it does not map in `extra_json` and every event it does not know as `Unknown`; `render`
//! turns assembled context into exactly the bytes the host expects on stdout.

use crate::Host;
use proto::event::Payload;
use proto::{Agent, Event, Message as _};
use serde_json::{Map, Value};
use std::path::Path;

/// How much of an unparseable payload is kept for the dead-letter record.
const INVALID_EXCERPT_BYTES: usize = 2048;

/// Which context a hook run asks retrieval for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Nothing: the host cannot take context from this event.
    Nothing,
    /// The session-start context (resume block, patterns, recent work).
    SessionStart,
    /// Context for the prompt in the event.
    Prompt,
    /// Both, joined: for hosts that can only inject on a prompt, on the session's first prompt.
    StartAndPrompt,
}

/// A host's adapter: its payload mapping and its output contract.
pub struct Adapter {
    /// The most context this host takes from one hook, in characters (before its own cut).
    pub max_context_chars: usize,
    /// Map the payload object onto the event (session, cwd, payload kind, extra fields).
    pub fill: fn(&mut Event, &mut Map<String, Value>, &sanitize::Sanitizer),
    /// Which context this event may carry back to the host, given the hook's state directory.
    pub wants: fn(&Event, &Path) -> Want,
    /// The host's stdout for this event and context (`None` when context is empty or absent);
    /// `None` as a result means print nothing at all.
    pub render: fn(&Event, Option<&str>) -> Option<String>,
}

/// Normalise a raw payload from `host` into an event envelope (id and timestamps included).
pub fn normalise(host: &Host, input: &[u8], sanitizer: &sanitize::Sanitizer) -> Event {
    let mut event = envelope(host.agent);
    event.content_hash = sanitize::content_hash(&[&String::from_utf8_lossy(input)]);
    let object = match parse_object(input) {
        Ok(object) => object,
        Err(reason) => {
            invalid(&mut event, input, reason, sanitizer);
            return event;
        }
    };
    // Secrets, private blocks and system tags are scrubbed before the event can reach the
    // spool or the NATS store, both of which are on disk.
    let mut value = Value::Object(object);
    sanitizer.clean_json(&mut value);
    let Value::Object(mut object) = value else {
        unreachable!("cleaning keeps the object")
    };
    (host.adapter.fill)(&mut event, &mut object, sanitizer);
    if event.project.is_empty() {
        event.project = project_of(&event.cwd);
    }
    if !object.is_empty() {
        event.extra_json = Value::Object(object).to_string();
    }
    event
}

/// The payload of a subagent's start or stop: hosts name the two events differently but carry
/// the same four facts about the subagent.
pub fn subagent(start: bool, subagent: proto::Subagent) -> Payload {
    if start {
        Payload::SubagentStart(subagent)
    } else {
        Payload::SubagentStop(subagent)
    }
}

/// Normalise with the default sanitiser: what every adapter's unit tests start from.
#[cfg(test)]
pub fn normalise_default(host: &Host, input: &str) -> Event {
    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
    normalise(host, input.as_bytes(), &sanitizer)
}

/// A fresh envelope for `agent`: new id, now, this machine and user, no payload.
pub fn envelope(agent: Agent) -> Event {
    let now = now_ms();
    Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: now,
        captured_at_ms: now,
        agent: agent as i32,
        host: hostname(),
        user: std::env::var("USER")
            .or_else(|_| std::env::var("USERNAME"))
            .unwrap_or_default(),
        ..Default::default()
    }
}

/// Turn `event` into an `Invalid` one for ingest to dead-letter, keeping a scrubbed excerpt.
pub fn invalid(event: &mut Event, input: &[u8], reason: String, sanitizer: &sanitize::Sanitizer) {
    // Scrubbed before it is cut, so a secret straddling the cut is redacted whole.
    let excerpt = sanitizer.clean_excerpt(input, INVALID_EXCERPT_BYTES);
    event.payload = Some(Payload::Invalid(proto::Invalid {
        reason,
        excerpt,
        size_bytes: input.len() as u64,
    }));
    event.cwd = current_dir();
    event.project = project_of(&event.cwd);
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

/// The payload for an event without `hook_event_name`: nothing says what happened.
pub fn no_event_name() -> Payload {
    Payload::Invalid(proto::Invalid {
        reason: "payload has no hook_event_name".to_owned(),
        excerpt: String::new(),
        size_bytes: 0,
    })
}

/// An event this adapter does not map: the remaining fields, whole.
pub fn unknown(object: &mut Map<String, Value>) -> Payload {
    Payload::Unknown(proto::Unknown {
        raw_json: Value::Object(std::mem::take(object)).to_string(),
    })
}

/// Take `key` out of the payload as a string (numbers and booleans are rendered).
pub fn take_str(object: &mut Map<String, Value>, key: &str) -> String {
    match object.remove(key) {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The first non-empty of several keys, all of which are taken out.
pub fn take_first(object: &mut Map<String, Value>, keys: &[&str]) -> String {
    let mut found = String::new();
    for key in keys {
        let value = take_str(object, key);
        if found.is_empty() {
            found = value;
        }
    }
    found
}

pub fn take_bool(object: &mut Map<String, Value>, key: &str) -> bool {
    matches!(object.remove(key), Some(Value::Bool(true)))
}

pub fn take_i64(object: &mut Map<String, Value>, key: &str) -> i64 {
    object
        .remove(key)
        .and_then(|v| v.as_f64())
        .map_or(0, |v| v as i64)
}

/// Shorten every string longer than the sanitizer's limit inside `value` to a head and a tail,
/// keeping the JSON valid; returns the largest string's original size when any was shortened.
pub fn shorten_strings(
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

/// The names of a tool call's fields in one host's payloads.
pub struct ToolKeys {
    pub name: &'static str,
    pub id: &'static str,
    pub input: &'static str,
    pub response: &'static str,
    pub error: &'static str,
    pub duration_ms: &'static str,
}

/// Claude Code's names, which Codex and Gemini share.
pub const CLAUDE_TOOL_KEYS: ToolKeys = ToolKeys {
    name: "tool_name",
    id: "tool_use_id",
    input: "tool_input",
    response: "tool_response",
    error: "error",
    duration_ms: "duration_ms",
};

/// Take a tool call out of the payload. A response that is a string holding JSON (Cursor's
/// `tool_output`) is parsed, so it is stored as the structure it is.
pub fn take_tool(
    object: &mut Map<String, Value>,
    keys: &ToolKeys,
    sanitizer: &sanitize::Sanitizer,
) -> proto::ToolCall {
    let mut input = object.remove(keys.input).unwrap_or(Value::Null);
    let mut response = object.remove(keys.response).unwrap_or(Value::Null);
    if let Value::String(text) = &response
        && text.trim_start().starts_with(['{', '['])
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        response = parsed;
    }
    shorten_strings(&mut input, sanitizer);
    let original = shorten_strings(&mut response, sanitizer);
    let json = |v: Value| {
        if v.is_null() {
            String::new()
        } else {
            v.to_string()
        }
    };
    let error = match object.remove(keys.error) {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        // Structured errors (Kimi's `{code, message, …}`) read best as their message.
        Some(Value::Object(map)) => map
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| Value::Object(map).to_string()),
        Some(other) => other.to_string(),
    };
    proto::ToolCall {
        tool_name: take_str(object, keys.name),
        tool_use_id: take_str(object, keys.id),
        input_json: json(input),
        response_json: json(response),
        error,
        is_interrupt: take_bool(object, "is_interrupt"),
        duration_ms: take_i64(object, keys.duration_ms),
        response_chars: original.map_or(0, |t| t.original_chars as u64),
        response_lines: original.map_or(0, |t| t.original_lines as u64),
    }
}

/// The first `max` characters of `text`.
pub fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `{"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}`, the JSON form Claude
/// Code, Codex and Gemini share.
pub fn hook_specific_output(event_name: &str, context: &str) -> String {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": event_name,
            "additionalContext": context,
        }
    })
    .to_string()
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

pub fn current_dir() -> String {
    std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// This machine's name, as events record it.
pub fn hostname() -> String {
    if let Ok(name) = std::env::var("HOSTNAME") {
        return name;
    }
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Now, in Unix milliseconds. The one copy outside `common::time`: the adapters run in the hook,
/// which must not link `common`.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Whether the host can take context from this event at all (session start or prompt).
pub fn is_start_or_prompt(event: &Event) -> bool {
    matches!(
        event.payload,
        Some(Payload::SessionStart(_)) | Some(Payload::Prompt(_))
    )
}

/// The usual rule: session start gets the start context, a prompt its own.
pub fn wants_start_or_prompt(event: &Event, _state: &Path) -> Want {
    match event.payload {
        Some(Payload::SessionStart(_)) => Want::SessionStart,
        Some(Payload::Prompt(_)) => Want::Prompt,
        _ => Want::Nothing,
    }
}

/// Events above this size are cut harder, to stay under NATS's default 1 MiB message limit.
pub const MAX_EVENT_BYTES: usize = 900 * 1024;

/// Truncate the event's large fields so it fits in one NATS message.
pub fn fit(event: &mut Event, sanitizer: &sanitize::Sanitizer) {
    event.for_each_text(|field| {
        if let (text, Some(_)) = sanitizer.truncate(field) {
            *field = text;
        }
    });
    if event.encoded_len() > MAX_EVENT_BYTES {
        // Many fields each under the limit can still add up; cut them all hard.
        event.for_each_text(|field| {
            if field.len() > 16 * 1024 {
                let cut = field
                    .char_indices()
                    .nth(16 * 1024)
                    .map_or(field.len(), |(i, _)| i);
                field.truncate(cut);
                field.push_str("\n[… truncated by mneme-hook to fit one message …]");
            }
        });
    }
}
