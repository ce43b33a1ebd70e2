//! Importing Codex's history: `$CODEX_HOME/sessions/**/rollout-*.jsonl`.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

use crate::import::{
    Builder, Import, Read, Source, env_dir, files_at, name_of, read_jsonl, str_of, time_of,
};

/// How Codex's history is imported.
pub const IMPORT: Import = Import {
    sources: |path, _| {
        let root = path.map_or_else(
            || env_dir("CODEX_HOME", ".codex").join("sessions"),
            Path::to_path_buf,
        );
        Ok(files_at(root, &|p| {
            name_of(p).starts_with("rollout-") && name_of(p).ends_with(".jsonl")
        })
        .into_iter()
        .map(Source::file)
        .collect())
    },
    read: |source, out| codex(&source.path, out),
};

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
    let mut model = String::new();
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut last_text: Option<(String, i64)> = None;
    let mut started = false;
    let mut at = 0;
    for (line, record) in lines {
        // A record whose time is malformed is reported and skipped, like a line that does
        // not parse; one without a time takes the time of the record before it.
        match time_of(record.get("timestamp")) {
            Ok(time) => at = time.unwrap_or(at),
            Err(error) => {
                out.bad_line(path, line, error);
                continue;
            }
        }
        builder.session.records += 1;
        let record = Value::Object(record);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::{MAX_LINE_BYTES, parse_time};

    fn line(ts: &str, kind: &str, payload: Value) -> String {
        json!({"timestamp": ts, "type": kind, "payload": payload}).to_string() + "\n"
    }

    fn prompt(ts: &str, text: &str) -> String {
        line(
            ts,
            "event_msg",
            json!({"type": "user_message", "message": text}),
        )
    }

    fn prompts(read: &Read) -> Vec<(String, i64)> {
        read.sessions[0]
            .items
            .iter()
            .filter(|i| i.payload["hook_event_name"] == "UserPromptSubmit")
            .map(|i| (i.payload["prompt"].as_str().unwrap().to_owned(), i.at_ms))
            .collect()
    }

    #[test]
    fn a_malformed_time_is_an_error_for_its_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout-2026-x.jsonl");
        let text = [
            line(
                "2026-08-21T10:00:00.000Z",
                "session_meta",
                json!({"id": "s1", "cwd": "/p"}),
            ),
            prompt("2026-13-99T25:61:00Z", "rolled over"),
            prompt("2026-08-21T10:00:0é", "not ascii"),
            prompt("2026-08-21T10:00:02.000Z", "kept"),
            prompt("", "no time"),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        let mut read = Read::default();
        codex(&path, &mut read).unwrap();
        let bad: Vec<usize> = read.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(bad, [2, 3]);
        assert!(read.bad_lines[0].error.contains("malformed timestamp"));
        let at = parse_time("2026-08-21T10:00:02.000Z").unwrap();
        assert_eq!(
            prompts(&read),
            [("kept".to_owned(), at), ("no time".to_owned(), at)]
        );
        assert_eq!(read.sessions[0].records, 3);
    }

    #[test]
    fn an_oversized_line_is_reported_and_the_rest_of_the_file_imported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout-2026-x.jsonl");
        let text = [
            line(
                "2026-08-21T10:00:00.000Z",
                "session_meta",
                json!({"id": "s1", "cwd": "/p"}),
            ),
            prompt("2026-08-21T10:00:01.000Z", &"x".repeat(MAX_LINE_BYTES)),
            prompt("2026-08-21T10:00:02.000Z", "after"),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        let mut read = Read::default();
        codex(&path, &mut read).unwrap();
        assert_eq!(read.bad_lines.len(), 1);
        assert_eq!(read.bad_lines[0].line, 2);
        assert!(read.bad_lines[0].error.contains("line longer than"));
        let texts: Vec<String> = prompts(&read).into_iter().map(|(t, _)| t).collect();
        assert_eq!(texts, ["after"]);
    }
}
