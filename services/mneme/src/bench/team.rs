//! `mneme-bench team`: team memory's replication, laptop → hub → laptop, with real servers.
//!
//! The hub is three clustered nats-servers (JetStream domain `hub`, so the members' streams
//! get three replicas); the laptops A (`alice`) and B (`bob`) each run the release `mneme up`
//! beside this binary, with a home, a store and a nats-server of their own, the server a leaf
//! node of the hub. Retrieval is full-text only, so embedding does not take the cores the
//! replication needs. Both laptops join the team and share one project under the same team
//! name; A's leaf link goes through a proxy the bench can cut.
//!
//! The events are Claude Code payloads of the size real sessions have (prompts, tool calls
//! with multi-kilobyte outputs, long closing assistant messages), normalised by the Claude Code
//! adapter as the hook does, and published to A's NATS under the hook's identity with
//! `Nats-Msg-Id` = event id, as the `ingest` bench publishes.
//!
//! - online: `--events N` (2,000) published on A while it is linked; events per second from
//!   the first publish until B's store holds them all, and the spread of the time from each
//!   event's publish on A to its row on B. Publishing is unpaced unless `--rate R` (events
//!   per second) is given, so by default the latencies include the queue a burst builds.
//! - catch-up: A's link cut, `--offline N` (10,000) published on A and stored there, the link
//!   restored; the time from the restore until the hub's stream of A holds them, and until
//!   B's store does.

use crate::{nats_server, percentile, publish, sorted};
use anyhow::Context as _;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The project's name in the team, the same on both laptops.
const PROJECT: &str = "payments";
/// Session id prefixes marking each phase's events, so each is counted apart in the stores.
/// They hold no `_` or `%`, which `LIKE` would read as wildcards.
const ONLINE: &str = "teambench-online-";
const OFFLINE: &str = "teambench-offline-";
/// Events of one agent session: a prompt, tool calls and the closing message, repeated.
const SESSION_EVENTS: usize = 50;
/// The longest any phase may take before the bench gives up, so a stuck link fails the run
/// instead of hanging it.
const PHASE_LIMIT: Duration = Duration::from_secs(1800);

const USAGE: &str = "usage: mneme-bench team [--events N] [--offline N] [--rate R]";

struct Options {
    events: usize,
    offline: usize,
    /// Online publishing pace in events per second; 0 publishes as fast as acks come.
    rate: usize,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        events: 2_000,
        offline: 10_000,
        rate: 0,
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let slot = match arg.as_str() {
            "--events" => &mut options.events,
            "--offline" => &mut options.offline,
            "--rate" => &mut options.rate,
            other => anyhow::bail!("unknown argument {other:?}; {USAGE}"),
        };
        let value = rest
            .next()
            .with_context(|| format!("{arg} needs a number"))?;
        *slot = value
            .replace(['_', ','], "")
            .parse()
            .with_context(|| format!("{arg} {value:?} is not a number"))?;
    }
    anyhow::ensure!(
        options.events > 0 && options.offline > 0,
        "--events and --offline need at least one event"
    );
    Ok(options)
}

/// `mneme-bench team [--events N] [--offline N] [--rate R]`; `args` are those after `team`.
pub async fn team(args: &[String]) -> anyhow::Result<()> {
    let options = options(args)?;
    // Every child process belongs to a value inside `run`'s future, whose Drop stops it; a
    // signal drops that future as an error would, instead of leaving servers running.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = run(&options) => result,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
        _ = terminate.recv() => anyhow::bail!("terminated"),
    }
}

async fn run(options: &Options) -> anyhow::Result<()> {
    let began = Instant::now();
    let mneme = beside("mneme")?;
    let nats = nats_server::find(
        std::env::var_os("MNEME_NATS_SERVER")
            .map(PathBuf::from)
            .as_deref(),
    )
    .context(nats_server::INSTALL_HINT)?;

    let keys = tempfile::tempdir()?;
    let alice_seed = keys.path().join("alice.nk");
    let bob_seed = keys.path().join("bob.nk");
    let alice_key = common::access::new_seed_file(&alice_seed)?;
    let bob_key = common::access::new_seed_file(&bob_seed)?;
    let hub = Hub::start(&nats, &[alice_key, bob_key]).await?;
    let proxy = Proxy::start(hub.leaf_ports[2]).await?;

    let mut a = Laptop::new(&mneme, "a")?;
    let mut b = Laptop::new(&mneme, "b")?;
    let a_dir = a.project("payments")?;
    let b_dir = b.project("payments-checkout")?;
    let seed = |path: &Path| path.display().to_string();
    a.mneme(&[
        "team",
        "join",
        &proxy.url(),
        "--nkey",
        &seed(&alice_seed),
        "--name",
        "alice",
    ])
    .await?;
    a.mneme(&["team", "share", &a_dir, "--as", PROJECT]).await?;
    b.mneme(&[
        "team",
        "join",
        &hub.leaf_urls(),
        "--nkey",
        &seed(&bob_seed),
        "--name",
        "bob",
    ])
    .await?;
    b.mneme(&["team", "share", &b_dir, "--as", PROJECT]).await?;
    a.start().await?;
    b.start().await?;
    linked(&a, &b).await?;
    println!(
        "setup:    hub_nodes=3 laptops=2 linked_after_s={:.1}",
        began.elapsed().as_secs_f64()
    );

    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let hook = async_nats::jetstream::new(a.client("hook").await?);
    let a_store = store::Store::open_read_only(&a.db()).await?;
    let b_store = store::Store::open_read_only(&b.db()).await?;

    // Online: published on A while linked, until B holds them all.
    let batch = events(&sanitizer, ONLINE, &a_dir, options.events);
    let bytes: usize = batch.iter().map(proto::Message::encoded_len).sum();
    let online = publish_all(&hook, batch, options.rate).await?;
    println!(
        "publish:  events={} mean_event_bytes={} published_s={:.2} offered_per_s={:.0}",
        options.events,
        bytes / options.events,
        online.seconds,
        options.events as f64 / online.seconds
    );
    let total = i64::try_from(options.events)?;
    reach(&b_store, ONLINE, total, "B's store", PHASE_LIMIT).await?;
    let on_a = stored(&a_store, ONLINE).await?;
    let on_b = stored(&b_store, ONLINE).await?;
    let a_last = on_a.iter().map(|(_, at)| *at).max().unwrap_or_default();
    let b_last = on_b.iter().map(|(_, at)| *at).max().unwrap_or_default();
    let online_s = (b_last - online.first_ms) as f64 / 1000.0;
    let online_per_s = options.events as f64 / online_s;
    let latencies = sorted(
        on_b.iter()
            .filter_map(|(id, at)| online.sent.get(id).map(|sent| (at - sent) as f64))
            .collect(),
    );
    anyhow::ensure!(
        latencies.len() == options.events,
        "B holds {} of the {} events A published under their own ids",
        latencies.len(),
        options.events
    );
    let (p50, p95) = (percentile(&latencies, 50.0), percentile(&latencies, 95.0));
    println!(
        "online:   events={} stored_on_a_s={:.2} stored_on_b_s={online_s:.2} events_per_s={online_per_s:.0}",
        options.events,
        (a_last - online.first_ms) as f64 / 1000.0
    );
    println!(
        "latency:  publish_on_a_to_stored_on_b p50_ms={p50:.0} p95_ms={p95:.0} p99_ms={:.0} max_ms={:.0}",
        percentile(&latencies, 99.0),
        latencies[latencies.len() - 1]
    );

    // Catch-up: A works offline, then its link returns.
    proxy.cut();
    let laptop_a = &a;
    wait_for(
        "A to see its link cut",
        Duration::from_secs(60),
        || async move { laptop_a.status().await["link"] != "connected" },
    )
    .await?;
    let offline = events(&sanitizer, OFFLINE, &a_dir, options.offline);
    let published = publish_all(&hook, offline, 0).await?;
    let missing = i64::try_from(options.offline)?;
    reach(&a_store, OFFLINE, missing, "A's store", PHASE_LIMIT).await?;
    let a_last = stored(&a_store, OFFLINE)
        .await?
        .iter()
        .map(|(_, at)| *at)
        .max()
        .unwrap_or_default();
    anyhow::ensure!(
        count(&b_store, OFFLINE).await? == 0,
        "events reached B while A's link was cut"
    );
    println!(
        "offline:  events={} published_s={:.2} stored_on_a_s={:.2}",
        options.offline,
        published.seconds,
        (a_last - published.first_ms) as f64 / 1000.0
    );

    let hub_js = hub.jetstream().await?;
    let alice_stream = proto::subjects::team_member_stream("alice");
    let on_hub_wanted = u64::try_from(options.events + options.offline)?;
    let restored_ms = common::time::now_ms();
    let restored = Instant::now();
    proxy.restore();
    let (mut hub_s, mut b_s) = (None, None);
    while hub_s.is_none() || b_s.is_none() {
        if hub_s.is_none() && hub_messages(&hub_js, &alice_stream).await >= on_hub_wanted {
            hub_s = Some(restored.elapsed().as_secs_f64());
        }
        if b_s.is_none() && count(&b_store, OFFLINE).await? >= missing {
            let b_last = stored(&b_store, OFFLINE)
                .await?
                .iter()
                .map(|(_, at)| *at)
                .max()
                .unwrap_or_default();
            b_s = Some((b_last - restored_ms) as f64 / 1000.0);
        }
        anyhow::ensure!(
            restored.elapsed() < PHASE_LIMIT,
            "no catch-up within {PHASE_LIMIT:?}: the hub holds {} of {on_hub_wanted} events, B {} of {missing}",
            hub_messages(&hub_js, &alice_stream).await,
            count(&b_store, OFFLINE).await?
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (hub_s, b_s) = (hub_s.unwrap_or_default(), b_s.unwrap_or_default());
    println!(
        "catch-up: events={} on_hub_s={hub_s:.2} on_b_s={b_s:.2} events_per_s={:.0}",
        options.offline,
        options.offline as f64 / b_s
    );
    a_store.close().await;
    b_store.close().await;
    drop((a, b, proxy, hub));
    println!("run:      seconds={:.1}", began.elapsed().as_secs_f64());
    println!(
        "team: events={} online_events_per_s={online_per_s:.0} p50_ms={p50:.0} p95_ms={p95:.0} offline={} catch_up_s={b_s:.2} hub_catch_up_s={hub_s:.2}",
        options.events, options.offline
    );
    Ok(())
}

/// A release binary of the workspace beside this one.
fn beside(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .context("bench binary has no directory")?
        .join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: build it with `cargo build --release -p mneme --bin {name}`",
        path.display()
    );
    Ok(path)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Poll `ready` until it holds, for at most `within`.
async fn wait_for<F, Fut>(what: &str, within: Duration, mut ready: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !ready().await {
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// The hub: three clustered servers admitting the laptops' NKeys on their leaf node ports and
/// the bench on their client ports. They do not advertise their leaf ports to the leaf nodes,
/// so a laptop connects only where it is told (A through the proxy).
struct Hub {
    dir: tempfile::TempDir,
    nodes: Vec<Child>,
    client_ports: Vec<u16>,
    leaf_ports: Vec<u16>,
    password: String,
}

impl Hub {
    async fn start(binary: &Path, members: &[String]) -> anyhow::Result<Hub> {
        let dir = tempfile::tempdir()?;
        let ports = |n| {
            (0..n)
                .map(|_| free_port())
                .collect::<anyhow::Result<Vec<_>>>()
        };
        let (client_ports, leaf_ports, route_ports) = (ports(3)?, ports(3)?, ports(3)?);
        let routes = route_ports
            .iter()
            .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
            .collect::<Vec<_>>()
            .join(", ");
        // The bench's own user only reads the hub's streams; a fresh password keeps any other
        // process on this machine from using it.
        let password = proto::new_event_id();
        let users = members
            .iter()
            .map(|key| format!("{{ nkey: {key:?} }}"))
            .chain([format!("{{ user: bench, password: {password:?} }}")])
            .collect::<Vec<_>>()
            .join(", ");
        let mut hub = Hub {
            dir,
            nodes: Vec::new(),
            client_ports,
            leaf_ports,
            password,
        };
        for (i, route_port) in route_ports.iter().enumerate() {
            let config = hub.dir.path().join(format!("hub{i}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: hub{i}\nlisten: 127.0.0.1:{}\n\
                     jetstream {{ store_dir: {:?}, domain: hub }}\n\
                     cluster {{ name: hub, listen: 127.0.0.1:{route_port}, routes: [{routes}] }}\n\
                     leafnodes {{ listen: 127.0.0.1:{}, no_advertise: true }}\n\
                     authorization {{ users = [{users}] }}\n",
                    hub.client_ports[i],
                    hub.dir.path().join(format!("js{i}")).display().to_string(),
                    hub.leaf_ports[i],
                ),
            )?;
            let log = std::fs::File::create(hub.dir.path().join(format!("hub{i}.log")))?;
            let child = Command::new(binary)
                .arg("-c")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .with_context(|| format!("starting {}", binary.display()))?;
            hub.nodes.push(child);
        }
        for port in hub.client_ports.clone() {
            wait_for(
                &format!("the hub to listen on {port}"),
                Duration::from_secs(20),
                || async move {
                    tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .is_ok()
                },
            )
            .await?;
        }
        Ok(hub)
    }

    /// Every node's leaf node URL, as a member not behind the proxy joins with.
    fn leaf_urls(&self) -> String {
        self.leaf_ports
            .iter()
            .map(|p| format!("nats-leaf://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client of the hub's JetStream, as the bench's user.
    async fn jetstream(&self) -> anyhow::Result<async_nats::jetstream::Context> {
        let urls: Vec<String> = self
            .client_ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect();
        let client = async_nats::ConnectOptions::with_user_and_password(
            "bench".into(),
            self.password.clone(),
        )
        .connect(urls.as_slice())
        .await
        .context("connecting to the hub")?;
        Ok(async_nats::jetstream::new(client))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// The messages in `stream` on the hub; 0 while it cannot be read.
async fn hub_messages(hub: &async_nats::jetstream::Context, stream: &str) -> u64 {
    match hub.get_stream(stream).await {
        Ok(mut stream) => stream.info().await.map_or(0, |i| i.state.messages),
        Err(_) => 0,
    }
}

/// A TCP proxy in front of one hub node's leaf port, which the bench can cut (existing
/// connections closed, new ones refused) and restore.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: u16) -> anyhow::Result<Proxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let up = Arc::new(AtomicBool::new(true));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let (flag, cuts) = (up.clone(), generation.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !flag.load(Ordering::SeqCst) {
                    continue;
                }
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Ok(Proxy {
            port,
            up,
            generation,
            accept,
        })
    }

    fn url(&self) -> String {
        format!("nats-leaf://127.0.0.1:{}", self.port)
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// A laptop: its own home, and `mneme up` with its own nats-server on its own ports.
struct Laptop {
    mneme: PathBuf,
    name: &'static str,
    home: tempfile::TempDir,
    nats_port: u16,
    up: Option<Child>,
}

impl Laptop {
    fn new(mneme: &Path, name: &'static str) -> anyhow::Result<Laptop> {
        Ok(Laptop {
            mneme: mneme.to_owned(),
            name,
            home: tempfile::tempdir()?,
            nats_port: free_port()?,
            up: None,
        })
    }

    fn db(&self) -> PathBuf {
        self.home.path().join("mneme.db")
    }

    /// A `mneme` command of this laptop: its home and server, and none of the settings of the
    /// shell the bench runs in that would point it elsewhere.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.mneme);
        command
            .env("MNEME_HOME", self.home.path())
            .env(
                "MNEME_NATS_URL",
                format!("nats://127.0.0.1:{}", self.nats_port),
            )
            .env("MNEME_EMBED", "none")
            .env_remove("MNEME_DB")
            .env_remove("MNEME_NATS_KEYS")
            .env_remove("MNEME_NATS_NKEY")
            .env_remove("MNEME_NATS_CREDS")
            .env_remove("MNEME_NATS_TOKEN")
            .stdin(Stdio::null());
        command
    }

    /// A project checkout (a git root) under this laptop's home.
    fn project(&self, name: &str) -> anyhow::Result<String> {
        let dir = self.home.path().join("src").join(name);
        std::fs::create_dir_all(dir.join(".git"))?;
        Ok(dir.display().to_string())
    }

    async fn mneme(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        let mut command = self.command();
        command.args(args);
        let output = tokio::process::Command::from(command)
            .kill_on_drop(true)
            .output()
            .await?;
        anyhow::ensure!(
            output.status.success(),
            "laptop {}: mneme {}: {}",
            self.name,
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(output)
    }

    /// `mneme team status --json`, or null while it cannot be had.
    async fn status(&self) -> Value {
        match self.mneme(&["team", "status", "--json"]).await {
            Ok(output) => serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }

    /// Start `mneme up` and wait until it says it is ready.
    async fn start(&mut self) -> anyhow::Result<()> {
        use std::io::BufRead as _;
        let log = std::fs::File::create(self.home.path().join("up.log"))?;
        let mut command = self.command();
        command
            .arg("up")
            .env_remove("MNEME_NATS_URL")
            .env("MNEME_NATS_PORT", self.nats_port.to_string())
            .env("MNEME_API_ADDR", format!("127.0.0.1:{}", free_port()?))
            .stdout(Stdio::piped())
            .stderr(log);
        let mut up = command.spawn().context("starting mneme up")?;
        let stdout = up.stdout.take().context("mneme up has no stdout")?;
        self.up = Some(up);
        // The reader keeps reading after the bench stops listening, so `mneme up` never
        // blocks on a full pipe.
        let (lines, mut said) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut listening = true;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                listening = listening && lines.send(line).is_ok();
            }
        });
        let ready = tokio::time::timeout(Duration::from_secs(90), async {
            while let Some(line) = said.recv().await {
                if line.starts_with("mneme is ready") {
                    return true;
                }
            }
            false
        })
        .await;
        anyhow::ensure!(
            matches!(ready, Ok(true)),
            "laptop {}: mneme up did not become ready; see {}",
            self.name,
            self.home.path().join("up.log").display()
        );
        Ok(())
    }

    /// A client of this laptop's own server as `name` (`hook`: the hook's identity; anything
    /// else: the machine's owner), with the seed `mneme up` made in its keys directory.
    async fn client(&self, name: &str) -> anyhow::Result<async_nats::Client> {
        let mut common = common::CommonArgs::from_env();
        common.nats_url = format!("nats://127.0.0.1:{}", self.nats_port);
        common.home = Some(self.home.path().to_owned());
        common.db = None;
        common.nats_keys = None;
        common.nats_token = None;
        common.nats_nkey = None;
        common.nats_creds = None;
        common::nats::connect(&common, name, Duration::from_secs(10)).await
    }

    /// How many sources this laptop's incoming team stream has; 0 while it has none.
    async fn team_sources(&self) -> usize {
        let Ok(client) = self.client("bench").await else {
            return 0;
        };
        let js = async_nats::jetstream::new(client);
        match js.get_stream(proto::subjects::TEAM_IN_STREAM).await {
            Ok(mut stream) => stream
                .info()
                .await
                .map_or(0, |i| i.config.sources.as_ref().map_or(0, Vec::len)),
            Err(_) => 0,
        }
    }
}

impl Drop for Laptop {
    fn drop(&mut self) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        // SIGTERM first: `mneme up` then stops the nats-server it started, which a SIGKILL
        // would leave running.
        let _ = Command::new("kill")
            .args(["-TERM", &up.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(up.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = up.kill();
        let _ = up.wait();
    }
}

/// Wait until both laptops are linked to the hub and each one's incoming stream sources the
/// other's stream there.
async fn linked(a: &Laptop, b: &Laptop) -> anyhow::Result<()> {
    let result = wait_for(
        "both laptops to link to the hub",
        Duration::from_secs(120),
        || async move {
            a.status().await["link"] == "connected" && b.status().await["link"] == "connected"
        },
    )
    .await;
    if result.is_err() {
        anyhow::bail!(
            "the laptops did not link to the hub: A {} / B {}",
            a.status().await["link"],
            b.status().await["link"]
        );
    }
    wait_for(
        "each laptop to source the other's stream on the hub",
        Duration::from_secs(60),
        || async move { a.team_sources().await == 1 && b.team_sources().await == 1 },
    )
    .await
}

/// What a phase's publishing left: each event's publish time, and how long it took.
struct Published {
    sent: HashMap<String, i64>,
    first_ms: i64,
    seconds: f64,
}

/// Publish `events` in order as the hook would, each stamped with the time of its publish,
/// at `rate` per second (as fast as acks come when 0), and wait for every ack.
async fn publish_all(
    js: &async_nats::jetstream::Context,
    events: Vec<proto::Event>,
    rate: usize,
) -> anyhow::Result<Published> {
    let mut sent = HashMap::with_capacity(events.len());
    let mut acks = Vec::new();
    let started = Instant::now();
    let first_ms = common::time::now_ms();
    for (i, mut event) in events.into_iter().enumerate() {
        if rate > 0 {
            let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        // The hook stamps an event when it captures it, just before it publishes; the events
        // were built ahead so the adapter's cost is not in the replication's figures.
        let now = common::time::now_ms();
        event.occurred_at_ms = now;
        event.captured_at_ms = now;
        acks.push(publish(js, &event).await?);
        sent.insert(event.id, now);
        if acks.len() >= 500 {
            for ack in acks.drain(..) {
                ack.await.context("publishing on A")?;
            }
        }
    }
    for ack in acks {
        ack.await.context("publishing on A")?;
    }
    Ok(Published {
        sent,
        first_ms,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Rows of a phase in `store`.
async fn count(store: &store::Store, marker: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM observations WHERE session_id LIKE ?")
        .bind(format!("{marker}%"))
        .fetch_one(store.pool())
        .await?;
    Ok(n)
}

/// Each row of a phase in `store`: its event id and when it was stored (ms).
async fn stored(store: &store::Store, marker: &str) -> anyhow::Result<Vec<(String, i64)>> {
    Ok(
        sqlx::query_as("SELECT event_id, stored_at FROM observations WHERE session_id LIKE ?")
            .bind(format!("{marker}%"))
            .fetch_all(store.pool())
            .await?,
    )
}

/// Wait until `store` holds `want` rows of a phase.
async fn reach(
    store: &store::Store,
    marker: &str,
    want: i64,
    what: &str,
    within: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let n = count(store, marker).await?;
        if n >= want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what} holds {n} of {want} events after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` events of a phase, as the hook makes them from Claude Code's payloads in `cwd`.
fn events(sanitizer: &sanitize::Sanitizer, marker: &str, cwd: &str, n: usize) -> Vec<proto::Event> {
    (0..n)
        .map(|i| {
            let payload = payload(marker, cwd, i).to_string();
            let mut event = hosts::claude_code::adapter::normalise(payload.as_bytes(), sanitizer);
            hosts::adapter::fit(&mut event, sanitizer);
            event
        })
        .collect()
}

/// A small deterministic generator, so every event's text differs (ingest drops repeated
/// content within a session) and every run sends the same bytes.
struct Words(u64);

impl Words {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.next() % from.len()]
    }

    /// Prose of about `chars` characters.
    fn prose(&mut self, chars: usize) -> String {
        let mut text = String::with_capacity(chars + 200);
        while text.len() < chars {
            text.push_str(self.pick(SENTENCES));
            text.push(' ');
            if self.next().is_multiple_of(5) {
                text.push_str("\n\n");
            }
        }
        text
    }
}

const SENTENCES: &[&str] = &[
    "The refund path retried the ledger write without the idempotency key, so a timeout after the commit produced a second entry.",
    "I moved the key generation into `RefundRequest::new` and passed it through to `Ledger::append`, which already deduplicates on it.",
    "The settlement job reads the same table in batches of 500 ordered by id, so it never sees a row twice even while refunds are written.",
    "Running the integration tests against the sandbox shows the duplicate disappears: the second append returns the first entry's id.",
    "There is one more caller in `webhooks/stripe.rs` that builds the request by hand; it now goes through the constructor as well.",
    "The migration adds a unique index on `(merchant_id, idempotency_key)`; existing duplicates are reported by the check script before it runs.",
    "Currency amounts stay in minor units everywhere; the only conversion is at the API boundary, in `Money::from_decimal`.",
    "I did not change the retry policy itself: three attempts with jittered backoff is what the payment provider recommends.",
    "The flaky test was waiting on a fixed sleep for the outbox worker; it now polls the outbox table until the message is marked sent.",
    "Clippy flagged a needless clone in the reconciliation report, which I removed while I was there.",
    "Next step would be to alert when the duplicate check script finds anything, rather than only logging it.",
    "The webhook signature is verified before the body is parsed, and the raw body is kept for the audit log.",
    "Partial refunds sum against the original capture, and the check rejects a refund that would take the total below zero.",
    "All 214 tests pass locally, including the new property test that replays random sequences of captures and refunds.",
];

const CRATES: &[&str] = &[
    "ledger",
    "refunds",
    "settlement",
    "webhooks",
    "money",
    "audit",
    "outbox",
    "reconcile",
];

const FUNCTIONS: &[&str] = &[
    "append",
    "capture",
    "refund",
    "settle_batch",
    "verify_signature",
    "from_decimal",
    "mark_sent",
    "report",
];

/// The Claude Code payload of event `i` of a phase: sessions of [`SESSION_EVENTS`] events, in
/// turns of a prompt, a build and test run, a file read, a search and the turn's closing
/// message, with the sizes real ones have (kilobytes of output, a few hundred characters of
/// prompt).
fn payload(marker: &str, cwd: &str, i: usize) -> Value {
    let mut words =
        Words(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let session = format!("{marker}{}", i / SESSION_EVENTS);
    let base = json!({
        "session_id": session,
        "transcript_path": format!("/home/dev/.claude/projects/-home-dev-payments/{session}.jsonl"),
        "cwd": cwd,
        "permission_mode": "default",
    });
    let Value::Object(mut object) = base else {
        unreachable!("a literal object")
    };
    let tool = |name: &str, input: Value, response: Value| {
        json!({
            "hook_event_name": "PostToolUse",
            "tool_name": name,
            "tool_input": input,
            "tool_response": response,
            "tool_use_id": format!("toolu_{marker}{i}"),
        })
    };
    let body = match i % 5 {
        0 => json!({
            "hook_event_name": "UserPromptSubmit",
            "prompt": format!(
                "Turn {i}: {} Please also check {} in the {} crate and tell me what you changed.",
                words.prose(400),
                words.pick(FUNCTIONS),
                words.pick(CRATES)
            ),
        }),
        1 => {
            let krate = words.pick(CRATES);
            let mut stdout = String::new();
            for c in CRATES {
                stdout.push_str(&format!(
                    "   Compiling {c} v0.{}.{} (/home/dev/payments/crates/{c})\n",
                    words.next() % 9,
                    words.next() % 30
                ));
            }
            stdout.push_str(&format!(
                "    Finished `test` profile [unoptimized + debuginfo] target(s) in {}.{:02}s\n     Running unittests src/lib.rs (target/debug/deps/{krate}-{:016x})\n\nrunning 120 tests\n",
                words.next() % 60,
                words.next() % 100,
                words.next()
            ));
            for n in 0..120 {
                stdout.push_str(&format!(
                    "test {krate}::tests::{}_{}_case_{n} ... ok\n",
                    words.pick(FUNCTIONS),
                    words.pick(CRATES)
                ));
            }
            stdout.push_str(&format!(
                "\ntest result: ok. 120 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in {}.{:02}s (run {i})\n",
                words.next() % 9,
                words.next() % 100
            ));
            tool(
                "Bash",
                json!({"command": format!("cargo test -p {krate}"), "description": format!("Run the {krate} tests")}),
                json!({"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false}),
            )
        }
        2 => {
            let krate = words.pick(CRATES);
            let path = format!("/home/dev/payments/crates/{krate}/src/lib.rs");
            let mut content =
                format!("//! The {krate} crate (revision {i}).\n\nuse crate::money::Money;\n\n");
            for n in 0..40 {
                let f = words.pick(FUNCTIONS);
                content.push_str(&format!(
                    "/// {}\npub fn {f}_{n}(request: &Request, ledger: &mut Ledger) -> Result<Entry, Error> {{\n    let amount = Money::from_minor(request.amount_minor, request.currency)?;\n    ledger.{f}(request.merchant_id, amount, &request.idempotency_key)\n}}\n\n",
                    words.pick(SENTENCES)
                ));
            }
            let lines = content.lines().count();
            tool(
                "Read",
                json!({"file_path": path}),
                json!({"type": "text", "file": {"filePath": path, "content": content, "numLines": lines, "startLine": 1, "totalLines": lines}}),
            )
        }
        3 => {
            let f = words.pick(FUNCTIONS);
            let mut stdout = String::new();
            for n in 0..30 {
                let krate = words.pick(CRATES);
                stdout.push_str(&format!(
                    "crates/{krate}/src/lib.rs:{}:    let entry = ledger.{f}(merchant, amount, &key)?; // {}\n",
                    words.next() % 900 + n,
                    words.pick(SENTENCES)
                ));
            }
            tool(
                "Bash",
                json!({"command": format!("rg -n '{f}\\(' crates/"), "description": format!("Find the callers of {f} ({i})")}),
                json!({"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false}),
            )
        }
        _ => json!({
            "hook_event_name": "Stop",
            "stop_hook_active": false,
            "last_assistant_message": format!("Done with turn {i}. {}", words.prose(2_500)),
        }),
    };
    if let Value::Object(fields) = body {
        object.extend(fields);
    }
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_realistic_and_distinct() {
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
        let events = events(&sanitizer, ONLINE, "/home/dev/payments", 10);
        let kinds: Vec<&str> = events.iter().map(|e| e.host_event.as_str()).collect();
        assert_eq!(
            kinds[..5],
            [
                "UserPromptSubmit",
                "PostToolUse",
                "PostToolUse",
                "PostToolUse",
                "Stop"
            ]
        );
        let mut hashes: Vec<&str> = events.iter().map(|e| e.content_hash.as_str()).collect();
        hashes.sort();
        hashes.dedup();
        assert_eq!(hashes.len(), 10);
        let bytes: usize = events.iter().map(proto::Message::encoded_len).sum();
        assert!(bytes / 10 > 2_000, "{bytes}");
    }
}
