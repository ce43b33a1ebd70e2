//! Export and import of all memory as JSON lines, and the retention policy.
//!
//! `GET /v1/export` streams one JSON object a line: a header, every session, every observation,
//! every memory item, every collection (its items named by their ids in the export), then an
//! `end` line with the counts (a file without it was cut short). It reads the store opened
//! read-only, a page at a time, like the api's other lists.
//!
//! `POST /v1/import` takes such a file and hands its rows to their owners in batches: sessions
//! and observations to ingest (`mneme.sessions.import`), memory items to retrieval
//! (`mneme.retrieval.import`, which answers with each item's id in this store), collections to
//! retrieval (`mneme.retrieval.collections.create`, with those ids). Each owner leaves alone
//! what it already holds (a collection by its name), so importing a file twice doubles nothing;
//! a file with a bad line is imported up to that line, and importing it again once fixed is
//! safe. Every text is scrubbed of secrets on the way in, as HTTP events are.
//!
//! `GET`/`PUT /v1/retention` and `POST /v1/retention/apply` read, set and apply the policy,
//! which ingest keeps and applies.

use crate::State;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

type AppState = axum::extract::State<Arc<State>>;

/// The export format's version; an import refuses newer ones.
pub const FORMAT: u32 = 1;
/// Rows read from the store per page of an export.
const PAGE: i64 = 500;
/// Rows sent to an owner per import request.
const BATCH_ROWS: usize = 200;
/// Bytes sent to an owner per import request, well under NATS's default 1 MiB message.
const BATCH_BYTES: usize = 512 * 1024;
/// The longest line an import takes.
const MAX_LINE_BYTES: usize = 900 * 1024;
/// The largest import body.
const MAX_IMPORT_BYTES: usize = 1 << 30;

/// Every route of this module.
pub fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/v1/export", get(export))
        .route("/v1/import", post(import))
        .route("/v1/retention", get(retention).put(set_retention))
        .route("/v1/retention/apply", post(apply_retention))
}

/// A session line (every column of `sessions`).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct SessionLine {
    pub id: String,
    pub agent: String,
    pub agent_version: String,
    pub project: String,
    pub cwd: String,
    pub host: String,
    pub user: String,
    pub model: String,
    pub transcript_path: String,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub end_reason: Option<String>,
    pub last_event_at_ms: i64,
    pub event_count: i64,
    pub prompt_count: i64,
    pub tool_count: i64,
    pub error_count: i64,
    pub archived_at_ms: Option<i64>,
}

/// An observation line (every column of `observations`).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct ObservationLine {
    pub id: i64,
    pub event_id: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub kind: String,
    pub host_event: String,
    pub tool_name: String,
    pub tool_use_id: String,
    pub subagent_id: String,
    pub title: String,
    pub body: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub meta: String,
    pub content_hash: String,
    pub occurred_at_ms: i64,
    pub stored_at_ms: i64,
}

/// A memory item line (every column of `memory_items`, and the event id of its observation).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct ItemLine {
    pub id: i64,
    pub source: String,
    pub source_id: i64,
    pub source_event_id: String,
    pub kind: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub tool_name: String,
    pub title: String,
    pub text: String,
    pub context: String,
    pub seq: i64,
    pub files: String,
    pub concepts: String,
    pub text_hash: String,
    pub occurred_at_ms: i64,
    pub indexed_at_ms: i64,
}

/// A collection line: its columns and its items' ids (in the export's ids), in order.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CollectionLine {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub query: String,
    pub created_at_ms: i64,
    pub item_ids: Vec<i64>,
}

/// One line of an export.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Mneme {
        #[serde(default)]
        format: u32,
    },
    Session(SessionLine),
    Observation(ObservationLine),
    MemoryItem(ItemLine),
    Collection(CollectionLine),
    End {},
}

const SESSION_SELECT: &str = "SELECT id, agent, agent_version, project, cwd, host, user, model,
        transcript_path, started_at AS started_at_ms, ended_at AS ended_at_ms, end_reason,
        last_event_at AS last_event_at_ms, event_count, prompt_count, tool_count, error_count,
        archived_at AS archived_at_ms
     FROM sessions WHERE id > ? ORDER BY id LIMIT ?";
const OBSERVATION_SELECT: &str = "SELECT id, event_id, session_id, project, agent, author, kind,
        host_event, tool_name, tool_use_id, subagent_id, title, body, input, output, meta,
        content_hash, occurred_at AS occurred_at_ms, stored_at AS stored_at_ms
     FROM observations WHERE id > ? ORDER BY id LIMIT ?";
const ITEM_SELECT: &str = "SELECT m.id, m.source, m.source_id,
        coalesce(o.event_id, '') AS source_event_id, m.kind, m.session_id, m.project, m.agent,
        m.author, m.tool_name, m.title, m.text, m.context, m.seq, m.files, m.concepts,
        m.text_hash, m.occurred_at AS occurred_at_ms, m.indexed_at AS indexed_at_ms
     FROM memory_items m
     LEFT JOIN observations o ON m.source = 'observation' AND o.id = m.source_id
     WHERE m.id > ? ORDER BY m.id LIMIT ?";

/// Where an export has got to.
enum Cursor {
    Header,
    Sessions(String),
    Observations(i64),
    Items(i64),
    Collections(i64),
    End,
    Done,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    sessions: u64,
    observations: u64,
    items: u64,
    collections: u64,
}

fn line(kind: &str, row: &impl Serialize) -> String {
    let mut value = serde_json::to_value(row).unwrap_or_default();
    let mut out = serde_json::Map::new();
    out.insert("type".to_owned(), json!(kind));
    if let Value::Object(fields) = value.take() {
        out.extend(fields);
    }
    let mut text = Value::Object(out).to_string();
    text.push('\n');
    text
}

/// The next chunk of an export, and where it leaves off.
async fn next_page(
    pool: &sqlx::SqlitePool,
    cursor: Cursor,
    counts: &mut Counts,
) -> Result<(String, Cursor), sqlx::Error> {
    Ok(match cursor {
        Cursor::Header => (
            line(
                "mneme",
                &json!({"format": FORMAT, "exported_at_ms": common::now_ms()}),
            ),
            Cursor::Sessions(String::new()),
        ),
        Cursor::Sessions(after) => {
            let rows: Vec<SessionLine> = sqlx::query_as(SESSION_SELECT)
                .bind(&after)
                .bind(PAGE)
                .fetch_all(pool)
                .await?;
            counts.sessions += rows.len() as u64;
            let next = match rows.last() {
                Some(last) if rows.len() as i64 == PAGE => Cursor::Sessions(last.id.clone()),
                _ => Cursor::Observations(0),
            };
            (rows.iter().map(|r| line("session", r)).collect(), next)
        }
        Cursor::Observations(after) => {
            let rows: Vec<ObservationLine> = sqlx::query_as(OBSERVATION_SELECT)
                .bind(after)
                .bind(PAGE)
                .fetch_all(pool)
                .await?;
            counts.observations += rows.len() as u64;
            let next = match rows.last() {
                Some(last) if rows.len() as i64 == PAGE => Cursor::Observations(last.id),
                _ => Cursor::Items(0),
            };
            (rows.iter().map(|r| line("observation", r)).collect(), next)
        }
        Cursor::Items(after) => {
            let rows: Vec<ItemLine> = sqlx::query_as(ITEM_SELECT)
                .bind(after)
                .bind(PAGE)
                .fetch_all(pool)
                .await?;
            counts.items += rows.len() as u64;
            let next = match rows.last() {
                Some(last) if rows.len() as i64 == PAGE => Cursor::Items(last.id),
                _ => Cursor::Collections(0),
            };
            (rows.iter().map(|r| line("memory_item", r)).collect(), next)
        }
        Cursor::Collections(after) => {
            let rows: Vec<(i64, String, String, String, i64, String)> = sqlx::query_as(
                "SELECT c.id, c.name, c.description, c.query, c.created_at,
                     coalesce((SELECT json_group_array(item_id) FROM
                         (SELECT item_id FROM collection_items WHERE collection_id = c.id
                          ORDER BY position)), '[]')
                 FROM collections c WHERE c.id > ? ORDER BY c.id LIMIT ?",
            )
            .bind(after)
            .bind(PAGE)
            .fetch_all(pool)
            .await?;
            counts.collections += rows.len() as u64;
            let next = match rows.last() {
                Some(last) if rows.len() as i64 == PAGE => Cursor::Collections(last.0),
                _ => Cursor::End,
            };
            let lines = rows
                .into_iter()
                .map(|(id, name, description, query, created_at_ms, items)| {
                    let item_ids = serde_json::from_str(&items).unwrap_or_default();
                    let row = CollectionLine {
                        id,
                        name,
                        description,
                        query,
                        created_at_ms,
                        item_ids,
                    };
                    line("collection", &row)
                })
                .collect();
            (lines, next)
        }
        Cursor::End => (
            line(
                "end",
                &json!({
                    "sessions": counts.sessions,
                    "observations": counts.observations,
                    "memory_items": counts.items,
                    "collections": counts.collections,
                }),
            ),
            Cursor::Done,
        ),
        Cursor::Done => (String::new(), Cursor::Done),
    })
}

/// Every line of an export, a page of rows at a time: the header, every session, observation
/// and memory item, then the `end` line. An error ends the lines early, without `end`, so a
/// reader knows the export is incomplete.
pub fn export_lines(
    pool: sqlx::SqlitePool,
) -> impl futures::Stream<Item = Result<String, sqlx::Error>> + Send + 'static {
    futures::stream::unfold(
        (Cursor::Header, Counts::default()),
        move |(cursor, mut counts)| {
            let pool = pool.clone();
            async move {
                if matches!(cursor, Cursor::Done) {
                    return None;
                }
                match next_page(&pool, cursor, &mut counts).await {
                    Ok((chunk, next)) => Some((Ok(chunk), (next, counts))),
                    Err(error) => Some((Err(error), (Cursor::Done, counts))),
                }
            }
        },
    )
}

async fn export(state: AppState) -> ApiResult<Response> {
    let pool = state.pool().await?;
    let body = export_lines(pool).scan((), |_, chunk| {
        futures::future::ready(match chunk {
            Ok(chunk) => Some(Ok::<_, std::io::Error>(chunk)),
            Err(error) => {
                // The status is sent already; ending without the `end` line tells the reader
                // the file is incomplete.
                tracing::error!(%error, "export failed midway");
                None
            }
        })
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"mneme-export.jsonl\"",
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// What an import did.
#[derive(Debug, Default)]
pub struct Imported {
    lines: u64,
    sessions: u64,
    observations: u64,
    items: u64,
    collections: u64,
    skipped: u64,
}

/// The rows of an import waiting to go to their owners.
#[derive(Default)]
struct Pending {
    records: proto::ImportRecordsRequest,
    items: proto::ImportItemsRequest,
    /// Each imported item's id in the export → its id here, for the collections after them.
    ids: std::collections::HashMap<i64, i64>,
}

impl Pending {
    async fn send_records(
        &mut self,
        nats: &async_nats::Client,
        done: &mut Imported,
    ) -> ApiResult<()> {
        if self.records.sessions.is_empty() && self.records.observations.is_empty() {
            return Ok(());
        }
        let request = std::mem::take(&mut self.records);
        let reply: proto::ImportRecordsReply =
            crate::ask(nats, "ingest", subjects::SESSIONS_IMPORT, &request).await?;
        if !reply.error.is_empty() {
            return Err(ApiError::unavailable(format!(
                "ingest could not import: {}",
                reply.error
            )));
        }
        done.sessions += u64::from(reply.sessions);
        done.observations += u64::from(reply.observations);
        done.skipped += u64::from(reply.skipped);
        Ok(())
    }

    async fn send_items(
        &mut self,
        nats: &async_nats::Client,
        done: &mut Imported,
    ) -> ApiResult<()> {
        if self.items.items.is_empty() {
            return Ok(());
        }
        let request = std::mem::take(&mut self.items);
        let reply: proto::ImportItemsReply =
            crate::ask(nats, "retrieval", subjects::RETRIEVAL_IMPORT, &request).await?;
        if !reply.error.is_empty() {
            return Err(ApiError::unavailable(format!(
                "retrieval could not import: {}",
                reply.error
            )));
        }
        done.items += u64::from(reply.imported);
        done.skipped += u64::from(reply.skipped);
        self.ids
            .extend(reply.ids.iter().map(|pair| (pair.exported, pair.local)));
        Ok(())
    }

    /// Make a collection of the items it held, named by their ids here. A collection whose
    /// name is taken is left as it is (an import repeated), as is one none of whose items came
    /// in.
    async fn send_collection(
        &mut self,
        nats: &async_nats::Client,
        collection: CollectionLine,
        done: &mut Imported,
    ) -> ApiResult<()> {
        self.send_records(nats, done).await?;
        self.send_items(nats, done).await?;
        required("collection name", &collection.name)?;
        let item_ids: Vec<i64> = collection
            .item_ids
            .iter()
            .filter_map(|id| self.ids.get(id).copied())
            .collect();
        if item_ids.is_empty() {
            done.skipped += 1;
            return Ok(());
        }
        let request = proto::CreateCollectionRequest {
            name: collection.name,
            description: collection.description,
            search: None,
            item_ids,
            query: collection.query,
            created_at_ms: collection.created_at_ms,
        };
        let reply: proto::CollectionReply =
            crate::ask(nats, "retrieval", subjects::COLLECTIONS_CREATE, &request).await?;
        match reply.error_code.as_str() {
            "" if reply.error.is_empty() => done.collections += 1,
            "conflict" => done.skipped += 1,
            "invalid" => return Err(bad_line(reply.error)),
            _ => {
                return Err(ApiError::unavailable(format!(
                    "retrieval could not import a collection: {}",
                    reply.error
                )));
            }
        }
        Ok(())
    }

    /// Take one line; sends a batch when it is full. Memory items name observations, so the
    /// sessions and observations before them are sent first.
    async fn take(
        &mut self,
        nats: &async_nats::Client,
        sanitizer: &sanitize::Sanitizer,
        line: Line,
        done: &mut Imported,
    ) -> ApiResult<()> {
        match line {
            Line::Mneme { format } if format > FORMAT => {
                return Err(ApiError::unprocessable(
                    "unsupported_export",
                    format!("this export is format {format}; this api reads up to {FORMAT}"),
                ));
            }
            Line::Mneme { .. } | Line::End {} => {}
            Line::Session(s) => self.records.sessions.push(session_record(s)?),
            Line::Observation(o) => self
                .records
                .observations
                .push(observation_record(o, sanitizer)?),
            Line::Collection(c) => self.send_collection(nats, c, done).await?,
            Line::MemoryItem(i) => {
                self.send_records(nats, done).await?;
                self.items.items.push(item_record(i, sanitizer)?);
            }
        }
        let records = self.records.sessions.len() + self.records.observations.len();
        if records >= BATCH_ROWS || self.records.encoded_len() >= BATCH_BYTES {
            self.send_records(nats, done).await?;
        }
        if self.items.items.len() >= BATCH_ROWS || self.items.encoded_len() >= BATCH_BYTES {
            self.send_items(nats, done).await?;
        }
        Ok(())
    }
}

fn bad_line(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid_import", message)
}

fn required(field: &str, value: &str) -> ApiResult<()> {
    if value.is_empty() || value.chars().count() > 4096 {
        return Err(bad_line(format!("{field} is empty or too long")));
    }
    Ok(())
}

/// Scrub a text of secrets, as everything entering the store is.
fn clean(sanitizer: &sanitize::Sanitizer, text: String) -> String {
    sanitizer.clean_text(&text).0
}

fn session_record(s: SessionLine) -> ApiResult<proto::SessionRecord> {
    required("session id", &s.id)?;
    Ok(proto::SessionRecord {
        id: s.id,
        agent: s.agent,
        agent_version: s.agent_version,
        project: s.project,
        cwd: s.cwd,
        host: s.host,
        user: s.user,
        model: s.model,
        transcript_path: s.transcript_path,
        started_at_ms: s.started_at_ms,
        ended_at_ms: s.ended_at_ms,
        end_reason: s.end_reason,
        last_event_at_ms: s.last_event_at_ms,
        event_count: s.event_count,
        prompt_count: s.prompt_count,
        tool_count: s.tool_count,
        error_count: s.error_count,
        archived_at_ms: s.archived_at_ms,
    })
}

fn observation_record(
    o: ObservationLine,
    sanitizer: &sanitize::Sanitizer,
) -> ApiResult<proto::ObservationRecord> {
    required("observation event_id", &o.event_id)?;
    required("observation session_id", &o.session_id)?;
    required("observation kind", &o.kind)?;
    Ok(proto::ObservationRecord {
        id: o.id,
        event_id: o.event_id,
        session_id: o.session_id,
        project: o.project,
        agent: o.agent,
        author: o.author,
        kind: o.kind,
        host_event: o.host_event,
        tool_name: o.tool_name,
        tool_use_id: o.tool_use_id,
        subagent_id: o.subagent_id,
        title: clean(sanitizer, o.title),
        body: clean(sanitizer, o.body),
        input: o.input.map(|t| clean(sanitizer, t)),
        output: o.output.map(|t| clean(sanitizer, t)),
        meta: if o.meta.is_empty() {
            "{}".to_owned()
        } else {
            o.meta
        },
        content_hash: o.content_hash,
        occurred_at_ms: o.occurred_at_ms,
        stored_at_ms: o.stored_at_ms,
    })
}

fn item_record(i: ItemLine, sanitizer: &sanitize::Sanitizer) -> ApiResult<proto::MemoryItemRecord> {
    required("memory item source", &i.source)?;
    required("memory item kind", &i.kind)?;
    required("memory item session_id", &i.session_id)?;
    required("memory item text_hash", &i.text_hash)?;
    Ok(proto::MemoryItemRecord {
        id: i.id,
        source: i.source,
        source_id: i.source_id,
        source_event_id: i.source_event_id,
        kind: i.kind,
        session_id: i.session_id,
        project: i.project,
        agent: i.agent,
        author: i.author,
        tool_name: i.tool_name,
        title: clean(sanitizer, i.title),
        text: clean(sanitizer, i.text),
        context: clean(sanitizer, i.context),
        seq: i.seq,
        files: i.files,
        concepts: i.concepts,
        text_hash: i.text_hash,
        occurred_at_ms: i.occurred_at_ms,
        indexed_at_ms: i.indexed_at_ms,
    })
}

/// An import in progress: bytes in, rows handed to their owners in batches as lines complete.
pub struct Importer<'a> {
    nats: &'a async_nats::Client,
    sanitizer: &'a sanitize::Sanitizer,
    pending: Pending,
    done: Imported,
    buffer: Vec<u8>,
    received: usize,
}

impl<'a> Importer<'a> {
    pub fn new(nats: &'a async_nats::Client, sanitizer: &'a sanitize::Sanitizer) -> Importer<'a> {
        Importer {
            nats,
            sanitizer,
            pending: Pending::default(),
            done: Imported::default(),
            buffer: Vec::new(),
            received: 0,
        }
    }

    /// Take the next bytes of the export; every line they complete is imported.
    pub async fn feed(&mut self, chunk: &[u8]) -> ApiResult<()> {
        self.received += chunk.len();
        if self.received > MAX_IMPORT_BYTES {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("an import is at most {MAX_IMPORT_BYTES} bytes"),
            ));
        }
        self.buffer.extend_from_slice(chunk);
        self.lines().await
    }

    /// Import the last line and what is still batched; the counts of what was imported.
    pub async fn finish(mut self) -> ApiResult<Value> {
        self.buffer.push(b'\n');
        self.lines().await?;
        self.pending.send_records(self.nats, &mut self.done).await?;
        self.pending.send_items(self.nats, &mut self.done).await?;
        let done = &self.done;
        if done.lines == 0 {
            return Err(bad_line(
                "the body holds no lines: send an export from /v1/export",
            ));
        }
        Ok(json!({
            "lines": done.lines,
            "sessions": done.sessions,
            "observations": done.observations,
            "memory_items": done.items,
            "collections": done.collections,
            "skipped": done.skipped,
        }))
    }

    async fn lines(&mut self) -> ApiResult<()> {
        while let Some(at) = self.buffer.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = self.buffer.drain(..=at).collect();
            self.line(&raw[..raw.len() - 1]).await?;
        }
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "line {} is longer than {MAX_LINE_BYTES} bytes",
                    self.done.lines + 1
                ),
            ));
        }
        Ok(())
    }

    async fn line(&mut self, raw: &[u8]) -> ApiResult<()> {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let done = &mut self.done;
        done.lines += 1;
        if text.len() > MAX_LINE_BYTES {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("line {} is longer than {MAX_LINE_BYTES} bytes", done.lines),
            ));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| {
            bad_line(format!(
                "line {}: {e}; the lines before it were imported, and importing again is safe",
                done.lines
            ))
        })?;
        let at = done.lines;
        self.pending
            .take(self.nats, self.sanitizer, line, done)
            .await
            .map_err(|mut e| {
                if e.code == "invalid_import" {
                    e.message = format!("line {at}: {}", e.message);
                }
                e
            })
    }
}

async fn import(state: AppState, body: Body) -> ApiResult<Json<Value>> {
    let mut importer = Importer::new(&state.nats, &state.sanitizer);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            ApiError::invalid(
                "invalid_body",
                format!("the body could not be read: {error}"),
            )
        })?;
        importer.feed(&chunk).await?;
    }
    Ok(Json(importer.finish().await?))
}

fn retention_json(reply: &proto::RetentionReply) -> Value {
    let settings = reply.settings.clone().unwrap_or_default();
    json!({
        "archive_after_days": settings.archive_after_days,
        "delete_archived_after_days": settings.delete_archived_after_days,
        "updated_at_ms": settings.updated_at_ms,
        "last_run": {
            "at_ms": settings.last_run_at_ms,
            "archived": settings.last_archived,
            "deleted": settings.last_deleted,
            "error": settings.last_error,
        },
    })
}

async fn ask_retention(
    state: &State,
    subject: &str,
    request: &impl proto::Message,
) -> ApiResult<proto::RetentionReply> {
    let reply: proto::RetentionReply = state.ask("ingest", subject, request).await?;
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "ingest could not answer: {}",
            reply.error
        )));
    }
    Ok(reply)
}

async fn retention(state: AppState) -> ApiResult<Json<Value>> {
    let reply = ask_retention(
        &state,
        subjects::RETENTION_GET,
        &proto::RetentionGetRequest {},
    )
    .await?;
    Ok(Json(retention_json(&reply)))
}

/// A new policy; a field left out keeps its current value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionIn {
    archive_after_days: Option<u32>,
    delete_archived_after_days: Option<u32>,
}

/// The answer of a run: the policy and what this run changed.
fn run_json(reply: &proto::RetentionReply) -> Value {
    let mut body = retention_json(reply);
    body["applied"] = json!({"archived": reply.archived, "deleted": reply.deleted});
    body
}

async fn set_retention(state: AppState, Json(input): Json<RetentionIn>) -> ApiResult<Json<Value>> {
    for (name, value) in [
        ("archive_after_days", input.archive_after_days),
        (
            "delete_archived_after_days",
            input.delete_archived_after_days,
        ),
    ] {
        if value.is_some_and(|v| v > 36_500) {
            return Err(ApiError::unprocessable(
                "invalid_retention",
                format!("{name} must be between 0 (never) and 36500"),
            ));
        }
    }
    let current = ask_retention(
        &state,
        subjects::RETENTION_GET,
        &proto::RetentionGetRequest {},
    )
    .await?
    .settings
    .unwrap_or_default();
    let request = proto::RetentionSetRequest {
        archive_after_days: input
            .archive_after_days
            .unwrap_or(current.archive_after_days),
        delete_archived_after_days: input
            .delete_archived_after_days
            .unwrap_or(current.delete_archived_after_days),
    };
    let reply = ask_retention(&state, subjects::RETENTION_SET, &request).await?;
    Ok(Json(run_json(&reply)))
}

async fn apply_retention(state: AppState) -> ApiResult<Json<Value>> {
    let reply = ask_retention(
        &state,
        subjects::RETENTION_APPLY,
        &proto::RetentionApplyRequest {},
    )
    .await?;
    Ok(Json(run_json(&reply)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_type_reads_back() {
        let session = line(
            "session",
            &SessionLine {
                id: "s".into(),
                ended_at_ms: Some(3),
                ..Default::default()
            },
        );
        assert!(matches!(
            serde_json::from_str::<Line>(&session).unwrap(),
            Line::Session(SessionLine {
                ended_at_ms: Some(3),
                ..
            })
        ));
        let item = line("memory_item", &ItemLine::default());
        assert!(matches!(
            serde_json::from_str::<Line>(&item).unwrap(),
            Line::MemoryItem(_)
        ));
        assert!(matches!(
            serde_json::from_str::<Line>(r#"{"type":"mneme","format":1,"exported_at_ms":5}"#)
                .unwrap(),
            Line::Mneme { format: 1 }
        ));
        assert!(serde_json::from_str::<Line>(r#"{"type":"secret"}"#).is_err());
    }
}
