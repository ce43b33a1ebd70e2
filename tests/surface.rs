//! What users and agents see: injected context, `mneme status`, `mneme search`,
//! `mneme hooks install`.

use crate::harness::App;
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
            .contains("数据库连接池")
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let api_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
    assert!(first_line.starts_with("mneme is up"), "{first_line}");
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
    let free_nats_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
    let free_api_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
