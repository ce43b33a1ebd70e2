//! How far the pipeline has got with what was handed to it: the messages each durable consumer
//! has still to take (read from JetStream), and the embedding backlog retrieval reports in its
//! health reply, with its rate and time left. `mneme import` follows it until everything
//! imported is searchable, semantically too; `mneme status` shows it once.

use anyhow::Result;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use proto::subjects;
use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

/// The queues between publishing an event and finding it with full-text search, and the
/// distillation that follows: what a person calls each, and the (stream, durable consumer)
/// pairs it sums. Indexing includes what retrieval makes searchable of the compressor's and the
/// pattern service's rows (summaries, checkpoints, patterns).
const QUEUES: [(&str, &[(&str, &str)]); 3] = [
    (
        "storing",
        &[(subjects::EVENTS_STREAM, subjects::INGEST_CONSUMER)],
    ),
    (
        "distilling",
        &[
            (subjects::INGEST_STREAM, subjects::COMPRESSOR_CONSUMER),
            (subjects::INGEST_STREAM, subjects::PATTERN_CONSUMER),
        ],
    ),
    (
        "indexing",
        &[
            (subjects::INGEST_STREAM, subjects::RETRIEVAL_CONSUMER),
            (subjects::COMPRESSOR_STREAM, subjects::RETRIEVAL_CONSUMER),
            (subjects::PATTERN_STREAM, subjects::RETRIEVAL_CONSUMER),
        ],
    ),
];

/// One reading of the pipeline.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    /// Messages each queue has still to take, `None` when its consumer does not exist yet (its
    /// service has never run on this NATS server).
    pub queues: Vec<(String, Option<u64>)>,
    /// Retrieval's embedding backlog (items searchable by meaning, by the model's vector or a
    /// static one ahead of it); `None` when retrieval does not answer or searches full-text
    /// only (no model).
    pub embedding: Option<Backlog>,
    /// The model's own backlog, which fills in behind static vectors.
    #[serde(default)]
    pub model: Option<Backlog>,
    /// Whether retrieval answered its health probe.
    pub retrieval_answers: bool,
}

/// The embedding backlog as retrieval reports it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Backlog {
    pub done: i64,
    pub total: i64,
    pub rate_per_s: f64,
    /// Milliseconds left at that rate; 0 when done, -1 when nothing moves to estimate from.
    pub eta_ms: i64,
}

impl From<&proto::Backlog> for Backlog {
    fn from(b: &proto::Backlog) -> Backlog {
        Backlog {
            done: b.done,
            total: b.total,
            rate_per_s: b.rate_per_s,
            eta_ms: b.eta_ms,
        }
    }
}

impl Backlog {
    /// "751/2156 items embedded, 3.1 a second, about 8 min left".
    pub fn describe(&self) -> String {
        let mut line = format!("{}/{} items embedded", self.done, self.total);
        if self.done < self.total {
            if self.rate_per_s > 0.0 {
                line.push_str(&format!(
                    ", {:.1} a second, {} left",
                    self.rate_per_s,
                    about(self.eta_ms)
                ));
            } else {
                line.push_str(", starting");
            }
        }
        line
    }
}

impl Reading {
    /// Items searchable by meaning through static vectors only, the model still to reach them:
    /// how many, and the model's time left.
    pub fn refining(&self) -> Option<(i64, i64)> {
        let (embedding, model) = (self.embedding.as_ref()?, self.model.as_ref()?);
        let ahead = embedding.done - model.done;
        (ahead > 0).then_some((ahead, model.eta_ms))
    }

    /// Messages waiting in every queue that exists.
    fn waiting(&self) -> u64 {
        self.queues.iter().filter_map(|(_, n)| *n).sum()
    }

    /// Everything handed over is stored, indexed, distilled and embedded.
    fn level(&self) -> bool {
        self.waiting() == 0 && self.embedding.as_ref().is_none_or(|b| b.done >= b.total)
    }
}

/// A duration for a person: "about 40 s", "about 8 min", "about 2 h 5 min".
pub fn about(ms: i64) -> String {
    if ms < 0 {
        return "unknown time".to_owned();
    }
    let s = (ms + 999) / 1000;
    if s < 60 {
        format!("about {s} s")
    } else if s < 3600 {
        format!("about {} min", (s + 59) / 60)
    } else {
        format!("about {} h {} min", s / 3600, (s % 3600) / 60)
    }
}

/// Read the queues and retrieval's backlog once.
pub async fn read(client: &async_nats::Client) -> Reading {
    let jetstream = async_nats::jetstream::new(client.clone());
    let mut reading = Reading::default();
    for (name, pairs) in QUEUES {
        let mut waiting = None;
        for (stream, consumer) in pairs {
            if let Ok(stream) = jetstream.get_stream(*stream).await
                && let Ok(info) = stream.consumer_info(*consumer).await
            {
                *waiting.get_or_insert(0) += info.num_pending + info.num_ack_pending as u64;
            }
        }
        reading.queues.push((name.to_owned(), waiting));
    }
    let health = common::nats::request::<proto::HealthReply>(
        client,
        &subjects::health_subject("retrieval"),
        &proto::HealthRequest {},
        Duration::from_secs(1),
    )
    .await;
    if let Ok(health) = health {
        reading.retrieval_answers = true;
        let backlog = |name: &str| {
            health
                .backlogs
                .iter()
                .find(|b| b.name == name)
                .map(Backlog::from)
        };
        reading.embedding = backlog("embedding");
        reading.model = backlog("model");
    }
    reading
}

/// How long retrieval's report can lag behind what it holds: it refreshes every two seconds.
const REPORT_LAG: Duration = Duration::from_millis(2_500);
/// How long a service may stay silent before following it stops.
const SILENCE: Duration = Duration::from_secs(15);

/// Follow the pipeline until everything handed to it is searchable, drawing bars on a terminal
/// (standard error) and a line every few seconds otherwise; ctrl-c stops following, not the
/// work.
pub async fn follow(client: &async_nats::Client) -> Result<()> {
    let terminal = std::io::stderr().is_terminal();
    let mut view = View::new(terminal);
    let started = Instant::now();
    let mut level_since: Option<Instant> = None;
    let mut silent_since: Option<Instant> = None;
    let mut last_line = Instant::now();
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    loop {
        let reading = read(client).await;
        view.draw(&reading);
        let missing = reading.queues.iter().any(|(_, n)| n.is_none()) || !reading.retrieval_answers;
        if missing {
            let since = *silent_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SILENCE {
                view.finish();
                eprintln!(
                    "the services are not all running, so the rest waits in NATS until they are: start `mneme up`, and `mneme status` shows the progress"
                );
                return Ok(());
            }
        } else {
            silent_since = None;
        }
        if reading.level() && !missing {
            // Level only counts once retrieval has reported after the last queue drained, so
            // items indexed a moment ago are in the embedding total it reports.
            let since = *level_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= REPORT_LAG {
                view.finish();
                let semantic = match (&reading.embedding, reading.refining()) {
                    (Some(b), Some((ahead, eta))) => format!(
                        "{} items embedded, {ahead} of them by static vectors that the model refines in the background, {} left",
                        b.total,
                        about(eta)
                    ),
                    (Some(b), None) => format!("{} items embedded", b.total),
                    (None, _) => "full-text only: retrieval has no embedding model".to_owned(),
                };
                eprintln!(
                    "searchable: everything imported is stored and indexed ({semantic}), after {}",
                    about(started.elapsed().as_millis() as i64).trim_start_matches("about ")
                );
                return Ok(());
            }
        } else {
            level_since = None;
        }
        if !terminal && last_line.elapsed() >= Duration::from_secs(10) {
            eprintln!("{}", line(&reading));
            last_line = Instant::now();
        }
        tokio::select! {
            _ = &mut interrupt => {
                view.finish();
                eprintln!("stopped following; the work goes on in the background, and `mneme status` shows it");
                return Ok(());
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// One plain line for a reading.
pub fn line(reading: &Reading) -> String {
    let mut parts: Vec<String> = reading
        .queues
        .iter()
        .map(|(name, waiting)| match waiting {
            Some(n) => format!("{name}: {n} waiting"),
            None => format!("{name}: not started"),
        })
        .collect();
    parts.push(match &reading.embedding {
        Some(b) => match reading.refining() {
            Some((ahead, eta)) => format!(
                "embedding: {} ({ahead} by static vectors, the model {} behind)",
                b.describe(),
                about(eta)
            ),
            None => format!("embedding: {}", b.describe()),
        },
        None if reading.retrieval_answers => "embedding: off (full-text only)".to_owned(),
        None => "embedding: retrieval not answering".to_owned(),
    });
    parts.join("; ")
}

/// The bars on a terminal; nothing otherwise.
struct View {
    /// Held so the bars draw together; the bars are what is updated.
    _multi: Option<MultiProgress>,
    queues: Vec<(ProgressBar, QueueCount)>,
    embedding: Option<ProgressBar>,
}

/// What a queue bar counts: the messages seen leave the queue, so its length grows with what
/// arrives while it drains.
#[derive(Default)]
struct QueueCount {
    drained: u64,
    last: Option<u64>,
}

impl View {
    fn new(terminal: bool) -> View {
        if !terminal {
            return View {
                _multi: None,
                queues: Vec::new(),
                embedding: None,
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("#>-");
        let queues = QUEUES
            .iter()
            .map(|(name, _)| {
                let bar = multi.add(ProgressBar::new(0).with_style(style.clone()));
                bar.set_prefix(*name);
                (bar, QueueCount::default())
            })
            .collect();
        let embedding = multi.add(ProgressBar::new(0).with_style(style));
        embedding.set_prefix("embedding");
        View {
            _multi: Some(multi),
            queues,
            embedding: Some(embedding),
        }
    }

    fn draw(&mut self, reading: &Reading) {
        for ((bar, count), (_, waiting)) in self.queues.iter_mut().zip(&reading.queues) {
            let Some(waiting) = *waiting else {
                bar.set_message("not started");
                continue;
            };
            if let Some(last) = count.last {
                count.drained += last.saturating_sub(waiting);
            }
            count.last = Some(waiting);
            bar.set_message(if waiting == 0 {
                "done".to_owned()
            } else {
                format!("{waiting} waiting")
            });
            bar.set_length(count.drained + waiting);
            bar.set_position(count.drained);
        }
        if let Some(bar) = &self.embedding {
            match &reading.embedding {
                Some(b) => {
                    // The message first: setting the length or position may draw at once.
                    bar.set_message(if b.done >= b.total {
                        "done".to_owned()
                    } else if b.rate_per_s > 0.0 {
                        format!("{:.1} a second, {} left", b.rate_per_s, about(b.eta_ms))
                    } else {
                        "starting".to_owned()
                    });
                    bar.set_length(b.total.max(0) as u64);
                    bar.set_position(b.done.max(0) as u64);
                }
                None if reading.retrieval_answers => bar.set_message("off (full-text only)"),
                None => bar.set_message("retrieval not answering"),
            }
        }
    }

    fn finish(&mut self) {
        for (bar, _) in &self.queues {
            bar.finish();
        }
        if let Some(bar) = &self.embedding {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(about(0), "about 0 s");
        assert_eq!(about(40_200), "about 41 s");
        assert_eq!(about(8 * 60_000 - 1), "about 8 min");
        assert_eq!(about(2 * 3_600_000 + 5 * 60_000), "about 2 h 5 min");
        assert_eq!(about(-1), "unknown time");
    }

    #[test]
    fn a_backlog_says_how_fast_and_how_long() {
        let backlog = Backlog {
            done: 751,
            total: 2156,
            rate_per_s: 3.1,
            eta_ms: 453_000,
        };
        assert_eq!(
            backlog.describe(),
            "751/2156 items embedded, 3.1 a second, about 8 min left"
        );
        let level = Backlog {
            done: 10,
            total: 10,
            ..Default::default()
        };
        assert_eq!(level.describe(), "10/10 items embedded");
    }
}
