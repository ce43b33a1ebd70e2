//! The vector index behind one trait: sqlite-vec inside the store (the default) or a Qdrant
//! server ([`qdrant`]).
//!
//! An index holds one collection (table) per vector space, so vectors of different models are
//! never compared. Points carry the fields searches filter on most (project, kind, session,
//! time), so those filters apply inside the nearest-neighbour search instead of after it.

pub mod flat;
pub mod qdrant;

use crate::models;
use anyhow::Context as _;
use flat::Flat;
use futures::TryStreamExt as _;
use futures::future::BoxFuture;
use sqlx::SqlitePool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;

/// One vector space: a model, its dimensions and where its vectors live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub model: String,
    pub dim: usize,
    /// The sqlite-vec table or Qdrant collection name.
    pub table: String,
}

/// Bits of a point id that hold the memory item's id; the bits above them number the piece of
/// a long item the vector is of (none for the first piece, so an item read in one piece has
/// its own id as its point's). Item ids stay far below 2^40.
pub const ITEM_BITS: u32 = 40;

/// The point id of piece `piece` of item `item` (the first is 0).
pub fn point_id(item: i64, piece: usize) -> i64 {
    item | ((piece as i64) << ITEM_BITS)
}

/// The item a point id belongs to.
pub fn item_of(point: i64) -> i64 {
    point & ((1 << ITEM_BITS) - 1)
}

/// A vector with the fields searches filter on.
#[derive(Debug, Clone)]
pub struct Point {
    /// The item's id, with the piece above [`ITEM_BITS`] for a long item's later pieces.
    pub id: i64,
    pub vector: Vec<f32>,
    pub project: String,
    pub kind: String,
    pub session_id: String,
    pub occurred_at: i64,
}

/// Filters applied inside the nearest-neighbour search.
#[derive(Debug, Clone, Default)]
pub struct VectorFilter {
    pub project: Option<String>,
    pub kinds: Vec<String>,
    pub sessions: Vec<String>,
    pub exclude_sessions: Vec<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

/// A nearest-neighbour index.
pub trait VectorIndex: Send + Sync {
    /// A short name for logs and status (`sqlite-vec`, `qdrant`).
    fn name(&self) -> &'static str;
    /// Create the space's table or collection when it does not exist; idempotent.
    fn ensure<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Insert or replace points.
    fn upsert<'a>(
        &'a self,
        space: &'a Space,
        points: &'a [Point],
    ) -> BoxFuture<'a, anyhow::Result<()>>;
    /// The `k` points most similar to `query` that pass `filter`, as (id, cosine similarity),
    /// most similar first.
    fn knn<'a>(
        &'a self,
        space: &'a Space,
        query: &'a [f32],
        k: usize,
        filter: &'a VectorFilter,
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>>;
    /// Remove points by id.
    fn delete<'a>(&'a self, space: &'a Space, ids: &'a [i64]) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Drop a space entirely (after a model change has re-indexed into another one).
    fn drop_space<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Cosine similarity of `query` with the stored vectors of `ids`, for those this index can
    /// score without the caller reading them (none by default): the caller reads the others
    /// from the embedding cache.
    fn cosines<'a>(
        &'a self,
        _space: &'a Space,
        _query: &'a [f32],
        _ids: &'a [i64],
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Wait until searches of `space` run at full speed (an index that loads a copy into
    /// memory answers, more slowly, before that).
    fn loaded<'a>(&'a self, _space: &'a Space) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// sqlite-vec `vec0` tables in the store, the durable copy, each searched through an
/// in-memory eight-bit copy ([`Flat`]) once that has been loaded.
#[derive(Clone)]
pub struct SqliteVec {
    pool: SqlitePool,
    mirrors: Arc<Mutex<HashMap<String, Arc<Mirror>>>>,
    /// Whether tables are searched through an in-memory copy.
    memory: bool,
}

/// The in-memory copy of one table, and whether it has been loaded yet.
struct Mirror {
    state: RwLock<MirrorState>,
    ready: watch::Sender<bool>,
}

enum MirrorState {
    /// Being read from the table; changes committed meanwhile wait here, to be applied on top,
    /// since the read may or may not have seen them (applying twice changes nothing).
    Loading(Vec<Change>),
    Ready(Box<Flat>),
    /// The table could not be read; searches keep using `vec0`.
    Failed,
}

enum Change {
    Upsert(Vec<Point>),
    Delete(Vec<i64>),
}

impl Mirror {
    fn apply(&self, change: Change) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        match &mut *state {
            MirrorState::Loading(pending) => pending.push(change),
            MirrorState::Ready(flat) => apply(flat, &change),
            MirrorState::Failed => {}
        }
    }
}

fn apply(flat: &mut Flat, change: &Change) {
    match change {
        Change::Upsert(points) => points.iter().for_each(|p| flat.upsert(p)),
        Change::Delete(ids) => ids.iter().for_each(|id| flat.delete(*id)),
    }
}

impl SqliteVec {
    pub fn new(pool: SqlitePool) -> SqliteVec {
        SqliteVec {
            pool,
            mirrors: Arc::default(),
            memory: true,
        }
    }

    /// Search `vec0` directly, with no in-memory copy: slower, for stores too large for memory.
    pub fn without_memory(pool: SqlitePool) -> SqliteVec {
        SqliteVec {
            memory: false,
            ..SqliteVec::new(pool)
        }
    }

    fn mirror(&self, space: &Space) -> Option<Arc<Mirror>> {
        let mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        mirrors.get(&space.table).cloned()
    }

    /// Start loading the in-memory copy of `space` unless one exists.
    fn start_mirror(&self, space: &Space) {
        if !self.memory {
            return;
        }
        let mirror = {
            let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
            if mirrors.contains_key(&space.table) {
                return;
            }
            let mirror = Arc::new(Mirror {
                state: RwLock::new(MirrorState::Loading(Vec::new())),
                ready: watch::Sender::new(false),
            });
            mirrors.insert(space.table.clone(), Arc::clone(&mirror));
            mirror
        };
        let pool = self.pool.clone();
        let space = space.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let loaded = load(&pool, &space).await;
            let mut state = mirror.state.write().unwrap_or_else(|e| e.into_inner());
            let pending = std::mem::replace(&mut *state, MirrorState::Failed);
            match (loaded, pending) {
                (Ok(mut flat), MirrorState::Loading(pending)) => {
                    pending.iter().for_each(|change| apply(&mut flat, change));
                    tracing::info!(
                        table = %space.table,
                        vectors = flat.len(),
                        ms = started.elapsed().as_millis() as u64,
                        "vectors loaded into memory"
                    );
                    *state = MirrorState::Ready(Box::new(flat));
                }
                (Err(error), _) => {
                    tracing::warn!(table = %space.table, error = %format!("{error:#}"), "could not load vectors into memory; searching sqlite-vec directly");
                }
                (Ok(_), other) => *state = other,
            }
            drop(state);
            mirror.ready.send_replace(true);
        });
    }
}

/// Read every vector of `space` from its `vec0` table.
///
/// A full scan of `vec0` looks each column of each row up on its own: the vector is one blob
/// read, but the partition key and every metadata column are further statements and blob
/// reads, so a million rows took minutes. The fields searches filter on are therefore read
/// from the row's memory item, which they were copied from when the vector was written (an
/// item is never changed in place: a rewrite is a new item); only a vector whose item is gone
/// falls back to `vec0`'s own copy (`COALESCE` reads its second argument only when the first
/// is null). The vectors themselves, and which ones there are, still come from `vec0` alone.
async fn load(pool: &SqlitePool, space: &Space) -> anyhow::Result<Flat> {
    // A LEFT JOIN keeps `vec0`'s scan as the outer loop, each item looked up by its id.
    let sql = format!(
        "SELECT v.item_id, v.embedding,
                COALESCE(m.project, v.project), COALESCE(m.kind, v.kind),
                COALESCE(m.session_id, v.session_id), COALESCE(m.occurred_at, v.occurred_at)
         FROM {} AS v LEFT JOIN memory_items AS m ON m.id = (v.item_id & {})",
        checked(&space.table)?,
        (1i64 << ITEM_BITS) - 1
    );
    let mut flat = Flat::new(space.dim);
    let mut rows =
        sqlx::query_as::<_, (i64, Vec<u8>, String, String, String, i64)>(sqlx::AssertSqlSafe(sql))
            .fetch(pool);
    while let Some((id, bytes, project, kind, session_id, occurred_at)) = rows.try_next().await? {
        flat.upsert(&Point {
            id,
            vector: models::from_bytes(&bytes),
            project,
            kind,
            session_id,
            occurred_at,
        });
    }
    Ok(flat)
}

/// Table names are generated from a hash, never from user input; check anyway before splicing
/// one into SQL.
fn checked(table: &str) -> anyhow::Result<&str> {
    anyhow::ensure!(
        !table.is_empty() && table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "invalid vector table name {table:?}"
    );
    Ok(table)
}

impl VectorIndex for SqliteVec {
    fn name(&self) -> &'static str {
        "sqlite-vec"
    }

    fn ensure<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            // Vectors are unit length, so L2 distance orders exactly as cosine does, and its
            // loop is the cheaper of the two in sqlite-vec. Searches are nearly always within
            // one project: as the partition key it confines a search to that project's chunks,
            // where a metadata filter still reads every chunk; small chunks keep a small
            // project from reserving a large one.
            let sql = format!(
                "CREATE VIRTUAL TABLE IF NOT EXISTS {} USING vec0(
                    item_id INTEGER PRIMARY KEY,
                    embedding float[{}],
                    project TEXT PARTITION KEY,
                    kind TEXT,
                    session_id TEXT,
                    occurred_at INTEGER,
                    chunk_size=128
                )",
                checked(&space.table)?,
                space.dim
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&self.pool)
                .await
                .context("creating the vector table")?;
            self.start_mirror(space);
            Ok(())
        })
    }

    fn upsert<'a>(
        &'a self,
        space: &'a Space,
        points: &'a [Point],
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let table = checked(&space.table)?;
            // vec0 has no upsert: delete then insert, in one transaction.
            let delete = format!("DELETE FROM {table} WHERE item_id = ?");
            let insert = format!(
                "INSERT INTO {table}(item_id, embedding, project, kind, session_id, occurred_at)
                 VALUES (?, ?, ?, ?, ?, ?)"
            );
            let mut tx = store::begin_write(&self.pool).await?;
            for point in points {
                sqlx::query(sqlx::AssertSqlSafe(delete.clone()))
                    .bind(point.id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sqlx::AssertSqlSafe(insert.clone()))
                    .bind(point.id)
                    .bind(models::to_bytes(&point.vector))
                    .bind(&point.project)
                    .bind(&point.kind)
                    .bind(&point.session_id)
                    .bind(point.occurred_at)
                    .execute(&mut *tx)
                    .await
                    .context("inserting a vector")?;
            }
            tx.commit().await?;
            if let Some(mirror) = self.mirror(space) {
                mirror.apply(Change::Upsert(points.to_vec()));
            }
            Ok(())
        })
    }

    fn cosines<'a>(
        &'a self,
        space: &'a Space,
        query: &'a [f32],
        ids: &'a [i64],
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>> {
        // Only the in-memory copy answers: reading `vec0` rows is what the cache read does.
        let known = match self.mirror(space) {
            Some(mirror) => match &*mirror.state.read().unwrap_or_else(|e| e.into_inner()) {
                MirrorState::Ready(flat) => flat.cosines(query, ids),
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        Box::pin(async move { Ok(known) })
    }

    fn knn<'a>(
        &'a self,
        space: &'a Space,
        query: &'a [f32],
        k: usize,
        filter: &'a VectorFilter,
    ) -> BoxFuture<'a, anyhow::Result<Vec<(i64, f32)>>> {
        Box::pin(async move {
            if let Some(mirror) = self.mirror(space) {
                let ready = matches!(
                    *mirror.state.read().unwrap_or_else(|e| e.into_inner()),
                    MirrorState::Ready(_)
                );
                if ready {
                    let (query, filter) = (query.to_vec(), filter.clone());
                    // A scan of 100k vectors is milliseconds of CPU: off the async threads.
                    return tokio::task::spawn_blocking(move || {
                        match &*mirror.state.read().unwrap_or_else(|e| e.into_inner()) {
                            MirrorState::Ready(flat) => flat.knn(&query, k, &filter),
                            _ => Vec::new(),
                        }
                    })
                    .await
                    .context("vector scan panicked");
                }
            }
            let table = checked(&space.table)?;
            let mut sql =
                format!("SELECT item_id, distance FROM {table} WHERE embedding MATCH ? AND k = ?");
            let mut texts: Vec<&str> = Vec::new();
            if let Some(project) = &filter.project {
                sql.push_str(" AND project = ?");
                texts.push(project);
            }
            if !filter.kinds.is_empty() {
                let marks = vec!["?"; filter.kinds.len()].join(", ");
                sql.push_str(&format!(" AND kind IN ({marks})"));
                texts.extend(filter.kinds.iter().map(String::as_str));
            }
            if !filter.sessions.is_empty() {
                let marks = vec!["?"; filter.sessions.len()].join(", ");
                sql.push_str(&format!(" AND session_id IN ({marks})"));
                texts.extend(filter.sessions.iter().map(String::as_str));
            }
            for session in &filter.exclude_sessions {
                sql.push_str(" AND session_id != ?");
                texts.push(session);
            }
            let mut numbers = Vec::new();
            if let Some(since) = filter.since_ms {
                sql.push_str(" AND occurred_at >= ?");
                numbers.push(since);
            }
            if let Some(until) = filter.until_ms {
                sql.push_str(" AND occurred_at < ?");
                numbers.push(until);
            }
            sql.push_str(" ORDER BY distance");
            let mut statement = sqlx::query_as::<_, (i64, f64)>(sqlx::AssertSqlSafe(sql))
                .bind(models::to_bytes(query))
                .bind(k as i64);
            for text in texts {
                statement = statement.bind(text);
            }
            for number in numbers {
                statement = statement.bind(number);
            }
            let rows = statement
                .fetch_all(&self.pool)
                .await
                .context("vector search")?;
            // For unit vectors |a - b|² = 2 - 2·cos(a, b).
            Ok(rows
                .into_iter()
                .map(|(id, distance)| (id, (1.0 - distance * distance / 2.0) as f32))
                .collect())
        })
    }

    fn delete<'a>(&'a self, space: &'a Space, ids: &'a [i64]) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let sql = format!("DELETE FROM {} WHERE item_id = ?", checked(&space.table)?);
            let mut tx = store::begin_write(&self.pool).await?;
            for id in ids {
                sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            if let Some(mirror) = self.mirror(space) {
                mirror.apply(Change::Delete(ids.to_vec()));
            }
            Ok(())
        })
    }

    /// Waits until the in-memory copy is loaded (or failed to load); searches before then are
    /// answered by `vec0`, correctly but slower.
    fn loaded<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(mirror) = self.mirror(space) else {
                return;
            };
            let mut ready = mirror.ready.subscribe();
            let _ = ready.wait_for(|r| *r).await;
        })
    }

    fn drop_space<'a>(&'a self, space: &'a Space) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let sql = format!("DROP TABLE IF EXISTS {}", checked(&space.table)?);
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&self.pool)
                .await?;
            let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
            mirrors.remove(&space.table);
            Ok(())
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        models::normalise(v.to_vec())
    }

    #[tokio::test]
    async fn sqlite_vec_orders_by_cosine_and_filters_inside_the_search() {
        let dir = tempfile::tempdir().unwrap();
        let store = store::Store::open(&dir.path().join("m.db")).await.unwrap();
        let index = SqliteVec::new(store.pool().clone());
        let space = Space {
            model: "test".into(),
            dim: 3,
            table: "vec_test".into(),
        };
        round_trip(&index, &space, false).await;
        round_trip(
            &SqliteVec::without_memory(store.pool().clone()),
            &space,
            false,
        )
        .await;
    }

    #[tokio::test]
    async fn the_memory_copy_loads_from_the_table_and_answers_as_vec0_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = store::Store::open(&dir.path().join("m.db")).await.unwrap();
        let space = Space {
            model: "test".into(),
            dim: 8,
            table: "vec_load".into(),
        };
        let direct = SqliteVec::without_memory(store.pool().clone());
        direct.ensure(&space).await.unwrap();
        let mut state = 11u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let points: Vec<Point> = (0..300)
            .map(|id| Point {
                id,
                vector: unit(&(0..8).map(|_| next()).collect::<Vec<_>>()),
                project: ["a", "b", "c"][id as usize % 3].into(),
                kind: "tool".into(),
                session_id: format!("s{}", id % 10),
                occurred_at: id,
            })
            .collect();
        direct.upsert(&space, &points).await.unwrap();
        // Half the vectors have their memory item, whose fields the load reads; the others
        // (items gone since) keep the fields `vec0` holds.
        for point in points.iter().filter(|p| p.id % 2 == 0) {
            sqlx::query(
                "INSERT INTO memory_items (id, source, source_id, kind, session_id, project,
                     title, text, seq, text_hash, occurred_at, indexed_at)
                 VALUES (?, 'test', ?, ?, ?, ?, '', '', 1, '', ?, 0)",
            )
            .bind(point.id)
            .bind(point.id)
            .bind(&point.kind)
            .bind(&point.session_id)
            .bind(&point.project)
            .bind(point.occurred_at)
            .execute(store.pool())
            .await
            .unwrap();
        }

        // A new index over the same store loads what is there, then keeps up with changes.
        let memory = SqliteVec::new(store.pool().clone());
        memory.ensure(&space).await.unwrap();
        memory.loaded(&space).await;
        let loaded = memory.mirror(&space).unwrap();
        assert!(matches!(
            &*loaded.state.read().unwrap(),
            MirrorState::Ready(flat) if flat.len() == 300
        ));
        memory.delete(&space, &[0, 1, 2]).await.unwrap();
        for (i, query) in points.iter().take(20).enumerate() {
            let filter = VectorFilter {
                project: (i % 2 == 0).then(|| "b".to_owned()),
                ..VectorFilter::default()
            };
            let want = direct
                .knn(&space, &query.vector, 10, &filter)
                .await
                .unwrap();
            let got = memory
                .knn(&space, &query.vector, 10, &filter)
                .await
                .unwrap();
            let ids = |hits: &[(i64, f32)]| hits.iter().map(|h| h.0).collect::<Vec<_>>();
            assert_eq!(ids(&got)[0], ids(&want)[0], "best match differs");
            let shared = ids(&got)
                .iter()
                .filter(|id| ids(&want).contains(id))
                .count();
            assert!(shared >= 9, "{:?} against {:?}", ids(&got), ids(&want));
            for ((_, g), (_, w)) in got.iter().zip(&want) {
                assert!((g - w).abs() < 0.02, "cosine {g} against {w}");
            }
        }
        memory.drop_space(&space).await.unwrap();
        assert!(memory.mirror(&space).is_none());
    }

    /// The behaviour every backend must show: idempotent creation, cosine order, filters inside
    /// the search, replacing upserts, deletes and drops, and scoring given points when the index
    /// `scores` them (or says it does by answering). The Qdrant test runs it too.
    pub(crate) async fn round_trip(index: &dyn VectorIndex, space: &Space, scores: bool) {
        let space = space.clone();
        index.ensure(&space).await.unwrap();
        index.ensure(&space).await.unwrap();
        let point = |id, v: &[f32], project: &str, kind: &str, at| Point {
            id,
            vector: unit(v),
            project: project.into(),
            kind: kind.into(),
            session_id: format!("s{id}"),
            occurred_at: at,
        };
        index
            .upsert(
                &space,
                &[
                    point(1, &[1.0, 0.0, 0.0], "a", "prompt", 10),
                    point(2, &[0.9, 0.1, 0.0], "b", "tool", 20),
                    point(3, &[0.0, 1.0, 0.0], "a", "tool", 30),
                ],
            )
            .await
            .unwrap();
        let query = unit(&[1.0, 0.0, 0.0]);
        let all = index
            .knn(&space, &query, 10, &VectorFilter::default())
            .await
            .unwrap();
        assert_eq!(all.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2, 3]);
        assert!((all[0].1 - 1.0).abs() < 1e-5, "{all:?}");
        assert!(all[2].1.abs() < 1e-5, "{all:?}");
        // Given points are scored as the search scores them, and an id the index does not hold
        // is left out.
        let mut scored = index.cosines(&space, &query, &[3, 1, 99, 2]).await.unwrap();
        if scores || !scored.is_empty() {
            scored.sort_by_key(|h| h.0);
            assert_eq!(scored.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2, 3]);
            for (got, want) in scored.iter().zip([all[0], all[1], all[2]]) {
                assert!((got.1 - want.1).abs() < 0.02, "{scored:?} against {all:?}");
            }
        }
        let filtered = index
            .knn(
                &space,
                &query,
                10,
                &VectorFilter {
                    project: Some("a".into()),
                    kinds: vec!["tool".into()],
                    ..VectorFilter::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(filtered.iter().map(|h| h.0).collect::<Vec<_>>(), [3]);
        let recent = index
            .knn(
                &space,
                &query,
                10,
                &VectorFilter {
                    since_ms: Some(15),
                    exclude_sessions: vec!["s3".into()],
                    ..VectorFilter::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(recent.iter().map(|h| h.0).collect::<Vec<_>>(), [2]);
        // Each remaining filter alone, and a time window closed at both ends (its end is
        // excluded).
        for (filter, want) in [
            (
                VectorFilter {
                    sessions: vec!["s1".into(), "s3".into()],
                    ..VectorFilter::default()
                },
                vec![1, 3],
            ),
            (
                VectorFilter {
                    until_ms: Some(20),
                    ..VectorFilter::default()
                },
                vec![1],
            ),
            (
                VectorFilter {
                    since_ms: Some(10),
                    until_ms: Some(30),
                    ..VectorFilter::default()
                },
                vec![1, 2],
            ),
            (
                VectorFilter {
                    kinds: vec!["prompt".into(), "tool".into()],
                    project: Some("b".into()),
                    ..VectorFilter::default()
                },
                vec![2],
            ),
        ] {
            let hits = index.knn(&space, &query, 10, &filter).await.unwrap();
            assert_eq!(
                hits.iter().map(|h| h.0).collect::<Vec<_>>(),
                want,
                "{filter:?}"
            );
        }
        // Upserting an id replaces its vector.
        index
            .upsert(&space, &[point(1, &[0.0, 0.0, 1.0], "a", "prompt", 10)])
            .await
            .unwrap();
        let again = index
            .knn(&space, &query, 1, &VectorFilter::default())
            .await
            .unwrap();
        assert_eq!(again[0].0, 2);
        index.delete(&space, &[2]).await.unwrap();
        let after = index
            .knn(&space, &query, 10, &VectorFilter::default())
            .await
            .unwrap();
        assert_eq!(after.len(), 2);
        index.drop_space(&space).await.unwrap();
    }
}
