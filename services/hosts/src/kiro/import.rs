//! Importing Kiro CLI's history: `$KIRO_HOME/sessions/cli/<id>.jsonl`.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

use crate::import::{
    Builder, Import, LIMITS, Read, Source, env_dir, files_at, read_capped, read_jsonl, str_of,
    time_in, time_of,
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
    let meta_path = path.with_extension("json");
    let meta: Value = read_capped(&meta_path, LIMITS)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let cwd = str_of(&meta, "cwd").to_owned();
    let lines = read_jsonl(path, out)?;
    let mut builder = Builder::new(&id, &cwd);
    let base = |event: &str| json!({"hook_event_name": event, "session_id": id, "cwd": cwd});
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut last_text: Option<String> = None;
    // A malformed creation time is reported; the session still starts, at an unknown time.
    let mut at = time_of(meta.get("created_at"))
        .unwrap_or_else(|error| {
            out.bad_line(&meta_path, 0, error);
            None
        })
        .unwrap_or(0);
    builder.push(base("agentSpawn"), at, "agentSpawn".to_owned());
    for (line, record) in lines {
        let record = Value::Object(record);
        let data = &record["data"];
        // Kiro's record times are Unix seconds: one that is not an integer, or whose
        // milliseconds would overflow or leave the range of times, is an error for its record.
        match time_in(data.get("meta").and_then(|m| m.get("timestamp")), 1000) {
            Ok(time) => at = time.unwrap_or(at),
            Err(error) => {
                out.bad_line(path, line, error);
                continue;
            }
        }
        builder.session.records += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_that_would_overflow_is_an_error_for_its_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.jsonl");
        std::fs::write(
            path.with_extension("json"),
            json!({"cwd": "/p", "created_at": "2026-02-30T10:00:00Z"}).to_string(),
        )
        .unwrap();
        let prompt = |id: &str, timestamp: Value| {
            json!({"kind": "Prompt", "data": {"message_id": id,
                "content": [{"kind": "text", "data": id}], "meta": {"timestamp": timestamp}}})
            .to_string()
                + "\n"
        };
        let text = [
            prompt("overflow", json!(i64::MAX)),
            prompt("past 9999", json!(300_000_000_000_i64)),
            prompt("before 1970", json!(-1)),
            prompt("kept", json!(1_779_256_800)),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        let mut read = Read::default();
        kiro(&path, &mut read).unwrap();
        let bad: Vec<(String, usize)> = read
            .bad_lines
            .iter()
            .map(|b| (b.file.rsplit('/').next().unwrap().to_owned(), b.line))
            .collect();
        assert_eq!(
            bad,
            [
                ("c1.json".to_owned(), 0),
                ("c1.jsonl".to_owned(), 1),
                ("c1.jsonl".to_owned(), 2),
                ("c1.jsonl".to_owned(), 3),
            ]
        );
        let prompts: Vec<(&str, i64)> = read.sessions[0]
            .items
            .iter()
            .filter(|i| i.payload["hook_event_name"] == "userPromptSubmit")
            .map(|i| (i.payload["prompt"].as_str().unwrap(), i.at_ms))
            .collect();
        assert_eq!(prompts, [("kept", 1_779_256_800_000)]);
        // The session still starts, at an unknown time.
        assert_eq!(read.sessions[0].items[0].at_ms, 0);
    }
}
