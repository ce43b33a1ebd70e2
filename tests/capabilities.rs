//! The capability registry through its real entry points: synced to retrieval over NATS,
//! matched against prompts, and injected first by the hook, or not at all when nothing fits.

use crate::harness::App;
use proto::subjects;
use serde_json::{Value, json};
use std::time::Duration;

fn capability(
    id: &str,
    name: &str,
    category: &str,
    kind: &str,
    description: &str,
    when: &[&str],
    invoke: &str,
) -> proto::Capability {
    proto::Capability {
        id: id.into(),
        name: name.into(),
        category: category.into(),
        kind: kind.into(),
        description: description.into(),
        when: when.iter().map(|w| (*w).to_owned()).collect(),
        invoke: invoke.into(),
        source: "hand-written".into(),
    }
}

fn registry() -> Vec<proto::Capability> {
    vec![
        capability(
            "make-test",
            "make test",
            "testing",
            "task",
            "Run the whole test suite (unit and integration) through the Makefile",
            &["run the tests", "check that nothing broke before I push"],
            "make test",
        ),
        capability(
            "deploy-staging",
            "deploy to staging",
            "deploy",
            "command",
            "Deploy the current branch to the staging environment",
            &[
                "ship this to staging",
                "put the build on the pre-production environment",
            ],
            "/deploy-staging",
        ),
        capability(
            "linear-issue",
            "create a Linear issue",
            "issues",
            "mcp-tool",
            "Create an issue in the team's Linear tracker",
            &["file a ticket for this bug", "open an issue to track this"],
            "mcp__linear__create_issue",
        ),
        capability(
            "db-migrate",
            "database migration",
            "database",
            "skill",
            "Write and apply a schema migration for the Postgres database",
            &[
                "add a column to the users table",
                "change the database schema",
            ],
            "db-migrate",
        ),
    ]
}

async fn sync(
    app: &App,
    scope: &str,
    capabilities: Vec<proto::Capability>,
) -> proto::SyncCapabilitiesReply {
    app.ask(
        subjects::CAPABILITIES_SYNC,
        &proto::SyncCapabilitiesRequest {
            scope: scope.into(),
            capabilities,
            categories: vec![proto::CapabilityCategory {
                id: "testing".into(),
                description: "Running and fixing tests".into(),
            }],
        },
    )
    .await
}

async fn matched(app: &App, prompt: &str, project: &str) -> Vec<String> {
    let reply: proto::MatchCapabilitiesReply = app
        .ask(
            subjects::CAPABILITIES_MATCH,
            &proto::MatchCapabilitiesRequest {
                prompt: prompt.into(),
                project: project.into(),
                ..Default::default()
            },
        )
        .await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    reply
        .matches
        .into_iter()
        .map(|m| m.capability.unwrap().id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_capabilities_come_first_and_nothing_comes_for_unrelated_prompts() {
    let mut app = App::start_core().await;
    let reply = sync(&app, "", registry()).await;
    assert_eq!(
        (reply.capabilities, reply.changed, reply.error.as_str()),
        (4, 4, "")
    );
    // Syncing the same registry again embeds nothing.
    let again = sync(&app, "", registry()).await;
    assert_eq!((again.capabilities, again.changed), (4, 0));

    assert_eq!(
        matched(
            &app,
            "make sure I didn't break anything before pushing",
            "/w/app"
        )
        .await
        .first()
        .map(String::as_str),
        Some("make-test")
    );
    assert_eq!(
        matched(&app, "ship it to staging please", "/w/app")
            .await
            .first()
            .map(String::as_str),
        Some("deploy-staging")
    );
    assert!(
        matched(
            &app,
            "rename the variable count to total in parser.rs",
            "/w/app"
        )
        .await
        .is_empty()
    );
    assert!(
        matched(&app, "explain what this regex does", "/w/app")
            .await
            .is_empty()
    );

    // A project's registry applies in that project (and below it) only.
    let project = vec![capability(
        "just-bench",
        "just bench",
        "performance",
        "task",
        "Run the parser benchmarks with criterion",
        &["benchmark the parser", "is the parser faster now"],
        "just bench",
    )];
    assert_eq!(sync(&app, "/w/app", project).await.capabilities, 1);
    assert_eq!(
        matched(&app, "benchmark the parser again", "/w/app/crates/parser")
            .await
            .first()
            .map(String::as_str),
        Some("just-bench")
    );
    assert!(
        !matched(&app, "benchmark the parser again", "/w/other")
            .await
            .contains(&"just-bench".to_owned())
    );

    // Through the hook: the block comes first in what the agent is given.
    let (output, _) = app.hook(
        &json!({"hook_event_name": "UserPromptSubmit", "session_id": "cap-1", "cwd": "/w/app",
            "prompt": "can you file a ticket for this flaky login bug"})
        .to_string()
        .into_bytes(),
    );
    assert!(output.status.success());
    let out: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    let text = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("<mneme-capabilities>\n"), "{text}");
    assert!(text.contains("mcp__linear__create_issue"), "{text}");
    // Nothing for a prompt no capability fits.
    let (output, _) = app.hook(
        &json!({"hook_event_name": "UserPromptSubmit", "session_id": "cap-1", "cwd": "/w/app",
            "prompt": "what does this closure capture"})
        .to_string()
        .into_bytes(),
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("mneme-capabilities"));

    // Retrieval keeps the registry across a restart.
    app.stop_services().await;
    app.start_services_core(crate::harness::retrieval_args())
        .await;
    let listed: proto::ListCapabilitiesReply = app
        .ask(
            subjects::CAPABILITIES_LIST,
            &proto::ListCapabilitiesRequest {
                all: true,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(listed.capabilities.len(), 5);
    assert_eq!(
        matched(&app, "ship it to staging please", "/w/app")
            .await
            .first()
            .map(String::as_str),
        Some("deploy-staging")
    );
    app.stop_services().await;
}

/// `mneme capabilities` through the real binary: a scan of a home and a project (written to the
/// generated files and synced), list, match, add and remove, and a broken file reported with its
/// line while the rest keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_scans_lists_matches_adds_and_removes() {
    let mut app = App::start_core().await;
    let home = tempfile::tempdir().unwrap();
    let skill = home.path().join(".claude/skills/db-migrate");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: db-migrate\ndescription: Write and apply a Postgres schema migration\n---\nSteps...\n",
    )
    .unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("Makefile"),
        ".PHONY: test\ntest: ## Run the whole test suite, unit and integration\n\tcargo nextest run\n",
    )
    .unwrap();
    let project_dir = std::fs::canonicalize(project.path()).unwrap();
    let project_arg = project_dir.display().to_string();
    let run = |args: &[&str]| {
        let output = std::process::Command::new(crate::harness::binary("mneme"))
            .arg("capabilities")
            .args(args)
            .envs(app.env())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join(".config"))
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(&["scan", "--project", &project_arg]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("synced with retrieval"), "{out}");
    assert!(
        project_dir
            .join(".mneme/capabilities.generated.yaml")
            .is_file()
    );
    assert!(
        app.home
            .path()
            .join("capabilities.generated.yaml")
            .is_file()
    );
    // A second scan finds the same and writes nothing.
    let (_, again, _) = run(&["scan", "--project", &project_arg]);
    assert!(
        again.contains("(unchanged)") && !again.contains("(written)"),
        "{again}"
    );

    let (ok, listed, _) = run(&["list", "--project", &project_arg, "--json"]);
    assert!(ok);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let ids: Vec<&str> = listed["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"make:test") && ids.iter().any(|id| id.contains("db-migrate")),
        "{ids:?}"
    );

    let (ok, found, err) = run(&[
        "match",
        "run the whole test suite",
        "--project",
        &project_arg,
        "--json",
    ]);
    assert!(ok, "{err}");
    let found: Value = serde_json::from_str(&found).unwrap();
    assert_eq!(found[0]["id"], "make:test", "{found}");
    let (ok, none, _) = run(&[
        "match",
        "what does this closure capture",
        "--project",
        &project_arg,
        "--json",
    ]);
    assert!(ok);
    assert_eq!(serde_json::from_str::<Value>(&none).unwrap(), json!([]));

    // Add and remove in the project's hand-written file, synced each time.
    let (ok, out, err) = run(&[
        "add",
        "--project",
        &project_arg,
        "--id",
        "deploy-staging",
        "--name",
        "deploy to staging",
        "--category",
        "deploy",
        "--kind",
        "command",
        "--description",
        "Deploy the current branch to the staging environment",
        "--invoke",
        "/deploy-staging",
        "--when",
        "ship this to staging",
    ]);
    assert!(ok, "{out}{err}");
    let (_, found, _) = run(&[
        "match",
        "ship it to staging",
        "--project",
        &project_arg,
        "--json",
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&found).unwrap()[0]["id"],
        "deploy-staging"
    );
    let (ok, _, err) = run(&["remove", "--project", &project_arg, "deploy-staging"]);
    assert!(ok, "{err}");
    let (_, found, _) = run(&[
        "match",
        "ship it to staging",
        "--project",
        &project_arg,
        "--json",
    ]);
    assert!(!found.contains("deploy-staging"), "{found}");

    // A broken entry is reported with its file, line and field; the rest still loads.
    let hand = project_dir.join(".mneme/capabilities.yaml");
    std::fs::write(
        &hand,
        "capabilities:\n  - id: broken\n    name: broken\n    category: x\n    kind: task\n    description: d\n    when: 5\n    invoke: make broken\n",
    )
    .unwrap();
    let (ok, listed, err) = run(&["list", "--project", &project_arg]);
    assert!(ok);
    assert!(
        err.contains("capabilities.yaml:2") && err.contains("when"),
        "{err}"
    );
    assert!(listed.contains("make:test"), "{listed}");
    app.stop_services().await;
}

/// REST: what retrieval holds and what a prompt would get, with the api's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_lists_and_matches_capabilities() {
    let mut app = App::start_core().await;
    let base = app.start_api(api::ApiArgs::default()).await;
    assert_eq!(sync(&app, "", registry()).await.capabilities, 4);
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let response = http.get(url).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, listed) = get("/v1/capabilities".to_owned()).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["capabilities"].as_array().unwrap().len(), 4);
    let (status, found) = get(
        "/v1/capabilities/match?prompt=ship%20it%20to%20staging%20please&project=/w/app".to_owned(),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["matches"][0]["id"], "deploy-staging", "{found}");
    assert_eq!(found["matches"][0]["scope"], "user");
    let (status, none) =
        get("/v1/capabilities/match?prompt=explain%20this%20regex".to_owned()).await;
    assert_eq!(
        (status, none["matches"].as_array().unwrap().len()),
        (200, 0),
        "{none}"
    );
    let (status, error) = get("/v1/capabilities/match".to_owned()).await;
    assert_eq!(
        (status, error["error"]["code"].as_str()),
        (400, Some("missing_parameter")),
        "{error}"
    );
    let (status, _) = get("/v1/capabilities/match?prompt=x&strategy=sideways".to_owned()).await;
    assert_eq!(status, 400);
    app.stop_services().await;
}

/// `mneme up` rescans the user's registry once it is ready: a skill installed since the last
/// scan reaches retrieval's matching without anyone running `mneme capabilities scan`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mneme_up_rescans_the_users_capabilities_when_it_starts() {
    let home = tempfile::tempdir().unwrap();
    let mneme_home = tempfile::tempdir().unwrap();
    let skill = home.path().join(".claude/skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Draft the release notes from the merged pull requests\n---\nSteps...\n",
    )
    .unwrap();
    let free = crate::harness::free_port;
    let port = free();
    let mut up = std::process::Command::new(crate::harness::binary("mneme"))
        .arg("up")
        .env_remove("MNEME_NATS_URL")
        .env("MNEME_HOME", mneme_home.path())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("MNEME_NATS_PORT", port.to_string())
        .env("MNEME_API_ADDR", format!("127.0.0.1:{}", free()))
        .env("MNEME_EMBED_MODEL_DIR", crate::harness::model_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(mneme_home.path().join("up.log")).unwrap())
        .spawn()
        .unwrap();
    let lines = crate::harness::stdout_until(&mut up, "mneme is ready", Duration::from_secs(120));
    assert!(
        lines.iter().any(|l| l.starts_with("mneme is ready")),
        "{lines:?}"
    );
    let mut common = common::CommonArgs::from_env();
    common.nats_url = format!("nats://127.0.0.1:{port}");
    common.home = Some(mneme_home.path().to_owned());
    common.nats_keys = None;
    common.nats_token = None;
    common.nats_nkey = None;
    common.nats_creds = None;
    let client = common::nats::connect(&common, "test", Duration::from_secs(10))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut ids: Vec<String> = Vec::new();
    while std::time::Instant::now() < deadline && !ids.iter().any(|id| id.contains("release-notes"))
    {
        if let Ok(reply) = common::nats::request::<proto::ListCapabilitiesReply>(
            &client,
            subjects::CAPABILITIES_LIST,
            &proto::ListCapabilitiesRequest {
                all: true,
                ..Default::default()
            },
            Duration::from_secs(5),
        )
        .await
        {
            ids = reply
                .capabilities
                .iter()
                .filter_map(|m| m.capability.as_ref().map(|c| c.id.clone()))
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = up.kill();
    let _ = up.wait();
    assert!(
        ids.iter().any(|id| id.contains("release-notes")),
        "retrieval holds {ids:?}"
    );
}
