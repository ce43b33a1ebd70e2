//! Retrieval with its vectors in a real Qdrant server: the collection, filters searched inside
//! Qdrant, deletes, a model change, a server restart in the middle of a backlog, and a server
//! that is down.
//!
//! Each test starts its own server from the binary `MNEME_QDRANT_BIN` names (on free ports, with
//! a temporary store), or, for the tests that never stop it, uses the shared server at
//! `MNEME_QDRANT_URL` under a collection prefix of its own. With neither, every test says so and
//! passes without running. `MNEME_QDRANT_CLUSTER=1` adds a run against three nodes in cluster
//! mode, one of which is killed while retrieval searches.

use crate::harness::{App, free_port, retrieval_args, wait_until};
use proto::Message as _;
use proto::subjects;
use proto::{SearchReply, SearchRequest};
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::{CountPointsBuilder, PayloadSchemaType, ScrollPointsBuilder};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What every test prints when there is no Qdrant to run against.
const SKIP: &str = "qdrant tests not run: set MNEME_QDRANT_BIN or MNEME_QDRANT_URL";

const DAY: i64 = 86_400_000;

/// A Qdrant server child process on free ports with a temporary store, killed on drop.
pub struct QdrantServer {
    binary: PathBuf,
    dir: tempfile::TempDir,
    http_port: u16,
    grpc_port: u16,
    /// In cluster mode: this node's peer-to-peer port, and the first node's peer URI to join
    /// through (none for the first node).
    cluster: Option<(u16, Option<String>)>,
    child: Option<Child>,
}

impl QdrantServer {
    /// Start a single server and wait until it answers.
    pub async fn start(binary: &Path) -> QdrantServer {
        QdrantServer::launch(binary, None).await
    }

    /// Start a node in cluster mode: the first one when `bootstrap` is `None`, else one that
    /// joins the cluster through the peer URI of a node already in it.
    pub async fn start_node(binary: &Path, bootstrap: Option<String>) -> QdrantServer {
        QdrantServer::launch(binary, Some((free_port(), bootstrap))).await
    }

    async fn launch(binary: &Path, cluster: Option<(u16, Option<String>)>) -> QdrantServer {
        let mut server = QdrantServer {
            binary: binary.to_owned(),
            dir: tempfile::tempdir().unwrap(),
            http_port: free_port(),
            grpc_port: free_port(),
            cluster,
            child: None,
        };
        server.resume().await;
        server
    }

    /// The gRPC URL retrieval talks to.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// The HTTP URL, for what only the REST API tells (the cluster's peers).
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The URI other nodes of a cluster reach this one at.
    pub fn peer_uri(&self) -> Option<String> {
        self.cluster
            .as_ref()
            .map(|(port, _)| format!("http://127.0.0.1:{port}"))
    }

    /// Kill the server with SIGKILL, as a crash or a lost machine would: nothing is flushed
    /// beyond what Qdrant already made durable.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same ports and storage, and wait until it answers.
    pub async fn resume(&mut self) {
        assert!(self.child.is_none(), "the qdrant server is running already");
        let dir = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("qdrant.log"))
            .unwrap();
        let mut command = Command::new(&self.binary);
        command
            // Qdrant writes a marker file and, without a configured path, snapshots relative
            // to its working directory.
            .current_dir(dir)
            .env("QDRANT__SERVICE__HOST", "127.0.0.1")
            .env("QDRANT__SERVICE__HTTP_PORT", self.http_port.to_string())
            .env("QDRANT__SERVICE__GRPC_PORT", self.grpc_port.to_string())
            .env("QDRANT__STORAGE__STORAGE_PATH", dir.join("storage"))
            .env("QDRANT__STORAGE__SNAPSHOTS_PATH", dir.join("snapshots"))
            .env("QDRANT__TELEMETRY_DISABLED", "true")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some((p2p, bootstrap)) = &self.cluster {
            command
                .env("QDRANT__CLUSTER__ENABLED", "true")
                .env("QDRANT__CLUSTER__P2P__PORT", p2p.to_string())
                .arg("--uri")
                .arg(format!("http://127.0.0.1:{p2p}"));
            if let Some(bootstrap) = bootstrap {
                command.arg("--bootstrap").arg(bootstrap);
            }
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
        self.wait_ready().await;
    }

    /// Wait until the server says it is ready and its gRPC port takes connections.
    async fn wait_ready(&mut self) {
        let http = reqwest::Client::new();
        let readyz = format!("{}/readyz", self.http_url());
        let grpc = self.grpc_port;
        let ready = wait_until(Duration::from_secs(60), || async {
            let answered = http
                .get(&readyz)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            answered && std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok()
        })
        .await;
        if ready.is_err() {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            panic!(
                "qdrant did not become ready within 60s (exited: {exited:?}); its log:\n{}",
                self.log_tail()
            );
        }
    }

    /// The end of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("qdrant.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for QdrantServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Qdrant binary `MNEME_QDRANT_BIN` names, if it names one.
fn qdrant_bin() -> Option<PathBuf> {
    let bin = PathBuf::from(std::env::var_os("MNEME_QDRANT_BIN")?);
    // A path that leads nowhere is a mistake to say, not a reason to skip quietly.
    assert!(
        bin.is_file(),
        "MNEME_QDRANT_BIN={} is not a file",
        bin.display()
    );
    Some(bin)
}

/// A Qdrant to run a test against: a server of its own, or the shared one.
enum Server {
    Own(QdrantServer),
    Shared(String),
}

impl Server {
    fn url(&self) -> String {
        match self {
            Server::Own(server) => server.url(),
            Server::Shared(url) => url.clone(),
        }
    }
}

/// A server of the test's own when there is a binary, else the shared one; `None` (said on
/// stderr) when there is neither.
async fn server() -> Option<Server> {
    if let Some(bin) = qdrant_bin() {
        return Some(Server::Own(QdrantServer::start(&bin).await));
    }
    match std::env::var("MNEME_QDRANT_URL") {
        Ok(url) if !url.is_empty() => Some(Server::Shared(url)),
        _ => {
            eprintln!("{SKIP}");
            None
        }
    }
}

/// A server of the test's own, for a test that stops and starts it; `None` (said on stderr)
/// without a binary.
async fn own_server() -> Option<QdrantServer> {
    match qdrant_bin() {
        Some(bin) => Some(QdrantServer::start(&bin).await),
        None if std::env::var_os("MNEME_QDRANT_URL").is_some() => {
            eprintln!(
                "qdrant tests not run: this test stops and restarts its server, so it needs MNEME_QDRANT_BIN"
            );
            None
        }
        None => {
            eprintln!("{SKIP}");
            None
        }
    }
}

/// A collection prefix no other test or run uses, so tests can share a server.
fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mneme_e2e_{}_{nanos}_", std::process::id())
}

/// Retrieval with its vectors in Qdrant at `url`, under `prefix`, embedding at full speed.
fn qdrant_args(url: &str, prefix: &str) -> retrieval::RetrievalArgs {
    retrieval::RetrievalArgs {
        vector_index: "qdrant".into(),
        qdrant_url: url.to_owned(),
        qdrant_prefix: prefix.to_owned(),
        embed_rest_ratio: 0.0,
        ..retrieval_args()
    }
}

/// Qdrant as the tests see it: a client of their own, to check what retrieval wrote.
struct Inspect {
    client: qdrant_client::Qdrant,
    prefix: String,
}

impl Inspect {
    fn new(url: &str, prefix: &str) -> Inspect {
        let client = qdrant_client::Qdrant::from_url(url)
            .timeout(Duration::from_secs(10))
            .skip_compatibility_check()
            .build()
            .unwrap();
        Inspect {
            client,
            prefix: prefix.to_owned(),
        }
    }

    /// The collections under this test's prefix, sorted.
    async fn collections(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .client
            .list_collections()
            .await
            .unwrap()
            .collections
            .into_iter()
            .map(|c| c.name)
            .filter(|name| name.starts_with(&self.prefix))
            .collect();
        names.sort();
        names
    }

    /// Delete the collections under this test's prefix, so a shared server is left as found.
    async fn drop_all(&self) {
        for name in self.collections().await {
            self.client.delete_collection(name).await.unwrap();
        }
    }

    /// The exact number of points in `collection`.
    async fn count(&self, collection: &str) -> u64 {
        self.client
            .count(CountPointsBuilder::new(collection).exact(true))
            .await
            .unwrap()
            .result
            .unwrap()
            .count
    }

    /// Every point id in `collection`.
    async fn ids(&self, collection: &str) -> BTreeSet<i64> {
        let mut ids = BTreeSet::new();
        let mut offset = None;
        loop {
            let mut request = ScrollPointsBuilder::new(collection)
                .limit(1_000)
                .with_payload(false)
                .with_vectors(false);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let page = self.client.scroll(request).await.unwrap();
            for point in page.result {
                match point.id.and_then(|id| id.point_id_options) {
                    Some(PointIdOptions::Num(id)) => assert!(ids.insert(id as i64)),
                    other => panic!("a point without a numeric id: {other:?}"),
                }
            }
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => return ids,
            }
        }
    }

    /// The collection's vector settings, as Qdrant reports them.
    async fn vectors_config(&self, collection: &str) -> String {
        let params = self
            .client
            .collection_info(collection)
            .await
            .unwrap()
            .result
            .and_then(|info| info.config)
            .and_then(|config| config.params)
            .unwrap();
        format!("{:?}", params.vectors_config)
    }

    /// The payload indexes of `collection`, by field.
    async fn payload_indexes(&self, collection: &str) -> BTreeMap<String, PayloadSchemaType> {
        let info = self
            .client
            .collection_info(collection)
            .await
            .unwrap()
            .result
            .unwrap();
        info.payload_schema
            .into_iter()
            .map(|(field, schema)| {
                (
                    field,
                    PayloadSchemaType::try_from(schema.data_type).unwrap(),
                )
            })
            .collect()
    }
}

/// The Qdrant collection of the store's active vector space (the only one once a model change
/// has caught up).
async fn active_collection(app: &App, prefix: &str) -> String {
    let (table,): (String,) =
        sqlx::query_as("SELECT table_name FROM vector_spaces ORDER BY created_at DESC LIMIT 1")
            .fetch_one(app.store().await.pool())
            .await
            .unwrap();
    format!("{prefix}{table}")
}

/// The ids of every memory item in the store.
async fn item_ids(app: &App) -> BTreeSet<i64> {
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT id FROM memory_items")
        .fetch_all(app.store().await.pool())
        .await
        .unwrap();
    rows.into_iter().map(|(id,)| id).collect()
}

/// Wait until `collection` holds exactly `expected` points; returns the last count seen.
async fn wait_points(inspect: &Inspect, collection: &str, expected: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = inspect.count(collection).await;
        if n == expected || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A prompt as ingest receives it, at a time of the test's choosing.
fn prompt(session: &str, project: &str, at_ms: i64, text: &str) -> proto::Event {
    proto::Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: at_ms,
        agent: proto::Agent::ClaudeCode as i32,
        session_id: session.into(),
        project: project.into(),
        cwd: project.into(),
        host_event: "UserPromptSubmit".into(),
        payload: Some(proto::event::Payload::Prompt(proto::Prompt {
            text: text.to_owned(),
        })),
        ..Default::default()
    }
}

/// A saved memory (kind `memory`), at a time of the test's choosing.
fn memory(session: &str, project: &str, at_ms: i64, text: &str) -> proto::Event {
    proto::Event {
        payload: Some(proto::event::Payload::Memory(proto::Memory {
            text: text.to_owned(),
            ..Default::default()
        })),
        host_event: String::new(),
        ..prompt(session, project, at_ms, text)
    }
}

/// Publish events to ingest through JetStream and wait for every ack.
async fn publish(app: &App, events: &[proto::Event]) {
    let js = async_nats::jetstream::new(app.client().await);
    let mut acks = Vec::new();
    for event in events {
        acks.push(
            js.publish(event.subject(), event.encode_to_vec().into())
                .await
                .unwrap(),
        );
    }
    for ack in acks {
        ack.await.unwrap();
    }
}

async fn search(app: &App, request: SearchRequest) -> SearchReply {
    let reply: SearchReply = app.ask(subjects::RETRIEVAL_SEARCH, &request).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    reply
}

fn query(text: &str, project: &str) -> SearchRequest {
    SearchRequest {
        query: text.to_owned(),
        project: project.to_owned(),
        limit: 10,
        ..Default::default()
    }
}

fn titles(reply: &SearchReply) -> Vec<&str> {
    reply.hits.iter().map(|h| h.title.as_str()).collect()
}

/// Retrieval's health detail.
async fn health_detail(app: &App) -> String {
    app.health("retrieval").await.detail
}

/// What retrieval's health detail says while the vector index fails.
const UNAVAILABLE: &str = "semantic search unavailable";

/// Wait until retrieval's health says (`true`) or stops saying (`false`) that semantic search
/// is unavailable.
async fn says_unavailable(app: &App, said: bool, within: Duration) {
    let reached = wait_until(within, || async {
        health_detail(app).await.contains(UNAVAILABLE) == said
    })
    .await;
    assert!(reached.is_ok(), "{}", health_detail(app).await);
}

/// Check `times` times, `every` apart, that health still says semantic search is unavailable.
async fn keeps_saying_unavailable(app: &App, times: usize, every: Duration) {
    for _ in 0..times {
        tokio::time::sleep(every).await;
        let detail = health_detail(app).await;
        assert!(detail.contains(UNAVAILABLE), "{detail}");
    }
}

const WEBSOCKET: &str =
    "the websocket connection keeps dropping and has to reconnect every few minutes";
/// Shares no word with [`WEBSOCKET`]: only meaning connects them.
const PARAPHRASE: &str = "socket disconnects periodically";

/// Three prompts of a project, one of them about a connection that keeps dropping.
fn meaning_set(project: &str, at_ms: i64) -> Vec<proto::Event> {
    [
        WEBSOCKET,
        "add a dark mode toggle to the settings page",
        "write the release notes for version two",
    ]
    .iter()
    .enumerate()
    .map(|(n, text)| prompt(&format!("meaning-{n}"), project, at_ms, text))
    .collect()
}

/// A hybrid search for [`PARAPHRASE`] finds [`WEBSOCKET`] through the vector index alone.
async fn assert_found_by_meaning(app: &App, project: &str) {
    let reply = search(
        app,
        SearchRequest {
            limit: 3,
            ..query(PARAPHRASE, project)
        },
    )
    .await;
    assert_eq!(reply.mode, "hybrid");
    let hit = reply
        .hits
        .iter()
        .find(|h| h.title == WEBSOCKET)
        .unwrap_or_else(|| panic!("{:?}", titles(&reply)));
    assert_eq!(hit.found_by, ["vector"]);
}

/// Starting retrieval twice on one store and server makes one collection, with an index on
/// each filtered field; search finds by meaning through it; and every filter is applied
/// inside Qdrant's search, not after it: 110 items identical to the query, each failing the
/// filter, outrank the one item that passes it, so a filter applied only to the 100 nearest
/// points would find nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_collection_is_made_and_every_filter_is_searched_inside_qdrant() {
    let Some(server) = server().await else { return };
    let prefix = unique_prefix();
    let args = qdrant_args(&server.url(), &prefix);
    let mut app = App::bare();
    app.start_services_core(args.clone()).await;

    const NOISE: &str = "the websocket connection keeps dropping and has to reconnect";
    let t0 = 1_760_000_000_000;
    let (here, elsewhere) = ("/work/qfilter", "/work/qnoise");
    let mut events = meaning_set("/work/qmeaning", t0);
    events.extend((0..110).map(|n| prompt(&format!("noise-{n}"), elsewhere, t0, NOISE)));
    let targets = [
        prompt(
            "t-project",
            here,
            t0,
            "our websocket link drops and reconnects",
        ),
        memory(
            "t-kind",
            elsewhere,
            t0,
            "the websocket link drops, so the client reconnects",
        ),
        prompt(
            "t-session",
            elsewhere,
            t0,
            "websocket connections drop and reconnect over and over",
        ),
        prompt(
            "t-late",
            elsewhere,
            t0 + 10 * DAY,
            "the socket connection dropped again and reconnected",
        ),
        prompt(
            "t-early",
            elsewhere,
            t0 - 10 * DAY,
            "a dropping websocket connection that must reconnect",
        ),
    ];
    events.extend(targets.iter().cloned());
    publish(&app, &events).await;
    let items = events.len() as i64;
    app.wait_indexed(items).await;

    // Again on the same store and server: the collection is there, nothing is lost.
    app.stop_services().await;
    app.start_services_core(args).await;
    let inspect = Inspect::new(&server.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    assert_eq!(
        inspect.collections().await,
        std::slice::from_ref(&collection)
    );
    assert_eq!(inspect.count(&collection).await, items as u64);
    assert_eq!(inspect.ids(&collection).await, item_ids(&app).await);
    let indexes = inspect.payload_indexes(&collection).await;
    let want: BTreeMap<String, PayloadSchemaType> = [
        ("project", PayloadSchemaType::Keyword),
        ("kind", PayloadSchemaType::Keyword),
        ("session_id", PayloadSchemaType::Keyword),
        ("occurred_at", PayloadSchemaType::Integer),
    ]
    .into_iter()
    .map(|(field, kind)| (field.to_owned(), kind))
    .collect();
    assert_eq!(indexes, want);
    // By default the full vectors stay in memory with an eight-bit copy that searches scan.
    let vectors = inspect.vectors_config(&collection).await;
    assert!(vectors.contains("Scalar(ScalarQuantization"), "{vectors}");
    assert!(!vectors.contains("on_disk: Some(true)"), "{vectors}");

    assert_found_by_meaning(&app, "/work/qmeaning").await;
    let fts = search(
        &app,
        SearchRequest {
            mode: "fts".into(),
            ..query(PARAPHRASE, "/work/qmeaning")
        },
    )
    .await;
    assert!(!titles(&fts).contains(&WEBSOCKET), "{:?}", titles(&fts));

    // Each filter alone, in vector mode: only what passes it, and what passes it is found.
    let noise_sessions: Vec<String> = (0..110).map(|n| format!("noise-{n}")).collect();
    let vector = |request: SearchRequest| SearchRequest {
        mode: "vector".into(),
        ..request
    };
    let cases: Vec<(&str, SearchRequest, &str)> = vec![
        ("project", vector(query(NOISE, here)), "t-project"),
        (
            "kind",
            vector(SearchRequest {
                kinds: vec!["memory".into()],
                ..query(NOISE, "")
            }),
            "t-kind",
        ),
        (
            "session",
            vector(SearchRequest {
                sessions: vec!["t-session".into()],
                ..query(NOISE, "")
            }),
            "t-session",
        ),
        (
            "since",
            vector(SearchRequest {
                since_ms: t0 + 5 * DAY,
                ..query(NOISE, "")
            }),
            "t-late",
        ),
        (
            "until",
            vector(SearchRequest {
                until_ms: t0 - 5 * DAY,
                ..query(NOISE, "")
            }),
            "t-early",
        ),
    ];
    for (filter, request, session) in cases {
        let reply = search(&app, request).await;
        assert_eq!(reply.mode, "vector");
        let sessions: Vec<&str> = reply.hits.iter().map(|h| h.session_id.as_str()).collect();
        assert_eq!(sessions, [session], "filter {filter}: {:?}", titles(&reply));
    }
    // Leaving out every noise session (a `must_not` in Qdrant) leaves the rest.
    let reply = search(
        &app,
        vector(SearchRequest {
            exclude_sessions: noise_sessions,
            ..query(NOISE, "/work/qnoise")
        }),
    )
    .await;
    let mut sessions: Vec<&str> = reply.hits.iter().map(|h| h.session_id.as_str()).collect();
    sessions.sort();
    assert_eq!(sessions, ["t-early", "t-kind", "t-late", "t-session"]);
    app.stop_services().await;
    inspect.drop_all().await;
}

/// Deleting a session, and retention deleting an old one, take their points out of Qdrant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_sessions_leave_no_point_in_qdrant() {
    let Some(server) = server().await else { return };
    let prefix = unique_prefix();
    let mut app = App::bare();
    app.start_services_core(qdrant_args(&server.url(), &prefix))
        .await;
    let project = "/work/qdelete";
    let now = common::time::now_ms();
    let events = [
        prompt("keep", project, now, "profile the slow startup"),
        prompt("keep", project, now + 1, "cache the compiled templates"),
        prompt("drop", project, now, "rename the parser module"),
        prompt("drop", project, now + 1, "fix the flaky login test"),
        prompt("drop", project, now + 2, "bump the tokio version"),
        prompt("old", project, now - 40 * DAY, "tune the zeppelin ballast"),
        prompt(
            "old",
            project,
            now - 40 * DAY + 1,
            "paint the lighthouse ochre",
        ),
    ];
    publish(&app, &events).await;
    app.wait_indexed(7).await;
    let inspect = Inspect::new(&server.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    assert_eq!(inspect.count(&collection).await, 7);

    let reply = app.delete_sessions(&["drop"]).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    assert_eq!(wait_points(&inspect, &collection, 4).await, 4);
    assert_eq!(inspect.ids(&collection).await, item_ids(&app).await);

    // Retention: archive after 10 idle days, delete 20 days after that; only `old` is that old.
    let reply: proto::RetentionReply = app
        .ask(
            subjects::RETENTION_SET,
            &proto::RetentionSetRequest {
                archive_after_days: 10,
                delete_archived_after_days: 20,
            },
        )
        .await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    assert_eq!(reply.deleted, 1, "{reply:?}");
    assert_eq!(wait_points(&inspect, &collection, 2).await, 2);
    let left = inspect.ids(&collection).await;
    assert_eq!(left, item_ids(&app).await);
    let sessions: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT session_id FROM memory_items")
        .fetch_all(app.store().await.pool())
        .await
        .unwrap();
    assert_eq!(sessions, [("keep".to_owned(),)]);
    app.stop_services().await;
    inspect.drop_all().await;
}

/// A new model fills a new collection in the background, and the old model's collection is
/// dropped from Qdrant once the new one has caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_change_fills_a_new_collection_and_drops_the_old_one() {
    let Some(server) = server().await else { return };
    let prefix = unique_prefix();
    let args = qdrant_args(&server.url(), &prefix);
    let mut app = App::bare();
    app.start_services_core(args.clone()).await;
    let project = "/work/qmodels";
    let now = common::time::now_ms();
    publish(&app, &meaning_set(project, now)).await;
    app.wait_indexed(3).await;
    let inspect = Inspect::new(&server.url(), &prefix);
    let first = active_collection(&app, &prefix).await;
    assert_eq!(inspect.collections().await, std::slice::from_ref(&first));
    assert_eq!(inspect.count(&first).await, 3);

    app.stop_services().await;
    app.start_services_core(retrieval::RetrievalArgs {
        embed: retrieval::models::Backend::Openai,
        embed_url: crate::harness::embeddings_server(Default::default()).await,
        embed_model: "hash-16".into(),
        ..args
    })
    .await;
    publish(
        &app,
        &[prompt(
            "later",
            project,
            now + 1,
            "profile the slow startup",
        )],
    )
    .await;
    app.wait_indexed(4).await;
    let one_space = wait_until(Duration::from_secs(30), || async {
        app.count("SELECT count(*) FROM vector_spaces").await == 1
    })
    .await;
    assert!(one_space.is_ok(), "the old space was not dropped");
    let second = active_collection(&app, &prefix).await;
    assert_ne!(second, first);
    assert_eq!(inspect.collections().await, std::slice::from_ref(&second));
    assert_eq!(inspect.count(&second).await, 4);
    assert_eq!(inspect.ids(&second).await, item_ids(&app).await);
    let reply = search(&app, query("slow startup profile", project)).await;
    assert_eq!(reply.mode, "hybrid");
    assert_eq!(reply.hits[0].title, "profile the slow startup");
    assert!(
        reply.hits[0].found_by.contains(&"vector".to_owned()),
        "{:?}",
        reply.hits[0]
    );
    app.stop_services().await;
    inspect.drop_all().await;
}

/// How far the model has embedded, by item id.
async fn embedded_upto(app: &App) -> i64 {
    app.count("SELECT COALESCE(MAX(embedded_upto), 0) FROM vector_spaces")
        .await
}

/// Qdrant killed while a backlog is being embedded, and started again on its storage: in the
/// end every item has exactly one point, none lost and none left over, and health said what
/// happened meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qdrant_restart_in_the_middle_of_a_backlog_loses_nothing() {
    let Some(mut server) = own_server().await else {
        return;
    };
    let prefix = unique_prefix();
    let mut app = App::bare();
    app.start_services_core(retrieval::RetrievalArgs {
        // At the default pace the backlog lasts long enough to be caught in the middle.
        embed_rest_ratio: 1.0,
        ..qdrant_args(&server.url(), &prefix)
    })
    .await;
    const ITEMS: i64 = 300;
    let project = "/work/qrestart";
    let t0 = 1_760_000_000_000;
    let events: Vec<proto::Event> = (0..ITEMS)
        .map(|n| {
            let text = format!(
                "rename the field {n} in the parser module and update test case {}; \
                 regenerate the fixtures of release {}",
                n * 7,
                n % 13
            );
            prompt(
                &format!("backlog-{}", n % 5),
                project,
                t0 + n * 1_000,
                &text,
            )
        })
        .collect();
    publish(&app, &events).await;
    let indexed = app
        .wait_for_count(
            "SELECT count(*) FROM memory_items",
            ITEMS,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(indexed, ITEMS);
    let last = app.count("SELECT MAX(id) FROM memory_items").await;

    // Kill the server once the model has written some batches and has more to go.
    let started = wait_until(Duration::from_secs(60), || async {
        embedded_upto(&app).await > 0
    })
    .await;
    assert!(started.is_ok(), "the model embedded nothing");
    server.kill();
    let at_kill = embedded_upto(&app).await;
    assert!(
        at_kill < last,
        "the model finished the backlog before qdrant was killed: this test needs it behind"
    );
    says_unavailable(&app, true, Duration::from_secs(20)).await;
    // Nothing is counted as embedded while the index cannot take it (one batch may have been
    // committed while the kill was under way).
    let before = embedded_upto(&app).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(embedded_upto(&app).await, before);
    assert!(before < last);

    server.resume().await;
    let done = wait_until(Duration::from_secs(240), || async {
        embedded_upto(&app).await >= last
    })
    .await;
    assert!(
        done.is_ok(),
        "the backlog did not finish after the restart: {} of {last}",
        embedded_upto(&app).await
    );
    let inspect = Inspect::new(&server.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    assert_eq!(inspect.count(&collection).await, ITEMS as u64);
    assert_eq!(inspect.ids(&collection).await, item_ids(&app).await);
    says_unavailable(&app, false, Duration::from_secs(10)).await;
    app.stop_services().await;
}

/// With Qdrant down, search answers from full-text alone and says so, health says semantic
/// search is unavailable, and what arrives meanwhile is indexed; once Qdrant is back, hybrid
/// search works again and covers what arrived while it was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_qdrant_down_search_falls_back_to_full_text_and_recovers() {
    let Some(mut server) = own_server().await else {
        return;
    };
    let prefix = unique_prefix();
    let mut app = App::bare();
    app.start_services_core(qdrant_args(&server.url(), &prefix))
        .await;
    let project = "/work/qdown";
    let now = common::time::now_ms();
    publish(&app, &meaning_set(project, now)).await;
    publish(
        &app,
        &[prompt("forgotten", project, now, "migrate the invoices")],
    )
    .await;
    app.wait_indexed(4).await;
    assert_found_by_meaning(&app, project).await;
    let inspect = Inspect::new(&server.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    assert_eq!(wait_points(&inspect, &collection, 4).await, 4);

    server.kill();
    // A session forgotten while Qdrant is down is forgotten at once in the store; its point
    // leaves Qdrant once Qdrant is back (checked at the end).
    let reply = app.delete_sessions(&["forgotten"]).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    assert_eq!(reply.sessions, 1);
    let reply = search(&app, query("websocket connection", project)).await;
    assert_eq!(reply.mode, "fts");
    assert_eq!(titles(&reply), [WEBSOCKET]);
    // Health says so at its next refresh, and keeps saying so while nothing is left to
    // embed: the embedder's idle rounds never reach Qdrant, so they cannot tell it is back.
    says_unavailable(&app, true, Duration::from_secs(10)).await;
    keeps_saying_unavailable(&app, 3, Duration::from_secs(2)).await;

    // Memory made while Qdrant is down is indexed and found by its words.
    const BACKUP: &str = "the nightly database backup failed because the disk was full";
    publish(&app, &[prompt("while-down", project, now + 1, BACKUP)]).await;
    let indexed = app
        .wait_for_count(
            "SELECT count(*) FROM memory_items",
            4,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(indexed, 4);
    let reply = search(&app, query("nightly backup", project)).await;
    assert_eq!(reply.mode, "fts");
    assert_eq!(titles(&reply), [BACKUP]);
    // Its vector cannot be written, so health keeps saying so for as long as Qdrant is down.
    says_unavailable(&app, true, Duration::from_secs(10)).await;
    keeps_saying_unavailable(&app, 4, Duration::from_secs(1)).await;

    server.resume().await;
    // The embedder retries on its own; the item that came while Qdrant was down gets its
    // vector, and a paraphrase sharing no word finds it.
    let found = wait_until(Duration::from_secs(60), || async {
        let reply = search(&app, query("backup job ran out of storage space", project)).await;
        reply.mode == "hybrid"
            && reply
                .hits
                .iter()
                .any(|h| h.title == BACKUP && h.found_by.contains(&"vector".to_owned()))
    })
    .await;
    assert!(found.is_ok(), "{}", health_detail(&app).await);
    assert_found_by_meaning(&app, project).await;
    says_unavailable(&app, false, Duration::from_secs(10)).await;
    assert_eq!(wait_points(&inspect, &collection, 4).await, 4);
    assert_eq!(inspect.ids(&collection).await, item_ids(&app).await);
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM vector_deletes")
        .fetch_one(app.store().await.pool())
        .await
        .unwrap();
    assert_eq!(pending, 0, "every delete reached Qdrant");
    app.stop_services().await;
}

/// Retrieval started while Qdrant is down answers from full-text and says why; once Qdrant
/// answers, retrieval makes its collection, embeds what arrived, and search turns hybrid,
/// with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qdrant_down_at_start_is_used_once_it_answers() {
    let Some(mut server) = own_server().await else {
        return;
    };
    server.kill();
    let prefix = unique_prefix();
    let mut app = App::bare();
    app.start_services_core(qdrant_args(&server.url(), &prefix))
        .await;
    let project = "/work/qlate";
    publish(&app, &meaning_set(project, common::time::now_ms())).await;
    // Indexed for full-text search; their vectors wait for Qdrant.
    let indexed = app
        .wait_for_count(
            "SELECT count(*) FROM memory_items",
            3,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(indexed, 3);
    let reply = search(&app, query("websocket connection", project)).await;
    assert_eq!(reply.mode, "fts");
    assert_eq!(titles(&reply), [WEBSOCKET]);
    says_unavailable(&app, true, Duration::from_secs(10)).await;

    server.resume().await;
    let found = wait_until(Duration::from_secs(60), || async {
        search(&app, query(PARAPHRASE, project))
            .await
            .hits
            .iter()
            .any(|h| h.title == WEBSOCKET && h.found_by == ["vector"])
    })
    .await;
    assert!(found.is_ok(), "{}", health_detail(&app).await);
    assert_found_by_meaning(&app, project).await;
    says_unavailable(&app, false, Duration::from_secs(10)).await;
    let inspect = Inspect::new(&server.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    assert_eq!(inspect.ids(&collection).await, item_ids(&app).await);
    app.stop_services().await;
    inspect.drop_all().await;
}

/// The name of a shard replica's state (`Active`, `Dead`, …).
fn replica_state(state: i32) -> &'static str {
    qdrant_client::qdrant::ReplicaState::try_from(state).map_or("unknown", |s| s.as_str_name())
}

/// Three Qdrant nodes in cluster mode, a collection of two shards kept twice; one node (not the
/// one retrieval talks to) is killed, and retrieval keeps finding by meaning and keeps writing.
/// Run by hand with `MNEME_QDRANT_CLUSTER=1` and `MNEME_QDRANT_BIN`; it starts three servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_collection_keeps_answering_with_a_node_down() {
    if std::env::var_os("MNEME_QDRANT_CLUSTER").is_none() {
        eprintln!("qdrant cluster test not run: set MNEME_QDRANT_CLUSTER=1 and MNEME_QDRANT_BIN");
        return;
    }
    let Some(bin) = qdrant_bin() else {
        eprintln!("qdrant cluster test not run: set MNEME_QDRANT_BIN");
        return;
    };
    let first = QdrantServer::start_node(&bin, None).await;
    let bootstrap = first.peer_uri();
    let second = QdrantServer::start_node(&bin, bootstrap.clone()).await;
    let mut third = QdrantServer::start_node(&bin, bootstrap).await;
    let http = reqwest::Client::new();
    let peers = wait_until(Duration::from_secs(60), || async {
        let cluster: Value = match http
            .get(format!("{}/cluster", first.http_url()))
            .send()
            .await
        {
            Ok(response) => response.json().await.unwrap_or_default(),
            Err(_) => return false,
        };
        cluster["result"]["peers"]
            .as_object()
            .is_some_and(|p| p.len() == 3)
    })
    .await;
    assert!(peers.is_ok(), "the three nodes did not form a cluster");

    let prefix = unique_prefix();
    let mut app = App::bare();
    app.start_services_core(retrieval::RetrievalArgs {
        qdrant_shards: Some(2),
        qdrant_replicas: Some(2),
        qdrant_write_consistency: Some(1),
        ..qdrant_args(&first.url(), &prefix)
    })
    .await;
    let project = "/work/qcluster";
    let now = common::time::now_ms();
    publish(&app, &meaning_set(project, now)).await;
    app.wait_indexed(3).await;
    let inspect = Inspect::new(&first.url(), &prefix);
    let collection = active_collection(&app, &prefix).await;
    let cluster = inspect
        .client
        .collection_cluster_info(&collection)
        .await
        .unwrap();
    assert_eq!(cluster.shard_count, 2);
    let replicas = cluster.local_shards.len() + cluster.remote_shards.len();
    assert_eq!(replicas, 4, "{cluster:?}");
    eprintln!("cluster: {collection} has 2 shards, 4 shard replicas over 3 nodes");

    // Which shard replicas the node about to be killed holds.
    let third_peer = http
        .get(format!("{}/cluster", third.http_url()))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["result"]["peer_id"]
        .as_u64()
        .unwrap();
    let on_third: Vec<u32> = cluster
        .remote_shards
        .iter()
        .filter(|shard| shard.peer_id == third_peer)
        .map(|shard| shard.shard_id)
        .collect();
    assert!(!on_third.is_empty(), "{cluster:?}");
    eprintln!("cluster: killing the node holding replicas of shards {on_third:?}");
    third.kill();
    let killed = Instant::now();
    for round in 0..10 {
        let started = Instant::now();
        assert_found_by_meaning(&app, project).await;
        eprintln!(
            "cluster: search {round} with a node down answered hybrid in {} ms ({} ms after the kill)",
            started.elapsed().as_millis(),
            killed.elapsed().as_millis()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    const BACKUP: &str = "the nightly database backup failed because the disk was full";
    publish(&app, &[prompt("while-down", project, now + 1, BACKUP)]).await;
    app.wait_indexed(4).await;
    let reply = search(&app, query("backup job ran out of storage space", project)).await;
    assert_eq!(reply.mode, "hybrid");
    assert!(
        reply
            .hits
            .iter()
            .any(|h| h.title == BACKUP && h.found_by.contains(&"vector".to_owned())),
        "{:?}",
        titles(&reply)
    );
    assert_eq!(inspect.count(&collection).await, 4);
    let level = wait_until(Duration::from_secs(10), || async {
        health_detail(&app).await.contains("4/4 items embedded")
    })
    .await;
    assert!(level.is_ok(), "{}", health_detail(&app).await);
    let after = inspect
        .client
        .collection_cluster_info(&collection)
        .await
        .unwrap();
    let states: Vec<String> = after
        .remote_shards
        .iter()
        .map(|shard| {
            format!(
                "shard {} on peer {}: {}",
                shard.shard_id,
                shard.peer_id,
                replica_state(shard.state)
            )
        })
        .chain(after.local_shards.iter().map(|shard| {
            format!(
                "shard {} here: {}, {} points",
                shard.shard_id,
                replica_state(shard.state),
                shard.points_count
            )
        }))
        .collect();
    eprintln!(
        "cluster: with a node down an item was embedded, written and found by meaning; health: {}; replicas seen from the first node: {states:?}",
        health_detail(&app).await
    );
    app.stop_services().await;
    drop(second);
}
