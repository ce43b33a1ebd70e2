//! The pull loop: fetch what is ready (up to a batch), decode, store everything in one
//! transaction, emit notifications, then ack.

use crate::db::{self, Stored};
use crate::record::{Observation, build_observation};
use crate::team::Sharing;
use crate::{IngestArgs, SERVICE};
use anyhow::Context as _;
use async_nats::jetstream::{self, AckKind};
use common::health::Counters;
use common::service::Service;
use futures::StreamExt as _;
use proto::event::Payload;
use proto::{DeadLetter, Event, Message as _, ObservationStored, subjects};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// How long JetStream waits for an ack before redelivering a message to ingest.
const ACK_WAIT: Duration = Duration::from_secs(10);

/// How much of a bad payload a dead letter keeps.
const EXCERPT_BYTES: usize = 512;

pub struct Worker {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    store: store::Store,
    sanitizer: Arc<sanitize::Sanitizer>,
    args: IngestArgs,
    counters: Arc<Counters>,
    sharing: Arc<Sharing>,
    origin: Origin,
}

/// Where the messages a worker reads come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This machine's hooks, api and imports (`MNEME_EVENTS`).
    Local,
    /// The other members of this machine's team (`MNEME_TEAM_IN`).
    Team,
}

/// A message after decoding, before storing.
enum Item {
    Event {
        event: Box<Event>,
        observation: Box<Observation>,
        span: tracing::Span,
        /// The team member the event came from; empty for this machine's own.
        member: String,
    },
    /// Sessions a team member deleted on their machine.
    TeamDeleted(Vec<String>),
    /// A dead letter, with the session of its event when the event could be read that far.
    Dead(DeadLetter, String),
    Skip,
}

/// What to publish once the transaction committed.
enum Emit {
    Stored(ObservationStored, tracing::Span),
    Dead(DeadLetter),
    /// An event of this machine's own, for the team.
    Share(common::streams::Announcement),
    /// Sessions to delete, as a team member did.
    Delete(Vec<String>),
}

/// The batches of events the worker reads.
pub type Batches = std::pin::Pin<Box<dyn futures::Stream<Item = Vec<jetstream::Message>> + Send>>;

impl Worker {
    pub fn new(
        service: &Service,
        sanitizer: Arc<sanitize::Sanitizer>,
        args: IngestArgs,
        sharing: Arc<Sharing>,
        origin: Origin,
    ) -> Worker {
        Worker {
            client: service.client.clone(),
            jetstream: service.jetstream.clone(),
            store: service.store.clone(),
            sanitizer,
            args,
            counters: service.counters.clone(),
            sharing,
            origin,
        }
    }

    /// Open (or create) the durable consumer of hook events, or of what the team shares.
    pub async fn consume(&self) -> anyhow::Result<Batches> {
        let durable = match self.origin {
            Origin::Local => common::streams::Durable {
                stream: subjects::EVENTS_STREAM,
                name: subjects::INGEST_CONSUMER,
                description: "ingest: sanitise and store hook events",
                filter_subjects: &[],
                ack_wait: ACK_WAIT,
                batch: self.args.batch,
            },
            Origin::Team => common::streams::Durable {
                stream: subjects::TEAM_IN_STREAM,
                name: subjects::INGEST_TEAM_CONSUMER,
                description: "ingest: store what the team shares",
                filter_subjects: &[],
                ack_wait: ACK_WAIT,
                batch: self.args.batch,
            },
        };
        let batches = common::streams::pull_batches(&self.jetstream, durable).await?;
        Ok(Box::pin(batches))
    }

    /// Store what the consumer delivers until `shutdown` is cancelled.
    pub async fn run(self, mut batches: Batches, shutdown: CancellationToken) {
        let consumer = match self.origin {
            Origin::Local => subjects::INGEST_CONSUMER,
            Origin::Team => subjects::INGEST_TEAM_CONSUMER,
        };
        tracing::info!(consumer, "ingest running");
        loop {
            // A batch in progress is never interrupted: cancellation is only seen between
            // batches, so in-flight messages are finished and acked before shutdown.
            let messages = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                batch = batches.next() => match batch {
                    Some(batch) => batch,
                    None => break,
                },
            };
            if !messages.is_empty() {
                self.handle(messages).await;
            }
        }
        tracing::info!(consumer, "ingest stopped");
    }

    async fn handle(&self, messages: Vec<jetstream::Message>) {
        let items: Vec<Item> = messages.iter().map(|m| self.decode(m)).collect();
        match self.commit(&messages, &items).await {
            Ok(emits) => self.finish(&messages, emits).await,
            Err(error) => {
                // One bad message must not hold the others back: retry them one by one.
                tracing::warn!(error = %format!("{error:#}"), size = messages.len(), "batch failed; retrying one by one");
                for (message, item) in messages.iter().zip(items) {
                    self.handle_one(message, item).await;
                }
            }
        }
    }

    async fn handle_one(&self, message: &jetstream::Message, item: Item) {
        let one = std::slice::from_ref(message);
        match self.commit(one, std::slice::from_ref(&item)).await {
            Ok(emits) => self.finish(one, emits).await,
            Err(error) => {
                let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
                if delivered >= self.args.max_deliver {
                    let letter = self.dead_letter(
                        message,
                        format!("storing failed {delivered} times: {error:#}"),
                        event_id_of(&item),
                        message.payload.len(),
                    );
                    let session = session_of(&item);
                    match self.commit(one, &[Item::Dead(letter, session)]).await {
                        Ok(emits) => return self.finish(one, emits).await,
                        Err(error) => {
                            tracing::error!(error = %format!("{error:#}"), "cannot record dead letter")
                        }
                    }
                }
                tracing::warn!(error = %format!("{error:#}"), delivered, "message failed; will be redelivered");
                let _ = message
                    .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
    }

    fn decode(&self, message: &jetstream::Message) -> Item {
        let size = message.payload.len();
        let mut member = String::new();
        if self.origin == Origin::Team {
            let Some(from) = crate::team::from_team(&message.subject) else {
                return Item::Dead(
                    self.dead_letter(
                        message,
                        "not a team subject".to_owned(),
                        String::new(),
                        size,
                    ),
                    String::new(),
                );
            };
            if from.what == "deleted" {
                return match proto::SessionsDeleted::decode(message.payload.as_ref()) {
                    Ok(deleted) => Item::TeamDeleted(deleted.session_ids),
                    Err(error) => Item::Dead(
                        self.dead_letter(
                            message,
                            format!("payload is not a deletion notice: {error}"),
                            String::new(),
                            size,
                        ),
                        String::new(),
                    ),
                };
            }
            member = from.member.to_owned();
        }
        let event = match Event::decode(message.payload.as_ref()) {
            Ok(event) => event,
            Err(error) => {
                return Item::Dead(
                    self.dead_letter(
                        message,
                        format!("payload is not a mneme event: {error}"),
                        String::new(),
                        size,
                    ),
                    String::new(),
                );
            }
        };
        let (event_id, session_id) = (event.id.clone(), event.session_id.clone());
        let reject = |reason: String| {
            Item::Dead(
                self.dead_letter(message, reason, event_id.clone(), size),
                session_id.clone(),
            )
        };
        if event.schema_version == 0 || event.schema_version > proto::SCHEMA_VERSION {
            return reject(format!(
                "unsupported schema version {} (this ingest understands 1 to {})",
                event.schema_version,
                proto::SCHEMA_VERSION
            ));
        }
        if !proto::is_valid_event_id(&event.id) {
            return reject("event id is not 32 lowercase hex characters".to_owned());
        }
        match &event.payload {
            None => return reject("event has no payload".to_owned()),
            Some(Payload::Invalid(invalid)) => {
                let mut letter = self.dead_letter(
                    message,
                    format!("hook could not read the host payload: {}", invalid.reason),
                    event.id.clone(),
                    invalid.size_bytes as usize,
                );
                letter.excerpt = self.sanitizer.clean_text(&invalid.excerpt).0;
                return Item::Dead(letter, event.session_id.clone());
            }
            Some(_) => {}
        }
        if event.session_id.is_empty() {
            return reject("event has no session id".to_owned());
        }
        let mut event = event;
        if self.origin == Origin::Team {
            let Some(team) = self.sharing.current() else {
                // Left the team with messages still on their way: they are not kept.
                return Item::Skip;
            };
            let from = crate::team::from_team(&message.subject).expect("read above");
            if let Err(reason) = crate::team::localise(&team, &mut event, &from) {
                if team.local_path(from.project).is_none() {
                    tracing::debug!(%reason, "team event skipped");
                    return Item::Skip;
                }
                return reject(reason);
            }
        }
        if self
            .args
            .exclude_dirs
            .iter()
            .any(|dir| !event.cwd.is_empty() && std::path::Path::new(&event.cwd).starts_with(dir))
        {
            return Item::Skip;
        }
        let span = tracing::info_span!(
            "ingest.event",
            event_id = %event.id,
            session_id = %event.session_id,
            subject = %message.subject,
            kind = event.kind(),
        );
        common::nats::continue_trace(&span, message.headers.as_ref());
        // A bug in sanitising one event must not take the service down with it.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            span.in_scope(|| build_observation(&event, &self.sanitizer))
        }));
        let Ok(observation) = built else {
            return reject(
                "internal error while sanitising the event; please report it".to_owned(),
            );
        };
        Item::Event {
            event: Box::new(event),
            observation: Box::new(observation),
            span,
            member,
        }
    }

    fn dead_letter(
        &self,
        message: &jetstream::Message,
        reason: String,
        event_id: String,
        size: usize,
    ) -> DeadLetter {
        DeadLetter {
            subject: message.subject.to_string(),
            reason,
            event_id,
            // Scrubbed before it is cut, so a secret straddling the cut is redacted whole.
            excerpt: self
                .sanitizer
                .clean_excerpt(&message.payload, EXCERPT_BYTES),
            size_bytes: size as u64,
            at_ms: common::time::now_ms(),
        }
    }

    /// Store every item in one transaction; returns what to publish after the commit.
    async fn commit(
        &self,
        messages: &[jetstream::Message],
        items: &[Item],
    ) -> anyhow::Result<Vec<Emit>> {
        let mut tx = store::begin_write(self.store.pool())
            .await
            .context("beginning a transaction")?;
        let mut emits = Vec::with_capacity(items.len());
        let now = common::time::now_ms();
        for (message, item) in messages.iter().zip(items) {
            // Where the raw event sits in the stream, so deleting its session erases it there.
            let seq = message
                .info()
                .map(|i| i.stream_sequence)
                .unwrap_or_default();
            let session = session_of(item);
            if self.origin == Origin::Local && seq > 0 && !session.is_empty() {
                db::record_event_message(&mut tx, seq, &session, &event_id_of(item)).await?;
            }
            match item {
                Item::Event {
                    event,
                    observation,
                    span,
                    member,
                } => {
                    let stored = db::store_event(
                        &mut tx,
                        event,
                        observation,
                        member,
                        self.args.dedup_window_ms,
                        now,
                    )
                    .instrument(span.clone())
                    .await
                    .with_context(|| format!("storing event {}", event.id))?;
                    let id = match stored {
                        Stored::New(id) | Stored::Again(id) => id,
                        Stored::Duplicate => {
                            span.in_scope(|| {
                                tracing::debug!(
                                    "duplicate content within the dedup window; skipped"
                                )
                            });
                            continue;
                        }
                    };
                    emits.push(Emit::Stored(
                        ObservationStored {
                            observation_id: id,
                            event_id: event.id.clone(),
                            session_id: event.session_id.clone(),
                            project: event.project.clone(),
                            kind: observation.kind.to_owned(),
                            tool_name: observation.tool_name.clone(),
                            occurred_at_ms: event.occurred_at_ms,
                        },
                        span.clone(),
                    ));
                    if self.origin == Origin::Local
                        && let Some(team) = self.sharing.current()
                        && let Some(share) = crate::team::share(
                            &self.sharing,
                            &team,
                            event,
                            observation,
                            &self.sanitizer,
                            span,
                        )
                    {
                        emits.push(Emit::Share(share));
                    }
                }
                Item::TeamDeleted(ids) => emits.push(Emit::Delete(ids.clone())),
                Item::Dead(letter, _) => {
                    if db::store_dead_letter(&mut tx, SERVICE, seq, letter).await? {
                        tracing::warn!(reason = %letter.reason, subject = %letter.subject, "dead-lettered");
                    }
                    emits.push(Emit::Dead(letter.clone()));
                }
                Item::Skip => {}
            }
        }
        tx.commit().await.context("committing")?;
        Ok(emits)
    }

    /// Publish notifications (deduplicated by JetStream, so a redelivery is harmless), then ack.
    async fn finish(&self, messages: &[jetstream::Message], emits: Vec<Emit>) {
        let mut deletes = Vec::new();
        let announcements = emits
            .into_iter()
            .filter_map(|emit| match emit {
                Emit::Delete(ids) => {
                    deletes.push(ids);
                    None
                }
                emit => Some(emit),
            })
            .map(|emit| match emit {
                Emit::Stored(stored, span) => common::streams::Announcement {
                    subject: subjects::OBSERVATION_STORED.to_owned(),
                    id: format!("stored-{}", stored.event_id),
                    span: Some(span),
                    payload: stored.encode_to_vec().into(),
                },
                Emit::Dead(letter) => common::streams::Announcement {
                    subject: subjects::dlq_subject(SERVICE),
                    id: format!("dlq-{}-{}-{}", SERVICE, letter.event_id, letter.subject),
                    span: None,
                    payload: letter.encode_to_vec().into(),
                },
                Emit::Share(share) => share,
                Emit::Delete(_) => unreachable!("taken out above"),
            })
            .collect();
        if !common::streams::announce(&self.jetstream, announcements).await {
            tracing::warn!("the batch will be redelivered");
            return self.nak(messages).await;
        }
        // What the team deleted goes after everything stored before it in the same batch; a
        // failed delete gives the batch back, and deleting again repeats only the clean-up.
        for ids in deletes {
            let pool = self.store.pool();
            match crate::sessions::delete(&self.client, pool, &self.sharing, &ids).await {
                Ok(reply) if reply.error.is_empty() => {
                    tracing::info!(sessions = reply.sessions, "deleted as the team did");
                }
                Ok(reply) => {
                    tracing::warn!(error = %reply.error, "deleting as the team did failed; the batch will be redelivered");
                    return self.nak(messages).await;
                }
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "deleting as the team did failed; the batch will be redelivered");
                    return self.nak(messages).await;
                }
            }
        }
        for message in messages {
            if let Err(error) = message.ack().await {
                tracing::warn!(%error, "ack failed; the message will be redelivered and deduplicated");
            }
            self.counters.handled();
        }
    }

    async fn nak(&self, messages: &[jetstream::Message]) {
        for message in messages {
            let _ = message
                .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                .await;
        }
    }
}

fn event_id_of(item: &Item) -> String {
    match item {
        Item::Event { event, .. } => event.id.clone(),
        Item::Dead(letter, _) => letter.event_id.clone(),
        Item::Skip | Item::TeamDeleted(_) => String::new(),
    }
}

fn session_of(item: &Item) -> String {
    match item {
        Item::Event { event, .. } => event.session_id.clone(),
        Item::Dead(_, session) => session.clone(),
        Item::Skip | Item::TeamDeleted(_) => String::new(),
    }
}
