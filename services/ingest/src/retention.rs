//! Retention: archive sessions after some days without an event, delete archived sessions some
//! days after they were archived. Ingest applies the policy because it owns `sessions` and
//! `retention`: at start, every period, and whenever the policy is set; it answers
//! `mneme.retention.get`, `.set` and `.apply` for the api.
//!
//! A session is archived as of the moment it became inactive for long enough (its last event
//! plus the archive delay), not as of the run that noticed, so a policy applied late gives the
//! same result as one applied on time. Deleting asks retrieval to forget the session's memory
//! first and deletes the rows only once it has: when retrieval cannot answer, the sessions stay
//! (archived, still searchable) until a later run, rather than leaving their memory found with
//! nothing behind it. Sessions of deliberate memories (`memories`, `memories:<project>`) are
//! never archived or deleted by age: they are what an agent chose to keep.

use common::requests::{DecodeError, Requests};
use common::time::DAY_MS;
use proto::{Message as _, RetentionReply, RetentionSettings, subjects};
use sqlx::SqlitePool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// The longest delay a policy may set, in days (a hundred years).
pub const MAX_DAYS: u32 = 36_500;
/// How long a run waits for retrieval to forget a batch of sessions.
const FORGET_TIMEOUT: Duration = Duration::from_secs(10);

/// The condition that leaves deliberate memories out of retention.
const NOT_MEMORIES: &str = "id <> 'memories' AND id NOT LIKE 'memories:%'";

/// What the retention handlers share.
#[derive(Clone)]
struct Retention {
    client: async_nats::Client,
    pool: SqlitePool,
    sharing: std::sync::Arc<crate::team::Sharing>,
}

/// Apply the policy every `interval` (and at start), and answer policy requests, until
/// `shutdown` is cancelled. Runs and requests take turns, so two runs never overlap.
pub async fn serve(
    client: async_nats::Client,
    pool: SqlitePool,
    sharing: std::sync::Arc<crate::team::Sharing>,
    interval: Duration,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let retention = Retention {
        client: client.clone(),
        pool: pool.clone(),
        sharing: sharing.clone(),
    };
    let mut requests = Requests::new(
        retention,
        |message| tracing::info_span!("ingest.retention", subject = %message.subject),
    )
    .on(subjects::RETENTION_GET, invalid, get_request)
    .on(subjects::RETENTION_SET, invalid, set_request)
    .on(subjects::RETENTION_APPLY, invalid, apply_request)
    .listen(&client, subjects::INGEST_QUEUE)
    .await?;
    let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {
                if let Err(error) = apply(&client, &pool, &sharing).instrument(tracing::info_span!("ingest.retention")).await {
                    tracing::warn!(error = %format!("{error:#}"), "retention run failed");
                }
            }
            Some(message) = requests.next() => requests.respond(message).await,
            else => break,
        }
    }
    Ok(())
}

fn invalid(error: DecodeError) -> RetentionReply {
    failed(format!("request is not a retention request: {error}"))
}

fn failed(error: String) -> RetentionReply {
    RetentionReply {
        error,
        ..Default::default()
    }
}

/// The reply to a policy request: what was asked for, or that it failed.
fn answered(result: anyhow::Result<RetentionReply>) -> RetentionReply {
    result.unwrap_or_else(|error| {
        tracing::warn!(error = %format!("{error:#}"), "retention request failed");
        failed("retention failed".to_owned())
    })
}

async fn get_request(retention: Retention, _: proto::RetentionGetRequest) -> RetentionReply {
    answered(
        settings(&retention.pool)
            .await
            .map(|settings| RetentionReply {
                settings: Some(settings),
                ..Default::default()
            }),
    )
}

async fn set_request(retention: Retention, request: proto::RetentionSetRequest) -> RetentionReply {
    if request.archive_after_days > MAX_DAYS || request.delete_archived_after_days > MAX_DAYS {
        return failed(format!("days must be at most {MAX_DAYS}"));
    }
    answered(match set(&retention.pool, &request).await {
        Ok(()) => apply(&retention.client, &retention.pool, &retention.sharing).await,
        Err(error) => Err(error),
    })
}

async fn apply_request(retention: Retention, _: proto::RetentionApplyRequest) -> RetentionReply {
    answered(apply(&retention.client, &retention.pool, &retention.sharing).await)
}

/// The policy and what its last run did.
pub async fn settings(pool: &SqlitePool) -> anyhow::Result<RetentionSettings> {
    let row: (i64, i64, i64, i64, i64, i64, String) = sqlx::query_as(
        "SELECT archive_after_days, delete_archived_after_days, updated_at, last_run_at,
                last_archived, last_deleted, last_error
         FROM retention WHERE id = 1",
    )
    .fetch_one(pool)
    .await?;
    Ok(RetentionSettings {
        archive_after_days: row.0 as u32,
        delete_archived_after_days: row.1 as u32,
        updated_at_ms: row.2,
        last_run_at_ms: row.3,
        last_archived: row.4 as u32,
        last_deleted: row.5 as u32,
        last_error: row.6,
    })
}

async fn set(pool: &SqlitePool, request: &proto::RetentionSetRequest) -> anyhow::Result<()> {
    let mut tx = store::begin_write(pool).await?;
    sqlx::query(
        "UPDATE retention SET archive_after_days = ?, delete_archived_after_days = ?,
             updated_at = ? WHERE id = 1",
    )
    .bind(i64::from(request.archive_after_days))
    .bind(i64::from(request.delete_archived_after_days))
    .bind(common::time::now_ms())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Apply the policy now; the reply says what this run archived and deleted.
pub async fn apply(
    client: &async_nats::Client,
    pool: &SqlitePool,
    sharing: &crate::team::Sharing,
) -> anyhow::Result<RetentionReply> {
    let policy = settings(pool).await?;
    let now = common::time::now_ms();
    let mut archived = 0;
    if policy.archive_after_days > 0 {
        let delay = i64::from(policy.archive_after_days) * DAY_MS;
        let mut tx = store::begin_write(pool).await?;
        archived = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE sessions SET archived_at = last_event_at + ?1
             WHERE archived_at IS NULL AND last_event_at + ?1 <= ?2 AND {NOT_MEMORIES}"
        )))
        .bind(delay)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected() as u32;
        tx.commit().await?;
    }
    let mut deleted = 0;
    let mut error = String::new();
    if policy.delete_archived_after_days > 0 {
        let delay = i64::from(policy.delete_archived_after_days) * DAY_MS;
        loop {
            let ids: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT id FROM sessions
                 WHERE archived_at IS NOT NULL AND archived_at + ? <= ? AND {NOT_MEMORIES}
                 ORDER BY archived_at LIMIT ?"
            )))
            .bind(delay)
            .bind(now)
            .bind(crate::sessions::MAX_SESSIONS_PER_REQUEST as i64)
            .fetch_all(pool)
            .await?;
            if ids.is_empty() {
                break;
            }
            let ids: Vec<String> = ids.into_iter().map(|(id,)| id).collect();
            if let Err(reason) = forget(client, &ids).await {
                tracing::warn!(%reason, sessions = ids.len(), "retention kept sessions it could not forget");
                error = format!("{reason}; the sessions stay archived until the next run");
                break;
            }
            let reply = crate::sessions::delete(client, pool, sharing, &ids).await?;
            deleted += reply.sessions;
            if !reply.error.is_empty() {
                error = reply.error;
                break;
            }
        }
    }
    let mut tx = store::begin_write(pool).await?;
    sqlx::query(
        "UPDATE retention SET last_run_at = ?, last_archived = ?, last_deleted = ?,
             last_error = ? WHERE id = 1",
    )
    .bind(now)
    .bind(i64::from(archived))
    .bind(i64::from(deleted))
    .bind(&error)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    if archived > 0 || deleted > 0 {
        tracing::info!(archived, deleted, "retention applied");
    }
    Ok(RetentionReply {
        settings: Some(settings(pool).await?),
        archived,
        deleted,
        error: String::new(),
    })
}

/// Ask retrieval to drop the memory items of these sessions.
async fn forget(client: &async_nats::Client, ids: &[String]) -> Result<(), String> {
    let request = proto::ForgetRequest {
        session_ids: ids.to_vec(),
    };
    let asked = client.request(subjects::RETRIEVAL_FORGET, request.encode_to_vec().into());
    let reply = match tokio::time::timeout(FORGET_TIMEOUT, asked).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => return Err(format!("retrieval could not be asked to forget: {error}")),
        Err(_) => return Err("retrieval did not answer in time".to_owned()),
    };
    match proto::ForgetReply::decode(reply.payload) {
        Ok(reply) if reply.error.is_empty() => Ok(()),
        Ok(reply) => Err(format!("retrieval could not forget: {}", reply.error)),
        Err(error) => Err(format!("unreadable forget reply: {error}")),
    }
}
