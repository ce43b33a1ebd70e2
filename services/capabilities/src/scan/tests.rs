//! The scanner over a home directory and a project holding every kind of source it reads.

use std::path::Path;

use super::*;

/// A value that must never reach the registry.
pub(crate) const SECRET: &str = "lin_api_Zq8vT3xK9mN2pR7sW4yB6cD1";

fn write(base: &Path, path: &str, text: &str) {
    let path = base.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every host file and build file the scanner reads, under `home` and `project`.
pub(crate) fn fixture(home: &Path, project: &Path) {
    write(
        home,
        ".claude/skills/db-migrate/SKILL.md",
        "---\nname: db-migrate\ndescription: Write and apply database migrations safely\ncategory: database\n---\n\n# Migrations\n",
    );
    write(
        home,
        ".claude/commands/deploy.md",
        "---\ndescription: Deploy the current branch to staging\n---\nDeploy $ARGUMENTS.\n",
    );
    write(
        home,
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews a diff for bugs: be thorough\ntools: Read, Grep\n---\nYou review code.\n",
    );
    write(
        home,
        ".claude.json",
        &format!(
            r#"{{"numStartups": 3,
               "mcpServers": {{"memory": {{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}},
               "projects": {{
                 "{}": {{"mcpServers": {{"sentry": {{"type": "http", "url": "https://user:{SECRET}@mcp.sentry.dev/mcp?key={SECRET}"}}}}}},
                 "/elsewhere": {{"mcpServers": {{"other": {{"command": "other"}}}}}}
               }}}}"#,
            project.display()
        ),
    );
    write(
        home,
        ".codex/prompts/explain.md",
        "\n# Explain the selected code step by step\n\nMore text.\n",
    );
    write(
        home,
        ".codex/config.toml",
        &format!(
            "model = \"o3\"\n\n[mcp_servers.github]\ncommand = \"github-mcp\"\nargs = [\"--token\", \"{SECRET}\", \"stdio\"]\n\n[mcp_servers.github.env]\nGITHUB_TOKEN = \"{SECRET}\"\n"
        ),
    );
    write(
        home,
        ".gemini/commands/summarize.toml",
        "description = \"Summarise the changes since main\"\nprompt = \"Summarise {{args}}\"\n",
    );
    write(
        home,
        ".kiro/agents/planner.json",
        r#"{"name": "planner", "description": "Plans a feature before any code is written", "tools": ["read"]}"#,
    );
    write(
        home,
        ".kimi-code/skills/notes/SKILL.md",
        "No front matter here.\n",
    );

    write(
        project,
        ".mcp.json",
        &format!(
            r#"{{"mcpServers": {{"linear": {{"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.linear.app/sse", "--api-key", "{SECRET}"], "env": {{"LINEAR_API_KEY": "{SECRET}"}}}}}}}}"#
        ),
    );
    write(
        project,
        ".claude/commands/release.md",
        "Cut a release: bump, tag, push.\n",
    );
    write(
        project,
        "Makefile",
        "\
.PHONY: test lint build
CC := gcc
VERSION = 1:2

# Build everything.
build: deps
\tcargo build

test: ## Run the whole test suite
\tcargo test

lint:
\tcargo clippy

%.o: %.c
\t$(CC) -c $<

$(OUT): build
\tcp a b

.hidden:
\ttrue

define RECIPE
inside: not a target
endef
",
    );
    write(
        project,
        "justfile",
        "\
set shell := [\"bash\", \"-c\"]
version := \"1\"

# Publish a release to crates.io.
release: test
    cargo publish

_private:
    echo hidden

serve port='8080':
    python -m http.server {{port}}
",
    );
    write(
        project,
        "package.json",
        &format!(
            r#"{{"name": "app", "scripts": {{"build": "vite build", "upload": "curl -H x --token {SECRET} https://x.dev"}}}}"#
        ),
    );
    write(
        project,
        ".cargo/config.toml",
        "[alias]\nxtask = \"run --package xtask --\"\nci = [\"test\", \"--workspace\"]\n",
    );
    write(
        project,
        "pyproject.toml",
        "\
[project]
name = \"app\"

[project.scripts]
serve = \"app.server:main\"

[tool.poetry.scripts]
migrate = \"app.db:migrate\"

[tool.pdm.scripts]
_ = { env_file = \".env\" }
fmt = \"ruff format .\"
check = { cmd = \"ruff check .\", help = \"Lint the Python code\" }
",
    );
    write(
        project,
        "Taskfile.yml",
        "\
version: '3'
tasks:
  lint:
    desc: Lint everything
    cmds: [golangci-lint run]
  setup:
    internal: true
    cmds: [echo]
  docs:
    cmds: [mkdocs build]
",
    );
}

fn ids(caps: &[Capability]) -> Vec<&str> {
    caps.iter().map(|cap| cap.id.as_str()).collect()
}

fn get<'a>(caps: &'a [Capability], id: &str) -> &'a Capability {
    caps.iter()
        .find(|cap| cap.id == id)
        .unwrap_or_else(|| panic!("{id} not found in {:?}", ids(caps)))
}

#[test]
fn a_scan_finds_every_kind_of_source_and_no_secret() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    fixture(home.path(), project.path());
    let scanned = scan(home.path(), Some(project.path()));

    assert_eq!(
        ids(&scanned.user),
        [
            "agent:planner",
            "agent:reviewer",
            "command:deploy",
            "command:explain",
            "command:summarize",
            "mcp:github",
            "mcp:memory",
            "skill:db-migrate",
            "skill:notes",
        ]
    );
    assert_eq!(
        ids(&scanned.project),
        [
            "cargo:ci",
            "cargo:xtask",
            "command:release",
            "just:release",
            "just:serve",
            "make:build",
            "make:lint",
            "make:test",
            "mcp:linear",
            "mcp:sentry",
            "npm:build",
            "npm:upload",
            "py:check",
            "py:fmt",
            "py:migrate",
            "py:serve",
            "task:docs",
            "task:lint",
        ]
    );

    let user = &scanned.user;
    let skill = get(user, "skill:db-migrate");
    assert_eq!(skill.kind, Kind::Skill);
    assert_eq!(skill.category, "database");
    assert_eq!(
        skill.description,
        "Write and apply database migrations safely"
    );
    assert_eq!(skill.source, "~/.claude/skills/db-migrate/SKILL.md");
    assert_eq!(skill.scope, Scope::User);
    assert_eq!(
        get(user, "skill:notes").description,
        "No front matter here."
    );
    let deploy = get(user, "command:deploy");
    assert_eq!(
        (deploy.name.as_str(), deploy.invoke.as_str()),
        ("/deploy", "/deploy")
    );
    assert_eq!(deploy.description, "Deploy the current branch to staging");
    assert_eq!(
        get(user, "command:explain").description,
        "Explain the selected code step by step"
    );
    assert_eq!(
        get(user, "command:summarize").description,
        "Summarise the changes since main"
    );
    assert_eq!(
        get(user, "agent:reviewer").description,
        "Reviews a diff for bugs: be thorough"
    );
    assert_eq!(
        get(user, "agent:planner").description,
        "Plans a feature before any code is written"
    );
    assert_eq!(get(user, "agent:planner").kind, Kind::Agent);
    let github = get(user, "mcp:github");
    assert_eq!(github.kind, Kind::McpServer);
    assert_eq!(github.invoke, "mcp server github");
    assert_eq!(
        github.description,
        "MCP server started as `github-mcp --token <secret> stdio`"
    );
    assert_eq!(github.source, "~/.codex/config.toml");
    assert_eq!(
        get(user, "mcp:memory").description,
        "MCP server started as `npx -y @modelcontextprotocol/server-memory`"
    );

    let project_scope = Scope::Project(project.path().to_string_lossy().into_owned());
    let tasks = &scanned.project;
    assert!(tasks.iter().all(|cap| cap.scope == project_scope));
    let test = get(tasks, "make:test");
    assert_eq!(
        (
            test.name.as_str(),
            test.invoke.as_str(),
            test.description.as_str()
        ),
        ("make test", "make test", "Run the whole test suite")
    );
    assert_eq!(
        (test.kind, test.category.as_str()),
        (Kind::Task, "project-tasks")
    );
    assert_eq!(get(tasks, "make:build").description, "Build everything.");
    assert_eq!(
        get(tasks, "make:lint").description,
        "The Makefile target `lint`"
    );
    assert_eq!(
        get(tasks, "just:release").description,
        "Publish a release to crates.io."
    );
    assert_eq!(get(tasks, "just:serve").invoke, "just serve");
    assert_eq!(get(tasks, "npm:build").invoke, "npm run build");
    assert_eq!(get(tasks, "npm:build").description, "vite build");
    assert_eq!(
        get(tasks, "npm:upload").description,
        "curl -H x --token <secret> https://x.dev"
    );
    assert_eq!(get(tasks, "cargo:xtask").invoke, "cargo xtask");
    assert_eq!(
        get(tasks, "cargo:xtask").description,
        "cargo run --package xtask --"
    );
    assert_eq!(get(tasks, "cargo:ci").description, "cargo test --workspace");
    assert_eq!(get(tasks, "py:serve").invoke, "serve");
    assert_eq!(get(tasks, "py:migrate").invoke, "poetry run migrate");
    assert_eq!(get(tasks, "py:check").description, "Lint the Python code");
    assert_eq!(get(tasks, "py:fmt").description, "ruff format .");
    assert_eq!(get(tasks, "task:lint").description, "Lint everything");
    assert_eq!(get(tasks, "task:lint").invoke, "task lint");
    assert_eq!(get(tasks, "command:release").invoke, "/release");
    let linear = get(tasks, "mcp:linear");
    assert_eq!(linear.source, ".mcp.json");
    assert_eq!(
        linear.description,
        "MCP server started as `npx -y mcp-remote https://mcp.linear.app/sse --api-key <secret>`"
    );
    let sentry = get(tasks, "mcp:sentry");
    assert_eq!(
        sentry.description,
        "MCP server at https://mcp.sentry.dev/mcp"
    );
    assert_eq!(sentry.source, "~/.claude.json (this project's mcpServers)");

    let categories: Vec<&str> = scanned.categories.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        categories,
        [
            "agents",
            "commands",
            "mcp-servers",
            "project-tasks",
            "skills"
        ]
    );

    // The secret is nowhere: not in what the scan returns, not in the files it writes.
    assert!(!format!("{scanned:?}").contains(SECRET));
    assert!(!format!("{scanned:?}").contains("lin_api"));
    let out = tempfile::tempdir().unwrap();
    for (name, caps) in [
        ("user.yaml", &scanned.user),
        ("project.yaml", &scanned.project),
    ] {
        let path = out.path().join(name);
        assert!(crate::write_generated(&path, caps).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(SECRET), "{text}");
    }
}

#[test]
fn without_a_project_only_the_users_places_are_scanned() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    fixture(home.path(), project.path());
    let scanned = scan(home.path(), None);
    assert!(scanned.project.is_empty());
    assert_eq!(scanned.user.len(), 9);
    assert!(scan(&project.path().join("nothing"), None).user.is_empty());
}

#[test]
fn long_descriptions_are_cut_and_names_that_make_no_id_are_skipped() {
    let home = tempfile::tempdir().unwrap();
    let long = "word ".repeat(200);
    write(
        home.path(),
        ".claude/commands/long.md",
        &format!("---\ndescription: {long}\n---\n"),
    );
    write(home.path(), ".claude/commands/¿¿.md", "Nothing.\n");
    let scanned = scan(home.path(), None);
    assert_eq!(ids(&scanned.user), ["command:long"]);
    let description = &scanned.user[0].description;
    assert_eq!(description.chars().count(), crate::MAX_DESCRIPTION);
    assert!(description.ends_with('…'));
}
