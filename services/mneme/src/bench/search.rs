//! `mneme-bench search [--items N[,N…]] [--index sqlite|qdrant]`: hybrid search latency at
//! each store size, and what the real retrieval service costs on that store.
//!
//! Each size gets a store of synthetic items written through retrieval's own write paths (items
//! and full-text rows by `index::write_items`, vectors by the background embedder reading
//! `embedding_cache`, which the bench fills in the model's place). The parts of a search (the
//! in-memory full-text ranking, FTS5's, the vector search, the query embedding) are timed in
//! this process, as before. Then the store is handed to a `mneme serve retrieval` process on a
//! `nats-server` of its own: its start-up to the first answered search and to its in-memory
//! copies loaded, hybrid searches through NATS (the figures of the last line), and its peak
//! resident memory.

use super::nats_server::{self, LocalNats};
use super::{percentile, sorted};
use anyhow::Context as _;
use proto::Message as _;
use retrieval::search::{Searcher, Tuning};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the vectors live, as `MNEME_VECTOR_INDEX` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Index {
    Sqlite,
    Qdrant,
}

impl Index {
    fn name(self) -> &'static str {
        match self {
            Index::Sqlite => "sqlite",
            Index::Qdrant => "qdrant",
        }
    }
}

/// What to measure: the store sizes and the vector index.
#[derive(Debug)]
struct Options {
    sizes: Vec<usize>,
    index: Index,
    /// Only the vector index, filled directly (`--vectors-only`, Qdrant): sizes past what one
    /// machine's store holds, where the items themselves would not fit.
    vectors_only: bool,
    /// Only the in-memory full-text copy, filled directly (`--full-text-only`): its ranking
    /// alone, which a profiler can look at without a store behind it.
    full_text_only: bool,
}

/// A size as written on the command line: digits, with `_` allowed and `k` or `m` for
/// thousands and millions.
fn parse_size(text: &str) -> anyhow::Result<usize> {
    let text = text.trim().replace('_', "").to_lowercase();
    let (digits, unit) = match text.strip_suffix('m') {
        Some(d) => (d.to_owned(), 1_000_000),
        None => match text.strip_suffix('k') {
            Some(d) => (d.to_owned(), 1_000),
            None => (text.clone(), 1),
        },
    };
    let n: usize = digits
        .parse()
        .with_context(|| format!("{text:?} is not a number of items"))?;
    anyhow::ensure!(n > 0, "a store needs at least one item");
    Ok(n * unit)
}

fn parse_sizes(list: &str) -> anyhow::Result<Vec<usize>> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect()
}

impl Options {
    /// `--items` and `--index`, else `MNEME_BENCH_SIZES`, else 10k and 100k on sqlite-vec.
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut sizes = match std::env::var("MNEME_BENCH_SIZES") {
            Ok(list) if !list.trim().is_empty() => parse_sizes(&list)?,
            _ => vec![10_000, 100_000],
        };
        let mut index = Index::Sqlite;
        let mut vectors_only = false;
        let mut full_text_only = false;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next().cloned())
                    .with_context(|| format!("{flag} needs a value"))
            };
            match flag {
                "--vectors-only" => vectors_only = true,
                "--full-text-only" => full_text_only = true,
                "--items" => sizes = parse_sizes(&value()?)?,
                "--index" => {
                    index = match value()?.as_str() {
                        "sqlite" | "sqlite-vec" => Index::Sqlite,
                        "qdrant" => Index::Qdrant,
                        other => anyhow::bail!("unknown index {other:?} (sqlite or qdrant)"),
                    }
                }
                other => anyhow::bail!(
                    "unknown argument {other:?}; usage: mneme-bench search [--items N[,N...]] [--index sqlite|qdrant] [--vectors-only | --full-text-only]"
                ),
            }
        }
        anyhow::ensure!(!sizes.is_empty(), "no store size to measure");
        anyhow::ensure!(
            !vectors_only || index == Index::Qdrant,
            "--vectors-only measures a Qdrant collection: add --index qdrant"
        );
        anyhow::ensure!(
            !(vectors_only && full_text_only),
            "--vectors-only and --full-text-only each measure one half: choose one"
        );
        Ok(Options {
            sizes,
            index,
            vectors_only,
            full_text_only,
        })
    }
}

/// The last line's latency figures of one measurement named `key`: p50 and p95 of all the
/// searches, p95 of the plain and of the filtered ones.
fn latencies(key: &str, [p50, p95, plain, filtered]: [f64; 4]) -> [String; 4] {
    [
        format!("p50_ms_{key}={p50:.2}"),
        format!("p95_ms_{key}={p95:.2}"),
        format!("p95_plain_ms_{key}={plain:.2}"),
        format!("p95_filtered_ms_{key}={filtered:.2}"),
    ]
}

/// A true-or-false setting of the environment, `default` when unset; anything else is an error
/// naming it.
fn flag(name: &str, default: bool) -> anyhow::Result<bool> {
    match std::env::var(name).as_deref() {
        Ok("true" | "1") => Ok(true),
        Ok("false" | "0") => Ok(false),
        Ok(other) => Err(anyhow::anyhow!("{name}={other:?}: expected true or false")),
        Err(_) => Ok(default),
    }
}

/// A Qdrant setting as the bench's figures name it: its value, or `default` when the server's
/// own applies.
fn or_default(value: Option<u64>) -> String {
    value.map_or_else(|| "default".to_owned(), |v| v.to_string())
}

/// A size as the last line's keys name it: `10k`, `100k`, `1m`.
fn label(size: usize) -> String {
    if size.is_multiple_of(1_000_000) {
        format!("{}m", size / 1_000_000)
    } else if size.is_multiple_of(1_000) {
        format!("{}k", size / 1_000)
    } else {
        size.to_string()
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

/// One step of a 64-bit linear congruential generator: deterministic and dependency-free.
fn lcg(state: u64) -> u64 {
    state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
}

fn synthetic_text(seed: u64) -> String {
    let mut state = lcg(seed);
    let mut next = || {
        state = lcg(state);
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

/// Projects, kinds and the time span of the synthetic items, which the filtered queries use.
const PROJECTS: usize = 5;
const KINDS: [&str; 4] = ["prompt", "tool", "error", "reply"];
/// Items of one session, in order, a minute apart.
const SESSION_ITEMS: usize = 200;
const ITEM_GAP_MS: i64 = 60_000;

/// The queries of one measurement: `plain` ones filter nothing, `filtered` ones name a project,
/// and in turn also a kind, and a kind and the most recent quarter of the store's time.
#[derive(Clone, Copy)]
struct Queries {
    since_ms: i64,
}

impl Queries {
    fn request(&self, q: usize, filtered: bool, mode: &str) -> proto::SearchRequest {
        let words = synthetic_text(1_000_000 + q as u64);
        let query: String = words
            .split(' ')
            .take(3 + q % 4)
            .collect::<Vec<_>>()
            .join(" ");
        let set = if filtered { "filtered" } else { "plain" };
        let mut request = proto::SearchRequest {
            // A word no item holds makes every query new, so the query-vector cache never
            // helps, and matches nothing, so it changes no ranking.
            query: format!("{query} q{q}{set}{mode}"),
            limit: 10,
            mode: mode.to_owned(),
            ..Default::default()
        };
        if filtered {
            request.project = format!("/work/project-{}", q % PROJECTS);
            if q % 3 >= 1 {
                request.kinds = vec![KINDS[q % KINDS.len()].to_owned()];
            }
            if q % 3 == 2 {
                request.since_ms = self.since_ms;
            }
        }
        request
    }
}

/// p50 and p95 of timings in milliseconds.
fn spread(timings: Vec<f64>) -> (f64, f64) {
    let timings = sorted(timings);
    (percentile(&timings, 50.0), percentile(&timings, 95.0))
}

/// What one store size measured.
struct Figures {
    size: usize,
    /// Seconds the fill took, `None` for a kept store measured again.
    fill_s: Option<f64>,
    store_bytes: u64,
    service: Service,
}

/// Hybrid search latency (query embedding included) at each size, the retrieval service's
/// start-up and memory, with sqlite-vec or Qdrant.
pub async fn search(args: &[String]) -> anyhow::Result<()> {
    // `MNEME_LOG=retrieval::search=debug` shows where each in-process search spent its time.
    let _telemetry =
        std::env::var_os("MNEME_LOG").map(|_| common::telemetry::init("mneme-bench", "text", None));
    let options = Options::parse(args)?;
    let mut args = super::retrieval_bench::retrieval_args()?;
    if options.index == Index::Qdrant {
        args.vector_index = "qdrant".to_owned();
        if let Ok(url) = std::env::var("MNEME_QDRANT_URL") {
            args.qdrant_url = url;
        }
        args.qdrant_api_key = std::env::var("MNEME_QDRANT_API_KEY").ok();
        // The layout of the collections the bench creates, as retrieval reads it.
        args.qdrant_on_disk = flag("MNEME_QDRANT_ON_DISK", args.qdrant_on_disk)?;
        args.qdrant_quantize = flag("MNEME_QDRANT_QUANTIZE", args.qdrant_quantize)?;
        let number = |name: &str| -> anyhow::Result<Option<u64>> {
            std::env::var(name)
                .ok()
                .map(|v| {
                    v.parse()
                        .with_context(|| format!("{name}={v:?}: not a number"))
                })
                .transpose()
        };
        if let Some(ef) = number("MNEME_QDRANT_EF_CONSTRUCT")? {
            args.qdrant_ef_construct = Some(ef);
        }
        if let Some(kb) = number("MNEME_QDRANT_MAX_SEGMENT_KB")? {
            args.qdrant_max_segment_kb = Some(kb);
        }
        // The search settings, for the searches in this process as for the service's.
        if let Some(ef) = number("MNEME_QDRANT_HNSW_EF")? {
            args.qdrant_hnsw_ef = Some(ef);
        }
        if let Ok(times) = std::env::var("MNEME_QDRANT_OVERSAMPLING") {
            args.qdrant_oversampling = times
                .parse()
                .with_context(|| format!("MNEME_QDRANT_OVERSAMPLING={times:?}: not a number"))?;
        }
    }
    let queries: usize = std::env::var("MNEME_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    if options.vectors_only {
        return vectors_only(&options, &args, queries).await;
    }
    if options.full_text_only {
        return full_text_only(&options, queries);
    }
    let setup = Setup {
        index: options.index,
        mneme: service_binary()?,
        base: base_vectors(&args).await?,
        args,
        queries,
        // `MNEME_BENCH_KEEP=DIR` keeps each size's store in DIR/<size> after the run, and a
        // later run measures a store (and Qdrant collection) already holding that many items
        // as it is: a million take about seventeen minutes to fill on two cores, and search
        // settings can then be compared on the same store. Retention, which deletes a tenth
        // of it, is then not measured.
        keep: std::env::var_os("MNEME_BENCH_KEEP").map(PathBuf::from),
    };
    let mut figures = Vec::new();
    for &size in &options.sizes {
        figures.push(measure(&setup, size).await?);
    }
    let mut line = vec![format!("index={}", options.index.name())];
    for f in &figures {
        let k = label(f.size);
        let s = &f.service;
        line.extend(latencies(&k, [s.p50, s.p95, s.plain_p95, s.filtered_p95]));
        line.extend([
            format!("rss_mb_{k}={:.0}", s.peak_rss_mb),
            format!("start_ms_{k}={:.0}", s.first_answer_ms),
            format!("loaded_ms_{k}={:.0}", s.loaded_ms),
            format!("store_mb_{k}={:.0}", f.store_bytes as f64 / 1e6),
        ]);
        line.extend(f.fill_s.map(|s| format!("fill_s_{k}={s:.0}")));
    }
    println!("search: {}", line.join(" "));
    Ok(())
}

/// The in-memory full-text copy's ranking alone at each size: the copy is filled directly with
/// the rows the store's fill would index (each item with the two before it in its session as
/// context), and the bench's queries, half of them filtered, are ranked as a hybrid search of
/// ten ranks them (the search's column weights and depth). No store, model or service: this is
/// the part to look at with a profiler.
fn full_text_only(options: &Options, queries: usize) -> anyhow::Result<()> {
    let tuning = Tuning::default();
    let limit = 10usize;
    let depth = (limit * tuning.depth as usize).max(tuning.min_depth as usize);
    let mut line = vec!["index=full-text-only".to_owned()];
    for &size in &options.sizes {
        let lexical = retrieval::lexical::Lexical::new();
        let started = Instant::now();
        let now = common::time::now_ms();
        let mut docs = Vec::with_capacity(FILL_BATCH);
        let (mut prev, mut prev2) = (String::new(), String::new());
        for i in 0..size {
            let text = synthetic_text(i as u64);
            if i % SESSION_ITEMS == 0 {
                (prev, prev2) = (String::new(), String::new());
            }
            let title: String = synthetic_text(i as u64 * 7 + 3).chars().take(60).collect();
            let occurred_at = now - (size - i) as i64 * ITEM_GAP_MS;
            docs.push(retrieval::lexical::LexDoc {
                id: i as i64 + 1,
                project: format!("/work/project-{}", i % PROJECTS),
                kind: KINDS[i % KINDS.len()].to_owned(),
                session_id: format!("session-{}", i / SESSION_ITEMS),
                occurred_at,
                columns: retrieval::index::fts_columns(&title, &text, &prev, &prev2, occurred_at),
            });
            prev2 = std::mem::replace(&mut prev, text);
            if docs.len() == FILL_BATCH || i + 1 == size {
                lexical.load(&docs);
                docs.clear();
            }
        }
        lexical.set_ready();
        let (held, bytes) = lexical.size();
        println!(
            "search {size}: full-text copy of {held} items filled in {:.1}s, {:.1} MB",
            started.elapsed().as_secs_f64(),
            bytes as f64 / 1e6
        );
        let query_set = Queries {
            since_ms: now - (size as i64 / 4) * ITEM_GAP_MS,
        };
        let (mut plain, mut filtered) = (Vec::new(), Vec::new());
        for q in 0..queries + 10 {
            let request = query_set.request(q, q % 2 == 1, "fts");
            let phrases = store::fts::phrases(&request.query);
            let filter = retrieval::search::vector_filter(&request);
            let took = Instant::now();
            let found = lexical
                .search(&phrases, &tuning.columns, &filter, depth)
                .context("the full-text copy did not answer")?;
            let ms = took.elapsed().as_secs_f64() * 1000.0;
            anyhow::ensure!(q % 2 == 1 || !found.is_empty(), "ranking found nothing");
            if q >= 10 {
                if q % 2 == 1 {
                    &mut filtered
                } else {
                    &mut plain
                }
                .push(ms);
            }
        }
        let all: Vec<f64> = plain.iter().chain(&filtered).copied().collect();
        let (p50, p95) = spread(all);
        let (_, plain_p95) = spread(plain);
        let (_, filtered_p95) = spread(filtered);
        println!(
            "search {size}: full-text ranking alone p50_ms={p50:.2} p95_ms={p95:.2} (plain p95 {plain_p95:.2}, filtered p95 {filtered_p95:.2}), depth {depth}"
        );
        line.extend(latencies(&label(size), [p50, p95, plain_p95, filtered_p95]));
    }
    println!("search: {}", line.join(" "));
    Ok(())
}

/// Nearest-neighbour search in a Qdrant collection of each size, filled directly with the
/// bench's synthetic vectors (perturbed copies of real ones) through retrieval's own Qdrant
/// index, laid out as retrieval would (`MNEME_QDRANT_ON_DISK`, `MNEME_QDRANT_QUANTIZE`; a
/// collection of many millions would set both), as a bulk load: the search graphs are built
/// once all the vectors are in. Timed once the collection is indexed:
/// the query embedding, and the search plain and filtered (project, kind, time), `k` 50 as a
/// hybrid search of ten asks.
async fn vectors_only(
    options: &Options,
    args: &retrieval::RetrievalArgs,
    queries: usize,
) -> anyhow::Result<()> {
    use retrieval::vector::{Space, VectorIndex as _};
    // `MNEME_BENCH_REUSE=1` keeps the collections for a later run and searches one already
    // holding as many points rather than loading it again.
    let reuse = flag("MNEME_BENCH_REUSE", false)?;
    // `MNEME_BENCH_HNSW_EF=64,128`: each collection is also searched with these beams
    // (`MNEME_QDRANT_HNSW_EF`), after the server's own.
    let search_efs: Vec<u64> = match std::env::var("MNEME_BENCH_HNSW_EF") {
        Ok(list) => list
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .with_context(|| format!("MNEME_BENCH_HNSW_EF={list:?}: not a list of numbers"))
            })
            .collect::<anyhow::Result<_>>()?,
        Err(_) => Vec::new(),
    };
    let base = base_vectors(args).await?;
    let model = retrieval::models::LocalModel::load(
        args.embed_model_dir
            .as_deref()
            .context("no embedding model directory")?,
    )?;
    let index = retrieval::vector::qdrant::Qdrant::connect(
        &args.qdrant_url,
        args.qdrant_api_key.clone(),
        Duration::from_secs(120),
    )?
    .with_layout(args.qdrant_layout())?
    .with_oversampling(args.qdrant_oversampling)?;
    let mut line = vec![format!(
        "index=qdrant vectors_only=1 on_disk={} quantize={} ef_construct={} max_segment_kb={}",
        u8::from(args.qdrant_on_disk),
        u8::from(args.qdrant_quantize),
        or_default(args.qdrant_ef_construct),
        or_default(args.qdrant_max_segment_kb),
    )];
    for &size in &options.sizes {
        let space = Space {
            model: "mneme-bench-synthetic".to_owned(),
            dim: base[0].len(),
            table: format!("vec_bench_{}", label(size)),
        };
        // A collection this size left by an earlier run with `MNEME_BENCH_REUSE` is searched
        // as it is: ten million vectors take more than an hour to load and index on two cores,
        // and search settings can be compared on the same graphs.
        let built = if reuse && index.points(&space).await? == Some(size as u64) {
            index.loaded(&space).await;
            println!("search {size}: reusing the collection left by an earlier run");
            None
        } else {
            Some(load(&index, &space, &base, size).await?)
        };
        let query_set = Queries {
            since_ms: (size as i64 * 3 / 4) * ITEM_GAP_MS,
        };
        let k = label(size);
        // The server's own search beam first, then each one asked for, on the same graphs.
        for ef in std::iter::once(None).chain(search_efs.iter().copied().map(Some)) {
            let searcher = index.clone().with_search_ef(ef)?;
            let m = time_queries(&searcher, &model, &space, &query_set, queries).await?;
            let at = ef.map_or_else(String::new, |ef| format!("_ef{ef}"));
            println!(
                "search {size}{at}: query embedding and vector search p50_ms={:.2} p95_ms={:.2} (plain p95 {:.2}, filtered p95 {:.2}; embedding alone p50 {:.2}); recall@10 against exact search {:.3} over {RECALL_QUERIES} queries",
                m.p50, m.p95, m.plain_p95, m.filtered_p95, m.embed_p50, m.recall
            );
            line.push(format!("recall10_{k}{at}={:.3}", m.recall));
            line.extend(latencies(
                &format!("{k}{at}"),
                [m.p50, m.p95, m.plain_p95, m.filtered_p95],
            ));
        }
        if let Some((upload_s, indexed_s)) = built {
            line.extend([
                format!("upload_s_{k}={upload_s:.0}"),
                format!("indexed_s_{k}={indexed_s:.0}"),
            ]);
        }
        if !reuse {
            index.drop_space(&space).await?;
        }
    }
    println!("search: {}", line.join(" "));
    Ok(())
}

/// Queries of a vectors-only run whose graph answers are judged against exact search, half
/// of them filtered.
const RECALL_QUERIES: usize = 20;

/// The release `mneme` beside this bench, which runs the service. It is not built from here:
/// building one binary alone unifies the workspace's features differently and rebuilds shared
/// dependencies.
fn service_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .context("the bench binary has no directory")?
        .join("mneme");
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: build it with `cargo build --release --workspace --bins`",
        path.display()
    );
    Ok(path)
}

/// What every size is measured with.
struct Setup {
    index: Index,
    args: retrieval::RetrievalArgs,
    /// The release `mneme`, which runs the service.
    mneme: PathBuf,
    /// The real vectors the items' vectors are made from.
    base: Vec<Vec<f32>>,
    /// Hybrid queries timed in each set.
    queries: usize,
    /// Where each size's store is kept between runs, if anywhere.
    keep: Option<PathBuf>,
}

/// Fill a store of `size` items, time the parts of a search in this process, then measure the
/// service on it.
async fn measure(setup: &Setup, size: usize) -> anyhow::Result<Figures> {
    let Setup {
        index,
        ref args,
        ref base,
        queries,
        ..
    } = *setup;
    let temp;
    let home = match &setup.keep {
        Some(root) => {
            let home = root.join(label(size));
            std::fs::create_dir_all(&home)
                .with_context(|| format!("creating {}", home.display()))?;
            home
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("mneme-bench-search-")
                .tempdir()?;
            temp.path().to_owned()
        }
    };
    let db = home.join("mneme.db");
    let common = common::CommonArgs {
        db: Some(db.clone()),
        home: Some(home.clone()),
        ..common::CommonArgs::from_env()
    };
    let mut store = store::Store::open(&db).await?;
    let mut vectors = retrieval::open_vectors(&common, args, store.pool())
        .await
        .map_err(anyhow::Error::msg)?;
    let kept = match setup.keep {
        Some(_) => filled_before(setup, &store, &vectors, size).await?,
        None => None,
    };
    if setup.keep.is_some() && kept.is_none() {
        // A kept directory holding anything else (or nothing yet) starts from an empty store.
        drop(vectors);
        store.close().await;
        for file in db_files(&db) {
            let _ = std::fs::remove_file(file);
        }
        store = store::Store::open(&db).await?;
        vectors = retrieval::open_vectors(&common, args, store.pool())
            .await
            .map_err(anyhow::Error::msg)?;
    }
    let (now, fill_s) = match kept {
        Some(now) => {
            println!(
                "search {size}: measuring the store kept in {}",
                home.display()
            );
            (now, None)
        }
        None => {
            if index == Index::Qdrant {
                // Every size fills the same collection (its name comes from the model): start
                // empty.
                vectors.index.drop_space(&vectors.space).await?;
                vectors.index.ensure(&vectors.space).await?;
            }
            let now = common::time::now_ms();
            (now, Some(fill(&store, &vectors, base, size, now).await?))
        }
    };
    let query_set = Queries {
        since_ms: now - (size as i64 / 4) * ITEM_GAP_MS,
    };
    in_process(&store, &vectors, size, queries, query_set).await?;
    if index == Index::Sqlite {
        one_bit_recall(&vectors, base, size, query_set).await?;
    }
    drop(vectors);
    // Closing checkpoints the WAL into the database, as a service stopping would.
    store.close().await;
    let store_bytes = store_size(&db);
    println!(
        "search {size}: store {:.0} MB on disk ({:.0} bytes an item)",
        store_bytes as f64 / 1e6,
        store_bytes as f64 / size as f64
    );
    let service = serve(setup, &home, &db, query_set, size).await?;
    Ok(Figures {
        size,
        fill_s,
        store_bytes,
        service,
    })
}

/// When a kept store already holds `size` items with every vector in the index (for Qdrant,
/// the collection holds as many points), the moment its fill took as now; otherwise `None`.
async fn filled_before(
    setup: &Setup,
    store: &store::Store,
    vectors: &retrieval::backfill::Vectors,
    size: usize,
) -> anyhow::Result<Option<i64>> {
    let (items, upto, newest): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM memory_items),
                (SELECT embedded_upto FROM vector_spaces WHERE model = ?),
                (SELECT max(occurred_at) FROM memory_items)",
    )
    .bind(&vectors.space.model)
    .fetch_one(store.pool())
    .await?;
    if items != size as i64 || upto.unwrap_or(0) < size as i64 {
        return Ok(None);
    }
    if setup.index == Index::Qdrant {
        let qdrant = retrieval::vector::qdrant::Qdrant::connect(
            &setup.args.qdrant_url,
            setup.args.qdrant_api_key.clone(),
            Duration::from_secs(30),
        )?
        .with_prefix(&setup.args.qdrant_prefix)?;
        if qdrant.points(&vectors.space).await? != Some(size as u64) {
            return Ok(None);
        }
    }
    // The fill dates its last item one gap before its now.
    Ok(newest.map(|at| at + ITEM_GAP_MS))
}

/// The database's file, its WAL and its shared-memory file.
fn db_files(db: &Path) -> [PathBuf; 3] {
    ["", "-wal", "-shm"].map(|suffix| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Bytes of the database with its WAL and shared-memory files.
fn store_size(db: &Path) -> u64 {
    db_files(db)
        .iter()
        .filter_map(|file| std::fs::metadata(file).ok())
        .map(|m| m.len())
        .sum()
}

/// Items written per transaction while filling.
const FILL_BATCH: usize = 1_000;

/// Write `size` items as indexing does, their vectors into `embedding_cache` as the model
/// would, and let the background embedder move them into the index; returns the seconds taken.
async fn fill(
    store: &store::Store,
    vectors: &Arc<retrieval::backfill::Vectors>,
    base: &[Vec<f32>],
    size: usize,
    now: i64,
) -> anyhow::Result<f64> {
    let pool = store.pool();
    let started = Instant::now();
    // Written through a copy that is thrown away: the service loads its own from the store.
    let unused = retrieval::lexical::Lexical::new();
    let mut items = Vec::with_capacity(FILL_BATCH);
    let mut report = Instant::now();
    for i in 0..size {
        items.push(retrieval::index::NewItem {
            source: "synthetic",
            source_id: i as i64,
            kind: KINDS[i % KINDS.len()].to_owned(),
            session_id: format!("session-{}", i / SESSION_ITEMS),
            project: format!("/work/project-{}", i % PROJECTS),
            agent: "claude-code".to_owned(),
            author: "dev".to_owned(),
            tool_name: String::new(),
            title: synthetic_text(i as u64 * 7 + 3).chars().take(60).collect(),
            text: synthetic_text(i as u64),
            files: Vec::new(),
            concepts: Vec::new(),
            occurred_at: now - (size - i) as i64 * ITEM_GAP_MS,
            with_context: true,
        });
        if items.len() == FILL_BATCH || i + 1 == size {
            retrieval::index::write_items(pool, &unused, &items).await?;
            items.clear();
            if report.elapsed() > Duration::from_secs(30) {
                report = Instant::now();
                println!(
                    "search {size}: {} items written, {:.0}s",
                    i + 1,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    drop(unused);
    let written = started.elapsed().as_secs_f64();

    // The model's part: one vector per text, in the cache the embedder reads first.
    let mut after = 0i64;
    loop {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, text_hash FROM memory_items WHERE id > ? ORDER BY id LIMIT 5000",
        )
        .bind(after)
        .fetch_all(pool)
        .await?;
        let Some(&(last, _)) = rows.last() else { break };
        after = last;
        let mut tx = store::begin_write(pool).await?;
        for (id, hash) in &rows {
            let vector = perturbed(base, *id);
            sqlx::query(
                "INSERT OR IGNORE INTO embedding_cache (model, text_hash, vector) VALUES (?, ?, ?)",
            )
            .bind(&vectors.space.model)
            .bind(hash)
            .bind(retrieval::models::to_bytes(&vector))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
    }
    let cached = started.elapsed().as_secs_f64();

    // The embedder's part, by its own code: every text is in the cache, so no model runs, and
    // the index and the space's progress are written exactly as the service writes them.
    let mut moved = 0;
    loop {
        let n = vectors.step(pool).await?;
        if n == 0 {
            break;
        }
        moved += n;
        if report.elapsed() > Duration::from_secs(30) {
            report = Instant::now();
            println!(
                "search {size}: {moved} vectors indexed, {:.0}s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let (upto, items): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT embedded_upto FROM vector_spaces WHERE model = ?),
                (SELECT COUNT(*) FROM memory_items)",
    )
    .bind(&vectors.space.model)
    .fetch_one(pool)
    .await?;
    anyhow::ensure!(
        moved == size && items == size as i64 && upto >= size as i64,
        "only {moved} of {items} items have vectors"
    );
    let took = started.elapsed().as_secs_f64();
    // What the service counts every two seconds for its health detail (the embedding
    // backlog) once it has counted the embedded items: the items above its progress.
    let counting = Instant::now();
    let _: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM memory_items WHERE id > ?")
        .bind(upto)
        .fetch_one(pool)
        .await?;
    println!(
        "search {size}: the service's progress count takes {:.1} ms",
        counting.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "search {size}: store filled in {took:.1}s (items and full-text {written:.1}s, embedding cache {:.1}s, vector index {:.1}s; {:.0} items/s)",
        cached - written,
        took - cached,
        size as f64 / took
    );
    Ok(took)
}

/// Real vectors of a thousand distinct texts, which the items' vectors are perturbed copies of:
/// nearest-neighbour cost does not depend on what the vectors mean.
async fn base_vectors(args: &retrieval::RetrievalArgs) -> anyhow::Result<Vec<Vec<f32>>> {
    let dir = args
        .embed_model_dir
        .clone()
        .context("no embedding model directory")?;
    tokio::task::spawn_blocking(move || {
        let model = retrieval::models::LocalModel::load(&dir)?;
        let mut base = Vec::with_capacity(1_000);
        for chunk in (0..1_000u64).collect::<Vec<_>>().chunks(64) {
            let texts: Vec<String> = chunk.iter().map(|&i| synthetic_text(i)).collect();
            base.extend(model.embed(&texts)?);
        }
        Ok(base)
    })
    .await?
}

/// The vector of item `id`: one of the real ones, moved a little, at unit length.
fn perturbed(base: &[Vec<f32>], id: i64) -> Vec<f32> {
    let seed = lcg(id as u64 ^ 0x9e37_79b9_7f4a_7c15);
    let b = &base[(seed >> 20) as usize % base.len()];
    let noise = (seed >> 40) as f32 / (1u64 << 24) as f32;
    let v = b
        .iter()
        .enumerate()
        .map(|(d, x)| x + 0.05 * (d as f32 * noise).sin())
        .collect();
    retrieval::models::normalise(v)
}

/// Where a search spends its time, measured in this process as before: the in-memory full-text
/// ranking (`fts`), FTS5's own (`fts5`), the vector search, the query embedding, and whole
/// hybrid searches.
async fn in_process(
    store: &store::Store,
    vectors: &Arc<retrieval::backfill::Vectors>,
    size: usize,
    queries: usize,
    query_set: Queries,
) -> anyhow::Result<()> {
    let lexical = Arc::new(retrieval::lexical::Lexical::new());
    let loading = Instant::now();
    retrieval::index::load_lexical(store.pool(), &lexical).await?;
    let (loaded, bytes) = lexical.size();
    println!(
        "search {size}: in-process full-text copy of {loaded} items loaded in {:.2}s, {:.1} MB",
        loading.elapsed().as_secs_f64(),
        bytes as f64 / 1e6
    );
    vectors.index.loaded(&vectors.space).await;
    let searcher = Searcher {
        pool: store.pool().clone(),
        vectors: Some(Arc::clone(vectors)),
        lexical,
        tuning: Tuning::default(),
    };
    // `fts5` is full-text search ranked by SQLite, as without the in-memory copy.
    let in_sqlite = Searcher {
        lexical: Default::default(),
        ..searcher.clone()
    };
    let mut parts = Vec::new();
    for mode in ["fts", "fts5", "vector", "embed"] {
        let mut timings = Vec::new();
        let started = Instant::now();
        // Half of them filtered. FTS5 ranks every match, seconds a query on a large store:
        // each part gets at most half a minute.
        for q in 0..queries.min(100) {
            if started.elapsed() > Duration::from_secs(30) {
                break;
            }
            let request = query_set.request(q, q % 2 == 1, mode);
            let took = Instant::now();
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
            timings.push(took.elapsed().as_secs_f64() * 1000.0);
        }
        let n = timings.len();
        let (p50, p95) = spread(timings);
        parts.push(format!("{mode} p50_ms={p50:.2} p95_ms={p95:.2} n={n}"));
    }
    println!("search {size}: in-process {}", parts.join(", "));
    let mut timings = Vec::with_capacity(queries);
    for q in 0..queries + 10 {
        let request = query_set.request(q, q % 2 == 1, "hybrid");
        let started = Instant::now();
        let (hits, mode) = searcher.search(&request).await?;
        let took = started.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(mode == "hybrid", "asked hybrid, ran {mode}");
        anyhow::ensure!(q % 2 == 1 || !hits.is_empty(), "search found nothing");
        if q >= 10 {
            timings.push(took);
        }
    }
    let (p50, p95) = spread(timings);
    println!(
        "search {size}: in-process hybrid p50_ms={p50:.2} p95_ms={p95:.2} queries={queries} (half filtered)"
    );
    Ok(())
}

/// What the one-bit ranking of a large in-memory vector copy keeps of the exact scan's answer,
/// and what each costs: a copy of the store's vectors is built in this process (as the service
/// loads one), and the vectors of the bench's queries are searched both ways, unfiltered.
async fn one_bit_recall(
    vectors: &Arc<retrieval::backfill::Vectors>,
    base: &[Vec<f32>],
    size: usize,
    query_set: Queries,
) -> anyhow::Result<()> {
    let mut queries = Vec::new();
    for q in 0..50 {
        let request = query_set.request(q, false, "vector");
        queries.push(vectors.embed_query(&request.query).await?);
    }
    let base = base.to_vec();
    let line = tokio::task::spawn_blocking(move || {
        let mut flat = retrieval::vector::flat::Flat::new(base[0].len());
        for id in 1..=size as i64 {
            flat.upsert(&retrieval::vector::Point {
                id,
                vector: perturbed(&base, id),
                project: String::new(),
                kind: String::new(),
                session_id: String::new(),
                occurred_at: 0,
            });
        }
        let filter = retrieval::vector::VectorFilter::default();
        let mut parts = Vec::new();
        for k in [10, 50] {
            let (mut kept, mut asked) = (0, 0);
            let (mut fast, mut exact) = (Vec::new(), Vec::new());
            for query in &queries {
                let started = Instant::now();
                let got = flat.knn(query, k, &filter);
                fast.push(started.elapsed().as_secs_f64() * 1000.0);
                let started = Instant::now();
                let want = flat.knn_exact(query, k, &filter);
                exact.push(started.elapsed().as_secs_f64() * 1000.0);
                kept += want.iter().filter(|w| got.iter().any(|g| g.0 == w.0)).count();
                asked += want.len();
            }
            let ((fast, _), (exact, _)) = (spread(fast), spread(exact));
            parts.push(format!(
                "@{k} {:.3} (p50 {fast:.1} ms against {exact:.1} ms)",
                kept as f64 / asked.max(1) as f64
            ));
        }
        format!(
            "search {size}: vector recall of the in-memory copy against its exact scan {} over {} queries",
            parts.join(", "),
            queries.len()
        )
    })
    .await?;
    println!("{line}");
    Ok(())
}

/// What the service process measured.
struct Service {
    /// Hybrid search through NATS, all queries, then plain and filtered apart.
    p50: f64,
    p95: f64,
    plain_p95: f64,
    filtered_p95: f64,
    /// From the process's start to the first search answered, and to both in-memory copies
    /// loaded.
    first_answer_ms: f64,
    loaded_ms: f64,
    /// Peak resident memory of the process (`VmHWM`).
    peak_rss_mb: f64,
}

/// Run `mneme serve retrieval` on the filled store with a `nats-server` of its own: time its
/// start, search through NATS once it is warm, and read its peak memory.
async fn serve(
    setup: &Setup,
    home: &Path,
    db: &Path,
    query_set: Queries,
    size: usize,
) -> anyhow::Result<Service> {
    let Setup {
        index,
        ref args,
        ref mneme,
        queries,
        ..
    } = *setup;
    let binary = nats_server::find(
        std::env::var_os("MNEME_NATS_SERVER")
            .map(PathBuf::from)
            .as_deref(),
    )
    .context(nats_server::INSTALL_HINT)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let nats = LocalNats::start(&binary, port, &home.join("nats"), "", None).await?;
    let client = async_nats::connect(&nats.url).await?;
    // A restart after a reboot reads the store from disk: drop its pages from the page cache
    // (GNU dd's `nocache`; where it cannot, the start is measured warm and says so).
    let cold = evict(db);
    let log_path = home.join("retrieval.log");
    let log = std::fs::File::create(&log_path)?;
    let model_dir = args
        .embed_model_dir
        .as_ref()
        .context("no embedding model directory")?;
    let mut command = tokio::process::Command::new(mneme);
    command
        .args(["serve", "retrieval"])
        .env("MNEME_HOME", home)
        .env("MNEME_DB", db)
        .env("MNEME_NATS_URL", &nats.url)
        .env("MNEME_EMBED", "local")
        .env("MNEME_EMBED_MODEL_DIR", model_dir)
        .env("MNEME_VECTOR_INDEX", index.name())
        .env("MNEME_QDRANT_URL", &args.qdrant_url)
        // JSON, so the bench can read when each in-memory copy is loaded; at info, whatever the
        // bench's own MNEME_LOG says.
        .env("MNEME_LOG_FORMAT", "json")
        .env("MNEME_LOG", "info,sqlx=warn,async_nats=warn")
        .env_remove("MNEME_NATS_KEYS")
        .env_remove("MNEME_NATS_NKEY")
        .env_remove("MNEME_NATS_CREDS")
        .env_remove("MNEME_NATS_TOKEN")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    if let Some(key) = &args.qdrant_api_key {
        command.env("MNEME_QDRANT_API_KEY", key);
    }
    let started = Instant::now();
    let mut child = command.spawn().context("starting mneme serve retrieval")?;
    let pid = child.id().context("the service has no process id")?;
    let result = async {
        // The first search a hook would send at session start: one project's memory.
        let first = query_set.request(0, true, "hybrid");
        let (first_answer_ms, first_took_ms) = loop {
            if let Some(status) = child.try_wait()? {
                anyhow::bail!(
                    "the service exited at start ({status}): {}",
                    tail(&log_path)
                );
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(600),
                "the service did not answer within 10 minutes: {}",
                tail(&log_path)
            );
            let asked = Instant::now();
            match ask(&client, &first).await {
                Ok(_) => {
                    break (
                        started.elapsed().as_secs_f64() * 1e3,
                        asked.elapsed().as_secs_f64() * 1e3,
                    );
                }
                Err(Asked::NotYet) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(Asked::Failed(error)) => return Err(error),
            }
        };
        let loaded = wait_loaded(&log_path, index, started, &mut child).await?;
        println!(
            "search {size}: service ({}) answered first after {first_answer_ms:.0} ms (that search took {first_took_ms:.0} ms); {}",
            if cold { "cold start" } else { "warm start" },
            loaded.describe()
        );
        let mut all = Vec::with_capacity(2 * queries);
        let mut sets = Vec::new();
        for filtered in [false, true] {
            let mut timings = Vec::with_capacity(queries);
            for q in 0..queries + 10 {
                let request = query_set.request(q, filtered, "hybrid");
                let asked = Instant::now();
                let reply = match ask(&client, &request).await {
                    Ok(reply) => reply,
                    Err(Asked::NotYet) => anyhow::bail!("the service stopped answering"),
                    Err(Asked::Failed(error)) => return Err(error),
                };
                let took = asked.elapsed().as_secs_f64() * 1e3;
                anyhow::ensure!(
                    reply.mode == "hybrid",
                    "asked hybrid, ran {}; see {}",
                    reply.mode,
                    log_path.display()
                );
                anyhow::ensure!(filtered || !reply.hits.is_empty(), "search found nothing");
                if q >= 10 {
                    timings.push(took);
                }
            }
            all.extend(&timings);
            sets.push(spread(timings));
        }
        let (p50, p95) = spread(all);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb = |key: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(f64::NAN)
        };
        let (peak_rss_mb, rss_mb) = (kb("VmHWM:") / 1024.0, kb("VmRSS:") / 1024.0);
        println!(
            "search {size}: service hybrid p50_ms={p50:.2} p95_ms={p95:.2}; plain p50_ms={:.2} p95_ms={:.2}; filtered p50_ms={:.2} p95_ms={:.2}; queries={queries} each, through NATS",
            sets[0].0, sets[0].1, sets[1].0, sets[1].1
        );
        println!(
            "search {size}: service memory peak_rss_mb={peak_rss_mb:.0} rss_mb={rss_mb:.0}"
        );
        if setup.keep.is_some() {
            println!("search {size}: retention not measured, the store is kept");
        } else {
            retention(&client, size, query_set).await?;
        }
        Ok(Service {
            p50,
            p95,
            plain_p95: sets[0].1,
            filtered_p95: sets[1].1,
            first_answer_ms,
            loaded_ms: loaded.all_ms(),
            peak_rss_mb,
        })
    }
    .await;
    stop(&mut child, pid).await;
    nats.stop().await;
    result
}

/// Drop the store's pages from the page cache; whether it could.
fn evict(db: &Path) -> bool {
    let mut evicted = true;
    // The database and its WAL, which searches read; not the shared-memory index.
    for file in db_files(db).into_iter().take(2) {
        if !file.exists() {
            continue;
        }
        let done = std::process::Command::new("dd")
            .arg(format!("if={}", file.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .stderr(std::process::Stdio::null())
            .status();
        evicted &= done.is_ok_and(|s| s.success());
    }
    evicted
}

/// Why a search got no answer.
enum Asked {
    /// Nothing listens on the subject yet.
    NotYet,
    Failed(anyhow::Error),
}

/// One search through NATS, waiting as long as a search on a cold large store may take.
/// Retention at scale: forget the sessions holding the oldest tenth of the items, as retention
/// deletes them, through the service; how long that takes, and how slow the searches asked
/// meanwhile are (deleting must not stall answering).
async fn retention(
    client: &async_nats::Client,
    size: usize,
    query_set: Queries,
) -> anyhow::Result<()> {
    let sessions: Vec<String> = (0..(size / 10).div_ceil(SESSION_ITEMS))
        .map(|n| format!("session-{n}"))
        .collect();
    let request = proto::ForgetRequest {
        session_ids: sessions.clone(),
    };
    let message = async_nats::Request::new()
        .payload(request.encode_to_vec().into())
        .timeout(Some(Duration::from_secs(3_600)));
    let started = Instant::now();
    let forget = client.send_request(proto::subjects::RETRIEVAL_FORGET, message);
    tokio::pin!(forget);
    let mut during = Vec::new();
    let reply = loop {
        tokio::select! {
            reply = &mut forget => break reply?,
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                let request = query_set.request(during.len(), during.len() % 2 == 1, "hybrid");
                let asked = Instant::now();
                match ask(client, &request).await {
                    Ok(_) => during.push(asked.elapsed().as_secs_f64() * 1e3),
                    Err(Asked::NotYet) => anyhow::bail!("the service stopped answering"),
                    Err(Asked::Failed(error)) => return Err(error),
                }
            }
        }
    };
    let took = started.elapsed().as_secs_f64();
    let reply = proto::ForgetReply::decode(reply.payload)?;
    anyhow::ensure!(reply.error.is_empty(), "forgetting failed: {}", reply.error);
    let searches = during.len();
    let (p50, p95) = spread(during);
    println!(
        "search {size}: retention forgot {} sessions ({} items) in {took:.1}s; {searches} searches meanwhile p50_ms={p50:.1} p95_ms={p95:.1}",
        sessions.len(),
        reply.items
    );
    Ok(())
}

async fn ask(
    client: &async_nats::Client,
    request: &proto::SearchRequest,
) -> Result<proto::SearchReply, Asked> {
    let message = async_nats::Request::new()
        .payload(request.encode_to_vec().into())
        .timeout(Some(Duration::from_secs(300)));
    let reply = match client
        .send_request(proto::subjects::RETRIEVAL_SEARCH, message)
        .await
    {
        Ok(reply) => reply,
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
            return Err(Asked::NotYet);
        }
        Err(e) => return Err(Asked::Failed(anyhow::Error::new(e).context("searching"))),
    };
    let reply = proto::SearchReply::decode(reply.payload)
        .map_err(|e| Asked::Failed(anyhow::Error::new(e).context("reading a search reply")))?;
    if !reply.error.is_empty() {
        return Err(Asked::Failed(anyhow::anyhow!(
            "search failed: {}",
            reply.error
        )));
    }
    Ok(reply)
}

/// When the service's in-memory copies were loaded, from its start, as its log says.
#[derive(Default)]
struct Loaded {
    /// When the bench saw the line, and what the service says the load took.
    vectors: Option<(f64, u64)>,
    lexical: Option<(f64, u64, u64)>,
}

impl Loaded {
    fn all_ms(&self) -> f64 {
        let vectors = self.vectors.map_or(0.0, |v| v.0);
        let lexical = self.lexical.map_or(0.0, |l| l.0);
        vectors.max(lexical)
    }

    fn describe(&self) -> String {
        let vectors = match self.vectors {
            Some((at, took)) => {
                format!("vectors in memory after {at:.0} ms (their load took {took} ms)")
            }
            None => "no in-memory vectors (Qdrant searches on its server)".to_owned(),
        };
        let lexical = match self.lexical {
            Some((at, took, bytes)) => format!(
                "full-text copy after {at:.0} ms (its load took {took} ms, {:.0} MB)",
                bytes as f64 / 1e6
            ),
            None => "no full-text copy".to_owned(),
        };
        format!("{vectors}, {lexical}")
    }
}

/// Wait until the service's log says both in-memory copies are loaded (only the full-text one
/// with Qdrant); the times are when the bench saw each line, polled every 20 ms.
async fn wait_loaded(
    log: &Path,
    index: Index,
    started: Instant,
    child: &mut tokio::process::Child,
) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let fields = &entry["fields"];
            let number = |key: &str| fields[key].as_u64().unwrap_or_default();
            let at = started.elapsed().as_secs_f64() * 1e3;
            match fields["message"].as_str().unwrap_or_default() {
                "vectors loaded into memory" if loaded.vectors.is_none() => {
                    loaded.vectors = Some((at, number("ms")));
                }
                "in-memory full-text index loaded" if loaded.lexical.is_none() => {
                    loaded.lexical = Some((at, number("took_ms"), number("bytes")));
                }
                message
                    if message.starts_with("could not load vectors")
                        || message.starts_with("in-memory full-text index not loaded") =>
                {
                    anyhow::bail!("the service could not load its in-memory copy: {line}");
                }
                _ => {}
            }
        }
        if loaded.lexical.is_some() && (index == Index::Qdrant || loaded.vectors.is_some()) {
            return Ok(loaded);
        }
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the service exited ({status}): {}", tail(log));
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1_200),
            "the service did not load its in-memory copies within 20 minutes: {}",
            tail(log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last lines of a log, for an error message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Stop the service as its supervisor would: SIGTERM, then SIGKILL after a grace period.
async fn stop(child: &mut tokio::process::Child, pid: u32) {
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await;
    if tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// Write `size` synthetic vectors into a fresh collection of `space` as a bulk load (graphs
/// built once the vectors are in) and wait for its graphs: the seconds the writing took, and
/// until the graphs covered the collection.
async fn load(
    index: &retrieval::vector::qdrant::Qdrant,
    space: &retrieval::vector::Space,
    base: &[Vec<f32>],
    size: usize,
) -> anyhow::Result<(f64, f64)> {
    use futures::StreamExt as _;
    use retrieval::vector::{Point, VectorIndex as _};
    index.drop_space(space).await?;
    index.ensure(space).await?;
    // Loaded as Qdrant advises for bulk uploads, with the graphs built once the vectors
    // are in; the collection ends up in the same segments either way.
    let threshold = index.pause_indexing(space).await?;
    let started = Instant::now();
    let mut last_said = Instant::now();
    let batches = (0..size as i64).step_by(1_000).map(|from| async move {
        let points: Vec<Point> = (from..(from + 1_000).min(size as i64))
            .map(|id| Point {
                id: id + 1,
                vector: perturbed(base, id + 1),
                project: format!("/work/project-{}", id as usize % PROJECTS),
                kind: KINDS[id as usize % KINDS.len()].to_owned(),
                session_id: format!("s{}", id as usize / SESSION_ITEMS),
                occurred_at: id * ITEM_GAP_MS,
            })
            .collect();
        index.upsert(space, &points).await.map(|()| points.len())
    });
    let mut written = 0;
    let mut uploads = futures::stream::iter(batches).buffer_unordered(4);
    while let Some(done) = uploads.next().await {
        written += done?;
        if last_said.elapsed() > Duration::from_secs(30) {
            last_said = Instant::now();
            println!(
                "search {size}: {written} vectors written, {:.0}s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let upload_s = started.elapsed().as_secs_f64();
    index.resume_indexing(space, threshold).await?;
    index.loaded(space).await;
    let indexed_s = started.elapsed().as_secs_f64();
    println!(
        "search {size}: {written} vectors written in {upload_s:.0}s, indexed after {indexed_s:.0}s"
    );
    Ok((upload_s, indexed_s))
}

/// What the timed searches of one setting measured.
struct Timed {
    p50: f64,
    p95: f64,
    plain_p95: f64,
    filtered_p95: f64,
    embed_p50: f64,
    recall: f64,
}

/// Time `queries` searches (after ten to warm up), each the query's embedding and a vector
/// search of `k` 50 as a hybrid search of ten asks, half of them filtered (project, kind,
/// time); and judge the graph on the first [`RECALL_QUERIES`]: how many of the true ten nearest
/// its top ten holds, against an exact search.
async fn time_queries(
    index: &retrieval::vector::qdrant::Qdrant,
    model: &retrieval::models::LocalModel,
    space: &retrieval::vector::Space,
    query_set: &Queries,
    queries: usize,
) -> anyhow::Result<Timed> {
    use retrieval::vector::VectorIndex as _;
    let (mut embed, mut plain, mut filtered) = (Vec::new(), Vec::new(), Vec::new());
    // An exact search reads every vector, seconds each at ten million, so only the first
    // queries are judged.
    let (mut found, mut judged) = (0usize, 0usize);
    for q in 0..queries + 10 {
        let filter_on = q % 2 == 1;
        let request = query_set.request(q, filter_on, "vector");
        let took = Instant::now();
        let vector = model
            .embed(std::slice::from_ref(&request.query))?
            .pop()
            .context("no query vector")?;
        let embedded = took.elapsed().as_secs_f64() * 1000.0;
        let filter = retrieval::search::vector_filter(&request);
        let took = Instant::now();
        let hits = index.knn(space, &vector, 50, &filter).await?;
        let searched = took.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(filter_on || hits.len() == 50, "search found {}", hits.len());
        if q < 10 {
            continue;
        }
        if q < 10 + RECALL_QUERIES {
            let truth = index.knn_exact(space, &vector, 10, &filter).await?;
            let top: std::collections::HashSet<i64> =
                hits.iter().take(10).map(|&(id, _)| id).collect();
            found += truth.iter().filter(|(id, _)| top.contains(id)).count();
            judged += truth.len();
        }
        embed.push(embedded);
        let whole = embedded + searched;
        if filter_on {
            filtered.push(whole)
        } else {
            plain.push(whole)
        }
    }
    let all: Vec<f64> = plain.iter().chain(&filtered).copied().collect();
    let ((p50, p95), (_, plain_p95), (_, filtered_p95), (embed_p50, _)) =
        (spread(all), spread(plain), spread(filtered), spread(embed));
    Ok(Timed {
        p50,
        p95,
        plain_p95,
        filtered_p95,
        embed_p50,
        recall: found as f64 / judged.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_labels() {
        assert_eq!(
            parse_sizes("10000,100k, 1m").unwrap(),
            [10_000, 100_000, 1_000_000]
        );
        assert_eq!(parse_sizes("1_000_000").unwrap(), [1_000_000]);
        assert!(parse_sizes("ten").is_err());
        assert_eq!(label(10_000), "10k");
        assert_eq!(label(1_000_000), "1m");
        assert_eq!(label(2_500), "2500");
    }
}
