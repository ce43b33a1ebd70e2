//! The JetStream streams of the write path, created idempotently by every service at start, so
//! services can start in any order and a publish never meets a missing stream.

use anyhow::Context as _;
use async_nats::jetstream::{self, stream};
use proto::subjects;
use std::time::Duration;

/// How long hook events stay in JetStream after capture, for replay and for late consumers.
const EVENTS_MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The most bytes each stream keeps on disk. Beyond it JetStream drops the oldest messages (by
/// then consumed, unless a consumer has been down for long), so NATS's disk use has a bound
/// whatever the traffic: hook events are the bulk (a gigabyte is about a million of them), the
/// services' notices a fraction of them. JetStream reserves each limit when the stream is
/// created, against the server's store limit (by default three quarters of the free disk), and
/// services create the streams concurrently at start: the sum (1.9 GiB) stays modest so that a
/// machine with little free disk still starts.
const EVENTS_MAX_BYTES: i64 = 1 << 30;
const NOTICES_MAX_BYTES: i64 = 256 << 20;
const DLQ_MAX_BYTES: i64 = 128 << 20;

/// Window in which JetStream drops a second message with the same `Nats-Msg-Id`.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The configurations of every stream mneme uses.
pub fn configs() -> Vec<stream::Config> {
    let base = |name: &str, subject: &str, max_age: Duration, max_bytes: i64| stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        max_age,
        max_bytes,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    };
    vec![
        base(
            subjects::EVENTS_STREAM,
            subjects::EVENTS_ALL,
            EVENTS_MAX_AGE,
            EVENTS_MAX_BYTES,
        ),
        base(
            subjects::INGEST_STREAM,
            subjects::INGEST_ALL,
            EVENTS_MAX_AGE,
            NOTICES_MAX_BYTES,
        ),
        base(
            subjects::COMPRESSOR_STREAM,
            subjects::COMPRESSOR_WRITTEN_ALL,
            EVENTS_MAX_AGE,
            NOTICES_MAX_BYTES,
        ),
        base(
            subjects::PATTERN_STREAM,
            subjects::PATTERN_UPDATED,
            EVENTS_MAX_AGE,
            NOTICES_MAX_BYTES,
        ),
        base(
            subjects::DLQ_STREAM,
            subjects::DLQ_ALL,
            Duration::from_secs(90 * 24 * 3600),
            DLQ_MAX_BYTES,
        ),
    ]
}

/// How long a team's streams keep what was shared: what a member shared while another was away
/// reaches it when it is back within this time, and a member who joins later gets the last
/// this much of the team's memory.
const TEAM_MAX_AGE: Duration = Duration::from_secs(90 * 24 * 3600);
const TEAM_MAX_BYTES: i64 = 512 << 20;

/// The stream on a member's own server holding what it shares ([`subjects::TEAM_OUT_STREAM`]),
/// which the hub mirrors.
pub fn team_out_config() -> stream::Config {
    stream::Config {
        name: subjects::TEAM_OUT_STREAM.to_owned(),
        description: Some("mneme: what this machine shares with its team".to_owned()),
        subjects: vec![subjects::TEAM_ALL.to_owned()],
        storage: stream::StorageType::File,
        max_age: TEAM_MAX_AGE,
        max_bytes: TEAM_MAX_BYTES,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

/// The hub's stream of what `member` shares: a mirror of that member's
/// [`subjects::TEAM_OUT_STREAM`], pulled through the member's JetStream domain whenever its
/// leaf link is up, with `replicas` copies on a clustered hub.
pub fn team_member_config(member: &str, replicas: usize) -> stream::Config {
    stream::Config {
        name: subjects::team_member_stream(member),
        description: Some(format!("mneme: what team member {member} shares")),
        storage: stream::StorageType::File,
        num_replicas: replicas,
        max_age: TEAM_MAX_AGE,
        max_bytes: TEAM_MAX_BYTES,
        discard: stream::DiscardPolicy::Old,
        mirror: Some(stream::Source {
            name: subjects::TEAM_OUT_STREAM.to_owned(),
            external: Some(stream::External {
                api_prefix: format!("$JS.{member}.API"),
                delivery_prefix: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The stream on a member's own server of what the other members share, for the team projects
/// in `projects`: one source a member stream on the hub (`members`), each filtered to those
/// projects. A source added later starts at the beginning of what the hub keeps, so a new
/// member, or a project shared later, catches up by itself.
pub fn team_in_config(members: &[String], projects: &[String]) -> stream::Config {
    let sources = if projects.is_empty() {
        Vec::new()
    } else {
        members
            .iter()
            .map(|member| stream::Source {
                name: subjects::team_member_stream(member),
                external: Some(stream::External {
                    api_prefix: format!("$JS.{}.API", subjects::TEAM_HUB_DOMAIN),
                    delivery_prefix: None,
                }),
                subject_transforms: projects
                    .iter()
                    .map(|project| stream::SubjectTransform {
                        source: subjects::team_project_subjects(project),
                        destination: subjects::team_project_subjects(project),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect()
    };
    stream::Config {
        name: subjects::TEAM_IN_STREAM.to_owned(),
        description: Some("mneme: what the team shares with this machine".to_owned()),
        storage: stream::StorageType::File,
        max_age: TEAM_MAX_AGE,
        max_bytes: TEAM_MAX_BYTES,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: DUPLICATE_WINDOW,
        sources: Some(sources),
        ..Default::default()
    }
}

/// Create every stream that does not exist yet; existing streams are left as they are (a
/// stream made before it had a byte limit keeps none until its owner updates it: `nats stream
/// edit`, which only the admin identity may do).
pub async fn ensure(js: &jetstream::Context) -> anyhow::Result<()> {
    for config in configs() {
        let name = config.name.clone();
        js.get_or_create_stream(config)
            .await
            .with_context(|| format!("creating stream {name}"))?;
    }
    Ok(())
}

/// A durable pull consumer on one of the [`configs`] streams.
#[derive(Debug, Clone)]
pub struct Durable<'a> {
    pub stream: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    /// Subjects of the stream this consumer reads; empty for all of them.
    pub filter_subjects: &'a [&'a str],
    /// How long JetStream waits for an ack before redelivering a message.
    pub ack_wait: Duration,
    /// The most messages handed over at once.
    pub batch: usize,
}

/// Open (or create) a durable pull consumer and hand its messages over in batches of what has
/// arrived, up to `batch`. A message that fails to arrive is logged and left out: JetStream
/// redelivers it.
pub async fn pull_batches(
    js: &jetstream::Context,
    durable: Durable<'_>,
) -> anyhow::Result<impl futures::Stream<Item = Vec<jetstream::Message>> + Unpin + Send + use<>> {
    use futures::StreamExt as _;
    // Created or updated in place (not `get_or_create`), so a consumer made by an older version
    // picks up subjects added to it since, keeping its position in the stream.
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(durable.stream)
        .await
        .with_context(|| format!("opening stream {}", durable.stream))?
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(durable.name.to_owned()),
            description: Some(durable.description.to_owned()),
            filter_subjects: durable
                .filter_subjects
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: durable.ack_wait,
            max_ack_pending: 20_000,
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating consumer {} on {}", durable.name, durable.stream))?;
    let batch = durable.batch.max(1);
    let messages = consumer
        .stream()
        .max_messages_per_batch(batch)
        .heartbeat(Duration::from_secs(5))
        .messages()
        .await
        .with_context(|| format!("pulling from consumer {}", durable.name))?;
    Ok(messages.ready_chunks(batch).map(|chunk| {
        chunk
            .into_iter()
            .filter_map(|m| {
                m.map_err(|e| tracing::warn!(error = %e, "pull failed"))
                    .ok()
            })
            .collect()
    }))
}

/// Publish a message `service` cannot use to `mneme.dlq.<service>` with the reason, then ack
/// it. The letter's `Nats-Msg-Id` is the message's stream sequence, so a redelivered poison
/// message is one dead letter.
pub async fn dead_letter(
    js: &jetstream::Context,
    service: &str,
    message: &jetstream::Message,
    reason: &str,
) {
    use proto::Message as _;
    tracing::warn!(%reason, subject = %message.subject, "dead-lettering");
    let seq = message
        .info()
        .map(|i| i.stream_sequence)
        .unwrap_or_default();
    let letter = proto::DeadLetter {
        subject: message.subject.to_string(),
        reason: reason.to_owned(),
        event_id: String::new(),
        excerpt: String::new(),
        size_bytes: message.payload.len() as u64,
        at_ms: crate::time::now_ms(),
    };
    let mut headers = async_nats::HeaderMap::new();
    let id = format!("dlq-{service}-{seq}");
    headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
    let published = js
        .publish_with_headers(
            subjects::dlq_subject(service),
            headers,
            letter.encode_to_vec().into(),
        )
        .await;
    match published {
        Ok(ack) => {
            if let Err(error) = ack.await {
                tracing::warn!(%error, "dead letter not acknowledged");
            }
        }
        Err(error) => tracing::warn!(%error, "dead letter not published"),
    }
    if let Err(error) = message.ack().await {
        tracing::warn!(%error, "ack of a dead letter failed");
    }
}

/// One notice a service announces on a stream: the subject, the id JetStream deduplicates on,
/// the span whose trace it continues (`None`: it carries no trace context) and the encoded
/// message.
pub struct Announcement {
    pub subject: String,
    pub id: String,
    pub span: Option<tracing::Span>,
    pub payload: bytes::Bytes,
}

/// Publish every announcement, then wait for every acknowledgement; `false` as soon as one is
/// not published or not acknowledged. A caller that gets `false` gives its batch back: the
/// announcements repeat with the same ids, which JetStream drops as duplicates.
pub async fn announce(jetstream: &jetstream::Context, announcements: Vec<Announcement>) -> bool {
    let mut acks = Vec::new();
    for announcement in announcements {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(span) = &announcement.span {
            span.in_scope(|| crate::nats::inject_trace(&mut headers));
        }
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            announcement.id.as_str(),
        );
        match jetstream
            .publish_with_headers(announcement.subject, headers, announcement.payload)
            .await
        {
            Ok(ack) => acks.push(ack),
            Err(error) => {
                tracing::warn!(%error, "announcing failed");
                return false;
            }
        }
    }
    for ack in acks {
        if let Err(error) = ack.await {
            tracing::warn!(%error, "announcement not acknowledged");
            return false;
        }
    }
    true
}

/// Of a write-path stream's byte limit, the part a bulk producer (an import) lets a consumer
/// fall behind before it waits. JetStream drops the oldest messages of a full stream whether or
/// not every consumer has read them, so a producer faster than the slowest consumer would
/// otherwise lose what that consumer had not reached: a million imported events outrun ingest
/// (about 1,500 a second) and the events stream holds about a gigabyte of them.
const BACKLOG_SHARE: u64 = 4;
/// Once a producer waits, it goes on when the consumer is back within this part of its room,
/// so it publishes in long runs rather than a batch between every check.
const RESUME_SHARE: u64 = 2;
/// A consumer with no pull request outstanding and nothing delivered or acknowledged for this
/// long is taken to be stopped: a producer does not wait for a service that is not running.
const LIVE_WITHIN_S: i64 = 60;

/// How far one consumer of a write-path stream is behind its head.
#[derive(Debug, Clone, PartialEq)]
pub struct Behind {
    pub consumer: String,
    /// Messages not yet delivered or not yet acknowledged.
    pub messages: u64,
    /// Their size, estimated from the stream's mean message size.
    pub bytes: u64,
    /// The bytes it may be behind before a bulk producer waits for it.
    pub room: u64,
}

impl Behind {
    /// Whether a bulk producer should wait for this consumer.
    pub fn full(&self) -> bool {
        self.bytes > self.room
    }
}

/// Whether a consumer is being read: a pull request outstanding, or a delivery or an ack within
/// [`LIVE_WITHIN_S`] of `now_s` (Unix seconds).
fn live(info: &jetstream::consumer::Info, now_s: i64) -> bool {
    info.num_waiting > 0
        || [info.delivered.last_active, info.ack_floor.last_active]
            .into_iter()
            .flatten()
            .any(|at| now_s - at.unix_timestamp() < LIVE_WITHIN_S)
}

/// The live consumer of the events and the ingest-notices streams that is furthest behind,
/// as a share of its room; `None` when none is behind (or the streams have no byte limit).
pub async fn furthest_behind(js: &jetstream::Context) -> anyhow::Result<Option<Behind>> {
    use futures::TryStreamExt as _;
    let now_s = crate::time::now_ms() / 1000;
    let mut furthest: Option<Behind> = None;
    for name in [subjects::EVENTS_STREAM, subjects::INGEST_STREAM] {
        // A stream not made yet has nothing to drop: publishing to it fails on its own.
        let Ok(stream) = js.get_stream(name).await else {
            continue;
        };
        // Fetched with the stream itself: asking again would be a second round trip a look.
        let info = stream.cached_info();
        let Ok(limit) = u64::try_from(info.config.max_bytes) else {
            continue;
        };
        let room = limit / BACKLOG_SHARE;
        let mean = info
            .state
            .bytes
            .checked_div(info.state.messages)
            .unwrap_or(0);
        let consumers: Vec<_> = stream
            .consumers()
            .try_collect()
            .await
            .with_context(|| format!("listing the consumers of {name}"))?;
        for consumer in consumers.iter().filter(|c| live(c, now_s)) {
            let messages = consumer.num_pending + consumer.num_ack_pending as u64;
            let behind = Behind {
                consumer: consumer.name.clone(),
                messages,
                bytes: messages * mean,
                room,
            };
            let share = |b: &Behind| b.bytes as f64 / b.room.max(1) as f64;
            if messages > 0 && furthest.as_ref().is_none_or(|f| share(&behind) > share(f)) {
                furthest = Some(behind);
            }
        }
    }
    Ok(furthest)
}

/// Return once no live consumer of the write path is further behind than its room, calling
/// `waiting` with the furthest while it waits. Once it has waited it goes on only when that
/// consumer is back within half its room. A bulk producer calls this between batches; a
/// stopped service is not waited for (its backlog is its own to lose, as before).
pub async fn wait_for_room(
    js: &jetstream::Context,
    mut waiting: impl FnMut(&Behind),
) -> anyhow::Result<()> {
    let mut waited = false;
    loop {
        let behind = furthest_behind(js).await?;
        let go_on = match &behind {
            None => true,
            Some(b) if waited => b.bytes <= b.room / RESUME_SHARE,
            Some(b) => !b.full(),
        };
        if go_on {
            return Ok(());
        }
        if let Some(b) = &behind {
            waiting(b);
        }
        waited = true;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
