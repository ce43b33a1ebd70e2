//! Team memory across machines, with real servers: a hub of three clustered `nats-server`s
//! (JetStream domain `hub`, R3 streams) and two laptops, each running `mneme up` on its own
//! store with its own `nats-server` as a leaf node of the hub (retrieval full-text only, to keep
//! two cores free). Laptop A's leaf link goes through a proxy the test can cut.

use crate::harness::{binary, free_port, stdout_until, wait_listening, wait_until};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The hub: three clustered servers admitting the laptops' NKeys on their leaf node ports and
/// the test on their client ports. They do not advertise their leaf ports to the leaf nodes,
/// so a laptop connects only where it is told (laptop A through the proxy).
struct Hub {
    dir: tempfile::TempDir,
    nodes: Vec<Option<Child>>,
    client_ports: Vec<u16>,
    leaf_ports: Vec<u16>,
}

impl Hub {
    /// A hub of `nodes` servers (one, or a cluster) admitting `members`' public keys.
    fn start(nodes: usize, members: &[String]) -> Hub {
        let dir = tempfile::tempdir().unwrap();
        let client_ports: Vec<u16> = (0..nodes).map(|_| free_port()).collect();
        let leaf_ports: Vec<u16> = (0..nodes).map(|_| free_port()).collect();
        let route_ports: Vec<u16> = (0..nodes).map(|_| free_port()).collect();
        let routes = route_ports
            .iter()
            .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let users = members
            .iter()
            .map(|key| format!("{{ nkey: {key:?} }}"))
            .chain(["{ user: test, password: test }".to_owned()])
            .collect::<Vec<_>>()
            .join(", ");
        let mut hub = Hub {
            nodes: Vec::new(),
            client_ports,
            leaf_ports,
            dir,
        };
        for (i, route_port) in route_ports.iter().enumerate() {
            let config = hub.dir.path().join(format!("hub{i}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: hub{i}\nlisten: 127.0.0.1:{}\n\
                     jetstream {{ store_dir: {:?}, domain: hub }}\n\
                     {}\n\
                     leafnodes {{ listen: 127.0.0.1:{}, no_advertise: true }}\n\
                     authorization {{ users = [{users}] }}\n",
                    hub.client_ports[i],
                    hub.dir.path().join(format!("js{i}")).display().to_string(),
                    if nodes > 1 {
                        format!(
                            "cluster {{ name: hub, listen: 127.0.0.1:{route_port}, routes: [{routes}] }}"
                        )
                    } else {
                        String::new()
                    },
                    hub.leaf_ports[i],
                ),
            )
            .unwrap();
            hub.nodes.push(None);
            hub.start_node(i);
        }
        hub
    }

    fn start_node(&mut self, i: usize) {
        let binary = std::env::var_os("MNEME_NATS_SERVER")
            .map_or_else(|| PathBuf::from("nats-server"), PathBuf::from);
        let log = std::fs::File::create(self.dir.path().join(format!("hub{i}.log"))).unwrap();
        let child = Command::new(binary)
            .arg("-c")
            .arg(self.dir.path().join(format!("hub{i}.conf")))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes[i] = Some(child);
        wait_listening(self.client_ports[i]);
    }

    /// SIGKILL one node, as a crash would.
    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn leaf_url(&self, i: usize) -> String {
        format!("nats-leaf://127.0.0.1:{}", self.leaf_ports[i])
    }

    /// A client of the hub's JetStream, through a node that is up.
    async fn jetstream(&self) -> async_nats::jetstream::Context {
        let i = self.nodes.iter().position(Option::is_some).unwrap();
        let client =
            async_nats::ConnectOptions::with_user_and_password("test".into(), "test".into())
                .connect(format!("127.0.0.1:{}", self.client_ports[i]))
                .await
                .unwrap();
        async_nats::jetstream::new(client)
    }

    /// Every message of `stream` on the hub (empty when it does not exist).
    async fn messages(&self, stream: &str) -> Vec<(String, Vec<u8>)> {
        let js = self.jetstream().await;
        let Ok(mut stream) = js.get_stream(stream).await else {
            return Vec::new();
        };
        let state = stream.info().await.unwrap().state.clone();
        let mut out = Vec::new();
        if state.messages == 0 {
            return out;
        }
        for seq in state.first_sequence..=state.last_sequence {
            if let Ok(message) = stream.get_raw_message(seq).await {
                out.push((message.subject.to_string(), message.payload.to_vec()));
            }
        }
        out
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// A TCP proxy in front of one hub node's leaf port, which the test can cut (existing
/// connections closed, new ones refused) and restore.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    async fn start(target: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let (flag, cuts) = (up.clone(), generation.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !flag.load(Ordering::SeqCst) {
                    drop(inbound);
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
        Proxy {
            port,
            up,
            generation,
        }
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

/// A laptop: its own home, `mneme up` with its own nats-server, and project checkouts.
struct Laptop {
    home: tempfile::TempDir,
    nats_port: u16,
    up: Option<Child>,
}

impl Laptop {
    fn new() -> Laptop {
        Laptop {
            home: tempfile::tempdir().unwrap(),
            nats_port: free_port(),
            up: None,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("MNEME_HOME", self.home.path().display().to_string()),
            (
                "MNEME_NATS_URL",
                format!("nats://127.0.0.1:{}", self.nats_port),
            ),
            ("MNEME_EMBED", "none".to_owned()),
        ]
    }

    /// A project checkout (a git root) under this laptop's home.
    fn project(&self, name: &str) -> String {
        let dir = self.home.path().join("src").join(name);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        dir.display().to_string()
    }

    fn mneme(&self, args: &[&str]) -> std::process::Output {
        let output = Command::new(binary("mneme"))
            .args(args)
            .envs(self.env())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "mneme {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn start(&mut self) {
        let mut up = Command::new(binary("mneme"))
            .arg("up")
            .envs(self.env())
            .env_remove("MNEME_NATS_URL")
            .env("MNEME_NATS_PORT", self.nats_port.to_string())
            .env("MNEME_API_ADDR", format!("127.0.0.1:{}", free_port()))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.home.path().join("up.log")).unwrap())
            .spawn()
            .unwrap();
        let lines = stdout_until(&mut up, "mneme is ready", Duration::from_secs(60));
        assert!(
            lines.iter().any(|l| l.starts_with("mneme is ready")),
            "{lines:?}"
        );
        self.up = Some(up);
    }

    /// Run the real hook with a Claude Code payload.
    fn hook(&self, payload: Value) {
        let mut child = Command::new(binary("mneme-hook"))
            .arg("claude-code")
            .envs(self.env())
            .env_remove("CURSOR_VERSION")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.to_string().as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    }

    /// One command run in `session` of the project at `cwd`, whose output says `text`.
    fn run_command(&self, session: &str, cwd: &str, text: &str) {
        self.hook(json!({
            "hook_event_name": "PostToolUse", "session_id": session, "cwd": cwd,
            "transcript_path": "", "tool_name": "Bash",
            "tool_input": {"command": format!("echo {text}")},
            "tool_response": {"stdout": text, "stderr": "", "interrupted": false},
        }));
    }

    async fn count(&self, sql: &str) -> i64 {
        let store = store::Store::open(&self.home.path().join("mneme.db"))
            .await
            .unwrap();
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(store.pool())
            .await
            .unwrap();
        n
    }

    fn status(&self) -> Value {
        let output = self.mneme(&["team", "status", "--json"]);
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// A client of this laptop's own server, as its owner.
    async fn client(&self) -> async_nats::Client {
        let mut common = common::CommonArgs::from_env();
        common.nats_url = format!("nats://127.0.0.1:{}", self.nats_port);
        common.home = Some(self.home.path().to_owned());
        common.nats_keys = None;
        common.nats_token = None;
        common.nats_nkey = None;
        common.nats_creds = None;
        common::nats::connect(&common, "test", Duration::from_secs(5))
            .await
            .unwrap()
    }
}

impl Drop for Laptop {
    fn drop(&mut self) {
        if let Some(mut up) = self.up.take() {
            let _ = up.kill();
            let _ = up.wait();
        }
    }
}

/// Wait for `sql` to count `want`, and return what it counts then (or at the deadline).
async fn settle(laptop: &Laptop, sql: &str, want: i64, within: Duration) -> i64 {
    let deadline = Instant::now() + within;
    loop {
        let n = laptop.count(sql).await;
        if n == want || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn seed_for(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(format!("{name}.nk"));
    let public = common::access::new_seed_file(&path).unwrap();
    (path, public)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_projects_replicate_through_the_hub_and_nothing_else_leaves() {
    let keys = tempfile::tempdir().unwrap();
    let (alice_seed, alice_key) = seed_for(keys.path(), "alice");
    let (bob_seed, bob_key) = seed_for(keys.path(), "bob");
    let mut hub = Hub::start(3, &[alice_key, bob_key]);
    let proxy = Proxy::start(hub.leaf_ports[2]).await;

    let mut a = Laptop::new();
    let mut b = Laptop::new();
    let a_p = a.project("payments");
    let a_q = a.project("secret-q");
    // B's checkout declares its team name in the repository, so B shares it without being told.
    let b_p = b.project("payments-checkout");
    std::fs::create_dir_all(Path::new(&b_p).join(".mneme")).unwrap();
    std::fs::write(
        Path::new(&b_p).join(".mneme/team.yaml"),
        "project: payments\n",
    )
    .unwrap();
    a.mneme(&[
        "team",
        "join",
        &proxy.url(),
        "--nkey",
        alice_seed.to_str().unwrap(),
        "--name",
        "alice",
    ]);
    a.mneme(&["team", "share", &a_p, "--as", "payments"]);
    // B is already running when it joins: its `mneme up` restarts its server into the team.
    b.start();
    let hub_urls = format!(
        "{},{},{}",
        hub.leaf_url(0),
        hub.leaf_url(1),
        hub.leaf_url(2)
    );
    b.mneme(&[
        "team",
        "join",
        &hub_urls,
        "--nkey",
        bob_seed.to_str().unwrap(),
        "--name",
        "bob",
    ]);
    let status: Value = serde_json::from_slice(&a.mneme(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["team"]["member"], "alice", "{status}");
    assert_eq!(status["team"]["shared"], json!(["payments"]), "{status}");
    // No secret reaches the team file: only the path of the seed.
    let team_file = std::fs::read_to_string(a.home.path().join("team.yaml")).unwrap();
    let seed = std::fs::read_to_string(&alice_seed).unwrap();
    assert!(!team_file.contains(seed.trim()), "{team_file}");

    a.start();
    let linked = wait_until(Duration::from_secs(60), || async {
        a.status()["link"] == "connected" && b.status()["link"] == "connected"
    })
    .await;
    assert!(linked.is_ok(), "links: {} / {}", a.status(), b.status());
    // B's first event in the declared project makes it shared there.
    b.run_command("b-p-0", &b_p, "heron review note start");
    // Each laptop's incoming stream sources the other's stream on the hub.
    wait_until(Duration::from_secs(30), || async {
        let a_js = async_nats::jetstream::new(a.client().await);
        let b_js = async_nats::jetstream::new(b.client().await);
        let sources = |js: async_nats::jetstream::Context| async move {
            match js.get_stream(proto::subjects::TEAM_IN_STREAM).await {
                Ok(mut s) => s
                    .info()
                    .await
                    .map(|i| i.config.sources.clone().unwrap_or_default().len())
                    .unwrap_or(0),
                Err(_) => 0,
            }
        };
        sources(a_js).await == 1 && sources(b_js).await == 1
    })
    .await
    .expect("each laptop sources the other member");

    // A goes offline and keeps working: 200 events of P, 50 of Q, all found locally.
    proxy.cut();
    wait_until(Duration::from_secs(30), || async {
        a.status()["link"] != "connected"
    })
    .await
    .expect("the cut link is seen as down");
    for i in 0..200 {
        a.run_command(
            &format!("a-p-{}", i % 4),
            &a_p,
            &format!("zebrafish deploy note {i}"),
        );
    }
    for i in 0..50 {
        a.run_command(
            &format!("a-q-{}", i % 2),
            &a_q,
            &format!("quokka private plan {i}"),
        );
    }
    // B keeps working meanwhile.
    for i in 0..20 {
        b.run_command("b-p-0", &b_p, &format!("heron review note {i}"));
    }
    let zebra = "SELECT count(*) FROM observations WHERE body LIKE '%zebrafish deploy note%'";
    let quokka = "SELECT count(*) FROM observations WHERE body LIKE '%quokka private plan%'";
    assert_eq!(settle(&a, zebra, 200, Duration::from_secs(30)).await, 200);
    assert_eq!(settle(&a, quokka, 50, Duration::from_secs(30)).await, 50);
    let found = a.mneme(&["search", "zebrafish", "--json", "--limit", "5"]);
    let found: Value = serde_json::from_slice(&found.stdout).unwrap();
    assert!(!found["hits"].as_array().unwrap().is_empty(), "{found}");
    let waiting = a.status();
    assert_eq!(waiting["projects"][0]["shared"], 200, "{waiting}");
    // Nothing reached B while A was away.
    assert_eq!(b.count(zebra).await, 0);

    // The link returns: everything of P reaches the hub and B, once, by itself.
    proxy.restore();
    let started = Instant::now();
    let on_b = settle(&b, zebra, 200, Duration::from_secs(90)).await;
    let caught_up = started.elapsed();
    assert_eq!(on_b, 200, "B holds every shared event of A's once");
    eprintln!("caught up 200 events in {caught_up:?}");
    let alice_stream = proto::subjects::team_member_stream("alice");
    let on_hub = hub.messages(&alice_stream).await;
    let events: Vec<_> = on_hub
        .iter()
        .filter(|(s, _)| s == "mneme.team.payments.alice.event")
        .collect();
    assert_eq!(events.len(), 200, "the hub holds each of A's events once");
    let mut ids: Vec<String> = events
        .iter()
        .map(|(_, payload)| {
            use proto::Message as _;
            proto::Event::decode(payload.as_slice()).unwrap().id
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "no event is twice on the hub");
    assert_eq!(
        on_b,
        b.count("SELECT count(DISTINCT event_id) FROM observations WHERE body LIKE '%zebrafish deploy note%'")
            .await
    );
    // Stored under B's own checkout of the project, with A named as the origin.
    assert_eq!(
        b.count(&format!(
            "SELECT count(*) FROM observations WHERE body LIKE '%zebrafish%' AND project = '{b_p}'"
        ))
        .await,
        200
    );
    let found = b.mneme(&["search", "zebrafish deploy", "--json", "--limit", "5"]);
    let found: Value = serde_json::from_slice(&found.stdout).unwrap();
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found}");
    assert!(hits.iter().all(|h| h["origin"] == "alice"), "{found}");
    // What B's agent is given with a prompt about it says whose memory it is.
    let context = b.mneme(&[
        "context",
        "--project",
        &b_p,
        "--prompt",
        "zebrafish deploy note",
    ]);
    let context = String::from_utf8_lossy(&context.stdout);
    assert!(context.contains(" of alice "), "{context}");
    // And B's own memory went the other way.
    let heron = "SELECT count(*) FROM observations WHERE body LIKE '%heron review note%'";
    assert_eq!(settle(&a, heron, 21, Duration::from_secs(60)).await, 21);
    let b_team = std::fs::read_to_string(b.home.path().join("team.yaml")).unwrap();
    assert!(b_team.contains("name: payments"), "{b_team}");

    // Q never left A: not on the hub, not in B's store or streams.
    assert!(
        on_hub
            .iter()
            .all(|(_, payload)| !String::from_utf8_lossy(payload).contains("quokka")),
        "a Q event reached the hub"
    );
    assert_eq!(b.count(quokka).await, 0);
    let b_in = async_nats::jetstream::new(b.client().await)
        .get_stream(proto::subjects::TEAM_IN_STREAM)
        .await
        .unwrap();
    let state = b_in.get_info().await.unwrap().state;
    for seq in state.first_sequence..=state.last_sequence {
        if let Ok(message) = b_in.get_raw_message(seq).await {
            assert!(!String::from_utf8_lossy(&message.payload).contains("quokka"));
        }
    }
    let status = a.status();
    assert_eq!(status["projects"][0]["waiting_out"], 0, "{status}");

    // A hub node dies (SIGKILL) during a burst of 500 events from B: nothing lost or doubled.
    for i in 0..500 {
        if i == 150 {
            hub.kill(0);
        }
        b.run_command(
            &format!("b-burst-{}", i % 5),
            &b_p,
            &format!("kingfisher burst {i}"),
        );
    }
    let kingfisher = "SELECT count(*) FROM observations WHERE body LIKE '%kingfisher burst%'";
    assert_eq!(
        settle(&b, kingfisher, 500, Duration::from_secs(60)).await,
        500
    );
    assert_eq!(
        settle(&a, kingfisher, 500, Duration::from_secs(120)).await,
        500,
        "A holds each of B's burst once"
    );
    let bob_events = hub
        .messages(&proto::subjects::team_member_stream("bob"))
        .await
        .into_iter()
        .filter(|(s, _)| s == "mneme.team.payments.bob.event")
        .count();
    assert_eq!(bob_events, 521, "the hub holds each of B's events once");

    // A deletes one of its sessions: the deletion reaches B.
    let gone = "a-p-1";
    let in_b = format!("SELECT count(*) FROM observations WHERE session_id = '{gone}'");
    assert_eq!(b.count(&in_b).await, 50);
    let reply = a
        .client()
        .await
        .request(
            proto::subjects::SESSIONS_DELETE,
            proto::Message::encode_to_vec(&proto::DeleteSessionsRequest {
                session_ids: vec![gone.to_owned()],
            })
            .into(),
        )
        .await
        .unwrap();
    let reply: proto::SessionsChangedReply = proto::Message::decode(reply.payload).unwrap();
    assert!(reply.error.is_empty(), "{}", reply.error);
    assert_eq!(settle(&b, &in_b, 0, Duration::from_secs(60)).await, 0);
    assert_eq!(
        b.count(&format!(
            "SELECT count(*) FROM sessions WHERE id = '{gone}'"
        ))
        .await,
        0
    );
    // The rest of A's memory stays on B.
    assert_eq!(b.count(zebra).await, 150);

    // A leaves: it keeps its memory and stops receiving the team's.
    a.mneme(&["team", "leave"]);
    let a_js = async_nats::jetstream::new(a.client().await);
    let stopped = wait_until(Duration::from_secs(30), || async {
        // Asked of a server that answers (it restarts without the leaf link meanwhile).
        a_js.get_stream(proto::subjects::EVENTS_STREAM)
            .await
            .is_ok()
            && a_js
                .get_stream(proto::subjects::TEAM_IN_STREAM)
                .await
                .is_err()
    })
    .await;
    assert!(stopped.is_ok(), "A still receives the team's memory");
    assert_eq!(a.count(zebra).await, 150);
    assert_eq!(a.count(kingfisher).await, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_and_a_taken_name_are_said_with_what_to_do() {
    let keys = tempfile::tempdir().unwrap();
    let (listed_seed, listed_key) = seed_for(keys.path(), "listed");
    let (stranger_seed, _) = seed_for(keys.path(), "stranger");
    let (twin_seed, twin_key) = seed_for(keys.path(), "twin");
    let hub = Hub::start(1, &[listed_key, twin_key]);

    // A key the hub does not list: the link never comes up, and status says why.
    let mut stranger = Laptop::new();
    stranger.mneme(&[
        "team",
        "join",
        &hub.leaf_url(0),
        "--nkey",
        stranger_seed.to_str().unwrap(),
        "--name",
        "stranger",
    ]);
    stranger.start();
    let refused = wait_until(Duration::from_secs(30), || async {
        stranger.status()["link"]
            .as_str()
            .is_some_and(|l| l.contains("refused this machine's credentials"))
    })
    .await;
    assert!(refused.is_ok(), "{}", stranger.status());

    // Two machines under one member name: the second is told the name is taken.
    let mut first = Laptop::new();
    first.mneme(&[
        "team",
        "join",
        &hub.leaf_url(0),
        "--nkey",
        listed_seed.to_str().unwrap(),
        "--name",
        "same",
    ]);
    first.start();
    wait_until(Duration::from_secs(30), || async {
        first.status()["link"] == "connected"
    })
    .await
    .expect("the first machine links");
    let mut second = Laptop::new();
    second.mneme(&[
        "team",
        "join",
        &hub.leaf_url(0),
        "--nkey",
        twin_seed.to_str().unwrap(),
        "--name",
        "same",
    ]);
    second.start();
    let taken = wait_until(Duration::from_secs(30), || async {
        second.status()["link"]
            .as_str()
            .is_some_and(|l| l.contains("is taken by another machine"))
    })
    .await;
    assert!(taken.is_ok(), "{}", second.status());

    // A secret never goes on a command line: a hub URL with credentials is refused.
    let output = Command::new(binary("mneme"))
        .args(["team", "join", "nats-leaf://user:pw@127.0.0.1:7422"])
        .envs(Laptop::new().env())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("in a file"));
}
