//! The dashboard in a real headless Chromium, driven over WebDriver (chromedriver) with plain
//! HTTP requests: it loads, a live event appears without a reload, a search highlights what it
//! matched, a session opens; on a laptop window and a phone-sized one. On a store filled by
//! `mneme import claude-code` from the real transcripts, the first screen shows the sessions
//! with their summaries, the patterns and the activity of the days the sessions happened; on an
//! empty store it shows how to connect an agent. Screenshots are saved under the target
//! directory (`target/<profile>/screenshots/`).
//!
//! Without `chromedriver` on PATH (Debian: `apt-get install chromium chromium-driver`) the test
//! says plainly that it did not run; CI installs both.

use crate::api::{Http, seed};
use crate::harness::{App, transcripts_dir};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "browser-token-0123456789";

/// A chromedriver child process and one browser session, both ended on drop.
struct Browser {
    driver: Child,
    url: String,
    session: String,
    http: reqwest::Client,
    shots: PathBuf,
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

impl Browser {
    async fn start() -> Option<Browser> {
        let driver_path = std::env::var_os("MNEME_CHROMEDRIVER")
            .map(PathBuf::from)
            .or_else(|| find_on_path("chromedriver"))?;
        let chrome = std::env::var_os("MNEME_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| find_on_path("chromium"))
            .or_else(|| find_on_path("google-chrome"))?;
        let port = crate::harness::free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let created: Value = http
            .post(format!("{url}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chrome,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900", "--lang=en-US"],
                },
            }}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {created}"))
            .to_owned();
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_owned();
        let shots = profile_dir.join("screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        Some(Browser {
            driver,
            url,
            session,
            http,
            shots,
        })
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.url, self.session);
        let mut request = self.http.request(method.clone(), url);
        if method == reqwest::Method::POST {
            request = request.json(&body);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        if let Some(error) = answer["value"]["error"].as_str() {
            panic!("webdriver {path}: {error}: {}", answer["value"]["message"]);
        }
        answer["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    /// Run JavaScript in the page and return its result.
    async fn eval(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Wait until `script` returns something truthy; return it.
    async fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let value = self.eval(script).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                self.screenshot(&format!("failed-{}", what.replace(' ', "-")))
                    .await;
                panic!("the dashboard never showed {what}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn click(&self, selector: &str) {
        let found = self
            .command(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": selector}),
            )
            .await;
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {selector}"))
            .to_owned();
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            json!({}),
        )
        .await;
    }

    async fn resize(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/window/rect",
            json!({"width": width, "height": height}),
        )
        .await;
    }

    async fn screenshot(&self, name: &str) {
        let shot = self
            .command(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        if let Some(data) = shot.as_str() {
            let path = self.shots.join(format!("{name}.png"));
            std::fs::write(&path, base64_decode(data)).unwrap();
            println!("screenshot: {}", path.display());
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64, as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= d << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

#[test]
fn base64_decodes_what_webdriver_sends() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGk="), b"hi");
    assert_eq!(base64_decode("YWJj"), b"abc");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_live_events_highlighted_search_and_sessions_in_chromium() {
    let Some(browser) = Browser::start().await else {
        println!(
            "browser test not run: chromedriver or chromium is not installed (apt-get install chromium chromium-driver)"
        );
        return;
    };
    let mut app = App::start().await;
    let base = app
        .start_api(api::ApiArgs {
            token: Some(TOKEN.to_owned()),
            ..Default::default()
        })
        .await;
    let mut http = Http::new(&base);
    http.token = TOKEN.to_owned();
    seed(&app, &http, "browser-1").await;

    // The dashboard loads and its live stream connects.
    browser.open(&format!("{base}/")).await;
    browser
        .wait_for(
            "the live stream connected",
            "return document.querySelector('#status').textContent === 'live'",
        )
        .await;
    let title = browser.eval("return document.title").await;
    assert_eq!(title, "mneme");

    // A new event appears in the feed without a reload.
    let (status, _) = http
        .post(
            "/v1/events",
            json!({"session_id": "browser-2", "kind": "prompt", "project": "/work/web",
                   "text": "teach the parser about trailing commas"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    browser
        .wait_for(
            "the live event",
            "return Array.from(document.querySelectorAll('#feed li')).some(li => li.textContent.includes('trailing commas'))",
        )
        .await;
    browser.screenshot("live").await;

    // A search highlights the words it matched.
    browser
        .open(&format!("{base}/#/search?q=websocket%20backoff"))
        .await;
    let marks = browser
        .wait_for(
            "highlighted results",
            "return Array.from(document.querySelectorAll('#results li mark')).map(m => m.textContent.toLowerCase())",
        )
        .await;
    let marks: Vec<String> = serde_json::from_value(marks).unwrap();
    assert!(
        marks.iter().all(|m| m == "websocket" || m == "backoff"),
        "{marks:?}"
    );
    browser.screenshot("search").await;

    // A result opens its session: timeline and summary.
    browser.click("#results li a.title").await;
    browser
        .wait_for(
            "the session",
            "return document.querySelector('#session-title').textContent.includes('exponential backoff') && document.querySelectorAll('#session-timeline li').length >= 4",
        )
        .await;
    let hash = browser.eval("return location.hash").await;
    assert_eq!(hash, "#/session/browser-1");
    browser.screenshot("session").await;

    // Stats draw their charts; the layout holds on a phone.
    browser.open(&format!("{base}/#/stats")).await;
    browser
        .wait_for(
            "the charts",
            "return document.querySelectorAll('#chart-days svg rect').length > 0 && document.querySelectorAll('#chart-kinds svg rect').length > 0",
        )
        .await;
    browser.screenshot("stats").await;
    browser.resize(390, 844).await;
    browser.open(&format!("{base}/#/sessions")).await;
    browser
        .wait_for(
            "sessions on a phone",
            "return document.querySelectorAll('#sessions li.session').length >= 2",
        )
        .await;
    let overflow = browser
        .eval("return document.documentElement.scrollWidth <= window.innerWidth + 1")
        .await;
    assert_eq!(overflow, true, "the page scrolls sideways on a phone");
    browser.screenshot("sessions-phone").await;
    browser
        .command(reqwest::Method::DELETE, "", Value::Null)
        .await;
}

/// Say plainly that a browser test did not run, and why.
fn not_run() {
    println!(
        "browser test not run: chromedriver or chromium is not installed (apt-get install chromium chromium-driver)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_opens_on_imported_sessions_summaries_patterns_and_their_own_dates() {
    let Some(browser) = Browser::start().await else {
        return not_run();
    };
    let mut app = App::start().await;
    let base = app
        .start_api(api::ApiArgs {
            token: Some(TOKEN.to_owned()),
            ..Default::default()
        })
        .await;

    // The real transcripts, through `mneme import` and the whole pipeline.
    let dir = transcripts_dir();
    let output = app.mneme(&[
        "import",
        "claude-code",
        "--path",
        dir.to_str().unwrap(),
        "--json",
        "--no-wait",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let imported: Value = serde_json::from_slice(&output.stdout).unwrap();
    let events = imported["published"].as_i64().unwrap();
    assert!(events > 1000, "{imported}");
    let wait = Duration::from_secs(300);
    let stored = app
        .wait_for_count("SELECT count(*) FROM observations", events, wait)
        .await;
    assert_eq!(
        stored, events,
        "ingest did not store the import: {imported}"
    );
    // While retrieval still embeds the import, the first screen says how far semantic search
    // has got. On a machine fast enough to finish before the page loads there is nothing to
    // show, and the test says so.
    let http = Http::new(&base);
    let (_, ready) = http.get("/readyz").await;
    let behind = ready["services"]["retrieval"]["backlogs"]
        .as_array()
        .is_some_and(|b| {
            b.iter()
                .any(|b| b["eta_ms"] != 0 && b["done"].as_i64() < b["total"].as_i64())
        });
    if behind {
        browser.open(&format!("{base}/#token={TOKEN}")).await;
        let line = browser
            .wait_for(
                "the embedding backlog",
                "const b = document.querySelector('#backlog'); return !b.hidden && b.textContent",
            )
            .await;
        assert!(
            line.as_str()
                .unwrap()
                .starts_with("Semantic search covers "),
            "{line}"
        );
        browser.screenshot("home-embedding").await;
    } else {
        println!("embedding finished before the dashboard loaded: its backlog line not shown");
    }
    // The compressor and the pattern service have read every stored event (as far as each
    // session's cursor), so the summaries and patterns the dashboard shows are all written.
    for service in ["compressor_sessions", "pattern_sessions"] {
        let walked = format!(
            "SELECT count(*) FROM observations o JOIN {service} s ON s.session_id = o.session_id
             WHERE o.id <= s.cursor"
        );
        let read = app.wait_for_count(&walked, events, wait).await;
        assert_eq!(read, events, "{service} did not read the import");
    }
    let summaries = app.count("SELECT count(*) FROM session_summaries").await;
    assert!(summaries >= 2, "{summaries} summaries");
    let recurring = app
        .count("SELECT count(*) FROM patterns WHERE occurrences >= 2")
        .await;
    assert!(recurring >= 1, "nothing recurred");
    // The transcripts are from February 2026, whenever the test runs.
    let newest: i64 = app.count("SELECT max(occurred_at) FROM observations").await;
    let newest_day = common::time::utc_day(newest);
    assert!(newest_day.starts_with("2026-02"), "{newest_day}");

    // `/readyz` carries every service's backlogs, which the dashboard reads.
    let (_, ready) = http.get("/readyz").await;
    for service in ["ingest", "retrieval", "compressor", "pattern"] {
        assert!(
            ready["services"][service]["backlogs"].is_array(),
            "{service}: {ready}"
        );
    }

    // The address `mneme up` prints: the token is kept and taken off the address bar.
    browser.open(&format!("{base}/")).await;
    browser.eval("localStorage.clear(); return true").await;
    browser.open(&format!("{base}/#token={TOKEN}")).await;
    browser
        .wait_for(
            "sessions with their summaries",
            "return document.querySelectorAll('#home-sessions li.session-card .summary').length >= 2",
        )
        .await;
    assert_eq!(
        browser.eval("return location.href").await,
        format!("{base}/")
    );
    assert_eq!(
        browser
            .eval("return localStorage.getItem('mneme-token')")
            .await,
        TOKEN
    );
    // A summary says what was done, in the session's own words.
    let card = browser
        .eval("return document.querySelector('#home-sessions li.session-card').innerText")
        .await;
    let card = card.as_str().unwrap();
    assert!(card.contains("events"), "{card}");
    let patterns = browser
        .wait_for(
            "recurring patterns",
            "return Array.from(document.querySelectorAll('#home-patterns li.pattern')).map(li => li.innerText)",
        )
        .await;
    let patterns: Vec<String> = serde_json::from_value(patterns).unwrap();
    // What recurs across the most sessions comes first.
    assert!(patterns.iter().all(|p| p.contains("seen ")), "{patterns:?}");
    assert!(
        patterns[0].contains(" sessions"),
        "a pattern of several sessions first: {patterns:?}"
    );
    // The activity chart is drawn on the days the sessions happened, ending on the newest.
    let chart = browser
        .wait_for(
            "the activity of February 2026",
            "const c = document.querySelector('#home-activity'); return c.dataset.to && Number(c.dataset.total) > 0 && [c.dataset.from, c.dataset.to, Number(c.dataset.total), Array.from(c.querySelectorAll('rect')).filter(r => Number(r.getAttribute('height')) > 0).map(r => r.dataset.day), document.querySelector('#home-activity-range').textContent]",
        )
        .await;
    assert_eq!(chart[1], newest_day.as_str(), "{chart}");
    assert_eq!(
        chart[2], stored,
        "every event of the last 30 days is drawn: {chart}"
    );
    let bars: Vec<String> = serde_json::from_value(chart[3].clone()).unwrap();
    assert!(
        !bars.is_empty() && bars.iter().all(|d| d.starts_with("2026-02")),
        "{chart}"
    );
    assert!(chart[4].as_str().unwrap().contains("2026"), "{chart}");
    // The resume point: the latest checkpoint, with its session.
    let checkpoint = browser
        .wait_for(
            "the latest checkpoint",
            "return document.querySelector('#home-checkpoint').innerText",
        )
        .await;
    let checkpoints = app.count("SELECT count(*) FROM checkpoints").await;
    if checkpoints > 0 {
        assert!(
            checkpoint.as_str().unwrap().contains("open the session"),
            "{checkpoint}"
        );
    }
    let connect = browser
        .eval("return document.querySelector('#connect').hidden")
        .await;
    assert_eq!(
        connect, true,
        "a store with memory needs no connect instructions"
    );
    browser.screenshot("home-imported").await;
    browser
        .eval("document.querySelector('#home-activity').scrollIntoView(); return true")
        .await;
    browser.screenshot("home-imported-activity").await;

    // How the backlog of embeddings reads, with the figures of a real run.
    let line = browser
        .eval("return backlogLine({name: 'embedding', done: 751, total: 2156, rate_per_s: 3.1, eta_ms: 455000})")
        .await;
    assert_eq!(
        line,
        "Semantic search covers 751 of 2,156 items; 3.1 items/s, about 8 min left."
    );

    // Stats count by the events' own days too.
    browser.open(&format!("{base}/#/stats")).await;
    browser
        .wait_for(
            "the stats chart of February 2026",
            "return (document.querySelector('#chart-days').dataset.to || '').startsWith('2026-02') && document.querySelectorAll('#chart-days rect').length > 0",
        )
        .await;
    browser.screenshot("stats-imported").await;
    browser.resize(390, 844).await;
    browser.open(&format!("{base}/")).await;
    browser
        .wait_for(
            "sessions on a phone",
            "return document.querySelectorAll('#home-sessions li.session-card').length >= 2",
        )
        .await;
    let overflow = browser
        .eval("return document.documentElement.scrollWidth <= window.innerWidth + 1")
        .await;
    assert_eq!(
        overflow, true,
        "the home screen scrolls sideways on a phone"
    );
    browser.screenshot("home-imported-phone").await;
    browser
        .command(reqwest::Method::DELETE, "", Value::Null)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_on_an_empty_store_shows_how_to_connect_an_agent() {
    let Some(browser) = Browser::start().await else {
        return not_run();
    };
    let mut app = App::start().await;
    let base = app
        .start_api(api::ApiArgs {
            token: Some(TOKEN.to_owned()),
            ..Default::default()
        })
        .await;
    browser.open(&format!("{base}/")).await;
    browser
        .wait_for(
            "the connect instructions",
            "return !document.querySelector('#connect').hidden && document.querySelector('#overview').hidden",
        )
        .await;
    // `innerText` is the text as rendered: only what a person can see on the page.
    let text = browser.eval("return document.body.innerText").await;
    let text = text.as_str().unwrap();
    for command in [
        "mneme hooks install --agent claude-code",
        "mneme hooks install --agent codex",
        "mneme hooks install --agent kimi",
        "mneme hooks install --agent cursor",
        "mneme hooks install --agent kiro",
        "mneme hooks install --agent gemini",
        "mneme import claude-code",
        "mneme import claude-mem",
    ] {
        assert!(text.contains(command), "{command:?} is not shown:\n{text}");
    }
    browser.screenshot("home-empty").await;

    // The first event of the first session replaces the instructions, without a reload.
    let mut http = Http::new(&base);
    http.token = TOKEN.to_owned();
    let (status, _) = http
        .post(
            "/v1/events",
            json!({"session_id": "first-1", "kind": "prompt", "project": "/work/first",
                   "text": "set up continuous integration for the parser"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    browser
        .wait_for(
            "the first session",
            "return document.querySelector('#connect').hidden && Array.from(document.querySelectorAll('#home-sessions li')).some(li => li.textContent.includes('continuous integration'))",
        )
        .await;
    browser.screenshot("home-first-session").await;
    browser
        .command(reqwest::Method::DELETE, "", Value::Null)
        .await;
}
