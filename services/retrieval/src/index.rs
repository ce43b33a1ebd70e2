//! Indexing: from stored observations to memory items (full-text now, vectors in the
//! background, see [`crate::backfill`]).
//!
//! Retrieval consumes `mneme.ingest.stored` through a durable consumer and indexes each
//! observation worth remembering as a memory item with a kind. Indexing is idempotent (one item
//! per source row), so redelivery and the start-up catch-up cannot duplicate anything.

use crate::lexical::{self, LexDoc, Lexical};
use serde_json::Value;
use sha2::Digest as _;
use sqlx::SqlitePool;

/// The longest indexed text of one item; the whole observation stays available through `get`.
/// The longest text of a tool's output or an error indexed: the rest of a long output is
/// seldom what a question asks after, and it would fill the full-text index.
const MAX_TEXT_CHARS: usize = 4_000;
/// The longest text of what a person or the assistant wrote (a prompt, an answer, a
/// compaction's summary, a saved memory) indexed: all that ingest keeps. A long answer's last
/// paragraphs are as likely to hold what is asked later as its first ones.
const MAX_WRITTEN_CHARS: usize = 20_000;
/// The longest text handed to the embedding model (it reads about 256 tokens anyway).
const MAX_EMBED_CHARS: usize = 1_500;
/// The longest text of a neighbouring item indexed with an item.
const MAX_CONTEXT_CHARS: usize = 1_000;
/// The longest part of the previous item embedded with an item.
const MAX_PREV_EMBED_CHARS: usize = 300;
/// Further pieces of a long item embedded after the first. The first reads 600 to 1,000
/// characters of the item, each further piece 300 to 500 new ones ([`PIECE_TOKENS`]), so
/// sixteen pieces cover about 6,000 characters of a long answer; the rest of it is found by
/// its words.
pub const MAX_EXTRA_CHUNKS: usize = 15;
/// Further pieces of a tool's output embedded after the first, by default: eight pieces read
/// about 3,000 of the 4,000 characters kept of an output. Chosen on the coding benchmark's
/// development half against sixteen and four (docs/evaluation.md): the end of an output is
/// less often what a question asks after than a reply's, and the model read real coding
/// sessions 42 % faster.
pub const TOOL_EXTRA_CHUNKS: usize = 7;
/// Characters a piece repeats of the one before, so a sentence cut at a boundary is whole in
/// one of the two.
const CHUNK_OVERLAP: usize = 200;
/// Tokens of a long item's text in each piece after the first: what all-MiniLM-L6-v2 was
/// trained on (sequences of 128 tokens), and half what it reads, so a fact in a long answer is
/// not drowned by the paragraphs around it.
pub const PIECE_TOKENS: usize = 128;

/// One observation as retrieval reads it.
#[derive(Debug, sqlx::FromRow)]
struct ObservationRow {
    id: i64,
    session_id: String,
    project: String,
    agent: String,
    author: String,
    kind: String,
    tool_name: String,
    title: String,
    body: String,
    input: Option<String>,
    occurred_at: i64,
}

/// A memory item about to be indexed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub source: &'static str,
    pub source_id: i64,
    pub kind: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub tool_name: String,
    pub title: String,
    pub text: String,
    pub files: Vec<String>,
    pub concepts: Vec<String>,
    pub occurred_at: i64,
    /// Whether the items before it in its session are indexed with it (raw events: yes; items
    /// that sum up, like summaries and patterns, stand alone).
    pub with_context: bool,
}

impl NewItem {
    /// What the embedding model reads: the end of the previous item of the session, then the
    /// title (unless the text starts with it) and the text.
    pub fn embed_text(title: &str, text: &str, prev: &str) -> String {
        let own = if text.starts_with(title) {
            text.to_owned()
        } else {
            format!("{title}\n{text}")
        };
        let prev = prev.trim();
        let joined = if prev.is_empty() {
            own
        } else {
            // Only the end of a long previous item: it is context, the item itself must fit.
            let skip = prev.chars().count().saturating_sub(MAX_PREV_EMBED_CHARS);
            let tail: String = prev.chars().skip(skip).collect();
            format!("{tail} {own}")
        };
        cut(&joined, MAX_EMBED_CHARS)
    }

    /// The further pieces of a long item the model reads after [`NewItem::embed_text`], at
    /// most `extra`: the model reads about 256 tokens of a text, so the end of a long reply or
    /// tool output would otherwise be invisible to search by meaning. Each piece is the title
    /// and a window of the item's own text that starts where the model stopped reading the
    /// piece before, less an overlap, at a word boundary, so every part of the text is read by
    /// some piece. `reach(text, tokens)` says how many characters of a text the model reads of
    /// its first `tokens` tokens ([`crate::models::Embedder::reach`]); a piece holds what the
    /// model reads of [`PIECE_TOKENS`] tokens, so a fact in a long text is a good share of its
    /// piece. Empty for an item the first piece reads whole.
    pub fn embed_chunks(
        title: &str,
        text: &str,
        prev: &str,
        extra: usize,
        reach: &dyn Fn(&str, usize) -> usize,
    ) -> Vec<String> {
        if extra == 0 {
            return Vec::new();
        }
        let own: Vec<char> = if text.starts_with(title) {
            text.chars().collect()
        } else {
            format!("{title}\n{text}").chars().collect()
        };
        // How much of the item's own text the first piece held, after the end of the
        // previous item and a space.
        let prev = prev.trim();
        let before = match prev.chars().count().min(MAX_PREV_EMBED_CHARS) {
            0 => 0,
            tail => tail + 1,
        };
        let first = Self::embed_text(title, text, prev);
        let mut covered = reach(&first, usize::MAX)
            .saturating_sub(before)
            .min(own.len());
        let mut last_read = covered;
        let title_chars = title.chars().count() + 1;
        let window = MAX_EMBED_CHARS
            .saturating_sub(title_chars)
            .max(CHUNK_OVERLAP * 2);
        let mut pieces = Vec::new();
        while covered < own.len() && pieces.len() < extra {
            // The overlap is a small share of what a piece reads, so each moves well forward
            // even where the model reads few characters (dense code, long numbers).
            let mut start = covered.saturating_sub(CHUNK_OVERLAP.min(last_read / 4));
            // Start on a word, not inside one, when a space is near.
            if let Some(space) = own[start..covered].iter().position(|c| c.is_whitespace()) {
                start += space + 1;
            }
            while start < covered && own[start].is_whitespace() {
                start += 1;
            }
            let end = (start + window).min(own.len());
            let body: String = own[start..end].iter().collect();
            let read = reach(&format!("{title}\n{body}"), PIECE_TOKENS)
                .saturating_sub(title_chars)
                .min(end - start);
            let reached = start + read;
            if reached <= covered {
                // The model reads nothing new of this text (a title longer than it reads).
                break;
            }
            // The piece is what the model reads of it, no more.
            let body: String = own[start..reached].iter().collect();
            pieces.push(format!("{title}\n{body}"));
            last_read = read;
            covered = reached;
        }
        pieces
    }
}

/// Words that make a sentence the writer's statement about themselves or their team ("I use
/// Neovim", "we moved staging to port 8443", "my laptop is a ThinkPad").
const FIRST_PERSON: &[&str] = &[
    "i", "i'm", "im", "i've", "ive", "i'd", "i'll", "my", "mine", "we", "we're", "we've", "our",
    "ours",
];
/// Openings of a request, not a statement, even in the first person ("please …", "can we …").
const REQUEST_OPENINGS: &[&str] = &[
    "please", "can", "could", "would", "will", "should", "let's", "lets", "help",
];

/// What a person said about themselves or their work in a text of several sentences, each on
/// its own, at most `limit`: first-person statements first, then sentences naming something
/// specific, longest first within each. A fact or preference said in passing ("btw I use
/// Neovim now", "CI moved to GitLab CI") inside a message about something else is a small part
/// of what the model reads of the whole message; embedded alone it is found by a question
/// about it. Questions, requests, code and very short or long sentences are left out, and so
/// is a text that is one statement, which its first piece already is.
pub fn statements(text: &str, limit: usize) -> Vec<String> {
    if limit == 0 {
        return Vec::new();
    }
    let mut sentences = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            sentences.push(std::mem::take(&mut current));
            continue;
        }
        current.push(c);
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()) {
            sentences.push(std::mem::take(&mut current));
        }
    }
    sentences.push(current);
    let sentences: Vec<String> = sentences
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if sentences.len() < 2 {
        return Vec::new();
    }
    // Each statement with whether it is in the first person: those come first.
    let mut found: Vec<(bool, String)> = sentences
        .into_iter()
        .filter_map(|sentence| {
            if sentence.ends_with('?') {
                return None;
            }
            let letters = sentence.chars().filter(|c| c.is_alphabetic()).count();
            let others = sentence
                .chars()
                .filter(|c| !c.is_alphabetic() && !c.is_whitespace())
                .count();
            // Code and logs: a statement is mostly letters.
            if others * 4 > letters {
                return None;
            }
            let words: Vec<String> = sentence
                .split_whitespace()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                        .to_lowercase()
                        .replace('\u{2019}', "'")
                })
                .filter(|w| !w.is_empty())
                .collect();
            if !(3..=40).contains(&words.len()) {
                return None;
            }
            // "btw", "also" and the like before the subject do not make a request.
            let opening = words
                .iter()
                .find(|w| !matches!(w.as_str(), "btw" | "also" | "oh" | "and" | "so" | "ok"))
                .map(String::as_str)
                .unwrap_or_default();
            if REQUEST_OPENINGS.contains(&opening) {
                return None;
            }
            let first_person = words.iter().any(|w| FIRST_PERSON.contains(&w.as_str()));
            // Without a first person, a sentence is a statement when it names something a
            // later question can ask after ("Upgraded Node from 20 to 22", "CI moved to GitLab
            // CI"): a developer's note of what changed often has no subject. Exclamations
            // and short remarks ("That's great, Melanie!") name nothing to ask after.
            let specific =
                !sentence.ends_with('!') && words.len() >= 5 && names_something_specific(&sentence);
            (first_person || specific).then_some((first_person, sentence))
        })
        .collect();
    found.sort_by_key(|(first_person, s)| {
        (
            std::cmp::Reverse(*first_person),
            std::cmp::Reverse(s.chars().count()),
        )
    });
    found.truncate(limit);
    found.into_iter().map(|(_, s)| s).collect()
}

/// Whether a sentence names something a later question can ask after: a number or version,
/// a code identifier (`test_refund`, `config.yaml`), or a name written with a capital inside
/// the sentence ("moved to GitLab CI"). A name the writer addresses someone by ("Hey Maria",
/// "Thanks, John.", "That sounds tough, Caroline.") is not something they said, and a capital
/// after a colon ("Caroline: Thanks for the offer.") starts a clause rather than names.
fn names_something_specific(sentence: &str) -> bool {
    let tokens: Vec<&str> = sentence.split_whitespace().collect();
    let bare = |raw: &str| raw.trim_matches(|c: char| !c.is_alphanumeric()).to_owned();
    tokens.iter().enumerate().any(|(n, raw)| {
        let word = bare(raw);
        if word.chars().any(|c| c.is_ascii_digit())
            || (word.contains('_') || word.contains('.')) && word.len() > 2
        {
            return true;
        }
        if n == 0 || word == "I" || !word.chars().next().is_some_and(char::is_uppercase) {
            return false;
        }
        let before = tokens[n - 1];
        // After "Caroline:" or a semicolon a capital starts a clause, as at a sentence's start.
        if before.ends_with([':', ';']) {
            return false;
        }
        let addressed = raw.ends_with(',')
            || before.ends_with(',')
            || n + 1 == tokens.len()
            || ADDRESSING.contains(&bare(before).to_lowercase().as_str());
        !addressed
    })
}

/// Words before a name that make it the person addressed ("Hey Maria", "thanks John").
const ADDRESSING: &[&str] = &[
    "hey", "hi", "hello", "thanks", "thank", "oh", "yeah", "wow", "woah", "dear",
];

/// The memory kind of an observation kind, or `None` when it is not worth indexing (starts,
/// ends and pre-tool events say nothing a later post-tool or prompt does not).
fn memory_kind(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "prompt" => "prompt",
        "post_tool" => "tool",
        "tool_failure" => "error",
        "stop" | "subagent_stop" => "reply",
        "post_compact" => "compaction",
        "memory" => "memory",
        _ => return None,
    })
}

/// Index the observations with these ids; returns how many new items were written.
pub async fn index_observations(
    pool: &SqlitePool,
    lexical: &Lexical,
    ids: &[i64],
) -> anyhow::Result<usize> {
    if ids.is_empty() {
        return Ok(0);
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!(
        "SELECT id, session_id, project, agent, author, kind, tool_name, title, body, input, occurred_at
         FROM observations WHERE id IN ({marks}) ORDER BY occurred_at, id"
    );
    let mut query = sqlx::query_as::<_, ObservationRow>(sqlx::AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(id);
    }
    let rows = query.fetch_all(pool).await?;
    let items: Vec<NewItem> = rows.iter().filter_map(item_of).collect();
    write_items(pool, lexical, &items).await
}

/// Index every observation newer than the newest one already indexed: the safety net for
/// notifications that never arrived. Returns how many items were written.
pub async fn catch_up(pool: &SqlitePool, lexical: &Lexical) -> anyhow::Result<usize> {
    const BATCH: i64 = 500;
    let mut total = 0;
    let (mut after,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(MAX(source_id), 0) FROM memory_items WHERE source = 'observation'",
    )
    .fetch_one(pool)
    .await?;
    loop {
        let ids: Vec<(i64,)> =
            sqlx::query_as("SELECT id FROM observations WHERE id > ? ORDER BY id LIMIT ?")
                .bind(after)
                .bind(BATCH)
                .fetch_all(pool)
                .await?;
        let Some(&(last,)) = ids.last() else {
            return Ok(total);
        };
        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        total += index_observations(pool, lexical, &ids).await?;
        after = last;
    }
}

/// Write items (and their full-text rows) in one transaction; items already indexed are left
/// alone.
pub async fn write_items(
    pool: &SqlitePool,
    lexical: &Lexical,
    items: &[NewItem],
) -> anyhow::Result<usize> {
    let mut tx = store::begin_write(pool).await?;
    let mut written = Vec::new();
    for item in items {
        written.extend(insert_item(&mut tx, item).await?);
    }
    tx.commit().await?;
    lexical.add(&written);
    Ok(written.len())
}

/// Write items that replace what their source rows said before (a summary rewritten, a pattern
/// seen again): an item whose title and text are unchanged is left alone, a changed one is
/// deleted and written anew under a new id, so the background embedder, which works upwards
/// through ids, embeds its new text. Returns the ids of the items removed, whose vectors the
/// caller deletes, and how many items were written.
pub async fn replace_items(
    pool: &SqlitePool,
    lexical: &Lexical,
    items: &[NewItem],
    gone: &[(&'static str, i64)],
) -> anyhow::Result<(Vec<i64>, usize)> {
    let mut tx = store::begin_write(pool).await?;
    let mut removed = Vec::new();
    let mut written = Vec::new();
    for (source, source_id) in gone {
        let ids: Vec<(i64,)> =
            sqlx::query_as("SELECT id FROM memory_items WHERE source = ? AND source_id = ?")
                .bind(source)
                .bind(source_id)
                .fetch_all(&mut *tx)
                .await?;
        for (id,) in ids {
            remove_item(&mut tx, id).await?;
            removed.push(id);
        }
    }
    for item in items {
        // A compressor notice read before its session was deleted must not bring the session's
        // memory back: the check runs inside the write transaction, so it sees ingest's delete
        // once committed. Patterns are left out: they outlive any one session.
        if matches!(item.source, "structured" | "summary" | "checkpoint") {
            let (alive,): (bool,) =
                sqlx::query_as("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?)")
                    .bind(&item.session_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if !alive {
                continue;
            }
        }
        let existing: Option<(i64, String, String, String, String)> = sqlx::query_as(
            "SELECT id, title, text, session_id, project FROM memory_items
             WHERE source = ? AND source_id = ?",
        )
        .bind(item.source)
        .bind(item.source_id)
        .fetch_optional(&mut *tx)
        .await?;
        let mut replaced = None;
        if let Some((id, title, text, session, project)) = existing {
            // A pattern's item follows the session it was last seen in, even when its text
            // stays: forgetting a deleted session must not take a pattern seen since elsewhere.
            if title == item.title
                && text == item.text
                && session == item.session_id
                && project == item.project
            {
                continue;
            }
            sqlx::query("DELETE FROM memory_fts WHERE rowid = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM memory_items WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            removed.push(id);
            replaced = Some(id);
        }
        let doc = insert_item(&mut tx, item).await?;
        // A collection that held the old item holds the new one: it is the same source row. So
        // does an id handed out before: it resolves to the new item, in one step.
        if let (Some(old), Some(doc)) = (replaced, &doc) {
            for sql in [
                "UPDATE collection_items SET item_id = ?1 WHERE item_id = ?2",
                "UPDATE memory_item_moves SET new_id = ?1 WHERE new_id = ?2",
                "INSERT OR REPLACE INTO memory_item_moves (old_id, new_id) VALUES (?2, ?1)",
            ] {
                sqlx::query(sql)
                    .bind(doc.id)
                    .bind(old)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        written.extend(doc);
    }
    tx.commit().await?;
    lexical.remove(&removed);
    lexical.add(&written);
    Ok((removed, written.len()))
}

/// The highest memory item id ever given (`memory_item_seq`), or above: the largest id there
/// is counts too.
async fn last_item_id(tx: &mut sqlx::SqliteConnection) -> sqlx::Result<i64> {
    let (last,): (i64,) = sqlx::query_as(
        "SELECT MAX((SELECT last FROM memory_item_seq),
                    (SELECT COALESCE(MAX(id), 0) FROM memory_items))",
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(last)
}

/// Record that `id` was given, so it never is again.
async fn given(tx: &mut sqlx::SqliteConnection, id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE memory_item_seq SET last = MAX(last, ?)")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Delete one memory item with its full-text row and its places in collections.
async fn remove_item(tx: &mut sqlx::SqliteConnection, id: i64) -> sqlx::Result<()> {
    for sql in [
        "DELETE FROM memory_fts WHERE rowid = ?",
        "DELETE FROM collection_items WHERE item_id = ?",
        "DELETE FROM memory_item_moves WHERE new_id = ?",
        "DELETE FROM memory_items WHERE id = ?",
    ] {
        sqlx::query(sql).bind(id).execute(&mut *tx).await?;
    }
    Ok(())
}

/// Delete every memory item of these sessions with its full-text row, for sessions the user
/// deleted; returns the ids deleted, whose vectors the caller removes.
pub async fn forget_sessions(
    pool: &SqlitePool,
    lexical: &Lexical,
    sessions: &[String],
) -> anyhow::Result<Vec<i64>> {
    let mut tx = store::begin_write(pool).await?;
    let mut removed = Vec::new();
    for session in sessions {
        let ids: Vec<(i64,)> = sqlx::query_as("SELECT id FROM memory_items WHERE session_id = ?")
            .bind(session)
            .fetch_all(&mut *tx)
            .await?;
        for (id,) in ids {
            sqlx::query("DELETE FROM memory_fts WHERE rowid = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            removed.push(id);
        }
        for sql in [
            "DELETE FROM collection_items WHERE item_id IN
                 (SELECT id FROM memory_items WHERE session_id = ?)",
            "DELETE FROM memory_item_moves WHERE new_id IN
                 (SELECT id FROM memory_items WHERE session_id = ?)",
        ] {
            sqlx::query(sql).bind(session).execute(&mut *tx).await?;
        }
        sqlx::query("DELETE FROM memory_items WHERE session_id = ?")
            .bind(session)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    lexical.remove(&removed);
    Ok(removed)
}

/// What an import of memory items did.
#[derive(Debug, Default)]
pub struct ImportedItems {
    pub written: usize,
    /// Left out: already indexed, or of an observation this store does not hold.
    pub skipped: usize,
    /// (id in the export, id here) of every item written or already here, so what names items
    /// by id (a collection) can be imported after them.
    pub ids: Vec<(i64, i64)>,
}

/// Write exported memory items as they were (an import of all memory), with their full-text
/// rows. An item keeps its id when no item of this store is at or above it, so a fresh store
/// gets the same ids; otherwise it takes a new one above the others, where the background
/// embedder, which works upwards through ids, finds it.
pub async fn import_items(
    pool: &SqlitePool,
    lexical: &Lexical,
    items: &[proto::MemoryItemRecord],
) -> anyhow::Result<ImportedItems> {
    let mut ids = Vec::with_capacity(items.len());
    let mut tx = store::begin_write(pool).await?;
    let mut written = Vec::new();
    let mut skipped = 0;
    for item in items {
        // Row ids differ between stores; the event id names the same observation in both.
        let source_id = if item.source == "observation" && !item.source_event_id.is_empty() {
            let found: Option<(i64,)> =
                sqlx::query_as("SELECT id FROM observations WHERE event_id = ?")
                    .bind(&item.source_event_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            match found {
                Some((id,)) => id,
                None => {
                    skipped += 1;
                    continue;
                }
            }
        } else {
            item.source_id
        };
        // The exported id when no id up to it was ever given here (a fresh store), else a new
        // one: ids are never given twice.
        let last = last_item_id(&mut tx).await?;
        let id = if item.id > last { item.id } else { last + 1 };
        let inserted: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO memory_items (id, source, source_id, kind, session_id, project, agent,
                 author, tool_name, title, text, context, seq, files, concepts, text_hash,
                 occurred_at, indexed_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (source, source_id) DO NOTHING
             RETURNING id",
        )
        .bind(id)
        .bind(&item.source)
        .bind(source_id)
        .bind(&item.kind)
        .bind(&item.session_id)
        .bind(&item.project)
        .bind(&item.agent)
        .bind(&item.author)
        .bind(&item.tool_name)
        .bind(&item.title)
        .bind(&item.text)
        .bind(&item.context)
        .bind(item.seq)
        .bind(&item.files)
        .bind(&item.concepts)
        .bind(&item.text_hash)
        .bind(item.occurred_at_ms)
        .bind(item.indexed_at_ms)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((id,)) = inserted else {
            let here: Option<(i64,)> =
                sqlx::query_as("SELECT id FROM memory_items WHERE source = ? AND source_id = ?")
                    .bind(&item.source)
                    .bind(source_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            ids.extend(here.map(|(here,)| (item.id, here)));
            skipped += 1;
            continue;
        };
        given(&mut tx, id).await?;
        ids.push((item.id, id));
        // The full-text row is rebuilt as `insert_item` wrote it: the stored context is the
        // previous item's text, and the one before it comes from the items already here.
        let prev2 = if item.context.is_empty() {
            String::new()
        } else {
            let before: Vec<(String,)> = sqlx::query_as(
                "SELECT text FROM memory_items
                 WHERE session_id = ? AND source = ? AND seq < ? AND id <> ?
                 ORDER BY seq DESC LIMIT 2",
            )
            .bind(&item.session_id)
            .bind(&item.source)
            .bind(item.seq)
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            before
                .get(1)
                .map(|(t,)| cut(t, MAX_CONTEXT_CHARS))
                .unwrap_or_default()
        };
        let columns = fts_columns(
            &item.title,
            &item.text,
            &item.context,
            &prev2,
            item.occurred_at_ms,
        );
        sqlx::query(
            "INSERT INTO memory_fts (rowid, title, text, prev, prev2, date)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(&columns[0])
        .bind(&columns[1])
        .bind(&columns[2])
        .bind(&columns[3])
        .bind(&columns[4])
        .execute(&mut *tx)
        .await?;
        written.push(LexDoc {
            id,
            project: item.project.clone(),
            kind: item.kind.clone(),
            session_id: item.session_id.clone(),
            occurred_at: item.occurred_at_ms,
            columns,
        });
    }
    tx.commit().await?;
    let count = written.len();
    lexical.add(&written);
    Ok(ImportedItems {
        written: count,
        skipped,
        ids,
    })
}

/// Insert one item and its full-text row; `None` when its source row is already indexed.
async fn insert_item(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    item: &NewItem,
) -> anyhow::Result<Option<LexDoc>> {
    let now = common::time::now_ms();
    // The two items before this one in its session: an answer is found by the question it
    // answers, a tool result by the request that led to it. Derived items (summaries,
    // patterns) stand alone.
    let (last_seq,): (i64,) =
        sqlx::query_as("SELECT COALESCE(MAX(seq), 0) FROM memory_items WHERE session_id = ?")
            .bind(&item.session_id)
            .fetch_one(&mut **tx)
            .await?;
    let seq = last_seq + 1;
    // Context comes from items of the same source, so a summary written between two events is
    // not read as what the second one answers.
    let previous: Vec<(String,)> = if item.with_context {
        sqlx::query_as(
            "SELECT text FROM memory_items WHERE session_id = ? AND source = ?
             ORDER BY seq DESC LIMIT 2",
        )
        .bind(&item.session_id)
        .bind(item.source)
        .fetch_all(&mut **tx)
        .await?
    } else {
        Vec::new()
    };
    let context = |i: usize| {
        previous
            .get(i)
            .map(|(t,)| cut(t, MAX_CONTEXT_CHARS))
            .unwrap_or_default()
    };
    let (prev, prev2) = (context(0), context(1));
    let embed_text = NewItem::embed_text(&item.title, &item.text, &prev);
    let text_hash = hash(&embed_text);
    let next = last_item_id(tx).await? + 1;
    let inserted: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO memory_items (id, source, source_id, kind, session_id, project, agent,
             author, tool_name, title, text, context, seq, files, concepts, text_hash,
             occurred_at, indexed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (source, source_id) DO NOTHING
         RETURNING id",
    )
    .bind(next)
    .bind(item.source)
    .bind(item.source_id)
    .bind(&item.kind)
    .bind(&item.session_id)
    .bind(&item.project)
    .bind(&item.agent)
    .bind(&item.author)
    .bind(&item.tool_name)
    .bind(&item.title)
    .bind(&item.text)
    .bind(&prev)
    .bind(seq)
    .bind(item.files.join("\n"))
    .bind(item.concepts.join("\n"))
    .bind(&text_hash)
    .bind(item.occurred_at)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((id,)) = inserted else {
        return Ok(None);
    };
    given(tx, id).await?;
    let columns = fts_columns(&item.title, &item.text, &prev, &prev2, item.occurred_at);
    sqlx::query(
        "INSERT INTO memory_fts (rowid, title, text, prev, prev2, date) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(id)
    .bind(&columns[0])
    .bind(&columns[1])
    .bind(&columns[2])
    .bind(&columns[3])
    .bind(&columns[4])
    .execute(&mut **tx)
    .await?;
    Ok(Some(LexDoc {
        id,
        project: item.project.clone(),
        kind: item.kind.clone(),
        session_id: item.session_id.clone(),
        occurred_at: item.occurred_at,
        columns,
    }))
}

/// The full-text row of an item: what `memory_fts` and the in-memory copy both index.
pub fn fts_columns(
    title: &str,
    text: &str,
    prev: &str,
    prev2: &str,
    occurred_at: i64,
) -> [String; lexical::COLUMNS] {
    // The title is indexed on its own only when the text does not already say it, so a
    // prompt (whose title is its first line) is not counted twice.
    let title = if text.contains(title) { "" } else { title };
    [
        store::fts::index_text(title),
        store::fts::index_text(text),
        store::fts::index_text(prev),
        store::fts::index_text(prev2),
        crate::text::date_words(occurred_at),
    ]
}

/// Fill the in-memory full-text copy from `memory_items`, each row rebuilt as [`insert_item`]
/// wrote it, then let it answer searches. Returns how many items it holds.
pub async fn load_lexical(pool: &SqlitePool, lexical: &Lexical) -> anyhow::Result<u64> {
    use futures::TryStreamExt as _;
    type Row = (
        i64,
        String,
        String,
        String,
        String,
        String,
        String,
        String,
        i64,
    );
    /// An item as read, with the text two before it: what its full-text row is made from.
    struct Read {
        id: i64,
        session_id: String,
        project: String,
        kind: String,
        title: String,
        text: String,
        context: String,
        prev2: String,
        at: i64,
    }
    const BATCH: usize = 1_000;
    // Tokenising and stemming are most of the load, so batches are prepared on blocking
    // threads, as many at once as there are cores, and added to the copy in the order they
    // were read: the copy is the one a single thread would build.
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    let prepare = |batch: Vec<Read>| {
        tokio::task::spawn_blocking(move || {
            let docs: Vec<LexDoc> = batch
                .into_iter()
                .map(|r| LexDoc {
                    columns: fts_columns(&r.title, &r.text, &r.context, &r.prev2, r.at),
                    id: r.id,
                    project: r.project,
                    kind: r.kind,
                    session_id: r.session_id,
                    occurred_at: r.at,
                })
                .collect();
            lexical::prepare(&docs)
        })
    };
    let mut pending = std::collections::VecDeque::new();
    let (mut held, mut tokens) = (0, 0);
    // One read transaction, so FTS5's totals and the items are of the same moment.
    let mut tx = pool.begin().await?;
    let averages: Option<(Vec<u8>,)> =
        sqlx::query_as("SELECT block FROM memory_fts_data WHERE id = 1")
            .fetch_optional(&mut *tx)
            .await?;
    let fts_totals = averages.and_then(|(block,)| fts5_totals(&block));
    // Ids grow with `seq` within a session, so reading in id order sees each item after the
    // ones it was indexed with; the last two texts of each session and source are its context
    // (only items that stand alone are ever replaced, so none is missing from under another).
    let mut rows = sqlx::query_as::<_, Row>(
        "SELECT id, source, session_id, project, kind, title, text, context, occurred_at
         FROM memory_items ORDER BY id",
    )
    .fetch(&mut *tx);
    let mut history: std::collections::HashMap<(String, String), [String; 2]> =
        std::collections::HashMap::new();
    let mut batch = Vec::with_capacity(BATCH);
    while let Some((id, source, session_id, project, kind, title, text, context, at)) =
        rows.try_next().await?
    {
        let last = history.entry((session_id.clone(), source)).or_default();
        let prev2 = if context.is_empty() {
            String::new()
        } else {
            cut(&last[1], MAX_CONTEXT_CHARS)
        };
        last[1] = std::mem::replace(&mut last[0], text.clone());
        batch.push(Read {
            id,
            session_id,
            project,
            kind,
            title,
            text,
            context,
            prev2,
            at,
        });
        if batch.len() == BATCH {
            pending.push_back(prepare(std::mem::replace(
                &mut batch,
                Vec::with_capacity(BATCH),
            )));
            if pending.len() > parallel
                && let Some(oldest) = pending.pop_front()
            {
                let (h, t) = lexical.load_prepared(oldest.await?);
                (held, tokens) = (held + h, tokens + t);
            }
        }
    }
    drop(rows);
    tx.rollback().await?;
    pending.push_back(prepare(batch));
    while let Some(oldest) = pending.pop_front() {
        let (h, t) = lexical.load_prepared(oldest.await?);
        (held, tokens) = (held + h, tokens + t);
    }
    if fts_totals.is_none() {
        tracing::warn!("FTS5 totals unreadable; full-text scores may differ slightly from FTS5");
    }
    lexical.finish_load(fts_totals, held, tokens);
    Ok(lexical.size().0)
}

/// FTS5's row and token totals (all columns) from its averages record (`%_data` row 1: SQLite
/// varints, the row count then one token count per column). FTS5 never subtracts deleted rows
/// of a `contentless_delete` table from them, so they cannot be recounted from the items.
fn fts5_totals(block: &[u8]) -> Option<(u64, u64)> {
    let mut at = 0;
    let mut next = || {
        let mut value = 0u64;
        for i in 0..9 {
            let byte = *block.get(at)?;
            at += 1;
            if i == 8 {
                return Some((value << 8) | u64::from(byte));
            }
            value = (value << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    };
    let rows = next()?;
    let tokens = (0..lexical::COLUMNS).map(|_| next()).sum::<Option<u64>>()?;
    Some((rows, tokens))
}

/// The memory item for an observation, if it is worth one.
fn item_of(row: &ObservationRow) -> Option<NewItem> {
    let kind = memory_kind(&row.kind)?;
    let limit = match kind {
        "prompt" | "reply" | "compaction" | "memory" => MAX_WRITTEN_CHARS,
        _ => MAX_TEXT_CHARS,
    };
    let text = cut(row.body.trim(), limit);
    if text.is_empty() && kind != "tool" && kind != "error" {
        return None;
    }
    let input: Option<Value> = row
        .input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok());
    let mut files = input.as_ref().map(files_of).unwrap_or_default();
    let mut concepts = Vec::new();
    if kind == "memory" {
        // A saved memory names its own files and concepts (see ingest's record of it).
        let list = |key: &str| -> Vec<String> {
            input
                .as_ref()
                .and_then(|i| i.get(key))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        files = list("files");
        concepts = list("concepts");
    }
    if !row.tool_name.is_empty() {
        concepts.push(tool_category(&row.tool_name).to_owned());
    }
    if kind == "error" {
        concepts.push("error".to_owned());
    }
    for file in &files {
        if let Some(language) = language_of(file)
            && !concepts.iter().any(|c| c == language)
        {
            concepts.push(language.to_owned());
        }
    }
    Some(NewItem {
        source: "observation",
        source_id: row.id,
        kind: kind.to_owned(),
        session_id: row.session_id.clone(),
        project: row.project.clone(),
        agent: row.agent.clone(),
        author: row.author.clone(),
        tool_name: row.tool_name.clone(),
        title: row.title.clone(),
        text: if text.is_empty() {
            row.title.clone()
        } else {
            text
        },
        files,
        concepts,
        occurred_at: row.occurred_at,
        with_context: true,
    })
}

/// File paths a tool input names.
fn files_of(input: &Value) -> Vec<String> {
    const KEYS: [&str; 5] = ["file_path", "path", "notebook_path", "filePath", "filename"];
    let mut files: Vec<String> = KEYS
        .iter()
        .filter_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    files.dedup();
    files
}

/// A coarse category of a tool by its name, used as a concept tag.
fn tool_category(tool: &str) -> &'static str {
    match tool {
        "Read" | "NotebookRead" => "file-read",
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => "file-edit",
        "Bash" | "BashOutput" | "KillShell" => "shell",
        "Grep" | "Glob" | "LS" => "search",
        "WebFetch" | "WebSearch" => "web",
        "Task" | "Agent" => "subagent",
        t if t.starts_with("mcp__") => "mcp",
        _ => "tool",
    }
}

/// The language a file is written in, by extension, as a concept tag.
fn language_of(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1;
    Some(match extension {
        "rs" => "rust",
        "py" => "python",
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" => "javascript",
        "go" => "go",
        "java" => "java",
        "rb" => "ruby",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" => "cpp",
        "sql" => "sql",
        "md" => "markdown",
        "toml" | "yaml" | "yml" | "json" => "config",
        "sh" | "bash" => "shell-script",
        _ => return None,
    })
}

/// sha256 of `text`, hex.
pub fn hash(text: &str) -> String {
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// At most `max` characters of `text`.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concepts_and_files_come_from_the_tool_input() {
        let row = ObservationRow {
            id: 7,
            session_id: "s".into(),
            project: "/p".into(),
            agent: "claude-code".into(),
            author: "dev".into(),
            kind: "post_tool".into(),
            tool_name: "Edit".into(),
            title: "Edit src/main.rs".into(),
            body: "Edit src/main.rs".into(),
            input: Some(r#"{"file_path":"/p/src/main.rs","old_string":"a"}"#.into()),
            occurred_at: 1,
        };
        let item = item_of(&row).unwrap();
        assert_eq!(item.kind, "tool");
        assert_eq!(item.files, ["/p/src/main.rs"]);
        assert_eq!(item.concepts, ["file-edit", "rust"]);
        let start = ObservationRow {
            kind: "session_start".into(),
            ..row
        };
        assert!(item_of(&start).is_none());
    }

    #[test]
    fn a_long_item_is_read_in_overlapping_pieces_to_its_end() {
        let sentences: Vec<String> = (0..60)
            .map(|i| format!("sentence number {i} says something about the build."))
            .collect();
        let text = sentences.join(" ");
        let prev = "the previous item";
        // A model that reads whatever it is sent (an endpoint): pieces as long as allowed.
        let whole = |t: &str, _tokens: usize| t.chars().count();
        let first = NewItem::embed_text("Reply", &text, prev);
        let pieces = NewItem::embed_chunks("Reply", &text, prev, MAX_EXTRA_CHUNKS, &whole);
        assert_eq!(pieces.len(), 2, "{} characters in all", text.len());
        for piece in &pieces {
            assert!(piece.starts_with("Reply\n"));
            assert!(piece.chars().count() <= MAX_EMBED_CHARS);
            // Each starts on a word.
            let body = piece.strip_prefix("Reply\n").unwrap();
            assert!(text.contains(body), "{body}");
            assert!(text[..text.find(body).unwrap()].ends_with(' '));
        }
        // Together they reach the end, and each overlaps the one before.
        assert!(pieces[1].ends_with("sentence number 59 says something about the build."));
        let tail_of = |piece: &str| piece.chars().rev().take(50).collect::<Vec<_>>();
        let first_tail: String = tail_of(&first).into_iter().rev().collect();
        assert!(pieces[0].contains(&first_tail));
        let second_tail: String = tail_of(&pieces[0]).into_iter().rev().collect();
        assert!(pieces[1].contains(&second_tail));
        // A short item is one piece, and no extra pieces are asked for when none are allowed.
        let chunks = |text: &str, extra| NewItem::embed_chunks("Reply", text, prev, extra, &whole);
        assert!(chunks("short", MAX_EXTRA_CHUNKS).is_empty());
        assert!(chunks(&text, 0).is_empty());
        // At most the number allowed, even for the longest text indexed.
        assert_eq!(chunks(&text.repeat(3), 2).len(), 2);
    }

    /// With a model that reads less than a piece holds (the local model stops after 256
    /// tokens), each piece is what the model reads of [`PIECE_TOKENS`] tokens and starts where
    /// it stopped reading the one before, so every character of a long text is read by some
    /// piece and none is skipped between them.
    #[test]
    fn the_pieces_of_a_long_item_leave_nothing_unread() {
        let sentences: Vec<String> = (0..60)
            .map(|i| format!("sentence number {i} says something about the build."))
            .collect();
        let text = sentences.join(" ");
        let prev = "the previous item";
        // A model reading four characters a token, 700 characters at most.
        let reads =
            |t: &str, tokens: usize| t.chars().count().min(700).min(tokens.saturating_mul(4));
        let first = NewItem::embed_text("Reply", &text, prev);
        let pieces = NewItem::embed_chunks("Reply", &text, prev, MAX_EXTRA_CHUNKS, &reads);
        // The first piece reads the previous item's end, a space and "Reply\n" before the text.
        let mut covered = reads(&first, usize::MAX) - (prev.len() + 1) - "Reply\n".len();
        assert!(pieces.len() >= 4, "{} pieces", pieces.len());
        for piece in &pieces {
            // A piece holds what the model reads of its tokens, no more.
            assert_eq!(reads(piece, PIECE_TOKENS), piece.chars().count());
            let body = piece.strip_prefix("Reply\n").unwrap();
            let start = text.find(body).unwrap();
            assert!(start < covered, "a gap between {covered} and {start}");
            assert!(start + body.len() > covered, "nothing new read");
            assert!(text[..start].ends_with(' '));
            covered = start + body.len();
        }
        assert_eq!(covered, text.len(), "the text is read to its end");
        // Stopped by the number allowed before the end.
        let few = NewItem::embed_chunks("Reply", &text, prev, 2, &reads);
        assert_eq!(few, pieces[..2]);
    }

    #[test]
    fn statements_are_taken_from_a_message_about_something_else() {
        let prompt = "The checkout test fails on CI with a timeout after 30 seconds. \
            Can you look at the retry loop in payments/client.rs? \
            btw I switched my editor to Helix last week.\n\
            let x = foo(a, b); // { retry: 3 }\n\
            Why does it only fail on CI?";
        // The first person first, then what names something specific ("CI", "30").
        assert_eq!(
            statements(prompt, 3),
            vec![
                "btw I switched my editor to Helix last week.".to_owned(),
                "The checkout test fails on CI with a timeout after 30 seconds.".to_owned(),
            ]
        );
        // Without a first person, a sentence naming nothing specific is not a statement, nor
        // is an exclamation, nor a short remark.
        let remarks = "That sounds like a good plan to me overall. That's great, Melanie! \
            Upgraded Node from 20 to 22 across the images. Sounds good, Caroline. \
            Hey Maria, sorry to hear about the move. That must have been tough for you, John. \
            Melanie: Thanks for letting me join the trip. \
            test_export_large_csv is in the quarantine list now.";
        assert_eq!(
            statements(remarks, 5),
            vec![
                "test_export_large_csv is in the quarantine list now.".to_owned(),
                "Upgraded Node from 20 to 22 across the images.".to_owned(),
            ]
        );
        // Requests and questions in the first person are not statements.
        assert!(statements("Please fix my build. Could we ship it today? Thanks.", 3).is_empty());
        // A message that is one statement is its own first piece already.
        assert!(statements("We moved staging to port 8443.", 3).is_empty());
        // Longest first, at most the limit.
        let many = "We use Postgres 16 for the main database. I prefer tabs. \
            Our staging box listens on port 8443 since the move. Done.";
        assert_eq!(
            statements(many, 2),
            vec![
                "Our staging box listens on port 8443 since the move.".to_owned(),
                "We use Postgres 16 for the main database.".to_owned()
            ]
        );
        assert!(statements(many, 0).is_empty());
    }

    #[test]
    fn embed_text_does_not_repeat_the_title() {
        assert_eq!(
            NewItem::embed_text("fix the build", "fix the build now", ""),
            "fix the build now"
        );
        assert_eq!(
            NewItem::embed_text("Bash", "cargo test", "run the tests"),
            "run the tests Bash\ncargo test"
        );
    }
}
