//! The importer: an export's rows handed to their owners over NATS, in batches.
//!
//! Sessions and observations go to ingest (`mneme.sessions.import`), memory items to retrieval
//! (`mneme.retrieval.import`, which answers with each item's id in this store), collections to
//! retrieval (`mneme.retrieval.collections.create`, with those ids). Each owner leaves alone
//! what it already holds (a collection by its name), so importing a file twice doubles nothing;
//! a file with a bad line is imported up to that line, and importing it again once fixed is
//! safe. Every text is scrubbed of secrets on the way in, as everything entering the store is.

use crate::format::{CollectionLine, FORMAT, ItemLine, Line, ObservationLine, SessionLine};
use proto::{Message as _, subjects};
use serde::Serialize;
use std::time::Duration;

/// Rows sent to an owner per import request.
const BATCH_ROWS: usize = 200;
/// Bytes sent to an owner per import request, well under NATS's default 1 MiB message.
const BATCH_BYTES: usize = 512 * 1024;
/// The longest line an import takes.
const MAX_LINE_BYTES: usize = 900 * 1024;
/// The largest import.
const MAX_IMPORT_BYTES: usize = 1 << 30;
/// How long an owner has to answer one batch.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an import stopped. The lines before the one that stopped it were imported, and
/// importing the whole file again is safe.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A line is not a row of the format, or a row lacks what its owner needs.
    #[error("{0}")]
    Invalid(String),
    /// The export is of a newer format than this build reads.
    #[error("{0}")]
    Unsupported(String),
    /// The import, or one of its lines, is larger than an import takes.
    #[error("{0}")]
    TooLarge(String),
    /// An owner did not answer, or answered that it could not import.
    #[error("{0}")]
    Unavailable(String),
    /// An owner answered with a reply that could not be read.
    #[error("reading {service}'s reply: {source}")]
    Unreadable {
        service: &'static str,
        source: common::nats::AskError,
    },
}

impl ImportError {
    /// A stable code for the error, as the api's error answers carry.
    pub fn code(&self) -> &'static str {
        match self {
            ImportError::Invalid(_) => "invalid_import",
            ImportError::Unsupported(_) => "unsupported_export",
            ImportError::TooLarge(_) => "payload_too_large",
            ImportError::Unavailable(_) => "service_unavailable",
            ImportError::Unreadable { .. } => "internal",
        }
    }
}

type Result<T> = std::result::Result<T, ImportError>;

/// What an import did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Imported {
    /// Non-empty lines read.
    pub lines: u64,
    pub sessions: u64,
    pub observations: u64,
    #[serde(rename = "memory_items")]
    pub items: u64,
    pub collections: u64,
    /// Rows the owners held already, and collections none of whose items came in.
    pub skipped: u64,
}

/// Ask one owner over NATS; its answer joins the caller's trace.
async fn ask<R: proto::Message + Default>(
    nats: &async_nats::Client,
    service: &'static str,
    subject: &str,
    request: &impl proto::Message,
) -> Result<R> {
    common::nats::ask_service(nats, "archive", service, subject, request, ASK_TIMEOUT)
        .await
        .map_err(|error| match error {
            common::nats::AskError::Request(error) => {
                ImportError::Unavailable(common::nats::unanswered(service, &error))
            }
            source @ common::nats::AskError::Unreadable(_) => {
                ImportError::Unreadable { service, source }
            }
        })
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
    async fn send_records(&mut self, nats: &async_nats::Client, done: &mut Imported) -> Result<()> {
        if self.records.sessions.is_empty() && self.records.observations.is_empty() {
            return Ok(());
        }
        let request = std::mem::take(&mut self.records);
        let reply: proto::ImportRecordsReply =
            ask(nats, "ingest", subjects::SESSIONS_IMPORT, &request).await?;
        if !reply.error.is_empty() {
            return Err(ImportError::Unavailable(format!(
                "ingest could not import: {}",
                reply.error
            )));
        }
        done.sessions += u64::from(reply.sessions);
        done.observations += u64::from(reply.observations);
        done.skipped += u64::from(reply.skipped);
        Ok(())
    }

    async fn send_items(&mut self, nats: &async_nats::Client, done: &mut Imported) -> Result<()> {
        if self.items.items.is_empty() {
            return Ok(());
        }
        let request = std::mem::take(&mut self.items);
        let reply: proto::ImportItemsReply =
            ask(nats, "retrieval", subjects::RETRIEVAL_IMPORT, &request).await?;
        if !reply.error.is_empty() {
            return Err(ImportError::Unavailable(format!(
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
    ) -> Result<()> {
        self.send_records(nats, done).await?;
        self.send_items(nats, done).await?;
        required("collection name", &collection.name)?;
        let item_ids: Vec<i64> = collection
            .item_ids
            .0
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
            ask(nats, "retrieval", subjects::COLLECTIONS_CREATE, &request).await?;
        match reply.error_code.as_str() {
            "" if reply.error.is_empty() => done.collections += 1,
            "conflict" => done.skipped += 1,
            "invalid" => return Err(ImportError::Invalid(reply.error)),
            _ => {
                return Err(ImportError::Unavailable(format!(
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
    ) -> Result<()> {
        match line {
            Line::Mneme { format } if format > FORMAT => {
                return Err(ImportError::Unsupported(format!(
                    "this export is format {format}; this api reads up to {FORMAT}"
                )));
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

fn required(field: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.chars().count() > 4096 {
        return Err(ImportError::Invalid(format!(
            "{field} is empty or too long"
        )));
    }
    Ok(())
}

/// Scrub a text of secrets, as everything entering the store is.
fn clean(sanitizer: &sanitize::Sanitizer, text: String) -> String {
    sanitizer.clean_text(&text).0
}

fn session_record(s: SessionLine) -> Result<proto::SessionRecord> {
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
) -> Result<proto::ObservationRecord> {
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

fn item_record(i: ItemLine, sanitizer: &sanitize::Sanitizer) -> Result<proto::MemoryItemRecord> {
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
    pub async fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        self.received += chunk.len();
        if self.received > MAX_IMPORT_BYTES {
            return Err(ImportError::TooLarge(format!(
                "an import is at most {MAX_IMPORT_BYTES} bytes"
            )));
        }
        self.buffer.extend_from_slice(chunk);
        self.lines().await
    }

    /// Import the last line and what is still batched; the counts of what was imported.
    pub async fn finish(mut self) -> Result<Imported> {
        self.buffer.push(b'\n');
        self.lines().await?;
        self.pending.send_records(self.nats, &mut self.done).await?;
        self.pending.send_items(self.nats, &mut self.done).await?;
        if self.done.lines == 0 {
            return Err(ImportError::Invalid(
                "the body holds no lines: send an export from /v1/export".to_owned(),
            ));
        }
        Ok(self.done)
    }

    async fn lines(&mut self) -> Result<()> {
        while let Some(at) = self.buffer.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = self.buffer.drain(..=at).collect();
            self.line(&raw[..raw.len() - 1]).await?;
        }
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(ImportError::TooLarge(format!(
                "line {} is longer than {MAX_LINE_BYTES} bytes",
                self.done.lines + 1
            )));
        }
        Ok(())
    }

    async fn line(&mut self, raw: &[u8]) -> Result<()> {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let done = &mut self.done;
        done.lines += 1;
        if text.len() > MAX_LINE_BYTES {
            return Err(ImportError::TooLarge(format!(
                "line {} is longer than {MAX_LINE_BYTES} bytes",
                done.lines
            )));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| {
            ImportError::Invalid(format!(
                "line {}: {e}; the lines before it were imported, and importing again is safe",
                done.lines
            ))
        })?;
        let at = done.lines;
        self.pending
            .take(self.nats, self.sanitizer, line, done)
            .await
            .map_err(|error| match error {
                ImportError::Invalid(message) => {
                    ImportError::Invalid(format!("line {at}: {message}"))
                }
                other => other,
            })
    }
}
