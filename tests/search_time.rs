//! Search that answers the questions people ask about the past, through the real entry points
//! (NATS, REST, MCP and the command line) with the real model: time words resolved against when
//! the question is asked, later statements ranked above the ones they update, and sessions
//! ranked by the evidence they hold.

use crate::api::Http;
use crate::harness::{App, binary};
use proto::Message as _;
use proto::subjects;
use proto::{SearchReply, SearchRequest};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

/// Thursday 12 February 2026, 15:00 UTC: when the questions below are asked.
const AS_OF: &str = "2026-02-12T15:00:00Z";
const DAY: i64 = common::time::DAY_MS;

fn as_of() -> i64 {
    common::time::parse_rfc3339_ms(AS_OF).unwrap()
}

/// Ten in the morning UTC of a day.
fn at(year: i64, month: i64, day: i64) -> i64 {
    common::time::midnight_ms(year, month, day) + 10 * 3_600_000
}

/// Publish prompts as hooks would have, each at its own time: (session, project, time, text).
async fn publish(app: &App, prompts: &[(&str, &str, i64, &str)]) {
    let js = async_nats::jetstream::new(app.client().await);
    common::streams::ensure(&js).await.unwrap();
    for (session, project, ms, text) in prompts {
        let event = proto::Event {
            schema_version: proto::SCHEMA_VERSION,
            id: proto::new_event_id(),
            occurred_at_ms: *ms,
            captured_at_ms: *ms,
            agent: proto::Agent::ClaudeCode as i32,
            session_id: (*session).to_owned(),
            project: (*project).to_owned(),
            cwd: (*project).to_owned(),
            host_event: "UserPromptSubmit".into(),
            payload: Some(proto::event::Payload::Prompt(proto::Prompt {
                text: (*text).to_owned(),
            })),
            ..Default::default()
        };
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
        js.publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let prompts = prompts.len() as i64;
    app.wait_for_count(
        "SELECT count(*) FROM memory_items WHERE kind = 'prompt'",
        prompts,
        std::time::Duration::from_secs(60),
    )
    .await;
    app.wait_indexed(prompts).await;
}

/// Notes sharing a question's words but not its answer, one a day from 1 June 2025, each in a
/// session of its own (`n0`, `n1`, …): (session, project, time, text) as [`publish`] takes them.
fn noise_notes<'a>(
    project: &'a str,
    texts: &[&'a str],
) -> Vec<(&'static str, &'a str, i64, &'a str)> {
    const SESSIONS: [&str; 5] = ["n0", "n1", "n2", "n3", "n4"];
    texts
        .iter()
        .zip(SESSIONS)
        .enumerate()
        .map(|(n, (text, session))| (session, project, at(2025, 6, 1 + n as i64), *text))
        .collect()
}

/// Prompts only: the pattern service may make items of its own out of these statements.
fn prompts(query: &str, project: &str) -> SearchRequest {
    SearchRequest {
        query: query.to_owned(),
        project: project.to_owned(),
        kinds: vec!["prompt".to_owned()],
        limit: 10,
        ..Default::default()
    }
}

/// The sessions of a ranking's hits, each once, in the order they first appear.
fn distinct_sessions(hits: &[proto::SearchHit]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for hit in hits {
        if !seen.contains(&hit.session_id) {
            seen.push(hit.session_id.clone());
        }
    }
    seen
}

async fn search(app: &App, request: SearchRequest) -> SearchReply {
    let reply: SearchReply = app.ask(subjects::RETRIEVAL_SEARCH, &request).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    reply
}

/// The day of the best hit.
async fn first_day(app: &App, request: SearchRequest) -> String {
    let reply = search(app, request).await;
    let best = reply.hits.first().expect("a hit");
    common::time::utc_day(best.occurred_at_ms)
}

const DEPLOYS: &str = "/work/deploys";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_words_rank_the_items_of_the_time_they_name() {
    let mut app = App::start().await;
    // The same deploy, told the same way, on five days: only time can tell them apart.
    let days = [
        ("d1", at(2025, 5, 14)),
        ("d2", at(2026, 1, 29)),
        ("d3", at(2026, 2, 3)),
        ("d4", at(2026, 2, 11)),
    ];
    let texts: Vec<String> = (1..=days.len())
        .map(|n| format!("deployed the payments service to staging, build 410{n}"))
        .collect();
    let prompts_sent: Vec<(&str, &str, i64, &str)> = days
        .iter()
        .zip(&texts)
        .map(|((session, ms), text)| (*session, DEPLOYS, *ms, text.as_str()))
        .collect();
    publish(&app, &prompts_sent).await;
    let asked = |query: &str, as_of_ms: i64| SearchRequest {
        as_of_ms,
        ..prompts(query, DEPLOYS)
    };

    // With no time named, the latest deploy leads (recency), whichever day it is asked.
    assert_eq!(
        first_day(&app, asked("payments staging deploy", as_of())).await,
        "2026-02-11"
    );
    for (query, day) in [
        (
            "which payments staging deploy happened yesterday",
            "2026-02-11",
        ),
        ("the payments staging deploy two weeks ago", "2026-01-29"),
        ("the payments staging deploy last month", "2026-01-29"),
        ("the payments staging deploy on 2026-02-03", "2026-02-03"),
        ("what went to payments staging in May 2025", "2025-05-14"),
        ("payments staging deploy in May", "2025-05-14"),
        (
            "when did payments go to staging for the first time",
            "2025-05-14",
        ),
        ("payments staging deploy, most recently", "2026-02-11"),
    ] {
        assert_eq!(first_day(&app, asked(query, as_of())).await, day, "{query}");
    }
    // "Yesterday" is the day before the question: asked on 4 February, it is the 3rd, although
    // a later deploy exists.
    let fourth = common::time::parse_rfc3339_ms("2026-02-04T12:00:00Z").unwrap();
    assert_eq!(
        first_day(&app, asked("the payments staging deploy yesterday", fourth)).await,
        "2026-02-03"
    );

    // The command line: `--as-of` is when the question is asked.
    let out = app.mneme(&[
        "search",
        "payments staging deploy two weeks ago",
        "--project",
        DEPLOYS,
        "--kind",
        "prompt",
        "--as-of",
        AS_OF,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let best = found["hits"][0]["occurred_at_ms"].as_i64().unwrap();
    assert_eq!(common::time::utc_day(best), "2026-01-29");
    let refused = app.mneme(&["search", "deploy", "--as-of", "last tuesday"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("RFC 3339"));

    // REST: `as_of` in Unix milliseconds.
    let base = app.start_api(api::ApiArgs::default()).await;
    let http = Http::new(&base);
    let (status, found) = http
        .get(&format!(
            "/v1/search?q=payments+staging+deploy+yesterday&project={DEPLOYS}&kind=prompt&as_of={fourth}"
        ))
        .await;
    assert_eq!(status, 200, "{found}");
    let best = found["hits"][0]["occurred_at_ms"].as_i64().unwrap();
    assert_eq!(common::time::utc_day(best), "2026-02-03");
    let (status, _) = http.get("/v1/search?q=deploy&as_of=-5").await;
    assert_eq!(status, 400);

    // Asked with no time of its own, long after the project's last deploy (11 February), a
    // question is read against that last memory, as if asked right after it: "two weeks ago"
    // and "last month" are then late January. Read against the clock, they would name months
    // that hold nothing, and the latest deploy would lead.
    for (query, day) in [
        ("the payments staging deploy two weeks ago", "2026-01-29"),
        ("the payments staging deploy last month", "2026-01-29"),
    ] {
        assert_eq!(first_day(&app, asked(query, 0)).await, day, "{query}");
    }
    app.stop_services().await;
}

/// A month the question names is searched on its own: where more than a search's depth of
/// items match the question better, the one item of that month is still a candidate, and ranks
/// first by its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_the_item_of_a_named_month_is_found_below_a_crowd_of_better_matches() {
    let mut app = App::start().await;
    const RELEASES: &str = "/work/releases";
    // 150 short notes on shipping the exporter in January and February, each a little closer
    // to the question in words and meaning than the one from May, which is one word longer: it
    // comes last in full-text and in vector mode alike, and a search of ten takes 100
    // candidates from each retriever. Without the month's own search, the last assertion fails.
    let crowd: Vec<String> = (0..150)
        .map(|n| format!("we shipped exporter release {n}"))
        .collect();
    let mut sent: Vec<(String, i64, &str)> = crowd
        .iter()
        .enumerate()
        .map(|(n, text)| {
            let day = at(2026, 1, 5) + (n as i64 % 36) * DAY;
            (format!("s{n}"), day, text.as_str())
        })
        .collect();
    sent.push((
        "may".to_owned(),
        at(2025, 5, 20),
        "we shipped exporter release 2.4.0 today",
    ));
    let borrowed: Vec<(&str, &str, i64, &str)> = sent
        .iter()
        .map(|(session, ms, text)| (session.as_str(), RELEASES, *ms, *text))
        .collect();
    publish(&app, &borrowed).await;
    let asked = |query: &str| SearchRequest {
        as_of_ms: as_of(),
        ..prompts(query, RELEASES)
    };

    // Without the month, the crowd holds every place.
    let reply = search(&app, asked("which exporter release did we ship?")).await;
    assert_eq!(reply.hits.len(), 10);
    assert!(
        reply.hits.iter().all(|hit| hit.session_id != "may"),
        "the note from May should rank below the crowd without its month"
    );
    // With it, the note from May leads.
    let reply = search(&app, asked("which exporter release did we ship in May?")).await;
    let first = reply.hits.first().expect("a hit");
    assert_eq!(
        first.session_id,
        "may",
        "the May release should lead: {:?}",
        reply
            .hits
            .iter()
            .map(|hit| common::time::utc_day(hit.occurred_at_ms))
            .collect::<Vec<_>>()
    );
    app.stop_services().await;
}

/// "What was I working on two weeks before I moved?": a question that names a time and no
/// subject is answered by what was recorded nearest that time, session by session, not by the
/// items that share its one word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_a_question_naming_only_a_time_gets_what_was_done_then() {
    let mut app = App::start().await;
    const DAYS: &str = "/work/days";
    let work = [
        (
            "retry",
            at(2026, 1, 5),
            "Rewrote the retry loop of the webhook dispatcher.",
        ),
        (
            "export",
            at(2026, 1, 12),
            "Profiled the CSV export and cut its memory in half.",
        ),
        (
            "audit",
            at(2026, 1, 14),
            "Added pagination to the audit log endpoint.",
        ),
        (
            "berlin",
            at(2026, 1, 26),
            "I moved to Berlin last weekend, so my hours might be weird.",
        ),
        (
            "billing",
            at(2026, 2, 4),
            "Renamed the billing tables and their indexes.",
        ),
        // The only item holding the question's words, outside every span asked about.
        (
            "docs",
            at(2026, 2, 11),
            "I was working on the onboarding docs, working through them.",
        ),
    ];
    let sent: Vec<(&str, &str, i64, &str)> = work
        .iter()
        .map(|(session, ms, text)| (*session, DAYS, *ms, *text))
        .collect();
    publish(&app, &sent).await;
    let asked = |query: &str| SearchRequest {
        as_of_ms: as_of(),
        ..prompts(query, DAYS)
    };
    let sessions = |reply: &SearchReply| distinct_sessions(&reply.hits);

    // Two weeks before the move (26 January) is 12 January: that day's work first, then the
    // work nearest it; the note that merely says "working" is not among them.
    let reply = search(
        &app,
        asked("What was I working on two weeks before I moved to Berlin?"),
    )
    .await;
    assert_eq!(
        sessions(&reply)[..2],
        ["export", "audit"],
        "{:?}",
        sessions(&reply)
    );
    assert!(reply.hits.iter().all(|hit| hit.found_by == ["time"]));
    // "Last week", asked on Thursday 12 February, is 2 to 8 February.
    let reply = search(&app, asked("what did I do last week?")).await;
    assert_eq!(sessions(&reply)[0], "billing", "{:?}", sessions(&reply));
    // Grouped by session, the same order.
    let reply = search(
        &app,
        SearchRequest {
            group: "session".into(),
            ..asked("Roughly two weeks before I moved to Berlin, what was I doing?")
        },
    )
    .await;
    assert_eq!(
        sessions(&reply)[..2],
        ["export", "audit"],
        "{:?}",
        sessions(&reply)
    );
    // A subject named with the time is still searched for: the docs note is two days later.
    let reply = search(
        &app,
        asked("What was I working on in the onboarding docs two weeks before I moved to Berlin?"),
    )
    .await;
    assert_eq!(sessions(&reply)[0], "docs", "{:?}", sessions(&reply));
    app.stop_services().await;
}

/// "Two weeks before the Lisbon conference": the span is placed against the day the memory
/// says the event happened, not against a date in the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_a_span_before_or_after_an_event_is_placed_on_the_events_day() {
    let mut app = App::start().await;
    const EVENTS: &str = "/work/events";
    // The same work, told the same way, on four days; the conference on 20 January.
    let work = [
        ("w1", at(2025, 12, 1)),
        ("w2", at(2026, 1, 6)),
        ("w3", at(2026, 1, 23)),
        ("w4", at(2026, 2, 10)),
    ];
    let texts: Vec<String> = (1..=work.len())
        .map(|n| format!("worked on the invoice exporter retries, attempt {n}"))
        .collect();
    let mut sent: Vec<(&str, &str, i64, &str)> = work
        .iter()
        .zip(&texts)
        .map(|((session, ms), text)| (*session, EVENTS, *ms, text.as_str()))
        .collect();
    sent.push((
        "trip",
        EVENTS,
        at(2026, 1, 20),
        "Back from the conference in Lisbon, lots of ideas to try.",
    ));
    publish(&app, &sent).await;
    let asked = |query: &str| SearchRequest {
        as_of_ms: as_of(),
        ..prompts(query, EVENTS)
    };

    // Without a time, the latest work leads.
    assert_eq!(
        first_day(&app, asked("invoice exporter retries")).await,
        "2026-02-10"
    );
    for (query, day) in [
        (
            "invoice exporter retries two weeks before the Lisbon conference",
            "2026-01-06",
        ),
        (
            "what did I do on the invoice exporter the week after the conference in Lisbon?",
            "2026-01-23",
        ),
        // An event the memory does not hold cannot be dated: ranked as with no time named.
        (
            "invoice exporter retries two weeks before the Kyoto offsite",
            "2026-02-10",
        ),
    ] {
        assert_eq!(first_day(&app, asked(query)).await, day, "{query}");
    }
    app.stop_services().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_a_later_statement_on_the_same_subject_ranks_first() {
    let mut app = App::start().await;
    const OLD: &str = "The database version we use is Postgres 14 on the primary cluster.";
    const NEW: &str = "The database version we use is Postgres 16 on the primary cluster.";
    // The later statement is told at more length, so on its words alone it ranks lower.
    const OLD_LATER: &str = "Noted for the whole team: the database version we use is Postgres 14 on the primary cluster.";
    const NEW_LATER: &str = "Noted for the whole team: the database version we use is Postgres 16 on the primary cluster.";
    let (march, september) = (at(2025, 3, 10), at(2025, 9, 10));
    let mut sent = Vec::new();
    // In one project Postgres 16 came later; in the other, 14 did (a downgrade).
    for (project, early, late) in [
        ("/work/db-a", OLD, NEW_LATER),
        ("/work/db-b", NEW, OLD_LATER),
    ] {
        sent.push((project, "early", march, early));
        sent.push((project, "late", september, late));
        for (n, other) in [
            "we use nextest to run the test suite",
            "rename the flaky login test",
            "the ci runner needs more memory for the build",
        ]
        .iter()
        .enumerate()
        {
            sent.push((
                project,
                ["f1", "f2", "f3"][n],
                at(2025, 6, 1 + n as i64),
                other,
            ));
        }
    }
    let sent: Vec<(String, &str, i64, &str)> = sent
        .into_iter()
        .map(|(project, session, ms, text)| (format!("{project}-{session}"), project, ms, text))
        .collect();
    let sent: Vec<(&str, &str, i64, &str)> = sent
        .iter()
        .map(|(session, project, ms, text)| (session.as_str(), *project, *ms, *text))
        .collect();
    publish(&app, &sent).await;

    for (project, later) in [("/work/db-a", NEW_LATER), ("/work/db-b", OLD_LATER)] {
        let reply = search(&app, prompts("which database version do we use", project)).await;
        let titles: Vec<&str> = reply.hits.iter().map(|h| h.title.as_str()).collect();
        assert_eq!(titles.first(), Some(&later), "{project}: {titles:?}");
        assert!(titles.len() >= 2, "{titles:?}");
        // Asked "now", the later one leads too.
        let reply = search(
            &app,
            prompts("which database version do we use now", project),
        )
        .await;
        assert_eq!(reply.hits[0].title, later, "{project}");
        // The reply says which statement the later one updates, and so does the context
        // injected with a prompt: the current one is marked, the earlier one points to it.
        let (newer, older) = (&reply.hits[0], &reply.hits[1]);
        assert_eq!(newer.updates, older.id, "{project}");
        let context: proto::ContextReply = app
            .ask(
                subjects::RETRIEVAL_CONTEXT,
                &proto::ContextRequest {
                    moment: proto::context_request::Moment::Prompt as i32,
                    project: project.to_owned(),
                    session_id: "now".into(),
                    prompt: "which database version do we use".into(),
                    ..Default::default()
                },
            )
            .await;
        let line = |id: i64| {
            context
                .text
                .lines()
                .find(|l| l.starts_with(&format!("- [#{id}]")))
                .unwrap_or_else(|| panic!("no line for #{id} in {}", context.text))
        };
        assert!(
            line(newer.id).contains(&format!("(current; updates #{})", older.id)),
            "{}",
            context.text
        );
        assert!(
            line(older.id).contains(&format!("(earlier; #{} is current)", newer.id)),
            "{}",
            context.text
        );
    }
    app.stop_services().await;
}

const GROUPS: &str = "/work/groups";
const QUESTION: &str = "kafka consumer lag alert threshold";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_sessions_rank_by_the_evidence_they_hold() {
    let mut app = App::start().await;
    let day = at(2026, 1, 20);
    publish(
        &app,
        &[
            // One item that says it all...
            (
                "single",
                GROUPS,
                day,
                "kafka consumer lag alert threshold raised to 5000 messages",
            ),
            // ...and a session that worked on it at length, each item saying part of it.
            (
                "several",
                GROUPS,
                day + DAY,
                "the kafka consumer restarted after the deploy",
            ),
            (
                "several",
                GROUPS,
                day + DAY + 60_000,
                "consumer lag grew during the nightly backfill",
            ),
            (
                "several",
                GROUPS,
                day + DAY + 120_000,
                "the lag alert fired twice overnight, so the threshold needs a look",
            ),
            (
                "several",
                GROUPS,
                day + DAY + 180_000,
                "kafka partitions were rebalanced and the consumer lag alert cleared",
            ),
            (
                "other",
                GROUPS,
                day + 2 * DAY,
                "rename the flaky login test",
            ),
            (
                "other",
                GROUPS,
                day + 2 * DAY + 60_000,
                "bump the tokio version in the workspace",
            ),
        ],
    )
    .await;

    // Item by item, the one that says it all leads.
    let items = search(&app, prompts(QUESTION, GROUPS)).await;
    assert_eq!(items.hits[0].session_id, "single");

    // By session, the session holding more of the evidence leads; each session's best hits
    // come together, at most three, every one with its session's score.
    let grouped = search(
        &app,
        SearchRequest {
            group: "session".into(),
            limit: 2,
            ..prompts(QUESTION, GROUPS)
        },
    )
    .await;
    let runs: Vec<&[proto::SearchHit]> = grouped
        .hits
        .chunk_by(|a, b| a.session_id == b.session_id)
        .collect();
    let order: Vec<&str> = runs.iter().map(|r| r[0].session_id.as_str()).collect();
    assert_eq!(order, ["several", "single"]);
    assert_eq!(runs[0].len(), 3);
    assert_eq!(runs[1].len(), 1);
    assert!(runs[0].iter().all(|h| h.score == runs[0][0].score));
    assert!(runs[0][0].score > runs[1][0].score);

    // The command line.
    let out = app.mneme(&[
        "search",
        QUESTION,
        "--project",
        GROUPS,
        "--kind",
        "prompt",
        "--group",
        "session",
        "--limit",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sessions = |found: &Value| -> Vec<String> {
        found["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("no sessions in {found}"))
            .iter()
            .map(|s| s["session_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(sessions(&found), ["several", "single"]);
    assert_eq!(found["sessions"][0]["hits"].as_array().unwrap().len(), 3);
    let text = app.mneme(&[
        "search",
        QUESTION,
        "--project",
        GROUPS,
        "--kind",
        "prompt",
        "--group",
        "session",
        "--limit",
        "1",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("session several"), "{text}");
    assert!(!text.contains("session single"), "{text}");

    // REST.
    let base = app.start_api(api::ApiArgs::default()).await;
    let http = Http::new(&base);
    let (status, found) = http
        .get(&format!(
            "/v1/search?q=kafka+consumer+lag+alert+threshold&project={GROUPS}&kind=prompt&group=session&limit=2"
        ))
        .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(sessions(&found), ["several", "single"]);
    let ids: Vec<i64> = found["sessions"][0]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    let best = &found["sessions"][0]["hits"][0];
    assert_eq!(best["session_id"], "several");
    assert!(!best["snippet"].as_str().unwrap().is_empty(), "{best}");
    let (status, _) = http.get("/v1/search?q=kafka&group=project").await;
    assert_eq!(status, 400);

    // MCP, as an agent host runs `mneme mcp`.
    let mut command = tokio::process::Command::new(binary("mneme"));
    command.arg("mcp").envs(app.env());
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.expect("initialise over stdio");
    let arguments = serde_json::json!({"query": QUESTION, "project": GROUPS, "group": "session",
        "limit": 2, "kinds": ["prompt"]});
    let result = client
        .call_tool(
            CallToolRequestParams::new("search")
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(text.starts_with("session several"), "{text}");
    let single = text.find("session single").expect("the second session");
    // Three hits under the first session, each an indented index line.
    assert_eq!(text[..single].matches("\n  #").count(), 3, "{text}");
    client.cancel().await.unwrap();
    app.stop_services().await;
}

/// Asked what holds now, with `Tuning::successor_cosine` set (it is off by default), a later
/// change on a subject ranks above the older statement, though the older one is worded more
/// like the question: each of the first hits is followed by a later hit near it in meaning.
/// The service, with the step off, ranks the older statement above the change; a question that
/// does not ask what holds now is ranked alike by both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_asked_what_holds_now_the_later_change_can_rank_above() {
    let mut app = App::start().await;
    const PROJECT: &str = "/work/hosting";
    let mut sent = vec![
        (
            "old",
            PROJECT,
            at(2025, 3, 10),
            "Production runs on Heroku.",
        ),
        (
            "new",
            PROJECT,
            at(2025, 9, 10),
            "Production is on Fly.io now, we left Heroku behind.",
        ),
    ];
    // Sharing the question's words, not its answer.
    let noise = [
        "Hosting costs are up this quarter.",
        "Production had a brief blip during the rollout.",
        "The deploy took twenty minutes today.",
        "Can you check why the production logs are so noisy? The hosting dashboard shows errors.",
        "What does the staging environment run on? I want it to match.",
    ];
    sent.extend(noise_notes(PROJECT, &noise));
    publish(&app, &sent).await;
    let asked = |question: &str| SearchRequest {
        as_of_ms: at(2025, 10, 1),
        ..prompts(question, PROJECT)
    };
    let place = |hits: &[proto::SearchHit], session: &str| {
        hits.iter()
            .position(|h| h.session_id == session)
            .unwrap_or(usize::MAX)
    };
    let now = asked("What hosting does production run on currently?");
    let reply = search(&app, now.clone()).await;
    let sessions: Vec<&str> = reply.hits.iter().map(|h| h.session_id.as_str()).collect();
    assert!(
        place(&reply.hits, "old") < place(&reply.hits, "new"),
        "{sessions:?}"
    );

    let with = app
        .searcher(retrieval::search::Tuning {
            successor_cosine: 0.4,
            ..Default::default()
        })
        .await;
    let (hits, _) = with.search(&now).await.unwrap();
    let (new, old) = (place(&hits, "new"), place(&hits, "old"));
    let sessions: Vec<&str> = hits.iter().map(|h| h.session_id.as_str()).collect();
    assert!(new < old && old != usize::MAX, "{sessions:?}");
    assert_eq!(
        hits[new].updates, hits[old].id,
        "the change names what it updates"
    );
    let plain = asked("What hosting does production run on?");
    let ids = |hits: &[proto::SearchHit]| hits.iter().map(|h| h.id).collect::<Vec<_>>();
    let (hits, _) = with.search(&plain).await.unwrap();
    assert_eq!(ids(&search(&app, plain).await.hits), ids(&hits));
    app.stop_services().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_a_short_form_is_found_by_its_long_name() {
    let mut app = App::start().await;
    const PROJECT: &str = "/work/forms";
    let mut sent = vec![(
        "change",
        PROJECT,
        at(2025, 9, 10),
        "PRs now go to `develop` instead of `master`.",
    )];
    // Sharing the question's words, not its answer.
    let noise = [
        "Pull the latest changes before you start the migration.",
        "The request handler needs a timeout of its own.",
        "Which branch should the hotfix be based on?",
        "Branch protection rules keep blocking the release job.",
        "The target directory is huge again, can we clean it in CI?",
    ];
    sent.extend(noise_notes(PROJECT, &noise));
    publish(&app, &sent).await;
    let asked = |mode: &str| SearchRequest {
        as_of_ms: at(2025, 10, 1),
        mode: mode.to_owned(),
        ..prompts("Which branch do pull requests target?", PROJECT)
    };
    let sessions = |hits: &[proto::SearchHit]| -> Vec<String> {
        hits.iter().map(|h| h.session_id.clone()).collect()
    };
    // Full text alone finds the note by the short form, the only word it shares with the
    // question; as one word of the question's four it ranks with the notes sharing one other.
    let words = search(&app, asked("fts")).await;
    assert!(
        words.hits.iter().any(|h| h.session_id == "change"),
        "{:?}",
        sessions(&words.hits)
    );
    // Without the other forms, full text does not find it at all.
    let without = app
        .searcher(retrieval::search::Tuning {
            other_forms: false,
            ..Default::default()
        })
        .await;
    let (hits, _) = without.search(&asked("fts")).await.unwrap();
    assert!(
        hits.iter().all(|h| h.session_id != "change"),
        "{:?}",
        sessions(&hits)
    );
    app.stop_services().await;
}

/// A question setting two events against each other needs both of their sessions, and worded
/// more like one event than the other it ranks the first one's look-alikes above the second:
/// each event searched on its own gives the second its place among the first five sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_time_both_events_a_question_sets_against_each_other_are_found() {
    let mut app = App::start().await;
    const PROJECT: &str = "/work/events";
    let mut sent = vec![
        (
            "sso",
            PROJECT,
            at(2025, 3, 4),
            "Single sign-on is live: enterprise customers log in through their own identity provider.",
        ),
        (
            "theme",
            PROJECT,
            at(2025, 4, 15),
            "Shipped the dark theme for the dashboard today.",
        ),
    ];
    // The look-alikes of the event the question is worded like.
    let noise = [
        "The dashboard's dark theme has too little contrast on the first chart.",
        "Which dashboard widgets should ship first in the redesign?",
        "The theme switcher on the dashboard forgets the dark setting after a reload.",
        "Ship the new dashboard colours first, then the dark theme tokens.",
        "Dark theme screenshots for the dashboard docs are out of date.",
        "The first paint of the dashboard is slow with the dark theme on.",
        "Did the dashboard theme refactor ship with the last release?",
    ];
    // The other event's words in other senses, so that none of them is rare in the store.
    let others = [
        "Sign the release tag with a single key, not the whole keyring.",
        "A single failing test should not sign off the build as red.",
        "Sign each artifact before upload; a single unsigned one breaks the mirror.",
    ];
    for (n, (text, session)) in others.iter().zip(["m0", "m1", "m2"]).enumerate() {
        sent.push((session, PROJECT, at(2025, 2, 1 + n as i64), text));
    }
    let sessions = ["n0", "n1", "n2", "n3", "n4", "n5", "n6"];
    for (n, (text, session)) in noise.iter().zip(sessions).enumerate() {
        sent.push((session, PROJECT, at(2025, 5, 1 + n as i64), text));
    }
    publish(&app, &sent).await;
    let asked = SearchRequest {
        as_of_ms: at(2025, 10, 1),
        ..prompts(
            "Which did I ship first, single sign-on or the dark theme for the dashboard?",
            PROJECT,
        )
    };
    let first_five = |hits: &[proto::SearchHit]| {
        let mut sessions = distinct_sessions(hits);
        sessions.truncate(5);
        sessions
    };
    let without = app
        .searcher(retrieval::search::Tuning {
            two_events_margin: 0.0,
            ..Default::default()
        })
        .await;
    let (hits, _) = without.search(&asked).await.unwrap();
    let before = first_five(&hits);
    let after = first_five(&search(&app, asked).await.hits);
    assert!(!before.contains(&"sso".to_owned()), "{before:?}");
    assert!(
        after.contains(&"sso".to_owned()) && after.contains(&"theme".to_owned()),
        "{after:?}"
    );
    app.stop_services().await;
}
