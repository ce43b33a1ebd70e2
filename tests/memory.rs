//! Compressor and pattern service end to end: real transcripts through the real hook, NATS and
//! ingest, into summaries, checkpoints and patterns; the LLM compressor against a real HTTP
//! server speaking the chat-completions protocol.

use crate::harness::{App, retrieval_args, transcripts_dir};
use hosts::claude_code::transcript::{Replay, claude_code_replay};
use proto::Message as _;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn transcript_files() -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(transcripts_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

/// The files a transcript's successful Edit/Write calls modified, read straight from the
/// transcript records (main file and subagent files), independently of the replay and the
/// services.
fn modified_files(main: &Path) -> BTreeSet<String> {
    let mut files = vec![main.to_owned()];
    let subagents = main.with_extension("").join("subagents");
    if let Ok(entries) = std::fs::read_dir(&subagents) {
        files.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy();
                    name.starts_with("agent-")
                        && !name.starts_with("agent-acompact")
                        && name.ends_with(".jsonl")
                }),
        );
    }
    let mut modified = BTreeSet::new();
    for file in files {
        let mut edits: BTreeMap<String, String> = BTreeMap::new();
        let mut ok = BTreeSet::new();
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let Ok(record) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(blocks) = record.pointer("/message/content").and_then(Value::as_array) else {
                continue;
            };
            for block in blocks {
                match block["type"].as_str() {
                    Some("tool_use")
                        if matches!(
                            block["name"].as_str(),
                            Some("Edit" | "Write" | "MultiEdit" | "NotebookEdit")
                        ) =>
                    {
                        let path = block["input"]["file_path"]
                            .as_str()
                            .or(block["input"]["notebook_path"].as_str())
                            .unwrap_or_default();
                        edits.insert(block["id"].as_str().unwrap().to_owned(), path.to_owned());
                    }
                    Some("tool_result") if block["is_error"] != true => {
                        ok.insert(block["tool_use_id"].as_str().unwrap_or("").to_owned());
                    }
                    _ => {}
                }
            }
        }
        modified.extend(
            edits
                .into_iter()
                .filter(|(id, _)| ok.contains(id))
                .map(|(_, path)| path),
        );
    }
    modified
}

fn replay_all(app: &Arc<App>, replays: &[Replay]) {
    std::thread::scope(|scope| {
        for replay in replays {
            let app = app.clone();
            scope.spawn(move || {
                for payload in &replay.payloads {
                    let (output, _) = app.hook(payload.to_string().as_bytes());
                    assert!(output.status.success(), "hook failed: {output:?}");
                }
            });
        }
    });
}

async fn rows<T>(app: &App, sql: &'static str, bind: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    let store = app.store().await;
    sqlx::query_as(sql)
        .bind(bind)
        .fetch_all(store.pool())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_transcripts_become_summaries_checkpoints_and_patterns() {
    let app = Arc::new(App::start().await);
    let files = transcript_files();
    let replays: Vec<Replay> = files
        .iter()
        .map(|f| claude_code_replay(f).unwrap())
        .collect();
    let total: usize = replays.iter().map(|r| r.payloads.len()).sum();
    let app2 = app.clone();
    let replays2 = replays.clone();
    tokio::task::spawn_blocking(move || replay_all(&app2, &replays2))
        .await
        .unwrap();
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            total as i64,
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(stored, total as i64);
    let summaries = app
        .wait_for_count(
            "SELECT count(*) FROM session_summaries WHERE status = 'final'",
            replays.len() as i64,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        summaries,
        replays.len() as i64,
        "one final summary a session"
    );
    // Everything ingest announced has been walked by both services.
    let walked = |table: &'static str| {
        let app = app.clone();
        async move {
            app.wait_for_count(
                &format!(
                    "SELECT count(*) FROM observations o JOIN {table} s ON s.session_id = o.session_id
                     WHERE o.id <= s.cursor"
                ),
                total as i64,
                Duration::from_secs(60),
            )
            .await
        }
    };
    assert_eq!(walked("compressor_sessions").await, total as i64);
    assert_eq!(walked("pattern_sessions").await, total as i64);

    for (file, replay) in files.iter().zip(&replays) {
        // The summary names exactly the files the transcript's Edit/Write calls modified.
        let (files_json, text): (String, String) = rows(
            &app,
            "SELECT files_modified, text FROM session_summaries WHERE session_id = ?",
            &replay.session_id,
        )
        .await
        .pop()
        .unwrap();
        let named: BTreeSet<String> = serde_json::from_str::<Vec<String>>(&files_json)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(
            named,
            modified_files(file),
            "files modified in {}",
            file.display()
        );
        if !named.is_empty() {
            assert!(text.contains("Files changed: "), "{text}");
        }
        // A compaction makes a checkpoint, completed by the host's summary.
        let checkpoints: Vec<(String, String, i64, i64)> = rows(
            &app,
            "SELECT trigger, host_summary, tokens_before, tokens_after FROM checkpoints
             WHERE session_id = ? ORDER BY id",
            &replay.session_id,
        )
        .await;
        assert_eq!(
            checkpoints.len(),
            replay.expected.compactions,
            "checkpoints of {}",
            file.display()
        );
        for (trigger, host_summary, before, after) in &checkpoints {
            assert_eq!(trigger, "pre_compact");
            assert!(!host_summary.is_empty(), "the PostCompact completes it");
            assert!(*before > 0 && *after > 0);
        }
    }
    assert!(
        app.count("SELECT count(*) FROM checkpoints").await >= 5,
        "the shipped transcripts compact"
    );
    // Edit runs are grouped: fewer structured rows than successful edits.
    let edits = app
        .count(
            "SELECT count(*) FROM observations WHERE kind = 'post_tool'
             AND tool_name IN ('Edit', 'Write', 'MultiEdit')",
        )
        .await;
    let edit_rows = app
        .count("SELECT count(*) FROM structured_observations WHERE category = 'file_edit' AND outcome = 'ok'")
        .await;
    assert!(edit_rows < edits, "{edit_rows} rows for {edits} edits");
    let linked = app
        .count(
            "SELECT count(*) FROM structured_observations s, json_each(s.observation_ids) j
             JOIN observations o ON o.id = j.value WHERE o.session_id = s.session_id",
        )
        .await;
    assert!(
        linked >= edits,
        "structured rows link their raw observations"
    );

    // `git push` without an upstream fails in several of these sessions: one error pattern,
    // whose occurrences are all failures.
    let (id, sessions, occurrences): (i64, i64, i64) = rows(
        &app,
        "SELECT id, sessions, occurrences FROM patterns
         WHERE kind = 'error' AND json_extract(signature, '$.command') = ?",
        "git push",
    )
    .await
    .pop()
    .expect("a git push error pattern");
    assert!(
        sessions >= 2 && occurrences >= sessions,
        "{sessions} {occurrences}"
    );
    let kinds: Vec<(String,)> = rows(
        &app,
        "SELECT DISTINCT o.kind FROM pattern_occurrences p JOIN observations o
         ON o.id = p.observation_id WHERE p.pattern_id = ?",
        &id.to_string(),
    )
    .await;
    assert_eq!(kinds, vec![("tool_failure".to_owned(),)]);
    // And later `git push -u` worked: a fix pattern links the failure and the success.
    let (fix_id,): (i64,) = rows(
        &app,
        "SELECT id FROM patterns WHERE kind = 'fix' AND json_extract(signature, '$.subject') = ?",
        "Bash:git push",
    )
    .await
    .pop()
    .expect("a git push fix pattern");
    let links: Vec<(String, String, String)> = rows(
        &app,
        "SELECT p.role, o.kind, o.session_id FROM pattern_occurrences p
         JOIN observations o ON o.id = p.observation_id WHERE p.pattern_id = ?",
        &fix_id.to_string(),
    )
    .await;
    for (role, kind, session) in &links {
        let expected = if role == "fix" {
            "post_tool"
        } else {
            "tool_failure"
        };
        assert_eq!(kind, expected);
        assert!(links.iter().any(|(r, _, s)| r != role && s == session));
    }
    assert!(
        app.count("SELECT count(*) FROM patterns WHERE kind = 'procedure'")
            .await
            > 0
    );

    // Both services announced what they wrote.
    let js = async_nats::jetstream::new(app.client().await);
    for stream in [
        proto::subjects::COMPRESSOR_STREAM,
        proto::subjects::PATTERN_STREAM,
    ] {
        let mut stream = js.get_stream(stream).await.unwrap();
        assert!(stream.info().await.unwrap().state.messages > 0);
    }
    let last = js
        .get_stream(proto::subjects::COMPRESSOR_STREAM)
        .await
        .unwrap()
        .get_last_raw_message_by_subject(&proto::subjects::compressor_written_subject("summary"))
        .await
        .unwrap();
    let notice = proto::MemoryWritten::decode(last.payload).unwrap();
    assert_eq!(notice.kind, "summary");
    assert!(replays.iter().any(|r| r.session_id == notice.session_id));

    // A redelivered notice changes nothing.
    let store = app.store().await;
    let again = compressor::Compressor::new(store.pool().clone(), 30_000)
        .process(&[(replays[0].session_id.clone(), i64::MAX)], &[])
        .await
        .unwrap();
    assert!(again.is_empty());
    let again = pattern::Detector::new(store.pool().clone())
        .process(&[(replays[0].session_id.clone(), i64::MAX)], &[])
        .await
        .unwrap();
    assert!(again.is_empty());

    // Compress and checkpoint on request.
    let session = &replays[0].session_id;
    let reply: proto::CompressReply = app
        .ask(
            proto::subjects::COMPRESSOR_COMPRESS,
            &proto::CompressRequest {
                session_id: session.clone(),
            },
        )
        .await;
    assert_eq!(reply.error, "");
    let (summary_id,): (i64,) = rows(
        &app,
        "SELECT id FROM session_summaries WHERE session_id = ?",
        session,
    )
    .await
    .pop()
    .unwrap();
    assert_eq!(reply.summary_id, summary_id);
    let reply: proto::CheckpointReply = app
        .ask(
            proto::subjects::COMPRESSOR_CHECKPOINT,
            &proto::CheckpointRequest {
                session_id: session.clone(),
            },
        )
        .await;
    assert_eq!(reply.error, "");
    assert!(reply.checkpoint_id > 0 && reply.text.starts_with("Checkpoint"));
    assert!(reply.tokens_before > reply.tokens_after);
    let reply: proto::CheckpointReply = app
        .ask(
            proto::subjects::COMPRESSOR_CHECKPOINT,
            &proto::CheckpointRequest {
                session_id: "no-such-session".into(),
            },
        )
        .await;
    assert!(reply.error.contains("no session"), "{}", reply.error);

    // Workspace memory files: one line a session, stable facts, the same bytes every time.
    let export = app.home.path().join("export");
    let run_export = || {
        let output = app.mneme(&["export", "--markdown", "--dir", export.to_str().unwrap()]);
        assert!(output.status.success(), "{output:?}");
        let mut files = BTreeMap::new();
        for dir in std::fs::read_dir(&export).unwrap() {
            for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                files.insert(path.clone(), std::fs::read_to_string(path).unwrap());
            }
        }
        files
    };
    let first = run_export();
    assert_eq!(run_export(), first, "a second export changes nothing");
    let histories: usize = first
        .iter()
        .filter(|(p, _)| p.ends_with("HISTORY.md"))
        .map(|(_, text)| text.lines().filter(|l| l.starts_with("- ")).count())
        .sum();
    assert_eq!(histories, replays.len());
    assert!(
        first
            .iter()
            .any(|(p, text)| p.ends_with("MEMORY.md") && text.contains("## Recurring errors"))
    );

    // A notice neither service can read is dead-lettered with a reason.
    let client = app.client().await;
    js.publish(proto::subjects::OBSERVATION_STORED, "garbage".into())
        .await
        .unwrap()
        .await
        .unwrap();
    client.flush().await.unwrap();
    for service in ["compressor", "pattern"] {
        let dlq = js.get_stream(proto::subjects::DLQ_STREAM).await.unwrap();
        let subject = proto::subjects::dlq_subject(service);
        let mut letter = None;
        for _ in 0..100 {
            if let Ok(m) = dlq.get_last_raw_message_by_subject(&subject).await {
                letter = Some(proto::DeadLetter::decode(m.payload).unwrap());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let letter = letter.unwrap_or_else(|| panic!("no dead letter from {service}"));
        assert!(
            letter.reason.contains("not an ObservationStored"),
            "{}",
            letter.reason
        );
    }
}

/// What the stand-in model answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Good,
    Malformed,
    Slow,
}

/// A small real HTTP/1.1 server speaking the chat-completions protocol.
struct ChatServer {
    url: String,
    mode: Arc<std::sync::Mutex<Mode>>,
    requests: Arc<AtomicUsize>,
    prompts: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ChatServer {
    async fn start() -> ChatServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let mode = Arc::new(std::sync::Mutex::new(Mode::Good));
        let requests = Arc::new(AtomicUsize::new(0));
        let prompts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (m, r, p) = (mode.clone(), requests.clone(), prompts.clone());
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (m, r, p) = (m.clone(), r.clone(), p.clone());
                tokio::spawn(async move {
                    let _ = serve(socket, &m, &r, &p).await;
                });
            }
        });
        ChatServer {
            url,
            mode,
            requests,
            prompts,
        }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }
}

async fn serve(
    mut socket: tokio::net::TcpStream,
    mode: &std::sync::Mutex<Mode>,
    requests: &AtomicUsize,
    prompts: &std::sync::Mutex<Vec<String>>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..at]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while buffer.len() < head_end + length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_slice(&buffer[head_end..]).unwrap_or_default();
    let system = request
        .pointer("/messages/0/content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let user = request
        .pointer("/messages/1/content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    prompts.lock().unwrap().push(user);
    let mode = *mode.lock().unwrap();
    let content = match mode {
        Mode::Slow => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "{}".to_owned()
        }
        Mode::Malformed => r#"{"request": 42, "done": "not a list"}"#.to_owned(),
        // A search query reworded in the words its answer uses.
        Mode::Good if system.contains("search queries") => serde_json::json!({
            "queries": ["pgbouncer max_client_conn", "  ", "connection pooler limit"],
        })
        .to_string(),
        Mode::Good if system.contains("resume point") => serde_json::json!({
            "summary": "LLM: the work stands here",
            "decisions": ["LLM decision"],
            "open_tasks": ["LLM task"],
        })
        .to_string(),
        Mode::Good => format!(
            "```json\n{}\n```",
            serde_json::json!({
                "request": "LLM: what the user asked",
                "done": ["LLM: did a thing"],
                "decisions": [],
                "errors": [{"error": "LLM: an error", "resolved": true}],
                "open_items": [],
            })
        ),
    };
    let body = serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": request["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}

fn llm_args(url: &str) -> compressor::CompressorArgs {
    compressor::CompressorArgs {
        compress_llm_url: Some(url.to_owned()),
        compress_llm_model: "stand-in".to_owned(),
        compress_llm_timeout_ms: 500,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_compressor_rewrites_within_budget_and_the_heuristic_takes_over() {
    let server = ChatServer::start().await;
    let mut app = App::bare();
    app.start_services_full(retrieval_args(), llm_args(&server.url))
        .await;
    let app = Arc::new(app);
    let replay = claude_code_replay(&transcripts_dir().join("tool_heavy.jsonl")).unwrap();
    let session = replay.session_id.clone();
    let app2 = app.clone();
    tokio::task::spawn_blocking(move || replay_all(&app2, &[replay]))
        .await
        .unwrap();
    // The heuristic summary is written first; the model's rewrite replaces it.
    let rewritten = app
        .wait_for_count(
            "SELECT count(*) FROM session_summaries WHERE compressor = 'llm'",
            1,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(rewritten, 1);
    let (request, text, revision, id): (String, String, i64, i64) = rows(
        &app,
        "SELECT request, text, revision, id FROM session_summaries WHERE session_id = ?",
        &session,
    )
    .await
    .pop()
    .unwrap();
    assert_eq!(request, "LLM: what the user asked");
    assert!(text.contains("LLM: an error (resolved)"), "{text}");
    assert!(server.requests.load(Ordering::SeqCst) >= 1);
    // What the model saw was sanitised, and never held a secret from the corpus.
    for prompt in server.prompts.lock().unwrap().iter() {
        for sample in sanitize_corpus::secrets() {
            assert!(!prompt.contains(sample.secret.as_str()));
        }
    }

    let store = app.store().await;
    let llm = |config: compressor::CompressorArgs| {
        compressor::llm::Llm::new(config.llm().unwrap(), store.pool().clone()).unwrap()
    };
    let written = compressor::Written {
        id,
        kind: "summary",
        session_id: session.clone(),
        project: String::new(),
        revision,
        trigger: "test".into(),
        occurred_at: 0,
        compressor: "llm".into(),
    };

    // Malformed output: rejected, the row stands.
    server.set(Mode::Malformed);
    assert_eq!(
        llm(llm_args(&server.url)).refine(&written).await.unwrap(),
        None
    );
    assert_eq!(
        summary_state(&app, &session).await,
        (text.clone(), revision)
    );

    // A model that does not answer in time: the row stands, within the timeout.
    server.set(Mode::Slow);
    let started = std::time::Instant::now();
    assert_eq!(
        llm(llm_args(&server.url)).refine(&written).await.unwrap(),
        None
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        summary_state(&app, &session).await,
        (text.clone(), revision)
    );

    // Budgets: a call that might pass the session's or the day's budget is never made.
    server.set(Mode::Good);
    let before = server.requests.load(Ordering::SeqCst);
    let spent = app
        .count("SELECT coalesce(sum(tokens), 0) FROM compressor_llm_usage")
        .await;
    for args in [
        compressor::CompressorArgs {
            compress_llm_session_tokens: spent + 100,
            ..llm_args(&server.url)
        },
        compressor::CompressorArgs {
            compress_llm_daily_tokens: spent + 100,
            ..llm_args(&server.url)
        },
    ] {
        assert_eq!(llm(args).refine(&written).await.unwrap(), None);
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), before);
    assert_eq!(
        summary_state(&app, &session).await,
        (text.clone(), revision)
    );
    assert_eq!(
        app.count("SELECT coalesce(sum(tokens), 0) FROM compressor_llm_usage")
            .await,
        spent
    );
}

/// The text and revision of a session's summary.
async fn summary_state(app: &App, session: &str) -> (String, i64) {
    rows(
        app,
        "SELECT text, revision FROM session_summaries WHERE session_id = ?",
        session,
    )
    .await
    .pop()
    .unwrap()
}

/// Deleting a session reaches every service that made something of it: the compressor drops
/// its structured observations, summary, checkpoint and cursor; the pattern service recounts a
/// pattern also seen elsewhere and deletes one seen only there; retrieval drops the memory items
/// of all of them. Nobody but ingest is asked: the others learn it from ingest's notice, and a
/// repeated notice changes nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_removes_what_every_service_made_of_it() {
    let app = App::start().await;
    let project = "/work/shop";
    let session = |id: &str, extra: &str| {
        vec![
            serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": id, "cwd": project,
                "prompt": format!("We decided to keep the invoice totals in integer cents. {extra}")}),
            serde_json::json!({"hook_event_name": "PostToolUse", "session_id": id, "cwd": project,
                "tool_name": "Edit", "tool_use_id": format!("{id}-edit"),
                "tool_input": {"file_path": format!("{project}/src/invoice.rs"), "old_string": "f64", "new_string": "i64"},
                "tool_response": {"success": true}}),
            serde_json::json!({"hook_event_name": "PreCompact", "session_id": id, "cwd": project,
                "trigger": "manual", "custom_instructions": ""}),
            serde_json::json!({"hook_event_name": "SessionEnd", "session_id": id, "cwd": project, "reason": "exit"}),
        ]
    };
    let doomed = session("doomed", "We decided to drop the legacy PDF renderer.");
    let kept = session("kept", "");
    for payload in doomed.iter().chain(kept.iter()) {
        let (output, _) = app.hook(payload.to_string().as_bytes());
        assert!(output.status.success());
    }
    let of = |table: &str, session: &str| {
        format!("SELECT count(*) FROM {table} WHERE session_id = '{session}'")
    };
    for table in [
        "structured_observations",
        "session_summaries",
        "checkpoints",
    ] {
        for id in ["doomed", "kept"] {
            let n = app
                .wait_for_count(&of(table, id), 1, Duration::from_secs(30))
                .await;
            assert!(n >= 1, "no {table} row for {id}");
        }
    }
    let shared = "SELECT count(*) FROM patterns WHERE kind = 'decision' AND text LIKE '%integer cents%' AND sessions = 2";
    assert_eq!(
        app.wait_for_count(shared, 1, Duration::from_secs(30)).await,
        1
    );
    let only_doomed = "SELECT count(*) FROM patterns WHERE text LIKE '%legacy PDF renderer%'";
    assert_eq!(
        app.wait_for_count(only_doomed, 1, Duration::from_secs(30))
            .await,
        1
    );
    // Retrieval indexed the summaries, checkpoints and patterns as memory items.
    for source in ["summary", "checkpoint", "structured"] {
        let sql = format!(
            "SELECT count(*) FROM memory_items WHERE source = '{source}' AND session_id = 'doomed'"
        );
        assert!(
            app.wait_for_count(&sql, 1, Duration::from_secs(30)).await >= 1,
            "no {source} item"
        );
    }
    let pattern_items = "SELECT count(*) FROM memory_items WHERE source = 'pattern' AND text LIKE '%legacy PDF renderer%'";
    assert_eq!(
        app.wait_for_count(pattern_items, 1, Duration::from_secs(30))
            .await,
        1
    );
    let kept_before = app
        .count("SELECT count(*) FROM memory_items WHERE session_id = 'kept'")
        .await;

    let reply = app.delete_sessions(&["doomed"]).await;
    assert_eq!((reply.sessions, reply.error.as_str()), (1, ""));

    let gone = [
        of("structured_observations", "doomed"),
        of("session_summaries", "doomed"),
        of("checkpoints", "doomed"),
        of("compressor_sessions", "doomed"),
        of("pattern_occurrences", "doomed"),
        of("pattern_failures", "doomed"),
        of("pattern_sessions", "doomed"),
        of("memory_items", "doomed"),
        only_doomed.to_owned(),
        pattern_items.to_owned(),
    ];
    let cleaned = crate::harness::wait_until(Duration::from_secs(30), || async {
        let mut left = 0;
        for sql in &gone {
            left += app.count(sql).await;
        }
        left == 0
    })
    .await;
    let mut left = Vec::new();
    for sql in &gone {
        left.push((sql.clone(), app.count(sql).await));
    }
    assert!(
        cleaned.is_ok(),
        "rows of the deleted session remain: {left:?}"
    );

    // The shared decision is recounted onto the session that remains, and still findable.
    let recounted: (i64, i64, String, String) = sqlx::query_as(
        "SELECT occurrences, sessions, first_session_id, last_session_id FROM patterns
         WHERE kind = 'decision' AND text LIKE '%integer cents%'",
    )
    .fetch_one(app.store().await.pool())
    .await
    .unwrap();
    assert_eq!(recounted, (1, 1, "kept".to_owned(), "kept".to_owned()));
    let shared_item = "SELECT count(*) FROM memory_items WHERE source = 'pattern' AND session_id = 'kept' AND text LIKE '%integer cents%'";
    assert_eq!(
        app.wait_for_count(shared_item, 1, Duration::from_secs(30))
            .await,
        1
    );
    for table in [
        "structured_observations",
        "session_summaries",
        "checkpoints",
    ] {
        assert!(
            app.count(&of(table, "kept")).await >= 1,
            "{table} of the kept session went too"
        );
    }

    // Deleting again repeats the notice; what remains stays as it is.
    let again = app.delete_sessions(&["doomed"]).await;
    assert_eq!((again.sessions, again.error.as_str()), (0, ""));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept_after = app
        .count("SELECT count(*) FROM memory_items WHERE session_id = 'kept'")
        .await;
    assert!(
        kept_after >= kept_before,
        "items of the kept session went: {kept_before} -> {kept_after}"
    );
    let still: (i64, i64) = sqlx::query_as(
        "SELECT occurrences, sessions FROM patterns WHERE kind = 'decision' AND text LIKE '%integer cents%'",
    )
    .fetch_one(app.store().await.pool())
    .await
    .unwrap();
    assert_eq!(still, (1, 1));
}

/// Consumers made by a version that knew only stored notices take deletion notices too once the
/// services start, keeping their place in the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_made_before_deletion_notices_pick_them_up() {
    use async_nats::jetstream::{self, consumer};
    use proto::subjects;
    let mut app = App::bare();
    let js = jetstream::new(app.client().await);
    common::streams::ensure(&js).await.unwrap();
    let stream = js.get_stream(subjects::INGEST_STREAM).await.unwrap();
    for name in ["compressor", "pattern", "retrieval"] {
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(name.to_owned()),
                filter_subject: subjects::OBSERVATION_STORED.to_owned(),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    app.start_services().await;
    for name in ["compressor", "pattern", "retrieval"] {
        let info = stream.consumer_info(name).await.unwrap();
        let mut subjects_read = info.config.filter_subjects.clone();
        if !info.config.filter_subject.is_empty() {
            subjects_read.push(info.config.filter_subject.clone());
        }
        subjects_read.sort();
        assert_eq!(
            subjects_read,
            vec![subjects::SESSIONS_DELETED, subjects::OBSERVATION_STORED],
            "{name}"
        );
    }
    app.stop_services().await;
}

/// A rewritten row is a new item (its vector is made again), but an id handed out before, in
/// context or a search, still gets the item: `get` and `timeline` follow it to the rewrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_handed_out_before_a_rewrite_still_gets_the_item() {
    use proto::subjects;
    let app = App::start().await;
    let prompt = |session: &str| {
        serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": session,
            "cwd": "/work/ids", "prompt": "We decided to version the wire format with a header byte."})
        .to_string()
    };
    let item = |session: &str| {
        format!(
            "SELECT count(*) FROM memory_items WHERE source = 'pattern' AND session_id = '{session}'"
        )
    };
    let (output, _) = app.hook(prompt("ids-1").as_bytes());
    assert!(output.status.success());
    assert_eq!(
        app.wait_for_count(&item("ids-1"), 1, Duration::from_secs(30))
            .await,
        1
    );
    let (first,): (i64,) = sqlx::query_as(
        "SELECT id FROM memory_items WHERE source = 'pattern' AND session_id = 'ids-1'",
    )
    .fetch_one(app.store().await.pool())
    .await
    .unwrap();
    // Seen again in another session: the pattern's row is rewritten, and so is its item.
    let (output, _) = app.hook(prompt("ids-2").as_bytes());
    assert!(output.status.success());
    assert_eq!(
        app.wait_for_count(&item("ids-2"), 1, Duration::from_secs(30))
            .await,
        1
    );
    let (now,): (i64,) = sqlx::query_as(
        "SELECT id FROM memory_items WHERE source = 'pattern' AND session_id = 'ids-2'",
    )
    .fetch_one(app.store().await.pool())
    .await
    .unwrap();
    assert_ne!(first, now);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM memory_items WHERE id = {first}"
        ))
        .await,
        0
    );

    let got: proto::ItemsReply = app
        .ask(
            subjects::RETRIEVAL_GET,
            &proto::GetRequest { ids: vec![first] },
        )
        .await;
    assert_eq!(got.error, "");
    assert_eq!(got.items.len(), 1, "{got:?}");
    assert_eq!(got.items[0].id, now);
    assert!(got.items[0].text.contains("header byte"), "{got:?}");
    let around: proto::ItemsReply = app
        .ask(
            subjects::RETRIEVAL_TIMELINE,
            &proto::TimelineRequest {
                id: first,
                radius: 2,
            },
        )
        .await;
    assert_eq!(around.items[around.anchor as usize].id, now, "{around:?}");
    // An id nobody handed out is still unknown.
    let none: proto::ItemsReply = app
        .ask(
            subjects::RETRIEVAL_GET,
            &proto::GetRequest {
                ids: vec![now + 1_000],
            },
        )
        .await;
    assert!(none.items.is_empty());
}

/// The services with full-text search only (what other wordings add is then plain to see) and
/// the compressor as given.
async fn start_full_text(app: &mut App, compressor: compressor::CompressorArgs) {
    let retrieval = retrieval::RetrievalArgs {
        embed: retrieval::models::Backend::None,
        ..retrieval_args()
    };
    app.start_services_full(retrieval, compressor).await;
}

/// A search asked to be reworded (`rewrite`) asks the compressor's LLM for other wordings of
/// the question and finds what only those wordings match, through NATS and the command line;
/// the model sees the question sanitised; and without an LLM, or with its budget spent, the
/// question alone is searched and the answer says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_reworded_by_the_llm_finds_what_the_question_does_not_say() {
    let server = ChatServer::start().await;
    let mut app = App::bare();
    let cwd = "/work/rewrite";
    let said = [
        (
            "pool",
            "Raised max_client_conn in pgbouncer.ini to 400 so the workers stop queueing.",
        ),
        ("docs", "Translate the onboarding screens into German."),
        (
            "ci",
            "The build cache is invalidated on every commit, look into it.",
        ),
    ];
    start_full_text(&mut app, llm_args(&server.url)).await;
    for (session, text) in said {
        let payload = serde_json::json!({"hook_event_name": "UserPromptSubmit",
            "session_id": session, "cwd": cwd, "transcript_path": "/tmp/t.jsonl", "prompt": text});
        assert!(app.hook(payload.to_string().as_bytes()).0.status.success());
    }
    app.wait_for_count(
        "SELECT count(*) FROM memory_items",
        3,
        Duration::from_secs(30),
    )
    .await;
    let secret = "AKIAIOSFODNN7EXAMPLE";
    let question = format!("what ceiling did we give the database middleman (key {secret})");
    let ask = |rewrite: bool| proto::SearchRequest {
        query: question.clone(),
        project: cwd.to_owned(),
        mode: "fts".to_owned(),
        limit: 5,
        rewrite,
        ..Default::default()
    };
    let plain: proto::SearchReply = app
        .ask(proto::subjects::RETRIEVAL_SEARCH, &ask(false))
        .await;
    assert!(plain.error.is_empty(), "{}", plain.error);
    assert!(
        plain.hits.iter().all(|h| h.session_id != "pool"),
        "{:?}",
        plain.hits
    );
    assert!(plain.rewrites.is_empty());
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        0,
        "no rewrite unless asked"
    );

    let reworded: proto::SearchReply = app.ask(proto::subjects::RETRIEVAL_SEARCH, &ask(true)).await;
    assert!(reworded.error.is_empty(), "{}", reworded.error);
    assert_eq!(reworded.rewrite_error, "");
    // Blank wordings are dropped.
    assert_eq!(
        reworded.rewrites,
        ["pgbouncer max_client_conn", "connection pooler limit"]
    );
    assert_eq!(
        reworded.hits.first().map(|h| h.session_id.as_str()),
        Some("pool")
    );
    // The model was asked once, with the question, and never saw the secret in it.
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
    let prompts = server.prompts.lock().unwrap().clone();
    assert!(prompts[0].contains("database middleman"), "{}", prompts[0]);
    assert!(!prompts[0].contains(secret), "{}", prompts[0]);
    // Spent from the day's budget, under a key of the searches' own.
    let spent = app
        .count("SELECT coalesce(sum(tokens), 0) FROM compressor_llm_usage WHERE session_id LIKE 'search:%'")
        .await;
    assert!(spent > 0);

    // The command line says what else it searched.
    let output = app.mneme(&[
        "search",
        "--rewrite",
        "--mode",
        "fts",
        "--project",
        cwd,
        "what ceiling did we give the database middleman",
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("also searched: pgbouncer max_client_conn | connection pooler limit"),
        "{text}"
    );
    assert!(text.contains("pgbouncer.ini"), "{text}");

    // A spent budget: the question alone is searched, and the answer says why.
    app.stop_services().await;
    start_full_text(
        &mut app,
        compressor::CompressorArgs {
            compress_llm_daily_tokens: spent + 10,
            ..llm_args(&server.url)
        },
    )
    .await;
    let spent_out: proto::SearchReply =
        app.ask(proto::subjects::RETRIEVAL_SEARCH, &ask(true)).await;
    assert!(spent_out.error.is_empty());
    assert!(spent_out.rewrites.is_empty());
    assert!(
        spent_out.rewrite_error.contains("budget"),
        "{}",
        spent_out.rewrite_error
    );
    assert_eq!(
        spent_out
            .hits
            .iter()
            .map(|h| &h.session_id)
            .collect::<Vec<_>>(),
        plain.hits.iter().map(|h| &h.session_id).collect::<Vec<_>>()
    );
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        2,
        "the model was not asked"
    );

    // No LLM at all.
    app.stop_services().await;
    start_full_text(&mut app, compressor::CompressorArgs::default()).await;
    let none: proto::SearchReply = app.ask(proto::subjects::RETRIEVAL_SEARCH, &ask(true)).await;
    assert!(none.error.is_empty());
    assert!(
        none.rewrite_error.contains("needs an llm endpoint"),
        "{}",
        none.rewrite_error
    );
    assert_eq!(none.hits.len(), plain.hits.len());
    app.stop_services().await;
}
