//! Importing Claude Code's history: `~/.claude/projects/**/<session>.jsonl` (main sessions; a
//! session's subagent files are read with it), replayed by [`super::transcript`] with the
//! record times.

use std::path::Path;

use crate::import::{
    BadLine, Builder, Import, Read, Source, env_dir, files_at, parse_time, str_of,
};

/// How Claude Code's history is imported.
pub const IMPORT: Import = Import {
    sources: |path, _| {
        let root = path.map_or_else(
            || env_dir("CLAUDE_CONFIG_DIR", ".claude").join("projects"),
            Path::to_path_buf,
        );
        // Main sessions only: subagent files are read with their session.
        Ok(files_at(root, &|p| {
            p.extension().is_some_and(|e| e == "jsonl")
                && !p.components().any(|c| c.as_os_str() == "subagents")
        })
        .into_iter()
        .map(Source::file)
        .collect())
    },
    read: |source, out| claude_code(&source.path, out),
};

pub fn claude_code(path: &Path, out: &mut Read) -> anyhow::Result<()> {
    let replay = super::transcript::claude_code_replay(path)?;
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
