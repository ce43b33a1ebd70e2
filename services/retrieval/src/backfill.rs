//! Background embedding: keeps the active model's vector space level with the memory items.
//!
//! Items are embedded in id order, in batches, and each text is looked up in
//! `embedding_cache` first, so the same text is never embedded twice by one model. The space
//! records how far it has got (`embedded_upto`); when the configured model changes, a new space
//! fills up from zero while searches keep working (full-text covers what has no vector yet), and
//! once it has caught up the spaces of other models are dropped. When the local model has a
//! long backlog, static vectors fill in ahead of it ([`ahead`]).

pub mod ahead;

use crate::models::{self, Embedder};
use crate::vector::{self, Point, Space, VectorFilter, VectorIndex};
use sha2::Digest as _;
use sqlx::SqlitePool;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A memory item as the embedder reads it.
#[derive(sqlx::FromRow)]
struct EmbedRow {
    id: i64,
    title: String,
    text: String,
    context: String,
    text_hash: String,
    project: String,
    kind: String,
    session_id: String,
    occurred_at: i64,
}

impl EmbedRow {
    /// Up to `limit` items above the id `after`, in id order.
    async fn after(pool: &SqlitePool, after: i64, limit: i64) -> anyhow::Result<Vec<EmbedRow>> {
        Ok(sqlx::query_as(
            "SELECT id, title, text, context, text_hash, project, kind, session_id, occurred_at
             FROM memory_items WHERE id > ? ORDER BY id LIMIT ?",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(pool)
        .await?)
    }

    /// What the embedder reads of the item.
    fn text(&self) -> String {
        crate::index::NewItem::embed_text(&self.title, &self.text, &self.context)
    }

    /// Each piece the embedder reads of the item, up to `extra` beyond the first, with the
    /// key its vector is cached under: the item's text hash for the first piece, as before
    /// long items were read in pieces, and that hash with the piece's number after it for the
    /// others (a piece is fixed by the item's text and the model, as the first is; the cache
    /// is the model's).
    ///
    /// What a person wrote (a prompt, a saved memory) also gets, in the pieces a long text
    /// leaves free, its first-person statements each on its own ([`crate::index::statements`]),
    /// under keys of their own, so a piece's key never means two texts.
    fn pieces(&self, extra: usize, embedder: &Embedder) -> Vec<(String, String)> {
        let mut pieces = vec![(self.text_hash.clone(), self.text())];
        let reach = |text: &str, tokens: usize| embedder.reach(text, tokens);
        let more = crate::index::NewItem::embed_chunks(
            &self.title,
            &self.text,
            &self.context,
            extra,
            &reach,
        );
        for (n, text) in more.into_iter().enumerate() {
            pieces.push((piece_key(&self.text_hash, n + 1), text));
        }
        if has_statements(&self.kind) {
            // Three statements at most: as many as a short prompt had room for when an item
            // had four pieces, which is what was measured; more were not.
            let room = (extra + 1).saturating_sub(pieces.len()).min(MAX_STATEMENTS);
            for text in crate::index::statements(&self.text, room) {
                let n = pieces.len();
                pieces.push((statement_key(&self.text_hash, n), text));
            }
        }
        pieces
    }

    /// The item's vector with the fields searches filter on.
    fn point(&self, vector: Vec<f32>) -> Point {
        Point {
            id: self.id,
            vector,
            project: self.project.clone(),
            kind: self.kind.clone(),
            session_id: self.session_id.clone(),
            occurred_at: self.occurred_at,
        }
    }
}

/// Statements of what a person wrote embedded on their own, at most.
const MAX_STATEMENTS: usize = 3;

/// Items embedded per model call.
pub const BATCH: i64 = 32;

/// The active vector space and how far it has been filled.
pub struct Vectors {
    pub embedder: Embedder,
    pub index: Arc<dyn VectorIndex>,
    pub space: Space,
    /// The highest memory item id that has a vector (or was skipped).
    pub embedded_upto: AtomicI64,
    /// Woken when new items are indexed.
    pub wake: Notify,
    /// Recent query vectors: agents and people repeat queries, and a hit costs nothing.
    queries: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    /// Pause after each background batch, as a multiple of the time it took.
    pub rest_ratio: f64,
    /// Static vectors for the items the model has not reached yet, with a local model.
    pub ahead: Option<ahead::Ahead>,
    /// Pieces of a long item embedded beyond its first (`MNEME_EMBED_CHUNKS` less one).
    pub extra_pieces: usize,
    /// Pieces of a tool's output embedded beyond its first (`MNEME_EMBED_TOOL_CHUNKS` less
    /// one), within `extra_pieces`.
    pub extra_tool_pieces: usize,
    /// Why the model or the vector index failed last, until they work again: health says it.
    trouble: std::sync::Mutex<Option<String>>,
    /// Items up to the model's progress, as last counted: (progress, items, deletes then).
    counted: std::sync::Mutex<Option<(i64, i64, u64)>>,
    /// Deletes so far, which make the count start again.
    deletes: std::sync::atomic::AtomicU64,
    /// Whether the index has its collection or table for this space. An index that was down
    /// when the service started is set up by the background loop once it answers, so search
    /// turns hybrid then rather than at the next restart.
    ensured: std::sync::atomic::AtomicBool,
}

/// Pending vector deletes sent to the index in one request.
const DELETE_BATCH: i64 = 1_000;

/// Query vectors kept before the cache is cleared.
const QUERY_CACHE: usize = 1_024;

/// The vector table name of a model: derived from a hash so any model id is safe in SQL.
pub fn table_name(model: &str) -> String {
    let digest = sha2::Sha256::digest(model.as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("vec_{hex}")
}

/// The cache key of piece `n` (from 1) of the item whose text hashes to `hash`. Pieces were
/// windows of fixed length (`{hash}#{n}`) before they started where the model stopped reading;
/// a new form keeps a key from meaning two texts.
fn piece_key(hash: &str, n: usize) -> String {
    format!("{hash}~{n}")
}

/// Whether items of `kind` are what a person wrote (a prompt, a saved memory), whose
/// first-person statements are embedded as pieces of their own.
fn has_statements(kind: &str) -> bool {
    matches!(kind, "prompt" | "memory")
}

/// The cache key of piece `n` when it is a statement of the item's rather than a window of
/// its text. Its number is its place among the item's pieces, which depends on how many
/// windows the model needs, so it has a form of its own since pieces start where the model
/// stopped reading (it was `{hash}@{n}`).
fn statement_key(hash: &str, n: usize) -> String {
    format!("{hash}~s{n}")
}

/// Write down the deletes the index owes for these items (`owed`), or cross them off once it
/// has done them.
async fn owe_deletes(pool: &SqlitePool, ids: &[i64], owed: bool) -> anyhow::Result<()> {
    let sql = if owed {
        "INSERT OR IGNORE INTO vector_deletes (item_id) VALUES (?)"
    } else {
        "DELETE FROM vector_deletes WHERE item_id = ?"
    };
    let mut tx = store::begin_write(pool).await?;
    for id in ids {
        sqlx::query(sql).bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

impl Vectors {
    /// Register the embedder's space (creating its table) and read how far it got.
    pub async fn open(
        pool: &SqlitePool,
        embedder: Embedder,
        index: Arc<dyn VectorIndex>,
    ) -> anyhow::Result<Vectors> {
        let model = embedder.model_id().to_owned();
        let space = Space {
            table: table_name(&model),
            dim: embedder.dim(),
            model,
        };
        // An index that does not answer yet (Qdrant still starting, or stopped) must not turn
        // semantic search off until a restart: search answers full-text meanwhile, health
        // says why, and the background loop sets the index up once it answers.
        let (ensured, trouble) = match index.ensure(&space).await {
            Ok(()) => (true, None),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), index = index.name(), "the vector index is not answering; full-text only until it does");
                (false, Some(format!("{error:#}")))
            }
        };
        let now = common::time::now_ms();
        sqlx::query(
            "INSERT INTO vector_spaces (model, dim, table_name, created_at, last_used_at)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (model) DO UPDATE SET last_used_at = excluded.last_used_at",
        )
        .bind(&space.model)
        .bind(space.dim as i64)
        .bind(&space.table)
        .bind(now)
        .bind(now)
        .execute(pool)
        .await?;
        let (upto,): (i64,) =
            sqlx::query_as("SELECT embedded_upto FROM vector_spaces WHERE model = ?")
                .bind(&space.model)
                .fetch_one(pool)
                .await?;
        Ok(Vectors {
            embedder,
            index,
            space,
            embedded_upto: AtomicI64::new(upto),
            wake: Notify::new(),
            queries: Default::default(),
            rest_ratio: 1.0,
            ahead: None,
            extra_pieces: crate::index::MAX_EXTRA_CHUNKS,
            extra_tool_pieces: crate::index::TOOL_EXTRA_CHUNKS,
            trouble: std::sync::Mutex::new(trouble),
            counted: Default::default(),
            deletes: Default::default(),
            ensured: std::sync::atomic::AtomicBool::new(ensured),
        })
    }

    /// Record that the model or the index failed (`Some`) or worked again (`None`).
    pub fn set_trouble(&self, trouble: Option<String>) {
        *self.trouble.lock().unwrap_or_else(|e| e.into_inner()) = trouble;
    }

    /// The last failure of the model or the index, while it lasts.
    pub fn trouble(&self) -> Option<String> {
        self.trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Say that new items were indexed, to the backfill and the static tier.
    pub fn notify(&self) {
        self.wake.notify_one();
        if let Some(ahead) = &self.ahead {
            ahead.wake.notify_one();
        }
    }

    /// Remove the vectors of these items (deleted, or replaced by a rewrite).
    ///
    /// The ids are written down first and crossed off once the index has deleted them, so an
    /// index that fails now (or a crash in between) leaves them for the background loop to
    /// retry: a forgotten session's vectors never stay behind. Fails only when the ids could
    /// not be written down.
    pub async fn delete(&self, pool: &SqlitePool, ids: &[i64]) -> anyhow::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.deletes.fetch_add(1, Ordering::AcqRel);
        if let Some(ahead) = &self.ahead {
            ahead.delete(ids);
        }
        owe_deletes(pool, ids, true).await?;
        match self.index.delete(&self.space, &self.points_of(ids)).await {
            Ok(()) => owe_deletes(pool, ids, false).await,
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), vectors = ids.len(), "deleting vectors failed; retrying in the background");
                self.set_trouble(Some(format!("{error:#}")));
                Ok(())
            }
        }
    }

    /// Every point id the items may have: one per piece. Deleting one that was never written
    /// is a no-op in both indexes, and the pieces an item has depend on a setting that may
    /// have changed since it was embedded.
    fn points_of(&self, items: &[i64]) -> Vec<i64> {
        items
            .iter()
            .flat_map(|&item| {
                (0..=crate::index::MAX_EXTRA_CHUNKS).map(move |n| vector::point_id(item, n))
            })
            .collect()
    }

    /// Set the index up if it was not answering before, and send it the deletes still
    /// pending; returns how many requests it answered (none when there was nothing to do).
    async fn catch_up_index(&self, pool: &SqlitePool) -> anyhow::Result<usize> {
        let mut answered = 0;
        if !self.ensured.load(Ordering::Acquire) {
            self.index.ensure(&self.space).await?;
            self.ensured.store(true, Ordering::Release);
            tracing::info!(index = self.index.name(), "the vector index answers again");
            answered += 1;
        }
        loop {
            let pending: Vec<(i64,)> =
                sqlx::query_as("SELECT item_id FROM vector_deletes ORDER BY item_id LIMIT ?")
                    .bind(DELETE_BATCH)
                    .fetch_all(pool)
                    .await?;
            if pending.is_empty() {
                return Ok(answered);
            }
            let ids: Vec<i64> = pending.into_iter().map(|(id,)| id).collect();
            self.index
                .delete(&self.space, &self.points_of(&ids))
                .await?;
            owe_deletes(pool, &ids, false).await?;
            answered += 1;
        }
    }

    /// Fill static vectors ahead of the model until `shutdown` (nothing without a tier).
    pub async fn run_ahead(self: Arc<Self>, pool: SqlitePool, shutdown: CancellationToken) {
        if let Some(ahead) = &self.ahead {
            ahead
                .run(&pool, &self.embedded_upto, self.rest_ratio, &shutdown)
                .await;
        }
    }

    /// Embed one query text, through the cache.
    pub async fn embed_query(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        if let Some(vector) = self.cached_query(text) {
            return Ok(vector);
        }
        let vector = self
            .embedder
            .embed(vec![text.to_owned()])
            .await?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the model returned no vector"))?;
        let mut cache = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= QUERY_CACHE {
            cache.clear();
        }
        cache.insert(text.to_owned(), vector.clone());
        Ok(vector)
    }

    fn cached_query(&self, text: &str) -> Option<Vec<f32>> {
        let cache = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(text).cloned()
    }

    /// Embed the next batch of items; returns how many items it covered (0 when level).
    pub async fn step(&self, pool: &SqlitePool) -> anyhow::Result<usize> {
        let after = self.embedded_upto.load(Ordering::Acquire);
        let rows = EmbedRow::after(pool, after, BATCH).await?;
        let Some(last) = rows.last().map(|r| r.id) else {
            return Ok(0);
        };
        self.embed_rows(pool, &rows).await?;
        sqlx::query("UPDATE vector_spaces SET embedded_upto = ? WHERE model = ?")
            .bind(last)
            .bind(&self.space.model)
            .execute(pool)
            .await?;
        self.embedded_upto.store(last, Ordering::Release);
        Ok(rows.len())
    }

    /// Embed these items now, ahead of the backlog: what mneme distilled (patterns, workflows
    /// among them) is worth finding by meaning as soon as it exists, and there are few of them.
    /// The backfill reaches them later too and finds their vectors in the cache.
    pub async fn embed_items(&self, pool: &SqlitePool, ids: &[i64]) -> anyhow::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let marks = vec!["?"; ids.len()].join(", ");
        let sql = format!(
            "SELECT id, title, text, context, text_hash, project, kind, session_id, occurred_at
             FROM memory_items WHERE id IN ({marks})"
        );
        let mut query = sqlx::query_as::<_, EmbedRow>(sqlx::AssertSqlSafe(sql));
        for id in ids {
            query = query.bind(id);
        }
        let rows = query.fetch_all(pool).await?;
        self.embed_rows(pool, &rows).await
    }

    /// Vectors for these rows, piece by piece, from the cache or the model (each text once),
    /// written to the cache and the index.
    async fn embed_rows(&self, pool: &SqlitePool, rows: &[EmbedRow]) -> anyhow::Result<()> {
        // Every piece of every row: (row, piece number, cache key, text).
        let pieces: Vec<(usize, usize, String, String)> = rows
            .iter()
            .enumerate()
            .flat_map(|(r, row)| {
                let extra = if row.kind == "tool" {
                    self.extra_tool_pieces.min(self.extra_pieces)
                } else {
                    self.extra_pieces
                };
                row.pieces(extra, &self.embedder)
                    .into_iter()
                    .enumerate()
                    .map(move |(n, (key, text))| (r, n, key, text))
            })
            .collect();
        let keys: Vec<&str> = pieces.iter().map(|(_, _, key, _)| key.as_str()).collect();
        let mut vectors = self.cached_vectors(pool, &keys).await?;
        // One text stored twice in a batch is embedded once.
        let mut missing: Vec<(&str, &str)> = Vec::new();
        for (_, _, key, text) in &pieces {
            if !vectors.contains_key(key) && !missing.iter().any(|(k, _)| k == key) {
                missing.push((key, text));
            }
        }
        if !missing.is_empty() {
            let texts = missing.iter().map(|(_, text)| (*text).to_owned()).collect();
            let fresh = self.embedder.embed(texts).await?;
            anyhow::ensure!(
                fresh.len() == missing.len(),
                "the model returned {} vectors for {} texts",
                fresh.len(),
                missing.len()
            );
            let mut tx = store::begin_write(pool).await?;
            for ((key, _), vector) in missing.iter().zip(fresh) {
                sqlx::query(
                    "INSERT OR IGNORE INTO embedding_cache (model, text_hash, vector)
                     VALUES (?, ?, ?)",
                )
                .bind(&self.space.model)
                .bind(*key)
                .bind(models::to_bytes(&vector))
                .execute(&mut *tx)
                .await?;
                vectors.insert((*key).to_owned(), vector);
            }
            tx.commit().await?;
        }
        let points: Vec<Point> = pieces
            .iter()
            .filter_map(|(r, n, key, _)| {
                let mut point = rows[*r].point(vectors.get(key)?.clone());
                point.id = vector::point_id(point.id, *n);
                Some(point)
            })
            .collect();
        self.index.upsert(&self.space, &points).await
    }

    /// The `k` items nearest `query` that pass `filter`, as (item id, cosine of its nearest
    /// piece), best first.
    pub async fn knn(
        &self,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> anyhow::Result<Vec<(i64, f32)>> {
        // Pieces of one item may stand side by side near the query: ask for more, keep each
        // item's best. Most items are one piece, so half again is plenty.
        let asked = if self.extra_pieces == 0 { k } else { k + k / 2 };
        let points = self.index.knn(&self.space, query, asked, filter).await?;
        let mut seen = HashSet::new();
        Ok(points
            .into_iter()
            .map(|(point, cosine)| (vector::item_of(point), cosine))
            .filter(|(item, _)| seen.insert(*item))
            .take(k)
            .collect())
    }

    /// The cosine of each of `items` with `query` (its nearest piece's) as the index can tell
    /// without the caller reading vectors (from its in-memory copy, or scored on Qdrant's
    /// server); items it cannot score are left out.
    pub async fn cosines(&self, query: &[f32], items: &[i64]) -> anyhow::Result<Vec<(i64, f32)>> {
        let points: Vec<i64> = items
            .iter()
            .flat_map(|&item| (0..=self.extra_pieces).map(move |n| vector::point_id(item, n)))
            .collect();
        let mut best: HashMap<i64, f32> = HashMap::new();
        for (point, cosine) in self.index.cosines(&self.space, query, &points).await? {
            let e = best.entry(vector::item_of(point)).or_insert(cosine);
            *e = e.max(cosine);
        }
        Ok(best.into_iter().collect())
    }

    /// The cosine of each item (by its id, `text_hash` and kind) with `query` from the vectors
    /// cached for its pieces, its nearest piece's; items with nothing cached are left out.
    pub async fn cached_cosines(
        &self,
        pool: &SqlitePool,
        query: &[f32],
        items: &[(i64, &str, &str)],
    ) -> anyhow::Result<HashMap<i64, f32>> {
        let (nearest, _) = self.nearest_keys(pool, query, items).await?;
        Ok(nearest
            .into_iter()
            .map(|(id, (cosine, _))| (id, cosine))
            .collect())
    }

    /// For each item (by its id, `text_hash` and kind), the cached vector of its piece nearest
    /// `query`, with that piece's cosine; items with nothing cached are left out.
    pub async fn nearest_pieces(
        &self,
        pool: &SqlitePool,
        query: &[f32],
        items: &[(i64, &str, &str)],
    ) -> anyhow::Result<HashMap<i64, (f32, Vec<f32>)>> {
        let (nearest, vectors) = self.nearest_keys(pool, query, items).await?;
        Ok(nearest
            .into_iter()
            .filter_map(|(id, (cosine, key))| Some((id, (cosine, vectors.get(&key)?.clone()))))
            .collect())
    }

    /// For each item, the cosine with `query` of its nearest cached piece and that piece's
    /// key, with the cached vectors read: a search's candidates need only the cosines.
    async fn nearest_keys(
        &self,
        pool: &SqlitePool,
        query: &[f32],
        items: &[(i64, &str, &str)],
    ) -> anyhow::Result<(HashMap<i64, (f32, String)>, HashMap<String, Vec<f32>>)> {
        // Items with the same text share their cached vectors.
        let mut keys: HashMap<String, Vec<i64>> = HashMap::new();
        for (id, hash, kind) in items {
            keys.entry((*hash).to_owned()).or_default().push(*id);
            for n in 1..=self.extra_pieces {
                keys.entry(piece_key(hash, n)).or_default().push(*id);
                if has_statements(kind) {
                    keys.entry(statement_key(hash, n)).or_default().push(*id);
                }
            }
        }
        let wanted: Vec<&str> = keys.keys().map(String::as_str).collect();
        let vectors = self.cached_vectors(pool, &wanted).await?;
        let mut best: HashMap<i64, (f32, String)> = HashMap::new();
        for (key, vector) in &vectors {
            let cosine = models::dot(query, vector);
            for &id in keys.get(key).into_iter().flatten() {
                match best.get(&id) {
                    Some((known, _)) if *known >= cosine => {}
                    _ => {
                        best.insert(id, (cosine, key.clone()));
                    }
                }
            }
        }
        Ok((best, vectors))
    }

    /// The vectors this model has cached under `keys` (text hashes, or piece keys), read a few
    /// hundred at a time; keys with nothing cached are left out.
    async fn cached_vectors(
        &self,
        pool: &SqlitePool,
        keys: &[&str],
    ) -> anyhow::Result<HashMap<String, Vec<f32>>> {
        let mut unique: Vec<&str> = keys.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let mut found = HashMap::new();
        for chunk in unique.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT text_hash, vector FROM embedding_cache
                 WHERE model = ? AND text_hash IN ({marks})"
            );
            let mut statement = sqlx::query_as::<_, (String, Vec<u8>)>(sqlx::AssertSqlSafe(sql))
                .bind(&self.space.model);
            for key in chunk {
                statement = statement.bind(*key);
            }
            for (key, bytes) in statement.fetch_all(pool).await? {
                found.insert(key, models::from_bytes(&bytes));
            }
        }
        Ok(found)
    }

    /// Embed until level, then wait for new items, until `shutdown`. Model errors are logged
    /// and retried with a pause; they never stop full-text search.
    pub async fn run(self: Arc<Self>, pool: SqlitePool, shutdown: CancellationToken) {
        let mut dropped_stale = false;
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            let started = std::time::Instant::now();
            let stepped = match self.catch_up_index(&pool).await {
                Ok(caught_up) => self.step(&pool).await.map(|n| n + caught_up),
                Err(error) => Err(error),
            };
            // Only a step that wrote to the index shows it works again: an idle round never
            // reaches it, and must not clear what a failed search reported.
            if matches!(stepped, Ok(n) if n > 0) {
                self.set_trouble(None);
            }
            match stepped {
                Ok(0) => {
                    if !dropped_stale {
                        dropped_stale = true;
                        if let Err(error) = self.drop_stale_spaces(&pool).await {
                            tracing::warn!(error = %format!("{error:#}"), "dropping stale vector spaces failed");
                        }
                    }
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
                Ok(_) => {
                    // Background embedding must not starve what agents wait for (hooks,
                    // ingest, queries): after each batch, rest as long as it took, so a
                    // backlog takes at most about half the machine.
                    let rest = started.elapsed().mul_f64(self.rest_ratio);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(rest) => {}
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "embedding failed; retrying");
                    self.set_trouble(Some(format!("{error:#}")));
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        }
    }

    /// Once this space has caught up, other models' spaces are no longer searched: drop their
    /// tables (their cached vectors stay, so switching back is cheap).
    async fn drop_stale_spaces(&self, pool: &SqlitePool) -> anyhow::Result<()> {
        let stale: Vec<(String, i64, String)> =
            sqlx::query_as("SELECT model, dim, table_name FROM vector_spaces WHERE model <> ?")
                .bind(&self.space.model)
                .fetch_all(pool)
                .await?;
        for (model, dim, table) in stale {
            let space = Space {
                model: model.clone(),
                dim: dim as usize,
                table,
            };
            self.index.drop_space(&space).await?;
            sqlx::query("DELETE FROM vector_spaces WHERE model = ?")
                .bind(&model)
                .execute(pool)
                .await?;
            tracing::info!(%model, "dropped the vector space of a model no longer in use");
        }
        Ok(())
    }

    /// Items with a vector of the model, items with a vector of either kind (the model's or a
    /// static one ahead of it), and all items, for status.
    ///
    /// Health asks every two seconds, and counting every item takes tens of milliseconds at a
    /// million: the items up to the model's progress are counted once and then only the range
    /// it advanced over (a delete starts the count again), and the rest is a range too.
    pub async fn progress(&self, pool: &SqlitePool) -> anyhow::Result<Progress> {
        let upto = self.embedded_upto.load(Ordering::Acquire);
        let deletes = self.deletes.load(Ordering::Acquire);
        let counted = *self.counted.lock().unwrap_or_else(|e| e.into_inner());
        let done = match counted {
            Some((at, done, seen)) if at <= upto && seen == deletes => {
                let (more,): (i64,) =
                    sqlx::query_as("SELECT COUNT(*) FROM memory_items WHERE id > ? AND id <= ?")
                        .bind(at)
                        .bind(upto)
                        .fetch_one(pool)
                        .await?;
                done + more
            }
            _ => {
                let (done,): (i64,) =
                    sqlx::query_as("SELECT COUNT(*) FROM memory_items WHERE id <= ?")
                        .bind(upto)
                        .fetch_one(pool)
                        .await?;
                done
            }
        };
        let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM memory_items WHERE id > ?")
            .bind(upto)
            .fetch_one(pool)
            .await?;
        // A delete that ran meanwhile is seen by its count at the next call.
        *self.counted.lock().unwrap_or_else(|e| e.into_inner()) = Some((upto, done, deletes));
        let total = done + left;
        let ahead = self.ahead.as_ref().map_or(0, |a| a.len() as i64);
        Ok(Progress {
            model: done,
            searchable: (done + ahead).min(total),
            total,
        })
    }
}

/// How far the vectors have got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Items with a vector of the model.
    pub model: i64,
    /// Items with a vector of either kind.
    pub searchable: i64,
    pub total: i64,
}
