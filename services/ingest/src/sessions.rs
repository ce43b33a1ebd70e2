//! Requests to change stored sessions, answered over NATS request/reply because ingest owns
//! `sessions` and `observations`: archive (or unarchive), delete, and import (see
//! [`crate::import`]). The api asks; nobody else writes these tables.

use futures::StreamExt as _;
use proto::{Message as _, subjects};
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// The most sessions one request may name, so one request cannot hold the write lock for long.
pub const MAX_SESSIONS_PER_REQUEST: usize = 500;

/// Answer archive, delete and import requests until `shutdown` is cancelled.
pub async fn serve(
    client: async_nats::Client,
    pool: SqlitePool,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut requests = futures::stream::select_all([
        client
            .queue_subscribe(
                subjects::SESSIONS_ARCHIVE,
                subjects::INGEST_QUEUE.to_owned(),
            )
            .await?,
        client
            .queue_subscribe(subjects::SESSIONS_DELETE, subjects::INGEST_QUEUE.to_owned())
            .await?,
        client
            .queue_subscribe(subjects::SESSIONS_IMPORT, subjects::INGEST_QUEUE.to_owned())
            .await?,
    ]);
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(message) = requests.next() => message,
            else => break,
        };
        let Some(reply_to) = message.reply.clone() else {
            continue;
        };
        let span = tracing::info_span!("ingest.sessions", subject = %message.subject);
        common::nats::continue_trace(&span, message.headers.as_ref());
        // Requests are answered one at a time: each is one short write transaction, and taking
        // them in turn keeps them from queueing on the write lock behind each other anyway.
        let reply = if message.subject.as_str() == subjects::SESSIONS_IMPORT {
            import(&pool, &message.payload).instrument(span).await
        } else {
            answer(&client, &pool, &message.subject, &message.payload)
                .instrument(span)
                .await
                .encode_to_vec()
        };
        if let Err(error) = client.publish(reply_to, reply.into()).await {
            tracing::warn!(%error, "sessions reply failed");
        }
    }
    Ok(())
}

async fn answer(
    client: &async_nats::Client,
    pool: &SqlitePool,
    subject: &str,
    payload: &[u8],
) -> proto::SessionsChangedReply {
    let failed = |error: String| proto::SessionsChangedReply {
        error,
        ..Default::default()
    };
    let (ids, result) = match subject {
        subjects::SESSIONS_ARCHIVE => match proto::ArchiveSessionsRequest::decode(payload) {
            Ok(request) => {
                let ids = request.session_ids.clone();
                if let Some(error) = check(&ids) {
                    return failed(error);
                }
                (ids, archive(pool, &request).await)
            }
            Err(error) => return failed(format!("request is not an archive request: {error}")),
        },
        _ => match proto::DeleteSessionsRequest::decode(payload) {
            Ok(request) => {
                let ids = request.session_ids;
                if let Some(error) = check(&ids) {
                    return failed(error);
                }
                let result = delete(client, pool, &ids).await;
                (ids, result)
            }
            Err(error) => return failed(format!("request is not a delete request: {error}")),
        },
    };
    match result {
        Ok(reply) => {
            tracing::info!(
                sessions = reply.sessions,
                observations = reply.observations,
                asked = ids.len(),
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

/// Answer an import request.
async fn import(pool: &SqlitePool, payload: &[u8]) -> Vec<u8> {
    let reply = match proto::ImportRecordsRequest::decode(payload) {
        Ok(request)
            if request.sessions.len() + request.observations.len()
                > crate::import::MAX_ROWS_PER_REQUEST =>
        {
            proto::ImportRecordsReply {
                error: format!(
                    "at most {} rows per import request",
                    crate::import::MAX_ROWS_PER_REQUEST
                ),
                ..Default::default()
            }
        }
        Ok(request) => match crate::import::import(pool, &request).await {
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
        },
        Err(error) => proto::ImportRecordsReply {
            error: format!("request is not an import request: {error}"),
            ..Default::default()
        },
    };
    reply.encode_to_vec()
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
            .bind(common::now_ms())
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
/// published, the reply says so and asks for the delete to be repeated.
pub(crate) async fn delete(
    client: &async_nats::Client,
    pool: &SqlitePool,
    ids: &[String],
) -> anyhow::Result<proto::SessionsChangedReply> {
    let mut reply = delete_rows(pool, ids).await?;
    if let Err(reason) = announce_deleted(client, ids).await {
        tracing::warn!(%reason, sessions = ids.len(), "deleted sessions were not announced");
        reply.error = format!(
            "the sessions were deleted, but the services holding memory made from them were \
             not told ({reason}); repeat the delete"
        );
    }
    Ok(reply)
}

async fn announce_deleted(client: &async_nats::Client, ids: &[String]) -> Result<(), String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    let notice = proto::SessionsDeleted {
        session_ids: ids.to_vec(),
        deleted_at_ms: common::now_ms(),
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
