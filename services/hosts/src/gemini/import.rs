//! Importing Gemini CLI's history: `~/.gemini/tmp/<project>/chats/session-*.json[l]`.

use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::Path;

use crate::import::{
    BadLine, Builder, Import, LIMITS, Read, Source, files_at, home, name_of, read_capped,
    read_jsonl, str_of, time_of,
};

/// How Gemini CLI's history is imported.
pub const IMPORT: Import = Import {
    sources: |path, _| {
        let root = path.map_or_else(|| home().join(".gemini/tmp"), Path::to_path_buf);
        let files = files_at(root, &|p| {
            let name = name_of(p);
            p.parent().is_some_and(|d| name_of(d) == "chats")
                && name.starts_with("session-")
                && (name.ends_with(".jsonl") || name.ends_with(".json"))
        });
        Ok(files
            .into_iter()
            .map(|f| {
                // `<tmp>/<project>/chats/<file>`: the project directory's name stands in for
                // the project when the file does not name its directories.
                let project = f
                    .parent()
                    .and_then(Path::parent)
                    .map(name_of)
                    .unwrap_or_default();
                Source {
                    path: f,
                    session: String::new(),
                    project,
                }
            })
            .collect())
    },
    read: |source, out| gemini(&source.path, &source.project, out),
};

/// Messages by id: the line each came from and the message.
type Messages = HashMap<String, (usize, Value)>;

/// A message or call id for an error message, cut to 40 characters (never inside one).
fn shown_id(id: &str) -> String {
    match id.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &id[..end]),
        None => id.to_owned(),
    }
}

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
    // The line that last set the start time, for reporting it (0 in a `.json` file).
    let mut start_line = 0;
    // Messages by id, in first-seen order, each with the line it came from (0 in a `.json`
    // file); a later record with the same id replaces it.
    let mut order: Vec<String> = Vec::new();
    let mut messages: Messages = HashMap::new();
    let mut records = 0;
    let put = |message: Value, line: usize, order: &mut Vec<String>, messages: &mut Messages| {
        let id = str_of(&message, "id").to_owned();
        if !messages.contains_key(&id) {
            order.push(id.clone());
        }
        messages.insert(id, (line, message));
    };
    if path.extension().is_some_and(|e| e == "json") {
        let record: Value = serde_json::from_slice(&read_capped(path, LIMITS)?).map_err(|e| {
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
            put(message, 0, &mut order, &mut messages);
        }
    } else {
        for (line, record) in read_jsonl(path, out)? {
            records += 1;
            if let Some(Value::Object(set)) = record.get("$set") {
                for (k, v) in set {
                    if k == "messages" {
                        order.clear();
                        messages.clear();
                        for message in v.as_array().cloned().unwrap_or_default() {
                            put(message, line, &mut order, &mut messages);
                        }
                    } else {
                        if k == "startTime" {
                            start_line = line;
                        }
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
                if record.contains_key("startTime") {
                    start_line = line;
                }
                meta.extend(record);
            } else {
                put(Value::Object(record), line, &mut order, &mut messages);
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
    // A malformed start time is reported; the session still starts, at an unknown time.
    let start = time_of(meta.get("startTime"))
        .unwrap_or_else(|error| {
            out.bad_line(path, start_line, format!("startTime: {error}"));
            None
        })
        .unwrap_or(0);
    let mut p = base("SessionStart");
    p["source"] = "startup".into();
    builder.push(p, start, "SessionStart".to_owned());
    let mut last: Option<(String, String, i64)> = None;
    let mut prompt = String::new();
    for id in &order {
        let Some((line, message)) = messages.get(id) else {
            continue;
        };
        // A message (or tool call) whose time is malformed is reported and skipped, like a
        // line that does not parse; one without a time takes the session's start.
        let at = match time_of(message.get("timestamp")) {
            Ok(at) => at.unwrap_or(start),
            Err(error) => {
                out.bad_line(path, *line, format!("message {}: {error}", shown_id(id)));
                continue;
            }
        };
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
                    let call_at = match time_of(call.get("timestamp")) {
                        Ok(call_at) => call_at.unwrap_or(at),
                        Err(error) => {
                            let call = shown_id(&call_id);
                            out.bad_line(path, *line, format!("tool call {call}: {error}"));
                            continue;
                        }
                    };
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
    fn a_malformed_time_is_an_error_for_its_message_or_call_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session-1.jsonl");
        let lines = [
            json!({"sessionId": "g1", "startTime": "2026-08-21T10:00:00.000Z",
                   "directories": ["/p"]}),
            json!({"id": "m1", "timestamp": "2026-08-21T25:00:00Z", "type": "user",
                   "content": "bad hour"}),
            json!({"id": "m2", "timestamp": "2026-08-21T10:00:02.000Z", "type": "user",
                   "content": "kept"}),
            json!({"id": "m3", "timestamp": "2026-08-21T10:00:03.000Z", "type": "gemini",
                   "content": "done", "toolCalls": [
                {"id": "t1", "name": "read_file", "timestamp": "2026-08-21T10:00:0é",
                 "status": "success"},
                {"id": "t2", "name": "read_file", "timestamp": "2026-08-21T10:00:02.500Z",
                 "status": "success"}]}),
        ];
        let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let mut read = Read::default();
        gemini(&path, "p", &mut read).unwrap();
        let bad: Vec<(usize, &str)> = read
            .bad_lines
            .iter()
            .map(|b| (b.line, b.error.as_str()))
            .collect();
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!(bad[0].0, 2);
        assert!(bad[0].1.starts_with("message m1: malformed timestamp"));
        assert_eq!(bad[1].0, 4);
        assert!(bad[1].1.starts_with("tool call t1: malformed timestamp"));
        let events: Vec<String> = read.sessions[0]
            .items
            .iter()
            .map(|i| {
                let event = i.payload["hook_event_name"].as_str().unwrap();
                format!("{event}|{}", i.key)
            })
            .collect();
        assert_eq!(
            events,
            [
                "SessionStart|SessionStart",
                "BeforeAgent|BeforeAgent|m2",
                "BeforeTool|BeforeTool|t2",
                "AfterTool|AfterTool|t2",
                "AfterAgent|AfterAgent|m3",
            ]
        );
    }

    #[test]
    fn a_malformed_start_time_is_reported_and_the_session_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session-1.json");
        let session = json!({"sessionId": "g1", "startTime": 17, "messages": [
            {"id": "m1", "timestamp": "2026-08-21T10:00:02.000Z", "type": "user",
             "content": "kept"}]});
        std::fs::write(&path, session.to_string()).unwrap();
        let mut read = Read::default();
        gemini(&path, "p", &mut read).unwrap();
        assert_eq!(read.bad_lines.len(), 1);
        assert_eq!(read.bad_lines[0].line, 0);
        assert!(read.bad_lines[0].error.starts_with("startTime: malformed"));
        assert_eq!(read.sessions[0].items.len(), 2);
    }
}
