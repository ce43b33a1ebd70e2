//! `coding`: questions a developer asks days later about earlier coding sessions, answered by
//! search over the real Claude Code transcripts imported through `mneme import claude-code`.
//!
//! The labelled set is `tests/fixtures/coding-questions.json` (how it was made:
//! `docs/evaluation.md`, "Coding sessions"). Each question names the session that holds its
//! answer and one or more evidence strings copied from the transcript; a hit is a search result
//! whose whole item (text, tool input and output, as `mneme.retrieval.get` returns it) contains
//! one of them.

use super::{percentile, sorted};
use anyhow::Context as _;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The search modes compared, in the order they are reported.
const MODES: [&str; 3] = ["fts", "vector", "hybrid"];
/// Hits asked for per search, as an agent's memory tool asks.
const LIMIT: u32 = 10;
/// The dev and test halves, in the order they are reported.
const HALVES: [&str; 2] = ["dev", "test"];

#[derive(Deserialize)]
struct QuestionSet {
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct Question {
    id: String,
    split: String,
    category: String,
    session: String,
    /// Other sessions whose items hold the same answer.
    #[serde(default)]
    also_in: Vec<String>,
    question: String,
    evidence: Vec<String>,
}

impl Question {
    fn sessions(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.session).chain(&self.also_in)
    }
}

/// A stored memory item as the benchmark matches evidence against it.
struct StoredItem {
    session: String,
    /// Its indexed text, tool input and tool output, one after the other.
    text: String,
}

/// The four measures of one search.
#[derive(Default, Clone, Copy)]
struct Scores {
    hit1: bool,
    hit5: bool,
    hit10: bool,
    session5: bool,
}

/// Sums per (half, mode, category); category "all" holds every question of the half.
#[derive(Default)]
struct Tally {
    sums: HashMap<(String, String, String), [usize; 5]>,
}

impl Tally {
    fn add(&mut self, half: &str, mode: &str, category: &str, s: Scores) {
        for category in [category, "all"] {
            let e = self
                .sums
                .entry((half.to_owned(), mode.to_owned(), category.to_owned()))
                .or_default();
            e[0] += usize::from(s.hit1);
            e[1] += usize::from(s.hit5);
            e[2] += usize::from(s.hit10);
            e[3] += usize::from(s.session5);
            e[4] += 1;
        }
    }

    /// Percentages (hit@1, hit@5, hit@10, session recall@5) and the number of questions.
    fn get(&self, half: &str, mode: &str, category: &str) -> ([f64; 4], usize) {
        let key = (half.to_owned(), mode.to_owned(), category.to_owned());
        match self.sums.get(&key) {
            Some(e) if e[4] > 0 => {
                let pct = |v: usize| 100.0 * v as f64 / e[4] as f64;
                ([pct(e[0]), pct(e[1]), pct(e[2]), pct(e[3])], e[4])
            }
            _ => ([f64::NAN; 4], 0),
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The labelled questions (`MNEME_CODING_QUESTIONS` overrides the committed set).
fn load_questions() -> anyhow::Result<Vec<Question>> {
    let path = std::env::var_os("MNEME_CODING_QUESTIONS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/fixtures/coding-questions.json"));
    let set: QuestionSet = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    for q in &set.questions {
        anyhow::ensure!(
            HALVES.contains(&q.split.as_str()),
            "question {} has split {:?}, expected dev or test",
            q.id,
            q.split
        );
        anyhow::ensure!(!q.evidence.is_empty(), "question {} has no evidence", q.id);
    }
    Ok(set.questions)
}

/// The transcripts beside the repository (`MNEME_CODING_TRANSCRIPTS` overrides them).
fn transcripts_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os("MNEME_CODING_TRANSCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data/claude-code-transcripts"));
    anyhow::ensure!(
        dir.is_dir(),
        "{} is missing: clone the repository with ../shared beside it",
        dir.display()
    );
    Ok(dir)
}

async fn scalar(pool: &sqlx::SqlitePool, sql: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await?;
    Ok(n)
}

/// Items asked for per `get`: a whole item can be tens of kilobytes (body, input and output),
/// and a reply must stay under NATS's default 1 MB payload.
const GET_CHUNK: usize = 8;

/// Every memory item's whole text, fetched through `mneme.retrieval.get` as an agent would.
async fn fetch_items(
    client: &async_nats::Client,
    pool: &sqlx::SqlitePool,
) -> anyhow::Result<HashMap<i64, StoredItem>> {
    let ids: Vec<(i64,)> = sqlx::query_as("SELECT id FROM memory_items ORDER BY id")
        .fetch_all(pool)
        .await?;
    let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
    let mut items = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(GET_CHUNK) {
        // A chunk whose reply is still too large is asked again one item at a time.
        let reply = match get(client, chunk).await {
            Ok(reply) => reply,
            Err(_) => {
                let mut one_by_one = proto::ItemsReply::default();
                for id in chunk {
                    let reply = get(client, &[*id])
                        .await
                        .with_context(|| format!("getting item {id}"))?;
                    one_by_one.items.extend(reply.items);
                }
                one_by_one
            }
        };
        for item in reply.items {
            let text = format!("{}\n{}\n{}", item.text, item.input, item.output);
            items.insert(
                item.id,
                StoredItem {
                    session: item.session_id,
                    text,
                },
            );
        }
    }
    anyhow::ensure!(
        items.len() == ids.len(),
        "get returned {} of {} items",
        items.len(),
        ids.len()
    );
    Ok(items)
}

async fn get(client: &async_nats::Client, ids: &[i64]) -> anyhow::Result<proto::ItemsReply> {
    let reply: proto::ItemsReply = common::nats::request(
        client,
        proto::subjects::RETRIEVAL_GET,
        &proto::GetRequest { ids: ids.to_vec() },
        Duration::from_secs(10),
    )
    .await?;
    anyhow::ensure!(reply.error.is_empty(), "get failed: {}", reply.error);
    Ok(reply)
}

/// Fail loudly unless every evidence string of every question is in a stored item of one of
/// the question's sessions: a label that matches nothing would silently count as a miss.
fn check_evidence(questions: &[Question], items: &HashMap<i64, StoredItem>) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    let mut elsewhere = 0;
    for q in questions {
        let sessions: BTreeSet<&String> = q.sessions().collect();
        for evidence in &q.evidence {
            let holders: Vec<&StoredItem> = items
                .values()
                .filter(|i| i.text.contains(evidence.as_str()))
                .collect();
            if !holders.iter().any(|i| sessions.contains(&i.session)) {
                missing.push(format!(
                    "{} {evidence:?} ({} items elsewhere)",
                    q.id,
                    holders.len()
                ));
            }
            elsewhere += holders
                .iter()
                .filter(|i| !sessions.contains(&i.session))
                .count();
        }
    }
    anyhow::ensure!(
        missing.is_empty(),
        "evidence not found in any stored item of its session:\n  {}",
        missing.join("\n  ")
    );
    println!(
        "evidence: every string found in its session's items ({elsewhere} matches in other sessions)"
    );
    Ok(())
}

/// Import the transcripts into a fresh store, wait until every item is indexed and embedded
/// by the model, ask every question in every mode, and report both halves.
pub async fn coding() -> anyhow::Result<()> {
    let questions = load_questions()?;
    let transcripts = transcripts_dir()?;
    let mneme = super::release_binary("mneme")?;
    let args = retrieval::RetrievalArgs {
        // The figures are for the model's own vectors: static vectors filled ahead of it would
        // make the vector half measure a different embedder.
        static_vectors: false,
        ..super::retrieval_bench::retrieval_args()?
    };

    let bed = super::Bed::start(true).await?;
    let retrieval = tokio::spawn(retrieval::run(
        bed.common.clone(),
        args.clone(),
        bed.shutdown.clone(),
    ));
    let started = Instant::now();
    let summary = super::import_claude_code(&mneme, &transcripts, &bed)?;
    let published = summary["published"].as_i64().unwrap_or_default();
    println!(
        "import: files={} sessions={} records={} events={published}",
        summary["files"], summary["sessions"], summary["records"]
    );

    let client = async_nats::connect(&bed.common.nats_url).await?;
    let store = store::Store::open(&bed.common.db_path()).await?;
    let (items, indexed_s, embedded_s) = wait_ready(&client, &store, published).await?;
    println!(
        "ready: {items} items, full-text indexed after {indexed_s:.0}s, embedded by the model after {embedded_s:.0}s ({:.1} items/s)",
        items as f64 / (embedded_s - indexed_s).max(1.0)
    );

    let stored = fetch_items(&client, store.pool()).await?;
    check_evidence(&questions, &stored)?;

    let mut tally = Tally::default();
    let mut latencies: HashMap<&str, Vec<f64>> = HashMap::new();
    let mut misses: Vec<String> = Vec::new();
    for q in &questions {
        for mode in MODES {
            let request = proto::SearchRequest {
                query: q.question.clone(),
                limit: LIMIT,
                mode: mode.to_owned(),
                ..Default::default()
            };
            let asked = Instant::now();
            let reply: proto::SearchReply = common::nats::request(
                &client,
                proto::subjects::RETRIEVAL_SEARCH,
                &request,
                Duration::from_secs(30),
            )
            .await?;
            latencies
                .entry(mode)
                .or_default()
                .push(asked.elapsed().as_secs_f64() * 1000.0);
            anyhow::ensure!(reply.error.is_empty(), "search failed: {}", reply.error);
            anyhow::ensure!(reply.mode == mode, "asked {mode}, ran {}", reply.mode);
            let scores = score(q, &stored, &reply.hits);
            if mode == "hybrid" && !scores.hit10 {
                misses.push(format!("{} [{}] {}", q.id, q.category, q.question));
            }
            tally.add(&q.split, mode, &q.category, scores);
        }
    }
    let sweep = super::fusion_sweep();
    if !sweep.is_empty() {
        let searchers = super::sweep_searchers(
            &bed.common,
            &args,
            &store,
            sweep.iter().map(|(_, tuning)| *tuning),
        )
        .await?;
        for ((label, _), searcher) in sweep.iter().zip(&searchers) {
            for q in &questions {
                let request = proto::SearchRequest {
                    query: q.question.clone(),
                    limit: LIMIT,
                    ..Default::default()
                };
                let asked = Instant::now();
                let (hits, _) = searcher.search(&request).await?;
                latencies
                    .entry(label)
                    .or_default()
                    .push(asked.elapsed().as_secs_f64() * 1000.0);
                tally.add(&q.split, label, &q.category, score(q, &stored, &hits));
            }
        }
    }
    let modes: Vec<&str> = MODES
        .into_iter()
        .chain(sweep.iter().map(|(label, _)| *label))
        .collect();
    store.close().await;
    bed.stop().await;
    let _ = retrieval.await;

    report(&questions, &modes, &tally, &latencies, &misses);
    println!(
        "run: {:.0}s from import to the last answer",
        started.elapsed().as_secs_f64()
    );
    let hit5 = |half: &str, mode: &str| tally.get(half, mode, "all").0[1];
    println!(
        "coding: test_hybrid_hit5={:.1} test_fts_hit5={:.1} test_vector_hit5={:.1} dev_hybrid_hit5={:.1} questions={}",
        hit5("test", "hybrid"),
        hit5("test", "fts"),
        hit5("test", "vector"),
        hit5("dev", "hybrid"),
        questions.len()
    );
    Ok(())
}

/// How one search did for `q`: where its first evidence item came, and whether one of its
/// sessions is among the first five distinct sessions.
fn score(q: &Question, stored: &HashMap<i64, StoredItem>, hits: &[proto::SearchHit]) -> Scores {
    let first_hit = hits.iter().position(|h| {
        stored
            .get(&h.id)
            .is_some_and(|item| q.evidence.iter().any(|e| item.text.contains(e.as_str())))
    });
    let mut seen: Vec<&str> = Vec::new();
    for hit in hits {
        if !seen.contains(&hit.session_id.as_str()) {
            seen.push(&hit.session_id);
        }
    }
    Scores {
        hit1: first_hit.is_some_and(|p| p < 1),
        hit5: first_hit.is_some_and(|p| p < 5),
        hit10: first_hit.is_some_and(|p| p < 10),
        session5: seen
            .iter()
            .take(5)
            .any(|s| q.sessions().any(|own| own == s)),
    }
}

/// Wait until ingest has stored every published event, retrieval has indexed every stored
/// notice, and the model has embedded every item; returns the items and the seconds (from
/// now) until indexed and until embedded.
async fn wait_ready(
    client: &async_nats::Client,
    store: &store::Store,
    published: i64,
) -> anyhow::Result<(i64, f64, f64)> {
    let started = Instant::now();
    let deadline = Duration::from_secs(
        std::env::var("MNEME_CODING_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3_600),
    );
    let jetstream = async_nats::jetstream::new(client.clone());
    let pool = store.pool();
    let mut indexed_s = None;
    let mut last_report = Instant::now();
    loop {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "indexing and embedding did not finish within {}s",
            deadline.as_secs()
        );
        let stored = scalar(pool, "SELECT count(*) FROM observations").await?;
        let pending = super::retrieval_pending(&jetstream).await;
        if indexed_s.is_none() && stored >= published && pending == Some(0) {
            indexed_s = Some(started.elapsed().as_secs_f64());
        }
        let (items, max, embedded) = crate::retrieval_bench::embedding_progress(pool).await?;
        if let Some(indexed) = indexed_s
            && embedded >= max
        {
            return Ok((items, indexed, started.elapsed().as_secs_f64()));
        }
        if last_report.elapsed() > Duration::from_secs(60) {
            last_report = Instant::now();
            println!(
                "waiting: {:.0}s, {stored}/{published} events stored, {items} items, embedded up to {embedded} of {max}",
                started.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn fmt_pct(v: f64) -> String {
    if v.is_nan() {
        "-".to_owned()
    } else {
        format!("{v:.1}")
    }
}

fn report(
    questions: &[Question],
    modes: &[&str],
    tally: &Tally,
    latencies: &HashMap<&str, Vec<f64>>,
    misses: &[String],
) {
    let categories: BTreeSet<&str> = questions.iter().map(|q| q.category.as_str()).collect();
    for half in HALVES {
        println!("\n{half} half (%, limit {LIMIT}, no project filter):");
        println!(
            "{:<12} {:<14} {:>4} {:>6} {:>6} {:>7} {:>7}",
            "category", "mode", "n", "hit@1", "hit@5", "hit@10", "sess@5"
        );
        for category in std::iter::once("all").chain(categories.iter().copied()) {
            for &mode in modes {
                let ([h1, h5, h10, s5], n) = tally.get(half, mode, category);
                println!(
                    "{category:<12} {mode:<14} {n:>4} {:>6} {:>6} {:>7} {:>7}",
                    fmt_pct(h1),
                    fmt_pct(h5),
                    fmt_pct(h10),
                    fmt_pct(s5)
                );
            }
        }
    }
    println!("\nsearch latency (ms; through nats, the sweep's in-process):");
    for &mode in modes {
        let values = sorted(latencies.get(mode).cloned().unwrap_or_default());
        println!(
            "{mode:<14} p50={:.1} p95={:.1} max={:.1}",
            percentile(&values, 50.0),
            percentile(&values, 95.0),
            values.last().copied().unwrap_or(f64::NAN)
        );
    }
    println!("\nmissed by hybrid within {LIMIT} ({}):", misses.len());
    for miss in misses {
        println!("  {miss}");
    }
}
