//! Importing Kimi Code's history: `session_index.jsonl` names each session's directory, whose
//! `agents/main/wire.jsonl` holds the session.

use anyhow::bail;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::import::{Builder, Import, Read, Source, env_dir, read_jsonl, str_of, time_in};

/// How Kimi Code's history is imported.
pub const IMPORT: Import = Import {
    sources: |path, read| {
        let root = path.map_or_else(
            || env_dir("KIMI_CODE_HOME", ".kimi-code"),
            Path::to_path_buf,
        );
        let index = if root.is_file() {
            root
        } else {
            root.join("session_index.jsonl")
        };
        if !index.is_file() {
            bail!("no kimi session index at {}", index.display());
        }
        let mut out = Vec::new();
        for (id, dir, work) in kimi_index(&index, read)? {
            let wire = dir.join("agents/main/wire.jsonl");
            if wire.is_file() {
                out.push(Source {
                    path: wire,
                    session: id,
                    project: work,
                });
            }
        }
        Ok(out)
    },
    read: |source, out| kimi(&source.path, &source.session, &source.project, out),
};

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
    let base =
        |event: &str| json!({"hook_event_name": event, "session_id": session_id, "cwd": work_dir});
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    // Streamed assistant text, per step, in order.
    let mut steps: Vec<(String, String)> = Vec::new();
    let mut at = 0;
    for (line, record) in lines {
        // Kimi's times are Unix milliseconds; a record whose time is not an integer in range
        // is reported and skipped, like a line that does not parse.
        let (time, created) = match (
            time_in(record.get("time"), 1),
            time_in(record.get("created_at"), 1),
        ) {
            (Ok(time), Ok(created)) => (time, created),
            (Err(error), _) | (_, Err(error)) => {
                out.bad_line(wire, line, error);
                continue;
            }
        };
        at = time.unwrap_or(at);
        builder.session.records += 1;
        let record = Value::Object(record);
        match str_of(&record, "type") {
            "metadata" => {
                let created = created.unwrap_or(at);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_out_of_range_is_an_error_for_its_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("wire.jsonl");
        let prompt = |text: &str, time: Value| {
            json!({"type": "turn.prompt", "input": text, "origin": {"kind": "user"},
                   "time": time})
            .to_string()
                + "\n"
        };
        let text = [
            json!({"type": "metadata", "created_at": u64::MAX}).to_string() + "\n",
            prompt("huge", json!(99_999_999_999_999_999_999_f64)),
            prompt("negative", json!(-5)),
            prompt("text", json!("soon")),
            prompt("kept", json!(1_779_256_800_100_i64)),
            prompt("no time", Value::Null),
        ]
        .concat();
        std::fs::write(&wire, text).unwrap();
        let mut read = Read::default();
        kimi(&wire, "k1", "/p", &mut read).unwrap();
        let bad: Vec<usize> = read.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(bad, [1, 2, 3, 4]);
        assert!(read.bad_lines[0].error.contains("not a time in range"));
        let items: Vec<(&str, i64)> = read.sessions[0]
            .items
            .iter()
            .map(|i| (i.payload["prompt"].as_str().unwrap(), i.at_ms))
            .collect();
        assert_eq!(
            items,
            [("kept", 1_779_256_800_100), ("no time", 1_779_256_800_100)]
        );
    }
}
