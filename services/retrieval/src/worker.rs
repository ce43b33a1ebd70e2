//! Retrieval's background work: indexing what each feed of notices announces (ingest's stored
//! observations and deletions, the compressor's rows, the pattern service's patterns), read by
//! [`common::notices::Reader`], filling the in-memory full-text copy at start, and keeping the
//! health detail level with the embedding progress.

use crate::backfill::Vectors;
use crate::lexical::Lexical;
use crate::{SERVICE, derived, index};
use async_nats::jetstream;
use common::health::Counters;
use common::notices::{Handled, Handler, Reader};
use proto::{Message as _, subjects};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long JetStream waits for retrieval to ack an indexing message before redelivering it.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Stored-observation notices indexed per transaction.
const INDEX_BATCH: usize = 256;

/// Fill the in-memory full-text copy; full-text search uses FTS5 until it is done.
pub(crate) async fn load_lexical(pool: sqlx::SqlitePool, lexical: Arc<Lexical>) {
    let started = std::time::Instant::now();
    match index::load_lexical(&pool, &lexical).await {
        Ok(items) => tracing::info!(
            items,
            bytes = lexical.size().1,
            took_ms = started.elapsed().as_millis() as u64,
            "in-memory full-text index loaded"
        ),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "in-memory full-text index not loaded; full-text search stays on FTS5")
        }
    }
}

/// How far back the embedding rate looks: long enough to smooth the pauses between batches,
/// short enough that a rate from before a burst of imported items does not linger.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Keep the health detail and the embedding backlog current, with the rate over the last
/// minute and the time left at that rate, so `mneme status`, `mneme import` and the dashboard
/// can say when semantic search will cover everything.
pub(crate) async fn report_progress(
    vectors: Arc<Vectors>,
    pool: sqlx::SqlitePool,
    counters: Arc<Counters>,
    shutdown: CancellationToken,
) {
    let mut meter = RateMeter::default();
    let mut model_meter = RateMeter::default();
    loop {
        if let Ok(progress) = vectors.progress(&pool).await {
            let now = std::time::Instant::now();
            // `embedding` is what a person waits for: items searchable by meaning, by the
            // model's vector or a static one ahead of it. `model` is the model alone.
            let backlog = meter.sample(now, progress.searchable, progress.total, "embedding");
            let model = model_meter.sample(now, progress.model, progress.total, "model");
            let ahead = progress.searchable - progress.model;
            let mut detail = format!(
                "hybrid: {} in {}, {}/{} items embedded",
                vectors.space.model,
                vectors.index.name(),
                progress.model,
                progress.total,
            );
            if ahead > 0 {
                detail.push_str(&format!(", {ahead} more by static vectors ahead of it"));
            }
            if let Some(trouble) = vectors.trouble() {
                detail.push_str(&format!(
                    "; semantic search unavailable, answering full-text only: {trouble}"
                ));
            }
            counters.set_detail(detail);
            counters.set_backlogs(vec![backlog, model]);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// The embedding rate, from the items done at each sample over [`RATE_WINDOW`].
#[derive(Debug, Default)]
struct RateMeter {
    samples: std::collections::VecDeque<(std::time::Instant, i64)>,
}

impl RateMeter {
    /// Record `done` of `total` at `now` and say how fast the backlog moves.
    fn sample(
        &mut self,
        now: std::time::Instant,
        done: i64,
        total: i64,
        name: &str,
    ) -> proto::Backlog {
        // Items deleted by retention or a session delete lower `done`; a rate measured across
        // that drop would be wrong, so the window starts again.
        if self.samples.back().is_some_and(|&(_, last)| done < last) {
            self.samples.clear();
        }
        self.samples.push_back((now, done));
        while self
            .samples
            .front()
            .is_some_and(|&(at, _)| now.duration_since(at) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        let rate_per_s = match self.samples.front() {
            Some(&(at, first)) if now.duration_since(at) >= Duration::from_secs(1) => {
                (done - first) as f64 / now.duration_since(at).as_secs_f64()
            }
            _ => 0.0,
        };
        let left = (total - done).max(0);
        let eta_ms = if left == 0 {
            0
        } else if rate_per_s > 0.0 {
            (left as f64 / rate_per_s * 1000.0).ceil() as i64
        } else {
            -1
        };
        proto::Backlog {
            name: name.to_owned(),
            done,
            total,
            rate_per_s,
            eta_ms,
        }
    }
}

/// A stream of notices retrieval indexes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// What ingest stored (`mneme.ingest.stored`).
    Observations,
    /// What the compressor wrote (`mneme.compressor.written.>`).
    Compressor,
    /// What the pattern service found (`mneme.pattern.updated`).
    Patterns,
}

/// One notice read: what it asks to index, and the span that follows its trace until the
/// batch holding it is acked.
struct Notice {
    work: Work,
    /// Held, not read: the span is open while the notice is indexed and ends when it is acked.
    _span: tracing::Span,
}

/// What one notice asks to index.
enum Work {
    Observation(i64),
    Derived(derived::Source),
    /// Sessions ingest deleted: their items go, with anything indexed from a notice that was
    /// still on its way when they were deleted.
    Forget(Vec<String>),
}

impl Feed {
    pub(crate) fn stream(self) -> &'static str {
        match self {
            Feed::Observations => subjects::INGEST_STREAM,
            Feed::Compressor => subjects::COMPRESSOR_STREAM,
            Feed::Patterns => subjects::PATTERN_STREAM,
        }
    }

    fn subjects(self) -> &'static [&'static str] {
        match self {
            Feed::Observations => &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            Feed::Compressor => &[subjects::COMPRESSOR_WRITTEN_ALL],
            Feed::Patterns => &[subjects::PATTERN_UPDATED],
        }
    }

    /// The work a notice asks for, with the span that follows the notice's trace (its session,
    /// and the event id when the notice names one).
    fn decode(self, message: &jetstream::Message) -> Result<Notice, String> {
        if self == Feed::Observations
            && let Some(deleted) = observation::notices::deleted_sessions(message)
        {
            let (sessions, span) = deleted?;
            return Ok(Notice {
                work: Work::Forget(sessions),
                _span: span,
            });
        }
        let payload = message.payload.as_ref();
        let (work, session_id, event_id) = match self {
            Feed::Observations => proto::ObservationStored::decode(payload)
                .map(|n| {
                    (
                        Work::Observation(n.observation_id),
                        n.session_id,
                        n.event_id,
                    )
                })
                .map_err(|e| format!("not an ObservationStored: {e}"))?,
            Feed::Compressor => {
                let notice = proto::MemoryWritten::decode(payload)
                    .map_err(|e| format!("not a MemoryWritten: {e}"))?;
                let source = derived::Source::of_compressor(&notice.kind, notice.id)
                    .ok_or_else(|| format!("unknown compressor kind {:?}", notice.kind))?;
                (Work::Derived(source), notice.session_id, String::new())
            }
            Feed::Patterns => proto::PatternUpdated::decode(payload)
                .map(|n| {
                    let source = derived::Source::Pattern(n.pattern_id);
                    (Work::Derived(source), n.session_id, String::new())
                })
                .map_err(|e| format!("not a PatternUpdated: {e}"))?,
        };
        let span = tracing::info_span!(
            "retrieval.index",
            subject = %message.subject,
            session_id = %session_id,
            event_id = tracing::field::Empty,
        );
        if !event_id.is_empty() {
            span.record("event_id", event_id.as_str());
        }
        common::nats::continue_trace(&span, message.headers.as_ref());
        Ok(Notice { work, _span: span })
    }
}

/// Index the work of one batch of notices in order; returns the ids of items replaced.
async fn index_batch(
    pool: &sqlx::SqlitePool,
    lexical: &Lexical,
    notices: &[Notice],
) -> anyhow::Result<Vec<i64>> {
    let work = notices.iter().map(|n| &n.work);
    let observations: Vec<i64> = work
        .clone()
        .filter_map(|w| match w {
            Work::Observation(id) => Some(*id),
            _ => None,
        })
        .collect();
    index::index_observations(pool, lexical, &observations).await?;
    let sources: Vec<derived::Source> = work
        .clone()
        .filter_map(|w| match w {
            Work::Derived(source) => Some(*source),
            _ => None,
        })
        .collect();
    let mut replaced = Vec::new();
    if !sources.is_empty() {
        replaced = derived::index(pool, lexical, &sources).await?.0;
    }
    // Forgetting comes last: a notice of the batch may have been indexed above from rows read
    // before the deletion.
    let forgotten: Vec<String> = work
        .filter_map(|w| match w {
            Work::Forget(sessions) => Some(sessions.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    if !forgotten.is_empty() {
        let removed = index::forget_sessions(pool, lexical, &forgotten).await?;
        if !removed.is_empty() {
            tracing::info!(
                sessions = forgotten.len(),
                items = removed.len(),
                "forgot deleted sessions"
            );
        }
        replaced.extend(removed);
    }
    Ok(replaced)
}

/// Index what a feed announces, as it is announced. A batch is indexed in one transaction and
/// acked after it commits; a failure leaves it to be redelivered, however often it fails.
pub(crate) async fn index_feed(
    feed: Feed,
    jetstream: jetstream::Context,
    indexer: Indexer,
    shutdown: CancellationToken,
) {
    // Each stream has its own consumers, so the one durable name serves every feed.
    let description = format!("retrieval: index {}", feed.subjects().join(" and "));
    let durable = common::streams::Durable {
        stream: feed.stream(),
        name: subjects::RETRIEVAL_CONSUMER,
        description: &description,
        filter_subjects: feed.subjects(),
        ack_wait: ACK_WAIT,
        batch: INDEX_BATCH,
    };
    let reader = match Reader::open(&jetstream, SERVICE, durable).await {
        Ok(reader) => reader,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), stream = feed.stream(), "cannot consume notices; indexing of this feed stopped");
            return;
        }
    };
    reader.run(&FeedIndexer { feed, indexer }, &shutdown).await;
}

/// What indexing writes to.
#[derive(Clone)]
pub(crate) struct Indexer {
    pub pool: sqlx::SqlitePool,
    pub lexical: Arc<Lexical>,
    pub vectors: Option<Arc<Vectors>>,
}

/// One feed's notices, indexed.
struct FeedIndexer {
    feed: Feed,
    indexer: Indexer,
}

impl Handler for FeedIndexer {
    type Notice = Notice;

    const WORK: &'static str = "indexing";

    fn decode(&self, message: &jetstream::Message) -> Result<Notice, String> {
        self.feed.decode(message)
    }

    async fn handle(&self, notices: &[Notice]) -> anyhow::Result<Handled> {
        let Indexer {
            pool,
            lexical,
            vectors,
        } = &self.indexer;
        let replaced = index_batch(pool, lexical, notices).await?;
        if let Some(vectors) = vectors {
            if !replaced.is_empty()
                && let Err(error) = vectors.delete(pool, &replaced).await
            {
                // Only writing the ids down failed (the index's own failures are retried in the
                // background). A stale vector points at an id that no longer exists, which
                // search skips: it costs space, not correctness.
                tracing::warn!(error = %format!("{error:#}"), "could not delete replaced vectors");
            }
            // Patterns (workflows among them) are embedded as soon as they are indexed, ahead
            // of the backlog of raw items: a workflow is offered with a prompt only once its
            // meaning is known. A model failure leaves them to the backfill.
            let patterns: Vec<i64> = notices
                .iter()
                .filter_map(|n| match &n.work {
                    Work::Derived(derived::Source::Pattern(id)) => Some(*id),
                    _ => None,
                })
                .collect();
            if !patterns.is_empty() {
                let embedded = async {
                    let items = derived::pattern_items(pool, &patterns).await?;
                    vectors.embed_items(pool, &items).await
                };
                if let Err(error) = embedded.await {
                    tracing::warn!(error = %format!("{error:#}"), "could not embed patterns ahead of the backlog");
                }
            }
            vectors.notify();
        }
        Ok(Handled::Ack)
    }
}

#[cfg(test)]
mod tests {
    use super::RateMeter;
    use std::time::{Duration, Instant};

    #[test]
    fn the_rate_is_measured_over_the_last_minute_and_gives_the_time_left() {
        let start = Instant::now();
        let mut meter = RateMeter::default();
        let first = meter.sample(start, 0, 100, "embedding");
        assert_eq!(
            (first.rate_per_s, first.eta_ms),
            (0.0, -1),
            "nothing moved yet"
        );
        let later = meter.sample(start + Duration::from_secs(10), 20, 100, "embedding");
        assert!((later.rate_per_s - 2.0).abs() < 1e-9, "{later:?}");
        assert_eq!(later.eta_ms, 40_000, "80 items left at 2 a second");
        // Two minutes on, the first samples have left the window: the rate is the recent one.
        meter.sample(start + Duration::from_secs(70), 30, 100, "embedding");
        let recent = meter.sample(start + Duration::from_secs(130), 90, 100, "embedding");
        assert!((recent.rate_per_s - 1.0).abs() < 1e-9, "{recent:?}");
        assert_eq!(recent.eta_ms, 10_000);
        let level = meter.sample(start + Duration::from_secs(140), 100, 100, "embedding");
        assert_eq!(level.eta_ms, 0, "done");
        // A delete lowers what is done: the window starts again rather than report a negative
        // rate.
        let after_delete = meter.sample(start + Duration::from_secs(150), 50, 60, "embedding");
        assert_eq!((after_delete.rate_per_s, after_delete.eta_ms), (0.0, -1));
    }
}
