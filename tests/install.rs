//! `mneme hooks install|uninstall|status` and `mneme mcp install|uninstall` for every host and
//! scope, through the real `mneme` binary on a temporary HOME: the user's own hooks, comments
//! and unrelated keys survive, installing twice equals once, uninstall restores the original
//! bytes, and a corrupt file is refused with a clear error and left untouched.

use crate::harness::binary;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Home {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn mneme(&self, args: &[&str]) -> Output {
        Command::new(binary("mneme"))
            .args(args)
            .env("HOME", self.home.path())
            .env("MNEME_HOME", self.home.path().join(".mneme"))
            .env("MNEME_HOOK_BIN", binary("mneme-hook"))
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("KIMI_CODE_HOME")
            .current_dir(self.project.path())
            .output()
            .unwrap()
    }

    fn base(&self, scope: &str) -> &Path {
        if scope == "user" {
            self.home.path()
        } else {
            self.project.path()
        }
    }
}

/// (agent, scope, file relative to HOME or the project, the user's own file before install).
fn cases() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let claude = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/usr/local/bin/guard.sh\"\n          }\n        ]\n      }\n    ]\n  },\n  \"permissions\": {\n    \"allow\": [\n      \"Bash(ls:*)\"\n    ]\n  }\n}\n";
    let cursor = "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [\n      {\n        \"command\": \"./hooks/format.sh\"\n      }\n    ],\n    \"stop\": [\n      {\n        \"command\": \"./audit.sh\",\n        \"loop_limit\": 10\n      }\n    ]\n  }\n}\n";
    let kiro = "{\n  \"name\": \"mneme\",\n  \"description\": \"my own agent\",\n  \"tools\": [\n    \"read\",\n    \"shell\"\n  ],\n  \"hooks\": {\n    \"postToolUse\": [\n      {\n        \"matcher\": \"shell\",\n        \"command\": \"notify-send done\"\n      }\n    ]\n  }\n}\n";
    let gemini = "{\n  \"theme\": \"GitHub\",\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\n        \"matcher\": \"run_shell_command\",\n        \"hooks\": [\n          {\n            \"name\": \"guard\",\n            \"type\": \"command\",\n            \"command\": \"/usr/local/bin/guard.sh\",\n            \"timeout\": 5000\n          }\n        ]\n      }\n    ]\n  },\n  \"mcpServers\": {\n    \"docs\": {\n      \"command\": \"docs-mcp\"\n    }\n  }\n}\n";
    let kimi = "# my kimi settings\ndefault_model = \"kimi-k2\"  # the fast one\n\n[providers.moonshot]\nbase_url = \"https://api.moonshot.cn/v1\"\n\n[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Bash\"\ncommand = \"/usr/local/bin/guard.sh\"\ntimeout = 5\n";
    vec![
        ("claude-code", "user", ".claude/settings.json", claude),
        ("claude-code", "project", ".claude/settings.json", claude),
        ("codex", "user", ".codex/hooks.json", claude),
        ("codex", "project", ".codex/hooks.json", claude),
        ("cursor", "user", ".cursor/hooks.json", cursor),
        ("cursor", "project", ".cursor/hooks.json", cursor),
        ("kiro", "user", ".kiro/agents/mneme.json", kiro),
        ("kiro", "project", ".kiro/agents/mneme.json", kiro),
        ("gemini", "user", ".gemini/settings.json", gemini),
        ("gemini", "project", ".gemini/settings.json", gemini),
        ("kimi", "user", ".kimi-code/config.toml", kimi),
    ]
}

/// Whether every line of `original` appears in `text`, in order.
fn keeps_lines_in_order(original: &str, text: &str) -> bool {
    let mut lines = text.lines();
    original
        .lines()
        .all(|wanted| lines.by_ref().any(|line| line == wanted))
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn hooks_install_for_every_host_and_scope_keeps_the_users_file() {
    for (agent, scope, file, original) in cases() {
        let home = Home::new();
        let path: PathBuf = home.base(scope).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, original).unwrap();
        let args = ["hooks", "install", "--agent", agent, "--scope", scope];
        let out = ok(&home.mneme(&args));
        assert!(out.contains("installed mneme"), "{agent} {scope}: {out}");
        let installed = std::fs::read_to_string(&path).unwrap();
        assert!(installed.contains("mneme-hook"), "{agent} {scope}");
        assert!(
            installed.contains(&format!("mneme-hook {agent}")),
            "{agent} {scope}: {installed}"
        );
        assert!(
            keeps_lines_in_order(original, &installed),
            "{agent} {scope}: the user's lines moved or changed:\n{installed}"
        );
        if agent == "kimi" {
            // Kimi rejects its whole config over a fifth key in a [[hooks]] table.
            let doc: toml_edit::DocumentMut = installed.parse().unwrap();
            for table in doc["hooks"].as_array_of_tables().unwrap().iter() {
                let keys: Vec<&str> = table.iter().map(|(k, _)| k).collect();
                assert!(
                    keys.iter()
                        .all(|k| ["event", "matcher", "command", "timeout"].contains(k)),
                    "{keys:?}"
                );
            }
        } else {
            let value: serde_json::Value = serde_json::from_str(&installed).unwrap();
            if agent == "cursor" {
                assert_eq!(value["version"], 1);
                let known = hosts::cursor::adapter::EVENTS;
                for event in value["hooks"].as_object().unwrap().keys() {
                    assert!(known.contains(&event.as_str()), "{event}");
                }
            }
        }
        // A backup of the user's file was made before it was changed.
        let backups = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains("mneme-backup"))
            .count();
        assert_eq!(backups, 1, "{agent} {scope}");

        let again = ok(&home.mneme(&args));
        assert!(
            again.contains("nothing changed"),
            "{agent} {scope}: {again}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), installed);

        let status = ok(&home.mneme(&["hooks", "status", "--agent", agent]));
        assert!(status.contains("never fired"), "{agent}: {status}");
        assert!(status.contains(path.to_str().unwrap()), "{agent}: {status}");

        ok(&home.mneme(&["hooks", "uninstall", "--agent", agent, "--scope", scope]));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original,
            "{agent} {scope}: uninstall must restore the original bytes"
        );
    }
}

#[test]
fn a_fresh_install_creates_the_file_and_uninstall_removes_it() {
    for (agent, scope, file, _) in cases() {
        let home = Home::new();
        let path = home.base(scope).join(file);
        ok(&home.mneme(&["hooks", "install", "--agent", agent, "--scope", scope]));
        assert!(path.is_file(), "{agent} {scope}");
        ok(&home.mneme(&["hooks", "uninstall", "--agent", agent, "--scope", scope]));
        assert!(!path.exists(), "{agent} {scope}: {path:?} left behind");
    }
}

#[test]
fn a_corrupt_file_is_refused_untouched() {
    for (agent, scope, file, _) in cases() {
        let home = Home::new();
        let path = home.base(scope).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let corrupt = if file.ends_with(".toml") {
            "[[hooks]\nevent = \"Stop\n"
        } else {
            "{\"hooks\": {\"Stop\": [ \n"
        };
        std::fs::write(&path, corrupt).unwrap();
        let output = home.mneme(&["hooks", "install", "--agent", agent, "--scope", scope]);
        assert!(!output.status.success(), "{agent} {scope}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("will not overwrite") && stderr.contains(path.to_str().unwrap()),
            "{agent} {scope}: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), corrupt);
        let files = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(
            files, 1,
            "{agent} {scope}: no backup or temporary file is left"
        );
    }
}

#[test]
fn kimi_has_no_project_hooks_and_gemini_offers_an_extension() {
    let home = Home::new();
    let output = home.mneme(&["hooks", "install", "--agent", "kimi", "--scope", "project"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no project-level hooks"));

    let out = ok(&home.mneme(&[
        "hooks",
        "install",
        "--agent",
        "gemini",
        "--form",
        "extension",
    ]));
    assert!(out.contains("installed"), "{out}");
    let dir = home.home.path().join(".gemini/extensions/mneme");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("gemini-extension.json")).unwrap()).unwrap();
    assert_eq!(manifest["name"], "mneme");
    let hooks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("hooks/hooks.json")).unwrap()).unwrap();
    assert_eq!(
        hooks["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"],
        10_000
    );
    let status = ok(&home.mneme(&["hooks", "status", "--agent", "gemini"]));
    assert!(status.contains("extension"), "{status}");
    ok(&home.mneme(&[
        "hooks",
        "uninstall",
        "--agent",
        "gemini",
        "--form",
        "extension",
    ]));
    assert!(!dir.exists());

    let out = ok(&home.mneme(&["hooks", "install", "--agent", "codex"]));
    assert!(
        out.contains("/hooks"),
        "codex install must say hooks need approval: {out}"
    );
}

#[test]
fn mcp_install_registers_mneme_mcp_for_every_host() {
    let cases = [
        ("claude-code", "user", ".claude.json"),
        ("claude-code", "project", ".mcp.json"),
        ("codex", "user", ".codex/config.toml"),
        ("codex", "project", ".codex/config.toml"),
        ("cursor", "user", ".cursor/mcp.json"),
        ("cursor", "project", ".cursor/mcp.json"),
        ("kimi", "user", ".kimi-code/mcp.json"),
        ("kimi", "project", ".kimi-code/mcp.json"),
        ("kiro", "user", ".kiro/settings/mcp.json"),
        ("kiro", "project", ".kiro/settings/mcp.json"),
        ("gemini", "user", ".gemini/settings.json"),
        ("gemini", "project", ".gemini/settings.json"),
    ];
    for (agent, scope, file) in cases {
        let home = Home::new();
        let path = home.base(scope).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = if file.ends_with(".toml") {
            "# codex settings\nmodel = \"gpt-5.5\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\" # keep\n"
        } else {
            "{\n  \"mcpServers\": {\n    \"docs\": {\n      \"command\": \"docs-mcp\"\n    }\n  },\n  \"theme\": \"dark\"\n}\n"
        };
        std::fs::write(&path, original).unwrap();
        let args = ["mcp", "install", "--agent", agent, "--scope", scope];
        ok(&home.mneme(&args));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            keeps_lines_in_order(original, &text),
            "{agent} {scope}:\n{text}"
        );
        let mneme = binary("mneme");
        if file.ends_with(".toml") {
            let doc: toml_edit::DocumentMut = text.parse().unwrap();
            let entry = &doc["mcp_servers"]["mneme"];
            assert_eq!(entry["command"].as_str(), mneme.to_str());
            let args = entry["args"].as_array().unwrap();
            assert_eq!(args.get(0).and_then(|v| v.as_str()), Some("mcp"));
        } else {
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                doc["mcpServers"]["mneme"]["command"].as_str(),
                mneme.to_str()
            );
            assert_eq!(doc["mcpServers"]["mneme"]["args"][0], "mcp");
        }
        let again = ok(&home.mneme(&args));
        assert!(again.contains("nothing changed"), "{again}");
        ok(&home.mneme(&["mcp", "uninstall", "--agent", agent, "--scope", scope]));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original,
            "{agent} {scope}"
        );
    }
}
