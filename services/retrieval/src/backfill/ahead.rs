//! Static vectors ahead of the model: when the model has a long backlog (an import of months of
//! history), the items it has not reached yet get a vector from the static table distilled from
//! the same model ([`StaticModel`]), hundreds of times cheaper, so they are searchable by
//! meaning within minutes instead of days. The model fills in behind: each item it embeds
//! leaves this tier, and search prefers the model's vector wherever one exists.
//!
//! The tier lives in memory only, as an eight-bit [`Flat`] copy of the items above the model's
//! progress, and is rebuilt at start (the table embeds thousands of items a second): it needs
//! no table of its own, and the store never holds two kinds of vector for one item. It starts
//! only when the model's backlog reaches `after` items, so everyday capture, which the model
//! keeps up with, never loads the table; once started it also covers what arrives meanwhile,
//! until the model has caught up.

use crate::models::LocalModel;
use crate::static_model::{StaticModel, Variant};
use crate::vector::VectorFilter;
use crate::vector::flat::Flat;
use anyhow::Context as _;
use sqlx::SqlitePool;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OnceCell};

/// Items read and embedded per step: the table is cheap, so the batch is sized for SQLite.
const BATCH: i64 = 1_024;

/// How the distilled table's token vectors are combined. Chosen on LoCoMo conversations 0–2
/// (`MNEME_BENCH_EMBED_SPLIT=dev MNEME_BENCH_EMBED_VARIANTS=1 mneme-bench embed`): centred with
/// Zipf weights has the best vector-only recall (R@5/R@10 29.6/39.8 against 27.8/34.5 plain,
/// 29.2/37.8 Zipf alone, 27.8/35.1 centred alone), and its hybrid recall (73.5/82.6) is within
/// half a point of every other variant's.
pub const VARIANT: Variant = Variant {
    centre: true,
    zipf: true,
};

/// Static cosines sit higher and closer together than the model's (every text shares part of
/// the table's direction), and where they sit moves with the kind of text (conversation or
/// tool output) more than their order does. So a static cosine is read relative to the query's
/// own cosines with the tier (how many spreads above their mean it lies, over a sample of the
/// tier) and put on the model's scale: `MODEL_MEAN + MODEL_SPREAD × z`. The constants were
/// measured on LoCoMo conversations 0–2 by `mneme-bench embed`: over 495 questions, an
/// unrelated turn's model cosine averages 0.266 with a spread of 0.093, and the 633 evidence
/// turns lie 2.14 spreads above that by the model and 1.73 by the static table, so one static
/// spread is worth 0.093 × 2.14 / 1.73 = 0.116 of the model's cosine. Relevance thresholds and
/// fusion then read both kinds alike.
const MODEL_MEAN: f32 = 0.266;
const MODEL_SPREAD: f32 = 0.116;

/// Tier items a query's cosines are sampled over, for their mean and spread.
const SAMPLE: usize = 1_024;

/// Where a query's static cosines sit over the tier: their mean and spread.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    pub mean: f32,
    pub spread: f32,
}

impl Level {
    /// A raw static cosine on the model's scale.
    pub fn calibrate(&self, raw: f32) -> f32 {
        (MODEL_MEAN + MODEL_SPREAD * (raw - self.mean) / self.spread).clamp(-1.0, 1.0)
    }
}

/// A query as the tier reads it.
pub struct Query {
    vector: Vec<f32>,
    level: Level,
}

/// The static tier of one vector space.
pub struct Ahead {
    source: Arc<LocalModel>,
    cache_dir: PathBuf,
    /// The model's backlog, in items, from which the tier starts.
    after: i64,
    variant: Variant,
    table: OnceCell<Arc<StaticModel>>,
    flat: RwLock<Flat>,
    /// The highest item id that has a static vector (or was passed over).
    upto: AtomicI64,
    /// The model's progress the tier was last trimmed to.
    trimmed_upto: AtomicI64,
    /// Woken when new items are indexed.
    pub wake: Notify,
}

impl Ahead {
    /// A tier for the space of `source`, its table cached in `cache_dir`, starting once the
    /// model's backlog reaches `after` items.
    pub fn new(source: Arc<LocalModel>, cache_dir: PathBuf, after: i64) -> Ahead {
        let dim = source.dim();
        Ahead {
            source,
            cache_dir,
            after: after.max(1),
            variant: VARIANT,
            table: OnceCell::new(),
            flat: RwLock::new(Flat::new(dim)),
            upto: AtomicI64::new(0),
            trimmed_upto: AtomicI64::new(0),
            wake: Notify::new(),
        }
    }

    /// The same tier combining token vectors another way, for measuring the choice.
    pub fn with_variant(mut self, variant: Variant) -> Ahead {
        self.variant = variant;
        self
    }

    /// Items holding a static vector.
    pub fn len(&self) -> usize {
        self.flat.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `query`'s cosines with the tier sit, from an evenly spread sample of it.
    fn level(flat: &Flat, query: &[f32]) -> Level {
        let ids = flat.ids();
        let step = (ids.len() / SAMPLE).max(1);
        let sample: Vec<i64> = ids.iter().step_by(step).copied().collect();
        let cosines: Vec<f32> = flat
            .cosines(query, &sample)
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        let n = cosines.len().max(1) as f32;
        let mean = cosines.iter().sum::<f32>() / n;
        let variance = cosines.iter().map(|c| (c - mean).powi(2)).sum::<f32>() / n;
        // A tier of one or two items has no spread to speak of; a floor keeps the scale finite.
        Level {
            mean,
            spread: variance.sqrt().max(0.02),
        }
    }

    /// A query's static vector and where its cosines with the tier sit, when the tier holds
    /// anything to compare it with. Search reads the nearest items and the other candidates'
    /// cosines through one query, so both are calibrated alike.
    pub fn query(&self, text: &str) -> Option<Query> {
        if self.is_empty() {
            return None;
        }
        let vector = self.table.get()?.embed_one(text).ok()?;
        let level = Ahead::level(
            &self.flat.read().unwrap_or_else(|e| e.into_inner()),
            &vector,
        );
        Some(Query { vector, level })
    }

    /// Raw static cosines of `query` with `ids` held here.
    pub fn raw_cosines(&self, query: &Query, ids: &[i64]) -> Vec<(i64, f32)> {
        let flat = self.flat.read().unwrap_or_else(|e| e.into_inner());
        flat.cosines(&query.vector, ids)
    }

    /// The `k` items most similar to `query` that pass `filter`, as (id, calibrated cosine).
    pub fn knn(&self, query: &Query, k: usize, filter: &VectorFilter) -> Vec<(i64, f32)> {
        let flat = self.flat.read().unwrap_or_else(|e| e.into_inner());
        let mut hits = flat.knn(&query.vector, k, filter);
        hits.iter_mut()
            .for_each(|(_, c)| *c = query.level.calibrate(*c));
        hits
    }

    /// Calibrated cosines of `query` with the items of `ids` held here.
    pub fn cosines(&self, query: &Query, ids: &[i64]) -> Vec<(i64, f32)> {
        let mut known = self.raw_cosines(query, ids);
        known
            .iter_mut()
            .for_each(|(_, c)| *c = query.level.calibrate(*c));
        known
    }

    /// Forget these items (deleted, or replaced by a rewrite).
    pub fn delete(&self, ids: &[i64]) {
        let mut flat = self.flat.write().unwrap_or_else(|e| e.into_inner());
        for &id in ids {
            flat.delete(id);
        }
    }

    /// Drop what the model has embedded since the last trim: its own vectors rank those items
    /// now.
    pub fn trim(&self, model_upto: i64) {
        if self.trimmed_upto.swap(model_upto, Ordering::AcqRel) == model_upto {
            return;
        }
        // Found under the read lock, so searches wait only for the deletes.
        let done: Vec<i64> = {
            let flat = self.flat.read().unwrap_or_else(|e| e.into_inner());
            flat.ids()
                .iter()
                .copied()
                .filter(|&id| id <= model_upto)
                .collect()
        };
        self.delete(&done);
    }

    /// The table, loaded from the cache or distilled from the model the first time (a minute
    /// or two on two cores, once per model and cache directory).
    async fn table(&self) -> anyhow::Result<&Arc<StaticModel>> {
        self.table
            .get_or_try_init(|| async {
                let (source, dir) = (self.source.clone(), self.cache_dir.clone());
                let (mut table, distilled) =
                    tokio::task::spawn_blocking(move || StaticModel::for_model(&source, &dir))
                        .await
                        .context("loading the static table panicked")??;
                table.set_variant(self.variant);
                match distilled {
                    Some(took) => tracing::info!(
                        took_s = took.as_secs_f64(),
                        cache = %self.cache_dir.display(),
                        "distilled the static table that embeds a long backlog ahead of the model"
                    ),
                    None => {
                        tracing::info!(cache = %self.cache_dir.display(), "static table loaded")
                    }
                }
                anyhow::Ok(Arc::new(table))
            })
            .await
    }

    /// Load (or distil) the table now rather than at the first step.
    pub async fn load(&self) -> anyhow::Result<()> {
        self.table().await.map(|_| ())
    }

    /// Give the next batch of items above both the model's progress and this tier's a static
    /// vector; returns how many items it covered (0 when there is nothing to do).
    pub async fn step(&self, pool: &SqlitePool, model_upto: i64) -> anyhow::Result<usize> {
        self.trim(model_upto);
        let from = self.upto.load(Ordering::Acquire).max(model_upto);
        if self.is_empty() {
            // Idle: start only for a backlog the model would take long over.
            let (backlog,): (i64,) =
                sqlx::query_as("SELECT COUNT(*) FROM memory_items WHERE id > ?")
                    .bind(model_upto)
                    .fetch_one(pool)
                    .await?;
            if backlog < self.after {
                return Ok(0);
            }
        }
        let rows = super::EmbedRow::after(pool, from, BATCH).await?;
        let Some(last) = rows.last().map(|r| r.id) else {
            return Ok(0);
        };
        let table = self.table().await?.clone();
        let texts: Vec<String> = rows.iter().map(super::EmbedRow::text).collect();
        let vectors = tokio::task::spawn_blocking(move || table.embed(&texts))
            .await
            .context("static embedding panicked")??;
        {
            let mut flat = self.flat.write().unwrap_or_else(|e| e.into_inner());
            for (row, vector) in rows.iter().zip(vectors) {
                flat.upsert(&row.point(vector));
            }
        }
        self.upto.store(last, Ordering::Release);
        Ok(rows.len())
    }

    /// Fill ahead of the model until `shutdown`, resting `rest_ratio` times each batch's time
    /// after it, as the model's backfill does.
    pub async fn run(
        &self,
        pool: &SqlitePool,
        model_upto: &AtomicI64,
        rest_ratio: f64,
        shutdown: &tokio_util::sync::CancellationToken,
    ) {
        loop {
            let started = Instant::now();
            let pause = match self.step(pool, model_upto.load(Ordering::Acquire)).await {
                Ok(0) => None,
                Ok(_) => Some(started.elapsed().mul_f64(rest_ratio)),
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "static embedding failed; retrying");
                    Some(Duration::from_secs(30))
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.wake.notified(), if pause.is_none() => {}
                _ = tokio::time::sleep(pause.unwrap_or(Duration::from_secs(2))) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{NewItem, write_items};
    use crate::lexical::Lexical;

    fn item(n: i64, text: &str) -> NewItem {
        NewItem {
            source: "test",
            source_id: n,
            kind: "prompt".to_owned(),
            session_id: "s".to_owned(),
            project: "/p".to_owned(),
            agent: "claude-code".to_owned(),
            author: String::new(),
            tool_name: String::new(),
            title: String::new(),
            text: text.to_owned(),
            files: Vec::new(),
            concepts: Vec::new(),
            occurred_at: 1_000 + n,
            with_context: false,
        }
    }

    /// The tier starts only for a long backlog, covers what the model has not reached, gives
    /// way item by item as the model catches up, and forgets deleted items.
    #[tokio::test]
    async fn the_tier_covers_the_backlog_and_gives_way_to_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = store::Store::open(&dir.path().join("m.db")).await.unwrap();
        let pool = store.pool().clone();
        let lexical = Lexical::new();
        let mut items: Vec<NewItem> = (0..49)
            .map(|n| {
                item(
                    n,
                    &format!("bump the version of crate number {n} in the lockfile"),
                )
            })
            .collect();
        items.push(item(
            49,
            "the nightly snapshot of the postgres database failed because the disk was full",
        ));
        write_items(&pool, &lexical, &items[..5]).await.unwrap();
        let model_dir = std::env::var_os("MNEME_EMBED_MODEL_DIR")
            .map(PathBuf::from)
            .expect("MNEME_EMBED_MODEL_DIR names the embedding model's directory");
        let source = Arc::new(LocalModel::load(&model_dir).unwrap());
        // The cache the other tests and the bench share, so a run distils once.
        let cache =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mneme-static");
        let ahead = Ahead::new(source, cache, 10);

        assert_eq!(
            ahead.step(&pool, 0).await.unwrap(),
            0,
            "a short backlog waits"
        );
        assert!(ahead.is_empty() && ahead.query("anything").is_none());
        write_items(&pool, &lexical, &items[5..]).await.unwrap();
        assert_eq!(ahead.step(&pool, 0).await.unwrap(), 50);
        assert_eq!(ahead.step(&pool, 0).await.unwrap(), 0, "level");
        assert_eq!(ahead.len(), 50);

        let ids: Vec<i64> = sqlx::query_as::<_, (i64,)>("SELECT id FROM memory_items ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .map(|(id,)| id)
            .collect();
        let query = ahead.query("backup job ran out of storage space").unwrap();
        let best = ahead.knn(&query, 3, &VectorFilter::default());
        assert_eq!(best[0].0, ids[49], "{best:?}");

        // The model has reached the 30th item: the tier keeps only what lies beyond.
        ahead.step(&pool, ids[29]).await.unwrap();
        assert_eq!(ahead.len(), 20);
        let all = ahead.knn(&query, 50, &VectorFilter::default());
        assert!(all.iter().all(|(id, _)| *id > ids[29]), "{all:?}");
        ahead.delete(&[ids[49]]);
        assert_eq!(ahead.len(), 19);
        assert!(ahead.cosines(&query, &[ids[49]]).is_empty());

        // Once the model has caught up the tier is empty and stays idle.
        assert_eq!(ahead.step(&pool, ids[48]).await.unwrap(), 0);
        assert!(ahead.is_empty());
        store.close().await;
    }
}
