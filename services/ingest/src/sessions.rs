//! Requests to change stored sessions, answered over NATS request/reply because ingest owns
//! `sessions` and `observations`: archive (or unarchive), delete, and import (see
//! [`crate::import`]). The api asks; nobody else writes these tables.

use common::requests::{Requests, Turns};
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

/// The most sessions one request may name, so one request cannot hold the write lock for long.
pub const MAX_SESSIONS_PER_REQUEST: usize = 500;

/// What the session handlers share.
#[derive(Clone)]
struct Sessions {
    client: async_nats::Client,
    pool: SqlitePool,
    sharing: std::sync::Arc<crate::team::Sharing>,
}

/// Answer archive, delete and import requests until `shutdown` is cancelled.
pub async fn serve(
    client: async_nats::Client,
    pool: SqlitePool,
    sharing: std::sync::Arc<crate::team::Sharing>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let sessions = Sessions {
        client: client.clone(),
        pool,
        sharing,
    };
    let requests = Requests::new(
        sessions,
        |message| tracing::info_span!("ingest.sessions", subject = %message.subject),
    )
    .on(
        subjects::SESSIONS_ARCHIVE,
        |error| failed(format!("request is not an archive request: {error}")),
        archive_request,
    )
    .on(
        subjects::SESSIONS_DELETE,
        |error| failed(format!("request is not a delete request: {error}")),
        delete_request,
    )
    .on(
        subjects::SESSIONS_IMPORT,
        |error| proto::ImportRecordsReply {
            error: format!("request is not an import request: {error}"),
            ..Default::default()
        },
        import_request,
    )
    .listen(&client, subjects::INGEST_QUEUE)
    .await?;
    // Requests are answered one at a time: each is one short write transaction, and taking
    // them in turn keeps them from queueing on the write lock behind each other anyway.
    requests.serve(&shutdown, Turns::OneAtATime).await;
    Ok(())
}

fn failed(error: String) -> proto::SessionsChangedReply {
    proto::SessionsChangedReply {
        error,
        ..Default::default()
    }
}

async fn archive_request(
    sessions: Sessions,
    request: proto::ArchiveSessionsRequest,
) -> proto::SessionsChangedReply {
    if let Some(error) = check(&request.session_ids) {
        return failed(error);
    }
    let result = archive(&sessions.pool, &request).await;
    changed(request.session_ids.len(), result)
}

async fn delete_request(
    sessions: Sessions,
    request: proto::DeleteSessionsRequest,
) -> proto::SessionsChangedReply {
    let ids = request.session_ids;
    if let Some(error) = check(&ids) {
        return failed(error);
    }
    let result = delete(&sessions.client, &sessions.pool, &sessions.sharing, &ids).await;
    changed(ids.len(), result)
}

/// The reply to an archive or delete of `asked` sessions.
fn changed(
    asked: usize,
    result: anyhow::Result<proto::SessionsChangedReply>,
) -> proto::SessionsChangedReply {
    match result {
        Ok(reply) => {
            tracing::info!(
                sessions = reply.sessions,
                observations = reply.observations,
                asked,
                "sessions changed"
            );
            reply
        }
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "changing sessions failed");
            failed("changing sessions failed".to_owned())
        }
    }
}

async fn import_request(
    sessions: Sessions,
    request: proto::ImportRecordsRequest,
) -> proto::ImportRecordsReply {
    if request.sessions.len() + request.observations.len() > crate::import::MAX_ROWS_PER_REQUEST {
        return proto::ImportRecordsReply {
            error: format!(
                "at most {} rows per import request",
                crate::import::MAX_ROWS_PER_REQUEST
            ),
            ..Default::default()
        };
    }
    match crate::import::import(&sessions.pool, &request).await {
        Ok(reply) => {
            tracing::info!(
                sessions = reply.sessions,
                observations = reply.observations,
                skipped = reply.skipped,
                "imported"
            );
            reply
        }
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "import failed");
            proto::ImportRecordsReply {
                error: "import failed".to_owned(),
                ..Default::default()
            }
        }
    }
}

fn check(ids: &[String]) -> Option<String> {
    if ids.is_empty() {
        return Some("no session ids".to_owned());
    }
    if ids.len() > MAX_SESSIONS_PER_REQUEST {
        return Some(format!(
            "at most {MAX_SESSIONS_PER_REQUEST} sessions per request"
        ));
    }
    None
}

async fn archive(
    pool: &SqlitePool,
    request: &proto::ArchiveSessionsRequest,
) -> anyhow::Result<proto::SessionsChangedReply> {
    let mut tx = store::begin_write(pool).await?;
    let mut sessions = 0;
    for id in &request.session_ids {
        // Archiving twice keeps the first time, so retention counts from when it was archived.
        let sql = if request.unarchive {
            "UPDATE sessions SET archived_at = NULL WHERE id = ?"
        } else {
            "UPDATE sessions SET archived_at = coalesce(archived_at, ?2) WHERE id = ?1"
        };
        let done = sqlx::query(sql)
            .bind(id)
            .bind(common::time::now_ms())
            .execute(&mut *tx)
            .await?;
        sessions += done.rows_affected() as u32;
    }
    tx.commit().await?;
    Ok(proto::SessionsChangedReply {
        sessions,
        ..Default::default()
    })
}

/// How long a delete waits for JetStream to take its notice.
const NOTICE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Delete sessions with their observations, then announce it on `mneme.ingest.deleted` so the
/// services holding rows made from them drop those too. The notice names every session asked
/// for, so repeating a delete whose notice was lost repeats the clean-up; when it cannot be
/// published, the reply says so and asks for the delete to be repeated. The deletion of this
/// machine's own sessions of a shared project is shared with the team first, so a delete that
/// could not be shared deletes nothing here and can be asked again.
pub(crate) async fn delete(
    client: &async_nats::Client,
    pool: &SqlitePool,
    sharing: &crate::team::Sharing,
    ids: &[String],
) -> anyhow::Result<proto::SessionsChangedReply> {
    if let Err(error) = crate::team::share_deletion(client, pool, sharing, ids).await {
        tracing::warn!(error = %format!("{error:#}"), "a deletion was not shared with the team");
        return Ok(proto::SessionsChangedReply {
            error: format!(
                "nothing was deleted: the deletion could not be shared with the team ({error:#}); repeat the delete"
            ),
            ..Default::default()
        });
    }
    let mut reply = delete_rows(pool, ids).await?;
    if let Err(reason) = announce_deleted(client, ids).await {
        tracing::warn!(%reason, sessions = ids.len(), "deleted sessions were not announced");
        reply.error = format!(
            "the sessions were deleted, but the services holding memory made from them were \
             not told ({reason}); repeat the delete"
        );
    } else if let Err(reason) = erase_raw_events(client, pool, ids).await {
        tracing::warn!(%reason, sessions = ids.len(), "raw events of deleted sessions were not erased");
        reply.error = format!(
            "the sessions were deleted, but some of their raw events are still in the events \
             stream ({reason}); repeat the delete"
        );
    }
    Ok(reply)
}

/// The most dead letters one delete reads through to find the deleted sessions' ones: dead
/// letters are few (a malformed event is rare), and a stream grown past this is read from its
/// newest end.
const DEAD_LETTERS_SCANNED: u64 = 100_000;

/// Erase the deleted sessions' raw events from JetStream: each event ingest took for them from
/// the events stream, and each dead letter made of one of those events from the dead-letter
/// stream. JetStream overwrites an erased message in its files, so the text is gone from disk
/// too. A message already gone (aged out, erased by an earlier try) counts as erased; what
/// could not be erased stays listed in `event_messages`, so repeating the delete finishes it.
async fn erase_raw_events(
    client: &async_nats::Client,
    pool: &SqlitePool,
    ids: &[String],
) -> Result<(), String> {
    let mut messages: Vec<(i64, String)> = Vec::new();
    for id in ids {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT stream_seq, event_id FROM event_messages WHERE session_id = ?")
                .bind(id)
                .fetch_all(pool)
                .await
                .map_err(|e| format!("reading event_messages: {e}"))?;
        messages.extend(rows);
    }
    if messages.is_empty() {
        return Ok(());
    }
    let jetstream = async_nats::jetstream::new(client.clone());
    // Dead letters first: they are found through the event ids, which go with the rows below.
    let event_ids: std::collections::HashSet<&str> = messages
        .iter()
        .map(|(_, id)| id.as_str())
        .filter(|id| !id.is_empty())
        .collect();
    if !event_ids.is_empty() {
        let mut letters = jetstream
            .get_stream(subjects::DLQ_STREAM)
            .await
            .map_err(|e| format!("opening {}: {e}", subjects::DLQ_STREAM))?;
        let state = letters
            .info()
            .await
            .map_err(|e| format!("reading {}: {e}", subjects::DLQ_STREAM))?
            .state
            .clone();
        if state.messages > 0 {
            let first = state
                .first_sequence
                .max(state.last_sequence.saturating_sub(DEAD_LETTERS_SCANNED));
            let letters = &letters;
            let event_ids = &event_ids;
            let doomed: Vec<u64> = futures::stream::iter(first..=state.last_sequence)
                .map(|seq| async move {
                    // A letter deleted or aged out meanwhile, or not a dead letter, is skipped.
                    let message = letters.get_raw_message(seq).await.ok()?;
                    let letter = proto::DeadLetter::decode(message.payload.as_ref()).ok()?;
                    event_ids.contains(letter.event_id.as_str()).then_some(seq)
                })
                .buffer_unordered(REQUESTS_IN_FLIGHT)
                .filter_map(std::future::ready)
                .collect()
                .await;
            let (_, failed) = erase_all(letters, doomed).await;
            if let Some(error) = failed {
                return Err(error);
            }
        }
    }
    let events = jetstream
        .get_stream_no_info(subjects::EVENTS_STREAM)
        .await
        .map_err(|e| format!("opening {}: {e}", subjects::EVENTS_STREAM))?;
    let (erased, failed) = erase_all(
        &events,
        messages.iter().map(|(seq, _)| *seq as u64).collect(),
    )
    .await;
    // What was erased is forgotten in one write transaction, also when some erasures failed, so
    // a repeated delete only retries what is still in the stream.
    let forgotten = async {
        let mut tx = store::begin_write(pool).await?;
        for seq in &erased {
            sqlx::query("DELETE FROM event_messages WHERE stream_seq = ?")
                .bind(*seq as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    };
    forgotten
        .await
        .map_err(|e| format!("writing event_messages: {e}"))?;
    if let Some(error) = failed {
        return Err(error);
    }
    tracing::info!(
        events = messages.len(),
        sessions = ids.len(),
        "erased the deleted sessions' raw events"
    );
    Ok(())
}

/// How many JetStream requests erasing a deleted session's raw events keeps in flight. Each
/// is one round trip to the server; taken one after another, a long imported session (a
/// thousand events and more) outlasted the caller's request timeout on a busy machine.
const REQUESTS_IN_FLIGHT: usize = 32;

/// Erase these messages of `stream`, several at a time; returns those erased and the first
/// error met, if any.
async fn erase_all<I>(
    stream: &async_nats::jetstream::stream::Stream<I>,
    seqs: Vec<u64>,
) -> (Vec<u64>, Option<String>) {
    let outcomes: Vec<(u64, Result<(), String>)> = futures::stream::iter(seqs)
        .map(|seq| async move { (seq, erase(stream, seq).await) })
        .buffer_unordered(REQUESTS_IN_FLIGHT)
        .collect()
        .await;
    let mut erased = Vec::with_capacity(outcomes.len());
    let mut failed = None;
    for (seq, outcome) in outcomes {
        match outcome {
            Ok(()) => erased.push(seq),
            Err(error) => {
                failed.get_or_insert(error);
            }
        }
    }
    (erased, failed)
}

/// Erase one message (JetStream overwrites it); one that is no longer there is erased already.
async fn erase<I>(
    stream: &async_nats::jetstream::stream::Stream<I>,
    seq: u64,
) -> Result<(), String> {
    use async_nats::jetstream::stream::DeleteMessageErrorKind;
    match stream.delete_message(seq).await {
        Ok(_) => Ok(()),
        Err(error) => match error.kind() {
            DeleteMessageErrorKind::JetStream(inner)
                if inner.error_code() == async_nats::jetstream::ErrorCode::NO_MESSAGE_FOUND =>
            {
                Ok(())
            }
            _ => Err(format!("erasing message {seq}: {error}")),
        },
    }
}

async fn announce_deleted(client: &async_nats::Client, ids: &[String]) -> Result<(), String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    let notice = proto::SessionsDeleted {
        session_ids: ids.to_vec(),
        deleted_at_ms: common::time::now_ms(),
    };
    let mut headers = async_nats::HeaderMap::new();
    common::nats::inject_trace(&mut headers);
    let published = async {
        jetstream
            .publish_with_headers(
                subjects::SESSIONS_DELETED,
                headers,
                notice.encode_to_vec().into(),
            )
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(NOTICE_TIMEOUT, published).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error),
        Err(_) => Err("jetstream did not acknowledge in time".to_owned()),
    }
}

async fn delete_rows(
    pool: &SqlitePool,
    ids: &[String],
) -> anyhow::Result<proto::SessionsChangedReply> {
    let mut tx = store::begin_write(pool).await?;
    let mut reply = proto::SessionsChangedReply::default();
    for id in ids {
        // The full-text table is contentless, so its rows are deleted by rowid before the
        // observations that name them.
        sqlx::query(
            "DELETE FROM observations_fts WHERE rowid IN
                 (SELECT id FROM observations WHERE session_id = ?)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let observations = sqlx::query("DELETE FROM observations WHERE session_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // Dead letters keep an excerpt of the event they were made of.
        sqlx::query(
            "DELETE FROM dead_letters WHERE event_id != '' AND event_id IN
                 (SELECT event_id FROM event_messages WHERE session_id = ?)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM compactions WHERE session_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let sessions = sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        reply.sessions += sessions as u32;
        reply.observations += observations;
    }
    tx.commit().await?;
    Ok(reply)
}
