//! How much is remembered: counts of every service's rows, activity per project and per day,
//! and what compression saved.
//!
//! Activity is counted by the time each event happened (`observations.occurred_at`, the time the
//! host recorded it), never by the time it was stored, so history imported today is counted on
//! the days it was made. The days shown end on the day of the newest event rather than today:
//! a store filled with last year's sessions shows last year, not an empty month.

use serde::Serialize;
use sqlx::SqlitePool;

/// Rows in each service's main tables.
#[derive(Debug, Clone, Default, Serialize, sqlx::FromRow)]
pub struct Counts {
    pub sessions: i64,
    pub observations: i64,
    pub memory_items: i64,
    pub structured_observations: i64,
    pub session_summaries: i64,
    pub checkpoints: i64,
    pub patterns: i64,
    pub dead_letters: i64,
    pub archived_sessions: i64,
}

impl Counts {
    /// The count of each table, by the table's name.
    pub fn tables(&self) -> [(&'static str, i64); 8] {
        [
            ("sessions", self.sessions),
            ("observations", self.observations),
            ("memory_items", self.memory_items),
            ("structured_observations", self.structured_observations),
            ("session_summaries", self.session_summaries),
            ("checkpoints", self.checkpoints),
            ("patterns", self.patterns),
            ("dead_letters", self.dead_letters),
        ]
    }
}

/// The rows of each table, and the archived sessions among the sessions.
pub async fn counts(pool: &SqlitePool) -> Result<Counts, sqlx::Error> {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM sessions) AS sessions,
                (SELECT count(*) FROM observations) AS observations,
                (SELECT count(*) FROM memory_items) AS memory_items,
                (SELECT count(*) FROM structured_observations) AS structured_observations,
                (SELECT count(*) FROM session_summaries) AS session_summaries,
                (SELECT count(*) FROM checkpoints) AS checkpoints,
                (SELECT count(*) FROM patterns) AS patterns,
                (SELECT count(*) FROM dead_letters) AS dead_letters,
                (SELECT count(*) FROM sessions WHERE archived_at IS NOT NULL)
                    AS archived_sessions",
    )
    .fetch_one(pool)
    .await
}

/// Memory items of one kind.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct KindCount {
    pub kind: String,
    pub items: i64,
}

/// One project's sessions, events and latest event.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ProjectActivity {
    pub project: String,
    pub sessions: i64,
    pub events: i64,
    pub last_event_at_ms: i64,
}

/// Observations of one UTC day (by the time they happened).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct DayActivity {
    /// The day, as `YYYY-MM-DD`.
    #[sqlx(try_from = "i64")]
    pub day: UtcDay,
    pub observations: i64,
    pub prompts: i64,
    pub errors: i64,
}

/// A UTC day, read as days since the Unix epoch and shown as `YYYY-MM-DD`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct UtcDay(pub String);

impl From<i64> for UtcDay {
    fn from(days: i64) -> UtcDay {
        UtcDay(common::time::utc_day(days * 86_400_000))
    }
}

/// Estimated tokens: of the raw sessions, of their summaries, and what summaries and
/// checkpoints saved.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Tokens {
    pub raw: i64,
    pub summaries: i64,
    pub saved_by_summaries: i64,
    pub saved_by_checkpoints: i64,
}

/// What `stats` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub counts: Counts,
    /// Memory items per kind, the most common first.
    pub kinds: Vec<KindCount>,
    /// The 50 projects with the latest events, latest first.
    pub projects: Vec<ProjectActivity>,
    /// Observations per day over the days asked for, ending on the day of the newest event
    /// (see [`activity`]), oldest first, every day of the range listed (days without events
    /// count zero).
    pub per_day: Vec<DayActivity>,
    pub tokens: Tokens,
}

/// Counts, activity per project and per day (over the `days` days ending on the newest event's,
/// see [`activity`]), and what compression saved.
pub async fn stats(pool: &SqlitePool, days: u32) -> Result<Stats, sqlx::Error> {
    let counts = counts(pool).await?;
    let kinds = sqlx::query_as(
        "SELECT kind, count(*) AS items FROM memory_items GROUP BY kind
         ORDER BY items DESC, kind",
    )
    .fetch_all(pool)
    .await?;
    let projects = sqlx::query_as(
        "SELECT project, count(*) AS sessions, sum(event_count) AS events,
                max(last_event_at) AS last_event_at_ms
         FROM sessions GROUP BY project ORDER BY last_event_at_ms DESC LIMIT 50",
    )
    .fetch_all(pool)
    .await?;
    let per_day = activity(pool, days, common::time::now_ms()).await?;
    // A summary's tokens are estimated at four characters each, as the compressor counts them.
    let tokens = sqlx::query_as(
        "WITH t AS (
             SELECT (SELECT coalesce(sum(total_tokens), 0) FROM compressor_sessions) AS raw,
                    (SELECT coalesce(sum(length(text)), 0) / 4 FROM session_summaries)
                        AS summaries)
         SELECT raw, summaries, max(raw - summaries, 0) AS saved_by_summaries,
                (SELECT coalesce(sum(max(tokens_before - tokens_after, 0)), 0) FROM checkpoints)
                    AS saved_by_checkpoints
         FROM t",
    )
    .fetch_one(pool)
    .await?;
    Ok(Stats {
        counts,
        kinds,
        projects,
        per_day,
        tokens,
    })
}

const DAY_MS: i64 = 86_400_000;

/// Observations per UTC day, by the time they happened, over the `days` days that end on the
/// day of the newest observation; every day of the range is listed, oldest first, with zeros
/// where nothing happened, so a chart of them is to scale.
///
/// The range ends on the newest event's day rather than on today's, so history imported from
/// last year is shown where it lies instead of as an empty month; while events arrive live the
/// newest is today, and the range is the last `days` days as before. An event dated after `now`
/// (a host with its clock ahead) never moves the range into the future, and an empty store
/// shows the days ending today.
pub async fn activity(
    pool: &SqlitePool,
    days: u32,
    now: i64,
) -> Result<Vec<DayActivity>, sqlx::Error> {
    let newest: Option<i64> = sqlx::query_scalar("SELECT max(occurred_at) FROM observations")
        .fetch_one(pool)
        .await?;
    let last_day = newest.unwrap_or(now).min(now).div_euclid(DAY_MS);
    let first_day = last_day - i64::from(days.max(1)) + 1;
    let counted: Vec<DayActivity> = sqlx::query_as(
        "SELECT occurred_at / 86400000 AS day, count(*) AS observations,
                sum(kind = 'prompt') AS prompts, sum(kind = 'tool_failure') AS errors
         FROM observations WHERE occurred_at >= ?1 AND occurred_at < ?2
         GROUP BY day ORDER BY day",
    )
    .bind(first_day * DAY_MS)
    .bind((last_day + 1) * DAY_MS)
    .fetch_all(pool)
    .await?;
    let mut counted = counted.into_iter().peekable();
    let mut per_day = Vec::with_capacity((last_day - first_day + 1) as usize);
    for day in first_day..=last_day {
        let label = UtcDay::from(day);
        match counted.next_if(|row| row.day == label) {
            Some(row) => per_day.push(row),
            None => per_day.push(DayActivity {
                day: label,
                observations: 0,
                prompts: 0,
                errors: 0,
            }),
        }
    }
    Ok(per_day)
}
