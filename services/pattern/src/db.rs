//! The pattern service's statements and the session walk that uses them, all inside the
//! caller's write transaction.

use crate::detect::{self, Raw};
use serde_json::json;
use sqlx::SqliteConnection;
use std::collections::BTreeSet;

/// A pattern row created or changed, to be announced once the transaction commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    pub id: i64,
    pub kind: String,
    pub hash: String,
    pub project: String,
    pub session_id: String,
    pub occurrences: i64,
    pub revision: i64,
    pub last_seen_at: i64,
}

/// The patterns changed by one transaction, each once with its latest revision.
#[derive(Debug, Default)]
pub struct Updates(pub Vec<Updated>);

impl Updates {
    fn push(&mut self, updated: Option<Updated>) {
        let Some(updated) = updated else { return };
        match self.0.iter_mut().find(|u| u.id == updated.id) {
            Some(existing) => *existing = updated,
            None => self.0.push(updated),
        }
    }
}

/// One occurrence of a pattern in an observation.
struct Occurrence<'a> {
    observation_id: i64,
    role: &'static str,
    session_id: &'a str,
    project: &'a str,
    occurred_at: i64,
}

/// A pattern to record.
struct Pattern<'a> {
    hash: String,
    kind: &'a str,
    title: String,
    text: String,
    signature: serde_json::Value,
    files: Vec<String>,
}

/// The most related observation ids kept on a pattern row.
const MAX_IDS: i64 = 50;
/// The longest list of steps a procedure keeps.
const MAX_STEPS: usize = 12;

/// Read the session's observations after its cursor, up to `upto`, and record the patterns
/// they show. A redelivered notice finds the cursor past it and changes nothing.
pub async fn walk_session(
    tx: &mut SqliteConnection,
    session_id: &str,
    upto: i64,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let cursor: i64 =
        sqlx::query_as::<_, (i64,)>("SELECT cursor FROM pattern_sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?
            .map_or(0, |(c,)| c);
    if cursor >= upto {
        return Ok(());
    }
    let raws: Vec<Raw> = sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, substr(body, 1, 4000) AS body,
             substr(input, 1, 4000) AS input, substr(output, 1, 3000) AS output, occurred_at
         FROM observations
         WHERE session_id = ? AND id > ? AND id <= ?
           AND kind IN ('post_tool', 'tool_failure', 'prompt', 'session_end')
         ORDER BY id",
    )
    .bind(session_id)
    .bind(cursor)
    .bind(upto)
    .fetch_all(&mut *tx)
    .await?;
    for raw in &raws {
        match raw.kind.as_str() {
            "tool_failure" if detect::is_not_a_failure(raw.output.as_deref().unwrap_or("")) => {}
            "tool_failure" => failure(tx, raw, now, updates).await?,
            "post_tool" => success(tx, raw, now, updates).await?,
            "prompt" => prompt(tx, raw, now, updates).await?,
            "session_end" => reflect(tx, raw, now, updates).await?,
            _ => {}
        }
    }
    sqlx::query(
        "INSERT INTO pattern_sessions (session_id, cursor, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET cursor = excluded.cursor,
             updated_at = excluded.updated_at",
    )
    .bind(session_id)
    .bind(upto.min(raws.last().map_or(upto, |r| r.id).max(cursor)))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A failure: remember it for fixes, and make it an error pattern once its signature was seen
/// twice.
async fn failure(
    tx: &mut SqliteConnection,
    raw: &Raw,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let sig = detect::signature(raw);
    let hash = sig.hash();
    sqlx::query(
        "INSERT OR IGNORE INTO pattern_failures (observation_id, session_id, project,
             signature_hash, subject_key, tool_name, error_class, occurred_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(raw.id)
    .bind(&raw.session_id)
    .bind(&raw.project)
    .bind(&hash)
    .bind(sig.subject())
    .bind(&sig.tool)
    .bind(&sig.error_class)
    .bind(raw.occurred_at)
    .execute(&mut *tx)
    .await?;
    let seen: Vec<(i64, String, String, i64)> = sqlx::query_as(
        "SELECT observation_id, session_id, project, occurred_at FROM pattern_failures
         WHERE signature_hash = ? ORDER BY observation_id",
    )
    .bind(&hash)
    .fetch_all(&mut *tx)
    .await?;
    if seen.len() < 2 {
        return Ok(());
    }
    let occurrences: Vec<Occurrence<'_>> = seen
        .iter()
        .map(|(id, session, project, at)| Occurrence {
            observation_id: *id,
            role: "error",
            session_id: session,
            project,
            occurred_at: *at,
        })
        .collect();
    let pattern = Pattern {
        hash,
        kind: "error",
        title: format!("Recurring error: {}", sig.describe()),
        text: format!(
            "{} (tool {}). Seen in earlier sessions; check how it was fixed before retrying.",
            sig.describe(),
            sig.tool
        ),
        signature: json!(sig),
        files: (!sig.file.is_empty())
            .then(|| sig.file.clone())
            .into_iter()
            .collect(),
    };
    updates.push(record(tx, &pattern, &occurrences, raw, now).await?);
    Ok(())
}

/// A success: it fixes the session's open failures on the same command or file, which makes a
/// fix pattern and a procedure (the steps between).
async fn success(
    tx: &mut SqliteConnection,
    raw: &Raw,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let subject = detect::success_subject(raw);
    if subject.is_empty() {
        return Ok(());
    }
    let open: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
        "SELECT observation_id, signature_hash, error_class, tool_name, occurred_at
         FROM pattern_failures
         WHERE session_id = ? AND subject_key = ? AND fixed_by IS NULL ORDER BY observation_id",
    )
    .bind(&raw.session_id)
    .bind(&subject)
    .fetch_all(&mut *tx)
    .await?;
    let Some((first_failure, ..)) = open.first().cloned() else {
        return Ok(());
    };
    sqlx::query(
        "UPDATE pattern_failures SET fixed_by = ?
         WHERE session_id = ? AND subject_key = ? AND fixed_by IS NULL",
    )
    .bind(raw.id)
    .bind(&raw.session_id)
    .bind(&subject)
    .execute(&mut *tx)
    .await?;
    let (_, signature_hash, error_class, tool, _) = open.last().cloned().expect("not empty");
    let steps = steps_between(tx, &raw.session_id, first_failure, raw.id, &raw.project).await?;
    let (command, file) = detect::command_and_file(raw);
    let what = if command.is_empty() {
        format!("{tool} on {file}")
    } else {
        format!("`{command}`")
    };
    let fix_line = detect::command_line(raw);
    let how = if fix_line.is_empty() {
        String::new()
    } else {
        format!(" Working command: `{}`.", cut(&fix_line, 200))
    };
    let step_text = if steps.names.is_empty() {
        "when retried".to_owned()
    } else {
        format!("after {}", steps.names.join(" → "))
    };
    let mut links: Vec<Occurrence<'_>> = open
        .iter()
        .map(|(id, _, _, _, at)| Occurrence {
            observation_id: *id,
            role: "error",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: *at,
        })
        .collect();
    links.push(Occurrence {
        observation_id: raw.id,
        role: "fix",
        session_id: &raw.session_id,
        project: &raw.project,
        occurred_at: raw.occurred_at,
    });
    let mut files = steps.files.clone();
    if !file.is_empty() && !files.contains(&file) {
        files.insert(0, file.clone());
    }
    let fix = Pattern {
        hash: detect::pattern_hash(&["fix", &signature_hash, &subject]),
        kind: "fix",
        title: format!("Fix: {what} failing with {error_class}"),
        text: format!("{what} failed ({error_class}) and succeeded {step_text}.{how}",),
        signature: json!({"error": signature_hash, "subject": subject, "error_class": error_class}),
        files: files.clone(),
    };
    updates.push(record(tx, &fix, &links, raw, now).await?);
    if !steps.names.is_empty() {
        let sequence = steps.names.join(" → ");
        let procedure = Pattern {
            hash: detect::pattern_hash(&["procedure", &subject, &steps.shape.join(" → ")]),
            kind: "procedure",
            title: format!("Procedure: getting {what} to pass"),
            text: format!("When {what} fails ({error_class}): {sequence}, then run it again.{how}"),
            signature: json!({"subject": subject, "steps": steps.names}),
            files,
        };
        let occurrence = [Occurrence {
            observation_id: raw.id,
            role: "success",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: raw.occurred_at,
        }];
        updates.push(record(tx, &procedure, &occurrence, raw, now).await?);
    }
    Ok(())
}

struct Steps {
    names: Vec<String>,
    /// The steps without their files, consecutive repeats folded: what makes two procedures
    /// the same procedure.
    shape: Vec<String>,
    files: Vec<String>,
}

/// The tool steps between a failure and its fix, consecutive repeats folded.
async fn steps_between(
    tx: &mut SqliteConnection,
    session_id: &str,
    after: i64,
    before: i64,
    project: &str,
) -> sqlx::Result<Steps> {
    let rows: Vec<Raw> = sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, '' AS body,
             substr(input, 1, 2000) AS input, NULL AS output, occurred_at
         FROM observations
         WHERE session_id = ? AND id > ? AND id < ? AND kind = 'post_tool'
         ORDER BY id LIMIT 200",
    )
    .bind(session_id)
    .bind(after)
    .bind(before)
    .fetch_all(&mut *tx)
    .await?;
    let mut names: Vec<String> = Vec::new();
    let mut shape: Vec<String> = Vec::new();
    let mut files = BTreeSet::new();
    for row in &rows {
        let (command, file) = detect::command_and_file(row);
        let (name, kind) = if !command.is_empty() {
            let name = format!("{}({command})", row.tool_name);
            (name.clone(), name)
        } else if !file.is_empty()
            && matches!(row.tool_name.as_str(), "Edit" | "Write" | "MultiEdit")
        {
            files.insert(common::keys::relative(&file, project));
            (format!("{}({file})", row.tool_name), row.tool_name.clone())
        } else {
            (row.tool_name.clone(), row.tool_name.clone())
        };
        if names.last() != Some(&name) {
            names.push(name);
        }
        if shape.last() != Some(&kind) {
            shape.push(kind);
        }
    }
    if names.len() > MAX_STEPS {
        let dropped = names.len() - MAX_STEPS;
        names.drain(..dropped);
        names.insert(0, format!("… {dropped} steps"));
    }
    Ok(Steps {
        names,
        shape,
        files: files.into_iter().collect(),
    })
}

/// Decisions, preferences and architecture choices stated in a prompt.
async fn prompt(
    tx: &mut SqliteConnection,
    raw: &Raw,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    for (kind, sentence) in detect::statements(&raw.body) {
        let key = detect::statement_key(&sentence);
        let label = match kind {
            detect::StatementKind::Decision => "Decision",
            detect::StatementKind::Preference => "Preference",
            detect::StatementKind::Architecture => "Architecture",
        };
        let pattern = Pattern {
            hash: detect::pattern_hash(&[kind.as_str(), &key]),
            kind: kind.as_str(),
            title: format!("{label}: {}", cut(&sentence, 120)),
            text: sentence.clone(),
            signature: json!({"statement": key}),
            files: Vec::new(),
        };
        let occurrence = [Occurrence {
            observation_id: raw.id,
            role: "statement",
            session_id: &raw.session_id,
            project: &raw.project,
            occurred_at: raw.occurred_at,
        }];
        updates.push(record(tx, &pattern, &occurrence, raw, now).await?);
    }
    Ok(())
}

/// At session end, what kept failing and was never fixed becomes a reflection.
async fn reflect(
    tx: &mut SqliteConnection,
    raw: &Raw,
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<()> {
    let open: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT signature_hash, subject_key, tool_name, error_class FROM pattern_failures
         WHERE session_id = ? AND fixed_by IS NULL
         GROUP BY signature_hash ORDER BY min(observation_id)",
    )
    .bind(&raw.session_id)
    .fetch_all(&mut *tx)
    .await?;
    for (hash, subject, tool, error_class) in open {
        let failures: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT observation_id, occurred_at FROM pattern_failures
             WHERE session_id = ? AND signature_hash = ? AND fixed_by IS NULL",
        )
        .bind(&raw.session_id)
        .bind(&hash)
        .fetch_all(&mut *tx)
        .await?;
        let what = subject
            .split_once(':')
            .map_or(subject.clone(), |(_, s)| s.to_owned());
        let what = if what.is_empty() { tool.clone() } else { what };
        let times = failures.len();
        let pattern = Pattern {
            hash: detect::pattern_hash(&["reflection", &hash]),
            kind: "reflection",
            title: format!("Unresolved: `{what}` failed with {error_class}"),
            text: format!(
                "`{what}` failed {times} time{} with {error_class} and was not made to work \
                 before the session ended; try another approach next time.",
                if times == 1 { "" } else { "s" }
            ),
            signature: json!({"error": hash, "subject": subject}),
            files: Vec::new(),
        };
        let occurrences: Vec<Occurrence<'_>> = failures
            .iter()
            .map(|(id, at)| Occurrence {
                observation_id: *id,
                role: "reflection",
                session_id: &raw.session_id,
                project: &raw.project,
                occurred_at: *at,
            })
            .collect();
        updates.push(record(tx, &pattern, &occurrences, raw, now).await?);
    }
    Ok(())
}

/// Create or update a pattern with its occurrences; `None` when nothing new was learnt (every
/// occurrence was recorded before).
async fn record(
    tx: &mut SqliteConnection,
    pattern: &Pattern<'_>,
    occurrences: &[Occurrence<'_>],
    raw: &Raw,
    now: i64,
) -> sqlx::Result<Option<Updated>> {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO patterns (hash, kind, title, text, signature, project, first_session_id,
             last_session_id, first_seen_at, last_seen_at, revision, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
         ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash
         RETURNING id",
    )
    .bind(&pattern.hash)
    .bind(pattern.kind)
    .bind(&pattern.title)
    .bind(&pattern.text)
    .bind(pattern.signature.to_string())
    .bind(&raw.project)
    .bind(&raw.session_id)
    .bind(&raw.session_id)
    .bind(raw.occurred_at)
    .bind(raw.occurred_at)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let mut added = 0;
    for o in occurrences {
        added += sqlx::query(
            "INSERT OR IGNORE INTO pattern_occurrences (pattern_id, observation_id, role,
                 session_id, project, occurred_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(o.observation_id)
        .bind(o.role)
        .bind(o.session_id)
        .bind(o.project)
        .bind(o.occurred_at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    }
    if added == 0 {
        return Ok(None);
    }
    let files: Vec<String> = {
        let (existing,): (String,) = sqlx::query_as("SELECT files FROM patterns WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let mut files: Vec<String> = serde_json::from_str(&existing).unwrap_or_default();
        for file in &pattern.files {
            if !files.contains(file) {
                files.push(file.clone());
            }
        }
        files
    };
    sqlx::query("UPDATE patterns SET title = ?, text = ?, project = ?, files = ? WHERE id = ?")
        .bind(&pattern.title)
        .bind(&pattern.text)
        .bind(&raw.project)
        .bind(serde_json::to_string(&files).unwrap_or_else(|_| "[]".to_owned()))
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let (occurrences, revision, last_seen_at) = recount(tx, id, pattern.kind, now).await?;
    Ok(Some(Updated {
        id,
        kind: pattern.kind.to_owned(),
        hash: pattern.hash.clone(),
        project: raw.project.clone(),
        session_id: raw.session_id.clone(),
        occurrences,
        revision,
        last_seen_at,
    }))
}

/// The role whose occurrences a pattern of `kind` counts; the other roles are links (the
/// failure a fix answered, the prompt a statement came from).
fn counted_role(kind: &str) -> &'static str {
    match kind {
        "error" => "error",
        "fix" => "fix",
        "procedure" => "success",
        "reflection" => "reflection",
        _ => "statement",
    }
}

/// Bring a pattern's counts, first and last sightings and related ids in line with its
/// occurrences, and bump its revision; returns occurrences, revision and last sighting.
async fn recount(
    tx: &mut SqliteConnection,
    id: i64,
    kind: &str,
    now: i64,
) -> sqlx::Result<(i64, i64, i64)> {
    sqlx::query_as(
        "UPDATE patterns SET
             occurrences = (SELECT count(DISTINCT observation_id) FROM pattern_occurrences
                            WHERE pattern_id = ?1 AND role = ?2),
             sessions = (SELECT count(DISTINCT session_id) FROM pattern_occurrences
                         WHERE pattern_id = ?1 AND role = ?2),
             first_session_id = (SELECT session_id FROM pattern_occurrences
                                 WHERE pattern_id = ?1 ORDER BY occurred_at, observation_id LIMIT 1),
             last_session_id = (SELECT session_id FROM pattern_occurrences
                                WHERE pattern_id = ?1
                                ORDER BY occurred_at DESC, observation_id DESC LIMIT 1),
             first_seen_at = (SELECT min(occurred_at) FROM pattern_occurrences WHERE pattern_id = ?1),
             last_seen_at = (SELECT max(occurred_at) FROM pattern_occurrences WHERE pattern_id = ?1),
             observation_ids = (SELECT json_group_array(observation_id) FROM (
                                  SELECT DISTINCT observation_id FROM pattern_occurrences
                                  WHERE pattern_id = ?1 ORDER BY observation_id DESC LIMIT ?3)),
             revision = revision + 1, updated_at = ?4
         WHERE id = ?1
         RETURNING occurrences, revision, last_seen_at",
    )
    .bind(id)
    .bind(counted_role(kind))
    .bind(MAX_IDS)
    .bind(now)
    .fetch_one(&mut *tx)
    .await
}

/// Drop what was learnt from these sessions, for sessions ingest deleted: their occurrences,
/// failures and cursors. A pattern seen elsewhere too is recounted; one seen only there is
/// deleted. Each changed or deleted pattern is pushed to `updates` with a new revision, so
/// retrieval re-reads it (and drops its item when the row is gone). Returns the rows deleted.
pub async fn forget_sessions(
    tx: &mut SqliteConnection,
    sessions: &[String],
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<u64> {
    let mut rows = 0;
    let mut touched = BTreeSet::new();
    for session in sessions {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT DISTINCT pattern_id FROM pattern_occurrences WHERE session_id = ?",
        )
        .bind(session)
        .fetch_all(&mut *tx)
        .await?;
        touched.extend(ids.into_iter().map(|(id,)| id));
        for sql in [
            "DELETE FROM pattern_occurrences WHERE session_id = ?",
            "DELETE FROM pattern_failures WHERE session_id = ?",
            "DELETE FROM pattern_sessions WHERE session_id = ?",
        ] {
            rows += sqlx::query(sql)
                .bind(session)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
    }
    for id in touched {
        let Some((kind, hash, project, revision)) =
            sqlx::query_as::<_, (String, String, String, i64)>(
                "SELECT kind, hash, project, revision FROM patterns WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            continue;
        };
        let (counted,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pattern_occurrences WHERE pattern_id = ? AND role = ?",
        )
        .bind(id)
        .bind(counted_role(&kind))
        .fetch_one(&mut *tx)
        .await?;
        let updated = if counted == 0 {
            rows += sqlx::query("DELETE FROM pattern_occurrences WHERE pattern_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            rows += sqlx::query("DELETE FROM patterns WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            Updated {
                id,
                kind,
                hash,
                project,
                session_id: String::new(),
                occurrences: 0,
                revision: revision + 1,
                last_seen_at: 0,
            }
        } else {
            let (occurrences, revision, last_seen_at) = recount(tx, id, &kind, now).await?;
            let (session_id,): (String,) =
                sqlx::query_as("SELECT last_session_id FROM patterns WHERE id = ?")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            Updated {
                id,
                kind,
                hash,
                project,
                session_id,
                occurrences,
                revision,
                last_seen_at,
            }
        };
        updates.push(Some(updated));
    }
    Ok(rows)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
