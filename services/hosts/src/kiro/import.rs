//! Importing Kiro CLI's history: `$KIRO_HOME/sessions/cli/<id>.jsonl`.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

use crate::import::{
    Builder, Import, Read, Source, env_dir, files_at, parse_time, read_jsonl, str_of,
};

/// How Kiro CLI's history is imported.
pub const IMPORT: Import = Import {
    sources: |path, _| {
        let root = path.map_or_else(
            || env_dir("KIRO_HOME", ".kiro").join("sessions/cli"),
            Path::to_path_buf,
        );
        Ok(
            files_at(root, &|p| p.extension().is_some_and(|e| e == "jsonl"))
                .into_iter()
                .map(Source::file)
                .collect(),
        )
    },
    read: |source, out| kiro(&source.path, out),
};

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
