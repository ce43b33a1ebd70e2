//! The hosts' own session files, turned back into the hook payloads each host would have sent.
//!
//! Each reader is pure: files in, [`Session`]s out, each a list of [`Item`]s holding a payload
//! in the host's own hook shape (so the host's adapter in `mneme-hook` normalises it exactly as
//! it would a live event), the time of the record behind it, and a key built from the host's
//! own record ids (tool call ids, message ids, line timestamps) from which the import derives
//! the event id. Lines that do not parse are reported with their file and line; a last line
//! without its newline is still being written and is left for the next import.

use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// One event to import.
#[derive(Debug, Clone)]
pub struct Item {
    /// The hook payload, in the host's shape.
    pub payload: Value,
    /// When it happened, Unix milliseconds (0 when the file does not say).
    pub at_ms: i64,
    /// A key unique within the session, stable across imports of the same file.
    pub key: String,
}

/// One session read from a host's files.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: String,
    pub cwd: String,
    pub items: Vec<Item>,
    /// Records (lines) read.
    pub records: usize,
}

/// A line that could not be read.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BadLine {
    pub file: String,
    pub line: usize,
    pub error: String,
}

/// What reading one file gave.
#[derive(Debug, Default)]
pub struct Read {
    pub sessions: Vec<Session>,
    pub bad_lines: Vec<BadLine>,
    /// Whether a last line was left for next time.
    pub partial: bool,
}

/// The JSON objects of a JSONL file, with bad lines reported and a partial last line left out.
pub fn read_jsonl(
    path: &Path,
    out: &mut Read,
) -> std::io::Result<Vec<(usize, Map<String, Value>)>> {
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let complete = if !text.is_empty() && !text.ends_with('\n') {
        out.partial = true;
        text.rfind('\n').map_or("", |end| &text[..end])
    } else {
        &text[..]
    };
    let mut records = Vec::new();
    for (index, line) in complete.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => records.push((index + 1, map)),
            Ok(_) => out.bad_lines.push(BadLine {
                file: path.display().to_string(),
                line: index + 1,
                error: "not a json object".to_owned(),
            }),
            Err(error) => out.bad_lines.push(BadLine {
                file: path.display().to_string(),
                line: index + 1,
                error: error.to_string(),
            }),
        }
    }
    Ok(records)
}

/// Milliseconds since the epoch of an RFC 3339 / ISO 8601 UTC time (`2026-02-18T15:09:10.006Z`).
pub fn parse_time(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 19 || bytes[4] != b'-' || bytes[10] != b'T' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut millis = 0;
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits: String = fraction.chars().take_while(char::is_ascii_digit).collect();
        rest = &fraction[digits.len()..];
        let padded = format!("{digits:0<3}");
        millis = padded[..3].parse().unwrap_or(0);
    }
    // An explicit offset is honoured; `Z` or nothing is UTC.
    let offset_minutes = match rest.as_bytes().first() {
        Some(b'+') | Some(b'-') if rest.len() >= 6 => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (rest[1..3].parse::<i64>().ok()? * 60 + rest[4..6].parse::<i64>().ok()?)
        }
        _ => 0,
    };
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(
        ((days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60) * 1000)
            + millis,
    )
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Adds items with keys made unique by counting repeats.
struct Builder {
    session: Session,
    seen: HashMap<String, usize>,
}

impl Builder {
    fn new(id: &str, cwd: &str) -> Builder {
        Builder {
            session: Session {
                id: id.to_owned(),
                cwd: cwd.to_owned(),
                ..Default::default()
            },
            seen: HashMap::new(),
        }
    }

    fn push(&mut self, payload: Value, at_ms: i64, key: String) {
        let n = self.seen.entry(key.clone()).or_default();
        *n += 1;
        let key = if *n == 1 { key } else { format!("{key}#{n}") };
        self.session.items.push(Item {
            payload,
            at_ms,
            key,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Claude Code: the replay in `mneme_hook::transcript`, with the record times.

pub fn claude_code(path: &Path, out: &mut Read) -> anyhow::Result<()> {
    let replay = mneme_hook::transcript::claude_code_replay(path)?;
    for bad in &replay.bad_lines {
        out.bad_lines.push(BadLine {
            file: bad.path.display().to_string(),
            line: bad.line,
            error: bad.error.clone(),
        });
    }
    out.partial |= !replay.partial_files.is_empty();
    let cwd = replay
        .payloads
        .first()
        .map(|p| str_of(p, "cwd").to_owned())
        .unwrap_or_default();
    let mut builder = Builder::new(&replay.session_id, &cwd);
    builder.session.records = replay.records;
    let mut last_ms = 0;
    for (payload, time) in replay.payloads.into_iter().zip(replay.times) {
        let at_ms = time.as_deref().and_then(parse_time).unwrap_or(last_ms);
        last_ms = at_ms;
        let event = str_of(&payload, "hook_event_name");
        // The synthetic end of a session is one event however much the file grows.
        let key = if event == "SessionEnd" {
            "SessionEnd".to_owned()
        } else {
            format!(
                "{event}|{}|{}|{}",
                str_of(&payload, "tool_use_id"),
                str_of(&payload, "agent_id"),
                time.as_deref().unwrap_or_default()
            )
        };
        builder.push(payload, at_ms, key);
    }
    out.sessions.push(builder.session);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Codex: `rollout-*.jsonl`, lines of `{timestamp, type, payload}`.

/// Injected context Codex writes as user messages; none of it was typed by the user.
const CODEX_BOILERPLATE: [&str; 5] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions instructions>",
    "<turn_aborted>",
];

pub fn codex(path: &Path, out: &mut Read) -> anyhow::Result<()> {
    let lines = read_jsonl(path, out)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut builder = Builder::new("", "");
    builder.session.records = lines.len();
    let mut model = String::new();
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut last_text: Option<(String, i64)> = None;
    let mut started = false;
    let mut at = 0;
    for (line, record) in lines {
        let record = Value::Object(record);
        at = parse_time(str_of(&record, "timestamp")).unwrap_or(at);
        let payload = &record["payload"];
        let kind = str_of(&record, "type");
        let base = |b: &Builder, event: &str, model: &str| {
            let mut p = json!({"session_id": b.session.id, "cwd": b.session.cwd,
                "hook_event_name": event, "transcript_path": path.display().to_string()});
            if !model.is_empty() {
                p["model"] = model.into();
            }
            p
        };
        match (kind, str_of(payload, "type")) {
            ("session_meta", _) => {
                builder.session.id = str_of(payload, "id").to_owned();
                builder.session.cwd = str_of(payload, "cwd").to_owned();
                if !started {
                    started = true;
                    let mut p = base(&builder, "SessionStart", &model);
                    p["source"] = "startup".into();
                    builder.push(p, at, "SessionStart".to_owned());
                }
            }
            ("turn_context", _) => {
                if let Some(cwd) = payload.get("cwd").and_then(Value::as_str) {
                    builder.session.cwd = cwd.to_owned();
                }
                if let Some(m) = payload.get("model").and_then(Value::as_str) {
                    model = m.to_owned();
                }
            }
            ("event_msg", "user_message") => {
                let text = str_of(payload, "message");
                if text.trim().is_empty()
                    || CODEX_BOILERPLATE
                        .iter()
                        .any(|p| text.trim_start().starts_with(p))
                {
                    continue;
                }
                if let Some((last, last_at)) = last_text.take() {
                    let mut p = base(&builder, "Stop", &model);
                    p["stop_hook_active"] = false.into();
                    p["last_assistant_message"] = last.into();
                    builder.push(p, last_at, format!("Stop|{last_at}"));
                }
                let mut p = base(&builder, "UserPromptSubmit", &model);
                p["prompt"] = text.into();
                builder.push(p, at, format!("UserPromptSubmit|{line}"));
            }
            ("event_msg", "agent_message") => {
                last_text = Some((str_of(payload, "message").to_owned(), at));
            }
            ("response_item", "function_call" | "custom_tool_call" | "local_shell_call") => {
                let call_id = str_of(payload, "call_id").to_owned();
                let name = match str_of(payload, "name") {
                    "" => "shell".to_owned(),
                    name => name.to_owned(),
                };
                let input = match (payload.get("arguments"), payload.get("input")) {
                    // Function arguments are a JSON string.
                    (Some(Value::String(args)), _) => {
                        serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.clone()))
                    }
                    (_, Some(input)) => input.clone(),
                    _ => payload.get("action").cloned().unwrap_or(Value::Null),
                };
                let mut p = base(&builder, "PreToolUse", &model);
                p["tool_name"] = name.as_str().into();
                p["tool_use_id"] = call_id.as_str().into();
                p["tool_input"] = input.clone();
                builder.push(p, at, format!("PreToolUse|{call_id}"));
                calls.insert(call_id, (name, input));
            }
            ("response_item", "function_call_output" | "custom_tool_call_output") => {
                let call_id = str_of(payload, "call_id").to_owned();
                let Some((name, input)) = calls.remove(&call_id) else {
                    continue;
                };
                let output = payload.get("output").cloned().unwrap_or(Value::Null);
                // Shell output comes as a JSON string with the exit code in its metadata.
                let parsed = match &output {
                    Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(output.clone()),
                    other => other.clone(),
                };
                let exit = parsed
                    .get("metadata")
                    .and_then(|m| m.get("exit_code"))
                    .and_then(Value::as_i64);
                let failed = exit.is_some_and(|code| code != 0)
                    || payload.get("success") == Some(&Value::Bool(false));
                let event = if failed {
                    "PostToolUseFailure"
                } else {
                    "PostToolUse"
                };
                let mut p = base(&builder, event, &model);
                p["tool_name"] = name.into();
                p["tool_use_id"] = call_id.as_str().into();
                p["tool_input"] = input;
                if failed {
                    let text = parsed
                        .get("output")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| parsed.to_string());
                    p["error"] = text.into();
                } else {
                    p["tool_response"] = parsed;
                }
                builder.push(p, at, format!("PostToolUse|{call_id}"));
            }
            ("compacted", _) => {
                let mut p = base(&builder, "PreCompact", &model);
                p["trigger"] = "auto".into();
                builder.push(p, at, format!("PreCompact|{line}"));
                let mut p = base(&builder, "PostCompact", &model);
                p["trigger"] = "auto".into();
                p["compact_summary"] = str_of(payload, "message").into();
                builder.push(p, at, format!("PostCompact|{line}"));
            }
            // Encrypted reasoning, token counts, instructions and UI events are not memory.
            _ => {}
        }
    }
    if builder.session.id.is_empty() {
        // Old rollouts name the thread only in the file name.
        builder.session.id = stem
            .rsplit('-')
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("-");
        for item in &mut builder.session.items {
            item.payload["session_id"] = builder.session.id.as_str().into();
        }
    }
    if let Some((last, last_at)) = last_text.take() {
        let mut p = json!({"session_id": builder.session.id, "cwd": builder.session.cwd,
            "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": last});
        p["transcript_path"] = path.display().to_string().into();
        builder.push(p, last_at, format!("Stop|{last_at}"));
    }
    if !builder.session.items.is_empty() {
        out.sessions.push(builder.session);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Kimi Code: `session_index.jsonl` → each session's `agents/main/wire.jsonl`.

/// The sessions listed in a Kimi `session_index.jsonl` (last record per id wins; tombstones
/// remove): (session id, session directory, work directory).
pub fn kimi_index(index: &Path, out: &mut Read) -> anyhow::Result<Vec<(String, PathBuf, String)>> {
    let mut sessions: BTreeMap<String, Option<(PathBuf, String)>> = BTreeMap::new();
    for (_, record) in read_jsonl(index, out)? {
        let record = Value::Object(record);
        let id = str_of(&record, "sessionId").to_owned();
        if id.is_empty() {
            continue;
        }
        if record.get("deleted") == Some(&Value::Bool(true)) {
            sessions.insert(id, None);
        } else {
            sessions.insert(
                id,
                Some((
                    PathBuf::from(str_of(&record, "sessionDir")),
                    str_of(&record, "workDir").to_owned(),
                )),
            );
        }
    }
    Ok(sessions
        .into_iter()
        .filter_map(|(id, entry)| entry.map(|(dir, work)| (id, dir, work)))
        .collect())
}

pub fn kimi(wire: &Path, session_id: &str, work_dir: &str, out: &mut Read) -> anyhow::Result<()> {
    let lines = read_jsonl(wire, out)?;
    let mut builder = Builder::new(session_id, work_dir);
    builder.session.records = lines.len();
    let base =
        |event: &str| json!({"hook_event_name": event, "session_id": session_id, "cwd": work_dir});
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    // Streamed assistant text, per step, in order.
    let mut steps: Vec<(String, String)> = Vec::new();
    let mut at = 0;
    for (line, record) in lines {
        let record = Value::Object(record);
        at = record.get("time").and_then(Value::as_i64).unwrap_or(at);
        match str_of(&record, "type") {
            "metadata" => {
                let created = record
                    .get("created_at")
                    .and_then(Value::as_i64)
                    .unwrap_or(at);
                let mut p = base("SessionStart");
                p["source"] = "startup".into();
                builder.push(p, created, "SessionStart".to_owned());
            }
            "turn.prompt" | "turn.steer" => {
                if record["origin"]["kind"]
                    .as_str()
                    .is_some_and(|k| k != "user")
                {
                    continue;
                }
                let mut p = base("UserPromptSubmit");
                p["prompt"] = record.get("input").cloned().unwrap_or(Value::Null);
                builder.push(p, at, format!("UserPromptSubmit|{at}|{line}"));
            }
            "context.append_loop_event" => {
                let event = &record["event"];
                match str_of(event, "type") {
                    "content.part" if str_of(&event["part"], "type") == "text" => {
                        let step = str_of(event, "stepUuid").to_owned();
                        let text = str_of(&event["part"], "text");
                        match steps.last_mut() {
                            Some((s, acc)) if *s == step => acc.push_str(text),
                            _ => steps.push((step, text.to_owned())),
                        }
                    }
                    "tool.call" => {
                        let id = str_of(event, "toolCallId").to_owned();
                        let name = str_of(event, "name").to_owned();
                        let args = match event.get("args") {
                            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(json!({})),
                            Some(v) => v.clone(),
                            None => json!({}),
                        };
                        let mut p = base("PreToolUse");
                        p["tool_name"] = name.as_str().into();
                        p["tool_call_id"] = id.as_str().into();
                        p["tool_input"] = args.clone();
                        builder.push(p, at, format!("PreToolUse|{id}"));
                        calls.insert(id, (name, args));
                    }
                    "tool.result" => {
                        let id = str_of(event, "toolCallId").to_owned();
                        let Some((name, args)) = calls.remove(&id) else {
                            continue;
                        };
                        let result = &event["result"];
                        let output = match result.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            Some(Value::Array(parts)) => parts
                                .iter()
                                .filter_map(|p| p.get("text").and_then(Value::as_str))
                                .collect::<Vec<_>>()
                                .join("\n"),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        let failed = result.get("isError") == Some(&Value::Bool(true));
                        let mut p = base(if failed {
                            "PostToolUseFailure"
                        } else {
                            "PostToolUse"
                        });
                        p["tool_name"] = name.into();
                        p["tool_call_id"] = id.as_str().into();
                        p["tool_input"] = args;
                        if failed {
                            p["error"] = json!({"message": output});
                        } else {
                            p["tool_output"] = output.into();
                        }
                        builder.push(p, at, format!("PostToolUse|{id}"));
                    }
                    _ => {}
                }
            }
            "context.apply_compaction" => {
                let mut p = base("PreCompact");
                p["trigger"] = "auto".into();
                builder.push(p, at, format!("PreCompact|{line}"));
                let mut p = base("PostCompact");
                p["trigger"] = "auto".into();
                p["compact_summary"] = str_of(&record, "summary").into();
                builder.push(p, at, format!("PostCompact|{line}"));
            }
            "turn.ended" => {
                let mut p = base("Stop");
                p["stop_hook_active"] = false.into();
                if let Some((_, text)) = steps.iter().rev().find(|(_, t)| !t.trim().is_empty()) {
                    p["last_assistant_message"] = text.as_str().into();
                }
                steps.clear();
                let turn = record
                    .get("turnId")
                    .map(Value::to_string)
                    .unwrap_or_default();
                builder.push(p, at, format!("Stop|{turn}|{at}"));
            }
            _ => {}
        }
    }
    if !builder.session.items.is_empty() {
        out.sessions.push(builder.session);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Kiro CLI: `~/.kiro/sessions/cli/<id>.jsonl` (+ `<id>.json` metadata with the cwd).

pub fn kiro(path: &Path, out: &mut Read) -> anyhow::Result<()> {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta: Value = std::fs::read(path.with_extension("json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let cwd = str_of(&meta, "cwd").to_owned();
    let lines = read_jsonl(path, out)?;
    let mut builder = Builder::new(&id, &cwd);
    builder.session.records = lines.len();
    let base = |event: &str| json!({"hook_event_name": event, "session_id": id, "cwd": cwd});
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut last_text: Option<String> = None;
    let mut at = meta
        .get("created_at")
        .and_then(Value::as_str)
        .and_then(parse_time)
        .unwrap_or(0);
    builder.push(base("agentSpawn"), at, "agentSpawn".to_owned());
    for (line, record) in lines {
        let record = Value::Object(record);
        let data = &record["data"];
        if let Some(seconds) = data["meta"]["timestamp"].as_i64() {
            at = seconds * 1000;
        }
        let message_id = str_of(data, "message_id").to_owned();
        let content = data["content"].as_array().cloned().unwrap_or_default();
        let text: Vec<&str> = content
            .iter()
            .filter(|c| str_of(c, "kind") == "text")
            .filter_map(|c| c.get("data").and_then(Value::as_str))
            .collect();
        match str_of(&record, "kind") {
            "Prompt" => {
                if let Some(last) = last_text.take() {
                    let mut p = base("stop");
                    p["assistant_response"] = last.into();
                    builder.push(p, at, format!("stop|{message_id}"));
                }
                let mut p = base("userPromptSubmit");
                p["prompt"] = text.join("\n").into();
                builder.push(p, at, format!("userPromptSubmit|{message_id}|{line}"));
            }
            "AssistantMessage" => {
                if !text.is_empty() {
                    last_text = Some(text.join("\n"));
                }
                for use_ in content.iter().filter(|c| str_of(c, "kind") == "toolUse") {
                    let data = &use_["data"];
                    let tool_id = str_of(data, "toolUseId").to_owned();
                    let name = str_of(data, "name").to_owned();
                    let input = data
                        .get("input")
                        .or_else(|| data.get("args"))
                        .cloned()
                        .unwrap_or(json!({}));
                    let mut p = base("preToolUse");
                    p["tool_name"] = name.as_str().into();
                    p["tool_input"] = input.clone();
                    p["tool_use_id"] = tool_id.as_str().into();
                    builder.push(p, at, format!("preToolUse|{tool_id}|{message_id}"));
                    calls.insert(tool_id, (name, input));
                }
            }
            "ToolResults" => {
                for result in content.iter().filter(|c| str_of(c, "kind") == "toolResult") {
                    let data = &result["data"];
                    let tool_id = str_of(data, "toolUseId").to_owned();
                    let (name, input) = calls.remove(&tool_id).unwrap_or_default();
                    let failed = str_of(data, "status") == "error";
                    let mut p = base("postToolUse");
                    p["tool_name"] = name.into();
                    p["tool_input"] = input;
                    p["tool_use_id"] = tool_id.as_str().into();
                    p["tool_response"] = json!({"success": !failed,
                        "result": data.get("content").cloned().unwrap_or(Value::Null)});
                    builder.push(p, at, format!("postToolUse|{tool_id}|{message_id}"));
                }
            }
            _ => {}
        }
    }
    if let Some(last) = last_text.take() {
        let mut p = base("stop");
        p["assistant_response"] = last.into();
        builder.push(p, at, "stop|end".to_owned());
    }
    out.sessions.push(builder.session);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI: `~/.gemini/tmp/<project>/chats/session-*.jsonl` (older: one `.json` object).

/// The text of Gemini `content` (a string, a part, or a list of parts).
fn gemini_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().map(gemini_text).collect::<Vec<_>>().join(""),
        Value::Object(part) => part
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

pub fn gemini(path: &Path, project: &str, out: &mut Read) -> anyhow::Result<()> {
    let mut meta = Map::new();
    // Messages by id, in first-seen order; a later record with the same id replaces it.
    let mut order: Vec<String> = Vec::new();
    let mut messages: HashMap<String, Value> = HashMap::new();
    let mut records = 0;
    let put = |message: Value, order: &mut Vec<String>, messages: &mut HashMap<String, Value>| {
        let id = str_of(&message, "id").to_owned();
        if !messages.contains_key(&id) {
            order.push(id.clone());
        }
        messages.insert(id, message);
    };
    if path.extension().is_some_and(|e| e == "json") {
        let record: Value = serde_json::from_slice(&std::fs::read(path)?).map_err(|e| {
            out.bad_lines.push(BadLine {
                file: path.display().to_string(),
                line: e.line(),
                error: e.to_string(),
            });
            anyhow::anyhow!("{}: {e}", path.display())
        })?;
        if let Value::Object(map) = &record {
            for (k, v) in map {
                if k != "messages" {
                    meta.insert(k.clone(), v.clone());
                }
            }
        }
        for message in record["messages"].as_array().cloned().unwrap_or_default() {
            records += 1;
            put(message, &mut order, &mut messages);
        }
    } else {
        for (_, record) in read_jsonl(path, out)? {
            records += 1;
            if let Some(Value::Object(set)) = record.get("$set") {
                for (k, v) in set {
                    if k == "messages" {
                        order.clear();
                        messages.clear();
                        for message in v.as_array().cloned().unwrap_or_default() {
                            put(message, &mut order, &mut messages);
                        }
                    } else {
                        meta.insert(k.clone(), v.clone());
                    }
                }
            } else if let Some(target) = record.get("$rewindTo").and_then(Value::as_str) {
                if let Some(at) = order.iter().position(|id| id == target) {
                    for id in order.drain(at + 1..) {
                        messages.remove(&id);
                    }
                }
            } else if record.contains_key("sessionId") && !record.contains_key("type") {
                meta.extend(record);
            } else {
                put(Value::Object(record), &mut order, &mut messages);
            }
        }
    }
    let session_id = meta
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if session_id.is_empty() {
        anyhow::bail!("{}: no sessionId in the session file", path.display());
    }
    let cwd = meta
        .get("directories")
        .and_then(|d| d.get(0))
        .and_then(Value::as_str)
        .unwrap_or(project)
        .to_owned();
    let mut builder = Builder::new(&session_id, &cwd);
    builder.session.records = records;
    let base = |event: &str| {
        json!({"session_id": session_id, "cwd": cwd, "hook_event_name": event,
               "transcript_path": path.display().to_string()})
    };
    let start = meta
        .get("startTime")
        .and_then(Value::as_str)
        .and_then(parse_time)
        .unwrap_or(0);
    let mut p = base("SessionStart");
    p["source"] = "startup".into();
    builder.push(p, start, "SessionStart".to_owned());
    let mut last: Option<(String, String, i64)> = None;
    let mut prompt = String::new();
    for id in &order {
        let message = &messages[id];
        let at = parse_time(str_of(message, "timestamp")).unwrap_or(start);
        match str_of(message, "type") {
            "user" => {
                let text = gemini_text(&message["content"]);
                // Context that hooks injected is not something the user typed.
                if text.trim().is_empty() || text.trim_start().starts_with("<hook_context>") {
                    continue;
                }
                if let Some((reply, reply_id, reply_at)) = last.take() {
                    let mut p = base("AfterAgent");
                    p["prompt"] = prompt.as_str().into();
                    p["prompt_response"] = reply.into();
                    p["stop_hook_active"] = false.into();
                    builder.push(p, reply_at, format!("AfterAgent|{reply_id}"));
                }
                prompt = text.clone();
                let mut p = base("BeforeAgent");
                p["prompt"] = text.into();
                builder.push(p, at, format!("BeforeAgent|{id}"));
            }
            "gemini" => {
                for call in message["toolCalls"].as_array().cloned().unwrap_or_default() {
                    let call_id = str_of(&call, "id").to_owned();
                    let call_at = parse_time(str_of(&call, "timestamp")).unwrap_or(at);
                    let mut p = base("BeforeTool");
                    p["tool_name"] = str_of(&call, "name").into();
                    p["tool_input"] = call.get("args").cloned().unwrap_or(json!({}));
                    builder.push(p, call_at, format!("BeforeTool|{call_id}"));
                    let mut p = base("AfterTool");
                    p["tool_name"] = str_of(&call, "name").into();
                    p["tool_input"] = call.get("args").cloned().unwrap_or(json!({}));
                    let result = call.get("result").cloned().unwrap_or(Value::Null);
                    let mut response = json!({"llmContent": result,
                        "returnDisplay": call.get("resultDisplay").cloned().unwrap_or(Value::Null)});
                    if str_of(&call, "status") == "error" {
                        response["error"] = json!({"message": gemini_text(&response["llmContent"])
                            .chars().take(2000).collect::<String>()});
                        if response["error"]["message"] == "" {
                            response["error"]["message"] = call
                                .get("resultDisplay")
                                .map(gemini_text)
                                .unwrap_or_else(|| "error".to_owned())
                                .into();
                        }
                    }
                    p["tool_response"] = response;
                    builder.push(p, call_at, format!("AfterTool|{call_id}"));
                }
                let text = gemini_text(&message["content"]);
                if !text.trim().is_empty() {
                    last = Some((text, id.clone(), at));
                }
            }
            _ => {}
        }
    }
    if let Some((reply, reply_id, reply_at)) = last.take() {
        let mut p = base("AfterAgent");
        p["prompt"] = prompt.as_str().into();
        p["prompt_response"] = reply.into();
        p["stop_hook_active"] = false.into();
        builder.push(p, reply_at, format!("AfterAgent|{reply_id}"));
    }
    out.sessions.push(builder.session);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_utc_milliseconds() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time("2026-02-18T15:09:10.006Z"),
            Some(1_771_427_350_006)
        );
        assert_eq!(
            parse_time("2026-02-18T16:09:10.006+01:00"),
            Some(1_771_427_350_006)
        );
        assert_eq!(parse_time("yesterday"), None);
    }
}
