//! Importing Gemini CLI's history: `~/.gemini/tmp/<project>/chats/session-*.json[l]`.

use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::Path;

use crate::import::{
    BadLine, Builder, Import, Read, Source, files_at, home, name_of, parse_time, read_jsonl, str_of,
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
