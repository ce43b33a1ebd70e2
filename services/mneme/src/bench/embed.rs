//! `mneme-bench embed`: embedding throughput on real coding-session items, and search quality
//! on LoCoMo's test split, for each embedding strategy (issue 18).
//!
//! - Items: the Claude Code transcripts are replayed as the hook would publish them, through
//!   NATS into ingest; retrieval's indexer turns the stored observations into memory items in
//!   process, and each item's text is what the backfill embeds (`NewItem::embed_text` of its
//!   title, text and context).
//! - Strategies: `minilm` (today's path: id order, batches of `backfill::BATCH`),
//!   `minilm-by-length` (the same items sorted by length before batching, so a batch pads
//!   little) and `static` (the table distilled from the same MiniLM, whole texts). MiniLM runs
//!   on an evenly spread sample of the items (`MNEME_BENCH_EMBED_SAMPLE`, 256 by default): at a
//!   few items a second, all of them would take hours. Static runs on all items and the sample.
//! - Quality: LoCoMo conversations 3–9 (the ranking defaults were chosen on 0–2, see
//!   `retrieval::search::Tuning`), fed through ingest and indexed as the `locomo` bench does;
//!   each strategy fills its own vector space in the same store, and every question with
//!   evidence is searched in process, vector-only and hybrid, with the service's default
//!   ranking. The static table reaches the searcher as an OpenAI-compatible endpoint served
//!   here, the one embedder kind the service can take without new wiring.
//!
//! The distilled table is cached in `MNEME_STATIC_CACHE` (default `target/mneme-static`).

use crate::Bed;
use anyhow::Context as _;
use retrieval::models::{Embedder, LocalModel, RemoteModel};
use retrieval::search::{Searcher, Tuning};
use retrieval::static_model::{StaticModel, Variant};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

/// The LoCoMo conversations figures are reported on: the ranking defaults were tuned on 0–2.
const TEST_CONVERSATIONS: std::ops::RangeInclusive<usize> = 3..=9;

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

    let dir = model_dir.clone();
    let cache_dir = cache.clone();
    let (table, distilled) =
        tokio::task::spawn_blocking(move || StaticModel::load_or_distil(&dir, &cache_dir))
            .await??;
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
    let minilm = Arc::new(LocalModel::load(&model_dir)?);

    // Throughput on real coding-session items.
    let items = session_items().await?;
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
    let started = Instant::now();
    for chunk in sample.chunks(batch) {
        minilm.embed(chunk)?;
    }
    let minilm_rate = rate(sample.len(), started.elapsed());
    println!(
        "minilm:           {} items {minilm_rate:.1} items/s",
        sample.len()
    );
    throughput.push(("minilm", minilm_rate));

    let mut by_length = sample.clone();
    by_length.sort_by_key(|t| t.len());
    let started = Instant::now();
    for chunk in by_length.chunks(batch) {
        minilm.embed(chunk)?;
    }
    let by_length_rate = rate(sample.len(), started.elapsed());
    println!(
        "minilm-by-length: {} items {by_length_rate:.1} items/s",
        sample.len()
    );
    throughput.push(("minilm-by-length", by_length_rate));

    let started = Instant::now();
    for chunk in sample.chunks(batch) {
        table.embed(chunk)?;
    }
    let static_sample_rate = rate(sample.len(), started.elapsed());
    let started = Instant::now();
    for chunk in items.chunks(batch) {
        table.embed(chunk)?;
    }
    let static_rate = rate(items.len(), started.elapsed());
    println!(
        "static:           {} items {static_rate:.0} items/s (sample: {static_sample_rate:.0} items/s)",
        items.len()
    );
    throughput.push(("static", static_rate));

    // Quality on LoCoMo's test split.
    let mut variants = vec![Variant::PLAIN];
    if std::env::var_os("MNEME_BENCH_EMBED_VARIANTS").is_some() {
        variants.extend([
            Variant {
                centre: true,
                zipf: false,
            },
            Variant {
                centre: false,
                zipf: true,
            },
            Variant {
                centre: true,
                zipf: true,
            },
        ]);
    }
    let mut strategies: Vec<(String, Embedder)> =
        vec![("minilm".to_owned(), Embedder::Local(minilm.clone()))];
    let mut servers = Vec::new();
    for variant in &variants {
        let mut model = table.clone();
        model.set_variant(*variant);
        let (url, server) = serve(Arc::new(model)).await?;
        servers.push(server);
        let remote =
            RemoteModel::connect(&url, &variant.label(), None, Duration::from_secs(60)).await?;
        let name = if *variant == Variant::PLAIN {
            "static".to_owned()
        } else {
            format!("static-{}", variant.label())
        };
        strategies.push((name, Embedder::Remote(Arc::new(remote))));
    }
    let recall = locomo_quality(&strategies).await?;
    for server in servers {
        server.abort();
    }

    println!("\nLoCoMo test split (conversations 3-9), turn-level evidence recall (%):");
    println!(
        "{:<22} {:>5} {:>8} {:>8} {:>8} {:>8}",
        "strategy", "n", "vec R@5", "vec R@10", "hyb R@5", "hyb R@10"
    );
    let (f5, f10, n) = recall.get("fts");
    println!(
        "{:<22} {n:>5} {f5:>8.1} {f10:>8.1}   (full-text only)",
        "fts"
    );
    for (name, _) in &strategies {
        let (v5, v10, n) = recall.get(&format!("{name}/vector"));
        let (h5, h10, _) = recall.get(&format!("{name}/hybrid"));
        println!("{name:<22} {n:>5} {v5:>8.1} {v10:>8.1} {h5:>8.1} {h10:>8.1}");
    }
    let figures: Vec<String> = throughput
        .iter()
        .map(|(name, per_s)| {
            let quality = if *name == "minilm-by-length" {
                "minilm"
            } else {
                name
            };
            let (v5, v10, _) = recall.get(&format!("{quality}/vector"));
            let (h5, h10, _) = recall.get(&format!("{quality}/hybrid"));
            format!(
                "{name}_items_per_s={per_s:.1} {name}_vector_r5={v5:.1} {name}_vector_r10={v10:.1} {name}_hybrid_r5={h5:.1} {name}_hybrid_r10={h10:.1}"
            )
        })
        .collect();
    println!(
        "embed: strategy=minilm items_per_s={minilm_rate:.1} {} distil_s={} items={} sample={}",
        figures.join(" "),
        distilled.map_or("cached".to_owned(), |d| format!("{:.1}", d.as_secs_f64())),
        items.len(),
        sample.len()
    );
    Ok(())
}

/// The texts retrieval would embed for the real transcripts, in item id order.
async fn session_items() -> anyhow::Result<Vec<String>> {
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
            let event =
                hosts::claude_code::adapter::normalise(payload.to_string().as_bytes(), &sanitizer);
            acks.push(crate::publish(&js, &event).await?);
        }
        for ack in acks {
            ack.await?;
        }
        total += replay.payloads.len();
    }
    let store = store::Store::open(&bed.common.db_path()).await?;
    // A few payloads of a transcript can be identical within ingest's dedup window, so wait
    // for most of them and then for the count to settle.
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
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT title, text, context FROM memory_items ORDER BY id")
            .fetch_all(store.pool())
            .await?;
    store.close().await;
    bed.stop().await;
    Ok(rows
        .iter()
        .map(|(title, text, context)| retrieval::index::NewItem::embed_text(title, text, context))
        .collect())
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

/// LoCoMo's test conversations through ingest and the indexer; every strategy fills its own
/// vector space of the same store and answers every question with evidence.
async fn locomo_quality(strategies: &[(String, Embedder)]) -> anyhow::Result<Recall> {
    let path = crate::retrieval_bench::locomo_path();
    let data: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let samples = data.as_array().context("locomo10.json is not a list")?;
    let mut recall = Recall::default();
    let started = Instant::now();
    for index in TEST_CONVERSATIONS {
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
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT m.id, o.event_id FROM memory_items m JOIN observations o ON o.id = m.source_id",
        )
        .fetch_all(&pool)
        .await?;
        let dia: HashMap<i64, String> = rows
            .into_iter()
            .filter_map(|(id, event)| Some((id, by_event.get(&event)?.clone())))
            .collect();
        let mut searchers = vec![(
            "fts".to_owned(),
            "fts",
            Searcher {
                pool: pool.clone(),
                vectors: None,
                lexical: lexical.clone(),
                tuning: Tuning::default(),
            },
        )];
        for (label, embedder) in strategies {
            let index: Arc<dyn retrieval::vector::VectorIndex> =
                Arc::new(retrieval::vector::SqliteVec::new(pool.clone()));
            let vectors =
                retrieval::backfill::Vectors::open(&pool, embedder.clone(), index).await?;
            while vectors.step(&pool).await? > 0 {}
            let vectors = Arc::new(vectors);
            for mode in ["vector", "hybrid"] {
                searchers.push((
                    format!("{label}/{mode}"),
                    mode,
                    Searcher {
                        pool: pool.clone(),
                        vectors: Some(vectors.clone()),
                        lexical: lexical.clone(),
                        tuning: Tuning::default(),
                    },
                ));
            }
        }
        for (label, mode, searcher) in &searchers {
            for question in &questions {
                let request = proto::SearchRequest {
                    query: question.text.clone(),
                    project: format!("locomo/{name}"),
                    limit: 10,
                    mode: (*mode).to_owned(),
                    ..Default::default()
                };
                let (hits, ran) = searcher.search(&request).await?;
                anyhow::ensure!(ran == *mode, "asked {mode}, ran {ran}");
                let hits: Vec<String> = hits
                    .iter()
                    .filter_map(|h| dia.get(&h.id).cloned())
                    .collect();
                recall.add(label, &hits, &question.evidence);
            }
        }
        println!(
            "locomo {name}: {} turns, {} questions, {:.0}s so far",
            events.len(),
            questions.len(),
            started.elapsed().as_secs_f64()
        );
        drop(searchers);
        store.close().await;
        bed.stop().await;
    }
    Ok(recall)
}

/// Serve `model` as an OpenAI-compatible `/v1/embeddings` endpoint on a loopback port, so the
/// service's remote embedder can use it unchanged. Returns the base URL.
async fn serve(model: Arc<StaticModel>) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let model = model.clone();
            tokio::spawn(async move {
                let _ = answer(stream, model).await;
            });
        }
    });
    Ok((url, server))
}

/// Answer embedding requests on one connection until the client closes it.
async fn answer(stream: tokio::net::TcpStream, model: Arc<StaticModel>) -> anyhow::Result<()> {
    let mut stream = tokio::io::BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            if stream.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() && !first {
                break;
            }
            first = false;
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await?;
        let request: Value = serde_json::from_slice(&body)?;
        let texts: Vec<String> = request["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.as_str().unwrap_or("").to_owned())
            .collect();
        let model = model.clone();
        let vectors = tokio::task::spawn_blocking(move || model.embed(&texts)).await??;
        let data: Vec<Value> = vectors
            .into_iter()
            .enumerate()
            .map(|(index, embedding)| serde_json::json!({"index": index, "embedding": embedding}))
            .collect();
        let reply = serde_json::json!({ "data": data }).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        let stream = stream.get_mut();
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(reply.as_bytes()).await?;
    }
}
