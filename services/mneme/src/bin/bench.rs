//! `mneme-bench NAME`: benchmarks that print figures; the last line is `NAME: key=value ...`.
//!
//! - `hook [--agent HOST|all]`: process start to exit of the release `mneme-hook` on a typical
//!   tool-call payload of that host (Claude Code by default), with NATS up and with NATS down.
//! - `import`: records per second of `mneme import claude-code` on the real transcripts, read to
//!   acknowledged publish, and to stored rows.
//! - `ingest [--events N]`: sustained events per second through NATS into SQLite with
//!   sanitisation on, end-to-end lag (hook capture time to committed row) at a steady rate, and
//!   then retrieval started on everything stored, as after an import: the time until all of it
//!   is found by full-text search, until all of it is found by meaning, and the model's rate.
//!
//! - `locomo`: turn-level evidence recall on LoCoMo through the real pipeline, for full-text,
//!   vector and hybrid search.
//! - `coding`: hit@k and session recall of questions about earlier coding sessions
//!   (`tests/fixtures/coding-questions.json`) over the real Claude Code transcripts imported
//!   with `mneme import claude-code`, for full-text, vector and hybrid search, dev and test.
//! - `histories`: session recall on generated long multi-session histories of a developer
//!   (`MNEME_BENCH_HISTORIES`, 12 by default; even ones dev, odd ones test) imported with
//!   `mneme import claude-code`, per question category, for full-text, vector and hybrid search.
//! - `search [--items N[,N...]] [--index sqlite|qdrant]`: hybrid search latency (query
//!   embedding included) at 10k and 100k items by default, with and without filters, through
//!   a real `mneme serve retrieval` process, with its start-up time, peak memory and the store's
//!   size; and the parts of a search timed in-process.
//! - `compress`: per-event cost of the compressor and the pattern detector, and checkpoint
//!   creation time, on the real Claude Code transcripts.
//! - `embed`: items per second of each embedding strategy (MiniLM as the backfill batches it,
//!   MiniLM batched by length, the static table distilled from it) on real coding-session
//!   items, and their vector-only and hybrid recall on LoCoMo's test split (conversations 3-9).
//! - `capabilities`: hit@1, hit@3 and false injection of capability matching on the labelled
//!   set in `tests/fixtures/capabilities/` (thresholds tuned on its dev split, figures of its
//!   test split), flat and two-stage, with and without the instruction prefix; and the match's
//!   latency with 1,000 capabilities.
//! - `team [--events N] [--offline N] [--rate R]`: team memory replicated laptop → hub →
//!   laptop with real servers (a 3-node hub, two `mneme up`): events per second and publish
//!   to stored latency while linked, and the catch-up time after events made offline.
//!
//! Run with `cargo run --release --bin mneme-bench -- NAME`.

#[path = "../bench/capabilities.rs"]
mod capabilities_bench;
#[path = "../bench/coding.rs"]
mod coding_bench;
#[path = "../bench/compress.rs"]
mod compress_bench;
#[path = "../bench/embed.rs"]
mod embed_bench;
#[path = "../bench/histories.rs"]
mod histories_bench;
#[path = "../nats_server.rs"]
#[allow(dead_code)]
mod nats_server;
#[path = "../bench/retrieval.rs"]
mod retrieval_bench;
#[path = "../bench/search.rs"]
mod search_bench;
#[path = "../bench/secrets.rs"]
mod secrets_bench;
#[path = "../bench/team.rs"]
mod team_bench;

use anyhow::Context as _;
use nats_server::LocalNats;
use proto::Message as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let name = std::env::args().nth(1).unwrap_or_default();
    match name.as_str() {
        "hook" => {
            let args: Vec<String> = std::env::args().collect();
            let agent = args
                .iter()
                .position(|a| a == "--agent")
                .and_then(|i| args.get(i + 1))
                .map_or("claude-code", String::as_str);
            if agent == "all" {
                let mut worst: f64 = 0.0;
                for host in hosts::HOSTS {
                    worst = worst.max(hook(host.name).await?);
                }
                println!("hook: agents=all worst_p99_ms={worst:.2}");
                Ok(())
            } else {
                hook(agent).await.map(|_| ())
            }
        }
        "import" => import_bench().await,
        "ingest" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            ingest(&args).await
        }
        "locomo" => retrieval_bench::locomo().await,
        "coding" => coding_bench::coding().await,
        "histories" => histories_bench::histories().await,
        "search" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            search_bench::search(&args).await
        }
        "compress" => compress_bench::compress().await,
        "embed" => embed_bench::embed().await,
        "secrets" => secrets_bench::secrets(),
        "capabilities" => capabilities_bench::capabilities().await,
        "team" => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            team_bench::team(&args).await
        }
        _ => anyhow::bail!(
            "usage: mneme-bench hook [--agent HOST|all]|import|ingest [--events N]|locomo|coding|histories|search [--items N[,N...]] [--index sqlite|qdrant]|compress|embed|secrets|capabilities|team [--events N] [--offline N] [--rate R]"
        ),
    }
}

struct Bed {
    nats: Option<LocalNats>,
    port: u16,
    home: tempfile::TempDir,
    common: common::CommonArgs,
    shutdown: CancellationToken,
    ingest: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Bed {
    async fn start(ingest_running: bool) -> anyhow::Result<Bed> {
        let home = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let binary = nats_server::find(
            std::env::var_os("MNEME_NATS_SERVER")
                .map(PathBuf::from)
                .as_deref(),
        )
        .context(nats_server::INSTALL_HINT)?;
        let nats = LocalNats::start(&binary, port, &home.path().join("nats"), "", None).await?;
        let mut common = common::CommonArgs::from_env();
        common.nats_url = nats.url.clone();
        common.home = Some(home.path().to_owned());
        common.db = Some(home.path().join("mneme.db"));
        let shutdown = CancellationToken::new();
        let client = async_nats::connect(&nats.url).await?;
        common::streams::ensure(&async_nats::jetstream::new(client)).await?;
        let ingest = ingest_running.then(|| {
            tokio::spawn(ingest::run(
                common.clone(),
                ingest::IngestArgs::default(),
                shutdown.clone(),
            ))
        });
        Ok(Bed {
            nats: Some(nats),
            port,
            home,
            common,
            shutdown,
            ingest,
        })
    }

    async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(ingest) = self.ingest.take() {
            let _ = ingest.await;
        }
        if let Some(nats) = self.nats.take() {
            nats.stop().await;
        }
    }
}

/// Other fusions of hybrid search, answered in-process on the same store after the service's
/// (`MNEME_BENCH_SWEEP=1`) by the `locomo`, `histories` and `coding` benches, each reported as
/// a mode of its own: to choose defaults on the development halves. The figures in a bench's
/// last line are always the service's.
fn fusion_sweep() -> Vec<(&'static str, retrieval::search::Tuning)> {
    use retrieval::search::{Fusion, Tuning};
    let Some(which) = std::env::var_os("MNEME_BENCH_SWEEP") else {
        return Vec::new();
    };
    let base = Tuning::default();
    let tunings: Vec<(String, Tuning)> = match which.to_string_lossy().as_ref() {
        // Pseudo-relevance feedback for questions asking for several answers, by its weight and
        // how many sessions' first hits it moves towards.
        "feedback" => [0.3, 0.6, 1.0]
            .into_iter()
            .flat_map(|weight| {
                [2, 3, 5, 8, 12].map(|sessions| {
                    (
                        format!("sweep feedback={weight} sessions={sessions}"),
                        Tuning {
                            feedback_weight: weight,
                            feedback_sessions: sessions,
                            ..base
                        },
                    )
                })
            })
            .collect(),
        // For a question about what holds now, how close a later hit's nearest piece must be to
        // a first hit's to move above it.
        "successor" => one_setting("successor", &[0.25, 0.3, 0.35, 0.4, 0.5], |t, cosine| {
            t.successor_cosine = cosine as f32;
        }),
        // A developer's short forms and long names searched for each other in full text, alone
        // and with a later statement moved above the one it changes.
        "forms" => [false, true]
            .into_iter()
            .flat_map(|forms| {
                [0.0, 0.3, 0.35, 0.4].map(|cosine| {
                    (
                        format!("sweep forms={forms} successor={cosine}"),
                        Tuning {
                            other_forms: forms,
                            successor_cosine: cosine,
                            ..base
                        },
                    )
                })
            })
            .filter(|(_, t)| t.other_forms || t.successor_cosine > 0.0)
            .collect(),
        // How much the items inside a time window the question names gain ("in June", "two
        // weeks before I moved"), around the default of 1.
        "window" => one_setting("window", &[0.0, 0.5, 2.0, 4.0], |t, boost| {
            t.window_boost = boost;
        }),
        // How much the assistant's answers gain for a question after what it said.
        "assistant" => one_setting("assistant", &[1.25, 1.5, 2.0, 3.0], |t, boost| {
            t.assistant_boost = boost;
        }),
        // Full text with the words that frame a question ("did you recommend"), which the
        // service leaves out.
        "framing" => vec![(
            "sweep framing=kept".to_owned(),
            Tuning {
                drop_framing: false,
                ..base
            },
        )],
        // For a question setting two events against each other, how far an event searched on
        // its own must put its best session ahead of the next to be given a place in the first
        // five (1: whenever it is missing there; 0: off).
        "events" => one_setting("events", &[0.0, 1.0, 1.1, 1.25, 1.5, 2.0], |t, margin| {
            t.two_events_margin = margin;
        }),
        // For "the first time", "most recently" or what holds "now": how much the earliest or
        // the latest of the strong candidates gains, around the default of 0.3.
        "order" => one_setting("order", &[0.0, 0.15, 0.6, 1.0], |t, boost| {
            t.order_boost = boost;
        }),
        // How much the newest items gain.
        "recency" => one_setting("recency", &[0.0, 0.1, 0.3], |t, boost| {
            t.recency_boost = boost;
        }),
        // The vector weight, and how few items must hold a query word for it to count as rare
        // (0: no word does), then reciprocal rank fusion. The least range cosines are scaled
        // over is the default's: 0 to 0.3 scored the same on every benchmark.
        _ => [0.4, 0.6, 1.0, 1.5]
            .into_iter()
            .flat_map(|w| {
                [0, 2, 5, 10, 25].map(|rare| {
                    (
                        format!("sweep vec={w} rare={rare}"),
                        Tuning {
                            vector_weight: w,
                            rare_items: rare,
                            ..base
                        },
                    )
                })
            })
            .chain([(
                "sweep rrf k=60".to_owned(),
                Tuning {
                    fusion: Fusion::Rrf { k: 60.0 },
                    vector_weight: 1.0,
                    ..base
                },
            )])
            .collect(),
    };
    leak_labels(tunings)
}

/// The default tuning with one setting given each of `values`, labelled `sweep <name>=<value>`.
fn one_setting(
    name: &str,
    values: &[f64],
    set: fn(&mut retrieval::search::Tuning, f64),
) -> Vec<(String, retrieval::search::Tuning)> {
    values
        .iter()
        .map(|&value| {
            let mut tuning = retrieval::search::Tuning::default();
            set(&mut tuning, value);
            (format!("sweep {name}={value}"), tuning)
        })
        .collect()
}

/// The labels are keys of the tally for the whole run, so they live as long as it.
fn leak_labels(
    tunings: Vec<(String, retrieval::search::Tuning)>,
) -> Vec<(&'static str, retrieval::search::Tuning)> {
    tunings
        .into_iter()
        .map(|(label, tuning)| (&*Box::leak(label.into_boxed_str()), tuning))
        .collect()
}

/// One in-process searcher per tuning over a bench's `store`, sharing its vector space and one
/// full-text copy loaded once: how the sweeps score other tunings on the stores the service
/// filled.
async fn sweep_searchers(
    common: &common::CommonArgs,
    args: &retrieval::RetrievalArgs,
    store: &store::Store,
    tunings: impl IntoIterator<Item = retrieval::search::Tuning>,
) -> anyhow::Result<Vec<retrieval::search::Searcher>> {
    let common = common::CommonArgs {
        db: Some(store.path().to_owned()),
        ..common.clone()
    };
    let vectors = retrieval::open_vectors(&common, args, store.pool())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let lexical = std::sync::Arc::new(retrieval::lexical::Lexical::new());
    retrieval::index::load_lexical(store.pool(), &lexical).await?;
    Ok(tunings
        .into_iter()
        .map(|tuning| retrieval::search::Searcher {
            pool: store.pool().clone(),
            vectors: Some(vectors.clone()),
            lexical: lexical.clone(),
            tuning,
        })
        .collect())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(|a, b| a.total_cmp(b));
    values
}

/// The release hook binary next to this one, built first if needed.
/// The hook measured: `MNEME_BENCH_HOOK_BIN` when set (another build, to compare with this
/// one on the same machine and payloads), else this workspace's release build.
fn hook_binary() -> anyhow::Result<PathBuf> {
    match std::env::var_os("MNEME_BENCH_HOOK_BIN") {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => release_binary("mneme-hook"),
    }
}

/// A release binary of the workspace next to this one, built first if needed.
fn release_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("bench binary has no directory")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut build = Command::new(cargo);
    build
        .current_dir(root)
        .args(["build", "--quiet", "--bin", name])
        // `cargo run` sets CARGO_MANIFEST_DIR, which some build scripts watch: without this the
        // hook build would rebuild them.
        .env_remove("CARGO_MANIFEST_DIR");
    if dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status().with_context(|| format!("building {name}"))?;
    anyhow::ensure!(status.success(), "building {name} failed");
    Ok(dir.join(name))
}

fn typical_payload(i: usize) -> Vec<u8> {
    let stdout: String = (0..40)
        .map(|n| format!("test module::case_{n} ... ok\n"))
        .collect();
    serde_json::json!({
        "session_id": "bench-session",
        "transcript_path": "/home/dev/.claude/projects/-home-dev-app/bench-session.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test --workspace", "description": "Run the tests"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false},
        "tool_use_id": format!("toolu_bench_{i}"),
    })
    .to_string()
    .into_bytes()
}

/// A typical tool-call payload of `agent`: Claude Code's own, or the host's fixture with a
/// unique marker so no two runs send the same bytes.
fn host_payload(agent: &str, i: usize) -> anyhow::Result<Vec<u8>> {
    let file = match agent {
        "claude-code" => return Ok(typical_payload(i)),
        "cursor" => "cursor/postToolUse.json",
        "kiro" => "kiro/postToolUse.json",
        "gemini" => "gemini/AfterTool.json",
        "kimi" => "kimi/PostToolUse.json",
        "codex" => "codex/PostToolUse.json",
        other => anyhow::bail!("unknown agent {other:?}"),
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hosts")
        .join(file);
    let mut payload: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    payload["tool_input"]["bench_run"] = i.into();
    Ok(payload.to_string().into_bytes())
}

fn run_hook(
    binary: &Path,
    agent: &str,
    env: &[(&str, String)],
    payload: &[u8],
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .arg(agent)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(payload)?;
    let status = child.wait()?;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(status.success(), "hook exited with {status}");
    Ok(took)
}

/// Returns the p99 with NATS up, in milliseconds.
async fn hook(agent: &str) -> anyhow::Result<f64> {
    let runs: usize = std::env::var("MNEME_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let binary = hook_binary()?;
    let mut bed = Bed::start(true).await?;
    let env = vec![
        ("MNEME_NATS_URL", format!("nats://127.0.0.1:{}", bed.port)),
        ("MNEME_HOME", bed.home.path().display().to_string()),
    ];
    for i in 0..20 {
        run_hook(&binary, agent, &env, &host_payload(agent, i)?)?;
    }
    let mut up = Vec::with_capacity(runs);
    for i in 0..runs {
        up.push(run_hook(
            &binary,
            agent,
            &env,
            &host_payload(agent, 1000 + i)?,
        )?);
    }
    let spool = bed.home.path().join("spool");
    anyhow::ensure!(
        !has_spooled(&spool),
        "events were spooled while nats was up"
    );
    let up = sorted(up);
    println!(
        "nats up:   runs={runs} p50={:.2}ms p90={:.2}ms p99={:.2}ms max={:.2}ms",
        percentile(&up, 50.0),
        percentile(&up, 90.0),
        percentile(&up, 99.0),
        up[up.len() - 1]
    );

    if let Some(nats) = bed.nats.take() {
        nats.stop().await;
    }
    let mut down = Vec::with_capacity(runs);
    for i in 0..runs {
        down.push(run_hook(
            &binary,
            agent,
            &env,
            &host_payload(agent, 10_000 + i)?,
        )?);
    }
    anyhow::ensure!(
        has_spooled(&spool),
        "nothing was spooled while nats was down"
    );
    let down = sorted(down);
    println!(
        "nats down: runs={runs} p50={:.2}ms p90={:.2}ms p99={:.2}ms max={:.2}ms",
        percentile(&down, 50.0),
        percentile(&down, 90.0),
        percentile(&down, 99.0),
        down[down.len() - 1]
    );
    bed.stop().await;
    println!(
        "hook: agent={agent} p50_ms={:.2} p99_ms={:.2} down_p50_ms={:.2} down_p99_ms={:.2} runs={runs}",
        percentile(&up, 50.0),
        percentile(&up, 99.0),
        percentile(&down, 50.0),
        percentile(&down, 99.0)
    );
    Ok(percentile(&up, 99.0))
}

/// Run the release `mneme import claude-code --json --no-wait --path DIR` against the bed's
/// NATS and store, as a user would; its JSON summary (records read, events published).
fn import_claude_code(
    mneme: &Path,
    transcripts: &Path,
    bed: &Bed,
) -> anyhow::Result<serde_json::Value> {
    let output = Command::new(mneme)
        .args(["import", "claude-code", "--json", "--no-wait", "--path"])
        .arg(transcripts)
        .env("MNEME_NATS_URL", &bed.common.nats_url)
        .env("MNEME_HOME", bed.home.path())
        .env("MNEME_DB", bed.common.db_path())
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "mneme import failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// `mneme import claude-code` on the real transcripts into a fresh store, with ingest running.
async fn import_bench() -> anyhow::Result<()> {
    let mneme = release_binary("mneme")?;
    let transcripts =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/claude-code-transcripts");
    anyhow::ensure!(
        transcripts.is_dir(),
        "{} is missing: clone the repository with ../shared beside it",
        transcripts.display()
    );
    let bed = Bed::start(true).await?;
    let started = Instant::now();
    let summary = import_claude_code(&mneme, &transcripts, &bed)?;
    let published_after = started.elapsed().as_secs_f64();
    let records = summary["records"].as_f64().unwrap_or_default();
    let events = summary["published"].as_i64().unwrap_or_default();
    let store = store::Store::open(&bed.common.db_path()).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(&store).await? < events && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored_after = started.elapsed().as_secs_f64();
    let stored = count(&store).await?;
    bed.stop().await;
    println!(
        "files={} sessions={} records={records} events={events} stored={stored}",
        summary["files"], summary["sessions"]
    );
    println!(
        "import: records_per_s={:.0} records_per_s_to_stored={:.0} events_per_s={:.0} in_process_records_per_s={:.0}",
        records / published_after,
        records / stored_after,
        events as f64 / published_after,
        summary["records_per_second"].as_f64().unwrap_or_default()
    );
    Ok(())
}

fn has_spooled(dir: &Path) -> bool {
    mneme_hook::spool::Spool::new(dir).has_pending()
}

fn bench_event(i: usize, session: usize) -> proto::Event {
    let stdout: String = (0..40)
        .map(|n| format!("test module::case_{n} ... ok\n"))
        .collect();
    let now = common::time::now_ms();
    proto::Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: now,
        captured_at_ms: now,
        agent: proto::Agent::ClaudeCode as i32,
        session_id: format!("bench-{session}"),
        project: "/home/dev/app".into(),
        cwd: "/home/dev/app".into(),
        host_event: "PostToolUse".into(),
        payload: Some(proto::event::Payload::PostTool(proto::ToolCall {
            tool_name: "Bash".into(),
            tool_use_id: format!("toolu_{i}"),
            input_json: format!(
                r#"{{"command":"cargo test -p crate{i}","description":"run the tests with TOKEN=abc{i}def"}}"#
            ),
            response_json: serde_json::json!({"stdout": stdout, "stderr": ""}).to_string(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

async fn publish(
    js: &async_nats::jetstream::Context,
    event: &proto::Event,
) -> anyhow::Result<async_nats::jetstream::context::PublishAckFuture> {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
    Ok(js
        .publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
        .await?)
}

async fn count(store: &store::Store) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM observations")
        .fetch_one(store.pool())
        .await?;
    Ok(n)
}

/// The most events the backlog run publishes ahead of ingest: the events stream holds about a
/// gigabyte (some 600,000 of these events), and JetStream drops the oldest messages of a full
/// stream. Larger runs go through [`pipeline`], paced as `mneme import` paces itself.
const BACKLOG_MAX: usize = 200_000;

async fn ingest(args: &[String]) -> anyhow::Result<()> {
    let burst: usize = args
        .iter()
        .position(|a| a == "--events")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| std::env::var("MNEME_BENCH_EVENTS").ok())
        .map(|v| v.replace('_', "").parse())
        .transpose()
        .context("--events takes a number")?
        .unwrap_or(50_000);
    if burst > BACKLOG_MAX {
        return pipeline(burst).await;
    }
    let rate: usize = std::env::var("MNEME_BENCH_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seconds: usize = 10;

    // Throughput: a backlog published while ingest is stopped, then drained.
    let bed = Bed::start(false).await?;
    let client = async_nats::connect(&bed.common.nats_url).await?;
    let js = async_nats::jetstream::new(client);
    let mut acks = Vec::new();
    for i in 0..burst {
        acks.push(publish(&js, &bench_event(i, i % 8)).await?);
        if acks.len() >= 1000 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks.drain(..) {
        ack.await?;
    }
    let store = store::Store::open(&bed.common.db_path()).await?;
    let started = Instant::now();
    let shutdown = bed.shutdown.clone();
    let handle = tokio::spawn(ingest::run(
        bed.common.clone(),
        ingest::IngestArgs::default(),
        shutdown,
    ));
    // Ten minutes, or longer for a backlog that would take longer at 200 events a second.
    let deadline = Duration::from_secs(600.max(burst as u64 / 200));
    while count(&store).await? < burst as i64 {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "ingest did not drain the backlog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drain = started.elapsed().as_secs_f64();
    let throughput = burst as f64 / drain;
    println!("backlog:   events={burst} seconds={drain:.2} events_per_s={throughput:.0}");

    // Lag: a steady rate for a while, then the spread of capture-to-commit times.
    let (n,): (i64,) = sqlx::query_as("SELECT coalesce(max(id), 0) FROM observations")
        .fetch_one(store.pool())
        .await?;
    let steady_from = n;
    let total = rate * seconds;
    let tick = Duration::from_millis(10);
    let per_tick = (rate / 100).max(1);
    let mut interval = tokio::time::interval(tick);
    let mut sent = 0;
    let started = Instant::now();
    while sent < total {
        interval.tick().await;
        for _ in 0..per_tick.min(total - sent) {
            acks.push(publish(&js, &bench_event(burst + sent, sent % 8)).await?);
            sent += 1;
        }
        if acks.len() >= 1000 {
            for ack in acks.drain(..) {
                ack.await?;
            }
        }
    }
    for ack in acks.drain(..) {
        ack.await?;
    }
    let sending = started.elapsed().as_secs_f64();
    while count(&store).await? < (burst + total) as i64 {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "ingest fell behind"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lags: Vec<(i64,)> =
        sqlx::query_as("SELECT stored_at - occurred_at FROM observations WHERE id > ?")
            .bind(steady_from)
            .fetch_all(store.pool())
            .await?;
    let lags = sorted(lags.into_iter().map(|(l,)| l as f64).collect());
    let offered = sent as f64 / sending;
    println!(
        "steady:    offered_per_s={offered:.0} lag_p50_ms={:.0} lag_p95_ms={:.0} lag_p99_ms={:.0}",
        percentile(&lags, 50.0),
        percentile(&lags, 95.0),
        percentile(&lags, 99.0)
    );
    let size = store.size_bytes();
    println!(
        "store:     bytes={size} per_event={:.0}",
        size as f64 / (burst + total) as f64
    );

    // Searchable: retrieval started on everything stored, as after an import, until it is all
    // found by full-text search and then by meaning (static vectors ahead of the model), and
    // how fast the model itself follows.
    let searchable = searchable(&bed, &store).await?;
    store.close().await;
    drop(handle);
    bed.stop().await;
    println!(
        "ingest: events_per_s={throughput:.0} lag_p95_ms={:.0} steady_rate_per_s={offered:.0} events={} fts_searchable_s={:.1} semantic_searchable_s={:.1} model_items_per_s={:.1} items={}",
        percentile(&lags, 95.0),
        burst + total,
        searchable.fts_s,
        searchable.semantic_s,
        searchable.model_per_s,
        searchable.items
    );
    Ok(())
}

/// A history too large to publish ahead of ingest, published as `mneme import` publishes one
/// (paced by `common::streams::wait_for_room`) into the whole pipeline running as `mneme up`
/// runs it: ingest, retrieval with the static tier, the compressor and the pattern service.
/// Measures the rate events are stored at, and how long until all of them are found by
/// full-text search and by meaning.
async fn pipeline(events: usize) -> anyhow::Result<()> {
    let bed = Bed::start(true).await?;
    let started = Instant::now();
    let retrieval = start_retrieval(&bed)?;
    let others = [
        tokio::spawn(compressor::run(
            bed.common.clone(),
            compressor::CompressorArgs::default(),
            bed.shutdown.clone(),
        )),
        tokio::spawn(pattern::run(
            bed.common.clone(),
            pattern::PatternArgs::default(),
            bed.shutdown.clone(),
        )),
    ];
    let client = async_nats::connect(&bed.common.nats_url).await?;
    let js = async_nats::jetstream::new(client);
    // Every consumer exists before the first event, as with `mneme up` running.
    for (stream, consumer) in proto::subjects::WRITE_PATH_CONSUMERS {
        let deadline = Instant::now() + Duration::from_secs(120);
        while js
            .get_stream(stream)
            .await?
            .consumer_info(consumer)
            .await
            .is_err()
        {
            anyhow::ensure!(Instant::now() < deadline, "{consumer} did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let store = store::Store::open(&bed.common.db_path()).await?;
    let publishing = Instant::now();
    let (mut waited, mut said) = (Duration::ZERO, Instant::now());
    // Whom the import waited for, and how often it found each furthest behind.
    let mut waited_for: std::collections::BTreeMap<String, usize> = Default::default();
    let mut acks = Vec::new();
    for i in 0..events {
        if i % 256 == 0 {
            for ack in acks.drain(..) {
                ack.await?;
            }
            let before = Instant::now();
            common::streams::wait_for_room(&js, |behind| {
                *waited_for.entry(behind.consumer.clone()).or_default() += 1;
            })
            .await?;
            waited += before.elapsed();
            if said.elapsed() > Duration::from_secs(30) {
                said = Instant::now();
                println!(
                    "pipeline: {i} events published, {} stored, {:.0}s",
                    count(&store).await?,
                    publishing.elapsed().as_secs_f64()
                );
            }
        }
        acks.push(publish(&js, &bench_event(i, i / 500)).await?);
    }
    for ack in acks.drain(..) {
        ack.await?;
    }
    let published_s = publishing.elapsed().as_secs_f64();
    let deadline = Duration::from_secs(3_600.max(events as u64 / 200));
    while count(&store).await? < events as i64 {
        anyhow::ensure!(
            publishing.elapsed() < deadline,
            "ingest did not store every event"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let stored_s = publishing.elapsed().as_secs_f64();
    let rate = events as f64 / stored_s;
    println!(
        "pipeline: {events} events published in {published_s:.0}s (waiting {:.0}s for the services, furthest behind while it waited: {waited_for:?}), stored after {stored_s:.0}s: {rate:.0} events/s",
        waited.as_secs_f64()
    );
    let searchable = follow(&bed, &store, started).await?;
    let size = store.size_bytes();
    store.close().await;
    retrieval.abort();
    for other in others {
        other.abort();
    }
    bed.stop().await;
    println!(
        "ingest: mode=pipeline events={events} events_per_s={rate:.0} published_s={published_s:.0} waited_s={:.0} fts_searchable_s={:.1} semantic_searchable_s={:.1} model_items_per_s={:.1} items={} store_mb={:.0}",
        waited.as_secs_f64(),
        searchable.fts_s,
        searchable.semantic_s,
        searchable.model_per_s,
        searchable.items,
        size as f64 / 1e6
    );
    Ok(())
}

/// Stored events retrieval has not indexed yet (its consumer's pending and unacknowledged
/// messages); `None` while the stream or the consumer cannot be asked.
async fn retrieval_pending(jetstream: &async_nats::jetstream::Context) -> Option<u64> {
    let stream = jetstream
        .get_stream(proto::subjects::INGEST_STREAM)
        .await
        .ok()?;
    stream
        .consumer_info(proto::subjects::RETRIEVAL_CONSUMER)
        .await
        .map(|i| i.num_pending + i.num_ack_pending as u64)
        .ok()
}

/// How long retrieval, started on a full store, takes to make it searchable.
struct Searchable {
    items: i64,
    fts_s: f64,
    semantic_s: f64,
    model_per_s: f64,
}

/// Retrieval as `mneme up` runs it (the static tier ahead of the model), started in `bed`.
fn start_retrieval(bed: &Bed) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<()>>> {
    let retrieval_args = retrieval::RetrievalArgs {
        static_cache: Some(std::env::var_os("MNEME_STATIC_CACHE").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mneme-static"),
            PathBuf::from,
        )),
        ..retrieval_bench::retrieval_args()?
    };
    Ok(tokio::spawn(retrieval::run(
        bed.common.clone(),
        retrieval_args,
        bed.shutdown.clone(),
    )))
}

async fn searchable(bed: &Bed, store: &store::Store) -> anyhow::Result<Searchable> {
    let started = Instant::now();
    let retrieval = start_retrieval(bed)?;
    let searchable = follow(bed, store, started).await;
    retrieval.abort();
    searchable
}

/// Follow retrieval, running in `bed` since `started`, until everything stored is found by
/// full-text search and then by meaning, and measure the model's own rate behind them.
async fn follow(bed: &Bed, store: &store::Store, started: Instant) -> anyhow::Result<Searchable> {
    let client = async_nats::connect(&bed.common.nats_url).await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let health = async || {
        common::nats::request::<proto::HealthReply>(
            &client,
            &proto::subjects::health_subject("retrieval"),
            &proto::HealthRequest {},
            Duration::from_secs(2),
        )
        .await
        .ok()
    };
    let backlog = |reply: &proto::HealthReply, name: &str| {
        reply.backlogs.iter().find(|b| b.name == name).cloned()
    };
    // An hour, or longer for a store that would take longer at 300 items a second.
    let (observations,): (i64,) = sqlx::query_as("SELECT count(*) FROM observations")
        .fetch_one(store.pool())
        .await?;
    let deadline = Duration::from_secs(3_600.max(observations as u64 / 300));
    // Full-text: every stored notice indexed (retrieval's consumer has nothing left).
    let fts_s = loop {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "retrieval did not index the store"
        );
        if retrieval_pending(&jetstream).await == Some(0) {
            break started.elapsed().as_secs_f64();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (items,): (i64,) = sqlx::query_as("SELECT count(*) FROM memory_items")
        .fetch_one(store.pool())
        .await?;
    println!("searchable: {items} items found by full-text search after {fts_s:.1}s");
    // By meaning: every item has a vector, the model's or a static one.
    let semantic_s = loop {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "retrieval did not embed the store"
        );
        if let Some(reply) = health().await
            && backlog(&reply, "embedding").is_some_and(|b| b.total >= items && b.done >= b.total)
        {
            break started.elapsed().as_secs_f64();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!("searchable: {items} items found by meaning after {semantic_s:.1}s");
    // The model's own rate, at the default pacing, over half a minute.
    let model_done = async || {
        health()
            .await
            .and_then(|r| backlog(&r, "model"))
            .map_or(0, |b| b.done)
    };
    let (first, at) = (model_done().await, Instant::now());
    tokio::time::sleep(Duration::from_secs(30)).await;
    let model_per_s = (model_done().await - first) as f64 / at.elapsed().as_secs_f64();
    println!(
        "searchable: the model embeds {model_per_s:.1} items/s behind them, about {:.1} h for all",
        items as f64 / model_per_s.max(0.001) / 3600.0
    );
    Ok(Searchable {
        items,
        fts_s,
        semantic_s,
        model_per_s,
    })
}
