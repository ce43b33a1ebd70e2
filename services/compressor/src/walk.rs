//! The walk of a session: its observations after the compressor's cursor, in id order, turned
//! into structured observations (a run of edits to one file is one row that grows),
//! checkpoints at compactions and a summary at session end or past the token threshold.
//! Everything runs inside the caller's write transaction, through the statements of
//! [`crate::db`], so a batch's rows and cursors commit together, or not at all.

use crate::db::{self, CheckpointRow, Group, NewCheckpoint, State, SummaryRow};
use crate::heuristic::{self, SessionContext, Structured};
use observation::row::Observation;
use sqlx::SqliteConnection;

/// A row the compressor wrote or rewrote, to be announced once the transaction commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub id: i64,
    /// `structured`, `summary` or `checkpoint`.
    pub kind: &'static str,
    pub session_id: String,
    pub project: String,
    pub revision: i64,
    pub trigger: String,
    pub occurred_at: i64,
    pub compressor: String,
}

/// The rows written by one walk, each once with its latest revision.
#[derive(Debug, Default)]
pub struct Writes(pub Vec<Written>);

impl Writes {
    fn push(&mut self, written: Written) {
        match self
            .0
            .iter_mut()
            .find(|w| w.kind == written.kind && w.id == written.id)
        {
            Some(existing) => *existing = written,
            None => self.0.push(written),
        }
    }
}

/// Settings of a walk.
#[derive(Debug, Clone, Copy)]
pub struct Walk {
    /// Raw tokens after which a running session gets a (partial) summary.
    pub threshold_tokens: i64,
    pub now: i64,
}

/// Read the session's observations after its cursor, up to `upto`, and write what they make:
/// structured observations, checkpoints at compactions, a summary at session end or past the
/// token threshold. Returns what was written; nothing when the cursor is already past `upto`
/// (a redelivered notice).
pub async fn walk_session(
    tx: &mut SqliteConnection,
    session_id: &str,
    upto: i64,
    walk: Walk,
    writes: &mut Writes,
) -> sqlx::Result<()> {
    let mut state = db::load_state(tx, session_id).await?.unwrap_or(State {
        todos: "[]".to_owned(),
        ..State::default()
    });
    if state.cursor >= upto {
        return Ok(());
    }
    let raws = db::observations_after(tx, session_id, state.cursor, upto).await?;
    let Some(last) = raws.last() else {
        return Ok(());
    };
    let last_id = last.id;
    if state.project.is_empty() {
        state.project = last.project.clone();
    }
    let mut ctx = context(tx, session_id, state.cursor).await?;
    let mut group: Option<Group> = if state.open_group > 0 {
        db::group(tx, state.open_group).await?
    } else {
        None
    };
    for raw in &raws {
        if raw.kind != "pre_tool" {
            let tokens = heuristic::tokens(raw.body_chars);
            state.pending_tokens += tokens;
            state.total_tokens += tokens;
        }
        match raw.kind.as_str() {
            "prompt" => {
                ctx.last_prompt = raw
                    .body
                    .chars()
                    .take(300)
                    .collect::<String>()
                    .to_lowercase();
                group = None;
                if let Some(s) = heuristic::structure_prompt(raw) {
                    let written = insert_structured(tx, raw, &s, "prompt", walk.now).await?;
                    writes.push(written);
                }
            }
            "post_tool" | "tool_failure" => {
                if let Some(todos) = heuristic::todos_of(raw) {
                    state.todos = serde_json::to_string(&todos).unwrap_or_default();
                    continue;
                }
                let s = heuristic::structure_tool(raw, &ctx);
                if !s.subject_key.is_empty() {
                    if s.outcome == "error" {
                        ctx.failing.insert(s.subject_key.clone());
                    } else {
                        ctx.failing.remove(&s.subject_key);
                    }
                }
                let same_file = group
                    .as_ref()
                    .is_some_and(|g| !s.subject_key.is_empty() && g.subject_key == s.subject_key);
                if same_file && s.category == "file_edit" && s.outcome == "ok" {
                    let g = group.as_mut().expect("checked above");
                    writes.push(extend_group(tx, g, raw, &s, walk.now).await?);
                } else if same_file && s.category == "file_read" {
                    // Reading the file being edited is part of the edit, not a memory of its own.
                    let g = group.as_mut().expect("checked above");
                    db::append_observation(tx, g, raw.id).await?;
                } else {
                    let written = insert_structured(tx, raw, &s, "tool", walk.now).await?;
                    group = (s.category == "file_edit" && s.outcome == "ok").then(|| Group {
                        id: written.id,
                        subject_key: s.subject_key.clone(),
                        kind: s.kind.clone(),
                        observation_ids: format!("[{}]", raw.id),
                        title: s.title.clone(),
                        revision: 1,
                    });
                    writes.push(written);
                }
            }
            "pre_compact" | "post_compact" => {
                let written = compaction_checkpoint(tx, &state, raw, walk.now).await?;
                state.pending_tokens = 0;
                writes.push(written);
            }
            "session_end" => state.ended = 1,
            _ => {}
        }
    }
    state.cursor = last_id;
    state.open_group = group.map_or(0, |g| g.id);
    let trigger = if state.ended == 1 {
        Some("session_end")
    } else if state.pending_tokens >= walk.threshold_tokens {
        Some("threshold")
    } else {
        None
    };
    if let Some(trigger) = trigger {
        let last_at = raws.last().map_or(walk.now, |r| r.occurred_at);
        writes.push(write_summary(tx, session_id, &state, trigger, last_at, walk.now).await?);
        state.pending_tokens = 0;
    }
    db::save_state(tx, session_id, &state, walk.now).await
}

/// Write the session's summary now (an explicit request), after walking what is unread.
pub async fn summary_now(
    tx: &mut SqliteConnection,
    session_id: &str,
    walk: Walk,
    writes: &mut Writes,
) -> sqlx::Result<Option<i64>> {
    walk_session(tx, session_id, i64::MAX, walk, writes).await?;
    let Some(mut state) = db::load_state(tx, session_id).await? else {
        return Ok(None);
    };
    let last_at = db::last_occurred(tx, session_id).await?;
    let written = write_summary(tx, session_id, &state, "request", last_at, walk.now).await?;
    let id = written.id;
    writes.push(written);
    state.pending_tokens = 0;
    db::save_state(tx, session_id, &state, walk.now).await?;
    Ok(Some(id))
}

/// A checkpoint made on request, after walking what is unread.
pub async fn checkpoint_now(
    tx: &mut SqliteConnection,
    session_id: &str,
    walk: Walk,
    writes: &mut Writes,
) -> sqlx::Result<Option<CheckpointRow>> {
    walk_session(tx, session_id, i64::MAX, walk, writes).await?;
    let Some(mut state) = db::load_state(tx, session_id).await? else {
        return Ok(None);
    };
    let material = db::material(tx, session_id, state.cursor, &state.todos).await?;
    let fields = heuristic::checkpoint(&material, &state.project);
    let files = material.files_modified();
    let text = heuristic::render_checkpoint(&fields, "");
    let tokens_after = heuristic::tokens(text.chars().count() as i64);
    let last_at = db::last_occurred(tx, session_id).await?;
    let row = db::insert_checkpoint(
        tx,
        NewCheckpoint {
            session_id,
            project: &state.project,
            trigger: "request",
            observation_id: 0,
            fields: &fields,
            files: &files,
            host_summary: "",
            tokens_before: state.total_tokens,
            tokens_after,
            text: &text,
            last_observation_id: state.cursor,
            occurred_at: last_at,
            now: walk.now,
        },
    )
    .await?;
    writes.push(row.written("request"));
    state.pending_tokens = 0;
    db::save_state(tx, session_id, &state, walk.now).await?;
    Ok(Some(row))
}

/// The last prompt before the cursor and the subjects still failing, so a walk that starts
/// mid-session classifies the way one from the start would.
async fn context(
    tx: &mut SqliteConnection,
    session_id: &str,
    cursor: i64,
) -> sqlx::Result<SessionContext> {
    let mut ctx = SessionContext::default();
    if cursor == 0 {
        return Ok(ctx);
    }
    ctx.last_prompt = db::last_prompt(tx, session_id, cursor)
        .await?
        .unwrap_or_default();
    for (key, outcome) in db::subject_outcomes(tx, session_id).await? {
        if outcome == "error" {
            ctx.failing.insert(key);
        } else {
            ctx.failing.remove(&key);
        }
    }
    Ok(ctx)
}

/// A new structured observation of one raw observation.
async fn insert_structured(
    tx: &mut SqliteConnection,
    raw: &Observation,
    s: &Structured,
    trigger: &str,
    now: i64,
) -> sqlx::Result<Written> {
    let id = db::insert_structured(tx, raw, s, now).await?;
    Ok(Written {
        id,
        kind: "structured",
        session_id: raw.session_id.clone(),
        project: raw.project.clone(),
        revision: 1,
        trigger: trigger.to_owned(),
        occurred_at: raw.occurred_at,
        compressor: "heuristic".to_owned(),
    })
}

/// Fold one more edit of the group's file into the group.
async fn extend_group(
    tx: &mut SqliteConnection,
    group: &mut Group,
    raw: &Observation,
    s: &Structured,
    now: i64,
) -> sqlx::Result<Written> {
    let mut ids: Vec<i64> = serde_json::from_str(&group.observation_ids).unwrap_or_default();
    ids.push(raw.id);
    group.observation_ids = serde_json::to_string(&ids).unwrap_or_default();
    // The first edit's verb and reason stay; the count grows. A run that fixes something is a
    // bugfix even if its later edits alone would not say so.
    let base = group
        .title
        .split(" (")
        .next()
        .unwrap_or(&group.title)
        .to_owned();
    if group.kind != "bugfix" && s.kind == "bugfix" {
        group.kind = "bugfix".to_owned();
    }
    // Only edits bump the revision (reads folded into the run do not), so it counts them.
    group.revision += 1;
    let title = format!("{base} ({} edits)", group.revision);
    db::update_group(tx, group, &title, raw, now).await?;
    Ok(Written {
        id: group.id,
        kind: "structured",
        session_id: raw.session_id.clone(),
        project: raw.project.clone(),
        revision: group.revision,
        trigger: "tool".to_owned(),
        occurred_at: raw.occurred_at,
        compressor: "heuristic".to_owned(),
    })
}

/// (Re)write the session's summary from what the walk has read so far.
async fn write_summary(
    tx: &mut SqliteConnection,
    session_id: &str,
    state: &State,
    trigger: &str,
    occurred_at: i64,
    now: i64,
) -> sqlx::Result<Written> {
    let material = db::material(tx, session_id, state.cursor, &state.todos).await?;
    let fields = heuristic::summarise(&material);
    let status = if state.ended == 1 { "final" } else { "partial" };
    let (id, revision) = db::upsert_summary(
        tx,
        SummaryRow {
            session_id,
            project: &state.project,
            status,
            trigger,
            fields: &fields,
            files_read: &material.files_read(),
            files_modified: &material.files_modified(),
            last_observation_id: state.cursor,
            compressor: "heuristic",
            occurred_at,
            now,
        },
    )
    .await?;
    Ok(Written {
        id,
        kind: "summary",
        session_id: session_id.to_owned(),
        project: state.project.clone(),
        revision,
        trigger: trigger.to_owned(),
        occurred_at,
        compressor: "heuristic".to_owned(),
    })
}

/// A checkpoint at a compaction: made at PreCompact from the session so far, completed by the
/// PostCompact that follows with the host's summary and its token counts.
async fn compaction_checkpoint(
    tx: &mut SqliteConnection,
    state: &State,
    raw: &Observation,
    now: i64,
) -> sqlx::Result<Written> {
    let (reported_before, reported_after) = db::reported_tokens(tx, raw.id).await?;
    if raw.kind == "post_compact"
        && let Some(open) = db::open_compaction_checkpoint(tx, &raw.session_id).await?
    {
        let text = heuristic::render_checkpoint(&open.fields(), &raw.body);
        let tokens_after =
            reported_after.unwrap_or_else(|| heuristic::tokens(text.chars().count() as i64));
        let row = db::complete_checkpoint(
            tx,
            open.id,
            &raw.body,
            &text,
            tokens_after,
            reported_before,
            now,
        )
        .await?;
        return Ok(row.written("post_compact"));
    }
    let material = db::material(tx, &raw.session_id, raw.id, &state.todos).await?;
    let fields = heuristic::checkpoint(&material, &raw.project);
    let files = material.files_modified();
    let host_summary = if raw.kind == "post_compact" {
        raw.body.as_str()
    } else {
        ""
    };
    let text = heuristic::render_checkpoint(&fields, host_summary);
    let row = db::insert_checkpoint(
        tx,
        NewCheckpoint {
            session_id: &raw.session_id,
            project: &raw.project,
            trigger: &raw.kind,
            observation_id: raw.id,
            fields: &fields,
            files: &files,
            host_summary,
            tokens_before: reported_before.unwrap_or(state.total_tokens),
            tokens_after: reported_after
                .unwrap_or_else(|| heuristic::tokens(text.chars().count() as i64)),
            text: &text,
            last_observation_id: raw.id,
            occurred_at: raw.occurred_at,
            now,
        },
    )
    .await?;
    Ok(row.written(&raw.kind))
}

#[cfg(test)]
mod tests {
    use crate::Compressor;

    /// Store raw observations the way ingest would (ingest owns the table; this is a fixture).
    struct Fixture {
        _dir: tempfile::TempDir,
        store: store::Store,
        next: i64,
    }

    impl Fixture {
        async fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let store = store::Store::open(&dir.path().join("m.db")).await.unwrap();
            Fixture {
                _dir: dir,
                store,
                next: 0,
            }
        }

        async fn add(
            &mut self,
            kind: &str,
            tool: &str,
            title: &str,
            body: &str,
            input: &str,
            output: &str,
        ) -> i64 {
            self.next += 1;
            let event_id = format!("{:032x}", self.next);
            let host_event = match kind {
                "pre_compact" => "PreCompact",
                "post_compact" => "PostCompact",
                _ => "Other",
            };
            let id = sqlx::query(
                "INSERT INTO observations (event_id, session_id, project, agent, kind, host_event,
                     tool_name, title, body, input, output, content_hash, occurred_at, stored_at)
                 VALUES (?, 's', '/p', 'claude-code', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&event_id)
            .bind(kind)
            .bind(host_event)
            .bind(tool)
            .bind(title)
            .bind(body)
            .bind((!input.is_empty()).then_some(input))
            .bind((!output.is_empty()).then_some(output))
            .bind(&event_id)
            .bind(self.next * 1000)
            .bind(self.next * 1000)
            .execute(self.store.pool())
            .await
            .unwrap()
            .last_insert_rowid();
            if kind == "pre_compact" {
                sqlx::query(
                    "INSERT INTO compactions (event_id, session_id, project, phase, tokens_before,
                         occurred_at) VALUES (?, 's', '/p', 'pre', 5000, ?)",
                )
                .bind(&event_id)
                .bind(self.next * 1000)
                .execute(self.store.pool())
                .await
                .unwrap();
            }
            id
        }

        async fn edit(&mut self, file: &str) -> i64 {
            let input = format!(r#"{{"file_path":"/p/{file}","old_string":"a","new_string":"b"}}"#);
            self.add(
                "post_tool",
                "Edit",
                &format!("Edit: /p/{file}"),
                "",
                &input,
                "",
            )
            .await
        }

        async fn count(&self, sql: &'static str) -> i64 {
            let (n,): (i64,) = sqlx::query_as(sql)
                .fetch_one(self.store.pool())
                .await
                .unwrap();
            n
        }
    }

    #[tokio::test]
    async fn edit_runs_group_compactions_checkpoint_and_redelivery_changes_nothing() {
        let mut f = Fixture::new().await;
        let compressor = Compressor::new(f.store.pool().clone(), 1_000_000);
        f.add(
            "prompt",
            "",
            "fix the parser",
            "fix the parser test",
            "",
            "",
        )
        .await;
        f.edit("src/parser.rs").await;
        let read = r#"{"file_path":"/p/src/parser.rs"}"#;
        f.add("post_tool", "Read", "Read: /p/src/parser.rs", "", read, "")
            .await;
        f.edit("src/parser.rs").await;
        let last_edit = f.edit("src/parser.rs").await;
        let written = compressor
            .process(&[("s".into(), last_edit)], &[])
            .await
            .unwrap();
        // One row, announced once with its latest revision.
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].revision, 3);
        let (title, kind, ids): (String, String, String) =
            sqlx::query_as("SELECT title, type, observation_ids FROM structured_observations")
                .fetch_one(f.store.pool())
                .await
                .unwrap();
        assert_eq!(title, "Edited src/parser.rs (3 edits)");
        assert_eq!(kind, "bugfix");
        assert_eq!(ids, "[2,3,4,5]");

        // Redelivered notices change nothing.
        assert!(
            compressor
                .process(&[("s".into(), last_edit)], &[])
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            compressor
                .process(&[("s".into(), 2)], &[])
                .await
                .unwrap()
                .is_empty()
        );

        // A command breaks the run; the next edit is a new row.
        let bash = r#"{"command":"cargo test"}"#;
        f.add(
            "post_tool",
            "Bash",
            "Bash: cargo test",
            "",
            bash,
            "test result: ok. 3 passed",
        )
        .await;
        f.edit("src/parser.rs").await;
        f.add(
            "pre_compact",
            "",
            "context compaction starting (auto)",
            "",
            "",
            "",
        )
        .await;
        let post = f
            .add(
                "post_compact",
                "",
                "context compacted (auto)",
                "The parser was fixed.",
                "",
                "",
            )
            .await;
        let written = compressor
            .process(&[("s".into(), post)], &[])
            .await
            .unwrap();
        let kinds: Vec<&str> = written.iter().map(|w| w.kind).collect();
        assert_eq!(kinds, vec!["structured", "structured", "checkpoint"]);
        assert_eq!(
            f.count("SELECT count(*) FROM structured_observations")
                .await,
            3
        );
        let (trigger, host, before, revision): (String, String, i64, i64) = sqlx::query_as(
            "SELECT trigger, host_summary, tokens_before, revision FROM checkpoints",
        )
        .fetch_one(f.store.pool())
        .await
        .unwrap();
        assert_eq!(
            (trigger.as_str(), host.as_str(), before, revision),
            ("pre_compact", "The parser was fixed.", 5000, 2)
        );
        assert_eq!(f.count("SELECT count(*) FROM session_summaries").await, 0);

        // Session end: the final summary.
        let end = f
            .add("session_end", "", "session ended (other)", "", "", "")
            .await;
        let written = compressor.process(&[("s".into(), end)], &[]).await.unwrap();
        assert_eq!(written.len(), 1);
        let (status, files): (String, String) =
            sqlx::query_as("SELECT status, files_modified FROM session_summaries")
                .fetch_one(f.store.pool())
                .await
                .unwrap();
        assert_eq!(
            (status.as_str(), files.as_str()),
            ("final", r#"["/p/src/parser.rs"]"#)
        );
    }

    #[tokio::test]
    async fn enough_raw_text_writes_a_partial_summary() {
        let mut f = Fixture::new().await;
        let compressor = Compressor::new(f.store.pool().clone(), 100);
        let long = "please make the importer resumable ".repeat(20);
        f.add(
            "prompt",
            "",
            "please make the importer resumable",
            &long,
            "",
            "",
        )
        .await;
        let last = f.edit("src/import.rs").await;
        let written = compressor
            .process(&[("s".into(), last)], &[])
            .await
            .unwrap();
        let summary = written
            .iter()
            .find(|w| w.kind == "summary")
            .expect("a summary");
        assert_eq!(summary.trigger, "threshold");
        let (status,): (String,) = sqlx::query_as("SELECT status FROM session_summaries")
            .fetch_one(f.store.pool())
            .await
            .unwrap();
        assert_eq!(status, "partial");
        // The counter starts again: a small step does not rewrite it.
        let next = f.edit("src/other.rs").await;
        let written = compressor
            .process(&[("s".into(), next)], &[])
            .await
            .unwrap();
        assert!(written.iter().all(|w| w.kind != "summary"));
    }
}
