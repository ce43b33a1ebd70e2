//! Replays a Claude Code JSONL transcript as the hook payloads Claude Code would have sent.
//!
//! Claude Code writes every session to `~/.claude/projects/<cwd>/<session>.jsonl` and each
//! subagent to `<session>/subagents/agent-<id>.jsonl` beside it. This module turns such a file
//! back into the ordered stream of command-hook stdin payloads (`SessionStart`,
//! `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, …) so that an end-to-end test can push real
//! sessions through the real hook binary, and so that past sessions can later be imported
//! through the same path as live ones.
//!
//! Alongside the payloads it computes [`Expected`] counts in a separate pass over the raw
//! records, so that a test comparing what got stored against them checks the pipeline against
//! the transcript rather than the converter against itself.
//!
//! Reconstruction rules, in file order:
//! - `SessionStart{source:"startup"}` first and `SessionEnd{reason:"other"}` last.
//! - Every assistant `tool_use` block gives `PreToolUse`; its `tool_result` (paired by
//!   `tool_use_id`, never by position) gives `PostToolUse`, or `PostToolUseFailure` when
//!   `is_error` is set. A call without a result gets only `PreToolUse`.
//! - Every genuine human prompt gives `UserPromptSubmit` (see [`classify_user`]).
//! - A turn is the stretch from one turn-starting user record (a genuine prompt, a background
//!   task notification or a slash command) to the next, or to the end of the file. A turn that
//!   holds assistant text gives `Stop` when it ends, unless the user interrupted it (Claude Code
//!   does not run Stop hooks on an interrupt). A manual compaction also ends the turn before it,
//!   because `/compact` only runs between turns. On the real transcripts this matches the
//!   `system/stop_hook_summary` records Claude Code writes after running Stop hooks.
//! - Every `system/compact_boundary` gives `PreCompact`, then `PostCompact` carrying the summary
//!   from the `isCompactSummary` record that follows, then (in the main session)
//!   `SessionStart{source:"compact"}`.
//! - A subagent's events sit between the parent's `PreToolUse` and `PostToolUse` of the
//!   `Task`/`Agent` call that spawned it, wrapped in `SubagentStart`/`SubagentStop`. A subagent
//!   file that no call can be tied to is placed by the timestamp of its first record. The
//!   `agent-acompact-*` files are the compaction summariser, not a subagent the user started;
//!   Claude Code fires no subagent hooks for it, so they are left out.
//!
//! Lines that fail to parse, lines longer than [`crate::import::MAX_LINE_BYTES`] and records
//! whose `timestamp` is not a real time are skipped and reported in [`Replay::bad_lines`]; a
//! last line without its newline is still being written and is left out until it is complete;
//! unknown record types are ignored and records repeating an already-seen `uuid` count once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

/// A transcript converted into hook payloads, with the counts a store should end up holding.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The session id shared by the main file and its subagent files.
    pub session_id: String,
    /// Hook payloads in the order Claude Code would have fired them.
    pub payloads: Vec<Value>,
    /// Counts computed from the transcript records independently of `payloads`.
    pub expected: Expected,
    /// The timestamp of the record behind each payload (same order as `payloads`).
    pub times: Vec<Option<String>>,
    /// Records read from the main file and its subagent files.
    pub records: usize,
    /// Lines that are not JSON objects, other than a last line still being written.
    pub bad_lines: Vec<BadLine>,
    /// Files whose last line has no newline yet: it is left for the next import.
    pub partial_files: Vec<PathBuf>,
}

/// A transcript line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub path: PathBuf,
    /// 1-based line number.
    pub line: usize,
    pub error: String,
}

/// Event counts for one replayed session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Events per `hook_event_name` (e.g. "PostToolUse" -> 120).
    pub per_event: BTreeMap<String, usize>,
    /// Completed tool calls (PostToolUse + PostToolUseFailure) per tool name.
    pub per_tool: BTreeMap<String, usize>,
    /// Genuine human prompts (`UserPromptSubmit` events).
    pub prompts: usize,
    /// Context compactions (`PreCompact` events), including any inside subagents.
    pub compactions: usize,
}

/// Subagent files whose id starts with this are the compaction summariser.
const COMPACTION_AGENT_PREFIX: &str = "acompact";

/// Prefixes of user records that Claude Code writes for slash and local commands.
const COMMAND_PREFIXES: [&str; 5] = [
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
];

/// Convert one main session file (subagent files are found in `<stem>/subagents/` beside it when present).
///
/// # Errors
///
/// Fails when the main file or the subagent directory cannot be read; bad lines inside a
/// file are skipped rather than reported.
pub fn claude_code_replay(path: &Path) -> Result<Replay> {
    let mut seen_uuids = HashSet::new();
    let main = read_transcript(path, &mut seen_uuids)?;
    let subagents = read_subagents(path, &mut seen_uuids)?;

    let session_id = main
        .records
        .iter()
        .find_map(|record| str_at(record, "sessionId"))
        .map(str::to_owned)
        .or_else(|| {
            path.file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
        })
        .filter(|id| !id.is_empty())
        .with_context(|| format!("no session id for transcript {}", path.display()))?;

    let links = correlate(&main, &subagents);
    let mut replayer = Replayer {
        session_id: session_id.clone(),
        transcript_path: path.to_string_lossy().into_owned(),
        subagents: &subagents,
        emitted: vec![false; subagents.len()],
        links,
    };
    let (payloads, times) = replayer.run(&main.records);
    let expected = count_records(&main, &subagents);
    let files = std::iter::once(&main).chain(subagents.iter().map(|s| &s.file));
    let mut records = 0;
    let mut bad_lines = Vec::new();
    let mut partial_files = Vec::new();
    for file in files {
        records += file.records.len();
        bad_lines.extend(file.bad_lines.iter().cloned());
        if file.partial {
            partial_files.push(file.path.clone());
        }
    }
    Ok(Replay {
        session_id,
        payloads,
        expected,
        times,
        records,
        bad_lines,
        partial_files,
    })
}

/// Count events straight from payloads, for comparison with [`Replay::expected`].
pub fn payload_counts(payloads: &[Value]) -> Expected {
    let mut counts = Expected::default();
    for payload in payloads {
        let event = str_at(payload, "hook_event_name").unwrap_or_default();
        *counts.per_event.entry(event.to_owned()).or_default() += 1;
        match event {
            "PostToolUse" | "PostToolUseFailure" => {
                let tool = str_at(payload, "tool_name").unwrap_or_default();
                *counts.per_tool.entry(tool.to_owned()).or_default() += 1;
            }
            "UserPromptSubmit" => counts.prompts += 1,
            "PreCompact" => counts.compactions += 1,
            _ => {}
        }
    }
    counts
}

/// One parsed transcript file.
struct Transcript {
    path: PathBuf,
    /// Object records in file order, without unparseable lines and repeated uuids.
    records: Vec<Value>,
    bad_lines: Vec<BadLine>,
    /// Whether the last line has no newline yet (and was left out).
    partial: bool,
}

/// A subagent transcript and the agent id taken from its file name.
struct Subagent {
    agent_id: String,
    file: Transcript,
}

fn read_transcript(path: &Path, seen_uuids: &mut HashSet<String>) -> Result<Transcript> {
    read_transcript_with(path, crate::import::LIMITS, seen_uuids)
}

/// [`read_transcript`] within `limits`: the file is read a line at a time, and a line too long
/// for them is reported rather than held in memory (see [`crate::import::read_lines`]).
fn read_transcript_with(
    path: &Path,
    limits: crate::import::Limits,
    seen_uuids: &mut HashSet<String>,
) -> Result<Transcript> {
    let mut records = Vec::new();
    let mut bad_lines = Vec::new();
    let mut bad = |line: usize, error: String| {
        bad_lines.push(BadLine {
            path: path.to_path_buf(),
            line,
            error,
        });
    };
    // A last line without its newline is still being written: it is left for next time.
    let partial = crate::import::read_lines(path, limits, |number, line| {
        // A bad line is reported and skipped; the rest of the file is still good.
        let line = match line {
            Ok(line) => line.trim(),
            Err(error) => return bad(number, error),
        };
        if line.is_empty() {
            return;
        }
        let record = match serde_json::from_str::<Value>(line) {
            Ok(record) if record.is_object() => record,
            Ok(_) => return bad(number, "not a json object".to_owned()),
            Err(error) => return bad(number, error.to_string()),
        };
        // The replay orders and times events by these strings: one that is not a real time
        // is an error for its record, not a time that sorts or parses as something else.
        if let Err(error) = crate::import::time_of(record.get("timestamp")) {
            return bad(number, error);
        }
        if let Some(uuid) = str_at(&record, "uuid")
            && !seen_uuids.insert(uuid.to_owned())
        {
            return;
        }
        records.push(record);
    })
    .with_context(|| format!("reading transcript {}", path.display()))?;
    Ok(Transcript {
        path: path.to_path_buf(),
        records,
        bad_lines,
        partial,
    })
}

/// The subagent files in `<stem>/subagents/`, sorted by name, without compaction agents.
fn read_subagents(main: &Path, seen_uuids: &mut HashSet<String>) -> Result<Vec<Subagent>> {
    let Some(stem) = main.file_stem() else {
        return Ok(Vec::new());
    };
    let dir = main.with_file_name(stem).join("subagents");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing subagent transcripts in {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        // A directory (or anything else) named like a subagent file is not one.
        .filter(|path| path.is_file())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let agent_id = name.strip_prefix("agent-")?.strip_suffix(".jsonl")?;
            Some((agent_id.to_owned(), path.clone()))
        })
        .filter(|(agent_id, _)| !agent_id.starts_with(COMPACTION_AGENT_PREFIX))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(agent_id, path)| {
            Ok(Subagent {
                agent_id,
                file: read_transcript(&path, seen_uuids)?,
            })
        })
        .collect()
}

/// How subagent files tie to the tool calls that spawned them.
#[derive(Default)]
struct Links {
    /// Spawning `tool_use` id → index into the subagent list.
    by_tool_use: HashMap<String, usize>,
    /// Subagent index → agent type.
    agent_types: HashMap<usize, String>,
}

/// Tie subagent files to spawning calls through the `agentId` on the call's result and on
/// `agent_progress` records, and take each agent's type from the call's `subagent_type`.
fn correlate(main: &Transcript, subagents: &[Subagent]) -> Links {
    let index: HashMap<&str, usize> = subagents
        .iter()
        .enumerate()
        .map(|(i, subagent)| (subagent.agent_id.as_str(), i))
        .collect();
    let mut links = Links::default();
    let mut call_types: HashMap<String, String> = HashMap::new();
    let mut result_types: HashMap<usize, String> = HashMap::new();
    let files = std::iter::once(main).chain(subagents.iter().map(|subagent| &subagent.file));
    for record in files.flat_map(|file| &file.records) {
        match str_at(record, "type").unwrap_or_default() {
            "assistant" => {
                for block in blocks(record) {
                    if str_at(block, "type") == Some("tool_use")
                        && matches!(str_at(block, "name"), Some("Task" | "Agent"))
                        && let (Some(id), Some(kind)) = (
                            str_at(block, "id"),
                            block["input"]["subagent_type"].as_str(),
                        )
                    {
                        call_types.insert(id.to_owned(), kind.to_owned());
                    }
                }
            }
            "progress" => {
                let agent = record["data"]["agentId"].as_str();
                let call = str_at(record, "parentToolUseID");
                if let (Some(agent), Some(call)) = (agent, call)
                    && let Some(&i) = index.get(agent)
                {
                    links.by_tool_use.entry(call.to_owned()).or_insert(i);
                }
            }
            "user" => {
                let result = &record["toolUseResult"];
                let Some(&i) = result["agentId"].as_str().and_then(|a| index.get(a)) else {
                    continue;
                };
                if let Some(kind) = result["agentType"].as_str() {
                    result_types.insert(i, kind.to_owned());
                }
                for block in blocks(record) {
                    if let Some(call) = str_at(block, "tool_use_id") {
                        links.by_tool_use.entry(call.to_owned()).or_insert(i);
                    }
                }
            }
            _ => {}
        }
    }
    for (call, &i) in &links.by_tool_use {
        if let Some(kind) = call_types.get(call) {
            links.agent_types.entry(i).or_insert_with(|| kind.clone());
        }
    }
    for (i, kind) in result_types {
        links.agent_types.entry(i).or_insert(kind);
    }
    links
}

/// Which agent fired an event, for the `agent_id`/`agent_type` fields.
#[derive(Clone)]
struct AgentInfo {
    id: String,
    kind: Option<String>,
}

/// One emitted payload with what placing subagents needs to know about it.
struct Item {
    /// The timestamp of the record that caused the event.
    ts: Option<String>,
    /// Whether the item belongs to a subagent block, which must never be split.
    nested: bool,
    payload: Value,
}

/// The running state of one transcript file being replayed.
struct Stream {
    /// `None` for the main session.
    agent: Option<AgentInfo>,
    cwd: String,
    /// The most recent `permissionMode`; Claude Code reports the session's current mode.
    mode: Option<String>,
    /// The most recent real model, for `SessionStart` after a compaction.
    model: Option<String>,
    /// The timestamp of the most recent record, for events that have no record of their own.
    ts: Option<String>,
    items: Vec<Item>,
}

/// Assistant output seen in the turn that is still open.
#[derive(Default)]
struct Turn {
    last_text: Option<String>,
    /// When the turn's last assistant record was written, which is when `Stop` fired.
    ts: Option<String>,
}

/// A compaction whose `PostCompact` waits for the summary record that follows the boundary.
struct PendingCompact {
    trigger: String,
}

struct Replayer<'a> {
    session_id: String,
    transcript_path: String,
    subagents: &'a [Subagent],
    links: Links,
    /// Which subagent blocks have been placed, so each appears exactly once.
    emitted: Vec<bool>,
}

impl Replayer<'_> {
    fn run(&mut self, records: &[Value]) -> (Vec<Value>, Vec<Option<String>>) {
        let first = |key: &str| records.iter().find_map(|r| str_at(r, key));
        let model = records
            .iter()
            .filter(|r| str_at(r, "type") == Some("assistant"))
            .find_map(real_model);
        let mut main = Stream {
            agent: None,
            cwd: first("cwd").unwrap_or_default().to_owned(),
            mode: first("permissionMode").map(str::to_owned),
            model: model.map(str::to_owned),
            ts: first("timestamp").map(str::to_owned),
            items: Vec::new(),
        };
        let mut start = json!({"source": "startup"});
        if let Some(model) = model {
            start["model"] = model.into();
        }
        self.emit(&mut main, "SessionStart", start);
        self.walk(records, &mut main);

        // Subagent files no call could be tied to still happened: place each before the first
        // main-session event that is later than its first record, never inside another block.
        for i in 0..self.subagents.len() {
            if self.emitted[i] {
                continue;
            }
            self.emitted[i] = true;
            let block = self.subagent_block(i, &main);
            let first_ts = block
                .first()
                .and_then(|item| item.ts.as_deref())
                .map(ts_key);
            let at = first_ts
                .and_then(|first| {
                    main.items.iter().skip(1).position(|item| {
                        !item.nested && item.ts.as_deref().is_some_and(|t| ts_key(t) > first)
                    })
                })
                .map_or(main.items.len(), |p| p + 1);
            main.items.splice(at..at, block);
        }

        self.emit(&mut main, "SessionEnd", json!({"reason": "other"}));
        main.items
            .into_iter()
            .map(|item| (item.payload, item.ts))
            .unzip()
    }

    /// Replay one file's records into `out`, returning the last assistant text it holds.
    fn walk(&mut self, records: &[Value], out: &mut Stream) -> Option<String> {
        let is_main = out.agent.is_none();
        // Calls waiting for their result: tool_use id → (tool name, input).
        let mut open_calls: HashMap<String, (String, Value)> = HashMap::new();
        let mut started_calls: HashSet<String> = HashSet::new();
        let mut compact: Option<PendingCompact> = None;
        let mut turn = Turn::default();
        let mut last_text = None;

        for record in records {
            let kind = str_at(record, "type").unwrap_or_default();
            if !matches!(kind, "user" | "assistant" | "system") {
                continue;
            }
            if let Some(cwd) = str_at(record, "cwd") {
                out.cwd = cwd.to_owned();
            }
            if let Some(mode) = str_at(record, "permissionMode") {
                out.mode = Some(mode.to_owned());
            }
            if let Some(ts) = str_at(record, "timestamp") {
                out.ts = Some(ts.to_owned());
            }
            if kind == "user" && flag(record, "isCompactSummary") {
                if let Some(pending) = compact.take() {
                    self.finish_compact(
                        out,
                        &pending,
                        &content_text(&record["message"]["content"]),
                    );
                }
                continue;
            }
            // Anything else after a boundary means there was no summary record to wait for.
            if let Some(pending) = compact.take() {
                self.finish_compact(out, &pending, "");
            }
            match kind {
                "assistant" => {
                    if let Some(model) = real_model(record) {
                        out.model = Some(model.to_owned());
                    }
                    turn.ts.clone_from(&out.ts);
                    for block in blocks(record) {
                        match str_at(block, "type") {
                            Some("text") => {
                                if let Some(text) = str_at(block, "text")
                                    && !text.trim().is_empty()
                                {
                                    turn.last_text = Some(text.to_owned());
                                    last_text = Some(text.to_owned());
                                }
                            }
                            Some("tool_use") => {
                                let Some(id) = str_at(block, "id") else {
                                    continue;
                                };
                                if !started_calls.insert(id.to_owned()) {
                                    continue;
                                }
                                let name = str_at(block, "name").unwrap_or_default().to_owned();
                                let input = block.get("input").cloned().unwrap_or(json!({}));
                                self.emit(
                                    out,
                                    "PreToolUse",
                                    json!({"tool_name": name, "tool_input": input, "tool_use_id": id}),
                                );
                                open_calls.insert(id.to_owned(), (name, input));
                                if let Some(&i) = self.links.by_tool_use.get(id)
                                    && !self.emitted[i]
                                {
                                    self.emitted[i] = true;
                                    let block = self.subagent_block(i, out);
                                    out.items.extend(block);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                "user" => {
                    self.finish_calls(out, record, &mut open_calls);
                    if is_main {
                        match classify_user(record) {
                            UserKind::Prompt(prompt) => {
                                self.close_turn(out, &mut turn);
                                self.emit(out, "UserPromptSubmit", json!({"prompt": prompt}));
                            }
                            UserKind::TurnStart => self.close_turn(out, &mut turn),
                            // An interrupted turn ends without Stop hooks.
                            UserKind::Interrupt => turn = Turn::default(),
                            UserKind::Other => {}
                        }
                    }
                }
                "system" if str_at(record, "subtype") == Some("compact_boundary") => {
                    let trigger = record["compactMetadata"]["trigger"]
                        .as_str()
                        .unwrap_or("auto")
                        .to_owned();
                    if is_main && trigger == "manual" {
                        self.close_turn(out, &mut turn);
                    }
                    self.emit(
                        out,
                        "PreCompact",
                        json!({"trigger": trigger, "custom_instructions": ""}),
                    );
                    compact = Some(PendingCompact { trigger });
                }
                _ => {}
            }
        }
        if let Some(pending) = compact.take() {
            self.finish_compact(out, &pending, "");
        }
        if is_main {
            self.close_turn(out, &mut turn);
        }
        last_text
    }

    /// Fire `PostToolUse` or `PostToolUseFailure` for each result in a user record whose call
    /// is still open; a result for an unknown or already finished call is ignored.
    fn finish_calls(
        &self,
        out: &mut Stream,
        record: &Value,
        open_calls: &mut HashMap<String, (String, Value)>,
    ) {
        let results: Vec<&Value> = blocks(record)
            .iter()
            .filter(|block| str_at(block, "type") == Some("tool_result"))
            .collect();
        // `toolUseResult` describes the record's only result; older files that batch several
        // results in one record fall back to each block's content.
        let structured = record
            .get("toolUseResult")
            .filter(|value| !value.is_null() && results.len() == 1);
        for result in results {
            let Some(id) = str_at(result, "tool_use_id") else {
                continue;
            };
            let Some((name, input)) = open_calls.remove(id) else {
                continue;
            };
            let content = result.get("content").cloned().unwrap_or(json!(""));
            if result["is_error"].as_bool() == Some(true) {
                self.emit(
                    out,
                    "PostToolUseFailure",
                    json!({"tool_name": name, "tool_input": input, "tool_use_id": id,
                           "error": content_text(&content)}),
                );
            } else {
                let response = structured.cloned().unwrap_or(content);
                self.emit(
                    out,
                    "PostToolUse",
                    json!({"tool_name": name, "tool_input": input,
                           "tool_response": response, "tool_use_id": id}),
                );
            }
        }
    }

    /// Subagent `i`'s events wrapped in `SubagentStart`/`SubagentStop`, marked as one block.
    fn subagent_block(&mut self, i: usize, parent: &Stream) -> Vec<Item> {
        let subagents = self.subagents;
        let subagent = &subagents[i];
        let records = &subagent.file.records;
        let first = |key: &str| records.iter().find_map(|r| str_at(r, key));
        let mut stream = Stream {
            agent: Some(AgentInfo {
                id: subagent.agent_id.clone(),
                kind: self.links.agent_types.get(&i).cloned(),
            }),
            cwd: first("cwd").unwrap_or(&parent.cwd).to_owned(),
            mode: parent.mode.clone(),
            model: None,
            ts: first("timestamp").map(str::to_owned),
            items: Vec::new(),
        };
        self.emit(&mut stream, "SubagentStart", json!({}));
        let last_text = self.walk(records, &mut stream);
        let transcript = subagent.file.path.to_string_lossy().into_owned();
        self.emit(
            &mut stream,
            "SubagentStop",
            json!({"stop_hook_active": false, "agent_transcript_path": transcript,
                   "last_assistant_message": last_text.unwrap_or_default()}),
        );
        for item in &mut stream.items {
            item.nested = true;
        }
        stream.items
    }

    fn finish_compact(&self, out: &mut Stream, pending: &PendingCompact, summary: &str) {
        self.emit(
            out,
            "PostCompact",
            json!({"trigger": pending.trigger, "compact_summary": summary}),
        );
        if out.agent.is_none() {
            let mut start = json!({"source": "compact"});
            if let Some(model) = &out.model {
                start["model"] = model.as_str().into();
            }
            self.emit(out, "SessionStart", start);
        }
    }

    /// End the open turn, firing `Stop` when the assistant said something in it.
    fn close_turn(&self, out: &mut Stream, turn: &mut Turn) {
        let Turn { last_text, ts } = std::mem::take(turn);
        if let Some(text) = last_text {
            self.emit_at(
                out,
                "Stop",
                ts,
                json!({"stop_hook_active": false, "last_assistant_message": text}),
            );
        }
    }

    /// Append one payload: the common fields Claude Code sends on every hook, then `fields`.
    fn emit(&self, out: &mut Stream, event: &str, fields: Value) {
        let ts = out.ts.clone();
        self.emit_at(out, event, ts, fields);
    }

    /// Like [`Self::emit`], for an event that happened at `ts` rather than at the last record.
    fn emit_at(&self, out: &mut Stream, event: &str, ts: Option<String>, fields: Value) {
        let mut payload = Map::new();
        payload.insert("session_id".into(), self.session_id.as_str().into());
        payload.insert(
            "transcript_path".into(),
            self.transcript_path.as_str().into(),
        );
        payload.insert("cwd".into(), out.cwd.as_str().into());
        payload.insert("hook_event_name".into(), event.into());
        if let Some(mode) = &out.mode {
            payload.insert("permission_mode".into(), mode.as_str().into());
        }
        if let Some(agent) = &out.agent {
            payload.insert("agent_id".into(), agent.id.as_str().into());
            if let Some(kind) = &agent.kind {
                payload.insert("agent_type".into(), kind.as_str().into());
            }
        }
        if let Value::Object(fields) = fields {
            payload.extend(fields);
        }
        out.items.push(Item {
            ts,
            nested: false,
            payload: Value::Object(payload),
        });
    }
}

/// What a `user` record means for the hook stream.
#[derive(Debug, PartialEq, Eq)]
enum UserKind {
    /// A prompt a human typed: fires `UserPromptSubmit` and starts a turn.
    Prompt(String),
    /// Starts a turn without `UserPromptSubmit`: a slash or local command, or a background
    /// task notification that Claude Code feeds to the model on its own.
    TurnStart,
    /// Claude Code's "[Request interrupted by user…]" marker: the turn ends without `Stop`.
    Interrupt,
    /// Tool results, injected context, compaction summaries, subagent records.
    Other,
}

/// Classify a record by the genuine-prompt rules: a `user` record whose content is a string
/// or text blocks without `tool_result`, not `isMeta`, not `isCompactSummary`, not a command
/// wrapper and not on a sidechain. Interrupt markers and task notifications are not prompts
/// either, since no human typed them.
fn classify_user(record: &Value) -> UserKind {
    if str_at(record, "type") != Some("user")
        || flag(record, "isMeta")
        || flag(record, "isCompactSummary")
        || flag(record, "isVisibleInTranscriptOnly")
        || flag(record, "isSidechain")
    {
        return UserKind::Other;
    }
    let content = &record["message"]["content"];
    let text = match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            let has = |kind: &str| blocks.iter().any(|b| str_at(b, "type") == Some(kind));
            if has("tool_result") || !(has("text") || has("image")) {
                return UserKind::Other;
            }
            content_text(content)
        }
        _ => return UserKind::Other,
    };
    let start = text.trim_start();
    if start.starts_with("[Request interrupted by user") {
        UserKind::Interrupt
    } else if COMMAND_PREFIXES.iter().any(|p| start.starts_with(p))
        || start.contains("<command-name>")
        || start.starts_with("<task-notification>")
    {
        UserKind::TurnStart
    } else if start.is_empty() && !matches!(content, Value::Array(_)) {
        UserKind::Other
    } else {
        UserKind::Prompt(text)
    }
}

/// Count what the replay should produce straight from the records, without the replayer.
fn count_records(main: &Transcript, subagents: &[Subagent]) -> Expected {
    let mut per_event: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_tool: BTreeMap<String, usize> = BTreeMap::new();
    let mut compactions = 0;
    let files = std::iter::once(main).chain(subagents.iter().map(|subagent| &subagent.file));
    for (n, file) in files.enumerate() {
        let mut names: HashMap<&str, &str> = HashMap::new();
        let mut results: Vec<(&str, bool)> = Vec::new();
        let mut result_ids: HashSet<&str> = HashSet::new();
        for record in &file.records {
            match str_at(record, "type").unwrap_or_default() {
                "assistant" => {
                    for block in blocks(record) {
                        if str_at(block, "type") == Some("tool_use")
                            && let Some(id) = str_at(block, "id")
                        {
                            names
                                .entry(id)
                                .or_insert_with(|| str_at(block, "name").unwrap_or_default());
                        }
                    }
                }
                "user" => {
                    for block in blocks(record) {
                        if str_at(block, "type") == Some("tool_result")
                            && let Some(id) = str_at(block, "tool_use_id")
                            && result_ids.insert(id)
                        {
                            results.push((id, block["is_error"].as_bool() == Some(true)));
                        }
                    }
                }
                "system" if str_at(record, "subtype") == Some("compact_boundary") => {
                    compactions += 1;
                    if n == 0 {
                        *per_event.entry("SessionStart").or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        *per_event.entry("PreToolUse").or_default() += names.len();
        for (id, is_error) in results {
            let Some(name) = names.get(id) else { continue };
            *per_tool.entry((*name).to_owned()).or_default() += 1;
            let event = if is_error {
                "PostToolUseFailure"
            } else {
                "PostToolUse"
            };
            *per_event.entry(event).or_default() += 1;
        }
    }
    let prompts = main
        .records
        .iter()
        .filter(|record| matches!(classify_user(record), UserKind::Prompt(_)))
        .count();
    *per_event.entry("SessionStart").or_default() += 1;
    *per_event.entry("SessionEnd").or_default() += 1;
    *per_event.entry("UserPromptSubmit").or_default() += prompts;
    *per_event.entry("PreCompact").or_default() += compactions;
    *per_event.entry("PostCompact").or_default() += compactions;
    *per_event.entry("SubagentStart").or_default() += subagents.len();
    *per_event.entry("SubagentStop").or_default() += subagents.len();
    *per_event.entry("Stop").or_default() += count_stops(&main.records);
    Expected {
        per_event: per_event
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(event, n)| (event.to_owned(), n))
            .collect(),
        per_tool,
        prompts,
        compactions,
    }
}

/// Count turns that end with assistant text and no interrupt after it. Turns are split at
/// turn-starting user records and manual compactions; the end of the file closes the last one.
fn count_stops(records: &[Value]) -> usize {
    let mut stops = 0;
    let mut answered = false;
    for record in records {
        let ends_turn = match str_at(record, "type").unwrap_or_default() {
            "assistant" => {
                answered |= blocks(record).iter().any(|block| {
                    str_at(block, "type") == Some("text")
                        && str_at(block, "text").is_some_and(|t| !t.trim().is_empty())
                });
                false
            }
            "user" => match classify_user(record) {
                UserKind::Prompt(_) | UserKind::TurnStart => true,
                UserKind::Interrupt => {
                    answered = false;
                    false
                }
                UserKind::Other => false,
            },
            "system" => {
                str_at(record, "subtype") == Some("compact_boundary")
                    && record["compactMetadata"]["trigger"].as_str() == Some("manual")
            }
            _ => false,
        };
        if ends_turn {
            stops += usize::from(answered);
            answered = false;
        }
    }
    stops + usize::from(answered)
}

/// A sort key for an ISO-8601 UTC timestamp: the fraction of a second is padded to nine
/// digits, so that `…:05Z`, `…:05.5Z` and `…:05.500Z` compare as the times they are.
fn ts_key(ts: &str) -> String {
    let ts = ts.trim_end_matches('Z');
    let (whole, fraction) = ts.split_once('.').unwrap_or((ts, ""));
    format!("{whole}.{fraction:0<9}")
}

/// The model of an assistant record, unless it is the `<synthetic>` placeholder of an API error.
fn real_model(record: &Value) -> Option<&str> {
    record["message"]["model"]
        .as_str()
        .filter(|model| !model.is_empty() && *model != "<synthetic>")
}

/// The text of a message or tool-result content: the string itself, or its text blocks joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| str_at(block, "type") == Some("text"))
            .filter_map(|block| str_at(block, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn blocks(record: &Value) -> &[Value] {
    record["message"]["content"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn str_at<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

fn flag(value: &Value, key: &str) -> bool {
    value.get(key).and_then(Value::as_bool) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write `lines` as a main transcript (plus subagent files) and replay it.
    fn replay(lines: &[Value], subagents: &[(&str, &[Value])]) -> Replay {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, jsonl(lines)).unwrap();
        if !subagents.is_empty() {
            let sub_dir = dir.path().join("s1/subagents");
            std::fs::create_dir_all(&sub_dir).unwrap();
            for (id, lines) in subagents {
                std::fs::write(sub_dir.join(format!("agent-{id}.jsonl")), jsonl(lines)).unwrap();
            }
        }
        let replay = claude_code_replay(&path).unwrap();
        assert_eq!(payload_counts(&replay.payloads), replay.expected);
        replay
    }

    fn jsonl(lines: &[Value]) -> String {
        lines.iter().map(|line| format!("{line}\n")).collect()
    }

    fn events(replay: &Replay) -> Vec<String> {
        replay
            .payloads
            .iter()
            .map(|p| {
                let name = p["hook_event_name"].as_str().unwrap();
                match p["tool_name"].as_str() {
                    Some(tool) => format!("{name}:{tool}"),
                    None => name.to_owned(),
                }
            })
            .collect()
    }

    fn find<'r>(replay: &'r Replay, event: &str) -> Vec<&'r Value> {
        replay
            .payloads
            .iter()
            .filter(|p| p["hook_event_name"] == event)
            .collect()
    }

    fn prompt(uuid: &str, text: &str) -> Value {
        json!({"type": "user", "uuid": uuid, "sessionId": "s1", "cwd": "/w",
               "timestamp": format!("2026-01-01T00:00:{uuid}Z"), "permissionMode": "default",
               "message": {"role": "user", "content": text}})
    }

    fn say(uuid: &str, text: &str) -> Value {
        json!({"type": "assistant", "uuid": uuid, "sessionId": "s1", "cwd": "/w",
               "timestamp": format!("2026-01-01T00:00:{uuid}Z"),
               "message": {"model": "m1", "role": "assistant",
                           "content": [{"type": "text", "text": text}]}})
    }

    fn call(uuid: &str, id: &str, name: &str, input: Value) -> Value {
        json!({"type": "assistant", "uuid": uuid, "sessionId": "s1", "cwd": "/w",
               "timestamp": format!("2026-01-01T00:00:{uuid}Z"),
               "message": {"model": "m1", "role": "assistant",
                           "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}})
    }

    fn result(uuid: &str, id: &str, content: &str, is_error: bool, structured: Value) -> Value {
        json!({"type": "user", "uuid": uuid, "sessionId": "s1", "cwd": "/w",
               "timestamp": format!("2026-01-01T00:00:{uuid}Z"), "toolUseResult": structured,
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}]}})
    }

    #[test]
    fn results_pair_by_id_not_position() {
        let replay = replay(
            &[
                prompt("01", "list and read"),
                call("02", "t1", "Bash", json!({"command": "ls"})),
                call("03", "t2", "Read", json!({"file_path": "/a"})),
                call("04", "t3", "Grep", json!({"pattern": "x"})),
                result("05", "t2", "file a", false, Value::Null),
                result("06", "t1", "a b", false, json!({"stdout": "a b"})),
                say("07", "done"),
            ],
            &[],
        );
        assert_eq!(
            events(&replay),
            [
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse:Bash",
                "PreToolUse:Read",
                "PreToolUse:Grep",
                "PostToolUse:Read",
                "PostToolUse:Bash",
                "Stop",
                "SessionEnd"
            ]
        );
        let posts = find(&replay, "PostToolUse");
        assert_eq!(posts[0]["tool_use_id"], "t2");
        assert_eq!(posts[0]["tool_input"], json!({"file_path": "/a"}));
        assert_eq!(posts[0]["tool_response"], "file a");
        assert_eq!(posts[1]["tool_response"], json!({"stdout": "a b"}));
        assert_eq!(replay.expected.per_event["PreToolUse"], 3);
        assert_eq!(replay.expected.per_tool.get("Grep"), None);
        let start = &replay.payloads[0];
        assert_eq!(start["source"], "startup");
        assert_eq!(start["model"], "m1");
        assert_eq!(start["session_id"], "s1");
        assert_eq!(start["cwd"], "/w");
        assert_eq!(find(&replay, "Stop")[0]["last_assistant_message"], "done");
    }

    #[test]
    fn errors_become_failures_with_the_result_text() {
        let replay = replay(
            &[
                prompt("01", "push"),
                call("02", "t1", "Bash", json!({"command": "git push"})),
                result(
                    "03",
                    "t1",
                    "Exit code 128",
                    true,
                    json!("Error: Exit code 128"),
                ),
            ],
            &[],
        );
        let failure = find(&replay, "PostToolUseFailure");
        assert_eq!(failure.len(), 1);
        assert_eq!(failure[0]["error"], "Exit code 128");
        assert_eq!(failure[0]["tool_name"], "Bash");
        assert_eq!(failure[0]["tool_use_id"], "t1");
        assert!(find(&replay, "PostToolUse").is_empty());
        assert_eq!(replay.expected.per_tool["Bash"], 1);
        // The turn has no assistant text, so there is no Stop.
        assert!(find(&replay, "Stop").is_empty());
    }

    #[test]
    fn only_genuine_prompts_fire_user_prompt_submit() {
        let mut meta = prompt("02", "skill body");
        meta["isMeta"] = json!(true);
        let mut summary = prompt("03", "summary");
        summary["isCompactSummary"] = json!(true);
        let mut sidechain = prompt("04", "subagent task");
        sidechain["isSidechain"] = json!(true);
        let mut typed_blocks = prompt("09", "");
        typed_blocks["message"]["content"] = json!([{"type": "text", "text": "typed as blocks"}]);
        let mut interrupt = prompt("10", "");
        interrupt["message"]["content"] =
            json!([{"type": "text", "text": "[Request interrupted by user]"}]);
        let replay = replay(
            &[
                prompt("01", "real one"),
                meta,
                summary,
                sidechain,
                prompt("05", "<command-name>/mcp</command-name>"),
                prompt(
                    "06",
                    "<command-message>x</command-message>\n<command-name>/x</command-name>",
                ),
                prompt("07", "<local-command-stdout>ok</local-command-stdout>"),
                prompt("08", "<task-notification>\n<task-id>b1</task-id>"),
                typed_blocks,
                interrupt,
                result("11", "t0", "orphan", false, Value::Null),
            ],
            &[],
        );
        let prompts: Vec<&Value> = find(&replay, "UserPromptSubmit")
            .into_iter()
            .map(|p| &p["prompt"])
            .collect();
        assert_eq!(prompts, [&json!("real one"), &json!("typed as blocks")]);
        assert_eq!(replay.expected.prompts, 2);
        assert_eq!(
            find(&replay, "UserPromptSubmit")[0]["permission_mode"],
            "default"
        );
    }

    #[test]
    fn stop_ends_each_answered_turn_but_not_an_interrupted_one() {
        let mut interrupt = prompt("05", "");
        interrupt["message"]["content"] =
            json!([{"type": "text", "text": "[Request interrupted by user for tool use]"}]);
        let replay = replay(
            &[
                prompt("01", "first"),
                say("02", "answer one"),
                prompt("03", "second"),
                say("04", "working on it"),
                interrupt,
                prompt("06", "<task-notification>done</task-notification>"),
                say("07", "the task finished"),
            ],
            &[],
        );
        let stops: Vec<&Value> = find(&replay, "Stop")
            .into_iter()
            .map(|p| &p["last_assistant_message"])
            .collect();
        assert_eq!(stops, [&json!("answer one"), &json!("the task finished")]);
        assert_eq!(
            events(&replay),
            [
                "SessionStart",
                "UserPromptSubmit",
                "Stop",
                "UserPromptSubmit",
                "Stop",
                "SessionEnd"
            ]
        );
    }

    #[test]
    fn compaction_fires_pre_post_and_a_compact_session_start() {
        let boundary = |uuid: &str, trigger: &str| {
            json!({"type": "system", "subtype": "compact_boundary", "uuid": uuid, "parentUuid": null,
                   "sessionId": "s1", "cwd": "/w", "timestamp": format!("2026-01-01T00:00:{uuid}Z"),
                   "compactMetadata": {"trigger": trigger, "preTokens": 100}})
        };
        let mut summary = prompt("04", "This session is being continued");
        summary["isCompactSummary"] = json!(true);
        summary["isVisibleInTranscriptOnly"] = json!(true);
        let replay = replay(
            &[
                prompt("01", "go"),
                say("02", "step one"),
                boundary("03", "auto"),
                summary,
                say("05", "step two"),
                boundary("06", "manual"),
                prompt("07", "<command-name>/compact</command-name>"),
                prompt("08", "next"),
            ],
            &[],
        );
        assert_eq!(
            events(&replay),
            [
                "SessionStart",
                "UserPromptSubmit",
                "PreCompact",
                "PostCompact",
                "SessionStart",
                "Stop",
                "PreCompact",
                "PostCompact",
                "SessionStart",
                "UserPromptSubmit",
                "SessionEnd"
            ]
        );
        let pre = find(&replay, "PreCompact");
        assert_eq!(pre[0]["trigger"], "auto");
        assert_eq!(pre[0]["custom_instructions"], "");
        let post = find(&replay, "PostCompact");
        assert_eq!(
            post[0]["compact_summary"],
            "This session is being continued"
        );
        assert_eq!(post[1]["trigger"], "manual");
        assert_eq!(post[1]["compact_summary"], "");
        let starts = find(&replay, "SessionStart");
        assert_eq!(starts[1]["source"], "compact");
        assert_eq!(starts[1]["model"], "m1");
        // The auto compaction is mid-turn, so the only Stop closes the turn before /compact.
        assert_eq!(
            find(&replay, "Stop")[0]["last_assistant_message"],
            "step two"
        );
        assert_eq!(replay.expected.compactions, 2);
    }

    #[test]
    fn broken_lines_and_repeated_uuids_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        let text = format!(
            "{}\n\nnot json\n{}\n{}\n{}\n{{\"type\":\"user\",\"uuid\":\"09\",\"mess",
            prompt("01", "hi"),
            call("02", "t1", "Read", json!({})),
            result("03", "t1", "x", false, Value::Null),
            result("03", "t1", "x", false, Value::Null),
        );
        std::fs::write(&path, text).unwrap();
        let replay = claude_code_replay(&path).unwrap();
        assert_eq!(replay.session_id, "s1");
        assert_eq!(payload_counts(&replay.payloads), replay.expected);
        assert_eq!(replay.expected.per_event["PostToolUse"], 1);
        assert_eq!(replay.expected.per_tool["Read"], 1);
        assert_eq!(replay.payloads.len(), 5);
    }

    #[test]
    fn a_call_without_a_result_gets_only_pre_tool_use() {
        let replay = replay(
            &[prompt("01", "run"), call("02", "t1", "Bash", json!({}))],
            &[],
        );
        assert_eq!(
            events(&replay),
            [
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse:Bash",
                "SessionEnd"
            ]
        );
        assert!(replay.expected.per_tool.is_empty());
    }

    #[test]
    fn subagents_nest_inside_the_call_that_spawned_them() {
        let mut task = call(
            "02",
            "t1",
            "Task",
            json!({"subagent_type": "Explore", "prompt": "look"}),
        );
        task["permissionMode"] = json!("plan");
        let progress = json!({"type": "progress", "uuid": "03", "parentToolUseID": "t1",
                              "data": {"type": "agent_progress", "agentId": "abc"}});
        let done = result(
            "04",
            "t1",
            "report",
            false,
            json!({"status": "completed", "agentId": "abc"}),
        );
        let mut sub_prompt = prompt("10", "look");
        sub_prompt["isSidechain"] = json!(true);
        // Subagent records carry no permissionMode; the subagent inherits the parent's.
        sub_prompt.as_object_mut().unwrap().remove("permissionMode");
        let sub = [
            sub_prompt,
            call("11", "s1t1", "Glob", json!({"pattern": "*"})),
            result("12", "s1t1", "a.rs", false, Value::Null),
            say("13", "found a.rs"),
        ];
        let mut stray_prompt = prompt("20", "other");
        stray_prompt["timestamp"] = json!("2026-01-01T00:00:05.5Z");
        let stray = [stray_prompt, say("21", "stray answer")];
        let compactor = [prompt("30", "summarise")];
        let replay = replay(
            &[
                prompt("01", "explore"),
                task,
                progress,
                done,
                say("05", "all done"),
                prompt("06", "bye"),
            ],
            &[("abc", &sub), ("zzz", &stray), ("acompact-1", &compactor)],
        );
        assert_eq!(
            events(&replay),
            [
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse:Task",
                "SubagentStart",
                "PreToolUse:Glob",
                "PostToolUse:Glob",
                "SubagentStop",
                "PostToolUse:Task",
                "Stop",
                "SubagentStart",
                "SubagentStop",
                "UserPromptSubmit",
                "SessionEnd"
            ]
        );
        let glob = find(&replay, "PreToolUse")[1];
        assert_eq!(glob["agent_id"], "abc");
        assert_eq!(glob["agent_type"], "Explore");
        assert_eq!(glob["session_id"], "s1");
        assert_eq!(glob["permission_mode"], "plan");
        let stops = find(&replay, "SubagentStop");
        assert_eq!(stops[0]["last_assistant_message"], "found a.rs");
        assert_eq!(stops[0]["stop_hook_active"], false);
        assert!(
            stops[0]["agent_transcript_path"]
                .as_str()
                .unwrap()
                .ends_with("s1/subagents/agent-abc.jsonl")
        );
        assert_eq!(stops[1]["agent_id"], "zzz");
        assert!(stops[1].get("agent_type").is_none());
        assert_eq!(replay.expected.per_tool["Glob"], 1);
        assert_eq!(replay.expected.prompts, 2);
    }

    #[test]
    fn real_transcripts_replay_consistently() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/claude-code-transcripts");
        assert!(
            dir.is_dir(),
            "the real transcript fixtures are missing: expected them at {}",
            dir.display()
        );
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        paths.sort();
        assert!(!paths.is_empty(), "no transcripts in {}", dir.display());
        for path in &paths {
            let replay = claude_code_replay(path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy();
            let counts = payload_counts(&replay.payloads);
            assert_eq!(counts, replay.expected, "{name}");
            for payload in &replay.payloads {
                assert!(
                    payload["session_id"]
                        .as_str()
                        .is_some_and(|s| !s.is_empty()),
                    "{name}"
                );
                assert!(
                    payload["hook_event_name"]
                        .as_str()
                        .is_some_and(|s| !s.is_empty()),
                    "{name}"
                );
                assert_eq!(payload["session_id"], replay.session_id.as_str(), "{name}");
            }
            let n = |event: &str| counts.per_event.get(event).copied().unwrap_or_default();
            assert!(
                n("PreToolUse") >= n("PostToolUse") + n("PostToolUseFailure"),
                "{name}"
            );
            assert_eq!(n("SubagentStart"), n("SubagentStop"), "{name}");

            // Each tool event fires once per call, and a call's result follows its start.
            let mut seen = HashSet::new();
            for payload in &replay.payloads {
                if let Some(id) = payload["tool_use_id"].as_str() {
                    let event = payload["hook_event_name"].as_str().unwrap();
                    assert!(seen.insert((event, id)), "{name}: {event} {id} twice");
                    if event != "PreToolUse" {
                        assert!(
                            seen.contains(&("PreToolUse", id)),
                            "{name}: {id} before start"
                        );
                    }
                }
            }

            // Claude Code records a stop_hook_summary each time it ran Stop hooks; where the
            // user had such hooks, the turn model must find the same number of Stops.
            let text = std::fs::read_to_string(path).unwrap();
            let summaries = text
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|record| record["subtype"] == "stop_hook_summary")
                .count();
            if summaries > 0 {
                assert_eq!(n("Stop"), summaries, "{name}");
            }
            eprintln!(
                "{name}: {} payloads, {:?}",
                replay.payloads.len(),
                counts.per_event
            );
        }
    }

    fn record(uuid: &str, ts: &str, text: &str) -> String {
        json!({"type": "user", "uuid": uuid, "sessionId": "s1", "cwd": "/w", "timestamp": ts,
               "message": {"role": "user", "content": text}})
        .to_string()
            + "\n"
    }

    #[test]
    fn a_malformed_time_is_an_error_for_its_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        let text = [
            record("01", "2026-01-01T00:00:01Z", "first"),
            record("02", "2026-02-30T00:00:02Z", "no such day"),
            record("03", "2026-01-01T00:00:03Z\u{e9}", "trailing"),
            record("04", "2026-01-01T00:00:04Z", "last"),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        let replay = claude_code_replay(&path).unwrap();
        let bad: Vec<usize> = replay.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(bad, [2, 3]);
        assert!(replay.bad_lines[0].error.contains("malformed timestamp"));
        let prompts: Vec<&str> = replay
            .payloads
            .iter()
            .filter_map(|p| p.get("prompt").and_then(Value::as_str))
            .collect();
        assert_eq!(prompts, ["first", "last"]);
        assert_eq!(replay.records, 2);
        // What the import makes of it: the same lines reported, no panic, no rolled-over time.
        let mut read = crate::import::Read::default();
        crate::claude_code::import::claude_code(&path, &mut read).unwrap();
        assert_eq!(read.bad_lines.len(), 2);
        assert!(
            read.sessions[0]
                .items
                .iter()
                .all(|i| i.at_ms < crate::import::parse_time("2026-01-02T00:00:00Z").unwrap())
        );
    }

    #[test]
    fn an_oversized_line_is_reported_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        let text = [
            record("01", "2026-01-01T00:00:01Z", "first"),
            record("02", "2026-01-01T00:00:02Z", &"x".repeat(1000)),
            record("03", "2026-01-01T00:00:03Z", "last"),
        ]
        .concat();
        std::fs::write(&path, text).unwrap();
        let limits = crate::import::Limits {
            line: 500,
            file: 1 << 20,
        };
        let transcript = read_transcript_with(&path, limits, &mut HashSet::new()).unwrap();
        assert_eq!(transcript.records.len(), 2);
        assert_eq!(transcript.bad_lines.len(), 1);
        assert_eq!(transcript.bad_lines[0].line, 2);
        assert!(
            transcript.bad_lines[0]
                .error
                .contains("longer than 500 bytes")
        );
        assert!(!transcript.partial);
    }

    #[test]
    fn a_directory_named_like_a_subagent_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, record("01", "2026-01-01T00:00:01Z", "hi")).unwrap();
        std::fs::create_dir_all(dir.path().join("s1/subagents/agent-x.jsonl")).unwrap();
        let replay = claude_code_replay(&path).unwrap();
        assert_eq!(replay.records, 1);
    }
}
