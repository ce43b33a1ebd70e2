//! `mneme-bench embed`: embedding throughput on real coding-session items, and search quality
//! on LoCoMo's test split, for each embedding strategy (issue 18).
//!
//! - Items: the Claude Code transcripts are replayed as the hook would publish them, through
//!   NATS into ingest; retrieval's indexer turns the stored observations into memory items in
//!   process, and each item's text is what the backfill embeds (`NewItem::embed_text` of its
//!   title, text and context).
//! - Strategies: `minilm` (today's path: id order, batches of `backfill::BATCH`),
//!   `minilm-by-length` (the same items sorted by length before batching, so a batch pads
//!   little), `static` (the table distilled from the same MiniLM, whole texts, alone) and
//!   `default`: the service's static tier (`backfill::ahead`) filling from the store, reading
//!   the items from SQLite and resting after each batch at the default pacing, which is what a
//!   long backlog gets. MiniLM runs on an evenly spread sample of the items
//!   (`MNEME_BENCH_EMBED_SAMPLE`, 256 by default): at a few items a second, all of them would
//!   take hours.
//! - Quality: LoCoMo conversations 3–9 (the ranking defaults were chosen on 0–2, see
//!   `retrieval::search::Tuning`; `MNEME_BENCH_EMBED_SPLIT=dev` measures 0–2 instead, where
//!   the static tier's variant and calibration are chosen), fed through ingest and indexed as
//!   the `locomo` bench does, and every question with evidence searched in process,
//!   vector-only and hybrid, with the service's default ranking: by the static tier alone (the
//!   model's space empty, as before the model reaches the items; every variant with
//!   `MNEME_BENCH_EMBED_VARIANTS=1`), then by the model once it has embedded everything. The
//!   fit of the model's cosines to the static ones (the tier's calibration) is printed too.
//!
//! The distilled table is cached in `MNEME_STATIC_CACHE` (default `target/mneme-static`).

use crate::Bed;
use anyhow::Context as _;
use retrieval::backfill::Vectors;
use retrieval::backfill::ahead::Ahead;
use retrieval::models::{Embedder, LocalModel};
use retrieval::search::{Searcher, Tuning};
use retrieval::static_model::{StaticModel, Variant};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::retrieval_bench::{DEV_CONVERSATIONS, TEST_CONVERSATIONS};

fn env_path(name: &str, default: &str) -> PathBuf {
    std::env::var_os(name).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(default),
        PathBuf::from,
    )
}

pub async fn embed() -> anyhow::Result<()> {
    let model_dir = crate::retrieval_bench::retrieval_args()?
        .embed_model_dir
        .context("no model directory")?;
    let cache = env_path("MNEME_STATIC_CACHE", "../../target/mneme-static");
    let sample_size: usize = std::env::var("MNEME_BENCH_EMBED_SAMPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dev = std::env::var("MNEME_BENCH_EMBED_SPLIT").is_ok_and(|v| v == "dev");
    let (split, conversations) = if dev {
        ("dev", DEV_CONVERSATIONS)
    } else {
        ("test", TEST_CONVERSATIONS)
    };

    let minilm = Arc::new(LocalModel::load(&model_dir)?);
    let (source, cache_dir) = (minilm.clone(), cache.clone());
    let (table, distilled) =
        tokio::task::spawn_blocking(move || StaticModel::for_model(&source, &cache_dir)).await??;
    match distilled {
        Some(took) => println!(
            "static: distilled {} tokens × {} dims in {:.1}s, cached in {}",
            table.vocab(),
            table.dim(),
            took.as_secs_f64(),
            cache.display()
        ),
        None => println!("static: table loaded from {}", cache.display()),
    }

    // Throughput on real coding-session items.
    let sessions = SessionItems::store().await?;
    let items = sessions.texts().await?;
    let chars: Vec<usize> = items.iter().map(|t| t.chars().count()).collect();
    let sorted_chars = crate::sorted(chars.iter().map(|&c| c as f64).collect());
    println!(
        "items: {} from the transcripts, chars p50={:.0} p90={:.0} max={:.0}",
        items.len(),
        crate::percentile(&sorted_chars, 50.0),
        crate::percentile(&sorted_chars, 90.0),
        sorted_chars.last().copied().unwrap_or_default()
    );
    let step = (items.len() / sample_size.max(1)).max(1);
    let sample: Vec<String> = items
        .iter()
        .step_by(step)
        .take(sample_size)
        .cloned()
        .collect();
    let batch = retrieval::backfill::BATCH as usize;
    let mut throughput: Vec<(&str, f64)> = Vec::new();

    let rate = |n: usize, took: Duration| n as f64 / took.as_secs_f64();
    let minilm_rate = items_per_s(&sample, batch, |chunk| minilm.embed(chunk))?;
    println!(
        "minilm:           {} items {minilm_rate:.1} items/s (unpaced)",
        sample.len()
    );
    throughput.push(("minilm", minilm_rate));

    let mut by_length = sample.clone();
    by_length.sort_by_key(|t| t.len());
    let by_length_rate = items_per_s(&by_length, batch, |chunk| minilm.embed(chunk))?;
    println!(
        "minilm-by-length: {} items {by_length_rate:.1} items/s (unpaced)",
        sample.len()
    );
    throughput.push(("minilm-by-length", by_length_rate));

    let static_rate = items_per_s(&items, batch, |chunk| table.embed(chunk))?;
    println!(
        "static:           {} items {static_rate:.0} items/s (the table alone, unpaced)",
        items.len()
    );
    throughput.push(("static", static_rate));

    // The default: the service's static tier filling ahead of the model on the store, reading
    // the items from SQLite and resting after each batch as the service does.
    let rest_ratio = retrieval::RetrievalArgs::default().embed_rest_ratio;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let ahead = Ahead::new(minilm.clone(), cache.clone(), 1);
        ahead.load().await?;
        let started = Instant::now();
        let mut done = 0;
        loop {
            let batch_started = Instant::now();
            let n = ahead.step(sessions.store.pool(), 0).await?;
            if n == 0 {
                break;
            }
            done += n;
            tokio::time::sleep(batch_started.elapsed().mul_f64(rest_ratio)).await;
        }
        anyhow::ensure!(
            done == items.len(),
            "the tier covered {done} of {} items",
            items.len()
        );
        runs.push(rate(done, started.elapsed()));
    }
    let default_rate = crate::sorted(runs)[1];
    println!(
        "default:          {} items {default_rate:.0} items/s (static tier from the store, paced at rest ratio {rest_ratio}; median of 3)",
        items.len()
    );
    sessions.stop().await;

    // Quality on a LoCoMo split.
    let mut variants = vec![retrieval::backfill::ahead::VARIANT];
    if std::env::var_os("MNEME_BENCH_EMBED_VARIANTS").is_some() {
        for centre in [false, true] {
            for zipf in [false, true] {
                let variant = Variant { centre, zipf };
                if !variants.contains(&variant) {
                    variants.push(variant);
                }
            }
        }
    }
    let quality = locomo_quality(&minilm, &cache, &variants, conversations.clone()).await?;
    let recall = &quality.recall;

    println!(
        "\nLoCoMo {split} split (conversations {}-{}), turn-level evidence recall (%):",
        conversations.start(),
        conversations.end()
    );
    println!(
        "{:<22} {:>5} {:>8} {:>8} {:>8} {:>8}",
        "strategy", "n", "vec R@5", "vec R@10", "hyb R@5", "hyb R@10"
    );
    let (f5, f10, n) = recall.get("fts");
    println!(
        "{:<22} {n:>5} {f5:>8.1} {f10:>8.1}   (full-text only)",
        "fts"
    );
    let mut names: Vec<String> = variants.iter().map(|v| ahead_label(*v)).collect();
    names.push("minilm".to_owned());
    for name in &names {
        let (v5, v10, n) = recall.get(&format!("{name}/vector"));
        let (h5, h10, _) = recall.get(&format!("{name}/hybrid"));
        println!("{name:<22} {n:>5} {v5:>8.1} {v10:>8.1} {h5:>8.1} {h10:>8.1}");
    }
    println!(
        "calibration: model cosine ≈ {:.3} + {:.3} × z of the static cosine (static {})",
        quality.mean,
        quality.scale,
        retrieval::backfill::ahead::VARIANT.label()
    );
    let default_label = ahead_label(retrieval::backfill::ahead::VARIANT);
    let figures: Vec<String> = throughput
        .iter()
        .chain([("default", default_rate)].iter())
        .map(|(name, per_s)| {
            let quality = match *name {
                "minilm-by-length" => "minilm".to_owned(),
                "static" | "default" => default_label.clone(),
                other => other.to_owned(),
            };
            let (v5, v10, _) = recall.get(&format!("{quality}/vector"));
            let (h5, h10, _) = recall.get(&format!("{quality}/hybrid"));
            format!(
                "{name}_items_per_s={per_s:.1} {name}_vector_r5={v5:.1} {name}_vector_r10={v10:.1} {name}_hybrid_r5={h5:.1} {name}_hybrid_r10={h10:.1}"
            )
        })
        .collect();
    println!(
        "embed: strategy=default items_per_s={default_rate:.1} split={split} fts_r5={f5:.1} fts_r10={f10:.1} {} distil_s={} items={} sample={}",
        figures.join(" "),
        distilled.map_or("cached".to_owned(), |d| format!("{:.1}", d.as_secs_f64())),
        items.len(),
        sample.len()
    );
    Ok(())
}

/// Items a second of `embed` over `texts`, in batches of `batch` as the backfill makes them.
fn items_per_s<T>(
    texts: &[String],
    batch: usize,
    embed: impl Fn(&[String]) -> anyhow::Result<T>,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    for chunk in texts.chunks(batch) {
        embed(chunk)?;
    }
    Ok(texts.len() as f64 / started.elapsed().as_secs_f64())
}

/// The name of a static tier's figures.
fn ahead_label(variant: Variant) -> String {
    format!("static-{}", variant.label())
}

/// The real transcripts stored through ingest and indexed as retrieval would, in a store kept
/// open for the static tier to fill from.
struct SessionItems {
    bed: Bed,
    store: store::Store,
}

impl SessionItems {
    async fn store() -> anyhow::Result<SessionItems> {
        let files = crate::compress_bench::transcripts()?;
        let bed = Bed::start(true).await?;
        let client = async_nats::connect(&bed.common.nats_url).await?;
        let js = async_nats::jetstream::new(client);
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
        let mut total = 0usize;
        for file in files {
            let replay = hosts::claude_code::transcript::claude_code_replay(&file)?;
            let mut acks = Vec::new();
            for payload in &replay.payloads {
                let event = hosts::claude_code::adapter::normalise(
                    payload.to_string().as_bytes(),
                    &sanitizer,
                );
                acks.push(crate::publish(&js, &event).await?);
            }
            for ack in acks {
                ack.await?;
            }
            total += replay.payloads.len();
        }
        let store = store::Store::open(&bed.common.db_path()).await?;
        // A few payloads of a transcript can be identical within ingest's dedup window, so
        // wait for most of them and then for the count to settle.
        let started = Instant::now();
        let mut last = -1;
        loop {
            let n = crate::count(&store).await?;
            if n as usize >= total * 99 / 100 && n == last {
                break;
            }
            last = n;
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(300),
                "ingest stored {n} of {total} events"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let lexical = retrieval::lexical::Lexical::new();
        retrieval::index::catch_up(store.pool(), &lexical).await?;
        Ok(SessionItems { bed, store })
    }

    /// The texts retrieval embeds, in item id order.
    async fn texts(&self) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT title, text, context FROM memory_items ORDER BY id")
                .fetch_all(self.store.pool())
                .await?;
        Ok(rows
            .iter()
            .map(|(title, text, context)| {
                retrieval::index::NewItem::embed_text(title, text, context)
            })
            .collect())
    }

    async fn stop(self) {
        self.store.close().await;
        self.bed.stop().await;
    }
}

/// Recall sums per label.
#[derive(Default)]
struct Recall {
    sums: HashMap<String, (f64, f64, usize)>,
}

impl Recall {
    fn add(&mut self, label: &str, hits: &[String], evidence: &[String]) {
        let e = self.sums.entry(label.to_owned()).or_default();
        e.0 += crate::retrieval_bench::recall_at(hits, evidence, 5);
        e.1 += crate::retrieval_bench::recall_at(hits, evidence, 10);
        e.2 += 1;
    }

    fn get(&self, label: &str) -> (f64, f64, usize) {
        self.sums.get(label).map_or((0.0, 0.0, 0), |&(a, b, n)| {
            (100.0 * a / n as f64, 100.0 * b / n as f64, n)
        })
    }
}

/// Recall of every strategy, and the fit of the model's cosines to the static ones.
struct Quality {
    recall: Recall,
    /// The model's mean cosine of unrelated pairs.
    mean: f64,
    /// The model cosine one static spread is worth.
    scale: f64,
}

/// Sums over LoCoMo questions for the static tier's calibration.
#[derive(Default)]
struct Calibration {
    questions: usize,
    model_mean: f64,
    model_spread: f64,
    related: usize,
    static_z: f64,
    model_z: f64,
}

/// Mean and spread (standard deviation) of `values`, when there are at least two.
fn spread(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    Some((mean, variance.sqrt().max(1e-6)))
}

/// LoCoMo's conversations through ingest and the indexer, each answered by full-text search,
/// then by the static tier of each variant (the model's space still empty, as before the model
/// reaches the items), then by the model once it has embedded everything.
async fn locomo_quality(
    minilm: &Arc<LocalModel>,
    cache: &Path,
    variants: &[Variant],
    conversations: std::ops::RangeInclusive<usize>,
) -> anyhow::Result<Quality> {
    let samples = crate::retrieval_bench::locomo_samples()?;
    let mut recall = Recall::default();
    let mut calibration = Calibration::default();
    let started = Instant::now();
    for index in conversations {
        let Some(sample) = samples.get(index) else {
            continue;
        };
        let name = sample["sample_id"].as_str().unwrap_or("conv").to_owned();
        let (turns, questions) = crate::retrieval_bench::conversation(sample);
        let events: Vec<(String, proto::Event)> = turns
            .iter()
            .map(|turn| {
                (
                    turn.dia_id.clone(),
                    crate::retrieval_bench::prompt_event(&name, turn),
                )
            })
            .collect();
        let bed = Bed::start(true).await?;
        let client = async_nats::connect(&bed.common.nats_url).await?;
        let js = async_nats::jetstream::new(client);
        let mut by_event = HashMap::new();
        let mut acks = Vec::new();
        for (dia_id, event) in &events {
            by_event.insert(event.id.clone(), dia_id.clone());
            acks.push(crate::publish(&js, event).await?);
        }
        for ack in acks {
            ack.await?;
        }
        let store = store::Store::open(&bed.common.db_path()).await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        while crate::count(&store).await? < events.len() as i64 {
            anyhow::ensure!(Instant::now() < deadline, "ingest did not store {name}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let pool = store.pool().clone();
        retrieval::index::catch_up(&pool, &retrieval::lexical::Lexical::new()).await?;
        let lexical = Arc::new(retrieval::lexical::Lexical::new());
        retrieval::index::load_lexical(&pool, &lexical).await?;
        let dia = crate::retrieval_bench::dialogue_ids(&pool, &by_event).await?;
        let searcher = |vectors: Option<Arc<Vectors>>| Searcher {
            pool: pool.clone(),
            vectors,
            lexical: lexical.clone(),
            tuning: Tuning::default(),
        };
        let ask = async |recall: &mut Recall, label: &str, mode: &str, searcher: &Searcher| {
            for question in &questions {
                let request = proto::SearchRequest {
                    query: question.text.clone(),
                    project: format!("locomo/{name}"),
                    limit: 10,
                    mode: mode.to_owned(),
                    ..Default::default()
                };
                let (hits, ran) = searcher.search(&request).await?;
                anyhow::ensure!(ran == mode, "asked {mode}, ran {ran}");
                let hits: Vec<String> = hits
                    .iter()
                    .filter_map(|h| dia.get(&h.id).cloned())
                    .collect();
                recall.add(label, &hits, &question.evidence);
            }
            anyhow::Ok(())
        };
        ask(&mut recall, "fts", "fts", &searcher(None)).await?;
        let open = async || {
            let index: Arc<dyn retrieval::vector::VectorIndex> =
                Arc::new(retrieval::vector::SqliteVec::new(pool.clone()));
            Vectors::open(&pool, Embedder::Local(minilm.clone()), index).await
        };
        // Each static tier alone: the model's space is empty until the model runs below.
        for variant in variants {
            let mut vectors = open().await?;
            let ahead = Ahead::new(minilm.clone(), cache.to_owned(), 1).with_variant(*variant);
            while ahead.step(&pool, 0).await? > 0 {}
            vectors.ahead = Some(ahead);
            let vectors = Arc::new(vectors);
            let label = ahead_label(*variant);
            for mode in ["vector", "hybrid"] {
                let searcher = searcher(Some(vectors.clone()));
                ask(&mut recall, &format!("{label}/{mode}"), mode, &searcher).await?;
            }
        }
        let vectors = open().await?;
        while vectors.step(&pool).await? > 0 {}
        let vectors = Arc::new(vectors);
        for mode in ["vector", "hybrid"] {
            let searcher = searcher(Some(vectors.clone()));
            ask(&mut recall, &format!("minilm/{mode}"), mode, &searcher).await?;
        }

        // The model's cosines against the default tier's, each read relative to the question's
        // unrelated pairs (every fifth turn that is not evidence), as the tier reads them.
        let ahead = Ahead::new(minilm.clone(), cache.to_owned(), 1);
        while ahead.step(&pool, 0).await? > 0 {}
        let items: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "SELECT m.id, c.vector FROM memory_items m JOIN embedding_cache c
             ON c.text_hash = m.text_hash AND c.model = ?",
        )
        .bind(&vectors.space.model)
        .fetch_all(&pool)
        .await?;
        let ids: Vec<i64> = items.iter().map(|(id, _)| *id).collect();
        for question in &questions {
            let model_query = vectors.embed_query(&question.text).await?;
            let Some(static_query) = ahead.query(&question.text) else {
                continue;
            };
            let raw = ahead.raw_cosines(&static_query, &ids);
            let statics: HashMap<i64, f32> = raw.into_iter().collect();
            let mut unrelated = (Vec::new(), Vec::new());
            let mut related = Vec::new();
            for (id, bytes) in &items {
                let Some(&x) = statics.get(id) else {
                    continue;
                };
                let y = retrieval::models::dot(&model_query, &retrieval::models::from_bytes(bytes));
                if dia.get(id).is_some_and(|d| question.evidence.contains(d)) {
                    related.push((f64::from(x), f64::from(y)));
                } else if id % 5 == 0 {
                    unrelated.0.push(f64::from(x));
                    unrelated.1.push(f64::from(y));
                }
            }
            let (Some((ms, ss)), Some((mm, sm))) = (spread(&unrelated.0), spread(&unrelated.1))
            else {
                continue;
            };
            calibration.questions += 1;
            calibration.model_mean += mm;
            calibration.model_spread += sm;
            for (x, y) in related {
                calibration.related += 1;
                calibration.static_z += (x - ms) / ss;
                calibration.model_z += (y - mm) / sm;
            }
        }
        println!(
            "locomo {name}: {} turns, {} questions, {:.0}s so far",
            events.len(),
            questions.len(),
            started.elapsed().as_secs_f64()
        );
        store.close().await;
        bed.stop().await;
    }
    // Per question, a static cosine's distance above the unrelated mean, in spreads, is put on
    // the model's scale: the model's mean and spread of unrelated pairs, with the spread scaled
    // so that evidence lands where the model puts it on average.
    let c = &calibration;
    let per = |sum: f64, n: usize| sum / n.max(1) as f64;
    let (model_mean, model_spread) = (
        per(c.model_mean, c.questions),
        per(c.model_spread, c.questions),
    );
    let (static_z, model_z) = (per(c.static_z, c.related), per(c.model_z, c.related));
    let scale = model_spread * model_z / static_z;
    println!(
        "calibration: over {} questions, unrelated model cosine mean {model_mean:.3} spread {model_spread:.3}; {} evidence turns lie {static_z:.2} spreads above the unrelated mean by the static table, {model_z:.2} by the model",
        c.questions, c.related
    );
    Ok(Quality {
        recall,
        mean: model_mean,
        scale,
    })
}
